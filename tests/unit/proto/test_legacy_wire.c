/*
 * Unit tests for the generated Produce v0-2 and Fetch v0-3 codecs against bytes written by hand
 * from the protocol reference (issue 27): requests decoded and re-encoded byte for byte,
 * responses encoded to the exact layout of each version (Produce v0 has no throttle_time_ms,
 * v1 adds it last, v2 log_append_time_ms; Fetch v1 adds throttle_time_ms first, v3 max_bytes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"
#include "proto/kafka_gen.h"

static st_arena_t arena;

static int setup(void **state)
{
    (void)state;
    st_arena_init(&arena, 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    st_arena_fini(&arena);
    return 0;
}

static uint8_t *copy_of(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    assert_non_null(c);
    memcpy(c, p, n);
    return c;
}

static void check_encodes_to(const st_buf_t *b, const uint8_t *want, size_t n)
{
    assert_int_equal(b->len, n);
    assert_memory_equal(b->data, want, n);
}

/* acks -1, timeout 1000, topic "t", partition 2, records "ABCD" (opaque to the codec) */
static const uint8_t produce_req[] = {0xff, 0xff, 0,   0, 0x03, 0xe8, 0,   0,   0,  1,
                                      0,    1,    't', 0, 0,    0,    1,   0,   0,  0,
                                      2,    0,    0,   0, 4,    'A',  'B', 'C', 'D'};

static void test_produce_v0_v2_request(void **state)
{
    (void)state;
    for (int16_t v = 0; v <= 2; v++) {
        uint8_t *c = copy_of(produce_req, sizeof produce_req);
        st_kreader_t r;
        st_kreader_init(&r, c, sizeof produce_req, &arena);
        st_kp_produce_req_t p;
        assert_int_equal(st_kp_produce_req_decode(&r, v, &p), 0);
        assert_ptr_equal(r.p, r.end);
        assert_true(st_kstr_is_null(p.transactional_id)); /* absent before v3 */
        assert_int_equal(p.acks, -1);
        assert_int_equal(p.timeout_ms, 1000);
        assert_int_equal(p.topic_data_count, 1);
        assert_true(st_kstr_eq(p.topic_data[0].name, "t"));
        st_kp_produce_req_partition_data_t *pd = &p.topic_data[0].partition_data[0];
        assert_int_equal(pd->index, 2);
        assert_int_equal(pd->records.len, 4);
        assert_memory_equal(pd->records.ptr, "ABCD", 4);
        st_buf_t b;
        st_buf_init(&b);
        st_kwriter_t w;
        st_kwriter_init(&w, &b);
        assert_int_equal(st_kp_produce_req_encode(&w, v, &p), 0);
        check_encodes_to(&b, produce_req, sizeof produce_req);
        st_buf_fini(&b);
        free(c);
    }
}

static void test_produce_v0_v2_response(void **state)
{
    (void)state;
    st_kp_produce_resp_partition_response_t pr;
    st_kp_produce_resp_partition_response_init(&pr);
    pr.index = 2;
    pr.error_code = 2; /* CORRUPT_MESSAGE */
    pr.base_offset = 0x0102;
    pr.log_append_time_ms = 7;
    st_kp_produce_resp_response_t t;
    st_kp_produce_resp_response_init(&t);
    t.name = st_kstr("t");
    t.partition_responses = &pr;
    t.partition_responses_count = 1;
    st_kp_produce_resp_t resp;
    st_kp_produce_resp_init(&resp);
    resp.responses = &t;
    resp.responses_count = 1;
    resp.throttle_time_ms = 5;
    static const uint8_t head[] = {0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1, 0, 0,
                                   0, 2, 0, 2, 0, 0, 0,   0, 0, 0, 1, 2};
    static const uint8_t append_time[] = {0, 0, 0, 0, 0, 0, 0, 7};
    static const uint8_t throttle[] = {0, 0, 0, 5};
    for (int16_t v = 0; v <= 2; v++) {
        uint8_t want[64];
        size_t n = 0;
        memcpy(want, head, sizeof head);
        n += sizeof head;
        if (v >= 2) {
            memcpy(want + n, append_time, sizeof append_time);
            n += sizeof append_time;
        }
        if (v >= 1) {
            memcpy(want + n, throttle, sizeof throttle);
            n += sizeof throttle;
        }
        st_buf_t b;
        st_buf_init(&b);
        st_kwriter_t w;
        st_kwriter_init(&w, &b);
        assert_int_equal(st_kp_produce_resp_encode(&w, v, &resp), 0);
        check_encodes_to(&b, want, n);
        /* and back */
        st_kreader_t r;
        st_kreader_init(&r, b.data, b.len, &arena);
        st_kp_produce_resp_t back;
        assert_int_equal(st_kp_produce_resp_decode(&r, v, &back), 0);
        assert_ptr_equal(r.p, r.end);
        assert_int_equal(back.responses[0].partition_responses[0].log_append_time_ms,
                         v >= 2 ? 7 : -1);
        st_buf_fini(&b);
    }
}

static void test_fetch_v0_v3_request(void **state)
{
    (void)state;
    /* replica -1, max_wait 500, min_bytes 1, [v3: max_bytes 1 MiB], topic "t",
     * partition 0 at offset 9 with max 64 KiB */
    static const uint8_t v0[] = {0xff, 0xff, 0xff, 0xff, 0, 0,   0x01, 0xf4, 0, 0, 0, 1, 0,
                                 0,    0,    1,    0,    1, 't', 0,    0,    0, 1, 0, 0, 0,
                                 0,    0,    0,    0,    0, 0,   0,    0,    9, 0, 1, 0, 0};
    static const uint8_t v3[] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0x01, 0xf4, 0, 0, 0, 1, 0, 0x10, 0,
                                 0,    0,    0,    0,    1, 0, 1,    't',  0, 0, 0, 1, 0, 0,    0,
                                 0,    0,    0,    0,    0, 0, 0,    0,    9, 0, 1, 0, 0};
    for (int16_t v = 0; v <= 3; v++) {
        const uint8_t *bytes = v == 3 ? v3 : v0;
        size_t n = v == 3 ? sizeof v3 : sizeof v0;
        uint8_t *c = copy_of(bytes, n);
        st_kreader_t r;
        st_kreader_init(&r, c, n, &arena);
        st_kp_fetch_req_t f;
        assert_int_equal(st_kp_fetch_req_decode(&r, v, &f), 0);
        assert_ptr_equal(r.p, r.end);
        assert_int_equal(f.replica_id, -1);
        assert_int_equal(f.max_wait_ms, 500);
        assert_int_equal(f.min_bytes, 1);
        assert_int_equal(f.max_bytes, v == 3 ? 1 << 20 : 0x7fffffff);
        assert_int_equal(f.isolation_level, 0);
        assert_true(st_kstr_eq(f.topics[0].topic, "t"));
        assert_int_equal(f.topics[0].partitions[0].fetch_offset, 9);
        assert_int_equal(f.topics[0].partitions[0].partition_max_bytes, 65536);
        assert_int_equal(f.topics[0].partitions[0].log_start_offset, -1);
        st_buf_t b;
        st_buf_init(&b);
        st_kwriter_t w;
        st_kwriter_init(&w, &b);
        assert_int_equal(st_kp_fetch_req_encode(&w, v, &f), 0);
        check_encodes_to(&b, bytes, n);
        st_buf_fini(&b);
        free(c);
    }
}

static void test_fetch_v0_v3_response(void **state)
{
    (void)state;
    st_kp_fetch_resp_partition_t p;
    st_kp_fetch_resp_partition_init(&p);
    p.partition_index = 0;
    p.error_code = 0;
    p.high_watermark = 10;
    p.last_stable_offset = 10; /* v4+: not on the wire */
    p.records = (st_krecords_t){(const uint8_t *)"MSGS", 4, NULL};
    st_kp_fetch_resp_response_t t;
    st_kp_fetch_resp_response_init(&t);
    t.topic = st_kstr("t");
    t.partitions = &p;
    t.partitions_count = 1;
    st_kp_fetch_resp_t resp;
    st_kp_fetch_resp_init(&resp);
    resp.throttle_time_ms = 3;
    resp.responses = &t;
    resp.responses_count = 1;
    static const uint8_t body[] = {0, 0, 0, 1, 0, 1, 't', 0,  0, 0, 1, 0, 0,   0,   0,   0,  0,
                                   0, 0, 0, 0, 0, 0, 0,   10, 0, 0, 0, 4, 'M', 'S', 'G', 'S'};
    for (int16_t v = 0; v <= 3; v++) {
        uint8_t want[64];
        size_t n = 0;
        if (v >= 1) {
            static const uint8_t throttle[] = {0, 0, 0, 3};
            memcpy(want, throttle, sizeof throttle);
            n = sizeof throttle;
        }
        memcpy(want + n, body, sizeof body);
        n += sizeof body;
        st_buf_t b;
        st_buf_init(&b);
        st_kwriter_t w;
        st_kwriter_init(&w, &b);
        assert_int_equal(st_kp_fetch_resp_encode(&w, v, &resp), 0);
        check_encodes_to(&b, want, n);
        st_buf_fini(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_produce_v0_v2_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_produce_v0_v2_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_v0_v3_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_v0_v3_response, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
