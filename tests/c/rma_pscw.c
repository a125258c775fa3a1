/* ranks: 1 2 3 4 8 */
/* timeout: 60 */
/* General active-target synchronisation (post/start/complete/wait), on
   windows of both flavours (see rma_util.h): a ring (access group = right
   neighbour, exposure group = left neighbour) with Put, then Get back; all to
   all (every rank in both groups) with Put and Accumulate, the exposure epoch
   closed by MPI_Win_test polled until it reports completion (under a time
   limit); MPI_MODE_NOCHECK on post and start (the posts done before a
   barrier); MPI_MODE_NOSTORE / NOPUT on post; empty groups (MPI_GROUP_EMPTY
   on both sides, and rank 0 accessing everybody while exposing nothing);
   several epochs in a row on the same window.
   -DSKIP_MPICH_402_BUGS, -DSKIP_OMPI_414_BUGS: see rma_util.h and below. */
#include "rma_util.h"

#define N 8

/* MPICH 4.0.2 now and then hangs when one rank opens an epoch (Win_start
   of the ring, Win_start of an empty group) while another still closes the
   previous one (about one run in five at 4 and 8 ranks, a rank blocked in
   Win_start whose matching post was made): -DSKIP_MPICH_402_BUGS puts a
   barrier between the cases. */
static void separate_cases(void)
{
#ifdef SKIP_MPICH_402_BUGS
    MPI_Barrier(MPI_COMM_WORLD);
#endif
}

static int rank, size;
static MPI_Group world_group;

static MPI_Group single(int r)
{
    MPI_Group g;
    CHECK_MPI(MPI_Group_incl(world_group, 1, &r, &g));
    return g;
}

static void ring(int flavor, int *w, MPI_Win win, int round)
{
    const char *fl = rma_flavor_name(flavor);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Group gl = single(left), gr = single(right);
    for (int i = 0; i < N * size; i++)
        w[i] = -1;
    int src[N], back[N];
    for (int i = 0; i < N; i++)
        src[i] = rma_value(rank, right, i, round);
    CHECK_MPI(MPI_Win_post(gl, 0, win));
    CHECK_MPI(MPI_Win_start(gr, 0, win));
    CHECK_MPI(MPI_Put(src, N, MPI_INT, right, 0, N, MPI_INT, win));
    CHECK_MPI(MPI_Win_complete(win));
    CHECK_MPI(MPI_Win_wait(win));
    for (int i = 0; i < N; i++)
        CHECK(w[i] == rma_value(left, rank, i, round), "%s ring round %d: [%d] = %d, expected %d",
              fl, round, i, w[i], rma_value(left, rank, i, round));
    for (int i = N; i < N * size; i++)
        CHECK(w[i] == -1, "%s ring round %d: [%d] written (%d)", fl, round, i, w[i]);

    /* Get it back; the window is only read in this epoch */
    for (int i = 0; i < N; i++)
        back[i] = -2;
    CHECK_MPI(MPI_Win_post(gl, MPI_MODE_NOSTORE | MPI_MODE_NOPUT, win));
    CHECK_MPI(MPI_Win_start(gr, 0, win));
    CHECK_MPI(MPI_Get(back, N, MPI_INT, right, 0, N, MPI_INT, win));
    CHECK_MPI(MPI_Win_complete(win));
    for (int i = 0; i < N; i++)
        CHECK(back[i] == rma_value(rank, right, i, round),
              "%s ring round %d: Get [%d] = %d, expected %d", fl, round, i, back[i],
              rma_value(rank, right, i, round));
    CHECK_MPI(MPI_Win_wait(win));
    MPI_Group_free(&gl);
    MPI_Group_free(&gr);
}

static void all_to_all(int flavor, int *w, MPI_Win win, int nocheck)
{
    const char *fl = rma_flavor_name(flavor);
    int a = nocheck ? MPI_MODE_NOCHECK : 0;
    for (int i = 0; i < N * size; i++)
        w[i] = 0;
    CHECK_MPI(MPI_Win_post(world_group, a, win));
    if (nocheck) /* every post is done before any start */
        MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_Win_start(world_group, a, win));
    int *src = malloc(sizeof(int) * N * size), one[N];
    for (int i = 0; i < N; i++)
        one[i] = rank + i;
    for (int t = 0; t < size; t++) {
        for (int i = 0; i < N; i++)
            src[N * t + i] = rma_value(rank, t, i, nocheck);
        /* block `rank` by Put; block 0 collects an MPI_SUM from everybody */
        if (rank != 0)
            CHECK_MPI(MPI_Put(src + N * t, N, MPI_INT, t, (MPI_Aint)N * rank, N, MPI_INT, win));
        CHECK_MPI(MPI_Accumulate(one, N, MPI_INT, t, 0, N, MPI_INT, MPI_SUM, win));
    }
    CHECK_MPI(MPI_Win_complete(win));
    free(src);
    int flag = 0, polls = 0;
    double t0 = MPI_Wtime();
    while (!flag && MPI_Wtime() - t0 < RMA_POLL_LIMIT_S) {
        CHECK_MPI(MPI_Win_test(win, &flag));
        polls++;
    }
    CHECK(flag, "%s all-to-all: Win_test not true within %.0f s (%d polls)", fl,
          RMA_POLL_LIMIT_S, polls);
    if (!flag)
        return;
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (w[i] != size * i + size * (size - 1) / 2 && bad++ == 0)
            CHECK(0, "%s all-to-all nocheck=%d: sum [%d] = %d, expected %d", fl, nocheck, i, w[i],
                  size * i + size * (size - 1) / 2);
    for (int o = 1; o < size; o++)
        for (int i = 0; i < N; i++)
            if (w[N * o + i] != rma_value(o, rank, i, nocheck) && bad++ == 0)
                CHECK(0, "%s all-to-all nocheck=%d: block of %d [%d] = %d, expected %d", fl,
                      nocheck, o, i, w[N * o + i], rma_value(o, rank, i, nocheck));
}

/* Empty groups: nothing to wait for on either side. Then rank 0 accesses all
   others, which expose to rank 0 only, while rank 0 exposes nothing. */
static void empty_groups(int flavor, int *w, MPI_Win win)
{
    const char *fl = rma_flavor_name(flavor);
    for (int i = 0; i < N * size; i++)
        w[i] = -1;
    CHECK_MPI(MPI_Win_post(MPI_GROUP_EMPTY, 0, win));
    CHECK_MPI(MPI_Win_start(MPI_GROUP_EMPTY, 0, win));
    CHECK_MPI(MPI_Win_complete(win));
    CHECK_MPI(MPI_Win_wait(win));
    for (int i = 0; i < N * size; i++)
        CHECK(w[i] == -1, "%s: empty epoch wrote [%d] = %d", fl, i, w[i]);

    MPI_Group others, g0 = single(0);
    int zero = 0;
    CHECK_MPI(MPI_Group_excl(world_group, 1, &zero, &others));
    CHECK_MPI(MPI_Win_post(rank == 0 ? MPI_GROUP_EMPTY : g0, 0, win));
    if (rank == 0) { /* on one process `others` is empty */
        int *v = malloc(sizeof(int) * size);
        CHECK_MPI(MPI_Win_start(others, 0, win));
        for (int t = 1; t < size; t++) {
            v[t] = rma_value(0, t, 0, 7);
            CHECK_MPI(MPI_Put(v + t, 1, MPI_INT, t, 3, 1, MPI_INT, win));
        }
        CHECK_MPI(MPI_Win_complete(win));
        free(v);
    }
    CHECK_MPI(MPI_Win_wait(win));
    for (int i = 0; i < N * size; i++) {
        int want = (rank != 0 && i == 3) ? rma_value(0, rank, 0, 7) : -1;
        CHECK(w[i] == want, "%s: exposure to rank 0 only: [%d] = %d, expected %d", fl, i, w[i],
              want);
    }
    MPI_Group_free(&others);
    MPI_Group_free(&g0);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (rma_skip_single_process("rma_pscw"))
        return 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    for (int f = 0; f < RMA_NFLAVORS; f++) {
        if (!rma_flavor_enabled(f))
            continue;
        int *w = NULL;
        MPI_Win win;
        rma_win_make(f, (MPI_Aint)sizeof(int) * N * size, sizeof(int), MPI_COMM_WORLD, &w, &win);
        for (int round = 0; round < 3; round++) {
            ring(f, w, win, round);
            separate_cases();
        }
        all_to_all(f, w, win, 0);
        separate_cases();
        all_to_all(f, w, win, 1);
        separate_cases();
        empty_groups(f, w, win);
        rma_win_release(f, w, &win);
    }
    MPI_Group_free(&world_group);
    return check_finish("rma_pscw");
}
