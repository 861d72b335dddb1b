/*
 * msgconv.c — legacy MessageSets (magic 0/1) to RecordBatch v2 and back (msgconv.h).
 */
#include "storage/msgconv.h"

#include <errno.h>
#include <string.h>
#include <zlib.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/varint.h"
#include "storage/batch.h"
#include "storage/codec.h"

#define MAGIC_OFFSET 16 /* the magic byte: message (after offset, size, crc) and batch alike */
#define LZ4_MAGIC    0x184D2204u

int st_msgconv_magic(const uint8_t *p, size_t n)
{
    return p && n > MAGIC_OFFSET ? p[MAGIC_OFFSET] : -1;
}

/* ---- xxHash32 and the LZ4 header checksum ---- */

#define XXP1 2654435761u
#define XXP2 2246822519u
#define XXP3 3266489917u
#define XXP4 668265263u
#define XXP5 374761393u

static uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t xx_round(uint32_t acc, uint32_t in)
{
    return rotl32(acc + in * XXP2, 13) * XXP1;
}

uint32_t st_msgconv_xxh32(const uint8_t *p, size_t n, uint32_t seed)
{
    const uint8_t *end = p + n;
    uint32_t h;
    if (n >= 16) {
        uint32_t v1 = seed + XXP1 + XXP2, v2 = seed + XXP2, v3 = seed, v4 = seed - XXP1;
        for (; end - p >= 16; p += 16) {
            v1 = xx_round(v1, le32(p));
            v2 = xx_round(v2, le32(p + 4));
            v3 = xx_round(v3, le32(p + 8));
            v4 = xx_round(v4, le32(p + 12));
        }
        h = rotl32(v1, 1) + rotl32(v2, 7) + rotl32(v3, 12) + rotl32(v4, 18);
    } else {
        h = seed + XXP5;
    }
    h += (uint32_t)n;
    for (; end - p >= 4; p += 4)
        h = rotl32(h + le32(p) * XXP3, 17) * XXP4;
    for (; p < end; p++)
        h = rotl32(h + *p * XXP5, 11) * XXP1;
    h ^= h >> 15;
    h *= XXP2;
    h ^= h >> 13;
    h *= XXP3;
    h ^= h >> 16;
    return h;
}

/*
 * Rewrites the header checksum of the LZ4 frame at f (n bytes): the correct one (over the
 * descriptor) or, broken, Kafka's magic 0 one (over the frame magic and the descriptor). A
 * stream too short or not starting with a frame is left alone (the decoder says what it is).
 */
static void lz4_set_hc(uint8_t *f, size_t n, bool broken)
{
    if (n < 7 || le32(f) != LZ4_MAGIC)
        return;
    size_t desc = 2 + ((f[4] & 0x08) ? 8 : 0) + ((f[4] & 0x01) ? 4 : 0);
    if (n < 4 + desc + 1)
        return;
    uint32_t h = broken ? st_msgconv_xxh32(f, 4 + desc, 0) : st_msgconv_xxh32(f + 4, desc, 0);
    f[4 + desc] = (uint8_t)((h >> 8) & 0xff);
}

/* ---- up: legacy set -> one v2 batch ---- */

typedef struct up {
    st_buf_t recs; /* the batch's records, uncompressed */
    int32_t count;
    int64_t first_ts, max_ts;
    int64_t inflated; /* bytes decompressed so far */
    int64_t max_out;
    int codec, framing;
    st_msgconv_up_info_t *info;
} up_t;

static int up_refuse(up_t *u, int err, const char *why)
{
    u->info->why = why;
    return err;
}

static int up_varbytes(st_buf_t *b, const uint8_t *p, int32_t len)
{
    uint8_t v[10];
    int k = st_varint32_encode(v, len);
    int rc = st_buf_append(b, v, (size_t)k);
    if (rc == 0 && len > 0)
        rc = st_buf_append(b, p, (size_t)len);
    return rc;
}

/* Appends one record (v2 layout) for a message. */
static int up_record(up_t *u, int64_t ts, const uint8_t *key, int32_t klen, const uint8_t *val,
                     int32_t vlen)
{
    if (u->count == INT32_MAX)
        return up_refuse(u, ST_E_TOO_LARGE, "too many messages");
    if (u->count == 0)
        u->first_ts = u->max_ts = ts;
    if (ts > u->max_ts)
        u->max_ts = ts;
    uint8_t head[1 + 10 + 5];
    size_t k = 0;
    head[k++] = 0; /* attributes */
    k += (size_t)st_varint64_encode(head + k, (int64_t)((uint64_t)ts - (uint64_t)u->first_ts));
    k += (size_t)st_varint32_encode(head + k, u->count);
    int64_t body = (int64_t)k + st_varint64_size(klen) + (klen > 0 ? klen : 0) +
                   st_varint64_size(vlen) + (vlen > 0 ? vlen : 0) + 1;
    if (body > INT32_MAX || (int64_t)u->recs.len + body > ST_BATCH_MAX_SIZE)
        return up_refuse(u, ST_E_TOO_LARGE, "messages too large");
    uint8_t len[5];
    int rc = st_buf_append(&u->recs, len, (size_t)st_varint32_encode(len, (int32_t)body));
    if (rc == 0)
        rc = st_buf_append(&u->recs, head, k);
    if (rc == 0)
        rc = up_varbytes(&u->recs, key, klen);
    if (rc == 0)
        rc = up_varbytes(&u->recs, val, vlen);
    if (rc == 0)
        rc = st_buf_put_u8(&u->recs, 0); /* no headers */
    if (rc)
        return -ENOMEM;
    u->count++;
    return 0;
}

/* Decompresses a wrapper's value (codec 1..3) into plain, counting against max_out. */
static int up_inflate(up_t *u, int codec, int8_t magic, const uint8_t *val, int32_t vlen,
                      st_buf_t *plain)
{
    const uint8_t *src = val;
    st_buf_t fixed;
    st_buf_init(&fixed);
    if (codec == ST_CODEC_LZ4 && magic == 0) {
        /* Kafka ignores the header checksum of magic 0 LZ4: give liblz4 a correct one */
        if (st_buf_append(&fixed, val, (size_t)vlen))
            return -ENOMEM;
        lz4_set_hc(fixed.data, fixed.len, false);
        src = fixed.data;
    }
    st_codec_reader_t *r = NULL;
    int rc = st_codec_reader_create(codec, src, (size_t)vlen, u->max_out - u->inflated, &r);
    while (rc == 0) {
        uint8_t *w = st_buf_extend(plain, 64 * 1024);
        if (!w) {
            rc = -ENOMEM;
            break;
        }
        int got = st_codec_read(r, w, 64 * 1024);
        plain->len -= 64 * 1024 - (size_t)(got > 0 ? got : 0);
        if (got <= 0) {
            rc = got;
            break;
        }
    }
    if (r) {
        u->inflated += st_codec_produced(r);
        st_codec_reader_destroy(r);
    }
    st_buf_fini(&fixed);
    if (rc == ST_E_TOO_LARGE)
        return up_refuse(u, rc, "compressed messages expand past the broker's bound");
    if (rc < 0 && rc != -ENOMEM)
        return up_refuse(u, ST_E_CORRUPT, "a compressed message does not decompress");
    return rc;
}

static int up_set(up_t *u, const uint8_t *p, size_t n, int depth, int8_t wrapper_magic);

/* One message of m bytes at msg (its CRC checked by the caller). */
static int up_message(up_t *u, const uint8_t *msg, size_t m, int depth, int8_t wrapper_magic)
{
    int8_t magic = (int8_t)msg[4];
    if (magic > 1 || magic < 0)
        return up_refuse(u, ST_E_MALFORMED, "a message with a magic above 1 in a MessageSet");
    if (depth > 0 && magic != wrapper_magic)
        return up_refuse(u, ST_E_MALFORMED, "an inner message's magic differs from its wrapper's");
    size_t at = 6;
    int64_t ts = -1;
    if (magic == 1) {
        if (m < ST_MSGCONV_V1_HEADER)
            return up_refuse(u, ST_E_CORRUPT, "a message shorter than its header");
        ts = (int64_t)st_be64(msg + 6);
        at = 14;
    }
    int codec = msg[5] & 0x07;
    const uint8_t *field[2];
    int32_t flen[2];
    for (int i = 0; i < 2; i++) {
        if (m - at < 4)
            return up_refuse(u, ST_E_CORRUPT, "a message shorter than its header");
        flen[i] = (int32_t)st_be32(msg + at);
        at += 4;
        if (flen[i] < -1 || (flen[i] > 0 && (size_t)flen[i] > m - at))
            return up_refuse(u, ST_E_CORRUPT, "a message's key or value overruns it");
        field[i] = msg + at;
        at += flen[i] > 0 ? (size_t)flen[i] : 0;
    }
    if (at != m)
        return up_refuse(u, ST_E_CORRUPT, "bytes after a message's value");
    if (codec == ST_CODEC_NONE)
        return up_record(u, ts, field[0], flen[0], field[1], flen[1]);
    if (depth > 0)
        return up_refuse(u, ST_E_MALFORMED,
                         "Compressed outer record should not have an inner record with a "
                         "compression attribute set");
    if (codec == ST_CODEC_ZSTD)
        return up_refuse(u, ST_E_UNSUPPORTED, "zstd compression needs message format v2");
    if (codec > ST_CODEC_ZSTD)
        return up_refuse(u, ST_E_MALFORMED, "an unknown compression codec");
    if (flen[1] < 0)
        return up_refuse(u, ST_E_MALFORMED, "a compressed message with a null value");
    if (flen[1] == 0)
        return up_refuse(u, ST_E_CORRUPT, "a compressed message with an empty value");
    st_buf_t plain;
    st_buf_init(&plain);
    int before = u->count;
    int rc = up_inflate(u, codec, magic, field[1], flen[1], &plain);
    if (rc == 0)
        rc = up_set(u, plain.data, plain.len, 1, magic);
    st_buf_fini(&plain);
    if (rc == 0 && u->count == before)
        rc = up_refuse(u, ST_E_MALFORMED, "a compressed message without inner messages");
    if (rc == 0) {
        u->codec = codec;
        u->framing = st_codec_framing(codec, field[1], (size_t)flen[1]);
        u->info->wrappers++;
    }
    return rc;
}

static int up_set(up_t *u, const uint8_t *p, size_t n, int depth, int8_t wrapper_magic)
{
    while (n > 0) {
        if (n < ST_MSGCONV_LOG_OVERHEAD)
            return up_refuse(u, ST_E_CORRUPT,
                             "a MessageSet ending inside a message's offset "
                             "and size");
        uint32_t size = st_be32(p + 8);
        if (size < ST_MSGCONV_V0_HEADER || size > n - ST_MSGCONV_LOG_OVERHEAD)
            return up_refuse(u, ST_E_CORRUPT, "a message size out of bounds");
        const uint8_t *msg = p + ST_MSGCONV_LOG_OVERHEAD;
        uint32_t crc = (uint32_t)crc32(0L, msg + 4, (uInt)(size - 4));
        if (crc != st_be32(msg))
            return up_refuse(u, ST_E_CORRUPT, "a message's CRC does not match its bytes");
        int rc = up_message(u, msg, size, depth, wrapper_magic);
        if (rc)
            return rc;
        p += ST_MSGCONV_LOG_OVERHEAD + size;
        n -= ST_MSGCONV_LOG_OVERHEAD + size;
    }
    return 0;
}

int st_msgconv_up(const uint8_t *in, size_t n, int64_t max_out, st_buf_t *out,
                  st_msgconv_up_info_t *info)
{
    st_msgconv_up_info_t scratch;
    if (!info)
        info = &scratch;
    memset(info, 0, sizeof *info);
    up_t u = {.max_out = max_out < 0 ? 0 : max_out, .info = info};
    st_buf_init(&u.recs);
    int rc = n == 0 ? up_refuse(&u, ST_E_MALFORMED, "no messages") : up_set(&u, in, n, 0, 0);
    size_t start = out->len;
    if (rc == 0 && st_buf_extend(out, ST_BATCH_HEADER_SIZE) == NULL)
        rc = -ENOMEM;
    if (rc == 0) {
        if (u.codec != ST_CODEC_NONE)
            rc = st_codec_compress(u.codec, u.framing, u.recs.data, u.recs.len, out);
        else
            rc = st_buf_append(out, u.recs.data, u.recs.len);
    }
    if (rc == 0 && out->len - start - ST_BATCH_LOG_OVERHEAD > ST_BATCH_MAX_SIZE)
        rc = up_refuse(&u, ST_E_TOO_LARGE, "the converted batch is too large");
    st_buf_fini(&u.recs);
    if (rc) {
        out->len = start;
        return rc;
    }
    uint8_t *b = out->data + start;
    size_t size = out->len - start;
    memset(b, 0, ST_BATCH_HEADER_SIZE);
    st_put_be32(b + ST_BATCH_OFF_LENGTH, (uint32_t)(size - ST_BATCH_LOG_OVERHEAD));
    b[ST_BATCH_OFF_MAGIC] = ST_BATCH_MAGIC_V2;
    st_put_be16(b + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)u.codec);
    st_put_be32(b + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(u.count - 1));
    st_put_be64(b + ST_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)u.first_ts);
    st_put_be64(b + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)u.max_ts);
    st_put_be64(b + ST_BATCH_OFF_PRODUCER_ID, UINT64_MAX);          /* -1 */
    st_put_be16(b + ST_BATCH_OFF_PRODUCER_EPOCH, UINT16_MAX);       /* -1 */
    st_put_be32(b + ST_BATCH_OFF_BASE_SEQUENCE, UINT32_MAX);        /* -1 */
    st_put_be32(b + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)u.count); /* >= 1 */
    st_put_be32(b + ST_BATCH_OFF_CRC, st_batch_compute_crc(b, size));
    info->records = u.count;
    info->codec = u.codec;
    return 0;
}

/* ---- down: v2 batches -> legacy set ---- */

typedef struct down {
    const st_msgconv_down_opts_t *o;
    st_buf_t *dst; /* messages go here: out, or a wrapper's inner set */
    size_t start;  /* out's length before the call */
    bool inner;
    int64_t inner_base; /* magic 1: inner offsets are relative to this */
    bool log_time;
    int64_t log_ts;
    int64_t max_ts;
    int64_t last_offset;
    int64_t records;
    bool stop; /* the limit was reached */
} down_t;

#define DOWN_STOP 1 /* a walk callback's "stop here" */

/* Appends one legacy message at offset with the given attributes and fields. */
static int down_message(st_buf_t *b, int8_t magic, int64_t offset, int attr, int64_t ts,
                        const uint8_t *key, int32_t klen, const uint8_t *val, int32_t vlen)
{
    size_t hdr = magic == 0 ? ST_MSGCONV_V0_HEADER : ST_MSGCONV_V1_HEADER;
    size_t size = hdr + (klen > 0 ? (size_t)klen : 0) + (vlen > 0 ? (size_t)vlen : 0);
    if (size > INT32_MAX)
        return ST_E_TOO_LARGE;
    uint8_t *p = st_buf_extend(b, ST_MSGCONV_LOG_OVERHEAD + size);
    if (!p)
        return -ENOMEM;
    st_put_be64(p, (uint64_t)offset);
    st_put_be32(p + 8, (uint32_t)size);
    uint8_t *m = p + ST_MSGCONV_LOG_OVERHEAD, *q = m + 4;
    *q++ = (uint8_t)magic;
    *q++ = (uint8_t)attr;
    if (magic == 1) {
        st_put_be64(q, (uint64_t)ts);
        q += 8;
    }
    st_put_be32(q, (uint32_t)klen);
    q += 4;
    if (klen > 0) {
        memcpy(q, key, (size_t)klen);
        q += klen;
    }
    st_put_be32(q, (uint32_t)vlen);
    q += 4;
    if (vlen > 0)
        memcpy(q, val, (size_t)vlen);
    st_put_be32(m, (uint32_t)crc32(0L, m + 4, (uInt)(size - 4)));
    return 0;
}

/* Whether out, at `len` bytes, is past the limit with something before the unit that began
 * at `unit`. */
static bool down_over(const down_t *d, size_t unit, size_t len)
{
    return unit > d->start && (int64_t)(len - d->start) > d->o->limit;
}

static int down_record(void *arg, const st_batch_record_t *rec)
{
    down_t *d = arg;
    if (rec->offset < d->o->fetch_offset)
        return 0;
    int8_t magic = d->o->magic;
    int64_t ts = d->log_time ? d->log_ts : rec->timestamp;
    int attr = magic == 1 && d->log_time ? ST_MSGCONV_ATTR_LOG_TIME : 0;
    int64_t off = d->inner && magic == 1 ? rec->offset - d->inner_base : rec->offset;
    size_t unit = d->dst->len;
    int rc = down_message(d->dst, magic, off, attr, ts, rec->key, rec->key_len, rec->value,
                          rec->value_len);
    if (rc)
        return rc;
    if (!d->inner && down_over(d, unit, d->dst->len)) {
        d->dst->len = unit; /* not this one: the output is full */
        d->stop = true;
        return DOWN_STOP;
    }
    if (ts > d->max_ts)
        d->max_ts = ts;
    d->last_offset = rec->offset;
    d->records++;
    return 0;
}

/* One compressed batch as one wrapper message appended to out. */
static int down_wrapper(down_t *d, const uint8_t *batch, const st_batch_hdr_t *h, st_buf_t *out)
{
    st_buf_t inner;
    st_buf_init(&inner);
    int64_t records = d->records;
    d->dst = &inner;
    d->inner = true;
    d->inner_base = h->base_offset;
    int rc = st_batch_walk(batch, (size_t)st_batch_size(h), d->o->max_out, down_record, d);
    d->dst = out;
    d->inner = false;
    if (rc || d->records == records) {
        st_buf_fini(&inner);
        return rc;
    }
    int codec = st_batch_compression(h);
    int8_t magic = d->o->magic;
    st_buf_t z;
    st_buf_init(&z);
    int framing = codec == ST_CODEC_SNAPPY ? ST_CODEC_FRAMING_XERIAL : ST_CODEC_FRAMING_PLAIN;
    rc = st_codec_compress(codec, framing, inner.data, inner.len, &z);
    st_buf_fini(&inner);
    if (rc == 0 && z.len > INT32_MAX)
        rc = ST_E_TOO_LARGE;
    if (rc == 0 && codec == ST_CODEC_LZ4 && magic == 0)
        lz4_set_hc(z.data, z.len, true);
    size_t unit = out->len;
    int attr = codec | (magic == 1 && d->log_time ? ST_MSGCONV_ATTR_LOG_TIME : 0);
    /* the wrapper's offset is its last inner message's (magic 1 consumers count back from it) */
    if (rc == 0)
        rc = down_message(out, magic, d->last_offset, attr, d->log_time ? d->log_ts : d->max_ts,
                          NULL, -1, z.data, (int32_t)z.len);
    st_buf_fini(&z);
    if (rc == 0 && down_over(d, unit, out->len)) {
        out->len = unit;
        d->records = records;
        d->stop = true;
    }
    return rc;
}

int st_msgconv_down(const uint8_t *in, size_t n, const st_msgconv_down_opts_t *o, st_buf_t *out,
                    st_msgconv_down_res_t *res)
{
    down_t d = {.o = o, .dst = out, .start = out->len};
    memset(res, 0, sizeof *res);
    res->next_offset = o->fetch_offset;
    int rc = 0;
    while (n >= ST_BATCH_HEADER_SIZE && !d.stop) {
        st_batch_hdr_t h;
        if (st_batch_parse_hdr(in, n, &h) < 0 || st_batch_size(&h) > (int64_t)n)
            break; /* a partial batch ends a read */
        size_t size = (size_t)st_batch_size(&h);
        if (st_batch_check(in, size, &h) < 0) {
            if (out->len == d.start)
                rc = ST_E_CORRUPT;
            d.stop = true;
            break;
        }
        const uint8_t *batch = in;
        in += size;
        n -= size;
        if ((h.attributes & ST_BATCH_ATTR_CONTROL) || h.records_count == 0 ||
            st_batch_last_offset(&h) < o->fetch_offset)
            continue;
        int codec = st_batch_compression(&h);
        if (codec == ST_CODEC_ZSTD) {
            if (out->len == d.start)
                rc = ST_E_UNSUPPORTED;
            d.stop = true;
            break;
        }
        d.log_time = (h.attributes & ST_BATCH_ATTR_LOG_APPEND_TIME) != 0;
        d.log_ts = h.max_timestamp;
        d.max_ts = -1;
        int64_t before = d.records;
        if (codec == ST_CODEC_NONE) {
            rc = st_batch_walk(batch, size, o->max_out, down_record, &d);
            if (rc == DOWN_STOP)
                rc = 0;
        } else {
            rc = down_wrapper(&d, batch, &h, out);
        }
        if (rc)
            break;
        if (d.records > before)
            res->batches++;
        if (o->deadline_ns && out->len > d.start && st_mono_ns() >= o->deadline_ns) {
            d.stop = n >= ST_BATCH_HEADER_SIZE; /* more batches were there */
            break;
        }
    }
    if (rc) {
        out->len = d.start;
        return rc < 0 ? rc : ST_E_CORRUPT;
    }
    if (o->cap >= 0 && (int64_t)(out->len - d.start) > o->cap) {
        out->len = d.start + (size_t)o->cap;
        d.stop = true;
    }
    res->records = d.records;
    res->cut = d.stop;
    if (d.records > 0)
        res->next_offset = d.last_offset + 1;
    return 0;
}
