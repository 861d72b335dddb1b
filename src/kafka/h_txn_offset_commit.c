/*
 * h_txn_offset_commit.c — TxnOffsetCommit (28): a transactional producer's offsets for a
 * consumer group (KIP-98, KIP-447). Routed like OffsetCommit (h_group.c) to the group's
 * coordinator, which writes them as one transactional batch of the producer to
 * __consumer_offsets and keeps them pending until the transaction's marker
 * (group/coord.h, st_gcoord_txn_commit).
 *
 * Each handler step: decode -> the request's partitions flattened (the generated mirror),
 * topics and partitions missing from the metadata answered UNKNOWN_TOPIC_OR_PARTITION as
 * Kafka's handler does -> the internal topic created if it does not exist yet -> the
 * coordinator (group_route.h) -> the answer encoded on the connection's shard.
 *
 * Threads: the handler on the connection's shard; txn_commit_exec on the coordinator's.
 */
#include <stdlib.h>
#include <string.h>

#include "group/coord.h"
#include "kafka/authz.h"
#include "kafka/group_route.h"
#include "kafka/handlers.h"
#include "proto/kerr.h"

typedef struct {
    st_kp_txn_offset_commit_req_t req;
    st_kp_txn_offset_commit_resp_t resp;
    st_kp_txn_offset_commit_item_t *q; /* the request's partitions (o.parts[k] is q[k]'s) */
    st_goffsets_t o;
} txn_commit_t;

static void txn_commit_exec(st_kshard_t *s, st_kgroup_call_t *g)
{
    txn_commit_t *c = g->item;
    st_gcoord_txn_commit(st_kgroup_coord(s), g->partition, &c->o, st_kgroup_call_return, g);
}

static void txn_commit_finish(st_kgroup_ctx_t *ctx)
{
    txn_commit_t *c = ctx->data;
    for (int k = 0; k < c->o.n; k++) {
        int16_t e = c->o.parts[k].error;
        /* clients before v2 may not expect it (Kafka's KAFKA-7296 rule) */
        if (e == ST_KERR_COORDINATOR_LOAD_IN_PROGRESS && ctx->r->api_version < 2)
            e = ST_KERR_COORDINATOR_NOT_AVAILABLE;
        c->q[k].resp_partition->error_code = e;
        if (e)
            ctx->r->error_code = e;
    }
    ST_KGROUP_RESPOND(ctx, txn_offset_commit, &c->resp);
}

static void txn_commit_route(st_kreq_t *r, void *arg)
{
    st_kgroup_ctx_t *ctx = arg;
    txn_commit_t *c = ctx->data;
    const st_md_t *md = r->shard->md;
    const st_md_topic_t *mt = NULL;
    for (int k = 0; k < c->o.n; k++) {
        const st_kp_txn_offset_commit_item_t *q = &c->q[k];
        if (k == 0 || q->topic_at != c->q[k - 1].topic_at)
            mt = st_md_find(md, q->name.ptr, q->name.len);
        st_goffset_t *p = &c->o.parts[k];
        if (!st_kauthz_k(r, ST_ACL_OP_READ, ST_ACL_RES_TOPIC, q->name))
            p->error = ST_KERR_TOPIC_AUTHORIZATION_FAILED; /* READ on the topic */
        else if (!mt || p->partition < 0 || p->partition >= mt->npartitions)
            p->error = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    }
    st_kgroup_call_group(ctx, c->req.group_id, txn_commit_exec, c);
    st_kgroup_ctx_end(ctx);
}

void st_kh_txn_offset_commit(st_kreq_t *r)
{
    txn_commit_t *c = st_arena_zalloc(&r->arena, sizeof *c);
    if (!c || st_kp_txn_offset_commit_req_decode(&r->body, r->api_version, &c->req)) {
        st_kreq_fail(r, "malformed TxnOffsetCommit request");
        return;
    }
    st_kp_txn_offset_commit_resp_init(&c->resp);
    c->o.n = st_kp_txn_offset_commit_mirror(&r->arena, &c->req, &c->resp, &c->q);
    c->o.parts =
        c->o.n < 0 ? NULL : st_arena_zalloc(&r->arena, (size_t)c->o.n * sizeof *c->o.parts + 1);
    st_kgroup_ctx_t *ctx = c->o.parts ? st_kgroup_ctx_new(r, txn_commit_finish, c) : NULL;
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    c->o.group_id = c->req.group_id;
    c->o.member_id = c->req.member_id;
    c->o.group_instance_id = c->req.group_instance_id;
    c->o.generation = c->req.generation_id;
    c->o.producer_id = c->req.producer_id;
    c->o.producer_epoch = c->req.producer_epoch;
    for (int k = 0; k < c->o.n; k++) {
        const st_kp_txn_offset_commit_req_partition_t *qp = c->q[k].req_partition;
        st_goffset_t *p = &c->o.parts[k];
        p->topic = c->q[k].name;
        p->partition = qp->partition_index;
        p->offset = qp->committed_offset;
        p->leader_epoch = qp->committed_leader_epoch;
        p->metadata = qp->committed_metadata;
    }
    /* refused (authz.h): every partition answers the error */
    int16_t denied = st_kauthz_txn_group(r, c->req.transactional_id, c->req.group_id);
    if (denied) {
        for (int k = 0; k < c->o.n; k++)
            c->o.parts[k].error = denied;
        st_kgroup_ctx_end(ctx); /* no call: answered at once */
        return;
    }
    st_kgroup_ensure_topic(r, txn_commit_route, ctx);
}
