/* A function Baton does not implement yet must raise MPI_ERR_UNSUPPORTED_OPERATION through the
 * error handler, with a message naming it; MPI_Abi_get_version must report 1.0. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int fails = 0, major = -1, minor = -1;
    MPI_Abi_get_version(&major, &minor);
    if (major != 1 || minor != 0) { printf("FAIL: ABI version %d.%d\n", major, minor); fails++; }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_File fh = MPI_FILE_NULL;
    int rc = MPI_File_close(&fh);
    int cls = -1, len = 0;
    char msg[MPI_MAX_ERROR_STRING];
    MPI_Error_class(rc, &cls);
    MPI_Error_string(rc, msg, &len);
    if (cls != MPI_ERR_UNSUPPORTED_OPERATION) { printf("FAIL: class %d\n", cls); fails++; }
    if (!strstr(msg, "MPI_File_close")) { printf("FAIL: message '%s' does not name the function\n", msg); fails++; }
    MPI_Finalize();
    if (!fails) printf("PASS unsupported (%s)\n", msg);
    return fails != 0;
}
