/*
 * coord.h — the transaction coordinator of one shard: Kafka's transaction state machine for
 * the transactional ids whose __transaction_state partition the shard owns and this broker
 * leads, kept in memory and persisted as records of that partition (records.h).
 *
 * Which ids: id t lives in partition st_tcoord_partition_for(t, N) of __transaction_state
 * (Kafka's abs(String.hashCode) % N, the same hash as groups). The Kafka layer
 * (kafka/txn_route.c) routes each request there, loads a partition when this broker leads it
 * (st_tcoord_load: the whole log replayed; then every transaction found in PrepareCommit or
 * PrepareAbort has its markers sent again) and unloads it when it no longer does.
 *
 * States (Kafka's TransactionState) and the function behind each transition; every arrow is a
 * record written with acks=all, applied in memory only once durable (invariant 1):
 *
 *            init_pid (epoch bump / new producer id)
 *   (none) ------------------------------------------> Empty <----------------+
 *                                                        |                    |
 *                      add_partitions / AddOffsetsToTxn  v                    | init_pid
 *                                   +-------------> Ongoing ---+              |
 *                                   |   (more partitions) |    | end(commit)  |
 *                                   +---------------------+    v              |
 *       end(abort), or init_pid / timeout: PrepareEpochFence ->PrepareAbort  PrepareCommit
 *       (the epoch bumped in memory, then PrepareAbort written)   |           |
 *                                                  markers done   v           v markers done
 *                                                        CompleteAbort   CompleteCommit
 *   Empty / Complete* idle past transactional.id.expiration.ms --expire--> Dead (a tombstone;
 *   the id is forgotten once it is durable)
 *
 * PrepareEpochFence is never written: it is the pending state of an abort the coordinator
 * starts itself (a new incarnation's InitProducerId, a timeout); the record is PrepareAbort
 * with the bumped epoch, which fences the old producer.
 *
 * Markers: once PrepareCommit/PrepareAbort is durable the EndTxn is answered and
 * cfg.send_markers gets the transaction's partitions; the sender (the Kafka layer's
 * WriteTxnMarkers, with the coordinator epoch = the partition's leader epoch) retries until
 * every partition has its marker and then calls st_tcoord_markers_done, on this shard; the
 * coordinator then writes CompleteCommit/CompleteAbort.
 *
 * Invariants:
 *   1. In-memory state changes only once the record describing it is durable, and only if the
 *      partition is still loaded at the epoch the write began with (else NOT_COORDINATOR).
 *   2. At most one transition of an id is in flight (its pending state); a request meeting
 *      one gets CONCURRENT_TRANSACTIONS, as Kafka answers.
 *   3. Every record is keyed by the transactional id and the latest one is the whole state, so
 *      a compacted log loads as the whole log would; an expired id gets a tombstone.
 *   4. An id is freed only when no write refers to it.
 *
 * Threads: one coordinator per shard; every function on that shard's thread; callbacks there
 * too, possibly from inside the call that started the operation.
 */
#ifndef ST_TXN_COORD_H
#define ST_TXN_COORD_H

#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "io/loop.h"
#include "proto/kafka_gen.h"
#include "storage/log.h"
#include "txn/stats.h"

#define ST_TXN_TOPIC "__transaction_state"
/* How long an AddPartitionsToTxn waits for the previous transaction's completion. */
#define ST_TCOORD_PARK_MS 1000

typedef struct st_tcoord st_tcoord_t;

/* One partition of a transaction. */
typedef struct st_ttp {
    st_kstr_t topic;
    int32_t partition;
} st_ttp_t;

/* What cfg.send_markers is handed: valid during the call only (the sender copies it). */
typedef struct st_tmarkers {
    uint64_t id;               /* for st_tcoord_markers_done */
    int32_t partition;         /* of __transaction_state */
    int32_t coordinator_epoch; /* the partition's leader epoch it was loaded at */
    st_kstr_t transactional_id;
    int64_t producer_id;
    int16_t producer_epoch;
    bool commit;
    int n;
    const st_ttp_t *parts;
} st_tmarkers_t;

typedef struct st_tcoord_config {
    int32_t num_partitions;     /* of __transaction_state (upper bound of indexes) */
    int64_t max_timeout_ms;     /* transaction.max.timeout.ms */
    int64_t id_expiration_ms;   /* transactional.id.expiration.ms */
    int64_t abort_interval_ms;  /* transaction.abort.timed.out.transaction.cleanup.interval.ms */
    int64_t expire_interval_ms; /* transaction.remove.expired.transaction.cleanup.interval.ms */
    size_t max_batch_bytes;
    /* A new producer id (the Kafka layer's pid.h scheme). */
    int64_t (*next_pid)(void *ctx);
    /* As st_gcoord_config_t.append: NULL appends to the loaded log (unit tests). */
    int (*append)(void *ctx, int32_t partition, uint8_t *data, size_t len,
                  void (*done)(void *arg, int res), void *arg);
    /* Sends the markers of a transaction; st_tcoord_markers_done(c, m->id, ...) follows, later,
     * on this shard. NULL: markers are complete at once (unit tests that do not look). */
    void (*send_markers)(void *ctx, const st_tmarkers_t *m);
    /* The wall clock (NULL: st_wall_ms), so tests can move time. */
    int64_t (*now_ms)(void *ctx);
    void *ctx;
} st_tcoord_config_t;

/* An operation's answer. */
typedef struct st_tresult {
    int16_t error;
    int64_t producer_id;
    int16_t producer_epoch;
} st_tresult_t;

typedef void (*st_tcoord_done_fn)(void *arg);

int st_tcoord_create(st_tcoord_t **out, st_loop_t *loop, const st_tcoord_config_t *cfg);
/* Frees everything; after st_tcoord_drain, once no write is in flight or the logs closed. */
void st_tcoord_destroy(st_tcoord_t *c);
/* Shutdown: refuses requests from now on (NOT_COORDINATOR); writes in flight still complete. */
void st_tcoord_drain(st_tcoord_t *c);

/* Kafka's partition of a transactional id: abs(Java String.hashCode) % n. */
int32_t st_tcoord_partition_for(st_kstr_t transactional_id, int32_t n);

/* Replays partition `partition`'s log (blocking), then serves its ids at coordinator epoch
 * `epoch` and resends the markers of every transaction in PrepareCommit/PrepareAbort. */
int st_tcoord_load(st_tcoord_t *c, int32_t partition, st_log_t *log, int32_t epoch);
bool st_tcoord_loaded(const st_tcoord_t *c, int32_t partition);
int32_t st_tcoord_epoch(const st_tcoord_t *c, int32_t partition);
/* Forgets the partition's ids (writes in flight answer NOT_COORDINATOR; markers being sent
 * are dropped when they come back: the next coordinator sends them again). */
void st_tcoord_unload(st_tcoord_t *c, int32_t partition);

/* ---- the requests (partition: the id's, or -1, answered NOT_COORDINATOR) ---- */

/* InitProducerId with a transactional id. expected_pid / expected_epoch: the v3+ request's
 * (-1 when absent). */
void st_tcoord_init_pid(st_tcoord_t *c, int32_t partition, st_kstr_t id, int32_t timeout_ms,
                        int64_t expected_pid, int16_t expected_epoch, st_tresult_t *res,
                        st_tcoord_done_fn done, void *arg);
/* AddPartitionsToTxn (and AddOffsetsToTxn, with the group's __consumer_offsets partition):
 * res->error is the answer of every partition. One that meets the previous transaction of the
 * id still ending (PrepareCommit/PrepareAbort: its markers being written) waits for the
 * Complete* record, then is taken as if it arrived then; after ST_TCOORD_PARK_MS without it,
 * CONCURRENT_TRANSACTIONS (Kafka answers that at once; clients back off before they retry:
 * librdkafka 20 ms, KafkaJS its retry backoff, and KafkaJS not at all for AddOffsetsToTxn).
 * id, parts and res must stay valid until done. */
void st_tcoord_add_partitions(st_tcoord_t *c, int32_t partition, st_kstr_t id, int64_t pid,
                              int16_t epoch, const st_ttp_t *parts, int n, st_tresult_t *res,
                              st_tcoord_done_fn done, void *arg);
/* AddPartitionsToTxn v4+ verify_only: errors[i] (0 or TRANSACTION_ABORTABLE, or the
 * transaction's refusal) for parts[i]. Synchronous. */
void st_tcoord_verify(st_tcoord_t *c, int32_t partition, st_kstr_t id, int64_t pid, int16_t epoch,
                      const st_ttp_t *parts, int n, int16_t *errors);
/* EndTxn. client_tv: the client's transaction version (2 with EndTxn v5: the epoch is bumped
 * at each end; 0 before). */
void st_tcoord_end(st_tcoord_t *c, int32_t partition, st_kstr_t id, int64_t pid, int16_t epoch,
                   bool commit, int16_t client_tv, st_tresult_t *res, st_tcoord_done_fn done,
                   void *arg);
/* DescribeTransactions for one id; out's strings and arrays from a. */
void st_tcoord_describe(st_tcoord_t *c, int32_t partition, st_kstr_t id, st_arena_t *a,
                        st_kp_describe_transactions_resp_transaction_state_t *out);
/* ListTransactions over this shard's loaded ids: states[] by id (-1 entries ignored; none:
 * every state), pids[] (none: every producer), min_duration_ms (< 0: none; else only
 * transactions running at least that long). Appends to *out / *n (growing from a). */
void st_tcoord_list(st_tcoord_t *c, const int *states, int nstates, const int64_t *pids, int npids,
                    int64_t min_duration_ms, st_arena_t *a,
                    st_kp_list_transactions_resp_transaction_state_t **out, int32_t *n);

/* The markers of job `id` (st_tmarkers_t.id) are all written (err 0): Complete* is written.
 * err != 0: the sender could not finish (no client yet, stopping, a stale coordinator): the
 * transaction stays in Prepare* and its markers are sent again at the next tick. An id no
 * longer known (unloaded meanwhile) is ignored. */
void st_tcoord_markers_done(st_tcoord_t *c, uint64_t id, int err);

/* Housekeeping, from the service's tick: every abort interval, Ongoing transactions past their
 * timeout are aborted with the epoch bumped; every expire interval, ids idle past the
 * expiration are removed; a Complete write that failed is tried again. */
void st_tcoord_tick(st_tcoord_t *c);
/* Both checks now, whatever the intervals (tests). */
void st_tcoord_check_now(st_tcoord_t *c);
/* Ids held (all partitions). */
int st_tcoord_count(const st_tcoord_t *c);

void st_tcoord_stats(const st_tcoord_t *c, st_tcoord_stats_t *out);

#endif
