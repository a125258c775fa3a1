/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* Many outstanding nonblocking collectives on several communicators at
   once: MPI_COMM_WORLD, a duplicate of it and a split (odd/even world
   ranks, reversed order). On each, 26 nonblocking collectives of mixed
   kinds (every nonblocking collective: Ibcast, Ireduce, Iallreduce, Igather(v),
   Iscatter(v), Iallgather(v), Ialltoall(v,w), Ireduce_scatter(_block),
   Iscan, Iexscan, Ibarrier; roots and counts vary, a few with 20000 ints)
   are started in the same order on every rank, but the communicators are
   interleaved differently on different ranks, with point-to-point messages
   (Isend/Irecv around a ring on each communicator) started in between.
   All requests are then completed together, in an order that differs from
   rank to rank and from round to round: MPI_Waitall on a shuffled array, a
   MPI_Testsome polling loop, a MPI_Testany polling loop, MPI_Test on each
   request in reverse order, MPI_Waitsome. Halfway through, every rank
   calls a blocking MPI_Allreduce on each communicator, behind the
   outstanding operations. Each round also duplicates MPI_COMM_WORLD, starts
   6 collectives and ring messages on the duplicate and frees it at once:
   they must complete normally. Every result is checked against values
   computed from rank numbers.

   Compiling with -DSKIP_OMPI_414_BUGS frees the duplicate only after its
   operations have completed: Open MPI 4.1.4 crashes (libnbc sends on the
   freed communicator) otherwise. */
#include "coll_util.h"
#include "coll_payload.h"

enum {
    K_BCAST, K_REDUCE, K_ALLREDUCE, K_GATHER, K_GATHERV, K_SCATTER, K_SCATTERV, K_ALLGATHER,
    K_ALLGATHERV, K_ALLTOALL, K_ALLTOALLV, K_ALLTOALLW, K_RSB, K_RS, K_SCAN, K_EXSCAN,
    K_BARRIER, K_NKINDS
};
static const char *const knames[K_NKINDS] = {
    "Ibcast", "Ireduce", "Iallreduce", "Igather", "Igatherv", "Iscatter", "Iscatterv",
    "Iallgather", "Iallgatherv", "Ialltoall", "Ialltoallv", "Ialltoallw",
    "Ireduce_scatter_block", "Ireduce_scatter", "Iscan", "Iexscan", "Ibarrier"};

#define NCOMMS 4
#define TMP 3     /* a duplicate of MPI_COMM_WORLD made each round, freed with
                     operations pending */
#define NTMP 6    /* collectives on it */
#define NOPS 26   /* collectives per communicator and round */
#define NP2P 16   /* ints per point-to-point message */
#define ROUNDS 5
#define MAXP 64

typedef struct {
    int kind, ci, idx, root, n;
    int *sbuf, *rbuf;
    size_t slen, rlen;
    int cnt[MAXP], dsp[MAXP], rcnt[MAXP], rdsp[MAXP];
    MPI_Datatype types[MAXP];
} op_t;

typedef struct {
    int ci, peer_from, step;
    int sbuf[NP2P], rbuf[NP2P];
} p2p_t;

static MPI_Comm comms[NCOMMS];
static const char *cnames[NCOMMS];
static int crank[NCOMMS], csize[NCOMMS];

/* reduction input of rank r, element j, for op idx in round `round` */
static int rval(int r, int j, int idx, int round)
{
    return (r * 7 + j * 3 + idx * 11 + round * 5) % 61 - 30;
}

static int op_count(int idx)
{
    if (idx % 9 == 4)
        return 20000; /* a few large ones */
    return 1 + (idx * 5) % 13;
}

static int *xints(size_t n)
{
    int *p = cu_xmalloc((n ? n : 1) * sizeof(int));
    for (size_t k = 0; k < (n ? n : 1); k++)
        p[k] = CU_SENT;
    return p;
}

/* set up buffers and start op o (its collective) */
static int op_start(op_t *o, int round, MPI_Request *req)
{
    int ci = o->ci, rank = crank[ci], size = csize[ci], n = o->n, idx = o->idx;
    MPI_Comm c = comms[ci];
    o->sbuf = o->rbuf = NULL;
    o->slen = o->rlen = 0;
    switch (o->kind) {
    case K_BCAST:
        o->rlen = (size_t)n;
        o->rbuf = xints(o->rlen);
        if (rank == o->root)
            for (int j = 0; j < n; j++)
                o->rbuf[j] = cu_val(o->root, idx, j, round);
        return MPI_Ibcast(o->rbuf, n, MPI_INT, o->root, c, req);
    case K_REDUCE:
    case K_ALLREDUCE:
    case K_SCAN:
    case K_EXSCAN:
        o->slen = o->rlen = (size_t)n;
        o->sbuf = xints(o->slen);
        o->rbuf = xints(o->rlen);
        for (int j = 0; j < n; j++)
            o->sbuf[j] = rval(rank, j, idx, round);
        if (o->kind == K_REDUCE)
            return MPI_Ireduce(o->sbuf, o->rbuf, n, MPI_INT, MPI_SUM, o->root, c, req);
        if (o->kind == K_ALLREDUCE)
            return MPI_Iallreduce(o->sbuf, o->rbuf, n, MPI_INT, MPI_SUM, c, req);
        if (o->kind == K_SCAN)
            return MPI_Iscan(o->sbuf, o->rbuf, n, MPI_INT, MPI_SUM, c, req);
        return MPI_Iexscan(o->sbuf, o->rbuf, n, MPI_INT, MPI_SUM, c, req);
    case K_RSB:
    case K_RS: {
        size_t tot = 0;
        for (int i = 0; i < size; i++) {
            o->cnt[i] = o->kind == K_RSB ? n : (int)cu_vcount((size_t)n, i);
            tot += (size_t)o->cnt[i];
        }
        o->slen = tot;
        o->rlen = (size_t)o->cnt[rank];
        o->sbuf = xints(o->slen);
        o->rbuf = xints(o->rlen);
        for (size_t j = 0; j < tot; j++)
            o->sbuf[j] = rval(rank, (int)j, idx, round);
        if (o->kind == K_RSB)
            return MPI_Ireduce_scatter_block(o->sbuf, o->rbuf, n, MPI_INT, MPI_SUM, c, req);
        return MPI_Ireduce_scatter(o->sbuf, o->rbuf, o->cnt, MPI_INT, MPI_SUM, c, req);
    }
    case K_GATHER:
    case K_ALLGATHER:
    case K_GATHERV:
    case K_ALLGATHERV: {
        int v = o->kind == K_GATHERV || o->kind == K_ALLGATHERV;
        size_t off = 0;
        for (int i = size - 1; i >= 0; i--) { /* reversed blocks */
            o->cnt[i] = v ? (int)cu_vcount((size_t)n, i) : n;
            o->dsp[i] = v ? (int)off : i * n;
            off += (size_t)o->cnt[i];
        }
        o->slen = (size_t)o->cnt[rank];
        o->sbuf = xints(o->slen);
        for (int j = 0; j < o->cnt[rank]; j++)
            o->sbuf[j] = cu_val(rank, idx, j, round);
        int all = o->kind == K_ALLGATHER || o->kind == K_ALLGATHERV;
        if (all || rank == o->root) {
            o->rlen = off;
            o->rbuf = xints(o->rlen);
        }
        if (o->kind == K_GATHER)
            return MPI_Igather(o->sbuf, n, MPI_INT, o->rbuf, n, MPI_INT, o->root, c, req);
        if (o->kind == K_ALLGATHER)
            return MPI_Iallgather(o->sbuf, n, MPI_INT, o->rbuf, n, MPI_INT, c, req);
        if (o->kind == K_GATHERV)
            return MPI_Igatherv(o->sbuf, o->cnt[rank], MPI_INT, o->rbuf, o->cnt, o->dsp, MPI_INT,
                                o->root, c, req);
        return MPI_Iallgatherv(o->sbuf, o->cnt[rank], MPI_INT, o->rbuf, o->cnt, o->dsp, MPI_INT,
                               c, req);
    }
    case K_SCATTER:
    case K_SCATTERV: {
        int v = o->kind == K_SCATTERV;
        size_t off = 0;
        for (int i = size - 1; i >= 0; i--) {
            o->cnt[i] = v ? (int)cu_vcount((size_t)n, i) : n;
            o->dsp[i] = v ? (int)off : i * n;
            off += (size_t)o->cnt[i];
        }
        o->rlen = (size_t)o->cnt[rank];
        o->rbuf = xints(o->rlen);
        if (rank == o->root) {
            o->slen = off;
            o->sbuf = xints(o->slen);
            for (int i = 0; i < size; i++)
                for (int j = 0; j < o->cnt[i]; j++)
                    o->sbuf[o->dsp[i] + j] = cu_val(o->root, i, j + idx, round);
        }
        if (!v)
            return MPI_Iscatter(o->sbuf, n, MPI_INT, o->rbuf, n, MPI_INT, o->root, c, req);
        return MPI_Iscatterv(o->sbuf, o->cnt, o->dsp, MPI_INT, o->rbuf, o->cnt[rank], MPI_INT,
                             o->root, c, req);
    }
    case K_ALLTOALL:
    case K_ALLTOALLV:
    case K_ALLTOALLW: {
        int v = o->kind != K_ALLTOALL;
        size_t soff = 0, roff = 0;
        for (int i = 0; i < size; i++) {
            o->cnt[i] = v ? (int)((size_t)n + (size_t)((rank + 2 * i) % 3)) : n;
            o->rcnt[i] = v ? (int)((size_t)n + (size_t)((i + 2 * rank) % 3)) : n;
            o->types[i] = MPI_INT;
        }
        for (int i = 0; i < size; i++) {
            o->dsp[i] = (int)soff;
            soff += (size_t)o->cnt[i];
        }
        for (int k = 0; k < size; k++) { /* receive blocks reversed in the v/w forms */
            int i = v ? size - 1 - k : k;
            o->rdsp[i] = (int)roff;
            roff += (size_t)o->rcnt[i];
        }
        o->slen = soff;
        o->rlen = roff;
        o->sbuf = xints(o->slen);
        o->rbuf = xints(o->rlen);
        for (int d = 0; d < size; d++)
            for (int j = 0; j < o->cnt[d]; j++)
                o->sbuf[o->dsp[d] + j] = cu_val(rank, d, j + idx, round);
        if (o->kind == K_ALLTOALL)
            return MPI_Ialltoall(o->sbuf, n, MPI_INT, o->rbuf, n, MPI_INT, c, req);
        if (o->kind == K_ALLTOALLV)
            return MPI_Ialltoallv(o->sbuf, o->cnt, o->dsp, MPI_INT, o->rbuf, o->rcnt, o->rdsp,
                                  MPI_INT, c, req);
        /* Alltoallw: displacements in bytes */
        for (int i = 0; i < size; i++) {
            o->dsp[i] *= (int)sizeof(int);
            o->rdsp[i] *= (int)sizeof(int);
        }
        return MPI_Ialltoallw(o->sbuf, o->cnt, o->dsp, o->types, o->rbuf, o->rcnt, o->rdsp,
                              o->types, c, req);
    }
    case K_BARRIER:
        return MPI_Ibarrier(c, req);
    }
    return MPI_ERR_OTHER;
}

static void op_fail_first(const op_t *o, const int *exp, size_t len, const char *what)
{
    for (size_t k = 0; k < len; k++)
        if (o->rbuf[k] != exp[k]) {
            char s1[128], s2[128];
            CU_FAIL("%s (op %d, %d ints, root %d) on %s: %s int %zu: expected %s, got %s",
                    knames[o->kind], o->idx, o->n, o->root, cnames[o->ci], what, k,
                    cu_vstr(exp[k], s1, sizeof s1), cu_vstr(o->rbuf[k], s2, sizeof s2));
            return;
        }
}

static void op_check(op_t *o, int round)
{
    int ci = o->ci, rank = crank[ci], size = csize[ci], n = o->n, idx = o->idx;
    int *exp = xints(o->rlen);
    int check = 1;
    switch (o->kind) {
    case K_BCAST:
        for (int j = 0; j < n; j++)
            exp[j] = cu_val(o->root, idx, j, round);
        break;
    case K_REDUCE:
    case K_ALLREDUCE:
    case K_SCAN:
    case K_EXSCAN: {
        int hi = o->kind == K_SCAN ? rank : (o->kind == K_EXSCAN ? rank - 1 : size - 1);
        if ((o->kind == K_REDUCE && rank != o->root) || (o->kind == K_EXSCAN && rank == 0))
            check = 0;
        for (int j = 0; j < n && check; j++) {
            exp[j] = 0;
            for (int r = 0; r <= hi; r++)
                exp[j] += rval(r, j, idx, round);
        }
        break;
    }
    case K_RSB:
    case K_RS: {
        int off = 0;
        for (int i = 0; i < rank; i++)
            off += o->cnt[i];
        for (int j = 0; j < o->cnt[rank]; j++) {
            exp[j] = 0;
            for (int r = 0; r < size; r++)
                exp[j] += rval(r, off + j, idx, round);
        }
        break;
    }
    case K_GATHER:
    case K_GATHERV:
    case K_ALLGATHER:
    case K_ALLGATHERV:
        if (!o->rbuf) {
            check = 0;
            break;
        }
        for (int i = 0; i < size; i++)
            for (int j = 0; j < o->cnt[i]; j++)
                exp[o->dsp[i] + j] = cu_val(i, idx, j, round);
        break;
    case K_SCATTER:
    case K_SCATTERV:
        for (int j = 0; j < o->cnt[rank]; j++)
            exp[j] = cu_val(o->root, rank, j + idx, round);
        break;
    case K_ALLTOALL:
    case K_ALLTOALLV:
    case K_ALLTOALLW: {
        int scale = o->kind == K_ALLTOALLW ? (int)sizeof(int) : 1;
        for (int s = 0; s < size; s++)
            for (int j = 0; j < o->rcnt[s]; j++)
                exp[o->rdsp[s] / scale + j] = cu_val(s, rank, j + idx, round);
        break;
    }
    case K_BARRIER:
        check = 0;
        break;
    }
    if (check)
        op_fail_first(o, exp, o->rlen, "receive buffer");
    free(exp);
    free(o->sbuf);
    free(o->rbuf);
}

/* deterministic shuffle, different on each rank and round */
static void shuffle(int *a, int n, unsigned seed)
{
    for (int i = n - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 8) % (unsigned)(i + 1));
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* complete all n requests; the way depends on `how` */
static void complete_all(MPI_Request *reqs, int n, int how, unsigned seed)
{
    int *order = cu_xmalloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        order[i] = i;
    shuffle(order, n, seed);
    MPI_Request *perm = cu_xmalloc((size_t)n * sizeof(MPI_Request));
    for (int i = 0; i < n; i++)
        perm[i] = reqs[order[i]];
    double t0 = cu_now();
    int left = n, out = 0, flag = 0, idx = 0;
    int *idxs = cu_xmalloc((size_t)n * sizeof(int));
    switch (how) {
    case 0:
        cu_ok(MPI_Waitall(n, perm, MPI_STATUSES_IGNORE), "MPI_Waitall");
        break;
    case 1: /* Testsome polling */
        while (left > 0 && cu_now() - t0 < 60) {
            if (!cu_ok(MPI_Testsome(n, perm, &out, idxs, MPI_STATUSES_IGNORE), "MPI_Testsome"))
                break;
            if (out != MPI_UNDEFINED)
                left -= out;
        }
        break;
    case 2: /* Testany polling */
        while (left > 0 && cu_now() - t0 < 60) {
            if (!cu_ok(MPI_Testany(n, perm, &idx, &flag, MPI_STATUS_IGNORE), "MPI_Testany"))
                break;
            if (flag && idx != MPI_UNDEFINED)
                left--;
        }
        break;
    case 3: /* MPI_Test on each, last first, until all are done */
        while (left > 0 && cu_now() - t0 < 60) {
            for (int i = n - 1; i >= 0; i--) {
                if (perm[i] == MPI_REQUEST_NULL)
                    continue;
                if (!cu_ok(MPI_Test(&perm[i], &flag, MPI_STATUS_IGNORE), "MPI_Test")) {
                    left = -1;
                    break;
                }
                if (flag)
                    left--;
            }
        }
        break;
    default: /* Waitsome */
        while (left > 0) {
            if (!cu_ok(MPI_Waitsome(n, perm, &out, idxs, MPI_STATUSES_IGNORE), "MPI_Waitsome") ||
                out == MPI_UNDEFINED)
                break;
            left -= out;
        }
        break;
    }
    for (int i = 0; i < n; i++)
        if (perm[i] != MPI_REQUEST_NULL) {
            CU_FAIL("request %d of %d not complete after the completion loop (way %d)", order[i],
                    n, how);
            break;
        }
    free(order);
    free(perm);
    free(idxs);
}

int main(int argc, char **argv)
{
    cu_init(&argc, &argv);
    comms[0] = MPI_COMM_WORLD;
    cnames[0] = "WORLD";
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]));
    cnames[1] = "dup(WORLD)";
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, cu_wrank % 2, cu_wsize - cu_wrank, &comms[2]));
    cnames[2] = cu_wrank % 2 ? "split(odd)" : "split(even)";
    comms[TMP] = MPI_COMM_WORLD; /* a new duplicate each round */
    cnames[TMP] = "dup(WORLD), freed with operations pending";
    for (int ci = 0; ci < NCOMMS; ci++) {
        MPI_Comm_rank(comms[ci], &crank[ci]);
        MPI_Comm_size(comms[ci], &csize[ci]);
    }
    cu_coll = "stress";

    static op_t ops[NCOMMS][NOPS];
    static p2p_t msgs[NCOMMS][NOPS];
    MPI_Request reqs[NCOMMS * NOPS * 3];
    for (int round = 0; round < ROUNDS; round++) {
        int nreq = 0, nmsg[NCOMMS] = {0, 0, 0, 0};
        cu_iter = round;
        cu_mode = CU_NONBLOCKING;
        snprintf(cu_desc, sizeof cu_desc, "round %d", round);
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[TMP]));
        for (int s = 0; s < NOPS; s++) {
            for (int k = 0; k < NCOMMS; k++) {
                /* the communicators take turns in a rank-dependent order */
                int ci = (k + cu_wrank + s) % NCOMMS;
                if (ci == TMP && s >= NTMP)
                    continue;
                op_t *o = &ops[ci][s];
                o->ci = ci;
                o->idx = s;
                o->kind = (s + 5 * ci + round) % K_NKINDS;
                o->root = (s * 7 + round) % csize[ci];
                o->n = op_count(s + ci);
                MPI_Request *r = &reqs[nreq++];
                if (!cu_ok(op_start(o, round, r), knames[o->kind]))
                    *r = MPI_REQUEST_NULL;
                if ((s + ci) % 3 == 0) { /* a ring message on this communicator */
                    p2p_t *m = &msgs[ci][nmsg[ci]++];
                    int size = csize[ci], rank = crank[ci];
                    m->ci = ci;
                    m->step = s;
                    m->peer_from = (rank + size - 1) % size;
                    for (int j = 0; j < NP2P; j++) {
                        m->sbuf[j] = cu_val(rank, s % 32, j, round);
                        m->rbuf[j] = CU_SENT;
                    }
                    CHECK_MPI(MPI_Irecv(m->rbuf, NP2P, MPI_INT, m->peer_from, 100 + s, comms[ci],
                                        &reqs[nreq++]));
                    CHECK_MPI(MPI_Isend(m->sbuf, NP2P, MPI_INT, (rank + 1) % size, 100 + s,
                                        comms[ci], &reqs[nreq++]));
                }
            }
            /* the pending operations on a freed communicator complete normally */
            if (s == NTMP - 1 && !OMPI_BUG(1))
                CHECK_MPI(MPI_Comm_free(&comms[TMP]));
            /* halfway: a blocking collective on each communicator (in the same
               order everywhere), behind the outstanding nonblocking ones */
            if (s == NOPS / 2) {
                for (int ci = 0; ci < TMP; ci++) {
                    int x = crank[ci] + round, sum = -1, want = 0;
                    for (int r = 0; r < csize[ci]; r++)
                        want += r + round;
                    if (cu_ok(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, comms[ci]),
                              "MPI_Allreduce") &&
                        sum != want)
                        CU_FAIL("blocking MPI_Allreduce on %s amid pending operations gave %d, "
                                "expected %d",
                                cnames[ci], sum, want);
                }
            }
        }
        complete_all(reqs, nreq, (round + cu_wrank) % 5,
                     7919u * (unsigned)cu_wrank + (unsigned)round);
        if (OMPI_BUG(1))
            CHECK_MPI(MPI_Comm_free(&comms[TMP]));
        for (int ci = 0; ci < NCOMMS; ci++) {
            for (int s = 0; s < (ci == TMP ? NTMP : NOPS); s++)
                op_check(&ops[ci][s], round);
            for (int m = 0; m < nmsg[ci]; m++) {
                p2p_t *p = &msgs[ci][m];
                for (int j = 0; j < NP2P; j++)
                    if (p->rbuf[j] != cu_val(p->peer_from, p->step % 32, j, round)) {
                        char s1[128];
                        CU_FAIL("ring message (step %d) on %s: int %d: got %s", p->step,
                                cnames[ci], j, cu_vstr(p->rbuf[j], s1, sizeof s1));
                        break;
                    }
            }
        }
        cu_execs += TMP * NOPS + NTMP;
    }
    MPI_Comm_free(&comms[1]);
    MPI_Comm_free(&comms[2]);
    return cu_finish("coll_stress");
}
