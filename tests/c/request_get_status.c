/* ranks: 1 2 3 */
/* MPI_Request_get_status_all, _any and _some (MPI 4.1): like Testall, Testany
   and Testsome but the requests stay allocated and active (a Wait afterwards
   still gives the same status and frees them); null and inactive persistent
   requests count as complete with the empty status, and with no active
   request _any gives flag true and MPI_UNDEFINED, _some MPI_UNDEFINED;
   MPI_STATUSES_IGNORE and MPI_STATUS_IGNORE accepted. MPI_Cancel of
   MPI_REQUEST_NULL is an MPI_ERR_REQUEST error. */
#include "check.h"

static int rank, size, next, prev;

static void check_empty(const MPI_Status *st, const char *what)
{
    int c = -1;
    MPI_Get_count(st, MPI_INT, &c);
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG && c == 0,
          "%s: not the empty status (source %d tag %d count %d)", what, st->MPI_SOURCE, st->MPI_TAG, c);
}

static void check_msg(const MPI_Status *st, int src, int tag, int count, const char *what)
{
    int c = -1;
    MPI_Get_count(st, MPI_INT, &c);
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag && c == count,
          "%s: status source %d tag %d count %d, expected %d %d %d", what, st->MPI_SOURCE, st->MPI_TAG,
          c, src, tag, count);
}

/* Waits until rank prev's message with `tag` has surely arrived: prev sends a
   second message on another tag after it, and messages do not overtake. */
static void sync_after(int tag)
{
    int token = 0;
    MPI_Recv(&token, 1, MPI_INT, prev, tag + 1000, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void all(void)
{
    int v[2] = {rank, rank + 1}, got[2] = {-1, -1}, token = 0;
    MPI_Request r[4];
    MPI_Status st[4];
    int flag = 1;
    MPI_Request inactive;
    MPI_Recv_init(&token, 1, MPI_INT, prev, 99, MPI_COMM_WORLD, &inactive);

    CHECK_MPI(MPI_Irecv(&got[0], 1, MPI_INT, prev, 1, MPI_COMM_WORLD, &r[0]));
    CHECK_MPI(MPI_Irecv(&got[1], 1, MPI_INT, prev, 2, MPI_COMM_WORLD, &r[1]));
    r[2] = MPI_REQUEST_NULL;
    r[3] = inactive;
    /* Nothing sent yet (the barrier holds every sender back): not all complete. */
    CHECK_MPI(MPI_Request_get_status_all(4, r, &flag, st));
    CHECK(flag == 0, "get_status_all: flag %d before anything was sent", flag);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Send(&v[0], 1, MPI_INT, next, 1, MPI_COMM_WORLD);
    MPI_Send(&v[1], 1, MPI_INT, next, 2, MPI_COMM_WORLD);
    MPI_Send(&token, 1, MPI_INT, next, 1001, MPI_COMM_WORLD);
    sync_after(1);
    flag = 0;
    for (int spins = 0; !flag && spins < 1000000; spins++)
        CHECK_MPI(MPI_Request_get_status_all(4, r, &flag, st));
    CHECK(flag == 1, "get_status_all: never complete");
    check_msg(&st[0], prev, 1, 1, "get_status_all [0]");
    check_msg(&st[1], prev, 2, 1, "get_status_all [1]");
    check_empty(&st[2], "get_status_all of MPI_REQUEST_NULL");
    check_empty(&st[3], "get_status_all of an inactive persistent request");
    CHECK(r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL && r[3] == inactive,
          "get_status_all changed the request handles");
    /* Again, with MPI_STATUSES_IGNORE: still there, still complete. */
    flag = 0;
    CHECK_MPI(MPI_Request_get_status_all(4, r, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag == 1, "get_status_all: a second call found them incomplete");
    /* The requests are still to be completed, with the same statuses. */
    CHECK_MPI(MPI_Waitall(4, r, st));
    check_msg(&st[0], prev, 1, 1, "Waitall after get_status_all [0]");
    check_msg(&st[1], prev, 2, 1, "Waitall after get_status_all [1]");
    CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "Waitall did not free the requests");
    CHECK(got[0] == prev && got[1] == prev + 1, "received %d %d", got[0], got[1]);
    /* count 0 */
    flag = 0;
    CHECK_MPI(MPI_Request_get_status_all(0, NULL, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag == 1, "get_status_all of no requests: flag %d", flag);
    MPI_Request_free(&inactive);
}

static void any_and_some(void)
{
    int got[2] = {-1, -1}, v = rank * 10;
    MPI_Request r[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st[4], one;
    int idx = -2, flag = -1, out = -2, ind[4];

    /* No active request at all: the empty status, MPI_ERROR included. */
    one.MPI_ERROR = -12345;
    CHECK_MPI(MPI_Request_get_status_any(4, r, &idx, &flag, &one));
    CHECK(one.MPI_ERROR == MPI_SUCCESS, "get_status_any of null requests: MPI_ERROR %d", one.MPI_ERROR);
    CHECK(flag == 1 && idx == MPI_UNDEFINED, "get_status_any of null requests: flag %d index %d", flag,
          idx);
    check_empty(&one, "get_status_any of null requests");
    CHECK_MPI(MPI_Request_get_status_some(4, r, &out, ind, st));
    CHECK(out == MPI_UNDEFINED, "get_status_some of null requests: outcount %d", out);
    CHECK_MPI(MPI_Request_get_status_any(0, NULL, &idx, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1 && idx == MPI_UNDEFINED, "get_status_any of none: flag %d index %d", flag, idx);

    CHECK_MPI(MPI_Irecv(&got[0], 1, MPI_INT, prev, 5, MPI_COMM_WORLD, &r[1]));
    CHECK_MPI(MPI_Irecv(&got[1], 1, MPI_INT, prev, 6, MPI_COMM_WORLD, &r[3]));
    /* Open requests: nothing complete yet. */
    CHECK_MPI(MPI_Request_get_status_any(4, r, &idx, &flag, &one));
    CHECK(flag == 0 && idx == MPI_UNDEFINED, "get_status_any before the sends: flag %d index %d", flag,
          idx);
    CHECK_MPI(MPI_Request_get_status_some(4, r, &out, ind, st));
    CHECK(out == 0, "get_status_some before the sends: outcount %d", out);
    MPI_Barrier(MPI_COMM_WORLD);

    /* Only tag 6 is sent: request 3 completes, request 1 stays open. */
    int token = 0;
    MPI_Send(&v, 1, MPI_INT, next, 6, MPI_COMM_WORLD);
    MPI_Send(&token, 1, MPI_INT, next, 1006, MPI_COMM_WORLD);
    sync_after(6);
    flag = 0;
    for (int spins = 0; !flag && spins < 1000000; spins++)
        CHECK_MPI(MPI_Request_get_status_any(4, r, &idx, &flag, &one));
    CHECK(flag == 1 && idx == 3, "get_status_any: flag %d index %d, expected 1 3", flag, idx);
    check_msg(&one, prev, 6, 1, "get_status_any");
    CHECK(r[3] != MPI_REQUEST_NULL, "get_status_any freed the request");
    /* Asked again, it reports the same request: it was not taken. */
    CHECK_MPI(MPI_Request_get_status_any(4, r, &idx, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1 && idx == 3, "get_status_any again: flag %d index %d", flag, idx);
    CHECK_MPI(MPI_Request_get_status_some(4, r, &out, ind, st));
    CHECK(out == 1 && ind[0] == 3, "get_status_some: outcount %d index %d", out, ind[0]);
    if (out == 1)
        check_msg(&st[0], prev, 6, 1, "get_status_some");
    CHECK_MPI(MPI_Request_get_status_some(4, r, &out, ind, MPI_STATUSES_IGNORE));
    CHECK(out == 1 && ind[0] == 3, "get_status_some again: outcount %d", out);

    /* Now tag 5 (once every rank has checked the above): both complete. */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Send(&v, 1, MPI_INT, next, 5, MPI_COMM_WORLD);
    MPI_Send(&token, 1, MPI_INT, next, 1005, MPI_COMM_WORLD);
    sync_after(5);
    out = 0;
    for (int spins = 0; out < 2 && spins < 1000000; spins++)
        CHECK_MPI(MPI_Request_get_status_some(4, r, &out, ind, st));
    CHECK(out == 2 && ind[0] == 1 && ind[1] == 3, "get_status_some: outcount %d indices %d %d", out,
          ind[0], ind[1]);
    if (out == 2) {
        check_msg(&st[0], prev, 5, 1, "get_status_some [0]");
        check_msg(&st[1], prev, 6, 1, "get_status_some [1]");
    }
    CHECK_MPI(MPI_Request_get_status_any(4, r, &idx, &flag, &one));
    CHECK(flag == 1 && idx == 1, "get_status_any picks the first complete one: index %d", idx);
    /* Testsome frees them. */
    CHECK_MPI(MPI_Testsome(4, r, &out, ind, st));
    CHECK(out == 2 && r[1] == MPI_REQUEST_NULL && r[3] == MPI_REQUEST_NULL,
          "Testsome after get_status_some: outcount %d", out);
    CHECK(got[0] == prev * 10 && got[1] == prev * 10, "received %d %d", got[0], got[1]);
}

static void errors(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Request r = MPI_REQUEST_NULL;
    /* MPI 4.1: MPI_Cancel of MPI_REQUEST_NULL is erroneous. */
    CHECK_ERR_CLASS(MPI_Cancel(&r), MPI_ERR_REQUEST);
    int flag, idx, out, ind[1];
    CHECK_ERR_CLASS(MPI_Request_get_status_all(-1, &r, &flag, MPI_STATUSES_IGNORE), MPI_ERR_COUNT);
    CHECK_ERR_CLASS(MPI_Request_get_status_any(1, NULL, &idx, &flag, MPI_STATUS_IGNORE), MPI_ERR_ARG);
    MPI_Request bogus = (MPI_Request)(size_t)0x7777777;
    CHECK_ERR_CLASS(MPI_Request_get_status_some(1, &bogus, &out, ind, MPI_STATUSES_IGNORE),
                    MPI_ERR_REQUEST);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    next = (rank + 1) % size;
    prev = (rank + size - 1) % size;
    all();
    MPI_Barrier(MPI_COMM_WORLD);
    any_and_some();
    errors();
    return check_finish("request_get_status");
}
