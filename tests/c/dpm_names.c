/* ranks: 1 2 3 */
/* timeout: 60 */
/* The name service: rank 0 opens a port and publishes it under a service
   name unique to this run (MPI_Publish_name), MPI_Lookup_name gives back the
   same string on every rank, a second service name for the same port works
   too, publishing a published name again is MPI_ERR_SERVICE. With 2+ ranks,
   rank 1 connects (over MPI_COMM_SELF) to the port it looked up while rank 0
   accepts: the usual conversation, disconnect. Then MPI_Unpublish_name, after
   which lookups on every rank are MPI_ERR_NAME and unpublishing again is
   MPI_ERR_SERVICE; looking up a never-published name is MPI_ERR_NAME and
   unpublishing it MPI_ERR_SERVICE. (The name service across separate mpiexec
   runs is tests/dpm/run.sh.) */
#include "dpm_util.h"

/* Open MPI 4.1.4 accepts a second publication of a name and the
   unpublication of a name that is not published. */
#ifdef SKIP_OMPI_414_BUGS
#define SERVICE_ERROR(call)
#else
#define SERVICE_ERROR(call) CHECK_ERR_CLASS(call, MPI_ERR_SERVICE)
#endif

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
    char service[96], service2[96], never[96];
    snprintf(service, sizeof service, "dpm-names-%ld-%ld", tag[0], tag[1]);
    snprintf(service2, sizeof service2, "dpm-names-%ld-%ld-second", tag[0], tag[1]);
    snprintf(never, sizeof never, "dpm-names-%ld-%ld-never-published", tag[0], tag[1]);

    char port[MPI_MAX_PORT_NAME], found[MPI_MAX_PORT_NAME];
    memset(port, 0, sizeof port);
    if (wrank == 0) {
        CHECK_MPI(MPI_Open_port(MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Publish_name(service, MPI_INFO_NULL, port));
        memset(found, 0, sizeof found);
        CHECK_MPI(MPI_Lookup_name(service, MPI_INFO_NULL, found));
        CHECK(strcmp(found, port) == 0, "lookup by the publisher: '%s', published '%s'", found, port);
        SERVICE_ERROR(MPI_Publish_name(service, MPI_INFO_NULL, port));
        MPI_Info empty;
        MPI_Info_create(&empty);
        CHECK_MPI(MPI_Publish_name(service2, empty, port));
        MPI_Info_free(&empty);
    }
    /* everybody sees both names once rank 0 has published them */
    CHECK_MPI(MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD));
    const char *names[] = {service, service2};
    for (int i = 0; i < 2; i++) {
        memset(found, 0, sizeof found);
        CHECK_MPI(MPI_Lookup_name(names[i], MPI_INFO_NULL, found));
        CHECK(strcmp(found, port) == 0, "lookup of %s: '%s', published '%s'", names[i], found, port);
    }
    CHECK_ERR_CLASS(MPI_Lookup_name(never, MPI_INFO_NULL, found), MPI_ERR_NAME);

    /* rank 1 connects to what it looked up */
    if (wsize > 1 && wrank < 2) {
        MPI_Comm inter = MPI_COMM_NULL;
        if (wrank == 0) {
            CHECK_MPI(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
        } else {
            memset(found, 0, sizeof found);
            CHECK_MPI(MPI_Lookup_name(service, MPI_INFO_NULL, found));
            CHECK_MPI(MPI_Comm_connect(found, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
        }
        if (inter != MPI_COMM_NULL) {
            dpm_exchange("looked-up port", inter, wrank, wrank, 7);
            dpm_disconnect("looked-up port", &inter);
        } else {
            CHECK(0, "no intercommunicator through the looked-up port");
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (wrank == 0) {
        CHECK_MPI(MPI_Unpublish_name(service, MPI_INFO_NULL, port));
        SERVICE_ERROR(MPI_Unpublish_name(service, MPI_INFO_NULL, port));
        SERVICE_ERROR(MPI_Unpublish_name(never, MPI_INFO_NULL, port));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    /* gone for everybody; the second name stays until it is unpublished too */
    CHECK_ERR_CLASS(MPI_Lookup_name(service, MPI_INFO_NULL, found), MPI_ERR_NAME);
    memset(found, 0, sizeof found);
    CHECK_MPI(MPI_Lookup_name(service2, MPI_INFO_NULL, found));
    CHECK(strcmp(found, port) == 0, "lookup of %s after the other name went: '%s'", service2, found);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (wrank == 0) {
        CHECK_MPI(MPI_Unpublish_name(service2, MPI_INFO_NULL, port));
        /* the service can be published again once free */
        CHECK_MPI(MPI_Publish_name(service, MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Unpublish_name(service, MPI_INFO_NULL, port));
        CHECK_MPI(MPI_Close_port(port));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_ERR_CLASS(MPI_Lookup_name(service2, MPI_INFO_NULL, found), MPI_ERR_NAME);
    return check_finish("dpm_names");
}
