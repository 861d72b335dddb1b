/*
 * h_acl.c — the authorizer's ACLs: DescribeAcls (29), CreateAcls (30), DeleteAcls (31).
 *
 * ACLs live in the metadata (cluster/records.h: "acl" and "remove_acl" records), so every
 * broker decides from the same list. CreateAcls and DeleteAcls go to the controller as one
 * operation (controller.h, ST_CTL_CREATE_ACLS / ST_CTL_DELETE_ACLS) and are answered once every
 * shard here holds the change; DescribeAcls reads this shard's snapshot. Each of the three asks
 * the authorizer first, as Kafka does: DESCRIBE on the cluster to describe, ALTER on it to
 * change (CLUSTER_AUTHORIZATION_FAILED otherwise).
 *
 * Strings reach auth/acl.c as C strings: one holding a NUL byte is refused here
 * (INVALID_REQUEST), as it would otherwise stand for another, shorter name.
 */
#include <stdlib.h>
#include <string.h>

#include "auth/acl.h"
#include "kafka/authz.h"
#include "kafka/controller.h"
#include "kafka/handlers.h"
#include "proto/kerr.h"

typedef struct {
    st_ctl_op_t op;
    void *resp;
} acl_op_t;

static st_kstr_t kstr_of(st_kreq_t *r, const char *s)
{
    return s ? st_kstr(st_arena_strndup(&r->arena, s, strlen(s))) : ST_KSTR_NULL;
}

/* A filter of the wire (DescribeAcls, DeleteAcls); false when a string holds a NUL byte. */
static bool filter_of(st_kreq_t *r, st_acl_t *f, int8_t res, st_kstr_t name, int8_t pat,
                      st_kstr_t principal, st_kstr_t host, int8_t op, int8_t perm)
{
    *f = (st_acl_t){.resource_type = res, .pattern_type = pat, .operation = op, .permission = perm};
    return st_kreq_cstr(r, name, (const char **)&f->name) &&
           st_kreq_cstr(r, principal, (const char **)&f->principal) &&
           st_kreq_cstr(r, host, (const char **)&f->host);
}

static bool filter_unknown(const st_acl_t *f)
{
    return f->resource_type == ST_ACL_RES_UNKNOWN || f->pattern_type == ST_ACL_PAT_UNKNOWN ||
           f->operation == ST_ACL_OP_UNKNOWN || f->permission == ST_ACL_PERM_UNKNOWN;
}

/* ---- DescribeAcls ---- */

void st_kh_describe_acls(st_kreq_t *r)
{
    st_kp_describe_acls_req_t req;
    st_kp_describe_acls_resp_t resp;
    st_kp_describe_acls_resp_init(&resp);
    if (st_kp_describe_acls_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed DescribeAcls request");
        return;
    }
    st_acl_t f;
    const st_acl_set_t *acls = &r->shard->md->acls;
    if (!st_kauthz_cluster(r, ST_ACL_OP_DESCRIBE)) {
        resp.error_code = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
        resp.error_message = st_kstr("Cluster authorization failed.");
    } else if (!filter_of(r, &f, req.resource_type_filter, req.resource_name_filter,
                          req.pattern_type_filter, req.principal_filter, req.host_filter,
                          req.operation, req.permission_type) ||
               filter_unknown(&f)) {
        resp.error_code = ST_KERR_INVALID_REQUEST;
        resp.error_message = st_kstr("The filter holds an UNKNOWN type or a NUL byte");
    } else {
        /* One resource entry per (type, name, pattern type), in the order first seen. */
        size_t n = 0;
        resp.resources = st_arena_zalloc(&r->arena, (acls->n + 1) * sizeof *resp.resources);
        int *counts = st_arena_zalloc(&r->arena, (acls->n + 1) * sizeof *counts);
        int *res_of = st_arena_zalloc(&r->arena, (acls->n + 1) * sizeof *res_of);
        if (!resp.resources || !counts || !res_of) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        for (size_t i = 0; i < acls->n; i++) {
            const st_acl_t *a = &acls->v[i];
            res_of[i] = -1;
            if (!st_acl_filter_matches(&f, a))
                continue;
            size_t k = 0;
            for (; k < n; k++) {
                const st_acl_t *b = &acls->v[resp.resources[k].acls_count];
                if (b->resource_type == a->resource_type && b->pattern_type == a->pattern_type &&
                    strcmp(b->name, a->name) == 0)
                    break;
            }
            if (k == n) {
                /* acls_count holds the first ACL's index until the entries are filled */
                resp.resources[n].acls_count = (int32_t)i;
                n++;
            }
            res_of[i] = (int)k;
            counts[k]++;
        }
        for (size_t k = 0; k < n; k++) {
            st_kp_describe_acls_resp_resource_t *o = &resp.resources[k];
            const st_acl_t *first = &acls->v[o->acls_count];
            o->resource_type = first->resource_type;
            o->resource_name = kstr_of(r, first->name);
            o->pattern_type = first->pattern_type;
            o->acls = st_arena_zalloc(&r->arena, (size_t)counts[k] * sizeof *o->acls + 1);
            o->acls_count = 0;
            if (!o->acls) {
                st_kreq_fail(r, "out of memory");
                return;
            }
        }
        for (size_t i = 0; i < acls->n; i++) {
            if (res_of[i] < 0)
                continue;
            st_kp_describe_acls_resp_resource_t *o = &resp.resources[res_of[i]];
            st_kp_describe_acls_resp_acl_t *d = &o->acls[o->acls_count++];
            const st_acl_t *a = &acls->v[i];
            d->principal = kstr_of(r, a->principal);
            d->host = kstr_of(r, a->host);
            d->operation = a->operation;
            d->permission_type = a->permission;
        }
        resp.resources_count = (int32_t)n;
    }
    r->error_code = resp.error_code;
    ST_KREQ_RESPOND(r, describe_acls, &resp);
}

/* ---- CreateAcls ---- */

static void create_acls_done(st_kshard_t *s, st_ctl_op_t *op)
{
    acl_op_t *a = (acl_op_t *)op;
    st_kreq_t *r = op->arg;
    st_kp_create_acls_resp_t *resp = a->resp;
    (void)s;
    for (int i = 0; i < op->n; i++) {
        st_ctl_item_t *it = &op->items[i];
        st_kp_create_acls_resp_result_t *o = &resp->results[i];
        if (o->error_code)
            continue; /* answered before the controller */
        o->error_code = it->error;
        o->error_message = it->error ? kstr_of(r, it->message) : ST_KSTR_NULL;
        if (it->error)
            r->error_code = it->error;
    }
    ST_KREQ_RESPOND(r, create_acls, resp);
}

/* The op of a request with n entries (items in the request's arena). */
static acl_op_t *acl_op_new(st_kreq_t *r, int kind, int n)
{
    acl_op_t *a = st_arena_zalloc(&r->arena, sizeof *a);
    if (!a)
        return NULL;
    a->op.items = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->op.items + 1);
    if (!a->op.items)
        return NULL;
    a->op.kind = kind;
    a->op.n = n;
    a->op.arg = r;
    return a;
}

/* Every entry already answered (refused, or none): the op is answered without the
 * controller; else it goes there with the refused entries' items failed alike. */
static void acl_submit(st_kreq_t *r, acl_op_t *a, int refused)
{
    if (refused == a->op.n)
        a->op.cb(r->shard, &a->op);
    else
        st_ctl_submit(r->shard, &a->op);
}

void st_kh_create_acls(st_kreq_t *r)
{
    st_kp_create_acls_req_t *req = st_arena_zalloc(&r->arena, sizeof *req);
    st_kp_create_acls_resp_t *resp = st_arena_zalloc(&r->arena, sizeof *resp);
    if (!req || !resp || st_kp_create_acls_req_decode(&r->body, r->api_version, req)) {
        st_kreq_fail(r, "malformed CreateAcls request");
        return;
    }
    int n = req->creations_count > 0 ? req->creations_count : 0;
    acl_op_t *a = acl_op_new(r, ST_CTL_CREATE_ACLS, n);
    resp->results = st_arena_zalloc(&r->arena, (size_t)n * sizeof *resp->results + 1);
    if (!a || !resp->results) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    resp->results_count = n;
    a->resp = resp;
    a->op.cb = create_acls_done;
    bool allowed = st_kauthz_cluster(r, ST_ACL_OP_ALTER);
    int refused = 0;
    for (int i = 0; i < n; i++) {
        const st_kp_create_acls_req_creation_t *c = &req->creations[i];
        st_kp_create_acls_resp_result_t *o = &resp->results[i];
        st_ctl_item_t *it = &a->op.items[i];
        it->acl = (st_acl_t){.resource_type = c->resource_type,
                             .pattern_type = c->resource_pattern_type,
                             .operation = c->operation,
                             .permission = c->permission_type};
        if (!allowed) {
            o->error_code = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
            o->error_message = st_kstr("Cluster authorization failed.");
        } else if (!st_kreq_cstr(r, c->resource_name, (const char **)&it->acl.name) ||
                   !st_kreq_cstr(r, c->principal, (const char **)&it->acl.principal) ||
                   !st_kreq_cstr(r, c->host, (const char **)&it->acl.host)) {
            o->error_code = ST_KERR_INVALID_REQUEST;
            o->error_message = st_kstr("A string of the ACL holds a NUL byte");
        } else {
            const char *why = st_acl_invalid(&it->acl);
            if (why) {
                o->error_code = ST_KERR_INVALID_REQUEST;
                o->error_message = st_kstr(why);
            }
        }
        if (o->error_code) {
            /* the controller skips it: an invalid ACL (it checks again) */
            it->acl.resource_type = ST_ACL_RES_UNKNOWN;
            r->error_code = o->error_code;
            refused++;
        }
    }
    acl_submit(r, a, refused);
}

/* ---- DeleteAcls ---- */

static void delete_acls_done(st_kshard_t *s, st_ctl_op_t *op)
{
    acl_op_t *a = (acl_op_t *)op;
    st_kreq_t *r = op->arg;
    st_kp_delete_acls_resp_t *resp = a->resp;
    (void)s;
    for (int i = 0; i < op->n; i++) {
        st_ctl_item_t *it = &op->items[i];
        st_kp_delete_acls_resp_filter_result_t *o = &resp->filter_results[i];
        if (!o->error_code && it->error) {
            o->error_code = it->error;
            o->error_message = kstr_of(r, it->message);
        }
        if (!o->error_code && it->removed.n > 0) {
            o->matching_acls = st_arena_zalloc(&r->arena, it->removed.n * sizeof *o->matching_acls);
            for (size_t k = 0; o->matching_acls && k < it->removed.n; k++) {
                const st_acl_t *m = &it->removed.v[k];
                st_kp_delete_acls_resp_matching_acl_t *d = &o->matching_acls[k];
                st_kp_delete_acls_resp_matching_acl_init(d);
                d->resource_type = m->resource_type;
                d->resource_name = kstr_of(r, m->name);
                d->pattern_type = m->pattern_type;
                d->principal = kstr_of(r, m->principal);
                d->host = kstr_of(r, m->host);
                d->operation = m->operation;
                d->permission_type = m->permission;
            }
            o->matching_acls_count = o->matching_acls ? (int32_t)it->removed.n : 0;
        }
        if (o->error_code)
            r->error_code = o->error_code;
        st_acl_set_fini(&it->removed);
    }
    ST_KREQ_RESPOND(r, delete_acls, resp);
}

void st_kh_delete_acls(st_kreq_t *r)
{
    st_kp_delete_acls_req_t *req = st_arena_zalloc(&r->arena, sizeof *req);
    st_kp_delete_acls_resp_t *resp = st_arena_zalloc(&r->arena, sizeof *resp);
    if (!req || !resp || st_kp_delete_acls_req_decode(&r->body, r->api_version, req)) {
        st_kreq_fail(r, "malformed DeleteAcls request");
        return;
    }
    int n = req->filters_count > 0 ? req->filters_count : 0;
    acl_op_t *a = acl_op_new(r, ST_CTL_DELETE_ACLS, n);
    resp->filter_results = st_arena_zalloc(&r->arena, (size_t)n * sizeof *resp->filter_results + 1);
    if (!a || !resp->filter_results) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    resp->filter_results_count = n;
    a->resp = resp;
    a->op.cb = delete_acls_done;
    bool allowed = st_kauthz_cluster(r, ST_ACL_OP_ALTER);
    int refused = 0;
    for (int i = 0; i < n; i++) {
        const st_kp_delete_acls_req_filter_t *q = &req->filters[i];
        st_kp_delete_acls_resp_filter_result_t *o = &resp->filter_results[i];
        st_kp_delete_acls_resp_filter_result_init(o);
        st_ctl_item_t *it = &a->op.items[i];
        if (!allowed) {
            o->error_code = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
            o->error_message = st_kstr("Cluster authorization failed.");
        } else if (!filter_of(r, &it->acl, q->resource_type_filter, q->resource_name_filter,
                              q->pattern_type_filter, q->principal_filter, q->host_filter,
                              q->operation, q->permission_type)) {
            o->error_code = ST_KERR_INVALID_REQUEST;
            o->error_message = st_kstr("A string of the filter holds a NUL byte");
        }
        if (o->error_code) {
            /* the controller skips it: an UNKNOWN filter matches nothing and removes nothing */
            it->acl = (st_acl_t){0};
            refused++;
        }
    }
    acl_submit(r, a, refused);
}
