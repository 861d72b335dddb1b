/*
 * h_group.c — the consumer-group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
 * LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16), OffsetCommit (8),
 * OffsetFetch (9), DeleteGroups (42), OffsetDelete (47); TxnOffsetCommit (28), routed the same
 * way, is in h_txn_offset_commit.c. OffsetFetch's require_stable (v7+) answers
 * UNSTABLE_OFFSET_COMMIT for a partition whose offset a transaction holds pending.
 *
 * A group's coordinator is the broker leading its __consumer_offsets partition: FindCoordinator
 * names it, and every other group API on a broker that does not lead it answers NOT_COORDINATOR
 * (group_route.h). ListGroups lists the groups of the partitions this broker leads.
 *
 * Each handler: decode -> the internal topic created if it does not exist yet -> each group's
 * part to its coordinator (group_route.h: one fan-out leg per group; ListGroups: one per shard)
 * -> the coordinator (group/coord.h) fills the answer in the call's own arena -> the answer is
 * encoded back on the connection's shard. The coordinators' life and the routing are in
 * group_route.c.
 *
 * Threads: handlers on the connection's shard; *_exec on the coordinator's shard.
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
#include "kafka/authz.h"
#include "kafka/coordsvc.h"
#include "kafka/group_route.h"
#include "kafka/handlers.h"
#include "proto/kerr.h"

/* ---- FindCoordinator ---- */

typedef struct {
    st_kp_find_coordinator_req_t req;
    st_kp_find_coordinator_resp_t resp;
} find_coord_t;

/* The coordinator of `key`: the leader of the key's partition of its service's internal topic
 * (coordsvc.h; a group's is its __consumer_offsets partition, a transactional id's its
 * __transaction_state partition). */
static void find_coord_fill(st_kreq_t *r, int8_t key_type, st_kstr_t key, int16_t *err,
                            st_kstr_t *msg, int32_t *node, st_kstr_t *host, int32_t *port)
{
    const st_md_t *md = r->shard->md;
    const st_coordsvc_t *svc = st_coordsvc_by_key_type(key_type);
    *node = -1;
    *host = ST_KSTR_EMPTY;
    *port = -1;
    if (!svc) {
        *err = ST_KERR_INVALID_REQUEST;
        *msg = st_kstr("Unknown coordinator key type");
        return;
    }
    /* DESCRIBE on the group or the transactional id (Kafka's check) */
    bool txn = key_type == 1;
    if (st_kauthz_on(r) &&
        (key.len < 0 ||
         !st_kauthz(r, ST_ACL_OP_DESCRIBE, txn ? ST_ACL_RES_TRANSACTIONAL_ID : ST_ACL_RES_GROUP,
                    key.ptr, (size_t)key.len))) {
        *err = txn ? ST_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                   : ST_KERR_GROUP_AUTHORIZATION_FAILED;
        *msg =
            st_kstr(txn ? "Transactional Id authorization failed." : "Group authorization failed.");
        return;
    }
    int32_t id = st_coordsvc_coordinator(svc, md, key);
    const st_md_broker_t *b = id >= 0 ? st_md_broker(md, id) : NULL;
    if (!b) {
        *err = ST_KERR_COORDINATOR_NOT_AVAILABLE;
        *msg = st_kstr("The coordinator is not available.");
        return;
    }
    *err = 0;
    *msg = ST_KSTR_NULL;
    *node = b->node_id;
    const st_listener_t *l = st_conn_listener(r->conn);
    const char *h;
    size_t hl;
    st_md_broker_endpoint(b, l ? l->name : NULL, &h, &hl, port);
    *host = (st_kstr_t){h, (int32_t)hl};
    if (b->node_id == (int32_t)r->shard->b->cfg->node_id && l) {
        *host = st_kstr(l->adv_host); /* this broker: the listener asked on (as Metadata) */
        *port = l->adv_port;
    }
}

static void find_coord_answer(st_kreq_t *r, void *arg)
{
    find_coord_t *f = arg;
    if (r->api_version < 4) {
        find_coord_fill(r, f->req.key_type, f->req.key, &f->resp.error_code, &f->resp.error_message,
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
        find_coord_fill(r, f->req.key_type, c->key, &c->error_code, &c->error_message, &c->node_id,
                        &c->host, &c->port);
    }
    ST_KREQ_RESPOND(r, find_coordinator, &f->resp);
}

void st_kh_find_coordinator(st_kreq_t *r)
{
    find_coord_t *f = st_arena_zalloc(&r->arena, sizeof *f);
    if (!f || st_kp_find_coordinator_req_decode(&r->body, r->api_version, &f->req)) {
        st_kreq_fail(r, "malformed FindCoordinator request");
        return;
    }
    st_kp_find_coordinator_resp_init(&f->resp);
    const st_coordsvc_t *svc = st_coordsvc_by_key_type(f->req.key_type);
    if (svc)
        st_coordsvc_ensure_topic(r, svc, find_coord_answer, f);
    else
        find_coord_answer(r, f);
}

/* ---- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ---- */

typedef struct {
    st_kp_join_group_req_t req;
    st_kp_join_group_resp_t resp;
    st_kstr_t client_id, client_host;
    int16_t version;
} join_t;

static void join_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    join_t *j = g->item;
    st_gcoord_join(st_kgroup_coord(s), g->partition, &j->req, j->version, j->client_id,
                   j->client_host, &g->arena, &j->resp, st_kgroup_call_return, g);
}

static void join_finish(st_kgroup_ctx_t *ctx)
{
    join_t *j = ctx->data;
    ctx->r->error_code = j->resp.error_code;
    ST_KGROUP_RESPOND(ctx, join_group, &j->resp);
}

static void join_route(st_kreq_t *r, void *arg)
{
    (void)r;
    st_kgroup_ctx_t *ctx = arg;
    join_t *j = ctx->data;
    st_kgroup_call_group(ctx, j->req.group_id, join_exec, j);
    st_kgroup_ctx_end(ctx);
}

/* With ACLs on: whether the principal may READ group_id (the group APIs' check); false
 * answers GROUP_AUTHORIZATION_FAILED, which the caller sends. */
static bool group_read(st_kreq_t *r, st_kstr_t group_id)
{
    return !st_kauthz_on(r) || (group_id.len >= 0 && st_kauthz(r, ST_ACL_OP_READ, ST_ACL_RES_GROUP,
                                                               group_id.ptr, (size_t)group_id.len));
}

void st_kh_join_group(st_kreq_t *r)
{
    join_t *j = st_arena_zalloc(&r->arena, sizeof *j);
    if (!j || st_kp_join_group_req_decode(&r->body, r->api_version, &j->req)) {
        st_kreq_fail(r, "malformed JoinGroup request");
        return;
    }
    /* v0 has no rebalance timeout: the session timeout stands in, as in Kafka */
    if (r->api_version == 0)
        j->req.rebalance_timeout_ms = j->req.session_timeout_ms;
    st_kp_join_group_resp_init(&j->resp);
    j->version = r->api_version;
    j->client_id = r->hdr.client_id.len >= 0 ? r->hdr.client_id : ST_KSTR_EMPTY;
    j->client_host = st_kgroup_client_host(r);
    if (!group_read(r, j->req.group_id)) {
        j->resp.error_code = r->error_code = ST_KERR_GROUP_AUTHORIZATION_FAILED;
        ST_KREQ_RESPOND(r, join_group, &j->resp);
        return;
    }
    st_kgroup_ctx_t *ctx = st_kgroup_ctx_new(r, join_finish, j);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_ensure_topic(r, join_route, ctx);
}

typedef struct {
    st_kp_sync_group_req_t req;
    st_kp_sync_group_resp_t resp;
    int16_t version;
} sync_t;

static void sync_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    sync_t *q = g->item;
    st_gcoord_sync(st_kgroup_coord(s), g->partition, &q->req, q->version, &g->arena, &q->resp,
                   st_kgroup_call_return, g);
}

static void sync_finish(st_kgroup_ctx_t *ctx)
{
    sync_t *q = ctx->data;
    ctx->r->error_code = q->resp.error_code;
    ST_KGROUP_RESPOND(ctx, sync_group, &q->resp);
}

void st_kh_sync_group(st_kreq_t *r)
{
    sync_t *q = st_arena_zalloc(&r->arena, sizeof *q);
    if (!q || st_kp_sync_group_req_decode(&r->body, r->api_version, &q->req)) {
        st_kreq_fail(r, "malformed SyncGroup request");
        return;
    }
    st_kp_sync_group_resp_init(&q->resp);
    q->version = r->api_version;
    if (!group_read(r, q->req.group_id)) {
        q->resp.error_code = r->error_code = ST_KERR_GROUP_AUTHORIZATION_FAILED;
        ST_KREQ_RESPOND(r, sync_group, &q->resp);
        return;
    }
    st_kgroup_ctx_t *ctx = st_kgroup_ctx_new(r, sync_finish, q);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_call_group(ctx, q->req.group_id, sync_exec, q);
    st_kgroup_ctx_end(ctx);
}

typedef struct {
    st_kp_heartbeat_req_t req;
    st_kp_heartbeat_resp_t resp;
} heartbeat_t;

static void heartbeat_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    heartbeat_t *h = g->item;
    st_gcoord_heartbeat(st_kgroup_coord(s), g->partition, &h->req, &h->resp);
    st_kgroup_call_return(g);
}

static void heartbeat_finish(st_kgroup_ctx_t *ctx)
{
    heartbeat_t *h = ctx->data;
    ctx->r->error_code = h->resp.error_code;
    ST_KGROUP_RESPOND(ctx, heartbeat, &h->resp);
}

void st_kh_heartbeat(st_kreq_t *r)
{
    heartbeat_t *h = st_arena_zalloc(&r->arena, sizeof *h);
    if (!h || st_kp_heartbeat_req_decode(&r->body, r->api_version, &h->req)) {
        st_kreq_fail(r, "malformed Heartbeat request");
        return;
    }
    st_kp_heartbeat_resp_init(&h->resp);
    if (!group_read(r, h->req.group_id)) {
        h->resp.error_code = r->error_code = ST_KERR_GROUP_AUTHORIZATION_FAILED;
        ST_KREQ_RESPOND(r, heartbeat, &h->resp);
        return;
    }
    st_kgroup_ctx_t *ctx = st_kgroup_ctx_new(r, heartbeat_finish, h);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_call_group(ctx, h->req.group_id, heartbeat_exec, h);
    st_kgroup_ctx_end(ctx);
}

typedef struct {
    st_kp_leave_group_req_t req;
    st_kp_leave_group_resp_t resp;
    int16_t version;
} leave_t;

static void leave_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    leave_t *l = g->item;
    st_gcoord_leave(st_kgroup_coord(s), g->partition, &l->req, l->version, &g->arena, &l->resp);
    st_kgroup_call_return(g);
}

static void leave_finish(st_kgroup_ctx_t *ctx)
{
    leave_t *l = ctx->data;
    ctx->r->error_code = l->resp.error_code;
    ST_KGROUP_RESPOND(ctx, leave_group, &l->resp);
}

void st_kh_leave_group(st_kreq_t *r)
{
    leave_t *l = st_arena_zalloc(&r->arena, sizeof *l);
    if (!l || st_kp_leave_group_req_decode(&r->body, r->api_version, &l->req)) {
        st_kreq_fail(r, "malformed LeaveGroup request");
        return;
    }
    st_kp_leave_group_resp_init(&l->resp);
    l->version = r->api_version;
    if (!group_read(r, l->req.group_id)) {
        l->resp.error_code = r->error_code = ST_KERR_GROUP_AUTHORIZATION_FAILED;
        ST_KREQ_RESPOND(r, leave_group, &l->resp);
        return;
    }
    st_kgroup_ctx_t *ctx = st_kgroup_ctx_new(r, leave_finish, l);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_call_group(ctx, l->req.group_id, leave_exec, l);
    st_kgroup_ctx_end(ctx);
}

/* ---- OffsetCommit ---- */

typedef struct {
    st_kp_offset_commit_req_t req;
    st_kp_offset_commit_resp_t resp;
    st_kp_offset_commit_item_t *q; /* the request's partitions (o.parts[k] is q[k]'s) */
    st_goffsets_t o;
} commit_t;

static void commit_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    commit_t *c = g->item;
    st_gcoord_commit(st_kgroup_coord(s), g->partition, &c->o, st_kgroup_call_return, g);
}

static void commit_finish(st_kgroup_ctx_t *ctx)
{
    commit_t *c = ctx->data;
    for (int k = 0; k < c->o.n; k++) {
        int16_t e = c->o.parts[k].error;
        c->q[k].resp_partition->error_code = e;
        if (e)
            ctx->r->error_code = e;
    }
    ST_KGROUP_RESPOND(ctx, offset_commit, &c->resp);
}

static void commit_route(st_kreq_t *r, void *arg)
{
    st_kgroup_ctx_t *ctx = arg;
    commit_t *c = ctx->data;
    const st_md_t *md = r->shard->md;
    const st_md_topic_t *mt = NULL;
    for (int k = 0; k < c->o.n; k++) {
        const st_kp_offset_commit_item_t *q = &c->q[k];
        if (k == 0 || q->topic_at != c->q[k - 1].topic_at)
            mt = r->api_version >= 10 ? st_md_find_id(md, q->topic_id.b)
                                      : st_md_find(md, q->name.ptr, q->name.len);
        st_goffset_t *p = &c->o.parts[k];
        if (mt)
            p->topic = st_kstr(st_arena_strndup(&r->arena, mt->name, strlen(mt->name)));
        st_kstr_t name = mt ? p->topic : q->name;
        if (!st_kauthz_k(r, ST_ACL_OP_READ, ST_ACL_RES_TOPIC, name))
            p->error = ST_KERR_TOPIC_AUTHORIZATION_FAILED;
        else if (!mt)
            p->error = r->api_version >= 10 ? ST_KERR_UNKNOWN_TOPIC_ID
                                            : ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        else if (p->partition < 0 || p->partition >= mt->npartitions || !p->topic.ptr)
            p->error = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    }
    st_kgroup_call_group(ctx, c->req.group_id, commit_exec, c);
    st_kgroup_ctx_end(ctx);
}

void st_kh_offset_commit(st_kreq_t *r)
{
    commit_t *c = st_arena_zalloc(&r->arena, sizeof *c);
    if (!c || st_kp_offset_commit_req_decode(&r->body, r->api_version, &c->req)) {
        st_kreq_fail(r, "malformed OffsetCommit request");
        return;
    }
    st_kp_offset_commit_resp_init(&c->resp);
    c->o.n = st_kp_offset_commit_mirror(&r->arena, &c->req, &c->resp, &c->q);
    c->o.parts =
        c->o.n < 0 ? NULL : st_arena_zalloc(&r->arena, (size_t)c->o.n * sizeof *c->o.parts + 1);
    if (!c->o.parts) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    c->o.group_id = c->req.group_id;
    c->o.member_id = c->req.member_id;
    c->o.group_instance_id = c->req.group_instance_id;
    c->o.generation = c->req.generation_id_or_member_epoch;
    c->o.version = r->api_version;
    c->o.retention_ms = r->api_version >= 2 && r->api_version <= 4 ? c->req.retention_time_ms : -1;
    for (int k = 0; k < c->o.n; k++) {
        const st_kp_offset_commit_req_partition_t *qp = c->q[k].req_partition;
        st_goffset_t *p = &c->o.parts[k];
        p->partition = qp->partition_index;
        p->offset = qp->committed_offset;
        p->leader_epoch = qp->committed_leader_epoch;
        p->metadata = qp->committed_metadata;
        p->commit_ts = r->api_version == 1 ? qp->commit_timestamp : -1; /* -1: now */
    }
    if (!group_read(r, c->req.group_id)) {
        for (int k = 0; k < c->o.n; k++)
            c->q[k].resp_partition->error_code = ST_KERR_GROUP_AUTHORIZATION_FAILED;
        r->error_code = ST_KERR_GROUP_AUTHORIZATION_FAILED;
        ST_KREQ_RESPOND(r, offset_commit, &c->resp);
        return;
    }
    st_kgroup_ctx_t *ctx = st_kgroup_ctx_new(r, commit_finish, c);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_ensure_topic(r, commit_route, ctx);
}

/* ---- OffsetFetch (one group before v8, several from v8) ---- */

typedef struct {
    st_goffsets_t o;
    const st_kuuid_t *ids; /* v10: topic ids of the asked parts */
} offset_fetch_group_t;

typedef struct {
    st_kp_offset_fetch_req_t req;
    st_kp_offset_fetch_resp_t resp;
    int ngroups;
    offset_fetch_group_t *groups;
} offset_fetch_t;

static void offset_fetch_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    offset_fetch_group_t *q = g->item;
    st_gcoord_fetch(st_kgroup_coord(s), g->partition, &q->o, &g->arena);
    st_kgroup_call_return(g);
}

/* Groups the parts of a fetch answer by topic into `topics` of the older (v<8) or newer form. */
static int offset_fetch_count_topics(const st_goffsets_t *o)
{
    int n = 0;
    for (int i = 0; i < o->n; i++)
        if (i == 0 || o->parts[i].topic.len != o->parts[i - 1].topic.len ||
            memcmp(o->parts[i].topic.ptr, o->parts[i - 1].topic.ptr,
                   (size_t)o->parts[i].topic.len) != 0)
            n++;
    return n;
}

/* Whether the principal may DESCRIBE the topic of parts[i], deciding once per run of a topic
 * (*last, *last_ok carry the previous part's). */
static bool offset_fetch_described(st_kreq_t *r, const st_goffset_t *p, const st_goffset_t **last,
                                   bool *last_ok)
{
    if (!*last || (*last)->topic.len != p->topic.len ||
        memcmp((*last)->topic.ptr, p->topic.ptr, (size_t)p->topic.len) != 0)
        *last_ok = st_kauthz_k(r, ST_ACL_OP_DESCRIBE, ST_ACL_RES_TOPIC, p->topic);
    *last = p;
    return *last_ok;
}

/* Kafka's rule for the topics of an answered group: offsets of a topic the principal may not
 * DESCRIBE are never shown. A listing of all the group's offsets leaves such topics out; asked
 * parts were marked TOPIC_AUTHORIZATION_FAILED before the coordinator saw them
 * (offset_fetch_route) and answer offset -1. */
static void offset_fetch_hide_undescribed(st_kreq_t *r, st_goffsets_t *o)
{
    if (o->error || !st_kauthz_on(r))
        return;
    if (!o->all) {
        for (int i = 0; i < o->n; i++)
            if (o->parts[i].error == ST_KERR_TOPIC_AUTHORIZATION_FAILED) {
                o->parts[i].offset = -1; /* the coordinator filled it in all the same */
                o->parts[i].leader_epoch = -1;
                o->parts[i].metadata = ST_KSTR_EMPTY;
            }
        return;
    }
    const st_goffset_t *last = NULL;
    bool ok = false;
    int k = 0;
    for (int i = 0; i < o->n; i++)
        if (offset_fetch_described(r, &o->parts[i], &last, &ok))
            o->parts[k++] = o->parts[i];
    o->n = k;
}

static void offset_fetch_finish(st_kgroup_ctx_t *ctx)
{
    offset_fetch_t *f = ctx->data;
    st_kreq_t *r = ctx->r;
    const st_md_t *md = r->shard->md;
    for (int gi = 0; gi < f->ngroups; gi++)
        offset_fetch_hide_undescribed(r, &f->groups[gi].o);
    if (r->api_version < 8) {
        st_goffsets_t *o = &f->groups[0].o;
        int nt = offset_fetch_count_topics(o);
        f->resp.error_code = o->error;
        f->resp.topics = st_arena_zalloc(&r->arena, (size_t)nt * sizeof *f->resp.topics + 1);
        if (!f->resp.topics) {
            st_kreq_fail(r, "out of memory");
            st_kgroup_calls_free(ctx->calls);
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
                    st_kgroup_calls_free(ctx->calls);
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
        ST_KGROUP_RESPOND(ctx, offset_fetch, &f->resp);
        return;
    }
    f->resp.groups = st_arena_zalloc(&r->arena, (size_t)f->ngroups * sizeof *f->resp.groups + 1);
    if (!f->resp.groups) {
        st_kreq_fail(r, "out of memory");
        st_kgroup_calls_free(ctx->calls);
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
        int nt = offset_fetch_count_topics(o);
        rg->topics = st_arena_zalloc(&r->arena, (size_t)nt * sizeof *rg->topics + 1);
        if (!rg->topics) {
            st_kreq_fail(r, "out of memory");
            st_kgroup_calls_free(ctx->calls);
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
                    st_kgroup_calls_free(ctx->calls);
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
    ST_KGROUP_RESPOND(ctx, offset_fetch, &f->resp);
}

/* Fills one group's asked parts (topics: NULL with count -1 means all). */
static int offset_fetch_group_init(st_kreq_t *r, offset_fetch_group_t *q, st_kstr_t group,
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

static void offset_fetch_route(st_kreq_t *r, void *arg)
{
    st_kgroup_ctx_t *ctx = arg;
    offset_fetch_t *f = ctx->data;
    for (int i = 0; i < f->ngroups; i++) {
        st_goffsets_t *o = &f->groups[i].o;
        /* With ACLs on: DESCRIBE on the group (Kafka's check); nothing of it is answered */
        if (!st_kauthz_k(r, ST_ACL_OP_DESCRIBE, ST_ACL_RES_GROUP, o->group_id)) {
            o->error = ST_KERR_GROUP_AUTHORIZATION_FAILED;
            o->n = 0;
            continue;
        }
        /* and DESCRIBE on each asked topic: TOPIC_AUTHORIZATION_FAILED for its partitions,
         * which the coordinator then leaves alone (offset -1) */
        const st_goffset_t *last = NULL;
        bool ok = false;
        for (int k = 0; k < o->n; k++)
            if (!o->parts[k].error && st_kauthz_on(r) &&
                !offset_fetch_described(r, &o->parts[k], &last, &ok))
                o->parts[k].error = ST_KERR_TOPIC_AUTHORIZATION_FAILED;
        st_kgroup_call_group(ctx, o->group_id, offset_fetch_exec, &f->groups[i]);
    }
    st_kgroup_ctx_end(ctx);
}

void st_kh_offset_fetch(st_kreq_t *r)
{
    offset_fetch_t *f = st_arena_zalloc(&r->arena, sizeof *f);
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
        rc = offset_fetch_group_init(r, &f->groups[0], f->req.group_id, NULL, f->req.topics, nt);
    } else {
        for (int i = 0; i < f->ngroups && !rc; i++) {
            st_kp_offset_fetch_req_group_t *g = &f->req.groups[i];
            int32_t nt = !g->topics && g->topics_count <= 0 ? -1 : g->topics_count;
            rc = offset_fetch_group_init(r, &f->groups[i], g->group_id, g->topics, NULL, nt);
            /* v9+: a consumer group's member gives its id and epoch (KIP-848) */
            f->groups[i].o.member_id = g->member_id;
            f->groups[i].o.generation = g->member_epoch;
            f->groups[i].o.check_member = r->api_version >= 9 && g->member_id.len >= 0;
        }
    }
    for (int i = 0; i < f->ngroups; i++)
        f->groups[i].o.require_stable = f->req.require_stable; /* v7+ */
    st_kgroup_ctx_t *ctx = rc ? NULL : st_kgroup_ctx_new(r, offset_fetch_finish, f);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_ensure_topic(r, offset_fetch_route, ctx);
}

/* ---- DescribeGroups, ListGroups, DeleteGroups ---- */

typedef struct {
    st_kp_describe_groups_req_t req;
    st_kp_describe_groups_resp_t resp;
} describe_t;

static void describe_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    st_kp_describe_groups_resp_group_t *out = g->item;
    st_gcoord_describe(st_kgroup_coord(s), g->partition, out->group_id, g->ctx->r->api_version,
                       &g->arena, out);
    st_kgroup_call_return(g);
}

static void describe_finish(st_kgroup_ctx_t *ctx)
{
    describe_t *d = ctx->data;
    /* v3+: the operations the principal may do on each group described (Kafka's
     * authorizedOperations, computed only for a group answered without an error) */
    for (int i = 0; ctx->r->api_version >= 3 && d->req.include_authorized_operations &&
                    i < d->resp.groups_count;
         i++) {
        st_kp_describe_groups_resp_group_t *g = &d->resp.groups[i];
        if (!g->error_code && g->group_id.len >= 0)
            g->authorized_operations =
                st_kauthz_ops(ctx->r, ST_ACL_RES_GROUP, g->group_id.ptr, (size_t)g->group_id.len);
    }
    ST_KGROUP_RESPOND(ctx, describe_groups, &d->resp);
}

static void describe_route(st_kreq_t *r, void *arg)
{
    st_kgroup_ctx_t *ctx = arg;
    describe_t *d = ctx->data;
    for (int i = 0; i < d->resp.groups_count; i++) {
        st_kp_describe_groups_resp_group_t *g = &d->resp.groups[i];
        /* With ACLs on: DESCRIBE on each group (Kafka's check) */
        if (!st_kauthz_k(r, ST_ACL_OP_DESCRIBE, ST_ACL_RES_GROUP, g->group_id)) {
            g->error_code = ST_KERR_GROUP_AUTHORIZATION_FAILED;
            g->authorized_operations = INT32_MIN;
            continue;
        }
        st_kgroup_call_group(ctx, g->group_id, describe_exec, g);
    }
    st_kgroup_ctx_end(ctx);
}

void st_kh_describe_groups(st_kreq_t *r)
{
    describe_t *d = st_arena_zalloc(&r->arena, sizeof *d);
    if (!d || st_kp_describe_groups_req_decode(&r->body, r->api_version, &d->req)) {
        st_kreq_fail(r, "malformed DescribeGroups request");
        return;
    }
    st_kp_describe_groups_resp_init(&d->resp);
    int rc = st_kp_describe_groups_skeleton(&r->arena, &d->req, &d->resp);
    st_kgroup_ctx_t *ctx = st_kgroup_ctx_new(r, describe_finish, d);
    if (rc || !ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_ensure_topic(r, describe_route, ctx);
}

typedef struct {
    st_kp_list_groups_req_t req;
    st_kp_list_groups_resp_t resp;
    struct st_list_part {
        st_kp_list_groups_resp_group_t *groups;
        int32_t n;
    } * parts;
} list_t;

/* This shard's groups, less those of partitions this broker no longer leads (their
 * coordinator is elsewhere now). */
static void list_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    list_t *l = g->ctx->data;
    struct st_list_part *p = g->item;
    const st_md_topic_t *t = st_kgroup_offsets_topic(s->md);
    if (st_kgroup_coord(s) && t) {
        st_gcoord_list(st_kgroup_coord(s), l->req.states_filter, l->req.states_filter_count,
                       l->req.types_filter, l->req.types_filter_count, &g->arena, &p->groups,
                       &p->n);
        int32_t k = 0;
        for (int32_t i = 0; i < p->n; i++)
            if (st_kgroup_leads(s, st_gcoord_partition_for(p->groups[i].group_id, t->npartitions)))
                p->groups[k++] = p->groups[i];
        p->n = k;
    }
    st_kgroup_call_return(g);
}

static void list_finish(st_kgroup_ctx_t *ctx)
{
    list_t *l = ctx->data;
    st_kreq_t *r = ctx->r;
    int nshards = r->shard->b->nshards;
    int32_t total = 0;
    for (int i = 0; i < nshards; i++)
        total += l->parts[i].n;
    l->resp.groups = st_arena_zalloc(&r->arena, (size_t)total * sizeof *l->resp.groups + 1);
    if (!l->resp.groups) {
        st_kreq_fail(r, "out of memory");
        st_kgroup_calls_free(ctx->calls);
        return;
    }
    /* With ACLs on: every group to a principal that may DESCRIBE the cluster, else those it
     * may DESCRIBE (Kafka's rule) */
    bool all = st_kauthz_on(r) ? st_kauthz_quiet(r, ST_ACL_OP_DESCRIBE, ST_ACL_RES_CLUSTER,
                                                 ST_ACL_CLUSTER_NAME, strlen(ST_ACL_CLUSTER_NAME))
                               : true;
    for (int i = 0; i < nshards; i++)
        for (int32_t k = 0; k < l->parts[i].n; k++) {
            st_kstr_t g = l->parts[i].groups[k].group_id;
            if (all || (g.len >= 0 && st_kauthz_quiet(r, ST_ACL_OP_DESCRIBE, ST_ACL_RES_GROUP,
                                                      g.ptr, (size_t)g.len)))
                l->resp.groups[l->resp.groups_count++] = l->parts[i].groups[k];
        }
    ST_KGROUP_RESPOND(ctx, list_groups, &l->resp);
}

void st_kh_list_groups(st_kreq_t *r)
{
    list_t *l = st_arena_zalloc(&r->arena, sizeof *l);
    if (!l || st_kp_list_groups_req_decode(&r->body, r->api_version, &l->req)) {
        st_kreq_fail(r, "malformed ListGroups request");
        return;
    }
    st_kp_list_groups_resp_init(&l->resp);
    int nshards = r->shard->b->nshards;
    l->parts = st_arena_zalloc(&r->arena, (size_t)nshards * sizeof *l->parts);
    st_kgroup_ctx_t *ctx = st_kgroup_ctx_new(r, list_finish, l);
    if (!l->parts || !ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int i = 0; i < nshards; i++)
        st_kgroup_call_to(ctx, i, -1, list_exec, &l->parts[i]);
    st_kgroup_ctx_end(ctx);
}

typedef struct {
    st_kp_delete_groups_req_t req;
    st_kp_delete_groups_resp_t resp;
} delete_groups_t;

static void delete_groups_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    st_kp_delete_groups_resp_result_t *res = g->item;
    st_gcoord_delete_group(st_kgroup_coord(s), g->partition, res->group_id, &res->error_code,
                           st_kgroup_call_return, g);
}

static void delete_groups_finish(st_kgroup_ctx_t *ctx)
{
    delete_groups_t *d = ctx->data;
    for (int i = 0; i < d->resp.results_count; i++)
        if (d->resp.results[i].error_code)
            ctx->r->error_code = d->resp.results[i].error_code;
    ST_KGROUP_RESPOND(ctx, delete_groups, &d->resp);
}

static void delete_groups_route(st_kreq_t *r, void *arg)
{
    st_kgroup_ctx_t *ctx = arg;
    delete_groups_t *d = ctx->data;
    for (int i = 0; i < d->resp.results_count; i++) {
        st_kstr_t g = d->resp.results[i].group_id;
        /* With ACLs on: DELETE on each group (Kafka's check) */
        if (!st_kauthz_k(r, ST_ACL_OP_DELETE, ST_ACL_RES_GROUP, g)) {
            d->resp.results[i].error_code = ST_KERR_GROUP_AUTHORIZATION_FAILED;
            continue;
        }
        st_kgroup_call_group(ctx, g, delete_groups_exec, &d->resp.results[i]);
    }
    st_kgroup_ctx_end(ctx);
}

void st_kh_delete_groups(st_kreq_t *r)
{
    delete_groups_t *d = st_arena_zalloc(&r->arena, sizeof *d);
    if (!d || st_kp_delete_groups_req_decode(&r->body, r->api_version, &d->req)) {
        st_kreq_fail(r, "malformed DeleteGroups request");
        return;
    }
    st_kp_delete_groups_resp_init(&d->resp);
    int rc = st_kp_delete_groups_skeleton(&r->arena, &d->req, &d->resp);
    st_kgroup_ctx_t *ctx = st_kgroup_ctx_new(r, delete_groups_finish, d);
    if (rc || !ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_ensure_topic(r, delete_groups_route, ctx);
}

/* ---- OffsetDelete ---- */

typedef struct {
    st_kp_offset_delete_req_t req;
    st_kp_offset_delete_resp_t resp;
    st_kp_offset_delete_item_t *q; /* the request's partitions (o.parts[k] is q[k]'s) */
    st_goffsets_t o;
} offset_delete_t;

static void offset_delete_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    offset_delete_t *d = g->item;
    st_gcoord_offset_delete(st_kgroup_coord(s), g->partition, &d->o, st_kgroup_call_return, g);
}

static void offset_delete_finish(st_kgroup_ctx_t *ctx)
{
    offset_delete_t *d = ctx->data;
    d->resp.error_code = d->o.error;
    ctx->r->error_code = d->o.error;
    for (int k = 0; k < d->o.n; k++)
        d->q[k].resp_partition->error_code = d->o.error ? 0 : d->o.parts[k].error;
    if (d->o.error)
        for (int t = 0; t < d->resp.topics_count; t++)
            d->resp.topics[t].partitions_count = 0;
    ST_KGROUP_RESPOND(ctx, offset_delete, &d->resp);
}

static void offset_delete_route(st_kreq_t *r, void *arg)
{
    st_kgroup_ctx_t *ctx = arg;
    offset_delete_t *d = ctx->data;
    const st_md_t *md = r->shard->md;
    const st_md_topic_t *mt = NULL;
    for (int k = 0; k < d->o.n; k++) {
        const st_kp_offset_delete_item_t *q = &d->q[k];
        if (k == 0 || q->topic_at != d->q[k - 1].topic_at)
            mt = st_md_find(md, q->name.ptr, q->name.len);
        st_goffset_t *p = &d->o.parts[k];
        if (!st_kauthz_k(r, ST_ACL_OP_READ, ST_ACL_RES_TOPIC, q->name))
            p->error = ST_KERR_TOPIC_AUTHORIZATION_FAILED; /* READ on the topic */
        else if (!mt || p->partition < 0 || p->partition >= mt->npartitions)
            p->error = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    }
    /* With ACLs on: DELETE on the group (Kafka's check), the whole request refused else */
    st_kstr_t g = d->req.group_id;
    if (!st_kauthz_k(r, ST_ACL_OP_DELETE, ST_ACL_RES_GROUP, g))
        d->o.error = ST_KERR_GROUP_AUTHORIZATION_FAILED;
    else
        st_kgroup_call_group(ctx, d->req.group_id, offset_delete_exec, d);
    st_kgroup_ctx_end(ctx);
}

void st_kh_offset_delete(st_kreq_t *r)
{
    offset_delete_t *d = st_arena_zalloc(&r->arena, sizeof *d);
    if (!d || st_kp_offset_delete_req_decode(&r->body, r->api_version, &d->req)) {
        st_kreq_fail(r, "malformed OffsetDelete request");
        return;
    }
    st_kp_offset_delete_resp_init(&d->resp);
    d->o.n = st_kp_offset_delete_mirror(&r->arena, &d->req, &d->resp, &d->q);
    d->o.parts =
        d->o.n < 0 ? NULL : st_arena_zalloc(&r->arena, (size_t)d->o.n * sizeof *d->o.parts + 1);
    st_kgroup_ctx_t *ctx = st_kgroup_ctx_new(r, offset_delete_finish, d);
    if (!d->o.parts || !ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    d->o.group_id = d->req.group_id;
    for (int k = 0; k < d->o.n; k++) {
        st_goffset_t *p = &d->o.parts[k];
        p->topic = d->q[k].name;
        p->partition = d->q[k].partition_index;
    }
    st_kgroup_ensure_topic(r, offset_delete_route, ctx);
}
