/* ranks: 1 2 */
/* timeout: 60 */
/* Spawns that cannot start, under MPI_ERRORS_RETURN: a missing executable
   by absolute path (with errcodes) and by a bare name not on PATH (with
   MPI_ERRCODES_IGNORE), a file that is not executable, and
   MPI_Comm_spawn_multiple where one command exists and the other does not.
   Every parent rank gets an error of class MPI_ERR_SPAWN and
   intercomm == MPI_COMM_NULL; array_of_errcodes is filled on every rank
   (the entries of processes that could not start: not MPI_SUCCESS, class
   MPI_ERR_SPAWN; those of the good command of spawn_multiple: anything); the processes of the good command of the failed
   spawn_multiple do not linger. Afterwards the parents go on: a world
   allreduce and a normal spawn with its conversation both work. */
#include "dpm_util.h"

static int wrank, wsize;
static char self[PATH_MAX];

/* The error every parent rank must see from a spawn that could not start. */
static void check_failed(const char *what, int rc, MPI_Comm inter, const int *codes, int ncodes, int from, int to)
{
    CHECK(rc != MPI_SUCCESS, "%s: the spawn succeeded", what);
    CHECK(rc == MPI_SUCCESS || dpm_error_class(rc) == MPI_ERR_SPAWN, "%s: error class %d, expected MPI_ERR_SPAWN (%d)",
          what, dpm_error_class(rc), MPI_ERR_SPAWN);
    CHECK(inter == MPI_COMM_NULL, "%s: intercomm is not MPI_COMM_NULL", what);
    /* entries [from, to) belong to processes that could not start; the others
       (a good command of a failed spawn_multiple) only have to be filled in */
    for (int i = 0; codes && i < ncodes; i++) {
        CHECK(codes[i] != -7, "%s: array_of_errcodes[%d] not filled in", what, i);
        if (i < from || i >= to || codes[i] == -7)
            continue;
        CHECK(codes[i] != MPI_SUCCESS, "%s: array_of_errcodes[%d] = MPI_SUCCESS", what, i);
        if (codes[i] != MPI_SUCCESS)
            CHECK(dpm_error_class(codes[i]) == MPI_ERR_SPAWN, "%s: array_of_errcodes[%d] has class %d", what, i,
                  dpm_error_class(codes[i]));
    }
    if (inter != MPI_COMM_NULL && rc == MPI_SUCCESS)
        MPI_Comm_disconnect(&inter);
}

/* The parents still work together after a failed spawn. */
static void check_world(const char *what)
{
    int one = 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == wsize, "after %s: world allreduce %d", what, sum);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return dpm_child_main(argc, argv, parent);

    dpm_errors_return();
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    DPM_SKIP_OMPI("dpm_spawn_errors", "aborts the whole job when a spawned program cannot start");
    dpm_self_exe(self, sizeof self);
    int codes[8];
    MPI_Comm inter;
    int rc;
    char missing[128], bare[128];
    long pid = (long)getpid();
    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    snprintf(missing, sizeof missing, "/nonexistent-dpm-dir-%ld/dpm-no-such-binary", pid);
    snprintf(bare, sizeof bare, "dpm-no-such-binary-%ld", pid);

    /* 1. absolute path that does not exist, errcodes wanted; root = last rank */
    for (int i = 0; i < 8; i++)
        codes[i] = -7;
    inter = MPI_COMM_NULL;
    rc = MPI_Comm_spawn(missing, MPI_ARGV_NULL, 2, MPI_INFO_NULL, wsize - 1, MPI_COMM_WORLD, &inter, codes);
    check_failed("missing executable", rc, inter, codes, 2, 0, 2);
    check_world("missing executable");

    /* 2. bare name looked up in PATH, errcodes ignored */
    inter = MPI_COMM_NULL;
    rc = MPI_Comm_spawn(bare, MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
    check_failed("bare missing name", rc, inter, NULL, 0, 0, 0);
    check_world("bare missing name");

    /* 3. a file that exists but cannot be executed */
    char plain[64] = "/tmp/dpm-not-exec-XXXXXX";
    if (wrank == 0) {
        int fd = mkstemp(plain);
        CHECK(fd >= 0, "mkstemp");
        if (fd >= 0) {
            CHECK(write(fd, "not a program\n", 14) == 14, "write");
            close(fd);
        }
    }
    for (int i = 0; i < 8; i++)
        codes[i] = -7;
    inter = MPI_COMM_NULL;
    rc = MPI_Comm_spawn(plain, MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes);
    check_failed("not executable", rc, inter, codes, 1, 0, 1);
    if (wrank == 0)
        unlink(plain);
    check_world("not executable");

    /* 4. spawn_multiple: this binary (2 processes, marked) and a missing one (1) */
    dpm_desc d;
    dpm_desc_init(&d, MPI_COMM_WORLD, 2, DPM_ARGV_MARKER, 40);
    char *cmds[] = {self, missing};
    char *marked[] = {d.marker, NULL};
    char **argvs[] = {marked, marked};
    int counts[] = {2, 1};
    MPI_Info infos[] = {MPI_INFO_NULL, MPI_INFO_NULL};
    for (int i = 0; i < 8; i++)
        codes[i] = -7;
    inter = MPI_COMM_NULL;
    rc = MPI_Comm_spawn_multiple(2, cmds, argvs, counts, infos, 0, MPI_COMM_WORLD, &inter, codes);
    check_failed("spawn_multiple with one missing command", rc, inter, codes, 3, 2, 3);
    check_world("spawn_multiple with one missing command");
    if (wrank == 0) {
        int left = dpm_wait_marked_gone(d.marker, 5.0);
        CHECK(left == 0, "failed spawn_multiple: %d processes of the good command still run after 5 s", left);
    }

    /* 5. the parents can still spawn */
    dpm_desc_init(&d, MPI_COMM_WORLD, 2, DPM_ARGV_MARKER, 50);
    for (int i = 0; i < 8; i++)
        codes[i] = -7;
    inter = MPI_COMM_NULL;
    rc = MPI_Comm_spawn(self, marked, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes);
    CHECK(rc == MPI_SUCCESS, "spawn after the failures returned %d (class %d): %s", rc, dpm_error_class(rc), dpm_errstr(rc));
    if (rc == MPI_SUCCESS) {
        dpm_check_errcodes_ok("spawn after the failures", codes, 2);
        dpm_parent_talk("spawn after the failures", MPI_COMM_WORLD, &inter, &d);
    }
    check_world("the last spawn");
    return check_finish("dpm_spawn_errors");
}
