/* ranks: 1 2 3 4 8 */
/* timeout: 120 */
/* Ordering and pressure: non-overtaking (many messages with one tag arrive
   in order; small and large interleaved; wildcard receives), a deadlock-free
   all-to-all Isend/Irecv exchange (small and large), and unexpected-message
   pressure (1000 small messages sent before the receiver posts). */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <time.h>

static int rank, size, partner;

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = (rank ^ 1) < size ? (rank ^ 1) : rank;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    /* 1. 300 messages, same tag, in order */
    {
        enum { N = 300 };
        int sv[N];
        MPI_Request sr[N];
        for (int i = 0; i < N; i++) {
            sv[i] = i;
            MPI_Isend(&sv[i], 1, MPI_INT, partner, 1, comm, &sr[i]);
        }
        int inorder = 1;
        for (int i = 0; i < N; i++) {
            int v = -1;
            MPI_Recv(&v, 1, MPI_INT, partner, 1, comm, MPI_STATUS_IGNORE);
            if (v != i && inorder) {
                CHECK(0, "message %d arrived as %d: overtaking", i, v);
                inorder = 0;
            }
        }
        MPI_Waitall(N, sr, MPI_STATUSES_IGNORE);
    }

    MPI_Barrier(comm); /* keep wildcard receives within one section */
    /* 2. small and large interleaved (eager vs rendezvous), same tag; the
       receiver uses a buffer big enough for either and checks the order by
       the sequence number in the first int and the size */
    {
        enum { N = 16, BIG = 300000 };
        int *bufs[N];
        MPI_Request sr[N];
        for (int i = 0; i < N; i++) {
            int n = (i % 2) ? BIG : 4;
            bufs[i] = malloc(sizeof(int) * (size_t)n);
            for (int k = 0; k < n; k++)
                bufs[i][k] = i * 1000000 + k;
            MPI_Isend(bufs[i], n, MPI_INT, partner, 2, comm, &sr[i]);
        }
        int *rb = malloc(sizeof(int) * BIG);
        for (int i = 0; i < N; i++) {
            MPI_Status st;
            int src = (i % 3 == 0) ? MPI_ANY_SOURCE : partner;
            int tag = (i % 4 == 1) ? MPI_ANY_TAG : 2;
            MPI_Recv(rb, BIG, MPI_INT, src, tag, comm, &st);
            int c = -1;
            MPI_Get_count(&st, MPI_INT, &c);
            int n = (i % 2) ? BIG : 4;
            CHECK(c == n && rb[0] == i * 1000000 && rb[n - 1] == i * 1000000 + n - 1,
                  "interleaved message %d: count %d first %d", i, c, rb[0]);
        }
        MPI_Waitall(N, sr, MPI_STATUSES_IGNORE);
        for (int i = 0; i < N; i++)
            free(bufs[i]);
        free(rb);
    }

    MPI_Barrier(comm); /* keep wildcard receives within one section */
    /* 3. all-to-all with Isend/Irecv, every rank to every rank (incl. self) */
    {
        size_t ns[3] = {8, 4096, 200000};
        for (int k = 0; k < 3; k++) {
            size_t n = ns[k];
            unsigned char *sb = malloc(n * (size_t)size), *rb = malloc(n * (size_t)size);
            MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * (size_t)size);
            for (int p = 0; p < size; p++) {
                check_fill(sb + n * (size_t)p, n, rank * 64 + p + k);
                MPI_Irecv(rb + n * (size_t)p, (int)n, MPI_BYTE, p, 30 + k, comm, &rq[p]);
            }
            for (int j = 0; j < size; j++) {
                int p = (rank + j) % size; /* stagger destinations */
                MPI_Isend(sb + n * (size_t)p, (int)n, MPI_BYTE, p, 30 + k, comm, &rq[size + p]);
            }
            CHECK_MPI(MPI_Waitall(2 * size, rq, MPI_STATUSES_IGNORE));
            for (int p = 0; p < size; p++)
                CHECK(check_verify(rb + n * (size_t)p, n, p * 64 + rank + k) < 0,
                      "all-to-all %zu bytes: bad data from %d", n, p);
            free(sb);
            free(rb);
            free(rq);
        }
    }

    MPI_Barrier(comm); /* keep wildcard receives within one section */
    /* 4. unexpected-message pressure: rank 1 (or 0 alone) sends 1000 small
       messages to rank 0 before rank 0 posts any receive */
    {
        enum { N = 1000 };
        int sender = size > 1 ? 1 : 0;
        MPI_Request *sr = NULL;
        int *sv = NULL;
        if (rank == sender) {
            sr = malloc(sizeof(MPI_Request) * N);
            sv = malloc(sizeof(int) * N);
            for (int i = 0; i < N; i++) {
                sv[i] = i * 3;
                MPI_Isend(&sv[i], 1, MPI_INT, 0, 40 + (i % 3), comm, &sr[i]);
            }
            static int done_msg = 1;
            MPI_Request dr;
            MPI_Isend(&done_msg, 1, MPI_INT, 0, 50, comm, &dr); /* "all sends are posted" */
            if (rank != 0)
                MPI_Wait(&dr, MPI_STATUS_IGNORE);
            else
                MPI_Request_free(&dr);
        }
        if (rank == 0) {
            int done = 0;
            MPI_Recv(&done, 1, MPI_INT, sender, 50, comm, MPI_STATUS_IGNORE);
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL); /* let the messages pile up */
            /* per tag order must be preserved; receive tag by tag interleaved */
            int next[3] = {0, 1, 2}, bad = 0;
            for (int i = 0; i < N; i++) {
                int v = -1;
                MPI_Status st;
                MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &st);
                int t = st.MPI_TAG - 40;
                /* with wildcards the next message is the oldest: number i */
                if ((v != i * 3 || t != i % 3) && !bad) {
                    CHECK(0, "unexpected queue: receive %d got value %d tag %d", i, v, st.MPI_TAG);
                    bad = 1;
                }
                if (t >= 0 && t < 3)
                    next[t] += 3;
            }
            CHECK(next[0] + next[1] + next[2] == 3 + 3 * N, "message count per tag");
        }
        if (rank == sender) {
            CHECK_MPI(MPI_Waitall(N, sr, MPI_STATUSES_IGNORE));
            free(sr);
            free(sv);
        }
    }
    MPI_Barrier(comm);
    {
        int flag = -1;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE);
        CHECK(flag == 0, "messages left over");
    }
    MPI_Comm_free(&comm);
    return check_finish("p2p_order");
}
