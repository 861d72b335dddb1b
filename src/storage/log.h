/*
 * log.h — the partition log: one directory of segments, appended by its leader, read by
 * consumers and followers, durable through group commit, recovered after a crash.
 *
 *   <data>/<topic>-<partition>/
 *       00000000000000000000.log         record batches (batch.h), as received
 *       00000000000000000000.index       offset index (index.h)
 *       00000000000000000000.timeindex   time index (index.h)
 *       00000000000000000000.txnindex    aborted transactions (txnindex.h)
 *       00000000000000001234.log ...     four files per segment; name = base offset, 20 digits
 *       leader-epoch-checkpoint          epoch -> start offset (meta.c)
 *       partition.metadata               topic id (meta.c)
 *       strata.checkpoint                log start offset + recovery point (meta.c)
 *       .strata-clean-shutdown           present only between a clean close and the next open
 *       00000000000000004711.snapshot    idempotent producers' state (partition/, not this module)
 *   <data>/<topic>-<partition>.<hex>-delete  being deleted (st_log_delete); removed at start
 *   <data>/<topic>-<partition>.<hex>-stray   not this topic's (st_storage_set_aside); kept
 *
 * Recovery point: every offset below it is synced. Recovery cuts only bytes that may hold
 * offsets at or past it (a torn tail); synced data that does not check out keeps the log
 * closed (ST_E_CORRUPT) and unchanged.
 *   Every byte of every file: docs/format.md.
 *
 * Offsets. log_start <= durable <= end. Offsets in [log_start, end) are readable; end is the
 * next offset to assign (Kafka's log end offset); durable is the first offset not yet known
 * to be on stable storage.
 *
 * Threads and ownership. A log belongs to one shard: every function here must be called on
 * that shard's thread (open/close included: the log uses its env's descriptor cache). There
 * are no locks. Callbacks (durability) run on that thread too. st_log_open() and st_log_close()
 * do blocking I/O (recovery scan, final sync): call them at start-up/shutdown or when creating
 * or deleting a partition, not per request.
 *
 * Errors. 0 / negative errno (-EIO, -ENOSPC: KAFKA_STORAGE_ERROR) / Strata codes:
 *   ST_E_CORRUPT      CORRUPT_MESSAGE                 ST_E_TOO_LARGE   MESSAGE_TOO_LARGE
 *   ST_E_MALFORMED    INVALID_RECORD                  ST_E_INVALID     INVALID_REQUEST
 *   ST_E_UNSUPPORTED  UNSUPPORTED_FOR_MESSAGE_FORMAT  ST_E_OUT_OF_RANGE OFFSET_OUT_OF_RANGE
 *   ST_E_NOT_FOUND    no such offset/timestamp/epoch  ST_E_CLOSED      log closed meanwhile
 * An I/O error never leaves the log unreadable: a failed append is cut back off the segment,
 * a failed sync cuts the log back to the durable offset (see st_log_wait_durable).
 */
#ifndef ST_STORAGE_LOG_H
#define ST_STORAGE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "storage/batch.h"
#include "storage/env.h"
#include "storage/file.h"
#include "storage/txnindex.h"

typedef struct st_log st_log_t;

typedef enum {
    ST_TS_CREATE_TIME = 0,     /* keep the producer's timestamps */
    ST_TS_LOG_APPEND_TIME = 1, /* the broker stamps maxTimestamp with its clock */
} st_ts_type_t;

typedef enum {
    ST_FLUSH_STRICT = 0,        /* an append counts as done once fdatasync'ed (group commit) */
    ST_FLUSH_WRITE_CACHING = 1, /* done once written; sync by flush_messages / flush_ms */
} st_flush_policy_t;

/* Per-log settings, Kafka's topic config names in the comments. */
typedef struct st_log_config {
    int64_t segment_bytes;        /* segment.bytes: roll past this size (default 1 GiB) */
    int64_t segment_ms;           /* segment.ms: roll a segment this old (-1: never; 7 days) */
    int64_t retention_ms;         /* retention.ms (-1: unlimited; default 7 days) */
    int64_t retention_bytes;      /* retention.bytes (-1: unlimited, the default) */
    bool retention_deletes;       /* cleanup.policy holds "delete": retention.ms/.bytes apply
                                   * (a "compact"-only log is never cut by them) */
    int32_t index_interval_bytes; /* index.interval.bytes (4096) */
    int32_t max_message_bytes;    /* max.message.bytes: largest batch (1048588) */
    st_ts_type_t timestamp_type;  /* message.timestamp.type */
    st_flush_policy_t flush_policy;
    int64_t flush_messages; /* flush.messages: write-caching syncs after this many (-1: never) */
    int64_t flush_ms;       /* flush.ms: write-caching syncs data this old (-1: never) */
    /* compaction (cleanup.policy holds "compact"; see st_log_clean_step) */
    bool compact;
    double min_cleanable_dirty_ratio; /* min.cleanable.dirty.ratio (0.5) */
    int64_t min_compaction_lag_ms;    /* min.compaction.lag.ms (0) */
    int64_t max_compaction_lag_ms;    /* max.compaction.lag.ms (INT64_MAX: none) */
    int64_t delete_retention_ms;      /* delete.retention.ms: tombstones kept (1 day) */
} st_log_config_t;

void st_log_config_default(st_log_config_t *c);
/* 0 or ST_E_CONFIG when a value is out of range. */
int st_log_config_check(const st_log_config_t *c);

/*
 * Opens (creating if needed) the partition directory dir. Without a clean-shutdown marker the
 * segments past the recovery point are scanned batch by batch and cut at the first bad byte
 * (logged with what was cut); indexes that are missing or do not match are rebuilt. Blocks.
 */
int st_log_open(st_storage_env_t *env, const char *dir, const st_log_config_t *cfg, st_log_t **out);
/*
 * Writes out indexes, syncs everything (synchronously), leaves the clean-shutdown marker, frees
 * the log. Waiters still queued are called with the final sync's result. Returns that result.
 * Syncs still in flight in the host keep a reference; their done() may arrive later safely.
 */
int st_log_close(st_log_t *log);
/*
 * st_log_close in two steps, for closing many logs under one deferred sync (env.h): _begin
 * writes out and syncs everything but the clean-shutdown marker and returns the result; the
 * log stays open (nothing may be appended to it). _end(log, rc) leaves the marker when rc is
 * 0 (the caller's rc: _begin's, or the deferred sync's when that failed), then frees the log
 * as st_log_close does and returns its result. Between the two, every log's writes must be
 * made durable (st_storage_defer_end) before the markers are written.
 */
int st_log_close_begin(st_log_t *log);
int st_log_close_end(st_log_t *log, int rc);
/* Deletes every file of the log and its directory, then frees it (DeleteTopics). The
 * directory is first renamed to "<dir>.<hex>-delete" and that rename synced, so a crash never
 * leaves the old records under the partition's name (st_storage_sweep_deleted removes the
 * rest at the next start). Read ranges still held stay readable until released. */
int st_log_delete(st_log_t *log);
/* Applies changed settings to an open log (AlterConfigs); ST_E_CONFIG if invalid. */
int st_log_set_config(st_log_t *log, const st_log_config_t *cfg);
const st_log_config_t *st_log_config(const st_log_t *log);
const char *st_log_dir(const st_log_t *log);

/* ---- append ---------------------------------------------------------------------------- */

typedef struct st_log_append_info {
    int64_t base_offset;      /* offset of the first record appended */
    int64_t last_offset;      /* offset of the last record appended */
    int64_t log_append_time;  /* the stamp for LogAppendTime, -1 for CreateTime */
    int64_t log_start_offset; /* after the append */
    int32_t batches;
    int32_t records;
} st_log_append_info_t;

/*
 * Appends the records field of one partition of a Produce request: one or more RecordBatch v2
 * back to back, all validated before anything is written (st_batch_validate_client; an empty
 * input is ST_E_INVALID, the whole input larger than segment_bytes ST_E_TOO_LARGE). On success
 * the batches are rewritten in place in `records` (base offset, leader epoch, and for
 * LogAppendTime the timestamp attribute, maxTimestamp and CRC), written to the active segment
 * (rolling first if due) and indexed, and info is filled. Synchronous: the bytes are in the
 * page cache on return, readable at once (use the high watermark to hide them).
 * Durability is separate: st_log_wait_durable(log, info.last_offset + 1, ...).
 * On failure nothing was appended; verdict (may be NULL) says which batch and why.
 */
int st_log_append(st_log_t *log, uint8_t *records, size_t len, int32_t leader_epoch,
                  st_log_append_info_t *info, st_batch_verdict_t *verdict);
/*
 * For a follower: appends batches that already carry offsets and epochs from the leader,
 * unchanged. Each must pass st_batch_check and start at or after the log end offset, in
 * increasing order (else ST_E_OUT_OF_RANGE / ST_E_CORRUPT).
 */
int st_log_append_replica(st_log_t *log, const uint8_t *records, size_t len,
                          st_log_append_info_t *info);

/* A control batch built by the broker (a transaction marker, st_batch_control_build): checked
 * (st_batch_check, the control bit), given the next offset and leader_epoch, appended as
 * st_log_append does. */
int st_log_append_control(st_log_t *log, uint8_t *batch, size_t len, int32_t leader_epoch,
                          st_log_append_info_t *info);

/* ---- transactions (txn.c) -------------------------------------------------------------- */

/* Records an aborted transaction in the .txnindex of the segment holding its marker
 * (a->last_offset, appended already). 0, ST_E_OUT_OF_RANGE (no such segment) or an error. */
int st_log_txn_add(st_log_t *log, const st_txn_aborted_t *a);
/* The aborted transactions that overlap [from, to): marker at or past from, first offset below
 * to, as Kafka's collectAbortedTransactions (segments from the one holding from, stopping after
 * an entry whose last stable offset reaches to). Up to cap go to out; returns how many there
 * are (may exceed cap). */
int st_log_txn_aborted(const st_log_t *log, int64_t from, int64_t to, st_txn_aborted_t *out,
                       int cap);
/* Rebuilds the .txnindex entries of the segments from the one holding `from` on, from the
 * batches (markers appended without st_log_txn_add: the journal's replay). */
int st_log_txn_reindex(st_log_t *log, int64_t from);

/* ---- durability ------------------------------------------------------------------------ */

typedef void (*st_log_durable_fn)(void *arg, int res);

/*
 * Asks to be told when every offset below end_offset is as durable as the flush policy
 * promises: synced for ST_FLUSH_STRICT; written for ST_FLUSH_WRITE_CACHING.
 *   returns 1: already so; cb is not called.
 *   returns 0: cb(arg, res) will be called exactly once, later, on this thread, never from
 *              inside this call: res 0 when durable, or a negative error if the sync failed
 *              (the log was then cut back to its durable offset: the offsets were lost) or the
 *              offsets were truncated away (ST_E_OUT_OF_RANGE) or the log closed.
 *   returns < 0: error now; cb is not called. end_offset > end gives the error of the sync
 *              failure that cut those offsets off (when the host completes syncs inline the
 *              append already returned 0), else ST_E_OUT_OF_RANGE. Call it right after the
 *              append: after a cut, later appends reuse the offsets.
 * Group commit: one fdatasync covers everything appended before it was issued. In strict mode
 * a sync is issued as soon as data is appended and none is in flight; appends made while one
 * is in flight are covered by the next, issued when it completes. When the env has a journal
 * (journal.h) the round is the journal's: one fdatasync of the journal file for every log of
 * the env that appended before it; the log's own files are synced later, in the background.
 */
int st_log_wait_durable(st_log_t *log, int64_t end_offset, st_log_durable_fn cb, void *arg);
/*
 * Asks to be told, on this thread, whenever the log end moves down: a failed sync cut the log
 * back to its durable offset, or st_log_truncate_to/st_log_truncate_fully removed a suffix.
 * fn(arg, new_end) runs before any durability waiter hears of the cut, so state kept beside
 * the log (producer state, caches) can drop what referred to offsets >= new_end first.
 * fn may not call back into the log. NULL removes the hook.
 */
typedef void (*st_log_cut_fn)(void *arg, int64_t new_end);
void st_log_set_cut_hook(st_log_t *log, st_log_cut_fn fn, void *arg);
/* Issues a sync now if anything is unsynced and none is in flight (flush.ms timers). */
int st_log_flush(st_log_t *log);
/* Periodic housekeeping (call every ~100 ms to a few seconds): write-caching flush.ms,
 * segment.ms roll of an idle segment, retention, and with a journal the background sync of
 * segments whose journal entries are a few seconds old. Returns segments deleted, or < 0. */
int st_log_tick(st_log_t *log);
bool st_log_sync_in_flight(const st_log_t *log);

/* ---- offsets --------------------------------------------------------------------------- */

int64_t st_log_start_offset(const st_log_t *log);
int64_t st_log_end_offset(const st_log_t *log);
int64_t st_log_durable_offset(const st_log_t *log);
/* Bytes in all segments, and the number of segments. */
int64_t st_log_size_bytes(const st_log_t *log);
int st_log_segment_count(const st_log_t *log);

/* First offset whose record timestamp >= ts (ListOffsets with a timestamp): 0 and the offset
 * and that record's timestamp, or ST_E_NOT_FOUND when every timestamp is older. For a
 * compressed batch the batch's base offset and maxTimestamp stand in for the record. */
int st_log_offset_for_timestamp(st_log_t *log, int64_t ts, int64_t *offset, int64_t *found_ts);
/* The largest timestamp and the offset of the record carrying it (ListOffsets -3); ST_E_NOT_FOUND
 * for an empty log. For a compressed batch the offset is the batch's last offset. */
int st_log_max_timestamp(st_log_t *log, int64_t *ts, int64_t *offset);

/* ---- reads ----------------------------------------------------------------------------- */

#define ST_LOG_READ_MAX_RANGES 8

/* A run of whole batches in one segment file. The file is referenced and pinned (its
 * descriptor open) until st_log_read_release(), even if retention deletes the segment. */
typedef struct st_log_range {
    st_file_t *file;
    int64_t pos; /* byte offset in the file */
    int64_t len;
} st_log_range_t;

typedef struct st_log_read {
    st_log_range_t ranges[ST_LOG_READ_MAX_RANGES];
    int nranges;
    int64_t bytes;            /* sum of range lengths */
    int64_t first_offset;     /* base offset of the first batch returned (<= fetch offset) */
    int64_t next_offset;      /* offset after the last batch returned (fetch_offset if none) */
    int64_t log_start_offset; /* at the time of the read */
    int64_t log_end_offset;
} st_log_read_t;

/*
 * Collects whole batches from the one holding fetch_offset onwards, stopping before a batch
 * whose last offset is >= max_offset (the caller's visible limit, e.g. the high watermark;
 * -1 = log end) or that would take the total past max_bytes; the first batch is returned even
 * if larger than max_bytes. Returns 0 (possibly with no ranges when fetch_offset is at the
 * limit), or ST_E_OUT_OF_RANGE when fetch_offset < log start or > log end.
 * Every successful read must be released with st_log_read_release() on this thread.
 * st_file_fd(range.file) is the descriptor to sendfile from.
 */
int st_log_read(st_log_t *log, int64_t fetch_offset, int64_t max_bytes, int64_t max_offset,
                st_log_read_t *out);
void st_log_read_release(st_log_read_t *r);
/* Copies the ranges into dst (cap bytes) with pread, for callers that cannot sendfile.
 * Returns bytes copied (r->bytes) or -ENOBUFS if cap is too small, or an I/O error. */
ssize_t st_log_read_copy(const st_log_read_t *r, uint8_t *dst, size_t cap);

/* ---- segments, retention, truncation --------------------------------------------------- */

/* Rolls a new active segment now (no-op when the active one is empty). */
int st_log_roll(st_log_t *log);
/* Deletes whole segments past retention.ms / retention.bytes (only when retention_deletes),
 * and those wholly below the log start offset; never the active segment. Returns the number deleted
 * or < 0. */
int st_log_enforce_retention(st_log_t *log);
/* retention.ms / retention.bytes delete only segments wholly below `offset` (the partition's
 * high watermark; INT64_MAX, the default: no limit). */
void st_log_set_retention_limit(st_log_t *log, int64_t offset);
/* DeleteRecords: moves the log start offset up to offset (<= end; ST_E_OUT_OF_RANGE beyond),
 * writes it to strata.checkpoint (not synced: see below), and deletes segments wholly below
 * it. Lower values are ignored. */
int st_log_set_start_offset(st_log_t *log, int64_t offset);
/*
 * Asks to be told when the log start offset as it is now is durable (its checkpoint synced),
 * as st_log_wait_durable does for appended offsets: 1 already so (cb not called); 0 cb(arg,
 * res) later, exactly once, on this thread, res 0 or the sync's error (or ST_E_CLOSED);
 * < 0 error now. A sync is issued at once if none is in flight.
 */
int st_log_wait_start_durable(st_log_t *log, st_log_durable_fn cb, void *arg);
/* Removes every batch whose last offset >= offset (a batch straddling offset goes whole); the
 * new end is the base of the first removed batch. offset < log start empties the log and
 * restarts it at offset (st_log_truncate_fully). Waiters beyond the cut get ST_E_OUT_OF_RANGE. */
int st_log_truncate_to(st_log_t *log, int64_t offset);
/* Deletes all segments and starts an empty log at new_start. */
int st_log_truncate_fully(st_log_t *log, int64_t new_start);

/* ---- compaction ----------------------------------------------------------------------- */

/*
 * The log cleaner, as Kafka's: for a log with cfg.compact, keeps the latest record of each key
 * in the closed segments (never the active one, nor segments younger than
 * min_compaction_lag_ms), offsets unchanged. A clean maps the dirty part (from the clean point
 * to the cleanable end) key -> latest offset, then rewrites the closed segments from the log
 * start in groups of up to segment_bytes, dropping records a later offset of their key
 * supersedes, records without a key, and tombstones (null value) older than
 * delete_retention_ms that already survived one clean. Batches keep their offsets, producer
 * fields and codec (st_batch_filter); an idempotent producer's last batch is kept even when
 * empty. Transactions, as Kafka's cleaner: the records of aborted transactions (.txnindex) go,
 * and a marker goes once no batch of its transaction is left before it, after
 * delete_retention_ms as a tombstone; nothing at or past the clean limit (the LSO) is cleaned.
 * Each group is swapped in crash-safely: "<base>.log.cleaned" (+ indexes), synced,
 * renamed to ".swap" (the commit), the old segments unlinked, renamed to ".log"; open deletes
 * ".cleaned" files and finishes ".swap"s.
 *
 * It runs in slices on the owner shard: each st_log_clean_step reads about budget_bytes and
 * returns, so the caller decides the pace (and the I/O rate). A change of the closed segments
 * in between (retention, DeleteRecords, truncation) drops the clean in progress.
 */
typedef struct st_log_clean_opts {
    int64_t budget_bytes; /* input bytes this step may read */
    size_t map_bytes;     /* memory for the key map of a clean that starts now */
    /* true when (producer_id, last_offset) is that producer's last batch in the log: kept
     * even with no records left. NULL: keep every emptied producer batch. */
    bool (*last_of_producer)(void *arg, int64_t producer_id, int64_t last_offset);
    void *arg;
} st_log_clean_opts_t;

typedef struct st_log_clean_stats {
    int64_t cleanable_bytes; /* closed segments old enough to clean */
    int64_t dirty_bytes;     /* of those, past the clean point */
    double dirty_ratio;      /* dirty / cleanable (0 when nothing is cleanable) */
    bool in_progress;
    int64_t cleans;        /* finished */
    int64_t last_clean_ms; /* wall clock of the last finished clean, -1 never */
    int64_t bytes_read, bytes_written, records_removed; /* totals */
} st_log_clean_stats_t;

/* The cleaner cleans only segments wholly below `offset` (the partition's last stable offset,
 * so an undecided transaction is never cleaned; INT64_MAX, the default: no limit). */
void st_log_set_clean_limit(st_log_t *log, int64_t offset);
/* Whether a clean should start: compact, and the dirty ratio reached, or the oldest dirty
 * record older than max_compaction_lag_ms. */
bool st_log_clean_due(st_log_t *log);
/* One slice: starts a clean if due and none is in progress, advances it. Returns the bytes
 * read (> 0: call again), ST_E_AGAIN while the clean waits for the syncs of a group it wrote
 * (call again later; they go through env->sync_submit, never blocking the shard), 0 when there
 * is nothing to do, another value < 0 on an error (the clean is dropped; the log is unharmed). */
int64_t st_log_clean_step(st_log_t *log, const st_log_clean_opts_t *o);
void st_log_clean_stats(st_log_t *log, st_log_clean_stats_t *out);

/* ---- leader epochs, partition metadata ------------------------------------------------- */

/* Latest epoch in the leader-epoch cache, -1 when empty. Appends with a higher epoch add an
 * entry (epoch, first offset of that append). */
int32_t st_log_latest_epoch(const st_log_t *log);
/*
 * OffsetForLeaderEpoch: the end offset of `epoch` as Kafka computes it: the log end if epoch is
 * the latest, else the start offset of the first larger epoch, reporting the largest known
 * epoch <= the requested one. (-1, -1) when epoch is above every known epoch or unknown.
 */
int st_log_end_offset_for_epoch(const st_log_t *log, int32_t epoch, int32_t *out_epoch,
                                int64_t *end_offset);
/* A leader's election (Kafka's assign at becoming leader, KIP-101): records `epoch` as starting
 * at the log end, before any append of it, so that OffsetForLeaderEpoch and a follower's
 * diverging-epoch check answer for it at once. An epoch already in the cache (or older than
 * its latest) is left as it is. Sets *start to where `epoch` starts (-1: an older epoch than the
 * latest, which it does not start). 0 or the error of writing leader-epoch-checkpoint. */
int st_log_assign_epoch(st_log_t *log, int32_t epoch, int64_t *start);
/* A follower's cut (Kafka's truncateFromEnd): forgets the epochs that start at or after
 * `offset` even where no record goes (an epoch recorded at an election that never got a
 * record), so that the latest epoch is the one its last record has. 0 or the error of writing
 * leader-epoch-checkpoint. */
int st_log_forget_epochs_from(st_log_t *log, int64_t offset);
/* Writes partition.metadata with the topic id (16 bytes). Blocking, small. */
int st_log_set_topic_id(st_log_t *log, const uint8_t id[16]);
/* 0 and the id, or ST_E_NOT_FOUND. */
int st_log_topic_id(const st_log_t *log, uint8_t id[16]);

/* ---- data directory -------------------------------------------------------------------- */

/* Kafka's names for files named by an offset: "<dir>/<offset as 20 digits><ext>" (segments,
 * producer snapshots). -ENAMETOOLONG if it does not fit. */
int st_storage_offset_path(char *buf, size_t n, const char *dir, int64_t offset, const char *ext);
/* Parses "<20 digits><ext>": 0 and the offset, or -1. */
int st_storage_parse_offset_name(const char *name, const char *ext, int64_t *offset);
/* Writes "<data_dir>/<topic>-<partition>" into buf. -ENAMETOOLONG if it does not fit. */
int st_storage_partition_dir(char *buf, size_t n, const char *data_dir, const char *topic,
                             int32_t partition);
/* Calls cb for every partition directory under data_dir (name "<topic>-<digits>"); stops when
 * cb returns non-zero and returns that. The broker opens each with st_log_open(). */
int st_storage_list_partitions(st_storage_env_t *env, const char *data_dir,
                               int (*cb)(void *arg, const char *dir, const char *topic,
                                         int32_t partition),
                               void *arg);
/* Deletes a partition directory that is not open, with everything in it. */
int st_storage_delete_dir(st_storage_env_t *env, const char *dir);
/* Renames dir to "<dir>.<16 hex>-<suffix>" (e.g. "delete", "stray") and syncs its parent, so
 * the name is free and the change survives a crash; the new path goes to out. Blocking. */
int st_storage_set_aside(st_storage_env_t *env, const char *dir, const char *suffix, char *out,
                         size_t n);
/* The topic id in dir's partition.metadata: 0, ST_E_NOT_FOUND (no file), ST_E_CORRUPT. */
int st_storage_read_topic_id(st_storage_env_t *env, const char *dir, uint8_t id[16]);
/* Removes every "*-delete" directory left in data_dir by deletions a crash interrupted.
 * Returns how many went, or < 0. Blocking: start-up only. */
int st_storage_sweep_deleted(st_storage_env_t *env, const char *data_dir);

/* Costly self-check of the in-memory state (debug builds assert it). */
bool st_log_check(const st_log_t *log);

#endif
