/* ranks: 2 3 4 5 8 */
/* Intercommunicators: MPI_Intercomm_create (leaders at either end of the
   groups, over MPI_COMM_WORLD and over a duplicate of it), test_inter, size,
   rank, remote size, local and remote groups, compare, merge with every
   combination of `high` (order checked), dup, idup, split and create on
   intercommunicators (MPI_COMM_NULL where the standard says), names and
   attributes, MPI_Intercomm_create_from_groups, free, and the errors: calls
   that need an intracommunicator (or an intercommunicator), bad leaders. */
#include "inter_util.h"

static int n, wrank;

/* The world ranks of a group, through MPI_Group_translate_ranks. */
static void world_ranks(MPI_Group g, int *out, int cnt)
{
    MPI_Group wg;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int in[64];
    for (int i = 0; i < cnt; i++)
        in[i] = i;
    CHECK_MPI(MPI_Group_translate_ranks(g, cnt, in, wg, out));
    MPI_Group_free(&wg);
}

/* The local and remote groups of `inter` must be sides `side` and 1-side. */
static void check_groups(const char *what, int kind, int side, MPI_Comm inter)
{
    int flag = -1, size = -1, rank = -1, rsize = -1, w[64];
    CHECK_MPI(MPI_Comm_test_inter(inter, &flag));
    CHECK(flag == 1, "%s %s: test_inter %d", what, iu_kind_name(kind), flag);
    CHECK_MPI(MPI_Comm_size(inter, &size));
    CHECK_MPI(MPI_Comm_rank(inter, &rank));
    CHECK_MPI(MPI_Comm_remote_size(inter, &rsize));
    CHECK(size == iu_size(kind, side, n), "%s %s: size %d", what, iu_kind_name(kind), size);
    CHECK(rank == iu_local(kind, wrank), "%s %s: rank %d", what, iu_kind_name(kind), rank);
    CHECK(rsize == iu_size(kind, 1 - side, n), "%s %s: remote size %d", what, iu_kind_name(kind), rsize);
    MPI_Group lg, rg;
    CHECK_MPI(MPI_Comm_group(inter, &lg));
    CHECK_MPI(MPI_Comm_remote_group(inter, &rg));
    int gs = -1;
    MPI_Group_size(rg, &gs);
    CHECK(gs == rsize, "%s: remote group size %d", what, gs);
    world_ranks(rg, w, rsize);
    for (int r = 0; r < rsize; r++)
        CHECK(w[r] == iu_world(kind, 1 - side, r), "%s %s: remote rank %d is world %d", what, iu_kind_name(kind), r,
              w[r]);
    world_ranks(lg, w, size);
    for (int r = 0; r < size; r++)
        CHECK(w[r] == iu_world(kind, side, r), "%s %s: local rank %d is world %d", what, iu_kind_name(kind), r, w[r]);
    MPI_Group_free(&lg);
    MPI_Group_free(&rg);
}

/* One int from each local rank to each remote rank and back: the intercommunicator carries
   point-to-point traffic to the right processes. */
static void check_traffic(const char *what, int kind, int side, MPI_Comm inter)
{
    int size, rank, rsize;
    MPI_Comm_size(inter, &size);
    MPI_Comm_rank(inter, &rank);
    MPI_Comm_remote_size(inter, &rsize);
    MPI_Request rq[128];
    int out = wrank, in[64];
    for (int r = 0; r < rsize; r++) {
        MPI_Irecv(&in[r], 1, MPI_INT, r, 5, inter, &rq[r]);
        MPI_Isend(&out, 1, MPI_INT, r, 5, inter, &rq[rsize + r]);
    }
    CHECK_MPI(MPI_Waitall(2 * rsize, rq, MPI_STATUSES_IGNORE));
    for (int r = 0; r < rsize; r++)
        CHECK(in[r] == iu_world(kind, 1 - side, r), "%s %s: got %d from remote %d", what, iu_kind_name(kind), in[r], r);
    (void)size;
    (void)rank;
}

/* The world ranks of `comm` in rank order, gathered with point-to-point messages. */
static void order_of(MPI_Comm comm, int *out)
{
    int size, rank;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    CHECK_MPI(MPI_Allgather(&wrank, 1, MPI_INT, out, 1, MPI_INT, comm));
}

static void check_merge(int kind, int side, MPI_Comm inter)
{
    int combos[4][2] = {{0, 1}, {1, 0}, {0, 0}, {1, 1}};
    for (int c = 0; c < 4; c++) {
        int high = combos[c][side];
        MPI_Comm m;
        CHECK_MPI(MPI_Intercomm_merge(inter, high, &m));
        int size = -1, flag = -1, order[64];
        MPI_Comm_size(m, &size);
        MPI_Comm_test_inter(m, &flag);
        CHECK(size == n && flag == 0, "merge %s %d%d: size %d inter %d", iu_kind_name(kind), combos[c][0],
              combos[c][1], size, flag);
        order_of(m, order);
        /* Which side comes first: the one with high = 0; either when both agree (then
           consistently, which the allgathered order shows). */
        int first = combos[c][0] != combos[c][1] ? (combos[c][0] == 0 ? 0 : 1) : iu_side(kind, order[0]);
        int n0 = iu_size(kind, first, n);
        for (int i = 0; i < n; i++) {
            int want = i < n0 ? iu_world(kind, first, i) : iu_world(kind, 1 - first, i - n0);
            CHECK(order[i] == want, "merge %s %d%d: rank %d is world %d, expected %d", iu_kind_name(kind),
                  combos[c][0], combos[c][1], i, order[i], want);
        }
        int rank = -1;
        MPI_Comm_rank(m, &rank);
        CHECK(order[rank] == wrank, "merge: own rank %d", rank);
        int sum = -1;
        CHECK_MPI(MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, m));
        CHECK(sum == n * (n - 1) / 2, "merge: allreduce %d", sum);
        MPI_Comm_free(&m);
    }
}

/* Split with color = local rank % 3 (MPI_UNDEFINED for color 2), key = -rank: the new local
   group is this side's ranks of that color in reverse, the remote one the other side's. */
static void check_split(int kind, int side, MPI_Comm inter)
{
    int rank;
    MPI_Comm_rank(inter, &rank);
    int color = rank % 3 == 2 ? MPI_UNDEFINED : rank % 3;
    MPI_Comm s;
    CHECK_MPI(MPI_Comm_split(inter, color, -rank, &s));
    int mine[64], theirs[64], nm = 0, nt = 0;
    for (int r = iu_size(kind, side, n) - 1; r >= 0; r--)
        if (r % 3 == color)
            mine[nm++] = iu_world(kind, side, r);
    for (int r = iu_size(kind, 1 - side, n) - 1; r >= 0; r--)
        if (r % 3 == color)
            theirs[nt++] = iu_world(kind, 1 - side, r);
    if (color == MPI_UNDEFINED || nt == 0) {
        CHECK(s == MPI_COMM_NULL, "split %s: color %d expected MPI_COMM_NULL", iu_kind_name(kind), color);
        if (s != MPI_COMM_NULL)
            MPI_Comm_free(&s);
        return;
    }
    CHECK(s != MPI_COMM_NULL, "split %s: color %d gave MPI_COMM_NULL", iu_kind_name(kind), color);
    if (s == MPI_COMM_NULL)
        return;
    int flag = -1, size = -1, rs = -1, w[64];
    MPI_Comm_test_inter(s, &flag);
    MPI_Comm_size(s, &size);
    MPI_Comm_remote_size(s, &rs);
    CHECK(flag == 1 && size == nm && rs == nt, "split %s: inter %d size %d/%d remote %d/%d", iu_kind_name(kind), flag,
          size, nm, rs, nt);
    MPI_Group g;
    MPI_Comm_remote_group(s, &g);
    world_ranks(g, w, nt);
    for (int i = 0; i < nt; i++)
        CHECK(w[i] == theirs[i], "split %s: remote rank %d is world %d, expected %d", iu_kind_name(kind), i, w[i],
              theirs[i]);
    MPI_Group_free(&g);
    MPI_Comm_group(s, &g);
    world_ranks(g, w, nm);
    for (int i = 0; i < nm; i++)
        CHECK(w[i] == mine[i], "split %s: local rank %d is world %d, expected %d", iu_kind_name(kind), i, w[i],
              mine[i]);
    MPI_Group_free(&g);
    /* Traffic over the new intercommunicator: each sends its world rank to remote rank 0. */
    int got = -1, myr;
    MPI_Comm_rank(s, &myr);
    MPI_Request sr;
    CHECK_MPI(MPI_Isend(&wrank, 1, MPI_INT, 0, 9, s, &sr));
    if (myr == 0) {
        for (int i = 0; i < nt; i++) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 9, s, &st));
            CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < nt && got == theirs[st.MPI_SOURCE],
                  "split traffic: %d from %d", got, st.MPI_SOURCE);
        }
    }
    CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    MPI_Comm_free(&s);
}

/* Create with the even local ranks of each side. */
static void check_create(int kind, int side, MPI_Comm inter)
{
    int rank;
    MPI_Comm_rank(inter, &rank);
    MPI_Group lg, eg;
    MPI_Comm_group(inter, &lg);
    int range[1][3] = {{0, iu_size(kind, side, n) - 1, 2}};
    MPI_Group_range_incl(lg, 1, range, &eg);
    MPI_Comm c;
    CHECK_MPI(MPI_Comm_create(inter, eg, &c));
    if (rank % 2) {
        CHECK(c == MPI_COMM_NULL, "create %s: odd rank %d got a communicator", iu_kind_name(kind), rank);
    } else {
        CHECK(c != MPI_COMM_NULL, "create %s: even rank %d got MPI_COMM_NULL", iu_kind_name(kind), rank);
    }
    if (c != MPI_COMM_NULL) {
        int rs = -1, size = -1, r = -1, w[64];
        MPI_Comm_remote_size(c, &rs);
        MPI_Comm_size(c, &size);
        MPI_Comm_rank(c, &r);
        int want_rs = (iu_size(kind, 1 - side, n) + 1) / 2;
        CHECK(rs == want_rs && size == (iu_size(kind, side, n) + 1) / 2 && r == rank / 2,
              "create %s: remote size %d size %d rank %d", iu_kind_name(kind), rs, size, r);
        MPI_Group g;
        MPI_Comm_remote_group(c, &g);
        world_ranks(g, w, rs);
        for (int i = 0; i < rs; i++)
            CHECK(w[i] == iu_world(kind, 1 - side, 2 * i), "create %s: remote rank %d is world %d", iu_kind_name(kind),
                  i, w[i]);
        MPI_Group_free(&g);
        MPI_Comm_free(&c);
    }
    MPI_Group_free(&eg);
    /* An empty group on one side gives MPI_COMM_NULL everywhere. */
    CHECK_MPI(MPI_Comm_create(inter, side == 0 ? MPI_GROUP_EMPTY : lg, &c));
    CHECK(c == MPI_COMM_NULL, "create %s with one empty side gave a communicator", iu_kind_name(kind));
    MPI_Group_free(&lg);
}

static int copied = 0, deleted = 0;
static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c;
    (void)k;
    (void)extra;
    copied++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int k, void *v, void *extra)
{
    (void)c;
    (void)k;
    (void)v;
    (void)extra;
    deleted++;
    return MPI_SUCCESS;
}

static void check_dup_attrs(int kind, int side, MPI_Comm inter, MPI_Comm half)
{
    int key, res = -1;
    CHECK_MPI(MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL));
    static int value = 42;
    CHECK_MPI(MPI_Comm_set_attr(inter, key, &value));
    CHECK_MPI(MPI_Comm_set_name(inter, "my intercomm"));
    MPI_Comm d, i2;
    copied = deleted = 0;
    CHECK_MPI(MPI_Comm_dup(inter, &d));
    CHECK(copied == 1, "dup: copy callback ran %d times", copied);
    int *got = NULL, flag = 0;
    CHECK_MPI(MPI_Comm_get_attr(d, key, &got, &flag));
    CHECK(flag && got == &value, "dup: attribute not copied");
    char name[MPI_MAX_OBJECT_NAME];
    int len = 0;
    CHECK_MPI(MPI_Comm_get_name(inter, name, &len));
    CHECK(strcmp(name, "my intercomm") == 0, "name '%s'", name);
    check_groups("dup", kind, side, d);
    check_traffic("dup", kind, side, d);
    MPI_Comm_compare(inter, d, &res);
    CHECK(res == MPI_CONGRUENT, "compare(inter, dup) %d", res);
    MPI_Comm_compare(inter, inter, &res);
    CHECK(res == MPI_IDENT, "compare(inter, inter) %d", res);
    MPI_Comm_compare(inter, half, &res);
    CHECK(res == MPI_UNEQUAL, "compare(inter, intra) %d", res);
    MPI_Request rq;
    CHECK_MPI(MPI_Comm_idup(inter, &i2, &rq));
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    check_groups("idup", kind, side, i2);
    check_traffic("idup", kind, side, i2);
    CHECK_MPI(MPI_Comm_free(&i2));
    CHECK_MPI(MPI_Comm_free(&d));
    CHECK(copied == 2 && deleted == 2, "dup and idup: copy callback ran %d times, delete %d", copied, deleted);
    CHECK_MPI(MPI_Comm_delete_attr(inter, key));
    CHECK_MPI(MPI_Comm_free_keyval(&key));
}

static void errors(int kind, int side, MPI_Comm inter, MPI_Comm half)
{
    int v;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    CHECK_ERR_CLASS(MPI_Comm_remote_size(MPI_COMM_WORLD, &v), MPI_ERR_COMM);
    MPI_Group g;
    CHECK_ERR_CLASS(MPI_Comm_remote_group(half, &g), MPI_ERR_COMM);
    CHECK_ERR_CLASS(MPI_Intercomm_merge(half, 0, &c), MPI_ERR_COMM);
    CHECK_ERR_CLASS(MPI_Intercomm_create(inter, 0, MPI_COMM_WORLD, 0, 3, &c), MPI_ERR_COMM);
    int dims[1] = {0}, periods[1] = {0};
    CHECK_ERR_CLASS(MPI_Cart_create(inter, 1, dims, periods, 0, &c), MPI_ERR_COMM);
    /* (MPI_Comm_split_type accepts intercommunicators since MPI 4.0: comm_split_guided.c.) */
    MPI_Group lg;
    MPI_Comm_group(inter, &lg);
    CHECK_ERR_CLASS(MPI_Comm_create_group(inter, lg, 0, &c), MPI_ERR_COMM);
    MPI_Group_free(&lg);
    /* Local leader out of range: every member finds out by itself. */
    CHECK_ERR_CLASS(MPI_Intercomm_create(half, iu_size(kind, side, n), MPI_COMM_WORLD, 0, 3, &c), MPI_ERR_RANK);
    /* Remote leader out of range of peer_comm, then inside the local group: the leader
       reports it and its group hears of it from the leader. */
    CHECK_ERR_CLASS(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, n, 3, &c), MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, iu_world(kind, side, 0), 3, &c), MPI_ERR_RANK);
    /* A bad peer communicator at the leader. */
    CHECK_ERR_CLASS(MPI_Intercomm_create(half, 0, MPI_COMM_NULL, 0, 3, &c), MPI_ERR_COMM);
    CHECK(c == MPI_COMM_NULL, "a failed creation wrote newintercomm");
    /* The groups are still usable after all these. */
    check_traffic("after errors", kind, side, inter);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int flag = -1;
    MPI_Comm_test_inter(MPI_COMM_WORLD, &flag);
    CHECK(flag == 0, "test_inter(MPI_COMM_WORLD) %d", flag);
    for (int kind = 0; kind < IU_KINDS; kind++) {
        int side = iu_side(kind, wrank);
        MPI_Comm half, inter;
        iu_make(kind, 11, &half, &inter);
        MPI_Comm_test_inter(half, &flag);
        CHECK(flag == 0, "test_inter(half) %d", flag);
        check_groups("create", kind, side, inter);
        check_traffic("create", kind, side, inter);

        /* The other way round: leaders at the last rank of each side, over a duplicate of the
           world, with another tag. */
        MPI_Comm wdup, inter2;
        MPI_Comm_dup(MPI_COMM_WORLD, &wdup);
        int last = iu_size(kind, side, n) - 1;
        int rlead = iu_world(kind, 1 - side, iu_size(kind, 1 - side, n) - 1);
        CHECK_MPI(MPI_Intercomm_create(half, last, wdup, rlead, 12, &inter2));
        check_groups("create at the last ranks", kind, side, inter2);
        check_traffic("create at the last ranks", kind, side, inter2);
        int res = -1;
        MPI_Comm_compare(inter, inter2, &res);
        CHECK(res == MPI_CONGRUENT, "compare of two creations %d", res);

        check_merge(kind, side, inter);
        check_split(kind, side, inter);
        check_create(kind, side, inter);
        check_dup_attrs(kind, side, inter, half);
        errors(kind, side, inter, half);

        /* From groups alone. */
        MPI_Group wg, lg, rg;
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        int ranks[64];
        for (int r = 0; r < iu_size(kind, side, n); r++)
            ranks[r] = iu_world(kind, side, r);
        MPI_Group_incl(wg, iu_size(kind, side, n), ranks, &lg);
        for (int r = 0; r < iu_size(kind, 1 - side, n); r++)
            ranks[r] = iu_world(kind, 1 - side, r);
        MPI_Group_incl(wg, iu_size(kind, 1 - side, n), ranks, &rg);
        MPI_Comm fg;
        CHECK_MPI(MPI_Intercomm_create_from_groups(lg, 0, rg, 0, "baton-intercomm-test", MPI_INFO_NULL,
                                                   MPI_ERRORS_RETURN, &fg));
        check_groups("from groups", kind, side, fg);
        check_traffic("from groups", kind, side, fg);
        MPI_Comm fg2;
        CHECK_MPI(MPI_Intercomm_create_from_groups(lg, 0, rg, 0, "baton-intercomm-test", MPI_INFO_NULL,
                                                   MPI_ERRORS_RETURN, &fg2));
        check_traffic("from groups again", kind, side, fg2);
        CHECK_ERR_CLASS(MPI_Intercomm_create_from_groups(lg, 0, lg, 0, "x", MPI_INFO_NULL, MPI_ERRORS_RETURN, &fg2),
                        MPI_ERR_GROUP);
        CHECK_ERR_CLASS(MPI_Intercomm_create_from_groups(lg, 0, rg, n, "x", MPI_INFO_NULL, MPI_ERRORS_RETURN, &fg2),
                        MPI_ERR_RANK);
        MPI_Comm_free(&fg2);
        MPI_Comm_free(&fg);
        MPI_Group_free(&lg);
        MPI_Group_free(&rg);
        MPI_Group_free(&wg);

        CHECK_MPI(MPI_Comm_free(&inter2));
        CHECK(inter2 == MPI_COMM_NULL, "free did not reset the handle");
        MPI_Comm_free(&wdup);
        CHECK_MPI(MPI_Comm_free(&inter));
        MPI_Comm_free(&half);
    }
    return check_finish("intercomm");
}
