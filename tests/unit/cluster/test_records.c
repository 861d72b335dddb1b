/* test_records.c — the metadata log's records: placement, elections, applying, snapshots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/err.h"
#include "cluster/ops.h"
#include "cluster/records.h"
#include "proto/kerr.h"

static st_md_t *cluster(int n, const char *const *racks)
{
    st_md_t *md = st_md_new("c1", 1);
    for (int i = 1; i <= n; i++) {
        st_md_broker_t b = {.node_id = i,
                            .host = "127.0.0.1",
                            .port = 9000 + i,
                            .rack = racks ? (char *)racks[i - 1] : NULL,
                            .incarnation = 7};
        assert_int_equal(st_md_put_broker(md, &b), 0);
    }
    return md;
}

static void fence(st_md_t *md, int32_t node, bool fenced)
{
    st_md_broker_t b = *st_md_broker(md, node);
    b.fenced = fenced;
    assert_int_equal(st_md_put_broker(md, &b), 0);
}

static void test_place_spreads_leaders_and_replicas(void **state)
{
    (void)state;
    st_md_t *md = cluster(3, NULL);
    st_md_partition_t p[6];
    char msg[200];
    assert_int_equal(st_rec_place(md, 6, 3, 5, p, msg, sizeof msg), 0);
    int leads[4] = {0}, follows[4][4] = {{0}};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(p[i].nreplicas, 3);
        assert_int_equal(p[i].nisr, 3);
        assert_int_equal(p[i].leader, p[i].replicas[0]);
        for (int a = 0; a < 3; a++)
            for (int b = a + 1; b < 3; b++)
                assert_int_not_equal(p[i].replicas[a], p[i].replicas[b]);
        leads[p[i].leader]++;
        follows[p[i].replicas[0]][p[i].replicas[1]]++;
    }
    for (int b = 1; b <= 3; b++)
        assert_int_equal(leads[b], 2);
    /* the first follower is not always the same one for a given leader */
    for (int b = 1; b <= 3; b++)
        assert_true(follows[b][b % 3 + 1] == 1);
    assert_int_equal(st_rec_place(md, 1, 4, 0, p, msg, sizeof msg), ST_E_INVALID);
    assert_non_null(strstr(msg, "only 3 broker(s)"));
    fence(md, 2, true);
    assert_int_equal(st_rec_place(md, 1, 3, 0, p, msg, sizeof msg), ST_E_INVALID);
    assert_int_equal(st_rec_place(md, 4, 2, 0, p, msg, sizeof msg), 0);
    for (int i = 0; i < 4; i++)
        assert_false(st_md_is_replica(&p[i], 2));
    st_md_unref(md);
}

static void test_place_alternates_racks(void **state)
{
    (void)state;
    const char *racks[] = {"a", "a", "b", "b"};
    st_md_t *md = cluster(4, racks);
    st_md_partition_t p[8];
    char msg[200];
    assert_int_equal(st_rec_place(md, 8, 2, 0, p, msg, sizeof msg), 0);
    for (int i = 0; i < 8; i++) {
        const st_md_broker_t *x = st_md_broker(md, p[i].replicas[0]);
        const st_md_broker_t *y = st_md_broker(md, p[i].replicas[1]);
        assert_string_not_equal(x->rack, y->rack);
    }
    st_md_unref(md);
}

static st_md_partition_t part3(void)
{
    st_md_partition_t p = {.leader = 1, .nreplicas = 3, .nisr = 3};
    for (int i = 0; i < 3; i++)
        p.replicas[i] = p.isr[i] = i + 1;
    return p;
}

static void test_elect_moves_leadership_within_the_isr(void **state)
{
    (void)state;
    st_md_t *md = cluster(3, NULL);
    st_md_partition_t p = part3();
    assert_false(st_rec_elect(md, &p, false));
    fence(md, 1, true);
    assert_true(st_rec_elect(md, &p, false));
    assert_int_equal(p.leader, 2);
    assert_int_equal(p.leader_epoch, 1);
    assert_int_equal(p.partition_epoch, 1);
    assert_int_equal(p.nisr, 2);
    assert_false(st_md_in_isr(&p, 1));
    fence(md, 2, true);
    fence(md, 3, true);
    assert_true(st_rec_elect(md, &p, false));
    assert_int_equal(p.leader, -1); /* nobody live in the ISR, clean elections only */
    assert_int_equal(p.nisr, 1);    /* the last leader stays: it holds every record */
    assert_int_equal(p.isr[0], 2);
    fence(md, 1, false);
    assert_false(st_rec_elect(md, &p, false));
    assert_true(st_rec_elect(md, &p, true)); /* unclean: an out-of-sync live replica leads */
    assert_int_equal(p.leader, 1);
    assert_int_equal(p.nisr, 1);
    assert_int_equal(p.isr[0], 1);
    st_md_unref(md);
}

static void test_preferred_election(void **state)
{
    (void)state;
    st_md_t *md = cluster(3, NULL);
    st_md_partition_t p = part3();
    p.leader = 2;
    assert_true(st_rec_elect_preferred(md, &p));
    assert_int_equal(p.leader, 1);
    assert_false(st_rec_elect_preferred(md, &p));
    p.leader = 2;
    fence(md, 1, true);
    assert_false(st_rec_elect_preferred(md, &p));
    st_md_unref(md);
}

/* Applies records as one entry at index. */
static void apply(st_md_t *md, json_t *records, int64_t index)
{
    size_t len;
    void *e = st_rec_entry(records, &len, NULL);
    assert_non_null(e);
    assert_int_equal(len % 8, 0);
    st_rec_apply(md, e, len, index);
    free(e);
    json_decref(records);
}

static st_md_topic_t *topic(const char *name, uint8_t idbyte, int32_t n)
{
    uint8_t id[16];
    memset(id, idbyte, sizeof id);
    st_md_topic_t *t = st_md_topic_new(name, id, n);
    for (int32_t i = 0; i < n; i++)
        t->partitions[i] = part3();
    st_md_topic_set_config(t, "retention.ms", "1000");
    t->replication_factor = 3;
    return t;
}

/* SCRAM credentials: applied, replaced, removed, kept by snapshots (and a snapshot without
 * any, as written before they existed, restores); the controller's SCRAM op. */
static void test_scram_records(void **state)
{
    (void)state;
    st_md_t *md = st_md_new("c1", -1);
    st_md_scram_t a = {.user = "alice",
                       .mechanism = 1,
                       .iterations = 4096,
                       .salt_len = 3,
                       .key_len = 32,
                       .salt = {1, 2, 3}};
    memset(a.stored_key, 0x11, 32);
    memset(a.server_key, 0x22, 32);
    st_md_scram_t b = a;
    b.mechanism = 2;
    b.key_len = 64;
    json_t *r = json_array();
    json_array_append_new(r, st_rec_scram(&b));
    json_array_append_new(r, st_rec_scram(&a));
    apply(md, r, 2);
    assert_int_equal(md->nscram, 2);
    const st_md_scram_t *got = st_md_find_scram(md, "alice", 1);
    assert_non_null(got);
    assert_int_equal(got->iterations, 4096);
    assert_memory_equal(got->stored_key, a.stored_key, 32);
    assert_memory_equal(got->salt, a.salt, 3);
    assert_int_equal(md->scram[0].mechanism, 1); /* sorted by user, then mechanism */

    size_t len;
    char *snap = st_rec_snapshot(md, &len, NULL);
    st_md_t *copy = st_md_new("", -1);
    assert_int_equal(st_rec_restore(copy, snap, len), 0);
    assert_int_equal(copy->nscram, 2);
    assert_memory_equal(copy->scram, md->scram, 2 * sizeof *md->scram);
    const char old[] = "{\"v\":1,\"cluster\":\"c\",\"brokers\":[],\"topics\":[]}";
    assert_int_equal(st_rec_restore(copy, old, sizeof old - 1), 0);
    assert_int_equal(copy->nscram, 0);

    r = json_array();
    json_array_append_new(r, st_rec_remove_scram("alice", 2));
    json_array_append_new(r, st_rec_remove_scram("nobody", 1));
    apply(md, r, 3);
    assert_int_equal(md->nscram, 1);
    assert_null(st_md_find_scram(md, "alice", 2));

    /* the controller: a delete of a missing credential fails, if_absent leaves one alone */
    st_md_scram_t a2 = a;
    a2.iterations = 8192;
    st_ctl_item_t items[3] = {
        {.name = "alice", .mechanism = 1, .scram = &a2, .if_absent = true},
        {.name = "bob", .mechanism = 2},
        {.name = "alice", .mechanism = 1, .scram = &a2},
    };
    json_t *recs = json_array();
    st_ctl_rules_t rules = {0};
    assert_int_equal(st_ctl_decide(&rules, md, ST_CTL_SCRAM, false, items, 3, recs), 0);
    assert_int_equal(items[0].error, 0);
    assert_int_equal(items[1].error, ST_KERR_RESOURCE_NOT_FOUND);
    assert_int_equal(items[2].error, 0);
    assert_int_equal(json_array_size(recs), 1);
    apply(md, recs, 4);
    assert_int_equal(st_md_find_scram(md, "alice", 1)->iterations, 8192);
    free(snap);
    st_md_unref(copy);
    st_md_unref(md);
}

/* Client quotas: records set and remove a key, snapshots keep them, and the controller decides
 * an entry as Kafka does (all or none, a record only for a change). */
static void test_quota_records(void **state)
{
    (void)state;
    st_md_t *md = st_md_new("c", 1);
    st_quota_entity_t alice = {.user = ST_QE_NAME, .client = ST_QE_DEFAULT};
    strcpy(alice.user_name, "alice");
    st_quota_entity_t app = {.client = ST_QE_NAME};
    strcpy(app.client_name, "app");
    json_t *r = json_array();
    json_array_append_new(r, st_rec_quota(&alice, ST_QUOTA_PRODUCER_BYTE_RATE, 1024, false));
    json_array_append_new(r, st_rec_quota(&alice, ST_QUOTA_REQUEST_PERCENTAGE, 12.5, false));
    json_array_append_new(r, st_rec_quota(&app, ST_QUOTA_CONSUMER_BYTE_RATE, 2048, false));
    apply(md, r, 2);
    assert_int_equal(md->nquotas, 2);
    const st_quota_t *q = st_md_find_quota(md, &alice);
    assert_non_null(q);
    assert_true(q->values[ST_QUOTA_PRODUCER_BYTE_RATE] == 1024);
    assert_true(q->values[ST_QUOTA_REQUEST_PERCENTAGE] == 12.5);

    size_t len;
    char *snap = st_rec_snapshot(md, &len, NULL);
    st_md_t *copy = st_md_new("", -1);
    assert_int_equal(st_rec_restore(copy, snap, len), 0);
    assert_int_equal(copy->nquotas, 2);
    assert_memory_equal(copy->quotas, md->quotas, 2 * sizeof *md->quotas);
    free(snap);
    st_md_t *clone = st_md_clone(copy);
    assert_int_equal(clone->nquotas, 2);
    st_md_unref(clone);
    st_md_unref(copy);

    /* removing the last key removes the entity */
    r = json_array();
    json_array_append_new(r, st_rec_quota(&app, ST_QUOTA_CONSUMER_BYTE_RATE, 0, true));
    apply(md, r, 3);
    assert_int_equal(md->nquotas, 1);
    assert_null(st_md_find_quota(md, &app));

    st_ctl_quota_op_t same[] = {{"producer_byte_rate", 1024, false},
                                {"consumer_byte_rate", 1, true}};
    st_ctl_quota_op_t bad_key[] = {{"producer_byte_rate", 5, false}, {"nope", 1, false}};
    st_ctl_quota_op_t frac[] = {{"consumer_byte_rate", 1.5, false}};
    st_ctl_quota_op_t zero[] = {{"request_percentage", 0, false}};
    st_ctl_quota_op_t change[] = {{"producer_byte_rate", 1, false},
                                  {"producer_byte_rate", 4096, false},
                                  {"request_percentage", 0, true}};
    st_ctl_item_t items[6] = {
        {.qentity = alice, .qops = same, .nqops = 2},
        {.qentity = alice, .qops = bad_key, .nqops = 2},
        {.qentity = app, .qops = frac, .nqops = 1},
        {.qentity = app, .qops = zero, .nqops = 1},
        {.qops = same, .nqops = 1},
        {.qentity = alice, .qops = change, .nqops = 3},
    };
    json_t *recs = json_array();
    st_ctl_rules_t rules = {0};
    assert_int_equal(st_ctl_decide(&rules, md, ST_CTL_QUOTAS, false, items, 6, recs), 0);
    assert_int_equal(items[0].error, 0);
    assert_int_equal(items[1].error, ST_KERR_INVALID_REQUEST);
    assert_int_equal(items[2].error, ST_KERR_INVALID_REQUEST);
    assert_int_equal(items[3].error, ST_KERR_INVALID_REQUEST);
    assert_int_equal(items[4].error, ST_KERR_INVALID_REQUEST);
    assert_int_equal(items[5].error, 0);
    /* item 0 changes nothing; item 5: the later producer_byte_rate wins, the removal counts */
    assert_int_equal(json_array_size(recs), 2);
    apply(md, recs, 4);
    q = st_md_find_quota(md, &alice);
    assert_true(q->values[ST_QUOTA_PRODUCER_BYTE_RATE] == 4096);
    assert_int_equal(q->set, 1u << ST_QUOTA_PRODUCER_BYTE_RATE);

    /* validate_only: the same answers, no record */
    recs = json_array();
    items[5].error = 0;
    assert_int_equal(st_ctl_decide(&rules, md, ST_CTL_QUOTAS, true, &items[5], 1, recs), 0);
    assert_int_equal(items[5].error, 0);
    assert_int_equal(json_array_size(recs), 0);
    json_decref(recs);
    st_md_unref(md);
}

static void test_apply_and_snapshot_round_trip(void **state)
{
    (void)state;
    st_md_t *src = cluster(3, NULL);
    st_md_t *md = st_md_new("", -1);
    json_t *r = json_array();
    json_array_append_new(r, st_rec_cluster("c1"));
    for (int i = 0; i < src->nbrokers; i++)
        json_array_append_new(r, st_rec_broker(&src->brokers[i]));
    st_md_topic_t *t = topic("orders", 0xab, 4);
    json_array_append_new(r, st_rec_topic(t));
    apply(md, r, 3);
    assert_string_equal(md->cluster_id, "c1");
    assert_int_equal(md->nbrokers, 3);
    assert_int_equal(st_md_broker(md, 2)->epoch, 3);
    const st_md_topic_t *got = st_md_find(md, "orders", 6);
    assert_non_null(got);
    assert_int_equal(got->npartitions, 4);
    assert_int_equal(got->partitions[3].nreplicas, 3);
    assert_string_equal(st_md_topic_config(got, "retention.ms"), "1000");

    /* a new state of the same topic replaces it; a record for its name with another id is
     * ignored; a removal removes it; garbage changes nothing */
    t->partitions[0].leader = 2;
    st_md_topic_t *clash = topic("orders", 0xcd, 1);
    r = json_array();
    json_array_append_new(r, st_rec_topic(t));
    json_array_append_new(r, st_rec_topic(clash));
    apply(md, r, 4);
    got = st_md_find(md, "orders", 6);
    assert_int_equal(got->partitions[0].leader, 2);
    assert_int_equal(got->npartitions, 4);
    const char junk[] = "{\"v\":1,\"records\":[{\"type\":\"topic\"},{\"type\":7},42]}    ";
    st_rec_apply(md, junk, sizeof junk - 1, 5);
    st_rec_apply(md, "not json", 8, 6);
    assert_int_equal(md->ntopics, 1);

    size_t len;
    char *snap = st_rec_snapshot(md, &len, NULL);
    st_md_t *copy = st_md_new("", -1);
    assert_int_equal(st_rec_restore(copy, snap, len), 0);
    size_t len2;
    char *snap2 = st_rec_snapshot(copy, &len2, NULL);
    assert_int_equal(len, len2);
    assert_memory_equal(snap, snap2, len);
    assert_int_equal(st_rec_restore(copy, "{}", 2), ST_E_CORRUPT);

    r = json_array();
    json_array_append_new(r, st_rec_remove_topic(t->id));
    apply(md, r, 7);
    assert_int_equal(md->ntopics, 0);
    free(snap);
    free(snap2);
    st_md_topic_free(t);
    st_md_topic_free(clash);
    st_md_unref(copy);
    st_md_unref(md);
    st_md_unref(src);
}

static void test_fence_and_rejoin_records(void **state)
{
    (void)state;
    st_md_t *md = cluster(3, NULL);
    st_md_add_topic(md, topic("t", 1, 2));
    st_md_add_topic(md, topic("u", 2, 1));
    fence(md, 1, true);
    json_t *r = json_array();
    assert_int_equal(st_rec_reelect_all(md, false, r), 2);
    apply(md, r, 10);
    const st_md_topic_t *t = st_md_find(md, "t", 1);
    assert_int_equal(t->partitions[1].leader, 2);
    assert_false(st_md_in_isr(&t->partitions[1], 1));
    fence(md, 1, false);
    r = json_array();
    /* back, but it rejoins the ISRs only once its leaders see it caught up (AlterPartition) */
    assert_int_equal(st_rec_reelect_all(md, false, r), 0);
    json_decref(r);
    t = st_md_find(md, "t", 1);
    assert_false(st_md_in_isr(&t->partitions[0], 1));
    assert_int_equal(t->partitions[0].leader, 2);

    /* the leader asks for 1 back: stale epochs and odd ISRs are refused */
    st_md_topic_t *c = st_md_topic_clone(t);
    st_rec_alter_t a = {.partition = 0,
                        .leader = 2,
                        .leader_epoch = 1,
                        .partition_epoch = c->partitions[0].partition_epoch,
                        .nisr = 3,
                        .isr = {2, 3, 1}};
    memcpy(a.topic_id, c->id, 16);
    a.partition_epoch--;
    assert_int_equal(st_rec_alter_isr(md, c, &a), ST_E_INVALID);
    a.partition_epoch++;
    a.isr[0] = 3;
    a.isr[1] = 1;
    a.nisr = 2; /* without the leader: refused, the refusal a new partition epoch */
    int32_t before = c->partitions[0].partition_epoch;
    assert_int_equal(st_rec_alter_isr(md, c, &a), ST_E_AGAIN);
    assert_int_equal(c->partitions[0].partition_epoch, before + 1);
    assert_int_equal(c->partitions[0].nisr, 2);
    a.partition_epoch++;
    a.isr[0] = 2;
    a.isr[1] = 7; /* not a replica */
    assert_int_equal(st_rec_alter_isr(md, c, &a), ST_E_AGAIN);
    assert_false(st_md_in_isr(&c->partitions[0], 7));
    a.partition_epoch++;
    a.isr[1] = 1;
    int32_t pe = c->partitions[0].partition_epoch;
    assert_int_equal(st_rec_alter_isr(md, c, &a), 0);
    assert_true(st_md_in_isr(&c->partitions[0], 1));
    assert_int_equal(c->partitions[0].nisr, 2);
    assert_int_equal(c->partitions[0].partition_epoch, pe + 1);
    assert_int_equal(c->partitions[0].leader_epoch, 1);
    st_md_topic_free(c);
    st_md_unref(md);
}

static void test_rebalance_returns_preferred_leaders(void **state)
{
    (void)state;
    st_md_t *md = cluster(3, NULL);
    st_md_topic_t *t = topic("t", 1, 6);
    char msg[200];
    assert_int_equal(st_rec_place(md, 6, 3, 0, t->partitions, msg, sizeof msg), 0);
    for (int32_t p = 0; p < 6; p++)
        if (t->partitions[p].replicas[0] == 2)
            t->partitions[p].leader = t->partitions[p].replicas[1]; /* 2 lost its leaderships */
    st_md_add_topic(md, t);
    json_t *r = json_array();
    assert_int_equal(st_rec_rebalance(md, 10, r), 1);
    apply(md, r, 5);
    const st_md_topic_t *got = st_md_find(md, "t", 1);
    for (int32_t p = 0; p < 6; p++) {
        assert_int_equal(got->partitions[p].leader, got->partitions[p].replicas[0]);
        assert_int_equal(got->partitions[p].leader_epoch, got->partitions[p].replicas[0] == 2);
    }
    r = json_array();
    assert_int_equal(st_rec_rebalance(md, 10, r), 0); /* balanced: nothing to do */
    json_decref(r);
    st_md_unref(md);
}

/* A reassignment adds the target replicas first, keeps the ISR and leader, completes only once
 * every target replica is in the ISR (then the old ones leave and a leader outside the target
 * is replaced at a new epoch), survives a snapshot, and can be cancelled back. */
static void test_reassign_adds_first(void **state)
{
    (void)state;
    st_md_t *md = cluster(4, NULL);
    st_md_topic_t *t = topic("mv", 0x31, 1);
    st_md_partition_t *p = &t->partitions[0];
    p->nisr = 1; /* only the leader (1) is in sync */
    /* move to {3, 4}: 1 is the only copy of the acknowledged records, so it stays */
    assert_int_equal(st_rec_reassign(md, p, (const int32_t[]){3, 4}, 2), 0);
    assert_int_equal(p->nreplicas, 4);
    assert_int_equal(p->replicas[0], 3);
    assert_int_equal(p->replicas[1], 4);
    assert_int_equal(p->nadding, 1); /* 4 (3 was a replica already) */
    assert_int_equal(p->adding[0], 4);
    assert_int_equal(p->nremoving, 2); /* 1 and 2 */
    assert_int_equal(p->leader, 1);
    assert_int_equal(p->nisr, 1);
    assert_int_equal(p->partition_epoch, 1);
    /* the same target again: nothing changes */
    assert_int_equal(st_rec_reassign(md, p, (const int32_t[]){3, 4}, 2), 1);
    /* it survives the metadata log */
    json_t *recs = json_array();
    json_array_append_new(recs, st_rec_topic(t));
    apply(md, recs, 10);
    const st_md_partition_t *ap = &st_md_find(md, "mv", 2)->partitions[0];
    assert_int_equal(ap->nadding, 1);
    assert_int_equal(ap->nremoving, 2);
    /* 3 joins: 4 is still behind, the move waits */
    st_rec_alter_t a = {.partition = 0,
                        .leader = 1,
                        .leader_epoch = 0,
                        .partition_epoch = 1,
                        .nisr = 2,
                        .isr = {1, 3}};
    memcpy(a.topic_id, t->id, 16);
    assert_int_equal(st_rec_alter_isr(md, t, &a), 0);
    assert_int_equal(p->nreplicas, 4);
    assert_int_equal(p->leader, 1);
    /* 4 joins: every target replica is in sync, the move completes */
    a = (st_rec_alter_t){.partition = 0,
                         .leader = 1,
                         .leader_epoch = 0,
                         .partition_epoch = p->partition_epoch,
                         .nisr = 3,
                         .isr = {1, 3, 4}};
    memcpy(a.topic_id, t->id, 16);
    assert_int_equal(st_rec_alter_isr(md, t, &a), 0);
    assert_int_equal(p->nreplicas, 2);
    assert_int_equal(p->replicas[0], 3);
    assert_int_equal(p->replicas[1], 4);
    assert_int_equal(p->nadding + p->nremoving, 0);
    assert_int_equal(p->nisr, 2);
    assert_true(st_md_in_isr(p, 3) && st_md_in_isr(p, 4));
    assert_int_equal(p->leader, 3); /* the old leader left: an ISR member leads */
    assert_int_equal(p->leader_epoch, 1);
    /* nothing in progress: a cancel finds none */
    assert_int_equal(st_rec_reassign_cancel(md, p), ST_E_NOT_FOUND);

    /* a move that keeps the leader but drops a replica bumps the leader epoch all the same
     * (Kafka's rule): the leaving broker's fetches are fenced and count for nothing */
    st_md_partition_t k = part3();
    k.isr[k.nisr++] = 4; /* 4 is in sync already (a replica that was added) */
    k.replicas[k.nreplicas++] = 4;
    assert_int_equal(st_rec_reassign(md, &k, (const int32_t[]){1, 2, 4}, 3), 0);
    assert_int_equal(k.nreplicas, 3); /* completed at once: every target in sync */
    assert_false(st_md_is_replica(&k, 3));
    assert_int_equal(k.leader, 1);
    assert_int_equal(k.leader_epoch, 1);

    /* a move replacing one in progress that drops the replica it added, which leads: the
     * leadership goes to the ISR that is left */
    st_md_partition_t m = part3();
    assert_int_equal(st_rec_reassign(md, &m, (const int32_t[]){1, 4, 2}, 3), 0);
    m.isr[m.nisr++] = 4;
    m.leader = 4; /* (as if elected there) */
    assert_int_equal(st_rec_reassign(md, &m, (const int32_t[]){2, 3, 1}, 3), 0);
    assert_false(st_md_is_replica(&m, 4));
    assert_true(m.leader == 1 || m.leader == 2 || m.leader == 3);
    assert_true(st_md_in_isr(&m, m.leader));
    assert_int_equal(m.leader_epoch, 1);

    /* cancelled: back to the originals, the ISR keeps only them */
    st_md_partition_t q = part3();
    assert_int_equal(st_rec_reassign(md, &q, (const int32_t[]){4}, 1), 0);
    assert_int_equal(q.nreplicas, 4);
    q.isr[q.nisr++] = 4;
    assert_int_equal(st_rec_reassign_cancel(md, &q), 0);
    assert_int_equal(q.nreplicas, 3);
    assert_int_equal(q.nisr, 3);
    assert_false(st_md_is_replica(&q, 4));
    assert_int_equal(q.leader, 1);
    /* a cancel that would leave only added replicas in sync is refused */
    q = part3();
    q.nisr = 1;
    assert_int_equal(st_rec_reassign(md, &q, (const int32_t[]){4}, 1), 0);
    q.isr[0] = 4;
    assert_int_equal(st_rec_reassign_cancel(md, &q), ST_E_INVALID);
    st_md_topic_free(t);
    st_md_unref(md);
}

/* A topic's unclean.leader.election.enable wins over the broker's, both ways. */
static void test_unclean_per_topic(void **state)
{
    (void)state;
    st_md_t *md = cluster(3, NULL);
    st_md_topic_t *strict = topic("strict", 0x41, 1), *loose = topic("loose", 0x42, 1);
    st_md_topic_set_config(strict, "unclean.leader.election.enable", "false");
    st_md_topic_set_config(loose, "unclean.leader.election.enable", "true");
    for (st_md_topic_t *t = strict; t; t = t == strict ? loose : NULL) {
        t->partitions[0].nisr = 1; /* only 1 in sync */
        assert_int_equal(st_md_add_topic(md, t), 0);
    }
    fence(md, 1, true);
    json_t *recs = json_array();
    assert_int_equal(st_rec_reelect_all(md, true, recs), 2);
    apply(md, recs, 20);
    assert_int_equal(st_md_find(md, "strict", 6)->partitions[0].leader, -1);
    assert_int_equal(st_md_find(md, "loose", 5)->partitions[0].leader, 2);
    const st_md_topic_t *t = st_md_find(md, "loose", 5);
    assert_true(st_rec_unclean_allowed(t, false));
    assert_false(st_rec_unclean_allowed(st_md_find(md, "strict", 6), true));
    st_md_unref(md);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_place_spreads_leaders_and_replicas),
        cmocka_unit_test(test_place_alternates_racks),
        cmocka_unit_test(test_elect_moves_leadership_within_the_isr),
        cmocka_unit_test(test_preferred_election),
        cmocka_unit_test(test_apply_and_snapshot_round_trip),
        cmocka_unit_test(test_scram_records),
        cmocka_unit_test(test_quota_records),
        cmocka_unit_test(test_fence_and_rejoin_records),
        cmocka_unit_test(test_rebalance_returns_preferred_leaders),
        cmocka_unit_test(test_reassign_adds_first),
        cmocka_unit_test(test_unclean_per_topic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
