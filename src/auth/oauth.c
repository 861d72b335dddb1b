/* oauth.c — OAUTHBEARER's client message, JWT validation and JWKS keys (oauth.h). */
#include "auth/oauth.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---- base64url ---- */

static int b64url_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

int st_b64url_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
    while (n > 0 && in[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return -1;
    size_t need = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
    if (need > cap || need > (size_t)INT32_MAX)
        return -1;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64url_val((unsigned char)in[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    /* the bits left over must be zero (a canonical encoding) */
    if (bits && (acc & ((1u << bits) - 1)))
        return -1;
    return (int)o;
}

/* base64url of at most cap bytes into a fresh buffer (NUL-terminated): its length, or -1. */
static int b64url_dup(const char *in, size_t n, size_t cap, uint8_t **out)
{
    size_t max = n / 4 * 3 + 3;
    if (max > cap)
        max = cap;
    *out = malloc(max + 1);
    if (!*out)
        return -1;
    int len = st_b64url_decode(in, n, *out, max);
    if (len < 0) {
        free(*out);
        *out = NULL;
        return -1;
    }
    (*out)[len] = 0;
    return len;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- JWKS ---- */

typedef enum { KTY_RSA = 1, KTY_EC = 2 } kty_t;

typedef struct jwk {
    kty_t kty;
    int coord;     /* EC: bytes of a coordinate (32 for P-256, 48 for P-384) */
    char kid[128]; /* "" when the key has none */
    char alg[16];  /* "" when the key names none */
    EVP_PKEY *pkey;
} jwk_t;

struct st_jwks {
    int n;
    jwk_t keys[ST_OAUTH_KEYS_MAX];
};

/* A base64url member of o decoded into a BIGNUM-ready buffer: its length, or -1. */
static int member_b64(json_t *o, const char *name, uint8_t *out, size_t cap)
{
    json_t *v = json_object_get(o, name);
    if (!json_is_string(v))
        return -1;
    int n = st_b64url_decode(json_string_value(v), json_string_length(v), out, cap);
    return n > 0 ? n : -1;
}

/* A public key from params; an EC key's point is checked to be on its curve. (OpenSSL's RSA
 * public-key check is SP 800-56B's, which tests the modulus for primality: 5 ms a 2048-bit
 * key, on the shard that reloads the set. rsa_key checks the sizes and parities instead; a
 * modulus that is not a product of primes only makes signatures fail.) */
static EVP_PKEY *key_from_params(const char *type, OSSL_PARAM_BLD *bld)
{
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = params ? EVP_PKEY_CTX_new_from_name(NULL, type, NULL) : NULL;
    if (!ctx || EVP_PKEY_fromdata_init(ctx) <= 0 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    if (!pkey)
        return NULL;
    if (strcmp(type, "EC") != 0)
        return pkey;
    EVP_PKEY_CTX *chk = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    int ok = chk && EVP_PKEY_public_check(chk) == 1;
    EVP_PKEY_CTX_free(chk);
    if (!ok) {
        EVP_PKEY_free(pkey);
        return NULL;
    }
    return pkey;
}

static EVP_PKEY *rsa_key(json_t *o, const char **why)
{
    uint8_t n[1024], e[16];
    int nl = member_b64(o, "n", n, sizeof n), el = member_b64(o, "e", e, sizeof e);
    if (nl < 0 || el < 0) {
        *why = "an RSA key without a valid n or e (or over 8192 bits)";
        return NULL;
    }
    BIGNUM *bn = BN_bin2bn(n, nl, NULL), *be = BN_bin2bn(e, el, NULL);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pkey = NULL;
    if (bn && be && bld && BN_num_bits(bn) >= 2048 && BN_num_bits(bn) <= 8192 && BN_is_odd(bn) &&
        BN_is_odd(be) && BN_num_bits(be) >= 2 && BN_num_bits(be) <= 64 &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
        pkey = key_from_params("RSA", bld);
    if (!pkey)
        *why = bn && BN_num_bits(bn) < 2048 ? "an RSA key under 2048 bits" : "a bad RSA key";
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    return pkey;
}

static EVP_PKEY *ec_key(json_t *o, int *coord, const char **why)
{
    const char *crv = json_string_value(json_object_get(o, "crv"));
    const char *group = NULL;
    if (crv && strcmp(crv, "P-256") == 0) {
        group = "prime256v1";
        *coord = 32;
    } else if (crv && strcmp(crv, "P-384") == 0) {
        group = "secp384r1";
        *coord = 48;
    } else {
        *why = "an EC key of a curve other than P-256 and P-384";
        return NULL;
    }
    uint8_t pt[1 + 2 * 48], x[64], y[64];
    int xl = member_b64(o, "x", x, sizeof x), yl = member_b64(o, "y", y, sizeof y);
    if (xl != *coord || yl != *coord) {
        *why = "an EC key without valid x and y";
        return NULL;
    }
    pt[0] = 4; /* uncompressed point */
    memcpy(pt + 1, x, (size_t)xl);
    memcpy(pt + 1 + xl, y, (size_t)yl);
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    EVP_PKEY *pkey = NULL;
    if (bld && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, group, 0) &&
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pt, 1 + 2 * (size_t)xl))
        pkey = key_from_params("EC", bld);
    if (!pkey)
        *why = "a bad EC key (a point not on its curve?)";
    OSSL_PARAM_BLD_free(bld);
    return pkey;
}

int st_jwks_parse(const char *json, size_t len, st_jwks_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (len > ST_OAUTH_JWKS_MAX)
        return fail(err, errlen, "the key set is larger than %d bytes", ST_OAUTH_JWKS_MAX);
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return fail(err, errlen, "the key set is not JSON: %s (line %d)", je.text, je.line);
    json_t *keys = json_object_get(root, "keys");
    if (!json_is_array(keys)) {
        json_decref(root);
        return fail(err, errlen, "the key set has no \"keys\" array");
    }
    st_jwks_t *k = calloc(1, sizeof *k);
    if (!k) {
        json_decref(root);
        return fail(err, errlen, "out of memory");
    }
    const char *skipped = NULL;
    size_t i;
    json_t *o;
    json_array_foreach(keys, i, o)
    {
        if (k->n == ST_OAUTH_KEYS_MAX)
            break;
        const char *why = NULL;
        const char *kty = json_string_value(json_object_get(o, "kty"));
        const char *use = json_string_value(json_object_get(o, "use"));
        const char *kid = json_string_value(json_object_get(o, "kid"));
        const char *alg = json_string_value(json_object_get(o, "alg"));
        jwk_t *w = &k->keys[k->n];
        memset(w, 0, sizeof *w);
        if (!json_is_object(o) || !kty)
            why = "a key without kty";
        else if (use && strcmp(use, "sig") != 0)
            why = "a key whose use is not sig";
        else if ((kid && strlen(kid) >= sizeof w->kid) || (alg && strlen(alg) >= sizeof w->alg))
            why = "a key with an overlong kid or alg";
        else if (strcmp(kty, "RSA") == 0) {
            w->kty = KTY_RSA;
            w->pkey = rsa_key(o, &why);
        } else if (strcmp(kty, "EC") == 0) {
            w->kty = KTY_EC;
            w->pkey = ec_key(o, &w->coord, &why);
        } else
            why = "a key of a type other than RSA and EC";
        if (!w->pkey) {
            if (!skipped)
                skipped = why ? why : "a bad key";
            continue;
        }
        snprintf(w->kid, sizeof w->kid, "%s", kid ? kid : "");
        snprintf(w->alg, sizeof w->alg, "%s", alg ? alg : "");
        k->n++;
    }
    json_decref(root);
    if (!k->n) {
        free(k);
        return fail(err, errlen, "the key set has no usable key%s%s", skipped ? ": " : "",
                    skipped ? skipped : "");
    }
    *out = k;
    return 0;
}

int st_jwks_load(const char *path, st_jwks_t **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, errlen, "cannot open %s: %s", path, strerror(errno));
    char *buf = malloc(ST_OAUTH_JWKS_MAX + 1);
    size_t n = buf ? fread(buf, 1, ST_OAUTH_JWKS_MAX + 1, f) : 0;
    bool bad = ferror(f);
    fclose(f);
    if (!buf)
        return fail(err, errlen, "out of memory");
    int rc;
    if (bad)
        rc = fail(err, errlen, "cannot read %s", path);
    else if (n > ST_OAUTH_JWKS_MAX)
        rc = fail(err, errlen, "%s is larger than %d bytes", path, ST_OAUTH_JWKS_MAX);
    else {
        char why[200];
        rc = st_jwks_parse(buf, n, out, why, sizeof why);
        if (rc)
            fail(err, errlen, "%s: %s", path, why);
    }
    free(buf);
    return rc;
}

int st_jwks_count(const st_jwks_t *k)
{
    return k ? k->n : 0;
}

void st_jwks_free(st_jwks_t *k)
{
    if (!k)
        return;
    for (int i = 0; i < k->n; i++)
        EVP_PKEY_free(k->keys[i].pkey);
    free(k);
}

int st_oauth_file_url_path(const char *url, char *path, size_t len)
{
    if (!url || strncasecmp(url, "file:", 5) != 0)
        return -1;
    const char *p = url + 5;
    if (strncmp(p, "//", 2) == 0) {
        p += 2;
        if (strncasecmp(p, "localhost/", 10) == 0)
            p += 9;
        else if (*p != '/')
            return -1; /* another host */
    }
    if (*p != '/' || strlen(p) >= len)
        return -1;
    snprintf(path, len, "%s", p);
    return 0;
}

/* ---- JWT ---- */

/* A NumericDate claim in ms: 0 and *ms, 1 when absent, -1 when not a sane number. */
static int date_claim(json_t *claims, const char *name, int64_t *ms)
{
    json_t *v = json_object_get(claims, name);
    if (!v)
        return 1;
    if (!json_is_number(v))
        return -1;
    double s = json_number_value(v);
    if (!(s > -1e13 && s < 1e13)) /* 300,000 years either way; also refuses NaN */
        return -1;
    *ms = (int64_t)(s * 1000.0);
    return 0;
}

/* Whether the comma-separated list holds the len bytes at s. */
static bool in_list(const char *list, const char *s, size_t len)
{
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > p && t[-1] == ' ')
            t--;
        if ((size_t)(t - p) == len && len && memcmp(p, s, len) == 0)
            return true;
        p = e;
    }
    return false;
}

typedef struct alg {
    const char *name;
    kty_t kty;
    int coord; /* EC */
    const EVP_MD *(*md)(void);
} alg_t;

static const alg_t algs[] = {
    {"RS256", KTY_RSA, 0, EVP_sha256}, {"RS384", KTY_RSA, 0, EVP_sha384},
    {"RS512", KTY_RSA, 0, EVP_sha512}, {"ES256", KTY_EC, 32, EVP_sha256},
    {"ES384", KTY_EC, 48, EVP_sha384},
};

/* Whether sig verifies over in with key w under alg a. */
static bool verify(const jwk_t *w, const alg_t *a, const char *in, size_t inl, const uint8_t *sig,
                   size_t sigl)
{
    uint8_t der[160];
    const uint8_t *s = sig;
    size_t sl = sigl;
    if (a->kty == KTY_EC) {
        /* JWS's r||s into the DER ECDSA-Sig-Value OpenSSL verifies */
        if (sigl != 2 * (size_t)a->coord)
            return false;
        ECDSA_SIG *es = ECDSA_SIG_new();
        BIGNUM *r = BN_bin2bn(sig, a->coord, NULL), *ss = BN_bin2bn(sig + a->coord, a->coord, NULL);
        if (!es || !r || !ss || !ECDSA_SIG_set0(es, r, ss)) {
            BN_free(r);
            BN_free(ss);
            ECDSA_SIG_free(es);
            return false;
        }
        int dl = i2d_ECDSA_SIG(es, NULL);
        uint8_t *p = der;
        if (dl <= 0 || dl > (int)sizeof der || i2d_ECDSA_SIG(es, &p) != dl) {
            ECDSA_SIG_free(es);
            return false;
        }
        ECDSA_SIG_free(es);
        s = der;
        sl = (size_t)dl;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestVerifyInit(ctx, NULL, a->md(), NULL, w->pkey) == 1 &&
              EVP_DigestVerify(ctx, s, sl, (const uint8_t *)in, inl) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
}

/* The string or array-of-strings claim v into out, space-separated (truncated). */
static void scope_of(json_t *v, char *out, size_t len)
{
    out[0] = 0;
    if (json_is_string(v)) {
        snprintf(out, len, "%s", json_string_value(v));
        return;
    }
    size_t i, o = 0;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e) || o + 1 >= len)
            continue;
        int w = snprintf(out + o, len - o, "%s%s", o ? " " : "", json_string_value(e));
        o = w < 0 ? o : o + (size_t)w >= len ? len - 1 : o + (size_t)w;
    }
}

static int why(st_jwt_result_t *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int why(st_jwt_result_t *res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->why, sizeof res->why, fmt, ap);
    va_end(ap);
    return -1;
}

/* Steps 3 to 5 of oauth.h on the claims. */
static int check_claims(const st_jwt_rules_t *ru, json_t *claims, int64_t now_ms,
                        st_jwt_result_t *res)
{
    int64_t exp = 0, nbf = 0, iat = 0;
    int rc = date_claim(claims, "exp", &exp);
    if (rc)
        return why(res, rc > 0 ? "no exp claim" : "exp is not a NumericDate");
    if (now_ms >= exp + ru->skew_ms)
        return why(res, "the token expired %lld ms ago", (long long)(now_ms - exp));
    res->exp_ms = exp;
    rc = date_claim(claims, "nbf", &nbf);
    if (rc < 0)
        return why(res, "nbf is not a NumericDate");
    if (rc == 0 && nbf > now_ms + ru->skew_ms)
        return why(res, "the token is not valid before %lld ms from now",
                   (long long)(nbf - now_ms));
    rc = date_claim(claims, "iat", &iat);
    if (rc < 0 || (rc > 0 && ru->jwks))
        return why(res, rc < 0 ? "iat is not a NumericDate" : "no iat claim");
    if (rc == 0 && iat > now_ms + ru->skew_ms)
        return why(res, "the token was issued %lld ms in the future", (long long)(iat - now_ms));
    if (ru->jwks && ru->issuer && *ru->issuer) {
        const char *iss = json_string_value(json_object_get(claims, "iss"));
        if (!iss || strcmp(iss, ru->issuer) != 0)
            return why(res, "issuer %s%s%s is not the expected %s", iss ? "'" : "",
                       iss ? iss : "(none)", iss ? "'" : "", ru->issuer);
    }
    if (ru->jwks && ru->audience && *ru->audience) {
        json_t *aud = json_object_get(claims, "aud");
        bool ok = json_is_string(aud) &&
                  in_list(ru->audience, json_string_value(aud), json_string_length(aud));
        size_t i;
        json_t *e;
        if (json_is_array(aud))
            json_array_foreach(aud, i, e) ok =
                ok || (json_is_string(e) &&
                       in_list(ru->audience, json_string_value(e), json_string_length(e)));
        if (!ok)
            return why(res, "the audience is not one of the expected %s", ru->audience);
    }
    const char *sc = ru->sub_claim && *ru->sub_claim ? ru->sub_claim : "sub";
    json_t *sub = json_object_get(claims, sc);
    if (!json_is_string(sub) || !json_string_length(sub))
        return why(res, "no %s claim naming the principal", sc);
    if (json_string_length(sub) > ST_OAUTH_PRINCIPAL_MAX ||
        strlen(json_string_value(sub)) != json_string_length(sub))
        return why(res, "the %s claim is longer than %d bytes or holds a NUL", sc,
                   ST_OAUTH_PRINCIPAL_MAX);
    snprintf(res->principal, sizeof res->principal, "%s", json_string_value(sub));
    const char *scc = ru->scope_claim && *ru->scope_claim ? ru->scope_claim : "scope";
    scope_of(json_object_get(claims, scc), res->scope, sizeof res->scope);
    return 0;
}

int st_jwt_validate(const st_jwt_rules_t *ru, const char *tok, size_t len, int64_t now_ms,
                    st_jwt_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (len > ST_OAUTH_TOKEN_MAX)
        return why(res, "the token is longer than %d bytes", ST_OAUTH_TOKEN_MAX);
    const char *d1 = memchr(tok, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - tok)))
        return why(res, "the token is not three dot-separated parts");
    uint8_t *hb = NULL, *cb = NULL, *sig = NULL;
    json_t *hdr = NULL, *claims = NULL;
    int rc = -1;
    int hl = b64url_dup(tok, (size_t)(d1 - tok), ST_OAUTH_TOKEN_MAX, &hb);
    int cl = b64url_dup(d1 + 1, (size_t)(d2 - d1 - 1), ST_OAUTH_TOKEN_MAX, &cb);
    int sl = b64url_dup(d2 + 1, len - (size_t)(d2 + 1 - tok), ST_OAUTH_TOKEN_MAX, &sig);
    if (hl < 0 || cl < 0 || sl < 0) {
        why(res, "a part of the token is not base64url");
        goto out;
    }
    json_error_t je;
    hdr = json_loadb((const char *)hb, (size_t)hl, JSON_REJECT_DUPLICATES, &je);
    claims = json_loadb((const char *)cb, (size_t)cl, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(hdr) || !json_is_object(claims)) {
        why(res, "the token's %s is not a JSON object", json_is_object(hdr) ? "claims" : "header");
        goto out;
    }
    const char *alg = json_string_value(json_object_get(hdr, "alg"));
    if (!alg) {
        why(res, "the token's header has no alg");
        goto out;
    }
    if (!ru->jwks) {
        if (strcmp(alg, "none") != 0 || sl != 0) {
            why(res, "an unsecured token must have alg none and no signature (alg %.16s)", alg);
            goto out;
        }
    } else {
        const alg_t *a = NULL;
        for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++)
            if (strcmp(alg, algs[i].name) == 0)
                a = &algs[i];
        if (!a) {
            why(res, "alg %.16s is not one of RS256, RS384, RS512, ES256, ES384", alg);
            goto out;
        }
        json_t *kidv = json_object_get(hdr, "kid");
        const char *kid = json_string_value(kidv);
        if (kidv && !kid) {
            why(res, "the token's kid is not a string");
            goto out;
        }
        bool found = false, ok = false;
        for (int i = 0; i < ru->jwks->n && !ok; i++) {
            const jwk_t *w = &ru->jwks->keys[i];
            if ((kid && strcmp(kid, w->kid) != 0) || w->kty != a->kty ||
                (w->kty == KTY_EC && w->coord != a->coord) || (*w->alg && strcmp(w->alg, alg)))
                continue;
            found = true;
            ok = verify(w, a, tok, (size_t)(d2 - tok), sig, (size_t)sl);
        }
        if (!ok) {
            if (found)
                why(res, "the signature does not verify");
            else
                why(res, "no key for kid %.64s%s and alg %s in the key set", kid ? kid : "(none)",
                    kid && strlen(kid) > 64 ? "..." : "", alg);
            goto out;
        }
    }
    rc = check_claims(ru, claims, now_ms, res);
out:
    json_decref(hdr);
    json_decref(claims);
    free(hb);
    free(cb);
    free(sig);
    if (rc)
        res->principal[0] = 0;
    return rc;
}

/* ---- RFC 7628's client message ---- */

static bool token_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
}

int st_oauthbearer_parse(const uint8_t *msg, size_t len, const char **token, size_t *toklen,
                         const char **authzid, size_t *alen)
{
    const char *m = (const char *)msg, *end = m + len;
    *token = *authzid = NULL;
    *toklen = *alen = 0;
    /* gs2-header: "n," [ "a=" authzid ] "," */
    if (len < 3 || m[0] != 'n' || m[1] != ',')
        return -1;
    const char *p = m + 2;
    if (p < end && *p == 'a') {
        if (p + 1 >= end || p[1] != '=')
            return -1;
        const char *a = p + 2, *c = memchr(a, ',', (size_t)(end - a));
        if (!c || c == a)
            return -1;
        *authzid = a;
        *alen = (size_t)(c - a);
        p = c;
    }
    if (p >= end || *p != ',')
        return -1;
    p++;
    /* \x01, then key=value\x01 pairs, then \x01 */
    if (p >= end || *p != 1)
        return -1;
    p++;
    bool have = false;
    while (p < end && *p != 1) {
        const char *e = memchr(p, 1, (size_t)(end - p));
        if (!e)
            return -1;
        const char *eq = memchr(p, '=', (size_t)(e - p));
        if (!eq || eq == p)
            return -1;
        for (const char *k = p; k < eq; k++)
            if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z')))
                return -1;
        if (eq - p == 4 && memcmp(p, "auth", 4) == 0) {
            const char *v = eq + 1;
            if (have || e - v < 7 || strncasecmp(v, "Bearer", 6) != 0 || v[6] != ' ')
                return -1;
            v += 6;
            while (v < e && *v == ' ')
                v++;
            if (v == e)
                return -1;
            for (const char *t = v; t < e; t++)
                if (!token_char((unsigned char)*t))
                    return -1;
            *token = v;
            *toklen = (size_t)(e - v);
            have = true;
        }
        p = e + 1;
    }
    if (p >= end || *p != 1 || p + 1 != end || !have)
        return -1;
    return 0;
}
