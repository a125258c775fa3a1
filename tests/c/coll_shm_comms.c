/* ranks: 1 2 3 4 5 8 */
/* timeout: 120 */
/* Collectives on communicators other than the world, which Baton gives
   shared-memory areas of their own at their first blocking barrier, bcast,
   reduce, allreduce, allgather or alltoall and takes back at MPI_Comm_free: duplicates, halves in
   reversed rank order, more communicators alive at once than there are areas,
   areas reused by later communicators of other members, nonblocking
   collectives before and after the first blocking one, a communicator freed
   with its last collective just finished, MPI_IN_PLACE, and long loops of
   small bcasts and reduces (their roots and contributors run ahead). Every result is
   checked against values computed here. */
#include "check.h"

static int wrank, wsize;

static void blocks(MPI_Comm c, int salt);

/* blocking barrier, bcast (small and 10 000 bytes), reduce and allreduce on c */
static void exercise(MPI_Comm c, int salt)
{
    int r, n;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    CHECK_MPI(MPI_Barrier(c));
    for (int root = 0; root < n; root += (n > 2 ? n - 1 : 1)) {
        long v[3] = {r == root ? salt + root : -1, r == root ? 7 : -1, r == root ? salt * 3 : -1};
        CHECK_MPI(MPI_Bcast(v, 3, MPI_LONG, root, c));
        CHECK(v[0] == salt + root && v[1] == 7 && v[2] == salt * 3, "bcast root %d: %ld %ld %ld", root,
              v[0], v[1], v[2]);
        int big[2500];
        for (int i = 0; i < 2500; i++)
            big[i] = r == root ? i * salt + root : 0;
        CHECK_MPI(MPI_Bcast(big, 2500, MPI_INT, root, c));
        int bad = -1;
        for (int i = 0; i < 2500 && bad < 0; i++)
            if (big[i] != i * salt + root)
                bad = i;
        CHECK(bad < 0, "bcast of 10 000 bytes from %d: element %d", root, bad);
        long s = r + salt, t = -1;
        CHECK_MPI(MPI_Reduce(&s, &t, 1, MPI_LONG, MPI_SUM, root, c));
        if (r == root)
            CHECK(t == (long)n * (n - 1) / 2 + (long)n * salt, "reduce to %d: %ld", root, t);
    }
    double x[4] = {r, 1.0, -r, salt}, y[4];
    CHECK_MPI(MPI_Allreduce(x, y, 4, MPI_DOUBLE, MPI_SUM, c));
    CHECK(y[0] == n * (n - 1) / 2.0 && y[1] == n && y[2] == -y[0] && y[3] == (double)n * salt,
          "allreduce: %g %g %g %g", y[0], y[1], y[2], y[3]);
    int m = r * 10 + salt % 7;
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_INT, MPI_MAX, c));
    CHECK(m == (n - 1) * 10 + salt % 7, "allreduce in place: %d", m);
    /* non-commutative order: rank order must hold through the area too */
    int seq = r, all = -1;
    CHECK_MPI(MPI_Allreduce(&seq, &all, 1, MPI_INT, MPI_MAX, c));
    CHECK(all == n - 1, "max rank %d", all);
    blocks(c, salt);
}

/* allgather and alltoall of small blocks (through the area) and of blocks
   too large for it, blocking and nonblocking, with gathers and scatters (by
   messages) in between */
static void blocks(MPI_Comm c, int salt)
{
    int r, n;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    for (int len = 1; len <= 1500; len = len * 37 + 2) {
        int *s = malloc(sizeof(int) * len * n), *d = malloc(sizeof(int) * len * n);
        for (int j = 0; j < len * n; j++)
            s[j] = salt + r * 100000 + j;
        CHECK_MPI(MPI_Allgather(s, len, MPI_INT, d, len, MPI_INT, c));
        for (int j = 0; j < len * n; j++)
            CHECK(d[j] == salt + (j / len) * 100000 + j % len, "allgather of %d ints: [%d] = %d", len, j, d[j]);
        CHECK_MPI(MPI_Alltoall(s, len, MPI_INT, d, len, MPI_INT, c));
        for (int j = 0; j < len * n; j++)
            CHECK(d[j] == salt + (j / len) * 100000 + r * len + j % len, "alltoall of %d ints: [%d] = %d", len, j, d[j]);
        for (int root = 0; root < n; root += n > 2 ? n - 1 : 1) {
            for (int j = 0; j < len * n; j++)
                d[j] = -1;
            CHECK_MPI(MPI_Gather(s, len, MPI_INT, d, len, MPI_INT, root, c));
            if (r == root)
                for (int j = 0; j < len * n; j++)
                    CHECK(d[j] == salt + (j / len) * 100000 + j % len, "gather of %d ints to %d: [%d] = %d", len,
                          root, j, d[j]);
            for (int j = 0; j < len; j++)
                d[j] = -1;
            CHECK_MPI(MPI_Scatter(s, len, MPI_INT, d, len, MPI_INT, root, c));
            for (int j = 0; j < len; j++)
                CHECK(d[j] == salt + root * 100000 + r * len + j, "scatter of %d ints from %d: [%d] = %d", len, root,
                      j, d[j]);
        }
        MPI_Request q;
        for (int j = 0; j < len * n; j++)
            d[j] = -1;
        CHECK_MPI(MPI_Ialltoall(s, len, MPI_INT, d, len, MPI_INT, c, &q));
        CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
        for (int j = 0; j < len * n; j++)
            CHECK(d[j] == salt + (j / len) * 100000 + r * len + j % len, "ialltoall of %d ints: [%d] = %d", len, j, d[j]);
        free(s);
        free(d);
    }
}

/* long loops of small bcasts and reduces, whose root and contributors may run
   many collectives ahead of the others, mixed with larger ones that may not */
static void pipelined(MPI_Comm c, int salt)
{
    int r, n;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    for (int phase = 0; phase < 4; phase++) {
        int root = (phase * 3) % n;
        /* only bcasts: nothing holds the root back but the post lines */
        for (int i = 0; i < 300; i++) {
            long v[2] = {r == root ? salt + i : -1, r == root ? -i : -1};
            CHECK_MPI(MPI_Bcast(v, 2, MPI_LONG, root, c));
            CHECK(v[0] == salt + i && v[1] == -i, "bcast %d from %d: %ld %ld", i, root, v[0], v[1]);
            if (phase == 1 && i % 37 == 0) {
                int big[300];
                for (int j = 0; j < 300; j++)
                    big[j] = r == root ? i + j : -1;
                CHECK_MPI(MPI_Bcast(big, 300, MPI_INT, root, c));
                CHECK(big[0] == i && big[299] == i + 299, "large bcast %d: %d %d", i, big[0], big[299]);
            }
        }
        /* only reduces: the contributors run ahead of the root */
        for (int i = 0; i < 300; i++) {
            long x = (long)r * i + salt, y = -1;
            CHECK_MPI(MPI_Reduce(&x, &y, 1, MPI_LONG, MPI_SUM, root, c));
            if (r == root)
                CHECK(y == (long)i * n * (n - 1) / 2 + (long)n * salt, "reduce %d to %d: %ld", i, root, y);
        }
    }
    long m = r, t = -1;
    CHECK_MPI(MPI_Allreduce(&m, &t, 1, MPI_LONG, MPI_MAX, c));
    CHECK(t == n - 1, "allreduce after the loops: %ld", t);
}

/* nonblocking collectives mixed with blocking ones on c */
static void mixed(MPI_Comm c, int salt)
{
    int r, n;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    MPI_Request q[3];
    long a = r + salt, b = -1, d = r == 0 ? salt : -1;
    CHECK_MPI(MPI_Iallreduce(&a, &b, 1, MPI_LONG, MPI_SUM, c, &q[0]));
    CHECK_MPI(MPI_Ibcast(&d, 1, MPI_LONG, 0, c, &q[1]));
    CHECK_MPI(MPI_Ibarrier(c, &q[2]));
    long e = r, f = -1;
    CHECK_MPI(MPI_Allreduce(&e, &f, 1, MPI_LONG, MPI_SUM, c));
    CHECK_MPI(MPI_Waitall(3, q, MPI_STATUSES_IGNORE));
    CHECK(b == (long)n * (n - 1) / 2 + (long)n * salt, "iallreduce: %ld", b);
    CHECK(d == salt, "ibcast: %ld", d);
    CHECK(f == (long)n * (n - 1) / 2, "allreduce among nonblocking ones: %ld", f);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    /* a nonblocking collective before the first blocking one, then both kinds */
    {
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        long v = wrank, s = -1;
        MPI_Request q;
        CHECK_MPI(MPI_Iallreduce(&v, &s, 1, MPI_LONG, MPI_SUM, d, &q));
        CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
        CHECK(s == (long)wsize * (wsize - 1) / 2, "first iallreduce: %ld", s);
        exercise(d, 1);
        pipelined(d, 8);
        mixed(d, 2);
        exercise(d, 3);
        MPI_Comm_free(&d);
    }

    pipelined(MPI_COMM_WORLD, 9);

    /* an alltoall as the first blocking collective */
    {
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        blocks(d, 400);
        exercise(d, 401);
        MPI_Comm_free(&d);
    }

    /* halves in reversed order: areas of different members, rank != world rank */
    {
        MPI_Comm h;
        MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, -wrank, &h);
        exercise(h, 4);
        mixed(h, 5);
        /* the world goes on meanwhile */
        exercise(MPI_COMM_WORLD, 6);
        exercise(h, 7);
        MPI_Comm_free(&h);
    }

    /* more communicators alive at once than areas (8 per process, one the world's) */
    {
        enum { K = 11 };
        MPI_Comm cs[K];
        for (int k = 0; k < K; k++) {
            MPI_Comm_dup(k % 2 ? MPI_COMM_WORLD : (k ? cs[k - 1] : MPI_COMM_WORLD), &cs[k]);
            exercise(cs[k], 10 + k);
        }
        for (int k = K - 1; k >= 0; k--)
            exercise(cs[k], 30 + k);
        for (int k = 0; k < K; k += 2)
            MPI_Comm_free(&cs[k]);
        for (int k = 1; k < K; k += 2)
            exercise(cs[k], 50 + k);
        for (int k = 1; k < K; k += 2)
            MPI_Comm_free(&cs[k]);
    }

    /* areas reused many times, by communicators of changing membership */
    for (int round = 0; round < 30; round++) {
        MPI_Comm c;
        int color = wsize > 2 ? (wrank + round) % 3 == 0 : 0;
        MPI_Comm_split(MPI_COMM_WORLD, color, (wrank * 7 + round) % wsize, &c);
        exercise(c, 100 + round);
        if (round % 3 == 0)
            mixed(c, 200 + round);
        MPI_Comm_free(&c);
    }

    /* freed right after a nonblocking collective was waited for */
    {
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        exercise(d, 300);
        MPI_Request q;
        CHECK_MPI(MPI_Ibarrier(d, &q));
        CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
        MPI_Comm_free(&d);
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        exercise(d, 301);
        MPI_Comm_free(&d);
    }

    return check_finish("coll_shm_comms");
}
