/*
 * commit.c — group commit for the partition log (log.h "durability"), and cutting the log back
 * when a sync fails.
 *
 * Durability states of the bytes of offset o:
 *
 *     appended (o < end) --st_log_round_start()--> syncing (o < sync_target)
 *         --round_done(ok)--> durable (o < durable)
 *         --round_done(error)--> cut off by st_log_cut_back(): o >= end again
 *
 * A round (st_log_round_start) submits one fdatasync per file with bytes written since the
 * previous round was issued; appends arriving meanwhile mark their segment dirty again and wait
 * for the next round, which round_done() issues. The last done() of a round may run inline
 * inside the host's sync_submit(): rounds hold a guard count (sync_pending starts at 1) so
 * completion runs once, after every submit. A sync that cannot even be submitted (no descriptor,
 * memory or slot) is retried, not treated as a failed fdatasync.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/err.h"
#include "base/log.h"
#include "storage/log_impl.h"

/* Calls, in order, the waiters whose offsets are now durable (res 0), or all waiters above
 * `limit` with res. Waiters are unlinked before any callback runs, so callbacks may call in. */
void st_log_fire_waiters(st_log_t *log, int64_t durable, int64_t limit, int res)
{
    log_waiter_t *done = NULL, **tail = &done;
    log_waiter_t **pp = &log->waiters;
    while (*pp) {
        log_waiter_t *w = *pp;
        bool ok = w->offset <= durable;
        bool fail = res != 0 && w->offset > limit;
        if (ok || fail) {
            *pp = w->next;
            w->next = NULL;
            if (!ok)
                w->offset = -1; /* marks failure below */
            *tail = w;
            tail = &w->next;
        } else {
            pp = &w->next;
        }
    }
    while (done) {
        log_waiter_t *w = done;
        done = w->next;
        w->cb(w->arg, w->offset < 0 ? res : 0);
        free(w);
    }
}

/* Calls every waiter of a list with res, after unlinking the whole list. */
void st_log_fire_list(log_waiter_t **list, int res)
{
    log_waiter_t *w = *list;
    *list = NULL;
    while (w) {
        log_waiter_t *next = w->next;
        w->cb(w->arg, res);
        free(w);
        w = next;
    }
}

bool st_log_needs_sync(const st_log_t *log)
{
    if (log->ckpt_dirty && log->ckpt_waiters)
        return true;
    if (log->end <= log->durable)
        return false;
    if (log->cfg.flush_policy == ST_FLUSH_STRICT || log->waiters)
        return true;
    if (log->cfg.flush_messages >= 0 && log->unflushed_msgs >= log->cfg.flush_messages)
        return true;
    if (log->cfg.flush_ms >= 0 && st_log_now(log) - log->last_sync_ms >= log->cfg.flush_ms)
        return true;
    return false;
}

static void round_done(st_log_t *log)
{
    int err = log->sync_err;
    if (log->closed) {
        st_log_unref(log);
        return;
    }
    log->last_sync_ms = st_log_now(log);
    if (log->ckpt_in_round) {
        log->ckpt_in_round = false;
        if (err)
            log->ckpt_dirty = true; /* synced again by a later round */
        st_log_fire_list(&log->ckpt_round_waiters, err);
    }
    if (err == 0 && !log->sync_retry) {
        int fr = st_journal_file_round_done(log, true);
        if (fr < 0)
            err = fr;
    } else {
        st_journal_file_round_done(log, false);
    }
    if (err == 0 && log->sync_retry) {
        /* Some sync could not be submitted: nothing is cut, nothing counts as durable yet;
         * st_log_tick (or the next append) starts the round again. */
        if (log->sync_retries++ % 100 == 0)
            ST_WARN("storage: %s: a sync could not be submitted (out of descriptors, memory or"
                    " submission slots); retrying",
                    log->dir);
        st_log_unref(log);
        return;
    } else if (err == 0) {
        log->sync_retries = 0;
        int64_t target = log->sync_target < log->end ? log->sync_target : log->end;
        if (target > log->durable)
            log->durable = target;
        if (log->sync_rp > log->recovery_point) {
            log->recovery_point = log->sync_rp;
            st_log_ckpt_write(log);
        }
        /* What the journal made durable past the synced files counts now too. */
        int64_t jd = log->jl.jdurable < log->end ? log->jl.jdurable : log->end;
        if (log->durable >= log->jl.base && jd > log->durable)
            log->durable = jd;
        st_log_fire_waiters(log, log->durable, INT64_MAX, 0);
    } else if (log->durable < log->end) {
        ST_ERROR("storage: %s: fdatasync failed (%s); cutting the log back to offset %" PRId64
                 " from %" PRId64,
                 log->dir, st_strerror(err), log->durable, log->end);
        st_log_cut_back(log, log->durable, err);
    } else {
        ST_ERROR("storage: %s: fdatasync of %s failed (%s)", log->dir, ST_META_CKPT_FILE,
                 st_strerror(err));
    }
    if (!log->closed && st_log_needs_sync(log))
        st_log_sync_start(log);
    st_log_unref(log);
}

static void round_put(st_log_t *log)
{
    if (--log->sync_pending == 0)
        round_done(log);
}

static void sync_done(void *arg, int res)
{
    st_log_t *log = arg;
    if (res < 0 && log->sync_err == 0)
        log->sync_err = res;
    round_put(log);
}

/* Resources, not the disk: no descriptor or memory to hand, a full submission queue. */
static bool transient(int err)
{
    return err == -EMFILE || err == -ENFILE || err == -ENOMEM || err == -EAGAIN || err == -EBUSY ||
           err == -EINTR;
}

/*
 * Submits one file's sync as part of the round. Returns 0, or < 0 when it could not even be
 * submitted for want of resources (a descriptor, memory, a free submission slot): the caller
 * marks the file dirty again and the round does not count as covering it (sync_retry), so
 * nothing is cut for what is not an I/O error; the next tick or append tries again. Any other
 * error fails the round (sync_err) like a failed fdatasync.
 */
static int sync_file(st_log_t *log, st_file_t *f)
{
    log->sync_pending++; /* before: done() may run inside the submit */
    int rc = st_storage_sync_file(log->env, f, sync_done, log);
    if (rc == 0)
        return 0;
    log->sync_pending--;
    if (transient(rc))
        return rc;
    if (log->sync_err == 0)
        log->sync_err = rc;
    return 0;
}

/*
 * Index files are synced only for segments the round moves the recovery point past (base
 * below sync_rp): open rebuilds the indexes of every segment at or past the recovery point
 * after a crash (open_segments scans them), so syncing those would buy nothing. A segment
 * keeps idx_dirty until a round that moves the point past it; in steady state a round is one
 * fdatasync per partition (the active .log), not three.
 */
void st_log_round_start(st_log_t *log)
{
    if (log->closed || log->sync_pending > 0 || log->stuck_err)
        return;
    if (log->end <= log->durable && !(log->ckpt_dirty && log->ckpt_waiters) && !log->jl.has_need)
        return;
    log->sync_pending = 1; /* guard: completion waits until every submit is made */
    log->refs++;
    log->sync_err = 0;
    log->sync_retry = false;
    log->sync_target = log->end;
    log->sync_rp = st_log_active(log)->base_offset;
    for (int i = 0; i < log->nsegs; i++)
        if (log->segs[i]->log_dirty && log->sync_rp > log->segs[i]->base_offset)
            log->sync_rp = log->segs[i]->base_offset;
    st_journal_file_round_start(log);
    for (int i = 0; i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        if (s->log_dirty) {
            s->log_dirty = false;
            if (sync_file(log, s->log) < 0)
                s->log_dirty = log->sync_retry = true;
        }
        if (s->idx_dirty && s->base_offset < log->sync_rp) {
            s->idx_dirty = false;
            if ((sync_file(log, s->oidx_file) | sync_file(log, s->tidx_file) |
                 sync_file(log, s->txn_file)) < 0)
                s->idx_dirty = log->sync_retry = true;
        }
    }
    if (log->ckpt_dirty) {
        log->ckpt_dirty = false;
        if (sync_file(log, log->ckpt) < 0) {
            log->ckpt_dirty = log->sync_retry = true;
        } else {
            log->ckpt_in_round = true;
            log->ckpt_round_waiters = log->ckpt_waiters;
            log->ckpt_waiters = NULL;
        }
    }
    log->unflushed_msgs = 0;
    round_put(log);
}

int st_log_wait_durable(st_log_t *log, int64_t end_offset, st_log_durable_fn cb, void *arg)
{
    if (log->closed)
        return ST_E_CLOSED;
    if (end_offset > log->end)
        return log->cut_err ? log->cut_err : ST_E_OUT_OF_RANGE;
    if (log->stuck_err && end_offset > log->durable)
        return log->stuck_err;
    if (end_offset <= log->durable)
        return 1;
    if (log->cfg.flush_policy == ST_FLUSH_WRITE_CACHING)
        return 1;
    st_log_sync_start(log);
    if (end_offset <= log->durable)
        return 1;
    if (log->closed)
        return ST_E_CLOSED;
    if (end_offset > log->end) /* a sync that failed inline cut it off */
        return log->cut_err ? log->cut_err : ST_E_OUT_OF_RANGE;
    log_waiter_t *w = malloc(sizeof *w);
    if (!w)
        return -ENOMEM;
    w->offset = end_offset;
    w->cb = cb;
    w->arg = arg;
    log_waiter_t **pp = &log->waiters;
    while (*pp && (*pp)->offset <= end_offset)
        pp = &(*pp)->next;
    w->next = *pp;
    *pp = w;
    return 0;
}

int st_log_wait_start_durable(st_log_t *log, st_log_durable_fn cb, void *arg)
{
    if (log->closed)
        return ST_E_CLOSED;
    log_waiter_t **list;
    if (log->ckpt_dirty)
        list = &log->ckpt_waiters;
    else if (log->ckpt_in_round)
        list = &log->ckpt_round_waiters;
    else
        return 1;
    log_waiter_t *w = malloc(sizeof *w);
    if (!w)
        return -ENOMEM;
    w->offset = 0;
    w->cb = cb;
    w->arg = arg;
    w->next = *list;
    *list = w;
    st_log_round_start(log);
    return 0;
}

int st_log_flush(st_log_t *log)
{
    if (log->closed)
        return ST_E_CLOSED;
    st_log_sync_start(log);
    return 0;
}

void st_log_sync_start(st_log_t *log)
{
    if (!st_journal_active(log)) {
        st_log_round_start(log);
        return;
    }
    /* Bytes written before the journal took over (base) are the per-file round's. */
    if (log->durable < log->jl.base || (log->ckpt_dirty && log->ckpt_waiters))
        st_log_round_start(log);
    if (!log->closed && log->jl.written_end > log->durable)
        st_journal_kick(log);
}

/*
 * The journal's round completed for this log. Success: the journaled offsets below target
 * are durable, once everything before the journal took over is (invariant 3 of journal.h).
 * Failure: as a failed fdatasync of a per-file round, the log is cut back to its durable
 * offset; the journal has turned itself off, so later rounds are per-file.
 */
void st_log_journal_done(st_log_t *log, int64_t target, int err)
{
    if (log->closed)
        return;
    if (err == 0) {
        if (target > log->jl.jdurable)
            log->jl.jdurable = target;
        int64_t jd = log->jl.jdurable < log->end ? log->jl.jdurable : log->end;
        if (log->durable >= log->jl.base && jd > log->durable && !log->stuck_err) {
            log->durable = jd;
            st_log_fire_waiters(log, log->durable, INT64_MAX, 0);
        }
    } else if (log->durable < log->end) {
        ST_ERROR("storage: %s: journal fdatasync failed (%s); cutting the log back to offset"
                 " %" PRId64 " from %" PRId64,
                 log->dir, st_strerror(err), log->durable, log->end);
        st_log_cut_back(log, log->durable, err);
    }
    if (!log->closed && st_log_needs_sync(log))
        st_log_sync_start(log);
}

bool st_log_sync_in_flight(const st_log_t *log)
{
    return log->sync_pending > 0;
}

/* Makes the directory's entries durable: segments created at a roll must exist after a crash
 * before anything appended to them is promised, and segments removed by a cut must not come
 * back (their stale records would overlap what was appended since). Blocking, but only at a
 * roll or a cut, never per append. */
int st_log_sync_dir(st_log_t *log)
{
    st_fs_t *fs = &log->env->fs;
    int rc = fs->ops->fsync_dir(fs->ctx, log->dir);
    if (rc < 0)
        ST_ERROR("storage: %s: directory sync failed: %s", log->dir, st_strerror(rc));
    return rc;
}

/* Deletes segs[i..] (files unlinked; readers holding ranges keep reading), durably. */
void st_log_delete_segments_from(st_log_t *log, int i)
{
    bool any = log->nsegs > i;
    if (any)
        log->layout_gen++;
    while (log->nsegs > i) {
        st_segment_t *s = log->segs[log->nsegs - 1];
        log->nsegs--;
        int rc = st_segment_delete(s);
        if (rc < 0)
            ST_ERROR("storage: %s: cannot delete a segment: %s", log->dir, st_strerror(rc));
    }
    if (any)
        st_log_sync_dir(log);
}

/* After the end moved down to new_end: fix durability bookkeeping and tell waiters. */
void st_log_after_cut(st_log_t *log, int64_t new_end, int err)
{
    log->end = new_end;
    if (log->durable > new_end)
        log->durable = new_end;
    if (log->sync_pending > 0 && log->sync_target > new_end)
        log->sync_target = new_end;
    st_journal_truncated(log, new_end, false);
    st_log_ckpt_lower(log, st_log_active(log)->base_offset);
    if (st_log_epochs_truncate_end(log, new_end))
        st_log_epochs_write(log, false);
    if (log->on_cut)
        log->on_cut(log->on_cut_arg, new_end);
    st_log_fire_waiters(log, log->durable, new_end, err);
}

void st_log_set_cut_hook(st_log_t *log, st_log_cut_fn fn, void *arg)
{
    log->on_cut = fn;
    log->on_cut_arg = arg;
}

/*
 * Cuts the log so that it ends at E = min(to, base of the first batch whose last offset is
 * >= to), or at `to` if no batch reaches it (to < end). Batches with last offset >= to go
 * whole. When E lies past the kept data (a gap: replica appends, or data recovered after a
 * crash), an empty segment named E is started so the end survives a reopen. Errors are logged;
 * the in-memory state follows the cut regardless (a file that could not be shortened is
 * marked so the next append shortens it first).
 */
int st_log_cut_to_boundary(st_log_t *log, int64_t to, int64_t *new_end)
{
    int i = st_log_seg_for(log, to);
    if (i < 0)
        i = 0;
    st_segment_t *s = log->segs[i];
    st_segment_reader_t *r = malloc(sizeof *r);
    if (!r)
        return -ENOMEM;
    st_segment_reader_init(r, s);
    st_segment_pos_t at;
    int rc = st_segment_find(r, to, &at);
    free(r);
    if (rc < 0)
        return rc;
    int64_t pos = s->size, e = to;
    if (rc == 1) {
        pos = at.pos;
        if (at.hdr.base_offset < e)
            e = at.hdr.base_offset;
    }
    if (e > log->end)
        e = log->end;
    st_log_delete_segments_from(log, i + 1);
    st_log_ckpt_lower(log, s->base_offset);
    if (pos < s->size && (rc = st_segment_truncate(s, pos)) < 0)
        ST_ERROR("storage: %s: truncate failed: %s", log->dir, st_strerror(rc));
    if (s->next_offset < e && (rc = st_log_roll_to(log, e)) < 0)
        ST_ERROR("storage: %s: cannot start a segment at %" PRId64 ": %s", log->dir, e,
                 st_strerror(rc));
    *new_end = st_log_active(log)->next_offset;
    return 0;
}

/*
 * After a failed sync: the bytes past the durable offset are suspect (a later fdatasync may
 * report success for pages the kernel already dropped), so they are cut off. When even the
 * cut fails, the log is stuck: every waiter past the durable offset fails now, no round may
 * count anything past it as durable, and appends are refused until a retry of the cut (each
 * append and tick tries) succeeds.
 */
void st_log_cut_back(st_log_t *log, int64_t to, int err)
{
    int64_t new_end = log->end;
    log->cut_err = err;
    int rc = st_log_cut_to_boundary(log, to, &new_end);
    if (rc < 0) {
        ST_ERROR("storage: %s: cannot cut back to %" PRId64 " (%s): no append until it can be",
                 log->dir, to, st_strerror(rc));
        log->stuck_err = err;
        st_log_fire_waiters(log, log->durable, log->durable, err);
        return;
    }
    log->stuck_err = 0;
    st_log_after_cut(log, new_end, err);
}

/* Retries the cut of a stuck log; 0 once it is not stuck. */
int st_log_unstick(st_log_t *log)
{
    if (!log->stuck_err)
        return 0;
    st_log_cut_back(log, log->durable, log->stuck_err);
    return log->stuck_err;
}
