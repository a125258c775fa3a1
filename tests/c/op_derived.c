/* ranks: 1 2 3 4 5 */
/* Predefined reduction operations on derived datatypes: the op applies to
   each basic element, so it is defined when every basic element of the type
   is of one type the op accepts (mixing types that combine alike, such as
   MPI_INT and MPI_INT32_T, is fine).

   Types: a vector of doubles with gaps (the gaps must keep their contents),
   a contiguous type of MPI_DOUBLE_INT pairs (MINLOC), a resized MPI_INT with
   a gap after each element, a struct of MPI_INT and MPI_INT32_T, a duplicate
   of MPI_UNSIGNED, an indexed type of MPI_LONG_DOUBLE. Each through
   MPI_Reduce_local, MPI_Allreduce, MPI_Reduce (two roots) and MPI_Scan, with
   values whose results do not depend on the order of combination.
   Errors (MPI_ERR_OP): SUM on a struct of MPI_INT and MPI_DOUBLE, BAND on a
   contiguous type of MPI_DOUBLE, MAXLOC on a vector of MPI_DOUBLE, SUM on a
   vector of MPI_DOUBLE_INT. */
#include "check.h"
#include <stdint.h>

static int rank, size;

#define GAP (-77.0)

/* vector: 3 blocks of 2 doubles, stride 4 -> extent 10 doubles; 2 elements */
static void test_vector(void)
{
    MPI_Datatype t;
    MPI_Type_vector(3, 2, 4, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    enum { COUNT = 2, SPAN = 20 };
    double in[SPAN], out[SPAN], acc[SPAN];
    for (int k = 0; k < SPAN; k++) {
        int data = (k % 10) % 4 < 2;
        in[k] = data ? (double)(rank * 10 + k) : GAP;
        out[k] = GAP;
    }
    CHECK_MPI(MPI_Allreduce(in, out, COUNT, t, MPI_SUM, MPI_COMM_WORLD));
    for (int k = 0; k < SPAN; k++) {
        int data = (k % 10) % 4 < 2;
        double want = data ? (double)(10 * size * (size - 1) / 2 + size * k) : GAP;
        if (out[k] != want) {
            CHECK(0, "Allreduce SUM on a vector: double %d is %g, expected %g", k, out[k], want);
            break;
        }
    }
    for (int root = 0; root < size; root += size > 1 ? size - 1 : 1) {
        for (int k = 0; k < SPAN; k++)
            out[k] = GAP;
        CHECK_MPI(MPI_Reduce(in, out, COUNT, t, MPI_MAX, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int k = 0; k < SPAN; k++) {
                int data = (k % 10) % 4 < 2;
                double want = data ? (double)((size - 1) * 10 + k) : GAP;
                if (out[k] != want) {
                    CHECK(0, "Reduce MAX on a vector to %d: double %d is %g, expected %g", root, k,
                          out[k], want);
                    break;
                }
            }
    }
    for (int k = 0; k < SPAN; k++)
        out[k] = GAP;
    CHECK_MPI(MPI_Scan(in, out, COUNT, t, MPI_SUM, MPI_COMM_WORLD));
    for (int k = 0; k < SPAN; k++) {
        int data = (k % 10) % 4 < 2;
        double want = data ? (double)(10 * rank * (rank + 1) / 2 + (rank + 1) * k) : GAP;
        if (out[k] != want) {
            CHECK(0, "Scan SUM on a vector: double %d is %g, expected %g", k, out[k], want);
            break;
        }
    }
    /* Reduce_local: acc = in * acc, gaps of acc untouched */
    for (int k = 0; k < SPAN; k++) {
        int data = (k % 10) % 4 < 2;
        acc[k] = data ? 1.5 : GAP;
        in[k] = data ? (double)(k + 1) : 123.0;
    }
    CHECK_MPI(MPI_Reduce_local(in, acc, COUNT, t, MPI_PROD));
    for (int k = 0; k < SPAN; k++) {
        int data = (k % 10) % 4 < 2;
        double want = data ? 1.5 * (k + 1) : GAP;
        if (acc[k] != want) {
            CHECK(0, "Reduce_local PROD on a vector: double %d is %g, expected %g", k, acc[k], want);
            break;
        }
    }
    MPI_Type_free(&t);
}

typedef struct {
    double v;
    int i;
} dint;

/* contiguous(3, MPI_DOUBLE_INT) with MINLOC: ties broken by the lower index */
static void test_pairs(void)
{
    MPI_Datatype t;
    MPI_Type_contiguous(3, MPI_DOUBLE_INT, &t);
    MPI_Type_commit(&t);
    enum { COUNT = 2, M = 6 };
    dint in[M], out[M], exp[M];
    for (int k = 0; k < M; k++) {
        in[k].v = (double)((rank + k) % 3);
        in[k].i = 100 - rank;
        exp[k].v = 1e9;
        exp[k].i = 0;
        for (int r = 0; r < size; r++) {
            double v = (double)((r + k) % 3);
            if (v < exp[k].v || (v == exp[k].v && 100 - r < exp[k].i)) {
                exp[k].v = v;
                exp[k].i = 100 - r;
            }
        }
    }
    CHECK_MPI(MPI_Allreduce(in, out, COUNT, t, MPI_MINLOC, MPI_COMM_WORLD));
    for (int k = 0; k < M; k++)
        if (out[k].v != exp[k].v || out[k].i != exp[k].i) {
            CHECK(0, "Allreduce MINLOC on pairs: pair %d is (%g, %d), expected (%g, %d)", k, out[k].v,
                  out[k].i, exp[k].v, exp[k].i);
            break;
        }
    dint acc[M];
    for (int k = 0; k < M; k++) {
        acc[k].v = 5.0;
        acc[k].i = 7;
        in[k].v = k % 2 ? 5.0 : 6.0;
        in[k].i = 3;
    }
    CHECK_MPI(MPI_Reduce_local(in, acc, COUNT, t, MPI_MAXLOC));
    for (int k = 0; k < M; k++) {
        int want_i = 3;
        double want_v = k % 2 ? 5.0 : 6.0;
        if (acc[k].v != want_v || acc[k].i != want_i) {
            CHECK(0, "Reduce_local MAXLOC on pairs: pair %d is (%g, %d)", k, acc[k].v, acc[k].i);
            break;
        }
    }
    MPI_Type_free(&t);
}

/* resized MPI_INT with extent 2 ints; BXOR and LOR */
static void test_resized(void)
{
    MPI_Datatype t;
    MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &t);
    MPI_Type_commit(&t);
    enum { COUNT = 5 };
    int in[2 * COUNT], out[2 * COUNT];
    for (int k = 0; k < COUNT; k++) {
        in[2 * k] = (rank + 1) << k;
        in[2 * k + 1] = -1;
        out[2 * k] = 0;
        out[2 * k + 1] = -5;
    }
    CHECK_MPI(MPI_Allreduce(in, out, COUNT, t, MPI_BXOR, MPI_COMM_WORLD));
    for (int k = 0; k < COUNT; k++) {
        int want = 0;
        for (int r = 0; r < size; r++)
            want ^= (r + 1) << k;
        CHECK(out[2 * k] == want && out[2 * k + 1] == -5, "Allreduce BXOR on resized: element %d is %d/%d",
              k, out[2 * k], out[2 * k + 1]);
    }
    for (int k = 0; k < COUNT; k++) {
        in[2 * k] = (k + rank) % 3 == 0;
        out[2 * k] = 99;
    }
    CHECK_MPI(MPI_Allreduce(in, out, COUNT, t, MPI_LOR, MPI_COMM_WORLD));
    for (int k = 0; k < COUNT; k++) {
        int want = 0;
        for (int r = 0; r < size; r++)
            want |= (k + r) % 3 == 0;
        CHECK(out[2 * k] == want, "Allreduce LOR on resized: element %d is %d, expected %d", k, out[2 * k],
              want);
    }
    MPI_Type_free(&t);
}

/* struct { int a; int32_t b; } and dup(MPI_UNSIGNED) */
static void test_struct_and_dup(void)
{
    struct s {
        int a;
        int32_t b;
    };
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {offsetof(struct s, a), offsetof(struct s, b)};
    MPI_Datatype tt[2] = {MPI_INT, MPI_INT32_T}, t, d;
    MPI_Type_create_struct(2, bl, disp, tt, &t);
    MPI_Type_commit(&t);
    struct s in[3], out[3];
    for (int k = 0; k < 3; k++) {
        in[k].a = rank + k;
        in[k].b = -rank * k;
    }
    CHECK_MPI(MPI_Allreduce(in, out, 3, t, MPI_SUM, MPI_COMM_WORLD));
    for (int k = 0; k < 3; k++) {
        int sa = 0, sb = 0;
        for (int r = 0; r < size; r++) {
            sa += r + k;
            sb += -r * k;
        }
        CHECK(out[k].a == sa && out[k].b == sb, "Allreduce SUM on struct: element %d is (%d, %d)", k,
              out[k].a, out[k].b);
    }
    MPI_Type_dup(MPI_UNSIGNED, &d);
    MPI_Type_commit(&d);
    unsigned ui[4], uo[4];
    for (int k = 0; k < 4; k++)
        ui[k] = 4000000000u - (unsigned)(rank * 7 + k);
    CHECK_MPI(MPI_Allreduce(ui, uo, 4, d, MPI_MIN, MPI_COMM_WORLD));
    for (int k = 0; k < 4; k++)
        CHECK(uo[k] == 4000000000u - (unsigned)((size - 1) * 7 + k), "Allreduce MIN on dup: %u", uo[k]);
    unsigned acc[4] = {1, 2, 3, 4};
    CHECK_MPI(MPI_Reduce_local(ui, acc, 4, d, MPI_MAX));
    for (int k = 0; k < 4; k++)
        CHECK(acc[k] == ui[k], "Reduce_local MAX on dup: %u", acc[k]);
    MPI_Type_free(&d);
    MPI_Type_free(&t);
}

/* indexed MPI_LONG_DOUBLE: blocks {1 at 0, 2 at 3} -> extent 5 long doubles */
static void test_indexed_long_double(void)
{
    MPI_Datatype t;
    int bl[2] = {1, 2}, dp[2] = {0, 3};
    MPI_Type_indexed(2, bl, dp, MPI_LONG_DOUBLE, &t);
    MPI_Type_commit(&t);
    enum { COUNT = 2, SPAN = 10 };
    long double in[SPAN], acc[SPAN], out[SPAN];
    for (int k = 0; k < SPAN; k++) {
        int data = k % 5 == 0 || k % 5 >= 3;
        in[k] = data ? 1.0L / (k + 3) : -1.0L;
        acc[k] = data ? 2.0L / (k + 7) : -2.0L;
        out[k] = -3.0L;
    }
    long double want[SPAN];
    for (int k = 0; k < SPAN; k++) {
        int data = k % 5 == 0 || k % 5 >= 3;
        want[k] = data ? in[k] + acc[k] : -2.0L;
    }
    CHECK_MPI(MPI_Reduce_local(in, acc, COUNT, t, MPI_SUM));
    for (int k = 0; k < SPAN; k++)
        if (acc[k] != want[k]) {
            CHECK(0, "Reduce_local SUM on indexed long double: %d is %Lg, expected %Lg", k, acc[k], want[k]);
            break;
        }
    for (int k = 0; k < SPAN; k++)
        in[k] = (long double)(rank + k);
    CHECK_MPI(MPI_Allreduce(in, out, COUNT, t, MPI_SUM, MPI_COMM_WORLD));
    for (int k = 0; k < SPAN; k++) {
        int data = k % 5 == 0 || k % 5 >= 3;
        long double w = data ? (long double)(size * (size - 1) / 2 + size * k) : -3.0L;
        if (out[k] != w) {
            CHECK(0, "Allreduce SUM on indexed long double: %d is %Lg, expected %Lg", k, out[k], w);
            break;
        }
    }
    MPI_Type_free(&t);
}

static void test_errors(void)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    struct {
        int a;
        double b;
    } m[2] = {{0, 0}, {0, 0}}, n[2] = {{0, 0}, {0, 0}};
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, sizeof(double)};
    MPI_Datatype tt[2] = {MPI_INT, MPI_DOUBLE}, mixed, dcont, dvec, pvec;
    MPI_Type_create_struct(2, bl, disp, tt, &mixed);
    MPI_Type_commit(&mixed);
    MPI_Type_contiguous(2, MPI_DOUBLE, &dcont);
    MPI_Type_commit(&dcont);
    MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &dvec);
    MPI_Type_commit(&dvec);
    MPI_Type_vector(2, 1, 2, MPI_DOUBLE_INT, &pvec);
    MPI_Type_commit(&pvec);
    double d[16] = {0}, e[16] = {0};

    CHECK_ERR_CLASS(MPI_Reduce_local(m, n, 1, mixed, MPI_SUM), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Allreduce(m, n, 1, mixed, MPI_SUM, comm), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(d, e, 1, dcont, MPI_BAND), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Allreduce(d, e, 1, dcont, MPI_BAND, comm), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(d, e, 1, dvec, MPI_MAXLOC), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(d, e, 1, pvec, MPI_SUM), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce(d, e, 1, pvec, MPI_SUM, 0, comm), MPI_ERR_OP);

    /* an uncommitted type is a datatype error */
    MPI_Datatype raw;
    MPI_Type_contiguous(2, MPI_INT, &raw);
    CHECK_ERR_CLASS(MPI_Reduce_local(d, e, 1, raw, MPI_SUM), MPI_ERR_TYPE);
    MPI_Type_free(&raw);

    MPI_Type_free(&mixed);
    MPI_Type_free(&dcont);
    MPI_Type_free(&dvec);
    MPI_Type_free(&pvec);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    test_vector();
    test_pairs();
    test_resized();
    test_struct_and_dup();
    test_indexed_long_double();
    test_errors();
    return check_finish("op_derived");
}
