/* Machine limits (not MPI): memcpy bandwidth, cross-core cache-line
 * ping-pong, context switch between two processes on one core, wake-up
 * of a sleeping reader on the other core, TCP loopback latency and
 * bandwidth, process_vm_readv bandwidth.
 *   limits [memcpy|cacheline|ctxswitch|wakeup|tcp|vmreadv|all] [--quick|--smoke]
 * Output: one JSON object per line, as the MPI benchmarks. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int scale = 4; /* 4 full, 1 quick, 0 smoke */
static int nbatch = 21;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "limits: %s: %s\n", what, strerror(errno));
    printf("{\"bench\":\"limits\",\"error\":\"%s: %s\"}\n", what, strerror(errno));
    exit(1);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* samples: per-operation times in microseconds */
static void report(const char *bench, size_t size, double *v, int n, double bytes_per_op, const char *extra)
{
    qsort(v, (size_t)n, sizeof(double), cmpd);
    double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    printf("{\"bench\":\"%s\",\"size\":%zu,\"ranks\":1,\"min_us\":%.5f,\"median_us\":%.5f,\"mean_us\":%.5f,"
           "\"mbps\":%.3f,\"samples\":%d,\"stable\":true%s}\n",
           bench, size, v[0], med, sum / n, med > 0 ? bytes_per_op / med : 0, n, extra ? extra : "");
    fflush(stdout);
}

static int pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return sched_setaffinity(0, sizeof s, &s);
}

static int ncpus(void)
{
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s))
        return 1;
    return CPU_COUNT(&s);
}

static int nth_cpu(int n)
{
    cpu_set_t s;
    sched_getaffinity(0, sizeof s, &s);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &s) && n-- == 0)
            return c;
    return 0;
}

/* ---- memcpy ---- */
static void bench_memcpy(void)
{
    size_t sizes[] = {64u << 10, 64u << 20};
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        unsigned char *a = malloc(n), *b = malloc(n);
        if (!a || !b)
            die("malloc");
        for (size_t i = 0; i < n; i++)
            a[i] = (unsigned char)(i * 7 + 1);
        memset(b, 0, n);
        int reps = k == 0 ? 200 * (scale + 1) : 1 + scale;
        double v[64];
        for (int r = 0; r < nbatch; r++) {
            double t0 = now();
            for (int i = 0; i < reps; i++) {
                memcpy(b, a, n);
                __asm__ volatile("" ::"r"(b) : "memory");
            }
            v[r] = (now() - t0) * 1e6 / reps;
        }
        if (memcmp(a, b, n))
            die("memcpy validation");
        report("lim_memcpy", n, v, nbatch, (double)n, NULL);
        free(a);
        free(b);
    }
}

/* ---- cache-line ping-pong between two cores ---- */
static _Alignas(64) atomic_long line;
static long cl_iters;

static void *cl_peer(void *arg)
{
    pin(*(int *)arg);
    for (long i = 0; i < cl_iters * nbatch + cl_iters; i++) {
        while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i + 1)
            ;
        atomic_store_explicit(&line, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static void bench_cacheline(void)
{
    if (ncpus() < 2) {
        printf("{\"bench\":\"lim_cacheline\",\"error\":\"needs 2 CPUs\"}\n");
        return;
    }
    int c0 = nth_cpu(0), c1 = nth_cpu(1);
    cl_iters = scale ? 20000L * scale : 2000;
    atomic_store(&line, 0);
    pthread_t t;
    pthread_create(&t, NULL, cl_peer, &c1);
    pin(c0);
    double v[64];
    long i = 0;
    for (int r = -1; r < nbatch; r++) { /* batch -1 is a warm-up */
        double t0 = now();
        for (long j = 0; j < cl_iters; j++, i++) {
            atomic_store_explicit(&line, 2 * i + 1, memory_order_release);
            while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i + 2)
                ;
        }
        if (r >= 0)
            v[r] = (now() - t0) * 1e6 / (2.0 * (double)cl_iters); /* one way */
    }
    pthread_join(t, NULL);
    char extra[64];
    snprintf(extra, sizeof extra, ",\"cpus\":[%d,%d]", c0, c1);
    report("lim_cacheline", 64, v, nbatch, 0, extra);
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int c = 0; c < CPU_SETSIZE && c < 1024; c++)
        CPU_SET(c, &all);
    sched_setaffinity(0, sizeof all, &all);
}

/* ---- a byte passed through two pipes by two processes with blocking reads ----
 * Both on one CPU: every pass is a context switch (lim_ctxswitch). On two
 * CPUs: every pass wakes a reader that went to sleep on its CPU
 * (lim_wakeup), which is what a blocking receive pays when its peer is
 * elsewhere; on a VM whose idle vCPUs are halted by the host that costs far
 * more than the switch itself. */
static void pipe_token(const char *bench, int cpu_parent, int cpu_child)
{
    int ab[2], ba[2];
    if (pipe(ab) || pipe(ba))
        die("pipe");
    long iters = scale ? 5000L * scale : 500;
    if (cpu_parent != cpu_child)
        iters /= 8; /* a wake-up costs several switches */
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    char c = 0;
    if (pid == 0) {
        pin(cpu_child);
        for (long i = 0; i < iters * (nbatch + 1); i++) {
            if (read(ab[0], &c, 1) != 1)
                _exit(1);
            c++;
            if (write(ba[1], &c, 1) != 1)
                _exit(1);
        }
        _exit(0);
    }
    pin(cpu_parent);
    double v[64];
    for (int r = -1; r < nbatch; r++) {
        double t0 = now();
        for (long i = 0; i < iters; i++) {
            char d = (char)(c + 1);
            if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
                die("pipe token");
            if (c != d)
                die("token validation");
        }
        if (r >= 0)
            v[r] = (now() - t0) * 1e6 / (2.0 * (double)iters); /* one pass */
    }
    waitpid(pid, NULL, 0);
    close(ab[0]);
    close(ab[1]);
    close(ba[0]);
    close(ba[1]);
    char extra[64];
    if (cpu_parent == cpu_child)
        snprintf(extra, sizeof extra, ",\"cpu\":%d,\"method\":\"pipe\"", cpu_parent);
    else
        snprintf(extra, sizeof extra, ",\"cpus\":[%d,%d],\"method\":\"pipe\"", cpu_parent, cpu_child);
    report(bench, 1, v, nbatch, 0, extra);
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int k = 0; k < 1024; k++)
        CPU_SET(k, &all);
    sched_setaffinity(0, sizeof all, &all);
}

static void bench_ctxswitch(void)
{
    pipe_token("lim_ctxswitch", nth_cpu(0), nth_cpu(0));
}

static void bench_wakeup(void)
{
    if (ncpus() < 2) {
        printf("{\"bench\":\"lim_wakeup\",\"error\":\"needs 2 CPUs\"}\n");
        return;
    }
    pipe_token("lim_wakeup", nth_cpu(0), nth_cpu(1));
}

/* ---- TCP loopback ---- */
static void full_io(int fd, void *b, size_t n, int wr)
{
    size_t d = 0;
    while (d < n) {
        ssize_t r = wr ? write(fd, (char *)b + d, n - d) : read(fd, (char *)b + d, n - d);
        if (r <= 0)
            die(wr ? "tcp write" : "tcp read");
        d += (size_t)r;
    }
}

static void bench_tcp(void)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&a, &al))
        die("tcp listen");
    long iters = scale ? 2000L * scale : 200;
    size_t chunk = 1u << 20;
    long nchunks = scale ? 64L * scale : 16;
    pid_t pid = fork();
    if (pid == 0) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(s, (struct sockaddr *)&a, sizeof a))
            _exit(1);
        char m[8];
        for (long i = 0; i < iters * (nbatch + 1); i++) {
            full_io(s, m, 8, 0);
            full_io(s, m, 8, 1);
        }
        char *b = malloc(chunk);
        for (int r = 0; r < nbatch; r++)
            for (long i = 0; i < nchunks; i++)
                full_io(s, b, chunk, 0);
        full_io(s, m, 1, 1);
        _exit(0);
    }
    int s = accept(ls, NULL, NULL);
    if (s < 0)
        die("accept");
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    double v[64];
    uint64_t m = 0;
    for (int r = -1; r < nbatch; r++) {
        double t0 = now();
        for (long i = 0; i < iters; i++) {
            uint64_t x = m + 1;
            full_io(s, &x, 8, 1);
            full_io(s, &m, 8, 0);
            if (m != x)
                die("tcp validation");
        }
        if (r >= 0)
            v[r] = (now() - t0) * 1e6 / (2.0 * (double)iters);
    }
    report("lim_tcp_latency", 8, v, nbatch, 8, NULL);
    char *b = malloc(chunk);
    memset(b, 1, chunk);
    for (int r = 0; r < nbatch; r++) {
        double t0 = now();
        for (long i = 0; i < nchunks; i++)
            full_io(s, b, chunk, 1);
        v[r] = (now() - t0) * 1e6 / (double)nchunks;
    }
    char c;
    full_io(s, &c, 1, 0); /* receiver has drained everything */
    report("lim_tcp_bw", chunk, v, nbatch, (double)chunk, NULL);
    free(b);
    close(s);
    close(ls);
    waitpid(pid, NULL, 0);
}

/* ---- process_vm_readv ---- */
static void bench_vmreadv(void)
{
    size_t n = 64u << 20;
    int p[2], q[2];
    if (pipe(p) || pipe(q))
        die("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        unsigned char *b = malloc(n);
        for (size_t i = 0; i < n; i++)
            b[i] = (unsigned char)(i * 13 + 5);
        uintptr_t addr = (uintptr_t)b;
        if (write(p[1], &addr, sizeof addr) != sizeof addr)
            _exit(1);
        char c;
        if (read(q[0], &c, 1) != 1)
            _exit(1);
        _exit(0);
    }
    uintptr_t addr;
    if (read(p[0], &addr, sizeof addr) != sizeof addr)
        die("pipe");
    unsigned char *b = malloc(n);
    memset(b, 0, n);
    int reps = scale ? scale : 1;
    double v[64];
    for (int r = -1; r < nbatch; r++) {
        double t0 = now();
        for (int i = 0; i < reps; i++) {
            struct iovec l = {b, n}, rm = {(void *)addr, n};
            ssize_t got = process_vm_readv(pid, &l, 1, &rm, 1, 0);
            if (got != (ssize_t)n) {
                char c = 0;
                if (write(q[1], &c, 1) < 0) {}
                die("process_vm_readv");
            }
        }
        if (r >= 0)
            v[r] = (now() - t0) * 1e6 / reps;
    }
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)(i * 13 + 5))
            die("process_vm_readv validation");
    char c = 0;
    if (write(q[1], &c, 1) != 1)
        die("pipe");
    waitpid(pid, NULL, 0);
    report("lim_vmreadv", n, v, nbatch, (double)n, NULL);
    free(b);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            scale = 1;
            nbatch = 11;
        } else if (!strcmp(argv[i], "--smoke")) {
            scale = 0;
            nbatch = 3;
        }
    }
    char list[256];
    snprintf(list, sizeof list, "%s", what);
    int all = !strcmp(what, "all");
    if (all || strstr(list, "memcpy"))
        bench_memcpy();
    if (all || strstr(list, "cacheline"))
        bench_cacheline();
    if (all || strstr(list, "ctxswitch"))
        bench_ctxswitch();
    if (all || strstr(list, "wakeup"))
        bench_wakeup();
    if (all || strstr(list, "tcp"))
        bench_tcp();
    if (all || strstr(list, "vmreadv"))
        bench_vmreadv();
    return 0;
}
