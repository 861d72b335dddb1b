/*
 * segment.c — one segment: create/open, index maintenance, load with a tail check, full
 * recovery scan, header walks, append, truncate. Layout and invariants: segment.h.
 *
 * Nothing read from disk is asserted on: a header that does not parse, a CRC that does not
 * match, an index entry that points nowhere is an error code, and the log above decides
 * (recover, cut, rebuild).
 */
#include "storage/segment.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"

#define SEG_MAX_REL INT32_MAX
#define SCAN_WINDOW (1 << 20)

int st_segment_path(char *buf, size_t n, const char *dir, int64_t base, const char *ext)
{
    int r = snprintf(buf, n, "%s/%020" PRId64 "%s", dir, base, ext);
    return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

int st_segment_parse_name(const char *name, const char *ext, int64_t *base)
{
    size_t el = strlen(ext);
    if (strlen(name) != 20 + el || strcmp(name + 20, ext) != 0)
        return -1;
    int64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        if (v > (INT64_MAX - (name[i] - '0')) / 10)
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    *base = v;
    return 0;
}

static st_segment_t *seg_alloc(int64_t base, int64_t now_ms)
{
    st_segment_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->base_offset = base;
    s->next_offset = base;
    s->max_timestamp = -1;
    s->max_ts_offset = -1;
    s->first_batch_ts = -1;
    s->created_ms = now_ms;
    return s;
}

static const char *const seg_exts[4] = {".log", ".index", ".timeindex", ".txnindex"};

static int seg_note_batch(st_segment_t *s, int64_t pos, const st_batch_hdr_t *h, int32_t interval);

/* "<dir>/<base><ext><suffix>" */
static int seg_path_as(char *buf, size_t n, const char *dir, int64_t base, int which,
                       const char *suffix)
{
    int r = snprintf(buf, n, "%s/%020" PRId64 "%s%s", dir, base, seg_exts[which], suffix);
    return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

static int seg_files(st_segment_t *s, st_fdcache_t *c, const char *dir, bool create,
                     const char *suffix)
{
    char p[PATH_MAX];
    st_file_t **f[4] = {&s->log, &s->oidx_file, &s->tidx_file, &s->txn_file};
    for (int i = 0; i < 4; i++) {
        int rc = seg_path_as(p, sizeof p, dir, s->base_offset, i, suffix);
        if (rc < 0 || (rc = st_file_open(c, p, true, create, f[i])) < 0)
            return rc;
    }
    return 0;
}

int st_segment_create(st_fdcache_t *c, const char *dir, int64_t base, int64_t now_ms,
                      st_segment_t **out)
{
    return st_segment_create_as(c, dir, base, "", now_ms, out);
}

int st_segment_rename(st_segment_t *s, const char *dir, const char *suffix)
{
    char p[PATH_MAX];
    /* the .log last: it commits */
    st_file_t *f[4] = {s->oidx_file, s->tidx_file, s->txn_file, s->log};
    const int which[4] = {1, 2, 3, 0};
    for (int i = 0; i < 4; i++) {
        int rc = seg_path_as(p, sizeof p, dir, s->base_offset, which[i], suffix);
        if (rc < 0)
            return rc;
        /* a .txnindex may be missing (a log from before transactions): open rebuilds it */
        if ((rc = st_file_rename(f[i], p)) < 0 && !(rc == -ENOENT && which[i] == 3))
            return rc;
    }
    return 0;
}

int st_segment_note_batch(st_segment_t *s, int64_t pos, const st_batch_hdr_t *h, int32_t interval)
{
    int rc = seg_note_batch(s, pos, h, interval);
    if (rc == 0) {
        s->next_offset = st_batch_last_offset(h) + 1;
        s->size = pos + st_batch_size(h);
    }
    return rc;
}

int st_segment_create_as(st_fdcache_t *c, const char *dir, int64_t base, const char *suffix,
                         int64_t now_ms, st_segment_t **out)
{
    st_segment_t *s = seg_alloc(base, now_ms);
    if (!s)
        return -ENOMEM;
    int rc = seg_files(s, c, dir, true, suffix);
    if (rc == 0)
        rc = st_file_truncate(s->log, 0);
    if (rc == 0)
        rc = st_file_truncate(s->oidx_file, 0);
    if (rc == 0)
        rc = st_file_truncate(s->tidx_file, 0);
    if (rc == 0)
        rc = st_file_truncate(s->txn_file, 0);
    if (rc < 0) {
        st_segment_delete(s);
        return rc;
    }
    s->log_dirty = true;
    s->idx_dirty = true;
    *out = s;
    return 0;
}

int st_segment_open(st_fdcache_t *c, const char *dir, int64_t base, int64_t now_ms,
                    st_segment_t **out)
{
    return st_segment_open_as(c, dir, base, "", now_ms, out);
}

int st_segment_open_as(st_fdcache_t *c, const char *dir, int64_t base, const char *suffix,
                       int64_t now_ms, st_segment_t **out)
{
    st_segment_t *s = seg_alloc(base, now_ms);
    if (!s)
        return -ENOMEM;
    int rc = seg_files(s, c, dir, false, suffix);
    if (rc == 0)
        rc = st_file_size(s->log, &s->size);
    if (rc < 0) {
        st_segment_free(s);
        return rc;
    }
    s->wb_done = s->size; /* on disk already, or synced by recovery */
    /* An index file that is missing is created empty; load will find it wanting. */
    s->oidx_file->create = true;
    s->tidx_file->create = true;
    s->txn_file->create = true;
    *out = s;
    return 0;
}

void st_segment_free(st_segment_t *s)
{
    if (!s)
        return;
    if (s->log)
        st_file_unref(s->log);
    if (s->oidx_file)
        st_file_unref(s->oidx_file);
    if (s->tidx_file)
        st_file_unref(s->tidx_file);
    if (s->txn_file)
        st_file_unref(s->txn_file);
    st_offidx_fini(&s->oidx);
    st_timeidx_fini(&s->tidx);
    st_txnidx_fini(&s->txn);
    free(s);
}

int st_segment_delete(st_segment_t *s)
{
    int rc = 0, r;
    st_file_t *f[4] = {s->log, s->oidx_file, s->tidx_file, s->txn_file};
    for (int i = 0; i < 4; i++)
        if (f[i] && (r = st_file_unlink(f[i])) < 0 && r != -ENOENT && rc == 0)
            rc = r;
    st_segment_free(s);
    return rc;
}

/* Records one valid batch at pos in the in-memory state: timestamps, then index entries the
 * way Kafka places them. */
static int seg_note_batch(st_segment_t *s, int64_t pos, const st_batch_hdr_t *h, int32_t interval)
{
    int64_t last = st_batch_last_offset(h);
    if (s->first_batch_ts < 0 && pos == 0)
        s->first_batch_ts = h->max_timestamp;
    if (h->max_timestamp > s->max_timestamp) {
        s->max_timestamp = h->max_timestamp;
        s->max_ts_offset = last;
    }
    if (s->bytes_since_index > interval) {
        uint32_t rel = (uint32_t)(last - s->base_offset);
        if (st_offidx_add(&s->oidx, rel, (uint32_t)pos) < 0)
            return -ENOMEM;
        if (s->max_timestamp >= 0 &&
            (s->tidx.n == 0 || s->max_timestamp > s->tidx.e[s->tidx.n - 1].ts)) {
            if (st_timeidx_add(&s->tidx, s->max_timestamp,
                               (uint32_t)(s->max_ts_offset - s->base_offset)) < 0)
                return -ENOMEM;
        }
        s->bytes_since_index = 0;
    }
    s->bytes_since_index += st_batch_size(h);
    s->next_offset = last + 1;
    return 0;
}

/* Reads a whole index file; a missing one reads as empty with *missing set. */
static int read_whole(st_file_t *f, uint8_t **data, size_t *len, bool *missing)
{
    *data = NULL;
    *len = 0;
    *missing = false;
    int64_t size;
    bool create = f->create;
    f->create = false; /* do not create while probing */
    int rc = st_file_size(f, &size);
    f->create = create;
    if (rc == -ENOENT) {
        *missing = true;
        return 0;
    }
    if (rc < 0)
        return rc;
    if (size > (int64_t)1 << 31)
        return ST_E_CORRUPT;
    *data = malloc((size_t)size + 1);
    if (!*data)
        return -ENOMEM;
    ssize_t r = st_file_pread(f, *data, (size_t)size, 0);
    if (r < 0) {
        free(*data);
        *data = NULL;
        return (int)r;
    }
    *len = (size_t)r;
    return 0;
}

/* Checks the batches in [pos, size) fully (CRC, offsets from min_next) and notes them. */
static int seg_check_tail(st_segment_t *s, int64_t pos, int64_t min_next, int32_t interval)
{
    st_buf_t b;
    st_buf_init(&b);
    int rc = 0;
    int64_t next = min_next;
    while (pos < s->size) {
        uint8_t hb[ST_BATCH_HEADER_SIZE];
        st_batch_hdr_t h;
        if (s->size - pos < ST_BATCH_HEADER_SIZE) {
            rc = ST_E_CORRUPT;
            break;
        }
        ssize_t r = st_file_pread(s->log, hb, sizeof hb, pos);
        if (r < 0) {
            rc = (int)r;
            break;
        }
        if (r != (ssize_t)sizeof hb || st_batch_parse_hdr(hb, sizeof hb, &h) < 0 ||
            st_batch_size(&h) > s->size - pos || h.base_offset < next || h.last_offset_delta < 0 ||
            st_batch_last_offset(&h) - s->base_offset > SEG_MAX_REL) {
            rc = ST_E_CORRUPT;
            break;
        }
        size_t bs = (size_t)st_batch_size(&h);
        st_buf_clear(&b);
        if (!st_buf_extend(&b, bs)) {
            rc = -ENOMEM;
            break;
        }
        r = st_file_pread(s->log, b.data, bs, pos);
        if (r < 0) {
            rc = (int)r;
            break;
        }
        if ((size_t)r != bs || st_batch_check(b.data, bs, &h) < 0) {
            rc = ST_E_CORRUPT;
            break;
        }
        if ((rc = seg_note_batch(s, pos, &h, interval)) < 0)
            break;
        next = st_batch_last_offset(&h) + 1;
        pos += (int64_t)bs;
    }
    st_buf_fini(&b);
    return rc;
}

int st_segment_load(st_segment_t *s, int32_t interval)
{
    uint8_t *d;
    size_t n;
    bool missing_o, missing_t;
    int rc = read_whole(s->oidx_file, &d, &n, &missing_o);
    if (rc < 0)
        return rc;
    if (n % ST_OFFIDX_ENTRY != 0) {
        free(d);
        return ST_E_CORRUPT; /* not what we wrote: a partial entry */
    }
    rc = st_offidx_load(&s->oidx, d, n, s->size, SEG_MAX_REL);
    free(d);
    if (rc < 0)
        return rc;
    rc = read_whole(s->tidx_file, &d, &n, &missing_t);
    if (rc < 0)
        return rc;
    if (n % ST_TIMEIDX_ENTRY != 0) {
        free(d);
        return ST_E_CORRUPT;
    }
    rc = st_timeidx_load(&s->tidx, d, n, SEG_MAX_REL);
    free(d);
    if (rc < 0)
        return rc;
    if ((missing_o || missing_t) && s->size > 0)
        return ST_E_CORRUPT;
    /* Start the tail check at the last indexed batch, which must end at the entry's offset. */
    int64_t pos = 0, min_next = s->base_offset;
    s->max_timestamp = -1;
    s->max_ts_offset = -1;
    if (s->tidx.n > 0) {
        s->max_timestamp = s->tidx.e[s->tidx.n - 1].ts;
        s->max_ts_offset = s->base_offset + s->tidx.e[s->tidx.n - 1].rel;
    }
    s->bytes_since_index = 0;
    if (s->oidx.n > 0) {
        st_offidx_entry_t last = s->oidx.e[s->oidx.n - 1];
        uint8_t hb[ST_BATCH_HEADER_SIZE];
        st_batch_hdr_t h;
        ssize_t r = st_file_pread(s->log, hb, sizeof hb, last.pos);
        if (r < 0)
            return (int)r;
        if (r != (ssize_t)sizeof hb || st_batch_parse_hdr(hb, sizeof hb, &h) < 0 ||
            st_batch_last_offset(&h) != s->base_offset + last.rel)
            return ST_E_CORRUPT;
        pos = last.pos;
        min_next = h.base_offset;
        /* seg_note_batch would index this batch again: step over its entry. */
        s->oidx.n--;
        s->bytes_since_index = interval + 1;
        rc = seg_check_tail(s, pos, min_next, interval);
        /* The re-added entry must be the one we removed. */
        if (rc == 0 && (s->oidx.n == 0 || s->oidx.e[s->oidx.n - 1].pos != last.pos ||
                        s->oidx.e[s->oidx.n - 1].rel != last.rel))
            rc = ST_E_CORRUPT;
    } else {
        s->bytes_since_index = 0;
        rc = seg_check_tail(s, 0, s->base_offset, interval);
    }
    if (rc < 0) {
        st_offidx_clear(&s->oidx);
        st_timeidx_clear(&s->tidx);
        return rc;
    }
    /* The time index must not name offsets past the log. */
    if (s->tidx.n > 0 && s->base_offset + s->tidx.e[s->tidx.n - 1].rel >= s->next_offset)
        return ST_E_CORRUPT;
    if (s->size > 0 && s->first_batch_ts < 0) {
        uint8_t hb[ST_BATCH_HEADER_SIZE];
        st_batch_hdr_t h;
        if (st_file_pread(s->log, hb, sizeof hb, 0) == (ssize_t)sizeof hb &&
            st_batch_parse_hdr(hb, sizeof hb, &h) == 0)
            s->first_batch_ts = h.max_timestamp;
    }
    return 0;
}

int st_segment_recover(st_segment_t *s, int32_t interval, int64_t min_offset, int64_t cut_from,
                       st_segment_batch_fn cb, void *arg, st_segment_scan_t *scan)
{
    int64_t file_size;
    int rc = st_file_size(s->log, &file_size);
    if (rc < 0)
        return rc;
    st_offidx_clear(&s->oidx);
    st_timeidx_clear(&s->tidx);
    s->max_timestamp = -1;
    s->max_ts_offset = -1;
    s->first_batch_ts = -1;
    s->bytes_since_index = 0;
    s->next_offset = s->base_offset;
    memset(scan, 0, sizeof *scan);

    size_t cap = SCAN_WINDOW;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    int64_t win = 0; /* file position of buf[0] */
    size_t wlen = 0; /* valid bytes in buf */
    int64_t pos = 0;
    int64_t next = min_offset > s->base_offset ? min_offset : s->base_offset;
    const char *why = NULL;
    while (pos < file_size) {
        if (file_size - pos < ST_BATCH_HEADER_SIZE) {
            why = "partial batch header at the end of the file";
            break;
        }
        /* Make sure the header is in the window. */
        if (pos < win || pos + ST_BATCH_HEADER_SIZE > win + (int64_t)wlen) {
            size_t want = (size_t)(file_size - pos < (int64_t)cap ? file_size - pos : (int64_t)cap);
            ssize_t r = st_file_pread(s->log, buf, want, pos);
            if (r < 0) {
                rc = (int)r;
                break;
            }
            win = pos;
            wlen = (size_t)r;
            if (wlen < ST_BATCH_HEADER_SIZE) {
                why = "file shorter than its size";
                break;
            }
        }
        const uint8_t *p = buf + (pos - win);
        st_batch_hdr_t h;
        int pr = st_batch_parse_hdr(p, ST_BATCH_HEADER_SIZE, &h);
        if (pr == ST_E_UNSUPPORTED) {
            why = "magic is not 2";
            break;
        }
        if (pr < 0) {
            why = "batch length out of bounds";
            break;
        }
        int64_t bs = st_batch_size(&h);
        if (bs > file_size - pos) {
            why = "batch runs past the end of the file";
            break;
        }
        if (pos + bs > win + (int64_t)wlen) {
            if ((size_t)bs > cap) {
                uint8_t *nb = realloc(buf, (size_t)bs);
                if (!nb) {
                    rc = -ENOMEM;
                    break;
                }
                buf = nb;
                cap = (size_t)bs;
            }
            size_t want = (size_t)(file_size - pos < (int64_t)cap ? file_size - pos : (int64_t)cap);
            ssize_t r = st_file_pread(s->log, buf, want, pos);
            if (r < 0) {
                rc = (int)r;
                break;
            }
            win = pos;
            wlen = (size_t)r;
            if ((int64_t)wlen < bs) {
                why = "file shorter than its size";
                break;
            }
            p = buf;
        }
        if (st_batch_check(p, (size_t)bs, &h) < 0) {
            why = h.last_offset_delta < 0 ? "negative lastOffsetDelta" : "CRC-32C mismatch";
            break;
        }
        if (h.base_offset < next) {
            why = "offsets do not increase";
            break;
        }
        if (st_batch_last_offset(&h) - s->base_offset > SEG_MAX_REL) {
            why = "offset too far from the segment base";
            break;
        }
        if ((rc = seg_note_batch(s, pos, &h, interval)) < 0)
            break;
        if (cb)
            cb(arg, &h);
        next = st_batch_last_offset(&h) + 1;
        pos += bs;
        scan->batches++;
    }
    free(buf);
    if (rc < 0)
        return rc;
    scan->valid_bytes = pos;
    scan->cut_bytes = file_size - pos;
    scan->why = why;
    if (pos < file_size && next < cut_from) {
        /* Synced data does not check out: not ours to repair (the caller reports it). */
        return ST_E_CORRUPT;
    }
    s->size = pos;
    if (s->wb_done > pos)
        s->wb_done = pos;
    if (pos < file_size) {
        ST_WARN("storage: recovery cut %s at byte %" PRId64 ": %s; %" PRId64
                " bytes removed, log now ends at offset %" PRId64,
                s->log->path, pos, why ? why : "?", file_size - pos, s->next_offset);
        rc = st_file_truncate(s->log, pos);
        if (rc < 0)
            return rc;
        s->log_dirty = true;
    }
    /* Rebuilt indexes replace whatever the files held. */
    s->oidx.flushed = 0;
    s->tidx.flushed = 0;
    s->idx_rewrite = true;
    return st_segment_flush_indexes(s, false);
}

void st_segment_reader_init(st_segment_reader_t *r, st_segment_t *s)
{
    r->seg = s;
    r->win_pos = 0;
    r->win_len = 0;
}

int st_segment_read_hdr(st_segment_reader_t *r, int64_t pos, st_batch_hdr_t *h)
{
    st_segment_t *s = r->seg;
    if (pos < 0 || s->size - pos < ST_BATCH_HEADER_SIZE)
        return ST_E_CORRUPT;
    if (pos < r->win_pos || pos + ST_BATCH_HEADER_SIZE > r->win_pos + (int64_t)r->win_len) {
        int64_t want = s->size - pos;
        if (want > (int64_t)sizeof r->win)
            want = (int64_t)sizeof r->win;
        ssize_t n = st_file_pread(s->log, r->win, (size_t)want, pos);
        if (n < 0)
            return (int)n;
        r->win_pos = pos;
        r->win_len = (size_t)n;
        if (n < ST_BATCH_HEADER_SIZE)
            return ST_E_CORRUPT;
    }
    int rc = st_batch_parse_hdr(r->win + (pos - r->win_pos), ST_BATCH_HEADER_SIZE, h);
    if (rc < 0)
        return ST_E_CORRUPT;
    if (st_batch_size(h) > s->size - pos || h->last_offset_delta < 0)
        return ST_E_CORRUPT;
    return 0;
}

static int find_from(st_segment_reader_t *r, int64_t pos, int64_t offset, st_segment_pos_t *out)
{
    st_segment_t *s = r->seg;
    while (pos < s->size) {
        int rc = st_segment_read_hdr(r, pos, &out->hdr);
        if (rc < 0)
            return rc;
        if (st_batch_last_offset(&out->hdr) >= offset) {
            out->pos = pos;
            return 1;
        }
        pos += st_batch_size(&out->hdr);
    }
    return 0;
}

int st_segment_find(st_segment_reader_t *r, int64_t offset, st_segment_pos_t *out)
{
    st_segment_t *s = r->seg;
    int64_t pos = 0;
    if (offset > s->base_offset) {
        int64_t rel = offset - s->base_offset;
        ptrdiff_t i = st_offidx_floor(&s->oidx, rel > UINT32_MAX ? UINT32_MAX : (uint32_t)rel);
        if (i >= 0)
            pos = s->oidx.e[i].pos;
    }
    int rc = find_from(r, pos, offset, out);
    if (rc == ST_E_CORRUPT && pos > 0) {
        /* Never trust an index over the log: walk from the start. */
        ST_WARN("storage: index of %s points at no batch (position %" PRId64 "); scanning",
                s->log->path, pos);
        rc = find_from(r, 0, offset, out);
    }
    return rc;
}

int st_segment_append(st_segment_t *s, const uint8_t *data, size_t len, const st_batch_hdr_t *hdrs,
                      int n, int32_t interval)
{
    int rc;
    if (s->tail_unknown) {
        if ((rc = st_file_truncate(s->log, s->size)) < 0)
            return rc;
        s->tail_unknown = false;
    }
    rc = st_file_pwrite(s->log, data, len, s->size);
    if (rc < 0) {
        if (st_file_truncate(s->log, s->size) < 0)
            s->tail_unknown = true;
        return rc;
    }
    int64_t pos = s->size;
    for (int i = 0; i < n; i++) {
        if ((rc = seg_note_batch(s, pos, &hdrs[i], interval)) < 0)
            return rc; /* out of memory for the index: the log itself stays right */
        pos += st_batch_size(&hdrs[i]);
    }
    s->size = pos;
    s->log_dirty = true;
    return 0;
}

static int flush_one(st_file_t *f, size_t *flushed, size_t n, size_t esz, bool rewrite,
                     void (*enc)(const void *, size_t, uint8_t *), const void *x)
{
    int rc;
    if (rewrite && (rc = st_file_truncate(f, (int64_t)(*flushed * esz))) < 0)
        return rc;
    if (*flushed >= n)
        return 0;
    size_t bytes = (n - *flushed) * esz;
    uint8_t *b = malloc(bytes);
    if (!b)
        return -ENOMEM;
    enc(x, *flushed, b);
    rc = st_file_pwrite(f, b, bytes, (int64_t)(*flushed * esz));
    free(b);
    if (rc < 0)
        return rc;
    *flushed = n;
    return 0;
}

static void enc_o(const void *x, size_t from, uint8_t *out)
{
    st_offidx_encode(x, from, out);
}

static void enc_t(const void *x, size_t from, uint8_t *out)
{
    st_timeidx_encode(x, from, out);
}

static void enc_x(const void *x, size_t from, uint8_t *out)
{
    st_txnidx_encode(x, from, out);
}

int st_segment_txn_add(st_segment_t *s, const st_txn_aborted_t *a)
{
    int rc = st_txnidx_add(&s->txn, a);
    if (rc == 0)
        rc = flush_one(s->txn_file, &s->txn.flushed, s->txn.n, ST_TXNIDX_ENTRY, false, enc_x,
                       &s->txn);
    if (rc == 0)
        s->idx_dirty = true;
    return rc;
}

int st_segment_set_txn(st_segment_t *s, const st_txn_aborted_t *e, size_t n)
{
    st_txnidx_clear(&s->txn);
    for (size_t i = 0; i < n; i++)
        if (st_txnidx_add(&s->txn, &e[i]) < 0)
            return -ENOMEM;
    int rc = flush_one(s->txn_file, &s->txn.flushed, s->txn.n, ST_TXNIDX_ENTRY, true, enc_x,
                       &s->txn);
    if (rc == 0) {
        s->idx_dirty = true;
        s->txn_rebuild = false;
    }
    return rc;
}

int st_segment_load_txn(st_segment_t *s)
{
    uint8_t *d;
    size_t n;
    bool missing;
    int rc = read_whole(s->txn_file, &d, &n, &missing);
    if (rc < 0)
        return rc;
    rc = st_txnidx_load(&s->txn, d, n, s->base_offset, s->next_offset);
    free(d);
    if (rc == -ENOMEM)
        return rc;
    s->txn_rebuild = missing || rc < 0;
    return 0;
}

int st_segment_flush_indexes(st_segment_t *s, bool final)
{
    if (final && s->max_timestamp >= 0 &&
        (s->tidx.n == 0 || s->max_timestamp > s->tidx.e[s->tidx.n - 1].ts)) {
        if (st_timeidx_add(&s->tidx, s->max_timestamp,
                           (uint32_t)(s->max_ts_offset - s->base_offset)) < 0)
            return -ENOMEM;
    }
    bool any = s->idx_rewrite || s->oidx.flushed < s->oidx.n || s->tidx.flushed < s->tidx.n;
    int rc = flush_one(s->oidx_file, &s->oidx.flushed, s->oidx.n, ST_OFFIDX_ENTRY, s->idx_rewrite,
                       enc_o, &s->oidx);
    if (rc == 0)
        rc = flush_one(s->tidx_file, &s->tidx.flushed, s->tidx.n, ST_TIMEIDX_ENTRY, s->idx_rewrite,
                       enc_t, &s->tidx);
    if (rc == 0)
        rc = flush_one(s->txn_file, &s->txn.flushed, s->txn.n, ST_TXNIDX_ENTRY, s->idx_rewrite,
                       enc_x, &s->txn);
    if (rc < 0)
        return rc;
    s->idx_rewrite = false;
    if (any)
        s->idx_dirty = true;
    return 0;
}

int st_segment_truncate(st_segment_t *s, int64_t pos)
{
    int trc = st_file_truncate(s->log, pos);
    s->tail_unknown = trc < 0; /* memory follows the cut; the next write cuts the file first */
    s->log_dirty = true;
    s->size = pos;
    if (s->wb_done > pos)
        s->wb_done = pos;
    /* Recompute what the cut may have changed with a header walk. */
    s->max_timestamp = -1;
    s->max_ts_offset = -1;
    s->first_batch_ts = -1;
    s->bytes_since_index = 0;
    s->next_offset = s->base_offset;
    st_offidx_truncate_pos(&s->oidx, (uint32_t)pos);
    s->idx_rewrite = true;
    st_segment_reader_t *r = malloc(sizeof *r);
    if (!r)
        return -ENOMEM;
    st_segment_reader_init(r, s);
    int rc = 0;
    int64_t p = 0;
    int64_t last_idx_pos = s->oidx.n ? (int64_t)s->oidx.e[s->oidx.n - 1].pos : -1;
    while (p < s->size) {
        st_batch_hdr_t h;
        if ((rc = st_segment_read_hdr(r, p, &h)) < 0)
            break;
        if (p == 0)
            s->first_batch_ts = h.max_timestamp;
        if (h.max_timestamp > s->max_timestamp) {
            s->max_timestamp = h.max_timestamp;
            s->max_ts_offset = st_batch_last_offset(&h);
        }
        if (p == last_idx_pos)
            s->bytes_since_index = 0;
        s->bytes_since_index += st_batch_size(&h);
        s->next_offset = st_batch_last_offset(&h) + 1;
        p += st_batch_size(&h);
    }
    free(r);
    st_timeidx_truncate_rel(&s->tidx, (uint32_t)(s->next_offset - s->base_offset));
    st_txnidx_truncate(&s->txn, s->next_offset);
    if (rc < 0)
        return rc;
    return trc;
}

bool st_segment_check(st_segment_t *s)
{
    if (s->next_offset < s->base_offset || s->size < 0)
        return false;
    if (s->size == 0 && s->next_offset != s->base_offset)
        return false;
    for (size_t i = 0; i < s->oidx.n; i++) {
        if ((int64_t)s->oidx.e[i].pos >= s->size)
            return false;
        if (i > 0 &&
            (s->oidx.e[i].pos <= s->oidx.e[i - 1].pos || s->oidx.e[i].rel <= s->oidx.e[i - 1].rel))
            return false;
    }
    for (size_t i = 1; i < s->tidx.n; i++)
        if (s->tidx.e[i].ts <= s->tidx.e[i - 1].ts)
            return false;
    for (size_t i = 0; i < s->txn.n; i++)
        if (s->txn.e[i].last_offset < s->base_offset || s->txn.e[i].last_offset >= s->next_offset ||
            (i > 0 && s->txn.e[i].last_offset <= s->txn.e[i - 1].last_offset))
            return false;
    return s->oidx.flushed <= s->oidx.n && s->tidx.flushed <= s->tidx.n;
}
