/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* algorithms: BATON_COLL_REDUCE_SCATTER=auto,reduce_scatterv,recursive_halving,pairwise */
/* MPI_Reduce_scatter_block and MPI_Reduce_scatter in their blocking,
   nonblocking and persistent forms (and the _c forms for some cases), with
   and without MPI_IN_PLACE (on all ranks). Kinds: SUM/MAX/MIN/PROD on
   MPI_INT and MPI_DOUBLE, BAND on MPI_UNSIGNED, MINLOC on MPI_DOUBLE_INT, a
   commutative user op on a resized struct type and a non-commutative user op
   (2x2 matrix product) on a contiguous type; blocks of 0, 1, 7, 1000 and
   20000 (for some kinds) elements per rank. Reduce_scatter uses uneven
   counts (some ranks get nothing). Rank r's block is the fold, in rank
   order, of elements [offset(r), offset(r) + count(r)) of every rank's
   input. With MPI_IN_PLACE the input is in the receive buffer and only the
   first count(r) elements are defined afterwards; guards, holes of the
   struct type and the padding of MPI_DOUBLE_INT must not change. On
   MPI_COMM_WORLD and on a split communicator (reversed rank order). */
#include "coll_util.h"
#include "coll_reduction.h"

typedef struct {
    int v, k, inplace;
    int cnt[CU_MAXP];
    MPI_Count ccnt[CU_MAXP];
    size_t off, total, mine;
    cu_rbuf sbuf, rbuf;
} rs_case;

static void rs_fill(void *p, int iter)
{
    rs_case *c = p;
    cu_rbuf_clear(&c->sbuf);
    cu_rbuf_clear(&c->rbuf);
    cu_rbuf_input(c->inplace ? &c->rbuf : &c->sbuf, cu_rank, 0, c->total, iter);
}

static int rs_call(void *p, int mode, MPI_Request *req)
{
    rs_case *c = p;
    const void *sp = c->inplace ? MPI_IN_PLACE : (const void *)c->sbuf.p;
    void *rp = c->rbuf.p;
    MPI_Datatype t = cu_rk[c->k].type;
    MPI_Op op = cu_rk[c->k].op;
    MPI_Comm cm = cu_comm;
    int n = c->cnt[0];
    if (!c->v) {
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Reduce_scatter_block(sp, rp, n, t, op, cm);
        case CU_NONBLOCKING:
            return MPI_Ireduce_scatter_block(sp, rp, n, t, op, cm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Reduce_scatter_block_init(sp, rp, n, t, op, cm, MPI_INFO_NULL, req);
        case CU_BLOCKING_C:
            return MPI_Reduce_scatter_block_c(sp, rp, n, t, op, cm);
        case CU_NONBLOCKING_C:
            return MPI_Ireduce_scatter_block_c(sp, rp, n, t, op, cm, req);
        case CU_PERSISTENT_C:
            return MPI_Reduce_scatter_block_init_c(sp, rp, n, t, op, cm, MPI_INFO_NULL, req);
#endif
        }
    } else {
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Reduce_scatter(sp, rp, c->cnt, t, op, cm);
        case CU_NONBLOCKING:
            return MPI_Ireduce_scatter(sp, rp, c->cnt, t, op, cm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Reduce_scatter_init(sp, rp, c->cnt, t, op, cm, MPI_INFO_NULL, req);
        case CU_BLOCKING_C:
            return MPI_Reduce_scatter_c(sp, rp, c->ccnt, t, op, cm);
        case CU_NONBLOCKING_C:
            return MPI_Ireduce_scatter_c(sp, rp, c->ccnt, t, op, cm, req);
        case CU_PERSISTENT_C:
            return MPI_Reduce_scatter_init_c(sp, rp, c->ccnt, t, op, cm, MPI_INFO_NULL, req);
#endif
        }
    }
    return MPI_ERR_OTHER;
}

static void rs_check(void *p, int iter)
{
    rs_case *c = p;
    cu_rbuf_check("result block", &c->rbuf, c->mine, (long)c->off, 0, cu_size - 1, iter);
    cu_rbuf_check_untouched("receive buffer", &c->rbuf, c->mine);
    if (!c->inplace) {
        cu_rbuf_check("send buffer (must not change)", &c->sbuf, c->total, 0, cu_rank, cu_rank,
                      iter);
        cu_rbuf_check_untouched("send buffer", &c->sbuf, c->total);
    }
}

static const cu_ops rs_ops = {rs_fill, rs_call, rs_check};

static void run_all(int full)
{
    cu_rcell cells[CU_MAXRCELLS];
    int ncells = cu_rgrid(full, 20000, cells);
    for (int v = 0; v < 2; v++) {
        for (int i = 0; i < ncells; i++) {
            for (int ip = 0; ip < 2; ip++) {
                if (!(cells[i].inplace & (1 << ip)))
                    continue;
                rs_case c;
                c.v = v;
                c.k = cells[i].kind;
                c.inplace = ip;
                c.total = c.off = 0;
                for (int r = 0; r < cu_size; r++) {
                    /* uneven: rank r gets the count cu_vcount gives rank r+2 */
                    size_t n = v ? cu_vcount(cells[i].len, (r + 2) % cu_size) : cells[i].len;
                    c.cnt[r] = (int)n;
                    c.ccnt[r] = (MPI_Count)n;
                    if (r < cu_rank)
                        c.off += n;
                    c.total += n;
                }
                c.mine = (size_t)c.cnt[cu_rank];
                cu_rbuf_alloc(&c.sbuf, c.k, ip ? 0 : c.total);
                cu_rbuf_alloc(&c.rbuf, c.k, ip ? c.total : c.mine);
                snprintf(cu_desc, sizeof cu_desc, "%s, %s%zu elements per rank%s",
                         cu_rk[c.k].name, v ? "about " : "", cells[i].len,
                         ip ? ", MPI_IN_PLACE" : "");
                cu_run(v ? "Reduce_scatter" : "Reduce_scatter_block", &c, &rs_ops,
                       cells[i].len == 7 ? CU_WITH_C : 0);
                cu_rbuf_free(&c.sbuf);
                cu_rbuf_free(&c.rbuf);
            }
        }
    }
}

int main(int argc, char **argv)
{
    cu_init(&argc, &argv);
    cu_make_rkinds();
    run_all(1);
    const char *sname;
    MPI_Comm split = cu_split_comm(&sname);
    cu_set_comm(split, sname);
    run_all(0);
    cu_set_comm(MPI_COMM_WORLD, "WORLD");
    MPI_Comm_free(&split);
    cu_free_rkinds();
    return cu_finish("coll_reduce_scatter");
}
