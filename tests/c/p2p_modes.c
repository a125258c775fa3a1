/* ranks: 1 2 3 4 8 */
/* timeout: 120 */
/* Send modes: Ssend/Issend (completes only once the receive is posted),
   Rsend/Irsend (receive posted first, then a barrier), Bsend/Ibsend with
   Buffer_attach/detach, Isend/Irecv, and persistent Send_init/Recv_init/
   Ssend_init/Bsend_init/Rsend_init with Start/Startall repeated.
   Ranks are paired (r, r^1); an odd last rank pairs with itself. Every part
   is symmetric: both ranks of a pair send and receive. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <time.h>

static int rank, size, partner;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void ssend_part(size_t n, int tag)
{
    unsigned char *sb = malloc(n + 1), *rb = malloc(n + 1);
    check_fill(sb, n, rank + tag);
    MPI_Request r;
    CHECK_MPI(MPI_Issend(sb, (int)n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &r));
    /* nobody has posted the matching receive yet: must not complete */
    int flag = 0;
    for (int i = 0; i < 20 && !flag; i++) {
        CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        sleep_ms(5);
    }
    CHECK(flag == 0, "Issend of %zu bytes completed before the receive was posted", n);
    /* nobody posts the receive before both sides of every pair finished testing */
    MPI_Barrier(MPI_COMM_WORLD);
    /* a blocking Ssend to the partner on another tag would deadlock only if
       both use it first; receive first, then the Issend must complete */
    MPI_Status st;
    CHECK_MPI(MPI_Recv(rb, (int)n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
    CHECK(check_verify(rb, n, partner + tag) < 0, "Ssend data %zu", n);
    double t0 = MPI_Wtime();
    while (!flag && MPI_Wtime() - t0 < 20.0)
        CHECK_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1, "Issend of %zu bytes did not complete after the receive", n);
    if (!flag)
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    free(sb);
    free(rb);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = (rank ^ 1) < size ? (rank ^ 1) : rank;

    /* Ssend semantics (small = would be eager, large = rendezvous) */
    ssend_part(4, 1);
    ssend_part(200000, 2);
    /* blocking Ssend: lower rank sends first */
    {
        int a = rank, b = -1;
        if (partner == rank) {
            MPI_Request r;
            MPI_Irecv(&b, 1, MPI_INT, rank, 3, MPI_COMM_WORLD, &r);
            CHECK_MPI(MPI_Ssend(&a, 1, MPI_INT, rank, 3, MPI_COMM_WORLD));
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else if (rank < partner) {
            CHECK_MPI(MPI_Ssend(&a, 1, MPI_INT, partner, 3, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(&b, 1, MPI_INT, partner, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            CHECK_MPI(MPI_Recv(&b, 1, MPI_INT, partner, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Ssend(&a, 1, MPI_INT, partner, 3, MPI_COMM_WORLD));
        }
        CHECK(b == partner, "Ssend value %d", b);
    }

    /* Rsend / Irsend: receives posted, barrier, then ready sends */
    {
        int a[2] = {rank * 10, rank * 10 + 1}, b[2] = {-1, -1};
        double big_s[5000], big_r[5000];
        for (int i = 0; i < 5000; i++) {
            big_s[i] = rank + i * 0.5;
            big_r[i] = -1;
        }
        MPI_Request rr[3], sr[2];
        MPI_Irecv(&b[0], 1, MPI_INT, partner, 10, MPI_COMM_WORLD, &rr[0]);
        MPI_Irecv(&b[1], 1, MPI_INT, partner, 11, MPI_COMM_WORLD, &rr[1]);
        MPI_Irecv(big_r, 5000, MPI_DOUBLE, partner, 12, MPI_COMM_WORLD, &rr[2]);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_Irsend(&a[1], 1, MPI_INT, partner, 11, MPI_COMM_WORLD, &sr[0]));
        CHECK_MPI(MPI_Irsend(big_s, 5000, MPI_DOUBLE, partner, 12, MPI_COMM_WORLD, &sr[1]));
        if (partner == rank) {
            MPI_Request x;
            MPI_Isend(&a[0], 1, MPI_INT, rank, 10, MPI_COMM_WORLD, &x); /* Rsend to self would block */
            MPI_Wait(&x, MPI_STATUS_IGNORE);
        } else {
            CHECK_MPI(MPI_Rsend(&a[0], 1, MPI_INT, partner, 10, MPI_COMM_WORLD));
        }
        MPI_Waitall(2, sr, MPI_STATUSES_IGNORE);
        MPI_Waitall(3, rr, MPI_STATUSES_IGNORE);
        CHECK(b[0] == partner * 10 && b[1] == partner * 10 + 1, "Rsend values %d %d", b[0], b[1]);
        int ok = 1;
        for (int i = 0; i < 5000; i++)
            if (big_r[i] != partner + i * 0.5)
                ok = 0;
        CHECK(ok, "Irsend of 40000 bytes: bad data");
    }

    /* Bsend / Ibsend: buffered sends complete before the receive is posted */
    {
        const int nmsg = 8;
        const int big = 65536;
        int bufsize = nmsg * (64 + MPI_BSEND_OVERHEAD) + big + MPI_BSEND_OVERHEAD + 1024;
        char *bbuf = malloc((size_t)bufsize);
        CHECK_MPI(MPI_Buffer_attach(bbuf, bufsize));
        int vals[8];
        for (int i = 0; i < nmsg; i++) {
            vals[i] = rank * 100 + i;
            CHECK_MPI(MPI_Bsend(&vals[i], 1, MPI_INT, partner, 20 + i, MPI_COMM_WORLD));
        }
        unsigned char *bs = malloc((size_t)big), *br = malloc((size_t)big);
        check_fill(bs, (size_t)big, rank + 5);
        MPI_Request ir;
        CHECK_MPI(MPI_Ibsend(bs, big, MPI_BYTE, partner, 40, MPI_COMM_WORLD, &ir));
        /* the buffered send is locally complete: Wait returns without a receive */
        CHECK_MPI(MPI_Wait(&ir, MPI_STATUS_IGNORE));
        memset(bs, 0, (size_t)big); /* reusing the buffer must not change the message */
        MPI_Barrier(MPI_COMM_WORLD); /* all Bsends done before any receive is posted */
        for (int i = nmsg - 1; i >= 0; i--) { /* receive in reverse tag order */
            int v = -1;
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, partner, 20 + i, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(v == partner * 100 + i, "Bsend message %d: %d", i, v);
        }
        CHECK_MPI(MPI_Recv(br, big, MPI_BYTE, partner, 40, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(check_verify(br, (size_t)big, partner + 5) < 0, "Ibsend 64 KiB: bad data");
        void *det = NULL;
        int detsize = -1;
        CHECK_MPI(MPI_Buffer_detach(&det, &detsize));
        CHECK(det == bbuf && detsize == bufsize, "Buffer_detach returned %p/%d, attached %p/%d",
              det, detsize, (void *)bbuf, bufsize);
        free(bbuf);
        free(bs);
        free(br);
    }

    /* Isend / Irecv / Issend in one Waitall */
    {
        int n = 100000;
        int *s1 = malloc(sizeof(int) * (size_t)n), *r1 = malloc(sizeof(int) * (size_t)n);
        for (int i = 0; i < n; i++) {
            s1[i] = rank * 7 + i;
            r1[i] = -1;
        }
        int s2 = rank + 3, r2 = -1;
        MPI_Request q[4];
        MPI_Status st[4];
        MPI_Irecv(r1, n, MPI_INT, partner, 50, MPI_COMM_WORLD, &q[0]);
        MPI_Irecv(&r2, 1, MPI_INT, partner, 51, MPI_COMM_WORLD, &q[1]);
        CHECK_MPI(MPI_Isend(s1, n, MPI_INT, partner, 50, MPI_COMM_WORLD, &q[2]));
        CHECK_MPI(MPI_Issend(&s2, 1, MPI_INT, partner, 51, MPI_COMM_WORLD, &q[3]));
        CHECK_MPI(MPI_Waitall(4, q, st));
        int ok = 1;
        for (int i = 0; i < n; i++)
            if (r1[i] != partner * 7 + i)
                ok = 0;
        CHECK(ok && r2 == partner + 3, "Isend/Issend data");
        int c = -1;
        MPI_Get_count(&st[0], MPI_INT, &c);
        CHECK(c == n && st[0].MPI_SOURCE == partner && st[0].MPI_TAG == 50, "Irecv status");
        for (int i = 0; i < 4; i++)
            CHECK(q[i] == MPI_REQUEST_NULL, "Waitall left request %d active", i);
        free(s1);
        free(r1);
    }

    /* persistent requests, each restarted several times */
    {
        enum { N = 3000 };
        static double sbuf[N], rbuf[N];
        int ssv = 0, srv = -1, bsv = 0, brv = -1, rsv = 0, rrv = -1;
        MPI_Request send_r, recv_r, ss_r, sr_r, bs_r, br_r, rs_r, rr_r;
        int bsz = 4 * (int)(sizeof(int) + MPI_BSEND_OVERHEAD) + 64;
        char *bbuf = malloc((size_t)bsz);
        MPI_Buffer_attach(bbuf, bsz);
        CHECK_MPI(MPI_Send_init(sbuf, N, MPI_DOUBLE, partner, 60, MPI_COMM_WORLD, &send_r));
        CHECK_MPI(MPI_Recv_init(rbuf, N, MPI_DOUBLE, partner, 60, MPI_COMM_WORLD, &recv_r));
        CHECK_MPI(MPI_Ssend_init(&ssv, 1, MPI_INT, partner, 61, MPI_COMM_WORLD, &ss_r));
        CHECK_MPI(MPI_Recv_init(&srv, 1, MPI_INT, partner, 61, MPI_COMM_WORLD, &sr_r));
        CHECK_MPI(MPI_Bsend_init(&bsv, 1, MPI_INT, partner, 62, MPI_COMM_WORLD, &bs_r));
        CHECK_MPI(MPI_Recv_init(&brv, 1, MPI_INT, partner, 62, MPI_COMM_WORLD, &br_r));
        CHECK_MPI(MPI_Rsend_init(&rsv, 1, MPI_INT, partner, 63, MPI_COMM_WORLD, &rs_r));
        CHECK_MPI(MPI_Recv_init(&rrv, 1, MPI_INT, partner, 63, MPI_COMM_WORLD, &rr_r));
        for (int it = 0; it < 5; it++) {
            for (int i = 0; i < N; i++) {
                sbuf[i] = rank * 1000.0 + it + i;
                rbuf[i] = -1;
            }
            ssv = rank * 2 + it;
            bsv = rank * 3 + it;
            rsv = rank * 4 + it;
            /* the ready-send receive must be active before the partner starts
               the ready send: start receives, barrier, then sends */
            MPI_Request recvs[4] = {recv_r, sr_r, br_r, rr_r};
            CHECK_MPI(MPI_Startall(4, recvs));
            MPI_Barrier(MPI_COMM_WORLD);
            if (it % 2 == 0) {
                MPI_Request sends[3] = {send_r, ss_r, bs_r};
                CHECK_MPI(MPI_Startall(3, sends));
                CHECK_MPI(MPI_Start(&rs_r));
                CHECK_MPI(MPI_Waitall(3, sends, MPI_STATUSES_IGNORE));
                /* persistent requests stay allocated (inactive) after completion */
                CHECK(sends[0] == send_r && sends[1] == ss_r && sends[2] == bs_r,
                      "Waitall changed persistent request handles");
            } else {
                CHECK_MPI(MPI_Start(&bs_r));
                CHECK_MPI(MPI_Start(&rs_r));
                CHECK_MPI(MPI_Start(&ss_r));
                CHECK_MPI(MPI_Start(&send_r));
                CHECK_MPI(MPI_Wait(&send_r, MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Wait(&ss_r, MPI_STATUS_IGNORE));
                CHECK_MPI(MPI_Wait(&bs_r, MPI_STATUS_IGNORE));
            }
            CHECK_MPI(MPI_Wait(&rs_r, MPI_STATUS_IGNORE));
            MPI_Status sts[4];
            CHECK_MPI(MPI_Waitall(4, recvs, sts));
            CHECK(recvs[0] == recv_r && recvs[3] == rr_r, "persistent receive handle changed");
            CHECK(send_r != MPI_REQUEST_NULL && rs_r != MPI_REQUEST_NULL,
                  "Wait freed a persistent request");
            int ok = 1;
            for (int i = 0; i < N; i++)
                if (rbuf[i] != partner * 1000.0 + it + i)
                    ok = 0;
            CHECK(ok, "persistent send iteration %d: bad data", it);
            CHECK(srv == partner * 2 + it && brv == partner * 3 + it && rrv == partner * 4 + it,
                  "iteration %d: ssend %d bsend %d rsend %d", it, srv, brv, rrv);
            CHECK(sts[0].MPI_SOURCE == partner && sts[0].MPI_TAG == 60, "persistent status");
            /* inactive persistent request: Test returns flag = true, empty status */
            int flag = 0;
            MPI_Status es;
            CHECK_MPI(MPI_Test(&recv_r, &flag, &es));
            CHECK(flag == 1 && es.MPI_TAG == MPI_ANY_TAG && es.MPI_SOURCE == MPI_ANY_SOURCE,
                  "Test of an inactive persistent request: flag %d source %d tag %d", flag,
                  es.MPI_SOURCE, es.MPI_TAG);
        }
        MPI_Request all[8] = {send_r, recv_r, ss_r, sr_r, bs_r, br_r, rs_r, rr_r};
        for (int i = 0; i < 8; i++) {
            CHECK_MPI(MPI_Request_free(&all[i]));
            CHECK(all[i] == MPI_REQUEST_NULL, "Request_free did not null request %d", i);
        }
        void *det;
        int dsz;
        MPI_Buffer_detach(&det, &dsz);
        CHECK(det == bbuf && dsz == bsz, "second detach %p/%d", det, dsz);
        free(bbuf);
    }
    return check_finish("p2p_modes");
}
