/* ranks: 2 3 4 8 */
/* Intercommunicators: Intercomm_create from two halves of MPI_COMM_WORLD, test_inter,
   remote size, free. Baton implements intercommunicators with dynamic process management
   (issue 7); until then this test is listed in XFAIL by scripts/test.sh. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, flag = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int low = rank < size / 2;
    MPI_Comm half, inter = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half);
    int remote_leader = low ? size / 2 : 0;
    CHECK_MPI(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, remote_leader, 99, &inter));
    if (inter != MPI_COMM_NULL) {
        CHECK_MPI(MPI_Comm_test_inter(inter, &flag));
        CHECK(flag == 1, "test_inter(intercomm) %d", flag);
        int rs = -1;
        MPI_Comm_remote_size(inter, &rs);
        CHECK(rs == (low ? size - size / 2 : size / 2), "remote size %d", rs);
        MPI_Comm_free(&inter);
    }
    MPI_Comm_free(&half);
    return check_finish("intercomm");
}
