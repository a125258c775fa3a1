/* ranks: 2 3 */
/* Buffers for buffered sends attached to a communicator (MPI 4.1:
   MPI_Comm_attach_buffer, _detach_buffer, _flush_buffer, _iflush_buffer, the
   _c forms, MPI_BUFFER_AUTOMATIC) and MPI_Buffer_iflush. A buffered send on a
   communicator with its own buffer draws on that buffer, not the process's
   (which may be missing or too small); its space is held until the message
   has left (a large message waits for its receive); an iflush request
   completes only then; detach gives the buffer back and the communicator
   falls back to the process's buffer. Rank 0 sends to rank 1; other ranks
   only take part in the barriers. */
#include "check.h"

#define MSG (4 << 20)

static int rank;

static void comm_buffer(void)
{
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    char *msg = malloc(MSG), *in = malloc(MSG);
    int bsize = MSG + MPI_BSEND_OVERHEAD;
    char *buf = malloc(bsize);
    check_fill(msg, MSG, 5);
    if (rank == 0) {
        CHECK_MPI(MPI_Comm_attach_buffer(d, buf, bsize));
        CHECK_ERR_CLASS(MPI_Comm_attach_buffer(d, buf, bsize), MPI_ERR_BUFFER);
        /* The communicator's buffer serves only it: no process buffer is attached. */
        CHECK_ERR_CLASS(MPI_Bsend(msg, 10, MPI_CHAR, 1, 9, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        /* A small process buffer does not matter to sends on d either. */
        char small[64 + MPI_BSEND_OVERHEAD];
        CHECK_MPI(MPI_Buffer_attach(small, (int)sizeof small));
        CHECK_MPI(MPI_Bsend(msg, MSG, MPI_CHAR, 1, 1, d));
        /* Rank 1 has not received yet: the buffer is full. */
        CHECK_ERR_CLASS(MPI_Bsend(msg, MSG, MPI_CHAR, 1, 2, d), MPI_ERR_BUFFER);
        MPI_Request fr;
        int flag = -1;
        CHECK_MPI(MPI_Comm_iflush_buffer(d, &fr));
        CHECK_MPI(MPI_Test(&fr, &flag, MPI_STATUS_IGNORE));
        CHECK(flag == 0, "Comm_iflush_buffer complete before the message was received");
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_Wait(&fr, MPI_STATUS_IGNORE));
        CHECK(fr == MPI_REQUEST_NULL, "Wait left the iflush request");
        /* Space again. */
        check_fill(msg, MSG, 6);
        CHECK_MPI(MPI_Bsend(msg, MSG, MPI_CHAR, 1, 3, d));
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_Comm_flush_buffer(d));
        void *addr = NULL;
        int size = -1;
        CHECK_MPI(MPI_Comm_detach_buffer(d, &addr, &size));
        CHECK(addr == buf && size == bsize, "Comm_detach_buffer gave %p %d, expected %p %d", addr, size,
              (void *)buf, bsize);
        CHECK_ERR_CLASS(MPI_Comm_detach_buffer(d, &addr, &size), MPI_ERR_BUFFER);
        /* Back to the process's buffer, which is too small for this. */
        CHECK_ERR_CLASS(MPI_Bsend(msg, MSG, MPI_CHAR, 1, 4, d), MPI_ERR_BUFFER);
        CHECK_MPI(MPI_Bsend(msg, 8, MPI_CHAR, 1, 4, d));
        CHECK_MPI(MPI_Buffer_flush());
        int psize = -1;
        CHECK_MPI(MPI_Buffer_detach(&addr, &psize));
        CHECK(addr == small && psize == (int)sizeof small, "Buffer_detach gave the wrong buffer");
    } else if (rank == 1) {
        MPI_Status st;
        int c = -1;
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_Recv(in, MSG, MPI_CHAR, 0, 1, d, &st));
        MPI_Get_count(&st, MPI_CHAR, &c);
        CHECK(c == MSG && check_verify(in, MSG, 5) < 0, "first buffered message: %d bytes or wrong data", c);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_Recv(in, MSG, MPI_CHAR, 0, 3, d, &st));
        CHECK(check_verify(in, MSG, 6) < 0, "second buffered message: wrong data");
        CHECK_MPI(MPI_Recv(in, 8, MPI_CHAR, 0, 4, d, &st));
        CHECK(check_verify(in, 8, 6) < 0, "third buffered message: wrong data");
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(buf);
    free(msg);
    free(in);
    MPI_Comm_free(&d);
}

static void automatic_and_large_count(void)
{
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    int v = 77, got = -1;
    void *addr = NULL;
    /* MPI_BUFFER_AUTOMATIC on a communicator, through the _c forms. */
    CHECK_MPI(MPI_Comm_attach_buffer_c(d, MPI_BUFFER_AUTOMATIC, 0));
    if (rank == 0)
        CHECK_MPI(MPI_Bsend(&v, 1, MPI_INT, 1, 5, d));
    if (rank == 1) {
        CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, 0, 5, d, MPI_STATUS_IGNORE));
        CHECK(got == 77, "automatic buffer: received %d", got);
    }
    MPI_Count csize = -1;
    CHECK_MPI(MPI_Comm_detach_buffer_c(d, &addr, &csize));
    CHECK(addr == MPI_BUFFER_AUTOMATIC, "Comm_detach_buffer_c did not give MPI_BUFFER_AUTOMATIC");

    /* The process's automatic buffer and MPI_Buffer_iflush. */
    CHECK_MPI(MPI_Buffer_attach(MPI_BUFFER_AUTOMATIC, 0));
    MPI_Request fr;
    int flag = 0;
    CHECK_MPI(MPI_Buffer_iflush(&fr));
    /* Nothing in flight: complete at once. */
    CHECK_MPI(MPI_Test(&fr, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1, "Buffer_iflush with nothing in flight is not complete");
    char *msg = malloc(MSG);
    check_fill(msg, MSG, 7);
    if (rank == 0) {
        CHECK_MPI(MPI_Bsend(msg, MSG, MPI_CHAR, 1, 6, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Buffer_iflush(&fr));
        CHECK_MPI(MPI_Test(&fr, &flag, MPI_STATUS_IGNORE));
        CHECK(flag == 0, "Buffer_iflush complete before the message was received");
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK_MPI(MPI_Wait(&fr, MPI_STATUS_IGNORE));
    } else if (rank == 1) {
        MPI_Barrier(MPI_COMM_WORLD);
        char *in = malloc(MSG);
        CHECK_MPI(MPI_Recv(in, MSG, MPI_CHAR, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(check_verify(in, MSG, 7) < 0, "buffered message (automatic buffer): wrong data");
        free(in);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    int size = -1;
    CHECK_MPI(MPI_Buffer_detach(&addr, &size));
    CHECK(addr == MPI_BUFFER_AUTOMATIC, "Buffer_detach did not give MPI_BUFFER_AUTOMATIC");
    free(msg);
    MPI_Comm_free(&d);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    comm_buffer();
    automatic_and_large_count();
    return check_finish("bsend_comm");
}
