/* ranks: 1 2 3 4 */
/* MPI_Pack / MPI_Unpack / MPI_Pack_size (and _c) with derived types: several packs into one
   buffer, the packed bytes sent as MPI_PACKED and unpacked on the partner, gaps untouched;
   external32: sizes, big-endian byte order of each basic type, round trip; errors. */
#include "check.h"
#include <stddef.h>
#include <stdint.h>

static int rank, size, partner;

/* Where MPICH 4.0.2 deviates (no outsize check, MPI_DOUBLE_INT external32 size 0, datarep
   "native" accepted), the difference is printed, not failed, under MPICH. */
#ifdef MPICH_VERSION
#define STANDARD_CHECK(cond, ...)                                                           \
    do {                                                                                    \
        if (!(cond) && rank == 0)                                                           \
            printf("note: MPICH differs (standard behaviour not checked): " __VA_ARGS__),    \
                printf("\n");                                                               \
    } while (0)
#else
#define STANDARD_CHECK(cond, ...) CHECK(cond, __VA_ARGS__)
#endif

/* MPI_LONG is 4 bytes in external32 (MPI 4.0, table 14.2). */
static const int long_ext = 4;

struct rec {
    double d;
    char c;
    int i[2];
};

static MPI_Datatype rec_type(void)
{
    int bl[3] = {1, 1, 2};
    MPI_Aint d[3] = {offsetof(struct rec, d), offsetof(struct rec, c), offsetof(struct rec, i)};
    MPI_Datatype ty[3] = {MPI_DOUBLE, MPI_CHAR, MPI_INT}, t;
    MPI_Type_create_struct(3, bl, d, ty, &t);
    MPI_Type_commit(&t);
    return t;
}

static void native_pack(void)
{
    MPI_Datatype vec, rt = rec_type();
    MPI_Type_vector(3, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int a[6];
    struct rec r[2];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 6; i++)
        a[i] = 100 * rank + i;
    for (int k = 0; k < 2; k++) {
        r[k].d = rank + 0.25 * k;
        r[k].c = (char)('a' + k);
        r[k].i[0] = 10 * k + rank;
        r[k].i[1] = -k;
    }
    int s1 = -1, s2 = -1;
    CHECK_MPI(MPI_Pack_size(1, vec, MPI_COMM_WORLD, &s1));
    CHECK_MPI(MPI_Pack_size(2, rt, MPI_COMM_WORLD, &s2));
    CHECK(s1 >= 12 && s2 >= 34, "Pack_size %d %d", s1, s2);
    MPI_Count sc = -1;
    CHECK_MPI(MPI_Pack_size_c(2, rt, MPI_COMM_WORLD, &sc));
    CHECK(sc == s2, "Pack_size_c %lld vs %d", (long long)sc, s2);
    char buf[256];
    int pos = 0;
    CHECK_MPI(MPI_Pack(a, 1, vec, buf, (int)sizeof buf, &pos, MPI_COMM_WORLD));
    CHECK(pos > 0 && pos <= s1, "position after vector %d", pos);
    CHECK_MPI(MPI_Pack(r, 2, rt, buf, (int)sizeof buf, &pos, MPI_COMM_WORLD));
    CHECK(pos <= s1 + s2, "position after struct %d", pos);
    /* the packed stream of the vector is a[0], a[2], a[4] in type-map order: unpack it as 3 ints */
    int three[3];
    int p2 = 0;
    CHECK_MPI(MPI_Unpack(buf, pos, &p2, three, 3, MPI_INT, MPI_COMM_WORLD));
    CHECK(three[0] == a[0] && three[1] == a[2] && three[2] == a[4], "vector packs a[0], a[2], a[4]");

    /* send the packed bytes; the partner unpacks into a poisoned vector buffer and structs */
    char rbuf[256];
    MPI_Request q[2];
    MPI_Status st;
    MPI_Irecv(rbuf, (int)sizeof rbuf, MPI_PACKED, partner, 1, MPI_COMM_WORLD, &q[0]);
    MPI_Isend(buf, pos, MPI_PACKED, partner, 1, MPI_COMM_WORLD, &q[1]);
    MPI_Wait(&q[0], &st);
    MPI_Wait(&q[1], MPI_STATUS_IGNORE);
    int got = 0;
    MPI_Get_count(&st, MPI_PACKED, &got);
    CHECK(got == pos, "received %d packed bytes, sent %d", got, pos);
    int b[6];
    for (int i = 0; i < 6; i++)
        b[i] = -7;
    struct rec rr[2];
    memset(rr, 0x5A, sizeof rr);
    int rp = 0;
    CHECK_MPI(MPI_Unpack(rbuf, got, &rp, b, 1, vec, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Unpack(rbuf, got, &rp, rr, 2, rt, MPI_COMM_WORLD));
    CHECK(rp == got, "unpacked %d of %d bytes", rp, got);
    for (int i = 0; i < 6; i++) {
        int want = (i % 2 == 0) ? 100 * partner + i : -7;
        CHECK(b[i] == want, "vector element %d: %d, expected %d", i, b[i], want);
    }
    for (int k = 0; k < 2; k++) {
        CHECK(rr[k].d == partner + 0.25 * k && rr[k].c == (char)('a' + k) &&
                  rr[k].i[0] == 10 * k + partner && rr[k].i[1] == -k,
              "struct %d differs", k);
        const unsigned char *pad = (const unsigned char *)&rr[k] + offsetof(struct rec, c) + 1;
        CHECK(pad[0] == 0x5A && pad[1] == 0x5A && pad[2] == 0x5A, "struct %d: padding was written", k);
    }

    /* _c forms */
    MPI_Count cpos = 0;
    char cbuf[64];
    CHECK_MPI(MPI_Pack_c(a, 1, vec, cbuf, (MPI_Count)sizeof cbuf, &cpos, MPI_COMM_WORLD));
    CHECK(cpos == 12, "Pack_c position %lld", (long long)cpos);
    int c6[6] = {0, 0, 0, 0, 0, 0};
    MPI_Count cup = 0;
    CHECK_MPI(MPI_Unpack_c(cbuf, cpos, &cup, c6, 1, vec, MPI_COMM_WORLD));
    CHECK(cup == 12 && c6[0] == a[0] && c6[2] == a[2] && c6[4] == a[4] && c6[1] == 0,
          "Unpack_c round trip");

    /* errors: no room, negative count, uncommitted type */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    pos = 0;
    int rc = MPI_Pack(a, 1, vec, buf, 8, &pos, MPI_COMM_WORLD);
    STANDARD_CHECK(rc != MPI_SUCCESS, "Pack of 12 bytes into 8 succeeded");
    CHECK_ERR_CLASS(MPI_Pack(a, -1, MPI_INT, buf, 8, &pos, MPI_COMM_WORLD), MPI_ERR_COUNT);
    MPI_Datatype un;
    MPI_Type_contiguous(2, MPI_INT, &un);
    pos = 0;
    CHECK_ERR_CLASS(MPI_Pack(a, 1, un, buf, 64, &pos, MPI_COMM_WORLD), MPI_ERR_TYPE);
    MPI_Type_free(&un);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Type_free(&vec);
    MPI_Type_free(&rt);
}

/* external32: every basic type is big-endian with the standard's size */
static void external32(void)
{
    MPI_Aint sz = -1;
    struct {
        MPI_Datatype t;
        MPI_Aint ext;
    } sizes[] = {{MPI_CHAR, 1},   {MPI_SHORT, 2},  {MPI_INT, 4},          {MPI_LONG, long_ext},
                 {MPI_LONG_LONG, 8}, {MPI_FLOAT, 4}, {MPI_DOUBLE, 8},    {MPI_UNSIGNED_LONG, long_ext},
                 {MPI_LONG_DOUBLE, 16}, {MPI_C_DOUBLE_COMPLEX, 16}, {MPI_INT64_T, 8},
                 {MPI_DOUBLE_INT, 12}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        CHECK_MPI(MPI_Pack_external_size("external32", 3, sizes[k].t, &sz));
        char name[MPI_MAX_OBJECT_NAME];
        int nl = 0;
        MPI_Type_get_name(sizes[k].t, name, &nl);
        STANDARD_CHECK(sz == 3 * sizes[k].ext, "%s: external32 size of 3 is %ld, expected %ld", name,
              (long)sz, (long)(3 * sizes[k].ext));
    }

    unsigned char out[64];
    MPI_Aint pos = 0, up = 0;
#ifdef MPICH_VERSION
    /* MPICH 4.0.2 dies (SIGILL in yaksa) packing a struct of mixed basic types to external32 */
    if (rank == 0)
        printf("note: MPICH 4.0.2 crashes on external32 of mixed structs; that part is skipped\n");
#else
    /* a struct {int; long; double; short} packed: the exact big-endian bytes */
    struct s {
        int i;
        long l;
        double d;
        short h;
    } v = {0x01020304, -2, 1.0, 0x0A0B};
    int bl[4] = {1, 1, 1, 1};
    MPI_Aint d[4] = {offsetof(struct s, i), offsetof(struct s, l), offsetof(struct s, d),
                     offsetof(struct s, h)};
    MPI_Datatype ty[4] = {MPI_INT, MPI_LONG, MPI_DOUBLE, MPI_SHORT}, t;
    MPI_Type_create_struct(4, bl, d, ty, &t);
    MPI_Type_commit(&t);
    memset(out, 0xCC, sizeof out);
    pos = 0;
    CHECK_MPI(MPI_Pack_external("external32", &v, 1, t, out, (MPI_Aint)sizeof out, &pos));
    CHECK(pos == 4 + long_ext + 8 + 2, "external32 struct takes %ld bytes", (long)pos);
    unsigned char want[24] = {1, 2, 3, 4};
    int w = 4;
    for (int k = 0; k < long_ext - 1; k++)
        want[w++] = 0xFF;
    want[w++] = 0xFE;
    const unsigned char one[8] = {0x3F, 0xF0, 0, 0, 0, 0, 0, 0};
    memcpy(want + w, one, 8);
    w += 8;
    want[w++] = 0x0A;
    want[w++] = 0x0B;
    CHECK(memcmp(out, want, (size_t)w) == 0, "external32 bytes differ from the big-endian encoding");
    struct s back;
    memset(&back, 0, sizeof back);
    up = 0;
    CHECK_MPI(MPI_Unpack_external("external32", out, pos, &up, &back, 1, t));
    CHECK(up == pos && back.i == v.i && back.l == v.l && back.d == v.d && back.h == v.h,
          "external32 round trip of the struct");
    MPI_Type_free(&t);

#endif

    /* a vector of doubles and a long double round trip; _c forms */
    double dv[5] = {1.5, -2.25, 3e100, -0.0, 7};
    MPI_Datatype vec;
    MPI_Type_vector(3, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_commit(&vec);
    MPI_Count cpos = 0;
    CHECK_MPI(MPI_Pack_external_c("external32", dv, 1, vec, out, (MPI_Count)sizeof out, &cpos));
    CHECK(cpos == 24, "Pack_external_c position %lld", (long long)cpos);
    CHECK(out[0] == 0x3F && out[1] == 0xF8, "1.5 is 3F F8 ... in external32");
    double dr[5] = {9, 9, 9, 9, 9};
    MPI_Count cup = 0;
    CHECK_MPI(MPI_Unpack_external_c("external32", out, cpos, &cup, dr, 1, vec));
    CHECK(dr[0] == 1.5 && dr[2] == 3e100 && dr[4] == 7 && dr[1] == 9 && dr[3] == 9,
          "external32 vector round trip");
    MPI_Count csz = 0;
    CHECK_MPI(MPI_Pack_external_size_c("external32", 2, vec, &csz));
    CHECK(csz == 48, "Pack_external_size_c %lld", (long long)csz);
    MPI_Type_free(&vec);
    long double ld[2] = {1.0L / 3, -12345.678L}, ldr[2] = {0, 0};
    pos = 0;
    CHECK_MPI(MPI_Pack_external("external32", ld, 2, MPI_LONG_DOUBLE, out, (MPI_Aint)sizeof out, &pos));
    CHECK(pos == 32, "long double external32 takes %ld bytes", (long)pos);
    CHECK(out[0] == 0x3F && out[1] == 0xFD, "1/3 as IEEE quad starts 3F FD, got %02X %02X", out[0],
          out[1]);
    up = 0;
    CHECK_MPI(MPI_Unpack_external("external32", out, pos, &up, ldr, 2, MPI_LONG_DOUBLE));
    CHECK(ldr[0] == ld[0] && ldr[1] == ld[1], "long double round trip");

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    pos = 0;
    int rc = MPI_Pack_external("native", dv, 1, MPI_DOUBLE, out, 64, &pos);
    STANDARD_CHECK(rc != MPI_SUCCESS, "Pack_external with datarep \"native\" succeeded");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    partner = (rank % 2 == 0) ? rank + 1 : rank - 1;
    if (partner >= size)
        partner = rank;
    native_pack();
    external32();
    return check_finish("dtype_pack");
}
