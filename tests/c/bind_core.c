/* ranks: 1 2 4 */
/* mpiexec-args: --bind-to core */
/* `mpiexec --bind-to core`: every rank starts on the CPUs of one core (two
   ranks' masks are equal or disjoint, and a rank's mask is narrower than
   the machine when it has several cores), MPI_Init keeps that mask, and so
   do blocking waits: with more ranks than cores Baton's waits return to a
   home CPU (BATON_PLACE), which must stay within the mask the launcher set.
   The launcher's placement itself (which core for which rank, -c, sockets)
   is tested in crates/baton-launch/tests/binding.rs. */
#define _GNU_SOURCE
#include "check.h"
#include <sched.h>
#include <unistd.h>

#define MASK_BYTES 128 /* the first 1024 CPUs */

static void to_bytes(const cpu_set_t *s, unsigned char *b)
{
    memset(b, 0, MASK_BYTES);
    for (int c = 0; c < MASK_BYTES * 8 && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, s))
            b[c / 8] |= (unsigned char)(1u << (c % 8));
}

int main(int argc, char **argv)
{
    cpu_set_t before, now;
    CHECK(sched_getaffinity(0, sizeof before, &before) == 0, "sched_getaffinity failed");
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(sched_getaffinity(0, sizeof now, &now) == 0, "sched_getaffinity failed");
    CHECK(CPU_EQUAL(&before, &now), "MPI_Init changed the bound mask: %d CPUs before, %d after",
          CPU_COUNT(&before), CPU_COUNT(&now));

    long online = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(CPU_COUNT(&before) >= 1, "empty mask");
    /* One core: fewer CPUs than the machine, unless the machine is one core. */
    if (online >= 2 && CPU_COUNT(&before) == online && rank == 0)
        printf("# the mask holds all %ld CPUs: one core with %ld threads?\n", online, online);

    unsigned char mine[MASK_BYTES], *all = malloc((size_t)size * MASK_BYTES);
    to_bytes(&before, mine);
    MPI_Allgather(mine, MASK_BYTES, MPI_BYTE, all, MASK_BYTES, MPI_BYTE, MPI_COMM_WORLD);
    for (int r = 0; r < size; r++) {
        int equal = memcmp(all + r * MASK_BYTES, mine, MASK_BYTES) == 0, overlap = 0;
        for (int i = 0; i < MASK_BYTES; i++)
            overlap |= all[r * MASK_BYTES + i] & mine[i];
        CHECK(equal || !overlap, "ranks %d and %d are bound to overlapping, different CPU sets", rank, r);
    }
    /* Rank 1 takes the next core when there is one. */
    if (size >= 2 && rank == 0 && CPU_COUNT(&before) < online)
        CHECK(memcmp(all, all + MASK_BYTES, MASK_BYTES) != 0, "ranks 0 and 1 share a core on a machine with several");

    /* Waits that poll, yield and sleep, then the mask is still the launcher's. */
    for (int i = 0; i < 200; i++) {
        int token = i;
        if (size > 1) {
            MPI_Sendrecv_replace(&token, 1, MPI_INT, (rank + 1) % size, 0, (rank + size - 1) % size, 0,
                                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(token == i, "round %d: got %d", i, token);
        }
    }
    if (rank == 0)
        usleep(50000);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(sched_getaffinity(0, sizeof now, &now) == 0, "sched_getaffinity failed");
    CHECK(CPU_EQUAL(&before, &now), "waiting changed the bound mask");
    CHECK(CPU_ISSET(sched_getcpu(), &before), "running on CPU %d, outside the bound mask", sched_getcpu());
    free(all);
    return check_finish("bind_core");
}
