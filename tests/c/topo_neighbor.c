/* ranks: 1 2 3 4 5 8 */
/* Neighbourhood collectives: Neighbor_allgather(v) and Neighbor_alltoall(v,w), blocking,
   nonblocking and persistent (started twice), plain and _c, on a periodic ring, a 2-D torus,
   a non-periodic 2-D grid (MPI_PROC_NULL borders), a ring graph and an asymmetric distributed
   graph. Neighbour lists are computed here by hand and checked against the topology queries;
   every received value is checked against what the sending neighbour must have sent, using
   the standard's pairing: on a grid block s of the sender lands in block s^1 of the receiver
   (this matters on periodic dimensions of size 1 and 2), on a graph the k-th edge to a process
   meets the k-th edge from it. Blocks from MPI_PROC_NULL and gaps between blocks stay as they
   were. */
#include "check.h"

/* GCC >= 11 reads MPI_UNWEIGHTED, a small integer cast to a pointer, as an array of size 0
   and warns (-Wstringop-overread); the warning is spurious. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif

#define MAXN 64   /* processes at most */
#define MAXNB 8   /* neighbours per rank */
#define MAXC 3    /* largest count per block */
#define SENT (-777)

static int rank, size;

typedef struct {
    const char *name;
    MPI_Comm comm;
    int cart;
    int nsrc[MAXN], src[MAXN][MAXNB];
    int ndst[MAXN], dst[MAXN][MAXNB];
} topo_t;

enum { BLOCKING, NONBLOCKING, PERSISTENT };
static const char *form_name[] = {"blocking", "nonblocking", "persistent"};

static int val(int r, int block, int j, int round) { return round * 100000 + r * 1000 + block * 10 + j; }

/* Elements rank a sends to rank b in the v and w calls; 1 when either is MPI_PROC_NULL. */
static int cnt(int a, int b) { return (a < 0 || b < 0) ? 1 : 1 + (a + 2 * b) % 3; }
/* Elements rank a sends to every neighbour in allgatherv. */
static int gcnt(int a) { return a < 0 ? 1 : 1 + a % 3; }

/* The send block of source s that lands in receive block i of this process. */
static int pair_block(const topo_t *t, int i)
{
    if (t->cart)
        return i ^ 1;
    int s = t->src[rank][i], o = 0;
    for (int j = 0; j < i; j++)
        o += t->src[rank][j] == s;
    for (int k = 0; k < t->ndst[s]; k++)
        if (t->dst[s][k] == rank && o-- == 0)
            return k;
    return -1;
}

/* ----- topologies ----- */

static void cart_lists(topo_t *t, int nd, const int *dims, const int *periods)
{
    for (int r = 0; r < size; r++) {
        int co[2], n = 0;
        co[nd - 1] = r % dims[nd - 1];
        if (nd == 2)
            co[0] = r / dims[1];
        for (int d = 0; d < nd; d++)
            for (int step = -1; step <= 1; step += 2) {
                int c2[2] = {co[0], nd == 2 ? co[1] : 0}, x = co[d] + step, nb;
                if (x < 0 || x >= dims[d]) {
                    if (!periods[d]) {
                        t->src[r][n] = t->dst[r][n] = MPI_PROC_NULL;
                        n++;
                        continue;
                    }
                    x = (x + dims[d]) % dims[d];
                }
                c2[d] = x;
                nb = nd == 2 ? c2[0] * dims[1] + c2[1] : c2[0];
                t->src[r][n] = t->dst[r][n] = nb;
                n++;
            }
        t->nsrc[r] = t->ndst[r] = n;
    }
}

static void make_cart(topo_t *t, const char *name, int nd, int periodic)
{
    int dims[2] = {0, 0}, periods[2] = {periodic, periodic};
    MPI_Dims_create(size, nd, dims);
    t->name = name;
    t->cart = 1;
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, nd, dims, periods, 0, &t->comm));
    cart_lists(t, nd, dims, periods);
    /* The hand-made lists agree with Cart_shift. */
    for (int d = 0; d < nd; d++) {
        int s, e;
        MPI_Cart_shift(t->comm, d, 1, &s, &e);
        CHECK(t->src[rank][2 * d] == s && t->src[rank][2 * d + 1] == e, "%s: dim %d neighbours %d,%d vs %d,%d",
              name, d, t->src[rank][2 * d], t->src[rank][2 * d + 1], s, e);
    }
}

static void make_graph_ring(topo_t *t)
{
    int index[MAXN], edges[2 * MAXN];
    for (int r = 0; r < size; r++) {
        index[r] = 2 * (r + 1);
        edges[2 * r] = (r + 1) % size;
        edges[2 * r + 1] = (r - 1 + size) % size;
        t->nsrc[r] = t->ndst[r] = 2;
        for (int k = 0; k < 2; k++)
            t->src[r][k] = t->dst[r][k] = edges[2 * r + k];
    }
    t->name = "graph ring";
    t->cart = 0;
    CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &t->comm));
}

/* r -> r+1 and r -> 2r+1 (mod size); sources listed in decreasing rank order, so that the
   order differs from the destinations'. */
static void make_dist_graph(topo_t *t)
{
    for (int r = 0; r < size; r++) {
        t->ndst[r] = 2;
        t->dst[r][0] = (r + 1) % size;
        t->dst[r][1] = (2 * r + 1) % size;
        t->nsrc[r] = 0;
    }
    for (int k = size - 1; k >= 0; k--)
        for (int e = 0; e < 2; e++) {
            int d = t->dst[k][e];
            t->src[d][t->nsrc[d]++] = k;
        }
    t->name = "asymmetric dist graph";
    t->cart = 0;
    CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, t->nsrc[rank], t->src[rank], MPI_UNWEIGHTED,
                                             t->ndst[rank], t->dst[rank], MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                             &t->comm));
    int s[MAXNB], d[MAXNB], indeg, outdeg, w;
    MPI_Dist_graph_neighbors_count(t->comm, &indeg, &outdeg, &w);
    MPI_Dist_graph_neighbors(t->comm, MAXNB, s, MPI_UNWEIGHTED, MAXNB, d, MPI_UNWEIGHTED);
    CHECK(indeg == t->nsrc[rank] && outdeg == 2, "dist graph: degrees %d,%d", indeg, outdeg);
    for (int i = 0; i < indeg && i < MAXNB; i++)
        CHECK(s[i] == t->src[rank][i], "dist graph: source %d is %d", i, s[i]);
}

/* ----- running one call in one form ----- */

typedef enum { AG, AGV, A2A, A2AV, A2AW } op_t;
static const char *op_name[] = {"allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw"};

/* Buffers of one call; layouts are set up by prepare() and checked by verify(). */
typedef struct {
    int sbuf[MAXNB * (MAXC + 1) * 2], rbuf[MAXNB * (MAXC + 1) * 2];
    int scounts[MAXNB], sdispls[MAXNB], rcounts[MAXNB], rdispls[MAXNB];
    MPI_Count scounts_c[MAXNB], rcounts_c[MAXNB];
    MPI_Aint sdispls_a[MAXNB], rdispls_a[MAXNB];
    MPI_Datatype stypes[MAXNB], rtypes[MAXNB];
    int sc, rc; /* allgather / alltoall counts */
} bufs_t;

static void fill_send(const topo_t *t, op_t op, bufs_t *b, int round)
{
    int nd = t->ndst[rank];
    for (size_t i = 0; i < sizeof b->sbuf / sizeof(int); i++)
        b->sbuf[i] = SENT;
    if (op == AG || op == AGV) {
        int n = op == AG ? 2 : gcnt(rank);
        for (int j = 0; j < n; j++)
            b->sbuf[j] = val(rank, 0, j, round);
    } else if (op == A2A) {
        for (int k = 0; k < nd; k++)
            for (int j = 0; j < 2; j++)
                b->sbuf[2 * k + j] = val(rank, k, j, round);
    } else {
        for (int k = 0; k < nd; k++)
            for (int j = 0; j < b->scounts[k]; j++)
                b->sbuf[b->sdispls[k] + j] = val(rank, k, j, round);
    }
    for (size_t i = 0; i < sizeof b->rbuf / sizeof(int); i++)
        b->rbuf[i] = SENT;
}

static void prepare(const topo_t *t, op_t op, bufs_t *b)
{
    int nd = t->ndst[rank], ns = t->nsrc[rank], at = 0;
    b->sc = b->rc = 2;
    for (int k = 0; k < nd; k++) {
        b->scounts[k] = cnt(rank, t->dst[rank][k]);
        b->sdispls[k] = at;
        at += b->scounts[k] + 1; /* one element of gap after each block */
        b->scounts_c[k] = b->scounts[k];
        b->sdispls_a[k] = op == A2AW ? (MPI_Aint)(b->sdispls[k] * sizeof(int)) : b->sdispls[k];
        b->stypes[k] = MPI_INT;
    }
    at = 0;
    for (int i = 0; i < ns; i++) {
        int s = t->src[rank][i];
        b->rcounts[i] = op == AGV ? gcnt(s) : cnt(s, rank);
        b->rdispls[i] = at;
        b->rcounts_c[i] = b->rcounts[i];
        if (op == A2AW) {
            /* Every other int: a strided type of rcounts[i] elements, sent as one. */
            MPI_Type_vector(b->rcounts[i], 1, 2, MPI_INT, &b->rtypes[i]);
            MPI_Type_commit(&b->rtypes[i]);
            b->rdispls_a[i] = (MPI_Aint)(at * sizeof(int));
            at += 2 * b->rcounts[i] + 1;
        } else {
            b->rtypes[i] = MPI_INT;
            b->rdispls_a[i] = b->rdispls[i];
            at += b->rcounts[i] + 1;
        }
    }
    if (op == A2AW)
        for (int i = 0; i < ns; i++)
            b->rcounts[i] = 1, b->rcounts_c[i] = 1;
}

static void release(const topo_t *t, op_t op, bufs_t *b)
{
    if (op == A2AW)
        for (int i = 0; i < t->nsrc[rank]; i++)
            MPI_Type_free(&b->rtypes[i]);
}

/* Starts (or runs) the call; persistent and nonblocking forms return the request. */
static int start(const topo_t *t, op_t op, int form, int large, bufs_t *b, MPI_Request *req)
{
    MPI_Comm c = t->comm;
    int *sb = b->sbuf, *rb = b->rbuf;
#define FORMS(NAME, ...)                                                                           \
    (form == BLOCKING      ? MPI_Neighbor_##NAME(__VA_ARGS__)                                        \
     : form == NONBLOCKING ? MPI_Ineighbor_##NAME(__VA_ARGS__, req)                                  \
                           : MPI_Neighbor_##NAME##_init(__VA_ARGS__, MPI_INFO_NULL, req))
#define FORMS_C(NAME, ...)                                                                         \
    (form == BLOCKING      ? MPI_Neighbor_##NAME##_c(__VA_ARGS__)                                    \
     : form == NONBLOCKING ? MPI_Ineighbor_##NAME##_c(__VA_ARGS__, req)                              \
                           : MPI_Neighbor_##NAME##_init_c(__VA_ARGS__, MPI_INFO_NULL, req))
    switch (op) {
    case AG:
        if (large)
            return FORMS_C(allgather, sb, b->sc, MPI_INT, rb, b->rc, MPI_INT, c);
        return FORMS(allgather, sb, b->sc, MPI_INT, rb, b->rc, MPI_INT, c);
    case AGV:
        if (large)
            return FORMS_C(allgatherv, sb, gcnt(rank), MPI_INT, rb, b->rcounts_c, b->rdispls_a, MPI_INT, c);
        return FORMS(allgatherv, sb, gcnt(rank), MPI_INT, rb, b->rcounts, b->rdispls, MPI_INT, c);
    case A2A:
        if (large)
            return FORMS_C(alltoall, sb, b->sc, MPI_INT, rb, b->rc, MPI_INT, c);
        return FORMS(alltoall, sb, b->sc, MPI_INT, rb, b->rc, MPI_INT, c);
    case A2AV:
        if (large)
            return FORMS_C(alltoallv, sb, b->scounts_c, b->sdispls_a, MPI_INT, rb, b->rcounts_c, b->rdispls_a,
                           MPI_INT, c);
        return FORMS(alltoallv, sb, b->scounts, b->sdispls, MPI_INT, rb, b->rcounts, b->rdispls, MPI_INT, c);
    case A2AW:
        if (large)
            return FORMS_C(alltoallw, sb, b->scounts_c, b->sdispls_a, b->stypes, rb, b->rcounts_c, b->rdispls_a,
                           b->rtypes, c);
        return FORMS(alltoallw, sb, b->scounts, b->sdispls_a, b->stypes, rb, b->rcounts, b->rdispls_a, b->rtypes,
                     c);
    }
#undef FORMS_C
#undef FORMS
    return MPI_ERR_OTHER;
}

static void verify(const topo_t *t, op_t op, bufs_t *b, int round, const char *what)
{
    int ns = t->nsrc[rank];
    int expect[sizeof b->rbuf / sizeof(int)];
    for (size_t i = 0; i < sizeof expect / sizeof(int); i++)
        expect[i] = SENT;
    for (int i = 0; i < ns; i++) {
        int s = t->src[rank][i];
        if (s == MPI_PROC_NULL)
            continue;
        if (op == AG) {
            for (int j = 0; j < 2; j++)
                expect[2 * i + j] = val(s, 0, j, round);
        } else if (op == AGV) {
            for (int j = 0; j < gcnt(s); j++)
                expect[b->rdispls[i] + j] = val(s, 0, j, round);
        } else {
            int k = pair_block(t, i);
            int n = op == A2A ? 2 : cnt(s, rank);
            int base = op == A2A ? 2 * i : op == A2AW ? (int)(b->rdispls_a[i] / (MPI_Aint)sizeof(int)) : b->rdispls[i];
            int stride = op == A2AW ? 2 : 1;
            for (int j = 0; j < n; j++)
                expect[base + stride * j] = val(s, k, j, round);
        }
    }
    for (size_t i = 0; i < sizeof expect / sizeof(int); i++)
        if (b->rbuf[i] != expect[i]) {
            CHECK(0, "%s: rbuf[%zu] = %d, expected %d", what, i, b->rbuf[i], expect[i]);
            return;
        }
}

static void run(const topo_t *t, op_t op, int form, int large)
{
    char what[160];
    snprintf(what, sizeof what, "%s, %s%s, %s", t->name, op_name[op], large ? "_c" : "", form_name[form]);
    static bufs_t b;
    memset(&b, 0, sizeof b);
    prepare(t, op, &b);
    MPI_Request req = MPI_REQUEST_NULL;
    int rounds = form == PERSISTENT ? 2 : 1;
    fill_send(t, op, &b, 0);
    int rc = start(t, op, form, large, &b, &req);
    CHECK(rc == MPI_SUCCESS, "%s: call returned %d", what, rc);
    if (rc != MPI_SUCCESS) {
        release(t, op, &b);
        return;
    }
    for (int round = 0; round < rounds; round++) {
        if (round > 0)
            fill_send(t, op, &b, round);
        if (form == PERSISTENT)
            CHECK_MPI(MPI_Start(&req));
        if (form != BLOCKING)
            CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        verify(t, op, &b, round, what);
    }
    if (form == PERSISTENT)
        CHECK_MPI(MPI_Request_free(&req));
    release(t, op, &b);
}

static void test_errors(topo_t *t)
{
    int x[8] = {0}, y[64];
    CHECK_ERR_CLASS(MPI_Neighbor_allgather(x, 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_TOPOLOGY);
    MPI_Request r;
    CHECK_ERR_CLASS(MPI_Ineighbor_alltoall(x, 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_SELF, &r), MPI_ERR_TOPOLOGY);
    CHECK_ERR_CLASS(MPI_Neighbor_alltoall(MPI_IN_PLACE, 1, MPI_INT, y, 1, MPI_INT, t->comm), MPI_ERR_BUFFER);
    CHECK_ERR_CLASS(MPI_Neighbor_allgather(x, -1, MPI_INT, y, 1, MPI_INT, t->comm), MPI_ERR_COUNT);
    CHECK_ERR_CLASS(MPI_Neighbor_allgather(x, 1, MPI_DATATYPE_NULL, y, 1, MPI_INT, t->comm), MPI_ERR_TYPE);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (size > MAXN) {
        if (rank == 0)
            printf("SKIP topo_neighbor: more than %d ranks\n", MAXN);
        MPI_Finalize();
        return 0;
    }

    static topo_t topos[5];
    make_cart(&topos[0], "periodic ring", 1, 1);
    make_cart(&topos[1], "2-D torus", 2, 1);
    make_cart(&topos[2], "non-periodic 2-D grid", 2, 0);
    make_graph_ring(&topos[3]);
    make_dist_graph(&topos[4]);

    for (int ti = 0; ti < 5; ti++)
        for (int op = AG; op <= A2AW; op++)
            for (int form = BLOCKING; form <= PERSISTENT; form++)
                for (int large = 0; large <= 1; large++)
                    run(&topos[ti], (op_t)op, form, large);

    /* Several nonblocking calls in flight at once, completed in reverse order. */
    {
        topo_t *t = &topos[1];
        static bufs_t b1, b2;
        memset(&b1, 0, sizeof b1);
        memset(&b2, 0, sizeof b2);
        prepare(t, A2A, &b1);
        prepare(t, AG, &b2);
        fill_send(t, A2A, &b1, 3);
        fill_send(t, AG, &b2, 4);
        MPI_Request reqs[2];
        CHECK_MPI(MPI_Ineighbor_alltoall(b1.sbuf, 2, MPI_INT, b1.rbuf, 2, MPI_INT, t->comm, &reqs[0]));
        CHECK_MPI(MPI_Ineighbor_allgather(b2.sbuf, 2, MPI_INT, b2.rbuf, 2, MPI_INT, t->comm, &reqs[1]));
        CHECK_MPI(MPI_Wait(&reqs[1], MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
        verify(t, A2A, &b1, 3, "two in flight, alltoall");
        verify(t, AG, &b2, 4, "two in flight, allgather");
    }

    test_errors(&topos[0]);
    for (int ti = 0; ti < 5; ti++)
        MPI_Comm_free(&topos[ti].comm);
    return check_finish("topo_neighbor");
}
