/* MPI_Comm_spawn across hosts (tests/hosts/run.sh, part "dpm"). Run as
 *
 *     mpiexec -hosts H1:2,H2:2,H3:2 -n 2 dpm_spawn_hosts H1 H2 H3
 *
 * so that both parents are on H1, on hosts where MPI_Get_processor_name is
 * the host's name as given (each namespace host has its own). The parents
 * spawn, keeping every child running until all three spawns are checked:
 *   1. 4 children, no info: the free slots, host by host: H2 H2 H3 H3;
 *   2. 2 children, host "H3,H1", map_by "cyclic": no slot is free any more,
 *      so round-robin over those two hosts, in host-list order: H1 H3;
 *   3. 1 child, host "H2", map_by "slot": H2.
 * Each child sends its processor name to parent 0, which checks where it
 * runs; then parent 0 sends each child a token, both sides MPI_Allreduce
 * over the intercommunicator (each side gets the other side's sum), each
 * child reports its own checks, and both sides MPI_Comm_disconnect.
 * Finally the time of MPI_Comm_spawn itself (children started and
 * connected) for 1 and for 4 children over H2 and H3, 5 times each.
 * Parent 0 prints "dpm_spawn_hosts: ok" or FAIL lines; the exit status
 * says the same. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXC 8
#define NAME MPI_MAX_PROCESSOR_NAME

static int wrank, wsize, failures;
static char self[4096];

#define FAIL(...)                                                              \
    do {                                                                       \
        failures++;                                                            \
        fprintf(stderr, "dpm_spawn_hosts: rank %d: FAIL: ", wrank);            \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
    } while (0)

static int child(MPI_Comm parent)
{
    int rank, psize, err = 0, token = -1;
    char name[NAME];
    int len = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_remote_size(parent, &psize);
    memset(name, 0, sizeof name);
    MPI_Get_processor_name(name, &len);
    MPI_Send(name, NAME, MPI_CHAR, 0, 1, parent);
    MPI_Recv(&token, 1, MPI_INT, 0, 2, parent, MPI_STATUS_IGNORE);
    if (token != 1000 + rank)
        err++;
    int mine = 10 * (rank + 1), theirs = -1;
    MPI_Allreduce(&mine, &theirs, 1, MPI_INT, MPI_SUM, parent);
    if (theirs != psize * (psize + 1) / 2)
        err++;
    MPI_Send(&err, 1, MPI_INT, 0, 3, parent);
    MPI_Comm_disconnect(&parent);
    MPI_Finalize();
    return err != 0;
}

/* Spawns `n` children on the hosts `host` allows, mapped by `map_by`
   (either may be NULL); with `expect`, parent 0 checks their hosts. */
static MPI_Comm spawn(const char *what, int n, const char *host, const char *map_by, const char **expect,
                      double *secs)
{
    MPI_Info info = MPI_INFO_NULL;
    if (host || map_by) {
        MPI_Info_create(&info);
        if (host)
            MPI_Info_set(info, "host", host);
        if (map_by)
            MPI_Info_set(info, "map_by", map_by);
    }
    char *args[] = {"child", NULL};
    int codes[MAXC];
    MPI_Comm inter = MPI_COMM_NULL;
    double t0 = MPI_Wtime();
    int rc = MPI_Comm_spawn(self, args, n, info, 0, MPI_COMM_WORLD, &inter, codes);
    if (secs)
        *secs = MPI_Wtime() - t0;
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING];
        int l = 0;
        MPI_Error_string(rc, s, &l);
        FAIL("%s: MPI_Comm_spawn: %s", what, s);
        return MPI_COMM_NULL;
    }
    if (wrank == 0) {
        char got[MAXC * (NAME + 1)] = "";
        int wrong = 0;
        for (int i = 0; i < n; i++) {
            char name[NAME];
            MPI_Recv(name, NAME, MPI_CHAR, i, 1, inter, MPI_STATUS_IGNORE);
            name[NAME - 1] = '\0';
            strcat(got, i ? " " : "");
            strcat(got, name);
            wrong += expect && strcmp(name, expect[i]) != 0;
        }
        if (wrong) {
            char want[MAXC * (NAME + 1)] = "";
            for (int i = 0; i < n; i++) {
                strcat(want, i ? " " : "");
                strcat(want, expect[i]);
            }
            FAIL("%s: children run on %s, expected %s", what, got, want);
        } else if (expect) {
            printf("%s: %s\n", what, got);
        }
    }
    return inter;
}

/* The rest of the conversation with `n` children, then disconnect. */
static void talk(const char *what, MPI_Comm *inter, int n)
{
    if (*inter == MPI_COMM_NULL)
        return;
    if (wrank == 0)
        for (int i = 0; i < n; i++) {
            int token = 1000 + i;
            MPI_Send(&token, 1, MPI_INT, i, 2, *inter);
        }
    int mine = wrank + 1, theirs = -1;
    MPI_Allreduce(&mine, &theirs, 1, MPI_INT, MPI_SUM, *inter);
    if (theirs != 10 * n * (n + 1) / 2)
        FAIL("%s: MPI_Allreduce over the intercommunicator gave %d, expected %d", what, theirs, 10 * n * (n + 1) / 2);
    if (wrank == 0)
        for (int i = 0; i < n; i++) {
            int err = -1;
            MPI_Recv(&err, 1, MPI_INT, i, 3, *inter, MPI_STATUS_IGNORE);
            if (err)
                FAIL("%s: child %d saw %d wrong values from its parents", what, i, err);
        }
    MPI_Comm_disconnect(inter);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return child(parent);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (argc != 4) {
        if (wrank == 0)
            fprintf(stderr, "usage: mpiexec -hosts H1:2,H2:2,H3:2 -n 2 %s H1 H2 H3\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        FAIL("readlink /proc/self/exe");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    self[n] = '\0';
    const char *h1 = argv[1], *h2 = argv[2], *h3 = argv[3];
    char name[NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    if (strcmp(name, h1) != 0)
        FAIL("parent %d runs on %s, expected %s", wrank, name, h1);

    const char *e1[] = {h2, h2, h3, h3};
    MPI_Comm i1 = spawn("free slots", 4, NULL, NULL, e1, NULL);
    char list[2 * NAME + 2];
    snprintf(list, sizeof list, "%s,%s", h3, h1);
    const char *e2[] = {h1, h3};
    MPI_Comm i2 = spawn("host list, cyclic", 2, list, "cyclic", e2, NULL);
    const char *e3[] = {h2};
    MPI_Comm i3 = spawn("one host, slot", 1, h2, "slot", e3, NULL);
    talk("free slots", &i1, 4);
    talk("host list, cyclic", &i2, 2);
    talk("one host, slot", &i3, 1);

    snprintf(list, sizeof list, "%s,%s", h2, h3);
    for (int k = 1; k <= 4; k *= 4) {
        double t[5];
        for (int r = 0; r < 5; r++) {
            MPI_Comm i = spawn("timed", k, list, "cyclic", NULL, &t[r]);
            talk("timed", &i, k);
        }
        qsort(t, 5, sizeof t[0], cmp);
        if (wrank == 0)
            printf("MPI_Comm_spawn of %d over %s and %s: median %.1f ms (min %.1f, max %.1f)\n", k, h2, h3,
                   t[2] * 1e3, t[0] * 1e3, t[4] * 1e3);
    }

    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0)
        printf(all ? "dpm_spawn_hosts: FAIL\n" : "dpm_spawn_hosts: ok\n");
    MPI_Finalize();
    return all != 0;
}
