/*
 * Unit tests for net/: framing of partial frames, response order, backpressure, a peer that
 * goes away mid-request, the copy path of a transport that cannot sendfile, short writes, a
 * transport handshake, and the authentication state machine.
 *
 * Each test serves one end of a socketpair through the real event loop (st_net_adopt) and
 * plays the client on the other end from a 1 ms timer on the same loop: the client writes
 * its script in the chunks the test names and reads what comes back, and the loop stops
 * once the test's condition holds or its deadline passes (every wait is bounded).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "net/auth.h"
#include "net/conn.h"
#include "net/transport.h"

#define MAXF 4096

typedef struct tctx tctx_t;
struct tctx {
    st_loop_t *loop;
    st_net_t *net;
    st_listener_t listener;
    int cfd; /* the client's end */
    st_conn_t *conn;
    /* the server side */
    int nframes;
    uint64_t seqs[MAXF];
    uint8_t *frames[MAXF];
    size_t lens[MAXF];
    bool hold;        /* keep frames unanswered (the test answers) */
    size_t resp_size; /* > 0: answer each frame with this many bytes instead of an echo */
    int closed;       /* on_close calls */
    int64_t mute_ms;  /* > 0: the first frame mutes the connection this long */
    /* the client side */
    st_buf_t in;           /* bytes received */
    const uint8_t *script; /* bytes to write */
    size_t script_len, script_pos;
    const size_t *chunks; /* write sizes, repeated; NULL: as much as the socket takes */
    int nchunks, chunk_i;
    bool client_reads;
    bool client_closes_after_script;
    /* the wait */
    st_timer_t tick;
    bool (*cond)(tctx_t *);
    int64_t deadline_ms;
    bool met;
};

static uint8_t *frame_echo(const uint8_t *f, size_t len, size_t *out_len)
{
    uint8_t *p = malloc(len + 4);
    st_put_be32(p, (uint32_t)len);
    memcpy(p + 4, f, len);
    *out_len = len + 4;
    return p;
}

static st_out_t *make_answer(tctx_t *t, const uint8_t *f, size_t len)
{
    st_out_t *o = st_out_new();
    if (t->resp_size) {
        uint8_t *p = st_buf_extend(&o->mem, t->resp_size);
        memset(p, 0x5a, t->resp_size);
        st_put_be32(p, (uint32_t)(t->resp_size - 4));
    } else {
        size_t n;
        uint8_t *e = frame_echo(f, len, &n);
        st_buf_append(&o->mem, e, n);
        free(e);
    }
    return o;
}

static void on_frame(void *ctx, st_conn_t *c, uint64_t seq, uint8_t *frame, size_t len)
{
    tctx_t *t = ctx;
    assert_true(t->nframes < MAXF);
    t->seqs[t->nframes] = seq;
    t->lens[t->nframes] = len;
    if (t->mute_ms > 0 && t->nframes == 0)
        st_conn_mute(c, t->mute_ms);
    if (t->hold) {
        t->frames[t->nframes++] = frame;
        return;
    }
    t->frames[t->nframes++] = NULL;
    st_conn_respond(c, seq, make_answer(t, frame, len));
    free(frame);
}

static void on_close(void *ctx, st_conn_t *c)
{
    tctx_t *t = ctx;
    (void)c;
    t->closed++;
}

static void client_step(tctx_t *t)
{
    while (t->script_pos < t->script_len) {
        size_t n = t->script_len - t->script_pos;
        if (t->chunks) {
            size_t want = t->chunks[t->chunk_i % t->nchunks];
            if (want < n)
                n = want;
        }
        ssize_t w = write(t->cfd, t->script + t->script_pos, n);
        if (w <= 0)
            break; /* full: next tick */
        t->script_pos += (size_t)w;
        if (t->chunks) {
            t->chunk_i++;
            break; /* one chunk per tick, so the server sees each on its own */
        }
    }
    if (t->client_closes_after_script && t->script_pos == t->script_len && t->cfd >= 0) {
        close(t->cfd);
        t->cfd = -1;
    }
    if (t->client_reads && t->cfd >= 0)
        for (int i = 0; i < 1024; i++) {
            uint8_t *p = st_buf_extend(&t->in, 65536);
            ssize_t r = read(t->cfd, p, 65536);
            t->in.len -= 65536 - (r > 0 ? (size_t)r : 0);
            if (r <= 0)
                break;
        }
}

static void on_tick(st_timer_t *tm)
{
    tctx_t *t = tm->data;
    client_step(t);
    if (t->cond(t)) {
        t->met = true;
        st_loop_stop(t->loop);
        return;
    }
    if (st_mono_ms() > t->deadline_ms) {
        st_loop_stop(t->loop);
        return;
    }
    st_loop_timer_start(t->loop, &t->tick, 1);
}

/* Runs the loop until cond(t) holds (true) or ms pass (false). */
static bool run_until(tctx_t *t, bool (*cond)(tctx_t *), int64_t ms)
{
    t->cond = cond;
    t->met = false;
    t->deadline_ms = st_mono_ms() + ms;
    st_loop_timer_start(t->loop, &t->tick, 0);
    assert_int_equal(st_loop_run(t->loop), 0);
    st_loop_timer_stop(t->loop, &t->tick);
    return t->met;
}

static void setup_with(tctx_t *t, const st_net_limits_t *lim, st_transport_t *tr,
                       st_sec_protocol_t proto)
{
    memset(t, 0, sizeof *t);
    assert_int_equal(st_loop_create(&t->loop, 256), 0);
    st_timer_init(&t->tick, on_tick, t);
    st_buf_init(&t->in);
    snprintf(t->listener.name, sizeof t->listener.name, "TEST");
    t->listener.protocol = proto;
    st_net_handler_t h = {on_frame, on_close, t};
    st_net_limits_t dflt = {1 << 20, 1 << 24, 0};
    assert_int_equal(st_net_create(&t->net, t->loop, NULL, 0, &h, lim ? lim : &dflt), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    t->cfd = sv[1];
    if (!tr)
        assert_int_equal(st_transport_tcp_new(t->loop, sv[0], &tr), 0);
    else
        tr->fd = sv[0], tr->loop = t->loop;
    assert_int_equal(st_net_adopt(t->net, tr, &t->listener, &t->conn), 0);
}

static void setup(tctx_t *t)
{
    setup_with(t, NULL, NULL, ST_SEC_PLAINTEXT);
}

static bool no_conn(tctx_t *t)
{
    return st_net_conn_count(t->net) == 0;
}

static void net_done(void *arg)
{
    *(bool *)arg = true;
}

static bool net_is_done;
static bool shut_down(tctx_t *t)
{
    (void)t;
    return net_is_done;
}

static bool always(tctx_t *t)
{
    (void)t;
    return true;
}

static void teardown(tctx_t *t)
{
    if (t->cfd >= 0)
        close(t->cfd);
    t->cfd = -1;
    t->client_reads = false;
    assert_true(run_until(t, no_conn, 5000));
    net_is_done = false;
    st_net_shutdown(t->net, net_done, &net_is_done);
    assert_true(run_until(t, shut_down, 5000)); /* accepts in flight are cancelled first */
    run_until(t, always, 100);
    st_net_destroy(t->net);
    st_loop_destroy(t->loop);
    for (int i = 0; i < t->nframes; i++)
        free(t->frames[i]);
    st_buf_fini(&t->in);
}

/* Frames i = 0..n-1 of sizes sizes[i], each body a pattern of (i, offset): the script. */
static uint8_t *make_script(const size_t *sizes, int n, size_t *len)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += 4 + sizes[i];
    uint8_t *p = malloc(total), *q = p;
    for (int i = 0; i < n; i++) {
        st_put_be32(q, (uint32_t)sizes[i]);
        q += 4;
        for (size_t k = 0; k < sizes[i]; k++)
            *q++ = (uint8_t)(i * 31 + k * 7);
    }
    *len = total;
    return p;
}

static int want_frames;
static bool have_frames(tctx_t *t)
{
    return t->nframes >= want_frames;
}

static size_t want_in;
static bool have_in(tctx_t *t)
{
    return t->in.len >= want_in;
}

/* The script's frames came back, echoed in order. */
static void assert_echoed(tctx_t *t, const uint8_t *script, size_t len)
{
    assert_int_equal(t->in.len, len);
    assert_memory_equal(t->in.data, script, len);
}

static void run_split(const size_t *chunks, int nchunks)
{
    tctx_t t;
    setup(&t);
    size_t sizes[] = {0, 5, 100, 70000, 12, 1};
    size_t len;
    uint8_t *script = make_script(sizes, 6, &len);
    t.script = script;
    t.script_len = len;
    t.chunks = chunks;
    t.nchunks = nchunks;
    t.client_reads = true;
    want_in = len;
    assert_true(run_until(&t, have_in, 20000));
    assert_int_equal(t.nframes, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(t.lens[i], sizes[i]);
        assert_int_equal(t.seqs[i], (uint64_t)i);
    }
    assert_echoed(&t, script, len);
    free(script);
    teardown(&t);
}

static void test_frames_byte_by_byte(void **state)
{
    (void)state;
    /* One byte per tick would take 70 s for the large frame: bytes one by one through the
     * small frames and the large frame's size prefix and first bytes, then larger chunks. */
    size_t chunks[200];
    for (int i = 0; i < 200; i++)
        chunks[i] = i < 160 ? 1 : 4093;
    run_split(chunks, 200);
}

static void test_frames_odd_splits(void **state)
{
    (void)state;
    size_t a[] = {7, 1, 13, 3, 65537, 2, 9999};
    run_split(a, 7);
    size_t c[] = {131072}; /* several frames per read */
    run_split(c, 1);
}

static int ticks;
static bool twenty_ticks(tctx_t *t)
{
    (void)t;
    return ++ticks >= 20;
}

static void test_responses_in_request_order(void **state)
{
    (void)state;
    tctx_t t;
    setup(&t);
    t.hold = true;
    size_t sizes[] = {10, 20, 30, 40};
    size_t len;
    uint8_t *script = make_script(sizes, 4, &len);
    t.script = script;
    t.script_len = len;
    t.client_reads = true;
    want_frames = 4;
    assert_true(run_until(&t, have_frames, 5000));
    /* Answer 3, then 1 (acks=0: nothing), then 2: nothing may leave before 0 is answered. */
    st_conn_respond(t.conn, 3, make_answer(&t, t.frames[3], t.lens[3]));
    st_conn_respond(t.conn, 1, NULL);
    st_conn_respond(t.conn, 2, make_answer(&t, t.frames[2], t.lens[2]));
    ticks = 0;
    assert_true(run_until(&t, twenty_ticks, 5000));
    assert_int_equal(t.in.len, 0);
    st_conn_respond(t.conn, 0, make_answer(&t, t.frames[0], t.lens[0]));
    want_in = 3 * 4 + 10 + 30 + 40;
    assert_true(run_until(&t, have_in, 5000));
    /* 0, 2, 3 in that order (1 sent nothing). */
    const uint8_t *p = t.in.data;
    size_t order[] = {0, 2, 3};
    const uint8_t *s = script;
    const uint8_t *frame_at[4];
    for (int i = 0; i < 4; i++) {
        frame_at[i] = s;
        s += 4 + sizes[i];
    }
    for (int k = 0; k < 3; k++) {
        size_t i = order[k];
        assert_memory_equal(p, frame_at[i], 4 + sizes[i]);
        p += 4 + sizes[i];
    }
    assert_int_equal(t.in.len, want_in);
    free(script);
    teardown(&t);
}

static int last_count;
static int64_t quiet_since;
/* The client wrote its script and the number of frames delivered has not moved for 100 ms. */
static bool frames_quiet(tctx_t *t)
{
    int64_t now = st_mono_ms();
    if (t->script_pos < t->script_len)
        quiet_since = now;
    if (t->nframes != last_count) {
        last_count = t->nframes;
        quiet_since = now;
        return false;
    }
    return now - quiet_since >= 100;
}

static void test_backpressure(void **state)
{
    (void)state;
    /* Answers of 256 KiB, at most 1 MiB in flight: a client that does not read stops being
     * read once the socket buffers and the 1 MiB are full; reading resumes as it reads. */
    st_net_limits_t lim = {1 << 20, 1 << 20, 0};
    tctx_t t;
    setup_with(&t, &lim, NULL, ST_SEC_PLAINTEXT);
    t.resp_size = 256 * 1024;
    enum { N = 200 };
    size_t sizes[N];
    for (int i = 0; i < N; i++)
        sizes[i] = 16;
    size_t len;
    uint8_t *script = make_script(sizes, N, &len);
    t.script = script;
    t.script_len = len;
    size_t one_frame[] = {4 + 16};
    t.chunks = one_frame; /* a frame per tick: each is read on its own */
    t.nchunks = 1;
    last_count = -1;
    assert_true(run_until(&t, frames_quiet, 10000));
    assert_int_equal(t.script_pos, len); /* the requests all fit in the socket buffer */
    int stalled = t.nframes;
    print_message("reading stopped after %d of %d requests\n", stalled, N);
    /* Reading stopped: once more than 1 MiB was queued, plus what the socket buffer took
     * (well under N answers of 256 KiB: 50 MiB). */
    assert_true(stalled > 4);           /* 1 MiB of answers is 4 */
    assert_true(stalled <= 4 + 1 + 20); /* + the socket buffer's share, generously 5 MiB */
    /* The client reads: everything is answered. */
    t.client_reads = true;
    want_in = (size_t)N * t.resp_size;
    assert_true(run_until(&t, have_in, 20000));
    assert_int_equal(t.nframes, N);
    assert_int_equal(t.in.len, want_in);
    free(script);
    teardown(&t);
}

/* A muted connection (a client quota's throttle) delivers none of the frames it already read
 * until the mute ends, then all of them, in order; its answers still go out meanwhile. */
static void test_mute(void **state)
{
    (void)state;
    tctx_t t;
    setup(&t);
    t.mute_ms = 300;
    size_t sizes[] = {10, 20, 30, 40, 50};
    size_t len;
    uint8_t *script = make_script(sizes, 5, &len);
    t.script = script;
    t.script_len = len; /* one write: the five frames arrive together */
    t.client_reads = true;
    int64_t start = st_mono_ms();
    want_in = 4 + 10;
    assert_true(run_until(&t, have_in, 5000)); /* the first answer left while muted */
    ticks = 0;
    assert_true(run_until(&t, twenty_ticks, 5000));
    if (st_mono_ms() - start < 250)
        assert_int_equal(t.nframes, 1);
    want_frames = 5;
    assert_true(run_until(&t, have_frames, 5000));
    assert_true(st_mono_ms() - start >= 300);
    want_in = len;
    assert_true(run_until(&t, have_in, 5000));
    assert_echoed(&t, script, len);
    /* closing while muted frees the connection (the mute's reference goes with it) */
    t.mute_ms = 0;
    st_conn_mute(t.conn, 10000);
    st_conn_close(t.conn);
    assert_true(run_until(&t, no_conn, 5000));
    free(script);
    teardown(&t);
}

static bool closed_once(tctx_t *t)
{
    return t->closed == 1 && st_net_conn_count(t->net) == 0;
}

static void test_disconnect_mid_frame(void **state)
{
    (void)state;
    /* Half a small frame, then half of a large one: the peer goes; nothing is delivered. */
    size_t sizes[] = {100};
    size_t len;
    uint8_t *script = make_script(sizes, 1, &len);
    tctx_t t;
    setup(&t);
    t.script = script;
    t.script_len = 50;
    t.client_closes_after_script = true;
    assert_true(run_until(&t, closed_once, 5000));
    assert_int_equal(t.nframes, 0);
    teardown(&t);
    free(script);

    size_t big[] = {300000};
    script = make_script(big, 1, &len);
    setup(&t);
    t.script = script;
    t.script_len = 100000;
    t.client_closes_after_script = true;
    assert_true(run_until(&t, closed_once, 5000));
    assert_int_equal(t.nframes, 0);
    teardown(&t);
    free(script);
}

static void test_disconnect_with_request_unanswered(void **state)
{
    (void)state;
    /* The peer goes while its request waits for an answer (another shard, a long poll): the
     * connection closes; the late answer is dropped and only then is the connection freed. */
    size_t sizes[] = {10, 10};
    size_t len;
    uint8_t *script = make_script(sizes, 2, &len);
    tctx_t t;
    setup(&t);
    t.hold = true;
    t.script = script;
    t.script_len = len;
    want_frames = 2;
    assert_true(run_until(&t, have_frames, 5000));
    close(t.cfd);
    t.cfd = -1;
    assert_false(run_until(&t, no_conn, 100)); /* held by its unanswered requests */
    assert_int_equal(t.closed, 1);
    assert_true(st_conn_is_closed(t.conn));
    st_conn_respond(t.conn, 1, make_answer(&t, t.frames[1], t.lens[1]));
    assert_int_equal(st_net_conn_count(t.net), 1);
    st_conn_respond(t.conn, 0, make_answer(&t, t.frames[0], t.lens[0]));
    assert_int_equal(st_net_conn_count(t.net), 0);
    teardown(&t);
    free(script);
}

/* ---- the copy path ---- */

typedef struct {
    st_transport_t base;
    int sendfiles; /* calls of sendfile */
    int sends;
} count_transport_t;

static int64_t counting_sendfile(st_transport_t *tr, int fd, int64_t off, size_t len)
{
    ((count_transport_t *)tr)->sendfiles++;
    return st_transport_tcp_ops.sendfile(tr, fd, off, len);
}

static int counting_send(st_transport_t *tr, st_io_t *io, const struct msghdr *msg)
{
    ((count_transport_t *)tr)->sends++;
    return st_transport_tcp_ops.send(tr, io, msg);
}

static bool refuse_sendfile(const st_transport_t *tr)
{
    (void)tr;
    return false;
}

static int counts_sendfiles, counts_sends;
static void counting_close(st_transport_t *tr)
{
    count_transport_t *c = (count_transport_t *)tr;
    counts_sendfiles = c->sendfiles;
    counts_sends = c->sends;
    close(tr->fd);
    free(c);
}

static st_transport_ops_t nosendfile_ops, sendfile_ops;

static int released;
static void release_file(void *ref)
{
    (void)ref;
    released++;
}

/* One answer: 4-byte size, "HEAD", a file range, "MID", a second file range, "TAIL". */
static void file_answer(bool can_sendfile)
{
    char path[] = "/tmp/strata-net-test-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    enum { FILE_LEN = 300000 };
    uint8_t *content = malloc(FILE_LEN);
    for (int i = 0; i < FILE_LEN; i++)
        content[i] = (uint8_t)(i * 13 + (i >> 9));
    assert_int_equal(write(fd, content, FILE_LEN), FILE_LEN);

    st_transport_ops_t *ops = can_sendfile ? &sendfile_ops : &nosendfile_ops;
    *ops = st_transport_tcp_ops;
    ops->sendfile = counting_sendfile;
    ops->send = counting_send;
    ops->close = counting_close;
    if (!can_sendfile)
        ops->can_sendfile = refuse_sendfile;
    count_transport_t *ct = calloc(1, sizeof *ct);
    ct->base.ops = ops;
    tctx_t t;
    setup_with(&t, NULL, &ct->base, ST_SEC_PLAINTEXT);
    t.hold = true;
    size_t sizes[] = {8};
    size_t len;
    uint8_t *script = make_script(sizes, 1, &len);
    t.script = script;
    t.script_len = len;
    t.client_reads = true;
    want_frames = 1;
    assert_true(run_until(&t, have_frames, 5000));

    int64_t off1 = 1000, len1 = 150001, off2 = 200000, len2 = 70000;
    size_t body = 4 + (size_t)len1 + 3 + (size_t)len2 + 4;
    st_out_t *o = st_out_new();
    uint8_t hdr[4];
    st_put_be32(hdr, (uint32_t)body);
    st_buf_append(&o->mem, hdr, 4);
    st_buf_append(&o->mem, "HEAD", 4);
    assert_int_equal(st_out_add_file(o, fd, off1, len1, release_file, NULL), 0);
    st_buf_append(&o->mem, "MID", 3);
    assert_int_equal(st_out_add_file(o, fd, off2, len2, release_file, NULL), 0);
    st_buf_append(&o->mem, "TAIL", 4);
    released = 0;
    st_conn_respond(t.conn, 0, o);
    want_in = 4 + body;
    assert_true(run_until(&t, have_in, 10000));
    assert_int_equal(t.in.len, want_in);
    const uint8_t *p = t.in.data + 4;
    assert_memory_equal(p, "HEAD", 4);
    assert_memory_equal(p + 4, content + off1, (size_t)len1);
    assert_memory_equal(p + 4 + len1, "MID", 3);
    assert_memory_equal(p + 4 + len1 + 3, content + off2, (size_t)len2);
    assert_memory_equal(p + 4 + len1 + 3 + len2, "TAIL", 4);
    assert_int_equal(released, 2); /* the file references went with the answer */
    teardown(&t);
    if (can_sendfile) {
        assert_true(counts_sendfiles >= 2);
    } else {
        assert_int_equal(counts_sendfiles, 0);
        /* the file bytes went through send, at most 64 KiB at a time */
        assert_true(counts_sends >= 3 + (int)((len1 + 65535) / 65536 + (len2 + 65535) / 65536));
    }
    free(script);
    free(content);
    close(fd);
}

static void test_file_ranges_through_sendfile(void **state)
{
    (void)state;
    file_answer(true);
}

static void test_file_ranges_copied_without_sendfile(void **state)
{
    (void)state;
    file_answer(false);
}

/* ---- short writes ---- */

/* A transport that takes at most `cap` bytes per send or sendfile, as a congested socket
 * may: every partial-progress path of the send queue runs. */
typedef struct {
    st_transport_t base;
    size_t cap;
    struct iovec iov[64];
    struct msghdr msg; /* the capped copy; lives until the send completes */
} short_transport_t;

static int short_send(st_transport_t *tr, st_io_t *io, const struct msghdr *msg)
{
    short_transport_t *s = (short_transport_t *)tr;
    size_t left = s->cap, n = 0;
    for (size_t i = 0; i < msg->msg_iovlen && left > 0 && n < 64; i++) {
        size_t k = msg->msg_iov[i].iov_len < left ? msg->msg_iov[i].iov_len : left;
        s->iov[n].iov_base = msg->msg_iov[i].iov_base;
        s->iov[n++].iov_len = k;
        left -= k;
    }
    memset(&s->msg, 0, sizeof s->msg);
    s->msg.msg_iov = s->iov;
    s->msg.msg_iovlen = n;
    return st_transport_tcp_ops.send(tr, io, &s->msg);
}

static int64_t short_sendfile(st_transport_t *tr, int fd, int64_t off, size_t len)
{
    short_transport_t *s = (short_transport_t *)tr;
    return st_transport_tcp_ops.sendfile(tr, fd, off, len < s->cap ? len : s->cap);
}

static void short_close(st_transport_t *tr)
{
    close(tr->fd);
    free(tr);
}

static st_transport_ops_t short_ops[2];

/* Three answers, each memory, a file range, memory, through sends of at most cap bytes. */
static void short_writes(bool can_sendfile, size_t cap)
{
    char path[] = "/tmp/strata-net-test-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    enum { FILE_LEN = 9000 };
    uint8_t content[FILE_LEN];
    for (int i = 0; i < FILE_LEN; i++)
        content[i] = (uint8_t)(i * 7 + 3);
    assert_int_equal(write(fd, content, FILE_LEN), FILE_LEN);
    st_transport_ops_t *ops = &short_ops[can_sendfile];
    *ops = st_transport_tcp_ops;
    ops->send = short_send;
    ops->sendfile = short_sendfile;
    ops->close = short_close;
    if (!can_sendfile)
        ops->can_sendfile = refuse_sendfile;
    short_transport_t *st = calloc(1, sizeof *st);
    st->base.ops = ops;
    st->cap = cap;
    tctx_t t;
    setup_with(&t, NULL, &st->base, ST_SEC_PLAINTEXT);
    t.hold = true;
    size_t sizes[] = {1, 2, 3};
    size_t len;
    uint8_t *script = make_script(sizes, 3, &len);
    t.script = script;
    t.script_len = len;
    t.client_reads = true;
    want_frames = 3;
    assert_true(run_until(&t, have_frames, 5000));
    st_buf_t want;
    st_buf_init(&want);
    for (int i = 0; i < 3; i++) {
        int64_t off = 100 * i, flen = 3000 + 1000 * i;
        char head[32], tail[32];
        int hl = snprintf(head, sizeof head, "head-%d", i);
        int tl = snprintf(tail, sizeof tail, "tail-%d!", i);
        st_out_t *o = st_out_new();
        st_buf_append(&o->mem, head, (size_t)hl);
        assert_int_equal(st_out_add_file(o, fd, off, flen, NULL, NULL), 0);
        st_buf_append(&o->mem, tail, (size_t)tl);
        st_buf_append(&want, head, (size_t)hl);
        st_buf_append(&want, content + off, (size_t)flen);
        st_buf_append(&want, tail, (size_t)tl);
        st_conn_respond(t.conn, (uint64_t)i, o);
    }
    want_in = want.len;
    assert_true(run_until(&t, have_in, 20000));
    assert_int_equal(t.in.len, want.len);
    assert_memory_equal(t.in.data, want.data, want.len);
    st_buf_fini(&want);
    teardown(&t);
    free(script);
    close(fd);
}

static void test_short_writes(void **state)
{
    (void)state;
    short_writes(true, 7);
    short_writes(false, 5);
    short_writes(false, 70000); /* several messages in one send, file bytes in between */
}

/* ---- a transport with a handshake ---- */

typedef struct {
    st_transport_t base;
    st_timer_t timer;
    st_io_t *io;
} hs_transport_t;

static void hs_fire(st_timer_t *tm)
{
    hs_transport_t *h = tm->data;
    st_io_t *io = h->io;
    h->io = NULL;
    io->cb(io, 0);
}

static int hs_handshake(st_transport_t *tr, st_io_t *io)
{
    hs_transport_t *h = (hs_transport_t *)tr;
    h->io = io;
    st_timer_init(&h->timer, hs_fire, h);
    st_loop_timer_start(tr->loop, &h->timer, 30);
    return 0;
}

static void hs_close(st_transport_t *tr)
{
    close(tr->fd);
    free(tr);
}

static st_transport_ops_t hs_ops;
static bool handshake_ran(tctx_t *t)
{
    return st_conn_auth(t->conn)->state != ST_AUTH_HANDSHAKE;
}

static void test_handshake_before_reading(void **state)
{
    (void)state;
    hs_ops = st_transport_tcp_ops;
    hs_ops.handshake = hs_handshake;
    hs_ops.close = hs_close;
    hs_transport_t *h = calloc(1, sizeof *h);
    h->base.ops = &hs_ops;
    tctx_t t;
    setup_with(&t, NULL, &h->base, ST_SEC_PLAINTEXT);
    assert_int_equal(st_conn_auth(t.conn)->state, ST_AUTH_HANDSHAKE);
    size_t sizes[] = {10};
    size_t len;
    uint8_t *script = make_script(sizes, 1, &len);
    t.script = script;
    t.script_len = len;
    t.client_reads = true;
    /* The request is in the socket, but nothing is read before the handshake is done. */
    want_frames = 1;
    assert_false(run_until(&t, have_frames, 10));
    assert_int_equal(t.nframes, 0);
    assert_true(run_until(&t, handshake_ran, 5000));
    assert_true(st_auth_done(st_conn_auth(t.conn)));
    want_in = len;
    assert_true(run_until(&t, have_in, 5000));
    assert_echoed(&t, script, len);
    teardown(&t);
    free(script);
}

/* ---- listener and authentication state ---- */

static void test_connection_knows_listener_and_auth(void **state)
{
    (void)state;
    tctx_t t;
    setup(&t);
    print_message("event loop backend: %s\n", st_loop_backend(t.loop));
    assert_ptr_equal(st_conn_listener(t.conn), &t.listener);
    assert_string_equal(st_conn_listener(t.conn)->name, "TEST");
    st_auth_t *a = st_conn_auth(t.conn);
    assert_true(st_auth_done(a)); /* PLAINTEXT: at accept */
    assert_string_equal(a->principal, ST_AUTH_ANONYMOUS);
    teardown(&t);

    setup_with(&t, NULL, NULL, ST_SEC_SASL_PLAINTEXT);
    a = st_conn_auth(t.conn);
    assert_false(st_auth_done(a));
    assert_int_equal(a->state, ST_AUTH_SASL_HANDSHAKE);
    teardown(&t);
}

static void test_auth_state_machine(void **state)
{
    (void)state;
    st_auth_t a;
    st_auth_init(&a, ST_SEC_SSL);
    assert_int_equal(a.state, ST_AUTH_HANDSHAKE);
    assert_int_equal(st_auth_sasl_mechanism(&a, "PLAIN"), -1);
    assert_int_equal(st_auth_transport_ready(&a), 0);
    assert_true(st_auth_done(&a));
    assert_string_equal(a.principal, "User:ANONYMOUS");
    assert_int_equal(st_auth_transport_ready(&a), -1);

    st_auth_init(&a, ST_SEC_SASL_SSL);
    assert_int_equal(st_auth_succeed(&a, "User:alice"), -1); /* no mechanism yet */
    assert_int_equal(st_auth_transport_ready(&a), 0);
    assert_int_equal(a.state, ST_AUTH_SASL_HANDSHAKE);
    assert_false(st_auth_done(&a));
    assert_int_equal(st_auth_succeed(&a, "User:alice"), -1);
    assert_int_equal(st_auth_sasl_mechanism(&a, ""), -1);
    assert_int_equal(st_auth_sasl_mechanism(&a, "SCRAM-SHA-256"), 0);
    assert_int_equal(a.state, ST_AUTH_SASL_AUTHENTICATE);
    assert_int_equal(st_auth_sasl_mechanism(&a, "PLAIN"), -1);
    assert_int_equal(st_auth_succeed(&a, "User:alice"), 0);
    assert_true(st_auth_done(&a));
    assert_string_equal(a.principal, "User:alice");
    assert_string_equal(a.mechanism, "SCRAM-SHA-256");

    st_auth_init(&a, ST_SEC_SASL_PLAINTEXT);
    st_auth_transport_ready(&a);
    st_auth_sasl_mechanism(&a, "PLAIN");
    st_auth_fail(&a);
    assert_int_equal(a.state, ST_AUTH_FAILED);
    assert_false(st_auth_done(&a));
    assert_int_equal(st_auth_succeed(&a, "User:bob"), -1);
    assert_string_equal(st_auth_state_name(ST_AUTH_DONE), "authenticated");

    st_sec_protocol_t p;
    assert_int_equal(st_sec_protocol_parse("sasl_ssl", 8, &p), 0);
    assert_int_equal(p, ST_SEC_SASL_SSL);
    assert_int_equal(st_sec_protocol_parse("SASL_SSLX", 9, &p), -1);
    assert_string_equal(st_sec_protocol_name(ST_SEC_PLAINTEXT), "PLAINTEXT");
    assert_true(st_sec_protocol_sasl(ST_SEC_SASL_PLAINTEXT));
    assert_false(st_sec_protocol_sasl(ST_SEC_SSL));
}

/* ---- a real listener ---- */

static void test_listen_and_accept_on_two_ports(void **state)
{
    (void)state;
    tctx_t t;
    memset(&t, 0, sizeof t);
    assert_int_equal(st_loop_create(&t.loop, 256), 0);
    st_timer_init(&t.tick, on_tick, &t);
    st_buf_init(&t.in);
    st_listener_t ls[2] = {{.name = "A"}, {.name = "B"}};
    st_net_port_t ports[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(st_net_listen("127.0.0.1", 0, &ports[i].fd, &ls[i].port), 0);
        assert_true(ls[i].port > 0);
        ports[i].listener = &ls[i];
        ports[i].make = NULL;
    }
    assert_true(ls[0].port != ls[1].port);
    st_net_handler_t h = {on_frame, on_close, &t};
    st_net_limits_t lim = {1 << 20, 1 << 24, 0};
    assert_int_equal(st_net_create(&t.net, t.loop, ports, 2, &h, &lim), 0);
    /* Connect to the second listener; an echo comes back. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ls[1].port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    t.cfd = fd;
    size_t sizes[] = {3};
    size_t len;
    uint8_t *script = make_script(sizes, 1, &len);
    t.script = script;
    t.script_len = len;
    t.client_reads = true;
    want_in = len;
    assert_true(run_until(&t, have_in, 5000));
    assert_echoed(&t, script, len);
    assert_int_equal(st_net_stats(t.net)->accepted, 1);
    teardown(&t);
    free(script);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frames_byte_by_byte),
        cmocka_unit_test(test_frames_odd_splits),
        cmocka_unit_test(test_responses_in_request_order),
        cmocka_unit_test(test_backpressure),
        cmocka_unit_test(test_mute),
        cmocka_unit_test(test_disconnect_mid_frame),
        cmocka_unit_test(test_disconnect_with_request_unanswered),
        cmocka_unit_test(test_file_ranges_through_sendfile),
        cmocka_unit_test(test_file_ranges_copied_without_sendfile),
        cmocka_unit_test(test_short_writes),
        cmocka_unit_test(test_handshake_before_reading),
        cmocka_unit_test(test_connection_knows_listener_and_auth),
        cmocka_unit_test(test_auth_state_machine),
        cmocka_unit_test(test_listen_and_accept_on_two_ports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
