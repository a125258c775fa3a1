/* ranks: 1 2 3 4 8 */
/* timeout: 120 */
/* Point-to-point basics: blocking Send/Recv with sizes 0 B .. 8 MiB (eager
   and rendezvous), status fields and Get_count, MPI_PROC_NULL, ANY_SOURCE /
   ANY_TAG, MPI_STATUS_IGNORE, Sendrecv, Sendrecv_replace.
   Ranks are paired (r, r^1); an odd last rank pairs with itself and uses
   non-blocking sends. */
#include "check.h"

static int rank, size, partner;

/* exchange n bytes with the partner: blocking on both sides when paired */
static void exchange(size_t n, int tag)
{
    unsigned char *sb = malloc(n + 1), *rb = malloc(n + 16);
    check_fill(sb, n, rank * 1000 + tag);
    memset(rb, 0xEE, n + 16);
    MPI_Status st;
    st.MPI_SOURCE = st.MPI_TAG = -99;
    if (partner == rank) {
        MPI_Request r;
        CHECK_MPI(MPI_Isend(sb, (int)n, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Recv(rb, (int)n, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (rank < partner) {
        CHECK_MPI(MPI_Send(sb, (int)n, MPI_BYTE, partner, tag, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(rb, (int)n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
    } else {
        CHECK_MPI(MPI_Recv(rb, (int)n, MPI_BYTE, partner, tag, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Send(sb, (int)n, MPI_BYTE, partner, tag, MPI_COMM_WORLD));
    }
    long bad = check_verify(rb, n, partner * 1000 + tag);
    CHECK(bad < 0, "size %zu: data mismatch at byte %ld", n, bad);
    int guard_ok = 1;
    for (size_t i = n; i < n + 16; i++)
        if (rb[i] != 0xEE)
            guard_ok = 0;
    CHECK(guard_ok, "size %zu: receive wrote past the message", n);
    CHECK(st.MPI_SOURCE == partner && st.MPI_TAG == tag, "size %zu: status source %d tag %d", n,
          st.MPI_SOURCE, st.MPI_TAG);
    int cnt = -1;
    MPI_Get_count(&st, MPI_BYTE, &cnt);
    CHECK(cnt == (int)n, "size %zu: Get_count %d", n, cnt);
    free(sb);
    free(rb);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = (rank ^ 1) < size ? (rank ^ 1) : rank;

    static const size_t sizes[] = {0, 1, 2, 7, 8, 64, 100, 1000, 4096, 16384, 65535, 65536,
                                   65537, 262144, 1 << 20, (1 << 20) + 3, 8 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        exchange(sizes[i], (int)i);

    /* MPI_PROC_NULL: send completes, receive gets an empty status */
    {
        int x = 5, y = 77;
        MPI_Status st;
        CHECK_MPI(MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(&y, 1, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st));
        int cnt = -1;
        MPI_Get_count(&st, MPI_INT, &cnt);
        CHECK(y == 77, "Recv from PROC_NULL modified the buffer");
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && cnt == 0,
              "PROC_NULL status: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, cnt);
        /* non-blocking receives from PROC_NULL: see p2p_proc_null.c */
        CHECK_MPI(MPI_Sendrecv(&x, 1, MPI_INT, MPI_PROC_NULL, 1, &y, 1, MPI_INT, MPI_PROC_NULL, 1,
                               MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL && y == 77, "Sendrecv with PROC_NULL");
    }

    /* ANY_SOURCE / ANY_TAG: everyone sends to rank 0 (on its own communicator,
       so that later traffic cannot match the wildcards) */
    {
        MPI_Comm wc;
        MPI_Comm_dup(MPI_COMM_WORLD, &wc);
        int val = rank * 7 + 1;
        MPI_Request r;
        CHECK_MPI(MPI_Isend(&val, 1, MPI_INT, 0, 100 + rank, wc, &r));
        if (rank == 0) {
            int seen[64] = {0};
            for (int i = 0; i < size; i++) {
                int got = -1;
                MPI_Status st;
                CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, wc, &st));
                int src = st.MPI_SOURCE;
                CHECK(src >= 0 && src < size, "ANY_SOURCE status source %d", src);
                if (src < 0 || src >= size || src >= 64)
                    continue;
                CHECK(st.MPI_TAG == 100 + src && got == src * 7 + 1,
                      "from %d: tag %d value %d", src, st.MPI_TAG, got);
                CHECK(!seen[src], "source %d seen twice", src);
                seen[src] = 1;
                int cnt = -1;
                MPI_Get_count(&st, MPI_INT, &cnt);
                CHECK(cnt == 1, "ANY_SOURCE count %d", cnt);
            }
        }
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        MPI_Comm_free(&wc);
    }

    /* ANY_TAG with a fixed source, and MPI_STATUS_IGNORE */
    {
        int a = rank + 1000, b = -1;
        MPI_Request r;
        MPI_Isend(&a, 1, MPI_INT, partner, 4242, MPI_COMM_WORLD, &r);
        CHECK_MPI(MPI_Recv(&b, 1, MPI_INT, partner, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(b == partner + 1000, "ANY_TAG receive got %d", b);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }

    /* receive buffer larger than the message */
    {
        int a[3] = {1, 2, 3}, b[10];
        for (int i = 0; i < 10; i++)
            b[i] = -1;
        MPI_Request r;
        MPI_Status st;
        MPI_Isend(a, 3, MPI_INT, partner, 9, MPI_COMM_WORLD, &r);
        CHECK_MPI(MPI_Recv(b, 10, MPI_INT, partner, 9, MPI_COMM_WORLD, &st));
        int cnt = -1;
        MPI_Get_count(&st, MPI_INT, &cnt);
        CHECK(cnt == 3 && b[0] == 1 && b[2] == 3 && b[3] == -1, "short message: count %d", cnt);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }

    /* Sendrecv around a ring, small and large */
    {
        int next = (rank + 1) % size, prev = (rank - 1 + size) % size;
        size_t ns[2] = {16, 300000};
        for (int k = 0; k < 2; k++) {
            size_t n = ns[k];
            unsigned char *sb = malloc(n), *rb = malloc(n);
            check_fill(sb, n, rank + 50 * k);
            MPI_Status st;
            CHECK_MPI(MPI_Sendrecv(sb, (int)n, MPI_BYTE, next, 21, rb, (int)n, MPI_BYTE, prev, 21,
                                   MPI_COMM_WORLD, &st));
            CHECK(check_verify(rb, n, prev + 50 * k) < 0, "Sendrecv %zu: bad data", n);
            CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 21, "Sendrecv status %d %d",
                  st.MPI_SOURCE, st.MPI_TAG);
            /* replace: buffer goes to next, gets prev's */
            check_fill(sb, n, rank + 70 * k);
            CHECK_MPI(MPI_Sendrecv_replace(sb, (int)n, MPI_BYTE, next, 22, prev, 22, MPI_COMM_WORLD,
                                           &st));
            CHECK(check_verify(sb, n, prev + 70 * k) < 0, "Sendrecv_replace %zu: bad data", n);
            int cnt = -1;
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            CHECK(cnt == (int)n && st.MPI_SOURCE == prev, "Sendrecv_replace count %d", cnt);
            free(sb);
            free(rb);
        }
    }
    return check_finish("p2p_basic");
}
