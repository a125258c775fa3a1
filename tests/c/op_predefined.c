/* ranks: 1 2 3 4 */
/* Every predefined reduction operation on every predefined datatype.

   1. The table of MPI 4.1 section 6.9.2, written out here: each predefined
      type belongs to one group (C integer, Fortran integer, multi-language,
      floating point, complex, logical, byte, MINLOC/MAXLOC pair, or none:
      MPI_CHAR, MPI_WCHAR, MPI_CHARACTER, MPI_PACKED), and each of the twelve
      reduction ops either works on it (MPI_Reduce_local and MPI_Allreduce
      succeed) or fails with MPI_ERR_OP, except the pairs MPICH also accepts
      (see extension()), which may go either way.
   2. Values, for the types coll_ops.c leaves out or covers lightly: integer
      ops on full-range values (wrap-around, signedness, 128-bit Fortran
      integers, MPI_AINT/OFFSET/COUNT), floating and complex ops on values
      that round, in every floating format (float, double, long double, IEEE
      quad for MPI_REAL16/MPI_COMPLEX32, IEEE half for MPI_REAL2/MPI_COMPLEX4
      where the compiler has them), logical ops on C and Fortran logicals,
      MINLOC/MAXLOC on all nine pair types. MPI_Reduce_local folds NV
      "virtual ranks" (inout = in op inout, one rounding per step, compared
      exactly with the same steps in C); MPI_Allreduce uses values whose
      results do not depend on the order of combination. */
#include "check.h"
#include <complex.h>
#include <stdbool.h>
#include <stdint.h>

#define N 12 /* elements per reduction */
#define NV 8 /* virtual ranks folded with MPI_Reduce_local */

#if defined(__SIZEOF_FLOAT128__) && !defined(__clang__)
#define HAVE_QUAD 1
typedef __float128 quad_t;
typedef _Complex float __attribute__((mode(TC))) cquad_t;
#endif
#if defined(__FLT16_MAX__) && !defined(__clang__)
#define HAVE_HALF 1
typedef _Float16 half_t;
typedef _Complex _Float16 chalf_t;
#endif

static int rank, size;

/* ---- 1. the op/type table ---- */

enum group { CINT, FINT, MULTI, FLT, CPLX, LOGIC, BYTE, PAIR, NONE };

static const struct {
    MPI_Datatype t;
    const char *name;
    enum group g;
} types[] = {
#define T(x, g) {x, #x, g}
    T(MPI_CHAR, NONE), T(MPI_WCHAR, NONE), T(MPI_CHARACTER, NONE), T(MPI_PACKED, NONE),
    T(MPI_SIGNED_CHAR, CINT), T(MPI_UNSIGNED_CHAR, CINT), T(MPI_SHORT, CINT),
    T(MPI_UNSIGNED_SHORT, CINT), T(MPI_INT, CINT), T(MPI_UNSIGNED, CINT), T(MPI_LONG, CINT),
    T(MPI_UNSIGNED_LONG, CINT), T(MPI_LONG_LONG, CINT), T(MPI_UNSIGNED_LONG_LONG, CINT),
    T(MPI_INT8_T, CINT), T(MPI_INT16_T, CINT), T(MPI_INT32_T, CINT), T(MPI_INT64_T, CINT),
    T(MPI_UINT8_T, CINT), T(MPI_UINT16_T, CINT), T(MPI_UINT32_T, CINT), T(MPI_UINT64_T, CINT),
    T(MPI_INTEGER, FINT), T(MPI_INTEGER1, FINT), T(MPI_INTEGER2, FINT), T(MPI_INTEGER4, FINT),
    T(MPI_INTEGER8, FINT), T(MPI_INTEGER16, FINT),
    T(MPI_AINT, MULTI), T(MPI_OFFSET, MULTI), T(MPI_COUNT, MULTI),
    T(MPI_FLOAT, FLT), T(MPI_DOUBLE, FLT), T(MPI_LONG_DOUBLE, FLT), T(MPI_REAL, FLT),
    T(MPI_DOUBLE_PRECISION, FLT), T(MPI_REAL2, FLT), T(MPI_REAL4, FLT), T(MPI_REAL8, FLT),
    T(MPI_REAL16, FLT),
    T(MPI_C_FLOAT_COMPLEX, CPLX), T(MPI_C_DOUBLE_COMPLEX, CPLX),
    T(MPI_C_LONG_DOUBLE_COMPLEX, CPLX), T(MPI_CXX_FLOAT_COMPLEX, CPLX),
    T(MPI_CXX_DOUBLE_COMPLEX, CPLX), T(MPI_CXX_LONG_DOUBLE_COMPLEX, CPLX),
    T(MPI_COMPLEX, CPLX), T(MPI_DOUBLE_COMPLEX, CPLX), T(MPI_COMPLEX4, CPLX),
    T(MPI_COMPLEX8, CPLX), T(MPI_COMPLEX16, CPLX), T(MPI_COMPLEX32, CPLX),
    T(MPI_C_BOOL, LOGIC), T(MPI_CXX_BOOL, LOGIC), T(MPI_LOGICAL, LOGIC),
    T(MPI_LOGICAL1, LOGIC), T(MPI_LOGICAL2, LOGIC), T(MPI_LOGICAL4, LOGIC),
    T(MPI_LOGICAL8, LOGIC), T(MPI_LOGICAL16, LOGIC),
    T(MPI_BYTE, BYTE),
    T(MPI_FLOAT_INT, PAIR), T(MPI_DOUBLE_INT, PAIR), T(MPI_LONG_INT, PAIR), T(MPI_2INT, PAIR),
    T(MPI_SHORT_INT, PAIR), T(MPI_LONG_DOUBLE_INT, PAIR), T(MPI_2REAL, PAIR),
    T(MPI_2DOUBLE_PRECISION, PAIR), T(MPI_2INTEGER, PAIR),
#undef T
};

/* Combinations outside the standard's table that MPICH accepts and programs rely on
   (MPI_CHAR as a C integer; logical ops on Fortran and multi-language integers): an
   implementation may accept or reject them (op_extensions.c checks Baton's results). */
static int extension(MPI_Op op, MPI_Datatype t, enum group g)
{
    int logical = op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR;
    int cint_op = op != MPI_MAXLOC && op != MPI_MINLOC;
    return (t == MPI_CHAR && cint_op) || (logical && (g == FINT || g == MULTI));
}

/* MPI 4.1 table: which groups each op accepts (Fortran LOGICALn count as logical). */
static int allowed(MPI_Op op, enum group g)
{
    if (op == MPI_MAX || op == MPI_MIN)
        return g == CINT || g == FINT || g == MULTI || g == FLT;
    if (op == MPI_SUM || op == MPI_PROD)
        return g == CINT || g == FINT || g == MULTI || g == FLT || g == CPLX;
    if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR)
        return g == CINT || g == LOGIC;
    if (op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR)
        return g == CINT || g == FINT || g == MULTI || g == BYTE;
    return g == PAIR; /* MINLOC, MAXLOC */
}

static void test_table(void)
{
    static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX,  MPI_MIN,  MPI_LAND,   MPI_LOR,
                                 MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC};
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            /* zeros are a valid value of every type, and big enough for any one element */
            _Alignas(64) unsigned char a[64] = {0}, b[64] = {0};
            int ok = allowed(ops[o], types[t].g);
            int rc = MPI_Reduce_local(a, b, 1, types[t].t, ops[o]);
            int rc2 = MPI_Allreduce(a, b, 1, types[t].t, ops[o], comm);
            if (!ok && extension(ops[o], types[t].t, types[t].g))
                continue;
            int cls = -1, cls2 = -1;
            if (rc != MPI_SUCCESS)
                MPI_Error_class(rc, &cls);
            if (rc2 != MPI_SUCCESS)
                MPI_Error_class(rc2, &cls2);
            if (ok) {
                CHECK(rc == MPI_SUCCESS, "Reduce_local %s on %s failed (class %d)", check_op_name(ops[o]),
                      types[t].name, cls);
                CHECK(rc2 == MPI_SUCCESS, "Allreduce %s on %s failed (class %d)", check_op_name(ops[o]),
                      types[t].name, cls2);
            } else {
                CHECK(cls == MPI_ERR_OP, "Reduce_local %s on %s: class %d, expected MPI_ERR_OP",
                      check_op_name(ops[o]), types[t].name, cls);
                CHECK(cls2 == MPI_ERR_OP, "Allreduce %s on %s: class %d, expected MPI_ERR_OP",
                      check_op_name(ops[o]), types[t].name, cls2);
            }
        }
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_free(&comm);
}

/* ---- 2. values ---- */

static unsigned __int128 mix(int r, int j, int salt)
{
    uint64_t x = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(j + 1) * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)(salt + 1) * 0x165667b19e3779f9ull;
    uint64_t h = x;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    h = (h ^ x) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    return ((unsigned __int128)h << 64) | x;
}

enum { ARITH = 1, BITS = 2, LOGICAL = 4 };

/* Integer-like types: full-range values; SUM and PROD wrap (computed on the
   unsigned twin, as C does not define signed overflow); logical inputs are
   often zero. With ARITH|BITS|LOGICAL for C integers, ARITH|BITS for Fortran
   and multi-language integers, LOGICAL for logicals (0/1 inputs), BITS for
   MPI_BYTE. */
#define DEF_INT(NAME, T, UT, MT, MASK)                                                   \
    static T NAME##_v(MPI_Op op, int r, int j)                                           \
    {                                                                                    \
        unsigned __int128 x = mix(r, j, 7);                                              \
        if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR)                           \
            return (MASK) == LOGICAL ? (T)(x % 3 != 0) : (T)(x % 3 == 0 ? 0 : (UT)x);    \
        return (T)(UT)x;                                                                 \
    }                                                                                    \
    static T NAME##_f(MPI_Op op, T a, T b)                                               \
    {                                                                                    \
        UT wide = op == MPI_SUM ? (UT)((UT)a + (UT)b) : (UT)((UT)a * (UT)b);             \
        if (op == MPI_SUM || op == MPI_PROD) return (T)wide;                             \
        if (op == MPI_MAX) return a > b ? a : b;                                         \
        if (op == MPI_MIN) return a < b ? a : b;                                         \
        if (op == MPI_LAND) return (T)(a && b);                                          \
        if (op == MPI_LOR) return (T)(a || b);                                           \
        if (op == MPI_LXOR) return (T)(!a != !b);                                        \
        if (op == MPI_BAND) return (T)(a & b);                                           \
        if (op == MPI_BOR) return (T)(a | b);                                            \
        return (T)(a ^ b);                                                               \
    }                                                                                    \
    static void test_##NAME(void)                                                        \
    {                                                                                    \
        static const MPI_Op ops[] = {MPI_SUM,  MPI_PROD, MPI_MAX,  MPI_MIN,  MPI_BAND,   \
                                     MPI_BOR,  MPI_BXOR, MPI_LAND, MPI_LOR,  MPI_LXOR};  \
        for (int o = 0; o < 10; o++) {                                                   \
            MPI_Op op = ops[o];                                                          \
            int want = o < 4 ? ARITH : o < 7 ? BITS : LOGICAL;                           \
            if (!((MASK) & want))                                                        \
                continue;                                                                \
            T in[N], out[N], exp[N], acc[N], lexp[N];                                    \
            for (int j = 0; j < N; j++) {                                                \
                in[j] = NAME##_v(op, rank, j);                                           \
                exp[j] = NAME##_v(op, 0, j);                                             \
                for (int r = 1; r < size; r++)                                           \
                    exp[j] = NAME##_f(op, NAME##_v(op, r, j), exp[j]);                   \
                acc[j] = lexp[j] = NAME##_v(op, 0, j);                                   \
                for (int r = 1; r < NV; r++)                                             \
                    lexp[j] = NAME##_f(op, NAME##_v(op, r, j), lexp[j]);                 \
            }                                                                            \
            CHECK_MPI(MPI_Allreduce(in, out, N, MT, op, MPI_COMM_WORLD));                \
            for (int j = 0; j < N; j++)                                                  \
                if (out[j] != exp[j]) {                                                  \
                    CHECK(0, "Allreduce %s on %s: element %d wrong", check_op_name(op), #MT, j); \
                    break;                                                               \
                }                                                                        \
            for (int r = 1; r < NV; r++) {                                               \
                for (int j = 0; j < N; j++)                                              \
                    in[j] = NAME##_v(op, r, j);                                          \
                CHECK_MPI(MPI_Reduce_local(in, acc, N, MT, op));                         \
                for (int j = 0; j < N; j++)                                              \
                    if (in[j] != NAME##_v(op, r, j)) {                                   \
                        CHECK(0, "Reduce_local %s on %s changed inbuf", check_op_name(op), #MT); \
                        break;                                                           \
                    }                                                                    \
            }                                                                            \
            for (int j = 0; j < N; j++)                                                  \
                if (acc[j] != lexp[j]) {                                                 \
                    CHECK(0, "Reduce_local %s on %s: element %d wrong", check_op_name(op), #MT, j); \
                    break;                                                               \
                }                                                                        \
        }                                                                                \
    }

#define CI (ARITH | BITS | LOGICAL)
#define FI (ARITH | BITS)
DEF_INT(schar, signed char, unsigned char, MPI_SIGNED_CHAR, CI)
DEF_INT(uchar, unsigned char, unsigned char, MPI_UNSIGNED_CHAR, CI)
DEF_INT(short, short, unsigned short, MPI_SHORT, CI)
DEF_INT(ushort, unsigned short, unsigned short, MPI_UNSIGNED_SHORT, CI)
DEF_INT(int, int, unsigned, MPI_INT, CI)
DEF_INT(uint, unsigned, unsigned, MPI_UNSIGNED, CI)
DEF_INT(long, long, unsigned long, MPI_LONG, CI)
DEF_INT(ulong, unsigned long, unsigned long, MPI_UNSIGNED_LONG, CI)
DEF_INT(llong, long long, unsigned long long, MPI_LONG_LONG, CI)
DEF_INT(ullong, unsigned long long, unsigned long long, MPI_UNSIGNED_LONG_LONG, CI)
DEF_INT(i8, int8_t, uint8_t, MPI_INT8_T, CI)
DEF_INT(i16, int16_t, uint16_t, MPI_INT16_T, CI)
DEF_INT(i32, int32_t, uint32_t, MPI_INT32_T, CI)
DEF_INT(i64, int64_t, uint64_t, MPI_INT64_T, CI)
DEF_INT(u8, uint8_t, uint8_t, MPI_UINT8_T, CI)
DEF_INT(u16, uint16_t, uint16_t, MPI_UINT16_T, CI)
DEF_INT(u32, uint32_t, uint32_t, MPI_UINT32_T, CI)
DEF_INT(u64, uint64_t, uint64_t, MPI_UINT64_T, CI)
DEF_INT(finteger, int, unsigned, MPI_INTEGER, FI)
DEF_INT(finteger1, int8_t, uint8_t, MPI_INTEGER1, FI)
DEF_INT(finteger2, int16_t, uint16_t, MPI_INTEGER2, FI)
DEF_INT(finteger4, int32_t, uint32_t, MPI_INTEGER4, FI)
DEF_INT(finteger8, int64_t, uint64_t, MPI_INTEGER8, FI)
DEF_INT(finteger16, __int128, unsigned __int128, MPI_INTEGER16, FI)
DEF_INT(aint, MPI_Aint, uint64_t, MPI_AINT, FI)
DEF_INT(offset, MPI_Offset, uint64_t, MPI_OFFSET, FI)
DEF_INT(count, MPI_Count, uint64_t, MPI_COUNT, FI)
DEF_INT(cbool, bool, unsigned, MPI_C_BOOL, LOGICAL)
DEF_INT(cxxbool, bool, unsigned, MPI_CXX_BOOL, LOGICAL)
DEF_INT(logical, int, unsigned, MPI_LOGICAL, LOGICAL)
DEF_INT(logical1, int8_t, uint8_t, MPI_LOGICAL1, LOGICAL)
DEF_INT(logical2, int16_t, uint16_t, MPI_LOGICAL2, LOGICAL)
DEF_INT(logical4, int32_t, uint32_t, MPI_LOGICAL4, LOGICAL)
DEF_INT(logical8, int64_t, uint64_t, MPI_LOGICAL8, LOGICAL)
DEF_INT(logical16, __int128, unsigned __int128, MPI_LOGICAL16, LOGICAL)
DEF_INT(byte, unsigned char, unsigned char, MPI_BYTE, BITS)

/* Floating types. Allreduce: small integers (exact whatever the order).
   Reduce_local: thirds and ratios, so that every step rounds. */
#define DEF_FLOAT(NAME, T, MT)                                                           \
    static T NAME##_x(MPI_Op op, int r, int j) /* exact */                               \
    {                                                                                    \
        if (op == MPI_PROD) {                                                            \
            int k = (r + j) % 4;                                                         \
            return k == 0 ? (T)2 : k == 1 ? (T)-1 : k == 2 ? (T)0.5 : (T)1;              \
        }                                                                                \
        return (T)((r * 5 + j * 3) % 11 - 5);                                            \
    }                                                                                    \
    static T NAME##_r(MPI_Op op, int r, int j) /* rounding */                            \
    {                                                                                    \
        T num = (T)(r * 7 + j + 1), den = (T)(op == MPI_PROD ? r + j + 2 : 3);           \
        T v = num / den;                                                                 \
        if (op == MPI_PROD)                                                              \
            v = (T)(r + j + 3) / den;                                                    \
        return (r + j) % 3 == 1 ? -v : v;                                                \
    }                                                                                    \
    static T NAME##_f(MPI_Op op, T a, T b)                                               \
    {                                                                                    \
        T c;                                                                             \
        if (op == MPI_SUM) c = a + b;                                                    \
        else if (op == MPI_PROD) c = a * b;                                              \
        else if (op == MPI_MAX) c = a > b ? a : b;                                       \
        else c = a < b ? a : b;                                                          \
        return c;                                                                        \
    }                                                                                    \
    static void test_##NAME(void)                                                        \
    {                                                                                    \
        static const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};               \
        for (int o = 0; o < 4; o++) {                                                    \
            MPI_Op op = ops[o];                                                          \
            T in[N], out[N], exp[N], acc[N], lexp[N];                                    \
            for (int j = 0; j < N; j++) {                                                \
                in[j] = NAME##_x(op, rank, j);                                           \
                exp[j] = NAME##_x(op, 0, j);                                             \
                for (int r = 1; r < size; r++)                                           \
                    exp[j] = NAME##_f(op, NAME##_x(op, r, j), exp[j]);                   \
                acc[j] = lexp[j] = NAME##_r(op, 0, j);                                   \
                for (int r = 1; r < NV; r++)                                             \
                    lexp[j] = NAME##_f(op, NAME##_r(op, r, j), lexp[j]);                 \
            }                                                                            \
            CHECK_MPI(MPI_Allreduce(in, out, N, MT, op, MPI_COMM_WORLD));                \
            for (int j = 0; j < N; j++)                                                  \
                if (out[j] != exp[j]) {                                                  \
                    CHECK(0, "Allreduce %s on %s: element %d is %.17g, expected %.17g",  \
                          check_op_name(op), #MT, j, (double)out[j], (double)exp[j]);          \
                    break;                                                               \
                }                                                                        \
            for (int r = 1; r < NV; r++) {                                               \
                for (int j = 0; j < N; j++)                                              \
                    in[j] = NAME##_r(op, r, j);                                          \
                CHECK_MPI(MPI_Reduce_local(in, acc, N, MT, op));                         \
            }                                                                            \
            for (int j = 0; j < N; j++)                                                  \
                if (acc[j] != lexp[j]) {                                                 \
                    CHECK(0, "Reduce_local %s on %s: element %d is %.17g, expected %.17g", \
                          check_op_name(op), #MT, j, (double)acc[j], (double)lexp[j]);         \
                    break;                                                               \
                }                                                                        \
        }                                                                                \
    }

DEF_FLOAT(flt, float, MPI_FLOAT)
DEF_FLOAT(dbl, double, MPI_DOUBLE)
DEF_FLOAT(ldbl, long double, MPI_LONG_DOUBLE)
DEF_FLOAT(real, float, MPI_REAL)
DEF_FLOAT(dprec, double, MPI_DOUBLE_PRECISION)
DEF_FLOAT(real4, float, MPI_REAL4)
DEF_FLOAT(real8, double, MPI_REAL8)
#ifdef HAVE_QUAD
DEF_FLOAT(real16, quad_t, MPI_REAL16)
#endif
#ifdef HAVE_HALF
DEF_FLOAT(real2, half_t, MPI_REAL2)
#endif

/* Complex types: SUM and PROD, parts built with __real__/__imag__. With
   ROUNDS, Reduce_local uses values that round (the C library's complex
   product rounds each partial product and sum, as Baton does); half-precision
   complex arithmetic in C keeps float precision inside a product, so it gets
   exact values only. */
#define DEF_COMPLEX(NAME, R, CT, MT, ROUNDS)                                             \
    static CT NAME##_v(MPI_Op op, int r, int j, int rounds)                              \
    {                                                                                    \
        CT z;                                                                            \
        if (!rounds) {                                                                   \
            int k = (r + 2 * j) % 4;                                                     \
            __real__ z = op == MPI_PROD ? (R)(k == 0 ? 1 : k == 1 ? 0 : k == 2 ? -1 : 1) \
                                        : (R)((r * 3 + j) % 7 - 3);                      \
            __imag__ z = op == MPI_PROD ? (R)(k == 1 ? 1 : k == 3 ? 1 : 0)              \
                                        : (R)((r + j * 5) % 5 - 2);                      \
        } else {                                                                         \
            __real__ z = (R)(r * 3 + j + 1) / (R)(r + 3);                                \
            __imag__ z = (R)(j - r) / (R)(r + j + 5);                                    \
        }                                                                                \
        return z;                                                                        \
    }                                                                                    \
    static void test_##NAME(void)                                                        \
    {                                                                                    \
        static const MPI_Op ops[] = {MPI_SUM, MPI_PROD};                                 \
        for (int o = 0; o < 2; o++) {                                                    \
            MPI_Op op = ops[o];                                                          \
            CT in[N], out[N], exp[N], acc[N], lexp[N];                                   \
            for (int j = 0; j < N; j++) {                                                \
                in[j] = NAME##_v(op, rank, j, 0);                                        \
                exp[j] = NAME##_v(op, 0, j, 0);                                          \
                for (int r = 1; r < size; r++) {                                         \
                    CT v = NAME##_v(op, r, j, 0);                                        \
                    exp[j] = op == MPI_SUM ? v + exp[j] : v * exp[j];                    \
                }                                                                        \
                acc[j] = lexp[j] = NAME##_v(op, 0, j, ROUNDS);                           \
                for (int r = 1; r < NV; r++) {                                           \
                    CT v = NAME##_v(op, r, j, ROUNDS);                                   \
                    lexp[j] = op == MPI_SUM ? v + lexp[j] : v * lexp[j];                 \
                }                                                                        \
            }                                                                            \
            CHECK_MPI(MPI_Allreduce(in, out, N, MT, op, MPI_COMM_WORLD));                \
            for (int j = 0; j < N; j++)                                                  \
                if (out[j] != exp[j]) {                                                  \
                    CHECK(0, "Allreduce %s on %s: element %d is (%g, %g), expected (%g, %g)", \
                          check_op_name(op), #MT, j, (double)__real__ out[j],                  \
                          (double)__imag__ out[j], (double)__real__ exp[j],              \
                          (double)__imag__ exp[j]);                                      \
                    break;                                                               \
                }                                                                        \
            for (int r = 1; r < NV; r++) {                                               \
                for (int j = 0; j < N; j++)                                              \
                    in[j] = NAME##_v(op, r, j, ROUNDS);                                  \
                CHECK_MPI(MPI_Reduce_local(in, acc, N, MT, op));                         \
            }                                                                            \
            for (int j = 0; j < N; j++)                                                  \
                if (acc[j] != lexp[j]) {                                                 \
                    CHECK(0, "Reduce_local %s on %s: element %d is (%.17g, %.17g), expected " \
                             "(%.17g, %.17g)",                                           \
                          check_op_name(op), #MT, j, (double)__real__ acc[j],                  \
                          (double)__imag__ acc[j], (double)__real__ lexp[j],             \
                          (double)__imag__ lexp[j]);                                     \
                    break;                                                               \
                }                                                                        \
        }                                                                                \
    }

DEF_COMPLEX(cflt, float, float _Complex, MPI_C_FLOAT_COMPLEX, 1)
DEF_COMPLEX(cdbl, double, double _Complex, MPI_C_DOUBLE_COMPLEX, 1)
DEF_COMPLEX(cldbl, long double, long double _Complex, MPI_C_LONG_DOUBLE_COMPLEX, 1)
DEF_COMPLEX(cxxflt, float, float _Complex, MPI_CXX_FLOAT_COMPLEX, 1)
DEF_COMPLEX(cxxdbl, double, double _Complex, MPI_CXX_DOUBLE_COMPLEX, 1)
DEF_COMPLEX(cxxldbl, long double, long double _Complex, MPI_CXX_LONG_DOUBLE_COMPLEX, 1)
DEF_COMPLEX(fcomplex, float, float _Complex, MPI_COMPLEX, 1)
DEF_COMPLEX(fdcomplex, double, double _Complex, MPI_DOUBLE_COMPLEX, 1)
DEF_COMPLEX(complex8, float, float _Complex, MPI_COMPLEX8, 1)
DEF_COMPLEX(complex16, double, double _Complex, MPI_COMPLEX16, 1)
#ifdef HAVE_QUAD
DEF_COMPLEX(complex32, quad_t, cquad_t, MPI_COMPLEX32, 1)
#endif
#ifdef HAVE_HALF
DEF_COMPLEX(complex4, half_t, chalf_t, MPI_COMPLEX4, 0)
#endif

/* MINLOC / MAXLOC: many ties; indices fall with rank so "lower index wins"
   differs from "lower rank wins". */
#define DEF_PAIR(NAME, VT, IT, MT)                                                       \
    typedef struct {                                                                     \
        VT v;                                                                            \
        IT i;                                                                            \
    } NAME##_t;                                                                          \
    static NAME##_t NAME##_v(int r, int nr, int j)                                       \
    {                                                                                    \
        NAME##_t p;                                                                      \
        memset(&p, 0, sizeof p);                                                         \
        p.v = (VT)((r * (j + 2) + j) % 4 - 1);                                           \
        p.i = (IT)((nr - r) * 16 + j);                                                   \
        return p;                                                                        \
    }                                                                                    \
    static NAME##_t NAME##_f(MPI_Op op, NAME##_t a, NAME##_t b)                          \
    {                                                                                    \
        if (a.v == b.v)                                                                  \
            return a.i < b.i ? a : b;                                                    \
        if (op == MPI_MAXLOC)                                                            \
            return a.v > b.v ? a : b;                                                    \
        return a.v < b.v ? a : b;                                                        \
    }                                                                                    \
    static void test_##NAME(void)                                                        \
    {                                                                                    \
        static const MPI_Op ops[] = {MPI_MAXLOC, MPI_MINLOC};                            \
        for (int o = 0; o < 2; o++) {                                                    \
            MPI_Op op = ops[o];                                                          \
            NAME##_t in[N], out[N], exp[N], acc[N], lexp[N];                             \
            for (int j = 0; j < N; j++) {                                                \
                in[j] = NAME##_v(rank, size, j);                                         \
                exp[j] = NAME##_v(0, size, j);                                           \
                for (int r = 1; r < size; r++)                                           \
                    exp[j] = NAME##_f(op, NAME##_v(r, size, j), exp[j]);                 \
                acc[j] = lexp[j] = NAME##_v(0, NV, j);                                   \
                for (int r = 1; r < NV; r++)                                             \
                    lexp[j] = NAME##_f(op, NAME##_v(r, NV, j), lexp[j]);                 \
            }                                                                            \
            CHECK_MPI(MPI_Allreduce(in, out, N, MT, op, MPI_COMM_WORLD));                \
            for (int j = 0; j < N; j++)                                                  \
                if (out[j].v != exp[j].v || out[j].i != exp[j].i) {                      \
                    CHECK(0, "Allreduce %s on %s: element %d is (%g, %g), expected (%g, %g)", \
                          check_op_name(op), #MT, j, (double)out[j].v, (double)out[j].i,       \
                          (double)exp[j].v, (double)exp[j].i);                           \
                    break;                                                               \
                }                                                                        \
            for (int r = 1; r < NV; r++) {                                               \
                for (int j = 0; j < N; j++)                                              \
                    in[j] = NAME##_v(r, NV, j);                                          \
                CHECK_MPI(MPI_Reduce_local(in, acc, N, MT, op));                         \
            }                                                                            \
            for (int j = 0; j < N; j++)                                                  \
                if (acc[j].v != lexp[j].v || acc[j].i != lexp[j].i) {                    \
                    CHECK(0, "Reduce_local %s on %s: element %d is (%g, %g), expected (%g, %g)", \
                          check_op_name(op), #MT, j, (double)acc[j].v, (double)acc[j].i,       \
                          (double)lexp[j].v, (double)lexp[j].i);                         \
                    break;                                                               \
                }                                                                        \
        }                                                                                \
    }

DEF_PAIR(float_int, float, int, MPI_FLOAT_INT)
DEF_PAIR(double_int, double, int, MPI_DOUBLE_INT)
DEF_PAIR(long_int, long, int, MPI_LONG_INT)
DEF_PAIR(two_int, int, int, MPI_2INT)
DEF_PAIR(short_int, short, int, MPI_SHORT_INT)
DEF_PAIR(ldouble_int, long double, int, MPI_LONG_DOUBLE_INT)
DEF_PAIR(two_real, float, float, MPI_2REAL)
DEF_PAIR(two_dprec, double, double, MPI_2DOUBLE_PRECISION)
DEF_PAIR(two_integer, int, int, MPI_2INTEGER)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    test_table();

    test_schar(); test_uchar(); test_short(); test_ushort(); test_int(); test_uint();
    test_long(); test_ulong(); test_llong(); test_ullong();
    test_i8(); test_i16(); test_i32(); test_i64(); test_u8(); test_u16(); test_u32(); test_u64();
    test_finteger(); test_finteger1(); test_finteger2(); test_finteger4(); test_finteger8();
    test_finteger16();
    test_aint(); test_offset(); test_count();
    test_cbool(); test_cxxbool(); test_logical(); test_logical1(); test_logical2();
    test_logical4(); test_logical8(); test_logical16();
    test_byte();

    test_flt(); test_dbl(); test_ldbl(); test_real(); test_dprec(); test_real4(); test_real8();
#ifdef HAVE_QUAD
    test_real16();
    test_complex32();
#endif
#ifdef HAVE_HALF
    test_real2();
    test_complex4();
#endif
    test_cflt(); test_cdbl(); test_cldbl(); test_cxxflt(); test_cxxdbl(); test_cxxldbl();
    test_fcomplex(); test_fdcomplex(); test_complex8(); test_complex16();

    test_float_int(); test_double_int(); test_long_int(); test_two_int(); test_short_int();
    test_ldouble_int(); test_two_real(); test_two_dprec(); test_two_integer();

    return check_finish("op_predefined");
}
