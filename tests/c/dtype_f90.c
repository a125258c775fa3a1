/* MPI_Type_create_f90_real/complex/integer: the smallest IEEE kind that meets precision and
 * range, the same handle for the same arguments, combiner and contents, cannot be freed,
 * usable in communication; impossible requests are MPI_ERR_ARG. */
/* ranks: 1 2 */
#include "check.h"

static int size_of(MPI_Datatype t)
{
    int s = -1;
    MPI_Type_size(t, &s);
    return s;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Datatype t, t2;
    struct { int p, r, bytes; } reals[] = {
        {6, MPI_UNDEFINED, 4}, {MPI_UNDEFINED, 37, 4}, {7, 10, 8}, {15, 307, 8}, {6, 38, 8}, {16, 0, 16}, {33, 4931, 16},
    };
    for (size_t k = 0; k < sizeof reals / sizeof reals[0]; k++) {
        CHECK(MPI_Type_create_f90_real(reals[k].p, reals[k].r, &t) == MPI_SUCCESS, "real case %zu", k);
        CHECK(size_of(t) == reals[k].bytes, "real case %zu: size %d", k, size_of(t));
        CHECK(MPI_Type_create_f90_complex(reals[k].p, reals[k].r, &t) == MPI_SUCCESS, "complex case %zu", k);
        CHECK(size_of(t) == 2 * reals[k].bytes, "complex case %zu: size %d", k, size_of(t));
    }
    int ints[][2] = {{1, 1}, {2, 1}, {3, 2}, {4, 2}, {9, 4}, {10, 8}, {18, 8}, {19, 16}, {38, 16}};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        CHECK(MPI_Type_create_f90_integer(ints[k][0], &t) == MPI_SUCCESS, "integer r=%d", ints[k][0]);
        CHECK(size_of(t) == ints[k][1], "integer r=%d: size %d", ints[k][0], size_of(t));
    }

    /* Same arguments, same handle; the envelope names the constructor and its arguments. */
    MPI_Type_create_f90_real(10, 100, &t);
    MPI_Type_create_f90_real(10, 100, &t2);
    CHECK(t == t2, "two handles for the same (p, r)");
    int ni, na, nd, comb;
    MPI_Type_get_envelope(t, &ni, &na, &nd, &comb);
    CHECK(comb == MPI_COMBINER_F90_REAL && ni == 2 && na == 0 && nd == 0, "envelope %d %d %d %d", comb, ni, na, nd);
    int pr[2] = {0, 0};
    MPI_Aint unused_a[1];
    MPI_Datatype unused_d[1];
    MPI_Type_get_contents(t, 2, 0, 0, pr, unused_a, unused_d);
    CHECK(pr[0] == 10 && pr[1] == 100, "contents %d %d", pr[0], pr[1]);
    MPI_Type_create_f90_integer(5, &t2);
    MPI_Type_get_envelope(t2, &ni, &na, &nd, &comb);
    CHECK(comb == MPI_COMBINER_F90_INTEGER && ni == 1, "integer envelope %d %d", comb, ni);

    /* Used in communication: a double-precision real goes around a ring. */
    double v = rank + 0.5, got = -1;
    MPI_Sendrecv(&v, 1, t, (rank + 1) % size, 0, &got, 1, t, (rank + size - 1) % size, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    CHECK(got == (rank + size - 1) % size + 0.5, "received %g", got);

    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int cls = -1;
    MPI_Error_class(MPI_Type_free(&t), &cls);
    CHECK(cls == MPI_ERR_TYPE, "freeing an f90 type: class %d", cls);
    MPI_Error_class(MPI_Type_create_f90_real(34, MPI_UNDEFINED, &t2), &cls);
    CHECK(cls == MPI_ERR_ARG, "precision 34: class %d", cls);
    MPI_Error_class(MPI_Type_create_f90_real(MPI_UNDEFINED, MPI_UNDEFINED, &t2), &cls);
    CHECK(cls == MPI_ERR_ARG, "both undefined: class %d", cls);
    MPI_Error_class(MPI_Type_create_f90_integer(39, &t2), &cls);
    CHECK(cls == MPI_ERR_ARG, "integer range 39: class %d", cls);
    return check_finish("dtype_f90");
}
