/* ranks: 1 2 4 */
/* MPI_Comm_split_type beyond MPI_COMM_TYPE_SHARED (MPI 4.1 section 7.4.2):
   - MPI_COMM_TYPE_HW_GUIDED and MPI_COMM_TYPE_RESOURCE_GUIDED split by the info key
     "mpi_hw_resource_type": "mpi_shared_memory" gives the same groups as MPI_COMM_TYPE_SHARED;
     a missing key, MPI_INFO_NULL or a value the implementation does not know gives
     MPI_COMM_NULL (the call is still collective);
   - on an intercommunicator (MPI 4.0) the result is an intercommunicator joining the local
     and remote processes of each shared-memory domain. */
#include "check.h"

static int same_group(MPI_Comm a, MPI_Comm b)
{
    MPI_Group ga, gb;
    int r;
    MPI_Comm_group(a, &ga);
    MPI_Comm_group(b, &gb);
    MPI_Group_compare(ga, gb, &r);
    MPI_Group_free(&ga);
    MPI_Group_free(&gb);
    return r == MPI_IDENT;
}

static void guided(int type, const char *name)
{
    MPI_Comm shared, c;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared));
    MPI_Info info;
    MPI_Info_create(&info);

    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, type, 0, MPI_INFO_NULL, &c));
    CHECK(c == MPI_COMM_NULL, "%s with MPI_INFO_NULL gave a communicator", name);
    MPI_Info_set(info, "some_other_key", "mpi_shared_memory");
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, type, 0, info, &c));
    CHECK(c == MPI_COMM_NULL, "%s without mpi_hw_resource_type gave a communicator", name);
    MPI_Info_set(info, "mpi_hw_resource_type", "no_such_resource");
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, type, 0, info, &c));
    CHECK(c == MPI_COMM_NULL, "%s with an unknown resource type gave a communicator", name);

    MPI_Info_set(info, "mpi_hw_resource_type", "mpi_shared_memory");
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, type, 0, info, &c));
    CHECK(c != MPI_COMM_NULL, "%s with mpi_shared_memory gave MPI_COMM_NULL", name);
    if (c != MPI_COMM_NULL) {
        CHECK(same_group(c, shared), "%s with mpi_shared_memory: not the MPI_COMM_TYPE_SHARED group", name);
        int one = 1, sum = 0, n;
        CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c));
        MPI_Comm_size(c, &n);
        CHECK(sum == n, "%s: allreduce over the result gave %d, size %d", name, sum, n);
        MPI_Comm_free(&c);
    }
    MPI_Info_free(&info);
    MPI_Comm_free(&shared);
}

static void on_intercomm(int rank, int size)
{
    if (size < 2)
        return;
    /* two halves: even and odd ranks */
    MPI_Comm half, inter, split;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    CHECK_MPI(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 7, &inter));
    /* What each side should hold: the processes of this host of either parity (the suite also
       runs across hosts), and the lowest world rank of the other parity here leads the other side. */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int nsize, mine = 0, others = 0, their_leader = -1;
    MPI_Comm_size(node, &nsize);
    int here[64];
    MPI_Allgather(&rank, 1, MPI_INT, here, 1, MPI_INT, node);
    for (int i = nsize - 1; i >= 0; i--) {
        if (here[i] % 2 == rank % 2) {
            mine++;
        } else {
            others++;
            their_leader = here[i];
        }
    }
    MPI_Comm_free(&node);
    CHECK_MPI(MPI_Comm_split_type(inter, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &split));
    CHECK(split != MPI_COMM_NULL || others == 0, "split_type on an intercommunicator gave MPI_COMM_NULL");
    if (split != MPI_COMM_NULL) {
        int flag = 0, l2, r2;
        MPI_Comm_test_inter(split, &flag);
        CHECK(flag, "split_type of an intercommunicator is not an intercommunicator");
        MPI_Comm_size(split, &l2);
        MPI_Comm_remote_size(split, &r2);
        CHECK(l2 == mine && r2 == others, "split sizes %d/%d, expected %d/%d (this host's processes of each side)",
              l2, r2, mine, others);
        /* talk across it: local rank 0 of each side swaps world ranks with the other side */
        int lr;
        MPI_Comm_rank(split, &lr);
        if (lr == 0) {
            int theirs = -1;
            CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, 0, 3, &theirs, 1, MPI_INT, 0, 3, split, MPI_STATUS_IGNORE));
            CHECK(theirs == their_leader, "the other side's leader is world rank %d, expected %d", theirs,
                  their_leader);
        }
        MPI_Comm_free(&split);
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    guided(MPI_COMM_TYPE_HW_GUIDED, "MPI_COMM_TYPE_HW_GUIDED");
    guided(MPI_COMM_TYPE_RESOURCE_GUIDED, "MPI_COMM_TYPE_RESOURCE_GUIDED");
    on_intercomm(rank, size);
    return check_finish("comm_split_guided");
}
