/* ranks: 1 2 3 4 */
/* MPI_Comm_create_from_group (MPI 4.0) with groups of the world process set: a communicator over
   the group, made by its members alone (the others do not call), ranks in group order, the error
   handler given, usable at once (point-to-point and collectives); creations over one group with
   different string tags are different communicators, and one made in a different order on
   different members (told apart by their tags) still matches up; a process outside the group
   cannot create it. */
#include "check.h"

static MPI_Errhandler custom;
static void handler(MPI_Comm *c, int *code, ...)
{
    (void)c;
    (void)code;
}

static void check_comm(MPI_Comm c, MPI_Group g, const char *what)
{
    int n, r, gn, gr;
    MPI_Comm_size(c, &n);
    MPI_Comm_rank(c, &r);
    MPI_Group_size(g, &gn);
    MPI_Group_rank(g, &gr);
    CHECK(n == gn && r == gr, "%s: size %d rank %d, group size %d rank %d", what, n, r, gn, gr);
    MPI_Group cg;
    int cmp;
    MPI_Comm_group(c, &cg);
    MPI_Group_compare(cg, g, &cmp);
    CHECK(cmp == MPI_IDENT, "%s: not the group's processes in its order", what);
    MPI_Group_free(&cg);
    int sum = 0, wr;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    CHECK_MPI(MPI_Allreduce(&wr, &sum, 1, MPI_INT, MPI_SUM, c));
    int want = 0;
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    for (int i = 0; i < gn; i++) {
        int w;
        MPI_Group_translate_ranks(g, 1, &i, world, &w);
        want += w;
    }
    MPI_Group_free(&world);
    CHECK(sum == want, "%s: allreduce gave %d, expected %d", what, sum, want);
    int next = (r + 1) % n, prev = (r + n - 1) % n, got = -1;
    CHECK_MPI(MPI_Sendrecv(&r, 1, MPI_INT, next, 5, &got, 1, MPI_INT, prev, 5, c, MPI_STATUS_IGNORE));
    CHECK(got == prev, "%s: ring got %d from %d", what, got, prev);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_create_errhandler(handler, &custom);

    MPI_Group world, evens, rev;
    MPI_Comm_group(MPI_COMM_WORLD, &world);

    /* the whole world, with the error handler given */
    MPI_Comm c;
    CHECK_MPI(MPI_Comm_create_from_group(world, "test.world", MPI_INFO_NULL, custom, &c));
    check_comm(c, world, "world group");
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(c, &eh);
    CHECK(eh == custom, "the new communicator does not have the error handler given");
    MPI_Errhandler_free(&eh);
    MPI_Comm_free(&c);

    /* the even ranks only: the odd ones do not call */
    int ne = (size + 1) / 2, ranks[64];
    for (int i = 0; i < ne; i++)
        ranks[i] = 2 * i;
    MPI_Group_incl(world, ne, ranks, &evens);
    if (rank % 2 == 0) {
        CHECK_MPI(MPI_Comm_create_from_group(evens, "test.evens", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
        check_comm(c, evens, "even ranks");
        MPI_Comm_free(&c);
    } else {
        CHECK_ERR_CLASS(MPI_Comm_create_from_group(evens, "test.evens", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c),
                        MPI_ERR_GROUP);
    }

    /* the world in reverse order, twice with different tags, made in opposite orders on odd and
       even ranks: each tag meets its own */
    for (int i = 0; i < size; i++)
        ranks[i] = size - 1 - i;
    MPI_Group_incl(world, size, ranks, &rev);
    MPI_Comm a, b;
    if (rank % 2 == 0) {
        CHECK_MPI(MPI_Comm_create_from_group(rev, "tag.a", MPI_INFO_NULL, MPI_ERRORS_RETURN, &a));
        CHECK_MPI(MPI_Comm_create_from_group(rev, "tag.b", MPI_INFO_NULL, MPI_ERRORS_RETURN, &b));
    } else {
        CHECK_MPI(MPI_Comm_create_from_group(rev, "tag.b", MPI_INFO_NULL, MPI_ERRORS_RETURN, &b));
        CHECK_MPI(MPI_Comm_create_from_group(rev, "tag.a", MPI_INFO_NULL, MPI_ERRORS_RETURN, &a));
    }
    int cmp;
    MPI_Comm_compare(a, b, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "two creations over one group compare %d, expected MPI_CONGRUENT", cmp);
    /* messages on a do not reach b: send on b first, then on a; receive on a first */
    int r, n = size;
    MPI_Comm_rank(a, &r);
    int to = (r + 1) % n, from = (r + n - 1) % n, va = 100 + r, vb = 200 + r, ga = -1, gb = -1;
    MPI_Request q[4];
    MPI_Irecv(&ga, 1, MPI_INT, from, 0, a, &q[0]);
    MPI_Irecv(&gb, 1, MPI_INT, from, 0, b, &q[1]);
    MPI_Isend(&vb, 1, MPI_INT, to, 0, b, &q[2]);
    MPI_Isend(&va, 1, MPI_INT, to, 0, a, &q[3]);
    CHECK_MPI(MPI_Waitall(4, q, MPI_STATUSES_IGNORE));
    CHECK(ga == 100 + from && gb == 200 + from, "crossed messages: a got %d, b got %d", ga, gb);
    check_comm(a, rev, "reversed group, tag a");
    check_comm(b, rev, "reversed group, tag b");
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);

    MPI_Group_free(&rev);
    MPI_Group_free(&evens);
    MPI_Group_free(&world);
    MPI_Errhandler_free(&custom);
    return check_finish("comm_from_group");
}
