/* ranks: 1 2 3 */
/* timeout: 90 */
/* MPI_Intercomm_create among parents and spawned children, over peer
   communicators that span the two jobs:
   A. the parents spawn 2 children over MPI_COMM_WORLD, both sides merge the
      intercommunicator (children high), split the merged communicator into
      a parents' and a children's side and build an intercommunicator between
      the two over the merged one (tag 7); then the same with the merged
      communicator split by parity of rank (each side holds parents and
      children when there are 2 or more parents);
   B. every parent spawns 1 child of its own over MPI_COMM_SELF, so that a
      child knows no other parent and no other child; each parent merges with
      its child into a pair, and the pairs of parents 2k and 2k+1 build an
      intercommunicator over MPI_COMM_WORLD of the parents (their leaders):
      every child then talks with a parent and a child it never met.
   On each intercommunicator: the conversation of dpm_util.h (point-to-point
   each way, wildcards, collectives, merge), then MPI_Comm_free. */
#include "dpm_util.h"

#define CHILDREN 2

static void over_merged(const char *what, MPI_Comm merged, int color, int salt)
{
    int mr, ms;
    MPI_Comm_rank(merged, &mr);
    MPI_Comm_size(merged, &ms);
    MPI_Comm side, ic;
    CHECK_MPI(MPI_Comm_split(merged, color, mr, &side));
    /* The leaders: rank 0 of each side, named by their merged ranks; the
       colors are known on every member, so every member can find them. */
    int first[2] = {-1, -1};
    int *colors = malloc(sizeof(int) * ms);
    CHECK_MPI(MPI_Allgather(&color, 1, MPI_INT, colors, 1, MPI_INT, merged));
    for (int r = ms - 1; r >= 0; r--)
        first[colors[r]] = r;
    free(colors);
    CHECK(first[0] >= 0 && first[1] >= 0, "%s: a side is empty", what);
    CHECK_MPI(MPI_Intercomm_create(side, 0, merged, first[1 - color], 7, &ic));
    int rs = -1, ss;
    MPI_Comm_size(side, &ss);
    MPI_Comm_remote_size(ic, &rs);
    CHECK(rs == ms - ss, "%s: remote size %d, want %d", what, rs, ms - ss);
    dpm_exchange(what, ic, color, color, salt);
    CHECK_MPI(MPI_Comm_free(&ic));
    CHECK_MPI(MPI_Comm_free(&side));
}

/* Part A, both jobs: inter is the spawn's intercommunicator. */
static void part_a(MPI_Comm inter, int child)
{
    MPI_Comm merged;
    CHECK_MPI(MPI_Intercomm_merge(inter, child, &merged));
    over_merged("A sides", merged, child, 11);
    int mr;
    MPI_Comm_rank(merged, &mr);
    over_merged("A parity", merged, mr % 2, 12);
    CHECK_MPI(MPI_Comm_free(&merged));
    CHECK_MPI(MPI_Comm_disconnect(&inter));
}

/* Part B: pair is {parent, child} (the parent rank 0); parents pass their
   MPI_COMM_WORLD as the peer, children pass MPI_COMM_NULL (not significant). */
static void part_b(MPI_Comm pair, int parent_rank, int nparents, MPI_Comm peer)
{
    if (parent_rank + 1 >= nparents && parent_rank % 2 == 0)
        return; /* the last pair of an odd number has no partner */
    int other = parent_rank ^ 1, side = parent_rank % 2;
    MPI_Comm ic;
    CHECK_MPI(MPI_Intercomm_create(pair, 0, peer, other, 9, &ic));
    int rs = -1;
    MPI_Comm_remote_size(ic, &rs);
    CHECK(rs == 2, "B: remote size %d, want 2", rs);
    dpm_exchange("B pairs", ic, side, side, 21 + parent_rank / 2);
    CHECK_MPI(MPI_Comm_free(&ic));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    dpm_errors_return();
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        if (argc > 2 && strcmp(argv[1], "B") == 0) {
            int pr = atoi(argv[2]), np = atoi(argv[3]);
            MPI_Comm pair;
            CHECK_MPI(MPI_Intercomm_merge(parent, 1, &pair));
            part_b(pair, pr, np, MPI_COMM_NULL);
            CHECK_MPI(MPI_Comm_free(&pair));
        } else {
            part_a(parent, 1);
            parent = MPI_COMM_NULL; /* disconnected there */
        }
        if (parent != MPI_COMM_NULL)
            MPI_Comm_disconnect(&parent);
        int failures = check_failures;
        MPI_Finalize();
        return failures ? 1 : 0;
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Comm inter;
    CHECK_MPI(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, CHILDREN, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                             MPI_ERRCODES_IGNORE));
    part_a(inter, 0);

    char pr[16], np[16];
    snprintf(pr, sizeof pr, "%d", rank);
    snprintf(np, sizeof np, "%d", size);
    char *bargv[] = {"B", pr, np, NULL};
    MPI_Comm one, pair;
    CHECK_MPI(MPI_Comm_spawn(argv[0], bargv, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &one, MPI_ERRCODES_IGNORE));
    CHECK_MPI(MPI_Intercomm_merge(one, 0, &pair));
    part_b(pair, rank, size, MPI_COMM_WORLD);
    CHECK_MPI(MPI_Comm_free(&pair));
    CHECK_MPI(MPI_Comm_disconnect(&one));
    return check_finish("dpm_intercomm_spawn");
}
