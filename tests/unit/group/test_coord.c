/*
 * test_coord.c — the group coordinator against a real event loop and real partition logs in
 * a temporary directory: the offsets-topic records, the batch writer, the group partition
 * hash, the join/sync/heartbeat state machine with fencing, static membership, session
 * expiry, commits answered once durable and rebuilt from the log, DeleteGroups, expiry of
 * offsets, the log cleaner (st_log_clean_step, as the broker runs it on __consumer_offsets)
 * keeping only the latest record of each key without changing what a reload rebuilds, and
 * protocol strings holding NUL kept whole through all of it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "base/err.h"
#include "group/coord.h"
#include "group/records.h"
#include "proto/kerr.h"
#include "storage/batch.h"
#include "storage/fs.h"

#include "group/group_fx.h"

/* ---- records and batches ---- */

static void test_records_roundtrip(void **state)
{
    (void)state;
    st_arena_t a;
    st_arena_init(&a, 1024);
    st_buf_t k, v;
    st_buf_init(&k);
    st_buf_init(&v);
    st_grec_offset_key(&k, st_kstr("grp"), st_kstr("topic"), 7);
    st_grec_offset_value(&v, 42, 5, st_kstr("meta"), 1700000000000, -1);
    st_grec_t r;
    assert_int_equal(st_grec_decode(k.data, (int32_t)k.len, v.data, (int32_t)v.len, &a, &r), 0);
    assert_int_equal(r.kind, ST_GREC_OFFSET);
    assert_true(st_kstr_eq(r.group, "grp") && st_kstr_eq(r.topic, "topic"));
    assert_int_equal(r.partition, 7);
    assert_int_equal(r.offset, 42);
    assert_int_equal(r.leader_epoch, 5);
    assert_true(st_kstr_eq(r.metadata, "meta"));
    assert_int_equal(r.commit_timestamp, 1700000000000);
    assert_int_equal(r.expire_timestamp, -1);
    assert_int_equal(st_grec_decode(k.data, (int32_t)k.len, NULL, -1, &a, &r), 0);
    assert_true(r.tombstone);

    /* with an expiry: Kafka's value version 1, no leader epoch */
    st_buf_clear(&v);
    st_grec_offset_value(&v, 42, 5, st_kstr("m"), 0x0102, 0x0304);
    static const uint8_t v1[] = {0, 1, 0, 0, 0, 0, 0, 0, 0, 42, 0, 1, 'm', 0, 0,
                                 0, 0, 0, 0, 1, 2, 0, 0, 0, 0,  0, 0, 3,   4};
    assert_int_equal(v.len, sizeof v1);
    assert_memory_equal(v.data, v1, sizeof v1);
    assert_int_equal(st_grec_decode(k.data, (int32_t)k.len, v.data, (int32_t)v.len, &a, &r), 0);
    assert_int_equal(r.leader_epoch, -1);
    assert_int_equal(r.commit_timestamp, 0x0102);
    assert_int_equal(r.expire_timestamp, 0x0304);

    st_buf_clear(&k);
    st_buf_clear(&v);
    st_grec_member_t m = {st_kstr("m-1"),
                          st_kstr("inst"),
                          st_kstr("cid"),
                          st_kstr("/h"),
                          300,
                          200,
                          {(const uint8_t *)"sub", 3},
                          {(const uint8_t *)"asg", 3}};
    st_grec_t g = {.protocol_type = st_kstr("consumer"),
                   .generation = 9,
                   .protocol = st_kstr("range"),
                   .leader = st_kstr("m-1"),
                   .current_state_timestamp = 123,
                   .nmembers = 1,
                   .members = &m};
    st_grec_group_key(&k, st_kstr("grp"));
    st_grec_group_value(&v, &g);
    assert_int_equal(st_grec_decode(k.data, (int32_t)k.len, v.data, (int32_t)v.len, &a, &r), 0);
    assert_int_equal(r.kind, ST_GREC_GROUP);
    assert_int_equal(r.generation, 9);
    assert_true(st_kstr_eq(r.protocol, "range") && st_kstr_eq(r.leader, "m-1"));
    assert_int_equal(r.nmembers, 1);
    assert_true(st_kstr_eq(r.members[0].group_instance_id, "inst"));
    assert_true(bytes_eq(r.members[0].assignment, "asg"));
    assert_int_equal(r.members[0].rebalance_timeout, 300);
    /* a truncated value is an error, never a crash */
    for (size_t n = 0; n < v.len; n++)
        assert_int_not_equal(st_grec_decode(k.data, (int32_t)k.len, v.data, (int32_t)n, &a, &r), 0);
    uint8_t bad[] = {0, 9, 0, 1, 'x'};
    assert_int_equal(st_grec_decode(bad, sizeof bad, NULL, -1, &a, &r), ST_E_UNSUPPORTED);
    st_buf_fini(&k);
    st_buf_fini(&v);
    st_arena_fini(&a);
}

static void test_batch_writer(void **state)
{
    (void)state;
    st_gbatch_t w;
    st_gbatch_init(&w, 1700000000000, 300);
    char key[32], val[64];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        snprintf(val, sizeof val, "value-%d", i);
        assert_int_equal(st_gbatch_add(&w, (uint8_t *)key, strlen(key),
                                       i == 7 ? NULL : (uint8_t *)val,
                                       i == 7 ? -1 : (int32_t)strlen(val)),
                         0);
    }
    assert_int_equal(st_gbatch_finish(&w), 0);
    int batches = 0, records = 0;
    for (size_t pos = 0; pos < w.out.len;) {
        st_batch_hdr_t h;
        assert_int_equal(
            st_batch_validate_client(w.out.data + pos, w.out.len - pos, 1 << 20, &h, NULL), 0);
        st_batch_iter_t it;
        assert_int_equal(st_batch_iter_init(&it, w.out.data + pos, (size_t)st_batch_size(&h)), 0);
        st_batch_record_t rec;
        while (st_batch_iter_next(&it, &rec) == 1) {
            snprintf(key, sizeof key, "key-%d", records);
            assert_int_equal(rec.key_len, (int32_t)strlen(key));
            assert_memory_equal(rec.key, key, strlen(key));
            if (records == 7) {
                assert_int_equal(rec.value_len, -1);
            } else {
                snprintf(val, sizeof val, "value-%d", records);
                assert_memory_equal(rec.value, val, strlen(val));
            }
            assert_int_equal(rec.timestamp, 1700000000000);
            records++;
        }
        batches++;
        pos += (size_t)st_batch_size(&h);
    }
    assert_int_equal(records, 20);
    assert_true(batches > 1); /* split at max_batch_bytes */
    st_gbatch_fini(&w);
}

static void test_partition_for_matches_java(void **state)
{
    (void)state;
    /* Values of Java's Utils.abs("...".hashCode()) % 50. */
    assert_int_equal(st_gcoord_partition_for(st_kstr("my-group"), 50), 12);
    assert_int_equal(st_gcoord_partition_for(st_kstr("g"), 50), 3);
    assert_int_equal(st_gcoord_partition_for(st_kstr("console-consumer-12345"), 50), 6);
    assert_int_equal(st_gcoord_partition_for(st_kstr("gr\xc3\xbc\xc3\x9f"
                                                     "e-\xf0\x9f\x98\x80"),
                                             50),
                     27);
    /* hashCode == Integer.MIN_VALUE: Kafka's abs gives 0 */
    assert_int_equal(st_gcoord_partition_for(st_kstr("polygenelubricants"), 50), 0);
}

/* ---- the state machine ---- */

static void test_join_sync_heartbeat_and_rebalance(void **state)
{
    fx_t *f = *state;
    join_t j1, j2;
    char *m1 = join_dynamic(f, &j1, "g1");
    /* alone and no initial delay: the generation completes at once, m1 leads */
    assert_int_equal(j1.done, 1);
    assert_int_equal(j1.resp.error_code, 0);
    assert_int_equal(j1.resp.generation_id, 1);
    assert_true(st_kstr_eq(j1.resp.leader, m1));
    assert_true(st_kstr_eq(j1.resp.protocol_name, "range"));
    assert_int_equal(j1.resp.members_count, 1);
    sync_t s1;
    const char *ids[] = {m1};
    const char *asg[] = {"A1"};
    sync_req(f, &s1, "g1", m1, 1, 1, ids, asg);
    if (!s1.done)
        run_until(f, &s1.done, 5000);
    assert_int_equal(s1.resp.error_code, 0);
    assert_true(bytes_eq(s1.resp.assignment, "A1"));
    assert_int_equal(heartbeat(f, "g1", m1, 1, NULL), 0);
    assert_int_equal(heartbeat(f, "g1", m1, 0, NULL), ST_KERR_ILLEGAL_GENERATION);
    assert_int_equal(heartbeat(f, "g1", "nobody", 1, NULL), ST_KERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(heartbeat(f, "nogroup", m1, 1, NULL), ST_KERR_UNKNOWN_MEMBER_ID);

    /* a second member: its join waits; m1 learns of the rebalance by heartbeat */
    char *m2 = join_dynamic(f, &j2, "g1");
    assert_int_equal(j2.done, 0);
    assert_int_equal(heartbeat(f, "g1", m1, 1, NULL), ST_KERR_REBALANCE_IN_PROGRESS);
    sync_t late;
    sync_req(f, &late, "g1", m1, 1, 0, NULL, NULL);
    assert_int_equal(late.resp.error_code, ST_KERR_REBALANCE_IN_PROGRESS);
    assert_int_equal(commit1(f, "g1", m1, 1, "t", 0, 5, ""), 0); /* allowed while preparing */
    join(f, &j1, "g1", m1, NULL, 5);
    assert_int_equal(j1.done, 1);
    assert_int_equal(j2.done, 1);
    assert_int_equal(j1.resp.generation_id, 2);
    assert_int_equal(j2.resp.generation_id, 2);
    assert_true(st_kstr_eq(j1.resp.leader, m1)); /* the leader stays */
    assert_int_equal(j1.resp.members_count, 2);
    assert_int_equal(j2.resp.members_count, 0);
    /* the follower's sync waits for the leader's; then both get their part */
    sync_t s2;
    sync_req(f, &s2, "g1", m2, 2, 0, NULL, NULL);
    assert_int_equal(s2.done, 0);
    assert_int_equal(commit1(f, "g1", m2, 2, "t", 0, 6, ""), ST_KERR_REBALANCE_IN_PROGRESS);
    const char *ids2[] = {m1, m2};
    const char *asg2[] = {"P0", "P1"};
    sync_req(f, &s1, "g1", m1, 2, 2, ids2, asg2);
    if (!s1.done)
        run_until(f, &s1.done, 5000);
    assert_int_equal(s1.done, 1);
    assert_int_equal(s2.done, 1);
    assert_true(bytes_eq(s1.resp.assignment, "P0"));
    assert_true(bytes_eq(s2.resp.assignment, "P1"));
    assert_int_equal(commit1(f, "g1", m2, 2, "t", 0, 6, ""), 0);
    assert_int_equal(commit1(f, "g1", m2, 1, "t", 0, 7, ""), ST_KERR_ILLEGAL_GENERATION);
    assert_int_equal(commit1(f, "g1", "x", 2, "t", 0, 7, ""), ST_KERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(fetch1(f, "g1", "t", 0, NULL, 0), 6);

    /* m2 stops heartbeating: the session timeout evicts it and the group rebalances */
    volatile int never = 0;
    int64_t t0 = st_mono_ms();
    int16_t e;
    while ((e = heartbeat(f, "g1", m1, 2, NULL)) == 0 && st_mono_ms() - t0 < 3000)
        run_until(f, &never, 10); /* m1 stays alive */
    assert_int_equal(e, ST_KERR_REBALANCE_IN_PROGRESS);
    assert_true(st_mono_ms() - t0 >= 150); /* not before m2's 200 ms session ran out */
    assert_int_equal(heartbeat(f, "g1", m2, 2, NULL), ST_KERR_UNKNOWN_MEMBER_ID);
    join(f, &j1, "g1", m1, NULL, 5);
    assert_int_equal(j1.done, 1);
    assert_int_equal(j1.resp.generation_id, 3);
    assert_int_equal(j1.resp.members_count, 1);
}

/* group.max.size: at the bound a new member is refused GROUP_MAX_SIZE_REACHED before it gets an
 * id (dynamic) or a slot (static), while the member there rejoins. */
static void test_max_size(void **state)
{
    fx_t *f = *state;
    fx_close_all(f);
    f->cfg.max_size = 1;
    fx_open_log(f);
    fx_coord(f);
    join_t j1, j2;
    char *m1 = join_dynamic(f, &j1, "g1");
    assert_int_equal(j1.done, 1);
    assert_int_equal(j1.resp.error_code, 0);
    join(f, &j2, "g1", NULL, NULL, 5);
    assert_int_equal(j2.done, 1);
    assert_int_equal(j2.resp.error_code, ST_KERR_GROUP_MAX_SIZE_REACHED);
    join(f, &j2, "g1", NULL, "static-1", 5);
    assert_int_equal(j2.done, 1);
    assert_int_equal(j2.resp.error_code, ST_KERR_GROUP_MAX_SIZE_REACHED);
    join(f, &j2, "g1", "made-up", NULL, 5);
    assert_int_equal(j2.resp.error_code, ST_KERR_GROUP_MAX_SIZE_REACHED);
    join(f, &j1, "g1", m1, NULL, 5); /* the member there rejoins */
    if (!j1.done)
        run_until(f, &j1.done, 5000);
    assert_int_equal(j1.resp.error_code, 0);
    assert_int_equal(j1.resp.members_count, 1);
    /* another group is not bound by this one */
    join_t j3;
    join_dynamic(f, &j3, "g2");
    assert_int_equal(j3.resp.error_code, 0);
}

static void test_static_member_rejoin_and_fencing(void **state)
{
    fx_t *f = *state;
    join_t ja, jb;
    join(f, &ja, "gs", NULL, "inst-a", 5); /* static members skip MEMBER_ID_REQUIRED */
    assert_int_equal(ja.done, 1);
    assert_int_equal(ja.resp.error_code, 0);
    char *a = st_arena_strndup(&f->a, ja.resp.member_id.ptr, (size_t)ja.resp.member_id.len);
    join(f, &jb, "gs", NULL, "inst-b", 5);
    assert_int_equal(jb.done, 0);
    char *b = st_arena_strndup(&f->a, jb.resp.member_id.ptr, (size_t)jb.resp.member_id.len);
    (void)b;
    join(f, &ja, "gs", a, "inst-a", 5);
    assert_int_equal(ja.done, 1);
    assert_int_equal(jb.done, 1);
    int32_t gen = ja.resp.generation_id;
    b = st_arena_strndup(&f->a, jb.resp.member_id.ptr, (size_t)jb.resp.member_id.len);
    sync_t sa, sb;
    sync_req(f, &sb, "gs", b, gen, 0, NULL, NULL);
    const char *ids[] = {a, b};
    const char *asg[] = {"AA", "BB"};
    sync_req(f, &sa, "gs", a, gen, 2, ids, asg);
    volatile int dummy = 0;
    run_until(f, &dummy, 20);
    assert_int_equal(sb.done, 1);
    assert_true(bytes_eq(sb.resp.assignment, "BB"));

    /* b restarts (new process, no member id, same instance): new id, same generation and
     * assignment, no rebalance: a's heartbeat stays clean */
    join_t jb2;
    join(f, &jb2, "gs", NULL, "inst-b", 5);
    assert_int_equal(jb2.done, 1);
    assert_int_equal(jb2.resp.error_code, 0);
    assert_int_equal(jb2.resp.generation_id, gen);
    assert_false(st_kstr_eq(jb2.resp.member_id, b));
    char *b2 = st_arena_strndup(&f->a, jb2.resp.member_id.ptr, (size_t)jb2.resp.member_id.len);
    assert_int_equal(heartbeat(f, "gs", a, gen, "inst-a"), 0);
    sync_t sb2;
    sync_req(f, &sb2, "gs", b2, gen, 0, NULL, NULL);
    assert_int_equal(sb2.done, 1);
    assert_true(bytes_eq(sb2.resp.assignment, "BB"));
    /* the old process is fenced */
    assert_int_equal(heartbeat(f, "gs", b, gen, "inst-b"), ST_KERR_FENCED_INSTANCE_ID);
    assert_int_equal(commit1(f, "gs", b, gen, "t", 0, 1, ""), ST_KERR_UNKNOWN_MEMBER_ID);
    join_t jold;
    join(f, &jold, "gs", b, "inst-b", 5);
    assert_int_equal(jold.resp.error_code, ST_KERR_FENCED_INSTANCE_ID);

    /* batched leave by instance id */
    st_kp_leave_group_req_member_t lm = {ST_KSTR_EMPTY, st_kstr("inst-b"), ST_KSTR_NULL};
    st_kp_leave_group_req_t lr;
    st_kp_leave_group_req_init(&lr);
    lr.group_id = st_kstr("gs");
    lr.members = &lm;
    lr.members_count = 1;
    st_kp_leave_group_resp_t lresp;
    st_kp_leave_group_resp_init(&lresp);
    st_gcoord_leave(f->c, 0, &lr, 4, &f->a, &lresp);
    assert_int_equal(lresp.error_code, 0);
    assert_int_equal(lresp.members_count, 1);
    assert_int_equal(lresp.members[0].error_code, 0);
    assert_int_equal(heartbeat(f, "gs", a, gen, "inst-a"), ST_KERR_REBALANCE_IN_PROGRESS);
}

static void test_errors(void **state)
{
    fx_t *f = *state;
    join_t j;
    join(f, &j, "", NULL, NULL, 5);
    assert_int_equal(j.resp.error_code, ST_KERR_INVALID_GROUP_ID);
    st_kp_join_group_req_t req;
    st_kp_join_group_req_init(&req);
    req.group_id = st_kstr("ge");
    req.session_timeout_ms = 5; /* below the minimum */
    req.member_id = ST_KSTR_EMPTY;
    req.protocol_type = st_kstr("consumer");
    req.protocols = protos_range;
    req.protocols_count = 1;
    st_kp_join_group_resp_t resp;
    st_kp_join_group_resp_init(&resp);
    int done = 0;
    st_gcoord_join(f->c, 0, &req, 5, ST_KSTR_EMPTY, ST_KSTR_EMPTY, &f->a, &resp, on_done, &done);
    assert_int_equal(resp.error_code, ST_KERR_INVALID_SESSION_TIMEOUT);
    join(f, &j, "ge", "made-up", NULL, 5);
    assert_int_equal(j.resp.error_code, ST_KERR_UNKNOWN_MEMBER_ID);
    /* not this coordinator's partition */
    st_gcoord_join(f->c, 3, &req, 5, ST_KSTR_EMPTY, ST_KSTR_EMPTY, &f->a, &resp, on_done, &done);
    assert_int_equal(resp.error_code, ST_KERR_NOT_COORDINATOR);
    /* inconsistent protocols */
    join_t j1;
    join_dynamic(f, &j1, "gp");
    req.group_id = st_kstr("gp");
    req.session_timeout_ms = 200;
    st_kp_join_group_req_protocol_t other = {{"sticky", 6}, {(const uint8_t *)"", 0}};
    req.protocols = &other;
    req.member_id = st_kstr("");
    st_gcoord_join(f->c, 0, &req, 3, ST_KSTR_EMPTY, ST_KSTR_EMPTY, &f->a, &resp, on_done, &done);
    assert_int_equal(resp.error_code, ST_KERR_INCONSISTENT_GROUP_PROTOCOL);
    /* metadata too large */
    char *big = calloc(1, ST_GCOORD_MAX_METADATA + 2);
    memset(big, 'm', ST_GCOORD_MAX_METADATA + 1);
    assert_int_equal(commit1(f, "solo", NULL, -1, "t", 0, 1, big),
                     ST_KERR_OFFSET_METADATA_TOO_LARGE);
    free(big);
    /* DescribeGroups of an unknown group */
    st_kp_describe_groups_resp_group_t d;
    st_kp_describe_groups_resp_group_init(&d);
    st_gcoord_describe(f->c, 0, st_kstr("nope"), 6, &f->a, &d);
    assert_int_equal(d.error_code, ST_KERR_GROUP_ID_NOT_FOUND);
    assert_true(st_kstr_eq(d.group_state, "Dead"));
}

static void test_commit_reload_delete(void **state)
{
    fx_t *f = *state;
    assert_int_equal(commit1(f, "simple", NULL, -1, "topic-a", 0, 11, "m0"), 0);
    assert_int_equal(commit1(f, "simple", NULL, -1, "topic-a", 1, 22, ""), 0);
    assert_int_equal(commit1(f, "simple", NULL, -1, "topic-a", 0, 12, "m1"), 0);
    join_t j;
    char *m = join_dynamic(f, &j, "live");
    sync_t s;
    const char *ids[] = {m};
    const char *asg[] = {"ASSIGN"};
    sync_req(f, &s, "live", m, 1, 1, ids, asg);
    if (!s.done)
        run_until(f, &s.done, 5000);
    assert_int_equal(commit1(f, "live", m, 1, "topic-b", 4, 99, "x"), 0);

    fx_restart(f);
    char md[64];
    assert_int_equal(fetch1(f, "simple", "topic-a", 0, md, sizeof md), 12);
    assert_string_equal(md, "m1");
    assert_int_equal(fetch1(f, "simple", "topic-a", 1, NULL, 0), 22);
    assert_int_equal(fetch1(f, "simple", "topic-a", 2, NULL, 0), -1);
    assert_int_equal(fetch1(f, "live", "topic-b", 4, NULL, 0), 99);
    /* the live group came back Stable with its member and assignment */
    st_kp_describe_groups_resp_group_t d;
    st_kp_describe_groups_resp_group_init(&d);
    st_gcoord_describe(f->c, 0, st_kstr("live"), 5, &f->a, &d);
    assert_true(st_kstr_eq(d.group_state, "Stable"));
    assert_int_equal(d.members_count, 1);
    assert_true(st_kstr_eq(d.members[0].member_id, m));
    assert_true(bytes_eq(d.members[0].member_assignment, "ASSIGN"));
    assert_int_equal(heartbeat(f, "live", m, 1, NULL), 0);

    /* DeleteGroups: a live group is refused, an empty one goes, with its offsets */
    int16_t err = -1;
    int done = 0;
    st_gcoord_delete_group(f->c, 0, st_kstr("live"), &err, on_done, &done);
    assert_int_equal(err, ST_KERR_NON_EMPTY_GROUP);
    done = 0;
    st_gcoord_delete_group(f->c, 0, st_kstr("simple"), &err, on_done, &done);
    if (!done)
        run_until(f, &done, 5000);
    assert_int_equal(err, 0);
    assert_int_equal(fetch1(f, "simple", "topic-a", 0, NULL, 0), -1);
    done = 0;
    st_gcoord_delete_group(f->c, 0, st_kstr("simple"), &err, on_done, &done);
    assert_int_equal(err, ST_KERR_GROUP_ID_NOT_FOUND);
    fx_restart(f);
    assert_int_equal(fetch1(f, "simple", "topic-a", 0, NULL, 0), -1);
    assert_int_equal(fetch1(f, "live", "topic-b", 4, NULL, 0), 99);
}

static void test_expiry_of_empty_group_offsets(void **state)
{
    fx_t *f = *state;
    assert_int_equal(commit1(f, "old", NULL, -1, "t", 0, 5, ""), 0);
    st_gcoord_expire_now(f->c); /* retention of a week: nothing goes */
    assert_int_equal(fetch1(f, "old", "t", 0, NULL, 0), 5);
    fx_close_all(f);
    f->cfg.offsets_retention_ms = 0;
    fx_open_log(f);
    fx_coord(f);
    assert_int_equal(fetch1(f, "old", "t", 0, NULL, 0), 5);
    st_gcoord_expire_now(f->c);
    volatile int dummy = 0;
    run_until(f, &dummy, 20);
    assert_int_equal(fetch1(f, "old", "t", 0, NULL, 0), -1);
    assert_int_equal(st_gcoord_group_count(f->c), 0);
    fx_restart(f); /* the tombstones were written */
    assert_int_equal(fetch1(f, "old", "t", 0, NULL, 0), -1);
    assert_int_equal(st_gcoord_group_count(f->c), 0);
}

/* OffsetCommit v1's commit time and v2-v4's retention_time_ms: an offset committed with a
 * retention expires at its commit time + retention (Kafka's expire_timestamp), whatever
 * offsets.retention.minutes says, also after a reload; the others keep the broker's rule. */
static void test_commit_time_and_retention(void **state)
{
    fx_t *f = *state;
    int64_t now = st_wall_ms();
    st_goffset_t p[2] = {{.topic = st_kstr("t"),
                          .partition = 0,
                          .offset = 7,
                          .leader_epoch = -1,
                          .metadata = st_kstr("")},
                         {.topic = st_kstr("t"),
                          .partition = 1,
                          .offset = 8,
                          .leader_epoch = -1,
                          .metadata = st_kstr(""),
                          .commit_ts = now - 1000}};
    st_goffsets_t o = {.group_id = st_kstr("ret"),
                       .member_id = st_kstr(""),
                       .group_instance_id = ST_KSTR_NULL,
                       .generation = -1,
                       .retention_ms = 1500,
                       .n = 2,
                       .parts = p};
    int done = 0;
    st_gcoord_commit(f->c, 0, &o, on_done, &done);
    if (!done)
        run_until(f, &done, 5000);
    assert_int_equal(p[0].error, 0);
    assert_int_equal(p[1].error, 0);
    assert_int_equal(commit1(f, "ret", NULL, -1, "t", 2, 9, ""), 0); /* no retention */
    fx_restart(f); /* the expiry is in the records */
    assert_int_equal(fetch1(f, "ret", "t", 1, NULL, 0), 8);
    /* partition 1 was committed 1 s in the past with 1.5 s to live */
    volatile int dummy = 0;
    int64_t deadline = now + 5000;
    while (fetch1(f, "ret", "t", 1, NULL, 0) == 8 && st_wall_ms() < deadline) {
        st_gcoord_expire_now(f->c);
        run_until(f, &dummy, 20);
    }
    assert_int_equal(fetch1(f, "ret", "t", 1, NULL, 0), -1);
    while (fetch1(f, "ret", "t", 0, NULL, 0) == 7 && st_wall_ms() < deadline + 2000) {
        st_gcoord_expire_now(f->c);
        run_until(f, &dummy, 20);
    }
    assert_true(st_wall_ms() >= now + 1500);
    assert_int_equal(fetch1(f, "ret", "t", 0, NULL, 0), -1);
    assert_int_equal(fetch1(f, "ret", "t", 2, NULL, 0), 9); /* a week's retention */
    fx_restart(f);
    assert_int_equal(fetch1(f, "ret", "t", 0, NULL, 0), -1);
    assert_int_equal(fetch1(f, "ret", "t", 2, NULL, 0), 9);
}

/* ---- under the log cleaner (__consumer_offsets is compacted by key, as Kafka's) ---- */

typedef struct {
    char *p;
    size_t len, cap;
} text_t;

__attribute__((format(printf, 2, 3))) static void tx_add(text_t *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
}

/* Bytes as hex, so NULs and lengths count. */
static void tx_bytes(text_t *t, const void *p, int32_t n)
{
    if (n < 0) {
        tx_add(t, "null");
        return;
    }
    tx_add(t, "'");
    for (int32_t i = 0; i < n; i++)
        tx_add(t, "%02x", ((const uint8_t *)p)[i]);
    tx_add(t, "'");
}

/* All a client can see of the named groups: every committed offset (OffsetFetch of all) and
 * the description (state, protocol, members with their metadata and assignment). */
static char *dump_groups(fx_t *f, const char *const *groups, int n)
{
    text_t t = {0};
    tx_add(&t, "groups=%d\n", st_gcoord_group_count(f->c));
    for (int i = 0; i < n; i++) {
        st_goffsets_t o = {.group_id = st_kstr(groups[i]), .all = true};
        st_gcoord_fetch(f->c, 0, &o, &f->a);
        tx_add(&t, "%s: error %d offsets", groups[i], o.error);
        for (int k = 0; k < o.n; k++) {
            st_goffset_t *p = &o.parts[k];
            tx_add(&t, " %.*s/%d=%lld@%d", p->topic.len, p->topic.ptr, p->partition,
                   (long long)p->offset, p->leader_epoch);
            tx_bytes(&t, p->metadata.ptr, p->metadata.len);
        }
        st_kp_describe_groups_resp_group_t d;
        st_kp_describe_groups_resp_group_init(&d);
        st_gcoord_describe(f->c, 0, st_kstr(groups[i]), 5, &f->a, &d);
        tx_add(&t, "\n  error %d state %.*s type %.*s protocol %.*s", d.error_code,
               d.group_state.len, d.group_state.ptr, d.protocol_type.len, d.protocol_type.ptr,
               d.protocol_data.len, d.protocol_data.ptr);
        for (int k = 0; k < d.members_count; k++) {
            st_kp_describe_groups_resp_member_t *m = &d.members[k];
            tx_add(&t, "\n  member ");
            tx_bytes(&t, m->member_id.ptr, m->member_id.len);
            tx_bytes(&t, m->group_instance_id.ptr, m->group_instance_id.len);
            tx_bytes(&t, m->client_id.ptr, m->client_id.len);
            tx_bytes(&t, m->client_host.ptr, m->client_host.len);
            tx_bytes(&t, m->member_metadata.ptr, m->member_metadata.len);
            tx_bytes(&t, m->member_assignment.ptr, m->member_assignment.len);
        }
        tx_add(&t, "\n");
    }
    return t.p;
}

static int log_empty_batches; /* batches without records seen by the last log_records() */

/* Records in the log: all, and how many are tombstones; the offset of the first. */
static int log_records(fx_t *f, int *tombstones, int64_t *first)
{
    int n = 0;
    *tombstones = 0;
    *first = -1;
    log_empty_batches = 0;
    uint8_t *buf = malloc(1 << 20);
    int64_t off = st_log_start_offset(f->log), end = st_log_end_offset(f->log);
    while (off < end) {
        st_log_read_t rd;
        assert_int_equal(st_log_read(f->log, off, 1 << 20, -1, &rd), 0);
        if (rd.nranges == 0) {
            st_log_read_release(&rd);
            break;
        }
        ssize_t len = st_log_read_copy(&rd, buf, 1 << 20);
        st_log_read_release(&rd);
        assert_true(len > 0);
        for (size_t pos = 0; pos < (size_t)len;) {
            st_batch_hdr_t h;
            assert_int_equal(st_batch_check(buf + pos, (size_t)len - pos, &h), 0);
            log_empty_batches += h.records_count == 0;
            st_batch_iter_t it;
            assert_int_equal(st_batch_iter_init(&it, buf + pos, (size_t)st_batch_size(&h)), 0);
            st_batch_record_t r;
            while (st_batch_iter_next(&it, &r) == 1) {
                if (*first < 0)
                    *first = r.offset;
                n++;
                *tombstones += r.value_len < 0;
            }
            pos += (size_t)st_batch_size(&h);
        }
        off = rd.next_offset;
    }
    free(buf);
    return n;
}

static int16_t leave1(fx_t *f, const char *group, const char *member)
{
    st_kp_leave_group_req_t req;
    st_kp_leave_group_req_init(&req);
    req.group_id = st_kstr(group);
    req.member_id = st_kstr(member);
    st_kp_leave_group_resp_t resp;
    st_kp_leave_group_resp_init(&resp);
    st_gcoord_leave(f->c, 0, &req, 1, &f->a, &resp);
    return resp.error_code;
}

static int16_t delete_group1(fx_t *f, const char *group)
{
    int16_t err = -1;
    int done = 0;
    st_gcoord_delete_group(f->c, 0, st_kstr(group), &err, on_done, &done);
    if (!done)
        run_until(f, &done, 5000);
    assert_int_equal(done, 1);
    return err;
}

static int16_t offset_delete1(fx_t *f, const char *group, const char *topic, int32_t part)
{
    st_goffset_t p = {.topic = st_kstr(topic), .partition = part};
    st_goffsets_t o = {.group_id = st_kstr(group), .n = 1, .parts = &p};
    int done = 0;
    st_gcoord_offset_delete(f->c, 0, &o, on_done, &done);
    if (!done)
        run_until(f, &done, 5000);
    assert_int_equal(done, 1);
    return o.error ? o.error : p.error;
}

/* A member alone in its group, through join and sync, with assignment asg; its id. */
static char *member_alone(fx_t *f, const char *group, const char *asg)
{
    join_t j;
    char *m = join_dynamic(f, &j, group);
    if (!j.done)
        run_until(f, &j.done, 5000);
    assert_int_equal(j.resp.error_code, 0);
    sync_t s;
    const char *ids[] = {m};
    sync_req(f, &s, group, m, j.resp.generation_id, 1, ids, &asg);
    if (!s.done)
        run_until(f, &s.done, 5000);
    assert_int_equal(s.resp.error_code, 0);
    return m;
}

/* Every kind of record the coordinator writes, and every deletion, then the cleaner keeps the
 * latest record of each key: a coordinator loaded from the cleaned log (which has offset gaps
 * and may start past its first records) serves what the one that wrote it did. Then, once the
 * tombstones are past delete.retention.ms, a second clean drops them, and still nothing
 * changes. */
static void test_cleaned_log_rebuilds_state(void **state)
{
    fx_t *f = *state;
    f->session_ms = 60000; /* members loaded back must not time out while the test runs */
    fx_compacted(f, 1024, 60000);

    /* offsets that expire: tombstones written by the expiry */
    assert_int_equal(commit1(f, "old", NULL, -1, "t", 0, 5, "o"), 0);
    assert_int_equal(commit1(f, "old", NULL, -1, "t", 1, 6, "o"), 0);
    fx_close_all(f);
    f->cfg.offsets_retention_ms = 0;
    fx_open_log(f);
    fx_coord(f);
    st_gcoord_expire_now(f->c);
    assert_int_equal(st_gcoord_group_count(f->c), 0);
    fx_close_all(f);
    f->cfg.offsets_retention_ms = 7 * 24 * 3600 * 1000LL;
    fx_open_log(f);
    fx_coord(f);

    char topic[32], md[32];
    for (int i = 0; i < 400; i++) { /* one group committing to the same keys over and over */
        snprintf(topic, sizeof topic, "topic-%d", i % 4);
        snprintf(md, sizeof md, "m%d", i);
        assert_int_equal(commit1(f, "simple", NULL, -1, topic, i % 2, i, md), 0);
    }
    /* OffsetDelete: a tombstone for one key */
    assert_int_equal(commit1(f, "offdel", NULL, -1, "x", 0, 1, ""), 0);
    assert_int_equal(commit1(f, "offdel", NULL, -1, "y", 0, 2, ""), 0);
    assert_int_equal(offset_delete1(f, "offdel", "x", 0), 0);
    /* DeleteGroups: tombstones for its offsets and its metadata; then the id is used again */
    char *dm = member_alone(f, "del", "D");
    assert_int_equal(commit1(f, "del", dm, 1, "a", 0, 10, ""), 0);
    assert_int_equal(commit1(f, "del", dm, 1, "b", 0, 11, ""), 0);
    assert_int_equal(leave1(f, "del", dm), 0);
    assert_int_equal(delete_group1(f, "del"), 0);
    assert_int_equal(commit1(f, "del", NULL, -1, "b", 3, 12, ""), 0);
    /* a whole group deleted for good */
    assert_int_equal(commit1(f, "gone", NULL, -1, "a", 0, 1, ""), 0);
    assert_int_equal(delete_group1(f, "gone"), 0);
    /* a member that left: the group is Empty, its metadata and offsets stay */
    char *lm = member_alone(f, "left", "L");
    assert_int_equal(commit1(f, "left", lm, 1, "a", 0, 7, "l"), 0);
    assert_int_equal(leave1(f, "left", lm), 0);
    /* a Stable group, rebalanced once: its latest metadata wins */
    char *sm = member_alone(f, "live", "S1");
    join_t j;
    join(f, &j, "live", sm, NULL, 5);
    assert_int_equal(j.done, 1);
    sync_t s;
    const char *ids[] = {sm};
    const char *asg[] = {"S2"};
    sync_req(f, &s, "live", sm, j.resp.generation_id, 1, ids, asg);
    if (!s.done)
        run_until(f, &s.done, 5000);
    assert_int_equal(s.resp.error_code, 0);
    for (int i = 0; i < 50; i++)
        assert_int_equal(commit1(f, "live", sm, j.resp.generation_id, "t", i % 3, 100 + i, "s"), 0);

    static const char *const names[] = {"old", "simple", "offdel", "del", "gone", "left", "live"};
    char *want = dump_groups(f, names, 7);
    /* what it should be, spelled out for a few */
    assert_int_equal(fetch1(f, "old", "t", 0, NULL, 0), -1);
    assert_int_equal(fetch1(f, "offdel", "x", 0, NULL, 0), -1);
    assert_int_equal(fetch1(f, "offdel", "y", 0, NULL, 0), 2);
    assert_int_equal(fetch1(f, "del", "a", 0, NULL, 0), -1);
    assert_int_equal(fetch1(f, "del", "b", 3, NULL, 0), 12);
    assert_int_equal(fetch1(f, "simple", "topic-3", 1, md, sizeof md), 399);
    assert_string_equal(md, "m399");
    assert_int_equal(st_gcoord_group_count(f->c), 5); /* simple offdel del left live */

    int tombs;
    int64_t first;
    int before = log_records(f, &tombs, &first);
    int64_t size_before = st_log_size_bytes(f->log);
    fx_clean(f);
    st_log_clean_stats_t cs;
    st_log_clean_stats(f->log, &cs);
    assert_true(cs.cleans >= 1);
    int after = log_records(f, &tombs, &first);
    assert_true(after < before / 4);
    assert_true(st_log_size_bytes(f->log) < size_before / 2);
    assert_true(tombs > 0); /* kept for delete.retention.ms */
    assert_true(first > 0); /* the first records are gone: a gap at the start */
    fx_restart(f);
    char *got = dump_groups(f, names, 7);
    assert_string_equal(got, want);
    free(got);

    /* a day later (as far as the cleaner knows): the tombstones go in the next clean but one */
    f->clock_skew = 120000;
    for (int round = 0; round < 2; round++) {
        assert_int_equal(commit1(f, "simple", NULL, -1, "topic-0", 0, 396, "m396"), 0);
        fx_clean(f);
    }
    after = log_records(f, &tombs, &first);
    assert_int_equal(tombs, 0);
    fx_restart(f);
    got = dump_groups(f, names, 7);
    assert_string_equal(got, want);
    free(got);
    free(want);
}

/* Many commits to a few keys: the cleaned log holds about one record per key, and the last
 * commit of each key is what a reload finds. */
static void test_cleaning_shrinks_repeated_commits(void **state)
{
    fx_t *f = *state;
    fx_compacted(f, 8 * 1024, 60000);
    char topic[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(topic, sizeof topic, "topic-%d", i % 10);
        assert_int_equal(commit1(f, i % 2 ? "ga" : "gb", NULL, -1, topic, i % 3, i, "meta"), 0);
    }
    int64_t size_before = st_log_size_bytes(f->log);
    assert_true(size_before > 100 * 1024);
    fx_clean(f);
    int tombs;
    int64_t first;
    assert_int_equal(log_records(f, &tombs, &first), 30);
    assert_int_equal(tombs, 0);
    assert_true(st_log_size_bytes(f->log) < 16 * 1024);
    fx_restart(f);
    for (int i = 2970; i < 3000; i++) { /* the last commit of each of the 30 keys */
        snprintf(topic, sizeof topic, "topic-%d", i % 10);
        assert_int_equal(fetch1(f, i % 2 ? "ga" : "gb", topic, i % 3, NULL, 0), i);
    }
}

/* DeleteGroups while a commit to the group is still being written: the commit's record is in
 * the log before the deletion's tombstones, so they must cover its key too, or a reload (and
 * the cleaner, which keeps it as its key's latest) would bring the offset back. */
static void test_delete_group_with_commit_in_flight(void **state)
{
    fx_t *f = *state;
    assert_int_equal(commit1(f, "race", NULL, -1, "a", 0, 1, ""), 0);
    f->hold_syncs = true;
    st_goffset_t p = {.topic = st_kstr("b"), .partition = 0, .offset = 2, .leader_epoch = -1};
    st_goffsets_t o = {.group_id = st_kstr("race"),
                       .member_id = ST_KSTR_EMPTY,
                       .group_instance_id = ST_KSTR_NULL,
                       .generation = -1,
                       .n = 1,
                       .parts = &p};
    int committed = 0, deleted = 0;
    st_gcoord_commit(f->c, 0, &o, on_done, &committed);
    assert_int_equal(committed, 0); /* in flight */
    int16_t err = -1;
    st_gcoord_delete_group(f->c, 0, st_kstr("race"), &err, on_done, &deleted);
    assert_int_equal(deleted, 0);
    fx_release_syncs(f);
    assert_int_equal(committed, 1);
    assert_int_equal(deleted, 1);
    assert_int_equal(p.error, 0);
    assert_int_equal(err, 0);
    assert_int_equal(fetch1(f, "race", "a", 0, NULL, 0), -1);
    assert_int_equal(fetch1(f, "race", "b", 0, NULL, 0), -1);
    assert_int_equal(st_gcoord_group_count(f->c), 0);
    /* the group id is free again at once */
    assert_int_equal(commit1(f, "race", NULL, -1, "c", 0, 3, ""), 0);
    fx_restart(f);
    assert_int_equal(fetch1(f, "race", "a", 0, NULL, 0), -1);
    assert_int_equal(fetch1(f, "race", "b", 0, NULL, 0), -1);
    assert_int_equal(fetch1(f, "race", "c", 0, NULL, 0), 3);
    assert_int_equal(st_gcoord_group_count(f->c), 1);
}

/* An idempotent producer's batch the cleaner emptied stays in the log with no records (as
 * Kafka keeps it); loading walks past it. */
/* Leadership moves away and comes back (st_gcoord_unload, then st_gcoord_load at a new epoch):
 * waiting JoinGroup/SyncGroup are answered NOT_COORDINATOR at once, every request about the
 * partition's groups is NOT_COORDINATOR while it is unloaded, a commit in flight is still
 * answered once durable (its group, out of the table, freed then), and loading again rebuilds
 * every group from the log, that commit included. */
static void test_unload_and_reload(void **state)
{
    fx_t *f = *state;
    assert_int_equal(st_gcoord_epoch(f->c, 0), 0);
    join_t j1, j2;
    char *m1 = join_dynamic(f, &j1, "g1");
    assert_int_equal(j1.resp.error_code, 0);
    sync_t s1;
    const char *ids[] = {m1};
    const char *asg[] = {"A1"};
    sync_req(f, &s1, "g1", m1, 1, 1, ids, asg);
    if (!s1.done)
        run_until(f, &s1.done, 5000);
    assert_int_equal(s1.resp.error_code, 0);
    assert_int_equal(commit1(f, "g1", m1, 1, "t", 0, 5, ""), 0);
    /* a second member's join waits for m1 to rejoin */
    join_dynamic(f, &j2, "g1");
    assert_int_equal(j2.done, 0);
    /* "g3": the leader's SyncGroup waits for its assignment's write */
    join_t j3;
    char *m3 = join_dynamic(f, &j3, "g3");
    assert_int_equal(j3.resp.error_code, 0);
    f->hold_syncs = true;
    sync_t s3;
    const char *ids3[] = {m3};
    sync_req(f, &s3, "g3", m3, 1, 1, ids3, asg);
    assert_int_equal(s3.done, 0);
    /* "g2": a commit from outside any generation, in flight */
    st_goffset_t p = {.topic = st_kstr("t"), .partition = 1, .offset = 9, .leader_epoch = -1};
    st_goffsets_t o = {.group_id = st_kstr("g2"),
                       .member_id = ST_KSTR_EMPTY,
                       .group_instance_id = ST_KSTR_NULL,
                       .generation = -1,
                       .n = 1,
                       .parts = &p};
    int committed = 0;
    st_gcoord_commit(f->c, 0, &o, on_done, &committed);
    assert_int_equal(committed, 0);
    assert_int_equal(st_gcoord_group_count(f->c), 3);

    st_gcoord_unload(f->c, 0);
    assert_false(st_gcoord_loaded(f->c, 0));
    assert_int_equal(st_gcoord_epoch(f->c, 0), -1);
    assert_int_equal(st_gcoord_group_count(f->c), 0);
    assert_int_equal(j2.done, 1);
    assert_int_equal(j2.resp.error_code, ST_KERR_NOT_COORDINATOR);
    assert_int_equal(s3.done, 1);
    assert_int_equal(s3.resp.error_code, ST_KERR_NOT_COORDINATOR);
    assert_int_equal(committed, 0); /* its write is still in flight */
    assert_int_equal(heartbeat(f, "g1", m1, 1, NULL), ST_KERR_NOT_COORDINATOR);
    assert_int_equal(commit1(f, "g1", m1, 1, "t", 0, 6, ""), ST_KERR_NOT_COORDINATOR);
    st_goffset_t q = {.topic = st_kstr("t"), .partition = 0};
    st_goffsets_t fo = {.group_id = st_kstr("g1"), .n = 1, .parts = &q};
    st_gcoord_fetch(f->c, 0, &fo, &f->a);
    assert_int_equal(fo.error, ST_KERR_NOT_COORDINATOR);
    st_gcoord_unload(f->c, 0); /* twice: nothing */

    fx_release_syncs(f);
    assert_int_equal(committed, 1);
    assert_int_equal(p.error, 0); /* durable: answered as written */
    assert_int_equal(s3.done, 1); /* answered once only */

    /* led again, at a later epoch */
    assert_int_equal(st_gcoord_load(f->c, 0, f->log, 4), 0);
    assert_int_equal(st_gcoord_epoch(f->c, 0), 4);
    assert_int_equal(st_gcoord_load(f->c, 0, f->log, 5), ST_E_EXISTS);
    assert_int_equal(fetch1(f, "g1", "t", 0, NULL, 0), 5);
    assert_int_equal(fetch1(f, "g2", "t", 1, NULL, 0), 9);
    /* g1 came back Stable with m1, whose session runs again */
    assert_int_equal(heartbeat(f, "g1", m1, 1, NULL), 0);
    assert_int_equal(commit1(f, "g1", m1, 1, "t", 0, 7, ""), 0);
    assert_int_equal(fetch1(f, "g1", "t", 0, NULL, 0), 7);
}

/* What the partition layer's append refuses with becomes the answer Kafka gives for a
 * coordinator's failed write: leadership moved (or offline) NOT_COORDINATOR, too few in-sync
 * replicas COORDINATOR_NOT_AVAILABLE. */
static int append_refused(void *ctx, int32_t partition, uint8_t *data, size_t len,
                          st_gcoord_appended_t *out, void (*done)(void *arg, int res), void *arg)
{
    (void)out;
    (void)partition;
    (void)data;
    (void)len;
    (void)done;
    (void)arg;
    return *(int *)ctx;
}

static void test_write_errors_map_as_kafka(void **state)
{
    fx_t *f = *state;
    static int refusal;
    fx_close_all(f);
    f->cfg.append = append_refused;
    f->cfg.ctx = &refusal;
    fx_open_log(f);
    fx_coord(f);
    refusal = ST_E_NOT_LEADER;
    assert_int_equal(commit1(f, "g", NULL, -1, "t", 0, 1, ""), ST_KERR_NOT_COORDINATOR);
    refusal = ST_E_CLOSED;
    assert_int_equal(commit1(f, "g", NULL, -1, "t", 0, 1, ""), ST_KERR_NOT_COORDINATOR);
    refusal = ST_E_FEW_REPLICAS;
    assert_int_equal(commit1(f, "g", NULL, -1, "t", 0, 1, ""), ST_KERR_COORDINATOR_NOT_AVAILABLE);
    refusal = ST_E_TOO_LARGE;
    assert_int_equal(commit1(f, "g", NULL, -1, "t", 0, 1, ""), ST_KERR_INVALID_COMMIT_OFFSET_SIZE);
    /* the leader's SyncGroup whose assignment cannot be written */
    join_t j;
    char *m = join_dynamic(f, &j, "s");
    assert_int_equal(j.resp.error_code, 0);
    refusal = ST_E_NOT_LEADER;
    sync_t sy;
    const char *ids[] = {m};
    const char *asg[] = {"A"};
    sync_req(f, &sy, "s", m, 1, 1, ids, asg);
    assert_int_equal(sy.done, 1);
    assert_int_equal(sy.resp.error_code, ST_KERR_NOT_COORDINATOR);
    f->cfg.append = NULL;
}

static void test_load_after_clean_with_empty_batch(void **state)
{
    fx_t *f = *state;
    fx_compacted(f, 1024, 60000);
    st_buf_t k, v;
    st_buf_init(&k);
    st_buf_init(&v);
    st_grec_offset_key(&k, st_kstr("idem"), st_kstr("t"), 0);
    st_grec_offset_value(&v, 1, -1, st_kstr(""), st_wall_ms(), -1);
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), 1 << 20);
    assert_int_equal(st_gbatch_add(&b, k.data, k.len, v.data, (int32_t)v.len), 0);
    assert_int_equal(st_gbatch_finish(&b), 0);
    uint8_t *h = b.out.data;
    st_put_be64(h + ST_BATCH_OFF_PRODUCER_ID, 4711);
    st_put_be16(h + ST_BATCH_OFF_PRODUCER_EPOCH, 0);
    st_put_be32(h + ST_BATCH_OFF_BASE_SEQUENCE, 0);
    st_put_be32(h + ST_BATCH_OFF_CRC, st_batch_compute_crc(h, b.out.len));
    st_log_append_info_t info;
    assert_int_equal(st_log_append(f->log, b.out.data, b.out.len, 0, &info, NULL), 0);
    st_gbatch_fini(&b);
    st_buf_fini(&k);
    st_buf_fini(&v);
    fx_restart(f);
    assert_int_equal(fetch1(f, "idem", "t", 0, NULL, 0), 1);
    for (int i = 2; i < 40; i++)
        assert_int_equal(commit1(f, "idem", NULL, -1, "t", 0, i, ""), 0);
    fx_clean(f);
    int tombs;
    int64_t first;
    assert_int_equal(log_records(f, &tombs, &first), 1);
    assert_int_equal(log_empty_batches, 1);
    fx_restart(f);
    assert_int_equal(fetch1(f, "idem", "t", 0, NULL, 0), 39);
    assert_int_equal(st_gcoord_group_count(f->c), 1);
}

/* Protocol strings are length-delimited: group ids, topics, committed metadata, client ids,
 * member ids and protocol names holding NUL (and bytes that are not UTF-8) come back whole
 * from memory, after a restart, and after a compaction rewrote them. */
static st_kstr_t kb(const char *s, size_t n)
{
    return (st_kstr_t){s, (int32_t)n};
}

static bool kstr_is(st_kstr_t s, const char *want, size_t n)
{
    return s.len == (int32_t)n && memcmp(s.ptr, want, n) == 0;
}

static int16_t commitk(fx_t *f, st_kstr_t group, st_kstr_t topic, int64_t offset,
                       st_kstr_t metadata)
{
    return commit_one(f, group, ST_KSTR_EMPTY, -1, topic, 0, offset, 1, metadata);
}

static int64_t fetchk(fx_t *f, st_kstr_t group, st_kstr_t topic, st_kstr_t *metadata)
{
    st_goffset_t p = {.topic = topic, .partition = 0};
    st_goffsets_t o = {.group_id = group, .n = 1, .parts = &p};
    st_gcoord_fetch(f->c, 0, &o, &f->a);
    assert_int_equal(o.error, 0);
    *metadata = p.metadata;
    return p.offset;
}

static void check_binary_strings(fx_t *f, const char *mid, size_t mid_len)
{
    static const char md[] = "a\0b\xff\xfe\0";
    st_kstr_t got;
    assert_int_equal(fetchk(f, kb("g\0x", 3), kb("t\0y", 3), &got), 7);
    assert_true(kstr_is(got, md, sizeof md - 1));
    /* the prefixes before the NUL are other names */
    assert_int_equal(fetchk(f, kb("g", 1), kb("t\0y", 3), &got), 8);
    assert_true(kstr_is(got, "plain", 5));
    assert_int_equal(fetchk(f, kb("g\0x", 3), kb("t", 1), &got), -1);
    st_kp_describe_groups_resp_group_t d;
    st_kp_describe_groups_resp_group_init(&d);
    st_gcoord_describe(f->c, 0, kb("j\0g", 3), 5, &f->a, &d);
    assert_int_equal(d.error_code, 0);
    assert_true(st_kstr_eq(d.group_state, "Stable"));
    assert_true(kstr_is(d.protocol_data, "r\0a", 3));
    assert_int_equal(d.members_count, 1);
    assert_true(kstr_is(d.members[0].member_id, mid, mid_len));
    assert_true(kstr_is(d.members[0].client_id, "c\0d", 3));
    assert_true(kstr_is(d.members[0].group_instance_id, "i\0n", 3));
    assert_int_equal(d.members[0].member_metadata.len, 3);
    assert_int_equal(memcmp(d.members[0].member_metadata.ptr, "\0\1\0", 3), 0);
    assert_int_equal(d.members[0].member_assignment.len, 2);
    assert_int_equal(memcmp(d.members[0].member_assignment.ptr, "\0\xff", 2), 0);
}

static void test_strings_with_nul_survive(void **state)
{
    fx_t *f = *state;
    static const char md[] = "a\0b\xff\xfe\0";
    assert_int_equal(commitk(f, kb("g\0x", 3), kb("t\0y", 3), 7, kb(md, sizeof md - 1)), 0);
    assert_int_equal(commitk(f, kb("g", 1), kb("t\0y", 3), 8, kb("plain", 5)), 0);

    /* a static member whose client id, instance id and protocol name hold NUL */
    st_kp_join_group_req_protocol_t proto = {{"r\0a", 3}, {(const uint8_t *)"\0\1\0", 3}};
    st_kp_join_group_req_t req;
    st_kp_join_group_req_init(&req);
    req.group_id = kb("j\0g", 3);
    req.session_timeout_ms = 30000;
    req.rebalance_timeout_ms = 300;
    req.member_id = ST_KSTR_EMPTY;
    req.group_instance_id = kb("i\0n", 3);
    req.protocol_type = st_kstr("consumer");
    req.protocols = &proto;
    req.protocols_count = 1;
    join_t j;
    memset(&j, 0, sizeof j);
    st_kp_join_group_resp_init(&j.resp);
    st_gcoord_join(f->c, 0, &req, 5, kb("c\0d", 3), st_kstr("/127.0.0.1"), &f->a, &j.resp, on_done,
                   &j.done);
    if (!j.done)
        run_until(f, &j.done, 5000);
    assert_int_equal(j.resp.error_code, 0);
    /* Kafka's member id: the client id, '-', a UUID (36 characters) */
    st_kstr_t mid = j.resp.member_id;
    assert_int_equal(mid.len, 3 + 1 + 36);
    assert_int_equal(memcmp(mid.ptr, "c\0d-", 4), 0);
    assert_true(kstr_is(j.resp.leader, mid.ptr, (size_t)mid.len));
    assert_true(kstr_is(j.resp.protocol_name, "r\0a", 3));
    char *mid_copy = st_arena_strndup(&f->a, mid.ptr, (size_t)mid.len);
    st_kp_sync_group_req_assignment_t as = {{mid_copy, mid.len}, {(const uint8_t *)"\0\xff", 2}};
    st_kp_sync_group_req_t sreq;
    st_kp_sync_group_req_init(&sreq);
    sreq.group_id = kb("j\0g", 3);
    sreq.member_id = (st_kstr_t){mid_copy, mid.len};
    sreq.group_instance_id = kb("i\0n", 3);
    sreq.generation_id = j.resp.generation_id;
    sreq.assignments = &as;
    sreq.assignments_count = 1;
    sync_t sy;
    memset(&sy, 0, sizeof sy);
    st_kp_sync_group_resp_init(&sy.resp);
    st_gcoord_sync(f->c, 0, &sreq, 5, &f->a, &sy.resp, on_done, &sy.done);
    if (!sy.done)
        run_until(f, &sy.done, 5000);
    assert_int_equal(sy.resp.error_code, 0);
    assert_int_equal(sy.resp.assignment.len, 2);

    check_binary_strings(f, mid_copy, (size_t)mid.len);
    fx_restart(f);
    check_binary_strings(f, mid_copy, (size_t)mid.len);
    /* the cleaner keeps the latest record of each key byte for byte */
    fx_compacted(f, 1024, 60000);
    assert_int_equal(commitk(f, kb("g", 1), kb("t\0y", 3), 8, kb("plain", 5)), 0);
    fx_clean(f);
    st_log_clean_stats_t cs;
    st_log_clean_stats(f->log, &cs);
    assert_int_equal(cs.records_removed, 1);
    fx_restart(f);
    check_binary_strings(f, mid_copy, (size_t)mid.len);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_roundtrip),
        cmocka_unit_test(test_batch_writer),
        cmocka_unit_test(test_partition_for_matches_java),
        cmocka_unit_test_setup_teardown(test_join_sync_heartbeat_and_rebalance, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_max_size, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_static_member_rejoin_and_fencing, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_commit_reload_delete, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_commit_time_and_retention, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_expiry_of_empty_group_offsets, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_cleaned_log_rebuilds_state, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_cleaning_shrinks_repeated_commits, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_unload_and_reload, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_write_errors_map_as_kafka, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_delete_group_with_commit_in_flight, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_load_after_clean_with_empty_batch, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_strings_with_nul_survive, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
