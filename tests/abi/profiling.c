/* Profiling interface: this program defines MPI_Send and MPI_Recv itself, counting calls and
 * forwarding to PMPI_Send / PMPI_Recv. The library must call the application's versions. */
#include <mpi.h>
#include <stdio.h>

static int sends, recvs;

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    sends++;
    return PMPI_Send(buf, count, type, dest, tag, comm);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int src, int tag, MPI_Comm comm, MPI_Status *st) {
    recvs++;
    return PMPI_Recv(buf, count, type, src, tag, comm, st);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, v = 42, got = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Send(&v, 1, MPI_INT, 0, 5 + rank, MPI_COMM_SELF);
    MPI_Recv(&got, 1, MPI_INT, 0, 5 + rank, MPI_COMM_SELF, MPI_STATUS_IGNORE);
    MPI_Finalize();
    if (sends != 1 || recvs != 1 || got != 42) {
        printf("FAIL profiling: sends=%d recvs=%d got=%d\n", sends, recvs, got);
        return 1;
    }
    printf("PASS profiling\n");
    return 0;
}
