/* ranks: 3 4 */
/* timeout: 90 */
/* Spawns that overlap other traffic and other spawns:
   1. the first n-2 ranks spawn children three times over their own
      sub-communicator (the full conversation each time) while the last two
      ranks ping-pong over MPI_COMM_WORLD with checked data, until world rank
      0 tells them to stop;
   2. MPI_COMM_WORLD split into even and odd ranks, both halves spawn at the
      same time (2 children for the even half, 1 for the odd), each talks to
      its own children only (their remote size is their half's size, the data
      carries the half's salt), twice;
   3. every rank spawns one child over MPI_COMM_SELF at the same time.
   MPI_COMM_WORLD still works after each part (allreduce). */
#include "dpm_util.h"

enum { TAG_STOP = 900, TAG_PING = 901, PING_BYTES = 4096 };

static int wrank, wsize;
static char self[PATH_MAX];

static void spawn_and_talk(const char *what, MPI_Comm comm, int nc, int salt)
{
    dpm_desc d;
    dpm_desc_init(&d, comm, nc, DPM_ARGV_MARKER, salt);
    char *args[] = {d.marker, NULL};
    int codes[4] = {-7, -7, -7, -7};
    MPI_Comm inter = MPI_COMM_NULL;
    int rc = MPI_Comm_spawn(self, args, nc, MPI_INFO_NULL, 0, comm, &inter, codes);
    CHECK(rc == MPI_SUCCESS, "%s: MPI_Comm_spawn returned %d (class %d): %s", what, rc, dpm_error_class(rc), dpm_errstr(rc));
    if (rc != MPI_SUCCESS)
        return;
    dpm_check_errcodes_ok(what, codes, nc);
    dpm_parent_talk(what, comm, &inter, &d);
}

static void check_world(const char *what)
{
    int one = 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == wsize, "after %s: world allreduce %d", what, sum);
}

/* The two last ranks: ping-pong until world rank 0 says stop (the lower one
   watches for it and passes it on in its next ping). Returns the round count. */
static int ping_pong(void)
{
    int lower = wsize - 2, partner = wrank == lower ? wsize - 1 : lower;
    unsigned char buf[PING_BYTES + 1];
    int rounds = 0;
    for (;;) {
        int stop = 0;
        if (wrank == lower) {
            int flag = 0;
            CHECK_MPI(MPI_Iprobe(0, TAG_STOP, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            if (flag) {
                CHECK_MPI(MPI_Recv(&stop, 1, MPI_INT, 0, TAG_STOP, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                stop = 1;
            }
            check_fill(buf, PING_BYTES, rounds);
            buf[PING_BYTES] = (unsigned char)stop;
            CHECK_MPI(MPI_Send(buf, PING_BYTES + 1, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(buf, PING_BYTES + 1, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            CHECK_MPI(MPI_Recv(buf, PING_BYTES + 1, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(check_verify(buf, PING_BYTES, rounds) < 0, "ping %d corrupt", rounds);
            stop = buf[PING_BYTES];
            check_fill(buf, PING_BYTES, rounds + 7);
            buf[PING_BYTES] = (unsigned char)stop;
            CHECK_MPI(MPI_Send(buf, PING_BYTES + 1, MPI_BYTE, partner, TAG_PING, MPI_COMM_WORLD));
        }
        if (wrank == lower) {
            CHECK(check_verify(buf, PING_BYTES, rounds + 7) < 0, "pong %d corrupt", rounds);
            stop = buf[PING_BYTES];
        }
        rounds++;
        if (stop)
            return rounds;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return dpm_child_main(argc, argv, parent);

    dpm_errors_return();
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    dpm_self_exe(self, sizeof self);
    if (wsize < 3) {
        CHECK(0, "needs 3 or more ranks");
        return check_finish("dpm_concurrent");
    }

    /* 1. spawns beside a ping-pong */
    int spawner = wrank < wsize - 2;
    MPI_Comm sub;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, spawner, wrank, &sub));
    if (spawner) {
        for (int i = 0; i < 3; i++)
            spawn_and_talk("spawn beside a ping-pong", sub, 2, 400 + i);
        if (wrank == 0)
            CHECK_MPI(MPI_Send(&(int){1}, 1, MPI_INT, wsize - 2, TAG_STOP, MPI_COMM_WORLD));
    } else {
        int rounds = ping_pong();
        CHECK(rounds >= 1, "ping-pong: %d rounds", rounds);
    }
    MPI_Comm_free(&sub);
    check_world("spawns beside a ping-pong");

    /* 2. two halves spawn at the same time */
    MPI_Comm half;
    int odd = wrank % 2;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, odd, wrank, &half));
    for (int round = 0; round < 2; round++)
        spawn_and_talk(odd ? "odd half spawns" : "even half spawns", half, odd ? 1 : 2, 500 + round * 2 + odd);
    MPI_Comm_free(&half);
    check_world("concurrent spawns of two halves");

    /* 3. every rank alone */
    spawn_and_talk("spawn over MPI_COMM_SELF", MPI_COMM_SELF, 1, 600 + wrank);
    check_world("concurrent spawns over MPI_COMM_SELF");

    return check_finish("dpm_concurrent");
}
