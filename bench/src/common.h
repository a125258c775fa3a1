/* Baton benchmark suite: shared helpers (plain MPI, C11). */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* realpath, posix_memalign, sched_* */
#endif

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_SIZES 64
#define MAX_SAMPLES 4096

typedef struct {
    int quick, smoke;
    size_t sizes[MAX_SIZES];
    int nsizes;            /* 0: benchmark default range */
    double budget_s;       /* wall-time budget per measured point */
    int min_samples, max_samples;
    int warmup;            /* warm-up iterations per point */
    double batch_us;       /* target duration of one timed batch */
    double stable_tol;     /* relative tolerance on the median */
    int window;            /* messages in flight for bandwidth tests */
    const char *is_classes;
    const char *children;  /* spawn: child counts, comma list */
} opts_t;

typedef struct {
    double min_us, median_us, mean_us;
    int samples;
    long iters;
    int stable;
} stat_t;

/* A timed kernel: run n iterations numbered first..first+n-1; return the
 * elapsed seconds on this rank.  full != 0 asks for full data validation. */
typedef double (*kernel_fn)(void *ctx, long first, int n, int full);

extern opts_t g_opt;
extern int g_rank, g_size;

void opts_parse(int argc, char **argv, int first);
void opts_sizes(size_t lo, size_t hi, size_t *out, int *nout);

/* Repeats batches of the kernel until the median is stable, the budget is
 * spent or max_samples is reached.  comm: the processes taking part (all
 * of them must call); MPI_COMM_NULL for a purely local measurement.  The
 * per-iteration time of a batch is the maximum over the ranks. */
stat_t measure(MPI_Comm comm, kernel_fn fn, void *ctx);

double median_of(const double *v, int n);

/* Data patterns: a byte depending on (seed, index). */
void fill(void *buf, size_t n, uint64_t seed);
int check(const void *buf, size_t n, uint64_t seed, const char *what);
/* Cheap per-iteration stamp: first and last 8 bytes (all bytes if < 16). */
void stamp(void *buf, size_t n, uint64_t seed);
int check_stamp(const void *buf, size_t n, uint64_t seed, const char *what);
uint64_t seed_of(long iter, int rank, int slot);

void *xmalloc(size_t n);
void waitall(int n, MPI_Request *req);
void fail(const char *fmt, ...);

/* One JSON line on stdout.  extra: preformatted ",\"k\":v..." or "". */
void emit(const char *bench, size_t size, int ranks, const stat_t *s,
          double mbps, const char *extra);
void emit_error(const char *bench, const char *msg);

/* Benchmarks (each called by every rank of MPI_COMM_WORLD). */
int bench_pingpong(void);
int bench_bw(void);
int bench_bibw(void);
int bench_mbw_mr(void);
int bench_token(void);
int bench_coll(const char *name);
int bench_topo(const char *name);
int bench_overlap(const char *name);
int bench_spawn(const char *name, const char *self);
int spawn_child(int argc, char **argv);
int bench_is(void);
int bench_ddt(const char *name);
/* One-sided: rma.c (put/get), rma_atomic.c, rma_halo.c; name starts "rma_". */
int bench_rma(const char *name);
int bench_rma_atomic(const char *name);
int bench_rma_halo(void);

/* A window made for a benchmark.  user_mem: base came from xmalloc
 * (MPI_Win_create) and is freed with the window. */
typedef struct {
    MPI_Win win;
    void *base;
    int user_mem;
} rma_win_t;

enum { RMA_ALLOCATE, RMA_CREATE, RMA_SHARED };

/* Creates a window of `bytes` (rounded up to whole cache lines) on comm
 * (collective).  If the MPI refuses on any rank, prints an error line for
 * `bench` naming the call and the MPI's message, frees what the other ranks
 * got, and returns nonzero on every rank, so that the job goes on with its
 * next benchmark. */
int rma_win_make(MPI_Comm comm, int flavor, size_t bytes, int disp_unit, rma_win_t *w, const char *bench);
void rma_win_free(rma_win_t *w);

#endif
