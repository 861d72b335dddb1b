/*
 * fetcher.c — the follower fetcher's thread: a libuv loop (io/uvthread.h) with one client
 * connection (conn.h: connect, reconnect backoff, framing, requests in flight) per leader
 * broker, the partitions followed from each, and the inbox other threads fill.
 *
 * Everything here runs on the fetcher thread except st_fetcher_start / _stop / _follow /
 * _unfollow / _position / _ref / _unref, which only touch the locked inbox and the reference
 * count. Protocol encoding and decoding is wire.c's; the states are fetcher.h's.
 */
#include "replica/fetcher.h"

#include <errno.h>
#include <netdb.h>
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
#include "io/uvthread.h"
#include "proto/kerr.h"
#include "replica/conn.h"
#include "replica/follow.h"
#include "replica/wire.h"

#define F_TICK_MS        50
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
    int n, ntopics;
    freq_item_t *items;
    char **topics; /* one copy per run of a topic */
} freq_t;

struct fconn {
    st_fetcher_t *f;
    char host[256];
    int port;
    st_rconn_t *rc;      /* the connection (conn.h); its requests in flight are freq_t */
    bool fetch_inflight; /* invariant 1 */
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
    st_rsec_t *sec; /* the inter-broker listener's TLS and SASL (NULL: plain) */
    st_fetcher_hooks_t hooks;
    int32_t self;
    char client_id[F_CLIENT_ID_SIZE];
    _Atomic int refs;
    /* the thread, its loop and the inbox's lock (io/uvthread.h) */
    st_uvthread_t th;
    bool th_up; /* th was started: stop and fini it */
    fmsg_t *inbox, *inbox_tail;
    /* the loop (fetcher thread) */
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

/* The connection was lost: its Fetch is forgotten, its partitions free to go again. */
static void on_lost(void *arg, st_rconn_t *rc, const char *why)
{
    (void)rc;
    (void)why;
    fconn_t *c = arg;
    c->fetch_inflight = false;
    for (fpart_t *p = c->parts; p; p = p->cnext)
        p->in_flight = false;
}

static void on_drop(void *arg, st_rconn_t *rc, void *req)
{
    (void)arg;
    (void)rc;
    freq_free(req);
}

static void on_connected(void *arg, st_rconn_t *rc)
{
    (void)rc;
    conn_pump(arg);
}

static void on_answer(void *arg, st_rconn_t *rc, void *req, const uint8_t *frame, size_t len);

static const st_rconn_ops_t conn_ops = {
    .connected = on_connected, .answer = on_answer, .drop = on_drop, .lost = on_lost};

/* Forgets the connection (its requests are dropped; the socket closes). */
static void conn_release(st_fetcher_t *f, fconn_t *c)
{
    for (fconn_t **pp = &f->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    st_rconn_close(c->rc);
    free(c);
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
    c->rc = st_rconn_new(&f->th.loop, host, port, "replica fetcher: connection to leader", f->sec,
                         &conn_ops, c);
    if (!c->rc) {
        free(c);
        return NULL;
    }
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
static freq_t *freq_new(fpart_t **v, int n)
{
    freq_t *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
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
    freq_t *q = w ? freq_new(v, n) : NULL;
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
        rc = st_rconn_send(c->rc, &b, corr, q);
    st_buf_fini(&b);
    free(w);
    if (rc) {
        if (q)
            freq_free(q);
        free(v);
        st_rconn_fail(c->rc, "cannot send a request");
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
    if (c->f->closing)
        return;
    int64_t now = st_mono_ms();
    if (!st_rconn_pump(c->rc, now))
        return;
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
        st_rconn_fail(c->rc, "malformed Fetch answer");
        return;
    }
    c->answered_ms = st_mono_ms();
    st_rconn_healthy(c->rc);
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

/* The answer to Fetch q (conn.h matched its correlation id). */
static void on_answer(void *arg, st_rconn_t *rc, void *req, const uint8_t *frame, size_t len)
{
    (void)rc;
    fconn_t *c = arg;
    freq_t *q = req;
    on_fetch_answer(c, q, frame, len);
    freq_free(q);
    conn_pump(c);
}

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
    uv_close((uv_handle_t *)&f->tick, NULL);
}

static void msg_free(fmsg_t *m)
{
    free(m->topic);
    free(m);
}

/* The inbox (or the stop): follows, unfollows and positions, in the order posted. */
static void on_wake(void *arg, bool stop)
{
    st_fetcher_t *f = arg;
    st_uvthread_lock(&f->th);
    fmsg_t *in = f->inbox;
    f->inbox = f->inbox_tail = NULL;
    st_uvthread_unlock(&f->th);
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
        if (st_rconn_tick(c->rc, now, ST_FETCHER_REQ_TIMEOUT_MS + ST_FETCHER_MAX_WAIT_MS))
            continue;
        conn_pump(c);
    }
}

/* ---- start, stop, the API ---- */

/* The fetcher thread, before st_fetcher_start returns. */
static int f_init(void *arg, uv_loop_t *loop)
{
    st_fetcher_t *f = arg;
    uv_timer_init(loop, &f->tick);
    f->tick.data = f;
    uv_timer_start(&f->tick, on_tick, F_TICK_MS, F_TICK_MS);
    return 0;
}

static const st_uvthread_ops_t f_ops = {.init = f_init, .wake = on_wake};

static void f_free(st_fetcher_t *f)
{
    while (f->inbox) {
        fmsg_t *m = f->inbox;
        f->inbox = m->next;
        msg_free(m);
    }
    if (f->th_up)
        st_uvthread_fini(&f->th);
    st_rsec_destroy(f->sec); /* after the thread: its connections are gone */
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
    int rc = st_rsec_create(cfg, &f->sec, err, errlen);
    if (rc) {
        free(f);
        return rc;
    }
    rc = st_uvthread_start(&f->th, &f_ops, f);
    f->th_up = true;
    if (rc) {
        snprintf(err, errlen, "cannot start the replica fetcher thread: %s", uv_strerror(rc));
        f_free(f);
        return rc;
    }
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
        ST_ASSERT(!st_uvthread_running(&f->th));
        f_free(f);
    }
}

void st_fetcher_stop(st_fetcher_t *f)
{
    if (!f)
        return;
    st_uvthread_stop(&f->th);
    st_fetcher_unref(f);
}

/* Queues m (taken), or frees it once the fetcher stopped. */
static void post(st_fetcher_t *f, fmsg_t *m)
{
    m->next = NULL;
    if (!st_uvthread_post_begin(&f->th)) {
        msg_free(m);
        return;
    }
    if (f->inbox_tail)
        f->inbox_tail->next = m;
    else
        f->inbox = m;
    f->inbox_tail = m;
    st_uvthread_post_end(&f->th);
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
