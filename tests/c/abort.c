/* ranks: 3 */
/* expect-exit: 7 */
/* max-time: 10 */
/* MPI_Abort(MPI_COMM_WORLD, 7) from rank 1 of 3 while the others block in
   MPI_Recv: the whole job ends promptly and mpiexec exits with status 7
   (the standard asks that the errorcode be returned to the invoking
   environment where possible). Baton's mpiexec is expected to print which
   rank aborted (rank 1, code 7) and exit 7. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1 || size == 1) {
        MPI_Abort(MPI_COMM_WORLD, 7);
        printf("FAIL MPI_Abort returned\n");
        return 0;
    }
    int x;
    MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never satisfied */
    printf("FAIL rank %d: Recv returned after MPI_Abort\n", rank);
    MPI_Finalize();
    return 0;
}
