/* rma_halo: halo exchange through a shared-memory window.
 *
 * A 2-D grid of doubles is split into strips of rows, one strip per rank of
 * a host, periodic (the last strip's neighbour below is the first).  "size"
 * is the bytes of one grid row.  Each rank publishes its top and bottom rows
 * in its part of an MPI_Win_allocate_shared window; one step is:
 *   store the two boundary rows (copied from the strip),
 *   MPI_Win_sync, MPI_Barrier, MPI_Win_sync,
 *   load the upper neighbour's bottom row and the lower neighbour's top row
 *   through MPI_Win_shared_query pointers into the own halo rows.
 * The published rows alternate between two slots by step parity, so a rank
 * may write step s + 1 while a slower neighbour still reads step s: one
 * barrier per step suffices.  Reported: time per step (slowest rank) and the
 * halo bytes each rank reads per microsecond. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TOP, BOTTOM };

typedef struct {
    MPI_Comm comm;
    MPI_Win win;
    int rank, nranks;
    size_t size;
    unsigned char *mine;      /* own slots: [parity][TOP/BOTTOM] rows */
    unsigned char *up, *down; /* the neighbours' slots */
    int up_rank, down_rank;
    unsigned char *edge[2];   /* the strip's own first and last rows */
    unsigned char *halo[2];   /* copies of the neighbours' rows */
} halo_t;

static inline unsigned char *slot(unsigned char *base, size_t size, int parity, int side)
{
    return base + ((size_t)parity * 2 + (size_t)side) * size;
}

static double k_halo(void *c, long first, int n, int full)
{
    halo_t *h = c;
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        int p = (int)(it & 1);
        for (int side = TOP; side <= BOTTOM; side++) {
            /* the strip's boundary as a computation would have left it */
            if (full)
                fill(h->edge[side], h->size, seed_of(it, h->rank, side));
            else
                stamp(h->edge[side], h->size, seed_of(it, h->rank, side));
            memcpy(slot(h->mine, h->size, p, side), h->edge[side], h->size);
        }
        MPI_Win_sync(h->win);
        MPI_Barrier(h->comm);
        MPI_Win_sync(h->win);
        memcpy(h->halo[TOP], slot(h->up, h->size, p, BOTTOM), h->size);
        memcpy(h->halo[BOTTOM], slot(h->down, h->size, p, TOP), h->size);
        if (full) {
            check(h->halo[TOP], h->size, seed_of(it, h->up_rank, BOTTOM), "rma_halo (upper neighbour)");
            check(h->halo[BOTTOM], h->size, seed_of(it, h->down_rank, TOP), "rma_halo (lower neighbour)");
        } else {
            check_stamp(h->halo[TOP], h->size, seed_of(it, h->up_rank, BOTTOM), "rma_halo (upper neighbour)");
            check_stamp(h->halo[BOTTOM], h->size, seed_of(it, h->down_rank, TOP), "rma_halo (lower neighbour)");
        }
    }
    return MPI_Wtime() - t0;
}

static unsigned char *neighbour_base(MPI_Win win, int r, size_t need)
{
    MPI_Aint bytes = 0;
    int disp = 0;
    void *base = NULL;
    MPI_Win_shared_query(win, r, &bytes, &disp, &base);
    if ((size_t)bytes < need || !base)
        fail("rma_halo: MPI_Win_shared_query of rank %d gave %ld bytes at %p, expected %zu", r, (long)bytes,
             base, need);
    return base;
}

static int run_point(MPI_Comm comm, size_t size)
{
    halo_t h;
    rma_win_t w;
    memset(&h, 0, sizeof h);
    h.comm = comm;
    h.size = size;
    MPI_Comm_rank(comm, &h.rank);
    MPI_Comm_size(comm, &h.nranks);
    h.up_rank = (h.rank + h.nranks - 1) % h.nranks;
    h.down_rank = (h.rank + 1) % h.nranks;
    size_t bytes = 4 * size;
    if (rma_win_make(comm, RMA_SHARED, bytes, 1, &w, "rma_halo"))
        return 1;
    h.win = w.win;
    h.mine = w.base;
    h.up = neighbour_base(h.win, h.up_rank, bytes);
    h.down = neighbour_base(h.win, h.down_rank, bytes);
    for (int side = TOP; side <= BOTTOM; side++) {
        h.edge[side] = xmalloc(size);
        h.halo[side] = xmalloc(size);
    }
    /* Win_sync needs a passive-target epoch; no lock is ever contended. */
    MPI_Win_lock_all(MPI_MODE_NOCHECK, h.win);

    stat_t s = measure(comm, k_halo, &h);

    MPI_Win_unlock_all(h.win);
    rma_win_free(&w);
    for (int side = TOP; side <= BOTTOM; side++) {
        free(h.edge[side]);
        free(h.halo[side]);
    }
    if (g_rank == 0) /* rank 0 of its host, in the order of MPI_COMM_WORLD */
        emit("rma_halo", size, h.nranks, &s, s.median_us > 0 ? 2.0 * (double)size / s.median_us : 0, "");
    return 0;
}

int bench_rma_halo(void)
{
    /* the ranks of this host: a shared window cannot span hosts */
    MPI_Comm comm;
    int rc = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &comm);
    size_t sizes[MAX_SIZES];
    int ns;
    opts_sizes(8, 16u << 20, sizes, &ns);
    if (!g_opt.nsizes) {
        sizes[0] = 1024;
        sizes[1] = 64 * 1024;
        ns = 2;
    }
    for (int i = 0; i < ns && !rc; i++)
        rc = run_point(comm, sizes[i]);
    MPI_Comm_free(&comm);
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return rc;
}
