/* ranks: 1 2 */
/* Checked handles: a garbage value, a freed handle and a handle of the wrong kind are reported
   with the right error class under MPI_ERRORS_RETURN, never dereferenced (no crash). This is
   a Baton guarantee beyond the standard (which calls such calls erroneous): MPIs whose handles
   are pointers crash here. */
#include "check.h"
#include <stdint.h>

#define GARBAGE(T) ((T)(uintptr_t)0xdeadbeef12345678ull)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int x = 0, size = -1, flag = 0;
    MPI_Status st;

    /* communicators */
    CHECK_ERR_CLASS(MPI_Comm_size(GARBAGE(MPI_Comm), &size), MPI_ERR_COMM);
    MPI_Comm dup, freed;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    freed = dup;
    CHECK_MPI(MPI_Comm_free(&dup));
    CHECK(dup == MPI_COMM_NULL, "Comm_free did not set the handle to MPI_COMM_NULL");
    CHECK_ERR_CLASS(MPI_Comm_size(freed, &size), MPI_ERR_COMM);
    CHECK_ERR_CLASS(MPI_Send(&x, 1, MPI_INT, 0, 0, freed), MPI_ERR_COMM);
    MPI_Group g;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &g));
    CHECK_ERR_CLASS(MPI_Comm_size((MPI_Comm)(uintptr_t)g, &size), MPI_ERR_COMM); /* wrong kind */
    CHECK_ERR_CLASS(MPI_Group_size((MPI_Group)(uintptr_t)MPI_COMM_WORLD, &size), MPI_ERR_GROUP);
    CHECK_ERR_CLASS(MPI_Group_size(GARBAGE(MPI_Group), &size), MPI_ERR_GROUP);
    MPI_Group gf = g;
    CHECK_MPI(MPI_Group_free(&g));
    CHECK_ERR_CLASS(MPI_Group_size(gf, &size), MPI_ERR_GROUP);

    /* datatypes */
    CHECK_ERR_CLASS(MPI_Send(&x, 1, GARBAGE(MPI_Datatype), 0, 0, MPI_COMM_SELF), MPI_ERR_TYPE);
    CHECK_ERR_CLASS(MPI_Type_size((MPI_Datatype)(uintptr_t)MPI_COMM_WORLD, &size), MPI_ERR_TYPE);
    MPI_Datatype t, tf;
    CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &t));
    CHECK_ERR_CLASS(MPI_Send(&x, 0, t, 0, 0, MPI_COMM_SELF), MPI_ERR_TYPE); /* not committed */
    CHECK_MPI(MPI_Type_commit(&t));
    tf = t;
    CHECK_MPI(MPI_Type_free(&t));
    CHECK_ERR_CLASS(MPI_Type_size(tf, &size), MPI_ERR_TYPE);

    /* requests */
    MPI_Request r = GARBAGE(MPI_Request);
    CHECK_ERR_CLASS(MPI_Wait(&r, &st), MPI_ERR_REQUEST);
    r = (MPI_Request)(uintptr_t)MPI_COMM_WORLD;
    CHECK_ERR_CLASS(MPI_Test(&r, &flag, &st), MPI_ERR_REQUEST);
    MPI_Request done, stale;
    CHECK_MPI(MPI_Isend(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &done));
    stale = done;
    CHECK_MPI(MPI_Wait(&done, &st));
    CHECK(done == MPI_REQUEST_NULL, "Wait did not set the request to MPI_REQUEST_NULL");
    CHECK_ERR_CLASS(MPI_Wait(&stale, &st), MPI_ERR_REQUEST);
    CHECK_ERR_CLASS(MPI_Request_free(&stale), MPI_ERR_REQUEST);
    MPI_Request arr[2] = {MPI_REQUEST_NULL, GARBAGE(MPI_Request)};
    CHECK_ERR_CLASS(MPI_Waitall(2, arr, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST);

    /* info, errhandler, op */
    MPI_Info info, infof;
    CHECK_MPI(MPI_Info_create(&info));
    infof = info;
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_ERR_CLASS(MPI_Info_set(infof, "k", "v"), MPI_ERR_INFO);
    CHECK_ERR_CLASS(MPI_Info_set(GARBAGE(MPI_Info), "k", "v"), MPI_ERR_INFO);
    CHECK_ERR_CLASS(MPI_Comm_set_errhandler(MPI_COMM_WORLD, GARBAGE(MPI_Errhandler)), MPI_ERR_ERRHANDLER);
    int in = 1, out = 0;
    CHECK_ERR_CLASS(MPI_Allreduce(&in, &out, 1, MPI_INT, GARBAGE(MPI_Op), MPI_COMM_WORLD), MPI_ERR_OP);

    /* the library still works after all of that */
    int got = -1;
    CHECK_MPI(MPI_Sendrecv(&in, 1, MPI_INT, 0, 7, &got, 1, MPI_INT, 0, 7, MPI_COMM_SELF, &st));
    CHECK(got == 1, "self sendrecv after bad handles gave %d", got);
    return check_finish("handles");
}
