/* ranks: 3 4 */
/* Collective argument errors Baton reports under MPI_ERRORS_RETURN:
   - a block count that fits but whose n blocks overflow the count type
     (MPI_Allgather_c, MPI_Alltoall_c, MPI_Gather_c, MPI_Scatter_c) is
     MPI_ERR_COUNT, never a wrapped-around buffer size.
   (A BATON_COLL_<NAME> naming no algorithm makes MPI_Init fail: scripts/test.sh,
   settings_error.) */
#include "check.h"
#include <stdint.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char s[8] = {0}, r[8] = {0};
    /* 3 or 4 blocks of this many bytes overflow a 64-bit count to a small positive one
       (3 * huge = 2^64 + 2), the case an unchecked product would get wrong. */
    MPI_Count huge = 6148914691236517206;

    CHECK_ERR_CLASS(MPI_Allgather_c(s, huge, MPI_BYTE, r, huge, MPI_BYTE, MPI_COMM_WORLD), MPI_ERR_COUNT);
    CHECK_ERR_CLASS(MPI_Alltoall_c(s, huge, MPI_BYTE, r, huge, MPI_BYTE, MPI_COMM_WORLD), MPI_ERR_COUNT);
    /* Rank 0 is the root: only there is the whole receive (send) buffer sized. */
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        CHECK_ERR_CLASS(MPI_Gather_c(s, huge, MPI_BYTE, r, huge, MPI_BYTE, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
        CHECK_ERR_CLASS(MPI_Scatter_c(s, huge, MPI_BYTE, r, huge, MPI_BYTE, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    }

    return check_finish("coll_errors");
}
