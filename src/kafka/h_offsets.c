/*
 * h_offsets.c — ListOffsets (2), DeleteRecords (21) and OffsetForLeaderEpoch (23): each a
 * short step on the partitions' owner shards (pcall.h). In a cluster each is refused, per
 * partition, where this broker does not lead (leader.h), and current_leader_epoch (ListOffsets,
 * OffsetForLeaderEpoch) is checked against the snapshot's leader epoch.
 *
 * OffsetForLeaderEpoch answers followers (replica_id >= 0, asking where their log diverged
 * from the leader's before they fetch) exactly as consumers: from the leader's epoch cache,
 * which covers the whole log (st_part_end_for_epoch), and only on the leader.
 *
 * ListOffsets answers within what consumers may read (below the high watermark):
 *   -1 latest: the high watermark (read_committed: the last stable offset)   -2 earliest, -4
 * earliest local, -5: the log start -3 max timestamp: that record      t >= 0: first record with
 * timestamp >= t, else -1
 *
 * ListOffsets v0 (Kafka's deprecated offsets-array form, max_num_offsets in the request,
 * old_style_offsets in the answer) knows only -1 and -2 among the special times (any other
 * negative one is UNSUPPORTED_VERSION, as in Kafka 3.9) and answers at most one offset: -1 the
 * high watermark, -2 the log start, t >= 0 the first record with timestamp >= t, else the high
 * watermark. Kafka 3.9 answered t >= 0 from segment modification times (the base offset of the
 * newest segment last written at or before t, and up to max_num_offsets older bases), which is
 * coarser; Strata keeps no modification times per segment, so it answers from the records.
 */
#include <string.h>

#include "base/err.h"
#include "kafka/authz.h"
#include "kafka/pcall.h"
#include "proto/kerr.h"

/* The pcall items for a request of n partitions (n < 0: its response skeleton could not be
 * built), from the request's arena; NULL once the request has been failed. */
/* With ACLs on: op on the item's topic, else the item is answered TOPIC_AUTHORIZATION_FAILED
 * here (no owner sees it). */
static void pitem_authz(st_kreq_t *r, st_pitem_t *it, st_kstr_t topic, int op)
{
    if (st_kauthz_on(r) &&
        (topic.len < 0 || !st_kauthz(r, op, ST_ACL_RES_TOPIC, topic.ptr, (size_t)topic.len))) {
        it->error = ST_KERR_TOPIC_AUTHORIZATION_FAILED;
        it->owner = -1;
    }
}

static st_pitem_t *pitems_new(st_kreq_t *r, int n)
{
    st_pitem_t *it = n < 0 ? NULL : st_arena_zalloc(&r->arena, (size_t)n * sizeof *it + 1);
    if (!it)
        st_kreq_fail(r, "out of memory");
    return it;
}

/* ---- ListOffsets ---- */

static void list_one(st_kshard_t *s, st_part_t *p, st_pitem_t *it)
{
    (void)s;
    it->error = st_part_list_offset(p, it->value, &it->out_offset, &it->out_ts, &it->out_epoch);
    /* read_committed: latest is the last stable offset, and a record found by time must lie
     * below it (Kafka's lastFetchableOffset) */
    if (it->error || it->isolation != 1)
        return;
    int64_t lso = st_part_lso(p);
    if (it->value == -1) {
        it->out_offset = lso;
    } else if ((it->value >= 0 || it->value == -3) && it->out_offset >= lso) {
        it->out_offset = -1;
        it->out_ts = -1;
    }
}

/* v0 (see the top): a time past every record is the high watermark. */
static void list_one_v0(st_kshard_t *s, st_part_t *p, st_pitem_t *it)
{
    list_one(s, p, it);
    if (!it->error && it->value >= 0 && it->out_offset < 0)
        it->error = st_part_list_offset(p, -1, &it->out_offset, &it->out_ts, &it->out_epoch);
}

typedef struct {
    st_kp_list_offsets_req_t req;
    st_kp_list_offsets_resp_t resp;
    st_kp_list_offsets_item_t *q; /* the request's partitions, each with its answer */
    st_pitem_t *items;
    int n;
} list_ctx_t;

static void list_done(st_kreq_t *r, void *arg)
{
    list_ctx_t *c = arg;
    for (int k = 0; k < c->n; k++) {
        st_kp_list_offsets_resp_partition_t *o = c->q[k].resp_partition;
        st_pitem_t *it = &c->items[k];
        o->error_code = it->error;
        o->offset = it->error ? -1 : it->out_offset;
        o->timestamp = it->error ? -1 : it->out_ts;
        o->leader_epoch = it->error ? -1 : it->out_epoch;
        if (it->error)
            r->error_code = it->error;
        if (r->api_version == 0 && !it->error && c->q[k].req_partition->max_num_offsets > 0) {
            o->old_style_offsets = st_arena_alloc(&r->arena, sizeof *o->old_style_offsets);
            if (!o->old_style_offsets) {
                st_kreq_fail(r, "out of memory");
                return;
            }
            o->old_style_offsets[0] = it->out_offset;
            o->old_style_offsets_count = 1;
        }
    }
    ST_KREQ_RESPOND(r, list_offsets, &c->resp);
}

void st_kh_list_offsets(st_kreq_t *r)
{
    list_ctx_t *c = st_arena_zalloc(&r->arena, sizeof *c);
    if (!c || st_kp_list_offsets_req_decode(&r->body, r->api_version, &c->req)) {
        st_kreq_fail(r, "malformed ListOffsets request");
        return;
    }
    c->n = st_kp_list_offsets_mirror(&r->arena, &c->req, &c->resp, &c->q);
    if (!(c->items = pitems_new(r, c->n)))
        return;
    for (int k = 0; k < c->n; k++) {
        st_kp_list_offsets_item_t *q = &c->q[k];
        st_pitem_resolve(r, &c->items[k], q->name, q->partition_index,
                         q->req_partition->current_leader_epoch);
        pitem_authz(r, &c->items[k], q->name, ST_ACL_OP_DESCRIBE);
        c->items[k].value = q->req_partition->timestamp;
        c->items[k].isolation = r->api_version >= 2 ? c->req.isolation_level : 0;
        if (r->api_version == 0 && c->items[k].value < -2 && !c->items[k].error) {
            c->items[k].error = ST_KERR_UNSUPPORTED_VERSION;
            c->items[k].owner = -1;
        }
    }
    st_pcall(r, c->items, c->n, r->api_version == 0 ? list_one_v0 : list_one, list_done, c);
}

/* ---- DeleteRecords ---- */

/* The new log start is durable (or not): the item's owner answers. */
static void delrec_durable(void *arg, int err)
{
    st_pitem_t *it = arg;
    if (err)
        it->error = st_kerr_from(err);
    st_pcall_release(it);
}

/* Moves the log start; the answer waits until the new start is durable (partition.h). */
static void delrec_one(st_kshard_t *s, st_part_t *p, st_pitem_t *it)
{
    (void)s;
    if (st_part_delete_records(p, it->value, &it->error, &it->out_offset, delrec_durable, it))
        st_pcall_hold(it);
}

typedef struct {
    st_kp_delete_records_req_t req;
    st_kp_delete_records_resp_t resp;
    st_kp_delete_records_item_t *q; /* the request's partitions, each with its answer */
    st_pitem_t *items;
    int n;
} delrec_ctx_t;

static void delrec_done(st_kreq_t *r, void *arg)
{
    delrec_ctx_t *c = arg;
    for (int k = 0; k < c->n; k++) {
        st_pitem_t *it = &c->items[k];
        c->q[k].resp_partition->error_code = it->error;
        c->q[k].resp_partition->low_watermark = it->error ? -1 : it->out_offset;
    }
    ST_KREQ_RESPOND(r, delete_records, &c->resp);
}

void st_kh_delete_records(st_kreq_t *r)
{
    delrec_ctx_t *c = st_arena_zalloc(&r->arena, sizeof *c);
    if (!c || st_kp_delete_records_req_decode(&r->body, r->api_version, &c->req)) {
        st_kreq_fail(r, "malformed DeleteRecords request");
        return;
    }
    c->n = st_kp_delete_records_mirror(&r->arena, &c->req, &c->resp, &c->q);
    if (!(c->items = pitems_new(r, c->n)))
        return;
    for (int k = 0; k < c->n; k++) {
        st_pitem_resolve(r, &c->items[k], c->q[k].name, c->q[k].partition_index, -1);
        pitem_authz(r, &c->items[k], c->q[k].name, ST_ACL_OP_DELETE);
        c->items[k].value = c->q[k].req_partition->offset;
    }
    st_pcall(r, c->items, c->n, delrec_one, delrec_done, c);
}

/* ---- OffsetForLeaderEpoch ---- */

/* current_leader_epoch is checked against the snapshot's leader epoch already
 * (st_pitem_resolve), not the log's: a new leader's log may not hold its epoch yet. */
static void epoch_end_one(st_kshard_t *s, st_part_t *p, st_pitem_t *it)
{
    (void)s;
    it->error = st_part_end_for_epoch(p, (int32_t)it->value, -1, &it->out_epoch, &it->out_offset);
}

typedef struct {
    st_kp_offset_for_leader_epoch_req_t req;
    st_kp_offset_for_leader_epoch_resp_t resp;
    st_kp_offset_for_leader_epoch_item_t *q; /* the request's partitions, with their answers */
    st_pitem_t *items;
    int n;
} epoch_end_ctx_t;

static void epoch_end_done(st_kreq_t *r, void *arg)
{
    epoch_end_ctx_t *c = arg;
    for (int k = 0; k < c->n; k++) {
        st_pitem_t *it = &c->items[k];
        st_kp_offset_for_leader_epoch_resp_partition_t *o = c->q[k].resp_partition;
        o->error_code = it->error;
        o->leader_epoch = it->error ? -1 : it->out_epoch;
        o->end_offset = it->error ? -1 : it->out_offset;
    }
    ST_KREQ_RESPOND(r, offset_for_leader_epoch, &c->resp);
}

void st_kh_offset_for_leader_epoch(st_kreq_t *r)
{
    epoch_end_ctx_t *c = st_arena_zalloc(&r->arena, sizeof *c);
    if (!c || st_kp_offset_for_leader_epoch_req_decode(&r->body, r->api_version, &c->req)) {
        st_kreq_fail(r, "malformed OffsetForLeaderEpoch request");
        return;
    }
    c->n = st_kp_offset_for_leader_epoch_mirror(&r->arena, &c->req, &c->resp, &c->q);
    if (!(c->items = pitems_new(r, c->n)))
        return;
    /* Kafka's check, whatever replica_id says: CLUSTER_ACTION on the cluster (asked without a
     * log line) covers every topic, else DESCRIBE on each (TOPIC_AUTHORIZATION_FAILED) */
    bool replica = st_kauthz_quiet(r, ST_ACL_OP_CLUSTER_ACTION, ST_ACL_RES_CLUSTER,
                                   ST_ACL_CLUSTER_NAME, strlen(ST_ACL_CLUSTER_NAME));
    for (int k = 0; k < c->n; k++) {
        st_kp_offset_for_leader_epoch_item_t *q = &c->q[k];
        st_pitem_resolve(r, &c->items[k], q->topic, q->partition,
                         q->req_partition->current_leader_epoch);
        if (!replica)
            pitem_authz(r, &c->items[k], q->topic, ST_ACL_OP_DESCRIBE);
        c->items[k].value = q->req_partition->leader_epoch;
    }
    st_pcall(r, c->items, c->n, epoch_end_one, epoch_end_done, c);
}
