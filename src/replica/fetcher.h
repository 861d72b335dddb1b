/*
 * fetcher.h — the follower side of replication: one thread per broker that fetches the
 * partitions this broker follows from their leaders, as a Kafka replica fetcher does.
 *
 * The fetcher runs its own libuv loop on its own thread (io/uvthread.h). It keeps one TCP
 * connection (conn.h, shared with the inter-broker client) per leader broker (host:port) and
 * batches every partition it follows from that leader into one Fetch request (replica_id =
 * node.id). It never touches a partition: what the log must do is handed to the partition's owner
 * shard through the hooks (the kafka layer turns them into st_broker_post calls), and the shard
 * answers with st_fetcher_position once the log is durable there. A partition's decisions are
 * follow.h's state machine (st_rfollow_t), so the same code runs here and in the simulation test;
 * this file is its transport:
 *
 *   follow() --> FETCH: in the connection's next Fetch (fetch_offset, last_fetched_epoch,
 *       log_start_offset: follow.h R1) --answer--> st_rfollow_on_fetch -->
 *       append / truncate / restart (and hw with a new log start): hooks.job --> JOB until the
 *           shard's st_fetcher_position --> FETCH
 *       hw: hooks.job, no position expected --> FETCH
 *       FENCED_LEADER_EPOCH (this broker's metadata is behind) --> STOPPED until follow() names
 *           a new leader or epoch
 *       any other error (NOT_LEADER_OR_FOLLOWER and UNKNOWN_LEADER_EPOCH too: the leader may not
 *           have applied the metadata yet) --> FETCH after a backoff (100 ms doubling to 1 s),
 *           with at most one warning per partition every ST_FETCHER_WARN_MS
 *
 * Invariants:
 *   1. At most one Fetch in flight per connection; the next Fetch
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

#include <stdbool.h>
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
#define ST_FETCHER_WARN_MS        10000 /* a stuck partition warns at most this often */

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
    int64_t log_start;    /* the local log start */
} st_follow_t;

struct st_rfollow_action;

/* What the fetcher asks of a partition's owner shard. Called on the fetcher thread; each must
 * be handed to the shard, never run here. */
typedef struct st_fetcher_hooks {
    void *arg;
    /* Do what follow.h's action `a` says to the partition (a is the caller's: copy it; records
     * is malloc'ed and owned by the callee, NULL but for ST_RF_DO_APPEND). When want_position,
     * answer with st_fetcher_position once the log is durable after it. */
    void (*job)(void *arg, int shard, const uint8_t topic_id[16], int32_t partition,
                int32_t leader_epoch, const struct st_rfollow_action *a, uint8_t *records,
                bool want_position);
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
/* The owner shard's answer to a job: the partition's log is durable up to durable_end (-1:
 * unknown, the partition is gone), its latest epoch is last_epoch and it starts at log_start.
 * err != 0: the job failed; the fetcher backs off and fetches again from durable_end. */
void st_fetcher_position(st_fetcher_t *f, const uint8_t topic_id[16], int32_t partition,
                         int32_t leader_epoch, int64_t durable_end, int32_t last_epoch,
                         int64_t log_start, int err);

#endif
