/*
 * h_admin.c — topic administration and configs: CreateTopics (19), DeleteTopics (20),
 * CreatePartitions (37), DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44),
 * DescribeCluster (60).
 *
 * Changes go to the controller (controller.h) as one operation per request; the answer
 * leaves once every shard applied it. Descriptions read this shard's snapshot.
 *
 * The controller reads topic names, config names and values as C strings, while the protocol's
 * strings are length-delimited and may hold any byte: "abc\0def" read with strlen is "abc".
 * So every such string passes through st_kreq_cstr, and an entry holding a NUL byte is answered
 * here with an error and never reaches the controller.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/authz.h"
#include "kafka/broker_config.h"
#include "kafka/handlers.h"
#include "kafka/controller.h"
#include "kafka/throttle.h"
#include "kafka/topic_config.h"
#include "proto/kerr.h"

#define ST_RES_TOPIC  2
#define ST_RES_BROKER 4

/* The answer for an entry refused before it reaches the controller. */
static const char msg_nul_topic[] = "Topic name is illegal, it contains a NUL byte";
static const char msg_nul_config[] = "Config name or value contains a NUL byte";

typedef struct {
    st_ctl_op_t op;
    void *req;
    void *resp;
    int nres;          /* entries in the answer */
    int *item_of;      /* answer entry -> index in op.items, or -1 when answered by the handler */
    st_kmutation_t mq; /* controller_mutation_rate (kafka/throttle.h) */
    int32_t *charged;  /* answer entry -> partitions taken from the quota for it */
} admin_t;

/* Converts one requested config change into cf (op is the caller's); false when its name or
 * value holds a NUL byte. */
static bool cfg_from(st_kreq_t *r, st_ctl_cfg_t *cf, st_kstr_t name, st_kstr_t value)
{
    if (!st_kreq_cstr(r, name, &cf->key) || !st_kreq_cstr(r, value, &cf->value))
        return false;
    if (!cf->key)
        cf->key = "";
    return true;
}

/* An operation for an answer of n entries; items are taken with admin_take. */
static admin_t *admin_new(st_kreq_t *r, int kind, int n)
{
    admin_t *a = st_arena_zalloc(&r->arena, sizeof *a);
    if (!a)
        return NULL;
    a->op.items = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->op.items + 1);
    a->item_of = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->item_of + 1);
    a->charged = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->charged + 1);
    if (!a->op.items || !a->item_of || !a->charged)
        return NULL;
    a->op.kind = kind;
    a->op.n = 0;
    a->op.arg = r;
    a->nres = n;
    for (int i = 0; i < n; i++) {
        a->op.items[i].assigned = -1;
        a->item_of[i] = -1;
    }
    return a;
}

/* The controller item for answer entry i. */
static st_ctl_item_t *admin_take(admin_t *a, int i)
{
    a->item_of[i] = a->op.n;
    return &a->op.items[a->op.n++];
}

/* The item answering entry i, or NULL when the handler answered it itself. */
static st_ctl_item_t *admin_item(admin_t *a, int i)
{
    return a->item_of[i] < 0 ? NULL : &a->op.items[a->item_of[i]];
}

/* Hands the operation to the controller, or answers at once when every entry was refused. */
static void admin_submit(st_kreq_t *r, admin_t *a)
{
    if (a->op.n == 0)
        a->op.cb(r->shard, &a->op);
    else
        st_ctl_submit(r->shard, &a->op);
}

/* controller_mutation_rate: entry i's partitions taken from the quota, in request order as
 * Kafka checks them; false when the quota refuses them (strict versions), the entry then
 * answered THROTTLING_QUOTA_EXCEEDED by the caller. */
static bool mutation_take(st_kreq_t *r, admin_t *a, int i, int32_t partitions)
{
    if (st_kthrottle_mutation_take(r, &a->mq, partitions) > 0)
        return false;
    a->charged[i] = partitions;
    return true;
}

static const char msg_throttled[] = "The throttling quota has been exceeded.";

/* In the answer: the partitions of entries the controller refused go back to the quota, and
 * the response carries the quota's throttle time (as Kafka, it counts only what was done). */
static void mutation_settle(st_kreq_t *r, admin_t *a)
{
    for (int i = 0; i < a->nres; i++) {
        st_ctl_item_t *it = admin_item(a, i);
        if (it && it->error && a->charged[i])
            st_kthrottle_mutation_refund(r, &a->mq, a->charged[i]);
    }
    st_kthrottle_mutation_finish(r, &a->mq);
}

static st_kstr_t item_msg(st_kreq_t *r, const st_ctl_item_t *it)
{
    return it->error && it->message[0]
               ? st_kstr(st_arena_strndup(&r->arena, it->message, strlen(it->message)))
               : ST_KSTR_NULL;
}

/* ---- CreateTopics ---- */

static void create_topics_done(st_kshard_t *s, st_ctl_op_t *op)
{
    admin_t *a = (admin_t *)op;
    st_kreq_t *r = op->arg;
    st_kp_create_topics_resp_t *resp = a->resp;
    for (int i = 0; i < a->nres; i++) {
        st_ctl_item_t *it = admin_item(a, i);
        st_kp_create_topics_resp_topic_t *o = &resp->topics[i];
        if (!it)
            continue;
        o->error_code = it->error;
        o->error_message = item_msg(r, it);
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
            char buf[64], dbuf[64];
            bool over;
            int src;
            const char *v =
                st_tcfg_value(s->b->cfg, s->md, t, &st_tcfg_table[c], buf, sizeof buf, &over);
            st_tcfg_default(s->b->cfg, s->md, &st_tcfg_table[c], dbuf, sizeof dbuf, &src);
            o->configs[c].name = st_kstr(st_tcfg_table[c].name);
            o->configs[c].value = st_kstr(st_arena_strndup(&r->arena, v, strlen(v)));
            o->configs[c].config_source = over ? ST_SRC_TOPIC : (int8_t)src;
        }
    }
    mutation_settle(r, a);
    ST_KREQ_RESPOND(r, create_topics, resp);
}

/* One partition's broker list of an explicit assignment into ids[at*rf..]: false (with why)
 * when it does not have rf distinct ids. */
static bool assignment_row(int32_t *ids, int32_t at, int16_t rf, const int32_t *brokers, int32_t n,
                           const char **why)
{
    if (n != rf) {
        *why = n < 1 ? "An assignment lists no broker."
                     : "Every partition's assignment must list the same number of brokers.";
        return false;
    }
    for (int32_t k = 0; k < n; k++) {
        for (int32_t j = 0; j < k; j++)
            if (brokers[j] == brokers[k]) {
                *why = "An assignment lists a broker more than once.";
                return false;
            }
        ids[(size_t)at * (size_t)rf + (size_t)k] = brokers[k];
    }
    return true;
}

/* The explicit assignments of a CreateTopics entry into it (assign, assign_rf, assigned):
 * partitions 0..n-1 once each, as Kafka requires, num_partitions and replication_factor -1. */
static void create_assignments(st_kreq_t *r, st_ctl_item_t *it,
                               const st_kp_create_topics_req_topic_t *q)
{
    int32_t n = q->assignments_count;
    int16_t rf = (int16_t)(q->assignments[0].broker_ids_count > ST_MD_MAX_REPLICAS
                               ? ST_MD_MAX_REPLICAS + 1
                               : q->assignments[0].broker_ids_count);
    int32_t *ids = st_arena_zalloc(&r->arena, (size_t)n * (size_t)(rf > 0 ? rf : 1) * sizeof *ids);
    bool *seen = st_arena_zalloc(&r->arena, (size_t)n * sizeof *seen);
    it->assigned = n;
    it->bad_assignment = true;
    if (!ids || !seen) {
        it->bad_why = "Out of memory.";
        return;
    }
    if (q->num_partitions != -1 || q->replication_factor != -1) {
        it->bad_why = "Both numPartitions or replicationFactor and replicasAssignments were set. "
                      "Both cannot be used at the same time.";
        return;
    }
    if (rf > ST_MD_MAX_REPLICAS) {
        it->bad_why = "An assignment lists more than 16 brokers.";
        return;
    }
    for (int32_t k = 0; k < n; k++) {
        const st_kp_create_topics_req_assignment_t *as = &q->assignments[k];
        int32_t at = as->partition_index;
        if (at < 0 || at >= n || seen[at]) {
            it->bad_why = "Partitions should be a consecutive 0-based integer sequence.";
            return;
        }
        seen[at] = true;
        if (!assignment_row(ids, at, rf, as->broker_ids, as->broker_ids_count, &it->bad_why))
            return;
    }
    it->bad_assignment = false;
    it->assign = ids;
    it->assign_rf = rf;
}

/* The same for CreatePartitions: one broker list per partition added, in order. */
static void grow_assignments(st_kreq_t *r, st_ctl_item_t *it,
                             const st_kp_create_partitions_req_topic_t *q)
{
    int32_t n = q->assignments_count;
    int32_t first = q->assignments[0].broker_ids_count;
    int16_t rf = (int16_t)(first > ST_MD_MAX_REPLICAS ? ST_MD_MAX_REPLICAS + 1 : first);
    int32_t *ids = st_arena_zalloc(&r->arena, (size_t)n * (size_t)(rf > 0 ? rf : 1) * sizeof *ids);
    it->assigned = n;
    it->bad_assignment = true;
    if (!ids) {
        it->bad_why = "Out of memory.";
        return;
    }
    if (rf > ST_MD_MAX_REPLICAS) {
        it->bad_why = "An assignment lists more than 16 brokers.";
        return;
    }
    for (int32_t k = 0; k < n; k++)
        if (!assignment_row(ids, k, rf, q->assignments[k].broker_ids,
                            q->assignments[k].broker_ids_count, &it->bad_why))
            return;
    it->bad_assignment = false;
    it->assign = ids;
    it->assign_rf = rf;
}

void st_kh_create_topics(st_kreq_t *r)
{
    st_kp_create_topics_req_t *req = st_arena_zalloc(&r->arena, sizeof *req);
    st_kp_create_topics_resp_t *resp = st_arena_zalloc(&r->arena, sizeof *resp);
    if (!req || !resp || st_kp_create_topics_req_decode(&r->body, r->api_version, req)) {
        st_kreq_fail(r, "malformed CreateTopics request");
        return;
    }
    admin_t *a = admin_new(r, ST_CTL_CREATE, req->topics_count);
    resp->topics = st_arena_zalloc(&r->arena, (size_t)req->topics_count * sizeof *resp->topics + 1);
    if (!a || !resp->topics) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    resp->topics_count = req->topics_count;
    a->req = req;
    a->resp = resp;
    a->op.validate_only = req->validate_only;
    a->op.cb = create_topics_done;
    st_kthrottle_mutation_begin(r, &a->mq, 6);
    /* With ACLs on: CREATE on the cluster, or on each topic (Kafka's check) */
    bool create_any = st_kauthz_quiet(r, ST_ACL_OP_CREATE, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME,
                                      strlen(ST_ACL_CLUSTER_NAME));
    for (int i = 0; i < req->topics_count; i++) {
        st_kp_create_topics_req_topic_t *q = &req->topics[i];
        st_kp_create_topics_resp_topic_t *o = &resp->topics[i];
        st_kp_create_topics_resp_topic_init(o);
        o->name = q->name;
        const char *name;
        int ncfg = q->configs_count > 0 ? q->configs_count : 0;
        st_ctl_cfg_t *cfg = st_arena_zalloc(&r->arena, (size_t)ncfg * sizeof *cfg + 1);
        bool cfg_ok = true;
        for (int c = 0; cfg && c < ncfg; c++) {
            cfg_ok = cfg_ok && cfg_from(r, &cfg[c], q->configs[c].name, q->configs[c].value);
            cfg[c].op = cfg[c].value ? ST_CTL_CFG_SET : ST_CTL_CFG_DELETE;
        }
        bool name_ok = st_kreq_cstr(r, q->name, &name);
        if (name_ok && !create_any &&
            !st_kauthz(r, ST_ACL_OP_CREATE, ST_ACL_RES_TOPIC, name ? name : "",
                       name ? strlen(name) : 0)) {
            o->error_code = r->error_code = ST_KERR_TOPIC_AUTHORIZATION_FAILED;
            o->error_message = st_kstr("Authorization failed.");
            o->configs_count = -1;
            continue;
        }
        if (!name_ok || !cfg_ok) {
            o->error_code = !name_ok ? ST_KERR_INVALID_TOPIC_EXCEPTION : ST_KERR_INVALID_CONFIG;
            o->error_message = st_kstr(!name_ok ? msg_nul_topic : msg_nul_config);
            o->configs_count = -1;
            r->error_code = o->error_code;
            continue;
        }
        int32_t nparts = q->assignments_count > 0 ? q->assignments_count
                         : q->num_partitions < 0  ? (int32_t)r->shard->b->cfg->num_partitions
                                                  : q->num_partitions;
        if (!mutation_take(r, a, i, nparts)) {
            o->error_code = r->error_code = ST_KERR_THROTTLING_QUOTA_EXCEEDED;
            o->error_message = st_kstr(msg_throttled);
            o->configs_count = -1;
            continue;
        }
        st_ctl_item_t *it = admin_take(a, i);
        it->name = name ? name : "";
        it->count = q->num_partitions;
        it->rf = q->replication_factor;
        if (q->assignments_count > 0)
            create_assignments(r, it, q);
        it->ncfg = ncfg;
        it->cfg = cfg;
    }
    admin_submit(r, a);
}

/* ---- DeleteTopics ---- */

static void delete_topics_done(st_kshard_t *s, st_ctl_op_t *op)
{
    admin_t *a = (admin_t *)op;
    st_kreq_t *r = op->arg;
    st_kp_delete_topics_resp_t *resp = a->resp;
    (void)s;
    for (int i = 0; i < a->nres; i++) {
        st_ctl_item_t *it = admin_item(a, i);
        st_kp_delete_topics_resp_response_t *o = &resp->responses[i];
        if (!it)
            continue;
        o->error_code = it->error;
        o->error_message = item_msg(r, it);
        memcpy(o->topic_id.b, it->id, 16);
        if (st_kstr_is_null(o->name) && it->out_name)
            o->name = st_kstr(st_arena_strndup(&r->arena, it->out_name, strlen(it->out_name)));
        if (it->error)
            r->error_code = it->error;
    }
    mutation_settle(r, a);
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
    admin_t *a = admin_new(r, ST_CTL_DELETE, n);
    resp->responses = st_arena_zalloc(&r->arena, (size_t)n * sizeof *resp->responses + 1);
    if (!a || !resp->responses) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    resp->responses_count = n;
    a->resp = resp;
    a->op.cb = delete_topics_done;
    st_kthrottle_mutation_begin(r, &a->mq, 5);
    for (int i = 0; i < n; i++) {
        st_kp_delete_topics_resp_response_t *o = &resp->responses[i];
        st_kp_delete_topics_resp_response_init(o);
        o->name = r->api_version >= 6 ? req->topics[i].name : req->topic_names[i];
        const char *name;
        if (!st_kreq_cstr(r, o->name, &name)) {
            /* No topic has this name, and Kafka answers a name it does not know, legal or not,
             * with UNKNOWN_TOPIC_OR_PARTITION: so does the controller for "a b". */
            o->error_code = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
            o->error_message = st_kstr("This server does not host this topic.");
            r->error_code = o->error_code;
            continue;
        }
        /* DELETE on the topic; by id, its name in this shard's snapshot (an unknown id is
         * TOPIC_AUTHORIZATION_FAILED with ACLs on, as Kafka answers) */
        const st_md_topic_t *known = name || r->api_version < 6
                                         ? NULL
                                         : st_md_find_id(r->shard->md, req->topics[i].topic_id.b);
        const char *authz_name = name ? name : known ? known->name : NULL;
        if (st_kauthz_on(r) && (!authz_name || !st_kauthz(r, ST_ACL_OP_DELETE, ST_ACL_RES_TOPIC,
                                                          authz_name, strlen(authz_name)))) {
            o->error_code = r->error_code = ST_KERR_TOPIC_AUTHORIZATION_FAILED;
            o->error_message = st_kstr("Authorization failed.");
            continue;
        }
        /* the topic's partitions, as this shard knows it (an unknown topic deletes none) */
        const st_md_topic_t *t = known  ? known
                                 : name ? st_md_find(r->shard->md, name, (int32_t)strlen(name))
                                        : NULL;
        if (!mutation_take(r, a, i, t ? t->npartitions : 0)) {
            o->error_code = r->error_code = ST_KERR_THROTTLING_QUOTA_EXCEEDED;
            o->error_message = st_kstr(msg_throttled);
            continue;
        }
        st_ctl_item_t *it = admin_take(a, i);
        if (r->api_version >= 6) {
            it->name = name;
            memcpy(it->id, req->topics[i].topic_id.b, 16);
        } else {
            it->name = name ? name : "";
        }
    }
    admin_submit(r, a);
}

/* ---- CreatePartitions ---- */

static void create_partitions_done(st_kshard_t *s, st_ctl_op_t *op)
{
    admin_t *a = (admin_t *)op;
    st_kreq_t *r = op->arg;
    st_kp_create_partitions_resp_t *resp = a->resp;
    (void)s;
    for (int i = 0; i < a->nres; i++) {
        st_ctl_item_t *it = admin_item(a, i);
        if (!it)
            continue;
        resp->results[i].error_code = it->error;
        resp->results[i].error_message = item_msg(r, it);
        if (it->error)
            r->error_code = it->error;
    }
    mutation_settle(r, a);
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
    admin_t *a = admin_new(r, ST_CTL_CREATE_PARTITIONS, req->topics_count);
    resp->results =
        st_arena_zalloc(&r->arena, (size_t)req->topics_count * sizeof *resp->results + 1);
    if (!a || !resp->results) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    resp->results_count = req->topics_count;
    a->resp = resp;
    a->op.validate_only = req->validate_only;
    a->op.cb = create_partitions_done;
    st_kthrottle_mutation_begin(r, &a->mq, 3);
    for (int i = 0; i < req->topics_count; i++) {
        st_kp_create_partitions_req_topic_t *q = &req->topics[i];
        resp->results[i].name = q->name;
        const char *name;
        if (!st_kreq_cstr(r, q->name, &name)) {
            /* As for DeleteTopics: Kafka answers an unknown name with UNKNOWN_TOPIC_OR_PARTITION.
             */
            resp->results[i].error_code = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
            resp->results[i].error_message = st_kstr("This server does not host this topic.");
            r->error_code = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
            continue;
        }
        if (st_kauthz_on(r) && !st_kauthz(r, ST_ACL_OP_ALTER, ST_ACL_RES_TOPIC, name ? name : "",
                                          name ? strlen(name) : 0)) {
            resp->results[i].error_code = r->error_code = ST_KERR_TOPIC_AUTHORIZATION_FAILED;
            resp->results[i].error_message = st_kstr("Authorization failed.");
            continue; /* ALTER on the topic (Kafka's check) */
        }
        /* the partitions added, as this shard knows the topic (none: the controller refuses) */
        const st_md_topic_t *t =
            name ? st_md_find(r->shard->md, name, (int32_t)strlen(name)) : NULL;
        int32_t added = t && q->count > t->npartitions ? q->count - t->npartitions : 0;
        if (!mutation_take(r, a, i, added)) {
            resp->results[i].error_code = r->error_code = ST_KERR_THROTTLING_QUOTA_EXCEEDED;
            resp->results[i].error_message = st_kstr(msg_throttled);
            continue;
        }
        st_ctl_item_t *it = admin_take(a, i);
        it->name = name ? name : "";
        it->count = q->count;
        if (q->assignments_count > 0)
            grow_assignments(r, it, q);
    }
    admin_submit(r, a);
}

/* ---- DescribeConfigs ---- */

static bool key_wanted(const st_kp_describe_configs_req_resource_t *q, const char *name)
{
    if (q->configuration_keys_count < 0)
        return true;
    for (int k = 0; k < q->configuration_keys_count; k++)
        if (st_kstr_eq(q->configuration_keys[k], name))
            return true;
    return false;
}

static st_kstr_t arena_kstr(st_kreq_t *r, const char *v)
{
    return v ? st_kstr(st_arena_strndup(&r->arena, v, strlen(v))) : ST_KSTR_NULL;
}

static void describe_topic(st_kreq_t *r, const st_kp_describe_configs_req_t *req,
                           const st_kp_describe_configs_req_resource_t *q,
                           st_kp_describe_configs_resp_result_t *o)
{
    const st_config_t *cfg = r->shard->b->cfg;
    const st_md_t *md = r->shard->md;
    const char *name;
    if (!st_kreq_cstr(r, q->resource_name, &name)) {
        /* Kafka validates the name (Topic.validate) before looking the topic up. */
        o->error_code = ST_KERR_INVALID_TOPIC_EXCEPTION;
        o->error_message = st_kstr(msg_nul_topic);
        return;
    }
    const st_md_topic_t *t = st_md_find(md, q->resource_name.ptr, q->resource_name.len);
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
        if (!key_wanted(q, d->name))
            continue;
        char buf[64], dbuf[64];
        bool over;
        int dsrc;
        const char *v = st_tcfg_value(cfg, md, t, d, buf, sizeof buf, &over);
        const char *dv = st_tcfg_default(cfg, md, d, dbuf, sizeof dbuf, &dsrc);
        st_kp_describe_configs_resp_config_t *e = &o->configs[n++];
        st_kp_describe_configs_resp_config_init(e);
        e->name = st_kstr(d->name);
        e->value = arena_kstr(r, v);
        e->config_source = over ? ST_SRC_TOPIC : (int8_t)dsrc;
        e->is_default = !over && dsrc == ST_SRC_DEFAULT; /* v0's form of config_source */
        e->config_type = (int8_t)d->type;
        e->documentation = req->include_documentation ? st_kstr(d->doc) : ST_KSTR_NULL;
        if (req->include_synonyms) {
            e->synonyms = st_arena_zalloc(&r->arena, 2 * sizeof *e->synonyms);
            if (!e->synonyms)
                continue;
            if (over)
                e->synonyms[e->synonyms_count++] =
                    (st_kp_describe_configs_resp_synonym_t){e->name, e->value, ST_SRC_TOPIC};
            e->synonyms[e->synonyms_count++] = (st_kp_describe_configs_resp_synonym_t){
                st_kstr(d->broker_key ? d->broker_key : d->name), arena_kstr(r, dv), (int8_t)dsrc};
        }
    }
    o->configs_count = n;
}

/* DescribeConfigs' config_type of broker setting key. */
static int8_t broker_config_type(const char *key, int type)
{
    const st_tcfg_desc_t *d = st_bcfg_topic_config(key);
    if (d)
        return (int8_t)d->type;
    if (strcmp(key, "max.connections.per.ip.overrides") == 0 || strcmp(key, "listeners") == 0 ||
        strcmp(key, "super.users") == 0)
        return ST_TCFG_LIST;
    return type == ST_CONFIG_TYPE_BOOL  ? ST_TCFG_BOOLEAN
           : type == ST_CONFIG_TYPE_INT ? ST_TCFG_LONG
                                        : ST_TCFG_STRING;
}

/* One broker setting's entry: its value where it comes from (a secret's is null), and with
 * synonyms every source that has a value, the winning one first (Kafka's order). */
static void broker_entry(st_kreq_t *r, const st_kp_describe_configs_req_t *req, const char *key,
                         int type, const char *help, st_kp_describe_configs_resp_config_t *e)
{
    const st_config_t *cfg = r->shard->b->cfg;
    const st_md_t *md = r->shard->md;
    char buf[64], sbuf[64];
    int src;
    bool sensitive = st_config_is_secret(key), given;
    const char *v = st_bcfg_value(cfg, md, key, buf, sizeof buf, &src);
    st_kp_describe_configs_resp_config_init(e);
    e->name = st_kstr(key);
    e->value = sensitive ? ST_KSTR_NULL : arena_kstr(r, v);
    e->read_only = !st_bcfg_dynamic(key);
    e->config_source = (int8_t)src;
    e->is_default = src == ST_SRC_DEFAULT;
    e->is_sensitive = sensitive;
    e->config_type = broker_config_type(key, type);
    e->documentation = req->include_documentation ? st_kstr(help) : ST_KSTR_NULL;
    if (!req->include_synonyms)
        return;
    e->synonyms = st_arena_zalloc(&r->arena, 4 * sizeof *e->synonyms);
    if (!e->synonyms)
        return;
    int32_t node = (int32_t)cfg->node_id;
    int scope;
    const char *own = e->read_only ? NULL : st_md_broker_config(md, node, key, &scope);
    if (own && scope == 1)
        e->synonyms[e->synonyms_count++] = (st_kp_describe_configs_resp_synonym_t){
            e->name, sensitive ? ST_KSTR_NULL : arena_kstr(r, own), ST_SRC_DYNAMIC_BROKER};
    const char *all =
        e->read_only ? NULL : st_md_broker_config(md, ST_MD_BROKER_DEFAULT, key, NULL);
    if (all)
        e->synonyms[e->synonyms_count++] = (st_kp_describe_configs_resp_synonym_t){
            e->name, sensitive ? ST_KSTR_NULL : arena_kstr(r, all), ST_SRC_DYNAMIC_DEFAULT};
    const char *sv = st_config_get(cfg, key, sbuf, sizeof sbuf, &given);
    e->synonyms[e->synonyms_count++] = (st_kp_describe_configs_resp_synonym_t){
        e->name, sensitive ? ST_KSTR_NULL : arena_kstr(r, sv),
        given ? ST_SRC_STATIC_BROKER : ST_SRC_DEFAULT};
}

/* A broker resource: "" the cluster-wide dynamic defaults set, "<id>" (this broker's id) every
 * setting with its value on this broker. */
static void describe_broker(st_kreq_t *r, const st_kp_describe_configs_req_t *req,
                            const st_kp_describe_configs_req_resource_t *q,
                            st_kp_describe_configs_resp_result_t *o)
{
    const st_config_t *cfg = r->shard->b->cfg;
    const st_md_t *md = r->shard->md;
    char self[16];
    snprintf(self, sizeof self, "%lld", (long long)cfg->node_id);
    bool defaults = q->resource_name.len == 0;
    if (!defaults && !st_kstr_eq(q->resource_name, self)) {
        o->error_code = ST_KERR_INVALID_REQUEST;
        o->error_message = st_kstr("Unexpected broker id");
        return;
    }
    int nkeys = st_config_nkeys();
    o->configs = st_arena_zalloc(&r->arena, (size_t)(nkeys + md->nbcfg + 1) * sizeof *o->configs);
    if (!o->configs)
        return;
    int n = 0;
    if (defaults) {
        for (int i = 0; i < md->nbcfg; i++) {
            const st_md_bcfg_t *c = &md->bcfg[i];
            if (c->broker != ST_MD_BROKER_DEFAULT || !key_wanted(q, c->key))
                continue;
            int type = ST_CONFIG_TYPE_STR;
            const char *help = NULL;
            for (int k = 0; k < nkeys; k++)
                if (strcmp(st_config_key(k, &type, &help), c->key) == 0)
                    break;
            st_kp_describe_configs_resp_config_t *e = &o->configs[n++];
            st_kp_describe_configs_resp_config_init(e);
            e->name = arena_kstr(r, c->key);
            e->value = st_config_is_secret(c->key) ? ST_KSTR_NULL : arena_kstr(r, c->value);
            e->config_source = ST_SRC_DYNAMIC_DEFAULT;
            e->is_sensitive = st_config_is_secret(c->key);
            e->config_type = broker_config_type(c->key, type);
            e->documentation = req->include_documentation && help ? st_kstr(help) : ST_KSTR_NULL;
            if (req->include_synonyms) {
                e->synonyms = st_arena_zalloc(&r->arena, sizeof *e->synonyms);
                if (e->synonyms)
                    e->synonyms[e->synonyms_count++] = (st_kp_describe_configs_resp_synonym_t){
                        e->name, e->value, ST_SRC_DYNAMIC_DEFAULT};
            }
        }
        o->configs_count = n;
        return;
    }
    for (int k = 0; k < nkeys; k++) {
        int type;
        const char *help;
        const char *key = st_config_key(k, &type, &help);
        if (key_wanted(q, key))
            broker_entry(r, req, key, type, help, &o->configs[n++]);
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
        /* DESCRIBE_CONFIGS on the topic, on the group, or on the cluster for a broker, a
         * broker logger and client metrics (Kafka's checks) */
        st_kstr_t n = q->resource_name;
        int res = q->resource_type == ST_RES_TOPIC ? ST_ACL_RES_TOPIC
                  : q->resource_type == 32         ? ST_ACL_RES_GROUP
                                                   : ST_ACL_RES_CLUSTER;
        bool allowed = res == ST_ACL_RES_CLUSTER
                           ? st_kauthz_cluster(r, ST_ACL_OP_DESCRIBE_CONFIGS)
                           : st_kauthz_k(r, ST_ACL_OP_DESCRIBE_CONFIGS, res, n);
        if (!allowed) {
            o->error_code = res == ST_ACL_RES_TOPIC   ? ST_KERR_TOPIC_AUTHORIZATION_FAILED
                            : res == ST_ACL_RES_GROUP ? ST_KERR_GROUP_AUTHORIZATION_FAILED
                                                      : ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
            o->error_message = st_kstr("Authorization failed.");
        } else if (q->resource_type == ST_RES_TOPIC)
            describe_topic(r, &req, q, o);
        else if (q->resource_type == ST_RES_BROKER)
            describe_broker(r, &req, q, o);
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
} alter_t;

static void alter_collect(st_kreq_t *r, admin_t *a, alter_t *al)
{
    for (int i = 0; i < al->n; i++) {
        st_ctl_item_t *it = admin_item(a, i);
        if (it) {
            al->errors[i] = it->error;
            al->messages[i] = item_msg(r, it);
        }
    }
}

static void alter_done(st_kshard_t *s, st_ctl_op_t *op)
{
    admin_t *a = (admin_t *)op;
    st_kreq_t *r = op->arg;
    alter_t *al = a->req;
    (void)s;
    alter_collect(r, a, al);
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

static alter_t *alter_new(st_kreq_t *r, int n)
{
    alter_t *al = st_arena_zalloc(&r->arena, sizeof *al);
    if (!al)
        return NULL;
    al->n = n;
    al->errors = st_arena_zalloc(&r->arena, (size_t)n * sizeof *al->errors + 1);
    al->messages = st_arena_zalloc(&r->arena, (size_t)n * sizeof *al->messages + 1);
    al->types = st_arena_zalloc(&r->arena, (size_t)n * sizeof *al->types + 1);
    al->names = st_arena_zalloc(&r->arena, (size_t)n * sizeof *al->names + 1);
    if (!al->errors || !al->messages || !al->types || !al->names)
        return NULL;
    return al;
}

/* The controller item of resource i with room for its ncfg configs. */
static st_ctl_item_t *alter_item(st_kreq_t *r, admin_t *a, int i, int ncfg, st_ctl_cfg_t **cfg)
{
    st_ctl_item_t *it = admin_take(a, i);
    it->ncfg = ncfg > 0 ? ncfg : 0;
    *cfg = st_arena_zalloc(&r->arena, (size_t)it->ncfg * sizeof **cfg + 1);
    it->cfg = *cfg;
    return it;
}

/* A BROKER resource: "" (every broker's default) or a broker id, decided by the controller
 * (ops.h: broker_resource). */
static st_ctl_item_t *alter_broker(st_kreq_t *r, admin_t *a, alter_t *al, int i, st_kstr_t name,
                                   int ncfg, st_ctl_cfg_t **cfg)
{
    int64_t id = ST_MD_BROKER_DEFAULT;
    if (name.len > 0) {
        id = 0;
        for (int32_t k = 0; k < name.len; k++) {
            char ch = name.ptr[k];
            if (ch < '0' || ch > '9' || k >= 10 || (id = id * 10 + (ch - '0')) > INT32_MAX) {
                al->errors[i] = ST_KERR_INVALID_REQUEST;
                al->messages[i] = st_kstr("Unable to parse broker name as a base 10 number");
                return NULL;
            }
        }
    }
    st_ctl_item_t *it = alter_item(r, a, i, ncfg, cfg);
    it->name = NULL;
    it->broker_resource = true;
    it->broker = (int32_t)id;
    return it;
}

/* Answers resource i directly, or returns a controller item for it with its name set (the
 * caller adds the configs, of which there are ncfg). */
static st_ctl_item_t *alter_resource(st_kreq_t *r, admin_t *a, alter_t *al, int i, int8_t type,
                                     st_kstr_t name, int ncfg, st_ctl_cfg_t **cfg)
{
    al->types[i] = type;
    al->names[i] = name;
    al->messages[i] = ST_KSTR_NULL;
    const char *cname = NULL;
    /* Kafka decides authorization before anything else: ALTER_CONFIGS on the topic, on the
     * group, or on the cluster for a broker, a broker logger and client metrics */
    bool on_cluster = type == ST_RES_BROKER || type == 8 || type == 16;
    if (on_cluster || type == 32) {
        bool ok = on_cluster ? st_kauthz_cluster(r, ST_ACL_OP_ALTER_CONFIGS)
                             : st_kauthz_k(r, ST_ACL_OP_ALTER_CONFIGS, ST_ACL_RES_GROUP, name);
        if (!ok) {
            al->errors[i] = on_cluster ? ST_KERR_CLUSTER_AUTHORIZATION_FAILED
                                       : ST_KERR_GROUP_AUTHORIZATION_FAILED;
            al->messages[i] = st_kstr("Authorization failed.");
            return NULL;
        }
    }
    if (type == ST_RES_BROKER)
        return alter_broker(r, a, al, i, name, ncfg, cfg);
    if (type != ST_RES_TOPIC) {
        al->errors[i] = ST_KERR_INVALID_REQUEST;
        al->messages[i] = st_kstr("Unsupported resource type");
        return NULL;
    }
    if (!st_kauthz_k(r, ST_ACL_OP_ALTER_CONFIGS, ST_ACL_RES_TOPIC, name)) {
        al->errors[i] = ST_KERR_TOPIC_AUTHORIZATION_FAILED; /* ALTER_CONFIGS on the topic */
        al->messages[i] = st_kstr("Authorization failed.");
        return NULL;
    }
    if (!st_kreq_cstr(r, name, &cname)) {
        /* Kafka validates the name (Topic.validate) before looking the topic up. */
        al->errors[i] = ST_KERR_INVALID_TOPIC_EXCEPTION;
        al->messages[i] = st_kstr(msg_nul_topic);
        return NULL;
    }
    st_ctl_item_t *it = alter_item(r, a, i, ncfg, cfg);
    it->name = cname ? cname : "";
    return it;
}

/* Refuses resource i, whose item was just taken, for a config name or value holding a NUL
 * byte: the item goes back unused, so the controller never sees the resource. */
static void alter_refuse_config(admin_t *a, alter_t *al, int i)
{
    st_ctl_item_t *it = &a->op.items[--a->op.n];
    memset(it, 0, sizeof *it);
    it->assigned = -1;
    a->item_of[i] = -1;
    al->errors[i] = ST_KERR_INVALID_CONFIG;
    al->messages[i] = st_kstr(msg_nul_config);
}

void st_kh_alter_configs(st_kreq_t *r)
{
    st_kp_alter_configs_req_t req;
    if (st_kp_alter_configs_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed AlterConfigs request");
        return;
    }
    alter_t *al = alter_new(r, req.resources_count);
    admin_t *a = admin_new(r, ST_CTL_ALTER_CONFIGS, req.resources_count);
    if (!al || !a) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    a->req = al;
    a->op.validate_only = req.validate_only;
    a->op.cb = alter_done;
    for (int i = 0; i < req.resources_count; i++) {
        st_kp_alter_configs_req_resource_t *q = &req.resources[i];
        st_ctl_cfg_t *cfg = NULL; /* the item's configs, filled here */
        st_ctl_item_t *it =
            alter_resource(r, a, al, i, q->resource_type, q->resource_name, q->configs_count, &cfg);
        if (!it)
            continue;
        it->replace_configs = true;
        bool ok = true;
        for (int c = 0; cfg && c < it->ncfg; c++) {
            ok = ok && cfg_from(r, &cfg[c], q->configs[c].name, q->configs[c].value);
            cfg[c].op = cfg[c].value ? ST_CTL_CFG_SET : ST_CTL_CFG_DELETE;
        }
        if (!ok)
            alter_refuse_config(a, al, i);
    }
    admin_submit(r, a);
}

void st_kh_incremental_alter_configs(st_kreq_t *r)
{
    st_kp_incremental_alter_configs_req_t req;
    if (st_kp_incremental_alter_configs_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed IncrementalAlterConfigs request");
        return;
    }
    alter_t *al = alter_new(r, req.resources_count);
    admin_t *a = admin_new(r, ST_CTL_ALTER_CONFIGS, req.resources_count);
    if (!al || !a) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    a->req = al;
    a->op.validate_only = req.validate_only;
    a->op.cb = alter_done;
    for (int i = 0; i < req.resources_count; i++) {
        st_kp_incremental_alter_configs_req_resource_t *q = &req.resources[i];
        st_ctl_cfg_t *cfg = NULL; /* the item's configs, filled here */
        st_ctl_item_t *it =
            alter_resource(r, a, al, i, q->resource_type, q->resource_name, q->configs_count, &cfg);
        if (!it)
            continue;
        bool ok = true;
        for (int c = 0; cfg && c < it->ncfg; c++) {
            ok = ok && cfg_from(r, &cfg[c], q->configs[c].name, q->configs[c].value);
            cfg[c].op = q->configs[c].config_operation;
            if (cfg[c].op < 0 || cfg[c].op > 3)
                cfg[c].op = -1;
        }
        if (!ok)
            alter_refuse_config(a, al, i);
    }
    admin_submit(r, a);
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
    /* Kafka checks nothing else here: DESCRIBE on the cluster only decides whether the asked
     * authorized operations are given (0 when it is denied) */
    if (req.include_cluster_authorized_operations)
        resp.cluster_authorized_operations =
            st_kauthz_cluster(r, ST_ACL_OP_DESCRIBE)
                ? st_kauthz_ops(r, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME,
                                strlen(ST_ACL_CLUSTER_NAME))
                : 0;
    resp.brokers = st_arena_zalloc(&r->arena, (size_t)md->nbrokers * sizeof *resp.brokers + 1);
    if (!resp.brokers) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    const st_listener_t *l = st_conn_listener(r->conn);
    for (int i = 0; i < md->nbrokers; i++) {
        const st_md_broker_t *b = &md->brokers[i];
        if (b->fenced && !req.include_fenced_brokers)
            continue;
        const char *h;
        size_t hl;
        int32_t port;
        st_md_broker_endpoint(b, l ? l->name : NULL, &h, &hl, &port);
        if (b->node_id == (int32_t)r->shard->b->cfg->node_id && l) {
            h = l->adv_host;
            hl = strlen(h);
            port = l->adv_port;
        }
        resp.brokers[resp.brokers_count++] = (st_kp_describe_cluster_resp_broker_t){
            b->node_id, (st_kstr_t){h, (int32_t)hl}, port,
            b->rack ? st_kstr(b->rack) : ST_KSTR_NULL, b->fenced};
    }
    ST_KREQ_RESPOND(r, describe_cluster, &resp);
}
