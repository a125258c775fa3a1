/* ranks: 1 2 4 */
/* timeout: 60 */
/* MPI_Comm_spawn_multiple of this binary, several commands at once:
   MPI_ARGVS_NULL with MPI_ERRCODES_IGNORE; one argv per command ("app", the
   command's index, a marker) with per-command info "env" and "wdir" and the
   errcodes (one per process, all MPI_SUCCESS); commands with different argv
   (a real list for one, MPI_ARGV_NULL-like empty list for the other); four
   commands of one process each. The other ranks pass garbage for the
   root-only arguments. Each child checks MPI_APPNUM = index of its command,
   that the children's MPI_COMM_WORLD ranks follow the command order (counts
   per command), its argv, wdir and environment; then the usual conversation
   with the parents (point-to-point, intercomm collectives, merge order) and
   MPI_Comm_disconnect on both sides. */
#include "dpm_util.h"

static int wrank, wsize;
static char self[PATH_MAX];

/* Spawns `napps` commands (all this binary) with `argvs` (or MPI_ARGVS_NULL),
   d->counts processes each and `infos`, at `root`. */
static void multi_case(const char *what, int napps, char ***argvs, MPI_Info *infos, int root, int ignore, dpm_desc *d)
{
    char *cmds[DPM_MAX_APPS];
    int total = 0, codes[16];
    for (int a = 0; a < napps; a++) {
        cmds[a] = self;
        total += d->counts[a];
    }
    for (int i = 0; i < 16; i++)
        codes[i] = -7;
    d->napps = napps;
    d->nchildren = total;
    MPI_Comm inter = MPI_COMM_NULL;
    int rc;
    if (wrank == root) {
        rc = MPI_Comm_spawn_multiple(napps, cmds, argvs, d->counts, infos, root, MPI_COMM_WORLD, &inter,
                                     ignore ? MPI_ERRCODES_IGNORE : codes);
    } else {
        char *junk_cmd[] = {"dpm-not-significant-here"};
        int junk_n[] = {9};
        MPI_Info junk_info[] = {MPI_INFO_NULL};
        rc = MPI_Comm_spawn_multiple(1, junk_cmd, MPI_ARGVS_NULL, junk_n, junk_info, root, MPI_COMM_WORLD, &inter,
                                     ignore ? MPI_ERRCODES_IGNORE : codes);
    }
    CHECK(rc == MPI_SUCCESS, "%s: MPI_Comm_spawn_multiple returned %d (class %d): %s", what, rc, dpm_error_class(rc), dpm_errstr(rc));
    if (rc != MPI_SUCCESS)
        return;
    if (!ignore)
        dpm_check_errcodes_ok(what, codes, total);
    dpm_parent_talk(what, MPI_COMM_WORLD, &inter, d);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return dpm_child_main(argc, argv, parent);

    dpm_init_argv_list();
    dpm_errors_return();
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    dpm_self_exe(self, sizeof self);
    MPI_Comm nullp = MPI_COMM_WORLD;
    MPI_Comm_get_parent(&nullp);
    CHECK(nullp == MPI_COMM_NULL, "MPI_Comm_get_parent in a job started by mpiexec is not MPI_COMM_NULL");

    dpm_desc d;
    MPI_Info infos[DPM_MAX_APPS];
    char idx[DPM_MAX_APPS][8];
    char **argvs[DPM_MAX_APPS];
    char *app_argv[DPM_MAX_APPS][5];
    char dir[64] = "/tmp/dpm-wdir-XXXXXX";
    if (wrank == 0)
        CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD); /* the root may be another rank */

    /* 1. two commands (1 + 2 processes), no arguments at all */
    dpm_desc_init(&d, MPI_COMM_WORLD, 0, DPM_ARGV_NULL, 11);
    d.counts[0] = 1;
    d.counts[1] = 2;
    d.argv_kind[1] = DPM_ARGV_NULL;
    for (int a = 0; a < 2; a++)
        infos[a] = MPI_INFO_NULL;
    multi_case("argvs null", 2, MPI_ARGVS_NULL, infos, 0, 1, &d);

    /* the argv of command a: "app", a, marker */
    for (int a = 0; a < DPM_MAX_APPS; a++) {
        snprintf(idx[a], sizeof idx[a], "%d", a);
        app_argv[a][0] = "app";
        app_argv[a][1] = idx[a];
        app_argv[a][2] = d.marker;
        app_argv[a][3] = NULL;
        argvs[a] = app_argv[a];
    }

    /* 2. three commands (2 + 1 + 1), each its own argv and environment, the middle one its own wdir */
    dpm_desc_init(&d, MPI_COMM_WORLD, 0, DPM_ARGV_APP, 12);
    d.parent_high = 1;
    int c2[] = {2, 1, 1};
    for (int a = 0; a < 3; a++) {
        d.counts[a] = c2[a];
        d.argv_kind[a] = DPM_ARGV_APP;
        snprintf(d.env[a], DPM_STR, "DPM_APP=%d\nDPM_MULTI=same for all", a);
        infos[a] = a == 1 ? dpm_info("env", d.env[a], "wdir", dir) : dpm_info("env", d.env[a], NULL, NULL);
    }
    snprintf(d.wdir[1], DPM_STR, "%s", dir);
    multi_case("3 commands", 3, argvs, infos, wsize - 1, 0, &d);
    for (int a = 0; a < 3; a++)
        dpm_info_free(&infos[a]);

    /* 3. two commands with different argv: the long list, and an empty one */
    dpm_desc_init(&d, MPI_COMM_WORLD, 0, DPM_ARGV_LIST, 13);
    char *empty[] = {NULL};
    char **mixed[] = {dpm_argv_list, empty};
    d.counts[0] = 1;
    d.counts[1] = 1;
    d.argv_kind[1] = DPM_ARGV_NULL;
    infos[0] = infos[1] = MPI_INFO_NULL;
    multi_case("mixed argv", 2, mixed, infos, wsize > 1 ? 1 : 0, 0, &d);

    /* 4. four commands of one process each */
    dpm_desc_init(&d, MPI_COMM_WORLD, 0, DPM_ARGV_APP, 14);
    for (int a = 0; a < 4; a++) {
        d.counts[a] = 1;
        d.argv_kind[a] = DPM_ARGV_APP;
        infos[a] = MPI_INFO_NULL;
    }
    multi_case("4 commands", 4, argvs, infos, 0, 0, &d);

    if (wrank == 0) {
        rmdir(dir);
        int left = dpm_wait_marked_gone(d.marker, 5.0);
        CHECK(left == 0, "%d children still running 5 s after their disconnect", left);
    }
    return check_finish("dpm_spawn_multiple");
}
