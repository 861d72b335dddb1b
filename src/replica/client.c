/*
 * client.c — the broker-to-broker client (client.h): routing by broker id or partition leader,
 * one conn.h connection per broker, bounded retries, on a uvthread.h thread.
 *
 * Everything here runs on the client thread except st_client_start / _stop / _send /
 * _set_metadata, which only touch the locked inbox.
 */
#include "replica/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "io/uvthread.h"
#include "proto/kheader.h"
#include "replica/conn.h"

#define C_TICK_MS 50

typedef struct cconn {
    st_client_t *cl;
    int32_t broker;
    char host[256];
    int port;
    st_rconn_t *rc;
    st_client_req_t *waiting, *waiting_tail; /* routed here, not sent yet (connecting) */
    struct cconn *next;
} cconn_t;

struct st_client {
    char client_id[64];
    st_rsec_t *sec; /* the inter-broker listener's TLS and SASL (NULL: plain) */
    st_uvthread_t th;
    bool th_up;
    /* the inbox (th's lock) */
    st_client_req_t *inbox, *inbox_tail;
    st_md_t *next_md;
    /* the client thread */
    uv_timer_t tick;
    st_md_t *md;
    cconn_t *conns;
    st_client_req_t *retry; /* waiting for their retry_at */
    int32_t next_corr;
    bool closing;
};

static void finish(st_client_req_t *req, int err)
{
    req->done(req, err ? err : ST_E_AGAIN, NULL, 0);
}

/* req did not get its answer (err): routed again after a pause while it has tries left. */
static void again(st_client_t *cl, st_client_req_t *req, int err)
{
    req->last_err = err;
    int max = req->max_tries > 0 ? req->max_tries : ST_CLIENT_DEFAULT_TRIES;
    if (cl->closing || req->tries >= max) {
        finish(req, cl->closing ? ST_E_CLOSED : err);
        return;
    }
    req->retry_at = st_mono_ms() + ST_CLIENT_RETRY_MS;
    req->next = cl->retry;
    cl->retry = req;
}

/* ---- connections ---- */

static void send_req(cconn_t *c, st_client_req_t *req)
{
    st_client_t *cl = c->cl;
    st_buf_t b;
    st_buf_init(&b);
    int32_t corr = cl->next_corr++ & 0x7fffffff;
    int hv = st_kp_req_header_version(req->api_key, req->api_version);
    int rc = hv < 0 ? hv : st_buf_put_be32(&b, 0);
    if (rc == 0) {
        st_kwriter_t w;
        st_kwriter_init(&w, &b);
        st_kp_req_header_t h = {req->api_key, req->api_version, corr, st_kstr(cl->client_id)};
        rc = st_kp_req_header_encode(&w, hv, &h);
    }
    if (rc == 0)
        rc = st_buf_append(&b, req->body, req->len);
    if (rc == 0 && b.oom)
        rc = -ENOMEM;
    if (rc == 0) {
        st_put_be32(b.data, (uint32_t)(b.len - 4));
        req->sent_to = c->broker;
        rc = st_rconn_send(c->rc, &b, corr, req);
    }
    st_buf_fini(&b);
    if (rc == ST_E_UNSUPPORTED) {
        finish(req, rc); /* no header for this API: no try would do better */
    } else if (rc) {
        again(cl, req, rc);
        st_rconn_fail(c->rc, "cannot send a request");
    }
}

/* Sends what waits for c, connecting first. */
static void conn_pump(cconn_t *c)
{
    if (!c->waiting || !st_rconn_pump(c->rc, st_mono_ms()))
        return;
    while (c->waiting && st_rconn_up(c->rc)) {
        st_client_req_t *req = c->waiting;
        c->waiting = req->next;
        if (!c->waiting)
            c->waiting_tail = NULL;
        send_req(c, req);
    }
}

static void on_connected(void *arg, st_rconn_t *rc)
{
    (void)rc;
    conn_pump(arg);
}

static void on_answer(void *arg, st_rconn_t *rc, void *r, const uint8_t *frame, size_t len)
{
    cconn_t *c = arg;
    st_client_req_t *req = r;
    st_rconn_healthy(rc);
    if (req->done(req, 0, frame, len) == ST_CLIENT_RETRY)
        again(c->cl, req, ST_E_AGAIN);
}

static void on_drop(void *arg, st_rconn_t *rc, void *r)
{
    (void)rc;
    cconn_t *c = arg;
    again(c->cl, r, -ECONNRESET);
}

/* The connection was lost: what waited for it uses a try (a broker that refuses stays bounded). */
static void on_lost(void *arg, st_rconn_t *rc, const char *why)
{
    (void)rc;
    (void)why;
    cconn_t *c = arg;
    st_client_req_t *w = c->waiting;
    c->waiting = c->waiting_tail = NULL;
    while (w) {
        st_client_req_t *next = w->next;
        again(c->cl, w, -ECONNREFUSED);
        w = next;
    }
}

static const st_rconn_ops_t conn_ops = {
    .connected = on_connected, .answer = on_answer, .drop = on_drop, .lost = on_lost};

/* Closes c: what it held is routed again (or finished, when closing). */
static void conn_release(st_client_t *cl, cconn_t *c)
{
    for (cconn_t **pp = &cl->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    st_rconn_close(c->rc); /* drops in-flight requests: on_drop */
    on_lost(c, NULL, NULL);
    free(c);
}

/* The connection to broker b (a new one when its address changed). */
static cconn_t *conn_for(st_client_t *cl, const st_md_broker_t *b)
{
    for (cconn_t *c = cl->conns; c; c = c->next) {
        if (c->broker != b->node_id)
            continue;
        if (c->port == b->port && strcmp(c->host, b->host ? b->host : "") == 0)
            return c;
        conn_release(cl, c);
        break;
    }
    cconn_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cl = cl;
    c->broker = b->node_id;
    snprintf(c->host, sizeof c->host, "%s", b->host ? b->host : "");
    c->port = b->port;
    char what[64];
    snprintf(what, sizeof what, "inter-broker client: connection to broker %d", (int)b->node_id);
    c->rc = st_rconn_new(&cl->th.loop, c->host, c->port, what, cl->sec, &conn_ops, c);
    if (!c->rc) {
        free(c);
        return NULL;
    }
    c->next = cl->conns;
    cl->conns = c;
    return c;
}

/* ---- routing ---- */

static int32_t route_to(const st_client_t *cl, const st_client_req_t *req)
{
    if (req->broker >= 0 || !cl->md || !req->topic)
        return req->broker;
    const st_md_topic_t *t = st_md_find(cl->md, req->topic, (int32_t)strlen(req->topic));
    if (!t || req->partition < 0 || req->partition >= t->npartitions)
        return -1;
    return t->partitions[req->partition].leader;
}

static void route(st_client_t *cl, st_client_req_t *req)
{
    req->tries++;
    int32_t id = route_to(cl, req);
    const st_md_broker_t *b = id >= 0 && cl->md ? st_md_broker(cl->md, id) : NULL;
    cconn_t *c = b ? conn_for(cl, b) : NULL;
    if (!c) {
        again(cl, req, b ? -ENOMEM : ST_E_NOT_LEADER);
        return;
    }
    req->next = NULL;
    if (c->waiting_tail)
        c->waiting_tail->next = req;
    else
        c->waiting = req;
    c->waiting_tail = req;
    conn_pump(c);
}

static void on_tick(uv_timer_t *t)
{
    st_client_t *cl = t->data;
    int64_t now = st_mono_ms();
    st_client_req_t *due = NULL, **pp = &cl->retry;
    while (*pp) {
        st_client_req_t *r = *pp;
        if (r->retry_at <= now) {
            *pp = r->next;
            r->next = due;
            due = r;
        } else {
            pp = &r->next;
        }
    }
    while (due) {
        st_client_req_t *r = due;
        due = r->next;
        route(cl, r);
    }
    for (cconn_t *c = cl->conns; c; c = c->next)
        if (!st_rconn_tick(c->rc, now, ST_CLIENT_TIMEOUT_MS))
            conn_pump(c);
}

/* ---- the thread ---- */

static void close_all(st_client_t *cl)
{
    cl->closing = true;
    while (cl->retry) {
        st_client_req_t *r = cl->retry;
        cl->retry = r->next;
        finish(r, ST_E_CLOSED);
    }
    while (cl->conns)
        conn_release(cl, cl->conns);
    uv_close((uv_handle_t *)&cl->tick, NULL);
}

static void on_wake(void *arg, bool stop)
{
    st_client_t *cl = arg;
    st_uvthread_lock(&cl->th);
    st_client_req_t *in = cl->inbox;
    cl->inbox = cl->inbox_tail = NULL;
    st_md_t *md = cl->next_md;
    cl->next_md = NULL;
    st_uvthread_unlock(&cl->th);
    if (md) {
        st_md_unref(cl->md);
        cl->md = md;
    }
    while (in) {
        st_client_req_t *req = in;
        in = req->next;
        req->tries = 0;
        req->last_err = 0;
        if (stop || cl->closing)
            finish(req, ST_E_CLOSED);
        else
            route(cl, req);
    }
    if (stop && !cl->closing)
        close_all(cl);
}

static int c_init(void *arg, uv_loop_t *loop)
{
    st_client_t *cl = arg;
    uv_timer_init(loop, &cl->tick);
    cl->tick.data = cl;
    uv_timer_start(&cl->tick, on_tick, C_TICK_MS, C_TICK_MS);
    return 0;
}

static const st_uvthread_ops_t c_ops = {.init = c_init, .wake = on_wake};

int st_client_start(st_client_t **out, const char *client_id, const st_config_t *cfg, char *err,
                    size_t errlen)
{
    st_client_t *cl = calloc(1, sizeof *cl);
    if (!cl)
        return -ENOMEM;
    snprintf(cl->client_id, sizeof cl->client_id, "%s", client_id);
    int rc = st_rsec_create(cfg, &cl->sec, err, errlen);
    if (rc) {
        free(cl);
        return rc;
    }
    rc = st_uvthread_start(&cl->th, &c_ops, cl);
    cl->th_up = true;
    if (rc) {
        snprintf(err, errlen, "cannot start the inter-broker client thread: %s", uv_strerror(rc));
        st_uvthread_fini(&cl->th);
        st_rsec_destroy(cl->sec);
        free(cl);
        return rc;
    }
    *out = cl;
    return 0;
}

void st_client_stop(st_client_t *cl)
{
    if (!cl)
        return;
    st_uvthread_stop(&cl->th);
    st_uvthread_fini(&cl->th);
    st_md_unref(cl->md);
    st_md_unref(cl->next_md);
    st_rsec_destroy(cl->sec); /* after the thread: its connections are gone */
    free(cl);
}

void st_client_set_metadata(st_client_t *cl, st_md_t *md)
{
    st_md_ref(md);
    if (!st_uvthread_post_begin(&cl->th)) {
        st_md_unref(md);
        return;
    }
    st_md_t *old = cl->next_md;
    cl->next_md = md;
    st_uvthread_post_end(&cl->th);
    st_md_unref(old);
}

void st_client_send(st_client_t *cl, st_client_req_t *req)
{
    req->next = NULL;
    if (!st_uvthread_post_begin(&cl->th)) {
        req->done(req, ST_E_CLOSED, NULL, 0);
        return;
    }
    if (cl->inbox_tail)
        cl->inbox_tail->next = req;
    else
        cl->inbox = req;
    cl->inbox_tail = req;
    st_uvthread_post_end(&cl->th);
}
