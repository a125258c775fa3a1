/* ranks: 1 2 3 */
/* timeout: 120 */
/* Connect and disconnect between groups that span jobs: the parents spawn 3
   children, both sides merge the intercommunicator (children high) and
   split the merged communicator by parity of rank, so that each half holds
   parents and children (with 1 parent: the parent and a child against two
   children). Merged rank 0 opens a port and broadcasts its name; then the
   spawn's intercommunicator and the merged communicator are disconnected,
   and 20 times the even half accepts, the odd half connects (over their
   split communicators), they hold the conversation of dpm_util.h and
   disconnect. */
#include "dpm_util.h"

#define CHILDREN 3
#define ROUNDS 20

static void body(MPI_Comm inter, int child)
{
    MPI_Comm merged, half;
    CHECK_MPI(MPI_Intercomm_merge(inter, child, &merged));
    int mr;
    MPI_Comm_rank(merged, &mr);
    int odd = mr % 2;
    CHECK_MPI(MPI_Comm_split(merged, odd, mr, &half));
    char port[MPI_MAX_PORT_NAME] = "";
    if (mr == 0)
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
    CHECK_MPI(MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, merged));
    CHECK_MPI(MPI_Comm_disconnect(&inter));
    CHECK_MPI(MPI_Comm_disconnect(&merged));
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Comm ic;
        if (odd)
            CHECK_MPI(MPI_Comm_connect(port, MPI_INFO_NULL, 0, half, &ic));
        else
            CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, half, &ic));
        char what[32];
        snprintf(what, sizeof what, "round %d", round);
        dpm_exchange(what, ic, odd, odd, round);
        CHECK_MPI(MPI_Comm_disconnect(&ic));
    }
    if (mr == 0)
        CHECK_MPI(MPI_Close_port(port));
    CHECK_MPI(MPI_Comm_free(&half));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    dpm_errors_return();
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        body(parent, 1);
        int failures = check_failures;
        MPI_Finalize();
        return failures ? 1 : 0;
    }
    MPI_Comm inter;
    CHECK_MPI(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, CHILDREN, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                             MPI_ERRCODES_IGNORE));
    body(inter, 0);
    return check_finish("dpm_reconnect_split");
}
