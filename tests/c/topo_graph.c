/* ranks: 1 2 3 4 5 8 */
/* Graph topologies: a ring over every rank (neighbours checked by hand, messages along the
   edges), the standard's four-node example with the other ranks left out, a star, zero nodes,
   Graph_get truncation, Graph_map, dup keeping the topology, errors under MPI_ERRORS_RETURN. */
#include "check.h"

static int rank, size;

static void test_ring(void)
{
    /* Node i is joined to i-1 and i+1 (the same node twice on 1 or 2 ranks). */
    int index[64], edges[128];
    for (int i = 0; i < size; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i - 1 + size) % size;
        edges[2 * i + 1] = (i + 1) % size;
    }
    MPI_Comm ring;
    CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 1, &ring));
    CHECK(ring != MPI_COMM_NULL, "ring: every rank is a node");
    if (ring == MPI_COMM_NULL)
        return;
    int st = -1, nn = -1, ne = -1, r = -1;
    CHECK_MPI(MPI_Topo_test(ring, &st));
    CHECK(st == MPI_GRAPH, "ring: Topo_test %d", st);
    MPI_Comm_rank(ring, &r);
    CHECK(r == rank, "ring: rank %d", r);
    CHECK_MPI(MPI_Graphdims_get(ring, &nn, &ne));
    CHECK(nn == size && ne == 2 * size, "ring: Graphdims_get %d,%d", nn, ne);
    int gi[64], ge[128];
    CHECK_MPI(MPI_Graph_get(ring, 64, 128, gi, ge));
    for (int i = 0; i < size; i++)
        CHECK(gi[i] == index[i], "ring: Graph_get index[%d] = %d", i, gi[i]);
    for (int i = 0; i < 2 * size; i++)
        CHECK(ge[i] == edges[i], "ring: Graph_get edges[%d] = %d", i, ge[i]);
    for (int i = 0; i < size; i++) {
        int cnt = -1, nb[4] = {-9, -9, -9, -9};
        CHECK_MPI(MPI_Graph_neighbors_count(ring, i, &cnt));
        CHECK(cnt == 2, "ring: node %d has %d neighbours", i, cnt);
        CHECK_MPI(MPI_Graph_neighbors(ring, i, 4, nb));
        CHECK(nb[0] == (i - 1 + size) % size && nb[1] == (i + 1) % size && nb[2] == -9,
              "ring: neighbours of %d are %d,%d,%d", i, nb[0], nb[1], nb[2]);
    }
    /* A message along each edge. */
    int left = (rank - 1 + size) % size, right = (rank + 1) % size, got = -1;
    CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, right, 1, &got, 1, MPI_INT, left, 1, ring, MPI_STATUS_IGNORE));
    CHECK(got == left, "ring: got %d from the left neighbour %d", got, left);

    /* Truncation to the lengths given. */
    int ti[2] = {-9, -9}, te[2] = {-9, -9};
    CHECK_MPI(MPI_Graph_get(ring, 1, 1, ti, te));
    CHECK(ti[0] == 2 && ti[1] == -9 && te[0] == edges[0] && te[1] == -9, "ring: truncated Graph_get");
    int tn[2] = {-9, -9};
    CHECK_MPI(MPI_Graph_neighbors(ring, rank, 1, tn));
    CHECK(tn[0] == left && tn[1] == -9, "ring: truncated Graph_neighbors %d,%d", tn[0], tn[1]);

    MPI_Comm dup;
    CHECK_MPI(MPI_Comm_dup(ring, &dup));
    CHECK_MPI(MPI_Topo_test(dup, &st));
    CHECK_MPI(MPI_Graphdims_get(dup, &nn, &ne));
    CHECK(st == MPI_GRAPH && nn == size && ne == 2 * size, "dup of a graph: topo %d dims %d,%d", st, nn, ne);
    MPI_Comm_free(&dup);

    int cnt, nb[2], g[2];
    CHECK_ERR_CLASS(MPI_Graph_neighbors_count(ring, size, &cnt), MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Graph_neighbors(ring, -1, 2, nb), MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Graph_get(ring, -1, 2, g, g), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Cartdim_get(ring, &cnt), MPI_ERR_TOPOLOGY);
    CHECK_ERR_CLASS(MPI_Cart_shift(ring, 0, 1, &cnt, &cnt), MPI_ERR_TOPOLOGY);
    MPI_Comm_free(&ring);
}

/* The example of the standard: 4 nodes, edges 0-1 0-3 1-0 2-3 3-0 3-2. */
static void test_example(void)
{
    if (size < 4)
        return;
    int index[4] = {2, 3, 4, 6}, edges[6] = {1, 3, 0, 3, 0, 2};
    int expect_n[4][2] = {{1, 3}, {0, -1}, {3, -1}, {0, 2}}, expect_c[4] = {2, 1, 1, 2};
    MPI_Comm g;
    CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, 4, index, edges, 0, &g));
    if (rank >= 4) {
        CHECK(g == MPI_COMM_NULL, "example: rank %d should get MPI_COMM_NULL", rank);
        return;
    }
    CHECK(g != MPI_COMM_NULL, "example: rank %d left out", rank);
    int s = -1;
    MPI_Comm_size(g, &s);
    CHECK(s == 4, "example: size %d", s);
    int cnt = -1, nb[2] = {-1, -1};
    CHECK_MPI(MPI_Graph_neighbors_count(g, rank, &cnt));
    CHECK_MPI(MPI_Graph_neighbors(g, rank, 2, nb));
    CHECK(cnt == expect_c[rank], "example: %d neighbours", cnt);
    for (int i = 0; i < cnt; i++)
        CHECK(nb[i] == expect_n[rank][i], "example: neighbour %d is %d", i, nb[i]);
    MPI_Barrier(g);
    MPI_Comm_free(&g);
}

/* Rank 0 joined to every other rank; node 0 also has a self-loop. */
static void test_star(void)
{
    int index[64], edges[192], e = 0;
    edges[e++] = 0;
    for (int i = 1; i < size; i++)
        edges[e++] = i;
    index[0] = e;
    for (int i = 1; i < size; i++) {
        edges[e++] = 0;
        index[i] = e;
    }
    MPI_Comm star;
    CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &star));
    int cnt = -1;
    CHECK_MPI(MPI_Graph_neighbors_count(star, rank, &cnt));
    CHECK(cnt == (rank == 0 ? size : 1), "star: rank %d has %d neighbours", rank, cnt);
    int nb[64];
    CHECK_MPI(MPI_Graph_neighbors(star, 0, 64, nb));
    for (int i = 0; i < size; i++)
        CHECK(nb[i] == i, "star: hub neighbour %d is %d", i, nb[i]);
    MPI_Comm_free(&star);

    /* No node at all: nobody gets a communicator. */
    MPI_Comm none = MPI_COMM_WORLD;
    CHECK_MPI(MPI_Graph_create(MPI_COMM_WORLD, 0, NULL, NULL, 0, &none));
    CHECK(none == MPI_COMM_NULL, "zero nodes: communicator %#lx", (unsigned long)(size_t)none);

    /* Graph_map: the rank this process would have, or MPI_UNDEFINED. */
    int nr = -1, one_index[1] = {0};
    CHECK_MPI(MPI_Graph_map(MPI_COMM_WORLD, size, index, edges, &nr));
    CHECK(nr == rank, "Graph_map over all: %d", nr);
    CHECK_MPI(MPI_Graph_map(MPI_COMM_WORLD, 1, one_index, edges, &nr));
    CHECK(nr == (rank == 0 ? 0 : MPI_UNDEFINED), "Graph_map over one: %d", nr);
}

static void test_errors(void)
{
    MPI_Comm g;
    int index[2] = {1, 2}, edges[2] = {1, 0};
    int too_many = size + 1, idx_big[65];
    for (int i = 0; i < 65; i++)
        idx_big[i] = 0;
    CHECK_ERR_CLASS(MPI_Graph_create(MPI_COMM_WORLD, too_many, idx_big, edges, 0, &g), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Graph_create(MPI_COMM_WORLD, -1, index, edges, 0, &g), MPI_ERR_ARG);
    int bad_index[2] = {2, 1};
    if (size >= 2)
        CHECK_ERR_CLASS(MPI_Graph_create(MPI_COMM_WORLD, 2, bad_index, edges, 0, &g), MPI_ERR_ARG);
    int bad_edges[2] = {1, 5};
    if (size >= 2)
        CHECK_ERR_CLASS(MPI_Graph_create(MPI_COMM_WORLD, 2, index, bad_edges, 0, &g), MPI_ERR_RANK);
    int one_index[1] = {1}, self_edge[1] = {-1};
    CHECK_ERR_CLASS(MPI_Graph_create(MPI_COMM_WORLD, 1, one_index, self_edge, 0, &g), MPI_ERR_RANK);
    int nn, ne, cnt, nb[2];
    CHECK_ERR_CLASS(MPI_Graphdims_get(MPI_COMM_WORLD, &nn, &ne), MPI_ERR_TOPOLOGY);
    CHECK_ERR_CLASS(MPI_Graph_neighbors_count(MPI_COMM_WORLD, 0, &cnt), MPI_ERR_TOPOLOGY);
    CHECK_ERR_CLASS(MPI_Graph_neighbors(MPI_COMM_WORLD, 0, 2, nb), MPI_ERR_TOPOLOGY);

    /* A Cartesian communicator is not a graph. */
    int per = 0;
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 1, &size, &per, 0, &cart);
    CHECK_ERR_CLASS(MPI_Graphdims_get(cart, &nn, &ne), MPI_ERR_TOPOLOGY);
    MPI_Comm_free(&cart);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (size > 64) {
        if (rank == 0)
            printf("SKIP topo_graph: more than 64 ranks\n");
        MPI_Finalize();
        return 0;
    }
    test_ring();
    test_example();
    test_star();
    test_errors();
    return check_finish("topo_graph");
}
