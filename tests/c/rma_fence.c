/* ranks: 1 2 3 4 8 */
/* timeout: 60 */
/* Active-target synchronisation with MPI_Win_fence, on windows of both
   flavours (MPI_Win_create over MPI_Alloc_mem memory, MPI_Win_allocate):
   rounds of four epochs in a row, every rank to every rank (itself
   included): Put into the origin's block of every target, Get of every
   target's block back, Accumulate (MPI_SUM into a shared block, then
   MPI_REPLACE), with the assertions MPI_MODE_NOPRECEDE, NOSTORE, NOPUT and
   NOSUCCEED where they hold; results checked after each closing fence.
   Also: an empty epoch, a 64 KiB Put to the right neighbour, displacement
   units of 8 bytes.
   -DSKIP_MPICH_402_BUGS, -DSKIP_OMPI_414_BUGS: see rma_util.h. */
#include "rma_util.h"

#define N 16       /* ints per block */
#define ROUNDS 4
#define BIG (64 * 1024 / (int)sizeof(int))

static int rank, size;

/* Window layout (ints): [size blocks of N: put area][N: accumulate area] */
static void epochs(int flavor)
{
    const char *fl = rma_flavor_name(flavor);
    MPI_Aint bytes = (MPI_Aint)sizeof(int) * N * (size + 1);
    int *w = NULL;
    MPI_Win win;
    rma_win_make(flavor, bytes, sizeof(int), MPI_COMM_WORLD, &w, &win);
    int *acc = w + N * size;
    int *src = malloc(sizeof(int) * N * size);
    int *got = malloc(sizeof(int) * N * size);

    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < N * (size + 1); i++)
            w[i] = -1;
        for (int i = 0; i < N; i++)
            acc[i] = round;
        /* Epoch 1: Puts. The first fence of the window completes no RMA. */
        CHECK_MPI(MPI_Win_fence(round == 0 ? MPI_MODE_NOPRECEDE : 0, win));
        for (int t = 0; t < size; t++) {
            for (int i = 0; i < N; i++)
                src[t * N + i] = rma_value(rank, t, i, round);
            CHECK_MPI(MPI_Put(src + t * N, N, MPI_INT, t, (MPI_Aint)rank * N, N, MPI_INT, win));
        }
        /* No local store since the last fence, and Epoch 2 only reads. */
        CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSTORE | MPI_MODE_NOPUT, win));
        int bad = 0;
        for (int o = 0; o < size; o++)
            for (int i = 0; i < N; i++)
                if (w[o * N + i] != rma_value(o, rank, i, round) && bad++ == 0)
                    CHECK(0, "%s round %d: put block of %d [%d] = %d, expected %d", fl, round, o,
                          i, w[o * N + i], rma_value(o, rank, i, round));
        for (int i = 0; i < N; i++)
            CHECK(acc[i] == round, "%s round %d: Put touched the accumulate area", fl, round);

        /* Epoch 2: Gets of what this rank put into every target. */
        for (int i = 0; i < N * size; i++)
            got[i] = -2;
        for (int t = 0; t < size; t++)
            CHECK_MPI(MPI_Get(got + t * N, N, MPI_INT, t, (MPI_Aint)rank * N, N, MPI_INT, win));
        CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSTORE, win));
        bad = 0;
        for (int t = 0; t < size; t++)
            for (int i = 0; i < N; i++)
                if (got[t * N + i] != rma_value(rank, t, i, round) && bad++ == 0)
                    CHECK(0, "%s round %d: Get from %d [%d] = %d, expected %d", fl, round, t, i,
                          got[t * N + i], rma_value(rank, t, i, round));

        /* Epoch 3: every rank adds (rank + 1) * (i + 1) into every target. */
        for (int i = 0; i < N; i++)
            src[i] = (rank + 1) * (i + 1);
        for (int t = 0; t < size; t++)
            CHECK_MPI(MPI_Accumulate(src, N, MPI_INT, t, (MPI_Aint)N * size, N, MPI_INT,
                                     MPI_SUM, win));
        CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSTORE, win));
        int tri = size * (size + 1) / 2;
        bad = 0;
        for (int i = 0; i < N; i++)
            if (acc[i] != round + tri * (i + 1) && bad++ == 0)
                CHECK(0, "%s round %d: accumulate [%d] = %d, expected %d", fl, round, i, acc[i],
                      round + tri * (i + 1));

        /* Epoch 4: MPI_REPLACE into block 0 of the put area (element i by
           rank i % size); epoch 3's result was read above, and a rank that is
           ahead may already write in this epoch, so it must not touch the
           accumulate area. Nothing follows it until the next round's stores. */
        for (int i = 0; i < N; i++)
            src[i] = rma_value(rank, 0, i, round) + 5;
        for (int t = 0; t < size; t++)
            for (int i = rank; i < N; i += size)
                CHECK_MPI(MPI_Accumulate(src + i, 1, MPI_INT, t, i, 1, MPI_INT, MPI_REPLACE, win));
        CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
        bad = 0;
        for (int i = 0; i < N; i++)
            if (w[i] != rma_value(i % size, 0, i, round) + 5 && bad++ == 0)
                CHECK(0, "%s round %d: replace [%d] = %d, expected %d", fl, round, i, w[i],
                      rma_value(i % size, 0, i, round) + 5);
    }

    /* An epoch without operations leaves the window as it is. */
    for (int i = 0; i < N; i++)
        w[i] = 77 + i;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++)
        CHECK(w[i] == 77 + i, "%s: empty epoch changed [%d] to %d", fl, i, w[i]);
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    free(src);
    free(got);
    rma_win_release(flavor, w, &win);
}

/* One large Put to the right neighbour, and displacement units of 8 bytes. */
static void big_and_units(int flavor)
{
    const char *fl = rma_flavor_name(flavor);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int *w = NULL;
    MPI_Win win;
    rma_win_make(flavor, (MPI_Aint)sizeof(int) * BIG, sizeof(int), MPI_COMM_WORLD, &w, &win);
    int *src = malloc(sizeof(int) * BIG);
    for (int i = 0; i < BIG; i++) {
        src[i] = rma_value(rank, right, i, 9);
        w[i] = -1;
    }
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    CHECK_MPI(MPI_Put(src, BIG, MPI_INT, right, 0, BIG, MPI_INT, win));
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    int bad = 0;
    for (int i = 0; i < BIG; i++)
        if (w[i] != rma_value(left, rank, i, 9) && bad++ == 0)
            CHECK(0, "%s: 64 KiB put [%d] = %d, expected %d", fl, i, w[i],
                  rma_value(left, rank, i, 9));
    free(src);
    rma_win_release(flavor, w, &win);

    /* disp_unit 8: target_disp k addresses bytes 8k..8k+7 */
    double *d = NULL;
    rma_win_make(flavor, (MPI_Aint)sizeof(double) * 8, sizeof(double), MPI_COMM_WORLD, &d, &win);
    for (int i = 0; i < 8; i++)
        d[i] = -1.0;
    double v = 1000.0 + rank;
    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Put(&v, 1, MPI_DOUBLE, right, 5, 1, MPI_DOUBLE, win));
    CHECK_MPI(MPI_Win_fence(0, win));
    for (int i = 0; i < 8; i++)
        CHECK(d[i] == (i == 5 ? 1000.0 + left : -1.0), "%s: disp_unit 8: [%d] = %g", fl, i,
              d[i]);
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    rma_win_release(flavor, d, &win);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (rma_skip_single_process("rma_fence"))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int f = 0; f < RMA_NFLAVORS; f++) {
        if (!rma_flavor_enabled(f))
            continue;
        epochs(f);
        big_and_units(f);
    }
    return check_finish("rma_fence");
}
