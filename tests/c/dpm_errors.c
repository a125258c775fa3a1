/* ranks: 1 2 3 */
/* timeout: 60 */
/* Bad arguments to the dynamic-process calls give their error class, on
   every rank of a collective call (the root's error is broadcast, so nobody
   waits for a root that gave up), and the job goes on. */
#include "check.h"

#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm c = MPI_COMM_WORLD;

    /* ports */
    CHECK_ERR_CLASS(MPI_Close_port("baton-port:127.0.0.1:1:00"), MPI_ERR_PORT);
    char never[] = "a port nobody opened";
    CHECK_ERR_CLASS(MPI_Comm_accept(never, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c), MPI_ERR_PORT);
    CHECK(c == MPI_COMM_NULL, "a failed accept leaves newcomm %#lx", (unsigned long)c);
    CHECK_ERR_CLASS(MPI_Comm_connect(never, MPI_INFO_NULL, size, MPI_COMM_WORLD, &c), MPI_ERR_ROOT);
    CHECK_ERR_CLASS(MPI_Comm_accept(never, MPI_INFO_NULL, -1, MPI_COMM_WORLD, &c), MPI_ERR_ROOT);
    CHECK_ERR_CLASS(MPI_Open_port(MPI_INFO_NULL, NULL), MPI_ERR_ARG);

    /* spawn: bad arguments at the root reach every rank */
    int codes[4];
    char *args[] = {NULL};
    CHECK_ERR_CLASS(MPI_Comm_spawn(argv[0], args, 0, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c, codes), MPI_ERR_ARG);
    CHECK(c == MPI_COMM_NULL, "a failed spawn leaves intercomm %#lx", (unsigned long)c);
    CHECK_ERR_CLASS(MPI_Comm_spawn(argv[0], args, 1, MPI_INFO_NULL, size, MPI_COMM_WORLD, &c, codes), MPI_ERR_ROOT);
    CHECK_ERR_CLASS(MPI_Comm_spawn(NULL, args, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c, codes), MPI_ERR_ARG);

    /* join: a descriptor that is no connected socket */
    CHECK_ERR_CLASS(MPI_Comm_join(-1, &c), MPI_ERR_OTHER);
    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe");
    CHECK_ERR_CLASS(MPI_Comm_join(pfd[0], &c), MPI_ERR_OTHER);
    close(pfd[0]);
    close(pfd[1]);

    /* names */
    char port[MPI_MAX_PORT_NAME];
    CHECK_ERR_CLASS(MPI_Publish_name("", MPI_INFO_NULL, "p"), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Lookup_name("dpm_errors never published", MPI_INFO_NULL, NULL), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Lookup_name("dpm_errors never published", MPI_INFO_NULL, port), MPI_ERR_NAME);
    CHECK_ERR_CLASS(MPI_Unpublish_name("dpm_errors never published", MPI_INFO_NULL, "p"), MPI_ERR_SERVICE);

    /* the job goes on */
    int one = 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == size, "allreduce after the errors: %d", sum);
    return check_finish("dpm_errors");
}
