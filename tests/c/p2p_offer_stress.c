/* ranks: 2 3 4 */
/* timeout: 120 */
/* Receives posted before, during and after their messages, in random mixes
   (sizes from 1 KiB to 2 MiB, a named source or MPI_ANY_SOURCE, a tag or
   MPI_ANY_TAG, some cancelled, either side computing for a while): every
   message arrives once, whole, in order per sender and tag, into the
   receive that MPI's matching rules give it. Baton offers large receives
   posted first to their sender (see p2p_posted_first); this shakes the
   offer protocol against cancels and crossing messages. Rank 0 receives,
   the others send. */
#include "check.h"

#define ROUNDS 40
#define PER 6 /* messages per sender and round */
#define MAXN (2 << 20)

static unsigned long lcg(unsigned long *s)
{
    *s = *s * 6364136223846793005ul + 1442695040888963407ul;
    return *s >> 33;
}

static void spin_us(int us)
{
    double t = MPI_Wtime();
    while ((MPI_Wtime() - t) * 1e6 < us)
        ;
}

/* The size of message k of sender s in round r (the same on both sides). */
static size_t size_of(int r, int s, int k)
{
    unsigned long x = (unsigned long)(r * 1000 + s * 37 + k) * 2654435761ul;
    static const size_t sizes[] = {1024, 16 << 10, 64 << 10, 300000, 1 << 20, 2 << 20};
    return sizes[(x >> 7) % 6];
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int senders = size - 1;
    unsigned long seed = 12345u + (unsigned long)rank;
    for (int r = 0; r < ROUNDS; r++) {
        if (rank == 0) {
            /* posted first: every message of every sender, by source and tag
               (tag = k), some with wildcards that match the same message
               anyway in this order; then the senders start */
            int n = senders * PER;
            unsigned char **bufs = malloc(sizeof *bufs * (size_t)n);
            MPI_Request *req = malloc(sizeof *req * (size_t)n);
            int *cancelled = calloc((size_t)n, sizeof(int));
            int *cancel = calloc((size_t)senders + 1, sizeof(int));
            for (int s = 1; s <= senders; s++)
                cancel[s] = lcg(&seed) % 3 == 0;
            for (int s = 1; s <= senders; s++)
                for (int k = 0; k < PER; k++) {
                    int i = (s - 1) * PER + k;
                    bufs[i] = malloc(MAXN);
                    memset(bufs[i], 0, MAXN);
                    /* a wildcard tag would take whichever message of that
                       sender comes next: only the last receive of a sender
                       may use one (it is then the only one left, unless the
                       first is cancelled and posted again after it) */
                    int tag = (k == PER - 1 && !cancel[s] && lcg(&seed) % 2) ? MPI_ANY_TAG : k;
                    CHECK_MPI(MPI_Irecv(bufs[i], MAXN, MPI_BYTE, s, tag, MPI_COMM_WORLD, &req[i]));
                }
            /* some receives of the first message of each sender are cancelled
               before anything was sent, and posted again */
            for (int s = 1; s <= senders; s++) {
                int i = (s - 1) * PER;
                if (cancel[s]) {
                    CHECK_MPI(MPI_Cancel(&req[i]));
                    MPI_Status st;
                    CHECK_MPI(MPI_Wait(&req[i], &st));
                    int c = 0;
                    MPI_Test_cancelled(&st, &c);
                    CHECK(c, "round %d: a receive cancelled before its message was sent stays uncancelled", r);
                    cancelled[i] = 1;
                }
            }
            MPI_Barrier(MPI_COMM_WORLD);
            if (lcg(&seed) % 2)
                spin_us((int)(lcg(&seed) % 300));
            /* the cancelled ones posted again, after their senders may have sent */
            for (int i = 0; i < n; i++)
                if (cancelled[i]) {
                    int s = i / PER + 1;
                    CHECK_MPI(MPI_Irecv(bufs[i], MAXN, MPI_BYTE, s, 0, MPI_COMM_WORLD, &req[i]));
                }
            MPI_Status *st = malloc(sizeof *st * (size_t)n);
            CHECK_MPI(MPI_Waitall(n, req, st));
            for (int i = 0; i < n; i++) {
                int s = i / PER + 1, k = i % PER;
                size_t want = size_of(r, s, k);
                int count;
                MPI_Get_count(&st[i], MPI_BYTE, &count);
                CHECK(count == (int)want && st[i].MPI_SOURCE == s && st[i].MPI_TAG == k,
                      "round %d, sender %d, message %d: count %d source %d tag %d, expected %zu %d %d", r, s, k,
                      count, st[i].MPI_SOURCE, st[i].MPI_TAG, want, s, k);
                long bad = check_verify(bufs[i], want, r * 100 + s * 10 + k);
                CHECK(bad < 0, "round %d, sender %d, message %d (%zu bytes): mismatch at byte %ld", r, s, k, want, bad);
                CHECK(bufs[i][want] == 0 || want == MAXN, "round %d, sender %d, message %d: written past its end", r, s, k);
                free(bufs[i]);
            }
            free(st);
            free(bufs);
            free(req);
            free(cancelled);
            free(cancel);
        } else {
            unsigned char *b[PER];
            MPI_Request req[PER];
            for (int k = 0; k < PER; k++) {
                size_t n = size_of(r, rank, k);
                b[k] = malloc(n);
                check_fill(b[k], n, r * 100 + rank * 10 + k);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            for (int k = 0; k < PER; k++) {
                size_t n = size_of(r, rank, k);
                req[k] = MPI_REQUEST_NULL;
                if (lcg(&seed) % 4 == 0)
                    CHECK_MPI(MPI_Send(b[k], (int)n, MPI_BYTE, 0, k, MPI_COMM_WORLD));
                else
                    CHECK_MPI(MPI_Isend(b[k], (int)n, MPI_BYTE, 0, k, MPI_COMM_WORLD, &req[k]));
                if (lcg(&seed) % 4 == 0)
                    spin_us((int)(lcg(&seed) % 200));
                if (k > 0 && req[k - 1] != MPI_REQUEST_NULL && lcg(&seed) % 3 == 0)
                    CHECK_MPI(MPI_Wait(&req[k - 1], MPI_STATUS_IGNORE));
            }
            for (int k = 0; k < PER; k++)
                if (req[k] != MPI_REQUEST_NULL)
                    CHECK_MPI(MPI_Wait(&req[k], MPI_STATUS_IGNORE));
            for (int k = 0; k < PER; k++)
                free(b[k]);
        }
    }
    return check_finish("p2p_offer_stress");
}
