/* One-sided put and get between two ranks: latency (one operation and its
 * synchronization per iteration) and bandwidth (a window of operations per
 * synchronization), under four synchronizations, on MPI_Win_allocate memory,
 * and on user memory given to MPI_Win_create in the "_create" rows.
 *
 * Names: rma_{put,get}_{lat,bw}_{flush,lock,fence,pscw,create}.
 *   flush   MPI_Win_lock(shared) once per batch; per iteration the
 *           operations and MPI_Win_flush
 *   lock    per iteration MPI_Win_lock(shared), the operations, MPI_Win_unlock
 *   fence   per iteration the operations and MPI_Win_fence on both ranks
 *   pscw    per iteration origin MPI_Win_start / operations / MPI_Win_complete,
 *           target MPI_Win_post / MPI_Win_wait
 *   create  as flush, the window made by MPI_Win_create over malloc'ed memory
 * Rank 0 is the origin, rank 1 the target; in the passive modes the target
 * waits in the measurement loop's collective, which is where an MPI without
 * asynchronous progress serves it. */
#include "common.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW_BYTES (64u << 20) /* cap on the bytes one window of operations moves */

enum { SYNC_FLUSH, SYNC_LOCK, SYNC_FENCE, SYNC_PSCW };
static const char *sync_names[] = {"flush", "lock", "fence", "pscw"};

typedef struct {
    int get;             /* 0: MPI_Put, 1: MPI_Get */
    int sync;            /* SYNC_* */
    int nops;            /* operations per synchronization: 1 for latency rows */
    int rank;            /* in the pair's communicator: 0 origin, 1 target */
    size_t size;
    unsigned char *obuf; /* origin buffer: nops slices of size bytes */
    unsigned char *wbuf; /* this rank's window memory: nops slices, two sets under fence */
    MPI_Win win;
    MPI_Comm comm;
    MPI_Group peer;      /* the other rank, for post/start */
} rma_pair_t;

int rma_win_make(MPI_Comm comm, int flavor, size_t bytes, int disp_unit, rma_win_t *w, const char *bench)
{
    static const char *calls[] = {"MPI_Win_allocate", "MPI_Win_create", "MPI_Win_allocate_shared"};
    MPI_Errhandler prev;
    int rc, len = 0;
    char msg[MPI_MAX_ERROR_STRING];
    memset(w, 0, sizeof *w);
    w->win = MPI_WIN_NULL;
    /* Whole cache lines: where an MPI lays the ranks' parts of a window side
     * by side in one shared segment, an 8-byte part would share its line with
     * the neighbour's and time false sharing (and MPICH 4.0.2 lands puts
     * into a part under 16 bytes in the wrong rank's memory). */
    bytes = bytes ? (bytes + 63) / 64 * 64 : 64;
    /* An MPI without one-sided support refuses here: that is a failed row of
     * this benchmark, not the end of the job. */
    MPI_Comm_get_errhandler(comm, &prev);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (flavor == RMA_CREATE) {
        w->base = xmalloc(bytes);
        w->user_mem = 1;
        rc = MPI_Win_create(w->base, (MPI_Aint)bytes, disp_unit, MPI_INFO_NULL, comm, &w->win);
    } else if (flavor == RMA_SHARED) {
        rc = MPI_Win_allocate_shared((MPI_Aint)bytes, disp_unit, MPI_INFO_NULL, comm, &w->base, &w->win);
    } else {
        rc = MPI_Win_allocate((MPI_Aint)bytes, disp_unit, MPI_INFO_NULL, comm, &w->base, &w->win);
    }
    MPI_Comm_set_errhandler(comm, prev);
    MPI_Errhandler_free(&prev);
    if (rc != MPI_SUCCESS)
        w->win = MPI_WIN_NULL;
    /* every rank learns whether any failed; the lowest failing rank reports */
    int me = rc != MPI_SUCCESS ? g_rank : INT_MAX, lowest;
    MPI_Allreduce(&me, &lowest, 1, MPI_INT, MPI_MIN, comm);
    if (lowest == INT_MAX)
        return 0;
    if (lowest == g_rank) {
        if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
            len = snprintf(msg, sizeof msg, "error code %d", rc);
        msg[len < (int)sizeof msg ? len : (int)sizeof msg - 1] = 0;
        for (char *c = msg; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 32)
                *c = ' ';
        char line[MPI_MAX_ERROR_STRING + 128];
        snprintf(line, sizeof line, "rank %d: %s of %zu bytes failed: %s", g_rank, calls[flavor], bytes, msg);
        emit_error(bench, line);
    }
    rma_win_free(w);
    return 1;
}

void rma_win_free(rma_win_t *w)
{
    if (w->win != MPI_WIN_NULL)
        MPI_Win_free(&w->win);
    if (w->user_mem)
        free(w->base);
    memset(w, 0, sizeof *w);
    w->win = MPI_WIN_NULL;
}

/* Before a get, the bytes the check will look at are cleared, so that a get
 * that moved nothing cannot pass. */
static void prep_origin(rma_pair_t *p, long it, int full)
{
    for (int j = 0; j < p->nops; j++) {
        unsigned char *b = p->obuf + (size_t)j * p->size;
        if (!p->get) {
            if (full)
                fill(b, p->size, seed_of(it, 0, j));
            else
                stamp(b, p->size, seed_of(it, 0, j));
        } else if (full || p->size < 16) {
            memset(b, 0, p->size);
        } else {
            memset(b, 0, 8);
            memset(b + p->size - 8, 0, 8);
        }
    }
}

/* The target's slice j for iteration it.  Under fence the origin's next
 * epoch begins as its fence returns, while the target may still be reading
 * this one's data: puts alternate between two sets of slices. */
static inline size_t slice(const rma_pair_t *p, long it, int j)
{
    size_t set = p->sync == SYNC_FENCE && !p->get ? (size_t)(it & 1) : 0;
    return (set * (size_t)p->nops + (size_t)j) * p->size;
}

static void issue(rma_pair_t *p, long it)
{
    for (int j = 0; j < p->nops; j++) {
        unsigned char *b = p->obuf + (size_t)j * p->size;
        MPI_Aint disp = (MPI_Aint)slice(p, it, j);
        if (p->get)
            MPI_Get(b, (int)p->size, MPI_BYTE, 1, disp, (int)p->size, MPI_BYTE, p->win);
        else
            MPI_Put(b, (int)p->size, MPI_BYTE, 1, disp, (int)p->size, MPI_BYTE, p->win);
    }
}

/* Origin, after a get: the target's window holds the pattern of seed (0, 1, j). */
static void check_got(rma_pair_t *p, int full)
{
    for (int j = 0; j < p->nops; j++) {
        const unsigned char *b = p->obuf + (size_t)j * p->size;
        if (full)
            check(b, p->size, seed_of(0, 1, j), "rma get");
        else
            check_stamp(b, p->size, seed_of(0, 1, j), "rma get");
    }
}

/* Target, after a put of iteration it has completed. */
static void check_put(rma_pair_t *p, long it, int full)
{
    for (int j = 0; j < p->nops; j++) {
        const unsigned char *b = p->wbuf + slice(p, it, j);
        if (full)
            check(b, p->size, seed_of(it, 0, j), "rma put (target window)");
        else
            check_stamp(b, p->size, seed_of(it, 0, j), "rma put (target window)");
    }
}

static double k_rma(void *c, long first, int n, int full)
{
    rma_pair_t *p = c;
    int origin = p->rank == 0;
    double t0 = MPI_Wtime();
    switch (p->sync) {
    case SYNC_FLUSH:
    case SYNC_LOCK:
        if (origin) {
            if (p->sync == SYNC_FLUSH)
                MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, p->win);
            for (long it = first; it < first + n; it++) {
                prep_origin(p, it, full);
                if (p->sync == SYNC_LOCK)
                    MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, p->win);
                issue(p, it);
                if (p->sync == SYNC_LOCK)
                    MPI_Win_unlock(1, p->win);
                else
                    MPI_Win_flush(1, p->win);
                if (p->get)
                    check_got(p, full);
            }
            if (p->sync == SYNC_FLUSH)
                MPI_Win_unlock(1, p->win);
        }
        /* The target learns nothing in a passive epoch: it looks at the
         * last iteration's data once the origin has unlocked. */
        if (full && !p->get && n > 0) {
            MPI_Barrier(p->comm);
            if (!origin) {
                MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, p->win);
                check_put(p, first + n - 1, 1);
                MPI_Win_unlock(1, p->win);
            }
        }
        break;
    case SYNC_FENCE:
        for (long it = first; it < first + n; it++) {
            if (origin) {
                prep_origin(p, it, full);
                issue(p, it);
            }
            MPI_Win_fence(0, p->win);
            if (origin && p->get)
                check_got(p, full);
            else if (!origin && !p->get)
                check_put(p, it, full);
        }
        break;
    case SYNC_PSCW:
        for (long it = first; it < first + n; it++) {
            if (origin) {
                prep_origin(p, it, full);
                MPI_Win_start(p->peer, 0, p->win);
                issue(p, it);
                MPI_Win_complete(p->win);
                if (p->get)
                    check_got(p, full);
            } else {
                MPI_Win_post(p->peer, 0, p->win);
                MPI_Win_wait(p->win);
                if (!p->get)
                    check_put(p, it, full);
            }
        }
        break;
    }
    return MPI_Wtime() - t0;
}

static int ops_for(size_t size)
{
    int w = g_opt.window;
    if (size > 0 && (size_t)w * size > WINDOW_BYTES)
        w = (int)(WINDOW_BYTES / size);
    return w < 1 ? 1 : w;
}

/* One (benchmark, size) point; every rank of comm calls.  Returns nonzero
 * when the window could not be made (the error line is printed). */
static int run_point(MPI_Comm comm, const char *name, int get, int sync, int bw, int flavor, size_t size)
{
    rma_pair_t p;
    rma_win_t w;
    memset(&p, 0, sizeof p);
    p.get = get;
    p.sync = sync;
    p.nops = bw ? ops_for(size) : 1;
    p.size = size;
    p.comm = comm;
    MPI_Comm_rank(comm, &p.rank);
    size_t bytes = (size_t)p.nops * size;
    size_t wbytes = sync == SYNC_FENCE ? 2 * bytes : bytes;
    if (rma_win_make(comm, flavor, wbytes, 1, &w, name))
        return 1;
    p.win = w.win;
    p.wbuf = w.base;
    p.obuf = xmalloc(bytes);
    /* the get source: the target's own stores, inside an epoch on its own
     * window so that they are public before the first access */
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, p.rank, 0, p.win);
    if (get && p.rank == 1)
        for (int j = 0; j < p.nops; j++)
            fill(p.wbuf + (size_t)j * size, size, seed_of(0, 1, j));
    else
        memset(p.wbuf, 0, wbytes);
    MPI_Win_unlock(p.rank, p.win);
    MPI_Barrier(comm);
    MPI_Group all;
    MPI_Comm_group(comm, &all);
    int other = 1 - p.rank;
    MPI_Group_incl(all, 1, &other, &p.peer);
    MPI_Group_free(&all);
    if (sync == SYNC_FENCE)
        MPI_Win_fence(MPI_MODE_NOPRECEDE, p.win);

    stat_t s = measure(comm, k_rma, &p);

    if (sync == SYNC_FENCE)
        MPI_Win_fence(MPI_MODE_NOSUCCEED, p.win);
    MPI_Group_free(&p.peer);
    rma_win_free(&w);
    free(p.obuf);
    if (p.rank == 0) {
        char extra[64] = "";
        if (bw) {
            s.min_us /= p.nops;
            s.median_us /= p.nops;
            s.mean_us /= p.nops;
            snprintf(extra, sizeof extra, ",\"window\":%d", p.nops);
        }
        emit(name, size, g_size, &s, s.median_us > 0 ? (double)size / s.median_us : 0, extra);
    }
    return 0;
}

int bench_rma(const char *name)
{
    char op[8] = "", kind[8] = "", mode[8] = "";
    int get, bw, sync = -1, flavor = RMA_ALLOCATE;
    if (sscanf(name, "rma_%7[a-z]_%7[a-z]_%7[a-z]", op, kind, mode) != 3 ||
        (strcmp(op, "put") && strcmp(op, "get")) || (strcmp(kind, "lat") && strcmp(kind, "bw"))) {
        if (g_rank == 0)
            emit_error(name, "unknown one-sided benchmark");
        return 1;
    }
    get = !strcmp(op, "get");
    bw = !strcmp(kind, "bw");
    for (int i = 0; i < 4; i++)
        if (!strcmp(mode, sync_names[i]))
            sync = i;
    if (!strcmp(mode, "create")) {
        sync = SYNC_FLUSH;
        flavor = RMA_CREATE;
    }
    if (sync < 0) {
        if (g_rank == 0)
            emit_error(name, "unknown synchronization (flush, lock, fence, pscw, create)");
        return 1;
    }
    if (g_size < 2) {
        if (g_rank == 0)
            emit_error(name, "needs at least 2 ranks");
        return 1;
    }
    MPI_Comm comm;
    int rc = 0;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < 2 ? 0 : MPI_UNDEFINED, g_rank, &comm);
    if (comm != MPI_COMM_NULL) {
        size_t sizes[MAX_SIZES];
        int ns;
        opts_sizes(1, 4u << 20, sizes, &ns);
        if (!g_opt.nsizes) {
            sizes[0] = bw ? 1u << 20 : 8;
            ns = 1;
        }
        for (int i = 0; i < ns && !rc; i++)
            rc = run_point(comm, name, get, sync, bw, flavor, sizes[i]);
        MPI_Comm_free(&comm);
    }
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return rc;
}
