/* ranks: 1 2 3 */
/* MPI_BOTTOM with types of absolute addresses (MPI_Get_address + hindexed or struct) in
   MPI_Pack/MPI_Unpack, their external32 twins and the size calls, and in nonblocking and
   persistent sends and receives; a type with relative displacements still packs from a real
   buffer. */
#include "check.h"

/* The three variables lie far apart: a global, a local and a large heap block. */
static int a;

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* Three separate variables described by one struct type of absolute addresses. */
    double b[2] = {1.25, -2.5};
    short *heap = malloc(1 << 21);
    short *cp = heap + 1000;
    a = 7;
    *cp = -3;
    MPI_Aint addr[3];
    MPI_Get_address(&a, &addr[0]);
    MPI_Get_address(b, &addr[1]);
    MPI_Get_address(cp, &addr[2]);
    int len[3] = {1, 2, 1};
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_SHORT}, st;
    CHECK_MPI(MPI_Type_create_struct(3, len, addr, types, &st));
    CHECK_MPI(MPI_Type_commit(&st));
    int want = (int)(sizeof(int) + 2 * sizeof(double) + sizeof(short));

    int psize = -1;
    CHECK_MPI(MPI_Pack_size(1, st, MPI_COMM_WORLD, &psize));
    CHECK(psize >= want, "MPI_Pack_size %d < %d", psize, want);
    char packed[256];
    int pos = 0;
    CHECK_MPI(MPI_Pack(MPI_BOTTOM, 1, st, packed, (int)sizeof packed, &pos, MPI_COMM_WORLD));
    CHECK(pos == want, "MPI_Pack position %d, expected %d", pos, want);
    int pa;
    double pb[2];
    short pc;
    memcpy(&pa, packed, sizeof pa);
    memcpy(pb, packed + sizeof pa, sizeof pb);
    memcpy(&pc, packed + sizeof pa + sizeof pb, sizeof pc);
    CHECK(pa == 7 && pb[0] == 1.25 && pb[1] == -2.5 && pc == -3, "packed %d %g %g %d", pa, pb[0], pb[1], pc);

    a = 0;
    b[0] = b[1] = 0;
    *cp = 0;
    pos = 0;
    CHECK_MPI(MPI_Unpack(packed, want, &pos, MPI_BOTTOM, 1, st, MPI_COMM_WORLD));
    CHECK(pos == want, "MPI_Unpack position %d", pos);
    CHECK(a == 7 && b[0] == 1.25 && b[1] == -2.5 && *cp == -3, "unpacked %d %g %g %d", a, b[0], b[1], *cp);

    /* external32: big-endian, the standard's sizes. */
    MPI_Aint esize = -1, epos = 0;
    CHECK_MPI(MPI_Pack_external_size("external32", 1, st, &esize));
    CHECK(esize == 4 + 16 + 2, "MPI_Pack_external_size %ld", (long)esize);
    unsigned char ext[64];
    CHECK_MPI(MPI_Pack_external("external32", MPI_BOTTOM, 1, st, ext, sizeof ext, &epos));
    CHECK(epos == 22, "MPI_Pack_external position %ld", (long)epos);
    CHECK(ext[0] == 0 && ext[3] == 7 && ext[20] == 0xff && ext[21] == 0xfd, "external32 bytes %02x %02x %02x %02x",
          ext[0], ext[3], ext[20], ext[21]);
    a = 0;
    b[0] = b[1] = 0;
    *cp = 0;
    epos = 0;
    CHECK_MPI(MPI_Unpack_external("external32", ext, 22, &epos, MPI_BOTTOM, 1, st));
    CHECK(epos == 22 && a == 7 && b[0] == 1.25 && b[1] == -2.5 && *cp == -3, "external32 unpacked %d %g %g %d", a,
          b[0], b[1], *cp);

    /* Large-count forms. */
    MPI_Count cpos = 0, csize = -1;
    CHECK_MPI(MPI_Pack_size_c(1, st, MPI_COMM_WORLD, &csize));
    CHECK(csize >= want, "MPI_Pack_size_c %lld", (long long)csize);
    CHECK_MPI(MPI_Pack_c(MPI_BOTTOM, 1, st, packed, sizeof packed, &cpos, MPI_COMM_WORLD));
    CHECK(cpos == want, "MPI_Pack_c position %lld", (long long)cpos);

    /* hindexed of absolute addresses: two arrays of ints, two elements of the type. */
    int x[3] = {1, 2, 3}, y[2] = {4, 5};
    int hl[2] = {3, 2};
    MPI_Aint hd[2];
    MPI_Get_address(x, &hd[0]);
    MPI_Get_address(y, &hd[1]);
    MPI_Datatype hi;
    CHECK_MPI(MPI_Type_create_hindexed(2, hl, hd, MPI_INT, &hi));
    CHECK_MPI(MPI_Type_commit(&hi));
    pos = 0;
    CHECK_MPI(MPI_Pack(MPI_BOTTOM, 1, hi, packed, (int)sizeof packed, &pos, MPI_COMM_WORLD));
    int ints[5];
    memcpy(ints, packed, sizeof ints);
    CHECK(pos == 20 && ints[0] == 1 && ints[2] == 3 && ints[3] == 4 && ints[4] == 5, "hindexed packed %d: %d %d %d %d",
          pos, ints[0], ints[2], ints[3], ints[4]);
    for (int k = 0; k < 5; k++)
        ints[k] = 10 * (k + 1);
    memcpy(packed, ints, sizeof ints);
    pos = 0;
    CHECK_MPI(MPI_Unpack(packed, 20, &pos, MPI_BOTTOM, 1, hi, MPI_COMM_WORLD));
    CHECK(x[0] == 10 && x[2] == 30 && y[0] == 40 && y[1] == 50, "hindexed unpacked %d %d %d %d", x[0], x[2], y[0],
          y[1]);

    /* Nonblocking and persistent point-to-point around a ring with MPI_BOTTOM. */
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    x[0] = 100 + rank;
    x[1] = 200 + rank;
    x[2] = 300 + rank;
    y[0] = 400 + rank;
    y[1] = 500 + rank;
    int r[5] = {-1, -1, -1, -1, -1};
    MPI_Request rq[2];
    CHECK_MPI(MPI_Irecv(r, 5, MPI_INT, from, 1, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Isend(MPI_BOTTOM, 1, hi, to, 1, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    CHECK(r[0] == 100 + from && r[2] == 300 + from && r[4] == 500 + from, "ring: %d %d %d", r[0], r[2], r[4]);

    int s5[5];
    for (int k = 0; k < 5; k++)
        s5[k] = 1000 * (k + 1) + rank;
    CHECK_MPI(MPI_Recv_init(MPI_BOTTOM, 1, hi, from, 2, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Send_init(s5, 5, MPI_INT, to, 2, MPI_COMM_WORLD, &rq[1]));
    for (int round = 0; round < 2; round++) {
        x[0] = y[1] = -1;
        CHECK_MPI(MPI_Startall(2, rq));
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        CHECK(x[0] == 1000 + from && x[2] == 3000 + from && y[1] == 5000 + from, "persistent round %d: %d %d %d",
              round, x[0], x[2], y[1]);
    }
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);

    /* A relative type still packs from a real buffer (no MPI_BOTTOM confusion). */
    MPI_Datatype vec;
    CHECK_MPI(MPI_Type_vector(2, 1, 2, MPI_INT, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    int src[3] = {9, 8, 7};
    pos = 0;
    CHECK_MPI(MPI_Pack(src, 1, vec, packed, (int)sizeof packed, &pos, MPI_COMM_WORLD));
    memcpy(ints, packed, 2 * sizeof(int));
    CHECK(pos == 8 && ints[0] == 9 && ints[1] == 7, "vector packed %d: %d %d", pos, ints[0], ints[1]);

    MPI_Type_free(&vec);
    MPI_Type_free(&hi);
    MPI_Type_free(&st);
    free(heap);
    return check_finish("dtype_bottom_pack");
}
