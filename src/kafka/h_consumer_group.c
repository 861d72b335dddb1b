/*
 * h_consumer_group.c — KIP-848's consumer group APIs: ConsumerGroupHeartbeat (68) and
 * ConsumerGroupDescribe (69). Routed to the group's coordinator exactly as the classic group
 * APIs (group_route.h); the protocol itself is group/consumer.c's.
 *
 * Threads: handlers on the connection's shard; *_exec on the coordinator's shard.
 */
#include <string.h>

#include "group/coord.h"
#include "kafka/authz.h"
#include "kafka/group_route.h"
#include "kafka/handlers.h"
#include "proto/kerr.h"

/* ---- ConsumerGroupHeartbeat ---- */

typedef struct {
    st_kp_consumer_group_heartbeat_req_t req;
    st_kp_consumer_group_heartbeat_resp_t resp;
    st_kstr_t client_id, client_host;
    int16_t version;
} cg_heartbeat_t;

static void cg_heartbeat_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    cg_heartbeat_t *h = g->item;
    st_gcoord_consumer_heartbeat(st_kgroup_coord(s), g->partition, &h->req, h->version,
                                 h->client_id, h->client_host, &g->arena, &h->resp,
                                 st_kgroup_call_return, g);
}

static void cg_heartbeat_finish(st_kgroup_ctx_t *ctx)
{
    cg_heartbeat_t *h = ctx->data;
    ctx->r->error_code = h->resp.error_code;
    ST_KGROUP_RESPOND(ctx, consumer_group_heartbeat, &h->resp);
}

static void cg_heartbeat_route(st_kreq_t *r, void *arg)
{
    (void)r;
    st_kgroup_ctx_t *ctx = arg;
    cg_heartbeat_t *h = ctx->data;
    st_kgroup_call_group(ctx, h->req.group_id, cg_heartbeat_exec, h);
    st_kgroup_ctx_end(ctx);
}

void st_kh_consumer_group_heartbeat(st_kreq_t *r)
{
    cg_heartbeat_t *h = st_arena_zalloc(&r->arena, sizeof *h);
    if (!h || st_kp_consumer_group_heartbeat_req_decode(&r->body, r->api_version, &h->req)) {
        st_kreq_fail(r, "malformed ConsumerGroupHeartbeat request");
        return;
    }
    st_kp_consumer_group_heartbeat_resp_init(&h->resp);
    h->version = r->api_version;
    h->client_id = r->hdr.client_id.len >= 0 ? r->hdr.client_id : ST_KSTR_EMPTY;
    h->client_host = st_kgroup_client_host(r);
    /* READ on the group (Kafka's check); topics are not checked per heartbeat */
    if (st_kauthz_on(r) &&
        (h->req.group_id.len < 0 || !st_kauthz(r, ST_ACL_OP_READ, ST_ACL_RES_GROUP,
                                               h->req.group_id.ptr, (size_t)h->req.group_id.len))) {
        h->resp.error_code = r->error_code = ST_KERR_GROUP_AUTHORIZATION_FAILED;
        ST_KREQ_RESPOND(r, consumer_group_heartbeat, &h->resp);
        return;
    }
    st_kgroup_ctx_t *ctx = st_kgroup_ctx_new(r, cg_heartbeat_finish, h);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_ensure_topic(r, cg_heartbeat_route, ctx);
}

/* ---- ConsumerGroupDescribe ---- */

typedef struct {
    st_kp_consumer_group_describe_req_t req;
    st_kp_consumer_group_describe_resp_t resp;
} cg_describe_t;

static void cg_describe_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    st_kp_consumer_group_describe_resp_group_t *out = g->item;
    st_gcoord_consumer_describe(st_kgroup_coord(s), g->partition, g->ctx->r->api_version, &g->arena,
                                out);
    st_kgroup_call_return(g);
}

static void cg_describe_finish(st_kgroup_ctx_t *ctx)
{
    cg_describe_t *d = ctx->data;
    for (int i = 0; d->req.include_authorized_operations && i < d->resp.groups_count; i++) {
        st_kp_consumer_group_describe_resp_group_t *g = &d->resp.groups[i];
        if (!g->error_code && g->group_id.len >= 0)
            g->authorized_operations =
                st_kauthz_ops(ctx->r, ST_ACL_RES_GROUP, g->group_id.ptr, (size_t)g->group_id.len);
    }
    ST_KGROUP_RESPOND(ctx, consumer_group_describe, &d->resp);
}

static void cg_describe_route(st_kreq_t *r, void *arg)
{
    st_kgroup_ctx_t *ctx = arg;
    cg_describe_t *d = ctx->data;
    for (int i = 0; i < d->resp.groups_count; i++) {
        st_kp_consumer_group_describe_resp_group_t *g = &d->resp.groups[i];
        g->group_state = ST_KSTR_EMPTY;
        g->assignor_name = ST_KSTR_EMPTY;
        /* With ACLs on: DESCRIBE on each group (Kafka's check) */
        if (!st_kauthz_k(r, ST_ACL_OP_DESCRIBE, ST_ACL_RES_GROUP, g->group_id)) {
            g->error_code = ST_KERR_GROUP_AUTHORIZATION_FAILED;
            continue;
        }
        st_kgroup_call_group(ctx, g->group_id, cg_describe_exec, g);
    }
    st_kgroup_ctx_end(ctx);
}

void st_kh_consumer_group_describe(st_kreq_t *r)
{
    cg_describe_t *d = st_arena_zalloc(&r->arena, sizeof *d);
    if (!d || st_kp_consumer_group_describe_req_decode(&r->body, r->api_version, &d->req)) {
        st_kreq_fail(r, "malformed ConsumerGroupDescribe request");
        return;
    }
    st_kp_consumer_group_describe_resp_init(&d->resp);
    int rc = st_kp_consumer_group_describe_skeleton(&r->arena, &d->req, &d->resp);
    st_kgroup_ctx_t *ctx = rc ? NULL : st_kgroup_ctx_new(r, cg_describe_finish, d);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_kgroup_ensure_topic(r, cg_describe_route, ctx);
}
