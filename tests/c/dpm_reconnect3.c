/* ranks: 1 3 */
/* timeout: 120 */
/* Three processes connect, disconnect and connect again, 20 times: a server
   and two clients. With 1 rank the server spawns the two clients (two jobs)
   and gives them its port name in argv; they disconnect from the spawn
   first. With 3 ranks they are ranks 0 (server) and 1, 2 of one job. Each
   round, by its number modulo 3: both clients connect together (over their
   own communicator) and the server accepts once over MPI_COMM_SELF; or
   each client connects alone over MPI_COMM_SELF, the server accepting
   twice, client 0 first; or likewise with client 1 first. On each
   intercommunicator the conversation of dpm_util.h (which merges it too),
   an allreduce, then MPI_Comm_disconnect.
   With 3 ranks, then: the three spawn three children and give them the port
   name over the spawn's intercommunicator; 20 times both jobs disconnect,
   the parents accept over MPI_COMM_WORLD and the children connect over
   theirs, and they talk. */
#include "dpm_util.h"

#define ROUNDS 20

static void talk(MPI_Comm inter, int side, int round, int which)
{
    char what[64];
    snprintf(what, sizeof what, "round %d link %d", round, which);
    dpm_exchange(what, inter, side, side, round * 4 + which);
    int v = 1 + side, sum = -1, rs;
    MPI_Comm_remote_size(inter, &rs);
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, inter));
    CHECK(sum == rs * (2 - side), "%s: allreduce %d, want %d", what, sum, rs * (2 - side));
    CHECK_MPI(MPI_Comm_disconnect(&inter));
    CHECK(inter == MPI_COMM_NULL, "%s: disconnect left the handle", what);
}

/* Both jobs of the world-to-world loop; accept says which side this is. */
static void world_loop(MPI_Comm inter, const char *port, int accept)
{
    for (int round = 0; round < ROUNDS; round++) {
        CHECK_MPI(MPI_Comm_disconnect(&inter));
        if (accept)
            CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
        else
            CHECK_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
        char what[64];
        snprintf(what, sizeof what, "world round %d", round);
        dpm_exchange(what, inter, !accept, !accept, 100 + round);
    }
    CHECK_MPI(MPI_Comm_disconnect(&inter));
}

static void server(const char *port)
{
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Comm a, b;
        if (round % 3 == 0) {
            CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &a));
            talk(a, 0, round, 0);
        } else {
            CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &a));
            CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &b));
            talk(a, 0, round, 1);
            talk(b, 0, round, 2);
        }
    }
}

/* me: 0 or 1 among the clients, which share `clients`. */
static void client(const char *port, MPI_Comm clients, int me)
{
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Comm a;
        if (round % 3 == 0) {
            CHECK_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, clients, &a));
            talk(a, 1, round, 0);
        } else {
            int first = round % 3 == 1 ? 0 : 1;
            /* The second client connects once the first has been accepted. */
            int token = 0;
            if (me != first)
                CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, first, 5, clients, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &a));
            if (me == first)
                CHECK_MPI(MPI_Send(&token, 1, MPI_INT, 1 - first, 5, clients));
            talk(a, 1, round, me == first ? 1 : 2);
        }
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    dpm_errors_return();
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        int me;
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
        if (argc > 1 && strcmp(argv[1], "world") == 0) {
            char port[MPI_MAX_PORT_NAME] = "";
            if (me == 0)
                CHECK_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 3, parent, MPI_STATUS_IGNORE));
            world_loop(parent, port, 0);
        } else {
            CHECK(argc > 1, "the client got no port name");
            CHECK_MPI(MPI_Comm_disconnect(&parent));
            if (argc > 1)
                client(argv[1], MPI_COMM_WORLD, me);
        }
        int failures = check_failures;
        MPI_Finalize();
        return failures ? 1 : 0;
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char port[MPI_MAX_PORT_NAME] = "";
    if (size == 1) {
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        char *cargv[] = {port, NULL};
        MPI_Comm inter;
        CHECK_MPI(MPI_Comm_spawn(argv[0], cargv, 2, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter, MPI_ERRCODES_IGNORE));
        CHECK_MPI(MPI_Comm_disconnect(&inter));
        server(port);
        CHECK_MPI(MPI_Close_port(port));
    } else if (size == 3) {
        MPI_Comm clients;
        if (rank == 0)
            CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank > 0, rank, &clients));
        if (rank == 0)
            server(port);
        else
            client(port, clients, rank - 1);
        CHECK_MPI(MPI_Comm_free(&clients));
        char *wargv[] = {"world", NULL};
        MPI_Comm inter;
        CHECK_MPI(MPI_Comm_spawn(argv[0], wargv, 3, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE));
        if (rank == 0)
            CHECK_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 3, inter));
        world_loop(inter, port, 1);
        if (rank == 0)
            CHECK_MPI(MPI_Close_port(port));
    } else if (rank == 0) {
        printf("SKIP dpm_reconnect3: needs 1 or 3 processes\n");
    }
    return check_finish("dpm_reconnect3");
}
