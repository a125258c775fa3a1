/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* algorithms: BATON_COLL_GATHER=auto,binomial,linear */
/* MPI_Gather and MPI_Gatherv in their blocking, nonblocking and persistent
   forms (and the _c forms for some cases): two roots per case, taking
   turns among the first, middle and last rank, MPI_IN_PLACE at the root,
   counts 0, 1, 7, 1000 and a large one, with MPI_INT, a strided vector
   type, a resized struct type, and sender/receiver type maps that differ
   with the same type signature. Gatherv uses uneven counts (some ranks
   contribute nothing) and blocks in reverse rank order with gaps; gaps,
   derived-type holes and guards must keep their sentinels, send buffers
   must not change, and non-root ranks pass a NULL receive buffer. On
   MPI_COMM_WORLD and on a split communicator.

   Compiling with -DSKIP_MPICH_402_BUGS leaves out persistent Gather: MPICH
   4.0.2's MPI_Gather_init takes the send data when the request is
   initialised, not at each MPI_Start, and the root's own block is copied
   only then. */
#include "coll_util.h"
#include "coll_payload.h"

typedef struct {
    int v; /* Gatherv */
    const cu_pair *pr;
    int root, inplace;
    size_t mine; /* ints this rank sends */
    int scount;
    cu_blocks R; /* the root's receive blocks */
    cu_buf sbuf, rbuf;
} ga_case;

static void ga_fill(void *p, int iter)
{
    ga_case *c = p;
    cu_buf_sentinel(&c->sbuf);
    cu_put(c->sbuf.p, &cu_lay[c->pr->s], 0, c->mine, cu_rank, 0, iter);
    if (cu_rank == c->root) {
        cu_buf_sentinel(&c->rbuf);
        if (c->inplace)
            cu_blocks_put(c->rbuf.p, &c->R, cu_rank, cu_rank, 0, iter);
    }
}

static int ga_call(void *p, int mode, MPI_Request *req)
{
    ga_case *c = p;
    int isroot = cu_rank == c->root;
    const void *sp = (isroot && c->inplace) ? MPI_IN_PLACE : (const void *)c->sbuf.p;
    void *rp = isroot ? c->rbuf.p : NULL;
    MPI_Datatype st = cu_lay[c->pr->s].type, rt = cu_lay[c->pr->r].type;
    int sc = c->scount, rc = c->R.cnt[0], root = c->root;
    const int *rcs = c->R.cnt, *rds = c->R.disp;
    (void)rcs;
    (void)rds;
    if (!c->v) {
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Gather(sp, sc, st, rp, rc, rt, root, cu_comm);
        case CU_NONBLOCKING:
            return MPI_Igather(sp, sc, st, rp, rc, rt, root, cu_comm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Gather_init(sp, sc, st, rp, rc, rt, root, cu_comm, MPI_INFO_NULL, req);
        case CU_BLOCKING_C:
            return MPI_Gather_c(sp, sc, st, rp, rc, rt, root, cu_comm);
        case CU_NONBLOCKING_C:
            return MPI_Igather_c(sp, sc, st, rp, rc, rt, root, cu_comm, req);
        case CU_PERSISTENT_C:
            return MPI_Gather_init_c(sp, sc, st, rp, rc, rt, root, cu_comm, MPI_INFO_NULL, req);
#endif
        }
    } else {
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Gatherv(sp, sc, st, rp, rcs, rds, rt, root, cu_comm);
        case CU_NONBLOCKING:
            return MPI_Igatherv(sp, sc, st, rp, rcs, rds, rt, root, cu_comm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Gatherv_init(sp, sc, st, rp, rcs, rds, rt, root, cu_comm, MPI_INFO_NULL,
                                    req);
        case CU_BLOCKING_C:
            return MPI_Gatherv_c(sp, sc, st, rp, c->R.ccnt, c->R.cdisp, rt, root, cu_comm);
        case CU_NONBLOCKING_C:
            return MPI_Igatherv_c(sp, sc, st, rp, c->R.ccnt, c->R.cdisp, rt, root, cu_comm, req);
        case CU_PERSISTENT_C:
            return MPI_Gatherv_init_c(sp, sc, st, rp, c->R.ccnt, c->R.cdisp, rt, root, cu_comm,
                                      MPI_INFO_NULL, req);
#endif
        }
    }
    return MPI_ERR_OTHER;
}

static void ga_check(void *p, int iter)
{
    ga_case *c = p;
    if (cu_rank == c->root) {
        int *exp = cu_expect_new(&c->rbuf);
        for (int i = 0; i < cu_size; i++)
            cu_blocks_put(exp, &c->R, i, i, 0, iter);
        cu_expect_check("root's receive buffer", &c->rbuf, exp);
    }
    int *exp = cu_expect_new(&c->sbuf);
    cu_put(exp, &cu_lay[c->pr->s], 0, c->mine, cu_rank, 0, iter);
    cu_expect_check("send buffer (must not change)", &c->sbuf, exp);
}

static const cu_ops ga_ops = {ga_fill, ga_call, ga_check};

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
                    ga_case c;
                    c.v = v;
                    c.pr = pr;
                    c.root = roots[ri];
                    c.inplace = ip;
                    c.mine = nints[cu_rank];
                    c.scount = (int)(c.mine / (size_t)cu_lay[pr->s].ipe);
                    cu_blocks_make(&c.R, cu_size, nints, pr->r, NULL,
                                   v ? CU_REVERSE_GAPS : CU_PACKED);
                    cu_buf_alloc(&c.sbuf,
                                 (size_t)c.scount * (size_t)cu_lay[pr->s].ext);
                    cu_buf_alloc(&c.rbuf, cu_rank == c.root ? c.R.len : 0);
                    snprintf(cu_desc, sizeof cu_desc, "%s, %zu ints per rank%s, root %d%s",
                             pr->name, cnt * u, v ? " (uneven)" : "", c.root,
                             ip ? ", MPI_IN_PLACE at root" : "");
                    cu_run(v ? "Gatherv" : "Gather", &c, &ga_ops,
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
    return cu_finish("coll_gather");
}
