/* Fault-test helper for the TCP transport: every rank reports ready, then keeps making progress
 * (MPI_Iprobe) until the file named by argv[1] exists, so the test can knock on its ports in the
 * meantime; then a ring exchange and a barrier show the job still works. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, flag, x = 0, y = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Connect every pair first, so each rank listens and has live connections. */
    MPI_Allreduce(&rank, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("ready %d %d\n", rank, (int)getpid());
    fflush(stdout);
    while (argc > 1 && access(argv[1], F_OK) != 0) {
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        usleep(1000);
    }
    MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, 0, &y, 1, MPI_INT, (rank + size - 1) % size, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    if (y != (rank + size - 1) % size || x != size * (size - 1) / 2) {
        printf("FAIL rank %d: got %d and %d\n", rank, y, x);
        return 1;
    }
    printf("done %d\n", rank);
    MPI_Finalize();
    return 0;
}
