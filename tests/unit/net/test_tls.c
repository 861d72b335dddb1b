/*
 * Unit tests for net/tls: a TLS handshake and frames through the real event loop, the client
 * certificate's subject as the connection's principal, peers that send garbage or stall in
 * the handshake, principal mapping rules, and the start-up errors of bad settings.
 *
 * As in test_conn.c, the server end of a socketpair is served through st_net_adopt; the
 * client is OpenSSL on the other end (non-blocking), stepped from a 1 ms timer on the same
 * loop, so every wait is bounded. Certificates are made in memory at test time (EC P-256).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "base/buf.h"
#include "base/clock.h"
#include "net/auth.h"
#include "net/conn.h"
#include "net/tls.h"

#include "testcert.h"

static cred_t ca, server, client, other_ca, mallory;

/* ---- the harness ---- */

typedef struct tctx tctx_t;
struct tctx {
    st_loop_t *loop;
    st_net_t *net;
    st_tls_server_t *srv;
    st_listener_t listener;
    int cfd;
    st_conn_t *conn;
    int nframes, closed;
    /* the client */
    SSL_CTX *cctx;
    SSL *cssl;      /* NULL: a raw client writing `raw` */
    bool hs_done;   /* the client's handshake finished */
    bool hs_failed; /* it failed */
    bool eof;       /* the server closed */
    st_buf_t out;   /* plaintext (or raw bytes) still to write */
    size_t out_pos;
    st_buf_t in; /* plaintext received */
    st_timer_t tick;
    bool (*cond)(tctx_t *);
    int64_t deadline_ms;
};

static void on_frame(void *ctx, st_conn_t *c, uint64_t seq, uint8_t *frame, size_t len)
{
    tctx_t *t = ctx;
    t->nframes++;
    st_out_t *o = st_out_new();
    uint8_t hdr[4];
    st_put_be32(hdr, (uint32_t)len);
    st_buf_append(&o->mem, hdr, 4);
    st_buf_append(&o->mem, frame, len);
    free(frame);
    st_conn_respond(c, seq, o);
}

static void on_close(void *ctx, st_conn_t *c)
{
    (void)c;
    ((tctx_t *)ctx)->closed++;
}

static void client_step(tctx_t *t)
{
    if (t->cfd < 0)
        return;
    if (!t->cssl) { /* raw */
        while (t->out_pos < t->out.len) {
            ssize_t w = write(t->cfd, t->out.data + t->out_pos, t->out.len - t->out_pos);
            if (w <= 0)
                break;
            t->out_pos += (size_t)w;
        }
        uint8_t b[4096];
        ssize_t r = read(t->cfd, b, sizeof b);
        if (r == 0 || (r < 0 && errno != EAGAIN))
            t->eof = true;
        return;
    }
    if (!t->hs_done && !t->hs_failed) {
        int r = SSL_do_handshake(t->cssl);
        if (r == 1)
            t->hs_done = true;
        else {
            int e = SSL_get_error(t->cssl, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                t->hs_failed = true;
        }
        ERR_clear_error();
    }
    if (!t->hs_done)
        return;
    while (t->out_pos < t->out.len) {
        size_t w = 0;
        if (SSL_write_ex(t->cssl, t->out.data + t->out_pos, t->out.len - t->out_pos, &w) != 1)
            break;
        t->out_pos += w;
    }
    for (int i = 0; i < 256; i++) {
        uint8_t *p = st_buf_extend(&t->in, 65536);
        size_t got = 0;
        int r = SSL_read_ex(t->cssl, p, 65536, &got);
        t->in.len -= 65536 - got;
        if (r != 1) {
            int e = SSL_get_error(t->cssl, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                t->eof = true;
            break;
        }
    }
    ERR_clear_error();
}

static void on_tick(st_timer_t *tm)
{
    tctx_t *t = tm->data;
    client_step(t);
    if (t->cond(t) || st_mono_ms() > t->deadline_ms) {
        st_loop_stop(t->loop);
        return;
    }
    st_loop_timer_start(t->loop, &t->tick, 1);
}

static bool run_until(tctx_t *t, bool (*cond)(tctx_t *), int64_t ms)
{
    t->cond = cond;
    t->deadline_ms = st_mono_ms() + ms;
    st_loop_timer_start(t->loop, &t->tick, 0);
    assert_int_equal(st_loop_run(t->loop), 0);
    st_loop_timer_stop(t->loop, &t->tick);
    return cond(t);
}

/* Serves one socketpair end with TLS settings s; the client: OpenSSL trusting `trust` with
 * credential `mine` (NULL: none), or raw bytes when trust is NULL. */
static void setup(tctx_t *t, const st_tls_settings_t *s, const cred_t *trust, const cred_t *mine)
{
    memset(t, 0, sizeof *t);
    assert_int_equal(st_loop_create(&t->loop, 256), 0);
    st_timer_init(&t->tick, on_tick, t);
    st_buf_init(&t->in);
    st_buf_init(&t->out);
    char err[512] = "";
    int rc = st_tls_server_create(s, "TEST", &t->srv, err, sizeof err);
    if (rc)
        fail_msg("st_tls_server_create: %s", err);
    snprintf(t->listener.name, sizeof t->listener.name, "TEST");
    t->listener.protocol = ST_SEC_SSL;
    st_net_handler_t h = {on_frame, on_close, t};
    st_net_limits_t lim = {1 << 24, 1 << 26, 0};
    assert_int_equal(st_net_create(&t->net, t->loop, NULL, 0, &h, &lim), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    t->cfd = sv[1];
    st_transport_t *tr;
    assert_int_equal(st_tls_transport_new(t->srv, t->loop, sv[0], &tr), 0);
    assert_int_equal(st_net_adopt(t->net, tr, &t->listener, &t->conn), 0);
    if (!trust)
        return;
    t->cctx = SSL_CTX_new(TLS_client_method());
    X509_STORE_add_cert(SSL_CTX_get_cert_store(t->cctx), trust->cert);
    SSL_CTX_set_verify(t->cctx, SSL_VERIFY_PEER, NULL);
    if (mine) {
        SSL_CTX_use_certificate(t->cctx, mine->cert);
        SSL_CTX_use_PrivateKey(t->cctx, mine->key);
    }
    t->cssl = SSL_new(t->cctx);
    SSL_set_fd(t->cssl, t->cfd);
    SSL_set_connect_state(t->cssl);
}

static bool no_conn(tctx_t *t)
{
    return st_net_conn_count(t->net) == 0;
}

static bool net_done_flag;
static void net_done(void *arg)
{
    (void)arg;
    net_done_flag = true;
}
static bool shut_down(tctx_t *t)
{
    (void)t;
    return net_done_flag;
}
static int64_t later_ms;
static bool later(tctx_t *t)
{
    (void)t;
    return st_mono_ms() >= later_ms;
}

static void teardown(tctx_t *t)
{
    SSL_free(t->cssl);
    SSL_CTX_free(t->cctx);
    if (t->cfd >= 0)
        close(t->cfd);
    t->cfd = -1;
    assert_true(run_until(t, no_conn, 5000));
    net_done_flag = false;
    st_net_shutdown(t->net, net_done, NULL);
    assert_true(run_until(t, shut_down, 5000));
    /* A transport closed with a raw operation in flight frees itself once its cancel
     * completes: let the loop run a little. */
    later_ms = st_mono_ms() + 30;
    run_until(t, later, 1000);
    st_net_destroy(t->net);
    st_loop_destroy(t->loop);
    st_tls_server_destroy(t->srv);
    st_buf_fini(&t->in);
    st_buf_fini(&t->out);
}

static st_tls_settings_t server_settings(void)
{
    st_tls_settings_t s = {0};
    s.keystore_certificate_chain = server.cert_pem;
    s.keystore_key = server.key_pem;
    s.handshake_timeout_ms = 5000;
    return s;
}

static size_t want_in;
static bool have_in(tctx_t *t)
{
    return t->in.len >= want_in || t->eof;
}
static bool client_done(tctx_t *t)
{
    return t->hs_done || t->hs_failed;
}
static bool closed(tctx_t *t)
{
    return t->closed > 0;
}

/* ---- tests ---- */

/* Frames of many sizes (one larger than the receive buffer, answers larger than one send's
 * worth of ciphertext) go through and come back in order, byte for byte. */
static void test_frames_over_tls(void **state)
{
    (void)state;
    st_tls_settings_t s = server_settings();
    tctx_t t;
    setup(&t, &s, &ca, NULL);
    static const size_t sizes[] = {0, 1, 17, 1000, 16384, 16385, 70000, 300000, 5};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t hdr[4];
        st_put_be32(hdr, (uint32_t)sizes[i]);
        st_buf_append(&t.out, hdr, 4);
        uint8_t *p = st_buf_extend(&t.out, sizes[i]);
        for (size_t k = 0; k < sizes[i]; k++)
            p[k] = (uint8_t)(i * 31 + k * 7);
        total += 4 + sizes[i];
    }
    want_in = total;
    assert_true(run_until(&t, have_in, 10000));
    assert_true(t.hs_done);
    assert_false(t.eof);
    assert_int_equal(t.in.len, total);
    assert_memory_equal(t.in.data, t.out.data, total); /* the echo is the script */
    assert_int_equal(t.nframes, (int)(sizeof sizes / sizeof sizes[0]));
    /* No client certificate: anonymous. */
    assert_string_equal(st_conn_auth(t.conn)->principal, ST_AUTH_ANONYMOUS);
    assert_int_equal(st_conn_auth(t.conn)->state, ST_AUTH_DONE);
    teardown(&t);
}

/* ssl.client.auth=required: the client certificate's subject is the principal, mapped by
 * the rules; a client without one, or with one from another CA, is refused. */
static void test_client_certificate_principal(void **state)
{
    (void)state;
    st_tls_settings_t s = server_settings();
    s.client_auth = "required";
    s.truststore_certificates = ca.cert_pem;
    tctx_t t;
    setup(&t, &s, &ca, &client);
    st_buf_append(&t.out, "\0\0\0\2hi", 6);
    want_in = 6;
    assert_true(run_until(&t, have_in, 10000));
    assert_int_equal(t.in.len, 6);
    assert_string_equal(st_conn_auth(t.conn)->principal, "User:CN=alice,O=Acme");
    teardown(&t);

    s.principal_mapping_rules = "RULE:^CN=([^,]*),O=(.*)$/$1@$2/L,DEFAULT";
    setup(&t, &s, &ca, &client);
    st_buf_append(&t.out, "\0\0\0\2hi", 6);
    assert_true(run_until(&t, have_in, 10000));
    assert_string_equal(st_conn_auth(t.conn)->principal, "User:alice@acme");
    teardown(&t);

    const cred_t *bad[] = {NULL, &mallory};
    for (int i = 0; i < 2; i++) {
        setup(&t, &s, &ca, bad[i]);
        st_buf_append(&t.out, "\0\0\0\2hi", 6);
        assert_true(run_until(&t, closed, 10000));
        assert_int_equal(t.nframes, 0);
        teardown(&t);
    }
}

/* ssl.client.auth=requested: a client without a certificate is served, anonymous. */
static void test_client_certificate_requested(void **state)
{
    (void)state;
    st_tls_settings_t s = server_settings();
    s.client_auth = "requested";
    s.truststore_certificates = ca.cert_pem;
    tctx_t t;
    setup(&t, &s, &ca, NULL);
    st_buf_append(&t.out, "\0\0\0\2hi", 6);
    want_in = 6;
    assert_true(run_until(&t, have_in, 10000));
    assert_int_equal(t.in.len, 6);
    assert_string_equal(st_conn_auth(t.conn)->principal, ST_AUTH_ANONYMOUS);
    teardown(&t);
}

/* A PKCS12 keystore and truststore from files, with their passwords. */
static void test_pkcs12_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/strata-tls-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char ks[64], ts[64];
    snprintf(ks, sizeof ks, "%s/ks.p12", dir);
    snprintf(ts, sizeof ts, "%s/ts.p12", dir);
    STACK_OF(X509) *chain = sk_X509_new_null();
    sk_X509_push(chain, ca.cert);
    PKCS12 *p = PKCS12_create("ks-pass", "server", server.key, server.cert, chain, 0, 0, 0, 0, 0);
    PKCS12 *q = PKCS12_create("ts-pass", NULL, NULL, ca.cert, NULL, 0, 0, 0, 0, 0);
    assert_non_null(p);
    assert_non_null(q);
    FILE *f = fopen(ks, "wb");
    i2d_PKCS12_fp(f, p);
    fclose(f);
    f = fopen(ts, "wb");
    i2d_PKCS12_fp(f, q);
    fclose(f);
    PKCS12_free(p);
    PKCS12_free(q);
    sk_X509_free(chain);
    st_tls_settings_t s = {0};
    s.keystore_type = "PKCS12";
    s.keystore_location = ks;
    s.keystore_password = "ks-pass";
    s.truststore_type = "PKCS12";
    s.truststore_location = ts;
    s.truststore_password = "ts-pass";
    s.client_auth = "required";
    s.handshake_timeout_ms = 5000;
    tctx_t t;
    setup(&t, &s, &ca, &client);
    st_buf_append(&t.out, "\0\0\0\2hi", 6);
    want_in = 6;
    assert_true(run_until(&t, have_in, 10000));
    assert_int_equal(t.in.len, 6);
    assert_string_equal(st_conn_auth(t.conn)->principal, "User:CN=alice,O=Acme");
    teardown(&t);
    s.keystore_password = "wrong";
    st_tls_server_t *srv = NULL;
    char err[512] = "";
    assert_int_not_equal(st_tls_server_create(&s, "TEST", &srv, err, sizeof err), 0);
    assert_non_null(strstr(err, "wrong password"));
    unlink(ks);
    unlink(ts);
    rmdir(dir);
}

/* A client trusting another CA gives up; the server side closes cleanly. */
static void test_wrong_ca(void **state)
{
    (void)state;
    st_tls_settings_t s = server_settings();
    tctx_t t;
    setup(&t, &s, &other_ca, NULL);
    assert_true(run_until(&t, client_done, 10000));
    assert_true(t.hs_failed);
    assert_true(run_until(&t, closed, 10000));
    teardown(&t);
}

/* Garbage instead of a ClientHello closes the connection at once. */
static void test_garbage(void **state)
{
    (void)state;
    st_tls_settings_t s = server_settings();
    tctx_t t;
    setup(&t, &s, NULL, NULL);
    st_buf_append(&t.out, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
    assert_true(run_until(&t, closed, 5000));
    assert_int_equal(t.nframes, 0);
    teardown(&t);
}

/* A peer that never finishes its handshake is dropped after handshake_timeout_ms. */
static void test_handshake_timeout(void **state)
{
    (void)state;
    st_tls_settings_t s = server_settings();
    s.handshake_timeout_ms = 100;
    tctx_t t;
    setup(&t, &s, NULL, NULL);
    st_buf_append(&t.out, "\x16\x03\x01\x02\x00\x01", 6); /* the start of a ClientHello */
    int64_t t0 = st_mono_ms();
    assert_true(run_until(&t, closed, 5000));
    int64_t took = st_mono_ms() - t0;
    assert_true(took >= 90 && took < 3000);
    teardown(&t);
}

static void test_principal_rules(void **state)
{
    (void)state;
    char out[256];
    assert_int_equal(st_tls_map_principal("", "CN=a,O=b", out, sizeof out), 0);
    assert_string_equal(out, "CN=a,O=b");
    assert_int_equal(st_tls_map_principal("DEFAULT", "CN=a,O=b", out, sizeof out), 0);
    assert_string_equal(out, "CN=a,O=b");
    assert_int_equal(
        st_tls_map_principal("RULE:^CN=([^,]*),.*$/$1/U,DEFAULT", "CN=ann,O=b", out, sizeof out),
        0);
    assert_string_equal(out, "ANN");
    /* No rule matches and no DEFAULT: refused. */
    assert_int_equal(st_tls_map_principal("RULE:^OU=(.*)$/$1/", "CN=a", out, sizeof out), -1);
    assert_int_equal(st_tls_map_principal("NONSENSE", "CN=a", out, sizeof out), -2);
}

static void refused(const st_tls_settings_t *s, const char *want)
{
    st_tls_server_t *srv = NULL;
    char err[512] = "";
    assert_int_not_equal(st_tls_server_create(s, "TEST", &srv, err, sizeof err), 0);
    assert_null(srv);
    if (!strstr(err, want))
        fail_msg("refusal '%s' does not say '%s'", err, want);
    assert_null(strchr(err, '\n'));
}

static void test_bad_settings(void **state)
{
    (void)state;
    st_tls_settings_t s = {0};
    refused(&s, "ssl.keystore.location");
    s.keystore_location = "/nonexistent/ks.pem";
    refused(&s, "ssl.keystore.location=/nonexistent/ks.pem: cannot open");
    s = server_settings();
    s.keystore_key = mallory.key_pem;
    refused(&s, "does not match");
    s = server_settings();
    s.keystore_type = "JKS";
    refused(&s, "ssl.keystore.type=JKS is not supported");
    s = server_settings();
    s.client_auth = "required";
    refused(&s, "needs ssl.truststore.location");
    s.client_auth = "maybe";
    refused(&s, "ssl.client.auth=maybe");
    s = server_settings();
    s.enabled_protocols = "TLSv1.1";
    refused(&s, "'TLSv1.1' is not supported");
    s = server_settings();
    s.cipher_suites = "NOPE_NOT_A_SUITE";
    refused(&s, "ssl.cipher.suites");
    /* An encrypted key with the wrong password. */
    BIO *b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(b, server.key, EVP_aes_128_cbc(), NULL, 0, NULL, "right");
    char *d;
    long n = BIO_get_mem_data(b, &d);
    char *enc = strndup(d, (size_t)n);
    BIO_free(b);
    s = server_settings();
    s.keystore_key = enc;
    s.key_password = "wrong";
    refused(&s, "wrong or missing ssl.key.password");
    s.key_password = "right";
    st_tls_server_t *srv;
    char err[512];
    assert_int_equal(st_tls_server_create(&s, "TEST", &srv, err, sizeof err), 0);
    st_tls_server_destroy(srv);
    free(enc);
}

int main(void)
{
    make_cred(&ca, "Test CA", "Strata", NULL, 1);
    make_cred(&server, "localhost", "Strata", &ca, 2);
    make_cred(&client, "alice", "Acme", &ca, 3);
    make_cred(&other_ca, "Other CA", "Elsewhere", NULL, 4);
    make_cred(&mallory, "mallory", "Elsewhere", &other_ca, 5);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frames_over_tls),
        cmocka_unit_test(test_client_certificate_principal),
        cmocka_unit_test(test_client_certificate_requested),
        cmocka_unit_test(test_pkcs12_files),
        cmocka_unit_test(test_wrong_ca),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_handshake_timeout),
        cmocka_unit_test(test_principal_rules),
        cmocka_unit_test(test_bad_settings),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cred_t *all[] = {&ca, &server, &client, &other_ca, &mallory};
    for (int i = 0; i < 5; i++)
        free_cred(all[i]);
    return rc;
}
