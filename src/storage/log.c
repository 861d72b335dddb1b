/*
 * log.c — the partition log: segments, append, group commit, reads, retention, truncation,
 * recovery on open. The directory layout is drawn in log.h, every file in docs/format.md.
 *
 * Invariants (st_log_check):
 *   1. segs[] is non-empty, sorted by base offset; only segs[nsegs-1] (the active segment)
 *      takes appends; segs[i].next_offset <= segs[i+1].base_offset.
 *   2. segs[0].base_offset <= log_start <= durable <= end == active.next_offset.
 *   3. A sync round is in flight <=> sync_pending > 0; it covers offsets below sync_target.
 *   4. Waiters are sorted by offset and all wait for offsets above `durable` (strict mode).
 *
 * Durability states of the bytes of offset o:
 *
 *     appended (o < end) --round_start()--> syncing (o < sync_target)
 *         --round_done(ok)--> durable (o < durable)
 *         --round_done(error)--> cut off by log_cut_back(): o >= end again
 *
 * A round (round_start) submits one fdatasync per file with bytes written since the previous
 * round was issued; appends arriving meanwhile mark their segment dirty again and wait for the
 * next round, which round_done() issues. The last done() of a round may run inline inside the
 * host's sync_submit(): rounds hold a guard count (sync_pending starts at 1) so completion runs
 * once, after every submit.
 */
#include "storage/log.h"

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
#include "storage/meta.h"
#include "storage/segment.h"

typedef struct sync_req {
    st_log_t *log;
    st_file_t *file;
} sync_req_t;

static void round_start(st_log_t *log);
static bool needs_sync(const st_log_t *log);
static int dir_sync(st_log_t *log);
static void after_front_change(st_log_t *log);
static int ckpt_write(st_log_t *log);

/* ---- config ------------------------------------------------------------------------------ */

void st_log_config_default(st_log_config_t *c)
{
    c->segment_bytes = 1LL << 30;
    c->segment_ms = 7LL * 24 * 3600 * 1000;
    c->retention_ms = 7LL * 24 * 3600 * 1000;
    c->retention_bytes = -1;
    c->retention_deletes = true;
    c->index_interval_bytes = 4096;
    c->max_message_bytes = 1048588;
    c->timestamp_type = ST_TS_CREATE_TIME;
    c->flush_policy = ST_FLUSH_STRICT;
    c->flush_messages = -1;
    c->flush_ms = -1;
    c->compact = false;
    c->min_cleanable_dirty_ratio = 0.5;
    c->min_compaction_lag_ms = 0;
    c->max_compaction_lag_ms = INT64_MAX;
    c->delete_retention_ms = 24LL * 3600 * 1000;
}

int st_log_config_check(const st_log_config_t *c)
{
    if (c->segment_bytes < 14 || c->segment_bytes > INT32_MAX || c->segment_ms < -1 ||
        c->segment_ms == 0 || c->retention_ms < -1 || c->retention_bytes < -1 ||
        c->index_interval_bytes < 0 || c->max_message_bytes < 0 ||
        (c->timestamp_type != ST_TS_CREATE_TIME && c->timestamp_type != ST_TS_LOG_APPEND_TIME) ||
        (c->flush_policy != ST_FLUSH_STRICT && c->flush_policy != ST_FLUSH_WRITE_CACHING) ||
        c->flush_messages < -1 || c->flush_ms < -1 || !(c->min_cleanable_dirty_ratio >= 0) ||
        c->min_cleanable_dirty_ratio > 1 || c->min_compaction_lag_ms < 0 ||
        c->max_compaction_lag_ms < 1 || c->delete_retention_ms < 0)
        return ST_E_CONFIG;
    return 0;
}

int st_log_set_config(st_log_t *log, const st_log_config_t *cfg)
{
    int rc = st_log_config_check(cfg);
    if (rc < 0)
        return rc;
    log->cfg = *cfg;
    /* Switching to strict must not leave acknowledged-but-unsynced data unsynced. */
    /* Switching to strict must sync what write-caching acknowledged; waiters queued under
     * strict keep their promise after a switch to write-caching (needs_sync counts them). */
    if (needs_sync(log))
        round_start(log);
    return 0;
}

const st_log_config_t *st_log_config(const st_log_t *log)
{
    return &log->cfg;
}

const char *st_log_dir(const st_log_t *log)
{
    return log->dir;
}

/* ---- small helpers ----------------------------------------------------------------------- */

static st_segment_t *active(const st_log_t *log)
{
    return log->segs[log->nsegs - 1];
}

static int64_t now_ms(const st_log_t *log)
{
    return st_storage_now(log->env);
}

st_segment_t *st_log_active(const st_log_t *log)
{
    return active(log);
}

int st_log_sync_dir(st_log_t *log)
{
    return dir_sync(log);
}

void st_log_set_clean_point(st_log_t *log, int64_t clean_point)
{
    log->clean_point = clean_point;
    ckpt_write(log);
}

int st_log_replace_segments(st_log_t *log, int from, int to, st_segment_t *s)
{
    for (int i = from; i < to; i++)
        st_segment_free(log->segs[i]);
    int n = to - from, add = s ? 1 : 0;
    ST_ASSERT(n >= 1 && to < log->nsegs); /* never the active segment */
    memmove(&log->segs[from + add], &log->segs[to], (size_t)(log->nsegs - to) * sizeof *log->segs);
    if (s)
        log->segs[from] = s;
    log->nsegs -= n - add;
    log->layout_gen++;
    if (log->segs[0]->base_offset > log->log_start) {
        /* The cleaner emptied the first segments: nothing is left below the next one. */
        log->log_start = log->segs[0]->base_offset;
        after_front_change(log);
    }
    return 0;
}

int64_t st_log_now(const st_log_t *log)
{
    return now_ms(log);
}

static int path_in(const st_log_t *log, const char *name, char *buf, size_t n)
{
    int r = snprintf(buf, n, "%s/%s", log->dir, name);
    return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

static int segs_push(st_log_t *log, st_segment_t *s)
{
    if (log->nsegs == log->capsegs) {
        int cap = log->capsegs ? log->capsegs * 2 : 8;
        st_segment_t **n = realloc(log->segs, (size_t)cap * sizeof *n);
        if (!n)
            return -ENOMEM;
        log->segs = n;
        log->capsegs = cap;
    }
    log->segs[log->nsegs++] = s;
    return 0;
}

/* Removes segs[i] from the array (the caller frees or deletes it). */
static void segs_remove(st_log_t *log, int i)
{
    memmove(&log->segs[i], &log->segs[i + 1], (size_t)(log->nsegs - i - 1) * sizeof *log->segs);
    log->nsegs--;
}

/* Index of the last segment with base <= offset, or -1. */
static int seg_for(const st_log_t *log, int64_t offset)
{
    int lo = 0, hi = log->nsegs;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (log->segs[mid]->base_offset <= offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

static void log_unref(st_log_t *log)
{
    if (--log->refs > 0)
        return;
    free(log->epochs);
    free(log->segs);
    free(log->dir);
    free(log);
}

/* ---- checkpoint file, epochs ------------------------------------------------------------- */

static int ckpt_write(st_log_t *log)
{
    st_meta_ckpt_t c = {log->log_start, log->recovery_point, log->clean_point};
    uint8_t b[ST_META_CKPT_SIZE];
    st_meta_encode_ckpt(&c, b);
    int rc = st_file_pwrite(log->ckpt, b, sizeof b, 0);
    if (log->recovery_point > log->ckpt_max_rp)
        log->ckpt_max_rp = log->recovery_point; /* even a failed write may have landed */
    if (rc == 0)
        log->ckpt_dirty = true;
    else
        ST_WARN("storage: %s: cannot write %s: %s", log->dir, ST_META_CKPT_FILE, st_strerror(rc));
    return rc;
}

/* Writes leader-epoch-checkpoint by tmp + rename. At run time this does not sync: the cache
 * can be rebuilt from the batches (each carries its epoch), which open does when the file is
 * missing, corrupt or disagrees with the log. close() writes it durably. */
/*
 * Moves the recovery point down to rp and syncs the checkpoint before returning (blocking; cuts
 * only). Recovery may cut whatever lies at or past the recovery point on disk, and must cut
 * nothing below it: once a cut lets new, unsynced bytes take the place of offsets below the old
 * point, a crash must find the lower one.
 */
static int ckpt_sync_now(st_log_t *log)
{
    int rc = ckpt_write(log);
    if (rc == 0)
        rc = st_file_sync_now(log->ckpt);
    if (rc == 0)
        log->ckpt_max_rp = log->recovery_point;
    log->rp_unsynced = rc < 0;
    if (rc < 0)
        ST_ERROR("storage: %s: cannot sync %s (%s): appends wait until it can be", log->dir,
                 ST_META_CKPT_FILE, st_strerror(rc));
    return rc;
}

static void ckpt_lower(st_log_t *log, int64_t rp)
{
    /* A round in flight must not raise it again past the cut when it completes. */
    if (log->sync_pending > 0 && log->sync_rp > rp)
        log->sync_rp = rp;
    if (log->recovery_point <= rp && log->ckpt_max_rp <= rp)
        return;
    if (log->recovery_point > rp)
        log->recovery_point = rp;
    ckpt_sync_now(log);
}

static int epochs_write(st_log_t *log, bool durable)
{
    st_buf_t b;
    st_buf_init(&b);
    int rc = st_meta_format_epochs(log->epochs, log->nepochs, &b);
    if (rc == 0 && durable) {
        rc = st_fs_write_file_atomic(&log->env->fs, log->dir, ST_META_EPOCH_FILE, b.data, b.len);
    } else if (rc == 0) {
        char tmp[PATH_MAX], dst[PATH_MAX];
        st_fs_t *fs = &log->env->fs;
        if ((rc = path_in(log, ST_META_EPOCH_FILE ".tmp", tmp, sizeof tmp)) == 0 &&
            (rc = path_in(log, ST_META_EPOCH_FILE, dst, sizeof dst)) == 0) {
            int fd = fs->ops->open(fs->ctx, tmp, ST_FS_RDWR | ST_FS_CREAT | ST_FS_TRUNC);
            rc = fd;
            if (fd >= 0) {
                rc = st_fs_pwrite_full(fs, fd, b.data, b.len, 0);
                fs->ops->close(fs->ctx, fd);
                if (rc == 0)
                    rc = fs->ops->rename(fs->ctx, tmp, dst);
            }
        }
    }
    st_buf_fini(&b);
    if (rc < 0)
        ST_WARN("storage: %s: cannot write %s: %s", log->dir, ST_META_EPOCH_FILE, st_strerror(rc));
    return rc;
}

static int epochs_add(st_log_t *log, int32_t epoch, int64_t start)
{
    if (log->nepochs > 0 && epoch <= log->epochs[log->nepochs - 1].epoch)
        return 0;
    if (log->nepochs == log->capepochs) {
        int cap = log->capepochs ? log->capepochs * 2 : 8;
        st_epoch_entry_t *n = realloc(log->epochs, (size_t)cap * sizeof *n);
        if (!n)
            return -ENOMEM;
        log->epochs = n;
        log->capepochs = cap;
    }
    log->epochs[log->nepochs].epoch = epoch;
    log->epochs[log->nepochs].start_offset = start;
    log->nepochs++;
    return 1;
}

/* Drops entries starting at or after end (truncation). */
static bool epochs_truncate_end(st_log_t *log, int64_t end)
{
    int n = log->nepochs;
    while (log->nepochs > 0 && log->epochs[log->nepochs - 1].start_offset >= end)
        log->nepochs--;
    return n != log->nepochs;
}

/* Kafka's truncateFromStart: entries before start go, the latest of them moves to start. */
static bool epochs_truncate_start(st_log_t *log, int64_t start)
{
    int i = 0;
    while (i + 1 < log->nepochs && log->epochs[i + 1].start_offset <= start)
        i++;
    bool changed = i > 0;
    if (i > 0) {
        memmove(log->epochs, log->epochs + i, (size_t)(log->nepochs - i) * sizeof *log->epochs);
        log->nepochs -= i;
    }
    if (log->nepochs > 0 && log->epochs[0].start_offset < start) {
        log->epochs[0].start_offset = start;
        changed = true;
    }
    return changed;
}

int32_t st_log_latest_epoch(const st_log_t *log)
{
    return log->nepochs ? log->epochs[log->nepochs - 1].epoch : -1;
}

int st_log_end_offset_for_epoch(const st_log_t *log, int32_t epoch, int32_t *out_epoch,
                                int64_t *end_offset)
{
    *out_epoch = -1;
    *end_offset = -1;
    if (epoch < 0 || log->nepochs == 0)
        return 0;
    if (epoch == log->epochs[log->nepochs - 1].epoch) {
        *out_epoch = epoch;
        *end_offset = log->end;
        return 0;
    }
    int hi = 0; /* first entry with a larger epoch */
    while (hi < log->nepochs && log->epochs[hi].epoch <= epoch)
        hi++;
    if (hi == log->nepochs)
        return 0;
    *out_epoch = hi == 0 ? epoch : log->epochs[hi - 1].epoch;
    *end_offset = log->epochs[hi].start_offset;
    return 0;
}

/* ---- group commit ------------------------------------------------------------------------ */

/* Calls, in order, the waiters whose offsets are now durable (res 0), or all waiters above
 * `limit` with res. Waiters are unlinked before any callback runs, so callbacks may call in. */
static void fire_waiters(st_log_t *log, int64_t durable, int64_t limit, int res)
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
static void fire_list(log_waiter_t **list, int res)
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

static bool needs_sync(const st_log_t *log)
{
    if (log->ckpt_dirty && log->ckpt_waiters)
        return true;
    if (log->end <= log->durable)
        return false;
    if (log->cfg.flush_policy == ST_FLUSH_STRICT || log->waiters)
        return true;
    if (log->cfg.flush_messages >= 0 && log->unflushed_msgs >= log->cfg.flush_messages)
        return true;
    if (log->cfg.flush_ms >= 0 && now_ms(log) - log->last_sync_ms >= log->cfg.flush_ms)
        return true;
    return false;
}

static void log_cut_back(st_log_t *log, int64_t to, int err);

static void round_done(st_log_t *log)
{
    int err = log->sync_err;
    if (log->closed) {
        log_unref(log);
        return;
    }
    log->last_sync_ms = now_ms(log);
    if (log->ckpt_in_round) {
        log->ckpt_in_round = false;
        if (err)
            log->ckpt_dirty = true; /* synced again by a later round */
        fire_list(&log->ckpt_round_waiters, err);
    }
    if (err == 0 && log->sync_retry) {
        /* Some sync could not be submitted: nothing is cut, nothing counts as durable yet;
         * st_log_tick (or the next append) starts the round again. */
        if (log->sync_retries++ % 100 == 0)
            ST_WARN("storage: %s: a sync could not be submitted (out of descriptors, memory or"
                    " submission slots); retrying",
                    log->dir);
        log_unref(log);
        return;
    } else if (err == 0) {
        log->sync_retries = 0;
        int64_t target = log->sync_target < log->end ? log->sync_target : log->end;
        if (target > log->durable)
            log->durable = target;
        if (log->sync_rp > log->recovery_point) {
            log->recovery_point = log->sync_rp;
            ckpt_write(log);
        }
        fire_waiters(log, log->durable, INT64_MAX, 0);
    } else if (log->durable < log->end) {
        ST_ERROR("storage: %s: fdatasync failed (%s); cutting the log back to offset %" PRId64
                 " from %" PRId64,
                 log->dir, st_strerror(err), log->durable, log->end);
        log_cut_back(log, log->durable, err);
    } else {
        ST_ERROR("storage: %s: fdatasync of %s failed (%s)", log->dir, ST_META_CKPT_FILE,
                 st_strerror(err));
    }
    if (!log->closed && needs_sync(log))
        round_start(log);
    log_unref(log);
}

static void round_put(st_log_t *log)
{
    if (--log->sync_pending == 0)
        round_done(log);
}

static void sync_done(void *arg, int res)
{
    sync_req_t *r = arg;
    st_log_t *log = r->log;
    st_file_unpin(r->file);
    st_file_unref(r->file);
    free(r);
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
    int fd = st_file_pin(f);
    if (fd < 0) {
        if (transient(fd))
            return fd;
        if (log->sync_err == 0)
            log->sync_err = fd;
        return 0;
    }
    sync_req_t *r = malloc(sizeof *r);
    if (!r) {
        st_file_unpin(f);
        return -ENOMEM;
    }
    r->log = log;
    r->file = f;
    st_file_ref(f);
    log->sync_pending++; /* before: done() may run inside sync_submit */
    int rc = log->env->sync_submit(log->env->sync_ctx, fd, sync_done, r);
    if (rc < 0) {
        log->sync_pending--;
        st_file_unpin(f);
        st_file_unref(f);
        free(r);
        return rc;
    }
    return 0;
}

static void round_start(st_log_t *log)
{
    if (log->closed || log->sync_pending > 0 || log->stuck_err)
        return;
    if (log->end <= log->durable && !(log->ckpt_dirty && log->ckpt_waiters))
        return;
    log->sync_pending = 1; /* guard: completion waits until every submit is made */
    log->refs++;
    log->sync_err = 0;
    log->sync_retry = false;
    log->sync_target = log->end;
    log->sync_rp = active(log)->base_offset;
    for (int i = 0; i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        if (s->log_dirty && log->sync_rp > s->base_offset)
            log->sync_rp = s->base_offset;
        if (s->log_dirty) {
            s->log_dirty = false;
            if (sync_file(log, s->log) < 0)
                s->log_dirty = log->sync_retry = true;
        }
        if (s->idx_dirty) {
            s->idx_dirty = false;
            if ((sync_file(log, s->oidx_file) | sync_file(log, s->tidx_file)) < 0)
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
    round_start(log);
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
    round_start(log);
    return 0;
}

int st_log_flush(st_log_t *log)
{
    if (log->closed)
        return ST_E_CLOSED;
    round_start(log);
    return 0;
}

bool st_log_sync_in_flight(const st_log_t *log)
{
    return log->sync_pending > 0;
}

/* ---- truncation core --------------------------------------------------------------------- */

/* Makes the directory's entries durable: segments created at a roll must exist after a crash
 * before anything appended to them is promised, and segments removed by a cut must not come
 * back (their stale records would overlap what was appended since). Blocking, but only at a
 * roll or a cut, never per append. */
static int dir_sync(st_log_t *log)
{
    st_fs_t *fs = &log->env->fs;
    int rc = fs->ops->fsync_dir(fs->ctx, log->dir);
    if (rc < 0)
        ST_ERROR("storage: %s: directory sync failed: %s", log->dir, st_strerror(rc));
    return rc;
}

/* Deletes segs[i..] (files unlinked; readers holding ranges keep reading), durably. */
static void delete_segments_from(st_log_t *log, int i)
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
        dir_sync(log);
}

/* After the end moved down to new_end: fix durability bookkeeping and tell waiters. */
static void after_cut(st_log_t *log, int64_t new_end, int err)
{
    log->end = new_end;
    if (log->durable > new_end)
        log->durable = new_end;
    if (log->sync_pending > 0 && log->sync_target > new_end)
        log->sync_target = new_end;
    ckpt_lower(log, active(log)->base_offset);
    if (epochs_truncate_end(log, new_end))
        epochs_write(log, false);
    if (log->on_cut)
        log->on_cut(log->on_cut_arg, new_end);
    fire_waiters(log, log->durable, new_end, err);
}

void st_log_set_cut_hook(st_log_t *log, st_log_cut_fn fn, void *arg)
{
    log->on_cut = fn;
    log->on_cut_arg = arg;
}

static int roll_to(st_log_t *log, int64_t base);

/*
 * Cuts the log so that it ends at E = min(to, base of the first batch whose last offset is
 * >= to), or at `to` if no batch reaches it (to < end). Batches with last offset >= to go
 * whole. When E lies past the kept data (a gap: replica appends, or data recovered after a
 * crash), an empty segment named E is started so the end survives a reopen. Errors are logged;
 * the in-memory state follows the cut regardless (a file that could not be shortened is
 * marked so the next append shortens it first).
 */
static int cut_to_boundary(st_log_t *log, int64_t to, int64_t *new_end)
{
    int i = seg_for(log, to);
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
    delete_segments_from(log, i + 1);
    ckpt_lower(log, s->base_offset);
    if (pos < s->size && (rc = st_segment_truncate(s, pos)) < 0)
        ST_ERROR("storage: %s: truncate failed: %s", log->dir, st_strerror(rc));
    if (s->next_offset < e && (rc = roll_to(log, e)) < 0)
        ST_ERROR("storage: %s: cannot start a segment at %" PRId64 ": %s", log->dir, e,
                 st_strerror(rc));
    *new_end = active(log)->next_offset;
    return 0;
}

/*
 * After a failed sync: the bytes past the durable offset are suspect (a later fdatasync may
 * report success for pages the kernel already dropped), so they are cut off. When even the
 * cut fails, the log is stuck: every waiter past the durable offset fails now, no round may
 * count anything past it as durable, and appends are refused until a retry of the cut (each
 * append and tick tries) succeeds.
 */
static void log_cut_back(st_log_t *log, int64_t to, int err)
{
    int64_t new_end = log->end;
    log->cut_err = err;
    int rc = cut_to_boundary(log, to, &new_end);
    if (rc < 0) {
        ST_ERROR("storage: %s: cannot cut back to %" PRId64 " (%s): no append until it can be",
                 log->dir, to, st_strerror(rc));
        log->stuck_err = err;
        fire_waiters(log, log->durable, log->durable, err);
        return;
    }
    log->stuck_err = 0;
    after_cut(log, new_end, err);
}

/* Retries the cut of a stuck log; 0 once it is not stuck. */
static int unstick(st_log_t *log)
{
    if (!log->stuck_err)
        return 0;
    log_cut_back(log, log->durable, log->stuck_err);
    return log->stuck_err;
}

/* ---- segments ---------------------------------------------------------------------------- */

static int roll_to(st_log_t *log, int64_t base)
{
    st_segment_t *a = active(log);
    if (a->size == 0 && a->base_offset == base)
        return 0;
    int rc = st_segment_flush_indexes(a, true);
    if (rc < 0)
        return rc;
    st_segment_t *s;
    rc = st_segment_create(&log->env->fdcache, log->dir, base, now_ms(log), &s);
    if (rc < 0)
        return rc;
    if ((rc = dir_sync(log)) < 0) {
        st_segment_delete(s);
        return rc;
    }
    if (a->size == 0) {
        /* An empty active segment is replaced, not kept behind the new one. */
        log->nsegs--;
        st_segment_delete(a);
    }
    rc = segs_push(log, s);
    if (rc < 0) {
        st_segment_delete(s);
        return rc;
    }
    if (log->segs[0]->base_offset > log->log_start) {
        /* The only segment was empty and replaced: nothing exists below its successor. */
        log->log_start = log->segs[0]->base_offset;
        ckpt_write(log);
    }
    return 0;
}

int st_log_roll(st_log_t *log)
{
    if (log->closed)
        return ST_E_CLOSED;
    if (active(log)->size == 0)
        return 0;
    return roll_to(log, log->end);
}

static int64_t roll_base_ms(const st_segment_t *s)
{
    return s->created_ms;
}

/*
 * Rolls before an append of len bytes holding offsets first_offset..last_offset when a limit
 * says so. Every batch of the append must land at a relative offset below 2^31 in the active
 * segment (the index keeps relative offsets, recovery refuses a batch beyond them): the append
 * goes to a segment based at most INT32_MAX below last_offset, rolling to first_offset if need
 * be. An append whose own span is wider fits no segment and is refused whole, before anything
 * changes: ST_E_TOO_LARGE. (Validated producer batches cannot get there; the log does not rely
 * on its callers for it.)
 */
static int maybe_roll(st_log_t *log, int64_t len, int64_t first_offset, int64_t last_offset)
{
    if (last_offset - first_offset > INT32_MAX)
        return ST_E_TOO_LARGE;
    st_segment_t *a = active(log);
    if (a->size == 0)
        return first_offset > a->base_offset ? roll_to(log, first_offset) : 0;
    bool roll = a->size + len > log->cfg.segment_bytes ||
                (log->cfg.segment_ms > 0 && now_ms(log) - roll_base_ms(a) > log->cfg.segment_ms) ||
                last_offset - a->base_offset > INT32_MAX;
    return roll ? roll_to(log, first_offset) : 0;
}

/* ---- append ------------------------------------------------------------------------------ */

static int do_append(st_log_t *log, uint8_t *records, size_t len, const st_batch_hdr_t *hdrs, int n,
                     int64_t first, int64_t last)
{
    int rc;
    if ((rc = unstick(log)) < 0)
        return rc;
    if (log->rp_unsynced && (rc = ckpt_sync_now(log)) < 0)
        return rc;
    rc = maybe_roll(log, (int64_t)len, first, last);
    if (rc < 0)
        return rc;
    rc = st_segment_append(active(log), records, len, hdrs, n, log->cfg.index_interval_bytes);
    if (rc < 0) {
        ST_WARN("storage: %s: append of %zu bytes failed: %s", log->dir, len, st_strerror(rc));
        return rc;
    }
    log->end = last + 1;
    log->cut_err = 0;
    bool epochs_changed = false;
    for (int i = 0; i < n; i++)
        if (hdrs[i].partition_leader_epoch >= 0 &&
            epochs_add(log, hdrs[i].partition_leader_epoch, hdrs[i].base_offset) > 0)
            epochs_changed = true;
    if (epochs_changed)
        epochs_write(log, false);
    log->unflushed_msgs += last - first + 1;
    if (needs_sync(log))
        round_start(log);
    return 0;
}

#define HDRS_ON_STACK 16

int st_log_append(st_log_t *log, uint8_t *records, size_t len, int32_t leader_epoch,
                  st_log_append_info_t *info, st_batch_verdict_t *verdict)
{
    if (verdict) {
        verdict->err = 0;
        verdict->why = "ok";
        verdict->position = 0;
    }
    if (log->closed)
        return ST_E_CLOSED;
    if (len == 0) {
        if (verdict) {
            verdict->err = ST_E_INVALID;
            verdict->why = "no record batches";
        }
        return ST_E_INVALID;
    }
    if ((int64_t)len > log->cfg.segment_bytes) {
        if (verdict) {
            verdict->err = ST_E_TOO_LARGE;
            verdict->why = "records larger than segment.bytes";
        }
        return ST_E_TOO_LARGE;
    }
    st_batch_hdr_t stack_hdrs[HDRS_ON_STACK], *hdrs = stack_hdrs;
    int n = 0, cap = HDRS_ON_STACK, rc = 0;
    int64_t records_total = 0;
    for (size_t pos = 0; pos < len;) {
        if (n == cap) {
            st_batch_hdr_t *nh = malloc((size_t)cap * 2 * sizeof *nh);
            if (!nh) {
                rc = -ENOMEM;
                goto out;
            }
            memcpy(nh, hdrs, (size_t)n * sizeof *nh);
            if (hdrs != stack_hdrs)
                free(hdrs);
            hdrs = nh;
            cap *= 2;
        }
        rc = st_batch_validate_client(records + pos, len - pos, log->cfg.max_message_bytes,
                                      &hdrs[n], verdict);
        if (rc < 0) {
            if (verdict)
                verdict->position = (int64_t)pos;
            goto out;
        }
        records_total += hdrs[n].records_count;
        pos += (size_t)st_batch_size(&hdrs[n]);
        n++;
    }
    int64_t first = log->end;
    int64_t ts = log->cfg.timestamp_type == ST_TS_LOG_APPEND_TIME ? now_ms(log) : -1;
    int64_t off = first;
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        uint8_t *b = records + pos;
        st_batch_set_base_offset(b, off);
        st_batch_set_leader_epoch(b, leader_epoch);
        hdrs[i].base_offset = off;
        hdrs[i].partition_leader_epoch = leader_epoch;
        if (ts >= 0) {
            st_batch_set_log_append_time(b, (size_t)st_batch_size(&hdrs[i]), ts);
            hdrs[i].max_timestamp = ts;
            hdrs[i].attributes |= ST_BATCH_ATTR_LOG_APPEND_TIME;
        }
        off += hdrs[i].records_count;
        pos += (size_t)st_batch_size(&hdrs[i]);
    }
    rc = do_append(log, records, len, hdrs, n, first, off - 1);
    if (rc == 0 && info) {
        info->base_offset = first;
        info->last_offset = off - 1;
        info->log_append_time = ts;
        info->log_start_offset = log->log_start;
        info->batches = n;
        info->records = (int32_t)records_total;
    }
out:
    if (hdrs != stack_hdrs)
        free(hdrs);
    ST_DEBUG_ASSERT(st_log_check(log));
    return rc;
}

int st_log_append_replica(st_log_t *log, const uint8_t *records, size_t len,
                          st_log_append_info_t *info)
{
    if (log->closed)
        return ST_E_CLOSED;
    if (len == 0)
        return ST_E_INVALID;
    if ((int64_t)len > log->cfg.segment_bytes)
        return ST_E_TOO_LARGE;
    st_batch_hdr_t stack_hdrs[HDRS_ON_STACK], *hdrs = stack_hdrs;
    int n = 0, cap = HDRS_ON_STACK, rc = 0;
    int64_t next = log->end, records_total = 0;
    for (size_t pos = 0; pos < len;) {
        if (n == cap) {
            st_batch_hdr_t *nh = malloc((size_t)cap * 2 * sizeof *nh);
            if (!nh) {
                rc = -ENOMEM;
                goto out;
            }
            memcpy(nh, hdrs, (size_t)n * sizeof *nh);
            if (hdrs != stack_hdrs)
                free(hdrs);
            hdrs = nh;
            cap *= 2;
        }
        rc = st_batch_check(records + pos, len - pos, &hdrs[n]);
        if (rc < 0) {
            rc = rc == ST_E_UNSUPPORTED ? rc : ST_E_CORRUPT;
            goto out;
        }
        if (hdrs[n].base_offset < next) {
            rc = ST_E_OUT_OF_RANGE;
            goto out;
        }
        next = st_batch_last_offset(&hdrs[n]) + 1;
        records_total += hdrs[n].records_count;
        pos += (size_t)st_batch_size(&hdrs[n]);
        n++;
    }
    /* A batch may not cross a segment's u32 relative offset range; roll so it starts one. */
    rc = do_append(log, (uint8_t *)(uintptr_t)records, len, hdrs, n, hdrs[0].base_offset, next - 1);
    if (rc == 0 && info) {
        info->base_offset = hdrs[0].base_offset;
        info->last_offset = next - 1;
        info->log_append_time = -1;
        info->log_start_offset = log->log_start;
        info->batches = n;
        info->records = (int32_t)records_total;
    }
out:
    if (hdrs != stack_hdrs)
        free(hdrs);
    return rc;
}

/* ---- reads ------------------------------------------------------------------------------- */

int st_log_read(st_log_t *log, int64_t fetch_offset, int64_t max_bytes, int64_t max_offset,
                st_log_read_t *out)
{
    memset(out, 0, sizeof *out);
    out->log_start_offset = log->log_start;
    out->log_end_offset = log->end;
    out->first_offset = fetch_offset;
    out->next_offset = fetch_offset;
    if (log->closed)
        return ST_E_CLOSED;
    if (fetch_offset < log->log_start || fetch_offset > log->end)
        return ST_E_OUT_OF_RANGE;
    if (max_offset < 0 || max_offset > log->end)
        max_offset = log->end;
    int i = seg_for(log, fetch_offset);
    if (i < 0)
        i = 0;
    st_segment_reader_t *r = malloc(sizeof *r);
    if (!r)
        return -ENOMEM;
    int rc = 0;
    int64_t want = fetch_offset;
    bool stop = fetch_offset >= max_offset;
    for (; i < log->nsegs && !stop && out->nranges < ST_LOG_READ_MAX_RANGES; i++) {
        st_segment_t *s = log->segs[i];
        st_segment_reader_init(r, s);
        st_segment_pos_t at;
        rc = st_segment_find(r, want, &at);
        if (rc < 0)
            break;
        if (rc == 0) {
            rc = 0;
            continue;
        }
        int64_t start = at.pos, pos = at.pos;
        st_batch_hdr_t h = at.hdr;
        for (;;) {
            int64_t bs = st_batch_size(&h);
            if (st_batch_last_offset(&h) >= max_offset ||
                (out->bytes > 0 && out->bytes + bs > max_bytes)) {
                stop = true;
                break;
            }
            if (out->bytes == 0)
                out->first_offset = h.base_offset;
            out->bytes += bs;
            out->next_offset = st_batch_last_offset(&h) + 1;
            pos += bs;
            if (pos >= s->size)
                break;
            if ((rc = st_segment_read_hdr(r, pos, &h)) < 0)
                break;
        }
        if (rc < 0)
            break;
        if (pos > start) {
            int fd = st_file_pin(s->log);
            if (fd < 0) {
                rc = fd;
                break;
            }
            st_file_ref(s->log);
            st_log_range_t *rg = &out->ranges[out->nranges++];
            rg->file = s->log;
            rg->pos = start;
            rg->len = pos - start;
        }
        want = out->next_offset;
    }
    free(r);
    if (rc < 0) {
        st_log_read_release(out);
        return rc;
    }
    return 0;
}

void st_log_read_release(st_log_read_t *r)
{
    for (int i = 0; i < r->nranges; i++) {
        st_file_unpin(r->ranges[i].file);
        st_file_unref(r->ranges[i].file);
        r->ranges[i].file = NULL;
    }
    r->nranges = 0;
    r->bytes = 0;
}

ssize_t st_log_read_copy(const st_log_read_t *r, uint8_t *dst, size_t cap)
{
    if ((uint64_t)r->bytes > cap)
        return -ENOBUFS;
    size_t at = 0;
    for (int i = 0; i < r->nranges; i++) {
        const st_log_range_t *rg = &r->ranges[i];
        ssize_t n = st_fs_pread_full(&rg->file->cache->fs, st_file_fd(rg->file), dst + at,
                                     (size_t)rg->len, rg->pos);
        if (n < 0)
            return n;
        if (n != rg->len)
            return -EIO;
        at += (size_t)n;
    }
    return (ssize_t)at;
}

/* ---- offsets ----------------------------------------------------------------------------- */

int64_t st_log_start_offset(const st_log_t *log)
{
    return log->log_start;
}

int64_t st_log_end_offset(const st_log_t *log)
{
    return log->end;
}

int64_t st_log_durable_offset(const st_log_t *log)
{
    return log->durable;
}

int64_t st_log_size_bytes(const st_log_t *log)
{
    int64_t n = 0;
    for (int i = 0; i < log->nsegs; i++)
        n += log->segs[i]->size;
    return n;
}

int st_log_segment_count(const st_log_t *log)
{
    return log->nsegs;
}

/* Reads the whole batch at `at` into a malloc'd buffer. */
static int read_batch(st_segment_t *s, const st_segment_pos_t *at, uint8_t **out)
{
    size_t bs = (size_t)st_batch_size(&at->hdr);
    uint8_t *b = malloc(bs);
    if (!b)
        return -ENOMEM;
    ssize_t n = st_file_pread(s->log, b, bs, at->pos);
    st_batch_hdr_t h;
    if (n < 0 || (size_t)n != bs || st_batch_check(b, bs, &h) < 0) {
        free(b);
        return n < 0 ? (int)n : ST_E_CORRUPT;
    }
    *out = b;
    return 0;
}

/* The first record of the batch at `at` with timestamp >= ts and offset >= min_offset. */
static int record_at_or_after(st_segment_t *s, const st_segment_pos_t *at, int64_t ts,
                              int64_t min_offset, int64_t *offset, int64_t *found_ts)
{
    *offset = at->hdr.base_offset > min_offset ? at->hdr.base_offset : min_offset;
    *found_ts = at->hdr.max_timestamp;
    if (st_batch_compression(&at->hdr) != 0)
        return 0;
    uint8_t *b = NULL;
    int rc = read_batch(s, at, &b);
    if (rc < 0)
        return rc;
    st_batch_iter_t it;
    st_batch_record_t rec;
    st_batch_iter_init(&it, b, (size_t)st_batch_size(&at->hdr));
    while ((rc = st_batch_iter_next(&it, &rec)) == 1) {
        if (rec.timestamp >= ts && rec.offset >= min_offset) {
            *offset = rec.offset;
            *found_ts = rec.timestamp;
            break;
        }
    }
    free(b);
    return rc < 0 ? rc : 0;
}

int st_log_offset_for_timestamp(st_log_t *log, int64_t ts, int64_t *offset, int64_t *found_ts)
{
    if (log->closed)
        return ST_E_CLOSED;
    st_segment_reader_t *r = malloc(sizeof *r);
    if (!r)
        return -ENOMEM;
    int rc = ST_E_NOT_FOUND;
    for (int i = seg_for(log, log->log_start) < 0 ? 0 : seg_for(log, log->log_start);
         i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        if (s->max_timestamp < ts)
            continue;
        /* Every batch up to the indexed offset has maxTimestamp below ts. */
        int64_t from = log->log_start > s->base_offset ? log->log_start : s->base_offset;
        ptrdiff_t k = st_timeidx_below(&s->tidx, ts);
        if (k >= 0 && s->base_offset + s->tidx.e[k].rel + 1 > from)
            from = s->base_offset + s->tidx.e[k].rel + 1;
        st_segment_reader_init(r, s);
        st_segment_pos_t at;
        int f = st_segment_find(r, from, &at);
        while (f == 1) {
            if (at.hdr.max_timestamp >= ts)
                break;
            int64_t next = at.pos + st_batch_size(&at.hdr);
            if (next >= s->size) {
                f = 0;
                break;
            }
            f = st_segment_read_hdr(r, next, &at.hdr);
            if (f == 0) {
                at.pos = next;
                f = 1;
            }
        }
        if (f < 0) {
            rc = f;
            break;
        }
        if (f == 1) {
            rc = record_at_or_after(s, &at, ts, log->log_start, offset, found_ts);
            break;
        }
    }
    free(r);
    return rc;
}

int st_log_max_timestamp(st_log_t *log, int64_t *ts, int64_t *offset)
{
    st_segment_t *best = NULL;
    for (int i = 0; i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        if (s->max_timestamp >= 0 && s->max_ts_offset >= log->log_start &&
            (!best || s->max_timestamp > best->max_timestamp))
            best = s;
    }
    if (!best)
        return ST_E_NOT_FOUND;
    *ts = best->max_timestamp;
    *offset = best->max_ts_offset;
    st_segment_reader_t *r = malloc(sizeof *r);
    if (!r)
        return -ENOMEM;
    st_segment_reader_init(r, best);
    st_segment_pos_t at;
    int rc = st_segment_find(r, best->max_ts_offset, &at);
    free(r);
    if (rc == 1 && st_batch_compression(&at.hdr) == 0) {
        int64_t o, t;
        if (record_at_or_after(best, &at, best->max_timestamp, log->log_start, &o, &t) == 0 &&
            t == best->max_timestamp)
            *offset = o;
    }
    return 0;
}

/* ---- retention, start offset, truncation -------------------------------------------------- */

static int delete_front(st_log_t *log)
{
    log->layout_gen++;
    st_segment_t *s = log->segs[0];
    segs_remove(log, 0);
    int rc = st_segment_delete(s);
    if (rc < 0)
        ST_ERROR("storage: %s: cannot delete a segment: %s", log->dir, st_strerror(rc));
    if (log->segs[0]->base_offset > log->log_start)
        log->log_start = log->segs[0]->base_offset;
    return 0;
}

static void after_front_change(st_log_t *log)
{
    ckpt_write(log);
    if (epochs_truncate_start(log, log->log_start))
        epochs_write(log, false);
}

int st_log_enforce_retention(st_log_t *log)
{
    if (log->closed)
        return ST_E_CLOSED;
    int64_t now = now_ms(log);
    int64_t total = st_log_size_bytes(log);
    int deleted = 0;
    while (log->nsegs > 1) {
        st_segment_t *s = log->segs[0];
        bool below_start = log->segs[1]->base_offset <= log->log_start;
        bool by_time = log->cfg.retention_deletes && log->cfg.retention_ms >= 0 &&
                       s->max_timestamp >= 0 && now - s->max_timestamp > log->cfg.retention_ms;
        bool by_size = log->cfg.retention_deletes && log->cfg.retention_bytes >= 0 &&
                       total - s->size >= log->cfg.retention_bytes;
        if (!below_start && !by_time && !by_size)
            break;
        ST_INFO("storage: %s: deleting segment %" PRId64 " (%s)", log->dir, s->base_offset,
                below_start ? "below the log start"
                : by_time   ? "retention.ms"
                            : "retention.bytes");
        total -= s->size;
        delete_front(log);
        deleted++;
    }
    if (deleted)
        after_front_change(log);
    return deleted;
}

int st_log_set_start_offset(st_log_t *log, int64_t offset)
{
    if (log->closed)
        return ST_E_CLOSED;
    if (offset > log->end || offset < 0)
        return ST_E_OUT_OF_RANGE;
    if (offset <= log->log_start)
        return 0;
    log->log_start = offset;
    while (log->nsegs > 1 && log->segs[1]->base_offset <= offset)
        delete_front(log);
    after_front_change(log);
    return 0;
}

int st_log_truncate_fully(st_log_t *log, int64_t new_start)
{
    if (log->closed)
        return ST_E_CLOSED;
    if (new_start < 0)
        return ST_E_INVALID;
    st_segment_t *s;
    char p[PATH_MAX];
    int rc = st_segment_path(p, sizeof p, log->dir, new_start, ".log");
    if (rc < 0)
        return rc;
    /* Delete first: the new segment may reuse a current segment's name. */
    delete_segments_from(log, 0);
    rc = st_segment_create(&log->env->fdcache, log->dir, new_start, now_ms(log), &s);
    if (rc == 0 && (rc = dir_sync(log)) < 0)
        st_segment_delete(s);
    if (rc < 0 || (rc = segs_push(log, s)) < 0) {
        ST_ERROR("storage: %s: cannot start over at %" PRId64 ": %s", log->dir, new_start,
                 st_strerror(rc));
        return rc;
    }
    log->log_start = new_start;
    log->nepochs = 0;
    epochs_write(log, false);
    log->recovery_point = new_start;
    if (log->sync_pending > 0)
        log->sync_rp = new_start;
    int64_t old_end = log->end;
    log->durable = new_start;
    if (log->sync_pending > 0)
        log->sync_target = new_start;
    log->end = new_start;
    ckpt_sync_now(log);
    if (log->on_cut && new_start < old_end)
        log->on_cut(log->on_cut_arg, new_start);
    fire_waiters(log, -1, INT64_MIN, ST_E_OUT_OF_RANGE);
    return 0;
}

int st_log_truncate_to(st_log_t *log, int64_t offset)
{
    if (log->closed)
        return ST_E_CLOSED;
    if (offset >= log->end)
        return 0;
    if (offset < log->log_start)
        return st_log_truncate_fully(log, offset);
    int64_t new_end;
    int rc = cut_to_boundary(log, offset, &new_end);
    if (rc < 0)
        return rc;
    if (new_end < log->log_start) {
        /* The batch holding the log start went: nothing readable is left below the cut. */
        return st_log_truncate_fully(log, log->log_start);
    }
    after_cut(log, new_end, ST_E_OUT_OF_RANGE);
    ST_DEBUG_ASSERT(st_log_check(log));
    return 0;
}

int st_log_tick(st_log_t *log)
{
    if (log->closed)
        return ST_E_CLOSED;
    unstick(log);
    if (needs_sync(log))
        round_start(log);
    st_segment_t *a = active(log);
    if (log->cfg.segment_ms > 0 && a->size > 0 &&
        now_ms(log) - roll_base_ms(a) > log->cfg.segment_ms) {
        int rc = roll_to(log, log->end);
        if (rc < 0)
            return rc;
    }
    return st_log_enforce_retention(log);
}

/* ---- partition metadata ------------------------------------------------------------------ */

int st_log_set_topic_id(st_log_t *log, const uint8_t id[16])
{
    char text[96];
    int n = st_meta_format_partition_metadata(id, text, sizeof text);
    if (n < 0)
        return n;
    int rc =
        st_fs_write_file_atomic(&log->env->fs, log->dir, ST_META_PARTMETA_FILE, text, (size_t)n);
    if (rc == 0) {
        memcpy(log->topic_id, id, 16);
        log->has_topic_id = true;
    }
    return rc;
}

int st_log_topic_id(const st_log_t *log, uint8_t id[16])
{
    if (!log->has_topic_id)
        return ST_E_NOT_FOUND;
    memcpy(id, log->topic_id, 16);
    return 0;
}

/* ---- open, close, delete ----------------------------------------------------------------- */

typedef struct open_scan {
    st_log_t *log;
    int64_t *bases;
    int n, cap;
    int err;
} open_scan_t;

static int collect_cb(void *arg, const char *name, int is_dir)
{
    open_scan_t *o = arg;
    int64_t base;
    if (is_dir)
        return 0;
    size_t nl = strlen(name);
    if (nl > 4 && strcmp(name + nl - 4, ".tmp") == 0) {
        char p[PATH_MAX];
        if (path_in(o->log, name, p, sizeof p) == 0)
            o->log->env->fs.ops->unlink(o->log->env->fs.ctx, p);
        return 0;
    }
    if (st_segment_parse_name(name, ".log", &base) < 0)
        return 0;
    if (o->n == o->cap) {
        int cap = o->cap ? o->cap * 2 : 16;
        int64_t *b = realloc(o->bases, (size_t)cap * sizeof *b);
        if (!b) {
            o->err = -ENOMEM;
            return 1;
        }
        o->bases = b;
        o->cap = cap;
    }
    o->bases[o->n++] = base;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void epoch_scan_cb(void *arg, const st_batch_hdr_t *h)
{
    st_log_t *log = arg;
    if (h->partition_leader_epoch >= 0)
        epochs_add(log, h->partition_leader_epoch, h->base_offset);
}

/* Rebuilds the epoch cache from the batch headers of every segment. */
static int epochs_rebuild(st_log_t *log)
{
    log->nepochs = 0;
    st_segment_reader_t *r = malloc(sizeof *r);
    if (!r)
        return -ENOMEM;
    int rc = 0;
    for (int i = 0; i < log->nsegs && rc == 0; i++) {
        st_segment_t *s = log->segs[i];
        st_segment_reader_init(r, s);
        st_batch_hdr_t h;
        for (int64_t pos = 0; pos < s->size; pos += st_batch_size(&h)) {
            if ((rc = st_segment_read_hdr(r, pos, &h)) < 0)
                break;
            epoch_scan_cb(log, &h);
        }
    }
    free(r);
    return rc;
}

/* Reads leader-epoch-checkpoint; *rebuild is set when it is missing or corrupt. */
static int load_epochs(st_log_t *log, bool *rebuild)
{
    char p[PATH_MAX];
    *rebuild = false;
    int rc = path_in(log, ST_META_EPOCH_FILE, p, sizeof p);
    if (rc < 0)
        return rc;
    uint8_t *d;
    size_t n;
    rc = st_fs_read_file(&log->env->fs, p, 1 << 24, &d, &n);
    if (rc == -ENOENT || rc == -EFBIG) {
        *rebuild = true;
        return 0;
    }
    if (rc < 0)
        return rc;
    st_epoch_entry_t *e;
    int cnt;
    rc = st_meta_parse_epochs(d, n, &e, &cnt);
    free(d);
    if (rc == ST_E_CORRUPT) {
        ST_WARN("storage: %s: %s is corrupt; rebuilding it from the log", log->dir,
                ST_META_EPOCH_FILE);
        *rebuild = true;
        return 0;
    }
    if (rc < 0)
        return rc;
    free(log->epochs);
    log->epochs = e;
    log->nepochs = cnt;
    log->capepochs = cnt + 1;
    return 0;
}

static void load_partition_metadata(st_log_t *log)
{
    char p[PATH_MAX];
    if (path_in(log, ST_META_PARTMETA_FILE, p, sizeof p) < 0)
        return;
    uint8_t *d;
    size_t n;
    if (st_fs_read_file(&log->env->fs, p, 4096, &d, &n) < 0)
        return;
    if (st_meta_parse_partition_metadata(d, n, log->topic_id) == 0)
        log->has_topic_id = true;
    else
        ST_WARN("storage: %s: %s does not parse; ignored", log->dir, ST_META_PARTMETA_FILE);
    free(d);
}

/* Syncs the directory holding path (its entry for path). */
static int sync_parent(st_fs_t *fs, const char *path)
{
    char p[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof p)
        return -ENAMETOOLONG;
    memcpy(p, path, n + 1);
    char *slash = strrchr(p, '/');
    if (!slash)
        return fs->ops->fsync_dir(fs->ctx, ".");
    if (slash == p)
        slash[1] = 0;
    else
        *slash = 0;
    return fs->ops->fsync_dir(fs->ctx, p);
}

/* mkdir -p; each directory created is made durable in its parent before going on. */
static int mkdir_p(st_fs_t *fs, const char *dir)
{
    char p[PATH_MAX];
    size_t n = strlen(dir);
    if (n >= sizeof p)
        return -ENAMETOOLONG;
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] == '/' || p[i] == 0) {
            char c = p[i];
            p[i] = 0;
            int rc = fs->ops->mkdir(fs->ctx, p);
            if (rc < 0 && rc != -EEXIST)
                return rc;
            if (rc == 0 && (rc = sync_parent(fs, p)) < 0)
                return rc;
            p[i] = c;
        }
    }
    return 0;
}

/*
 * Opens every segment. What recovery may cut (issue 10.5): only offsets that were never
 * promised, those at or past the recovery point (every offset below it was synced) after an
 * unclean shutdown: a torn tail. Bytes that could hold an offset below it, or anything after
 * a clean shutdown, are synced data: if they do not check out, the log is not opened
 * (ST_E_CORRUPT, logged with the file and byte) and nothing is changed on disk, so an operator
 * decides, not the broker. rp_known is false when strata.checkpoint was unreadable: then only
 * the last segment may be cut.
 */
static int open_segments(st_log_t *log, bool clean, const st_meta_ckpt_t *ck, bool rp_known)
{
    open_scan_t o = {.log = log};
    st_fs_t *fs = &log->env->fs;
    int rc = fs->ops->listdir(fs->ctx, log->dir, collect_cb, &o);
    if (rc == 0)
        rc = o.err;
    if (rc < 0) {
        free(o.bases);
        return rc;
    }
    if (o.n > 1)
        qsort(o.bases, (size_t)o.n, sizeof *o.bases, cmp_i64);
    int64_t now = now_ms(log);
    int32_t iv = log->cfg.index_interval_bytes;
    int64_t min_next = 0;
    int64_t rp = ck->recovery_point;
    if (!rp_known && o.n > 0)
        rp = o.bases[o.n - 1];
    int64_t cut_from = rp; /* a clean close moved it to the end */
    for (int i = 0; i < o.n; i++) {
        st_segment_t *s;
        rc = st_segment_open(&log->env->fdcache, log->dir, o.bases[i], now, &s);
        if (rc < 0)
            break;
        if (rp_known && i + 1 < o.n && o.bases[i + 1] <= ck->log_start_offset) {
            /* Wholly below the log start: deleted before the crash (its unlink had not
             * reached the disk), never readable again, whatever its bytes. */
            st_segment_delete(s);
            continue;
        }
        if ((rc = segs_push(log, s)) < 0) {
            st_segment_free(s);
            break;
        }
        if (log->nsegs > 1 && log->segs[log->nsegs - 2]->next_offset > s->base_offset) {
            /* The previous segment runs into this one: a truncation of it that never reached
             * the disk before this segment was started. The later segment wins. */
            st_segment_t *prev = log->segs[log->nsegs - 2];
            st_segment_reader_t *r = malloc(sizeof *r);
            if (!r) {
                rc = -ENOMEM;
                break;
            }
            st_segment_reader_init(r, prev);
            st_segment_pos_t at;
            int f = st_segment_find(r, s->base_offset, &at);
            free(r);
            if (f == 1) {
                ST_WARN("storage: %s: segment %" PRId64 " overlaps segment %" PRId64
                        "; cutting it at byte %" PRId64,
                        log->dir, prev->base_offset, s->base_offset, at.pos);
                if ((rc = st_segment_truncate(prev, at.pos)) < 0)
                    break;
                if ((rc = st_segment_flush_indexes(prev, true)) < 0)
                    break;
            }
            min_next = prev->next_offset;
        }
        bool last = i == o.n - 1;
        bool scan = !clean && (last || o.bases[i + 1] > rp);
        if (!scan) {
            rc = st_segment_load(s, iv);
            if (rc == 0 && s->base_offset < min_next)
                rc = ST_E_CORRUPT;
            if (rc == ST_E_CORRUPT) {
                ST_WARN("storage: %s: segment %" PRId64 " or its indexes do not check out;"
                        " rebuilding",
                        log->dir, s->base_offset);
                scan = true;
            } else if (rc < 0) {
                break;
            }
        }
        if (scan) {
            st_segment_scan_t sc;
            rc = st_segment_recover(s, iv, min_next, cut_from, epoch_scan_cb, log, &sc);
            if (rc == ST_E_CORRUPT)
                ST_ERROR("storage: %s: segment %" PRId64 " holds synced data and is damaged at"
                         " byte %" PRId64 " (%s); the partition stays offline, nothing was"
                         " deleted. Inspect it with `strata dump-log`; to accept the loss, move"
                         " that segment and every later one out of the directory",
                         log->dir, s->base_offset, sc.valid_bytes, sc.why ? sc.why : "?");
            if (rc < 0)
                break;
            if (sc.cut_bytes > 0 && !last) {
                /* Nothing after a cut can be trusted to follow on. */
                ST_WARN("storage: %s: deleting %d segment(s) after the cut in %" PRId64, log->dir,
                        o.n - i - 1, s->base_offset);
                for (int j = i + 1; j < o.n; j++) {
                    st_segment_t *t;
                    if (st_segment_open(&log->env->fdcache, log->dir, o.bases[j], now, &t) == 0)
                        st_segment_delete(t);
                }
                o.n = i + 1;
            }
        }
        if (s->first_batch_ts >= 0 && s->first_batch_ts < s->created_ms)
            s->created_ms = s->first_batch_ts;
        min_next = s->next_offset;
    }
    free(o.bases);
    if (rc < 0)
        return rc;
    /* Empty segments before the last hold nothing: drop them. The last one stays even when
     * empty, as its name is the log end (after a roll or a truncation into a gap). */
    for (int i = log->nsegs - 2; i >= 0; i--) {
        if (log->segs[i]->size == 0) {
            st_segment_t *s = log->segs[i];
            ST_WARN("storage: %s: removing empty segment %" PRId64, log->dir, s->base_offset);
            segs_remove(log, i);
            st_segment_delete(s);
        }
    }
    return 0;
}

int st_log_open(st_storage_env_t *env, const char *dir, const st_log_config_t *cfg, st_log_t **out)
{
    int rc = st_log_config_check(cfg);
    if (rc < 0)
        return rc;
    st_log_t *log = calloc(1, sizeof *log);
    if (!log)
        return -ENOMEM;
    log->env = env;
    log->cfg = *cfg;
    log->refs = 1;
    log->dir = strdup(dir);
    if (!log->dir) {
        free(log);
        return -ENOMEM;
    }
    st_fs_t *fs = &env->fs;
    char p[PATH_MAX];
    bool clean = false, rp_known = true;
    st_meta_ckpt_t ck = {0, 0, 0};

    if ((rc = mkdir_p(fs, dir)) < 0)
        goto fail;
    /* The clean-shutdown marker is consumed once the segments checked out, and gone
     * (durably) before anything is appended. A log that does not open keeps it, so the next
     * attempt judges the same files the same way (never cutting what a clean close synced). */
    char marker[PATH_MAX];
    if ((rc = path_in(log, ST_META_CLEAN_FILE, marker, sizeof marker)) < 0)
        goto fail;
    rc = fs->ops->open(fs->ctx, marker, ST_FS_RDONLY);
    if (rc >= 0) {
        fs->ops->close(fs->ctx, rc);
        clean = true;
    } else if (rc != -ENOENT) {
        goto fail;
    }
    if ((rc = path_in(log, ST_META_CKPT_FILE, p, sizeof p)) < 0)
        goto fail;
    {
        uint8_t *d;
        size_t n;
        int r = st_fs_read_file(fs, p, 4096, &d, &n);
        if (r == 0) {
            if (st_meta_decode_ckpt(d, n, &ck) < 0) {
                ST_WARN("storage: %s: %s is corrupt; checking every segment, cutting only the"
                        " last",
                        dir, ST_META_CKPT_FILE);
                ck.log_start_offset = 0;
                ck.recovery_point = 0;
                clean = false;
                rp_known = false;
            }
            free(d);
        } else if (r != -ENOENT) {
            rc = r;
            goto fail;
        }
    }
    if ((rc = st_file_open(&env->fdcache, p, true, true, &log->ckpt)) < 0)
        goto fail;
    bool rebuild_epochs;
    if ((rc = load_epochs(log, &rebuild_epochs)) < 0)
        goto fail;
    log->clean_point = ck.clean_point;
    if ((rc = st_clean_recover(log)) < 0)
        goto fail;
    if ((rc = open_segments(log, clean, &ck, rp_known)) < 0)
        goto fail;
    if (clean && ((rc = fs->ops->unlink(fs->ctx, marker)) < 0 ||
                  (rc = fs->ops->fsync_dir(fs->ctx, dir)) < 0))
        goto fail;
    if (log->nsegs == 0) {
        st_segment_t *s;
        int64_t base = ck.log_start_offset;
        if ((rc = st_segment_create(&env->fdcache, dir, base, now_ms(log), &s)) < 0)
            goto fail;
        if ((rc = segs_push(log, s)) < 0) {
            st_segment_delete(s);
            goto fail;
        }
    }
    log->end = active(log)->next_offset;
    log->log_start = ck.log_start_offset;
    if (log->log_start < log->segs[0]->base_offset)
        log->log_start = log->segs[0]->base_offset;
    if (log->log_start > log->end)
        log->log_start = log->end;
    /* The epoch cache follows the log: rebuilt from batch headers when its file is gone,
     * and never naming offsets the log does not hold. */
    bool epochs_changed = false;
    if (rebuild_epochs && log->end > log->segs[0]->base_offset) {
        if ((rc = epochs_rebuild(log)) < 0)
            goto fail;
        epochs_changed = true;
    }
    epochs_changed |= epochs_truncate_end(log, log->end);
    epochs_changed |= epochs_truncate_start(log, log->log_start);
    if (epochs_changed)
        epochs_write(log, false);
    load_partition_metadata(log);

    /* Whatever recovery kept is made durable before it is promised to anyone. */
    for (int i = 0; i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        if (s->log_dirty || !clean) {
            if ((rc = st_file_sync_now(s->log)) < 0)
                goto fail;
        }
        if (s->idx_dirty) {
            if ((rc = st_file_sync_now(s->oidx_file)) < 0 ||
                (rc = st_file_sync_now(s->tidx_file)) < 0)
                goto fail;
        }
        s->log_dirty = s->idx_dirty = false;
    }
    if ((rc = fs->ops->fsync_dir(fs->ctx, dir)) < 0)
        goto fail;
    log->durable = log->end;
    log->ckpt_max_rp = rp_known ? ck.recovery_point : INT64_MAX;
    log->recovery_point = active(log)->base_offset;
    if ((rc = ckpt_write(log)) < 0)
        goto fail;
    log->last_sync_ms = now_ms(log);
    ST_DEBUG_ASSERT(st_log_check(log));
    *out = log;
    return 0;
fail:
    ST_ERROR("storage: cannot open %s: %s", dir, st_strerror(rc));
    for (int i = 0; i < log->nsegs; i++)
        st_segment_free(log->segs[i]);
    log->nsegs = 0;
    if (log->ckpt)
        st_file_unref(log->ckpt);
    log_unref(log);
    return rc;
}

/* Frees segments and handles; the struct itself goes with the last reference. */
static void log_release(st_log_t *log)
{
    log->closed = true;
    for (int i = 0; i < log->nsegs; i++)
        st_segment_free(log->segs[i]);
    log->nsegs = 0;
    if (log->ckpt) {
        st_file_unref(log->ckpt);
        log->ckpt = NULL;
    }
    log_unref(log);
}

int st_log_close(st_log_t *log)
{
    int rc = 0, r;
    st_clean_abort(log);
    for (int i = 0; i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        if ((r = st_segment_flush_indexes(s, i == log->nsegs - 1)) < 0 && rc == 0)
            rc = r;
        /* A segment untouched since its last completed sync needs none now (the common case
         * for idle partitions at shutdown); while a sync is in flight, sync everything. */
        bool synced = !s->log_dirty && log->sync_pending == 0;
        if (!synced && (r = st_file_sync_now(s->log)) < 0 && rc == 0)
            rc = r;
        if (s->idx_dirty || s->idx_rewrite) {
            if ((r = st_file_sync_now(s->oidx_file)) < 0 && rc == 0)
                rc = r;
            if ((r = st_file_sync_now(s->tidx_file)) < 0 && rc == 0)
                rc = r;
        }
    }
    if (rc == 0) {
        log->durable = log->end;
        log->recovery_point = log->end;
        if ((r = ckpt_write(log)) < 0)
            rc = r;
        else if ((r = st_file_sync_now(log->ckpt)) < 0)
            rc = r;
    }
    if (rc == 0 && (r = epochs_write(log, true)) < 0)
        rc = r;
    if (rc == 0) {
        char p[PATH_MAX];
        st_fs_t *fs = &log->env->fs;
        if ((r = path_in(log, ST_META_CLEAN_FILE, p, sizeof p)) == 0) {
            /* The marker is empty: only its directory entry needs to reach the disk. */
            int fd = fs->ops->open(fs->ctx, p, ST_FS_RDWR | ST_FS_CREAT);
            r = fd;
            if (fd >= 0) {
                fs->ops->close(fs->ctx, fd);
                r = fs->ops->fsync_dir(fs->ctx, log->dir);
            }
        }
        if (r < 0)
            rc = r;
    }
    log->closed = true;
    fire_waiters(log, rc == 0 ? INT64_MAX : -1, INT64_MIN, rc == 0 ? 0 : rc);
    fire_list(&log->ckpt_waiters, rc);
    fire_list(&log->ckpt_round_waiters, rc);
    log_release(log);
    return rc;
}

static int rm_cb(void *arg, const char *name, int is_dir)
{
    const char **ctx = arg;
    st_storage_env_t *env = (st_storage_env_t *)(uintptr_t)ctx[0];
    char p[PATH_MAX];
    int r = snprintf(p, sizeof p, "%s/%s", ctx[1], name);
    if (r < 0 || (size_t)r >= sizeof p)
        return 0;
    if (is_dir)
        st_storage_delete_dir(env, p);
    else
        env->fs.ops->unlink(env->fs.ctx, p);
    return 0;
}

int st_storage_delete_dir(st_storage_env_t *env, const char *dir)
{
    const char *ctx[2] = {(const char *)env, dir};
    int rc = env->fs.ops->listdir(env->fs.ctx, dir, rm_cb, ctx);
    if (rc < 0)
        return rc;
    return env->fs.ops->rmdir(env->fs.ctx, dir);
}

int st_log_delete(st_log_t *log)
{
    st_storage_env_t *env = log->env;
    char *dir = strdup(log->dir);
    if (!dir)
        return -ENOMEM;
    st_clean_abort(log);
    /* Renamed aside (durably) first: a crash from here on leaves a "-delete" directory that
     * the next start removes, never a directory under the topic's name. */
    char gone[PATH_MAX];
    int rc = st_storage_set_aside(env, dir, "delete", gone, sizeof gone);
    if (rc < 0) {
        ST_ERROR("storage: %s: cannot rename for deletion (%s); deleting in place", dir,
                 st_strerror(rc));
        gone[0] = 0;
    }
    log->closed = true;
    fire_waiters(log, -1, INT64_MIN, ST_E_CLOSED);
    fire_list(&log->ckpt_waiters, ST_E_CLOSED);
    fire_list(&log->ckpt_round_waiters, ST_E_CLOSED);
    for (int i = 0; i < log->nsegs; i++) {
        if (gone[0])
            st_segment_free(log->segs[i]); /* read ranges keep their descriptors */
        else
            st_segment_delete(log->segs[i]);
    }
    log->nsegs = 0;
    if (log->ckpt && !gone[0])
        st_file_unlink(log->ckpt);
    log_release(log);
    rc = st_storage_delete_dir(env, gone[0] ? gone : dir);
    if (rc == 0)
        rc = sync_parent(&env->fs, dir);
    free(dir);
    return rc;
}

int st_storage_set_aside(st_storage_env_t *env, const char *dir, const char *suffix, char *out,
                         size_t n)
{
    static uint64_t seq;
    uint64_t tag = ((uint64_t)(env->now_ms ? env->now_ms(env->now_ctx) : 0) << 16) ^ ++seq;
    int r = snprintf(out, n, "%s.%016" PRIx64 "-%s", dir, tag, suffix);
    if (r < 0 || (size_t)r >= n)
        return -ENAMETOOLONG;
    int rc = env->fs.ops->rename(env->fs.ctx, dir, out);
    if (rc == 0)
        rc = sync_parent(&env->fs, dir);
    return rc;
}

int st_storage_read_topic_id(st_storage_env_t *env, const char *dir, uint8_t id[16])
{
    char p[PATH_MAX];
    int r = snprintf(p, sizeof p, "%s/%s", dir, ST_META_PARTMETA_FILE);
    if (r < 0 || (size_t)r >= sizeof p)
        return -ENAMETOOLONG;
    uint8_t *d;
    size_t len;
    int rc = st_fs_read_file(&env->fs, p, 4096, &d, &len);
    if (rc == -ENOENT)
        return ST_E_NOT_FOUND;
    if (rc < 0)
        return rc;
    rc = st_meta_parse_partition_metadata(d, len, id) == 0 ? 0 : ST_E_CORRUPT;
    free(d);
    return rc;
}

typedef struct sweep_ctx {
    st_storage_env_t *env;
    const char *data_dir;
    int removed;
} sweep_ctx_t;

static int sweep_cb(void *arg, const char *name, int is_dir)
{
    sweep_ctx_t *c = arg;
    size_t nl = strlen(name);
    if (!is_dir || nl < 8 || strcmp(name + nl - 7, "-delete") != 0)
        return 0;
    char p[PATH_MAX];
    int r = snprintf(p, sizeof p, "%s/%s", c->data_dir, name);
    if (r < 0 || (size_t)r >= sizeof p)
        return 0;
    int rc = st_storage_delete_dir(c->env, p);
    if (rc < 0)
        ST_WARN("storage: cannot remove %s: %s", p, st_strerror(rc));
    else
        c->removed++;
    return 0;
}

int st_storage_sweep_deleted(st_storage_env_t *env, const char *data_dir)
{
    sweep_ctx_t c = {env, data_dir, 0};
    int rc = env->fs.ops->listdir(env->fs.ctx, data_dir, sweep_cb, &c);
    if (rc < 0)
        return rc;
    if (c.removed > 0 && (rc = env->fs.ops->fsync_dir(env->fs.ctx, data_dir)) < 0)
        return rc;
    return c.removed;
}

/* ---- data directory ---------------------------------------------------------------------- */

int st_storage_partition_dir(char *buf, size_t n, const char *data_dir, const char *topic,
                             int32_t partition)
{
    int r = snprintf(buf, n, "%s/%s-%" PRId32, data_dir, topic, partition);
    return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

typedef struct list_ctx {
    const char *data_dir;
    int (*cb)(void *arg, const char *dir, const char *topic, int32_t partition);
    void *arg;
} list_ctx_t;

static int list_cb(void *arg, const char *name, int is_dir)
{
    list_ctx_t *c = arg;
    if (!is_dir)
        return 0;
    const char *dash = strrchr(name, '-');
    if (!dash || dash == name || !dash[1] || strlen(dash + 1) > 9)
        return 0;
    int64_t part = 0;
    for (const char *q = dash + 1; *q; q++) {
        if (*q < '0' || *q > '9')
            return 0;
        part = part * 10 + (*q - '0');
    }
    char topic[256], dir[PATH_MAX];
    size_t tl = (size_t)(dash - name);
    if (tl >= sizeof topic)
        return 0;
    memcpy(topic, name, tl);
    topic[tl] = 0;
    int r = snprintf(dir, sizeof dir, "%s/%s", c->data_dir, name);
    if (r < 0 || (size_t)r >= sizeof dir)
        return 0;
    return c->cb(c->arg, dir, topic, (int32_t)part);
}

int st_storage_list_partitions(st_storage_env_t *env, const char *data_dir,
                               int (*cb)(void *arg, const char *dir, const char *topic,
                                         int32_t partition),
                               void *arg)
{
    list_ctx_t c = {data_dir, cb, arg};
    return env->fs.ops->listdir(env->fs.ctx, data_dir, list_cb, &c);
}

/* ---- self-check -------------------------------------------------------------------------- */

bool st_log_check(const st_log_t *log)
{
    if (log->closed)
        return true;
    if (log->nsegs < 1)
        return false;
    /* Closed segments were checked while active and do not change: check the active one. */
    if (!st_segment_check(active(log)))
        return false;
    for (int i = 1; i < log->nsegs; i++)
        if (log->segs[i - 1]->next_offset > log->segs[i]->base_offset)
            return false;
    if (!(log->segs[0]->base_offset <= log->log_start && log->log_start <= log->end))
        return false;
    if (log->durable > log->end || active(log)->next_offset != log->end)
        return false;
    for (const log_waiter_t *w = log->waiters; w && w->next; w = w->next)
        if (w->offset > w->next->offset)
            return false;
    return true;
}
