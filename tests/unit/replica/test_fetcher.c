/*
 * Unit tests for the follower fetcher: its wire helpers (the Fetch request decoded back with
 * the generated decoder, whole batches), and the fetcher thread against a fake leader on a
 * loopback socket driven by this test: Fetch with the last fetched epoch -> diverging_epoch ->
 * truncate -> position -> Fetch with the epoch left -> append -> position -> Fetch from the new
 * end -> a new high watermark (no position) -> a new log start (a position) ->
 * FENCED_LEADER_EPOCH stops the partition -> a new epoch fetches at once -> stop.
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
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "cluster/config.h"
#include "proto/kafka_gen.h"
#include "proto/kerr.h"
#include "proto/kheader.h"
#include "replica/fetcher.h"
#include "replica/follow.h"
#include "replica/wire.h"

/* A RecordBatch header (no records) at base offset `base` with `count` offsets and `epoch`. */
static size_t put_batch(uint8_t *p, int64_t base, int32_t count, int32_t epoch)
{
    memset(p, 0, 61);
    st_put_be64(p, (uint64_t)base);
    st_put_be32(p + 8, 49);
    st_put_be32(p + 12, (uint32_t)epoch);
    p[16] = 2;
    st_put_be32(p + 23, (uint32_t)(count - 1));
    return 61;
}

/* Decodes a request frame (size prefix included) written by wire.c. */
static void decode_req(const st_buf_t *b, st_arena_t *a, st_kp_req_header_t *h, st_kreader_t *r)
{
    assert_true(b->len >= 4);
    assert_int_equal(st_be32(b->data), b->len - 4);
    st_kreader_init(r, b->data + 4, b->len - 4, a);
    assert_int_equal(st_kp_req_header_decode(r, 2, h), 0);
}

static void test_fetch_req(void **state)
{
    (void)state;
    st_rwire_part_t parts[] = {
        {"a", 0, 5, 100, 4, 0},
        {"a", 3, 5, 7, -1, 3},
        {"b", 1, 2, 0, -1, -1},
    };
    st_rwire_fetch_t fr = {42, 500, 1, 8 << 20, 1 << 20};
    st_buf_t b;
    st_buf_init(&b);
    assert_int_equal(st_rwire_fetch_req(&b, 99, "strata-replica-42", &fr, parts, 3), 0);
    st_arena_t a;
    st_arena_init(&a, 0);
    st_kp_req_header_t h;
    st_kreader_t r;
    decode_req(&b, &a, &h, &r);
    assert_int_equal(h.request_api_key, ST_KP_API_FETCH);
    assert_int_equal(h.request_api_version, 12);
    assert_int_equal(h.correlation_id, 99);
    assert_true(st_kstr_eq(h.client_id, "strata-replica-42"));
    st_kp_fetch_req_t req;
    assert_int_equal(st_kp_fetch_req_decode(&r, 12, &req), 0);
    assert_int_equal(st_kreader_left(&r), 0);
    assert_int_equal(req.replica_id, 42);
    assert_int_equal(req.max_wait_ms, 500);
    assert_int_equal(req.min_bytes, 1);
    assert_int_equal(req.max_bytes, 8 << 20);
    assert_int_equal(req.isolation_level, 0);
    assert_int_equal(req.session_id, 0);
    assert_int_equal(req.session_epoch, -1);
    assert_int_equal(req.topics_count, 2);
    assert_true(st_kstr_eq(req.topics[0].topic, "a"));
    assert_int_equal(req.topics[0].partitions_count, 2);
    assert_int_equal(req.topics[0].partitions[1].partition, 3);
    assert_int_equal(req.topics[0].partitions[1].fetch_offset, 7);
    assert_int_equal(req.topics[0].partitions[1].current_leader_epoch, 5);
    assert_int_equal(req.topics[0].partitions[1].log_start_offset, 3);
    assert_int_equal(req.topics[0].partitions[1].last_fetched_epoch, -1);
    assert_int_equal(req.topics[0].partitions[0].last_fetched_epoch, 4);
    assert_int_equal(req.topics[0].partitions[1].partition_max_bytes, 1 << 20);
    assert_true(st_kstr_eq(req.topics[1].topic, "b"));
    assert_int_equal(req.topics[1].partitions[0].current_leader_epoch, 2);
    st_arena_fini(&a);
    st_buf_fini(&b);
}

static void test_whole_batches(void **state)
{
    (void)state;
    uint8_t buf[200];
    size_t n = put_batch(buf, 10, 3, 4);
    n += put_batch(buf + n, 13, 2, 6);
    int32_t epoch = -1;
    int64_t next = -1;
    assert_int_equal(st_rwire_whole_batches(buf, n, &epoch, &next), 122);
    assert_int_equal(epoch, 6);
    assert_int_equal(next, 15);
    /* a partial batch at the end is left out, whatever part of it came */
    for (size_t cut = 1; cut < 61; cut++) {
        epoch = -1;
        next = -1;
        assert_int_equal(st_rwire_whole_batches(buf, n - cut, &epoch, &next), 61);
        assert_int_equal(epoch, 4);
        assert_int_equal(next, 13);
    }
    assert_int_equal(st_rwire_whole_batches(buf, 60, &epoch, &next), 0);
    st_put_be32(buf + 8, 10); /* a length below the header's */
    assert_int_equal(st_rwire_whole_batches(buf, n, &epoch, &next), 0);
}

/* ---- the fetcher against a fake leader ---- */

typedef struct calls {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int appends, truncates, hws, positions_wanted;
    int shard;
    int32_t epoch, end_epoch;
    int64_t offset, hw, log_start;
    uint8_t *records;
    size_t len;
} calls_t;

static calls_t calls = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void h_job(void *arg, int shard, const uint8_t topic_id[16], int32_t partition,
                  int32_t leader_epoch, const st_rfollow_action_t *a, uint8_t *records,
                  bool want_position)
{
    (void)arg, (void)topic_id, (void)partition;
    pthread_mutex_lock(&calls.mu);
    calls.shard = shard;
    calls.epoch = leader_epoch;
    calls.positions_wanted += want_position;
    if (a->kind == ST_RF_DO_APPEND) {
        calls.appends++;
        free(calls.records);
        calls.records = records;
        calls.len = a->len;
        calls.hw = a->hw;
    } else if (a->kind == ST_RF_DO_TRUNCATE) {
        calls.truncates++;
        calls.offset = a->offset;
        calls.end_epoch = a->end_epoch;
    } else if (a->kind == ST_RF_DO_HW) {
        calls.hws++;
        calls.hw = a->hw;
        calls.log_start = a->log_start;
    }
    pthread_cond_broadcast(&calls.cv);
    pthread_mutex_unlock(&calls.mu);
}

/* Waits (at most 5 s) until *counter reaches n. */
static void wait_calls(int *counter, int n)
{
    int64_t until = st_mono_ms() + 5000;
    pthread_mutex_lock(&calls.mu);
    while (*counter < n && st_mono_ms() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&calls.cv, &calls.mu, &ts);
    }
    int got = *counter;
    pthread_mutex_unlock(&calls.mu);
    assert_int_equal(got, n);
}

/* The next request on fd (5 s at most): its header and body (in *frame, caller frees). */
static bool next_request(int fd, int timeout_ms, st_arena_t *a, st_kp_req_header_t *h,
                         st_kreader_t *r, uint8_t **frame)
{
    uint8_t sz[4];
    if (!read_full(fd, sz, 4, timeout_ms))
        return false;
    size_t n = st_be32(sz);
    *frame = malloc(n);
    assert_non_null(*frame);
    assert_true(read_full(fd, *frame, n, 5000));
    st_kreader_init(r, *frame, n, a);
    assert_int_equal(st_kp_req_header_decode(r, 2, h), 0);
    return true;
}

static void send_frame(int fd, st_buf_t *b)
{
    st_put_be32(b->data, (uint32_t)(b->len - 4));
    assert_int_equal(write(fd, b->data, b->len), (ssize_t)b->len);
}

static void begin_resp(st_buf_t *b, st_kwriter_t *w, int32_t corr)
{
    st_buf_clear(b);
    st_buf_put_be32(b, 0);
    st_kwriter_init(w, b);
    st_kp_resp_header_t rh = {corr};
    assert_int_equal(st_kp_resp_header_encode(w, 1, &rh), 0);
}

/* Answers a Fetch for partition 0 of "t" with `error`, records rec[0..len), hw, the log
 * start and a diverging epoch (-1: none). */
static void answer_fetch_div(int fd, int32_t corr, int16_t error, const uint8_t *rec, int32_t len,
                             int64_t hw, int64_t log_start, int32_t div_epoch, int64_t div_end)
{
    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    begin_resp(&b, &w, corr);
    st_kp_fetch_resp_partition_t p;
    st_kp_fetch_resp_partition_init(&p);
    p.partition_index = 0;
    p.error_code = error;
    p.high_watermark = hw;
    p.log_start_offset = log_start;
    p.diverging_epoch.epoch = div_epoch;
    p.diverging_epoch.end_offset = div_end;
    p.records = (st_krecords_t){rec, rec ? len : -1, NULL};
    st_kp_fetch_resp_response_t t;
    st_kp_fetch_resp_response_init(&t);
    t.topic = st_kstr("t");
    t.partitions = &p;
    t.partitions_count = 1;
    st_kp_fetch_resp_t resp;
    st_kp_fetch_resp_init(&resp);
    resp.responses = &t;
    resp.responses_count = 1;
    assert_int_equal(st_kp_fetch_resp_encode(&w, 12, &resp), 0);
    send_frame(fd, &b);
    st_buf_fini(&b);
}

static void answer_fetch(int fd, int32_t corr, int16_t error, const uint8_t *rec, int32_t len,
                         int64_t hw)
{
    answer_fetch_div(fd, corr, error, rec, len, hw, 0, -1, -1);
}

/* The next request is a Fetch of partition 0 of "t" at (epoch, offset, last fetched epoch). */
static void expect_fetch_at(int fd, st_arena_t *a, int32_t epoch, int64_t offset,
                            int32_t last_epoch, int32_t *corr)
{
    st_kp_req_header_t h;
    st_kreader_t r;
    uint8_t *frame;
    assert_true(next_request(fd, 5000, a, &h, &r, &frame));
    assert_int_equal(h.request_api_key, ST_KP_API_FETCH);
    st_kp_fetch_req_t req;
    assert_int_equal(st_kp_fetch_req_decode(&r, h.request_api_version, &req), 0);
    assert_int_equal(req.replica_id, 7);
    assert_int_equal(req.topics_count, 1);
    assert_int_equal(req.topics[0].partitions_count, 1);
    assert_int_equal(req.topics[0].partitions[0].current_leader_epoch, epoch);
    assert_int_equal(req.topics[0].partitions[0].fetch_offset, offset);
    if (last_epoch != -2)
        assert_int_equal(req.topics[0].partitions[0].last_fetched_epoch, last_epoch);
    *corr = h.correlation_id;
    free(frame);
}

static void expect_fetch(int fd, st_arena_t *a, int32_t epoch, int64_t offset, int32_t *corr)
{
    expect_fetch_at(fd, a, epoch, offset, -2, corr);
}

static void test_fetcher_thread(void **state)
{
    (void)state;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(ls, 4), 0);
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    int port = ntohs(sa.sin_port);

    st_config_t cfg;
    assert_int_equal(st_config_init(&cfg), 0);
    cfg.node_id = 7;
    st_fetcher_hooks_t hooks = {NULL, h_job};
    st_fetcher_t *f;
    char err[256];
    assert_int_equal(st_fetcher_start(&f, &cfg, &hooks, err, sizeof err), 0);
    st_follow_t fw = {.topic = "t",
                      .partition = 0,
                      .shard = 2,
                      .leader_id = 1,
                      .leader_host = "127.0.0.1",
                      .leader_port = port,
                      .leader_epoch = 5,
                      .fetch_offset = 10,
                      .last_epoch = 4};
    memset(fw.topic_id, 0xab, 16);
    st_fetcher_follow(f, &fw);
    st_fetcher_follow(f, &fw); /* the same again: no change, no second request */

    struct pollfd pfd = {ls, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 5000), 1);
    int fd = accept(ls, NULL, NULL);
    assert_true(fd >= 0);
    st_arena_t a;
    st_arena_init(&a, 0);

    /* 1. Fetch from 10 with epoch 4: the leader's largest epoch <= 4 is 3, ending at 8 */
    int32_t corr;
    expect_fetch_at(fd, &a, 5, 10, 4, &corr);
    answer_fetch_div(fd, corr, 0, NULL, -1, 8, 0, 3, 8);
    wait_calls(&calls.truncates, 1);
    assert_int_equal(calls.shard, 2);
    assert_int_equal(calls.epoch, 5);
    assert_int_equal(calls.offset, 8);
    assert_int_equal(calls.end_epoch, 3);
    /* nothing is fetched before the shard answers */
    assert_false(read_full(fd, (uint8_t[4]){0}, 4, 200));
    st_fetcher_position(f, fw.topic_id, 0, 5, 6, 3, 0, 0); /* the local epoch 3 ended at 6 */

    /* 2. Fetch from 6 with the epoch left (3): two whole batches and part of a third */
    expect_fetch_at(fd, &a, 5, 6, 3, &corr);
    uint8_t rec[200];
    size_t n = put_batch(rec, 6, 2, 3);
    n += put_batch(rec + n, 8, 1, 5);
    put_batch(rec + n, 9, 1, 5);
    answer_fetch(fd, corr, 0, rec, (int32_t)n + 30, 9);
    wait_calls(&calls.appends, 1);
    assert_int_equal(calls.len, n);
    assert_memory_equal(calls.records, rec, n);
    assert_int_equal(calls.hw, 9);
    assert_false(read_full(fd, (uint8_t[4]){0}, 4, 200)); /* waits for the position */
    st_fetcher_position(f, fw.topic_id, 0, 5, 9, 5, 0, 0);

    /* 3. Fetch from 9: no records, a new high watermark */
    expect_fetch(fd, &a, 5, 9, &corr);
    answer_fetch(fd, corr, 0, NULL, -1, 9 + 0);
    expect_fetch(fd, &a, 5, 9, &corr);
    answer_fetch(fd, corr, 0, NULL, -1, 9 + 0); /* unchanged: no hook */
    expect_fetch(fd, &a, 5, 9, &corr);
    answer_fetch(fd, corr, 0, NULL, -1, 9 + 1);
    wait_calls(&calls.hws, 1);
    assert_int_equal(calls.hw, 10);
    pthread_mutex_lock(&calls.mu);
    assert_int_equal(calls.positions_wanted, 2); /* the truncation's and the append's */
    pthread_mutex_unlock(&calls.mu);

    /* 3'. The leader's log start moved (DeleteRecords): handed over with a position wanted */
    expect_fetch_at(fd, &a, 5, 9, 5, &corr);
    answer_fetch_div(fd, corr, 0, NULL, -1, 10, 4, -1, -1);
    wait_calls(&calls.hws, 2);
    assert_int_equal(calls.log_start, 4);
    assert_false(read_full(fd, (uint8_t[4]){0}, 4, 200)); /* waits for the position */
    pthread_mutex_lock(&calls.mu);
    assert_int_equal(calls.positions_wanted, 3);
    pthread_mutex_unlock(&calls.mu);
    st_fetcher_position(f, fw.topic_id, 0, 5, 9, 5, 4, 0);

    /* 4. FENCED_LEADER_EPOCH: no more fetches until a new epoch */
    expect_fetch(fd, &a, 5, 9, &corr);
    answer_fetch(fd, corr, ST_KERR_FENCED_LEADER_EPOCH, NULL, -1, -1);
    assert_false(read_full(fd, (uint8_t[4]){0}, 4, 300));
    fw.leader_epoch = 6;
    fw.fetch_offset = 0;
    fw.last_epoch = -1; /* an empty log */
    st_fetcher_follow(f, &fw);
    expect_fetch_at(fd, &a, 6, 0, -1, &corr);

    /* 5. unfollowed: the connection closes, nothing more is asked */
    st_fetcher_unfollow(f, fw.topic_id, 0);
    uint8_t x;
    assert_false(read_full(fd, &x, 1, 2000));

    st_fetcher_stop(f);
    pthread_mutex_lock(&calls.mu);
    assert_int_equal(calls.appends, 1);
    assert_int_equal(calls.truncates, 1);
    assert_int_equal(calls.hws, 2);
    free(calls.records);
    calls.records = NULL;
    pthread_mutex_unlock(&calls.mu);
    close(fd);
    close(ls);
    st_arena_fini(&a);
    st_config_fini(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fetch_req),
        cmocka_unit_test(test_whole_batches),
        cmocka_unit_test(test_fetcher_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
