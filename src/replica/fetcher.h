/*
 * fetcher.h — the follower side of replication: one thread per broker that fetches the
 * partitions this broker follows from their leaders, as a Kafka replica fetcher does.
 *
 * The fetcher runs its own libuv loop on its own thread. It keeps one TCP connection per
 * leader broker (host:port) and batches every partition it follows from that leader into one
 * Fetch request (replica_id = node.id). It never touches a partition: what the log must do is
 * handed to the partition's owner shard through the hooks (the kafka layer turns them into
 * st_broker_post calls), and the shard answers with st_fetcher_position once the log is durable
 * there. A partition's life in the fetcher:
 *
 *   follow() --last_epoch >= 0--> EPOCH: OffsetForLeaderEpoch(last_epoch) to the leader
 *       --answer: the log may hold a suffix the leader lacks--> hooks.truncate --position-->
 *   follow() --last_epoch == -1 (empty log)---------------------------------------> FETCH
 *   FETCH: in the connection's next Fetch --records--> hooks.append --position--> FETCH
 *                                          --no records--> hooks.leader_hw (if it moved), FETCH
 *   FENCED_LEADER_EPOCH (this broker's metadata is behind) --> STOPPED until follow() names a
 *       new leader or epoch
 *   any other error (NOT_LEADER_OR_FOLLOWER and UNKNOWN_LEADER_EPOCH too: the leader may not
 *       have applied the metadata yet) --> retried after a backoff (100 ms doubling to 1 s)
 *   OFFSET_OUT_OF_RANGE below the leader's log start --> hooks.truncate(leader's log start)
 *   OFFSET_OUT_OF_RANGE above the leader's log end --> EPOCH again
 *
 * Invariants:
 *   1. At most one Fetch and one OffsetForLeaderEpoch in flight per connection; the next Fetch
 *      leaves once every partition of the previous answer has reported its position (bounded
 *      by ST_FETCHER_GATE_MS), so a long poll never holds back a partition that just appended.
 *   2. At most one hook call that expects a position is outstanding per partition; a partition
 *      is in no request while it is.
 *   3. A partition's fetch offset is the durable log end the shard last reported (or follow()
 *      gave), so every Fetch tells the leader how far this replica is durable.
 *
 * Threads: st_fetcher_start / _stop on the main thread; st_fetcher_follow / _unfollow /
 * _position / _ref / _unref from any thread (they only queue to the fetcher's mutex-guarded
 * inbox); the hooks on the fetcher thread.
 */
#ifndef ST_REPLICA_FETCHER_H
#define ST_REPLICA_FETCHER_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/config.h"

typedef struct st_fetcher st_fetcher_t;

#define ST_FETCHER_MAX_WAIT_MS    500
#define ST_FETCHER_MAX_BYTES      (8 << 20)
#define ST_FETCHER_PART_MAX_BYTES (1 << 20)
#define ST_FETCHER_BACKOFF_MIN_MS 100
#define ST_FETCHER_BACKOFF_MAX_MS 1000
#define ST_FETCHER_GATE_MS        1000  /* longest a Fetch waits for the last answer's positions */
#define ST_FETCHER_REQ_TIMEOUT_MS 30000 /* an answer slower than this closes the connection */

/* A partition to follow (copied; strings need not outlive the call). */
typedef struct st_follow {
    const char *topic;
    uint8_t topic_id[16];
    int32_t partition;
    int shard; /* owner shard on this broker */
    int32_t leader_id;
    const char *leader_host;
    int leader_port;
    int32_t leader_epoch;
    int64_t fetch_offset; /* the local log's durable end */
    int32_t last_epoch;   /* the latest leader epoch in the local log (-1: none) */
} st_follow_t;

/* What the fetcher asks of a partition's owner shard. Called on the fetcher thread; each must
 * be handed to the shard, never run here. */
typedef struct st_fetcher_hooks {
    void *arg;
    /* Append the leader's batches records[0..len) (malloc'ed, owned by the callee), then call
     * st_fetcher_position with the durable end. leader_hw: the leader's high watermark. */
    void (*append)(void *arg, int shard, const uint8_t topic_id[16], int32_t partition,
                   int32_t leader_epoch, uint8_t *records, size_t len, int64_t leader_hw);
    /* Cut the log back to `offset`, and further to where the local log's `end_epoch` ends
     * when end_epoch >= 0 (the leader's log diverged after that epoch); an offset past the
     * log's end (or below its start) restarts the log there. Then st_fetcher_position. */
    void (*truncate)(void *arg, int shard, const uint8_t topic_id[16], int32_t partition,
                     int32_t leader_epoch, int64_t offset, int32_t end_epoch);
    /* The leader's high watermark moved (an answer without records); no position expected. */
    void (*leader_hw)(void *arg, int shard, const uint8_t topic_id[16], int32_t partition,
                      int32_t leader_epoch, int64_t hw);
} st_fetcher_hooks_t;

/* Starts the fetcher thread (cfg and hooks->arg must outlive it). Returns 0, or an error with
 * one line in err. The caller holds one reference. */
int st_fetcher_start(st_fetcher_t **out, const st_config_t *cfg, const st_fetcher_hooks_t *hooks,
                     char *err, size_t errlen);
/* Stops the thread (closes its connections at once, so bounded) and drops the caller's
 * reference. Calls made afterwards through other references are ignored. */
void st_fetcher_stop(st_fetcher_t *f);
/* More references: the fetcher's memory is freed with the last one (after st_fetcher_stop). */
void st_fetcher_ref(st_fetcher_t *f);
void st_fetcher_unref(st_fetcher_t *f);

/* Follow a partition. Again for the same partition with another leader, epoch or address:
 * starts over from fw (fetch_offset, last_epoch); with the same ones: nothing changes. */
void st_fetcher_follow(st_fetcher_t *f, const st_follow_t *fw);
void st_fetcher_unfollow(st_fetcher_t *f, const uint8_t topic_id[16], int32_t partition);
/* The owner shard's answer to an append or truncate: the partition's log is durable up to
 * durable_end (-1: unknown, the partition is gone). err != 0: the call failed; the fetcher
 * backs off and starts over from durable_end. */
void st_fetcher_position(st_fetcher_t *f, const uint8_t topic_id[16], int32_t partition,
                         int32_t leader_epoch, int64_t durable_end, int err);

#endif
