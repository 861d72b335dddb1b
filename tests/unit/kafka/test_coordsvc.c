/* The coordinator services registry (kafka/coordsvc.h): registration rules, lookups by topic
 * and key type, routing a key to its coordinator, the leadership dispatch the per-shard apply
 * relies on, and the shard-life calls in order (with the rollback of a failed start). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/err.h"
#include "kafka/coordsvc.h"
#include "kafka/group_route.h"

/* What the fake services were called with, in order. */
static char calls[512];
static int fail_start_of = -1; /* the service index whose start fails */

#define NOTE(...) snprintf(calls + strlen(calls), sizeof calls - strlen(calls), __VA_ARGS__)

#define FAKE(i)                                                                                    \
    static int32_t route##i(st_kstr_t key, int32_t n)                                              \
    {                                                                                              \
        return key.len % n;                                                                        \
    }                                                                                              \
    static int32_t parts##i(const st_config_t *cfg)                                                \
    {                                                                                              \
        (void)cfg;                                                                                 \
        return 3 + i;                                                                              \
    }                                                                                              \
    static int32_t rf##i(const st_config_t *cfg)                                                   \
    {                                                                                              \
        return (int32_t)cfg->default_replication_factor + i;                                       \
    }                                                                                              \
    static int start##i(st_kshard_t *s)                                                            \
    {                                                                                              \
        (void)s;                                                                                   \
        NOTE("start%d ", i);                                                                       \
        return fail_start_of == i ? ST_E_INVALID : 0;                                              \
    }                                                                                              \
    static void load##i(st_kshard_t *s, int32_t p, int32_t epoch)                                  \
    {                                                                                              \
        (void)s;                                                                                   \
        NOTE("load" #i "(%d,%d) ", p, epoch);                                                      \
    }                                                                                              \
    static void unload##i(st_kshard_t *s, int32_t p)                                               \
    {                                                                                              \
        (void)s;                                                                                   \
        NOTE("unload" #i "(%d) ", p);                                                              \
    }                                                                                              \
    static void fini##i(st_kshard_t *s)                                                            \
    {                                                                                              \
        (void)s;                                                                                   \
        NOTE("fini%d ", i);                                                                        \
    }

FAKE(0)
FAKE(1)

static void tick0(st_kshard_t *s)
{
    (void)s;
    NOTE("tick%d ", 0);
}

static void drain1(st_kshard_t *s)
{
    (void)s;
    NOTE("drain%d ", 1);
}

static const st_ctl_cfg_t cfgs[] = {{"cleanup.policy", "compact", ST_CTL_CFG_SET}};

static const st_coordsvc_t svc0 = {.name = "zero",
                                   .topic = "__zero",
                                   .key_type = 5,
                                   .partitions = parts0,
                                   .replication_factor = rf0,
                                   .configs = cfgs,
                                   .nconfigs = 1,
                                   .route = route0,
                                   .start = start0,
                                   .load = load0,
                                   .unload = unload0,
                                   .tick = tick0,
                                   .fini = fini0};
static const st_coordsvc_t svc1 = {.name = "one",
                                   .topic = "__one",
                                   .key_type = 6,
                                   .partitions = parts1,
                                   .replication_factor = rf1,
                                   .route = route1,
                                   .start = start1,
                                   .load = load1,
                                   .unload = unload1,
                                   .drain = drain1,
                                   .fini = fini1};

static int setup(void **state)
{
    (void)state;
    st_coordsvc_clear();
    calls[0] = 0;
    fail_start_of = -1;
    assert_int_equal(st_coordsvc_register(&svc0), 0);
    assert_int_equal(st_coordsvc_register(&svc1), 0);
    return 0;
}

static void test_register_rules(void **state)
{
    (void)state;
    assert_int_equal(st_coordsvc_register(&svc0), 0); /* the same service again: no change */
    st_coordsvc_t same_topic = svc1;
    same_topic.key_type = 9;
    assert_int_equal(st_coordsvc_register(&same_topic), ST_E_EXISTS);
    st_coordsvc_t same_key = svc1;
    same_key.topic = "__other";
    assert_int_equal(st_coordsvc_register(&same_key), ST_E_EXISTS);
    static st_coordsvc_t more[ST_COORDSVC_MAX];
    static const char *names[] = {"__a", "__b", "__c", "__d"};
    int ok = 0, full = 0;
    for (int i = 0; i < ST_COORDSVC_MAX; i++) {
        more[i] = svc1;
        more[i].topic = names[i];
        more[i].key_type = (int8_t)(20 + i);
        int rc = st_coordsvc_register(&more[i]);
        ok += rc == 0;
        full += rc == ST_E_FULL;
    }
    assert_int_equal(ok, ST_COORDSVC_MAX - 2);
    assert_int_equal(full, 2);
}

static void test_lookups(void **state)
{
    (void)state;
    assert_ptr_equal(st_coordsvc_find("__zero", 6), &svc0);
    assert_ptr_equal(st_coordsvc_find("__one", 5), &svc1);
    assert_null(st_coordsvc_find("__zer", 5));        /* a prefix is not the topic */
    assert_null(st_coordsvc_find("__zero_x", 6 + 2)); /* nor a longer name */
    assert_null(st_coordsvc_find("t", 1));
    assert_ptr_equal(st_coordsvc_by_key_type(6), &svc1);
    assert_null(st_coordsvc_by_key_type(0));
    st_ctl_item_t it = {.name = "__zero"};
    st_config_t cfg = {.default_replication_factor = 2};
    st_coordsvc_topic_item(&svc1, &cfg, &it);
    assert_int_equal(it.count, 4);
    assert_int_equal(it.rf, 3);
    st_coordsvc_topic_item(&svc0, &cfg, &it);
    assert_true(it.internal);
    assert_int_equal(it.count, 3);
    assert_int_equal(it.rf, 2);
    assert_int_equal(it.ncfg, 1);
    assert_string_equal(it.cfg[0].key, "cleanup.policy");
}

static void test_route(void **state)
{
    (void)state;
    st_md_t *md = st_md_new("c", 1);
    uint8_t id[16] = {4};
    st_md_topic_t *t = st_md_topic_new("__one", id, 4);
    for (int i = 0; i < 4; i++)
        t->partitions[i].leader = 10 + i;
    assert_int_equal(st_md_add_topic(md, t), 0);
    /* route1: key length % 4 */
    assert_int_equal(st_coordsvc_partition(&svc1, md, st_kstr("abcdef")), 2);
    assert_int_equal(st_coordsvc_coordinator(&svc1, md, st_kstr("abcdef")), 12);
    assert_int_equal(st_coordsvc_coordinator(&svc1, md, st_kstr("abc")), 13);
    /* without its topic, a service has no coordinator */
    assert_int_equal(st_coordsvc_partition(&svc0, md, st_kstr("abc")), -1);
    assert_int_equal(st_coordsvc_coordinator(&svc0, md, st_kstr("abc")), -1);
    st_md_unref(md);
}

static void test_leadership_dispatch(void **state)
{
    (void)state;
    st_kshard_t s = {0};
    st_coordsvc_leadership(&s, "__one", 2, true, 7);
    st_coordsvc_leadership(&s, "__zero", 1, false, -1);
    st_coordsvc_leadership(&s, "orders", 0, true, 3); /* not a coordinator's topic */
    st_coordsvc_leadership(&s, "__on", 0, true, 3);
    assert_string_equal(calls, "load1(2,7) unload0(1) ");
}

static void test_shard_life(void **state)
{
    (void)state;
    st_kshard_t s = {0};
    assert_int_equal(st_coordsvc_start(&s), 0);
    st_coordsvc_tick(&s); /* only svc0 has a tick, only svc1 a drain */
    st_coordsvc_drain(&s);
    st_coordsvc_fini(&s);
    assert_string_equal(calls, "start0 start1 tick0 drain1 fini1 fini0 ");
}

static void test_failed_start_rolls_back(void **state)
{
    (void)state;
    st_kshard_t s = {0};
    fail_start_of = 1;
    assert_int_equal(st_coordsvc_start(&s), ST_E_INVALID);
    assert_string_equal(calls, "start0 start1 fini0 ");
}

/* The group coordinator is a registered service like any other: its topic, its key type, and
 * Kafka's group-to-partition hash. */
static void test_group_service(void **state)
{
    (void)state;
    st_coordsvc_clear();
    assert_int_equal(st_coordsvc_register(&st_kgroup_service), 0);
    assert_ptr_equal(st_coordsvc_by_key_type(0), &st_kgroup_service);
    assert_ptr_equal(st_coordsvc_find(ST_OFFSETS_TOPIC, strlen(ST_OFFSETS_TOPIC)),
                     &st_kgroup_service);
    st_config_t cfg = {.offsets_topic_num_partitions = 50, .offsets_topic_replication_factor = 3};
    st_ctl_item_t it = {0};
    st_coordsvc_topic_item(&st_kgroup_service, &cfg, &it);
    assert_int_equal(it.count, 50);
    assert_int_equal(it.rf, 3);
    assert_true(it.internal);
    bool compact = false;
    for (int i = 0; i < it.ncfg; i++)
        compact |=
            strcmp(it.cfg[i].key, "cleanup.policy") == 0 && strcmp(it.cfg[i].value, "compact") == 0;
    assert_true(compact);
    /* Kafka's abs(hashCode) % n: "a" (97) % 2 = 1 */
    assert_int_equal(st_kgroup_service.route(st_kstr("a"), 2), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_register_rules, setup),
        cmocka_unit_test_setup(test_lookups, setup),
        cmocka_unit_test_setup(test_route, setup),
        cmocka_unit_test_setup(test_leadership_dispatch, setup),
        cmocka_unit_test_setup(test_shard_life, setup),
        cmocka_unit_test_setup(test_failed_start_rolls_back, setup),
        cmocka_unit_test_setup(test_group_service, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
