/*
 * Unit tests for the inter-broker client (replica/client.h) against fake brokers on loopback
 * sockets driven by this test: a request to a broker id framed with the client's header and
 * answered; a request to a partition's leader whose answer asks for a retry (NOT_LEADER) going
 * to the new leader the metadata names; a connection lost before the answer retried on a new
 * connection; tries bounded when no broker can be routed to; and stop finishing what is left.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "replica/peer_io.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "cluster/metadata.h"
#include "proto/kheader.h"
#include "replica/client.h"

#define WAIT_MS 5000

/* ---- a fake broker: a listening socket the test accepts and answers on ---- */

static int listen_on(int *port)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(ls, 4), 0);
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    *port = ntohs(sa.sin_port);
    return ls;
}

static int accept_within(int ls, int timeout_ms)
{
    struct pollfd pfd = {ls, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, timeout_ms), 1);
    int fd = accept(ls, NULL, NULL);
    assert_true(fd >= 0);
    return fd;
}

/* Reads one request: checks its header (key, version, client id) and body; returns its
 * correlation id. */
static int32_t expect_request(int fd, int16_t key, int16_t version, const char *body)
{
    uint8_t sz[4];
    assert_true(read_full(fd, sz, 4, WAIT_MS));
    size_t n = st_be32(sz);
    uint8_t *frame = malloc(n);
    assert_non_null(frame);
    assert_true(read_full(fd, frame, n, WAIT_MS));
    st_arena_t a;
    st_arena_init(&a, 1024);
    st_kreader_t r;
    st_kreader_init(&r, frame, n, &a);
    st_kp_req_header_t h;
    assert_int_equal(st_kp_req_header_decode(&r, st_kp_req_header_version(key, version), &h), 0);
    assert_int_equal(h.request_api_key, key);
    assert_int_equal(h.request_api_version, version);
    assert_true(st_kstr_eq(h.client_id, "strata-test"));
    assert_int_equal(st_kreader_left(&r), strlen(body));
    assert_memory_equal(r.p, body, strlen(body));
    st_arena_fini(&a);
    free(frame);
    return h.correlation_id;
}

/* Answers: the correlation id, then payload. */
static void answer(int fd, int32_t corr, const char *payload)
{
    size_t n = 4 + strlen(payload);
    uint8_t *b = malloc(4 + n);
    assert_non_null(b);
    st_put_be32(b, (uint32_t)n);
    st_put_be32(b + 4, (uint32_t)corr);
    memcpy(b + 8, payload, strlen(payload));
    assert_int_equal(write(fd, b, 4 + n), (ssize_t)(4 + n));
    free(b);
}

/* ---- requests and their outcomes ---- */

typedef struct outcome {
    st_client_req_t req;
    int calls;       /* done calls */
    int err;         /* of the last */
    char got[64];    /* the last answer's payload (after the correlation id) */
    int retry_first; /* answers to ask a retry for */
    int64_t done_ms;
} outcome_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static int on_done(st_client_req_t *req, int err, const uint8_t *frame, size_t len)
{
    outcome_t *o = req->arg;
    pthread_mutex_lock(&mu);
    o->calls++;
    o->err = err;
    o->done_ms = st_mono_ms();
    int verdict = ST_CLIENT_DONE;
    if (err == 0) {
        assert_true(len >= 4);
        size_t n = len - 4 < sizeof o->got - 1 ? len - 4 : sizeof o->got - 1;
        memcpy(o->got, frame + 4, n);
        o->got[n] = 0;
        if (o->retry_first > 0) {
            o->retry_first--;
            verdict = ST_CLIENT_RETRY;
        }
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return verdict;
}

/* Waits (bounded) until o was called back `calls` times. */
static void wait_calls(outcome_t *o, int calls)
{
    int64_t end = st_mono_ms() + WAIT_MS;
    pthread_mutex_lock(&mu);
    while (o->calls < calls && st_mono_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&cv, &mu, &ts);
    }
    int got = o->calls;
    pthread_mutex_unlock(&mu);
    assert_int_equal(got, calls);
}

static void req_init(outcome_t *o, int32_t broker, const char *body)
{
    memset(o, 0, sizeof *o);
    o->req.broker = broker;
    o->req.api_key = 3; /* Metadata v12: a flexible request header (v2) */
    o->req.api_version = 12;
    o->req.body = (const uint8_t *)body;
    o->req.len = strlen(body);
    o->req.done = on_done;
    o->req.arg = o;
}

/* Metadata with brokers 1 and 2 on the given ports and topic "t" (2 partitions) led by
 * `leader`. */
static st_md_t *metadata(int port1, int port2, int32_t leader)
{
    st_md_t *md = st_md_new("c", 1);
    assert_non_null(md);
    assert_int_equal(st_md_add_broker(md, 1, "127.0.0.1", port1), 0);
    assert_int_equal(st_md_add_broker(md, 2, "127.0.0.1", port2), 0);
    uint8_t id[16];
    memset(id, 7, sizeof id);
    st_md_topic_t *t = st_md_topic_new("t", id, 2);
    assert_non_null(t);
    for (int i = 0; i < 2; i++)
        t->partitions[i].leader = leader;
    assert_int_equal(st_md_add_topic(md, t), 0);
    return md;
}

static void test_client(void **state)
{
    (void)state;
    int port1, port2;
    int ls1 = listen_on(&port1), ls2 = listen_on(&port2);
    st_client_t *cl;
    char err[256];
    assert_int_equal(st_client_start(&cl, "strata-test", NULL, err, sizeof err), 0);
    st_md_t *md = metadata(port1, port2, 2);
    st_client_set_metadata(cl, md);
    st_md_unref(md);

    /* By broker id: framed with the client's header, answered. */
    outcome_t a;
    req_init(&a, 1, "hello");
    st_client_send(cl, &a.req);
    int fd1 = accept_within(ls1, WAIT_MS);
    int32_t corr = expect_request(fd1, 3, 12, "hello");
    answer(fd1, corr, "world");
    wait_calls(&a, 1);
    assert_int_equal(a.err, 0);
    assert_string_equal(a.got, "world");

    /* To the leader of t-1 (broker 2), whose answer says it no longer leads: once the
     * metadata names broker 1, the retry goes there, on the connection already open. */
    outcome_t b;
    req_init(&b, -1, "leader?");
    b.req.topic = "t";
    b.req.partition = 1;
    b.retry_first = 1;
    st_client_send(cl, &b.req);
    int fd2 = accept_within(ls2, WAIT_MS);
    corr = expect_request(fd2, 3, 12, "leader?");
    md = metadata(port1, port2, 1);
    st_client_set_metadata(cl, md);
    st_md_unref(md);
    answer(fd2, corr, "NOT_LEADER");
    corr = expect_request(fd1, 3, 12, "leader?");
    answer(fd1, corr, "led");
    wait_calls(&b, 2);
    assert_int_equal(b.err, 0);
    assert_string_equal(b.got, "led");
    assert_int_equal(b.req.tries, 2);

    /* The connection is lost before the answer: the request goes again on a new one. */
    outcome_t c;
    req_init(&c, 1, "again");
    st_client_send(cl, &c.req);
    expect_request(fd1, 3, 12, "again");
    close(fd1);
    fd1 = accept_within(ls1, WAIT_MS);
    corr = expect_request(fd1, 3, 12, "again");
    answer(fd1, corr, "ok");
    wait_calls(&c, 1);
    assert_int_equal(c.err, 0);
    assert_string_equal(c.got, "ok");

    /* No such broker: three routes, ST_CLIENT_RETRY_MS apart, then the error, once. */
    outcome_t d;
    req_init(&d, 9, "nobody");
    d.req.max_tries = 3;
    int64_t t0 = st_mono_ms();
    st_client_send(cl, &d.req);
    wait_calls(&d, 1);
    assert_int_equal(d.err, ST_E_NOT_LEADER);
    assert_int_equal(d.req.tries, 3);
    assert_true(d.done_ms - t0 >= 2 * ST_CLIENT_RETRY_MS);

    /* Stop with a request in flight: finished with ST_E_CLOSED. */
    outcome_t e;
    req_init(&e, 1, "late");
    st_client_send(cl, &e.req);
    expect_request(fd1, 3, 12, "late");
    st_client_stop(cl);
    assert_int_equal(e.calls, 1);
    assert_int_equal(e.err, ST_E_CLOSED);

    close(fd1);
    close(fd2);
    close(ls1);
    close(ls2);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the server: a peer gone shows as EPIPE, not a signal */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
