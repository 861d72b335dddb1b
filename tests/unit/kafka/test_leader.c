/* Unit tests for kafka/leader: who may serve a partition, on a single broker and in a cluster,
 * which followers may fetch from it, the KIP-951 hints, the group coordinator's broker
 * (group_route.h), and the layout of a cluster's producer ids (pid.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "kafka/group_route.h"
#include "kafka/leader.h"
#include "kafka/pid.h"
#include "partition/part_impl.h" /* partitions built field by field as fixtures */
#include "proto/kerr.h"

/* A snapshot of brokers 1, 2 (fenced) and 3 (rack "r3"), and topic "t" of three partitions:
 *   0: replicas 1,2,3  leader 1, epoch 5, on shard 0 here
 *   1: replicas 2,3    leader 3, epoch 2 (broker 1 is no replica)
 *   2: replicas 1,3    leader -1, epoch 7 */
typedef struct {
    st_config_t cfg;
    st_broker_t b;
    st_kshard_t s;
    st_md_t *md;
    const st_md_topic_t *t;
} fixture_t;

static void set_part(st_md_topic_t *t, int32_t i, int32_t leader, int32_t epoch, int32_t shard,
                     int n, const int32_t *replicas)
{
    st_md_partition_t *p = &t->partitions[i];
    p->leader = leader;
    p->leader_epoch = epoch;
    p->shard = shard;
    p->nreplicas = p->nisr = (int16_t)n;
    memcpy(p->replicas, replicas, (size_t)n * sizeof *replicas);
    memcpy(p->isr, replicas, (size_t)n * sizeof *replicas);
}

static int setup(void **state)
{
    static fixture_t f;
    memset(&f, 0, sizeof f);
    f.md = st_md_new("cluster", 1);
    st_md_put_broker(
        f.md, &(st_md_broker_t){.node_id = 1, .host = "h1", .port = 9091, .incarnation = 77});
    f.md->self_incarnation = 77; /* this process: registered and unfenced */
    st_md_put_broker(f.md,
                     &(st_md_broker_t){.node_id = 2, .host = "h2", .port = 9092, .fenced = true});
    st_md_put_broker(f.md,
                     &(st_md_broker_t){.node_id = 3, .host = "h3", .port = 9093, .rack = "r3"});
    uint8_t id[16] = {1, 2, 3};
    st_md_topic_t *t = st_md_topic_new("t", id, 3);
    set_part(t, 0, 1, 5, 0, 3, (int32_t[]){1, 2, 3});
    set_part(t, 1, 3, 2, -1, 2, (int32_t[]){2, 3});
    set_part(t, 2, -1, 7, 0, 2, (int32_t[]){1, 3});
    assert_int_equal(st_md_add_topic(f.md, t), 0);
    f.t = st_md_find(f.md, "t", 1);
    f.cfg.node_id = 1;
    f.b.cfg = &f.cfg;
    f.s.b = &f.b;
    f.s.md = f.md;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    st_md_unref(f->md);
    return 0;
}

static void test_cluster_check(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(st_kleader_check(&f->s, f->t, 0, -1), 0);
    assert_int_equal(st_kleader_check(&f->s, f->t, 0, 5), 0);
    assert_int_equal(st_kleader_check(&f->s, f->t, 0, 4), ST_KERR_FENCED_LEADER_EPOCH);
    assert_int_equal(st_kleader_check(&f->s, f->t, 0, 6), ST_KERR_UNKNOWN_LEADER_EPOCH);
    /* Not a replica here: whatever the epoch. */
    assert_int_equal(st_kleader_check(&f->s, f->t, 1, 0), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    /* A replica of a partition without a leader: the epoch first, as Kafka. */
    assert_int_equal(st_kleader_check(&f->s, f->t, 2, -1), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(st_kleader_check(&f->s, f->t, 2, 6), ST_KERR_FENCED_LEADER_EPOCH);
    /* Unknown topic or partition: the handler's own answer. */
    assert_int_equal(st_kleader_check(&f->s, NULL, 0, -1), 0);
    assert_int_equal(st_kleader_check(&f->s, f->t, 3, -1), 0);
    /* This broker leads, but no shard has the partition open yet. */
    st_md_topic_t *t = (st_md_topic_t *)f->t;
    t->partitions[0].shard = -1;
    assert_int_equal(st_kleader_check(&f->s, f->t, 0, -1), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    t->partitions[0].shard = 0;
}

/* A broker acts on no leadership until its metadata shows this incarnation unfenced: a
 * restarted broker's replayed metadata (its old incarnation, or none yet) and a fenced
 * broker's both answer NOT_LEADER_OR_FOLLOWER, to producers, consumers and followers alike. */
static void test_not_current_leads_nothing(void **state)
{
    fixture_t *f = *state;
    st_part_t part = {.index = 0, .topic = "t"};
    memcpy(part.topic_id, f->t->id, 16);
    assert_int_equal(st_kleader_follower(&f->s, f->t, 0, 2), 0);
    uint64_t inc[] = {76, 0};
    for (int i = 0; i < 2; i++) {
        f->md->self_incarnation = inc[i];
        assert_int_equal(st_kleader_check(&f->s, f->t, 0, 5), ST_KERR_NOT_LEADER_OR_FOLLOWER);
        assert_int_equal(st_kleader_local(&f->s, &part), ST_KERR_NOT_LEADER_OR_FOLLOWER);
        assert_int_equal(st_kleader_follower(&f->s, f->t, 0, 2), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    }
    f->md->self_incarnation = 77;
    st_md_broker_t me = {.node_id = 1, .host = "h1", .port = 9091, .incarnation = 77};
    me.fenced = true;
    st_md_put_broker(f->md, &me);
    assert_int_equal(st_kleader_check(&f->s, f->t, 0, 5), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(st_kleader_local(&f->s, &part), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    me.fenced = false;
    st_md_put_broker(f->md, &me);
    assert_int_equal(st_kleader_check(&f->s, f->t, 0, 5), 0);
    assert_int_equal(st_kleader_local(&f->s, &part), 0);
}

/* A single broker is its quorum's only voter and every partition's only replica: once its
 * registration is current it passes every check, and it has no follower. */
static void test_single_broker_passes(void **state)
{
    (void)state;
    st_config_t cfg = {.node_id = 0};
    st_broker_t b = {.cfg = &cfg};
    st_md_t *md = st_md_new("single", 0);
    st_md_put_broker(md, &(st_md_broker_t){.node_id = 0, .host = "h", .port = 1, .incarnation = 5});
    md->self_incarnation = 5;
    uint8_t id[16] = {9};
    st_md_topic_t *t = st_md_topic_new("solo", id, 3);
    for (int32_t p = 0; p < 3; p++)
        set_part(t, p, 0, 2, 0, 1, (int32_t[]){0});
    assert_int_equal(st_md_add_topic(md, t), 0);
    const st_md_topic_t *mt = st_md_find(md, "solo", 4);
    st_kshard_t s = {.b = &b, .md = md};
    for (int32_t p = 0; p < 3; p++) {
        assert_int_equal(st_kleader_check(&s, mt, p, -1), 0);
        assert_int_equal(st_kleader_check(&s, mt, p, 2), 0);
    }
    st_part_t part = {.index = 1, .topic = "solo"};
    memcpy(part.topic_id, id, 16);
    assert_int_equal(st_kleader_local(&s, &part), 0);
    assert_int_equal(st_kleader_follower(&s, mt, 0, 1), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    int32_t leader = -9, epoch = -9;
    assert_false(st_kleader_current(&s, id, 1, 0, &leader, &epoch));
    assert_int_equal(leader, -9);
    st_md_unref(md);
}

static void test_owner_rechecks(void **state)
{
    fixture_t *f = *state;
    st_part_t part = {.index = 0, .topic = "t"};
    memcpy(part.topic_id, f->t->id, 16);
    assert_int_equal(st_kleader_local(&f->s, &part), 0);
    assert_int_equal(st_kleader_local(&f->s, NULL), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    part.index = 2; /* no leader */
    assert_int_equal(st_kleader_local(&f->s, &part), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    part.index = 0;
    f->s.id = 1; /* another shard owns it */
    assert_int_equal(st_kleader_local(&f->s, &part), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    f->s.id = 0;
    part.topic_id[0] ^= 1; /* a topic of the same name, deleted and created again */
    assert_int_equal(st_kleader_local(&f->s, &part), ST_KERR_NOT_LEADER_OR_FOLLOWER);
}

static void test_follower_fetch(void **state)
{
    fixture_t *f = *state;
    /* Partition 0 (replicas 1,2,3) is led here: brokers 2 and 3 follow it, whatever their
     * fencing (a fenced follower fetches to catch up). */
    assert_int_equal(st_kleader_follower(&f->s, f->t, 0, 2), 0);
    assert_int_equal(st_kleader_follower(&f->s, f->t, 0, 3), 0);
    assert_int_equal(st_kleader_follower(&f->s, f->t, 0, 1), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(st_kleader_follower(&f->s, f->t, 0, 4), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    /* partition 2 (replicas 1,3): broker 2 is no replica */
    assert_int_equal(st_kleader_follower(&f->s, f->t, 2, 2), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    /* unknown topic or partition: the handler's own answer */
    assert_int_equal(st_kleader_follower(&f->s, NULL, 0, 2), 0);
    assert_int_equal(st_kleader_follower(&f->s, f->t, 3, 2), 0);

    /* On the owner: the partition's own role. */
    st_part_t part = {.index = 0, .topic = "t"};
    assert_int_equal(st_kleader_follower_local(&part, 2), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    part.repl.on = true;
    part.repl.role = (st_part_role_t){
        .leader = true, .self = 1, .leader_id = 1, .nreplicas = 3, .replicas = {1, 2, 3}};
    assert_int_equal(st_kleader_follower_local(&part, 2), 0);
    assert_int_equal(st_kleader_follower_local(&part, 3), 0);
    assert_int_equal(st_kleader_follower_local(&part, 1), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(st_kleader_follower_local(&part, 5), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    part.repl.role.leader = false; /* a follower serves no follower */
    part.repl.role.leader_id = 2;
    assert_int_equal(st_kleader_follower_local(&part, 3), ST_KERR_NOT_LEADER_OR_FOLLOWER);
}

static void test_producer_ids(void **state)
{
    (void)state;
    int64_t t = ST_KPID_EPOCH_MS + 123456789;
    int64_t b1 = st_kpid_base(1, t), b2 = st_kpid_base(2, t);
    assert_int_equal(b1 >> 53, 1);
    assert_int_equal(b2 >> 53, 2);
    assert_int_equal((b1 >> 12) & ((INT64_C(1) << 41) - 1), 123456789);
    assert_int_equal(b1 & 4095, 0);
    /* the largest node id that fits, in 2093: still a positive int64 */
    int64_t last = st_kpid_base(1023, ST_KPID_EPOCH_MS + (INT64_C(1) << 41) - 1);
    assert_true(last > 0);
    assert_int_equal(last >> 53, 1023);
    /* a run: ids from the first one's millisecond, one after another, the counter carrying
     * into the milliseconds */
    _Atomic int64_t next = 0;
    assert_int_equal(st_kpid_next(&next, 1, t), b1);
    assert_int_equal(st_kpid_next(&next, 1, t + 50), b1 + 1);
    for (int i = 2; i < 5000; i++)
        assert_int_equal(st_kpid_next(&next, 1, t), b1 + i);
    /* the next run, later than this one handed out: above all of its ids */
    _Atomic int64_t again = 0;
    assert_true(st_kpid_next(&again, 1, t + 2) > b1 + 4999);
    /* another broker's run at the same moment: disjoint */
    _Atomic int64_t other = 0;
    int64_t o = st_kpid_next(&other, 2, t);
    assert_true(o > b1 + 4999 || o + 4999 < b1);
    /* node ids past 1023 fold (pid.h's limit); a clock before 2024 starts at 0 */
    assert_int_equal(st_kpid_base(1025, t), st_kpid_base(1, t));
    assert_int_equal(st_kpid_base(0, 0), 0);
}

static void test_hints(void **state)
{
    fixture_t *f = *state;
    int32_t id = -9, epoch = -9;
    assert_true(
        st_kleader_current(&f->s, f->t->id, 1, ST_KERR_NOT_LEADER_OR_FOLLOWER, &id, &epoch));
    assert_int_equal(id, 3);
    assert_int_equal(epoch, 2);
    assert_true(st_kleader_current(&f->s, f->t->id, 0, ST_KERR_FENCED_LEADER_EPOCH, &id, &epoch));
    assert_int_equal(id, 1);
    assert_false(st_kleader_current(&f->s, f->t->id, 2, ST_KERR_NOT_LEADER_OR_FOLLOWER, &id,
                                    &epoch)); /* no leader */
    assert_false(st_kleader_current(&f->s, f->t->id, 1, ST_KERR_UNKNOWN_LEADER_EPOCH, &id, &epoch));

    st_arena_t a;
    st_arena_init(&a, 1024);
    const st_md_broker_t **b;
    int32_t ids[] = {3, 2, 3, 1, 7};
    assert_int_equal(st_kleader_brokers(&a, f->md, ids, 5, &b), 2); /* 2 fenced, 7 unknown */
    assert_int_equal(b[0]->node_id, 1);
    assert_int_equal(b[1]->node_id, 3);
    assert_string_equal(b[1]->rack, "r3");
    st_arena_fini(&a);

    assert_true(st_md_broker_live(f->md, 1));
    assert_false(st_md_broker_live(f->md, 2));
    assert_false(st_md_broker_live(f->md, 4));
}

static void test_group_coordinator(void **state)
{
    fixture_t *f = *state;
    uint8_t id[16] = {9};
    st_md_topic_t *t = st_md_topic_new(ST_OFFSETS_TOPIC, id, 2);
    set_part(t, 0, 3, 1, -1, 2, (int32_t[]){2, 3});
    set_part(t, 1, 1, 1, 0, 2, (int32_t[]){1, 3});
    assert_int_equal(st_md_add_topic(f->md, t), 0);
    /* Kafka's abs(hashCode) % 2: "a" (97) -> 1, "b" (98) -> 0. */
    assert_int_equal(st_coordsvc_coordinator(&st_kgroup_service, f->md, st_kstr("a")), 1);
    assert_int_equal(st_coordsvc_coordinator(&st_kgroup_service, f->md, st_kstr("b")), 3);
    assert_true(st_kgroup_leads(&f->s, 1));
    assert_false(st_kgroup_leads(&f->s, 0));
    assert_false(st_kgroup_leads(&f->s, -1));
    assert_int_equal(st_md_remove_topic(f->md, ST_OFFSETS_TOPIC), 0);
    assert_int_equal(st_coordsvc_coordinator(&st_kgroup_service, f->md, st_kstr("a")), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cluster_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_current_leads_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_single_broker_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_owner_rechecks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_follower_fetch, setup, teardown),
        cmocka_unit_test(test_producer_ids),
        cmocka_unit_test_setup_teardown(test_hints, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_coordinator, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
