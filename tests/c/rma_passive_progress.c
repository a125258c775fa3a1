/* ranks: 2 */
/* timeout: 60 */
/* Passive target while the target computes. Rank 0 exposes a window
   (MPI_Win_allocate, then MPI_Win_create) and computes without calling MPI
   for at most a limit; meanwhile rank 1 locks rank 0's window exclusively,
   gets its contents, puts new ones and unlocks (the epoch that is timed),
   then puts a flag in a second epoch. Rank 0's loop stops early when it sees
   the flag in its memory. The run prints whether rank 1's epoch ended while
   rank 0 was still computing: an implementation with asynchronous progress
   (or direct access to the target's memory) finishes it then, one without
   blocks until the target calls MPI again, which the standard allows, so that
   alone does not fail the test, unless the run demands progress:
   with BATON_PROGRESS=thread (a progress thread in every process, see
   progress_util.h) both epochs must end while the target computes, whatever
   the transport. The values must be right either way: the get returns rank
   0's initial contents, and rank 0's window ends with rank 1's data and the
   flag. */
#include "progress_util.h"
#include "rma_ops_util.h"

#define RP_N 4096
/* How long the target computes at most, in seconds: where progress is
   demanded the epochs end long before it, and a run without progress shows
   how long the epoch waits. */
#define RP_LIMIT 2.5
#define RP_LIMIT_DEMANDED 10.0

static int rp_initial(int i) { return i * 7 + 3; }
static int rp_new(int i) { return -(i * 5 + 11); }

static void rp_run(int flavor)
{
    rma_win w;
    snprintf(rma_ctx, sizeof rma_ctx, "%s, passive epoch during computation",
             rma_flavor_name(flavor));
    rma_win_open(&w, flavor, (RP_N + 1) * sizeof(int), sizeof(int));
    rma_local_begin(&w, RMA_LOCK_EXCL, 1);
    for (int i = 0; i < RP_N; i++) {
        int v = rma_rank == 0 ? rp_initial(i) : 0;
        memcpy(w.base + (size_t)i * sizeof v, &v, sizeof v);
    }
    memset(w.base + RP_N * sizeof(int), 0, sizeof(int));
    rma_local_end(&w, RMA_LOCK_EXCL);
    MPI_Barrier(MPI_COMM_WORLD);

    double times[3] = {0, 0, 0}; /* rank 0: compute start, end; rank 1: epoch end */
    int saw_flag = 0;
    if (rma_rank == 0) {
        /* No MPI call until the loop ends: only arithmetic and loads of the
           flag, which rank 1's second epoch sets. */
        volatile int *flag = (volatile int *)(void *)(w.base + RP_N * sizeof(int));
        volatile double acc = 1.0;
        double limit = progress_demanded() ? RP_LIMIT_DEMANDED * progress_scale() : RP_LIMIT;
        times[0] = progress_now();
        for (long it = 0;; it++) {
            for (int k = 0; k < 10000; k++)
                acc = acc * 1.0000001 + 1e-9;
            if (*flag == 1) {
                saw_flag = 1;
                break;
            }
            if (it % 16 == 0 && progress_now() - times[0] > limit)
                break;
        }
        times[1] = progress_now();
    } else {
        int got[RP_N], mine[RP_N], one = 1;
        for (int i = 0; i < RP_N; i++) {
            got[i] = 0;
            mine[i] = rp_new(i);
        }
        double start = progress_now();
        RMA_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win));
        RMA_MPI(MPI_Get(got, RP_N, MPI_INT, 0, 0, RP_N, MPI_INT, w.win));
        RMA_MPI(MPI_Win_flush(0, w.win));
        RMA_MPI(MPI_Put(mine, RP_N, MPI_INT, 0, 0, RP_N, MPI_INT, w.win));
        RMA_MPI(MPI_Win_unlock(0, w.win));
        times[2] = progress_now();
        RMA_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w.win));
        RMA_MPI(MPI_Put(&one, 1, MPI_INT, 0, RP_N, 1, MPI_INT, w.win));
        RMA_MPI(MPI_Win_unlock(0, w.win));
        for (int i = 0; i < RP_N; i++)
            if (got[i] != rp_initial(i)) {
                RMA_CHECK(0, "get: element %d is %d, expected %d", i, got[i], rp_initial(i));
                break;
            }
        times[0] = start;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rma_rank == 0) {
        rma_local_begin(&w, RMA_LOCK_SHARED, 0);
        for (int i = 0; i < RP_N; i++) {
            int v;
            memcpy(&v, w.base + (size_t)i * sizeof v, sizeof v);
            if (v != rp_new(i)) {
                RMA_CHECK(0, "window: element %d is %d after the put, expected %d", i, v,
                          rp_new(i));
                break;
            }
        }
        int f;
        memcpy(&f, w.base + RP_N * sizeof(int), sizeof f);
        RMA_CHECK(f == 1, "flag is %d after the second epoch, expected 1", f);
        rma_local_end(&w, RMA_LOCK_SHARED);
        double other[3];
        MPI_Recv(other, 3, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int during = other[2] < times[1];
        printf("rma_passive_progress: %s: the passive epoch %s while the target computed "
               "(epoch %.3f s, target computed %.3f s%s)\n",
               rma_flavor_name(flavor), during ? "finished" : "did NOT finish",
               other[2] - other[0], times[1] - times[0],
               saw_flag ? ", stopped on the flag" : ", ran to its limit");
        fflush(stdout);
        if (progress_demanded())
            RMA_CHECK(during && saw_flag,
                      "BATON_PROGRESS=thread: the passive epochs must end while the target "
                      "computes without MPI calls; the first %s, the second %s within %.1f s",
                      during ? "did" : "did not", saw_flag ? "did" : "did not",
                      times[1] - times[0]);
    } else if (rma_rank == 1) {
        MPI_Send(times, 3, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
    }
    rma_win_close(&w);
}

int main(int argc, char **argv)
{
    progress_init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rma_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &rma_size);
    if (rma_size != 2) {
        if (rma_rank == 0)
            printf("SKIP rma_passive_progress: needs 2 ranks\n");
        MPI_Finalize();
        return 0;
    }
    for (int f = 0; f < RMA_NFLAVORS; f++)
        if (!rma_flavor_skipped(f))
            rp_run(f);
    return check_finish("rma_passive_progress");
}
