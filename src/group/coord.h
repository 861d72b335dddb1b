/*
 * coord.h — the group coordinator of one shard: the classic consumer-group protocol's state
 * machine and committed offsets for the groups whose __consumer_offsets partition the shard
 * owns, kept in memory and persisted as records of that partition (records.h).
 *
 * Which groups: group g lives in partition st_gcoord_partition_for(g, N) of __consumer_offsets
 * (Kafka's abs(String.hashCode) % N, so Kafka's tools agree); the shard owning that partition
 * is the coordinator. The Kafka layer routes each request there and hands the partition's log
 * to st_gcoord_load() when this broker leads the partition (in a cluster, the leader of its
 * __consumer_offsets partition coordinates a group), and calls st_gcoord_unload() when it no
 * longer does: another broker's coordinator then loads the same records from its replica.
 *
 * Load and unload of a partition (Kafka's onElection / onResignation):
 *
 *   not loaded --st_gcoord_load(epoch)--> loaded (serves its groups, writes to its log)
 *   loaded --st_gcoord_unload--> not loaded: waiting JoinGroup/SyncGroup answered
 *       NOT_COORDINATOR, members and timers dropped, groups out of the table at once; a group
 *       with writes in flight is kept aside until they complete (their requests are answered
 *       as the writes end, invariant 3), then freed
 *   loaded at epoch e --leadership at another epoch--> unload, then load again (the log may
 *       have been cut back and rewritten in between, as a follower)
 *
 * Group states and the function behind each transition (Kafka's names):
 *
 *            +---------------------- member joins (prepare_rebalance) ---------+
 *            v                                                                  |
 *   Empty --join--> PreparingRebalance --all joined / rebalance timeout-->  CompletingRebalance
 *     ^                 |   ^         (complete_join: new generation,            |
 *     |   no member left|   |          leader gets the members)                  | leader's
 *     +-----------------+   +--- member joins, leaves, times out, changes -------+ SyncGroup
 *                           |    protocols (prepare_rebalance)                   v (durable)
 *                           +------------------------------------------------ Stable
 *   Empty --DeleteGroups / offsets expired--> Dead (freed once its tombstones are durable
 *                                                   and no other write refers to it)
 *
 * Compaction. __consumer_offsets is a cleanup.policy=compact topic like any other: the broker's
 * log cleaner (storage/log.h, st_log_clean_step) keeps the latest record of each key and, after
 * delete.retention.ms, drops tombstones. The coordinator's part is invariant 2; loading copes
 * with what cleaning leaves: offset gaps, a log whose first records are tombstones, batches
 * with fewer records than offsets or none.
 *
 * Invariants:
 *   1. In-memory state changes only once the record describing it is durable (commits,
 *      assignments, deletions), except membership changes that Kafka does not persist either
 *      (joins, leaves, expiries between generations) and expired offsets (dropped at once;
 *      a lost tombstone only brings back an offset that is expired anyway).
 *   2. Every record is keyed (records.h: group, topic and partition for an offset; group for
 *      metadata), and whatever is removed gets a tombstone for its key: expired offsets,
 *      OffsetDelete, DeleteGroups (the group's offsets, those of commits still being written,
 *      its metadata), a group gone by expiry. So the latest record of each key, replayed in
 *      log order, rebuilds the state: a cleaned log loads as the whole log would.
 *   3. A group is freed only when no write referring to it is in flight (g->writes).
 *   4. Every waiting JoinGroup/SyncGroup is answered exactly once: on completion, on fencing,
 *      on removal of its member, or by st_gcoord_drain().
 *   5. Every offset, committed or pending, keeps the log offset of the record that set it, and
 *      a commit never replaces an offset set by a later record (Kafka's rule for transactional
 *      and regular commits of one partition), so applying writes as they become durable and
 *      replaying the log agree. Each open transaction is in its group's list and in the
 *      coordinator's table by producer id, and in nothing else (st_group_txns_check).
 *
 * Threads: one coordinator per shard; every function on that shard's thread. Callbacks run
 * there too, possibly from inside the call that started the operation.
 */
#ifndef ST_GROUP_COORD_H
#define ST_GROUP_COORD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "group/assign.h"
#include "io/loop.h"
#include "proto/kafka_gen.h"
#include "storage/log.h"

/* The internal topic holding groups and committed offsets. */
#define ST_OFFSETS_TOPIC "__consumer_offsets"

#define ST_GCOORD_MAX_METADATA 4096 /* committed metadata longer than this is refused */

typedef struct st_gcoord st_gcoord_t;

/* Where an append of the coordinator's went (st_gcoord_config_t.append). */
typedef struct st_gcoord_appended {
    int64_t base_offset; /* offset of the first record written; -1 until known */
    int16_t error;       /* a refusal's Kafka error code, 0 */
} st_gcoord_appended_t;

typedef struct st_gcoord_config {
    int64_t min_session_timeout_ms;
    int64_t max_session_timeout_ms;
    int64_t initial_rebalance_delay_ms;
    int32_t max_size; /* group.max.size: members of a classic group (<= 0: no bound) */
    int64_t offsets_retention_ms;
    int64_t expire_check_ms; /* how often expired offsets are looked for */
    int32_t num_partitions;  /* partitions of __consumer_offsets (upper bound of indexes) */
    size_t max_batch_bytes;  /* records per batch written, in bytes (about) */
    /* Appends the batches the coordinator built (base offsets written in place) to partition
     * `partition` and calls done(arg, 0 or an error) once they are durable; returns 0, or an
     * error (done not called). out->base_offset (the first record's offset) is set before done
     * runs; out->error, on a refusal, is the partition's Kafka error (a transactional batch of
     * a fenced producer epoch: INVALID_PRODUCER_EPOCH, PRODUCER_FENCED), 0 for none. The Kafka
     * layer passes the partition layer's append, which also moves the high watermark. NULL:
     * the coordinator appends to the log it loaded (unit tests). */
    int (*append)(void *ctx, int32_t partition, uint8_t *data, size_t len,
                  st_gcoord_appended_t *out, void (*done)(void *arg, int res), void *arg);
    void *ctx;
    /* KIP-848 consumer groups */
    int32_t consumer_session_timeout_ms;    /* group.consumer.session.timeout.ms */
    int32_t consumer_heartbeat_interval_ms; /* group.consumer.heartbeat.interval.ms */
    int32_t consumer_max_size;              /* group.consumer.max.size (<= 0: no bound) */
    const char *consumer_assignors;         /* group.consumer.assignors, comma-separated; the
                                               first is the default (NULL: "uniform,range") */
    /* The version of the broker's topic metadata (it changes with every topic created or
     * deleted) and, when it changed, the topics themselves: *out a malloc'd array, names
     * malloc'd too, freed by the coordinator. NULL: no topics (unit tests without them). */
    int64_t (*topics_version)(void *ctx);
    int (*topics)(void *ctx, st_gtopic_t **out, int *n);
} st_gcoord_config_t;

typedef void (*st_gcoord_done_fn)(void *arg);

int st_gcoord_create(st_gcoord_t **out, st_loop_t *loop, const st_gcoord_config_t *cfg);
/* Frees everything. Call after st_gcoord_drain() and after the logs were closed. */
void st_gcoord_destroy(st_gcoord_t *c);
/* Shutdown: answers every waiting JoinGroup/SyncGroup (NOT_COORDINATOR), stops the timers,
 * and refuses requests from now on. Writes in flight still complete. */
void st_gcoord_drain(st_gcoord_t *c);

/* Reads partition `partition`'s log from its start and rebuilds its groups; the coordinator
 * then serves them and writes to that log. Blocking (start-up, or a new empty partition). */
int st_gcoord_load(st_gcoord_t *c, int32_t partition, st_log_t *log, int32_t epoch);
bool st_gcoord_loaded(const st_gcoord_t *c, int32_t partition);
/* The leader epoch partition `partition` was loaded at (st_gcoord_load's `epoch`), -1 when it
 * is not loaded. */
int32_t st_gcoord_epoch(const st_gcoord_t *c, int32_t partition);
/* Stops serving partition `partition`'s groups (diagram above): every request about them is
 * NOT_COORDINATOR from now on, until it is loaded again. Nothing when it is not loaded. */
void st_gcoord_unload(st_gcoord_t *c, int32_t partition);

/* Kafka's partition of a group: abs(Java String.hashCode of the id) % n. */
int32_t st_gcoord_partition_for(st_kstr_t group_id, int32_t n);

/* ---- membership: the generated request/response structs, answered in `resp` (memory from
 * `a`, which must outlive the answer); resp must be initialised by the caller ---- */

void st_gcoord_join(st_gcoord_t *c, int32_t partition, const st_kp_join_group_req_t *req,
                    int16_t version, st_kstr_t client_id, st_kstr_t client_host, st_arena_t *a,
                    st_kp_join_group_resp_t *resp, st_gcoord_done_fn done, void *arg);
void st_gcoord_sync(st_gcoord_t *c, int32_t partition, const st_kp_sync_group_req_t *req,
                    int16_t version, st_arena_t *a, st_kp_sync_group_resp_t *resp,
                    st_gcoord_done_fn done, void *arg);
void st_gcoord_heartbeat(st_gcoord_t *c, int32_t partition, const st_kp_heartbeat_req_t *req,
                         st_kp_heartbeat_resp_t *resp);
/* Both forms: v0-2 (member_id) and v3+ (members, by id and/or instance id). */
void st_gcoord_leave(st_gcoord_t *c, int32_t partition, const st_kp_leave_group_req_t *req,
                     int16_t version, st_arena_t *a, st_kp_leave_group_resp_t *resp);
void st_gcoord_describe(st_gcoord_t *c, int32_t partition, st_kstr_t group_id, int16_t version,
                        st_arena_t *a, st_kp_describe_groups_resp_group_t *out);
/* Every live group of this shard passing the filters (empty filter: all). */
void st_gcoord_list(st_gcoord_t *c, const st_kstr_t *states, int nstates, const st_kstr_t *types,
                    int ntypes, st_arena_t *a, st_kp_list_groups_resp_group_t **out, int32_t *n);
/* DeleteGroups for one group: *error receives the result once the tombstones are durable. */
void st_gcoord_delete_group(st_gcoord_t *c, int32_t partition, st_kstr_t group_id, int16_t *error,
                            st_gcoord_done_fn done, void *arg);

/* ---- consumer groups (KIP-848) ----
 *
 * A group id is a classic group or a consumer group, never both: ConsumerGroupHeartbeat on a
 * classic group with members answers GROUP_ID_NOT_FOUND (an empty classic group, offsets only,
 * becomes a consumer group), JoinGroup on a consumer group with members
 * INCONSISTENT_GROUP_PROTOCOL (an empty one becomes a classic group).
 * Diagram and rules of the protocol in consumer.c; the assignors and the reconciliation in
 * assign.h. */

/* ConsumerGroupHeartbeat: answered (done) once the records the heartbeat changed are durable. */
void st_gcoord_consumer_heartbeat(st_gcoord_t *c, int32_t partition,
                                  const st_kp_consumer_group_heartbeat_req_t *req, int16_t version,
                                  st_kstr_t client_id, st_kstr_t client_host, st_arena_t *a,
                                  st_kp_consumer_group_heartbeat_resp_t *resp,
                                  st_gcoord_done_fn done, void *arg);
/* ConsumerGroupDescribe for one group (out->group_id set by the caller). */
void st_gcoord_consumer_describe(st_gcoord_t *c, int32_t partition, int16_t version, st_arena_t *a,
                                 st_kp_consumer_group_describe_resp_group_t *out);

/* ---- offsets ---- */

typedef struct st_goffset {
    st_kstr_t topic;
    int32_t partition;
    int64_t offset;       /* commit: in; fetch: out (-1 when none) */
    int32_t leader_epoch; /* -1 when unknown */
    st_kstr_t metadata;
    int64_t commit_ts; /* commit: the client's commit time (OffsetCommit v1), <= 0: now */
    int64_t expire_ts; /* commit, the coordinator's: commit time + retention_ms, 0: none */
    int16_t error;     /* in: set when already refused (then left alone); out: the result */
} st_goffset_t;

typedef struct st_goffsets {
    st_kstr_t group_id;
    st_kstr_t member_id;         /* commit */
    st_kstr_t group_instance_id; /* commit */
    int32_t generation;          /* commit: -1 for commits from outside the group */
    int64_t retention_ms;        /* commit: OffsetCommit v2-v4's retention_time_ms: the offsets
                                    expire that long after their commit time; <= 0: after
                                    offsets.retention.minutes, as the others */
    int64_t producer_id;         /* transactional commit */
    int16_t producer_epoch;      /* transactional commit */
    bool all;                    /* fetch: every offset of the group (parts allocated from `a`) */
    bool require_stable;         /* fetch: UNSTABLE_OFFSET_COMMIT where one is pending */
    int16_t version;             /* commit: the OffsetCommit version (v9+: GROUP_ID_NOT_FOUND
                                    for a missing group with a generation) */
    bool check_member;           /* fetch (v9+): member_id and generation (the member epoch)
                                    are checked against a consumer group's member */
    int n;
    st_goffset_t *parts;
    int16_t error; /* group-level result (fetch, offset delete) */
} st_goffsets_t;

/* OffsetCommit: answers (done) once the records are durable. */
void st_gcoord_commit(st_gcoord_t *c, int32_t partition, st_goffsets_t *o, st_gcoord_done_fn done,
                      void *arg);
/* OffsetFetch: synchronous. With require_stable, a part with a pending transactional offset
 * of the group (or one being written) answers UNSTABLE_OFFSET_COMMIT, offset -1. */
void st_gcoord_fetch(st_gcoord_t *c, int32_t partition, st_goffsets_t *o, st_arena_t *a);
/* OffsetDelete: refuses offsets of topics a live member subscribes to; answers once the
 * tombstones are durable. */
void st_gcoord_offset_delete(st_gcoord_t *c, int32_t partition, st_goffsets_t *o,
                             st_gcoord_done_fn done, void *arg);

/* ---- transactional offsets (KIP-98, KIP-447) ----
 *
 * TxnOffsetCommit writes the offsets as one transactional batch of ordinary offset commit
 * records (o->producer_id and _epoch, base sequence -1): once durable they are pending for
 * (group, producer), invisible to OffsetFetch, until a marker of the producer is durable in
 * the partition: COMMIT makes them committed (each unless the committed offset already held
 * came from a later record of the log: the later record wins, as Kafka), ABORT drops them.
 * Loading does the same with the transactional and control batches it meets; what is still
 * pending at the end of the log stays pending (the transaction coordinator sends the marker).
 * A tombstone of a key (OffsetDelete, DeleteGroups) removes its pending offsets too; a key
 * with a pending offset does not expire, nor does a group with an open transaction. */

/* TxnOffsetCommit: parts already refused are left alone; with none left nothing is done.
 * The group check is Kafka's for transactional commits (KIP-447): a group that does not
 * exist is created (Empty) unless the generation is >= 0 (ILLEGAL_GENERATION); with a
 * generation, member id or instance id the member must be the group's (UNKNOWN_MEMBER_ID,
 * FENCED_INSTANCE_ID) at its generation (ILLEGAL_GENERATION); the group's state is not
 * checked. Answers (done) once the batch is durable. */
void st_gcoord_txn_commit(st_gcoord_t *c, int32_t partition, st_goffsets_t *o,
                          st_gcoord_done_fn done, void *arg);
/* A marker of producer pid (COMMIT when commit) is durable in partition `partition`: its
 * pending offsets there are applied or dropped. Nothing when none is pending, or when the
 * partition is not loaded (its load will read the marker). */
void st_gcoord_txn_marker(st_gcoord_t *c, int32_t partition, int64_t pid, bool commit);
/* The pending offset of (group, pid, topic-partition), for tests: true and *offset. */
bool st_gcoord_pending(const st_gcoord_t *c, st_kstr_t group, int64_t pid, st_kstr_t topic,
                       int32_t partition, int64_t *offset);

/* ---- housekeeping, for tests ---- */

/* Looks for expired offsets now (the timer does it every expire_check_ms). */
void st_gcoord_expire_now(st_gcoord_t *c);
/* Number of groups this coordinator holds. */
int st_gcoord_group_count(const st_gcoord_t *c);

#endif
