/* ranks: 1 2 3 */
/* timeout: 60 */
/* The name service with port strings that MPI_Open_port did not make: the
   standard leaves the port string to the application, so rank 0 publishes
   "otherhost:122", a string with spaces, one with spaces at both ends, one of
   two lines and one of MPI_MAX_PORT_NAME - 1 characters, each under its own
   service name; every other rank finds each
   one, byte for byte, until rank 0 unpublishes it, after which lookups are
   MPI_ERR_NAME everywhere. Rank 1 (with 3+ ranks) publishes too, and rank 0
   and 2 find its name: publishers other than rank 0 are seen as well. */
#include "dpm_util.h"

enum { NPORTS = 5 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    dpm_errors_return();
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);

    /* names unique to this run: concurrent runs share the name service */
    long tag[2];
    dpm_run_tag(tag);

    static char ports[NPORTS][MPI_MAX_PORT_NAME];
    strcpy(ports[0], "otherhost:122");
    strcpy(ports[1], "a port string, with spaces: 1 2 3");
    for (int i = 0; i < MPI_MAX_PORT_NAME - 1; i++)
        ports[2][i] = (char)('a' + i % 26);
    ports[2][MPI_MAX_PORT_NAME - 1] = '\0';
    strcpy(ports[3], "  padded port  ");
    strcpy(ports[4], "line one\nline two\r\n");
    char services[NPORTS][96];
    for (int i = 0; i < NPORTS; i++)
        snprintf(services[i], sizeof services[i], "any-port-%ld-%ld-%d", tag[0], tag[1], i);
    char mine[96];
    snprintf(mine, sizeof mine, "any-port-%ld-%ld-rank1", tag[0], tag[1]);

    char found[MPI_MAX_PORT_NAME];
    if (wrank == 0)
        for (int i = 0; i < NPORTS; i++)
            CHECK_MPI(MPI_Publish_name(services[i], MPI_INFO_NULL, ports[i]));
    if (wrank == 1 && wsize > 2)
        CHECK_MPI(MPI_Publish_name(mine, MPI_INFO_NULL, "rank 1's own port"));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    for (int i = 0; i < NPORTS; i++) {
        memset(found, 'x', sizeof found);
        CHECK_MPI(MPI_Lookup_name(services[i], MPI_INFO_NULL, found));
        CHECK(memcmp(found, ports[i], strlen(ports[i]) + 1) == 0,
              "lookup of %s: '%.40s...', published '%.40s...'", services[i], found, ports[i]);
    }
    if (wsize > 2 && wrank != 1) {
        memset(found, 0, sizeof found);
        CHECK_MPI(MPI_Lookup_name(mine, MPI_INFO_NULL, found));
        CHECK(strcmp(found, "rank 1's own port") == 0, "lookup of %s: '%s'", mine, found);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (wrank == 0)
        for (int i = 0; i < NPORTS; i++)
            CHECK_MPI(MPI_Unpublish_name(services[i], MPI_INFO_NULL, ports[i]));
    if (wrank == 1 && wsize > 2)
        CHECK_MPI(MPI_Unpublish_name(mine, MPI_INFO_NULL, "rank 1's own port"));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < NPORTS; i++)
        CHECK_ERR_CLASS(MPI_Lookup_name(services[i], MPI_INFO_NULL, found), MPI_ERR_NAME);
    if (wsize > 2)
        CHECK_ERR_CLASS(MPI_Lookup_name(mine, MPI_INFO_NULL, found), MPI_ERR_NAME);
    return check_finish("dpm_names_any_port");
}
