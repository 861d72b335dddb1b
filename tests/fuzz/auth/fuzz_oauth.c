/*
 * fuzz_oauth.c — what an OAUTHBEARER client and a key set file can feed the broker
 * (auth/oauth.h): RFC 7628's client message, the JWT in it (signed against a key set, and
 * unsecured), a JWKS document, base64url. Must never crash, leak, read out of bounds or trip a
 * sanitizer, and:
 *   - a parsed client message's token and authzid lie inside the message;
 *   - a token that validates has a non-empty principal without a NUL and an exp;
 *   - a key set that parses has between 1 and ST_OAUTH_KEYS_MAX keys;
 *   - base64url output stays within its capacity.
 *
 * Input: byte 0 picks the target (0: client message, then its token both ways; 1: a JWT
 * signed or not; 2: a JWKS document; 3: base64url), the rest is the bytes.
 */
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/oauth.h"
#include "base/assert.h"

static st_jwks_t *keys;

/* A key set of one EC P-256 key made at start (whatever the fuzzer signs will not verify, but
 * every step before the signature and the claims after it get exercised through kid/alg and
 * unsecured tokens). */
static void init_keys(void)
{
    if (keys)
        return;
    const char *doc = "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"k\","
                      "\"x\":\"MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4\","
                      "\"y\":\"4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM\"}]}";
    char err[200];
    ST_ASSERT(st_jwks_parse(doc, strlen(doc), &keys, err, sizeof err) == 0);
}

static void check_token(const char *t, size_t len)
{
    st_jwt_result_t res;
    st_jwt_rules_t signed_rules = {
        .jwks = keys, .audience = "a,b", .issuer = "i", .skew_ms = 30000};
    st_jwt_rules_t unsecured = {.skew_ms = 30000};
    const st_jwt_rules_t *rules[2] = {&signed_rules, &unsecured};
    for (int i = 0; i < 2; i++) {
        /* now: 2023-11-14, when many hand-written exp values lie after it */
        if (st_jwt_validate(rules[i], t, len, 1700000000000, &res) == 0) {
            ST_ASSERT(res.principal[0] != 0);
            ST_ASSERT(strlen(res.principal) <= ST_OAUTH_PRINCIPAL_MAX);
        } else {
            ST_ASSERT(res.principal[0] == 0);
            ST_ASSERT(res.why[0] != 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_keys();
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] & 3) {
    case 0: {
        const char *t, *a;
        size_t tl, al;
        if (st_oauthbearer_parse(p, n, &t, &tl, &a, &al) == 0) {
            ST_ASSERT(t >= (const char *)p && t + tl <= (const char *)p + n && tl > 0);
            ST_ASSERT(!a || (a >= (const char *)p && a + al <= (const char *)p + n));
            check_token(t, tl);
        }
        break;
    }
    case 1:
        check_token((const char *)p, n);
        break;
    case 2: {
        st_jwks_t *k = NULL;
        char err[200];
        if (st_jwks_parse((const char *)p, n, &k, err, sizeof err) == 0) {
            ST_ASSERT(st_jwks_count(k) >= 1 && st_jwks_count(k) <= ST_OAUTH_KEYS_MAX);
            st_jwks_free(k);
        } else {
            ST_ASSERT(k == NULL);
        }
        break;
    }
    default: {
        uint8_t out[256];
        int r = st_b64url_decode((const char *)p, n, out, sizeof out);
        ST_ASSERT(r >= -1 && r <= (int)sizeof out);
        break;
    }
    }
    return 0;
}
