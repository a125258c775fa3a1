/* ranks: 2 3 */
/* expect-exit: nonzero */
/* max-time: 10 */
/* MPI_ERRORS_ABORT (MPI 4.0): set it on a communicator, read it back, then
   raise an error on it: the processes of that communicator (here all of
   COMM_WORLD) must be aborted, so the job exits non-zero promptly and no rank
   reaches the line after the erroneous call.
   Baton is expected to print the error (class MPI_ERR_RANK) and abort the job.
   MPICH 4.0.2: MPI_Comm_set_errhandler(comm, MPI_ERRORS_ABORT) fails an
   internal assertion and aborts; the job still exits non-zero, so the exit
   status check passes there for the wrong reason. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
#if MPI_VERSION < 4
    int r0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r0);
    if (r0 == 0)
        printf("SKIP errors_abort: MPI_ERRORS_ABORT is MPI 4.0, MPI_VERSION is %d\n", MPI_VERSION);
    MPI_Finalize();
    return 0;
#else
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    CHECK_MPI(MPI_Comm_set_errhandler(d, MPI_ERRORS_ABORT));
    MPI_Errhandler got = MPI_ERRHANDLER_NULL;
    CHECK_MPI(MPI_Comm_get_errhandler(d, &got));
    CHECK(got == MPI_ERRORS_ABORT, "get_errhandler did not return MPI_ERRORS_ABORT");
    MPI_Errhandler_free(&got);
    MPI_Barrier(d);
    if (check_failures)
        return 3; /* exits non-zero too, but with a FAIL line */
    if (rank == 0) {
        int x = 0;
        MPI_Send(&x, 1, MPI_INT, size + 5, 0, d); /* invalid rank: aborts */
        printf("FAIL rank 0 survived an error under MPI_ERRORS_ABORT\n");
        fflush(stdout);
        MPI_Finalize();
        return 0;
    }
    /* others wait for a message that never comes; the abort must end them */
    int x;
    MPI_Recv(&x, 1, MPI_INT, 0, 0, d, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
#endif
}
