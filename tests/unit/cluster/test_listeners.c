/* Unit tests for the listener settings of cluster/config.c: listeners, the security protocol
 * map, advertised.listeners per listener, inter.broker.listener.name and the refusals; a
 * cluster all SASL_SSL (the brokers' mechanism and their credentials in Kafka's JAAS form);
 * OAUTHBEARER's validator settings and connections.max.reauth.ms per listener and mechanism. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/config.h"
#include "net/tls.h"

/* Applies the key=value pairs (NULL-terminated) to a default config and finishes it:
 * st_config_finish's result, err holding its line. */
static int configure(st_config_t *c, char *err, size_t errlen, const char *const *kv)
{
    assert_int_equal(st_config_init(c), 0);
    for (int i = 0; kv[i]; i += 2)
        assert_int_equal(st_config_set(c, kv[i], kv[i + 1], err, errlen), 0);
    err[0] = 0;
    return st_config_finish(c, err, errlen);
}

static void test_default_is_one_plaintext_listener(void **state)
{
    (void)state;
    st_config_t c;
    char err[512];
    const char *kv[] = {NULL};
    assert_int_equal(configure(&c, err, sizeof err, kv), 0);
    assert_int_equal(c.nkafka_listeners, 1);
    const st_listener_t *l = &c.kafka_listeners[0];
    assert_string_equal(l->name, "PLAINTEXT");
    assert_int_equal(l->protocol, ST_SEC_PLAINTEXT);
    assert_string_equal(l->host, "127.0.0.1");
    assert_int_equal(l->port, 9092);
    assert_string_equal(l->adv_host, "127.0.0.1");
    assert_int_equal(l->adv_port, 9092);
    assert_int_equal(c.inter_broker_listener, 0);
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.listen_port, 9092);
    assert_string_equal(c.advertised_host, "127.0.0.1");
    assert_int_equal(c.advertised_port, 9092);
    st_config_fini(&c);
}

static void test_several_listeners(void **state)
{
    (void)state;
    st_config_t c;
    char err[512];
    const char *kv[] = {"listeners",
                        "internal://10.0.0.5:9094, PLAINTEXT://:9092,CONTROLLER://127.0.0.1:9093",
                        "listener.security.protocol.map",
                        "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                        "advertised.listeners",
                        "PLAINTEXT://broker1.example:19092",
                        NULL};
    assert_int_equal(configure(&c, err, sizeof err, kv), 0);
    assert_int_equal(c.nkafka_listeners, 2); /* CONTROLLER is the quorum's */
    assert_string_equal(c.kafka_listeners[0].name, "INTERNAL");
    assert_string_equal(c.kafka_listeners[0].adv_host, "10.0.0.5"); /* its own address */
    assert_int_equal(c.kafka_listeners[0].adv_port, 9094);
    assert_string_equal(c.kafka_listeners[1].name, "PLAINTEXT");
    assert_string_equal(c.kafka_listeners[1].host, ""); /* every interface */
    assert_string_equal(c.kafka_listeners[1].adv_host, "broker1.example");
    assert_int_equal(c.kafka_listeners[1].adv_port, 19092);
    /* PLAINTEXT is the inter-broker listener by default, wherever it is in the list. */
    assert_int_equal(c.inter_broker_listener, 1);
    assert_int_equal(c.listen_port, 9092);
    assert_string_equal(c.advertised_host, "broker1.example");
    assert_int_equal(c.controller_port, 9093);
    st_config_fini(&c);

    const char *kv2[] = {"listeners",
                         "A://127.0.0.1:0,B://127.0.0.1:0",
                         "listener.security.protocol.map",
                         "A:PLAINTEXT,B:PLAINTEXT",
                         "inter.broker.listener.name",
                         "b",
                         NULL};
    assert_int_equal(configure(&c, err, sizeof err, kv2), 0);
    assert_int_equal(c.nkafka_listeners, 2); /* two on port 0 do not share a port */
    assert_int_equal(c.inter_broker_listener, 1);
    st_config_fini(&c);

    const char *kv3[] = {"listeners", "A://127.0.0.1:1,B://127.0.0.1:2",
                         "listener.security.protocol.map", "A:PLAINTEXT,B:PLAINTEXT", NULL};
    assert_int_equal(configure(&c, err, sizeof err, kv3), 0);
    assert_int_equal(c.inter_broker_listener, 0); /* no PLAINTEXT: the first */
    st_config_fini(&c);
}

/* st_config_set itself refuses kv's (one) pair with a line holding want. */
static void refused_set(const char *const *kv, const char *want)
{
    st_config_t c;
    char err[512];
    assert_int_equal(st_config_init(&c), 0);
    assert_int_not_equal(st_config_set(&c, kv[0], kv[1], err, sizeof err), 0);
    if (!strstr(err, want))
        fail_msg("'%s' does not hold '%s'", err, want);
    st_config_fini(&c);
}

/* The configuration is refused with a line containing `want`. */
static void refused(const char *const *kv, const char *want)
{
    st_config_t c;
    char err[512];
    assert_int_not_equal(configure(&c, err, sizeof err, kv), 0);
    if (!strstr(err, want))
        fail_msg("refusal '%s' does not say '%s'", err, want);
    assert_null(strchr(err, '\n'));
    st_config_fini(&c);
}

/* An SSL listener is accepted; its ssl.* come from listener.name.<name>.ssl.* over ssl.*. */
/* KIP-684: the broker-wide ssl.client.auth applies to SSL listeners; a SASL_SSL listener asks
 * for client certificates only by its own listener.name.<name>.ssl.client.auth. */
static void test_sasl_ssl_client_auth(void **state)
{
    (void)state;
    const char *kv[] = {"listeners",
                        "SSL://127.0.0.1:1,SASL_SSL://127.0.0.1:2,MTLS_SASL://127.0.0.1:3",
                        "listener.security.protocol.map",
                        "SSL:SSL,SASL_SSL:SASL_SSL,MTLS_SASL:SASL_SSL",
                        "ssl.client.auth",
                        "required",
                        "ssl.truststore.location",
                        "/ca.pem",
                        "listener.name.mtls_sasl.ssl.client.auth",
                        "requested",
                        NULL};
    st_config_t c;
    char err[512];
    assert_int_equal(configure(&c, err, sizeof err, kv), 0);
    st_tls_settings_t t = {0};
    st_config_lookup_t lk = {.cfg = &c, .listener = "SSL"};
    st_tls_settings_get(&t, st_config_lookup, &lk);
    assert_string_equal(t.client_auth, "required");
    lk.listener = "sasl_ssl";
    st_tls_settings_get(&t, st_config_lookup, &lk);
    assert_string_equal(t.client_auth, "none");
    assert_string_equal(t.truststore_location, "/ca.pem");
    lk.listener = "MTLS_SASL";
    st_tls_settings_get(&t, st_config_lookup, &lk);
    assert_string_equal(t.client_auth, "requested");
    st_config_fini(&c);
}

static void test_ssl_listener_settings(void **state)
{
    (void)state;
    const char *kv[] = {"listeners",
                        "PLAINTEXT://127.0.0.1:1,SECURE://127.0.0.1:2",
                        "listener.security.protocol.map",
                        "PLAINTEXT:PLAINTEXT,SECURE:SSL",
                        "ssl.keystore.location",
                        "/global.pem",
                        "listener.name.secure.ssl.keystore.location",
                        "/secure.pem",
                        "listener.name.SECURE.ssl.client.auth",
                        "required",
                        NULL};
    st_config_t c;
    char err[512];
    assert_int_equal(configure(&c, err, sizeof err, kv), 0);
    assert_int_equal(c.nkafka_listeners, 2);
    assert_int_equal(c.kafka_listeners[1].protocol, ST_SEC_SSL);
    assert_true(st_sec_protocol_tls(ST_SEC_SSL) && st_sec_protocol_tls(ST_SEC_SASL_SSL));
    assert_false(st_sec_protocol_tls(ST_SEC_PLAINTEXT));
    assert_string_equal(st_config_listener_get(&c, "secure", "ssl.keystore.location"),
                        "/secure.pem");
    assert_string_equal(st_config_listener_get(&c, "SECURE", "ssl.client.auth"), "required");
    assert_string_equal(st_config_listener_get(&c, "plaintext", "ssl.keystore.location"),
                        "/global.pem");
    assert_string_equal(st_config_listener_get(&c, "plaintext", "ssl.client.auth"), "none");
    assert_string_equal(st_config_listener_get(&c, "secure", "ssl.enabled.protocols"),
                        "TLSv1.2,TLSv1.3");
    /* The one reading of a listener's ssl.* settings (net/tls.h), over this lookup. */
    assert_int_equal(st_config_set(&c, "ssl.handshake.timeout.ms", "1234", err, sizeof err), 0);
    st_config_lookup_t lk = {.cfg = &c, .listener = "Secure"};
    st_tls_settings_t t = {.reload_check_ms = -7};
    st_tls_settings_get(&t, st_config_lookup, &lk);
    assert_string_equal(t.keystore_location, "/secure.pem");
    assert_string_equal(t.client_auth, "required");
    assert_string_equal(t.keystore_type, "PEM");
    assert_string_equal(t.truststore_location, "");
    assert_string_equal(t.principal_mapping_rules, "DEFAULT");
    assert_int_equal(t.handshake_timeout_ms, 1234);
    assert_int_equal(t.reload_check_ms, 2000);
    lk.listener = "plaintext";
    st_tls_settings_get(&t, st_config_lookup, &lk);
    assert_string_equal(t.keystore_location, "/global.pem");
    assert_string_equal(t.client_auth, "none");
    assert_int_not_equal(
        st_config_set(&c, "listener.name.secure.ssl.nonsense", "x", err, sizeof err), 0);
    assert_non_null(strstr(err, "ssl.nonsense is not a listener setting"));
    st_config_fini(&c);
}

static void test_sasl_plaintext_listener(void **state)
{
    (void)state;
    const char *kv[] = {"listeners",
                        "SASL_PLAINTEXT://127.0.0.1:0",
                        "sasl.enabled.mechanisms",
                        "scram-sha-512, PLAIN",
                        "sasl.bootstrap.users",
                        "alice:SCRAM-SHA-256:a:b,bob:SCRAM-SHA-512:pw",
                        NULL};
    st_config_t c;
    char err[512];
    assert_int_equal(configure(&c, err, sizeof err, kv), 0);
    assert_int_equal(c.nkafka_listeners, 1);
    assert_int_equal(c.kafka_listeners[0].protocol, ST_SEC_SASL_PLAINTEXT);
    assert_int_equal(c.sasl_mechanisms, ST_SASL_PLAIN | ST_SASL_SCRAM_SHA_512);
    st_config_fini(&c);
}

/* SASL_SSL: TLS underneath (st_sec_protocol_tls), SASL on top; every protocol is accepted. */
static void test_sasl_ssl_listener(void **state)
{
    (void)state;
    const char *kv[] = {"listeners", "PLAINTEXT://127.0.0.1:1,SASL_SSL://127.0.0.1:2", NULL};
    st_config_t c;
    char err[512];
    assert_int_equal(configure(&c, err, sizeof err, kv), 0);
    assert_int_equal(c.nkafka_listeners, 2);
    assert_int_equal(c.kafka_listeners[1].protocol, ST_SEC_SASL_SSL);
    assert_true(st_sec_protocol_tls(c.kafka_listeners[1].protocol));
    assert_true(st_sec_protocol_sasl(c.kafka_listeners[1].protocol));
    st_config_fini(&c);
}

static void test_refusals(void **state)
{
    (void)state;
    const char *mech[] = {"listeners", "SASL_PLAINTEXT://127.0.0.1:1", "sasl.enabled.mechanisms",
                          "PLAIN,GSSAPI", NULL};
    refused(mech, "sasl.enabled.mechanisms: 'GSSAPI' is not one of");
    const char *boot[] = {"sasl.bootstrap.users", "alice:PLAIN:pw", NULL};
    refused(boot, "bad entry in sasl.bootstrap.users");
    const char *unmapped[] = {"listeners", "FOO://127.0.0.1:1", NULL};
    refused(unmapped, "listener FOO has no security protocol in listener.security.protocol.map");
    const char *badmap[] = {"listener.security.protocol.map", "PLAINTEXT", NULL};
    refused(badmap, "bad value for listener.security.protocol.map");
    const char *twice[] = {"listeners", "PLAINTEXT://a:1,plaintext://b:2", NULL};
    refused(twice, "listeners names PLAINTEXT twice");
    const char *port[] = {"listeners", "PLAINTEXT://a:7,SSL://b:7",
                          "listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:PLAINTEXT",
                          NULL};
    refused(port, "listeners PLAINTEXT and SSL share port 7");
    const char *none[] = {"listeners", "CONTROLLER://127.0.0.1:1", NULL};
    refused(none, "no Kafka listener");
    const char *syntax[] = {"listeners", "PLAINTEXT:/127.0.0.1:1", NULL};
    refused(syntax, "bad value for listeners");
    const char *adv[] = {"advertised.listeners", "OTHER://x:1", NULL};
    refused(adv, "advertised.listeners: 'OTHER' is not a Kafka listener");
    const char *advsyntax[] = {"advertised.listeners", "PLAINTEXT://x", NULL};
    refused(advsyntax, "bad value for advertised.listeners");
    const char *ib[] = {"inter.broker.listener.name", "REPL", NULL};
    refused(ib, "inter.broker.listener.name=REPL is not a Kafka listener");
}

/* A cluster whose every Kafka listener is SASL_SSL, the inter-broker one too: the mechanism
 * brokers use with each other and their credentials from Kafka's JAAS form. */
#define SECURE_CLUSTER                                                                             \
    "listeners", "SASL_SSL://127.0.0.1:1,CONTROLLER://127.0.0.1:2", "controller.quorum.voters",    \
        "1@127.0.0.1:2,2@127.0.0.1:3", "node.id", "1", "inter.broker.listener.name", "SASL_SSL"
static void test_inter_broker_sasl_ssl(void **state)
{
    (void)state;
    st_config_t c;
    char err[512], u[64], p[64];
    const char *kv[] = {SECURE_CLUSTER, "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
                        "org.apache.kafka.common.security.scram.ScramLoginModule required "
                        "username=\"broker\" password=\"pa\\\"ss word\";",
                        NULL};
    assert_int_equal(configure(&c, err, sizeof err, kv), 0);
    assert_int_equal(c.kafka_listeners[c.inter_broker_listener].protocol, ST_SEC_SASL_SSL);
    assert_int_equal(
        st_config_inter_broker_credentials(&c, u, sizeof u, p, sizeof p, err, sizeof err), 0);
    assert_string_equal(u, "broker");
    assert_string_equal(p, "pa\"ss word");
    assert_string_equal(c.ssl_endpoint_identification_algorithm, "https");
    st_config_fini(&c);
    /* the global sasl.jaas.config, bare words, PLAIN */
    const char *plain[] = {SECURE_CLUSTER,     "sasl.mechanism.inter.broker.protocol",    "PLAIN",
                           "sasl.jaas.config", "x required username=b2 password=secret;", NULL};
    assert_int_equal(configure(&c, err, sizeof err, plain), 0);
    assert_int_equal(
        st_config_inter_broker_credentials(&c, u, sizeof u, p, sizeof p, err, sizeof err), 0);
    assert_string_equal(u, "b2");
    assert_string_equal(p, "secret");
    st_config_fini(&c);
    const char *nojaas[] = {SECURE_CLUSTER, NULL};
    refused(nojaas, "set listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config");
    const char *nopw[] = {SECURE_CLUSTER, "sasl.jaas.config", "x required username=\"b\";", NULL};
    refused(nopw, "expected username=");
    const char *mech[] = {SECURE_CLUSTER,
                          "sasl.mechanism.inter.broker.protocol",
                          "GSSAPI",
                          "sasl.jaas.config",
                          "username=a password=b",
                          NULL};
    refused(mech, "sasl.mechanism.inter.broker.protocol: 'GSSAPI' is not one of");
    const char *off[] = {SECURE_CLUSTER,     "sasl.enabled.mechanisms", "PLAIN",
                         "sasl.jaas.config", "username=a password=b",   NULL};
    refused(off, "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512 is not in");
    const char *badkey[] = {"listener.name.x.gssapi.sasl.jaas.config", "y", NULL};
    refused_set(badkey, "unknown setting");
}

/* The controller listener's protocol: the quorum's transport (cluster/tls_transport.h). */
#define JAAS "sasl.jaas.config", "x required username=b password=p;"
static void test_controller_protocol(void **state)
{
    (void)state;
    st_config_t c;
    char err[512];
    const char *dflt[] = {SECURE_CLUSTER, JAAS, NULL}; /* Kafka's map plus CONTROLLER:PLAINTEXT */
    assert_int_equal(configure(&c, err, sizeof err, dflt), 0);
    assert_int_equal(c.controller_protocol, ST_SEC_PLAINTEXT);
    st_config_fini(&c);
    const char *unmapped[] = {SECURE_CLUSTER, JAAS, "listener.security.protocol.map",
                              "SASL_SSL:SASL_SSL", NULL};
    assert_int_equal(configure(&c, err, sizeof err, unmapped), 0);
    assert_int_equal(c.controller_protocol, ST_SEC_PLAINTEXT);
    st_config_fini(&c);
    const char *ssl[] = {SECURE_CLUSTER, JAAS, "listener.security.protocol.map",
                         "SASL_SSL:SASL_SSL,CONTROLLER:SSL", NULL};
    assert_int_equal(configure(&c, err, sizeof err, ssl), 0);
    assert_int_equal(c.controller_protocol, ST_SEC_SSL);
    st_config_fini(&c);
    const char *sasl_ssl[] = {SECURE_CLUSTER, JAAS, "listener.security.protocol.map",
                              "SASL_SSL:SASL_SSL,controller:SASL_SSL", NULL};
    assert_int_equal(configure(&c, err, sizeof err, sasl_ssl), 0);
    assert_int_equal(c.controller_protocol, ST_SEC_SASL_SSL);
    assert_true(st_sec_protocol_tls(c.controller_protocol));
    st_config_fini(&c);
    const char *sasl_plain[] = {SECURE_CLUSTER, JAAS, "listener.security.protocol.map",
                                "SASL_SSL:SASL_SSL,CONTROLLER:SASL_PLAINTEXT", NULL};
    assert_int_not_equal(configure(&c, err, sizeof err, sasl_plain), 0);
    assert_non_null(strstr(err, "the controller listener CONTROLLER cannot be SASL_PLAINTEXT"));
    st_config_fini(&c);
}

/* OAUTHBEARER's validator settings and connections.max.reauth.ms per listener and mechanism. */
static void test_oauthbearer_and_reauth(void **state)
{
    (void)state;
    char path[] = "/tmp/strata-test-jwks-XXXXXX", url[64], err[512];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    /* RFC 7517 A.1's EC key */
    const char *doc = "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\","
                      "\"x\":\"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4\","
                      "\"y\":\"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM\"}]}";
    assert_int_equal(write(fd, doc, strlen(doc)), (ssize_t)strlen(doc));
    close(fd);
    snprintf(url, sizeof url, "file:%s", path);
    const char *kv[] = {"listeners",
                        "SASL_PLAINTEXT://127.0.0.1:1,REAUTH://127.0.0.1:2",
                        "listener.security.protocol.map",
                        "SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT",
                        "sasl.enabled.mechanisms",
                        "SCRAM-SHA-512,OAUTHBEARER",
                        "sasl.oauthbearer.jwks.endpoint.url",
                        url,
                        "connections.max.reauth.ms",
                        "60000",
                        "listener.name.reauth.scram-sha-512.connections.max.reauth.ms",
                        "2000",
                        "listener.name.REAUTH.OAUTHBEARER.connections.max.reauth.ms",
                        "0",
                        NULL};
    st_config_t c;
    assert_int_equal(configure(&c, err, sizeof err, kv), 0);
    assert_int_equal(c.sasl_mechanisms, ST_SASL_SCRAM_SHA_512 | ST_SASL_OAUTHBEARER);
    assert_int_equal(st_config_reauth_ms(&c, "REAUTH", "SCRAM-SHA-512"), 2000);
    assert_int_equal(st_config_reauth_ms(&c, "REAUTH", "OAUTHBEARER"), 0);
    assert_int_equal(st_config_reauth_ms(&c, "REAUTH", "PLAIN"), 60000);
    assert_int_equal(st_config_reauth_ms(&c, "SASL_PLAINTEXT", "SCRAM-SHA-512"), 60000);
    st_config_fini(&c);
    /* OAUTHBEARER needs a validator; a key set must be a file: URL that loads */
    const char *none[] = {"sasl.enabled.mechanisms", "OAUTHBEARER", NULL};
    refused(none, "sasl.oauthbearer.unsecured.validator.enable=true");
    const char *unsec[] = {"sasl.enabled.mechanisms", "OAUTHBEARER",
                           "sasl.oauthbearer.unsecured.validator.enable", "true", NULL};
    assert_int_equal(configure(&c, err, sizeof err, unsec), 0);
    st_config_fini(&c);
    const char *both[] = {"sasl.oauthbearer.jwks.endpoint.url", url,
                          "sasl.oauthbearer.unsecured.validator.enable", "true", NULL};
    refused(both, "choose one");
    const char *https[] = {"sasl.oauthbearer.jwks.endpoint.url", "https://idp/jwks", NULL};
    refused(https, "only file: URLs");
    const char *missing[] = {"sasl.oauthbearer.jwks.endpoint.url", "file:/nonexistent/j", NULL};
    refused(missing, "cannot open /nonexistent/j");
    unlink(path);
    const char *bad[] = {"listener.name.reauth.plain.connections.max.reauth.ms", "soon", NULL};
    refused_set(bad, "expected an integer");
    const char *neg[] = {"listener.name.reauth.plain.connections.max.reauth.ms", "-1", NULL};
    refused_set(neg, "expected an integer");
    /* brokers do not authenticate to each other with OAUTHBEARER */
    const char *ib[] = {SECURE_CLUSTER, "sasl.mechanism.inter.broker.protocol",
                        "OAUTHBEARER",  "sasl.enabled.mechanisms",
                        "OAUTHBEARER",  "sasl.oauthbearer.unsecured.validator.enable",
                        "true",         NULL};
    refused(ib, "sasl.mechanism.inter.broker.protocol: 'OAUTHBEARER' is not one of");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_is_one_plaintext_listener),
        cmocka_unit_test(test_several_listeners),
        cmocka_unit_test(test_ssl_listener_settings),
        cmocka_unit_test(test_sasl_ssl_client_auth),
        cmocka_unit_test(test_sasl_plaintext_listener),
        cmocka_unit_test(test_sasl_ssl_listener),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_inter_broker_sasl_ssl),
        cmocka_unit_test(test_oauthbearer_and_reauth),
        cmocka_unit_test(test_controller_protocol),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
