/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* algorithms: BATON_COLL_BCAST=auto,binomial,scatter_allgather,shm */
/* MPI_Bcast, MPI_Ibcast, MPI_Bcast_init (and the _c forms for some cases):
   every root class (first, middle, last), counts 0, 1, 7, 1000 and a large
   one (100000 ints; 30000 vector elements), with MPI_INT, a strided vector
   type, a resized struct type, and root/non-root type maps that differ with
   the same type signature (MPI_INT at the root, vector elsewhere; resized
   struct at the root, contiguous(4) elsewhere). Receive buffers start as
   sentinels: gaps of the derived types and guards around the buffer must keep
   them; the root's buffer must not change. On MPI_COMM_WORLD and on a split
   communicator whose ranks differ from the world ranks. */
#include "coll_util.h"
#include "coll_payload.h"

typedef struct {
    const cu_pair *pr;
    int root;
    int scount, rcount; /* elements of the root's / the others' layout */
    size_t nints;
    cu_buf buf;
} bc_case;

static const cu_layout *bc_lay(const bc_case *c)
{
    return &cu_lay[cu_rank == c->root ? c->pr->s : c->pr->r];
}

static void bc_fill(void *p, int iter)
{
    bc_case *c = p;
    cu_buf_sentinel(&c->buf);
    if (cu_rank == c->root)
        cu_put(c->buf.p, bc_lay(c), 0, c->nints, c->root, 0, iter);
}

static int bc_call(void *p, int mode, MPI_Request *req)
{
    bc_case *c = p;
    const cu_layout *l = bc_lay(c);
    int n = cu_rank == c->root ? c->scount : c->rcount;
    switch (mode) {
    case CU_BLOCKING:
        return MPI_Bcast(c->buf.p, n, l->type, c->root, cu_comm);
    case CU_NONBLOCKING:
        return MPI_Ibcast(c->buf.p, n, l->type, c->root, cu_comm, req);
#if CU_MPI4
    case CU_PERSISTENT:
        return MPI_Bcast_init(c->buf.p, n, l->type, c->root, cu_comm, MPI_INFO_NULL, req);
    case CU_BLOCKING_C:
        return MPI_Bcast_c(c->buf.p, n, l->type, c->root, cu_comm);
    case CU_NONBLOCKING_C:
        return MPI_Ibcast_c(c->buf.p, n, l->type, c->root, cu_comm, req);
    case CU_PERSISTENT_C:
        return MPI_Bcast_init_c(c->buf.p, n, l->type, c->root, cu_comm, MPI_INFO_NULL, req);
#endif
    }
    return MPI_ERR_OTHER;
}

static void bc_check(void *p, int iter)
{
    bc_case *c = p;
    int *exp = cu_expect_new(&c->buf);
    cu_put(exp, bc_lay(c), 0, c->nints, c->root, 0, iter);
    cu_expect_check(cu_rank == c->root ? "root buffer (must not change)" : "buffer", &c->buf,
                    exp);
}

static const cu_ops bc_ops = {bc_fill, bc_call, bc_check};

static void run_all(int big)
{
    const int counts[] = {0, 1, 7, 1000};
    int roots[3] = {0, cu_size - 1, cu_size / 2};
    int nroots = cu_size == 1 ? 1 : (cu_size == 2 ? 2 : 3);
    for (int pi = 0; pi < CU_NPAIRS; pi++) {
        const cu_pair *pr = &cu_pairs[pi];
        int u = cu_unit(pr);
        int ncounts = 4 + (big && pi < 2);
        for (int ci = 0; ci < ncounts; ci++) {
            int cnt = ci < 4 ? counts[ci] : (pi == 0 ? 100000 : 30000);
            for (int ri = 0; ri < nroots; ri++) {
                bc_case c;
                c.pr = pr;
                c.root = roots[ri];
                c.nints = (size_t)cnt * (size_t)u;
                c.scount = (int)(c.nints / (size_t)cu_lay[pr->s].ipe);
                c.rcount = (int)(c.nints / (size_t)cu_lay[pr->r].ipe);
                const cu_layout *l = bc_lay(&c);
                cu_buf_alloc(&c.buf, (c.nints / (size_t)l->ipe) * (size_t)l->ext);
                snprintf(cu_desc, sizeof cu_desc, "%s, %zu ints, root %d", pr->name, c.nints,
                         c.root);
                cu_run("Bcast", &c, &bc_ops, cnt == 7 ? CU_WITH_C : 0);
                cu_buf_free(&c.buf);
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
    return cu_finish("coll_bcast");
}
