/*
 * conn.c — a client connection to another broker (conn.h): connect, reconnect with backoff,
 * TLS and SASL before the owner may send (secure.h), framing, the in-flight queue.
 *
 * TLS runs OpenSSL over memory BIOs, as net/tls.c does for accepted connections: what libuv
 * reads goes into `nin` and SSL_read turns it into rbuf; SSL_write puts ciphertext into
 * `nout`, which rc_flush hands to uv_write. SASL's requests are this file's own (correlation
 * ids of its own; nothing of the owner's is in flight yet) and their answers never reach the
 * owner.
 */
#include "replica/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/clock.h"
#include "base/log.h"
#include "net/tls.h"
#include "replica/wire.h"

#define C_READ_CHUNK     (64u << 10)
#define C_SASL_CLIENT_ID "strata-inter-broker"

/* Where a connection is on its way to UP (conn.h's CONNECTING, split). */
typedef enum { RC_TCP, RC_TLS, RC_SASL_HANDSHAKE, RC_SASL_AUTH, RC_SASL_FINAL, RC_UP } rc_phase_t;

typedef struct rc_req {
    int32_t corr;
    int64_t sent_ms;
    void *req;
    struct rc_req *next;
} rc_req_t;

struct st_rconn {
    uv_loop_t *loop;
    const st_rconn_ops_t *ops;
    void *arg;
    char host[256];
    int port;
    char what[96];
    const st_rsec_t *sec; /* NULL: plain TCP, no SASL */
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    bool tcp_open; /* the handle is initialised (until its close callback) */
    bool closing, connected, dead;
    bool warned; /* its failure was logged; cleared by st_rconn_healthy */
    rc_phase_t phase;
    SSL *ssl; /* with sec->tls: from the TCP connect until the connection fails */
    BIO *nin, *nout;
    uint8_t *netbuf; /* ciphertext read (TLS only), C_READ_CHUNK bytes */
    st_scram_client_t scram;
    bool scram_on;
    int32_t sasl_corr;
    int64_t connect_ms; /* when the TCP connect began (bounds the handshakes) */
    int backoff_ms;
    int64_t retry_at;
    st_buf_t rbuf;
    rc_req_t *inflight, *inflight_tail;
    int ninflight;
};

typedef struct rc_write {
    uv_write_t req;
    st_rconn_t *c;
    uint8_t *data;
} rc_write_t;

static void rc_free(st_rconn_t *c)
{
    st_buf_fini(&c->rbuf);
    free(c->netbuf);
    free(c);
}

/* Forgets the TLS and SASL state of the connection that just went. */
static void rc_secure_reset(st_rconn_t *c)
{
    SSL_free(c->ssl); /* nin and nout with it */
    c->ssl = NULL;
    c->nin = c->nout = NULL;
    if (c->scram_on)
        st_scram_client_fini(&c->scram);
    c->scram_on = false;
    c->phase = RC_TCP;
}

st_rconn_t *st_rconn_new(uv_loop_t *loop, const char *host, int port, const char *what,
                         const st_rsec_t *sec, const st_rconn_ops_t *ops, void *arg)
{
    st_rconn_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->loop = loop;
    c->sec = sec;
    c->ops = ops;
    c->arg = arg;
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    snprintf(c->what, sizeof c->what, "%s", what);
    c->backoff_ms = ST_RCONN_BACKOFF_MIN_MS;
    st_buf_init(&c->rbuf);
    return c;
}

static void on_tcp_closed(uv_handle_t *h)
{
    st_rconn_t *c = h->data;
    c->tcp_open = false;
    c->closing = false;
    if (c->dead)
        rc_free(c);
}

/* Hands every request in flight back to the owner (unless dead: the owner is gone). */
static void drop_all(st_rconn_t *c)
{
    while (c->inflight) {
        rc_req_t *r = c->inflight;
        c->inflight = r->next;
        c->ops->drop(c->arg, c, r->req);
        free(r);
    }
    c->inflight_tail = NULL;
    c->ninflight = 0;
}

void st_rconn_fail(st_rconn_t *c, const char *why)
{
    if (!c->tcp_open || c->closing)
        return;
    if (!c->warned)
        ST_WARN("%s %s:%d lost: %s (retrying every %d ms at most)", c->what, c->host, c->port, why,
                ST_RCONN_BACKOFF_MAX_MS);
    c->warned = true;
    c->closing = true;
    c->connected = false;
    rc_secure_reset(c);
    uv_close((uv_handle_t *)&c->tcp, on_tcp_closed);
    st_buf_clear(&c->rbuf);
    c->retry_at = st_mono_ms() + c->backoff_ms;
    c->backoff_ms =
        c->backoff_ms * 2 > ST_RCONN_BACKOFF_MAX_MS ? ST_RCONN_BACKOFF_MAX_MS : c->backoff_ms * 2;
    drop_all(c);
    if (!c->dead && c->ops->lost)
        c->ops->lost(c->arg, c, why);
}

void st_rconn_close(st_rconn_t *c)
{
    if (!c)
        return;
    drop_all(c);
    c->dead = true;
    if (c->tcp_open) {
        if (!c->closing) {
            c->warned = true; /* no warning: it is no longer wanted */
            st_rconn_fail(c, "not needed");
        }
        return;
    }
    rc_free(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    st_rconn_t *c = h->data;
    if (c->ssl) {
        *buf = uv_buf_init((char *)c->netbuf, C_READ_CHUNK);
        return;
    }
    if (st_buf_reserve(&c->rbuf, C_READ_CHUNK)) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)c->rbuf.data + c->rbuf.len, (unsigned)(c->rbuf.cap - c->rbuf.len));
}

/* The connection can still read (it has not failed or closed). */
static bool rc_live(const st_rconn_t *c)
{
    return c->tcp_open && !c->closing && !c->dead;
}

static void sasl_frame(st_rconn_t *c, const uint8_t *frame, size_t len);

/* One whole answer frame: SASL's before UP; then it answers the oldest request in flight, or
 * nothing. */
static void on_frame(st_rconn_t *c, const uint8_t *frame, size_t len)
{
    if (c->phase != RC_UP) {
        sasl_frame(c, frame, len);
        return;
    }
    rc_req_t *r = c->inflight;
    if (!r || len < 4 || (int32_t)st_be32(frame) != r->corr) {
        st_rconn_fail(c, "an answer to no request");
        return;
    }
    c->inflight = r->next;
    if (!c->inflight)
        c->inflight_tail = NULL;
    c->ninflight--;
    void *req = r->req;
    free(r);
    c->ops->answer(c->arg, c, req, frame, len);
}

/* Cuts the whole frames out of rbuf. */
static void rc_frames(st_rconn_t *c)
{
    size_t at = 0;
    while (rc_live(c) && c->phase >= RC_SASL_HANDSHAKE && c->rbuf.len - at >= 4) {
        uint32_t size = st_be32(c->rbuf.data + at);
        if (size > ST_RCONN_MAX_FRAME) {
            st_rconn_fail(c, "answer too large");
            return;
        }
        if (c->rbuf.len - at - 4 < size)
            break;
        on_frame(c, c->rbuf.data + at + 4, size);
        at += 4 + (size_t)size;
    }
    if (!rc_live(c))
        return; /* st_rconn_fail cleared the buffer */
    if (at) {
        memmove(c->rbuf.data, c->rbuf.data + at, c->rbuf.len - at);
        c->rbuf.len -= at;
    }
}

static void on_write(uv_write_t *req, int status);

/* Writes data (malloc'd, taken) to the socket. 0 or an error. */
static int rc_write_raw(st_rconn_t *c, uint8_t *data, size_t len)
{
    rc_write_t *w = malloc(sizeof *w);
    if (!w) {
        free(data);
        return -ENOMEM;
    }
    w->c = c;
    w->data = data;
    w->req.data = w;
    uv_buf_t ub = uv_buf_init((char *)data, (unsigned)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &ub, 1, on_write);
    if (rc) {
        free(data);
        free(w);
    }
    return rc;
}

/* Sends the ciphertext OpenSSL has produced. 0 or an error. */
static int rc_flush(st_rconn_t *c)
{
    size_t n = c->nout ? BIO_ctrl_pending(c->nout) : 0;
    if (!n)
        return 0;
    uint8_t *d = malloc(n);
    if (!d)
        return -ENOMEM;
    if (BIO_read(c->nout, d, (int)n) != (int)n) {
        free(d);
        return -EIO;
    }
    return rc_write_raw(c, d, n);
}

/* Sends a whole frame (malloc'd, taken), encrypted over TLS. 0 or an error. */
static int rc_put(st_rconn_t *c, uint8_t *data, size_t len)
{
    if (!c->ssl)
        return rc_write_raw(c, data, len);
    size_t at = 0;
    while (at < len) {
        size_t chunk = len - at > (1u << 30) ? (1u << 30) : len - at;
        int n = SSL_write(c->ssl, data + at, (int)chunk); /* a memory BIO takes it all */
        if (n <= 0) {
            ERR_clear_error();
            free(data);
            return -EIO;
        }
        at += (size_t)n;
    }
    free(data);
    return rc_flush(c);
}

/* One line on why OpenSSL failed: the certificate check's verdict when that failed. */
static void tls_why(st_rconn_t *c, const char *what, char *why, size_t len)
{
    long v = SSL_get_verify_result(c->ssl);
    unsigned long e = ERR_get_error();
    char es[256] = "";
    if (e)
        ERR_error_string_n(e, es, sizeof es);
    ERR_clear_error();
    if (v != X509_V_OK)
        snprintf(why, len, "%s: the broker's certificate: %s", what,
                 X509_verify_cert_error_string(v));
    else
        snprintf(why, len, "%s: %s", what, *es ? es : "the peer closed or spoke no TLS");
}

static void rc_secured(st_rconn_t *c);

/* Drives the TLS handshake with what arrived; once done, SASL or UP. */
static void tls_step(st_rconn_t *c)
{
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
    int frc = rc_flush(c); /* the alert too, when it failed */
    if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ) {
        char why[512];
        tls_why(c, "TLS handshake failed", why, sizeof why);
        st_rconn_fail(c, why);
        return;
    }
    if (frc) {
        st_rconn_fail(c, uv_strerror(frc));
        return;
    }
    if (r == 1) {
        ST_DEBUG("%s %s:%d: TLS up (%s)", c->what, c->host, c->port, SSL_get_version(c->ssl));
        rc_secured(c);
    }
}

/* Decrypts what arrived into rbuf. 0, or why the connection ends (why[0] set): the frames
 * decrypted before that are still to be read (an authentication's refusal comes just before
 * the peer closes). */
static void tls_read(st_rconn_t *c, char *why, size_t whylen)
{
    for (;;) {
        if (st_buf_reserve(&c->rbuf, C_READ_CHUNK)) {
            snprintf(why, whylen, "out of memory");
            return;
        }
        size_t room = c->rbuf.cap - c->rbuf.len;
        ERR_clear_error();
        int n =
            SSL_read(c->ssl, c->rbuf.data + c->rbuf.len, room > INT32_MAX ? INT32_MAX : (int)room);
        if (n > 0) {
            c->rbuf.len += (size_t)n;
            continue;
        }
        int e = SSL_get_error(c->ssl, n);
        if (e == SSL_ERROR_WANT_READ)
            break;
        if (e == SSL_ERROR_ZERO_RETURN)
            snprintf(why, whylen, "closed by the peer (TLS close_notify)");
        else
            tls_why(c, "TLS", why, whylen);
        return;
    }
    int rc = rc_flush(c); /* a key update's answer, say */
    if (rc)
        snprintf(why, whylen, "%s", uv_strerror(rc));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    st_rconn_t *c = s->data;
    if (n < 0) {
        st_rconn_fail(c, n == UV_EOF ? "closed by the peer" : uv_strerror((int)n));
        return;
    }
    if (n == 0 || !rc_live(c))
        return;
    char why[512] = "";
    if (!c->ssl) {
        c->rbuf.len += (size_t)n;
    } else {
        if (BIO_write(c->nin, c->netbuf, (int)n) != (int)n) {
            st_rconn_fail(c, "out of memory");
            return;
        }
        if (c->phase == RC_TLS) {
            tls_step(c);
            if (!rc_live(c) || c->phase == RC_TLS)
                return;
        }
        tls_read(c, why, sizeof why);
    }
    rc_frames(c);
    if (*why)
        st_rconn_fail(c, why); /* nothing when a frame already failed it */
}

/* ---- SASL (secure.h): SaslHandshake, then SaslAuthenticate rounds ---- */

/* UP: the owner may send. */
static void rc_up(st_rconn_t *c)
{
    c->phase = RC_UP;
    c->connected = true;
    ST_DEBUG("%s %s:%d: connected", c->what, c->host, c->port);
    if (c->ops->connected)
        c->ops->connected(c->arg, c);
}

/* Sends one of SASL's requests: b holds its whole frame, rc what encoding it returned. */
static void sasl_send(st_rconn_t *c, st_buf_t *b, int rc)
{
    size_t len = 0;
    uint8_t *d = rc == 0 && !b->oom ? st_buf_steal(b, &len) : NULL;
    st_buf_fini(b);
    rc = d ? rc_put(c, d, len) : -ENOMEM;
    if (rc)
        st_rconn_fail(c, rc == -ENOMEM ? "out of memory" : "cannot send the SASL request");
}

static void sasl_authenticate(st_rconn_t *c, const uint8_t *bytes, size_t n)
{
    st_buf_t b;
    st_buf_init(&b);
    sasl_send(c, &b,
              st_rwire_sasl_authenticate_req(&b, ++c->sasl_corr, C_SASL_CLIENT_ID, bytes, n));
}

/* TCP, and TLS if asked for, is up: SASL if asked for, else UP. */
static void rc_secured(st_rconn_t *c)
{
    if (!c->sec || c->sec->sasl == ST_RSEC_SASL_NONE) {
        rc_up(c);
        return;
    }
    c->phase = RC_SASL_HANDSHAKE;
    st_buf_t b;
    st_buf_init(&b);
    sasl_send(c, &b,
              st_rwire_sasl_handshake_req(&b, ++c->sasl_corr, C_SASL_CLIENT_ID, c->sec->mechanism));
}

/* The mechanism's first message: PLAIN's only one, or SCRAM's client-first. */
static void sasl_first(st_rconn_t *c)
{
    const st_rsec_t *s = c->sec;
    c->phase = RC_SASL_AUTH;
    if (s->sasl == ST_RSEC_SASL_PLAIN) {
        size_t ul = strlen(s->user), pl = strlen(s->password);
        uint8_t msg[sizeof s->user + sizeof s->password + 2];
        msg[0] = 0; /* no authzid: "\0user\0password" */
        memcpy(msg + 1, s->user, ul);
        msg[1 + ul] = 0;
        memcpy(msg + 2 + ul, s->password, pl);
        sasl_authenticate(c, msg, ul + pl + 2);
        OPENSSL_cleanse(msg, sizeof msg);
        return;
    }
    char *first;
    size_t n;
    if (st_scram_client_begin(&c->scram, s->scram, s->user, &first, &n)) {
        st_rconn_fail(c, "SASL: cannot start SCRAM (out of memory)");
        return;
    }
    c->scram_on = true;
    sasl_authenticate(c, (const uint8_t *)first, n);
    free(first);
}

/* SCRAM's next step with the server's message m: client-final, or the check of
 * server-final. 0, or -1 with why. */
static int sasl_scram_step(st_rconn_t *c, const char *m, size_t ml, char *why, size_t whylen)
{
    char err[256];
    if (c->phase == RC_SASL_AUTH) {
        char *fin;
        size_t n;
        if (st_scram_client_next(&c->scram, c->sec->password, m, ml, &fin, &n, err, sizeof err)) {
            snprintf(why, whylen, "SASL %s: %s", c->sec->mechanism, err);
            return -1;
        }
        c->phase = RC_SASL_FINAL;
        sasl_authenticate(c, (const uint8_t *)fin, n);
        free(fin);
        return 0;
    }
    if (st_scram_client_verify(&c->scram, m, ml, err, sizeof err)) {
        snprintf(why, whylen, "SASL %s: %s", c->sec->mechanism, err);
        return -1;
    }
    st_scram_client_fini(&c->scram);
    c->scram_on = false;
    rc_up(c);
    return 0;
}

static void sasl_frame(st_rconn_t *c, const uint8_t *frame, size_t len)
{
    st_arena_t a;
    st_arena_init(&a, 1024);
    int32_t corr = 0;
    char why[512] = "";
    if (c->phase == RC_SASL_HANDSHAKE) {
        st_kp_sasl_handshake_resp_t r;
        st_kp_sasl_handshake_resp_init(&r);
        if (st_rwire_sasl_handshake_resp(frame, len, &a, &corr, &r) || corr != c->sasl_corr)
            snprintf(why, sizeof why, "SASL: a malformed SaslHandshake answer");
        else if (r.error_code)
            snprintf(why, sizeof why,
                     "SASL: the broker does not offer %s (error %d): see "
                     "sasl.mechanism.inter.broker.protocol and its sasl.enabled.mechanisms",
                     c->sec->mechanism, r.error_code);
        else
            sasl_first(c);
    } else {
        st_kp_sasl_authenticate_resp_t r;
        st_kp_sasl_authenticate_resp_init(&r);
        int ml = 0;
        if (st_rwire_sasl_authenticate_resp(frame, len, &a, &corr, &r) || corr != c->sasl_corr) {
            snprintf(why, sizeof why, "SASL: a malformed SaslAuthenticate answer");
        } else if (r.error_code) {
            ml = r.error_message.len > 300 ? 300 : r.error_message.len;
            snprintf(why, sizeof why, "SASL %s as %s refused (error %d): %.*s", c->sec->mechanism,
                     c->sec->user, r.error_code, ml > 0 ? ml : 0,
                     ml > 0 ? r.error_message.ptr : "");
        } else if (c->sec->sasl == ST_RSEC_SASL_PLAIN) {
            rc_up(c);
        } else {
            ml = r.auth_bytes.len > 0 ? r.auth_bytes.len : 0;
            sasl_scram_step(c, ml ? (const char *)r.auth_bytes.ptr : "", (size_t)ml, why,
                            sizeof why);
        }
    }
    st_arena_fini(&a);
    if (*why)
        st_rconn_fail(c, why);
}

/* ---- connecting ---- */

/* Checks the other broker's certificate against the host connected to: an IP address in its
 * subjectAltName for an address, the DNS name otherwise (also sent as SNI). */
static int tls_verify_host(st_rconn_t *c, bool ip)
{
    if (ip)
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), c->host) == 1 ? 0 : -1;
    SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return SSL_set1_host(c->ssl, c->host) == 1 ? 0 : -1;
}

/* The TLS session of a new TCP connection: memory BIOs, SNI, the host name to check. */
static int tls_begin(st_rconn_t *c)
{
    if (!c->netbuf && !(c->netbuf = malloc(C_READ_CHUNK)))
        return -ENOMEM;
    SSL_CTX *ctx = st_tls_server_ctx(c->sec->tls);
    c->ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL holds its own reference */
    c->nin = c->ssl ? BIO_new(BIO_s_mem()) : NULL;
    c->nout = c->nin ? BIO_new(BIO_s_mem()) : NULL;
    if (!c->nout) {
        BIO_free(c->nin);
        c->nin = NULL;
        return -ENOMEM;
    }
    /* An empty memory BIO reads as "retry", not as the end of the stream. */
    BIO_set_mem_eof_return(c->nin, -1);
    BIO_set_mem_eof_return(c->nout, -1);
    SSL_set_bio(c->ssl, c->nin, c->nout);
    SSL_set_connect_state(c->ssl);
    unsigned char addr[16];
    bool ip = inet_pton(AF_INET, c->host, addr) == 1 || inet_pton(AF_INET6, c->host, addr) == 1;
    if (!ip && SSL_set_tlsext_host_name(c->ssl, c->host) != 1)
        return -EINVAL;
    if (c->sec->verify_host && tls_verify_host(c, ip))
        return -EINVAL;
    c->phase = RC_TLS;
    return 0;
}

static void on_connect(uv_connect_t *req, int status)
{
    st_rconn_t *c = req->data;
    if (c->closing)
        return;
    if (status < 0) {
        st_rconn_fail(c, uv_strerror(status));
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    if (c->sec && c->sec->tls) {
        int rc = tls_begin(c);
        if (rc) {
            ERR_clear_error();
            st_rconn_fail(c, rc == -ENOMEM ? "out of memory" : "TLS: cannot set the host name");
            return;
        }
    }
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc) {
        st_rconn_fail(c, uv_strerror(rc));
        return;
    }
    if (c->ssl)
        tls_step(c); /* the ClientHello */
    else
        rc_secured(c);
}

static int resolve(const char *host, int port, struct sockaddr_storage *out)
{
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)out) == 0)
        return 0;
    if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)out) == 0)
        return 0;
    /* a name: resolved here, blocking only this thread */
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    if (getaddrinfo(host, p, &hints, &res) || !res)
        return -ENOENT;
    memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

static void rc_connect(st_rconn_t *c)
{
    struct sockaddr_storage sa;
    c->retry_at = st_mono_ms() + c->backoff_ms; /* the next try, should this one fail at once */
    if (resolve(c->host, c->port, &sa)) {
        if (c->backoff_ms >= ST_RCONN_BACKOFF_MAX_MS)
            ST_WARN("%s %s: cannot resolve it", c->what, c->host);
        c->backoff_ms = ST_RCONN_BACKOFF_MAX_MS;
        c->retry_at = st_mono_ms() + c->backoff_ms;
        return;
    }
    uv_tcp_init(c->loop, &c->tcp);
    c->connect_ms = st_mono_ms();
    c->tcp.data = c;
    c->tcp_open = true;
    c->connect_req.data = c;
    int rc = uv_tcp_connect(&c->connect_req, &c->tcp, (const struct sockaddr *)&sa, on_connect);
    if (rc)
        st_rconn_fail(c, uv_strerror(rc));
}

bool st_rconn_pump(st_rconn_t *c, int64_t now_ms)
{
    if (c->dead)
        return false;
    if (!c->connected && !c->tcp_open && now_ms >= c->retry_at)
        rc_connect(c);
    return c->connected;
}

bool st_rconn_up(const st_rconn_t *c)
{
    return c->connected && !c->dead;
}

int st_rconn_inflight(const st_rconn_t *c)
{
    return c->ninflight;
}

static void on_write(uv_write_t *req, int status)
{
    rc_write_t *w = req->data;
    st_rconn_t *c = w->c;
    free(w->data);
    free(w);
    if (status < 0 && !c->closing)
        st_rconn_fail(c, uv_strerror(status));
}

int st_rconn_send(st_rconn_t *c, st_buf_t *b, int32_t corr, void *req)
{
    if (!st_rconn_up(c))
        return -ENOTCONN;
    rc_req_t *r = malloc(sizeof *r);
    if (!r)
        return -ENOMEM;
    size_t len;
    uint8_t *data = st_buf_steal(b, &len);
    int rc = rc_put(c, data, len);
    if (rc) {
        free(r);
        return rc;
    }
    r->corr = corr;
    r->sent_ms = st_mono_ms();
    r->req = req;
    r->next = NULL;
    if (c->inflight_tail)
        c->inflight_tail->next = r;
    else
        c->inflight = r;
    c->inflight_tail = r;
    c->ninflight++;
    return 0;
}

void st_rconn_healthy(st_rconn_t *c)
{
    c->backoff_ms = ST_RCONN_BACKOFF_MIN_MS;
    c->warned = false;
}

bool st_rconn_tick(st_rconn_t *c, int64_t now_ms, int64_t timeout_ms)
{
    /* A peer that took the TCP connection but never finishes TLS or SASL (a stopped
     * process's backlog, say) is given as long as an answer. */
    if (rc_live(c) && c->phase != RC_UP && c->phase != RC_TCP &&
        now_ms - c->connect_ms > timeout_ms) {
        st_rconn_fail(c, c->phase == RC_TLS ? "TLS handshake not done in time"
                                            : "SASL authentication not done in time");
        return true;
    }
    if (c->inflight && now_ms - c->inflight->sent_ms > timeout_ms) {
        st_rconn_fail(c, "no answer in time");
        return true;
    }
    return false;
}

const char *st_rconn_host(const st_rconn_t *c)
{
    return c->host;
}

int st_rconn_port(const st_rconn_t *c)
{
    return c->port;
}
