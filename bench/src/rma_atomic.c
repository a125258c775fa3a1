/* One-sided atomics on MPI_Win_allocate memory, passive target.
 *
 *   rma_acc_lat        MPI_Accumulate of size/8 doubles (MPI_SUM) + MPI_Win_flush,
 *                      rank 0 to rank 1 under one MPI_Win_lock(shared) per batch
 *   rma_fop_lat        MPI_Fetch_and_op (MPI_SUM of 1 on an int64) + flush, 2 ranks
 *   rma_cas_lat        MPI_Compare_and_swap (int64, counter to counter + 1) + flush
 *   rma_fop_contended  every rank adds 1 to one int64 at rank 0 (+ flush per
 *                      operation) under MPI_Win_lock_all
 *   rma_cas_contended  every rank tries to raise that counter by one with
 *                      compare-and-swap, guessing the value it last saw
 * Contended rows report the time per operation on one rank (its operation
 * and flush) and ops_per_s, the operations of all ranks together per second.
 *
 * Checks: with one origin the counter's value is known, so every fetched
 * value is compared; under contention each rank's observations must not go
 * back, and in validated batches the counter must have grown by exactly the
 * successful operations of all ranks. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ACC, FOP, CAS };

typedef struct {
    int kind;
    int contended;
    int rank, target;
    MPI_Comm comm;
    MPI_Win win;
    void *wbuf;
    double *src;      /* accumulate origin buffer, count doubles */
    int count;
    int64_t expect;   /* one origin: the counter's value, only it changes it */
    int64_t seen;     /* contended: the highest value this rank knows the counter had */
    long attempts, successes;
} atom_t;

static inline double acc_value(long it, int i) { return (double)(it + 1 + i % 3); }

static int64_t read_counter(atom_t *a)
{
    int64_t v = 0;
    MPI_Fetch_and_op(NULL, &v, MPI_INT64_T, a->target, 0, MPI_NO_OP, a->win);
    MPI_Win_flush(a->target, a->win);
    return v;
}

/* Rank 0 to rank 1, one lock per batch. */
static double k_pair(void *c, long first, int n, int full)
{
    atom_t *a = c;
    const int64_t one = 1;
    double t0 = MPI_Wtime();
    if (a->kind == ACC && full) {
        /* a validated batch starts from zero so that the sum is known */
        if (a->rank == 1) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, a->win);
            memset(a->wbuf, 0, sizeof(double) * (size_t)a->count);
            MPI_Win_unlock(1, a->win);
        }
        MPI_Barrier(a->comm);
    }
    if (a->rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, a->win);
        for (long it = first; it < first + n; it++) {
            int64_t res = -1;
            switch (a->kind) {
            case ACC:
                for (int i = 0; i < a->count; i++)
                    a->src[i] = acc_value(it, i);
                MPI_Accumulate(a->src, a->count, MPI_DOUBLE, 1, 0, a->count, MPI_DOUBLE, MPI_SUM, a->win);
                MPI_Win_flush(1, a->win);
                break;
            case FOP:
                MPI_Fetch_and_op(&one, &res, MPI_INT64_T, 1, 0, MPI_SUM, a->win);
                MPI_Win_flush(1, a->win);
                if (res != a->expect)
                    fail("rma_fop_lat: fetched %lld, expected %lld", (long long)res, (long long)a->expect);
                a->expect++;
                break;
            case CAS: {
                int64_t cmp = a->expect, swap = a->expect + 1;
                MPI_Compare_and_swap(&swap, &cmp, &res, MPI_INT64_T, 1, 0, a->win);
                MPI_Win_flush(1, a->win);
                if (res != a->expect)
                    fail("rma_cas_lat: fetched %lld, expected %lld", (long long)res, (long long)a->expect);
                a->expect++;
                break;
            }
            }
        }
        MPI_Win_unlock(1, a->win);
    }
    if (a->kind == ACC && full && n > 0) {
        MPI_Barrier(a->comm);
        if (a->rank == 1) {
            MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, a->win);
            const double *w = a->wbuf;
            for (int i = 0; i < a->count; i++) {
                double want = 0;
                for (long it = first; it < first + n; it++)
                    want += acc_value(it, i);
                if (w[i] != want)
                    fail("rma_acc_lat: element %d of the target is %.17g, expected %.17g", i, w[i], want);
            }
            MPI_Win_unlock(1, a->win);
        }
    }
    return MPI_Wtime() - t0;
}

/* Every rank on the counter at a->target, inside the lock_all epoch. */
static double k_contended(void *c, long first, int n, int full)
{
    atom_t *a = c;
    const int64_t one = 1;
    int64_t before = 0;
    long succ0 = a->successes;
    (void)first;
    if (full) {
        MPI_Barrier(a->comm);
        if (a->rank == a->target)
            before = read_counter(a);
        MPI_Barrier(a->comm);
    }
    double t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        int64_t res = -1;
        if (a->kind == FOP) {
            MPI_Fetch_and_op(&one, &res, MPI_INT64_T, a->target, 0, MPI_SUM, a->win);
            MPI_Win_flush(a->target, a->win);
            if (res < a->seen)
                fail("rma_fop_contended: fetched %lld after seeing %lld", (long long)res, (long long)a->seen);
            a->seen = res + 1;
            a->successes++;
        } else {
            int64_t cmp = a->seen, swap = a->seen + 1;
            MPI_Compare_and_swap(&swap, &cmp, &res, MPI_INT64_T, a->target, 0, a->win);
            MPI_Win_flush(a->target, a->win);
            if (res < a->seen)
                fail("rma_cas_contended: fetched %lld after seeing %lld", (long long)res, (long long)a->seen);
            if (res == a->seen) {
                a->successes++;
                a->seen++;
            } else {
                a->seen = res;
            }
        }
        a->attempts++;
    }
    double t = MPI_Wtime() - t0;
    if (full) {
        /* the sum also orders every rank's flushed operations before the read */
        long mine = a->successes - succ0, all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, a->comm);
        if (a->rank == a->target) {
            int64_t after = read_counter(a);
            if (after - before != (int64_t)all)
                fail("%s: the counter grew by %lld, the ranks' successful operations were %ld",
                     a->kind == FOP ? "rma_fop_contended" : "rma_cas_contended", (long long)(after - before), all);
        }
    }
    return t;
}

static int run_point(MPI_Comm comm, const char *name, int kind, int contended, size_t size)
{
    atom_t a;
    rma_win_t w;
    memset(&a, 0, sizeof a);
    a.kind = kind;
    a.contended = contended;
    a.comm = comm;
    a.target = contended ? 0 : 1;
    MPI_Comm_rank(comm, &a.rank);
    a.count = kind == ACC ? (int)(size / sizeof(double)) : 1;
    if (a.count < 1)
        a.count = 1;
    size_t bytes = kind == ACC ? sizeof(double) * (size_t)a.count : sizeof(int64_t);
    if (rma_win_make(comm, RMA_ALLOCATE, a.rank == a.target ? bytes : 0, 8, &w, name))
        return 1;
    a.win = w.win;
    a.wbuf = w.base;
    if (kind == ACC)
        a.src = xmalloc(bytes);
    if (a.rank == a.target) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, a.rank, 0, a.win);
        memset(a.wbuf, 0, bytes);
        MPI_Win_unlock(a.rank, a.win);
    }
    MPI_Barrier(comm);
    if (contended)
        MPI_Win_lock_all(0, a.win);

    stat_t s = measure(comm, contended ? k_contended : k_pair, &a);

    if (contended)
        MPI_Win_unlock_all(a.win);
    long counts[2] = {a.attempts, a.successes}, tot[2];
    MPI_Reduce(counts, tot, 2, MPI_LONG, MPI_SUM, 0, comm);
    int nranks;
    MPI_Comm_size(comm, &nranks);
    rma_win_free(&w);
    free(a.src);
    if (a.rank == 0) {
        char extra[128] = "";
        if (contended)
            snprintf(extra, sizeof extra, ",\"ops_per_s\":%.1f,\"success_share\":%.4f",
                     s.median_us > 0 ? nranks * 1e6 / s.median_us : 0.0,
                     tot[0] > 0 ? (double)tot[1] / (double)tot[0] : 0.0);
        emit(name, bytes, g_size, &s, s.median_us > 0 ? (double)bytes / s.median_us : 0, extra);
    }
    return 0;
}

int bench_rma_atomic(const char *name)
{
    int kind, contended;
    if (!strcmp(name, "rma_acc_lat")) kind = ACC, contended = 0;
    else if (!strcmp(name, "rma_fop_lat")) kind = FOP, contended = 0;
    else if (!strcmp(name, "rma_cas_lat")) kind = CAS, contended = 0;
    else if (!strcmp(name, "rma_fop_contended")) kind = FOP, contended = 1;
    else if (!strcmp(name, "rma_cas_contended")) kind = CAS, contended = 1;
    else {
        if (g_rank == 0)
            emit_error(name, "unknown one-sided atomic benchmark");
        return 1;
    }
    if (g_size < 2) {
        if (g_rank == 0)
            emit_error(name, "needs at least 2 ranks");
        return 1;
    }
    MPI_Comm comm;
    int rc = 0;
    MPI_Comm_split(MPI_COMM_WORLD, contended || g_rank < 2 ? 0 : MPI_UNDEFINED, g_rank, &comm);
    if (comm != MPI_COMM_NULL) {
        size_t sizes[MAX_SIZES];
        int ns = 1;
        sizes[0] = 8;
        /* only the accumulate has a payload to vary */
        if (kind == ACC && g_opt.nsizes)
            opts_sizes(8, 1u << 20, sizes, &ns);
        for (int i = 0; i < ns && !rc; i++)
            rc = run_point(comm, name, kind, contended, sizes[i]);
        MPI_Comm_free(&comm);
    }
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return rc;
}
