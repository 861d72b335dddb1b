/* test_tls_transport.c — the quorum's TLS transport (cluster/tls_transport.h) on one libuv
 * loop, driven as raft_uv drives it: connect, accept with the preamble's id and address,
 * bytes both ways through the streams handed over; a peer of another CA refused (the
 * connect answered RAFT_NOCONNECTION, counted), an unreachable one the same, plain bytes to
 * the port refused, a pending connect answered RAFT_CANCELED at close, and 24 MiB in one
 * write through both sides' pause and resume. Under ASan every
 * handle and buffer must be gone when the transports are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster/tls_transport.h"
#include "net/tls.h"
#include "testcert.h"

static cred_t ca, node_a, node_b, other_ca, rogue;

typedef struct {
    struct raft_uv_transport t;
    char addr[64];
    int port;
    bool closed;
    /* what accept_cb saw */
    raft_id acc_id;
    char acc_addr[64];
    uv_stream_t *acc;
    char got[64]; /* read on the accepted stream */
    size_t ngot;
} node_t;

typedef struct {
    struct raft_uv_connect req;
    int status; /* 1: not answered yet */
    uv_stream_t *stream;
    char got[64]; /* read back on the connected stream */
    size_t ngot;
} conn_t;

static uv_loop_t loop;

/* A port nothing listens on now (bound, then closed). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

static SSL_CTX *ctx_of(const cred_t *me, const cred_t *trust)
{
    st_tls_settings_t s = {
        .keystore_certificate_chain = me->cert_pem,
        .keystore_key = me->key_pem,
        .truststore_certificates = trust->cert_pem,
    };
    char err[512];
    SSL_CTX *ctx = st_tls_client_ctx(&s, err, sizeof err);
    if (!ctx)
        fail_msg("st_tls_client_ctx: %s", err);
    return ctx;
}

static void on_accept(struct raft_uv_transport *t, raft_id id, const char *address,
                      uv_stream_t *stream);

static void node_start(node_t *n, raft_id id, const cred_t *me, const cred_t *trust)
{
    memset(n, 0, sizeof *n);
    n->port = free_port();
    snprintf(n->addr, sizeof n->addr, "127.0.0.1:%d", n->port);
    assert_int_equal(st_tls_transport_init(&n->t, &loop, n->addr, ctx_of(me, trust), true, 5000),
                     0);
    n->t.data = n;
    assert_int_equal(n->t.init(&n->t, id, n->addr), 0);
    assert_int_equal(n->t.listen(&n->t, on_accept), 0);
}

static void node_closed(struct raft_uv_transport *t)
{
    ((node_t *)t->data)->closed = true;
}

static void stream_freed(uv_handle_t *h)
{
    raft_free(h);
}

/* Runs the loop until cond or 10 s. */
static void run_until(bool (*cond)(void *), void *arg)
{
    for (int i = 0; i < 10000 && !cond(arg); i++)
        uv_run(&loop, UV_RUN_NOWAIT), usleep(1000);
    assert_true(cond(arg));
}

static void node_stop(node_t *n)
{
    if (n->acc)
        uv_close((uv_handle_t *)n->acc, stream_freed);
    n->acc = NULL;
    n->t.close(&n->t, node_closed);
    for (int i = 0; i < 10000 && !n->closed; i++)
        uv_run(&loop, UV_RUN_NOWAIT), usleep(1000);
    assert_true(n->closed);
    st_tls_transport_fini(&n->t);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)h;
    (void)hint;
    static char buf[4096];
    *b = uv_buf_init(buf, sizeof buf);
}

static void acc_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    node_t *nd = s->data;
    if (n <= 0)
        return;
    memcpy(nd->got + nd->ngot, b->base, (size_t)n);
    nd->ngot += (size_t)n;
    static uv_write_t w;
    static char reply[] = "world";
    uv_buf_t rb = uv_buf_init(reply, 5);
    uv_write(&w, s, &rb, 1, NULL);
}

static void on_accept(struct raft_uv_transport *t, raft_id id, const char *address,
                      uv_stream_t *stream)
{
    node_t *n = t->data;
    n->acc_id = id;
    snprintf(n->acc_addr, sizeof n->acc_addr, "%s", address);
    n->acc = stream;
    stream->data = n;
    uv_read_start(stream, alloc_cb, acc_read);
}

static void conn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    conn_t *c = s->data;
    if (n <= 0)
        return;
    memcpy(c->got + c->ngot, b->base, (size_t)n);
    c->ngot += (size_t)n;
}

static void on_connect(struct raft_uv_connect *req, uv_stream_t *stream, int status)
{
    conn_t *c = req->data;
    c->status = status;
    c->stream = stream;
    if (status == 0) {
        stream->data = c;
        static uv_write_t w;
        static char hello[] = "hello";
        uv_buf_t b = uv_buf_init(hello, 5);
        uv_write(&w, stream, &b, 1, NULL);
        uv_read_start(stream, alloc_cb, conn_read);
    }
}

static void conn_start(conn_t *c, node_t *from, const char *to)
{
    memset(c, 0, sizeof *c);
    c->status = 1;
    c->req.data = c;
    assert_int_equal(from->t.connect(&from->t, &c->req, 99, to, on_connect), 0);
}

static bool answered(void *arg)
{
    return ((conn_t *)arg)->status != 1;
}

static bool exchanged(void *arg)
{
    conn_t *c = arg;
    return c->ngot == 5;
}

static void test_exchange(void **state)
{
    (void)state;
    node_t a, b;
    node_start(&a, 1, &node_a, &ca);
    node_start(&b, 2, &node_b, &ca);
    uint64_t hs = st_tls_transport_handshakes();
    conn_t c;
    char to[64];
    snprintf(to, sizeof to, "localhost:%d", a.port); /* the name checked: CN=localhost */
    conn_start(&c, &b, to);
    run_until(answered, &c);
    assert_int_equal(c.status, 0);
    run_until(exchanged, &c);
    assert_memory_equal(c.got, "world", 5);
    assert_int_equal(a.ngot, 5);
    assert_memory_equal(a.got, "hello", 5);
    assert_int_equal(a.acc_id, 2);
    assert_string_equal(a.acc_addr, b.addr); /* the preamble's, not the socket's */
    assert_true(st_tls_transport_handshakes() >= hs + 2);
    uv_close((uv_handle_t *)c.stream, stream_freed);
    node_stop(&b);
    node_stop(&a);
}

/* Bulk: 24 MiB in one write (an InstallSnapshot's size class) while the receiving raft does
 * not read at first, through the 8 MiB high water marks both ways, every byte in order. */
#define BULK (24u << 20)
static size_t bulk_got;
static bool bulk_bad;

static void bulk_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)s;
    for (ssize_t i = 0; i < n; i++)
        bulk_bad |= (unsigned char)b->base[i] != (unsigned char)((bulk_got + (size_t)i) * 7);
    if (n > 0)
        bulk_got += (size_t)n;
}

static void bulk_accept(struct raft_uv_transport *t, raft_id id, const char *address,
                        uv_stream_t *stream)
{
    (void)id;
    (void)address;
    node_t *n = t->data;
    n->acc = stream; /* read from later: until then everything queues (test_bulk) */
}

static unsigned char *bulk_data;
static uv_write_t bulk_w;

static void bulk_connect(struct raft_uv_connect *req, uv_stream_t *stream, int status)
{
    conn_t *c = req->data;
    c->status = status;
    c->stream = stream;
    if (status)
        return;
    uv_buf_t b = uv_buf_init((char *)bulk_data, BULK);
    assert_int_equal(uv_write(&bulk_w, stream, &b, 1, NULL), 0);
}

static bool bulk_done(void *arg)
{
    (void)arg;
    return bulk_got == BULK;
}

static void test_bulk(void **state)
{
    (void)state;
    bulk_data = malloc(BULK);
    for (size_t i = 0; i < BULK; i++)
        bulk_data[i] = (unsigned char)(i * 7);
    bulk_got = 0;
    bulk_bad = false;
    node_t a, b;
    memset(&a, 0, sizeof a);
    a.port = free_port();
    snprintf(a.addr, sizeof a.addr, "127.0.0.1:%d", a.port);
    assert_int_equal(st_tls_transport_init(&a.t, &loop, a.addr, ctx_of(&node_a, &ca), true, 5000),
                     0);
    a.t.data = &a;
    assert_int_equal(a.t.init(&a.t, 1, a.addr), 0);
    assert_int_equal(a.t.listen(&a.t, bulk_accept), 0);
    node_start(&b, 2, &node_b, &ca);
    conn_t c = {.status = 1};
    c.req.data = &c;
    char to[64];
    snprintf(to, sizeof to, "localhost:%d", a.port); /* the certificates name localhost only */
    assert_int_equal(b.t.connect(&b.t, &c.req, 1, to, bulk_connect), 0);
    /* Raft's side not reading for a while: the bytes back up through the receiver's pipe
     * queue, its socket, the sender's socket queue, the sender's pipe; both sides pause. */
    for (int i = 0; i < 300; i++)
        uv_run(&loop, UV_RUN_NOWAIT), usleep(1000);
    assert_non_null(a.acc);
    assert_int_equal(bulk_got, 0);
    uv_read_start(a.acc, alloc_cb, bulk_read);
    run_until(bulk_done, NULL);
    assert_false(bulk_bad);
    uv_close((uv_handle_t *)c.stream, stream_freed);
    node_stop(&b);
    node_stop(&a);
    free(bulk_data);
}

static void test_foreign_ca_and_unreachable(void **state)
{
    (void)state;
    node_t a, r;
    node_start(&a, 1, &node_a, &ca);
    node_start(&r, 4, &rogue, &other_ca);
    char to[64];
    snprintf(to, sizeof to, "localhost:%d", a.port);
    for (int i = 0; i < 3; i++) { /* raft's retries: refused each time, logged once */
        uint64_t refused = st_tls_transport_refused();
        conn_t c;
        conn_start(&c, &r, to);
        run_until(answered, &c);
        assert_int_equal(c.status, RAFT_NOCONNECTION);
        assert_null(a.acc);
        assert_true(st_tls_transport_refused() > refused);
    }
    /* Nobody on the port: unreachable, raft's RAFT_NOCONNECTION too. */
    snprintf(to, sizeof to, "127.0.0.1:%d", free_port());
    conn_t c;
    conn_start(&c, &a, to);
    run_until(answered, &c);
    assert_int_equal(c.status, RAFT_NOCONNECTION);
    node_stop(&r);
    node_stop(&a);
}

/* A raw TCP client sending raft_uv_tcp's plaintext handshake: closed, never accepted. */
static void test_plaintext_refused(void **state)
{
    (void)state;
    node_t a;
    node_start(&a, 1, &node_a, &ca);
    uint64_t refused = st_tls_transport_refused();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)a.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    uint64_t hs[3] = {1, 9, 8};
    assert_int_equal(write(fd, hs, sizeof hs), (ssize_t)sizeof hs);
    assert_int_equal(write(fd, "1.2.3.4\0", 8), 8);
    for (int i = 0; i < 5000 && st_tls_transport_refused() == refused; i++)
        uv_run(&loop, UV_RUN_NOWAIT), usleep(1000);
    assert_true(st_tls_transport_refused() > refused);
    assert_null(a.acc);
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf); /* at most a TLS alert, then the end */
    assert_true(n <= 0 || buf[0] == 0x15);
    close(fd);
    node_stop(&a);
}

/* A peer that accepts TCP and never speaks TLS: closing the transport answers the pending
 * connect RAFT_CANCELED. */
static void test_close_cancels(void **state)
{
    (void)state;
    node_t a;
    node_start(&a, 1, &node_a, &ca);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(lfd, 4), 0);
    socklen_t l = sizeof sa;
    getsockname(lfd, (struct sockaddr *)&sa, &l);
    char to[64];
    snprintf(to, sizeof to, "127.0.0.1:%d", ntohs(sa.sin_port));
    conn_t c;
    conn_start(&c, &a, to);
    for (int i = 0; i < 100; i++)
        uv_run(&loop, UV_RUN_NOWAIT), usleep(1000);
    assert_int_equal(c.status, 1);
    node_stop(&a);
    assert_int_equal(c.status, RAFT_CANCELED);
    close(lfd);
}

static int setup(void **state)
{
    (void)state;
    return uv_loop_init(&loop);
}

static int teardown(void **state)
{
    (void)state;
    uv_run(&loop, UV_RUN_NOWAIT);
    return uv_loop_close(&loop) == 0 ? 0 : -1;
}

int main(void)
{
    make_cred(&ca, "Test CA", "Strata", NULL, 1);
    make_cred(&node_a, "localhost", "Strata", &ca, 2);
    make_cred(&node_b, "localhost", "Strata", &ca, 3);
    make_cred(&other_ca, "Other CA", "Elsewhere", NULL, 4);
    make_cred(&rogue, "localhost", "Elsewhere", &other_ca, 5);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exchange, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bulk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_ca_and_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plaintext_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_cancels, setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    cred_t *all[] = {&ca, &node_a, &node_b, &other_ca, &rogue};
    for (int i = 0; i < 5; i++)
        free_cred(all[i]);
    return rc;
}
