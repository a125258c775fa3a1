/* ranks: 1 2 3 4 8 */
/* Small contiguous messages on the library's express paths: Send/Recv/Isend/
   Irecv on duplicated, split and inter communicators (not only the predefined
   ones), and every completion call on a nonblocking send that was complete when
   it started (Wait, Test, Waitany, Testany, Waitsome, Testsome, Waitall,
   Testall, Request_get_status, Request_free, Cancel + Test_cancelled, and Start,
   which must refuse it). Errors found on these paths: a truncated Irecv reports
   through its communicator's error handler, and a freed communicator's handle
   is refused, not used. */
#include "check.h"

#define WIN 64

static int rank, size, partner;

/* A window of small nonblocking messages each way, completed by Waitall
   (or Testall in a loop), with every byte checked. */
static void window(MPI_Comm c, int peer, int use_test, int seed)
{
    static int sb[WIN][4], rb[WIN][4];
    MPI_Request r[2 * WIN];
    for (int i = 0; i < WIN; i++) {
        for (int k = 0; k < 4; k++)
            sb[i][k] = seed * 1000 + i * 4 + k;
        memset(rb[i], 0xff, sizeof rb[i]);
    }
    for (int i = 0; i < WIN; i++)
        CHECK_MPI(MPI_Irecv(rb[i], 1 + i % 4, MPI_INT, peer, i, c, &r[i]));
    for (int i = 0; i < WIN; i++)
        CHECK_MPI(MPI_Isend(sb[i], 1 + i % 4, MPI_INT, peer, i, c, &r[WIN + i]));
    if (use_test) {
        int flag = 0;
        while (!flag)
            CHECK_MPI(MPI_Testall(2 * WIN, r, &flag, MPI_STATUSES_IGNORE));
    } else {
        MPI_Status st[2 * WIN];
        CHECK_MPI(MPI_Waitall(2 * WIN, r, st));
        for (int i = 0; i < WIN; i++) {
            int n = -1;
            MPI_Get_count(&st[i], MPI_INT, &n);
            CHECK(st[i].MPI_TAG == i && n == 1 + i % 4, "window: receive %d has tag %d count %d", i,
                  st[i].MPI_TAG, n);
        }
    }
    for (int i = 0; i < 2 * WIN; i++)
        CHECK(r[i] == MPI_REQUEST_NULL, "window: request %d not MPI_REQUEST_NULL after completion", i);
    for (int i = 0; i < WIN; i++)
        for (int k = 0; k < 1 + i % 4; k++)
            CHECK(rb[i][k] == seed * 1000 + i * 4 + k, "window seed %d: message %d element %d is %d", seed, i,
                  k, rb[i][k]);
}

/* One small Isend to `peer` (which posts a matching receive). */
static MPI_Request small_isend(MPI_Comm c, int peer, int tag, int *v)
{
    MPI_Request r = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Isend(v, 1, MPI_INT, peer, tag, c, &r));
    CHECK(r != MPI_REQUEST_NULL, "Isend returned MPI_REQUEST_NULL");
    return r;
}

/* Every completion call on small sends; the partner receives them all. */
static void completions(MPI_Comm c)
{
    int v[16], got[16];
    for (int i = 0; i < 16; i++) {
        v[i] = rank * 100 + i;
        got[i] = -1;
    }
    MPI_Request rr[16];
    for (int i = 0; i < 16; i++)
        CHECK_MPI(MPI_Irecv(&got[i], 1, MPI_INT, partner, 500 + i, c, &rr[i]));

    MPI_Status st;
    int flag, idx, outc, ind[4];

    MPI_Request r = small_isend(c, partner, 500, &v[0]);
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL, "Wait left the send's handle set");

    r = small_isend(c, partner, 501, &v[1]);
    flag = 0;
    while (!flag)
        CHECK_MPI(MPI_Test(&r, &flag, &st));
    CHECK(r == MPI_REQUEST_NULL, "Test left the send's handle set");

    MPI_Request two[3] = {MPI_REQUEST_NULL, small_isend(c, partner, 502, &v[2]), small_isend(c, partner, 503, &v[3])};
    int seen = 0;
    for (int k = 0; k < 2; k++) {
        idx = -5;
        CHECK_MPI(MPI_Waitany(3, two, &idx, &st));
        CHECK(idx == 1 || idx == 2, "Waitany index %d", idx);
        if (idx == 1 || idx == 2)
            seen |= 1 << idx;
    }
    CHECK(seen == 6, "Waitany did not report both sends (mask %d)", seen);
    CHECK_MPI(MPI_Waitany(3, two, &idx, &st));
    CHECK(idx == MPI_UNDEFINED, "Waitany on no active request gave index %d", idx);

    two[0] = small_isend(c, partner, 504, &v[4]);
    flag = 0;
    idx = -5;
    while (!flag)
        CHECK_MPI(MPI_Testany(3, two, &idx, &flag, &st));
    CHECK(idx == 0 && two[0] == MPI_REQUEST_NULL, "Testany index %d", idx);

    MPI_Request some[2] = {small_isend(c, partner, 505, &v[5]), small_isend(c, partner, 506, &v[6])};
    int done = 0;
    while (done < 2) {
        outc = -5;
        CHECK_MPI(MPI_Waitsome(2, some, &outc, ind, MPI_STATUSES_IGNORE));
        CHECK(outc >= 1 && outc <= 2 - done, "Waitsome outcount %d", outc);
        if (outc < 1)
            break;
        done += outc;
    }
    CHECK_MPI(MPI_Waitsome(2, some, &outc, ind, MPI_STATUSES_IGNORE));
    CHECK(outc == MPI_UNDEFINED, "Waitsome on no active request gave outcount %d", outc);

    some[0] = small_isend(c, partner, 507, &v[7]);
    some[1] = MPI_REQUEST_NULL;
    outc = 0;
    while (outc == 0)
        CHECK_MPI(MPI_Testsome(2, some, &outc, ind, MPI_STATUSES_IGNORE));
    CHECK(outc == 1 && ind[0] == 0 && some[0] == MPI_REQUEST_NULL, "Testsome outcount %d index %d", outc, ind[0]);

    /* get_status leaves the handle alone; the wait that follows frees it */
    r = small_isend(c, partner, 508, &v[8]);
    flag = 0;
    while (!flag)
        CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    CHECK(r != MPI_REQUEST_NULL, "Request_get_status changed the handle");
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL, "Wait after Request_get_status left the handle set");

    r = small_isend(c, partner, 509, &v[9]);
    CHECK_MPI(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL, "Request_free left the handle set");

    /* cancelling a send that completed has no effect: it is delivered */
    r = small_isend(c, partner, 510, &v[10]);
    CHECK_MPI(MPI_Cancel(&r));
    CHECK_MPI(MPI_Wait(&r, &st));
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag == 0, "a completed send reports cancelled");

    /* a plain send's handle is not a persistent request */
    r = small_isend(c, partner, 511, &v[11]);
    MPI_Request keep = r;
    CHECK_ERR_CLASS(MPI_Start(&r), MPI_ERR_REQUEST);
    CHECK(r == keep, "a refused MPI_Start changed the handle");
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));

    MPI_Request all[4];
    for (int i = 0; i < 4; i++)
        all[i] = small_isend(c, partner, 512 + i, &v[12 + i]);
    flag = 0;
    while (!flag)
        CHECK_MPI(MPI_Testall(4, all, &flag, MPI_STATUSES_IGNORE));

    MPI_Status rst[16];
    CHECK_MPI(MPI_Waitall(16, rr, rst));
    for (int i = 0; i < 16; i++) {
        CHECK(got[i] == partner * 100 + i, "completions: message %d is %d, expected %d", i, got[i],
              partner * 100 + i);
        CHECK(rst[i].MPI_TAG == 500 + i, "completions: message %d has tag %d", i, rst[i].MPI_TAG);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = (rank ^ 1) < size ? (rank ^ 1) : rank;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    MPI_Comm dup, split;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    /* a communicator whose ranks are not the world's: pairs, reversed */
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, -rank, &split);
    int srank, ssize;
    MPI_Comm_rank(split, &srank);
    MPI_Comm_size(split, &ssize);
    int speer = ssize - 1 - srank;

    /* blocking ping-pong on each communicator, several times so that the
       cached communicator of the previous call changes back and forth */
    MPI_Comm cs[3] = {MPI_COMM_WORLD, dup, split};
    int peers[3] = {partner, partner, speer};
    for (int it = 0; it < 6; it++) {
        for (int k = 0; k < 3; k++) {
            int me = k == 2 ? srank : rank, peer = peers[k];
            long out = (long)it * 10 + k + 100L * me, in = -1;
            MPI_Status st;
            if (me <= peer) {
                CHECK_MPI(MPI_Send(&out, 1, MPI_LONG, peer, it, cs[k]));
                CHECK_MPI(MPI_Recv(&in, 1, MPI_LONG, peer, it, cs[k], &st));
            } else {
                CHECK_MPI(MPI_Recv(&in, 1, MPI_LONG, peer, it, cs[k], &st));
                CHECK_MPI(MPI_Send(&out, 1, MPI_LONG, peer, it, cs[k]));
            }
            CHECK(in == (long)it * 10 + k + 100L * peer && st.MPI_SOURCE == peer && st.MPI_TAG == it,
                  "ping-pong on communicator %d round %d: got %ld from %d tag %d", k, it, in, st.MPI_SOURCE,
                  st.MPI_TAG);
        }
    }

    window(dup, partner, 0, 1);
    window(split, speer, 1, 2);
    window(MPI_COMM_WORLD, partner, 0, 3);
    completions(dup);

    /* wildcards on the express receive */
    {
        int v = rank, w = -1;
        MPI_Request r;
        MPI_Status st;
        CHECK_MPI(MPI_Irecv(&w, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &r));
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, partner, 77, dup));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK(w == partner && st.MPI_SOURCE == partner && st.MPI_TAG == 77, "wildcard receive: %d from %d tag %d",
              w, st.MPI_SOURCE, st.MPI_TAG);
    }

    /* a truncated Irecv reports through the communicator's own handler (the
       world's stays fatal for this part) */
    {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
        int big[4] = {1, 2, 3, 4}, small[2] = {0, 0};
        MPI_Request r;
        MPI_Status st;
        CHECK_MPI(MPI_Irecv(small, 1, MPI_INT, partner, 88, dup, &r));
        CHECK_MPI(MPI_Send(big, 4, MPI_INT, partner, 88, dup));
        CHECK_ERR_CLASS(MPI_Wait(&r, &st), MPI_ERR_TRUNCATE);
        CHECK(small[1] == 0, "truncation wrote past the buffer");
        CHECK_MPI(MPI_Isend(big, 4, MPI_INT, partner, 89, dup, &r));
        CHECK_ERR_CLASS(MPI_Recv(small, 1, MPI_INT, partner, 89, dup, &st), MPI_ERR_TRUNCATE);
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }

    /* a freed communicator is refused, though it was the last one used */
    {
        MPI_Comm tmp, old;
        MPI_Comm_dup(MPI_COMM_WORLD, &tmp);
        int v = 5, w = 0;
        MPI_Request r;
        CHECK_MPI(MPI_Irecv(&w, 1, MPI_INT, partner, 1, tmp, &r));
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, partner, 1, tmp));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        old = tmp;
        MPI_Comm_free(&tmp);
        CHECK_ERR_CLASS(MPI_Send(&v, 1, MPI_INT, partner, 1, old), MPI_ERR_COMM);
        CHECK_ERR_CLASS(MPI_Recv(&w, 1, MPI_INT, partner, 1, old, MPI_STATUS_IGNORE), MPI_ERR_COMM);
        CHECK_ERR_CLASS(MPI_Isend(&v, 1, MPI_INT, partner, 1, old, &r), MPI_ERR_COMM);
        CHECK_ERR_CLASS(MPI_Irecv(&w, 1, MPI_INT, partner, 1, old, &r), MPI_ERR_COMM);
        /* and so are bad ranks and tags on a communicator that is cached */
        CHECK_ERR_CLASS(MPI_Send(&v, 1, MPI_INT, size, 1, dup), MPI_ERR_RANK);
        CHECK_ERR_CLASS(MPI_Isend(&v, 1, MPI_INT, partner, -3, dup, &r), MPI_ERR_TAG);
        CHECK_ERR_CLASS(MPI_Irecv(&w, 1, MPI_INT, -7, 1, dup, &r), MPI_ERR_RANK);
    }

    /* intercommunicator between the even and the odd ranks: point-to-point
       ranks name the remote group */
    if (size >= 2) {
        MPI_Comm half, inter;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 31, &inter);
        int lrank, rsize;
        MPI_Comm_rank(inter, &lrank);
        MPI_Comm_remote_size(inter, &rsize);
        if (lrank < rsize) {
            int v = 1000 + rank, w = -1;
            MPI_Request r[2];
            MPI_Status st[2];
            CHECK_MPI(MPI_Irecv(&w, 1, MPI_INT, lrank, 3, inter, &r[0]));
            CHECK_MPI(MPI_Isend(&v, 1, MPI_INT, lrank, 3, inter, &r[1]));
            CHECK_MPI(MPI_Waitall(2, r, st));
            /* the remote rank lrank is world rank 2*lrank + (1 - rank%2) */
            int from = 2 * lrank + (1 - rank % 2);
            CHECK(w == 1000 + from && st[0].MPI_SOURCE == lrank, "intercommunicator: got %d from %d", w,
                  st[0].MPI_SOURCE);
            long a = rank, b = -1;
            if (rank % 2 == 0) {
                CHECK_MPI(MPI_Send(&a, 1, MPI_LONG, lrank, 4, inter));
                CHECK_MPI(MPI_Recv(&b, 1, MPI_LONG, lrank, 4, inter, MPI_STATUS_IGNORE));
            } else {
                CHECK_MPI(MPI_Recv(&b, 1, MPI_LONG, lrank, 4, inter, MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Send(&a, 1, MPI_LONG, lrank, 4, inter));
            }
            CHECK(b == from, "intercommunicator ping-pong: got %ld, expected %d", b, from);
        }
        CHECK_ERR_CLASS(MPI_Send(&rank, 1, MPI_INT, rsize, 5, inter), MPI_ERR_RANK);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }

    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
    return check_finish("p2p_express");
}
