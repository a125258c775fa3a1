/* ranks: 1 2 3 4 8 */
/* MPI_Barrier: no rank leaves before the last one enters. In each round
   one rank (rotating) sleeps before entering; every other rank must spend
   at least about that long inside the barrier. Also message-based: a rank
   sends to the sleeper's successor only after the barrier, and the message
   must not be visible before the barrier. Repeated barriers on WORLD, a
   dup, a split and COMM_SELF. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <time.h>

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    const int delay_ms = 150;
    int rounds = size < 4 ? size : 4;
    for (int k = 0; k < rounds; k++) {
        int sleeper = k % size;
        MPI_Barrier(comm); /* line everybody up */
        if (rank == sleeper)
            sleep_ms(delay_ms);
        double t0 = MPI_Wtime();
        CHECK_MPI(MPI_Barrier(comm));
        double dt = MPI_Wtime() - t0;
        if (rank != sleeper)
            CHECK(dt >= 0.8 * delay_ms / 1000.0,
                  "round %d: left the barrier after %.3fs while rank %d slept %dms", k, dt,
                  sleeper, delay_ms);
    }

    /* message-based: before the barrier, nobody has sent; the sleeper sends
       only after it returns from the barrier; a receiver that probes right
       after its own barrier must not find a message sent "before" */
    if (size >= 2) {
        for (int k = 0; k < 3; k++) {
            int flag = -1;
            MPI_Iprobe(MPI_ANY_SOURCE, 77, comm, &flag, MPI_STATUS_IGNORE);
            CHECK(flag == 0, "round %d: message present before the barrier", k);
            if (rank == 0)
                sleep_ms(50);
            MPI_Barrier(comm);
            int v = k;
            if (rank == 0)
                for (int p = 1; p < size; p++)
                    MPI_Send(&v, 1, MPI_INT, p, 77, comm);
            else {
                MPI_Recv(&v, 1, MPI_INT, 0, 77, comm, MPI_STATUS_IGNORE);
                CHECK(v == k, "round %d value %d", k, v);
            }
            MPI_Barrier(comm);
        }
    }

    /* many quick barriers, interleaved on different communicators */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    for (int i = 0; i < 50; i++) {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Barrier(half));
        CHECK_MPI(MPI_Barrier(MPI_COMM_SELF));
        CHECK_MPI(MPI_Barrier(comm));
    }
    /* counters: after each barrier, every rank has the value of the round */
    {
        int *all = malloc(sizeof(int) * (size_t)size);
        for (int i = 0; i < 5; i++) {
            int mine = i;
            MPI_Barrier(comm);
            MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, comm);
            for (int p = 0; p < size; p++)
                CHECK(all[p] == i, "round %d: rank %d reports %d", i, p, all[p]);
        }
        free(all);
    }
    MPI_Comm_free(&half);
    MPI_Comm_free(&comm);
    return check_finish("barrier");
}
