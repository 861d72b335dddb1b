/*
 * batch.c — RecordBatch v2 header parse, CRC, validation and record walk.
 *
 * The layout is drawn in batch.h. Everything here reads untrusted bytes: every length is checked
 * against what is available before it is used, and nothing here asserts on input.
 */
#include "storage/batch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/crc32c.h"
#include "base/err.h"
#include "base/varint.h"
#include "storage/codec.h"

int st_batch_parse_hdr(const uint8_t *p, size_t n, st_batch_hdr_t *h)
{
    if (n < ST_BATCH_HEADER_SIZE)
        return ST_E_TRUNCATED;
    h->base_offset = (int64_t)st_be64(p + ST_BATCH_OFF_BASE_OFFSET);
    h->batch_length = (int32_t)st_be32(p + ST_BATCH_OFF_LENGTH);
    h->partition_leader_epoch = (int32_t)st_be32(p + ST_BATCH_OFF_LEADER_EPOCH);
    h->magic = (int8_t)p[ST_BATCH_OFF_MAGIC];
    h->crc = st_be32(p + ST_BATCH_OFF_CRC);
    h->attributes = (int16_t)st_be16(p + ST_BATCH_OFF_ATTRIBUTES);
    h->last_offset_delta = (int32_t)st_be32(p + ST_BATCH_OFF_LAST_OFFSET_DELTA);
    h->base_timestamp = (int64_t)st_be64(p + ST_BATCH_OFF_BASE_TIMESTAMP);
    h->max_timestamp = (int64_t)st_be64(p + ST_BATCH_OFF_MAX_TIMESTAMP);
    h->producer_id = (int64_t)st_be64(p + ST_BATCH_OFF_PRODUCER_ID);
    h->producer_epoch = (int16_t)st_be16(p + ST_BATCH_OFF_PRODUCER_EPOCH);
    h->base_sequence = (int32_t)st_be32(p + ST_BATCH_OFF_BASE_SEQUENCE);
    h->records_count = (int32_t)st_be32(p + ST_BATCH_OFF_RECORDS_COUNT);
    if (h->batch_length < ST_BATCH_HEADER_SIZE - ST_BATCH_LOG_OVERHEAD ||
        h->batch_length > ST_BATCH_MAX_SIZE)
        return ST_E_CORRUPT;
    if (h->magic != ST_BATCH_MAGIC_V2)
        return ST_E_UNSUPPORTED;
    return 0;
}

uint32_t st_batch_compute_crc(const uint8_t *batch, size_t size)
{
    return st_crc32c(0, batch + ST_BATCH_CRC_START, size - ST_BATCH_CRC_START);
}

int st_batch_check(const uint8_t *p, size_t n, st_batch_hdr_t *h)
{
    int rc = st_batch_parse_hdr(p, n, h);
    if (rc < 0)
        return rc;
    if ((uint64_t)st_batch_size(h) > n)
        return ST_E_TRUNCATED;
    if (h->last_offset_delta < 0)
        return ST_E_CORRUPT;
    if (st_batch_compute_crc(p, (size_t)st_batch_size(h)) != h->crc)
        return ST_E_CORRUPT;
    return 0;
}

static int verdict(st_batch_verdict_t *v, int err, const char *why)
{
    if (v) {
        v->err = err;
        v->why = why;
    }
    return err;
}

/* ---- record reader ------------------------------------------------------------------------ */

/*
 * Reads records either from bytes that are all at hand (an uncompressed batch: [p, end) is
 * everything) or from a decompressing stream that refills a bounded window. pos() counts the
 * bytes consumed since the first record, so a record's fields are held to its declared length
 * whichever the source.
 */
typedef struct rrd {
    const uint8_t *p;      /* next byte */
    const uint8_t *end;    /* end of the bytes at hand */
    const uint8_t *start;  /* where the bytes at hand begin */
    int64_t base;          /* stream position of start */
    st_codec_reader_t *z;  /* more bytes come from here; NULL once it ended, or never had any */
    st_codec_reader_t *zr; /* the reader rrd_open_stream made, for rrd_close; else NULL */
    int codec;             /* zr's */
    uint8_t *win;          /* the window z fills; NULL when the bytes are all at hand */
    size_t win_cap;
    int err; /* z's error, sticky */
} rrd_t;

/* The window a compressed batch's records are decompressed through. */
#define RRD_WINDOW (64 * 1024)

#define STR_(x) #x
#define STR(x)  STR_(x)
#define TOO_LARGE_WHY                                                                              \
    "records decompress to more than " STR(ST_BATCH_INFLATE_FACTOR) " x max.message.bytes"

static void rrd_init_flat(rrd_t *r, const uint8_t *p, const uint8_t *end)
{
    memset(r, 0, sizeof *r);
    r->p = r->start = p;
    r->end = end;
}

/*
 * Each thread keeps, between batches, one reader per codec and one window: creating a codec's
 * context costs more than decompressing a small batch (a zstd context is some 100 KiB to set
 * up; an LZ4 frame of 4 MiB blocks wants a 4 MiB buffer). A reader holding more than
 * RRD_KEEP_MAX bytes (a zstd frame's large window, a large snappy block) is not kept, nor is a
 * window st_batch_walk grew. Freed when the thread exits.
 */
#define RRD_KEEP_MAX (4 << 20)

typedef struct rrd_cache {
    st_codec_reader_t *z[ST_CODEC_ZSTD + 1]; /* by codec; NULL when none is kept */
    uint8_t *win;                            /* RRD_WINDOW bytes, or NULL */
} rrd_cache_t;

static pthread_key_t rrd_cache_key;
static pthread_once_t rrd_cache_once = PTHREAD_ONCE_INIT;
static bool rrd_cache_ok;

static void rrd_cache_free(void *arg)
{
    rrd_cache_t *c = arg;
    for (int i = 0; i <= ST_CODEC_ZSTD; i++)
        st_codec_reader_destroy(c->z[i]);
    free(c->win);
    free(c);
}

static void rrd_cache_init(void)
{
    rrd_cache_ok = pthread_key_create(&rrd_cache_key, rrd_cache_free) == 0;
}

/* This thread's cache, or NULL when there is none (and none can be made). */
static rrd_cache_t *rrd_cache(void)
{
    pthread_once(&rrd_cache_once, rrd_cache_init);
    if (!rrd_cache_ok)
        return NULL;
    rrd_cache_t *c = pthread_getspecific(rrd_cache_key);
    if (!c && (c = calloc(1, sizeof *c)) != NULL && pthread_setspecific(rrd_cache_key, c) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

/*
 * Sets r to read the records decompressed from the n bytes at in (codec 1..4), through a
 * window, producing at most max_out bytes. Returns 0 or -ENOMEM; rrd_close undoes it.
 */
static int rrd_open_stream(rrd_t *r, int codec, const uint8_t *in, size_t n, int64_t max_out)
{
    rrd_init_flat(r, NULL, NULL);
    rrd_cache_t *c = rrd_cache();
    if (c && c->z[codec]) {
        r->z = c->z[codec];
        c->z[codec] = NULL;
        if (st_codec_reader_reset(r->z, in, n, max_out) < 0) {
            st_codec_reader_destroy(r->z);
            r->z = NULL;
        }
    }
    int rc = r->z ? 0 : st_codec_reader_create(codec, in, n, max_out, &r->z);
    if (rc < 0)
        return rc;
    if (c && c->win) {
        r->win = c->win;
        c->win = NULL;
    } else if (!(r->win = malloc(RRD_WINDOW))) {
        st_codec_reader_destroy(r->z);
        r->z = NULL;
        return -ENOMEM;
    }
    r->win_cap = RRD_WINDOW;
    r->zr = r->z;
    r->codec = codec;
    return 0;
}

/* Ends what rrd_open_stream began, keeping its reader and window for the thread's next. */
static void rrd_close(rrd_t *r)
{
    rrd_cache_t *c = r->zr ? rrd_cache() : NULL;
    if (c && !c->z[r->codec] && st_codec_reader_memory(r->zr) <= RRD_KEEP_MAX)
        c->z[r->codec] = r->zr;
    else
        st_codec_reader_destroy(r->zr);
    if (c && !c->win && r->win_cap == RRD_WINDOW)
        c->win = r->win;
    else
        free(r->win);
}

static int64_t rrd_pos(const rrd_t *r)
{
    return r->base + (r->p - r->start);
}

/*
 * The slow half of rrd_fill: moves what is left to the window's start and decompresses more.
 * A want larger than the window grows it, doubling, as the bytes arrive (so at most twice what
 * was decompressed); only st_batch_walk asks for that, to hold a record whole.
 */
static int rrd_refill(rrd_t *r, size_t want)
{
    size_t have = (size_t)(r->end - r->p);
    r->base = rrd_pos(r);
    if (have > 0)
        memmove(r->win, r->p, have);
    r->p = r->start = r->win;
    while (have < want) {
        if (have == r->win_cap) {
            size_t cap = r->win_cap * 2 < want ? r->win_cap * 2 : want;
            uint8_t *nw = realloc(r->win, cap);
            if (!nw) {
                r->err = -ENOMEM;
                r->z = NULL;
                break;
            }
            r->win = nw;
            r->win_cap = cap;
            r->p = r->start = nw;
        }
        int n = st_codec_read(r->z, r->win + have, r->win_cap - have);
        if (n < 0) {
            r->err = n;
            r->z = NULL;
            break;
        }
        if (n == 0) {
            r->z = NULL;
            break;
        }
        have += (size_t)n;
    }
    r->end = r->win + have;
    return r->err;
}

/* Makes at least want (<= the window) bytes available at p, unless the stream ends first. */
static inline int rrd_fill(rrd_t *r, size_t want)
{
    if ((size_t)(r->end - r->p) >= want || !r->z)
        return r->err;
    return rrd_refill(r, want);
}

/* The error to return for bytes that do not parse: the stream's own, if it failed. */
static int rrd_bad(const rrd_t *r)
{
    return r->err ? r->err : ST_E_CORRUPT;
}

/* Reads a zigzag varint of at most lim bytes. */
static int rrd_varint32(rrd_t *r, int64_t lim, int32_t *out)
{
    rrd_fill(r, ST_VARINT32_MAX);
    int n = st_varint32_decode(r->p, (size_t)(r->end - r->p), out);
    if (n < 0 || n > lim)
        return rrd_bad(r);
    r->p += n;
    return 0;
}

static int rrd_varint64(rrd_t *r, int64_t lim, int64_t *out)
{
    rrd_fill(r, ST_VARINT64_MAX);
    int n = st_varint64_decode(r->p, (size_t)(r->end - r->p), out);
    if (n < 0 || n > lim)
        return rrd_bad(r);
    r->p += n;
    return 0;
}

/*
 * Passes over n bytes; *data points at them when the bytes are all at hand, else is NULL (a
 * window's bytes move).
 */
static int rrd_take(rrd_t *r, int64_t n, const uint8_t **data)
{
    *data = r->win ? NULL : r->p;
    if (n <= r->end - r->p) {
        r->p += n;
        return 0;
    }
    while (n > 0) {
        if (r->p == r->end) {
            rrd_fill(r, 1);
            if (r->p == r->end)
                return rrd_bad(r);
        }
        int64_t k = r->end - r->p;
        if (k > n)
            k = n;
        r->p += k;
        n -= k;
    }
    return 0;
}

/* Reads a nullable byte string (varint length, -1 = null) of at most lim bytes in all. */
static int rrd_bytes(rrd_t *r, int64_t rec_end, const uint8_t **data, int32_t *len)
{
    int rc = rrd_varint32(r, rec_end - rrd_pos(r), len);
    if (rc < 0)
        return rc;
    if (*len < -1 || *len > rec_end - rrd_pos(r))
        return rrd_bad(r);
    if (*len < 0) {
        *data = NULL;
        return 0;
    }
    return rrd_take(r, *len, data);
}

/*
 * Reads one record: 1 and the record (its pointers set only when the bytes are all at hand),
 * with its timestamp and offset deltas; 0 at a clean end (no byte left); or an error.
 */
static int rrd_record(rrd_t *r, st_batch_record_t *rec, int64_t *ts_delta, int32_t *off_delta)
{
    int rc = rrd_fill(r, 1);
    if (rc < 0)
        return rc;
    if (r->p == r->end)
        return 0;
    int32_t len;
    if ((rc = rrd_varint32(r, ST_VARINT32_MAX, &len)) < 0)
        return rc;
    if (len < 1)
        return ST_E_CORRUPT;
    int64_t rec_end = rrd_pos(r) + len;
    if (!r->win && len > r->end - r->p)
        return ST_E_CORRUPT;
    rrd_fill(r, 1);
    if (r->p == r->end)
        return rrd_bad(r);
    rec->attributes = (int8_t)*r->p++;
    if ((rc = rrd_varint64(r, rec_end - rrd_pos(r), ts_delta)) < 0 ||
        (rc = rrd_varint32(r, rec_end - rrd_pos(r), off_delta)) < 0 ||
        (rc = rrd_bytes(r, rec_end, &rec->key, &rec->key_len)) < 0 ||
        (rc = rrd_bytes(r, rec_end, &rec->value, &rec->value_len)) < 0 ||
        (rc = rrd_varint32(r, rec_end - rrd_pos(r), &rec->header_count)) < 0)
        return rc;
    if (rec->header_count < 0)
        return ST_E_CORRUPT;
    int64_t headers_pos = rrd_pos(r);
    rec->headers = r->win ? NULL : r->p;
    for (int32_t i = 0; i < rec->header_count; i++) {
        const uint8_t *d;
        int32_t l;
        if ((rc = rrd_bytes(r, rec_end, &d, &l)) < 0)
            return rc;
        if (l < 0) /* a header's key is never null */
            return ST_E_CORRUPT;
        if ((rc = rrd_bytes(r, rec_end, &d, &l)) < 0)
            return rc;
    }
    if (rrd_pos(r) != rec_end)
        return ST_E_CORRUPT;
    rec->headers_len = (size_t)(rec_end - headers_pos);
    return 1;
}

/*
 * Reads one record whole: like rrd_record, but with every pointer set, the window first made
 * to hold the record's bytes (grown when it is larger), and rec->raw / raw_len its bytes.
 */
static int rrd_record_whole(rrd_t *r, st_batch_record_t *rec, int64_t *ts_delta, int32_t *off_delta)
{
    int rc = rrd_fill(r, ST_VARINT32_MAX);
    if (rc < 0)
        return rc;
    if (r->p == r->end)
        return 0;
    int32_t len;
    int n = st_varint32_decode(r->p, (size_t)(r->end - r->p), &len);
    if (n < 0)
        return rrd_bad(r);
    if (len < 1)
        return ST_E_CORRUPT;
    size_t total = (size_t)n + (size_t)len;
    if (rrd_fill(r, total) < 0 || (size_t)(r->end - r->p) < total)
        return rrd_bad(r);
    rrd_t f;
    rrd_init_flat(&f, r->p, r->p + total);
    if ((rc = rrd_record(&f, rec, ts_delta, off_delta)) != 1)
        return rc < 0 ? rc : ST_E_CORRUPT;
    rec->raw = r->p;
    rec->raw_len = total;
    r->p += total;
    return 1;
}

/* Walks the records behind r as a producer's batch h must hold them. */
static int walk_records(const st_batch_hdr_t *h, rrd_t *r, bool need_keys, st_batch_verdict_t *v)
{
    st_batch_record_t rec;
    int64_t ts_delta;
    int32_t off_delta, i = 0;
    int rc = 0;
    bool keyless = false;
    while (i < h->records_count && (rc = rrd_record(r, &rec, &ts_delta, &off_delta)) == 1) {
        if (off_delta != i)
            return verdict(v, ST_E_MALFORMED, "record offset deltas not 0..n-1");
        keyless |= need_keys && rec.key_len < 0;
        i++;
    }
    /* After the last counted record: one more record is a count that disagrees with the
     * records; any other byte is corruption. */
    if (rc > 0 && (rc = rrd_record(r, &rec, &ts_delta, &off_delta)) > 0)
        return verdict(v, ST_E_MALFORMED, "more records than recordsCount");
    if (rc == ST_E_TOO_LARGE)
        return verdict(v, rc, TOO_LARGE_WHY);
    if (rc == -ENOMEM)
        return verdict(v, rc, "out of memory decompressing records");
    if (rc < 0)
        return verdict(
            v, rc, rc == r->err ? "compressed records do not decompress" : "records do not parse");
    if (i != h->records_count)
        return verdict(v, ST_E_MALFORMED, "record count differs from the records");
    /* After every batch-level check, as Kafka's LogValidator does. */
    if (keyless)
        return verdict(v, ST_E_NO_KEY, "record without a key in a compacted topic");
    return 0;
}

/* Decompresses the records of the compressed batch h at p through a window, walking them. */
static int walk_compressed(const uint8_t *p, const st_batch_hdr_t *h, int64_t max_bytes,
                           bool need_keys, st_batch_verdict_t *v)
{
    int64_t max_out = max_bytes > INT64_MAX / ST_BATCH_INFLATE_FACTOR
                          ? INT64_MAX
                          : max_bytes * ST_BATCH_INFLATE_FACTOR;
    rrd_t r;
    int rc = rrd_open_stream(&r, st_batch_compression(h), p + ST_BATCH_HEADER_SIZE,
                             (size_t)(st_batch_size(h) - ST_BATCH_HEADER_SIZE), max_out);
    if (rc < 0)
        return verdict(v, rc, "out of memory");
    rc = walk_records(h, &r, need_keys, v);
    rrd_close(&r);
    return rc;
}

int st_batch_validate_client(const uint8_t *p, size_t n, int64_t max_bytes, st_batch_hdr_t *h,
                             st_batch_verdict_t *v)
{
    return st_batch_validate_produce(p, n, max_bytes, false, h, v);
}

int st_batch_validate_produce(const uint8_t *p, size_t n, int64_t max_bytes, bool need_keys,
                              st_batch_hdr_t *h, st_batch_verdict_t *v)
{
    if (n < ST_BATCH_LOG_OVERHEAD + 5)
        return verdict(v, ST_E_CORRUPT, "records shorter than a batch header");
    /* The magic byte decides how to read the rest; look at it before the v2 header. */
    if (p[ST_BATCH_OFF_MAGIC] != ST_BATCH_MAGIC_V2)
        return verdict(v, ST_E_UNSUPPORTED, "magic is not 2");
    int rc = st_batch_parse_hdr(p, n, h);
    if (rc == ST_E_TRUNCATED)
        return verdict(v, ST_E_CORRUPT, "records shorter than a batch header");
    if (rc < 0)
        return verdict(v, rc, "batch length out of bounds");
    if (st_batch_size(h) > max_bytes)
        return verdict(v, ST_E_TOO_LARGE, "batch larger than max.message.bytes");
    if ((uint64_t)st_batch_size(h) > n)
        return verdict(v, ST_E_CORRUPT, "batch length runs past the end of the records");
    if (st_batch_compute_crc(p, (size_t)st_batch_size(h)) != h->crc)
        return verdict(v, ST_E_CORRUPT, "CRC-32C mismatch");
    if (h->attributes & ST_BATCH_ATTR_CONTROL)
        return verdict(v, ST_E_MALFORMED, "control batch from a client");
    if (h->records_count < 1)
        return verdict(v, ST_E_MALFORMED, "batch holds no records");
    if (h->last_offset_delta < 0 || (int64_t)h->last_offset_delta + 1 != h->records_count)
        return verdict(v, ST_E_MALFORMED, "lastOffsetDelta + 1 != record count");
    if (st_batch_compression(h) > ST_CODEC_ZSTD)
        return verdict(v, ST_E_MALFORMED, "unknown compression codec");
    if (st_batch_compression(h) != ST_CODEC_NONE)
        rc = walk_compressed(p, h, max_bytes, need_keys, v);
    else if (h->records_count >
             (st_batch_size(h) - ST_BATCH_HEADER_SIZE) / ST_BATCH_MIN_RECORD_SIZE)
        return verdict(v, ST_E_MALFORMED, "record count larger than the batch can hold");
    else {
        rrd_t r;
        rrd_init_flat(&r, p + ST_BATCH_HEADER_SIZE, p + st_batch_size(h));
        rc = walk_records(h, &r, need_keys, v);
    }
    return rc < 0 ? rc : verdict(v, 0, "ok");
}

void st_batch_set_base_offset(uint8_t *batch, int64_t base_offset)
{
    st_put_be64(batch + ST_BATCH_OFF_BASE_OFFSET, (uint64_t)base_offset);
}

void st_batch_set_leader_epoch(uint8_t *batch, int32_t epoch)
{
    st_put_be32(batch + ST_BATCH_OFF_LEADER_EPOCH, (uint32_t)epoch);
}

void st_batch_set_log_append_time(uint8_t *batch, size_t size, int64_t ts)
{
    uint16_t attr = st_be16(batch + ST_BATCH_OFF_ATTRIBUTES);
    st_put_be16(batch + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)(attr | ST_BATCH_ATTR_LOG_APPEND_TIME));
    st_put_be64(batch + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)ts);
    st_put_be32(batch + ST_BATCH_OFF_CRC, st_batch_compute_crc(batch, size));
}

int st_batch_iter_init(st_batch_iter_t *it, const uint8_t *batch, size_t size)
{
    int rc = st_batch_parse_hdr(batch, size, &it->hdr);
    if (rc < 0)
        return rc;
    if ((uint64_t)st_batch_size(&it->hdr) > size)
        return ST_E_TRUNCATED;
    it->p = batch + ST_BATCH_HEADER_SIZE;
    it->end = batch + st_batch_size(&it->hdr);
    it->index = 0;
    if (st_batch_compression(&it->hdr) != 0) {
        it->p = it->end;
        return ST_E_UNSUPPORTED;
    }
    return 0;
}

int st_batch_iter_next(st_batch_iter_t *it, st_batch_record_t *rec)
{
    if (it->index >= it->hdr.records_count || it->p >= it->end)
        return 0;
    rrd_t r;
    rrd_init_flat(&r, it->p, it->end);
    int64_t ts_delta;
    int32_t off_delta;
    if (rrd_record(&r, rec, &ts_delta, &off_delta) != 1)
        return ST_E_CORRUPT;
    rec->raw = it->p;
    rec->raw_len = (size_t)(r.p - it->p);
    rec->offset = it->hdr.base_offset + off_delta;
    if (it->hdr.attributes & ST_BATCH_ATTR_LOG_APPEND_TIME)
        rec->timestamp = it->hdr.max_timestamp;
    else
        rec->timestamp = (int64_t)((uint64_t)it->hdr.base_timestamp + (uint64_t)ts_delta);
    it->p = r.p;
    it->index++;
    return 1;
}

/* ---- walk and filter (log compaction) ----------------------------------------------------- */

typedef int (*walk_fn)(void *arg, const st_batch_record_t *rec);

/*
 * st_batch_walk, also handing back the header. Stored batches are held to what compaction
 * leaves of a producer's: deltas increasing within 0..lastOffsetDelta, recordsCount of them.
 */
static int walk(const uint8_t *batch, size_t size, int64_t max_out, walk_fn fn, void *arg,
                st_batch_hdr_t *h)
{
    if (st_batch_parse_hdr(batch, size, h) < 0 || (uint64_t)st_batch_size(h) > size ||
        h->last_offset_delta < 0 || h->records_count < 0)
        return ST_E_CORRUPT;
    int codec = st_batch_compression(h);
    if (codec > ST_CODEC_ZSTD)
        return ST_E_CORRUPT;
    const uint8_t *recs = batch + ST_BATCH_HEADER_SIZE, *end = batch + st_batch_size(h);
    rrd_t r;
    rrd_init_flat(&r, recs, end);
    int rc;
    if (codec != ST_CODEC_NONE && (recs != end || h->records_count != 0) &&
        (rc = rrd_open_stream(&r, codec, recs, (size_t)(end - recs), max_out)) < 0)
        return rc;
    st_batch_record_t rec;
    int64_t ts_delta;
    int32_t off_delta, prev = -1, i = 0;
    bool append_time = h->attributes & ST_BATCH_ATTR_LOG_APPEND_TIME;
    while ((rc = rrd_record_whole(&r, &rec, &ts_delta, &off_delta)) == 1) {
        if (i == h->records_count || off_delta <= prev || off_delta > h->last_offset_delta) {
            rc = ST_E_CORRUPT;
            break;
        }
        prev = off_delta;
        i++;
        rec.offset = h->base_offset + off_delta;
        rec.timestamp = append_time ? h->max_timestamp
                                    : (int64_t)((uint64_t)h->base_timestamp + (uint64_t)ts_delta);
        if ((rc = fn(arg, &rec)) != 0)
            break;
    }
    if (rc == 0 && i != h->records_count)
        rc = ST_E_CORRUPT;
    rrd_close(&r);
    return rc;
}

int st_batch_walk(const uint8_t *batch, size_t size, int64_t max_out,
                  int (*fn)(void *arg, const st_batch_record_t *rec), void *arg)
{
    st_batch_hdr_t h;
    return walk(batch, size, max_out, fn, arg, &h);
}

typedef struct filter_ctx {
    bool (*keep)(void *arg, const st_batch_record_t *rec);
    void *arg;
    st_buf_t *dst; /* kept records go here, uncompressed */
    int32_t kept;
} filter_ctx_t;

static int filter_one(void *arg, const st_batch_record_t *rec)
{
    filter_ctx_t *f = arg;
    if (!f->keep(f->arg, rec))
        return 0;
    f->kept++;
    return st_buf_append(f->dst, rec->raw, rec->raw_len);
}

int st_batch_filter(const uint8_t *batch, size_t size, int64_t max_out,
                    bool (*keep)(void *arg, const st_batch_record_t *rec), void *arg,
                    bool keep_empty, st_buf_t *out, int32_t *kept)
{
    *kept = 0;
    size_t start = out->len;
    st_batch_hdr_t h;
    if (st_batch_parse_hdr(batch, size, &h) < 0)
        return ST_E_CORRUPT;
    int codec = st_batch_compression(&h);
    st_buf_t plain; /* a compressed batch's kept records, before recompression */
    st_buf_init(&plain);
    filter_ctx_t f = {keep, arg, codec == ST_CODEC_NONE ? out : &plain, 0};
    int rc = st_buf_append(out, batch, ST_BATCH_HEADER_SIZE);
    if (rc == 0)
        rc = walk(batch, size, max_out, filter_one, &f, &h);
    if (rc == 0 && f.kept == 0 && !keep_empty)
        rc = 1; /* nothing to append */
    if (rc == 0 && f.kept > 0 && codec != ST_CODEC_NONE) {
        const uint8_t *recs = batch + ST_BATCH_HEADER_SIZE;
        size_t n = (size_t)(st_batch_size(&h) - ST_BATCH_HEADER_SIZE);
        rc = st_codec_compress(codec, st_codec_framing(codec, recs, n), plain.data, plain.len, out);
    }
    st_buf_fini(&plain);
    if (rc == 0 && out->len - start - ST_BATCH_LOG_OVERHEAD > ST_BATCH_MAX_SIZE)
        rc = ST_E_TOO_LARGE;
    if (rc != 0) {
        out->len = start;
        return rc > 0 ? 0 : rc;
    }
    uint8_t *p = out->data + start;
    size_t bs = out->len - start;
    if (f.kept == 0) {
        uint16_t attr = st_be16(p + ST_BATCH_OFF_ATTRIBUTES);
        st_put_be16(p + ST_BATCH_OFF_ATTRIBUTES,
                    (uint16_t)(attr & ~ST_BATCH_ATTR_COMPRESSION_MASK));
    }
    st_put_be32(p + ST_BATCH_OFF_LENGTH, (uint32_t)(bs - ST_BATCH_LOG_OVERHEAD));
    st_put_be32(p + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)f.kept);
    st_put_be32(p + ST_BATCH_OFF_CRC, st_batch_compute_crc(p, bs));
    *kept = f.kept;
    return 0;
}

/* ---- control batches (transaction markers) ---- */

size_t st_batch_control_build(uint8_t *out, int64_t producer_id, int16_t producer_epoch,
                              bool commit, int32_t coordinator_epoch, int64_t ts)
{
    memset(out, 0, ST_BATCH_CONTROL_SIZE);
    st_put_be32(out + ST_BATCH_OFF_LENGTH, ST_BATCH_CONTROL_SIZE - ST_BATCH_LOG_OVERHEAD);
    out[ST_BATCH_OFF_MAGIC] = ST_BATCH_MAGIC_V2;
    st_put_be16(out + ST_BATCH_OFF_ATTRIBUTES, ST_BATCH_ATTR_TRANSACTIONAL | ST_BATCH_ATTR_CONTROL);
    st_put_be64(out + ST_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)ts);
    st_put_be64(out + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)ts);
    st_put_be64(out + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)producer_id);
    st_put_be16(out + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)producer_epoch);
    st_put_be32(out + ST_BATCH_OFF_BASE_SEQUENCE, UINT32_MAX); /* -1 */
    st_put_be32(out + ST_BATCH_OFF_RECORDS_COUNT, 1);
    /* the record: length 16, attributes, timestamp and offset deltas 0, key (4 bytes), value
     * (6 bytes), no headers; varints zigzag */
    uint8_t *r = out + ST_BATCH_HEADER_SIZE;
    const uint8_t rec[] = {0x20, 0, 0, 0, 0x08, 0, 0, 0, commit ? 1 : 0, 0x0c, 0, 0};
    memcpy(r, rec, sizeof rec);
    st_put_be32(r + sizeof rec, (uint32_t)coordinator_epoch);
    r[sizeof rec + 4] = 0; /* headers count */
    st_put_be32(out + ST_BATCH_OFF_CRC, st_batch_compute_crc(out, ST_BATCH_CONTROL_SIZE));
    return ST_BATCH_CONTROL_SIZE;
}

int st_batch_control_parse(const uint8_t *batch, size_t size, int16_t *type,
                           int32_t *coordinator_epoch)
{
    st_batch_iter_t it;
    st_batch_record_t rec;
    int rc = st_batch_iter_init(&it, batch, size);
    if (rc < 0)
        return ST_E_CORRUPT; /* a control batch is never compressed */
    rc = st_batch_iter_next(&it, &rec);
    if (rc == 0)
        return ST_E_NOT_FOUND; /* emptied by the cleaner */
    if (rc < 0 || rec.key_len < 4)
        return ST_E_CORRUPT;
    int16_t t = (int16_t)st_be16(rec.key + 2);
    if (t != 0 && t != 1)
        return ST_E_NOT_FOUND; /* another control record (not a transaction marker) */
    if (rec.value_len < 6)
        return ST_E_CORRUPT;
    *type = t;
    *coordinator_epoch = (int32_t)st_be32(rec.value + 2);
    return 0;
}
