/*
 * test_markers.c — the coordinator's WriteTxnMarkers request (txn/markers.h) against the bytes
 * of Kafka's WriteTxnMarkersRequest v1, and the verdict of each partition error Kafka's
 * marker channel distinguishes (done, retry, fenced), a malformed answer and one that does not
 * name the partition (retry).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "proto/kerr.h"
#include "txn/markers.h"

static void test_request_bytes(void **state)
{
    (void)state;
    st_ttp_t parts[] = {{st_kstr("a"), 0}, {st_kstr("t"), 0x0102}};
    st_tmarkers_t m = {.coordinator_epoch = 9,
                       .producer_id = 0x1122334455667788,
                       .producer_epoch = 3,
                       .commit = true,
                       .n = 2,
                       .parts = parts};
    st_buf_t b;
    st_buf_init(&b);
    st_tmarker_encode(&b, &m, 1);
    const uint8_t want[] = {2,                                              /* 1 marker */
                            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, /* producer id */
                            0,    3,                                        /* epoch */
                            1,                                              /* commit */
                            2,                                              /* 1 topic */
                            2,    't',                                      /* name */
                            2,    0,    0,    1,    2,                      /* [0x0102] */
                            0,                                              /* topic tags */
                            0,    0,    0,    9,                            /* coordinator epoch */
                            0,                                              /* marker tags */
                            0};                                             /* request tags */
    assert_false(b.oom);
    assert_int_equal(b.len, sizeof want);
    assert_memory_equal(b.data, want, sizeof want);
    st_buf_clear(&b);
    m.commit = false;
    st_tmarker_encode(&b, &m, 0);
    assert_int_equal(b.data[11], 0); /* abort */
    st_buf_fini(&b);
}

/* An answer for (pid 5, topic "t", partition 1) with error code `err`. */
static size_t answer(uint8_t *out, int64_t pid, int32_t partition, int16_t err)
{
    uint8_t f[] = {0, 0, 0,   7,             /* correlation id */
                   0,                        /* header tags */
                   2,                        /* 1 marker */
                   0, 0, 0,   0, 0, 0, 0, 0, /* producer id */
                   2, 2, 't',                /* 1 topic: "t" */
                   2, 0, 0,   0, 0, 0, 0,    /* 1 partition: index, error */
                   0, 0, 0,   0};            /* partition, topic, marker, response tags */
    f[13] = (uint8_t)pid;
    f[21] = (uint8_t)partition;
    f[22] = (uint8_t)((uint16_t)err >> 8);
    f[23] = (uint8_t)err;
    memcpy(out, f, sizeof f);
    return sizeof f;
}

static void test_verdicts(void **state)
{
    (void)state;
    uint8_t f[64];
    int16_t e;
    struct {
        int16_t err;
        int verdict;
    } cases[] = {
        {0, ST_TMARKER_DONE},
        {ST_KERR_UNKNOWN_TOPIC_OR_PARTITION, ST_TMARKER_DONE},
        {ST_KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT, ST_TMARKER_DONE},
        {ST_KERR_NOT_LEADER_OR_FOLLOWER, ST_TMARKER_RETRY},
        {ST_KERR_NOT_ENOUGH_REPLICAS, ST_TMARKER_RETRY},
        {ST_KERR_REQUEST_TIMED_OUT, ST_TMARKER_RETRY},
        {ST_KERR_TRANSACTION_COORDINATOR_FENCED, ST_TMARKER_FENCED},
        {ST_KERR_INVALID_PRODUCER_EPOCH, ST_TMARKER_FENCED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = answer(f, 5, 1, cases[i].err);
        assert_int_equal(st_tmarker_verdict(f, n, 5, st_kstr("t"), 1, &e), cases[i].verdict);
        assert_int_equal(e, cases[i].err);
    }
    /* another partition, another producer, a cut answer: not answered, so sent again */
    size_t n = answer(f, 5, 2, 0);
    assert_int_equal(st_tmarker_verdict(f, n, 5, st_kstr("t"), 1, &e), ST_TMARKER_RETRY);
    n = answer(f, 6, 1, 0);
    assert_int_equal(st_tmarker_verdict(f, n, 5, st_kstr("t"), 1, &e), ST_TMARKER_RETRY);
    n = answer(f, 5, 1, 0);
    assert_int_equal(st_tmarker_verdict(f, n - 5, 5, st_kstr("t"), 1, &e), ST_TMARKER_RETRY);
    assert_int_equal(st_tmarker_verdict(f, n, 5, st_kstr("u"), 1, &e), ST_TMARKER_RETRY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_bytes),
        cmocka_unit_test(test_verdicts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
