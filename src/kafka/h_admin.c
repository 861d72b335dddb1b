/*
 * h_admin.c — topic administration and configs: CreateTopics (19), DeleteTopics (20),
 * CreatePartitions (37), DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44),
 * DescribeCluster (60).
 *
 * Changes go to the controller (controller.h) as one operation per request; the answer
 * leaves once every shard applied it. Descriptions read this shard's snapshot.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/broker.h"
#include "kafka/controller.h"
#include "kafka/topic_config.h"
#include "proto/kerr.h"

#define ST_RES_TOPIC  2
#define ST_RES_BROKER 4

/* ConfigSource values of DescribeConfigs. */
#define ST_SRC_TOPIC         1
#define ST_SRC_STATIC_BROKER 4
#define ST_SRC_DEFAULT       5

typedef struct {
    st_ctl_op_t op;
    void *req;
    void *resp;
} st_admin_t;

static char *st_cstr(st_kreq_t *r, st_kstr_t s)
{
    return s.len < 0 ? NULL : st_arena_strndup(&r->arena, s.ptr, (size_t)s.len);
}

static st_admin_t *st_admin_new(st_kreq_t *r, int kind, int n)
{
    st_admin_t *a = st_arena_zalloc(&r->arena, sizeof *a);
    if (!a)
        return NULL;
    a->op.items = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->op.items + 1);
    if (!a->op.items)
        return NULL;
    a->op.kind = kind;
    a->op.n = n;
    a->op.arg = r;
    for (int i = 0; i < n; i++)
        a->op.items[i].assigned = -1;
    return a;
}

static st_kstr_t st_item_msg(st_kreq_t *r, const st_ctl_item_t *it)
{
    return it->error && it->message[0]
               ? st_kstr(st_arena_strndup(&r->arena, it->message, strlen(it->message)))
               : ST_KSTR_NULL;
}

/* ---- CreateTopics ---- */

static void st_create_topics_done(st_kshard_t *s, st_ctl_op_t *op)
{
    st_admin_t *a = (st_admin_t *)op;
    st_kreq_t *r = op->arg;
    st_kp_create_topics_resp_t *resp = a->resp;
    for (int i = 0; i < op->n; i++) {
        st_ctl_item_t *it = &op->items[i];
        st_kp_create_topics_resp_topic_t *o = &resp->topics[i];
        o->error_code = it->error;
        o->error_message = st_item_msg(r, it);
        if (it->error) {
            r->error_code = it->error;
            o->configs_count = -1;
            continue;
        }
        const st_md_topic_t *t = st_md_find(s->md, it->name, (int32_t)strlen(it->name));
        if (t && !op->validate_only) {
            memcpy(o->topic_id.b, t->id, 16);
            o->num_partitions = t->npartitions;
            o->replication_factor = t->replication_factor;
        } else {
            o->num_partitions = it->count < 0 ? (int32_t)s->b->cfg->num_partitions : it->count;
            o->replication_factor =
                it->rf < 0 ? (int16_t)s->b->cfg->default_replication_factor : it->rf;
        }
        /* v5+: the topic's effective configs. */
        o->configs = st_arena_zalloc(&r->arena, (size_t)st_tcfg_count * sizeof *o->configs);
        o->configs_count = o->configs ? st_tcfg_count : -1;
        for (int c = 0; o->configs && c < st_tcfg_count; c++) {
            char buf[64];
            bool over;
            const char *v = st_tcfg_value(s->b->cfg, t, &st_tcfg_table[c], buf, sizeof buf, &over);
            o->configs[c].name = st_kstr(st_tcfg_table[c].name);
            o->configs[c].value = st_kstr(st_arena_strndup(&r->arena, v, strlen(v)));
            o->configs[c].config_source = over ? ST_SRC_TOPIC : ST_SRC_DEFAULT;
        }
    }
    ST_KREQ_RESPOND(r, create_topics, resp);
}

void st_kh_create_topics(st_kreq_t *r)
{
    st_kp_create_topics_req_t *req = st_arena_zalloc(&r->arena, sizeof *req);
    st_kp_create_topics_resp_t *resp = st_arena_zalloc(&r->arena, sizeof *resp);
    if (!req || !resp || st_kp_create_topics_req_decode(&r->body, r->api_version, req)) {
        st_kreq_fail(r, "malformed CreateTopics request");
        return;
    }
    st_admin_t *a = st_admin_new(r, ST_CTL_CREATE, req->topics_count);
    resp->topics = st_arena_zalloc(&r->arena, (size_t)req->topics_count * sizeof *resp->topics + 1);
    if (!a || !resp->topics) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    resp->topics_count = req->topics_count;
    a->req = req;
    a->resp = resp;
    a->op.validate_only = req->validate_only;
    a->op.cb = st_create_topics_done;
    int32_t self = (int32_t)r->shard->b->cfg->node_id;
    for (int i = 0; i < req->topics_count; i++) {
        st_kp_create_topics_req_topic_t *q = &req->topics[i];
        st_ctl_item_t *it = &a->op.items[i];
        st_kp_create_topics_resp_topic_init(&resp->topics[i]);
        resp->topics[i].name = q->name;
        it->name = st_cstr(r, q->name);
        if (!it->name)
            it->name = "";
        it->count = q->num_partitions;
        it->rf = q->replication_factor;
        if (q->assignments_count > 0) {
            it->assigned = q->assignments_count;
            for (int k = 0; k < q->assignments_count; k++) {
                st_kp_create_topics_req_assignment_t *as = &q->assignments[k];
                if (as->partition_index != k || as->broker_ids_count != 1 ||
                    as->broker_ids[0] != self)
                    it->bad_assignment = true;
            }
            if (q->num_partitions != -1 || q->replication_factor != -1)
                it->bad_assignment = true;
        }
        it->ncfg = q->configs_count > 0 ? q->configs_count : 0;
        it->cfg = st_arena_zalloc(&r->arena, (size_t)it->ncfg * sizeof *it->cfg + 1);
        for (int c = 0; it->cfg && c < it->ncfg; c++) {
            it->cfg[c].key = st_cstr(r, q->configs[c].name);
            it->cfg[c].value = st_cstr(r, q->configs[c].value);
            it->cfg[c].op = it->cfg[c].value ? ST_CTL_CFG_SET : ST_CTL_CFG_DELETE;
            if (!it->cfg[c].key)
                it->cfg[c].key = "";
        }
    }
    st_ctl_submit(r->shard, &a->op);
}

/* ---- DeleteTopics ---- */

static void st_delete_topics_done(st_kshard_t *s, st_ctl_op_t *op)
{
    st_admin_t *a = (st_admin_t *)op;
    st_kreq_t *r = op->arg;
    st_kp_delete_topics_resp_t *resp = a->resp;
    (void)s;
    for (int i = 0; i < op->n; i++) {
        st_ctl_item_t *it = &op->items[i];
        st_kp_delete_topics_resp_response_t *o = &resp->responses[i];
        o->error_code = it->error;
        o->error_message = st_item_msg(r, it);
        memcpy(o->topic_id.b, it->id, 16);
        if (st_kstr_is_null(o->name) && it->out_name)
            o->name = st_kstr(st_arena_strndup(&r->arena, it->out_name, strlen(it->out_name)));
        if (it->error)
            r->error_code = it->error;
    }
    ST_KREQ_RESPOND(r, delete_topics, resp);
}

void st_kh_delete_topics(st_kreq_t *r)
{
    st_kp_delete_topics_req_t *req = st_arena_zalloc(&r->arena, sizeof *req);
    st_kp_delete_topics_resp_t *resp = st_arena_zalloc(&r->arena, sizeof *resp);
    if (!req || !resp || st_kp_delete_topics_req_decode(&r->body, r->api_version, req)) {
        st_kreq_fail(r, "malformed DeleteTopics request");
        return;
    }
    int n = r->api_version >= 6 ? req->topics_count : req->topic_names_count;
    if (n < 0)
        n = 0;
    st_admin_t *a = st_admin_new(r, ST_CTL_DELETE, n);
    resp->responses = st_arena_zalloc(&r->arena, (size_t)n * sizeof *resp->responses + 1);
    if (!a || !resp->responses) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    resp->responses_count = n;
    a->resp = resp;
    a->op.cb = st_delete_topics_done;
    for (int i = 0; i < n; i++) {
        st_ctl_item_t *it = &a->op.items[i];
        st_kp_delete_topics_resp_response_init(&resp->responses[i]);
        if (r->api_version >= 6) {
            resp->responses[i].name = req->topics[i].name;
            it->name = st_cstr(r, req->topics[i].name);
            memcpy(it->id, req->topics[i].topic_id.b, 16);
        } else {
            resp->responses[i].name = req->topic_names[i];
            it->name = st_cstr(r, req->topic_names[i]);
            if (!it->name)
                it->name = "";
        }
    }
    st_ctl_submit(r->shard, &a->op);
}

/* ---- CreatePartitions ---- */

static void st_create_partitions_done(st_kshard_t *s, st_ctl_op_t *op)
{
    st_admin_t *a = (st_admin_t *)op;
    st_kreq_t *r = op->arg;
    st_kp_create_partitions_resp_t *resp = a->resp;
    (void)s;
    for (int i = 0; i < op->n; i++) {
        resp->results[i].error_code = op->items[i].error;
        resp->results[i].error_message = st_item_msg(r, &op->items[i]);
        if (op->items[i].error)
            r->error_code = op->items[i].error;
    }
    ST_KREQ_RESPOND(r, create_partitions, resp);
}

void st_kh_create_partitions(st_kreq_t *r)
{
    st_kp_create_partitions_req_t *req = st_arena_zalloc(&r->arena, sizeof *req);
    st_kp_create_partitions_resp_t *resp = st_arena_zalloc(&r->arena, sizeof *resp);
    if (!req || !resp || st_kp_create_partitions_req_decode(&r->body, r->api_version, req)) {
        st_kreq_fail(r, "malformed CreatePartitions request");
        return;
    }
    st_admin_t *a = st_admin_new(r, ST_CTL_CREATE_PARTITIONS, req->topics_count);
    resp->results =
        st_arena_zalloc(&r->arena, (size_t)req->topics_count * sizeof *resp->results + 1);
    if (!a || !resp->results) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    resp->results_count = req->topics_count;
    a->resp = resp;
    a->op.validate_only = req->validate_only;
    a->op.cb = st_create_partitions_done;
    int32_t self = (int32_t)r->shard->b->cfg->node_id;
    for (int i = 0; i < req->topics_count; i++) {
        st_kp_create_partitions_req_topic_t *q = &req->topics[i];
        st_ctl_item_t *it = &a->op.items[i];
        resp->results[i].name = q->name;
        it->name = st_cstr(r, q->name);
        if (!it->name)
            it->name = "";
        it->count = q->count;
        for (int k = 0; k < q->assignments_count; k++)
            if (q->assignments[k].broker_ids_count != 1 || q->assignments[k].broker_ids[0] != self)
                it->bad_assignment = true;
    }
    st_ctl_submit(r->shard, &a->op);
}

/* ---- DescribeConfigs ---- */

static bool st_key_wanted(const st_kp_describe_configs_req_resource_t *q, const char *name)
{
    if (q->configuration_keys_count < 0)
        return true;
    for (int k = 0; k < q->configuration_keys_count; k++)
        if (st_kstr_eq(q->configuration_keys[k], name))
            return true;
    return false;
}

static void st_describe_topic(st_kreq_t *r, const st_kp_describe_configs_req_t *req,
                              const st_kp_describe_configs_req_resource_t *q,
                              st_kp_describe_configs_resp_result_t *o)
{
    const st_config_t *cfg = r->shard->b->cfg;
    const st_md_topic_t *t = st_md_find(r->shard->md, q->resource_name.ptr, q->resource_name.len);
    if (!t) {
        o->error_code = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        o->error_message = st_kstr("Topic does not exist");
        return;
    }
    o->configs = st_arena_zalloc(&r->arena, (size_t)st_tcfg_count * sizeof *o->configs);
    if (!o->configs)
        return;
    int n = 0;
    for (int c = 0; c < st_tcfg_count; c++) {
        const st_tcfg_desc_t *d = &st_tcfg_table[c];
        if (!st_key_wanted(q, d->name))
            continue;
        char buf[64], dbuf[64];
        bool over;
        const char *v = st_tcfg_value(cfg, t, d, buf, sizeof buf, &over);
        st_kp_describe_configs_resp_config_t *e = &o->configs[n++];
        st_kp_describe_configs_resp_config_init(e);
        e->name = st_kstr(d->name);
        e->value = st_kstr(st_arena_strndup(&r->arena, v, strlen(v)));
        e->config_source = over ? ST_SRC_TOPIC : ST_SRC_DEFAULT;
        e->config_type = (int8_t)d->type;
        e->documentation = req->include_documentation ? st_kstr(d->doc) : ST_KSTR_NULL;
        if (req->include_synonyms) {
            e->synonyms = st_arena_zalloc(&r->arena, 2 * sizeof *e->synonyms);
            if (!e->synonyms)
                continue;
            if (over)
                e->synonyms[e->synonyms_count++] =
                    (st_kp_describe_configs_resp_synonym_t){e->name, e->value, ST_SRC_TOPIC};
            const char *dv = st_tcfg_default(cfg, d, dbuf, sizeof dbuf);
            e->synonyms[e->synonyms_count++] = (st_kp_describe_configs_resp_synonym_t){
                st_kstr(d->broker_key ? d->broker_key : d->name),
                st_kstr(st_arena_strndup(&r->arena, dv, strlen(dv))), ST_SRC_DEFAULT};
        }
    }
    o->configs_count = n;
}

static void st_describe_broker(st_kreq_t *r, const st_kp_describe_configs_req_resource_t *q,
                               st_kp_describe_configs_resp_result_t *o)
{
    const st_config_t *cfg = r->shard->b->cfg;
    char self[16];
    snprintf(self, sizeof self, "%lld", (long long)cfg->node_id);
    if (q->resource_name.len > 0 && !st_kstr_eq(q->resource_name, self)) {
        o->error_code = ST_KERR_INVALID_REQUEST;
        o->error_message = st_kstr("Unexpected broker id");
        return;
    }
    /* Broker settings are static (strata.properties / --set); each topic config's broker-
     * level synonym is reported with its value. */
    o->configs = st_arena_zalloc(&r->arena, (size_t)st_tcfg_count * sizeof *o->configs);
    if (!o->configs)
        return;
    int n = 0;
    for (int c = 0; c < st_tcfg_count; c++) {
        const st_tcfg_desc_t *d = &st_tcfg_table[c];
        if (!d->broker_key || !st_key_wanted(q, d->broker_key))
            continue;
        char buf[64];
        const char *v = st_tcfg_default(cfg, d, buf, sizeof buf);
        st_kp_describe_configs_resp_config_t *e = &o->configs[n++];
        st_kp_describe_configs_resp_config_init(e);
        e->name = st_kstr(d->broker_key);
        e->value = st_kstr(st_arena_strndup(&r->arena, v, strlen(v)));
        e->read_only = true;
        e->config_source = ST_SRC_STATIC_BROKER;
        e->config_type = (int8_t)d->type;
    }
    o->configs_count = n;
}

void st_kh_describe_configs(st_kreq_t *r)
{
    st_kp_describe_configs_req_t req;
    st_kp_describe_configs_resp_t resp;
    if (st_kp_describe_configs_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed DescribeConfigs request");
        return;
    }
    st_kp_describe_configs_resp_init(&resp);
    resp.results =
        st_arena_zalloc(&r->arena, (size_t)req.resources_count * sizeof *resp.results + 1);
    if (!resp.results) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    resp.results_count = req.resources_count;
    for (int i = 0; i < req.resources_count; i++) {
        const st_kp_describe_configs_req_resource_t *q = &req.resources[i];
        st_kp_describe_configs_resp_result_t *o = &resp.results[i];
        st_kp_describe_configs_resp_result_init(o);
        o->resource_type = q->resource_type;
        o->resource_name = q->resource_name;
        if (q->resource_type == ST_RES_TOPIC)
            st_describe_topic(r, &req, q, o);
        else if (q->resource_type == ST_RES_BROKER)
            st_describe_broker(r, q, o);
        else {
            o->error_code = ST_KERR_INVALID_REQUEST;
            o->error_message = st_kstr("Unsupported resource type");
        }
    }
    ST_KREQ_RESPOND(r, describe_configs, &resp);
}

/* ---- AlterConfigs and IncrementalAlterConfigs ---- */

/* The two APIs share one answer layout; `resources` is the request's resource array. */
typedef struct {
    int16_t *errors;
    st_kstr_t *messages;
    int8_t *types;
    st_kstr_t *names;
    int n;
    int *item_of; /* resource -> item index, or -1 */
} st_alter_t;

static void st_alter_collect(st_kreq_t *r, st_ctl_op_t *op, st_alter_t *al)
{
    for (int i = 0; i < al->n; i++)
        if (al->item_of[i] >= 0) {
            st_ctl_item_t *it = &op->items[al->item_of[i]];
            al->errors[i] = it->error;
            al->messages[i] = st_item_msg(r, it);
        }
}

static void st_alter_done(st_kshard_t *s, st_ctl_op_t *op)
{
    st_admin_t *a = (st_admin_t *)op;
    st_kreq_t *r = op->arg;
    st_alter_t *al = a->req;
    (void)s;
    st_alter_collect(r, op, al);
    if (r->api_key == ST_KP_API_ALTER_CONFIGS) {
        st_kp_alter_configs_resp_t resp;
        st_kp_alter_configs_resp_init(&resp);
        resp.responses = st_arena_zalloc(&r->arena, (size_t)al->n * sizeof *resp.responses + 1);
        resp.responses_count = al->n;
        for (int i = 0; resp.responses && i < al->n; i++)
            resp.responses[i] = (st_kp_alter_configs_resp_response_t){
                al->errors[i], al->messages[i], al->types[i], al->names[i]};
        ST_KREQ_RESPOND(r, alter_configs, &resp);
    } else {
        st_kp_incremental_alter_configs_resp_t resp;
        st_kp_incremental_alter_configs_resp_init(&resp);
        resp.responses = st_arena_zalloc(&r->arena, (size_t)al->n * sizeof *resp.responses + 1);
        resp.responses_count = al->n;
        for (int i = 0; resp.responses && i < al->n; i++)
            resp.responses[i] = (st_kp_incremental_alter_configs_resp_response_t){
                al->errors[i], al->messages[i], al->types[i], al->names[i]};
        ST_KREQ_RESPOND(r, incremental_alter_configs, &resp);
    }
}

static st_alter_t *st_alter_new(st_kreq_t *r, int n)
{
    st_alter_t *al = st_arena_zalloc(&r->arena, sizeof *al);
    if (!al)
        return NULL;
    al->n = n;
    al->errors = st_arena_zalloc(&r->arena, (size_t)n * sizeof *al->errors + 1);
    al->messages = st_arena_zalloc(&r->arena, (size_t)n * sizeof *al->messages + 1);
    al->types = st_arena_zalloc(&r->arena, (size_t)n * sizeof *al->types + 1);
    al->names = st_arena_zalloc(&r->arena, (size_t)n * sizeof *al->names + 1);
    al->item_of = st_arena_zalloc(&r->arena, (size_t)n * sizeof *al->item_of + 1);
    if (!al->errors || !al->messages || !al->types || !al->names || !al->item_of)
        return NULL;
    return al;
}

/* Fills item `it` for resource i, or answers the resource directly; returns true if it
 * becomes an item. */
static bool st_alter_resource(st_kreq_t *r, st_alter_t *al, int i, int8_t type, st_kstr_t name)
{
    al->types[i] = type;
    al->names[i] = name;
    al->item_of[i] = -1;
    al->messages[i] = ST_KSTR_NULL;
    if (type == ST_RES_TOPIC)
        return true;
    al->errors[i] = ST_KERR_INVALID_REQUEST;
    al->messages[i] =
        st_kstr(type == ST_RES_BROKER ? "Broker settings are static: set them in strata.properties"
                                      : "Unsupported resource type");
    (void)r;
    return false;
}

void st_kh_alter_configs(st_kreq_t *r)
{
    st_kp_alter_configs_req_t req;
    if (st_kp_alter_configs_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed AlterConfigs request");
        return;
    }
    st_alter_t *al = st_alter_new(r, req.resources_count);
    st_admin_t *a = st_admin_new(r, ST_CTL_ALTER_CONFIGS, req.resources_count);
    if (!al || !a) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    a->req = al;
    a->op.validate_only = req.validate_only;
    a->op.cb = st_alter_done;
    int k = 0;
    for (int i = 0; i < req.resources_count; i++) {
        st_kp_alter_configs_req_resource_t *q = &req.resources[i];
        if (!st_alter_resource(r, al, i, q->resource_type, q->resource_name))
            continue;
        st_ctl_item_t *it = &a->op.items[k];
        al->item_of[i] = k++;
        it->name = st_cstr(r, q->resource_name);
        if (!it->name)
            it->name = "";
        it->replace_configs = true;
        it->ncfg = q->configs_count > 0 ? q->configs_count : 0;
        it->cfg = st_arena_zalloc(&r->arena, (size_t)it->ncfg * sizeof *it->cfg + 1);
        for (int c = 0; it->cfg && c < it->ncfg; c++) {
            it->cfg[c].key = st_cstr(r, q->configs[c].name);
            it->cfg[c].value = st_cstr(r, q->configs[c].value);
            it->cfg[c].op = it->cfg[c].value ? ST_CTL_CFG_SET : ST_CTL_CFG_DELETE;
            if (!it->cfg[c].key)
                it->cfg[c].key = "";
        }
    }
    a->op.n = k;
    if (k == 0) {
        st_alter_done(r->shard, &a->op);
        return;
    }
    st_ctl_submit(r->shard, &a->op);
}

void st_kh_incremental_alter_configs(st_kreq_t *r)
{
    st_kp_incremental_alter_configs_req_t req;
    if (st_kp_incremental_alter_configs_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed IncrementalAlterConfigs request");
        return;
    }
    st_alter_t *al = st_alter_new(r, req.resources_count);
    st_admin_t *a = st_admin_new(r, ST_CTL_ALTER_CONFIGS, req.resources_count);
    if (!al || !a) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    a->req = al;
    a->op.validate_only = req.validate_only;
    a->op.cb = st_alter_done;
    int k = 0;
    for (int i = 0; i < req.resources_count; i++) {
        st_kp_incremental_alter_configs_req_resource_t *q = &req.resources[i];
        if (!st_alter_resource(r, al, i, q->resource_type, q->resource_name))
            continue;
        st_ctl_item_t *it = &a->op.items[k];
        al->item_of[i] = k++;
        it->name = st_cstr(r, q->resource_name);
        if (!it->name)
            it->name = "";
        it->ncfg = q->configs_count > 0 ? q->configs_count : 0;
        it->cfg = st_arena_zalloc(&r->arena, (size_t)it->ncfg * sizeof *it->cfg + 1);
        for (int c = 0; it->cfg && c < it->ncfg; c++) {
            it->cfg[c].key = st_cstr(r, q->configs[c].name);
            it->cfg[c].value = st_cstr(r, q->configs[c].value);
            it->cfg[c].op = q->configs[c].config_operation;
            if (!it->cfg[c].key)
                it->cfg[c].key = "";
            if (it->cfg[c].op < 0 || it->cfg[c].op > 3) {
                it->cfg[c].op = -1;
            }
        }
    }
    a->op.n = k;
    if (k == 0) {
        st_alter_done(r->shard, &a->op);
        return;
    }
    st_ctl_submit(r->shard, &a->op);
}

/* ---- DescribeCluster ---- */

void st_kh_describe_cluster(st_kreq_t *r)
{
    st_kp_describe_cluster_req_t req;
    if (st_kp_describe_cluster_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed DescribeCluster request");
        return;
    }
    const st_md_t *md = r->shard->md;
    st_kp_describe_cluster_resp_t resp;
    st_kp_describe_cluster_resp_init(&resp);
    if (req.endpoint_type != 1) {
        resp.error_code = ST_KERR_UNSUPPORTED_ENDPOINT_TYPE;
        resp.error_message = st_kstr("Only brokers (endpoint type 1) are described");
        resp.endpoint_type = req.endpoint_type;
        resp.cluster_id = st_kstr(md->cluster_id);
        ST_KREQ_RESPOND(r, describe_cluster, &resp);
        return;
    }
    resp.cluster_id = st_kstr(md->cluster_id);
    resp.controller_id = md->controller_id;
    resp.brokers = st_arena_zalloc(&r->arena, (size_t)md->nbrokers * sizeof *resp.brokers + 1);
    if (!resp.brokers) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    resp.brokers_count = md->nbrokers;
    for (int i = 0; i < md->nbrokers; i++)
        resp.brokers[i] = (st_kp_describe_cluster_resp_broker_t){
            md->brokers[i].node_id, st_kstr(md->brokers[i].host), md->brokers[i].port, ST_KSTR_NULL,
            false};
    ST_KREQ_RESPOND(r, describe_cluster, &resp);
}
