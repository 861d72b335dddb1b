/*
 * pcall.h — run a short synchronous step on each partition's owner shard and gather.
 *
 * For the per-partition requests that need no waiting (ListOffsets, DeleteRecords,
 * OffsetForLeaderEpoch): items are grouped by owner, one fan-out leg (broker/fanout.h) per owner
 * runs `fn` on each of its items (with the partition, or NULL if the shard does not have it), and
 * `done` runs back on the request's shard once every owner has answered (an fn may hold its owner's
 * answer back while it waits: st_pcall_hold). Items with owner < 0 are skipped (the caller has
 * already set their error). On the owner, a partition it does not have, or (in a cluster) no
 * longer leads, is answered without fn (leader.h: st_kleader_local).
 */
#ifndef ST_KAFKA_PCALL_H
#define ST_KAFKA_PCALL_H

#include "broker/fanout.h"
#include "broker/request.h"

typedef struct st_pitem {
    uint8_t topic_id[16];
    int32_t partition;
    int owner;
    int16_t error;
    int64_t value;              /* the request's timestamp (ListOffsets), offset (DeleteRecords) or
                                   leader epoch (OffsetForLeaderEpoch) */
    int32_t current_epoch;      /* the request's current_leader_epoch, -1 when none */
    int8_t isolation;           /* ListOffsets' isolation_level (1: read_committed) */
    void *data;                 /* the handler's own per-item state (WriteTxnMarkers...) */
    int64_t out_offset, out_ts; /* results */
    int32_t out_epoch;
    st_fanout_leg_t *leg; /* the owner's leg (st_pcall_hold) */
} st_pitem_t;

typedef void (*st_pitem_fn)(st_kshard_t *s, st_part_t *p, st_pitem_t *it);
typedef void (*st_pdone_fn)(st_kreq_t *r, void *ctx);

void st_pcall(st_kreq_t *r, st_pitem_t *items, int n, st_pitem_fn fn, st_pdone_fn done, void *ctx);
/* For an fn that must wait before its item is answered (DeleteRecords waits until the new log
 * start is durable): holds back the owner's answer until st_pcall_release(it), on the
 * owner shard. Call from inside fn only. */
void st_pcall_hold(st_pitem_t *it);
void st_pcall_release(st_pitem_t *it);
/* Fills it->topic_id/owner/error for a topic looked up by name in the request's snapshot, and
 * checks that this broker leads it (leader.h; current_epoch: the request's current_leader_epoch,
 * -1 when it has none). An item refused here gets owner -1. */
void st_pitem_resolve(st_kreq_t *r, st_pitem_t *it, st_kstr_t topic, int32_t partition,
                      int32_t current_epoch);

#endif
