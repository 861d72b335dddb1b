/*
 * Unit tests for the Kafka codecs against bytes written by hand from the protocol reference:
 * headers, ApiVersions as librdkafka sends it, Metadata and Produce in classic and flexible
 * forms; defaults for absent fields; unknown tagged fields; lying lengths and counts; the
 * record splice hook (put_ext); formatting; the API table and the error-code table.
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
#include "proto/kerr.h"
#include "proto/kheader.h"

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

/* Decodes with an exact-size heap copy of the bytes (so ASan sees over-reads). */
typedef int (*decode_fn)(st_kreader_t *r, int16_t v, void *out);

static uint8_t *copy_of(const uint8_t *p, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    assert_non_null(c);
    memcpy(c, p, n);
    return c;
}

static void check_encodes_to(st_buf_t *b, const uint8_t *want, size_t n)
{
    assert_int_equal(b->len, n);
    assert_memory_equal(b->data, want, n);
}

/* ApiVersions v0 request frame body: header v1 (client_id "rdkafka"), empty body. */
static void test_apiversions_v0_request(void **state)
{
    (void)state;
    static const uint8_t frame[] = {0x00, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
                                    0x07, 'r',  'd',  'k',  'a',  'f',  'k',  'a'};
    assert_int_equal(st_kp_req_header_version(ST_KP_API_API_VERSIONS, 0), 1);
    uint8_t *c = copy_of(frame, sizeof frame);
    st_kreader_t r;
    st_kreader_init(&r, c, sizeof frame, &arena);
    st_kp_req_header_t h;
    assert_int_equal(st_kp_req_header_decode(&r, 1, &h), 0);
    assert_int_equal(h.request_api_key, 18);
    assert_int_equal(h.request_api_version, 0);
    assert_int_equal(h.correlation_id, 1);
    assert_true(st_kstr_eq(h.client_id, "rdkafka"));
    void *body;
    assert_int_equal(st_kp_req_decode_any(&r, h.request_api_key, h.request_api_version, &body), 0);
    assert_ptr_equal(r.p, r.end);

    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    assert_int_equal(st_kp_req_header_encode(&w, 1, &h), 0);
    assert_int_equal(st_kp_api_versions_req_encode(&w, 0, body), 0);
    check_encodes_to(&b, frame, sizeof frame);
    st_buf_fini(&b);
    free(c);
}

/* ApiVersions v3 request as librdkafka sends it: header v2, compact strings, tagged sections. */
static void test_apiversions_v3_request(void **state)
{
    (void)state;
    static const uint8_t frame[] = {
        0x00, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x02,                 /* key 18, v3, corr 2 */
        0x00, 0x07, 'r',  'd',  'k',  'a',  'f',  'k',  'a', 0x00,      /* client_id, no tags */
        0x0b, 'l',  'i',  'b',  'r',  'd',  'k',  'a',  'f', 'k',  'a', /* compact "librdkafka" */
        0x06, '2',  '.',  '3',  '.',  '0',                              /* compact "2.3.0" */
        0x00};                                                          /* no tagged fields */
    assert_int_equal(st_kp_req_header_version(ST_KP_API_API_VERSIONS, 3), 2);
    uint8_t *c = copy_of(frame, sizeof frame);
    st_kreader_t r;
    st_kreader_init(&r, c, sizeof frame, &arena);
    st_kp_req_header_t h;
    assert_int_equal(st_kp_req_header_decode(&r, 2, &h), 0);
    assert_int_equal(h.correlation_id, 2);
    st_kp_api_versions_req_t req;
    assert_int_equal(st_kp_api_versions_req_decode(&r, 3, &req), 0);
    assert_ptr_equal(r.p, r.end);
    assert_true(st_kstr_eq(req.client_software_name, "librdkafka"));
    assert_true(st_kstr_eq(req.client_software_version, "2.3.0"));
    /* Zero copy: the string points into the input. */
    assert_ptr_equal(req.client_software_name.ptr, (const char *)c + 19);

    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    assert_int_equal(st_kp_req_header_encode(&w, 2, &h), 0);
    assert_int_equal(st_kp_api_versions_req_encode(&w, 3, &req), 0);
    check_encodes_to(&b, frame, sizeof frame);
    st_buf_fini(&b);
    free(c);
}

/* ApiVersions v3 response: header v0 (never v1), compact array, a tagged field (tag 1). */
static void test_apiversions_v3_response(void **state)
{
    (void)state;
    static const uint8_t want[] = {0x00, 0x00, 0x00, 0x07, /* response header v0: corr 7 */
                                   0x00, 0x00,             /* error_code */
                                   0x02,                   /* api_keys: 1 element */
                                   0x00, 0x12, 0x00, 0x00, 0x00, 0x04, 0x00, /* 18, 0..4, no tags */
                                   0x00, 0x00, 0x00, 0x00,                   /* throttle_time_ms */
                                   0x01, 0x01, 0x08, 0,    0,    0,    0,
                                   0,    0,    0,    0x05}; /* 1 tag: #1, 8 bytes, epoch 5 */
    assert_int_equal(st_kp_resp_header_version(ST_KP_API_API_VERSIONS, 3), 0);
    assert_int_equal(st_kp_resp_header_version(ST_KP_API_METADATA, 9), 1);
    assert_int_equal(st_kp_resp_header_version(ST_KP_API_METADATA, 8), 0);

    st_kp_api_versions_resp_api_key_t k = {.api_key = 18, .min_version = 0, .max_version = 4};
    st_kp_api_versions_resp_t resp;
    st_kp_api_versions_resp_init(&resp);
    assert_int_equal(resp.finalized_features_epoch, -1);
    resp.api_keys = &k;
    resp.api_keys_count = 1;
    resp.finalized_features_epoch = 5;

    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    assert_int_equal(st_kp_resp_header_encode(&w, 0, &(st_kp_resp_header_t){7}), 0);
    assert_int_equal(st_kp_api_versions_resp_encode(&w, 3, &resp), 0);
    check_encodes_to(&b, want, sizeof want);

    st_kreader_t r;
    st_kreader_init(&r, want, sizeof want, &arena);
    st_kp_resp_header_t h;
    st_kp_api_versions_resp_t back;
    assert_int_equal(st_kp_resp_header_decode(&r, 0, &h), 0);
    assert_int_equal(h.correlation_id, 7);
    assert_int_equal(st_kp_api_versions_resp_decode(&r, 3, &back), 0);
    assert_ptr_equal(r.p, r.end);
    assert_int_equal(back.api_keys_count, 1);
    assert_int_equal(back.api_keys[0].max_version, 4);
    assert_int_equal(back.finalized_features_epoch, 5);
    assert_false(back.zk_migration_ready);
    assert_int_equal(back.supported_features_count, 0);
    st_buf_fini(&b);
}

/* Unknown tagged fields are skipped; known ones still decode around them. */
static void test_unknown_tags_skipped(void **state)
{
    (void)state;
    static const uint8_t body[] = {
        0x0b, 'l',  'i',  'b',  'r',  'd', 'k', 'a', 'f',
        'k',  'a',  0x06, '2',  '.',  '3', '.', '0', 0x02, /* two tagged fields */
        0x3f, 0x03, 0xaa, 0xbb, 0xcc,                      /* tag 63, 3 bytes */
        0xc8, 0x01, 0x00};                                 /* tag 200, empty */
    uint8_t *c = copy_of(body, sizeof body);
    st_kreader_t r;
    st_kreader_init(&r, c, sizeof body, &arena);
    st_kp_api_versions_req_t req;
    assert_int_equal(st_kp_api_versions_req_decode(&r, 3, &req), 0);
    assert_ptr_equal(r.p, r.end);
    assert_true(st_kstr_eq(req.client_software_version, "2.3.0"));
    free(c);

    static const uint8_t resp[] = {
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, /* error, no api_keys, throttle 0 */
        0x03,                                     /* three tags */
        0x01, 0x08, 0,    0,    0,    0,    0,
        0,    0x01, 0x00,       /* #1 finalized_features_epoch 256 */
        0x07, 0x02, 0x11, 0x22, /* #7 unknown */
        0x03, 0x01, 0x01};      /* #3 zk_migration_ready true */
    c = copy_of(resp, sizeof resp);
    st_kreader_init(&r, c, sizeof resp, &arena);
    st_kp_api_versions_resp_t out;
    assert_int_equal(st_kp_api_versions_resp_decode(&r, 3, &out), 0);
    assert_ptr_equal(r.p, r.end);
    assert_int_equal(out.finalized_features_epoch, 256);
    assert_true(out.zk_migration_ready);
    free(c);
}

/* Metadata v1 and v12 requests; v0 responses decode absent fields to their defaults. */
static void test_metadata_golden(void **state)
{
    (void)state;
    static const uint8_t v1[] = {0x00, 0x00, 0x00, 0x01, 0x00, 0x04, 't', 'e', 's', 't'};
    st_kreader_t r;
    st_kp_metadata_req_t req;
    uint8_t *c = copy_of(v1, sizeof v1);
    st_kreader_init(&r, c, sizeof v1, &arena);
    assert_int_equal(st_kp_metadata_req_decode(&r, 1, &req), 0);
    assert_ptr_equal(r.p, r.end);
    assert_int_equal(req.topics_count, 1);
    assert_true(st_kstr_eq(req.topics[0].name, "test"));
    assert_true(req.allow_auto_topic_creation); /* absent before v4: default true */
    free(c);

    static const uint8_t v12[] = {0x02, /* one topic */
                                  0,    0,   0,   0,   0,   0,    0, 0,
                                  0,    0,   0,   0,   0,   0,    0, 0, /* topic_id: zero */
                                  0x05, 't', 'e', 's', 't', 0x00,       /* name, no tags */
                                  0x01,  /* allow_auto_topic_creation */
                                  0x00,  /* include_topic_authorized */
                                  0x00}; /* no tags */
    st_kp_metadata_req_topic_t t;
    st_kp_metadata_req_topic_init(&t);
    t.name = st_kstr("test");
    st_kp_metadata_req_init(&req);
    req.topics = &t;
    req.topics_count = 1;
    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    assert_int_equal(st_kp_metadata_req_encode(&w, 12, &req), 0);
    check_encodes_to(&b, v12, sizeof v12);

    /* A null topic list ("all topics") is allowed from v1, not in v0. */
    static const uint8_t null_topics[] = {0xff, 0xff, 0xff, 0xff};
    st_kreader_init(&r, null_topics, sizeof null_topics, &arena);
    assert_int_equal(st_kp_metadata_req_decode(&r, 1, &req), 0);
    assert_int_equal(req.topics_count, -1);
    assert_null(req.topics);
    st_kreader_init(&r, null_topics, sizeof null_topics, &arena);
    assert_int_equal(st_kp_metadata_req_decode(&r, 0, &req), ST_E_MALFORMED);

    static const uint8_t resp0[] = {
        0,   0,   0,   1, /* one broker */
        0,   0,   0,   1, 0,   9,    'l',  'o', 'c', 'a', 'l', 'h',
        'o', 's', 't', 0, 0,   0x23, 0x84, 0,   0,   0,   1, /* one topic */
        0,   0,   0,   4, 't', 'e',  's',  't',              /* error 0, name */
        0,   0,   0,   1,                                    /* one partition */
        0,   0,   0,   0, 0,   0,    0,    0,   0,   1,      /* error, index 0, leader 1 */
        0,   0,   0,   1, 0,   0,    0,    1,                /* replicas [1] */
        0,   0,   0,   1, 0,   0,    0,    1};               /* isr [1] */
    c = copy_of(resp0, sizeof resp0);
    st_kreader_init(&r, c, sizeof resp0, &arena);
    st_kp_metadata_resp_t m;
    assert_int_equal(st_kp_metadata_resp_decode(&r, 0, &m), 0);
    assert_ptr_equal(r.p, r.end);
    assert_int_equal(m.brokers_count, 1);
    assert_true(st_kstr_eq(m.brokers[0].host, "localhost"));
    assert_int_equal(m.brokers[0].port, 9092);
    assert_true(st_kstr_is_null(m.brokers[0].rack));
    assert_true(st_kstr_is_null(m.cluster_id));
    assert_int_equal(m.controller_id, -1);
    assert_int_equal(m.topics[0].partitions[0].leader_id, 1);
    assert_int_equal(m.topics[0].partitions[0].leader_epoch, -1);
    assert_int_equal(m.topics[0].partitions[0].isr_nodes_count, 1);
    assert_int_equal(m.topics[0].partitions[0].isr_nodes[0], 1);
    assert_int_equal(m.topics[0].topic_authorized_operations, INT32_MIN);
    assert_int_equal(m.topics[0].partitions[0].offline_replicas_count, 0);

    /* Encoding at v0 leaves out everything v0 lacks. */
    st_buf_clear(&b);
    assert_int_equal(st_kp_metadata_resp_encode(&w, 0, &m), 0);
    check_encodes_to(&b, resp0, sizeof resp0);
    st_buf_fini(&b);
    free(c);
}

/* Produce v3: classic encoding; the record set is not copied. */
static void test_produce_v3_golden(void **state)
{
    (void)state;
    static const uint8_t body[] = {
        0xff, 0xff,                         /* transactional_id: null */
        0x00, 0x01, 0x00, 0x00, 0x75, 0x30, /* acks 1, timeout_ms 30000 */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x03, 'f',  'o',  'o',
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, /* partition 2 */
        0x00, 0x00, 0x00, 0x03, 0xaa, 0xbb, 0xcc};      /* records: 3 bytes */
    uint8_t *c = copy_of(body, sizeof body);
    st_kreader_t r;
    st_kreader_init(&r, c, sizeof body, &arena);
    st_kp_produce_req_t p;
    assert_int_equal(st_kp_produce_req_decode(&r, 3, &p), 0);
    assert_ptr_equal(r.p, r.end);
    assert_true(st_kstr_is_null(p.transactional_id));
    assert_int_equal(p.acks, 1);
    assert_int_equal(p.timeout_ms, 30000);
    assert_int_equal(p.topic_data_count, 1);
    assert_true(st_kstr_eq(p.topic_data[0].name, "foo"));
    st_kp_produce_req_partition_data_t *pd = &p.topic_data[0].partition_data[0];
    assert_int_equal(pd->index, 2);
    assert_int_equal(pd->records.len, 3);
    assert_ptr_equal(pd->records.ptr, c + sizeof body - 3);
    assert_null(pd->records.ext);
    free(c);
}

typedef struct {
    int calls;
    size_t at;
    int32_t len;
    void *ext;
} splice_t;

static int record_splice(st_kwriter_t *w, void *ext, int32_t len)
{
    splice_t *s = w->ctx;
    s->calls++;
    s->at = w->buf->len;
    s->len = len;
    s->ext = ext;
    return 0;
}

/* A Fetch response whose records carry ext: prefix written, bytes left to put_ext. */
static void test_fetch_records_ext(void **state)
{
    (void)state;
    int file_handle = 42;
    st_kp_fetch_resp_partition_t part;
    st_kp_fetch_resp_partition_init(&part);
    part.records = (st_krecords_t){NULL, 1000, &file_handle};
    st_kp_fetch_resp_response_t topic;
    st_kp_fetch_resp_response_init(&topic);
    topic.topic = st_kstr("t");
    topic.partitions = &part;
    topic.partitions_count = 1;
    st_kp_fetch_resp_t resp;
    st_kp_fetch_resp_init(&resp);
    resp.responses = &topic;
    resp.responses_count = 1;

    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    assert_int_equal(st_kp_fetch_resp_encode(&w, 12, &resp), ST_E_INVALID); /* no put_ext */

    splice_t s = {0};
    st_buf_clear(&b);
    w.put_ext = record_splice;
    w.ctx = &s;
    assert_int_equal(st_kp_fetch_resp_encode(&w, 12, &resp), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.len, 1000);
    assert_ptr_equal(s.ext, &file_handle);
    /* The compact length 1001 = 0xe9 0x07 ends the buffer at the splice point; after it only
     * the partition's, topic's and response's empty tag sections follow. */
    assert_true(s.at >= 2);
    assert_int_equal(b.data[s.at - 2], 0xe9);
    assert_int_equal(b.data[s.at - 1], 0x07);
    assert_int_equal(b.len, s.at + 3);

    /* Classic form (v11): int32 prefix. */
    st_buf_clear(&b);
    s.calls = 0;
    assert_int_equal(st_kp_fetch_resp_encode(&w, 11, &resp), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(st_be32(b.data + s.at - 4), 1000);
    assert_int_equal(b.len, s.at);
    st_buf_fini(&b);
}

/* Lengths and counts that lie are rejected without large allocations. */
static void test_lying_lengths(void **state)
{
    (void)state;
    st_arena_t a;
    st_kreader_t r;
    st_kp_metadata_req_t m;
    struct {
        const char *what;
        int16_t version;
        uint8_t bytes[16];
        size_t n;
        int want;
    } cases[] = {
        {"count 5, 3 bytes", 1, {0, 0, 0, 5, 0, 1, 'a'}, 7, ST_E_TRUNCATED},
        {"count INT32_MAX", 1, {0x7f, 0xff, 0xff, 0xff, 0, 1, 'a', 0, 1, 'b'}, 10, ST_E_TRUNCATED},
        {"count -2", 1, {0xff, 0xff, 0xff, 0xfe}, 4, ST_E_MALFORMED},
        {"compact count 2^32-1", 9, {0xff, 0xff, 0xff, 0xff, 0x0f}, 5, ST_E_MALFORMED},
        {"compact count huge", 9, {0xfe, 0xff, 0xff, 0xff, 0x07, 0, 0}, 7, ST_E_TRUNCATED},
        {"varint too long", 9, {0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 6, ST_E_MALFORMED},
        {"string 32767, 1 byte", 1, {0, 0, 0, 1, 0x7f, 0xff, 'a'}, 7, ST_E_TRUNCATED},
        {"string length -2", 1, {0, 0, 0, 1, 0xff, 0xfe}, 6, ST_E_MALFORMED},
        {"null name before v10", 1, {0, 0, 0, 1, 0xff, 0xff}, 6, ST_E_MALFORMED},
        {"empty input", 4, {0}, 0, ST_E_TRUNCATED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_arena_init(&a, 256);
        uint8_t *c = copy_of(cases[i].bytes, cases[i].n);
        st_kreader_init(&r, c, cases[i].n, &a);
        int rc = st_kp_metadata_req_decode(&r, cases[i].version, &m);
        if (rc != cases[i].want)
            fail_msg("%s: got %s want %s", cases[i].what, st_errname(rc),
                     st_errname(cases[i].want));
        assert_true(a.total <= 256);
        free(c);
        st_arena_fini(&a);
    }

    /* A tagged field whose size runs past the end; a null non-nullable compact string. */
    static const uint8_t badtag[] = {0x01, 'x', 0x01, 'y', 0x01, 0x05, 0x7f, 0x00};
    st_kp_api_versions_req_t av;
    st_kreader_init(&r, badtag, sizeof badtag, &arena);
    assert_int_equal(st_kp_api_versions_req_decode(&r, 3, &av), ST_E_TRUNCATED);
    static const uint8_t nullstr[] = {0x00, 0x01, 0x00};
    st_kreader_init(&r, nullstr, sizeof nullstr, &arena);
    assert_int_equal(st_kp_api_versions_req_decode(&r, 3, &av), ST_E_MALFORMED);

    /* Strings are limited to 32767 bytes in compact form too: 0xc1 0xb8 0x02 is 40001. */
    uint8_t *big = calloc(1, 40010);
    assert_non_null(big);
    big[0] = 0xc1;
    big[1] = 0xb8;
    big[2] = 0x02;
    st_kreader_init(&r, big, 40010, &arena);
    assert_int_equal(st_kp_api_versions_req_decode(&r, 3, &av), ST_E_MALFORMED);
    free(big);
}

/* Values the protocol cannot carry are refused on encode. */
static void test_encode_rejects_invalid(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    st_kp_metadata_req_t m;
    st_kp_metadata_req_init(&m);
    m.topics_count = -1;
    assert_int_equal(st_kp_metadata_req_encode(&w, 0, &m), ST_E_INVALID); /* null before v1 */
    st_buf_clear(&b);
    assert_int_equal(st_kp_metadata_req_encode(&w, 1, &m), 0);
    m.topics_count = 1; /* elements missing */
    assert_int_equal(st_kp_metadata_req_encode(&w, 1, &m), ST_E_INVALID);

    st_kp_metadata_req_topic_t t;
    st_kp_metadata_req_topic_init(&t);
    t.name = ST_KSTR_NULL;
    m.topics = &t;
    assert_int_equal(st_kp_metadata_req_encode(&w, 9, &m), ST_E_INVALID); /* null name < v10 */
    st_buf_clear(&b);
    assert_int_equal(st_kp_metadata_req_encode(&w, 10, &m), 0);

    char *big = calloc(1, 40000);
    assert_non_null(big);
    t.name = (st_kstr_t){big, 40000};
    assert_int_equal(st_kp_metadata_req_encode(&w, 12, &m), ST_E_INVALID);
    assert_int_equal(st_kp_metadata_req_encode(&w, 1, &m), ST_E_INVALID);
    free(big);
    st_buf_fini(&b);
}

static void test_format(void **state)
{
    (void)state;
    st_kp_metadata_req_topic_t t;
    st_kp_metadata_req_topic_init(&t);
    t.name = st_kstr("a\"b");
    st_kp_metadata_req_t m;
    st_kp_metadata_req_init(&m);
    m.topics = &t;
    m.topics_count = 1;
    st_buf_t b;
    st_buf_init(&b);
    assert_int_equal(st_kp_req_format(&b, ST_KP_API_METADATA, 1, &m), 0);
    st_buf_put_u8(&b, 0);
    assert_string_equal((char *)b.data, "{\"topics\":[{\"name\":\"a\\\"b\"}]}");
    st_buf_clear(&b);
    m.topics_count = -1;
    assert_int_equal(st_kp_req_format(&b, ST_KP_API_METADATA, 4, &m), 0);
    st_buf_put_u8(&b, 0);
    assert_string_equal((char *)b.data, "{\"topics\":null,\"allow_auto_topic_creation\":true}");
    st_buf_clear(&b);
    assert_int_equal(st_kp_req_format(&b, 999, 0, &m), ST_E_UNSUPPORTED);
    st_buf_fini(&b);
}

static void test_api_table(void **state)
{
    (void)state;
    static const struct {
        int16_t key, min, max, flex;
        const char *name;
    } want[] = {
        {0, 0, 13, 9, "Produce"},
        {1, 0, 18, 12, "Fetch"},
        {2, 0, 11, 6, "ListOffsets"},
        {3, 0, 13, 9, "Metadata"},
        {8, 0, 10, 8, "OffsetCommit"},
        {9, 0, 10, 6, "OffsetFetch"},
        {10, 0, 6, 3, "FindCoordinator"},
        {11, 0, 9, 6, "JoinGroup"},
        {12, 0, 4, 4, "Heartbeat"},
        {13, 0, 5, 4, "LeaveGroup"},
        {14, 0, 5, 4, "SyncGroup"},
        {15, 0, 6, 5, "DescribeGroups"},
        {16, 0, 5, 3, "ListGroups"},
        {17, 0, 1, -1, "SaslHandshake"},
        {18, 0, 4, 3, "ApiVersions"},
        {19, 0, 7, 5, "CreateTopics"},
        {20, 0, 6, 4, "DeleteTopics"},
        {21, 0, 2, 2, "DeleteRecords"},
        {22, 0, 5, 2, "InitProducerId"},
        {23, 0, 4, 4, "OffsetForLeaderEpoch"},
        {24, 0, 5, 3, "AddPartitionsToTxn"},
        {25, 0, 4, 3, "AddOffsetsToTxn"},
        {26, 0, 5, 3, "EndTxn"},
        {27, 0, 1, 1, "WriteTxnMarkers"},
        {28, 0, 5, 3, "TxnOffsetCommit"},
        {29, 0, 3, 2, "DescribeAcls"},
        {30, 0, 3, 2, "CreateAcls"},
        {31, 0, 3, 2, "DeleteAcls"},
        {32, 0, 4, 4, "DescribeConfigs"},
        {33, 0, 2, 2, "AlterConfigs"},
        {36, 0, 2, 2, "SaslAuthenticate"},
        {37, 0, 3, 2, "CreatePartitions"},
        {42, 0, 2, 2, "DeleteGroups"},
        {43, 0, 2, 2, "ElectLeaders"},
        {44, 0, 1, 1, "IncrementalAlterConfigs"},
        {45, 0, 1, 0, "AlterPartitionReassignments"},
        {46, 0, 0, 0, "ListPartitionReassignments"},
        {47, 0, 0, -1, "OffsetDelete"},
        {48, 0, 1, 1, "DescribeClientQuotas"},
        {49, 0, 1, 1, "AlterClientQuotas"},
        {50, 0, 0, 0, "DescribeUserScramCredentials"},
        {51, 0, 0, 0, "AlterUserScramCredentials"},
        {60, 0, 2, 0, "DescribeCluster"},
        {61, 0, 0, 0, "DescribeProducers"},
        {65, 0, 0, 0, "DescribeTransactions"},
        {66, 0, 1, 0, "ListTransactions"},
        {68, 0, 1, 0, "ConsumerGroupHeartbeat"},
        {69, 0, 1, 0, "ConsumerGroupDescribe"},
    };
    assert_int_equal(st_kp_apis_count, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < st_kp_apis_count; i++) {
        const st_kp_api_t *a = st_kp_api_find(want[i].key);
        assert_non_null(a);
        assert_ptr_equal(a, &st_kp_apis[i]);
        assert_string_equal(a->name, want[i].name);
        assert_int_equal(a->min_version, want[i].min);
        assert_int_equal(a->max_version, want[i].max);
        assert_int_equal(a->flexible_version, want[i].flex);
    }
    assert_null(st_kp_api_find(34));
    assert_null(st_kp_api_find(-1));
    assert_int_equal(st_kp_req_header_version(34, 0), ST_E_UNSUPPORTED);
    assert_int_equal(st_kp_req_header_version(ST_KP_API_OFFSET_DELETE, 0), 1);
    assert_int_equal(st_kp_req_header_version(ST_KP_API_DESCRIBE_CLUSTER, 0), 2);
    /* Versions past the range still get the flexible rule (to answer UNSUPPORTED_VERSION). */
    assert_int_equal(st_kp_req_header_version(ST_KP_API_API_VERSIONS, 7), 2);
    assert_int_equal(st_kp_resp_header_version(ST_KP_API_API_VERSIONS, 7), 0);
}

static void test_headers(void **state)
{
    (void)state;
    static const uint8_t v2[] = {0x00, 0x03, 0x00, 0x0c, 0x7f, 0xff, 0xff, 0xff,
                                 0xff, 0xff, 0x01, 0x05, 0x02, 0xaa, 0xbb};
    st_kreader_t r;
    st_kp_req_header_t h;
    uint8_t *c = copy_of(v2, sizeof v2);
    st_kreader_init(&r, c, sizeof v2, &arena);
    assert_int_equal(st_kp_req_header_decode(&r, 2, &h), 0);
    assert_ptr_equal(r.p, r.end);
    assert_int_equal(h.request_api_key, 3);
    assert_int_equal(h.request_api_version, 12);
    assert_int_equal(h.correlation_id, INT32_MAX);
    assert_true(st_kstr_is_null(h.client_id));
    for (size_t cut = 0; cut < sizeof v2; cut++) {
        uint8_t *p = copy_of(v2, cut);
        st_kreader_init(&r, p, cut, &arena);
        assert_int_equal(st_kp_req_header_decode(&r, 2, &h), ST_E_TRUNCATED);
        free(p);
    }
    st_kreader_init(&r, c, 8, &arena);
    assert_int_equal(st_kp_req_header_decode(&r, 0, &h), 0);
    assert_true(st_kstr_is_null(h.client_id));
    assert_int_equal(st_kp_req_header_decode(&r, 3, &h), ST_E_UNSUPPORTED);
    free(c);

    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    assert_int_equal(st_kp_resp_header_encode(&w, 1, &(st_kp_resp_header_t){0x01020304}), 0);
    static const uint8_t r1[] = {1, 2, 3, 4, 0};
    check_encodes_to(&b, r1, sizeof r1);
    st_buf_fini(&b);
}

static void test_defaults(void **state)
{
    (void)state;
    st_kp_fetch_req_partition_t p;
    st_kp_fetch_req_partition_init(&p);
    assert_int_equal(p.current_leader_epoch, -1);
    assert_int_equal(p.log_start_offset, -1);
    assert_int_equal(p.high_watermark, INT64_MAX);
    st_kp_fetch_req_t f;
    st_kp_fetch_req_init(&f);
    assert_int_equal(f.replica_id, -1);
    assert_int_equal(f.max_bytes, INT32_MAX);
    assert_int_equal(f.session_epoch, -1);
    assert_int_equal(f.replica_state.replica_epoch, -1);
    assert_true(st_kstr_is_null(f.cluster_id));
    assert_true(st_kstr_eq(f.rack_id, ""));
    st_kp_produce_resp_partition_response_t pr;
    st_kp_produce_resp_partition_response_init(&pr);
    assert_int_equal(pr.log_append_time_ms, -1);
    assert_int_equal(pr.current_leader.leader_id, -1);
    assert_true(st_kstr_is_null(pr.error_message));
    st_kp_create_topics_req_t ct;
    st_kp_create_topics_req_init(&ct);
    assert_int_equal(ct.timeout_ms, 60000);
    st_kp_offset_for_leader_epoch_req_t ol;
    st_kp_offset_for_leader_epoch_req_init(&ol);
    assert_int_equal(ol.replica_id, -2);
}

static void test_kerr(void **state)
{
    (void)state;
    assert_int_equal(ST_KERR_UNKNOWN_TOPIC_OR_PARTITION, 3);
    assert_int_equal(ST_KERR_UNKNOWN_SERVER_ERROR, -1);
    assert_int_equal(ST_KERR_NOT_LEADER_OR_FOLLOWER, 6);
    assert_int_equal(ST_KERR_UNSUPPORTED_VERSION, 35);
    assert_int_equal(ST_KERR_UNKNOWN_TOPIC_ID, 100);
    assert_int_equal(ST_KERR_TRANSACTION_ABORTABLE, 120);
    assert_string_equal(st_kerr_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
    assert_string_equal(st_kerr_name(-1), "UNKNOWN_SERVER_ERROR");
    assert_string_equal(st_kerr_name(0), "NONE");
    assert_string_equal(st_kerr_name(ST_KERR__MAX), "REBOOTSTRAP_REQUIRED");
    assert_string_equal(st_kerr_name(ST_KERR__MAX + 1), "UNKNOWN_CODE");
    /* The table is dense from -1 to ST_KERR__MAX. */
    for (int c = -1; c <= ST_KERR__MAX; c++)
        assert_string_not_equal(st_kerr_name((int16_t)c), "UNKNOWN_CODE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apiversions_v0_request),
        cmocka_unit_test(test_apiversions_v3_request),
        cmocka_unit_test(test_apiversions_v3_response),
        cmocka_unit_test(test_unknown_tags_skipped),
        cmocka_unit_test(test_metadata_golden),
        cmocka_unit_test(test_produce_v3_golden),
        cmocka_unit_test(test_fetch_records_ext),
        cmocka_unit_test(test_lying_lengths),
        cmocka_unit_test(test_encode_rejects_invalid),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_api_table),
        cmocka_unit_test(test_headers),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_kerr),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
