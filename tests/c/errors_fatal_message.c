/* ranks: 2 */
/* expect-exit: nonzero */
/* expect-output: ^mpiexec: rank 1 aborted the job \(code \d+\): MPI_Send: .*7.* \[MPI_ERR_RANK\] \(errors are fatal\)$ */
/* max-time: 10 */
/* An error under the default handler (errors are fatal) ends the job, and
   the launcher's one line says which call failed and why, not that the
   rank called MPI_Abort: rank 1 sends to rank 7 of a 2-rank MPI_COMM_WORLD.
   The expected line is Baton's wording; another MPI passes only the exit
   status check. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, x = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        MPI_Send(&x, 1, MPI_INT, 7, 0, MPI_COMM_WORLD);
        printf("FAIL MPI_Send to rank 7 returned under MPI_ERRORS_ARE_FATAL\n");
    } else {
        MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never satisfied */
        printf("FAIL rank 0: Recv returned\n");
    }
    MPI_Finalize();
    return 0;
}
