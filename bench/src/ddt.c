/* Derived datatypes: ping-pong of non-contiguous data described by MPI
 * datatypes, beside the contiguous reference at the same payload.
 *
 *   ddt_contig     N doubles, MPI_DOUBLE on both sides (the reference)
 *   ddt_vector     one column of an N x N row-major matrix of doubles
 *                  (MPI_Type_vector(N, 1, N, MPI_DOUBLE)) on rank 0, N
 *                  contiguous MPI_DOUBLEs on rank 1: different type maps,
 *                  same signature, in both directions
 *   ddt_vector_vv  the column on both sides
 *   ddt_struct     an array of { double x; int id; char tag[3]; }
 *                  (MPI_Type_create_struct resized to the C struct's size)
 *
 * Size = payload bytes: N * 8 for the doubles, count * sizeof(struct) for
 * the structs (15 of every 16 bytes are data, the rest is padding that is
 * not transmitted).  Reported latency = round trip / 2, as pingpong. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG 23
#define GUARD 64                 /* bytes after every buffer, checked */
#define GUARD_BYTE 0xA5
#define PAD_SEND 0x11            /* struct padding on the sending side */
#define PAD_RECV 0xEE            /* ... on the receiving side: must survive */
#define SENT_SEND (-1.5)         /* matrix elements outside the column */
#define SENT_RECV (-7.25)

typedef struct {
    double x;
    int id;
    char tag[3];
} rec_t;

enum { L_CONTIG, L_COLUMN, L_STRUCT };

typedef struct {
    int kind;
    size_t n;            /* elements: doubles or structs */
    size_t dim;          /* L_COLUMN: matrix dimension; the column is dim-1 */
    size_t bytes;        /* allocation without the guard */
    unsigned char *buf;  /* allocation */
    void *base;          /* buffer argument of the MPI call */
    MPI_Datatype type;   /* datatype argument ... */
    int count;           /* ... and count */
    int own_type;        /* free the type at the end */
} side_t;

typedef struct {
    MPI_Comm comm;
    int peer, sender, id, peer_id;
    const char *name;
    side_t s, r;         /* what this rank sends and receives */
} ddt_t;

/* Values: integers below 2^52, exact as doubles; never negative, so never
 * a sentinel. */
static inline double dval(uint64_t seed, size_t i)
{
    return (double)((seed ^ ((uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull)) >> 12);
}

static inline int ival(uint64_t seed, size_t i)
{
    return (int)(((seed >> 7) + (uint64_t)i * 2654435761u) & 0x7fffffff);
}

static inline char cval(uint64_t seed, size_t i, int k)
{
    return (char)('A' + (int)((seed + i * 3 + (size_t)k * 7) % 26));
}

static inline double *dptr(const side_t *s, size_t i)
{
    double *d = (double *)s->buf;
    return s->kind == L_COLUMN ? &d[i * s->dim + s->dim - 1] : &d[i];
}

static void put_one(side_t *s, uint64_t seed, size_t i)
{
    if (s->kind == L_STRUCT) {
        rec_t *r = (rec_t *)s->buf + i;
        r->x = dval(seed, i);
        r->id = ival(seed, i);
        for (int k = 0; k < 3; k++)
            r->tag[k] = cval(seed, i, k);
    } else {
        *dptr(s, i) = dval(seed, i);
    }
}

static void check_one(const side_t *s, uint64_t seed, size_t i, const char *what)
{
    if (s->kind == L_STRUCT) {
        const rec_t *r = (const rec_t *)s->buf + i;
        if (r->x != dval(seed, i) || r->id != ival(seed, i))
            fail("data check failed in %s: struct %zu of %zu is {%.17g, %d}, expected {%.17g, %d}", what, i,
                 s->n, r->x, r->id, dval(seed, i), ival(seed, i));
        for (int k = 0; k < 3; k++)
            if (r->tag[k] != cval(seed, i, k))
                fail("data check failed in %s: struct %zu of %zu, tag[%d] is %d, expected %d", what, i, s->n, k,
                     r->tag[k], cval(seed, i, k));
    } else {
        double v = *dptr(s, i);
        if (v != dval(seed, i))
            fail("data check failed in %s: element %zu of %zu is %.17g, expected %.17g", what, i, s->n, v,
                 dval(seed, i));
    }
}

/* Full: every element; otherwise the first and the last (the stamp). */
static void put(side_t *s, uint64_t seed, int full)
{
    if (full) {
        for (size_t i = 0; i < s->n; i++)
            put_one(s, seed, i);
    } else {
        put_one(s, seed, 0);
        put_one(s, seed, s->n - 1);
    }
}

/* Checks a received message; a full check also verifies the count in the
 * status and that nothing outside the type map was written: the matrix
 * outside the column, the padding of the structs, the guard bytes. */
static void get(const side_t *s, const MPI_Status *st, uint64_t seed, int full, const char *what)
{
    if (!full) {
        check_one(s, seed, 0, what);
        check_one(s, seed, s->n - 1, what);
        return;
    }
    int c = -1;
    MPI_Get_count(st, s->type, &c);
    if (c != s->count)
        fail("%s: MPI_Get_count gives %d, expected %d", what, c, s->count);
    for (size_t i = 0; i < s->n; i++)
        check_one(s, seed, i, what);
    if (s->kind == L_COLUMN) {
        const double *d = (const double *)s->buf;
        for (size_t i = 0; i < s->dim * s->dim; i++)
            if (i % s->dim != s->dim - 1 && d[i] != SENT_RECV)
                fail("%s: matrix element (%zu, %zu) outside the column was overwritten (%.17g)", what,
                     i / s->dim, i % s->dim, d[i]);
    } else if (s->kind == L_STRUCT) {
        const size_t pad = offsetof(rec_t, tag) + 3;
        for (size_t i = 0; i < s->n; i++) {
            const unsigned char *b = s->buf + i * sizeof(rec_t);
            for (size_t k = pad; k < sizeof(rec_t); k++)
                if (b[k] != PAD_RECV)
                    fail("%s: padding byte %zu of struct %zu was overwritten (%u)", what, k, i, b[k]);
        }
    }
    for (size_t k = 0; k < GUARD; k++)
        if (s->buf[s->bytes + k] != GUARD_BYTE)
            fail("%s: guard byte %zu after the buffer was overwritten", what, k);
}

static MPI_Datatype struct_type(void)
{
    int bl[3] = {1, 1, 3};
    MPI_Aint disp[3] = {offsetof(rec_t, x), offsetof(rec_t, id), offsetof(rec_t, tag)};
    MPI_Datatype types[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR}, t, r;
    MPI_Type_create_struct(3, bl, disp, types, &t);
    MPI_Type_create_resized(t, 0, (MPI_Aint)sizeof(rec_t), &r);
    MPI_Type_free(&t);
    MPI_Type_commit(&r);
    int sz;
    MPI_Aint lb, ext;
    MPI_Type_size(r, &sz);
    MPI_Type_get_extent(r, &lb, &ext);
    if (sz != (int)(sizeof(double) + sizeof(int) + 3) || lb != 0 || ext != (MPI_Aint)sizeof(rec_t))
        fail("ddt_struct: datatype has size %d, lb %ld, extent %ld", sz, (long)lb, (long)ext);
    return r;
}

/* One side: kind, n elements; send != 0 for the sending buffer. */
static void side_init(side_t *s, int kind, size_t n, int send)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->n = n;
    if (kind == L_COLUMN) {
        s->dim = n;
        s->bytes = n * n * sizeof(double);
    } else if (kind == L_STRUCT) {
        s->bytes = n * sizeof(rec_t);
    } else {
        s->bytes = n * sizeof(double);
    }
    s->buf = xmalloc(s->bytes + GUARD);
    memset(s->buf + s->bytes, GUARD_BYTE, GUARD);
    s->base = s->buf;
    if (kind == L_COLUMN) {
        double *d = (double *)s->buf;
        for (size_t i = 0; i < n * n; i++)
            d[i] = send ? SENT_SEND : SENT_RECV;
        s->base = d + (n - 1); /* the last column: the type map ends at the buffer's end */
        MPI_Type_vector((int)n, 1, (int)n, MPI_DOUBLE, &s->type);
        MPI_Type_commit(&s->type);
        s->own_type = 1;
        s->count = 1;
    } else if (kind == L_STRUCT) {
        memset(s->buf, send ? PAD_SEND : PAD_RECV, s->bytes);
        s->type = struct_type();
        s->own_type = 1;
        s->count = (int)n;
    } else {
        s->type = MPI_DOUBLE;
        s->count = (int)n;
    }
}

static void side_free(side_t *s)
{
    if (s->own_type)
        MPI_Type_free(&s->type);
    free(s->buf);
}

static double k_ddt(void *c, long first, int n, int full)
{
    ddt_t *p = c;
    MPI_Status st;
    double t0 = MPI_Wtime();
    for (long it = first; it < first + n; it++) {
        if (p->sender) {
            put(&p->s, seed_of(it, p->id, 0), full);
            MPI_Send(p->s.base, p->s.count, p->s.type, p->peer, TAG, p->comm);
            MPI_Recv(p->r.base, p->r.count, p->r.type, p->peer, TAG, p->comm, &st);
            get(&p->r, &st, seed_of(it, p->peer_id, 0), full, p->name);
        } else {
            MPI_Recv(p->r.base, p->r.count, p->r.type, p->peer, TAG, p->comm, &st);
            get(&p->r, &st, seed_of(it, p->peer_id, 0), full, p->name);
            put(&p->s, seed_of(it, p->id, 0), full);
            MPI_Send(p->s.base, p->s.count, p->s.type, p->peer, TAG, p->comm);
        }
    }
    return MPI_Wtime() - t0;
}

/* kinds[r]: layout used by rank r (0 or 1) for both its send and its
 * receive buffer.  elem: bytes of payload per element.  Default sizes
 * (without --sizes): defs[0..ndefs-1]; explicit sizes are clipped to
 * [lo, hi] and rounded down to whole elements. */
static int ddt_bench(const char *name, const int kinds[2], size_t elem, size_t lo, size_t hi, const size_t *defs,
                     int ndefs)
{
    if (g_size < 2) {
        if (g_rank == 0)
            emit_error(name, "needs at least 2 ranks");
        return 1;
    }
    size_t sizes[MAX_SIZES];
    int ns = 0;
    if (g_opt.nsizes)
        opts_sizes(lo, hi, sizes, &ns);
    else
        for (ns = 0; ns < ndefs && ns < MAX_SIZES; ns++)
            sizes[ns] = defs[ns];
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < 2 ? 0 : MPI_UNDEFINED, g_rank, &comm);
    if (comm != MPI_COMM_NULL) {
        for (int i = 0; i < ns; i++) {
            size_t n = sizes[i] / elem;
            if (n == 0)
                continue;
            size_t size = n * elem;
            ddt_t p = {.comm = comm, .peer = 1 - g_rank, .sender = g_rank == 0, .id = g_rank,
                       .peer_id = 1 - g_rank, .name = name};
            side_init(&p.s, kinds[g_rank], n, 1);
            side_init(&p.r, kinds[g_rank], n, 0);
            stat_t s = measure(comm, k_ddt, &p);
            side_free(&p.s);
            side_free(&p.r);
            if (g_rank != 0)
                continue;
            s.min_us /= 2;
            s.median_us /= 2;
            s.mean_us /= 2;
            double mbps = s.median_us > 0 ? (double)size / s.median_us : 0;
            char extra[64];
            snprintf(extra, sizeof extra, ",\"elems\":%zu", n);
            emit(name, size, g_size, &s, mbps, extra);
        }
        MPI_Comm_free(&comm);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return 0;
}

/* Payload sizes: N = 16, 64, 256, 1024 for the matrix column; 1 KiB ...
 * 4 MiB for the structs; both sets for the contiguous reference. */
static const size_t vec_sizes[] = {128, 512, 2048, 8192};
static const size_t big_sizes[] = {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22};
static const size_t ref_sizes[] = {128, 512, 1 << 10, 2048, 1 << 12, 8192, 1 << 14, 1 << 16, 1 << 18,
                                   1 << 20, 1 << 22};
#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

int bench_ddt(const char *name)
{
    if (!strcmp(name, "ddt_contig")) {
        const int k[2] = {L_CONTIG, L_CONTIG};
        return ddt_bench(name, k, sizeof(double), 8, 64u << 20, ref_sizes, NELEM(ref_sizes));
    }
    if (!strcmp(name, "ddt_vector")) {
        const int k[2] = {L_COLUMN, L_CONTIG};
        return ddt_bench(name, k, sizeof(double), 8, 8192, vec_sizes, NELEM(vec_sizes));
    }
    if (!strcmp(name, "ddt_vector_vv")) {
        const int k[2] = {L_COLUMN, L_COLUMN};
        return ddt_bench(name, k, sizeof(double), 8, 8192, vec_sizes, NELEM(vec_sizes));
    }
    if (!strcmp(name, "ddt_struct")) {
        const int k[2] = {L_STRUCT, L_STRUCT};
        return ddt_bench(name, k, sizeof(rec_t), 1024, 64u << 20, big_sizes, NELEM(big_sizes));
    }
    if (g_rank == 0)
        emit_error(name, "unknown ddt benchmark");
    return 1;
}
