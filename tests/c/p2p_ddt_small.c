/* ranks: 2 3 4 8 */
/* Small messages of derived datatypes through blocking MPI_Send / MPI_Recv
   (the sizes a library may pack on the stack): a matrix column both ways,
   different type maps with one signature, a message shorter than the
   receive (partial element count), truncation, wildcards, a message that
   arrives before its receive is posted, structs with holes, the largest and
   just-too-large small sizes, and an uncommitted type.  Every byte of the
   receiving buffer outside the type map must keep its value. */
#include "check.h"
#include <stddef.h>

static int rank, size;

enum { DIM = 16 };

/* A DIM x DIM matrix whose column `col` is the type map. */
static MPI_Datatype column_type(int rows)
{
    MPI_Datatype t;
    MPI_Type_vector(rows, 1, DIM, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    return t;
}

static double val(int seed, int i)
{
    return seed * 1000.0 + i + 0.25;
}

static void fill_matrix(double *m, double v)
{
    for (int i = 0; i < DIM * DIM; i++)
        m[i] = v;
}

/* Checks column `col` of m against val(seed, 0..got-1) and every other element against
   `bg` (rows got.. of the column too). */
static void check_matrix(const double *m, int col, int got, int seed, double bg, const char *what)
{
    int bad = 0;
    for (int r = 0; r < DIM; r++)
        for (int c = 0; c < DIM; c++) {
            double want = (c == col && r < got) ? val(seed, r) : bg;
            if (m[r * DIM + c] != want && bad++ < 3)
                CHECK(0, "%s: element (%d,%d) is %g, expected %g", what, r, c, m[r * DIM + c], want);
        }
}

typedef struct {
    double x;
    char c;
    int i;
} rec_t;

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* Pairs (0,1), (2,3), ...; an odd last rank only takes part in the barriers. */
    int partner = rank ^ 1, active = partner < size;
    int left = rank % 2 == 0;
    double m[DIM * DIM];
    MPI_Status st;
    int count;

    MPI_Datatype col = column_type(DIM);
    /* 1. A column each way, into a different column on the other side. */
    if (active) {
        for (int round = 0; round < 50; round++) {
            int seed = round + 1;
            if (left) {
                fill_matrix(m, -1);
                for (int r = 0; r < DIM; r++)
                    m[r * DIM + 3] = val(seed, r);
                CHECK_MPI(MPI_Send(m + 3, 1, col, partner, 1, MPI_COMM_WORLD));
                fill_matrix(m, -2);
                CHECK_MPI(MPI_Recv(m + 7, 1, col, partner, 2, MPI_COMM_WORLD, &st));
                check_matrix(m, 7, DIM, seed + 100, -2, "column back");
            } else {
                fill_matrix(m, -3);
                CHECK_MPI(MPI_Recv(m + DIM - 1, 1, col, partner, 1, MPI_COMM_WORLD, &st));
                check_matrix(m, DIM - 1, DIM, seed, -3, "column there");
                MPI_Get_count(&st, col, &count);
                CHECK(count == 1, "count of columns %d", count);
                MPI_Get_count(&st, MPI_DOUBLE, &count);
                CHECK(count == DIM, "count of doubles %d", count);
                for (int r = 0; r < DIM; r++)
                    m[r * DIM] = val(seed + 100, r);
                CHECK_MPI(MPI_Send(m, 1, col, partner, 2, MPI_COMM_WORLD));
            }
        }
    }

    /* 2. Contiguous doubles into a column and back; 3. a shorter message (10 of 16);
       4. a longer one (truncation: 16 into a column of 8). */
    if (active) {
        double v[DIM];
        MPI_Datatype col8 = column_type(8);
        if (left) {
            for (int i = 0; i < DIM; i++)
                v[i] = val(7, i);
            CHECK_MPI(MPI_Send(v, DIM, MPI_DOUBLE, partner, 3, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Send(v, 10, MPI_DOUBLE, partner, 4, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Send(v, DIM, MPI_DOUBLE, partner, 5, MPI_COMM_WORLD));
            /* A column of 8 into room for 16 contiguous doubles. */
            double back[DIM];
            for (int i = 0; i < DIM; i++)
                back[i] = -8;
            CHECK_MPI(MPI_Recv(back, DIM, MPI_DOUBLE, partner, 6, MPI_COMM_WORLD, &st));
            MPI_Get_count(&st, MPI_DOUBLE, &count);
            CHECK(count == 8, "column of 8 back: %d doubles", count);
            for (int i = 0; i < DIM; i++)
                CHECK(back[i] == (i < 8 ? val(11, i) : -8), "column of 8 back: %d is %g", i, back[i]);
        } else {
            fill_matrix(m, -4);
            CHECK_MPI(MPI_Recv(m + 2, 1, col, partner, 3, MPI_COMM_WORLD, &st));
            check_matrix(m, 2, DIM, 7, -4, "contiguous into column");
            fill_matrix(m, -5);
            CHECK_MPI(MPI_Recv(m + 5, 1, col, partner, 4, MPI_COMM_WORLD, &st));
            check_matrix(m, 5, 10, 7, -5, "10 of 16");
            MPI_Get_count(&st, MPI_DOUBLE, &count);
            CHECK(count == 10, "short message: %d doubles", count);
            MPI_Get_count(&st, col, &count);
            CHECK(count == MPI_UNDEFINED, "short message: count of columns %d", count);
            MPI_Get_elements(&st, col, &count);
            CHECK(count == 10, "short message: %d elements", count);
            fill_matrix(m, -6);
            int rc = MPI_Recv(m + 1, 1, col8, partner, 5, MPI_COMM_WORLD, &st);
            int cls = -1;
            MPI_Error_class(rc, &cls);
            CHECK(cls == MPI_ERR_TRUNCATE, "truncation: class %d", cls);
            /* What fits may or may not have been written (the standard leaves it open; Baton
               writes it); nothing else may be. */
            for (int r = 0; r < 8; r++)
                if (m[r * DIM + 1] == val(7, r))
                    m[r * DIM + 1] = -6;
            check_matrix(m, 1, 0, 7, -6, "truncated");
            for (int r = 0; r < 8; r++)
                m[r * DIM + 1] = val(11, r);
            CHECK_MPI(MPI_Send(m + 1, 1, col8, partner, 6, MPI_COMM_WORLD));
        }
        MPI_Type_free(&col8);
    }

    MPI_Barrier(MPI_COMM_WORLD);

    /* 5. Wildcards and a message that arrives before its receive. */
    MPI_Request early = MPI_REQUEST_NULL;
    if (active) {
        if (left) {
            fill_matrix(m, 0);
            for (int r = 0; r < DIM; r++)
                m[r * DIM + 4] = val(9, r);
            /* Nonblocking: with a small eager limit the column goes by rendezvous, and a
               blocking send before the barrier would wait for a receive posted after it. */
            CHECK_MPI(MPI_Isend(m + 4, 1, col, partner, 7, MPI_COMM_WORLD, &early));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (left)
            CHECK_MPI(MPI_Wait(&early, MPI_STATUS_IGNORE));
        if (!left) {
            fill_matrix(m, -7);
            CHECK_MPI(MPI_Recv(m + 6, 1, col, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            check_matrix(m, 6, DIM, 9, -7, "unexpected, wildcards");
            CHECK(st.MPI_SOURCE == partner && st.MPI_TAG == 7, "status source %d tag %d", st.MPI_SOURCE,
                  st.MPI_TAG);
        }
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* 6. Structs with holes, 1..(largest small) records and one just past 1 KiB packed. */
    if (active) {
        MPI_Datatype rt, rec;
        int bl[3] = {1, 1, 1};
        MPI_Aint disp[3] = {offsetof(rec_t, x), offsetof(rec_t, c), offsetof(rec_t, i)};
        MPI_Datatype ty[3] = {MPI_DOUBLE, MPI_CHAR, MPI_INT};
        MPI_Type_create_struct(3, bl, disp, ty, &rt);
        MPI_Type_create_resized(rt, 0, sizeof(rec_t), &rec);
        MPI_Type_commit(&rec);
        enum { MAXR = 80 }; /* 13 packed bytes each: 78 records = 1014 B, 80 = 1040 B */
        rec_t a[MAXR];
        int counts[] = {1, 2, 78, 79, 80};
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            int n = counts[k];
            if (left) {
                memset(a, 0x5a, sizeof a);
                for (int i = 0; i < n; i++) {
                    a[i].x = val(n, i);
                    a[i].c = (char)('a' + i % 26);
                    a[i].i = n * 1000 + i;
                }
                CHECK_MPI(MPI_Send(a, n, rec, partner, 8, MPI_COMM_WORLD));
            } else {
                memset(a, 0x33, sizeof a);
                CHECK_MPI(MPI_Recv(a, n, rec, partner, 8, MPI_COMM_WORLD, &st));
                MPI_Get_count(&st, rec, &count);
                CHECK(count == n, "records: count %d of %d", count, n);
                for (int i = 0; i < n; i++) {
                    CHECK(a[i].x == val(n, i) && a[i].c == (char)('a' + i % 26) && a[i].i == n * 1000 + i,
                          "record %d of %d", i, n);
                    const unsigned char *b = (const unsigned char *)&a[i];
                    for (size_t p = offsetof(rec_t, c) + 1; p < offsetof(rec_t, i); p++)
                        CHECK(b[p] == 0x33, "record %d of %d: hole byte %zu written", i, n, p);
                }
                for (int i = n; i < MAXR; i++)
                    CHECK(a[i].i == 0x33333333, "record %d past %d written", i, n);
            }
        }
        MPI_Type_free(&rt);
        MPI_Type_free(&rec);
    }

    /* 7. An uncommitted type is an error, not a send. */
    {
        MPI_Datatype raw;
        MPI_Type_vector(4, 1, DIM, MPI_DOUBLE, &raw);
        int dest = active ? partner : rank;
        CHECK_ERR_CLASS(MPI_Send(m, 1, raw, dest, 9, MPI_COMM_WORLD), MPI_ERR_TYPE);
        CHECK_ERR_CLASS(MPI_Recv(m, 1, raw, dest, 9, MPI_COMM_WORLD, &st), MPI_ERR_TYPE);
        MPI_Type_free(&raw);
    }

    MPI_Type_free(&col);
    return check_finish("p2p_ddt_small");
}
