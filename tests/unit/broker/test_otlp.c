/* test_otlp.c — tracing's pieces (base/trace.h, broker/otlp.h): sampling and the bounded span
 * queue, the OTLP/HTTP JSON body, the endpoint URL, and the small HTTP client against a
 * listener on 127.0.0.1 that answers, one that never answers, and a port nobody listens on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "broker/otlp.h"

static void test_sampling_and_queue(void **state)
{
    (void)state;
    st_trace_ctx_t c;
    st_trace_begin(&c);
    assert_int_equal(c.span_id, 0); /* off until enabled */
    assert_int_equal(st_trace_enable(1.5, 4), -EINVAL);
    assert_int_equal(st_trace_enable(0, 4), 0);
    for (int i = 0; i < 100; i++) {
        st_trace_begin(&c);
        assert_int_equal(c.span_id, 0);
    }
    assert_int_equal(st_trace_enable(1, 4), 0);
    st_trace_ctx_t a, b;
    st_trace_begin(&a);
    st_trace_begin(&b);
    assert_int_not_equal(a.span_id, 0);
    assert_memory_not_equal(a.trace_id, b.trace_id, 16);
    /* a half: some of 1000, not all, not none */
    assert_int_equal(st_trace_enable(0.5, 4), 0);
    int n = 0;
    for (int i = 0; i < 1000; i++) {
        st_trace_begin(&c);
        n += c.span_id != 0;
    }
    assert_true(n > 350 && n < 650);

    assert_int_equal(st_trace_enable(1, 4), 0);
    st_trace_stats_t s0, s1;
    st_trace_stats(&s0);
    for (int i = 0; i < 5; i++) {
        st_span_t sp;
        st_span_init(&sp, &a, st_trace_new_id(), "x", 10);
        st_span_attr_int(&sp, "i", i);
        st_span_end(&sp, 5); /* an end before the start is clamped */
    }
    st_trace_stats(&s1);
    assert_int_equal(s1.finished - s0.finished, 4);
    assert_int_equal(s1.dropped - s0.dropped, 1); /* the queue holds 4 */
    st_span_t out[8];
    assert_int_equal(st_trace_take(out, 3), 3);
    assert_int_equal(out[0].attrs[0].i, 0);
    assert_int_equal(out[2].attrs[0].i, 2);
    assert_int_equal(out[0].end_ns, 10);
    assert_int_equal(out[0].parent_id, a.span_id);
    assert_int_equal(st_trace_take(out, 8), 1);
    assert_int_equal(out[0].attrs[0].i, 3);
    assert_int_equal(st_trace_take(out, 8), 0);
    st_trace_count_export(7, false);
    st_trace_count_export(9, true);
    st_trace_stats(&s0);
    assert_int_equal(s0.errors - s1.errors, 1);
    assert_int_equal(s0.dropped - s1.dropped, 7);
    assert_int_equal(s0.exported - s1.exported, 9);
    st_trace_disable();
}

static json_t *find_attr(json_t *attrs, const char *key)
{
    size_t i;
    json_t *a;
    json_array_foreach(attrs, i, a)
    {
        if (strcmp(json_string_value(json_object_get(a, "key")), key) == 0)
            return json_object_get(a, "value");
    }
    return NULL;
}

static void test_encode(void **state)
{
    (void)state;
    assert_int_equal(st_trace_enable(1, 0), 0);
    st_trace_ctx_t c = {.trace_id = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x10, 0x32,
                                     0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe},
                        .span_id = 0x0102030405060708ull};
    st_span_t sp[2];
    int64_t t = st_mono_ns();
    st_span_root(&sp[0], &c, "kafka.produce", t);
    st_span_attr_str(&sp[0], "kafka.client_id", "a\"b\\c\n\xc3\xa9", -1);
    st_span_attr_int(&sp[0], "kafka.acks", -1);
    sp[0].error = true;
    sp[0].end_ns = t + 5000;
    st_span_init(&sp[1], &c, 0xfedcba9876543210ull, "kafka.produce.append", t + 1000);
    st_span_attr_str(&sp[1], "messaging.destination.name", "topic-xyz", 5);
    sp[1].end_ns = t + 2000;
    st_buf_t b;
    st_buf_init(&b);
    assert_int_equal(st_otlp_encode("svc", sp, 2, &b), 0);
    json_error_t je;
    json_t *j = json_loadb((const char *)b.data, b.len, 0, &je);
    assert_non_null(j);
    json_t *rs = json_array_get(json_object_get(j, "resourceSpans"), 0);
    json_t *res = json_object_get(json_object_get(rs, "resource"), "attributes");
    assert_string_equal(
        json_string_value(json_object_get(find_attr(res, "service.name"), "stringValue")), "svc");
    json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(ss, "scope"), "name")),
                        "strata");
    json_t *spans = json_object_get(ss, "spans");
    assert_int_equal(json_array_size(spans), 2);
    json_t *root = json_array_get(spans, 0), *child = json_array_get(spans, 1);
    assert_string_equal(json_string_value(json_object_get(root, "traceId")),
                        "0123456789abcdef1032547698badcfe");
    assert_string_equal(json_string_value(json_object_get(root, "spanId")), "0102030405060708");
    assert_null(json_object_get(root, "parentSpanId"));
    assert_string_equal(json_string_value(json_object_get(root, "name")), "kafka.produce");
    assert_int_equal(json_integer_value(json_object_get(root, "kind")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(root, "status"), "code")),
                     2);
    /* times: decimal strings, Unix nanoseconds, 5 us apart */
    const char *st = json_string_value(json_object_get(root, "startTimeUnixNano"));
    const char *en = json_string_value(json_object_get(root, "endTimeUnixNano"));
    assert_non_null(st);
    assert_true(strtoll(st, NULL, 10) > 1600000000LL * 1000000000LL);
    assert_int_equal(strtoll(en, NULL, 10) - strtoll(st, NULL, 10), 5000);
    json_t *ra = json_object_get(root, "attributes");
    /* quotes and backslashes survive; control and non-ASCII bytes became '?' */
    assert_string_equal(
        json_string_value(json_object_get(find_attr(ra, "kafka.client_id"), "stringValue")),
        "a\"b\\c???");
    assert_string_equal(json_string_value(json_object_get(find_attr(ra, "kafka.acks"), "intValue")),
                        "-1");
    assert_string_equal(json_string_value(json_object_get(child, "parentSpanId")),
                        "0102030405060708");
    assert_string_equal(json_string_value(json_object_get(child, "spanId")), "fedcba9876543210");
    assert_int_equal(json_integer_value(json_object_get(child, "kind")), 1);
    assert_null(json_object_get(child, "status"));
    assert_string_equal(
        json_string_value(json_object_get(
            find_attr(json_object_get(child, "attributes"), "messaging.destination.name"),
            "stringValue")),
        "topic");
    json_decref(j);
    st_buf_fini(&b);
    st_trace_disable();
}

static void test_parse_url(void **state)
{
    (void)state;
    char host[64], path[64], err[256];
    int port = 0;
    assert_int_equal(st_otlp_parse_url("http://127.0.0.1:4318/v1/traces", host, sizeof host, &port,
                                       path, sizeof path, err, sizeof err),
                     0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 4318);
    assert_string_equal(path, "/v1/traces");
    assert_int_equal(st_otlp_parse_url("http://collector.example:80", host, sizeof host, &port,
                                       path, sizeof path, err, sizeof err),
                     0);
    assert_string_equal(host, "collector.example");
    assert_string_equal(path, "/");
    assert_int_equal(st_otlp_parse_url("http://[::1]:4318/v1/traces", host, sizeof host, &port,
                                       path, sizeof path, err, sizeof err),
                     0);
    assert_string_equal(host, "::1");
    const char *bad[] = {
        "https://h:1/",    "h:4318/x",     "http://h/x",   "http://:1/",     "http://h:0/",
        "http://h:65536/", "http://h:1x/", "http://[::1/", "http://h:1/a b", "",
        "http://h:/"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(
            st_otlp_parse_url(bad[i], host, sizeof host, &port, path, sizeof path, err, sizeof err),
            -EINVAL);
    assert_non_null(strstr(err, "http://h:/"));
}

/* A listener on 127.0.0.1: answers each connection with `answer` (NULL: reads and never
 * answers, until the client goes), keeping what it read. */
typedef struct {
    int fd, port;
    const char *answer;
    char got[8192];
    size_t ngot;
} srv_t;

static void srv_open(srv_t *s, const char *answer)
{
    memset(s, 0, sizeof *s);
    s->answer = answer;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(s->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s->fd, 4), 0);
    socklen_t l = sizeof a;
    getsockname(s->fd, (struct sockaddr *)&a, &l);
    s->port = ntohs(a.sin_port);
}

static void *srv_run(void *arg)
{
    srv_t *s = arg;
    int c = accept(s->fd, NULL, NULL);
    if (c < 0)
        return NULL;
    for (;;) { /* the head and the body (Content-Length says how much: here, all of it) */
        ssize_t k = recv(c, s->got + s->ngot, sizeof s->got - 1 - s->ngot, 0);
        if (k <= 0)
            break;
        s->ngot += (size_t)k;
        char *h = strstr(s->got, "\r\n\r\n");
        char *cl = strstr(s->got, "Content-Length: ");
        if (s->answer && h && cl && s->ngot >= (size_t)(h + 4 - s->got) + strtoul(cl + 16, 0, 10))
            break;
    }
    if (s->answer)
        send(c, s->answer, strlen(s->answer), MSG_NOSIGNAL);
    close(c);
    return NULL;
}

static void test_post(void **state)
{
    (void)state;
    char err[256];
    srv_t s;
    pthread_t t;
    srv_open(&s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
    pthread_create(&t, NULL, srv_run, &s);
    assert_int_equal(
        st_otlp_post("127.0.0.1", s.port, "/v1/traces", "{\"a\":1}", 7, 2000, err, sizeof err),
        200);
    pthread_join(t, NULL);
    s.got[s.ngot] = 0;
    assert_non_null(strstr(s.got, "POST /v1/traces HTTP/1.1\r\n"));
    assert_non_null(strstr(s.got, "Content-Type: application/json\r\n"));
    assert_non_null(strstr(s.got, "Content-Length: 7\r\n"));
    assert_non_null(strstr(s.got, "\r\n\r\n{\"a\":1}"));
    close(s.fd);

    srv_open(&s, "HTTP/1.0 503 Service Unavailable\r\n\r\n");
    pthread_create(&t, NULL, srv_run, &s);
    assert_int_equal(st_otlp_post("127.0.0.1", s.port, "/", "x", 1, 2000, err, sizeof err), 503);
    pthread_join(t, NULL);
    close(s.fd);

    srv_open(&s, "SSH-2.0-OpenSSH\r\n");
    pthread_create(&t, NULL, srv_run, &s);
    assert_int_equal(st_otlp_post("127.0.0.1", s.port, "/", "x", 1, 2000, err, sizeof err),
                     -EPROTO);
    pthread_join(t, NULL);
    close(s.fd);

    /* never answers: the timeout ends it */
    srv_open(&s, NULL);
    pthread_create(&t, NULL, srv_run, &s);
    int64_t t0 = st_mono_ms();
    assert_int_equal(st_otlp_post("127.0.0.1", s.port, "/", "x", 1, 200, err, sizeof err),
                     -ETIMEDOUT);
    int64_t took = st_mono_ms() - t0;
    assert_true(took >= 190 && took < 2000);
    assert_non_null(strstr(err, "timed out"));
    pthread_join(t, NULL);

    /* nobody listens (the port was just freed) */
    int port = s.port;
    close(s.fd);
    assert_int_equal(st_otlp_post("127.0.0.1", port, "/", "x", 1, 2000, err, sizeof err),
                     -ECONNREFUSED);
    assert_non_null(strstr(err, "cannot connect"));
}

static void test_start_refusals(void **state)
{
    (void)state;
    char err[512];
    assert_int_equal(st_otlp_start("", "0.01", "strata", err, sizeof err), 0); /* off */
    assert_int_equal(st_otlp_start("", "2", "strata", err, sizeof err), -1);
    assert_non_null(strstr(err, "tracing.sample.ratio"));
    assert_int_equal(st_otlp_start("http://h/", "1", "strata", err, sizeof err), -1);
    assert_non_null(strstr(err, "tracing.endpoint"));
    assert_int_equal(st_otlp_start("http://h:1/", "1", "", err, sizeof err), -1);
    assert_non_null(strstr(err, "tracing.service.name"));
    st_otlp_stop(); /* nothing started: nothing to do */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampling_and_queue), cmocka_unit_test(test_encode),
        cmocka_unit_test(test_parse_url),          cmocka_unit_test(test_post),
        cmocka_unit_test(test_start_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
