/*
 * fuzz_msgconv.c — legacy MessageSet conversion (storage/msgconv.h) over arbitrary bytes.
 * Must never crash, leak, trip a sanitizer or decompress more than its bound. Whatever a
 * legacy set converts to must be a batch a producer could have sent (st_batch_validate_client
 * accepts it), and converting that batch back down to either magic and up again must give a
 * batch with the same number of records (nothing lost or invented on the way).
 *
 * Input: byte 0 = mode: bit 0 the limit is a cap too; bit 1 the top-level messages' CRCs are
 * rewritten to match (so the fuzzer gets past them); bits 2-3 a codec (1 gzip, 2 snappy, 3 lz4)
 * under which the (CRC-fixed) bytes are compressed into one wrapper message of magic bit 4, so
 * inner sets are explored too; bits 5-7 the down-conversion limit in 256-byte steps (0:
 * unbounded). Then the bytes: up-converted as a legacy set (after the above), and
 * down-converted as stored batches.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/buf.h"
#include "storage/batch.h"
#include "storage/codec.h"
#include "storage/msgconv.h"

/* 1 MiB of decompression at most per wrapper or batch. */
#define MAX_OUT (1 << 20)

static void require(int cond)
{
    if (!cond)
        abort();
}

static int64_t records_of(const st_buf_t *b)
{
    st_batch_hdr_t h;
    require(st_batch_parse_hdr(b->data, b->len, &h) == 0);
    return h.records_count;
}

/* Rewrites the CRC of each whole top-level message of the set in b. */
static void fix_crcs(st_buf_t *b)
{
    size_t pos = 0;
    while (b->len - pos >= ST_MSGCONV_LOG_OVERHEAD) {
        uint32_t sz = st_be32(b->data + pos + 8);
        if (sz < 4 || sz > b->len - pos - ST_MSGCONV_LOG_OVERHEAD)
            return;
        uint8_t *m = b->data + pos + ST_MSGCONV_LOG_OVERHEAD;
        st_put_be32(m, (uint32_t)crc32(0L, m + 4, (uInt)(sz - 4)));
        pos += ST_MSGCONV_LOG_OVERHEAD + sz;
    }
}

/* The set in b compressed with codec into one wrapper message of magic, replacing b. */
static void wrap(st_buf_t *b, int codec, int magic)
{
    st_buf_t z, w;
    st_buf_init(&z);
    st_buf_init(&w);
    if (st_codec_compress(codec, ST_CODEC_FRAMING_PLAIN, b->data, b->len, &z) == 0) {
        uint32_t size = (magic ? ST_MSGCONV_V1_HEADER : ST_MSGCONV_V0_HEADER) + (uint32_t)z.len;
        st_buf_put_be64(&w, 0);
        st_buf_put_be32(&w, size);
        st_buf_put_be32(&w, 0);
        st_buf_put_u8(&w, (uint8_t)magic);
        st_buf_put_u8(&w, (uint8_t)codec);
        if (magic)
            st_buf_put_be64(&w, 1700000000000ull);
        st_buf_put_be32(&w, UINT32_MAX); /* null key */
        st_buf_put_be32(&w, (uint32_t)z.len);
        st_buf_append(&w, z.data, z.len);
        fix_crcs(&w);
        st_buf_fini(b);
        *b = w;
    } else {
        st_buf_fini(&w);
    }
    st_buf_fini(&z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool hard = data[0] & 1;
    int codec = (data[0] >> 2) & 3;
    int64_t limit = (int64_t)(data[0] >> 5) * 256;
    st_buf_t set;
    st_buf_init(&set);
    st_buf_append(&set, data + 1, size - 1);
    if (data[0] & 2)
        fix_crcs(&set);
    if (codec)
        wrap(&set, codec, (data[0] >> 4) & 1);
    const uint8_t *p = set.data;
    size_t n = set.len;

    st_buf_t v2, down, again;
    st_buf_init(&v2);
    st_buf_init(&down);
    st_buf_init(&again);
    st_msgconv_up_info_t info;
    if (st_msgconv_up(p, n, MAX_OUT, &v2, &info) == 0) {
        st_batch_hdr_t h;
        require(st_batch_validate_client(v2.data, v2.len, 64 * MAX_OUT, &h, NULL) == 0);
        require(h.records_count == info.records);
        for (int8_t magic = 0; magic <= 1; magic++) {
            st_msgconv_down_opts_t o = {magic, 0, INT64_MAX, -1, 64 * MAX_OUT, 0};
            st_msgconv_down_res_t res;
            st_buf_clear(&down);
            st_buf_clear(&again);
            require(st_msgconv_down(v2.data, v2.len, &o, &down, &res) == 0);
            require(res.records == info.records && !res.cut);
            require(st_msgconv_up(down.data, down.len, 64 * MAX_OUT, &again, NULL) == 0);
            require(records_of(&again) == info.records);
        }
    } else {
        require(v2.len == 0 && info.why != NULL);
    }
    /* the bytes as stored batches */
    p = data + 1;
    n = size - 1;
    for (int8_t magic = 0; magic <= 1; magic++) {
        int64_t lim = limit ? limit : INT64_MAX;
        st_msgconv_down_opts_t o = {magic, 0, lim, hard ? lim : -1, MAX_OUT, 0};
        st_msgconv_down_res_t res;
        st_buf_clear(&down);
        if (st_msgconv_down(p, n, &o, &down, &res) == 0 && limit && hard)
            require((int64_t)down.len <= limit);
    }
    st_buf_fini(&v2);
    st_buf_fini(&down);
    st_buf_fini(&again);
    st_buf_fini(&set);
    return 0;
}
