/* ranks: singleton */
/* timeout: 60 */
/* Run WITHOUT mpiexec: a singleton MPI process spawns (the implementation
   has to provide whatever a launcher would): two children over
   MPI_COMM_WORLD with a real argv, then one over MPI_COMM_SELF; each time
   the full conversation (the children see one parent, their own
   MPI_COMM_WORLD, MPI_APPNUM 0) and MPI_Comm_disconnect; no child left
   afterwards. Open MPI needs OMPI_MCA_rmaps_base_oversubscribe=1 here (no
   mpiexec flags reach a singleton). */
#include "dpm_util.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return dpm_child_main(argc, argv, parent);

    dpm_init_argv_list();
    dpm_errors_return();
    int wsize = -1;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    CHECK(wsize == 1, "singleton: world size %d", wsize);
    char self[PATH_MAX];
    dpm_self_exe(self, sizeof self);

    dpm_desc d;
    dpm_desc_init(&d, MPI_COMM_WORLD, 2, DPM_ARGV_LIST, 900);
    int codes[2] = {-7, -7};
    MPI_Comm inter = MPI_COMM_NULL;
    int rc = MPI_Comm_spawn(self, dpm_argv_list, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, codes);
    CHECK(rc == MPI_SUCCESS, "singleton: MPI_Comm_spawn returned %d (class %d): %s", rc, dpm_error_class(rc), dpm_errstr(rc));
    if (rc == MPI_SUCCESS) {
        dpm_check_errcodes_ok("singleton", codes, 2);
        dpm_parent_talk("singleton, 2 children", MPI_COMM_WORLD, &inter, &d);
    }

    dpm_desc_init(&d, MPI_COMM_SELF, 1, DPM_ARGV_MARKER, 901);
    d.parent_high = 1;
    char *args[] = {d.marker, NULL};
    inter = MPI_COMM_NULL;
    rc = MPI_Comm_spawn(self, args, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "singleton over MPI_COMM_SELF: MPI_Comm_spawn returned %d (class %d): %s", rc,
          dpm_error_class(rc), dpm_errstr(rc));
    if (rc == MPI_SUCCESS)
        dpm_parent_talk("singleton over MPI_COMM_SELF", MPI_COMM_SELF, &inter, &d);
    int left = dpm_wait_marked_gone(d.marker, 5.0);
    CHECK(left == 0, "%d children still running 5 s after their disconnect", left);
    return check_finish("dpm_singleton");
}
