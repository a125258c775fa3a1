/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* algorithms: BATON_COLL_ALLREDUCE=auto,recursive_doubling,rabenseifner,ring,reduce_bcast,shm */
/* MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init (and the _c forms for
   some cases), with and without MPI_IN_PLACE: SUM/MAX/MIN/PROD on MPI_INT and
   MPI_DOUBLE, BAND on MPI_UNSIGNED, MINLOC on MPI_DOUBLE_INT (with ties), a
   commutative user op on a resized struct type (holes in the type map) and a
   non-commutative user op (2x2 matrix product, where the rank order
   matters) on a contiguous type; lengths 0, 1, 7, 1000 and 100000 (the last
   for MPI_INT SUM, MINLOC and the matrix product: large-message
   algorithms). Expected results are folded
   by a loop over the ranks in rank order. Holes of the struct type and the
   padding of MPI_DOUBLE_INT, guards around the buffers and the send buffer
   must not change. On MPI_COMM_WORLD and on a split communicator (reversed
   rank order). */
#include "coll_util.h"
#include "coll_reduction.h"

typedef struct {
    int k, inplace;
    size_t n;
    cu_rbuf sbuf, rbuf;
} ar_case;

static void ar_fill(void *p, int iter)
{
    ar_case *c = p;
    cu_rbuf_clear(&c->sbuf);
    cu_rbuf_clear(&c->rbuf);
    cu_rbuf_input(c->inplace ? &c->rbuf : &c->sbuf, cu_rank, 0, c->n, iter);
}

static int ar_call(void *p, int mode, MPI_Request *req)
{
    ar_case *c = p;
    const void *sp = c->inplace ? MPI_IN_PLACE : (const void *)c->sbuf.p;
    void *rp = c->rbuf.p;
    MPI_Datatype t = cu_rk[c->k].type;
    MPI_Op op = cu_rk[c->k].op;
    int n = (int)c->n;
    switch (mode) {
    case CU_BLOCKING:
        return MPI_Allreduce(sp, rp, n, t, op, cu_comm);
    case CU_NONBLOCKING:
        return MPI_Iallreduce(sp, rp, n, t, op, cu_comm, req);
#if CU_MPI4
    case CU_PERSISTENT:
        return MPI_Allreduce_init(sp, rp, n, t, op, cu_comm, MPI_INFO_NULL, req);
    case CU_BLOCKING_C:
        return MPI_Allreduce_c(sp, rp, n, t, op, cu_comm);
    case CU_NONBLOCKING_C:
        return MPI_Iallreduce_c(sp, rp, n, t, op, cu_comm, req);
    case CU_PERSISTENT_C:
        return MPI_Allreduce_init_c(sp, rp, n, t, op, cu_comm, MPI_INFO_NULL, req);
#endif
    }
    return MPI_ERR_OTHER;
}

static void ar_check(void *p, int iter)
{
    ar_case *c = p;
    cu_rbuf_check("result", &c->rbuf, c->n, 0, 0, cu_size - 1, iter);
    cu_rbuf_check_untouched("receive buffer", &c->rbuf, c->n);
    if (!c->inplace) {
        cu_rbuf_check("send buffer (must not change)", &c->sbuf, c->n, 0, cu_rank, cu_rank, iter);
        cu_rbuf_check_untouched("send buffer", &c->sbuf, c->n);
    }
}

static const cu_ops ar_ops = {ar_fill, ar_call, ar_check};

static void run_all(int full)
{
    cu_rcell cells[CU_MAXRCELLS];
    int ncells = cu_rgrid(full, 100000, cells);
    for (int i = 0; i < ncells; i++) {
        for (int ip = 0; ip < 2; ip++) {
            if (!(cells[i].inplace & (1 << ip)))
                continue;
            ar_case c;
            c.k = cells[i].kind;
            c.n = cells[i].len;
            c.inplace = ip;
            cu_rbuf_alloc(&c.sbuf, c.k, ip ? 0 : c.n);
            cu_rbuf_alloc(&c.rbuf, c.k, c.n);
            snprintf(cu_desc, sizeof cu_desc, "%s, %zu elements%s", cu_rk[c.k].name, c.n,
                     ip ? ", MPI_IN_PLACE" : "");
            cu_run("Allreduce", &c, &ar_ops, c.n == 7 ? CU_WITH_C : 0);
            cu_rbuf_free(&c.sbuf);
            cu_rbuf_free(&c.rbuf);
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
    return cu_finish("coll_allreduce");
}
