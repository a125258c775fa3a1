/* Raw TCP reference for the MPI point-to-point benchmarks (not MPI): the
 * same ping-pong and windowed bandwidth measurements as mpibench's
 * `pingpong` and `bw`, over one TCP connection with TCP_NODELAY and blocking
 * sockets, so that an MPI on TCP can be compared with what the sockets give.
 *
 *   tcp_pingpong [pingpong,bw] [OPTIONS]        loopback: forks its own server
 *   tcp_pingpong --server [--listen ADDR] [--port P]
 *   tcp_pingpong [pingpong,bw] --connect HOST[:PORT] [OPTIONS]
 *
 * The server serves one client and exits; the client drives the measurement
 * and prints the results. Across hosts, start the server on one and the
 * client on the other in any order: the client retries the connection for
 * --connect-timeout seconds (10). HOST may be a name or an IPv4/IPv6 address
 * (IPv6 with a port: [ADDR]:PORT). Default port 47177.
 * OPTIONS as mpibench: --quick, --smoke, --sizes a,b,.. (k/m suffixes; 1 B to
 * 4 MiB, size 0 is skipped: a byte stream has no empty message),
 * --budget s, --window w, --min-samples n, --max-samples n, --warmup n,
 * --batch-us us.
 * --cc NAME: the connection runs congestion control NAME (TCP_CONGESTION;
 * give it to both sides): to compare with an MPI that chose its own, as
 * Baton does where the system's default paces (BBR).
 * --spin: both sides busy-poll their reads (MSG_DONTWAIT in a loop) instead
 * of sleeping in read(), as MPI progress engines do: on a VM the wake-up of a
 * sleeping reader can cost more than the transfer itself.
 * Output: one JSON object per line, as mpibench (bench "pingpong" or "bw",
 * ranks 2, "impl":"raw_tcp" or "raw_tcp_spin"); errors as {"bench":...,"error":...} and exit 1.
 *
 * Definitions, as in bench/src/p2p.c: pingpong latency = round trip / 2;
 * bw = time of a window of messages (each its own write of SIZE bytes, sent
 * from and received into a buffer of its own, as MPI_Isend/MPI_Irecv need;
 * windows capped at 64 MiB) followed by a 4-byte acknowledgement, divided by
 * the window. Samples are batches of iterations lasting ~2 ms; the median
 * over samples is reported, sampling stops when the median is stable or at
 * the time budget. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PORT "47177"
#define MAX_SIZES 64
#define MAX_SAMPLES 4096
#define WINDOW_BYTES (64u << 20)
#define MAGIC 0x42544350u /* "BTCP" */

enum { OP_PINGPONG = 1, OP_BW = 2, OP_QUIT = 3 };

/* One command from the client; the server answers with the traffic it asks
 * for. Fixed size, host byte order (both ends are this program on one
 * architecture). */
typedef struct {
    uint32_t magic, op;
    uint64_t size, count, window;
    uint32_t spin, pad;
} cmd_t;

static struct {
    int quick, smoke;
    size_t sizes[MAX_SIZES];
    int nsizes;
    double budget_s, batch_us, stable_tol;
    int min_samples, max_samples, warmup, window;
    double connect_timeout;
    int spin; /* busy-poll reads instead of sleeping in read() */
} o = {.budget_s = 0.5, .batch_us = 2000, .stable_tol = 0.03, .min_samples = 5, .max_samples = 200,
       .warmup = 10, .window = 64, .connect_timeout = 10};

static const char *cur_bench = "tcp";

static void die(const char *what)
{
    int e = errno;
    fprintf(stderr, "tcp_pingpong: %s: %s\n", what, e ? strerror(e) : "failed");
    printf("{\"bench\":\"%s\",\"error\":\"%s: %s\"}\n", cur_bench, what, e ? strerror(e) : "failed");
    fflush(stdout);
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void full_io(int fd, void *b, size_t n, int wr)
{
    size_t d = 0;
    while (d < n) {
        ssize_t r = wr ? write(fd, (char *)b + d, n - d)
                       : recv(fd, (char *)b + d, n - d, o.spin ? MSG_DONTWAIT : 0);
        if (r < 0 && (errno == EINTR || (o.spin && !wr && (errno == EAGAIN || errno == EWOULDBLOCK))))
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = ECONNRESET;
            die(wr ? "write" : "read");
        }
        d += (size_t)r;
    }
}

static const char *cc_name; /* --cc */

static void set_nodelay(int s)
{
    int one = 1;
    if (setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
        die("setsockopt TCP_NODELAY");
    if (cc_name && setsockopt(s, IPPROTO_TCP, TCP_CONGESTION, cc_name, (socklen_t)strlen(cc_name)))
        die("setsockopt TCP_CONGESTION (--cc)");
}

/* "host", "host:port", "[v6]:port", "v6" (more than one colon, no brackets) */
static void split_hostport(const char *in, char *host, size_t hn, char *port, size_t pn, const char *defport)
{
    const char *colon = strrchr(in, ':');
    snprintf(port, pn, "%s", defport);
    if (in[0] == '[') {
        const char *end = strchr(in, ']');
        size_t len = end ? (size_t)(end - in - 1) : strlen(in + 1);
        snprintf(host, hn, "%.*s", (int)len, in + 1);
        if (end && end[1] == ':')
            snprintf(port, pn, "%s", end + 2);
    } else if (colon && strchr(in, ':') == colon) {
        snprintf(host, hn, "%.*s", (int)(colon - in), in);
        snprintf(port, pn, "%s", colon + 1);
    } else {
        snprintf(host, hn, "%s", in);
    }
}

static int listen_on(const char *addr, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
    int rc = getaddrinfo(addr, port, &hints, &res);
    if (rc) {
        fprintf(stderr, "tcp_pingpong: %s:%s: %s\n", addr ? addr : "*", port, gai_strerror(rc));
        errno = EINVAL;
        die("listen address");
    }
    int ls = -1;
    /* the first address that binds; IPv6 wildcard first takes IPv4 too */
    for (struct addrinfo *a = res; a && ls < 0; a = a->ai_next) {
        ls = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (ls < 0)
            continue;
        int one = 1;
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(ls, a->ai_addr, a->ai_addrlen) || listen(ls, 1)) {
            close(ls);
            ls = -1;
        }
    }
    freeaddrinfo(res);
    if (ls < 0)
        die("bind/listen");
    return ls;
}

static int connect_to(const char *hostport)
{
    char host[256], port[32];
    split_hostport(hostport, host, sizeof host, port, sizeof port, DEFAULT_PORT);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc) {
        fprintf(stderr, "tcp_pingpong: %s: %s\n", hostport, gai_strerror(rc));
        errno = EINVAL;
        die("resolve");
    }
    double t_end = now() + o.connect_timeout;
    for (;;) {
        for (struct addrinfo *a = res; a; a = a->ai_next) {
            int s = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
            if (s < 0)
                continue;
            if (connect(s, a->ai_addr, a->ai_addrlen) == 0) {
                freeaddrinfo(res);
                set_nodelay(s);
                return s;
            }
            close(s);
        }
        /* the server may not listen yet (started at the same time) */
        if (now() > t_end)
            die("connect");
        usleep(20000);
    }
}

/* ---- server ---- */

static void serve(int ls)
{
    int s = accept(ls, NULL, NULL);
    if (s < 0)
        die("accept");
    close(ls);
    set_nodelay(s);
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (;;) {
        cmd_t c;
        size_t got = 0;
        while (got < sizeof c) { /* EOF between commands = the client is done */
            ssize_t r = read(s, (char *)&c + got, sizeof c - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                if (got == 0)
                    goto done;
                errno = ECONNRESET;
                die("read command");
            }
            got += (size_t)r;
        }
        if (c.magic != MAGIC) {
            errno = EPROTO;
            die("bad command");
        }
        if (c.op == OP_QUIT)
            break;
        o.spin = (int)c.spin;
        /* bw receives each message of a window into its own buffer, as mpibench does */
        size_t need = c.op == OP_BW ? c.size * c.window : c.size;
        if (need > cap) {
            free(buf);
            cap = need;
            buf = malloc(cap);
            if (!buf)
                die("malloc");
        }
        if (c.op == OP_PINGPONG) {
            /* echo: the client checks that its own bytes come back */
            for (uint64_t i = 0; i < c.count; i++) {
                full_io(s, buf, c.size, 0);
                full_io(s, buf, c.size, 1);
            }
        } else if (c.op == OP_BW) {
            for (uint64_t i = 0; i < c.count; i++) {
                for (uint64_t j = 0; j < c.window; j++) {
                    unsigned char *m = buf + j * c.size;
                    full_io(s, m, c.size, 0);
                    if (c.size >= 8) {
                        uint64_t tag;
                        memcpy(&tag, m, 8);
                        if (tag != (i << 16 | j)) {
                            errno = EPROTO;
                            die("bw: message out of order");
                        }
                    }
                }
                uint32_t ack = (uint32_t)i;
                full_io(s, &ack, 4, 1);
            }
        } else {
            errno = EPROTO;
            die("unknown command");
        }
    }
done:
    free(buf);
    close(s);
}

/* ---- client ---- */

typedef struct {
    int s;
    int op;
    size_t size;
    int window;
    unsigned char *buf, *rbuf;
} ctx_t;

/* Runs n iterations; returns the elapsed seconds. */
static double kernel(ctx_t *c, long n, long first)
{
    cmd_t cmd = {.magic = MAGIC, .op = (uint32_t)c->op, .size = c->size, .count = (uint64_t)n,
                 .window = (uint64_t)c->window, .spin = (uint32_t)o.spin};
    full_io(c->s, &cmd, sizeof cmd, 1);
    double t0 = now();
    for (long it = 0; it < n; it++) {
        if (c->op == OP_PINGPONG) {
            uint64_t tag = (uint64_t)(first + it);
            if (c->size >= 8)
                memcpy(c->buf, &tag, 8);
            full_io(c->s, c->buf, c->size, 1);
            full_io(c->s, c->rbuf, c->size, 0);
            if (c->size >= 8 && memcmp(c->rbuf, &tag, 8)) {
                errno = EPROTO;
                die("pingpong: wrong reply");
            }
        } else {
            for (int j = 0; j < c->window; j++) {
                uint64_t tag = (uint64_t)it << 16 | (uint64_t)j;
                unsigned char *m = c->buf + (size_t)j * c->size;
                if (c->size >= 8)
                    memcpy(m, &tag, 8);
                full_io(c->s, m, c->size, 1);
            }
            uint32_t ack;
            full_io(c->s, &ack, 4, 0);
            if (ack != (uint32_t)it) {
                errno = EPROTO;
                die("bw: wrong acknowledgement");
            }
        }
    }
    return now() - t0;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(const double *v, int n)
{
    double t[MAX_SAMPLES];
    memcpy(t, v, sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof(double), cmpd);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* The sampling rule of mpibench's measure() (bench/src/common.c). */
static void measure(ctx_t *c, const char *bench)
{
    static double v[MAX_SAMPLES];
    long it = 0;
    double w = kernel(c, o.warmup, it);
    it += o.warmup;
    double per_iter_us = w * 1e6 / o.warmup;
    long k = per_iter_us > 0 ? (long)(o.batch_us / per_iter_us) : 1000;
    if (k < 1)
        k = 1;
    if (k > 100000)
        k = 100000;
    double start = now();
    int n = 0, stable = 0;
    long iters = 0;
    for (;;) {
        v[n++] = kernel(c, k, it) * 1e6 / (double)k;
        it += k;
        iters += k;
        if (n >= o.min_samples) {
            double all = median_of(v, n), late = median_of(v + n / 2, n - n / 2);
            if (all > 0 && fabs(late - all) / all <= o.stable_tol && n >= 2 * o.min_samples) {
                stable = 1;
                break;
            }
            if (n >= o.max_samples || now() - start >= o.budget_s)
                break;
        }
    }
    double med = median_of(v, n), mn = v[0], sum = 0;
    for (int i = 0; i < n; i++) {
        if (v[i] < mn)
            mn = v[i];
        sum += v[i];
    }
    double div = c->op == OP_PINGPONG ? 2.0 : (double)c->window;
    med /= div;
    mn /= div;
    double mean = sum / n / div;
    char extra[64] = "";
    if (c->op == OP_BW)
        snprintf(extra, sizeof extra, ",\"window\":%d", c->window);
    printf("{\"bench\":\"%s\",\"size\":%zu,\"ranks\":2,\"min_us\":%.4f,\"median_us\":%.4f,\"mean_us\":%.4f,"
           "\"mbps\":%.3f,\"samples\":%d,\"iters\":%ld,\"stable\":%s%s,\"impl\":\"%s\"}\n",
           bench, c->size, mn, med, mean, med > 0 ? (double)c->size / med : 0, n, iters,
           stable ? "true" : "false", extra, o.spin ? "raw_tcp_spin" : "raw_tcp");
    fflush(stdout);
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

static void run_client(int s, const char *list)
{
    size_t sizes[MAX_SIZES];
    int ns = 0;
    if (o.nsizes) {
        memcpy(sizes, o.sizes, sizeof(size_t) * (size_t)o.nsizes);
        ns = o.nsizes;
    } else {
        for (size_t z = 1; z <= (4u << 20); z *= 2)
            sizes[ns++] = z;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *b = strtok_r(buf, ",", &save); b; b = strtok_r(NULL, ",", &save)) {
        int op = !strcmp(b, "pingpong") ? OP_PINGPONG : !strcmp(b, "bw") ? OP_BW : 0;
        cur_bench = b;
        if (!op) {
            printf("{\"bench\":\"%s\",\"error\":\"unknown benchmark (pingpong, bw)\"}\n", b);
            exit(2);
        }
        for (int i = 0; i < ns; i++) {
            /* a zero-byte message does not exist on a byte stream */
            if (sizes[i] == 0 || sizes[i] > (4u << 20))
                continue;
            ctx_t c = {.s = s, .op = op, .size = sizes[i], .window = 1};
            if (op == OP_BW) {
                c.window = o.window;
                if (sizes[i] > 0 && (size_t)c.window * sizes[i] > WINDOW_BYTES)
                    c.window = (int)(WINDOW_BYTES / sizes[i]) < 4 ? 4 : (int)(WINDOW_BYTES / sizes[i]);
            }
            /* bw sends each message of a window from its own buffer, as mpibench does: one
             * reused buffer would stay in cache and flatter the copies */
            c.buf = calloc((size_t)c.window, sizes[i] + 1);
            c.rbuf = calloc(1, sizes[i] + 1);
            if (!c.buf || !c.rbuf)
                die("malloc");
            measure(&c, b);
            free(c.buf);
            free(c.rbuf);
        }
    }
    cmd_t q = {.magic = MAGIC, .op = OP_QUIT};
    full_io(s, &q, sizeof q, 1);
}

static void usage(void)
{
    fputs("usage: tcp_pingpong [pingpong,bw] [--quick|--smoke] [--sizes a,b,..] [--budget s] [--window w] [--spin] [--cc NAME]\n"
          "                    [--connect HOST[:PORT]] [--connect-timeout s]\n"
          "       tcp_pingpong --server [--listen ADDR] [--port P] [--cc NAME]\n",
          stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *list = "pingpong,bw", *connect_arg = NULL, *listen_addr = NULL, *port = DEFAULT_PORT;
    int server = 0;
    signal(SIGPIPE, SIG_IGN);
    /* presets first, so that explicit options override them wherever they are */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            o.quick = 1;
            o.budget_s = 0.05;
            o.min_samples = 3;
            o.max_samples = 30;
            o.warmup = 3;
            o.batch_us = 1000;
            o.window = 16;
        } else if (!strcmp(argv[i], "--smoke")) {
            o.smoke = 1;
            o.budget_s = 0.005;
            o.min_samples = 1;
            o.max_samples = 3;
            o.warmup = 1;
            o.batch_us = 200;
            o.window = 8;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_v = i + 1 < argc;
        const char *v = has_v ? argv[i + 1] : "";
        if (!strcmp(a, "--quick") || !strcmp(a, "--smoke"))
            continue;
        if (!strcmp(a, "--server"))
            server = 1;
        else if (!strcmp(a, "--spin"))
            o.spin = 1;
        else if (a[0] != '-' && i == 1)
            list = a;
        else if (!has_v)
            usage();
        else if (!strcmp(a, "--sizes")) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", v);
            o.nsizes = 0;
            for (char *t = strtok(buf, ","); t && o.nsizes < MAX_SIZES; t = strtok(NULL, ","))
                o.sizes[o.nsizes++] = parse_size(t);
            i++;
        } else if (!strcmp(a, "--budget")) {
            o.budget_s = atof(v); i++;
        } else if (!strcmp(a, "--window")) {
            o.window = atoi(v); i++;
        } else if (!strcmp(a, "--min-samples")) {
            o.min_samples = atoi(v); i++;
        } else if (!strcmp(a, "--max-samples")) {
            o.max_samples = atoi(v); i++;
        } else if (!strcmp(a, "--warmup")) {
            o.warmup = atoi(v); i++;
        } else if (!strcmp(a, "--batch-us")) {
            o.batch_us = atof(v); i++;
        } else if (!strcmp(a, "--connect")) {
            connect_arg = v; i++;
        } else if (!strcmp(a, "--connect-timeout")) {
            o.connect_timeout = atof(v); i++;
        } else if (!strcmp(a, "--listen")) {
            listen_addr = v; i++;
        } else if (!strcmp(a, "--port")) {
            port = v; i++;
        } else if (!strcmp(a, "--cc")) {
            cc_name = v; i++;
        } else
            usage();
    }
    if (o.max_samples > MAX_SAMPLES)
        o.max_samples = MAX_SAMPLES;
    if (o.min_samples < 1)
        o.min_samples = 1;
    if (o.max_samples < o.min_samples)
        o.max_samples = o.min_samples;
    if (o.warmup < 1)
        o.warmup = 1;
    if (o.window < 1)
        o.window = 1;

    if (server) {
        serve(listen_on(listen_addr, port));
        return 0;
    }
    if (connect_arg) {
        int s = connect_to(connect_arg);
        run_client(s, list);
        close(s);
        return 0;
    }
    /* loopback: the server is a child on an ephemeral port of 127.0.0.1 */
    int ls = listen_on(listen_addr ? listen_addr : "127.0.0.1", "0");
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    char host[64], serv[16], hp[96];
    if (getsockname(ls, (struct sockaddr *)&sa, &sl) ||
        getnameinfo((struct sockaddr *)&sa, sl, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV))
        die("getsockname");
    snprintf(hp, sizeof hp, strchr(host, ':') ? "[%s]:%s" : "%s:%s", host, serv);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        serve(ls);
        _exit(0);
    }
    close(ls);
    int s = connect_to(hp);
    run_client(s, list);
    close(s);
    int st;
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        errno = 0;
        die("server process failed");
    }
    return 0;
}
