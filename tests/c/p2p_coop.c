/* ranks: 2 3 4 8 */
/* timeout: 120 */
/* Large messages whose copy the sender shares with the receiver (BATON_COOP_MIN,
   256 KiB by default; other MPIs simply copy them their own way): windows of
   several large messages from one sender (each copy waits for the previous
   one), odd sizes, truncation, a sender that computes instead of waiting, both
   directions at once, several senders to one receiver, synchronous sends, and
   a large message to oneself. Ranks are paired (r, r^1); an odd last rank
   only takes part in the many-to-one part. */
#include "check.h"

static int rank, size, partner;

static unsigned char *filled(size_t n, int seed)
{
    unsigned char *b = malloc(n ? n : 1);
    check_fill(b, n, seed);
    return b;
}

/* n bytes plus 64 guard bytes of 0xEE */
static unsigned char *guarded(size_t n)
{
    unsigned char *b = malloc(n + 64);
    memset(b, 0xEE, n + 64);
    return b;
}

static void verify(const unsigned char *b, size_t n, int seed, const char *what)
{
    long bad = check_verify(b, n, seed);
    CHECK(bad < 0, "%s: %zu bytes, mismatch at byte %ld", what, n, bad);
    int guard_ok = 1;
    for (size_t i = n; i < n + 64; i++)
        guard_ok &= b[i] == 0xEE;
    CHECK(guard_ok, "%s: %zu bytes, written past the end", what, n);
}

/* a window of large messages, one direction, then the other */
static void windows(void)
{
    static const size_t sizes[] = {300001, 1 << 20, (2 << 20) + 5, 262144, 3 << 20};
    enum { W = sizeof sizes / sizeof sizes[0] };
    for (int dir = 0; dir < 2; dir++) {
        int sender = (dir == 0) == (rank < partner);
        MPI_Request q[W];
        unsigned char *b[W];
        for (int i = 0; i < W; i++) {
            if (sender) {
                b[i] = filled(sizes[i], rank * 100 + i);
                CHECK_MPI(MPI_Isend(b[i], (int)sizes[i], MPI_BYTE, partner, i, MPI_COMM_WORLD, &q[i]));
            } else {
                b[i] = guarded(sizes[i]);
                CHECK_MPI(MPI_Irecv(b[i], (int)sizes[i], MPI_BYTE, partner, i, MPI_COMM_WORLD, &q[i]));
            }
        }
        MPI_Status st[W];
        CHECK_MPI(MPI_Waitall(W, q, st));
        for (int i = 0; i < W; i++) {
            if (!sender) {
                verify(b[i], sizes[i], partner * 100 + i, "window");
                int cnt = -1;
                MPI_Get_count(&st[i], MPI_BYTE, &cnt);
                CHECK(cnt == (int)sizes[i] && st[i].MPI_SOURCE == partner && st[i].MPI_TAG == i,
                      "window message %d: count %d source %d tag %d", i, cnt, st[i].MPI_SOURCE,
                      st[i].MPI_TAG);
            }
            free(b[i]);
        }
    }
}

/* 1 MiB into a 600 000-byte receive: MPI_ERR_TRUNCATE, the prefix delivered */
static void truncation(void)
{
    size_t n = 1 << 20, cap = 600000;
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    if (rank < partner) {
        unsigned char *b = filled(n, 7);
        CHECK_MPI(MPI_Send(b, (int)n, MPI_BYTE, partner, 1, c));
        free(b);
    } else {
        unsigned char *b = guarded(cap);
        MPI_Status st;
        CHECK_ERR_CLASS(MPI_Recv(b, (int)cap, MPI_BYTE, partner, 1, c, &st), MPI_ERR_TRUNCATE);
        verify(b, cap, 7, "truncated");
        free(b);
    }
    MPI_Comm_free(&c);
}

/* the sender computes for 30 ms after Isend: the receiver copies without its help */
static void busy_sender(void)
{
    size_t n = 4 << 20;
    if (rank < partner) {
        unsigned char *b = filled(n, 11);
        MPI_Request r;
        CHECK_MPI(MPI_Isend(b, (int)n, MPI_BYTE, partner, 2, MPI_COMM_WORLD, &r));
        double t0 = MPI_Wtime();
        volatile double x = 0;
        while (MPI_Wtime() - t0 < 0.03)
            x += 1.0;
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        free(b);
    } else {
        unsigned char *b = guarded(n);
        CHECK_MPI(MPI_Recv(b, (int)n, MPI_BYTE, partner, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        verify(b, n, 11, "busy sender");
        free(b);
    }
}

/* both directions at once, twice: Sendrecv and Isend/Irecv pairs */
static void both_ways(void)
{
    size_t n = (3 << 20) + 1;
    unsigned char *s = filled(n, rank + 20), *r = guarded(n);
    MPI_Status st;
    CHECK_MPI(MPI_Sendrecv(s, (int)n, MPI_BYTE, partner, 3, r, (int)n, MPI_BYTE, partner, 3,
                           MPI_COMM_WORLD, &st));
    verify(r, n, partner + 20, "sendrecv");
    memset(r, 0xEE, n + 64);
    MPI_Request q[2];
    CHECK_MPI(MPI_Irecv(r, (int)n, MPI_BYTE, partner, 4, MPI_COMM_WORLD, &q[0]));
    CHECK_MPI(MPI_Isend(s, (int)n, MPI_BYTE, partner, 4, MPI_COMM_WORLD, &q[1]));
    CHECK_MPI(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
    verify(r, n, partner + 20, "isend/irecv both ways");
    free(s);
    free(r);
}

/* synchronous sends of large messages */
static void synchronous(void)
{
    size_t n = 700000;
    if (rank < partner) {
        unsigned char *b = filled(n, 31);
        CHECK_MPI(MPI_Ssend(b, (int)n, MPI_BYTE, partner, 5, MPI_COMM_WORLD));
        MPI_Request r;
        CHECK_MPI(MPI_Issend(b, (int)n, MPI_BYTE, partner, 6, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        free(b);
    } else {
        unsigned char *b = guarded(n);
        CHECK_MPI(MPI_Recv(b, (int)n, MPI_BYTE, partner, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        verify(b, n, 31, "ssend");
        memset(b, 0xEE, n + 64);
        CHECK_MPI(MPI_Recv(b, (int)n, MPI_BYTE, partner, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        verify(b, n, 31, "issend");
        free(b);
    }
}

/* everyone else sends 1 MiB to rank 0 at once; rank 0 receives with ANY_SOURCE */
static void many_to_one(void)
{
    size_t n = 1 << 20;
    if (rank == 0) {
        unsigned char *b = guarded(n);
        int seen[64] = {0};
        for (int i = 1; i < size; i++) {
            MPI_Status st;
            memset(b, 0xEE, n + 64);
            CHECK_MPI(MPI_Recv(b, (int)n, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st));
            int src = st.MPI_SOURCE;
            CHECK(src > 0 && src < size && src < 64 && !seen[src], "many to one: source %d", src);
            if (src > 0 && src < 64)
                seen[src] = 1;
            verify(b, n, 40 + src, "many to one");
        }
        free(b);
    } else {
        unsigned char *b = filled(n, 40 + rank);
        CHECK_MPI(MPI_Send(b, (int)n, MPI_BYTE, 0, 7, MPI_COMM_WORLD));
        free(b);
    }
}

/* to oneself: no other process to share the copy with */
static void to_self(void)
{
    size_t n = 1 << 20;
    unsigned char *s = filled(n, 50), *r = guarded(n);
    MPI_Request q;
    CHECK_MPI(MPI_Isend(s, (int)n, MPI_BYTE, rank, 8, MPI_COMM_WORLD, &q));
    CHECK_MPI(MPI_Recv(r, (int)n, MPI_BYTE, rank, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
    verify(r, n, 50, "to self");
    free(s);
    free(r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = (rank ^ 1) < size ? (rank ^ 1) : rank;
    if (partner != rank) {
        windows();
        truncation();
        busy_sender();
        both_ways();
        synchronous();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    many_to_one();
    to_self();
    return check_finish("p2p_coop");
}
