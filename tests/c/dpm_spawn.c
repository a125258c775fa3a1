/* ranks: 1 2 4 */
/* timeout: 90 */
/* MPI_Comm_spawn of this binary over MPI_COMM_WORLD, one case after the other:
   MPI_ARGV_NULL and MPI_ERRCODES_IGNORE; a real argv (spaces, quotes, shell
   characters, an empty and a long argument) received exactly, errcodes all
   MPI_SUCCESS, the root not rank 0 and the other ranks passing garbage for the
   root-only arguments; info "wdir" (child's getcwd) and "env"
   (NAME=VALUE lines in the child's environment); "path" with a bare command
   name and "host" = this host; "soft"; "map_by" block and cyclic; 8 children.
   For each: the parents' intercommunicator (local group = MPI_COMM_WORLD,
   remote size = children), the children's MPI_COMM_WORLD (children only),
   MPI_Comm_get_parent (remote size = parents), MPI_APPNUM 0 and
   MPI_UNIVERSE_SIZE (set, >= 1) on the children, point-to-point and collectives both
   ways, MPI_Intercomm_merge order (parents high and low), MPI_Comm_disconnect
   on both sides. Also: MPI_Comm_get_parent is MPI_COMM_NULL in the parents,
   MPI_UNIVERSE_SIZE >= world size. */
#include "dpm_util.h"

static int wrank, wsize;
static char self[PATH_MAX];

/* Spawns `nc` children of this binary with `argv` and `info` at `root`; the
   other ranks pass values the standard says are ignored. Checks the errcodes
   (unless `ignore`) and holds the conversation. */
static void spawn_case(const char *what, const char *cmd, char **argv, int nc, MPI_Info info, int root, int ignore,
                       dpm_desc *d)
{
    int codes[16];
    for (int i = 0; i < 16; i++)
        codes[i] = -7;
    MPI_Comm inter = MPI_COMM_NULL;
    char *garbage[] = {"ignored", NULL};
    int rc;
    if (wrank == root)
        rc = MPI_Comm_spawn(cmd, argv, nc, info, root, MPI_COMM_WORLD, &inter, ignore ? MPI_ERRCODES_IGNORE : codes);
    else
        rc = MPI_Comm_spawn("dpm-not-significant-here", garbage, nc + 5, MPI_INFO_NULL, root, MPI_COMM_WORLD, &inter,
                            ignore ? MPI_ERRCODES_IGNORE : codes);
    CHECK(rc == MPI_SUCCESS, "%s: MPI_Comm_spawn returned %d (class %d): %s", what, rc, dpm_error_class(rc), dpm_errstr(rc));
    if (rc != MPI_SUCCESS)
        return;
    if (!ignore)
        dpm_check_errcodes_ok(what, codes, nc);
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

    int flag = 0, *usize = NULL;
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &usize, &flag));
#ifdef SKIP_OMPI_414_BUGS /* universe = slots (cores), less than an oversubscribed world */
    int umin = 1;
#else
    int umin = wsize;
#endif
    CHECK(flag && usize && *usize >= umin, "MPI_UNIVERSE_SIZE %s %d, world size %d", flag ? "" : "(unset)",
          flag && usize ? *usize : -1, wsize);

    dpm_desc d;

    /* 1. the plainest spawn */
    dpm_desc_init(&d, MPI_COMM_WORLD, 1, DPM_ARGV_NULL, 1);
    spawn_case("argv null", self, MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, 1, &d);

    /* 2. a real argv, last rank as root, parents high in the merge */
    dpm_desc_init(&d, MPI_COMM_WORLD, 2, DPM_ARGV_LIST, 2);
    d.parent_high = 1;
    spawn_case("argv list", self, dpm_argv_list, 2, MPI_INFO_NULL, wsize - 1, 0, &d);

    /* 3. wdir and env (rank 0 makes the directory and is the root) */
    dpm_desc_init(&d, MPI_COMM_WORLD, 2, DPM_ARGV_MARKER, 3);
    char dir[64] = "/tmp/dpm-wdir-XXXXXX";
    if (wrank == 0)
        CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(d.wdir[0], DPM_STR, "%s", dir);
    snprintf(d.env[0], DPM_STR, "DPM_SPAWN_A=hello world\nDPM_SPAWN_B=x=y;z\nDPM_SPAWN_C=");
    MPI_Info info = dpm_info("wdir", dir, "env", d.env[0]);
    char *marker_argv[] = {d.marker, NULL};
    spawn_case("wdir env", self, marker_argv, 2, info, 0, 0, &d);
    dpm_info_free(&info);
    if (wrank == 0)
        rmdir(dir);

    /* 4. path + bare name, host = this host */
    dpm_desc_init(&d, MPI_COMM_WORLD, 1, DPM_ARGV_MARKER, 4);
    char dirname_[PATH_MAX], host[256];
    snprintf(dirname_, sizeof dirname_, "%s", self);
    char *slash = strrchr(dirname_, '/');
    const char *base = slash ? slash + 1 : self;
    if (slash)
        *slash = '\0';
    gethostname(host, sizeof host);
    host[sizeof host - 1] = '\0';
#ifdef SKIP_OMPI_414_BUGS /* it ignores "path": executable not found, job aborted */
    base = self;
    info = dpm_info("host", host, NULL, NULL);
#else
    info = dpm_info("path", dirname_, "host", host);
#endif
    spawn_case("path host", base, marker_argv, 1, info, wsize > 1 ? 1 : 0, 0, &d);
    dpm_info_free(&info);

    /* 5. soft: any of 1..3 processes is acceptable; the errcodes tell how many started */
    {
        dpm_desc_init(&d, MPI_COMM_WORLD, 3, DPM_ARGV_MARKER, 5);
        info = dpm_info("soft", "1:3", NULL, NULL);
        int codes[3] = {-7, -7, -7};
        MPI_Comm inter = MPI_COMM_NULL;
        int rc = MPI_Comm_spawn(self, marker_argv, 3, info, 0, MPI_COMM_WORLD, &inter, codes);
        CHECK(rc == MPI_SUCCESS, "soft: MPI_Comm_spawn returned %d: %s", rc, dpm_errstr(rc));
        if (rc != MPI_SUCCESS)
            inter = MPI_COMM_NULL;
        int rs = 0, ok = 0;
        if (inter != MPI_COMM_NULL)
            MPI_Comm_remote_size(inter, &rs);
        for (int i = 0; i < 3; i++)
            ok += codes[i] == MPI_SUCCESS;
        CHECK(rs >= 1 && rs <= 3 && ok == rs, "soft 1:3: %d children, %d MPI_SUCCESS errcodes", rs, ok);
        d.nchildren = d.counts[0] = rs;
        dpm_parent_talk("soft", MPI_COMM_WORLD, &inter, &d);
        dpm_info_free(&info);
    }

    /* 6, 7. map_by block / cyclic: placement only, the conversation is the same */
    const char *maps[] = {"block", "cyclic"};
#ifdef SKIP_OMPI_414_BUGS /* its map_by words are slot, node, ...: "block" is refused */
    for (int m = 0; m < 0; m++) {
#else
    for (int m = 0; m < 2; m++) {
#endif
        char what[32];
        snprintf(what, sizeof what, "map_by %s", maps[m]);
        dpm_desc_init(&d, MPI_COMM_WORLD, 2, DPM_ARGV_MARKER, 6 + m);
        d.parent_high = m;
        info = dpm_info("map_by", maps[m], NULL, NULL);
        spawn_case(what, self, marker_argv, 2, info, m % wsize, 0, &d);
        dpm_info_free(&info);
    }

    /* 8. eight children (12 processes with 4 parents) */
    dpm_desc_init(&d, MPI_COMM_WORLD, 8, DPM_ARGV_MARKER, 8);
    spawn_case("8 children", self, marker_argv, 8, MPI_INFO_NULL, wsize / 2, 0, &d);

    /* nobody left behind */
    if (wrank == 0) {
        int left = dpm_wait_marked_gone(d.marker, 5.0);
        CHECK(left == 0, "%d children still running 5 s after their disconnect", left);
    }
    return check_finish("dpm_spawn");
}
