/* Scratch files for the MPI-IO tests (io_*.c): one directory per run, made by rank 0 under
   $TMPDIR (or /tmp) and named after rank 0's pid, whose path rank 0 broadcasts so that every
   rank opens the same files; io_scratch_end removes it with whatever the test left in it (a
   failed run leaves files behind). The tests set MPI_ERRORS_RETURN on MPI_COMM_WORLD and MPI_COMM_SELF: an
   implementation that raises file errors on the communicator instead of MPI_FILE_NULL's
   handler (the standard's place) then still reports a FAIL line instead of aborting. POSIX
   (mkdir, unlink, rmdir, getpid, opendir) is used only here, for the directory itself. */
#ifndef BATON_TESTS_IO_SCRATCH_H
#define BATON_TESTS_IO_SCRATCH_H

#include "check.h"
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static char io_dir[512];

/* Collective over MPI_COMM_WORLD. Returns 1 when the directory exists on every rank's path. */
static inline int io_scratch_begin(const char *test)
{
    int rank = 0, ok = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (rank == 0) {
        const char *base = getenv("TMPDIR");
        if (base == NULL || base[0] == '\0')
            base = "/tmp";
        snprintf(io_dir, sizeof io_dir, "%s/baton-%s-%ld", base, test, (long)getpid());
        ok = mkdir(io_dir, 0700) == 0;
        CHECK(ok, "mkdir %s: %s", io_dir, strerror(errno));
    }
    MPI_Bcast(io_dir, (int)sizeof io_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return ok;
}

/* Writes the path of scratch file `name` into out[n]. */
static inline void io_path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", io_dir, name);
}

/* Collective: every rank is done with the files before rank 0 removes them. */
static inline void io_scratch_end(void)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0)
        return;
    DIR *d = opendir(io_dir);
    if (d != NULL) {
        struct dirent *e;
        char p[1024];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(p, sizeof p, "%s/%s", io_dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    CHECK(rmdir(io_dir) == 0, "rmdir %s: %s", io_dir, strerror(errno));
}

/* MPI_File_open that reports a failure (with the error string) and returns 0 then. */
static inline int io_open(MPI_Comm comm, const char *name, int amode, MPI_Info info, MPI_File *fh)
{
    char path[1024];
    io_path(path, sizeof path, name);
    *fh = MPI_FILE_NULL;
    int rc = MPI_File_open(comm, path, amode, info, fh);
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int l = 0;
        s[0] = '\0';
        MPI_Error_string(rc, s, &l);
        CHECK(0, "MPI_File_open(%s, amode %d) returned %d (%s)", path, amode, rc, s);
        return 0;
    }
    return 1;
}

/* MPI_File_close when the handle is open (after a failed open it is MPI_FILE_NULL). */
static inline void io_close(MPI_File *fh)
{
    if (*fh != MPI_FILE_NULL)
        CHECK_MPI(MPI_File_close(fh));
}

/* Rank 0 of `comm` reads the whole file `name` (plain bytes, its own MPI_COMM_SELF open) into
   a new buffer of *len bytes; NULL (after a FAIL line) when it cannot. */
static inline unsigned char *io_slurp(const char *name, MPI_Offset *len)
{
    MPI_File fh;
    *len = 0;
    if (!io_open(MPI_COMM_SELF, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh))
        return NULL;
    CHECK_MPI(MPI_File_get_size(fh, len));
    unsigned char *buf = malloc((size_t)*len + 1);
    MPI_Status st;
    int got = -1;
    CHECK_MPI(MPI_File_read_at(fh, 0, buf, (int)*len, MPI_BYTE, &st));
    MPI_Get_count(&st, MPI_BYTE, &got);
    CHECK(got == (int)*len, "io_slurp(%s): read %d of %lld bytes", name, got, (long long)*len);
    io_close(&fh);
    return buf;
}

#endif
