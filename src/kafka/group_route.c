/*
 * group_route.c — each shard's group coordinator through the shard's life (coordsvc.h), the
 * internal topic, and the routing of the group APIs to their coordinators (group_route.h).
 *
 * A group's coordinator is the owner shard of its __consumer_offsets partition
 * (group/coord.h), on the broker that leads that partition (in a cluster; a single broker leads
 * them all). Coordination moves with leadership (Kafka's onElection / onResignation):
 *
 *   start-up                     each partition the shard owns and this broker leads is loaded
 *   load (coordsvc.h)            this broker now leads it (or at a new leader epoch): loaded
 *                                from the local log, which replication kept up to date, before
 *                                any request for its groups is served (the load blocks the
 *                                shard while it reads the partition)
 *   unload (coordsvc.h)          unloaded: waiting JoinGroup/SyncGroup are answered
 *                                NOT_COORDINATOR, its groups dropped (st_gcoord_unload)
 *   a call on the coordinator    checks the shard's snapshot again: a partition led here but
 *                                not loaded yet (created later, or the hook not called yet) is
 *                                loaded now; one no longer led here is unloaded and the call
 *                                answered NOT_COORDINATOR
 *
 * The coordinator's writes go through st_part_append with acks=all, so they are answered once
 * every in-sync replica has them (a commit is then safe across a failover), and are refused
 * once leadership has moved.
 *
 * The group coordinator is the first service of the coordinator registry (coordsvc.h): the
 * registry drives its start, load/unload with leadership, drain and fini.
 *
 * Threads: the service's functions on each shard's own thread; the rest as group_route.h.
 */
#include "kafka/group_route.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/err.h"
#include "base/log.h"
#include "group/coord.h"
#include "kafka/autocreate.h"
#include "kafka/coordsvc.h"
#include "kafka/leader.h"
#include "proto/kerr.h"

const st_md_topic_t *st_kgroup_offsets_topic(const st_md_t *md)
{
    return st_md_find(md, ST_OFFSETS_TOPIC, (int32_t)strlen(ST_OFFSETS_TOPIC));
}

/* ---- each shard's coordinator ---- */

/* st_gcoord_config_t.append: the coordinator's batches go through the partition layer like
 * any produce with acks=all (the high watermark moves and fetches wake there). */
static int append(void *ctx, int32_t partition, uint8_t *data, size_t len,
                  st_gcoord_appended_t *out, void (*done)(void *arg, int res), void *arg)
{
    st_kshard_t *s = ctx;
    const st_md_topic_t *t = st_kgroup_offsets_topic(s->md);
    st_part_t *p = t ? st_parts_get(&s->parts, t->id, partition) : NULL;
    if (!p || st_kleader_local(s, p))
        return ST_E_CLOSED;   /* in a cluster: no longer the leader, so no longer the coordinator */
    st_part_append_res_t res; /* an offline partition: ST_E_CLOSED from st_part_append */
    bool later = st_part_append(p, data, len, ST_ACKS_ALL, &res, done, arg);
    out->base_offset = res.base_offset;
    out->error = res.error;
    if (later)
        return 0;
    if (res.error) {
        free(res.rejects);
        if (res.why)
            ST_WARN("%s-%d: append refused: %s", ST_OFFSETS_TOPIC, partition, res.why);
        return res.err;
    }
    done(arg, 0); /* durable already */
    return 0;
}

/* st_gcoord_config_t.topics_version and .topics: the shard's snapshot of topic metadata, for
 * consumer groups' subscriptions (internal topics left out, as Kafka's subscriptions never
 * see them). */
static int64_t topics_version(void *ctx)
{
    const st_kshard_t *s = ctx;
    return s->md ? s->md->version : -1;
}

static int topics(void *ctx, st_gtopic_t **out, int *n)
{
    const st_kshard_t *s = ctx;
    const st_md_t *md = s->md;
    *out = NULL;
    *n = 0;
    if (!md)
        return 0;
    st_gtopic_t *v = calloc((size_t)md->ntopics + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    int k = 0;
    for (int i = 0; i < md->ntopics; i++) {
        const st_md_topic_t *t = md->topics[i];
        if (t->internal)
            continue;
        char *name = strdup(t->name);
        if (!name) {
            for (int j = 0; j < k; j++)
                free((char *)v[j].name.ptr);
            free(v);
            return -ENOMEM;
        }
        v[k].name = (st_kstr_t){name, (int32_t)strlen(name)};
        memcpy(v[k].id.b, t->id, 16);
        v[k].partitions = t->npartitions;
        k++;
    }
    *out = v;
    *n = k;
    return 0;
}

bool st_kgroup_leads(const st_kshard_t *s, int32_t partition)
{
    const st_md_topic_t *t = st_kgroup_offsets_topic(s->md);
    return t && partition >= 0 && partition < t->npartitions &&
           t->partitions[partition].shard == s->id && !st_kleader_check(s, t, partition, -1);
}

/* Unloads the partition from this shard's coordinator if it is loaded. */
static void detach(st_kshard_t *s, int32_t partition)
{
    if (!st_kgroup_coord(s) || !st_gcoord_loaded(st_kgroup_coord(s), partition))
        return;
    ST_INFO("%s-%d: no longer led here: its groups are unloaded", ST_OFFSETS_TOPIC, partition);
    st_gcoord_unload(st_kgroup_coord(s), partition);
}

/* Loads the partition into this shard's coordinator if the shard owns it and this broker leads
 * it, and it is not loaded yet at leader epoch `epoch` (loaded at another, the log may have
 * changed meanwhile, as a follower's: it is loaded again). */
static void attach(st_kshard_t *s, int32_t partition, int32_t epoch)
{
    const st_md_topic_t *t = st_kgroup_offsets_topic(s->md);
    if (!st_kgroup_coord(s) || !st_kgroup_leads(s, partition))
        return;
    if (st_gcoord_loaded(st_kgroup_coord(s), partition)) {
        if (st_gcoord_epoch(st_kgroup_coord(s), partition) == epoch)
            return;
        st_gcoord_unload(st_kgroup_coord(s), partition);
    }
    st_part_t *p = st_parts_get(&s->parts, t->id, partition);
    st_log_t *log = p ? st_part_log(p) : NULL;
    if (!log)
        return;
    int rc = st_gcoord_load(st_kgroup_coord(s), partition, log, epoch);
    if (rc)
        ST_ERROR("cannot load %s-%d: %s", ST_OFFSETS_TOPIC, partition, st_strerror(rc));
}

/* The snapshot's leader epoch of a partition led here (st_kgroup_leads holds). */
static int32_t epoch_of(const st_kshard_t *s, int32_t partition)
{
    return st_kgroup_offsets_topic(s->md)->partitions[partition].leader_epoch;
}

/* st_coordsvc_t.load and .unload */
static void group_load(st_kshard_t *s, int32_t partition, int32_t epoch)
{
    attach(s, partition, epoch);
}

static void group_unload(st_kshard_t *s, int32_t partition)
{
    detach(s, partition);
}

static int group_start(st_kshard_t *s)
{
    const st_config_t *cfg = s->b->cfg;
    const st_md_topic_t *t = st_kgroup_offsets_topic(s->md);
    st_gcoord_config_t gc = {
        .min_session_timeout_ms = cfg->group_min_session_timeout_ms,
        .max_size = (int32_t)cfg->group_max_size,
        .max_session_timeout_ms = cfg->group_max_session_timeout_ms,
        .initial_rebalance_delay_ms = cfg->group_initial_rebalance_delay_ms,
        .offsets_retention_ms = cfg->offsets_retention_minutes * 60000,
        .expire_check_ms = 60000,
        .num_partitions = t && t->npartitions > cfg->offsets_topic_num_partitions
                              ? t->npartitions
                              : (int32_t)cfg->offsets_topic_num_partitions,
        .append = append,
        .ctx = s,
        .consumer_session_timeout_ms = (int32_t)cfg->group_consumer_session_timeout_ms,
        .consumer_heartbeat_interval_ms = (int32_t)cfg->group_consumer_heartbeat_interval_ms,
        .consumer_max_size = (int32_t)cfg->group_consumer_max_size,
        .consumer_assignors = cfg->group_consumer_assignors,
        .topics_version = topics_version,
        .topics = topics,
    };
    int rc = st_gcoord_create(&st_kafka_shard(s)->groups, s->loop, &gc);
    if (rc)
        return rc;
    for (int32_t p = 0; t && p < t->npartitions; p++)
        if (st_kgroup_leads(s, p))
            attach(s, p, epoch_of(s, p));
    return 0;
}

static void group_drain(st_kshard_t *s)
{
    if (st_kgroup_coord(s))
        st_gcoord_drain(st_kgroup_coord(s));
}

static void group_fini(st_kshard_t *s)
{
    st_kafka_shard_t *ks = st_kafka_shard(s);
    st_gcoord_destroy(ks->groups);
    ks->groups = NULL;
}

/* ---- the service ---- */

/* The topic configs __consumer_offsets is created with, wherever its creation starts (a
 * broker's own op, or the hint it forwards to the active controller): compacted by the log
 * cleaner, never deleted by time, segments of 100 MiB (Kafka's offsets.topic.segment.bytes). */
static const st_ctl_cfg_t offsets_cfg[] = {
    {"cleanup.policy", "compact", ST_CTL_CFG_SET},
    {"retention.ms", "-1", ST_CTL_CFG_SET},
    {"segment.bytes", "104857600", ST_CTL_CFG_SET},
};

static int32_t offsets_partitions(const st_config_t *cfg)
{
    return (int32_t)cfg->offsets_topic_num_partitions;
}

static int32_t offsets_replication_factor(const st_config_t *cfg)
{
    return (int32_t)cfg->offsets_topic_replication_factor;
}

const st_coordsvc_t st_kgroup_service = {
    .name = "group",
    .topic = ST_OFFSETS_TOPIC,
    .key_type = 0,
    .partitions = offsets_partitions,
    .replication_factor = offsets_replication_factor,
    .configs = offsets_cfg,
    .nconfigs = (int)(sizeof offsets_cfg / sizeof offsets_cfg[0]),
    .route = st_gcoord_partition_for,
    .start = group_start,
    .load = group_load,
    .unload = group_unload,
    .drain = group_drain,
    .fini = group_fini,
};

void st_kgroup_ensure_topic(st_kreq_t *r, st_kgroup_ready_fn cb, void *arg)
{
    st_coordsvc_ensure_topic(r, &st_kgroup_service, cb, arg);
}

/* ---- calls to coordinators ---- */

void st_kgroup_calls_free(st_kgroup_call_t *g)
{
    while (g) {
        st_kgroup_call_t *next = g->next;
        st_arena_fini(&g->arena);
        free(g);
        g = next;
    }
}

/* Every call is sent: finish runs once each is answered. */
void st_kgroup_ctx_end(st_kgroup_ctx_t *ctx)
{
    st_fanout_end(&ctx->fan);
}

static void gctx_gathered(void *arg)
{
    st_kgroup_ctx_t *ctx = arg;
    ctx->finish(ctx);
}

/* On the coordinator, from exec (now or later): the call is answered. */
void st_kgroup_call_return(void *arg)
{
    st_kgroup_call_t *g = arg;
    st_fanout_release(&g->leg);
}

static void gcall_run(st_fanout_leg_t *leg)
{
    st_kshard_t *s = st_kshard_current();
    st_kgroup_call_t *g = leg->data;
    st_fanout_hold(leg); /* exec answers with st_kgroup_call_return, now or later */
    if (g->partition >= 0 && !st_kgroup_leads(s, g->partition)) {
        detach(s, g->partition); /* leadership moved: whatever was loaded goes */
        g->partition = -1;       /* the snapshot changed since routing: NOT_COORDINATOR */
    }
    if (g->partition >= 0)
        attach(s, g->partition, epoch_of(s, g->partition));
    g->exec(s, g);
}

st_kgroup_ctx_t *st_kgroup_ctx_new(st_kreq_t *r, void (*finish)(st_kgroup_ctx_t *), void *data)
{
    st_kgroup_ctx_t *ctx = st_arena_zalloc(&r->arena, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->r = r;
    st_fanout_begin(&ctx->fan, r->shard->b->mesh, r->shard->id, gcall_run, gctx_gathered, ctx);
    ctx->finish = finish;
    ctx->data = data;
    return ctx;
}

void st_kgroup_call_to(st_kgroup_ctx_t *ctx, int shard, int32_t partition, st_kgroup_exec_fn exec,
                       void *item)
{
    st_kgroup_call_t *g = calloc(1, sizeof *g);
    ST_ASSERT(g != NULL);
    st_arena_init(&g->arena, 2048);
    g->ctx = ctx;
    g->partition = partition;
    g->exec = exec;
    g->item = item;
    g->leg.data = g;
    g->next = ctx->calls;
    ctx->calls = g;
    st_fanout_send(&ctx->fan, &g->leg, shard);
}

/* Sends item to the coordinator of group_id. Without the internal topic, or where this broker
 * does not lead the group's partition, the call goes to this shard with partition -1, which
 * every coordinator function answers NOT_COORDINATOR. */
void st_kgroup_call_group(st_kgroup_ctx_t *ctx, st_kstr_t group_id, st_kgroup_exec_fn exec,
                          void *item)
{
    const st_md_topic_t *t = st_kgroup_offsets_topic(ctx->r->shard->md);
    int32_t p = t ? st_gcoord_partition_for(group_id, t->npartitions) : -1;
    int owner = t ? st_kshard_owner(t, p) : -1;
    if (owner < 0 || st_kleader_check(ctx->r->shard, t, p, -1)) {
        owner = ctx->r->shard->id;
        p = -1;
    }
    st_kgroup_call_to(ctx, owner, p, exec, item);
}

/* A partition led here but not loaded yet is loaded now: its load reads the marker from the
 * log, and the call after it finds nothing left pending for pid. */
void st_kgroup_txn_marker(st_kshard_t *s, int32_t partition, int64_t pid, bool commit)
{
    if (!st_kgroup_coord(s))
        return;
    if (!st_kgroup_leads(s, partition)) {
        detach(s, partition);
        return;
    }
    attach(s, partition, epoch_of(s, partition));
    st_gcoord_txn_marker(st_kgroup_coord(s), partition, pid, commit);
}

st_kstr_t st_kgroup_client_host(st_kreq_t *r)
{
    const char *peer = st_conn_peer(r->conn);
    const char *colon = peer ? strrchr(peer, ':') : NULL;
    size_t n = peer ? (colon ? (size_t)(colon - peer) : strlen(peer)) : 0;
    if (n >= 2 && peer[0] == '[' && peer[n - 1] == ']') {
        peer++;
        n -= 2;
    }
    char *h = st_arena_alloc(&r->arena, n + 2);
    if (!h)
        return ST_KSTR_EMPTY;
    h[0] = '/';
    memcpy(h + 1, peer ? peer : "", n);
    h[n + 1] = 0;
    return (st_kstr_t){h, (int32_t)n + 1};
}
