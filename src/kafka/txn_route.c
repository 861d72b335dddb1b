/*
 * txn_route.c — each shard's transaction coordinator through the shard's life (coordsvc.h),
 * __transaction_state, and the routing of the transaction APIs to their coordinators
 * (txn_route.h). Modelled on group_route.c:
 *
 *   start-up        each __transaction_state partition the shard owns and this broker leads
 *                   is loaded (txn/coord.h: replayed, then the markers of every Prepare*
 *                   transaction sent again)
 *   load            this broker now leads it, or at a new leader epoch: loaded again from the
 *                   local log; the leader epoch is the coordinator epoch its markers carry
 *   unload          no longer led here: its ids dropped, requests NOT_COORDINATOR
 *   a call          checks the shard's snapshot again, as group_route.c's do
 *   each tick       st_tcoord_tick: timeouts, expiry, completions to try again
 *
 * The coordinator's writes go through st_part_append with acks=all, so a transition is answered
 * only once every in-sync replica has it (Kafka's TransactionLog.EnforcedRequiredAcks).
 *
 * Threads: the service's functions on each shard's own thread; the rest as txn_route.h.
 */
#include "kafka/txn_route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "kafka/autocreate.h"
#include "kafka/leader.h"
#include "kafka/pid.h"
#include "proto/kerr.h"

static const st_md_topic_t *txn_topic(const st_md_t *md)
{
    return st_md_find(md, ST_TXN_TOPIC, (int32_t)strlen(ST_TXN_TOPIC));
}

/* ---- each shard's coordinator ---- */

/* st_tcoord_config_t.append: through the partition layer, acks=all. */
static int append(void *ctx, int32_t partition, uint8_t *data, size_t len,
                  void (*done)(void *arg, int res), void *arg)
{
    st_kshard_t *s = ctx;
    const st_md_topic_t *t = txn_topic(s->md);
    st_part_t *p = t ? st_parts_get(&s->parts, t->id, partition) : NULL;
    if (!p || st_kleader_local(s, p))
        return ST_E_CLOSED;
    st_part_append_res_t res;
    if (st_part_append(p, data, len, ST_ACKS_ALL, &res, done, arg))
        return 0;
    if (res.error) {
        free(res.rejects);
        if (res.why)
            ST_WARN("%s-%d: append refused: %s", ST_TXN_TOPIC, partition, res.why);
        return res.err;
    }
    done(arg, 0);
    return 0;
}

static int64_t next_pid(void *ctx)
{
    st_kshard_t *s = ctx;
    return st_kpid_take((int32_t)s->b->cfg->node_id);
}

/* True when shard s coordinates partition `partition`: s owns it and this broker leads it. */
static bool leads(const st_kshard_t *s, int32_t partition)
{
    const st_md_topic_t *t = txn_topic(s->md);
    return t && partition >= 0 && partition < t->npartitions &&
           t->partitions[partition].shard == s->id && !st_kleader_check(s, t, partition, -1);
}

static void detach(st_kshard_t *s, int32_t partition)
{
    if (!st_ktxn_coord(s) || !st_tcoord_loaded(st_ktxn_coord(s), partition))
        return;
    ST_INFO("%s-%d: no longer led here: its transactional ids are unloaded", ST_TXN_TOPIC,
            partition);
    st_tcoord_unload(st_ktxn_coord(s), partition);
}

static void attach(st_kshard_t *s, int32_t partition, int32_t epoch)
{
    st_tcoord_t *c = st_ktxn_coord(s);
    if (!c || !leads(s, partition))
        return;
    if (st_tcoord_loaded(c, partition)) {
        if (st_tcoord_epoch(c, partition) == epoch)
            return;
        st_tcoord_unload(c, partition);
    }
    const st_md_topic_t *t = txn_topic(s->md);
    st_part_t *p = st_parts_get(&s->parts, t->id, partition);
    st_log_t *log = p ? st_part_log(p) : NULL;
    if (!log)
        return;
    int rc = st_tcoord_load(c, partition, log, epoch);
    if (rc)
        ST_ERROR("cannot load %s-%d: %s", ST_TXN_TOPIC, partition, st_strerror(rc));
}

static int32_t epoch_of(const st_kshard_t *s, int32_t partition)
{
    return txn_topic(s->md)->partitions[partition].leader_epoch;
}

static void txn_load(st_kshard_t *s, int32_t partition, int32_t epoch)
{
    attach(s, partition, epoch);
}

static void txn_unload(st_kshard_t *s, int32_t partition)
{
    detach(s, partition);
}

static int txn_start(st_kshard_t *s)
{
    const st_config_t *cfg = s->b->cfg;
    const st_md_topic_t *t = txn_topic(s->md);
    int32_t n = (int32_t)cfg->transaction_state_log_num_partitions;
    st_tcoord_config_t tc = {
        .num_partitions = t && t->npartitions > n ? t->npartitions : n,
        .max_timeout_ms = cfg->transaction_max_timeout_ms,
        .id_expiration_ms = cfg->transactional_id_expiration_ms,
        .abort_interval_ms = cfg->transaction_abort_timed_out_transaction_cleanup_interval_ms,
        .expire_interval_ms = cfg->transaction_remove_expired_transaction_cleanup_interval_ms,
        .next_pid = next_pid,
        .append = append,
        .send_markers = st_ktxn_send_markers,
        .ctx = s,
    };
    int rc = st_tcoord_create(&st_kafka_shard(s)->txns, s->loop, &tc);
    if (rc)
        return rc;
    for (int32_t p = 0; t && p < t->npartitions; p++)
        if (leads(s, p))
            attach(s, p, epoch_of(s, p));
    return 0;
}

static void txn_tick(st_kshard_t *s)
{
    if (st_ktxn_coord(s))
        st_tcoord_tick(st_ktxn_coord(s));
}

static void txn_drain(st_kshard_t *s)
{
    if (st_ktxn_coord(s))
        st_tcoord_drain(st_ktxn_coord(s));
}

static void txn_fini(st_kshard_t *s)
{
    st_kafka_shard_t *ks = st_kafka_shard(s);
    st_tcoord_destroy(ks->txns);
    ks->txns = NULL;
}

/* ---- the service ---- */

/* Kafka's TransactionStateManager.transactionTopicConfigs: compacted, never deleted by time,
 * transaction.state.log.min.isr as min.insync.replicas, .segment.bytes, uncompressed, no
 * unclean election. The two numbers are the broker's settings (st_ktxn_configure). */
static char min_isr_buf[24] = "2", segment_buf[24] = "104857600";
static const st_ctl_cfg_t txn_cfg[] = {
    {"cleanup.policy", "compact", ST_CTL_CFG_SET},
    {"retention.ms", "-1", ST_CTL_CFG_SET},
    {"min.insync.replicas", min_isr_buf, ST_CTL_CFG_SET},
    {"segment.bytes", segment_buf, ST_CTL_CFG_SET},
    {"compression.type", "uncompressed", ST_CTL_CFG_SET},
    {"unclean.leader.election.enable", "false", ST_CTL_CFG_SET},
};

void st_ktxn_configure(const st_config_t *cfg)
{
    snprintf(min_isr_buf, sizeof min_isr_buf, "%lld",
             (long long)cfg->transaction_state_log_min_isr);
    snprintf(segment_buf, sizeof segment_buf, "%lld",
             (long long)cfg->transaction_state_log_segment_bytes);
}

static int32_t txn_partitions(const st_config_t *cfg)
{
    return (int32_t)cfg->transaction_state_log_num_partitions;
}

static int32_t txn_replication_factor(const st_config_t *cfg)
{
    return (int32_t)cfg->transaction_state_log_replication_factor;
}

const st_coordsvc_t st_ktxn_service = {
    .name = "transaction",
    .topic = ST_TXN_TOPIC,
    .key_type = 1,
    .partitions = txn_partitions,
    .replication_factor = txn_replication_factor,
    .configs = txn_cfg,
    .nconfigs = (int)(sizeof txn_cfg / sizeof txn_cfg[0]),
    .route = st_tcoord_partition_for,
    .start = txn_start,
    .load = txn_load,
    .unload = txn_unload,
    .tick = txn_tick,
    .drain = txn_drain,
    .fini = txn_fini,
};

/* ---- calls to coordinators ---- */

void st_ktxn_calls_free(st_ktxn_call_t *x)
{
    while (x) {
        st_ktxn_call_t *next = x->next;
        st_arena_fini(&x->arena);
        free(x);
        x = next;
    }
}

void st_ktxn_ctx_end(st_ktxn_ctx_t *ctx)
{
    st_fanout_end(&ctx->fan);
}

static void ctx_gathered(void *arg)
{
    st_ktxn_ctx_t *ctx = arg;
    ctx->finish(ctx);
}

void st_ktxn_call_return(void *arg)
{
    st_ktxn_call_t *x = arg;
    st_fanout_release(&x->leg);
}

static void call_run(st_fanout_leg_t *leg)
{
    st_kshard_t *s = st_kshard_current();
    st_ktxn_call_t *x = leg->data;
    st_fanout_hold(leg);
    if (x->partition >= 0 && !leads(s, x->partition)) {
        detach(s, x->partition);
        x->partition = -1;
    }
    if (x->partition >= 0)
        attach(s, x->partition, epoch_of(s, x->partition));
    x->exec(s, x);
}

st_ktxn_ctx_t *st_ktxn_ctx_new(st_kreq_t *r, void (*finish)(st_ktxn_ctx_t *), void *data)
{
    st_ktxn_ctx_t *ctx = st_arena_zalloc(&r->arena, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->r = r;
    st_fanout_begin(&ctx->fan, r->shard->b->mesh, r->shard->id, call_run, ctx_gathered, ctx);
    ctx->finish = finish;
    ctx->data = data;
    return ctx;
}

void st_ktxn_call_to(st_ktxn_ctx_t *ctx, int shard, int32_t partition, st_ktxn_exec_fn exec,
                     void *item)
{
    st_ktxn_call_t *x = calloc(1, sizeof *x);
    ST_ASSERT(x != NULL);
    st_arena_init(&x->arena, 2048);
    x->ctx = ctx;
    x->partition = partition;
    x->exec = exec;
    x->item = item;
    x->leg.data = x;
    x->next = ctx->calls;
    ctx->calls = x;
    st_fanout_send(&ctx->fan, &x->leg, shard);
}

void st_ktxn_call_id(st_ktxn_ctx_t *ctx, st_kstr_t id, st_ktxn_exec_fn exec, void *item)
{
    const st_md_topic_t *t = txn_topic(ctx->r->shard->md);
    int32_t p = t && id.len >= 0 ? st_tcoord_partition_for(id, t->npartitions) : -1;
    int owner = p >= 0 ? st_kshard_owner(t, p) : -1;
    if (owner < 0 || st_kleader_check(ctx->r->shard, t, p, -1)) {
        owner = ctx->r->shard->id;
        p = -1;
    }
    st_ktxn_call_to(ctx, owner, p, exec, item);
}
