/* Dynamic processes: spawn latency (time spent in MPI_Comm_spawn at the
 * parent root), spawn rate (spawn + handshake + disconnect per second) and
 * ping-pong latency over the parent/child intercommunicator beside the same
 * pair over the merged intracommunicator.  The child is this same binary;
 * it finds its parent with MPI_Comm_get_parent. */
#include "common.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG 31

static char self_path[PATH_MAX];

static int mpi_err(int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return 0;
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, s, &len);
    s[len] = 0;
    for (char *p = s; *p; p++)
        if (*p == '"' || *p == '\\' || *p == '\n')
            *p = ' ';
    /* MPICH error stacks are long: keep the class and the innermost cause */
    char *stack = strstr(s, ", error stack:");
    const char *cause = "";
    if (stack) {
        *stack = 0;
        char *p = stack + 1, *q;
        while ((q = strstr(p, " failed ")))
            p = q + 8;
        cause = p;
    }
    char msg[2 * MPI_MAX_ERROR_STRING + 64];
    snprintf(msg, sizeof msg, "%s failed: %s%s%s", what, s, *cause ? ": " : "", cause);
    fprintf(stderr, "mpibench: rank %d: %s\n", g_rank, msg);
    if (g_rank == 0)
        emit_error("spawn", msg);
    return 1;
}

/* Spawn n children running `mode`; returns MPI_SUCCESS or an error code. */
static int do_spawn(const char *mode, int n, MPI_Comm *inter, double *t)
{
    char *args[] = {"child", (char *)mode, NULL};
    int *codes = malloc(sizeof(int) * (size_t)n);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int rc = MPI_Comm_spawn(self_path, args, n, MPI_INFO_NULL, 0, MPI_COMM_WORLD, inter, codes);
    *t = MPI_Wtime() - t0;
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < n; i++)
            if (codes[i] != MPI_SUCCESS)
                rc = codes[i];
    free(codes);
    return rc;
}

/* Parent side of the handshake: bcast a value, children reduce value+rank. */
static int handshake(MPI_Comm inter, int nchild, int value)
{
    int root = g_rank == 0 ? MPI_ROOT : MPI_PROC_NULL;
    int sum = 0, dummy = 0;
    MPI_Bcast(&value, 1, MPI_INT, root, inter);
    MPI_Reduce(&dummy, &sum, 1, MPI_INT, MPI_SUM, root, inter);
    if (g_rank == 0 && sum != nchild * value + nchild * (nchild - 1) / 2)
        fail("spawn handshake: children answered %d, expected %d", sum,
             nchild * value + nchild * (nchild - 1) / 2);
    return 0;
}

static void child_handshake(MPI_Comm parent)
{
    int v = 0, me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Bcast(&v, 1, MPI_INT, 0, parent);
    v += me;
    MPI_Reduce(&v, NULL, 1, MPI_INT, MPI_SUM, 0, parent);
}

typedef struct {
    MPI_Comm comm;
    int peer;
    size_t size;
    unsigned char *sb, *rb;
} spp_t;

/* header: size, first iteration, count, full (count < 0: stop) */
static double k_spp(void *c, long first, int n, int full)
{
    spp_t *p = c;
    long h[4] = {(long)p->size, first, n, full};
    MPI_Send(h, 4, MPI_LONG, p->peer, TAG, p->comm);
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        if (full)
            fill(p->sb, p->size, seed_of(it, 0, 0));
        else
            stamp(p->sb, p->size, seed_of(it, 0, 0));
        MPI_Send(p->sb, (int)p->size, MPI_BYTE, p->peer, TAG, p->comm);
        MPI_Recv(p->rb, (int)p->size, MPI_BYTE, p->peer, TAG, p->comm, MPI_STATUS_IGNORE);
        if (full)
            check(p->rb, p->size, seed_of(it, 1, 0), "spawn ping-pong reply");
        else
            check_stamp(p->rb, p->size, seed_of(it, 1, 0), "spawn ping-pong reply");
    }
    return MPI_Wtime() - t0;
}

static void serve_pingpong(MPI_Comm comm, int peer)
{
    unsigned char *b = NULL;
    size_t cap = 0;
    for (;;) {
        long h[4];
        MPI_Recv(h, 4, MPI_LONG, peer, TAG, comm, MPI_STATUS_IGNORE);
        if (h[2] < 0)
            break;
        size_t size = (size_t)h[0];
        if (size > cap || !b) {
            free(b);
            b = xmalloc(size);
            cap = size;
        }
        for (long it = h[1]; it < h[1] + h[2]; it++) {
            MPI_Recv(b, (int)size, MPI_BYTE, peer, TAG, comm, MPI_STATUS_IGNORE);
            if (h[3]) {
                check(b, size, seed_of(it, 0, 0), "spawn ping-pong (child)");
                fill(b, size, seed_of(it, 1, 0));
            } else {
                check_stamp(b, size, seed_of(it, 0, 0), "spawn ping-pong (child)");
                stamp(b, size, seed_of(it, 1, 0));
            }
            MPI_Send(b, (int)size, MPI_BYTE, peer, TAG, comm);
        }
    }
    free(b);
}

int spawn_child(int argc, char **argv)
{
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const char *mode = argc > 2 ? argv[2] : "idle";
    child_handshake(parent);
    if (!strcmp(mode, "pp")) {
        if (g_rank == 0)
            serve_pingpong(parent, 0);
        MPI_Comm merged;
        MPI_Intercomm_merge(parent, 1, &merged);
        if (g_rank == 0) {
            int psize;
            MPI_Comm_remote_size(parent, &psize);
            (void)psize;
            serve_pingpong(merged, 0);
        }
        MPI_Comm_free(&merged);
    }
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
    return 0;
}

static void pp_sizes(const char *bench, MPI_Comm comm, int peer)
{
    size_t sizes[MAX_SIZES];
    int ns;
    if (g_opt.nsizes)
        opts_sizes(0, 4u << 20, sizes, &ns);
    else {
        ns = 0;
        for (size_t s = 1; s <= (1u << 20); s *= 16)
            sizes[ns++] = s;
    }
    for (int i = 0; i < ns; i++) {
        spp_t p = {.comm = comm, .peer = peer, .size = sizes[i]};
        p.sb = xmalloc(sizes[i]);
        p.rb = xmalloc(sizes[i]);
        stat_t s = measure(MPI_COMM_NULL, k_spp, &p);
        free(p.sb);
        free(p.rb);
        s.min_us /= 2;
        s.median_us /= 2;
        s.mean_us /= 2;
        emit(bench, sizes[i], g_size, &s, s.median_us > 0 ? (double)sizes[i] / s.median_us : 0, "");
    }
    long stop[4] = {0, 0, -1, 0};
    MPI_Send(stop, 4, MPI_LONG, peer, TAG, comm);
}

int bench_spawn(const char *name, const char *self)
{
    if (!realpath(self, self_path))
        snprintf(self_path, sizeof self_path, "%s", self);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int reps = g_opt.smoke ? 1 : g_opt.quick ? 3 : 10;
    MPI_Comm inter;
    double t;

    if (!strcmp(name, "spawn_latency")) {
        char list[256];
        snprintf(list, sizeof list, "%s", g_opt.children);
        char *save = NULL;
        for (char *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
            int n = atoi(c);
            double v[64];
            int k = 0;
            double start = MPI_Wtime();
            for (int r = 0; r < reps && r < 64; r++) {
                if (mpi_err(do_spawn("idle", n, &inter, &t), "MPI_Comm_spawn"))
                    return 1;
                handshake(inter, n, 1000 + r);
                MPI_Comm_disconnect(&inter);
                v[k++] = t * 1e6;
                double el = MPI_Wtime() - start;
                MPI_Bcast(&el, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
                if (r >= 1 && el > 20 * g_opt.budget_s + 2.0)
                    break;
            }
            stat_t s = {.median_us = median_of(v, k), .samples = k, .iters = k, .min_us = v[0]};
            double sum = 0;
            for (int i = 0; i < k; i++) {
                if (v[i] < s.min_us)
                    s.min_us = v[i];
                sum += v[i];
            }
            s.mean_us = sum / k;
            char extra[64];
            snprintf(extra, sizeof extra, ",\"children\":%d", n);
            if (g_rank == 0)
                emit("spawn_latency", (size_t)n, g_size, &s, 0, extra);
        }
        return 0;
    }
    if (!strcmp(name, "spawn_rate")) {
        double t0 = MPI_Wtime();
        for (int r = 0; r < reps; r++) {
            if (mpi_err(do_spawn("idle", 1, &inter, &t), "MPI_Comm_spawn"))
                return 1;
            handshake(inter, 1, 2000 + r);
            MPI_Comm_disconnect(&inter);
        }
        double el = MPI_Wtime() - t0;
        stat_t s = {.min_us = el * 1e6 / reps, .median_us = el * 1e6 / reps, .mean_us = el * 1e6 / reps,
                    .samples = 1, .iters = reps};
        char extra[64];
        snprintf(extra, sizeof extra, ",\"rate_per_s\":%.3f", reps / el);
        if (g_rank == 0)
            emit("spawn_rate", 1, g_size, &s, 0, extra);
        return 0;
    }
    if (!strcmp(name, "spawn_pingpong")) {
        if (mpi_err(do_spawn("pp", 1, &inter, &t), "MPI_Comm_spawn"))
            return 1;
        handshake(inter, 1, 3000);
        if (g_rank == 0)
            pp_sizes("spawn_pp_inter", inter, 0);
        MPI_Comm merged;
        MPI_Intercomm_merge(inter, 0, &merged);
        if (g_rank == 0)
            pp_sizes("spawn_pp_intra", merged, g_size);
        MPI_Comm_free(&merged);
        MPI_Comm_disconnect(&inter);
        return 0;
    }
    if (g_rank == 0)
        emit_error(name, "unknown benchmark");
    return 2;
}
