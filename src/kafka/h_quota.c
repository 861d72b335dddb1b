/*
 * h_quota.c — client quotas: DescribeClientQuotas (48) and AlterClientQuotas (49).
 *
 * Quotas live in the metadata (cluster/records.h: "quota" records), so every broker enforces
 * the same ones (kafka/throttle.h). AlterClientQuotas goes to the controller as one
 * ST_CTL_QUOTAS op (cluster/ops.h decides each entry as Kafka's ClientQuotaControlManager
 * does) and is answered once every shard here holds the change; DescribeClientQuotas reads
 * this shard's snapshot with Kafka's filter rules (ClientQuotasImage). Kafka's authorization:
 * DESCRIBE_CONFIGS on the cluster to describe, ALTER_CONFIGS to alter
 * (CLUSTER_AUTHORIZATION_FAILED otherwise).
 *
 * Entity types are Kafka's "user", "client-id" and "ip"; a null name is the default entity.
 * An ip entity stands alone (Kafka refuses it with a user or client id), names an IPv4 or IPv6
 * address (kept in inet_ntop's spelling) and takes connection_creation_rate only, which no
 * other entity takes (broker/connquota.h enforces it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/quota.h"
#include "kafka/authz.h"
#include "kafka/controller.h"
#include "kafka/handlers.h"
#include "proto/kerr.h"

#define T_USER   "user"
#define T_CLIENT "client-id"
#define T_IP     "ip"

static bool kstr_is(st_kstr_t s, const char *lit)
{
    return s.len >= 0 && (size_t)s.len == strlen(lit) && memcmp(s.ptr, lit, (size_t)s.len) == 0;
}

static st_kstr_t kstr_of(st_kreq_t *r, const char *s)
{
    return s ? st_kstr(st_arena_strndup(&r->arena, s, strlen(s))) : ST_KSTR_NULL;
}

/* ---- DescribeClientQuotas ---- */

/* A filter: per part, ST_QE_NONE (not filtered), ST_QE_NAME (exactly name), ST_QE_DEFAULT
 * (the default); `any` (MATCH_TYPE_SPECIFIED): the part present, whatever its name. */
typedef struct {
    bool used, any;
    int8_t kind;
    const char *name;
    size_t len;
} part_filter_t;

static bool part_matches(const part_filter_t *f, int8_t kind, const char *name)
{
    if (!f->used)
        return true;
    if (kind == ST_QE_NONE)
        return false;
    if (f->any)
        return true;
    if (f->kind != kind)
        return false;
    return kind != ST_QE_NAME || (strlen(name) == f->len && memcmp(name, f->name, f->len) == 0);
}

void st_kh_describe_client_quotas(st_kreq_t *r)
{
    st_kp_describe_client_quotas_req_t req;
    st_kp_describe_client_quotas_resp_t resp;
    st_kp_describe_client_quotas_resp_init(&resp);
    if (st_kp_describe_client_quotas_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed DescribeClientQuotas request");
        return;
    }
    const char *why = NULL;
    int16_t code = ST_KERR_INVALID_REQUEST;
    part_filter_t user = {0}, client = {0}, ipf = {0};
    int nused = 0;
    if (!st_kauthz_cluster(r, ST_ACL_OP_DESCRIBE_CONFIGS)) {
        code = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
        why = "Cluster authorization failed.";
    }
    for (int i = 0; !why && i < req.components_count; i++) {
        const st_kp_describe_client_quotas_req_component_t *c = &req.components[i];
        part_filter_t *f = kstr_is(c->entity_type, T_USER)     ? &user
                           : kstr_is(c->entity_type, T_CLIENT) ? &client
                           : kstr_is(c->entity_type, T_IP)     ? &ipf
                                                               : NULL;
        if (c->entity_type.len <= 0) {
            why = "Invalid empty entity type.";
        } else if (f && f->used) {
            why = "An entity type cannot appear more than once in the filter.";
        } else if (!f) {
            code = ST_KERR_UNSUPPORTED_VERSION; /* Kafka's answer to an unknown type */
            why = "Unsupported entity type";
        } else if (c->match_type == 0 && c->match.len < 0) {
            why = "Request specified MATCH_TYPE_EXACT, but set match string to null.";
        } else if (c->match_type == 1 && c->match.len >= 0) {
            why = "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.";
        } else if (c->match_type == 2 && c->match.len >= 0) {
            why = "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.";
        } else if (c->match_type < 0 || c->match_type > 2) {
            why = "Unknown match type";
        } else {
            f->used = true;
            f->any = c->match_type == 2;
            f->kind = c->match_type == 0 ? ST_QE_NAME : ST_QE_DEFAULT;
            f->name = c->match.ptr;
            f->len = c->match.len > 0 ? (size_t)c->match.len : 0;
        }
        nused++;
    }
    if (!why && ipf.used && (user.used || client.used))
        why = "Invalid entity filter component combination. IP filter component should not be "
              "used with user or clientId filter component.";
    if (why) {
        resp.error_code = code;
        resp.error_message = st_kstr(why);
        resp.entries_count = -1;
        r->error_code = code;
        ST_KREQ_RESPOND(r, describe_client_quotas, &resp);
        return;
    }
    const st_md_t *md = r->shard->md;
    resp.entries = st_arena_zalloc(&r->arena, ((size_t)md->nquotas + 1) * sizeof *resp.entries);
    if (!resp.entries) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int i = 0; i < md->nquotas; i++) {
        const st_quota_t *q = &md->quotas[i];
        int parts =
            (q->e.user != ST_QE_NONE) + (q->e.client != ST_QE_NONE) + (q->e.ip != ST_QE_NONE);
        if ((req.strict && parts != nused) || !part_matches(&user, q->e.user, q->e.user_name) ||
            !part_matches(&client, q->e.client, q->e.client_name) ||
            !part_matches(&ipf, q->e.ip, q->e.ip_name))
            continue;
        st_kp_describe_client_quotas_resp_entry_t *o = &resp.entries[resp.entries_count++];
        o->entity = st_arena_zalloc(&r->arena, 3 * sizeof *o->entity);
        o->values = st_arena_zalloc(&r->arena, ST_QUOTA_NKEYS * sizeof *o->values);
        if (!o->entity || !o->values) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        if (q->e.user != ST_QE_NONE)
            o->entity[o->entity_count++] = (st_kp_describe_client_quotas_resp_entity_t){
                st_kstr(T_USER),
                q->e.user == ST_QE_NAME ? kstr_of(r, q->e.user_name) : ST_KSTR_NULL};
        if (q->e.client != ST_QE_NONE)
            o->entity[o->entity_count++] = (st_kp_describe_client_quotas_resp_entity_t){
                st_kstr(T_CLIENT),
                q->e.client == ST_QE_NAME ? kstr_of(r, q->e.client_name) : ST_KSTR_NULL};
        if (q->e.ip != ST_QE_NONE)
            o->entity[o->entity_count++] = (st_kp_describe_client_quotas_resp_entity_t){
                st_kstr(T_IP), q->e.ip == ST_QE_NAME ? kstr_of(r, q->e.ip_name) : ST_KSTR_NULL};
        for (int k = 0; k < ST_QUOTA_NKEYS; k++)
            if (q->set & (1u << k))
                o->values[o->values_count++] = (st_kp_describe_client_quotas_resp_value_t){
                    st_kstr(st_quota_key_name(k)), q->values[k]};
    }
    ST_KREQ_RESPOND(r, describe_client_quotas, &resp);
}

/* ---- AlterClientQuotas ---- */

typedef struct {
    st_ctl_op_t op;
    st_kp_alter_client_quotas_resp_t resp;
} quota_op_t;

static void alter_done(st_kshard_t *s, st_ctl_op_t *op)
{
    quota_op_t *a = (quota_op_t *)op;
    st_kreq_t *r = op->arg;
    (void)s;
    for (int i = 0; i < op->n; i++) {
        st_ctl_item_t *it = &op->items[i];
        st_kp_alter_client_quotas_resp_entry_t *o = &a->resp.entries[i];
        if (o->error_code)
            continue; /* answered before the controller */
        o->error_code = it->error;
        o->error_message = it->error ? kstr_of(r, it->message) : ST_KSTR_NULL;
        if (it->error)
            r->error_code = it->error;
    }
    ST_KREQ_RESPOND(r, alter_client_quotas, &a->resp);
}

/* The entity of a request entry into e; NULL, or why it is refused (Kafka's checks). */
static const char *entity_of(const st_kp_alter_client_quotas_req_entry_t *q, st_quota_entity_t *e)
{
    memset(e, 0, sizeof *e);
    if (q->entity_count <= 0)
        return "Invalid empty client quota entity";
    for (int k = 0; k < q->entity_count; k++) {
        const st_kp_alter_client_quotas_req_entity_t *d = &q->entity[k];
        bool user = kstr_is(d->entity_type, T_USER), ip = kstr_is(d->entity_type, T_IP);
        if (!user && !ip && !kstr_is(d->entity_type, T_CLIENT))
            return "Unhandled client quota entity type";
        int8_t *kind = user ? &e->user : ip ? &e->ip : &e->client;
        char *name = user ? e->user_name : e->client_name;
        if (*kind != ST_QE_NONE)
            return "Invalid client quota entity, duplicate entity entry";
        if (d->entity_name.len == 0)
            return user ? "Empty user not supported"
                   : ip ? "Empty ip not supported"
                        : "Empty client-id not supported";
        if (d->entity_name.len < 0) {
            *kind = ST_QE_DEFAULT;
            continue;
        }
        if (ip) {
            if (st_quota_ip_normalize(d->entity_name.ptr, (size_t)d->entity_name.len, e->ip_name))
                return "The ip entity is not a valid IP address";
            *kind = ST_QE_NAME;
            continue;
        }
        if (d->entity_name.len >= ST_QUOTA_NAME_MAX ||
            memchr(d->entity_name.ptr, 0, (size_t)d->entity_name.len))
            return "The entity name is longer than 255 bytes or holds a NUL byte";
        memcpy(name, d->entity_name.ptr, (size_t)d->entity_name.len);
        name[d->entity_name.len] = 0;
        *kind = ST_QE_NAME;
    }
    if (e->ip != ST_QE_NONE && (e->user != ST_QE_NONE || e->client != ST_QE_NONE))
        return "Invalid quota entity combination, IP entity should not be combined with User or "
               "ClientId";
    return NULL;
}

void st_kh_alter_client_quotas(st_kreq_t *r)
{
    st_kp_alter_client_quotas_req_t *req = st_arena_zalloc(&r->arena, sizeof *req);
    quota_op_t *a = st_arena_zalloc(&r->arena, sizeof *a);
    if (!req || !a || st_kp_alter_client_quotas_req_decode(&r->body, r->api_version, req)) {
        st_kreq_fail(r, "malformed AlterClientQuotas request");
        return;
    }
    int n = req->entries_count > 0 ? req->entries_count : 0;
    a->op.items = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->op.items + 1);
    a->resp.entries = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->resp.entries + 1);
    if (!a->op.items || !a->resp.entries) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    a->op.kind = ST_CTL_QUOTAS;
    a->op.n = n;
    a->op.arg = r;
    a->op.cb = alter_done;
    a->op.validate_only = req->validate_only;
    a->resp.entries_count = n;
    bool allowed = st_kauthz_cluster(r, ST_ACL_OP_ALTER_CONFIGS);
    int refused = 0;
    for (int i = 0; i < n; i++) {
        const st_kp_alter_client_quotas_req_entry_t *q = &req->entries[i];
        st_kp_alter_client_quotas_resp_entry_t *o = &a->resp.entries[i];
        st_ctl_item_t *it = &a->op.items[i];
        /* the answer names the entity as the request did */
        o->entity = st_arena_zalloc(
            &r->arena, (size_t)(q->entity_count > 0 ? q->entity_count : 0) * sizeof *o->entity + 1);
        st_ctl_quota_op_t *ops = st_arena_zalloc(
            &r->arena, (size_t)(q->ops_count > 0 ? q->ops_count : 0) * sizeof *ops + 1);
        if (!o->entity || !ops) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        for (int k = 0; k < q->entity_count; k++)
            o->entity[k] = (st_kp_alter_client_quotas_resp_entity_t){q->entity[k].entity_type,
                                                                     q->entity[k].entity_name};
        o->entity_count = q->entity_count > 0 ? q->entity_count : 0;
        const char *why = allowed ? entity_of(q, &it->qentity) : NULL;
        for (int k = 0; allowed && !why && k < q->ops_count; k++) {
            const st_kp_alter_client_quotas_req_op_t *d = &q->ops[k];
            if (d->key.len < 0 || memchr(d->key.ptr, 0, (size_t)d->key.len)) {
                why = "A quota key is null or holds a NUL byte";
                break;
            }
            ops[k] = (st_ctl_quota_op_t){
                st_arena_strndup(&r->arena, d->key.ptr, (size_t)d->key.len), d->value, d->remove};
            if (!ops[k].key) {
                st_kreq_fail(r, "out of memory");
                return;
            }
            /* each entity type has its keys (Kafka's configKeysForEntityType) */
            int key = st_quota_key(ops[k].key);
            if (!d->remove && key >= 0 && !st_quota_key_allowed(&it->qentity, key)) {
                char *m = st_arena_alloc(&r->arena, 32 + strlen(ops[k].key));
                if (m)
                    sprintf(m, "Invalid configuration key %s", ops[k].key);
                why = m ? m : "Invalid configuration key";
                break;
            }
        }
        it->qops = ops;
        it->nqops = q->ops_count > 0 ? q->ops_count : 0;
        if (!allowed) {
            o->error_code = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
            o->error_message = st_kstr("Cluster authorization failed.");
        } else if (why) {
            o->error_code = ST_KERR_INVALID_REQUEST;
            o->error_message = st_kstr(why);
        }
        if (o->error_code) {
            /* the controller skips it: an empty entity changes nothing */
            memset(&it->qentity, 0, sizeof it->qentity);
            it->nqops = 0;
            r->error_code = o->error_code;
            refused++;
        }
    }
    if (refused == n)
        a->op.cb(r->shard, &a->op);
    else
        st_ctl_submit(r->shard, &a->op);
}
