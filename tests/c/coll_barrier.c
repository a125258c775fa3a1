/* ranks: 1 2 3 4 5 8 16 */
/* timeout: 120 */
/* algorithms: BATON_COLL_BARRIER=auto,dissemination,shm */
/* MPI_Barrier, MPI_Ibarrier and MPI_Barrier_init: no rank may leave the
   barrier before the last one has entered it. Each rank in turn enters late
   (after a short sleep); it notes the time just before it calls the barrier
   (or MPI_Start), every rank notes the time when its barrier completes
   (MPI_Wait, a MPI_Test polling loop, or MPI_Waitany returns), and the late
   rank's entry must not be later than anybody's exit. Times come from
   CLOCK_MONOTONIC, which all processes of one machine share: the check runs
   only when every rank reports the same processor name. Also many
   back-to-back barriers of every form, and barriers on MPI_COMM_SELF. On
   MPI_COMM_WORLD and on a split communicator. */
#include "coll_util.h"

typedef struct {
    int late;
    double t_enter, t_exit;
} br_case;

static int same_host = 1;

static void br_fill(void *p, int iter)
{
    br_case *c = p;
    (void)iter;
    if (cu_rank == c->late) {
        struct timespec ts = {0, 1000000}; /* 1 ms */
        nanosleep(&ts, NULL);
        c->t_enter = cu_now();
    }
}

static int br_call(void *p, int mode, MPI_Request *req)
{
    (void)p;
    switch (mode) {
    case CU_BLOCKING:
        return MPI_Barrier(cu_comm);
    case CU_NONBLOCKING:
        return MPI_Ibarrier(cu_comm, req);
#if CU_MPI4
    case CU_PERSISTENT:
        return MPI_Barrier_init(cu_comm, MPI_INFO_NULL, req);
#endif
    }
    return MPI_ERR_OTHER;
}

#define BR_TAG 4711

static void br_check(void *p, int iter)
{
    br_case *c = p;
    (void)iter;
    c->t_exit = cu_now();
    /* the late rank tells the others when it entered (point-to-point) */
    double t = c->t_enter;
    if (cu_rank == c->late) {
        for (int r = 0; r < cu_size; r++)
            if (r != c->late)
                MPI_Send(&t, 1, MPI_DOUBLE, r, BR_TAG, cu_comm);
    } else {
        MPI_Recv(&t, 1, MPI_DOUBLE, c->late, BR_TAG, cu_comm, MPI_STATUS_IGNORE);
    }
    if (same_host && c->t_exit < t)
        CU_FAIL("left the barrier %.6f s before rank %d entered it", t - c->t_exit, c->late);
}

static const cu_ops br_ops = {br_fill, br_call, br_check};

static void run_all(void)
{
    for (int late = 0; late < cu_size; late++) {
        br_case c = {late, 0, 0};
        snprintf(cu_desc, sizeof cu_desc, "rank %d enters late", late);
        cu_run("Barrier", &c, &br_ops, 0);
    }
    /* back to back: 50 of each form */
    cu_coll = "Barrier";
    snprintf(cu_desc, sizeof cu_desc, "50 back-to-back barriers");
    cu_mode = CU_BLOCKING;
    for (int i = 0; i < 50; i++)
        if (!cu_ok(MPI_Barrier(cu_comm), "MPI_Barrier"))
            break;
    cu_mode = CU_NONBLOCKING;
    for (int i = 0; i < 50; i++) {
        MPI_Request r;
        if (!cu_ok(MPI_Ibarrier(cu_comm, &r), "MPI_Ibarrier") || !cu_complete(&r, i))
            break;
    }
#if CU_MPI4
    cu_mode = CU_PERSISTENT;
    MPI_Request r;
    if (cu_ok(MPI_Barrier_init(cu_comm, MPI_INFO_NULL, &r), "MPI_Barrier_init")) {
        for (int i = 0; i < 50; i++)
            if (!cu_ok(MPI_Start(&r), "MPI_Start") || !cu_complete(&r, i))
                break;
        cu_ok(MPI_Request_free(&r), "MPI_Request_free");
    }
#endif
}

int main(int argc, char **argv)
{
    cu_init(&argc, &argv);

    /* same machine? compare processor names with rank 0's */
    char name[MPI_MAX_PROCESSOR_NAME] = {0}, name0[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    if (cu_wrank == 0) {
        for (int r = 1; r < cu_wsize; r++) {
            MPI_Recv(name0, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, r, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            if (strcmp(name0, name) != 0)
                same_host = 0;
        }
        for (int r = 1; r < cu_wsize; r++)
            MPI_Send(&same_host, 1, MPI_INT, r, 2, MPI_COMM_WORLD);
        if (!same_host)
            printf("note: ranks on several machines, barrier timing not checked\n");
    } else {
        MPI_Send(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        MPI_Recv(&same_host, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }

    run_all();
    const char *sname;
    MPI_Comm split = cu_split_comm(&sname);
    cu_set_comm(split, sname);
    run_all();
    MPI_Comm_free(&split);
    cu_set_comm(MPI_COMM_SELF, "SELF");
    run_all();
    cu_set_comm(MPI_COMM_WORLD, "WORLD");
    return cu_finish("coll_barrier");
}
