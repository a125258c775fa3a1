/* ranks: 1 2 */
/* timeout: 90 */
/* The names MPI 4.1 (section 7.8) gives to predefined handles: MPI_COMM_WORLD, MPI_COMM_SELF,
   the parent communicator of a spawned process ("MPI_COMM_PARENT", checked in a child this
   test spawns from itself), the null handles that have get_name functions (MPI_COMM_NULL,
   MPI_DATATYPE_NULL, MPI_WIN_NULL) and predefined datatypes; a name set by the application
   replaces the default, also on the parent communicator. */
#define _GNU_SOURCE
#include "check.h"
#include <unistd.h>

static void comm_name_is(MPI_Comm c, const char *want)
{
    char s[MPI_MAX_OBJECT_NAME];
    int len = -1;
    CHECK_MPI(MPI_Comm_get_name(c, s, &len));
    CHECK(len == (int)strlen(want) && strcmp(s, want) == 0, "communicator name \"%s\" (len %d), expected \"%s\"", s,
          len, want);
}

static void type_name_is(MPI_Datatype t, const char *want)
{
    char s[MPI_MAX_OBJECT_NAME];
    int len = -1;
    CHECK_MPI(MPI_Type_get_name(t, s, &len));
    CHECK(len == (int)strlen(want) && strcmp(s, want) == 0, "datatype name \"%s\" (len %d), expected \"%s\"", s, len,
          want);
}

static int child(MPI_Comm parent)
{
    /* The child's failures travel to the parents, which report them. */
    comm_name_is(parent, "MPI_COMM_PARENT");
    CHECK_MPI(MPI_Comm_set_name(parent, "renamed parent"));
    comm_name_is(parent, "renamed parent");
    int fails = check_failures;
    MPI_Send(&fails, 1, MPI_INT, 0, 1, parent);
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return child(parent);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    comm_name_is(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    comm_name_is(MPI_COMM_SELF, "MPI_COMM_SELF");
    comm_name_is(MPI_COMM_NULL, "MPI_COMM_NULL");
    type_name_is(MPI_DATATYPE_NULL, "MPI_DATATYPE_NULL");
    type_name_is(MPI_INT, "MPI_INT");
    type_name_is(MPI_DOUBLE_INT, "MPI_DOUBLE_INT");
    {
        char s[MPI_MAX_OBJECT_NAME];
        int len = -1;
        CHECK_MPI(MPI_Win_get_name(MPI_WIN_NULL, s, &len));
        CHECK(len == 12 && strcmp(s, "MPI_WIN_NULL") == 0, "window name \"%s\" (len %d)", s, len);
    }
    /* a freed communicator is not a null one: no name, an error */
    MPI_Comm d, stale;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    stale = d;
    MPI_Comm_free(&d);
    {
        char s[MPI_MAX_OBJECT_NAME];
        int len;
        CHECK_ERR_CLASS(MPI_Comm_get_name(stale, s, &len), MPI_ERR_COMM);
    }

    /* the parent communicator's default name, seen from a spawned child */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0, "readlink /proc/self/exe");
    if (n > 0) {
        self[n] = '\0';
        MPI_Comm inter;
        int code = -1;
        CHECK_MPI(MPI_Comm_spawn(self, MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, &code));
        int rank;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (rank == 0) {
            int child_fails = -1;
            MPI_Recv(&child_fails, 1, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE);
            CHECK(child_fails == 0, "the spawned child reported %d failures", child_fails);
        }
        MPI_Comm_disconnect(&inter);
    }
    return check_finish("names_predefined");
}
