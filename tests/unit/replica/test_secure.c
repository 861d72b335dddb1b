/*
 * Unit tests for replica/secure.c: what the inter-broker listener's settings make of this
 * broker's own connections. PLAINTEXT: nothing; SSL: a client context, the host-name check on
 * by default (ssl.endpoint.identification.algorithm=https) and off when empty, an unknown
 * algorithm or a truststore that does not load refused with one line; SASL_SSL: the mechanism
 * and the credentials from Kafka's JAAS form. The handshakes themselves are exercised by
 * tests/integration/test_cluster_secure.py against real brokers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "replica/secure.h"

/* A two-voter cluster config whose only Kafka listener is `proto`, plus kv pairs. */
static void configure(st_config_t *c, const char *proto, const char *const *kv)
{
    char err[512], l[128];
    assert_int_equal(st_config_init(c), 0);
    snprintf(l, sizeof l, "%s://127.0.0.1:1,CONTROLLER://127.0.0.1:2", proto);
    const char *base[] = {"listeners",
                          l,
                          "controller.quorum.voters",
                          "1@127.0.0.1:2,2@127.0.0.1:3",
                          "inter.broker.listener.name",
                          proto,
                          "node.id",
                          "1",
                          NULL};
    for (int i = 0; base[i]; i += 2)
        assert_int_equal(st_config_set(c, base[i], base[i + 1], err, sizeof err), 0);
    for (int i = 0; kv && kv[i]; i += 2)
        assert_int_equal(st_config_set(c, kv[i], kv[i + 1], err, sizeof err), 0);
    if (st_config_finish(c, err, sizeof err))
        fail_msg("config refused: %s", err);
}

static void test_plaintext_is_nothing(void **state)
{
    (void)state;
    st_config_t c;
    st_rsec_t *s = (st_rsec_t *)1;
    char err[512];
    configure(&c, "PLAINTEXT", NULL);
    assert_int_equal(st_rsec_create(&c, &s, err, sizeof err), 0);
    assert_null(s);
    assert_int_equal(st_rsec_create(NULL, &s, err, sizeof err), 0);
    assert_null(s);
    st_config_fini(&c);
}

static void test_ssl_host_check(void **state)
{
    (void)state;
    st_config_t c;
    st_rsec_t *s = NULL;
    char err[512];
    configure(&c, "SSL", NULL); /* no truststore: OpenSSL's default CAs */
    assert_int_equal(st_rsec_create(&c, &s, err, sizeof err), 0);
    assert_non_null(s);
    assert_non_null(s->tls);
    assert_true(s->verify_host);
    assert_int_equal(s->sasl, ST_RSEC_SASL_NONE);
    st_rsec_destroy(s);
    st_config_fini(&c);

    const char *off[] = {"listener.name.ssl.ssl.endpoint.identification.algorithm", "", NULL};
    configure(&c, "SSL", off);
    assert_int_equal(st_rsec_create(&c, &s, err, sizeof err), 0);
    assert_false(s->verify_host);
    st_rsec_destroy(s);
    st_config_fini(&c);

    const char *bad[] = {"ssl.endpoint.identification.algorithm", "ldap", NULL};
    configure(&c, "SSL", bad);
    assert_int_not_equal(st_rsec_create(&c, &s, err, sizeof err), 0);
    assert_non_null(strstr(err, "ssl.endpoint.identification.algorithm=ldap"));
    st_config_fini(&c);

    const char *missing[] = {"ssl.truststore.location", "/nonexistent/ca.pem", NULL};
    configure(&c, "SSL", missing);
    assert_int_not_equal(st_rsec_create(&c, &s, err, sizeof err), 0);
    assert_non_null(strstr(err, "ssl.truststore.location"));
    st_config_fini(&c);
}

static void test_sasl_ssl_credentials(void **state)
{
    (void)state;
    st_config_t c;
    st_rsec_t *s = NULL;
    char err[512];
    const char *kv[] = {"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
                        "org.apache.kafka.common.security.scram.ScramLoginModule required "
                        "username=\"repl\" password=\"pw\";",
                        "sasl.mechanism.inter.broker.protocol", "scram-sha-256", NULL};
    configure(&c, "SASL_SSL", kv);
    assert_int_equal(st_rsec_create(&c, &s, err, sizeof err), 0);
    assert_non_null(s->tls);
    assert_int_equal(s->sasl, ST_RSEC_SASL_SCRAM);
    assert_int_equal(s->scram, ST_SCRAM_SHA_256);
    assert_string_equal(s->mechanism, "SCRAM-SHA-256");
    assert_string_equal(s->user, "repl");
    assert_string_equal(s->password, "pw");
    st_rsec_destroy(s);
    st_config_fini(&c);

    const char *plain[] = {"sasl.mechanism.inter.broker.protocol", "PLAIN", "sasl.jaas.config",
                           "username=u password=p", NULL};
    configure(&c, "SASL_PLAINTEXT", plain);
    assert_int_equal(st_rsec_create(&c, &s, err, sizeof err), 0);
    assert_null(s->tls);
    assert_int_equal(s->sasl, ST_RSEC_SASL_PLAIN);
    assert_string_equal(s->user, "u");
    st_rsec_destroy(s);
    st_config_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plaintext_is_nothing),
        cmocka_unit_test(test_ssl_host_check),
        cmocka_unit_test(test_sasl_ssl_credentials),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
