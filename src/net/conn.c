/*
 * conn.c — listener, framing, ordered responses and backpressure.
 *
 * Per connection, at most one read-direction operation (the handshake, then recv) and one
 * send-direction operation (a send, a writable wait or a file read of the copy path) are in
 * flight.
 * Invariants:
 *   1. refs = (open ? 1 : 0) + operations in flight + unanswered requests + (muted ? 1 : 0);
 *      the connection is freed exactly when refs drops to 0;
 *   2. slots[i] is the answer to request base_seq + i; answers move to the send queue only
 *      from slots[0], so responses leave in request order;
 *   3. inflight = bytes of unanswered frames + bytes queued and not yet sent.
 *   4. net->queued = sum over connections of frame_len (while a large frame is being
 *      received) + req_len of every unanswered slot marked big; a connection is on the
 *      net's wait list exactly when `waiting`, and then it has no recv in flight.
 *
 * Read path:  rbuf (64 KiB) collects small frames; a frame that does not fit gets its own
 *             buffer of exactly its size, received into directly, once the shard's frame
 *             budget has room for it (conn.h); until then the connection waits, its next
 *             frame's first bytes kept in rbuf.
 * Send path:  memory pieces of consecutive responses go out in one gathered send; file
 *             pieces go out with the transport's sendfile, waiting until the socket is
 *             writable on EAGAIN. A transport that cannot sendfile (transport.h) gets file
 *             bytes copied: read (asynchronously, st_loop_read) into the connection's bounce
 *             buffer, 64 KiB at a time, then sent from there like memory.
 *
 * Every socket operation goes through the connection's transport (c->t); conn.c calls no
 * recv, sendmsg or sendfile itself.
 */
#include "net/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/log.h"

#define ST_RBUF_SIZE (64 * 1024)
/* File bytes copied per read when the transport cannot sendfile. */
#define ST_BOUNCE_SIZE (64 * 1024)
#define ST_MAX_IOV     64
/* Unanswered requests per connection before it stops reading: pipelining is welcome, but a
 * client must not park unbounded numbers of cheap requests (long polls) on the broker. */
#define ST_MAX_PENDING_REQUESTS 4096

typedef struct {
    bool answered;
    st_out_t *out;
    size_t req_len; /* frame bytes, counted in inflight until answered */
    bool big;       /* had its own buffer: req_len counts in net->queued until answered */
} st_slot_t;

struct st_conn {
    st_net_t *net;
    st_transport_t *t;
    const st_listener_t *listener;
    st_auth_t auth;
    uint64_t id;
    int refs;
    bool open;
    bool draining;       /* server shutting down: read no more */
    bool reading;        /* a recv is in flight */
    bool sending;        /* a send, writable wait or file read (copy path) is in flight */
    bool parsing;        /* inside the recv callback: rbuf must not be the target of a new recv */
    bool waiting;        /* on the net's wait list for frame budget: not reading */
    bool handshaking;    /* the transport's handshake is in flight (as the read operation) */
    bool freading;       /* the send-direction operation in flight is a file read into bounce */
    bool bounce_sending; /* the send in flight is from bounce */
    bool muted;          /* a client quota throttles it: not read until `mute` fires */
    st_timer_t mute;
    char peer[64];
    char ip[INET6_ADDRSTRLEN]; /* st_conn_ip */
    bool counted;              /* admitted by on_accept */
    void *data;

    st_io_t rio, wio, fio;
    uint8_t *bounce;               /* file bytes read for a transport that cannot sendfile */
    size_t bounce_len, bounce_pos; /* bytes read; bytes of them sent */
    uint8_t *rbuf;
    size_t rlen;
    uint8_t *frame; /* large frame being received */
    size_t frame_len, frame_have;

    uint64_t next_seq; /* sequence number of the next frame */
    uint64_t base_seq; /* sequence number of slots[0] */
    st_slot_t *slots;
    size_t nslots, capslots;

    st_out_t *sq_head, *sq_tail; /* send queue */
    int piece;         /* current piece of sq_head: 2*i = mem before file i, 2*i+1 = file i */
    int64_t piece_off; /* bytes of the current piece already sent */
    struct iovec iov[ST_MAX_IOV];
    struct msghdr msg;

    size_t inflight;
    st_conn_t *prev, *next; /* net's list */
    st_conn_t *wnext;       /* net's wait list */
};

/* One listening socket of the net. */
typedef struct st_lport {
    st_net_t *net;
    int fd;
    const st_listener_t *listener;
    st_transport_make_t make; /* NULL: plain TCP */
    void *make_arg;
    st_io_t aio;
    bool armed;  /* an accept is in flight */
    int held_fd; /* accepted, waiting for admission (ST_NET_ADMIT_WAIT); -1: none */
} st_lport_t;

/* A connection held unserved until it is closed (on_accept's throttle). */
typedef struct st_dclose {
    st_net_t *net;
    int fd;
    st_timer_t timer;
    struct st_dclose *prev, *next;
} st_dclose_t;

struct st_net {
    st_loop_t *loop;
    st_dclose_t *dcloses; /* throttled connections waiting for their close */
    st_lport_t *ports;
    int nports;
    bool accepting;
    st_net_handler_t h;
    st_net_admission_t adm; /* optional (st_net_set_admission) */
    st_net_limits_t lim;
    st_conn_t *conns;
    size_t nconns;
    uint64_t next_id;
    st_net_stats_t stats;
    void (*done)(void *);
    void *done_arg;
    bool shutting_down;
    size_t queued;                    /* invariant 4 */
    st_conn_t *wait_head, *wait_tail; /* waiting for frame budget, oldest first */
    st_task_t wake;                   /* re-tries the wait list once budget frees */
    bool wake_queued;
};

static void st_conn_arm_recv(st_conn_t *c);
static void st_conn_pump(st_conn_t *c);
static void st_net_maybe_done(st_net_t *n);

/* ---- frame budget (conn.h) ---- */

static void st_wait_unlink(st_conn_t *c)
{
    st_net_t *n = c->net;
    if (!c->waiting)
        return;
    st_conn_t *prev = NULL;
    for (st_conn_t *x = n->wait_head; x; prev = x, x = x->wnext)
        if (x == c) {
            if (prev)
                prev->wnext = c->wnext;
            else
                n->wait_head = c->wnext;
            if (n->wait_tail == c)
                n->wait_tail = prev;
            break;
        }
    c->wnext = NULL;
    c->waiting = false;
}

/* Takes len bytes of budget for c's next frame, or puts c on the wait list (keeping its
 * place if it is there already). Those before it on the list go first. */
static bool st_budget_take(st_conn_t *c, size_t len)
{
    st_net_t *n = c->net;
    size_t max = n->lim.max_queued;
    bool first = !n->wait_head || n->wait_head == c;
    if (first && (max == 0 || n->queued == 0 || n->queued + len <= max)) {
        st_wait_unlink(c);
        n->queued += len;
        return true;
    }
    if (!c->waiting && !c->draining) { /* a draining connection just stops reading */
        c->waiting = true;
        c->wnext = NULL;
        if (n->wait_tail)
            n->wait_tail->wnext = c;
        else
            n->wait_head = c;
        n->wait_tail = c;
        n->stats.queued_waits++;
        ST_DEBUG("connection %llu from %s waits: frame of %zu bytes, %zu of %zu held",
                 (unsigned long long)c->id, c->peer, len, n->queued, max);
    }
    return false;
}

/* Retries the waiting connections from the loop (not from inside whatever freed budget). */
static void st_budget_kick(st_net_t *n)
{
    if (n->wait_head && !n->wake_queued) {
        n->wake_queued = true;
        st_loop_defer(n->loop, &n->wake);
    }
}

static void st_budget_put(st_net_t *n, size_t len)
{
    ST_ASSERT(n->queued >= len);
    n->queued -= len;
    st_budget_kick(n);
}

/* ---- lifetime ---- */

static void st_conn_unref(st_conn_t *c)
{
    ST_ASSERT(c->refs > 0);
    if (--c->refs > 0)
        return;
    st_net_t *n = c->net;
    for (size_t i = 0; i < c->nslots; i++)
        st_out_free(c->slots[i].out);
    while (c->sq_head) {
        st_out_t *o = c->sq_head;
        c->sq_head = o->next;
        st_out_free(o);
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        n->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    n->nconns--;
    n->stats.closed++;
    c->t->ops->close(c->t);
    free(c->slots);
    free(c->rbuf);
    free(c->bounce);
    if (c->frame)
        st_budget_put(n, c->frame_len);
    free(c->frame);
    st_auth_fini(&c->auth);
    free(c);
    st_net_maybe_done(n);
}

void st_conn_close(st_conn_t *c)
{
    if (!c->open)
        return;
    c->open = false;
    if (c->waiting) {
        st_wait_unlink(c);
        st_budget_kick(c->net); /* those behind it may fit now */
    }
    if (c->muted) {
        st_loop_timer_stop(c->net->loop, &c->mute);
        c->muted = false;
        st_conn_unref(c); /* the open reference still holds it */
    }
    ST_DEBUG("connection %llu from %s closed", (unsigned long long)c->id, c->peer);
    c->t->ops->shutdown(c->t);
    if (c->net->h.on_close)
        c->net->h.on_close(c->net->h.ctx, c);
    if (c->counted && c->net->adm.on_release)
        c->net->adm.on_release(c->net->h.ctx, c->ip);
    st_conn_unref(c);
}

int st_conn_is_closed(const st_conn_t *c)
{
    return !c->open;
}

const char *st_conn_peer(const st_conn_t *c)
{
    return c->peer;
}

const char *st_conn_ip(const st_conn_t *c)
{
    return c->ip;
}

void *st_conn_get_data(const st_conn_t *c)
{
    return c->data;
}

void st_conn_set_data(st_conn_t *c, void *data)
{
    c->data = data;
}

uint64_t st_conn_id(const st_conn_t *c)
{
    return c->id;
}

const st_listener_t *st_conn_listener(const st_conn_t *c)
{
    return c->listener;
}

st_auth_t *st_conn_auth(st_conn_t *c)
{
    return &c->auth;
}

/* A draining connection closes once every request is answered and everything is sent. */
static void st_conn_check_drained(st_conn_t *c)
{
    if (c->open && c->draining && c->nslots == 0 && !c->sq_head && !c->sending)
        st_conn_close(c);
}

void st_conn_close_when_sent(st_conn_t *c)
{
    if (!c->open || c->draining)
        return;
    c->draining = true;
    st_wait_unlink(c);
    st_conn_check_drained(c);
}

/* ---- receive ---- */

/* Hands a frame to the handler; `big`: it had its own buffer, whose budget the slot keeps. */
static void st_conn_deliver(st_conn_t *c, uint8_t *frame, size_t len, bool big)
{
    if (c->nslots == c->capslots) {
        size_t cap = c->capslots ? c->capslots * 2 : 8;
        st_slot_t *s = realloc(c->slots, cap * sizeof *s);
        if (!s) {
            free(frame);
            if (big)
                st_budget_put(c->net, len);
            st_conn_close(c);
            return;
        }
        c->slots = s;
        c->capslots = cap;
    }
    c->slots[c->nslots++] = (st_slot_t){false, NULL, len, big};
    c->inflight += len;
    c->refs++;
    uint64_t seq = c->next_seq++;
    c->net->h.on_frame(c->net->h.ctx, c, seq, frame, len);
}

/* Cuts complete frames out of rbuf; may start a large-frame receive. Returns false if closed. */
static bool st_conn_parse(st_conn_t *c)
{
    size_t pos = 0;
    /* muted (a client quota): the frames already read wait in rbuf until the mute ends */
    while (c->open && !c->muted && c->rlen - pos >= 4) {
        int32_t len = (int32_t)st_be32(c->rbuf + pos);
        if (len < 0 || (size_t)len > c->net->lim.max_frame) {
            c->net->stats.frames_too_large++;
            ST_WARN("closing %s: request of %d bytes exceeds socket.request.max.bytes=%zu", c->peer,
                    len, c->net->lim.max_frame);
            st_conn_close(c);
            return false;
        }
        size_t have = c->rlen - pos - 4;
        if (have < (size_t)len && (size_t)len + 4 <= ST_RBUF_SIZE)
            break; /* fits: wait for the rest in rbuf */
        bool big = have < (size_t)len;
        if (big && !st_budget_take(c, (size_t)len))
            break; /* waits, the frame's first bytes kept at the start of rbuf */
        uint8_t *frame = malloc(len ? (size_t)len : 1);
        if (!frame) {
            if (big)
                st_budget_put(c->net, (size_t)len);
            st_conn_close(c);
            return false;
        }
        if (!big) {
            memcpy(frame, c->rbuf + pos + 4, (size_t)len);
            pos += 4 + (size_t)len;
            st_conn_deliver(c, frame, (size_t)len, false);
            continue;
        }
        memcpy(frame, c->rbuf + pos + 4, have);
        c->frame = frame;
        c->frame_len = (size_t)len;
        c->frame_have = have;
        pos = c->rlen;
        break;
    }
    if (pos > 0) {
        memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
        c->rlen -= pos;
    }
    return c->open;
}

static void st_conn_recv_done(st_io_t *io, int res)
{
    st_conn_t *c = io->data;
    c->reading = false;
    if (!c->open) {
        st_conn_unref(c);
        return;
    }
    if (res <= 0) {
        if (res < 0 && res != -ECONNRESET && res != -ECANCELED)
            ST_DEBUG("recv from %s: %s", c->peer, strerror(-res));
        st_conn_close(c);
        st_conn_unref(c);
        return;
    }
    c->net->stats.bytes_in += (uint64_t)res;
    bool ok = true;
    c->parsing = true;
    if (c->frame) {
        c->frame_have += (size_t)res;
        if (c->frame_have == c->frame_len) {
            uint8_t *f = c->frame;
            c->frame = NULL;
            st_conn_deliver(c, f, c->frame_len, true);
        }
    } else {
        c->rlen += (size_t)res;
        ok = st_conn_parse(c);
    }
    c->parsing = false;
    if (ok && c->open)
        st_conn_arm_recv(c);
    st_conn_unref(c);
}

static void st_conn_arm_recv(st_conn_t *c)
{
    if (c->reading || c->parsing || !c->open || c->draining || c->waiting || c->handshaking ||
        c->muted)
        return;
    /* Backpressure: resumes as answers are made and sent (st_conn_respond, the send and file
     * read completions arm the receive again). Unsent answers count even when every request
     * is answered, so a client that sends but never reads cannot grow the send queue. */
    if (c->inflight > c->net->lim.max_inflight || c->nslots >= ST_MAX_PENDING_REQUESTS)
        return;
    int rc;
    if (c->frame)
        rc = c->t->ops->recv(c->t, &c->rio, c->frame + c->frame_have, c->frame_len - c->frame_have);
    else
        rc = c->t->ops->recv(c->t, &c->rio, c->rbuf + c->rlen, ST_RBUF_SIZE - c->rlen);
    if (rc < 0) {
        st_conn_close(c);
        return;
    }
    c->reading = true;
    c->refs++;
}

/* ---- muting (client quotas) ---- */

static bool st_conn_parse(st_conn_t *c);

/* The mute ended: the frames read before it go first (they may mute it again), then reading
 * resumes. */
static void st_conn_unmute(st_timer_t *t)
{
    st_conn_t *c = t->data;
    c->muted = false;
    if (c->open && !c->parsing && !c->frame && !c->waiting) {
        c->parsing = true;
        bool ok = st_conn_parse(c);
        c->parsing = false;
        if (ok && c->open)
            st_conn_arm_recv(c);
    } else if (c->open && c->waiting) {
        st_budget_kick(c->net); /* its frame waits for budget: the wait list's round takes it */
    } else if (c->open) {
        st_conn_arm_recv(c);
    }
    st_conn_unref(c); /* the mute's reference */
}

void st_conn_mute(st_conn_t *c, int64_t ms)
{
    if (!c->open || ms <= 0)
        return;
    int64_t due = st_mono_ns() + ms * 1000000;
    if (c->muted && c->mute.due_ns >= due)
        return; /* already muted at least that long */
    if (!c->muted)
        c->refs++;
    c->muted = true;
    st_loop_timer_start(c->net->loop, &c->mute, ms);
}

/* ---- respond and send ---- */

void st_conn_respond(st_conn_t *c, uint64_t seq, st_out_t *out)
{
    ST_ASSERT(seq >= c->base_seq && seq - c->base_seq < c->nslots);
    st_slot_t *s = &c->slots[seq - c->base_seq];
    ST_ASSERT(!s->answered);
    s->answered = true;
    s->out = out;
    c->inflight -= s->req_len;
    if (s->big)
        st_budget_put(c->net, s->req_len);
    if (out)
        c->inflight += (size_t)st_out_size(out);
    /* Move the answered prefix to the send queue, in order. */
    size_t k = 0;
    while (k < c->nslots && c->slots[k].answered) {
        st_out_t *o = c->slots[k].out;
        if (o && c->open) {
            o->next = NULL;
            if (c->sq_tail)
                c->sq_tail->next = o;
            else
                c->sq_head = o;
            c->sq_tail = o;
        } else if (o) {
            c->inflight -= (size_t)st_out_size(o);
            st_out_free(o);
        }
        k++;
    }
    if (k > 0) {
        memmove(c->slots, c->slots + k, (c->nslots - k) * sizeof *c->slots);
        c->nslots -= k;
        c->base_seq += k;
    }
    if (c->open) {
        st_conn_pump(c);
        st_conn_arm_recv(c);
        st_conn_check_drained(c);
    }
    for (size_t i = 0; i < k; i++)
        st_conn_unref(c); /* careful: may free c; nothing touches c after the last */
}

/* Length of piece p of o (see the send-path note at the top). */
static int64_t st_piece_len(const st_out_t *o, int p)
{
    int i = p / 2;
    if (p % 2 == 1)
        return o->files[i].len;
    size_t start = i == 0 ? 0 : o->files[i - 1].cut;
    size_t end = i < o->nfiles ? o->files[i].cut : o->mem.len;
    return (int64_t)(end - start);
}

static const uint8_t *st_piece_mem(const st_out_t *o, int p)
{
    int i = p / 2;
    return o->mem.data + (i == 0 ? 0 : o->files[i - 1].cut);
}

/* Advances the send position by n bytes, popping finished messages. */
static void st_conn_advance(st_conn_t *c, int64_t n)
{
    c->inflight -= (size_t)n;
    c->net->stats.bytes_out += (uint64_t)n;
    while (c->sq_head) {
        st_out_t *o = c->sq_head;
        int npieces = 2 * o->nfiles + 1;
        while (c->piece < npieces) {
            int64_t left = st_piece_len(o, c->piece) - c->piece_off;
            if (n < left) {
                c->piece_off += n;
                return;
            }
            n -= left;
            c->piece++;
            c->piece_off = 0;
        }
        c->sq_head = o->next;
        if (!c->sq_head)
            c->sq_tail = NULL;
        c->piece = 0;
        c->piece_off = 0;
        st_out_free(o);
    }
}

static void st_conn_send_done(st_io_t *io, int res)
{
    st_conn_t *c = io->data;
    c->sending = false;
    if (!c->open) {
        st_conn_unref(c);
        return;
    }
    if (res < 0 && res != -EAGAIN) {
        ST_DEBUG("send to %s: %s", c->peer, strerror(-res));
        st_conn_close(c);
        st_conn_unref(c);
        return;
    }
    if (res > 0 && c->msg.msg_iovlen > 0) {
        st_conn_advance(c, res);
        if (c->bounce_sending)
            c->bounce_pos += (size_t)res;
    }
    if (c->bounce_pos == c->bounce_len)
        c->bounce_pos = c->bounce_len = 0;
    c->bounce_sending = false;
    c->msg.msg_iovlen = 0;
    st_conn_pump(c);
    st_conn_arm_recv(c);
    st_conn_check_drained(c);
    st_conn_unref(c);
}

/* A file read into bounce for a transport that cannot sendfile finished. */
static void st_conn_fread_done(st_io_t *io, int res)
{
    st_conn_t *c = io->data;
    c->sending = false;
    c->freading = false;
    if (!c->open) {
        st_conn_unref(c);
        return;
    }
    if (res <= 0) {
        if (res == 0)
            ST_WARN("file range for %s ended early", c->peer);
        else
            ST_DEBUG("reading file bytes for %s: %s", c->peer, strerror(-res));
        st_conn_close(c);
        st_conn_unref(c);
        return;
    }
    c->bounce_len = (size_t)res;
    c->bounce_pos = 0;
    st_conn_pump(c);
    st_conn_arm_recv(c);
    st_conn_check_drained(c);
    st_conn_unref(c);
}

/* The copy path of file piece f (left bytes still to go): sends what bounce holds, or reads
 * the next chunk of the file into it. Starts one operation or closes the connection. */
static void st_conn_copy_file(st_conn_t *c, const st_out_file_t *f, size_t left)
{
    if (c->bounce_pos < c->bounce_len) {
        c->iov[0].iov_base = c->bounce + c->bounce_pos;
        c->iov[0].iov_len = c->bounce_len - c->bounce_pos;
        memset(&c->msg, 0, sizeof c->msg);
        c->msg.msg_iov = c->iov;
        c->msg.msg_iovlen = 1;
        if (c->t->ops->send(c->t, &c->wio, &c->msg) < 0) {
            st_conn_close(c);
            return;
        }
        c->bounce_sending = true;
    } else {
        if (!c->bounce && !(c->bounce = malloc(ST_BOUNCE_SIZE))) {
            st_conn_close(c);
            return;
        }
        size_t n = left < ST_BOUNCE_SIZE ? left : ST_BOUNCE_SIZE;
        uint64_t off = (uint64_t)(f->off + c->piece_off);
        c->msg.msg_iovlen = 0;
        if (st_loop_read(c->net->loop, &c->fio, f->fd, c->bounce, n, off) < 0) {
            st_conn_close(c);
            return;
        }
        c->freading = true;
    }
    c->sending = true;
    c->refs++;
}

/* Sends as much as possible: memory through one gathered send, files through sendfile (or
 * the copy path). */
static void st_conn_pump(st_conn_t *c)
{
    while (!c->sending && c->open && c->sq_head) {
        st_out_t *o = c->sq_head;
        if (c->piece % 2 == 1) {
            st_out_file_t *f = &o->files[c->piece / 2];
            off_t off = f->off + c->piece_off;
            size_t left = (size_t)(f->len - c->piece_off);
            if (left == 0) {
                st_conn_advance(c, 0);
                continue;
            }
            if (!c->t->ops->can_sendfile(c->t)) {
                st_conn_copy_file(c, f, left);
                return;
            }
            int64_t w = c->t->ops->sendfile(c->t, f->fd, (int64_t)off, left);
            if (w > 0) {
                st_conn_advance(c, w);
                continue;
            }
            if (w == 0) {
                /* The file is shorter than promised (truncated under us): give up. */
                ST_WARN("sendfile to %s: file range ended early", c->peer);
                st_conn_close(c);
                return;
            }
            if (w != -EAGAIN) {
                ST_DEBUG("sendfile to %s: %s", c->peer, strerror((int)-w));
                st_conn_close(c);
                return;
            }
            c->msg.msg_iovlen = 0;
            if (c->t->ops->wait_writable(c->t, &c->wio) < 0) {
                st_conn_close(c);
                return;
            }
            c->sending = true;
            c->refs++;
            return;
        }
        /* Gather memory pieces across queued messages until a file piece. */
        int n = 0;
        st_out_t *q = o;
        int p = c->piece;
        int64_t poff = c->piece_off;
        while (q && n < ST_MAX_IOV) {
            int64_t len = st_piece_len(q, p) - poff;
            if (len > 0) {
                c->iov[n].iov_base = (void *)(st_piece_mem(q, p) + poff);
                c->iov[n].iov_len = (size_t)len;
                n++;
            }
            if (p < 2 * q->nfiles)
                break; /* a file piece follows */
            q = q->next;
            p = 0;
            poff = 0;
        }
        if (n == 0) {
            st_conn_advance(c, 0); /* empty memory pieces: step over them */
            continue;
        }
        memset(&c->msg, 0, sizeof c->msg);
        c->msg.msg_iov = c->iov;
        c->msg.msg_iovlen = (size_t)n;
        if (c->t->ops->send(c->t, &c->wio, &c->msg) < 0) {
            st_conn_close(c);
            return;
        }
        c->sending = true;
        c->refs++;
        return;
    }
}

/* ---- accept ---- */

static void st_lport_arm(st_lport_t *p);

static void st_conn_handshake_done(st_io_t *io, int res)
{
    st_conn_t *c = io->data;
    c->reading = false;
    c->handshaking = false;
    c->rio.cb = st_conn_recv_done;
    if (!c->open) {
        st_conn_unref(c);
        return;
    }
    if (res < 0 || st_auth_transport_ready(&c->auth)) {
        ST_DEBUG("%s handshake with %s failed: %s", c->t->ops->name, c->peer, strerror(-res));
        st_conn_close(c);
        st_conn_unref(c);
        return;
    }
    /* A client certificate names the principal of a connection with no SASL to follow; with
     * SASL (SASL_SSL) the mechanism names it. */
    const char *who = c->t->ops->principal ? c->t->ops->principal(c->t) : NULL;
    if (who && st_auth_done(&c->auth))
        snprintf(c->auth.principal, sizeof c->auth.principal, "User:%s", who);
    st_conn_arm_recv(c);
    st_conn_unref(c);
}

static void st_dclose_unlink(st_dclose_t *d)
{
    if (d->prev)
        d->prev->next = d->next;
    else
        d->net->dcloses = d->next;
    if (d->next)
        d->next->prev = d->prev;
}

static void st_dclose_due(st_timer_t *t)
{
    st_dclose_t *d = t->data;
    st_dclose_unlink(d);
    close(d->fd);
    free(d);
}

/* Holds fd unserved for ms, then closes it (closed now when out of memory). */
static void st_dclose_add(st_net_t *n, int fd, int64_t ms)
{
    st_dclose_t *d = calloc(1, sizeof *d);
    if (!d) {
        close(fd);
        return;
    }
    d->net = n;
    d->fd = fd;
    d->next = n->dcloses;
    if (n->dcloses)
        n->dcloses->prev = d;
    n->dcloses = d;
    st_timer_init(&d->timer, st_dclose_due, d);
    st_loop_timer_start(n->loop, &d->timer, ms);
}

static void st_dclose_all(st_net_t *n)
{
    while (n->dcloses) {
        st_dclose_t *d = n->dcloses;
        st_loop_timer_stop(n->loop, &d->timer);
        st_dclose_unlink(d);
        close(d->fd);
        free(d);
    }
}

/* The peer's address of fd as inet_ntop writes it into ip ("" when not an IP socket). */
static void st_peer_ip(int fd, char ip[INET6_ADDRSTRLEN], int *port)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    ip[0] = 0;
    *port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *sa = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &sa->sin_addr, ip, INET6_ADDRSTRLEN);
        *port = ntohs(sa->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *sa = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &sa->sin6_addr, ip, INET6_ADDRSTRLEN);
        *port = ntohs(sa->sin6_port);
    }
}

/* Makes a connection over transport t (taken over, closed on failure) belonging to l, and
 * starts its handshake or its first receive. */
static int st_conn_start(st_net_t *n, st_transport_t *t, const st_listener_t *l, bool counted,
                         st_conn_t **out)
{
    st_conn_t *c = calloc(1, sizeof *c);
    uint8_t *rbuf = malloc(ST_RBUF_SIZE);
    if (!c || !rbuf) {
        free(c);
        free(rbuf);
        t->ops->close(t);
        return -ENOMEM;
    }
    c->net = n;
    c->t = t;
    c->listener = l;
    c->counted = counted;
    st_auth_init(&c->auth, l->protocol);
    c->id = ++n->next_id;
    c->refs = 1;
    c->open = true;
    c->rbuf = rbuf;
    c->rio.cb = st_conn_recv_done;
    c->rio.data = c;
    c->wio.cb = st_conn_send_done;
    c->wio.data = c;
    c->fio.cb = st_conn_fread_done;
    c->fio.data = c;
    st_timer_init(&c->mute, st_conn_unmute, c);
    int port;
    st_peer_ip(t->fd, c->ip, &port);
    snprintf(c->peer, sizeof c->peer, "local");
    if (c->ip[0] && !strchr(c->ip, ':'))
        snprintf(c->peer, sizeof c->peer, "%s:%d", c->ip, port);
    c->next = n->conns;
    if (n->conns)
        n->conns->prev = c;
    n->conns = c;
    n->nconns++;
    n->stats.accepted++;
    ST_DEBUG("connection %llu from %s on listener %s", (unsigned long long)c->id, c->peer, l->name);
    if (out)
        *out = c;
    if (t->ops->handshake) {
        c->rio.cb = st_conn_handshake_done;
        if (t->ops->handshake(t, &c->rio) < 0) {
            c->rio.cb = st_conn_recv_done;
            st_conn_close(c);
            return 0;
        }
        c->handshaking = true;
        c->reading = true;
        c->refs++;
        return 0;
    }
    st_auth_transport_ready(&c->auth); /* no handshake: the transport is ready now */
    st_conn_arm_recv(c);
    return 0;
}

/* An accepted socket through admission, then served (or closed, or held). False when it is
 * held for a slot (ST_NET_ADMIT_WAIT): the port then stays unarmed. */
static bool st_lport_take(st_lport_t *p, int res)
{
    st_net_t *n = p->net;
    /* the connection quotas first (Kafka's ConnectionQuotas.inc, before the socket is set
     * up): refused, closed now; throttled, held and closed later */
    char ip[INET6_ADDRSTRLEN] = "";
    if (n->adm.on_accept) {
        int port;
        st_peer_ip(res, ip, &port);
        int64_t admit = n->adm.on_accept(n->h.ctx, ip, p->listener);
        if (admit == ST_NET_ADMIT_WAIT) {
            p->held_fd = res;
            return false;
        }
        if (admit < 0) {
            close(res);
            return true;
        }
        if (admit > 0) {
            st_dclose_add(n, res, admit);
            return true;
        }
    }
    int one = 1;
    setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    st_transport_t *t;
    int rc =
        p->make ? p->make(p->make_arg, n->loop, res, &t) : st_transport_tcp_new(n->loop, res, &t);
    st_conn_t *c = NULL;
    if (rc) {
        ST_WARN("listener %s: cannot set up a connection: %s", p->listener->name, strerror(-rc));
        close(res);
    } else {
        st_conn_start(n, t, p->listener, n->adm.on_accept != NULL, &c);
    }
    if (!c && n->adm.on_accept && n->adm.on_release) /* never a connection: given back */
        n->adm.on_release(n->h.ctx, ip);
    return true;
}

static void st_net_accept_done(st_io_t *io, int res)
{
    st_lport_t *p = io->data;
    st_net_t *n = p->net;
    p->armed = false;
    if (res >= 0 && !n->accepting) {
        close(res);
        res = -ECANCELED;
    }
    if (res >= 0) {
        if (!st_lport_take(p, res))
            return; /* held: accepting resumes once it is admitted */
    } else if (res != -ECANCELED && res != -EAGAIN && res != -EINTR) {
        ST_WARN("accept on listener %s: %s", p->listener->name, strerror(-res));
    }
    if (n->accepting)
        st_lport_arm(p);
    else
        st_net_maybe_done(n);
}

void st_net_admission_retry(st_net_t *n)
{
    for (int i = 0; n->accepting && i < n->nports; i++) {
        st_lport_t *p = &n->ports[i];
        if (p->held_fd < 0)
            continue;
        int fd = p->held_fd;
        p->held_fd = -1;
        if (st_lport_take(p, fd))
            st_lport_arm(p);
    }
}

/* Closes the sockets held for admission (shutdown). */
static void st_net_close_held(st_net_t *n)
{
    for (int i = 0; i < n->nports; i++)
        if (n->ports[i].held_fd >= 0) {
            close(n->ports[i].held_fd);
            n->ports[i].held_fd = -1;
        }
}

int st_net_adopt(st_net_t *n, st_transport_t *t, const st_listener_t *l, st_conn_t **out)
{
    if (!n->accepting) {
        t->ops->close(t);
        return -ECANCELED;
    }
    return st_conn_start(n, t, l, false, out);
}

/* The loop task behind st_budget_put: connections waiting for budget, oldest first, parse
 * their next frame again; the first that still does not fit stops the round. */
static void st_net_wake(st_task_t *t)
{
    st_net_t *n = t->data;
    n->wake_queued = false;
    while (n->wait_head) {
        st_conn_t *c = n->wait_head;
        if (c->muted) {
            /* it takes its place again when the mute ends (st_conn_unmute parses) */
            st_wait_unlink(c);
            continue;
        }
        c->refs++; /* held across the parse, which may deliver and close */
        c->parsing = true;
        bool ok = st_conn_parse(c);
        c->parsing = false;
        bool still = c->waiting;
        if (ok && c->open)
            st_conn_arm_recv(c);
        st_conn_unref(c);
        if (still)
            break;
    }
}

static void st_lport_arm(st_lport_t *p)
{
    if (st_loop_accept(p->net->loop, &p->aio, p->fd) == 0)
        p->armed = true;
}

int st_net_create(st_net_t **out, st_loop_t *loop, const st_net_port_t *ports, int nports,
                  const st_net_handler_t *h, const st_net_limits_t *lim)
{
    st_net_t *n = calloc(1, sizeof *n);
    st_lport_t *lp = nports > 0 ? calloc((size_t)nports, sizeof *lp) : NULL;
    if (!n || (nports > 0 && !lp)) {
        free(n);
        free(lp);
        return -ENOMEM;
    }
    n->loop = loop;
    n->ports = lp;
    n->nports = nports;
    n->h = *h;
    n->lim = *lim;
    st_task_init(&n->wake, st_net_wake, n);
    n->accepting = true;
    for (int i = 0; i < nports; i++) {
        lp[i].net = n;
        lp[i].fd = ports[i].fd;
        lp[i].listener = ports[i].listener;
        lp[i].make = ports[i].make;
        lp[i].make_arg = ports[i].make_arg;
        lp[i].held_fd = -1;
        lp[i].aio.cb = st_net_accept_done;
        lp[i].aio.data = &lp[i];
    }
    for (int i = 0; i < nports; i++)
        st_lport_arm(&lp[i]);
    *out = n;
    return 0;
}

void st_net_set_admission(st_net_t *n, const st_net_admission_t *a)
{
    n->adm = *a;
}

static void st_net_maybe_done(st_net_t *n)
{
    if (!n->shutting_down || n->nconns != 0 || !n->done)
        return;
    for (int i = 0; i < n->nports; i++)
        if (n->ports[i].armed)
            return;
    void (*done)(void *) = n->done;
    n->done = NULL;
    done(n->done_arg);
}

void st_net_shutdown(st_net_t *n, void (*done)(void *), void *arg)
{
    n->shutting_down = true;
    n->done = done;
    n->done_arg = arg;
    n->accepting = false;
    st_dclose_all(n);
    st_net_close_held(n);
    for (int i = 0; i < n->nports; i++)
        if (n->ports[i].armed)
            st_loop_cancel(n->loop, &n->ports[i].aio);
    for (st_conn_t *c = n->conns, *next; c; c = next) {
        next = c->next;
        c->draining = true;
        st_wait_unlink(c); /* its partial request will not be read any further */
        if (c->reading && c->nslots == 0 && !c->frame && c->rlen == 0)
            c->t->ops->cancel(c->t, &c->rio);
        st_conn_check_drained(c);
    }
    st_net_maybe_done(n);
}

void st_net_close_all(st_net_t *n)
{
    st_dclose_all(n);
    st_net_close_held(n);
    for (st_conn_t *c = n->conns, *next; c; c = next) {
        next = c->next;
        if (c->reading)
            c->t->ops->cancel(c->t, &c->rio);
        if (c->sending && c->freading)
            st_loop_cancel(n->loop, &c->fio);
        else if (c->sending)
            c->t->ops->cancel(c->t, &c->wio);
        st_conn_close(c);
    }
}

void st_net_destroy(st_net_t *n)
{
    if (!n)
        return;
    ST_ASSERT(n->nconns == 0);
    for (int i = 0; i < n->nports; i++)
        if (n->ports[i].fd >= 0)
            close(n->ports[i].fd);
    free(n->ports);
    free(n);
}

size_t st_net_conn_count(const st_net_t *n)
{
    return n->nconns;
}

const st_net_stats_t *st_net_stats(const st_net_t *n)
{
    return &n->stats;
}
