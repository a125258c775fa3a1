/* ranks: 1 2 */
/* expect-exit: 255 */
/* expect-output: ^Num processors must be a cube of an integer \(rank 0 of \d+\)$ */
/* expect-output: ^rank 0 wrote this line last$ */
/* expect-output: ^mpiexec: rank 0 aborted the job \(code -1\): MPI_Abort\(MPI_COMM_WORLD, -1\) was called$ */
/* max-time: 10 */
/* What a rank prints before MPI_Abort reaches the terminal, as LULESH's
   "Num processors must be a cube" does: rank 0 writes to stdout (a pipe to
   the launcher, so fully buffered by stdio, nothing flushed by hand) and
   aborts with -1, which the launcher turns into exit status 255 as a shell
   would (-1 & 0xff). The other ranks wait in a receive that never completes.
   The launcher's line naming the call is Baton's wording. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        printf("Num processors must be a cube of an integer (rank %d of %d)\n", rank, size);
        for (int i = 0; i < 1000; i++)
            printf("filler line %d, so that the text spans several stdio buffers\n", i);
        printf("rank 0 wrote this line last\n");
        MPI_Abort(MPI_COMM_WORLD, -1);
        printf("FAIL MPI_Abort returned\n");
        return 0;
    }
    int x;
    MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never satisfied */
    printf("FAIL rank %d: Recv returned after MPI_Abort\n", rank);
    MPI_Finalize();
    return 0;
}
