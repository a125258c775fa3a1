/* ranks: 1 2 3 4 */
/* The MPI_Count (`_c`) forms of the collectives with vector arguments, reductions and scans,
   checked against values computed from rank numbers (uneven counts, reversed displacements). */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Count counts[64];
    MPI_Aint displs[64];
    int total = 0;
    for (int i = size - 1; i >= 0; i--) { /* block i holds i+1 ints, blocks in reverse order */
        counts[i] = i + 1;
        displs[i] = total;
        total += i + 1;
    }
    int mine[64], all[256], expect[256];
    for (int k = 0; k <= rank; k++)
        mine[k] = 100 * rank + k;
    for (int i = 0; i < size; i++)
        for (int k = 0; k <= i; k++)
            expect[displs[i] + k] = 100 * i + k;

    for (int k = 0; k < total; k++) all[k] = -1;
    CHECK_MPI(MPI_Allgatherv_c(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD));
    for (int k = 0; k < total; k++)
        CHECK(all[k] == expect[k], "Allgatherv_c[%d] = %d, expected %d", k, all[k], expect[k]);

    for (int k = 0; k < total; k++) all[k] = -1;
    int root = size - 1;
    CHECK_MPI(MPI_Gatherv_c(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, root, MPI_COMM_WORLD));
    if (rank == root)
        for (int k = 0; k < total; k++)
            CHECK(all[k] == expect[k], "Gatherv_c[%d] = %d, expected %d", k, all[k], expect[k]);

    int got[64];
    for (int k = 0; k < 64; k++) got[k] = -1;
    CHECK_MPI(MPI_Scatterv_c(expect, counts, displs, MPI_INT, got, rank + 1, MPI_INT, 0, MPI_COMM_WORLD));
    for (int k = 0; k <= rank; k++)
        CHECK(got[k] == 100 * rank + k, "Scatterv_c[%d] = %d", k, got[k]);

    /* reductions: every rank contributes rank+1 in each slot */
    int in[64], out[64];
    for (int k = 0; k < 64; k++) in[k] = rank + 1;
    int sum = size * (size + 1) / 2;
    CHECK_MPI(MPI_Reduce_scatter_block_c(in, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(out[0] == sum && out[1] == sum, "Reduce_scatter_block_c %d %d, expected %d", out[0], out[1], sum);
    MPI_Count rc[64];
    for (int i = 0; i < size; i++) rc[i] = i + 1;
    for (int k = 0; k < 64; k++) out[k] = -1;
    CHECK_MPI(MPI_Reduce_scatter_c(in, out, rc, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (int k = 0; k <= rank; k++)
        CHECK(out[k] == sum, "Reduce_scatter_c[%d] = %d, expected %d", k, out[k], sum);
    CHECK_MPI(MPI_Scan_c(in, out, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(out[2] == (rank + 1) * (rank + 2) / 2, "Scan_c %d", out[2]);
    out[0] = -1;
    CHECK_MPI(MPI_Exscan_c(in, out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank > 0)
        CHECK(out[0] == rank * (rank + 1) / 2, "Exscan_c %d, expected %d", out[0], rank * (rank + 1) / 2);
    int a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
    CHECK_MPI(MPI_Reduce_local_c(a, b, 3, MPI_INT, MPI_SUM));
    CHECK(b[0] == 11 && b[2] == 33, "Reduce_local_c %d %d", b[0], b[2]);
    return check_finish("coll_large_count");
}
