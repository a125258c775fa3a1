/* Reductions of the collective tests (reduce, allreduce, reduce_scatter,
   scan, exscan): reduction kinds (type + op, user-defined ops among them)
   with inputs computed from (rank, index, iteration), and expected results
   folded by a loop in rank order. The driver and the failure report are in
   coll_util.h. */
#ifndef BATON_TESTS_COLL_REDUCTION_H
#define BATON_TESTS_COLL_REDUCTION_H

#include "coll_util.h"

/* ------------------------------------------------------ reductions */

enum {
    CU_R_INT_SUM, CU_R_INT_MAX, CU_R_INT_MIN, CU_R_INT_PROD,
    CU_R_DBL_SUM, CU_R_DBL_MAX, CU_R_DBL_MIN, CU_R_DBL_PROD,
    CU_R_UNS_BAND, CU_R_DINT_MINLOC,
    CU_R_USER_STRUCT, /* user op (commutative) on a resized struct type */
    CU_R_USER_MAT,    /* user op (non-commutative): 2x2 matrix product */
    CU_NRKINDS
};

typedef struct {
    double d;
    int i;
} cu_dint;

/* elements of the user struct type: a and b are the type map, hole and
   tail are gaps */
typedef struct {
    int a;
    int hole;
    double b;
    double tail;
} cu_ustruct;

typedef struct {
    unsigned m[4]; /* row-major 2x2 */
} cu_umat;

typedef struct {
    const char *name;
    MPI_Datatype type;
    MPI_Op op;
    size_t esize; /* extent in bytes */
    int commutative;
} cu_rkind;

static cu_rkind cu_rk[CU_NRKINDS];
static MPI_Datatype cu_ustruct_type = MPI_DATATYPE_NULL, cu_umat_type = MPI_DATATYPE_NULL;
static MPI_Op cu_ustruct_op = MPI_OP_NULL, cu_umat_op = MPI_OP_NULL;
static long cu_user_calls; /* calls of the user functions on this rank */

static inline void cu_umat_mul(const cu_umat *x, const cu_umat *y, cu_umat *out)
{
    cu_umat r;
    r.m[0] = x->m[0] * y->m[0] + x->m[1] * y->m[2];
    r.m[1] = x->m[0] * y->m[1] + x->m[1] * y->m[3];
    r.m[2] = x->m[2] * y->m[0] + x->m[3] * y->m[2];
    r.m[3] = x->m[2] * y->m[1] + x->m[3] * y->m[3];
    *out = r;
}

static inline void cu_ustruct_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    cu_user_calls++;
    cu_ustruct *a = in, *b = inout;
    for (int k = 0; k < *len; k++) {
        b[k].a = (int)((unsigned)a[k].a + (unsigned)b[k].a);
        b[k].b = a[k].b > b[k].b ? a[k].b : b[k].b;
    }
}

/* inout = in * inout: MPI passes the lower ranks' operand as `in` */
static inline void cu_umat_fn(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    cu_user_calls++;
    cu_umat *a = in, *b = inout;
    for (int k = 0; k < *len; k++)
        cu_umat_mul(&a[k], &b[k], &b[k]);
}

static inline void cu_make_rkinds(void)
{
    static const struct {
        const char *name;
        MPI_Datatype t;
        MPI_Op op;
        size_t es;
    } pre[] = {
        {"MPI_INT MPI_SUM", MPI_INT, MPI_SUM, sizeof(int)},
        {"MPI_INT MPI_MAX", MPI_INT, MPI_MAX, sizeof(int)},
        {"MPI_INT MPI_MIN", MPI_INT, MPI_MIN, sizeof(int)},
        {"MPI_INT MPI_PROD", MPI_INT, MPI_PROD, sizeof(int)},
        {"MPI_DOUBLE MPI_SUM", MPI_DOUBLE, MPI_SUM, sizeof(double)},
        {"MPI_DOUBLE MPI_MAX", MPI_DOUBLE, MPI_MAX, sizeof(double)},
        {"MPI_DOUBLE MPI_MIN", MPI_DOUBLE, MPI_MIN, sizeof(double)},
        {"MPI_DOUBLE MPI_PROD", MPI_DOUBLE, MPI_PROD, sizeof(double)},
        {"MPI_UNSIGNED MPI_BAND", MPI_UNSIGNED, MPI_BAND, sizeof(unsigned)},
        {"MPI_DOUBLE_INT MPI_MINLOC", MPI_DOUBLE_INT, MPI_MINLOC, sizeof(cu_dint)},
    };
    for (int k = 0; k < CU_R_USER_STRUCT; k++)
        cu_rk[k] = (cu_rkind){pre[k].name, pre[k].t, pre[k].op, pre[k].es, 1};

    /* struct {int a @0; double b @8}, resized to 24 bytes */
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, 8};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, t;
    CHECK_MPI(MPI_Type_create_struct(2, bl, disp, types, &t));
    CHECK_MPI(MPI_Type_create_resized(t, 0, (MPI_Aint)sizeof(cu_ustruct), &cu_ustruct_type));
    MPI_Type_free(&t);
    CHECK_MPI(MPI_Type_commit(&cu_ustruct_type));
    CHECK_MPI(MPI_Type_contiguous(4, MPI_UNSIGNED, &cu_umat_type));
    CHECK_MPI(MPI_Type_commit(&cu_umat_type));
    cu_coll = "(set-up)";
    snprintf(cu_desc, sizeof cu_desc, "user-defined ops");
    int rc1 = MPI_Op_create(cu_ustruct_fn, 1, &cu_ustruct_op);
    int rc2 = MPI_Op_create(cu_umat_fn, 0, &cu_umat_op);
    if (rc1 != MPI_SUCCESS || rc2 != MPI_SUCCESS) {
        cu_ok(rc1 != MPI_SUCCESS ? rc1 : rc2, "MPI_Op_create (the user-op cases are skipped)");
        cu_ustruct_op = cu_umat_op = MPI_OP_NULL;
    }
    cu_rk[CU_R_USER_STRUCT] = (cu_rkind){"user op (sum, max) on struct{int,double}+resized(0,24)",
                                         cu_ustruct_type, cu_ustruct_op, sizeof(cu_ustruct), 1};
    cu_rk[CU_R_USER_MAT] = (cu_rkind){"user op (non-commutative 2x2 matrix product) on "
                                      "contiguous(4,MPI_UNSIGNED)",
                                      cu_umat_type, cu_umat_op, sizeof(cu_umat), 0};
}

static inline void cu_free_rkinds(void)
{
    if (cu_ustruct_op != MPI_OP_NULL)
        MPI_Op_free(&cu_ustruct_op);
    if (cu_umat_op != MPI_OP_NULL)
        MPI_Op_free(&cu_umat_op);
    MPI_Type_free(&cu_ustruct_type);
    MPI_Type_free(&cu_umat_type);
}

/* is kind k usable (user ops exist)? */
static inline int cu_rk_ok(int k)
{
    return cu_rk[k].op != MPI_OP_NULL;
}

#if defined(__GNUC__)
#define CU_INLINE static inline __attribute__((always_inline))
#else
#define CU_INLINE static inline
#endif

/* input element of rank r at index j, iteration it: small values (sums
   and products stay exact), a rank-dependent part with ties for MINLOC, and
   a slowly growing index part so that shifted elements differ */
CU_INLINE void cu_rin(int k, int r, long jl, int it, void *e)
{
    unsigned j = (unsigned)jl, ur = (unsigned)r, ui = (unsigned)it;
    unsigned s = ur * 7u + j * 3u + ui * 5u;
    int hi = (int)(j >> 7);
    switch (k) {
    case CU_R_INT_SUM:
        *(int *)e = (int)(s & 127u) - 64 + hi;
        break;
    case CU_R_INT_MAX:
    case CU_R_INT_MIN:
        *(int *)e = (int)((ur * 37u + j * 11u + ui * 13u) & 255u) - 128 + 3 * hi;
        break;
    case CU_R_INT_PROD:
    case CU_R_DBL_PROD: {
        /* 1, -1 or 2: products stay small and exact */
        int v = (s & 3u) == 0 ? 2 : (((ur + j + ui) & 4u) ? -1 : 1);
        if (k == CU_R_INT_PROD)
            *(int *)e = v;
        else
            *(double *)e = (double)v;
        break;
    }
    case CU_R_DBL_SUM:
        *(double *)e = (double)((int)(s & 127u) - 64 + hi) + 0.5;
        break;
    case CU_R_DBL_MAX:
    case CU_R_DBL_MIN:
        *(double *)e = (double)((int)((ur * 37u + j * 11u + ui * 13u) & 255u) - 128) * 0.25 + hi;
        break;
    case CU_R_UNS_BAND:
        *(unsigned *)e = ~(1u << ((ur * 5u + j + ui) & 31u)) & ~(j & 0xff00u);
        break;
    case CU_R_DINT_MINLOC: {
        cu_dint *d = e;
        d->d = (double)((ur * 3u + j + ui) & 3u) + hi; /* ties between ranks */
        d->i = 1000 - 10 * r + (int)(j & 7u);
        break;
    }
    case CU_R_USER_STRUCT: {
        cu_ustruct *u = e;
        u->a = (int)(s & 1023u) - 512 + hi;
        u->b = (double)((ur * 13u + j * 7u + ui) & 127u) - 40.5 + hi;
        break;
    }
    case CU_R_USER_MAT: {
        cu_umat *m = e;
        m->m[0] = 1u + ((ur + j) & 3u);
        m->m[1] = ur + 1u + ui;
        m->m[2] = j & 0xffffu;
        m->m[3] = 1u + ((ur + ui) & 1u);
        break;
    }
    }
}

/* acc = acc op x (acc from lower ranks) */
CU_INLINE void cu_rfold(int k, void *acc, const void *x)
{
    switch (k) {
    case CU_R_INT_SUM:
        *(int *)acc += *(const int *)x;
        break;
    case CU_R_INT_MAX:
        if (*(const int *)x > *(int *)acc)
            *(int *)acc = *(const int *)x;
        break;
    case CU_R_INT_MIN:
        if (*(const int *)x < *(int *)acc)
            *(int *)acc = *(const int *)x;
        break;
    case CU_R_INT_PROD:
        *(int *)acc *= *(const int *)x;
        break;
    case CU_R_DBL_SUM:
        *(double *)acc += *(const double *)x;
        break;
    case CU_R_DBL_MAX:
        if (*(const double *)x > *(double *)acc)
            *(double *)acc = *(const double *)x;
        break;
    case CU_R_DBL_MIN:
        if (*(const double *)x < *(double *)acc)
            *(double *)acc = *(const double *)x;
        break;
    case CU_R_DBL_PROD:
        *(double *)acc *= *(const double *)x;
        break;
    case CU_R_UNS_BAND:
        *(unsigned *)acc &= *(const unsigned *)x;
        break;
    case CU_R_DINT_MINLOC: {
        cu_dint *a = acc;
        const cu_dint *b = x;
        if (b->d < a->d || (b->d == a->d && b->i < a->i))
            *a = *b;
        break;
    }
    case CU_R_USER_STRUCT: {
        cu_ustruct *a = acc;
        const cu_ustruct *b = x;
        a->a += b->a;
        if (b->b > a->b)
            a->b = b->b;
        break;
    }
    case CU_R_USER_MAT:
        cu_umat_mul(acc, x, acc);
        break;
    }
}

static inline int cu_req(int k, const void *a, const void *b)
{
    switch (k) {
    case CU_R_DBL_SUM:
    case CU_R_DBL_MAX:
    case CU_R_DBL_MIN:
    case CU_R_DBL_PROD:
        return *(const double *)a == *(const double *)b;
    case CU_R_DINT_MINLOC:
        return ((const cu_dint *)a)->d == ((const cu_dint *)b)->d &&
               ((const cu_dint *)a)->i == ((const cu_dint *)b)->i;
    case CU_R_USER_STRUCT:
        return ((const cu_ustruct *)a)->a == ((const cu_ustruct *)b)->a &&
               ((const cu_ustruct *)a)->b == ((const cu_ustruct *)b)->b;
    case CU_R_USER_MAT:
        return memcmp(a, b, sizeof(cu_umat)) == 0;
    default:
        return memcmp(a, b, cu_rk[k].esize) == 0;
    }
}

static inline const char *cu_rstr(int k, const void *e, char *s, size_t n)
{
    switch (k) {
    case CU_R_INT_SUM:
    case CU_R_INT_MAX:
    case CU_R_INT_MIN:
    case CU_R_INT_PROD:
        snprintf(s, n, "%d", *(const int *)e);
        break;
    case CU_R_UNS_BAND:
        snprintf(s, n, "0x%08x", *(const unsigned *)e);
        break;
    case CU_R_DBL_SUM:
    case CU_R_DBL_MAX:
    case CU_R_DBL_MIN:
    case CU_R_DBL_PROD:
        snprintf(s, n, "%.17g", *(const double *)e);
        break;
    case CU_R_DINT_MINLOC:
        snprintf(s, n, "{%.17g, %d}", ((const cu_dint *)e)->d, ((const cu_dint *)e)->i);
        break;
    case CU_R_USER_STRUCT:
        snprintf(s, n, "{a %d, b %.17g}", ((const cu_ustruct *)e)->a, ((const cu_ustruct *)e)->b);
        break;
    case CU_R_USER_MAT: {
        const unsigned *m = ((const cu_umat *)e)->m;
        snprintf(s, n, "[[%u, %u], [%u, %u]]", m[0], m[1], m[2], m[3]);
        break;
    }
    }
    return s;
}

/* bytes of an element that are not part of the type map (must stay as the
   fill byte in receive buffers) */
static inline int cu_rgap(int k, size_t byte)
{
    if (k == CU_R_USER_STRUCT)
        return (byte >= 4 && byte < 8) || byte >= 16;
    if (k == CU_R_DINT_MINLOC)
        return byte >= 12;
    return 0;
}

#define CU_FILLB 0xA5 /* fill byte of reduction receive buffers */

/* a reduction buffer: n elements of kind k with CU_NG guard elements */
typedef struct {
    unsigned char *p;
    size_t n;
    int k;
} cu_rbuf;

static inline void cu_rbuf_alloc(cu_rbuf *b, int k, size_t n)
{
    size_t es = cu_rk[k].esize;
    unsigned char *q = cu_xmalloc((n + 2 * CU_NG) * es);
    b->p = q + CU_NG * es;
    b->n = n;
    b->k = k;
}

static inline void cu_rbuf_free(cu_rbuf *b)
{
    if (b->p)
        free(b->p - CU_NG * cu_rk[b->k].esize);
    b->p = NULL;
}

static inline void *cu_rel(const cu_rbuf *b, size_t i)
{
    return b->p + i * cu_rk[b->k].esize;
}

static inline void cu_rbuf_clear(cu_rbuf *b)
{
    size_t es = cu_rk[b->k].esize;
    memset(b->p - CU_NG * es, CU_FILLB, (b->n + 2 * CU_NG) * es);
}

/* inputs of rank r, elements [0, n) with index offset j0 */
static inline void cu_rbuf_input(cu_rbuf *b, int r, long j0, size_t n, int it)
{
    for (size_t i = 0; i < n; i++)
        cu_rin(b->k, r, j0 + (long)i, it, cu_rel(b, i));
}

/* check guards, and gap bytes of elements [0, n) */
static inline void cu_rbuf_check_untouched(const char *what, const cu_rbuf *b, size_t upto)
{
    size_t es = cu_rk[b->k].esize;
    const unsigned char *lo = b->p - CU_NG * es, *hi = b->p + b->n * es;
    for (size_t q = 0; q < CU_NG * es; q++)
        if (lo[q] != CU_FILLB || hi[q] != CU_FILLB) {
            CU_FAIL("%s: guard bytes around the buffer were overwritten (%s, byte %zu)", what,
                    lo[q] != CU_FILLB ? "before" : "after", q);
            return;
        }
    int gaps[32], ng = 0;
    for (size_t q = 0; q < es && q < 32; q++)
        if (cu_rgap(b->k, q))
            gaps[ng++] = (int)q;
    for (size_t i = 0; i < upto && ng; i++)
        for (int g = 0; g < ng; g++) {
            size_t q = (size_t)gaps[g];
            if (b->p[i * es + q] != CU_FILLB) {
                CU_FAIL("%s: element %zu: byte %zu (not in the type map) was overwritten "
                        "(0x%02x)",
                        what, i, q, b->p[i * es + q]);
                return;
            }
        }
}

/* out[i] = input of rank r at index j0 + i (one loop per kind, so that the
   per-element code is specialised) */
#define CU_RIN_CASE(K)                                                                        \
    case K:                                                                                   \
        for (size_t i = 0; i < n; i++)                                                        \
            cu_rin(K, r, j0 + (long)i, it, o + i * es);                                       \
        break;
#define CU_RFOLD_CASE(K)                                                                      \
    case K:                                                                                   \
        for (size_t i = 0; i < n; i++)                                                        \
            cu_rfold(K, a + i * es, x + i * es);                                              \
        break;
#define CU_ALL_KINDS(M)                                                                       \
    M(CU_R_INT_SUM) M(CU_R_INT_MAX) M(CU_R_INT_MIN) M(CU_R_INT_PROD) M(CU_R_DBL_SUM)          \
    M(CU_R_DBL_MAX) M(CU_R_DBL_MIN) M(CU_R_DBL_PROD) M(CU_R_UNS_BAND) M(CU_R_DINT_MINLOC)     \
    M(CU_R_USER_STRUCT) M(CU_R_USER_MAT)

static inline void cu_rin_vec(int k, int r, long j0, size_t n, int it, void *out)
{
    size_t es = cu_rk[k].esize;
    unsigned char *o = out;
    switch (k) { CU_ALL_KINDS(CU_RIN_CASE) }
}

static inline void cu_rfold_vec(int k, void *acc, const void *xs, size_t n)
{
    size_t es = cu_rk[k].esize;
    unsigned char *a = acc;
    const unsigned char *x = xs;
    switch (k) { CU_ALL_KINDS(CU_RFOLD_CASE) }
}

/* elements [0, n) of b must be the reduction over ranks lo..hi of inputs
   with index offset j0 (the expected vector is folded rank by rank) */
static inline void cu_rbuf_check(const char *what, const cu_rbuf *b, size_t n, long j0, int lo,
                                 int hi, int it)
{
    static unsigned char *want, *tmp; /* scratch, grown as needed */
    static size_t cap;
    size_t es = cu_rk[b->k].esize;
    if (n * es > cap) {
        free(want);
        free(tmp);
        cap = n * es;
        want = cu_xmalloc(cap);
        tmp = cu_xmalloc(cap);
    }
    cu_rin_vec(b->k, lo, j0, n, it, want);
    for (int r = lo + 1; r <= hi; r++) {
        cu_rin_vec(b->k, r, j0, n, it, tmp);
        cu_rfold_vec(b->k, want, tmp, n);
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (!cu_req(b->k, cu_rel(b, i), want + i * es)) {
            if (!bad)
                first = i;
            bad++;
        }
    if (bad) {
        char s1[160], s2[160];
        CU_FAIL("%s: %zu wrong element(s) of %zu; first at %zu: expected %s (ranks %d..%d), "
                "got %s",
                what, bad, n, first, cu_rstr(b->k, want + first * es, s1, sizeof s1), lo, hi,
                cu_rstr(b->k, cu_rel(b, first), s2, sizeof s2));
    }
}

/* The (kind, length) grid of the reduction tests. On MPI_COMM_WORLD
   (full = 1): every kind at lengths 1, 7 and 1000, some also at 0, and
   MPI_INT SUM (with and without MPI_IN_PLACE), MINLOC (in place) and the
   non-commutative user op (not in place) at `big`; elsewhere a few kinds
   (the non-commutative one among them) at 7 and 1000. `inplace` is a mask:
   1 without MPI_IN_PLACE, 2 with it. Kinds whose user op could not be
   created are left out. */
typedef struct {
    int kind;
    size_t len;
    int inplace;
} cu_rcell;
#define CU_MAXRCELLS 48

static inline int cu_rgrid(int full, size_t big, cu_rcell *out)
{
    int n = 0;
    if (!full) {
        const int kinds[4] = {CU_R_INT_SUM, CU_R_DBL_MAX, CU_R_DINT_MINLOC, CU_R_USER_MAT};
        for (int i = 0; i < 4; i++)
            if (cu_rk_ok(kinds[i])) {
                out[n++] = (cu_rcell){kinds[i], 7, 3};
                out[n++] = (cu_rcell){kinds[i], 1000, 3};
            }
        return n;
    }
    for (int k = 0; k < CU_NRKINDS; k++) {
        if (!cu_rk_ok(k))
            continue;
        if (k == CU_R_INT_SUM || k == CU_R_DINT_MINLOC || k == CU_R_USER_STRUCT)
            out[n++] = (cu_rcell){k, 0, 3};
        out[n++] = (cu_rcell){k, 1, 3};
        out[n++] = (cu_rcell){k, 7, 3};
        out[n++] = (cu_rcell){k, 1000, 3};
        if (k == CU_R_INT_SUM)
            out[n++] = (cu_rcell){k, big, 3};
        if (k == CU_R_DINT_MINLOC)
            out[n++] = (cu_rcell){k, big, 2};
        if (k == CU_R_USER_MAT)
            out[n++] = (cu_rcell){k, big, 1};
    }
    return n;
}

#endif
