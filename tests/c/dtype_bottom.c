/* ranks: 1 2 3 4 */
/* MPI_BOTTOM: a struct type built from absolute addresses (MPI_Get_address) sends and receives
   with MPI_BOTTOM as the buffer, point-to-point and in MPI_Bcast; a NULL buffer with a
   predefined type is still MPI_ERR_BUFFER. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int ival = 0;
    double dval[3] = {0, 0, 0};
    MPI_Aint addr[2];
    MPI_Get_address(&ival, &addr[0]);
    MPI_Get_address(dval, &addr[1]);
    int len[2] = {1, 3};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, abs_t;
    CHECK_MPI(MPI_Type_create_struct(2, len, addr, types, &abs_t));
    CHECK_MPI(MPI_Type_commit(&abs_t));

    /* point-to-point around a ring (or to self) */
    ival = 100 + rank;
    for (int k = 0; k < 3; k++)
        dval[k] = rank * 10.0 + k;
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    int rival = -1;
    double rdval[3] = {-1, -1, -1};
    MPI_Aint raddr[2];
    MPI_Get_address(&rival, &raddr[0]);
    MPI_Get_address(rdval, &raddr[1]);
    MPI_Datatype rabs_t;
    CHECK_MPI(MPI_Type_create_struct(2, len, raddr, types, &rabs_t));
    CHECK_MPI(MPI_Type_commit(&rabs_t));
    MPI_Status st;
    CHECK_MPI(MPI_Sendrecv(MPI_BOTTOM, 1, abs_t, to, 3, MPI_BOTTOM, 1, rabs_t, from, 3, MPI_COMM_WORLD, &st));
    CHECK(rival == 100 + from, "int part %d, expected %d", rival, 100 + from);
    for (int k = 0; k < 3; k++)
        CHECK(rdval[k] == from * 10.0 + k, "double %d is %g", k, rdval[k]);

    /* a collective with MPI_BOTTOM */
    if (rank == 0) {
        ival = 4242;
        dval[0] = 1.5;
        dval[1] = 2.5;
        dval[2] = 3.5;
    }
    CHECK_MPI(MPI_Bcast(MPI_BOTTOM, 1, abs_t, 0, MPI_COMM_WORLD));
    CHECK(ival == 4242 && dval[0] == 1.5 && dval[2] == 3.5, "bcast via MPI_BOTTOM: %d %g %g", ival, dval[0], dval[2]);

    /* NULL with a predefined type is still an error */
    CHECK_ERR_CLASS(MPI_Send(NULL, 1, MPI_INT, rank, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);

    MPI_Type_free(&abs_t);
    MPI_Type_free(&rabs_t);
    return check_finish("dtype_bottom");
}
