/* ranks: 1 */
/* MPI_Dims_create returns the most balanced factorization: of all ways to write the free part of
   nnodes as a product of the free dims, one with the smallest spread (largest minus smallest
   entry; the measure of Traeff and Luebbe, EuroMPI 2015) and, among equally spread ones, the
   largest smallest entry (as MPICH chooses), in non-increasing order; non-zero entries stay.
   Known answers (5040 in 3 dims is 21 x 16 x 15, not the 20 x 18 x 14 a greedy search finds),
   then every nnodes up to 1000 in 2 to 5 dims against a brute-force search, then errors. */
#include "check.h"

static void expect(int nnodes, int ndims, const int *in, const int *want)
{
    int d[8];
    memcpy(d, in, sizeof(int) * (size_t)ndims);
    CHECK_MPI(MPI_Dims_create(nnodes, ndims, d));
    for (int i = 0; i < ndims; i++)
        CHECK(d[i] == want[i], "Dims_create(%d, %d): dims[%d] = %d, expected %d", nnodes, ndims, i, d[i], want[i]);
}

/* Brute force over non-increasing factor lists: best (spread, -smallest) of n in k factors <= m. */
static void search(int n, int k, int m, int first, int *best_spread, int *best_min)
{
    if (k == 0) {
        return;
    }
    for (int f = m < n ? m : n; f >= 1; f--) {
        if (n % f)
            continue;
        int top = first ? first : f;
        if (k == 1) {
            if (n == f) {
                int spread = top - f;
                if (spread < *best_spread || (spread == *best_spread && f > *best_min)) {
                    *best_spread = spread;
                    *best_min = f;
                }
            }
            continue;
        }
        search(n / f, k - 1, f, top, best_spread, best_min);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    expect(5040, 3, (int[]){0, 0, 0}, (int[]){21, 16, 15});
    expect(5040, 4, (int[]){0, 7, 0, 0}, (int[]){10, 7, 9, 8});
    expect(6, 2, (int[]){0, 0}, (int[]){3, 2});
    expect(24, 3, (int[]){0, 0, 0}, (int[]){4, 3, 2});
    expect(7, 3, (int[]){0, 0, 0}, (int[]){7, 1, 1});
    expect(12, 3, (int[]){0, 3, 0}, (int[]){2, 3, 2});
    expect(1, 2, (int[]){0, 0}, (int[]){1, 1});
    expect(8, 2, (int[]){2, 4}, (int[]){2, 4});
    expect(2147483647, 2, (int[]){0, 0}, (int[]){2147483647, 1});

    for (int n = 1; n <= 1000; n++) {
        for (int k = 2; k <= 5; k++) {
            int d[5] = {0, 0, 0, 0, 0};
            CHECK_MPI(MPI_Dims_create(n, k, d));
            long prod = 1;
            for (int i = 0; i < k; i++) {
                prod *= d[i];
                if (i)
                    CHECK(d[i - 1] >= d[i], "Dims_create(%d, %d) not non-increasing", n, k);
            }
            CHECK(prod == n, "Dims_create(%d, %d): product %ld", n, k, prod);
            int bs = 1 << 30, bm = 0;
            search(n, k, n, 0, &bs, &bm);
            CHECK(d[0] - d[k - 1] == bs && d[k - 1] == bm,
                  "Dims_create(%d, %d): %d..%d, the most balanced spans %d..%d", n, k, d[k - 1], d[0], bm, bm + bs);
        }
    }

    int d2[2] = {2, 0};
    CHECK_ERR_CLASS(MPI_Dims_create(7, 2, d2), MPI_ERR_DIMS);
    int d3[2] = {-1, 0};
    CHECK_ERR_CLASS(MPI_Dims_create(6, 2, d3), MPI_ERR_DIMS);
    int d4[2] = {2, 2};
    CHECK_ERR_CLASS(MPI_Dims_create(6, 2, d4), MPI_ERR_DIMS);
    return check_finish("topo_dims");
}
