/* Unit tests for storage/batch: header parse, CRC, client validation, record walk, meta codecs. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "storage/meta.h"
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

    /* A claimed-compressed batch is stored as is: records are not walked. */
    st_buf_init(&b);
    n = tb_batch_attr(&b, 2, 5, 0, 'c', 3);
    assert_int_equal(st_batch_validate_client(b.data, n, MAXB, &h, &v), 0);
    st_batch_iter_t it;
    assert_int_equal(st_batch_iter_init(&it, b.data, n), ST_E_UNSUPPORTED);
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
        cmocka_unit_test(test_log_append_time_rewrites_crc),
        cmocka_unit_test(test_meta_codecs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
