/* test_hb_sec.c — signed heartbeats: every check of hb_sec.h refuses what it exists to refuse,
 * and a heartbeat signed by a certificate of the cluster is taken. Certificates are made here
 * (EC P-256, signed by a CA made here; another CA for the foreign ones). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "cluster/hb_sec.h"
#include "cluster/heartbeat.h"

#define NOW_MS 1800000000000LL

static long serial = 1;

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v;
    X509V3_set_ctx_nodb(&v);
    X509V3_set_ctx(&v, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v, nid, value);
    assert_non_null(e);
    assert_int_equal(X509_add_ext(x, e, -1), 1);
    X509_EXTENSION_free(e);
}

/* A certificate for key: self-signed (a CA) when issuer is NULL, else issued by issuer with
 * issuer_key, naming san (an IP) and valid from now+from_s to now+to_s. */
static X509 *cert(EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, const char *cn,
                  const char *san, long from_s, long to_s)
{
    X509 *x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), from_s);
    X509_gmtime_adj(X509_getm_notAfter(x), to_s);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
    add_ext(x, issuer ? issuer : x, NID_basic_constraints,
            issuer ? "CA:FALSE" : "critical,CA:TRUE");
    if (san)
        add_ext(x, issuer ? issuer : x, NID_subject_alt_name, san);
    assert_true(X509_sign(x, issuer ? issuer_key : key, EVP_sha256()) > 0);
    return x;
}

typedef struct pki {
    EVP_PKEY *ca_key, *other_ca_key;
    X509 *ca, *other_ca;
} pki_t;

static pki_t pki;

static int setup(void **state)
{
    (void)state;
    pki.ca_key = EVP_EC_gen("P-256");
    pki.other_ca_key = EVP_EC_gen("P-256");
    pki.ca = cert(pki.ca_key, NULL, NULL, "cluster CA", NULL, -3600, 86400);
    pki.other_ca = cert(pki.other_ca_key, NULL, NULL, "another CA", NULL, -3600, 86400);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    X509_free(pki.ca);
    X509_free(pki.other_ca);
    EVP_PKEY_free(pki.ca_key);
    EVP_PKEY_free(pki.other_ca_key);
    return 0;
}

/* A node's context: a key and a certificate for san from ca (or the other CA), trusting the
 * cluster's CA. */
static SSL_CTX *node_ctx(bool foreign, const char *san, long from_s, long to_s)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = cert(k, foreign ? pki.other_ca : pki.ca, foreign ? pki.other_ca_key : pki.ca_key,
                   "node", san, from_s, to_s);
    assert_int_equal(SSL_CTX_use_certificate(ctx, x), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(ctx, k), 1);
    assert_int_equal(X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), pki.ca), 1);
    X509_free(x);
    EVP_PKEY_free(k);
    return ctx;
}

static st_hb_sec_t *sec(SSL_CTX *ctx, bool verify_host, const st_config_t *cfg)
{
    char err[200];
    st_hb_sec_t *s = st_hb_sec_new(ctx, verify_host, cfg, err, sizeof err);
    assert_non_null(s);
    SSL_CTX_free(ctx); /* s holds its own reference */
    return s;
}

/* The JSON heartbeat of node id, incarnation inc, quorum address raft. */
static char *heartbeat(int32_t id, uint64_t inc, const char *raft, size_t *len)
{
    st_hb_t hb = {.id = id, .incarnation = inc, .port = 9092, .applied = 42};
    snprintf(hb.host, sizeof hb.host, "127.0.0.1");
    snprintf(hb.raft, sizeof hb.raft, "%s", raft);
    char *text = NULL;
    assert_int_equal(st_hb_encode(&hb, &text, len), 0);
    return text;
}

static char *sealed(st_hb_sec_t *s, int32_t id, uint64_t inc, const char *raft, int64_t at,
                    size_t *len)
{
    size_t jl;
    char *json = heartbeat(id, inc, raft, &jl);
    char *env = NULL;
    assert_int_equal(st_hb_sec_seal(s, json, jl, at, &env, len), 0);
    free(json);
    return env;
}

static st_hb_refusal_t open_at(st_hb_sec_t *s, const void *buf, size_t len, int64_t at)
{
    st_hb_t hb;
    st_hb_refusal_t r = st_hb_sec_open(s, buf, len, at, &hb);
    if (r == ST_HB_TAKEN)
        st_hb_fini(&hb);
    return r;
}

static const st_config_t no_voters;

static void test_taken_and_counted(void **state)
{
    (void)state;
    st_hb_sec_t *a = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    st_hb_sec_t *c = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    uint64_t signed0 = st_hb_sec_signed();
    size_t len;
    char *env = sealed(a, 4, 7, "127.0.0.1:9093", NOW_MS, &len);
    assert_int_equal(st_hb_sec_signed(), signed0 + 1);
    st_hb_t hb;
    assert_int_equal(st_hb_sec_open(c, env, len, NOW_MS + 1000, &hb), ST_HB_TAKEN);
    assert_int_equal(hb.id, 4);
    assert_int_equal(hb.incarnation, 7);
    assert_int_equal(hb.applied, 42);
    assert_string_equal(hb.raft, "127.0.0.1:9093");
    st_hb_fini(&hb);
    /* the same datagram again is a replay, and counted as one */
    uint64_t replays = st_hb_sec_refused(ST_HB_REPLAY);
    assert_int_equal(open_at(c, env, len, NOW_MS + 1000), ST_HB_REPLAY);
    assert_int_equal(st_hb_sec_refused(ST_HB_REPLAY), replays + 1);
    free(env);
    st_hb_sec_free(a);
    st_hb_sec_free(c);
}

static void test_bare_json_is_unsigned(void **state)
{
    (void)state;
    st_hb_sec_t *c = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    size_t len;
    char *json = heartbeat(9, 1, "127.0.0.1:9999", &len);
    assert_int_equal(open_at(c, json, len, NOW_MS), ST_HB_UNSIGNED);
    free(json);
    st_hb_sec_free(c);
}

static void test_every_byte_is_signed(void **state)
{
    (void)state;
    st_hb_sec_t *a = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    size_t len;
    char *env = sealed(a, 4, 7, "127.0.0.1:9093", NOW_MS, &len);
    /* flipping one bit anywhere is refused, never taken, never a crash; from the magic's end
     * to the last byte (a flipped magic is merely unsigned) */
    for (size_t i = 4; i < len; i++) {
        st_hb_sec_t *c = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
        env[i] ^= 0x10;
        assert_int_not_equal(open_at(c, env, len, NOW_MS), ST_HB_TAKEN);
        env[i] ^= 0x10;
        st_hb_sec_free(c);
        i += i < 28 ? 0 : 37; /* every header byte, a sample of the rest */
    }
    /* a changed heartbeat byte in particular fails the signature */
    st_hb_sec_t *c = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    char *at = memmem(env, len, "\"applied\":42", 12);
    assert_non_null(at);
    at[11] = '3';
    assert_int_equal(open_at(c, env, len, NOW_MS), ST_HB_SIGNATURE);
    at[11] = '2';
    assert_int_equal(open_at(c, env, len, NOW_MS), ST_HB_TAKEN);
    /* every truncation is malformed */
    for (size_t n = 4; n < len; n++)
        assert_int_equal(open_at(c, env, n, NOW_MS), ST_HB_MALFORMED);
    free(env);
    st_hb_sec_free(c);
    st_hb_sec_free(a);
}

static void test_foreign_and_expired_certificates(void **state)
{
    (void)state;
    st_hb_sec_t *c = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    struct {
        bool foreign;
        long from, to;
    } cases[] = {{true, -60, 3600}, {false, -7200, -3600}, {false, 3600, 7200}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_hb_sec_t *a = sec(node_ctx(cases[i].foreign, "IP:127.0.0.1", cases[i].from, cases[i].to),
                             true, &no_voters);
        size_t len;
        char *env = sealed(a, 5, 1, "127.0.0.1:9095", NOW_MS, &len);
        assert_int_equal(open_at(c, env, len, NOW_MS), ST_HB_CERTIFICATE);
        free(env);
        st_hb_sec_free(a);
    }
    st_hb_sec_free(c);
}

static void test_send_time_window(void **state)
{
    (void)state;
    st_hb_sec_t *a = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    st_hb_sec_t *c = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    size_t len;
    char *env = sealed(a, 4, 7, "127.0.0.1:9093", NOW_MS, &len);
    assert_int_equal(open_at(c, env, len, NOW_MS + ST_HB_SEC_SKEW_MS + 1), ST_HB_STALE);
    assert_int_equal(open_at(c, env, len, NOW_MS - ST_HB_SEC_SKEW_MS - 1), ST_HB_STALE);
    assert_int_equal(open_at(c, env, len, NOW_MS + ST_HB_SEC_SKEW_MS), ST_HB_TAKEN);
    free(env);
    st_hb_sec_free(a);
    st_hb_sec_free(c);
}

static void test_host_checks(void **state)
{
    (void)state;
    st_config_t cfg = {.nvoters = 1};
    cfg.voters[0].id = 1;
    snprintf(cfg.voters[0].host, sizeof cfg.voters[0].host, "127.0.0.1");
    cfg.voters[0].port = 9093;
    st_hb_sec_t *a = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &cfg);
    st_hb_sec_t *c = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &cfg);
    st_hb_sec_t *lax = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), false, &cfg);
    size_t len;
    /* a broker-only id from a host its certificate names */
    char *env = sealed(a, 4, 1, "127.0.0.1:9200", NOW_MS, &len);
    assert_int_equal(open_at(c, env, len, NOW_MS), ST_HB_TAKEN);
    free(env);
    /* a host the certificate does not name: refused, unless host checks are off */
    env = sealed(a, 5, 1, "127.0.0.2:9200", NOW_MS, &len);
    assert_int_equal(open_at(c, env, len, NOW_MS), ST_HB_HOST);
    assert_int_equal(open_at(lax, env, len, NOW_MS), ST_HB_TAKEN);
    free(env);
    /* voter 1 speaking from an address that is not its configured one */
    env = sealed(a, 1, 1, "127.0.0.1:9300", NOW_MS, &len);
    assert_int_equal(open_at(c, env, len, NOW_MS), ST_HB_HOST);
    free(env);
    env = sealed(a, 1, 1, "127.0.0.1:9093", NOW_MS, &len);
    assert_int_equal(open_at(c, env, len, NOW_MS), ST_HB_TAKEN);
    free(env);
    st_hb_sec_free(a);
    st_hb_sec_free(c);
    st_hb_sec_free(lax);
}

static void test_counters_and_incarnations(void **state)
{
    (void)state;
    st_hb_sec_t *a = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    st_hb_sec_t *c = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    size_t l1, l2, l3, l4;
    char *first = sealed(a, 4, 7, "127.0.0.1:9093", NOW_MS, &l1);
    char *second = sealed(a, 4, 7, "127.0.0.1:9093", NOW_MS, &l2);
    /* taken out of order: the later first, then the earlier is a replay */
    assert_int_equal(open_at(c, second, l2, NOW_MS), ST_HB_TAKEN);
    assert_int_equal(open_at(c, first, l1, NOW_MS), ST_HB_REPLAY);
    /* the node restarts (a new incarnation, its counter from 1 again): taken */
    st_hb_sec_t *a2 = sec(node_ctx(false, "IP:127.0.0.1", -60, 3600), true, &no_voters);
    char *reborn = sealed(a2, 4, 8, "127.0.0.1:9093", NOW_MS, &l3);
    assert_int_equal(open_at(c, reborn, l3, NOW_MS), ST_HB_TAKEN);
    /* a heartbeat of the incarnation it left, even one never seen, is a replay */
    char *old = sealed(a, 4, 7, "127.0.0.1:9093", NOW_MS, &l4);
    assert_int_equal(open_at(c, old, l4, NOW_MS), ST_HB_REPLAY);
    /* other ids keep their own counters */
    free(old);
    old = sealed(a, 6, 7, "127.0.0.1:9096", NOW_MS, &l4);
    assert_int_equal(open_at(c, old, l4, NOW_MS), ST_HB_TAKEN);
    free(first);
    free(second);
    free(reborn);
    free(old);
    st_hb_sec_free(a);
    st_hb_sec_free(a2);
    st_hb_sec_free(c);
}

static void test_new_needs_a_key(void **state)
{
    (void)state;
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    char err[200] = "";
    assert_null(st_hb_sec_new(ctx, true, &no_voters, err, sizeof err));
    assert_non_null(strstr(err, "certificate"));
    SSL_CTX_free(ctx);
    assert_string_equal(st_hb_refusal_name(ST_HB_REPLAY), "replay");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_taken_and_counted),
        cmocka_unit_test(test_bare_json_is_unsigned),
        cmocka_unit_test(test_every_byte_is_signed),
        cmocka_unit_test(test_foreign_and_expired_certificates),
        cmocka_unit_test(test_send_time_window),
        cmocka_unit_test(test_host_checks),
        cmocka_unit_test(test_counters_and_incarnations),
        cmocka_unit_test(test_new_needs_a_key),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
