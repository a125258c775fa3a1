/* ranks: 1 2 3 4 */
/* MPI_Type_get_envelope / MPI_Type_get_contents (and _c) give back the constructor's arguments
   for every combiner; a type rebuilt from its contents has the same size and extent. Also
   Type_set_name/get_name, Type_match_size, and attributes on datatypes. */
#include "check.h"

static int rank;

/* Checks the envelope and contents of t: combiner, the integers, addresses and datatypes. */
static void expect(const char *what, MPI_Datatype t, int comb, int ni, const int *ints, int na,
                   const MPI_Aint *addrs, int nd, const MPI_Datatype *types)
{
    int gi = -1, ga = -1, gd = -1, gc = -1;
    CHECK_MPI(MPI_Type_get_envelope(t, &gi, &ga, &gd, &gc));
    CHECK(gc == comb && gi == ni && ga == na && gd == nd,
          "%s: envelope (%d, %d, %d, combiner %d), expected (%d, %d, %d, %d)", what, gi, ga, gd,
          gc, ni, na, nd, comb);
    if (gc != comb || gi != ni || ga != na || gd != nd)
        return;
    int ci[64];
    MPI_Aint ca[64];
    MPI_Datatype cd[8];
    CHECK_MPI(MPI_Type_get_contents(t, ni, na, nd, ci, ca, cd));
    for (int k = 0; k < ni; k++)
        CHECK(ci[k] == ints[k], "%s: integer %d is %d, expected %d", what, k, ci[k], ints[k]);
    for (int k = 0; k < na; k++)
        CHECK(ca[k] == addrs[k], "%s: address %d is %ld, expected %ld", what, k, (long)ca[k],
              (long)addrs[k]);
    for (int k = 0; k < nd; k++) {
        int sub_c = -1, x1, x2, x3;
        MPI_Type_get_envelope(cd[k], &x1, &x2, &x3, &sub_c);
        int want_c = -1;
        MPI_Type_get_envelope(types[k], &x1, &x2, &x3, &want_c);
        CHECK(sub_c == want_c, "%s: datatype %d has combiner %d, expected %d", what, k, sub_c, want_c);
        if (sub_c == MPI_COMBINER_NAMED)
            CHECK(cd[k] == types[k], "%s: predefined datatype %d is not the same handle", what, k);
        else
            MPI_Type_free(&cd[k]);
    }
}

static void same_shape(const char *what, MPI_Datatype a, MPI_Datatype b)
{
    int s1 = -1, s2 = -2;
    MPI_Aint l1, e1, l2, e2;
    MPI_Type_size(a, &s1);
    MPI_Type_size(b, &s2);
    MPI_Type_get_extent(a, &l1, &e1);
    MPI_Type_get_extent(b, &l2, &e2);
    CHECK(s1 == s2 && l1 == l2 && e1 == e2, "%s: rebuilt type differs (%d %ld %ld vs %d %ld %ld)",
          what, s1, (long)l1, (long)e1, s2, (long)l2, (long)e2);
}

static int copies = 0, deletes = 0;
static int copy_fn(MPI_Datatype t, int k, void *extra, void *in, void *out, int *flag)
{
    (void)t;
    (void)k;
    (void)extra;
    copies++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Datatype t, int k, void *val, void *extra)
{
    (void)t;
    (void)k;
    (void)val;
    (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Datatype t, u;

    /* named */
    int ni, na, nd, comb;
    CHECK_MPI(MPI_Type_get_envelope(MPI_DOUBLE, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_NAMED && ni == 0 && na == 0 && nd == 0, "MPI_DOUBLE is not NAMED");

    /* contiguous, vector, hvector */
    MPI_Type_contiguous(3, MPI_INT, &t);
    expect("contiguous", t, MPI_COMBINER_CONTIGUOUS, 1, (int[]){3}, 0, NULL, 1, (MPI_Datatype[]){MPI_INT});
    MPI_Type_vector(4, 2, -3, t, &u);
    expect("vector of contiguous", u, MPI_COMBINER_VECTOR, 3, (int[]){4, 2, -3}, 0, NULL, 1,
           (MPI_Datatype[]){t});
    {
        /* rebuild from the contents */
        int ci[3];
        MPI_Datatype cd[1], r;
        MPI_Type_get_contents(u, 3, 0, 1, ci, NULL, cd);
        MPI_Type_vector(ci[0], ci[1], ci[2], cd[0], &r);
        same_shape("vector rebuilt", u, r);
        MPI_Type_free(&r);
        MPI_Type_free(&cd[0]);
    }
    MPI_Type_free(&u);
    MPI_Type_create_hvector(2, 3, 100, MPI_SHORT, &u);
    expect("hvector", u, MPI_COMBINER_HVECTOR, 2, (int[]){2, 3}, 1, (MPI_Aint[]){100}, 1,
           (MPI_Datatype[]){MPI_SHORT});
    MPI_Type_free(&u);

    /* indexed family */
    int bl[3] = {1, 2, 3}, di[3] = {0, 10, 5};
    MPI_Aint da[3] = {8, 0, 64};
    MPI_Type_indexed(3, bl, di, MPI_FLOAT, &u);
    expect("indexed", u, MPI_COMBINER_INDEXED, 7, (int[]){3, 1, 2, 3, 0, 10, 5}, 0, NULL, 1,
           (MPI_Datatype[]){MPI_FLOAT});
    MPI_Type_free(&u);
    MPI_Type_create_hindexed(3, bl, da, t, &u);
    expect("hindexed", u, MPI_COMBINER_HINDEXED, 4, (int[]){3, 1, 2, 3}, 3, da, 1, (MPI_Datatype[]){t});
    MPI_Type_free(&u);
    MPI_Type_create_indexed_block(3, 2, di, MPI_INT, &u);
    expect("indexed_block", u, MPI_COMBINER_INDEXED_BLOCK, 5, (int[]){3, 2, 0, 10, 5}, 0, NULL, 1,
           (MPI_Datatype[]){MPI_INT});
    MPI_Type_free(&u);
    MPI_Type_create_hindexed_block(3, 2, da, MPI_INT, &u);
    expect("hindexed_block", u, MPI_COMBINER_HINDEXED_BLOCK, 2, (int[]){3, 2}, 3, da, 1,
           (MPI_Datatype[]){MPI_INT});
    MPI_Type_free(&u);

    /* struct with a derived member */
    MPI_Datatype ty[3] = {MPI_CHAR, t, MPI_DOUBLE};
    MPI_Type_create_struct(3, bl, da, ty, &u);
    expect("struct", u, MPI_COMBINER_STRUCT, 4, (int[]){3, 1, 2, 3}, 3, da, 3, ty);
    MPI_Type_free(&u);

    /* subarray, darray */
    int sz[2] = {6, 7}, sub[2] = {2, 3}, st[2] = {1, 4};
    MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_FORTRAN, MPI_INT, &u);
    expect("subarray", u, MPI_COMBINER_SUBARRAY, 8, (int[]){2, 6, 7, 2, 3, 1, 4, MPI_ORDER_FORTRAN}, 0,
           NULL, 1, (MPI_Datatype[]){MPI_INT});
    MPI_Type_free(&u);
    int g[2] = {8, 9}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int darg[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, ps[2] = {2, 2};
    MPI_Type_create_darray(4, 3, 2, g, dist, darg, ps, MPI_ORDER_C, MPI_DOUBLE, &u);
    expect("darray", u, MPI_COMBINER_DARRAY, 12,
           (int[]){4, 3, 2, 8, 9, dist[0], dist[1], darg[0], darg[1], 2, 2, MPI_ORDER_C}, 0, NULL, 1,
           (MPI_Datatype[]){MPI_DOUBLE});
    MPI_Type_free(&u);

    /* resized, dup */
    MPI_Type_create_resized(t, -8, 40, &u);
    expect("resized", u, MPI_COMBINER_RESIZED, 0, NULL, 2, (MPI_Aint[]){-8, 40}, 1, (MPI_Datatype[]){t});
    MPI_Type_free(&u);
    MPI_Type_dup(t, &u);
    expect("dup", u, MPI_COMBINER_DUP, 0, NULL, 0, NULL, 1, (MPI_Datatype[]){t});
    same_shape("dup", t, u);
    MPI_Type_free(&u);

    /* large-count constructor: counts come back through the _c calls */
    MPI_Type_vector_c(5, 1, 7, MPI_INT, &u);
    {
        MPI_Count ci = -1, ca = -1, cl = -1, cd = -1;
        int cc = -1;
        CHECK_MPI(MPI_Type_get_envelope_c(u, &ci, &ca, &cl, &cd, &cc));
        CHECK(cc == MPI_COMBINER_VECTOR && ci == 0 && ca == 0 && cl == 3 && cd == 1,
              "vector_c envelope_c (%lld %lld %lld %lld %d)", (long long)ci, (long long)ca,
              (long long)cl, (long long)cd, cc);
        MPI_Count lc[3] = {0, 0, 0};
        MPI_Datatype dd[1];
        CHECK_MPI(MPI_Type_get_contents_c(u, 0, 0, 3, 1, NULL, NULL, lc, dd));
        CHECK(lc[0] == 5 && lc[1] == 1 && lc[2] == 7 && dd[0] == MPI_INT, "vector_c contents_c");
        /* a plain-constructor type through the _c calls: no large counts */
        CHECK_MPI(MPI_Type_get_envelope_c(t, &ci, &ca, &cl, &cd, &cc));
        CHECK(cc == MPI_COMBINER_CONTIGUOUS && ci == 1 && cl == 0 && cd == 1, "contiguous envelope_c");
    }
    MPI_Type_free(&u);

    /* names: user types get theirs, predefined keep their own */
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    CHECK_MPI(MPI_Type_get_name(MPI_DOUBLE, name, &len));
    CHECK(strcmp(name, "MPI_DOUBLE") == 0 && len == 10, "MPI_DOUBLE's name is \"%s\"", name);
    CHECK_MPI(MPI_Type_get_name(t, name, &len));
    CHECK(len == 0 && name[0] == 0, "a new type has an empty name, got \"%s\"", name);
    CHECK_MPI(MPI_Type_set_name(t, "three ints"));
    CHECK_MPI(MPI_Type_get_name(t, name, &len));
    CHECK(strcmp(name, "three ints") == 0 && len == 10, "set name: \"%s\"", name);

    /* match size */
    MPI_Datatype m = MPI_DATATYPE_NULL;
    int msz = 0;
    CHECK_MPI(MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &m));
    MPI_Type_size(m, &msz);
    CHECK(msz == 8, "match_size REAL 8 gave a type of size %d", msz);
    CHECK_MPI(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 4, &m));
    MPI_Type_size(m, &msz);
    CHECK(msz == 4, "match_size INTEGER 4 gave a type of size %d", msz);

    /* attributes: set, get, copied on dup through the callback, deleted on free */
    int key = MPI_KEYVAL_INVALID, flag = 0;
    void *val = NULL;
    CHECK_MPI(MPI_Type_create_keyval(copy_fn, delete_fn, &key, NULL));
    CHECK_MPI(MPI_Type_set_attr(t, key, (void *)(size_t)40));
    CHECK_MPI(MPI_Type_get_attr(t, key, &val, &flag));
    CHECK(flag && val == (void *)(size_t)40, "get_attr flag %d value %p", flag, val);
    CHECK_MPI(MPI_Type_dup(t, &u));
    CHECK_MPI(MPI_Type_get_attr(u, key, &val, &flag));
    CHECK(copies == 1 && flag && val == (void *)(size_t)41, "dup copied the attribute: %d %p", copies, val);
    CHECK_MPI(MPI_Type_free(&u));
    CHECK(deletes == 1, "free ran %d delete callbacks", deletes);
    CHECK_MPI(MPI_Type_delete_attr(t, key));
    CHECK(deletes == 2, "delete_attr ran the callback (%d)", deletes);
    CHECK_MPI(MPI_Type_get_attr(t, key, &val, &flag));
    CHECK(!flag, "attribute still set after delete");
    CHECK_MPI(MPI_Type_free_keyval(&key));
    CHECK(key == MPI_KEYVAL_INVALID, "free_keyval did not reset the keyval");

    MPI_Type_free(&t);
    return check_finish("dtype_envelope");
}
