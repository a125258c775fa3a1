/* ranks: 1 2 3 */
/* A datatype freed while operations that use it are pending or persistent: MPI_Type_free does
   not disturb them. Persistent sends and receives started again after the free, nonblocking ones
   pending across it, and persistent and nonblocking reductions whose user function receives the
   freed type's handle (which must still name the type: its size and extent are queried there). */
#include "check.h"

static MPI_Datatype expected_type; /* the handle the user function must receive */
static int op_calls, op_bad;

/* Adds pairs of doubles; checks that the datatype handle it gets is still a valid type of two
   doubles. */
static void add_pairs(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int size = -1;
    MPI_Aint lb = -1, extent = -1;
    op_calls++;
    if (*dt != expected_type || MPI_Type_size(*dt, &size) != MPI_SUCCESS ||
        MPI_Type_get_extent(*dt, &lb, &extent) != MPI_SUCCESS || size != 16 || lb != 0 || extent != 16)
        op_bad++;
    double *a = in, *b = inout;
    for (int i = 0; i < 2 * *len; i++)
        b[i] += a[i];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int to = (rank + 1) % size, from = (rank + size - 1) % size;

    /* Persistent send and receive of a strided type, freed before the first start. */
    MPI_Datatype col;
    CHECK_MPI(MPI_Type_vector(4, 1, 3, MPI_INT, &col));
    CHECK_MPI(MPI_Type_commit(&col));
    int s[12], r[12];
    MPI_Request pr[2];
    CHECK_MPI(MPI_Recv_init(r, 1, col, from, 1, MPI_COMM_WORLD, &pr[0]));
    CHECK_MPI(MPI_Send_init(s, 1, col, to, 1, MPI_COMM_WORLD, &pr[1]));
    CHECK_MPI(MPI_Type_free(&col));
    CHECK(col == MPI_DATATYPE_NULL, "MPI_Type_free did not set the handle to MPI_DATATYPE_NULL");
    /* A new type made now must not disturb the requests either. */
    MPI_Datatype other;
    CHECK_MPI(MPI_Type_contiguous(7, MPI_CHAR, &other));
    CHECK_MPI(MPI_Type_commit(&other));
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 12; i++) {
            s[i] = 1000 * round + 100 * rank + i;
            r[i] = -1;
        }
        CHECK_MPI(MPI_Startall(2, pr));
        MPI_Status st[2];
        CHECK_MPI(MPI_Waitall(2, pr, st));
        int n = -1;
        MPI_Get_count(&st[0], MPI_INT, &n);
        CHECK(n == 4, "round %d: received %d ints", round, n);
        for (int i = 0; i < 12; i++) {
            int want = i % 3 == 0 ? 1000 * round + 100 * from + i : -1;
            CHECK(r[i] == want, "round %d: r[%d] = %d, expected %d", round, i, r[i], want);
        }
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);
    MPI_Type_free(&other);

    /* Nonblocking: the type is freed while the receive is pending. */
    MPI_Datatype pair;
    CHECK_MPI(MPI_Type_create_resized(MPI_INT, 0, 8, &pair));
    CHECK_MPI(MPI_Type_commit(&pair));
    int rr[10];
    for (int i = 0; i < 10; i++)
        rr[i] = -1;
    int ss[5] = {rank, rank + 1, rank + 2, rank + 3, rank + 4};
    MPI_Request q[2];
    CHECK_MPI(MPI_Irecv(rr, 5, pair, from, 2, MPI_COMM_WORLD, &q[0]));
    CHECK_MPI(MPI_Type_free(&pair));
    CHECK_MPI(MPI_Isend(ss, 5, MPI_INT, to, 2, MPI_COMM_WORLD, &q[1]));
    CHECK_MPI(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 10; i++) {
        int want = i % 2 == 0 ? from + i / 2 : -1;
        CHECK(rr[i] == want, "pending receive: rr[%d] = %d, expected %d", i, rr[i], want);
    }

    /* Reductions with a user function on a derived type freed after the call that made them. */
    MPI_Datatype two;
    CHECK_MPI(MPI_Type_contiguous(2, MPI_DOUBLE, &two));
    CHECK_MPI(MPI_Type_commit(&two));
    expected_type = two;
    MPI_Op op;
    CHECK_MPI(MPI_Op_create(add_pairs, 1, &op));
    double x[6], y[6], z[6];
    MPI_Request red[2];
    CHECK_MPI(MPI_Allreduce_init(x, y, 3, two, op, MPI_COMM_WORLD, MPI_INFO_NULL, &red[0]));
    for (int i = 0; i < 6; i++)
        x[i] = rank + i;
    CHECK_MPI(MPI_Iallreduce(x, z, 3, two, op, MPI_COMM_WORLD, &red[1]));
    CHECK_MPI(MPI_Type_free(&two));
    CHECK_MPI(MPI_Wait(&red[1], MPI_STATUS_IGNORE));
    double ranks = size * (size - 1) / 2.0;
    for (int i = 0; i < 6; i++)
        CHECK(z[i] == ranks + size * i, "iallreduce: z[%d] = %g, expected %g", i, z[i], ranks + size * i);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 6; i++) {
            x[i] = rank * (round + 1) + i;
            y[i] = -1;
        }
        CHECK_MPI(MPI_Start(&red[0]));
        CHECK_MPI(MPI_Wait(&red[0], MPI_STATUS_IGNORE));
        for (int i = 0; i < 6; i++)
            CHECK(y[i] == ranks * (round + 1) + size * i, "persistent allreduce round %d: y[%d] = %g", round, i,
                  y[i]);
    }
    CHECK(op_bad == 0, "the user function got an invalid datatype handle %d of %d times", op_bad, op_calls);
    /* Some algorithms leave a process only sending its data and receiving the result (one of 3
       in recursive doubling), so the calls are counted over all processes. */
    int all_calls = 0;
    MPI_Allreduce(&op_calls, &all_calls, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (size > 1)
        CHECK(all_calls > 0, "the user function was never called on any process");
    MPI_Request_free(&red[0]);
    MPI_Op_free(&op);
    return check_finish("dtype_free_pending");
}
