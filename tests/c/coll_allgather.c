/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* algorithms: BATON_COLL_ALLGATHER=auto,ring,bruck,recursive_doubling,shm */
/* algorithms: BATON_COLL_ALLGATHERV=ring,linear */
/* MPI_Allgather and MPI_Allgatherv in their blocking, nonblocking and
   persistent forms (and the _c forms for some cases): MPI_IN_PLACE on all
   ranks or none, counts 0, 1, 7, 1000 and a large one, with MPI_INT, a
   strided vector type, a resized struct type, and sender/receiver type maps
   that differ with the same type signature. Allgatherv uses uneven counts
   (some ranks contribute nothing) and blocks in reverse rank order with gaps.
   Gaps, holes of derived types and guards must keep their sentinels; send
   buffers must not change. On MPI_COMM_WORLD and on a split communicator.

   Compiling with -DSKIP_MPICH_402_BUGS leaves out what MPICH 4.0.2 gets
   wrong: persistent Allgather (MPI_Allgather_init takes the send data when
   the request is initialised, not at each start); Allgatherv on one rank
   without MPI_IN_PLACE (displacements ignored: the block lands at offset 0). */
#include "coll_util.h"
#include "coll_payload.h"

typedef struct {
    int v; /* Allgatherv */
    const cu_pair *pr;
    int inplace;
    size_t mine;
    int scount;
    cu_blocks R;
    cu_buf sbuf, rbuf;
} ag_case;

static void ag_fill(void *p, int iter)
{
    ag_case *c = p;
    cu_buf_sentinel(&c->sbuf);
    cu_buf_sentinel(&c->rbuf);
    if (c->inplace)
        cu_blocks_put(c->rbuf.p, &c->R, cu_rank, cu_rank, 0, iter);
    else
        cu_put(c->sbuf.p, &cu_lay[c->pr->s], 0, c->mine, cu_rank, 0, iter);
}

static int ag_call(void *p, int mode, MPI_Request *req)
{
    ag_case *c = p;
    const void *sp = c->inplace ? MPI_IN_PLACE : (const void *)c->sbuf.p;
    void *rp = c->rbuf.p;
    MPI_Datatype st = cu_lay[c->pr->s].type, rt = cu_lay[c->pr->r].type;
    int sc = c->scount, rc = c->R.cnt[0];
    const int *rcs = c->R.cnt, *rds = c->R.disp;
    if (!c->v) {
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Allgather(sp, sc, st, rp, rc, rt, cu_comm);
        case CU_NONBLOCKING:
            return MPI_Iallgather(sp, sc, st, rp, rc, rt, cu_comm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Allgather_init(sp, sc, st, rp, rc, rt, cu_comm, MPI_INFO_NULL, req);
        case CU_BLOCKING_C:
            return MPI_Allgather_c(sp, sc, st, rp, rc, rt, cu_comm);
        case CU_NONBLOCKING_C:
            return MPI_Iallgather_c(sp, sc, st, rp, rc, rt, cu_comm, req);
        case CU_PERSISTENT_C:
            return MPI_Allgather_init_c(sp, sc, st, rp, rc, rt, cu_comm, MPI_INFO_NULL, req);
#endif
        }
    } else {
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Allgatherv(sp, sc, st, rp, rcs, rds, rt, cu_comm);
        case CU_NONBLOCKING:
            return MPI_Iallgatherv(sp, sc, st, rp, rcs, rds, rt, cu_comm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Allgatherv_init(sp, sc, st, rp, rcs, rds, rt, cu_comm, MPI_INFO_NULL, req);
        case CU_BLOCKING_C:
            return MPI_Allgatherv_c(sp, sc, st, rp, c->R.ccnt, c->R.cdisp, rt, cu_comm);
        case CU_NONBLOCKING_C:
            return MPI_Iallgatherv_c(sp, sc, st, rp, c->R.ccnt, c->R.cdisp, rt, cu_comm, req);
        case CU_PERSISTENT_C:
            return MPI_Allgatherv_init_c(sp, sc, st, rp, c->R.ccnt, c->R.cdisp, rt, cu_comm,
                                         MPI_INFO_NULL, req);
#endif
        }
    }
    (void)rcs;
    (void)rds;
    return MPI_ERR_OTHER;
}

static void ag_check(void *p, int iter)
{
    ag_case *c = p;
    int *exp = cu_expect_new(&c->rbuf);
    for (int i = 0; i < cu_size; i++)
        cu_blocks_put(exp, &c->R, i, i, 0, iter);
    cu_expect_check("receive buffer", &c->rbuf, exp);
    exp = cu_expect_new(&c->sbuf);
    if (!c->inplace)
        cu_put(exp, &cu_lay[c->pr->s], 0, c->mine, cu_rank, 0, iter);
    cu_expect_check("send buffer (must not change)", &c->sbuf, exp);
}

static const cu_ops ag_ops = {ag_fill, ag_call, ag_check};

static void run_all(int full)
{
    size_t nints[CU_MAXP];
    cu_cell cells[CU_MAXCELLS];
    for (int v = 0; v < 2; v++) {
        int ncells = cu_grid(full, v, 30000, 10000, cells);
        for (int k = 0; k < ncells; k++) {
            const cu_pair *pr = &cu_pairs[cells[k].pair];
            size_t u = (size_t)cu_unit(pr), cnt = cells[k].count;
            for (int i = 0; i < cu_size; i++)
                nints[i] = (v ? cu_vcount(cnt, i) : cnt) * u;
            for (int ip = 0; ip < 2; ip++) {
                if (MPICH_BUG(v && cu_size == 1 && !ip))
                    continue;
                ag_case c;
                c.v = v;
                c.pr = pr;
                c.inplace = ip;
                c.mine = nints[cu_rank];
                c.scount = (int)(c.mine / (size_t)cu_lay[pr->s].ipe);
                cu_blocks_make(&c.R, cu_size, nints, pr->r, NULL, v ? CU_REVERSE_GAPS : CU_PACKED);
                cu_buf_alloc(&c.sbuf, (size_t)c.scount * (size_t)cu_lay[pr->s].ext);
                cu_buf_alloc(&c.rbuf, c.R.len);
                snprintf(cu_desc, sizeof cu_desc, "%s, %zu ints per rank%s%s", pr->name, cnt * u,
                         v ? " (uneven)" : "", ip ? ", MPI_IN_PLACE" : "");
                cu_run(v ? "Allgatherv" : "Allgather", &c, &ag_ops,
                       (cnt == 7 ? CU_WITH_C : 0) | (MPICH_BUG(!v) ? CU_NO_PERSISTENT : 0));
                cu_buf_free(&c.sbuf);
                cu_buf_free(&c.rbuf);
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
    return cu_finish("coll_allgather");
}
