/* test_connquota.c — connection quotas (broker/connquota.h): per-IP counts with overrides,
 * the broker-wide bound and its protected listener, the ip entities' connection rate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "broker/connquota.h"

static st_connquota_t *make(const char *per_ip, const char *overrides, const char *total)
{
    st_config_t c;
    char err[256];
    assert_int_equal(st_config_init(&c), 0);
    if (per_ip)
        assert_int_equal(st_config_set(&c, "max.connections.per.ip", per_ip, err, sizeof err), 0);
    if (overrides)
        assert_int_equal(
            st_config_set(&c, "max.connections.per.ip.overrides", overrides, err, sizeof err), 0);
    if (total)
        assert_int_equal(st_config_set(&c, "max.connections", total, err, sizeof err), 0);
    st_connquota_t *q = st_connquota_create(&c, err, sizeof err);
    st_config_fini(&c);
    return q;
}

static void test_per_ip(void **state)
{
    (void)state;
    st_connquota_t *q = make("2", "10.0.0.9:1, ::1:3", NULL);
    assert_non_null(q);
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.1", false, 0), 0);
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.1", false, 0), 0);
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.1", false, 0), -1);
    assert_int_equal(st_connquota_count(q, "10.0.0.1"), 2);
    /* another address has its own count; overrides, IPv6 with its colons too */
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.2", false, 0), 0);
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.9", false, 0), 0);
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.9", false, 0), -1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(st_connquota_admit(q, NULL, 0, "::1", false, 0), 0);
    assert_int_equal(st_connquota_admit(q, NULL, 0, "::1", false, 0), -1);
    /* a close frees a place */
    st_connquota_release(q, "10.0.0.1");
    assert_int_equal(st_connquota_count(q, "10.0.0.1"), 1);
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.1", false, 0), 0);
    st_connquota_release(q, "10.0.0.77"); /* never counted: nothing */
    st_connquota_destroy(q);
}

static void test_bad_overrides(void **state)
{
    (void)state;
    assert_null(make(NULL, "localhost:3", NULL));
    assert_null(make(NULL, "10.0.0.1", NULL));
    assert_null(make(NULL, "10.0.0.1:x", NULL));
    assert_null(make(NULL, "10.0.0.1:-1", NULL));
}

static void test_total(void **state)
{
    (void)state;
    st_connquota_t *q = make(NULL, NULL, "2");
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.1", false, 0), 0);
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.2", false, 0), 0);
    /* no slot: waits (nothing recorded), as Kafka's acceptor */
    assert_true(st_connquota_admit(q, NULL, 0, "10.0.0.3", false, 0) == ST_CONNQUOTA_WAIT);
    assert_int_equal(st_connquota_count(q, "10.0.0.3"), 0);
    /* the inter-broker listener is not bound by max.connections */
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.3", true, 0), 0);
    st_connquota_release(q, "10.0.0.1");
    st_connquota_release(q, "10.0.0.3");
    assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.4", false, 0), 0);
    st_connquota_destroy(q);
}

/* connection_creation_rate 1/s: about 10 at once over the young 10 s window, then throttled
 * (not counted) for at most one window; the default ip applies to the others. */
static void test_rate(void **state)
{
    (void)state;
    st_quota_t qs[2];
    memset(qs, 0, sizeof qs);
    qs[0].e.ip = ST_QE_NAME;
    strcpy(qs[0].e.ip_name, "10.0.0.1");
    qs[0].set = 1u << ST_QUOTA_CONNECTION_CREATION_RATE;
    qs[0].values[ST_QUOTA_CONNECTION_CREATION_RATE] = 1;
    qs[1].e.ip = ST_QE_DEFAULT;
    qs[1].set = 1u << ST_QUOTA_CONNECTION_CREATION_RATE;
    qs[1].values[ST_QUOTA_CONNECTION_CREATION_RATE] = 100;
    st_connquota_t *q = make(NULL, NULL, NULL);
    int ok = 0;
    int64_t throttled = 0;
    for (int i = 0; i < 20 && !throttled; i++) {
        int64_t rc = st_connquota_admit(q, qs, 2, "10.0.0.1", false, 1000);
        if (rc == 0)
            ok++;
        else
            throttled = rc;
    }
    assert_int_equal(ok, 10);
    assert_true(throttled > 0 && throttled <= ST_QUOTA_WINDOW_MS);
    assert_int_equal(st_connquota_count(q, "10.0.0.1"), 10);
    /* still throttled a second later (11 over the 10 s the window counts at least) */
    assert_true(st_connquota_admit(q, qs, 2, "10.0.0.1", false, 2000) > 0);
    /* once the burst's sample is past every window (11 s), connections fit again */
    assert_int_equal(st_connquota_admit(q, qs, 2, "10.0.0.1", false, 12500), 0);
    assert_int_equal(st_connquota_count(q, "10.0.0.1"), 11);
    /* the default ip's 100/s for another address */
    for (int i = 0; i < 50; i++)
        assert_int_equal(st_connquota_admit(q, qs, 2, "10.0.0.2", false, 1000), 0);
    /* without the quotas, no rate */
    for (int i = 0; i < 50; i++)
        assert_int_equal(st_connquota_admit(q, NULL, 0, "10.0.0.3", false, 1000), 0);
    st_connquota_destroy(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_ip),
        cmocka_unit_test(test_bad_overrides),
        cmocka_unit_test(test_total),
        cmocka_unit_test(test_rate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
