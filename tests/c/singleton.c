/* ranks: singleton */
/* Run WITHOUT mpiexec: MPI_Init works in a singleton, COMM_WORLD has size 1,
   send/receive to self works, Finalize. */
#include "check.h"

int main(int argc, char **argv)
{
    CHECK_MPI(MPI_Init(&argc, &argv));
    int rank = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(rank == 0 && size == 1, "singleton: rank %d size %d", rank, size);
    int v = 42, w = 0;
    MPI_Request r;
    MPI_Status st;
    CHECK_MPI(MPI_Isend(&v, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Recv(&w, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(w == 42 && st.MPI_SOURCE == 0 && st.MPI_TAG == 5, "self message %d", w);
    /* a larger self message */
    size_t n = 1 << 20;
    unsigned char *a = malloc(n), *b = malloc(n);
    check_fill(a, n, 3);
    CHECK_MPI(MPI_Sendrecv(a, (int)n, MPI_BYTE, 0, 6, b, (int)n, MPI_BYTE, 0, 6, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    CHECK(check_verify(b, n, 3) < 0, "1 MiB self Sendrecv");
    free(a);
    free(b);
    return check_finish("singleton");
}
