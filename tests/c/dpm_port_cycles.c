/* ranks: 2 4 */
/* timeout: 60 */
/* Accept/connect/disconnect cycles within one job: MPI_COMM_WORLD split in
   halves, DPM_CYCLES (default 100) times the first half accepts and the
   second connects; even cycles reuse one long-lived port, odd cycles open a
   fresh port and close it afterwards. Each cycle: a message each way between
   the roots, an intercomm allreduce, MPI_Comm_disconnect. After a few warm-up
   cycles every rank takes a snapshot of its descriptors, resident memory,
   shared-memory mappings and the host's /dev/shm/baton* entries; at the end
   none may have grown beyond a small slack. Prints the time per cycle. */
#include "dpm_util.h"

enum { WARMUP = 5, TAG_PORT = 100 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    dpm_errors_return();
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    int na = (wsize + 1) / 2;
    int side = wrank < na ? 0 : 1;
    int bworld = na; /* B's root in MPI_COMM_WORLD */
    MPI_Comm half;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, side, wrank, &half));
    int hrank;
    MPI_Comm_rank(half, &hrank);
    int cycles = dpm_env_int("DPM_CYCLES", 100);
    if (cycles < WARMUP + 1)
        cycles = WARMUP + 1;

    char fixed[MPI_MAX_PORT_NAME], port[MPI_MAX_PORT_NAME];
    memset(fixed, 0, sizeof fixed);
    if (wrank == 0)
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, fixed));
    dpm_usage before;
    memset(&before, 0, sizeof before);
    double t0 = 0;
    for (int c = 0; c < cycles; c++) {
        if (c == WARMUP) {
            dpm_usage_take(&before);
            t0 = dpm_now();
        }
        DPM_TRACE("port cycle %d", c);
        int fresh = c % 2;
        if (wrank == 0) {
            if (fresh)
                CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
            else
                memcpy(port, fixed, sizeof port);
            CHECK_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, bworld, TAG_PORT, MPI_COMM_WORLD));
        } else if (wrank == bworld) {
            CHECK_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, TAG_PORT, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        }
        MPI_Comm inter = MPI_COMM_NULL;
        if (side == 0)
            CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, half, &inter));
        else
            CHECK_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, half, &inter));
        if (inter == MPI_COMM_NULL) {
            CHECK(0, "cycle %d: no intercommunicator", c);
            break;
        }
        if (hrank == 0) {
            int v = c * 2 + side, w = -1;
            CHECK_MPI(MPI_Sendrecv(&v, 1, MPI_INT, 0, 1, &w, 1, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE));
            CHECK(w == c * 2 + 1 - side, "cycle %d: got %d", c, w);
        }
        int one = 1, sum = -1, rs = -1;
        MPI_Comm_remote_size(inter, &rs);
        CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, inter));
        CHECK(sum == rs, "cycle %d: intercomm allreduce %d, remote size %d", c, sum, rs);
        dpm_disconnect("port cycle", &inter);
        if (wrank == 0 && fresh)
            CHECK_MPI(MPI_Close_port(port));
    }
    double per = (dpm_now() - t0) / (cycles - WARMUP);
    if (wrank == 0)
        CHECK_MPI(MPI_Close_port(fixed));
    dpm_usage after;
    dpm_usage_take(&after);
    if (wrank == 0)
        printf("dpm_port_cycles: %d cycles, %.2f ms per accept/connect/disconnect\n", cycles, per * 1e3);
    dpm_usage_check("port cycles", &before, &after, cycles - WARMUP);
    MPI_Comm_free(&half);
    return check_finish("dpm_port_cycles");
}
