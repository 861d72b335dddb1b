/*
 * fuzz_hb_sec.c — received datagrams on a TLS quorum (cluster/hb_sec.h): st_hb_sec_open must
 * never crash, leak or trip a sanitizer, and must take nothing it did not get from a signer.
 * Input byte 0 even: the rest is the datagram as is. Odd: a heartbeat this node signed, with
 * the rest of the input as (position, xor) pairs applied to it — which reaches the certificate,
 * signature and heartbeat checks; a patched envelope must be refused, an unpatched one taken
 * exactly once.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/log.h"
#include "cluster/hb_sec.h"
#include "cluster/heartbeat.h"

static void require(int cond)
{
    if (!cond)
        abort();
}

static const st_config_t no_voters;

/* A context whose self-signed certificate (EC P-256, CN 127.0.0.1) is its own trust anchor. */
static SSL_CTX *self_signed(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400 * 365);
    X509_set_pubkey(x, k);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               (const unsigned char *)"127.0.0.1", -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(x));
    X509_sign(x, k, EVP_sha256());
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    require(SSL_CTX_use_certificate(ctx, x) == 1 && SSL_CTX_use_PrivateKey(ctx, k) == 1);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), x);
    X509_free(x);
    EVP_PKEY_free(k);
    return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static st_hb_sec_t *s;
    static uint64_t inc;
    if (!s) {
        st_log_set_level(ST_LOG_ERROR);
        SSL_CTX *ctx = self_signed();
        char err[200];
        s = st_hb_sec_new(ctx, false, &no_voters, err, sizeof err);
        SSL_CTX_free(ctx);
        require(s != NULL);
    }
    const int64_t now = 1800000000000LL;
    st_hb_t hb;
    if (!size || !(data[0] & 1)) {
        if (st_hb_sec_open(s, size ? data + 1 : data, size ? size - 1 : 0, now, &hb) == ST_HB_TAKEN)
            abort(); /* nothing but this node signs, and it signed nothing here */
        return 0;
    }
    /* a fresh incarnation each run, so an unpatched envelope is never a replay */
    st_hb_t mine = {.id = 3, .incarnation = ++inc, .port = 9092};
    snprintf(mine.host, sizeof mine.host, "127.0.0.1");
    snprintf(mine.raft, sizeof mine.raft, "127.0.0.1:9093");
    char *json = NULL, *env = NULL;
    size_t jl, el;
    require(st_hb_encode(&mine, &json, &jl) == 0);
    require(st_hb_sec_seal(s, json, jl, now, &env, &el) == 0);
    free(json);
    int changed = 0;
    for (size_t i = 1; i + 1 < size; i += 2) {
        size_t at = ((size_t)data[i] * 7919u) % el;
        changed |= data[i + 1] != 0;
        env[at] = (char)(env[at] ^ data[i + 1]);
    }
    st_hb_refusal_t r = st_hb_sec_open(s, env, el, now, &hb);
    if (r == ST_HB_TAKEN) {
        st_hb_fini(&hb);
        /* two patches may cancel out; a taken envelope must then be the one signed */
        require(!changed || hb.incarnation == inc);
    }
    free(env);
    return 0;
}
