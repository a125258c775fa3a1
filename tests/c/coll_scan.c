/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* algorithms: BATON_COLL_SCAN=auto,recursive_doubling,linear */
/* MPI_Scan and MPI_Exscan in their blocking, nonblocking and persistent
   forms (and the _c forms for some cases), with and without MPI_IN_PLACE
   (on all ranks). Kinds: SUM/MAX/MIN/PROD on MPI_INT and MPI_DOUBLE, BAND
   on MPI_UNSIGNED, MINLOC on MPI_DOUBLE_INT, a commutative user op on a
   resized struct type and a non-commutative user op (2x2 matrix product:
   the prefix must be taken in rank order) on a contiguous type; lengths 0,
   1, 7, 1000 and 100000 (for some kinds). Rank r must get the fold over
   ranks 0..r (Scan) or 0..r-1 (Exscan; rank 0's result is undefined and
   not checked). Guards, holes of the struct type, the padding of
   MPI_DOUBLE_INT and send buffers must not change. On MPI_COMM_WORLD and on
   a split communicator (reversed rank order). */
#include "coll_util.h"
#include "coll_reduction.h"

typedef struct {
    int ex, k, inplace;
    size_t n;
    cu_rbuf sbuf, rbuf;
} sn_case;

static void sn_fill(void *p, int iter)
{
    sn_case *c = p;
    cu_rbuf_clear(&c->sbuf);
    cu_rbuf_clear(&c->rbuf);
    cu_rbuf_input(c->inplace ? &c->rbuf : &c->sbuf, cu_rank, 0, c->n, iter);
}

static int sn_call(void *p, int mode, MPI_Request *req)
{
    sn_case *c = p;
    const void *sp = c->inplace ? MPI_IN_PLACE : (const void *)c->sbuf.p;
    void *rp = c->rbuf.p;
    MPI_Datatype t = cu_rk[c->k].type;
    MPI_Op op = cu_rk[c->k].op;
    MPI_Comm cm = cu_comm;
    int n = (int)c->n;
    if (!c->ex) {
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Scan(sp, rp, n, t, op, cm);
        case CU_NONBLOCKING:
            return MPI_Iscan(sp, rp, n, t, op, cm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Scan_init(sp, rp, n, t, op, cm, MPI_INFO_NULL, req);
        case CU_BLOCKING_C:
            return MPI_Scan_c(sp, rp, n, t, op, cm);
        case CU_NONBLOCKING_C:
            return MPI_Iscan_c(sp, rp, n, t, op, cm, req);
        case CU_PERSISTENT_C:
            return MPI_Scan_init_c(sp, rp, n, t, op, cm, MPI_INFO_NULL, req);
#endif
        }
    } else {
        switch (mode) {
        case CU_BLOCKING:
            return MPI_Exscan(sp, rp, n, t, op, cm);
        case CU_NONBLOCKING:
            return MPI_Iexscan(sp, rp, n, t, op, cm, req);
#if CU_MPI4
        case CU_PERSISTENT:
            return MPI_Exscan_init(sp, rp, n, t, op, cm, MPI_INFO_NULL, req);
        case CU_BLOCKING_C:
            return MPI_Exscan_c(sp, rp, n, t, op, cm);
        case CU_NONBLOCKING_C:
            return MPI_Iexscan_c(sp, rp, n, t, op, cm, req);
        case CU_PERSISTENT_C:
            return MPI_Exscan_init_c(sp, rp, n, t, op, cm, MPI_INFO_NULL, req);
#endif
        }
    }
    return MPI_ERR_OTHER;
}

static void sn_check(void *p, int iter)
{
    sn_case *c = p;
    if (!c->ex)
        cu_rbuf_check("prefix result", &c->rbuf, c->n, 0, 0, cu_rank, iter);
    else if (cu_rank > 0)
        cu_rbuf_check("exclusive prefix result", &c->rbuf, c->n, 0, 0, cu_rank - 1, iter);
    cu_rbuf_check_untouched("receive buffer", &c->rbuf, c->n);
    if (!c->inplace) {
        cu_rbuf_check("send buffer (must not change)", &c->sbuf, c->n, 0, cu_rank, cu_rank, iter);
        cu_rbuf_check_untouched("send buffer", &c->sbuf, c->n);
    }
}

static const cu_ops sn_ops = {sn_fill, sn_call, sn_check};

static void run_all(int full)
{
    cu_rcell cells[CU_MAXRCELLS];
    int ncells = cu_rgrid(full, 100000, cells);
    for (int ex = 0; ex < 2; ex++) {
        for (int i = 0; i < ncells; i++) {
            for (int ip = 0; ip < 2; ip++) {
                if (!(cells[i].inplace & (1 << ip)))
                    continue;
                sn_case c;
                c.ex = ex;
                c.k = cells[i].kind;
                c.n = cells[i].len;
                c.inplace = ip;
                cu_rbuf_alloc(&c.sbuf, c.k, ip ? 0 : c.n);
                cu_rbuf_alloc(&c.rbuf, c.k, c.n);
                snprintf(cu_desc, sizeof cu_desc, "%s, %zu elements%s", cu_rk[c.k].name, c.n,
                         ip ? ", MPI_IN_PLACE" : "");
                cu_run(ex ? "Exscan" : "Scan", &c, &sn_ops, c.n == 7 ? CU_WITH_C : 0);
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
    return cu_finish("coll_scan");
}
