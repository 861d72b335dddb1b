/*
 * testcert.h — certificates made in memory for the unit tests that run TLS (net/test_tls.c,
 * cluster/test_tls_transport.c): an EC P-256 key and an X.509 certificate signed by a test CA
 * (or self-signed, a CA), both also as PEM strings. Include after cmocka.h.
 */
#ifndef ST_TESTS_TESTCERT_H
#define ST_TESTS_TESTCERT_H

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    EVP_PKEY *key;
    X509 *cert;
    char *cert_pem, *key_pem;
} cred_t;

static char *pem_of(int (*w)(BIO *, void *), void *obj)
{
    BIO *b = BIO_new(BIO_s_mem());
    assert_int_equal(w(b, obj), 1);
    char *d;
    long n = BIO_get_mem_data(b, &d);
    char *s = malloc((size_t)n + 1);
    memcpy(s, d, (size_t)n);
    s[n] = 0;
    BIO_free(b);
    return s;
}

static int w_cert(BIO *b, void *x)
{
    return PEM_write_bio_X509(b, x);
}

static int w_key(BIO *b, void *k)
{
    return PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
}

/* A certificate for subject "CN=cn,O=org", signed by ca (NULL: self-signed, a CA). */
static void make_cred(cred_t *c, const char *cn, const char *org, const cred_t *ca, long serial)
{
    c->key = EVP_EC_gen("P-256");
    assert_non_null(c->key);
    c->cert = X509_new();
    X509_set_version(c->cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(c->cert), serial);
    X509_gmtime_adj(X509_getm_notBefore(c->cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(c->cert), 86400);
    X509_NAME *n = X509_get_subject_name(c->cert);
    X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC, (const unsigned char *)org, -1, -1, 0);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(c->cert, ca ? X509_get_subject_name(ca->cert) : n);
    X509_set_pubkey(c->cert, c->key);
    if (!ca) {
        X509V3_CTX v;
        X509V3_set_ctx(&v, c->cert, c->cert, NULL, NULL, 0);
        X509_EXTENSION *e =
            X509V3_EXT_conf_nid(NULL, &v, NID_basic_constraints, "critical,CA:TRUE");
        X509_add_ext(c->cert, e, -1);
        X509_EXTENSION_free(e);
    }
    assert_true(X509_sign(c->cert, ca ? ca->key : c->key, EVP_sha256()) > 0);
    c->cert_pem = pem_of(w_cert, c->cert);
    c->key_pem = pem_of(w_key, c->key);
}

static void free_cred(cred_t *c)
{
    EVP_PKEY_free(c->key);
    X509_free(c->cert);
    free(c->cert_pem);
    free(c->key_pem);
}

#endif
