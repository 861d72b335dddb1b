/*
 * partition.h — the partition: its log, its idempotent producers, its high watermark, the
 * shards with fetches waiting on it, and its log cleaner turns. The only way to change one.
 *
 * A shard owns a table of partitions (st_parts_t), found by (topic id, partition index). Every
 * change goes through a function here:
 *
 *   st_part_append   validate (compacted logs: every record has a key), check and record the
 *                    idempotent producers, assign offsets (storage), then wait as the acks mode
 *                    asks, move the high watermark and wake the waiting fetches, call back
 *   st_part_write_marker   a transaction's COMMIT or ABORT marker (control batch), fenced by
 *                    the producer and coordinator epochs, durable on the ISR before done()
 *   st_part_delete_records   move the log start, answer once that is durable
 *   st_parts_tick    storage housekeeping, the high watermark of time-based flushes, producer
 *                    expiry and snapshots, and the cleaner's scheduling
 *   st_parts_open / st_parts_delete / st_part_reconfigure   the table and the log's settings
 *
 * Reads (st_part_read, st_part_list_offset, st_part_end_for_epoch) see at most the high
 * watermark, except the leader epoch cache, which answers for the whole log as Kafka does;
 * read_committed reads (st_part_read_committed) at most the last stable offset (st_part_lso),
 * with the aborted transactions they overlap from the .txnindex files (st_part_aborted).
 *
 * The high watermark is what consumers may read: the durable offset under the strict flush
 * policy (consumers never see what a crash could take back), the log end under write caching.
 * It is computed in one place (partition.c) and moves only forward except when the log's end
 * is cut back. When it moves, every shard with a waiting fetch on the partition is told once,
 * through the wake callback the owner of the table gives (the partition knows nothing of
 * fetches or of how shards talk).
 *
 * acks. ST_ACKS_NONE answers nothing and waits for nothing; ST_ACKS_LEADER waits until the
 * append is as durable as the flush policy promises; ST_ACKS_ALL waits for the same today, since
 * the in-sync set of a single broker is its own replica. Replication makes ST_ACKS_ALL wait for
 * the in-sync set too, here and nowhere else.
 *
 * The log cleaner. A compacted partition (cleanup.policy holds "compact") is cleaned on its
 * own shard, in slices (st_log_clean_step), never in one blocking call (cleaner.c):
 *
 *   tick (100 ms) --st_parts_tick: due partitions, dirtiest first, up to cleaner_threads at
 *       once--> active --timer (1 ms)--> a turn: a few slices of ST_CLEAN_SLICE_BYTES for each
 *       active partition, at most ST_CLEAN_TURN_NS of work, then back to the event loop -->
 *       next turn while work remains; a partition whose step says "nothing to do" (or fails)
 *       leaves the active set; with none left the timer stops.
 *
 * Reads are throttled to cleaner_io_max_bytes_per_second / shards (a token bucket; the timer
 * waits out a deficit). Each clean's key map gets at most cleaner_dedupe_buffer_size / shards /
 * cleaner_threads. Partitions that do not compact cost one flag test per tick.
 *
 * Dependencies: storage, proto (Kafka error codes, the vocabulary of answers), io (the
 * cleaner's timer), base. Never kafka/ or broker/.
 *
 * Threads: everything on the owning shard's thread only.
 */
#ifndef ST_PARTITION_PARTITION_H
#define ST_PARTITION_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "base/trace.h"
#include "io/loop.h"
#include "partition/producer_state.h"
#include "storage/env.h"
#include "storage/log.h"

typedef struct st_parts st_parts_t;

/* How long an append waits before it is answered (the Produce request's acks). */
typedef enum st_acks {
    ST_ACKS_NONE = 0,   /* no answer: nothing waits */
    ST_ACKS_LEADER = 1, /* durable here, per the flush policy */
    ST_ACKS_ALL = -1,   /* durable on every in-sync replica (here alone, on one broker) */
} st_acks_t;

/* Tells shard `waiter` that partition (topic_id, index) moved or went away, so that its
 * waiting fetches read again. Called on the owner shard. */
typedef void (*st_parts_wake_fn)(void *arg, int waiter, const uint8_t topic_id[16], int32_t index);

/* What a shard's table needs from the broker's settings (copied at st_parts_init). */
typedef struct st_parts_config {
    const char *log_dirs;                    /* the data directory (kept by the caller) */
    int nshards;                             /* shards of the process (waiters, shares) */
    int64_t producer_ids_max;                /* producer.ids.max.per.partition */
    int64_t producer_id_expiration_ms;       /* producer.id.expiration.ms */
    bool cleaner_enable;                     /* log.cleaner.enable */
    int64_t cleaner_threads;                 /* log.cleaner.threads */
    int64_t cleaner_io_max_bytes_per_second; /* INT64_MAX: unlimited */
    int64_t cleaner_dedupe_buffer_size;      /* log.cleaner.dedupe.buffer.size */
    st_parts_wake_fn wake;                   /* see above */
    void *wake_arg;
} st_parts_config_t;

/* Most replicas of a partition (cluster/metadata.h's ST_MD_MAX_REPLICAS). */
#define ST_PART_MAX_REPLICAS 16

/* The partition's place in its replica set, as the metadata says (st_part_set_role). */
typedef struct st_part_role {
    bool leader;  /* this broker leads at leader_epoch */
    int32_t self; /* this broker's id */
    int32_t leader_id, leader_epoch, partition_epoch;
    int32_t min_isr; /* min.insync.replicas */
    int16_t nreplicas, nisr;
    int32_t replicas[ST_PART_MAX_REPLICAS];
    int32_t isr[ST_PART_MAX_REPLICAS];
    bool live[ST_PART_MAX_REPLICAS]; /* replicas[i]'s broker is registered and not fenced */
} st_part_role_t;

/* Where a follower's log diverges from the leader's (Fetch v12+'s diverging_epoch). */
typedef struct st_part_diverging {
    int32_t epoch;      /* -1: it does not diverge */
    int64_t end_offset; /* where the leader's `epoch` ends */
} st_part_diverging_t;

/* A partition: opaque outside partition/ (its fields are part_impl.h's); the modules above
 * call the functions below. */
typedef struct st_part st_part_t;

#define ST_CLEAN_MAX_ACTIVE  64          /* log.cleaner.threads' upper bound */
#define ST_CLEAN_SLICE_BYTES (256 << 10) /* input bytes of one st_log_clean_step */
#define ST_CLEAN_TURN_NS     1000000     /* work of one turn before yielding to the loop */
#define ST_CLEAN_RETRY_MS    15000       /* after a failed clean (Kafka's log.cleaner.backoff.ms) */

/* The shard's log cleaner: the partitions being cleaned and the read throttle. */
typedef struct st_parts_cleaner {
    st_timer_t timer; /* armed while a clean has work left */
    st_part_t *active[ST_CLEAN_MAX_ACTIVE];
    int nactive;
    double tokens;     /* bytes that may be read now (negative: a deficit to wait out) */
    int64_t refill_ns; /* when tokens were last refilled */
} st_parts_cleaner_t;

struct st_parts {
    st_part_t **buckets; /* NULL once closed */
    size_t nbuckets;
    size_t count;
    st_loop_t *loop;
    st_storage_env_t *env;
    st_parts_config_t cfg;
    st_parts_cleaner_t cleaner;
};

/* ---- the table ---- */

void st_parts_init(st_parts_t *t, st_loop_t *loop, st_storage_env_t *env,
                   const st_parts_config_t *cfg);
/* Closes every log cleanly and writes the producer state snapshots (shutdown), under two
 * deferred syncs (storage/env.h): everything but the clean-shutdown markers, then the markers. */
void st_parts_fini(st_parts_t *t);
st_part_t *st_parts_get(const st_parts_t *t, const uint8_t topic_id[16], int32_t index);
/* Opens (creating) the log of partition `index` of topic (name, id) with settings lc. When the
 * log cannot be opened the partition is still added, offline (log NULL, open_err set), and the
 * error returned. An open partition is returned as it is. */
int st_parts_open(st_parts_t *t, const char *topic, const uint8_t topic_id[16], int32_t index,
                  const st_log_config_t *lc, st_part_t **out);
/* Deletes the partition's files and forgets it; its waiting fetches are woken. */
void st_parts_delete(st_parts_t *t, st_part_t *p);
/* Calls fn for every partition (fn may delete the one it is given). */
void st_parts_each(st_parts_t *t, void (*fn)(void *arg, st_part_t *p), void *arg);
/* The shard's housekeeping (every 100 ms): each log's tick (roll, retention, time-based
 * flush), the high watermark that follows, idle producer ids expired and snapshots written;
 * then the cleaner's scheduling: when fewer than cleaner_threads partitions are being cleaned,
 * adds the dirtiest of those due (st_log_clean_due) and starts the turns. */
void st_parts_tick(st_parts_t *t);

/* ---- one partition ---- */

/* What a partition is, for the modules above (they call these, never read st_part_t's
 * fields; on the owner shard). */
const char *st_part_topic(const st_part_t *p);
const uint8_t *st_part_topic_id(const st_part_t *p);
int32_t st_part_index(const st_part_t *p);
/* Its log is open: false while offline (the open failed) or once deleted. */
bool st_part_online(const st_part_t *p);
/* Deleted (st_parts_delete), but not freed yet: durability callbacks still hold it. */
bool st_part_deleted(const st_part_t *p);
/* The high watermark: what consumers may read up to. */
int64_t st_part_hw(const st_part_t *p);
/* Whether a replication role was set (st_part_set_role: in a cluster), and that role. */
bool st_part_replicated(const st_part_t *p);
const st_part_role_t *st_part_role(const st_part_t *p);
/* The log, for a reader that must scan it whole (a coordinator loading its state from its
 * internal topic): NULL unless online. Appends go through st_part_append, never through it. */
st_log_t *st_part_log(st_part_t *p);

/* A partition's figures for the admin API and metrics. */
typedef struct st_part_stats {
    int64_t log_start, log_end, hw, size_bytes;
    int32_t segments;
    uint64_t records_in, bytes_in, records_out, bytes_out;
    bool leads;               /* a replicated partition led here */
    int16_t replicas, isr;    /* when it leads */
    int64_t max_follower_lag; /* when it leads: the furthest follower's lag in offsets (-1:
                                 one not heard from since the leadership began; 0: none) */
    bool compact;             /* cleanup.policy=compact: clean holds the cleaner's figures */
    st_log_clean_stats_t clean;
    int64_t lso;           /* last stable offset */
    int32_t ongoing_txns;  /* transactions ongoing */
    int64_t oldest_txn_ms; /* the oldest one's start (wall ms), -1: none */
} st_part_stats_t;
/* Fills *out; false (nothing filled) while the partition is offline or deleted. */
bool st_part_stats(st_part_t *p, st_part_stats_t *out);

/* Applies changed settings to an open log (the high watermark follows the flush policy). */
void st_part_reconfigure(st_part_t *p, const st_log_config_t *lc);

/* At most this many refused records are listed in st_part_rejects_t (the total is in its
 * summary). A compressed batch of tiny keyless records may hold millions; listing each, with
 * Kafka's ~100-byte text, would answer a small request with hundreds of megabytes. */
#define ST_PART_MAX_RECORD_ERRORS 10000

/* The keyless records refused by a compacted partition (KIP-467's record_errors): those of
 * the first batch holding any, by index within that batch. Freed by whoever got it. */
typedef struct st_part_rejects {
    int32_t total;      /* keyless records in the batch */
    int32_t listed;     /* of them, in index[] */
    char message[352];  /* each one's batch_index_error_message */
    char summary[1536]; /* the partition's error_message */
    int32_t index[];    /* ST_PART_MAX_RECORD_ERRORS: indices within the batch */
} st_part_rejects_t;

/* What an append did (all of it known when st_part_append returns). */
typedef struct st_part_append_res {
    int16_t error;              /* Kafka error code; 0 */
    int err;                    /* the Strata error behind it (ST_E_INVALID for a refusal of
                                   the partition's own: keys, producers; ST_E_CLOSED offline) */
    const char *why;            /* static text for error_message, or NULL */
    st_part_rejects_t *rejects; /* INVALID_RECORD for keyless records: the caller frees */
    int64_t base_offset, log_append_time, log_start_offset;
    int64_t appended_bytes; /* bytes written: 0 for a refusal or a producer's duplicate */
    bool waits_isr;         /* done will come once the ISR has it (acks=all, replicated), not at the
                               local sync */
} st_part_append_res_t;

/* An append's (or DeleteRecords') completion: err is 0 or the Strata error of its sync
 * (st_kerr_from gives the Kafka one). */
typedef void (*st_part_done_fn)(void *arg, int err);

/*
 * Appends the record batches records[0..len) (kept by the caller until this returns; their
 * base offsets and leader epochs are written in place).
 * Validates them (storage's batch checks; compacted logs refuse keyless records), answers a
 * retried idempotent batch with where it went the first time, assigns offsets and records the
 * producers. Fills *res. Then, unless res->error: returns true when done(arg, ...) will be
 * called once the batches are as durable as `acks` asks (never for ST_ACKS_NONE), false when
 * the answer is complete now. The high watermark moves and waiting fetches wake as the bytes
 * become durable, whatever acks was.
 */
bool st_part_append(st_part_t *p, uint8_t *records, size_t len, st_acks_t acks,
                    st_part_append_res_t *res, st_part_done_fn done, void *arg);

/* The same, with the Produce request's timeout: an acks=all append still waiting for the ISR
 * after timeout_ms (< 0: none) is answered ST_E_TIMEOUT (REQUEST_TIMED_OUT), checked at each
 * housekeeping tick. */
bool st_part_append_timed(st_part_t *p, uint8_t *records, size_t len, st_acks_t acks,
                          int64_t timeout_ms, st_part_append_res_t *res, st_part_done_fn done,
                          void *arg);
/* The same, for a sampled request (base/trace.h; tc NULL or unsampled: none): the local sync
 * the append waits for is recorded as a kafka.produce.sync span hanging from tc, on this
 * shard, as it completes (before done and before the high watermark moves on it). */
bool st_part_append_traced(st_part_t *p, uint8_t *records, size_t len, st_acks_t acks,
                           int64_t timeout_ms, const st_trace_ctx_t *tc, st_part_append_res_t *res,
                           st_part_done_fn done, void *arg);

/*
 * A transaction marker (WriteTxnMarkers): appends Kafka's control batch for producer pid
 * (epoch, COMMIT or ABORT, coordinator_epoch) after the producer state's fencing checks
 * (epoch below the producer's: INVALID_PRODUCER_EPOCH; coordinator epoch below the newest
 * seen: TRANSACTION_COORDINATOR_FENCED), ends the producer's ongoing transaction and, for an
 * abort of one that wrote records, records it in the .txnindex. Then as st_part_append_timed
 * with ST_ACKS_ALL: true when done(arg, err) will be called once the marker is durable on the
 * ISR, false when *res is the whole answer (res->error, or already durable).
 */
bool st_part_write_marker(st_part_t *p, int64_t pid, int16_t epoch, bool commit,
                          int32_t coordinator_epoch, int64_t timeout_ms, st_part_append_res_t *res,
                          st_part_done_fn done, void *arg);

/* DeleteRecords: moves the log start to `offset` (-1: the high watermark), which may not pass
 * the high watermark. Sets *error and *low_watermark; returns true when done(arg, ...) will be
 * called once the new start is durable (a crash after the answer must not bring the deleted
 * records back) and, on a replicated leader, once every live replica's log start reached it
 * (followers move theirs from the leader's fetch answers; a leader move must not bring the
 * records back either; ST_E_TIMEOUT after ST_PART_DELETE_WAIT_MS), false when the answer is
 * complete now. */
bool st_part_delete_records(st_part_t *p, int64_t offset, int16_t *error, int64_t *low_watermark,
                            st_part_done_fn done, void *arg);

/* ---- reads ---- */

/* A Fetch read of one partition. */
typedef struct st_part_read {
    int64_t hw, log_start;
    int64_t lso;        /* the last stable offset at the read */
    st_log_read_t read; /* read.bytes > 0: file ranges held until st_log_read_release */
} st_part_read_t;

/* Reads up to max_bytes from `offset`, never past the high watermark. Returns 0 (out->read
 * holds bytes only when read.bytes > 0; otherwise nothing is held) or a Kafka error code
 * (OFFSET_OUT_OF_RANGE outside log start..log end; out->hw and log_start are set once the
 * partition is online). */
int16_t st_part_read(st_part_t *p, int64_t offset, int32_t max_bytes, st_part_read_t *out);

/* The same for a read_committed consumer: never past the last stable offset. */
int16_t st_part_read_committed(st_part_t *p, int64_t offset, int32_t max_bytes,
                               st_part_read_t *out);

/* The last stable offset: the first offset of the oldest unstable transaction (ongoing, or
 * ended by a marker the high watermark has not passed), or the high watermark when that is
 * smaller or there is none. read_committed consumers see the log below it. */
int64_t st_part_lso(const st_part_t *p);

/* The aborted transactions that overlap [from, to) (Fetch's aborted_transactions for a
 * read_committed read from `from` that returned data below `to`): up to cap into out; returns
 * how many there are (may exceed cap), 0 while offline. */
int st_part_aborted(st_part_t *p, int64_t from, int64_t to, st_txn_aborted_t *out, int cap);

/* The producers of the partition (DescribeProducers), NULL while offline; read-only, on the
 * owner shard, valid until the next append. */
const st_pstate_t *st_part_producers(const st_part_t *p);

/* ListOffsets within what consumers may read: -1 latest (the high watermark), -2/-4/-5 the log
 * start, -3 the record with the largest timestamp, t >= 0 the first record with timestamp >= t
 * (offset -1 when there is none). Sets *offset, *timestamp (-1 unless a record was found by
 * time) and *epoch; returns 0 or a Kafka error code. */
int16_t st_part_list_offset(st_part_t *p, int64_t ts, int64_t *offset, int64_t *timestamp,
                            int32_t *epoch);

/* OffsetForLeaderEpoch from the leader epoch cache: the end offset of `epoch` (the largest
 * epoch <= it, and where the next began). current_epoch >= 0 is checked against the latest
 * (FENCED_LEADER_EPOCH below it, UNKNOWN_LEADER_EPOCH above). Returns 0 or a Kafka error. */
int16_t st_part_end_for_epoch(st_part_t *p, int32_t epoch, int32_t current_epoch,
                              int32_t *out_epoch, int64_t *end_offset);

/* ---- replication (replica.c) ----
 *
 * In a cluster every hosted partition has a role. A new leadership records its epoch and where
 * it starts before any append (KIP-101). The leader appends producers' batches at its leader
 * epoch; followers fetch them (replica/follow.h) and append them with their offsets
 * (st_part_append_replica), reporting in their next fetch how far their log is durable, the
 * latest epoch in it and its log start. Each fetch is validated against the leader's epochs
 * (st_part_follower_fetch, KIP-320): a diverging follower is told where to cut and counts for
 * nothing until it has. The leader's high watermark is the smallest durable log end over the
 * ISR (its own included) and the replicas it asked to add (KIP-497), and an acks=all append
 * answers once the high watermark passes it: every ISR member has it on disk. A replica joins
 * the ISR once it reached the high watermark and the start of the leader's epoch
 * (KAFKA-7128). A follower's high watermark is the leader's, capped by its own durable end,
 * and a replicated partition's starts at its log start when it opens. The full rules:
 * docs/replication.md.
 *
 * min.insync.replicas: an acks=all append to a leader whose ISR is smaller is refused
 * (NOT_ENOUGH_REPLICAS); one waiting when the ISR shrinks below it is answered
 * NOT_ENOUGH_REPLICAS_AFTER_APPEND (it is in the log, but not safe). A leader that loses its
 * leadership answers its waiting appends NOT_LEADER_OR_FOLLOWER.
 */

/* Shutdown: every acks=all append still waiting for the ISR is answered
 * NOT_LEADER_OR_FOLLOWER (the client retries on the next leader), so connections can close. */
void st_parts_release_acks(st_parts_t *t);
/* Sets the partition's role (on every metadata change that concerns it). A new leadership
 * (not leader before, or a new epoch) forgets the followers' positions. */
void st_part_set_role(st_part_t *p, const st_part_role_t *role);
/* Leader: replica `replica` fetches from `offset` (its durable log end); the latest epoch in
 * its log is last_epoch (-1: none) and its log starts at log_start. Validated first (Kafka's
 * rule, KIP-320): below the leader's log start, or past its log end with no epoch to compare,
 * is ST_KERR_OFFSET_OUT_OF_RANGE; when the leader's largest epoch <= last_epoch is smaller or
 * ends before offset, the logs diverge: *div gets that epoch and its end, and 0 is returned.
 * Only a fetch that neither diverges nor is out of range moves the replica's position (and so
 * the high watermark, acks=all and the ISR). div->epoch is -1 when it does not diverge. */
int16_t st_part_follower_fetch(st_part_t *p, int32_t replica, int64_t offset, int32_t last_epoch,
                               int64_t log_start, int64_t now_ms, st_part_diverging_t *div);
/* Leader: whether the ISR should change now: members that have not caught up for lag_max_ms
 * leave, replicas caught up with the high watermark join. When due (and not already asked for
 * at this partition epoch within retry_ms), fills isr/nisr, remembers it asked, returns true. */
bool st_part_isr_change_due(st_part_t *p, int64_t now_ms, int64_t lag_max_ms, int64_t retry_ms,
                            int32_t *isr, int16_t *nisr);
/* Follower: appends the leader's batches records[0..len) with their offsets; the first must
 * start at or after the log end (a compacted leader's log has gaps; a batch starting before it
 * is ST_E_OUT_OF_RANGE, nothing written). leader_hw is the leader's
 * high watermark from the same answer. Returns 0 and calls done(arg, err) once the batches
 * are durable (before returning when they already are, under write caching), or returns an
 * error and never calls done. */
int st_part_append_replica(st_part_t *p, const uint8_t *records, size_t len, int64_t leader_hw,
                           int64_t leader_log_start, st_part_done_fn done, void *arg);
/* Follower: the leader's high watermark and log start from an answer without records. The
 * local log start moves up to the leader's (DeleteRecords and retention replicate this way),
 * never past the local high watermark; returns 0 or the error of making it durable. */
int st_part_set_leader_hw(st_part_t *p, int64_t leader_hw, int64_t leader_log_start);
/* Follower: the log diverged from the leader's (replica/follow.h, R2): cuts it back to
 * min(offset, log end) and, when end_epoch >= 0, further to where the local log's largest
 * epoch <= end_epoch ends; an offset below the log start starts the log over, empty, there. */
int st_part_truncate(st_part_t *p, int64_t offset, int32_t end_epoch);
/* Follower: the leader's log starts past this log's end: empties the log and starts it at
 * `offset`. */
int st_part_restart_at(st_part_t *p, int64_t offset);
/* The log start offset (-1 offline). */
int64_t st_part_log_start(const st_part_t *p);
/* The log end offset, durable or not (-1 offline). */
int64_t st_part_log_end(const st_part_t *p);
/* The log start a follower reports to its leader: the one known durable (a crash can bring an
 * unsynced start back, and the leader's DeleteRecords counts on what followers report); a
 * leader's or a single broker's own log start. -1 offline. */
int64_t st_part_durable_start(const st_part_t *p);
/* Follower: makes the log start as it is now durable. 1: it is already (done not called);
 * 0: done(arg, err) once it is, on this thread; < 0: error, done never called. */
int st_part_wait_start_durable(st_part_t *p, st_part_done_fn done, void *arg);
/* Leader: the smallest log start over itself and every live replica (a live replica not heard
 * from since this leadership began counts as -1): DeleteRecords answers once it passed. */
int64_t st_part_low_watermark(const st_part_t *p);
/* How long a replicated DeleteRecords waits for the replicas' log starts (then
 * REQUEST_TIMED_OUT, as Kafka's delayed DeleteRecords). */
#define ST_PART_DELETE_WAIT_MS 30000
/* For this long after a leadership begins, an idempotent producer whose last batch the
 * previous leader wrote and whose next batch leaves a gap is answered NOT_LEADER_OR_FOLLOWER
 * (retriable) rather than OUT_OF_ORDER_SEQUENCE_NUMBER: its earlier batches may still be on
 * their way from the failover (append.c, gap_grace). Kafka's default request timeout. */
#define ST_PART_GAP_GRACE_MS 30000
/* The log end that is durable here (what a follower reports to its leader). */
int64_t st_part_durable_end(const st_part_t *p);
/* The latest leader epoch in the log (-1: none). */
int32_t st_part_latest_epoch(const st_part_t *p);
/* Leader: a replica's Fetch read: up to the log end, durable here or not, past the high
 * watermark (the followers' fetch and sync overlap the leader's own sync; the high watermark
 * stays the smallest durable end over the ISR, this replica's included: docs/replication.md). */
int16_t st_part_read_replica(st_part_t *p, int64_t offset, int32_t max_bytes, st_part_read_t *out);
/* Marks shard `waiter` as waiting for the log end to pass `seen_end` or the high watermark to
 * leave `seen_hw` (replica fetches: new records, or a high watermark the followers learn at
 * once); wakes it now if either moved already. */
void st_part_add_replica_waiter(st_part_t *p, int waiter, int64_t seen_end, int64_t seen_hw);
/* Leader: records were appended: wakes the replica fetches waiting on the log end. */
void st_part_appended(st_part_t *p);

/* ---- fetch waiters ---- */

/* Marks shard `waiter` as waiting for data past `seen_hw` (the high watermark its read saw); if
 * the high watermark is already elsewhere, wakes that shard at once. */
void st_part_add_waiter(st_part_t *p, int waiter, int64_t seen_hw);
/* The same for a read_committed fetch: waits for the last stable offset to move past
 * seen_lso. */
void st_part_add_lso_waiter(st_part_t *p, int waiter, int64_t seen_lso);

/* Internal to the module (partition.c, append.c, read.c, cleaner.c, replica.c). */
void st_part_update_hw(st_part_t *p);
int64_t st_part_repl_hw(st_part_t *p, int64_t local); /* the high watermark the role allows */
void st_part_repl_moved(st_part_t *p);                /* answers acks=all the hw passed */
int st_part_acks_all_wait(st_part_t *p, int64_t end, int64_t timeout_ms, st_part_done_fn done,
                          void *arg);
void st_part_expire_acks(st_part_t *p, int64_t now_ms); /* acks=all past their timeout */
void st_part_repl_fini(st_part_t *p);
void st_part_check_deletes(st_part_t *p); /* answers DeleteRecords the low watermark passed */
int st_part_delete_wait(st_part_t *p, int64_t offset, int64_t timeout_ms, st_part_done_fn done,
                        void *arg);
int st_part_follow_start(st_part_t *p); /* follower: the log start up to the leader's */
void st_part_maybe_free(st_part_t *p);
void st_part_note_marker(st_part_t *p, int64_t pid, int16_t epoch, bool commit,
                         int32_t coordinator_epoch, int64_t offset, int64_t ts);
void st_parts_clean_init(st_parts_t *t);
void st_parts_clean_fini(st_parts_t *t);
void st_parts_clean_forget(st_parts_t *t, st_part_t *p);
void st_parts_clean_tick(st_parts_t *t);

/* ---- KIP-890 part 1: a transactional produce verified with the coordinator (verify.c) ----
 *
 * The first batch of a producer's transaction on a partition is appended only once the
 * transaction coordinator confirmed the partition is in the transaction (AddPartitionsToTxn
 * verify_only), so a late or stray batch cannot open a transaction nobody will end (a hanging
 * transaction, which would hold the LSO back for ever):
 *
 *   owner: st_part_txn_verify_needed -> true: *guard taken, nothing appended
 *   request's shard: AddPartitionsToTxn(verify_only) to the coordinator
 *   owner again: st_part_txn_guard_holds(guard) -> append; false (a marker of this producer
 *       was written meanwhile: the transaction it was verified for may be over) -> refuse,
 *       retriable, and the producer's retry is verified afresh
 */
#define ST_PART_VERIFY_BUCKETS 16

/* Whether records (a produce's batches for p) open a transaction of their producer here: the
 * first batch is transactional and its producer has no ongoing transaction in p at that
 * epoch. When true, fills *pid, *epoch, *seq (the batch's first sequence) and *guard. */
bool st_part_txn_verify_needed(const st_part_t *p, const uint8_t *records, size_t len, int64_t *pid,
                               int16_t *epoch, int32_t *seq, uint32_t *guard);
/* After a verification: no marker of pid was written in p since *guard was taken. */
bool st_part_txn_guard_holds(const st_part_t *p, int64_t pid, uint32_t guard);
/*
 * Order among a producer's pipelined batches. A connection's requests are taken one after
 * another without waiting for answers, so while the first batch of a transaction waits for the
 * coordinator, the producer's next batches (each asking on its own) may be verified sooner: they
 * must not be appended before it (Kafka reads a connection's next request only once the one
 * before is answered, so it never meets this). st_part_verify_pending notes a batch that waits
 * (producer, epoch, its first sequence); st_part_verify_behind says whether a batch starting at
 * seq has an earlier one of its producer and epoch still waiting (then it is refused, retriable,
 * and comes again after it); st_part_verify_forget drops the note once the batch was appended
 * or refused. A note older than ST_PART_VERIFY_PENDING_MS is ignored (its request ended on a
 * path that did not come back here).
 */
#define ST_PART_VERIFYING         8
#define ST_PART_VERIFY_PENDING_MS 10000
void st_part_verify_pending(st_part_t *p, int64_t pid, int16_t epoch, int32_t seq);
bool st_part_verify_behind(const st_part_t *p, int64_t pid, int16_t epoch, int32_t seq);
void st_part_verify_forget(st_part_t *p, int64_t pid, int16_t epoch, int32_t seq);

#endif
