/* ranks: 1 2 4 */
/* opt-in */
/* MPI-IO individual file pointers and nonblocking data access (MPI 4.1/5.0, chapter "I/O",
   "File Views", "Data Access with Individual File Pointers", "Nonblocking Data Access"). Each
   rank sets a view (etype and filetype MPI_INT, "native", displacement past a header and
   rank * K ints), checks MPI_File_get_view returns it (predefined types as themselves) and that
   the pointer starts at 0; MPI_File_write/read move the pointer by the count, in etypes;
   MPI_File_seek with MPI_SEEK_SET, MPI_SEEK_CUR and MPI_SEEK_END (the end of file in etypes of
   the view), MPI_File_get_position and MPI_File_get_byte_offset (displacement + position *
   4); MPI_File_iwrite_at/iread_at (completed with MPI_Wait, the pointer untouched) and
   MPI_File_iwrite/iread (completed with MPI_Test, the pointer moved when the call returns). The
   file is compared byte for byte with stdio on rank 0, then every rank reads its neighbour's
   block through a view whose filetype is derived (get_view returns a new contiguous type the
   caller frees), and a read at the end of file returns a count of 0 and leaves the pointer. */
#include "io_indep.h"

#define K 64    /* ints per rank */
#define HDR 24  /* bytes before the first rank's block (never written) */

static int rank, size;

static MPI_Offset disp_of(int r)
{
    return HDR + (MPI_Offset)r * K * 4;
}

/* The ints of rank r's block: values depend on r and on the file offset. */
static void block(int r, int *out)
{
    for (int i = 0; i < K; i++)
        out[i] = io_int(r, disp_of(r) / 4 + i);
}

static void expect_position(MPI_File fh, MPI_Offset want, MPI_Offset disp, const char *what)
{
    MPI_Offset pos = -1, byte = -1;
    CHECK_MPI(MPI_File_get_position(fh, &pos));
    CHECK(pos == want, "%s: position %lld, expected %lld", what, (long long)pos,
          (long long)want);
    CHECK_MPI(MPI_File_get_byte_offset(fh, pos, &byte));
    CHECK(byte == disp + pos * 4, "%s: byte offset %lld of position %lld, expected %lld", what,
          (long long)byte, (long long)pos, (long long)(disp + pos * 4));
}

static void wait_by_test(MPI_Request *req, MPI_Status *st)
{
    int flag = 0;
    while (!flag)
        CHECK_MPI(MPI_Test(req, &flag, st));
    CHECK(*req == MPI_REQUEST_NULL, "MPI_Test did not free the completed request");
}

static void own_block(MPI_File fh)
{
    MPI_Offset disp = disp_of(rank);
    int want[K], got[K];
    block(rank, want);
    MPI_Status st;
    MPI_Request req = MPI_REQUEST_NULL;

    CHECK_MPI(MPI_File_write(fh, want, K / 2, MPI_INT, &st));
    IO_STATUS(st, MPI_INT, K / 2, K / 2);
    expect_position(fh, K / 2, disp, "after write");

    CHECK_MPI(MPI_File_seek(fh, 0, MPI_SEEK_SET));
    expect_position(fh, 0, disp, "seek(0, SET)");
    memset(got, 0, sizeof got);
    CHECK_MPI(MPI_File_read(fh, got, K / 2, MPI_INT, &st));
    IO_STATUS(st, MPI_INT, K / 2, K / 2);
    IO_SAME(got, want, K / 2 * 4, "first half read with the pointer");
    expect_position(fh, K / 2, disp, "after read");
    CHECK_MPI(MPI_File_seek(fh, -3, MPI_SEEK_CUR));
    expect_position(fh, K / 2 - 3, disp, "seek(-3, CUR)");
    memset(got, 0, sizeof got);
    CHECK_MPI(MPI_File_read(fh, got, 3, MPI_INT, &st));
    IO_SAME(got, want + K / 2 - 3, 12, "3 ints read after seek(-3, CUR)");
    expect_position(fh, K / 2, disp, "after reading 3");

    /* iwrite_at takes its offset in etypes of the view and leaves the pointer */
    CHECK_MPI(MPI_File_iwrite_at(fh, 3 * K / 4, want + 3 * K / 4, K / 4, MPI_INT, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    IO_STATUS(st, MPI_INT, K / 4, K / 4);
    expect_position(fh, K / 2, disp, "after iwrite_at");
    /* iwrite moves the pointer when it returns, before completion */
    CHECK_MPI(MPI_File_iwrite(fh, want + K / 2, K / 4, MPI_INT, &req));
    expect_position(fh, 3 * K / 4, disp, "right after iwrite");
    wait_by_test(&req, &st);
    IO_STATUS(st, MPI_INT, K / 4, K / 4);

    CHECK_MPI(MPI_File_sync(fh));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_MPI(MPI_File_sync(fh));

    /* the end of file in etypes of this view: the blocks from this rank's on */
    CHECK_MPI(MPI_File_seek(fh, 0, MPI_SEEK_END));
    expect_position(fh, (MPI_Offset)(size - rank) * K, disp, "seek(0, END)");
    CHECK_MPI(MPI_File_seek(fh, -K, MPI_SEEK_END));
    expect_position(fh, (MPI_Offset)(size - rank - 1) * K, disp, "seek(-K, END)");

    memset(got, 0, sizeof got);
    CHECK_MPI(MPI_File_iread_at(fh, 0, got, K / 2, MPI_INT, &req));
    CHECK_MPI(MPI_Wait(&req, &st));
    IO_STATUS(st, MPI_INT, K / 2, K / 2);
    CHECK_MPI(MPI_File_seek(fh, K / 2, MPI_SEEK_SET));
    CHECK_MPI(MPI_File_iread(fh, got + K / 2, K / 2, MPI_INT, &req));
    expect_position(fh, K, disp, "right after iread");
    wait_by_test(&req, &st);
    IO_STATUS(st, MPI_INT, K / 2, K / 2);
    IO_SAME(got, want, sizeof got, "own block read with iread_at and iread");
}

static void check_image(const char *path)
{
    if (rank != 0)
        return;
    size_t n = (size_t)size * K * 4;
    int *want = malloc(n);
    unsigned char *got = malloc(HDR + n + 1);
    for (int r = 0; r < size; r++)
        block(r, want + (size_t)r * K);
    long m = io_read_raw(path, got, HDR + n + 1);
    CHECK(m == (long)(HDR + n), "stdio reads %ld bytes, expected %zu", m, HDR + n);
    if (m == (long)(HDR + n))
        IO_SAME(got + HDR, want, n, "file image after the header (stdio)");
    free(want);
    free(got);
}

static void neighbour_view(MPI_File fh)
{
    int nb = (rank + 1) % size;
    MPI_Offset disp = disp_of(nb);
    MPI_Datatype ft, etype = MPI_DATATYPE_NULL, ftype = MPI_DATATYPE_NULL;
    MPI_Type_contiguous(K, MPI_INT, &ft);
    MPI_Type_commit(&ft);
    CHECK_MPI(MPI_File_set_view(fh, disp, MPI_INT, ft, "native", MPI_INFO_NULL));
    MPI_Type_free(&ft); /* the view keeps its own reference */

    MPI_Offset d = -1;
    char rep[MPI_MAX_DATAREP_STRING + 1];
    rep[0] = '\0';
    CHECK_MPI(MPI_File_get_view(fh, &d, &etype, &ftype, rep));
    CHECK(d == disp, "get_view: displacement %lld, expected %lld", (long long)d,
          (long long)disp);
    CHECK(etype == MPI_INT, "get_view: etype is not MPI_INT");
    CHECK(strcmp(rep, "native") == 0, "get_view: datarep '%s'", rep);
    if (ftype != MPI_DATATYPE_NULL && ftype != MPI_INT) {
        int ni = -1, na = -1, nd = -1, comb = -1;
        MPI_Type_get_envelope(ftype, &ni, &na, &nd, &comb);
        /* a new handle of the same type: built again, or a duplicate */
        CHECK(comb == MPI_COMBINER_CONTIGUOUS || comb == MPI_COMBINER_DUP,
              "get_view: filetype combiner %d", comb);
        int isz = 0;
        MPI_Aint lb = -1, ext = -1;
        MPI_Type_size(ftype, &isz);
        MPI_Type_get_extent(ftype, &lb, &ext);
        CHECK(isz == K * 4 && lb == 0 && ext == K * 4,
              "get_view: filetype size %d, lb %ld, extent %ld", isz, (long)lb, (long)ext);
        MPI_Type_free(&ftype);
    } else {
        CHECK(0, "get_view: derived filetype came back as %s",
              ftype == MPI_INT ? "MPI_INT" : "MPI_DATATYPE_NULL");
    }
    expect_position(fh, 0, disp, "after the second set_view");

    int want[K], got[K];
    block(nb, want);
    memset(got, 0, sizeof got);
    MPI_Status st;
    CHECK_MPI(MPI_File_read(fh, got, K, MPI_INT, &st));
    IO_STATUS(st, MPI_INT, K, K);
    IO_SAME(got, want, sizeof got, "neighbour's block through a derived filetype");
    expect_position(fh, K, disp, "after reading the neighbour's block");

#ifndef SKIP_OMPI_414_BUGS
    /* Open MPI 4.1.4 (OMPIO) with this derived filetype: seek(0, END) stops at the end of the
       first filetype (the neighbour's block) when the file goes on after it, and a read at the
       end of file, which reads nothing, moves the pointer by the count asked for */
    CHECK_MPI(MPI_File_seek(fh, 0, MPI_SEEK_END));
    MPI_Offset end = -1;
    CHECK_MPI(MPI_File_get_position(fh, &end));
    CHECK(end == (MPI_Offset)(size - nb) * K, "neighbour view: end at %lld, expected %lld",
          (long long)end, (long long)(size - nb) * K);
    CHECK_MPI(MPI_File_read(fh, got, 5, MPI_INT, &st));
    IO_STATUS(st, MPI_INT, 0, 0);
    expect_position(fh, end, disp, "after a read at the end of file");
#endif
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (io_setup()) {
        char p[IO_PATH_MAX];
        io_path(p, "pointers");
        MPI_File fh = MPI_FILE_NULL;
        int rc = MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_CREATE | MPI_MODE_RDWR,
                               MPI_INFO_NULL, &fh);
        CHECK_MPI(rc);
        if (io_all(rc == MPI_SUCCESS)) {
            expect_position(fh, 0, 0, "default view");
            MPI_Offset disp = disp_of(rank);
            rc = MPI_File_set_view(fh, disp, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
            CHECK_MPI(rc);
            if (io_all(rc == MPI_SUCCESS)) {
                MPI_Offset d = -1;
                MPI_Datatype et = MPI_DATATYPE_NULL, ft = MPI_DATATYPE_NULL;
                char rep[MPI_MAX_DATAREP_STRING + 1];
                rep[0] = '\0';
                CHECK_MPI(MPI_File_get_view(fh, &d, &et, &ft, rep));
                CHECK(d == disp, "get_view: displacement %lld, expected %lld", (long long)d,
                      (long long)disp);
                CHECK(et == MPI_INT, "get_view: etype is not MPI_INT");
                CHECK(ft == MPI_INT, "get_view: filetype is not MPI_INT");
                CHECK(strcmp(rep, "native") == 0, "get_view: datarep '%s'", rep);
                expect_position(fh, 0, disp, "after set_view");
                own_block(fh);
                check_image(p);
                neighbour_view(fh);
            }
            CHECK_MPI(MPI_File_close(&fh));
        }
    }
    return io_finish("io_pointers");
}
