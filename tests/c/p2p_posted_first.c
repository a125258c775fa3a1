/* ranks: 2 */
/* timeout: 120 */
/* Large receives posted before their message was sent, which Baton offers to
   their sender (it then writes the message while it waits): a receiver that
   computes while the sender waits, one that waits while the sender computes,
   MPI_ANY_TAG, a message smaller than the receive, an eager message first (it
   takes the receive, the large one the next), MPI_Cancel before the message
   (cancelled) and a cancelled receive's message taken by a later receive,
   an earlier MPI_ANY_SOURCE receive that must match first, and truncation. */
#include "check.h"

#define N (1 << 20)

static int rank;

static double busy(double seconds)
{
    volatile unsigned long x = 1;
    double t = MPI_Wtime();
    while (MPI_Wtime() - t < seconds)
        for (int i = 0; i < 1000; i++)
            x = x * 6364136223846793005ul + 1;
    return (double)x;
}

static void verify(const unsigned char *b, size_t n, int seed, const char *what)
{
    long bad = check_verify(b, n, seed);
    CHECK(bad < 0, "%s: %zu bytes, mismatch at byte %ld", what, n, bad);
}

/* rank 1 posts, a zero-byte handshake, then one side computes while the other
   waits */
static void one_side_computes(int receiver_computes, int tag, int recv_tag, size_t n, int seed)
{
    unsigned char *b = malloc(N);
    if (rank == 1) {
        memset(b, 0, N);
        MPI_Request r;
        MPI_Status st;
        CHECK_MPI(MPI_Irecv(b, N, MPI_BYTE, 0, recv_tag, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD));
        if (receiver_computes)
            busy(0.02);
        CHECK_MPI(MPI_Wait(&r, &st));
        int count;
        MPI_Get_count(&st, MPI_BYTE, &count);
        CHECK(count == (int)n && st.MPI_SOURCE == 0 && st.MPI_TAG == tag,
              "status: count %d source %d tag %d, expected %zu 0 %d", count, st.MPI_SOURCE, st.MPI_TAG, n, tag);
        verify(b, n, seed, receiver_computes ? "receiver computed" : "sender computed");
        for (size_t i = n; i < N && i < n + 64; i++)
            CHECK(b[i] == 0, "byte %zu past the message was written", i);
    } else {
        check_fill(b, n, seed);
        MPI_Request r;
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Isend(b, (int)n, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &r));
        if (!receiver_computes)
            busy(0.02);
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    free(b);
}

static void eager_first(void)
{
    unsigned char *b = malloc(N), *b2 = malloc(N), small[40];
    if (rank == 1) {
        MPI_Request r;
        CHECK_MPI(MPI_Irecv(b, N, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD));
        MPI_Status st;
        CHECK_MPI(MPI_Wait(&r, &st));
        int count;
        MPI_Get_count(&st, MPI_BYTE, &count);
        CHECK(count == 40, "the eager message took the offered receive: count %d", count);
        verify(b, 40, 61, "eager first");
        CHECK_MPI(MPI_Recv(b2, N, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        verify(b2, N, 62, "large after eager");
    } else {
        check_fill(small, 40, 61);
        check_fill(b, N, 62);
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Send(small, 40, MPI_BYTE, 1, 5, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Send(b, N, MPI_BYTE, 1, 5, MPI_COMM_WORLD));
    }
    free(b);
    free(b2);
}

static void cancels(void)
{
    unsigned char *b = malloc(N), *b2 = malloc(N);
    if (rank == 1) {
        MPI_Request r;
        MPI_Status st;
        int cancelled = 0;
        memset(b, 0, N);
        CHECK_MPI(MPI_Irecv(b, N, MPI_BYTE, 0, 6, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Cancel(&r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_MPI(MPI_Test_cancelled(&st, &cancelled));
        CHECK(cancelled, "a receive cancelled before its message was sent is cancelled");
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD));
        /* the sender has sent (and waits): a later receive takes the message */
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 0, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        busy(0.01);
        CHECK_MPI(MPI_Recv(b2, N, MPI_BYTE, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        verify(b2, N, 63, "after a cancel");
        int untouched = 1;
        for (size_t i = 0; i < N; i++)
            untouched &= b[i] == 0;
        CHECK(untouched, "the cancelled receive's buffer was written");
    } else {
        check_fill(b, N, 63);
        MPI_Request r;
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Isend(b, N, MPI_BYTE, 1, 6, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 1, 98, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    free(b);
    free(b2);
}

static void any_source_first(void)
{
    unsigned char *a = malloc(N), *b = malloc(N);
    if (rank == 1) {
        MPI_Request r[2];
        CHECK_MPI(MPI_Irecv(a, N, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &r[0]));
        CHECK_MPI(MPI_Irecv(b, N, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &r[1]));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        verify(a, N, 71, "first message, MPI_ANY_SOURCE receive");
        verify(b, N, 72, "second message, receive from rank 0");
    } else {
        check_fill(a, N, 71);
        check_fill(b, N, 72);
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Send(a, N, MPI_BYTE, 1, 7, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Send(b, N, MPI_BYTE, 1, 7, MPI_COMM_WORLD));
    }
    free(a);
    free(b);
}

static void truncation(void)
{
    unsigned char *b = malloc(N);
    if (rank == 1) {
        MPI_Request r;
        MPI_Status st;
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        CHECK_MPI(MPI_Irecv(b, N / 2, MPI_BYTE, 0, 8, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, 99, MPI_COMM_WORLD));
        int rc = MPI_Wait(&r, &st);
        int cls = -1;
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "a message larger than the offered receive: class %d, expected MPI_ERR_TRUNCATE", cls);
        /* what a truncated receive's buffer holds is not specified */
        CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    } else {
        check_fill(b, N, 81);
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Send(b, N, MPI_BYTE, 1, 8, MPI_COMM_WORLD));
    }
    free(b);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 3; i++) {
        one_side_computes(1, 3, 3, N, 11 + i);
        one_side_computes(0, 3, 3, N, 21 + i);
        one_side_computes(1, 4, MPI_ANY_TAG, N / 3 + 17, 31 + i);
        one_side_computes(1, 3, 3, 64 * 1024, 41 + i);
    }
    eager_first();
    cancels();
    any_source_first();
    truncation();
    return check_finish("p2p_posted_first");
}
