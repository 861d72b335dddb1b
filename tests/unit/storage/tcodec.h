/*
 * tcodec.h — for storage tests and fuzzers: compresses bytes with the codec libraries the way
 * Kafka clients do (each variant a client's choice of format), and wraps a records area into a
 * RecordBatch v2 with a valid CRC. Header-only, like testutil.h.
 */
#ifndef ST_TEST_STORAGE_TCODEC_H
#define ST_TEST_STORAGE_TCODEC_H

#include <stdint.h>
#include <string.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "storage/codec.h"
#include "testutil.h"

enum {
    TC_GZIP,
    TC_SNAPPY_RAW,    /* librdkafka */
    TC_SNAPPY_XERIAL, /* Java clients (snappy-java framing) */
    TC_LZ4,           /* LZ4 frame, 64 KiB blocks */
    TC_LZ4_CHECKED,   /* LZ4 frame, 4 MiB blocks, content checksum, content size */
    TC_ZSTD,          /* one-shot: frame with its content size */
    TC_ZSTD_STREAM,   /* streamed in pieces: frame without a content size */
    TC_COUNT
};
static const int tc_codec[TC_COUNT] = {ST_CODEC_GZIP, ST_CODEC_SNAPPY, ST_CODEC_SNAPPY,
                                       ST_CODEC_LZ4,  ST_CODEC_LZ4,    ST_CODEC_ZSTD,
                                       ST_CODEC_ZSTD};
static const char *const tc_name[TC_COUNT] = {"gzip",        "snappy raw", "snappy xerial", "lz4",
                                              "lz4 checked", "zstd",       "zstd stream"};

static inline int tc_gzip(const uint8_t *src, size_t n, st_buf_t *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    size_t cap = deflateBound(&z, (uLong)n) + 32;
    z.next_in = (Bytef *)(uintptr_t)src;
    z.avail_in = (uInt)n;
    z.next_out = st_buf_extend(out, cap);
    z.avail_out = (uInt)cap;
    int zr = deflate(&z, Z_FINISH);
    out->len -= z.avail_out;
    deflateEnd(&z);
    return zr == Z_STREAM_END ? 0 : -1;
}

/* One raw snappy block of n bytes at src appended to out; its size in *got. */
static inline int tc_snappy_block(const uint8_t *src, size_t n, st_buf_t *out, size_t *got)
{
    size_t cap = snappy_max_compressed_length(n);
    size_t at = out->len;
    char *d = (char *)st_buf_extend(out, cap);
    *got = cap;
    int rc = snappy_compress((const char *)src, n, d, got) == SNAPPY_OK ? 0 : -1;
    out->len = at + (rc == 0 ? *got : 0);
    return rc;
}

static inline int tc_snappy_xerial(const uint8_t *src, size_t n, st_buf_t *out)
{
    static const uint8_t hdr[16] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
    const size_t block = 32 * 1024; /* snappy-java's block size */
    st_buf_append(out, hdr, sizeof hdr);
    for (size_t off = 0; off < n; off += block) {
        size_t k = n - off < block ? n - off : block, got;
        size_t at = out->len;
        st_buf_extend(out, 4);
        if (tc_snappy_block(src + off, k, out, &got) < 0)
            return -1;
        st_put_be32(out->data + at, (uint32_t)got);
    }
    return 0;
}

static inline int tc_lz4(const uint8_t *src, size_t n, st_buf_t *out, int checked)
{
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    if (checked) {
        prefs.frameInfo.blockSizeID = LZ4F_max4MB;
        prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
        prefs.frameInfo.contentSize = n;
    }
    size_t cap = LZ4F_compressFrameBound(n, &prefs);
    uint8_t *d = st_buf_extend(out, cap);
    size_t got = LZ4F_compressFrame(d, cap, src, n, &prefs);
    if (LZ4F_isError(got))
        return -1;
    out->len -= cap - got;
    return 0;
}

static inline int tc_zstd(const uint8_t *src, size_t n, st_buf_t *out)
{
    size_t cap = ZSTD_compressBound(n);
    uint8_t *d = st_buf_extend(out, cap);
    size_t got = ZSTD_compress(d, cap, src, n, 3);
    if (ZSTD_isError(got))
        return -1;
    out->len -= cap - got;
    return 0;
}

/* Streamed in 1000-byte pieces with no size given up front: the frame has no content size. */
static inline int tc_zstd_stream(const uint8_t *src, size_t n, st_buf_t *out)
{
    ZSTD_CStream *cs = ZSTD_createCStream();
    int rc = ZSTD_isError(ZSTD_initCStream(cs, 3)) ? -1 : 0;
    uint8_t piece[4096];
    for (size_t off = 0; rc == 0 && off < n;) {
        size_t k = n - off < 1000 ? n - off : 1000;
        ZSTD_inBuffer in = {src + off, k, 0};
        while (rc == 0 && in.pos < in.size) {
            ZSTD_outBuffer o = {piece, sizeof piece, 0};
            rc = ZSTD_isError(ZSTD_compressStream(cs, &o, &in)) ? -1 : 0;
            st_buf_append(out, piece, o.pos);
        }
        off += k;
    }
    size_t left = 1;
    while (rc == 0 && left > 0) {
        ZSTD_outBuffer o = {piece, sizeof piece, 0};
        left = ZSTD_endStream(cs, &o);
        rc = ZSTD_isError(left) ? -1 : 0;
        st_buf_append(out, piece, o.pos);
    }
    ZSTD_freeCStream(cs);
    return rc;
}

/* Appends n bytes at src compressed as variant (TC_*) to out; 0 or -1. */
static inline int tc_compress(int variant, const uint8_t *src, size_t n, st_buf_t *out)
{
    size_t got;
    switch (variant) {
    case TC_GZIP:
        return tc_gzip(src, n, out);
    case TC_SNAPPY_RAW:
        return tc_snappy_block(src, n, out, &got);
    case TC_SNAPPY_XERIAL:
        return tc_snappy_xerial(src, n, out);
    case TC_LZ4:
    case TC_LZ4_CHECKED:
        return tc_lz4(src, n, out, variant == TC_LZ4_CHECKED);
    case TC_ZSTD:
        return tc_zstd(src, n, out);
    case TC_ZSTD_STREAM:
        return tc_zstd_stream(src, n, out);
    }
    return -1;
}

/*
 * Appends a batch with compression `codec` whose records area is the n bytes at payload,
 * claiming count records (lastOffsetDelta count - 1), with a valid CRC. Returns its size.
 */
static inline size_t tc_wrap(st_buf_t *b, int codec, const uint8_t *payload, size_t n,
                             int32_t count)
{
    st_buf_t one;
    st_buf_init(&one);
    tb_batch_attr(&one, 1, 1, 1000, 'w', (int16_t)codec); /* a header to start from */
    size_t start = b->len;
    st_buf_append(b, one.data, ST_BATCH_HEADER_SIZE);
    st_buf_append(b, payload, n);
    st_buf_fini(&one);
    uint8_t *h = b->data + start;
    size_t size = b->len - start;
    st_put_be32(h + ST_BATCH_OFF_LENGTH, (uint32_t)(size - ST_BATCH_LOG_OVERHEAD));
    st_put_be32(h + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(count - 1));
    st_put_be32(h + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)count);
    tb_fix_crc(h);
    return size;
}

#endif
