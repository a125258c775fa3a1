/* ranks: 2 4 */
/* threads */
/* timeout: 120 */
/* MPI_THREAD_MULTIPLE: several pthreads per rank each ping-pong with the
   same-numbered thread of the partner rank (even threads: shared
   communicator, tag = thread number; odd threads: their own dup'ed
   communicator), while a probe thread receives with Iprobe(ANY_SOURCE,
   ANY_TAG) + Recv the messages the main thread of every other rank sends on
   a side communicator; then the odd threads run collectives on their own
   communicators concurrently. All data, sources, tags and per-source order are
   checked. Prints SKIP when MPI_THREAD_MULTIPLE is not provided. */
#include "check.h"
#include <pthread.h>
#include <stdint.h>

enum { NT = 4, ITERS = 40, SIDE_MSGS = 25, BIG = 16384 };

static int rank, size, partner;
static MPI_Comm shared, own[NT], side;
static int thread_fail[NT + 1];

static void *pingpong(void *arg)
{
    int t = (int)(intptr_t)arg;
    MPI_Comm c = (t % 2) ? own[t] : shared;
    int tag = (t % 2) ? 0 : t;
    int *buf = malloc(sizeof(int) * BIG);
    for (int it = 0; it < ITERS; it++) {
        int n = (it % 10 == 9) ? BIG : 2 + it % 5;
        if (rank < partner) {
            for (int i = 0; i < n; i++)
                buf[i] = t * 1000000 + it * 1000 + i;
            MPI_Send(buf, n, MPI_INT, partner, tag, c);
            MPI_Status st;
            MPI_Recv(buf, BIG, MPI_INT, partner, tag, c, &st);
            int cnt = -1;
            MPI_Get_count(&st, MPI_INT, &cnt);
            if (cnt != n || st.MPI_SOURCE != partner || st.MPI_TAG != tag)
                thread_fail[t]++;
            for (int i = 0; i < n && i < cnt; i++)
                if (buf[i] != t * 1000000 + it * 1000 + i + 1)
                    thread_fail[t]++;
        } else {
            MPI_Status st;
            MPI_Recv(buf, BIG, MPI_INT, partner, tag, c, &st);
            int cnt = -1;
            MPI_Get_count(&st, MPI_INT, &cnt);
            if (cnt != n)
                thread_fail[t]++;
            for (int i = 0; i < n && i < cnt; i++) {
                if (buf[i] != t * 1000000 + it * 1000 + i)
                    thread_fail[t]++;
                buf[i] += 1;
            }
            MPI_Send(buf, cnt, MPI_INT, partner, tag, c);
        }
    }
    if (t % 2) {
        /* collectives on each thread's own communicator, concurrently: their first blocking
           one is where an MPI may set up per-communicator resources */
        for (int k = 0; k < 3; k++) {
            int v = rank + t + k, s = -1;
            MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, c);
            if (s != size * (size - 1) / 2 + size * (t + k))
                thread_fail[t]++;
            MPI_Barrier(c);
        }
    }
    free(buf);
    return NULL;
}

static void *prober(void *arg)
{
    (void)arg;
    int expected = (size - 1) * SIDE_MSGS, got = 0;
    int *next = calloc((size_t)size, sizeof(int));
    double t0 = MPI_Wtime();
    while (got < expected && MPI_Wtime() - t0 < 60) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, side, &flag, &st);
        if (!flag)
            continue;
        int v = -1, src = st.MPI_SOURCE;
        /* only this thread receives on `side`, so the probed message is the one received */
        MPI_Recv(&v, 1, MPI_INT, src, st.MPI_TAG, side, MPI_STATUS_IGNORE);
        if (src < 0 || src >= size || src == rank || st.MPI_TAG != next[src] ||
            v != src * 1000 + next[src])
            thread_fail[NT]++;
        else
            next[src]++;
        got++;
    }
    if (got != expected)
        thread_fail[NT] += 1000;
    free(next);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("SKIP threads: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
        MPI_Finalize();
        return 0;
    }
    partner = (rank ^ 1) < size ? (rank ^ 1) : rank;
    MPI_Comm_dup(MPI_COMM_WORLD, &shared);
    MPI_Comm_dup(MPI_COMM_WORLD, &side);
    for (int t = 0; t < NT; t++)
        MPI_Comm_dup(MPI_COMM_WORLD, &own[t]);

    pthread_t th[NT + 1];
    int nth = 0;
    if (partner != rank)
        for (int t = 0; t < NT; t++)
            pthread_create(&th[nth++], NULL, pingpong, (void *)(intptr_t)t);
    pthread_create(&th[nth++], NULL, prober, NULL);

    /* main thread: SIDE_MSGS messages to every other rank, tag = sequence */
    {
        int n = (size - 1) * SIDE_MSGS, k = 0;
        MPI_Request *rq = malloc(sizeof(MPI_Request) * (size_t)(n > 0 ? n : 1));
        int *vals = malloc(sizeof(int) * SIDE_MSGS);
        for (int i = 0; i < SIDE_MSGS; i++)
            vals[i] = rank * 1000 + i;
        for (int i = 0; i < SIDE_MSGS; i++)
            for (int p = 0; p < size; p++)
                if (p != rank)
                    MPI_Isend(&vals[i], 1, MPI_INT, p, i, side, &rq[k++]);
        MPI_Waitall(k, rq, MPI_STATUSES_IGNORE);
        free(rq);
        free(vals);
    }
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    for (int t = 0; t < NT; t++)
        CHECK(thread_fail[t] == 0, "ping-pong thread %d: %d bad checks", t, thread_fail[t]);
    CHECK(thread_fail[NT] == 0, "probe thread: %d bad checks", thread_fail[NT]);

    int flag = -1;
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, side, &flag, MPI_STATUS_IGNORE);
    CHECK(flag == 0, "side messages left over");
    for (int t = 0; t < NT; t++)
        MPI_Comm_free(&own[t]);
    MPI_Comm_free(&shared);
    MPI_Comm_free(&side);
    return check_finish("threads");
}
