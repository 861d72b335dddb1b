/*
 * open.c — opening a partition log (recovery after a crash: log.h st_log_open, docs/format.md),
 * closing it cleanly, deleting it crash-safely, and the data directory around partition
 * directories (listing, setting aside, sweeping what interrupted deletions left).
 */
#include <errno.h>
#include <stdint.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/err.h"
#include "base/log.h"
#include "storage/log_impl.h"

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
        if (st_log_path(o->log, name, p, sizeof p) == 0)
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

static void load_partition_metadata(st_log_t *log)
{
    char p[PATH_MAX];
    if (st_log_path(log, ST_META_PARTMETA_FILE, p, sizeof p) < 0)
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

/* mkdir -p; each directory created is made durable in its parent before going on. The
 * directory itself first: it or its parent exists but at a first start (one call, not one per
 * component of the path, for each of thousands of partitions opened). */
static int mkdir_p(st_fs_t *fs, const char *dir)
{
    int rc = fs->ops->mkdir(fs->ctx, dir);
    if (rc == -EEXIST)
        return 0;
    if (rc == 0)
        return st_fs_sync_parent(fs, dir);
    char p[PATH_MAX];
    size_t n = strlen(dir);
    if (n >= sizeof p)
        return -ENAMETOOLONG;
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] == '/' || p[i] == 0) {
            char c = p[i];
            p[i] = 0;
            rc = fs->ops->mkdir(fs->ctx, p);
            if (rc < 0 && rc != -EEXIST)
                return rc;
            if (rc == 0 && (rc = st_fs_sync_parent(fs, p)) < 0)
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
    int64_t now = st_log_now(log);
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
        if ((rc = st_log_segs_push(log, s)) < 0) {
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
            rc = st_segment_recover(s, iv, min_next, cut_from, st_log_epoch_scan, log, &sc);
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
        if ((rc = st_segment_load_txn(s)) < 0)
            break;
        if (scan)
            s->txn_rebuild = true; /* its tail was recovered: markers may have no entry yet */
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
            st_log_segs_remove(log, i);
            st_segment_delete(s);
        }
    }
    return st_log_txn_rebuild(log);
}

int st_log_open(st_storage_env_t *env, const char *dir, const st_log_config_t *cfg, st_log_t **out)
{
    int rc = st_log_config_check(cfg);
    if (rc < 0)
        return rc;
    st_log_t *log = calloc(1, sizeof *log);
    if (log)
        log->retention_limit = log->clean_limit = INT64_MAX;
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
    if ((rc = st_log_path(log, ST_META_CLEAN_FILE, marker, sizeof marker)) < 0)
        goto fail;
    rc = fs->ops->open(fs->ctx, marker, ST_FS_RDONLY);
    if (rc >= 0) {
        fs->ops->close(fs->ctx, rc);
        clean = true;
    } else if (rc != -ENOENT) {
        goto fail;
    }
    if ((rc = st_log_path(log, ST_META_CKPT_FILE, p, sizeof p)) < 0)
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
    if ((rc = st_log_epochs_load(log, &rebuild_epochs)) < 0)
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
        if ((rc = st_segment_create(&env->fdcache, dir, base, st_log_now(log), &s)) < 0)
            goto fail;
        if ((rc = st_log_segs_push(log, s)) < 0) {
            st_segment_delete(s);
            goto fail;
        }
    }
    log->end = st_log_active(log)->next_offset;
    log->log_start = ck.log_start_offset;
    if (log->log_start < log->segs[0]->base_offset && !(cfg->compact && rp_known))
        log->log_start = log->segs[0]->base_offset; /* compaction leaves the start (log.c) */
    if (log->log_start > log->end)
        log->log_start = log->end;
    /* The epoch cache follows the log: rebuilt from batch headers when its file is gone,
     * and never naming offsets the log does not hold. */
    bool epochs_changed = false;
    if (rebuild_epochs && log->end > log->segs[0]->base_offset) {
        if ((rc = st_log_epochs_rebuild(log)) < 0)
            goto fail;
        epochs_changed = true;
    }
    epochs_changed |= st_log_epochs_truncate_end(log, log->end);
    epochs_changed |= st_log_epochs_truncate_start(log, log->log_start);
    if (epochs_changed)
        st_log_epochs_write(log, false);
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
                (rc = st_file_sync_now(s->tidx_file)) < 0 ||
                (rc = st_file_sync_now(s->txn_file)) < 0)
                goto fail;
        }
        s->log_dirty = s->idx_dirty = false;
    }
    if ((rc = fs->ops->fsync_dir(fs->ctx, dir)) < 0)
        goto fail;
    if ((rc = st_journal_prepare(log)) < 0)
        goto fail;
    log->durable = log->end;
    log->ckpt_max_rp = rp_known ? ck.recovery_point : INT64_MAX;
    log->recovery_point = st_log_active(log)->base_offset;
    if ((rc = st_log_ckpt_write(log)) < 0)
        goto fail;
    log->last_sync_ms = st_log_now(log);
    st_journal_attach(log);
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
    st_log_unref(log);
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
    st_log_unref(log);
}

int st_log_close(st_log_t *log)
{
    return st_log_close_end(log, st_log_close_begin(log));
}

int st_log_close_begin(st_log_t *log)
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
            if ((r = st_file_sync_now(s->txn_file)) < 0 && rc == 0)
                rc = r;
        }
    }
    if (rc == 0) {
        log->durable = log->end;
        log->recovery_point = log->end;
        if ((r = st_log_ckpt_write(log)) < 0)
            rc = r;
        else if ((r = st_file_sync_now(log->ckpt)) < 0)
            rc = r;
    }
    if (rc == 0 && (r = st_log_epochs_write(log, true)) < 0)
        rc = r;
    return rc;
}

int st_log_close_end(st_log_t *log, int rc)
{
    int r;
    if (rc == 0) {
        char p[PATH_MAX];
        st_fs_t *fs = &log->env->fs;
        if ((r = st_log_path(log, ST_META_CLEAN_FILE, p, sizeof p)) == 0) {
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
    st_journal_detach(log, rc == 0);
    log->closed = true;
    st_log_fire_waiters(log, rc == 0 ? INT64_MAX : -1, INT64_MIN, rc == 0 ? 0 : rc);
    st_log_fire_list(&log->ckpt_waiters, rc);
    st_log_fire_list(&log->ckpt_round_waiters, rc);
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
    st_journal_detach(log, true); /* its entries: replay skips a directory that is gone */
    log->closed = true;
    st_log_fire_waiters(log, -1, INT64_MIN, ST_E_CLOSED);
    st_log_fire_list(&log->ckpt_waiters, ST_E_CLOSED);
    st_log_fire_list(&log->ckpt_round_waiters, ST_E_CLOSED);
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
        rc = st_fs_sync_parent(&env->fs, dir);
    free(dir);
    return rc;
}

int st_storage_set_aside(st_storage_env_t *env, const char *dir, const char *suffix, char *out,
                         size_t n)
{
    static _Atomic uint64_t seq; /* shards set directories aside concurrently */
    uint64_t tag = ((uint64_t)(env->now_ms ? env->now_ms(env->now_ctx) : 0) << 16) ^
                   (atomic_fetch_add(&seq, 1) + 1);
    int r = snprintf(out, n, "%s.%016" PRIx64 "-%s", dir, tag, suffix);
    if (r < 0 || (size_t)r >= n)
        return -ENAMETOOLONG;
    int rc = env->fs.ops->rename(env->fs.ctx, dir, out);
    if (rc == 0)
        rc = st_fs_sync_parent(&env->fs, dir);
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

int st_storage_offset_path(char *buf, size_t n, const char *dir, int64_t offset, const char *ext)
{
    return st_segment_path(buf, n, dir, offset, ext);
}

int st_storage_parse_offset_name(const char *name, const char *ext, int64_t *offset)
{
    return st_segment_parse_name(name, ext, offset);
}

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
