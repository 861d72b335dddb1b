/*
 * Unit tests for the request versions Kafka 4.0 removed (KIP-896) and Strata accepts again:
 * each message's classic layout written by hand from the protocol reference (Kafka 3.9's
 * message definitions), decoded to the fields it holds (absent fields at their defaults) and
 * encoded back to the same bytes. test_codec.c round-trips and truncates every version of
 * every API generically; these pin down the layouts that differ from the next version.
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

/* Decodes `n` bytes (an exact-size heap copy, so ASan sees over-reads) as the request (resp
 * false) or response of api `key` at `v`, checks every byte was read and that encoding the
 * result gives the same bytes back; returns the decoded message (arena memory). The copy is
 * left allocated until the test ends, as the message points into it. */
static void *golden(int16_t key, int16_t v, bool resp, const uint8_t *bytes, size_t n,
                    uint8_t **copy)
{
    *copy = malloc(n ? n : 1);
    assert_non_null(*copy);
    memcpy(*copy, bytes, n);
    st_kreader_t r;
    st_kreader_init(&r, *copy, n, &arena);
    void *msg = NULL;
    int rc =
        resp ? st_kp_resp_decode_any(&r, key, v, &msg) : st_kp_req_decode_any(&r, key, v, &msg);
    assert_int_equal(rc, 0);
    assert_ptr_equal(r.p, r.end);
    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    rc = resp ? st_kp_resp_encode_any(&w, key, v, msg) : st_kp_req_encode_any(&w, key, v, msg);
    assert_int_equal(rc, 0);
    assert_int_equal(b.len, n);
    assert_memory_equal(b.data, bytes, n);
    st_buf_fini(&b);
    return msg;
}

/* ListOffsets v0: each partition asks max_num_offsets; the answer is an offsets array, with
 * no timestamp and no offset field. */
static void test_list_offsets_v0(void **state)
{
    (void)state;
    static const uint8_t req[] = {
        0xff, 0xff, 0xff, 0xff,                         /* replica_id -1 */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't',        /* topics [1] "t" */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, /* partitions [1] partition 2 */
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, /* timestamp -2 */
        0x00, 0x00, 0x00, 0x05};                        /* max_num_offsets 5 */
    uint8_t *c1, *c2;
    st_kp_list_offsets_req_t *q = golden(2, 0, false, req, sizeof req, &c1);
    assert_int_equal(q->replica_id, -1);
    assert_int_equal(q->isolation_level, 0);
    assert_int_equal(q->topics[0].partitions[0].partition_index, 2);
    assert_int_equal(q->topics[0].partitions[0].current_leader_epoch, -1);
    assert_int_equal(q->topics[0].partitions[0].timestamp, -2);
    assert_int_equal(q->topics[0].partitions[0].max_num_offsets, 5);

    static const uint8_t resp[] = {0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't', /* topics [1] "t" */
                                   0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,
                                   0x00, 0x00,             /* partition 2, error 0 */
                                   0x00, 0x00, 0x00, 0x02, /* old_style_offsets [2] */
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a,  /* 42 */
                                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}; /* 0 */
    st_kp_list_offsets_resp_t *o = golden(2, 0, true, resp, sizeof resp, &c2);
    st_kp_list_offsets_resp_partition_t *p = &o->topics[0].partitions[0];
    assert_int_equal(p->old_style_offsets_count, 2);
    assert_int_equal(p->old_style_offsets[0], 42);
    assert_int_equal(p->old_style_offsets[1], 0);
    assert_int_equal(p->offset, -1);
    assert_int_equal(p->timestamp, -1);
    free(c1);
    free(c2);
}

/* max_num_offsets exists only in v0: v1 reads the same partition without it. */
static void test_list_offsets_v1_has_no_max(void **state)
{
    (void)state;
    st_kp_list_offsets_req_t q;
    st_kp_list_offsets_req_init(&q);
    st_kp_list_offsets_req_topic_t t;
    st_kp_list_offsets_req_topic_init(&t);
    st_kp_list_offsets_req_partition_t p;
    st_kp_list_offsets_req_partition_init(&p);
    assert_int_equal(p.max_num_offsets, 1); /* Kafka's default */
    t.name = st_kstr("t");
    t.partitions = &p;
    t.partitions_count = 1;
    q.topics = &t;
    q.topics_count = 1;
    st_buf_t b0, b1;
    st_buf_init(&b0);
    st_buf_init(&b1);
    st_kwriter_t w;
    st_kwriter_init(&w, &b0);
    assert_int_equal(st_kp_list_offsets_req_encode(&w, 0, &q), 0);
    st_kwriter_init(&w, &b1);
    assert_int_equal(st_kp_list_offsets_req_encode(&w, 1, &q), 0);
    assert_int_equal(b0.len, b1.len + 4); /* v0: + max_num_offsets */
    st_buf_fini(&b0);
    st_buf_fini(&b1);
}

/* OffsetCommit v0: group id and topics only; v1 adds generation, member id and each
 * partition's commit_timestamp; v2 drops commit_timestamp for retention_time_ms. */
static void test_offset_commit_v0_v1_v2(void **state)
{
    (void)state;
    static const uint8_t v0[] = {
        0x00, 0x01, 'g',                                /* group_id "g" */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't',        /* topics [1] "t" */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, /* partitions [1] partition 0 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, /* committed_offset 7 */
        0xff, 0xff};                                    /* committed_metadata null */
    static const uint8_t v1[] = {
        0x00, 0x01, 'g',                                /* group_id "g" */
        0x00, 0x00, 0x00, 0x03,                         /* generation 3 */
        0x00, 0x01, 'm',                                /* member_id "m" */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't',        /* topics [1] "t" */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, /* partitions [1] partition 0 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, /* committed_offset 7 */
        0x00, 0x00, 0x01, 0x80, 0x00, 0x00, 0x00, 0x00, /* commit_timestamp */
        0x00, 0x02, 'm',  'd'};                         /* committed_metadata "md" */
    static const uint8_t v2[] = {
        0x00, 0x01, 'g',                                /* group_id "g" */
        0x00, 0x00, 0x00, 0x03,                         /* generation 3 */
        0x00, 0x01, 'm',                                /* member_id "m" */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xea, 0x60, /* retention_time_ms 60000 */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't',        /* topics [1] "t" */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, /* partitions [1] partition 0 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, /* committed_offset 7 */
        0x00, 0x00};                                    /* committed_metadata "" */
    uint8_t *c0, *c1, *c2;
    st_kp_offset_commit_req_t *q0 = golden(8, 0, false, v0, sizeof v0, &c0);
    assert_int_equal(q0->generation_id_or_member_epoch, -1);
    assert_int_equal(q0->member_id.len, 0);
    assert_int_equal(q0->retention_time_ms, -1);
    assert_int_equal(q0->topics[0].partitions[0].committed_offset, 7);
    assert_int_equal(q0->topics[0].partitions[0].commit_timestamp, -1);
    assert_true(st_kstr_is_null(q0->topics[0].partitions[0].committed_metadata));
    st_kp_offset_commit_req_t *q1 = golden(8, 1, false, v1, sizeof v1, &c1);
    assert_int_equal(q1->generation_id_or_member_epoch, 3);
    assert_true(st_kstr_eq(q1->member_id, "m"));
    assert_int_equal(q1->topics[0].partitions[0].commit_timestamp, 0x18000000000LL);
    assert_true(st_kstr_eq(q1->topics[0].partitions[0].committed_metadata, "md"));
    st_kp_offset_commit_req_t *q2 = golden(8, 2, false, v2, sizeof v2, &c2);
    assert_int_equal(q2->retention_time_ms, 60000);
    assert_int_equal(q2->topics[0].partitions[0].commit_timestamp, -1);

    /* the answer of v0-v2: no throttle time */
    static const uint8_t resp[] = {
        0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't',  0x00, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x19}; /* partition 0: ILLEGAL_GENERATION */
    uint8_t *c3;
    st_kp_offset_commit_resp_t *o = golden(8, 0, true, resp, sizeof resp, &c3);
    assert_int_equal(o->topics[0].partitions[0].error_code, 25);
    free(c0);
    free(c1);
    free(c2);
    free(c3);
}

/* OffsetFetch v0: the layout of v1 (Kafka 3.9 read v0's offsets from ZooKeeper; the wire is
 * the same): no null topics, no top-level error, no throttle time. */
static void test_offset_fetch_v0(void **state)
{
    (void)state;
    static const uint8_t req[] = {
        0x00, 0x01, 'g',  0x00, 0x00, 0x00, 0x01, 0x00, 0x01,
        't',  0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03}; /* "g": "t" [3] */
    static const uint8_t resp[] = {
        0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't',        /* topics [1] "t" */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x03, /* partitions [1] partition 3 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, /* committed_offset 9 */
        0x00, 0x00, 0x00, 0x00};                        /* metadata "", error 0 */
    uint8_t *c1, *c2;
    st_kp_offset_fetch_req_t *q = golden(9, 0, false, req, sizeof req, &c1);
    assert_true(st_kstr_eq(q->group_id, "g"));
    assert_int_equal(q->topics[0].partition_indexes[0], 3);
    st_kp_offset_fetch_resp_t *o = golden(9, 0, true, resp, sizeof resp, &c2);
    assert_int_equal(o->topics[0].partitions[0].committed_offset, 9);
    assert_int_equal(o->topics[0].partitions[0].committed_leader_epoch, -1);
    /* a null topics array ("all offsets") exists only from v2 */
    st_kp_offset_fetch_req_t n;
    st_kp_offset_fetch_req_init(&n);
    n.group_id = st_kstr("g");
    n.topics_count = -1;
    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    assert_int_equal(st_kp_offset_fetch_req_encode(&w, 0, &n), ST_E_INVALID);
    st_buf_fini(&b);
    free(c1);
    free(c2);
}

/* JoinGroup v0: no rebalance_timeout_ms in the request, no throttle time in the answer; v1
 * adds the rebalance timeout after the session timeout. */
static void test_join_group_v0_v1(void **state)
{
    (void)state;
    static const uint8_t v0[] = {0x00, 0x01, 'g',        /* group_id */
                                 0x00, 0x00, 0x27, 0x10, /* session_timeout_ms 10000 */
                                 0x00, 0x00,             /* member_id "" */
                                 0x00, 0x08, 'c',  'o',  'n',  's',  'u', 'm', 'e', 'r',
                                 0x00, 0x00, 0x00, 0x01, 0x00, 0x05, 'r', 'a', 'n', 'g',
                                 'e',  0x00, 0x00, 0x00, 0x02, 0xbe, 0xef}; /* metadata: 2 bytes */
    static const uint8_t v1[] = {
        0x00, 0x01, 'g',  0x00, 0x00, 0x27, 0x10, 0x00, 0x00, 0xea, 0x60, /* rebalance 60000 */
        0x00, 0x00, 0x00, 0x08, 'c',  'o',  'n',  's',  'u',  'm',  'e',  'r',  0x00, 0x00, 0x00,
        0x01, 0x00, 0x05, 'r',  'a',  'n',  'g',  'e',  0x00, 0x00, 0x00, 0x02, 0xbe, 0xef};
    uint8_t *c0, *c1, *c2;
    st_kp_join_group_req_t *q0 = golden(11, 0, false, v0, sizeof v0, &c0);
    assert_int_equal(q0->session_timeout_ms, 10000);
    assert_int_equal(q0->rebalance_timeout_ms, -1);
    assert_true(st_kstr_eq(q0->protocols[0].name, "range"));
    assert_int_equal(q0->protocols[0].metadata.len, 2);
    st_kp_join_group_req_t *q1 = golden(11, 1, false, v1, sizeof v1, &c1);
    assert_int_equal(q1->rebalance_timeout_ms, 60000);

    static const uint8_t resp[] = {0x00, 0x00,                              /* error_code */
                                   0x00, 0x00, 0x00, 0x01,                  /* generation_id 1 */
                                   0x00, 0x05, 'r',  'a',  'n',  'g',  'e', /* protocol_name */
                                   0x00, 0x01, 'm',                         /* leader */
                                   0x00, 0x01, 'm',                         /* member_id */
                                   0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 'm', /* members [1] "m" */
                                   0x00, 0x00, 0x00, 0x01, 0x07};           /* metadata: 1 byte */
    st_kp_join_group_resp_t *o = golden(11, 0, true, resp, sizeof resp, &c2);
    assert_int_equal(o->generation_id, 1);
    assert_true(st_kstr_eq(o->leader, "m"));
    assert_int_equal(o->members_count, 1);
    free(c0);
    free(c1);
    free(c2);
}

/* CreateTopics v0: no validate_only; its answer has neither throttle time nor messages. */
static void test_create_topics_v0(void **state)
{
    (void)state;
    static const uint8_t req[] = {
        0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't', /* topics [1] "t" */
        0x00, 0x00, 0x00, 0x03, 0x00, 0x01,      /* 3 partitions, replication factor 1 */
        0x00, 0x00, 0x00, 0x00,                  /* assignments [] */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x02, 'k', 'y', 0xff, 0xff, /* configs [1] "ky": null */
        0x00, 0x00, 0x75, 0x30};                                  /* timeout_ms 30000 */
    static const uint8_t resp[] = {0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't', 0x00, 0x24};
    uint8_t *c1, *c2;
    st_kp_create_topics_req_t *q = golden(19, 0, false, req, sizeof req, &c1);
    assert_int_equal(q->topics[0].num_partitions, 3);
    assert_true(st_kstr_is_null(q->topics[0].configs[0].value));
    assert_int_equal(q->timeout_ms, 30000);
    assert_false(q->validate_only);
    st_kp_create_topics_resp_t *o = golden(19, 0, true, resp, sizeof resp, &c2);
    assert_int_equal(o->topics[0].error_code, 36); /* TOPIC_ALREADY_EXISTS */
    /* v1 adds validate_only after timeout_ms */
    uint8_t v1[sizeof req + 1];
    memcpy(v1, req, sizeof req);
    v1[sizeof req] = 1;
    uint8_t *c3;
    st_kp_create_topics_req_t *q1 = golden(19, 1, false, v1, sizeof v1, &c3);
    assert_true(q1->validate_only);
    free(c1);
    free(c2);
    free(c3);
}

/* DeleteTopics v0: names and a timeout; the answer has no throttle time. */
static void test_delete_topics_v0(void **state)
{
    (void)state;
    static const uint8_t req[] = {0x00, 0x00, 0x00, 0x01, 0x00, 0x01,
                                  't',  0x00, 0x00, 0x13, 0x88}; /* ["t"], 5000 ms */
    static const uint8_t resp[] = {0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't', 0x00, 0x03};
    uint8_t *c1, *c2;
    st_kp_delete_topics_req_t *q = golden(20, 0, false, req, sizeof req, &c1);
    assert_int_equal(q->topic_names_count, 1);
    assert_int_equal(q->timeout_ms, 5000);
    st_kp_delete_topics_resp_t *o = golden(20, 0, true, resp, sizeof resp, &c2);
    assert_int_equal(o->throttle_time_ms, 0);
    assert_int_equal(o->responses[0].error_code, 3);
    free(c1);
    free(c2);
}

/* DescribeConfigs v0: no include_synonyms; each config has is_default where v1 has
 * config_source, and no synonyms. */
static void test_describe_configs_v0(void **state)
{
    (void)state;
    static const uint8_t req[] = {0x00, 0x00, 0x00, 0x01, 0x02, 0x00,
                                  0x01, 't',  0xff, 0xff, 0xff, 0xff}; /* topic "t", all keys */
    static const uint8_t resp[] = {0x00, 0x00, 0x00, 0x00,             /* throttle_time_ms */
                                   0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0xff,
                                   0xff,                   /* results [1]: error 0, message null */
                                   0x02, 0x00, 0x01, 't',  /* topic "t" */
                                   0x00, 0x00, 0x00, 0x01, /* configs [1] */
                                   0x00, 0x02, 'k',  'y',  0x00, 0x01, 'v', /* "ky" = "v" */
                                   0x00, 0x01, 0x00}; /* read_only, is_default, is_sensitive */
    uint8_t *c1, *c2;
    st_kp_describe_configs_req_t *q = golden(32, 0, false, req, sizeof req, &c1);
    assert_int_equal(q->resources[0].resource_type, 2);
    assert_int_equal(q->resources[0].configuration_keys_count, -1);
    assert_false(q->include_synonyms);
    st_kp_describe_configs_resp_t *o = golden(32, 0, true, resp, sizeof resp, &c2);
    st_kp_describe_configs_resp_config_t *e = &o->results[0].configs[0];
    assert_false(e->read_only);
    assert_true(e->is_default);
    assert_false(e->is_sensitive);
    assert_int_equal(e->config_source, -1);
    free(c1);
    free(c2);
}

/* OffsetForLeaderEpoch v0: no current_leader_epoch; the answer has no leader epoch (v1 adds
 * it before end_offset). */
static void test_offset_for_leader_epoch_v0_v1(void **state)
{
    (void)state;
    static const uint8_t req[] = {
        0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't',  0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04}; /* "t" partition 0, epoch 4 */
    static const uint8_t v0[] = {0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't',  0x00, 0x00,
                                 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x64}; /* end 100 */
    static const uint8_t v1[] = {0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 't',  0x00, 0x00, 0x00,
                                 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x64};
    uint8_t *c1, *c2, *c3;
    st_kp_offset_for_leader_epoch_req_t *q = golden(23, 0, false, req, sizeof req, &c1);
    assert_int_equal(q->replica_id, -2);
    assert_int_equal(q->topics[0].partitions[0].current_leader_epoch, -1);
    assert_int_equal(q->topics[0].partitions[0].leader_epoch, 4);
    st_kp_offset_for_leader_epoch_resp_t *o0 = golden(23, 0, true, v0, sizeof v0, &c2);
    assert_int_equal(o0->topics[0].partitions[0].leader_epoch, -1);
    assert_int_equal(o0->topics[0].partitions[0].end_offset, 100);
    st_kp_offset_for_leader_epoch_resp_t *o1 = golden(23, 1, true, v1, sizeof v1, &c3);
    assert_int_equal(o1->topics[0].partitions[0].leader_epoch, 4);
    free(c1);
    free(c2);
    free(c3);
}

/* The ACL APIs at v0: no pattern type anywhere; it reads as LITERAL (3). */
static void test_acls_v0(void **state)
{
    (void)state;
    static const uint8_t describe[] = {0x02, 0x00, 0x01, 't',  /* resource type topic, name "t" */
                                       0xff, 0xff, 0xff, 0xff, /* principal, host: null */
                                       0x01, 0x01};            /* operation ANY, permission ANY */
    static const uint8_t create[] = {
        0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x01, 't', /* creations [1]: topic "t" */
        0x00, 0x06, 'U',  's',  'e',  'r',  ':',  'a', /* principal "User:a" */
        0x00, 0x01, '*',  0x03, 0x03};                 /* host "*", READ, ALLOW */
    static const uint8_t del[] = {0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x01,
                                  't',  0xff, 0xff, 0xff, 0xff, 0x01, 0x01};
    static const uint8_t describe_resp[] = {
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, /* throttle, error 0, message null */
        0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x01, 't',  /* resources [1]: topic "t" */
        0x00, 0x00, 0x00, 0x01, 0x00, 0x06, 'U',  's',  'e',
        'r',  ':',  'a',  0x00, 0x01, '*',  0x03, 0x03};
    uint8_t *c1, *c2, *c3, *c4;
    st_kp_describe_acls_req_t *d = golden(29, 0, false, describe, sizeof describe, &c1);
    assert_int_equal(d->pattern_type_filter, 3);
    assert_true(st_kstr_is_null(d->principal_filter));
    st_kp_create_acls_req_t *cr = golden(30, 0, false, create, sizeof create, &c2);
    assert_int_equal(cr->creations[0].resource_pattern_type, 3);
    assert_int_equal(cr->creations[0].operation, 3);
    st_kp_delete_acls_req_t *dl = golden(31, 0, false, del, sizeof del, &c3);
    assert_int_equal(dl->filters[0].pattern_type_filter, 3);
    st_kp_describe_acls_resp_t *o = golden(29, 0, true, describe_resp, sizeof describe_resp, &c4);
    assert_int_equal(o->resources[0].pattern_type, 3);
    assert_true(st_kstr_eq(o->resources[0].acls[0].principal, "User:a"));
    free(c1);
    free(c2);
    free(c3);
    free(c4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_offsets_v0),
        cmocka_unit_test(test_list_offsets_v1_has_no_max),
        cmocka_unit_test(test_offset_commit_v0_v1_v2),
        cmocka_unit_test(test_offset_fetch_v0),
        cmocka_unit_test(test_join_group_v0_v1),
        cmocka_unit_test(test_create_topics_v0),
        cmocka_unit_test(test_delete_topics_v0),
        cmocka_unit_test(test_describe_configs_v0),
        cmocka_unit_test(test_offset_for_leader_epoch_v0_v1),
        cmocka_unit_test(test_acls_v0),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
