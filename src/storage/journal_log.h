/*
 * journal_log.h — the partition log's side of the journal (journal.h): the per-log state
 * embedded in st_log_t (log_impl.h) and the calls the files of the log make (log.c, commit.c,
 * open.c). Storage-internal: nothing outside storage/ includes it. It names the log only as
 * an incomplete struct, so the include order is one way: log_impl.h -> journal_log.h ->
 * journal.h, and no journal header includes a log header.
 *
 * Threads: the log's (its env's shard).
 */
#ifndef ST_STORAGE_JOURNAL_LOG_H
#define ST_STORAGE_JOURNAL_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/journal.h"

struct st_log;

/* Per-log journal state, embedded in st_log_t (log_impl.h); journal.c owns it. */
typedef struct st_journal_log {
    st_journal_t *j;            /* NULL: not attached */
    struct st_log *next, *prev; /* the journal's attached logs */
    struct st_log *qnext;       /* the journal's queue for the next round */
    struct st_log *rnext;       /* the round in flight */
    bool on;                    /* appends are journaled now */
    bool queued, in_round;      /* on the lists above */
    bool pinned;                /* the journal must never be used for this log again */
    int64_t base;               /* offsets >= base the log wrote are in the journal (when on) */
    int64_t written_end;        /* offsets below it are journaled */
    int64_t jdurable;           /* journal rounds made the journaled offsets below it durable */
    int64_t round_target;       /* the round in flight covers offsets below this */
    uint64_t last_seq;          /* this log's last entry, 0: none in this run */
    uint64_t iter_mark;         /* counted in the journal's iteration of this mark */
    bool has_need;              /* holds entries no per-file round covered yet */
    int64_t need_pos;           /* the oldest of them: logical position, sequence, time */
    uint64_t need_seq;
    int64_t need_ms;
    uint64_t pf_seq;     /* entries below this sequence are covered by the per-file round */
    bool pf_unjournaled; /* that round covers bytes the journal does not hold */
    uint64_t fence_seq;  /* the fence file makes replay ignore entries below this */
    bool pf_after;       /* an entry was written since that round started: */
    int64_t after_pos;   /*   the first one */
    uint64_t after_seq;
    int64_t after_ms;
} st_journal_log_t;

/* ---- storage-internal: the log's files (log.c, commit.c, open.c) ------------------------- */

/* Open, once every segment is synced: the partition's fence file. One from an earlier run was
 * replayed already and goes; when this run's journal holds entries of an earlier incarnation
 * of the log (closed and opened again), a new fence makes replay ignore them (they know
 * nothing of what the new one syncs without them). 0 or an I/O error. */
int st_journal_prepare(struct st_log *log);
/* open/close/delete: joins env->journal (if any) / leaves it. close_ok false keeps the log's
 * entries needed for good (its final sync failed: only replay can still save them). */
void st_journal_attach(struct st_log *log);
void st_journal_detach(struct st_log *log, bool close_ok);
/* Whether the log's next append would be journaled (a hint; st_journal_append decides). */
bool st_journal_active(const struct st_log *log);
/* After the batches [first, next) were written to the segment: journals them. Returns 0 when
 * journaled, < 0 when not (the log then falls back to per-file rounds). */
int st_journal_append(struct st_log *log, const uint8_t *data, size_t len, int64_t first,
                      int64_t next);
/* After the log's end moved down to new_end: a truncate entry, or a fence file when the
 * journal cannot take one, and always for a reset (the log restarted empty at new_end,
 * durably: st_log_truncate_fully). */
void st_journal_truncated(struct st_log *log, int64_t new_end, bool reset);
/* Starts the journal's round (or leaves the log queued for the next one). */
void st_journal_kick(struct st_log *log);
/* A per-file round of the log starts / completed (ok: every file synced without error). When
 * the round made bytes the journal does not hold durable while entries of the log could still
 * be replayed, a fence is written first (a truncate entry replayed onto them would cut them);
 * its error, if it could not be, is returned: the round then counts as failed. */
void st_journal_file_round_start(struct st_log *log);
int st_journal_file_round_done(struct st_log *log, bool ok);
/* From st_log_tick: a per-file round for old entries. */
void st_journal_tick(struct st_log *log);

#endif
