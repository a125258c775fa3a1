/* ranks: 1 2 */
/* timeout: 90 */
/* Spawn/disconnect cycles: DPM_CYCLES (default 100) times, MPI_Comm_spawn of
   one child of this binary (two every tenth cycle), one message each way,
   MPI_Comm_disconnect on both sides. After a few warm-up cycles every parent
   rank takes a snapshot of its open descriptors (/proc/self/fd), resident
   memory (/proc/self/statm), shared-memory mappings (/proc/self/maps:
   /dev/shm files, memfds) and the host's /dev/shm/baton* entries; at the end
   none may have grown beyond a small slack, there must be no zombie child of
   the parent, and within 5 s no process carrying this run's marker argument
   may remain. Prints the time per cycle. With many cycles scale the timeout
   (e.g. DPM_CYCLES=1000 TIMEOUT_SCALE=10). */
#include "dpm_util.h"

enum { WARMUP = 5 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return dpm_child_main(argc, argv, parent);

    dpm_errors_return();
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    char self[PATH_MAX];
    dpm_self_exe(self, sizeof self);
    int cycles = dpm_env_int("DPM_CYCLES", 100);
    if (cycles < WARMUP + 1)
        cycles = WARMUP + 1;

    dpm_desc d;
    dpm_usage before;
    memset(&before, 0, sizeof before);
    double t0 = 0;
    for (int c = 0; c < cycles; c++) {
        if (c == WARMUP) {
            dpm_usage_take(&before);
            t0 = dpm_now();
        }
        int nc = c % 10 == 9 ? 2 : 1;
        DPM_TRACE("spawn cycle %d", c);
        dpm_desc_init(&d, MPI_COMM_WORLD, nc, DPM_ARGV_MARKER, c);
        d.after = DPM_AFTER_SHORT;
        char *args[] = {d.marker, NULL};
        int codes[2] = {-7, -7};
        MPI_Comm inter = MPI_COMM_NULL;
        int rc = MPI_Comm_spawn(self, args, nc, MPI_INFO_NULL, c % wsize, MPI_COMM_WORLD, &inter, codes);
        CHECK(rc == MPI_SUCCESS, "cycle %d: MPI_Comm_spawn returned %d (class %d): %s", c, rc, dpm_error_class(rc), dpm_errstr(rc));
        if (rc != MPI_SUCCESS)
            break;
        dpm_check_errcodes_ok("cycle", codes, nc);
        char what[32];
        snprintf(what, sizeof what, "cycle %d", c);
        dpm_parent_talk(what, MPI_COMM_WORLD, &inter, &d);
    }
    double per = (dpm_now() - t0) / (cycles - WARMUP);
    int left = dpm_wait_marked_gone(d.marker, 5.0);
    CHECK(left == 0, "%d children still running 5 s after the last disconnect", left);
    if (!check_failures) {
        dpm_usage after;
        dpm_usage_take(&after);
        if (wrank == 0)
            printf("dpm_spawn_cycles: %d cycles, %.1f ms per spawn/disconnect\n", cycles, per * 1e3);
        dpm_usage_check("spawn cycles", &before, &after, cycles - WARMUP);
    }
    return check_finish("dpm_spawn_cycles");
}
