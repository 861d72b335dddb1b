/*
 * forward.c — the forwarding of metadata changes to the active controller (forward.h).
 */
#include "kafka/forward.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "broker/runtime.h"
#include "kafka/authz.h"
#include "kafka/handlers.h"
#include "kafka/txn_route.h"
#include "proto/kheader.h"
#include "replica/client.h"

#define FORWARDED_CLIENT_ID "strata-broker-" /* the inter-broker client's (txn_send.c) */

typedef struct fwd {
    st_client_req_t req;
    st_ext_call_t call;
    st_broker_t *b;
    int shard;
    st_kreq_t *r;
    int err;
    uint8_t *answer; /* the answer frame (correlation id first), malloc'd */
    size_t len;
} fwd_t;

/* ALTER_CONFIGS on one config resource, decided as h_admin.c's AlterConfigs does: the topic,
 * the group, or the cluster for a broker, a broker logger and client metrics. */
static bool config_allowed(st_kreq_t *r, int8_t type, st_kstr_t name)
{
    if (type == 2)
        return name.len >= 0 && st_kauthz_quiet(r, ST_ACL_OP_ALTER_CONFIGS, ST_ACL_RES_TOPIC,
                                                name.ptr, (size_t)name.len);
    if (type == 32)
        return name.len >= 0 && st_kauthz_quiet(r, ST_ACL_OP_ALTER_CONFIGS, ST_ACL_RES_GROUP,
                                                name.ptr, (size_t)name.len);
    return st_kauthz_quiet(r, ST_ACL_OP_ALTER_CONFIGS, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME,
                           strlen(ST_ACL_CLUSTER_NAME));
}

/* Whether the API is forwarded and the principal passes every check the controller's handler
 * would make, decided here on a copy of the body (r's stays unread). */
static bool forwardable(st_kreq_t *r)
{
    int cluster_op = -1;
    switch (r->api_key) {
    case ST_KP_API_CREATE_ACLS:
    case ST_KP_API_DELETE_ACLS:
    case ST_KP_API_ALTER_USER_SCRAM_CREDENTIALS:
    case ST_KP_API_ELECT_LEADERS:
    case ST_KP_API_ALTER_PARTITION_REASSIGNMENTS:
        cluster_op = ST_ACL_OP_ALTER;
        break;
    case ST_KP_API_ALTER_CLIENT_QUOTAS:
        cluster_op = ST_ACL_OP_ALTER_CONFIGS;
        break;
    case ST_KP_API_ALTER_CONFIGS: {
        st_kreader_t rd = r->body;
        st_kp_alter_configs_req_t req;
        if (st_kp_alter_configs_req_decode(&rd, r->api_version, &req))
            return false;
        for (int32_t i = 0; i < req.resources_count; i++)
            if (!config_allowed(r, req.resources[i].resource_type, req.resources[i].resource_name))
                return false;
        return true;
    }
    case ST_KP_API_INCREMENTAL_ALTER_CONFIGS: {
        st_kreader_t rd = r->body;
        st_kp_incremental_alter_configs_req_t req;
        if (st_kp_incremental_alter_configs_req_decode(&rd, r->api_version, &req))
            return false;
        for (int32_t i = 0; i < req.resources_count; i++)
            if (!config_allowed(r, req.resources[i].resource_type, req.resources[i].resource_name))
                return false;
        return true;
    }
    default:
        return false;
    }
    return st_kauthz_quiet(r, cluster_op, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME,
                           strlen(ST_ACL_CLUSTER_NAME));
}

/* Client thread: the controller's answer (or the end of the one try), to the shard. */
static int fwd_done(st_client_req_t *req, int err, const uint8_t *frame, size_t len)
{
    fwd_t *f = req->arg;
    f->err = err;
    if (!err && (f->answer = malloc(len + 1)) != NULL) {
        memcpy(f->answer, frame, len);
        f->len = len;
    }
    st_broker_post(f->b, f->shard, &f->call);
    return ST_CLIENT_DONE;
}

/* The answer's body: after the correlation id and, in a flexible header, its tagged fields. */
static const uint8_t *answer_body(const fwd_t *f, int16_t api_key, int16_t version, size_t *len)
{
    st_kreader_t rd;
    st_kreader_init(&rd, f->answer, f->len, NULL);
    int32_t corr;
    if (st_kreader_i32(&rd, &corr))
        return NULL;
    if (st_kp_resp_header_version(api_key, version) >= 1) {
        uint32_t n, tag, size;
        if (st_kreader_uvarint(&rd, &n))
            return NULL;
        for (uint32_t i = 0; i < n; i++) {
            if (st_kreader_uvarint(&rd, &tag) || st_kreader_uvarint(&rd, &size) ||
                size > st_kreader_left(&rd))
                return NULL;
            rd.p += size;
        }
    }
    *len = st_kreader_left(&rd);
    return rd.p;
}

/* The request's shard: relays the answer, or lets the handler answer here. */
static void fwd_run(st_kshard_t *s, st_ext_call_t *c)
{
    (void)s;
    fwd_t *f = (fwd_t *)((char *)c - offsetof(fwd_t, call));
    st_kreq_t *r = f->r;
    size_t len = 0;
    const uint8_t *body = f->answer ? answer_body(f, r->api_key, r->api_version, &len) : NULL;
    if (!body) {
        ST_INFO("forwarding api key %d to the controller failed (%s): answered here",
                (int)r->api_key, f->err ? st_strerror(f->err) : "no answer");
        st_khandler_find(r->api_key)->fn(r);
    } else {
        st_kwriter_t w;
        st_out_t *o = st_kreq_begin(r, &w);
        int rc = o ? st_buf_append(w.buf, body, len) : -12;
        st_kreq_finish(r, o, rc);
    }
    free(f->answer);
    free(f);
}

bool st_kforward(st_kreq_t *r)
{
    switch (r->api_key) { /* the common case first: a request that is never forwarded */
    case ST_KP_API_CREATE_ACLS:
    case ST_KP_API_DELETE_ACLS:
    case ST_KP_API_ALTER_USER_SCRAM_CREDENTIALS:
    case ST_KP_API_ALTER_CLIENT_QUOTAS:
    case ST_KP_API_ALTER_CONFIGS:
    case ST_KP_API_INCREMENTAL_ALTER_CONFIGS:
    case ST_KP_API_ELECT_LEADERS:
    case ST_KP_API_ALTER_PARTITION_REASSIGNMENTS:
        break;
    default:
        return false;
    }
    const st_md_t *md = r->shard->md;
    st_broker_t *b = r->shard->b;
    if (!md || md->controller_id < 0 || md->controller_id == b->cfg->node_id)
        return false;
    st_kstr_t cid = r->hdr.client_id;
    size_t plen = strlen(FORWARDED_CLIENT_ID);
    if (cid.len >= (int32_t)plen && memcmp(cid.ptr, FORWARDED_CLIENT_ID, plen) == 0)
        return false; /* forwarded to us, who are no longer the controller: NOT_CONTROLLER */
    if (!forwardable(r))
        return false; /* the handler answers (a refusal: with the authorizer's log line) */
    fwd_t *f = calloc(1, sizeof *f);
    if (!f)
        return false;
    f->b = b;
    f->shard = r->shard->id;
    f->r = r;
    f->call.fn = fwd_run;
    f->req = (st_client_req_t){.broker = md->controller_id,
                               .api_key = r->api_key,
                               .api_version = r->api_version,
                               .body = r->body.p, /* the request's frame, alive until answered */
                               .len = st_kreader_left(&r->body),
                               .max_tries = 1, /* a change is not sent twice */
                               .done = fwd_done,
                               .arg = f};
    if (!st_ktxn_client_send(b, &f->req)) {
        free(f);
        return false;
    }
    return true;
}
