/* Typed values for the accumulate and atomics tests: the predefined types
   they use, loads and stores of one element of each from raw memory, and the
   reference result of every predefined operation (rv_apply) that the tests
   compare the window against. Values are kept small so that every result is
   exact whatever order the contributions arrive in. */
#ifndef BATON_TESTS_RMA_VALUES_H
#define BATON_TESTS_RMA_VALUES_H

#include "check.h"
#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum rv_type { B_SCHAR, B_SHORT, B_INT, B_LONG, B_LLONG, B_UNSIGNED, B_ULONG, B_BYTE, B_FLOAT,
               B_DOUBLE, B_CDC, B_2INT, B_SHORT_INT, B_LONG_INT, B_FLOAT_INT, B_DOUBLE_INT,
               B_NTYPES };

/* What the operations see: integers, unsigned integers, bytes, reals,
   complex numbers, (value, index) pairs. */
enum rv_class { C_INT, C_UINT, C_BYTE, C_REAL, C_COMPLEX, C_PAIR_INT, C_PAIR_REAL };

typedef struct {
    long long i;   /* integer value, or the value of an integer pair */
    double re, im; /* real value (of a pair too), complex parts */
    int loc;       /* index of a pair */
} rv_val;

typedef struct {
    const char *name;
    MPI_Datatype type;
    int cls, size; /* size: extent of one element in bytes */
} rv_info;

typedef struct { short v; int l; } rv_short_int;
typedef struct { long v; int l; } rv_long_int;
typedef struct { float v; int l; } rv_float_int;
typedef struct { double v; int l; } rv_double_int;

static rv_info RV[B_NTYPES];

static inline void rv_init(void)
{
    const rv_info t[B_NTYPES] = {
        {"signed char", MPI_SIGNED_CHAR, C_INT, 1},
        {"short", MPI_SHORT, C_INT, sizeof(short)},
        {"int", MPI_INT, C_INT, sizeof(int)},
        {"long", MPI_LONG, C_INT, sizeof(long)},
        {"long long", MPI_LONG_LONG, C_INT, sizeof(long long)},
        {"unsigned", MPI_UNSIGNED, C_UINT, sizeof(unsigned)},
        {"unsigned long", MPI_UNSIGNED_LONG, C_UINT, sizeof(unsigned long)},
        {"byte", MPI_BYTE, C_BYTE, 1},
        {"float", MPI_FLOAT, C_REAL, sizeof(float)},
        {"double", MPI_DOUBLE, C_REAL, sizeof(double)},
        {"double complex", MPI_C_DOUBLE_COMPLEX, C_COMPLEX, 2 * sizeof(double)},
        {"2int", MPI_2INT, C_PAIR_INT, 2 * sizeof(int)},
        {"short_int", MPI_SHORT_INT, C_PAIR_INT, sizeof(rv_short_int)},
        {"long_int", MPI_LONG_INT, C_PAIR_INT, sizeof(rv_long_int)},
        {"float_int", MPI_FLOAT_INT, C_PAIR_REAL, sizeof(rv_float_int)},
        {"double_int", MPI_DOUBLE_INT, C_PAIR_REAL, sizeof(rv_double_int)},
    };
    memcpy(RV, t, sizeof t);
    for (int i = 0; i < B_NTYPES; i++) {
        MPI_Aint lb = 0, extent = 0;
        MPI_Type_get_extent(RV[i].type, &lb, &extent);
        CHECK(lb == 0 && extent == RV[i].size, "%s: lb %ld extent %ld, expected 0 %d", RV[i].name,
              (long)lb, (long)extent, RV[i].size);
    }
}

/* Offset of a pair type's index, -1 for the other types. */
static inline int rv_loc_off(int bt)
{
    switch (bt) {
    case B_2INT: return (int)sizeof(int);
    case B_SHORT_INT: return (int)offsetof(rv_short_int, l);
    case B_LONG_INT: return (int)offsetof(rv_long_int, l);
    case B_FLOAT_INT: return (int)offsetof(rv_float_int, l);
    case B_DOUBLE_INT: return (int)offsetof(rv_double_int, l);
    default: return -1;
    }
}

static inline rv_val rv_load(int bt, const unsigned char *p)
{
    rv_val v = {0, 0, 0, 0};
    switch (bt) {
    case B_SCHAR: { signed char x; memcpy(&x, p, 1); v.i = x; break; }
    case B_SHORT: { short x; memcpy(&x, p, sizeof x); v.i = x; break; }
    case B_INT: case B_2INT: { int x; memcpy(&x, p, sizeof x); v.i = x; break; }
    case B_LONG: case B_LONG_INT: { long x; memcpy(&x, p, sizeof x); v.i = x; break; }
    case B_LLONG: { long long x; memcpy(&x, p, sizeof x); v.i = x; break; }
    case B_UNSIGNED: { unsigned x; memcpy(&x, p, sizeof x); v.i = (long long)x; break; }
    case B_ULONG: { unsigned long x; memcpy(&x, p, sizeof x); v.i = (long long)x; break; }
    case B_BYTE: v.i = p[0]; break;
    case B_FLOAT: case B_FLOAT_INT: { float x; memcpy(&x, p, sizeof x); v.re = x; break; }
    case B_DOUBLE: case B_DOUBLE_INT: memcpy(&v.re, p, sizeof v.re); break;
    case B_CDC: memcpy(&v.re, p, 8); memcpy(&v.im, p + 8, 8); break;
    case B_SHORT_INT: { short x; memcpy(&x, p, sizeof x); v.i = x; break; }
    }
    if (rv_loc_off(bt) >= 0)
        memcpy(&v.loc, p + rv_loc_off(bt), sizeof v.loc);
    return v;
}

/* Writes the value's fields only: padding of the pair types is left as is. */
static inline void rv_store(int bt, unsigned char *p, rv_val v)
{
    switch (bt) {
    case B_SCHAR: { signed char x = (signed char)v.i; memcpy(p, &x, 1); break; }
    case B_SHORT: case B_SHORT_INT: { short x = (short)v.i; memcpy(p, &x, sizeof x); break; }
    case B_INT: case B_2INT: { int x = (int)v.i; memcpy(p, &x, sizeof x); break; }
    case B_LONG: case B_LONG_INT: { long x = (long)v.i; memcpy(p, &x, sizeof x); break; }
    case B_LLONG: memcpy(p, &v.i, sizeof v.i); break;
    case B_UNSIGNED: { unsigned x = (unsigned)v.i; memcpy(p, &x, sizeof x); break; }
    case B_ULONG: { unsigned long x = (unsigned long)v.i; memcpy(p, &x, sizeof x); break; }
    case B_BYTE: p[0] = (unsigned char)v.i; break;
    case B_FLOAT: case B_FLOAT_INT: { float x = (float)v.re; memcpy(p, &x, sizeof x); break; }
    case B_DOUBLE: case B_DOUBLE_INT: memcpy(p, &v.re, sizeof v.re); break;
    case B_CDC: memcpy(p, &v.re, 8); memcpy(p + 8, &v.im, 8); break;
    }
    if (rv_loc_off(bt) >= 0)
        memcpy(p + rv_loc_off(bt), &v.loc, sizeof v.loc);
}

/* The stored form of a value (wrapped to the type's width). */
static inline rv_val rv_norm(int bt, rv_val v)
{
    unsigned char tmp[32];
    memset(tmp, 0, sizeof tmp);
    rv_store(bt, tmp, v);
    return rv_load(bt, tmp);
}

static inline int rv_op_valid(int bt, MPI_Op op)
{
    int c = RV[bt].cls;
    if (op == MPI_REPLACE || op == MPI_NO_OP)
        return 1;
    if (op == MPI_MAXLOC || op == MPI_MINLOC)
        return c == C_PAIR_INT || c == C_PAIR_REAL;
    if (op == MPI_SUM || op == MPI_PROD)
        return c == C_INT || c == C_UINT || c == C_REAL || c == C_COMPLEX;
    if (op == MPI_MAX || op == MPI_MIN)
        return c == C_INT || c == C_UINT || c == C_REAL;
    if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR)
        return c == C_INT || c == C_UINT;
    return c == C_INT || c == C_UINT || c == C_BYTE; /* BAND, BOR, BXOR */
}

/* `old op x` as the standard defines it for the target's current value
   `old` and the origin's `x`. */
static inline rv_val rv_apply(int bt, MPI_Op op, rv_val old, rv_val x)
{
    int c = RV[bt].cls;
    int real = c == C_REAL || c == C_PAIR_REAL;
    rv_val r = old;
    if (op == MPI_NO_OP)
        return old;
    if (op == MPI_REPLACE)
        return x;
    if (op == MPI_SUM) {
        r.i = old.i + x.i;
        r.re = old.re + x.re;
        r.im = old.im + x.im;
    } else if (op == MPI_PROD) {
        r.i = old.i * x.i;
        r.re = c == C_COMPLEX ? old.re * x.re - old.im * x.im : old.re * x.re;
        r.im = old.re * x.im + old.im * x.re;
    } else if (op == MPI_MAX || op == MPI_MIN) {
        int gt = real ? x.re > old.re : x.i > old.i;
        int lt = real ? x.re < old.re : x.i < old.i;
        if (op == MPI_MAX ? gt : lt)
            r = x;
    } else if (op == MPI_MAXLOC || op == MPI_MINLOC) {
        int gt = real ? x.re > old.re : x.i > old.i;
        int lt = real ? x.re < old.re : x.i < old.i;
        if (op == MPI_MAXLOC ? gt : lt)
            r = x;
        else if (!gt && !lt && x.loc < old.loc)
            r.loc = x.loc;
    } else if (op == MPI_LAND) {
        r.i = (old.i != 0) && (x.i != 0);
    } else if (op == MPI_LOR) {
        r.i = (old.i != 0) || (x.i != 0);
    } else if (op == MPI_LXOR) {
        r.i = (old.i != 0) != (x.i != 0);
    } else if (op == MPI_BAND) {
        r.i = (long long)((unsigned long long)old.i & (unsigned long long)x.i);
    } else if (op == MPI_BOR) {
        r.i = (long long)((unsigned long long)old.i | (unsigned long long)x.i);
    } else if (op == MPI_BXOR) {
        r.i = (long long)((unsigned long long)old.i ^ (unsigned long long)x.i);
    }
    return rv_norm(bt, r);
}

static inline void rv_format(int bt, rv_val v, char *out, size_t n)
{
    switch (RV[bt].cls) {
    case C_REAL: snprintf(out, n, "%g", v.re); break;
    case C_COMPLEX: snprintf(out, n, "(%g,%g)", v.re, v.im); break;
    case C_PAIR_INT: snprintf(out, n, "(%lld,%d)", v.i, v.loc); break;
    case C_PAIR_REAL: snprintf(out, n, "(%g,%d)", v.re, v.loc); break;
    default: snprintf(out, n, "%lld", v.i); break;
    }
}

#endif
