/* ranks: 1 2 4 8 */
/* The library leaves the application's CPU affinity alone: MPI_Init returns
   with the mask the process started with (an MPI may place a rank, but must
   not leave it narrowed), and a mask the application sets after MPI_Init
   survives blocking waits, long ones that sleep included. With more ranks
   than cores this exercises Baton's return to a home CPU (BATON_PLACE): each
   rank pins itself to a CPU other than the one cyclic order would choose. */
#define _GNU_SOURCE
#include "check.h"
#include <sched.h>
#include <time.h>

static void pause_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* A token ring of `rounds`, then a barrier that rank 0 enters late, so the
   others wait long enough to sleep rather than poll. */
static void communicate(int rank, int size, int rounds)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, token = 0;
    for (int i = 0; i < rounds && size > 1; i++) {
        if (rank == 0) {
            token = i;
            MPI_Send(&token, 1, MPI_INT, next, 0, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(token == i, "round %d: token came back as %d", i, token);
        } else {
            MPI_Recv(&token, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&token, 1, MPI_INT, next, 0, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        pause_ms(50);
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    cpu_set_t before, after, mine, now;
    CHECK(sched_getaffinity(0, sizeof before, &before) == 0, "sched_getaffinity failed");
    CHECK_MPI(MPI_Init(&argc, &argv));
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    CHECK(sched_getaffinity(0, sizeof after, &after) == 0, "sched_getaffinity failed");
    CHECK(CPU_EQUAL(&before, &after), "MPI_Init changed the mask: %d CPUs before, %d after",
          CPU_COUNT(&before), CPU_COUNT(&after));

    /* Waits with the mask as it was: still unchanged afterwards. */
    communicate(rank, size, 200);
    CHECK(sched_getaffinity(0, sizeof now, &now) == 0, "sched_getaffinity failed");
    CHECK(CPU_EQUAL(&before, &now), "communication changed the mask: %d CPUs before, %d after",
          CPU_COUNT(&before), CPU_COUNT(&now));

    /* The application places itself: one CPU, the one after rank mod count. */
    int ncpu = CPU_COUNT(&before), want = -1;
    if (ncpu >= 2) {
        int k = (rank + 1) % ncpu;
        for (int c = 0; c < CPU_SETSIZE && want < 0; c++)
            if (CPU_ISSET(c, &before) && k-- == 0)
                want = c;
        CPU_ZERO(&mine);
        CPU_SET(want, &mine);
        CHECK(sched_setaffinity(0, sizeof mine, &mine) == 0, "sched_setaffinity(%d) failed", want);
        communicate(rank, size, 200);
        CHECK(sched_getaffinity(0, sizeof now, &now) == 0, "sched_getaffinity failed");
        CHECK(CPU_EQUAL(&mine, &now), "the mask set after MPI_Init (CPU %d) was changed to %d CPUs",
              want, CPU_COUNT(&now));
        CHECK(sched_getcpu() == want, "pinned to CPU %d but running on %d", want, sched_getcpu());
        CHECK(sched_setaffinity(0, sizeof before, &before) == 0, "restoring the mask failed");
    } else if (rank == 0) {
        printf("# one CPU allowed: the application's own placement is not exercised\n");
    }
    return check_finish("affinity");
}
