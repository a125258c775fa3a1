/* ranks: 1 2 3 4 5 8 */
/* Distributed graphs: Dist_graph_create_adjacent on a weighted ring and unweighted; the
   non-adjacent Dist_graph_create where each process gives its own out-edges, where rank 0 gives
   every edge of an asymmetric graph (the others none, with MPI_WEIGHTS_EMPTY), with self-loops
   and repeated edges; in- and out-neighbours compared as sorted (rank, weight) lists against
   the edge list scanned by hand; weighted flags; info; dup; errors under MPI_ERRORS_RETURN. */
#include "check.h"

/* GCC >= 11 reads MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY, small integers cast to pointers, as
   arrays of size 0 and warns (-Wstringop-overread); the warning is spurious. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif

#define MAXE 256

static int rank, size;

typedef struct {
    int peer, weight;
} edge_t;

static void sort_edges(edge_t *e, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && (e[j - 1].peer > e[j].peer ||
                                  (e[j - 1].peer == e[j].peer && e[j - 1].weight > e[j].weight));
             j--) {
            edge_t t = e[j];
            e[j] = e[j - 1];
            e[j - 1] = t;
        }
}

/* Compares comm's neighbours of this process with the edges (src[i] -> dst[i], w[i]). */
static void check_neighbours(MPI_Comm comm, int n, const int *src, const int *dst, const int *w, int weighted,
                             const char *what)
{
    edge_t in[MAXE], out[MAXE], gin[MAXE], gout[MAXE];
    int nin = 0, nout = 0;
    for (int i = 0; i < n; i++) {
        if (dst[i] == rank)
            in[nin++] = (edge_t){src[i], weighted ? w[i] : 0};
        if (src[i] == rank)
            out[nout++] = (edge_t){dst[i], weighted ? w[i] : 0};
    }
    int indeg = -1, outdeg = -1, wtd = -1, st = -1;
    CHECK_MPI(MPI_Topo_test(comm, &st));
    CHECK(st == MPI_DIST_GRAPH, "%s: Topo_test %d", what, st);
    CHECK_MPI(MPI_Dist_graph_neighbors_count(comm, &indeg, &outdeg, &wtd));
    CHECK(indeg == nin && outdeg == nout, "%s: degrees %d,%d, expected %d,%d", what, indeg, outdeg, nin, nout);
    CHECK(!wtd == !weighted, "%s: weighted flag %d, expected %d", what, wtd, weighted);
    if (indeg != nin || outdeg != nout)
        return;
    int s[MAXE], sw[MAXE], d[MAXE], dw[MAXE];
    for (int i = 0; i < MAXE; i++)
        sw[i] = dw[i] = 0;
    if (weighted)
        CHECK_MPI(MPI_Dist_graph_neighbors(comm, nin, s, sw, nout, d, dw));
    else
        CHECK_MPI(MPI_Dist_graph_neighbors(comm, nin, s, MPI_UNWEIGHTED, nout, d, MPI_UNWEIGHTED));
    for (int i = 0; i < nin; i++)
        gin[i] = (edge_t){s[i], sw[i]};
    for (int i = 0; i < nout; i++)
        gout[i] = (edge_t){d[i], dw[i]};
    sort_edges(in, nin);
    sort_edges(gin, nin);
    sort_edges(out, nout);
    sort_edges(gout, nout);
    for (int i = 0; i < nin; i++)
        CHECK(in[i].peer == gin[i].peer && in[i].weight == gin[i].weight,
              "%s: in-edge %d is (%d, w%d), expected (%d, w%d)", what, i, gin[i].peer, gin[i].weight,
              in[i].peer, in[i].weight);
    for (int i = 0; i < nout; i++)
        CHECK(out[i].peer == gout[i].peer && out[i].weight == gout[i].weight,
              "%s: out-edge %d is (%d, w%d), expected (%d, w%d)", what, i, gout[i].peer, gout[i].weight,
              out[i].peer, out[i].weight);
}

static void test_adjacent(void)
{
    int left = (rank - 1 + size) % size, right = (rank + 1) % size;
    int sw = 10 * left + rank, dw = 10 * rank + right;
    MPI_Comm ring;
    CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, &sw, 1, &right, &dw, MPI_INFO_NULL, 0,
                                             &ring));
    /* Adjacent: the order is the one given, so compare exactly. */
    int s = -1, w1 = -1, d = -1, w2 = -1, indeg, outdeg, wtd;
    CHECK_MPI(MPI_Dist_graph_neighbors_count(ring, &indeg, &outdeg, &wtd));
    CHECK(indeg == 1 && outdeg == 1 && wtd, "adjacent ring: %d,%d weighted %d", indeg, outdeg, wtd);
    CHECK_MPI(MPI_Dist_graph_neighbors(ring, 1, &s, &w1, 1, &d, &w2));
    CHECK(s == left && w1 == sw && d == right && w2 == dw, "adjacent ring: (%d w%d) (%d w%d)", s, w1, d, w2);
    int r = -1, got = -1;
    MPI_Comm_rank(ring, &r);
    CHECK(r == rank, "adjacent ring: rank %d", r);
    CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, right, 2, &got, 1, MPI_INT, left, 2, ring, MPI_STATUS_IGNORE));
    CHECK(got == left, "adjacent ring: got %d", got);

    MPI_Comm dup;
    CHECK_MPI(MPI_Comm_dup(ring, &dup));
    s = d = -1;
    CHECK_MPI(MPI_Dist_graph_neighbors(dup, 1, &s, &w1, 1, &d, &w2));
    CHECK(s == left && d == right && w1 == sw && w2 == dw, "dup of a dist graph: (%d) (%d)", s, d);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&ring);

    /* Unweighted, with an info object, two sources and no destination on rank 0. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "baton_test_hint", "1");
    int srcs[2] = {left, right}, nout = rank == 0 ? 0 : 1;
    MPI_Comm u;
    CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, MPI_UNWEIGHTED, nout, &right,
                                             MPI_UNWEIGHTED, info, 1, &u));
    MPI_Info_free(&info);
    CHECK_MPI(MPI_Dist_graph_neighbors_count(u, &indeg, &outdeg, &wtd));
    CHECK(indeg == 2 && outdeg == nout && !wtd, "adjacent unweighted: %d,%d weighted %d", indeg, outdeg, wtd);
    int gs[2] = {-1, -1};
    CHECK_MPI(MPI_Dist_graph_neighbors(u, 2, gs, MPI_UNWEIGHTED, 0, NULL, MPI_UNWEIGHTED));
    CHECK(gs[0] == left && gs[1] == right, "adjacent unweighted: sources %d,%d", gs[0], gs[1]);
    MPI_Comm_free(&u);

    /* Weighted with no destinations: MPI_WEIGHTS_EMPTY. */
    CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, &sw, 0, NULL, MPI_WEIGHTS_EMPTY,
                                             MPI_INFO_NULL, 0, &u));
    CHECK_MPI(MPI_Dist_graph_neighbors_count(u, &indeg, &outdeg, &wtd));
    CHECK(indeg == 1 && outdeg == 0 && wtd, "adjacent weights-empty: %d,%d weighted %d", indeg, outdeg, wtd);
    MPI_Comm_free(&u);
}

/* Each process gives its own out-edges: r -> r+1 and r -> r+2. */
static void test_own_edges(void)
{
    int src[2 * 64], dst[2 * 64], w[2 * 64], n = 0;
    for (int p = 0; p < size; p++)
        for (int k = 1; k <= 2; k++) {
            src[n] = p;
            dst[n] = (p + k) % size;
            w[n] = 100 * p + k;
            n++;
        }
    int degree = 2;
    MPI_Comm g;
    CHECK_MPI(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &rank, &degree, &dst[2 * rank], &w[2 * rank],
                                    MPI_INFO_NULL, 0, &g));
    check_neighbours(g, n, src, dst, w, 1, "own edges");
    MPI_Comm dup;
    CHECK_MPI(MPI_Comm_dup(g, &dup));
    check_neighbours(dup, n, src, dst, w, 1, "own edges, dup");
    MPI_Comm_free(&dup);
    MPI_Comm_free(&g);

    /* The same, unweighted. */
    CHECK_MPI(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &rank, &degree, &dst[2 * rank], MPI_UNWEIGHTED,
                                    MPI_INFO_NULL, 0, &g));
    check_neighbours(g, n, src, dst, w, 0, "own edges, unweighted");
    MPI_Comm_free(&g);
}

/* Rank 0 gives every edge of an asymmetric graph: i -> 2i mod size, and i -> i+1 for even i,
   plus a self-loop given twice on the last rank. The others give none. */
static void test_one_gives_all(void)
{
    int src[3 * 64], dst[3 * 64], w[3 * 64], n = 0;
    int sources[64], degrees[64], flat_dst[3 * 64], flat_w[3 * 64], nsrc = 0, nflat = 0;
    for (int i = 0; i < size; i++) {
        int first = n;
        src[n] = i, dst[n] = (2 * i) % size, w[n] = 1000 * i + 1, n++;
        if (i % 2 == 0)
            src[n] = i, dst[n] = (i + 1) % size, w[n] = 1000 * i + 2, n++;
        if (i == size - 1) {
            src[n] = i, dst[n] = i, w[n] = 7, n++;
            src[n] = i, dst[n] = i, w[n] = 7, n++;
        }
        sources[nsrc] = i;
        degrees[nsrc++] = n - first;
        for (int k = first; k < n; k++) {
            flat_dst[nflat] = dst[k];
            flat_w[nflat++] = w[k];
        }
    }
    MPI_Comm g;
    if (rank == 0)
        CHECK_MPI(MPI_Dist_graph_create(MPI_COMM_WORLD, nsrc, sources, degrees, flat_dst, flat_w, MPI_INFO_NULL,
                                        0, &g));
    else
        CHECK_MPI(MPI_Dist_graph_create(MPI_COMM_WORLD, 0, NULL, NULL, NULL, MPI_WEIGHTS_EMPTY, MPI_INFO_NULL, 0,
                                        &g));
    check_neighbours(g, n, src, dst, w, 1, "rank 0 gives all");

    /* Messages along the out-edges arrive from the in-edges. */
    int indeg, outdeg, wtd, s[MAXE], d[MAXE], sw[MAXE], dw[MAXE];
    MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &wtd);
    MPI_Dist_graph_neighbors(g, indeg, s, sw, outdeg, d, dw);
    MPI_Request req[2 * MAXE];
    int got[MAXE];
    for (int i = 0; i < indeg; i++)
        MPI_Irecv(&got[i], 1, MPI_INT, s[i], 4, g, &req[i]);
    for (int i = 0; i < outdeg; i++)
        MPI_Isend(&rank, 1, MPI_INT, d[i], 4, g, &req[indeg + i]);
    CHECK_MPI(MPI_Waitall(indeg + outdeg, req, MPI_STATUSES_IGNORE));
    for (int i = 0; i < indeg; i++)
        CHECK(got[i] == s[i], "rank 0 gives all: message %d from %d says %d", i, s[i], got[i]);
    MPI_Comm_free(&g);
}

static void test_errors(void)
{
    MPI_Comm g;
    int bad = size, neg = -1, zero = 0, w = 1, r0 = 0;
    CHECK_ERR_CLASS(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &bad, &w, 0, NULL, &w, MPI_INFO_NULL, 0,
                                                   &g),
                    MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, -1, &zero, &w, 0, NULL, &w, MPI_INFO_NULL, 0,
                                                   &g),
                    MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &zero, MPI_WEIGHTS_EMPTY, 0, NULL,
                                                   MPI_WEIGHTS_EMPTY, MPI_INFO_NULL, 0, &g),
                    MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &zero, MPI_UNWEIGHTED, 1, &zero, &w,
                                                   MPI_INFO_NULL, 0, &g),
                    MPI_ERR_ARG);
    MPI_Info freed, kept;
    MPI_Info_create(&freed);
    kept = freed;
    MPI_Info_free(&freed);
    CHECK_ERR_CLASS(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &zero, &w, 0, NULL, &w, kept, 0, &g),
                    MPI_ERR_INFO);
    int indeg, outdeg, wtd, s;
    CHECK_ERR_CLASS(MPI_Dist_graph_neighbors_count(MPI_COMM_WORLD, &indeg, &outdeg, &wtd), MPI_ERR_TOPOLOGY);
    CHECK_ERR_CLASS(MPI_Dist_graph_neighbors(MPI_COMM_WORLD, 0, &s, &s, 0, &s, &s), MPI_ERR_TOPOLOGY);

    /* Non-adjacent: the process with a bad argument reports it; the others fail with it
       instead of waiting. */
    int dst = rank == size - 1 ? size : 0;
    int rc = MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &rank, &(int){1}, &dst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g);
    if (rank == size - 1) {
        int cls = -1;
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_RANK, "bad destination: class %d", cls);
    } else {
        CHECK(rc != MPI_SUCCESS, "bad destination elsewhere: the call succeeded");
    }
    CHECK_ERR_CLASS(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &r0, &neg, NULL, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                          &g),
                    MPI_ERR_ARG);

    /* MPI_UNWEIGHTED on some processes and weights on others. */
    if (size > 1) {
        int one = 1;
        rc = MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &rank, &one, &r0, rank == 0 ? MPI_UNWEIGHTED : &w,
                                   MPI_INFO_NULL, 0, &g);
        int cls = -1;
        if (rc != MPI_SUCCESS)
            MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_ARG, "mixed weighting: class %d", cls);
    }

    /* Everything failed collectively, so the communicator is still in step. */
    MPI_Comm ok;
    int left = (rank - 1 + size) % size;
    CHECK_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, MPI_UNWEIGHTED, 0, NULL, MPI_UNWEIGHTED,
                                             MPI_INFO_NULL, 0, &ok));
    MPI_Barrier(ok);
    MPI_Comm_free(&ok);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (size > 64) {
        if (rank == 0)
            printf("SKIP topo_dist_graph: more than 64 ranks\n");
        MPI_Finalize();
        return 0;
    }
    test_adjacent();
    test_own_edges();
    test_one_gives_all();
    test_errors();
    return check_finish("topo_dist_graph");
}
