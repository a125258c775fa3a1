/* ranks: 2 3 4 */
/* timeout: 120 */
/* Bursts of nonblocking sends, the pattern a transport may coalesce (Baton's
   TCP queues the small frames of a burst and sends them together):
   1. mixed sizes (empty to rendezvous), same tag, arrive in order and whole;
      the sender reuses its buffers as soon as its requests complete, before
      the receiver has posted anything, so queued data must have been copied;
   2. a sender that only polls with MPI_Test still gets its burst delivered;
   3. a sender that computes without MPI calls after its burst: the burst
      arrives once it calls MPI again;
   4. a burst mixed with blocking, synchronous and ready sends keeps order;
   5. bursts to several peers, alternating, received with MPI_ANY_SOURCE. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <time.h>

static int rank, size;

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Busy for about `ms` milliseconds without calling MPI. */
static void compute_ms(int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile double x = 1.0;
    do {
        for (int i = 0; i < 1000; i++)
            x = x * 1.0000001 + 1e-9;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* Receives n ints with `tag` from `peer`, which sent step*i as the i-th; returns how many
   came right and in order. */
static int recv_in_order(MPI_Comm comm, int peer, int tag, int step, int n)
{
    int got = 0;
    for (int i = 0; i < n; i++) {
        int x = -1;
        MPI_Recv(&x, 1, MPI_INT, peer, tag, comm, MPI_STATUS_IGNORE);
        got += x == step * i;
    }
    return got;
}

static const size_t sizes[] = {0, 1, 100, 1024, 4096, 16384, 16385, 65536, 200000, 8, 8, 8};
enum { NSIZES = sizeof sizes / sizeof sizes[0], ROUNDS = 3 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int pair = rank < 2; /* ranks 0 and 1 run sections 1-4 */
    int peer = 1 - rank;

    /* 1. mixed sizes, buffers reused once complete */
    if (pair) {
        unsigned char *buf[NSIZES];
        for (int i = 0; i < NSIZES; i++)
            buf[i] = malloc(sizes[i] + 1);
        for (int r = 0; r < ROUNDS; r++) {
            if (rank == 0) {
                MPI_Request rq[NSIZES];
                for (int i = 0; i < NSIZES; i++) {
                    check_fill(buf[i], sizes[i], 100 * r + i);
                    CHECK_MPI(MPI_Isend(buf[i], (int)sizes[i], MPI_BYTE, peer, 1, comm, &rq[i]));
                }
                /* Rendezvous sends complete only once the receiver takes them,
                   so complete the eager ones first, then overwrite them. */
                int done[NSIZES] = {0}, left = NSIZES;
                while (left > 0) {
                    for (int i = 0; i < NSIZES; i++) {
                        int flag = 0;
                        if (done[i])
                            continue;
                        CHECK_MPI(MPI_Test(&rq[i], &flag, MPI_STATUS_IGNORE));
                        if (flag) {
                            memset(buf[i], 0xEE, sizes[i] + 1);
                            done[i] = 1;
                            left--;
                        }
                    }
                }
            } else {
                pause_ms(30); /* the sender has overwritten its eager buffers by now */
                for (int i = 0; i < NSIZES; i++) {
                    MPI_Status st;
                    memset(buf[i], 0, sizes[i] + 1);
                    CHECK_MPI(MPI_Recv(buf[i], (int)sizes[i] + 1, MPI_BYTE, peer, 1, comm, &st));
                    int n = -1;
                    MPI_Get_count(&st, MPI_BYTE, &n);
                    CHECK(n == (int)sizes[i], "round %d message %d: %d bytes, expected %zu", r, i, n, sizes[i]);
                    long bad = check_verify(buf[i], sizes[i], 100 * r + i);
                    CHECK(bad < 0, "round %d message %d (%zu bytes): wrong byte at %ld", r, i, sizes[i], bad);
                }
            }
        }
        for (int i = 0; i < NSIZES; i++)
            free(buf[i]);
    }
    MPI_Barrier(comm);

    /* 2. a sender that only polls with MPI_Test */
    if (pair) {
        enum { N = 64 };
        int v[N], ack = -1;
        if (rank == 0) {
            MPI_Request rq[N], ar;
            for (int i = 0; i < N; i++) {
                v[i] = 7 * i;
                MPI_Isend(&v[i], 1, MPI_INT, peer, 2, comm, &rq[i]);
            }
            MPI_Irecv(&ack, 1, MPI_INT, peer, 3, comm, &ar);
            int flag = 0;
            double t0 = MPI_Wtime();
            while (!flag && MPI_Wtime() - t0 < 60)
                MPI_Test(&ar, &flag, MPI_STATUS_IGNORE);
            CHECK(flag && ack == N, "the receiver's acknowledgement: flag %d value %d", flag, ack);
            if (!flag)
                MPI_Abort(MPI_COMM_WORLD, 1);
            CHECK_MPI(MPI_Waitall(N, rq, MPI_STATUSES_IGNORE));
        } else {
            int got = recv_in_order(comm, peer, 2, 7, N);
            CHECK(got == N, "%d of %d messages right and in order", got, N);
            MPI_Send(&got, 1, MPI_INT, peer, 3, comm);
        }
    }
    MPI_Barrier(comm);

    /* 3. compute without MPI calls after a burst */
    if (pair) {
        enum { N = 32 };
        int v[N];
        if (rank == 0) {
            MPI_Request rq[N];
            for (int i = 0; i < N; i++) {
                v[i] = 11 * i;
                MPI_Isend(&v[i], 1, MPI_INT, peer, 4, comm, &rq[i]);
            }
            compute_ms(50);
            CHECK_MPI(MPI_Waitall(N, rq, MPI_STATUSES_IGNORE));
        } else {
            int got = recv_in_order(comm, peer, 4, 11, N);
            CHECK(got == N, "after computing: %d of %d messages right and in order", got, N);
        }
    }
    MPI_Barrier(comm);

    /* 4. nonblocking, blocking, synchronous and ready sends mixed, one tag */
    if (pair) {
        enum { N = 40 };
        int v[N];
        if (rank == 0) {
            MPI_Request rq[N];
            int nrq = 0;
            int go = 0;
            MPI_Recv(&go, 1, MPI_INT, peer, 6, comm, MPI_STATUS_IGNORE); /* receives posted */
            for (int i = 0; i < N; i++) {
                v[i] = 13 * i;
                switch (i % 5) {
                case 0: CHECK_MPI(MPI_Send(&v[i], 1, MPI_INT, peer, 5, comm)); break;
                case 1: CHECK_MPI(MPI_Issend(&v[i], 1, MPI_INT, peer, 5, comm, &rq[nrq++])); break;
                case 2: CHECK_MPI(MPI_Irsend(&v[i], 1, MPI_INT, peer, 5, comm, &rq[nrq++])); break;
                default: CHECK_MPI(MPI_Isend(&v[i], 1, MPI_INT, peer, 5, comm, &rq[nrq++])); break;
                }
            }
            CHECK_MPI(MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE));
        } else {
            int x[N];
            MPI_Request rq[N];
            for (int i = 0; i < N; i++)
                MPI_Irecv(&x[i], 1, MPI_INT, peer, 5, comm, &rq[i]);
            int go = 1;
            MPI_Send(&go, 1, MPI_INT, peer, 6, comm);
            CHECK_MPI(MPI_Waitall(N, rq, MPI_STATUSES_IGNORE));
            int got = 0;
            for (int i = 0; i < N; i++)
                got += x[i] == 13 * i;
            CHECK(got == N, "mixed modes: %d of %d messages right and in order", got, N);
        }
    }
    MPI_Barrier(comm);

    /* 5. every rank sends bursts to every other one, alternating destinations,
       and receives from any source */
    {
        enum { N = 50 };
        int *v = malloc(sizeof(int) * N * (size_t)size);
        MPI_Request *rq = malloc(sizeof(MPI_Request) * N * (size_t)size);
        int nrq = 0;
        for (int i = 0; i < N; i++)
            for (int p = 0; p < size; p++) {
                if (p == rank)
                    continue;
                v[i * size + p] = rank * 100000 + i;
                MPI_Isend(&v[i * size + p], 1, MPI_INT, p, 7, comm, &rq[nrq++]);
            }
        int *next = calloc((size_t)size, sizeof(int));
        int bad = 0;
        for (int k = 0; k < N * (size - 1); k++) {
            int x = -1;
            MPI_Status st;
            MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 7, comm, &st);
            int s = st.MPI_SOURCE;
            if (x != s * 100000 + next[s] && !bad) {
                CHECK(0, "from %d: got %d, expected %d", s, x, s * 100000 + next[s]);
                bad = 1;
            }
            next[s]++;
        }
        CHECK_MPI(MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE));
        free(v);
        free(rq);
        free(next);
    }

    MPI_Comm_free(&comm);
    return check_finish("p2p_bursts");
}
