/*
 * test_consumer.c — KIP-848 consumer groups: the uniform and range assignors (balance,
 * coverage, stickiness, subscriptions), one member's reconciliation (revocation before the
 * partition moves, unreleased partitions, the client's word on what it owns), and the
 * coordinator's heartbeats against a real loop and log: epochs, fencing, a session expiry, and
 * the group rebuilt whole from its records after a restart.
 */
#include "group/group_fx.h"

#include "group/assign.h"

static st_kuuid_t tid(uint8_t b)
{
    st_kuuid_t u = {{0}};
    u.b[15] = b;
    u.b[0] = 0x40;
    return u;
}

static st_gtopic_t topic_a = {{"a", 1}, {{0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}}, 10};
static st_gtopic_t topic_b = {{"b", 1}, {{0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}}, 3};

/* Every partition of the topics exactly once across the members' outputs. */
static void assert_exact_cover(st_gassign_member_t *m, int n, const st_gtopic_t **t, int nt)
{
    int total = 0;
    for (int i = 0; i < nt; i++)
        for (int32_t p = 0; p < t[i]->partitions; p++) {
            int owners = 0;
            for (int k = 0; k < n; k++)
                owners += st_gtpset_has(&m[k].out, t[i]->id, p);
            assert_int_equal(owners, 1);
            total++;
        }
    int sum = 0;
    for (int k = 0; k < n; k++)
        sum += m[k].out.n;
    assert_int_equal(sum, total);
}

static void test_uniform_balanced_and_sticky(void **state)
{
    (void)state;
    const st_gtopic_t *ts[] = {&topic_a};
    st_gassign_member_t m[4] = {
        {{"m1", 2}, ts, 1, NULL, {0}},
        {{"m2", 2}, ts, 1, NULL, {0}},
        {{"m3", 2}, ts, 1, NULL, {0}},
        {{"m4", 2}, ts, 1, NULL, {0}},
    };
    assert_int_equal(st_gassign_uniform(m, 3), 0);
    assert_exact_cover(m, 3, ts, 1);
    int counts[3] = {m[0].out.n, m[1].out.n, m[2].out.n};
    for (int i = 0; i < 3; i++)
        assert_true(counts[i] == 3 || counts[i] == 4);
    /* a fourth member: the old ones keep a subset of what they had */
    st_gtpset_t prev[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(st_gtpset_copy(&prev[i], &m[i].out), 0);
        m[i].current = &prev[i];
    }
    assert_int_equal(st_gassign_uniform(m, 4), 0);
    assert_exact_cover(m, 4, ts, 1);
    int moved = 0;
    for (int i = 0; i < 4; i++) {
        assert_true(m[i].out.n == 2 || m[i].out.n == 3);
        for (int k = 0; k < m[i].out.n; k++)
            if (i == 3 || !st_gtpset_has(&prev[i], m[i].out.v[k].topic, m[i].out.v[k].partition))
                moved++;
    }
    assert_int_equal(moved, m[3].out.n); /* only what the new member gets moves */
    for (int i = 0; i < 4; i++)
        st_gtpset_free(&m[i].out);
    for (int i = 0; i < 3; i++)
        st_gtpset_free(&prev[i]);
}

/* What Kafka's uniform assignor gives (librdkafka's 0113 x_incremental_rebalances expects it):
 * 6 partitions, members joining one by one keep their lowest partitions. */
static void test_uniform_as_kafka(void **state)
{
    (void)state;
    st_gtopic_t t6 = topic_a;
    t6.partitions = 6;
    const st_gtopic_t *ts[] = {&t6};
    st_gassign_member_t m[3] = {{{"c0", 2}, ts, 1, NULL, {0}},
                                {{"c1", 2}, ts, 1, NULL, {0}},
                                {{"c2", 2}, ts, 1, NULL, {0}}};
    st_gtpset_t prev[3] = {{0}};
    for (int n = 1; n <= 3; n++) {
        for (int i = 0; i < n; i++)
            m[i].current = &prev[i];
        assert_int_equal(st_gassign_uniform(m, n), 0);
        for (int i = 0; i < n; i++)
            assert_int_equal(st_gtpset_copy(&prev[i], &m[i].out), 0);
    }
    const int want[3][2] = {{0, 1}, {3, 4}, {2, 5}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(m[i].out.n, 2);
        for (int k = 0; k < 2; k++)
            assert_true(st_gtpset_has(&m[i].out, t6.id, want[i][k]));
        st_gtpset_free(&m[i].out);
        st_gtpset_free(&prev[i]);
    }
}

static void test_uniform_heterogeneous(void **state)
{
    (void)state;
    const st_gtopic_t *ta[] = {&topic_a};
    const st_gtopic_t *tab[] = {&topic_a, &topic_b};
    st_gassign_member_t m[2] = {{{"x", 1}, ta, 1, NULL, {0}}, {{"y", 1}, tab, 2, NULL, {0}}};
    assert_int_equal(st_gassign_uniform(m, 2), 0);
    assert_exact_cover(m, 2, tab, 2);
    for (int k = 0; k < m[0].out.n; k++)
        assert_memory_equal(m[0].out.v[k].topic.b, topic_a.id.b, 16); /* x: only topic a */
    assert_int_equal(m[0].out.n + m[1].out.n, 13);
    assert_true(abs(m[0].out.n - m[1].out.n) <= 1);
    st_gtpset_free(&m[0].out);
    st_gtpset_free(&m[1].out);
}

static void test_range_copartitioned(void **state)
{
    (void)state;
    st_gtopic_t a3 = topic_a;
    a3.partitions = 3;
    const st_gtopic_t *ts[] = {&a3, &topic_b};
    /* given out of id order: the ranges follow member ids */
    st_gassign_member_t m[2] = {{{"m2", 2}, ts, 2, NULL, {0}}, {{"m1", 2}, ts, 2, NULL, {0}}};
    assert_int_equal(st_gassign_range(m, 2), 0);
    assert_exact_cover(m, 2, ts, 2);
    assert_int_equal(m[1].out.n, 4);
    assert_true(st_gtpset_has(&m[1].out, a3.id, 0) && st_gtpset_has(&m[1].out, a3.id, 1));
    assert_true(st_gtpset_has(&m[1].out, topic_b.id, 0) && st_gtpset_has(&m[1].out, topic_b.id, 1));
    assert_true(st_gtpset_has(&m[0].out, a3.id, 2) && st_gtpset_has(&m[0].out, topic_b.id, 2));
    assert_non_null(st_gassign_by_name(st_kstr("range")));
    assert_null(st_gassign_by_name(st_kstr("sticky")));
    st_gtpset_free(&m[0].out);
    st_gtpset_free(&m[1].out);
}

/* ---- reconciliation ---- */

static st_gtpset_t tps(int n, const int *p)
{
    st_gtpset_t s = {0};
    for (int i = 0; i < n; i++)
        assert_int_equal(st_gtpset_add(&s, tid(1), p[i]), 0);
    return s;
}

static bool held_set(void *ctx, const st_gtp_t *tp)
{
    return st_gtpset_has(ctx, tp->topic, tp->partition);
}

static void test_reconcile_revoke_then_move(void **state)
{
    (void)state;
    st_gcur_t cur = {.epoch = 1,
                     .prev_epoch = 0,
                     .state = ST_GMS_STABLE,
                     .assigned = tps(4, (int[]){0, 1, 2, 3})};
    st_gtpset_t target = tps(2, (int[]){0, 1}), none = {0};
    st_gtpset_t owned_all = tps(4, (int[]){0, 1, 2, 3}), owned_kept = tps(2, (int[]){0, 1});
    /* the target shrinks: 2 and 3 pending revocation, the epoch stays */
    assert_int_equal(st_greconcile(&cur, 2, &target, &owned_all, held_set, &none), 1);
    assert_int_equal(cur.state, ST_GMS_UNREVOKED);
    assert_int_equal(cur.epoch, 1);
    assert_true(st_gtpset_eq(&cur.assigned, &owned_kept));
    assert_int_equal(cur.revoking.n, 2);
    /* still owned (or nothing said): no change */
    assert_int_equal(st_greconcile(&cur, 2, &target, &owned_all, held_set, &none), 0);
    assert_int_equal(st_greconcile(&cur, 2, &target, NULL, held_set, &none), 0);
    /* revoked: the new epoch */
    assert_int_equal(st_greconcile(&cur, 2, &target, &owned_kept, held_set, &none), 1);
    assert_int_equal(cur.state, ST_GMS_STABLE);
    assert_int_equal(cur.epoch, 2);
    assert_int_equal(cur.prev_epoch, 1);
    assert_int_equal(cur.revoking.n, 0);

    /* the other member: 2 and 3 are its target, held until revoked */
    st_gcur_t other = {.epoch = 0, .state = ST_GMS_STABLE};
    st_gtpset_t t2 = tps(2, (int[]){2, 3}), holder = tps(2, (int[]){2, 3});
    assert_int_equal(st_greconcile(&other, 2, &t2, NULL, held_set, &holder), 1);
    assert_int_equal(other.state, ST_GMS_UNRELEASED);
    assert_int_equal(other.epoch, 2);
    assert_int_equal(other.assigned.n, 0);
    st_gtpset_clear(&holder);
    assert_int_equal(st_gtpset_add(&holder, tid(1), 3), 0);
    assert_int_equal(st_greconcile(&other, 2, &t2, NULL, held_set, &holder), 1);
    assert_int_equal(other.assigned.n, 1); /* 2 released, 3 not yet */
    assert_int_equal(other.state, ST_GMS_UNRELEASED);
    st_gtpset_clear(&holder);
    assert_int_equal(st_greconcile(&other, 2, &t2, NULL, held_set, &holder), 1);
    assert_int_equal(other.state, ST_GMS_STABLE);
    assert_true(st_gtpset_eq(&other.assigned, &t2));
    st_gtpset_t *all[] = {&cur.assigned,   &cur.revoking, &other.assigned,
                          &other.revoking, &target,       &owned_all,
                          &owned_kept,     &t2,           &holder};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        st_gtpset_free(all[i]);
}

/* ---- the coordinator ---- */

static int topics_version(void *ctx)
{
    (void)ctx;
    return 1;
}

static int64_t topics_version64(void *ctx)
{
    return topics_version(ctx);
}

static int topics_list(void *ctx, st_gtopic_t **out, int *n)
{
    (void)ctx;
    *out = calloc(1, sizeof **out);
    (*out)[0] = topic_a;
    (*out)[0].name = (st_kstr_t){strdup("a"), 1};
    *n = 1;
    return 0;
}

typedef struct {
    st_kp_consumer_group_heartbeat_resp_t resp;
    int done;
} hb_t;

static int32_t hb_rebalance_ms = 60000; /* the rebalance timeout joins ask for */

static hb_t *hb(fx_t *f, const char *member, int32_t epoch, bool join, const int *owned, int nowned)
{
    static hb_t h;
    st_kp_consumer_group_heartbeat_req_t q;
    st_kp_consumer_group_heartbeat_req_init(&q);
    st_kstr_t names[] = {st_kstr("a")};
    st_kp_consumer_group_heartbeat_req_topic_partition_t tp = {topic_a.id, (int32_t *)owned,
                                                               nowned};
    q.group_id = st_kstr("cg");
    q.member_id = st_kstr(member);
    q.member_epoch = epoch;
    if (join) {
        q.rebalance_timeout_ms = hb_rebalance_ms;
        q.subscribed_topic_names = names;
        q.subscribed_topic_names_count = 1;
        q.topic_partitions_count = 0;
    }
    if (owned) {
        q.topic_partitions = &tp;
        q.topic_partitions_count = 1;
    }
    memset(&h, 0, sizeof h);
    st_kp_consumer_group_heartbeat_resp_init(&h.resp);
    st_gcoord_consumer_heartbeat(f->c, 0, &q, 1, st_kstr("cli"), st_kstr("/127.0.0.1"), &f->a,
                                 &h.resp, on_done, &h.done);
    assert_true(run_until(f, &h.done, 2000));
    return &h;
}

static int assigned_count(const hb_t *h)
{
    if (h->resp.assignment_null)
        return -1;
    int n = 0;
    for (int i = 0; i < h->resp.assignment.topic_partitions_count; i++)
        n += h->resp.assignment.topic_partitions[i].partitions_count;
    return n;
}

static st_kp_consumer_group_describe_resp_group_t describe_cg(fx_t *f)
{
    st_kp_consumer_group_describe_resp_group_t g;
    st_kp_consumer_group_describe_resp_group_init(&g);
    g.group_id = st_kstr("cg");
    st_gcoord_consumer_describe(f->c, 0, 1, &f->a, &g);
    return g;
}

static void cfg_consumer(fx_t *f, int32_t session_ms)
{
    fx_close_all(f);
    f->cfg.topics_version = topics_version64;
    f->cfg.topics = topics_list;
    f->cfg.consumer_session_timeout_ms = session_ms;
    f->cfg.consumer_heartbeat_interval_ms = 50;
    fx_open_log(f);
    fx_coord(f);
}

static void test_heartbeats_and_reload(void **state)
{
    fx_t *f = *state;
    cfg_consumer(f, 60000);
    hb_t *h = hb(f, "m1", 0, true, NULL, 0);
    assert_int_equal(h->resp.error_code, 0);
    assert_int_equal(h->resp.member_epoch, 1);
    assert_int_equal(h->resp.heartbeat_interval_ms, 50);
    assert_int_equal(assigned_count(h), 10);
    h = hb(f, "m2", 0, true, NULL, 0);
    assert_int_equal(h->resp.member_epoch, 2);
    assert_int_equal(assigned_count(h), 0); /* m1 holds everything */
    assert_int_equal(hb(f, "m1", 5, false, NULL, 0)->resp.error_code, ST_KERR_FENCED_MEMBER_EPOCH);
    /* m1 is asked to revoke; it does; m2 gets what m1 gave up */
    int all[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    h = hb(f, "m1", 1, false, all, 10);
    assert_int_equal(h->resp.member_epoch, 1);
    int kept = assigned_count(h);
    assert_true(kept == 5);
    int k[5];
    for (int i = 0; i < 5; i++)
        k[i] = h->resp.assignment.topic_partitions[0].partitions[i];
    h = hb(f, "m1", 1, false, k, 5);
    assert_int_equal(h->resp.member_epoch, 2);
    h = hb(f, "m2", 2, false, NULL, 0);
    assert_int_equal(assigned_count(h), 5);
    st_kp_consumer_group_describe_resp_group_t g = describe_cg(f);
    assert_int_equal(g.error_code, 0);
    assert_string_equal(g.group_state.ptr, "Stable");
    assert_int_equal(g.group_epoch, 2);
    assert_int_equal(g.members_count, 2);
    /* a commit with the member's epoch is taken, with another one it is stale */
    assert_int_equal(commit1(f, "cg", "m2", 2, "a", 7, 70, ""), 0);
    assert_int_equal(commit1(f, "cg", "m2", 1, "a", 7, 71, ""), ST_KERR_STALE_MEMBER_EPOCH);

    /* restart: the same group from the log */
    fx_restart(f);
    g = describe_cg(f);
    assert_int_equal(g.error_code, 0);
    assert_string_equal(g.group_state.ptr, "Stable");
    assert_int_equal(g.group_epoch, 2);
    assert_int_equal(g.assignment_epoch, 2);
    assert_int_equal(g.members_count, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(g.members[i].member_epoch, 2);
        assert_int_equal(g.members[i].assignment.topic_partitions[0].partitions_count, 5);
        assert_int_equal(g.members[i].target_assignment.topic_partitions[0].partitions_count, 5);
    }
    assert_int_equal(fetch1(f, "cg", "a", 7, NULL, 0), 70);
    /* the members go on at their epochs, no rebalance */
    h = hb(f, "m2", 2, false, NULL, 0);
    assert_int_equal(h->resp.error_code, 0);
    assert_int_equal(h->resp.member_epoch, 2);
    assert_int_equal(describe_cg(f).group_epoch, 2);
    /* leave: m1 goes, m2 gets everything at a new epoch */
    h = hb(f, "m1", -1, false, NULL, 0);
    assert_int_equal(h->resp.error_code, 0);
    assert_int_equal(h->resp.member_epoch, -1);
    h = hb(f, "m2", 2, false, NULL, 0);
    assert_int_equal(h->resp.member_epoch, 3);
    assert_int_equal(assigned_count(h), 10);
}

static void test_session_expiry_fences(void **state)
{
    fx_t *f = *state;
    cfg_consumer(f, 80);
    assert_int_equal(hb(f, "m1", 0, true, NULL, 0)->resp.member_epoch, 1);
    volatile int never = 0;
    run_until(f, &never, 300);
    st_kp_consumer_group_describe_resp_group_t g = describe_cg(f);
    assert_int_equal(g.members_count, 0);
    assert_string_equal(g.group_state.ptr, "Empty");
    assert_int_equal(g.group_epoch, 2);
    assert_int_equal(hb(f, "m1", 1, false, NULL, 0)->resp.error_code, ST_KERR_UNKNOWN_MEMBER_ID);
}

/* A member that does not revoke within its rebalance timeout is fenced; the partitions go on. */
static void test_revocation_deadline_fences(void **state)
{
    fx_t *f = *state;
    cfg_consumer(f, 60000);
    hb_rebalance_ms = 100;
    assert_int_equal(assigned_count(hb(f, "m1", 0, true, NULL, 0)), 10);
    hb_rebalance_ms = 60000;
    assert_int_equal(hb(f, "m2", 0, true, NULL, 0)->resp.member_epoch, 2);
    int all[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    hb_t *h = hb(f, "m1", 1, false, all, 10);
    assert_int_equal(h->resp.member_epoch, 1);
    assert_int_equal(assigned_count(h), 5); /* asked to give 5 up, it never does */
    volatile int never = 0;
    run_until(f, &never, 400);
    st_kp_consumer_group_describe_resp_group_t g = describe_cg(f);
    assert_int_equal(g.members_count, 1);
    assert_int_equal(g.group_epoch, 3);
    h = hb(f, "m2", 2, false, NULL, 0);
    assert_int_equal(h->resp.member_epoch, 3);
    assert_int_equal(assigned_count(h), 10);
    assert_int_equal(hb(f, "m1", 1, false, all, 10)->resp.error_code, ST_KERR_UNKNOWN_MEMBER_ID);
}

/* group.consumer.max.size: a member more is refused, the ones there go on, a member leaving
 * makes room, and a member already there rejoining (epoch 0) is not one more. */
static void test_max_size(void **state)
{
    fx_t *f = *state;
    f->cfg.consumer_max_size = 2;
    cfg_consumer(f, 60000);
    assert_int_equal(hb(f, "m1", 0, true, NULL, 0)->resp.error_code, 0);
    assert_int_equal(hb(f, "m2", 0, true, NULL, 0)->resp.error_code, 0);
    hb_t *h = hb(f, "m3", 0, true, NULL, 0);
    assert_int_equal(h->resp.error_code, ST_KERR_GROUP_MAX_SIZE_REACHED);
    assert_non_null(h->resp.error_message.ptr);
    assert_int_equal(describe_cg(f).members_count, 2);
    assert_int_equal(describe_cg(f).group_epoch, 2); /* the refusal changed nothing */
    assert_int_equal(hb(f, "m2", 0, true, NULL, 0)->resp.error_code, 0);
    assert_int_equal(hb(f, "m1", -1, false, NULL, 0)->resp.error_code, 0);
    h = hb(f, "m3", 0, true, NULL, 0);
    assert_int_equal(h->resp.error_code, 0);
    assert_int_equal(describe_cg(f).members_count, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_balanced_and_sticky),
        cmocka_unit_test(test_uniform_as_kafka),
        cmocka_unit_test(test_uniform_heterogeneous),
        cmocka_unit_test(test_range_copartitioned),
        cmocka_unit_test(test_reconcile_revoke_then_move),
        cmocka_unit_test_setup_teardown(test_heartbeats_and_reload, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_session_expiry_fences, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_revocation_deadline_fences, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_max_size, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
