/* Collective latency per message size.  "size" is the bytes each rank
 * contributes (per destination for the all-to-all family; per rank block
 * for gather/scatter/allgather; the vector length for reductions). */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int op;
    size_t size;   /* bytes */
    int count;     /* ints, for reductions */
    unsigned char *sb, *rb;
    int *scnt, *sdsp, *rcnt, *rdsp;
} coll_t;

enum { BARRIER, BCAST, REDUCE, ALLREDUCE, GATHER, SCATTER, ALLGATHER, ALLTOALL, ALLTOALLV, REDUCE_SCATTER };
static const char *names[] = {"barrier", "bcast", "reduce", "allreduce", "gather", "scatter",
                              "allgather", "alltoall", "alltoallv", "reduce_scatter"};

static inline int rval(long it, int rank, long i)
{
    return (int)((seed_of(it, 0, 0) + (uint64_t)i * 7u) & 0xffff) + rank;
}

static void check_sum(const int *v, int n, long it, long first_index, const char *what)
{
    int sumr = g_size * (g_size - 1) / 2;
    for (int i = 0; i < n; i++) {
        int want = g_size * rval(it, 0, first_index + i) + sumr;
        if (v[i] != want)
            fail("%s: element %d is %d, expected %d", what, i, v[i], want);
    }
}

static int vcount(size_t size, int from, int to)
{
    long q = (long)size / 4;
    return (int)((long)size + ((from + to) % 3 - 1) * q);
}

static void prep(coll_t *c, long it)
{
    size_t n = c->size;
    int *iv = (int *)c->sb;
    switch (c->op) {
    case BCAST:
        if (g_rank == 0)
            fill(c->sb, n, seed_of(it, 0, 0));
        break;
    case REDUCE:
    case ALLREDUCE:
        for (int i = 0; i < c->count; i++)
            iv[i] = rval(it, g_rank, i);
        break;
    case REDUCE_SCATTER:
        for (long i = 0; i < (long)c->count * g_size; i++)
            iv[i] = rval(it, g_rank, i);
        break;
    case GATHER:
    case ALLGATHER:
        fill(c->sb, n, seed_of(it, g_rank, 0));
        break;
    case SCATTER:
        if (g_rank == 0)
            for (int j = 0; j < g_size; j++)
                fill(c->sb + (size_t)j * n, n, seed_of(it, 0, j));
        break;
    case ALLTOALL:
        for (int j = 0; j < g_size; j++)
            fill(c->sb + (size_t)j * n, n, seed_of(it, g_rank, j));
        break;
    case ALLTOALLV:
        for (int j = 0; j < g_size; j++)
            fill(c->sb + c->sdsp[j], (size_t)c->scnt[j], seed_of(it, g_rank, j));
        break;
    }
}

static void verify(coll_t *c, long it)
{
    size_t n = c->size;
    switch (c->op) {
    case BCAST:
        if (g_rank != 0)
            check(c->sb, n, seed_of(it, 0, 0), "bcast");
        break;
    case REDUCE:
        if (g_rank == 0)
            check_sum((int *)c->rb, c->count, it, 0, "reduce");
        break;
    case ALLREDUCE:
        check_sum((int *)c->rb, c->count, it, 0, "allreduce");
        break;
    case REDUCE_SCATTER:
        check_sum((int *)c->rb, c->count, it, (long)g_rank * c->count, "reduce_scatter");
        break;
    case GATHER:
        if (g_rank == 0)
            for (int j = 0; j < g_size; j++)
                check(c->rb + (size_t)j * n, n, seed_of(it, j, 0), "gather");
        break;
    case ALLGATHER:
        for (int j = 0; j < g_size; j++)
            check(c->rb + (size_t)j * n, n, seed_of(it, j, 0), "allgather");
        break;
    case SCATTER:
        check(c->rb, n, seed_of(it, 0, g_rank), "scatter");
        break;
    case ALLTOALL:
        for (int j = 0; j < g_size; j++)
            check(c->rb + (size_t)j * n, n, seed_of(it, j, g_rank), "alltoall");
        break;
    case ALLTOALLV:
        for (int j = 0; j < g_size; j++)
            check(c->rb + c->rdsp[j], (size_t)c->rcnt[j], seed_of(it, j, g_rank), "alltoallv");
        break;
    }
}

static void run_op(coll_t *c)
{
    int n = (int)c->size;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (c->op) {
    case BARRIER: MPI_Barrier(w); break;
    case BCAST: MPI_Bcast(c->sb, n, MPI_BYTE, 0, w); break;
    case REDUCE: MPI_Reduce(c->sb, c->rb, c->count, MPI_INT, MPI_SUM, 0, w); break;
    case ALLREDUCE: MPI_Allreduce(c->sb, c->rb, c->count, MPI_INT, MPI_SUM, w); break;
    case GATHER: MPI_Gather(c->sb, n, MPI_BYTE, c->rb, n, MPI_BYTE, 0, w); break;
    case SCATTER: MPI_Scatter(c->sb, n, MPI_BYTE, c->rb, n, MPI_BYTE, 0, w); break;
    case ALLGATHER: MPI_Allgather(c->sb, n, MPI_BYTE, c->rb, n, MPI_BYTE, w); break;
    case ALLTOALL: MPI_Alltoall(c->sb, n, MPI_BYTE, c->rb, n, MPI_BYTE, w); break;
    case ALLTOALLV:
        MPI_Alltoallv(c->sb, c->scnt, c->sdsp, MPI_BYTE, c->rb, c->rcnt, c->rdsp, MPI_BYTE, w);
        break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter(c->sb, c->rb, c->rcnt, MPI_INT, MPI_SUM, w);
        break;
    }
}

static double k_coll(void *ctx, long first, int n, int full)
{
    coll_t *c = ctx;
    double t = 0;
    if (!full) {
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++)
            run_op(c);
        return MPI_Wtime() - t0;
    }
    for (long it = first; it < first + n; it++) {
        prep(c, it);
        double t0 = MPI_Wtime();
        run_op(c);
        t += MPI_Wtime() - t0;
        verify(c, it);
    }
    return t;
}

int bench_coll(const char *name)
{
    int op = -1;
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (!strcmp(name, names[i]))
            op = i;
    if (op < 0) {
        if (g_rank == 0)
            emit_error(name, "unknown benchmark");
        return 2;
    }
    size_t sizes[MAX_SIZES];
    int ns;
    if (op == BARRIER) {
        sizes[0] = 0;
        ns = 1;
    } else {
        opts_sizes(op == REDUCE || op == ALLREDUCE || op == REDUCE_SCATTER ? 4 : 1, 1u << 20, sizes, &ns);
    }
    for (int i = 0; i < ns; i++) {
        coll_t c;
        memset(&c, 0, sizeof c);
        c.op = op;
        c.size = sizes[i];
        if (op == REDUCE || op == ALLREDUCE || op == REDUCE_SCATTER) {
            c.count = (int)(c.size / sizeof(int));
            c.size = (size_t)c.count * sizeof(int);
        }
        size_t p = (size_t)g_size;
        size_t sbytes = c.size * (op == SCATTER || op == ALLTOALL || op == REDUCE_SCATTER ? p : 1);
        size_t rbytes = c.size * (op == GATHER || op == ALLGATHER || op == ALLTOALL ? p : 1);
        c.scnt = calloc(p, sizeof(int));
        c.sdsp = calloc(p, sizeof(int));
        c.rcnt = calloc(p, sizeof(int));
        c.rdsp = calloc(p, sizeof(int));
        if (op == ALLTOALLV) {
            int so = 0, ro = 0;
            for (int j = 0; j < g_size; j++) {
                c.scnt[j] = vcount(c.size, g_rank, j);
                c.sdsp[j] = so;
                so += c.scnt[j];
                c.rcnt[j] = vcount(c.size, j, g_rank);
                c.rdsp[j] = ro;
                ro += c.rcnt[j];
            }
            sbytes = (size_t)so;
            rbytes = (size_t)ro;
        }
        if (op == REDUCE_SCATTER)
            for (int j = 0; j < g_size; j++)
                c.rcnt[j] = c.count;
        c.sb = xmalloc(sbytes);
        c.rb = xmalloc(rbytes);
        stat_t s = measure(MPI_COMM_WORLD, k_coll, &c);
        free(c.sb);
        free(c.rb);
        free(c.scnt);
        free(c.sdsp);
        free(c.rcnt);
        free(c.rdsp);
        if (g_rank == 0)
            emit(name, c.size, g_size, &s, s.median_us > 0 ? (double)c.size / s.median_us : 0, "");
    }
    return 0;
}
