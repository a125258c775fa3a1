/* ranks: 1 2 3 */
/* MPI_Abi_get_fortran_booleans / MPI_Abi_set_fortran_booleans (MPI 5.0 ABI, Fortran type
   registration): nothing is set until a Fortran layer sets it (is_set false, outputs left
   alone); a set value comes back for its LOGICAL size only, byte for byte (here Intel
   Fortran's classic -1 for .TRUE.); only the first call per size counts (later ones fail with
   MPI_ERR_ABI); a size that is not a power of two fails with MPI_ERR_ARG; the logical
   reductions on MPI_LOGICALn use the registered values. Needs the standard
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
    /* the logical reductions on 4-byte LOGICALs now read and write these values: a value is
       true unless it is .FALSE., results are .TRUE. or .FALSE. */
    int tsize = 0;
    MPI_Type_size(MPI_LOGICAL4, &tsize);
    if (tsize == 4) {
        int rank, size;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        /* element j: rank r contributes true (as -1, or 5 on odd r) when bit r of j is set */
        int32_t in[8], out[8], a[8], b[8];
        for (int j = 0; j < 8; j++)
            in[j] = (j >> rank) & 1 ? (rank % 2 ? 5 : -1) : 0;
        static const MPI_Op ops[] = {MPI_LAND, MPI_LOR, MPI_LXOR};
        for (int o = 0; o < 3; o++) {
            CHECK_MPI(MPI_Allreduce(in, out, 8, MPI_LOGICAL4, ops[o], MPI_COMM_WORLD));
            for (int j = 0; j < 8; j++) {
                int all = 1, any = 0, odd = 0;
                for (int r = 0; r < size; r++) {
                    int v = (j >> r) & 1;
                    all &= v;
                    any |= v;
                    odd ^= v;
                }
                int want = o == 0 ? all : o == 1 ? any : odd;
                if (size == 1)
                    CHECK(out[j] == in[j], "one process: Allreduce copies");
                else
                    CHECK(out[j] == (want ? -1 : 0), "Allreduce op %d on MPI_LOGICAL4 [%d]: %d, expected %d", o, j,
                          out[j], want ? -1 : 0);
            }
            for (int j = 0; j < 4; j++) {
                a[j] = j & 1 ? 7 : 0;
                b[j] = j & 2 ? -1 : 0;
            }
            CHECK_MPI(MPI_Reduce_local(a, b, 4, MPI_LOGICAL4, ops[o]));
            for (int j = 0; j < 4; j++) {
                int x = j & 1, y = (j >> 1) & 1;
                int want = o == 0 ? x && y : o == 1 ? x || y : x != y;
                CHECK(b[j] == (want ? -1 : 0), "Reduce_local op %d on MPI_LOGICAL4 [%d]: %d", o, j, b[j]);
            }
        }
    }
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
