/* ranks: 1 2 3 4 8 */
/* timeout: 120 */
/* MPI_Fetch_and_op and MPI_Compare_and_swap on int, long long and unsigned
   long, on windows from MPI_Win_allocate (disp_unit 8) and MPI_Win_create
   (disp_unit 1):
   - compare-and-swap semantics to the next rank under fence and under an
     exclusive lock: a CAS whose compare value differs returns the old value
     and leaves it, one that matches swaps; a NO_OP fetch reads the result;
   - a shared counter: every rank adds 1 N times under lock_all (flush or
     flush_local after each): the fetched values of all ranks together are
     0..size*N-1, each once, and NO_OP fetches read size*N at the end;
   - a lock built from CAS: each rank acquires it (spinning on CAS + flush),
     checks with a NO_OP fetch that it holds it, increments a plain value with
     Get + flush + Put + flush, and releases it with a CAS that must find its
     own id: the value ends at size*N exactly;
   - Fetch_and_op with MAX, MIN and REPLACE from every rank into one
     location: MAX/MIN end at the extreme of all contributions and every
     origin fetches a monotone sequence of values that were stored there;
     REPLACE (swap) hands every value on exactly once (the fetched values and
     the final one are the initial value and all contributions). */
#include "rma_ops_util.h"
#include "rma_values.h"

static const int AT_TYPES[3] = {B_INT, B_LLONG, B_ULONG};

static void at_put(int bt, void *p, long long v)
{
    rv_val x = {v, 0, 0, 0};
    rv_store(bt, p, x);
}

static long long at_get(int bt, const void *p) { return rv_load(bt, p).i; }

/* 8-byte slots, all zero. */
static void at_open(rma_win *w, int flavor, int nslots)
{
    rma_win_open(w, flavor, nslots * 8, flavor == RMA_ALLOCATE ? 8 : 1);
    rma_local_begin(w, RMA_LOCK_EXCL, 1);
    memset(w->base, 0, (size_t)nslots * 8);
    rma_local_end(w, RMA_LOCK_EXCL);
    MPI_Barrier(MPI_COMM_WORLD);
}

static MPI_Aint at_disp(const rma_win *w, int slot) { return (MPI_Aint)slot * 8 / w->disp_unit; }

static long long at_local(const rma_win *w, int bt, int slot)
{
    rma_local_begin(w, RMA_LOCK_SHARED, 0);
    long long v = at_get(bt, w->base + slot * 8);
    rma_local_end(w, RMA_LOCK_SHARED);
    return v;
}

static void at_cas_basic(int flavor, int sync)
{
    int target = (rma_rank + 1) % rma_size, source = (rma_rank + rma_size - 1) % rma_size;
    rma_win w;
    snprintf(rma_ctx, sizeof rma_ctx, "%s, CAS to next rank, %s", rma_flavor_name(flavor),
             rma_sync_name(sync));
    at_open(&w, flavor, 3);
    rma_local_begin(&w, sync, 1);
    for (int t = 0; t < 3; t++)
        at_put(AT_TYPES[t], w.base + t * 8, 100 + rma_rank * 10 + t);
    rma_local_end(&w, sync);
    unsigned char wrong[3][16], init[3][16], mine[3][16], r1[3][16], r2[3][16], r3[3][16];
    for (int t = 0; t < 3; t++) {
        at_put(AT_TYPES[t], wrong[t], 999);
        at_put(AT_TYPES[t], init[t], 100 + target * 10 + t);
        at_put(AT_TYPES[t], mine[t], 7000 + rma_rank * 10 + t);
    }
    rma_epoch_open(&w, sync, target);
    for (int t = 0; t < 3; t++) {
        MPI_Datatype ty = RV[AT_TYPES[t]].type;
        MPI_Aint d = at_disp(&w, t);
        RMA_MPI(MPI_Compare_and_swap(mine[t], wrong[t], r1[t], ty, target, d, w.win));
        RMA_MPI(MPI_Compare_and_swap(mine[t], init[t], r2[t], ty, target, d, w.win));
        RMA_MPI(MPI_Fetch_and_op(NULL, r3[t], ty, target, d, MPI_NO_OP, w.win));
    }
    rma_epoch_close(&w, sync, target);
    for (int t = 0; t < 3; t++) {
        int bt = AT_TYPES[t];
        long long old = 100 + target * 10 + t, now = 7000 + rma_rank * 10 + t;
        RMA_CHECK(at_get(bt, r1[t]) == old, "%s: CAS with a wrong compare value returned %lld, "
                  "expected %lld", RV[bt].name, at_get(bt, r1[t]), old);
        RMA_CHECK(at_get(bt, r2[t]) == old, "%s: matching CAS returned %lld, expected %lld",
                  RV[bt].name, at_get(bt, r2[t]), old);
        RMA_CHECK(at_get(bt, r3[t]) == now, "%s: NO_OP fetch after the swap read %lld, "
                  "expected %lld", RV[bt].name, at_get(bt, r3[t]), now);
        long long v = at_local(&w, bt, t), e = 7000 + source * 10 + t;
        RMA_CHECK(v == e, "%s: target holds %lld, expected %lld", RV[bt].name, v, e);
    }
    rma_win_close(&w);
}

static int at_cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Rank 0 gets every rank's `n` values and checks that, sorted, together with
   `extra` they equal `expect` (sorted here). */
static void at_check_multiset(const long long *mine, int n, const long long *extra, int nextra,
                              long long *expect, int nexpect, const char *what)
{
    long long *all = NULL;
    if (rma_rank == 0)
        all = malloc(((size_t)n * rma_size + (size_t)nextra) * sizeof *all);
    MPI_Gather(mine, n, MPI_LONG_LONG, all, n, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (rma_rank != 0)
        return;
    int total = n * rma_size + nextra;
    memcpy(all + (size_t)n * rma_size, extra, (size_t)nextra * sizeof *all);
    qsort(all, (size_t)total, sizeof *all, at_cmp_ll);
    qsort(expect, (size_t)nexpect, sizeof *expect, at_cmp_ll);
    RMA_CHECK(total == nexpect, "%s: %d values, expected %d", what, total, nexpect);
    for (int i = 0; i < total && i < nexpect; i++)
        if (all[i] != expect[i]) {
            RMA_CHECK(0, "%s: sorted values differ at %d: %lld, expected %lld (a value fetched "
                      "twice or lost)", what, i, all[i], expect[i]);
            break;
        }
    free(all);
}

static void at_counter(int flavor, int reps)
{
    rma_win w;
    snprintf(rma_ctx, sizeof rma_ctx, "%s, Fetch_and_op SUM counter at rank 0, lock_all",
             rma_flavor_name(flavor));
    at_open(&w, flavor, 3);
    long long *got = malloc((size_t)reps * 3 * sizeof *got);
    unsigned char one[3][16], res[3][16];
    for (int t = 0; t < 3; t++)
        at_put(AT_TYPES[t], one[t], 1);
    RMA_MPI(MPI_Win_lock_all(0, w.win));
    for (int it = 0; it < reps; it++) {
        for (int t = 0; t < 3; t++)
            RMA_MPI(MPI_Fetch_and_op(one[t], res[t], RV[AT_TYPES[t]].type, 0, at_disp(&w, t),
                                     MPI_SUM, w.win));
        if (it % 2)
            RMA_MPI(MPI_Win_flush(0, w.win));
        else
            RMA_MPI(MPI_Win_flush_local(0, w.win));
        for (int t = 0; t < 3; t++)
            got[t * reps + it] = at_get(AT_TYPES[t], res[t]);
    }
    RMA_MPI(MPI_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    long long total = (long long)rma_size * reps;
    RMA_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w.win));
    for (int t = 0; t < 3; t++)
        RMA_MPI(MPI_Fetch_and_op(NULL, res[t], RV[AT_TYPES[t]].type, 0, at_disp(&w, t),
                                 MPI_NO_OP, w.win));
    RMA_MPI(MPI_Win_unlock(0, w.win));
    long long *expect = malloc((size_t)total * sizeof *expect);
    for (int t = 0; t < 3; t++) {
        int bt = AT_TYPES[t];
        RMA_CHECK(at_get(bt, res[t]) == total,
                  "%s: NO_OP fetch read %lld at the end, expected %lld",
                  RV[bt].name, at_get(bt, res[t]), total);
        for (long long i = 0; i < total; i++)
            expect[i] = i;
        char what[64];
        snprintf(what, sizeof what, "%s: fetched values", RV[bt].name);
        at_check_multiset(got + t * reps, reps, NULL, 0, expect, (int)total, what);
    }
    free(expect);
    free(got);
    rma_win_close(&w);
}

static void at_cas_lock(int flavor, int t, int reps)
{
    int bt = AT_TYPES[t];
    MPI_Datatype ty = RV[bt].type;
    rma_win w;
    snprintf(rma_ctx, sizeof rma_ctx, "%s, lock built from CAS on %s", rma_flavor_name(flavor),
             RV[bt].name);
    at_open(&w, flavor, 2); /* slot 0: lock word, slot 1: long long value */
    unsigned char free_v[16], mine[16], res[16];
    at_put(bt, free_v, 0);
    at_put(bt, mine, rma_rank + 1);
    RMA_MPI(MPI_Win_lock_all(0, w.win));
    for (int it = 0; it < reps; it++) {
        do {
            RMA_MPI(MPI_Compare_and_swap(mine, free_v, res, ty, 0, at_disp(&w, 0), w.win));
            RMA_MPI(MPI_Win_flush(0, w.win));
        } while (at_get(bt, res) != 0 && check_failures < 20);
        RMA_MPI(MPI_Fetch_and_op(NULL, res, ty, 0, at_disp(&w, 0), MPI_NO_OP, w.win));
        RMA_MPI(MPI_Win_flush(0, w.win));
        RMA_CHECK(at_get(bt, res) == rma_rank + 1, "holding the lock, NO_OP read %lld, expected %d",
                  at_get(bt, res), rma_rank + 1);
        long long v = -1;
        RMA_MPI(MPI_Get(&v, 1, MPI_LONG_LONG, 0, at_disp(&w, 1), 1, MPI_LONG_LONG, w.win));
        RMA_MPI(MPI_Win_flush(0, w.win));
        v++;
        RMA_MPI(MPI_Put(&v, 1, MPI_LONG_LONG, 0, at_disp(&w, 1), 1, MPI_LONG_LONG, w.win));
        RMA_MPI(MPI_Win_flush(0, w.win));
        RMA_MPI(MPI_Compare_and_swap(free_v, mine, res, ty, 0, at_disp(&w, 0), w.win));
        RMA_MPI(MPI_Win_flush(0, w.win));
        RMA_CHECK(at_get(bt, res) == rma_rank + 1, "releasing, the lock word was %lld, expected %d",
                  at_get(bt, res), rma_rank + 1);
    }
    RMA_MPI(MPI_Win_unlock_all(w.win));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rma_rank == 0) {
        long long lockw = at_local(&w, bt, 0), v = at_local(&w, B_LLONG, 1);
        RMA_CHECK(lockw == 0, "lock word ends at %lld", lockw);
        RMA_CHECK(v == (long long)rma_size * reps, "value ends at %lld, expected %lld", v,
                  (long long)rma_size * reps);
    }
    rma_win_close(&w);
}

/* Slot o*3+t: op o (MAX, MIN, REPLACE) on type t, at the last rank. */
static void at_fop_ops(int flavor, int reps)
{
    static const MPI_Op ops[3] = {MPI_MAX, MPI_MIN, MPI_REPLACE};
    int target = rma_size - 1;
    long long n = (long long)rma_size * reps, init[3] = {0, n + 1, 0};
    rma_win w;
    snprintf(rma_ctx, sizeof rma_ctx, "%s, Fetch_and_op MAX/MIN/REPLACE at the last rank",
             rma_flavor_name(flavor));
    at_open(&w, flavor, 9);
    rma_local_begin(&w, RMA_LOCK_EXCL, 1);
    if (rma_rank == target)
        for (int s = 0; s < 9; s++)
            at_put(AT_TYPES[s % 3], w.base + s * 8, init[s / 3]);
    rma_local_end(&w, RMA_LOCK_EXCL);
    MPI_Barrier(MPI_COMM_WORLD);
    long long *got = malloc((size_t)reps * 9 * sizeof *got);
    /* contributions: 1..n, each once over all ranks, in a scrambled order */
#define AT_TOKEN(r, it) (1 + ((long long)((r) * reps + (it)) * 7919) % n)
    RMA_MPI(MPI_Win_lock_all(0, w.win));
    for (int it = 0; it < reps; it++) {
        unsigned char val[9][16], res[9][16];
        for (int s = 0; s < 9; s++) {
            at_put(AT_TYPES[s % 3], val[s], AT_TOKEN(rma_rank, it));
            RMA_MPI(MPI_Fetch_and_op(val[s], res[s], RV[AT_TYPES[s % 3]].type, target,
                                     at_disp(&w, s), ops[s / 3], w.win));
        }
        RMA_MPI(MPI_Win_flush(target, w.win));
        for (int s = 0; s < 9; s++)
            got[s * reps + it] = at_get(AT_TYPES[s % 3], res[s]);
    }
    RMA_MPI(MPI_Win_unlock_all(w.win));
    for (int s = 0; s < 6; s++) /* MAX and MIN: each origin sees a monotone sequence */
        for (int it = 1; it < reps; it++) {
            long long a = got[s * reps + it - 1], b = got[s * reps + it];
            RMA_CHECK(s < 3 ? b >= a : b <= a, "%s %s: fetched %lld after %lld",
                      RV[AT_TYPES[s % 3]].name, check_op_name(ops[s / 3]), b, a);
            RMA_CHECK(b == init[s / 3] || (b >= 1 && b <= n), "%s %s: fetched %lld, never stored",
                      RV[AT_TYPES[s % 3]].name, check_op_name(ops[s / 3]), b);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    long long fin[9];
    unsigned char res[9][16];
    RMA_MPI(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, w.win));
    for (int s = 0; s < 9; s++)
        RMA_MPI(MPI_Fetch_and_op(NULL, res[s], RV[AT_TYPES[s % 3]].type, target, at_disp(&w, s),
                                 MPI_NO_OP, w.win));
    RMA_MPI(MPI_Win_unlock(target, w.win));
    for (int s = 0; s < 9; s++) {
        fin[s] = at_get(AT_TYPES[s % 3], res[s]);
        if (s < 6) {
            long long e = s < 3 ? n : 1;
            RMA_CHECK(fin[s] == e, "%s %s: ends at %lld, expected %lld", RV[AT_TYPES[s % 3]].name,
                      check_op_name(ops[s / 3]), fin[s], e);
        }
    }
    long long *expect = malloc((size_t)(n + 1) * sizeof *expect);
    for (int s = 6; s < 9; s++) {
        for (long long i = 0; i <= n; i++)
            expect[i] = i; /* the initial 0 and the contributions 1..n */
        char what[64];
        snprintf(what, sizeof what, "%s REPLACE: fetched and final values",
                 RV[AT_TYPES[s % 3]].name);
        at_check_multiset(got + s * reps, reps, &fin[s], 1, expect, (int)n + 1, what);
    }
    free(expect);
    free(got);
    rma_win_close(&w);
}

int main(int argc, char **argv)
{
    rma_init(&argc, &argv);
    rv_init();
    /* fewer rounds on more ranks: spinning on CAS is slow on oversubscribed cores */
    int reps = rma_size <= 2 ? 40 : rma_size <= 4 ? 20 : 10;
    for (int f = 0; f < RMA_NFLAVORS; f++) {
        if (rma_flavor_skipped(f))
            continue;
        at_cas_basic(f, RMA_FENCE);
        at_cas_basic(f, RMA_LOCK_EXCL);
        at_counter(f, reps);
        for (int t = 0; t < 3; t++)
            at_cas_lock(f, t, reps / 2);
        at_fop_ops(f, reps);
    }
    return check_finish("rma_atomics");
}
