/* The client job of tests/dpm/run.sh: rank 0 finds the server's port through
   the name service ("name SERVICE", retrying MPI_ERR_NAME for up to 10 s
   while the server starts) or in a file ("file PATH", waiting for it as
   long); the whole job connects ROUNDS times to the server job (a job of
   SERVERS ranks), holds the conversation of tests/c/dpm_util.h and
   disconnects. "absent SERVICE" instead checks that the name is NOT
   published (MPI_ERR_NAME): after the server unpublished it, or under
   another BATON_NAME_DIR.
   Usage: client name|file|absent SERVICE|PATH ROUNDS SERVERS */
#include "dpm_util.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    dpm_errors_return();
    int wrank;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    if (argc != 5) {
        if (wrank == 0)
            fprintf(stderr, "usage: %s name|file|absent SERVICE|PATH ROUNDS SERVERS\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    const char *mode = argv[1], *where = argv[2];
    int rounds = atoi(argv[3]), servers = atoi(argv[4]);
    char port[MPI_MAX_PORT_NAME];
    memset(port, 0, sizeof port);

    if (strcmp(mode, "absent") == 0) {
        if (wrank == 0)
            CHECK_ERR_CLASS(MPI_Lookup_name(where, MPI_INFO_NULL, port), MPI_ERR_NAME);
        return check_finish("dpm_client");
    }

    if (wrank == 0) {
        double end = dpm_now() + 10.0;
        int found = 0;
        while (!found && dpm_now() < end) {
            if (strcmp(mode, "name") == 0) {
                int rc = MPI_Lookup_name(where, MPI_INFO_NULL, port);
                found = rc == MPI_SUCCESS;
                CHECK(found || dpm_error_class(rc) == MPI_ERR_NAME, "lookup of %s: error class %d", where,
                      dpm_error_class(rc));
            } else {
                FILE *f = fopen(where, "r");
                if (f) {
                    found = fgets(port, sizeof port, f) != NULL;
                    fclose(f);
                    port[strcspn(port, "\n")] = '\0';
                }
            }
            if (!found)
                dpm_sleep_ms(100);
        }
        CHECK(found, "no port for %s after 10 s", where);
    }
    int ok = port[0] != '\0';
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int r = 0; ok && r < rounds; r++) {
        MPI_Comm inter = MPI_COMM_NULL;
        CHECK_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
        if (inter == MPI_COMM_NULL) {
            CHECK(0, "round %d: no intercommunicator", r);
            break;
        }
        int rs = -1;
        MPI_Comm_remote_size(inter, &rs);
        CHECK(rs == servers, "round %d: remote size %d, expected %d", r, rs, servers);
        char what[32];
        snprintf(what, sizeof what, "client round %d", r);
        dpm_exchange(what, inter, 1, 1 - r % 2, 1000 + r);
        dpm_disconnect(what, &inter);
    }
    return check_finish("dpm_client");
}
