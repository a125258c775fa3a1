/* ranks: 2 3 4 */
/* timeout: 60 */
/* MPI_Open_port / MPI_Comm_accept / MPI_Comm_connect / MPI_Close_port within
   one job. MPI_COMM_WORLD is split into halves A (first ceil(n/2) ranks) and
   B; A's rank 0 opens a port (a non-empty string shorter than
   MPI_MAX_PORT_NAME) and sends it to B's last rank over MPI_COMM_WORLD. A
   accepts (root 0), B connects (root = its last rank); the other ranks pass
   a port name that must be ignored. Several rounds on the same port, then one
   on a second port open at the same time (a different name): each checks the
   intercommunicator (local group = the half, remote size = the other half),
   point-to-point, intercomm collectives, merge order (both choices of high),
   MPI_Comm_disconnect. Then the errors: connecting to the closed port and to
   "not-a-port" give class MPI_ERR_PORT on every rank of the connecting half,
   within 15 s. */
#include "dpm_util.h"

enum { ROUNDS = 4, TAG_PORT = 100, TAG_CLOSED = 101 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    dpm_errors_return();
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    int na = (wsize + 1) / 2, nb = wsize - na;
    int side = wrank < na ? 0 : 1;
    int broot = nb - 1;       /* B's connect root, as a rank of B */
    int bworld = wsize - 1;   /* the same in MPI_COMM_WORLD */
    MPI_Comm half;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, side, wrank, &half));
    int hrank;
    MPI_Comm_rank(half, &hrank);
    MPI_Group hgroup;
    MPI_Comm_group(half, &hgroup);

    char port[MPI_MAX_PORT_NAME], port2[MPI_MAX_PORT_NAME];
    char ignored[] = "dpm: not significant at this rank";
    memset(port, 0, sizeof port);
    memset(port2, 0, sizeof port2);
    if (wrank == 0) {
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        size_t len = strnlen(port, sizeof port);
        CHECK(len > 0 && len < MPI_MAX_PORT_NAME, "port name of length %zu", len);
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port2));
        CHECK(strcmp(port, port2) != 0, "two open ports share the name '%s'", port);
        CHECK_MPI(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, bworld, TAG_PORT, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Send(port2, MPI_MAX_PORT_NAME, MPI_CHAR, bworld, TAG_PORT, MPI_COMM_WORLD));
    } else if (wrank == bworld) {
        CHECK_MPI(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, TAG_PORT, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Recv(port2, MPI_MAX_PORT_NAME, MPI_CHAR, 0, TAG_PORT, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    int holder = side == 0 ? hrank == 0 : hrank == broot; /* knows the port names */

    for (int round = 0; round <= ROUNDS; round++) {
        char what[48];
        const char *p = round < ROUNDS ? port : port2;
        snprintf(what, sizeof what, "round %d (%s port)", round, round < ROUNDS ? "first" : "second");
        MPI_Comm inter = MPI_COMM_NULL;
        if (side == 0)
            CHECK_MPI(MPI_Comm_accept(holder ? p : ignored, MPI_INFO_NULL, 0, half, &inter));
        else
            CHECK_MPI(MPI_Comm_connect(holder ? p : ignored, MPI_INFO_NULL, broot, half, &inter));
        if (inter == MPI_COMM_NULL) {
            CHECK(0, "%s: no intercommunicator", what);
            continue;
        }
        int ls = -1, lr = -1, rs = -1, cmp = -1;
        MPI_Comm_size(inter, &ls);
        MPI_Comm_rank(inter, &lr);
        MPI_Comm_remote_size(inter, &rs);
        CHECK(ls == (side ? nb : na) && lr == hrank && rs == (side ? na : nb),
              "%s: side %d: size %d rank %d remote %d", what, side, ls, lr, rs);
        MPI_Group g;
        MPI_Comm_group(inter, &g);
        MPI_Group_compare(g, hgroup, &cmp);
        MPI_Group_free(&g);
        CHECK(cmp == MPI_IDENT, "%s: the local group is not the half that called", what);
        /* the acceptors first in even rounds, the connectors first in odd ones */
        int high = round % 2 == 0 ? side : 1 - side;
        dpm_exchange(what, inter, side, high, 100 + round);
        dpm_disconnect(what, &inter);
    }
    if (wrank == 0) {
        CHECK_MPI(MPI_Close_port(port));
        CHECK_MPI(MPI_Close_port(port2));
        int one = 1;
        CHECK_MPI(MPI_Send(&one, 1, MPI_INT, bworld, TAG_CLOSED, MPI_COMM_WORLD));
    }

#ifndef SKIP_OMPI_414_BUGS /* both connects hang or fail with other classes (not supported, internal) */
    /* a closed port: B tries it once A has closed it */
    if (side == 1) {
        if (hrank == broot)
            CHECK_MPI(MPI_Recv(&(int){0}, 1, MPI_INT, 0, TAG_CLOSED, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_Comm inter = MPI_COMM_NULL;
        double t0 = dpm_now();
        int rc = MPI_Comm_connect(holder ? port : ignored, MPI_INFO_NULL, broot, half, &inter);
        double dt = dpm_now() - t0;
        CHECK_ERR_CLASS(rc, MPI_ERR_PORT);
        CHECK(inter == MPI_COMM_NULL, "connect to a closed port: intercomm set");
        CHECK(dt < 15.0, "connect to a closed port took %.1f s", dt);
    }

    /* a name that is no port, on both halves */
    {
        MPI_Comm inter = MPI_COMM_NULL;
        double t0 = dpm_now();
        int rc = MPI_Comm_connect(hrank == 0 ? "not-a-port" : ignored, MPI_INFO_NULL, 0, half, &inter);
        double dt = dpm_now() - t0;
        CHECK_ERR_CLASS(rc, MPI_ERR_PORT);
        CHECK(inter == MPI_COMM_NULL, "connect to 'not-a-port': intercomm set");
        CHECK(dt < 15.0, "connect to 'not-a-port' took %.1f s", dt);
    }
#else
    if (wrank == bworld)
        CHECK_MPI(MPI_Recv(&(int){0}, 1, MPI_INT, 0, TAG_CLOSED, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
#endif

    MPI_Group_free(&hgroup);
    MPI_Comm_free(&half);
    return check_finish("dpm_ports");
}
