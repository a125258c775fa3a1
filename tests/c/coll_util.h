/* Shared driver of the collective tests (tests/c/coll_*.c).

   - cu_run() runs one test case of one collective in every form: blocking,
     nonblocking (completed alternately with MPI_Wait, a MPI_Test polling
     loop that yields the processor between polls, and MPI_Waitany) and
     persistent (MPI-4: one _init, started three times with MPI_Start/
     MPI_Startall and changed buffer contents, then MPI_Request_free),
     optionally also the large-count (_c) forms. Every
     execution has its own "iteration" number, and the values sent depend on
     it, so stale data from an earlier execution is caught.
   - The payloads and their checks live beside it: integer payloads with
     derived datatypes in coll_payload.h, reduction kinds and their reference
     results in coll_reduction.h.
   - Failures are reported with the algorithm (BATON_COLL_* variables), the
     collective, the form, the communicator, the case, the iteration, the
     position, the expected and the received value. Errors are returned
     (MPI_ERRORS_RETURN), so an unsupported function is reported and the test
     goes on with the next form.

   With an MPI older than 4.0 (Open MPI 4.1) persistent and _c forms are
   skipped (a note is printed once). Standard MPI + C11 only.

   Baton's collective algorithms are forced with BATON_COLL_<NAME>=<algorithm>
   (tests/run-c-tests runs a test once per value of its "algorithms" header;
   the failure messages show the setting in brackets):
     BARRIER: dissemination, shm             BCAST: binomial, scatter_allgather, shm
     REDUCE: binomial, shm                   GATHER (and Gatherv): binomial, linear
     ALLREDUCE: recursive_doubling, rabenseifner, ring, reduce_bcast, shm
     SCATTER (and Scatterv): binomial, linear
     ALLGATHER: ring, bruck, recursive_doubling     ALLGATHERV: ring, linear
     ALLTOALL: pairwise, bruck, mesh, linear  ALLTOALLV (and Alltoallw): pairwise, linear
     REDUCE_SCATTER (both forms): reduce_scatterv, recursive_halving, pairwise
     SCAN (and Exscan): recursive_doubling, linear
   "auto" (listed first in each test) is Baton's own choice by size and count.
   An algorithm that cannot serve a case (a ring allreduce for a
   non-commutative op, shared memory for a large message) would silently fall
   back to one that can, so tests/run-c-tests also sets
   BATON_COLL_FALLBACK=error: the call then fails with a message naming
   BATON_COLL_FALLBACK. cu_ok recognizes that error for a collective whose
   algorithm is forced, and cu_run counts the case as "not applicable" (an
   error in some forms of a case and not in others is a failure); cu_finish
   prints how many cases ran the forced algorithm on two or more processes,
   how many were not applicable and how many were on one process (where every
   algorithm serves: none has anything to send), summed over the ranks, and
   fails a run of several processes in which no case ran it. Other MPIs never
   raise that error: every case runs. */
#ifndef BATON_TESTS_COLL_UTIL_H
#define BATON_TESTS_COLL_UTIL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include "check.h"
#include <stddef.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>

#if defined(MPI_VERSION) && MPI_VERSION >= 4
#define CU_MPI4 1
#else
#define CU_MPI4 0
#endif

/* -DSKIP_MPICH_402_BUGS / -DSKIP_OMPI_414_BUGS leave out the cases that
   those reference implementations get wrong (each test says which) */
#ifdef SKIP_MPICH_402_BUGS
#define MPICH_BUG(cond) (cond)
#else
#define MPICH_BUG(cond) 0
#endif
#ifdef SKIP_OMPI_414_BUGS
#define OMPI_BUG(cond) (cond)
#else
#define OMPI_BUG(cond) 0
#endif

extern char **environ;

/* ---------------------------------------------------------------- state */

static int cu_wrank, cu_wsize;          /* MPI_COMM_WORLD */
static MPI_Comm cu_comm;                /* communicator under test */
static int cu_rank, cu_size;            /* in cu_comm */
static const char *cu_cname = "?";      /* its name in messages */
static char cu_alg[256] = "default";    /* BATON_COLL_* settings */
static const char *cu_coll = "?";       /* collective, e.g. "Allreduce" */
static int cu_mode;                     /* form, see cu_mode_name */
static int cu_iter;                     /* execution number of the case */
static char cu_desc[256];               /* case description */
static int cu_printed;                  /* failure lines printed by this rank */
static long cu_execs;                   /* collective executions checked */
static int cu_any_forced;               /* some BATON_COLL_<NAME> forces an algorithm */
static int cu_case_na;                  /* the case hit BATON_COLL_FALLBACK=error */
/* cases with a forced algorithm: run on 2+ processes, not applicable, on one
   process (where every algorithm serves, having nothing to send) */
static long cu_forced_ran, cu_forced_na, cu_forced_one;
#define CU_MAX_PRINT 25

enum { CU_BLOCKING, CU_NONBLOCKING, CU_PERSISTENT, CU_BLOCKING_C, CU_NONBLOCKING_C,
       CU_PERSISTENT_C, CU_NMODES };
static const char *const cu_mode_names[CU_NMODES] = {
    "blocking", "nonblocking", "persistent", "blocking _c", "nonblocking _c", "persistent _c"};

#define CU_FAIL(...)                                                                          \
    do {                                                                                      \
        check_failures++;                                                                     \
        if (cu_printed < CU_MAX_PRINT) {                                                      \
            fprintf(stderr, "rank %d: FAIL [%s] %s %s on %s (size %d), %s, iteration %d: ",   \
                    cu_wrank, cu_alg, cu_coll, cu_mode_names[cu_mode], cu_cname, cu_size,     \
                    cu_desc, cu_iter);                                                        \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            fflush(stderr);                                                                   \
        } else if (cu_printed == CU_MAX_PRINT) {                                              \
            fprintf(stderr, "rank %d: (further failures of this rank are counted, not "       \
                            "printed)\n", cu_wrank);                                          \
        }                                                                                     \
        cu_printed++;                                                                         \
    } while (0)

static inline void *cu_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", cu_wrank, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* The name of the called function for the current collective and form,
   e.g. "MPI_Ibcast_c", "MPI_Allreduce_init". */
static inline const char *cu_fname(void)
{
    static char s[96];
    int m = cu_mode % 3;
    const char *c = cu_mode >= CU_BLOCKING_C ? "_c" : "";
    if (m == CU_NONBLOCKING) {
        char lower[64];
        snprintf(lower, sizeof lower, "%s", cu_coll);
        if (lower[0] >= 'A' && lower[0] <= 'Z')
            lower[0] = (char)(lower[0] - 'A' + 'a');
        snprintf(s, sizeof s, "MPI_I%s%s", lower, c);
    } else if (m == CU_PERSISTENT) {
        snprintf(s, sizeof s, "MPI_%s_init%s", cu_coll, c);
    } else {
        snprintf(s, sizeof s, "MPI_%s%s", cu_coll, c);
    }
    return s;
}

/* The BATON_COLL_<NAME> variable that chooses the algorithm of collective
   `coll` (as cu_run names it), or NULL. */
static inline const char *cu_algvar(const char *coll)
{
    static const char *const vars[][2] = {
        {"Barrier", "BARRIER"},       {"Bcast", "BCAST"},
        {"Reduce", "REDUCE"},         {"Allreduce", "ALLREDUCE"},
        {"Gather", "GATHER"},         {"Gatherv", "GATHER"},
        {"Scatter", "SCATTER"},       {"Scatterv", "SCATTER"},
        {"Allgather", "ALLGATHER"},   {"Allgatherv", "ALLGATHERV"},
        {"Alltoall", "ALLTOALL"},     {"Alltoallv", "ALLTOALLV"},
        {"Alltoallw", "ALLTOALLV"},   {"Reduce_scatter", "REDUCE_SCATTER"},
        {"Scan", "SCAN"},             {"Reduce_scatter_block", "REDUCE_SCATTER"},
        {"Exscan", "SCAN"},
    };
    static char name[64];
    for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++)
        if (strcmp(coll, vars[k][0]) == 0) {
            snprintf(name, sizeof name, "BATON_COLL_%s", vars[k][1]);
            return name;
        }
    return NULL;
}

/* Whether the current collective's algorithm is forced: its variable names
   one (not "auto"). */
static inline int cu_forced(void)
{
    const char *var = cu_algvar(cu_coll);
    const char *v = var ? getenv(var) : NULL;
    return v && *v && strcmp(v, "auto") != 0;
}

/* functions that raised MPI_ERR_UNSUPPORTED_OPERATION: reported once each */
#define CU_MAXUNSUP 64
static char cu_unsup[CU_MAXUNSUP][48];
static long cu_unsup_n[CU_MAXUNSUP];
static int cu_nunsup;

/* Report a non-success return code; returns 1 when rc is MPI_SUCCESS. */
static inline int cu_ok(int rc, const char *fn)
{
    if (rc == MPI_SUCCESS)
        return 1;
    char s[MPI_MAX_ERROR_STRING];
    int len = 0, cls = -1;
    s[0] = '\0';
    MPI_Error_string(rc, s, &len);
    MPI_Error_class(rc, &cls);
    if (strstr(s, "BATON_COLL_FALLBACK") && cu_forced()) {
        cu_case_na = 1; /* the forced algorithm cannot serve this case */
        return 0;
    }
    if (cls == MPI_ERR_UNSUPPORTED_OPERATION) {
        for (int k = 0; k < cu_nunsup; k++)
            if (strcmp(cu_unsup[k], fn) == 0) {
                cu_unsup_n[k]++;
                check_failures++; /* counted, printed once */
                return 0;
            }
        if (cu_nunsup < CU_MAXUNSUP) {
            snprintf(cu_unsup[cu_nunsup], sizeof cu_unsup[0], "%s", fn);
            cu_unsup_n[cu_nunsup++] = 1;
        }
        CU_FAIL("%s is not supported (%s); further calls are counted, not printed", fn, s);
        return 0;
    }
    CU_FAIL("%s returned %d (class %d): %s", fn, rc, cls, s);
    return 0;
}

static inline void cu_set_comm(MPI_Comm c, const char *name)
{
    cu_comm = c;
    cu_cname = name;
    MPI_Comm_rank(c, &cu_rank);
    MPI_Comm_size(c, &cu_size);
}

/* MPI_Init, errors returned, algorithm string from the environment. */
static inline void cu_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &cu_wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &cu_wsize);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    size_t len = 0;
    cu_alg[0] = '\0';
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "BATON_COLL_", 11) != 0)
            continue;
        if (len + strlen(*e) + 2 < sizeof cu_alg)
            len += (size_t)snprintf(cu_alg + len, sizeof cu_alg - len, "%s%s", len ? " " : "",
                                    *e + 11);
        const char *v = strchr(*e, '=');
        if (strncmp(*e, "BATON_COLL_FALLBACK=", 20) != 0 && v && v[1] && strcmp(v + 1, "auto"))
            cu_any_forced = 1;
    }
    if (!len)
        snprintf(cu_alg, sizeof cu_alg, "default");
    cu_set_comm(MPI_COMM_WORLD, "WORLD");
    if (!CU_MPI4 && cu_wrank == 0)
        printf("note: MPI_VERSION < 4: persistent and large-count (_c) forms not tested\n");
}

/* A communicator whose ranks differ from world ranks: world ranks with
   wrank % 3 != 1, in reverse order (or all of them when that leaves fewer
   than 2), plus the remaining ones (in order) as another group. */
static inline MPI_Comm cu_split_comm(const char **name)
{
    MPI_Comm c;
    int color = (cu_wsize >= 3 && cu_wrank % 3 == 1) ? 1 : 0;
    int key = color ? cu_wrank : cu_wsize - cu_wrank;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c));
    *name = color ? "split(wrank%3==1)" : "split(reversed)";
    return c;
}

/* ---------------------------------------------------------- the driver */

typedef struct {
    /* fill send buffers and receive buffers (sentinels) for iteration `iter` */
    void (*fill)(void *st, int iter);
    /* issue the collective in form `mode` (CU_*): blocking forms run it,
       nonblocking forms store the request, persistent forms only initialise */
    int (*call)(void *st, int mode, MPI_Request *req);
    /* check the receive buffers (and untouched send buffers) */
    void (*check)(void *st, int iter);
} cu_ops;

/* cu_run flags */
#define CU_WITH_C 1          /* also the _c forms */
#define CU_NO_PERSISTENT 2   /* not the persistent forms (reference MPI bugs) */
#define CU_NO_NONBLOCKING 4  /* not the nonblocking forms (reference MPI bugs) */

static inline double cu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Complete *req; the way depends on the iteration. Returns 0 on error. */
static inline int cu_complete(MPI_Request *req, int iter)
{
    MPI_Status st;
    int flag = 0, idx = -1, rc = MPI_SUCCESS;
    switch (iter % 3) {
    case 0:
        rc = MPI_Wait(req, &st);
        return cu_ok(rc, "MPI_Wait");
    case 1: {
        double t0 = cu_now();
        long polls = 0;
        while (!flag) {
            rc = MPI_Test(req, &flag, &st);
            if (!cu_ok(rc, "MPI_Test"))
                return 0;
            polls++;
            /* give the processor away between polls, as a program that
               computes between tests would: with more ranks than cores a
               pure polling loop starves the ranks it waits for (whatever
               the MPI does in MPI_Test; coll_stress polls without this) */
            if (!flag)
                sched_yield();
            if (!flag && cu_now() - t0 > 60.0) {
                CU_FAIL("MPI_Test polling: not complete after 60 s (%ld polls)", polls);
                return 0;
            }
        }
        return 1;
    }
    default:
        rc = MPI_Waitany(1, req, &idx, &st);
        if (!cu_ok(rc, "MPI_Waitany"))
            return 0;
        if (idx != 0)
            CU_FAIL("MPI_Waitany returned index %d, expected 0", idx);
        return 1;
    }
}

/* the slowest forms of the run, printed by cu_finish when the environment
   has COLL_TEST_PROFILE set (for tuning the tests and the engine) */
#define CU_NSLOW 8
static struct {
    double t;
    char what[400];
} cu_slow[CU_NSLOW];

static inline void cu_note_time(double t)
{
    int k = CU_NSLOW - 1;
    if (t <= cu_slow[k].t)
        return;
    while (k > 0 && cu_slow[k - 1].t < t) {
        cu_slow[k] = cu_slow[k - 1];
        k--;
    }
    cu_slow[k].t = t;
    snprintf(cu_slow[k].what, sizeof cu_slow[k].what, "%s %s on %s, %s", cu_coll,
             cu_mode_names[cu_mode], cu_cname, cu_desc);
}

/* Run one case in every form. `coll` is the collective's name as in
   "MPI_<coll>" (e.g. "Bcast"). */
static inline void cu_run(const char *coll, void *st, const cu_ops *ops, int flags)
{
    cu_coll = coll;
    cu_case_na = 0;
    int ran = 0; /* some form was called without an error */
    int last = (CU_MPI4 && (flags & CU_WITH_C)) ? CU_PERSISTENT_C : CU_PERSISTENT;
    int iter = 0;
    double t_form = cu_now();
    for (int mode = CU_BLOCKING; mode <= last; mode++) {
        if (mode > CU_BLOCKING)
            cu_note_time(cu_now() - t_form);
        t_form = cu_now();
        cu_mode = mode;
        int form = mode % 3;
        if (form == CU_PERSISTENT && (!CU_MPI4 || (flags & CU_NO_PERSISTENT))) {
            iter += 3;
            continue;
        }
        if (form == CU_NONBLOCKING && (flags & CU_NO_NONBLOCKING)) {
            iter++;
            continue;
        }
        MPI_Request req = MPI_REQUEST_NULL;
        if (form != CU_PERSISTENT) {
            cu_iter = iter;
            ops->fill(st, iter);
            int rc = ops->call(st, mode, form == CU_NONBLOCKING ? &req : NULL);
            if (cu_ok(rc, cu_fname())) {
                ran = 1;
                int done = 1;
                if (form == CU_NONBLOCKING) {
                    done = cu_complete(&req, iter);
                    if (done && req != MPI_REQUEST_NULL)
                        CU_FAIL("request not MPI_REQUEST_NULL after completion");
                }
                if (done) {
                    ops->check(st, iter);
                    cu_execs++;
                }
            }
            iter++;
            continue;
        }
        cu_iter = iter;
        ops->fill(st, iter); /* buffers exist before the init call */
        int rc = ops->call(st, mode, &req);
        if (!cu_ok(rc, cu_fname())) {
            iter += 3;
            continue;
        }
        ran = 1;
        int dead = 0;
        for (int k = 0; k < 3; k++, iter++) {
            cu_iter = iter;
            if (dead)
                continue;
            ops->fill(st, iter);
            rc = (k == 1) ? MPI_Startall(1, &req) : MPI_Start(&req);
            if (!cu_ok(rc, k == 1 ? "MPI_Startall" : "MPI_Start") || !cu_complete(&req, iter)) {
                dead = 1;
                continue;
            }
            if (req == MPI_REQUEST_NULL) {
                CU_FAIL("persistent request became MPI_REQUEST_NULL after completion");
                dead = 1;
                continue;
            }
            ops->check(st, iter);
            cu_execs++;
            if (k == 2) { /* an inactive persistent request tests as complete */
                int flag = 0;
                if (cu_ok(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test (inactive)") &&
                    !flag)
                    CU_FAIL("MPI_Test on the inactive persistent request gave flag 0");
            }
        }
        if (req != MPI_REQUEST_NULL) {
            if (cu_ok(MPI_Request_free(&req), "MPI_Request_free") && req != MPI_REQUEST_NULL)
                CU_FAIL("MPI_Request_free left the handle non-null");
        }
    }
    cu_note_time(cu_now() - t_form);
    if (cu_forced()) {
        if (cu_case_na && ran)
            CU_FAIL("BATON_COLL_FALLBACK=error refused some forms of this case, not others");
        else if (cu_case_na)
            cu_forced_na++;
        else if (ran && cu_size > 1)
            cu_forced_ran++;
        else if (ran)
            cu_forced_one++;
    }
}

/* ------------------------------------------------- case parameters */

/* most processes (blocks of a buffer, per-rank counts) a case handles */
#define CU_MAXP 64

/* guard elements on each side of a receive buffer (ints of payload buffers,
   elements of reduction buffers) */
#define CU_NG 8

/* counts (in units) of v-variants: zero for every third rank, otherwise
   growing with the rank; all zero when c is 0 */
static inline size_t cu_vcount(size_t c, int i)
{
    if (c == 0 || i % 3 == 1)
        return 0;
    return c + 2 * (size_t)i;
}

/* Roots of a rooted case: the first, middle and last rank take turns (two
   per case, chosen by `salt`), or every rank of a communicator of one or two.
   Returns how many. */
static inline int cu_roots(int salt, int *roots)
{
    if (cu_size <= 2) {
        for (int r = 0; r < cu_size; r++)
            roots[r] = r;
        return cu_size;
    }
    const int cand[3] = {0, cu_size / 2, cu_size - 1};
    roots[0] = cand[salt % 3];
    roots[1] = cand[(salt + 1) % 3];
    return 2;
}

/* ------------------------------------------------------------ finish */

static inline int cu_finish(const char *name)
{
    long mine[4] = {cu_execs, cu_forced_ran, cu_forced_na, cu_forced_one}, total[4] = {0};
    /* executions and cases per rank, summed with point-to-point (see check_collect) */
    if (cu_wrank == 0) {
        for (int p = 0; p < cu_wsize; p++) {
            long v[4] = {mine[0], mine[1], mine[2], mine[3]};
            if (p > 0)
                MPI_Recv(v, 4, MPI_LONG, p, CHECK_TAG_COLLECT + 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            for (int k = 0; k < 4; k++)
                total[k] += v[k];
        }
        printf("%s [%s]: %ld checked collective executions on %d ranks\n", name, cu_alg,
               total[0], cu_wsize);
        const char *policy = getenv("BATON_COLL_FALLBACK");
        if (cu_any_forced && !(policy && strcmp(policy, "error") == 0)) {
            printf("%s: note: without BATON_COLL_FALLBACK=error the cases a forced algorithm "
                   "cannot serve run another one unnoticed\n", name);
        } else if (cu_any_forced) {
            printf("%s [%s]: %ld cases ran the forced algorithm, %ld were not applicable, %ld "
                   "were on one process (summed over ranks)\n",
                   name, cu_alg, total[1], total[2], total[3]);
            if (total[1] == 0 && cu_wsize > 1) {
                printf("FAIL %s [%s]: no case ran the forced algorithm\n", name, cu_alg);
                check_failures++;
            }
        }
        for (int k = 0; k < cu_nunsup; k++)
            printf("%s: rank 0: %s unsupported (%ld calls)\n", name, cu_unsup[k], cu_unsup_n[k]);
        if (getenv("COLL_TEST_PROFILE"))
            for (int k = 0; k < CU_NSLOW && cu_slow[k].t > 0; k++)
                printf("%s: rank 0: slow: %.3f s %s\n", name, cu_slow[k].t, cu_slow[k].what);
        fflush(stdout);
    } else {
        MPI_Send(mine, 4, MPI_LONG, 0, CHECK_TAG_COLLECT + 1, MPI_COMM_WORLD);
    }
    return check_finish(name);
}

#endif
