/*
 * Unit tests for auth/quota: key names, Kafka's eight-step precedence over user, client id and
 * their defaults (and the entity usage counts against), the sampled rate's window and Kafka's
 * throttle formula.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "auth/quota.h"

static st_quota_t quota(int8_t u, const char *un, int8_t c, const char *cn, int key, double v)
{
    st_quota_t q = {0};
    q.e.user = u;
    q.e.client = c;
    if (un)
        strcpy(q.e.user_name, un);
    if (cn)
        strcpy(q.e.client_name, cn);
    q.set = (uint8_t)(1u << key);
    q.values[key] = v;
    return q;
}

static void test_keys(void **state)
{
    (void)state;
    assert_int_equal(st_quota_key("producer_byte_rate"), ST_QUOTA_PRODUCER_BYTE_RATE);
    assert_int_equal(st_quota_key("controller_mutation_rate"), ST_QUOTA_CONTROLLER_MUTATION_RATE);
    assert_int_equal(st_quota_key("connection_creation_rate"), ST_QUOTA_CONNECTION_CREATION_RATE);
    assert_int_equal(st_quota_key("ip_rate"), -1);
    assert_int_equal(st_quota_key(NULL), -1);
    assert_string_equal(st_quota_key_name(ST_QUOTA_CONSUMER_BYTE_RATE), "consumer_byte_rate");
    assert_true(st_quota_key_integral(ST_QUOTA_PRODUCER_BYTE_RATE));
    assert_false(st_quota_key_integral(ST_QUOTA_REQUEST_PERCENTAGE));
    assert_true(st_quota_key_integral(ST_QUOTA_CONNECTION_CREATION_RATE));
    /* connection_creation_rate on ip entities and only there */
    st_quota_entity_t ip = {.ip = ST_QE_DEFAULT}, user = {.user = ST_QE_DEFAULT};
    assert_true(st_quota_key_allowed(&ip, ST_QUOTA_CONNECTION_CREATION_RATE));
    assert_false(st_quota_key_allowed(&ip, ST_QUOTA_REQUEST_PERCENTAGE));
    assert_false(st_quota_key_allowed(&user, ST_QUOTA_CONNECTION_CREATION_RATE));
    assert_true(st_quota_key_allowed(&user, ST_QUOTA_CONTROLLER_MUTATION_RATE));
}

/* An ip entity's one spelling, and which ip quota applies. */
static void test_ip(void **state)
{
    (void)state;
    char out[ST_QUOTA_IP_MAX];
    assert_int_equal(st_quota_ip_normalize("127.0.0.1", 9, out), 0);
    assert_string_equal(out, "127.0.0.1");
    assert_int_equal(st_quota_ip_normalize("0:0::1", 6, out), 0);
    assert_string_equal(out, "::1");
    assert_int_equal(st_quota_ip_normalize("localhost", 9, out), -1);
    assert_int_equal(st_quota_ip_normalize("", 0, out), -1);
    assert_int_equal(st_quota_ip_normalize("1.2.3.4\0x", 9, out), -1);
    st_quota_t q[2];
    memset(q, 0, sizeof q);
    q[0].e.ip = ST_QE_DEFAULT;
    q[0].set = 1u << ST_QUOTA_CONNECTION_CREATION_RATE;
    q[0].values[ST_QUOTA_CONNECTION_CREATION_RATE] = 10;
    q[1].e.ip = ST_QE_NAME;
    strcpy(q[1].e.ip_name, "127.0.0.1");
    q[1].set = 1u << ST_QUOTA_CONNECTION_CREATION_RATE;
    q[1].values[ST_QUOTA_CONNECTION_CREATION_RATE] = 2;
    double b = 0;
    assert_false(st_quota_ip_rate(q, 0, "127.0.0.1", &b));
    assert_true(st_quota_ip_rate(q, 2, "127.0.0.1", &b) && b == 2);
    assert_true(st_quota_ip_rate(q, 2, "127.0.0.2", &b) && b == 10);
    assert_false(st_quota_ip_rate(&q[1], 1, "127.0.0.2", &b));
    /* an ip entity is never a user or client form */
    st_quota_entity_t tags;
    assert_false(st_quota_resolve(q, 2, ST_QUOTA_CONNECTION_CREATION_RATE, "", "", &b, &tags));
}

/* request_percentage: handling time as percent of one shard, throttled at most one window. */
static void test_request_time(void **state)
{
    (void)state;
    assert_true(st_quota_ns_to_percentage(1000000000) == 100);
    assert_true(st_quota_ns_to_percentage(10000000) == 1);
    st_qrate_t r;
    st_qrate_init(&r);
    /* 0.5 s of handling at t=0 over the minimum 10 s span: 5 % of a shard */
    st_qrate_record(&r, st_quota_ns_to_percentage(500000000), 0);
    assert_true(st_qrate_measure(&r, 0) == 5);
    /* against 1 %: (5 - 1) / 1 * 10 s, capped at one window; against 4 %: (5 - 4) / 4 * 10 s */
    assert_int_equal(st_qrate_throttle(&r, 1, 0, ST_QUOTA_WINDOW_MS), ST_QUOTA_WINDOW_MS);
    assert_int_equal(st_qrate_throttle(&r, 4, 0, 100000), 2500);
    assert_int_equal(st_qrate_throttle(&r, 10, 0, ST_QUOTA_WINDOW_MS), 0);
    /* measuring records nothing */
    assert_true(st_qrate_measure(&r, 0) == 5);
}

/* controller_mutation_rate's token bucket (Kafka's TokenBucket and strict check). */
static void test_bucket(void **state)
{
    (void)state;
    st_qbucket_t b;
    st_qbucket_init(&b);
    /* full at first: the burst is 11 windows of 1 s at 2 per second */
    assert_true(st_qbucket_tokens(&b, 2, 1000) == 22);
    /* strict: accepted while not in debt, even beyond what is left */
    assert_int_equal(st_qbucket_take_strict(&b, 20, 2, 1000), 0);
    assert_int_equal(st_qbucket_take_strict(&b, 10, 2, 1000), 0);
    assert_true(st_qbucket_tokens(&b, 2, 1000) == -8);
    /* in debt: refused, nothing taken, the wait is -tokens / rate */
    assert_int_equal(st_qbucket_take_strict(&b, 1, 2, 1000), 4000);
    assert_true(st_qbucket_tokens(&b, 2, 1000) == -8);
    /* refilled 2 per second: 3 s later still 2 short (1 s), 4 s later accepted */
    assert_int_equal(st_qbucket_take_strict(&b, 1, 2, 4000), 1000);
    assert_int_equal(st_qbucket_take_strict(&b, 1, 2, 5000), 0);
    assert_true(st_qbucket_tokens(&b, 2, 5000) == -1);
    /* a short debt waits at least 1 ms */
    assert_int_equal(st_qbucket_debt_ms(&b, 2, 5499), 1);
    /* refill stops at the burst */
    assert_true(st_qbucket_tokens(&b, 2, 1000000) == 22);
    /* permissive: always taken, the throttle is the debt's time */
    assert_int_equal(st_qbucket_take(&b, 23, 2, 1000000), 500);
    assert_int_equal(st_qbucket_take(&b, -1, 2, 1000000), 0); /* a refund */
    assert_true(st_qbucket_tokens(&b, 2, 1000000) == 0);
}

/* The eight forms, most specific first: each removed in turn, the next applies. */
static void test_precedence(void **state)
{
    (void)state;
    const int P = ST_QUOTA_PRODUCER_BYTE_RATE;
    st_quota_t q[] = {
        quota(ST_QE_NONE, NULL, ST_QE_DEFAULT, NULL, P, 8),    /* 8. default client */
        quota(ST_QE_NONE, NULL, ST_QE_NAME, "app", P, 7),      /* 7. client app */
        quota(ST_QE_DEFAULT, NULL, ST_QE_NONE, NULL, P, 6),    /* 6. default user */
        quota(ST_QE_DEFAULT, NULL, ST_QE_DEFAULT, NULL, P, 5), /* 5. default user+client */
        quota(ST_QE_DEFAULT, NULL, ST_QE_NAME, "app", P, 4),   /* 4. default user, app */
        quota(ST_QE_NAME, "alice", ST_QE_NONE, NULL, P, 3),    /* 3. alice */
        quota(ST_QE_NAME, "alice", ST_QE_DEFAULT, NULL, P, 2), /* 2. alice, default client */
        quota(ST_QE_NAME, "alice", ST_QE_NAME, "app", P, 1),   /* 1. alice, app */
        quota(ST_QE_NAME, "bob", ST_QE_NAME, "app", P, 100),   /* another user's */
        quota(ST_QE_NAME, "alice", ST_QE_NAME, "app", ST_QUOTA_CONSUMER_BYTE_RATE, 99),
    };
    /* tags: which parts of the entity usage is counted under (1 both, 2 user, 3 client) */
    static const int parts[9] = {0, 1, 1, 2, 1, 1, 2, 3, 3};
    size_t n = sizeof q / sizeof q[0] - 2;
    for (int want = 1; want <= 8; want++) {
        double bound = 0;
        st_quota_entity_t tags;
        /* q[n-1] is form `want`: the array holds forms 8..want (plus the two others) */
        st_quota_t v[10];
        memcpy(v, q, n * sizeof *q);
        v[n] = q[8];
        v[n + 1] = q[9];
        assert_true(st_quota_resolve(v, n + 2, P, "alice", "app", &bound, &tags));
        assert_true(bound == want);
        int p = parts[want];
        assert_int_equal(tags.user, p == 3 ? ST_QE_NONE : ST_QE_NAME);
        assert_int_equal(tags.client, p == 2 ? ST_QE_NONE : ST_QE_NAME);
        if (tags.user == ST_QE_NAME)
            assert_string_equal(tags.user_name, "alice");
        if (tags.client == ST_QE_NAME)
            assert_string_equal(tags.client_name, "app");
        n--;
    }
    double bound;
    st_quota_entity_t tags;
    /* nothing left for alice/app but bob's and another key's */
    assert_false(st_quota_resolve(&q[8], 2, P, "alice", "app", &bound, &tags));
    /* bob with another client gets the default user's quota, counted as bob's own */
    assert_true(st_quota_resolve(q, 8, P, "bob", "other", &bound, &tags));
    assert_true(bound == 5);
    assert_string_equal(tags.user_name, "bob");
    assert_string_equal(tags.client_name, "other");
    assert_true(st_quota_resolve(q, 3, P, "carol", "x", &bound, &tags));
    assert_true(bound == 6);
    assert_int_equal(tags.client, ST_QE_NONE);
    assert_true(st_quota_resolve(q, 1, P, "carol", "x", &bound, &tags));
    assert_true(bound == 8);
    assert_int_equal(tags.user, ST_QE_NONE);
    assert_false(st_quota_resolve(q, 0, P, "carol", "x", &bound, &tags));
}

static void test_throttle_formula(void **state)
{
    (void)state;
    /* Kafka: (rate - bound) / bound * window */
    assert_int_equal(st_quota_throttle_ms(100, 100, 10000), 0);
    assert_int_equal(st_quota_throttle_ms(50, 100, 10000), 0);
    assert_int_equal(st_quota_throttle_ms(150, 100, 10000), 5000);
    assert_int_equal(st_quota_throttle_ms(110, 100, 10500), 1050);
    /* capped at samples * window; a bound of 0 throttles for the cap */
    assert_int_equal(st_quota_throttle_ms(1e9, 100, 11000), 11000);
    assert_int_equal(st_quota_throttle_ms(1, 0, 11000), 11000);
}

static void test_rate_window(void **state)
{
    (void)state;
    st_qrate_t r;
    st_qrate_init(&r);
    /* a fresh rate counts at least (samples - 1) whole windows: 10 s */
    st_qrate_record(&r, 1000, 5000);
    assert_int_equal(st_qrate_window_ms(&r, 5000), 10000);
    assert_true(st_qrate_measure(&r, 5000) == 100);
    assert_int_equal(st_qrate_window_ms(&r, 5500), 10500);
    /* one record per second for 20 s: the window stays 10-11 s, the rate is per second */
    for (int s = 1; s <= 20; s++)
        st_qrate_record(&r, 1000, 5000 + s * 1000);
    int64_t w = st_qrate_window_ms(&r, 25000);
    assert_true(w >= 10000 && w <= 11000);
    double rate = st_qrate_measure(&r, 25000);
    assert_true(rate > 900 && rate <= 1100);
    /* quiet for longer than every window: forgotten */
    assert_true(st_qrate_measure(&r, 60000) == 0);

    /* record_throttle: 1500 bytes/s against 1000 over a fresh 10 s window throttles 5 s */
    st_qrate_init(&r);
    assert_int_equal(st_qrate_record_throttle(&r, 10000, 1000, 100, 11000), 0);
    assert_int_equal(st_qrate_record_throttle(&r, 5000, 1000, 100, 11000), 5000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_throttle_formula),
        cmocka_unit_test(test_rate_window),
        cmocka_unit_test(test_ip),
        cmocka_unit_test(test_request_time),
        cmocka_unit_test(test_bucket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
