/* ranks: 1 2 3 4 */
/* Every datatype constructor on the wire: each rank sends with one type map and its partner
   receives with a different type map of the same signature (vector on send, contiguous on
   receive, ...). The expected bytes come from offsets computed here element by element; every
   byte of the receive buffer outside the receive type map must stay untouched (gaps, padding).
   Also: extents and sizes of the new types, a partial receive with Get_elements, and the error
   classes of misuse. */
#include "check.h"
#include <stddef.h>

static int rank, size, partner;

/* Where MPICH 4.0 deviates from the standard (sticky bounds) or checks less (erroneous
   arguments, overflow), the difference is printed, not failed, under MPICH. */
#ifdef MPICH_VERSION
#define STANDARD_CHECK(cond, ...)                                                           \
    do {                                                                                    \
        if (!(cond) && rank == 0)                                                           \
            printf("note: MPICH differs (standard behaviour not checked): " __VA_ARGS__), printf("\n");  \
    } while (0)
#else
#define STANDARD_CHECK(cond, ...) CHECK(cond, __VA_ARGS__)
#endif

enum { BUF = 16384, BASE = 4096, MAXB = 8192 };
static unsigned char sbuf[BUF], rbuf[BUF];
/* byte offsets (from BASE) of the data, in type-map order */
static long soff[MAXB], roff[MAXB];
static int ns, nr;

static void add(long *list, int *n, long off, int bytes)
{
    for (int b = 0; b < bytes; b++)
        list[(*n)++] = off + b;
}
#define S(off, bytes) add(soff, &ns, (off), (bytes))
#define R(off, bytes) add(roff, &nr, (off), (bytes))

/* Sends scount x stype, receives rcount x rtype (from the partner, who does the same) and
   compares against soff/roff; resets the lists. */
static void xfer(const char *what, MPI_Datatype st, int scount, MPI_Datatype rt, int rcount)
{
    static int tag = 0;
    tag++;
    CHECK(ns == nr, "%s: test bug: %d send bytes, %d receive bytes", what, ns, nr);
    check_fill(sbuf, BUF, rank + 1);
    memset(rbuf, 0xEE, BUF);
    MPI_Request q[2];
    MPI_Status stt;
    CHECK_MPI(MPI_Irecv(rbuf + BASE, rcount, rt, partner, tag, MPI_COMM_WORLD, &q[0]));
    CHECK_MPI(MPI_Isend(sbuf + BASE, scount, st, partner, tag, MPI_COMM_WORLD, &q[1]));
    CHECK_MPI(MPI_Wait(&q[0], &stt));
    CHECK_MPI(MPI_Wait(&q[1], MPI_STATUS_IGNORE));
    static unsigned char want[BUF];
    static char mark[BUF];
    memset(want, 0xEE, BUF);
    memset(mark, 0, BUF);
    for (int k = 0; k < nr; k++) {
        want[BASE + roff[k]] = check_pattern(partner + 1, (size_t)(BASE + soff[k]));
        mark[BASE + roff[k]] = 1;
    }
    int bad = 0;
    for (int i = 0; i < BUF && bad < 5; i++)
        if (rbuf[i] != want[i]) {
            CHECK(0, "%s: byte %d (%s) is %#x, expected %#x", what, i - BASE,
                  mark[i] ? "data" : "gap", rbuf[i], want[i]);
            bad++;
        }
    int cnt = -1;
    MPI_Get_count(&stt, rt, &cnt);
    CHECK(cnt == rcount, "%s: Get_count %d, expected %d", what, cnt, rcount);
    ns = nr = 0;
}

static void extent_is(const char *what, MPI_Datatype t, int sz, MPI_Aint lb, MPI_Aint ext)
{
    int s = -1;
    MPI_Aint l = -1, e = -1;
    CHECK_MPI(MPI_Type_size(t, &s));
    CHECK_MPI(MPI_Type_get_extent(t, &l, &e));
    CHECK(s == sz && l == lb && e == ext, "%s: size %d lb %ld extent %ld, expected %d %ld %ld", what,
          s, (long)l, (long)e, sz, (long)lb, (long)ext);
}

static void true_extent_is(const char *what, MPI_Datatype t, MPI_Aint tlb, MPI_Aint text)
{
    MPI_Aint l = -1, e = -1;
    CHECK_MPI(MPI_Type_get_true_extent(t, &l, &e));
    CHECK(l == tlb && e == text, "%s: true lb %ld true extent %ld, expected %ld %ld", what, (long)l,
          (long)e, (long)tlb, (long)text);
}

static MPI_Datatype commit(MPI_Datatype t)
{
    CHECK_MPI(MPI_Type_commit(&t));
    return t;
}

static void contig_recv(int n, int elem, MPI_Datatype *t)
{
    for (int k = 0; k < n; k++)
        R((long)k * elem, elem);
    (void)t;
}

struct rec {
    double d;
    char c;
    int i[2];
};
struct rec2 {
    char c;
    int i[2];
    double d;
};

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = (rank % 2 == 0) ? rank + 1 : rank - 1;
    if (partner >= size)
        partner = rank;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    MPI_Datatype t, u, v, w;

    /* vector on send, contiguous on receive */
    MPI_Type_vector(4, 2, 3, MPI_INT, &t);
    t = commit(t);
    extent_is("vector", t, 32, 0, 44);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            S((i * 3 + j) * 4, 4);
    MPI_Type_contiguous(8, MPI_INT, &u);
    u = commit(u);
    contig_recv(8, 4, &u);
    xfer("vector -> contiguous", t, 1, u, 1);
    /* two vectors back to back: the second starts one extent (44 bytes) later */
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 2; j++)
                S(e * 44 + (i * 3 + j) * 4, 4);
    contig_recv(16, 4, NULL);
    xfer("2 vectors -> 16 ints", t, 2, MPI_INT, 16);
    MPI_Type_free(&t);
    MPI_Type_free(&u);

    /* contiguous on send, vector with a negative stride on receive */
    MPI_Type_vector(3, 1, -2, MPI_DOUBLE, &t);
    t = commit(t);
    extent_is("negative vector", t, 24, -32, 40);
    true_extent_is("negative vector", t, -32, 40);
    contig_recv(0, 0, NULL);
    for (int k = 0; k < 3; k++) {
        S(k * 8, 8);
        R(-16 * k, 8);
    }
    xfer("doubles -> negative-stride vector", MPI_DOUBLE, 3, t, 1);
    MPI_Type_free(&t);

    /* hvector <-> indexed */
    MPI_Type_create_hvector(3, 2, 20, MPI_INT, &t);
    t = commit(t);
    extent_is("hvector", t, 24, 0, 48);
    int ibl[3] = {2, 1, 3}, idisp[3] = {5, 0, 10};
    MPI_Type_indexed(3, ibl, idisp, MPI_INT, &u);
    u = commit(u);
    extent_is("indexed", u, 24, 0, 52);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            S(i * 20 + j * 4, 4);
    long io[6] = {20, 24, 0, 40, 44, 48};
    for (int k = 0; k < 6; k++)
        R(io[k], 4);
    xfer("hvector -> indexed", t, 1, u, 1);
    for (int k = 0; k < 6; k++)
        S(io[k], 4);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            R(i * 20 + j * 4, 4);
    xfer("indexed -> hvector", u, 1, t, 1);
    MPI_Type_free(&t);
    MPI_Type_free(&u);

    /* hindexed (negative displacement) <-> indexed_block */
    int hbl[2] = {2, 1};
    MPI_Aint hd[2] = {100, -20};
    MPI_Type_create_hindexed(2, hbl, hd, MPI_INT, &t);
    t = commit(t);
    extent_is("hindexed", t, 12, -20, 128);
    int bd[3] = {4, 0, 2};
    MPI_Type_create_indexed_block(3, 1, bd, MPI_INT, &u);
    u = commit(u);
    S(100, 4);
    S(104, 4);
    S(-20, 4);
    R(16, 4);
    R(0, 4);
    R(8, 4);
    xfer("hindexed -> indexed_block", t, 1, u, 1);
    MPI_Type_free(&t);
    MPI_Type_free(&u);

    /* hindexed_block <-> contiguous */
    MPI_Aint hbd[2] = {40, 0};
    MPI_Type_create_hindexed_block(2, 2, hbd, MPI_SHORT, &t);
    t = commit(t);
    extent_is("hindexed_block", t, 8, 0, 44);
    S(40, 2);
    S(42, 2);
    S(0, 2);
    S(2, 2);
    contig_recv(4, 2, NULL);
    xfer("hindexed_block -> shorts", t, 1, MPI_SHORT, 4);
    MPI_Type_free(&t);

    /* struct: the C struct's own layout (padding, extent == sizeof) to a reordered struct */
    {
        int bl[3] = {1, 1, 2};
        MPI_Aint d1[3] = {offsetof(struct rec, d), offsetof(struct rec, c), offsetof(struct rec, i)};
        MPI_Aint d2[3] = {offsetof(struct rec2, d), offsetof(struct rec2, c), offsetof(struct rec2, i)};
        MPI_Datatype ty[3] = {MPI_DOUBLE, MPI_CHAR, MPI_INT};
        MPI_Type_create_struct(3, bl, d1, ty, &t);
        MPI_Type_create_struct(3, bl, d2, ty, &u);
        t = commit(t);
        u = commit(u);
        extent_is("struct rec", t, 17, 0, sizeof(struct rec));
        extent_is("struct rec2", u, 17, 0, sizeof(struct rec2));
        for (int e = 0; e < 3; e++) {
            long a = e * (long)sizeof(struct rec), b = e * (long)sizeof(struct rec2);
            S(a + offsetof(struct rec, d), 8);
            S(a + offsetof(struct rec, c), 1);
            S(a + offsetof(struct rec, i), 8);
            R(b + offsetof(struct rec2, d), 8);
            R(b + offsetof(struct rec2, c), 1);
            R(b + offsetof(struct rec2, i), 8);
        }
        xfer("struct -> reordered struct", t, 3, u, 3);
        MPI_Type_free(&t);
        MPI_Type_free(&u);
    }

    /* subarray, C order, 3-D; and Fortran order, 2-D */
    {
        int sz[3] = {4, 5, 6}, sub[3] = {2, 3, 2}, st[3] = {1, 2, 3};
        MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_C, MPI_FLOAT, &t);
        t = commit(t);
        extent_is("subarray C", t, 48, 0, 4 * 5 * 6 * 4);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 2; k++)
                    S((((i + 1) * 5 + (j + 2)) * 6 + (k + 3)) * 4, 4);
        contig_recv(12, 4, NULL);
        xfer("subarray C -> floats", t, 1, MPI_FLOAT, 12);
        int fz[2] = {5, 4}, fsub[2] = {3, 2}, fst[2] = {1, 2};
        MPI_Type_create_subarray(2, fz, fsub, fst, MPI_ORDER_FORTRAN, MPI_FLOAT, &u);
        u = commit(u);
        extent_is("subarray Fortran", u, 24, 0, 80);
        for (int k = 0; k < 6; k++)
            S(k * 4, 4);
        for (int j = 0; j < 2; j++) /* column-major: the first index is fastest */
            for (int i = 0; i < 3; i++)
                R(((j + 2) * 5 + (i + 1)) * 4, 4);
        xfer("floats -> subarray Fortran", MPI_FLOAT, 6, u, 1);
        MPI_Type_free(&t);
        MPI_Type_free(&u);
    }

    /* darray: the sender sends its part contiguously; the receiver places it with the
       darray type of the sender's rank (block rows, cyclic(2) columns, process grid 1..4) */
    {
        int g[2] = {5, 7}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
        int darg[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, ps[2];
        ps[0] = size >= 2 ? 2 : 1;
        ps[1] = size / ps[0];
        int grid = ps[0] * ps[1];
        if (rank < grid && partner < grid) {
            MPI_Type_create_darray(grid, partner, 2, g, dist, darg, ps, MPI_ORDER_C, MPI_INT, &t);
            t = commit(t);
            int pc0 = partner / ps[1], pc1 = partner % ps[1], bs = (g[0] + ps[0] - 1) / ps[0];
            int n = 0;
            for (int i = 0; i < g[0]; i++)
                for (int j = 0; j < g[1]; j++)
                    if (i / bs == pc0 && (j / 2) % ps[1] == pc1) {
                        R((i * g[1] + j) * 4, 4);
                        n++;
                    }
            /* my own element count (what I send) equals the partner's on the same grid only when
               both own as many; send exactly what the partner's darray holds */
            int mine = 0, c0 = rank / ps[1], c1 = rank % ps[1];
            for (int i = 0; i < g[0]; i++)
                for (int j = 0; j < g[1]; j++)
                    if (i / bs == c0 && (j / 2) % ps[1] == c1)
                        mine++;
            extent_is("darray", t, n * 4, 0, 5 * 7 * 4);
            if (mine == n) {
                for (int k = 0; k < n; k++)
                    S(k * 4, 4);
                xfer("ints -> darray", MPI_INT, n, t, 1);
            } else {
                nr = 0;
            }
            MPI_Type_free(&t);
        }
    }

    /* resized: explicit lb and extent, in a contiguous of 4 */
    MPI_Type_create_resized(MPI_INT, -4, 12, &t);
    t = commit(t);
    extent_is("resized", t, 4, -4, 12);
    true_extent_is("resized", t, 0, 4);
    for (int k = 0; k < 4; k++) {
        S(k * 4, 4);
        R(k * 12, 4);
    }
    xfer("ints -> 4 resized", MPI_INT, 4, t, 4);
    MPI_Type_contiguous(2, t, &u);
    u = commit(u);
    extent_is("contiguous of resized", u, 8, -4, 24);
    MPI_Type_free(&t);
    MPI_Type_free(&u);

    /* nested: struct { hvector(2, subarray 2x2 of a 4x4 int array, stride 100); char[3] } */
    {
        int sz[2] = {4, 4}, sub[2] = {2, 2}, st[2] = {1, 1};
        MPI_Datatype sa, hv, nest, flat;
        MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_C, MPI_INT, &sa);
        MPI_Type_create_hvector(2, 1, 100, sa, &hv);
        int bl[2] = {1, 3};
        MPI_Aint d[2] = {0, 200};
        MPI_Datatype ty[2] = {hv, MPI_CHAR};
        MPI_Type_create_struct(2, bl, d, ty, &nest);
        nest = commit(nest);
        /* the subarray's explicit bounds (markers) win: lb 0, ub 100 + 64 (MPI 4.0, 5.1.7) */
        {
            MPI_Aint l = -1, e = -1;
            MPI_Type_get_extent(nest, &l, &e);
            STANDARD_CHECK(l == 0 && e == 164, "nested struct: lb %ld extent %ld, expected 0 164",
                           (long)l, (long)e);
        }
        true_extent_is("nested", nest, 20, 183);
        int fbl[2] = {8, 3};
        MPI_Aint fd[2] = {0, 32};
        MPI_Datatype fty[2] = {MPI_INT, MPI_CHAR};
        MPI_Type_create_struct(2, fbl, fd, fty, &flat);
        flat = commit(flat);
        for (int h = 0; h < 2; h++)
            for (int i = 1; i < 3; i++)
                for (int j = 1; j < 3; j++)
                    S(h * 100 + (i * 4 + j) * 4, 4);
        S(200, 3);
        R(0, 35);
        xfer("nested -> flat struct", nest, 1, flat, 1);
        MPI_Type_free(&sa);
        MPI_Type_free(&hv);
        MPI_Type_free(&nest);
        MPI_Type_free(&flat);
    }

    /* large-count constructors */
    MPI_Type_vector_c(3, 2, 4, MPI_INT, &t);
    t = commit(t);
    MPI_Count csz = -1, clb = -1, cext = -1;
    CHECK_MPI(MPI_Type_size_c(t, &csz));
    CHECK_MPI(MPI_Type_get_extent_c(t, &clb, &cext));
    CHECK(csz == 24 && clb == 0 && cext == 40, "vector_c: size %lld extent %lld", (long long)csz,
          (long long)cext);
    MPI_Type_contiguous_c(6, MPI_INT, &u);
    u = commit(u);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            S((i * 4 + j) * 4, 4);
    contig_recv(6, 4, NULL);
    xfer("vector_c -> contiguous_c", t, 1, u, 1);
    MPI_Type_free(&t);
    MPI_Type_free(&u);
    {
        MPI_Count bl[2] = {1, 2}, dd[2] = {16, 0};
        MPI_Datatype ty[2] = {MPI_DOUBLE, MPI_INT};
        MPI_Type_create_struct_c(2, bl, dd, ty, &t);
        t = commit(t);
        extent_is("struct_c", t, 16, 0, 24);
        MPI_Type_free(&t);
    }

    /* partial receive of a derived type: Get_count is MPI_UNDEFINED, Get_elements counts */
    {
        int bl[3] = {1, 1, 1};
        MPI_Aint d3[3] = {0, 8, 16};
        MPI_Datatype ty3[3] = {MPI_INT, MPI_DOUBLE, MPI_INT};
        MPI_Type_create_struct(3, bl, d3, ty3, &t); /* int, double, int: 16 bytes of data */
        t = commit(t);
        MPI_Aint d2[2] = {0, 8};
        MPI_Type_create_struct(2, bl, d2, ty3, &u); /* {int, double} */
        u = commit(u);
        int sb[8] = {0};
        char rb[64];
        MPI_Status stt;
        MPI_Request q;
        MPI_Irecv(rb, 2, u, partner, 999, MPI_COMM_WORLD, &q);
        MPI_Send(sb, 1, t, partner, 999, MPI_COMM_WORLD);
        MPI_Wait(&q, &stt);
        int cnt = 0, el = 0;
        MPI_Get_count(&stt, u, &cnt);
        MPI_Get_elements(&stt, u, &el);
        CHECK(cnt == MPI_UNDEFINED, "partial: Get_count %d, expected MPI_UNDEFINED", cnt);
        CHECK(el == 3, "partial: Get_elements %d, expected 3", el);
        MPI_Count elc = 0;
        MPI_Get_elements_c(&stt, u, &elc);
        CHECK(elc == 3, "partial: Get_elements_c %lld", (long long)elc);
        MPI_Type_free(&t);
        MPI_Type_free(&u);
    }

    /* errors */
    {
        int x[4] = {0};
        MPI_Type_vector(2, 1, 2, MPI_INT, &t); /* not committed */
        CHECK_ERR_CLASS(MPI_Send(x, 1, t, MPI_PROC_NULL, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
        MPI_Type_free(&t);
        CHECK_ERR_CLASS(MPI_Type_vector(-1, 1, 2, MPI_INT, &t), MPI_ERR_COUNT);
        CHECK_ERR_CLASS(MPI_Type_contiguous(-3, MPI_INT, &t), MPI_ERR_COUNT);
        CHECK_ERR_CLASS(MPI_Type_indexed(2, NULL, x, MPI_INT, &t), MPI_ERR_ARG);
        CHECK_ERR_CLASS(MPI_Type_create_struct(2, x, NULL, NULL, &t), MPI_ERR_ARG);
        CHECK_ERR_CLASS(MPI_Type_vector(2, 1, 2, MPI_DATATYPE_NULL, &t), MPI_ERR_TYPE);
        int sz[1] = {4}, sub[1] = {3}, st[1] = {2};
        int rc = MPI_Type_create_subarray(1, sz, sub, st, MPI_ORDER_C, MPI_INT, &t);
        int cls = MPI_SUCCESS;
        MPI_Error_class(rc, &cls);
        STANDARD_CHECK(cls == MPI_ERR_ARG, "subarray with start + subsize > size: class %d", cls);
        if (rc == MPI_SUCCESS)
            MPI_Type_free(&t);
        /* an element count whose type map overflows the address space */
        MPI_Type_create_hvector(2, 1, ((MPI_Aint)1 << 62), MPI_INT, &v);
        rc = MPI_Type_create_hvector(4, 1, ((MPI_Aint)1 << 62), v, &w);
        cls = MPI_SUCCESS;
        MPI_Error_class(rc, &cls);
        STANDARD_CHECK(cls == MPI_ERR_TYPE || cls == MPI_ERR_COUNT || cls == MPI_ERR_ARG,
              "overflowing hvector: class %d", cls);
        if (rc == MPI_SUCCESS)
            MPI_Type_free(&w);
        MPI_Type_free(&v);
    }

    return check_finish("dtype_constructors");
}
