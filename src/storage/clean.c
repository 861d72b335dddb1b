/*
 * clean.c — the log cleaner (compaction) of one partition log: see "compaction" in log.h.
 *
 * A clean, run in slices by st_log_clean_step on the log's shard:
 *
 *     due? --start()--> MAP: dirty segments [d, k) -> key map (128-bit key hash -> latest offset)
 *          --map done--> BUILD: groups of segments [0, k) -> "<base>.log.cleaned" -> swap()
 *          --last group--> clean point = base of segment k; idle
 *
 *   d: the segment holding the clean point; k: the first segment that may not be cleaned (the
 *   active one, one holding offsets not yet durable, one younger than min.compaction.lag.ms, or
 *   the first the map had no room for).
 *
 * Invariants:
 *   1. Only closed segments below k are read or replaced; they do not change while the job
 *      lives (layout_gen; any other change of the segment list drops the job).
 *   2. A record is dropped only when the map holds a later offset of its key, it has no key,
 *      or it is a tombstone below the previous clean point older than delete.retention.ms.
 *   3. The swap of a group commits with the rename of its ".log.cleaned" to ".log.swap" after
 *      the three files were synced; before that, a crash leaves the old segments (open deletes
 *      the ".cleaned" files); after it, open finishes the swap (st_clean_recover).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "storage/log_impl.h"

/* ---- the key map ------------------------------------------------------------------------- */

typedef struct map_entry {
    uint64_t h1, h2;
    int64_t offset1; /* the key's latest offset + 1; 0: free (calloc'd pages stay untouched
                      * until used, so a large map costs nothing to set up) */
} map_entry_t;

typedef struct key_map {
    map_entry_t *e;
    size_t cap;  /* a power of two */
    size_t n;    /* entries in use */
    size_t room; /* entries allowed (load factor 3/4) */
} key_map_t;

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Two independent 64-bit hashes of the key: a false match needs all 128 bits to collide. */
static void key_hash(const uint8_t *k, int32_t n, uint64_t *h1, uint64_t *h2)
{
    uint64_t a = 0xcbf29ce484222325ULL, b = 0x84222325cbf29ce4ULL ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++) {
        a = (a ^ k[i]) * 0x100000001b3ULL;
        b = (b + k[i]) * 0x9e3779b97f4a7c15ULL;
        b ^= b >> 29;
    }
    *h1 = mix64(a ^ (uint64_t)n);
    *h2 = mix64(b + 0x632be59bd9b4e019ULL);
}

static int map_init(key_map_t *m, size_t bytes)
{
    size_t cap = 1024;
    while (cap * 2 * sizeof(map_entry_t) <= bytes)
        cap *= 2;
    m->e = calloc(cap, sizeof *m->e);
    if (!m->e)
        return -ENOMEM;
    m->cap = cap;
    m->n = 0;
    m->room = cap / 4 * 3;
    return 0;
}

static map_entry_t *map_slot(const key_map_t *m, uint64_t h1, uint64_t h2)
{
    size_t i = (size_t)h1 & (m->cap - 1);
    while (m->e[i].offset1 > 0 && (m->e[i].h1 != h1 || m->e[i].h2 != h2))
        i = (i + 1) & (m->cap - 1);
    return &m->e[i];
}

/* Records offset for the key (keeping the larger); -ENOSPC when the map is full. */
static int map_put(key_map_t *m, const uint8_t *k, int32_t n, int64_t offset)
{
    uint64_t h1, h2;
    key_hash(k, n, &h1, &h2);
    map_entry_t *e = map_slot(m, h1, h2);
    if (e->offset1 == 0) {
        if (m->n >= m->room)
            return -ENOSPC;
        e->h1 = h1;
        e->h2 = h2;
        e->offset1 = offset + 1;
        m->n++;
    } else if (offset + 1 > e->offset1) {
        e->offset1 = offset + 1;
    }
    return 0;
}

static int64_t map_get(const key_map_t *m, const uint8_t *k, int32_t n)
{
    uint64_t h1, h2;
    key_hash(k, n, &h1, &h2);
    return map_slot(m, h1, h2)->offset1 - 1; /* -1: not there */
}

/* ---- the job ----------------------------------------------------------------------------- */

enum { PHASE_MAP, PHASE_BUILD, PHASE_SYNC };

struct st_clean_job {
    int phase;
    uint64_t gen;       /* log->layout_gen when planned (invariant 1) */
    int k;              /* segments [0, k) are cleaned this time */
    int seg;            /* segment being read */
    int64_t pos;        /* byte position in it */
    int64_t prev_clean; /* the clean point before this clean */
    int64_t horizon;    /* tombstones with maxTimestamp below it may go */
    key_map_t map;
    int g_from, g_to;  /* BUILD: the group being rewritten */
    st_segment_t *out; /* its ".cleaned" segment */
    st_buf_t in, filtered;
    st_segment_reader_t reader; /* over reader_seg: headers come from its read-ahead window */
    st_segment_t *reader_seg;
    int64_t bytes_read, bytes_written, records_removed;
    int syncs;    /* PHASE_SYNC: syncs of the group's files still in flight */
    int sync_err; /* the first of their errors */
    bool dead;    /* dropped while syncs were in flight: the last one frees it */
};

typedef struct st_clean_job clean_job_t;

static void job_release(clean_job_t *j)
{
    if (j->out)
        st_segment_delete(j->out); /* unlinks the ".cleaned" files */
    free(j->map.e);
    st_buf_fini(&j->in);
    st_buf_fini(&j->filtered);
    free(j);
}

/* Detaches the job from the log; it is freed now, or by its last sync in flight. */
static void job_free(st_log_t *log)
{
    clean_job_t *j = log->clean;
    if (!j)
        return;
    log->clean = NULL;
    if (j->syncs > 0)
        j->dead = true;
    else
        job_release(j);
}

void st_clean_abort(st_log_t *log)
{
    job_free(log);
}

/* The first segment that may not be cleaned: the active one, or the first younger than
 * min.compaction.lag.ms. */
static int cleanable_end(const st_log_t *log, int64_t now)
{
    int k = 0;
    while (k < log->nsegs - 1) {
        const st_segment_t *s = log->segs[k];
        /* Only what is durable: a record a crash can still take back must not make the
         * cleaner drop the older version that would then be the key's latest (Kafka stops at
         * the high watermark for the same reason). */
        if (s->next_offset > log->durable)
            break;
        if (log->cfg.min_compaction_lag_ms > 0 && s->max_timestamp >= 0 &&
            now - s->max_timestamp < log->cfg.min_compaction_lag_ms)
            break;
        k++;
    }
    return k;
}

/* Index of the segment holding offset (the first one for an offset below it). */
static int segment_of(const st_log_t *log, int64_t offset)
{
    int i = st_log_seg_for(log, offset);
    return i < 0 ? 0 : i;
}

static void measure(const st_log_t *log, int64_t now, int *d, int *k, int64_t *dirty,
                    int64_t *total)
{
    *k = cleanable_end(log, now);
    *d = segment_of(log, log->clean_point);
    *dirty = *total = 0;
    for (int i = 0; i < *k; i++) {
        *total += log->segs[i]->size;
        if (i >= *d)
            *dirty += log->segs[i]->size;
    }
}

bool st_log_clean_due(st_log_t *log)
{
    if (!log->cfg.compact || log->closed || log->stuck_err)
        return false;
    int64_t now = st_log_now(log), dirty, total;
    int d, k;
    measure(log, now, &d, &k, &dirty, &total);
    if (d >= k || dirty == 0)
        return false;
    if ((double)dirty >= log->cfg.min_cleanable_dirty_ratio * (double)total)
        return true;
    /* max.compaction.lag.ms: the oldest dirty record may not wait longer. */
    const st_segment_t *s = log->segs[d];
    int64_t oldest = s->first_batch_ts >= 0 ? s->first_batch_ts : s->created_ms;
    return log->cfg.max_compaction_lag_ms < INT64_MAX &&
           now - oldest >= log->cfg.max_compaction_lag_ms;
}

void st_log_clean_stats(st_log_t *log, st_log_clean_stats_t *out)
{
    *out = log->clean_stats;
    int d, k;
    measure(log, st_log_now(log), &d, &k, &out->dirty_bytes, &out->cleanable_bytes);
    if (d >= k)
        out->dirty_bytes = 0;
    out->dirty_ratio =
        out->cleanable_bytes > 0 ? (double)out->dirty_bytes / (double)out->cleanable_bytes : 0;
    out->in_progress = log->clean != NULL;
}

static int start(st_log_t *log, const st_log_clean_opts_t *o)
{
    int64_t now = st_log_now(log), dirty, total;
    int d, k;
    measure(log, now, &d, &k, &dirty, &total);
    if (d >= k)
        return 0;
    clean_job_t *j = calloc(1, sizeof *j);
    if (!j)
        return -ENOMEM;
    if (map_init(&j->map, o->map_bytes) < 0) {
        free(j);
        return -ENOMEM;
    }
    st_buf_init(&j->in);
    st_buf_init(&j->filtered);
    j->phase = PHASE_MAP;
    j->gen = log->layout_gen;
    j->k = k;
    j->seg = d;
    j->pos = 0;
    j->prev_clean = log->clean_point;
    j->horizon = now - log->cfg.delete_retention_ms;
    log->clean = j;
    return 1;
}

/* Reads the whole batch at pos of s into j->in; its header into h. */
static int read_batch(clean_job_t *j, st_segment_t *s, int64_t pos, st_batch_hdr_t *h)
{
    if (j->reader_seg != s) {
        st_segment_reader_init(&j->reader, s);
        j->reader_seg = s;
    }
    int rc = st_segment_read_hdr(&j->reader, pos, h);
    if (rc < 0)
        return rc;
    size_t n = (size_t)st_batch_size(h);
    st_buf_clear(&j->in);
    if (!st_buf_extend(&j->in, n))
        return -ENOMEM;
    ssize_t got = st_file_pread(s->log, j->in.data, n, pos);
    if (got < 0)
        return (int)got;
    if ((size_t)got != n || st_batch_check(j->in.data, n, h) < 0)
        return ST_E_CORRUPT;
    return 0;
}

static int64_t max_out(const st_log_t *log)
{
    return (int64_t)ST_BATCH_INFLATE_FACTOR *
           (log->cfg.max_message_bytes > 0 ? log->cfg.max_message_bytes : 1048588);
}

static int map_record(void *arg, const st_batch_record_t *r)
{
    clean_job_t *j = arg;
    if (r->key_len < 0)
        return 0;
    return map_put(&j->map, r->key, r->key_len, r->offset);
}

/* MAP slice: every record of the dirty segments into the map. */
static int64_t map_step(st_log_t *log, int64_t budget)
{
    clean_job_t *j = log->clean;
    int64_t done = 0;
    while (done < budget && j->seg < j->k) {
        st_segment_t *s = log->segs[j->seg];
        if (j->pos >= s->size) {
            j->seg++;
            j->pos = 0;
            continue;
        }
        st_batch_hdr_t h;
        int rc = read_batch(j, s, j->pos, &h);
        if (rc < 0)
            return rc;
        if (!(h.attributes & ST_BATCH_ATTR_CONTROL)) {
            rc = st_batch_walk(j->in.data, j->in.len, max_out(log), map_record, j);
            if (rc == -ENOSPC) {
                /* No room for this segment's keys: clean up to it (Kafka does the same). */
                if (j->seg == segment_of(log, j->prev_clean)) {
                    ST_WARN("storage: %s: log.cleaner.dedupe.buffer.size is too small for one"
                            " segment's keys; not cleaning",
                            log->dir);
                    return ST_E_TOO_LARGE;
                }
                j->k = j->seg;
                break;
            }
            /* A stored batch whose records do not walk (written by an older or foreign
             * writer) gives no keys; the build keeps it as it is. */
            if (rc < 0 && rc != ST_E_CORRUPT)
                return rc;
        }
        j->pos += st_batch_size(&h);
        done += st_batch_size(&h);
        j->bytes_read += st_batch_size(&h);
    }
    if (j->seg >= j->k) {
        j->phase = PHASE_BUILD;
        j->g_from = j->g_to = 0;
        j->seg = 0;
        j->pos = 0;
    }
    return done > 0 ? done : 1;
}

typedef struct keep_ctx {
    clean_job_t *j;
    bool old_tombstones; /* the batch is below the previous clean point and older than the
                          * horizon: its tombstones go */
} keep_ctx_t;

static bool keep_record(void *arg, const st_batch_record_t *r)
{
    keep_ctx_t *c = arg;
    if (r->key_len < 0)
        return false;
    int64_t latest = map_get(&c->j->map, r->key, r->key_len);
    if (latest > r->offset)
        return false;
    if (r->value_len < 0 && c->old_tombstones && r->offset < c->j->prev_clean)
        return false;
    return true;
}

/* The next group: consecutive segments from j->g_to whose sizes add up to segment.bytes. */
static void next_group(st_log_t *log, clean_job_t *j)
{
    j->g_from = j->g_to;
    int64_t size = 0;
    int i = j->g_from;
    do {
        size += log->segs[i]->size;
        i++;
    } while (i < j->k && size + log->segs[i]->size <= log->cfg.segment_bytes);
    j->g_to = i;
    j->seg = j->g_from;
    j->pos = 0;
}

static void group_synced(void *arg, int res)
{
    clean_job_t *j = arg;
    if (res < 0 && j->sync_err == 0)
        j->sync_err = res;
    if (--j->syncs == 0 && j->dead)
        job_release(j);
}

/* Issues an asynchronous sync of f through the host; its error lands in j->sync_err. */
static void sync_one(st_log_t *log, clean_job_t *j, st_file_t *f)
{
    j->syncs++; /* before: done() may run inside the submit */
    int rc = st_storage_sync_file(log->env, f, group_synced, j);
    if (rc < 0) {
        j->syncs--;
        if (j->sync_err == 0)
            j->sync_err = rc;
    }
}

/* Writes the finished group's indexes and syncs its three files through the host's
 * asynchronous sync (the shard is not blocked); the swap waits for them (PHASE_SYNC). */
static int group_sync(st_log_t *log, clean_job_t *j)
{
    st_segment_t *out = j->out;
    /* offsets are kept: the aborted transactions of the group's segments stay listed */
    for (int i = j->g_from; i < j->g_to; i++) {
        const st_txnidx_t *x = &log->segs[i]->txn;
        for (size_t k = 0; k < x->n; k++)
            if (x->e[k].last_offset < out->next_offset && st_txnidx_add(&out->txn, &x->e[k]) < 0)
                return -ENOMEM;
    }
    int rc = st_segment_flush_indexes(out, true);
    if (rc < 0)
        return rc;
    j->phase = PHASE_SYNC;
    sync_one(log, j, out->log);
    sync_one(log, j, out->oidx_file);
    sync_one(log, j, out->tidx_file);
    sync_one(log, j, out->txn_file);
    return 0;
}

/*
 * Puts the synced group in place (invariant 3): commit by rename, unlink the old segments,
 * name the new one, replace them in the list. An empty result replaces them by nothing (the
 * log start moves past them if they were the first).
 */
static int swap(st_log_t *log, clean_job_t *j)
{
    st_segment_t *out = j->out;
    int rc = st_segment_rename(out, log->dir, ".swap");
    if (rc == 0)
        rc = st_log_sync_dir(log);
    if (rc < 0)
        return rc;
    /* Committed. */
    for (int i = j->g_from; i < j->g_to; i++) {
        st_segment_t *s = log->segs[i];
        st_file_t *f[4] = {s->log, s->oidx_file, s->tidx_file, s->txn_file};
        for (int x = 0; x < 4; x++)
            if ((rc = st_file_unlink(f[x])) < 0 && rc != -ENOENT)
                ST_WARN("storage: %s: cannot remove a cleaned-away segment file: %s", log->dir,
                        st_strerror(rc));
    }
    bool empty = out->size == 0;
    if (empty) {
        st_segment_delete(out);
    } else if ((rc = st_segment_rename(out, log->dir, "")) < 0) {
        /* The ".swap" stays; the next open finishes it. Serve it from its ".swap" name. */
        ST_ERROR("storage: %s: cannot rename a cleaned segment into place: %s", log->dir,
                 st_strerror(rc));
    }
    st_log_sync_dir(log);
    j->out = NULL;
    j->reader_seg = NULL; /* the segments it read are freed: an address may come back */
    rc = st_log_replace_segments(log, j->g_from, j->g_to, empty ? NULL : out);
    if (rc < 0)
        return rc;
    int removed = j->g_to - j->g_from - (empty ? 0 : 1);
    j->k -= removed;
    j->g_to -= removed;
    j->gen = log->layout_gen;
    return 0;
}

/* BUILD slice: filters the batches of the current group into its ".cleaned" segment. */
static int64_t build_step(st_log_t *log, const st_log_clean_opts_t *o)
{
    clean_job_t *j = log->clean;
    int64_t done = 0;
    int rc;
    while (done < o->budget_bytes) {
        if (!j->out) {
            if (j->g_to >= j->k)
                return 0; /* finished */
            next_group(log, j);
            j->sync_err = 0;
            rc = st_segment_create_as(&log->env->fdcache, log->dir,
                                      log->segs[j->g_from]->base_offset, ".cleaned",
                                      st_log_now(log), &j->out);
            if (rc < 0)
                return rc;
        }
        st_segment_t *s = log->segs[j->seg];
        if (j->pos >= s->size) {
            if (++j->seg < j->g_to) {
                j->pos = 0;
                continue;
            }
            if ((rc = group_sync(log, j)) < 0)
                return rc;
            return done > 0 ? done : ST_E_AGAIN;
        }
        st_batch_hdr_t h;
        if ((rc = read_batch(j, s, j->pos, &h)) < 0)
            return rc;
        st_buf_clear(&j->filtered);
        int32_t kept = h.records_count;
        if (h.attributes & ST_BATCH_ATTR_CONTROL) {
            if (st_buf_append(&j->filtered, j->in.data, j->in.len) != 0)
                return -ENOMEM;
        } else {
            keep_ctx_t c = {j, h.max_timestamp >= 0 && h.max_timestamp < j->horizon};
            bool keep_empty = h.producer_id >= 0 && (!o->last_of_producer ||
                                                     o->last_of_producer(o->arg, h.producer_id,
                                                                         st_batch_last_offset(&h)));
            rc = st_batch_filter(j->in.data, j->in.len, max_out(log), keep_record, &c, keep_empty,
                                 &j->filtered, &kept);
            if (rc == ST_E_CORRUPT) {
                kept = h.records_count; /* kept as it is (see map_step) */
                st_buf_clear(&j->filtered);
                if (st_buf_append(&j->filtered, j->in.data, j->in.len) != 0)
                    return -ENOMEM;
            } else if (rc < 0) {
                return rc;
            }
        }
        if (j->filtered.len > 0) {
            st_batch_hdr_t nh;
            if ((rc = st_batch_parse_hdr(j->filtered.data, j->filtered.len, &nh)) < 0)
                return rc;
            int64_t at = j->out->size;
            if ((rc = st_file_pwrite(j->out->log, j->filtered.data, j->filtered.len, at)) < 0 ||
                (rc = st_segment_note_batch(j->out, at, &nh, log->cfg.index_interval_bytes)) < 0)
                return rc;
            j->bytes_written += (int64_t)j->filtered.len;
        }
        j->records_removed += h.records_count - kept;
        j->pos += st_batch_size(&h);
        j->bytes_read += st_batch_size(&h);
        done += st_batch_size(&h);
    }
    return done;
}

int64_t st_log_clean_step(st_log_t *log, const st_log_clean_opts_t *o)
{
    if (log->closed || !log->cfg.compact)
        return 0;
    if (!log->clean) {
        if (!st_log_clean_due(log))
            return 0;
        int rc = start(log, o);
        if (rc <= 0)
            return rc;
    }
    clean_job_t *j = log->clean;
    if (j->gen != log->layout_gen) {
        /* The closed segments changed under the job (retention, DeleteRecords, a cut). */
        job_free(log);
        return 0;
    }
    if (j->phase == PHASE_SYNC) {
        if (j->syncs > 0)
            return ST_E_AGAIN;
        int rc = j->sync_err;
        j->phase = PHASE_BUILD;
        if (rc == 0)
            rc = swap(log, j);
        if (rc < 0) {
            ST_WARN("storage: %s: cleaning stopped: %s", log->dir, st_strerror(rc));
            job_free(log);
            return rc;
        }
    }
    int64_t n = j->phase == PHASE_MAP ? map_step(log, o->budget_bytes) : build_step(log, o);
    if (n == ST_E_AGAIN)
        return n;
    if (n < 0) {
        ST_WARN("storage: %s: cleaning stopped: %s", log->dir, st_strerror((int)n));
        job_free(log);
        return n;
    }
    if (n == 0 && j->phase == PHASE_BUILD) {
        /* Every group swapped in: what lay below the map's end is clean now. */
        int64_t point = j->k < log->nsegs ? log->segs[j->k]->base_offset : log->end;
        st_log_set_clean_point(log, point);
        st_log_clean_stats_t *st = &log->clean_stats;
        st->cleans++;
        st->last_clean_ms = st_log_now(log);
        st->bytes_read += j->bytes_read;
        st->bytes_written += j->bytes_written;
        st->records_removed += j->records_removed;
        ST_INFO("storage: %s: cleaned below offset %" PRId64 ": read %" PRId64
                " bytes, wrote %" PRId64 ", %" PRId64 " records removed",
                log->dir, point, j->bytes_read, j->bytes_written, j->records_removed);
        job_free(log);
        return 1;
    }
    return n;
}

/* ---- recovery (open) --------------------------------------------------------------------- */

typedef struct rec_scan {
    st_log_t *log;
    int64_t *swaps, *logs;
    int nswaps, nlogs;
    int err;
} rec_scan_t;

static int push(int64_t **v, int *n, int64_t x)
{
    int64_t *nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv)
        return -ENOMEM;
    nv[(*n)++] = x;
    *v = nv;
    return 0;
}

static int rec_cb(void *arg, const char *name, int is_dir)
{
    rec_scan_t *c = arg;
    st_log_t *log = c->log;
    int64_t base;
    size_t nl = strlen(name);
    if (is_dir)
        return 0;
    if (nl > 8 && strcmp(name + nl - 8, ".cleaned") == 0) {
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", log->dir, name) < (int)sizeof p)
            log->env->fs.ops->unlink(log->env->fs.ctx, p);
        return 0;
    }
    if (st_segment_parse_name(name, ".log.swap", &base) == 0 &&
        (c->err = push(&c->swaps, &c->nswaps, base)) < 0)
        return 1;
    if (st_segment_parse_name(name, ".log", &base) == 0 &&
        (c->err = push(&c->logs, &c->nlogs, base)) < 0)
        return 1;
    return 0;
}

/* Finishes the swap of "<base>.log.swap": the segments from base up to its last offset go,
 * then it takes their place. */
static int finish_swap(st_log_t *log, rec_scan_t *c, int64_t base)
{
    st_segment_t *sw;
    int rc = st_segment_open_as(&log->env->fdcache, log->dir, base, ".swap", st_log_now(log), &sw);
    if (rc < 0)
        return rc;
    /* Its next offset: after its last batch. */
    int64_t next = base;
    st_segment_reader_t *r = malloc(sizeof *r);
    if (!r) {
        st_segment_free(sw);
        return -ENOMEM;
    }
    st_segment_reader_init(r, sw);
    for (int64_t pos = 0; pos < sw->size;) {
        st_batch_hdr_t h;
        if (st_segment_read_hdr(r, pos, &h) < 0)
            break;
        next = st_batch_last_offset(&h) + 1;
        pos += st_batch_size(&h);
    }
    free(r);
    for (int i = 0; i < c->nlogs; i++) {
        if (c->logs[i] < base || c->logs[i] >= next)
            continue;
        st_segment_t *old;
        if (st_segment_open(&log->env->fdcache, log->dir, c->logs[i], 0, &old) == 0)
            st_segment_delete(old);
    }
    ST_WARN("storage: %s: finishing an interrupted clean: segment %" PRId64
            " replaces those below offset %" PRId64,
            log->dir, base, next);
    rc = st_segment_rename(sw, log->dir, "");
    st_segment_free(sw);
    return rc;
}

int st_clean_recover(st_log_t *log)
{
    rec_scan_t c = {.log = log};
    st_fs_t *fs = &log->env->fs;
    int rc = fs->ops->listdir(fs->ctx, log->dir, rec_cb, &c);
    if (rc == 0)
        rc = c.err;
    for (int i = 0; rc >= 0 && i < c.nswaps; i++)
        rc = finish_swap(log, &c, c.swaps[i]);
    if (rc >= 0 && c.nswaps > 0)
        rc = st_log_sync_dir(log);
    free(c.swaps);
    free(c.logs);
    return rc < 0 ? rc : 0;
}
