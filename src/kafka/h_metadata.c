/*
 * h_metadata.c — Metadata (key 3): brokers, cluster id, controller, and topics with their
 * partitions, leaders, epochs, replicas and ISR, from this shard's metadata snapshot.
 *
 * topics == null (v1+) or an empty list at v0 means every topic. A named topic that does not
 * exist is created first when auto.create.topics.enable allows (autocreate.h); one that still
 * does not exist is UNKNOWN_TOPIC_OR_PARTITION, or INVALID_TOPIC_EXCEPTION for an illegal name.
 */
#include "kafka/autocreate.h"
#include "kafka/handlers.h"
#include "kafka/controller.h"
#include "proto/kerr.h"

static int fill_topic(st_kreq_t *r, const st_md_topic_t *t, st_kp_metadata_resp_topic_t *out)
{
    out->error_code = 0;
    out->name = st_kstr(t->name);
    memcpy(out->topic_id.b, t->id, 16);
    out->is_internal = t->internal;
    out->topic_authorized_operations = INT32_MIN;
    out->partitions_count = t->npartitions;
    out->partitions =
        st_arena_zalloc(&r->arena, (size_t)t->npartitions * sizeof *out->partitions + 1);
    int32_t *self = st_arena_alloc(&r->arena, sizeof *self);
    if (!out->partitions || !self)
        return -1;
    *self = (int32_t)r->shard->b->cfg->node_id;
    for (int32_t i = 0; i < t->npartitions; i++) {
        st_kp_metadata_resp_partition_t *p = &out->partitions[i];
        p->partition_index = i;
        p->leader_id = *self;
        p->leader_epoch = t->partitions[i].leader_epoch;
        p->replica_nodes = self;
        p->replica_nodes_count = 1;
        p->isr_nodes = self;
        p->isr_nodes_count = 1;
        p->offline_replicas_count = 0;
    }
    return 0;
}

static void metadata_answer(st_kreq_t *r, void *arg)
{
    st_kp_metadata_req_t req = *(st_kp_metadata_req_t *)arg;
    const st_md_t *md = r->shard->md;
    st_kp_metadata_resp_t resp = {0};
    resp.controller_id = md->controller_id;
    resp.cluster_id = st_kstr(md->cluster_id);
    resp.cluster_authorized_operations = INT32_MIN;
    resp.brokers_count = md->nbrokers;
    resp.brokers = st_arena_zalloc(&r->arena, (size_t)md->nbrokers * sizeof *resp.brokers + 1);
    if (!resp.brokers)
        goto oom;
    for (int i = 0; i < md->nbrokers; i++) {
        resp.brokers[i].node_id = md->brokers[i].node_id;
        resp.brokers[i].host = st_kstr(md->brokers[i].host);
        resp.brokers[i].port = md->brokers[i].port;
        resp.brokers[i].rack = ST_KSTR_NULL;
    }
    bool all = req.topics_count < 0 || (r->api_version == 0 && req.topics_count == 0);
    int n = all ? md->ntopics : req.topics_count;
    resp.topics = st_arena_zalloc(&r->arena, (size_t)n * sizeof *resp.topics + 1);
    if (!resp.topics)
        goto oom;
    int k = 0;
    for (int i = 0; i < n; i++) {
        st_kp_metadata_resp_topic_t *out = &resp.topics[k];
        const st_md_topic_t *t;
        if (all) {
            t = md->topics[i];
        } else {
            st_kp_metadata_req_topic_t *q = &req.topics[i];
            t = q->name.len >= 0 ? st_md_find(md, q->name.ptr, q->name.len)
                                 : st_md_find_id(md, q->topic_id.b);
            if (!t) {
                char msg[200];
                out->error_code =
                    q->name.len >= 0 &&
                            st_topic_name_check(q->name.ptr, (size_t)q->name.len, msg, sizeof msg)
                        ? ST_KERR_INVALID_TOPIC_EXCEPTION
                        : ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
                out->name = q->name;
                out->topic_id = q->topic_id;
                out->topic_authorized_operations = INT32_MIN;
                k++;
                continue;
            }
        }
        if (fill_topic(r, t, out))
            goto oom;
        k++;
    }
    resp.topics_count = k;
    ST_KREQ_RESPOND(r, metadata, &resp);
    return;
oom:
    st_kreq_fail(r, "out of memory");
}

void st_kh_metadata(st_kreq_t *r)
{
    st_kp_metadata_req_t *req = st_arena_zalloc(&r->arena, sizeof *req);
    if (!req || st_kp_metadata_req_decode(&r->body, r->api_version, req)) {
        st_kreq_fail(r, "malformed Metadata request");
        return;
    }
    bool autocreate = r->shard->b->cfg->auto_create_topics_enable &&
                      (r->api_version < 4 || req->allow_auto_topic_creation);
    if (!autocreate || req->topics_count <= 0) {
        metadata_answer(r, req);
        return;
    }
    st_kstr_t *names = st_arena_zalloc(&r->arena, (size_t)req->topics_count * sizeof *names);
    if (!names) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int i = 0; i < req->topics_count; i++)
        names[i] = req->topics[i].name;
    st_autocreate(r, names, req->topics_count, metadata_answer, req);
}
