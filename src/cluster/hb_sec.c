/*
 * hb_sec.c — signed heartbeats (hb_sec.h): the envelope, its signature and the checks.
 */
#include "cluster/hb_sec.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "base/buf.h"
#include "base/log.h"

#define ENV_FIXED   28
#define MAX_RETIRED 4

static const char *const refusal_names[ST_HB_NREFUSALS] = {
    [ST_HB_TAKEN] = "taken",         [ST_HB_UNSIGNED] = "unsigned",
    [ST_HB_MALFORMED] = "malformed", [ST_HB_CERTIFICATE] = "certificate",
    [ST_HB_SIGNATURE] = "signature", [ST_HB_STALE] = "stale",
    [ST_HB_HOST] = "host",           [ST_HB_REPLAY] = "replay",
};

static _Atomic uint64_t refused[ST_HB_NREFUSALS];
static _Atomic uint64_t nsigned;

/* What was last taken from one node id: its incarnation, the counter of its last heartbeat, and
 * the incarnations it has left behind (a replay of one would make it look restarted). */
typedef struct peer_seen {
    int32_t id;
    uint64_t incarnation;
    uint64_t counter;
    uint64_t retired[MAX_RETIRED];
    int nretired;
} peer_seen_t;

struct st_hb_sec {
    SSL_CTX *ctx;
    EVP_PKEY *key; /* ctx's, not our reference */
    bool verify_host;
    const st_config_t *cfg;
    uint8_t *certs; /* c times (2-byte length, DER): ours, ready to append */
    size_t certs_len;
    uint16_t ncerts;
    uint64_t counter;
    peer_seen_t *seen;
    int nseen;
    int64_t last_warn_ms[ST_HB_NREFUSALS];
};

const char *st_hb_refusal_name(st_hb_refusal_t r)
{
    return r >= 0 && r < ST_HB_NREFUSALS ? refusal_names[r] : "unknown";
}

uint64_t st_hb_sec_refused(st_hb_refusal_t r)
{
    return r > 0 && r < ST_HB_NREFUSALS ? atomic_load(&refused[r]) : 0;
}

uint64_t st_hb_sec_signed(void)
{
    return atomic_load(&nsigned);
}

static int add_cert(st_buf_t *b, X509 *x)
{
    int n = i2d_X509(x, NULL);
    if (n <= 0 || n > UINT16_MAX)
        return -EINVAL;
    uint8_t *p = st_buf_extend(b, 2 + (size_t)n);
    if (!p)
        return -ENOMEM;
    st_put_be16(p, (uint16_t)n);
    unsigned char *q = p + 2;
    i2d_X509(x, &q);
    return 0;
}

/* Takes ctx's key, certificate and chain (and a reference to ctx) in place of s's. */
static int take_identity(st_hb_sec_t *s, SSL_CTX *ctx, char *err, size_t errlen)
{
    X509 *leaf = SSL_CTX_get0_certificate(ctx);
    EVP_PKEY *key = SSL_CTX_get0_privatekey(ctx);
    if (!leaf || !key) {
        snprintf(err, errlen, "signed heartbeats need the listener's certificate and key");
        return -EINVAL;
    }
    st_buf_t b;
    st_buf_init(&b);
    int rc = add_cert(&b, leaf);
    STACK_OF(X509) *chain = NULL;
    SSL_CTX_get0_chain_certs(ctx, &chain);
    int n = 1;
    for (int i = 0; !rc && chain && i < sk_X509_num(chain) && n < ST_HB_SEC_MAX_CERTS; i++, n++)
        rc = add_cert(&b, sk_X509_value(chain, i));
    if (rc) {
        st_buf_fini(&b);
        snprintf(err, errlen, "signed heartbeats: cannot encode the certificate chain");
        return rc;
    }
    SSL_CTX_up_ref(ctx);
    SSL_CTX_free(s->ctx);
    s->ctx = ctx;
    s->key = key;
    free(s->certs);
    s->certs = st_buf_steal(&b, &s->certs_len);
    s->ncerts = (uint16_t)n;
    return 0;
}

st_hb_sec_t *st_hb_sec_new(SSL_CTX *ctx, bool verify_host, const st_config_t *cfg, char *err,
                           size_t errlen)
{
    st_hb_sec_t *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (take_identity(s, ctx, err, errlen)) {
        free(s);
        return NULL;
    }
    s->verify_host = verify_host;
    s->cfg = cfg;
    return s;
}

int st_hb_sec_rekey(st_hb_sec_t *s, SSL_CTX *ctx, char *err, size_t errlen)
{
    return take_identity(s, ctx, err, errlen);
}

void st_hb_sec_free(st_hb_sec_t *s)
{
    if (!s)
        return;
    SSL_CTX_free(s->ctx);
    free(s->certs);
    free(s->seen);
    free(s);
}

/* Ed25519 and Ed448 sign the message itself; the others a SHA-256 digest of it. */
static const EVP_MD *digest_for(EVP_PKEY *k)
{
    int id = EVP_PKEY_get_base_id(k);
    return id == EVP_PKEY_ED25519 || id == EVP_PKEY_ED448 ? NULL : EVP_sha256();
}

int st_hb_sec_seal(st_hb_sec_t *s, const char *json, size_t len, int64_t wall_ms, char **out,
                   size_t *outlen)
{
    if (!len || len > ST_HB_MAX_DATAGRAM)
        return -EINVAL;
    st_buf_t b;
    st_buf_init(&b);
    uint8_t *h = st_buf_extend(&b, ENV_FIXED);
    if (h) {
        memcpy(h, "STHB", 4);
        h[4] = 1;
        st_put_be16(h + 6, s->ncerts);
        st_put_be64(h + 8, (uint64_t)wall_ms);
        st_put_be64(h + 16, ++s->counter);
        st_put_be32(h + 24, (uint32_t)len);
    }
    st_buf_append(&b, json, len);
    st_buf_append(&b, s->certs, s->certs_len);
    if (b.oom) {
        st_buf_fini(&b);
        return -ENOMEM;
    }
    int rc = -EIO;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t siglen = 0;
    if (md && EVP_DigestSignInit(md, NULL, digest_for(s->key), NULL, s->key) == 1 &&
        EVP_DigestSign(md, NULL, &siglen, b.data, b.len) == 1 && siglen <= UINT16_MAX) {
        size_t at = b.len;
        uint8_t *p = st_buf_extend(&b, 2 + siglen);
        rc = -ENOMEM;
        if (p) {
            /* st_buf_extend may have moved the bytes signed */
            rc = EVP_DigestSign(md, b.data + at + 2, &siglen, b.data, at) == 1 ? 0 : -EIO;
            st_put_be16(b.data + at, (uint16_t)siglen);
            b.len = at + 2 + siglen; /* an ECDSA signature may be shorter than announced */
        }
    }
    EVP_MD_CTX_free(md);
    if (rc) {
        st_buf_fini(&b);
        return rc;
    }
    atomic_fetch_add(&nsigned, 1);
    *out = (char *)st_buf_steal(&b, outlen);
    return 0;
}

/* The parsed envelope: pointers into the datagram. */
typedef struct envelope {
    int64_t sent_ms;
    uint64_t counter;
    const uint8_t *json;
    size_t json_len;
    int ncerts;
    const uint8_t *cert[ST_HB_SEC_MAX_CERTS];
    size_t cert_len[ST_HB_SEC_MAX_CERTS];
    size_t signed_len; /* bytes covered by the signature */
    const uint8_t *sig;
    size_t sig_len;
} envelope_t;

static st_hb_refusal_t parse(const uint8_t *p, size_t len, envelope_t *e)
{
    if (len < 4 || memcmp(p, "STHB", 4) != 0)
        return ST_HB_UNSIGNED;
    if (len < ENV_FIXED || p[4] != 1)
        return ST_HB_MALFORMED;
    e->ncerts = st_be16(p + 6);
    e->sent_ms = (int64_t)st_be64(p + 8);
    e->counter = st_be64(p + 16);
    e->json_len = st_be32(p + 24);
    if (e->ncerts < 1 || e->ncerts > ST_HB_SEC_MAX_CERTS || !e->json_len ||
        e->json_len > len - ENV_FIXED)
        return ST_HB_MALFORMED;
    e->json = p + ENV_FIXED;
    size_t at = ENV_FIXED + e->json_len;
    for (int i = 0; i < e->ncerts; i++) {
        if (len - at < 2)
            return ST_HB_MALFORMED;
        size_t n = st_be16(p + at);
        if (!n || n > len - at - 2)
            return ST_HB_MALFORMED;
        e->cert[i] = p + at + 2;
        e->cert_len[i] = n;
        at += 2 + n;
    }
    if (len - at < 2)
        return ST_HB_MALFORMED;
    e->signed_len = at;
    e->sig_len = st_be16(p + at);
    if (!e->sig_len || e->sig_len != len - at - 2)
        return ST_HB_MALFORMED;
    e->sig = p + at + 2;
    return ST_HB_TAKEN;
}

/* The signer's certificate, verified (chain, dates) against the truststore: NULL when not. */
static X509 *verified_signer(st_hb_sec_t *s, const envelope_t *e, st_hb_refusal_t *why)
{
    *why = ST_HB_MALFORMED;
    X509 *leaf = NULL;
    STACK_OF(X509) *rest = sk_X509_new_null();
    for (int i = 0; rest && i < e->ncerts; i++) {
        const unsigned char *q = e->cert[i];
        X509 *x = d2i_X509(NULL, &q, (long)e->cert_len[i]);
        if (!x || q != e->cert[i] + e->cert_len[i]) {
            X509_free(x);
            goto out;
        }
        if (!i)
            leaf = x;
        else if (!sk_X509_push(rest, x))
            X509_free(x);
    }
    if (!leaf)
        goto out;
    *why = ST_HB_CERTIFICATE;
    X509_STORE_CTX *vc = X509_STORE_CTX_new();
    bool ok = vc && X509_STORE_CTX_init(vc, SSL_CTX_get_cert_store(s->ctx), leaf, rest) == 1 &&
              X509_verify_cert(vc) == 1;
    X509_STORE_CTX_free(vc);
    if (ok) {
        sk_X509_pop_free(rest, X509_free);
        *why = ST_HB_TAKEN;
        return leaf;
    }
out:
    X509_free(leaf);
    sk_X509_pop_free(rest, X509_free);
    return NULL;
}

static bool signature_ok(X509 *leaf, const uint8_t *msg, const envelope_t *e)
{
    EVP_PKEY *k = X509_get0_pubkey(leaf);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = k && md && EVP_DigestVerifyInit(md, NULL, digest_for(k), NULL, k) == 1 &&
              EVP_DigestVerify(md, e->sig, e->sig_len, msg, e->signed_len) == 1;
    EVP_MD_CTX_free(md);
    return ok;
}

/* host:port's host, into out (brackets of an IPv6 literal dropped). */
static void host_of(const char *addr, char *out, size_t outlen)
{
    const char *colon = strrchr(addr, ':');
    size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    snprintf(out, outlen, "%.*s", (int)(n < outlen ? n : outlen - 1), addr);
}

static bool host_ok(st_hb_sec_t *s, X509 *leaf, const st_hb_t *hb)
{
    char host[300];
    host_of(hb->raft, host, sizeof host);
    if (!*host)
        return false;
    for (int i = 0; i < s->cfg->nvoters; i++) {
        const struct st_config_voter *v = &s->cfg->voters[i];
        if (v->id != hb->id)
            continue;
        char want[300];
        snprintf(want, sizeof want, "%.255s:%d", v->host, v->port);
        if (strcmp(want, hb->raft) != 0)
            return false;
    }
    return X509_check_ip_asc(leaf, host, 0) == 1 || X509_check_host(leaf, host, 0, 0, NULL) == 1;
}

static bool fresh(st_hb_sec_t *s, const st_hb_t *hb, uint64_t counter)
{
    peer_seen_t *p = NULL;
    for (int i = 0; i < s->nseen && !p; i++)
        if (s->seen[i].id == hb->id)
            p = &s->seen[i];
    if (!p) {
        peer_seen_t *v = realloc(s->seen, (size_t)(s->nseen + 1) * sizeof *v);
        if (!v)
            return false;
        s->seen = v;
        p = &v[s->nseen++];
        *p = (peer_seen_t){.id = hb->id, .incarnation = hb->incarnation, .counter = counter};
        return true;
    }
    if (hb->incarnation == p->incarnation) {
        if (counter <= p->counter)
            return false;
        p->counter = counter;
        return true;
    }
    for (int i = 0; i < p->nretired; i++)
        if (p->retired[i] == hb->incarnation)
            return false;
    if (p->nretired == MAX_RETIRED)
        memmove(p->retired, p->retired + 1, (MAX_RETIRED - 1) * sizeof p->retired[0]);
    else
        p->nretired++;
    p->retired[p->nretired - 1] = p->incarnation;
    p->incarnation = hb->incarnation;
    p->counter = counter;
    return true;
}

static st_hb_refusal_t refuse(st_hb_sec_t *s, st_hb_refusal_t r, int64_t wall_ms)
{
    atomic_fetch_add(&refused[r], 1);
    /* one line per reason a minute: a flood of forgeries must not flood the log */
    if (wall_ms - s->last_warn_ms[r] >= 60000) {
        s->last_warn_ms[r] = wall_ms;
        ST_WARN("metadata: refused a heartbeat (%s); strata_controller_heartbeat_refused_total "
                "counts them",
                st_hb_refusal_name(r));
    }
    return r;
}

st_hb_refusal_t st_hb_sec_open(st_hb_sec_t *s, const void *buf, size_t len, int64_t wall_ms,
                               st_hb_t *hb)
{
    envelope_t e;
    st_hb_refusal_t r = parse(buf, len, &e);
    if (r)
        return refuse(s, r, wall_ms);
    X509 *leaf = verified_signer(s, &e, &r);
    if (!leaf)
        return refuse(s, r, wall_ms);
    r = ST_HB_TAKEN;
    if (!signature_ok(leaf, buf, &e))
        r = ST_HB_SIGNATURE;
    else if (e.sent_ms < wall_ms - ST_HB_SEC_SKEW_MS || e.sent_ms > wall_ms + ST_HB_SEC_SKEW_MS)
        r = ST_HB_STALE;
    else if (st_hb_decode(e.json, e.json_len, hb))
        r = ST_HB_MALFORMED;
    else if (s->verify_host && !host_ok(s, leaf, hb))
        r = ST_HB_HOST;
    else if (!fresh(s, hb, e.counter))
        r = ST_HB_REPLAY;
    if (r >= ST_HB_HOST)
        st_hb_fini(hb);
    X509_free(leaf);
    return r ? refuse(s, r, wall_ms) : ST_HB_TAKEN;
}
