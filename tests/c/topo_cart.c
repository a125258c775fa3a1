/* ranks: 1 2 3 4 5 8 */
/* Cartesian topologies: Dims_create (known answers, fixed entries, errors), Cart_create on a
   2-D torus and a 1-D line (coordinates, ranks and shifts against hand arithmetic, messages
   along the shifts), fewer ranks than the communicator, zero dimensions, Cart_sub, Cart_map,
   Cartdim_get, Topo_test, dup keeping the topology, errors under MPI_ERRORS_RETURN. */
#include "check.h"

static int rank, size;

static void dims_case(int nnodes, int ndims, const int *in, const int *expect)
{
    int d[8];
    memcpy(d, in, sizeof(int) * (size_t)ndims);
    CHECK_MPI(MPI_Dims_create(nnodes, ndims, d));
    for (int i = 0; i < ndims; i++)
        CHECK(d[i] == expect[i], "Dims_create(%d, %d): dims[%d] = %d, expected %d", nnodes, ndims, i,
              d[i], expect[i]);
}

static void test_dims_create(void)
{
    dims_case(6, 2, (int[]){0, 0}, (int[]){3, 2});
    dims_case(7, 3, (int[]){0, 0, 0}, (int[]){7, 1, 1});
    dims_case(16, 3, (int[]){0, 0, 0}, (int[]){4, 2, 2});
    dims_case(24, 3, (int[]){0, 0, 0}, (int[]){4, 3, 2});
    dims_case(100, 2, (int[]){0, 0}, (int[]){10, 10});
    dims_case(1, 3, (int[]){0, 0, 0}, (int[]){1, 1, 1});
    dims_case(12, 3, (int[]){0, 3, 0}, (int[]){2, 3, 2});
    dims_case(30, 3, (int[]){5, 0, 0}, (int[]){5, 3, 2});
    dims_case(8, 2, (int[]){2, 4}, (int[]){2, 4});
    dims_case(1, 0, (int[]){0}, (int[]){0});

    /* Any size: product is size, non-increasing. */
    for (int nd = 1; nd <= 4; nd++) {
        int d[4] = {0, 0, 0, 0}, prod = 1;
        CHECK_MPI(MPI_Dims_create(size, nd, d));
        for (int i = 0; i < nd; i++) {
            prod *= d[i];
            if (i > 0)
                CHECK(d[i - 1] >= d[i], "Dims_create(%d, %d) not non-increasing", size, nd);
        }
        CHECK(prod == size, "Dims_create(%d, %d): product %d", size, nd, prod);
    }

    int d2[2] = {2, 0};
    CHECK_ERR_CLASS(MPI_Dims_create(7, 2, d2), MPI_ERR_DIMS);
    int d3[2] = {-1, 0};
    CHECK_ERR_CLASS(MPI_Dims_create(6, 2, d3), MPI_ERR_DIMS);
    int d4[2] = {2, 2};
    CHECK_ERR_CLASS(MPI_Dims_create(6, 2, d4), MPI_ERR_DIMS);
    CHECK_ERR_CLASS(MPI_Dims_create(6, -1, d4), MPI_ERR_ARG);
}

/* A periodic 2-D torus over every rank, checked against row-major arithmetic. */
static void test_torus(void)
{
    int dims[2] = {0, 0}, periods[2] = {1, 1};
    MPI_Dims_create(size, 2, dims);
    MPI_Comm cart;
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    CHECK(cart != MPI_COMM_NULL, "torus: every rank is in the grid");
    if (cart == MPI_COMM_NULL)
        return;
    int st = -1, nd = -1, crank = -1, csize = -1;
    CHECK_MPI(MPI_Topo_test(cart, &st));
    CHECK(st == MPI_CART, "torus: Topo_test %d", st);
    CHECK_MPI(MPI_Cartdim_get(cart, &nd));
    CHECK(nd == 2, "torus: Cartdim_get %d", nd);
    MPI_Comm_rank(cart, &crank);
    MPI_Comm_size(cart, &csize);
    CHECK(crank == rank && csize == size, "torus: rank %d size %d (reorder=0 keeps ranks)", crank, csize);

    int gd[2], gp[2], gc[2];
    CHECK_MPI(MPI_Cart_get(cart, 2, gd, gp, gc));
    CHECK(gd[0] == dims[0] && gd[1] == dims[1], "torus: Cart_get dims %d,%d", gd[0], gd[1]);
    CHECK(gp[0] == 1 && gp[1] == 1, "torus: Cart_get periods %d,%d", gp[0], gp[1]);
    CHECK(gc[0] == rank / dims[1] && gc[1] == rank % dims[1], "torus: my coords %d,%d", gc[0], gc[1]);

    for (int r = 0; r < size; r++) {
        int co[2] = {-1, -1}, back = -1;
        CHECK_MPI(MPI_Cart_coords(cart, r, 2, co));
        CHECK(co[0] == r / dims[1] && co[1] == r % dims[1], "torus: coords of %d = %d,%d", r, co[0], co[1]);
        CHECK_MPI(MPI_Cart_rank(cart, co, &back));
        CHECK(back == r, "torus: Cart_rank(coords(%d)) = %d", r, back);
        /* Periodic coordinates wrap, in both directions. */
        int far[2] = {co[0] + 3 * dims[0], co[1] - 2 * dims[1]};
        CHECK_MPI(MPI_Cart_rank(cart, far, &back));
        CHECK(back == r, "torus: wrapped Cart_rank gave %d for %d", back, r);
    }

    int c0 = rank / dims[1], c1 = rank % dims[1];
    for (int disp = -2; disp <= 3; disp++) {
        int src, dst;
        CHECK_MPI(MPI_Cart_shift(cart, 0, disp, &src, &dst));
        int es = ((c0 - disp) % dims[0] + dims[0]) % dims[0] * dims[1] + c1;
        int ed = ((c0 + disp) % dims[0] + dims[0]) % dims[0] * dims[1] + c1;
        CHECK(src == es && dst == ed, "torus: shift dim 0 disp %d: %d,%d expected %d,%d", disp, src, dst, es, ed);
        CHECK_MPI(MPI_Cart_shift(cart, 1, disp, &src, &dst));
        es = c0 * dims[1] + ((c1 - disp) % dims[1] + dims[1]) % dims[1];
        ed = c0 * dims[1] + ((c1 + disp) % dims[1] + dims[1]) % dims[1];
        CHECK(src == es && dst == ed, "torus: shift dim 1 disp %d: %d,%d expected %d,%d", disp, src, dst, es, ed);
    }

    /* The shifts are where messages really go: send my rank up, receive from below. */
    for (int d = 0; d < 2; d++) {
        int src, dst, got = -1;
        MPI_Cart_shift(cart, d, 1, &src, &dst);
        CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, dst, 7, &got, 1, MPI_INT, src, 7, cart, MPI_STATUS_IGNORE));
        CHECK(got == src, "torus: dim %d received %d from source %d", d, got, src);
    }

    /* Duplicates keep the topology; split does not. */
    MPI_Comm dup, split;
    CHECK_MPI(MPI_Comm_dup(cart, &dup));
    CHECK_MPI(MPI_Topo_test(dup, &st));
    CHECK(st == MPI_CART, "dup of a cart: Topo_test %d", st);
    int dd[2] = {0, 0}, dp[2] = {0, 0}, dc[2] = {0, 0};
    CHECK_MPI(MPI_Cart_get(dup, 2, dd, dp, dc));
    CHECK(dd[0] == dims[0] && dd[1] == dims[1] && dp[0] == 1 && dc[0] == c0 && dc[1] == c1,
          "dup of a cart: Cart_get differs");
    CHECK_MPI(MPI_Comm_split(cart, 0, rank, &split));
    CHECK_MPI(MPI_Topo_test(split, &st));
    CHECK(st == MPI_UNDEFINED, "split of a cart: Topo_test %d", st);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);

    /* Errors (the cart inherited MPI_ERRORS_RETURN from MPI_COMM_WORLD). */
    int co[2];
    CHECK_ERR_CLASS(MPI_Cart_coords(cart, size, 2, co), MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Cart_coords(cart, -1, 2, co), MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Cart_coords(cart, 0, 1, co), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Cart_get(cart, 1, gd, gp, gc), MPI_ERR_ARG);
    int s, d;
    CHECK_ERR_CLASS(MPI_Cart_shift(cart, 2, 1, &s, &d), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Cart_shift(cart, -1, 1, &s, &d), MPI_ERR_ARG);
    MPI_Comm_free(&cart);
}

/* A non-periodic line: MPI_PROC_NULL past both ends. */
static void test_line(void)
{
    int dims[1] = {size}, periods[1] = {0};
    MPI_Comm line;
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 1, &line));
    int src, dst;
    CHECK_MPI(MPI_Cart_shift(line, 0, 1, &src, &dst));
    CHECK(src == (rank == 0 ? MPI_PROC_NULL : rank - 1), "line: source %d", src);
    CHECK(dst == (rank == size - 1 ? MPI_PROC_NULL : rank + 1), "line: dest %d", dst);
    int got = -5;
    CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, dst, 3, &got, 1, MPI_INT, src, 3, line, MPI_STATUS_IGNORE));
    CHECK(got == (rank == 0 ? -5 : rank - 1), "line: received %d", got);
    CHECK_MPI(MPI_Cart_shift(line, 0, -2, &src, &dst));
    CHECK(src == (rank + 2 < size ? rank + 2 : MPI_PROC_NULL), "line: disp -2 source %d", src);
    CHECK(dst == (rank - 2 >= 0 ? rank - 2 : MPI_PROC_NULL), "line: disp -2 dest %d", dst);
    CHECK_MPI(MPI_Cart_shift(line, 0, size, &src, &dst));
    CHECK(src == MPI_PROC_NULL && dst == MPI_PROC_NULL, "line: disp size gives %d,%d", src, dst);
    int coord = size, r;
    CHECK_ERR_CLASS(MPI_Cart_rank(line, &coord, &r), MPI_ERR_ARG);
    coord = -1;
    CHECK_ERR_CLASS(MPI_Cart_rank(line, &coord, &r), MPI_ERR_ARG);
    MPI_Comm_free(&line);
}

/* A grid smaller than the communicator, and a zero-dimensional one. */
static void test_smaller(void)
{
    int half = size / 2 > 0 ? size / 2 : 1;
    int dims[2] = {half, 1}, periods[2] = {0, 1};
    MPI_Comm cart;
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    if (rank < half) {
        CHECK(cart != MPI_COMM_NULL, "smaller grid: rank %d left out", rank);
        int s = -1, r = -1;
        MPI_Comm_size(cart, &s);
        MPI_Comm_rank(cart, &r);
        CHECK(s == half && r == rank, "smaller grid: size %d rank %d", s, r);
        MPI_Barrier(cart);
        MPI_Comm_free(&cart);
    } else {
        CHECK(cart == MPI_COMM_NULL, "smaller grid: rank %d should get MPI_COMM_NULL", rank);
    }

    MPI_Comm zero;
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 0, NULL, NULL, 0, &zero));
    if (rank == 0) {
        CHECK(zero != MPI_COMM_NULL, "zero-dimensional grid: rank 0 left out");
        int s = -1, nd = -1, st = -1;
        MPI_Comm_size(zero, &s);
        CHECK_MPI(MPI_Cartdim_get(zero, &nd));
        CHECK_MPI(MPI_Topo_test(zero, &st));
        CHECK(s == 1 && nd == 0 && st == MPI_CART, "zero-dimensional grid: size %d ndims %d topo %d", s, nd,
              st);
        MPI_Comm_free(&zero);
    } else {
        CHECK(zero == MPI_COMM_NULL, "zero-dimensional grid: rank %d should get MPI_COMM_NULL", rank);
    }

    /* Cart_map: the rank this process would have, or MPI_UNDEFINED. */
    int nr = -1, one = 1, per = 0;
    CHECK_MPI(MPI_Cart_map(MPI_COMM_WORLD, 1, &size, &per, &nr));
    CHECK(nr == rank, "Cart_map over all: %d", nr);
    CHECK_MPI(MPI_Cart_map(MPI_COMM_WORLD, 1, &one, &per, &nr));
    CHECK(nr == (rank == 0 ? 0 : MPI_UNDEFINED), "Cart_map over one: %d", nr);
}

/* Cart_sub of a 3-D grid keeping dimensions 0 and 2, and keeping none. */
static void test_sub(void)
{
    int dims[3] = {0, 0, 0}, periods[3] = {1, 0, 0};
    MPI_Dims_create(size, 3, dims);
    MPI_Comm cart, sub, none;
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart));
    int c0 = rank / (dims[1] * dims[2]), c1 = (rank / dims[2]) % dims[1], c2 = rank % dims[2];
    int remain[3] = {1, 0, 1};
    CHECK_MPI(MPI_Cart_sub(cart, remain, &sub));
    int s = -1, r = -1, nd = -1;
    MPI_Comm_size(sub, &s);
    MPI_Comm_rank(sub, &r);
    CHECK_MPI(MPI_Cartdim_get(sub, &nd));
    CHECK(nd == 2 && s == dims[0] * dims[2], "sub: ndims %d size %d", nd, s);
    CHECK(r == c0 * dims[2] + c2, "sub: rank %d, expected %d", r, c0 * dims[2] + c2);
    int sd[2], sp[2], sc[2];
    CHECK_MPI(MPI_Cart_get(sub, 2, sd, sp, sc));
    CHECK(sd[0] == dims[0] && sd[1] == dims[2] && sp[0] == 1 && sp[1] == 0 && sc[0] == c0 && sc[1] == c2,
          "sub: Cart_get dims %d,%d periods %d,%d coords %d,%d", sd[0], sd[1], sp[0], sp[1], sc[0], sc[1]);
    /* Members really are the sub-grid: the next sub-rank's world rank arrives from it. */
    int next = (r + 1) % s, prev = (r - 1 + s) % s, got = -1;
    int expect = (prev / dims[2]) * dims[1] * dims[2] + c1 * dims[2] + prev % dims[2];
    CHECK_MPI(MPI_Sendrecv(&rank, 1, MPI_INT, next, 9, &got, 1, MPI_INT, prev, 9, sub, MPI_STATUS_IGNORE));
    CHECK(got == expect, "sub: sub-rank %d is world rank %d, expected %d", prev, got, expect);

    int keep_none[3] = {0, 0, 0};
    CHECK_MPI(MPI_Cart_sub(cart, keep_none, &none));
    MPI_Comm_size(none, &s);
    CHECK_MPI(MPI_Cartdim_get(none, &nd));
    CHECK(s == 1 && nd == 0, "sub keeping nothing: size %d ndims %d", s, nd);
    MPI_Comm_free(&none);
    MPI_Comm_free(&sub);
    MPI_Comm_free(&cart);
}

/* Error classes: where the standard names none, MPICH's and Open MPI's choice when they agree
   (a grid larger than the communicator, negative ndims, a bad direction: MPI_ERR_ARG). */
static void test_errors(void)
{
    MPI_Comm c = MPI_COMM_NULL;
    int too_big = size + 1, zero = 0, neg = -2, per = 0;
    CHECK_ERR_CLASS(MPI_Cart_create(MPI_COMM_WORLD, 1, &too_big, &per, 0, &c), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Cart_create(MPI_COMM_WORLD, 1, &zero, &per, 0, &c), MPI_ERR_DIMS);
    CHECK_ERR_CLASS(MPI_Cart_create(MPI_COMM_WORLD, 1, &neg, &per, 0, &c), MPI_ERR_DIMS);
    CHECK_ERR_CLASS(MPI_Cart_create(MPI_COMM_WORLD, -1, &zero, &per, 0, &c), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Cart_create(MPI_COMM_NULL, 1, &size, &per, 0, &c), MPI_ERR_COMM);
    int st = 0, nd, g[2];
    CHECK_MPI(MPI_Topo_test(MPI_COMM_WORLD, &st));
    CHECK(st == MPI_UNDEFINED, "Topo_test(WORLD) = %d", st);
    CHECK_MPI(MPI_Topo_test(MPI_COMM_SELF, &st));
    CHECK(st == MPI_UNDEFINED, "Topo_test(SELF) = %d", st);
    CHECK_ERR_CLASS(MPI_Topo_test(MPI_COMM_NULL, &st), MPI_ERR_COMM);
    CHECK_ERR_CLASS(MPI_Cartdim_get(MPI_COMM_WORLD, &nd), MPI_ERR_TOPOLOGY);
    CHECK_ERR_CLASS(MPI_Cart_get(MPI_COMM_WORLD, 2, g, g, g), MPI_ERR_TOPOLOGY);
    CHECK_ERR_CLASS(MPI_Cart_coords(MPI_COMM_WORLD, 0, 2, g), MPI_ERR_TOPOLOGY);
    int s, d;
    CHECK_ERR_CLASS(MPI_Cart_shift(MPI_COMM_WORLD, 0, 1, &s, &d), MPI_ERR_TOPOLOGY);
    CHECK_ERR_CLASS(MPI_Cart_map(MPI_COMM_WORLD, 1, &too_big, &per, &d), MPI_ERR_ARG);

    /* The message names the call. */
    int rc = MPI_Cartdim_get(MPI_COMM_WORLD, &nd), len = 0;
    char msg[MPI_MAX_ERROR_STRING];
    MPI_Error_string(rc, msg, &len);
    CHECK(strstr(msg, "MPI_Cartdim_get") != NULL, "error string '%s' does not name the call", msg);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    test_dims_create();
    test_torus();
    test_line();
    test_smaller();
    test_sub();
    test_errors();
    return check_finish("topo_cart");
}
