/* ranks: 1 2 */
/* timeout: 60 */
/* The common master/worker pattern: spawn, merge the intercommunicator,
   disconnect the intercommunicator, and go on working in the merged
   communicator. The merged communicator still connects parents and children,
   so disconnecting the intercommunicator must not cut them apart (MPI says
   processes are disconnected only once nothing connects them). Then the
   merged communicator is disconnected too, and the parents spawn again. */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CHILDREN = 2, ROUNDS = 20, BIG = 200000 };

/* Every rank of the merged communicator sends to every other, small and
   large, then an allreduce; returns failures seen. */
static void work(MPI_Comm merged, int round)
{
    int r, n;
    MPI_Comm_rank(merged, &r);
    MPI_Comm_size(merged, &n);
    int *out = malloc(sizeof(int) * (size_t)n), *in = malloc(sizeof(int) * (size_t)n);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * (size_t)n);
    for (int p = 0; p < n; p++) {
        out[p] = round * 10000 + r * 100 + p;
        MPI_Irecv(&in[p], 1, MPI_INT, p, 7, merged, &rq[p]);
        MPI_Isend(&out[p], 1, MPI_INT, p, 7, merged, &rq[n + p]);
    }
    CHECK_MPI(MPI_Waitall(2 * n, rq, MPI_STATUSES_IGNORE));
    for (int p = 0; p < n; p++)
        CHECK(in[p] == round * 10000 + p * 100 + r, "round %d: from %d got %d", round, p, in[p]);
    /* a rendezvous-sized message around the ring */
    unsigned char *b = malloc(BIG), *c = malloc(BIG);
    check_fill(b, BIG, round * 131 + r);
    CHECK_MPI(MPI_Sendrecv(b, BIG, MPI_BYTE, (r + 1) % n, 8, c, BIG, MPI_BYTE, (r + n - 1) % n, 8, merged,
                           MPI_STATUS_IGNORE));
    CHECK(check_verify(c, BIG, round * 131 + (r + n - 1) % n) < 0, "round %d: ring data from %d wrong", round,
          (r + n - 1) % n);
    int one = 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK(sum == n, "round %d: allreduce %d, expected %d", round, sum, n);
    free(b);
    free(c);
    free(out);
    free(in);
    free(rq);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm parent, inter, merged;
    MPI_Comm_get_parent(&parent);
    int child = parent != MPI_COMM_NULL;
    int cycles = child ? 1 : 2;
    for (int cycle = 0; cycle < cycles; cycle++) {
        if (child) {
            inter = parent;
        } else {
            int rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, CHILDREN, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                                    MPI_ERRCODES_IGNORE);
            CHECK(rc == MPI_SUCCESS, "spawn %d failed", cycle);
            if (rc != MPI_SUCCESS)
                break;
        }
        CHECK_MPI(MPI_Intercomm_merge(inter, child, &merged));
        CHECK_MPI(MPI_Comm_disconnect(&inter));
        CHECK(inter == MPI_COMM_NULL, "the disconnected handle is not MPI_COMM_NULL");
        for (int round = 0; round < ROUNDS; round++)
            work(merged, round);
        CHECK_MPI(MPI_Comm_disconnect(&merged));
    }
    if (child) {
        /* the children report through their own world; failures show in the parents' output */
        int total = check_collect(check_failures);
        if (total)
            printf("child side: %d check(s) failed\n", total);
        MPI_Finalize();
        return total ? 1 : 0;
    }
    return check_finish("dpm_merge_keep");
}
