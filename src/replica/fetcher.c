/*
 * fetcher.c — the follower fetcher's thread: a libuv loop with one TCP client connection per
 * leader broker, the partitions followed from each, and the inbox other threads fill.
 *
 * Everything here runs on the fetcher thread except st_fetcher_start / _stop / _follow /
 * _unfollow / _position / _ref / _unref, which only touch the mutex-guarded inbox and the
 * reference count. Protocol encoding and decoding is wire.c's; the states are fetcher.h's.
 */
#include "replica/fetcher.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/arena.h"
#include "base/assert.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/kerr.h"
#include "replica/follow.h"
#include "replica/wire.h"

#define F_TICK_MS        50
#define F_MAX_FRAME      (128u << 20) /* an answer is at most max_bytes plus one batch */
#define F_READ_CHUNK     (64u << 10)
#define F_HASH_MIN       256
#define F_CLIENT_ID_SIZE 64

enum { IN_FOLLOW, IN_UNFOLLOW, IN_POSITION }; /* inbox messages */

typedef struct fconn fconn_t;

/* A partition followed. */
typedef struct fpart {
    uint8_t topic_id[16];
    int32_t partition;
    char *topic;
    int shard;
    int32_t leader_id;
    st_rfollow_t rf;  /* the decisions (follow.h): epoch, position (invariant 3), phase */
    bool in_flight;   /* in its connection's Fetch */
    int64_t retry_at; /* backoff: not in a request before this (monotonic ms) */
    int backoff_ms;
    int64_t warned_ms; /* the last warning about it (at most one every ST_FETCHER_WARN_MS) */
    uint32_t gen;      /* bumped by each follow() that starts over */
    fconn_t *conn;
    struct fpart *hnext;         /* hash chain */
    struct fpart *cprev, *cnext; /* the connection's partitions */
} fpart_t;

/* One partition of a request in flight. */
typedef struct freq_item {
    uint8_t topic_id[16];
    int32_t partition;
    uint32_t gen;
    const char *topic; /* the request's copy */
    bool answered;
} freq_item_t;

typedef struct freq {
    int32_t corr;
    int64_t sent_ms;
    int n, ntopics;
    freq_item_t *items;
    char **topics; /* one copy per run of a topic */
    struct freq *next;
} freq_t;

struct fconn {
    st_fetcher_t *f;
    char host[256];
    int port;
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    bool tcp_open; /* the handle is initialised (until its close callback) */
    bool closing, connected, dead;
    bool warned; /* its failure was logged; cleared by an answer */
    int backoff_ms;
    int64_t retry_at;
    st_buf_t rbuf;
    freq_t *inflight, *inflight_tail;
    bool fetch_inflight;
    int64_t answered_ms; /* when the last Fetch answer came */
    fpart_t *parts;
    int nparts, njobs; /* partitions; of them awaiting a position (ST_RF_JOB) */
    struct fconn *next;
};

/* An inbox message. */
typedef struct fmsg {
    int kind;
    uint8_t topic_id[16];
    int32_t partition;
    int32_t leader_epoch;
    int64_t offset; /* follow: fetch_offset; position: durable_end */
    int64_t log_start;
    int err;
    int32_t last_epoch, leader_id;
    int shard;
    int port;
    char *topic;
    char host[256];
    struct fmsg *next;
} fmsg_t;

struct st_fetcher {
    const st_config_t *cfg;
    st_fetcher_hooks_t hooks;
    int32_t self;
    char client_id[F_CLIENT_ID_SIZE];
    _Atomic int refs;
    pthread_t thread;
    bool thread_up;
    /* start-up handshake and the inbox */
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int start_rc; /* 1 while starting */
    fmsg_t *inbox, *inbox_tail;
    bool stop; /* set by st_fetcher_stop: the inbox takes nothing more */
    /* the loop (fetcher thread) */
    uv_loop_t loop;
    uv_async_t async;
    uv_timer_t tick;
    bool closing;
    int32_t next_corr;
    fconn_t *conns;
    fpart_t **buckets;
    size_t nbuckets, count;
};

/* ---- the partition table ---- */

static size_t part_hash(const uint8_t id[16], int32_t partition)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 16; i++)
        h = (h ^ id[i]) * 1099511628211ull;
    h = (h ^ (uint32_t)partition) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

static fpart_t *part_find(st_fetcher_t *f, const uint8_t id[16], int32_t partition)
{
    if (!f->nbuckets)
        return NULL;
    for (fpart_t *p = f->buckets[part_hash(id, partition) & (f->nbuckets - 1)]; p; p = p->hnext)
        if (p->partition == partition && memcmp(p->topic_id, id, 16) == 0)
            return p;
    return NULL;
}

static int part_insert(st_fetcher_t *f, fpart_t *p)
{
    if (f->count + 1 > f->nbuckets) {
        size_t n = f->nbuckets ? f->nbuckets * 2 : F_HASH_MIN;
        fpart_t **b = calloc(n, sizeof *b);
        if (!b)
            return -ENOMEM;
        for (size_t i = 0; i < f->nbuckets; i++)
            for (fpart_t *q = f->buckets[i], *next; q; q = next) {
                next = q->hnext;
                size_t h = part_hash(q->topic_id, q->partition) & (n - 1);
                q->hnext = b[h];
                b[h] = q;
            }
        free(f->buckets);
        f->buckets = b;
        f->nbuckets = n;
    }
    size_t h = part_hash(p->topic_id, p->partition) & (f->nbuckets - 1);
    p->hnext = f->buckets[h];
    f->buckets[h] = p;
    f->count++;
    return 0;
}

static void part_remove(st_fetcher_t *f, fpart_t *p)
{
    fpart_t **pp = &f->buckets[part_hash(p->topic_id, p->partition) & (f->nbuckets - 1)];
    while (*pp != p)
        pp = &(*pp)->hnext;
    *pp = p->hnext;
    f->count--;
}

/* The connection's count of partitions awaiting a position follows a phase change. */
static void phase_moved(fpart_t *p, int was)
{
    if (p->conn)
        p->conn->njobs += (p->rf.phase == ST_RF_JOB) - (was == ST_RF_JOB);
}

static void backoff(fpart_t *p)
{
    p->retry_at = st_mono_ms() + p->backoff_ms;
    p->backoff_ms = p->backoff_ms * 2 > ST_FETCHER_BACKOFF_MAX_MS ? ST_FETCHER_BACKOFF_MAX_MS
                                                                  : p->backoff_ms * 2;
}

/* ---- connections ---- */

static void conn_pump(fconn_t *c);

static void freq_free(freq_t *q)
{
    for (int i = 0; i < q->ntopics; i++)
        free(q->topics[i]);
    free(q->topics);
    free(q->items);
    free(q);
}

static void conn_free(fconn_t *c)
{
    while (c->inflight) {
        freq_t *q = c->inflight;
        c->inflight = q->next;
        freq_free(q);
    }
    st_buf_fini(&c->rbuf);
    free(c);
}

static void on_tcp_closed(uv_handle_t *h)
{
    fconn_t *c = h->data;
    c->tcp_open = false;
    c->closing = false;
    if (c->dead)
        conn_free(c);
}

/* Drops the connection (its requests are forgotten, their partitions free to go again) and
 * schedules a reconnect after the connection's backoff. */
static void conn_fail(fconn_t *c, const char *why)
{
    if (!c->tcp_open || c->closing)
        return;
    if (!c->warned)
        ST_WARN("replica fetcher: connection to leader %s:%d lost: %s (retrying every %d ms "
                "at most)",
                c->host, c->port, why, ST_FETCHER_BACKOFF_MAX_MS);
    c->warned = true;
    c->closing = true;
    c->connected = false;
    uv_close((uv_handle_t *)&c->tcp, on_tcp_closed);
    while (c->inflight) {
        freq_t *q = c->inflight;
        c->inflight = q->next;
        freq_free(q);
    }
    c->inflight_tail = NULL;
    c->fetch_inflight = false;
    st_buf_clear(&c->rbuf);
    for (fpart_t *p = c->parts; p; p = p->cnext)
        p->in_flight = false;
    c->retry_at = st_mono_ms() + c->backoff_ms;
    c->backoff_ms = c->backoff_ms * 2 > ST_FETCHER_BACKOFF_MAX_MS ? ST_FETCHER_BACKOFF_MAX_MS
                                                                  : c->backoff_ms * 2;
}

/* Forgets the connection: freed now, or once its handle has closed. */
static void conn_release(st_fetcher_t *f, fconn_t *c)
{
    for (fconn_t **pp = &f->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    c->dead = true;
    if (c->tcp_open) {
        if (!c->closing) {
            c->warned = true; /* no warning: it is no longer wanted */
            conn_fail(c, "not needed");
        }
        return;
    }
    conn_free(c);
}

static fconn_t *conn_get(st_fetcher_t *f, const char *host, int port)
{
    for (fconn_t *c = f->conns; c; c = c->next)
        if (c->port == port && strcmp(c->host, host) == 0)
            return c;
    fconn_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->f = f;
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    c->backoff_ms = ST_FETCHER_BACKOFF_MIN_MS;
    st_buf_init(&c->rbuf);
    c->next = f->conns;
    f->conns = c;
    return c;
}

static void part_attach(fpart_t *p, fconn_t *c)
{
    p->conn = c;
    p->cprev = NULL;
    p->cnext = c->parts;
    if (c->parts)
        c->parts->cprev = p;
    c->parts = p;
    c->nparts++;
    c->njobs += p->rf.phase == ST_RF_JOB;
}

/* Takes p off its connection, which is released when no partition is left on it unless
 * keep (p is about to join it again). */
static void part_detach(st_fetcher_t *f, fpart_t *p, bool keep)
{
    fconn_t *c = p->conn;
    if (!c)
        return;
    if (p->cprev)
        p->cprev->cnext = p->cnext;
    else
        c->parts = p->cnext;
    if (p->cnext)
        p->cnext->cprev = p->cprev;
    c->nparts--;
    c->njobs -= p->rf.phase == ST_RF_JOB;
    p->conn = NULL;
    p->in_flight = false;
    if (c->nparts == 0 && !keep)
        conn_release(f, c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    fconn_t *c = h->data;
    if (st_buf_reserve(&c->rbuf, F_READ_CHUNK)) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)c->rbuf.data + c->rbuf.len, (unsigned)(c->rbuf.cap - c->rbuf.len));
}

static void on_frame(fconn_t *c, const uint8_t *frame, size_t len);

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    fconn_t *c = s->data;
    if (n < 0) {
        conn_fail(c, n == UV_EOF ? "closed by the leader" : uv_strerror((int)n));
        return;
    }
    if (n == 0)
        return;
    c->rbuf.len += (size_t)n;
    size_t at = 0;
    while (c->connected && c->rbuf.len - at >= 4) {
        uint32_t size = st_be32(c->rbuf.data + at);
        if (size > F_MAX_FRAME) {
            conn_fail(c, "answer too large");
            return;
        }
        if (c->rbuf.len - at - 4 < size)
            break;
        on_frame(c, c->rbuf.data + at + 4, size);
        at += 4 + (size_t)size;
    }
    if (!c->connected)
        return; /* conn_fail cleared the buffer */
    if (at) {
        memmove(c->rbuf.data, c->rbuf.data + at, c->rbuf.len - at);
        c->rbuf.len -= at;
    }
}

static void on_connect(uv_connect_t *req, int status)
{
    fconn_t *c = req->data;
    if (c->closing)
        return;
    if (status < 0) {
        conn_fail(c, uv_strerror(status));
        return;
    }
    c->connected = true;
    uv_tcp_nodelay(&c->tcp, 1);
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc) {
        conn_fail(c, uv_strerror(rc));
        return;
    }
    ST_DEBUG("replica fetcher: connected to leader %s:%d", c->host, c->port);
    conn_pump(c);
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

static void conn_connect(fconn_t *c)
{
    struct sockaddr_storage sa;
    c->retry_at = st_mono_ms() + c->backoff_ms; /* the next try, should this one fail at once */
    if (resolve(c->host, c->port, &sa)) {
        if (c->backoff_ms >= ST_FETCHER_BACKOFF_MAX_MS)
            ST_WARN("replica fetcher: cannot resolve leader %s", c->host);
        c->backoff_ms = ST_FETCHER_BACKOFF_MAX_MS;
        c->retry_at = st_mono_ms() + c->backoff_ms;
        return;
    }
    uv_tcp_init(&c->f->loop, &c->tcp);
    c->tcp.data = c;
    c->tcp_open = true;
    c->connect_req.data = c;
    int rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&sa, on_connect);
    if (rc)
        conn_fail(c, uv_strerror(rc));
}

typedef struct fwrite {
    uv_write_t req;
    fconn_t *c;
    uint8_t *data;
} fwrite_t;

static void on_write(uv_write_t *req, int status)
{
    fwrite_t *w = req->data;
    fconn_t *c = w->c;
    free(w->data);
    free(w);
    if (status < 0 && !c->closing)
        conn_fail(c, uv_strerror(status));
}

/* Sends the frame in b (taken) as request q; q joins the in-flight queue. */
static int conn_send(fconn_t *c, st_buf_t *b, freq_t *q)
{
    fwrite_t *w = malloc(sizeof *w);
    if (!w)
        return -ENOMEM;
    size_t len;
    w->c = c;
    w->data = st_buf_steal(b, &len);
    w->req.data = w;
    uv_buf_t ub = uv_buf_init((char *)w->data, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &ub, 1, on_write);
    if (rc) {
        free(w->data);
        free(w);
        return rc;
    }
    q->sent_ms = st_mono_ms();
    q->next = NULL;
    if (c->inflight_tail)
        c->inflight_tail->next = q;
    else
        c->inflight = q;
    c->inflight_tail = q;
    return 0;
}

/* ---- requests ---- */

static int cmp_parts(const void *a, const void *b)
{
    const fpart_t *x = *(fpart_t *const *)a, *y = *(fpart_t *const *)b;
    int r = strcmp(x->topic, y->topic);
    if (r)
        return r;
    return (x->partition > y->partition) - (x->partition < y->partition);
}

/* The partitions of c that may go in a Fetch now, sorted by topic. */
static fpart_t **collect(fconn_t *c, int64_t now, int *n)
{
    *n = 0;
    fpart_t **v = malloc((size_t)c->nparts * sizeof *v + 1);
    if (!v)
        return NULL;
    for (fpart_t *p = c->parts; p; p = p->cnext)
        if (p->rf.phase == ST_RF_FETCH && !p->in_flight && now >= p->retry_at)
            v[(*n)++] = p;
    qsort(v, (size_t)*n, sizeof *v, cmp_parts);
    return v;
}

/* Builds the in-flight record of a request over v[0..n). */
static freq_t *freq_new(fpart_t **v, int n, int32_t corr)
{
    freq_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->corr = corr;
    q->items = calloc((size_t)n, sizeof *q->items);
    q->topics = calloc((size_t)n, sizeof *q->topics);
    if (!q->items || !q->topics) {
        freq_free(q);
        return NULL;
    }
    q->n = n;
    for (int i = 0; i < n; i++) {
        if (i == 0 || strcmp(v[i]->topic, v[i - 1]->topic) != 0) {
            q->topics[q->ntopics] = strdup(v[i]->topic);
            if (!q->topics[q->ntopics]) {
                freq_free(q);
                return NULL;
            }
            q->ntopics++;
        }
        freq_item_t *it = &q->items[i];
        memcpy(it->topic_id, v[i]->topic_id, 16);
        it->partition = v[i]->partition;
        it->gen = v[i]->gen;
        it->topic = q->topics[q->ntopics - 1];
    }
    return q;
}

static void send_fetch(fconn_t *c, int64_t now)
{
    st_fetcher_t *f = c->f;
    int n;
    fpart_t **v = collect(c, now, &n);
    if (!v || n == 0) {
        free(v);
        return;
    }
    st_rwire_part_t *w = malloc((size_t)n * sizeof *w);
    int32_t corr = f->next_corr++ & 0x7fffffff;
    freq_t *q = w ? freq_new(v, n, corr) : NULL;
    st_buf_t b;
    st_buf_init(&b);
    int rc = q ? 0 : -ENOMEM;
    if (rc == 0) {
        for (int i = 0; i < n; i++) {
            const st_rfollow_t *rf = &v[i]->rf;
            w[i] = (st_rwire_part_t){.topic = v[i]->topic,
                                     .partition = v[i]->partition,
                                     .current_leader_epoch = rf->leader_epoch,
                                     .fetch_offset = rf->fetch_offset,
                                     .last_fetched_epoch = rf->last_epoch,
                                     .log_start_offset = rf->log_start};
        }
        st_rwire_fetch_t fr = {f->self, ST_FETCHER_MAX_WAIT_MS, 1, ST_FETCHER_MAX_BYTES,
                               ST_FETCHER_PART_MAX_BYTES};
        rc = st_rwire_fetch_req(&b, corr, f->client_id, &fr, w, n);
    }
    if (rc == 0)
        rc = conn_send(c, &b, q);
    st_buf_fini(&b);
    free(w);
    if (rc) {
        if (q)
            freq_free(q);
        free(v);
        conn_fail(c, "cannot send a request");
        return;
    }
    for (int i = 0; i < n; i++)
        v[i]->in_flight = true;
    c->fetch_inflight = true;
    free(v);
}

/* Sends what c may send now: connects, fetches (invariant 1). */
static void conn_pump(fconn_t *c)
{
    if (c->dead || c->f->closing)
        return;
    int64_t now = st_mono_ms();
    if (!c->connected) {
        if (!c->tcp_open && now >= c->retry_at)
            conn_connect(c);
        return;
    }
    if (c->fetch_inflight)
        return;
    if (c->njobs > 0 && now - c->answered_ms < ST_FETCHER_GATE_MS)
        return;
    send_fetch(c, now);
}

/* ---- answers ---- */

/* The in-flight item of q for (topic, partition), starting the search at *cursor (answers
 * list partitions in the order asked). */
static freq_item_t *match_item(freq_t *q, st_kstr_t topic, int32_t partition, int *cursor)
{
    for (int k = 0; k < q->n; k++) {
        int i = (*cursor + k) % q->n;
        freq_item_t *it = &q->items[i];
        if (!it->answered && it->partition == partition && st_kstr_eq(topic, it->topic)) {
            *cursor = i + 1;
            it->answered = true;
            return it;
        }
    }
    return NULL;
}

/* The partition an answered item still stands for (NULL: unfollowed or started over). */
static fpart_t *item_part(fconn_t *c, const freq_item_t *it)
{
    fpart_t *p = part_find(c->f, it->topic_id, it->partition);
    if (!p || p->gen != it->gen || p->conn != c || !p->in_flight)
        return NULL;
    p->in_flight = false;
    return p;
}

/* Hands the action to the partition's owner shard (when it has one to do). */
static void hand_over(st_fetcher_t *f, fpart_t *p, const st_rfollow_action_t *a,
                      const uint8_t *records)
{
    uint8_t *copy = NULL;
    if (a->kind == ST_RF_DO_APPEND) {
        copy = malloc(a->len);
        if (!copy) {
            /* the position the shard would have sent: nothing changed */
            int was = p->rf.phase;
            st_rfollow_on_position(&p->rf, -ENOMEM, -1, -1, -1);
            phase_moved(p, was);
            backoff(p);
            return;
        }
        memcpy(copy, records, a->len);
    }
    f->hooks.job(f->hooks.arg, p->shard, p->topic_id, p->partition, p->rf.leader_epoch, a, copy,
                 p->rf.phase == ST_RF_JOB);
}

/* Whether p may log a warning now (at most one every ST_FETCHER_WARN_MS per partition). */
static bool may_warn(fpart_t *p)
{
    int64_t now = st_mono_ms();
    if (p->warned_ms && now - p->warned_ms < ST_FETCHER_WARN_MS)
        return false;
    p->warned_ms = now;
    return true;
}

static void fetch_partition(st_fetcher_t *f, fpart_t *p, const st_kp_fetch_resp_partition_t *r)
{
    st_rfollow_answer_t ans = {
        .error = r->error_code,
        .high_watermark = r->high_watermark,
        .log_start_offset = r->log_start_offset,
        .diverging_epoch = r->diverging_epoch.epoch,
        .diverging_end = r->diverging_epoch.end_offset,
        .records = r->records.len > 0 ? r->records.ptr : NULL,
        .len = r->records.len > 0 ? (size_t)r->records.len : 0,
    };
    int64_t at = p->rf.fetch_offset;
    int was = p->rf.phase;
    st_rfollow_action_t a = st_rfollow_on_fetch(&p->rf, &ans);
    phase_moved(p, was);
    switch (a.kind) {
    case ST_RF_DO_STOP:
        ST_INFO("replica fetcher: %s-%d: leader %d is at a newer epoch than %d; waiting for "
                "the metadata",
                p->topic, p->partition, p->leader_id, p->rf.leader_epoch);
        return;
    case ST_RF_DO_BACKOFF:
        if (may_warn(p))
            ST_WARN("replica fetcher: %s-%d: Fetch from leader %d at %lld: %s (retrying)", p->topic,
                    p->partition, p->leader_id, (long long)at, st_kerr_name(r->error_code));
        backoff(p);
        return;
    case ST_RF_DO_TRUNCATE:
    case ST_RF_DO_RESTART:
        ST_INFO("replica fetcher: %s-%d: leader %d (epoch %d): %s at %lld, latest epoch %d: "
                "%s %lld%s",
                p->topic, p->partition, p->leader_id, p->rf.leader_epoch,
                r->error_code ? st_kerr_name(r->error_code) : "diverging", (long long)at,
                p->rf.last_epoch, a.kind == ST_RF_DO_RESTART ? "restarting at" : "truncating to",
                (long long)a.offset, a.end_epoch >= 0 ? " or where that epoch ends here" : "");
        break;
    case ST_RF_DO_NOTHING:
        if (r->records.len > 0 && may_warn(p))
            ST_WARN("replica fetcher: %s-%d: the leader's answer at %lld holds no whole batch",
                    p->topic, p->partition, (long long)at);
        return;
    default:
        break;
    }
    p->backoff_ms = ST_FETCHER_BACKOFF_MIN_MS;
    hand_over(f, p, &a, ans.records);
}

static void on_fetch_answer(fconn_t *c, freq_t *q, const uint8_t *frame, size_t len)
{
    st_fetcher_t *f = c->f;
    st_arena_t a;
    st_arena_init(&a, 16384);
    st_kp_fetch_resp_t r;
    int32_t corr;
    int rc = st_rwire_fetch_resp(frame, len, &a, &corr, &r);
    c->fetch_inflight = false;
    if (rc) {
        st_arena_fini(&a);
        conn_fail(c, "malformed Fetch answer");
        return;
    }
    c->answered_ms = st_mono_ms();
    c->backoff_ms = ST_FETCHER_BACKOFF_MIN_MS;
    c->warned = false;
    int cursor = 0;
    for (int t = 0; t < r.responses_count && !r.error_code; t++) {
        const st_kp_fetch_resp_response_t *rt = &r.responses[t];
        for (int i = 0; i < rt->partitions_count; i++) {
            const st_kp_fetch_resp_partition_t *rp = &rt->partitions[i];
            freq_item_t *it = match_item(q, rt->topic, rp->partition_index, &cursor);
            fpart_t *p = it ? item_part(c, it) : NULL;
            if (p)
                fetch_partition(f, p, rp);
        }
    }
    /* partitions left out of the answer (or all of them, for an error of the whole request) */
    for (int i = 0; i < q->n; i++) {
        if (q->items[i].answered)
            continue;
        fpart_t *p = item_part(c, &q->items[i]);
        if (p && r.error_code)
            backoff(p);
    }
    st_arena_fini(&a);
}

static void on_frame(fconn_t *c, const uint8_t *frame, size_t len)
{
    freq_t *q = c->inflight;
    if (!q || len < 4 || (int32_t)st_be32(frame) != q->corr) {
        conn_fail(c, "an answer to no request");
        return;
    }
    c->inflight = q->next;
    if (!c->inflight)
        c->inflight_tail = NULL;
    on_fetch_answer(c, q, frame, len);
    freq_free(q);
    conn_pump(c);
}

/* ---- the inbox ---- */

/* ---- the inbox ---- */

static void do_follow(st_fetcher_t *f, fmsg_t *m)
{
    fpart_t *p = part_find(f, m->topic_id, m->partition);
    if (p && p->leader_id == m->leader_id && p->rf.leader_epoch == m->leader_epoch && p->conn &&
        p->conn->port == m->port && strcmp(p->conn->host, m->host) == 0)
        return; /* nothing changed: carry on where it is */
    if (!p) {
        p = calloc(1, sizeof *p);
        if (p) {
            memcpy(p->topic_id, m->topic_id, 16);
            p->partition = m->partition;
        }
        if (!p || part_insert(f, p)) {
            free(p);
            ST_ERROR("replica fetcher: out of memory following %s-%d", m->topic, m->partition);
            return;
        }
    }
    fconn_t *old = p->conn;
    part_detach(f, p, true);
    free(p->topic);
    p->topic = m->topic;
    m->topic = NULL;
    p->shard = m->shard;
    p->leader_id = m->leader_id;
    st_rfollow_init(&p->rf, m->leader_epoch, m->offset, m->last_epoch, m->log_start);
    p->in_flight = false;
    p->retry_at = 0;
    p->backoff_ms = ST_FETCHER_BACKOFF_MIN_MS;
    p->gen++;
    ST_INFO("replica fetcher: %s-%d follows leader %d at %s:%d (epoch %d) from offset %lld "
            "(latest epoch %d)",
            p->topic, p->partition, p->leader_id, m->host, m->port, m->leader_epoch,
            (long long)m->offset, m->last_epoch);
    fconn_t *c = conn_get(f, m->host, m->port);
    if (c)
        part_attach(p, c);
    if (old && old != c && old->nparts == 0)
        conn_release(f, old);
    if (!c) {
        part_remove(f, p);
        free(p->topic);
        free(p);
        return;
    }
    conn_pump(c);
}

static void do_unfollow(st_fetcher_t *f, fmsg_t *m)
{
    fpart_t *p = part_find(f, m->topic_id, m->partition);
    if (!p)
        return;
    ST_INFO("replica fetcher: %s-%d no longer follows leader %d", p->topic, p->partition,
            p->leader_id);
    part_detach(f, p, false);
    part_remove(f, p);
    free(p->topic);
    free(p);
}

static void do_position(st_fetcher_t *f, fmsg_t *m)
{
    fpart_t *p = part_find(f, m->topic_id, m->partition);
    if (!p || p->rf.phase != ST_RF_JOB)
        return;
    if (m->leader_epoch != p->rf.leader_epoch)
        return; /* started over meanwhile: its own phase stands */
    if (m->err && may_warn(p))
        ST_WARN("replica fetcher: %s-%d: the leader's answer could not be applied here: %s; "
                "again from %lld",
                p->topic, p->partition, st_strerror(m->err), (long long)m->offset);
    int was = p->rf.phase;
    st_rfollow_on_position(&p->rf, m->err, m->offset, m->last_epoch, m->log_start);
    phase_moved(p, was);
    if (m->err)
        backoff(p);
    if (p->conn)
        conn_pump(p->conn);
}

static void close_all(st_fetcher_t *f)
{
    f->closing = true;
    while (f->conns)
        conn_release(f, f->conns);
    for (size_t i = 0; i < f->nbuckets; i++)
        for (fpart_t *p = f->buckets[i], *next; p; p = next) {
            next = p->hnext;
            free(p->topic);
            free(p);
        }
    free(f->buckets);
    f->buckets = NULL;
    f->nbuckets = f->count = 0;
    uv_close((uv_handle_t *)&f->async, NULL);
    uv_close((uv_handle_t *)&f->tick, NULL);
}

static void msg_free(fmsg_t *m)
{
    free(m->topic);
    free(m);
}

static void on_async(uv_async_t *h)
{
    st_fetcher_t *f = h->data;
    pthread_mutex_lock(&f->mu);
    fmsg_t *in = f->inbox;
    f->inbox = f->inbox_tail = NULL;
    bool stop = f->stop;
    pthread_mutex_unlock(&f->mu);
    while (in) {
        fmsg_t *m = in;
        in = in->next;
        if (!stop && !f->closing) {
            if (m->kind == IN_FOLLOW)
                do_follow(f, m);
            else if (m->kind == IN_UNFOLLOW)
                do_unfollow(f, m);
            else
                do_position(f, m);
        }
        msg_free(m);
    }
    if (stop && !f->closing)
        close_all(f);
}

static void on_tick(uv_timer_t *t)
{
    st_fetcher_t *f = t->data;
    int64_t now = st_mono_ms();
    for (fconn_t *c = f->conns, *next; c && !f->closing; c = next) {
        next = c->next;
        if (c->inflight &&
            now - c->inflight->sent_ms > ST_FETCHER_REQ_TIMEOUT_MS + ST_FETCHER_MAX_WAIT_MS) {
            conn_fail(c, "no answer in time");
            continue;
        }
        conn_pump(c);
    }
}

/* ---- start, stop, the API ---- */

static void *f_main(void *arg)
{
    st_fetcher_t *f = arg;
    uv_run(&f->loop, UV_RUN_DEFAULT);
    uv_loop_close(&f->loop);
    return NULL;
}

static void f_free(st_fetcher_t *f)
{
    while (f->inbox) {
        fmsg_t *m = f->inbox;
        f->inbox = m->next;
        msg_free(m);
    }
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cond);
    free(f);
}

int st_fetcher_start(st_fetcher_t **out, const st_config_t *cfg, const st_fetcher_hooks_t *hooks,
                     char *err, size_t errlen)
{
    st_fetcher_t *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->cfg = cfg;
    f->hooks = *hooks;
    f->self = (int32_t)cfg->node_id;
    snprintf(f->client_id, sizeof f->client_id, "strata-replica-%d", (int)f->self);
    atomic_init(&f->refs, 1);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cond, NULL);
    int rc = uv_loop_init(&f->loop);
    if (rc) {
        snprintf(err, errlen, "cannot start the replica fetcher's loop: %s", uv_strerror(rc));
        f_free(f);
        return -EIO;
    }
    uv_async_init(&f->loop, &f->async, on_async);
    uv_timer_init(&f->loop, &f->tick);
    f->async.data = f->tick.data = f;
    uv_timer_start(&f->tick, on_tick, F_TICK_MS, F_TICK_MS);
    rc = pthread_create(&f->thread, NULL, f_main, f);
    if (rc) {
        snprintf(err, errlen, "cannot start the replica fetcher thread: %s", strerror(rc));
        uv_close((uv_handle_t *)&f->async, NULL);
        uv_close((uv_handle_t *)&f->tick, NULL);
        uv_run(&f->loop, UV_RUN_DEFAULT);
        uv_loop_close(&f->loop);
        f_free(f);
        return -rc;
    }
    f->thread_up = true;
    *out = f;
    return 0;
}

void st_fetcher_ref(st_fetcher_t *f)
{
    atomic_fetch_add(&f->refs, 1);
}

void st_fetcher_unref(st_fetcher_t *f)
{
    if (f && atomic_fetch_sub(&f->refs, 1) == 1) {
        ST_ASSERT(!f->thread_up);
        f_free(f);
    }
}

void st_fetcher_stop(st_fetcher_t *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    bool was = f->stop;
    f->stop = true;
    if (!was)
        uv_async_send(&f->async); /* under mu: the thread closes the handle only once stop is set */
    pthread_mutex_unlock(&f->mu);
    if (f->thread_up) {
        pthread_join(f->thread, NULL);
        f->thread_up = false;
    }
    st_fetcher_unref(f);
}

/* Queues m (taken), or frees it once the fetcher stopped. */
static void post(st_fetcher_t *f, fmsg_t *m)
{
    m->next = NULL;
    pthread_mutex_lock(&f->mu);
    if (f->stop) {
        pthread_mutex_unlock(&f->mu);
        msg_free(m);
        return;
    }
    if (f->inbox_tail)
        f->inbox_tail->next = m;
    else
        f->inbox = m;
    f->inbox_tail = m;
    uv_async_send(&f->async);
    pthread_mutex_unlock(&f->mu);
}

void st_fetcher_follow(st_fetcher_t *f, const st_follow_t *fw)
{
    fmsg_t *m = calloc(1, sizeof *m);
    if (!m)
        return;
    m->kind = IN_FOLLOW;
    m->topic = strdup(fw->topic ? fw->topic : "");
    if (!m->topic) {
        free(m);
        return;
    }
    memcpy(m->topic_id, fw->topic_id, 16);
    m->partition = fw->partition;
    m->shard = fw->shard;
    m->leader_id = fw->leader_id;
    snprintf(m->host, sizeof m->host, "%s", fw->leader_host ? fw->leader_host : "");
    m->port = fw->leader_port;
    m->leader_epoch = fw->leader_epoch;
    m->offset = fw->fetch_offset;
    m->last_epoch = fw->last_epoch;
    m->log_start = fw->log_start;
    post(f, m);
}

void st_fetcher_unfollow(st_fetcher_t *f, const uint8_t topic_id[16], int32_t partition)
{
    fmsg_t *m = calloc(1, sizeof *m);
    if (!m)
        return;
    m->kind = IN_UNFOLLOW;
    memcpy(m->topic_id, topic_id, 16);
    m->partition = partition;
    post(f, m);
}

void st_fetcher_position(st_fetcher_t *f, const uint8_t topic_id[16], int32_t partition,
                         int32_t leader_epoch, int64_t durable_end, int32_t last_epoch,
                         int64_t log_start, int err)
{
    fmsg_t *m = calloc(1, sizeof *m);
    if (!m)
        return;
    m->kind = IN_POSITION;
    memcpy(m->topic_id, topic_id, 16);
    m->partition = partition;
    m->leader_epoch = leader_epoch;
    m->offset = durable_end;
    m->last_epoch = last_epoch;
    m->log_start = log_start;
    m->err = err;
    post(f, m);
}
