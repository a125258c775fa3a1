/* Helpers of the one-sided (rma_*.c) tests: windows of either flavour that the
   synchronisation tests run every case on, and a time limit for polling loops.
   Standard MPI + C11 only.

   MPICH 4.0.2 (Debian, ch4:ucx) sends every Put/Get on a window made by
   MPI_Win_allocate to rank 0's memory instead of the target's (its
   MPI_WIN_BASE attribute is rank 0's segment on every rank): with
   -DSKIP_MPICH_402_BUGS the tests leave the MPI_Win_allocate flavour out.
   Open MPI 4.1.4 (Debian) fails most window creations on a one-process
   communicator with MPI_ERR_WIN (its osc/rdma component is chosen and
   refuses): with -DSKIP_OMPI_414_BUGS the tests print SKIP on one process. */
#ifndef BATON_TESTS_RMA_UTIL_H
#define BATON_TESTS_RMA_UTIL_H

#include "check.h"

/* How a test window gets its memory: user memory from MPI_Alloc_mem given to
   MPI_Win_create, or memory the implementation allocates (MPI_Win_allocate),
   which an implementation may place in shared memory. */
enum { RMA_FLAVOR_CREATE = 0, RMA_FLAVOR_ALLOCATE = 1, RMA_NFLAVORS = 2 };

static inline const char *rma_flavor_name(int flavor)
{
    return flavor == RMA_FLAVOR_CREATE ? "Win_create" : "Win_allocate";
}

/* Whether the flavour runs under the implementation being tested. */
static inline int rma_flavor_enabled(int flavor)
{
#ifdef SKIP_MPICH_402_BUGS
    return flavor != RMA_FLAVOR_ALLOCATE;
#else
    (void)flavor;
    return 1;
#endif
}

/* Under -DSKIP_OMPI_414_BUGS on one process: print SKIP, finalize and return
   1 (the caller's main returns 0). */
static inline int rma_skip_single_process(const char *name)
{
#ifdef SKIP_OMPI_414_BUGS
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n == 1) {
        printf("SKIP %s: Open MPI 4.1.4 cannot create a window on one process\n", name);
        MPI_Finalize();
        return 1;
    }
#else
    (void)name;
#endif
    return 0;
}

/* Make a window of `bytes` bytes on `comm`; *base receives its memory. */
static inline void rma_win_make(int flavor, MPI_Aint bytes, int disp_unit, MPI_Comm comm,
                                void *base, MPI_Win *win)
{
    void **basep = (void **)base;
    if (flavor == RMA_FLAVOR_CREATE) {
        void *mem = NULL;
        CHECK_MPI(MPI_Alloc_mem(bytes > 0 ? bytes : 1, MPI_INFO_NULL, &mem));
        CHECK_MPI(MPI_Win_create(mem, bytes, disp_unit, MPI_INFO_NULL, comm, win));
        *basep = mem;
    } else {
        CHECK_MPI(MPI_Win_allocate(bytes, disp_unit, MPI_INFO_NULL, comm, basep, win));
    }
}

/* Free a window made by rma_win_make (and its memory for the create flavour). */
static inline void rma_win_release(int flavor, void *base, MPI_Win *win)
{
    CHECK_MPI(MPI_Win_free(win));
    CHECK(*win == MPI_WIN_NULL, "MPI_Win_free did not set the handle to MPI_WIN_NULL");
    if (flavor == RMA_FLAVOR_CREATE)
        CHECK_MPI(MPI_Free_mem(base));
}

/* Polling loops give up after this many seconds, so that a lost update fails
   the test instead of hanging it. */
#define RMA_POLL_LIMIT_S 10.0

/* A distinct value per (origin, target, index, round), so that a misplaced or
   stale element shows up as a wrong value. */
static inline int rma_value(int origin, int target, int i, int round)
{
    return origin * 1000003 + target * 10007 + i * 7 + round * 3 + 1;
}

#endif
