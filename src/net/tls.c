/*
 * tls.c — the TLS server context of a listener (certificates, reload) and the TLS transport:
 * OpenSSL over memory BIOs, its ciphertext moved by the loop (tls.h).
 *
 * A transport has the caller's operations (at most one handshake or recv, one send or
 * writable wait: transport.h) and two of its own on the socket: one raw recv into nrbuf,
 * whose bytes go into the read BIO, and one raw send of obuf, filled from the write BIO
 * only while no raw send is in flight (the kernel may still be reading obuf). Every event
 * (a raw completion, a new caller operation, a cancel, the handshake timer) runs
 * tls_progress, which drives OpenSSL as far as it goes, completes what it can and starts
 * the raw operations still needed. Caller operations always complete from the loop (a
 * deferred task or a raw completion), never from inside the call that started them.
 *
 * Invariants:
 *   1. obuf[opos..olen) is the ciphertext of the raw send in flight or next to go; bytes
 *      still in wbio come after it.
 *   2. a caller's send completes only once its ciphertext left (obuf and wbio empty), so
 *      buffered ciphertext is bounded by one send's worth (ST_TLS_SEND_MAX plus records).
 *   3. the transport is freed once close was called and no raw operation, deferred task or
 *      tls_progress frame is left.
 */
#include "net/tls.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"

#define ST_TLS_NRBUF    (64 * 1024) /* ciphertext per raw recv: several records */
#define ST_TLS_SEND_MAX (256 * 1024)
#define ST_TLS_NAME_MAX 256

/* ---- the server context ---- */

typedef struct {
    const char *path; /* s->keystore_location or s->truststore_location; NULL: not a file */
    bool seen;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} st_tls_stamp_t;

struct st_tls_server {
    char name[64];
    /* Copies of the settings (the strings live in `strings`). */
    st_tls_settings_t set;
    char *strings[16];
    int nstrings;
    pthread_mutex_t mu;
    SSL_CTX *ctx;            /* the current context, under mu; each SSL holds its own reference */
    pthread_mutex_t load_mu; /* one reload at a time (stamps) */
    st_tls_stamp_t stamps[2];
    _Atomic int64_t next_check_ns;
    _Atomic uint64_t reloads;
    bool client; /* built by st_tls_client_ctx (st_tls_client_create), not as a listener's */
};

static int64_t st_tls_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool st_set(const char *s)
{
    return s && *s;
}

/* The last OpenSSL error, as a short string (or `def`). */
static const char *st_tls_errstr(char *buf, size_t len, const char *def)
{
    unsigned long e = ERR_peek_last_error();
    if (!e) {
        snprintf(buf, len, "%s", def);
        return buf;
    }
    ERR_error_string_n(e, buf, len);
    ERR_clear_error();
    return buf;
}

__attribute__((format(printf, 3, 4))) static int st_tls_fail(char *err, size_t errlen,
                                                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    ERR_clear_error();
    return ST_E_CONFIG;
}

/* Reads a whole file into a memory BIO. */
static BIO *st_tls_read_file(const char *path, const char *key, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        st_tls_fail(err, errlen, "%s=%s: cannot open: %s", key, path, strerror(errno));
        return NULL;
    }
    BIO *b = BIO_new(BIO_s_mem());
    char buf[8192];
    size_t n;
    while (b && (n = fread(buf, 1, sizeof buf, f)) > 0)
        BIO_write(b, buf, (int)n);
    bool bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        BIO_free(b);
        st_tls_fail(err, errlen, "%s=%s: cannot read", key, path);
        return NULL;
    }
    return b;
}

/* Inline PEM in a properties file may carry its line breaks as "\n". */
static BIO *st_tls_inline_bio(const char *pem)
{
    size_t n = strlen(pem);
    char *copy = malloc(n + 1);
    if (!copy)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (pem[i] == '\\' && pem[i + 1] == 'n') {
            copy[j++] = '\n';
            i++;
        } else {
            copy[j++] = pem[i];
        }
    }
    BIO *b = BIO_new(BIO_s_mem());
    if (b)
        BIO_write(b, copy, (int)j);
    free(copy);
    return b;
}

static int st_tls_pem_pass(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    const char *p = u;
    if (!p)
        return -1;
    int n = (int)strlen(p);
    if (n > size)
        n = size;
    memcpy(buf, p, (size_t)n);
    return n;
}

/* Certificate chain and key from PEM: certs in `chain` (first: the leaf), key in `key`. */
static int st_tls_use_pem(SSL_CTX *ctx, BIO *chain, BIO *key, const char *pass, const char *what,
                          char *err, size_t errlen)
{
    char e[256];
    X509 *leaf = PEM_read_bio_X509(chain, NULL, NULL, NULL);
    if (!leaf)
        return st_tls_fail(err, errlen, "%s: no PEM certificate (%s)", what,
                           st_tls_errstr(e, sizeof e, "none found"));
    int rc = SSL_CTX_use_certificate(ctx, leaf) == 1 ? 0 : -1;
    X509_free(leaf);
    if (rc)
        return st_tls_fail(err, errlen, "%s: certificate refused (%s)", what,
                           st_tls_errstr(e, sizeof e, "?"));
    X509 *x;
    while ((x = PEM_read_bio_X509(chain, NULL, NULL, NULL)))
        if (SSL_CTX_add0_chain_cert(ctx, x) != 1)
            X509_free(x);
    ERR_clear_error(); /* the end of the chain reads as an error */
    char *kd;
    long kn = BIO_get_mem_data(key, &kd);
    bool encrypted = kn > 0 && memmem(kd, (size_t)kn, "ENCRYPTED", 9) != NULL;
    EVP_PKEY *pk = PEM_read_bio_PrivateKey(key, NULL, st_tls_pem_pass, (void *)pass);
    if (!pk) {
        if (encrypted)
            return st_tls_fail(err, errlen,
                               "%s: cannot decrypt the private key: wrong or missing "
                               "ssl.key.password",
                               what);
        return st_tls_fail(err, errlen, "%s: no PEM private key (%s)", what,
                           st_tls_errstr(e, sizeof e, "none found"));
    }
    rc = SSL_CTX_use_PrivateKey(ctx, pk) == 1 ? 0 : -1;
    EVP_PKEY_free(pk);
    if (rc || SSL_CTX_check_private_key(ctx) != 1)
        return st_tls_fail(err, errlen, "%s: the private key does not match the certificate", what);
    return 0;
}

static PKCS12 *st_tls_p12(BIO *b, const char *pass, const char *key, const char *path, char *err,
                          size_t errlen)
{
    PKCS12 *p12 = d2i_PKCS12_bio(b, NULL);
    if (!p12) {
        st_tls_fail(err, errlen, "%s=%s: not a PKCS12 file", key, path);
        return NULL;
    }
    if (!PKCS12_verify_mac(p12, pass ? pass : "", -1) &&
        !(pass == NULL && PKCS12_verify_mac(p12, NULL, 0))) {
        PKCS12_free(p12);
        st_tls_fail(err, errlen, "%s=%s: wrong password (the PKCS12 MAC does not verify)", key,
                    path);
        return NULL;
    }
    return p12;
}

static int st_tls_load_keystore(const st_tls_settings_t *s, SSL_CTX *ctx, char *err, size_t errlen)
{
    const char *type = st_set(s->keystore_type) ? s->keystore_type : "PEM";
    bool pem = strcasecmp(type, "PEM") == 0, p12 = strcasecmp(type, "PKCS12") == 0;
    if (!pem && !p12)
        return st_tls_fail(err, errlen,
                           "ssl.keystore.type=%s is not supported (PEM or PKCS12; convert a JKS "
                           "keystore with keytool -importkeystore -deststoretype PKCS12)",
                           type);
    if (st_set(s->keystore_certificate_chain) || st_set(s->keystore_key)) {
        if (!pem)
            return st_tls_fail(err, errlen,
                               "ssl.keystore.certificate.chain and ssl.keystore.key need "
                               "ssl.keystore.type=PEM");
        if (!st_set(s->keystore_certificate_chain) || !st_set(s->keystore_key))
            return st_tls_fail(err, errlen,
                               "ssl.keystore.certificate.chain and ssl.keystore.key go together");
        if (st_set(s->keystore_location))
            return st_tls_fail(err, errlen,
                               "ssl.keystore.location and ssl.keystore.certificate.chain both "
                               "set: use one");
        BIO *c = st_tls_inline_bio(s->keystore_certificate_chain);
        BIO *k = st_tls_inline_bio(s->keystore_key);
        int rc = c && k
                     ? st_tls_use_pem(ctx, c, k, s->key_password, "ssl.keystore.key", err, errlen)
                     : -ENOMEM;
        BIO_free(c);
        BIO_free(k);
        return rc;
    }
    if (!st_set(s->keystore_location))
        return st_tls_fail(err, errlen,
                           "an SSL listener needs a certificate: set ssl.keystore.location (or "
                           "ssl.keystore.certificate.chain and ssl.keystore.key)");
    BIO *b = st_tls_read_file(s->keystore_location, "ssl.keystore.location", err, errlen);
    if (!b)
        return ST_E_CONFIG;
    char what[600];
    snprintf(what, sizeof what, "ssl.keystore.location=%s", s->keystore_location);
    int rc;
    if (pem) {
        /* Kafka's PEM keystore: the key and the chain in one file. */
        BIO *k = BIO_new(BIO_s_mem());
        char *data;
        long n = BIO_get_mem_data(b, &data);
        if (k)
            BIO_write(k, data, (int)n);
        const char *pass = st_set(s->key_password) ? s->key_password : s->keystore_password;
        rc = k ? st_tls_use_pem(ctx, b, k, st_set(pass) ? pass : NULL, what, err, errlen) : -ENOMEM;
        BIO_free(k);
    } else {
        PKCS12 *p = st_tls_p12(b, s->keystore_password, "ssl.keystore.location",
                               s->keystore_location, err, errlen);
        rc = ST_E_CONFIG;
        if (p) {
            EVP_PKEY *pk = NULL;
            X509 *cert = NULL;
            STACK_OF(X509) *ca = NULL;
            const char *pass = s->keystore_password ? s->keystore_password : "";
            if (!PKCS12_parse(p, pass, &pk, &cert, &ca) || !pk || !cert) {
                st_tls_fail(err, errlen, "%s: no private key and certificate in it", what);
            } else if (SSL_CTX_use_certificate(ctx, cert) != 1 ||
                       SSL_CTX_use_PrivateKey(ctx, pk) != 1 ||
                       SSL_CTX_check_private_key(ctx) != 1) {
                st_tls_fail(err, errlen, "%s: the private key does not match the certificate",
                            what);
            } else {
                rc = 0;
                for (int i = 0; ca && i < sk_X509_num(ca); i++)
                    SSL_CTX_add1_chain_cert(ctx, sk_X509_value(ca, i));
            }
            EVP_PKEY_free(pk);
            X509_free(cert);
            sk_X509_pop_free(ca, X509_free);
            PKCS12_free(p);
        }
    }
    BIO_free(b);
    return rc;
}

static int st_tls_add_ca(SSL_CTX *ctx, X509 *x)
{
    X509_STORE *st = SSL_CTX_get_cert_store(ctx);
    if (X509_STORE_add_cert(st, x) != 1)
        ERR_clear_error(); /* a duplicate */
    SSL_CTX_add_client_CA(ctx, x);
    return 0;
}

static int st_tls_load_truststore(const st_tls_settings_t *s, SSL_CTX *ctx, char *err,
                                  size_t errlen)
{
    bool file = st_set(s->truststore_location), inl = st_set(s->truststore_certificates);
    if (!file && !inl)
        return 0;
    const char *type = st_set(s->truststore_type) ? s->truststore_type : "PEM";
    bool pem = strcasecmp(type, "PEM") == 0, p12 = strcasecmp(type, "PKCS12") == 0;
    if (!pem && !p12)
        return st_tls_fail(err, errlen, "ssl.truststore.type=%s is not supported (PEM or PKCS12)",
                           type);
    BIO *b = file ? st_tls_read_file(s->truststore_location, "ssl.truststore.location", err, errlen)
                  : st_tls_inline_bio(s->truststore_certificates);
    if (!b)
        return ST_E_CONFIG;
    const char *what = file ? s->truststore_location : "(inline)";
    int n = 0, rc = 0;
    if (pem || inl) {
        X509 *x;
        while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
            st_tls_add_ca(ctx, x);
            X509_free(x);
            n++;
        }
        ERR_clear_error();
    } else {
        PKCS12 *p = st_tls_p12(b, s->truststore_password, "ssl.truststore.location",
                               s->truststore_location, err, errlen);
        if (!p) {
            rc = ST_E_CONFIG;
        } else {
            EVP_PKEY *pk = NULL;
            X509 *cert = NULL;
            STACK_OF(X509) *ca = NULL;
            const char *pass = s->truststore_password ? s->truststore_password : "";
            if (PKCS12_parse(p, pass, &pk, &cert, &ca)) {
                if (cert) {
                    st_tls_add_ca(ctx, cert);
                    n++;
                }
                for (int i = 0; ca && i < sk_X509_num(ca); i++, n++)
                    st_tls_add_ca(ctx, sk_X509_value(ca, i));
            }
            EVP_PKEY_free(pk);
            X509_free(cert);
            sk_X509_pop_free(ca, X509_free);
            PKCS12_free(p);
        }
    }
    BIO_free(b);
    if (!rc && n == 0)
        rc = st_tls_fail(err, errlen, "ssl.truststore.location=%s: no certificate in it", what);
    return rc;
}

static int st_tls_proto_version(const char *s, size_t len)
{
    if (len == 7 && strncasecmp(s, "TLSv1.2", 7) == 0)
        return TLS1_2_VERSION;
    if (len == 7 && strncasecmp(s, "TLSv1.3", 7) == 0)
        return TLS1_3_VERSION;
    return -1;
}

static bool st_tls13_suite(const char *n)
{
    static const char *const v[] = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                    "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                                    "TLS_AES_128_CCM_8_SHA256"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (strcmp(n, v[i]) == 0)
            return true;
    return false;
}

static int st_tls_protocols_ciphers(const st_tls_settings_t *s, SSL_CTX *ctx, char *err,
                                    size_t errlen)
{
    const char *list = st_set(s->enabled_protocols) ? s->enabled_protocols : "TLSv1.2,TLSv1.3";
    int lo = 0, hi = 0;
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t n = strcspn(p, ", ");
        if (!n)
            break;
        int v = st_tls_proto_version(p, n);
        if (v < 0)
            return st_tls_fail(err, errlen,
                               "ssl.enabled.protocols: '%.*s' is not supported (TLSv1.2, TLSv1.3)",
                               (int)n, p);
        if (!lo || v < lo)
            lo = v;
        if (v > hi)
            hi = v;
        p += n;
    }
    if (!lo)
        return st_tls_fail(err, errlen, "ssl.enabled.protocols is empty");
    SSL_CTX_set_min_proto_version(ctx, lo);
    SSL_CTX_set_max_proto_version(ctx, hi);
    if (!st_set(s->cipher_suites))
        return 0;
    /* Kafka (Java) names suites the IANA way; OpenSSL's TLS 1.2 list wants its own names. */
    char v12[2048] = "", v13[512] = "";
    char *copy = strdup(s->cipher_suites), *save = NULL;
    if (!copy)
        return -ENOMEM;
    for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        char *dst = st_tls13_suite(tok) ? v13 : v12;
        size_t cap = dst == v13 ? sizeof v13 : sizeof v12;
        const char *name = tok;
        if (dst == v12) {
            const char *o = OPENSSL_cipher_name(tok);
            if (o && strcmp(o, "(NONE)") != 0)
                name = o;
        }
        size_t l = strlen(dst);
        snprintf(dst + l, cap - l, "%s%s", l ? ":" : "", name);
    }
    free(copy);
    if (*v12 && SSL_CTX_set_cipher_list(ctx, v12) != 1)
        return st_tls_fail(err, errlen, "ssl.cipher.suites=%s: no TLS 1.2 suite OpenSSL knows",
                           s->cipher_suites);
    if (*v13 && SSL_CTX_set_ciphersuites(ctx, v13) != 1)
        return st_tls_fail(err, errlen, "ssl.cipher.suites=%s: bad TLS 1.3 suites",
                           s->cipher_suites);
    if (*v13 && !*v12 && lo < TLS1_3_VERSION)
        SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION); /* only 1.3 suites named */
    if (*v12 && !*v13)
        SSL_CTX_set_ciphersuites(ctx, ""); /* only 1.2 suites named: no 1.3 */
    return 0;
}

/* Builds a context from the settings (reading the files now). */
static SSL_CTX *st_tls_build(const st_tls_settings_t *s, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        st_tls_fail(err, errlen, "cannot create an OpenSSL context");
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"strata", 6);
    const char *ca = st_set(s->client_auth) ? s->client_auth : "none";
    int mode;
    if (strcasecmp(ca, "none") == 0)
        mode = SSL_VERIFY_NONE;
    else if (strcasecmp(ca, "requested") == 0)
        mode = SSL_VERIFY_PEER;
    else if (strcasecmp(ca, "required") == 0)
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    else {
        st_tls_fail(err, errlen, "ssl.client.auth=%s: expected none, requested or required", ca);
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (mode != SSL_VERIFY_NONE && !st_set(s->truststore_location) &&
        !st_set(s->truststore_certificates)) {
        st_tls_fail(err, errlen,
                    "ssl.client.auth=%s needs ssl.truststore.location: the CAs client "
                    "certificates are checked against",
                    ca);
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, mode, NULL);
    if (st_tls_protocols_ciphers(s, ctx, err, errlen) ||
        st_tls_load_keystore(s, ctx, err, errlen) || st_tls_load_truststore(s, ctx, err, errlen)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

void st_tls_settings_get(st_tls_settings_t *s, st_tls_get_fn get, void *arg)
{
    static const struct {
        const char *key;
        size_t off;
    } strs[] = {
#define ST_TLS_KEY(k, f) {k, offsetof(st_tls_settings_t, f)}
        ST_TLS_KEY("ssl.keystore.type", keystore_type),
        ST_TLS_KEY("ssl.keystore.location", keystore_location),
        ST_TLS_KEY("ssl.keystore.password", keystore_password),
        ST_TLS_KEY("ssl.key.password", key_password),
        ST_TLS_KEY("ssl.keystore.certificate.chain", keystore_certificate_chain),
        ST_TLS_KEY("ssl.keystore.key", keystore_key),
        ST_TLS_KEY("ssl.truststore.type", truststore_type),
        ST_TLS_KEY("ssl.truststore.location", truststore_location),
        ST_TLS_KEY("ssl.truststore.password", truststore_password),
        ST_TLS_KEY("ssl.truststore.certificates", truststore_certificates),
        ST_TLS_KEY("ssl.client.auth", client_auth),
        ST_TLS_KEY("ssl.enabled.protocols", enabled_protocols),
        ST_TLS_KEY("ssl.cipher.suites", cipher_suites),
        ST_TLS_KEY("ssl.principal.mapping.rules", principal_mapping_rules),
#undef ST_TLS_KEY
    };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        const char *v = get(arg, strs[i].key);
        *(const char **)((char *)s + strs[i].off) = v ? v : "";
    }
    static const struct {
        const char *key;
        size_t off;
    } ints[] = {
        {"ssl.handshake.timeout.ms", offsetof(st_tls_settings_t, handshake_timeout_ms)},
        {"ssl.reload.check.ms", offsetof(st_tls_settings_t, reload_check_ms)},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        const char *v = get(arg, ints[i].key);
        char *end;
        if (!v || !*v)
            continue;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        if (!errno && *end == 0 && n >= 0)
            *(int64_t *)((char *)s + ints[i].off) = n;
    }
}

SSL_CTX *st_tls_client_ctx(const st_tls_settings_t *s, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_method()); /* both sides: tls.h */
    if (!ctx) {
        st_tls_fail(err, errlen, "cannot create an OpenSSL context");
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    bool keystore = st_set(s->keystore_location) || st_set(s->keystore_certificate_chain) ||
                    st_set(s->keystore_key);
    bool trust = st_set(s->truststore_location) || st_set(s->truststore_certificates);
    if (st_tls_protocols_ciphers(s, ctx, err, errlen) ||
        (keystore && st_tls_load_keystore(s, ctx, err, errlen)) ||
        (trust ? st_tls_load_truststore(s, ctx, err, errlen)
               : (SSL_CTX_set_default_verify_paths(ctx) == 1
                      ? 0
                      : st_tls_fail(err, errlen, "cannot load OpenSSL's default CAs")))) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

static void st_tls_stamp(st_tls_stamp_t *st)
{
    struct stat sb;
    st->seen = st->path && stat(st->path, &sb) == 0;
    if (st->seen) {
        st->dev = sb.st_dev;
        st->ino = sb.st_ino;
        st->size = sb.st_size;
        st->mtime = sb.st_mtim;
    }
}

static bool st_tls_stamp_changed(const st_tls_stamp_t *a, const st_tls_stamp_t *b)
{
    return a->seen != b->seen ||
           (a->seen &&
            (a->dev != b->dev || a->ino != b->ino || a->size != b->size ||
             a->mtime.tv_sec != b->mtime.tv_sec || a->mtime.tv_nsec != b->mtime.tv_nsec));
}

static const char *st_tls_keep(st_tls_server_t *s, const char *v)
{
    if (!v || s->nstrings == (int)(sizeof s->strings / sizeof s->strings[0]))
        return NULL;
    char *c = strdup(v);
    if (c)
        s->strings[s->nstrings++] = c;
    return c;
}

static SSL_CTX *st_tls_make(const st_tls_server_t *s, char *err, size_t errlen)
{
    return s->client ? st_tls_client_ctx(&s->set, err, errlen) : st_tls_build(&s->set, err, errlen);
}

static int st_tls_create(const st_tls_settings_t *set, const char *name, bool client,
                         st_tls_server_t **out, char *err, size_t errlen)
{
    st_tls_server_t *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->set = *set;
    s->set.keystore_type = st_tls_keep(s, set->keystore_type);
    s->set.keystore_location = st_tls_keep(s, set->keystore_location);
    s->set.keystore_password = st_tls_keep(s, set->keystore_password);
    s->set.key_password = st_tls_keep(s, set->key_password);
    s->set.keystore_certificate_chain = st_tls_keep(s, set->keystore_certificate_chain);
    s->set.keystore_key = st_tls_keep(s, set->keystore_key);
    s->set.truststore_type = st_tls_keep(s, set->truststore_type);
    s->set.truststore_location = st_tls_keep(s, set->truststore_location);
    s->set.truststore_password = st_tls_keep(s, set->truststore_password);
    s->set.truststore_certificates = st_tls_keep(s, set->truststore_certificates);
    s->set.client_auth = st_tls_keep(s, set->client_auth);
    s->set.enabled_protocols = st_tls_keep(s, set->enabled_protocols);
    s->set.cipher_suites = st_tls_keep(s, set->cipher_suites);
    s->set.principal_mapping_rules = st_tls_keep(s, set->principal_mapping_rules);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->load_mu, NULL);
    s->stamps[0].path = st_set(s->set.keystore_location) ? s->set.keystore_location : NULL;
    s->stamps[1].path = st_set(s->set.truststore_location) ? s->set.truststore_location : NULL;
    for (int i = 0; i < 2; i++)
        st_tls_stamp(&s->stamps[i]);
    char perr[512];
    if (st_set(s->set.principal_mapping_rules) &&
        st_tls_map_principal(s->set.principal_mapping_rules, "CN=x", perr, sizeof perr) == -2) {
        st_tls_fail(err, errlen, "bad ssl.principal.mapping.rules: %s",
                    s->set.principal_mapping_rules);
        st_tls_server_destroy(s);
        return ST_E_CONFIG;
    }
    s->client = client;
    s->ctx = st_tls_make(s, err, errlen);
    if (!s->ctx) {
        st_tls_server_destroy(s);
        return ST_E_CONFIG;
    }
    atomic_store(&s->next_check_ns, st_tls_now_ns() + s->set.reload_check_ms * 1000000);
    *out = s;
    return 0;
}

int st_tls_server_create(const st_tls_settings_t *set, const char *name, st_tls_server_t **out,
                         char *err, size_t errlen)
{
    return st_tls_create(set, name, false, out, err, errlen);
}

int st_tls_client_create(const st_tls_settings_t *set, const char *name, st_tls_server_t **out,
                         char *err, size_t errlen)
{
    return st_tls_create(set, name, true, out, err, errlen);
}

void st_tls_server_destroy(st_tls_server_t *s)
{
    if (!s)
        return;
    SSL_CTX_free(s->ctx);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->load_mu);
    for (int i = 0; i < s->nstrings; i++)
        free(s->strings[i]);
    free(s);
}

uint64_t st_tls_server_reloads(const st_tls_server_t *s)
{
    return atomic_load(&s->reloads);
}

static int st_tls_reload_locked(st_tls_server_t *s, bool force)
{
    st_tls_stamp_t now[2] = {s->stamps[0], s->stamps[1]};
    bool changed = force;
    for (int i = 0; i < 2; i++) {
        st_tls_stamp(&now[i]);
        changed |= st_tls_stamp_changed(&now[i], &s->stamps[i]);
    }
    if (!changed)
        return 0;
    s->stamps[0] = now[0];
    s->stamps[1] = now[1];
    char err[512];
    SSL_CTX *ctx = st_tls_make(s, err, sizeof err);
    if (!ctx) {
        /* Often a file caught halfway through its replacement: the next change retries. */
        ST_WARN("%s%s: certificate files changed but do not load, keeping the old: %s",
                s->client ? "" : "listener ", s->name, err);
        return -EINVAL;
    }
    pthread_mutex_lock(&s->mu);
    SSL_CTX *old = s->ctx;
    s->ctx = ctx;
    pthread_mutex_unlock(&s->mu);
    SSL_CTX_free(old); /* connections made with it hold their own references */
    atomic_fetch_add(&s->reloads, 1);
    ST_INFO("%s%s: certificates reloaded; new connections use them", s->client ? "" : "listener ",
            s->name);
    return 1;
}

int st_tls_server_reload(st_tls_server_t *s, bool force)
{
    pthread_mutex_lock(&s->load_mu);
    int rc = st_tls_reload_locked(s, force);
    pthread_mutex_unlock(&s->load_mu);
    return rc;
}

/* At most once per reload_check_ms, from whichever shard accepts first: stat the files and
 * reload them if they changed. Other shards never wait for it. */
static void st_tls_maybe_reload(st_tls_server_t *s)
{
    if (s->set.reload_check_ms <= 0)
        return;
    int64_t now = st_tls_now_ns(), due = atomic_load(&s->next_check_ns);
    if (now < due || !atomic_compare_exchange_strong(&s->next_check_ns, &due,
                                                     now + s->set.reload_check_ms * 1000000))
        return;
    if (pthread_mutex_trylock(&s->load_mu) != 0)
        return;
    st_tls_reload_locked(s, false);
    pthread_mutex_unlock(&s->load_mu);
}

SSL_CTX *st_tls_server_ctx(st_tls_server_t *s)
{
    st_tls_maybe_reload(s);
    pthread_mutex_lock(&s->mu);
    SSL_CTX *ctx = s->ctx;
    SSL_CTX_up_ref(ctx);
    pthread_mutex_unlock(&s->mu);
    return ctx;
}

/* ---- principal mapping (Kafka's ssl.principal.mapping.rules) ---- */

/* One rule "RULE:pattern/replacement/[LU]" at *p: applies it to dn. 1 matched (out set),
 * 0 no match, -2 malformed. Patterns are POSIX extended regular expressions, matched against
 * the whole DN; $1.. in the replacement name the groups. */
static int st_tls_rule(const char **pp, const char *dn, char *out, size_t outlen)
{
    const char *p = *pp + 5; /* after "RULE:" */
    const char *slash1 = strchr(p, '/');
    if (!slash1)
        return -2;
    const char *slash2 = strchr(slash1 + 1, '/');
    if (!slash2)
        return -2;
    const char *end = slash2 + 1;
    char fold = 0;
    if (*end == 'L' || *end == 'U')
        fold = *end++;
    while (*end == ' ')
        end++;
    if (*end && *end != ',')
        return -2;
    *pp = *end ? end + 1 : end;
    char pat[512], rep[512];
    size_t pl = (size_t)(slash1 - p), rl = (size_t)(slash2 - slash1 - 1);
    if (pl >= sizeof pat || rl >= sizeof rep)
        return -2;
    memcpy(pat, p, pl);
    pat[pl] = 0;
    memcpy(rep, slash1 + 1, rl);
    rep[rl] = 0;
    regex_t re;
    if (regcomp(&re, pat, REG_EXTENDED))
        return -2;
    regmatch_t m[10];
    int rc = regexec(&re, dn, 10, m, 0);
    bool whole = rc == 0 && m[0].rm_so == 0 && (size_t)m[0].rm_eo == strlen(dn);
    regfree(&re);
    if (!whole)
        return 0;
    size_t o = 0;
    for (const char *r = rep; *r && o + 1 < outlen; r++) {
        if (*r == '$' && r[1] >= '0' && r[1] <= '9') {
            int g = r[1] - '0';
            r++;
            if (m[g].rm_so < 0)
                continue;
            for (regoff_t i = m[g].rm_so; i < m[g].rm_eo && o + 1 < outlen; i++)
                out[o++] = dn[i];
        } else {
            out[o++] = *r;
        }
    }
    out[o] = 0;
    for (size_t i = 0; fold && i < o; i++)
        out[i] =
            (char)(fold == 'L' ? tolower((unsigned char)out[i]) : toupper((unsigned char)out[i]));
    return 1;
}

int st_tls_map_principal(const char *rules, const char *dn, char *out, size_t outlen)
{
    if (!rules || !*rules) {
        snprintf(out, outlen, "%s", dn);
        return 0;
    }
    const char *p = rules;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\n')
            p++;
        if (!*p)
            break;
        if (strncmp(p, "DEFAULT", 7) == 0) {
            snprintf(out, outlen, "%s", dn);
            return 0;
        }
        if (strncmp(p, "RULE:", 5) != 0)
            return -2;
        int rc = st_tls_rule(&p, dn, out, outlen);
        if (rc != 0)
            return rc == 1 ? 0 : rc;
    }
    return -1;
}

/* ---- the transport ---- */

typedef struct st_tls {
    st_transport_t base;
    st_tls_server_t *srv;
    SSL *ssl;
    BIO *rbio, *wbio; /* network -> OpenSSL; OpenSSL -> network */

    st_io_t nrio, nwio; /* raw socket operations */
    bool nr_busy, nw_busy;
    int rend; /* raw read ended: 0 not yet, 1 the peer closed, <0 -errno */
    int wend; /* raw send failed: -errno */
    uint8_t *nrbuf;
    uint8_t *obuf;
    size_t opos, olen, ocap;

    st_io_t *hs_io, *r_io, *w_io, *ww_io; /* the caller's operations */
    void *r_buf;
    size_t r_len;
    const struct msghdr *w_msg;
    size_t w_taken;
    bool w_encrypted;
    bool hs_timed_out;
    int hs_err; /* the handshake failed: reported once the alert is out */
    st_io_t *cancelled[4];
    int ncancelled;

    st_task_t task; /* runs tls_progress from the loop */
    st_timer_t hs_timer;
    int depth;    /* tls_progress frames on the stack */
    bool closing; /* close was called: free once nothing is left */
    bool shut;
    char principal[ST_TLS_NAME_MAX];
} st_tls_t;

static void tls_progress(st_tls_t *t);

/* Transports made on this thread (its loop's) and not freed yet: st_tls_transports_here. */
static _Thread_local size_t st_tls_here;

size_t st_tls_transports_here(void)
{
    return st_tls_here;
}

static void tls_maybe_free(st_tls_t *t)
{
    if (!t->closing || t->depth || t->nr_busy || t->nw_busy || t->task.queued)
        return;
    st_tls_here--;
    st_loop_timer_stop(t->base.loop, &t->hs_timer);
    SSL_free(t->ssl); /* frees both BIOs */
    close(t->base.fd);
    free(t->nrbuf);
    free(t->obuf);
    free(t);
}

static void tls_task(st_task_t *task)
{
    st_tls_t *t = task->data;
    if (t->closing) {
        tls_maybe_free(t);
        return;
    }
    tls_progress(t);
}

static void tls_kick(st_tls_t *t)
{
    st_loop_defer(t->base.loop, &t->task);
}

static void tls_nr_done(st_io_t *io, int res)
{
    st_tls_t *t = io->data;
    t->nr_busy = false;
    if (t->closing) {
        tls_maybe_free(t);
        return;
    }
    if (res > 0)
        BIO_write(t->rbio, t->nrbuf, res);
    else if (res == 0)
        t->rend = 1;
    else if (res != -EAGAIN && res != -EINTR)
        t->rend = res;
    tls_progress(t);
}

static void tls_nw_done(st_io_t *io, int res)
{
    st_tls_t *t = io->data;
    t->nw_busy = false;
    if (t->closing) {
        tls_maybe_free(t);
        return;
    }
    if (res > 0) {
        t->opos += (size_t)res;
        if (t->opos == t->olen)
            t->opos = t->olen = 0;
    } else if (res < 0 && res != -EAGAIN && res != -EINTR) {
        t->wend = res;
    }
    tls_progress(t);
}

/* Starts the raw send of pending ciphertext (invariant 1). */
static void tls_flush(st_tls_t *t)
{
    if (t->nw_busy || t->wend || t->shut)
        return;
    if (t->opos == t->olen) {
        t->opos = t->olen = 0;
        size_t pend = BIO_ctrl_pending(t->wbio);
        if (pend == 0)
            return;
        if (pend > t->ocap) {
            uint8_t *b = realloc(t->obuf, pend);
            if (!b) {
                t->wend = -ENOMEM;
                return;
            }
            t->obuf = b;
            t->ocap = pend;
        }
        int n = BIO_read(t->wbio, t->obuf, (int)pend);
        if (n <= 0)
            return;
        t->olen = (size_t)n;
    }
    if (st_loop_send(t->base.loop, &t->nwio, t->base.fd, t->obuf + t->opos, t->olen - t->opos) <
        0) {
        t->wend = -EIO;
        return;
    }
    t->nw_busy = true;
}

static bool tls_out_empty(const st_tls_t *t)
{
    return t->opos == t->olen && BIO_ctrl_pending(t->wbio) == 0;
}

static void tls_start_read(st_tls_t *t)
{
    if (t->nr_busy || t->rend || t->shut)
        return;
    if (st_loop_recv(t->base.loop, &t->nrio, t->base.fd, t->nrbuf, ST_TLS_NRBUF) < 0) {
        t->rend = -EIO;
        return;
    }
    t->nr_busy = true;
}

/* Runs a caller operation's callback (which may start the next operation, or close t). A
 * cancel asked for it is forgotten: the st_io_t may come back as another operation. */
static void tls_complete(st_tls_t *t, st_io_t **slot, int res)
{
    st_io_t *io = *slot;
    *slot = NULL;
    for (int i = 0; i < t->ncancelled; i++)
        if (t->cancelled[i] == io)
            t->cancelled[i--] = t->cancelled[--t->ncancelled];
    io->cb(io, res);
}

static int tls_rend_err(const st_tls_t *t)
{
    return t->rend < 0 ? t->rend : -ECONNRESET;
}

/* Logs why OpenSSL gave up on the peer (debug: peers that send garbage are no news). */
static void tls_log_failure(st_tls_t *t, const char *what)
{
    char e[256];
    unsigned long code = ERR_peek_last_error();
    if (code)
        ERR_error_string_n(code, e, sizeof e);
    else
        snprintf(e, sizeof e, "unexpected end");
    ERR_clear_error();
    ST_DEBUG("tls %s (listener %s, fd %d): %s", what, t->srv->name, t->base.fd, e);
}

static void tls_set_principal(st_tls_t *t)
{
    X509 *peer = SSL_get0_peer_certificate(t->ssl);
    if (!peer || SSL_get_verify_result(t->ssl) != X509_V_OK)
        return;
    BIO *b = BIO_new(BIO_s_mem());
    if (!b)
        return;
    X509_NAME_print_ex(b, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
    char dn[ST_TLS_NAME_MAX];
    int n = BIO_read(b, dn, sizeof dn - 1);
    BIO_free(b);
    dn[n > 0 ? n : 0] = 0;
    if (st_tls_map_principal(t->srv->set.principal_mapping_rules, dn, t->principal,
                             sizeof t->principal) != 0) {
        ST_WARN("listener %s: no ssl.principal.mapping.rules rule matches %s: anonymous",
                t->srv->name, dn);
        t->principal[0] = 0;
    }
}

/* One step: completes at most one caller operation or starts what is needed; true if it
 * did something worth another round. */
static bool tls_step(st_tls_t *t)
{
    if (t->ncancelled > 0) {
        st_io_t *io = t->cancelled[--t->ncancelled];
        st_io_t **slot = io == t->hs_io   ? &t->hs_io
                         : io == t->r_io  ? &t->r_io
                         : io == t->w_io  ? &t->w_io
                         : io == t->ww_io ? &t->ww_io
                                          : NULL;
        if (slot)
            tls_complete(t, slot, -ECANCELED);
        return true;
    }
    bool need_read = false;
    if (t->hs_io && t->hs_err) {
        if (!t->hs_timed_out && !t->wend && !t->shut && !tls_out_empty(t))
            return false; /* the raw send completion comes back here */
        tls_complete(t, &t->hs_io, t->hs_err);
        return true;
    }
    if (t->hs_io) {
        if (t->hs_timed_out) {
            ST_DEBUG("tls handshake (listener %s, fd %d): timed out", t->srv->name, t->base.fd);
            tls_complete(t, &t->hs_io, -ETIMEDOUT);
            return true;
        }
        ERR_clear_error();
        int r = SSL_do_handshake(t->ssl);
        tls_flush(t);
        if (r == 1) {
            st_loop_timer_stop(t->base.loop, &t->hs_timer);
            tls_set_principal(t);
            ST_DEBUG("tls handshake (listener %s, fd %d): %s %s%s%s", t->srv->name, t->base.fd,
                     SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl),
                     *t->principal ? ", client " : "", t->principal);
            tls_complete(t, &t->hs_io, 0);
            return true;
        }
        int e = SSL_get_error(t->ssl, r);
        if (e == SSL_ERROR_WANT_READ && !t->rend) {
            need_read = true;
        } else {
            if (e == SSL_ERROR_WANT_READ)
                ST_DEBUG("tls handshake (listener %s, fd %d): the peer left", t->srv->name,
                         t->base.fd);
            else
                tls_log_failure(t, "handshake");
            /* The alert OpenSSL queued (tls_flush started it) goes out before the caller
             * hears of the failure and closes the socket; the timer still bounds the wait. */
            t->hs_err = e == SSL_ERROR_WANT_READ ? tls_rend_err(t) : -EPROTO;
            return true;
        }
    }
    if (t->r_io) {
        size_t got = 0;
        ERR_clear_error();
        int r = SSL_read_ex(t->ssl, t->r_buf, t->r_len, &got);
        tls_flush(t); /* a read may answer (key update, alerts) */
        if (r == 1) {
            /* Fill the caller's buffer from the records already here (one is 16 KiB at most,
             * the buffer usually 64 KiB): fewer round trips through conn.c. */
            size_t more = 0;
            while (got < t->r_len &&
                   SSL_read_ex(t->ssl, (uint8_t *)t->r_buf + got, t->r_len - got, &more) == 1)
                got += more;
            ERR_clear_error();
            tls_flush(t);
            tls_complete(t, &t->r_io, (int)got);
            return true;
        }
        int e = SSL_get_error(t->ssl, r);
        if (e == SSL_ERROR_WANT_READ && !t->rend) {
            need_read = true;
        } else if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_WANT_READ && t->rend == 1)) {
            tls_complete(t, &t->r_io, 0); /* close_notify, or the peer closed the socket */
            return true;
        } else {
            if (e == SSL_ERROR_WANT_READ)
                tls_complete(t, &t->r_io, t->rend);
            else {
                tls_log_failure(t, "read");
                tls_complete(t, &t->r_io, e == SSL_ERROR_SYSCALL ? -ECONNRESET : -EPROTO);
            }
            return true;
        }
    }
    if (t->w_io) {
        if (!t->w_encrypted) {
            t->w_encrypted = true;
            t->w_taken = 0;
            for (size_t i = 0; i < t->w_msg->msg_iovlen && t->w_taken < ST_TLS_SEND_MAX; i++) {
                const struct iovec *v = &t->w_msg->msg_iov[i];
                size_t len = v->iov_len;
                if (len > ST_TLS_SEND_MAX - t->w_taken)
                    len = ST_TLS_SEND_MAX - t->w_taken;
                if (len == 0)
                    continue;
                size_t done = 0;
                ERR_clear_error();
                if (SSL_write_ex(t->ssl, v->iov_base, len, &done) != 1) {
                    tls_log_failure(t, "write");
                    t->wend = -EPROTO;
                    break;
                }
                t->w_taken += done;
            }
            tls_flush(t);
        }
        if (t->wend) {
            tls_complete(t, &t->w_io, t->wend);
            return true;
        }
        if (tls_out_empty(t)) {
            tls_complete(t, &t->w_io, (int)t->w_taken);
            return true;
        }
    }
    if (t->ww_io && (t->wend || tls_out_empty(t))) {
        tls_complete(t, &t->ww_io, t->wend);
        return true;
    }
    tls_flush(t);
    if (need_read)
        tls_start_read(t);
    if (need_read && !t->nr_busy && t->rend)
        return true; /* the read cannot start: the next round reports it */
    return false;
}

static void tls_progress(st_tls_t *t)
{
    t->depth++;
    for (int guard = 0; !t->closing && guard < 64 && tls_step(t); guard++)
        ;
    t->depth--;
    if (t->closing)
        tls_maybe_free(t);
    else if (t->ncancelled || (t->hs_timed_out && t->hs_io))
        tls_kick(t);
}

static void tls_hs_timeout(st_timer_t *tm)
{
    st_tls_t *t = tm->data;
    t->hs_timed_out = true;
    if (!t->closing)
        tls_progress(t);
}

static int tls_handshake(st_transport_t *bt, st_io_t *io)
{
    st_tls_t *t = (st_tls_t *)bt;
    if (t->hs_io || t->r_io)
        return -EBUSY;
    t->hs_io = io;
    if (t->srv->set.handshake_timeout_ms > 0)
        st_loop_timer_start(bt->loop, &t->hs_timer, t->srv->set.handshake_timeout_ms);
    tls_kick(t);
    return 0;
}

static int tls_recv(st_transport_t *bt, st_io_t *io, void *buf, size_t len)
{
    st_tls_t *t = (st_tls_t *)bt;
    if (t->hs_io || t->r_io)
        return -EBUSY;
    t->r_io = io;
    t->r_buf = buf;
    t->r_len = len;
    tls_kick(t);
    return 0;
}

static int tls_send(st_transport_t *bt, st_io_t *io, const struct msghdr *msg)
{
    st_tls_t *t = (st_tls_t *)bt;
    if (t->w_io || t->ww_io)
        return -EBUSY;
    t->w_io = io;
    t->w_msg = msg;
    t->w_encrypted = false;
    tls_kick(t);
    return 0;
}

static bool tls_can_sendfile(const st_transport_t *bt)
{
    (void)bt;
    return false;
}

static int64_t tls_sendfile(st_transport_t *bt, int fd, int64_t off, size_t len)
{
    (void)bt, (void)fd, (void)off, (void)len;
    return -EOPNOTSUPP;
}

static int tls_wait_writable(st_transport_t *bt, st_io_t *io)
{
    st_tls_t *t = (st_tls_t *)bt;
    if (t->w_io || t->ww_io)
        return -EBUSY;
    t->ww_io = io;
    tls_kick(t);
    return 0;
}

static int tls_cancel(st_transport_t *bt, st_io_t *io)
{
    st_tls_t *t = (st_tls_t *)bt;
    if (io != t->hs_io && io != t->r_io && io != t->w_io && io != t->ww_io)
        return -ENOENT;
    for (int i = 0; i < t->ncancelled; i++)
        if (t->cancelled[i] == io)
            return 0;
    t->cancelled[t->ncancelled++] = io;
    tls_kick(t);
    return 0;
}

static void tls_shutdown(st_transport_t *bt)
{
    st_tls_t *t = (st_tls_t *)bt;
    if (t->shut)
        return;
    /* close_notify, if the socket takes it right now and no ciphertext is half sent. */
    if (SSL_is_init_finished(t->ssl) && !t->nw_busy && tls_out_empty(t)) {
        SSL_shutdown(t->ssl);
        char a[256];
        int n = BIO_read(t->wbio, a, sizeof a);
        if (n > 0)
            (void)send(bt->fd, a, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    ERR_clear_error();
    t->shut = true;
    shutdown(bt->fd, SHUT_RDWR);
    if (!t->rend)
        t->rend = -ECONNRESET;
    if (!t->wend)
        t->wend = -EPIPE;
    tls_kick(t);
}

static void tls_close(st_transport_t *bt)
{
    st_tls_t *t = (st_tls_t *)bt;
    t->closing = true;
    st_loop_timer_stop(bt->loop, &t->hs_timer);
    if (t->nr_busy)
        st_loop_cancel(bt->loop, &t->nrio);
    if (t->nw_busy)
        st_loop_cancel(bt->loop, &t->nwio);
    tls_maybe_free(t);
}

static const char *tls_principal(const st_transport_t *bt)
{
    const st_tls_t *t = (const st_tls_t *)bt;
    return *t->principal ? t->principal : NULL;
}

const st_transport_ops_t st_transport_tls_ops = {
    .name = "tls",
    .handshake = tls_handshake,
    .recv = tls_recv,
    .send = tls_send,
    .can_sendfile = tls_can_sendfile,
    .sendfile = tls_sendfile,
    .wait_writable = tls_wait_writable,
    .cancel = tls_cancel,
    .shutdown = tls_shutdown,
    .close = tls_close,
    .principal = tls_principal,
};

int st_tls_transport_new(void *server, st_loop_t *loop, int fd, st_transport_t **out)
{
    st_tls_server_t *srv = server;
    st_tls_maybe_reload(srv);
    st_tls_t *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->nrbuf = malloc(ST_TLS_NRBUF);
    pthread_mutex_lock(&srv->mu);
    t->ssl = SSL_new(srv->ctx);
    pthread_mutex_unlock(&srv->mu);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->nrbuf || !t->ssl || !t->rbio || !t->wbio) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t->nrbuf);
        free(t);
        ERR_clear_error();
        return -ENOMEM;
    }
    /* An empty memory BIO reads as "retry", not as the end of the stream. */
    BIO_set_mem_eof_return(t->rbio, -1);
    BIO_set_mem_eof_return(t->wbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_accept_state(t->ssl);
    t->base.ops = &st_transport_tls_ops;
    t->base.loop = loop;
    t->base.fd = fd;
    t->srv = srv;
    t->nrio.cb = tls_nr_done;
    t->nrio.data = t;
    t->nwio.cb = tls_nw_done;
    t->nwio.data = t;
    st_task_init(&t->task, tls_task, t);
    st_timer_init(&t->hs_timer, tls_hs_timeout, t);
    st_tls_here++;
    *out = &t->base;
    return 0;
}
