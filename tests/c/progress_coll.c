/* ranks: 2 4 */
/* timeout: 120 */
/* env: BATON_PROGRESS=thread */
/* Asynchronous progress of nonblocking collectives: every rank starts an
   MPI_Iallreduce (sum of 1 MiB of doubles) or an MPI_Ibarrier, computes
   without any MPI call for a safe multiple of the time the blocking form takes
   (measured first with every rank inside MPI, see progress_safe_time), then
   calls MPI_Test once: it must report completion at that first call. The
   allreduce's values are checked whether or not it had completed.

   A barrier before each start lines the ranks up, so that no rank's
   computation begins long before another's contribution exists. The
   BATON_PROGRESS=thread header forces Baton's progress thread; MPICH needs
   MPIR_CVAR_ASYNC_PROGRESS=1 (and then runs MPI_THREAD_MULTIPLE). */
#include "progress_util.h"

#define COUNT ((1 << 20) / (int)sizeof(double))
#define ITERATIONS 3

static int rank, size;

/* Every term is a multiple of 1/2 well below 2^52, so the sums are exact in
   any order. */
static double contribution(int it, int r, int i)
{
    return (double)((r + 1) * (it + 1)) + 0.5 * (double)(i % 1024) + (double)r;
}

static double expected_sum(int it, int i)
{
    double s = 0.0;
    for (int r = 0; r < size; r++)
        s += contribution(it, r, i);
    return s;
}

/* The longest of a few blocking runs, the same on every rank. */
static double measure(double *in, double *out, int allreduce)
{
    double longest = 0.0;
    for (int rep = 0; rep < 4; rep++) {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = progress_now();
        if (allreduce)
            CHECK_MPI(MPI_Allreduce(in, out, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        else
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        double t = progress_now() - t0;
        if (rep > 0 && t > longest)
            longest = t;
    }
    double all = 0.0;
    CHECK_MPI(MPI_Allreduce(&longest, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return all;
}

/* Starts the collective, computes for `compute` seconds, tests once. Returns
   the one MPI_Test's flag; the request is complete on return. */
static int overlap(const char *what, int it, MPI_Request *req, double compute)
{
    double start = progress_now();
    progress_compute_until(start, compute);
    int flag = 0;
    CHECK_MPI(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
    CHECK(flag, "%s, iteration %d, %d ranks: MPI_Test after %.3f s of computation without MPI "
                "calls: not complete",
          what, it, size, progress_now() - start);
    if (!flag)
        CHECK_MPI(MPI_Wait(req, MPI_STATUS_IGNORE));
    return flag;
}

int main(int argc, char **argv)
{
    progress_init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *in = malloc(COUNT * sizeof(double));
    double *out = malloc(COUNT * sizeof(double));
    if (!in || !out) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < COUNT; i++)
        in[i] = contribution(0, rank, i);
    double allreduce_time = measure(in, out, 1);
    double barrier_time = measure(in, out, 0);
    double allreduce_compute = progress_safe_time(allreduce_time);
    double barrier_compute = progress_safe_time(barrier_time);
    if (rank == 0)
        printf("progress_coll: %d ranks, blocking allreduce of 1 MiB %.4f s (computing %.3f s), "
               "barrier %.6f s (computing %.3f s)\n",
               size, allreduce_time, allreduce_compute, barrier_time, barrier_compute);

    for (int it = 0; it < ITERATIONS; it++) {
        MPI_Request req = MPI_REQUEST_NULL;
        for (int i = 0; i < COUNT; i++) {
            in[i] = contribution(it, rank, i);
            out[i] = -1.0;
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Iallreduce(in, out, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req));
        overlap("MPI_Iallreduce of 1 MiB", it, &req, allreduce_compute);
        for (int i = 0; i < COUNT; i++)
            if (out[i] != expected_sum(it, i)) {
                CHECK(0, "MPI_Iallreduce, iteration %d, %d ranks: element %d is %g, expected %g",
                      it, size, i, out[i], expected_sum(it, i));
                break;
            }

        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &req));
        overlap("MPI_Ibarrier", it, &req, barrier_compute);
    }
    free(in);
    free(out);
    return check_finish("progress_coll");
}
