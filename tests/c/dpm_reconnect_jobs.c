/* ranks: 1 */
/* timeout: 120 */
/* Three processes of three jobs connect, disconnect and connect again, 20
   times: the first process spawns two children one at a time over
   MPI_COMM_SELF (so A and B are jobs of their own that never met), each of
   the three opens a port and publishes it (MPI_Publish_name, the service
   named after the first process's pid), and the children disconnect from
   the spawn. Each round: A accepts and B connects; the first process
   accepts and A connects; B accepts and the first process connects. On
   each intercommunicator the conversation of dpm_util.h (which merges it
   too), then MPI_Comm_disconnect, after which nothing ties the two
   processes together until the next round. */
#include "dpm_util.h"

#define ROUNDS 20

enum { P, A, B };

static void service(char *buf, size_t n, const char *tag, int who)
{
    snprintf(buf, n, "dpm_reconnect_jobs-%s-%c", tag, "PAB"[who]);
}

static void lookup(const char *tag, int who, char *port)
{
    char name[128];
    service(name, sizeof name, tag, who);
    for (int i = 0; i < 5000; i++) {
        if (MPI_Lookup_name(name, MPI_INFO_NULL, port) == MPI_SUCCESS)
            return;
        dpm_sleep_ms(2);
    }
    CHECK(0, "%s was never published", name);
}

static void pair(int me, int acceptor, int connector, const char *myport, const char *theirs, int round)
{
    MPI_Comm inter;
    if (me == acceptor)
        CHECK_MPI(MPI_Comm_accept(myport, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
    else
        CHECK_MPI(MPI_Comm_connect(theirs, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
    char what[64];
    snprintf(what, sizeof what, "round %d %c-%c", round, "PAB"[acceptor], "PAB"[connector]);
    int side = me == connector;
    dpm_exchange(what, inter, side, side, round * 3 + acceptor);
    CHECK_MPI(MPI_Comm_disconnect(&inter));
}

static void run(int me, const char *tag)
{
    char mine[MPI_MAX_PORT_NAME], name[128], port[3][MPI_MAX_PORT_NAME];
    CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, mine));
    service(name, sizeof name, tag, me);
    CHECK_MPI(MPI_Publish_name(name, MPI_INFO_NULL, mine));
    for (int w = P; w <= B; w++)
        if (w != me)
            lookup(tag, w, port[w]);
    for (int round = 0; round < ROUNDS; round++) {
        static const int steps[3][2] = {{A, B}, {P, A}, {B, P}};
        for (int s = 0; s < 3; s++) {
            int acc = steps[s][0], con = steps[s][1];
            if (me == acc || me == con)
                pair(me, acc, con, mine, port[acc], round);
        }
    }
    /* Every pair met in round 0, after both had looked up every port: the
       names are no longer needed. */
    CHECK_MPI(MPI_Unpublish_name(name, MPI_INFO_NULL, mine));
    CHECK_MPI(MPI_Close_port(mine));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    dpm_errors_return();
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        CHECK(argc > 2, "the child got no role");
        if (argc > 2) {
            CHECK_MPI(MPI_Comm_disconnect(&parent));
            run(argv[1][0] == 'A' ? A : B, argv[2]);
        }
        int failures = check_failures;
        MPI_Finalize();
        return failures ? 1 : 0;
    }
    char tag[32];
    snprintf(tag, sizeof tag, "%ld", (long)getpid());
    for (int w = A; w <= B; w++) {
        char *cargv[] = {w == A ? "A" : "B", tag, NULL};
        MPI_Comm inter;
        CHECK_MPI(MPI_Comm_spawn(argv[0], cargv, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter, MPI_ERRCODES_IGNORE));
        CHECK_MPI(MPI_Comm_disconnect(&inter));
    }
    run(P, tag);
    return check_finish("dpm_reconnect_jobs");
}
