/* otlp.c — OTLP/HTTP JSON export of finished spans (otlp.h). */
/* gcc's -Wformat-truncation cannot see that the values fit the buffers sized for them (a
 * longer one would only be cut); clang's checks stay on. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "broker/otlp.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"

/* ---- the URL ---------------------------------------------------------------------------- */

int st_otlp_parse_url(const char *url, char *host, size_t hostlen, int *port, char *path,
                      size_t pathlen, char *err, size_t errlen)
{
    const char *p = url;
    if (strncmp(p, "http://", 7) != 0) {
        snprintf(err, errlen, "'%s': want http://host:port/path (https is not supported)", url);
        return -EINVAL;
    }
    p += 7;
    const char *hs = p, *he;
    if (*p == '[') {
        hs = p + 1;
        he = strchr(hs, ']');
        if (!he || he[1] != ':') {
            snprintf(err, errlen, "'%s': want http://[v6 address]:port/path", url);
            return -EINVAL;
        }
        p = he + 1;
    } else {
        he = p + strcspn(p, ":/");
        p = he;
    }
    if (he == hs || (size_t)(he - hs) >= hostlen || *p != ':') {
        snprintf(err, errlen, "'%s': want http://host:port/path (the port is required)", url);
        return -EINVAL;
    }
    memcpy(host, hs, (size_t)(he - hs));
    host[he - hs] = 0;
    p++;
    long v = 0;
    const char *ps = p;
    while (*p >= '0' && *p <= '9' && v <= 65535)
        v = v * 10 + (*p++ - '0');
    if (p == ps || v < 1 || v > 65535 || (*p && *p != '/')) {
        snprintf(err, errlen, "'%s': the port must be 1 to 65535", url);
        return -EINVAL;
    }
    *port = (int)v;
    const char *pth = *p ? p : "/";
    if (strlen(pth) >= pathlen || strpbrk(pth, " \t\r\n")) {
        snprintf(err, errlen, "'%s': the path is too long or holds a space", url);
        return -EINVAL;
    }
    snprintf(path, pathlen, "%s", pth);
    return 0;
}

/* ---- the body --------------------------------------------------------------------------- */

static json_t *hex(const void *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char t[33];
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        t[2 * i] = digits[b[i] >> 4];
        t[2 * i + 1] = digits[b[i] & 15];
    }
    t[2 * n] = 0;
    return json_string(t);
}

/* A span id as 8 bytes, most significant first, so its hex reads as the number does. */
static json_t *span_id(uint64_t id)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(id >> (56 - 8 * i));
    return hex(b, 8);
}

static json_t *decimal(int64_t v)
{
    char t[24];
    snprintf(t, sizeof t, "%" PRId64, v);
    return json_string(t);
}

static json_t *attr(const char *key, json_t *value, const char *type)
{
    return json_pack("{s:s, s:{s:o}}", "key", key, "value", type, value);
}

static json_t *span_json(const st_span_t *s)
{
    json_t *attrs = json_array();
    for (int i = 0; attrs && i < s->nattrs; i++) {
        const st_span_attr_t *a = &s->attrs[i];
        json_array_append_new(attrs, a->is_str ? attr(a->key, json_string(a->s), "stringValue")
                                               : attr(a->key, decimal(a->i), "intValue"));
    }
    json_t *j =
        json_pack("{s:o, s:o, s:s, s:i, s:o, s:o, s:o}", "traceId", hex(s->trace_id, 16), "spanId",
                  span_id(s->span_id), "name", s->name, "kind", s->kind, "startTimeUnixNano",
                  decimal(st_trace_unix_ns(s->start_ns)), "endTimeUnixNano",
                  decimal(st_trace_unix_ns(s->end_ns)), "attributes", attrs);
    if (j && s->parent_id)
        json_object_set_new(j, "parentSpanId", span_id(s->parent_id));
    if (j && s->error)
        json_object_set_new(j, "status", json_pack("{s:i}", "code", 2));
    return j;
}

int st_otlp_encode(const char *service, const st_span_t *spans, size_t n, st_buf_t *out)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++)
        if (json_array_append_new(list, span_json(&spans[i]))) {
            json_decref(list);
            list = NULL;
        }
    char hostname[256] = "";
    gethostname(hostname, sizeof hostname - 1);
    json_t *res = json_pack("[o, o, o]", attr("service.name", json_string(service), "stringValue"),
                            attr("service.version", json_string(STRATA_VERSION), "stringValue"),
                            attr("host.name", json_string(hostname), "stringValue"));
    json_t *root = json_pack("{s:[{s:{s:o}, s:[{s:{s:s, s:s}, s:o}]}]}", "resourceSpans",
                             "resource", "attributes", res, "scopeSpans", "scope", "name", "strata",
                             "version", STRATA_VERSION, "spans", list);
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!text)
        return -ENOMEM;
    st_buf_append(out, text, strlen(text));
    free(text);
    return out->oom ? -ENOMEM : 0;
}

/* ---- the HTTP client -------------------------------------------------------------------- */

static int wait_fd(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - st_mono_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

static int connect_to(const char *host, int port, int64_t deadline_ms, char *err, size_t errlen)
{
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(g));
        return -EHOSTUNREACH;
    }
    int rc = -ECONNREFUSED;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 ||
            (errno == EINPROGRESS && (rc = wait_fd(fd, POLLOUT, deadline_ms)) == 0)) {
            int so = 0;
            socklen_t sl = sizeof so;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl);
            if (so == 0) {
                freeaddrinfo(ai);
                return fd;
            }
            rc = -so;
        } else if (errno != EINPROGRESS) {
            rc = -errno;
        }
        close(fd);
    }
    freeaddrinfo(ai);
    snprintf(err, errlen, "cannot connect to %s:%d: %s", host, port, strerror(-rc));
    return rc;
}

static int send_all(int fd, const char *p, size_t n, int64_t deadline_ms)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
        int rc = wait_fd(fd, POLLOUT, deadline_ms);
        if (rc)
            return rc;
    }
    return 0;
}

/* Reads until the status line is whole: its code, or a negative errno. */
static int read_status(int fd, int64_t deadline_ms)
{
    char b[256];
    size_t n = 0;
    while (n < sizeof b - 1 && !memchr(b, '\n', n)) {
        ssize_t k = recv(fd, b + n, sizeof b - 1 - n, 0);
        if (k == 0)
            break;
        if (k > 0) {
            n += (size_t)k;
            continue;
        }
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
        int rc = wait_fd(fd, POLLIN, deadline_ms);
        if (rc)
            return rc;
    }
    b[n] = 0;
    int code = 0;
    if (sscanf(b, "HTTP/1.%*1[01] %3d", &code) != 1 || code < 100 || code > 599)
        return -EPROTO;
    return code;
}

int st_otlp_post(const char *host, int port, const char *path, const void *body, size_t len,
                 int timeout_ms, char *err, size_t errlen)
{
    int64_t deadline = st_mono_ms() + timeout_ms;
    int fd = connect_to(host, port, deadline, err, errlen);
    if (fd < 0)
        return fd;
    char head[768];
    bool v6 = strchr(host, ':') != NULL;
    int hn = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: %s%s%s:%d\r\nUser-Agent: strata/%s\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      path, v6 ? "[" : "", host, v6 ? "]" : "", port, STRATA_VERSION, len);
    int rc = hn > 0 && (size_t)hn < sizeof head ? 0 : -ENAMETOOLONG;
    if (!rc)
        rc = send_all(fd, head, (size_t)hn, deadline);
    if (!rc)
        rc = send_all(fd, body, len, deadline);
    if (!rc)
        rc = read_status(fd, deadline);
    close(fd);
    if (rc < 0)
        snprintf(err, errlen, "POST http://%s:%d%s: %s", host, port, path,
                 rc == -EPROTO ? "the answer is not HTTP" : strerror(-rc));
    return rc;
}

/* ---- the exporter thread ---------------------------------------------------------------- */

static struct {
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    char host[256];
    int port;
    char path[1024];
    char service[256];
    int64_t last_error_log_ms;
} ex = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* Sends spans[0..n) as one batch; counts the outcome. True when the collector took it. */
static bool export_batch(const st_span_t *spans, size_t n)
{
    st_buf_t body;
    st_buf_init(&body);
    char err[512] = "";
    int rc = st_otlp_encode(ex.service, spans, n, &body);
    if (!rc) {
        rc = st_otlp_post(ex.host, ex.port, ex.path, body.data, body.len, ST_OTLP_TIMEOUT_MS, err,
                          sizeof err);
        if (rc > 0 && (rc < 200 || rc > 299))
            snprintf(err, sizeof err, "POST http://%s:%d%s: HTTP status %d", ex.host, ex.port,
                     ex.path, rc);
    } else {
        snprintf(err, sizeof err, "cannot encode %zu spans: out of memory", n);
    }
    st_buf_fini(&body);
    bool ok = rc >= 200 && rc <= 299;
    st_trace_count_export(n, ok);
    /* one line a minute at most: a collector that is down must not flood the log */
    int64_t now = st_mono_ms();
    if (!ok && (ex.last_error_log_ms == 0 || now - ex.last_error_log_ms >= 60000)) {
        ex.last_error_log_ms = now;
        ST_WARN("tracing: %zu spans dropped: %s", n, err);
    }
    return ok;
}

static void *exporter(void *arg)
{
    (void)arg;
    st_span_t *batch = malloc(ST_OTLP_BATCH * sizeof *batch);
    if (!batch) {
        ST_ERROR("tracing: out of memory, no spans will be exported");
        return NULL;
    }
    size_t n = 0;
    int64_t since = st_mono_ms();
    bool stop = false;
    while (!stop) {
        pthread_mutex_lock(&ex.mu);
        if (!ex.stop) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000000L; /* the queue is looked at ten times a second */
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&ex.cv, &ex.mu, &ts);
        }
        stop = ex.stop;
        pthread_mutex_unlock(&ex.mu);
        for (;;) {
            n += st_trace_take(batch + n, ST_OTLP_BATCH - n);
            bool due = n == ST_OTLP_BATCH ||
                       (n > 0 && (stop || st_mono_ms() - since >= ST_OTLP_INTERVAL_MS));
            if (!due)
                break;
            bool ok = export_batch(batch, n);
            n = 0;
            since = st_mono_ms();
            if (stop && !ok)
                break; /* at the end, one failure is enough: what is left is dropped */
        }
        if (n == 0)
            since = st_mono_ms();
    }
    free(batch);
    return NULL;
}

int st_otlp_start(const char *endpoint, const char *ratio, const char *service, char *err,
                  size_t errlen)
{
    char *end;
    double r = strtod(ratio, &end);
    if (end == ratio || *end || !(r >= 0 && r <= 1)) {
        snprintf(err, errlen, "bad value for tracing.sample.ratio: '%s' (0 to 1)", ratio);
        return -1;
    }
    if (!*service || strlen(service) >= sizeof ex.service) {
        snprintf(err, errlen, "bad value for tracing.service.name: empty or over 255 bytes");
        return -1;
    }
    if (!*endpoint)
        return 0;
    char e[400];
    if (st_otlp_parse_url(endpoint, ex.host, sizeof ex.host, &ex.port, ex.path, sizeof ex.path, e,
                          sizeof e)) {
        snprintf(err, errlen, "bad value for tracing.endpoint: %s", e);
        return -1;
    }
    snprintf(ex.service, sizeof ex.service, "%s", service);
    if (st_trace_enable(r, 0)) {
        snprintf(err, errlen, "tracing: out of memory");
        return -1;
    }
    ex.stop = false;
    int rc = pthread_create(&ex.thread, NULL, exporter, NULL);
    if (rc) {
        st_trace_disable();
        snprintf(err, errlen, "tracing: cannot start the exporter: %s", strerror(rc));
        return -1;
    }
    ex.running = true;
    ST_INFO("tracing: %g of Produce and Fetch requests to %s (service %s)", r, endpoint,
            ex.service);
    return 0;
}

void st_otlp_stop(void)
{
    if (!ex.running)
        return;
    atomic_store(&st_trace_threshold_, 0);
    pthread_mutex_lock(&ex.mu);
    ex.stop = true;
    pthread_cond_signal(&ex.cv);
    pthread_mutex_unlock(&ex.mu);
    pthread_join(ex.thread, NULL);
    ex.running = false;
    st_trace_disable();
}
