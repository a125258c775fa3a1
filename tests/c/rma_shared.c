/* ranks: 1 2 3 4 8 */
/* timeout: 60 */
/* A halo exchange through MPI_Win_allocate_shared, contiguous and with
   alloc_shared_noncontig: each rank owns M cells of a periodic 1-D domain,
   and for STEPS steps reads its neighbours' edge cells through the pointers
   of MPI_Win_shared_query, computes, then writes its own cells with plain
   stores; MPI_Win_sync + barrier order the stores and loads (inside a
   lock_all epoch). Each rank checks the whole domain against a serial
   computation, reading every segment by loads and once by MPI_Get on the same
   window. The update is integer arithmetic, so the comparison is exact. */
#include "rma_util.h"

#define M 64
#define STEPS 20
#define MOD 1000003

static int rank, size;

static int initial(int cell) { return (cell * 7919 + 13) % MOD; }
static int stencil(int l, int c, int r) { return (int)(((long)l + 2L * c + 3L * r + 1) % MOD); }

static void halo(int noncontig, MPI_Comm node, const int *reference)
{
    const char *what = noncontig ? "noncontig" : "contiguous";
    MPI_Info info = MPI_INFO_NULL;
    if (noncontig) {
        MPI_Info_create(&info);
        MPI_Info_set(info, "alloc_shared_noncontig", "true");
    }
    int *mine = NULL;
    MPI_Win win;
    CHECK_MPI(MPI_Win_allocate_shared((MPI_Aint)sizeof(int) * M, sizeof(int), info, node, &mine,
                                      &win));
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    int **seg = malloc(sizeof(int *) * size);
    for (int r = 0; r < size; r++) {
        MPI_Aint sz = 0;
        int du = 0;
        CHECK_MPI(MPI_Win_shared_query(win, r, &sz, &du, &seg[r]));
        CHECK(sz >= (MPI_Aint)sizeof(int) * M && du == (int)sizeof(int),
              "%s: shared_query(%d): size %ld disp_unit %d", what, r, (long)sz, du);
    }
    CHECK(seg[rank] == mine, "%s: own segment from shared_query differs", what);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int next[M];

    CHECK_MPI(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    for (int i = 0; i < M; i++)
        mine[i] = initial(rank * M + i);
    CHECK_MPI(MPI_Win_sync(win));
    MPI_Barrier(node);
    CHECK_MPI(MPI_Win_sync(win));
    for (int step = 0; step < STEPS; step++) {
        /* read phase: the neighbours' edges by loads through their pointers */
        volatile int *lp = seg[left], *rp = seg[right];
        int from_left = lp[M - 1], from_right = rp[0];
        for (int i = 0; i < M; i++) {
            int l = i == 0 ? from_left : mine[i - 1];
            int r = i == M - 1 ? from_right : mine[i + 1];
            next[i] = stencil(l, mine[i], r);
        }
        MPI_Barrier(node); /* nobody writes before everybody has read */
        for (int i = 0; i < M; i++)
            mine[i] = next[i];
        CHECK_MPI(MPI_Win_sync(win));
        MPI_Barrier(node);
        CHECK_MPI(MPI_Win_sync(win));
    }
    int bad = 0;
    for (int r = 0; r < size; r++)
        for (int i = 0; i < M; i++)
            if (seg[r][i] != reference[r * M + i] && bad++ == 0)
                CHECK(0, "%s: after %d steps cell %d (rank %d) = %d, expected %d", what, STEPS,
                      r * M + i, r, seg[r][i], reference[r * M + i]);
    /* the same segments through RMA on the shared window */
    int *got = malloc(sizeof(int) * M);
    for (int r = 0; r < size; r++) {
        CHECK_MPI(MPI_Get(got, M, MPI_INT, r, 0, M, MPI_INT, win));
        CHECK_MPI(MPI_Win_flush(r, win));
        for (int i = 0; i < M; i++)
            if (got[i] != reference[r * M + i] && bad++ == 0)
                CHECK(0, "%s: MPI_Get of rank %d cell %d = %d, expected %d", what, r, i, got[i],
                      reference[r * M + i]);
    }
    free(got);
    CHECK_MPI(MPI_Win_unlock_all(win));
    free(seg);
    CHECK_MPI(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &rank);
    MPI_Comm_size(node, &size);
    /* rank and size are those of the node: each host runs its own domain */

    int n = size * M;
    int *ref = malloc(sizeof(int) * n), *tmp = malloc(sizeof(int) * n);
    for (int c = 0; c < n; c++)
        ref[c] = initial(c);
    for (int s = 0; s < STEPS; s++) {
        for (int c = 0; c < n; c++)
            tmp[c] = stencil(ref[(c + n - 1) % n], ref[c], ref[(c + 1) % n]);
        memcpy(ref, tmp, sizeof(int) * n);
    }
    halo(0, node, ref);
    halo(1, node, ref);
    free(ref);
    free(tmp);
    MPI_Comm_free(&node);
    return check_finish("rma_shared");
}
