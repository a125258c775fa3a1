/* ranks: 1 2 */
/* MPI 5.0 standard ABI (only when mpi.h defines MPI_ABI_VERSION; prints
   SKIP elsewhere): MPI_Abi_get_version against the macros, MPI_Abi_get_info,
   MPI_Abi_get_fortran_info, handle values and integer constants fixed by the
   ABI (abi/constants.tsv), sizeof(MPI_Status), the <handle>_toint /
   _fromint round trips, MPI_Status_set_source/tag/error. */
#include "check.h"
#include <stdint.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#if !defined(MPI_ABI_VERSION)
    if (rank == 0)
        printf("SKIP abi: mpi.h does not define MPI_ABI_VERSION\n");
    MPI_Finalize();
    return 0;
#else
    int major = -1, minor = -1;
    CHECK_MPI(MPI_Abi_get_version(&major, &minor));
    CHECK(major == MPI_ABI_VERSION && minor == MPI_ABI_SUBVERSION,
          "Abi_get_version %d.%d, macros %d.%d", major, minor, MPI_ABI_VERSION, MPI_ABI_SUBVERSION);
    CHECK(major >= 1, "ABI major version %d", major);
    CHECK(MPI_VERSION >= 5, "MPI_VERSION %d with the standard ABI", MPI_VERSION);

    {
        MPI_Info info = MPI_INFO_NULL;
        CHECK_MPI(MPI_Abi_get_info(&info));
        CHECK(info != MPI_INFO_NULL, "Abi_get_info gave MPI_INFO_NULL");
        if (info != MPI_INFO_NULL) {
            int n = -1;
            CHECK_MPI(MPI_Info_get_nkeys(info, &n));
            CHECK(n >= 0, "Abi_get_info nkeys %d", n);
            MPI_Info_free(&info);
        }
        info = MPI_INFO_NULL;
        CHECK_MPI(MPI_Abi_get_fortran_info(&info));
        if (info != MPI_INFO_NULL)
            MPI_Info_free(&info);
    }

    /* values fixed by the ABI */
#define HANDLE_IS(h, v) CHECK((uintptr_t)(h) == (uintptr_t)(v), "%s is %#lx, ABI says %#lx", #h, \
                              (unsigned long)(uintptr_t)(h), (unsigned long)(v))
    HANDLE_IS(MPI_COMM_NULL, 0x100);
    HANDLE_IS(MPI_COMM_WORLD, 0x101);
    HANDLE_IS(MPI_COMM_SELF, 0x102);
    HANDLE_IS(MPI_GROUP_EMPTY, 0x109);
    HANDLE_IS(MPI_REQUEST_NULL, 0x180);
    HANDLE_IS(MPI_MESSAGE_NO_PROC, 0x129);
    HANDLE_IS(MPI_INFO_NULL, 0x130);
    HANDLE_IS(MPI_INFO_ENV, 0x131);
    HANDLE_IS(MPI_ERRORS_ARE_FATAL, 0x141);
    HANDLE_IS(MPI_ERRORS_ABORT, 0x142);
    HANDLE_IS(MPI_ERRORS_RETURN, 0x143);
    HANDLE_IS(MPI_OP_NULL, 0x20);
    HANDLE_IS(MPI_SUM, 0x21);
    HANDLE_IS(MPI_DATATYPE_NULL, 0x200);
    HANDLE_IS(MPI_INT, 0x209);
    HANDLE_IS(MPI_DOUBLE, 0x214);
    HANDLE_IS(MPI_CHAR, 0x243);
    HANDLE_IS(MPI_BYTE, 0x247);
    HANDLE_IS(MPI_STATUS_IGNORE, 0);
    HANDLE_IS(MPI_IN_PLACE, 1);
#define INT_IS(c, v) CHECK((c) == (v), "%s is %d, ABI says %d", #c, (int)(c), (int)(v))
    INT_IS(MPI_SUCCESS, 0);
    INT_IS(MPI_ERR_COMM, 5);
    INT_IS(MPI_ERR_RANK, 6);
    INT_IS(MPI_ERR_TRUNCATE, 15);
    INT_IS(MPI_ERR_PENDING, 18);
    INT_IS(MPI_ERR_IN_STATUS, 19);
    INT_IS(MPI_ERR_ABI, 62);
    INT_IS(MPI_ERR_LASTCODE, 16383);
    INT_IS(MPI_ANY_SOURCE, -1);
    INT_IS(MPI_ANY_TAG, -2);
    INT_IS(MPI_PROC_NULL, -3);
    INT_IS(MPI_ROOT, -4);
    INT_IS(MPI_UNDEFINED, -32766);
    INT_IS(MPI_IDENT, 201);
    INT_IS(MPI_UNEQUAL, 204);
    INT_IS(MPI_THREAD_SINGLE, 0);
    INT_IS(MPI_THREAD_MULTIPLE, 4096);
    INT_IS(MPI_KEYVAL_INVALID, 0);
    INT_IS(MPI_TAG_UB, 501);
    INT_IS(MPI_MAX_ERROR_STRING, 512);
    INT_IS(MPI_MAX_PROCESSOR_NAME, 256);
    INT_IS(MPI_MAX_OBJECT_NAME, 128);
    INT_IS(MPI_BSEND_OVERHEAD, 512);
    INT_IS(MPI_F_STATUS_SIZE, 8);
    CHECK(sizeof(MPI_Status) == 8 * sizeof(int), "sizeof(MPI_Status) %zu", sizeof(MPI_Status));

    /* the error class of the ABI error exists */
    {
        int c = -1;
        MPI_Error_class(MPI_ERR_ABI, &c);
        CHECK(c == MPI_ERR_ABI, "Error_class(MPI_ERR_ABI) %d", c);
    }

    /* toint / fromint round trips, predefined and user handles */
    {
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        CHECK(MPI_Comm_fromint(MPI_Comm_toint(MPI_COMM_WORLD)) == MPI_COMM_WORLD, "Comm world");
        CHECK(MPI_Comm_fromint(MPI_Comm_toint(d)) == d, "Comm dup round trip");
        CHECK(MPI_Comm_toint(d) != MPI_Comm_toint(MPI_COMM_WORLD), "dup and world same int");
        MPI_Group g;
        MPI_Comm_group(d, &g);
        CHECK(MPI_Group_fromint(MPI_Group_toint(g)) == g, "Group round trip");
        CHECK(MPI_Type_fromint(MPI_Type_toint(MPI_DOUBLE)) == MPI_DOUBLE, "Type round trip");
        MPI_Datatype ct;
        MPI_Type_contiguous(3, MPI_INT, &ct);
        CHECK(MPI_Type_fromint(MPI_Type_toint(ct)) == ct, "user Type round trip");
        MPI_Type_free(&ct);
        CHECK(MPI_Op_fromint(MPI_Op_toint(MPI_SUM)) == MPI_SUM, "Op round trip");
        MPI_Info info;
        MPI_Info_create(&info);
        CHECK(MPI_Info_fromint(MPI_Info_toint(info)) == info, "Info round trip");
        MPI_Info_free(&info);
        CHECK(MPI_Errhandler_fromint(MPI_Errhandler_toint(MPI_ERRORS_RETURN)) == MPI_ERRORS_RETURN,
              "Errhandler round trip");
        CHECK(MPI_Request_fromint(MPI_Request_toint(MPI_REQUEST_NULL)) == MPI_REQUEST_NULL,
              "Request null round trip");
        MPI_Request r;
        int x = 0;
        MPI_Irecv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, d, &r);
        CHECK(MPI_Request_fromint(MPI_Request_toint(r)) == r, "Request round trip");
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        CHECK(MPI_Message_fromint(MPI_Message_toint(MPI_MESSAGE_NO_PROC)) == MPI_MESSAGE_NO_PROC,
              "Message round trip");
        MPI_Group_free(&g);
        MPI_Comm_free(&d);
    }

    /* Status_set_source / tag / error (MPI 5.0) */
    {
        MPI_Status st;
        memset(&st, 0, sizeof st);
        CHECK_MPI(MPI_Status_set_source(&st, 3));
        CHECK_MPI(MPI_Status_set_tag(&st, 44));
        CHECK_MPI(MPI_Status_set_error(&st, MPI_ERR_TRUNCATE));
        CHECK(st.MPI_SOURCE == 3 && st.MPI_TAG == 44 && st.MPI_ERROR == MPI_ERR_TRUNCATE,
              "status fields %d %d %d", st.MPI_SOURCE, st.MPI_TAG, st.MPI_ERROR);
        CHECK_MPI(MPI_Status_set_elements(&st, MPI_INT, 4));
        int c = -1;
        MPI_Get_count(&st, MPI_INT, &c);
        CHECK(c == 4 && st.MPI_SOURCE == 3 && st.MPI_TAG == 44, "set_elements kept source/tag");
    }
    return check_finish("abi");
#endif
}
