/* ranks: 2 3 */
/* timeout: 60 */
/* A nonblocking collective started before a blocking one on one rank and
   after it on the others: the root of each round starts MPI_Iallreduce
   (MPI_BAND, as mpi4py's MPI_Comm_iagree fallback does) and then enters
   MPI_Barrier, the others enter the barrier first and start the allreduce
   after it. MPI asks for one order of collectives per communicator, but MPICH
   and Open MPI keep blocking and nonblocking collectives apart and mpi4py's
   test_ulfm relies on it: each call must match its own, with no truncation
   error and no hang. Also MPI_Ibarrier before a blocking MPI_Allreduce on the
   root only. The communicator is a duplicate under MPI_THREAD_MULTIPLE, which
   has no shared-memory collective area, so every call goes through messages. */
#include "check.h"

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    for (int rep = 0; rep < 3; rep++) {
        for (int root = 0; root < size; root++) {
            /* bit 0 set everywhere, bit 1 only on the root: the AND is 1 */
            int mine = rank == root ? 0xB : 0xD, flag = -1;
            MPI_Request req = MPI_REQUEST_NULL;
            CHECK_MPI(MPI_Barrier(comm));
            if (rank == root) {
                CHECK_MPI(MPI_Iallreduce(&mine, &flag, 1, MPI_INT, MPI_BAND, comm, &req));
                CHECK_MPI(MPI_Barrier(comm));
            } else {
                CHECK_MPI(MPI_Barrier(comm));
                CHECK_MPI(MPI_Iallreduce(&mine, &flag, 1, MPI_INT, MPI_BAND, comm, &req));
            }
            CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
            CHECK(flag == 0x9, "round %d root %d: agreed flag %#x, expected 0x9", rep, root, flag);

            /* an Ibarrier on the root only before a blocking allreduce */
            int sum = -1, one = rank + 1;
            if (rank == root) {
                CHECK_MPI(MPI_Ibarrier(comm, &req));
                CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm));
            } else {
                CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm));
                CHECK_MPI(MPI_Ibarrier(comm, &req));
            }
            CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
            CHECK(sum == size * (size + 1) / 2, "round %d root %d: sum %d, expected %d", rep, root, sum,
                  size * (size + 1) / 2);
        }
    }
    MPI_Comm_free(&comm);
    return check_finish("coll_nb_order");
}
