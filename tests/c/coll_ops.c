/* ranks: 1 2 3 4 5 8 */
/* Predefined reduction operations, through MPI_Allreduce (over the ranks of
   MPI_COMM_WORLD) and MPI_Reduce_local (folding NV "virtual ranks" locally):
   SUM/PROD/MAX/MIN on the C integer and floating types (type extremes in
   MAX/MIN, so that signedness matters), SUM/PROD on C complex types,
   LAND/LOR/LXOR on int (true values other than 1) and C_BOOL, BAND/BOR/BXOR
   on int, unsigned and MPI_BYTE, MINLOC/MAXLOC on the pair types (with ties:
   the lower index wins; indices decrease with rank). Expected values are
   computed with C operators; floating inputs are small integers so every
   result is exact. Error classes under MPI_ERRORS_RETURN: an op not defined
   for the type, MPI_OP_NULL, a root out of range, a negative count.

   Compiling with -DSKIP_MPICH_402_BUGS skips what MPICH 4.0.2 gets wrong
   (for validating the rest against it): MAX/MIN on unsigned types compare
   as signed (max(200, 5) on MPI_UNSIGNED_CHAR gives 5, in Allreduce and in
   Reduce_local), so the high-bit extremes are left out; a negative count in
   Allreduce/Reduce/Reduce_local is not detected and corrupts memory. */
#include "check.h"
#include <complex.h>
#include <float.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef SKIP_MPICH_402_BUGS
#define MPICH_BUG(cond) (cond)
#else
#define MPICH_BUG(cond) 0
#endif

#define N 16  /* elements per reduction */
#define NV 8  /* virtual ranks folded with MPI_Reduce_local */

static int rank, size;

/* ---- SUM / PROD / MAX / MIN on integer and floating types ---- */

/* input of (virtual) rank r of nr, element j, for op */
static long long arith_val(MPI_Op op, int r, int nr, int j, int is_signed)
{
    if (op == MPI_SUM)
        return is_signed ? (r * 3 + j) % 7 - 3 : (r * 3 + j) % 7;
    if (op == MPI_PROD) {
        int k = (r + j) % 5;
        if (k == 0)
            return 2;
        if (k == 3 && is_signed)
            return -1;
        return 1;
    }
    /* MAX / MIN: extremes supplied separately (j == 0, 1); here small values */
    (void)nr;
    return is_signed ? (r * 5 + j * 3) % 11 - 5 : (r * 5 + j * 3) % 11;
}

#define DEF_ARITH(NAME, T, MT, SIGNED, TMIN, TMAX)                                      \
    static T NAME##_val(MPI_Op op, int r, int nr, int j)                                 \
    {                                                                                    \
        if ((op == MPI_MAX || op == MPI_MIN) && !MPICH_BUG(!(SIGNED))) {                 \
            if (j == 0 && r == nr - 1)                                                   \
                return (T)(TMAX);                                                        \
            if (j == 1 && r == 0)                                                        \
                return (T)(TMIN);                                                        \
            if (j == 2 && r == nr / 2)                                                   \
                return (T)((TMAX) / 2 + 1); /* high bit set for unsigned types */       \
        }                                                                                \
        return (T)arith_val(op, r, nr, j, SIGNED);                                       \
    }                                                                                    \
    static T NAME##_fold(MPI_Op op, T a, T b)                                            \
    {                                                                                    \
        if (op == MPI_SUM)                                                               \
            return (T)(a + b);                                                           \
        if (op == MPI_PROD)                                                              \
            return (T)(a * b);                                                           \
        if (op == MPI_MAX)                                                               \
            return a > b ? a : b;                                                        \
        return a < b ? a : b;                                                            \
    }                                                                                    \
    static void test_##NAME(void)                                                        \
    {                                                                                    \
        static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};               \
        for (int o = 0; o < 4; o++) {                                                    \
            MPI_Op op = ops[o];                                                          \
            T in[N], out[N], exp[N], acc[N], lin[N], lexp[N];                            \
            for (int j = 0; j < N; j++) {                                                \
                in[j] = NAME##_val(op, rank, size, j);                                   \
                out[j] = (T)7;                                                           \
                exp[j] = NAME##_val(op, 0, size, j);                                     \
                for (int r = 1; r < size; r++)                                           \
                    exp[j] = NAME##_fold(op, exp[j], NAME##_val(op, r, size, j));        \
            }                                                                            \
            CHECK_MPI(MPI_Allreduce(in, out, N, MT, op, MPI_COMM_WORLD));                \
            for (int j = 0; j < N; j++)                                                  \
                if (out[j] != exp[j]) {                                                  \
                    CHECK(0, "Allreduce %s on %s: element %d wrong", check_op_name(op), #MT, j); \
                    break;                                                               \
                }                                                                        \
            /* Reduce_local: acc = v(r) op acc for r = 1 .. NV-1 */                      \
            for (int j = 0; j < N; j++) {                                                \
                acc[j] = NAME##_val(op, 0, NV, j);                                       \
                lexp[j] = acc[j];                                                        \
                for (int r = 1; r < NV; r++)                                             \
                    lexp[j] = NAME##_fold(op, lexp[j], NAME##_val(op, r, NV, j));        \
            }                                                                            \
            for (int r = 1; r < NV; r++) {                                               \
                for (int j = 0; j < N; j++)                                              \
                    lin[j] = NAME##_val(op, r, NV, j);                                   \
                CHECK_MPI(MPI_Reduce_local(lin, acc, N, MT, op));                        \
            }                                                                            \
            for (int j = 0; j < N; j++)                                                  \
                if (acc[j] != lexp[j]) {                                                 \
                    CHECK(0, "Reduce_local %s on %s: element %d wrong", check_op_name(op), #MT,  \
                          j);                                                            \
                    break;                                                               \
                }                                                                        \
        }                                                                                \
    }

DEF_ARITH(int, int, MPI_INT, 1, INT_MIN, INT_MAX)
DEF_ARITH(long, long, MPI_LONG, 1, LONG_MIN, LONG_MAX)
DEF_ARITH(llong, long long, MPI_LONG_LONG, 1, LLONG_MIN, LLONG_MAX)
DEF_ARITH(short, short, MPI_SHORT, 1, SHRT_MIN, SHRT_MAX)
DEF_ARITH(schar, signed char, MPI_SIGNED_CHAR, 1, SCHAR_MIN, SCHAR_MAX)
DEF_ARITH(uchar, unsigned char, MPI_UNSIGNED_CHAR, 0, 0, UCHAR_MAX)
DEF_ARITH(ushort, unsigned short, MPI_UNSIGNED_SHORT, 0, 0, USHRT_MAX)
DEF_ARITH(uint, unsigned, MPI_UNSIGNED, 0, 0, UINT_MAX)
DEF_ARITH(ulong, unsigned long, MPI_UNSIGNED_LONG, 0, 0, ULONG_MAX)
DEF_ARITH(ullong, unsigned long long, MPI_UNSIGNED_LONG_LONG, 0, 0, ULLONG_MAX)
DEF_ARITH(i8, int8_t, MPI_INT8_T, 1, INT8_MIN, INT8_MAX)
DEF_ARITH(i16, int16_t, MPI_INT16_T, 1, INT16_MIN, INT16_MAX)
DEF_ARITH(i32, int32_t, MPI_INT32_T, 1, INT32_MIN, INT32_MAX)
DEF_ARITH(i64, int64_t, MPI_INT64_T, 1, INT64_MIN, INT64_MAX)
DEF_ARITH(u8, uint8_t, MPI_UINT8_T, 0, 0, UINT8_MAX)
DEF_ARITH(u16, uint16_t, MPI_UINT16_T, 0, 0, UINT16_MAX)
DEF_ARITH(u32, uint32_t, MPI_UINT32_T, 0, 0, UINT32_MAX)
DEF_ARITH(u64, uint64_t, MPI_UINT64_T, 0, 0, UINT64_MAX)
DEF_ARITH(flt, float, MPI_FLOAT, 1, -FLT_MAX, FLT_MAX)
DEF_ARITH(dbl, double, MPI_DOUBLE, 1, -DBL_MAX, DBL_MAX)

/* ---- SUM / PROD on complex types ---- */

static double complex cval(int r, int j)
{
    static const double re[] = {1, 0, -1, 1, 2, 0, 1};
    static const double im[] = {0, 1, 0, 1, 0, -1, -1};
    int k = (r * 2 + j) % 7;
    return re[k] + im[k] * I;
}

#define DEF_COMPLEX(NAME, T, MT)                                                         \
    static void test_##NAME(void)                                                        \
    {                                                                                    \
        static const MPI_Op ops[] = {MPI_SUM, MPI_PROD};                                 \
        for (int o = 0; o < 2; o++) {                                                    \
            MPI_Op op = ops[o];                                                          \
            T in[N], out[N], exp[N], acc[N], lin[N], lexp[N];                            \
            for (int j = 0; j < N; j++) {                                                \
                in[j] = (T)cval(rank, j);                                                \
                out[j] = 0;                                                              \
                exp[j] = (T)cval(0, j);                                                  \
                for (int r = 1; r < size; r++)                                           \
                    exp[j] = op == MPI_SUM ? exp[j] + (T)cval(r, j) : exp[j] * (T)cval(r, j); \
                acc[j] = lexp[j] = (T)cval(0, j);                                        \
                for (int r = 1; r < NV; r++)                                             \
                    lexp[j] = op == MPI_SUM ? lexp[j] + (T)cval(r, j) : lexp[j] * (T)cval(r, j); \
            }                                                                            \
            CHECK_MPI(MPI_Allreduce(in, out, N, MT, op, MPI_COMM_WORLD));                \
            for (int j = 0; j < N; j++)                                                  \
                if (out[j] != exp[j]) {                                                  \
                    CHECK(0, "Allreduce %s on %s: element %d is %g%+gi, expected %g%+gi", \
                          check_op_name(op), #MT, j, (double)creal(out[j]), (double)cimag(out[j]), \
                          (double)creal(exp[j]), (double)cimag(exp[j]));                 \
                    break;                                                               \
                }                                                                        \
            for (int r = 1; r < NV; r++) {                                               \
                for (int j = 0; j < N; j++)                                              \
                    lin[j] = (T)cval(r, j);                                              \
                CHECK_MPI(MPI_Reduce_local(lin, acc, N, MT, op));                        \
            }                                                                            \
            for (int j = 0; j < N; j++)                                                  \
                if (acc[j] != lexp[j]) {                                                 \
                    CHECK(0, "Reduce_local %s on %s: element %d wrong", check_op_name(op), #MT,  \
                          j);                                                            \
                    break;                                                               \
                }                                                                        \
        }                                                                                \
    }

DEF_COMPLEX(dcomplex, double complex, MPI_C_DOUBLE_COMPLEX)
DEF_COMPLEX(fcomplex, float complex, MPI_C_FLOAT_COMPLEX)

/* ---- logical ops ---- */

/* truth of (virtual) rank r of nr, element j: all true, all false, only the
   first, only the last, alternating, and mixed patterns */
static int truth(int r, int nr, int j)
{
    switch (j) {
    case 0: return 1;
    case 1: return 0;
    case 2: return r == 0;
    case 3: return r == nr - 1;
    case 4: return r % 2;
    default: return ((r + 1) * j / 3) % 2 == 0;
    }
}

/* int representation of "true": not always 1; 256 has a zero low byte */
static int true_int(int r, int j)
{
    static const int tv[] = {1, 2, -4, 256, 7};
    return tv[(r + j) % 5];
}

static int lfold(MPI_Op op, int a, int b)
{
    if (op == MPI_LAND)
        return a && b;
    if (op == MPI_LOR)
        return a || b;
    return !a != !b;
}

static void test_logical(void)
{
    static const MPI_Op ops[] = {MPI_LAND, MPI_LOR, MPI_LXOR};
    for (int o = 0; o < 3; o++) {
        MPI_Op op = ops[o];
        int exp[N], lexp[N];
        for (int j = 0; j < N; j++) {
            exp[j] = truth(0, size, j);
            for (int r = 1; r < size; r++)
                exp[j] = lfold(op, exp[j], truth(r, size, j));
            lexp[j] = truth(0, NV, j);
            for (int r = 1; r < NV; r++)
                lexp[j] = lfold(op, lexp[j], truth(r, NV, j));
        }
        /* int */
        {
            int in[N], out[N], acc[N], lin[N];
            for (int j = 0; j < N; j++) {
                in[j] = truth(rank, size, j) ? true_int(rank, j) : 0;
                out[j] = -99;
                acc[j] = truth(0, NV, j) ? true_int(0, j) : 0;
            }
            CHECK_MPI(MPI_Allreduce(in, out, N, MPI_INT, op, MPI_COMM_WORLD));
            for (int j = 0; j < N; j++)
                if ((out[j] != 0) != exp[j]) {
                    CHECK(0, "Allreduce %s on MPI_INT: element %d is %d, expected %s", check_op_name(op),
                          j, out[j], exp[j] ? "true" : "false");
                    break;
                }
            for (int r = 1; r < NV; r++) {
                for (int j = 0; j < N; j++)
                    lin[j] = truth(r, NV, j) ? true_int(r, j) : 0;
                CHECK_MPI(MPI_Reduce_local(lin, acc, N, MPI_INT, op));
            }
            for (int j = 0; j < N; j++)
                if ((acc[j] != 0) != lexp[j]) {
                    CHECK(0, "Reduce_local %s on MPI_INT: element %d is %d, expected %s",
                          check_op_name(op), j, acc[j], lexp[j] ? "true" : "false");
                    break;
                }
        }
        /* C _Bool */
        {
            bool in[N], out[N], acc[N], lin[N];
            for (int j = 0; j < N; j++) {
                in[j] = truth(rank, size, j);
                out[j] = !exp[j];
                acc[j] = truth(0, NV, j);
            }
            CHECK_MPI(MPI_Allreduce(in, out, N, MPI_C_BOOL, op, MPI_COMM_WORLD));
            for (int j = 0; j < N; j++)
                if (out[j] != (bool)exp[j]) {
                    CHECK(0, "Allreduce %s on MPI_C_BOOL: element %d is %d, expected %d",
                          check_op_name(op), j, (int)out[j], exp[j]);
                    break;
                }
            for (int r = 1; r < NV; r++) {
                for (int j = 0; j < N; j++)
                    lin[j] = truth(r, NV, j);
                CHECK_MPI(MPI_Reduce_local(lin, acc, N, MPI_C_BOOL, op));
            }
            for (int j = 0; j < N; j++)
                if (acc[j] != (bool)lexp[j]) {
                    CHECK(0, "Reduce_local %s on MPI_C_BOOL: element %d is %d, expected %d",
                          check_op_name(op), j, (int)acc[j], lexp[j]);
                    break;
                }
        }
    }
}

/* ---- bitwise ops ---- */

static unsigned bits(int r, int j)
{
    unsigned x = (unsigned)(r + 1) * 2654435761u ^ (unsigned)(j + 1) * 40503u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return x;
}

#define DEF_BITWISE(NAME, T, MT)                                                         \
    static T NAME##_bfold(MPI_Op op, T a, T b)                                           \
    {                                                                                    \
        if (op == MPI_BAND)                                                              \
            return (T)(a & b);                                                           \
        if (op == MPI_BOR)                                                               \
            return (T)(a | b);                                                           \
        return (T)(a ^ b);                                                               \
    }                                                                                    \
    static void test_##NAME(void)                                                        \
    {                                                                                    \
        static const MPI_Op ops[] = {MPI_BAND, MPI_BOR, MPI_BXOR};                       \
        for (int o = 0; o < 3; o++) {                                                    \
            MPI_Op op = ops[o];                                                          \
            T in[N], out[N], exp[N], acc[N], lin[N], lexp[N];                            \
            for (int j = 0; j < N; j++) {                                                \
                /* BAND: mostly-set inputs, BOR: mostly-clear, so results vary */        \
                in[j] = (T)(op == MPI_BAND   ? bits(rank, j) | bits(rank + 99, j)         \
                            : op == MPI_BOR ? bits(rank, j) & bits(rank + 99, j)         \
                                            : bits(rank, j));                            \
                out[j] = 0;                                                              \
            }                                                                            \
            for (int j = 0; j < N; j++) {                                                \
                T v0 = (T)(op == MPI_BAND   ? bits(0, j) | bits(99, j)                   \
                           : op == MPI_BOR ? bits(0, j) & bits(99, j)                    \
                                           : bits(0, j));                                \
                exp[j] = v0;                                                             \
                for (int r = 1; r < size; r++)                                           \
                    exp[j] = NAME##_bfold(op, exp[j],                                    \
                                          (T)(op == MPI_BAND ? bits(r, j) | bits(r + 99, j) \
                                              : op == MPI_BOR ? bits(r, j) & bits(r + 99, j) \
                                                              : bits(r, j)));            \
                acc[j] = lexp[j] = v0;                                                   \
                for (int r = 1; r < NV; r++)                                             \
                    lexp[j] = NAME##_bfold(op, lexp[j],                                  \
                                           (T)(op == MPI_BAND ? bits(r, j) | bits(r + 99, j) \
                                               : op == MPI_BOR ? bits(r, j) & bits(r + 99, j) \
                                                               : bits(r, j)));           \
            }                                                                            \
            CHECK_MPI(MPI_Allreduce(in, out, N, MT, op, MPI_COMM_WORLD));                \
            for (int j = 0; j < N; j++)                                                  \
                if (out[j] != exp[j]) {                                                  \
                    CHECK(0, "Allreduce %s on %s: element %d is %#x, expected %#x",      \
                          check_op_name(op), #MT, j, (unsigned)out[j], (unsigned)exp[j]);      \
                    break;                                                               \
                }                                                                        \
            for (int r = 1; r < NV; r++) {                                               \
                for (int j = 0; j < N; j++)                                              \
                    lin[j] = (T)(op == MPI_BAND   ? bits(r, j) | bits(r + 99, j)          \
                                 : op == MPI_BOR ? bits(r, j) & bits(r + 99, j)          \
                                                 : bits(r, j));                          \
                CHECK_MPI(MPI_Reduce_local(lin, acc, N, MT, op));                        \
            }                                                                            \
            for (int j = 0; j < N; j++)                                                  \
                if (acc[j] != lexp[j]) {                                                 \
                    CHECK(0, "Reduce_local %s on %s: element %d is %#x, expected %#x",   \
                          check_op_name(op), #MT, j, (unsigned)acc[j], (unsigned)lexp[j]);     \
                    break;                                                               \
                }                                                                        \
        }                                                                                \
    }

DEF_BITWISE(bint, int, MPI_INT)
DEF_BITWISE(buint, unsigned, MPI_UNSIGNED)
DEF_BITWISE(bbyte, unsigned char, MPI_BYTE)

/* ---- MINLOC / MAXLOC ---- */

/* value with many ties; index decreasing with rank so that "lower index
   wins" differs from "lower rank wins" */
static int loc_val(int r, int j)
{
    return (r * (j + 1) + j) % 3 - 1;
}

static int loc_idx(int r, int nr, int j)
{
    return (nr - r) * 10 + j;
}

#define DEF_LOC(NAME, VT, MT)                                                            \
    typedef struct {                                                                     \
        VT v;                                                                            \
        int i;                                                                           \
    } NAME##_t;                                                                          \
    static NAME##_t NAME##_mk(int r, int nr, int j)                                      \
    {                                                                                    \
        NAME##_t p;                                                                      \
        p.v = (VT)loc_val(r, j);                                                         \
        p.i = loc_idx(r, nr, j);                                                         \
        return p;                                                                        \
    }                                                                                    \
    static NAME##_t NAME##_lfold(MPI_Op op, NAME##_t a, NAME##_t b)                      \
    {                                                                                    \
        if (a.v == b.v) {                                                                \
            a.i = a.i < b.i ? a.i : b.i;                                                 \
            return a;                                                                    \
        }                                                                                \
        if (op == MPI_MAXLOC)                                                            \
            return a.v > b.v ? a : b;                                                    \
        return a.v < b.v ? a : b;                                                        \
    }                                                                                    \
    static void test_##NAME(void)                                                        \
    {                                                                                    \
        static const MPI_Op ops[] = {MPI_MAXLOC, MPI_MINLOC};                            \
        for (int o = 0; o < 2; o++) {                                                    \
            MPI_Op op = ops[o];                                                          \
            NAME##_t in[N], out[N], exp[N], acc[N], lin[N], lexp[N];                     \
            for (int j = 0; j < N; j++) {                                                \
                in[j] = NAME##_mk(rank, size, j);                                        \
                out[j].v = (VT)99;                                                       \
                out[j].i = -99;                                                          \
                exp[j] = NAME##_mk(0, size, j);                                          \
                for (int r = 1; r < size; r++)                                           \
                    exp[j] = NAME##_lfold(op, exp[j], NAME##_mk(r, size, j));            \
                acc[j] = lexp[j] = NAME##_mk(0, NV, j);                                  \
                for (int r = 1; r < NV; r++)                                             \
                    lexp[j] = NAME##_lfold(op, lexp[j], NAME##_mk(r, NV, j));            \
            }                                                                            \
            CHECK_MPI(MPI_Allreduce(in, out, N, MT, op, MPI_COMM_WORLD));                \
            for (int j = 0; j < N; j++)                                                  \
                if (out[j].v != exp[j].v || out[j].i != exp[j].i) {                      \
                    CHECK(0, "Allreduce %s on %s: element %d is (%g, %d), expected (%g, %d)", \
                          check_op_name(op), #MT, j, (double)out[j].v, out[j].i,              \
                          (double)exp[j].v, exp[j].i);                                   \
                    break;                                                               \
                }                                                                        \
            for (int r = 1; r < NV; r++) {                                               \
                for (int j = 0; j < N; j++)                                              \
                    lin[j] = NAME##_mk(r, NV, j);                                        \
                CHECK_MPI(MPI_Reduce_local(lin, acc, N, MT, op));                        \
            }                                                                            \
            for (int j = 0; j < N; j++)                                                  \
                if (acc[j].v != lexp[j].v || acc[j].i != lexp[j].i) {                    \
                    CHECK(0, "Reduce_local %s on %s: element %d is (%g, %d), expected (%g, %d)", \
                          check_op_name(op), #MT, j, (double)acc[j].v, acc[j].i,              \
                          (double)lexp[j].v, lexp[j].i);                                 \
                    break;                                                               \
                }                                                                        \
        }                                                                                \
    }

DEF_LOC(ldi, double, MPI_DOUBLE_INT)
DEF_LOC(l2i, int, MPI_2INT)
DEF_LOC(lfi, float, MPI_FLOAT_INT)
DEF_LOC(lli, long, MPI_LONG_INT)
DEF_LOC(lsi, short, MPI_SHORT_INT)

/* ---- error classes ---- */

static void test_errors(void)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    /* MPI_Reduce_local has no communicator: errors are raised on
       MPI_COMM_SELF (MPI-4) or MPI_COMM_WORLD (earlier) */
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int a[4] = {1, 2, 3, 4}, b[4] = {0, 0, 0, 0};
    double d[2] = {1.0, 2.0}, e[2] = {0, 0};

    CHECK_ERR_CLASS(MPI_Allreduce(a, b, 2, MPI_2INT, MPI_SUM, comm), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Allreduce(d, e, 2, MPI_DOUBLE, MPI_BAND, comm), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Allreduce(a, b, 2, MPI_INT, MPI_OP_NULL, comm), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(a, b, 2, MPI_2INT, MPI_SUM), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(d, e, 2, MPI_DOUBLE, MPI_BAND), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce_local(a, b, 2, MPI_INT, MPI_OP_NULL), MPI_ERR_OP);
    CHECK_ERR_CLASS(MPI_Reduce(a, b, 2, MPI_INT, MPI_SUM, size, comm), MPI_ERR_ROOT);
    CHECK_ERR_CLASS(MPI_Reduce(a, b, 2, MPI_INT, MPI_SUM, size + 3, comm), MPI_ERR_ROOT);
    if (!MPICH_BUG(1)) {
        CHECK_ERR_CLASS(MPI_Allreduce(a, b, -1, MPI_INT, MPI_SUM, comm), MPI_ERR_COUNT);
        CHECK_ERR_CLASS(MPI_Reduce(a, b, -1, MPI_INT, MPI_SUM, 0, comm), MPI_ERR_COUNT);
        CHECK_ERR_CLASS(MPI_Reduce_local(a, b, -1, MPI_INT, MPI_SUM), MPI_ERR_COUNT);
    }

    /* the communicator still works after the errors */
    int one = 1, tot = 0;
    CHECK_MPI(MPI_Allreduce(&one, &tot, 1, MPI_INT, MPI_SUM, comm));
    CHECK(tot == size, "Allreduce after errors: %d, expected %d", tot, size);

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_free(&comm);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    test_int();
    test_long();
    test_llong();
    test_short();
    test_schar();
    test_uchar();
    test_ushort();
    test_uint();
    test_ulong();
    test_ullong();
    test_i8();
    test_i16();
    test_i32();
    test_i64();
    test_u8();
    test_u16();
    test_u32();
    test_u64();
    test_flt();
    test_dbl();
    test_dcomplex();
    test_fcomplex();
    test_logical();
    test_bint();
    test_buint();
    test_bbyte();
    test_ldi();
    test_l2i();
    test_lfi();
    test_lli();
    test_lsi();
    test_errors();

    return check_finish("coll_ops");
}
