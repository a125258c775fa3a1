/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* algorithms: BATON_COLL_SCATTER=auto,binomial,linear */
/* MPI_Scatter and MPI_Scatterv in their blocking, nonblocking and persistent
   forms (and the _c forms for some cases): two roots per case, taking
   turns among the first, middle and last rank, MPI_IN_PLACE as the root's
   receive buffer, counts 0, 1, 7, 1000 and a large one, with MPI_INT, a
   strided vector type, a resized struct type, and sender/receiver type
   maps that differ with the same type signature. Scatterv uses uneven
   counts (some ranks get nothing) and blocks in reverse rank order with
   gaps. Receive buffers start as sentinels (holes of derived types and
   guards must keep them), the root's send buffer must not change (with
   MPI_IN_PLACE its own block stays where it is), and non-root ranks pass a
   NULL send buffer. On MPI_COMM_WORLD and on a split communicator.

   Compiling with -DSKIP_MPICH_402_BUGS leaves out persistent Scatter: MPICH
   4.0.2's MPI_Scatter_init delivers data only at the first start (and on 3
   ranks a restart fails with "Invalid communicator"). */
#include "coll_util.h"
#include "coll_payload.h"

typedef struct {
    int v; /* Scatterv */
    const cu_pair *pr;
    int root, inplace;
    size_t mine; /* ints this rank receives */
    int rcount;
    cu_blocks S; /* the root's send blocks */
    cu_buf sbuf, rbuf;
} sc_case;

static void sc_fill(void *p, int iter)
{
    sc_case *c = p;
    cu_buf_sentinel(&c->rbuf);
    if (cu_rank == c->root) {
        cu_buf_sentinel(&c->sbuf);
        for (int i = 0; i < cu_size; i++)
            cu_blocks_put(c->sbuf.p, &c->S, i, c->root, i, iter);
    }
}

static int sc_call(void *p, int mode, MPI_Request *req)
{
    sc_case *c = p;
    int isroot = cu_rank == c->root;
    const void *sp = isroot ? (const void *)c->sbuf.p : NULL;
    void *rp = (isroot && c->inplace) ? MPI_IN_PLACE : (void *)c->rbuf.p;
    MPI_Datatype st = cu_lay[c->pr->s].type, rt = cu_lay[c->pr->r].type;
    int sc = c->S.cnt[0], rc = c->rcount, root = c->root;
    const int *scs = c->S.cnt, *sds = c->S.disp;
    if (!c->v) {
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Scatter(sp, sc, st, rp, rc, rt, root, cu_comm);
        case CU_NONBLOCKING:
            return MPI_Iscatter(sp, sc, st, rp, rc, rt, root, cu_comm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Scatter_init(sp, sc, st, rp, rc, rt, root, cu_comm, MPI_INFO_NULL, req);
        case CU_BLOCKING_C:
            return MPI_Scatter_c(sp, sc, st, rp, rc, rt, root, cu_comm);
        case CU_NONBLOCKING_C:
            return MPI_Iscatter_c(sp, sc, st, rp, rc, rt, root, cu_comm, req);
        case CU_PERSISTENT_C:
            return MPI_Scatter_init_c(sp, sc, st, rp, rc, rt, root, cu_comm, MPI_INFO_NULL, req);
#endif
        }
    } else {
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Scatterv(sp, scs, sds, st, rp, rc, rt, root, cu_comm);
        case CU_NONBLOCKING:
            return MPI_Iscatterv(sp, scs, sds, st, rp, rc, rt, root, cu_comm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Scatterv_init(sp, scs, sds, st, rp, rc, rt, root, cu_comm, MPI_INFO_NULL,
                                     req);
        case CU_BLOCKING_C:
            return MPI_Scatterv_c(sp, c->S.ccnt, c->S.cdisp, st, rp, rc, rt, root, cu_comm);
        case CU_NONBLOCKING_C:
            return MPI_Iscatterv_c(sp, c->S.ccnt, c->S.cdisp, st, rp, rc, rt, root, cu_comm,
                                   req);
        case CU_PERSISTENT_C:
            return MPI_Scatterv_init_c(sp, c->S.ccnt, c->S.cdisp, st, rp, rc, rt, root, cu_comm,
                                       MPI_INFO_NULL, req);
#endif
        }
    }
    (void)scs;
    (void)sds;
    return MPI_ERR_OTHER;
}

static void sc_check(void *p, int iter)
{
    sc_case *c = p;
    int isroot = cu_rank == c->root;
    int *exp = cu_expect_new(&c->rbuf);
    if (!(isroot && c->inplace))
        cu_put(exp, &cu_lay[c->pr->r], 0, c->mine, c->root, cu_rank, iter);
    cu_expect_check(isroot && c->inplace ? "receive buffer (unused with MPI_IN_PLACE)"
                                         : "receive buffer",
                    &c->rbuf, exp);
    if (isroot) {
        exp = cu_expect_new(&c->sbuf);
        for (int i = 0; i < cu_size; i++)
            cu_blocks_put(exp, &c->S, i, c->root, i, iter);
        cu_expect_check("root's send buffer (must not change)", &c->sbuf, exp);
    }
}

static const cu_ops sc_ops = {sc_fill, sc_call, sc_check};

static void run_all(int full)
{
    size_t nints[CU_MAXP];
    cu_cell cells[CU_MAXCELLS];
    int roots[3];
    for (int v = 0; v < 2; v++) {
        int ncells = cu_grid(full, v, 30000, 10000, cells);
        for (int k = 0; k < ncells; k++) {
            const cu_pair *pr = &cu_pairs[cells[k].pair];
            size_t u = (size_t)cu_unit(pr), cnt = cells[k].count;
            int nroots = cu_roots(k + v, roots);
            if (cells[k].big)
                nroots = 1;
            for (int i = 0; i < cu_size; i++)
                nints[i] = (v ? cu_vcount(cnt, i) : cnt) * u;
            for (int ri = 0; ri < nroots; ri++) {
                for (int ip = 0; ip < 2; ip++) {
                    sc_case c;
                    c.v = v;
                    c.pr = pr;
                    c.root = roots[ri];
                    c.inplace = ip;
                    c.mine = nints[cu_rank];
                    c.rcount = (int)(c.mine / (size_t)cu_lay[pr->r].ipe);
                    cu_blocks_make(&c.S, cu_size, nints, pr->s, NULL,
                                   v ? CU_REVERSE_GAPS : CU_PACKED);
                    cu_buf_alloc(&c.rbuf, (size_t)c.rcount * (size_t)cu_lay[pr->r].ext);
                    cu_buf_alloc(&c.sbuf, cu_rank == c.root ? c.S.len : 0);
                    snprintf(cu_desc, sizeof cu_desc, "%s, %zu ints per rank%s, root %d%s",
                             pr->name, cnt * u, v ? " (uneven)" : "", c.root,
                             ip ? ", MPI_IN_PLACE at root" : "");
                    cu_run(v ? "Scatterv" : "Scatter", &c, &sc_ops,
                           (cnt == 7 ? CU_WITH_C : 0) |
                               (MPICH_BUG(!v) ? CU_NO_PERSISTENT : 0));
                    cu_buf_free(&c.sbuf);
                    cu_buf_free(&c.rbuf);
                }
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
    return cu_finish("coll_scatter");
}
