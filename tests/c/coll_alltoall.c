/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* algorithms: BATON_COLL_ALLTOALL=auto,pairwise,bruck,mesh,linear,shm */
/* algorithms: BATON_COLL_ALLTOALLV=pairwise,linear */
/* MPI_Alltoall, MPI_Alltoallv and MPI_Alltoallw in their blocking,
   nonblocking and persistent forms (and the _c forms for some cases):
   MPI_IN_PLACE on all ranks or none, counts 0, 1, 7, 1000 and a large one.
   Alltoall and Alltoallv run with MPI_INT, a strided vector type, a resized
   struct type, and sender/receiver type maps that differ with the same type
   signature. Alltoallv uses uneven counts (zero for some pairs) with send
   blocks in rank order and receive blocks in reverse order, both with gaps
   (symmetric counts for MPI_IN_PLACE, as the standard requires). Alltoallw
   uses a different datatype for each peer, on both sides (MPI_INT, vector,
   resized struct, contiguous(4)), at byte displacements with gaps; the two
   sides of a pair use different type maps (same signature), except with
   MPI_IN_PLACE, where the standard asks for the same type map. Block d of
   rank r carries val(r, d, ...), so every misrouted block is seen. Gaps,
   holes of derived types and guards must keep their sentinels; send buffers
   must not change. On MPI_COMM_WORLD and on a split communicator.

   Compiling with -DSKIP_MPICH_402_BUGS leaves out nonblocking and persistent
   Alltoallw with MPI_IN_PLACE: MPICH 4.0.2 (whose blocking form gets these
   cases right) mixes up the per-peer datatypes there, delivering wrong data
   or failing with "Message truncated". With -DSKIP_OMPI_414_BUGS:
   nonblocking Alltoallv and Alltoallw with MPI_IN_PLACE, where Open MPI
   4.1.4 delivers wrong blocks (derived datatypes, or a few thousand ints
   per peer on 4 or more ranks). */
#include "coll_util.h"
#include "coll_payload.h"

enum { AA, AAV, AAW };
static const char *const aa_names[] = {"Alltoall", "Alltoallv", "Alltoallw"};

typedef struct {
    int kind;
    const cu_pair *pr; /* Alltoall(v) */
    int inplace;
    cu_blocks S, R;
    MPI_Datatype st[CU_MAXP], rt[CU_MAXP]; /* Alltoallw */
    cu_buf sbuf, rbuf;
} aa_case;

static void aa_fill(void *p, int iter)
{
    aa_case *c = p;
    cu_buf_sentinel(&c->sbuf);
    cu_buf_sentinel(&c->rbuf);
    for (int d = 0; d < cu_size; d++) {
        if (c->inplace)
            cu_blocks_put(c->rbuf.p, &c->R, d, cu_rank, d, iter);
        else
            cu_blocks_put(c->sbuf.p, &c->S, d, cu_rank, d, iter);
    }
}

static int aa_call(void *p, int mode, MPI_Request *req)
{
    aa_case *c = p;
    const void *sp = c->inplace ? MPI_IN_PLACE : (const void *)c->sbuf.p;
    void *rp = c->rbuf.p;
    const cu_blocks *S = &c->S, *R = &c->R;
    MPI_Comm cm = cu_comm;
    MPI_Info in = MPI_INFO_NULL;
    if (c->kind == AA) {
        MPI_Datatype st = cu_lay[c->pr->s].type, rt = cu_lay[c->pr->r].type;
        int sc = S->cnt[0], rc = R->cnt[0];
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Alltoall(sp, sc, st, rp, rc, rt, cm);
        case CU_NONBLOCKING:
            return MPI_Ialltoall(sp, sc, st, rp, rc, rt, cm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Alltoall_init(sp, sc, st, rp, rc, rt, cm, in, req);
        case CU_BLOCKING_C:
            return MPI_Alltoall_c(sp, sc, st, rp, rc, rt, cm);
        case CU_NONBLOCKING_C:
            return MPI_Ialltoall_c(sp, sc, st, rp, rc, rt, cm, req);
        case CU_PERSISTENT_C:
            return MPI_Alltoall_init_c(sp, sc, st, rp, rc, rt, cm, in, req);
#endif
        }
    } else if (c->kind == AAV) {
        MPI_Datatype st = cu_lay[c->pr->s].type, rt = cu_lay[c->pr->r].type;
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Alltoallv(sp, S->cnt, S->disp, st, rp, R->cnt, R->disp, rt, cm);
        case CU_NONBLOCKING:
            return MPI_Ialltoallv(sp, S->cnt, S->disp, st, rp, R->cnt, R->disp, rt, cm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Alltoallv_init(sp, S->cnt, S->disp, st, rp, R->cnt, R->disp, rt, cm, in,
                                      req);
        case CU_BLOCKING_C:
            return MPI_Alltoallv_c(sp, S->ccnt, S->cdisp, st, rp, R->ccnt, R->cdisp, rt, cm);
        case CU_NONBLOCKING_C:
            return MPI_Ialltoallv_c(sp, S->ccnt, S->cdisp, st, rp, R->ccnt, R->cdisp, rt, cm,
                                    req);
        case CU_PERSISTENT_C:
            return MPI_Alltoallv_init_c(sp, S->ccnt, S->cdisp, st, rp, R->ccnt, R->cdisp, rt, cm,
                                        in, req);
#endif
        }
    } else {
        const MPI_Datatype *st = c->st, *rt = c->rt;
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Alltoallw(sp, S->cnt, S->wdisp, st, rp, R->cnt, R->wdisp, rt, cm);
        case CU_NONBLOCKING:
            return MPI_Ialltoallw(sp, S->cnt, S->wdisp, st, rp, R->cnt, R->wdisp, rt, cm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Alltoallw_init(sp, S->cnt, S->wdisp, st, rp, R->cnt, R->wdisp, rt, cm, in,
                                      req);
        case CU_BLOCKING_C:
            return MPI_Alltoallw_c(sp, S->ccnt, S->bdisp, st, rp, R->ccnt, R->bdisp, rt, cm);
        case CU_NONBLOCKING_C:
            return MPI_Ialltoallw_c(sp, S->ccnt, S->bdisp, st, rp, R->ccnt, R->bdisp, rt, cm,
                                    req);
        case CU_PERSISTENT_C:
            return MPI_Alltoallw_init_c(sp, S->ccnt, S->bdisp, st, rp, R->ccnt, R->bdisp, rt, cm,
                                        in, req);
#endif
        }
    }
    (void)in;
    return MPI_ERR_OTHER;
}

static void aa_check(void *p, int iter)
{
    aa_case *c = p;
    int *exp = cu_expect_new(&c->rbuf);
    for (int s = 0; s < cu_size; s++)
        cu_blocks_put(exp, &c->R, s, s, cu_rank, iter);
    cu_expect_check("receive buffer", &c->rbuf, exp);
    exp = cu_expect_new(&c->sbuf);
    if (!c->inplace)
        for (int d = 0; d < cu_size; d++)
            cu_blocks_put(exp, &c->S, d, cu_rank, d, iter);
    cu_expect_check("send buffer (must not change)", &c->sbuf, exp);
}

static const cu_ops aa_ops = {aa_fill, aa_call, aa_check};

/* units sent from rank r to rank d in the v/w cases */
static size_t a2a_units(size_t c, int r, int d, int symmetric)
{
    if (c == 0 || (r + d) % 3 == 0)
        return 0;
    return symmetric ? c + (size_t)(r + d) : c + (size_t)r + 2 * (size_t)d;
}

/* Alltoallw layouts: sender r to d, receiver d from r */
static int w_slay(int r, int d)
{
    static const int l[3] = {CU_L_INT, CU_L_VEC, CU_L_STRUCT};
    return l[(r + d) % 3];
}

/* with MPI_IN_PLACE the standard asks for the same type map on both sides
   of each pair, so the choice is then symmetric in (d, r) */
static int w_rlay(int d, int r, int inplace)
{
    static const int l[4] = {CU_L_INT, CU_L_VEC, CU_L_STRUCT, CU_L_QUAD};
    return l[(inplace ? d + r : 2 * d + r) % 4];
}

static void run_case(aa_case *c, const char *what, int flags)
{
    cu_buf_alloc(&c->sbuf, c->inplace ? 0 : c->S.len);
    cu_buf_alloc(&c->rbuf, c->R.len);
    snprintf(cu_desc, sizeof cu_desc, "%s%s", what, c->inplace ? ", MPI_IN_PLACE" : "");
    cu_run(aa_names[c->kind], c, &aa_ops, flags);
    cu_buf_free(&c->sbuf);
    cu_buf_free(&c->rbuf);
}

static void run_all(int full)
{
    size_t sn[CU_MAXP], rn[CU_MAXP];
    char what[160];
    cu_cell cells[CU_MAXCELLS];
    for (int kind = AA; kind <= AAW; kind++) {
        int ncells = cu_grid(full, kind, 5000, 2000, cells);
        for (int k = 0; k < ncells; k++) {
            const cu_pair *pr = &cu_pairs[cells[k].pair];
            size_t cnt = cells[k].count;
            /* Alltoallw: one pass per count, types chosen per peer */
            if (kind == AAW && (cells[k].pair != 0 && !cells[k].big))
                continue;
            if (kind == AAW && cells[k].big)
                cnt = 1500;
            size_t u = kind == AAW ? 4 : (size_t)cu_unit(pr);
            for (int ip = 0; ip < 2; ip++) {
                aa_case c;
                c.kind = kind;
                c.pr = pr;
                c.inplace = ip;
                for (int i = 0; i < cu_size; i++) {
                    sn[i] = (kind == AA ? cnt : a2a_units(cnt, cu_rank, i, ip)) * u;
                    rn[i] = (kind == AA ? cnt : a2a_units(cnt, i, cu_rank, ip)) * u;
                }
                if (kind == AAW) {
                    int sl[CU_MAXP], rl[CU_MAXP];
                    for (int i = 0; i < cu_size; i++) {
                        sl[i] = w_slay(cu_rank, i);
                        rl[i] = w_rlay(cu_rank, i, ip);
                        c.st[i] = cu_lay[sl[i]].type;
                        c.rt[i] = cu_lay[rl[i]].type;
                    }
                    cu_blocks_make(&c.S, cu_size, sn, 0, sl, CU_FORWARD_GAPS);
                    cu_blocks_make(&c.R, cu_size, rn, 0, rl, CU_REVERSE_GAPS);
                    snprintf(what, sizeof what,
                             "a type per peer (MPI_INT, vector, struct, contiguous(4)), "
                             "about %zu ints per peer",
                             cnt * u);
                } else {
                    cu_blocks_make(&c.S, cu_size, sn, pr->s, NULL,
                                   kind == AA ? CU_PACKED : CU_FORWARD_GAPS);
                    cu_blocks_make(&c.R, cu_size, rn, pr->r, NULL,
                                   kind == AA ? CU_PACKED : CU_REVERSE_GAPS);
                    snprintf(what, sizeof what, "%s, %s%zu ints per peer", pr->name,
                             kind == AA ? "" : "about ", cnt * u);
                }
                int flags = cnt == 7 ? CU_WITH_C : 0;
                if (MPICH_BUG(kind == AAW && ip))
                    flags |= CU_NO_NONBLOCKING | CU_NO_PERSISTENT;
                if (OMPI_BUG(kind != AA && ip))
                    flags |= CU_NO_NONBLOCKING;
                run_case(&c, what, flags);
            }
        }
    }
}

int main(int argc, char **argv)
{
    cu_init(&argc, &argv);
    cu_make_layouts();
    run_all(1);
    const char *sname;
    MPI_Comm split = cu_split_comm(&sname);
    cu_set_comm(split, sname);
    run_all(0);
    cu_set_comm(MPI_COMM_WORLD, "WORLD");
    MPI_Comm_free(&split);
    cu_free_layouts();
    return cu_finish("coll_alltoall");
}
