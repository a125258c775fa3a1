/* Logical topologies: star (rank 0 with every other rank), ring (each rank
 * with the next), chaos (every pair).  In one iteration every rank sends a
 * window of messages to each of its neighbours and receives as many from
 * each.  Reported: total bandwidth / number of channels in use. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG 23

typedef struct {
    size_t size;
    int win, nn;
    int *nb;
    unsigned char **sb, **rb;
    MPI_Request *req;
} topo_t;

static double k_topo(void *ctx, long first, int n, int full)
{
    topo_t *t = ctx;
    int m = t->nn * t->win;
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        for (int i = 0; i < m; i++)
            MPI_Irecv(t->rb[i], (int)t->size, MPI_BYTE, t->nb[i / t->win], TAG, MPI_COMM_WORLD, &t->req[i]);
        for (int i = 0; i < m; i++) {
            int to = t->nb[i / t->win];
            uint64_t s = seed_of(it, g_rank * g_size + to, i % t->win);
            if (full)
                fill(t->sb[i], t->size, s);
            else
                stamp(t->sb[i], t->size, s);
            MPI_Isend(t->sb[i], (int)t->size, MPI_BYTE, to, TAG, MPI_COMM_WORLD, &t->req[m + i]);
        }
        waitall(2 * m, t->req);
        for (int i = 0; i < m; i++) {
            int from = t->nb[i / t->win];
            uint64_t s = seed_of(it, from * g_size + g_rank, i % t->win);
            if (full)
                check(t->rb[i], t->size, s, "topology exchange");
            else
                check_stamp(t->rb[i], t->size, s, "topology exchange");
        }
    }
    return MPI_Wtime() - t0;
}

int bench_topo(const char *name)
{
    int n = g_size;
    if (n < 2) {
        if (g_rank == 0)
            emit_error(name, "needs at least 2 ranks");
        return 1;
    }
    int *nb = malloc(sizeof(int) * (size_t)n);
    int nn = 0;
    long channels, total_links = 0; /* directed links over all ranks */
    if (!strcmp(name, "star")) {
        channels = n - 1;
        if (g_rank == 0)
            for (int j = 1; j < n; j++)
                nb[nn++] = j;
        else
            nb[nn++] = 0;
        total_links = 2L * (n - 1);
    } else if (!strcmp(name, "ring")) {
        channels = n == 2 ? 1 : n;
        nb[nn++] = (g_rank + 1) % n;
        if (n > 2)
            nb[nn++] = (g_rank + n - 1) % n;
        total_links = 2 * channels;
    } else {
        channels = (long)n * (n - 1) / 2;
        for (int j = 0; j < n; j++)
            if (j != g_rank)
                nb[nn++] = j;
        total_links = 2 * channels;
    }
    size_t sizes[MAX_SIZES];
    int ns;
    opts_sizes(1, 1u << 20, sizes, &ns);
    for (int i = 0; i < ns; i++) {
        topo_t t = {.size = sizes[i], .nn = nn, .nb = nb};
        /* window: at most 8 per neighbour and 32 MiB per rank; the same
         * on every rank, computed from the largest neighbour count */
        int maxnn = n - 1;
        t.win = 8;
        while (t.win > 1 && (size_t)t.win * (size_t)maxnn * sizes[i] > (32u << 20))
            t.win /= 2;
        int m = nn * t.win;
        t.sb = malloc(sizeof(void *) * (size_t)m);
        t.rb = malloc(sizeof(void *) * (size_t)m);
        t.req = malloc(sizeof(MPI_Request) * 2 * (size_t)m);
        for (int j = 0; j < m; j++) {
            t.sb[j] = xmalloc(sizes[i]);
            t.rb[j] = xmalloc(sizes[i]);
        }
        stat_t s = measure(MPI_COMM_WORLD, k_topo, &t);
        for (int j = 0; j < m; j++) {
            free(t.sb[j]);
            free(t.rb[j]);
        }
        free(t.sb);
        free(t.rb);
        free(t.req);
        if (g_rank == 0) {
            double bytes = (double)total_links * t.win * (double)sizes[i];
            double total = s.median_us > 0 ? bytes / s.median_us : 0;
            char extra[160];
            snprintf(extra, sizeof extra, ",\"window\":%d,\"channels\":%ld,\"total_mbps\":%.3f",
                     t.win, channels, total);
            emit(name, sizes[i], n, &s, total / (double)channels, extra);
        }
    }
    free(nb);
    return 0;
}
