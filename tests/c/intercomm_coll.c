/* ranks: 2 3 4 5 8 */
/* timeout: 120 */
/* Every collective on intercommunicators, blocking, nonblocking and
   persistent: Barrier, Bcast, Reduce (MPI_SUM and a non-commutative user op),
   Gather(v), Scatter(v) with MPI_ROOT / MPI_PROC_NULL in the root's group and
   the root's rank in the other, rooted in either group; Allgather(v),
   Alltoall(v,w), Allreduce, Reduce_scatter(_block), where each group's result
   comes from the other group's data. Groups of unequal sizes (1 against the
   rest) and by parity. Errors: MPI_IN_PLACE, Scan/Exscan, bad roots. */
#include "inter_util.h"

static int n, wrank, kind, side, rank, lsize, rsize;
static MPI_Comm inter;
static char ctx[96];

/* World rank of rank r of the other group. */
static int other(int r)
{
    return iu_world(kind, 1 - side, r);
}

static void label(const char *coll, int form, int root_side)
{
    snprintf(ctx, sizeof ctx, "%s %s %s%s", coll, iu_kind_name(kind), iu_form_name(form),
             root_side < 0 ? "" : root_side == side ? " (root group)" : " (other group)");
}

/* ----- a non-commutative reduction: 2x2 matrix products in rank order ----- */

static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    unsigned *a = in, *b = inout;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        unsigned r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                         a[2] * b[1] + a[3] * b[3]};
        memcpy(b, r, sizeof r);
    }
}

static void matrix_of(int w, int k, unsigned *m)
{
    m[0] = (unsigned)(w + 1 + k);
    m[1] = 1;
    m[2] = (unsigned)(k + 2);
    m[3] = 0;
}

/* Product over the other group, in its rank order. */
static void expected_product(int k, unsigned *out)
{
    unsigned acc[4] = {1, 0, 0, 1}, m[4];
    int one = 1;
    for (int r = rsize - 1; r >= 0; r--) {
        matrix_of(other(r), k, m);
        matmul(m, acc, &one, NULL);
    }
    memcpy(out, acc, sizeof acc);
}

static MPI_Op op_mat;
static MPI_Datatype t_mat;

/* ----- rooted ----- */

static void t_bcast(int form, int rs)
{
    label("bcast", form, rs);
    int buf[5], root_local = iu_size(kind, rs, n) - 1;
    if (side == rs) {
        int me = rank == root_local;
        for (int i = 0; i < 5; i++)
            buf[i] = me ? wrank * 100 + i : -1;
        int root = me ? MPI_ROOT : MPI_PROC_NULL;
        IU_RUN(form, MPI_Bcast(buf, 5, MPI_INT, root, inter), MPI_Ibcast(buf, 5, MPI_INT, root, inter, &iu_rq),
               MPI_Bcast_init(buf, 5, MPI_INT, root, inter, MPI_INFO_NULL, &iu_rq));
        for (int i = 0; i < 5; i++)
            CHECK(buf[i] == (me ? wrank * 100 + i : -1), "%s: buf[%d] = %d changed", ctx, i, buf[i]);
    } else {
        for (int i = 0; i < 5; i++)
            buf[i] = -1;
        IU_RUN(form, MPI_Bcast(buf, 5, MPI_INT, root_local, inter),
               MPI_Ibcast(buf, 5, MPI_INT, root_local, inter, &iu_rq),
               MPI_Bcast_init(buf, 5, MPI_INT, root_local, inter, MPI_INFO_NULL, &iu_rq));
        for (int i = 0; i < 5; i++)
            CHECK(buf[i] == other(root_local) * 100 + i, "%s: buf[%d] = %d", ctx, i, buf[i]);
    }
}

static void t_reduce(int form, int rs)
{
    label("reduce", form, rs);
    int in[4], out[4], root_local = 0;
    unsigned min[3 * 4], mout[3 * 4];
    for (int i = 0; i < 4; i++) {
        in[i] = wrank * 100 + i;
        out[i] = -1;
    }
    for (int k = 0; k < 3; k++)
        matrix_of(wrank, k, min + 4 * k);
    memset(mout, 0, sizeof mout);
    int me = side == rs && rank == root_local;
    int root = side == rs ? (me ? MPI_ROOT : MPI_PROC_NULL) : root_local;
    IU_RUN(form, MPI_Reduce(in, out, 4, MPI_INT, MPI_SUM, root, inter),
           MPI_Ireduce(in, out, 4, MPI_INT, MPI_SUM, root, inter, &iu_rq),
           MPI_Reduce_init(in, out, 4, MPI_INT, MPI_SUM, root, inter, MPI_INFO_NULL, &iu_rq));
    IU_RUN(form, MPI_Reduce(min, mout, 3, t_mat, op_mat, root, inter),
           MPI_Ireduce(min, mout, 3, t_mat, op_mat, root, inter, &iu_rq),
           MPI_Reduce_init(min, mout, 3, t_mat, op_mat, root, inter, MPI_INFO_NULL, &iu_rq));
    for (int i = 0; i < 4; i++) {
        int want = -1;
        if (me) {
            want = 0;
            for (int r = 0; r < rsize; r++)
                want += other(r) * 100 + i;
        }
        CHECK(out[i] == want, "%s: sum[%d] = %d, expected %d", ctx, i, out[i], want);
    }
    for (int k = 0; k < 3; k++) {
        unsigned want[4] = {0, 0, 0, 0};
        if (me)
            expected_product(k, want);
        CHECK(memcmp(want, mout + 4 * k, sizeof want) == 0, "%s: matrix product %d is %u %u %u %u", ctx, k,
              mout[4 * k], mout[4 * k + 1], mout[4 * k + 2], mout[4 * k + 3]);
    }
}

/* Block sizes of the v forms: rank r of a group has r % 3 + 1 ints. */
static int vcount(int r)
{
    return r % 3 + 1;
}

static void t_gather(int form, int rs, int v)
{
    label(v ? "gatherv" : "gather", form, rs);
    int root_local = iu_size(kind, rs, n) / 2;
    int sbuf[3], rbuf[3 * 64], counts[64], displs[64], total = 0;
    for (int r = 0; r < rsize; r++)
        total += counts[r] = v ? vcount(r) : 2;
    for (int r = 0, at = total; r < rsize; r++)
        displs[r] = v ? (at -= counts[r]) : 2 * r;
    for (int i = 0; i < 3 * 64; i++)
        rbuf[i] = -1;
    int sc = v ? vcount(rank) : 2;
    for (int j = 0; j < 3; j++)
        sbuf[j] = wrank * 10 + j;
    int me = side == rs && rank == root_local;
    int root = side == rs ? (me ? MPI_ROOT : MPI_PROC_NULL) : root_local;
    if (v)
        IU_RUN(form, MPI_Gatherv(sbuf, sc, MPI_INT, rbuf, counts, displs, MPI_INT, root, inter),
               MPI_Igatherv(sbuf, sc, MPI_INT, rbuf, counts, displs, MPI_INT, root, inter, &iu_rq),
               MPI_Gatherv_init(sbuf, sc, MPI_INT, rbuf, counts, displs, MPI_INT, root, inter, MPI_INFO_NULL, &iu_rq));
    else
        IU_RUN(form, MPI_Gather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, root, inter),
               MPI_Igather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, root, inter, &iu_rq),
               MPI_Gather_init(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, root, inter, MPI_INFO_NULL, &iu_rq));
    if (!me) {
        CHECK(rbuf[0] == -1, "%s: a non-root receive buffer changed", ctx);
        return;
    }
    for (int r = 0; r < rsize; r++)
        for (int j = 0; j < counts[r]; j++)
            CHECK(rbuf[displs[r] + j] == other(r) * 10 + j, "%s: block %d [%d] = %d", ctx, r, j, rbuf[displs[r] + j]);
    CHECK(rbuf[total] == -1, "%s: written past the blocks", ctx);
}

static void t_scatter(int form, int rs, int v)
{
    label(v ? "scatterv" : "scatter", form, rs);
    int root_local = iu_size(kind, rs, n) - 1;
    int sbuf[3 * 64], rbuf[4], counts[64], displs[64], total = 0;
    for (int r = 0; r < rsize; r++)
        total += counts[r] = v ? vcount(r) : 2;
    for (int r = 0, at = total; r < rsize; r++)
        displs[r] = v ? (at -= counts[r]) : 2 * r;
    for (int r = 0; r < rsize; r++)
        for (int j = 0; j < counts[r]; j++)
            sbuf[displs[r] + j] = wrank * 1000 + r * 10 + j;
    for (int j = 0; j < 4; j++)
        rbuf[j] = -1;
    int rc = v ? vcount(rank) : 2;
    int me = side == rs && rank == root_local;
    int root = side == rs ? (me ? MPI_ROOT : MPI_PROC_NULL) : root_local;
    if (v)
        IU_RUN(form, MPI_Scatterv(sbuf, counts, displs, MPI_INT, rbuf, rc, MPI_INT, root, inter),
               MPI_Iscatterv(sbuf, counts, displs, MPI_INT, rbuf, rc, MPI_INT, root, inter, &iu_rq),
               MPI_Scatterv_init(sbuf, counts, displs, MPI_INT, rbuf, rc, MPI_INT, root, inter, MPI_INFO_NULL, &iu_rq));
    else
        IU_RUN(form, MPI_Scatter(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, root, inter),
               MPI_Iscatter(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, root, inter, &iu_rq),
               MPI_Scatter_init(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, root, inter, MPI_INFO_NULL, &iu_rq));
    if (side == rs) {
        CHECK(rbuf[0] == -1, "%s: a receive buffer in the root's group changed", ctx);
        return;
    }
    for (int j = 0; j < rc; j++)
        CHECK(rbuf[j] == other(root_local) * 1000 + rank * 10 + j, "%s: [%d] = %d", ctx, j, rbuf[j]);
    CHECK(rbuf[rc] == -1, "%s: written past the block", ctx);
}

/* ----- both groups at once ----- */

static void t_allgather(int form, int v)
{
    label(v ? "allgatherv" : "allgather", form, -1);
    int sbuf[3], rbuf[3 * 64 + 1], counts[64], displs[64], total = 0;
    for (int r = 0; r < rsize; r++)
        total += counts[r] = v ? vcount(r) : 2;
    for (int r = 0, at = total; r < rsize; r++)
        displs[r] = v ? (at -= counts[r]) : 2 * r;
    for (int i = 0; i < 3 * 64 + 1; i++)
        rbuf[i] = -1;
    for (int j = 0; j < 3; j++)
        sbuf[j] = wrank * 10 + j;
    int sc = v ? vcount(rank) : 2;
    if (v)
        IU_RUN(form, MPI_Allgatherv(sbuf, sc, MPI_INT, rbuf, counts, displs, MPI_INT, inter),
               MPI_Iallgatherv(sbuf, sc, MPI_INT, rbuf, counts, displs, MPI_INT, inter, &iu_rq),
               MPI_Allgatherv_init(sbuf, sc, MPI_INT, rbuf, counts, displs, MPI_INT, inter, MPI_INFO_NULL, &iu_rq));
    else
        IU_RUN(form, MPI_Allgather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, inter),
               MPI_Iallgather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, inter, &iu_rq),
               MPI_Allgather_init(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, inter, MPI_INFO_NULL, &iu_rq));
    for (int r = 0; r < rsize; r++)
        for (int j = 0; j < counts[r]; j++)
            CHECK(rbuf[displs[r] + j] == other(r) * 10 + j, "%s: block %d [%d] = %d", ctx, r, j, rbuf[displs[r] + j]);
    CHECK(rbuf[total] == -1, "%s: written past the blocks", ctx);
}

/* Alltoall(v,w): `kindv` 0 regular (2 ints per pair), 1 v, 2 w; in the v and w forms the pair
   (local rank a, remote rank b) exchanges (a + b) % 3 ints each way, placed in reverse order. */
static void t_alltoall(int form, int kindv)
{
    label(kindv == 0 ? "alltoall" : kindv == 1 ? "alltoallv" : "alltoallw", form, -1);
    int sbuf[3 * 64], rbuf[3 * 64 + 1], sc[64], sd[64], rc[64], rd[64], sdb[64], rdb[64], stotal = 0, rtotal = 0;
    MPI_Datatype types[64];
    for (int r = 0; r < rsize; r++) {
        stotal += sc[r] = kindv ? (rank + r) % 3 : 2;
        rtotal += rc[r] = sc[r];
        types[r] = MPI_INT;
    }
    for (int r = 0, sa = stotal, ra = rtotal; r < rsize; r++) {
        sd[r] = kindv ? (sa -= sc[r]) : 2 * r;
        rd[r] = kindv ? (ra -= rc[r]) : 2 * r;
        sdb[r] = sd[r] * (int)sizeof(int);
        rdb[r] = rd[r] * (int)sizeof(int);
    }
    for (int r = 0; r < rsize; r++)
        for (int j = 0; j < sc[r]; j++)
            sbuf[sd[r] + j] = wrank * 1000 + r * 10 + j;
    for (int i = 0; i < 3 * 64 + 1; i++)
        rbuf[i] = -1;
    if (kindv == 0)
        IU_RUN(form, MPI_Alltoall(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, inter),
               MPI_Ialltoall(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, inter, &iu_rq),
               MPI_Alltoall_init(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, inter, MPI_INFO_NULL, &iu_rq));
    else if (kindv == 1)
        IU_RUN(form, MPI_Alltoallv(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, inter),
               MPI_Ialltoallv(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, inter, &iu_rq),
               MPI_Alltoallv_init(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, inter, MPI_INFO_NULL, &iu_rq));
    else
        IU_RUN(form, MPI_Alltoallw(sbuf, sc, sdb, types, rbuf, rc, rdb, types, inter),
               MPI_Ialltoallw(sbuf, sc, sdb, types, rbuf, rc, rdb, types, inter, &iu_rq),
               MPI_Alltoallw_init(sbuf, sc, sdb, types, rbuf, rc, rdb, types, inter, MPI_INFO_NULL, &iu_rq));
    for (int r = 0; r < rsize; r++)
        for (int j = 0; j < rc[r]; j++)
            CHECK(rbuf[rd[r] + j] == other(r) * 1000 + rank * 10 + j, "%s: from %d [%d] = %d", ctx, r, j,
                  rbuf[rd[r] + j]);
    CHECK(rbuf[rtotal] == -1, "%s: written past the blocks", ctx);
}

static void t_allreduce(int form)
{
    label("allreduce", form, -1);
    int in[6], out[6];
    unsigned min[8], mout[8];
    for (int i = 0; i < 6; i++) {
        in[i] = wrank * 100 + i;
        out[i] = -1;
    }
    for (int k = 0; k < 2; k++)
        matrix_of(wrank, k, min + 4 * k);
    IU_RUN(form, MPI_Allreduce(in, out, 6, MPI_INT, MPI_SUM, inter),
           MPI_Iallreduce(in, out, 6, MPI_INT, MPI_SUM, inter, &iu_rq),
           MPI_Allreduce_init(in, out, 6, MPI_INT, MPI_SUM, inter, MPI_INFO_NULL, &iu_rq));
    IU_RUN(form, MPI_Allreduce(min, mout, 2, t_mat, op_mat, inter),
           MPI_Iallreduce(min, mout, 2, t_mat, op_mat, inter, &iu_rq),
           MPI_Allreduce_init(min, mout, 2, t_mat, op_mat, inter, MPI_INFO_NULL, &iu_rq));
    for (int i = 0; i < 6; i++) {
        int want = 0;
        for (int r = 0; r < rsize; r++)
            want += other(r) * 100 + i;
        CHECK(out[i] == want, "%s: sum[%d] = %d, expected %d", ctx, i, out[i], want);
    }
    for (int k = 0; k < 2; k++) {
        unsigned want[4];
        expected_product(k, want);
        CHECK(memcmp(want, mout + 4 * k, sizeof want) == 0, "%s: matrix product %d", ctx, k);
    }
}

/* Reduce_scatter: both groups reduce vectors of 2n ints (the standard wants the same length);
   each group cuts the other group's result by its own counts. Reduce_scatter_block: blocks of
   remote-size ints, so that both groups' vectors hold size * remote size. */
static void t_reduce_scatter(int form, int block)
{
    label(block ? "reduce_scatter_block" : "reduce_scatter", form, -1);
    int total = block ? lsize * rsize : 2 * n, counts[64], in[2 * 64 + 64 * 64], out[2 * 64 + 1], start = 0;
    for (int i = 0; i < lsize; i++)
        counts[i] = block ? rsize : total / lsize + (i < total % lsize);
    for (int i = 0; i < rank; i++)
        start += counts[i];
    for (int k = 0; k < total; k++)
        in[k] = wrank * 100 + k;
    for (int k = 0; k <= counts[rank]; k++)
        out[k] = -1;
    if (block)
        IU_RUN(form, MPI_Reduce_scatter_block(in, out, rsize, MPI_INT, MPI_SUM, inter),
               MPI_Ireduce_scatter_block(in, out, rsize, MPI_INT, MPI_SUM, inter, &iu_rq),
               MPI_Reduce_scatter_block_init(in, out, rsize, MPI_INT, MPI_SUM, inter, MPI_INFO_NULL, &iu_rq));
    else
        IU_RUN(form, MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, inter),
               MPI_Ireduce_scatter(in, out, counts, MPI_INT, MPI_SUM, inter, &iu_rq),
               MPI_Reduce_scatter_init(in, out, counts, MPI_INT, MPI_SUM, inter, MPI_INFO_NULL, &iu_rq));
    for (int k = 0; k < counts[rank]; k++) {
        int want = 0;
        for (int r = 0; r < rsize; r++)
            want += other(r) * 100 + start + k;
        CHECK(out[k] == want, "%s: [%d] = %d, expected %d", ctx, k, out[k], want);
    }
    CHECK(out[counts[rank]] == -1, "%s: written past the block", ctx);
}

/* The barrier holds everybody until the other group has arrived: side 1 arrives only after
   receiving a message that side 0 sends just before entering it. */
static void t_barrier(int form)
{
    label("barrier", form, -1);
    int token = 0;
    if (side == 0 && rank == 0)
        MPI_Send(&token, 1, MPI_INT, 0, 77, inter);
    if (side == 1 && rank == 0)
        MPI_Recv(&token, 1, MPI_INT, 0, 77, inter, MPI_STATUS_IGNORE);
    IU_RUN(form, MPI_Barrier(inter), MPI_Ibarrier(inter, &iu_rq), MPI_Barrier_init(inter, MPI_INFO_NULL, &iu_rq));
}

static void errors(void)
{
    int a[64], b[64];
    label("errors", 0, -1);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
#ifndef SKIP_MPICH_402_BUGS /* MPICH 4.0.2 does not check these and crashes */
    CHECK_ERR_CLASS(MPI_Allreduce(MPI_IN_PLACE, b, 1, MPI_INT, MPI_SUM, inter), MPI_ERR_BUFFER);
    MPI_Request rq;
    CHECK_ERR_CLASS(MPI_Iallreduce(MPI_IN_PLACE, b, 1, MPI_INT, MPI_SUM, inter, &rq), MPI_ERR_BUFFER);
    CHECK_ERR_CLASS(MPI_Alltoall(MPI_IN_PLACE, 1, MPI_INT, b, 1, MPI_INT, inter), MPI_ERR_BUFFER);
    CHECK_ERR_CLASS(MPI_Allgather(MPI_IN_PLACE, 1, MPI_INT, b, 1, MPI_INT, inter), MPI_ERR_BUFFER);
    CHECK_ERR_CLASS(MPI_Reduce_scatter_block(MPI_IN_PLACE, b, 1, MPI_INT, MPI_SUM, inter), MPI_ERR_BUFFER);
    CHECK_ERR_CLASS(MPI_Gather(MPI_IN_PLACE, 1, MPI_INT, b, 1, MPI_INT, MPI_ROOT, inter), MPI_ERR_BUFFER);
    CHECK_ERR_CLASS(MPI_Reduce(MPI_IN_PLACE, b, 1, MPI_INT, MPI_SUM, 0, inter), MPI_ERR_BUFFER);
    CHECK_ERR_CLASS(MPI_Scan(a, b, 1, MPI_INT, MPI_SUM, inter), MPI_ERR_COMM);
    CHECK_ERR_CLASS(MPI_Exscan(a, b, 1, MPI_INT, MPI_SUM, inter), MPI_ERR_COMM);
    CHECK_ERR_CLASS(MPI_Iscan(a, b, 1, MPI_INT, MPI_SUM, inter, &rq), MPI_ERR_COMM);
    CHECK_ERR_CLASS(MPI_Bcast(a, 1, MPI_INT, rsize, inter), MPI_ERR_ROOT);
    CHECK_ERR_CLASS(MPI_Bcast(a, 1, MPI_INT, -7, inter), MPI_ERR_ROOT);
    CHECK_ERR_CLASS(MPI_Gather(a, 1, MPI_INT, b, 1, MPI_INT, rsize, inter), MPI_ERR_ROOT);
#else
    (void)a;
    (void)b;
#endif
    /* After all these, the intercommunicator still works. */
    t_allreduce(0);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Type_contiguous(4, MPI_UNSIGNED, &t_mat);
    MPI_Type_commit(&t_mat);
    MPI_Op_create(matmul, 0, &op_mat);
    for (kind = 0; kind < IU_KINDS; kind++) {
        side = iu_side(kind, wrank);
        MPI_Comm half;
        iu_make(kind, 31, &half, &inter);
        MPI_Comm_rank(inter, &rank);
        MPI_Comm_size(inter, &lsize);
        MPI_Comm_remote_size(inter, &rsize);
        for (int form = 0; form < IU_FORMS; form++) {
            for (int rs = 0; rs < 2; rs++) {
                t_bcast(form, rs);
                t_reduce(form, rs);
                t_gather(form, rs, 0);
                t_gather(form, rs, 1);
                t_scatter(form, rs, 0);
                t_scatter(form, rs, 1);
            }
            t_barrier(form);
            t_allgather(form, 0);
            t_allgather(form, 1);
            t_alltoall(form, 0);
            t_alltoall(form, 1);
            t_alltoall(form, 2);
            t_allreduce(form);
            t_reduce_scatter(form, 0);
            t_reduce_scatter(form, 1);
        }
        /* Several nonblocking collectives in flight at once on one intercommunicator. */
        label("concurrent", 1, -1);
        int in = wrank, s1 = -1, s2 = -1, want = 0;
        MPI_Request rq[3];
        MPI_Iallreduce(&in, &s1, 1, MPI_INT, MPI_SUM, inter, &rq[0]);
        MPI_Ibarrier(inter, &rq[1]);
        MPI_Iallreduce(&in, &s2, 1, MPI_INT, MPI_MAX, inter, &rq[2]);
        CHECK_MPI(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
        for (int r = 0; r < rsize; r++)
            want += other(r);
        CHECK(s1 == want && s2 == other(rsize - 1), "%s: sum %d max %d", ctx, s1, s2);
        errors();
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
    MPI_Op_free(&op_mat);
    MPI_Type_free(&t_mat);
    return check_finish("intercomm_coll");
}
