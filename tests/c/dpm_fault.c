/* ranks: 1 2 */
/* timeout: 60 */
/* A spawned child that dies after MPI_Comm_disconnect does not hurt the
   parents: two children hold the conversation, disconnect, then SIGKILL
   themselves before MPI_Finalize. The parents wait a second, then
   MPI_COMM_WORLD still works, a new spawn with its conversation succeeds,
   nothing with this run's marker is left, and the job ends normally (exit 0,
   PASS). */
#include "dpm_util.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return dpm_child_main(argc, argv, parent);

    DPM_SKIP_OMPI("dpm_fault", "aborts the whole job when a spawned process dies");
    dpm_errors_return();
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    char self[PATH_MAX];
    dpm_self_exe(self, sizeof self);

    dpm_desc d;
    dpm_desc_init(&d, MPI_COMM_WORLD, 2, DPM_ARGV_MARKER, 700);
    d.after = DPM_AFTER_KILL;
    char *args[] = {d.marker, NULL};
    MPI_Comm inter = MPI_COMM_NULL;
    int rc = MPI_Comm_spawn(self, args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_spawn returned %d (class %d): %s", rc, dpm_error_class(rc), dpm_errstr(rc));
    if (rc == MPI_SUCCESS)
        dpm_parent_talk("children killed after disconnect", MPI_COMM_WORLD, &inter, &d);
    if (wrank == 0) {
        int left = dpm_wait_marked_gone(d.marker, 5.0);
        CHECK(left == 0, "%d killed children still there after 5 s", left);
    }
    dpm_sleep_ms(1000); /* time for the launcher to see the deaths */

    int one = 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == wsize, "world allreduce after the children died: %d", sum);

    dpm_desc_init(&d, MPI_COMM_WORLD, 1, DPM_ARGV_MARKER, 701);
    inter = MPI_COMM_NULL;
    rc = MPI_Comm_spawn(self, args, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "spawn after the deaths returned %d (class %d): %s", rc, dpm_error_class(rc), dpm_errstr(rc));
    if (rc == MPI_SUCCESS)
        dpm_parent_talk("spawn after the deaths", MPI_COMM_WORLD, &inter, &d);
    return check_finish("dpm_fault");
}
