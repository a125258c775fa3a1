/* Shared helpers of the collective tests (tests/c/coll_*.c).

   - cu_run() runs one test case of one collective in every form: blocking,
     nonblocking (completed alternately with MPI_Wait, a MPI_Test polling
     loop that yields the processor between polls, and MPI_Waitany) and
     persistent (MPI-4: one _init, started three times with MPI_Start/
     MPI_Startall and changed buffer contents, then MPI_Request_free),
     optionally also the large-count (_c) forms. Every
     execution has its own "iteration" number, and the values sent depend on
     it, so stale data from an earlier execution is caught.
   - Integer payloads with derived datatypes ("layouts"): each element of a
     layout carries `ipe` ints at known positions; everything else in a
     receive buffer (gaps inside and between elements, guard ints around the
     buffer) must keep the sentinel value.
   - Reduction kinds (type + op) with inputs computed from (rank, index,
     iteration) and expected results folded by a loop in rank order.
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

/* ------------------------------------------- integer payload, layouts */

#define CU_NG 8                          /* guard ints on each side */
#define CU_SENT ((int)0xDEADBEEFu)       /* sentinel: never a payload value */

/* payload value: src rank (5 bits), block (5 bits), index (18 bits),
   iteration (4 bits); iterations stay < 13 so no value equals CU_SENT */
static inline int cu_val(int src, int blk, int j, int iter)
{
    uint32_t v = ((uint32_t)iter << 28) | ((uint32_t)(src & 31) << 23) |
                 ((uint32_t)(blk & 31) << 18) | ((uint32_t)j & 0x3ffffu);
    return (int)v;
}

static inline const char *cu_vstr(int v, char *s, size_t n)
{
    if (v == CU_SENT) {
        snprintf(s, n, "sentinel (not written)");
    } else {
        uint32_t u = (uint32_t)v;
        snprintf(s, n, "%d = val(src %u, block %u, index %u, iteration %u)", v,
                 (u >> 23) & 31u, (u >> 18) & 31u, u & 0x3ffffu, u >> 28);
    }
    return s;
}

typedef struct {
    const char *name;
    MPI_Datatype type;
    int ipe;    /* ints of the type signature per element */
    int ext;    /* extent in ints */
    int off[4]; /* positions of those ints in an element, in ints */
} cu_layout;

enum { CU_L_INT, CU_L_VEC, CU_L_STRUCT, CU_L_QUAD, CU_NLAYOUTS };
static cu_layout cu_lay[CU_NLAYOUTS];

/* pairs of (sender layout, receiver layout) with the same type signature */
typedef struct {
    int s, r;
    const char *name;
} cu_pair;
static const cu_pair cu_pairs[] = {
    {CU_L_INT, CU_L_INT, "MPI_INT"},
    {CU_L_VEC, CU_L_VEC, "vector"},
    {CU_L_STRUCT, CU_L_STRUCT, "resized struct"},
    {CU_L_INT, CU_L_VEC, "MPI_INT to vector"},
    {CU_L_STRUCT, CU_L_QUAD, "resized struct to contiguous(4)"},
};
#define CU_NPAIRS ((int)(sizeof cu_pairs / sizeof cu_pairs[0]))

static inline void cu_make_layouts(void)
{
    MPI_Datatype t;
    cu_lay[CU_L_INT] = (cu_layout){"MPI_INT", MPI_INT, 1, 1, {0}};
    /* vector: 2 blocks of 1 int, stride 3 ints, extent stretched to 5 ints */
    CHECK_MPI(MPI_Type_vector(2, 1, 3, MPI_INT, &t));
    CHECK_MPI(MPI_Type_create_resized(t, 0, 5 * (MPI_Aint)sizeof(int), &cu_lay[CU_L_VEC].type));
    MPI_Type_free(&t);
    cu_lay[CU_L_VEC].name = "vector(2,1,3)+resized(0,20)";
    cu_lay[CU_L_VEC].ipe = 2;
    cu_lay[CU_L_VEC].ext = 5;
    cu_lay[CU_L_VEC].off[0] = 0;
    cu_lay[CU_L_VEC].off[1] = 3;
    /* struct: ints at bytes 16 and 4 (type map out of address order),
       resized to [0, 24) */
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {4 * (MPI_Aint)sizeof(int), 1 * (MPI_Aint)sizeof(int)};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};
    CHECK_MPI(MPI_Type_create_struct(2, bl, disp, types, &t));
    CHECK_MPI(
        MPI_Type_create_resized(t, 0, 6 * (MPI_Aint)sizeof(int), &cu_lay[CU_L_STRUCT].type));
    MPI_Type_free(&t);
    cu_lay[CU_L_STRUCT].name = "struct{int@16,int@4}+resized(0,24)";
    cu_lay[CU_L_STRUCT].ipe = 2;
    cu_lay[CU_L_STRUCT].ext = 6;
    cu_lay[CU_L_STRUCT].off[0] = 4;
    cu_lay[CU_L_STRUCT].off[1] = 1;
    CHECK_MPI(MPI_Type_contiguous(4, MPI_INT, &cu_lay[CU_L_QUAD].type));
    cu_lay[CU_L_QUAD].name = "contiguous(4,MPI_INT)";
    cu_lay[CU_L_QUAD].ipe = 4;
    cu_lay[CU_L_QUAD].ext = 4;
    for (int k = 0; k < 4; k++)
        cu_lay[CU_L_QUAD].off[k] = k;
    for (int l = 1; l < CU_NLAYOUTS; l++)
        CHECK_MPI(MPI_Type_commit(&cu_lay[l].type));
}

static inline void cu_free_layouts(void)
{
    for (int l = 1; l < CU_NLAYOUTS; l++)
        MPI_Type_free(&cu_lay[l].type);
}

/* ints per unit of a pair: the least common multiple of both ipe */
static inline int cu_unit(const cu_pair *p)
{
    int a = cu_lay[p->s].ipe, b = cu_lay[p->r].ipe;
    int m = a > b ? a : b;
    while (m % a || m % b)
        m++;
    return m;
}

/* position (in ints) of signature int j of a sequence starting at element e0 */
static inline size_t cu_pos(const cu_layout *l, size_t e0, size_t j)
{
    return (e0 + j / (size_t)l->ipe) * (size_t)l->ext + (size_t)l->off[j % (size_t)l->ipe];
}

/* an int buffer of n ints with CU_NG guard ints on each side */
typedef struct {
    int *p;
    size_t n;
} cu_buf;

static inline void cu_buf_alloc(cu_buf *b, size_t n)
{
    int *q = cu_xmalloc((n + 2 * CU_NG) * sizeof(int));
    b->p = q + CU_NG;
    b->n = n;
}

static inline void cu_buf_free(cu_buf *b)
{
    if (b->p)
        free(b->p - CU_NG);
    b->p = NULL;
}

static inline void cu_buf_sentinel(cu_buf *b)
{
    for (size_t k = 0; k < b->n + 2 * CU_NG; k++)
        b->p[(ptrdiff_t)k - CU_NG] = CU_SENT;
}

/* an expected image of b: all sentinels */
static inline int *cu_expect_new(const cu_buf *b)
{
    int *e = cu_xmalloc(b->n * sizeof(int));
    for (size_t k = 0; k < b->n; k++)
        e[k] = CU_SENT;
    return e;
}

/* Compare b (and its guards) with the expected image; report the first
   mismatch and how many there are. Frees exp. */
static inline void cu_expect_check(const char *what, const cu_buf *b, int *exp)
{
    size_t bad = 0, first = 0;
    ptrdiff_t n = (ptrdiff_t)b->n;
    for (ptrdiff_t k = -CU_NG; k < n + CU_NG; k++) {
        int want = (k < 0 || k >= n) ? CU_SENT : exp[k];
        if (b->p[k] != want) {
            if (!bad)
                first = (size_t)(k + CU_NG);
            bad++;
        }
    }
    if (bad) {
        ptrdiff_t k = (ptrdiff_t)first - CU_NG;
        int want = (k < 0 || k >= n) ? CU_SENT : exp[k];
        char s1[128], s2[128];
        CU_FAIL("%s: %zu wrong int(s); first at int %td of %td%s: expected %s, got %s", what, bad,
                k, n, (k < 0 || k >= n) ? " (guard outside the buffer)" : "",
                cu_vstr(want, s1, sizeof s1), cu_vstr(b->p[k], s2, sizeof s2));
    }
    free(exp);
}

/* write `nints` payload ints val(src, blk, j0 + j, iter) into b with layout l,
   starting at element e0 */
static inline void cu_put(int *p, const cu_layout *l, size_t e0, size_t nints, int src, int blk,
                   int iter)
{
    for (size_t j = 0; j < nints; j++)
        p[cu_pos(l, e0, j)] = cu_val(src, blk, (int)j, iter);
}

/* Blocks of payload in one buffer (gather/scatter/all-to-all buffers):
   block b holds nints[b] ints with layout lay[b], starting at int offset
   off[b]; cnt[b] is its count in elements of that layout, disp[b] its
   displacement in elements (single-layout buffers) and wdisp[b] in bytes. */
#define CU_MAXP 64
typedef struct {
    int n;
    int lay[CU_MAXP];
    size_t nints[CU_MAXP];
    size_t off[CU_MAXP];
    int cnt[CU_MAXP];
    int disp[CU_MAXP];
    int wdisp[CU_MAXP];      /* displacement in bytes (Alltoallw) */
    MPI_Aint bdisp[CU_MAXP]; /* the same for the _c form */
    MPI_Count ccnt[CU_MAXP]; /* cnt and disp for the _c forms */
    MPI_Aint cdisp[CU_MAXP];
    size_t len; /* ints the buffer needs */
} cu_blocks;

enum { CU_PACKED, CU_FORWARD_GAPS, CU_REVERSE_GAPS };

/* Lay out n blocks. `lays` gives each block's layout (NULL: all `lay`).
   CU_PACKED: blocks back to back in rank order (all the same size, the
   fixed-size collectives); CU_FORWARD_GAPS / CU_REVERSE_GAPS: in rank order
   or reversed, with a gap of two elements (or 3 ints with per-block
   layouts) before each block. */
static inline void cu_blocks_make(cu_blocks *B, int n, const size_t *nints, int lay,
                                  const int *lays, int arrangement)
{
    if (n > CU_MAXP) {
        fprintf(stderr, "too many blocks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    B->n = n;
    size_t cur = 0;
    for (int k = 0; k < n; k++) {
        int b = arrangement == CU_REVERSE_GAPS ? n - 1 - k : k;
        const cu_layout *l = &cu_lay[lays ? lays[b] : lay];
        B->lay[b] = lays ? lays[b] : lay;
        B->nints[b] = nints[b];
        B->cnt[b] = (int)(nints[b] / (size_t)l->ipe);
        if (arrangement != CU_PACKED)
            cur += lays ? 3 : 2 * (size_t)l->ext;
        B->off[b] = cur;
        B->disp[b] = (int)(cur / (size_t)l->ext);
        B->wdisp[b] = (int)(cur * sizeof(int));
        B->bdisp[b] = (MPI_Aint)(cur * sizeof(int));
        B->ccnt[b] = B->cnt[b];
        B->cdisp[b] = B->disp[b];
        cur += (size_t)B->cnt[b] * (size_t)l->ext;
    }
    B->len = cur + (arrangement != CU_PACKED ? 2 : 0);
}

/* write block b's payload val(src, blk, j, iter) into p */
static inline void cu_blocks_put(int *p, const cu_blocks *B, int b, int src, int blk, int iter)
{
    cu_put(p + B->off[b], &cu_lay[B->lay[b]], 0, B->nints[b], src, blk, iter);
}

/* counts (in units) of v-variants: zero for every third rank, otherwise
   growing with the rank; all zero when c is 0 */
static inline size_t cu_vcount(size_t c, int i)
{
    if (c == 0 || i % 3 == 1)
        return 0;
    return c + 2 * (size_t)i;
}

/* The (layout pair, count) grid of the data-movement tests. On
   MPI_COMM_WORLD: counts 0, 1, 7, 1000 units with MPI_INT and the vector
   type, 1, 7, 1000 with the other pairs, and one large count (`big_int`
   units of MPI_INT, or `big_vec` units of the vector pair when `alt` is
   odd); on other communicators (full = 0): 7 and 1000 units with MPI_INT and
   with the struct-to-contiguous(4) pair. Returns the number of cells. */
typedef struct {
    int pair;
    size_t count;
    int big;
} cu_cell;

static inline int cu_grid(int full, int alt, size_t big_int, size_t big_vec, cu_cell *out)
{
    int n = 0;
    if (!full) {
        const int pairs[2] = {0, CU_NPAIRS - 1};
        for (int k = 0; k < 2; k++) {
            out[n++] = (cu_cell){pairs[k], 7, 0};
            out[n++] = (cu_cell){pairs[k], 1000, 0};
        }
        return n;
    }
    const size_t counts[4] = {0, 1, 7, 1000};
    for (int p = 0; p < CU_NPAIRS; p++)
        for (int k = p < 2 ? 0 : 1; k < 4; k++)
            out[n++] = (cu_cell){p, counts[k], 0};
    out[n++] = alt % 2 ? (cu_cell){1, big_vec, 1} : (cu_cell){0, big_int, 1};
    return n;
}
#define CU_MAXCELLS 32

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

/* ------------------------------------------------------ reductions */

enum {
    CU_R_INT_SUM, CU_R_INT_MAX, CU_R_INT_MIN, CU_R_INT_PROD,
    CU_R_DBL_SUM, CU_R_DBL_MAX, CU_R_DBL_MIN, CU_R_DBL_PROD,
    CU_R_UNS_BAND, CU_R_DINT_MINLOC,
    CU_R_USER_STRUCT, /* user op (commutative) on a resized struct type */
    CU_R_USER_MAT,    /* user op (non-commutative): 2x2 matrix product */
    CU_NRKINDS
};

typedef struct {
    double d;
    int i;
} cu_dint;

/* elements of the user struct type: a and b are the type map, hole and
   tail are gaps */
typedef struct {
    int a;
    int hole;
    double b;
    double tail;
} cu_ustruct;

typedef struct {
    unsigned m[4]; /* row-major 2x2 */
} cu_umat;

typedef struct {
    const char *name;
    MPI_Datatype type;
    MPI_Op op;
    size_t esize; /* extent in bytes */
    int commutative;
} cu_rkind;

static cu_rkind cu_rk[CU_NRKINDS];
static MPI_Datatype cu_ustruct_type = MPI_DATATYPE_NULL, cu_umat_type = MPI_DATATYPE_NULL;
static MPI_Op cu_ustruct_op = MPI_OP_NULL, cu_umat_op = MPI_OP_NULL;
static long cu_user_calls; /* calls of the user functions on this rank */

static inline void cu_umat_mul(const cu_umat *x, const cu_umat *y, cu_umat *out)
{
    cu_umat r;
    r.m[0] = x->m[0] * y->m[0] + x->m[1] * y->m[2];
    r.m[1] = x->m[0] * y->m[1] + x->m[1] * y->m[3];
    r.m[2] = x->m[2] * y->m[0] + x->m[3] * y->m[2];
    r.m[3] = x->m[2] * y->m[1] + x->m[3] * y->m[3];
    *out = r;
}

static inline void cu_ustruct_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    cu_user_calls++;
    cu_ustruct *a = in, *b = inout;
    for (int k = 0; k < *len; k++) {
        b[k].a = (int)((unsigned)a[k].a + (unsigned)b[k].a);
        b[k].b = a[k].b > b[k].b ? a[k].b : b[k].b;
    }
}

/* inout = in * inout: MPI passes the lower ranks' operand as `in` */
static inline void cu_umat_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    cu_user_calls++;
    cu_umat *a = in, *b = inout;
    for (int k = 0; k < *len; k++)
        cu_umat_mul(&a[k], &b[k], &b[k]);
}

static inline void cu_make_rkinds(void)
{
    static const struct {
        const char *name;
        MPI_Datatype t;
        MPI_Op op;
        size_t es;
    } pre[] = {
        {"MPI_INT MPI_SUM", MPI_INT, MPI_SUM, sizeof(int)},
        {"MPI_INT MPI_MAX", MPI_INT, MPI_MAX, sizeof(int)},
        {"MPI_INT MPI_MIN", MPI_INT, MPI_MIN, sizeof(int)},
        {"MPI_INT MPI_PROD", MPI_INT, MPI_PROD, sizeof(int)},
        {"MPI_DOUBLE MPI_SUM", MPI_DOUBLE, MPI_SUM, sizeof(double)},
        {"MPI_DOUBLE MPI_MAX", MPI_DOUBLE, MPI_MAX, sizeof(double)},
        {"MPI_DOUBLE MPI_MIN", MPI_DOUBLE, MPI_MIN, sizeof(double)},
        {"MPI_DOUBLE MPI_PROD", MPI_DOUBLE, MPI_PROD, sizeof(double)},
        {"MPI_UNSIGNED MPI_BAND", MPI_UNSIGNED, MPI_BAND, sizeof(unsigned)},
        {"MPI_DOUBLE_INT MPI_MINLOC", MPI_DOUBLE_INT, MPI_MINLOC, sizeof(cu_dint)},
    };
    for (int k = 0; k < CU_R_USER_STRUCT; k++)
        cu_rk[k] = (cu_rkind){pre[k].name, pre[k].t, pre[k].op, pre[k].es, 1};

    /* struct {int a @0; double b @8}, resized to 24 bytes */
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, 8};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, t;
    CHECK_MPI(MPI_Type_create_struct(2, bl, disp, types, &t));
    CHECK_MPI(MPI_Type_create_resized(t, 0, (MPI_Aint)sizeof(cu_ustruct), &cu_ustruct_type));
    MPI_Type_free(&t);
    CHECK_MPI(MPI_Type_commit(&cu_ustruct_type));
    CHECK_MPI(MPI_Type_contiguous(4, MPI_UNSIGNED, &cu_umat_type));
    CHECK_MPI(MPI_Type_commit(&cu_umat_type));
    cu_coll = "(set-up)";
    snprintf(cu_desc, sizeof cu_desc, "user-defined ops");
    int rc1 = MPI_Op_create(cu_ustruct_fn, 1, &cu_ustruct_op);
    int rc2 = MPI_Op_create(cu_umat_fn, 0, &cu_umat_op);
    if (rc1 != MPI_SUCCESS || rc2 != MPI_SUCCESS) {
        cu_ok(rc1 != MPI_SUCCESS ? rc1 : rc2, "MPI_Op_create (the user-op cases are skipped)");
        cu_ustruct_op = cu_umat_op = MPI_OP_NULL;
    }
    cu_rk[CU_R_USER_STRUCT] = (cu_rkind){"user op (sum, max) on struct{int,double}+resized(0,24)",
                                         cu_ustruct_type, cu_ustruct_op, sizeof(cu_ustruct), 1};
    cu_rk[CU_R_USER_MAT] = (cu_rkind){"user op (non-commutative 2x2 matrix product) on "
                                      "contiguous(4,MPI_UNSIGNED)",
                                      cu_umat_type, cu_umat_op, sizeof(cu_umat), 0};
}

static inline void cu_free_rkinds(void)
{
    if (cu_ustruct_op != MPI_OP_NULL)
        MPI_Op_free(&cu_ustruct_op);
    if (cu_umat_op != MPI_OP_NULL)
        MPI_Op_free(&cu_umat_op);
    MPI_Type_free(&cu_ustruct_type);
    MPI_Type_free(&cu_umat_type);
}

/* is kind k usable (user ops exist)? */
static inline int cu_rk_ok(int k)
{
    return cu_rk[k].op != MPI_OP_NULL;
}

#if defined(__GNUC__)
#define CU_INLINE static inline __attribute__((always_inline))
#else
#define CU_INLINE static inline
#endif

/* input element of rank r at index j, iteration it: small values (sums
   and products stay exact), a rank-dependent part with ties for MINLOC, and
   a slowly growing index part so that shifted elements differ */
CU_INLINE void cu_rin(int k, int r, long jl, int it, void *e)
{
    unsigned j = (unsigned)jl, ur = (unsigned)r, ui = (unsigned)it;
    unsigned s = ur * 7u + j * 3u + ui * 5u;
    int hi = (int)(j >> 7);
    switch (k) {
    case CU_R_INT_SUM:
        *(int *)e = (int)(s & 127u) - 64 + hi;
        break;
    case CU_R_INT_MAX:
    case CU_R_INT_MIN:
        *(int *)e = (int)((ur * 37u + j * 11u + ui * 13u) & 255u) - 128 + 3 * hi;
        break;
    case CU_R_INT_PROD:
    case CU_R_DBL_PROD: {
        /* 1, -1 or 2: products stay small and exact */
        int v = (s & 3u) == 0 ? 2 : (((ur + j + ui) & 4u) ? -1 : 1);
        if (k == CU_R_INT_PROD)
            *(int *)e = v;
        else
            *(double *)e = (double)v;
        break;
    }
    case CU_R_DBL_SUM:
        *(double *)e = (double)((int)(s & 127u) - 64 + hi) + 0.5;
        break;
    case CU_R_DBL_MAX:
    case CU_R_DBL_MIN:
        *(double *)e = (double)((int)((ur * 37u + j * 11u + ui * 13u) & 255u) - 128) * 0.25 + hi;
        break;
    case CU_R_UNS_BAND:
        *(unsigned *)e = ~(1u << ((ur * 5u + j + ui) & 31u)) & ~(j & 0xff00u);
        break;
    case CU_R_DINT_MINLOC: {
        cu_dint *d = e;
        d->d = (double)((ur * 3u + j + ui) & 3u) + hi; /* ties between ranks */
        d->i = 1000 - 10 * r + (int)(j & 7u);
        break;
    }
    case CU_R_USER_STRUCT: {
        cu_ustruct *u = e;
        u->a = (int)(s & 1023u) - 512 + hi;
        u->b = (double)((ur * 13u + j * 7u + ui) & 127u) - 40.5 + hi;
        break;
    }
    case CU_R_USER_MAT: {
        cu_umat *m = e;
        m->m[0] = 1u + ((ur + j) & 3u);
        m->m[1] = ur + 1u + ui;
        m->m[2] = j & 0xffffu;
        m->m[3] = 1u + ((ur + ui) & 1u);
        break;
    }
    }
}

/* acc = acc op x (acc from lower ranks) */
CU_INLINE void cu_rfold(int k, void *acc, const void *x)
{
    switch (k) {
    case CU_R_INT_SUM:
        *(int *)acc += *(const int *)x;
        break;
    case CU_R_INT_MAX:
        if (*(const int *)x > *(int *)acc)
            *(int *)acc = *(const int *)x;
        break;
    case CU_R_INT_MIN:
        if (*(const int *)x < *(int *)acc)
            *(int *)acc = *(const int *)x;
        break;
    case CU_R_INT_PROD:
        *(int *)acc *= *(const int *)x;
        break;
    case CU_R_DBL_SUM:
        *(double *)acc += *(const double *)x;
        break;
    case CU_R_DBL_MAX:
        if (*(const double *)x > *(double *)acc)
            *(double *)acc = *(const double *)x;
        break;
    case CU_R_DBL_MIN:
        if (*(const double *)x < *(double *)acc)
            *(double *)acc = *(const double *)x;
        break;
    case CU_R_DBL_PROD:
        *(double *)acc *= *(const double *)x;
        break;
    case CU_R_UNS_BAND:
        *(unsigned *)acc &= *(const unsigned *)x;
        break;
    case CU_R_DINT_MINLOC: {
        cu_dint *a = acc;
        const cu_dint *b = x;
        if (b->d < a->d || (b->d == a->d && b->i < a->i))
            *a = *b;
        break;
    }
    case CU_R_USER_STRUCT: {
        cu_ustruct *a = acc;
        const cu_ustruct *b = x;
        a->a += b->a;
        if (b->b > a->b)
            a->b = b->b;
        break;
    }
    case CU_R_USER_MAT:
        cu_umat_mul(acc, x, acc);
        break;
    }
}

static inline int cu_req(int k, const void *a, const void *b)
{
    switch (k) {
    case CU_R_DBL_SUM:
    case CU_R_DBL_MAX:
    case CU_R_DBL_MIN:
    case CU_R_DBL_PROD:
        return *(const double *)a == *(const double *)b;
    case CU_R_DINT_MINLOC:
        return ((const cu_dint *)a)->d == ((const cu_dint *)b)->d &&
               ((const cu_dint *)a)->i == ((const cu_dint *)b)->i;
    case CU_R_USER_STRUCT:
        return ((const cu_ustruct *)a)->a == ((const cu_ustruct *)b)->a &&
               ((const cu_ustruct *)a)->b == ((const cu_ustruct *)b)->b;
    case CU_R_USER_MAT:
        return memcmp(a, b, sizeof(cu_umat)) == 0;
    default:
        return memcmp(a, b, cu_rk[k].esize) == 0;
    }
}

static inline const char *cu_rstr(int k, const void *e, char *s, size_t n)
{
    switch (k) {
    case CU_R_INT_SUM:
    case CU_R_INT_MAX:
    case CU_R_INT_MIN:
    case CU_R_INT_PROD:
        snprintf(s, n, "%d", *(const int *)e);
        break;
    case CU_R_UNS_BAND:
        snprintf(s, n, "0x%08x", *(const unsigned *)e);
        break;
    case CU_R_DBL_SUM:
    case CU_R_DBL_MAX:
    case CU_R_DBL_MIN:
    case CU_R_DBL_PROD:
        snprintf(s, n, "%.17g", *(const double *)e);
        break;
    case CU_R_DINT_MINLOC:
        snprintf(s, n, "{%.17g, %d}", ((const cu_dint *)e)->d, ((const cu_dint *)e)->i);
        break;
    case CU_R_USER_STRUCT:
        snprintf(s, n, "{a %d, b %.17g}", ((const cu_ustruct *)e)->a, ((const cu_ustruct *)e)->b);
        break;
    case CU_R_USER_MAT: {
        const unsigned *m = ((const cu_umat *)e)->m;
        snprintf(s, n, "[[%u, %u], [%u, %u]]", m[0], m[1], m[2], m[3]);
        break;
    }
    }
    return s;
}

/* bytes of an element that are not part of the type map (must stay as the
   fill byte in receive buffers) */
static inline int cu_rgap(int k, size_t byte)
{
    if (k == CU_R_USER_STRUCT)
        return (byte >= 4 && byte < 8) || byte >= 16;
    if (k == CU_R_DINT_MINLOC)
        return byte >= 12;
    return 0;
}

#define CU_FILLB 0xA5 /* fill byte of reduction receive buffers */

/* a reduction buffer: n elements of kind k with CU_NG guard elements */
typedef struct {
    unsigned char *p;
    size_t n;
    int k;
} cu_rbuf;

static inline void cu_rbuf_alloc(cu_rbuf *b, int k, size_t n)
{
    size_t es = cu_rk[k].esize;
    unsigned char *q = cu_xmalloc((n + 2 * CU_NG) * es);
    b->p = q + CU_NG * es;
    b->n = n;
    b->k = k;
}

static inline void cu_rbuf_free(cu_rbuf *b)
{
    if (b->p)
        free(b->p - CU_NG * cu_rk[b->k].esize);
    b->p = NULL;
}

static inline void *cu_rel(const cu_rbuf *b, size_t i)
{
    return b->p + i * cu_rk[b->k].esize;
}

static inline void cu_rbuf_clear(cu_rbuf *b)
{
    size_t es = cu_rk[b->k].esize;
    memset(b->p - CU_NG * es, CU_FILLB, (b->n + 2 * CU_NG) * es);
}

/* inputs of rank r, elements [0, n) with index offset j0 */
static inline void cu_rbuf_input(cu_rbuf *b, int r, long j0, size_t n, int it)
{
    for (size_t i = 0; i < n; i++)
        cu_rin(b->k, r, j0 + (long)i, it, cu_rel(b, i));
}

/* check guards, and gap bytes of elements [0, n) */
static inline void cu_rbuf_check_untouched(const char *what, const cu_rbuf *b, size_t upto)
{
    size_t es = cu_rk[b->k].esize;
    const unsigned char *lo = b->p - CU_NG * es, *hi = b->p + b->n * es;
    for (size_t q = 0; q < CU_NG * es; q++)
        if (lo[q] != CU_FILLB || hi[q] != CU_FILLB) {
            CU_FAIL("%s: guard bytes around the buffer were overwritten (%s, byte %zu)", what,
                    lo[q] != CU_FILLB ? "before" : "after", q);
            return;
        }
    int gaps[32], ng = 0;
    for (size_t q = 0; q < es && q < 32; q++)
        if (cu_rgap(b->k, q))
            gaps[ng++] = (int)q;
    for (size_t i = 0; i < upto && ng; i++)
        for (int g = 0; g < ng; g++) {
            size_t q = (size_t)gaps[g];
            if (b->p[i * es + q] != CU_FILLB) {
                CU_FAIL("%s: element %zu: byte %zu (not in the type map) was overwritten "
                        "(0x%02x)",
                        what, i, q, b->p[i * es + q]);
                return;
            }
        }
}

/* out[i] = input of rank r at index j0 + i (one loop per kind, so that the
   per-element code is specialised) */
#define CU_RIN_CASE(K)                                                                        \
    case K:                                                                                   \
        for (size_t i = 0; i < n; i++)                                                        \
            cu_rin(K, r, j0 + (long)i, it, o + i * es);                                       \
        break;
#define CU_RFOLD_CASE(K)                                                                      \
    case K:                                                                                   \
        for (size_t i = 0; i < n; i++)                                                        \
            cu_rfold(K, a + i * es, x + i * es);                                              \
        break;
#define CU_ALL_KINDS(M)                                                                       \
    M(CU_R_INT_SUM) M(CU_R_INT_MAX) M(CU_R_INT_MIN) M(CU_R_INT_PROD) M(CU_R_DBL_SUM)          \
    M(CU_R_DBL_MAX) M(CU_R_DBL_MIN) M(CU_R_DBL_PROD) M(CU_R_UNS_BAND) M(CU_R_DINT_MINLOC)     \
    M(CU_R_USER_STRUCT) M(CU_R_USER_MAT)

static inline void cu_rin_vec(int k, int r, long j0, size_t n, int it, void *out)
{
    size_t es = cu_rk[k].esize;
    unsigned char *o = out;
    switch (k) { CU_ALL_KINDS(CU_RIN_CASE) }
}

static inline void cu_rfold_vec(int k, void *acc, const void *xs, size_t n)
{
    size_t es = cu_rk[k].esize;
    unsigned char *a = acc;
    const unsigned char *x = xs;
    switch (k) { CU_ALL_KINDS(CU_RFOLD_CASE) }
}

/* elements [0, n) of b must be the reduction over ranks lo..hi of inputs
   with index offset j0 (the expected vector is folded rank by rank) */
static inline void cu_rbuf_check(const char *what, const cu_rbuf *b, size_t n, long j0, int lo,
                                 int hi, int it)
{
    static unsigned char *want, *tmp; /* scratch, grown as needed */
    static size_t cap;
    size_t es = cu_rk[b->k].esize;
    if (n * es > cap) {
        free(want);
        free(tmp);
        cap = n * es;
        want = cu_xmalloc(cap);
        tmp = cu_xmalloc(cap);
    }
    cu_rin_vec(b->k, lo, j0, n, it, want);
    for (int r = lo + 1; r <= hi; r++) {
        cu_rin_vec(b->k, r, j0, n, it, tmp);
        cu_rfold_vec(b->k, want, tmp, n);
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!cu_req(b->k, cu_rel(b, i), want + i * es)) {
            if (!bad)
                first = i;
            bad++;
        }
    if (bad) {
        char s1[160], s2[160];
        CU_FAIL("%s: %zu wrong element(s) of %zu; first at %zu: expected %s (ranks %d..%d), "
                "got %s",
                what, bad, n, first, cu_rstr(b->k, want + first * es, s1, sizeof s1), lo, hi,
                cu_rstr(b->k, cu_rel(b, first), s2, sizeof s2));
    }
}

/* The (kind, length) grid of the reduction tests. On MPI_COMM_WORLD
   (full = 1): every kind at lengths 1, 7 and 1000, some also at 0, and
   MPI_INT SUM (with and without MPI_IN_PLACE), MINLOC (in place) and the
   non-commutative user op (not in place) at `big`; elsewhere a few kinds
   (the non-commutative one among them) at 7 and 1000. `inplace` is a mask:
   1 without MPI_IN_PLACE, 2 with it. Kinds whose user op could not be
   created are left out. */
typedef struct {
    int kind;
    size_t len;
    int inplace;
} cu_rcell;
#define CU_MAXRCELLS 48

static inline int cu_rgrid(int full, size_t big, cu_rcell *out)
{
    int n = 0;
    if (!full) {
        const int kinds[4] = {CU_R_INT_SUM, CU_R_DBL_MAX, CU_R_DINT_MINLOC, CU_R_USER_MAT};
        for (int i = 0; i < 4; i++)
            if (cu_rk_ok(kinds[i])) {
                out[n++] = (cu_rcell){kinds[i], 7, 3};
                out[n++] = (cu_rcell){kinds[i], 1000, 3};
            }
        return n;
    }
    for (int k = 0; k < CU_NRKINDS; k++) {
        if (!cu_rk_ok(k))
            continue;
        if (k == CU_R_INT_SUM || k == CU_R_DINT_MINLOC || k == CU_R_USER_STRUCT)
            out[n++] = (cu_rcell){k, 0, 3};
        out[n++] = (cu_rcell){k, 1, 3};
        out[n++] = (cu_rcell){k, 7, 3};
        out[n++] = (cu_rcell){k, 1000, 3};
        if (k == CU_R_INT_SUM)
            out[n++] = (cu_rcell){k, big, 3};
        if (k == CU_R_DINT_MINLOC)
            out[n++] = (cu_rcell){k, big, 2};
        if (k == CU_R_USER_MAT)
            out[n++] = (cu_rcell){k, big, 1};
    }
    return n;
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
