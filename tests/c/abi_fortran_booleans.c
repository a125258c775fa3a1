/* ranks: 1 2 */
/* MPI_Abi_get_fortran_booleans / MPI_Abi_set_fortran_booleans (MPI 5.0 ABI, Fortran type
   registration): nothing is set until a Fortran layer sets it (is_set false, outputs left
   alone); a set value comes back for its LOGICAL size only, byte for byte (here Intel
   Fortran's classic -1 for .TRUE.); only the first call per size counts (later ones fail with
   MPI_ERR_ABI); a size that is not a power of two fails with MPI_ERR_ARG. Needs the standard
   ABI's mpi.h (MPI_ABI_VERSION); elsewhere it prints SKIP. */
#include "check.h"
#include <stdint.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
#ifndef MPI_ABI_VERSION
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("SKIP abi_fortran_booleans: mpi.h is not the MPI 5.0 ABI's\n");
    MPI_Finalize();
    return 0;
#else
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int32_t t4 = 77, f4 = 77;
    int is_set = -1;
    CHECK_MPI(MPI_Abi_get_fortran_booleans(4, &t4, &f4, &is_set));
    CHECK(is_set == 0, "4-byte booleans set before anyone set them (is_set %d)", is_set);
    CHECK(t4 == 77 && f4 == 77, "outputs written although nothing is set");

    int32_t mt = -1, mf = 0;
    CHECK_MPI(MPI_Abi_set_fortran_booleans(4, &mt, &mf));
    CHECK_MPI(MPI_Abi_get_fortran_booleans(4, &t4, &f4, &is_set));
    CHECK(is_set == 1 && t4 == -1 && f4 == 0, "4-byte booleans: is_set %d true %d false %d", is_set, t4, f4);
    /* the first call counts */
    int32_t t2 = 1, f2 = 0;
    CHECK_ERR_CLASS(MPI_Abi_set_fortran_booleans(4, &t2, &f2), MPI_ERR_ABI);
    CHECK_MPI(MPI_Abi_get_fortran_booleans(4, &t4, &f4, &is_set));
    CHECK(is_set == 1 && t4 == -1, "a second set changed the 4-byte booleans (true %d)", t4);
    /* other sizes are separate */
    int64_t t8 = 5, f8 = 5;
    CHECK_MPI(MPI_Abi_get_fortran_booleans(8, &t8, &f8, &is_set));
    CHECK(is_set == 0, "8-byte booleans set by the 4-byte call");
    uint8_t t1 = 1, f1 = 0, g1 = 9, h1 = 9;
    CHECK_MPI(MPI_Abi_set_fortran_booleans(1, &t1, &f1));
    CHECK_MPI(MPI_Abi_get_fortran_booleans(1, &g1, &h1, &is_set));
    CHECK(is_set == 1 && g1 == 1 && h1 == 0, "1-byte booleans: is_set %d true %d false %d", is_set, g1, h1);
    /* sizes */
    CHECK_ERR_CLASS(MPI_Abi_set_fortran_booleans(3, &t1, &f1), MPI_ERR_ARG);
    CHECK_ERR_CLASS(MPI_Abi_get_fortran_booleans(0, &t1, &f1, &is_set), MPI_ERR_ARG);
    uint16_t same = 1;
    CHECK_ERR_CLASS(MPI_Abi_set_fortran_booleans(2, &same, &same), MPI_ERR_ARG); /* true == false */
    return check_finish("abi_fortran_booleans");
#endif
}
