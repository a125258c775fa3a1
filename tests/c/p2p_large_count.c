/* ranks: 1 2 3 4 8 */
/* MPI-4 large-count ("_c") point-to-point variants: Send_c, Recv_c,
   Isend_c, Irecv_c, Ssend_c, Bsend_c, Rsend_c, Sendrecv_c,
   Sendrecv_replace_c, Send_init_c/Recv_init_c, Mrecv_c, Get_count_c,
   Get_elements_c, Type_size_c, Type_get_extent_c, Status_set_elements_c
   (MPI 4.1; _x before).
   Counts stay small (the point is the MPI_Count interface); prints SKIP
   when MPI_VERSION < 4. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
#if MPI_VERSION < 4
    int r0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r0);
    if (r0 == 0)
        printf("SKIP p2p_large_count: MPI_VERSION %d < 4\n", MPI_VERSION);
    MPI_Finalize();
    return 0;
#else
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int partner = (rank ^ 1) < size ? (rank ^ 1) : rank;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    const MPI_Count n = 300000; /* rendezvous-sized */
    int *sb = malloc(sizeof(int) * (size_t)n), *rb = malloc(sizeof(int) * (size_t)n);
    for (MPI_Count i = 0; i < n; i++)
        sb[i] = (int)(rank * 7 + i);

#define VERIFY(what, cnt)                                                                   \
    do {                                                                                    \
        int ok_ = 1;                                                                        \
        for (MPI_Count i_ = 0; i_ < (cnt); i_++)                                            \
            if (rb[i_] != (int)(partner * 7 + i_))                                          \
                ok_ = 0;                                                                    \
        CHECK(ok_, "%s: bad data", what);                                                   \
        memset(rb, 0xff, sizeof(int) * (size_t)n);                                          \
    } while (0)

    /* Send_c / Recv_c / Get_count_c */
    {
        MPI_Status st;
        MPI_Count c = -1;
        if (partner == rank || rank < partner) {
            MPI_Request r;
            CHECK_MPI(MPI_Isend_c(sb, n, MPI_INT, partner, 1, comm, &r));
            CHECK_MPI(MPI_Recv_c(rb, n, MPI_INT, partner, 1, comm, &st));
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        } else {
            CHECK_MPI(MPI_Recv_c(rb, n, MPI_INT, partner, 1, comm, &st));
            CHECK_MPI(MPI_Send_c(sb, n, MPI_INT, partner, 1, comm));
        }
        CHECK_MPI(MPI_Get_count_c(&st, MPI_INT, &c));
        CHECK(c == n, "Get_count_c %lld", (long long)c);
        CHECK_MPI(MPI_Get_count_c(&st, MPI_BYTE, &c));
        CHECK(c == n * (MPI_Count)sizeof(int), "Get_count_c bytes %lld", (long long)c);
        MPI_Count e = -1;
        CHECK_MPI(MPI_Get_elements_c(&st, MPI_INT, &e));
        CHECK(e == n, "Get_elements_c %lld", (long long)e);
        VERIFY("Send_c/Recv_c", n);
    }
    /* Irecv_c + Ssend_c / Rsend_c */
    {
        MPI_Request r[2];
        CHECK_MPI(MPI_Irecv_c(rb, n, MPI_INT, partner, 2, comm, &r[0]));
        CHECK_MPI(MPI_Irecv_c(rb + 10, 10, MPI_INT, partner, 3, comm, &r[1]));
        MPI_Barrier(comm);
        MPI_Request s[2];
        if (partner == rank) {
            CHECK_MPI(MPI_Issend_c(sb, n, MPI_INT, partner, 2, comm, &s[0]));
            CHECK_MPI(MPI_Irsend_c(sb + 10, 10, MPI_INT, partner, 3, comm, &s[1]));
            MPI_Waitall(2, s, MPI_STATUSES_IGNORE);
        } else {
            CHECK_MPI(MPI_Rsend_c(sb + 10, 10, MPI_INT, partner, 3, comm));
            CHECK_MPI(MPI_Ssend_c(sb, n, MPI_INT, partner, 2, comm));
        }
        MPI_Status st[2];
        CHECK_MPI(MPI_Waitall(2, r, st));
        MPI_Count c = -1;
        MPI_Get_count_c(&st[1], MPI_INT, &c);
        CHECK(c == 10 && rb[10] == partner * 7 + 10 && rb[19] == partner * 7 + 19, "Rsend_c");
        rb[10] = partner * 7 + 10; /* restore what the second receive overwrote */
        for (int i = 11; i < 20; i++)
            rb[i] = partner * 7 + i;
        VERIFY("Ssend_c", n);
    }
    /* Bsend_c */
    {
        int bsz = 100 * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
        void *bb = malloc((size_t)bsz);
        MPI_Buffer_attach(bb, bsz);
        CHECK_MPI(MPI_Bsend_c(sb, 100, MPI_INT, partner, 4, comm));
        CHECK_MPI(MPI_Recv_c(rb, 100, MPI_INT, partner, 4, comm, MPI_STATUS_IGNORE));
        VERIFY("Bsend_c", 100);
        void *d;
        int dsz;
        MPI_Buffer_detach(&d, &dsz);
        free(bb);
    }
    /* Sendrecv_c ring and Sendrecv_replace_c */
    {
        int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
        MPI_Status st;
        CHECK_MPI(MPI_Sendrecv_c(sb, n, MPI_INT, next, 5, rb, n, MPI_INT, prev, 5, comm, &st));
        int ok = 1;
        for (MPI_Count i = 0; i < n; i++)
            if (rb[i] != (int)(prev * 7 + i))
                ok = 0;
        CHECK(ok, "Sendrecv_c data");
        for (MPI_Count i = 0; i < 1000; i++)
            rb[i] = (int)(rank * 7 + i);
        CHECK_MPI(MPI_Sendrecv_replace_c(rb, 1000, MPI_INT, next, 6, prev, 6, comm, &st));
        ok = 1;
        for (MPI_Count i = 0; i < 1000; i++)
            if (rb[i] != (int)(prev * 7 + i))
                ok = 0;
        CHECK(ok, "Sendrecv_replace_c data");
    }
    /* persistent _c */
    {
        MPI_Request q[2];
        CHECK_MPI(MPI_Recv_init_c(rb, n, MPI_INT, partner, 7, comm, &q[0]));
        CHECK_MPI(MPI_Send_init_c(sb, n, MPI_INT, partner, 7, comm, &q[1]));
        for (int it = 0; it < 3; it++) {
            CHECK_MPI(MPI_Startall(2, q));
            CHECK_MPI(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
            VERIFY("Send_init_c", n);
        }
        MPI_Request_free(&q[0]);
        MPI_Request_free(&q[1]);
    }
    /* Mprobe + Mrecv_c */
    {
        MPI_Request s;
        MPI_Isend_c(sb, 500, MPI_INT, partner, 8, comm, &s);
        MPI_Message m;
        MPI_Status st;
        MPI_Mprobe(partner, 8, comm, &m, &st);
        MPI_Count c = -1;
        MPI_Get_count_c(&st, MPI_INT, &c);
        CHECK(c == 500, "Mprobe count %lld", (long long)c);
        CHECK_MPI(MPI_Mrecv_c(rb, c, MPI_INT, &m, &st));
        MPI_Wait(&s, MPI_STATUS_IGNORE);
        VERIFY("Mrecv_c", 500);
    }
    /* type queries */
    {
        MPI_Count sz = -1, lb = -1, ext = -1;
        CHECK_MPI(MPI_Type_size_c(MPI_DOUBLE, &sz));
        CHECK_MPI(MPI_Type_get_extent_c(MPI_DOUBLE_INT, &lb, &ext));
        struct {
            double d;
            int i;
        } di;
        (void)di;
        CHECK(sz == (MPI_Count)sizeof(double) && lb == 0 && ext == (MPI_Count)sizeof di,
              "Type_size_c %lld extent_c %lld", (long long)sz, (long long)ext);
        MPI_Status st;
#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
        CHECK_MPI(MPI_Status_set_elements_c(&st, MPI_INT, (MPI_Count)1 << 33)); /* MPI 4.1 */
#else
        CHECK_MPI(MPI_Status_set_elements_x(&st, MPI_INT, (MPI_Count)1 << 33));
#endif
        MPI_Count c = -1;
        CHECK_MPI(MPI_Get_count_c(&st, MPI_INT, &c));
        CHECK(c == (MPI_Count)1 << 33, "Status_set_elements_c 2^33: count %lld", (long long)c);
        /* the int version cannot represent it: MPI_UNDEFINED */
        int ic = 0;
        MPI_Get_count(&st, MPI_INT, &ic);
        CHECK(ic == MPI_UNDEFINED, "Get_count of 2^33 elements gave %d, expected MPI_UNDEFINED", ic);
    }
    free(sb);
    free(rb);
    MPI_Comm_free(&comm);
    return check_finish("p2p_large_count");
#endif
}
