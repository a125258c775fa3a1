/* ranks: 1 2 3 4 8 */
/* Error handlers: MPI_ERRORS_RETURN and error classes of provoked errors
   (RANK, TAG, COUNT, TYPE, COMM, ROOT, BUFFER, OP, TRUNCATE with guard
   bytes, REQUEST, IN_STATUS), Error_string, user error handlers
   (create/set/get/call/free), Add_error_class/code/string,
   MPI_LASTUSEDCODE, MPI_ERRORS_ABORT. */
#include "check.h"

static int rank, size;
static int handler_calls = 0;
static MPI_Comm handler_comm = MPI_COMM_NULL;
static int handler_code = MPI_SUCCESS;

static void my_handler(MPI_Comm *comm, int *code, ...)
{
    handler_calls++;
    handler_comm = *comm;
    handler_code = *code;
}

static int err_class(int code)
{
    int c = -1;
    MPI_Error_class(code, &c);
    return c;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* default handler of COMM_WORLD is ERRORS_ARE_FATAL */
    {
        MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
        CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
        CHECK(eh == MPI_ERRORS_ARE_FATAL, "default errhandler of COMM_WORLD is not ERRORS_ARE_FATAL");
        if (eh != MPI_ERRHANDLER_NULL)
            MPI_Errhandler_free(&eh);
    }
#if MPI_VERSION >= 4
    CHECK(MPI_ERRORS_ABORT != MPI_ERRHANDLER_NULL && MPI_ERRORS_ABORT != MPI_ERRORS_RETURN &&
          MPI_ERRORS_ABORT != MPI_ERRORS_ARE_FATAL, "MPI_ERRORS_ABORT not a distinct handler");
#endif

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    {
        MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
        CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
        CHECK(eh == MPI_ERRORS_RETURN, "get_errhandler after set: not ERRORS_RETURN");
        MPI_Errhandler_free(&eh);
        /* a dup inherits the handler */
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        MPI_Comm_get_errhandler(d, &eh);
        CHECK(eh == MPI_ERRORS_RETURN, "dup did not inherit ERRORS_RETURN");
        MPI_Errhandler_free(&eh);
        MPI_Comm_free(&d);
    }

    int buf[16] = {0};
    CHECK_ERR_CLASS(MPI_Send(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Send(buf, 1, MPI_INT, -5, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Recv(buf, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                    MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Send(buf, 1, MPI_INT, 0, -3, MPI_COMM_WORLD), MPI_ERR_TAG);
    {
        int *ub = NULL, flag = 0;
        MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
        if (flag && *ub < 2147483647)
            CHECK_ERR_CLASS(MPI_Send(buf, 1, MPI_INT, 0, *ub + 1, MPI_COMM_WORLD), MPI_ERR_TAG);
        /* MPI_ANY_TAG is not valid for a send */
        CHECK_ERR_CLASS(MPI_Send(buf, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD), MPI_ERR_TAG);
    }
    CHECK_ERR_CLASS(MPI_Send(buf, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    CHECK_ERR_CLASS(MPI_Send(buf, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    CHECK_ERR_CLASS(MPI_Send(buf, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    {
        int s = -1;
        CHECK_ERR_CLASS(MPI_Comm_size(MPI_COMM_NULL, &s), MPI_ERR_COMM);
    }
    CHECK_ERR_CLASS(MPI_Bcast(buf, 1, MPI_INT, size, MPI_COMM_WORLD), MPI_ERR_ROOT);
    CHECK_ERR_CLASS(MPI_Bcast(buf, 1, MPI_INT, -1, MPI_COMM_WORLD), MPI_ERR_ROOT);
    CHECK_ERR_CLASS(MPI_Send(NULL, 4, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    {
        int out = 0;
        CHECK_ERR_CLASS(MPI_Reduce(buf, &out, 1, MPI_INT, MPI_OP_NULL, 0, MPI_COMM_WORLD),
                        MPI_ERR_OP);
    }
    {
        MPI_Request r = MPI_REQUEST_NULL;
        CHECK_ERR_CLASS(MPI_Request_free(&r), MPI_ERR_REQUEST);
        r = MPI_REQUEST_NULL;
        CHECK_ERR_CLASS(MPI_Start(&r), MPI_ERR_REQUEST);
    }
    /* an error does not break the communicator */
    MPI_Barrier(MPI_COMM_WORLD);

    /* truncation: 10 ints into a 4-int buffer followed by guard bytes */
    {
        int send[10];
        for (int i = 0; i < 10; i++)
            send[i] = 1000 + i;
        struct {
            int data[4];
            unsigned char guard[64];
        } rb;
        memset(&rb, 0xA5, sizeof rb);
        MPI_Request sr;
        MPI_Status st;
        MPI_Isend(send, 10, MPI_INT, rank, 11, MPI_COMM_WORLD, &sr);
        int rc = MPI_Recv(rb.data, 4, MPI_INT, rank, 11, MPI_COMM_WORLD, &st);
        CHECK(rc != MPI_SUCCESS && err_class(rc) == MPI_ERR_TRUNCATE,
              "truncated Recv returned %d (class %d)", rc, err_class(rc));
        int guard_ok = 1;
        for (size_t i = 0; i < sizeof rb.guard; i++)
            if (rb.guard[i] != 0xA5)
                guard_ok = 0;
        CHECK(guard_ok, "truncated receive wrote past the receive buffer");
        MPI_Wait(&sr, MPI_STATUS_IGNORE);

        /* non-blocking: error reported by Wait */
        memset(&rb, 0xA5, sizeof rb);
        MPI_Request rr;
        CHECK_MPI(MPI_Irecv(rb.data, 2, MPI_INT, rank, 12, MPI_COMM_WORLD, &rr));
        MPI_Isend(send, 3, MPI_INT, rank, 12, MPI_COMM_WORLD, &sr);
        rc = MPI_Wait(&rr, &st);
        CHECK(rc != MPI_SUCCESS && err_class(rc) == MPI_ERR_TRUNCATE,
              "truncated Irecv+Wait returned class %d", err_class(rc));
        CHECK(rb.data[2] == (int)0xA5A5A5A5 && rb.guard[0] == 0xA5,
              "truncated Irecv wrote past 2 ints");
        MPI_Wait(&sr, MPI_STATUS_IGNORE);

        /* Waitall: MPI_ERR_IN_STATUS, the failing status carries the class */
        MPI_Request reqs[3];
        MPI_Status sts[3];
        int ok1 = -1, ok2 = -1;
        int small[1];
        MPI_Irecv(&ok1, 1, MPI_INT, rank, 13, MPI_COMM_WORLD, &reqs[0]);
        MPI_Irecv(small, 1, MPI_INT, rank, 14, MPI_COMM_WORLD, &reqs[1]);
        MPI_Irecv(&ok2, 1, MPI_INT, rank, 15, MPI_COMM_WORLD, &reqs[2]);
        MPI_Request s3[3];
        MPI_Isend(&send[0], 1, MPI_INT, rank, 13, MPI_COMM_WORLD, &s3[0]);
        MPI_Isend(send, 5, MPI_INT, rank, 14, MPI_COMM_WORLD, &s3[1]);
        MPI_Isend(&send[2], 1, MPI_INT, rank, 15, MPI_COMM_WORLD, &s3[2]);
        for (int i = 0; i < 3; i++)
            sts[i].MPI_ERROR = -77;
        rc = MPI_Waitall(3, reqs, sts);
        CHECK(err_class(rc) == MPI_ERR_IN_STATUS, "Waitall with a truncation: class %d",
              err_class(rc));
        if (err_class(rc) == MPI_ERR_IN_STATUS) {
            CHECK(err_class(sts[1].MPI_ERROR) == MPI_ERR_TRUNCATE, "status[1].MPI_ERROR class %d",
                  err_class(sts[1].MPI_ERROR));
            /* the others either completed (MPI_SUCCESS) or are still pending
               (MPI_ERR_PENDING, request left active) */
            CHECK(sts[0].MPI_ERROR == MPI_SUCCESS || sts[0].MPI_ERROR == MPI_ERR_PENDING,
                  "status[0].MPI_ERROR %d", sts[0].MPI_ERROR);
            CHECK(sts[2].MPI_ERROR == MPI_SUCCESS || sts[2].MPI_ERROR == MPI_ERR_PENDING,
                  "status[2].MPI_ERROR %d", sts[2].MPI_ERROR);
            for (int i = 0; i < 3; i += 2) {
                if (sts[i].MPI_ERROR == MPI_ERR_PENDING) {
                    CHECK(reqs[i] != MPI_REQUEST_NULL, "pending request %d was freed", i);
                    CHECK_MPI(MPI_Wait(&reqs[i], MPI_STATUS_IGNORE));
                } else {
                    CHECK(reqs[i] == MPI_REQUEST_NULL, "completed request %d not freed", i);
                }
            }
        }
        CHECK(ok1 == 1000 && ok2 == 1002, "Waitall data %d %d", ok1, ok2);
        MPI_Waitall(3, s3, MPI_STATUSES_IGNORE);
    }

    /* Error_string */
    {
        int classes[] = {MPI_SUCCESS, MPI_ERR_RANK, MPI_ERR_TRUNCATE, MPI_ERR_COMM, MPI_ERR_OTHER};
        for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
            char s[MPI_MAX_ERROR_STRING];
            int len = -1;
            memset(s, 0, sizeof s);
            CHECK_MPI(MPI_Error_string(classes[i], s, &len));
            CHECK(len > 0 && len < MPI_MAX_ERROR_STRING && (size_t)len == strlen(s),
                  "Error_string(%d): len %d strlen %zu", classes[i], len, strlen(s));
            int c = -1;
            MPI_Error_class(classes[i], &c);
            CHECK(c == classes[i], "Error_class of class %d gave %d", classes[i], c);
            if (rank == 0 && (classes[i] == MPI_ERR_RANK || classes[i] == MPI_ERR_TRUNCATE))
                printf("# Error_string(%d) = \"%s\"\n", classes[i], s);
        }
        CHECK(MPI_ERR_LASTCODE >= MPI_ERR_OTHER && MPI_ERR_LASTCODE >= MPI_ERR_TRUNCATE,
              "MPI_ERR_LASTCODE %d too small", MPI_ERR_LASTCODE);
    }

    /* user error handler */
    {
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
        CHECK_MPI(MPI_Comm_create_errhandler(my_handler, &eh));
        CHECK(eh != MPI_ERRHANDLER_NULL, "create_errhandler gave NULL");
        CHECK_MPI(MPI_Comm_set_errhandler(d, eh));
        int rc = MPI_Send(buf, 1, MPI_INT, size + 1, 0, d);
        CHECK(handler_calls == 1, "user handler called %d times", handler_calls);
        CHECK(handler_comm == d, "user handler got the wrong communicator");
        CHECK(err_class(handler_code) == MPI_ERR_RANK, "user handler code class %d",
              err_class(handler_code));
        CHECK(rc != MPI_SUCCESS && err_class(rc) == MPI_ERR_RANK,
              "call returned class %d after the user handler", err_class(rc));
        /* the handler of the parent is untouched */
        rc = MPI_Send(buf, 1, MPI_INT, size + 1, 0, MPI_COMM_WORLD);
        CHECK(handler_calls == 1 && err_class(rc) == MPI_ERR_RANK, "world error reached user handler");

        /* get_errhandler returns it; free of our handle keeps it attached */
        MPI_Errhandler got = MPI_ERRHANDLER_NULL;
        CHECK_MPI(MPI_Comm_get_errhandler(d, &got));
        CHECK(got == eh, "get_errhandler did not return the user handler");
        CHECK_MPI(MPI_Errhandler_free(&got));
        CHECK_MPI(MPI_Errhandler_free(&eh));
        CHECK(eh == MPI_ERRHANDLER_NULL, "Errhandler_free did not null the handle");

        /* call_errhandler invokes it with the given code */
        handler_calls = 0;
        CHECK_MPI(MPI_Comm_call_errhandler(d, MPI_ERR_TAG));
        CHECK(handler_calls == 1 && handler_code == MPI_ERR_TAG && handler_comm == d,
              "call_errhandler: calls %d code %d", handler_calls, handler_code);

        /* user-defined class/code/string */
        int cls = -1, code = -1, code2 = -1;
        int *last = NULL, flag = 0, last_before = -1;
        CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
        CHECK(flag && last && *last >= MPI_ERR_OTHER, "MPI_LASTUSEDCODE before: flag %d value %d",
              flag, last ? *last : -1);
        if (flag && last)
            last_before = *last;
        CHECK_MPI(MPI_Add_error_class(&cls));
        CHECK(cls > MPI_ERR_LASTCODE || cls > MPI_ERR_OTHER, "new class %d", cls);
        CHECK_MPI(MPI_Add_error_code(cls, &code));
        CHECK_MPI(MPI_Add_error_code(cls, &code2));
        CHECK(code != code2 && code != cls, "codes %d %d class %d", code, code2, cls);
        CHECK(err_class(code) == cls && err_class(code2) == cls && err_class(cls) == cls,
              "Error_class of new codes: %d %d %d (class %d)", err_class(code), err_class(code2),
              err_class(cls), cls);
        CHECK_MPI(MPI_Add_error_string(code, "baton test error code"));
        CHECK_MPI(MPI_Add_error_string(cls, "baton test error class"));
        char s[MPI_MAX_ERROR_STRING];
        int len = -1;
        CHECK_MPI(MPI_Error_string(code, s, &len));
        CHECK(strcmp(s, "baton test error code") == 0 && len == (int)strlen(s),
              "Error_string(new code) = '%s' len %d", s, len);
        CHECK_MPI(MPI_Error_string(cls, s, &len));
        CHECK(strcmp(s, "baton test error class") == 0, "Error_string(new class) = '%s'", s);
        /* MPI_LASTUSEDCODE is the current maximum error class (incl. user ones) */
        last = NULL;
        flag = 0;
        CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
        CHECK(flag && last && *last >= cls && *last > last_before,
              "MPI_LASTUSEDCODE %d (before %d, new class %d)", last ? *last : -1, last_before, cls);
        /* call the user handler with a user code */
        handler_calls = 0;
        MPI_Comm_call_errhandler(d, code2);
        CHECK(handler_calls == 1 && handler_code == code2, "call_errhandler with user code");

        /* setting MPI_ERRORS_ABORT is in errors_abort.c (crashes MPICH 4.0.2) */
        MPI_Comm_free(&d);
    }
    return check_finish("errhandler");
}
