/* ranks: 2 3 */
/* expect-exit: nonzero */
/* max-time: 10 */
/* A rank kills itself with SIGKILL while the others block in MPI_Recv
   (rank 0 waits for the dead rank, rank 2 waits for rank 0): the launcher
   must notice the dead process, terminate the rest and exit non-zero within
   a few seconds. Baton's mpiexec is expected to report that rank 1 was
   killed by signal 9 and exit non-zero. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <signal.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        fflush(stdout);
        raise(SIGKILL);
    }
    int x;
    int from = rank == 0 ? 1 : 0;
    MPI_Recv(&x, 1, MPI_INT, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("FAIL rank %d: Recv returned although rank 1 died\n", rank);
    MPI_Finalize();
    return 0;
}
