/* scram.c — SCRAM-SHA-256/512 and PLAIN on the server side, and their credentials (scram.h). */
#include "auth/scram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- mechanisms ---- */

const char *st_scram_mech_name(st_scram_mech_t m)
{
    switch (m) {
    case ST_SCRAM_SHA_256:
        return "SCRAM-SHA-256";
    case ST_SCRAM_SHA_512:
        return "SCRAM-SHA-512";
    default:
        return "?";
    }
}

st_scram_mech_t st_scram_mech_parse(const char *name)
{
    if (name && strcmp(name, "SCRAM-SHA-256") == 0)
        return ST_SCRAM_SHA_256;
    if (name && strcmp(name, "SCRAM-SHA-512") == 0)
        return ST_SCRAM_SHA_512;
    return ST_SCRAM_UNKNOWN;
}

int st_scram_key_len(st_scram_mech_t m)
{
    return m == ST_SCRAM_SHA_256 ? 32 : m == ST_SCRAM_SHA_512 ? 64 : 0;
}

static const EVP_MD *mech_md(st_scram_mech_t m)
{
    return m == ST_SCRAM_SHA_256 ? EVP_sha256() : m == ST_SCRAM_SHA_512 ? EVP_sha512() : NULL;
}

/* ---- base64 ---- */

void st_b64_encode(const uint8_t *in, size_t n, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

int st_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
    if (n % 4 || n / 4 * 3 > cap + 2 || n > 4096)
        return -1;
    if (n == 0)
        return 0;
    uint8_t tmp[3072 + 3];
    int len = EVP_DecodeBlock(tmp, (const unsigned char *)in, (int)n);
    if (len < 0)
        return -1;
    /* EVP_DecodeBlock counts the padding as zero bytes */
    if (in[n - 1] == '=')
        len--;
    if (in[n - 2] == '=')
        len--;
    if ((size_t)len > cap)
        return -1;
    memcpy(out, tmp, (size_t)len);
    return len;
}

/* ---- credentials ---- */

static int hmac(st_scram_mech_t m, const uint8_t *key, int klen, const void *data, size_t n,
                uint8_t *out)
{
    unsigned olen = 0;
    return HMAC(mech_md(m), key, klen, data, n, out, &olen) ? 0 : -1;
}

static int digest(st_scram_mech_t m, const uint8_t *data, size_t n, uint8_t *out)
{
    unsigned olen = 0;
    return EVP_Digest(data, n, out, &olen, mech_md(m), NULL) ? 0 : -1;
}

int st_scram_cred_from_salted(st_scram_cred_t *c, st_scram_mech_t m, int32_t iterations,
                              const uint8_t *salt, int salt_len, const uint8_t *salted,
                              int salted_len)
{
    int kl = st_scram_key_len(m);
    if (!kl || salted_len != kl || salt_len <= 0 || salt_len > ST_SCRAM_SALT_MAX)
        return -1;
    memset(c, 0, sizeof *c);
    c->mech = m;
    c->iterations = iterations;
    c->salt_len = salt_len;
    memcpy(c->salt, salt, (size_t)salt_len);
    uint8_t client_key[ST_SCRAM_KEY_MAX];
    if (hmac(m, salted, kl, "Client Key", 10, client_key) ||
        digest(m, client_key, (size_t)kl, c->stored_key) ||
        hmac(m, salted, kl, "Server Key", 10, c->server_key))
        return -1;
    OPENSSL_cleanse(client_key, sizeof client_key);
    return 0;
}

static int salt_password(st_scram_mech_t m, const char *pw, size_t pwlen, const uint8_t *salt,
                         int salt_len, int32_t iterations, uint8_t *out)
{
    return PKCS5_PBKDF2_HMAC(pw, (int)pwlen, salt, salt_len, iterations, mech_md(m),
                             st_scram_key_len(m), out)
               ? 0
               : -1;
}

int st_scram_cred_from_password(st_scram_cred_t *c, st_scram_mech_t m, int32_t iterations,
                                const char *password, size_t pwlen, const uint8_t *salt,
                                int salt_len)
{
    uint8_t rsalt[32], salted[ST_SCRAM_KEY_MAX];
    if (!st_scram_key_len(m) || iterations <= 0)
        return -1;
    if (!salt) {
        if (RAND_bytes(rsalt, sizeof rsalt) != 1)
            return -1;
        salt = rsalt;
        salt_len = sizeof rsalt;
    }
    if (salt_len <= 0 || salt_len > ST_SCRAM_SALT_MAX ||
        salt_password(m, password, pwlen, salt, salt_len, iterations, salted))
        return -1;
    int rc =
        st_scram_cred_from_salted(c, m, iterations, salt, salt_len, salted, st_scram_key_len(m));
    OPENSSL_cleanse(salted, sizeof salted);
    return rc;
}

bool st_scram_cred_check(const st_scram_cred_t *c, const char *password, size_t pwlen)
{
    st_scram_cred_t d;
    if (st_scram_cred_from_password(&d, c->mech, c->iterations, password, pwlen, c->salt,
                                    c->salt_len))
        return false;
    bool ok = CRYPTO_memcmp(d.stored_key, c->stored_key, (size_t)st_scram_key_len(c->mech)) == 0;
    OPENSSL_cleanse(&d, sizeof d);
    return ok;
}

/* ---- the unknown users' credentials ---- */

static uint8_t fake_secret[32];
static pthread_once_t fake_once = PTHREAD_ONCE_INIT;

static void fake_init(void)
{
    if (RAND_bytes(fake_secret, sizeof fake_secret) != 1)
        memset(fake_secret, 0x5a, sizeof fake_secret);
}

/* A credential no password matches, with a salt stable per user name for this process's life,
 * so that asking twice for an unknown user looks like asking for a known one. */
static void fake_cred(st_scram_cred_t *c, st_scram_mech_t m, const char *user)
{
    pthread_once(&fake_once, fake_init);
    memset(c, 0, sizeof *c);
    c->mech = m;
    c->iterations = ST_SCRAM_MIN_ITER;
    c->salt_len = 32;
    uint8_t mac[ST_SCRAM_KEY_MAX];
    hmac(ST_SCRAM_SHA_256, fake_secret, sizeof fake_secret, user, strlen(user), mac);
    memcpy(c->salt, mac, 32);
    RAND_bytes(c->stored_key, sizeof c->stored_key);
    RAND_bytes(c->server_key, sizeof c->server_key);
}

/* ---- the exchange ---- */

void st_scram_init(st_scram_t *s, st_scram_mech_t m)
{
    memset(s, 0, sizeof *s);
    s->mech = m;
    s->state = ST_SCRAM_WANT_FIRST;
}

void st_scram_fini(st_scram_t *s)
{
    free(s->client_first_bare);
    free(s->server_first);
    OPENSSL_cleanse(&s->cred, sizeof s->cred);
    s->client_first_bare = s->server_first = NULL;
}

static int fail(st_scram_t *s, char *err, size_t errlen, const char *why)
{
    s->state = ST_SCRAM_FAILED;
    snprintf(err, errlen, "%s", why);
    return -1;
}

/* A saslname (RFC 5802 §5.1: "=2C" for ',' and "=3D" for '=') of n bytes into out. */
static int saslname_decode(const char *in, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = in[i];
        if (ch == '=') {
            if (i + 2 >= n)
                return -1;
            if (in[i + 1] == '2' && in[i + 2] == 'C')
                ch = ',';
            else if (in[i + 1] == '3' && in[i + 2] == 'D')
                ch = '=';
            else
                return -1;
            i += 2;
        } else if (ch == ',' || ch == 0) {
            return -1;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = ch;
    }
    out[o] = 0;
    return o ? 0 : -1;
}

static bool nonce_ok(const char *p, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x21 || p[i] > 0x7e || p[i] == ',')
            return false;
    return true;
}

int st_scram_client_first(st_scram_t *s, const char *msg, size_t len, st_scram_lookup_fn lookup,
                          void *arg, const char *server_nonce, char **out, size_t *outlen,
                          char *err, size_t errlen)
{
    if (s->state != ST_SCRAM_WANT_FIRST)
        return fail(s, err, errlen, "unexpected client-first message");
    if (len > 1024 || memchr(msg, 0, len))
        return fail(s, err, errlen, "malformed client-first message");
    /* gs2-header: ("n" | "y") "," [ "a=" authzid ] "," */
    if (len < 3 || (msg[0] != 'n' && msg[0] != 'y') || msg[1] != ',')
        return fail(s, err, errlen, "channel binding is not supported");
    const char *p = msg + 2, *end = msg + len;
    const char *comma = memchr(p, ',', (size_t)(end - p));
    if (!comma)
        return fail(s, err, errlen, "malformed client-first message");
    char authzid[ST_SCRAM_USER_MAX] = "";
    if (comma > p) {
        if (comma - p < 3 || p[0] != 'a' || p[1] != '=' ||
            saslname_decode(p + 2, (size_t)(comma - p - 2), authzid, sizeof authzid))
            return fail(s, err, errlen, "malformed authzid");
    }
    size_t gs2_len = (size_t)(comma + 1 - msg);
    if (gs2_len >= sizeof s->gs2)
        return fail(s, err, errlen, "malformed client-first message");
    memcpy(s->gs2, msg, gs2_len);
    s->gs2[gs2_len] = 0;
    const char *bare = comma + 1;
    /* client-first-message-bare: "n=" saslname "," "r=" c-nonce ["," extensions] */
    if (end - bare < 2 || bare[0] != 'n' || bare[1] != '=')
        return fail(s, err, errlen, "malformed client-first message");
    const char *u = bare + 2, *ue = memchr(u, ',', (size_t)(end - u));
    if (!ue || saslname_decode(u, (size_t)(ue - u), s->user, sizeof s->user))
        return fail(s, err, errlen, "malformed user name");
    if (authzid[0] && strcmp(authzid, s->user) != 0)
        return fail(s, err, errlen, "authorization id differs from the user name");
    const char *r = ue + 1;
    if (end - r < 2 || r[0] != 'r' || r[1] != '=')
        return fail(s, err, errlen, "malformed client-first message");
    r += 2;
    const char *re = memchr(r, ',', (size_t)(end - r));
    if (!re)
        re = end; /* extensions (Kafka's tokenauth=...) after it are ignored */
    if (!nonce_ok(r, (size_t)(re - r)))
        return fail(s, err, errlen, "malformed client nonce");

    char snonce[ST_SCRAM_NONCE_BYTES * 2];
    if (server_nonce) {
        snprintf(snonce, sizeof snonce, "%s", server_nonce);
    } else {
        uint8_t raw[ST_SCRAM_NONCE_BYTES];
        if (RAND_bytes(raw, sizeof raw) != 1)
            return fail(s, err, errlen, "no randomness");
        st_b64_encode(raw, sizeof raw, snonce); /* 24 bytes: 32 characters, no padding */
    }
    snprintf(s->nonce, sizeof s->nonce, "%.*s%s", (int)(re - r), r, snonce);

    s->known = lookup && lookup(arg, s->user, s->mech, &s->cred) == 0 && s->cred.mech == s->mech;
    if (!s->known)
        fake_cred(&s->cred, s->mech, s->user);
    char salt64[ST_SCRAM_SALT_MAX * 2];
    st_b64_encode(s->cred.salt, (size_t)s->cred.salt_len, salt64);
    s->client_first_bare = strndup(bare, (size_t)(end - bare));
    size_t n = strlen(s->nonce) + strlen(salt64) + 32;
    s->server_first = malloc(n);
    if (!s->client_first_bare || !s->server_first)
        return fail(s, err, errlen, "out of memory");
    snprintf(s->server_first, n, "r=%s,s=%s,i=%d", s->nonce, salt64, (int)s->cred.iterations);
    *out = strdup(s->server_first);
    if (!*out)
        return fail(s, err, errlen, "out of memory");
    *outlen = strlen(*out);
    s->state = ST_SCRAM_WANT_FINAL;
    return 0;
}

int st_scram_client_final(st_scram_t *s, const char *msg, size_t len, char **out, size_t *outlen,
                          char *err, size_t errlen)
{
    if (s->state != ST_SCRAM_WANT_FINAL)
        return fail(s, err, errlen, "unexpected client-final message");
    if (len > 1024 || memchr(msg, 0, len))
        return fail(s, err, errlen, "malformed client-final message");
    const char *end = msg + len;
    /* "c=" base64(gs2 header) "," "r=" nonce ["," extensions] "," "p=" proof */
    const char *p = NULL;
    for (const char *q = end - 1; q > msg; q--)
        if (*q == ',' && end - q > 3 && q[1] == 'p' && q[2] == '=') {
            p = q;
            break;
        }
    if (!p || len < 2 || msg[0] != 'c' || msg[1] != '=')
        return fail(s, err, errlen, "malformed client-final message");
    const char *c = msg + 2, *ce = memchr(c, ',', (size_t)(p - c));
    if (!ce)
        return fail(s, err, errlen, "malformed client-final message");
    char gs2_64[sizeof s->gs2 * 2];
    st_b64_encode((const uint8_t *)s->gs2, strlen(s->gs2), gs2_64);
    if ((size_t)(ce - c) != strlen(gs2_64) || memcmp(c, gs2_64, strlen(gs2_64)) != 0)
        return fail(s, err, errlen, "channel binding differs from client-first");
    const char *r = ce + 1;
    if (p - r < 2 || r[0] != 'r' || r[1] != '=')
        return fail(s, err, errlen, "malformed client-final message");
    r += 2;
    const char *re = memchr(r, ',', (size_t)(p - r));
    if (!re)
        re = p;
    /* The nonce must end with the one server-first gave, as Kafka checks: librdkafka (2.0 at
     * least) writes its client nonce once more in front of it. The proof covers the message as
     * sent, so the server's fresh part still binds the exchange. */
    size_t nl = strlen(s->nonce), rl = (size_t)(re - r);
    if (rl < nl || memcmp(re - nl, s->nonce, nl) != 0)
        return fail(s, err, errlen, "nonce differs from the server's");

    int kl = st_scram_key_len(s->mech);
    uint8_t proof[ST_SCRAM_KEY_MAX];
    if (st_b64_decode(p + 3, (size_t)(end - p - 3), proof, sizeof proof) != kl)
        return fail(s, err, errlen, "malformed client proof");
    /* AuthMessage = client-first-bare "," server-first "," client-final-without-proof */
    size_t am_len = strlen(s->client_first_bare) + strlen(s->server_first) + (size_t)(p - msg) + 2;
    char *am = malloc(am_len + 1);
    if (!am)
        return fail(s, err, errlen, "out of memory");
    snprintf(am, am_len + 1, "%s,%s,%.*s", s->client_first_bare, s->server_first, (int)(p - msg),
             msg);
    uint8_t sig[ST_SCRAM_KEY_MAX], key[ST_SCRAM_KEY_MAX], stored[ST_SCRAM_KEY_MAX];
    uint8_t server_sig[ST_SCRAM_KEY_MAX];
    int rc = hmac(s->mech, s->cred.stored_key, kl, am, am_len, sig);
    for (int i = 0; i < kl; i++)
        key[i] = proof[i] ^ sig[i];
    rc = rc ? rc : digest(s->mech, key, (size_t)kl, stored);
    rc = rc ? rc : hmac(s->mech, s->cred.server_key, kl, am, am_len, server_sig);
    free(am);
    OPENSSL_cleanse(key, sizeof key);
    if (rc || !s->known || CRYPTO_memcmp(stored, s->cred.stored_key, (size_t)kl) != 0)
        return fail(s, err, errlen, "authentication failed: invalid credentials");
    char sig64[ST_SCRAM_KEY_MAX * 2];
    st_b64_encode(server_sig, (size_t)kl, sig64);
    size_t n = strlen(sig64) + 3;
    *out = malloc(n);
    if (!*out)
        return fail(s, err, errlen, "out of memory");
    snprintf(*out, n, "v=%s", sig64);
    *outlen = n - 1;
    s->state = ST_SCRAM_DONE;
    return 0;
}

/* ---- PLAIN ---- */

int st_plain_parse(const char *msg, size_t len, const char **user, size_t *user_len,
                   const char **pass, size_t *pass_len)
{
    const char *end = msg + len;
    const char *z1 = memchr(msg, 0, len);
    if (!z1)
        return -1;
    const char *u = z1 + 1;
    const char *z2 = memchr(u, 0, (size_t)(end - u));
    if (!z2)
        return -1;
    const char *pw = z2 + 1;
    if (memchr(pw, 0, (size_t)(end - pw)))
        return -1;
    size_t azl = (size_t)(z1 - msg), ul = (size_t)(z2 - u), pl = (size_t)(end - pw);
    if (ul == 0 || pl == 0 || ul >= ST_SCRAM_USER_MAX)
        return -1;
    if (azl && (azl != ul || memcmp(msg, u, ul) != 0))
        return -1;
    *user = u;
    *user_len = ul;
    *pass = pw;
    *pass_len = pl;
    return 0;
}

/* ---- SCRAM, the client side ---- */

int st_scram_client_begin(st_scram_client_t *s, st_scram_mech_t m, const char *user, char **out,
                          size_t *outlen)
{
    memset(s, 0, sizeof *s);
    s->mech = m;
    uint8_t raw[ST_SCRAM_NONCE_BYTES];
    if (!st_scram_key_len(m) || RAND_bytes(raw, sizeof raw) != 1)
        return -1;
    st_b64_encode(raw, sizeof raw, s->cnonce); /* base64 has no ',' */
    size_t ul = strlen(user), cap = ul * 3 + strlen(s->cnonce) + 16;
    s->client_first_bare = malloc(cap);
    *out = malloc(cap + 3);
    if (!s->client_first_bare || !*out) {
        free(*out);
        *out = NULL;
        return -1;
    }
    size_t o = 0;
    o += (size_t)snprintf(s->client_first_bare, cap, "n=");
    for (size_t i = 0; i < ul; i++)
        o +=
            (size_t)(user[i] == ','   ? snprintf(s->client_first_bare + o, cap - o, "=2C")
                     : user[i] == '=' ? snprintf(s->client_first_bare + o, cap - o, "=3D")
                                      : snprintf(s->client_first_bare + o, cap - o, "%c", user[i]));
    snprintf(s->client_first_bare + o, cap - o, ",r=%s", s->cnonce);
    *outlen = (size_t)snprintf(*out, cap + 3, "n,,%s", s->client_first_bare);
    return 0;
}

/* The value of attribute `a` ("r", "s", "i") in a comma-separated SCRAM message, or NULL. */
static const char *attr(const char *msg, size_t len, char a, size_t *vlen)
{
    const char *end = msg + len;
    for (const char *p = msg; p < end;) {
        const char *e = memchr(p, ',', (size_t)(end - p));
        if (!e)
            e = end;
        if (e - p >= 2 && p[0] == a && p[1] == '=') {
            *vlen = (size_t)(e - p - 2);
            return p + 2;
        }
        p = e + 1;
    }
    return NULL;
}

int st_scram_client_next(st_scram_client_t *s, const char *password, const char *msg, size_t len,
                         char **out, size_t *outlen, char *err, size_t errlen)
{
    size_t rl = 0, sl = 0, il = 0;
    if (len > 1024 || memchr(msg, 0, len)) {
        snprintf(err, errlen, "malformed server-first message");
        return -1;
    }
    const char *r = attr(msg, len, 'r', &rl), *salt64 = attr(msg, len, 's', &sl);
    const char *it = attr(msg, len, 'i', &il);
    size_t cl = strlen(s->cnonce);
    bool printable = r && rl <= 160;
    for (size_t i = 0; printable && i < rl; i++)
        printable = r[i] >= 0x21 && r[i] <= 0x7e;
    if (!printable || !salt64 || !it || il == 0 || il > 9) {
        snprintf(err, errlen, "malformed server-first message");
        return -1;
    }
    if (rl <= cl || memcmp(r, s->cnonce, cl) != 0) {
        snprintf(err, errlen, "server-first: the nonce does not extend ours");
        return -1;
    }
    char num[16];
    memcpy(num, it, il);
    num[il] = 0;
    char *nend;
    long iter = strtol(num, &nend, 10);
    if (*nend || iter < ST_SCRAM_MIN_ITER || iter > ST_SCRAM_MAX_ITER) {
        snprintf(err, errlen, "server-first: iteration count %s outside %d..%d", num,
                 ST_SCRAM_MIN_ITER, ST_SCRAM_MAX_ITER);
        return -1;
    }
    uint8_t salt[ST_SCRAM_SALT_MAX];
    int saltn = st_b64_decode(salt64, sl, salt, sizeof salt);
    if (saltn <= 0) {
        snprintf(err, errlen, "server-first: malformed salt");
        return -1;
    }
    int kl = st_scram_key_len(s->mech);
    /* client-final-without-proof; AuthMessage = client-first-bare "," server-first "," it */
    size_t fl = rl + 16, am_len = strlen(s->client_first_bare) + len + 2;
    char *final = malloc(fl + ST_SCRAM_KEY_MAX * 2 + 8), *am = NULL;
    int n = final ? snprintf(final, fl, "c=biws,r=%.*s", (int)rl, r) : 0;
    am_len += (size_t)n;
    am = final ? malloc(am_len + 1) : NULL;
    if (!am) {
        free(final);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(am, am_len + 1, "%s,%.*s,%s", s->client_first_bare, (int)len, msg, final);
    uint8_t salted[ST_SCRAM_KEY_MAX], ckey[ST_SCRAM_KEY_MAX], stored[ST_SCRAM_KEY_MAX];
    uint8_t csig[ST_SCRAM_KEY_MAX], skey[ST_SCRAM_KEY_MAX], proof[ST_SCRAM_KEY_MAX];
    int rc = salt_password(s->mech, password, strlen(password), salt, saltn, (int32_t)iter, salted);
    rc = rc ? rc : hmac(s->mech, salted, kl, "Client Key", 10, ckey);
    rc = rc ? rc : digest(s->mech, ckey, (size_t)kl, stored);
    rc = rc ? rc : hmac(s->mech, stored, kl, am, am_len, csig);
    rc = rc ? rc : hmac(s->mech, salted, kl, "Server Key", 10, skey);
    rc = rc ? rc : hmac(s->mech, skey, kl, am, am_len, s->server_sig);
    for (int i = 0; i < kl; i++)
        proof[i] = ckey[i] ^ csig[i];
    OPENSSL_cleanse(salted, sizeof salted);
    OPENSSL_cleanse(ckey, sizeof ckey);
    OPENSSL_cleanse(skey, sizeof skey);
    free(am);
    if (rc) {
        free(final);
        snprintf(err, errlen, "SCRAM: the digest failed");
        return -1;
    }
    char proof64[ST_SCRAM_KEY_MAX * 2];
    st_b64_encode(proof, (size_t)kl, proof64);
    n += snprintf(final + n, ST_SCRAM_KEY_MAX * 2 + 8, ",p=%s", proof64);
    s->have_sig = true;
    *out = final;
    *outlen = (size_t)n;
    return 0;
}

int st_scram_client_verify(st_scram_client_t *s, const char *msg, size_t len, char *err,
                           size_t errlen)
{
    size_t vl = 0, el = 0;
    const char *e = attr(msg, len, 'e', &el), *v = attr(msg, len, 'v', &vl);
    if (e) {
        snprintf(err, errlen, "the server refused: %.*s", (int)(el > 200 ? 200 : el), e);
        return -1;
    }
    uint8_t sig[ST_SCRAM_KEY_MAX];
    int kl = st_scram_key_len(s->mech);
    if (!s->have_sig || !v || st_b64_decode(v, vl, sig, sizeof sig) != kl ||
        CRYPTO_memcmp(sig, s->server_sig, (size_t)kl) != 0) {
        snprintf(err, errlen, "server-final: the server's signature is wrong");
        return -1;
    }
    return 0;
}

void st_scram_client_fini(st_scram_client_t *s)
{
    free(s->client_first_bare);
    s->client_first_bare = NULL;
    OPENSSL_cleanse(s->server_sig, sizeof s->server_sig);
}
