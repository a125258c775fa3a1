/* Shared by the asynchronous progress tests (progress_p2p, progress_coll,
   rma_passive_progress): a clock comparable between the processes of a run,
   computation that makes no MPI call, the thread level to ask for, and the
   time limits.

   Timestamps come from CLOCK_MONOTONIC, not from MPI_Wtime: MPI_Wtime need not
   be comparable between processes (MPI_WTIME_IS_GLOBAL may be false; Baton's
   counts from each process's first call), while CLOCK_MONOTONIC is one clock
   for the whole kernel. That covers the processes of one host and the
   namespace hosts of tests/hosts (network namespaces share the kernel and have
   no time namespace); on separate machines the tests' comparisons between a
   sender's and a receiver's timestamps would need synchronised clocks.

   Include it first: it asks for POSIX declarations (clock_gettime). */
#ifndef BATON_TESTS_PROGRESS_UTIL_H
#define BATON_TESTS_PROGRESS_UTIL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "check.h"

#include <stdint.h>
#include <time.h>

/* Seconds on the kernel's monotonic clock. */
static inline double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* TIMEOUT_SCALE as tests/run-c-tests reads it (at least 1): a slow or loaded
   machine gets proportionally longer limits. */
static inline double progress_scale(void)
{
    const char *s = getenv("TIMEOUT_SCALE");
    double v = s ? atof(s) : 1.0;
    return v > 1.0 ? v : 1.0;
}

/* Whether the run demands progress while the application computes: Baton's
   BATON_PROGRESS=thread forces a progress thread in every process. */
static inline int progress_demanded(void)
{
    const char *s = getenv("BATON_PROGRESS");
    return s && strcmp(s, "thread") == 0;
}

/* MPICH runs its progress thread (MPIR_CVAR_ASYNC_PROGRESS=1) only in an
   MPI_THREAD_MULTIPLE program, so that is asked for when that variable is
   set; otherwise the programs stay MPI_THREAD_SINGLE, as most applications
   are: a progress thread of the library must serve those too. */
static inline void progress_init(int *argc, char ***argv)
{
    const char *mpich = getenv("MPIR_CVAR_ASYNC_PROGRESS");
    int want = mpich && strcmp(mpich, "0") != 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE;
    int provided = -1;
    MPI_Init_thread(argc, argv, want, &provided);
    if (provided < want) {
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0)
            printf("# asked for thread level %d, got %d\n", want, provided);
    }
}

/* Keeps the computation's results alive, so that the compiler cannot drop it. */
static volatile uint64_t progress_sink;

/* One slice of computation in registers only: a generator step with a
   non-linear mix, which no compiler folds into a closed form. Roughly a
   fraction of a millisecond. */
static inline uint64_t progress_slice(uint64_t x)
{
    for (int k = 0; k < 100000; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        x ^= x >> 29;
    }
    return x;
}

/* Computes for `seconds` from `start` (a progress_now() value) without any
   MPI call; returns when the time is up. */
static inline void progress_compute_until(double start, double seconds)
{
    uint64_t x = (uint64_t)(start * 1e6) | 1u;
    while (progress_now() - start < seconds)
        x = progress_slice(x);
    progress_sink = x;
}

/* How long a rank computes before its one MPI_Test: a safe multiple of the
   time the same operation took with every rank inside MPI, and never less
   than half a second. On a loaded machine with as many ranks as cores the
   library's threads get only a share of a core while the ranks compute, so
   the margin is wide; a run that cannot finish in it has no progress. */
static inline double progress_safe_time(double measured)
{
    double t = 20.0 * measured;
    return t > 0.5 ? t : 0.5;
}

#endif
