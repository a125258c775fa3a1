/* ranks: 1 2 3 4 */
/* MPI_Isendrecv, MPI_Isendrecv_replace and their _c forms (MPI 4.0): one request
   for a send and a receive. Around a ring, small (eager) and large messages,
   a derived datatype; the status is the receive's (source, tag, count); the
   replace form receives into the buffer it sends from (large messages too, so
   the outgoing bytes must not be overwritten before they leave); MPI_PROC_NULL
   as either peer; completion through Test, Waitall and Waitany mixed with
   ordinary requests; bad arguments give their error classes. */
#include "check.h"

static int rank, size, next, prev;

static void check_status(const MPI_Status *st, int src, int tag, MPI_Datatype dt, int count,
                         const char *what)
{
    int c = -1;
    MPI_Get_count(st, dt, &c);
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag && c == count,
          "%s: status source %d tag %d count %d, expected %d %d %d", what, st->MPI_SOURCE,
          st->MPI_TAG, c, src, tag, count);
}

/* Around the ring: n bytes to next with tag 10+rank, from prev with tag 10+prev. */
static void ring(size_t n, int large)
{
    unsigned char *out = malloc(n), *in = malloc(n + 8);
    check_fill(out, n, rank);
    memset(in, 0, n + 8);
    MPI_Request r;
    MPI_Status st;
    if (large)
        CHECK_MPI(MPI_Isendrecv_c(out, (MPI_Count)n, MPI_BYTE, next, 10 + rank, in, (MPI_Count)n + 8,
                                  MPI_BYTE, prev, 10 + prev, MPI_COMM_WORLD, &r));
    else
        CHECK_MPI(MPI_Isendrecv(out, (int)n, MPI_BYTE, next, 10 + rank, in, (int)n + 8, MPI_BYTE,
                                MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
    CHECK(r != MPI_REQUEST_NULL, "Isendrecv gave MPI_REQUEST_NULL");
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL, "the request is not MPI_REQUEST_NULL after MPI_Wait");
    check_status(&st, prev, 10 + prev, MPI_BYTE, (int)n, large ? "Isendrecv_c" : "Isendrecv");
    long bad = check_verify(in, n, prev);
    CHECK(bad < 0, "Isendrecv of %zu bytes: byte %ld differs", n, bad);
    bad = check_verify(out, n, rank);
    CHECK(bad < 0, "Isendrecv changed its send buffer at byte %ld", bad);
    free(out);
    free(in);
}

static void ring_replace(size_t n, int large)
{
    unsigned char *buf = malloc(n);
    check_fill(buf, n, 100 + rank);
    MPI_Request r;
    MPI_Status st;
    if (large)
        CHECK_MPI(MPI_Isendrecv_replace_c(buf, (MPI_Count)n, MPI_BYTE, next, 20, prev, 20,
                                          MPI_COMM_WORLD, &r));
    else
        CHECK_MPI(MPI_Isendrecv_replace(buf, (int)n, MPI_BYTE, next, 20, prev, 20, MPI_COMM_WORLD, &r));
    int flag = 0;
    while (!flag)
        CHECK_MPI(MPI_Test(&r, &flag, &st));
    CHECK(r == MPI_REQUEST_NULL, "the request is not MPI_REQUEST_NULL after MPI_Test");
    check_status(&st, prev, 20, MPI_BYTE, (int)n, "Isendrecv_replace");
    long bad = check_verify(buf, n, 100 + prev);
    CHECK(bad < 0, "Isendrecv_replace of %zu bytes: byte %ld differs", n, bad);
    free(buf);
}

/* Every other int of a vector goes out; arrives contiguous, and the replace form
   keeps the gaps of its buffer. */
static void typed(void)
{
    MPI_Datatype vec;
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int out[8], in[4], rep[8];
    for (int i = 0; i < 8; i++) {
        out[i] = rank * 100 + i;
        rep[i] = rank * 1000 + i;
    }
    MPI_Request r[2];
    MPI_Status st[2];
    CHECK_MPI(MPI_Isendrecv(out, 1, vec, next, 30, in, 4, MPI_INT, prev, 30, MPI_COMM_WORLD, &r[0]));
    CHECK_MPI(MPI_Isendrecv_replace(rep, 1, vec, next, 31, prev, 31, MPI_COMM_WORLD, &r[1]));
    CHECK_MPI(MPI_Waitall(2, r, st));
    check_status(&st[0], prev, 30, MPI_INT, 4, "typed Isendrecv");
    check_status(&st[1], prev, 31, vec, 1, "typed Isendrecv_replace");
    for (int i = 0; i < 4; i++) {
        CHECK(in[i] == prev * 100 + 2 * i, "typed Isendrecv: in[%d] = %d", i, in[i]);
        CHECK(rep[2 * i] == prev * 1000 + 2 * i, "typed replace: rep[%d] = %d", 2 * i, rep[2 * i]);
        CHECK(rep[2 * i + 1] == rank * 1000 + 2 * i + 1, "typed replace: gap rep[%d] = %d changed",
              2 * i + 1, rep[2 * i + 1]);
    }
    MPI_Type_free(&vec);
}

static void proc_null(void)
{
    int sb[3] = {1, 2, 3}, rb[3] = {7, 7, 7};
    MPI_Request r;
    MPI_Status st;
    CHECK_MPI(MPI_Isendrecv(sb, 3, MPI_INT, MPI_PROC_NULL, 1, rb, 3, MPI_INT, MPI_PROC_NULL, 1,
                            MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Wait(&r, &st));
    check_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_INT, 0, "Isendrecv with MPI_PROC_NULL");
    CHECK(rb[0] == 7 && rb[2] == 7, "Isendrecv from MPI_PROC_NULL wrote the receive buffer");
    CHECK_MPI(MPI_Isendrecv_replace(sb, 3, MPI_INT, MPI_PROC_NULL, 1, MPI_PROC_NULL, 1,
                                    MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Wait(&r, &st));
    check_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, MPI_INT, 0, "Isendrecv_replace with MPI_PROC_NULL");
    CHECK(sb[0] == 1 && sb[2] == 3, "Isendrecv_replace from MPI_PROC_NULL changed the buffer");
    /* Count 0 and MPI_DATATYPE_NULL with MPI_PROC_NULL peers move nothing. */
    CHECK_MPI(MPI_Isendrecv(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 1, NULL, 0, MPI_DATATYPE_NULL,
                            MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));

    /* Only one side null: send to nobody, receive from prev (which sends alone). */
    int v = rank, got = -1;
    MPI_Request s;
    CHECK_MPI(MPI_Isend(&v, 1, MPI_INT, next, 2, MPI_COMM_WORLD, &s));
    CHECK_MPI(MPI_Isendrecv(sb, 3, MPI_INT, MPI_PROC_NULL, 2, &got, 1, MPI_INT, prev, 2,
                            MPI_COMM_WORLD, &r));
    MPI_Request both[3] = {MPI_REQUEST_NULL, r, s};
    int idx = -1, done = 0;
    while (done < 2) {
        CHECK_MPI(MPI_Waitany(3, both, &idx, &st));
        CHECK(idx == 1 || idx == 2, "Waitany gave index %d", idx);
        if (idx == 1)
            check_status(&st, prev, 2, MPI_INT, 1, "Isendrecv to MPI_PROC_NULL");
        done++;
    }
    CHECK(both[1] == MPI_REQUEST_NULL && both[2] == MPI_REQUEST_NULL, "Waitany left requests");
    CHECK(got == prev, "Isendrecv to MPI_PROC_NULL received %d, expected %d", got, prev);
}

static void errors(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int b = 0;
    MPI_Request r = MPI_REQUEST_NULL;
    CHECK_ERR_CLASS(MPI_Isendrecv(&b, -1, MPI_INT, next, 0, &b, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, &r),
                    MPI_ERR_COUNT);
    CHECK_ERR_CLASS(MPI_Isendrecv(&b, 1, MPI_INT, size, 0, &b, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, &r),
                    MPI_ERR_RANK);
    CHECK_ERR_CLASS(MPI_Isendrecv(&b, 1, MPI_INT, next, -5, &b, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, &r),
                    MPI_ERR_TAG);
    CHECK_ERR_CLASS(MPI_Isendrecv_replace(&b, 1, MPI_INT, next, 0, prev, 0, MPI_COMM_NULL, &r),
                    MPI_ERR_COMM);
    CHECK_ERR_CLASS(MPI_Isendrecv_replace(&b, 1, MPI_DATATYPE_NULL, next, 0, prev, 0, MPI_COMM_WORLD, &r),
                    MPI_ERR_TYPE);
    CHECK(r == MPI_REQUEST_NULL, "a failed call wrote a request");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    next = (rank + 1) % size;
    prev = (rank + size - 1) % size;

    ring(0, 0);
    ring(100, 0);
    ring(3 << 20, 1);
    ring_replace(64, 0);
    ring_replace(5 << 20, 1);
    ring_replace(5 << 20, 0);
    typed();
    proc_null();
    errors();
    return check_finish("p2p_isendrecv");
}
