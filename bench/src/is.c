/* Application kernel: parallel integer bucket sort after NAS IS.  Keys come
 * from the NAS linear congruential generator (a = 5^13, seed 314159265,
 * modulus 2^46; key = MAX_KEY/4 * (r1+r2+r3+r4)); every rank generates its
 * own slice by jumping ahead in the sequence.  One iteration: local bucket
 * counts, MPI_Allreduce of the counts to split the buckets evenly among the
 * ranks, MPI_Alltoall of the send counts, MPI_Alltoallv of the keys, local
 * counting sort.  Verified: result globally sorted and a permutation of the
 * input (global key histograms equal). */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB_LOG 10
#define NB (1 << NB_LOG)
#define M46 ((1ull << 46) - 1)

typedef struct {
    char cls;
    long total, nlocal, first;
    int maxkey_log;
    int *keys;          /* generated keys */
    int *sendk;         /* keys ordered by bucket */
    int *recvk, *sorted;
    long cap;
    long nsorted;
    int lo_key, hi_key; /* key range owned after the exchange */
    int *lcount, *gcount, *bstart, *owner;
    int *scnt, *sdsp, *rcnt, *rdsp;
    int *work;          /* counting-sort histogram, size maxkey+1 */
} is_t;

static uint64_t lcg_pow(uint64_t a, uint64_t e)
{
    uint64_t r = 1;
    while (e) {
        if (e & 1)
            r = (r * a) & M46;
        a = (a * a) & M46;
        e >>= 1;
    }
    return r;
}

static void generate(is_t *s)
{
    const uint64_t a = 1220703125ull;
    uint64_t x = (314159265ull * lcg_pow(a, 4ull * (uint64_t)s->first)) & M46;
    const double two46 = 1.0 / (double)(1ull << 46);
    double k = (double)(1 << s->maxkey_log) / 4.0;
    for (long i = 0; i < s->nlocal; i++) {
        double sum = 0;
        for (int j = 0; j < 4; j++) {
            x = (x * a) & M46;
            sum += (double)x * two46;
        }
        s->keys[i] = (int)(k * sum);
    }
}

static void rank_keys(is_t *s)
{
    int shift = s->maxkey_log - NB_LOG;
    int p = g_size;
    memset(s->lcount, 0, sizeof(int) * NB);
    for (long i = 0; i < s->nlocal; i++)
        s->lcount[s->keys[i] >> shift]++;
    MPI_Allreduce(s->lcount, s->gcount, NB, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    /* contiguous bucket ranges, about total/p keys per rank */
    long acc = 0;
    int r = 0;
    for (int b = 0; b < NB; b++) {
        s->owner[b] = r;
        acc += s->gcount[b];
        while (r < p - 1 && acc >= (long)(r + 1) * s->total / p)
            r++;
    }
    /* order local keys by bucket */
    int pos = 0;
    for (int b = 0; b < NB; b++) {
        s->bstart[b] = pos;
        pos += s->lcount[b];
    }
    for (long i = 0; i < s->nlocal; i++)
        s->sendk[s->bstart[s->keys[i] >> shift]++] = s->keys[i];
    memset(s->scnt, 0, sizeof(int) * (size_t)p);
    for (int b = 0; b < NB; b++)
        s->scnt[s->owner[b]] += s->lcount[b];
    MPI_Alltoall(s->scnt, 1, MPI_INT, s->rcnt, 1, MPI_INT, MPI_COMM_WORLD);
    long nrecv = 0;
    for (int j = 0; j < p; j++) {
        s->sdsp[j] = j ? s->sdsp[j - 1] + s->scnt[j - 1] : 0;
        s->rdsp[j] = (int)nrecv;
        nrecv += s->rcnt[j];
    }
    if (nrecv > s->cap) {
        free(s->recvk);
        free(s->sorted);
        s->cap = nrecv + nrecv / 4;
        s->recvk = xmalloc(sizeof(int) * (size_t)s->cap);
        s->sorted = xmalloc(sizeof(int) * (size_t)s->cap);
    }
    MPI_Alltoallv(s->sendk, s->scnt, s->sdsp, MPI_INT, s->recvk, s->rcnt, s->rdsp, MPI_INT, MPI_COMM_WORLD);
    /* my key range */
    int blo = NB, bhi = -1;
    for (int b = 0; b < NB; b++)
        if (s->owner[b] == g_rank) {
            if (b < blo)
                blo = b;
            bhi = b;
        }
    s->nsorted = nrecv;
    if (bhi < 0)
        return;
    s->lo_key = blo << shift;
    s->hi_key = (bhi + 1) << shift;
    int range = s->hi_key - s->lo_key;
    memset(s->work, 0, sizeof(int) * (size_t)range);
    for (long i = 0; i < nrecv; i++) {
        int k = s->recvk[i] - s->lo_key;
        if (k < 0 || k >= range)
            fail("is: received key %d outside my range [%d,%d)", s->recvk[i], s->lo_key, s->hi_key);
        s->work[k]++;
    }
    long o = 0;
    for (int k = 0; k < range; k++)
        for (int c = s->work[k]; c > 0; c--)
            s->sorted[o++] = k + s->lo_key;
}

static void verify(is_t *s)
{
    for (long i = 1; i < s->nsorted; i++)
        if (s->sorted[i - 1] > s->sorted[i])
            fail("is class %c: keys not sorted at local index %ld", s->cls, i);
    long mine[3] = {s->nsorted, s->nsorted ? s->sorted[0] : -1, s->nsorted ? s->sorted[s->nsorted - 1] : -1};
    long *all = malloc(sizeof(long) * 3 * (size_t)g_size);
    MPI_Allgather(mine, 3, MPI_LONG, all, 3, MPI_LONG, MPI_COMM_WORLD);
    long total = 0, last = -1;
    for (int r = 0; r < g_size; r++) {
        total += all[3 * r];
        if (all[3 * r] == 0)
            continue;
        if (all[3 * r + 1] < last)
            fail("is class %c: rank %d starts with key %ld below %ld held by an earlier rank",
                 s->cls, r, all[3 * r + 1], last);
        last = all[3 * r + 2];
    }
    free(all);
    if (total != s->total)
        fail("is class %c: %ld keys after the sort, %ld before", s->cls, total, s->total);
    /* permutation: the histogram of the input minus that of the output is 0 */
    long nk = 1L << s->maxkey_log;
    int *h = calloc((size_t)nk, sizeof(int)), *g = malloc(sizeof(int) * (size_t)nk);
    for (long i = 0; i < s->nlocal; i++)
        h[s->keys[i]]++;
    for (long i = 0; i < s->nsorted; i++)
        h[s->sorted[i]]--;
    MPI_Allreduce(h, g, (int)nk, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (long k = 0; k < nk; k++)
        if (g[k] != 0)
            fail("is class %c: not a permutation (key %ld count differs by %d)", s->cls, k, g[k]);
    free(h);
    free(g);
}

static double k_is(void *c, long first, int n, int full)
{
    (void)first;
    is_t *s = c;
    double t = 0;
    for (int i = 0; i < n; i++) {
        double t0 = MPI_Wtime();
        rank_keys(s);
        t += MPI_Wtime() - t0;
        if (full)
            verify(s);
    }
    return t;
}

int bench_is(void)
{
    char list[64];
    snprintf(list, sizeof list, "%s", g_opt.is_classes);
    char *save = NULL;
    for (char *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        is_t s;
        memset(&s, 0, sizeof s);
        s.cls = c[0];
        int tlog;
        switch (s.cls) {
        case 'S': tlog = 16; s.maxkey_log = 11; break;
        case 'W': tlog = 20; s.maxkey_log = 16; break;
        case 'A': tlog = 23; s.maxkey_log = 19; break;
        case 'B': tlog = 25; s.maxkey_log = 21; break;
        default:
            if (g_rank == 0)
                emit_error("is", "unknown class");
            return 2;
        }
        s.total = 1L << tlog;
        long base = s.total / g_size, rem = s.total % g_size;
        s.nlocal = base + (g_rank < rem);
        s.first = g_rank * base + (g_rank < rem ? g_rank : rem);
        s.keys = xmalloc(sizeof(int) * (size_t)s.nlocal);
        s.sendk = xmalloc(sizeof(int) * (size_t)s.nlocal);
        s.cap = 2 * s.nlocal + 1024;
        s.recvk = xmalloc(sizeof(int) * (size_t)s.cap);
        s.sorted = xmalloc(sizeof(int) * (size_t)s.cap);
        s.lcount = xmalloc(sizeof(int) * NB);
        s.gcount = xmalloc(sizeof(int) * NB);
        s.bstart = xmalloc(sizeof(int) * NB);
        s.owner = xmalloc(sizeof(int) * NB);
        s.scnt = xmalloc(sizeof(int) * (size_t)g_size);
        s.sdsp = xmalloc(sizeof(int) * (size_t)g_size);
        s.rcnt = xmalloc(sizeof(int) * (size_t)g_size);
        s.rdsp = xmalloc(sizeof(int) * (size_t)g_size);
        s.work = xmalloc(sizeof(int) * ((size_t)1 << s.maxkey_log));
        generate(&s);
        stat_t st = measure(MPI_COMM_WORLD, k_is, &s);
        if (g_rank == 0) {
            char extra[96];
            snprintf(extra, sizeof extra, ",\"class\":\"%c\",\"mkeys_per_s\":%.3f", s.cls,
                     st.median_us > 0 ? (double)s.total / st.median_us : 0);
            emit("is", (size_t)s.total, g_size, &st, st.median_us > 0 ? 4.0 * (double)s.total / st.median_us : 0,
                 extra);
        }
        free(s.keys); free(s.sendk); free(s.recvk); free(s.sorted);
        free(s.lcount); free(s.gcount); free(s.bstart); free(s.owner);
        free(s.scnt); free(s.sdsp); free(s.rcnt); free(s.rdsp); free(s.work);
    }
    return 0;
}
