/*
 * log.c — the partition log: config, segments and rolls, append, reads, offsets and time
 * lookups, retention, the log start, truncation, the checkpoint file. The directory layout is
 * drawn in log.h, every file in docs/format.md. The rest of the log: commit.c (group commit,
 * cutting back after a failed sync), open.c (open and recovery, close, delete, the data
 * directory), epochs.c (the leader epoch cache), clean.c (compaction); their shared state is
 * log_impl.h.
 *
 * Invariants (st_log_check):
 *   1. segs[] is non-empty, sorted by base offset; only segs[nsegs-1] (the active segment)
 *      takes appends; segs[i].next_offset <= segs[i+1].base_offset.
 *   2. segs[0].base_offset <= log_start <= durable <= end == active.next_offset; a compacted
 *      log may start below its first segment (the cleaner emptied the ones before it).
 *   3. A sync round is in flight <=> sync_pending > 0; it covers offsets below sync_target.
 *   4. Waiters are sorted by offset and all wait for offsets above `durable` (strict mode).
 *   5. Every offset below recovery_point is synced; strata.checkpoint on disk never says more
 *      (a cut that lowers it syncs it first: st_log_ckpt_lower).
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
    if (st_log_needs_sync(log))
        st_log_sync_start(log);
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

st_segment_t *st_log_active(const st_log_t *log)
{
    return log->segs[log->nsegs - 1];
}

int64_t st_log_now(const st_log_t *log)
{
    return st_storage_now(log->env);
}

void st_log_set_clean_point(st_log_t *log, int64_t clean_point)
{
    log->clean_point = clean_point;
    st_log_ckpt_write(log);
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
    /* The log start stays where it was even when the cleaner emptied the first segments
     * (compaction never moves it, as in Kafka): reads from it find the next record, and a
     * consumer positioned there gets no OFFSET_OUT_OF_RANGE. */
    return 0;
}

int st_log_path(const st_log_t *log, const char *name, char *buf, size_t n)
{
    int r = snprintf(buf, n, "%s/%s", log->dir, name);
    return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

int st_log_segs_push(st_log_t *log, st_segment_t *s)
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
void st_log_segs_remove(st_log_t *log, int i)
{
    memmove(&log->segs[i], &log->segs[i + 1], (size_t)(log->nsegs - i - 1) * sizeof *log->segs);
    log->nsegs--;
}

/* Index of the last segment with base <= offset, or -1. */
int st_log_seg_for(const st_log_t *log, int64_t offset)
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

void st_log_unref(st_log_t *log)
{
    if (--log->refs > 0)
        return;
    free(log->epochs);
    free(log->segs);
    free(log->dir);
    free(log);
}

/* ---- checkpoint file --------------------------------------------------------------------- */

int st_log_ckpt_write(st_log_t *log)
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
    int rc = st_log_ckpt_write(log);
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

void st_log_ckpt_lower(st_log_t *log, int64_t rp)
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

/* ---- segments ---------------------------------------------------------------------------- */

int st_log_roll_to(st_log_t *log, int64_t base)
{
    st_segment_t *a = st_log_active(log);
    if (a->size == 0 && a->base_offset == base)
        return 0;
    int rc = st_segment_flush_indexes(a, true);
    if (rc < 0)
        return rc;
    /* The new segment's name must not reach the disk before the bytes of this one: recovery
     * takes the last segment's name for the log end, so a power cut that lost this segment's
     * unsynced tail would leave a hole below it (offsets the log claims and holds nowhere: a
     * follower would never fetch them, a leader would serve around them; the replication
     * simulation's seed 282 found it once followers could read past the durable end). With a
     * journal the bytes may be durable only there, and recovery would skip the journal's
     * entries below the new name as already held. So they are synced now; one blocking
     * fdatasync per roll, of what the flush policy has not synced yet (journal.c syncs segments
     * lazily but steadily). A round in flight may be syncing it still: synced here too. */
    if (a->size > 0 && (a->log_dirty || log->sync_pending > 0)) {
        if ((rc = st_file_sync_now(a->log)) < 0)
            return rc;
        a->log_dirty = false;
    }
    st_segment_t *s;
    rc = st_segment_create(&log->env->fdcache, log->dir, base, st_log_now(log), &s);
    if (rc < 0)
        return rc;
    if ((rc = st_log_sync_dir(log)) < 0) {
        st_segment_delete(s);
        return rc;
    }
    bool replaced_only = a->size == 0 && log->nsegs == 1;
    if (a->size == 0) {
        /* An empty active segment is replaced, not kept behind the new one. */
        log->nsegs--;
        st_segment_delete(a);
    }
    rc = st_log_segs_push(log, s);
    if (rc < 0) {
        st_segment_delete(s);
        return rc;
    }
    if (replaced_only && !log->cfg.compact && log->segs[0]->base_offset > log->log_start) {
        /* The only segment was empty and replaced: nothing exists below its successor (a
         * compacted log keeps its start wherever the segments begin: invariant 2). */
        log->log_start = log->segs[0]->base_offset;
        st_log_ckpt_write(log);
    }
    return 0;
}

int st_log_roll(st_log_t *log)
{
    if (log->closed)
        return ST_E_CLOSED;
    if (st_log_active(log)->size == 0)
        return 0;
    return st_log_roll_to(log, log->end);
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
    st_segment_t *a = st_log_active(log);
    if (a->size == 0)
        return first_offset > a->base_offset ? st_log_roll_to(log, first_offset) : 0;
    bool roll =
        a->size + len > log->cfg.segment_bytes ||
        (log->cfg.segment_ms > 0 && st_log_now(log) - roll_base_ms(a) > log->cfg.segment_ms) ||
        last_offset - a->base_offset > INT32_MAX;
    return roll ? st_log_roll_to(log, first_offset) : 0;
}

/* ---- append ------------------------------------------------------------------------------ */

/*
 * Starts the write-out of the active segment's bytes appended since the last call, in
 * ST_LOG_WRITEBACK_BYTES steps, when the host has a writeback hook (env.h): the disk then
 * takes a segment's data steadily as it comes instead of in one burst when a lazy per-file
 * round (journal.c) or flush.ms syncs seconds of it, a burst the journal's own syncs would
 * queue behind. Durability is unchanged: only fdatasync rounds count.
 */
static void writeback(st_log_t *log, st_segment_t *s)
{
    if (!log->env->writeback_submit)
        return;
    if (s->size - s->wb_done < ST_LOG_WRITEBACK_BYTES)
        return;
    st_storage_writeback_file(log->env, s->log, s->wb_done, s->size - s->wb_done);
    s->wb_done = s->size;
}

static int do_append(st_log_t *log, uint8_t *records, size_t len, const st_batch_hdr_t *hdrs, int n,
                     int64_t first, int64_t last)
{
    int rc;
    if ((rc = st_log_unstick(log)) < 0)
        return rc;
    if (log->rp_unsynced && (rc = ckpt_sync_now(log)) < 0)
        return rc;
    rc = maybe_roll(log, (int64_t)len, first, last);
    if (rc < 0)
        return rc;
    int64_t prev_end = log->end;
    rc =
        st_segment_append(st_log_active(log), records, len, hdrs, n, log->cfg.index_interval_bytes);
    if (rc < 0) {
        ST_WARN("storage: %s: append of %zu bytes failed: %s", log->dir, len, st_strerror(rc));
        return rc;
    }
    log->end = last + 1;
    writeback(log, st_log_active(log));
    /* The journal's copy starts at the old end (a replica append may leave a gap before its
     * first batch: replay appends it at that end just the same). A log that cannot journal it
     * falls back to syncing its files (journal.c). */
    if (log->jl.j)
        st_journal_append(log, records, len, prev_end, log->end);
    log->cut_err = 0;
    bool epochs_changed = false;
    for (int i = 0; i < n; i++)
        if (hdrs[i].partition_leader_epoch >= 0 &&
            st_log_epochs_add(log, hdrs[i].partition_leader_epoch, hdrs[i].base_offset) > 0)
            epochs_changed = true;
    if (epochs_changed)
        st_log_epochs_write(log, false);
    log->unflushed_msgs += last - first + 1;
    if (st_log_needs_sync(log))
        st_log_sync_start(log);
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
        rc = st_batch_validate_produce(records + pos, len - pos, log->cfg.max_message_bytes,
                                       log->cfg.compact, &hdrs[n], verdict);
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
    int64_t ts = log->cfg.timestamp_type == ST_TS_LOG_APPEND_TIME ? st_log_now(log) : -1;
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

int st_log_append_control(st_log_t *log, uint8_t *batch, size_t len, int32_t leader_epoch,
                          st_log_append_info_t *info)
{
    if (log->closed)
        return ST_E_CLOSED;
    st_batch_hdr_t h;
    int rc = st_batch_check(batch, len, &h);
    if (rc < 0 || (size_t)st_batch_size(&h) != len || !(h.attributes & ST_BATCH_ATTR_CONTROL))
        return rc < 0 ? rc : ST_E_INVALID;
    int64_t first = log->end;
    st_batch_set_base_offset(batch, first);
    st_batch_set_leader_epoch(batch, leader_epoch);
    h.base_offset = first;
    h.partition_leader_epoch = leader_epoch;
    rc = do_append(log, batch, len, &h, 1, first, st_batch_last_offset(&h));
    if (rc == 0 && info) {
        *info = (st_log_append_info_t){first, st_batch_last_offset(&h), -1, log->log_start,
                                       1,     h.records_count};
    }
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
    int i = st_log_seg_for(log, fetch_offset);
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
    for (int i = st_log_seg_for(log, log->log_start) < 0 ? 0 : st_log_seg_for(log, log->log_start);
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
    st_log_segs_remove(log, 0);
    int rc = st_segment_delete(s);
    if (rc < 0)
        ST_ERROR("storage: %s: cannot delete a segment: %s", log->dir, st_strerror(rc));
    if (log->segs[0]->base_offset > log->log_start)
        log->log_start = log->segs[0]->base_offset;
    return 0;
}

void st_log_after_front_change(st_log_t *log)
{
    st_log_ckpt_write(log);
    if (st_log_epochs_truncate_start(log, log->log_start))
        st_log_epochs_write(log, false);
}

int st_log_enforce_retention(st_log_t *log)
{
    if (log->closed)
        return ST_E_CLOSED;
    int64_t now = st_log_now(log);
    int64_t total = st_log_size_bytes(log);
    int deleted = 0;
    while (log->nsegs > 1) {
        st_segment_t *s = log->segs[0];
        bool below_start = log->segs[1]->base_offset <= log->log_start;
        /* time and size retention never take what consumers may not read yet (Kafka: only
         * segments wholly below the high watermark) */
        bool may = log->cfg.retention_deletes && log->segs[1]->base_offset <= log->retention_limit;
        bool by_time = may && log->cfg.retention_ms >= 0 && s->max_timestamp >= 0 &&
                       now - s->max_timestamp > log->cfg.retention_ms;
        bool by_size =
            may && log->cfg.retention_bytes >= 0 && total - s->size >= log->cfg.retention_bytes;
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
        st_log_after_front_change(log);
    return deleted;
}

void st_log_set_clean_limit(st_log_t *log, int64_t offset)
{
    log->clean_limit = offset;
}

void st_log_set_retention_limit(st_log_t *log, int64_t offset)
{
    log->retention_limit = offset;
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
    st_log_after_front_change(log);
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
    st_log_delete_segments_from(log, 0);
    rc = st_segment_create(&log->env->fdcache, log->dir, new_start, st_log_now(log), &s);
    if (rc == 0 && (rc = st_log_sync_dir(log)) < 0)
        st_segment_delete(s);
    if (rc < 0 || (rc = st_log_segs_push(log, s)) < 0) {
        ST_ERROR("storage: %s: cannot start over at %" PRId64 ": %s", log->dir, new_start,
                 st_strerror(rc));
        return rc;
    }
    log->log_start = new_start;
    log->nepochs = 0;
    st_log_epochs_write(log, false);
    log->recovery_point = new_start;
    if (log->sync_pending > 0)
        log->sync_rp = new_start;
    int64_t old_end = log->end;
    log->durable = new_start;
    if (log->sync_pending > 0)
        log->sync_target = new_start;
    log->end = new_start;
    st_journal_truncated(log, new_start, true);
    ckpt_sync_now(log);
    if (log->on_cut && new_start < old_end)
        log->on_cut(log->on_cut_arg, new_start);
    st_log_fire_waiters(log, -1, INT64_MIN, ST_E_OUT_OF_RANGE);
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
    int rc = st_log_cut_to_boundary(log, offset, &new_end);
    if (rc < 0)
        return rc;
    if (new_end < log->log_start) {
        /* The batch holding the log start went: nothing readable is left below the cut. */
        return st_log_truncate_fully(log, log->log_start);
    }
    st_log_after_cut(log, new_end, ST_E_OUT_OF_RANGE);
    ST_DEBUG_ASSERT(st_log_check(log));
    return 0;
}

int st_log_tick(st_log_t *log)
{
    if (log->closed)
        return ST_E_CLOSED;
    st_log_unstick(log);
    if (st_log_needs_sync(log))
        st_log_sync_start(log);
    st_journal_tick(log);
    st_segment_t *a = st_log_active(log);
    if (log->cfg.segment_ms > 0 && a->size > 0 &&
        st_log_now(log) - roll_base_ms(a) > log->cfg.segment_ms) {
        int rc = st_log_roll_to(log, log->end);
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

/* ---- self-check -------------------------------------------------------------------------- */

bool st_log_check(const st_log_t *log)
{
    if (log->closed)
        return true;
    if (log->nsegs < 1)
        return false;
    /* Closed segments were checked while active and do not change: check the active one. */
    if (!st_segment_check(st_log_active(log)))
        return false;
    for (int i = 1; i < log->nsegs; i++)
        if (log->segs[i - 1]->next_offset > log->segs[i]->base_offset)
            return false;
    if (!((log->segs[0]->base_offset <= log->log_start || log->cfg.compact) &&
          log->log_start <= log->end))
        return false;
    if (log->durable > log->end || st_log_active(log)->next_offset != log->end)
        return false;
    for (const log_waiter_t *w = log->waiters; w && w->next; w = w->next)
        if (w->offset > w->next->offset)
            return false;
    return true;
}
