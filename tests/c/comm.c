/* ranks: 1 2 3 4 8 */
/* Communicators: WORLD/SELF, dup (separate context), dup_with_info, idup,
   split (UNDEFINED, key order, ties), split_type SHARED, create,
   create_group, compare, free, set/get_name, test_inter, group. */
#include "check.h"

static int rank, size;

static void check_congruent(MPI_Comm a, MPI_Comm b, const char *what)
{
    int res = -1;
    CHECK_MPI(MPI_Comm_compare(a, b, &res));
    CHECK(res == MPI_CONGRUENT, "%s: compare gave %d, expected MPI_CONGRUENT", what, res);
}

/* Messages on `dup` must never match receives on `parent` (and vice versa). */
static void check_context(MPI_Comm parent, MPI_Comm dup, const char *what)
{
    int r, s;
    MPI_Comm_rank(parent, &r);
    MPI_Comm_size(parent, &s);
    int next = (r + 1) % s, prev = (r - 1 + s) % s;
    int a = 1000 + r, b = 2000 + r, ra = -1, rb = -1;
    MPI_Request req[2];
    MPI_Status st;
    /* The dup message is sent first, with the same tag: a receive on the
       parent with wildcards must still get the parent message. */
    CHECK_MPI(MPI_Isend(&a, 1, MPI_INT, next, 5, dup, &req[0]));
    CHECK_MPI(MPI_Isend(&b, 1, MPI_INT, next, 5, parent, &req[1]));
    CHECK_MPI(MPI_Recv(&rb, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, parent, &st));
    CHECK(rb == 2000 + prev, "%s: parent receive got %d, expected %d", what, rb, 2000 + prev);
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 5, "%s: status src %d tag %d", what,
          st.MPI_SOURCE, st.MPI_TAG);
    CHECK_MPI(MPI_Recv(&ra, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &st));
    CHECK(ra == 1000 + prev, "%s: dup receive got %d, expected %d", what, ra, 1000 + prev);
    CHECK_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
}

static void check_name(MPI_Comm c, const char *expect, const char *what)
{
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    memset(name, 'x', sizeof name);
    CHECK_MPI(MPI_Comm_get_name(c, name, &len));
    CHECK(len == (int)strlen(expect) && strcmp(name, expect) == 0,
          "%s: name '%.*s' (len %d), expected '%s'", what, MPI_MAX_OBJECT_NAME - 1, name,
          len, expect);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* WORLD / SELF */
    int r = -1, s = -1;
    CHECK_MPI(MPI_Comm_size(MPI_COMM_SELF, &s));
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_SELF, &r));
    CHECK(s == 1 && r == 0, "COMM_SELF size %d rank %d", s, r);
    int all = 0;
    MPI_Allreduce(&rank, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all == size * (size - 1) / 2, "world ranks not 0..size-1 (sum %d)", all);

    /* names */
    check_name(MPI_COMM_WORLD, "MPI_COMM_WORLD", "world");
    check_name(MPI_COMM_SELF, "MPI_COMM_SELF", "self");

    /* dup */
    MPI_Comm dup = MPI_COMM_NULL;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK(dup != MPI_COMM_NULL && dup != MPI_COMM_WORLD, "dup handle");
    check_congruent(MPI_COMM_WORLD, dup, "dup");
    MPI_Comm_rank(dup, &r);
    MPI_Comm_size(dup, &s);
    CHECK(r == rank && s == size, "dup rank %d size %d", r, s);
    check_context(MPI_COMM_WORLD, dup, "dup");
    check_name(dup, "", "dup (names are not copied)");
    CHECK_MPI(MPI_Comm_set_name(dup, "my dup comm"));
    check_name(dup, "my dup comm", "dup after set_name");
    check_name(MPI_COMM_WORLD, "MPI_COMM_WORLD", "world after naming dup");
    CHECK_MPI(MPI_Comm_set_name(dup, "renamed"));
    check_name(dup, "renamed", "dup after second set_name");

    /* dup of a dup is distinct from both */
    MPI_Comm dup2;
    CHECK_MPI(MPI_Comm_dup(dup, &dup2));
    check_context(dup, dup2, "dup of dup");
    check_context(MPI_COMM_WORLD, dup2, "world vs dup of dup");

    /* dup_with_info */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "baton_test_hint", "1");
    MPI_Comm dupi = MPI_COMM_NULL;
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &dupi));
    MPI_Info_free(&info);
    CHECK(dupi != MPI_COMM_NULL, "dup_with_info gave COMM_NULL");
    check_congruent(MPI_COMM_WORLD, dupi, "dup_with_info");
    check_context(dupi, dup, "dup_with_info vs dup");
    MPI_Info got = MPI_INFO_NULL;
    CHECK_MPI(MPI_Comm_get_info(dupi, &got));
    CHECK(got != MPI_INFO_NULL, "Comm_get_info returned MPI_INFO_NULL");
    if (got != MPI_INFO_NULL)
        MPI_Info_free(&got);

    /* idup */
    MPI_Comm idup = MPI_COMM_NULL;
    MPI_Request req;
    CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &idup, &req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(req == MPI_REQUEST_NULL, "idup request not freed by Wait");
    CHECK(idup != MPI_COMM_NULL, "idup gave COMM_NULL");
    check_congruent(MPI_COMM_WORLD, idup, "idup");
    check_context(MPI_COMM_WORLD, idup, "idup");

    /* split: color rank%3 (UNDEFINED for rank%4==3), key -rank (reverse order) */
    {
        int color = (rank % 4 == 3) ? MPI_UNDEFINED : rank % 3;
        MPI_Comm sc;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, -rank, &sc));
        if (color == MPI_UNDEFINED) {
            CHECK(sc == MPI_COMM_NULL, "split with MPI_UNDEFINED did not give COMM_NULL");
        } else {
            /* members: ranks q with q%3==color and q%4!=3, in decreasing order */
            int expect_size = 0, expect_rank = -1;
            for (int q = size - 1; q >= 0; q--) {
                if (q % 4 == 3 || q % 3 != color)
                    continue;
                if (q == rank)
                    expect_rank = expect_size;
                expect_size++;
            }
            CHECK(sc != MPI_COMM_NULL, "split gave COMM_NULL for color %d", color);
            if (sc != MPI_COMM_NULL) {
                MPI_Comm_rank(sc, &r);
                MPI_Comm_size(sc, &s);
                CHECK(r == expect_rank && s == expect_size,
                      "split color %d: rank %d size %d, expected %d %d", color, r, s,
                      expect_rank, expect_size);
                /* the group maps back to world ranks in that order */
                MPI_Group g, wg;
                MPI_Comm_group(sc, &g);
                MPI_Comm_group(MPI_COMM_WORLD, &wg);
                int in[8], out[8];
                for (int i = 0; i < s && i < 8; i++)
                    in[i] = i;
                MPI_Group_translate_ranks(g, s < 8 ? s : 8, in, wg, out);
                int k = 0;
                for (int q = size - 1; q >= 0 && k < 8; q--) {
                    if (q % 4 == 3 || q % 3 != color)
                        continue;
                    CHECK(out[k] == q, "split rank %d maps to world %d, expected %d", k,
                          out[k], q);
                    k++;
                }
                MPI_Group_free(&g);
                MPI_Group_free(&wg);
                /* all-reduce over the new comm sums exactly its members */
                int one = rank, sum = -1, esum = 0;
                for (int q = 0; q < size; q++)
                    if (q % 4 != 3 && q % 3 == color)
                        esum += q;
                MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, sc);
                CHECK(sum == esum, "allreduce over split comm %d, expected %d", sum, esum);
                MPI_Comm_free(&sc);
                CHECK(sc == MPI_COMM_NULL, "Comm_free did not set handle to COMM_NULL");
            }
        }
    }

    /* split with equal keys: order follows parent rank; single color */
    {
        MPI_Comm sc;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, 0, &sc));
        MPI_Comm_rank(sc, &r);
        CHECK(r == rank, "split with tied keys: rank %d, expected %d", r, rank);
        check_congruent(MPI_COMM_WORLD, sc, "split all one color, tied keys");
        MPI_Comm_free(&sc);
        /* ties on key 1 for upper half, 0 for lower half: groups keep parent order */
        int key = rank >= size / 2 ? 0 : 1;
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 7, key, &sc));
        int expect = rank >= size / 2 ? rank - size / 2 : rank + (size - size / 2);
        MPI_Comm_rank(sc, &r);
        CHECK(r == expect, "split with two key values: rank %d, expected %d", r, expect);
        int res;
        MPI_Comm_compare(MPI_COMM_WORLD, sc, &res);
        if (size > 1)
            CHECK(res == MPI_SIMILAR, "reordered split compare %d, expected SIMILAR", res);
        else
            CHECK(res == MPI_CONGRUENT, "size-1 split compare %d, expected CONGRUENT", res);
        MPI_Comm_free(&sc);
    }

    /* split_type SHARED */
    {
        MPI_Comm sh;
        CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                                      MPI_INFO_NULL, &sh));
        CHECK(sh != MPI_COMM_NULL, "split_type SHARED gave COMM_NULL");
        if (sh != MPI_COMM_NULL) {
            MPI_Comm_size(sh, &s);
            MPI_Comm_rank(sh, &r);
            CHECK(s >= 1 && s <= size && r >= 0 && r < s, "shared comm rank %d size %d", r, s);
            /* rank order follows the key (= world rank) */
            int prevw = -1, ok = 1;
            int *w = malloc(sizeof(int) * (size_t)s);
            MPI_Allgather(&rank, 1, MPI_INT, w, 1, MPI_INT, sh);
            for (int i = 0; i < s; i++) {
                if (w[i] <= prevw)
                    ok = 0;
                prevw = w[i];
            }
            CHECK(ok && w[r] == rank, "shared comm not ordered by key");
            free(w);
            MPI_Comm_free(&sh);
        }
        CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &sh));
        CHECK(sh == MPI_COMM_NULL, "split_type MPI_UNDEFINED did not give COMM_NULL");
    }

    MPI_Group world_group;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    {
        int gs = -1, gr = -1;
        MPI_Group_size(world_group, &gs);
        MPI_Group_rank(world_group, &gr);
        CHECK(gs == size && gr == rank, "world group size %d rank %d", gs, gr);
    }

    /* create: even ranks */
    {
        int n = (size + 1) / 2;
        int *ev = malloc(sizeof(int) * (size_t)n);
        for (int i = 0; i < n; i++)
            ev[i] = 2 * i;
        MPI_Group eg;
        MPI_Group_incl(world_group, n, ev, &eg);
        MPI_Comm ec;
        CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, eg, &ec));
        if (rank % 2 == 0) {
            CHECK(ec != MPI_COMM_NULL, "Comm_create: member got COMM_NULL");
            if (ec != MPI_COMM_NULL) {
                MPI_Comm_rank(ec, &r);
                MPI_Comm_size(ec, &s);
                CHECK(r == rank / 2 && s == n, "Comm_create rank %d size %d", r, s);
                int sum = -1;
                MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, ec);
                CHECK(sum == n * (n - 1), "allreduce over created comm %d", sum);
                MPI_Comm_free(&ec);
            }
        } else {
            CHECK(ec == MPI_COMM_NULL, "Comm_create: non-member got a communicator");
        }
        MPI_Group_free(&eg);
        free(ev);
    }

    /* create_group: only odd ranks call */
    if (size >= 2) {
        int n = size / 2;
        int *od = malloc(sizeof(int) * (size_t)n);
        for (int i = 0; i < n; i++)
            od[i] = 2 * i + 1;
        MPI_Group og;
        MPI_Group_incl(world_group, n, od, &og);
        if (rank % 2 == 1) {
            MPI_Comm oc = MPI_COMM_NULL;
            CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, og, 7, &oc));
            CHECK(oc != MPI_COMM_NULL, "create_group gave COMM_NULL to a member");
            if (oc != MPI_COMM_NULL) {
                MPI_Comm_rank(oc, &r);
                MPI_Comm_size(oc, &s);
                CHECK(r == rank / 2 && s == n, "create_group rank %d size %d", r, s);
                int sum = -1;
                MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, oc);
                CHECK(sum == n * n, "allreduce over create_group comm %d, expected %d", sum, n * n);
                MPI_Comm_free(&oc);
            }
        }
        MPI_Group_free(&og);
        free(od);
    }

    /* compare */
    {
        int res = -1;
        MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res);
        CHECK(res == MPI_IDENT, "compare(world, world) %d", res);
        MPI_Comm_compare(dup, dup, &res);
        CHECK(res == MPI_IDENT, "compare(dup, dup) %d", res);
        MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_SELF, &res);
        if (size > 1)
            CHECK(res == MPI_UNEQUAL, "compare(world, self) %d, expected UNEQUAL", res);
        else
            CHECK(res == MPI_CONGRUENT, "compare(world, self) size 1: %d, expected CONGRUENT", res);
        CHECK(MPI_IDENT < MPI_CONGRUENT && MPI_CONGRUENT < MPI_SIMILAR &&
              MPI_SIMILAR < MPI_UNEQUAL, "comparison constants not ordered");
    }

    /* test_inter on an intracommunicator */
    {
        int flag = -1;
        CHECK_MPI(MPI_Comm_test_inter(MPI_COMM_WORLD, &flag));
        CHECK(flag == 0, "test_inter(world) %d", flag);
        /* test_inter on an intercommunicator: tests/c/intercomm.c */
    }

    /* group of a dup equals the world group */
    {
        MPI_Group dg;
        int res = -1;
        MPI_Comm_group(dup, &dg);
        MPI_Group_compare(dg, world_group, &res);
        CHECK(res == MPI_IDENT, "group of dup compares %d to world group", res);
        MPI_Group_free(&dg);
        CHECK(dg == MPI_GROUP_NULL, "Group_free did not null the handle");
    }

    MPI_Group_free(&world_group);
    MPI_Comm_free(&idup);
    MPI_Comm_free(&dupi);
    MPI_Comm_free(&dup2);
    MPI_Comm_free(&dup);
    CHECK(dup == MPI_COMM_NULL && idup == MPI_COMM_NULL, "Comm_free did not null handles");
    return check_finish("comm");
}
