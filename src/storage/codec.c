/*
 * codec.c — bounded, piecewise decompression of a batch's records: gzip (zlib), snappy (raw and
 * snappy-java framing, libsnappy), lz4 (LZ4 frames, liblz4), zstd (libzstd); and one-shot
 * compression into the same formats.
 *
 * Formats and memory bounds are described in codec.h. Every call either consumes input,
 * produces output, or ends the reader: no input can make a reader loop without progress, and
 * the output is held to max_out by giving each library no more room than what is left of it
 * (plus one byte, so that passing the limit is seen rather than hidden).
 */
#include "storage/codec.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "base/buf.h"
#include "base/err.h"

/* snappy-java's stream header: magic, version, minimum compatible version. */
#define XERIAL_MAGIC_LEN  8
#define XERIAL_HEADER_LEN 16
static const uint8_t xerial_magic[XERIAL_MAGIC_LEN] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};

/* No snappy element expands its bytes more than 64 / 3 times. */
#define SNAPPY_MAX_EXPANSION 22

/* zstd's default window limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT), which Kafka's broker keeps too. */
#define ZSTD_WINDOW_LOG_MAX 27

struct st_codec_reader {
    int codec;
    const uint8_t *in; /* input not yet consumed */
    const uint8_t *in_end;
    int64_t max_out;
    int64_t produced;
    int err;   /* sticky error */
    bool done; /* the input ended cleanly */
    union {
        z_stream gz;
        LZ4F_dctx *lz4;
        ZSTD_DStream *zstd;
    } u;
    bool gz_ready;  /* u.gz was initialised (inflateEnd is due) */
    bool xerial;    /* snappy: framed by snappy-java */
    uint8_t *blk;   /* snappy: the current block, decompressed */
    size_t blk_cap; /* allocated */
    size_t blk_len; /* bytes in blk */
    size_t blk_pos; /* bytes of blk handed out */
    bool raw_taken; /* snappy raw: the one block was decompressed */
};

int st_codec_framing(int codec, const uint8_t *in, size_t n)
{
    if (codec == ST_CODEC_SNAPPY && n >= XERIAL_HEADER_LEN &&
        memcmp(in, xerial_magic, XERIAL_MAGIC_LEN) == 0)
        return ST_CODEC_FRAMING_XERIAL;
    return ST_CODEC_FRAMING_PLAIN;
}

static size_t in_left(const st_codec_reader_t *r)
{
    return (size_t)(r->in_end - r->in);
}

/* Points r, its codec's state fresh, at the n bytes at in. */
static void reader_start(st_codec_reader_t *r, const uint8_t *in, size_t n, int64_t max_out)
{
    r->in = in;
    r->in_end = in + n;
    r->max_out = max_out < 0 ? 0 : max_out;
    r->produced = 0;
    r->err = 0;
    r->done = false;
    r->xerial = st_codec_framing(r->codec, in, n) == ST_CODEC_FRAMING_XERIAL;
    if (r->xerial)
        r->in += XERIAL_HEADER_LEN;
    r->blk_len = r->blk_pos = 0;
    r->raw_taken = false;
}

int st_codec_reader_create(int codec, const uint8_t *in, size_t n, int64_t max_out,
                           st_codec_reader_t **out)
{
    *out = NULL;
    if (codec < ST_CODEC_GZIP || codec > ST_CODEC_ZSTD)
        return ST_E_INVALID;
    st_codec_reader_t *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->codec = codec;
    switch (codec) {
    case ST_CODEC_GZIP:
        /* 16 + window bits: a gzip wrapper only (not zlib's, not raw deflate). */
        if (inflateInit2(&r->u.gz, 16 + MAX_WBITS) != Z_OK)
            goto nomem;
        r->gz_ready = true;
        break;
    case ST_CODEC_SNAPPY:
        break;
    case ST_CODEC_LZ4:
        if (LZ4F_isError(LZ4F_createDecompressionContext(&r->u.lz4, LZ4F_VERSION)))
            goto nomem;
        break;
    case ST_CODEC_ZSTD:
        r->u.zstd = ZSTD_createDStream();
        if (!r->u.zstd)
            goto nomem;
        if (ZSTD_isError(
                ZSTD_DCtx_setParameter(r->u.zstd, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX)))
            goto nomem;
        break;
    }
    reader_start(r, in, n, max_out);
    *out = r;
    return 0;
nomem:
    st_codec_reader_destroy(r);
    return -ENOMEM;
}

int st_codec_reader_reset(st_codec_reader_t *r, const uint8_t *in, size_t n, int64_t max_out)
{
    switch (r->codec) {
    case ST_CODEC_GZIP:
        if (inflateReset(&r->u.gz) != Z_OK)
            return ST_E_INVALID;
        break;
    case ST_CODEC_LZ4:
        LZ4F_resetDecompressionContext(r->u.lz4);
        break;
    case ST_CODEC_ZSTD:
        /* The session only: the window limit set at creation stays. */
        if (ZSTD_isError(ZSTD_DCtx_reset(r->u.zstd, ZSTD_reset_session_only)))
            return ST_E_INVALID;
        break;
    }
    reader_start(r, in, n, max_out);
    return 0;
}

size_t st_codec_reader_memory(const st_codec_reader_t *r)
{
    size_t n = sizeof *r + r->blk_cap;
    if (r->codec == ST_CODEC_ZSTD)
        n += ZSTD_sizeof_DStream(r->u.zstd);
    return n;
}

void st_codec_reader_destroy(st_codec_reader_t *r)
{
    if (!r)
        return;
    switch (r->codec) {
    case ST_CODEC_GZIP:
        if (r->gz_ready)
            inflateEnd(&r->u.gz);
        break;
    case ST_CODEC_LZ4:
        if (r->u.lz4)
            LZ4F_freeDecompressionContext(r->u.lz4);
        break;
    case ST_CODEC_ZSTD:
        ZSTD_freeDStream(r->u.zstd);
        break;
    }
    free(r->blk);
    free(r);
}

int64_t st_codec_produced(const st_codec_reader_t *r)
{
    return r->produced;
}

/* One inflate step at a time until some output, the end of the last member, or an error. */
static int gz_read(st_codec_reader_t *r, uint8_t *buf, size_t cap)
{
    z_stream *z = &r->u.gz;
    for (;;) {
        size_t avail = in_left(r);
        z->next_in = (Bytef *)(uintptr_t)r->in;
        z->avail_in = avail > UINT_MAX ? UINT_MAX : (uInt)avail;
        z->next_out = buf;
        z->avail_out = (uInt)cap;
        int zr = inflate(z, Z_NO_FLUSH);
        size_t used = (size_t)(z->next_in - r->in);
        size_t made = cap - z->avail_out;
        r->in += used;
        if (zr == Z_STREAM_END) {
            if (in_left(r) == 0)
                r->done = true;
            else if (inflateReset(z) != Z_OK) /* another member follows */
                return ST_E_CORRUPT;
            if (made > 0 || r->done)
                return (int)made;
            continue;
        }
        if (zr == Z_MEM_ERROR)
            return -ENOMEM;
        if (zr != Z_OK && zr != Z_BUF_ERROR)
            return ST_E_CORRUPT;
        if (made > 0)
            return (int)made;
        if (used == 0) /* no progress: the input ends inside a member */
            return ST_E_CORRUPT;
    }
}

static int lz4_read(st_codec_reader_t *r, uint8_t *buf, size_t cap)
{
    for (;;) {
        size_t dst = cap, src = in_left(r);
        size_t hint = LZ4F_decompress(r->u.lz4, buf, &dst, r->in, &src, NULL);
        r->in += src;
        /* Allocation failures too: liblz4's public API does not tell them apart. */
        if (LZ4F_isError(hint))
            return ST_E_CORRUPT;
        if (hint == 0 && in_left(r) == 0) /* the last frame is complete */
            r->done = true;
        if (dst > 0 || r->done)
            return (int)dst;
        if (src == 0) /* no progress: the input ends inside a frame */
            return ST_E_CORRUPT;
    }
}

static int zstd_read(st_codec_reader_t *r, uint8_t *buf, size_t cap)
{
    for (;;) {
        ZSTD_inBuffer in = {r->in, in_left(r), 0};
        ZSTD_outBuffer out = {buf, cap, 0};
        size_t ret = ZSTD_decompressStream(r->u.zstd, &out, &in);
        r->in += in.pos;
        if (ZSTD_isError(ret)) {
            ZSTD_ErrorCode e = ZSTD_getErrorCode(ret);
            if (e == ZSTD_error_memory_allocation)
                return -ENOMEM;
            return e == ZSTD_error_frameParameter_windowTooLarge ? ST_E_TOO_LARGE : ST_E_CORRUPT;
        }
        if (ret == 0 && in_left(r) == 0) /* the last frame is complete and flushed */
            r->done = true;
        if (out.pos > 0 || r->done)
            return (int)out.pos;
        if (in.pos == 0) /* no progress: the input ends inside a frame */
            return ST_E_CORRUPT;
    }
}

/* Decompresses the raw snappy block of n bytes at p into r->blk. */
static int snappy_block(st_codec_reader_t *r, const uint8_t *p, size_t n)
{
    size_t len;
    if (snappy_uncompressed_length((const char *)p, n, &len) != SNAPPY_OK)
        return ST_E_CORRUPT;
    if (len / SNAPPY_MAX_EXPANSION > n)
        return ST_E_CORRUPT;
    if ((int64_t)len > r->max_out - r->produced)
        return ST_E_TOO_LARGE;
    if (len > r->blk_cap) {
        uint8_t *nb = realloc(r->blk, len);
        if (!nb)
            return -ENOMEM;
        r->blk = nb;
        r->blk_cap = len;
    }
    size_t got = len;
    if (len > 0 && snappy_uncompress((const char *)p, n, (char *)r->blk, &got) != SNAPPY_OK)
        return ST_E_CORRUPT;
    if (len == 0 && n != 1) /* an empty block is just its length byte */
        return ST_E_CORRUPT;
    r->blk_len = got;
    r->blk_pos = 0;
    return 0;
}

static int snappy_read(st_codec_reader_t *r, uint8_t *buf, size_t cap)
{
    while (r->blk_pos == r->blk_len) {
        int rc;
        if (!r->xerial) {
            if (r->raw_taken) {
                r->done = true;
                return 0;
            }
            r->raw_taken = true;
            rc = snappy_block(r, r->in, in_left(r));
            r->in = r->in_end;
        } else {
            if (in_left(r) == 0) {
                r->done = true;
                return 0;
            }
            if (in_left(r) < 4)
                return ST_E_CORRUPT;
            size_t n = st_be32(r->in);
            if (n > in_left(r) - 4)
                return ST_E_CORRUPT;
            rc = snappy_block(r, r->in + 4, n);
            r->in += 4 + n;
        }
        if (rc < 0)
            return rc;
    }
    size_t k = r->blk_len - r->blk_pos;
    if (k > cap)
        k = cap;
    memcpy(buf, r->blk + r->blk_pos, k);
    r->blk_pos += k;
    return (int)k;
}

int st_codec_read(st_codec_reader_t *r, uint8_t *buf, size_t cap)
{
    if (r->err)
        return r->err;
    if (r->done)
        return 0;
    if (cap == 0)
        return ST_E_INVALID;
    if (cap > INT32_MAX)
        cap = INT32_MAX;
    /* Room for one byte past the limit, so that passing it shows. */
    int64_t room = r->max_out - r->produced + 1;
    if ((int64_t)cap > room)
        cap = (size_t)room;
    int n;
    switch (r->codec) {
    case ST_CODEC_GZIP:
        n = gz_read(r, buf, cap);
        break;
    case ST_CODEC_SNAPPY:
        n = snappy_read(r, buf, cap);
        break;
    case ST_CODEC_LZ4:
        n = lz4_read(r, buf, cap);
        break;
    default:
        n = zstd_read(r, buf, cap);
        break;
    }
    if (n > 0) {
        r->produced += n;
        if (r->produced > r->max_out)
            n = ST_E_TOO_LARGE;
    }
    if (n < 0)
        r->err = n;
    return n;
}

/* ---- compression -------------------------------------------------------------------------- */

/* snappy-java's block size, and the version it writes (and needs at least) in its header. */
#define XERIAL_BLOCK   (32 * 1024)
#define XERIAL_VERSION 1

/* Kafka's default zstd level (compression.zstd.level). */
#define ZSTD_LEVEL 3

static int gz_compress(const uint8_t *in, size_t n, st_buf_t *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    /* 16 + window bits: a gzip wrapper. */
    int zr =
        deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    if (zr != Z_OK)
        return zr == Z_MEM_ERROR ? -ENOMEM : ST_E_INVALID;
    size_t cap = deflateBound(&z, (uLong)n);
    int rc = cap > UINT_MAX ? ST_E_TOO_LARGE : st_buf_reserve(out, cap);
    if (rc == 0) {
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = (uInt)n;
        z.next_out = out->data + out->len;
        z.avail_out = (uInt)cap;
        zr = deflate(&z, Z_FINISH);
        if (zr == Z_STREAM_END)
            out->len += cap - z.avail_out;
        else
            rc = zr == Z_MEM_ERROR ? -ENOMEM : ST_E_INVALID;
    }
    deflateEnd(&z);
    return rc;
}

/* Appends one raw snappy block of the n bytes at in. */
static int snappy_compress_block(const uint8_t *in, size_t n, st_buf_t *out)
{
    size_t cap = snappy_max_compressed_length(n);
    int rc = st_buf_reserve(out, cap);
    if (rc < 0)
        return rc;
    size_t got = cap;
    if (snappy_compress((const char *)in, n, (char *)out->data + out->len, &got) != SNAPPY_OK)
        return ST_E_INVALID;
    out->len += got;
    return 0;
}

static int xerial_compress(const uint8_t *in, size_t n, st_buf_t *out)
{
    uint8_t hdr[XERIAL_HEADER_LEN];
    memcpy(hdr, xerial_magic, XERIAL_MAGIC_LEN);
    st_put_be32(hdr + 8, XERIAL_VERSION);
    st_put_be32(hdr + 12, XERIAL_VERSION);
    int rc = st_buf_append(out, hdr, sizeof hdr);
    for (size_t off = 0; rc == 0 && off < n; off += XERIAL_BLOCK) {
        size_t k = n - off < XERIAL_BLOCK ? n - off : XERIAL_BLOCK;
        size_t at = out->len;
        if ((rc = st_buf_append(out, hdr, 4)) == 0 &&
            (rc = snappy_compress_block(in + off, k, out)) == 0)
            st_put_be32(out->data + at, (uint32_t)(out->len - at - 4));
    }
    return rc;
}

static int lz4_compress(const uint8_t *in, size_t n, st_buf_t *out)
{
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    size_t cap = LZ4F_compressFrameBound(n, &prefs);
    int rc = st_buf_reserve(out, cap);
    if (rc < 0)
        return rc;
    size_t got = LZ4F_compressFrame(out->data + out->len, cap, in, n, &prefs);
    if (LZ4F_isError(got)) /* allocation failures too: liblz4 does not tell them apart */
        return -ENOMEM;
    out->len += got;
    return 0;
}

static int zstd_compress(const uint8_t *in, size_t n, st_buf_t *out)
{
    size_t cap = ZSTD_compressBound(n);
    int rc = st_buf_reserve(out, cap);
    if (rc < 0)
        return rc;
    size_t got = ZSTD_compress(out->data + out->len, cap, in, n, ZSTD_LEVEL);
    if (ZSTD_isError(got))
        return ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation ? -ENOMEM : ST_E_INVALID;
    out->len += got;
    return 0;
}

int st_codec_compress(int codec, int framing, const uint8_t *in, size_t n, st_buf_t *out)
{
    if (codec < ST_CODEC_GZIP || codec > ST_CODEC_ZSTD)
        return ST_E_INVALID;
    if (n > INT32_MAX)
        return ST_E_TOO_LARGE;
    size_t start = out->len;
    int rc;
    switch (codec) {
    case ST_CODEC_GZIP:
        rc = gz_compress(in, n, out);
        break;
    case ST_CODEC_SNAPPY:
        rc = framing == ST_CODEC_FRAMING_XERIAL ? xerial_compress(in, n, out)
                                                : snappy_compress_block(in, n, out);
        break;
    case ST_CODEC_LZ4:
        rc = lz4_compress(in, n, out);
        break;
    default:
        rc = zstd_compress(in, n, out);
        break;
    }
    if (rc < 0)
        out->len = start;
    return rc;
}
