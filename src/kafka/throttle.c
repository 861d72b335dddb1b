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
    st_qrate_t rate;
    int64_t last_ms; /* last record: idle longer than every window, the entry goes */
} st_kusage_t;

struct st_kthrottle {
    st_kusage_t *v;
    size_t n, cap;
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
        if (now_ms - u->last_ms > idle) {
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
    u->last_ms = now_ms;
    return u;
}

int32_t st_kthrottle_record(st_kreq_t *r, int key, int64_t bytes)
{
    const st_md_t *md = r->shard->md;
    if (!md || md->nquotas == 0 || bytes <= 0)
        return 0;
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
    double bound;
    st_quota_entity_t tags;
    if (!st_quota_resolve(md->quotas, (size_t)md->nquotas, key, user, client, &bound, &tags))
        return 0;
    struct st_kthrottle *t = state_of(r->shard);
    int64_t now_ms = st_mono_ms();
    st_kusage_t *u = t ? usage_of(t, key, &tags, now_ms) : NULL;
    if (!u)
        return 0;
    u->last_ms = now_ms;
    int64_t ms = st_qrate_record_throttle(&u->rate, (double)bytes, bound, now_ms);
    if (ms <= 0)
        return 0;
    int type = key == ST_QUOTA_PRODUCER_BYTE_RATE ? ST_KTHROTTLE_PRODUCE : ST_KTHROTTLE_FETCH;
    atomic_fetch_add_explicit(&r->shard->stats.quota_throttled[type], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->shard->stats.quota_throttle_ms[type], (uint64_t)ms,
                              memory_order_relaxed);
    st_conn_mute(r->conn, ms);
    return (int32_t)ms;
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
