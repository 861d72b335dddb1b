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
 *   -1 latest: the high watermark      -2 earliest, -4 earliest local, -5: the log start
 *   -3 max timestamp: that record      t >= 0: first record with timestamp >= t, else -1
 */
#include "base/err.h"
#include "kafka/pcall.h"
#include "proto/kerr.h"

/* ---- ListOffsets ---- */

static void list_one(st_kshard_t *s, st_part_t *p, st_pitem_t *it)
{
    (void)s;
    it->error = st_part_list_offset(p, it->value, &it->out_offset, &it->out_ts, &it->out_epoch);
}

typedef struct {
    st_kp_list_offsets_req_t req;
    st_kp_list_offsets_resp_t resp;
    st_pitem_t *items;
} list_ctx_t;

static void list_done(st_kreq_t *r, void *arg)
{
    list_ctx_t *c = arg;
    int k = 0;
    for (int t = 0; t < c->resp.topics_count; t++)
        for (int p = 0; p < c->resp.topics[t].partitions_count; p++) {
            st_kp_list_offsets_resp_partition_t *o = &c->resp.topics[t].partitions[p];
            st_pitem_t *it = &c->items[k++];
            o->error_code = it->error;
            o->offset = it->error ? -1 : it->out_offset;
            o->timestamp = it->error ? -1 : it->out_ts;
            o->leader_epoch = it->error ? -1 : it->out_epoch;
            if (it->error)
                r->error_code = it->error;
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
    int total = 0;
    for (int t = 0; t < c->req.topics_count; t++)
        total += c->req.topics[t].partitions_count;
    c->items = st_arena_zalloc(&r->arena, (size_t)total * sizeof *c->items + 1);
    c->resp.topics =
        st_arena_zalloc(&r->arena, (size_t)c->req.topics_count * sizeof *c->resp.topics + 1);
    if (!c->items || !c->resp.topics) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    c->resp.topics_count = c->req.topics_count;
    int k = 0;
    for (int t = 0; t < c->req.topics_count; t++) {
        st_kp_list_offsets_req_topic_t *qt = &c->req.topics[t];
        st_kp_list_offsets_resp_topic_t *rt = &c->resp.topics[t];
        rt->name = qt->name;
        rt->partitions_count = qt->partitions_count;
        rt->partitions =
            st_arena_zalloc(&r->arena, (size_t)qt->partitions_count * sizeof *rt->partitions + 1);
        if (!rt->partitions) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        for (int p = 0; p < qt->partitions_count; p++) {
            st_pitem_t *it = &c->items[k++];
            rt->partitions[p].partition_index = qt->partitions[p].partition_index;
            st_pitem_resolve(r, it, qt->name, qt->partitions[p].partition_index,
                             qt->partitions[p].current_leader_epoch);
            it->value = qt->partitions[p].timestamp;
        }
    }
    st_pcall(r, c->items, k, list_one, list_done, c);
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
    st_pitem_t *items;
} delrec_ctx_t;

static void delrec_done(st_kreq_t *r, void *arg)
{
    delrec_ctx_t *c = arg;
    int k = 0;
    for (int t = 0; t < c->resp.topics_count; t++)
        for (int p = 0; p < c->resp.topics[t].partitions_count; p++) {
            st_pitem_t *it = &c->items[k++];
            c->resp.topics[t].partitions[p].error_code = it->error;
            c->resp.topics[t].partitions[p].low_watermark = it->error ? -1 : it->out_offset;
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
    int total = 0;
    for (int t = 0; t < c->req.topics_count; t++)
        total += c->req.topics[t].partitions_count;
    c->items = st_arena_zalloc(&r->arena, (size_t)total * sizeof *c->items + 1);
    c->resp.topics =
        st_arena_zalloc(&r->arena, (size_t)c->req.topics_count * sizeof *c->resp.topics + 1);
    if (!c->items || !c->resp.topics) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    c->resp.topics_count = c->req.topics_count;
    int k = 0;
    for (int t = 0; t < c->req.topics_count; t++) {
        st_kp_delete_records_req_topic_t *qt = &c->req.topics[t];
        st_kp_delete_records_resp_topic_t *rt = &c->resp.topics[t];
        rt->name = qt->name;
        rt->partitions_count = qt->partitions_count;
        rt->partitions =
            st_arena_zalloc(&r->arena, (size_t)qt->partitions_count * sizeof *rt->partitions + 1);
        if (!rt->partitions) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        for (int p = 0; p < qt->partitions_count; p++) {
            st_pitem_t *it = &c->items[k++];
            rt->partitions[p].partition_index = qt->partitions[p].partition_index;
            st_pitem_resolve(r, it, qt->name, qt->partitions[p].partition_index, -1);
            it->value = qt->partitions[p].offset;
        }
    }
    st_pcall(r, c->items, k, delrec_one, delrec_done, c);
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
    st_pitem_t *items;
} epoch_end_ctx_t;

static void epoch_end_done(st_kreq_t *r, void *arg)
{
    epoch_end_ctx_t *c = arg;
    int k = 0;
    for (int t = 0; t < c->resp.topics_count; t++)
        for (int p = 0; p < c->resp.topics[t].partitions_count; p++) {
            st_pitem_t *it = &c->items[k++];
            st_kp_offset_for_leader_epoch_resp_partition_t *o = &c->resp.topics[t].partitions[p];
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
    int total = 0;
    for (int t = 0; t < c->req.topics_count; t++)
        total += c->req.topics[t].partitions_count;
    c->items = st_arena_zalloc(&r->arena, (size_t)total * sizeof *c->items + 1);
    c->resp.topics =
        st_arena_zalloc(&r->arena, (size_t)c->req.topics_count * sizeof *c->resp.topics + 1);
    if (!c->items || !c->resp.topics) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    c->resp.topics_count = c->req.topics_count;
    int k = 0;
    for (int t = 0; t < c->req.topics_count; t++) {
        st_kp_offset_for_leader_epoch_req_topic_t *qt = &c->req.topics[t];
        st_kp_offset_for_leader_epoch_resp_topic_t *rt = &c->resp.topics[t];
        rt->topic = qt->topic;
        rt->partitions_count = qt->partitions_count;
        rt->partitions =
            st_arena_zalloc(&r->arena, (size_t)qt->partitions_count * sizeof *rt->partitions + 1);
        if (!rt->partitions) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        for (int p = 0; p < qt->partitions_count; p++) {
            st_pitem_t *it = &c->items[k++];
            rt->partitions[p].partition = qt->partitions[p].partition;
            st_pitem_resolve(r, it, qt->topic, qt->partitions[p].partition,
                             qt->partitions[p].current_leader_epoch);
            it->value = qt->partitions[p].leader_epoch;
        }
    }
    st_pcall(r, c->items, k, epoch_end_one, epoch_end_done, c);
}
