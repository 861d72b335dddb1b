/* test_ops.c — the controller's metadata transitions (cluster/ops.h), without threads: each
 * op decided against a state, its records applied to that state. */
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

/* ---- the rules a broker hands in: two topic configs, one internal topic ---- */

static int find_cfg(void *arg, const char *key, bool *list, const char **fixed_default)
{
    (void)arg;
    if (strcmp(key, "retention.ms") == 0 || strcmp(key, "min.insync.replicas") == 0) {
        *list = false;
        *fixed_default = NULL;
        return 0;
    }
    if (strcmp(key, "cleanup.policy") == 0) {
        *list = true;
        *fixed_default = "delete";
        return 0;
    }
    return -1;
}

static int validate_cfg(void *arg, const char *key, const char *value, char *err, size_t n)
{
    (void)arg;
    if (strcmp(value, "bad") == 0) {
        snprintf(err, n, "Invalid value bad for configuration %s", key);
        return -1;
    }
    return 0;
}

/* Broker settings: log.retention.ms dynamic, a.list a dynamic list, log.dirs read-only. */
static int16_t check_bcfg(void *arg, const char *key, const char *value, bool *list, char *err,
                          size_t n)
{
    (void)arg;
    *list = strcmp(key, "a.list") == 0;
    if (strcmp(key, "log.dirs") == 0) {
        snprintf(err, n, "Cannot update these configs dynamically: Set(%s)", key);
        return ST_KERR_INVALID_CONFIG;
    }
    if (strcmp(key, "log.retention.ms") && !*list) {
        snprintf(err, n, "Unknown broker config: %s", key);
        return ST_KERR_INVALID_CONFIG;
    }
    if (value && strcmp(value, "bad") == 0) {
        snprintf(err, n, "Invalid value bad for %s", key);
        return ST_KERR_INVALID_CONFIG;
    }
    return 0;
}

static bool internal(void *arg, const char *name, int32_t *npartitions, int *rf)
{
    (void)arg;
    *npartitions = 5;
    *rf = 3;
    return strcmp(name, "__internal") == 0;
}

/* A counter, so every run decides the same ids and placements. */
static void counting(void *arg, void *buf, size_t n)
{
    uint8_t *c = arg;
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)buf)[i] = (*c)++;
}

static uint8_t seed;
static const st_ctl_rules_t RULES = {.num_partitions = 2,
                                     .default_rf = 1,
                                     .internal = internal,
                                     .config_find = find_cfg,
                                     .config_validate = validate_cfg,
                                     .broker_config_check = check_bcfg,
                                     .random = counting,
                                     .arg = &seed};

static st_md_t *brokers(int n)
{
    st_md_t *md = st_md_new("c1", 1);
    for (int i = 1; i <= n; i++) {
        st_md_broker_t b = {.node_id = i, .host = "h", .port = 9000 + i, .incarnation = 3};
        assert_int_equal(st_md_put_broker(md, &b), 0);
    }
    return md;
}

static int64_t next_index = 10;

/* Decides one item of kind against md and applies its records; returns how many records. */
static int run(st_md_t *md, int kind, st_ctl_item_t *it, bool validate_only)
{
    json_t *records = json_array();
    assert_int_equal(st_ctl_decide(&RULES, md, kind, validate_only, it, 1, records), 0);
    int n = (int)json_array_size(records);
    if (n) {
        size_t len;
        void *buf = st_rec_entry(records, &len, NULL);
        assert_non_null(buf);
        st_rec_apply(md, buf, len, next_index++);
        free(buf);
    }
    json_decref(records);
    return n;
}

static st_ctl_item_t create_item(const char *name, int32_t count, int16_t rf)
{
    return (st_ctl_item_t){.name = name, .count = count, .rf = rf, .assigned = -1};
}

static void test_create_places_over_live_brokers(void **state)
{
    (void)state;
    st_md_t *md = brokers(3);
    st_ctl_cfg_t cfg[] = {{"retention.ms", "1000", ST_CTL_CFG_SET}};
    st_ctl_item_t it = create_item("orders", 4, 2);
    it.cfg = cfg;
    it.ncfg = 1;
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 1);
    assert_int_equal(it.error, 0);
    const st_md_topic_t *t = st_md_find(md, "orders", 6);
    assert_non_null(t);
    assert_memory_equal(t->id, it.id, 16);
    assert_int_equal(t->npartitions, 4);
    assert_int_equal(t->replication_factor, 2);
    assert_string_equal(st_md_topic_config(t, "retention.ms"), "1000");
    for (int32_t p = 0; p < 4; p++) {
        assert_int_equal(t->partitions[p].nreplicas, 2);
        assert_int_equal(t->partitions[p].leader, t->partitions[p].replicas[0]);
        assert_int_not_equal(t->partitions[p].replicas[0], t->partitions[p].replicas[1]);
    }
    /* defaults: num.partitions and default.replication.factor */
    st_ctl_item_t d = create_item("plain", -1, -1);
    assert_int_equal(run(md, ST_CTL_CREATE, &d, false), 1);
    assert_int_equal(st_md_find(md, "plain", 5)->npartitions, 2);
    assert_int_equal(st_md_find(md, "plain", 5)->replication_factor, 1);
    st_md_unref(md);
}

static void test_create_refusals_change_nothing(void **state)
{
    (void)state;
    st_md_t *md = brokers(1);
    st_ctl_item_t it = create_item("a/b", 1, 1);
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 0);
    assert_int_equal(it.error, ST_KERR_INVALID_TOPIC_EXCEPTION);
    it = create_item("t", 1, 2); /* one broker only */
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 0);
    assert_int_equal(it.error, ST_KERR_INVALID_REPLICATION_FACTOR);
    assert_non_null(strstr(it.message, "only 1 broker(s)"));
    it = create_item("t", 0, 1);
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 0);
    assert_int_equal(it.error, ST_KERR_INVALID_PARTITIONS);
    st_ctl_cfg_t unknown[] = {{"no.such.config", "1", ST_CTL_CFG_SET}};
    it = create_item("t", 1, 1);
    it.cfg = unknown;
    it.ncfg = 1;
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 0);
    assert_int_equal(it.error, ST_KERR_INVALID_CONFIG);
    /* validate only: the answer without the record */
    it = create_item("t", 1, 1);
    assert_int_equal(run(md, ST_CTL_CREATE, &it, true), 0);
    assert_int_equal(it.error, 0);
    assert_int_equal(md->ntopics, 0);
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 1);
    st_ctl_item_t again = create_item("t", 1, 1);
    assert_int_equal(run(md, ST_CTL_CREATE, &again, false), 0);
    assert_int_equal(again.error, ST_KERR_TOPIC_ALREADY_EXISTS);
    st_md_unref(md);
}

static void test_internal_topic(void **state)
{
    (void)state;
    st_md_t *md = brokers(1);
    st_ctl_item_t it = create_item("__internal", 1, -1);
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 1);
    const st_md_topic_t *t = st_md_find(md, "__internal", 10);
    assert_true(t->internal);
    assert_int_equal(t->npartitions, 5);        /* the rules' count, however asked */
    assert_int_equal(t->replication_factor, 1); /* its factor 3, capped by the live brokers */
    st_ctl_item_t del = {.name = "__internal"};
    assert_int_equal(run(md, ST_CTL_DELETE, &del, false), 0);
    assert_int_equal(del.error, ST_KERR_POLICY_VIOLATION);
    st_md_unref(md);
}

/* An internal topic capped below its min.insync.replicas could never be written with acks=all:
 * min.insync.replicas follows the replicas it got. Other topics keep what they asked for. */
static void test_internal_topic_min_isr_capped(void **state)
{
    (void)state;
    st_ctl_cfg_t cfg[] = {{"min.insync.replicas", "2", ST_CTL_CFG_SET}};
    st_md_t *md = brokers(1);
    st_ctl_item_t it = create_item("__internal", 1, -1);
    it.cfg = cfg;
    it.ncfg = 1;
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 1);
    assert_string_equal(st_md_topic_config(st_md_find(md, "__internal", 10), "min.insync.replicas"),
                        "1");
    st_ctl_item_t plain = create_item("plain", 1, 1);
    plain.cfg = cfg;
    plain.ncfg = 1;
    assert_int_equal(run(md, ST_CTL_CREATE, &plain, false), 1);
    assert_string_equal(st_md_topic_config(st_md_find(md, "plain", 5), "min.insync.replicas"), "2");
    st_md_unref(md);
    md = brokers(3);
    it = create_item("__internal", 1, -1);
    it.cfg = cfg;
    it.ncfg = 1;
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 1);
    assert_string_equal(st_md_topic_config(st_md_find(md, "__internal", 10), "min.insync.replicas"),
                        "2");
    st_md_unref(md);
}

static void test_delete_and_grow(void **state)
{
    (void)state;
    st_md_t *md = brokers(2);
    st_ctl_item_t it = create_item("t", 2, 2);
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 1);
    st_ctl_item_t grow = {.name = "t", .count = 2};
    assert_int_equal(run(md, ST_CTL_CREATE_PARTITIONS, &grow, false), 0);
    assert_int_equal(grow.error, ST_KERR_INVALID_PARTITIONS);
    grow.count = 5;
    assert_int_equal(run(md, ST_CTL_CREATE_PARTITIONS, &grow, false), 1);
    const st_md_topic_t *t = st_md_find(md, "t", 1);
    assert_int_equal(t->npartitions, 5);
    assert_int_equal(t->partitions[4].nreplicas, 2);
    st_ctl_item_t byid = {.name = NULL};
    memcpy(byid.id, t->id, 16);
    assert_int_equal(run(md, ST_CTL_DELETE, &byid, false), 1);
    assert_int_equal(byid.error, 0);
    assert_null(st_md_find(md, "t", 1));
    st_ctl_item_t gone = {.name = "t"};
    assert_int_equal(run(md, ST_CTL_DELETE, &gone, false), 0);
    assert_int_equal(gone.error, ST_KERR_UNKNOWN_TOPIC_OR_PARTITION);
    st_md_unref(md);
}

static void test_configs(void **state)
{
    (void)state;
    st_md_t *md = brokers(1);
    st_ctl_item_t it = create_item("t", 1, 1);
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 1);
    st_ctl_cfg_t add[] = {{"cleanup.policy", "compact", ST_CTL_CFG_APPEND}};
    st_ctl_item_t a = {.name = "t", .cfg = add, .ncfg = 1};
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &a, false), 1);
    assert_string_equal(st_md_topic_config(st_md_find(md, "t", 1), "cleanup.policy"),
                        "delete,compact");
    st_ctl_cfg_t sub[] = {{"cleanup.policy", "delete", ST_CTL_CFG_SUBTRACT}};
    a.cfg = sub;
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &a, false), 1);
    assert_string_equal(st_md_topic_config(st_md_find(md, "t", 1), "cleanup.policy"), "compact");
    /* one refused change refuses them all */
    st_ctl_cfg_t mixed[] = {{"retention.ms", "5", ST_CTL_CFG_SET},
                            {"retention.ms", "bad", ST_CTL_CFG_SET}};
    a.cfg = mixed;
    a.ncfg = 2;
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &a, false), 0);
    assert_int_equal(a.error, ST_KERR_INVALID_CONFIG);
    assert_null(st_md_topic_config(st_md_find(md, "t", 1), "retention.ms"));
    st_ctl_cfg_t notlist[] = {{"retention.ms", "5", ST_CTL_CFG_APPEND}};
    a.cfg = notlist;
    a.ncfg = 1;
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &a, false), 0);
    assert_int_equal(a.error, ST_KERR_INVALID_CONFIG);
    st_ctl_cfg_t del[] = {{"cleanup.policy", NULL, ST_CTL_CFG_DELETE}};
    a.cfg = del;
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &a, false), 1);
    assert_null(st_md_topic_config(st_md_find(md, "t", 1), "cleanup.policy"));
    st_md_unref(md);
}

/* A broker resource's changes: all or none, one record per key that changes, kept by a
 * snapshot; a broker's own value over the cluster default. */
static void test_broker_configs(void **state)
{
    (void)state;
    st_md_t *md = brokers(2);
    st_ctl_cfg_t set[] = {{"log.retention.ms", "1000", ST_CTL_CFG_SET},
                          {"a.list", "x", ST_CTL_CFG_APPEND}};
    st_ctl_item_t all = {
        .broker_resource = true, .broker = ST_MD_BROKER_DEFAULT, .cfg = set, .ncfg = 2};
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &all, false), 2);
    assert_int_equal(all.error, 0);
    int scope;
    assert_string_equal(st_md_broker_config(md, 2, "log.retention.ms", &scope), "1000");
    assert_int_equal(scope, 2);
    /* the same again changes nothing: no record */
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &all, false), 0);
    assert_int_equal(all.error, 0);
    st_ctl_cfg_t more[] = {{"a.list", "y", ST_CTL_CFG_APPEND}};
    all.cfg = more;
    all.ncfg = 1;
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &all, false), 1);
    assert_string_equal(st_md_broker_config(md, 1, "a.list", NULL), "x,y");
    /* broker 2's own value wins there only */
    st_ctl_cfg_t own[] = {{"log.retention.ms", "7", ST_CTL_CFG_SET}};
    st_ctl_item_t b2 = {.broker_resource = true, .broker = 2, .cfg = own, .ncfg = 1};
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &b2, false), 1);
    assert_string_equal(st_md_broker_config(md, 2, "log.retention.ms", &scope), "7");
    assert_int_equal(scope, 1);
    assert_string_equal(st_md_broker_config(md, 1, "log.retention.ms", &scope), "1000");
    /* a read-only key, an unknown one or a bad value refuses the whole resource */
    st_ctl_cfg_t refused[][2] = {
        {{"log.retention.ms", "5", ST_CTL_CFG_SET}, {"log.dirs", "/x", ST_CTL_CFG_SET}},
        {{"log.retention.ms", "5", ST_CTL_CFG_SET}, {"nope", "1", ST_CTL_CFG_SET}},
        {{"log.retention.ms", "5", ST_CTL_CFG_SET}, {"log.retention.ms", "bad", ST_CTL_CFG_SET}},
        {{"log.retention.ms", "5", ST_CTL_CFG_SET}, {"log.retention.ms", "5", ST_CTL_CFG_APPEND}}};
    for (int i = 0; i < 4; i++) {
        st_ctl_item_t r = {.broker_resource = true, .broker = 2, .cfg = refused[i], .ncfg = 2};
        assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &r, false), 0);
        assert_int_equal(r.error, ST_KERR_INVALID_CONFIG);
        assert_string_equal(st_md_broker_config(md, 2, "log.retention.ms", NULL), "7");
    }
    /* validate_only: the answer, no record */
    st_ctl_cfg_t v[] = {{"log.retention.ms", "9", ST_CTL_CFG_SET}};
    st_ctl_item_t vo = {.broker_resource = true, .broker = 2, .cfg = v, .ncfg = 1};
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &vo, true), 0);
    assert_int_equal(vo.error, 0);
    assert_string_equal(st_md_broker_config(md, 2, "log.retention.ms", NULL), "7");
    /* a snapshot keeps them */
    size_t len;
    void *snap = st_rec_snapshot(md, &len, NULL);
    st_md_t *back = st_md_new("", -1);
    assert_int_equal(st_rec_restore(back, snap, len), 0);
    free(snap);
    assert_true(st_md_broker_configs_equal(md, back));
    st_md_unref(back);
    /* AlterConfigs' replacement of broker 2's set (none given) removes its own value: the
     * default shows through again */
    st_ctl_item_t rep = {.broker_resource = true, .broker = 2, .replace_configs = true};
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &rep, false), 1);
    assert_string_equal(st_md_broker_config(md, 2, "log.retention.ms", &scope), "1000");
    assert_int_equal(scope, 2);
    st_ctl_cfg_t del[] = {{"log.retention.ms", NULL, ST_CTL_CFG_DELETE},
                          {"a.list", NULL, ST_CTL_CFG_DELETE}};
    all.cfg = del;
    all.ncfg = 2;
    assert_int_equal(run(md, ST_CTL_ALTER_CONFIGS, &all, false), 2);
    assert_int_equal(md->nbcfg, 0);
    st_md_unref(md);
}

static void test_elect(void **state)
{
    (void)state;
    st_md_t *md = brokers(2);
    st_ctl_item_t it = create_item("t", 1, 2);
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 1);
    st_ctl_item_t pref = {.name = "t", .partition = 0, .election_type = 0};
    assert_int_equal(run(md, ST_CTL_ELECT_LEADERS, &pref, false), 0);
    assert_int_equal(pref.error, ST_KERR_ELECTION_NOT_NEEDED);
    /* the leadership moved to the second replica: a preferred election brings it back */
    st_md_topic_t *t = (st_md_topic_t *)st_md_find(md, "t", 1);
    int32_t first = t->partitions[0].replicas[0];
    t->partitions[0].leader = t->partitions[0].replicas[1];
    int32_t epoch = t->partitions[0].leader_epoch;
    assert_int_equal(run(md, ST_CTL_ELECT_LEADERS, &pref, false), 1);
    t = (st_md_topic_t *)st_md_find(md, "t", 1);
    assert_int_equal(t->partitions[0].leader, first);
    assert_int_equal(t->partitions[0].leader_epoch, epoch + 1);
    st_ctl_item_t unclean = {.name = "t", .partition = 0, .election_type = 1};
    assert_int_equal(run(md, ST_CTL_ELECT_LEADERS, &unclean, false), 0);
    assert_int_equal(unclean.error, ST_KERR_ELECTION_NOT_NEEDED);
    st_ctl_item_t nopart = {.name = "t", .partition = 7, .election_type = 0};
    assert_int_equal(run(md, ST_CTL_ELECT_LEADERS, &nopart, false), 0);
    assert_int_equal(nopart.error, ST_KERR_UNKNOWN_TOPIC_OR_PARTITION);
    st_md_unref(md);
}

static void test_reassign_checks(void **state)
{
    (void)state;
    st_md_t *md = brokers(3);
    st_ctl_item_t it = create_item("t", 1, 1);
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 1);
    int32_t dup[] = {1, 1}, unknown[] = {9}, two[] = {2, 3};
    st_ctl_item_t r = {.name = "t", .partition = 0, .replicas = dup, .nreplicas = 2};
    assert_int_equal(run(md, ST_CTL_REASSIGN, &r, false), 0);
    assert_int_equal(r.error, ST_KERR_INVALID_REPLICA_ASSIGNMENT);
    r.replicas = unknown;
    r.nreplicas = 1;
    assert_int_equal(run(md, ST_CTL_REASSIGN, &r, false), 0);
    assert_int_equal(r.error, ST_KERR_INVALID_REPLICA_ASSIGNMENT);
    r.replicas = two;
    r.nreplicas = 2;
    r.keep_rf = true; /* rf 1 to 2 refused */
    assert_int_equal(run(md, ST_CTL_REASSIGN, &r, false), 0);
    assert_int_equal(r.error, ST_KERR_INVALID_REPLICATION_FACTOR);
    st_ctl_item_t cancel = {.name = "t", .partition = 0, .replicas = NULL};
    assert_int_equal(run(md, ST_CTL_REASSIGN, &cancel, false), 0);
    assert_int_equal(cancel.error, ST_KERR_NO_REASSIGNMENT_IN_PROGRESS);
    r.keep_rf = false; /* a move: the targets added first, in progress */
    assert_int_equal(run(md, ST_CTL_REASSIGN, &r, false), 1);
    assert_int_equal(r.error, 0);
    assert_true(st_md_find(md, "t", 1)->partitions[0].nadding > 0);
    assert_int_equal(run(md, ST_CTL_REASSIGN, &cancel, false), 1);
    assert_int_equal(st_md_find(md, "t", 1)->partitions[0].nadding, 0);
    st_md_unref(md);
}

/* Explicit replica assignments (CreateTopics / CreatePartitions): the brokers named, in order;
 * the ISR those not fenced; refusals name the broker or the partition. */
static void test_manual_assignment(void **state)
{
    (void)state;
    st_md_t *md = brokers(2);
    st_md_broker_t fenced = {
        .node_id = 3, .host = "h", .port = 9003, .incarnation = 3, .fenced = true};
    assert_int_equal(st_md_put_broker(md, &fenced), 0);
    const int32_t ids[] = {2, 1, 3, 2};
    st_ctl_item_t it = create_item("m", -1, -1);
    it.assigned = 2;
    it.assign = ids;
    it.assign_rf = 2;
    assert_int_equal(run(md, ST_CTL_CREATE, &it, false), 1);
    assert_int_equal(it.error, 0);
    const st_md_topic_t *t = st_md_find(md, "m", 1);
    assert_int_equal(t->npartitions, 2);
    assert_int_equal(t->replication_factor, 2);
    const st_md_partition_t *p0 = &t->partitions[0], *p1 = &t->partitions[1];
    assert_int_equal(p0->replicas[0], 2);
    assert_int_equal(p0->replicas[1], 1);
    assert_int_equal(p0->leader, 2);
    assert_int_equal(p0->nisr, 2);
    assert_int_equal(p1->replicas[0], 3);
    assert_int_equal(p1->replicas[1], 2);
    assert_int_equal(p1->nisr, 1); /* 3 is fenced: not in the ISR, not the leader */
    assert_int_equal(p1->isr[0], 2);
    assert_int_equal(p1->leader, 2);

    const int32_t unknown[] = {1, 9};
    st_ctl_item_t u = create_item("u", -1, -1);
    u.assigned = 1;
    u.assign = unknown;
    u.assign_rf = 2;
    assert_int_equal(run(md, ST_CTL_CREATE, &u, false), 0);
    assert_int_equal(u.error, ST_KERR_INVALID_REPLICA_ASSIGNMENT);
    assert_non_null(strstr(u.message, "broker 9, but no such broker is registered"));
    const int32_t only_fenced[] = {3};
    st_ctl_item_t f = create_item("f", -1, -1);
    f.assigned = 1;
    f.assign = only_fenced;
    f.assign_rf = 1;
    assert_int_equal(run(md, ST_CTL_CREATE, &f, false), 0);
    assert_non_null(strstr(f.message, "partition 0 are fenced"));
    st_ctl_item_t bad = create_item("b", -1, -1);
    bad.bad_assignment = true;
    bad.bad_why = "Partitions should be a consecutive 0-based integer sequence.";
    assert_int_equal(run(md, ST_CTL_CREATE, &bad, false), 0);
    assert_int_equal(bad.error, ST_KERR_INVALID_REPLICA_ASSIGNMENT);
    assert_string_equal(bad.message, bad.bad_why);
    assert_null(st_md_find(md, "u", 1));
    assert_null(st_md_find(md, "f", 1));
    assert_null(st_md_find(md, "b", 1));

    /* growing: one list per partition added, of the topic's replication factor */
    const int32_t more[] = {1, 3};
    st_ctl_item_t g = {.name = "m", .count = 3, .assigned = 1, .assign = more, .assign_rf = 2};
    assert_int_equal(run(md, ST_CTL_CREATE_PARTITIONS, &g, false), 1);
    t = st_md_find(md, "m", 1);
    assert_int_equal(t->npartitions, 3);
    assert_int_equal(t->partitions[2].replicas[0], 1);
    assert_int_equal(t->partitions[2].replicas[1], 3);
    assert_int_equal(t->partitions[2].nisr, 1);
    const int32_t one[] = {1};
    st_ctl_item_t g1 = {.name = "m", .count = 4, .assigned = 1, .assign = one, .assign_rf = 1};
    assert_int_equal(run(md, ST_CTL_CREATE_PARTITIONS, &g1, false), 0);
    assert_non_null(strstr(g1.message, "Inconsistent replication factor"));
    st_ctl_item_t g2 = {.name = "m", .count = 5, .assigned = 1, .assign = more, .assign_rf = 2};
    assert_int_equal(run(md, ST_CTL_CREATE_PARTITIONS, &g2, false), 0);
    assert_non_null(strstr(g2.message, "by 2 but 1 assignments"));
    assert_int_equal(st_md_find(md, "m", 1)->npartitions, 3);
    st_md_unref(md);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_places_over_live_brokers),
        cmocka_unit_test(test_create_refusals_change_nothing),
        cmocka_unit_test(test_internal_topic),
        cmocka_unit_test(test_internal_topic_min_isr_capped),
        cmocka_unit_test(test_delete_and_grow),
        cmocka_unit_test(test_configs),
        cmocka_unit_test(test_broker_configs),
        cmocka_unit_test(test_elect),
        cmocka_unit_test(test_reassign_checks),
        cmocka_unit_test(test_manual_assignment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
