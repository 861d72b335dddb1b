/*
 * jetstream_bench.c — a pipelined JetStream publisher, the NATS side of bench/run_kafka.sh.
 *
 * It speaks NATS's text protocol over one TCP connection, with no client library:
 *
 *   <- INFO {...}
 *   -> CONNECT {"verbose":false,...}  PING            <- PONG
 *   -> SUB _INBOX.sb.* 1                              (every reply lands here)
 *   -> PUB $JS.API.STREAM.CREATE.<name> _INBOX.sb.c <n>\r\n{config}   <- MSG ... {response}
 *   -> PUB <subject> _INBOX.sb.<slot> <size>\r\n<payload>\r\n
 *   <- MSG _INBOX.sb.<slot> 1 <n>\r\n{"stream":"<name>","seq":N}\r\n   (the PubAck)
 *
 * Each publish takes a slot (0..window-1) and names it in its reply subject, so at most
 * --window publishes are unacknowledged at once: pipelined like librdkafka's in-flight
 * batches, with an ack per message. The latency of a message is PubAck arrival minus its send
 * time; with --rate, minus its *intended* send time (start + i/rate), so a stall is charged
 * to every message it delayed, as `strata bench produce --rate` does.
 *
 * --streams N creates N file-storage streams <prefix>0..N-1, each on its own subject, and
 * publishes round robin over them (the analogue of N partitions; each stream has its own
 * files and sequence). They are deleted at the end. The summary is one JSON object on stdout
 * with the same field names as `strata bench produce --json`.
 *
 *   bench_jetstream_bench --port P [--streams N] [--size B] [--duration S | --count N]
 *                         [--rate R] [--window W] [--prefix NAME]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define INBOX    "_INBOX.sb."
#define RBUF_CAP (4 << 20)
#define WBUF_CAP (1 << 20)

typedef struct conn {
    int fd;
    char *rbuf;
    size_t rlen;
    char *wbuf;
    size_t wlen;
} conn_t;

typedef struct bench {
    conn_t c;
    int streams, window;
    int64_t size, count, duration_ns;
    double rate;
    const char *prefix;
    char *payload;
    int64_t *slot_ns; /* send (or intended) time of the publish in each slot */
    int *free_slots;  /* stack of free slots */
    int nfree;
    int64_t *lat; /* every latency, ns */
    size_t nlat, cap_lat;
    int64_t sent, acked, failed;
    char ctl[1 << 16]; /* the last control reply (stream create/delete) */
    bool ctl_ready;
} bench_t;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "jetstream_bench: %s%s%s\n", what, errno ? ": " : "",
            errno ? strerror(errno) : "");
    exit(1);
}

static void wput(conn_t *c, const void *p, size_t n)
{
    if (c->wlen + n > WBUF_CAP) {
        errno = 0;
        die("write buffer overflow");
    }
    memcpy(c->wbuf + c->wlen, p, n);
    c->wlen += n;
}

static void wprintf_(conn_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wprintf_(conn_t *c, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        errno = 0;
        die("control line too long");
    }
    wput(c, tmp, (size_t)n);
}

/* Writes what it can without blocking; returns false when the socket is gone. */
static bool flush_some(conn_t *c)
{
    while (c->wlen) {
        ssize_t n = send(c->fd, c->wbuf, c->wlen, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return true;
            return false;
        }
        memmove(c->wbuf, c->wbuf + n, c->wlen - (size_t)n);
        c->wlen -= (size_t)n;
    }
    return true;
}

static void on_ack(bench_t *b, int slot, const char *body, size_t n)
{
    int64_t t = now_ns();
    if (slot < 0 || slot >= b->window || b->slot_ns[slot] < 0)
        return;
    if (memmem(body, n, "\"error\"", 7)) {
        if (!b->failed)
            fprintf(stderr, "jetstream_bench: publish failed: %.*s\n", (int)n, body);
        b->failed++;
    } else {
        if (b->nlat == b->cap_lat) {
            b->cap_lat = b->cap_lat ? b->cap_lat * 2 : 1 << 16;
            b->lat = realloc(b->lat, b->cap_lat * sizeof(*b->lat));
            if (!b->lat)
                die("out of memory");
        }
        b->lat[b->nlat++] = t - b->slot_ns[slot];
        b->acked++;
    }
    b->slot_ns[slot] = -1;
    b->free_slots[b->nfree++] = slot;
}

/* Parses whole protocol lines (and message bodies) from the read buffer. */
static void parse(bench_t *b)
{
    conn_t *c = &b->c;
    size_t pos = 0;
    for (;;) {
        char *line = c->rbuf + pos;
        char *eol = memmem(line, c->rlen - pos, "\r\n", 2);
        if (!eol)
            break;
        size_t llen = (size_t)(eol - line);
        if (llen >= 4 && !memcmp(line, "MSG ", 4)) {
            /* MSG <subject> <sid> [reply] <#bytes> */
            char subj[256];
            size_t nbytes = 0;
            const char *sp = line + 4, *end = eol;
            const char *se = memchr(sp, ' ', (size_t)(end - sp));
            if (!se || (size_t)(se - sp) >= sizeof(subj)) {
                errno = 0;
                die("bad MSG line");
            }
            memcpy(subj, sp, (size_t)(se - sp));
            subj[se - sp] = 0;
            const char *last = end;
            while (last > se && last[-1] != ' ')
                last--;
            nbytes = strtoul(last, NULL, 10);
            size_t need = llen + 2 + nbytes + 2;
            if (c->rlen - pos < need)
                break;
            const char *body = eol + 2;
            if (!strncmp(subj, INBOX, strlen(INBOX))) {
                const char *tail = subj + strlen(INBOX);
                if (*tail == 'c') {
                    size_t m = nbytes < sizeof(b->ctl) - 1 ? nbytes : sizeof(b->ctl) - 1;
                    memcpy(b->ctl, body, m);
                    b->ctl[m] = 0;
                    b->ctl_ready = true;
                } else {
                    on_ack(b, atoi(tail), body, nbytes);
                }
            }
            pos += need;
            continue;
        }
        if (llen >= 5 && !memcmp(line, "HMSG ", 5)) {
            /* HMSG <subject> <sid> [reply] <#hdr> <#total>: a status (503 no responders). */
            const char *last = eol;
            while (last > line && last[-1] != ' ')
                last--;
            size_t total = strtoul(last, NULL, 10);
            size_t need = llen + 2 + total + 2;
            if (c->rlen - pos < need)
                break;
            fprintf(stderr, "jetstream_bench: status reply: %.*s\n",
                    (int)(total < 200 ? total : 200), eol + 2);
            errno = 0;
            die("JetStream did not answer (is -js on?)");
        }
        if (llen >= 4 && !memcmp(line, "PING", 4))
            wput(c, "PONG\r\n", 6);
        else if (llen >= 4 && !memcmp(line, "-ERR", 4)) {
            fprintf(stderr, "jetstream_bench: server: %.*s\n", (int)llen, line);
            errno = 0;
            die("server error");
        }
        /* INFO, PONG, +OK: nothing to do. */
        pos += llen + 2;
    }
    memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
    c->rlen -= pos;
}

/* One round of I/O: waits up to timeout_ns for the socket, then reads and writes. */
static void io_round(bench_t *b, int64_t timeout_ns)
{
    conn_t *c = &b->c;
    struct pollfd p = {.fd = c->fd, .events = POLLIN | (c->wlen ? POLLOUT : 0)};
    struct timespec ts = {.tv_sec = timeout_ns / 1000000000, .tv_nsec = timeout_ns % 1000000000};
    int r = ppoll(&p, 1, &ts, NULL);
    if (r < 0 && errno != EINTR)
        die("poll");
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
        for (;;) {
            if (c->rlen == RBUF_CAP) {
                errno = 0;
                die("read buffer full");
            }
            ssize_t n = recv(c->fd, c->rbuf + c->rlen, RBUF_CAP - c->rlen, MSG_DONTWAIT);
            if (n == 0) {
                errno = 0;
                die("server closed the connection");
            }
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                    break;
                die("recv");
            }
            c->rlen += (size_t)n;
            parse(b);
        }
    }
    if (!flush_some(c))
        die("send");
}

/* Sends a JetStream API request and waits (bounded) for its reply in b->ctl. */
static const char *request(bench_t *b, const char *subject, const char *body)
{
    b->ctl_ready = false;
    wprintf_(&b->c, "PUB %s " INBOX "c %zu\r\n%s\r\n", subject, strlen(body), body);
    int64_t deadline = now_ns() + 10 * 1000000000LL;
    while (!b->ctl_ready && now_ns() < deadline)
        io_round(b, 50000000);
    if (!b->ctl_ready) {
        errno = 0;
        die("no reply to a JetStream API request within 10 s");
    }
    return b->ctl;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_ms(const int64_t *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t i = (size_t)(p / 100.0 * (double)n);
    if (i >= n)
        i = n - 1;
    return (double)v[i] / 1e6;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_jetstream_bench --port P [--host 127.0.0.1] [--streams N] "
                    "[--size B] [--duration SECS | --count N] [--rate MSGS/S] [--window W] "
                    "[--prefix NAME]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    bench_t b = {.streams = 1, .window = 1024, .size = 1024, .prefix = "sbench"};
    const char *host = "127.0.0.1";
    int port = 0;
    double dur = 0;
    for (int i = 1; i < argc; i += 2) { /* --flag value pairs */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (!strcmp(a, "--host"))
            host = v;
        else if (!strcmp(a, "--port"))
            port = atoi(v);
        else if (!strcmp(a, "--streams"))
            b.streams = atoi(v);
        else if (!strcmp(a, "--size"))
            b.size = atoll(v);
        else if (!strcmp(a, "--duration"))
            dur = atof(v);
        else if (!strcmp(a, "--count"))
            b.count = atoll(v);
        else if (!strcmp(a, "--rate"))
            b.rate = atof(v);
        else if (!strcmp(a, "--window"))
            b.window = atoi(v);
        else if (!strcmp(a, "--prefix"))
            b.prefix = v;
        else
            usage();
    }
    if (port <= 0 || b.streams < 1 || b.streams > 1000 || b.size < 0 || b.size > (1 << 20) ||
        b.window < 1 || b.window > 1000000 || (dur <= 0 && b.count <= 0))
        usage();
    b.duration_ns = (int64_t)(dur * 1e9);

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        usage();
    b.c.fd = socket(AF_INET, SOCK_STREAM, 0);
    if (b.c.fd < 0 || connect(b.c.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        die("connect");
    int one = 1;
    setsockopt(b.c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    b.c.rbuf = malloc(RBUF_CAP);
    b.c.wbuf = malloc(WBUF_CAP);
    b.payload = malloc((size_t)b.size + 1);
    b.slot_ns = malloc(sizeof(int64_t) * (size_t)b.window);
    b.free_slots = malloc(sizeof(int) * (size_t)b.window);
    if (!b.c.rbuf || !b.c.wbuf || !b.payload || !b.slot_ns || !b.free_slots)
        die("out of memory");
    for (int64_t i = 0; i < b.size; i++)
        b.payload[i] = (char)('a' + i % 26);
    for (int s = 0; s < b.window; s++) {
        b.slot_ns[s] = -1;
        b.free_slots[b.nfree++] = b.window - 1 - s;
    }

    wprintf_(&b.c, "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,"
                   "\"no_responders\":true,\"protocol\":1,\"name\":\"strata-bench\"}\r\n"
                   "SUB " INBOX "* 1\r\n");

    /* The streams: file storage, one subject each, replaced if left over from a crash. */
    char subj[256], body[1024];
    for (int s = 0; s < b.streams; s++) {
        snprintf(subj, sizeof(subj), "$JS.API.STREAM.DELETE.%s%d", b.prefix, s);
        request(&b, subj, "");
        snprintf(subj, sizeof(subj), "$JS.API.STREAM.CREATE.%s%d", b.prefix, s);
        snprintf(body, sizeof(body),
                 "{\"name\":\"%s%d\",\"subjects\":[\"%s.%d\"],\"storage\":\"file\","
                 "\"retention\":\"limits\",\"discard\":\"old\",\"num_replicas\":1}",
                 b.prefix, s, b.prefix, s);
        const char *r = request(&b, subj, body);
        if (strstr(r, "\"error\"")) {
            fprintf(stderr, "jetstream_bench: cannot create stream %s%d: %s\n", b.prefix, s, r);
            return 1;
        }
    }

    /* Publish. */
    char hdr[256];
    int64_t start = now_ns(), deadline = b.duration_ns ? start + b.duration_ns : 0;
    double interval = b.rate > 0 ? 1e9 / b.rate : 0;
    for (;;) {
        int64_t t = now_ns();
        bool more = (!b.count || b.sent < b.count) && (!deadline || t < deadline);
        if (!more && b.acked + b.failed == b.sent)
            break;
        if (!more && t > (deadline ? deadline : t) + 30 * 1000000000LL) {
            errno = 0;
            die("acks still missing 30 s after the last publish");
        }
        int64_t wait_ns = 50000000;
        while (more && b.nfree > 0 && b.c.wlen + (size_t)b.size + 300 < WBUF_CAP) {
            int64_t stamp = t;
            if (interval > 0) {
                int64_t intended = start + (int64_t)((double)b.sent * interval);
                if (intended > t) {
                    /* Never early: sleep (on the socket) until its intended time. */
                    wait_ns = intended - t < wait_ns ? intended - t : wait_ns;
                    break;
                }
                stamp = intended;
            }
            int slot = b.free_slots[--b.nfree];
            b.slot_ns[slot] = stamp;
            int s = (int)(b.sent % b.streams);
            int n = snprintf(hdr, sizeof(hdr), "PUB %s.%d " INBOX "%d %" PRId64 "\r\n", b.prefix, s,
                             slot, b.size);
            wput(&b.c, hdr, (size_t)n);
            wput(&b.c, b.payload, (size_t)b.size);
            wput(&b.c, "\r\n", 2);
            b.sent++;
            if (b.count && b.sent >= b.count)
                break;
            if (b.c.wlen > 64 * 1024)
                break;
            t = now_ns();
            if (deadline && t >= deadline)
                break;
        }
        if (b.c.wlen)
            wait_ns = 0;
        io_round(&b, more && b.nfree > 0 && interval == 0 ? 0 : wait_ns);
    }
    int64_t end = now_ns();

    for (int s = 0; s < b.streams; s++) {
        snprintf(subj, sizeof(subj), "$JS.API.STREAM.DELETE.%s%d", b.prefix, s);
        request(&b, subj, "");
    }
    close(b.c.fd);

    qsort(b.lat, b.nlat, sizeof(*b.lat), cmp_i64);
    double secs = (double)(end - start) / 1e9, sum = 0;
    for (size_t i = 0; i < b.nlat; i++)
        sum += (double)b.lat[i];
    printf("{\"mode\":\"jetstream-publish\",\"streams\":%d,\"size\":%" PRId64
           ",\"messages\":%" PRId64 ",\"bytes\":%" PRId64 ",\"failed\":%" PRId64
           ",\"seconds\":%.3f,\"msgs_per_sec\":%.1f,"
           "\"mb_per_sec\":%.3f,\"rate\":%.1f,\"window\":%d",
           b.streams, b.size, b.acked, b.acked * b.size, b.failed, secs, (double)b.acked / secs,
           (double)b.acked * (double)b.size / secs / 1e6, b.rate, b.window);
    if (b.nlat)
        printf(",\"latency_ms\":{\"count\":%zu,\"mean\":%.3f,\"p50\":%.3f,\"p95\":%.3f,"
               "\"p99\":%.3f,\"p99_9\":%.3f,\"max\":%.3f}",
               b.nlat, sum / (double)b.nlat / 1e6, pct_ms(b.lat, b.nlat, 50),
               pct_ms(b.lat, b.nlat, 95), pct_ms(b.lat, b.nlat, 99), pct_ms(b.lat, b.nlat, 99.9),
               (double)b.lat[b.nlat - 1] / 1e6);
    printf("}\n");
    return b.failed ? 1 : 0;
}
