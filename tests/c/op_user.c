/* ranks: 1 2 3 4 5 */
/* User-defined reduction operations (MPI_Op_create, MPI_Op_create_c).

   The non-commutative op composes affine maps x -> a*x + b (mod 2^32):
   u op v = "u, then v", so the result tells exactly in which order the
   ranks' contributions were combined; it must be rank order. It runs
   through MPI_Reduce (first, last and middle root), MPI_Allreduce (also
   MPI_IN_PLACE), MPI_Scan, MPI_Exscan, MPI_Reduce_scatter_block and
   MPI_Reduce_scatter, with 1, 7 and 20000 elements, on a contiguous datatype
   and on a strided one (each element {a, gap, b, gap}: the function must
   see the datatype's layout, and the gaps of the result buffer keep their
   contents), and through the MPI_Count form of the function.
   The commutative op adds {double, int} structs (a struct datatype with
   padding). Every function checks it receives the datatype handle it was
   called with, and calls MPI_Type_size on it (which would deadlock if the
   library held a lock while calling the application).
   MPI_Reduce_local with user ops (inbuf left alone); MPI_Op_commutative;
   an op freed while a nonblocking reduction uses it (where MPI_Iallreduce
   exists). */
#include "check.h"
#include <stdint.h>

static int rank, size;
static MPI_Datatype affine_t, strided_t, sum_t;

typedef struct {
    unsigned a, b;
} affine;

static affine f(int r, int j)
{
    affine x;
    x.a = 2u * (unsigned)(r * 5 + j % 13) + 1u;
    x.b = (unsigned)(r * 1000 + j * 7 + 1);
    return x;
}

/* u then v */
static affine then(affine u, affine v)
{
    affine x;
    x.a = v.a * u.a;
    x.b = v.a * u.b + v.b;
    return x;
}

/* f(0, j) op f(1, j) op ... op f(last, j) */
static affine prefix(int last, int j)
{
    affine x = f(0, j);
    for (int r = 1; r <= last; r++)
        x = then(x, f(r, j));
    return x;
}

static int bad_type_seen = 0;

static void check_type(MPI_Datatype *dt, MPI_Datatype want, int want_size)
{
    int sz = -1;
    if (*dt != want)
        bad_type_seen = 1;
    MPI_Type_size(*dt, &sz);
    if (sz != want_size)
        bad_type_seen = 1;
}

static void compose(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    check_type(dt, affine_t, 8);
    affine *u = in, *v = inout;
    for (int i = 0; i < *len; i++)
        v[i] = then(u[i], v[i]);
}

static void compose_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt)
{
    check_type(dt, affine_t, 8);
    affine *u = in, *v = inout;
    for (MPI_Count i = 0; i < *len; i++)
        v[i] = then(u[i], v[i]);
}

/* element k of the strided type: a at p[4k], b at p[4k+2] */
static void compose_strided(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    check_type(dt, strided_t, 8);
    unsigned *u = in, *v = inout;
    for (int i = 0; i < *len; i++) {
        affine x = {u[4 * i], u[4 * i + 2]}, y = {v[4 * i], v[4 * i + 2]};
        affine z = then(x, y);
        v[4 * i] = z.a;
        v[4 * i + 2] = z.b;
    }
}

typedef struct {
    double sum;
    int n;
} acc_t;

static void add_acc(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    check_type(dt, sum_t, 12);
    acc_t *u = in, *v = inout;
    for (int i = 0; i < *len; i++) {
        v[i].sum += u[i].sum;
        v[i].n += u[i].n;
    }
}

static int same(affine x, affine y)
{
    return x.a == y.a && x.b == y.b;
}

/* Checks n elements of `got` (element j is global element first + j) against
   prefix(last, .); returns 1 when all match. */
static int expect(const char *what, const affine *got, int n, int first, int last)
{
    for (int j = 0; j < n; j++) {
        affine w = prefix(last, first + j);
        if (!same(got[j], w)) {
            CHECK(0, "%s: element %d is (%u, %u), expected (%u, %u)", what, first + j, got[j].a, got[j].b,
                  w.a, w.b);
            return 0;
        }
    }
    return 1;
}

static void test_noncommutative(MPI_Op op, const char *name, int n)
{
    affine *in = malloc(sizeof(affine) * (size_t)n * (size_t)size);
    affine *out = malloc(sizeof(affine) * (size_t)n * (size_t)size);
    char what[128];
    for (int j = 0; j < n; j++)
        in[j] = f(rank, j);

    int roots[3] = {0, size - 1, size / 2};
    for (int k = 0; k < 3; k++) {
        memset(out, 0, sizeof(affine) * (size_t)n);
        CHECK_MPI(MPI_Reduce(in, out, n, affine_t, op, roots[k], MPI_COMM_WORLD));
        snprintf(what, sizeof what, "Reduce(%s, n=%d, root %d)", name, n, roots[k]);
        if (rank == roots[k])
            expect(what, out, n, 0, size - 1);
    }
    CHECK_MPI(MPI_Allreduce(in, out, n, affine_t, op, MPI_COMM_WORLD));
    snprintf(what, sizeof what, "Allreduce(%s, n=%d)", name, n);
    expect(what, out, n, 0, size - 1);

    for (int j = 0; j < n; j++)
        out[j] = in[j];
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, out, n, affine_t, op, MPI_COMM_WORLD));
    snprintf(what, sizeof what, "Allreduce(%s, n=%d, in place)", name, n);
    expect(what, out, n, 0, size - 1);

    CHECK_MPI(MPI_Scan(in, out, n, affine_t, op, MPI_COMM_WORLD));
    snprintf(what, sizeof what, "Scan(%s, n=%d)", name, n);
    expect(what, out, n, 0, rank);

    CHECK_MPI(MPI_Exscan(in, out, n, affine_t, op, MPI_COMM_WORLD));
    snprintf(what, sizeof what, "Exscan(%s, n=%d)", name, n);
    if (rank > 0)
        expect(what, out, n, 0, rank - 1);

    /* reduce-scatter: the full vector is n elements per rank */
    for (int j = 0; j < n * size; j++)
        in[j] = f(rank, j);
    CHECK_MPI(MPI_Reduce_scatter_block(in, out, n, affine_t, op, MPI_COMM_WORLD));
    snprintf(what, sizeof what, "Reduce_scatter_block(%s, n=%d)", name, n);
    expect(what, out, n, rank * n, size - 1);

    /* uneven blocks: rank r gets n - r % 2 elements (at least 0) */
    int *counts = malloc(sizeof(int) * (size_t)size);
    int total = 0, first = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = n - r % 2;
        if (r < rank)
            first += counts[r];
        total += counts[r];
    }
    CHECK_MPI(MPI_Reduce_scatter(in, out, counts, affine_t, op, MPI_COMM_WORLD));
    snprintf(what, sizeof what, "Reduce_scatter(%s, n=%d)", name, n);
    expect(what, out, counts[rank], first, size - 1);
    (void)total;
    free(counts);
    free(in);
    free(out);
}

static void test_strided(MPI_Op op, int n)
{
    unsigned *in = malloc(sizeof(unsigned) * 4 * (size_t)n);
    unsigned *out = malloc(sizeof(unsigned) * 4 * (size_t)n);
    for (int j = 0; j < n; j++) {
        affine x = f(rank, j);
        in[4 * j] = x.a;
        in[4 * j + 1] = 0xdead;
        in[4 * j + 2] = x.b;
        in[4 * j + 3] = 0xbeef;
    }
    for (int k = 0; k < 4 * n; k++)
        out[k] = 0x5a5a5a5au;
    CHECK_MPI(MPI_Allreduce(in, out, n, strided_t, op, MPI_COMM_WORLD));
    for (int j = 0; j < n; j++) {
        affine w = prefix(size - 1, j);
        if (out[4 * j] != w.a || out[4 * j + 2] != w.b || out[4 * j + 1] != 0x5a5a5a5au ||
            out[4 * j + 3] != 0x5a5a5a5au) {
            CHECK(0, "Allreduce on the strided type (n=%d): element %d is {%x %x %x %x}", n, j, out[4 * j],
                  out[4 * j + 1], out[4 * j + 2], out[4 * j + 3]);
            break;
        }
    }
    CHECK_MPI(MPI_Scan(in, out, n, strided_t, op, MPI_COMM_WORLD));
    for (int j = 0; j < n; j++) {
        affine w = prefix(rank, j);
        if (out[4 * j] != w.a || out[4 * j + 2] != w.b) {
            CHECK(0, "Scan on the strided type (n=%d): element %d wrong", n, j);
            break;
        }
    }
    /* Reduce_local: acc = in op acc */
    for (int j = 0; j < n; j++) {
        affine x = f(rank + 1, j);
        out[4 * j] = x.a;
        out[4 * j + 1] = 1;
        out[4 * j + 2] = x.b;
        out[4 * j + 3] = 2;
    }
    CHECK_MPI(MPI_Reduce_local(in, out, n, strided_t, op));
    for (int j = 0; j < n; j++) {
        affine w = then(f(rank, j), f(rank + 1, j));
        if (out[4 * j] != w.a || out[4 * j + 2] != w.b || out[4 * j + 1] != 1 || out[4 * j + 3] != 2) {
            CHECK(0, "Reduce_local on the strided type: element %d wrong", j);
            break;
        }
    }
    free(in);
    free(out);
}

static void test_commutative(MPI_Op op)
{
    enum { M = 50 };
    acc_t in[M], out[M];
    for (int j = 0; j < M; j++) {
        in[j].sum = (double)(rank * j) + 0.5;
        in[j].n = 1 + j % 3;
    }
    CHECK_MPI(MPI_Allreduce(in, out, M, sum_t, op, MPI_COMM_WORLD));
    for (int j = 0; j < M; j++) {
        double s = (double)j * size * (size - 1) / 2 + 0.5 * size;
        if (out[j].sum != s || out[j].n != size * (1 + j % 3)) {
            CHECK(0, "Allreduce with the commutative op: element %d is (%g, %d)", j, out[j].sum, out[j].n);
            break;
        }
    }
    memset(out, 0, sizeof out);
    CHECK_MPI(MPI_Reduce(in, out, M, sum_t, op, size - 1, MPI_COMM_WORLD));
    if (rank == size - 1)
        for (int j = 0; j < M; j++) {
            double s = (double)j * size * (size - 1) / 2 + 0.5 * size;
            if (out[j].sum != s || out[j].n != size * (1 + j % 3)) {
                CHECK(0, "Reduce with the commutative op: element %d is (%g, %d)", j, out[j].sum, out[j].n);
                break;
            }
        }
}

static void test_reduce_local(MPI_Op op, const char *name)
{
    enum { M = 33 };
    affine in[M], acc[M];
    for (int j = 0; j < M; j++) {
        in[j] = f(3, j);
        acc[j] = f(4, j);
    }
    CHECK_MPI(MPI_Reduce_local(in, acc, M, affine_t, op));
    for (int j = 0; j < M; j++) {
        if (!same(acc[j], then(f(3, j), f(4, j))) || !same(in[j], f(3, j))) {
            CHECK(0, "Reduce_local(%s): element %d wrong", name, j);
            break;
        }
    }
    CHECK_MPI(MPI_Reduce_local(in, acc, 0, affine_t, op));
}

static void test_free_while_pending(void)
{
    MPI_Op op;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    CHECK_MPI(MPI_Op_create(compose, 0, &op));
    enum { M = 100 };
    affine in[M], out[M];
    for (int j = 0; j < M; j++)
        in[j] = f(rank, j);
    MPI_Request req;
    int rc = MPI_Iallreduce(in, out, M, affine_t, op, comm, &req);
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    CHECK_MPI(MPI_Op_free(&op));
    CHECK(op == MPI_OP_NULL, "MPI_Op_free did not set the handle to MPI_OP_NULL");
    if (cls == MPI_SUCCESS) {
        CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        expect("Iallreduce with an op freed meanwhile", out, M, 0, size - 1);
    } else {
        CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION, "MPI_Iallreduce failed with class %d", cls);
    }
    MPI_Comm_free(&comm);
}

static void test_errors(MPI_Op user)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int a[4] = {0}, b[4] = {0}, c = -1;

    CHECK_MPI(MPI_Op_commutative(user, &c));
    CHECK(c == 0, "MPI_Op_commutative: the affine op reported %d", c);
    CHECK_MPI(MPI_Op_commutative(MPI_SUM, &c));
    CHECK(c == 1, "MPI_Op_commutative(MPI_SUM) is %d", c);
    CHECK_MPI(MPI_Op_commutative(MPI_MAXLOC, &c));
    CHECK(c == 1, "MPI_Op_commutative(MPI_MAXLOC) is %d", c);
    CHECK_ERR_CLASS(MPI_Op_commutative(MPI_OP_NULL, &c), MPI_ERR_OP);

    MPI_Op freed, copy, sum = MPI_SUM, null = MPI_OP_NULL;
    CHECK_MPI(MPI_Op_create(compose, 1, &freed));
    CHECK_MPI(MPI_Op_commutative(freed, &c));
    CHECK(c == 1, "MPI_Op_commutative: an op created commutative reported %d", c);
    copy = freed;
    CHECK_MPI(MPI_Op_free(&freed));
    CHECK(freed == MPI_OP_NULL, "MPI_Op_free did not set the handle to MPI_OP_NULL");
    CHECK_ERR_CLASS(MPI_Op_free(&copy), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Op_commutative(copy, &c), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(a, b, 2, affine_t, copy), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Allreduce(a, b, 2, affine_t, copy, MPI_COMM_WORLD), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Op_free(&sum), MPI_ERR_OP);
    CHECK(sum == MPI_SUM, "a failed MPI_Op_free changed the handle");
    CHECK_ERR_CLASS(MPI_Op_free(&null), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Op_create(NULL, 1, &copy), MPI_ERR_ARG);

    CHECK_ERR_CLASS(MPI_Reduce_local(a, b, 2, MPI_INT, MPI_OP_NULL), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(a, b, 2, MPI_INT, MPI_REPLACE), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(a, b, 2, MPI_INT, MPI_NO_OP), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(a, b, 1, MPI_2INT, MPI_SUM), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(a, b, -1, affine_t, user), MPI_ERR_COUNT);
    CHECK_ERR_CLASS(MPI_Reduce_local(a, b, 1, MPI_DATATYPE_NULL, user), MPI_ERR_TYPE);
    CHECK_ERR_CLASS(MPI_Reduce_local(NULL, b, 1, affine_t, user), MPI_ERR_BUFFER);
    CHECK_ERR_CLASS(MPI_Reduce_local(a, NULL, 1, affine_t, user), MPI_ERR_BUFFER);
    CHECK_ERR_CLASS(MPI_Reduce_local(MPI_IN_PLACE, b, 1, MPI_INT, MPI_SUM), MPI_ERR_BUFFER);
    /* a user handle used where a datatype is expected, and the reverse */
    CHECK_ERR_CLASS(MPI_Reduce_local(a, b, 1, MPI_INT, (MPI_Op)affine_t), MPI_ERR_OP);

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Type_contiguous(2, MPI_UNSIGNED, &affine_t);
    MPI_Type_commit(&affine_t);
    MPI_Datatype v;
    MPI_Type_vector(2, 1, 2, MPI_UNSIGNED, &v);
    MPI_Type_create_resized(v, 0, 4 * sizeof(unsigned), &strided_t);
    MPI_Type_commit(&strided_t);
    MPI_Type_free(&v);
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {offsetof(acc_t, sum), offsetof(acc_t, n)};
    MPI_Datatype tt[2] = {MPI_DOUBLE, MPI_INT}, s;
    MPI_Type_create_struct(2, bl, disp, tt, &s);
    MPI_Type_create_resized(s, 0, sizeof(acc_t), &sum_t);
    MPI_Type_commit(&sum_t);
    MPI_Type_free(&s);

    MPI_Op aff, aff_c, strided, add;
    CHECK_MPI(MPI_Op_create(compose, 0, &aff));
    CHECK_MPI(MPI_Op_create_c(compose_c, 0, &aff_c));
    CHECK_MPI(MPI_Op_create((MPI_User_function *)compose_strided, 0, &strided));
    CHECK_MPI(MPI_Op_create(add_acc, 1, &add));

    test_reduce_local(aff, "int form");
    test_reduce_local(aff_c, "MPI_Count form");
    int counts[3] = {1, 7, 20000};
    for (int k = 0; k < 3; k++) {
        test_noncommutative(aff, "int form", counts[k]);
        test_strided(strided, counts[k]);
    }
    test_noncommutative(aff_c, "MPI_Count form", 7);
    test_noncommutative(aff_c, "MPI_Count form", 20000);
    test_commutative(add);
    test_free_while_pending();
    test_errors(aff);
    CHECK(!bad_type_seen, "a user function was called with the wrong datatype handle or size");

    CHECK_MPI(MPI_Op_free(&aff));
    CHECK_MPI(MPI_Op_free(&aff_c));
    CHECK_MPI(MPI_Op_free(&strided));
    CHECK_MPI(MPI_Op_free(&add));
    MPI_Type_free(&affine_t);
    MPI_Type_free(&strided_t);
    MPI_Type_free(&sum_t);
    return check_finish("op_user");
}
