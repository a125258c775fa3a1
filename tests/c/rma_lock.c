/* ranks: 1 2 3 4 8 */
/* timeout: 60 */
/* Passive-target synchronisation, on windows of both flavours (see
   rma_util.h): an exclusive lock protecting a read-modify-write (Get, flush,
   Put) of a counter at rank 0 that every rank increments K times; shared
   locks of every rank reading every rank at once; a lock on the process
   itself around local loads and stores mixed with a Put to itself;
   Win_lock_all/unlock_all; Win_flush, Win_flush_all (a Put seen by a later
   Get), Win_flush_local and Win_flush_local_all (a Get's result valid, a
   Put's origin buffer reusable); Win_sync with a flag written by Put after
   the data and polled by the target under a time limit.
   -DSKIP_MPICH_402_BUGS, -DSKIP_OMPI_414_BUGS: see rma_util.h. */
#include "rma_util.h"

#define K 20      /* increments per rank */
#define SLOTS 8   /* ints per origin in the all-to-all areas */

static int rank, size;

/* Window layout (ints): [0] counter, [1] flag, [2..2+SLOTS*size) data */
#define CNT 0
#define FLAG 1
#define DATA 2

static void counter(int flavor, int *w, MPI_Win win)
{
    const char *fl = rma_flavor_name(flavor);
    for (int k = 0; k < K; k++) {
        int v = -1;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Get(&v, 1, MPI_INT, 0, CNT, 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        v++;
        CHECK_MPI(MPI_Put(&v, 1, MPI_INT, 0, CNT, 1, MPI_INT, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK(w[CNT] == K * size, "%s: counter = %d after %d increments by %d ranks", fl, w[CNT],
              K, size);
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Every rank writes its own area under a lock on itself, then all read all. */
static void shared_and_self(int flavor, int *w, MPI_Win win)
{
    const char *fl = rma_flavor_name(flavor);
    int *data = w + DATA;
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int i = 0; i < SLOTS * size; i++)
        data[i] = rma_value(rank, rank, i, 1);
    int mine[SLOTS];
    for (int i = 0; i < SLOTS; i++)
        mine[i] = rma_value(rank, rank, i, 2);
    /* a Put to itself replaces the last SLOTS ints (after Win_sync: under the
       separate model the stores must reach the public copy first); the loads
       below see it once the lock is released */
    CHECK_MPI(MPI_Win_sync(win));
    CHECK_MPI(MPI_Put(mine, SLOTS, MPI_INT, rank, DATA + SLOTS * (size - 1), SLOTS, MPI_INT, win));
    CHECK_MPI(MPI_Win_unlock(rank, win));
    for (int i = 0; i < SLOTS * size; i++) {
        int want = i >= SLOTS * (size - 1) ? rma_value(rank, rank, i - SLOTS * (size - 1), 2)
                                           : rma_value(rank, rank, i, 1);
        CHECK(data[i] == want, "%s: self lock: [%d] = %d, expected %d", fl, i, data[i], want);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    int *got = malloc(sizeof(int) * SLOTS * size * size);
    for (int t = 0; t < size; t++) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win));
        CHECK_MPI(MPI_Get(got + t * SLOTS * size, SLOTS * size, MPI_INT, t, DATA, SLOTS * size,
                          MPI_INT, win));
        CHECK_MPI(MPI_Win_unlock(t, win));
    }
    int bad = 0;
    for (int t = 0; t < size; t++)
        for (int i = 0; i < SLOTS * size; i++) {
            int want = i >= SLOTS * (size - 1) ? rma_value(t, t, i - SLOTS * (size - 1), 2)
                                               : rma_value(t, t, i, 1);
            if (got[t * SLOTS * size + i] != want && bad++ == 0)
                CHECK(0, "%s: shared-lock Get from %d [%d] = %d, expected %d", fl, t, i,
                      got[t * SLOTS * size + i], want);
        }
    free(got);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* lock_all: Put into every target, flush, Get it back; flush_local of a Put
   lets the origin buffer be reused; flush_local_all makes Gets' results valid. */
static void lock_all_and_flushes(int flavor, int *w, MPI_Win win)
{
    const char *fl = rma_flavor_name(flavor);
    int *data = w + DATA;
    int src[SLOTS], back[SLOTS];
    CHECK_MPI(MPI_Win_lock_all(0, win));
    for (int t = 0; t < size; t++) {
        for (int i = 0; i < SLOTS; i++)
            src[i] = rma_value(rank, t, i, 3);
        CHECK_MPI(MPI_Put(src, SLOTS, MPI_INT, t, DATA + SLOTS * rank, SLOTS, MPI_INT, win));
        /* after flush_local the origin buffer may change without affecting the Put */
        CHECK_MPI(MPI_Win_flush_local(t, win));
        for (int i = 0; i < SLOTS; i++)
            src[i] = -7;
        CHECK_MPI(MPI_Win_flush(t, win));
        for (int i = 0; i < SLOTS; i++)
            back[i] = -8;
        CHECK_MPI(MPI_Get(back, SLOTS, MPI_INT, t, DATA + SLOTS * rank, SLOTS, MPI_INT, win));
        CHECK_MPI(MPI_Win_flush_local(t, win));
        for (int i = 0; i < SLOTS; i++)
            CHECK(back[i] == rma_value(rank, t, i, 3),
                  "%s: Get after flush from %d [%d] = %d, expected %d", fl, t, i, back[i],
                  rma_value(rank, t, i, 3));
    }
    /* second pass: all Puts first, one flush_all, then Gets and flush_local_all */
    int *gets = malloc(sizeof(int) * SLOTS * size);
    for (int t = 0; t < size; t++) {
        for (int i = 0; i < SLOTS; i++)
            src[i] = rma_value(rank, t, i, 4);
        CHECK_MPI(MPI_Put(src, SLOTS, MPI_INT, t, DATA + SLOTS * rank, SLOTS, MPI_INT, win));
        CHECK_MPI(MPI_Win_flush_local_all(win));
    }
    CHECK_MPI(MPI_Win_flush_all(win));
    for (int i = 0; i < SLOTS * size; i++)
        gets[i] = -9;
    for (int t = 0; t < size; t++)
        CHECK_MPI(MPI_Get(gets + SLOTS * t, SLOTS, MPI_INT, t, DATA + SLOTS * rank, SLOTS,
                          MPI_INT, win));
    CHECK_MPI(MPI_Win_flush_local_all(win));
    int bad = 0;
    for (int t = 0; t < size; t++)
        for (int i = 0; i < SLOTS; i++)
            if (gets[SLOTS * t + i] != rma_value(rank, t, i, 4) && bad++ == 0)
                CHECK(0, "%s: Get after flush_all from %d [%d] = %d, expected %d", fl, t, i,
                      gets[SLOTS * t + i], rma_value(rank, t, i, 4));
    free(gets);
    CHECK_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    /* the target sees every origin's last Put once all have unlocked */
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    bad = 0;
    for (int o = 0; o < size; o++)
        for (int i = 0; i < SLOTS; i++)
            if (data[SLOTS * o + i] != rma_value(o, rank, i, 4) && bad++ == 0)
                CHECK(0, "%s: after unlock_all, block of %d [%d] = %d, expected %d", fl, o, i,
                      data[SLOTS * o + i], rma_value(o, rank, i, 4));
    CHECK_MPI(MPI_Win_unlock(rank, win));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Rank r writes data then a flag into rank (r + 1) % size, which polls the
   flag with Win_sync and then checks the data. */
static void sync_flag(int flavor, int *w, MPI_Win win)
{
    const char *fl = rma_flavor_name(flavor);
    volatile int *flag = w + FLAG;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    CHECK_MPI(MPI_Win_lock_all(0, win));
    *flag = 0;
    CHECK_MPI(MPI_Win_sync(win));
    MPI_Barrier(MPI_COMM_WORLD);
    int src[SLOTS], one = 1;
    for (int i = 0; i < SLOTS; i++)
        src[i] = rma_value(rank, right, i, 5);
    CHECK_MPI(MPI_Put(src, SLOTS, MPI_INT, right, DATA, SLOTS, MPI_INT, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    CHECK_MPI(MPI_Put(&one, 1, MPI_INT, right, FLAG, 1, MPI_INT, win));
    CHECK_MPI(MPI_Win_flush(right, win));
    double t0 = MPI_Wtime();
    int seen = 0;
    while (MPI_Wtime() - t0 < RMA_POLL_LIMIT_S) {
        /* The standard lets an implementation hold a passive-target operation
           until the target enters MPI, and Win_sync is only a memory barrier
           (MPICH's Win_sync makes no progress): the Iprobe is that entry. */
        int pending = 0;
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &pending, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Win_sync(win));
        if (*flag == 1) {
            seen = 1;
            break;
        }
    }
    CHECK(seen, "%s: flag from rank %d not seen within %.0f s", fl, left, RMA_POLL_LIMIT_S);
    CHECK_MPI(MPI_Win_sync(win));
    if (seen)
        for (int i = 0; i < SLOTS; i++)
            CHECK(w[DATA + i] == rma_value(left, rank, i, 5),
                  "%s: data before flag [%d] = %d, expected %d", fl, i, w[DATA + i],
                  rma_value(left, rank, i, 5));
    CHECK_MPI(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (rma_skip_single_process("rma_lock"))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int f = 0; f < RMA_NFLAVORS; f++) {
        if (!rma_flavor_enabled(f))
            continue;
        int *w = NULL;
        MPI_Win win;
        rma_win_make(f, (MPI_Aint)sizeof(int) * (DATA + SLOTS * size), sizeof(int),
                     MPI_COMM_WORLD, &w, &win);
        /* initial contents, published before anybody locks */
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
        for (int i = 0; i < DATA + SLOTS * size; i++)
            w[i] = 0;
        CHECK_MPI(MPI_Win_unlock(rank, win));
        MPI_Barrier(MPI_COMM_WORLD);
        counter(f, w, win);
        shared_and_self(f, w, win);
        lock_all_and_flushes(f, w, win);
        sync_flag(f, w, win);
        rma_win_release(f, w, &win);
    }
    return check_finish("rma_lock");
}
