/* ranks: 1 2 3 4 8 */
/* Probe/Iprobe (status source/tag/count), Mprobe/Improbe/Mrecv/Imrecv
   (a matched message is removed from matching), Iprobe false when nothing
   is pending. Pairs (r, r^1), odd last rank with itself. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int partner = (rank ^ 1) < size ? (rank ^ 1) : rank;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    /* nothing pending yet on this communicator */
    {
        int flag = -1;
        MPI_Message m = MPI_MESSAGE_NULL;
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE));
        CHECK(flag == 0, "Iprobe found a message on a fresh communicator");
        flag = -1;
        CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &m, MPI_STATUS_IGNORE));
        CHECK(flag == 0, "Improbe found a message on a fresh communicator");
    }
    MPI_Barrier(comm);

    /* messages: tag t carries counts[t] ints */
    enum { NT = 6 };
    static const int counts[NT] = {0, 3, 100000, 17, 5, 70000};
    int *sb[NT];
    MPI_Request sr[NT];
    for (int t = 0; t < NT; t++) {
        sb[t] = malloc(sizeof(int) * (size_t)(counts[t] + 1));
        for (int i = 0; i < counts[t]; i++)
            sb[t][i] = rank * 1000 + t * 100 + i;
        CHECK_MPI(MPI_Isend(sb[t], counts[t], MPI_INT, partner, t, comm, &sr[t]));
    }

    /* Probe for tag 2 (sent third): status and count, then receive it */
    {
        MPI_Status st;
        CHECK_MPI(MPI_Probe(partner, 2, comm, &st));
        int c = -1;
        MPI_Get_count(&st, MPI_INT, &c);
        CHECK(st.MPI_SOURCE == partner && st.MPI_TAG == 2 && c == counts[2],
              "Probe: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, c);
        /* a second probe sees the same message */
        CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, 2, comm, &st));
        MPI_Get_count(&st, MPI_INT, &c);
        CHECK(c == counts[2], "second Probe count %d", c);
        int *rb = malloc(sizeof(int) * (size_t)c);
        CHECK_MPI(MPI_Recv(rb, c, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, comm, &st));
        int ok = 1;
        for (int i = 0; i < c; i++)
            if (rb[i] != partner * 1000 + 200 + i)
                ok = 0;
        CHECK(ok, "data after Probe");
        free(rb);
    }
    /* Iprobe with ANY_TAG: the earliest pending message from partner is tag 0 (count 0) */
    {
        int flag = 0;
        MPI_Status st;
        double t0 = MPI_Wtime();
        while (!flag && MPI_Wtime() - t0 < 30)
            CHECK_MPI(MPI_Iprobe(partner, MPI_ANY_TAG, comm, &flag, &st));
        int c = -1;
        MPI_Get_count(&st, MPI_INT, &c);
        CHECK(flag && st.MPI_TAG == 0 && c == 0, "Iprobe ANY_TAG: flag %d tag %d count %d", flag,
              st.MPI_TAG, c);
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_INT, partner, 0, comm, &st));
    }
    /* Mprobe tag 1; the matched message is no longer visible to probes */
    {
        MPI_Message m = MPI_MESSAGE_NULL;
        MPI_Status st;
        CHECK_MPI(MPI_Mprobe(partner, 1, comm, &m, &st));
        CHECK(m != MPI_MESSAGE_NULL && m != MPI_MESSAGE_NO_PROC, "Mprobe message handle");
        int c = -1;
        MPI_Get_count(&st, MPI_INT, &c);
        CHECK(c == counts[1] && st.MPI_TAG == 1 && st.MPI_SOURCE == partner, "Mprobe count %d", c);
        int flag = -1;
        CHECK_MPI(MPI_Iprobe(partner, 1, comm, &flag, MPI_STATUS_IGNORE));
        CHECK(flag == 0, "message matched by Mprobe still visible to Iprobe");
        int rb[3] = {-1, -1, -1};
        CHECK_MPI(MPI_Mrecv(rb, 3, MPI_INT, &m, &st));
        CHECK(m == MPI_MESSAGE_NULL, "Mrecv did not set MPI_MESSAGE_NULL");
        CHECK(rb[0] == partner * 1000 + 100 && rb[2] == partner * 1000 + 102, "Mrecv data");
        CHECK(st.MPI_SOURCE == partner && st.MPI_TAG == 1, "Mrecv status");
    }
    /* Improbe + Imrecv for the large tag 5 and tag 3, ANY_SOURCE */
    {
        int tags[2] = {5, 3};
        for (int k = 0; k < 2; k++) {
            int t = tags[k], flag = 0;
            MPI_Message m = MPI_MESSAGE_NULL;
            MPI_Status st;
            double t0 = MPI_Wtime();
            while (!flag && MPI_Wtime() - t0 < 30)
                CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, t, comm, &flag, &m, &st));
            CHECK(flag, "Improbe tag %d never found the message", t);
            if (!flag)
                continue;
            int c = -1;
            MPI_Get_count(&st, MPI_INT, &c);
            CHECK(c == counts[t] && st.MPI_SOURCE == partner, "Improbe tag %d count %d", t, c);
            int *rb = malloc(sizeof(int) * (size_t)counts[t]);
            MPI_Request r;
            CHECK_MPI(MPI_Imrecv(rb, counts[t], MPI_INT, &m, &r));
            CHECK(m == MPI_MESSAGE_NULL, "Imrecv did not set MPI_MESSAGE_NULL");
            CHECK_MPI(MPI_Wait(&r, &st));
            MPI_Get_count(&st, MPI_INT, &c);
            CHECK(c == counts[t] && st.MPI_TAG == t, "Imrecv status count %d tag %d", c, st.MPI_TAG);
            int ok = 1;
            for (int i = 0; i < counts[t]; i++)
                if (rb[i] != partner * 1000 + t * 100 + i)
                    ok = 0;
            CHECK(ok, "Imrecv tag %d data", t);
            free(rb);
        }
    }
    /* remaining: tag 4 via Probe(ANY_SOURCE, ANY_TAG) */
    {
        MPI_Status st;
        CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &st));
        CHECK(st.MPI_TAG == 4 && st.MPI_SOURCE == partner, "last Probe tag %d", st.MPI_TAG);
        int rb[5];
        MPI_Recv(rb, 5, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, comm, MPI_STATUS_IGNORE);
        CHECK(rb[4] == partner * 1000 + 404, "tag 4 data %d", rb[4]);
    }
    CHECK_MPI(MPI_Waitall(NT, sr, MPI_STATUSES_IGNORE));
    for (int t = 0; t < NT; t++)
        free(sb[t]);
    MPI_Barrier(comm);
    {
        int flag = -1;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE);
        CHECK(flag == 0, "a message is left over");
    }
    MPI_Comm_free(&comm);
    return check_finish("p2p_probe");
}
