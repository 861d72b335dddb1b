/*
 * log_impl.h — the partition log's state, shared by the files of storage/ that implement it
 * (log.c: append, durability, reads, retention, recovery; clean.c: compaction). Internal:
 * nothing outside storage/ includes it. Same thread rules as log.h.
 */
#ifndef ST_STORAGE_LOG_IMPL_H
#define ST_STORAGE_LOG_IMPL_H

#include "storage/journal_log.h"
#include "storage/log.h"
#include "storage/meta.h"
#include "storage/segment.h"

/* The active segment's appended bytes are handed to the env's writeback hook in steps of this
 * many (log.c writeback()). */
#define ST_LOG_WRITEBACK_BYTES (1024 * 1024)

typedef struct log_waiter {
    int64_t offset; /* durable once offsets below it are */
    st_log_durable_fn cb;
    void *arg;
    struct log_waiter *next;
} log_waiter_t;

struct st_log {
    st_storage_env_t *env;
    char *dir;
    st_log_config_t cfg;
    st_segment_t **segs;
    int nsegs, capsegs;
    int64_t log_start;
    int64_t end;
    int64_t retention_limit; /* retention deletes only segments wholly below it */
    int64_t clean_limit;     /* the cleaner cleans only segments wholly below it (the LSO) */
    int64_t durable;
    int64_t recovery_point;
    int refs; /* the owner + each round in flight */
    bool closed;

    /* group commit */
    int sync_pending;    /* outstanding done() calls of the round in flight, plus a guard */
    int64_t sync_target; /* the round in flight covers offsets below this */
    int64_t sync_rp;     /* recovery point the round will establish */
    int sync_err;
    int cut_err;           /* the error of the last sync failure that cut the log back */
    bool ckpt_dirty;       /* strata.checkpoint written since its last sync */
    bool rp_unsynced;      /* a lowered recovery point is not durable yet: no append until it is */
    int64_t ckpt_max_rp;   /* highest recovery point the file may hold on disk (ckpt_lower) */
    bool sync_retry;       /* the round in flight could not submit every sync (sync_file) */
    int stuck_err;         /* a failed sync whose cut also failed (log_cut_back) */
    uint32_t sync_retries; /* rounds retried in a row */
    bool ckpt_in_round;    /* the round in flight syncs strata.checkpoint */
    log_waiter_t *ckpt_waiters;       /* for the checkpoint as written now (log start) */
    log_waiter_t *ckpt_round_waiters; /* for the checkpoint sync of the round in flight */
    int64_t last_sync_ms;
    int64_t unflushed_msgs;
    log_waiter_t *waiters;

    /* leader epochs */
    st_epoch_entry_t *epochs;
    int nepochs, capepochs;
    /* what the epoch file holds since this log's last write of it: its bytes' CRC-32C and
     * length (epochs_written false: unknown) */
    bool epochs_written;
    uint32_t epochs_crc;
    size_t epochs_len;

    uint8_t topic_id[16];
    bool has_topic_id;
    st_file_t *ckpt;

    st_log_cut_fn on_cut; /* told whenever the end moves down */
    void *on_cut_arg;

    /* compaction (clean.c) */
    uint64_t layout_gen;        /* bumped whenever a segment other than the active one goes */
    int64_t clean_point;        /* first offset the cleaner has not seen (strata.checkpoint) */
    struct st_clean_job *clean; /* the cleaning in progress, NULL when none */
    st_log_clean_stats_t clean_stats;

    st_journal_log_t jl; /* the env's journal (journal.c), when it has one */
};

/* The active (last) segment. */
st_segment_t *st_log_active(const st_log_t *log);
int64_t st_log_now(const st_log_t *log);
/* fsync of the log's directory (logged on failure). */
int st_log_sync_dir(st_log_t *log);
/* Replaces segs[from, to) by s (clean.c's swap, after the files are in place); the old
 * segments are freed, their files already gone. Bumps layout_gen. */
int st_log_replace_segments(st_log_t *log, int from, int to, st_segment_t *s);
/* Records the cleaner's progress in strata.checkpoint (synced with the next round). */
void st_log_set_clean_point(st_log_t *log, int64_t clean_point);
/* Drops the cleaner's job (log closing or deleted; segments changed under it). */
void st_clean_abort(st_log_t *log);
/* Open: deletes ".cleaned" leftovers and finishes ".swap"s before segments are listed. */
int st_clean_recover(st_log_t *log);

/* ---- shared by the files of the log (log.c, commit.c, open.c, epochs.c, clean.c) ---- */

/* log.c */
int st_log_path(const st_log_t *log, const char *name, char *buf, size_t n);
int st_log_segs_push(st_log_t *log, st_segment_t *s);
void st_log_segs_remove(st_log_t *log, int i);
/* Index of the segment holding offset (binary search), -1 below the first. */
int st_log_seg_for(const st_log_t *log, int64_t offset);
/* Drops a reference (the owner's, or a round's); the last frees the struct. */
void st_log_unref(st_log_t *log);
/* Writes strata.checkpoint (synced by the next round). */
int st_log_ckpt_write(st_log_t *log);
/* Lowers the recovery point to rp, syncing the checkpoint now (cuts). */
void st_log_ckpt_lower(st_log_t *log, int64_t rp);
int st_log_roll_to(st_log_t *log, int64_t base);
void st_log_after_front_change(st_log_t *log);

/* commit.c */
bool st_log_needs_sync(const st_log_t *log);
/* Starts a per-file group-commit round (one fdatasync per dirty file) if none is in flight and
 * anything is unsynced. */
void st_log_round_start(st_log_t *log);
/* Starts what makes the appended bytes durable: the journal's round for what the journal
 * holds, a per-file round for anything before it (or for everything without a journal). */
void st_log_sync_start(st_log_t *log);
/* The journal's round that covered the log's offsets below target completed with err. */
void st_log_journal_done(st_log_t *log, int64_t target, int err);
/* Calls the waiters durable up to `durable` (res 0) or, with res != 0, those above limit. */
void st_log_fire_waiters(st_log_t *log, int64_t durable, int64_t limit, int res);
void st_log_fire_list(log_waiter_t **list, int res);
void st_log_delete_segments_from(st_log_t *log, int i);
int st_log_cut_to_boundary(st_log_t *log, int64_t to, int64_t *new_end);
void st_log_after_cut(st_log_t *log, int64_t new_end, int err);
/* After a failed sync: cuts the log back to `to`; when even that fails the log is stuck. */
void st_log_cut_back(st_log_t *log, int64_t to, int err);
/* Retries the cut of a stuck log; 0 once it is not stuck. */
int st_log_unstick(st_log_t *log);

/* txn.c: rebuilds the .txnindex of every segment flagged txn_rebuild (open). */
int st_log_txn_rebuild(st_log_t *log);
/* txn.c: the cleaner's tracker of aborted and committed transactions over one pass. */
typedef struct st_txn_ongoing_abort {
    st_txn_aborted_t a;
    bool observed; /* a batch of it was met in this pass */
} st_txn_ongoing_abort_t;
typedef struct st_txn_tracker {
    st_txn_aborted_t *pending; /* the .txnindex entries ending at or after the pass's start,
                                  by first offset */
    size_t npending, next;
    st_txn_ongoing_abort_t *aborted; /* begun, marker not read yet */
    size_t naborted, capaborted;
    int64_t *committed; /* producers with transactional batches met, no marker yet */
    size_t ncommitted, capcommitted;
} st_txn_tracker_t;
int st_txn_tracker_init(st_txn_tracker_t *t, const st_log_t *log, int64_t from);
void st_txn_tracker_fini(st_txn_tracker_t *t);
/* A data batch read: *aborted when it belongs to an aborted transaction. */
int st_txn_tracker_batch(st_txn_tracker_t *t, const st_batch_hdr_t *h, bool *aborted);
/* A marker of type (ST_CONTROL_*) read: *discardable when no batch of its transaction was met
 * before it; for a kept abort, *entry (with *has_entry) is its .txnindex entry. */
int st_txn_tracker_marker(st_txn_tracker_t *t, const st_batch_hdr_t *h, int type, bool *discardable,
                          st_txn_aborted_t *entry, bool *has_entry);
/* epochs.c */
int st_log_epochs_write(st_log_t *log, bool durable);
int st_log_epochs_add(st_log_t *log, int32_t epoch, int64_t start);
bool st_log_epochs_truncate_end(st_log_t *log, int64_t end);
bool st_log_epochs_truncate_start(st_log_t *log, int64_t start);
int st_log_epochs_load(st_log_t *log, bool *rebuild);
int st_log_epochs_rebuild(st_log_t *log);
/* A segment scan's per-batch callback (arg: the log) that adds the batch's epoch. */
void st_log_epoch_scan(void *arg, const st_batch_hdr_t *h);

#endif
