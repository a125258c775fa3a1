/* ranks: 1 2 */
/* MPI_PROC_NULL with non-blocking and persistent operations: the receive
   completes at once with the empty status (MPI_SOURCE = MPI_PROC_NULL,
   MPI_TAG = MPI_ANY_TAG, count 0) and the buffer is untouched; Probe and
   Mprobe on PROC_NULL (MPI_MESSAGE_NO_PROC).
   MPICH 4.0.2 deviates: MPI_Irecv(…, MPI_PROC_NULL, …) followed by
   Wait/Test reports MPI_SOURCE = 0 and MPI_TAG = 0 (blocking MPI_Recv is
   correct), and persistent MPI_Recv_init(PROC_NULL) + Start + Wait reports
   MPI_SOURCE = MPI_ANY_SOURCE, so this test is expected to FAIL under MPICH.
   A message to or from MPI_PROC_NULL that moves nothing (count 0) may name
   MPI_DATATYPE_NULL, as codes with a missing neighbour do; with a count, or
   with a real peer, MPI_DATATYPE_NULL stays an MPI_ERR_TYPE error. */
#include "check.h"

static void check_empty(const MPI_Status *st, const char *what)
{
    int cnt = -1;
    MPI_Get_count(st, MPI_INT, &cnt);
    CHECK(st->MPI_SOURCE == MPI_PROC_NULL && st->MPI_TAG == MPI_ANY_TAG && cnt == 0,
          "%s: status source %d tag %d count %d, expected PROC_NULL/ANY_TAG/0", what,
          st->MPI_SOURCE, st->MPI_TAG, cnt);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int y = 77, x = 5, flag = 0;
    MPI_Request r;
    MPI_Status st;

    CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Wait(&r, &st));
    check_empty(&st, "Irecv+Wait");
    CHECK(y == 77 && r == MPI_REQUEST_NULL, "Irecv PROC_NULL: buffer %d", y);

    CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Test(&r, &flag, &st));
    CHECK(flag == 1, "Test of a PROC_NULL Irecv not complete");
    check_empty(&st, "Irecv+Test");

    CHECK_MPI(MPI_Isend(&x, 1, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Wait(&r, &st));

    /* persistent */
    CHECK_MPI(MPI_Recv_init(&y, 1, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &r));
    for (int i = 0; i < 3; i++) {
        CHECK_MPI(MPI_Start(&r));
        CHECK_MPI(MPI_Wait(&r, &st));
        check_empty(&st, "Recv_init+Start+Wait");
    }
    MPI_Request_free(&r);

    /* Probe / Iprobe */
    CHECK_MPI(MPI_Probe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st));
    check_empty(&st, "Probe");
    flag = 0;
    CHECK_MPI(MPI_Iprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &flag, &st));
    CHECK(flag == 1, "Iprobe(PROC_NULL) flag %d", flag);
    check_empty(&st, "Iprobe");

    /* Mprobe / Improbe give MPI_MESSAGE_NO_PROC; Mrecv/Imrecv of it */
    MPI_Message m = MPI_MESSAGE_NULL;
    CHECK_MPI(MPI_Mprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &m, &st));
    CHECK(m == MPI_MESSAGE_NO_PROC, "Mprobe(PROC_NULL) did not give MPI_MESSAGE_NO_PROC");
    check_empty(&st, "Mprobe");
    CHECK_MPI(MPI_Mrecv(&y, 1, MPI_INT, &m, &st));
    CHECK(m == MPI_MESSAGE_NULL, "Mrecv did not set the message to MPI_MESSAGE_NULL");
    check_empty(&st, "Mrecv(NO_PROC)");
    flag = 0;
    m = MPI_MESSAGE_NULL;
    CHECK_MPI(MPI_Improbe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &flag, &m, &st));
    CHECK(flag == 1 && m == MPI_MESSAGE_NO_PROC, "Improbe(PROC_NULL) flag %d", flag);
    CHECK_MPI(MPI_Imrecv(&y, 1, MPI_INT, &m, &r));
    CHECK_MPI(MPI_Wait(&r, &st));
    check_empty(&st, "Imrecv(NO_PROC)+Wait");
    CHECK(y == 77, "buffer modified by PROC_NULL receives: %d", y);

    /* MPI_DATATYPE_NULL with count 0 and MPI_PROC_NULL, in every form */
    const MPI_Datatype nt = MPI_DATATYPE_NULL;
    const MPI_Comm w = MPI_COMM_WORLD;
    CHECK_MPI(MPI_Recv(NULL, 0, nt, MPI_PROC_NULL, 3, w, &st));
    check_empty(&st, "Recv(DATATYPE_NULL)");
    CHECK_MPI(MPI_Recv_c(NULL, 0, nt, MPI_PROC_NULL, 3, w, &st));
    check_empty(&st, "Recv_c(DATATYPE_NULL)");
    CHECK_MPI(MPI_Irecv(NULL, 0, nt, MPI_PROC_NULL, 3, w, &r));
    CHECK_MPI(MPI_Wait(&r, &st));
    check_empty(&st, "Irecv(DATATYPE_NULL)+Wait");
    CHECK_MPI(MPI_Send(NULL, 0, nt, MPI_PROC_NULL, 3, w));
    CHECK_MPI(MPI_Ssend(NULL, 0, nt, MPI_PROC_NULL, 3, w));
    CHECK_MPI(MPI_Isend(NULL, 0, nt, MPI_PROC_NULL, 3, w, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Sendrecv(NULL, 0, nt, MPI_PROC_NULL, 3, NULL, 0, nt, MPI_PROC_NULL, 3, w, &st));
    check_empty(&st, "Sendrecv(DATATYPE_NULL)");
    CHECK_MPI(MPI_Send_init(NULL, 0, nt, MPI_PROC_NULL, 3, w, &r));
    CHECK_MPI(MPI_Start(&r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Request_free(&r));
    CHECK_MPI(MPI_Recv_init(NULL, 0, nt, MPI_PROC_NULL, 3, w, &r));
    CHECK_MPI(MPI_Start(&r));
    CHECK_MPI(MPI_Wait(&r, &st));
    check_empty(&st, "Recv_init(DATATYPE_NULL)+Start+Wait");
    CHECK_MPI(MPI_Request_free(&r));

    /* ... but not with a count, nor with a real peer */
    int rank, cls = 0;
    MPI_Comm_rank(w, &rank);
    MPI_Comm_set_errhandler(w, MPI_ERRORS_RETURN);
    int rc = MPI_Recv(&y, 1, nt, MPI_PROC_NULL, 3, w, &st);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_TYPE, "Recv(count 1, DATATYPE_NULL, PROC_NULL): rc %d class %d", rc, cls);
    rc = MPI_Send(NULL, 0, nt, rank, 3, w);
    MPI_Error_class(rc, &cls);
    CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_TYPE, "Send(count 0, DATATYPE_NULL, self): rc %d class %d", rc, cls);
    MPI_Comm_set_errhandler(w, MPI_ERRORS_ARE_FATAL);
    return check_finish("p2p_proc_null");
}
