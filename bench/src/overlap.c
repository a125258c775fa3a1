/* Overlap of communication and computation.  Rank 0 Isends, rank 1 Irecvs;
 * both compute for a set time, then Wait; a zero-byte acknowledgement
 * closes the iteration.  Computation kinds: FIXED (a dependent chain of
 * integer operations in a register, no memory traffic) and DAXPY
 * (y += a*x over vectors the size of the message).  For every size the
 * benchmark prints the total time per iteration against the measured
 * computation time; the runner derives saturation and efficiency. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG 29

static volatile uint64_t sink;

static void spin(long iters)
{
    uint64_t x = 1;
    for (long i = 0; i < iters; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    sink = x;
}

static void daxpy(double *y, const double *x, long len, long elems)
{
    const double a = 1.0000001;
    while (elems > 0) {
        long m = elems < len ? elems : len;
        for (long i = 0; i < m; i++)
            y[i] = a * x[i] + y[i];
        elems -= m;
    }
    sink = (uint64_t)y[0];
}

typedef struct {
    MPI_Comm comm;
    int daxpy_kind;
    size_t size;
    unsigned char *buf;
    double *x, *y;
    long len;         /* elements of the DAXPY vectors */
    long work;        /* iterations (FIXED) or elements (DAXPY) */
    int with_comm;
} ov_t;

static void compute(ov_t *o)
{
    if (o->work <= 0)
        return;
    if (o->daxpy_kind)
        daxpy(o->y, o->x, o->len, o->work);
    else
        spin(o->work);
}

static double k_overlap(void *ctx, long first, int n, int full)
{
    ov_t *o = ctx;
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        if (!o->with_comm) {
            compute(o);
            continue;
        }
        MPI_Request r;
        uint64_t s = seed_of(it, 0, 0);
        if (g_rank == 0) {
            if (full)
                fill(o->buf, o->size, s);
            else
                stamp(o->buf, o->size, s);
            MPI_Isend(o->buf, (int)o->size, MPI_BYTE, 1, TAG, o->comm, &r);
            compute(o);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG + 1, o->comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Irecv(o->buf, (int)o->size, MPI_BYTE, 0, TAG, o->comm, &r);
            compute(o);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            if (full)
                check(o->buf, o->size, s, "overlap");
            else
                check_stamp(o->buf, o->size, s, "overlap");
            MPI_Send(NULL, 0, MPI_BYTE, 0, TAG + 1, o->comm);
        }
    }
    return MPI_Wtime() - t0;
}

/* cost of one unit of work in microseconds (best of a few tries) */
static double unit_cost(ov_t *o)
{
    long units = o->daxpy_kind ? 4 * o->len : 2000000;
    if (o->daxpy_kind && units < 100000)
        units = 100000;
    double best = 1e30;
    for (int i = 0; i < 5; i++) {
        long save = o->work;
        o->work = units;
        double t0 = MPI_Wtime();
        compute(o);
        double t = MPI_Wtime() - t0;
        o->work = save;
        if (t < best)
            best = t;
    }
    return best * 1e6 / (double)units;
}

int bench_overlap(const char *name)
{
    int kind;
    if (!strcmp(name, "overlap_fixed"))
        kind = 0;
    else if (!strcmp(name, "overlap_daxpy"))
        kind = 1;
    else {
        if (g_rank == 0)
            emit_error(name, "unknown benchmark");
        return 2;
    }
    if (g_size < 2) {
        if (g_rank == 0)
            emit_error(name, "needs at least 2 ranks");
        return 1;
    }
    static const double full_f[] = {0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0};
    static const double quick_f[] = {0.5, 1.0, 1.5, 3.0};
    static const double smoke_f[] = {1.0};
    const double *fr = g_opt.smoke ? smoke_f : g_opt.quick ? quick_f : full_f;
    int nf = g_opt.smoke ? 1 : g_opt.quick ? 4 : 8;

    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < 2 ? 0 : MPI_UNDEFINED, g_rank, &comm);
    if (comm != MPI_COMM_NULL) {
        size_t sizes[MAX_SIZES];
        int ns;
        if (g_opt.nsizes)
            opts_sizes(0, 64u << 20, sizes, &ns);
        else
            for (ns = 0; ns < 10; ns++)
                sizes[ns] = (size_t)16 << (2 * ns);
        for (int i = 0; i < ns; i++) {
            ov_t o = {.comm = comm, .daxpy_kind = kind, .size = sizes[i], .with_comm = 1};
            o.buf = xmalloc(sizes[i]);
            o.len = (long)(sizes[i] / sizeof(double));
            if (o.len < 1)
                o.len = 1;
            o.x = xmalloc(sizeof(double) * (size_t)o.len);
            o.y = xmalloc(sizeof(double) * (size_t)o.len);
            for (long j = 0; j < o.len; j++)
                o.x[j] = 1e-3 * (double)(j % 97);
            double cost = unit_cost(&o);
            /* the same work on both ranks: take rank 0's calibration */
            MPI_Bcast(&cost, 1, MPI_DOUBLE, 0, comm);

            o.work = 0;
            stat_t base = measure(comm, k_overlap, &o);
            double tcomm = base.median_us;
            char extra[200];
            snprintf(extra, sizeof extra, ",\"compute_us\":0,\"nominal_us\":0,\"comm_us\":%.4f", tcomm);
            if (g_rank == 0)
                emit(name, sizes[i], g_size, &base, 0, extra);
            for (int f = 0; f < nf; f++) {
                /* scale on the fastest base iteration (the median may
                 * carry scheduler noise), capped to bound the run time */
                double ref = base.min_us > 1.0 ? base.min_us : 1.0;
                double cap = g_opt.smoke ? 2e3 : g_opt.quick ? 5e3 : 5e4;
                double want = fr[f] * ref;
                if (want > cap)
                    want = cap;
                o.work = (long)(want / cost);
                if (o.work < 1)
                    o.work = 1;
                o.with_comm = 0;
                stat_t c = measure(comm, k_overlap, &o);
                o.with_comm = 1;
                stat_t t = measure(comm, k_overlap, &o);
                snprintf(extra, sizeof extra, ",\"compute_us\":%.4f,\"nominal_us\":%.4f,\"comm_us\":%.4f",
                         c.median_us, want, tcomm);
                if (g_rank == 0)
                    emit(name, sizes[i], g_size, &t, 0, extra);
            }
            free(o.buf);
            free(o.x);
            free(o.y);
        }
        MPI_Comm_free(&comm);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}
