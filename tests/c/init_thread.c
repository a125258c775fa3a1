/* ranks: 1 2 3 4 8 */
/* MPI_Init_thread with each requested level reported consistently by
   MPI_Query_thread; requests MPI_THREAD_MULTIPLE. */
#include "check.h"

int main(int argc, char **argv)
{
    int provided = -1;
    CHECK_MPI(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_SINGLE || provided == MPI_THREAD_FUNNELED ||
          provided == MPI_THREAD_SERIALIZED || provided == MPI_THREAD_MULTIPLE,
          "provided %d is not a thread level", provided);
    int q = -1;
    CHECK_MPI(MPI_Query_thread(&q));
    CHECK(q == provided, "Query_thread %d != provided %d", q, provided);
    int flag = 0;
    CHECK_MPI(MPI_Is_thread_main(&flag));
    CHECK(flag, "Is_thread_main false on the thread that called Init_thread");
    flag = 0;
    MPI_Initialized(&flag);
    CHECK(flag, "Initialized false after Init_thread");

    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("# provided thread level %d (MULTIPLE=%d)\n", provided, MPI_THREAD_MULTIPLE);
    return check_finish("init_thread");
}
