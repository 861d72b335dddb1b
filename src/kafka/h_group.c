/*
 * h_group.c — the consumer-group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
 * LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), OffsetCommit (8),
 * OffsetFetch (9), DeleteGroups (42), OffsetDelete (47); and each shard's coordinator life.
 *
 * A group's coordinator is the owner shard of its __consumer_offsets partition
 * (group/coord.h). A request is decoded on its connection's shard, the internal topic is
 * created if it does not exist yet, then each group's part goes to its coordinator with a
 * fan-out leg (broker/fanout.h; one per group; ListGroups: one per shard). The coordinator fills
 * the answer, building strings in the call's own arena (calls to several shards run at once, so
 * they cannot share the request's), and the answer is encoded back on the connection's shard.
 *
 * The coordinator of a shard loads each __consumer_offsets partition it owns at start-up and,
 * for a partition created later, on first use.
 *
 * Threads: handlers on the connection's shard; st_kgroup_* on each shard's own thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/err.h"
#include "base/log.h"
#include "broker/fanout.h"
#include "group/coord.h"
#include "kafka/group_life.h"
#include "kafka/handlers.h"
#include "kafka/controller.h"
#include "proto/kerr.h"

#define ST_OFFSETS_TOPIC "__consumer_offsets"

static const st_md_topic_t *st_offsets_topic(const st_md_t *md)
{
    return st_md_find(md, ST_OFFSETS_TOPIC, (int32_t)strlen(ST_OFFSETS_TOPIC));
}

/* ---- each shard's coordinator ---- */

static void st_kgroup_on_durable(void *ctx, int32_t partition)
{
    st_kshard_t *s = ctx;
    const st_md_topic_t *t = st_offsets_topic(s->md);
    st_part_t *p = t ? st_parts_get(&s->parts, t->id, partition) : NULL;
    if (p)
        st_part_update_hw(p);
}

/* Loads the partition into this shard's coordinator if the shard owns it and has not yet. */
static void st_kgroup_attach(st_kshard_t *s, int32_t partition)
{
    const st_md_topic_t *t = st_offsets_topic(s->md);
    if (!s->groups || !t || partition < 0 || partition >= t->npartitions ||
        st_gcoord_loaded(s->groups, partition) || t->partitions[partition].shard != s->id)
        return;
    st_part_t *p = st_parts_get(&s->parts, t->id, partition);
    if (!p || !p->log)
        return;
    int rc = st_gcoord_load(s->groups, partition, p->log);
    if (rc)
        ST_ERROR("cannot load %s-%d: %s", ST_OFFSETS_TOPIC, partition, st_strerror(rc));
}

int st_kgroup_start(st_kshard_t *s)
{
    const st_config_t *cfg = s->b->cfg;
    const st_md_topic_t *t = st_offsets_topic(s->md);
    st_gcoord_config_t gc = {
        .min_session_timeout_ms = cfg->group_min_session_timeout_ms,
        .max_session_timeout_ms = cfg->group_max_session_timeout_ms,
        .initial_rebalance_delay_ms = cfg->group_initial_rebalance_delay_ms,
        .offsets_retention_ms = cfg->offsets_retention_minutes * 60000,
        .expire_check_ms = 60000,
        .num_partitions = t && t->npartitions > cfg->offsets_topic_num_partitions
                              ? t->npartitions
                              : (int32_t)cfg->offsets_topic_num_partitions,
        .on_durable = st_kgroup_on_durable,
        .ctx = s,
    };
    int rc = st_gcoord_create(&s->groups, s->loop, &gc);
    if (rc)
        return rc;
    for (int32_t p = 0; t && p < t->npartitions; p++)
        st_kgroup_attach(s, p);
    return 0;
}

void st_kgroup_drain(st_kshard_t *s)
{
    if (s->groups)
        st_gcoord_drain(s->groups);
}

void st_kgroup_fini(st_kshard_t *s)
{
    st_gcoord_destroy(s->groups);
    s->groups = NULL;
}

/* ---- the internal topic ---- */

typedef void (*st_kgroup_ready_fn)(st_kreq_t *r, void *arg);

typedef struct {
    st_ctl_op_t op;
    st_ctl_item_t item;
    st_ctl_cfg_t cfg[3];
    st_kreq_t *r;
    st_kgroup_ready_fn cb;
    void *arg;
} st_offsets_create_t;

static void st_offsets_created(st_kshard_t *s, st_ctl_op_t *op)
{
    st_offsets_create_t *c = (st_offsets_create_t *)op;
    (void)s;
    if (c->item.error && c->item.error != ST_KERR_TOPIC_ALREADY_EXISTS)
        ST_WARN("cannot create %s: %s", ST_OFFSETS_TOPIC, c->item.message);
    c->cb(c->r, c->arg);
}

/* Creates __consumer_offsets (compacted by the log cleaner, never deleted by time; segments
 * of 100 MiB as Kafka's offsets.topic.segment.bytes) if this shard's snapshot does not have it
 * yet, then calls cb. */
static void st_kgroup_ensure_topic(st_kreq_t *r, st_kgroup_ready_fn cb, void *arg)
{
    if (st_offsets_topic(r->shard->md)) {
        cb(r, arg);
        return;
    }
    st_offsets_create_t *c = st_arena_zalloc(&r->arena, sizeof *c);
    if (!c) {
        cb(r, arg);
        return;
    }
    c->r = r;
    c->cb = cb;
    c->arg = arg;
    c->cfg[0] = (st_ctl_cfg_t){"cleanup.policy", "compact", ST_CTL_CFG_SET};
    c->cfg[1] = (st_ctl_cfg_t){"retention.ms", "-1", ST_CTL_CFG_SET};
    c->cfg[2] = (st_ctl_cfg_t){"segment.bytes", "104857600", ST_CTL_CFG_SET};
    c->item.name = ST_OFFSETS_TOPIC;
    c->item.count = (int32_t)r->shard->b->cfg->offsets_topic_num_partitions;
    c->item.rf = -1;
    c->item.assigned = -1;
    c->item.internal = true;
    c->item.ncfg = 3;
    c->item.cfg = c->cfg;
    c->op.kind = ST_CTL_CREATE;
    c->op.n = 1;
    c->op.items = &c->item;
    c->op.cb = st_offsets_created;
    st_ctl_submit(r->shard, &c->op);
}

/* ---- calls to coordinators ---- */

typedef struct st_gctx st_gctx_t;
typedef struct st_gcall st_gcall_t;
typedef void (*st_gcall_exec_fn)(st_kshard_t *s, st_gcall_t *g);

struct st_gcall {
    st_fanout_leg_t leg; /* to the coordinator's shard */
    st_gctx_t *ctx;
    st_arena_t arena; /* answer memory, written on the coordinator */
    int32_t partition;
    st_gcall_exec_fn exec;
    void *item;
    st_gcall_t *next;
};

struct st_gctx {
    st_kreq_t *r;
    st_fanout_t fan; /* one leg per call */
    st_gcall_t *calls;
    void (*finish)(st_gctx_t *ctx);
    void *data;
};

static void st_gcalls_free(st_gcall_t *g)
{
    while (g) {
        st_gcall_t *next = g->next;
        st_arena_fini(&g->arena);
        free(g);
        g = next;
    }
}

/* Every call is sent: finish runs once each is answered. */
static void st_gctx_release(st_gctx_t *ctx)
{
    st_fanout_end(&ctx->fan);
}

static void st_gctx_gathered(void *arg)
{
    st_gctx_t *ctx = arg;
    ctx->finish(ctx);
}

/* Answers the request with resp, then frees the calls whose arenas the answer used. */
#define ST_GCTX_RESPOND(ctx, api, resp)                                                            \
    do {                                                                                           \
        st_gcall_t *calls_ = (ctx)->calls;                                                         \
        ST_KREQ_RESPOND((ctx)->r, api, resp);                                                      \
        st_gcalls_free(calls_);                                                                    \
    } while (0)

/* On the coordinator, from exec (now or later): the call is answered. */
static void st_gcall_return(void *arg)
{
    st_gcall_t *g = arg;
    st_fanout_release(&g->leg);
}

static void st_gcall_run(st_fanout_leg_t *leg)
{
    st_kshard_t *s = st_kshard_current();
    st_gcall_t *g = leg->data;
    st_fanout_hold(leg); /* exec answers with st_gcall_return, now or later */
    st_kgroup_attach(s, g->partition);
    g->exec(s, g);
}

static st_gctx_t *st_gctx_new(st_kreq_t *r, void (*finish)(st_gctx_t *), void *data)
{
    st_gctx_t *ctx = st_arena_zalloc(&r->arena, sizeof *ctx);
    if (!ctx)
        return NULL;
    ctx->r = r;
    st_fanout_begin(&ctx->fan, r->shard->b->mesh, r->shard->id, st_gcall_run, st_gctx_gathered,
                    ctx);
    ctx->finish = finish;
    ctx->data = data;
    return ctx;
}

static void st_gcall_to(st_gctx_t *ctx, int shard, int32_t partition, st_gcall_exec_fn exec,
                        void *item)
{
    st_gcall_t *g = calloc(1, sizeof *g);
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

/* Sends item to the coordinator of group_id. Without the internal topic the call goes to this
 * shard with partition -1, which every coordinator function answers NOT_COORDINATOR. */
static void st_gcall_group(st_gctx_t *ctx, st_kstr_t group_id, st_gcall_exec_fn exec, void *item)
{
    const st_md_topic_t *t = st_offsets_topic(ctx->r->shard->md);
    int32_t p = t ? st_gcoord_partition_for(group_id, t->npartitions) : -1;
    int owner = t ? st_kshard_owner(t, p) : -1;
    if (owner < 0) {
        owner = ctx->r->shard->id;
        p = -1;
    }
    st_gcall_to(ctx, owner, p, exec, item);
}

/* ---- FindCoordinator ---- */

typedef struct {
    st_kp_find_coordinator_req_t req;
    st_kp_find_coordinator_resp_t resp;
} st_findc_t;

static void st_findc_fill(st_kreq_t *r, int8_t key_type, int16_t *err, st_kstr_t *msg,
                          int32_t *node, st_kstr_t *host, int32_t *port)
{
    const st_md_t *md = r->shard->md;
    const st_md_broker_t *b = st_md_broker(md, (int32_t)r->shard->b->cfg->node_id);
    *node = -1;
    *host = ST_KSTR_EMPTY;
    *port = -1;
    if (key_type != 0 && key_type != 1) {
        *err = ST_KERR_INVALID_REQUEST;
        *msg = st_kstr("Unknown coordinator key type");
        return;
    }
    if (!b || (key_type == 0 && !st_offsets_topic(md))) {
        *err = ST_KERR_COORDINATOR_NOT_AVAILABLE;
        *msg = st_kstr("The coordinator is not available.");
        return;
    }
    *err = 0;
    *msg = ST_KSTR_NULL;
    *node = b->node_id;
    *host = st_kstr(b->host);
    *port = b->port;
}

static void st_findc_answer(st_kreq_t *r, void *arg)
{
    st_findc_t *f = arg;
    if (r->api_version < 4) {
        st_findc_fill(r, f->req.key_type, &f->resp.error_code, &f->resp.error_message,
                      &f->resp.node_id, &f->resp.host, &f->resp.port);
        r->error_code = f->resp.error_code;
        ST_KREQ_RESPOND(r, find_coordinator, &f->resp);
        return;
    }
    int32_t n = f->req.coordinator_keys_count;
    f->resp.coordinators = st_arena_zalloc(&r->arena, (size_t)n * sizeof *f->resp.coordinators + 1);
    if (!f->resp.coordinators) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    f->resp.coordinators_count = n;
    for (int32_t i = 0; i < n; i++) {
        st_kp_find_coordinator_resp_coordinator_t *c = &f->resp.coordinators[i];
        st_kp_find_coordinator_resp_coordinator_init(c);
        c->key = f->req.coordinator_keys[i];
        st_findc_fill(r, f->req.key_type, &c->error_code, &c->error_message, &c->node_id, &c->host,
                      &c->port);
    }
    ST_KREQ_RESPOND(r, find_coordinator, &f->resp);
}

void st_kh_find_coordinator(st_kreq_t *r)
{
    st_findc_t *f = st_arena_zalloc(&r->arena, sizeof *f);
    if (!f || st_kp_find_coordinator_req_decode(&r->body, r->api_version, &f->req)) {
        st_kreq_fail(r, "malformed FindCoordinator request");
        return;
    }
    st_kp_find_coordinator_resp_init(&f->resp);
    if (f->req.key_type == 0)
        st_kgroup_ensure_topic(r, st_findc_answer, f);
    else
        st_findc_answer(r, f);
}

/* ---- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ---- */

typedef struct {
    st_kp_join_group_req_t req;
    st_kp_join_group_resp_t resp;
    st_kstr_t client_id, client_host;
    int16_t version;
} st_join_t;

static void st_join_exec(st_kshard_t *s, st_gcall_t *g)
{
    st_join_t *j = g->item;
    st_gcoord_join(s->groups, g->partition, &j->req, j->version, j->client_id, j->client_host,
                   &g->arena, &j->resp, st_gcall_return, g);
}

static void st_join_finish(st_gctx_t *ctx)
{
    st_join_t *j = ctx->data;
    ctx->r->error_code = j->resp.error_code;
    ST_GCTX_RESPOND(ctx, join_group, &j->resp);
}

static void st_join_route(st_kreq_t *r, void *arg)
{
    (void)r;
    st_gctx_t *ctx = arg;
    st_join_t *j = ctx->data;
    st_gcall_group(ctx, j->req.group_id, st_join_exec, j);
    st_gctx_release(ctx);
}

/* "/ip" of the connection's peer, as Kafka shows client hosts. */
static st_kstr_t st_client_host(st_kreq_t *r)
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

void st_kh_join_group(st_kreq_t *r)
{
    st_join_t *j = st_arena_zalloc(&r->arena, sizeof *j);
    if (!j || st_kp_join_group_req_decode(&r->body, r->api_version, &j->req)) {
        st_kreq_fail(r, "malformed JoinGroup request");
        return;
    }
    st_kp_join_group_resp_init(&j->resp);
    j->version = r->api_version;
    j->client_id = r->hdr.client_id.len >= 0 ? r->hdr.client_id : ST_KSTR_EMPTY;
    j->client_host = st_client_host(r);
    st_gctx_t *ctx = st_gctx_new(r, st_join_finish, j);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_ensure_topic(r, st_join_route, ctx);
}

typedef struct {
    st_kp_sync_group_req_t req;
    st_kp_sync_group_resp_t resp;
    int16_t version;
} st_sync_t;

static void st_sync_exec(st_kshard_t *s, st_gcall_t *g)
{
    st_sync_t *q = g->item;
    st_gcoord_sync(s->groups, g->partition, &q->req, q->version, &g->arena, &q->resp,
                   st_gcall_return, g);
}

static void st_sync_finish(st_gctx_t *ctx)
{
    st_sync_t *q = ctx->data;
    ctx->r->error_code = q->resp.error_code;
    ST_GCTX_RESPOND(ctx, sync_group, &q->resp);
}

void st_kh_sync_group(st_kreq_t *r)
{
    st_sync_t *q = st_arena_zalloc(&r->arena, sizeof *q);
    if (!q || st_kp_sync_group_req_decode(&r->body, r->api_version, &q->req)) {
        st_kreq_fail(r, "malformed SyncGroup request");
        return;
    }
    st_kp_sync_group_resp_init(&q->resp);
    q->version = r->api_version;
    st_gctx_t *ctx = st_gctx_new(r, st_sync_finish, q);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_gcall_group(ctx, q->req.group_id, st_sync_exec, q);
    st_gctx_release(ctx);
}

typedef struct {
    st_kp_heartbeat_req_t req;
    st_kp_heartbeat_resp_t resp;
} st_hb_t;

static void st_hb_exec(st_kshard_t *s, st_gcall_t *g)
{
    st_hb_t *h = g->item;
    st_gcoord_heartbeat(s->groups, g->partition, &h->req, &h->resp);
    st_gcall_return(g);
}

static void st_hb_finish(st_gctx_t *ctx)
{
    st_hb_t *h = ctx->data;
    ctx->r->error_code = h->resp.error_code;
    ST_GCTX_RESPOND(ctx, heartbeat, &h->resp);
}

void st_kh_heartbeat(st_kreq_t *r)
{
    st_hb_t *h = st_arena_zalloc(&r->arena, sizeof *h);
    if (!h || st_kp_heartbeat_req_decode(&r->body, r->api_version, &h->req)) {
        st_kreq_fail(r, "malformed Heartbeat request");
        return;
    }
    st_kp_heartbeat_resp_init(&h->resp);
    st_gctx_t *ctx = st_gctx_new(r, st_hb_finish, h);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_gcall_group(ctx, h->req.group_id, st_hb_exec, h);
    st_gctx_release(ctx);
}

typedef struct {
    st_kp_leave_group_req_t req;
    st_kp_leave_group_resp_t resp;
    int16_t version;
} st_leave_t;

static void st_leave_exec(st_kshard_t *s, st_gcall_t *g)
{
    st_leave_t *l = g->item;
    st_gcoord_leave(s->groups, g->partition, &l->req, l->version, &g->arena, &l->resp);
    st_gcall_return(g);
}

static void st_leave_finish(st_gctx_t *ctx)
{
    st_leave_t *l = ctx->data;
    ctx->r->error_code = l->resp.error_code;
    ST_GCTX_RESPOND(ctx, leave_group, &l->resp);
}

void st_kh_leave_group(st_kreq_t *r)
{
    st_leave_t *l = st_arena_zalloc(&r->arena, sizeof *l);
    if (!l || st_kp_leave_group_req_decode(&r->body, r->api_version, &l->req)) {
        st_kreq_fail(r, "malformed LeaveGroup request");
        return;
    }
    st_kp_leave_group_resp_init(&l->resp);
    l->version = r->api_version;
    st_gctx_t *ctx = st_gctx_new(r, st_leave_finish, l);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_gcall_group(ctx, l->req.group_id, st_leave_exec, l);
    st_gctx_release(ctx);
}

/* ---- OffsetCommit ---- */

typedef struct {
    st_kp_offset_commit_req_t req;
    st_kp_offset_commit_resp_t resp;
    st_goffsets_t o;
} st_commit_t;

static void st_commit_exec(st_kshard_t *s, st_gcall_t *g)
{
    st_commit_t *c = g->item;
    st_gcoord_commit(s->groups, g->partition, &c->o, st_gcall_return, g);
}

static void st_commit_finish(st_gctx_t *ctx)
{
    st_commit_t *c = ctx->data;
    int k = 0;
    for (int t = 0; t < c->resp.topics_count; t++)
        for (int i = 0; i < c->resp.topics[t].partitions_count; i++) {
            int16_t e = c->o.parts[k++].error;
            c->resp.topics[t].partitions[i].error_code = e;
            if (e)
                ctx->r->error_code = e;
        }
    ST_GCTX_RESPOND(ctx, offset_commit, &c->resp);
}

static void st_commit_route(st_kreq_t *r, void *arg)
{
    st_gctx_t *ctx = arg;
    st_commit_t *c = ctx->data;
    const st_md_t *md = r->shard->md;
    int k = 0;
    for (int t = 0; t < c->req.topics_count; t++) {
        st_kp_offset_commit_req_topic_t *qt = &c->req.topics[t];
        const st_md_topic_t *mt = r->api_version >= 10 ? st_md_find_id(md, qt->topic_id.b)
                                                       : st_md_find(md, qt->name.ptr, qt->name.len);
        for (int i = 0; i < qt->partitions_count; i++) {
            st_goffset_t *p = &c->o.parts[k++];
            if (mt)
                p->topic = st_kstr(st_arena_strndup(&r->arena, mt->name, strlen(mt->name)));
            if (!mt)
                p->error = r->api_version >= 10 ? ST_KERR_UNKNOWN_TOPIC_ID
                                                : ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
            else if (p->partition < 0 || p->partition >= mt->npartitions || !p->topic.ptr)
                p->error = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        }
    }
    st_gcall_group(ctx, c->req.group_id, st_commit_exec, c);
    st_gctx_release(ctx);
}

void st_kh_offset_commit(st_kreq_t *r)
{
    st_commit_t *c = st_arena_zalloc(&r->arena, sizeof *c);
    if (!c || st_kp_offset_commit_req_decode(&r->body, r->api_version, &c->req)) {
        st_kreq_fail(r, "malformed OffsetCommit request");
        return;
    }
    st_kp_offset_commit_resp_init(&c->resp);
    int total = 0;
    for (int t = 0; t < c->req.topics_count; t++)
        total += c->req.topics[t].partitions_count;
    c->o.parts = st_arena_zalloc(&r->arena, (size_t)total * sizeof *c->o.parts + 1);
    c->resp.topics =
        st_arena_zalloc(&r->arena, (size_t)c->req.topics_count * sizeof *c->resp.topics + 1);
    if (!c->o.parts || !c->resp.topics) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    c->o.n = total;
    c->o.group_id = c->req.group_id;
    c->o.member_id = c->req.member_id;
    c->o.group_instance_id = c->req.group_instance_id;
    c->o.generation = c->req.generation_id_or_member_epoch;
    c->resp.topics_count = c->req.topics_count;
    int k = 0;
    for (int t = 0; t < c->req.topics_count; t++) {
        st_kp_offset_commit_req_topic_t *qt = &c->req.topics[t];
        st_kp_offset_commit_resp_topic_t *rt = &c->resp.topics[t];
        st_kp_offset_commit_resp_topic_init(rt);
        rt->name = qt->name;
        rt->topic_id = qt->topic_id;
        rt->partitions =
            st_arena_zalloc(&r->arena, (size_t)qt->partitions_count * sizeof *rt->partitions + 1);
        if (!rt->partitions) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        rt->partitions_count = qt->partitions_count;
        for (int i = 0; i < qt->partitions_count; i++) {
            st_kp_offset_commit_req_partition_t *qp = &qt->partitions[i];
            st_kp_offset_commit_resp_partition_init(&rt->partitions[i]);
            rt->partitions[i].partition_index = qp->partition_index;
            st_goffset_t *p = &c->o.parts[k++];
            p->partition = qp->partition_index;
            p->offset = qp->committed_offset;
            p->leader_epoch = qp->committed_leader_epoch;
            p->metadata = qp->committed_metadata;
        }
    }
    st_gctx_t *ctx = st_gctx_new(r, st_commit_finish, c);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_ensure_topic(r, st_commit_route, ctx);
}

/* ---- OffsetFetch (one group before v8, several from v8) ---- */

typedef struct {
    st_goffsets_t o;
    const st_kuuid_t *ids; /* v10: topic ids of the asked parts */
} st_ofetch_group_t;

typedef struct {
    st_kp_offset_fetch_req_t req;
    st_kp_offset_fetch_resp_t resp;
    int ngroups;
    st_ofetch_group_t *groups;
} st_ofetch_t;

static void st_ofetch_exec(st_kshard_t *s, st_gcall_t *g)
{
    st_ofetch_group_t *q = g->item;
    st_gcoord_fetch(s->groups, g->partition, &q->o, &g->arena);
    st_gcall_return(g);
}

/* Groups the parts of a fetch answer by topic into `topics` of the older (v<8) or newer form. */
static int st_ofetch_count_topics(const st_goffsets_t *o)
{
    int n = 0;
    for (int i = 0; i < o->n; i++)
        if (i == 0 || o->parts[i].topic.len != o->parts[i - 1].topic.len ||
            memcmp(o->parts[i].topic.ptr, o->parts[i - 1].topic.ptr,
                   (size_t)o->parts[i].topic.len) != 0)
            n++;
    return n;
}

static void st_ofetch_finish(st_gctx_t *ctx)
{
    st_ofetch_t *f = ctx->data;
    st_kreq_t *r = ctx->r;
    const st_md_t *md = r->shard->md;
    if (r->api_version < 8) {
        st_goffsets_t *o = &f->groups[0].o;
        int nt = st_ofetch_count_topics(o);
        f->resp.error_code = o->error;
        f->resp.topics = st_arena_zalloc(&r->arena, (size_t)nt * sizeof *f->resp.topics + 1);
        if (!f->resp.topics) {
            st_kreq_fail(r, "out of memory");
            st_gcalls_free(ctx->calls);
            return;
        }
        int t = -1;
        for (int i = 0; i < o->n; i++) {
            st_goffset_t *p = &o->parts[i];
            if (t < 0 ||
                !(p->topic.len == f->resp.topics[t].name.len &&
                  memcmp(p->topic.ptr, f->resp.topics[t].name.ptr, (size_t)p->topic.len) == 0)) {
                t++;
                st_kp_offset_fetch_resp_topic_init(&f->resp.topics[t]);
                f->resp.topics[t].name = p->topic;
                f->resp.topics[t].partitions = st_arena_zalloc(
                    &r->arena, (size_t)o->n * sizeof(st_kp_offset_fetch_resp_partition_t) + 1);
                if (!f->resp.topics[t].partitions) {
                    st_kreq_fail(r, "out of memory");
                    st_gcalls_free(ctx->calls);
                    return;
                }
            }
            st_kp_offset_fetch_resp_topic_t *rt = &f->resp.topics[t];
            st_kp_offset_fetch_resp_partition_t *rp = &rt->partitions[rt->partitions_count++];
            st_kp_offset_fetch_resp_partition_init(rp);
            rp->partition_index = p->partition;
            rp->committed_offset = o->error ? -1 : p->offset;
            rp->committed_leader_epoch = o->error ? -1 : p->leader_epoch;
            rp->metadata = o->error ? ST_KSTR_EMPTY : p->metadata;
            rp->error_code = o->error ? o->error : p->error;
        }
        f->resp.topics_count = t + 1;
        r->error_code = o->error;
        ST_GCTX_RESPOND(ctx, offset_fetch, &f->resp);
        return;
    }
    f->resp.groups = st_arena_zalloc(&r->arena, (size_t)f->ngroups * sizeof *f->resp.groups + 1);
    if (!f->resp.groups) {
        st_kreq_fail(r, "out of memory");
        st_gcalls_free(ctx->calls);
        return;
    }
    f->resp.groups_count = f->ngroups;
    for (int gi = 0; gi < f->ngroups; gi++) {
        st_goffsets_t *o = &f->groups[gi].o;
        st_kp_offset_fetch_resp_group_t *rg = &f->resp.groups[gi];
        st_kp_offset_fetch_resp_group_init(rg);
        rg->group_id = o->group_id;
        rg->error_code = o->error;
        if (o->error)
            r->error_code = o->error;
        int nt = st_ofetch_count_topics(o);
        rg->topics = st_arena_zalloc(&r->arena, (size_t)nt * sizeof *rg->topics + 1);
        if (!rg->topics) {
            st_kreq_fail(r, "out of memory");
            st_gcalls_free(ctx->calls);
            return;
        }
        int t = -1;
        for (int i = 0; i < o->n; i++) {
            st_goffset_t *p = &o->parts[i];
            if (t < 0 ||
                !(p->topic.len == rg->topics[t].name.len &&
                  memcmp(p->topic.ptr, rg->topics[t].name.ptr, (size_t)p->topic.len) == 0)) {
                t++;
                st_kp_offset_fetch_resp_group_topic_init(&rg->topics[t]);
                rg->topics[t].name = p->topic;
                if (f->groups[gi].ids && !o->all) {
                    rg->topics[t].topic_id = f->groups[gi].ids[i];
                } else {
                    const st_md_topic_t *mt = st_md_find(md, p->topic.ptr, p->topic.len);
                    if (mt)
                        memcpy(rg->topics[t].topic_id.b, mt->id, 16);
                }
                rg->topics[t].partitions = st_arena_zalloc(
                    &r->arena,
                    (size_t)o->n * sizeof(st_kp_offset_fetch_resp_group_topic_partition_t) + 1);
                if (!rg->topics[t].partitions) {
                    st_kreq_fail(r, "out of memory");
                    st_gcalls_free(ctx->calls);
                    return;
                }
            }
            st_kp_offset_fetch_resp_group_topic_t *rt = &rg->topics[t];
            st_kp_offset_fetch_resp_group_topic_partition_t *rp =
                &rt->partitions[rt->partitions_count++];
            st_kp_offset_fetch_resp_group_topic_partition_init(rp);
            rp->partition_index = p->partition;
            rp->committed_offset = o->error ? -1 : p->offset;
            rp->committed_leader_epoch = o->error ? -1 : p->leader_epoch;
            rp->metadata = o->error ? ST_KSTR_EMPTY : p->metadata;
            rp->error_code = p->error;
        }
        rg->topics_count = t + 1;
    }
    ST_GCTX_RESPOND(ctx, offset_fetch, &f->resp);
}

/* Fills one group's asked parts (topics: NULL with count -1 means all). */
static int st_ofetch_group_init(st_kreq_t *r, st_ofetch_group_t *q, st_kstr_t group,
                                const st_kp_offset_fetch_req_group_topic_t *gt,
                                const st_kp_offset_fetch_req_topic_t *ot, int32_t ntopics)
{
    q->o.group_id = group;
    if (ntopics < 0) {
        q->o.all = true;
        return 0;
    }
    int total = 0;
    for (int t = 0; t < ntopics; t++)
        total += gt ? gt[t].partition_indexes_count : ot[t].partition_indexes_count;
    q->o.parts = st_arena_zalloc(&r->arena, (size_t)total * sizeof *q->o.parts + 1);
    st_kuuid_t *ids = st_arena_zalloc(&r->arena, (size_t)total * sizeof *ids + 1);
    if (!q->o.parts || !ids)
        return -ENOMEM;
    if (r->api_version >= 10)
        q->ids = ids;
    const st_md_t *md = r->shard->md;
    for (int t = 0; t < ntopics; t++) {
        st_kstr_t name = gt ? gt[t].name : ot[t].name;
        if (r->api_version >= 10) {
            const st_md_topic_t *mt = st_md_find_id(md, gt[t].topic_id.b);
            name = mt ? st_kstr(st_arena_strndup(&r->arena, mt->name, strlen(mt->name)))
                      : ST_KSTR_EMPTY;
        }
        int32_t np = gt ? gt[t].partition_indexes_count : ot[t].partition_indexes_count;
        const int32_t *pi = gt ? gt[t].partition_indexes : ot[t].partition_indexes;
        for (int i = 0; i < np; i++) {
            st_goffset_t *p = &q->o.parts[q->o.n];
            if (gt)
                ids[q->o.n] = gt[t].topic_id;
            q->o.n++;
            p->topic = name;
            p->partition = pi[i];
            p->offset = -1;
            p->leader_epoch = -1;
            if (r->api_version >= 10 && name.len == 0)
                p->error = ST_KERR_UNKNOWN_TOPIC_ID;
        }
    }
    return 0;
}

static void st_ofetch_route(st_kreq_t *r, void *arg)
{
    st_gctx_t *ctx = arg;
    st_ofetch_t *f = ctx->data;
    for (int i = 0; i < f->ngroups; i++)
        st_gcall_group(ctx, f->groups[i].o.group_id, st_ofetch_exec, &f->groups[i]);
    (void)r;
    st_gctx_release(ctx);
}

void st_kh_offset_fetch(st_kreq_t *r)
{
    st_ofetch_t *f = st_arena_zalloc(&r->arena, sizeof *f);
    if (!f || st_kp_offset_fetch_req_decode(&r->body, r->api_version, &f->req)) {
        st_kreq_fail(r, "malformed OffsetFetch request");
        return;
    }
    st_kp_offset_fetch_resp_init(&f->resp);
    f->ngroups = r->api_version >= 8 ? f->req.groups_count : 1;
    f->groups = st_arena_zalloc(&r->arena, (size_t)f->ngroups * sizeof *f->groups + 1);
    if (!f->groups) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    int rc = 0;
    if (r->api_version < 8) {
        int32_t nt = f->req.topics_count;
        if (!f->req.topics && nt <= 0)
            nt = r->api_version >= 2 ? -1 : 0;
        rc = st_ofetch_group_init(r, &f->groups[0], f->req.group_id, NULL, f->req.topics, nt);
    } else {
        for (int i = 0; i < f->ngroups && !rc; i++) {
            st_kp_offset_fetch_req_group_t *g = &f->req.groups[i];
            int32_t nt = !g->topics && g->topics_count <= 0 ? -1 : g->topics_count;
            rc = st_ofetch_group_init(r, &f->groups[i], g->group_id, g->topics, NULL, nt);
        }
    }
    st_gctx_t *ctx = rc ? NULL : st_gctx_new(r, st_ofetch_finish, f);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_ensure_topic(r, st_ofetch_route, ctx);
}

/* ---- DescribeGroups, ListGroups, DeleteGroups ---- */

typedef struct {
    st_kp_describe_groups_req_t req;
    st_kp_describe_groups_resp_t resp;
} st_describe_t;

static void st_describe_exec(st_kshard_t *s, st_gcall_t *g)
{
    st_kp_describe_groups_resp_group_t *out = g->item;
    st_gcoord_describe(s->groups, g->partition, out->group_id, g->ctx->r->api_version, &g->arena,
                       out);
    st_gcall_return(g);
}

static void st_describe_finish(st_gctx_t *ctx)
{
    st_describe_t *d = ctx->data;
    ST_GCTX_RESPOND(ctx, describe_groups, &d->resp);
}

static void st_describe_route(st_kreq_t *r, void *arg)
{
    st_gctx_t *ctx = arg;
    st_describe_t *d = ctx->data;
    (void)r;
    for (int i = 0; i < d->resp.groups_count; i++)
        st_gcall_group(ctx, d->resp.groups[i].group_id, st_describe_exec, &d->resp.groups[i]);
    st_gctx_release(ctx);
}

void st_kh_describe_groups(st_kreq_t *r)
{
    st_describe_t *d = st_arena_zalloc(&r->arena, sizeof *d);
    if (!d || st_kp_describe_groups_req_decode(&r->body, r->api_version, &d->req)) {
        st_kreq_fail(r, "malformed DescribeGroups request");
        return;
    }
    st_kp_describe_groups_resp_init(&d->resp);
    d->resp.groups =
        st_arena_zalloc(&r->arena, (size_t)d->req.groups_count * sizeof *d->resp.groups + 1);
    st_gctx_t *ctx = st_gctx_new(r, st_describe_finish, d);
    if (!d->resp.groups || !ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    d->resp.groups_count = d->req.groups_count;
    for (int i = 0; i < d->req.groups_count; i++) {
        st_kp_describe_groups_resp_group_init(&d->resp.groups[i]);
        d->resp.groups[i].group_id = d->req.groups[i];
    }
    st_kgroup_ensure_topic(r, st_describe_route, ctx);
}

typedef struct {
    st_kp_list_groups_req_t req;
    st_kp_list_groups_resp_t resp;
    struct st_list_part {
        st_kp_list_groups_resp_group_t *groups;
        int32_t n;
    } * parts;
} st_list_t;

static void st_list_exec(st_kshard_t *s, st_gcall_t *g)
{
    st_list_t *l = g->ctx->data;
    struct st_list_part *p = g->item;
    if (s->groups)
        st_gcoord_list(s->groups, l->req.states_filter, l->req.states_filter_count,
                       l->req.types_filter, l->req.types_filter_count, &g->arena, &p->groups,
                       &p->n);
    st_gcall_return(g);
}

static void st_list_finish(st_gctx_t *ctx)
{
    st_list_t *l = ctx->data;
    st_kreq_t *r = ctx->r;
    int nshards = r->shard->b->nshards;
    int32_t total = 0;
    for (int i = 0; i < nshards; i++)
        total += l->parts[i].n;
    l->resp.groups = st_arena_zalloc(&r->arena, (size_t)total * sizeof *l->resp.groups + 1);
    if (!l->resp.groups) {
        st_kreq_fail(r, "out of memory");
        st_gcalls_free(ctx->calls);
        return;
    }
    for (int i = 0; i < nshards; i++)
        for (int32_t k = 0; k < l->parts[i].n; k++)
            l->resp.groups[l->resp.groups_count++] = l->parts[i].groups[k];
    ST_GCTX_RESPOND(ctx, list_groups, &l->resp);
}

void st_kh_list_groups(st_kreq_t *r)
{
    st_list_t *l = st_arena_zalloc(&r->arena, sizeof *l);
    if (!l || st_kp_list_groups_req_decode(&r->body, r->api_version, &l->req)) {
        st_kreq_fail(r, "malformed ListGroups request");
        return;
    }
    st_kp_list_groups_resp_init(&l->resp);
    int nshards = r->shard->b->nshards;
    l->parts = st_arena_zalloc(&r->arena, (size_t)nshards * sizeof *l->parts);
    st_gctx_t *ctx = st_gctx_new(r, st_list_finish, l);
    if (!l->parts || !ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int i = 0; i < nshards; i++)
        st_gcall_to(ctx, i, -1, st_list_exec, &l->parts[i]);
    st_gctx_release(ctx);
}

typedef struct {
    st_kp_delete_groups_req_t req;
    st_kp_delete_groups_resp_t resp;
} st_delg_t;

static void st_delg_exec(st_kshard_t *s, st_gcall_t *g)
{
    st_kp_delete_groups_resp_result_t *res = g->item;
    st_gcoord_delete_group(s->groups, g->partition, res->group_id, &res->error_code,
                           st_gcall_return, g);
}

static void st_delg_finish(st_gctx_t *ctx)
{
    st_delg_t *d = ctx->data;
    for (int i = 0; i < d->resp.results_count; i++)
        if (d->resp.results[i].error_code)
            ctx->r->error_code = d->resp.results[i].error_code;
    ST_GCTX_RESPOND(ctx, delete_groups, &d->resp);
}

static void st_delg_route(st_kreq_t *r, void *arg)
{
    st_gctx_t *ctx = arg;
    st_delg_t *d = ctx->data;
    (void)r;
    for (int i = 0; i < d->resp.results_count; i++)
        st_gcall_group(ctx, d->resp.results[i].group_id, st_delg_exec, &d->resp.results[i]);
    st_gctx_release(ctx);
}

void st_kh_delete_groups(st_kreq_t *r)
{
    st_delg_t *d = st_arena_zalloc(&r->arena, sizeof *d);
    if (!d || st_kp_delete_groups_req_decode(&r->body, r->api_version, &d->req)) {
        st_kreq_fail(r, "malformed DeleteGroups request");
        return;
    }
    st_kp_delete_groups_resp_init(&d->resp);
    d->resp.results =
        st_arena_zalloc(&r->arena, (size_t)d->req.groups_names_count * sizeof *d->resp.results + 1);
    st_gctx_t *ctx = st_gctx_new(r, st_delg_finish, d);
    if (!d->resp.results || !ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    d->resp.results_count = d->req.groups_names_count;
    for (int i = 0; i < d->req.groups_names_count; i++) {
        st_kp_delete_groups_resp_result_init(&d->resp.results[i]);
        d->resp.results[i].group_id = d->req.groups_names[i];
    }
    st_kgroup_ensure_topic(r, st_delg_route, ctx);
}

/* ---- OffsetDelete ---- */

typedef struct {
    st_kp_offset_delete_req_t req;
    st_kp_offset_delete_resp_t resp;
    st_goffsets_t o;
} st_offdel_t;

static void st_offdel_exec(st_kshard_t *s, st_gcall_t *g)
{
    st_offdel_t *d = g->item;
    st_gcoord_offset_delete(s->groups, g->partition, &d->o, st_gcall_return, g);
}

static void st_offdel_finish(st_gctx_t *ctx)
{
    st_offdel_t *d = ctx->data;
    d->resp.error_code = d->o.error;
    ctx->r->error_code = d->o.error;
    int k = 0;
    for (int t = 0; t < d->resp.topics_count; t++)
        for (int i = 0; i < d->resp.topics[t].partitions_count; i++)
            d->resp.topics[t].partitions[i].error_code = d->o.error ? 0 : d->o.parts[k++].error;
    if (d->o.error)
        for (int t = 0; t < d->resp.topics_count; t++)
            d->resp.topics[t].partitions_count = 0;
    ST_GCTX_RESPOND(ctx, offset_delete, &d->resp);
}

static void st_offdel_route(st_kreq_t *r, void *arg)
{
    st_gctx_t *ctx = arg;
    st_offdel_t *d = ctx->data;
    const st_md_t *md = r->shard->md;
    int k = 0;
    for (int t = 0; t < d->req.topics_count; t++) {
        st_kp_offset_delete_req_topic_t *qt = &d->req.topics[t];
        const st_md_topic_t *mt = st_md_find(md, qt->name.ptr, qt->name.len);
        for (int i = 0; i < qt->partitions_count; i++) {
            st_goffset_t *p = &d->o.parts[k++];
            if (!mt || p->partition < 0 || p->partition >= mt->npartitions)
                p->error = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        }
    }
    st_gcall_group(ctx, d->req.group_id, st_offdel_exec, d);
    st_gctx_release(ctx);
}

void st_kh_offset_delete(st_kreq_t *r)
{
    st_offdel_t *d = st_arena_zalloc(&r->arena, sizeof *d);
    if (!d || st_kp_offset_delete_req_decode(&r->body, r->api_version, &d->req)) {
        st_kreq_fail(r, "malformed OffsetDelete request");
        return;
    }
    st_kp_offset_delete_resp_init(&d->resp);
    int total = 0;
    for (int t = 0; t < d->req.topics_count; t++)
        total += d->req.topics[t].partitions_count;
    d->o.parts = st_arena_zalloc(&r->arena, (size_t)total * sizeof *d->o.parts + 1);
    d->resp.topics =
        st_arena_zalloc(&r->arena, (size_t)d->req.topics_count * sizeof *d->resp.topics + 1);
    st_gctx_t *ctx = st_gctx_new(r, st_offdel_finish, d);
    if (!d->o.parts || !d->resp.topics || !ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    d->o.group_id = d->req.group_id;
    d->o.n = total;
    d->resp.topics_count = d->req.topics_count;
    int k = 0;
    for (int t = 0; t < d->req.topics_count; t++) {
        st_kp_offset_delete_req_topic_t *qt = &d->req.topics[t];
        st_kp_offset_delete_resp_topic_t *rt = &d->resp.topics[t];
        st_kp_offset_delete_resp_topic_init(rt);
        rt->name = qt->name;
        rt->partitions =
            st_arena_zalloc(&r->arena, (size_t)qt->partitions_count * sizeof *rt->partitions + 1);
        if (!rt->partitions) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        rt->partitions_count = qt->partitions_count;
        for (int i = 0; i < qt->partitions_count; i++) {
            st_kp_offset_delete_resp_partition_init(&rt->partitions[i]);
            rt->partitions[i].partition_index = qt->partitions[i].partition_index;
            st_goffset_t *p = &d->o.parts[k++];
            p->topic = qt->name;
            p->partition = qt->partitions[i].partition_index;
        }
    }
    st_kgroup_ensure_topic(r, st_offdel_route, ctx);
}
