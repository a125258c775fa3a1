/* ranks: 1 2 3 */
/* Indexed types whose leading blocks have length 0: zero-length blocks put nothing in the type
   map, so they move neither the lower nor the upper bound (MPI 4.1 section 5.1.2; MPICH and Open
   MPI agree). The types commit, report their bounds, count their elements, pack, and travel in
   blocking, nonblocking and collective calls, several elements at a time. */
#include "check.h"

#define WORDS 64

/* Checks the bounds of `t` and sends `count` elements of it around a ring: the receive buffer
   must hold exactly the words the type map names (`map`, word indices of one element). */
static void check_type(MPI_Datatype t, const char *what, MPI_Aint lb, MPI_Aint extent, MPI_Aint tlb, MPI_Aint text,
                       const int *map, int nmap)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Aint l = -1, e = -1, tl = -1, te = -1;
    int sz = -1;
    CHECK_MPI(MPI_Type_get_extent(t, &l, &e));
    CHECK_MPI(MPI_Type_get_true_extent(t, &tl, &te));
    CHECK_MPI(MPI_Type_size(t, &sz));
    CHECK(l == lb && e == extent, "%s: lb %ld extent %ld, expected %ld %ld", what, (long)l, (long)e, (long)lb,
          (long)extent);
    CHECK(tl == tlb && te == text, "%s: true lb %ld extent %ld, expected %ld %ld", what, (long)tl, (long)te,
          (long)tlb, (long)text);
    CHECK(sz == 4 * nmap, "%s: size %d, expected %d", what, sz, 4 * nmap);
    int count = 3, step = (int)(extent / 4);
    int src[WORDS], dst[WORDS];
    for (int form = 0; form < 3; form++) {
        int to = (rank + 1) % size, from = (rank + size - 1) % size;
        for (int i = 0; i < WORDS; i++) {
            src[i] = 1000 * rank + i;
            dst[i] = -1;
        }
        MPI_Status st;
        if (form == 0) {
            CHECK_MPI(MPI_Sendrecv(src, count, t, to, 5, dst, count, t, from, 5, MPI_COMM_WORLD, &st));
        } else if (form == 1) {
            MPI_Request q[2];
            CHECK_MPI(MPI_Irecv(dst, count, t, from, 6, MPI_COMM_WORLD, &q[0]));
            CHECK_MPI(MPI_Isend(src, count, t, to, 6, MPI_COMM_WORLD, &q[1]));
            MPI_Status sts[2];
            CHECK_MPI(MPI_Waitall(2, q, sts));
            st = sts[0];
        } else {
            from = 0;
            memcpy(dst, src, sizeof dst);
            if (rank != 0)
                for (int i = 0; i < WORDS; i++)
                    dst[i] = -1;
            CHECK_MPI(MPI_Bcast(dst, count, t, 0, MPI_COMM_WORLD));
        }
        if (form < 2) {
            int n = -1;
            MPI_Get_elements(&st, MPI_INT, &n);
            CHECK(n == count * nmap, "%s form %d: %d ints received, expected %d", what, form, n, count * nmap);
        }
        int inmap[WORDS] = {0};
        for (int c = 0; c < count; c++)
            for (int k = 0; k < nmap; k++)
                inmap[c * step + map[k]] = 1;
        for (int i = 0; i < WORDS; i++) {
            int want = inmap[i] ? 1000 * from + i : (form == 2 && rank == 0 ? src[i] : -1);
            CHECK(dst[i] == want, "%s form %d: word %d is %d, expected %d", what, form, i, dst[i], want);
        }
    }
    /* Packed in type-map order. */
    char packed[4 * WORDS];
    int pos = 0;
    CHECK_MPI(MPI_Pack(src, 1, t, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    CHECK(pos == 4 * nmap, "%s: packed %d bytes", what, pos);
    for (int k = 0; k < nmap && k < pos / 4; k++) {
        int v;
        memcpy(&v, packed + 4 * k, 4);
        CHECK(v == src[map[k]], "%s: packed word %d is %d, expected %d", what, k, v, src[map[k]]);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Datatype t;

    /* Two empty blocks first (one far away), then words 3, 4 and 7. */
    int bl[5] = {0, 0, 2, 0, 1}, d[5] = {40, -7, 3, 50, 7};
    CHECK_MPI(MPI_Type_indexed(5, bl, d, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    int m1[3] = {3, 4, 7};
    check_type(t, "indexed", 12, 20, 12, 20, m1, 3);
    MPI_Type_free(&t);

    /* hindexed: an empty block at a negative byte displacement, then words 2 and 5 in that order. */
    int hbl[3] = {0, 1, 1};
    MPI_Aint hd[3] = {-400, 8, 20};
    CHECK_MPI(MPI_Type_create_hindexed(3, hbl, hd, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    int m2[2] = {2, 5};
    check_type(t, "hindexed", 8, 16, 8, 16, m2, 2);
    MPI_Type_free(&t);

    /* struct: empty entries of a double and of an int first, then two ints at words 1 and 2. */
    int sbl[3] = {0, 0, 2};
    MPI_Aint sd[3] = {-64, 200, 4};
    MPI_Datatype st[3] = {MPI_DOUBLE, MPI_INT, MPI_INT};
    CHECK_MPI(MPI_Type_create_struct(3, sbl, sd, st, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    int m3[2] = {1, 2};
    check_type(t, "struct", 4, 8, 4, 8, m3, 2);
    MPI_Type_free(&t);

    /* An indexed type of a derived type whose own first block is empty: a vector of it. */
    MPI_Datatype inner, outer;
    int ibl[2] = {0, 1}, id[2] = {0, 1};
    CHECK_MPI(MPI_Type_indexed(2, ibl, id, MPI_INT, &inner));
    CHECK_MPI(MPI_Type_vector(2, 1, 3, inner, &outer));
    CHECK_MPI(MPI_Type_commit(&outer));
    int m4[2] = {1, 4};
    check_type(outer, "vector of indexed", 4, 16, 4, 16, m4, 2);
    MPI_Type_free(&outer);
    MPI_Type_free(&inner);

    /* Every block empty: nothing to send, bounds 0. */
    int zbl[2] = {0, 0}, zd[2] = {5, 9};
    CHECK_MPI(MPI_Type_indexed(2, zbl, zd, MPI_INT, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    MPI_Aint l = -1, e = -1;
    int sz = -1;
    MPI_Type_get_extent(t, &l, &e);
    MPI_Type_size(t, &sz);
    CHECK(l == 0 && e == 0 && sz == 0, "all blocks empty: lb %ld extent %ld size %d", (long)l, (long)e, sz);
    MPI_Type_free(&t);
    return check_finish("dtype_zero_blocks");
}
