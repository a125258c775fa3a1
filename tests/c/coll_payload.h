/* Integer payloads of the data-movement collective tests (bcast, gather,
   scatter, allgather, all-to-all and their v/w forms).

   Payloads travel with derived datatypes ("layouts"): each element of a
   layout carries `ipe` ints at known positions; everything else in a
   receive buffer (gaps inside and between elements, guard ints around the
   buffer) must keep the sentinel value. The driver and the failure report
   are in coll_util.h. */
#ifndef BATON_TESTS_COLL_PAYLOAD_H
#define BATON_TESTS_COLL_PAYLOAD_H

#include "coll_util.h"

/* ------------------------------------------- integer payload, layouts */

#define CU_SENT ((int)0xDEADBEEFu)       /* sentinel: never a payload value */

/* payload value: src rank (5 bits), block (5 bits), index (18 bits),
   iteration (4 bits); iterations stay < 13 so no value equals CU_SENT */
static inline int cu_val(int src, int blk, int j, int iter)
{
    uint32_t v = ((uint32_t)iter << 28) | ((uint32_t)(src & 31) << 23) |
                 ((uint32_t)(blk & 31) << 18) | ((uint32_t)j & 0x3ffffu);
    return (int)v;
}

static inline const char *cu_vstr(int v, char *s, size_t n)
{
    if (v == CU_SENT) {
        snprintf(s, n, "sentinel (not written)");
    } else {
        uint32_t u = (uint32_t)v;
        snprintf(s, n, "%d = val(src %u, block %u, index %u, iteration %u)", v,
                 (u >> 23) & 31u, (u >> 18) & 31u, u & 0x3ffffu, u >> 28);
    }
    return s;
}

typedef struct {
    const char *name;
    MPI_Datatype type;
    int ipe;    /* ints of the type signature per element */
    int ext;    /* extent in ints */
    int off[4]; /* positions of those ints in an element, in ints */
} cu_layout;

enum { CU_L_INT, CU_L_VEC, CU_L_STRUCT, CU_L_QUAD, CU_NLAYOUTS };
static cu_layout cu_lay[CU_NLAYOUTS];

/* pairs of (sender layout, receiver layout) with the same type signature */
typedef struct {
    int s, r;
    const char *name;
} cu_pair;
static const cu_pair cu_pairs[] = {
    {CU_L_INT, CU_L_INT, "MPI_INT"},
    {CU_L_VEC, CU_L_VEC, "vector"},
    {CU_L_STRUCT, CU_L_STRUCT, "resized struct"},
    {CU_L_INT, CU_L_VEC, "MPI_INT to vector"},
    {CU_L_STRUCT, CU_L_QUAD, "resized struct to contiguous(4)"},
};
#define CU_NPAIRS ((int)(sizeof cu_pairs / sizeof cu_pairs[0]))

static inline void cu_make_layouts(void)
{
    MPI_Datatype t;
    cu_lay[CU_L_INT] = (cu_layout){"MPI_INT", MPI_INT, 1, 1, {0}};
    /* vector: 2 blocks of 1 int, stride 3 ints, extent stretched to 5 ints */
    CHECK_MPI(MPI_Type_vector(2, 1, 3, MPI_INT, &t));
    CHECK_MPI(MPI_Type_create_resized(t, 0, 5 * (MPI_Aint)sizeof(int), &cu_lay[CU_L_VEC].type));
    MPI_Type_free(&t);
    cu_lay[CU_L_VEC].name = "vector(2,1,3)+resized(0,20)";
    cu_lay[CU_L_VEC].ipe = 2;
    cu_lay[CU_L_VEC].ext = 5;
    cu_lay[CU_L_VEC].off[0] = 0;
    cu_lay[CU_L_VEC].off[1] = 3;
    /* struct: ints at bytes 16 and 4 (type map out of address order),
       resized to [0, 24) */
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {4 * (MPI_Aint)sizeof(int), 1 * (MPI_Aint)sizeof(int)};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};
    CHECK_MPI(MPI_Type_create_struct(2, bl, disp, types, &t));
    CHECK_MPI(
        MPI_Type_create_resized(t, 0, 6 * (MPI_Aint)sizeof(int), &cu_lay[CU_L_STRUCT].type));
    MPI_Type_free(&t);
    cu_lay[CU_L_STRUCT].name = "struct{int@16,int@4}+resized(0,24)";
    cu_lay[CU_L_STRUCT].ipe = 2;
    cu_lay[CU_L_STRUCT].ext = 6;
    cu_lay[CU_L_STRUCT].off[0] = 4;
    cu_lay[CU_L_STRUCT].off[1] = 1;
    CHECK_MPI(MPI_Type_contiguous(4, MPI_INT, &cu_lay[CU_L_QUAD].type));
    cu_lay[CU_L_QUAD].name = "contiguous(4,MPI_INT)";
    cu_lay[CU_L_QUAD].ipe = 4;
    cu_lay[CU_L_QUAD].ext = 4;
    for (int k = 0; k < 4; k++)
        cu_lay[CU_L_QUAD].off[k] = k;
    for (int l = 1; l < CU_NLAYOUTS; l++)
        CHECK_MPI(MPI_Type_commit(&cu_lay[l].type));
}

static inline void cu_free_layouts(void)
{
    for (int l = 1; l < CU_NLAYOUTS; l++)
        MPI_Type_free(&cu_lay[l].type);
}

/* ints per unit of a pair: the least common multiple of both ipe */
static inline int cu_unit(const cu_pair *p)
{
    int a = cu_lay[p->s].ipe, b = cu_lay[p->r].ipe;
    int m = a > b ? a : b;
    while (m % a || m % b)
        m++;
    return m;
}

/* position (in ints) of signature int j of a sequence starting at element e0 */
static inline size_t cu_pos(const cu_layout *l, size_t e0, size_t j)
{
    return (e0 + j / (size_t)l->ipe) * (size_t)l->ext + (size_t)l->off[j % (size_t)l->ipe];
}

/* an int buffer of n ints with CU_NG guard ints on each side */
typedef struct {
    int *p;
    size_t n;
} cu_buf;

static inline void cu_buf_alloc(cu_buf *b, size_t n)
{
    int *q = cu_xmalloc((n + 2 * CU_NG) * sizeof(int));
    b->p = q + CU_NG;
    b->n = n;
}

static inline void cu_buf_free(cu_buf *b)
{
    if (b->p)
        free(b->p - CU_NG);
    b->p = NULL;
}

static inline void cu_buf_sentinel(cu_buf *b)
{
    for (size_t k = 0; k < b->n + 2 * CU_NG; k++)
        b->p[(ptrdiff_t)k - CU_NG] = CU_SENT;
}

/* an expected image of b: all sentinels */
static inline int *cu_expect_new(const cu_buf *b)
{
    int *e = cu_xmalloc(b->n * sizeof(int));
    for (size_t k = 0; k < b->n; k++)
        e[k] = CU_SENT;
    return e;
}

/* Compare b (and its guards) with the expected image; report the first
   mismatch and how many there are. Frees exp. */
static inline void cu_expect_check(const char *what, const cu_buf *b, int *exp)
{
    size_t bad = 0, first = 0;
    ptrdiff_t n = (ptrdiff_t)b->n;
    for (ptrdiff_t k = -CU_NG; k < n + CU_NG; k++) {
        int want = (k < 0 || k >= n) ? CU_SENT : exp[k];
        if (b->p[k] != want) {
            if (!bad)
                first = (size_t)(k + CU_NG);
            bad++;
        }
    }
    if (bad) {
        ptrdiff_t k = (ptrdiff_t)first - CU_NG;
        int want = (k < 0 || k >= n) ? CU_SENT : exp[k];
        char s1[128], s2[128];
        CU_FAIL("%s: %zu wrong int(s); first at int %td of %td%s: expected %s, got %s", what, bad,
                k, n, (k < 0 || k >= n) ? " (guard outside the buffer)" : "",
                cu_vstr(want, s1, sizeof s1), cu_vstr(b->p[k], s2, sizeof s2));
    }
    free(exp);
}

/* write `nints` payload ints val(src, blk, j0 + j, iter) into b with layout l,
   starting at element e0 */
static inline void cu_put(int *p, const cu_layout *l, size_t e0, size_t nints, int src, int blk,
                   int iter)
{
    for (size_t j = 0; j < nints; j++)
        p[cu_pos(l, e0, j)] = cu_val(src, blk, (int)j, iter);
}

/* Blocks of payload in one buffer (gather/scatter/all-to-all buffers):
   block b holds nints[b] ints with layout lay[b], starting at int offset
   off[b]; cnt[b] is its count in elements of that layout, disp[b] its
   displacement in elements (single-layout buffers) and wdisp[b] in bytes. */
typedef struct {
    int n;
    int lay[CU_MAXP];
    size_t nints[CU_MAXP];
    size_t off[CU_MAXP];
    int cnt[CU_MAXP];
    int disp[CU_MAXP];
    int wdisp[CU_MAXP];      /* displacement in bytes (Alltoallw) */
    MPI_Aint bdisp[CU_MAXP]; /* the same for the _c form */
    MPI_Count ccnt[CU_MAXP]; /* cnt and disp for the _c forms */
    MPI_Aint cdisp[CU_MAXP];
    size_t len; /* ints the buffer needs */
} cu_blocks;

enum { CU_PACKED, CU_FORWARD_GAPS, CU_REVERSE_GAPS };

/* Lay out n blocks. `lays` gives each block's layout (NULL: all `lay`).
   CU_PACKED: blocks back to back in rank order (all the same size, the
   fixed-size collectives); CU_FORWARD_GAPS / CU_REVERSE_GAPS: in rank order
   or reversed, with a gap of two elements (or 3 ints with per-block
   layouts) before each block. */
static inline void cu_blocks_make(cu_blocks *B, int n, const size_t *nints, int lay,
                                  const int *lays, int arrangement)
{
    if (n > CU_MAXP) {
        fprintf(stderr, "too many blocks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    B->n = n;
    size_t cur = 0;
    for (int k = 0; k < n; k++) {
        int b = arrangement == CU_REVERSE_GAPS ? n - 1 - k : k;
        const cu_layout *l = &cu_lay[lays ? lays[b] : lay];
        B->lay[b] = lays ? lays[b] : lay;
        B->nints[b] = nints[b];
        B->cnt[b] = (int)(nints[b] / (size_t)l->ipe);
        if (arrangement != CU_PACKED)
            cur += lays ? 3 : 2 * (size_t)l->ext;
        B->off[b] = cur;
        B->disp[b] = (int)(cur / (size_t)l->ext);
        B->wdisp[b] = (int)(cur * sizeof(int));
        B->bdisp[b] = (MPI_Aint)(cur * sizeof(int));
        B->ccnt[b] = B->cnt[b];
        B->cdisp[b] = B->disp[b];
        cur += (size_t)B->cnt[b] * (size_t)l->ext;
    }
    B->len = cur + (arrangement != CU_PACKED ? 2 : 0);
}

/* write block b's payload val(src, blk, j, iter) into p */
static inline void cu_blocks_put(int *p, const cu_blocks *B, int b, int src, int blk, int iter)
{
    cu_put(p + B->off[b], &cu_lay[B->lay[b]], 0, B->nints[b], src, blk, iter);
}

/* The (layout pair, count) grid of the data-movement tests. On
   MPI_COMM_WORLD: counts 0, 1, 7, 1000 units with MPI_INT and the vector
   type, 1, 7, 1000 with the other pairs, and one large count (`big_int`
   units of MPI_INT, or `big_vec` units of the vector pair when `alt` is
   odd); on other communicators (full = 0): 7 and 1000 units with MPI_INT and
   with the struct-to-contiguous(4) pair. Returns the number of cells. */
typedef struct {
    int pair;
    size_t count;
    int big;
} cu_cell;

static inline int cu_grid(int full, int alt, size_t big_int, size_t big_vec, cu_cell *out)
{
    int n = 0;
    if (!full) {
        const int pairs[2] = {0, CU_NPAIRS - 1};
        for (int k = 0; k < 2; k++) {
            out[n++] = (cu_cell){pairs[k], 7, 0};
            out[n++] = (cu_cell){pairs[k], 1000, 0};
        }
        return n;
    }
    const size_t counts[4] = {0, 1, 7, 1000};
    for (int p = 0; p < CU_NPAIRS; p++)
        for (int k = p < 2 ? 0 : 1; k < 4; k++)
            out[n++] = (cu_cell){p, counts[k], 0};
    out[n++] = alt % 2 ? (cu_cell){1, big_vec, 1} : (cu_cell){0, big_int, 1};
    return n;
}
#define CU_MAXCELLS 32

#endif
