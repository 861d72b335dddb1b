/*
 * Unit tests for auth/oauth.h: base64url, RFC 7628's client message, the JWKS parser and JWT
 * validation — tokens signed here with an RSA 2048 and an EC P-256 key made for the test
 * (OpenSSL), checked for each of oauth.h's rules and for the hostile inputs (huge tokens,
 * broken base64, not-JSON, absurd numbers, keys too small or off their curve).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/oauth.h"
#include "auth/scram.h"

static const int64_t NOW = 1700000000000; /* ms */

/* ---- helpers: base64url, keys, tokens ---- */

static char *b64url(const uint8_t *in, size_t n)
{
    char *s = malloc(4 * ((n + 2) / 3) + 1);
    st_b64_encode(in, n, s);
    size_t o = 0;
    for (size_t i = 0; s[i]; i++) {
        if (s[i] == '=')
            break;
        s[o++] = s[i] == '+' ? '-' : s[i] == '/' ? '_' : s[i];
    }
    s[o] = 0;
    return s;
}

static char *b64url_str(const char *s)
{
    return b64url((const uint8_t *)s, strlen(s));
}

static char *bn_b64(EVP_PKEY *k, const char *param, int pad)
{
    BIGNUM *bn = NULL;
    assert_int_equal(EVP_PKEY_get_bn_param(k, param, &bn), 1);
    uint8_t buf[512];
    int n = pad ? BN_bn2binpad(bn, buf, pad) : BN_bn2bin(bn, buf);
    BN_free(bn);
    return b64url(buf, (size_t)n);
}

static EVP_PKEY *rsa_key, *ec_key, *rsa_other;

static int setup(void **state)
{
    (void)state;
    rsa_key = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    rsa_other = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    ec_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    return rsa_key && ec_key && rsa_other ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    EVP_PKEY_free(rsa_key);
    EVP_PKEY_free(rsa_other);
    EVP_PKEY_free(ec_key);
    return 0;
}

/* A JWKS with rsa_key as "r1" and ec_key as "e1". */
static char *jwks_json(void)
{
    char *n = bn_b64(rsa_key, OSSL_PKEY_PARAM_RSA_N, 0), *e = bn_b64(rsa_key, "e", 0);
    char *x = bn_b64(ec_key, OSSL_PKEY_PARAM_EC_PUB_X, 32);
    char *y = bn_b64(ec_key, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
    char *out = malloc(4096);
    snprintf(
        out, 4096,
        "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"r1\",\"use\":\"sig\",\"n\":\"%s\",\"e\":\"%s\"},"
        "{\"kty\":\"EC\",\"kid\":\"e1\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"},"
        "{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}]}",
        n, e, x, y);
    free(n);
    free(e);
    free(x);
    free(y);
    return out;
}

static st_jwks_t *jwks(void)
{
    char *j = jwks_json(), err[200];
    st_jwks_t *k = NULL;
    assert_int_equal(st_jwks_parse(j, strlen(j), &k, err, sizeof err), 0);
    free(j);
    assert_int_equal(st_jwks_count(k), 2);
    return k;
}

/* header.claims.signature, signed with key (NULL: unsecured, empty signature). */
static char *sign(EVP_PKEY *key, const char *header, const char *claims)
{
    char *h = b64url_str(header), *c = b64url_str(claims);
    size_t inl = strlen(h) + 1 + strlen(c);
    char *in = malloc(inl + 1);
    snprintf(in, inl + 1, "%s.%s", h, c);
    free(h);
    free(c);
    char *sig = strdup("");
    if (key) {
        uint8_t der[1024], raw[64];
        size_t dl = sizeof der;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        assert_int_equal(EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key), 1);
        assert_int_equal(EVP_DigestSign(ctx, der, &dl, (uint8_t *)in, inl), 1);
        EVP_MD_CTX_free(ctx);
        free(sig);
        if (EVP_PKEY_is_a(key, "EC")) {
            const uint8_t *p = der;
            ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)dl);
            BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32);
            BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32);
            ECDSA_SIG_free(es);
            sig = b64url(raw, 64);
        } else {
            sig = b64url(der, dl);
        }
    }
    char *out = malloc(inl + strlen(sig) + 2);
    sprintf(out, "%s.%s", in, sig);
    free(in);
    free(sig);
    return out;
}

static char claims_buf[70000];

/* Claims with iat = now, exp = now + 1 h, and extra members appended. */
static const char *claims(const char *extra)
{
    snprintf(claims_buf, sizeof claims_buf,
             "{\"sub\":\"alice\",\"iss\":\"https://idp\",\"aud\":\"strata\",\"iat\":%lld,"
             "\"exp\":%lld%s%s}",
             (long long)(NOW / 1000), (long long)(NOW / 1000 + 3600), extra ? "," : "",
             extra ? extra : "");
    return claims_buf;
}

static const char *RS = "{\"alg\":\"RS256\",\"kid\":\"r1\"}";
static const char *ES = "{\"alg\":\"ES256\",\"kid\":\"e1\"}";

static int check(const st_jwks_t *k, const char *tok, st_jwt_result_t *res)
{
    st_jwt_rules_t r = {.jwks = k,
                        .audience = "other, strata",
                        .issuer = "https://idp",
                        .sub_claim = NULL,
                        .scope_claim = NULL,
                        .skew_ms = 30000};
    return st_jwt_validate(&r, tok, strlen(tok), NOW, res);
}

/* Whether the token signed by key with header and claims passes. */
static int signed_ok(const st_jwks_t *k, EVP_PKEY *key, const char *hdr, const char *cl)
{
    char *t = sign(key, hdr, cl);
    st_jwt_result_t res;
    int rc = check(k, t, &res);
    free(t);
    return rc;
}

/* ---- tests ---- */

static void test_b64url(void **state)
{
    (void)state;
    uint8_t out[16];
    assert_int_equal(st_b64url_decode("", 0, out, sizeof out), 0);
    assert_int_equal(st_b64url_decode("Zg", 2, out, sizeof out), 1);
    assert_memory_equal(out, "f", 1);
    assert_int_equal(st_b64url_decode("Zm9vYg", 6, out, sizeof out), 4);
    assert_memory_equal(out, "foob", 4);
    assert_int_equal(st_b64url_decode("Zm9vYg==", 8, out, sizeof out), 4); /* padding is fine */
    assert_int_equal(st_b64url_decode("-_8", 3, out, sizeof out), 2);
    assert_int_equal(out[0], 0xfb);
    assert_int_equal(out[1], 0xff);
    assert_int_equal(st_b64url_decode("Zm9v+A", 6, out, sizeof out), -1); /* standard alphabet */
    assert_int_equal(st_b64url_decode("Z", 1, out, sizeof out), -1);      /* 1 mod 4 */
    assert_int_equal(st_b64url_decode("Zh", 2, out, sizeof out), -1);     /* stray bits */
    assert_int_equal(st_b64url_decode("Zm9vYg", 6, out, 3), -1);          /* over cap */
}

static void test_client_message(void **state)
{
    (void)state;
    const char *t, *a;
    size_t tl, al;
    const char *m = "n,,\x01"
                    "auth=Bearer abc.def.ghi\x01\x01";
    assert_int_equal(st_oauthbearer_parse((const uint8_t *)m, strlen(m), &t, &tl, &a, &al), 0);
    assert_int_equal(tl, 11);
    assert_memory_equal(t, "abc.def.ghi", 11);
    assert_int_equal(al, 0);
    m = "n,a=alice,\x01host=h\x01"
        "auth=bearer  x-_.9\x01port=1\x01\x01";
    assert_int_equal(st_oauthbearer_parse((const uint8_t *)m, strlen(m), &t, &tl, &a, &al), 0);
    assert_int_equal(tl, 5);
    assert_int_equal(al, 5);
    assert_memory_equal(a, "alice", 5);
    static const char *const bad[] = {
        "",
        "n,,",
        "y,,\x01"
        "auth=Bearer x\x01\x01",
        "n,\x01"
        "auth=Bearer x\x01\x01",
        "n,a=,\x01"
        "auth=Bearer x\x01\x01",
        "n,,\x01"
        "auth=Bearer x\x01",
        "n,,\x01"
        "auth=Bearer x\x01\x01x",
        "n,,\x01"
        "auth=Bearer\x01\x01",
        "n,,\x01"
        "auth=Bearer \x01\x01",
        "n,,\x01"
        "auth=Basic x\x01\x01",
        "n,,\x01"
        "auth=Bearer x!\x01\x01",
        "n,,\x01"
        "auth=Bearer x\x01"
        "auth=Bearer y\x01\x01",
        "n,,\x01"
        "noequals\x01\x01",
        "n,,\x01"
        "=v\x01\x01",
        "n,,\x01"
        "k1=v\x01\x01",
        "n,,\x01\x01",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(
            st_oauthbearer_parse((const uint8_t *)bad[i], strlen(bad[i]), &t, &tl, &a, &al), -1);
}

static void test_jwks(void **state)
{
    (void)state;
    st_jwks_t *k = jwks();
    st_jwks_free(k);
    char err[200];
    static const char *const bad[] = {
        "",
        "{",
        "[]",
        "{\"keys\":{}}",
        "{\"keys\":[]}",
        "{\"keys\":[1,\"x\",null]}",
        "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"}]}", /* 17 bits */
        "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"!!\",\"e\":\"AQAB\"}]}",
        "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":"
        "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\","
        "\"y\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}]}", /* not on the curve */
        "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-521\",\"x\":\"AA\",\"y\":\"AA\"}]}",
        "{\"keys\":[{\"kty\":\"oct\",\"k\":\"AA\"}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        k = NULL;
        assert_int_equal(st_jwks_parse(bad[i], strlen(bad[i]), &k, err, sizeof err), -1);
        assert_null(k);
        assert_true(strlen(err) > 0);
    }
    /* a key whose use is enc is skipped; 1024-bit RSA refused */
    EVP_PKEY *small = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
    char *n = bn_b64(small, OSSL_PKEY_PARAM_RSA_N, 0), doc[1024];
    snprintf(doc, sizeof doc, "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AQAB\"}]}", n);
    assert_int_equal(st_jwks_parse(doc, strlen(doc), &k, err, sizeof err), -1);
    assert_non_null(strstr(err, "2048"));
    free(n);
    EVP_PKEY_free(small);
    char *j = jwks_json();
    char *enc = strstr(j, "\"use\":\"sig\"");
    memcpy(enc, "\"use\":\"enc\"", 11);
    assert_int_equal(st_jwks_parse(j, strlen(j), &k, err, sizeof err), 0);
    assert_int_equal(st_jwks_count(k), 1);
    st_jwks_free(k);
    free(j);
    /* file: URLs */
    char path[64];
    assert_int_equal(st_oauth_file_url_path("file:/etc/jwks.json", path, sizeof path), 0);
    assert_string_equal(path, "/etc/jwks.json");
    assert_int_equal(st_oauth_file_url_path("file:///etc/j", path, sizeof path), 0);
    assert_string_equal(path, "/etc/j");
    assert_int_equal(st_oauth_file_url_path("file://localhost/etc/j", path, sizeof path), 0);
    assert_string_equal(path, "/etc/j");
    assert_int_equal(st_oauth_file_url_path("file://other/etc/j", path, sizeof path), -1);
    assert_int_equal(st_oauth_file_url_path("https://idp/jwks", path, sizeof path), -1);
    assert_int_equal(st_oauth_file_url_path("file:rel", path, sizeof path), -1);
    assert_int_equal(st_jwks_load("/nonexistent/jwks", &k, err, sizeof err), -1);
}

static void test_signed(void **state)
{
    (void)state;
    st_jwks_t *k = jwks();
    st_jwt_result_t res;
    char *t = sign(rsa_key, RS, claims("\"scope\":[\"a\",\"b\"]"));
    assert_int_equal(check(k, t, &res), 0);
    assert_string_equal(res.principal, "alice");
    assert_int_equal(res.exp_ms, NOW + 3600000);
    assert_string_equal(res.scope, "a b");
    /* one byte of the signature changed */
    t[strlen(t) - 2] = t[strlen(t) - 2] == 'A' ? 'B' : 'A';
    assert_int_equal(check(k, t, &res), -1);
    assert_non_null(strstr(res.why, "signature"));
    assert_string_equal(res.principal, "");
    free(t);
    assert_int_equal(signed_ok(k, ec_key, ES, claims(NULL)), 0);
    /* no kid: every key fit for the alg is tried */
    assert_int_equal(signed_ok(k, ec_key, "{\"alg\":\"ES256\"}", claims(NULL)), 0);
    assert_int_equal(signed_ok(k, rsa_key, "{\"alg\":\"RS256\"}", claims(NULL)), 0);
    /* wrong key, unknown kid, alg/key mismatch, none, HS256 */
    assert_int_equal(signed_ok(k, rsa_other, RS, claims(NULL)), -1);
    assert_int_equal(signed_ok(k, rsa_key, "{\"alg\":\"RS256\",\"kid\":\"zz\"}", claims(NULL)), -1);
    assert_int_equal(signed_ok(k, ec_key, "{\"alg\":\"ES256\",\"kid\":\"r1\"}", claims(NULL)), -1);
    assert_int_equal(signed_ok(k, rsa_key, "{\"alg\":\"RS256\",\"kid\":7}", claims(NULL)), -1);
    assert_int_equal(signed_ok(k, NULL, "{\"alg\":\"none\"}", claims(NULL)), -1);
    assert_int_equal(signed_ok(k, rsa_key, "{\"alg\":\"HS256\",\"kid\":\"r1\"}", claims(NULL)), -1);
    assert_int_equal(signed_ok(k, rsa_key, "{\"kid\":\"r1\"}", claims(NULL)), -1);
    /* an EC signature of the wrong length */
    t = sign(ec_key, ES, claims(NULL));
    t[strlen(t) - 3] = 0;
    assert_int_equal(check(k, t, &res), -1);
    free(t);
    st_jwks_free(k);
}

static void test_claims(void **state)
{
    (void)state;
    st_jwks_t *k = jwks();
    char c[512];
    long long now = NOW / 1000;
    /* audience: one of the list, as a string or in an array */
    snprintf(c, sizeof c,
             "{\"sub\":\"a\",\"iss\":\"https://idp\",\"aud\":[\"x\",\"other\"],"
             "\"iat\":%lld,\"exp\":%lld}",
             now, now + 60);
    assert_int_equal(signed_ok(k, rsa_key, RS, c), 0);
    snprintf(c, sizeof c,
             "{\"sub\":\"a\",\"iss\":\"https://idp\",\"aud\":[\"x\"],"
             "\"iat\":%lld,\"exp\":%lld}",
             now, now + 60);
    assert_int_equal(signed_ok(k, rsa_key, RS, c), -1);
    snprintf(c, sizeof c,
             "{\"sub\":\"a\",\"iss\":\"https://idp\",\"aud\":\"strat\","
             "\"iat\":%lld,\"exp\":%lld}",
             now, now + 60);
    assert_int_equal(signed_ok(k, rsa_key, RS, c), -1);
    snprintf(c, sizeof c, "{\"sub\":\"a\",\"iss\":\"https://idp\",\"iat\":%lld,\"exp\":%lld}", now,
             now + 60);
    assert_int_equal(signed_ok(k, rsa_key, RS, c), -1); /* no aud */
    snprintf(c, sizeof c,
             "{\"sub\":\"a\",\"iss\":\"https://idp2\",\"aud\":\"strata\","
             "\"iat\":%lld,\"exp\":%lld}",
             now, now + 60);
    assert_int_equal(signed_ok(k, rsa_key, RS, c), -1); /* issuer */
    /* exp: within the 30 s skew passes, past it fails; fractional seconds are fine */
    snprintf(c, sizeof c,
             "{\"sub\":\"a\",\"iss\":\"https://idp\",\"aud\":\"strata\","
             "\"iat\":%lld,\"exp\":%lld.5}",
             now - 100, now - 29);
    assert_int_equal(signed_ok(k, rsa_key, RS, c), 0);
    snprintf(c, sizeof c,
             "{\"sub\":\"a\",\"iss\":\"https://idp\",\"aud\":\"strata\","
             "\"iat\":%lld,\"exp\":%lld}",
             now - 100, now - 31);
    assert_int_equal(signed_ok(k, rsa_key, RS, c), -1);
    static const char *const bad[] = {
        "\"nbf\":9999999999", "\"nbf\":\"x\"",  "\"exp\":\"soon\"",
        "\"exp\":1e300",      "\"exp\":-1e300", "\"iat\":1e20",
        "\"sub\":\"\"",       "\"sub\":5",      "\"iat\":9999999999",
    };
    /* claims() puts these after its own members: JSON_REJECT_DUPLICATES refuses a repeated
     * exp, iat or sub outright, which is a refusal too */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(signed_ok(k, rsa_key, RS, claims(bad[i])), -1);
    snprintf(c, sizeof c,
             "{\"sub\":\"a\",\"iss\":\"https://idp\",\"aud\":\"strata\","
             "\"exp\":%lld}",
             now + 60);
    assert_int_equal(signed_ok(k, rsa_key, RS, c), -1); /* no iat when signed */
    snprintf(c, sizeof c,
             "{\"iss\":\"https://idp\",\"aud\":\"strata\",\"iat\":%lld,"
             "\"exp\":%lld,\"nbf\":%lld}",
             now, now + 60, now + 20);
    assert_int_equal(signed_ok(k, rsa_key, RS, c), -1); /* no sub */
    /* another principal claim */
    st_jwt_rules_t r = {.jwks = k, .sub_claim = "email", .skew_ms = 0};
    snprintf(c, sizeof c, "{\"email\":\"bob@x\",\"iat\":%lld,\"exp\":%lld,\"nbf\":%lld}", now,
             now + 60, now);
    char *t = sign(rsa_key, RS, c);
    st_jwt_result_t res;
    assert_int_equal(st_jwt_validate(&r, t, strlen(t), NOW, &res), 0);
    assert_string_equal(res.principal, "bob@x");
    free(t);
    /* a sub with a NUL in it */
    snprintf(c, sizeof c, "{\"sub\":\"a\\u0000b\",\"iat\":%lld,\"exp\":%lld}", now, now + 60);
    t = sign(rsa_key, RS, c);
    r.sub_claim = NULL;
    assert_int_equal(st_jwt_validate(&r, t, strlen(t), NOW, &res), -1);
    free(t);
    st_jwks_free(k);
}

static void test_unsecured(void **state)
{
    (void)state;
    st_jwt_rules_t r = {.skew_ms = 1000};
    st_jwt_result_t res;
    char c[256];
    long long now = NOW / 1000;
    snprintf(c, sizeof c, "{\"sub\":\"alice\",\"exp\":%lld.123}", now + 10);
    char *t = sign(NULL, "{\"alg\":\"none\"}", c);
    assert_int_equal(st_jwt_validate(&r, t, strlen(t), NOW, &res), 0); /* iat optional */
    assert_string_equal(res.principal, "alice");
    assert_int_equal(res.exp_ms, NOW + 10123);
    free(t);
    /* aud and iss are not the unsecured validator's business (Kafka's) */
    r.audience = "strata";
    r.issuer = "x";
    t = sign(NULL, "{\"alg\":\"none\"}", c);
    assert_int_equal(st_jwt_validate(&r, t, strlen(t), NOW, &res), 0);
    free(t);
    /* a signed token, or alg none with a signature, is not unsecured */
    t = sign(rsa_key, RS, c);
    assert_int_equal(st_jwt_validate(&r, t, strlen(t), NOW, &res), -1);
    free(t);
    t = sign(NULL, "{\"alg\":\"none\"}", c);
    char *t2 = malloc(strlen(t) + 3);
    sprintf(t2, "%sAA", t);
    assert_int_equal(st_jwt_validate(&r, t2, strlen(t2), NOW, &res), -1);
    free(t2);
    free(t);
}

static void test_hostile(void **state)
{
    (void)state;
    st_jwks_t *k = jwks();
    st_jwt_result_t res;
    static const char *const bad[] = {
        "",      ".",        "..",       "...",      "a.b",      "a.b.c.d",
        "!.!.!", "e30.e30.", "W10.e30.", "e30.W10.", "eyJ.e30.", "e30.e30.A",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(check(k, bad[i], &res), -1);
        assert_true(strlen(res.why) > 0);
        st_jwt_rules_t u = {0};
        assert_int_equal(st_jwt_validate(&u, bad[i], strlen(bad[i]), NOW, &res), -1);
    }
    /* a token over ST_OAUTH_TOKEN_MAX, and a big one under it */
    size_t big = ST_OAUTH_TOKEN_MAX + 10;
    char *t = malloc(big + 1);
    memset(t, 'A', big);
    t[10] = t[20] = '.';
    t[big] = 0;
    assert_int_equal(check(k, t, &res), -1);
    assert_non_null(strstr(res.why, "longer"));
    free(t);
    char pad[40000];
    memset(pad, 'x', sizeof pad - 16);
    memcpy(pad, "\"pad\":\"", 7);
    strcpy(pad + sizeof pad - 17, "\"");
    assert_int_equal(signed_ok(k, rsa_key, RS, claims(pad)), 0);
    /* deeply nested claims */
    char deep[4200];
    size_t o = 0;
    o += (size_t)sprintf(deep, "{\"sub\":\"a\",\"x\":");
    for (int i = 0; i < 2000; i++)
        deep[o++] = '[';
    for (int i = 0; i < 2000; i++)
        deep[o++] = ']';
    deep[o++] = '}';
    deep[o] = 0;
    assert_int_equal(signed_ok(k, rsa_key, RS, deep), -1);
    st_jwks_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_b64url),  cmocka_unit_test(test_client_message),
        cmocka_unit_test(test_jwks),    cmocka_unit_test(test_signed),
        cmocka_unit_test(test_claims),  cmocka_unit_test(test_unsecured),
        cmocka_unit_test(test_hostile),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
