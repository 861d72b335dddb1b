/*
 * conn.c — a client connection to another broker (conn.h): connect, reconnect with backoff,
 * framing, the in-flight queue.
 */
#include "replica/conn.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"

#define C_READ_CHUNK (64u << 10)

typedef struct rc_req {
    int32_t corr;
    int64_t sent_ms;
    void *req;
    struct rc_req *next;
} rc_req_t;

struct st_rconn {
    uv_loop_t *loop;
    const st_rconn_ops_t *ops;
    void *arg;
    char host[256];
    int port;
    char what[96];
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    bool tcp_open; /* the handle is initialised (until its close callback) */
    bool closing, connected, dead;
    bool warned; /* its failure was logged; cleared by st_rconn_healthy */
    int backoff_ms;
    int64_t retry_at;
    st_buf_t rbuf;
    rc_req_t *inflight, *inflight_tail;
    int ninflight;
};

typedef struct rc_write {
    uv_write_t req;
    st_rconn_t *c;
    uint8_t *data;
} rc_write_t;

static void rc_free(st_rconn_t *c)
{
    st_buf_fini(&c->rbuf);
    free(c);
}

st_rconn_t *st_rconn_new(uv_loop_t *loop, const char *host, int port, const char *what,
                         const st_rconn_ops_t *ops, void *arg)
{
    st_rconn_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->loop = loop;
    c->ops = ops;
    c->arg = arg;
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    snprintf(c->what, sizeof c->what, "%s", what);
    c->backoff_ms = ST_RCONN_BACKOFF_MIN_MS;
    st_buf_init(&c->rbuf);
    return c;
}

static void on_tcp_closed(uv_handle_t *h)
{
    st_rconn_t *c = h->data;
    c->tcp_open = false;
    c->closing = false;
    if (c->dead)
        rc_free(c);
}

/* Hands every request in flight back to the owner (unless dead: the owner is gone). */
static void drop_all(st_rconn_t *c)
{
    while (c->inflight) {
        rc_req_t *r = c->inflight;
        c->inflight = r->next;
        c->ops->drop(c->arg, c, r->req);
        free(r);
    }
    c->inflight_tail = NULL;
    c->ninflight = 0;
}

void st_rconn_fail(st_rconn_t *c, const char *why)
{
    if (!c->tcp_open || c->closing)
        return;
    if (!c->warned)
        ST_WARN("%s %s:%d lost: %s (retrying every %d ms at most)", c->what, c->host, c->port, why,
                ST_RCONN_BACKOFF_MAX_MS);
    c->warned = true;
    c->closing = true;
    c->connected = false;
    uv_close((uv_handle_t *)&c->tcp, on_tcp_closed);
    st_buf_clear(&c->rbuf);
    c->retry_at = st_mono_ms() + c->backoff_ms;
    c->backoff_ms =
        c->backoff_ms * 2 > ST_RCONN_BACKOFF_MAX_MS ? ST_RCONN_BACKOFF_MAX_MS : c->backoff_ms * 2;
    drop_all(c);
    if (!c->dead && c->ops->lost)
        c->ops->lost(c->arg, c, why);
}

void st_rconn_close(st_rconn_t *c)
{
    if (!c)
        return;
    drop_all(c);
    c->dead = true;
    if (c->tcp_open) {
        if (!c->closing) {
            c->warned = true; /* no warning: it is no longer wanted */
            st_rconn_fail(c, "not needed");
        }
        return;
    }
    rc_free(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    st_rconn_t *c = h->data;
    if (st_buf_reserve(&c->rbuf, C_READ_CHUNK)) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)c->rbuf.data + c->rbuf.len, (unsigned)(c->rbuf.cap - c->rbuf.len));
}

/* One whole answer frame: it answers the oldest request in flight, or nothing. */
static void on_frame(st_rconn_t *c, const uint8_t *frame, size_t len)
{
    rc_req_t *r = c->inflight;
    if (!r || len < 4 || (int32_t)st_be32(frame) != r->corr) {
        st_rconn_fail(c, "an answer to no request");
        return;
    }
    c->inflight = r->next;
    if (!c->inflight)
        c->inflight_tail = NULL;
    c->ninflight--;
    void *req = r->req;
    free(r);
    c->ops->answer(c->arg, c, req, frame, len);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    st_rconn_t *c = s->data;
    if (n < 0) {
        st_rconn_fail(c, n == UV_EOF ? "closed by the peer" : uv_strerror((int)n));
        return;
    }
    if (n == 0)
        return;
    c->rbuf.len += (size_t)n;
    size_t at = 0;
    while (c->connected && !c->dead && c->rbuf.len - at >= 4) {
        uint32_t size = st_be32(c->rbuf.data + at);
        if (size > ST_RCONN_MAX_FRAME) {
            st_rconn_fail(c, "answer too large");
            return;
        }
        if (c->rbuf.len - at - 4 < size)
            break;
        on_frame(c, c->rbuf.data + at + 4, size);
        at += 4 + (size_t)size;
    }
    if (!c->connected || c->dead)
        return; /* st_rconn_fail cleared the buffer */
    if (at) {
        memmove(c->rbuf.data, c->rbuf.data + at, c->rbuf.len - at);
        c->rbuf.len -= at;
    }
}

static void on_connect(uv_connect_t *req, int status)
{
    st_rconn_t *c = req->data;
    if (c->closing)
        return;
    if (status < 0) {
        st_rconn_fail(c, uv_strerror(status));
        return;
    }
    c->connected = true;
    uv_tcp_nodelay(&c->tcp, 1);
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc) {
        st_rconn_fail(c, uv_strerror(rc));
        return;
    }
    ST_DEBUG("%s %s:%d: connected", c->what, c->host, c->port);
    if (c->ops->connected)
        c->ops->connected(c->arg, c);
}

static int resolve(const char *host, int port, struct sockaddr_storage *out)
{
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)out) == 0)
        return 0;
    if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)out) == 0)
        return 0;
    /* a name: resolved here, blocking only this thread */
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    if (getaddrinfo(host, p, &hints, &res) || !res)
        return -ENOENT;
    memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

static void rc_connect(st_rconn_t *c)
{
    struct sockaddr_storage sa;
    c->retry_at = st_mono_ms() + c->backoff_ms; /* the next try, should this one fail at once */
    if (resolve(c->host, c->port, &sa)) {
        if (c->backoff_ms >= ST_RCONN_BACKOFF_MAX_MS)
            ST_WARN("%s %s: cannot resolve it", c->what, c->host);
        c->backoff_ms = ST_RCONN_BACKOFF_MAX_MS;
        c->retry_at = st_mono_ms() + c->backoff_ms;
        return;
    }
    uv_tcp_init(c->loop, &c->tcp);
    c->tcp.data = c;
    c->tcp_open = true;
    c->connect_req.data = c;
    int rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&sa, on_connect);
    if (rc)
        st_rconn_fail(c, uv_strerror(rc));
}

bool st_rconn_pump(st_rconn_t *c, int64_t now_ms)
{
    if (c->dead)
        return false;
    if (!c->connected && !c->tcp_open && now_ms >= c->retry_at)
        rc_connect(c);
    return c->connected;
}

bool st_rconn_up(const st_rconn_t *c)
{
    return c->connected && !c->dead;
}

int st_rconn_inflight(const st_rconn_t *c)
{
    return c->ninflight;
}

static void on_write(uv_write_t *req, int status)
{
    rc_write_t *w = req->data;
    st_rconn_t *c = w->c;
    free(w->data);
    free(w);
    if (status < 0 && !c->closing)
        st_rconn_fail(c, uv_strerror(status));
}

int st_rconn_send(st_rconn_t *c, st_buf_t *b, int32_t corr, void *req)
{
    if (!st_rconn_up(c))
        return -ENOTCONN;
    rc_write_t *w = malloc(sizeof *w);
    rc_req_t *r = malloc(sizeof *r);
    if (!w || !r) {
        free(w);
        free(r);
        return -ENOMEM;
    }
    size_t len;
    w->c = c;
    w->data = st_buf_steal(b, &len);
    w->req.data = w;
    uv_buf_t ub = uv_buf_init((char *)w->data, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &ub, 1, on_write);
    if (rc) {
        free(w->data);
        free(w);
        free(r);
        return rc;
    }
    r->corr = corr;
    r->sent_ms = st_mono_ms();
    r->req = req;
    r->next = NULL;
    if (c->inflight_tail)
        c->inflight_tail->next = r;
    else
        c->inflight = r;
    c->inflight_tail = r;
    c->ninflight++;
    return 0;
}

void st_rconn_healthy(st_rconn_t *c)
{
    c->backoff_ms = ST_RCONN_BACKOFF_MIN_MS;
    c->warned = false;
}

bool st_rconn_tick(st_rconn_t *c, int64_t now_ms, int64_t timeout_ms)
{
    if (c->inflight && now_ms - c->inflight->sent_ms > timeout_ms) {
        st_rconn_fail(c, "no answer in time");
        return true;
    }
    return false;
}

const char *st_rconn_host(const st_rconn_t *c)
{
    return c->host;
}

int st_rconn_port(const st_rconn_t *c)
{
    return c->port;
}
