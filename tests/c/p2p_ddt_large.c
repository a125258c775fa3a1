/* ranks: 2 3 4 */
/* Large non-contiguous messages: a matrix column (vector of doubles), a
   vector of int blocks, an indexed type with odd block lengths, a struct with
   gaps and 2-D / 3-D subarrays, each at sizes below the eager limit, across
   it and across several frames (ring records, TCP chunks). Every rank sends
   to its right neighbour and receives from its left, typed on both sides,
   typed against plain bytes and bytes against typed; every data byte is
   checked against the sender's, every gap byte must keep its sentinel. The
   expected type maps are computed here by plain loops, not by MPI. */
#include "check.h"
#include <stddef.h>
#include <stdint.h>

static int rank, size;

typedef struct {
    const char *name;
    MPI_Datatype type;
    int count;
    size_t span;   /* bytes the buffer needs */
    size_t *map;   /* offset of each packed byte, in type-map order */
    size_t nmap;
} shape_t;

static void add_block(shape_t *s, size_t at, size_t len)
{
    for (size_t i = 0; i < len; i++)
        s->map[s->nmap++] = at + i;
}

static unsigned char val(int seed, size_t off)
{
    return (unsigned char)((off * 131u + off / 253u + (unsigned)seed * 29u) % 251u);
}

#define SENT 0xEE

/* Column `rows` x `cols` matrix of doubles, last column. */
static shape_t column(size_t rows, size_t cols)
{
    shape_t s = {.name = "column", .count = 1, .span = rows * cols * 8};
    s.map = malloc(rows * 8 * sizeof(size_t));
    for (size_t r = 0; r < rows; r++)
        add_block(&s, (r * cols + cols - 1) * 8, 8);
    MPI_Datatype t;
    MPI_Type_vector((int)rows, 1, (int)cols, MPI_DOUBLE, &t);
    /* the buffer argument points at the column's first element */
    MPI_Type_create_resized(t, 0, (MPI_Aint)(rows * cols * 8), &s.type);
    MPI_Type_free(&t);
    MPI_Datatype h;
    MPI_Aint disp = (MPI_Aint)((cols - 1) * 8);
    int one = 1;
    MPI_Type_create_hindexed(1, &one, &disp, s.type, &h);
    MPI_Type_free(&s.type);
    s.type = h;
    MPI_Type_commit(&s.type);
    return s;
}

/* n elements of MPI_Type_vector(4, 3, 5, MPI_INT) (3-int blocks, 2-int gaps; extent 18 ints). */
static shape_t int_blocks(size_t n)
{
    shape_t s = {.name = "vector of int blocks", .count = (int)n, .span = n * 18 * 4};
    s.map = malloc(n * 12 * 4 * sizeof(size_t));
    for (size_t e = 0; e < n; e++)
        for (size_t b = 0; b < 4; b++)
            add_block(&s, e * 72 + b * 20, 12);
    MPI_Type_vector(4, 3, 5, MPI_INT, &s.type);
    MPI_Type_commit(&s.type);
    return s;
}

/* n elements of indexed chars: blocks of 1, 5, 2 at 9, 1, 12 (out of order; extent 13). */
static shape_t odd_indexed(size_t n)
{
    shape_t s = {.name = "indexed 1,5,2", .count = (int)n, .span = n * 13 + 1};
    s.map = malloc(n * 8 * sizeof(size_t));
    int bl[3] = {1, 5, 2}, dp[3] = {9, 1, 12};
    for (size_t e = 0; e < n; e++)
        for (int b = 0; b < 3; b++)
            add_block(&s, e * 13 + (size_t)dp[b], (size_t)bl[b]);
    MPI_Datatype t;
    MPI_Type_indexed(3, bl, dp, MPI_CHAR, &t);
    /* extent 13: lb 0 (a resized marker), ub 13 */
    MPI_Type_create_resized(t, 0, 13, &s.type);
    MPI_Type_free(&t);
    MPI_Type_commit(&s.type);
    return s;
}

typedef struct {
    char c;
    double d;
    short s[3];
} gap_t;

/* n structs {char; double; short[3]}: gaps after c and after s. */
static shape_t gapped(size_t n)
{
    shape_t s = {.name = "struct with gaps", .count = (int)n, .span = n * sizeof(gap_t)};
    s.map = malloc(n * 15 * sizeof(size_t));
    for (size_t e = 0; e < n; e++) {
        add_block(&s, e * sizeof(gap_t) + offsetof(gap_t, c), 1);
        add_block(&s, e * sizeof(gap_t) + offsetof(gap_t, d), 8);
        add_block(&s, e * sizeof(gap_t) + offsetof(gap_t, s), 6);
    }
    int bl[3] = {1, 1, 3};
    MPI_Aint dp[3] = {offsetof(gap_t, c), offsetof(gap_t, d), offsetof(gap_t, s)};
    MPI_Datatype ty[3] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT}, t;
    MPI_Type_create_struct(3, bl, dp, ty, &t);
    MPI_Type_create_resized(t, 0, sizeof(gap_t), &s.type);
    MPI_Type_free(&t);
    MPI_Type_commit(&s.type);
    return s;
}

/* A 3-D subarray of ints (C order, or Fortran order when `fortran`). */
static shape_t sub3(const int sz[3], const int sub[3], const int st[3], int fortran)
{
    shape_t s = {.name = fortran ? "subarray (Fortran)" : "subarray (C)", .count = 1,
                 .span = (size_t)sz[0] * sz[1] * sz[2] * 4};
    s.map = malloc((size_t)sub[0] * sub[1] * sub[2] * 4 * sizeof(size_t));
    /* slowest dimension first: 0 in C order, 2 in Fortran order */
    int d0 = fortran ? 2 : 0, d2 = fortran ? 0 : 2;
    size_t str[3];
    str[d2] = 4;
    str[1] = 4 * (size_t)sz[d2];
    str[d0] = 4 * (size_t)sz[d2] * sz[1];
    for (int i = st[d0]; i < st[d0] + sub[d0]; i++)
        for (int j = st[1]; j < st[1] + sub[1]; j++)
            for (int k = st[d2]; k < st[d2] + sub[d2]; k++)
                add_block(&s, (size_t)i * str[d0] + (size_t)j * str[1] + (size_t)k * str[d2], 4);
    MPI_Type_create_subarray(3, sz, sub, st, fortran ? MPI_ORDER_FORTRAN : MPI_ORDER_C, MPI_INT, &s.type);
    MPI_Type_commit(&s.type);
    return s;
}

static void shape_free(shape_t *s)
{
    MPI_Type_free(&s->type);
    free(s->map);
}

/* Sends `s` to the right and receives it from the left. mode 0: typed on
   both sides; 1: typed send, MPI_BYTE receive; 2: MPI_BYTE send, typed
   receive. `sync` uses MPI_Issend. */
static void exchange(shape_t *s, int mode, int sync)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int tag = 100 + mode;
    size_t packed = s->nmap;
    unsigned char *sbuf = malloc(s->span + 64), *rbuf = malloc(s->span + 64);
    unsigned char *sbytes = malloc(packed + 64), *rbytes = malloc(packed + 64);
    for (size_t i = 0; i < s->span + 64; i++) {
        sbuf[i] = val(rank, i);
        rbuf[i] = SENT;
    }
    for (size_t k = 0; k < packed + 64; k++) {
        sbytes[k] = val(rank + 7, k);
        rbytes[k] = SENT;
    }
    MPI_Request rq[2];
    int typed_send = mode != 2, typed_recv = mode != 1;
    if (typed_recv)
        CHECK_MPI(MPI_Irecv(rbuf, s->count, s->type, left, tag, MPI_COMM_WORLD, &rq[0]));
    else
        CHECK_MPI(MPI_Irecv(rbytes, (int)packed, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rq[0]));
    void *sb = typed_send ? (void *)sbuf : (void *)sbytes;
    MPI_Datatype st = typed_send ? s->type : MPI_BYTE;
    int sc = typed_send ? s->count : (int)packed;
    if (sync)
        CHECK_MPI(MPI_Issend(sb, sc, st, right, tag, MPI_COMM_WORLD, &rq[1]));
    else
        CHECK_MPI(MPI_Isend(sb, sc, st, right, tag, MPI_COMM_WORLD, &rq[1]));
    MPI_Status sts[2];
    CHECK_MPI(MPI_Waitall(2, rq, sts));
    int got = -1;
    MPI_Get_count(&sts[0], MPI_BYTE, &got);
    CHECK(got == (int)packed, "%s x%d mode %d: received %d bytes, expected %zu", s->name, s->count, mode, got,
          packed);
    /* What the left neighbour sent, byte by byte in type-map order. */
    long bad = 0;
    unsigned char *mark = calloc(s->span + 64, 1);
    for (size_t k = 0; k < packed; k++) {
        unsigned char want = mode == 2 ? val(left + 7, k) : val(left, s->map[k]);
        unsigned char have = typed_recv ? rbuf[s->map[k]] : rbytes[k];
        if (typed_recv)
            mark[s->map[k]] = 1;
        if (have != want && bad++ < 3)
            CHECK(0, "%s x%d mode %d sync %d: packed byte %zu (offset %zu) is %u, expected %u", s->name, s->count,
                  mode, sync, k, s->map[k], have, want);
    }
    if (typed_recv) {
        for (size_t i = 0; i < s->span + 64; i++)
            if (!mark[i] && rbuf[i] != SENT && bad++ < 6)
                CHECK(0, "%s x%d mode %d: gap byte at %zu was written (%u)", s->name, s->count, mode, i, rbuf[i]);
    } else {
        for (size_t k = packed; k < packed + 64; k++)
            if (rbytes[k] != SENT && bad++ < 6)
                CHECK(0, "%s x%d mode %d: byte %zu past the message was written", s->name, s->count, mode, k);
    }
    free(mark);
    free(sbuf);
    free(rbuf);
    free(sbytes);
    free(rbytes);
}

static void run(shape_t s)
{
    for (int mode = 0; mode < 3; mode++)
        exchange(&s, mode, mode == 0 && s.nmap > 20000);
    shape_free(&s);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* packed sizes: tens of bytes (eager), ~20 KiB (rendezvous, < 1 frame of
       the default ring), ~300 KiB and more (many frames) */
    size_t rows[] = {5, 2600, 40000};
    for (int i = 0; i < 3; i++)
        run(column(rows[i], 9));
    size_t nb[] = {1, 450, 7000};
    for (int i = 0; i < 3; i++)
        run(int_blocks(nb[i]));
    size_t ni[] = {3, 2700, 41000};
    for (int i = 0; i < 3; i++)
        run(odd_indexed(ni[i]));
    size_t ng[] = {2, 1400, 21000};
    for (int i = 0; i < 3; i++)
        run(gapped(ng[i]));
    {
        int sz[3] = {6, 5, 4}, sub[3] = {2, 3, 2}, st[3] = {1, 2, 1};
        run(sub3(sz, sub, st, 0));
        run(sub3(sz, sub, st, 1));
    }
    {
        int sz[3] = {40, 50, 60}, sub[3] = {29, 23, 37}, st[3] = {5, 20, 11};
        run(sub3(sz, sub, st, 0));
        run(sub3(sz, sub, st, 1));
    }
    return check_finish("p2p_ddt_large");
}
