/*
 * Unit tests for storage/batch and storage/codec: header parse, CRC, client validation (records
 * decompressed with every codec as clients compress them, garbage, truncation, counts, bombs),
 * record walk, walking and filtering any batch for log compaction (every codec, recompression,
 * framing, producer fields, rebuilt batches through st_batch_check, errors, bombs), meta
 * codecs.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "base/err.h"
#include "storage/codec.h"
#include "storage/meta.h"
#include "tcodec.h"
#include "testutil.h"

#define MAXB 1048588

static void test_valid_batch(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    size_t n = tb_batch(&b, 5, 10, 1000, 'a');
    st_batch_hdr_t h;
    st_batch_verdict_t v;
    assert_int_equal(st_batch_validate_client(b.data, b.len, MAXB, &h, &v), 0);
    assert_int_equal(st_batch_size(&h), (int64_t)n);
    assert_int_equal(h.records_count, 5);
    assert_int_equal(h.last_offset_delta, 4);
    assert_int_equal(h.max_timestamp, 1004);
    assert_int_equal(st_batch_check(b.data, b.len, &h), 0);

    st_batch_iter_t it;
    st_batch_record_t r;
    assert_int_equal(st_batch_iter_init(&it, b.data, b.len), 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(st_batch_iter_next(&it, &r), 1);
        assert_int_equal(r.offset, i);
        assert_int_equal(r.timestamp, 1000 + i);
        assert_int_equal(r.key_len, -1);
        assert_int_equal(r.value_len, 10);
        assert_int_equal(r.value[0], 'a' + i);
    }
    assert_int_equal(st_batch_iter_next(&it, &r), 0);
    st_buf_fini(&b);
}

static void test_invalid_batches(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    size_t n = tb_batch(&b, 3, 20, 1000, 'x');
    st_batch_hdr_t h;
    st_batch_verdict_t v;

    /* A flipped bit anywhere under the CRC. */
    for (size_t i = ST_BATCH_CRC_START; i < n; i += 7) {
        b.data[i] ^= 0x10;
        assert_int_equal(st_batch_validate_client(b.data, n, MAXB, &h, &v), ST_E_CORRUPT);
        b.data[i] ^= 0x10;
    }
    /* Truncated input, and a length running past it. */
    assert_int_equal(st_batch_validate_client(b.data, n - 1, MAXB, &h, &v), ST_E_CORRUPT);
    assert_int_equal(st_batch_validate_client(b.data, 30, MAXB, &h, &v), ST_E_CORRUPT);
    /* Length below the header. */
    st_put_be32(b.data + ST_BATCH_OFF_LENGTH, 10);
    assert_int_equal(st_batch_validate_client(b.data, n, MAXB, &h, &v), ST_E_CORRUPT);
    st_put_be32(b.data + ST_BATCH_OFF_LENGTH, (uint32_t)(n - 12));
    /* Magic. */
    b.data[ST_BATCH_OFF_MAGIC] = 1;
    assert_int_equal(st_batch_validate_client(b.data, n, MAXB, &h, &v), ST_E_UNSUPPORTED);
    b.data[ST_BATCH_OFF_MAGIC] = 2;
    /* Too large. */
    assert_int_equal(st_batch_validate_client(b.data, n, (int64_t)n - 1, &h, &v), ST_E_TOO_LARGE);
    assert_int_equal(st_batch_validate_client(b.data, n, (int64_t)n, &h, &v), 0);
    /* lastOffsetDelta + 1 != count. */
    st_put_be32(b.data + ST_BATCH_OFF_LAST_OFFSET_DELTA, 5);
    tb_fix_crc(b.data);
    assert_int_equal(st_batch_validate_client(b.data, n, MAXB, &h, &v), ST_E_MALFORMED);
    st_put_be32(b.data + ST_BATCH_OFF_LAST_OFFSET_DELTA, 2);
    /* Count 0. */
    st_put_be32(b.data + ST_BATCH_OFF_RECORDS_COUNT, 0);
    tb_fix_crc(b.data);
    assert_int_equal(st_batch_validate_client(b.data, n, MAXB, &h, &v), ST_E_MALFORMED);
    st_put_be32(b.data + ST_BATCH_OFF_RECORDS_COUNT, 3);
    /* Control bit from a client. */
    st_put_be16(b.data + ST_BATCH_OFF_ATTRIBUTES, ST_BATCH_ATTR_CONTROL);
    tb_fix_crc(b.data);
    assert_int_equal(st_batch_validate_client(b.data, n, MAXB, &h, &v), ST_E_MALFORMED);
    assert_string_equal(v.why, "control batch from a client");
    st_put_be16(b.data + ST_BATCH_OFF_ATTRIBUTES, 0);
    /* Records that do not walk to the end (valid CRC). */
    b.data[ST_BATCH_HEADER_SIZE] = 0x7f;
    tb_fix_crc(b.data);
    assert_int_equal(st_batch_validate_client(b.data, n, MAXB, &h, &v), ST_E_CORRUPT);
    st_buf_fini(&b);

    /* A batch whose header claims lz4 over uncompressed records: they do not decompress. */
    st_buf_init(&b);
    n = tb_batch_attr(&b, 2, 5, 0, 'c', ST_CODEC_LZ4);
    assert_int_equal(st_batch_validate_client(b.data, n, MAXB, &h, &v), ST_E_CORRUPT);
    assert_string_equal(v.why, "compressed records do not decompress");
    st_buf_fini(&b);
}

/* ---- compressed batches ------------------------------------------------------------------ */

/* Compresses n bytes at src as variant (TC_*) into out. */
static void compress_as(int variant, const uint8_t *src, size_t n, st_buf_t *out)
{
    assert_int_equal(tc_compress(variant, src, n, out), 0);
}

/* The records area of a valid uncompressed batch of count records of vlen-byte values. */
static void records_of(st_buf_t *out, int32_t count, size_t vlen)
{
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, count, vlen, 1000, 'a');
    st_buf_append(out, b.data + ST_BATCH_HEADER_SIZE, b.len - ST_BATCH_HEADER_SIZE);
    st_buf_fini(&b);
}

/* Appends a batch of variant holding count real records, claiming `claim` records. */
static size_t compressed_batch(st_buf_t *b, int variant, int32_t count, size_t vlen, int32_t claim)
{
    st_buf_t raw, z;
    st_buf_init(&raw);
    st_buf_init(&z);
    records_of(&raw, count, vlen);
    compress_as(variant, raw.data, raw.len, &z);
    size_t n = tc_wrap(b, tc_codec[variant], z.data, z.len, claim);
    st_buf_fini(&raw);
    st_buf_fini(&z);
    return n;
}

static int validate(const st_buf_t *b, int64_t max_bytes, st_batch_verdict_t *v)
{
    st_batch_hdr_t h;
    memset(v, 0, sizeof *v);
    return st_batch_validate_client(b->data, b->len, max_bytes, &h, v);
}

static void test_compressed_batches_accepted(void **state)
{
    (void)state;
    /* Small; many records across several 64 KiB windows (varints split by refills); values
     * larger than a window. */
    static const struct {
        int32_t count;
        size_t vlen;
    } shapes[] = {{1, 0}, {5, 10}, {3000, 50}, {2, 300 * 1000}};
    for (int var = 0; var < TC_COUNT; var++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            st_buf_t b;
            st_buf_init(&b);
            compressed_batch(&b, var, shapes[s].count, shapes[s].vlen, shapes[s].count);
            st_batch_verdict_t v;
            int rc = validate(&b, MAXB, &v);
            if (rc != 0)
                fail_msg("%s, %d records of %zu bytes: %s (%s)", tc_name[var], shapes[s].count,
                         shapes[s].vlen, st_errname(rc), v.why);
            st_batch_iter_t it;
            assert_int_equal(st_batch_iter_init(&it, b.data, b.len), ST_E_UNSUPPORTED);
            st_buf_fini(&b);
        }
}

static void expect(const st_buf_t *b, int64_t max_bytes, int err, const char *why, const char *what)
{
    st_batch_verdict_t v;
    int rc = validate(b, max_bytes, &v);
    if (rc != err || (why && strcmp(v.why, why) != 0))
        fail_msg("%s: got %s (%s), want %s (%s)", what, st_errname(rc), v.why ? v.why : "",
                 st_errname(err), why ? why : "any reason");
}

static void test_compressed_garbage_refused(void **state)
{
    (void)state;
    uint8_t junk[700];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (uint8_t)(x >> 16);
    }
    char what[96];
    for (int codec = ST_CODEC_GZIP; codec <= ST_CODEC_ZSTD; codec++) {
        st_buf_t b;
        st_buf_init(&b);
        tc_wrap(&b, codec, junk, sizeof junk, 1);
        snprintf(what, sizeof what, "garbage under codec %d", codec);
        expect(&b, MAXB, ST_E_CORRUPT, "compressed records do not decompress", what);
        st_buf_clear(&b);
        tc_wrap(&b, codec, junk, 0, 1);
        snprintf(what, sizeof what, "nothing under codec %d", codec);
        expect(&b, MAXB, ST_E_CORRUPT, "compressed records do not decompress", what);
        st_buf_fini(&b);
    }
    /* A raw snappy block claiming 2 GiB from a few bytes: refused before anything is
     * allocated for it (no snappy element expands more than 22 times). */
    uint8_t claim[8];
    int k = st_uvarint32_encode(claim, 1u << 31);
    claim[k++] = 0;
    st_buf_t b;
    st_buf_init(&b);
    tc_wrap(&b, ST_CODEC_SNAPPY, claim, (size_t)k, 1);
    expect(&b, MAXB, ST_E_CORRUPT, "compressed records do not decompress", "snappy 2 GiB claim");
    st_buf_fini(&b);
}

static void test_compressed_truncated_refused(void **state)
{
    (void)state;
    char what[96];
    for (int var = 0; var < TC_COUNT; var++) {
        st_buf_t raw, z;
        st_buf_init(&raw);
        st_buf_init(&z);
        records_of(&raw, 50, 40);
        compress_as(var, raw.data, raw.len, &z);
        /* Cut inside the stream, and just before its end (trailers, checksums, last block). */
        size_t cuts[] = {z.len / 2, z.len - 1};
        for (int c = 0; c < 2; c++) {
            st_buf_t b;
            st_buf_init(&b);
            tc_wrap(&b, tc_codec[var], z.data, cuts[c], 50);
            snprintf(what, sizeof what, "%s cut to %zu of %zu", tc_name[var], cuts[c], z.len);
            expect(&b, MAXB, ST_E_CORRUPT, NULL, what);
            st_buf_fini(&b);
        }
        /* Bytes after the stream that start no frame. */
        st_buf_t b;
        st_buf_init(&b);
        st_buf_append(&z, "\x07\x07\x07\x07\x07\x07\x07\x07", 8);
        tc_wrap(&b, tc_codec[var], z.data, z.len, 50);
        snprintf(what, sizeof what, "%s with trailing bytes", tc_name[var]);
        expect(&b, MAXB, ST_E_CORRUPT, NULL, what);
        st_buf_fini(&b);
        st_buf_fini(&raw);
        st_buf_fini(&z);
    }
}

static void test_compressed_counts_checked(void **state)
{
    (void)state;
    char what[96];
    for (int var = 0; var < TC_COUNT; var++) {
        st_buf_t b;
        st_buf_init(&b);
        /* The case: a batch claiming 2^31 - 1 records holding one. */
        compressed_batch(&b, var, 1, 10, INT32_MAX);
        snprintf(what, sizeof what, "%s claiming 2^31-1", tc_name[var]);
        expect(&b, MAXB, ST_E_MALFORMED, "record count differs from the records", what);
        st_buf_clear(&b);
        compressed_batch(&b, var, 5, 10, 6);
        snprintf(what, sizeof what, "%s, 5 records claiming 6", tc_name[var]);
        expect(&b, MAXB, ST_E_MALFORMED, "record count differs from the records", what);
        st_buf_clear(&b);
        compressed_batch(&b, var, 5, 10, 4);
        snprintf(what, sizeof what, "%s, 5 records claiming 4", tc_name[var]);
        expect(&b, MAXB, ST_E_MALFORMED, "more records than recordsCount", what);
        st_buf_fini(&b);
    }
    /* Offset deltas 0, 2 inside a gzip batch; then a record that does not parse. */
    st_buf_t raw, z, b;
    st_buf_init(&raw);
    st_buf_init(&z);
    st_buf_init(&b);
    tb_record(&raw, 0, 0, 5, 'd');
    tb_record(&raw, 2, 1, 5, 'e');
    compress_as(TC_GZIP, raw.data, raw.len, &z);
    tc_wrap(&b, ST_CODEC_GZIP, z.data, z.len, 2);
    expect(&b, MAXB, ST_E_MALFORMED, "record offset deltas not 0..n-1", "gzip deltas 0, 2");
    st_buf_clear(&raw);
    st_buf_clear(&z);
    st_buf_clear(&b);
    tb_record(&raw, 0, 0, 5, 'd');
    raw.data[0] = 0x7f; /* record length -64 */
    compress_as(TC_ZSTD, raw.data, raw.len, &z);
    tc_wrap(&b, ST_CODEC_ZSTD, z.data, z.len, 1);
    expect(&b, MAXB, ST_E_CORRUPT, "records do not parse", "zstd record not parsing");
    st_buf_fini(&raw);
    st_buf_fini(&z);
    st_buf_fini(&b);
}

static void test_decompression_bomb_refused(void **state)
{
    (void)state;
    /* One record of 8 MiB of zeros compresses to a few KiB; with max.message.bytes at 64 KiB
     * the records may decompress to 4 MiB at most. */
    const int64_t max_bytes = 64 * 1024;
    const size_t vlen = 8u << 20;
    int bombs[] = {TC_GZIP, TC_LZ4, TC_LZ4_CHECKED, TC_ZSTD, TC_ZSTD_STREAM};
    for (size_t i = 0; i < sizeof bombs / sizeof bombs[0]; i++) {
        st_buf_t raw, z, b;
        st_buf_init(&raw);
        st_buf_init(&z);
        st_buf_init(&b);
        uint8_t hdr[32];
        size_t n = 0;
        uint8_t body[32];
        size_t m = 0;
        body[m++] = 0;
        m += (size_t)st_varint64_encode(body + m, 0);
        m += (size_t)st_varint32_encode(body + m, 0);
        m += (size_t)st_varint32_encode(body + m, -1);
        m += (size_t)st_varint32_encode(body + m, (int32_t)vlen);
        n += (size_t)st_varint32_encode(hdr, (int32_t)(m + vlen + 1));
        st_buf_append(&raw, hdr, n);
        st_buf_append(&raw, body, m);
        memset(st_buf_extend(&raw, vlen), 0, vlen);
        st_buf_append(&raw, "", 1); /* no headers */
        compress_as(bombs[i], raw.data, raw.len, &z);
        assert_true(z.len < (size_t)max_bytes - ST_BATCH_HEADER_SIZE);
        tc_wrap(&b, tc_codec[bombs[i]], z.data, z.len, 1);
        expect(&b, max_bytes, ST_E_TOO_LARGE,
               "records decompress to more than 64 x max.message.bytes", tc_name[bombs[i]]);
        /* The same batch is fine where max.message.bytes allows 8 MiB / 64. */
        expect(&b, (int64_t)(raw.len / ST_BATCH_INFLATE_FACTOR) + 1, 0, NULL, tc_name[bombs[i]]);
        st_buf_fini(&raw);
        st_buf_fini(&z);
        st_buf_fini(&b);
    }
}

static void test_codec_reader_bounds_work(void **state)
{
    (void)state;
    /* A reader stops one byte past max_out: the work is bounded whatever the input claims. */
    size_t n = 4u << 20;
    uint8_t *zeros = calloc(1, n);
    for (int var = 0; var < TC_COUNT; var++) {
        st_buf_t z;
        st_buf_init(&z);
        compress_as(var, zeros, n, &z);
        st_codec_reader_t *r;
        assert_int_equal(st_codec_reader_create(tc_codec[var], z.data, z.len, 100000, &r), 0);
        uint8_t buf[7000];
        int got, total = 0;
        while ((got = st_codec_read(r, buf, sizeof buf)) > 0)
            total += got;
        assert_int_equal(got, ST_E_TOO_LARGE);
        assert_int_equal(st_codec_read(r, buf, sizeof buf), ST_E_TOO_LARGE); /* sticky */
        assert_true(st_codec_produced(r) <= 100001);
        assert_true(total <= 100000);
        st_codec_reader_destroy(r);
        /* With room, the whole stream comes back unchanged. */
        assert_int_equal(st_codec_reader_create(tc_codec[var], z.data, z.len, (int64_t)n, &r), 0);
        size_t all = 0;
        while ((got = st_codec_read(r, buf, sizeof buf)) > 0) {
            for (int j = 0; j < got; j++)
                assert_int_equal(buf[j], 0);
            all += (size_t)got;
        }
        assert_int_equal(got, 0);
        assert_int_equal(all, n);
        st_codec_reader_destroy(r);
        st_buf_fini(&z);
    }
    free(zeros);
}

/* Reads r to its end or an error into out; returns the last st_codec_read result. */
static int read_all(st_codec_reader_t *r, st_buf_t *out)
{
    int n;
    while ((n = st_codec_read(r, st_buf_extend(out, 1000), 1000)) > 0)
        out->len -= 1000 - (size_t)n;
    out->len -= 1000;
    return n;
}

static void test_codec_reader_reset(void **state)
{
    (void)state;
    /* A reader reset after an error, or after a complete stream, reads the next stream as a
     * new reader would: the error, the output count and the limit start afresh. */
    for (int var = 0; var < TC_COUNT; var++) {
        st_buf_t raw, z, out;
        st_buf_init(&raw);
        st_buf_init(&z);
        st_buf_init(&out);
        records_of(&raw, 200, 40);
        compress_as(var, raw.data, raw.len, &z);
        st_codec_reader_t *r;
        assert_int_equal(st_codec_reader_create(tc_codec[var], z.data, z.len / 2, 1 << 20, &r), 0);
        if (read_all(r, &out) != ST_E_CORRUPT)
            fail_msg("%s: a cut stream read to its end", tc_name[var]);
        for (int round = 0; round < 2; round++) {
            st_buf_clear(&out);
            assert_int_equal(st_codec_reader_reset(r, z.data, z.len, (int64_t)raw.len), 0);
            assert_int_equal(st_codec_produced(r), 0);
            if (read_all(r, &out) != 0 || out.len != raw.len ||
                memcmp(out.data, raw.data, raw.len) != 0)
                fail_msg("%s round %d: %zu bytes back of %zu", tc_name[var], round, out.len,
                         raw.len);
            assert_int_equal(st_codec_produced(r), (int64_t)raw.len);
        }
        st_buf_clear(&out);
        assert_int_equal(st_codec_reader_reset(r, z.data, z.len, (int64_t)raw.len - 1), 0);
        assert_int_equal(read_all(r, &out), ST_E_TOO_LARGE);
        assert_true(st_codec_reader_memory(r) >= sizeof(void *));
        st_codec_reader_destroy(r);
        /* Validation keeps each thread's readers between batches: a refused batch of a codec
         * leaves nothing behind for the next batch of that codec. */
        st_buf_t b;
        st_buf_init(&b);
        tc_wrap(&b, tc_codec[var], z.data, z.len / 2, 200);
        expect(&b, MAXB, ST_E_CORRUPT, NULL, tc_name[var]);
        st_buf_clear(&b);
        tc_wrap(&b, tc_codec[var], z.data, z.len, 200);
        expect(&b, MAXB, 0, NULL, tc_name[var]);
        st_buf_fini(&b);
        st_buf_fini(&raw);
        st_buf_fini(&z);
        st_buf_fini(&out);
    }
}

static void test_uncompressed_absurd_count_refused_early(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    size_t n = tb_batch(&b, 3, 20, 1000, 'x');
    /* 3 records of 20-byte values: 83 bytes of records hold at most 11 of the smallest. */
    st_put_be32(b.data + ST_BATCH_OFF_LAST_OFFSET_DELTA, INT32_MAX - 1);
    st_put_be32(b.data + ST_BATCH_OFF_RECORDS_COUNT, INT32_MAX);
    tb_fix_crc(b.data);
    expect(&b, MAXB, ST_E_MALFORMED, "record count larger than the batch can hold",
           "2^31-1 records in 144 bytes");
    int32_t most = (int32_t)((n - ST_BATCH_HEADER_SIZE) / ST_BATCH_MIN_RECORD_SIZE);
    st_put_be32(b.data + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)most);
    st_put_be32(b.data + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)most + 1);
    tb_fix_crc(b.data);
    expect(&b, MAXB, ST_E_MALFORMED, "record count larger than the batch can hold", "most + 1");
    st_put_be32(b.data + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)most - 1);
    st_put_be32(b.data + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)most);
    tb_fix_crc(b.data);
    expect(&b, MAXB, ST_E_MALFORMED, "record count differs from the records", "most");
    /* The smallest records: exactly (size - 61) / 7 of them. */
    st_buf_clear(&b);
    n = tb_batch(&b, 9, 0, 1000, 'x');
    assert_int_equal(n, ST_BATCH_HEADER_SIZE + 9 * ST_BATCH_MIN_RECORD_SIZE);
    expect(&b, MAXB, 0, NULL, "9 smallest records");
    st_buf_fini(&b);
}

static void test_log_append_time_rewrites_crc(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    size_t n = tb_batch(&b, 2, 8, 5, 'q');
    st_batch_set_base_offset(b.data, 77);
    st_batch_set_leader_epoch(b.data, 3);
    st_batch_set_log_append_time(b.data, n, 123456);
    st_batch_hdr_t h;
    assert_int_equal(st_batch_check(b.data, n, &h), 0);
    assert_int_equal(h.base_offset, 77);
    assert_int_equal(h.partition_leader_epoch, 3);
    assert_int_equal(h.max_timestamp, 123456);
    assert_true(h.attributes & ST_BATCH_ATTR_LOG_APPEND_TIME);
    st_batch_iter_t it;
    st_batch_record_t r;
    st_batch_iter_init(&it, b.data, n);
    assert_int_equal(st_batch_iter_next(&it, &r), 1);
    assert_int_equal(r.timestamp, 123456);
    assert_int_equal(r.offset, 77);
    st_buf_fini(&b);
}

/* ---- walk and filter (log compaction) ---------------------------------------------------- */

/* The variants walked and filtered: uncompressed, then every client-style compression. */
#define WV_NONE  (-1)
#define WV_COUNT (TC_COUNT + 1)
static int wv_variant(int i)
{
    return i == 0 ? WV_NONE : i - 1;
}
static const char *wv_name(int v)
{
    return v == WV_NONE ? "none" : tc_name[v];
}
static int wv_codec(int v)
{
    return v == WV_NONE ? ST_CODEC_NONE : tc_codec[v];
}

#define W_BASE_OFFSET 1000
#define W_BASE_TS     5000
#define W_PID         1234
#define W_EPOCH       5
#define W_SEQ         77
#define W_LEADER      3

/* Record i's fields, all derived from i (and vlen): what the walks must give back. */
static int32_t w_key_len(int32_t i)
{
    return i % 5 == 4 ? -1 : 2;
}
static void w_key(int32_t i, uint8_t k[2])
{
    k[0] = 'k';
    k[1] = (uint8_t)('0' + i % 7);
}
static int32_t w_value_len(int32_t i, size_t vlen)
{
    return i % 6 == 5 ? -1 : (int32_t)vlen;
}
static uint8_t w_value_byte(int32_t i, size_t j)
{
    return (uint8_t)(i * 31 + (int32_t)(j % 251));
}
static int32_t w_headers(int32_t i)
{
    return i % 3;
}
static int64_t w_ts_delta(int32_t i)
{
    return (int64_t)i * 3;
}

/* Appends the headers of record i (header h: key "h<h>", value "v<i>" or null for h == 1). */
static void w_header_bytes(st_buf_t *b, int32_t i)
{
    uint8_t t[16];
    for (int32_t h = 0; h < w_headers(i); h++) {
        int n = st_varint32_encode(t, 2);
        t[n++] = 'h';
        t[n++] = (uint8_t)('0' + h);
        st_buf_append(b, t, (size_t)n);
        if (h == 1) {
            n = st_varint32_encode(t, -1);
        } else {
            n = st_varint32_encode(t, 2);
            t[n++] = 'v';
            t[n++] = (uint8_t)('0' + i % 10);
        }
        st_buf_append(b, t, (size_t)n);
    }
}

/* Appends record i with offset delta `delta`. */
static void w_record(st_buf_t *b, int32_t i, int32_t delta, size_t vlen)
{
    st_buf_t body;
    st_buf_init(&body);
    uint8_t t[16];
    st_buf_put_u8(&body, 0);
    st_buf_append(&body, t, (size_t)st_varint64_encode(t, w_ts_delta(i)));
    st_buf_append(&body, t, (size_t)st_varint32_encode(t, delta));
    st_buf_append(&body, t, (size_t)st_varint32_encode(t, w_key_len(i)));
    if (w_key_len(i) > 0) {
        w_key(i, t);
        st_buf_append(&body, t, 2);
    }
    int32_t vl = w_value_len(i, vlen);
    st_buf_append(&body, t, (size_t)st_varint32_encode(t, vl));
    if (vl > 0) {
        uint8_t *v = st_buf_extend(&body, (size_t)vl);
        for (size_t j = 0; j < (size_t)vl; j++)
            v[j] = w_value_byte(i, j);
    }
    st_buf_append(&body, t, (size_t)st_varint32_encode(t, w_headers(i)));
    w_header_bytes(&body, i);
    st_buf_append(b, t, (size_t)st_varint32_encode(t, (int32_t)body.len));
    st_buf_append(b, body.data, body.len);
    st_buf_fini(&body);
}

/*
 * Appends a batch of variant holding the records area `recs` (compressed first unless
 * uncompressed), with the W_* header fields, lastOffsetDelta lod and recordsCount count.
 */
static size_t w_wrap(st_buf_t *b, int variant, const st_buf_t *recs, int32_t lod, int32_t count,
                     int16_t extra_attr)
{
    st_buf_t z;
    st_buf_init(&z);
    if (variant == WV_NONE)
        st_buf_append(&z, recs->data, recs->len);
    else
        compress_as(variant, recs->data, recs->len, &z);
    size_t start = b->len;
    uint8_t *h = st_buf_extend(b, ST_BATCH_HEADER_SIZE);
    st_buf_append(b, z.data, z.len);
    h = b->data + start;
    size_t size = b->len - start;
    st_put_be64(h + ST_BATCH_OFF_BASE_OFFSET, W_BASE_OFFSET);
    st_put_be32(h + ST_BATCH_OFF_LENGTH, (uint32_t)(size - ST_BATCH_LOG_OVERHEAD));
    st_put_be32(h + ST_BATCH_OFF_LEADER_EPOCH, W_LEADER);
    h[ST_BATCH_OFF_MAGIC] = 2;
    st_put_be16(h + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)(wv_codec(variant) | extra_attr));
    st_put_be32(h + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)lod);
    st_put_be64(h + ST_BATCH_OFF_BASE_TIMESTAMP, W_BASE_TS);
    st_put_be64(h + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)(W_BASE_TS + w_ts_delta(lod)));
    st_put_be64(h + ST_BATCH_OFF_PRODUCER_ID, W_PID);
    st_put_be16(h + ST_BATCH_OFF_PRODUCER_EPOCH, W_EPOCH);
    st_put_be32(h + ST_BATCH_OFF_BASE_SEQUENCE, W_SEQ);
    st_put_be32(h + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)count);
    tb_fix_crc(h);
    st_buf_fini(&z);
    return size;
}

/* A producer's batch of variant: count records 0..count-1 with values of vlen bytes. */
static size_t w_batch(st_buf_t *b, int variant, int32_t count, size_t vlen, int16_t extra_attr)
{
    st_buf_t recs;
    st_buf_init(&recs);
    for (int32_t i = 0; i < count; i++)
        w_record(&recs, i, i, vlen);
    size_t n = w_wrap(b, variant, &recs, count - 1, count, extra_attr);
    st_buf_fini(&recs);
    return n;
}

/* What a walk saw. */
typedef struct wseen {
    size_t vlen;
    int32_t n;
    int64_t offsets[4096];
    int stop_after; /* > 0: return 7 after that many records */
    st_buf_t raw;   /* every record's raw bytes, concatenated */
} wseen_t;

/* Checks rec against record (rec->offset - base) as w_record wrote it. */
static int w_check(void *arg, const st_batch_record_t *rec)
{
    wseen_t *w = arg;
    int32_t i = (int32_t)(rec->offset - W_BASE_OFFSET);
    assert_true(i >= 0);
    assert_int_equal(rec->timestamp, W_BASE_TS + w_ts_delta(i));
    assert_int_equal(rec->key_len, w_key_len(i));
    if (rec->key_len > 0) {
        uint8_t k[2];
        w_key(i, k);
        assert_memory_equal(rec->key, k, 2);
    }
    assert_int_equal(rec->value_len, w_value_len(i, w->vlen));
    for (int32_t j = 0; j < rec->value_len; j++)
        if (rec->value[j] != w_value_byte(i, (size_t)j))
            fail_msg("record %d value byte %d", i, j);
    assert_int_equal(rec->header_count, w_headers(i));
    st_buf_t hb;
    st_buf_init(&hb);
    w_header_bytes(&hb, i);
    assert_int_equal(rec->headers_len, hb.len);
    if (hb.len)
        assert_memory_equal(rec->headers, hb.data, hb.len);
    st_buf_fini(&hb);
    /* raw is the whole record: it ends with the headers, and parses as this record. */
    assert_true(rec->raw_len > rec->headers_len);
    assert_ptr_equal(rec->raw + rec->raw_len - rec->headers_len, rec->headers);
    st_buf_append(&w->raw, rec->raw, rec->raw_len);
    assert_true(w->n < 4096);
    w->offsets[w->n++] = rec->offset;
    return w->stop_after > 0 && w->n == w->stop_after ? 7 : 0;
}

static wseen_t *wseen_new(size_t vlen)
{
    wseen_t *w = calloc(1, sizeof *w);
    w->vlen = vlen;
    st_buf_init(&w->raw);
    return w;
}

static void wseen_free(wseen_t *w)
{
    st_buf_fini(&w->raw);
    free(w);
}

static const struct {
    int32_t count;
    size_t vlen;
} w_shapes[] = {{1, 0}, {12, 10}, {3000, 50}, {3, 300 * 1000}};
#define W_SHAPES (sizeof w_shapes / sizeof w_shapes[0])

static void test_walk_every_codec(void **state)
{
    (void)state;
    for (int vi = 0; vi < WV_COUNT; vi++)
        for (size_t s = 0; s < W_SHAPES; s++) {
            int var = wv_variant(vi);
            st_buf_t b;
            st_buf_init(&b);
            w_batch(&b, var, w_shapes[s].count, w_shapes[s].vlen, 0);
            st_batch_hdr_t h;
            assert_int_equal(st_batch_check(b.data, b.len, &h), 0);
            /* The batches a client sends: validation accepts them too. */
            expect(&b, 16 << 20, 0, NULL, wv_name(var));
            wseen_t *w = wseen_new(w_shapes[s].vlen);
            int rc = st_batch_walk(b.data, b.len, 64 << 20, w_check, w);
            if (rc != 0)
                fail_msg("%s, %d records: %s", wv_name(var), w_shapes[s].count, st_errname(rc));
            assert_int_equal(w->n, w_shapes[s].count);
            for (int32_t i = 0; i < w->n; i++)
                assert_int_equal(w->offsets[i], W_BASE_OFFSET + i);
            /* The raw records, concatenated, are the records area as it was compressed. */
            st_buf_t recs;
            st_buf_init(&recs);
            for (int32_t i = 0; i < w_shapes[s].count; i++)
                w_record(&recs, i, i, w_shapes[s].vlen);
            assert_int_equal(w->raw.len, recs.len);
            assert_memory_equal(w->raw.data, recs.data, recs.len);
            /* An uncompressed batch: the same records as st_batch_iter gives. */
            if (var == WV_NONE) {
                st_batch_iter_t it;
                st_batch_record_t r;
                assert_int_equal(st_batch_iter_init(&it, b.data, b.len), 0);
                size_t at = 0;
                while (st_batch_iter_next(&it, &r) == 1) {
                    assert_memory_equal(r.raw, recs.data + at, r.raw_len);
                    at += r.raw_len;
                }
                assert_int_equal(at, recs.len);
            }
            st_buf_fini(&recs);
            /* fn stops the walk: its value comes back, no record after. */
            if (w_shapes[s].count > 3) {
                wseen_free(w);
                w = wseen_new(w_shapes[s].vlen);
                w->stop_after = 3;
                assert_int_equal(st_batch_walk(b.data, b.len, 64 << 20, w_check, w), 7);
                assert_int_equal(w->n, 3);
            }
            wseen_free(w);
            st_buf_fini(&b);
        }
}

/* Which records a filter keeps. */
enum { KEEP_ODD, KEEP_EVEN, KEEP_NONE, KEEP_ALL, KEEP_LAST, KEEP_MODES };
static const char *const keep_name[KEEP_MODES] = {"odd", "even", "none", "all", "last"};

typedef struct keeper {
    int mode;
    int32_t count;
    int32_t seen;
} keeper_t;

static bool keep_fn(void *arg, const st_batch_record_t *rec)
{
    keeper_t *k = arg;
    int32_t i = (int32_t)(rec->offset - W_BASE_OFFSET);
    assert_int_equal(i, k->seen); /* every record offered, in order */
    k->seen++;
    switch (k->mode) {
    case KEEP_ODD:
        return i % 2 == 1;
    case KEEP_EVEN:
        return i % 2 == 0;
    case KEEP_NONE:
        return false;
    case KEEP_LAST:
        return i == k->count - 1;
    default:
        return true;
    }
}

static int32_t keep_count(int mode, int32_t count)
{
    switch (mode) {
    case KEEP_ODD:
        return count / 2;
    case KEEP_EVEN:
        return (count + 1) / 2;
    case KEEP_NONE:
        return 0;
    case KEEP_LAST:
        return 1;
    default:
        return count;
    }
}

/* The header fields a rebuilt batch keeps, compared with the original's. */
static void same_kept_header(const st_batch_hdr_t *a, const st_batch_hdr_t *b, bool codec_too)
{
    assert_int_equal(a->base_offset, b->base_offset);
    assert_int_equal(a->partition_leader_epoch, b->partition_leader_epoch);
    assert_int_equal(a->magic, b->magic);
    if (codec_too)
        assert_int_equal(a->attributes, b->attributes);
    else
        assert_int_equal(a->attributes & ~ST_BATCH_ATTR_COMPRESSION_MASK,
                         b->attributes & ~ST_BATCH_ATTR_COMPRESSION_MASK);
    assert_int_equal(a->last_offset_delta, b->last_offset_delta);
    assert_int_equal(a->base_timestamp, b->base_timestamp);
    assert_int_equal(a->max_timestamp, b->max_timestamp);
    assert_int_equal(a->producer_id, b->producer_id);
    assert_int_equal(a->producer_epoch, b->producer_epoch);
    assert_int_equal(a->base_sequence, b->base_sequence);
}

/* Checks the stream of a rebuilt compressed batch: its codec's format, and snappy's framing. */
static void check_stream(int variant, const uint8_t *z, size_t n)
{
    static const uint8_t gz[] = {0x1f, 0x8b}, zs[] = {0x28, 0xb5, 0x2f, 0xfd},
                         lz[] = {0x04, 0x22, 0x4d, 0x18}, xe[] = {0x82, 'S', 'N', 'A', 'P'};
    assert_true(n >= 6);
    switch (tc_codec[variant]) {
    case ST_CODEC_GZIP:
        assert_memory_equal(z, gz, sizeof gz);
        break;
    case ST_CODEC_ZSTD:
        assert_memory_equal(z, zs, sizeof zs);
        break;
    case ST_CODEC_LZ4:
        assert_memory_equal(z, lz, sizeof lz);
        assert_true(z[4] & 0x20); /* FLG: independent blocks, as Java's reader needs */
        break;
    default:
        assert_int_equal(st_codec_framing(ST_CODEC_SNAPPY, z, n), variant == TC_SNAPPY_XERIAL
                                                                      ? ST_CODEC_FRAMING_XERIAL
                                                                      : ST_CODEC_FRAMING_PLAIN);
        if (variant == TC_SNAPPY_XERIAL)
            assert_memory_equal(z, xe, sizeof xe);
        break;
    }
}

static void test_filter_every_codec(void **state)
{
    (void)state;
    for (int vi = 0; vi < WV_COUNT; vi++)
        for (size_t s = 0; s < W_SHAPES; s++)
            for (int mode = 0; mode < KEEP_MODES; mode++)
                for (int empty = 0; empty < 2; empty++) {
                    int var = wv_variant(vi);
                    int32_t count = w_shapes[s].count;
                    size_t vlen = w_shapes[s].vlen;
                    int32_t want = keep_count(mode, count);
                    if (empty && want > 0)
                        continue; /* keep_empty matters only when nothing is kept */
                    char what[128];
                    snprintf(what, sizeof what, "%s, %d records, keep %s%s", wv_name(var), count,
                             keep_name[mode], empty ? " (keep_empty)" : "");
                    st_buf_t b, out;
                    st_buf_init(&b);
                    st_buf_init(&out);
                    w_batch(&b, var, count, vlen, ST_BATCH_ATTR_TRANSACTIONAL);
                    st_batch_hdr_t oh, nh;
                    assert_int_equal(st_batch_check(b.data, b.len, &oh), 0);
                    st_buf_append(&out, "prefix", 6);
                    keeper_t k = {mode, count, 0};
                    int32_t kept = -1;
                    int rc =
                        st_batch_filter(b.data, b.len, 64 << 20, keep_fn, &k, empty, &out, &kept);
                    if (rc != 0)
                        fail_msg("%s: %s", what, st_errname(rc));
                    assert_int_equal(k.seen, count);
                    assert_int_equal(kept, want);
                    assert_memory_equal(out.data, "prefix", 6);
                    if (want == 0 && !empty) {
                        assert_int_equal(out.len, 6);
                        goto next;
                    }
                    const uint8_t *nb = out.data + 6;
                    size_t nsize = out.len - 6;
                    rc = st_batch_check(nb, nsize, &nh);
                    if (rc != 0)
                        fail_msg("%s: st_batch_check %s", what, st_errname(rc));
                    assert_int_equal(st_batch_size(&nh), (int64_t)nsize);
                    assert_int_equal(nh.records_count, want);
                    same_kept_header(&nh, &oh, want > 0);
                    if (want == 0) {
                        /* The header alone, no codec. */
                        assert_int_equal(nsize, ST_BATCH_HEADER_SIZE);
                        assert_int_equal(st_batch_compression(&nh), ST_CODEC_NONE);
                    } else if (var != WV_NONE) {
                        check_stream(var, nb + ST_BATCH_HEADER_SIZE, nsize - ST_BATCH_HEADER_SIZE);
                    }
                    /* Walks back to exactly the kept records, offsets and all. */
                    wseen_t *w = wseen_new(vlen);
                    rc = st_batch_walk(nb, nsize, 64 << 20, w_check, w);
                    if (rc != 0)
                        fail_msg("%s: walk back %s", what, st_errname(rc));
                    assert_int_equal(w->n, want);
                    st_buf_t recs;
                    st_buf_init(&recs);
                    int32_t j = 0;
                    for (int32_t i = 0; i < count; i++) {
                        k.seen = i;
                        st_batch_record_t fake = {.offset = W_BASE_OFFSET + i};
                        if (keep_fn(&k, &fake)) {
                            assert_int_equal(w->offsets[j++], W_BASE_OFFSET + i);
                            w_record(&recs, i, i, vlen);
                        }
                    }
                    /* Byte for byte as they were (deltas unchanged). */
                    assert_int_equal(w->raw.len, recs.len);
                    if (recs.len)
                        assert_memory_equal(w->raw.data, recs.data, recs.len);
                    /* Uncompressed and all kept: the very same batch. */
                    if (var == WV_NONE && mode == KEEP_ALL) {
                        assert_int_equal(nsize, b.len);
                        assert_memory_equal(nb, b.data, b.len);
                    }
                    /* A producer may not send it unless every record is still there. */
                    st_buf_t copy;
                    st_buf_init(&copy);
                    st_buf_append(&copy, nb, nsize);
                    if (want == count)
                        expect(&copy, 16 << 20, 0, NULL, what);
                    else
                        expect(&copy, 16 << 20, ST_E_MALFORMED,
                               want == 0 ? "batch holds no records"
                                         : "lastOffsetDelta + 1 != record count",
                               what);
                    st_buf_fini(&copy);
                    st_buf_fini(&recs);
                    wseen_free(w);
                next:
                    st_buf_fini(&b);
                    st_buf_fini(&out);
                }
}

static int w_count(void *arg, const st_batch_record_t *rec)
{
    (void)rec;
    (*(int32_t *)arg)++;
    return 0;
}

static bool keep_all(void *arg, const st_batch_record_t *rec)
{
    (void)arg;
    (void)rec;
    return true;
}

/* Walk and filter both give err for the batch in b; filter appends nothing. */
static void both_fail(const st_buf_t *b, int64_t max_out, int err, const char *what)
{
    int32_t n = 0;
    int rc = st_batch_walk(b->data, b->len, max_out, w_count, &n);
    if (rc != err)
        fail_msg("%s: walk %s, want %s", what, st_errname(rc), st_errname(err));
    st_buf_t out;
    st_buf_init(&out);
    st_buf_append(&out, "x", 1);
    int32_t kept = -1;
    rc = st_batch_filter(b->data, b->len, max_out, keep_all, NULL, true, &out, &kept);
    if (rc != err)
        fail_msg("%s: filter %s, want %s", what, st_errname(rc), st_errname(err));
    assert_int_equal(out.len, 1);
    assert_int_equal(kept, 0);
    st_buf_fini(&out);
}

static void test_walk_filter_bad_input(void **state)
{
    (void)state;
    char what[128];
    uint8_t junk[700];
    uint32_t x = 777;
    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (uint8_t)(x >> 16);
    }
    for (int codec = ST_CODEC_GZIP; codec <= ST_CODEC_ZSTD; codec++) {
        st_buf_t b;
        st_buf_init(&b);
        tc_wrap(&b, codec, junk, sizeof junk, 1);
        snprintf(what, sizeof what, "garbage under codec %d", codec);
        both_fail(&b, 1 << 20, ST_E_CORRUPT, what);
        st_buf_clear(&b);
        tc_wrap(&b, codec, junk, 0, 1); /* no bytes, one record claimed */
        snprintf(what, sizeof what, "nothing under codec %d claiming 1", codec);
        both_fail(&b, 1 << 20, ST_E_CORRUPT, what);
        st_buf_fini(&b);
    }
    for (int vi = 0; vi < WV_COUNT; vi++) {
        int var = wv_variant(vi);
        st_buf_t recs, b;
        st_buf_init(&recs);
        st_buf_init(&b);
        for (int32_t i = 0; i < 5; i++)
            w_record(&recs, i, i, 10);
        /* Counts that disagree with the records. */
        w_wrap(&b, var, &recs, 5, 6, 0);
        snprintf(what, sizeof what, "%s: 5 records claiming 6", wv_name(var));
        both_fail(&b, 1 << 20, ST_E_CORRUPT, what);
        st_buf_clear(&b);
        w_wrap(&b, var, &recs, 4, 4, 0);
        snprintf(what, sizeof what, "%s: 5 records claiming 4", wv_name(var));
        both_fail(&b, 1 << 20, ST_E_CORRUPT, what);
        st_buf_clear(&b);
        /* A delta past lastOffsetDelta. */
        w_wrap(&b, var, &recs, 3, 5, 0);
        snprintf(what, sizeof what, "%s: delta past lastOffsetDelta", wv_name(var));
        both_fail(&b, 1 << 20, ST_E_CORRUPT, what);
        /* Deltas that do not increase: 0, 2, 2. */
        st_buf_clear(&recs);
        st_buf_clear(&b);
        w_record(&recs, 0, 0, 10);
        w_record(&recs, 1, 2, 10);
        w_record(&recs, 2, 2, 10);
        w_wrap(&b, var, &recs, 4, 3, 0);
        snprintf(what, sizeof what, "%s: deltas 0, 2, 2", wv_name(var));
        both_fail(&b, 1 << 20, ST_E_CORRUPT, what);
        /* Gaps are fine (a compacted batch): 1, 4 in 0..4. */
        st_buf_clear(&recs);
        st_buf_clear(&b);
        w_record(&recs, 1, 1, 10);
        w_record(&recs, 4, 4, 10);
        w_wrap(&b, var, &recs, 4, 2, 0);
        int32_t n = 0;
        assert_int_equal(st_batch_walk(b.data, b.len, 1 << 20, w_count, &n), 0);
        assert_int_equal(n, 2);
        /* A record cut short: its length claims more than there is. */
        st_buf_clear(&recs);
        st_buf_clear(&b);
        w_record(&recs, 0, 0, 10);
        recs.len -= 3;
        w_wrap(&b, var, &recs, 0, 1, 0);
        snprintf(what, sizeof what, "%s: record cut short", wv_name(var));
        both_fail(&b, 1 << 20, ST_E_CORRUPT, what);
        st_buf_fini(&recs);
        st_buf_fini(&b);
    }
    /* An unknown codec, and a header that does not parse. */
    st_buf_t b;
    st_buf_init(&b);
    w_batch(&b, WV_NONE, 2, 5, 5);
    both_fail(&b, 1 << 20, ST_E_CORRUPT, "codec 5");
    st_buf_clear(&b);
    w_batch(&b, WV_NONE, 2, 5, 0);
    b.len -= 1;
    both_fail(&b, 1 << 20, ST_E_CORRUPT, "batch longer than its bytes");
    st_buf_fini(&b);
}

static void test_walk_filter_bombs(void **state)
{
    (void)state;
    /* One record of 8 MiB: with max_out 1 MiB every codec stops at ST_E_TOO_LARGE; with 16 MiB
     * it walks and filters (the record is larger than the window, which grows to hold it). */
    const size_t vlen = 8u << 20;
    for (int var = 0; var < TC_COUNT; var++) {
        st_buf_t b;
        st_buf_init(&b);
        w_batch(&b, var, 1, vlen, 0);
        assert_true(b.len < (1u << 20));
        both_fail(&b, 1 << 20, ST_E_TOO_LARGE, tc_name[var]);
        wseen_t *w = wseen_new(vlen);
        assert_int_equal(st_batch_walk(b.data, b.len, 16 << 20, w_check, w), 0);
        assert_int_equal(w->n, 1);
        wseen_free(w);
        st_buf_t out;
        st_buf_init(&out);
        int32_t kept;
        assert_int_equal(
            st_batch_filter(b.data, b.len, 16 << 20, keep_all, NULL, false, &out, &kept), 0);
        assert_int_equal(kept, 1);
        st_batch_hdr_t h;
        assert_int_equal(st_batch_check(out.data, out.len, &h), 0);
        check_stream(var, out.data + ST_BATCH_HEADER_SIZE, out.len - ST_BATCH_HEADER_SIZE);
        st_buf_fini(&out);
        st_buf_fini(&b);
    }
}

static void test_empty_compressed_header_walks(void **state)
{
    (void)state;
    /* recordsCount 0 and no record bytes: no records, whatever the codec claims. */
    for (int codec = ST_CODEC_NONE; codec <= ST_CODEC_ZSTD; codec++) {
        st_buf_t recs, b;
        st_buf_init(&recs);
        st_buf_init(&b);
        w_wrap(&b, WV_NONE, &recs, 9, 0, (int16_t)codec);
        st_batch_hdr_t h;
        assert_int_equal(st_batch_check(b.data, b.len, &h), 0);
        int32_t n = 0;
        assert_int_equal(st_batch_walk(b.data, b.len, 1 << 20, w_count, &n), 0);
        assert_int_equal(n, 0);
        st_buf_t out;
        st_buf_init(&out);
        int32_t kept = -1;
        assert_int_equal(
            st_batch_filter(b.data, b.len, 1 << 20, keep_all, NULL, false, &out, &kept), 0);
        assert_int_equal(kept, 0);
        assert_int_equal(out.len, 0);
        assert_int_equal(st_batch_filter(b.data, b.len, 1 << 20, keep_all, NULL, true, &out, &kept),
                         0);
        assert_int_equal(out.len, ST_BATCH_HEADER_SIZE);
        assert_int_equal(st_batch_check(out.data, out.len, &h), 0);
        assert_int_equal(h.records_count, 0);
        assert_int_equal(h.last_offset_delta, 9);
        /* The uncompressed iterator reads it too. */
        st_batch_iter_t it;
        st_batch_record_t r;
        assert_int_equal(st_batch_iter_init(&it, out.data, out.len), 0);
        assert_int_equal(st_batch_iter_next(&it, &r), 0);
        st_buf_fini(&out);
        st_buf_fini(&recs);
        st_buf_fini(&b);
    }
}

static void test_codec_compress_roundtrip(void **state)
{
    (void)state;
    /* What st_codec_compress writes, a reader gives back, for sizes around the block sizes. */
    size_t sizes[] = {0, 1, 1000, 32 * 1024, 32 * 1024 + 1, 70000, 300000};
    uint8_t *src = malloc(300000);
    for (size_t i = 0; i < 300000; i++)
        src[i] = (uint8_t)((i * 7) % 13 + (i / 1000));
    for (int codec = ST_CODEC_GZIP; codec <= ST_CODEC_ZSTD; codec++)
        for (int framing = 0; framing < 2; framing++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                st_buf_t z;
                st_buf_init(&z);
                st_buf_append(&z, "ab", 2);
                assert_int_equal(st_codec_compress(codec, framing, src, sizes[s], &z), 0);
                assert_int_equal(st_codec_framing(codec, z.data + 2, z.len - 2),
                                 codec == ST_CODEC_SNAPPY ? framing : ST_CODEC_FRAMING_PLAIN);
                st_codec_reader_t *r;
                assert_int_equal(st_codec_reader_create(codec, z.data + 2, z.len - 2, 1 << 20, &r),
                                 0);
                uint8_t *back = malloc(sizes[s] + 1);
                size_t got = 0;
                int n;
                while ((n = st_codec_read(r, back + got, sizes[s] + 1 - got)) > 0)
                    got += (size_t)n;
                assert_int_equal(n, 0);
                assert_int_equal(got, sizes[s]);
                if (got)
                    assert_memory_equal(back, src, got);
                free(back);
                st_codec_reader_destroy(r);
                st_buf_fini(&z);
            }
    st_buf_t z;
    st_buf_init(&z);
    assert_int_equal(st_codec_compress(0, 0, src, 10, &z), ST_E_INVALID);
    assert_int_equal(st_codec_compress(5, 0, src, 10, &z), ST_E_INVALID);
    assert_int_equal(z.len, 0);
    st_buf_fini(&z);
    free(src);
}

static void test_meta_codecs(void **state)
{
    (void)state;
    st_epoch_entry_t e[3] = {{0, 0}, {2, 15}, {7, 300}};
    st_buf_t b;
    st_buf_init(&b);
    assert_int_equal(st_meta_format_epochs(e, 3, &b), 0);
    assert_int_equal(b.len, strlen("0\n3\n0 0\n2 15\n7 300\n"));
    assert_memory_equal(b.data, "0\n3\n0 0\n2 15\n7 300\n", b.len);
    st_epoch_entry_t *out;
    int cnt;
    assert_int_equal(st_meta_parse_epochs(b.data, b.len, &out, &cnt), 0);
    assert_int_equal(cnt, 3);
    assert_int_equal(out[2].epoch, 7);
    assert_int_equal(out[2].start_offset, 300);
    free(out);
    assert_int_equal(st_meta_parse_epochs(b.data, b.len - 1, &out, &cnt), ST_E_CORRUPT);
    const char *bad = "0\n2\n3 10\n2 20\n"; /* epochs decrease */
    assert_int_equal(st_meta_parse_epochs((const uint8_t *)bad, strlen(bad), &out, &cnt),
                     ST_E_CORRUPT);
    st_buf_fini(&b);

    uint8_t id[16], back[16];
    for (int i = 0; i < 16; i++)
        id[i] = (uint8_t)(i * 17 + 3);
    char text[96];
    int n = st_meta_format_partition_metadata(id, text, sizeof text);
    assert_true(n > 0);
    assert_int_equal(n, (int)strlen("version: 0\ntopic_id: ") + 22 + 1);
    assert_int_equal(st_meta_parse_partition_metadata((uint8_t *)text, (size_t)n, back), 0);
    assert_memory_equal(id, back, 16);
    /* Kafka's Uuid for all-zero bytes is "AAAAAAAAAAAAAAAAAAAAAA". */
    memset(id, 0, 16);
    st_meta_format_partition_metadata(id, text, sizeof text);
    assert_string_equal(text, "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n");

    st_meta_ckpt_t c = {12, 34, 56}, d;
    uint8_t raw[ST_META_CKPT_SIZE];
    st_meta_encode_ckpt(&c, raw);
    assert_int_equal(st_meta_decode_ckpt(raw, sizeof raw, &d), 0);
    assert_int_equal(d.log_start_offset, 12);
    assert_int_equal(d.recovery_point, 34);
    assert_int_equal(d.clean_point, 56);
    raw[9] ^= 1;
    assert_int_equal(st_meta_decode_ckpt(raw, sizeof raw, &d), ST_E_CORRUPT);
}

/* A compacted log wants a key on every record: ST_E_NO_KEY, compressed or not, but only once
 * the batch passed every batch-level check (a corrupt keyless batch stays CORRUPT). */
static void test_validate_needs_keys(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, 3, 20, 1000, 'k'); /* tb_record writes null keys */
    st_batch_hdr_t h;
    st_batch_verdict_t v;
    assert_int_equal(st_batch_validate_produce(b.data, b.len, MAXB, false, &h, &v), 0);
    assert_int_equal(st_batch_validate_produce(b.data, b.len, MAXB, true, &h, &v), ST_E_NO_KEY);
    assert_int_equal(v.err, ST_E_NO_KEY);
    for (int variant = 0; variant < TC_COUNT; variant++) {
        st_buf_t z, c;
        st_buf_init(&z);
        st_buf_init(&c);
        assert_int_equal(
            tc_compress(variant, b.data + ST_BATCH_HEADER_SIZE, b.len - ST_BATCH_HEADER_SIZE, &z),
            0);
        tc_wrap(&c, tc_codec[variant], z.data, z.len, 3);
        assert_int_equal(st_batch_validate_produce(c.data, c.len, MAXB, false, &h, &v), 0);
        assert_int_equal(st_batch_validate_produce(c.data, c.len, MAXB, true, &h, &v), ST_E_NO_KEY);
        st_buf_fini(&z);
        st_buf_fini(&c);
    }
    b.data[b.len - 1] ^= 0xff; /* CRC no longer matches */
    assert_int_equal(st_batch_validate_produce(b.data, b.len, MAXB, true, &h, &v), ST_E_CORRUPT);
    st_buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_batch),
        cmocka_unit_test(test_validate_needs_keys),
        cmocka_unit_test(test_invalid_batches),
        cmocka_unit_test(test_compressed_batches_accepted),
        cmocka_unit_test(test_compressed_garbage_refused),
        cmocka_unit_test(test_compressed_truncated_refused),
        cmocka_unit_test(test_compressed_counts_checked),
        cmocka_unit_test(test_decompression_bomb_refused),
        cmocka_unit_test(test_codec_reader_bounds_work),
        cmocka_unit_test(test_codec_reader_reset),
        cmocka_unit_test(test_uncompressed_absurd_count_refused_early),
        cmocka_unit_test(test_log_append_time_rewrites_crc),
        cmocka_unit_test(test_walk_every_codec),
        cmocka_unit_test(test_filter_every_codec),
        cmocka_unit_test(test_walk_filter_bad_input),
        cmocka_unit_test(test_walk_filter_bombs),
        cmocka_unit_test(test_empty_compressed_header_walks),
        cmocka_unit_test(test_codec_compress_roundtrip),
        cmocka_unit_test(test_meta_codecs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
