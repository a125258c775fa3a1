/* Baton benchmark suite: measurement loop, data patterns, output. */
#include "common.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

opts_t g_opt;
int g_rank, g_size;

void fail(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "mpibench: rank %d: FAILED: %s\n", g_rank, msg);
    printf("{\"error\":\"rank %d: %s\"}\n", g_rank, msg);
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3);
}

void *xmalloc(size_t n)
{
    void *p = NULL;
    if (n == 0)
        n = 1;
    if (posix_memalign(&p, 64, n) != 0 || !p)
        fail("out of memory (%zu bytes)", n);
    memset(p, 0, n);
    return p;
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'k' || *end == 'K')
        v *= 1024;
    else if (*end == 'm' || *end == 'M')
        v *= 1024 * 1024;
    return (size_t)v;
}

void opts_parse(int argc, char **argv, int first)
{
    opts_t *o = &g_opt;
    memset(o, 0, sizeof *o);
    o->budget_s = 0.5;
    o->min_samples = 5;
    o->max_samples = 200;
    o->warmup = 10;
    o->batch_us = 2000;
    o->stable_tol = 0.03;
    o->window = 64;
    o->is_classes = "S,W,A";
    o->children = "1,2,4";
    /* two passes: the --quick/--smoke presets first, so that explicit
     * options override them wherever they appear */
    for (int pass = 0; pass < 2; pass++)
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        int preset = !strcmp(a, "--quick") || !strcmp(a, "--smoke");
        if (pass == 0 ? !preset : preset) {
            if (pass == 0 && a[0] == '-' && strcmp(a, "--quick") && strcmp(a, "--smoke") && i + 1 < argc &&
                argv[i + 1][0] != '-')
                i++; /* skip the value of an option */
            continue;
        }
        if (!strcmp(a, "--quick")) {
            o->quick = 1;
            o->budget_s = 0.05;
            o->min_samples = 3;
            o->max_samples = 30;
            o->warmup = 3;
            o->batch_us = 1000;
            o->window = 16;
            o->is_classes = "S,W";
            o->children = "1,2";
        } else if (!strcmp(a, "--smoke")) {
            o->smoke = 1;
            o->budget_s = 0.005;
            o->min_samples = 1;
            o->max_samples = 3;
            o->warmup = 1;
            o->batch_us = 200;
            o->window = 8;
            o->is_classes = "S";
            o->children = "1";
        } else if (!strcmp(a, "--sizes")) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", v);
            o->nsizes = 0;
            for (char *t = strtok(buf, ","); t && o->nsizes < MAX_SIZES; t = strtok(NULL, ","))
                o->sizes[o->nsizes++] = parse_size(t);
            i++;
        } else if (!strcmp(a, "--budget")) {
            o->budget_s = atof(v); i++;
        } else if (!strcmp(a, "--min-samples")) {
            o->min_samples = atoi(v); i++;
        } else if (!strcmp(a, "--max-samples")) {
            o->max_samples = atoi(v); i++;
        } else if (!strcmp(a, "--warmup")) {
            o->warmup = atoi(v); i++;
        } else if (!strcmp(a, "--batch-us")) {
            o->batch_us = atof(v); i++;
        } else if (!strcmp(a, "--window")) {
            o->window = atoi(v); i++;
        } else if (!strcmp(a, "--classes")) {
            o->is_classes = v; i++;
        } else if (!strcmp(a, "--children")) {
            o->children = v; i++;
        } else {
            if (g_rank == 0)
                fprintf(stderr, "mpibench: unknown option %s\n", a);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (o->max_samples > MAX_SAMPLES)
        o->max_samples = MAX_SAMPLES;
    if (o->min_samples < 1)
        o->min_samples = 1;
    if (o->max_samples < o->min_samples)
        o->max_samples = o->min_samples;
    if (o->warmup < 1)
        o->warmup = 1;
}

/* The sizes to run: the explicit list clipped to [lo, hi], or the powers of
 * two from lo to hi (plus 0 when lo is 0). */
void opts_sizes(size_t lo, size_t hi, size_t *out, int *nout)
{
    int n = 0;
    if (g_opt.nsizes) {
        for (int i = 0; i < g_opt.nsizes; i++)
            if (g_opt.sizes[i] >= lo && g_opt.sizes[i] <= hi)
                out[n++] = g_opt.sizes[i];
    } else {
        if (lo == 0)
            out[n++] = 0;
        for (size_t s = lo ? lo : 1; s <= hi && n < MAX_SIZES; s *= 2)
            out[n++] = s;
    }
    *nout = n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median_of(const double *v, int n)
{
    if (n <= 0)
        return 0;
    double *t = malloc(sizeof(double) * (size_t)n);
    memcpy(t, v, sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    double m = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

/* `c` iterations of `fn` after a barrier; the slowest rank's time, seconds. */
static double timed_run(MPI_Comm comm, kernel_fn fn, void *ctx, long *it, long c)
{
    double v, r;
    if (comm != MPI_COMM_NULL)
        MPI_Barrier(comm);
    v = fn(ctx, *it, (int)c, 0);
    *it += c;
    if (comm == MPI_COMM_NULL)
        return v;
    MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, MPI_MAX, comm);
    return r;
}

stat_t measure(MPI_Comm comm, kernel_fn fn, void *ctx)
{
    static double samples[MAX_SAMPLES];
    const opts_t *o = &g_opt;
    stat_t st;
    memset(&st, 0, sizeof st);
    long it = 0;
    double v[2], r[2];

    /* Warm-up, fully validated. It pays the one-time costs (first touch of the
     * buffers, connections opened on demand), so it says little about one
     * iteration: a first message can cost a hundred of them. */
    if (comm != MPI_COMM_NULL)
        MPI_Barrier(comm);
    fn(ctx, it, o->warmup, 1);
    it += o->warmup;
    /* Calibration: double the count until a run lasts an eighth of a batch;
     * the allreduce keeps every rank's decision the same. */
    long c = 1;
    for (;;) {
        r[0] = timed_run(comm, fn, ctx, &it, c);
        if (r[0] * 1e6 >= o->batch_us / 8 && c < 100000) {
            /* One run can hold a one-time delay (8 ranks on 2 cores: a rank
             * still finishing the barrier before it, 1 ms against 40 us for a
             * token round), which would set the count for every sample: the
             * faster of two runs decides. */
            r[1] = timed_run(comm, fn, ctx, &it, c);
            if (r[1] < r[0])
                r[0] = r[1];
        }
        if (r[0] * 1e6 >= o->batch_us / 8 || c >= 100000)
            break;
        c *= 2;
    }
    double per_iter_us = r[0] * 1e6 / (double)c;
    long k = per_iter_us > 0 ? (long)(o->batch_us / per_iter_us) : 1000;
    if (k < 1)
        k = 1;
    if (k > 100000)
        k = 100000;

    double start = MPI_Wtime();
    int n = 0;
    for (;;) {
        if (comm != MPI_COMM_NULL)
            MPI_Barrier(comm);
        v[0] = fn(ctx, it, (int)k, 0);
        it += k;
        v[1] = MPI_Wtime() - start;
        if (comm != MPI_COMM_NULL)
            MPI_Allreduce(v, r, 2, MPI_DOUBLE, MPI_MAX, comm);
        else {
            r[0] = v[0];
            r[1] = v[1];
        }
        samples[n++] = r[0] * 1e6 / (double)k;
        st.iters += k;
        if (n >= o->min_samples) {
            /* Stable when the median of the later half agrees with the
             * median of all samples. */
            double all = median_of(samples, n);
            double late = median_of(samples + n / 2, n - n / 2);
            if (all > 0 && fabs(late - all) / all <= o->stable_tol && n >= 2 * o->min_samples) {
                st.stable = 1;
                break;
            }
            if (n >= o->max_samples || r[1] >= o->budget_s)
                break;
        }
    }
    /* One more fully validated iteration after the timed ones. */
    if (comm != MPI_COMM_NULL)
        MPI_Barrier(comm);
    fn(ctx, it, 1, 1);

    st.samples = n;
    st.median_us = median_of(samples, n);
    st.min_us = samples[0];
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (samples[i] < st.min_us)
            st.min_us = samples[i];
        sum += samples[i];
    }
    st.mean_us = sum / n;
    return st;
}

uint64_t seed_of(long iter, int rank, int slot)
{
    uint64_t x = (uint64_t)iter * 0x9E3779B97F4A7C15ull;
    x ^= (uint64_t)(rank + 1) * 0xC2B2AE3D27D4EB4Full;
    x ^= (uint64_t)(slot + 1) * 0x165667B19E3779F9ull;
    x ^= x >> 29;
    return x;
}

static inline unsigned char pat(uint64_t seed, size_t i)
{
    return (unsigned char)((seed >> ((i & 7) * 8)) + i * 131u + (i >> 8));
}

void fill(void *buf, size_t n, uint64_t seed)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < n; i++)
        p[i] = pat(seed, i);
}

int check(const void *buf, size_t n, uint64_t seed, const char *what)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < n; i++)
        if (p[i] != pat(seed, i))
            fail("data check failed in %s: size %zu, byte %zu is %u, expected %u",
                 what, n, i, p[i], pat(seed, i));
    return 0;
}

void stamp(void *buf, size_t n, uint64_t seed)
{
    unsigned char *p = buf;
    if (n < 16) {
        fill(buf, n, seed);
        return;
    }
    for (size_t i = 0; i < 8; i++) {
        p[i] = pat(seed, i);
        p[n - 8 + i] = pat(seed, n - 8 + i);
    }
}

int check_stamp(const void *buf, size_t n, uint64_t seed, const char *what)
{
    const unsigned char *p = buf;
    if (n < 16)
        return check(buf, n, seed, what);
    for (size_t i = 0; i < 8; i++)
        if (p[i] != pat(seed, i) || p[n - 8 + i] != pat(seed, n - 8 + i))
            fail("data stamp check failed in %s: size %zu, iteration stamp mismatch", what, n);
    return 0;
}

void emit(const char *bench, size_t size, int ranks, const stat_t *s,
          double mbps, const char *extra)
{
    printf("{\"bench\":\"%s\",\"size\":%zu,\"ranks\":%d,\"min_us\":%.4f,"
           "\"median_us\":%.4f,\"mean_us\":%.4f,\"mbps\":%.3f,\"samples\":%d,"
           "\"iters\":%ld,\"stable\":%s%s}\n",
           bench, size, ranks, s->min_us, s->median_us, s->mean_us, mbps,
           s->samples, s->iters, s->stable ? "true" : "false", extra ? extra : "");
    fflush(stdout);
}

void emit_error(const char *bench, const char *msg)
{
    printf("{\"bench\":\"%s\",\"error\":\"%s\"}\n", bench, msg);
    fflush(stdout);
}

/* MPI_Waitall with a real status array (GCC 12 warns about the
 * MPI_STATUSES_IGNORE sentinel of some mpi.h headers). */
void waitall(int n, MPI_Request *req)
{
    static MPI_Status *st;
    static int cap;
    if (n > cap) {
        free(st);
        st = malloc(sizeof(MPI_Status) * (size_t)n);
        cap = n;
    }
    MPI_Waitall(n, req, st);
}
