/* ranks: 1 */
/* one-host */
/* mpiexec-args: -host localhost:5 */
/* MPI_UNIVERSE_SIZE under `mpiexec -host localhost:5 -n 1`: the 5 slots of
   the host list, not the job's 1 process (the check is universe_size.c's). */
#define EXPECTED_UNIVERSE 5
#define TEST_NAME "universe_hosts"
#include "universe_size.c"
