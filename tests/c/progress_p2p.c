/* ranks: 2 */
/* timeout: 120 */
/* env: BATON_PROGRESS=thread */
/* Asynchronous progress of a large message: rank 0 sends 16 MiB to rank 1
   with MPI_Isend/MPI_Irecv, and then both compute without any MPI call (not
   even MPI_Wtime) for longer than the transfer takes. Each message is tried
   with the receive posted first (rank 1 posts it, then releases rank 0 with a
   zero-byte message) and with the send posted first (the same, the other way
   round), in a few iterations with different byte patterns.

   - The receiver reads its buffer between slices of computation, from a
     background that differs from the pattern at every byte, and notes when the
     last byte has landed. It fails (naming how many bytes had arrived) if that
     has not happened after RECV_LIMIT seconds (times TIMEOUT_SCALE).
   - The sender computes for a safe multiple of the transfer time (measured
     first with a blocking Send/Recv pair, see progress_safe_time), then calls
     MPI_Test once: it must report completion at that first call. It takes a
     timestamp right after, and sends it to the receiver once both are done.
   - The receiver, after the data is complete and at least as long as the
     sender computes, calls MPI_Test once: completion at once as well. Then it
     checks that it saw the data complete before the sender's timestamp
     (CLOCK_MONOTONIC, see progress_util.h) and the whole buffer once more.

   The BATON_PROGRESS=thread header forces Baton's progress thread; MPICH needs
   MPIR_CVAR_ASYNC_PROGRESS=1 (and then runs MPI_THREAD_MULTIPLE). After an
   iteration with a failure the test stops, so that a run without progress
   fails within about two receive limits. */
#include "progress_util.h"

#define MSG_BYTES (16u << 20)
#define ITERATIONS 3
#define RECV_LIMIT 20.0
#define TAG_DATA 1
#define TAG_GO 2
#define TAG_STAMP 3
#define TAG_STATE 4

enum order { RECV_FIRST, SEND_FIRST };

static int rank;

static const char *order_name(int order)
{
    return order == RECV_FIRST ? "receive posted first" : "send posted first";
}

/* The byte that the receive buffer holds before the message lands: never
   the message's byte at the same place. */
static unsigned char background(int seed, size_t i)
{
    return (unsigned char)~check_pattern(seed, i);
}

/* Blocking transfers of the message size with both ranks inside MPI: the
   longest of a few, after a warm-up, as rank 0 sees it (the send and the
   receiver's zero-byte reply). Rank 0 tells rank 1 the result. */
static double measure_transfer(unsigned char *buf)
{
    double longest = 0.0;
    for (int rep = 0; rep < 4; rep++) {
        if (rank == 0) {
            double t0 = progress_now();
            CHECK_MPI(MPI_Send(buf, MSG_BYTES, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            double t = progress_now() - t0;
            if (rep > 0 && t > longest)
                longest = t;
        } else {
            CHECK_MPI(MPI_Recv(buf, MSG_BYTES, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD));
        }
    }
    CHECK_MPI(MPI_Bcast(&longest, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    return longest;
}

/* Rank 0's side of one message. */
static void sender(unsigned char *buf, int seed, int order, double compute)
{
    MPI_Request req = MPI_REQUEST_NULL;
    check_fill(buf, MSG_BYTES, seed);
    if (order == RECV_FIRST) {
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Isend(buf, MSG_BYTES, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &req));
    } else {
        CHECK_MPI(MPI_Isend(buf, MSG_BYTES, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &req));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD));
    }
    double start = progress_now();
    progress_compute_until(start, compute);
    int flag = 0;
    CHECK_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    double stamp[2] = {progress_now(), flag};
    CHECK(flag, "%s, pattern %d: MPI_Test of the 16 MiB send after %.3f s of computation "
                "without MPI calls: not complete",
          order_name(order), seed, stamp[0] - start);
    if (!flag)
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Send(stamp, 2, MPI_DOUBLE, 1, TAG_STAMP, MPI_COMM_WORLD));
}

/* How many bytes of buf hold the message's pattern. */
static size_t count_arrived(const volatile unsigned char *buf, int seed)
{
    size_t n = 0;
    for (size_t i = 0; i < MSG_BYTES; i++)
        n += buf[i] == check_pattern(seed, i);
    return n;
}

/* Rank 1's side of one message. */
static void receiver(unsigned char *buf, int seed, int order, double compute)
{
    MPI_Request req = MPI_REQUEST_NULL;
    for (size_t i = 0; i < MSG_BYTES; i++)
        buf[i] = background(seed, i);
    if (order == RECV_FIRST) {
        CHECK_MPI(MPI_Irecv(buf, MSG_BYTES, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &req));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD));
    } else {
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Irecv(buf, MSG_BYTES, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &req));
    }
    /* The library writes the buffer behind the program's back: every read
       goes to memory. `landed` counts the leading bytes seen in place; data
       may land in any order, so the scan waits at the first byte missing. */
    const volatile unsigned char *seen = buf;
    const double limit = RECV_LIMIT * progress_scale();
    double start = progress_now(), now = start, complete_at = -1.0;
    size_t landed = 0;
    uint64_t x = (uint64_t)seed | 1u;
    for (;;) {
        x = progress_slice(x);
        while (landed < MSG_BYTES && seen[landed] == check_pattern(seed, landed))
            landed++;
        now = progress_now();
        if (landed == MSG_BYTES && complete_at < 0)
            complete_at = now;
        /* Once complete, go on computing as long as the sender does (and a
           little after a late arrival), so that the library has time to
           finish the request's bookkeeping before the one MPI_Test. */
        if (complete_at >= 0 && now - start >= compute && now - complete_at >= compute / 4)
            break;
        if (complete_at < 0 && now - start > limit)
            break;
    }
    progress_sink = x;
    int flag = 0;
    if (complete_at < 0) {
        size_t arrived = count_arrived(seen, seed);
        CHECK(0, "%s, pattern %d: after %.1f s of computation without MPI calls %zu of %u "
                 "bytes had arrived (%zu in order from the start)",
              order_name(order), seed, now - start, arrived, MSG_BYTES, landed);
    } else {
        CHECK_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
        CHECK(flag, "%s, pattern %d: the data was all there %.3f s into the computation, "
                    "but the first MPI_Test (at %.3f s) found the receive not complete",
              order_name(order), seed, complete_at - start, progress_now() - start);
    }
    if (!flag)
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    long bad = check_verify(buf, MSG_BYTES, seed);
    CHECK(bad < 0, "%s, pattern %d: received data differs at byte %ld", order_name(order), seed,
          bad);

    double stamp[2] = {0, 0};
    CHECK_MPI(MPI_Recv(stamp, 2, MPI_DOUBLE, 0, TAG_STAMP, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    if (complete_at >= 0 && stamp[1] != 0) {
        CHECK(complete_at <= stamp[0],
              "%s, pattern %d: the data was complete %.3f s after the sender's MPI_Test "
              "reported the send complete (the receiver read it %.3f s into its computation)",
              order_name(order), seed, complete_at - stamp[0], complete_at - start);
    }
    if (complete_at >= 0)
        printf("progress_p2p: %s, pattern %d: all 16 MiB landed %.3f s into the computation "
               "(sender's MPI_Test %.3f s later)\n",
               order_name(order), seed, complete_at - start, stamp[0] - complete_at);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    int size = 0;
    progress_init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0)
            printf("SKIP progress_p2p: needs 2 ranks\n");
        MPI_Finalize();
        return 0;
    }
    unsigned char *buf = malloc(MSG_BYTES);
    if (!buf) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    check_fill(buf, MSG_BYTES, 0);
    double transfer = measure_transfer(buf);
    double compute = progress_safe_time(transfer);
    if (rank == 0)
        printf("progress_p2p: blocking transfer of 16 MiB %.4f s, computing %.3f s\n", transfer,
               compute);

    for (int it = 0; it < ITERATIONS; it++) {
        for (int order = RECV_FIRST; order <= SEND_FIRST; order++) {
            int seed = 1 + it * 2 + order;
            if (rank == 0)
                sender(buf, seed, order, compute);
            else
                receiver(buf, seed, order, compute);
        }
        /* Stop after an iteration that failed anywhere: without progress each
           message costs the receive limit. */
        int mine = check_failures, other = 0;
        CHECK_MPI(MPI_Sendrecv(&mine, 1, MPI_INT, 1 - rank, TAG_STATE, &other, 1, MPI_INT,
                               1 - rank, TAG_STATE, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        if (mine + other > 0)
            break;
    }
    free(buf);
    return check_finish("progress_p2p");
}
