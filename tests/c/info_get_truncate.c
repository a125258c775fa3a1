/* ranks: 1 2 */
/* MPI_Info_get with valuelen shorter than the value: the standard says the
   value is truncated (valuelen characters plus a NUL terminator in C) and the
   call succeeds with flag = true.
   MPICH 4.0.2 deviates: it returns an error ("Value is too long",
   class MPI_ERR_INFO_VALUE) instead of truncating, so this test is expected
   to FAIL under MPICH.  Baton follows the standard. */
#include "check.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "key2", "a longer value");
    char buf[16];
    int flag = -1;
    memset(buf, '#', sizeof buf);
    CHECK_MPI(MPI_Info_get(info, "key2", 3, buf, &flag));
    CHECK(flag == 1 && memcmp(buf, "a l", 3) == 0 && buf[3] == '\0',
          "truncated get: flag %d '%.3s' [3]=%d", flag, buf, buf[3]);
    CHECK(buf[4] == '#' && buf[15] == '#', "truncated get wrote past valuelen+1");
    /* valuelen exactly the length: full value */
    memset(buf, '#', sizeof buf);
    flag = -1;
    CHECK_MPI(MPI_Info_get(info, "key2", 14, buf, &flag));
    CHECK(flag == 1 && strcmp(buf, "a longer value") == 0, "exact get: flag %d '%.15s'", flag, buf);
    MPI_Info_free(&info);
    return check_finish("info_get_truncate");
}
