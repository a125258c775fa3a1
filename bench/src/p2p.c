/* Point-to-point benchmarks: ping-pong latency, unidirectional and
 * bidirectional windowed bandwidth, multi-pair bandwidth / message rate,
 * token ring. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

#define TAG 17
#define WINDOW_BYTES (64u << 20) /* cap on the bytes of one window */

typedef struct {
    MPI_Comm comm;   /* communicator of the measuring ranks */
    int peer;        /* rank of the partner in comm */
    int sender;      /* 1: this rank sends the data (uni-directional) */
    int id;          /* id of this rank used in patterns */
    int peer_id;
    size_t size;
    int win;
    unsigned char **sb, **rb;
    MPI_Request *req;
} pair_t;

static int window_for(size_t size)
{
    int w = g_opt.window;
    if (size > 0 && (size_t)w * size > WINDOW_BYTES) {
        w = (int)(WINDOW_BYTES / size);
        if (w < 4)
            w = 4;
    }
    return w;
}

static void pair_alloc(pair_t *p, size_t size, int win)
{
    p->size = size;
    p->win = win;
    p->sb = malloc(sizeof(void *) * (size_t)win);
    p->rb = malloc(sizeof(void *) * (size_t)win);
    p->req = malloc(sizeof(MPI_Request) * 2 * (size_t)win);
    for (int i = 0; i < win; i++) {
        p->sb[i] = xmalloc(size);
        p->rb[i] = xmalloc(size);
    }
}

static void pair_free(pair_t *p)
{
    for (int i = 0; i < p->win; i++) {
        free(p->sb[i]);
        free(p->rb[i]);
    }
    free(p->sb);
    free(p->rb);
    free(p->req);
}

static inline void put(void *b, size_t n, uint64_t s, int full)
{
    if (full)
        fill(b, n, s);
    else
        stamp(b, n, s);
}

static inline void get(const void *b, size_t n, uint64_t s, int full, const char *w)
{
    if (full)
        check(b, n, s, w);
    else
        check_stamp(b, n, s, w);
}

static double k_pingpong(void *c, long first, int n, int full)
{
    pair_t *p = c;
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        if (p->sender) {
            put(p->sb[0], p->size, seed_of(it, p->id, 0), full);
            MPI_Send(p->sb[0], (int)p->size, MPI_BYTE, p->peer, TAG, p->comm);
            MPI_Recv(p->rb[0], (int)p->size, MPI_BYTE, p->peer, TAG, p->comm, MPI_STATUS_IGNORE);
            get(p->rb[0], p->size, seed_of(it, p->peer_id, 0), full, "pingpong reply");
        } else {
            MPI_Recv(p->rb[0], (int)p->size, MPI_BYTE, p->peer, TAG, p->comm, MPI_STATUS_IGNORE);
            get(p->rb[0], p->size, seed_of(it, p->peer_id, 0), full, "pingpong");
            put(p->sb[0], p->size, seed_of(it, p->id, 0), full);
            MPI_Send(p->sb[0], (int)p->size, MPI_BYTE, p->peer, TAG, p->comm);
        }
    }
    return MPI_Wtime() - t0;
}

static double k_bw(void *c, long first, int n, int full)
{
    pair_t *p = c;
    int ack = 0;
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        if (p->sender) {
            for (int j = 0; j < p->win; j++) {
                put(p->sb[j], p->size, seed_of(it, p->id, j), full);
                MPI_Isend(p->sb[j], (int)p->size, MPI_BYTE, p->peer, TAG, p->comm, &p->req[j]);
            }
            waitall(p->win, p->req);
            MPI_Recv(&ack, 1, MPI_INT, p->peer, TAG + 1, p->comm, MPI_STATUS_IGNORE);
            if (ack != (int)(it & 0x7fffffff))
                fail("bw: wrong acknowledgement %d for iteration %ld", ack, it);
        } else {
            for (int j = 0; j < p->win; j++)
                MPI_Irecv(p->rb[j], (int)p->size, MPI_BYTE, p->peer, TAG, p->comm, &p->req[j]);
            waitall(p->win, p->req);
            for (int j = 0; j < p->win; j++)
                get(p->rb[j], p->size, seed_of(it, p->peer_id, j), full, "bw window");
            ack = (int)(it & 0x7fffffff);
            MPI_Send(&ack, 1, MPI_INT, p->peer, TAG + 1, p->comm);
        }
    }
    return MPI_Wtime() - t0;
}

static double k_bibw(void *c, long first, int n, int full)
{
    pair_t *p = c;
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        for (int j = 0; j < p->win; j++)
            MPI_Irecv(p->rb[j], (int)p->size, MPI_BYTE, p->peer, TAG, p->comm, &p->req[j]);
        for (int j = 0; j < p->win; j++) {
            put(p->sb[j], p->size, seed_of(it, p->id, j), full);
            MPI_Isend(p->sb[j], (int)p->size, MPI_BYTE, p->peer, TAG, p->comm, &p->req[p->win + j]);
        }
        waitall(2 * p->win, p->req);
        for (int j = 0; j < p->win; j++)
            get(p->rb[j], p->size, seed_of(it, p->peer_id, j), full, "bibw window");
    }
    return MPI_Wtime() - t0;
}

/* Ranks 0 and 1 measure; the others wait in a final barrier. */
static int two_rank_bench(const char *name, kernel_fn fn, int windowed, int bidir)
{
    if (g_size < 2) {
        if (g_rank == 0)
            emit_error(name, "needs at least 2 ranks");
        return 1;
    }
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < 2 ? 0 : MPI_UNDEFINED, g_rank, &comm);
    if (comm != MPI_COMM_NULL) {
        size_t sizes[MAX_SIZES];
        int ns;
        opts_sizes(0, 4u << 20, sizes, &ns);
        for (int i = 0; i < ns; i++) {
            pair_t p = {.comm = comm, .peer = 1 - g_rank, .sender = g_rank == 0,
                        .id = g_rank, .peer_id = 1 - g_rank};
            int win = windowed ? window_for(sizes[i]) : 1;
            pair_alloc(&p, sizes[i], win);
            stat_t s = measure(comm, fn, &p);
            pair_free(&p);
            if (g_rank != 0)
                continue;
            char extra[96] = "";
            if (windowed) {
                s.min_us /= win;
                s.median_us /= win;
                s.mean_us /= win;
                snprintf(extra, sizeof extra, ",\"window\":%d", win);
            } else {
                /* one-way latency: half the round trip */
                s.min_us /= 2;
                s.median_us /= 2;
                s.mean_us /= 2;
            }
            double mbps = s.median_us > 0 ? (bidir ? 2.0 : 1.0) * (double)sizes[i] / s.median_us : 0;
            emit(name, sizes[i], g_size, &s, mbps, extra);
        }
        MPI_Comm_free(&comm);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}

int bench_pingpong(void) { return two_rank_bench("pingpong", k_pingpong, 0, 0); }
int bench_bw(void) { return two_rank_bench("bw", k_bw, 1, 0); }
int bench_bibw(void) { return two_rank_bench("bibw", k_bibw, 1, 1); }

/* Multi-pair: rank i < P sends to rank i + P (P = size / 2 pairs). */
int bench_mbw_mr(void)
{
    int pairs = g_size / 2;
    if (pairs < 1) {
        if (g_rank == 0)
            emit_error("mbw_mr", "needs at least 2 ranks");
        return 1;
    }
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < 2 * pairs ? 0 : MPI_UNDEFINED, g_rank, &comm);
    if (comm != MPI_COMM_NULL) {
        size_t sizes[MAX_SIZES];
        int ns;
        opts_sizes(0, 4u << 20, sizes, &ns);
        for (int i = 0; i < ns; i++) {
            int sender = g_rank < pairs;
            int peer = sender ? g_rank + pairs : g_rank - pairs;
            pair_t p = {.comm = comm, .peer = peer, .sender = sender, .id = g_rank, .peer_id = peer};
            int win = window_for(sizes[i]);
            if (sizes[i] > 0 && (size_t)win * sizes[i] * (size_t)pairs > 4 * (size_t)WINDOW_BYTES)
                win = 4;
            pair_alloc(&p, sizes[i], win);
            stat_t s = measure(comm, k_bw, &p);
            pair_free(&p);
            if (g_rank != 0)
                continue;
            double t_win = s.median_us; /* one window, all pairs together */
            s.min_us /= win;
            s.median_us /= win;
            s.mean_us /= win;
            double mbps = t_win > 0 ? (double)pairs * win * (double)sizes[i] / t_win : 0;
            double rate = t_win > 0 ? (double)pairs * win / (t_win * 1e-6) : 0;
            char extra[128];
            snprintf(extra, sizeof extra, ",\"window\":%d,\"pairs\":%d,\"msg_rate\":%.1f", win, pairs, rate);
            emit("mbw_mr", sizes[i], g_size, &s, mbps, extra);
        }
        MPI_Comm_free(&comm);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}

typedef struct {
    size_t size;
    unsigned char *buf;
} token_t;

static double k_token(void *c, long first, int n, int full)
{
    token_t *t = c;
    int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        uint64_t s = seed_of(it, 0, 0);
        if (g_rank == 0) {
            put(t->buf, t->size, s, full);
            MPI_Send(t->buf, (int)t->size, MPI_BYTE, next, TAG, MPI_COMM_WORLD);
            MPI_Recv(t->buf, (int)t->size, MPI_BYTE, prev, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            get(t->buf, t->size, s, full, "token ring (back at root)");
        } else {
            MPI_Recv(t->buf, (int)t->size, MPI_BYTE, prev, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            get(t->buf, t->size, s, full, "token ring");
            MPI_Send(t->buf, (int)t->size, MPI_BYTE, next, TAG, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

int bench_token(void)
{
    if (g_size < 2) {
        if (g_rank == 0)
            emit_error("token", "needs at least 2 ranks");
        return 1;
    }
    size_t sizes[MAX_SIZES];
    int ns;
    if (g_opt.nsizes)
        opts_sizes(0, 1u << 20, sizes, &ns);
    else {
        sizes[0] = 8;
        ns = 1;
    }
    for (int i = 0; i < ns; i++) {
        token_t t = {.size = sizes[i], .buf = xmalloc(sizes[i])};
        stat_t s = measure(MPI_COMM_WORLD, k_token, &t);
        free(t.buf);
        if (g_rank == 0) {
            char extra[64];
            snprintf(extra, sizeof extra, ",\"round_us\":%.4f", s.median_us);
            s.min_us /= g_size;
            s.median_us /= g_size;
            s.mean_us /= g_size;
            emit("token", sizes[i], g_size, &s, 0, extra);
        }
    }
    return 0;
}
