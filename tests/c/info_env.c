/* ranks: 1 3 */
/* MPI_INFO_ENV and MPI_Info_create_env (MPI 4.1, "Passing Information to MPI_INIT"): the keys
   the standard lists, where their values are known: command (this program), argv (its
   arguments, space separated), maxprocs (the number of processes started), host, arch, wdir (the
   working directory), thread_level (the level asked for at start-up). MPI_Info_create_env also
   works before MPI_Init (where maxprocs is already known to a process mpiexec started), and
   MPI_INFO_ENV cannot be changed or freed. */
#define _GNU_SOURCE
#include "check.h"
#include <limits.h>
#include <unistd.h>

static int get(MPI_Info info, const char *key, char *val, int len)
{
    int flag = 0;
    CHECK_MPI(MPI_Info_get(info, key, len - 1, val, &flag));
    return flag;
}

int main(int argc, char **argv)
{
    char v[MPI_MAX_INFO_VAL];
    MPI_Info early = MPI_INFO_NULL;
    int early_rc = MPI_Info_create_env(argc, argv, &early);

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Info late;
    CHECK_MPI(MPI_Info_create_env(argc, argv, &late));
    MPI_Info infos[2] = {MPI_INFO_ENV, late};
    for (int i = 0; i < 2; i++) {
        MPI_Info info = infos[i];
        const char *which = i ? "MPI_Info_create_env" : "MPI_INFO_ENV";
        CHECK(get(info, "command", v, sizeof v), "%s: no command", which);
        /* the program itself: the same file as argv[0] */
        char a[PATH_MAX], b[PATH_MAX];
        CHECK(realpath(v, a) && realpath(argv[0], b) && strcmp(a, b) == 0, "%s: command \"%s\", argv[0] \"%s\"", which,
              v, argv[0]);
        if (argc > 1) {
            char want[MPI_MAX_INFO_VAL] = "";
            for (int j = 1; j < argc; j++) {
                if (j > 1)
                    strcat(want, " ");
                strcat(want, argv[j]);
            }
            CHECK(get(info, "argv", v, sizeof v) && strcmp(v, want) == 0, "%s: argv \"%s\", expected \"%s\"", which, v,
                  want);
        }
        CHECK(get(info, "maxprocs", v, sizeof v) && atoi(v) == size, "%s: maxprocs \"%s\", %d processes", which, v,
              size);
        char host[MPI_MAX_PROCESSOR_NAME];
        int len;
        MPI_Get_processor_name(host, &len);
        CHECK(get(info, "host", v, sizeof v) && strcmp(v, host) == 0, "%s: host \"%s\", processor \"%s\"", which, v,
              host);
        CHECK(get(info, "arch", v, sizeof v) && v[0], "%s: no arch", which);
        char cwd[PATH_MAX];
        CHECK(get(info, "wdir", v, sizeof v) && getcwd(cwd, sizeof cwd) && strcmp(v, cwd) == 0,
              "%s: wdir \"%s\", cwd \"%s\"", which, v, cwd);
        CHECK(get(info, "thread_level", v, sizeof v) && strcmp(v, "MPI_THREAD_SINGLE") == 0,
              "%s: thread_level \"%s\" after MPI_Init", which, v);
    }
    MPI_Info_free(&late);

    CHECK(early_rc == MPI_SUCCESS && early != MPI_INFO_NULL, "MPI_Info_create_env before MPI_Init failed");
    if (early_rc == MPI_SUCCESS && early != MPI_INFO_NULL) {
        CHECK(get(early, "command", v, sizeof v), "before MPI_Init: no command");
        /* started by mpiexec, this process knows the job's size before MPI_Init */
        CHECK(get(early, "maxprocs", v, sizeof v) && atoi(v) == size, "before MPI_Init: maxprocs \"%s\", %d processes",
              v, size);
        MPI_Info_free(&early);
    }

    CHECK_ERR_CLASS(MPI_Info_set(MPI_INFO_ENV, "command", "x"), MPI_ERR_INFO);
    CHECK_ERR_CLASS(MPI_Info_delete(MPI_INFO_ENV, "command"), MPI_ERR_INFO);
    MPI_Info env = MPI_INFO_ENV;
    CHECK_ERR_CLASS(MPI_Info_free(&env), MPI_ERR_INFO);
    return check_finish("info_env");
}
