/* tls_transport.c — the metadata quorum's transport over TLS (tls_transport.h). */
#include "cluster/tls_transport.h"

#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"

#define TT_MAGIC      "STRQ"
#define TT_VERSION    1
#define TT_PRE_FIXED  18         /* the preamble up to its address */
#define TT_ACK        0x01       /* the accepting side's one byte: preamble taken */
#define TT_CHUNK      65536      /* one read, either side */
#define TT_HIGH_WATER (8u << 20) /* raft's bytes queued for the peer: stop reading raft */
#define TT_LOW_WATER  (1u << 20) /* ... and start again below this */
#define TT_MAX_SEEN   256        /* refusals logged: distinct (peer, subject, reason) */

static atomic_uint_fast64_t tt_refused, tt_handshakes;

uint64_t st_tls_transport_refused(void)
{
    return atomic_load(&tt_refused);
}

uint64_t st_tls_transport_handshakes(void)
{
    return atomic_load(&tt_handshakes);
}

typedef struct tt tt_t;
typedef struct tconn tconn_t;

/* A connection's phases, in order; C_DEAD once tconn_kill ran. */
enum { C_RESOLVE, C_CONNECT, C_TLS, C_PREAMBLE, C_WAITOK, C_OPEN, C_DEAD };

struct tconn {
    tt_t *tt;
    tconn_t *prev, *next; /* tt->conns */
    bool outbound;
    int state;
    /* outbound: raft's request until answered, and whom it asked for */
    struct raft_uv_connect *req;
    raft_uv_connect_cb cb;
    raft_id peer_id;
    char peer[ST_TT_MAX_ADDR + 1]; /* outbound: the raft address; inbound: ip:port */
    char host[256];                /* outbound: the host part, for the name check and SNI */
    uv_getaddrinfo_t gai;
    bool resolving;
    uv_connect_t creq;
    uv_tcp_t tcp;
    uv_pipe_t inner;  /* our end of the socketpair */
    uv_pipe_t *outer; /* raft's end; NULL once raft has it */
    bool tcp_up, inner_up;
    bool paused;      /* raft's pipe not read: too much waits for the peer */
    bool tcp_paused;  /* the peer's socket not read: too much waits for raft */
    uv_timer_t timer; /* the handshake and preamble's bound */
    int handles;      /* initialised handles not closed yet */
    SSL *ssl;
    BIO *rbio, *wbio;
    char subject[256]; /* the peer certificate that failed the check, and why */
    char why[256];
    unsigned char pre[TT_PRE_FIXED + ST_TT_MAX_ADDR];
    size_t npre;
    char rbuf[TT_CHUNK];
    char ibuf[TT_CHUNK];
};

struct tt {
    struct raft_uv_transport *t;
    uv_loop_t *loop;
    SSL_CTX *ctx;
    bool verify_host;
    int64_t hs_timeout_ms;
    raft_id id;
    char address[ST_TT_MAX_ADDR + 1];
    char bind[ST_TT_MAX_ADDR + 1];
    uv_tcp_t listener;
    bool listening, closing, listener_closed;
    bool fini; /* st_tls_transport_fini ran before the close finished: free when it does */
    raft_uv_accept_cb accept_cb;
    raft_uv_transport_close_cb close_cb;
    tconn_t *conns;
    uint64_t seen[TT_MAX_SEEN]; /* hashes of the refusals logged */
    int nseen;
};

typedef struct {
    uv_write_t req;
    tconn_t *c;
    size_t len;
    char data[];
} twrite_t;

static void tconn_kill(tconn_t *c);
static void tconn_advance(tconn_t *c);
static void tt_maybe_closed(tt_t *tt);
static void alloc_inner(uv_handle_t *h, size_t hint, uv_buf_t *b);
static void inner_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

/* ---- refusals: logged once per (direction, peer, subject, reason) ---- */

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h ^ 0xff;
}

/* Counts a failed handshake and logs it unless the same one was logged before: raft retries
 * an unreachable peer every second, and a refused peer is not news the second time. */
static void tconn_refused(tconn_t *c, const char *what)
{
    atomic_fetch_add(&tt_refused, 1);
    tt_t *tt = c->tt;
    char peer[ST_TT_MAX_ADDR + 1];
    snprintf(peer, sizeof peer, "%s", c->peer);
    if (!c->outbound) {
        char *colon = strrchr(peer, ':'); /* the peer's port changes every attempt */
        if (colon)
            *colon = 0;
    }
    uint64_t h = fnv(
        fnv(fnv(fnv(14695981039346656037ull, c->outbound ? "out" : "in"), peer), c->subject), what);
    for (int i = 0; i < tt->nseen; i++)
        if (tt->seen[i] == h)
            return;
    if (tt->nseen < TT_MAX_SEEN)
        tt->seen[tt->nseen++] = h;
    ST_WARN("controller TLS: %s %s refused: %s%s%s (logged once; st_tls_transport_refused "
            "counts each)",
            c->outbound ? "connection to" : "connection from", c->peer, what,
            *c->subject ? "; certificate " : "", c->subject);
}

/* The certificate check's verdict on each certificate of the peer's chain: a failure keeps
 * the leaf's subject and the reason for tconn_refused, and refuses the handshake. */
static int tt_verify_cb(int ok, X509_STORE_CTX *x)
{
    if (ok)
        return 1;
    SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
    tconn_t *c = ssl ? SSL_get_app_data(ssl) : NULL;
    if (c && !*c->why) {
        X509 *leaf = X509_STORE_CTX_get0_cert(x);
        if (leaf)
            X509_NAME_oneline(X509_get_subject_name(leaf), c->subject, sizeof c->subject);
        snprintf(c->why, sizeof c->why, "the peer's certificate: %s",
                 X509_verify_cert_error_string(X509_STORE_CTX_get_error(x)));
    }
    return 0;
}

/* ---- writing ---- */

static void tcp_written(uv_write_t *w, int status)
{
    twrite_t *tw = (twrite_t *)w;
    tconn_t *c = tw->c;
    free(tw);
    if (status < 0) {
        if (c->state != C_DEAD)
            tconn_kill(c);
        return;
    }
    if (c->paused && c->state == C_OPEN &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) < TT_LOW_WATER) {
        c->paused = false;
        uv_read_start((uv_stream_t *)&c->inner, alloc_inner, inner_read);
    }
}

static void alloc_tcp(uv_handle_t *h, size_t hint, uv_buf_t *b);
static void tcp_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void inner_written(uv_write_t *w, int status)
{
    twrite_t *tw = (twrite_t *)w;
    tconn_t *c = tw->c;
    free(tw);
    if (status < 0) {
        if (c->state != C_DEAD)
            tconn_kill(c);
        return;
    }
    if (c->tcp_paused && c->state == C_OPEN &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->inner) < TT_LOW_WATER) {
        c->tcp_paused = false;
        uv_read_start((uv_stream_t *)&c->tcp, alloc_tcp, tcp_read);
    }
}

static int tconn_write(tconn_t *c, uv_stream_t *s, const void *p, size_t n, uv_write_cb cb)
{
    twrite_t *tw = malloc(sizeof *tw + n);
    if (!tw)
        return -ENOMEM;
    tw->c = c;
    tw->len = n;
    memcpy(tw->data, p, n);
    uv_buf_t b = uv_buf_init(tw->data, (unsigned)n);
    int rc = uv_write(&tw->req, s, &b, 1, cb);
    if (rc)
        free(tw);
    return rc;
}

/* Sends whatever OpenSSL has written into its memory BIO to the peer. */
static int tconn_flush(tconn_t *c)
{
    size_t n;
    while ((n = BIO_ctrl_pending(c->wbio)) > 0) {
        twrite_t *tw = malloc(sizeof *tw + n);
        if (!tw)
            return -ENOMEM;
        tw->c = c;
        tw->len = (size_t)BIO_read(c->wbio, tw->data, (int)n);
        uv_buf_t b = uv_buf_init(tw->data, (unsigned)tw->len);
        int rc = uv_write(&tw->req, (uv_stream_t *)&c->tcp, &b, 1, tcp_written);
        if (rc) {
            free(tw);
            return rc;
        }
    }
    return 0;
}

/* ---- closing ---- */

static void tconn_free_if_done(tconn_t *c)
{
    if (c->handles > 0 || c->resolving)
        return;
    tt_t *tt = c->tt;
    if (c->prev)
        c->prev->next = c->next;
    else
        tt->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    SSL_free(c->ssl); /* frees both BIOs */
    free(c);
    tt_maybe_closed(tt);
}

static void handle_closed(uv_handle_t *h)
{
    tconn_t *c = h->data;
    c->handles--;
    tconn_free_if_done(c);
}

static void outer_closed(uv_handle_t *h)
{
    raft_free(h);
}

/* Ends the connection: every handle closed (pending writes fail), raft's pipe too if raft
 * never got it; an outbound attempt raft still waits on is answered RAFT_NOCONNECTION, or
 * RAFT_CANCELED when the transport is closing. */
static void tconn_kill(tconn_t *c)
{
    if (c->state == C_DEAD)
        return;
    c->state = C_DEAD;
    if (c->resolving)
        uv_cancel((uv_req_t *)&c->gai);
    if (c->tcp_up)
        uv_close((uv_handle_t *)&c->tcp, handle_closed);
    if (c->inner_up)
        uv_close((uv_handle_t *)&c->inner, handle_closed);
    if (c->outer)
        uv_close((uv_handle_t *)c->outer, outer_closed);
    c->outer = NULL;
    uv_close((uv_handle_t *)&c->timer, handle_closed);
    struct raft_uv_connect *req = c->req;
    raft_uv_connect_cb cb = c->cb;
    c->req = NULL;
    if (req && cb)
        cb(req, NULL, c->tt->closing ? RAFT_CANCELED : RAFT_NOCONNECTION);
}

/* A failed handshake (or what followed it before raft had the stream): why, then kill. */
static void tconn_fail_tls(tconn_t *c, const char *what)
{
    char why[300];
    unsigned long e = ERR_get_error();
    char es[256] = "";
    if (e)
        ERR_error_string_n(e, es, sizeof es);
    ERR_clear_error();
    if (*c->why)
        snprintf(why, sizeof why, "%s", c->why);
    else
        snprintf(why, sizeof why, "%s: %s", what, *es ? es : "the peer closed or spoke no TLS");
    if (c->state < C_OPEN)
        tconn_refused(c, why);
    tconn_kill(c);
}

static void tt_free(tt_t *tt)
{
    SSL_CTX_free(tt->ctx);
    free(tt);
}

static void tt_maybe_closed(tt_t *tt)
{
    if (!tt->closing || tt->conns || (tt->listening && !tt->listener_closed))
        return;
    raft_uv_transport_close_cb cb = tt->close_cb;
    tt->close_cb = NULL;
    if (cb)
        cb(tt->t);
    if (tt->fini)
        tt_free(tt);
}

/* ---- reading ---- */

static void alloc_tcp(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)hint;
    tconn_t *c = h->data;
    *b = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void alloc_inner(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)hint;
    tconn_t *c = h->data;
    *b = uv_buf_init(c->ibuf, sizeof c->ibuf);
}

/* Raft wrote: encrypt it for the peer. */
static void inner_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    tconn_t *c = s->data;
    if (c->state == C_DEAD)
        return;
    if (n < 0) { /* raft closed its end */
        SSL_shutdown(c->ssl);
        tconn_flush(c);
        tconn_kill(c);
        return;
    }
    if (n == 0)
        return;
    if (SSL_write(c->ssl, b->base, (int)n) != (int)n || tconn_flush(c)) {
        tconn_fail_tls(c, "TLS write failed");
        return;
    }
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > TT_HIGH_WATER) {
        c->paused = true; /* tcp_written starts it again */
        uv_read_stop((uv_stream_t *)&c->inner);
    }
}

static void tcp_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    tconn_t *c = s->data;
    if (c->state == C_DEAD)
        return;
    if (n < 0) {
        if (c->state < C_OPEN)
            tconn_fail_tls(c, n == UV_EOF ? "TLS handshake failed" : uv_strerror((int)n));
        else
            tconn_kill(c);
        return;
    }
    if (n > 0 && BIO_write(c->rbio, b->base, (int)n) != (int)n) {
        tconn_kill(c);
        return;
    }
    tconn_advance(c);
}

/* Makes the socketpair: our end read for raft's writes, raft's end in c->outer. */
static int tconn_pair(tconn_t *c)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    uv_pipe_t *o = raft_malloc(sizeof *o);
    if (!o) {
        close(sv[0]);
        close(sv[1]);
        return -ENOMEM;
    }
    uv_pipe_init(c->tt->loop, &c->inner, 0);
    c->inner.data = c;
    c->inner_up = true;
    c->handles++;
    uv_pipe_init(c->tt->loop, o, 0);
    c->outer = o;
    int rc = uv_pipe_open(&c->inner, sv[0]);
    if (rc) {
        close(sv[0]);
        close(sv[1]);
        return rc;
    }
    rc = uv_pipe_open(o, sv[1]);
    if (rc) {
        close(sv[1]);
        return rc;
    }
    return uv_read_start((uv_stream_t *)&c->inner, alloc_inner, inner_read);
}

/* The connection is raft's now: stop the handshake's clock and hand the pipe over. */
static void tconn_hand_over(tconn_t *c)
{
    int rc = tconn_pair(c);
    if (rc) {
        ST_WARN("controller TLS: %s: cannot make the stream for raft: %s", c->peer,
                uv_strerror(rc));
        tconn_kill(c);
        return;
    }
    uv_timer_stop(&c->timer);
    c->state = C_OPEN;
    uv_stream_t *o = (uv_stream_t *)c->outer;
    c->outer = NULL;
    if (c->outbound) {
        struct raft_uv_connect *req = c->req;
        raft_uv_connect_cb cb = c->cb;
        c->req = NULL;
        cb(req, o, 0);
    } else {
        size_t alen = ((size_t)c->pre[16] << 8) | c->pre[17];
        char addr[ST_TT_MAX_ADDR + 1];
        memcpy(addr, c->pre + TT_PRE_FIXED, alen);
        addr[alen] = 0;
        raft_id id = 0;
        for (int i = 0; i < 8; i++)
            id = (id << 8) | c->pre[8 + i];
        c->tt->accept_cb(c->tt->t, id, addr, o);
    }
}

/* Decrypted bytes from the peer: the preamble, the acknowledgement, then raft's. */
static int tconn_feed(tconn_t *c, const unsigned char *p, size_t n)
{
    if (c->state == C_PREAMBLE) {
        while (n > 0 && c->state == C_PREAMBLE) {
            size_t want = TT_PRE_FIXED;
            if (c->npre >= TT_PRE_FIXED)
                want += ((size_t)c->pre[16] << 8) | c->pre[17];
            size_t k = want - c->npre < n ? want - c->npre : n;
            memcpy(c->pre + c->npre, p, k);
            c->npre += k;
            p += k;
            n -= k;
            if (c->npre == TT_PRE_FIXED) {
                size_t alen = ((size_t)c->pre[16] << 8) | c->pre[17];
                if (memcmp(c->pre, TT_MAGIC, 4) != 0 || c->pre[4] != TT_VERSION || alen == 0 ||
                    alen > ST_TT_MAX_ADDR) {
                    tconn_refused(c, "not a Strata controller preamble");
                    tconn_kill(c);
                    return -1;
                }
            } else if (c->npre == want && c->npre > TT_PRE_FIXED) {
                unsigned char ack = TT_ACK;
                if (SSL_write(c->ssl, &ack, 1) != 1 || tconn_flush(c)) {
                    tconn_fail_tls(c, "TLS write failed");
                    return -1;
                }
                tconn_hand_over(c);
                if (c->state != C_OPEN)
                    return -1;
            }
        }
    } else if (c->state == C_WAITOK && n > 0) {
        if (p[0] != TT_ACK) {
            tconn_refused(c, "the peer did not acknowledge the preamble");
            tconn_kill(c);
            return -1;
        }
        p++;
        n--;
        tconn_hand_over(c);
        if (c->state != C_OPEN)
            return -1;
    }
    if (n > 0 && c->state == C_OPEN &&
        tconn_write(c, (uv_stream_t *)&c->inner, p, n, inner_written)) {
        tconn_kill(c);
        return -1;
    }
    if (!c->tcp_paused && c->state == C_OPEN &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->inner) > TT_HIGH_WATER) {
        c->tcp_paused = true; /* inner_written starts it again */
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
    return 0;
}

/* Moves the session on with what the peer sent: the handshake, then decrypted bytes. */
static void tconn_advance(tconn_t *c)
{
    if (c->state == C_TLS) {
        int r = SSL_do_handshake(c->ssl);
        if (tconn_flush(c)) {
            tconn_kill(c);
            return;
        }
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return;
            tconn_fail_tls(c, "TLS handshake failed");
            return;
        }
        atomic_fetch_add(&tt_handshakes, 1);
        if (c->outbound) {
            tt_t *tt = c->tt;
            size_t alen = strlen(tt->address);
            unsigned char pre[TT_PRE_FIXED + ST_TT_MAX_ADDR] = {0};
            memcpy(pre, TT_MAGIC, 4);
            pre[4] = TT_VERSION;
            for (int i = 0; i < 8; i++)
                pre[8 + i] = (unsigned char)(tt->id >> (56 - 8 * i));
            pre[16] = (unsigned char)(alen >> 8);
            pre[17] = (unsigned char)alen;
            memcpy(pre + TT_PRE_FIXED, tt->address, alen);
            if (SSL_write(c->ssl, pre, (int)(TT_PRE_FIXED + alen)) != (int)(TT_PRE_FIXED + alen) ||
                tconn_flush(c)) {
                tconn_fail_tls(c, "TLS write failed");
                return;
            }
            c->state = C_WAITOK;
        } else {
            c->state = C_PREAMBLE;
        }
    }
    for (;;) {
        unsigned char buf[16384];
        int r = SSL_read(c->ssl, buf, sizeof buf);
        if (r <= 0) {
            int e = SSL_get_error(c->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                break;
            if (e == SSL_ERROR_ZERO_RETURN && c->state == C_OPEN)
                tconn_kill(c);
            else
                tconn_fail_tls(c, c->state == C_WAITOK ? "refused by the peer" : "TLS failed");
            return;
        }
        if (tconn_feed(c, buf, (size_t)r))
            return;
    }
    if (tconn_flush(c))
        tconn_kill(c);
}

static void hs_timeout(uv_timer_t *h)
{
    tconn_t *c = h->data;
    if (c->state <= C_CONNECT)
        tconn_kill(c); /* unreachable: raft retries */
    else if (c->state < C_OPEN)
        tconn_fail_tls(c, "no TLS handshake and preamble within ssl.handshake.timeout.ms");
}

static tconn_t *tconn_new(tt_t *tt, bool outbound)
{
    tconn_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->tt = tt;
    c->outbound = outbound;
    uv_timer_init(tt->loop, &c->timer);
    c->timer.data = c;
    c->handles = 1;
    c->next = tt->conns;
    if (tt->conns)
        tt->conns->prev = c;
    tt->conns = c;
    return c;
}

/* The TLS session over the connected c->tcp, either side, and its first flight. */
static void tconn_start_tls(tconn_t *c)
{
    c->ssl = SSL_new(c->tt->ctx);
    c->rbio = c->ssl ? BIO_new(BIO_s_mem()) : NULL;
    c->wbio = c->rbio ? BIO_new(BIO_s_mem()) : NULL;
    if (!c->wbio) {
        BIO_free(c->rbio);
        c->rbio = NULL;
        tconn_fail_tls(c, "cannot start TLS");
        return;
    }
    /* An empty memory BIO reads as "retry", not as the end of the stream. */
    BIO_set_mem_eof_return(c->rbio, -1);
    BIO_set_mem_eof_return(c->wbio, -1);
    SSL_set_bio(c->ssl, c->rbio, c->wbio);
    SSL_set_app_data(c->ssl, c);
    /* Both ways, whatever ssl.client.auth says: only a peer the truststore vouches for. */
    SSL_set_verify(c->ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, tt_verify_cb);
    if (c->outbound) {
        unsigned char a[16];
        bool ip = inet_pton(AF_INET, c->host, a) == 1 || inet_pton(AF_INET6, c->host, a) == 1;
        if (!ip)
            SSL_set_tlsext_host_name(c->ssl, c->host);
        if (c->tt->verify_host) {
            int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), c->host)
                        : (SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS),
                           SSL_set1_host(c->ssl, c->host));
            if (ok != 1) {
                tconn_fail_tls(c, "cannot set the host name to check");
                return;
            }
        }
        SSL_set_connect_state(c->ssl);
    } else {
        SSL_set_accept_state(c->ssl);
    }
    c->state = C_TLS;
    uv_timer_start(&c->timer, hs_timeout, (uint64_t)c->tt->hs_timeout_ms, 0);
    int rc = uv_read_start((uv_stream_t *)&c->tcp, alloc_tcp, tcp_read);
    if (rc) {
        tconn_kill(c);
        return;
    }
    if (c->outbound)
        tconn_advance(c); /* the ClientHello */
}

/* ---- connecting ---- */

static void tcp_connected(uv_connect_t *r, int status)
{
    tconn_t *c = r->data;
    if (c->state == C_DEAD)
        return;
    if (status < 0) {
        /* an unreachable peer: raft's usual retry, not a refusal worth a line */
        tconn_kill(c);
        return;
    }
    tconn_start_tls(c);
}

static void resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
    tconn_t *c = g->data;
    c->resolving = false;
    if (c->state == C_DEAD || status < 0 || !res) {
        uv_freeaddrinfo(res);
        if (c->state != C_DEAD)
            tconn_kill(c);
        else
            tconn_free_if_done(c);
        return;
    }
    uv_tcp_init(c->tt->loop, &c->tcp);
    c->tcp.data = c;
    c->tcp_up = true;
    c->handles++;
    uv_tcp_nodelay(&c->tcp, 1);
    c->state = C_CONNECT;
    c->creq.data = c;
    int rc = uv_tcp_connect(&c->creq, &c->tcp, res->ai_addr, tcp_connected);
    uv_freeaddrinfo(res);
    if (rc)
        tconn_kill(c);
}

/* Splits "host:port" (no port: 8080, as raft_uv_tcp). */
static int split_addr(const char *a, char *host, size_t hlen, char *port, size_t plen)
{
    const char *colon = strrchr(a, ':');
    size_t n = colon ? (size_t)(colon - a) : strlen(a);
    if (n == 0 || n >= hlen)
        return -1;
    memcpy(host, a, n);
    host[n] = 0;
    snprintf(port, plen, "%s", colon ? colon + 1 : "8080");
    return 0;
}

static int tt_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
                      const char *address, raft_uv_connect_cb cb)
{
    tt_t *tt = t->impl;
    char port[16];
    if (tt->closing)
        return RAFT_CANCELED;
    tconn_t *c = tconn_new(tt, true);
    if (!c)
        return RAFT_NOMEM;
    c->req = req;
    c->cb = cb;
    c->peer_id = id;
    snprintf(c->peer, sizeof c->peer, "%s", address);
    if (split_addr(address, c->host, sizeof c->host, port, sizeof port)) {
        c->req = NULL;
        tconn_kill(c);
        snprintf(t->errmsg, sizeof t->errmsg, "bad address %s", address);
        return RAFT_NOCONNECTION;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    c->gai.data = c;
    c->state = C_RESOLVE;
    int rc = uv_getaddrinfo(tt->loop, &c->gai, resolved, c->host, port, &hints);
    if (rc) {
        c->req = NULL;
        tconn_kill(c);
        snprintf(t->errmsg, sizeof t->errmsg, "cannot resolve %s: %s", address, uv_strerror(rc));
        return RAFT_NOCONNECTION;
    }
    c->resolving = true;
    uv_timer_start(&c->timer, hs_timeout, (uint64_t)tt->hs_timeout_ms, 0);
    return 0;
}

/* ---- listening ---- */

static void on_connection(uv_stream_t *l, int status)
{
    tt_t *tt = l->data;
    if (status < 0 || tt->closing)
        return;
    tconn_t *c = tconn_new(tt, false);
    if (!c)
        return;
    uv_tcp_init(tt->loop, &c->tcp);
    c->tcp.data = c;
    c->tcp_up = true;
    c->handles++;
    if (uv_accept(l, (uv_stream_t *)&c->tcp)) {
        tconn_kill(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    char ip[64] = "?";
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0 && ss.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        uv_ip4_name(in, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "%s:%d", ip, ntohs(in->sin_port));
    } else {
        snprintf(c->peer, sizeof c->peer, "%s", ip);
    }
    tconn_start_tls(c);
}

static int tt_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    tt_t *tt = t->impl;
    tt->id = id;
    if (strlen(address) > ST_TT_MAX_ADDR) {
        snprintf(t->errmsg, sizeof t->errmsg, "address too long: %.200s", address);
        return RAFT_INVALID;
    }
    snprintf(tt->address, sizeof tt->address, "%s", address);
    if (!*tt->bind)
        snprintf(tt->bind, sizeof tt->bind, "%s", address);
    return 0;
}

static int tt_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    tt_t *tt = t->impl;
    char host[256], port[16];
    tt->accept_cb = cb;
    if (split_addr(tt->bind, host, sizeof host, port, sizeof port)) {
        snprintf(t->errmsg, sizeof t->errmsg, "bad bind address %s", tt->bind);
        return RAFT_INVALID;
    }
    /* Once, at raft_start: a synchronous lookup, as raft_uv_tcp's own. */
    struct addrinfo hints = {
        .ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) || !res) {
        snprintf(t->errmsg, sizeof t->errmsg, "cannot resolve %s", tt->bind);
        return RAFT_IOERR;
    }
    uv_tcp_init(tt->loop, &tt->listener);
    tt->listener.data = tt;
    tt->listening = true;
    int rc = uv_tcp_bind(&tt->listener, res->ai_addr, 0);
    freeaddrinfo(res);
    if (!rc)
        rc = uv_listen((uv_stream_t *)&tt->listener, 128, on_connection);
    if (rc) {
        snprintf(t->errmsg, sizeof t->errmsg, "cannot listen on %s: %s", tt->bind, uv_strerror(rc));
        return RAFT_IOERR;
    }
    return 0;
}

static void listener_closed(uv_handle_t *h)
{
    tt_t *tt = h->data;
    tt->listener_closed = true;
    tt_maybe_closed(tt);
}

static void tt_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    tt_t *tt = t->impl;
    tt->closing = true;
    tt->close_cb = cb;
    if (tt->listening)
        uv_close((uv_handle_t *)&tt->listener, listener_closed);
    for (tconn_t *c = tt->conns; c; c = c->next)
        tconn_kill(c);
    if (!tt->listening && !tt->conns) {
        /* nothing to wait for: still answer from the loop, never inside close */
        tt->listening = true;
        uv_tcp_init(tt->loop, &tt->listener);
        tt->listener.data = tt;
        uv_close((uv_handle_t *)&tt->listener, listener_closed);
    }
}

void st_tls_transport_set_ctx(struct raft_uv_transport *t, struct ssl_ctx_st *ctx)
{
    tt_t *tt = t->impl;
    SSL_CTX_free(tt->ctx); /* open sessions hold their own references */
    tt->ctx = ctx;
}

int st_tls_transport_init(struct raft_uv_transport *t, uv_loop_t *loop, const char *bind,
                          struct ssl_ctx_st *ctx, bool verify_host, int64_t handshake_timeout_ms)
{
    tt_t *tt = calloc(1, sizeof *tt);
    if (!tt)
        return RAFT_NOMEM;
    tt->t = t;
    tt->loop = loop;
    tt->ctx = ctx;
    tt->verify_host = verify_host;
    tt->hs_timeout_ms = handshake_timeout_ms > 0 ? handshake_timeout_ms : 10000;
    snprintf(tt->bind, sizeof tt->bind, "%s", bind ? bind : "");
    t->version = 1;
    t->impl = tt;
    t->errmsg[0] = 0;
    t->init = tt_init;
    t->listen = tt_listen;
    t->connect = tt_connect;
    t->close = tt_close;
    return 0;
}

void st_tls_transport_fini(struct raft_uv_transport *t)
{
    tt_t *tt = t->impl;
    if (!tt)
        return;
    t->impl = NULL;
    if (!tt->closing) {
        tt->fini = true;
        tt_close(t, NULL); /* raft never closed it (a failed start): close without telling */
        return;
    }
    if (tt->conns || (tt->listening && !tt->listener_closed)) {
        tt->fini = true; /* freed once the last handle closed */
        tt->close_cb = NULL;
        return;
    }
    tt_free(tt);
}
