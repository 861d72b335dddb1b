/*
 * Unit tests for broker/request.h on a real shard loop and listener (net/conn.h), a client on
 * a loopback socket: requests answered in any order leave in request order; a request that
 * gets no answer (st_kreq_finish_silent) is skipped without holding up the ones after it; each
 * request's arena memory is freed with it (LeakSanitizer checks, and the arena grows past
 * several chunks); every answer is counted in the shard's stats, errors by code;
 * st_kreq_fail closes the connection and counts an error.
 *
 * The shard thread does what broker/runtime.c does with a frame (st_kreq_new, the header's
 * api key, version and correlation id) and hands the requests to a handler here that keeps
 * them until the whole batch has arrived, then answers them in reverse order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/buf.h"
#include "broker/request.h"
#include "broker/shard.h"
#include "io/loop.h"
#include "net/conn.h"

#define NREQ   12
#define SILENT 5 /* the request that gets no answer */

typedef struct {
    int listen_fd, port;
    st_loop_t *loop;
    st_net_t *net;
    st_kshard_t shard; /* only its stats are used */
    pthread_barrier_t ready;
    _Atomic int stop;
    bool shutting;
    st_timer_t guard;
    bool timed_out;
    st_kreq_t *held[NREQ];
    int nheld;
    bool fail_last; /* each request is failed at once instead */
    size_t arena_total[NREQ];
} srv_t;

static void srv_answer_all(srv_t *s)
{
    st_kreq_t *held[NREQ];
    int n = s->nheld;
    memcpy(held, s->held, sizeof held);
    memset(s->held, 0, sizeof s->held); /* so LeakSanitizer sees a request not freed */
    s->nheld = 0; /* answering may close the connection, which comes back here */
    for (int i = n - 1; i >= 0; i--) {
        st_kreq_t *r = held[i];
        int32_t corr = r->hdr.correlation_id;
        if (corr == SILENT) {
            st_kreq_finish_silent(r);
            continue;
        }
        if (s->fail_last) {
            st_kreq_fail(r, "test: refused");
            continue;
        }
        st_kp_api_versions_resp_t resp;
        st_kp_api_versions_resp_init(&resp);
        resp.error_code = (int16_t)(corr % 3 == 0 ? 35 : 0); /* UNSUPPORTED_VERSION on some */
        r->error_code = resp.error_code;
        ST_KREQ_RESPOND(r, api_versions, &resp);
    }
}

static void srv_on_frame(void *ctx, st_conn_t *c, uint64_t seq, uint8_t *frame, size_t len)
{
    srv_t *s = ctx;
    st_kreq_t *r = st_kreq_new(&s->shard, c, seq, frame, len);
    if (!r) {
        st_conn_respond(c, seq, NULL);
        st_conn_close(c);
        return;
    }
    if (len < 8 || s->nheld == NREQ) {
        st_kreq_fail(r, "test: bad frame");
        return;
    }
    r->api_key = (int16_t)st_be16(frame);
    r->api_version = (int16_t)st_be16(frame + 2);
    r->hdr.correlation_id = (int32_t)st_be32(frame + 4);
    /* memory tied to the request: several chunks' worth, freed with it */
    for (int i = 0; i < 8; i++) {
        char *p = st_arena_alloc(&r->arena, 6000);
        if (p)
            memset(p, 'x', 6000);
    }
    s->arena_total[r->hdr.correlation_id % NREQ] = r->arena.total;
    s->held[s->nheld++] = r;
    if (s->nheld == NREQ || s->fail_last)
        srv_answer_all(s);
}

static void srv_on_close(void *ctx, st_conn_t *c)
{
    srv_t *s = ctx;
    (void)c;
    /* requests held for a closed connection are still answered (the answers are dropped) */
    srv_answer_all(s);
}

static void srv_drained(void *arg)
{
    srv_t *s = arg;
    st_loop_stop(s->loop);
}

static void srv_before_sleep(void *arg)
{
    srv_t *s = arg;
    if (atomic_load(&s->stop) && !s->shutting) {
        s->shutting = true;
        st_net_shutdown(s->net, srv_drained, s);
    }
}

static void srv_on_guard(st_timer_t *t)
{
    srv_t *s = t->data;
    s->timed_out = true;
    atomic_store(&s->stop, 1);
    st_net_close_all(s->net);
}

static void *srv_main(void *arg)
{
    srv_t *s = arg;
    st_kshard_set_current(&s->shard);
    int rc = st_loop_create(&s->loop, 64);
    st_net_handler_t h = {srv_on_frame, srv_on_close, s};
    st_net_limits_t lim = {1 << 20, 16 << 20, 0};
    static const st_listener_t plain = {.name = "PLAINTEXT"};
    st_net_port_t port = {.fd = s->listen_fd, .listener = &plain, .make = NULL};
    if (rc == 0)
        rc = st_net_create(&s->net, s->loop, &port, 1, &h, &lim);
    if (rc == 0) {
        st_loop_add_before_sleep(s->loop, srv_before_sleep, s);
        st_timer_init(&s->guard, srv_on_guard, s);
        st_loop_timer_start(s->loop, &s->guard, 10000);
    }
    pthread_barrier_wait(&s->ready);
    if (rc == 0) {
        st_loop_run(s->loop);
        st_loop_timer_stop(s->loop, &s->guard);
        st_net_destroy(s->net);
    }
    if (s->loop)
        st_loop_destroy(s->loop);
    return NULL;
}

static void srv_start(srv_t *s, pthread_t *th, bool fail_last)
{
    memset(s, 0, sizeof *s);
    s->fail_last = fail_last;
    assert_int_equal(st_net_listen("127.0.0.1", 0, &s->listen_fd, &s->port), 0);
    pthread_barrier_init(&s->ready, NULL, 2);
    pthread_create(th, NULL, srv_main, s);
    pthread_barrier_wait(&s->ready);
    assert_non_null(s->net);
}

static void srv_stop(srv_t *s, pthread_t th)
{
    atomic_store(&s->stop, 1);
    st_loop_wake(s->loop);
    pthread_join(th, NULL);
    pthread_barrier_destroy(&s->ready);
    close(s->listen_fd);
    assert_false(s->timed_out);
}

static int client_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct timeval tv = {10, 0}; /* every read below is bounded */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* ApiVersions v0, correlation id corr, request header v1. */
static void client_send(int fd, int32_t corr)
{
    uint8_t f[4 + 2 + 2 + 4 + 2 + 4];
    st_put_be32(f, sizeof f - 4);
    f[4] = 0;
    f[5] = 18;
    f[6] = 0;
    f[7] = 0;
    st_put_be32(f + 8, (uint32_t)corr);
    f[12] = 0;
    f[13] = 4;
    memcpy(f + 14, "test", 4);
    assert_int_equal(write(fd, f, sizeof f), (ssize_t)sizeof f);
}

static bool read_full(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = read(fd, p, n);
        assert_true(k >= 0); /* not a timeout: the server answers or closes */
        if (k == 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* The next response: its correlation id and body error_code; false at end of stream. */
static bool client_recv(int fd, int32_t *corr, int16_t *error)
{
    uint8_t hdr[4];
    if (!read_full(fd, hdr, 4))
        return false;
    uint32_t n = st_be32(hdr);
    assert_true(n >= 6 && n < 4096);
    uint8_t body[4096];
    assert_true(read_full(fd, body, n));
    *corr = (int32_t)st_be32(body);
    st_arena_t a;
    st_arena_init(&a, 0);
    st_kreader_t r;
    st_kreader_init(&r, body + 4, n - 4, &a);
    st_kp_api_versions_resp_t resp;
    assert_int_equal(st_kp_api_versions_resp_decode(&r, 0, &resp), 0);
    *error = resp.error_code;
    st_arena_fini(&a);
    return true;
}

static void test_answers_leave_in_request_order(void **state)
{
    (void)state;
    static srv_t s;
    pthread_t th;
    srv_start(&s, &th, false);
    int fd = client_connect(s.port);
    for (int32_t i = 0; i < NREQ; i++)
        client_send(fd, i);
    /* answered in reverse order, one silent: the rest arrive in request order */
    for (int32_t i = 0; i < NREQ; i++) {
        if (i == SILENT)
            continue;
        int32_t corr = -1;
        int16_t err = -1;
        assert_true(client_recv(fd, &corr, &err));
        assert_int_equal(corr, i);
        assert_int_equal(err, i % 3 == 0 ? 35 : 0);
    }
    close(fd);
    srv_stop(&s, th);
    /* counted: every request, the errors by code (code + 1 is the slot) */
    assert_int_equal(atomic_load(&s.shard.stats.requests[18]), NREQ);
    int errors = 0;
    for (int32_t i = 0; i < NREQ; i++)
        errors += i != SILENT && i % 3 == 0;
    assert_int_equal(atomic_load(&s.shard.stats.request_errors[18]), errors);
    assert_int_equal(atomic_load(&s.shard.stats.request_error_codes[18][36]), errors);
    for (int i = 0; i < NREQ; i++)
        assert_true(s.arena_total[i] >= 8 * 6000); /* more than one 8 KiB chunk */
}

static void test_fail_closes_and_counts(void **state)
{
    (void)state;
    static srv_t s;
    pthread_t th;
    srv_start(&s, &th, true);
    int fd = client_connect(s.port);
    client_send(fd, 0);
    int32_t corr;
    int16_t err;
    assert_false(client_recv(fd, &corr, &err)); /* no answer: the connection is closed */
    close(fd);
    srv_stop(&s, th);
    assert_int_equal(atomic_load(&s.shard.stats.requests[18]), 1);
    assert_int_equal(atomic_load(&s.shard.stats.request_errors[18]), 1);
    assert_int_equal(atomic_load(&s.shard.stats.request_error_codes[18][0]), 1); /* code -1 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers_leave_in_request_order),
        cmocka_unit_test(test_fail_closes_and_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
