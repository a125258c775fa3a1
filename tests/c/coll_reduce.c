/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* algorithms: BATON_COLL_REDUCE=auto,binomial,shm */
/* MPI_Reduce, MPI_Ireduce, MPI_Reduce_init (and the _c forms for some
   cases), with and without MPI_IN_PLACE at the root; the root takes turns
   between the first, middle and last rank. Kinds: SUM/MAX/MIN/PROD on
   MPI_INT and MPI_DOUBLE, BAND on MPI_UNSIGNED, MINLOC on MPI_DOUBLE_INT
   (with ties), a commutative user op on a resized struct type and a
   non-commutative user op (2x2 matrix product, rank order matters) on a
   contiguous type; lengths 0, 1, 7, 1000 and 100000 (for some kinds).
   Expected results are folded by a loop over the ranks in rank order.
   Non-root ranks pass a NULL receive buffer; holes of the struct type, the
   padding of MPI_DOUBLE_INT, guards and send buffers must not change. On
   MPI_COMM_WORLD and on a split communicator (reversed rank order).

   Compiling with -DSKIP_MPICH_402_BUGS leaves out MPI_IN_PLACE with a root
   other than 0 and 1000 or more elements (MPICH 4.0.2 crashes there). */
#include "coll_util.h"
#include "coll_reduction.h"

typedef struct {
    int k, inplace, root;
    size_t n;
    cu_rbuf sbuf, rbuf;
} rd_case;

static void rd_fill(void *p, int iter)
{
    rd_case *c = p;
    int isroot = cu_rank == c->root;
    cu_rbuf_clear(&c->sbuf);
    if (isroot)
        cu_rbuf_clear(&c->rbuf);
    cu_rbuf_input(isroot && c->inplace ? &c->rbuf : &c->sbuf, cu_rank, 0, c->n, iter);
}

static int rd_call(void *p, int mode, MPI_Request *req)
{
    rd_case *c = p;
    int isroot = cu_rank == c->root;
    const void *sp = isroot && c->inplace ? MPI_IN_PLACE : (const void *)c->sbuf.p;
    void *rp = isroot ? c->rbuf.p : NULL;
    MPI_Datatype t = cu_rk[c->k].type;
    MPI_Op op = cu_rk[c->k].op;
    int n = (int)c->n, root = c->root;
    switch (mode) {
    case CU_BLOCKING:
        return MPI_Reduce(sp, rp, n, t, op, root, cu_comm);
    case CU_NONBLOCKING:
        return MPI_Ireduce(sp, rp, n, t, op, root, cu_comm, req);
#if CU_MPI4
    case CU_PERSISTENT:
        return MPI_Reduce_init(sp, rp, n, t, op, root, cu_comm, MPI_INFO_NULL, req);
    case CU_BLOCKING_C:
        return MPI_Reduce_c(sp, rp, n, t, op, root, cu_comm);
    case CU_NONBLOCKING_C:
        return MPI_Ireduce_c(sp, rp, n, t, op, root, cu_comm, req);
    case CU_PERSISTENT_C:
        return MPI_Reduce_init_c(sp, rp, n, t, op, root, cu_comm, MPI_INFO_NULL, req);
#endif
    }
    return MPI_ERR_OTHER;
}

static void rd_check(void *p, int iter)
{
    rd_case *c = p;
    int isroot = cu_rank == c->root;
    if (isroot) {
        cu_rbuf_check("result at the root", &c->rbuf, c->n, 0, 0, cu_size - 1, iter);
        cu_rbuf_check_untouched("root's receive buffer", &c->rbuf, c->n);
    }
    if (!(isroot && c->inplace)) {
        cu_rbuf_check("send buffer (must not change)", &c->sbuf, c->n, 0, cu_rank, cu_rank, iter);
        cu_rbuf_check_untouched("send buffer", &c->sbuf, c->n);
    }
}

static const cu_ops rd_ops = {rd_fill, rd_call, rd_check};

static void run_all(int full)
{
    cu_rcell cells[CU_MAXRCELLS];
    int roots[3];
    int ncells = cu_rgrid(full, 100000, cells);
    for (int i = 0; i < ncells; i++) {
        int nroots = cu_roots(i, roots);
        for (int ip = 0; ip < 2; ip++) {
            if (!(cells[i].inplace & (1 << ip)))
                continue;
            rd_case c;
            c.k = cells[i].kind;
            c.n = cells[i].len;
            c.inplace = ip;
            c.root = roots[ip % nroots];
            if (MPICH_BUG(ip && c.root != 0 && c.n >= 1000))
                continue;
            cu_rbuf_alloc(&c.sbuf, c.k, c.n);
            cu_rbuf_alloc(&c.rbuf, c.k, cu_rank == c.root ? c.n : 0);
            snprintf(cu_desc, sizeof cu_desc, "%s, %zu elements, root %d%s", cu_rk[c.k].name,
                     c.n, c.root, ip ? ", MPI_IN_PLACE at root" : "");
            cu_run("Reduce", &c, &rd_ops, c.n == 7 ? CU_WITH_C : 0);
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
    return cu_finish("coll_reduce");
}
