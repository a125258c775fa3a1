/* ranks: 1 2 4 */
/* opt-in */
/* MPI-IO data access with explicit offsets (MPI 4.1/5.0, chapter "I/O", "Data Access with
   Explicit Offsets"): every rank writes its own region of one file with MPI_File_write_at
   (MPI_INT), MPI_File_write_at_all (MPI_DOUBLE), MPI_File_write_at with a non-contiguous memory
   datatype (a vector with holes, two items) and the MPI_Count forms write_at_c/write_at_all_c;
   the statuses give the counts written (MPI_Get_count, MPI_Get_elements and their _c forms).
   After sync-barrier-sync the file is compared byte for byte with the expected image (read with
   stdio on rank 0) and every rank reads its neighbour's region with the matching read calls,
   the vector read leaving the holes of the memory buffer untouched. A read at or past the end of
   file returns a count of 0, one straddling the end returns what was there (with a vector type:
   MPI_Get_count gives MPI_UNDEFINED for a partial item, MPI_Get_elements the ints read). A
   negative offset is an invalid argument (MPI_ERR_ARG, the class of an invalid argument that
   no more specific class covers). Values depend on the writing rank and
   the file offset. MPI 3.1 libraries (no _c forms) leave those calls out. */
#include "io_indep.h"

#define NI 256 /* ints written with write_at */
#define ND 128 /* doubles written with write_at_all */
#define VB 10  /* vector: blocks */
#define VL 3   /* vector: ints per block */
#define VS 5   /* vector: stride in ints */
#define VN 2   /* vector items written */
#define VEXT ((VB - 1) * VS + VL)  /* extent of one vector item, in ints */
#define VINTS (VN * VB * VL)       /* ints the vector items hold */
#define NC 64  /* ints written with the _c forms */
#define OFF_I 0
#define OFF_D (OFF_I + NI * 4)
#define OFF_V (OFF_D + ND * 8)
#define OFF_C (OFF_V + VINTS * 4)
#define REG (OFF_C + NC * 4) /* bytes per rank */
#define SENTINEL (-12345)

static int rank, size;
static MPI_Datatype vec;

/* The bytes of rank r's region as it writes it, from its start at file offset r * REG. */
static void region(int r, unsigned char *out)
{
    long long base = (long long)r * REG;
    for (int i = 0; i < NI; i++) {
        int v = io_int(r, (base + OFF_I) / 4 + i);
        memcpy(out + OFF_I + 4 * i, &v, 4);
    }
    for (int i = 0; i < ND; i++) {
        double v = io_double(r, (base + OFF_D) / 8 + i);
        memcpy(out + OFF_D + 8 * i, &v, 8);
    }
    for (int i = 0; i < VINTS; i++) {
        int v = io_int(r, (base + OFF_V) / 4 + i);
        memcpy(out + OFF_V + 4 * i, &v, 4);
    }
    for (int i = 0; i < NC; i++) {
        int v = io_int(r, (base + OFF_C) / 4 + i);
        memcpy(out + OFF_C + 4 * i, &v, 4);
    }
}

/* Memory of VN vector items whose k-th element (in type map order) is ints[k] and whose holes
   hold SENTINEL. */
static void vec_memory(int *mem, const int *ints)
{
    for (int i = 0; i < VN * VEXT; i++)
        mem[i] = SENTINEL;
    int k = 0;
    for (int n = 0; n < VN; n++)
        for (int b = 0; b < VB; b++)
            for (int j = 0; j < VL; j++)
                mem[n * VEXT + b * VS + j] = ints[k++];
}

static void write_region(MPI_File fh)
{
    unsigned char img[REG];
    region(rank, img);
    MPI_Offset base = (MPI_Offset)rank * REG;
    MPI_Status st;

    CHECK_MPI(MPI_File_write_at(fh, base + OFF_I, img + OFF_I, NI, MPI_INT, &st));
    IO_STATUS(st, MPI_INT, NI, NI);
    CHECK_MPI(MPI_File_write_at_all(fh, base + OFF_D, img + OFF_D, ND, MPI_DOUBLE, &st));
    IO_STATUS(st, MPI_DOUBLE, ND, ND);

    int ints[VINTS], mem[VN * VEXT];
    memcpy(ints, img + OFF_V, sizeof ints);
    vec_memory(mem, ints);
    CHECK_MPI(MPI_File_write_at(fh, base + OFF_V, mem, VN, vec, &st));
    IO_STATUS(st, vec, VN, VINTS);

    /* a zero count writes nothing and says so */
    CHECK_MPI(MPI_File_write_at(fh, base, img, 0, MPI_INT, &st));
    IO_STATUS(st, MPI_INT, 0, 0);

#if MPI_VERSION >= 4
    MPI_Count cn = -1, ce = -1;
    CHECK_MPI(MPI_File_write_at_c(fh, base + OFF_C, img + OFF_C, (MPI_Count)(NC / 2), MPI_INT,
                                  &st));
    CHECK_MPI(MPI_Get_count_c(&st, MPI_INT, &cn));
    CHECK_MPI(MPI_Get_elements_c(&st, MPI_INT, &ce));
    CHECK(cn == NC / 2 && ce == NC / 2, "write_at_c: count %lld, elements %lld",
          (long long)cn, (long long)ce);
    CHECK_MPI(MPI_File_write_at_all_c(fh, base + OFF_C + 2 * NC, img + OFF_C + 2 * NC,
                                      (MPI_Count)(NC / 2), MPI_INT, &st));
    CHECK_MPI(MPI_Get_count_c(&st, MPI_INT, &cn));
    CHECK(cn == NC / 2, "write_at_all_c: count %lld", (long long)cn);
#else
    CHECK_MPI(MPI_File_write_at(fh, base + OFF_C, img + OFF_C, NC, MPI_INT, &st));
#endif
}

/* Reads rank r's region with the read forms matching the writes. */
static void read_region(MPI_File fh, int r)
{
    unsigned char want[REG], got[REG];
    region(r, want);
    memset(got, 0, sizeof got);
    MPI_Offset base = (MPI_Offset)r * REG;
    MPI_Status st;

    CHECK_MPI(MPI_File_read_at(fh, base + OFF_I, got + OFF_I, NI, MPI_INT, &st));
    IO_STATUS(st, MPI_INT, NI, NI);
    CHECK_MPI(MPI_File_read_at_all(fh, base + OFF_D, got + OFF_D, ND, MPI_DOUBLE, &st));
    IO_STATUS(st, MPI_DOUBLE, ND, ND);

    int ints[VINTS], mem[VN * VEXT], wmem[VN * VEXT];
    memcpy(ints, want + OFF_V, sizeof ints);
    vec_memory(wmem, ints);
    for (int i = 0; i < VN * VEXT; i++)
        mem[i] = SENTINEL;
    CHECK_MPI(MPI_File_read_at(fh, base + OFF_V, mem, VN, vec, &st));
    IO_STATUS(st, vec, VN, VINTS);
    IO_SAME(mem, wmem, sizeof mem, "vector read (elements and untouched holes)");
    memcpy(got + OFF_V, want + OFF_V, VINTS * 4); /* compared above */

#if MPI_VERSION >= 4
    MPI_Count cn = -1, ce = -1;
    CHECK_MPI(MPI_File_read_at_c(fh, base + OFF_C, got + OFF_C, (MPI_Count)(NC / 2), MPI_INT,
                                 &st));
    CHECK_MPI(MPI_Get_count_c(&st, MPI_INT, &cn));
    CHECK_MPI(MPI_Get_elements_c(&st, MPI_INT, &ce));
    CHECK(cn == NC / 2 && ce == NC / 2, "read_at_c: count %lld, elements %lld", (long long)cn,
          (long long)ce);
    CHECK_MPI(MPI_File_read_at_all_c(fh, base + OFF_C + 2 * NC, got + OFF_C + 2 * NC,
                                     (MPI_Count)(NC / 2), MPI_INT, &st));
    CHECK_MPI(MPI_Get_count_c(&st, MPI_INT, &cn));
    CHECK(cn == NC / 2, "read_at_all_c: count %lld", (long long)cn);
#else
    CHECK_MPI(MPI_File_read_at(fh, base + OFF_C, got + OFF_C, NC, MPI_INT, &st));
#endif
    char what[64];
    snprintf(what, sizeof what, "region of rank %d read back", r);
    IO_SAME(got, want, REG, what);
}

static void end_of_file(MPI_File fh)
{
    MPI_Offset end = (MPI_Offset)size * REG, sz = -1;
    CHECK_MPI(MPI_File_get_size(fh, &sz));
    CHECK(sz == end, "file size %lld, expected %lld", (long long)sz, (long long)end);
    unsigned char last[REG];
    region(size - 1, last);

    int buf[10];
    MPI_Status st;
    CHECK_MPI(MPI_File_read_at(fh, end, buf, 10, MPI_INT, &st));
    IO_STATUS(st, MPI_INT, 0, 0);
    CHECK_MPI(MPI_File_read_at(fh, end + 100, buf, 10, MPI_INT, &st));
    IO_STATUS(st, MPI_INT, 0, 0);
    memset(buf, 0, sizeof buf);
    CHECK_MPI(MPI_File_read_at(fh, end - 8, buf, 10, MPI_INT, &st));
    IO_STATUS(st, MPI_INT, 2, 2);
    IO_SAME(buf, last + REG - 8, 8, "the 2 ints before the end");
    /* collectively: each rank straddles the end by a different amount */
    int k = rank % 4 + 1;
    memset(buf, 0, sizeof buf);
    CHECK_MPI(MPI_File_read_at_all(fh, end - 4 * k, buf, 10, MPI_INT, &st));
#if !defined(SKIP_MPICH_402_BUGS) && !defined(SKIP_OMPI_414_BUGS)
    /* MPICH 4.0.2 (ROMIO) on 2+ ranks, Open MPI 4.1.4 (OMPIO) on 4 in some runs: a collective
       read that the end of file cuts reports the full count on some ranks */
    IO_STATUS(st, MPI_INT, k, k);
#endif
    IO_SAME(buf, last + REG - 4 * k, 4 * k, "read_at_all straddling the end");
    CHECK_MPI(MPI_File_read_at_all(fh, end + 4 * k, buf, 10, MPI_INT, &st));
#if !defined(SKIP_MPICH_402_BUGS) && !defined(SKIP_OMPI_414_BUGS)
    /* MPICH 4.0.2 (ROMIO) and Open MPI 4.1.4 (OMPIO), 2+ ranks: a collective read wholly past
       the end of file reports the full count instead of 0 */
    IO_STATUS(st, MPI_INT, 0, 0);
#endif

    /* a vector item cut by the end: 7 of its ints are there */
    int mem[VN * VEXT], wmem[VN * VEXT], ints[VINTS];
    for (int i = 0; i < VN * VEXT; i++)
        mem[i] = SENTINEL;
    memcpy(ints, last + REG - 28, 28);
    for (int i = 7; i < VINTS; i++)
        ints[i] = SENTINEL;
    vec_memory(wmem, ints);
    CHECK_MPI(MPI_File_read_at(fh, end - 28, mem, 1, vec, &st));
#ifndef SKIP_MPICH_402_BUGS
    /* MPICH 4.0.2 (ROMIO): a read into a non-contiguous memory type that the end of file cuts
       reports the whole item (count 1, 30 elements) and fills the elements past the end with
       stale bytes */
    IO_STATUS(st, vec, MPI_UNDEFINED, 7);
    IO_SAME(mem, wmem, VEXT * sizeof(int), "vector item straddling the end");
#endif
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Type_vector(VB, VL, VS, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    if (io_setup()) {
        char p[IO_PATH_MAX];
        io_path(p, "explicit");
        MPI_File fh = MPI_FILE_NULL;
        int rc = MPI_File_open(MPI_COMM_WORLD, p, MPI_MODE_CREATE | MPI_MODE_RDWR,
                               MPI_INFO_NULL, &fh);
        CHECK_MPI(rc);
        if (io_all(rc == MPI_SUCCESS)) {
            write_region(fh);
            CHECK_MPI(MPI_File_sync(fh));
            MPI_Barrier(MPI_COMM_WORLD);
            CHECK_MPI(MPI_File_sync(fh));
            if (rank == 0) {
                size_t n = (size_t)size * REG;
                unsigned char *want = malloc(n), *got = malloc(n + 1);
                for (int r = 0; r < size; r++)
                    region(r, want + (size_t)r * REG);
                long m = io_read_raw(p, got, n + 1);
                CHECK(m == (long)n, "stdio reads %ld bytes, expected %zu", m, n);
                if (m == (long)n)
                    IO_SAME(got, want, n, "file image (stdio)");
                free(want);
                free(got);
            }
            read_region(fh, (rank + 1) % size);
            read_region(fh, rank);
            end_of_file(fh);

#ifndef SKIP_OMPI_414_BUGS
            /* Open MPI 4.1.4 (OMPIO) returns MPI_SUCCESS for a negative offset (after printing
               the EINVAL of its pread/pwrite) */
            int buf[4] = {0, 0, 0, 0};
            MPI_Status st;
            CHECK_ERR_CLASS(MPI_File_read_at(fh, -1, buf, 4, MPI_INT, &st), MPI_ERR_ARG);
            CHECK_ERR_CLASS(MPI_File_write_at(fh, -8, buf, 4, MPI_INT, &st), MPI_ERR_ARG);
#endif
            CHECK_MPI(MPI_File_close(&fh));
        }
    }
    MPI_Type_free(&vec);
    return io_finish("io_explicit");
}
