/*
 * h_txn_markers.c — WriteTxnMarkers (27), the receiving side of a transaction's end, and
 * DescribeProducers (61). Both are per-partition steps on the owners (pcall.h), refused where
 * this broker does not lead (leader.h: NOT_LEADER_OR_FOLLOWER) or does not have the topic
 * (UNKNOWN_TOPIC_OR_PARTITION).
 *
 * WriteTxnMarkers: for each marker and each of its partitions, on the partition's owner,
 * st_part_write_marker appends the COMMIT or ABORT control batch after the producer state's
 * fencing checks (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED) and answers once it
 * is durable on the ISR (acks=all). For a partition of __consumer_offsets, once the marker is
 * durable and still on the owner, the group coordinator hears of it
 * (st_kgroup_txn_marker: pending transactional offsets applied or dropped) before the answer.
 *
 *   request's shard                     owner shard
 *   decode -> items (marker x topic x partition) -> st_pcall ->
 *                                       write_one: st_part_write_marker --durable--> marker_done
 *                                       (__consumer_offsets: st_kgroup_txn_marker) -> release
 *   done: errors into the response skeleton <-
 *
 * DescribeProducers: each partition's producers as its producer state has them (producer id,
 * epoch, last sequence and timestamp, coordinator epoch, ongoing transaction's first offset),
 * copied on the owner into a malloc'd array, into the request's arena on the request's shard.
 */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kafka/authz.h"
#include "kafka/group_route.h"
#include "kafka/handlers.h"
#include "kafka/pcall.h"
#include "proto/kerr.h"

#define MARKER_TIMEOUT_MS 30000 /* Kafka's request.timeout.ms for the append */

/* ---- WriteTxnMarkers ---- */

typedef struct {
    const st_kp_write_txn_markers_req_marker_t *m;
    bool offsets_topic; /* set on the owner: the partition is __consumer_offsets' */
    st_part_append_res_t res;
} marker_item_t;

static void marker_done(void *arg, int err)
{
    st_pitem_t *it = arg;
    marker_item_t *mi = (marker_item_t *)it->data;
    if (err)
        it->error = st_kerr_from(err);
    if (!it->error && mi->offsets_topic)
        st_kgroup_txn_marker(st_kshard_current(), it->partition, mi->m->producer_id,
                             mi->m->transaction_result);
    st_pcall_release(it);
}

static void write_one(st_kshard_t *s, st_part_t *p, st_pitem_t *it)
{
    (void)s;
    marker_item_t *mi = (marker_item_t *)it->data;
    const st_kp_write_txn_markers_req_marker_t *m = mi->m;
    mi->offsets_topic = strcmp(st_part_topic(p), "__consumer_offsets") == 0;
    bool later =
        st_part_write_marker(p, m->producer_id, m->producer_epoch, m->transaction_result,
                             m->coordinator_epoch, MARKER_TIMEOUT_MS, &mi->res, marker_done, it);
    it->error = mi->res.error;
    if (later) {
        st_pcall_hold(it);
        return;
    }
    if (it->error)
        ST_DEBUG("WriteTxnMarkers to %s-%d for producer %lld refused: %s", st_part_topic(p),
                 st_part_index(p), (long long)m->producer_id, mi->res.why ? mi->res.why : "?");
    else if (mi->offsets_topic)
        st_kgroup_txn_marker(st_kshard_current(), it->partition, m->producer_id,
                             m->transaction_result);
}

typedef struct {
    st_kp_write_txn_markers_req_t req;
    st_kp_write_txn_markers_resp_t resp;
    st_pitem_t *items;
    int n;
} markers_ctx_t;

static void markers_done(st_kreq_t *r, void *arg)
{
    markers_ctx_t *c = arg;
    int k = 0;
    for (int i = 0; i < c->resp.markers_count; i++)
        for (int t = 0; t < c->resp.markers[i].topics_count; t++) {
            st_kp_write_txn_markers_resp_topic_result_t *o = &c->resp.markers[i].topics[t];
            for (int j = 0; j < o->partitions_count; j++, k++) {
                o->partitions[j].error_code = c->items[k].error;
                if (c->items[k].error)
                    r->error_code = c->items[k].error;
            }
        }
    ST_KREQ_RESPOND(r, write_txn_markers, &c->resp);
}

void st_kh_write_txn_markers(st_kreq_t *r)
{
    markers_ctx_t *c = st_arena_zalloc(&r->arena, sizeof *c);
    if (!c || st_kp_write_txn_markers_req_decode(&r->body, r->api_version, &c->req)) {
        st_kreq_fail(r, "malformed WriteTxnMarkers request");
        return;
    }
    st_kp_write_txn_markers_resp_init(&c->resp);
    for (int i = 0; i < c->req.markers_count; i++)
        for (int t = 0; t < c->req.markers[i].topics_count; t++)
            c->n += c->req.markers[i].topics[t].partition_indexes_count;
    int nm = c->req.markers_count;
    c->resp.markers = st_arena_zalloc(&r->arena, (size_t)nm * sizeof *c->resp.markers + 1);
    c->items = st_arena_zalloc(&r->arena, (size_t)c->n * sizeof *c->items + 1);
    marker_item_t *mis = st_arena_zalloc(&r->arena, (size_t)c->n * sizeof *mis + 1);
    if (!c->resp.markers || !c->items || !mis) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    c->resp.markers_count = nm;
    /* brokers' own request, or an admin's abort (KIP-664): ALTER on the cluster, asked without
     * a log line, else CLUSTER_ACTION (Kafka's checks) */
    bool allowed = st_kauthz_quiet(r, ST_ACL_OP_ALTER, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME,
                                   strlen(ST_ACL_CLUSTER_NAME)) ||
                   st_kauthz_cluster(r, ST_ACL_OP_CLUSTER_ACTION);
    int k = 0;
    for (int i = 0; i < nm; i++) {
        const st_kp_write_txn_markers_req_marker_t *m = &c->req.markers[i];
        st_kp_write_txn_markers_resp_marker_result_t *om = &c->resp.markers[i];
        st_kp_write_txn_markers_resp_marker_result_init(om);
        om->producer_id = m->producer_id;
        om->topics = st_arena_zalloc(&r->arena, (size_t)m->topics_count * sizeof *om->topics + 1);
        if (!om->topics) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        om->topics_count = m->topics_count;
        for (int t = 0; t < m->topics_count; t++) {
            const st_kp_write_txn_markers_req_topic_t *qt = &m->topics[t];
            st_kp_write_txn_markers_resp_topic_result_t *ot = &om->topics[t];
            st_kp_write_txn_markers_resp_topic_result_init(ot);
            ot->name = qt->name;
            ot->partitions = st_arena_zalloc(
                &r->arena, (size_t)qt->partition_indexes_count * sizeof *ot->partitions + 1);
            if (!ot->partitions) {
                st_kreq_fail(r, "out of memory");
                return;
            }
            ot->partitions_count = qt->partition_indexes_count;
            for (int j = 0; j < qt->partition_indexes_count; j++, k++) {
                ot->partitions[j].partition_index = qt->partition_indexes[j];
                mis[k].m = m;
                c->items[k].data = &mis[k];
                st_pitem_resolve(r, &c->items[k], qt->name, qt->partition_indexes[j], -1);
                if (!allowed) {
                    c->items[k].error = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
                    c->items[k].owner = -1;
                }
            }
        }
    }
    st_pcall(r, c->items, c->n, write_one, markers_done, c);
}

/* ---- DescribeProducers ---- */

typedef struct {
    st_kp_describe_producers_resp_producer_t *v; /* malloc'd on the owner */
    int n;
} producers_item_t;

static void describe_one(st_kshard_t *s, st_part_t *p, st_pitem_t *it)
{
    (void)s;
    producers_item_t *pi = (producers_item_t *)it->data;
    const st_pstate_t *ps = st_part_producers(p);
    size_t n = ps ? st_pstate_count(ps) : 0;
    if (n == 0)
        return;
    if (!(pi->v = calloc(n, sizeof *pi->v))) {
        it->error = ST_KERR_UNKNOWN_SERVER_ERROR;
        return;
    }
    for (const st_pentry_t *e = ps->oldest; e && pi->n < (int)n; e = e->newer) {
        st_kp_describe_producers_resp_producer_t *o = &pi->v[pi->n++];
        st_kp_describe_producers_resp_producer_init(o);
        o->producer_id = e->pid;
        o->producer_epoch = e->epoch;
        o->last_sequence = e->nbatches > 0 ? e->batches[e->nbatches - 1].last_seq : -1;
        o->last_timestamp = e->last_ms;
        o->coordinator_epoch = e->coordinator_epoch;
        o->current_txn_start_offset = e->txn_first;
    }
}

typedef struct {
    st_kp_describe_producers_req_t req;
    st_kp_describe_producers_resp_t resp;
    st_pitem_t *items;
    producers_item_t *pis;
    int n;
} producers_ctx_t;

static void describe_done(st_kreq_t *r, void *arg)
{
    producers_ctx_t *c = arg;
    int k = 0;
    for (int t = 0; t < c->resp.topics_count; t++)
        for (int j = 0; j < c->resp.topics[t].partitions_count; j++, k++) {
            st_kp_describe_producers_resp_partition_t *o = &c->resp.topics[t].partitions[j];
            producers_item_t *pi = &c->pis[k];
            o->error_code = c->items[k].error;
            if (!o->error_code && pi->n > 0 &&
                (o->active_producers =
                     st_arena_alloc(&r->arena, (size_t)pi->n * sizeof *o->active_producers))) {
                memcpy(o->active_producers, pi->v, (size_t)pi->n * sizeof *pi->v);
                o->active_producers_count = pi->n;
            }
            free(pi->v);
        }
    ST_KREQ_RESPOND(r, describe_producers, &c->resp);
}

void st_kh_describe_producers(st_kreq_t *r)
{
    producers_ctx_t *c = st_arena_zalloc(&r->arena, sizeof *c);
    if (!c || st_kp_describe_producers_req_decode(&r->body, r->api_version, &c->req)) {
        st_kreq_fail(r, "malformed DescribeProducers request");
        return;
    }
    st_kp_describe_producers_resp_init(&c->resp);
    for (int t = 0; t < c->req.topics_count; t++)
        c->n += c->req.topics[t].partition_indexes_count;
    int nt = c->req.topics_count;
    c->resp.topics = st_arena_zalloc(&r->arena, (size_t)nt * sizeof *c->resp.topics + 1);
    c->items = st_arena_zalloc(&r->arena, (size_t)c->n * sizeof *c->items + 1);
    c->pis = st_arena_zalloc(&r->arena, (size_t)c->n * sizeof *c->pis + 1);
    if (!c->resp.topics || !c->items || !c->pis) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    c->resp.topics_count = nt;
    int k = 0;
    for (int t = 0; t < nt; t++) {
        const st_kp_describe_producers_req_topic_t *qt = &c->req.topics[t];
        st_kp_describe_producers_resp_topic_t *ot = &c->resp.topics[t];
        st_kp_describe_producers_resp_topic_init(ot);
        ot->name = qt->name;
        ot->partitions = st_arena_zalloc(
            &r->arena, (size_t)qt->partition_indexes_count * sizeof *ot->partitions + 1);
        if (!ot->partitions) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        ot->partitions_count = qt->partition_indexes_count;
        for (int j = 0; j < qt->partition_indexes_count; j++, k++) {
            st_kp_describe_producers_resp_partition_init(&ot->partitions[j]);
            ot->partitions[j].partition_index = qt->partition_indexes[j];
            c->items[k].data = &c->pis[k];
            st_pitem_resolve(r, &c->items[k], qt->name, qt->partition_indexes[j], -1);
            if (!st_kauthz_k(r, ST_ACL_OP_READ, ST_ACL_RES_TOPIC, qt->name)) {
                c->items[k].error = ST_KERR_TOPIC_AUTHORIZATION_FAILED; /* READ (Kafka) */
                c->items[k].owner = -1;
            }
        }
    }
    st_pcall(r, c->items, c->n, describe_one, describe_done, c);
}
