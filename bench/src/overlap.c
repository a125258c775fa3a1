/* Overlap of communication and computation.  Every form starts a
 * communication, computes for a set time and then waits; for every size
 * the benchmark prints the total time per iteration against the measured
 * computation time, and the runner derives saturation and efficiency.
 *
 * Point-to-point forms (ranks 0 and 1; rank 0 sends, rank 1 receives, a
 * zero-byte acknowledgement from rank 1 closes the iteration):
 *   overlap_fixed, overlap_daxpy: both ranks compute between
 *     MPI_Isend/MPI_Irecv and MPI_Wait;
 *   overlap_sender: rank 0 computes between MPI_Isend and MPI_Wait while
 *     rank 1 is in MPI_Wait on its receive;
 *   overlap_receiver: rank 1 computes between MPI_Irecv and MPI_Wait while
 *     rank 0 is in MPI_Wait on its send.  The receive is always posted
 *     before the send starts (the case measured is a receiver that posted
 *     first): rank 1 posts the next receive before it acknowledges, and a
 *     zero-byte handshake opens each timed batch.  Reusing the
 *     acknowledgement keeps the handshake's latency out of every iteration,
 *     where it could never be hidden.
 * Nonblocking collectives (every rank of the job computes between the
 * start and MPI_Wait; the collective itself orders the iterations):
 *   overlap_ibarrier: MPI_Ibarrier (size 0);
 *   overlap_iallreduce: MPI_Iallreduce, MPI_SUM over size / 8 doubles.
 * Computation kinds: FIXED (a dependent chain of integer operations in a
 * register, no memory traffic; every form but overlap_daxpy) and DAXPY
 * (y += a*x over vectors the size of the message). */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG 29
#define TAG_ACK (TAG + 1)
#define TAG_READY (TAG + 2)

enum { BOTH_FIXED, BOTH_DAXPY, SENDER, RECEIVER, IBARRIER, IALLREDUCE };
static const char *forms[] = {"overlap_fixed", "overlap_daxpy", "overlap_sender", "overlap_receiver",
                              "overlap_ibarrier", "overlap_iallreduce"};
#define NFORMS ((int)(sizeof forms / sizeof forms[0]))

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
    int form;
    int computes;     /* this rank computes in this form */
    size_t size;
    unsigned char *buf;
    double *x, *y;    /* DAXPY vectors */
    double *in, *out; /* Iallreduce vectors */
    long len;         /* elements of the DAXPY / Iallreduce vectors */
    long work;        /* iterations (FIXED) or elements (DAXPY) */
    int with_comm;
} ov_t;

static void compute(ov_t *o)
{
    if (o->work <= 0 || !o->computes)
        return;
    if (o->form == BOTH_DAXPY)
        daxpy(o->y, o->x, o->len, o->work);
    else
        spin(o->work);
}

static void send_payload(ov_t *o, long it, int full, MPI_Request *r)
{
    uint64_t s = seed_of(it, 0, 0);
    if (full)
        fill(o->buf, o->size, s);
    else
        stamp(o->buf, o->size, s);
    MPI_Isend(o->buf, (int)o->size, MPI_BYTE, 1, TAG, o->comm, r);
}

static void check_payload(ov_t *o, long it, int full)
{
    uint64_t s = seed_of(it, 0, 0);
    if (full)
        check(o->buf, o->size, s, forms[o->form]);
    else
        check_stamp(o->buf, o->size, s, forms[o->form]);
}

/* overlap_fixed, overlap_daxpy, overlap_sender: the order in which the
 * ranks post does not matter to what is measured. */
static double k_p2p(void *ctx, long first, int n, int full)
{
    ov_t *o = ctx;
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        if (!o->with_comm) {
            compute(o);
            continue;
        }
        MPI_Request r;
        if (g_rank == 0) {
            send_payload(o, it, full, &r);
            compute(o);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, o->comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Irecv(o->buf, (int)o->size, MPI_BYTE, 0, TAG, o->comm, &r);
            compute(o);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            check_payload(o, it, full);
            MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, o->comm);
        }
    }
    return MPI_Wtime() - t0;
}

/* overlap_receiver: rank 1's receive for iteration it is posted before
 * rank 0 may start iteration it's send (see the file comment). */
static double k_receiver(void *ctx, long first, int n, int full)
{
    ov_t *o = ctx;
    double t0 = MPI_Wtime();
    if (n <= 0)
        return 0;
    if (!o->with_comm) {
        for (int i = 0; i < n; i++)
            compute(o);
        return MPI_Wtime() - t0;
    }
    MPI_Request r;
    if (g_rank == 0) {
        MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_READY, o->comm, MPI_STATUS_IGNORE);
        for (long it = first; it < first + n; it++) {
            send_payload(o, it, full, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, o->comm, MPI_STATUS_IGNORE);
        }
    } else {
        MPI_Irecv(o->buf, (int)o->size, MPI_BYTE, 0, TAG, o->comm, &r);
        MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_READY, o->comm);
        for (long it = first; it < first + n; it++) {
            compute(o);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            check_payload(o, it, full);
            if (it + 1 < first + n)
                MPI_Irecv(o->buf, (int)o->size, MPI_BYTE, 0, TAG, o->comm, &r);
            MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, o->comm);
        }
    }
    return MPI_Wtime() - t0;
}

/* Iallreduce input: a small integer per (iteration, element) plus the
 * rank, so that every sum is exact and known on every rank. */
static inline double rval(long it, long i)
{
    return (double)((seed_of(it, 0, 0) + (uint64_t)i * 7u) & 0xffff);
}

static void coll_fill(ov_t *o, long it, int full)
{
    if (full) {
        for (long i = 0; i < o->len; i++)
            o->in[i] = rval(it, i) + g_rank;
    } else {
        o->in[0] = rval(it, 0) + g_rank;
        o->in[o->len - 1] = rval(it, o->len - 1) + g_rank;
    }
}

static void coll_check(ov_t *o, long it, int full)
{
    double ranks = (double)g_size * (g_size - 1) / 2;
    for (long i = 0; i < o->len; i = (full || i + 1 == o->len) ? i + 1 : o->len - 1) {
        double want = g_size * rval(it, i) + ranks;
        if (o->out[i] != want)
            fail("overlap_iallreduce: size %zu, element %ld is %.17g, expected %.17g", o->size, i, o->out[i],
                 want);
    }
}

static double k_coll(void *ctx, long first, int n, int full)
{
    ov_t *o = ctx;
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        if (!o->with_comm) {
            compute(o);
            continue;
        }
        MPI_Request r;
        if (o->form == IBARRIER) {
            MPI_Ibarrier(o->comm, &r);
        } else {
            coll_fill(o, it, full);
            MPI_Iallreduce(o->in, o->out, (int)o->len, MPI_DOUBLE, MPI_SUM, o->comm, &r);
        }
        compute(o);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        if (o->form == IALLREDUCE)
            coll_check(o, it, full);
    }
    return MPI_Wtime() - t0;
}

/* cost of one unit of work in microseconds (best of a few tries) */
static double unit_cost(ov_t *o)
{
    long units = o->form == BOTH_DAXPY ? 4 * o->len : 2000000;
    if (o->form == BOTH_DAXPY && units < 100000)
        units = 100000;
    int save_c = o->computes;
    long save_w = o->work;
    o->computes = 1;
    o->work = units;
    double best = 1e30;
    for (int i = 0; i < 5; i++) {
        double t0 = MPI_Wtime();
        compute(o);
        double t = MPI_Wtime() - t0;
        if (t < best)
            best = t;
    }
    o->computes = save_c;
    o->work = save_w;
    return best * 1e6 / (double)units;
}

/* The sizes of a form: the explicit list (clipped to what the form can
 * send), else its default range. */
static void form_sizes(int form, size_t *sizes, int *ns)
{
    if (form == IBARRIER) {
        sizes[0] = 0;
        *ns = 1;
    } else if (form == IALLREDUCE) {
        if (g_opt.nsizes)
            opts_sizes(sizeof(double), 64u << 20, sizes, ns);
        else
            for (*ns = 0; *ns < 7; (*ns)++)
                sizes[*ns] = (size_t)1024 << (2 * *ns); /* 1 KiB .. 4 MiB */
    } else if (g_opt.nsizes) {
        opts_sizes(0, 64u << 20, sizes, ns);
    } else {
        for (*ns = 0; *ns < 10; (*ns)++)
            sizes[*ns] = (size_t)16 << (2 * *ns); /* 16 B .. 4 MiB */
    }
}

/* One size: T0 (communication alone), then for every computation time the
 * computation alone and the computation with the communication. */
static void run_size(ov_t *o, const char *name, int calib_root)
{
    static const double full_f[] = {0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0};
    static const double quick_f[] = {0.5, 1.0, 1.5, 3.0};
    static const double smoke_f[] = {1.0};
    const double *fr = g_opt.smoke ? smoke_f : g_opt.quick ? quick_f : full_f;
    int nf = g_opt.smoke ? 1 : g_opt.quick ? 4 : 8;
    kernel_fn k = o->form == RECEIVER ? k_receiver : o->form >= IBARRIER ? k_coll : k_p2p;

    /* the computing rank's calibration decides the work of every rank */
    double cost = unit_cost(o);
    MPI_Bcast(&cost, 1, MPI_DOUBLE, calib_root, o->comm);

    o->work = 0;
    o->with_comm = 1;
    stat_t base = measure(o->comm, k, o);
    double tcomm = base.median_us;
    char extra[200];
    snprintf(extra, sizeof extra, ",\"compute_us\":0,\"nominal_us\":0,\"comm_us\":%.4f", tcomm);
    if (g_rank == 0)
        emit(name, o->size, g_size, &base, 0, extra);
    for (int f = 0; f < nf; f++) {
        /* scale on the fastest base iteration (the median may carry
         * scheduler noise), capped to bound the run time */
        double ref = base.min_us > 1.0 ? base.min_us : 1.0;
        double cap = g_opt.smoke ? 2e3 : g_opt.quick ? 5e3 : 5e4;
        double want = fr[f] * ref;
        if (want > cap)
            want = cap;
        o->work = (long)(want / cost);
        if (o->work < 1)
            o->work = 1;
        o->with_comm = 0;
        stat_t c = measure(o->comm, k, o);
        o->with_comm = 1;
        stat_t t = measure(o->comm, k, o);
        snprintf(extra, sizeof extra, ",\"compute_us\":%.4f,\"nominal_us\":%.4f,\"comm_us\":%.4f", c.median_us,
                 want, tcomm);
        if (g_rank == 0)
            emit(name, o->size, g_size, &t, 0, extra);
    }
}

int bench_overlap(const char *name)
{
    int form = -1;
    for (int i = 0; i < NFORMS; i++)
        if (!strcmp(name, forms[i]))
            form = i;
    if (form < 0) {
        if (g_rank == 0)
            emit_error(name, "unknown benchmark");
        return 2;
    }
    if (g_size < 2) {
        if (g_rank == 0)
            emit_error(name, "needs at least 2 ranks");
        return 1;
    }
    int coll = form >= IBARRIER;
    MPI_Comm comm;
    if (coll)
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    else
        MPI_Comm_split(MPI_COMM_WORLD, g_rank < 2 ? 0 : MPI_UNDEFINED, g_rank, &comm);
    if (comm != MPI_COMM_NULL) {
        size_t sizes[MAX_SIZES];
        int ns;
        form_sizes(form, sizes, &ns);
        int computes = form == SENDER ? g_rank == 0 : form == RECEIVER ? g_rank == 1 : 1;
        for (int i = 0; i < ns; i++) {
            ov_t o = {.comm = comm, .form = form, .computes = computes, .size = sizes[i]};
            o.buf = xmalloc(coll ? 1 : sizes[i]);
            o.len = (long)(sizes[i] / sizeof(double));
            if (o.len < 1)
                o.len = 1;
            if (form == BOTH_DAXPY) {
                o.x = xmalloc(sizeof(double) * (size_t)o.len);
                o.y = xmalloc(sizeof(double) * (size_t)o.len);
                for (long j = 0; j < o.len; j++)
                    o.x[j] = 1e-3 * (double)(j % 97);
            } else if (form == IALLREDUCE) {
                o.in = xmalloc(sizeof(double) * (size_t)o.len);
                o.out = xmalloc(sizeof(double) * (size_t)o.len);
            }
            run_size(&o, name, form == RECEIVER ? 1 : 0);
            free(o.buf);
            free(o.x);
            free(o.y);
            free(o.in);
            free(o.out);
        }
        MPI_Comm_free(&comm);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}
