/* ranks: 1 2 */
/* threads */
/* Generalized requests (MPI_Grequest_start, MPI_Grequest_complete): query_fn
   fills the status when a Wait/Test completes the request (MPI_Status_set_
   elements, _source, _tag, _cancelled in it), free_fn runs once after it, and
   the handle becomes MPI_REQUEST_NULL; MPI_Request_get_status calls query_fn
   and frees nothing; MPI_Request_free before completion defers free_fn to
   MPI_Grequest_complete; MPI_Cancel calls cancel_fn with whether the request
   is complete; a query_fn error is the call's error (MPI_ERR_IN_STATUS with
   the code in the status for Waitall). Completion by another thread wakes a
   waiting MPI_Wait; generalized and ordinary requests mixed in Waitall,
   Waitany and Testsome. Prints SKIP without MPI_THREAD_MULTIPLE. */
#include "check.h"
#include <pthread.h>
#include <time.h>

struct greq {
    int id;
    int queries, frees, cancels;
    int cancel_complete; /* the last cancel_fn's complete flag */
    int query_error;     /* what query_fn returns */
    int order_ok;        /* free_fn came after a query_fn (or freed unwaited) */
    MPI_Request req;     /* for the completing thread */
};

static int query_fn(void *extra, MPI_Status *st)
{
    struct greq *g = extra;
    g->queries++;
    MPI_Status_set_elements(st, MPI_INT, 3 + g->id);
    MPI_Status_set_source(st, 100 + g->id);
    MPI_Status_set_tag(st, 200 + g->id);
    MPI_Status_set_cancelled(st, g->cancels > 0);
    return g->query_error;
}

static int free_fn(void *extra)
{
    struct greq *g = extra;
    g->frees++;
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete)
{
    struct greq *g = extra;
    g->cancels++;
    g->cancel_complete = complete;
    return MPI_SUCCESS;
}

static void start(struct greq *g, int id)
{
    memset(g, 0, sizeof *g);
    g->id = id;
    CHECK_MPI(MPI_Grequest_start(query_fn, free_fn, cancel_fn, g, &g->req));
    CHECK(g->req != MPI_REQUEST_NULL, "Grequest_start gave MPI_REQUEST_NULL");
}

static void check_greq_status(const MPI_Status *st, int id, const char *what)
{
    int c = -1, canc = -1;
    MPI_Get_count(st, MPI_INT, &c);
    MPI_Test_cancelled(st, &canc);
    CHECK(st->MPI_SOURCE == 100 + id && st->MPI_TAG == 200 + id && c == 3 + id && canc == 0,
          "%s: status source %d tag %d count %d cancelled %d, expected %d %d %d 0", what,
          st->MPI_SOURCE, st->MPI_TAG, c, canc, 100 + id, 200 + id, 3 + id);
}

static void *complete_later(void *arg)
{
    struct greq *g = arg;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    CHECK_MPI(MPI_Grequest_complete(g->req));
    return NULL;
}

static void basic(void)
{
    struct greq g;
    MPI_Status st;
    int flag = -1;
    MPI_Request r;
    start(&g, 1);
    r = g.req;
    CHECK_MPI(MPI_Test(&r, &flag, &st));
    CHECK(flag == 0 && r == g.req, "Test of an incomplete generalized request: flag %d", flag);
    CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    CHECK(flag == 0 && g.queries == 0, "get_status before completion: flag %d queries %d", flag,
          g.queries);
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK(g.queries == 0 && g.frees == 0, "Grequest_complete ran callbacks (%d %d)", g.queries, g.frees);
    CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    CHECK(flag == 1 && g.queries == 1 && g.frees == 0, "get_status: flag %d queries %d frees %d", flag,
          g.queries, g.frees);
    check_greq_status(&st, 1, "Request_get_status");
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL, "Wait left the request");
    CHECK(g.queries == 2 && g.frees == 1, "after Wait: queries %d frees %d", g.queries, g.frees);
    check_greq_status(&st, 1, "Wait");
}

static void from_thread(void)
{
    struct greq g;
    MPI_Status st;
    pthread_t t;
    start(&g, 2);
    MPI_Request r = g.req;
    pthread_create(&t, NULL, complete_later, &g);
    CHECK_MPI(MPI_Wait(&r, &st));
    pthread_join(t, NULL);
    CHECK(r == MPI_REQUEST_NULL && g.queries == 1 && g.frees == 1,
          "Wait on a request completed by a thread: queries %d frees %d", g.queries, g.frees);
    check_greq_status(&st, 2, "Wait (thread)");
}

static void mixed(int rank, int size)
{
    int peer = (rank + 1) % size, from = (rank + size - 1) % size, v = rank, got = -1, never = 0;
    struct greq g, h;
    MPI_Status st[4];
    pthread_t t;

    /* Waitall: an ordinary receive, a generalized request completed by a thread, a null one. */
    start(&g, 3);
    MPI_Request r[3];
    CHECK_MPI(MPI_Irecv(&got, 1, MPI_INT, from, 7, MPI_COMM_WORLD, &r[0]));
    r[1] = g.req;
    r[2] = MPI_REQUEST_NULL;
    pthread_create(&t, NULL, complete_later, &g);
    MPI_Send(&v, 1, MPI_INT, peer, 7, MPI_COMM_WORLD);
    CHECK_MPI(MPI_Waitall(3, r, st));
    pthread_join(t, NULL);
    CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "Waitall left requests");
    CHECK(got == from && st[0].MPI_SOURCE == from && st[0].MPI_TAG == 7, "Waitall receive: %d from %d",
          got, st[0].MPI_SOURCE);
    check_greq_status(&st[1], 3, "Waitall");
    CHECK(g.queries == 1 && g.frees == 1, "Waitall: queries %d frees %d", g.queries, g.frees);

    /* Waitany: a receive that never matches and a generalized request. */
    start(&h, 4);
    CHECK_MPI(MPI_Irecv(&never, 1, MPI_INT, from, 999, MPI_COMM_WORLD, &r[0]));
    r[1] = h.req;
    int idx = -1;
    pthread_create(&t, NULL, complete_later, &h);
    CHECK_MPI(MPI_Waitany(2, r, &idx, &st[0]));
    pthread_join(t, NULL);
    CHECK(idx == 1 && r[1] == MPI_REQUEST_NULL, "Waitany: index %d", idx);
    check_greq_status(&st[0], 4, "Waitany");
    CHECK(h.frees == 1, "Waitany: frees %d", h.frees);
    MPI_Cancel(&r[0]);
    CHECK_MPI(MPI_Wait(&r[0], MPI_STATUS_IGNORE));

    /* Testsome: two generalized requests, one complete. */
    start(&g, 5);
    start(&h, 6);
    r[0] = g.req;
    r[1] = h.req;
    CHECK_MPI(MPI_Grequest_complete(h.req));
    int out = -1, ind[2] = {-1, -1};
    CHECK_MPI(MPI_Testsome(2, r, &out, ind, st));
    CHECK(out == 1 && ind[0] == 1 && r[1] == MPI_REQUEST_NULL && r[0] == g.req,
          "Testsome: outcount %d index %d", out, ind[0]);
    if (out == 1)
        check_greq_status(&st[0], 6, "Testsome");
    CHECK(g.queries == 0 && h.queries == 1 && h.frees == 1, "Testsome ran the wrong callbacks");
    CHECK_MPI(MPI_Grequest_complete(g.req));
    CHECK_MPI(MPI_Testsome(2, r, &out, ind, MPI_STATUSES_IGNORE));
    CHECK(out == 1 && ind[0] == 0 && g.frees == 1, "Testsome (2): outcount %d frees %d", out, g.frees);
}

static void cancel_and_free(void)
{
    struct greq g;
    MPI_Status st;
    int canc = -1;
    /* Cancel before completion: cancel_fn told "not complete"; query_fn reports it. */
    start(&g, 7);
    MPI_Request r = g.req;
    CHECK_MPI(MPI_Cancel(&r));
    CHECK(g.cancels == 1 && g.cancel_complete == 0, "cancel_fn: %d calls, complete %d", g.cancels,
          g.cancel_complete);
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_MPI(MPI_Cancel(&r));
    CHECK(g.cancels == 2 && g.cancel_complete == 1, "cancel_fn after completion: complete %d",
          g.cancel_complete);
    CHECK_MPI(MPI_Wait(&r, &st));
    MPI_Test_cancelled(&st, &canc);
    CHECK(canc == 1, "query_fn's MPI_Status_set_cancelled not seen");

    /* Request_free before completion: free_fn waits for Grequest_complete. */
    start(&g, 8);
    r = g.req;
    CHECK_MPI(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL && g.frees == 0, "Request_free: frees %d before completion", g.frees);
    CHECK_MPI(MPI_Grequest_complete(g.req));
    CHECK(g.frees == 1 && g.queries == 0, "Grequest_complete after Request_free: frees %d queries %d",
          g.frees, g.queries);

    /* Request_free after completion: free_fn at once, no query. */
    start(&g, 9);
    r = g.req;
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_MPI(MPI_Request_free(&r));
    CHECK(g.frees == 1 && g.queries == 0, "Request_free of a complete request: frees %d", g.frees);
}

static void errors(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    struct greq g;
    MPI_Status st[2];
    start(&g, 10);
    g.query_error = MPI_ERR_OTHER;
    MPI_Request r = g.req;
    CHECK_MPI(MPI_Grequest_complete(r));
    CHECK_ERR_CLASS(MPI_Wait(&r, &st[0]), MPI_ERR_OTHER);
    CHECK(r == MPI_REQUEST_NULL && g.frees == 1, "a failed query_fn: request %s, frees %d",
          r == MPI_REQUEST_NULL ? "null" : "left", g.frees);

    start(&g, 11);
    g.query_error = MPI_ERR_OTHER;
    MPI_Request rs[2] = {g.req, MPI_REQUEST_NULL};
    CHECK_MPI(MPI_Grequest_complete(g.req));
    CHECK_ERR_CLASS(MPI_Waitall(2, rs, st), MPI_ERR_IN_STATUS);
    CHECK(st[0].MPI_ERROR == MPI_ERR_OTHER && st[1].MPI_ERROR == MPI_SUCCESS,
          "Waitall statuses' MPI_ERROR %d %d", st[0].MPI_ERROR, st[1].MPI_ERROR);
    CHECK_ERR_CLASS(MPI_Grequest_complete(MPI_REQUEST_NULL), MPI_ERR_REQUEST);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    int provided = 0, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("SKIP grequest: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Finalize();
        return 0;
    }
    basic();
    from_thread();
    mixed(rank, size);
    cancel_and_free();
    errors();
    return check_finish("grequest");
}
