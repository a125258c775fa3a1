/* ranks: 2 3 4 */
/* timeout: 60 */
/* Persistent collectives match by their initialization, not by the order in
   which the processes start them (MPI-4.1 6.13): every process initializes
   the same requests in the same order, then each starts them in an order of
   its own (rotated by rank and iteration, reversed on odd ranks) and
   completes them with MPI_Waitall, 25 times with new data each time.
   The requests: on MPI_COMM_WORLD (which has a shared-memory area once a
   blocking collective ran on it, all ranks being on one host) an
   Allreduce, a Bcast from a root that is not rank 0, a Barrier, an
   Allgather, a Reduce and an Alltoall; an Allreduce (MPI_MAX) on a
   duplicate of it; a Bcast on an even/odd split. In part B the processes
   start a rank-dependent part of the requests, run a blocking Allreduce
   and a nonblocking Ibcast on MPI_COMM_WORLD, then start the rest. Results
   are checked against values computed from rank numbers. */
#include "check.h"

#define NA 4 /* ints per process in the reductions and gathers */
#define NREQ 8

static int rank, size;
static int ar_in[NA], ar_out[NA], bc[8], ag_in[NA], *ag_out, rd_in[NA], rd_out[NA];
static int *a2a_in, *a2a_out, mx_in[NA], mx_out[NA], sbc[8];

static int val(int r, int k, int it)
{
    return (r + 1) * 10 + k * 3 + it;
}

static void fill(int it, int sub_rank)
{
    for (int k = 0; k < NA; k++) {
        ar_in[k] = val(rank, k, it);
        ag_in[k] = val(rank, k, it) * 2;
        rd_in[k] = val(rank, k, it) - 1;
        mx_in[k] = val(rank, k, it) * ((rank + it) % 3);
        ar_out[k] = rd_out[k] = mx_out[k] = -1;
    }
    for (int k = 0; k < 8; k++) {
        bc[k] = rank == 1 % size ? 1000 + k + it : -1;
        sbc[k] = sub_rank == 0 ? 2000 + k + it * 7 + rank % 2 : -1;
    }
    for (int i = 0; i < size * NA; i++) {
        ag_out[i] = -1;
        a2a_in[i] = rank * 1000 + i + it;
        a2a_out[i] = -1;
    }
}

static void check(int it, const char *part)
{
    for (int k = 0; k < NA; k++) {
        int sum = 0, rsum = 0, mx = 0;
        for (int r = 0; r < size; r++) {
            sum += val(r, k, it);
            rsum += val(r, k, it) - 1;
            int m = val(r, k, it) * ((r + it) % 3);
            mx = m > mx ? m : mx;
        }
        CHECK(ar_out[k] == sum, "%s it %d: allreduce[%d] = %d, want %d", part, it, k, ar_out[k], sum);
        if (rank == (it + 1) % size)
            CHECK(rd_out[k] == rsum, "%s it %d: reduce[%d] = %d, want %d", part, it, k, rd_out[k], rsum);
        CHECK(mx_out[k] == mx, "%s it %d: max[%d] = %d, want %d", part, it, k, mx_out[k], mx);
    }
    for (int k = 0; k < 8; k++) {
        CHECK(bc[k] == 1000 + k + it, "%s it %d: bcast[%d] = %d", part, it, k, bc[k]);
        CHECK(sbc[k] == 2000 + k + it * 7 + rank % 2, "%s it %d: split bcast[%d] = %d", part, it, k, sbc[k]);
    }
    for (int r = 0; r < size; r++)
        for (int k = 0; k < NA; k++) {
            int g = ag_out[r * NA + k], a = a2a_out[r * NA + k];
            CHECK(g == val(r, k, it) * 2, "%s it %d: allgather[%d][%d] = %d", part, it, r, k, g);
            CHECK(a == r * 1000 + rank * NA + k + it, "%s it %d: alltoall[%d][%d] = %d", part, it, r, k, a);
        }
}

/* The order in which this process starts the requests in iteration it. */
static void order(int it, int *ord)
{
    for (int i = 0; i < NREQ; i++) {
        int j = (i + rank * 3 + it) % NREQ;
        ord[rank % 2 ? NREQ - 1 - i : i] = j;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#if MPI_VERSION < 4
    if (rank == 0)
        printf("SKIP coll_persistent_order: persistent collectives need MPI 4.0\n");
    MPI_Finalize();
    return 0;
#else
    ag_out = malloc(sizeof(int) * size * NA);
    a2a_in = malloc(sizeof(int) * size * NA);
    a2a_out = malloc(sizeof(int) * size * NA);
    MPI_Comm dup, split;
    int sub_rank;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &split);
    MPI_Comm_rank(split, &sub_rank);
    /* Blocking collectives first, so that the communicators have their
       shared-memory areas when the requests are made. */
    int one = 1, n = 0;
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, dup);
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, split);
    MPI_Barrier(MPI_COMM_WORLD);

    for (int part = 0; part < 2; part++) {
        MPI_Request req[NREQ];
        MPI_Info info = MPI_INFO_NULL;
        MPI_Comm w = MPI_COMM_WORLD;
        /* Reduce's root moves with the iteration, so it is made anew each
           time; the others are made once per part. */
        CHECK_MPI(MPI_Allreduce_init(ar_in, ar_out, NA, MPI_INT, MPI_SUM, w, info, &req[0]));
        CHECK_MPI(MPI_Bcast_init(bc, 8, MPI_INT, 1 % size, w, info, &req[1]));
        CHECK_MPI(MPI_Barrier_init(w, info, &req[2]));
        CHECK_MPI(MPI_Allgather_init(ag_in, NA, MPI_INT, ag_out, NA, MPI_INT, w, info, &req[3]));
        CHECK_MPI(MPI_Alltoall_init(a2a_in, NA, MPI_INT, a2a_out, NA, MPI_INT, w, info, &req[4]));
        CHECK_MPI(MPI_Allreduce_init(mx_in, mx_out, NA, MPI_INT, MPI_MAX, dup, info, &req[5]));
        CHECK_MPI(MPI_Bcast_init(sbc, 8, MPI_INT, 0, split, info, &req[6]));
        for (int it = 0; it < 25; it++) {
            CHECK_MPI(MPI_Reduce_init(rd_in, rd_out, NA, MPI_INT, MPI_SUM, (it + 1) % size, w, info, &req[7]));
            fill(it, sub_rank);
            int ord[NREQ];
            order(it, ord);
            int first = part == 0 ? NREQ : (rank + it) % NREQ;
            for (int i = 0; i < first; i++)
                CHECK_MPI(MPI_Start(&req[ord[i]]));
            if (part == 1) {
                int s = 0, b[3] = {-1, -1, -1};
                CHECK_MPI(MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, w));
                CHECK(s == size, "B it %d: blocking allreduce between starts = %d", it, s);
                if (rank == 0)
                    b[0] = it, b[1] = 7, b[2] = -it;
                MPI_Request ib;
                CHECK_MPI(MPI_Ibcast(b, 3, MPI_INT, 0, w, &ib));
                for (int i = first; i < NREQ; i++)
                    CHECK_MPI(MPI_Start(&req[ord[i]]));
                CHECK_MPI(MPI_Wait(&ib, MPI_STATUS_IGNORE));
                CHECK(b[0] == it && b[1] == 7 && b[2] == -it, "B it %d: ibcast gave %d %d %d", it, b[0], b[1],
                      b[2]);
            }
            CHECK_MPI(MPI_Waitall(NREQ, req, MPI_STATUSES_IGNORE));
            check(it, part ? "B" : "A");
            CHECK_MPI(MPI_Request_free(&req[7]));
        }
        for (int i = 0; i < NREQ - 1; i++)
            CHECK_MPI(MPI_Request_free(&req[i]));
    }
    MPI_Comm_free(&dup);
    MPI_Comm_free(&split);
    free(ag_out);
    free(a2a_in);
    free(a2a_out);
    return check_finish("coll_persistent_order");
#endif
}
