/* ranks: 1 2 3 */
/* Predefined reduction operations on the types of MPI_Type_create_f90_real/complex/integer
   (the standard makes them stand for predefined types): MPI_SUM, MPI_PROD, MPI_MAX, MPI_BAND in
   MPI_Allreduce, MPI_Reduce and MPI_Reduce_local, on the types themselves and on derived types
   built from them; a logical op stays undefined for a real type. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Datatype r8, r4, c8, i4, i8;
    CHECK_MPI(MPI_Type_create_f90_real(15, MPI_UNDEFINED, &r8));
    CHECK_MPI(MPI_Type_create_f90_real(6, MPI_UNDEFINED, &r4));
    CHECK_MPI(MPI_Type_create_f90_complex(6, MPI_UNDEFINED, &c8));
    CHECK_MPI(MPI_Type_create_f90_integer(9, &i4));
    CHECK_MPI(MPI_Type_create_f90_integer(18, &i8));
    double ranks = size * (size - 1) / 2.0;

    double d[2] = {rank + 0.5, -rank}, dsum[2] = {0, 0};
    CHECK_MPI(MPI_Allreduce(d, dsum, 2, r8, MPI_SUM, MPI_COMM_WORLD));
    CHECK(dsum[0] == ranks + 0.5 * size && dsum[1] == -ranks, "real(8) sum %g %g", dsum[0], dsum[1]);

    float f = (float)(rank + 1), fmax = 0;
    CHECK_MPI(MPI_Allreduce(&f, &fmax, 1, r4, MPI_MAX, MPI_COMM_WORLD));
    CHECK(fmax == (float)size, "real(4) max %g", fmax);

    /* complex product: (1 + i)^size */
    float c[2] = {1, 1}, cp[2] = {0, 0};
    CHECK_MPI(MPI_Allreduce(c, cp, 1, c8, MPI_PROD, MPI_COMM_WORLD));
    float wr = 1, wi = 0;
    for (int k = 0; k < size; k++) {
        float t = wr - wi;
        wi = wr + wi;
        wr = t;
    }
    CHECK(cp[0] == wr && cp[1] == wi, "complex prod (%g, %g), expected (%g, %g)", cp[0], cp[1], wr, wi);

    int i = rank + 1, isum = 0, iband = 0;
    CHECK_MPI(MPI_Reduce(&i, &isum, 1, i4, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0)
        CHECK(isum == size * (size + 1) / 2, "integer(4) sum %d", isum);
    int bits = 0xff ^ (1 << rank);
    CHECK_MPI(MPI_Allreduce(&bits, &iband, 1, i4, MPI_BAND, MPI_COMM_WORLD));
    int wband = 0xff;
    for (int k = 0; k < size; k++)
        wband &= 0xff ^ (1 << k);
    CHECK(iband == wband, "integer(4) band %#x, expected %#x", iband, wband);

    long long big[3] = {1, 2, 3}, acc[3] = {10, 20, 30};
    CHECK_MPI(MPI_Reduce_local(big, acc, 3, i8, MPI_SUM));
    CHECK(acc[0] == 11 && acc[1] == 22 && acc[2] == 33, "reduce_local %lld %lld %lld", acc[0], acc[1], acc[2]);

    /* A derived type built from an f90 type: a strided pair of reals. */
    MPI_Datatype vec;
    CHECK_MPI(MPI_Type_vector(2, 1, 2, r8, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    double v[4] = {rank, -1, 2.0 * rank, -1}, vs[4] = {-7, -7, -7, -7};
    CHECK_MPI(MPI_Allreduce(v, vs, 1, vec, MPI_SUM, MPI_COMM_WORLD));
    CHECK(vs[0] == ranks && vs[2] == 2 * ranks && vs[1] == -7 && vs[3] == -7, "vector of real(8): %g %g %g %g",
          vs[0], vs[1], vs[2], vs[3]);
    MPI_Type_free(&vec);

    /* A logical op is still undefined for a real type. */
    int cls = -1;
    MPI_Error_class(MPI_Allreduce(d, dsum, 1, r8, MPI_LAND, MPI_COMM_WORLD), &cls);
    CHECK(cls == MPI_ERR_OP, "MPI_LAND on real(8): class %d, expected MPI_ERR_OP", cls);
    return check_finish("dtype_f90_ops");
}
