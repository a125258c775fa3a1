/* ranks: 1 2 3 4 8 */
/* Completion: Wait/Test, Waitany/Testany, Waitall/Testall, Waitsome/
   Testsome incl. MPI_REQUEST_NULL entries and all-null arrays (MPI_UNDEFINED),
   Request_free on an active send, Request_get_status, Cancel of a receive +
   Test_cancelled, Get_count (MPI_UNDEFINED when not a multiple),
   Get_elements, Status_set_elements, Status_set_cancelled. */
#include "check.h"

static int rank, size, partner;
static MPI_Comm comm;

static void check_empty_status(const MPI_Status *st, const char *what)
{
    int c = -1, canc = -1;
    MPI_Get_count(st, MPI_INT, &c);
    MPI_Test_cancelled(st, &canc);
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG && c == 0 && canc == 0,
          "%s: not the empty status (source %d tag %d count %d cancelled %d)", what,
          st->MPI_SOURCE, st->MPI_TAG, c, canc);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = (rank ^ 1) < size ? (rank ^ 1) : rank;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    /* all-null arrays */
    {
        MPI_Request r[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        MPI_Status st, sts[3];
        int idx = -5, flag = -5, outc = -5, ind[3];
        CHECK_MPI(MPI_Wait(&r[0], &st));
        check_empty_status(&st, "Wait(REQUEST_NULL)");
        flag = 0;
        CHECK_MPI(MPI_Test(&r[0], &flag, &st));
        CHECK(flag == 1, "Test(REQUEST_NULL) flag %d", flag);
        check_empty_status(&st, "Test(REQUEST_NULL)");
        CHECK_MPI(MPI_Waitany(3, r, &idx, &st));
        CHECK(idx == MPI_UNDEFINED, "Waitany all null: index %d", idx);
        check_empty_status(&st, "Waitany all null");
        idx = -5;
        CHECK_MPI(MPI_Testany(3, r, &idx, &flag, &st));
        CHECK(idx == MPI_UNDEFINED && flag == 1, "Testany all null: index %d flag %d", idx, flag);
        CHECK_MPI(MPI_Waitsome(3, r, &outc, ind, sts));
        CHECK(outc == MPI_UNDEFINED, "Waitsome all null: outcount %d", outc);
        outc = -5;
        CHECK_MPI(MPI_Testsome(3, r, &outc, ind, sts));
        CHECK(outc == MPI_UNDEFINED, "Testsome all null: outcount %d", outc);
        flag = 0;
        CHECK_MPI(MPI_Testall(3, r, &flag, sts));
        CHECK(flag == 1, "Testall all null: flag %d", flag);
        CHECK_MPI(MPI_Waitall(3, r, sts));
        check_empty_status(&sts[1], "Waitall all null");
        /* zero-length arrays */
        CHECK_MPI(MPI_Waitall(0, r, MPI_STATUSES_IGNORE));
        CHECK_MPI(MPI_Waitany(0, r, &idx, MPI_STATUS_IGNORE));
        CHECK(idx == MPI_UNDEFINED, "Waitany(0) index %d", idx);
    }

    /* Waitany / Waitsome / Testall with nulls mixed in */
    {
        enum { N = 4 };
        int sv[N], rv[N];
        MPI_Request rr[N + 2], sr[N];
        for (int i = 0; i < N; i++) {
            sv[i] = rank * 10 + i;
            rv[i] = -1;
        }
        /* rr = {NULL, recv0, recv1, NULL, recv2, recv3} */
        rr[0] = rr[3] = MPI_REQUEST_NULL;
        int map[N + 2] = {-1, 0, 1, -1, 2, 3};
        for (int j = 0; j < N + 2; j++)
            if (map[j] >= 0)
                MPI_Irecv(&rv[map[j]], 1, MPI_INT, partner, map[j], comm, &rr[j]);
        /* Testall with pending receives: flag false, requests untouched */
        int flag = -1;
        CHECK_MPI(MPI_Testall(N + 2, rr, &flag, MPI_STATUSES_IGNORE));
        CHECK(flag == 0, "Testall true before any send");
        CHECK(rr[1] != MPI_REQUEST_NULL, "Testall (false) freed a request");
        MPI_Barrier(comm); /* no rank sends before every rank has tested */
        for (int i = 0; i < N; i++)
            MPI_Isend(&sv[i], 1, MPI_INT, partner, i, comm, &sr[i]);
        int done = 0, seen[N + 2] = {0};
        /* Waitany until done, then Waitany returns UNDEFINED */
        while (done < 2) {
            int idx = -1;
            MPI_Status st;
            CHECK_MPI(MPI_Waitany(N + 2, rr, &idx, &st));
            CHECK(idx >= 0 && idx < N + 2 && map[idx] >= 0 && !seen[idx], "Waitany index %d", idx);
            if (idx < 0 || idx >= N + 2 || map[idx] < 0)
                break;
            seen[idx] = 1;
            CHECK(rr[idx] == MPI_REQUEST_NULL, "Waitany did not free request %d", idx);
            CHECK(st.MPI_TAG == map[idx] && rv[map[idx]] == partner * 10 + map[idx],
                  "Waitany status tag %d value %d", st.MPI_TAG, rv[map[idx]]);
            done++;
        }
        /* Waitsome for the rest */
        while (done < N) {
            int outc = -1, ind[N + 2];
            MPI_Status sts[N + 2];
            CHECK_MPI(MPI_Waitsome(N + 2, rr, &outc, ind, sts));
            CHECK(outc >= 1 && outc <= N - done, "Waitsome outcount %d", outc);
            if (outc < 1 || outc == MPI_UNDEFINED)
                break;
            for (int k = 0; k < outc; k++) {
                int j = ind[k];
                CHECK(j >= 0 && j < N + 2 && map[j] >= 0 && !seen[j], "Waitsome index %d", j);
                if (j < 0 || j >= N + 2 || map[j] < 0)
                    continue;
                seen[j] = 1;
                CHECK(sts[k].MPI_TAG == map[j] && rv[map[j]] == partner * 10 + map[j],
                      "Waitsome status %d tag %d", k, sts[k].MPI_TAG);
            }
            done += outc;
        }
        int outc = -1, ind[N + 2];
        MPI_Waitsome(N + 2, rr, &outc, ind, MPI_STATUSES_IGNORE);
        CHECK(outc == MPI_UNDEFINED, "Waitsome after all done: %d", outc);
        /* Testsome / Testany on the sends until done */
        int sdone = 0;
        double t0 = MPI_Wtime();
        while (sdone < N && MPI_Wtime() - t0 < 30) {
            int oc = -1, id[N];
            CHECK_MPI(MPI_Testsome(N, sr, &oc, id, MPI_STATUSES_IGNORE));
            if (oc == MPI_UNDEFINED)
                break;
            sdone += oc;
        }
        CHECK(sdone == N, "Testsome completed %d of %d sends", sdone, N);
    }

    /* Testany eventually true with the right index */
    {
        int v = rank + 77, got = -1;
        MPI_Request r[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL}, s;
        MPI_Irecv(&got, 1, MPI_INT, partner, 99, comm, &r[2]);
        MPI_Isend(&v, 1, MPI_INT, partner, 99, comm, &s);
        int idx = -1, flag = 0;
        MPI_Status st;
        double t0 = MPI_Wtime();
        while (!flag && MPI_Wtime() - t0 < 30)
            CHECK_MPI(MPI_Testany(3, r, &idx, &flag, &st));
        CHECK(flag && idx == 2 && got == partner + 77 && st.MPI_SOURCE == partner,
              "Testany: flag %d index %d value %d", flag, idx, got);
        MPI_Wait(&s, MPI_STATUS_IGNORE);
    }

    /* Request_free on an active send: the message is still delivered */
    {
        enum { N = 50000 };
        int *sb = malloc(sizeof(int) * N), *rb = malloc(sizeof(int) * N);
        for (int i = 0; i < N; i++)
            sb[i] = rank + i;
        MPI_Request s, r;
        MPI_Irecv(rb, N, MPI_INT, partner, 5, comm, &r);
        CHECK_MPI(MPI_Isend(sb, N, MPI_INT, partner, 5, comm, &s));
        CHECK_MPI(MPI_Request_free(&s));
        CHECK(s == MPI_REQUEST_NULL, "Request_free did not null the handle");
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        int ok = 1;
        for (int i = 0; i < N; i++)
            if (rb[i] != partner + i)
                ok = 0;
        CHECK(ok, "data of a freed send");
        /* the partner has received ours too once it acknowledges */
        int a = 1, b = 0;
        MPI_Sendrecv(&a, 1, MPI_INT, partner, 6, &b, 1, MPI_INT, partner, 6, comm, MPI_STATUS_IGNORE);
        free(sb);
        free(rb);
    }

    /* Request_get_status does not free the request */
    {
        int v = rank, got = -1, flag = -1;
        MPI_Request r, s;
        MPI_Status st;
        MPI_Irecv(&got, 1, MPI_INT, partner, 7, comm, &r);
        CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
        CHECK(flag == 0, "get_status true before the send");
        MPI_Barrier(comm); /* partner has not sent before everyone checked */
        MPI_Isend(&v, 1, MPI_INT, partner, 7, comm, &s);
        flag = 0;
        double t0 = MPI_Wtime();
        while (!flag && MPI_Wtime() - t0 < 30)
            CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
        CHECK(flag && st.MPI_SOURCE == partner && st.MPI_TAG == 7 && got == partner,
              "get_status: flag %d source %d value %d", flag, st.MPI_SOURCE, got);
        CHECK(r != MPI_REQUEST_NULL, "get_status freed the request");
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK(st.MPI_SOURCE == partner && r == MPI_REQUEST_NULL, "Wait after get_status");
        CHECK_MPI(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st));
        CHECK(flag == 1, "get_status(REQUEST_NULL) flag %d", flag);
        MPI_Wait(&s, MPI_STATUS_IGNORE);
    }

    /* Cancel a receive that can never match */
    {
        int buf = -1, flag = -1;
        MPI_Request r;
        MPI_Status st;
        MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 12345, comm, &r);
        CHECK_MPI(MPI_Cancel(&r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_MPI(MPI_Test_cancelled(&st, &flag));
        CHECK(flag == 1, "cancelled receive: Test_cancelled %d", flag);
        CHECK(buf == -1, "cancelled receive wrote its buffer");
        /* a completed receive is not cancelled */
        int v = 3;
        MPI_Request s;
        MPI_Irecv(&buf, 1, MPI_INT, partner, 13, comm, &r);
        MPI_Isend(&v, 1, MPI_INT, partner, 13, comm, &s);
        MPI_Wait(&r, &st);
        MPI_Test_cancelled(&st, &flag);
        CHECK(flag == 0 && buf == 3, "normal receive: cancelled %d", flag);
        MPI_Wait(&s, MPI_STATUS_IGNORE);
    }

    /* Get_count / Get_elements */
    {
        unsigned char bytes[12];
        for (int i = 0; i < 12; i++)
            bytes[i] = (unsigned char)i;
        int rbuf[8];
        MPI_Request s;
        MPI_Status st;
        MPI_Isend(bytes, 6, MPI_BYTE, partner, 20, comm, &s);
        MPI_Recv(rbuf, 32, MPI_BYTE, partner, 20, comm, &st);
        MPI_Wait(&s, MPI_STATUS_IGNORE);
        int c = -5;
        MPI_Get_count(&st, MPI_BYTE, &c);
        CHECK(c == 6, "Get_count(BYTE) %d", c);
        MPI_Get_count(&st, MPI_INT, &c);
        CHECK(c == MPI_UNDEFINED, "Get_count(INT) of 6 bytes gave %d, expected MPI_UNDEFINED", c);
        MPI_Get_count(&st, MPI_SHORT, &c);
        CHECK(c == (int)(6 / sizeof(short)) || 6 % sizeof(short), "Get_count(SHORT) %d", c);

        /* derived type of 2 ints; 3 ints received: count undefined, elements 3 */
        MPI_Datatype pair;
        MPI_Type_contiguous(2, MPI_INT, &pair);
        MPI_Type_commit(&pair);
        int three[3] = {1, 2, 3};
        MPI_Isend(three, 3, MPI_INT, partner, 21, comm, &s);
        MPI_Recv(rbuf, 4, pair == MPI_DATATYPE_NULL ? MPI_INT : pair, partner, 21, comm, &st);
        MPI_Wait(&s, MPI_STATUS_IGNORE);
        c = -5;
        MPI_Get_count(&st, pair, &c);
        CHECK(c == MPI_UNDEFINED, "Get_count(pair) of 3 ints gave %d", c);
        int e = -5;
        CHECK_MPI(MPI_Get_elements(&st, pair, &e));
        CHECK(e == 3, "Get_elements(pair) %d, expected 3", e);
        MPI_Get_elements(&st, MPI_INT, &e);
        CHECK(e == 3, "Get_elements(INT) %d", e);
        CHECK(rbuf[0] == 1 && rbuf[2] == 3, "pair receive data");
        MPI_Count ex = -5;
        CHECK_MPI(MPI_Get_elements_x(&st, pair, &ex));
        CHECK(ex == 3, "Get_elements_x %lld", (long long)ex);
        MPI_Type_free(&pair);
    }

    /* Status_set_elements / Status_set_cancelled */
    {
        MPI_Status st;
        memset(&st, 0, sizeof st);
        CHECK_MPI(MPI_Status_set_elements(&st, MPI_INT, 5));
        int c = -1, e = -1;
        MPI_Get_count(&st, MPI_INT, &c);
        MPI_Get_elements(&st, MPI_INT, &e);
        CHECK(c == 5 && e == 5, "after set_elements(INT, 5): count %d elements %d", c, e);
        MPI_Get_count(&st, MPI_BYTE, &c);
        CHECK(c == 5 * (int)sizeof(int), "count in bytes %d", c);
        /* with a derived datatype: see status_set_elements.c */
        int flag = -1;
        CHECK_MPI(MPI_Status_set_cancelled(&st, 1));
        MPI_Test_cancelled(&st, &flag);
        CHECK(flag == 1, "set_cancelled(1): %d", flag);
        CHECK_MPI(MPI_Status_set_cancelled(&st, 0));
        MPI_Test_cancelled(&st, &flag);
        CHECK(flag == 0, "set_cancelled(0): %d", flag);
    }

    MPI_Barrier(comm);
    MPI_Comm_free(&comm);
    return check_finish("p2p_complete");
}
