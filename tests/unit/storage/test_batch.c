/*
 * Unit tests for storage/batch and storage/codec: header parse, CRC, client validation (records
 * decompressed with every codec as clients compress them, garbage, truncation, counts, bombs),
 * record walk, meta codecs.
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

    st_meta_ckpt_t c = {12, 34}, d;
    uint8_t raw[ST_META_CKPT_SIZE];
    st_meta_encode_ckpt(&c, raw);
    assert_int_equal(st_meta_decode_ckpt(raw, sizeof raw, &d), 0);
    assert_int_equal(d.log_start_offset, 12);
    assert_int_equal(d.recovery_point, 34);
    raw[9] ^= 1;
    assert_int_equal(st_meta_decode_ckpt(raw, sizeof raw, &d), ST_E_CORRUPT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_batch),
        cmocka_unit_test(test_invalid_batches),
        cmocka_unit_test(test_compressed_batches_accepted),
        cmocka_unit_test(test_compressed_garbage_refused),
        cmocka_unit_test(test_compressed_truncated_refused),
        cmocka_unit_test(test_compressed_counts_checked),
        cmocka_unit_test(test_decompression_bomb_refused),
        cmocka_unit_test(test_codec_reader_bounds_work),
        cmocka_unit_test(test_uncompressed_absurd_count_refused_early),
        cmocka_unit_test(test_log_append_time_rewrites_crc),
        cmocka_unit_test(test_meta_codecs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
