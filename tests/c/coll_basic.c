/* ranks: 1 2 3 4 5 8 */
/* timeout: 120 */
/* Blocking collectives, checked against values computed from rank numbers:
   Bcast, Reduce, Allreduce, Gather(v), Scatter(v), Allgather(v), Alltoall(v),
   Reduce_scatter(_block), Scan, Exscan, Barrier. Counts 0, 1, 7, 1000 and
   100000 ints; every root (for 100000: the first, middle and last root);
   MPI_IN_PLACE wherever the standard allows it;
   uneven counts and non-monotonic displacements (with gaps) in the v-variants;
   MPI_DOUBLE_INT (a type with padding) in Bcast and Gather. Everything runs on
   MPI_COMM_WORLD and on a split communicator (odd/even world ranks, reversed
   order) so that communicator ranks differ from world ranks. Receive buffers
   carry guard elements on both sides, and gaps between v-blocks must stay
   untouched.

   Compiling with -DSKIP_MPICH_402_BUGS skips three cases that MPICH 4.0.2
   gets wrong (for validating the rest of the test against it):
   Allgatherv on a 1-rank communicator ignores displs (writes at offset 0);
   Gather of >= 500 MPI_DOUBLE_INT on >= 4 ranks fails "Message truncated";
   Reduce with MPI_IN_PLACE, root != 0 and count 1000 segfaults;
   Reduce_scatter with MPI_IN_PLACE and ~100000-int blocks on >= 4 ranks
   asserts in an overlapping memcpy (typerep_yaksa_pack.c:286). */
#include "check.h"

#ifdef SKIP_MPICH_402_BUGS
#define MPICH_BUG(cond) (cond)
#else
#define MPICH_BUG(cond) 0
#endif

#define NG 4                 /* guard elements on each side of a buffer */
#define GV (-1234567)        /* guard / "not written" value */
#define GAP 3                /* gap between blocks in v-variants */

static MPI_Comm comm;
static int rank, size;
static const char *cname;
static char ctx[200];

static const int counts[] = {0, 1, 7, 1000, 100000};
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))

/* data-movement values: distinct for (a, b, j) with a, b < 64, j < 200003 */
static int gen(int a, int b, int j)
{
    return (a * 64 + b) * 200003 + j;
}

/* reduction inputs: small, some negative, so sums over 8 ranks are exact */
static int rv(int r, int j, int seed)
{
    return (r * 7 + j * 3 + seed * 11) % 101 - 50;
}

/* uneven per-rank counts for v-variants: all zero when n == 0, otherwise
   some ranks contribute nothing and the others differ */
static int vc(int n, int i)
{
    if (n == 0)
        return 0;
    return (i % 3 == 1) ? 0 : n + 2 * i;
}

/* buffer of n ints with NG guard ints on each side, all set to GV */
static int *alloc_g(size_t n)
{
    int *p = malloc((n + 2 * NG) * sizeof(int));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (size_t i = 0; i < n + 2 * NG; i++)
        p[i] = GV;
    return p + NG;
}

static void free_g(int *p)
{
    if (p)
        free(p - NG);
}

static void check_guards(const char *what, const int *p, size_t n)
{
    int ok = 1;
    for (int i = 1; i <= NG; i++)
        if (p[-i] != GV || p[n + (size_t)i - 1] != GV)
            ok = 0;
    CHECK(ok, "%s %s: %s: guard values around the buffer were overwritten", cname, ctx, what);
}

/* compare n ints; report the first mismatch */
static void check_ints(const char *what, const int *got, const int *exp, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (got[j] != exp[j]) {
            CHECK(0, "%s %s: %s: element %zu is %d, expected %d", cname, ctx, what, j, got[j],
                  exp[j]);
            return;
        }
}

static int *xmalloc_ints(size_t n)
{
    int *p = malloc((n ? n : 1) * sizeof(int));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* displacements in reverse rank order with GAP elements before each block;
   returns the total buffer length (including the trailing gap) */
static size_t rev_displs(const int *cnt, int *displs)
{
    size_t off = GAP;
    for (int i = size - 1; i >= 0; i--) {
        displs[i] = (int)off;
        off += (size_t)cnt[i] + GAP;
    }
    return off;
}

/* forward displacements with gaps */
static size_t fwd_displs(const int *cnt, int *displs)
{
    size_t off = GAP;
    for (int i = 0; i < size; i++) {
        displs[i] = (int)off;
        off += (size_t)cnt[i] + GAP;
    }
    return off;
}

/* ------------------------------------------------------------------ */

static void test_bcast(int n, int root)
{
    snprintf(ctx, sizeof ctx, "Bcast n=%d root=%d", n, root);
    int *buf = alloc_g((size_t)n);
    if (rank == root)
        for (int j = 0; j < n; j++)
            buf[j] = gen(root, 1, j);
    CHECK_MPI(MPI_Bcast(buf, n, MPI_INT, root, comm));
    int *exp = xmalloc_ints((size_t)n);
    for (int j = 0; j < n; j++)
        exp[j] = gen(root, 1, j);
    check_ints("buffer", buf, exp, (size_t)n);
    check_guards("buffer", buf, (size_t)n);
    free(exp);
    free_g(buf);
}

static void test_reduce(int n, int root, int inplace)
{
    if (MPICH_BUG(inplace && root != 0 && n >= 1000))
        return;
    snprintf(ctx, sizeof ctx, "Reduce SUM n=%d root=%d%s", n, root, inplace ? " IN_PLACE" : "");
    int *sbuf = alloc_g((size_t)n), *rbuf = NULL;
    for (int j = 0; j < n; j++)
        sbuf[j] = rv(rank, j, root);
    const void *sp = sbuf;
    if (rank == root) {
        rbuf = alloc_g((size_t)n);
        if (inplace) {
            for (int j = 0; j < n; j++)
                rbuf[j] = rv(rank, j, root);
            sp = MPI_IN_PLACE;
        }
    }
    CHECK_MPI(MPI_Reduce(sp, rbuf, n, MPI_INT, MPI_SUM, root, comm));
    if (rank == root) {
        int *exp = xmalloc_ints((size_t)n);
        for (int j = 0; j < n; j++) {
            exp[j] = 0;
            for (int r = 0; r < size; r++)
                exp[j] += rv(r, j, root);
        }
        check_ints("result", rbuf, exp, (size_t)n);
        check_guards("result", rbuf, (size_t)n);
        free(exp);
    }
    /* the send buffer must not change */
    int *orig = xmalloc_ints((size_t)n);
    for (int j = 0; j < n; j++)
        orig[j] = rv(rank, j, root);
    check_ints("send buffer", sbuf, orig, (size_t)n);
    check_guards("send buffer", sbuf, (size_t)n);
    free(orig);
    free_g(sbuf);
    free_g(rbuf);
}

static void test_allreduce(int n, int inplace, MPI_Op op)
{
    int is_max = op == MPI_MAX;
    snprintf(ctx, sizeof ctx, "Allreduce %s n=%d%s", is_max ? "MAX" : "SUM", n,
             inplace ? " IN_PLACE" : "");
    int *sbuf = alloc_g((size_t)n), *rbuf = alloc_g((size_t)n);
    for (int j = 0; j < n; j++) {
        if (inplace)
            rbuf[j] = rv(rank, j, 2);
        else
            sbuf[j] = rv(rank, j, 2);
    }
    CHECK_MPI(MPI_Allreduce(inplace ? MPI_IN_PLACE : sbuf, rbuf, n, MPI_INT, op, comm));
    int *exp = xmalloc_ints((size_t)n);
    for (int j = 0; j < n; j++) {
        exp[j] = rv(0, j, 2);
        for (int r = 1; r < size; r++) {
            int v = rv(r, j, 2);
            exp[j] = is_max ? (v > exp[j] ? v : exp[j]) : exp[j] + v;
        }
    }
    check_ints("result", rbuf, exp, (size_t)n);
    check_guards("result", rbuf, (size_t)n);
    free(exp);
    free_g(sbuf);
    free_g(rbuf);
}

static void test_gather(int n, int root, int inplace)
{
    snprintf(ctx, sizeof ctx, "Gather n=%d root=%d%s", n, root, inplace ? " IN_PLACE" : "");
    size_t tot = (size_t)n * (size_t)size;
    int *sbuf = alloc_g((size_t)n), *rbuf = NULL;
    for (int j = 0; j < n; j++)
        sbuf[j] = gen(rank, 2, j);
    const void *sp = sbuf;
    if (rank == root) {
        rbuf = alloc_g(tot);
        if (inplace) {
            for (int j = 0; j < n; j++)
                rbuf[(size_t)root * (size_t)n + (size_t)j] = gen(root, 2, j);
            sp = MPI_IN_PLACE;
        }
    }
    CHECK_MPI(MPI_Gather(sp, n, MPI_INT, rbuf, n, MPI_INT, root, comm));
    if (rank == root) {
        int *exp = xmalloc_ints(tot);
        for (int i = 0; i < size; i++)
            for (int j = 0; j < n; j++)
                exp[(size_t)i * (size_t)n + (size_t)j] = gen(i, 2, j);
        check_ints("receive buffer", rbuf, exp, tot);
        check_guards("receive buffer", rbuf, tot);
        free(exp);
    }
    free_g(sbuf);
    free_g(rbuf);
}

static void test_gatherv(int n, int root, int inplace)
{
    snprintf(ctx, sizeof ctx, "Gatherv n=%d root=%d%s", n, root, inplace ? " IN_PLACE" : "");
    int *cnt = xmalloc_ints((size_t)size), *displs = xmalloc_ints((size_t)size);
    for (int i = 0; i < size; i++)
        cnt[i] = vc(n, i);
    size_t len = rev_displs(cnt, displs);
    int mine = cnt[rank];
    int *sbuf = alloc_g((size_t)mine), *rbuf = NULL;
    for (int j = 0; j < mine; j++)
        sbuf[j] = gen(rank, 3, j);
    const void *sp = sbuf;
    if (rank == root) {
        rbuf = alloc_g(len);
        if (inplace) {
            for (int j = 0; j < mine; j++)
                rbuf[displs[root] + j] = gen(root, 3, j);
            sp = MPI_IN_PLACE;
        }
    }
    CHECK_MPI(MPI_Gatherv(sp, mine, MPI_INT, rbuf, cnt, displs, MPI_INT, root, comm));
    if (rank == root) {
        int *exp = xmalloc_ints(len);
        for (size_t k = 0; k < len; k++)
            exp[k] = GV;
        for (int i = 0; i < size; i++)
            for (int j = 0; j < cnt[i]; j++)
                exp[displs[i] + j] = gen(i, 3, j);
        check_ints("receive buffer (gaps must stay untouched)", rbuf, exp, len);
        check_guards("receive buffer", rbuf, len);
        free(exp);
    }
    free_g(sbuf);
    free_g(rbuf);
    free(cnt);
    free(displs);
}

static void test_scatter(int n, int root, int inplace)
{
    snprintf(ctx, sizeof ctx, "Scatter n=%d root=%d%s", n, root, inplace ? " IN_PLACE" : "");
    size_t tot = (size_t)n * (size_t)size;
    int *sbuf = NULL, *rbuf = alloc_g((size_t)n), *exp_s = NULL;
    if (rank == root) {
        sbuf = alloc_g(tot);
        exp_s = xmalloc_ints(tot);
        for (int i = 0; i < size; i++)
            for (int j = 0; j < n; j++)
                sbuf[(size_t)i * (size_t)n + (size_t)j] = exp_s[(size_t)i * (size_t)n + (size_t)j] =
                    gen(i, 4, j);
    }
    void *rp = (rank == root && inplace) ? MPI_IN_PLACE : rbuf;
    CHECK_MPI(MPI_Scatter(sbuf, n, MPI_INT, rp, n, MPI_INT, root, comm));
    if (rp != MPI_IN_PLACE) {
        int *exp = xmalloc_ints((size_t)n);
        for (int j = 0; j < n; j++)
            exp[j] = gen(rank, 4, j);
        check_ints("receive buffer", rbuf, exp, (size_t)n);
        free(exp);
    } else {
        for (int j = 0; j < n; j++)
            if (rbuf[j] != GV) {
                CHECK(0, "%s %s: unused receive buffer written at %d", cname, ctx, j);
                break;
            }
    }
    check_guards("receive buffer", rbuf, (size_t)n);
    if (rank == root) {
        check_ints("send buffer (must not change)", sbuf, exp_s, tot);
        check_guards("send buffer", sbuf, tot);
    }
    free(exp_s);
    free_g(sbuf);
    free_g(rbuf);
}

static void test_scatterv(int n, int root, int inplace)
{
    snprintf(ctx, sizeof ctx, "Scatterv n=%d root=%d%s", n, root, inplace ? " IN_PLACE" : "");
    int *cnt = xmalloc_ints((size_t)size), *displs = xmalloc_ints((size_t)size);
    for (int i = 0; i < size; i++)
        cnt[i] = vc(n, (i + 1) % size); /* a different unevenness than Gatherv */
    size_t len = rev_displs(cnt, displs);
    int mine = cnt[rank];
    int *sbuf = NULL, *exp_s = NULL, *rbuf = alloc_g((size_t)mine);
    if (rank == root) {
        sbuf = alloc_g(len);
        exp_s = xmalloc_ints(len);
        for (size_t k = 0; k < len; k++)
            sbuf[k] = exp_s[k] = GV - 1; /* gaps: never sent */
        for (int i = 0; i < size; i++)
            for (int j = 0; j < cnt[i]; j++)
                sbuf[displs[i] + j] = exp_s[displs[i] + j] = gen(i, 5, j);
    }
    void *rp = (rank == root && inplace) ? MPI_IN_PLACE : rbuf;
    CHECK_MPI(MPI_Scatterv(sbuf, cnt, displs, MPI_INT, rp, mine, MPI_INT, root, comm));
    if (rp != MPI_IN_PLACE) {
        int *exp = xmalloc_ints((size_t)mine);
        for (int j = 0; j < mine; j++)
            exp[j] = gen(rank, 5, j);
        check_ints("receive buffer", rbuf, exp, (size_t)mine);
        free(exp);
    }
    check_guards("receive buffer", rbuf, (size_t)mine);
    if (rank == root) {
        check_ints("send buffer (must not change)", sbuf, exp_s, len);
        check_guards("send buffer", sbuf, len);
    }
    free(exp_s);
    free_g(sbuf);
    free_g(rbuf);
    free(cnt);
    free(displs);
}

static void test_allgather(int n, int inplace)
{
    snprintf(ctx, sizeof ctx, "Allgather n=%d%s", n, inplace ? " IN_PLACE" : "");
    size_t tot = (size_t)n * (size_t)size;
    int *sbuf = alloc_g((size_t)n), *rbuf = alloc_g(tot);
    for (int j = 0; j < n; j++) {
        if (inplace)
            rbuf[(size_t)rank * (size_t)n + (size_t)j] = gen(rank, 6, j);
        else
            sbuf[j] = gen(rank, 6, j);
    }
    CHECK_MPI(MPI_Allgather(inplace ? MPI_IN_PLACE : sbuf, n, MPI_INT, rbuf, n, MPI_INT, comm));
    int *exp = xmalloc_ints(tot);
    for (int i = 0; i < size; i++)
        for (int j = 0; j < n; j++)
            exp[(size_t)i * (size_t)n + (size_t)j] = gen(i, 6, j);
    check_ints("receive buffer", rbuf, exp, tot);
    check_guards("receive buffer", rbuf, tot);
    free(exp);
    free_g(sbuf);
    free_g(rbuf);
}

static void test_allgatherv(int n, int inplace)
{
    if (MPICH_BUG(size == 1 && !inplace))
        return;
    snprintf(ctx, sizeof ctx, "Allgatherv n=%d%s", n, inplace ? " IN_PLACE" : "");
    int *cnt = xmalloc_ints((size_t)size), *displs = xmalloc_ints((size_t)size);
    for (int i = 0; i < size; i++)
        cnt[i] = vc(n, i);
    size_t len = rev_displs(cnt, displs);
    int mine = cnt[rank];
    int *sbuf = alloc_g((size_t)mine), *rbuf = alloc_g(len);
    for (int j = 0; j < mine; j++) {
        if (inplace)
            rbuf[displs[rank] + j] = gen(rank, 7, j);
        else
            sbuf[j] = gen(rank, 7, j);
    }
    CHECK_MPI(MPI_Allgatherv(inplace ? MPI_IN_PLACE : sbuf, mine, MPI_INT, rbuf, cnt, displs,
                             MPI_INT, comm));
    int *exp = xmalloc_ints(len);
    for (size_t k = 0; k < len; k++)
        exp[k] = GV;
    for (int i = 0; i < size; i++)
        for (int j = 0; j < cnt[i]; j++)
            exp[displs[i] + j] = gen(i, 7, j);
    check_ints("receive buffer (gaps must stay untouched)", rbuf, exp, len);
    check_guards("receive buffer", rbuf, len);
    free(exp);
    free_g(sbuf);
    free_g(rbuf);
    free(cnt);
    free(displs);
}

static void test_alltoall(int n, int inplace)
{
    snprintf(ctx, sizeof ctx, "Alltoall n=%d%s", n, inplace ? " IN_PLACE" : "");
    size_t tot = (size_t)n * (size_t)size;
    int *sbuf = alloc_g(tot), *rbuf = alloc_g(tot);
    int *dst = inplace ? rbuf : sbuf;
    for (int d = 0; d < size; d++)
        for (int j = 0; j < n; j++)
            dst[(size_t)d * (size_t)n + (size_t)j] = gen(rank, d, j);
    CHECK_MPI(MPI_Alltoall(inplace ? MPI_IN_PLACE : sbuf, n, MPI_INT, rbuf, n, MPI_INT, comm));
    int *exp = xmalloc_ints(tot);
    for (int s = 0; s < size; s++)
        for (int j = 0; j < n; j++)
            exp[(size_t)s * (size_t)n + (size_t)j] = gen(s, rank, j);
    check_ints("receive buffer", rbuf, exp, tot);
    check_guards("receive buffer", rbuf, tot);
    free(exp);
    free_g(sbuf);
    free_g(rbuf);
}

/* count sent from rank r to rank d: asymmetric, or symmetric for IN_PLACE
   (where what r sends to d must match what d expects from r) */
static int a2a_count(int n, int r, int d, int symmetric)
{
    if (n == 0 || (r + d) % 3 == 0)
        return 0;
    return symmetric ? n + r + d : n + r + 2 * d;
}

static void test_alltoallv(int n, int inplace)
{
    snprintf(ctx, sizeof ctx, "Alltoallv n=%d%s", n, inplace ? " IN_PLACE" : "");
    int *scnt = xmalloc_ints((size_t)size), *sdis = xmalloc_ints((size_t)size);
    int *rcnt = xmalloc_ints((size_t)size), *rdis = xmalloc_ints((size_t)size);
    for (int i = 0; i < size; i++) {
        scnt[i] = a2a_count(n, rank, i, inplace);
        rcnt[i] = a2a_count(n, i, rank, inplace);
    }
    size_t slen = fwd_displs(scnt, sdis);
    size_t rlen = rev_displs(rcnt, rdis);
    int *sbuf = alloc_g(slen), *rbuf = alloc_g(rlen);
    if (inplace) {
        for (int d = 0; d < size; d++)
            for (int j = 0; j < rcnt[d]; j++)
                rbuf[rdis[d] + j] = gen(rank, d, j);
    } else {
        for (int d = 0; d < size; d++)
            for (int j = 0; j < scnt[d]; j++)
                sbuf[sdis[d] + j] = gen(rank, d, j);
    }
    CHECK_MPI(MPI_Alltoallv(inplace ? MPI_IN_PLACE : sbuf, scnt, sdis, MPI_INT, rbuf, rcnt, rdis,
                            MPI_INT, comm));
    int *exp = xmalloc_ints(rlen);
    for (size_t k = 0; k < rlen; k++)
        exp[k] = GV;
    for (int s = 0; s < size; s++)
        for (int j = 0; j < rcnt[s]; j++)
            exp[rdis[s] + j] = gen(s, rank, j);
    check_ints("receive buffer (gaps must stay untouched)", rbuf, exp, rlen);
    check_guards("receive buffer", rbuf, rlen);
    free(exp);
    free_g(sbuf);
    free_g(rbuf);
    free(scnt);
    free(sdis);
    free(rcnt);
    free(rdis);
}

static void test_reduce_scatter_block(int n, int inplace)
{
    snprintf(ctx, sizeof ctx, "Reduce_scatter_block SUM n=%d%s", n, inplace ? " IN_PLACE" : "");
    size_t tot = (size_t)n * (size_t)size;
    int *sbuf = alloc_g(tot), *rbuf = alloc_g(inplace ? tot : (size_t)n);
    int *src = inplace ? rbuf : sbuf;
    for (size_t k = 0; k < tot; k++)
        src[k] = rv(rank, (int)k, 5);
    CHECK_MPI(
        MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : sbuf, rbuf, n, MPI_INT, MPI_SUM, comm));
    int *exp = xmalloc_ints((size_t)n);
    for (int j = 0; j < n; j++) {
        exp[j] = 0;
        for (int r = 0; r < size; r++)
            exp[j] += rv(r, rank * n + j, 5);
    }
    check_ints("result", rbuf, exp, (size_t)n);
    check_guards("receive buffer", rbuf, inplace ? tot : (size_t)n);
    free(exp);
    free_g(sbuf);
    free_g(rbuf);
}

static void test_reduce_scatter(int n, int inplace)
{
    if (MPICH_BUG(inplace && n >= 100000))
        return;
    snprintf(ctx, sizeof ctx, "Reduce_scatter SUM n=%d%s", n, inplace ? " IN_PLACE" : "");
    int *cnt = xmalloc_ints((size_t)size);
    size_t tot = 0, off = 0;
    for (int i = 0; i < size; i++) {
        cnt[i] = vc(n, (i + 2) % size);
        if (i < rank)
            off += (size_t)cnt[i];
        tot += (size_t)cnt[i];
    }
    int mine = cnt[rank];
    int *sbuf = alloc_g(tot), *rbuf = alloc_g(inplace ? tot : (size_t)mine);
    int *src = inplace ? rbuf : sbuf;
    for (size_t k = 0; k < tot; k++)
        src[k] = rv(rank, (int)k, 6);
    CHECK_MPI(MPI_Reduce_scatter(inplace ? MPI_IN_PLACE : sbuf, rbuf, cnt, MPI_INT, MPI_SUM, comm));
    int *exp = xmalloc_ints((size_t)mine);
    for (int j = 0; j < mine; j++) {
        exp[j] = 0;
        for (int r = 0; r < size; r++)
            exp[j] += rv(r, (int)off + j, 6);
    }
    check_ints("result", rbuf, exp, (size_t)mine);
    check_guards("receive buffer", rbuf, inplace ? tot : (size_t)mine);
    free(exp);
    free_g(sbuf);
    free_g(rbuf);
    free(cnt);
}

static void test_scan(int n, int inplace, int exclusive)
{
    snprintf(ctx, sizeof ctx, "%s SUM n=%d%s", exclusive ? "Exscan" : "Scan", n,
             inplace ? " IN_PLACE" : "");
    int *sbuf = alloc_g((size_t)n), *rbuf = alloc_g((size_t)n);
    int *src = inplace ? rbuf : sbuf;
    for (int j = 0; j < n; j++)
        src[j] = rv(rank, j, 7);
    const void *sp = inplace ? MPI_IN_PLACE : sbuf;
    if (exclusive)
        CHECK_MPI(MPI_Exscan(sp, rbuf, n, MPI_INT, MPI_SUM, comm));
    else
        CHECK_MPI(MPI_Scan(sp, rbuf, n, MPI_INT, MPI_SUM, comm));
    if (!exclusive || rank > 0) { /* Exscan: rank 0's receive buffer is undefined */
        int *exp = xmalloc_ints((size_t)n);
        int last = exclusive ? rank - 1 : rank;
        for (int j = 0; j < n; j++) {
            exp[j] = 0;
            for (int r = 0; r <= last; r++)
                exp[j] += rv(r, j, 7);
        }
        check_ints("result", rbuf, exp, (size_t)n);
        free(exp);
    }
    check_guards("receive buffer", rbuf, (size_t)n);
    free_g(sbuf);
    free_g(rbuf);
}

/* ---- MPI_DOUBLE_INT: 12 bytes of data in a 16-byte extent ---- */

typedef struct {
    double d;
    int i;
} dint;

static dint *alloc_dint(size_t n)
{
    dint *p = malloc((n + 2 * NG) * sizeof(dint));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (size_t k = 0; k < n + 2 * NG; k++) {
        p[k].d = -0.5;
        p[k].i = GV;
    }
    return p + NG;
}

static void check_dint(const char *what, const dint *got, size_t n, int a, int b)
{
    for (int k = 1; k <= NG; k++) {
        if (got[-k].d != -0.5 || got[-k].i != GV || got[n + (size_t)k - 1].d != -0.5 ||
            got[n + (size_t)k - 1].i != GV) {
            CHECK(0, "%s %s: %s: guard elements overwritten", cname, ctx, what);
            break;
        }
    }
    for (size_t j = 0; j < n; j++) {
        double ed = (double)gen(a, b, (int)j) + 0.25;
        int ei = -(int)j - a;
        if (got[j].d != ed || got[j].i != ei) {
            CHECK(0, "%s %s: %s: element %zu is {%g, %d}, expected {%g, %d}", cname, ctx, what, j,
                  got[j].d, got[j].i, ed, ei);
            return;
        }
    }
}

static void fill_dint(dint *p, size_t n, int a, int b)
{
    for (size_t j = 0; j < n; j++) {
        p[j].d = (double)gen(a, b, (int)j) + 0.25;
        p[j].i = -(int)j - a;
    }
}

static void test_bcast_dint(int n, int root)
{
    snprintf(ctx, sizeof ctx, "Bcast MPI_DOUBLE_INT n=%d root=%d", n, root);
    dint *buf = alloc_dint((size_t)n);
    if (rank == root)
        fill_dint(buf, (size_t)n, root, 8);
    CHECK_MPI(MPI_Bcast(buf, n, MPI_DOUBLE_INT, root, comm));
    check_dint("buffer", buf, (size_t)n, root, 8);
    free(buf - NG);
}

static void test_gather_dint(int n, int root)
{
    if (MPICH_BUG(n >= 500))
        return;
    snprintf(ctx, sizeof ctx, "Gather MPI_DOUBLE_INT n=%d root=%d", n, root);
    dint *sbuf = alloc_dint((size_t)n), *rbuf = NULL;
    fill_dint(sbuf, (size_t)n, rank, 9);
    size_t tot = (size_t)n * (size_t)size;
    if (rank == root)
        rbuf = alloc_dint(tot);
    CHECK_MPI(MPI_Gather(sbuf, n, MPI_DOUBLE_INT, rbuf, n, MPI_DOUBLE_INT, root, comm));
    if (rank == root) {
        /* check each block, then the guards around the whole buffer */
        for (int i = 0; i < size; i++) {
            char what[64];
            snprintf(what, sizeof what, "block from rank %d", i);
            for (size_t j = 0; j < (size_t)n; j++) {
                const dint *e = &rbuf[(size_t)i * (size_t)n + j];
                double ed = (double)gen(i, 9, (int)j) + 0.25;
                int ei = -(int)j - i;
                if (e->d != ed || e->i != ei) {
                    CHECK(0, "%s %s: %s: element %zu is {%g, %d}, expected {%g, %d}", cname, ctx,
                          what, j, e->d, e->i, ed, ei);
                    break;
                }
            }
        }
        int ok = 1;
        for (int k = 1; k <= NG; k++)
            if (rbuf[-k].i != GV || rbuf[tot + (size_t)k - 1].i != GV ||
                rbuf[-k].d != -0.5 || rbuf[tot + (size_t)k - 1].d != -0.5)
                ok = 0;
        CHECK(ok, "%s %s: guard elements overwritten", cname, ctx);
        free(rbuf - NG);
    }
    free(sbuf - NG);
}

/* ------------------------------------------------------------------ */

static void run_all(MPI_Comm c, const char *name)
{
    comm = c;
    cname = name;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);

    CHECK_MPI(MPI_Barrier(comm));
    for (int ci = 0; ci < NCOUNTS; ci++) {
        int n = counts[ci];
        for (int root = 0; root < size; root++) {
            /* large messages: first, middle and last root only (run time) */
            if (n >= 100000 && root != 0 && root != size / 2 && root != size - 1)
                continue;
            test_bcast(n, root);
            test_bcast_dint(n, root);
            test_gather_dint(n, root);
            for (int ip = 0; ip < 2; ip++) {
                test_reduce(n, root, ip);
                test_gather(n, root, ip);
                test_gatherv(n, root, ip);
                test_scatter(n, root, ip);
                test_scatterv(n, root, ip);
            }
        }
        for (int ip = 0; ip < 2; ip++) {
            test_allreduce(n, ip, MPI_SUM);
            test_allreduce(n, ip, MPI_MAX);
            test_allgather(n, ip);
            test_allgatherv(n, ip);
            test_alltoall(n, ip);
            test_alltoallv(n, ip);
            test_reduce_scatter_block(n, ip);
            test_reduce_scatter(n, ip);
            test_scan(n, ip, 0);
            test_scan(n, ip, 1);
        }
        CHECK_MPI(MPI_Barrier(comm));
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    run_all(MPI_COMM_WORLD, "WORLD");

    /* odd / even world ranks, in reverse order: comm rank != world rank */
    MPI_Comm split;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &split));
    run_all(split, wrank % 2 ? "split(odd)" : "split(even)");
    MPI_Comm_free(&split);

    return check_finish("coll_basic");
}
