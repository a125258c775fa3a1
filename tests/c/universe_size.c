/* ranks: 1 2 */
/* one-host */
/* MPI_UNIVERSE_SIZE is the number of slots the launcher knows of, not the
   job's size: without a host list, the CPUs of this host (those the
   launcher may use, which an unbound rank inherits), at least the job's
   size. universe_hosts.c checks a host list with a slot count. */
#define _GNU_SOURCE
#include "check.h"
#include <sched.h>

#ifndef EXPECTED_UNIVERSE
#define EXPECTED_UNIVERSE 0 /* from this host's CPUs */
#endif
#ifndef TEST_NAME
#define TEST_NAME "universe_size"
#endif

int main(int argc, char **argv)
{
    cpu_set_t mask;
    CHECK(sched_getaffinity(0, sizeof mask, &mask) == 0, "sched_getaffinity failed");
    MPI_Init(&argc, &argv);
    int size, flag = 0, *universe = NULL;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &universe, &flag));
    int want = EXPECTED_UNIVERSE;
    if (want == 0)
        want = CPU_COUNT(&mask) > size ? CPU_COUNT(&mask) : size;
    CHECK(flag, "MPI_UNIVERSE_SIZE is not set");
    if (flag)
        CHECK(*universe == want, "MPI_UNIVERSE_SIZE is %d, expected %d (job size %d)", *universe, want, size);
    return check_finish(TEST_NAME);
}
