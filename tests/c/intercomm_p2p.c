/* ranks: 2 3 4 5 8 */
/* Point-to-point on intercommunicators, in both directions: ranks name the
   remote group, the source a receiver sees is the sender's rank in its own
   group, MPI_ANY_SOURCE ranges over the remote group; blocking, synchronous,
   buffered, nonblocking, persistent, Sendrecv(_replace), Probe/Iprobe,
   Mprobe/Mrecv, MPI_PROC_NULL, and out-of-range ranks. */
#include "inter_util.h"

static int n, wrank;

static int value(int from_world, int to_local, int k)
{
    return from_world * 10000 + to_local * 100 + k;
}

static void run(int kind, MPI_Comm inter)
{
    int side = iu_side(kind, wrank), rank, rs;
    MPI_Comm_rank(inter, &rank);
    MPI_Comm_remote_size(inter, &rs);
    const char *kn = iu_kind_name(kind);
    MPI_Status st;

    /* 1. Standard sends to every remote rank (tag = 10 + own rank), received with
       MPI_ANY_SOURCE / MPI_ANY_TAG: every remote rank exactly once, source and tag right. */
    MPI_Request rq[64];
    int out[64];
    for (int r = 0; r < rs; r++) {
        out[r] = value(wrank, r, 1);
        CHECK_MPI(MPI_Isend(&out[r], 1, MPI_INT, r, 10 + rank, inter, &rq[r]));
    }
    int seen[64] = {0};
    for (int i = 0; i < rs; i++) {
        int v = -1;
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, inter, &st));
        int s = st.MPI_SOURCE;
        CHECK(s >= 0 && s < rs, "%s: source %d out of the remote group (size %d)", kn, s, rs);
        if (s < 0 || s >= rs)
            continue;
        seen[s]++;
        CHECK(st.MPI_TAG == 10 + s, "%s: tag %d from %d", kn, st.MPI_TAG, s);
        CHECK(v == value(iu_world(kind, 1 - side, s), rank, 1), "%s: got %d from %d", kn, v, s);
    }
    for (int r = 0; r < rs; r++)
        CHECK(seen[r] == 1, "%s: %d messages from remote %d", kn, seen[r], r);
    CHECK_MPI(MPI_Waitall(rs, rq, MPI_STATUSES_IGNORE));
    /* Later messages must not meet the MPI_ANY_TAG receives above. */
    MPI_Barrier(MPI_COMM_WORLD);

    /* 2. Directed receives with source and tag, from blocking and synchronous sends (side 0
       sends first, side 1 receives first, so neither waits on the other). */
    for (int phase = 0; phase < 2; phase++) {
        if (phase == side) {
            for (int r = 0; r < rs; r++) {
                int v = value(wrank, r, 2);
                if (r % 2)
                    CHECK_MPI(MPI_Ssend(&v, 1, MPI_INT, r, 20, inter));
                else
                    CHECK_MPI(MPI_Send(&v, 1, MPI_INT, r, 20, inter));
            }
        } else {
            for (int r = rs - 1; r >= 0; r--) {
                int v = -1;
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, r, 20, inter, &st));
                CHECK(v == value(iu_world(kind, 1 - side, r), rank, 2) && st.MPI_SOURCE == r,
                      "%s: directed got %d from %d", kn, v, st.MPI_SOURCE);
            }
        }
    }

    /* 3. Persistent requests to and from every remote rank, started twice. */
    MPI_Request prq[128];
    int pin[64], pout[64];
    for (int r = 0; r < rs; r++) {
        CHECK_MPI(MPI_Recv_init(&pin[r], 1, MPI_INT, r, 30, inter, &prq[r]));
        CHECK_MPI(MPI_Send_init(&pout[r], 1, MPI_INT, r, 30, inter, &prq[rs + r]));
    }
    for (int round = 0; round < 2; round++) {
        for (int r = 0; r < rs; r++) {
            pout[r] = value(wrank, r, 3 + round);
            pin[r] = -1;
        }
        CHECK_MPI(MPI_Startall(2 * rs, prq));
        CHECK_MPI(MPI_Waitall(2 * rs, prq, MPI_STATUSES_IGNORE));
        for (int r = 0; r < rs; r++)
            CHECK(pin[r] == value(iu_world(kind, 1 - side, r), rank, 3 + round), "%s: persistent got %d from %d", kn,
                  pin[r], r);
    }
    for (int r = 0; r < 2 * rs; r++)
        MPI_Request_free(&prq[r]);

    /* 4. Sendrecv and Sendrecv_replace between the leaders (local rank 0 on each side). */
    if (rank == 0) {
        int v = value(wrank, 0, 5), got = -1;
        CHECK_MPI(MPI_Sendrecv(&v, 1, MPI_INT, 0, 40, &got, 1, MPI_INT, 0, 40, inter, &st));
        CHECK(got == value(iu_world(kind, 1 - side, 0), 0, 5) && st.MPI_SOURCE == 0, "%s: sendrecv got %d", kn, got);
        v = value(wrank, 0, 6);
        CHECK_MPI(MPI_Sendrecv_replace(&v, 1, MPI_INT, 0, 41, 0, 41, inter, &st));
        CHECK(v == value(iu_world(kind, 1 - side, 0), 0, 6), "%s: sendrecv_replace got %d", kn, v);
    }

    /* 5. Probe, Iprobe and Mprobe: the last remote rank sends three ints to each rank;
       buffered send for the first. */
    if (rank == iu_size(kind, side, n) - 1) {
        int bufsize = rs * (3 * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
        char *attach = malloc((size_t)bufsize);
        MPI_Buffer_attach(attach, bufsize);
        for (int r = 0; r < rs; r++) {
            int v[3] = {value(wrank, r, 7), r, -r};
            CHECK_MPI(MPI_Bsend(v, 3, MPI_INT, r, 50 + r % 2, inter));
            CHECK_MPI(MPI_Send(v, 3, MPI_INT, r, 52, inter));
        }
        void *p;
        int sz;
        MPI_Buffer_detach(&p, &sz);
        free(attach);
    }
    int last = iu_size(kind, 1 - side, n) - 1;
    CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, 50 + rank % 2, inter, &st));
    int cnt = -1;
    MPI_Get_count(&st, MPI_INT, &cnt);
    CHECK(st.MPI_SOURCE == last && cnt == 3, "%s: probe source %d count %d", kn, st.MPI_SOURCE, cnt);
    int v3[3] = {0, 0, 0};
    CHECK_MPI(MPI_Recv(v3, 3, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, inter, MPI_STATUS_IGNORE));
    CHECK(v3[0] == value(iu_world(kind, 1 - side, last), rank, 7) && v3[1] == rank, "%s: probed message %d %d", kn,
          v3[0], v3[1]);
    int flag = 0;
    while (!flag)
        CHECK_MPI(MPI_Iprobe(last, 52, inter, &flag, &st));
    MPI_Message msg;
    CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, 52, inter, &msg, &st));
    CHECK(st.MPI_SOURCE == last, "%s: mprobe source %d", kn, st.MPI_SOURCE);
    CHECK_MPI(MPI_Mrecv(v3, 3, MPI_INT, &msg, &st));
    CHECK(v3[0] == value(iu_world(kind, 1 - side, last), rank, 7), "%s: mrecv got %d", kn, v3[0]);

    /* 6. MPI_PROC_NULL, and ranks beyond the remote group. */
    CHECK_MPI(MPI_Send(out, 1, MPI_INT, MPI_PROC_NULL, 0, inter));
    CHECK_MPI(MPI_Recv(out, 1, MPI_INT, MPI_PROC_NULL, 0, inter, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "%s: proc_null source %d", kn, st.MPI_SOURCE);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    CHECK_ERR_CLASS(MPI_Send(out, 1, MPI_INT, rs, 0, inter), MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Irecv(out, 1, MPI_INT, rs, 0, inter, &rq[0]), MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Recv(out, 1, MPI_INT, -7, 0, inter, &st), MPI_ERR_RANK);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int kind = 0; kind < IU_KINDS; kind++) {
        MPI_Comm half, inter;
        iu_make(kind, 21, &half, &inter);
        run(kind, inter);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
    return check_finish("intercomm_p2p");
}
