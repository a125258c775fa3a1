/* Helpers of the opt-in MPI-IO tests io_files, io_explicit and io_pointers (file management and
   independent data access): the per-run directory that holds their files, values that depend
   on the writing rank and on the file offset, the on-disk image read back with stdio (so that a
   write is checked independently of the implementation's read path), and error-class checks.

   The directory is made by rank 0 under IO_TEST_DIR (a directory every rank can reach, for runs
   across hosts), else TMPDIR, else /tmp, and its path is broadcast: every rank must pass the
   same name to the collective MPI_File_open. io_finish removes it with what is left in it. */
#ifndef BATON_TESTS_IO_INDEP_H
#define BATON_TESTS_IO_INDEP_H

#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

#define IO_PATH_MAX 4096

/* room left in a path for a file name of up to 255 bytes */
static char io_dir[IO_PATH_MAX - 512];

/* Checks that MPI_FILE_NULL's error handler (the one of MPI_File_open and MPI_File_delete)
   starts as MPI_ERRORS_RETURN, then makes and broadcasts the run's directory (not made where
   that first MPI-IO call fails). Returns 1 when every rank has it. */
static inline int io_setup(void)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    int rc = MPI_File_get_errhandler(MPI_FILE_NULL, &eh);
    CHECK_MPI(rc);
    CHECK(rc != MPI_SUCCESS || eh == MPI_ERRORS_RETURN,
          "MPI_FILE_NULL's error handler is not MPI_ERRORS_RETURN at start");
    if (rc == MPI_SUCCESS && eh != MPI_ERRHANDLER_NULL)
        MPI_Errhandler_free(&eh);
    int all = 0;
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_BOR, MPI_COMM_WORLD);
    if (all != MPI_SUCCESS)
        return 0;
    memset(io_dir, 0, sizeof io_dir);
    if (rank == 0) {
        const char *base = getenv("IO_TEST_DIR");
        if (base == NULL || base[0] == '\0')
            base = getenv("TMPDIR");
        if (base == NULL || base[0] == '\0')
            base = "/tmp";
        snprintf(io_dir, sizeof io_dir, "%s/baton-io-%ld-XXXXXX", base, (long)getpid());
        if (mkdtemp(io_dir) == NULL) {
            CHECK(0, "mkdtemp(%s) failed", io_dir);
            io_dir[0] = '\0';
        }
    }
    MPI_Bcast(io_dir, (int)sizeof io_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    return io_dir[0] != '\0';
}

/* The path of file `name` in the run's directory. */
static inline void io_path(char *out, const char *name)
{
    snprintf(out, IO_PATH_MAX, "%s/%s", io_dir, name);
}

/* Removes the directory and every file left in it (a test that failed half way leaves some),
   then finalizes like check_finish. */
static inline int io_finish(const char *name)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && io_dir[0] != '\0') {
        DIR *d = opendir(io_dir);
        if (d != NULL) {
            struct dirent *e;
            char p[IO_PATH_MAX];
            while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                    continue;
                io_path(p, e->d_name);
                remove(p);
            }
            closedir(d);
        }
        CHECK(rmdir(io_dir) == 0, "cannot remove the test directory %s", io_dir);
    }
    return check_finish(name);
}

/* 1 on every rank when `ok` holds on every rank: keeps the ranks on the same path after a
   collective call that failed (on an implementation without MPI-IO every call fails). */
static inline int io_all(int ok)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

/* The byte that rank `writer` stores at file offset `off`. */
static inline unsigned char io_byte(int writer, long long off)
{
    return (unsigned char)((off * 29 + (off >> 8) * 7 + writer * 101 + 13) & 0xff);
}

/* The int and the double that rank `writer` stores as element `idx` (counted from the start of
   the file in elements of that type). */
static inline int io_int(int writer, long long idx)
{
    return (int)(writer * 1000003LL + idx * 7 + 1);
}

static inline double io_double(int writer, long long idx)
{
    return writer * 65536.0 + (double)idx + 0.25;
}

/* Compares n bytes; reports the first difference. Returns 1 when equal. */
#define IO_SAME(got, want, n, ...)                                                    \
    io_same_((const unsigned char *)(got), (const unsigned char *)(want), (size_t)(n), \
             __FILE__, __LINE__, __VA_ARGS__)
static inline int io_same_(const unsigned char *got, const unsigned char *want, size_t n,
                           const char *file, int line, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            check_failures++;
            fprintf(stderr,
                    "rank %d: FAIL %s:%d: %s: byte %zu of %zu is 0x%02x, expected 0x%02x\n",
                    check_rank(), file, line, what, i, n, got[i], want[i]);
            fflush(stderr);
            return 0;
        }
    }
    return 1;
}

/* Reads up to n bytes of the file with stdio into buf; returns the bytes read, -1 when the
   file cannot be opened. */
static inline long io_read_raw(const char *path, void *buf, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    return (long)got;
}

/* The size of the file in bytes through stdio, -1 when it cannot be opened. */
static inline long io_raw_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    fclose(f);
    return n;
}

/* The error class of rc (MPI_SUCCESS stays MPI_SUCCESS). */
static inline int io_class(int rc)
{
    int c = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    return c;
}

/* Expects an error of class c1 or c2 (where the standard allows either). */
#define IO_ERR_CLASS2(call, c1, c2)                                                   \
    do {                                                                              \
        int io_rc_ = (call);                                                          \
        int io_c_ = io_class(io_rc_);                                                 \
        CHECK(io_rc_ != MPI_SUCCESS, "%s succeeded, expected %s or %s", #call, #c1,   \
              #c2);                                                                   \
        CHECK(io_rc_ == MPI_SUCCESS || io_c_ == (c1) || io_c_ == (c2),                \
              "%s: error class %d, expected %s (%d) or %s (%d)", #call, io_c_, #c1,   \
              (int)(c1), #c2, (int)(c2));                                             \
    } while (0)

/* Checks a status: MPI_Get_count for `type` and MPI_Get_elements (basic elements). */
#define IO_STATUS(st, type, count, elements)                                          \
    do {                                                                              \
        int io_n_ = -7, io_e_ = -7;                                                   \
        CHECK_MPI(MPI_Get_count(&(st), (type), &io_n_));                              \
        CHECK_MPI(MPI_Get_elements(&(st), (type), &io_e_));                           \
        CHECK(io_n_ == (count), "MPI_Get_count: %d, expected %d", io_n_, (int)(count)); \
        CHECK(io_e_ == (elements), "MPI_Get_elements: %d, expected %d", io_e_,        \
              (int)(elements));                                                       \
    } while (0)

#endif
