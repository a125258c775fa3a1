/* The smallest MPI program that communicates: every rank greets its neighbour in a ring. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, len;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    int token = rank, got = -1;
    MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % size, 0, &got, 1, MPI_INT, (rank + size - 1) % size, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d of %d on %s: received %d from my left neighbour\n", rank, size, host, got);
    MPI_Finalize();
    return got == (rank + size - 1) % size ? 0 : 1;
}
