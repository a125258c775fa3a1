/* ranks: 1 2 3 4 8 */
/* timeout: 120 */
/* Atomicity and ordering of accumulates, on windows from MPI_Win_allocate
   and MPI_Win_create:
   - every rank adds into the same int and double elements of rank 0 many
     times, in one shared-lock epoch and under lock_all with a flush after
     each: the result is the exact sum;
   - every rank adds 1 to three long long counters of the last rank with
     Get_accumulate (+ flush) and Rget_accumulate (+ Wait): each counter's
     fetched values over all ranks are 0..size*N-1, once each;
   - the default accumulate ordering (rar,raw,war,waw): REPLACEs from one
     origin to one location in one epoch end with the last, a NO_OP
     Get_accumulate after them reads it, and one after a SUM reads the sum. */
#include "rma_ops_util.h"

/* Every rank adds into the same elements of rank 0 many times, in one
   shared-lock epoch and then under lock_all with a flush after each. */
static void ac_stress(int flavor)
{
    enum { N = 4, REPS = 60 };
    rma_win w;
    snprintf(rma_ctx, sizeof rma_ctx, "%s, all ranks adding into rank 0", rma_flavor_name(flavor));
    rma_win_open(&w, flavor, N * (sizeof(int) + sizeof(double)), 1);
    rma_local_begin(&w, RMA_LOCK_EXCL, 1);
    memset(w.base, 0, N * (sizeof(int) + sizeof(double)));
    rma_local_end(&w, RMA_LOCK_EXCL);
    MPI_Barrier(MPI_COMM_WORLD);
    int iv[N];
    double dv[N];
    for (int j = 0; j < N; j++) {
        iv[j] = (rma_rank + 1) * (j + 1);
        dv[j] = (rma_rank + 1) * 0.5 + j;
    }
    RMA_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win));
    for (int it = 0; it < REPS; it++) {
        RMA_MPI(MPI_Accumulate(iv, N, MPI_INT, 0, 0, N, MPI_INT, MPI_SUM, w.win));
        RMA_MPI(MPI_Accumulate(dv, N, MPI_DOUBLE, 0, N * sizeof(int), N, MPI_DOUBLE, MPI_SUM,
                               w.win));
    }
    RMA_MPI(MPI_Win_unlock(0, w.win));
    RMA_MPI(MPI_Win_lock_all(0, w.win));
    for (int it = 0; it < REPS; it++) {
        RMA_MPI(MPI_Accumulate(iv, N, MPI_INT, 0, 0, N, MPI_INT, MPI_SUM, w.win));
        RMA_MPI(MPI_Accumulate(dv, N, MPI_DOUBLE, 0, N * sizeof(int), N, MPI_DOUBLE, MPI_SUM,
                               w.win));
        RMA_MPI(MPI_Win_flush(0, w.win));
    }
    RMA_MPI(MPI_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rma_rank == 0) {
        long ranksum = (long)rma_size * (rma_size + 1) / 2;
        rma_local_begin(&w, RMA_LOCK_SHARED, 0);
        for (int j = 0; j < N; j++) {
            int gi;
            double gd;
            memcpy(&gi, w.base + j * sizeof(int), sizeof gi);
            memcpy(&gd, w.base + N * sizeof(int) + j * sizeof(double), sizeof gd);
            long ei = 2L * REPS * ranksum * (j + 1);
            double ed = 2.0 * REPS * (ranksum * 0.5 + (double)rma_size * j);
            RMA_CHECK(gi == ei, "int element %d: %d, expected %ld", j, gi, ei);
            RMA_CHECK(gd == ed, "double element %d: %g, expected %g", j, gd, ed);
        }
        rma_local_end(&w, RMA_LOCK_SHARED);
    }
    rma_win_close(&w);
}

static int ac_cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Every rank adds 1 to three counters of the last rank REPS times, fetching
   the old values (Get_accumulate + flush, Rget_accumulate + Wait): each
   counter's fetched values over all ranks are 0..size*REPS-1, once each. */
static void ac_counter(int flavor)
{
    enum { REPS = 40 };
    int target = rma_size - 1;
    rma_win w;
    snprintf(rma_ctx, sizeof rma_ctx, "%s, fetching counter", rma_flavor_name(flavor));
    rma_win_open(&w, flavor, 3 * sizeof(long long), sizeof(long long));
    rma_local_begin(&w, RMA_LOCK_EXCL, 1);
    memset(w.base, 0, 3 * sizeof(long long));
    rma_local_end(&w, RMA_LOCK_EXCL);
    MPI_Barrier(MPI_COMM_WORLD);
    long long one[3] = {1, 1, 1}, got[REPS][3];
    RMA_MPI(MPI_Win_lock_all(0, w.win));
    for (int it = 0; it < REPS; it++) {
        if (it % 2) {
            MPI_Request rq = MPI_REQUEST_NULL;
            RMA_MPI(MPI_Rget_accumulate(one, 3, MPI_LONG_LONG, got[it], 3, MPI_LONG_LONG, target,
                                        0, 3, MPI_LONG_LONG, MPI_SUM, w.win, &rq));
            RMA_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        } else {
            RMA_MPI(MPI_Get_accumulate(one, 3, MPI_LONG_LONG, got[it], 3, MPI_LONG_LONG, target,
                                       0, 3, MPI_LONG_LONG, MPI_SUM, w.win));
            RMA_MPI(MPI_Win_flush(target, w.win));
        }
    }
    RMA_MPI(MPI_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    long long total = (long long)rma_size * REPS;
    if (rma_rank == target) {
        rma_local_begin(&w, RMA_LOCK_SHARED, 0);
        for (int j = 0; j < 3; j++) {
            long long v;
            memcpy(&v, w.base + j * sizeof v, sizeof v);
            RMA_CHECK(v == total, "counter %d ends at %lld, expected %lld", j, v, total);
        }
        rma_local_end(&w, RMA_LOCK_SHARED);
    }
    long long *all = rma_rank == 0 ? malloc((size_t)total * 3 * sizeof *all) : NULL;
    MPI_Gather(got, REPS * 3, MPI_LONG_LONG, all, REPS * 3, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (rma_rank == 0) {
        long long *col = malloc((size_t)total * sizeof *col);
        for (int j = 0; j < 3; j++) {
            for (long long i = 0; i < total; i++)
                col[i] = all[i * 3 + j];
            qsort(col, (size_t)total, sizeof *col, ac_cmp_ll);
            for (long long i = 0; i < total; i++)
                if (col[i] != i) {
                    RMA_CHECK(0, "counter %d: sorted fetched values have %lld at %lld (a value "
                              "fetched twice or never)", j, col[i], i);
                    break;
                }
        }
        free(col);
        free(all);
    }
    rma_win_close(&w);
}

/* Default accumulate_ordering (rar,raw,war,waw): a sequence of REPLACEs from
   one origin to one location ends with the last value, and a NO_OP
   Get_accumulate issued after them in the same epoch reads it; a SUM after
   that is read back the same way. */
static void ac_ordering(int flavor)
{
    enum { REPS = 40 };
    int target = (rma_rank + 1) % rma_size, source = (rma_rank + rma_size - 1) % rma_size;
    rma_win w;
    snprintf(rma_ctx, sizeof rma_ctx, "%s, accumulate ordering", rma_flavor_name(flavor));
    rma_win_open(&w, flavor, rma_size * sizeof(long long), sizeof(long long));
    rma_local_begin(&w, RMA_LOCK_EXCL, 1);
    memset(w.base, 0, rma_size * sizeof(long long));
    rma_local_end(&w, RMA_LOCK_EXCL);
    MPI_Barrier(MPI_COMM_WORLD);
    long long vals[REPS], five = 5, f1 = -1, f2 = -1;
    RMA_MPI(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, w.win));
    for (int i = 0; i < REPS; i++) {
        vals[i] = (i + 1) * 1000LL + rma_rank;
        RMA_MPI(MPI_Accumulate(&vals[i], 1, MPI_LONG_LONG, target, rma_rank, 1, MPI_LONG_LONG,
                               MPI_REPLACE, w.win));
    }
    RMA_MPI(MPI_Get_accumulate(NULL, 0, MPI_LONG_LONG, &f1, 1, MPI_LONG_LONG, target, rma_rank,
                               1, MPI_LONG_LONG, MPI_NO_OP, w.win));
    RMA_MPI(MPI_Accumulate(&five, 1, MPI_LONG_LONG, target, rma_rank, 1, MPI_LONG_LONG, MPI_SUM,
                           w.win));
    RMA_MPI(MPI_Get_accumulate(NULL, 0, MPI_LONG_LONG, &f2, 1, MPI_LONG_LONG, target, rma_rank,
                               1, MPI_LONG_LONG, MPI_NO_OP, w.win));
    RMA_MPI(MPI_Win_unlock(target, w.win));
    RMA_CHECK(f1 == REPS * 1000LL + rma_rank, "NO_OP after the REPLACEs read %lld, expected %lld",
              f1, REPS * 1000LL + rma_rank);
    RMA_CHECK(f2 == REPS * 1000LL + rma_rank + 5, "NO_OP after SUM read %lld, expected %lld", f2,
              REPS * 1000LL + rma_rank + 5);
    MPI_Barrier(MPI_COMM_WORLD);
    rma_local_begin(&w, RMA_LOCK_SHARED, 0);
    for (int r = 0; r < rma_size; r++) {
        long long v, e = r == source ? REPS * 1000LL + source + 5 : 0;
        memcpy(&v, w.base + (size_t)r * sizeof v, sizeof v);
        RMA_CHECK(v == e, "slot of origin %d holds %lld, expected %lld", r, v, e);
    }
    rma_local_end(&w, RMA_LOCK_SHARED);
    rma_win_close(&w);
}

int main(int argc, char **argv)
{
    rma_init(&argc, &argv);
    for (int f = 0; f < RMA_NFLAVORS; f++) {
        if (rma_flavor_skipped(f))
            continue;
        ac_stress(f);
        ac_counter(f);
        ac_ordering(f);
    }
    return check_finish("rma_accumulate_order");
}
