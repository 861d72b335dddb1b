/* throttle.c — per-shard quota usage and the throttle that follows (throttle.h). */
#include "kafka/throttle.h"

#include <stdlib.h>
#include <string.h>

#include "auth/quota.h"
#include "base/clock.h"
#include "broker/shard.h"
#include "cluster/metadata.h"
#include "kafka/kshard.h"
#include "net/conn.h"

/* One counted entity of one key (the entity's parts filled with the user and client id). */
typedef struct st_kusage {
    int key;
    st_quota_entity_t tags;
    st_qrate_t rate;     /* the sampled keys */
    st_qbucket_t bucket; /* controller_mutation_rate */
    double bound;        /* the bucket's rate when last used */
    int64_t last_ms;     /* last record: idle longer than every window, the entry goes */
} st_kusage_t;

struct st_kthrottle {
    st_kusage_t *v;
    size_t n, cap;
    bool exempt; /* the request in its handler marked itself exempt (st_kthrottle_exempt) */
};

static struct st_kthrottle *state_of(st_kshard_t *s)
{
    st_kafka_shard_t *ks = st_kafka_shard(s);
    if (!ks->throttle)
        ks->throttle = calloc(1, sizeof *ks->throttle);
    return ks->throttle;
}

/* The entry of (key, tags), made when absent; entries idle past every window are dropped on
 * the way (their rate would read 0 anyway). NULL on out of memory. */
static st_kusage_t *usage_of(struct st_kthrottle *t, int key, const st_quota_entity_t *tags,
                             int64_t now_ms)
{
    int64_t idle = (int64_t)ST_QUOTA_SAMPLES * ST_QUOTA_WINDOW_MS;
    for (size_t i = 0; i < t->n;) {
        st_kusage_t *u = &t->v[i];
        if (u->key == key && st_quota_entity_eq(&u->tags, tags))
            return u;
        /* a bucket goes only once full again: forgetting a debt would forgive it */
        bool done = u->key != ST_QUOTA_CONTROLLER_MUTATION_RATE ||
                    st_qbucket_tokens(&u->bucket, u->bound, now_ms) >=
                        u->bound * ST_QUOTA_SAMPLES * ST_QUOTA_WINDOW_MS / 1000.0;
        if (now_ms - u->last_ms > idle && done) {
            t->v[i] = t->v[--t->n];
            continue;
        }
        i++;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 8;
        st_kusage_t *v = realloc(t->v, cap * sizeof *v);
        if (!v)
            return NULL;
        t->v = v;
        t->cap = cap;
    }
    st_kusage_t *u = &t->v[t->n++];
    u->key = key;
    u->tags = *tags;
    st_qrate_init(&u->rate);
    st_qbucket_init(&u->bucket);
    u->bound = 0;
    u->last_ms = now_ms;
    return u;
}

/* The quota of `key` for r's user and client id: true with *bound and *tags when one is set. */
static bool resolve(st_kreq_t *r, int key, double *bound, st_quota_entity_t *tags)
{
    const st_md_t *md = r->shard->md;
    if (!md || md->nquotas == 0)
        return false;
    /* Kafka's user entity is the principal's name: "User:alice" is user alice */
    const char *user = st_conn_auth(r->conn)->principal;
    if (strncmp(user, "User:", 5) == 0)
        user += 5;
    char client[ST_QUOTA_NAME_MAX];
    int32_t clen = r->hdr.client_id.len > 0 ? r->hdr.client_id.len : 0;
    if (clen >= ST_QUOTA_NAME_MAX)
        clen = ST_QUOTA_NAME_MAX - 1;
    memcpy(client, clen ? r->hdr.client_id.ptr : "", (size_t)clen);
    client[clen] = 0;
    return st_quota_resolve(md->quotas, (size_t)md->nquotas, key, user, client, bound, tags);
}

/* The usage entry of (key, tags) on s, stamped now; NULL on out of memory. */
static st_kusage_t *usage_now(st_kshard_t *s, int key, const st_quota_entity_t *tags,
                              int64_t now_ms)
{
    struct st_kthrottle *t = state_of(s);
    st_kusage_t *u = t ? usage_of(t, key, tags, now_ms) : NULL;
    if (u)
        u->last_ms = now_ms;
    return u;
}

int32_t st_kthrottle_record(st_kreq_t *r, int key, int64_t bytes)
{
    double bound;
    st_quota_entity_t tags;
    if (bytes <= 0 || !resolve(r, key, &bound, &tags))
        return 0;
    struct st_kthrottle *t = state_of(r->shard);
    int64_t now_ms = st_mono_ms();
    st_kusage_t *u = t ? usage_of(t, key, &tags, now_ms) : NULL;
    if (!u)
        return 0;
    u->last_ms = now_ms;
    int64_t ms = st_qrate_record_throttle(&u->rate, (double)bytes, bound, now_ms,
                                          (int64_t)ST_QUOTA_SAMPLES * ST_QUOTA_WINDOW_MS);
    if (ms <= 0)
        return 0;
    int type = key == ST_QUOTA_PRODUCER_BYTE_RATE ? ST_KTHROTTLE_PRODUCE : ST_KTHROTTLE_FETCH;
    atomic_fetch_add_explicit(&r->shard->stats.quota_throttled[type], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->shard->stats.quota_throttle_ms[type], (uint64_t)ms,
                              memory_order_relaxed);
    st_conn_mute(r->conn, ms);
    return (int32_t)ms;
}

void st_kthrottle_request_begin(st_kreq_t *r, st_kreqtime_t *t)
{
    t->on = false;
    int16_t k = r->api_key;
    if (k == ST_KP_API_API_VERSIONS || k == ST_KP_API_SASL_HANDSHAKE ||
        k == ST_KP_API_SASL_AUTHENTICATE || k == ST_KP_API_WRITE_TXN_MARKERS)
        return;
    if (!resolve(r, ST_QUOTA_REQUEST_PERCENTAGE, &t->bound, &t->tags))
        return;
    struct st_kthrottle *th = state_of(r->shard);
    if (!th)
        return;
    th->exempt = false;
    t->on = true;
    int64_t now_ms = r->start_ns / 1000000; /* read as the frame came: no clock read here */
    st_kusage_t *u = usage_now(r->shard, ST_QUOTA_REQUEST_PERCENTAGE, &t->tags, now_ms);
    int64_t ms = u ? st_qrate_throttle(&u->rate, t->bound, now_ms, ST_QUOTA_WINDOW_MS) : 0;
    if (ms > r->throttle_ms)
        r->throttle_ms = (int32_t)ms;
}

void st_kthrottle_request_end(st_kshard_t *s, st_kreqtime_t *t, int64_t start_ns)
{
    struct st_kthrottle *th = st_kafka_shard(s)->throttle;
    if (!t->on || !th || th->exempt)
        return;
    int64_t now_ns = st_mono_ns();
    st_kusage_t *u = usage_now(s, ST_QUOTA_REQUEST_PERCENTAGE, &t->tags, now_ns / 1000000);
    if (u)
        st_qrate_record(&u->rate, st_quota_ns_to_percentage(now_ns - start_ns), now_ns / 1000000);
}

void st_kthrottle_exempt(st_kreq_t *r)
{
    st_kafka_shard_t *ks = st_kafka_shard(r->shard);
    if (ks && ks->throttle)
        ks->throttle->exempt = true;
    r->throttle_ms = 0;
}

void st_kthrottle_mutation_begin(st_kreq_t *r, st_kmutation_t *m, int16_t strict_since)
{
    m->on = resolve(r, ST_QUOTA_CONTROLLER_MUTATION_RATE, &m->bound, &m->tags);
    m->strict = r->api_version >= strict_since;
    m->throttle_ms = 0;
}

int32_t st_kthrottle_mutation_take(st_kreq_t *r, st_kmutation_t *m, int32_t partitions)
{
    if (!m->on || partitions <= 0)
        return 0;
    int64_t now_ms = st_mono_ms();
    st_kusage_t *u = usage_now(r->shard, ST_QUOTA_CONTROLLER_MUTATION_RATE, &m->tags, now_ms);
    if (!u)
        return 0;
    u->bound = m->bound;
    int64_t ms;
    if (m->strict) {
        ms = st_qbucket_take_strict(&u->bucket, partitions, m->bound, now_ms);
        if (ms > 0)
            m->throttle_ms = (int32_t)ms;
        return (int32_t)ms;
    }
    ms = st_qbucket_take(&u->bucket, partitions, m->bound, now_ms);
    m->throttle_ms = (int32_t)ms;
    return 0;
}

void st_kthrottle_mutation_refund(st_kreq_t *r, st_kmutation_t *m, int32_t partitions)
{
    if (!m->on || partitions <= 0)
        return;
    int64_t now_ms = st_mono_ms();
    st_kusage_t *u = usage_now(r->shard, ST_QUOTA_CONTROLLER_MUTATION_RATE, &m->tags, now_ms);
    if (u)
        st_qbucket_take(&u->bucket, -(double)partitions, m->bound, now_ms);
}

void st_kthrottle_mutation_finish(st_kreq_t *r, st_kmutation_t *m)
{
    if (!m->on)
        return;
    if (!m->strict) {
        /* the debt now, after every topic's take and refund */
        int64_t now_ms = st_mono_ms();
        st_kusage_t *u = usage_now(r->shard, ST_QUOTA_CONTROLLER_MUTATION_RATE, &m->tags, now_ms);
        m->throttle_ms = u ? (int32_t)st_qbucket_debt_ms(&u->bucket, m->bound, now_ms) : 0;
    }
    if (m->throttle_ms > r->throttle_ms)
        r->throttle_ms = m->throttle_ms;
}

void st_kthrottle_shard_fini(st_kshard_t *s)
{
    st_kafka_shard_t *ks = st_kafka_shard(s);
    if (!ks || !ks->throttle)
        return;
    free(ks->throttle->v);
    free(ks->throttle);
    ks->throttle = NULL;
}
