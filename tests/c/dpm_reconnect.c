/* ranks: 1 2 */
/* timeout: 60 */
/* The same two jobs connected again and again: the parents open a port,
   spawn two children and give them the port name in the descriptor; after
   the spawn conversation and MPI_Comm_disconnect, the children connect to
   the port three times (the parents accept over MPI_COMM_WORLD), each time
   the full conversation (merge order alternating) and MPI_Comm_disconnect.
   What a disconnect tears down between two jobs must not spoil the next
   connection between the same processes. */
#include "dpm_util.h"

enum { RECONNECTS = 3 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return dpm_child_main(argc, argv, parent);

    dpm_errors_return();
    int wrank;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    char self[PATH_MAX];
    dpm_self_exe(self, sizeof self);

    dpm_desc d;
    dpm_desc_init(&d, MPI_COMM_WORLD, 2, DPM_ARGV_MARKER, 1100);
    d.reconnects = RECONNECTS;
    if (wrank == 0)
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, d.port));
    char *args[] = {d.marker, NULL};
    MPI_Comm inter = MPI_COMM_NULL;
    int rc = MPI_Comm_spawn(self, args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_spawn returned %d (class %d): %s", rc, dpm_error_class(rc), dpm_errstr(rc));
    if (rc == MPI_SUCCESS) {
        dpm_parent_talk("spawn", MPI_COMM_WORLD, &inter, &d);
        for (int r = 0; r < RECONNECTS; r++) {
            char what[32];
            snprintf(what, sizeof what, "parent reconnect %d", r);
            MPI_Comm c = MPI_COMM_NULL;
            CHECK_MPI(MPI_Comm_accept(d.port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c));
            if (c == MPI_COMM_NULL)
                break;
            int rs = -1;
            MPI_Comm_remote_size(c, &rs);
            CHECK(rs == 2, "%s: remote size %d, expected the 2 children", what, rs);
            dpm_exchange(what, c, 0, 1 - r % 2, d.salt + 1 + r);
            int cf = dpm_remote_failures(c);
            if (wrank == 0)
                CHECK(cf == 0, "%s: the children reported %d failed check(s)", what, cf);
            dpm_disconnect(what, &c);
        }
    }
    if (wrank == 0) {
        CHECK_MPI(MPI_Close_port(d.port));
        int left = dpm_wait_marked_gone(d.marker, 5.0);
        CHECK(left == 0, "%d children still running 5 s after their last disconnect", left);
    }
    return check_finish("dpm_reconnect");
}
