/* Unit tests for base/: CRC-32C vectors, varints, buffers, arenas, errors. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/crc32c.h"
#include "base/err.h"
#include "base/varint.h"

/* RFC 3720 (iSCSI) appendix B.4 test vectors, and the classic "123456789" check value. */
static void test_crc32c_vectors(void **state)
{
    (void)state;
    uint8_t buf[48];
    assert_int_equal(st_crc32c(0, "123456789", 9), 0xe3069283);
    memset(buf, 0, 32);
    assert_int_equal(st_crc32c(0, buf, 32), 0x8a9136aa);
    memset(buf, 0xff, 32);
    assert_int_equal(st_crc32c(0, buf, 32), 0x62a8ab43);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    assert_int_equal(st_crc32c(0, buf, 32), 0x46dd794e);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)(31 - i);
    assert_int_equal(st_crc32c(0, buf, 32), 0x113fdb5c);
    static const uint8_t iscsi[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
                                      0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
                                      0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                      0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    assert_int_equal(st_crc32c(0, iscsi, 48), 0xd9963a56);
    assert_int_equal(st_crc32c_sw(0, iscsi, 48), 0xd9963a56);
}

/* Hardware and table paths agree at every length and alignment, and chaining works. */
static void test_crc32c_paths_agree(void **state)
{
    (void)state;
    uint8_t data[1031];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 131 + 7);
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof data; n += 37)
            assert_int_equal(st_crc32c(0, data + off, n), st_crc32c_sw(0, data + off, n));
    uint32_t whole = st_crc32c(0, data, sizeof data);
    uint32_t part = st_crc32c(st_crc32c(0, data, 500), data + 500, sizeof data - 500);
    assert_int_equal(whole, part);
}

/* The three-way interleaved path (buffers of 768 bytes and more) agrees with the table path
 * at every length around its block boundaries and for large buffers, from any start value. */
static void test_crc32c_three_way(void **state)
{
    (void)state;
    static uint8_t big[70000];
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < sizeof big; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        big[i] = (uint8_t)x;
    }
    for (size_t n = 700; n < 2400; n++)
        assert_int_equal(st_crc32c(0, big + 3, n), st_crc32c_sw(0, big + 3, n));
    for (size_t n = 4096; n <= sizeof big; n = n * 3 / 2 + 1)
        assert_int_equal(st_crc32c(0x12345678, big, n), st_crc32c_sw(0x12345678, big, n));
    assert_int_equal(st_crc32c(0, big, sizeof big), st_crc32c_sw(0, big, sizeof big));
}

static void test_uvarint_edges(void **state)
{
    (void)state;
    static const uint64_t vals[] = {
        0,         1,         127,   128,        255,
        300,       16383,     16384, UINT32_MAX, (uint64_t)UINT32_MAX + 1,
        INT64_MAX, UINT64_MAX};
    uint8_t b[ST_VARINT64_MAX];
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        int n = st_uvarint64_encode(b, vals[i]);
        assert_int_equal(n, st_uvarint64_size(vals[i]));
        uint64_t v = 0;
        assert_int_equal(st_uvarint64_decode(b, (size_t)n, &v), n);
        assert_true(v == vals[i]);
        /* Every shorter prefix is truncated, never misread. */
        for (int k = 0; k < n; k++)
            assert_int_equal(st_uvarint64_decode(b, (size_t)k, &v), ST_E_TRUNCATED);
    }
    /* 300 is the protocol reference's example: ac 02. */
    assert_int_equal(st_uvarint64_encode(b, 300), 2);
    assert_int_equal(b[0], 0xac);
    assert_int_equal(b[1], 0x02);
    /* Too long for 32 bits, and overlong 64-bit encodings, are malformed. */
    uint8_t big[11];
    memset(big, 0xff, sizeof big);
    uint32_t v32;
    uint64_t v64;
    assert_int_equal(st_uvarint32_decode(big, 5, &v32), ST_E_MALFORMED);
    assert_int_equal(st_uvarint64_decode(big, 11, &v64), ST_E_MALFORMED);
    uint8_t max32[5] = {0xff, 0xff, 0xff, 0xff, 0x0f};
    assert_int_equal(st_uvarint32_decode(max32, 5, &v32), 5);
    assert_int_equal(v32, UINT32_MAX);
    max32[4] = 0x1f;
    assert_int_equal(st_uvarint32_decode(max32, 5, &v32), ST_E_MALFORMED);
}

static void test_zigzag_edges(void **state)
{
    (void)state;
    static const int64_t vals[] = {0,  -1,        1,         -2,        63,       -64,
                                   64, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
    uint8_t b[ST_VARINT64_MAX];
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        int n = st_varint64_encode(b, vals[i]);
        int64_t v;
        assert_int_equal(st_varint64_decode(b, (size_t)n, &v), n);
        assert_true(v == vals[i]);
        if (vals[i] >= INT32_MIN && vals[i] <= INT32_MAX) {
            int32_t v32;
            int m = st_varint32_encode(b, (int32_t)vals[i]);
            assert_int_equal(m, n);
            assert_int_equal(st_varint32_decode(b, (size_t)m, &v32), m);
            assert_int_equal(v32, (int32_t)vals[i]);
        }
    }
    assert_int_equal(st_zigzag64(-1), 1);
    assert_int_equal(st_zigzag64(1), 2);
}

static void test_buf_and_arena(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    for (int i = 0; i < 10000; i++)
        assert_int_equal(st_buf_put_be32(&b, (uint32_t)i), 0);
    assert_int_equal(b.len, 40000);
    assert_int_equal(st_be32(b.data + 4 * 9999), 9999);
    st_buf_fini(&b);

    st_arena_t a;
    st_arena_init(&a, 128);
    for (int i = 0; i < 100; i++) {
        char *p = st_arena_alloc(&a, (size_t)i * 7 + 1);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        memset(p, 'x', (size_t)i * 7 + 1);
    }
    assert_string_equal(st_arena_strndup(&a, "hello!", 5), "hello");
    st_arena_fini(&a);
}

static void test_errors(void **state)
{
    (void)state;
    assert_string_equal(st_errname(ST_E_CORRUPT), "ST_E_CORRUPT");
    assert_string_equal(st_strerror(ST_E_CORRUPT), "corrupt data");
    assert_string_equal(st_errname(-EIO), "EIO");
    assert_string_equal(st_errname(0), "OK");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),   cmocka_unit_test(test_crc32c_paths_agree),
        cmocka_unit_test(test_crc32c_three_way), cmocka_unit_test(test_uvarint_edges),
        cmocka_unit_test(test_zigzag_edges),     cmocka_unit_test(test_buf_and_arena),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
