/* The server job of tests/dpm/run.sh: rank 0 opens a port and makes it known
   either through the name service ("name SERVICE") or in a file
   ("file PATH", written under another name and renamed, so that a reader
   never sees half of it); the whole job then accepts ROUNDS connections of
   the client job (a job of CLIENTS ranks), holds the conversation of
   tests/c/dpm_util.h with it and disconnects; finally unpublishes the name
   (or removes the file) and closes the port.
   Usage: server name|file SERVICE|PATH ROUNDS CLIENTS */
#include "dpm_util.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    dpm_errors_return();
    int wrank;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (argc != 5) {
        if (wrank == 0)
            fprintf(stderr, "usage: %s name|file SERVICE|PATH ROUNDS CLIENTS\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    int by_name = strcmp(argv[1], "name") == 0;
    const char *where = argv[2];
    int rounds = atoi(argv[3]), clients = atoi(argv[4]);

    char port[MPI_MAX_PORT_NAME];
    memset(port, 0, sizeof port);
    if (wrank == 0) {
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        if (by_name) {
            CHECK_MPI(MPI_Publish_name(where, MPI_INFO_NULL, port));
        } else {
            char tmp[PATH_MAX];
            snprintf(tmp, sizeof tmp, "%s.tmp", where);
            FILE *f = fopen(tmp, "w");
            CHECK(f != NULL, "cannot write %s", tmp);
            if (f) {
                fprintf(f, "%s\n", port);
                fclose(f);
                CHECK(rename(tmp, where) == 0, "rename to %s: %s", where, strerror(errno));
            }
        }
    }
    for (int r = 0; r < rounds; r++) {
        MPI_Comm inter = MPI_COMM_NULL;
        CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
        if (inter == MPI_COMM_NULL) {
            CHECK(0, "round %d: no intercommunicator", r);
            break;
        }
        int rs = -1;
        MPI_Comm_remote_size(inter, &rs);
        CHECK(rs == clients, "round %d: remote size %d, expected %d", r, rs, clients);
        char what[32];
        snprintf(what, sizeof what, "server round %d", r);
        dpm_exchange(what, inter, 0, r % 2, 1000 + r);
        dpm_disconnect(what, &inter);
    }
    if (wrank == 0) {
        if (by_name)
            CHECK_MPI(MPI_Unpublish_name(where, MPI_INFO_NULL, port));
        else
            unlink(where);
        CHECK_MPI(MPI_Close_port(port));
    }
    return check_finish("dpm_server");
}
