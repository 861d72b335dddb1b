/*
 * journal_replay.c — the journal's replay at start-up (st_journal_recover, journal.h): every
 * journal file's entries from its newest header's tail, grouped by partition directory and
 * applied to the partition logs.
 *
 * It reads the files through journal_fmt.h (every header and entry checked: magic, CRC,
 * sequence, bounds) and changes the logs only through log.h's public calls (open with recovery,
 * replica appends, truncations, close synced), never through the log's internals: bytes from
 * the disk reach no assert, and the writer (journal.c) and the replay share nothing but the
 * format.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "storage/batch.h"
#include "storage/journal.h"
#include "storage/journal_fmt.h"
#include "storage/log.h"
#include "storage/meta.h"

typedef struct jfile {
    char *path;
    uint64_t run_id;
    int fd;
    bool has_hdr; /* hdr: its newest valid header */
    st_jhdr_t hdr;
} jfile_t;

typedef struct recover {
    st_fs_t fs;
    const char *data_dir;
    jfile_t *files;
    int nfiles, capfiles;
    st_jentry_t *e;
    size_t n, cap;
    st_journal_recovery_t *out;
    int err;
    bool keep;           /* an I/O error: do not empty the journal files */
    int64_t marker_from; /* the first transaction marker replayed into the log (INT64_MAX) */
} recover_t;

/* An I/O error while replaying a partition: the journal files are kept (not emptied), so the
 * next start replays them again; the shards run without a journal meanwhile. */
static int keep_files(recover_t *rc, const char *name, int err)
{
    ST_WARN("storage: journal replay: %s: %s; the journal files are kept for the next start", name,
            st_strerror(err));
    rc->out->warnings++;
    rc->keep = true;
    return 0;
}

static int push_entry(recover_t *rc, const st_jentry_t *e)
{
    if (rc->n == rc->cap) {
        size_t cap = rc->cap ? rc->cap * 2 : 256;
        st_jentry_t *ne = realloc(rc->e, cap * sizeof *ne);
        if (!ne)
            return -ENOMEM;
        rc->e = ne;
        rc->cap = cap;
    }
    rc->e[rc->n++] = *e;
    return 0;
}

/* Collects the valid entries of one journal file, from the tail of its newest header. */
static int scan_file(recover_t *rc, int fi)
{
    jfile_t *f = &rc->files[fi];
    st_jhdr_t h;
    int r = st_jfmt_read_header(&rc->fs, f->fd, &h);
    if (r < 0)
        return keep_files(rc, f->path, r);
    if (r == 0) {
        int64_t size = 0;
        rc->fs.ops->fsize(rc->fs.ctx, f->fd, &size);
        if (size > 0) {
            ST_WARN("storage: journal %s has no valid header; nothing replayed from it", f->path);
            rc->out->warnings++;
        }
        return 0;
    }
    f->has_hdr = true;
    f->hdr = h;
    f->run_id = h.run_id;
    int64_t pos = h.tail;
    uint64_t seq = h.tail_seq;
    int64_t start = pos;
    for (;;) {
        st_jentry_t e = {.file = fi};
        int64_t len = 0;
        r = st_jfmt_read_entry(&rc->fs, f->fd, h.cap, pos, seq, &e, &len);
        if (r == 0 && pos % h.cap != 0) {
            int64_t lap = pos + (h.cap - pos % h.cap);
            r = st_jfmt_read_entry(&rc->fs, f->fd, h.cap, lap, seq, &e, &len);
            if (r == 1)
                pos = lap;
        }
        if (r == -ENOMEM)
            return r;
        if (r < 0)
            return keep_files(rc, f->path, r);
        if (r == 0)
            break;
        if ((r = push_entry(rc, &e)) < 0) {
            free(e.name);
            return r;
        }
        rc->out->entries++;
        pos += st_jfmt_pad8(len);
        seq++;
        if (pos - start >= h.cap)
            break;
    }
    return 0;
}

static int cmp_entry(const void *a, const void *b)
{
    const st_jentry_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static int noop_cb(void *arg, const char *name, int is_dir)
{
    (void)arg;
    (void)name;
    (void)is_dir;
    return 0;
}

/* Applies one append entry: the batches at or past the log end. 0, 1 when replay of this
 * partition must stop (gap, mismatch, or the log refused them), or an I/O error. */
static int apply_append(recover_t *rc, st_log_t *log, const st_jentry_t *e)
{
    int64_t end = st_log_end_offset(log);
    if (e->next <= end)
        return 0;
    if (e->first > end) {
        /* The log lacks what came before: bytes never acknowledged (durable is a prefix), or
         * a later truncate entry realigns it. */
        rc->out->skipped++;
        return 0;
    }
    uint8_t *d = malloc(e->data_len ? e->data_len : 1);
    if (!d)
        return -ENOMEM;
    ssize_t n = st_fs_pread_full(&rc->fs, rc->files[e->file].fd, d, e->data_len, e->data_at);
    int res = 0;
    if (n != (ssize_t)e->data_len) {
        res = n < 0 ? (int)n : -EIO;
        goto out;
    }
    size_t pos = 0;
    while (pos < e->data_len) {
        st_batch_hdr_t h;
        if (st_batch_check(d + pos, e->data_len - pos, &h) < 0) {
            res = 1;
            goto out;
        }
        if (st_batch_last_offset(&h) >= end) {
            if (h.base_offset < end) {
                /* The log holds other batches there: a later state (its truncate entry comes
                 * later) or unacknowledged bytes. */
                rc->out->skipped++;
                goto out;
            }
            break;
        }
        pos += (size_t)st_batch_size(&h);
    }
    if (pos < e->data_len) {
        for (size_t q = pos; q < e->data_len;) {
            st_batch_hdr_t h;
            if (st_batch_check(d + q, e->data_len - q, &h) < 0)
                break;
            if ((h.attributes & ST_BATCH_ATTR_CONTROL) && h.base_offset < rc->marker_from)
                rc->marker_from = h.base_offset;
            q += (size_t)st_batch_size(&h);
        }
        int r = st_log_append_replica(log, d + pos, e->data_len - pos, NULL);
        if (r < 0 && r > -4096) {
            res = r; /* an I/O error: the journal is kept for another try */
            goto out;
        }
        if (r < 0) {
            ST_WARN("storage: journal replay: %s: entry %" PRIu64 " not appended: %s", e->name,
                    e->seq, st_strerror(r));
            res = 1;
            goto out;
        }
        rc->out->applied++;
    }
out:
    free(d);
    return res;
}

/* Replays entries e[0..n) (one partition, in order) into its log. */
static int replay_partition(recover_t *rc, st_storage_env_t *env, st_jentry_t *e, size_t n)
{
    char dir[PATH_MAX];
    int r = snprintf(dir, sizeof dir, "%s/%s", rc->data_dir, e[0].name);
    if (r < 0 || (size_t)r >= sizeof dir)
        return 0;
    r = rc->fs.ops->listdir(rc->fs.ctx, dir, noop_cb, NULL);
    if (r == -ENOENT) {
        ST_INFO("storage: journal replay: %s is gone (deleted); its %zu entries are skipped",
                e[0].name, n);
        return 0;
    }
    if (r < 0)
        return keep_files(rc, e[0].name, r);
    /* Closed cleanly since (every byte synced, then the marker; an open removes it, durably,
     * before anything is appended): the segments hold all, and older entries must not apply
     * (a crash after the close and before the journal was emptied). */
    char marker[PATH_MAX];
    r = snprintf(marker, sizeof marker, "%s/%s", dir, ST_META_CLEAN_FILE);
    if (r < 0 || (size_t)r >= sizeof marker)
        return 0;
    int mfd = rc->fs.ops->open(rc->fs.ctx, marker, ST_FS_RDONLY);
    if (mfd >= 0) {
        rc->fs.ops->close(rc->fs.ctx, mfd);
        ST_INFO("storage: journal replay: %s was closed cleanly since; its %zu entries are"
                " skipped",
                e[0].name, n);
        return 0;
    }
    if (mfd != -ENOENT)
        return keep_files(rc, e[0].name, mfd);
    uint8_t tid[16];
    bool has_tid = st_storage_read_topic_id(env, dir, tid) == 0;
    uint64_t fence_run = 0, fence_seq = 0;
    int fr = st_jfmt_read_fence(&rc->fs, dir, &fence_run, &fence_seq);
    if (fr < 0 && fr != -ENOENT) /* a truncation the journal could not record lies behind */
        return keep_files(rc, e[0].name, fr);
    size_t keep = 0;
    for (size_t i = 0; i < n; i++) {
        bool fenced = fr == 0 && rc->files[e[i].file].run_id == fence_run && e[i].seq < fence_seq;
        bool other = e[i].has_tid && has_tid && memcmp(e[i].tid, tid, 16) != 0;
        if (!fenced && !other) {
            st_jentry_t t = e[keep]; /* a swap: each name stays owned once */
            e[keep++] = e[i];
            e[i] = t;
        }
    }
    if (keep < n)
        ST_INFO("storage: journal replay: %s: %zu entries skipped (a later incarnation of the"
                " partition, or fenced off by a truncation)",
                e[0].name, n - keep);
    if (keep == 0)
        return 0;
    st_log_config_t cfg;
    st_log_config_default(&cfg);
    /* Replay appends only; the log is closed synced at the end. compact keeps open from
     * moving the start of a compacted log up to its first segment. */
    cfg.flush_policy = ST_FLUSH_WRITE_CACHING;
    cfg.compact = true;
    cfg.segment_ms = -1;
    /* The log start as synced (DeleteRecords, retention): open may lower it to a log end
     * that replay then moves past again; replay puts it back. */
    int64_t synced_start = -1;
    {
        char p[PATH_MAX];
        uint8_t *d;
        size_t dn;
        st_meta_ckpt_t ck;
        if (snprintf(p, sizeof p, "%s/%s", dir, ST_META_CKPT_FILE) < (int)sizeof p &&
            st_fs_read_file(&rc->fs, p, 4096, &d, &dn) == 0) {
            if (st_meta_decode_ckpt(d, dn, &ck) == 0)
                synced_start = ck.log_start_offset;
            free(d);
        }
    }
    st_log_t *log;
    r = st_log_open(env, dir, &cfg, &log);
    if (r < 0 && r != ST_E_CORRUPT)
        return keep_files(rc, e[0].name, r);
    if (r < 0) {
        ST_WARN("storage: journal replay: %s does not open (%s); its journal entries are lost",
                e[0].name, st_strerror(r));
        rc->out->warnings++;
        return 0;
    }
    rc->out->partitions++;
    rc->marker_from = INT64_MAX;
    for (size_t i = 0; i < keep; i++) {
        int res = 0;
        if (e[i].kind == ST_JFMT_KIND_APPEND) {
            res = apply_append(rc, log, &e[i]);
        } else if (e[i].first < st_log_end_offset(log)) {
            res = st_log_truncate_to(log, e[i].first);
            rc->out->applied++;
        }
        if (res == -ENOMEM) {
            st_log_close(log);
            return res;
        }
        if (res < 0) {
            st_log_close(log);
            return keep_files(rc, e[0].name, res);
        }
        if (res > 0) {
            rc->out->warnings++;
            break;
        }
    }
    if (synced_start > st_log_start_offset(log) && synced_start <= st_log_end_offset(log))
        st_log_set_start_offset(log, synced_start);
    /* replayed markers have no .txnindex entries yet (the partition layer writes them on
     * append): rebuilt from the batches before the clean close makes the files trusted */
    if (rc->marker_from != INT64_MAX && (r = st_log_txn_reindex(log, rc->marker_from)) < 0)
        ST_WARN("storage: journal replay: %s: cannot rebuild the transaction index: %s", e[0].name,
                st_strerror(r));
    r = st_log_close(log);
    if (r < 0)
        return keep_files(rc, e[0].name, r);
    return 0;
}

static int list_wal_cb(void *arg, const char *name, int is_dir)
{
    recover_t *rc = arg;
    size_t nl = strlen(name);
    if (is_dir || nl < 5 || strcmp(name + nl - 4, ".wal") != 0)
        return 0;
    if (rc->nfiles == rc->capfiles) {
        int cap = rc->capfiles ? rc->capfiles * 2 : 8;
        jfile_t *nf = realloc(rc->files, (size_t)cap * sizeof *nf);
        if (!nf) {
            rc->err = -ENOMEM;
            return 1;
        }
        rc->files = nf;
        rc->capfiles = cap;
    }
    char p[PATH_MAX];
    int r = snprintf(p, sizeof p, "%s/%s/%s", rc->data_dir, ST_JOURNAL_DIR, name);
    if (r < 0 || (size_t)r >= sizeof p)
        return 0;
    jfile_t *f = &rc->files[rc->nfiles];
    f->path = strdup(p);
    f->fd = -1;
    f->run_id = 0;
    f->has_hdr = false;
    if (!f->path) {
        rc->err = -ENOMEM;
        return 1;
    }
    rc->nfiles++;
    return 0;
}

/*
 * Empties a replayed journal file, synced. One with a valid header keeps its size (its blocks
 * stay allocated for the next run) and gets a header whose tail sequence is above every entry
 * the file can hold: any entry written after its newest header lies within one capacity of that
 * header's tail (space is reused only up to a synced header's tail, and no header on disk is
 * older than the last synced one), so it carries a sequence below tail_seq + capacity /
 * ST_JFMT_ENTRY_MIN + 1, and the next run, going on from there, never meets an old one with the
 * sequence it expects. One without is truncated to 0.
 */
static int empty_file(st_fs_t *fs, jfile_t *f)
{
    int rc;
    if (!f->has_hdr) {
        rc = fs->ops->ftruncate(fs->ctx, f->fd, 0);
    } else {
        st_jhdr_t h = {.gen = f->hdr.gen + 1, .cap = f->hdr.cap, .tail = f->hdr.tail};
        h.tail_seq = f->hdr.tail_seq + (uint64_t)(f->hdr.cap / ST_JFMT_ENTRY_MIN) + 1;
        uint8_t b[ST_JFMT_HDR_SIZE];
        st_jfmt_encode_header(&h, b);
        rc = st_fs_pwrite_full(fs, f->fd, b, sizeof b, (int64_t)(h.gen % 2) * ST_JFMT_HDR_SLOT);
    }
    if (rc == 0)
        rc = fs->ops->fdatasync(fs->ctx, f->fd);
    return rc;
}

/*
 * Recovery: every journal file's entries from its header's tail, grouped by partition
 * directory and in sequence order; each partition that has entries is opened (the usual
 * recovery of its segments: torn tails cut), the entries applied (truncate: cut to its offset
 * if the log is longer; reset: start over empty at it; append: the batches at or past the log
 * end, as replica appends; one that starts past the end is a gap and ends that partition's
 * replay), the log closed synced. Only then are the journal files emptied: a crash during
 * recovery replays the same entries again onto logs that already hold them, changing nothing.
 */
int st_journal_recover(st_fs_t fs, const char *data_dir, st_journal_recovery_t *out)
{
    st_journal_recovery_t dummy;
    if (!out)
        out = &dummy;
    memset(out, 0, sizeof *out);
    recover_t rc = {.fs = fs, .data_dir = data_dir, .out = out};
    char jdir[PATH_MAX];
    int r = snprintf(jdir, sizeof jdir, "%s/%s", data_dir, ST_JOURNAL_DIR);
    if (r < 0 || (size_t)r >= sizeof jdir)
        return 0;
    r = fs.ops->listdir(fs.ctx, jdir, list_wal_cb, &rc);
    if (r == -ENOENT)
        return 0;
    if (r < 0 && r != 1) {
        ST_WARN("storage: cannot list %s (%s); no journal replayed", jdir, st_strerror(r));
        out->warnings++;
        return 0;
    }
    int err = rc.err;
    for (int i = 0; i < rc.nfiles && err == 0; i++) {
        jfile_t *f = &rc.files[i];
        f->fd = fs.ops->open(fs.ctx, f->path, ST_FS_RDWR);
        if (f->fd < 0) {
            ST_WARN("storage: cannot open the journal %s: %s", f->path, st_strerror(f->fd));
            out->warnings++;
            continue;
        }
        out->files++;
        err = scan_file(&rc, i);
    }
    if (err == 0 && rc.n > 0) {
        qsort(rc.e, rc.n, sizeof *rc.e, cmp_entry);
        st_storage_env_t env;
        st_storage_env_init(&env, fs, 64);
        for (size_t i = 0; i < rc.n && err == 0;) {
            size_t k = i + 1;
            while (k < rc.n && strcmp(rc.e[k].name, rc.e[i].name) == 0)
                k++;
            if (rc.e[k - 1].file != rc.e[i].file)
                ST_WARN("storage: journal replay: %s has entries in more than one journal"
                        " file; replayed file by file",
                        rc.e[i].name);
            err = replay_partition(&rc, &env, rc.e + i, k - i);
            i = k;
        }
        st_storage_env_fini(&env);
    }
    if (err == 0 && rc.keep)
        ST_WARN("storage: journal replay incomplete; %s kept for the next start", jdir);
    if (err == 0 && !rc.keep) {
        for (int i = 0; i < rc.nfiles; i++) {
            jfile_t *f = &rc.files[i];
            if (f->fd < 0)
                continue;
            int x = empty_file(&fs, f);
            if (x < 0) {
                ST_WARN("storage: cannot empty the journal %s: %s", f->path, st_strerror(x));
                out->warnings++;
            }
        }
        if (rc.nfiles > 0)
            fs.ops->fsync_dir(fs.ctx, jdir);
        if (out->entries > 0)
            ST_INFO("storage: journal replay: %" PRId64 " entries in %d file(s), %d partition(s)"
                    " replayed into, %" PRId64 " applied",
                    out->entries, out->files, out->partitions, out->applied);
    }
    for (size_t i = 0; i < rc.n; i++)
        free(rc.e[i].name);
    free(rc.e);
    for (int i = 0; i < rc.nfiles; i++) {
        if (rc.files[i].fd >= 0)
            fs.ops->close(fs.ctx, rc.files[i].fd);
        free(rc.files[i].path);
    }
    free(rc.files);
    return err;
}
