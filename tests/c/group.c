/* ranks: 1 2 3 4 8 */
/* Groups: size, rank (MPI_UNDEFINED for non-members), incl, excl,
   range_incl, range_excl (strides, negative strides), translate_ranks
   (MPI_PROC_NULL), compare, union, intersection, difference (ordering),
   free, MPI_GROUP_EMPTY.  Expected results come from a small reference
   model (arrays of world ranks). */
#include "check.h"

static int rank, size;
static MPI_Group world;

/* world ranks of the members of g, in group order; returns the size */
static int members(MPI_Group g, int *out)
{
    int n = -1;
    MPI_Group_size(g, &n);
    int *in = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        in[i] = i;
    if (n > 0)
        CHECK_MPI(MPI_Group_translate_ranks(g, n, in, world, out));
    free(in);
    return n;
}

static void expect_group(MPI_Group g, int n, const int *exp, const char *what)
{
    int got[64];
    int gn = members(g, got);
    CHECK(gn == n, "%s: size %d, expected %d", what, gn, n);
    if (gn != n)
        return;
    int myrank_expected = MPI_UNDEFINED;
    for (int i = 0; i < n; i++) {
        CHECK(got[i] == exp[i], "%s: member %d is world %d, expected %d", what, i, got[i], exp[i]);
        if (exp[i] == rank)
            myrank_expected = i;
    }
    int gr = -2;
    CHECK_MPI(MPI_Group_rank(g, &gr));
    CHECK(gr == myrank_expected, "%s: Group_rank %d, expected %d", what, gr, myrank_expected);
}

static int contains(const int *a, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (a[i] == x)
            return 1;
    return 0;
}

static void free_group(MPI_Group *g)
{
    if (*g != MPI_GROUP_EMPTY) {
        CHECK_MPI(MPI_Group_free(g));
        CHECK(*g == MPI_GROUP_NULL, "Group_free did not set MPI_GROUP_NULL");
    }
}

/* expand ranges the way the standard defines range_incl */
static int expand(int n, int ranges[][3], int *out)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        int f = ranges[i][0], l = ranges[i][1], s = ranges[i][2];
        int cnt = (l - f) / s + 1;
        for (int j = 0; j < cnt; j++)
            out[k++] = f + j * s;
    }
    return k;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_group(MPI_COMM_WORLD, &world);

    int all[64], rev[64], tmp[64], exp[64];
    for (int i = 0; i < size; i++) {
        all[i] = i;
        rev[i] = size - 1 - i;
    }
    expect_group(world, size, all, "world group");

    /* GROUP_EMPTY */
    {
        int n = -1, r = -2;
        MPI_Group_size(MPI_GROUP_EMPTY, &n);
        MPI_Group_rank(MPI_GROUP_EMPTY, &r);
        CHECK(n == 0 && r == MPI_UNDEFINED, "GROUP_EMPTY size %d rank %d", n, r);
        int res = -1;
        MPI_Group_compare(MPI_GROUP_EMPTY, MPI_GROUP_EMPTY, &res);
        CHECK(res == MPI_IDENT, "compare(empty, empty) %d", res);
        MPI_Group_compare(MPI_GROUP_EMPTY, world, &res);
        CHECK(res == MPI_UNEQUAL, "compare(empty, world) %d", res);
    }

    /* incl (reversed) and compare */
    MPI_Group grev;
    CHECK_MPI(MPI_Group_incl(world, size, rev, &grev));
    expect_group(grev, size, rev, "incl reversed");
    {
        int res = -1;
        MPI_Group_compare(world, grev, &res);
        CHECK(res == (size > 1 ? MPI_SIMILAR : MPI_IDENT), "compare(world, reversed) %d", res);
        MPI_Group gsame;
        MPI_Group_incl(world, size, all, &gsame);
        MPI_Group_compare(world, gsame, &res);
        CHECK(res == MPI_IDENT, "compare(world, incl all) %d", res);
        free_group(&gsame);
    }

    /* incl of zero ranks = empty */
    {
        MPI_Group g0;
        CHECK_MPI(MPI_Group_incl(world, 0, all, &g0));
        int n = -1, res = -1;
        MPI_Group_size(g0, &n);
        MPI_Group_compare(g0, MPI_GROUP_EMPTY, &res);
        CHECK(n == 0 && res == MPI_IDENT, "incl 0 ranks: size %d compare %d", n, res);
        free_group(&g0);
    }

    /* excl first and last */
    {
        int ex[2] = {0, size - 1};
        int nex = size > 1 ? 2 : 1;
        MPI_Group g;
        CHECK_MPI(MPI_Group_excl(world, nex, ex, &g));
        int k = 0;
        for (int i = 1; i < size - 1; i++)
            exp[k++] = i;
        expect_group(g, k, exp, "excl first/last");
        int res = -1;
        MPI_Group_compare(world, g, &res);
        CHECK(res == MPI_UNEQUAL, "compare(world, excl) %d", res);
        free_group(&g);
        /* excl everything -> empty */
        MPI_Group_excl(world, size, rev, &g);
        int n = -1;
        MPI_Group_size(g, &n);
        MPI_Group_compare(g, MPI_GROUP_EMPTY, &res);
        CHECK(n == 0 && res == MPI_IDENT, "excl all: size %d compare %d", n, res);
        MPI_Comm c = MPI_COMM_WORLD;
        CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, g, &c));
        CHECK(c == MPI_COMM_NULL, "Comm_create(empty group) did not give COMM_NULL");
        free_group(&g);
    }

    /* excl from a reordered group keeps the reordered order */
    if (size >= 3) {
        int ex[1] = {1}; /* rank 1 of grev = world size-2 */
        MPI_Group g;
        MPI_Group_excl(grev, 1, ex, &g);
        int k = 0;
        for (int i = 0; i < size; i++)
            if (i != 1)
                exp[k++] = rev[i];
        expect_group(g, k, exp, "excl from reversed");
        free_group(&g);
    }

    /* range_incl */
    {
        int r1[1][3] = {{0, size - 1, 2}};
        int r2[1][3] = {{size - 1, 0, -1}};
        int r3[1][3] = {{size - 1, 0, -3}};
        int (*rs[3])[3] = {r1, r2, r3};
        const char *names[3] = {"range_incl stride 2", "range_incl stride -1",
                                "range_incl stride -3"};
        for (int t = 0; t < 3; t++) {
            MPI_Group g;
            CHECK_MPI(MPI_Group_range_incl(world, 1, rs[t], &g));
            int n = expand(1, rs[t], exp);
            expect_group(g, n, exp, names[t]);
            free_group(&g);
        }
        if (size >= 4) {
            /* two ranges: {1..1}, then {size-1 down to 2 step -2} */
            int r4[2][3] = {{1, 1, 1}, {size - 1, 2, -2}};
            MPI_Group g;
            CHECK_MPI(MPI_Group_range_incl(world, 2, r4, &g));
            int n = expand(2, r4, exp);
            expect_group(g, n, exp, "range_incl two ranges");
            free_group(&g);
            /* stride larger than the range: single element */
            int r5[1][3] = {{2, size - 1, size}};
            CHECK_MPI(MPI_Group_range_incl(world, 1, r5, &g));
            exp[0] = 2;
            expect_group(g, 1, exp, "range_incl big stride");
            free_group(&g);
        }
    }

    /* range_excl */
    if (size >= 2) {
        int r1[1][3] = {{1, size - 1, 2}}; /* drop odd ranks */
        MPI_Group g;
        CHECK_MPI(MPI_Group_range_excl(world, 1, r1, &g));
        int k = 0;
        for (int i = 0; i < size; i += 2)
            exp[k++] = i;
        expect_group(g, k, exp, "range_excl odd");
        free_group(&g);
        /* negative stride on the reversed group: exclude its ranks size-1, size-3, ... */
        int r2[1][3] = {{size - 1, 0, -2}};
        CHECK_MPI(MPI_Group_range_excl(grev, 1, r2, &g));
        int n = expand(1, r2, tmp);
        k = 0;
        for (int i = 0; i < size; i++)
            if (!contains(tmp, n, i))
                exp[k++] = rev[i];
        expect_group(g, k, exp, "range_excl negative stride");
        free_group(&g);
    }

    /* translate_ranks: PROC_NULL -> PROC_NULL, non-member -> UNDEFINED */
    if (size >= 2) {
        int evn = (size + 1) / 2;
        for (int i = 0; i < evn; i++)
            tmp[i] = 2 * i;
        MPI_Group ev;
        MPI_Group_incl(world, evn, tmp, &ev);
        int in[3] = {1, MPI_PROC_NULL, 0};
        int out[3] = {-7, -7, -7};
        CHECK_MPI(MPI_Group_translate_ranks(world, 3, in, ev, out));
        CHECK(out[0] == MPI_UNDEFINED, "translate non-member: %d", out[0]);
        CHECK(out[1] == MPI_PROC_NULL, "translate PROC_NULL: %d", out[1]);
        CHECK(out[2] == 0, "translate rank 0: %d", out[2]);
        int in2[2] = {evn - 1, 0};
        CHECK_MPI(MPI_Group_translate_ranks(ev, 2, in2, grev, out));
        CHECK(out[0] == size - 1 - 2 * (evn - 1) && out[1] == size - 1,
              "translate into reversed: %d %d", out[0], out[1]);
        int gr = -2;
        MPI_Group_rank(ev, &gr);
        CHECK(gr == (rank % 2 ? MPI_UNDEFINED : rank / 2), "rank in even group %d", gr);
        free_group(&ev);
    }

    /* union / intersection / difference ordering.
       A = world ranks in order {size-1, 1, 3, 5, ...}   (last + odd ranks)
       B = {2, 1, 0} ∩ world, in that order */
    {
        int a[64], b[64], na = 0, nb = 0;
        a[na++] = size - 1;
        for (int i = 1; i < size - 1; i += 2)
            a[na++] = i;
        for (int i = 2; i >= 0; i--)
            if (i < size)
                b[nb++] = i;
        MPI_Group ga, gb, gu, gi, gd, gd2;
        MPI_Group_incl(world, na, a, &ga);
        MPI_Group_incl(world, nb, b, &gb);
        CHECK_MPI(MPI_Group_union(ga, gb, &gu));
        CHECK_MPI(MPI_Group_intersection(ga, gb, &gi));
        CHECK_MPI(MPI_Group_difference(ga, gb, &gd));
        CHECK_MPI(MPI_Group_difference(gb, ga, &gd2));
        int k = 0;
        for (int i = 0; i < na; i++)
            exp[k++] = a[i];
        for (int i = 0; i < nb; i++)
            if (!contains(a, na, b[i]))
                exp[k++] = b[i];
        expect_group(gu, k, exp, "union");
        k = 0;
        for (int i = 0; i < na; i++)
            if (contains(b, nb, a[i]))
                exp[k++] = a[i];
        expect_group(gi, k, exp, "intersection");
        k = 0;
        for (int i = 0; i < na; i++)
            if (!contains(b, nb, a[i]))
                exp[k++] = a[i];
        expect_group(gd, k, exp, "difference A-B");
        k = 0;
        for (int i = 0; i < nb; i++)
            if (!contains(a, na, b[i]))
                exp[k++] = b[i];
        expect_group(gd2, k, exp, "difference B-A");
        free_group(&ga);
        free_group(&gb);
        free_group(&gu);
        free_group(&gi);
        free_group(&gd);
        free_group(&gd2);

        /* with the empty group */
        MPI_Group g;
        int res = -1;
        MPI_Group_union(MPI_GROUP_EMPTY, grev, &g);
        MPI_Group_compare(g, grev, &res);
        CHECK(res == MPI_IDENT, "union(empty, G) compare %d", res);
        free_group(&g);
        MPI_Group_intersection(world, MPI_GROUP_EMPTY, &g);
        MPI_Group_compare(g, MPI_GROUP_EMPTY, &res);
        CHECK(res == MPI_IDENT, "intersection(G, empty) compare %d", res);
        free_group(&g);
        MPI_Group_difference(world, grev, &g);
        MPI_Group_compare(g, MPI_GROUP_EMPTY, &res);
        CHECK(res == MPI_IDENT, "difference(G, perm(G)) compare %d", res);
        free_group(&g);
        /* union of a group with its permutation keeps the first order */
        MPI_Group_union(grev, world, &g);
        expect_group(g, size, rev, "union(rev, world)");
        free_group(&g);
    }

    free_group(&grev);
    free_group(&world);
    return check_finish("group");
}
