/*
 * h_metadata.c — Metadata (key 3): brokers, cluster id, controller, and topics with their
 * partitions, leaders, epochs, replicas and ISR, from this shard's metadata snapshot.
 *
 * topics == null (v1+) or an empty list at v0 means every topic. A named topic that does not
 * exist is created first when auto.create.topics.enable allows (autocreate.h); one that still
 * does not exist is UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION for an illegal name, or
 * LEADER_NOT_AVAILABLE (retriable) while the active controller, on another broker, creates it
 * (NOT_CONTROLLER) or when the controller lost its leadership with the creation in flight.
 *
 * brokers lists those registered and not fenced; a partition's offline_replicas are its replicas
 * on any other broker; a partition without a leader is LEADER_NOT_AVAILABLE with leader_id -1.
 * On a single broker every partition is [self] led by self (controller.c).
 */
#include <string.h>

#include "kafka/authz.h"
#include "kafka/autocreate.h"
#include "kafka/handlers.h"
#include "kafka/kshard.h"
#include "base/clock.h"
#include "base/log.h"
#include "kafka/controller.h"
#include "kafka/leader.h"
#include "proto/kerr.h"

/* One partition as the snapshot has it; a replica on a broker that is fenced or not registered
 * is offline. */
static int fill_partition(st_kreq_t *r, const st_md_t *md, const st_md_partition_t *mp,
                          st_kp_metadata_resp_partition_t *p)
{
    int32_t *ids =
        st_arena_alloc(&r->arena, (size_t)(2 * mp->nreplicas + mp->nisr) * sizeof *ids + 1);
    if (!ids)
        return -1;
    p->partition_index = mp->index;
    p->leader_id = mp->leader;
    p->error_code = mp->leader < 0 ? ST_KERR_LEADER_NOT_AVAILABLE : 0;
    p->leader_epoch = mp->leader_epoch;
    p->replica_nodes = ids;
    p->replica_nodes_count = mp->nreplicas;
    memcpy(p->replica_nodes, mp->replicas, (size_t)mp->nreplicas * sizeof *ids);
    p->isr_nodes = ids + mp->nreplicas;
    p->isr_nodes_count = mp->nisr;
    memcpy(p->isr_nodes, mp->isr, (size_t)mp->nisr * sizeof *ids);
    p->offline_replicas = ids + mp->nreplicas + mp->nisr;
    p->offline_replicas_count = 0;
    for (int i = 0; i < mp->nreplicas; i++)
        if (!st_md_broker_live(md, mp->replicas[i]))
            p->offline_replicas[p->offline_replicas_count++] = mp->replicas[i];
    return 0;
}

static int fill_topic(st_kreq_t *r, const st_md_t *md, const st_md_topic_t *t,
                      st_kp_metadata_resp_topic_t *out)
{
    out->error_code = 0;
    out->name = st_kstr(t->name);
    memcpy(out->topic_id.b, t->id, 16);
    out->is_internal = t->internal;
    out->topic_authorized_operations = INT32_MIN;
    out->partitions_count = t->npartitions;
    out->partitions =
        st_arena_zalloc(&r->arena, (size_t)t->npartitions * sizeof *out->partitions + 1);
    if (!out->partitions)
        return -1;
    for (int32_t i = 0; i < t->npartitions; i++)
        if (fill_partition(r, md, &t->partitions[i], &out->partitions[i]))
            return -1;
    return 0;
}

typedef struct {
    st_kp_metadata_req_t req;
    int16_t *created; /* per asked topic: its auto-creation's error, or NULL */
} metadata_t;

/* A topic asked for by name or id that this snapshot does not have. */
static void missing_topic(const metadata_t *m, int i, st_kp_metadata_resp_topic_t *out)
{
    const st_kp_metadata_req_topic_t *q = &m->req.topics[i];
    char msg[200];
    if (q->name.len >= 0 && st_topic_name_check(q->name.ptr, (size_t)q->name.len, msg, sizeof msg))
        out->error_code = ST_KERR_INVALID_TOPIC_EXCEPTION;
    else if (m->created && (m->created[i] == ST_KERR_NOT_CONTROLLER ||
                            m->created[i] == ST_KERR_REQUEST_TIMED_OUT))
        out->error_code = ST_KERR_LEADER_NOT_AVAILABLE; /* being created, or ask again */
    else
        out->error_code = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    out->name = q->name;
    out->topic_id = q->topic_id;
    out->topic_authorized_operations = INT32_MIN;
}

/* The brokers clients may use: registered and not fenced, each named by its advertised
 * endpoint of the listener the request came in on (Kafka's rule): this broker's from its
 * listener, the others' from what they registered (their inter-broker listener's when they
 * registered none by that name). */
static int fill_brokers(st_kreq_t *r, const st_md_t *md, st_kp_metadata_resp_t *resp)
{
    const st_listener_t *l = st_conn_listener(r->conn);
    int32_t self = (int32_t)r->shard->b->cfg->node_id;
    resp->brokers = st_arena_zalloc(&r->arena, (size_t)md->nbrokers * sizeof *resp->brokers + 1);
    if (!resp->brokers)
        return -1;
    for (int i = 0; i < md->nbrokers; i++) {
        const st_md_broker_t *b = &md->brokers[i];
        if (b->fenced)
            continue;
        st_kp_metadata_resp_broker_t *o = &resp->brokers[resp->brokers_count++];
        o->node_id = b->node_id;
        const char *h;
        size_t hl;
        st_md_broker_endpoint(b, l ? l->name : NULL, &h, &hl, &o->port);
        o->host = (st_kstr_t){h, (int32_t)hl};
        if (b->node_id == self && l) {
            o->host = st_kstr(l->adv_host);
            o->port = l->adv_port;
        }
        o->rack = b->rack ? st_kstr(b->rack) : ST_KSTR_NULL;
    }
    return 0;
}

static void metadata_answer(st_kreq_t *r, void *arg)
{
    const metadata_t *m = arg;
    const st_kp_metadata_req_t *req = &m->req;
    const st_md_t *md = r->shard->md;
    st_kp_metadata_resp_t resp = {0};
    resp.controller_id = md->controller_id;
    resp.cluster_id = st_kstr(md->cluster_id);
    resp.cluster_authorized_operations = INT32_MIN;
    bool all = req->topics_count < 0 || (r->api_version == 0 && req->topics_count == 0);
    int n = all ? md->ntopics : req->topics_count;
    resp.topics = st_arena_zalloc(&r->arena, (size_t)n * sizeof *resp.topics + 1);
    if (fill_brokers(r, md, &resp) || !resp.topics)
        goto oom;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const st_kp_metadata_req_topic_t *q = all ? NULL : &req->topics[i];
        const st_md_topic_t *t = all                ? md->topics[i]
                                 : q->name.len >= 0 ? st_md_find(md, q->name.ptr, q->name.len)
                                                    : st_md_find_id(md, q->topic_id.b);
        /* With ACLs on, a listing of every topic leaves out those the principal may not
         * DESCRIBE; one named is TOPIC_AUTHORIZATION_FAILED, known or not (Kafka's answer) */
        st_kstr_t name = t ? st_kstr(t->name) : q->name;
        bool described = !st_kauthz_on(r) ||
                         (name.len >= 0 &&
                          (all ? st_kauthz_quiet : st_kauthz)(
                              r, ST_ACL_OP_DESCRIBE, ST_ACL_RES_TOPIC, name.ptr, (size_t)name.len));
        if (!described && all)
            continue;
        st_kp_metadata_resp_topic_t *o = &resp.topics[k++];
        if (!described) {
            o->error_code = ST_KERR_TOPIC_AUTHORIZATION_FAILED;
            o->name = q->name;
            o->topic_id = q->topic_id;
            o->topic_authorized_operations = INT32_MIN;
            o->partitions = NULL;
            continue;
        }
        if (!t) {
            missing_topic(m, i, o);
            ST_DEBUG("Metadata: topic %.*s unknown here (metadata version %lld)",
                     (int)(req->topics[i].name.len > 0 ? req->topics[i].name.len : 0),
                     req->topics[i].name.ptr, (long long)md->version);
        } else if (fill_topic(r, md, t, o))
            goto oom;
    }
    resp.topics_count = k;
    /* v8+: the operations the principal may do, as Kafka's authorizedOperations: on each
     * topic it may describe (asked for; a refused one keeps the schema's default), and on the
     * cluster (v8-10, 0 without DESCRIBE on it) */
    if (r->api_version >= 8 && req->include_topic_authorized_operations)
        for (int i = 0; i < k; i++)
            if (resp.topics[i].name.len >= 0 &&
                resp.topics[i].error_code != ST_KERR_TOPIC_AUTHORIZATION_FAILED)
                resp.topics[i].topic_authorized_operations = st_kauthz_ops(
                    r, ST_ACL_RES_TOPIC, resp.topics[i].name.ptr, (size_t)resp.topics[i].name.len);
    if (r->api_version >= 8 && r->api_version <= 10 && req->include_cluster_authorized_operations)
        resp.cluster_authorized_operations =
            st_kauthz_cluster(r, ST_ACL_OP_DESCRIBE)
                ? st_kauthz_ops(r, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME,
                                strlen(ST_ACL_CLUSTER_NAME))
                : 0;
    ST_KREQ_RESPOND(r, metadata, &resp);
    return;
oom:
    st_kreq_fail(r, "out of memory");
}

/* A Metadata request waiting for this broker to catch up (shard.h md_parked). */
typedef struct st_md_park {
    st_kreq_t *r;
    struct st_md_park *next;
} md_park_t;

#define MD_WAIT_MAX_MS 10000

void st_kmetadata_ready(st_kshard_t *s, bool force)
{
    const st_config_t *cfg = s->b->cfg;
    st_kafka_shard_t *ks = st_kafka_shard(s);
    if (!ks || ks->md_ready)
        return;
    const st_md_broker_t *me = st_md_self(s->md, (int32_t)cfg->node_id);
    bool caught_up = me && !me->fenced;
    bool waited = ks->md_wait_since && st_mono_ms() - ks->md_wait_since > MD_WAIT_MAX_MS;
    if (!caught_up && !waited && !force)
        return;
    ks->md_ready = true;
    md_park_t *p = ks->md_parked;
    ks->md_parked = NULL;
    while (p) {
        md_park_t *next = p->next;
        st_kh_metadata(p->r);
        free(p);
        p = next;
    }
}

/* Parks r until the broker has caught up; false when it may be answered now. */
static bool metadata_park(st_kreq_t *r)
{
    st_kafka_shard_t *ks = st_kafka_shard(r->shard);
    if (!ks || ks->md_ready)
        return false;
    md_park_t *p = malloc(sizeof *p);
    if (!p)
        return false;
    if (!ks->md_wait_since)
        ks->md_wait_since = st_mono_ms();
    *p = (md_park_t){r, ks->md_parked};
    ks->md_parked = p;
    return true;
}

void st_kh_metadata(st_kreq_t *r)
{
    if (metadata_park(r))
        return;
    metadata_t *m = st_arena_zalloc(&r->arena, sizeof *m);
    if (!m || st_kp_metadata_req_decode(&r->body, r->api_version, &m->req)) {
        st_kreq_fail(r, "malformed Metadata request");
        return;
    }
    const st_kp_metadata_req_t *req = &m->req;
    bool autocreate = r->shard->b->cfg->auto_create_topics_enable &&
                      (r->api_version < 4 || req->allow_auto_topic_creation);
    if (!autocreate || req->topics_count <= 0) {
        metadata_answer(r, m);
        return;
    }
    st_kstr_t *names = st_arena_zalloc(&r->arena, (size_t)req->topics_count * sizeof *names);
    m->created = st_arena_zalloc(&r->arena, (size_t)req->topics_count * sizeof *m->created);
    if (!names || !m->created) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int i = 0; i < req->topics_count; i++)
        names[i] = req->topics[i].name;
    st_autocreate(r, names, req->topics_count, m->created, metadata_answer, m);
}
