/*
 * test_txn_send.c — the transaction coordinator's sending side (kafka/txn_route.h's
 * st_ktxn_markers_send) with the real inter-broker client against a fake partition leader on
 * a loopback socket: one WriteTxnMarkers v1 per partition carrying the producer, epoch,
 * result and coordinator epoch; a partition whose leader answers NOT_LEADER_OR_FOLLOWER is sent
 * again; UNKNOWN_TOPIC_OR_PARTITION counts as done; the job finishes once, after the last
 * partition; TRANSACTION_COORDINATOR_FENCED ends it with an error; a stop finishes what is in
 * flight.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "cluster/metadata.h"
#include "kafka/txn_route.h"
#include "proto/kerr.h"
#include "proto/kheader.h"
#include "replica/client.h"

#define WAIT_MS 5000

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

static int accept_within(int ls)
{
    struct pollfd pfd = {ls, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
    int fd = accept(ls, NULL, NULL);
    assert_true(fd >= 0);
    return fd;
}

static bool read_full(int fd, uint8_t *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, WAIT_MS) <= 0)
            return false;
        ssize_t r = read(fd, p + got, n - got);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

/* One marker request as the fake leader read it. */
typedef struct {
    int32_t corr;
    int64_t pid;
    int16_t epoch;
    bool commit;
    int32_t coordinator_epoch;
    char topic[32];
    int32_t partition;
} seen_t;

static seen_t read_marker(int fd)
{
    uint8_t sz[4];
    assert_true(read_full(fd, sz, 4));
    size_t n = st_be32(sz);
    uint8_t *frame = malloc(n);
    assert_true(read_full(fd, frame, n));
    st_arena_t a;
    st_arena_init(&a, 1024);
    st_kreader_t r;
    st_kreader_init(&r, frame, n, &a);
    st_kp_req_header_t h;
    assert_int_equal(st_kp_req_header_decode(&r, st_kp_req_header_version(27, 1), &h), 0);
    assert_int_equal(h.request_api_key, 27);
    assert_int_equal(h.request_api_version, 1);
    st_kp_write_txn_markers_req_t req;
    assert_int_equal(st_kp_write_txn_markers_req_decode(&r, 1, &req), 0);
    assert_int_equal(st_kreader_left(&r), 0);
    assert_int_equal(req.markers_count, 1);
    const st_kp_write_txn_markers_req_marker_t *m = &req.markers[0];
    assert_int_equal(m->topics_count, 1);
    assert_int_equal(m->topics[0].partition_indexes_count, 1);
    seen_t s = {.corr = h.correlation_id,
                .pid = m->producer_id,
                .epoch = m->producer_epoch,
                .commit = m->transaction_result,
                .coordinator_epoch = m->coordinator_epoch,
                .partition = m->topics[0].partition_indexes[0]};
    snprintf(s.topic, sizeof s.topic, "%.*s", (int)m->topics[0].name.len, m->topics[0].name.ptr);
    st_arena_fini(&a);
    free(frame);
    return s;
}

static void answer(int fd, const seen_t *s, int16_t error)
{
    st_kp_write_txn_markers_resp_partition_t p = {s->partition, error};
    st_kp_write_txn_markers_resp_topic_result_t t = {st_kstr(s->topic), &p, 1};
    st_kp_write_txn_markers_resp_marker_result_t m = {s->pid, &t, 1};
    st_kp_write_txn_markers_resp_t resp = {&m, 1};
    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    st_kwriter_i32(&w, 0); /* size, set below */
    st_kp_resp_header_t rh = {.correlation_id = s->corr};
    assert_int_equal(st_kp_resp_header_encode(&w, st_kp_resp_header_version(27, 1), &rh), 0);
    assert_int_equal(st_kp_write_txn_markers_resp_encode(&w, 1, &resp), 0);
    st_put_be32(b.data, (uint32_t)(b.len - 4));
    assert_int_equal(write(fd, b.data, b.len), (ssize_t)b.len);
    st_buf_fini(&b);
}

/* ---- the job's end ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

typedef struct {
    int calls;
    uint64_t id;
    int err;
} fin_t;

static void finished(void *arg, uint64_t id, int err)
{
    fin_t *f = arg;
    pthread_mutex_lock(&mu);
    f->calls++;
    f->id = id;
    f->err = err;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static int calls_of(fin_t *f)
{
    pthread_mutex_lock(&mu);
    int n = f->calls;
    pthread_mutex_unlock(&mu);
    return n;
}

static void wait_finished(fin_t *f)
{
    int64_t until = st_mono_ms() + WAIT_MS;
    pthread_mutex_lock(&mu);
    while (f->calls == 0 && st_mono_ms() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&cv, &mu, &ts);
    }
    pthread_mutex_unlock(&mu);
    assert_int_equal(f->calls, 1);
}

static st_md_t *metadata(int port)
{
    st_md_t *md = st_md_new("c", 1);
    assert_int_equal(st_md_add_broker(md, 1, "127.0.0.1", port), 0);
    uint8_t id[16];
    memset(id, 7, sizeof id);
    st_md_topic_t *t = st_md_topic_new("t", id, 2);
    t->partitions[0].leader = t->partitions[1].leader = 1;
    assert_int_equal(st_md_add_topic(md, t), 0);
    memset(id, 8, sizeof id);
    t = st_md_topic_new("u", id, 1);
    t->partitions[0].leader = 1;
    assert_int_equal(st_md_add_topic(md, t), 0);
    return md;
}

static void test_markers_sent_until_answered(void **state)
{
    (void)state;
    int port;
    int ls = listen_on(&port);
    st_client_t *cl;
    char err[256];
    assert_int_equal(st_client_start(&cl, "strata-test", NULL, err, sizeof err), 0);
    st_md_t *md = metadata(port);
    st_client_set_metadata(cl, md);
    st_md_unref(md);

    st_ttp_t parts[] = {{st_kstr("t"), 0}, {st_kstr("t"), 1}, {st_kstr("u"), 0}};
    st_tmarkers_t m = {.id = 41,
                       .coordinator_epoch = 5,
                       .producer_id = 77,
                       .producer_epoch = 3,
                       .commit = true,
                       .n = 3,
                       .parts = parts};
    fin_t f = {0};
    assert_int_equal(st_ktxn_markers_send(cl, &m, finished, &f), 0);
    int fd = accept_within(ls);
    bool t0_refused = false, t1 = false, u0 = false, t0 = false;
    for (int i = 0; i < 4; i++) {
        seen_t s = read_marker(fd);
        assert_int_equal(s.pid, 77);
        assert_int_equal(s.epoch, 3);
        assert_true(s.commit);
        assert_int_equal(s.coordinator_epoch, 5);
        assert_int_equal(calls_of(&f), 0); /* not before the last partition */
        if (!strcmp(s.topic, "t") && s.partition == 0 && !t0_refused) {
            t0_refused = true;
            answer(fd, &s, ST_KERR_NOT_LEADER_OR_FOLLOWER); /* sent again */
        } else if (!strcmp(s.topic, "t") && s.partition == 0) {
            t0 = true;
            answer(fd, &s, 0);
        } else if (!strcmp(s.topic, "t") && s.partition == 1) {
            assert_false(t1);
            t1 = true;
            answer(fd, &s, 0);
        } else {
            assert_string_equal(s.topic, "u");
            assert_false(u0);
            u0 = true;
            answer(fd, &s, ST_KERR_UNKNOWN_TOPIC_OR_PARTITION); /* gone: done */
        }
    }
    assert_true(t0 && t1 && u0);
    wait_finished(&f);
    assert_int_equal(f.id, 41);
    assert_int_equal(f.err, 0);

    /* a newer coordinator fenced this one: the job ends with an error */
    m.id = 42;
    m.commit = false;
    m.n = 1;
    fin_t g = {0};
    assert_int_equal(st_ktxn_markers_send(cl, &m, finished, &g), 0);
    seen_t s = read_marker(fd);
    assert_false(s.commit);
    answer(fd, &s, ST_KERR_TRANSACTION_COORDINATOR_FENCED);
    wait_finished(&g);
    assert_int_equal(g.id, 42);
    assert_int_equal(g.err, ST_E_NOT_LEADER);

    /* stopped with a marker in flight: finished with ST_E_CLOSED */
    m.id = 43;
    fin_t h = {0};
    assert_int_equal(st_ktxn_markers_send(cl, &m, finished, &h), 0);
    read_marker(fd);
    st_client_stop(cl);
    wait_finished(&h);
    assert_int_equal(h.err, ST_E_CLOSED);
    close(fd);
    close(ls);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_markers_sent_until_answered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
