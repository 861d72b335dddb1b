/*
 * Unit tests for the generated topic x partition plumbing (kafka.schema `mirror` lines):
 * _flatten gives one item per request partition in request order with its topic fields,
 * partition index and positions; _skeleton builds a response whose topics and partitions
 * mirror the request (names, ids, indexes, defaults) and links each item to its answer;
 * empty topics and empty requests; _req_build groups consecutive items by topic and round-
 * trips through the codec; the one-level form (group names answered one result each).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
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

static void assert_kstr(st_kstr_t s, const char *want)
{
    assert_int_equal(s.len, (int32_t)strlen(want));
    assert_memory_equal(s.ptr, want, strlen(want));
}

/* A Fetch request: topics a (partitions 3, 1), b (none), c (7). */
static void fetch_req(st_kp_fetch_req_t *q, st_kp_fetch_req_topic_t *t,
                      st_kp_fetch_req_partition_t *p)
{
    st_kp_fetch_req_init(q);
    for (int i = 0; i < 3; i++)
        st_kp_fetch_req_topic_init(&t[i]);
    for (int i = 0; i < 3; i++)
        st_kp_fetch_req_partition_init(&p[i]);
    t[0].topic = st_kstr("a");
    t[0].topic_id.b[0] = 0xa;
    t[0].partitions = &p[0];
    t[0].partitions_count = 2;
    t[1].topic = st_kstr("b");
    t[1].partitions = NULL;
    t[1].partitions_count = 0;
    t[2].topic = st_kstr("c");
    t[2].topic_id.b[15] = 0xc;
    t[2].partitions = &p[2];
    t[2].partitions_count = 1;
    p[0].partition = 3;
    p[0].fetch_offset = 30;
    p[1].partition = 1;
    p[1].fetch_offset = 10;
    p[2].partition = 7;
    p[2].fetch_offset = 70;
    q->topics = t;
    q->topics_count = 3;
}

static void test_fetch_flatten(void **state)
{
    (void)state;
    st_kp_fetch_req_t q;
    st_kp_fetch_req_topic_t t[3];
    st_kp_fetch_req_partition_t p[3];
    fetch_req(&q, t, p);
    st_kp_fetch_item_t *it = NULL;
    assert_int_equal(st_kp_fetch_flatten(&arena, &q, &it), 3);
    assert_non_null(it);
    const int32_t want_part[] = {3, 1, 7}, want_t[] = {0, 0, 2}, want_p[] = {0, 1, 0};
    const char *want_name[] = {"a", "a", "c"};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(it[k].partition, want_part[k]);
        assert_int_equal(it[k].topic_at, want_t[k]);
        assert_int_equal(it[k].partition_at, want_p[k]);
        assert_kstr(it[k].topic, want_name[k]);
        assert_ptr_equal(it[k].req_topic, &t[want_t[k]]);
        assert_ptr_equal(it[k].req_partition, &t[want_t[k]].partitions[want_p[k]]);
        assert_null(it[k].resp_partition);
    }
    assert_int_equal(it[0].topic_id.b[0], 0xa);
    assert_int_equal(it[2].topic_id.b[15], 0xc);
    assert_int_equal(it[2].req_partition->fetch_offset, 70);
}

static void test_fetch_skeleton(void **state)
{
    (void)state;
    st_kp_fetch_req_t q;
    st_kp_fetch_req_topic_t t[3];
    st_kp_fetch_req_partition_t p[3];
    fetch_req(&q, t, p);
    st_kp_fetch_resp_t resp;
    st_kp_fetch_resp_init(&resp);
    st_kp_fetch_item_t *it = NULL;
    assert_int_equal(st_kp_fetch_mirror(&arena, &q, &resp, &it), 3);
    assert_int_equal(resp.responses_count, 3);
    assert_kstr(resp.responses[0].topic, "a");
    assert_kstr(resp.responses[1].topic, "b");
    assert_kstr(resp.responses[2].topic, "c");
    assert_int_equal(resp.responses[0].topic_id.b[0], 0xa);
    assert_int_equal(resp.responses[2].topic_id.b[15], 0xc);
    assert_int_equal(resp.responses[0].partitions_count, 2);
    assert_int_equal(resp.responses[1].partitions_count, 0);
    assert_non_null(resp.responses[1].partitions); /* empty, but an array */
    assert_int_equal(resp.responses[2].partitions_count, 1);
    assert_int_equal(resp.responses[0].partitions[0].partition_index, 3);
    assert_int_equal(resp.responses[0].partitions[1].partition_index, 1);
    assert_int_equal(resp.responses[2].partitions[0].partition_index, 7);
    /* every answer starts at its defaults */
    assert_int_equal(resp.responses[0].partitions[1].last_stable_offset, -1);
    assert_int_equal(resp.responses[0].partitions[1].preferred_read_replica, -1);
    assert_int_equal(resp.responses[0].partitions[1].diverging_epoch.epoch, -1);
    assert_ptr_equal(it[0].resp_partition, &resp.responses[0].partitions[0]);
    assert_ptr_equal(it[1].resp_partition, &resp.responses[0].partitions[1]);
    assert_ptr_equal(it[2].resp_partition, &resp.responses[2].partitions[0]);

    /* the filled skeleton encodes and decodes back to the same shape */
    it[1].resp_partition->high_watermark = 99;
    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    assert_int_equal(st_kp_fetch_resp_encode(&w, 12, &resp), 0);
    st_kreader_t r;
    st_kreader_init(&r, b.data, b.len, &arena);
    st_kp_fetch_resp_t back;
    assert_int_equal(st_kp_fetch_resp_decode(&r, 12, &back), 0);
    assert_int_equal(back.responses_count, 3);
    assert_int_equal(back.responses[0].partitions[1].partition_index, 1);
    assert_int_equal(back.responses[0].partitions[1].high_watermark, 99);
    assert_int_equal(back.responses[2].partitions[0].partition_index, 7);
    st_buf_fini(&b);
}

static void test_empty_request(void **state)
{
    (void)state;
    st_kp_list_offsets_req_t q;
    st_kp_list_offsets_req_init(&q);
    st_kp_list_offsets_resp_t resp;
    st_kp_list_offsets_resp_init(&resp);
    st_kp_list_offsets_item_t *it = NULL;
    assert_int_equal(st_kp_list_offsets_mirror(&arena, &q, &resp, &it), 0);
    assert_non_null(it);
    assert_non_null(resp.topics);
    assert_int_equal(resp.topics_count, 0);
}

/* Skeleton without items, on an API whose partition index is named alike on both sides. */
static void test_skeleton_no_items(void **state)
{
    (void)state;
    st_kp_offset_for_leader_epoch_req_partition_t p[2];
    st_kp_offset_for_leader_epoch_req_topic_t t;
    st_kp_offset_for_leader_epoch_req_t q;
    st_kp_offset_for_leader_epoch_req_init(&q);
    st_kp_offset_for_leader_epoch_req_topic_init(&t);
    st_kp_offset_for_leader_epoch_req_partition_init(&p[0]);
    st_kp_offset_for_leader_epoch_req_partition_init(&p[1]);
    p[0].partition = 5;
    p[1].partition = 6;
    t.topic = st_kstr("t");
    t.partitions = p;
    t.partitions_count = 2;
    q.topics = &t;
    q.topics_count = 1;
    st_kp_offset_for_leader_epoch_resp_t resp;
    st_kp_offset_for_leader_epoch_resp_init(&resp);
    assert_int_equal(st_kp_offset_for_leader_epoch_skeleton(&arena, &q, &resp, NULL), 0);
    assert_int_equal(resp.topics_count, 1);
    assert_kstr(resp.topics[0].topic, "t");
    assert_int_equal(resp.topics[0].partitions_count, 2);
    assert_int_equal(resp.topics[0].partitions[1].partition, 6);
    assert_int_equal(resp.topics[0].partitions[1].end_offset, -1);
}

/* _req_build: consecutive items of one topic make one topic; a topic seen again after another
 * starts a new one (the wire keeps the order it was given). */
static void test_req_build(void **state)
{
    (void)state;
    st_kp_fetch_item_t it[4];
    memset(it, 0, sizeof it);
    const char *names[] = {"x", "x", "y", "x"};
    const int32_t parts[] = {0, 2, 1, 5};
    for (int k = 0; k < 4; k++) {
        it[k].topic = st_kstr(names[k]);
        it[k].partition = parts[k];
    }
    st_kp_fetch_req_t q;
    st_kp_fetch_req_init(&q);
    assert_int_equal(st_kp_fetch_req_build(&arena, &q, it, 4), 0);
    assert_int_equal(q.topics_count, 3);
    assert_kstr(q.topics[0].topic, "x");
    assert_int_equal(q.topics[0].partitions_count, 2);
    assert_kstr(q.topics[1].topic, "y");
    assert_int_equal(q.topics[1].partitions_count, 1);
    assert_kstr(q.topics[2].topic, "x");
    assert_int_equal(q.topics[2].partitions_count, 1);
    const int32_t want_t[] = {0, 0, 1, 2}, want_p[] = {0, 1, 0, 0};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(it[k].topic_at, want_t[k]);
        assert_int_equal(it[k].partition_at, want_p[k]);
        assert_ptr_equal(it[k].req_partition, &q.topics[want_t[k]].partitions[want_p[k]]);
        assert_int_equal(it[k].req_partition->partition, parts[k]);
        assert_int_equal(it[k].req_partition->current_leader_epoch, -1); /* initialised */
        it[k].req_partition->fetch_offset = 100 + k;
    }
    /* and back: flattening the built request gives the same items */
    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    assert_int_equal(st_kp_fetch_req_encode(&w, 12, &q), 0);
    st_kreader_t r;
    st_kreader_init(&r, b.data, b.len, &arena);
    st_kp_fetch_req_t back;
    assert_int_equal(st_kp_fetch_req_decode(&r, 12, &back), 0);
    st_kp_fetch_item_t *flat = NULL;
    assert_int_equal(st_kp_fetch_flatten(&arena, &back, &flat), 4);
    for (int k = 0; k < 4; k++) {
        assert_kstr(flat[k].topic, names[k]);
        assert_int_equal(flat[k].partition, parts[k]);
        assert_int_equal(flat[k].req_partition->fetch_offset, 100 + k);
    }
    st_buf_fini(&b);

    st_kp_fetch_req_t none;
    st_kp_fetch_req_init(&none);
    assert_int_equal(st_kp_fetch_req_build(&arena, &none, it, 0), 0);
    assert_int_equal(none.topics_count, 0);
}

/* Produce: the topic is (name, topic_id) and the index field is `index` on both sides. */
static void test_produce_mirror(void **state)
{
    (void)state;
    st_kp_produce_req_partition_data_t pd[2];
    st_kp_produce_req_topic_data_t td;
    st_kp_produce_req_t q;
    st_kp_produce_req_init(&q);
    st_kp_produce_req_topic_data_init(&td);
    st_kp_produce_req_partition_data_init(&pd[0]);
    st_kp_produce_req_partition_data_init(&pd[1]);
    pd[0].index = 4;
    pd[1].index = 0;
    td.name = st_kstr("orders");
    td.partition_data = pd;
    td.partition_data_count = 2;
    q.topic_data = &td;
    q.topic_data_count = 1;
    st_kp_produce_resp_t resp;
    st_kp_produce_resp_init(&resp);
    st_kp_produce_item_t *it = NULL;
    assert_int_equal(st_kp_produce_mirror(&arena, &q, &resp, &it), 2);
    assert_int_equal(resp.responses_count, 1);
    assert_kstr(resp.responses[0].name, "orders");
    assert_int_equal(resp.responses[0].partition_responses_count, 2);
    assert_int_equal(resp.responses[0].partition_responses[0].index, 4);
    assert_int_equal(resp.responses[0].partition_responses[1].index, 0);
    assert_int_equal(resp.responses[0].partition_responses[1].log_append_time_ms, -1);
    assert_int_equal(resp.responses[0].partition_responses[1].current_leader.leader_id, -1);
    assert_ptr_equal(it[1].resp_partition, &resp.responses[0].partition_responses[1]);
    assert_int_equal(it[1].index, 0);
    assert_kstr(it[1].name, "orders");
}

/* The one-level form: DeleteGroups answers each name with a result carrying it. */
static void test_groups_skeleton(void **state)
{
    (void)state;
    st_kstr_t names[3] = {st_kstr("g1"), st_kstr(""), st_kstr("g3")};
    st_kp_delete_groups_req_t q;
    st_kp_delete_groups_req_init(&q);
    q.groups_names = names;
    q.groups_names_count = 3;
    st_kp_delete_groups_resp_t resp;
    st_kp_delete_groups_resp_init(&resp);
    assert_int_equal(st_kp_delete_groups_skeleton(&arena, &q, &resp), 0);
    assert_int_equal(resp.results_count, 3);
    assert_kstr(resp.results[0].group_id, "g1");
    assert_kstr(resp.results[1].group_id, "");
    assert_kstr(resp.results[2].group_id, "g3");
    assert_int_equal(resp.results[2].error_code, 0);

    st_kp_describe_groups_req_t dq;
    st_kp_describe_groups_req_init(&dq);
    st_kp_describe_groups_resp_t dresp;
    st_kp_describe_groups_resp_init(&dresp);
    assert_int_equal(st_kp_describe_groups_skeleton(&arena, &dq, &dresp), 0);
    assert_int_equal(dresp.groups_count, 0);
    assert_non_null(dresp.groups);
    dq.groups = names;
    dq.groups_count = 1;
    assert_int_equal(st_kp_describe_groups_skeleton(&arena, &dq, &dresp), 0);
    assert_int_equal(dresp.groups_count, 1);
    assert_kstr(dresp.groups[0].group_id, "g1");
    assert_int_equal(dresp.groups[0].authorized_operations, INT32_MIN); /* initialised */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fetch_flatten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fetch_skeleton, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_skeleton_no_items, setup, teardown),
        cmocka_unit_test_setup_teardown(test_req_build, setup, teardown),
        cmocka_unit_test_setup_teardown(test_produce_mirror, setup, teardown),
        cmocka_unit_test_setup_teardown(test_groups_skeleton, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
