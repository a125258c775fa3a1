/* ranks: 1 2 3 4 8 */
/* Init/finalize/runtime: MPI_Init, Initialized, Finalized (before/after),
   Query_thread, Is_thread_main, Get_version, Get_library_version,
   Get_processor_name, Wtime, Wtick. Rank 0 prints "# ..." info lines. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"
#include <time.h>

int main(int argc, char **argv)
{
    int flag = -1, version = 0, subversion = -1, len = -1;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];

    /* Functions callable before MPI_Init. */
    MPI_Initialized(&flag);
    CHECK(flag == 0, "MPI_Initialized before Init gave %d", flag);
    flag = -1;
    MPI_Finalized(&flag);
    CHECK(flag == 0, "MPI_Finalized before Init gave %d", flag);
    MPI_Get_version(&version, &subversion);
    CHECK(version >= 3, "MPI_Get_version before Init: %d.%d", version, subversion);
    memset(lib, 0, sizeof lib);
    MPI_Get_library_version(lib, &len);
    CHECK(len > 0 && len < MPI_MAX_LIBRARY_VERSION_STRING && (size_t)len == strlen(lib),
          "MPI_Get_library_version before Init: len %d strlen %zu", len, strlen(lib));

    CHECK_MPI(MPI_Init(&argc, &argv));

    flag = 0;
    MPI_Initialized(&flag);
    CHECK(flag == 1, "MPI_Initialized after Init gave %d", flag);
    flag = -1;
    MPI_Finalized(&flag);
    CHECK(flag == 0, "MPI_Finalized after Init gave %d", flag);

    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 1 && rank >= 0 && rank < size, "rank %d size %d", rank, size);

    int provided = -1;
    CHECK_MPI(MPI_Query_thread(&provided));
    CHECK(provided == MPI_THREAD_SINGLE || provided == MPI_THREAD_FUNNELED ||
          provided == MPI_THREAD_SERIALIZED || provided == MPI_THREAD_MULTIPLE,
          "MPI_Query_thread gave %d", provided);
    CHECK(MPI_THREAD_SINGLE < MPI_THREAD_FUNNELED &&
          MPI_THREAD_FUNNELED < MPI_THREAD_SERIALIZED &&
          MPI_THREAD_SERIALIZED < MPI_THREAD_MULTIPLE, "thread level constants not monotonic");
    flag = 0;
    CHECK_MPI(MPI_Is_thread_main(&flag));
    CHECK(flag == 1, "MPI_Is_thread_main gave %d on the main thread", flag);

    version = 0;
    subversion = -1;
    CHECK_MPI(MPI_Get_version(&version, &subversion));
    CHECK(version >= 3 && subversion >= 0, "version %d.%d", version, subversion);
    CHECK(MPI_VERSION >= 3, "MPI_VERSION %d", MPI_VERSION);
    CHECK(version == MPI_VERSION && subversion == MPI_SUBVERSION,
          "Get_version %d.%d differs from MPI_VERSION/MPI_SUBVERSION %d.%d",
          version, subversion, MPI_VERSION, MPI_SUBVERSION);

    char lib2[MPI_MAX_LIBRARY_VERSION_STRING];
    int len2 = -1;
    memset(lib2, 0, sizeof lib2);
    CHECK_MPI(MPI_Get_library_version(lib2, &len2));
    CHECK(len2 > 0 && (size_t)len2 == strlen(lib2), "library version len %d strlen %zu",
          len2, strlen(lib2));
    CHECK(strcmp(lib, lib2) == 0, "library version differs before/after Init");

    char name[MPI_MAX_PROCESSOR_NAME];
    int nlen = -1;
    memset(name, 'x', sizeof name);
    CHECK_MPI(MPI_Get_processor_name(name, &nlen));
    CHECK(nlen > 0 && nlen < MPI_MAX_PROCESSOR_NAME, "processor name len %d", nlen);
    if (nlen > 0 && nlen < MPI_MAX_PROCESSOR_NAME)
        CHECK(name[nlen] == '\0' && strlen(name) == (size_t)nlen,
              "processor name not NUL-terminated at resultlen %d", nlen);

    /* Wtime / Wtick */
    double tick = MPI_Wtick();
    CHECK(tick > 0.0 && tick < 1.0, "MPI_Wtick %g", tick);
    double prev = MPI_Wtime();
    for (int i = 0; i < 100000; i++) {
        double t = MPI_Wtime();
        if (t < prev) {
            CHECK(0, "MPI_Wtime went backwards: %.9f < %.9f", t, prev);
            break;
        }
        prev = t;
    }
    double t0 = MPI_Wtime();
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    double dt = MPI_Wtime() - t0;
    CHECK(dt >= 0.015 && dt < 5.0, "20ms sleep measured as %g s", dt);

    if (rank == 0) {
        char *nl = strchr(lib2, '\n');
        if (nl)
            *nl = '\0';
        printf("# MPI %d.%d, library: %s\n", version, subversion, lib2);
        printf("# processor %s, Wtick %g\n", name, tick);
    }

    /* Finalize by hand: Finalized must become true afterwards. */
    int mine = check_failures, total = 0;
    total = check_collect(mine);
    CHECK_MPI(MPI_Finalize());
    flag = 0;
    MPI_Finalized(&flag);
    CHECK(flag == 1, "MPI_Finalized after Finalize gave %d", flag);
    flag = 0;
    MPI_Initialized(&flag);
    CHECK(flag == 1, "MPI_Initialized after Finalize gave %d", flag);
    version = 0;
    MPI_Get_version(&version, &subversion);
    CHECK(version >= 3, "MPI_Get_version after Finalize: %d", version);
    total += check_failures - mine;
    if (total == 0 && rank == 0)
        printf("PASS init\n");
    return total ? 1 : 0;
}
