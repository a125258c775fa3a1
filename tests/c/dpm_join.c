/* ranks: 2 4 */
/* timeout: 60 */
/* MPI_Comm_join: world ranks pair up (2k, 2k+1); the even one listens on an
   ephemeral TCP port of 127.0.0.1 and sends the port number with MPI_Send,
   the odd one connects; both call MPI_Comm_join on their end of the socket.
   The result is an intercommunicator of local size 1 and remote size 1 whose
   remote process is the partner (the conversation: point-to-point both ways,
   intercomm collectives, merge order), then MPI_Comm_disconnect. Two rounds
   on fresh sockets, pairs joining at the same time with 4 ranks. */
#include "dpm_util.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* The even rank's listening socket; its port goes to `partner`. */
static int listen_and_tell(int partner)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(ls >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t alen = sizeof a;
    CHECK(bind(ls, (struct sockaddr *)&a, sizeof a) == 0, "bind: %s", strerror(errno));
    CHECK(listen(ls, 1) == 0, "listen: %s", strerror(errno));
    CHECK(getsockname(ls, (struct sockaddr *)&a, &alen) == 0, "getsockname: %s", strerror(errno));
    int port = ntohs(a.sin_port);
    CHECK_MPI(MPI_Send(&port, 1, MPI_INT, partner, 1, MPI_COMM_WORLD));
    return ls;
}

static int connect_to(int partner)
{
    int port = 0;
    CHECK_MPI(MPI_Recv(&port, 1, MPI_INT, partner, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    CHECK(connect(s, (struct sockaddr *)&a, sizeof a) == 0, "connect to port %d: %s", port, strerror(errno));
    return s;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    dpm_errors_return();
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    int side = wrank % 2, partner = wrank ^ 1;
    if (partner >= wsize) {
        CHECK(0, "needs an even number of ranks");
        return check_finish("dpm_join");
    }

    for (int round = 0; round < 2; round++) {
        char what[48];
        snprintf(what, sizeof what, "join round %d, ranks %d+%d", round, wrank & ~1, wrank | 1);
        int fd;
        if (side == 0) {
            int ls = listen_and_tell(partner);
            fd = accept(ls, NULL, NULL);
            CHECK(fd >= 0, "accept: %s", strerror(errno));
            close(ls);
        } else {
            fd = connect_to(partner);
        }
        MPI_Comm inter = MPI_COMM_NULL;
        CHECK_MPI(MPI_Comm_join(fd, &inter));
        if (inter == MPI_COMM_NULL) {
            CHECK(0, "%s: MPI_Comm_join gave MPI_COMM_NULL", what);
            close(fd);
            continue;
        }
        int ls = -1, rs = -1, lr = -1;
        MPI_Comm_size(inter, &ls);
        MPI_Comm_rank(inter, &lr);
        MPI_Comm_remote_size(inter, &rs);
        CHECK(ls == 1 && lr == 0 && rs == 1, "%s: local size %d rank %d remote size %d", what, ls, lr, rs);
        /* the remote process is the partner: its world rank comes over the new communicator */
        int theirs = -1;
        CHECK_MPI(MPI_Sendrecv(&wrank, 1, MPI_INT, 0, 3, &theirs, 1, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE));
        CHECK(theirs == partner, "%s: joined world rank %d, expected %d", what, theirs, partner);
        dpm_exchange(what, inter, side, round == 0 ? side : 1 - side, 200 + round * 10 + wrank / 2);
        dpm_disconnect(what, &inter);
        close(fd);
    }
    return check_finish("dpm_join");
}
