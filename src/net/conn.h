/*
 * conn.h — a shard's Kafka listeners and its connections.
 *
 * Each shard owns one listening socket per listener (SO_REUSEPORT, so the kernel spreads
 * connections) and every connection it accepts. A connection belongs to the listener that
 * accepted it (st_conn_listener: name, security protocol, advertised endpoint), moves its
 * bytes through that listener's transport (net/transport.h; plain TCP by default) and
 * carries an authentication state (st_conn_auth, net/auth.h) that the protocol layer
 * consults before serving a request. Incoming bytes are cut into size-prefixed frames
 * (int32 length, big-endian, then that many bytes); each complete frame goes to the
 * handler with a sequence number. The handler answers with st_conn_respond(seq, out) in any
 * order; responses leave the socket in sequence order, as Kafka requires.
 *
 * Limits: a frame longer than max_frame (socket.request.max.bytes) closes the connection;
 * while the bytes of unanswered requests plus unsent responses exceed max_inflight, the
 * connection stops reading, so one client cannot take the memory of all; likewise while 4096
 * requests are unanswered.
 *
 * Budget (max_queued, the shard's share of queued.max.request.bytes): a frame too large for
 * the connection's 64 KiB receive buffer needs a buffer of its own, which counts against the
 * shard's budget from the moment its size prefix is read until the request is answered. A
 * connection whose next frame does not fit stops reading and waits, first come first served,
 * until answers free enough; a frame larger than the whole budget goes when nothing else is
 * held. Small frames never wait for the budget, so ordinary clients keep being served while
 * large ones wait. Nothing is dropped: a waiting connection just is not read.
 *
 * Muting (client quotas, Kafka's throttled channel): st_conn_mute stops reading the
 * connection's requests for a while, frames already received included (they wait in the
 * receive buffer, or leave the budget's wait list); answers still go out. A later mute only
 * ever extends it.
 *
 * Lifetime: a connection is freed once it is closed and nothing refers to it: no operation
 * in flight and no unanswered request. Responding to a closed connection is allowed (the
 * response is dropped). All functions run on the owning shard's thread.
 */
#ifndef ST_NET_CONN_H
#define ST_NET_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "io/loop.h"
#include "net/auth.h"
#include "net/listener.h"
#include "net/out.h"
#include "net/transport.h"

typedef struct st_conn st_conn_t;
typedef struct st_net st_net_t;

typedef struct st_net_handler {
    /* A complete frame without its size prefix; the handler owns `frame` (free() it). */
    void (*on_frame)(void *ctx, st_conn_t *c, uint64_t seq, uint8_t *frame, size_t len);
    /* The connection closed; answers to its outstanding requests will be dropped. */
    void (*on_close)(void *ctx, st_conn_t *c);
    void *ctx;
} st_net_handler_t;

/* Admission of accepted connections (st_net_set_admission): on_accept for a connection from ip
 * (its address as inet_ntop writes it) on l: 0 serves it (on_release(ip) follows once it
 * closes, or at once if it cannot be set up), < 0 closes it at once, > 0 holds it unserved
 * that many ms and then closes it (Kafka's throttled connection), ST_NET_ADMIT_WAIT holds it
 * and stops accepting on its port until st_net_admission_retry admits it (Kafka's acceptor
 * waiting for a connection slot: the others wait in the kernel's backlog). Called with h's
 * ctx. */
#define ST_NET_ADMIT_WAIT INT64_MIN
typedef struct st_net_admission {
    int64_t (*on_accept)(void *ctx, const char *ip, const st_listener_t *l);
    void (*on_release)(void *ctx, const char *ip);
} st_net_admission_t;

typedef struct st_net_limits {
    size_t max_frame;    /* socket.request.max.bytes */
    size_t max_inflight; /* unanswered request bytes + unsent response bytes per connection */
    size_t max_queued;   /* bytes of large frames held by all connections; 0: unlimited */
} st_net_limits_t;

typedef struct st_net_stats {
    uint64_t accepted;
    uint64_t closed;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t frames_too_large;
    uint64_t queued_waits; /* times a connection waited for the frame budget */
} st_net_stats_t;

/* One listening socket of a net: what connections accepted on it belong to. */
typedef struct st_net_port {
    int fd;                        /* listening socket; the net owns it from st_net_create */
    const st_listener_t *listener; /* must outlive the net */
    st_transport_make_t make;      /* transport of each accepted socket; NULL: plain TCP */
    void *make_arg;                /* make's first argument (TLS: the st_tls_server_t) */
} st_net_port_t;

/* Opens a listening socket bound to host:port with SO_REUSEPORT (port 0: pick one; empty
 * host: every interface). tcp.c. */
int st_net_listen(const char *host, int port, int *fd_out, int *port_out);
/* Fails with -EADDRINUSE when another socket (not ours) already listens on host:port. */
int st_net_probe_port(const char *host, int port);

/* Starts accepting on every port (nports may be 0: connections then come only from
 * st_net_adopt). On failure the ports' descriptors are still the caller's. */
int st_net_create(st_net_t **out, st_loop_t *loop, const st_net_port_t *ports, int nports,
                  const st_net_handler_t *h, const st_net_limits_t *lim);
/* Sets n's admission of the connections it accepts (before its loop runs). */
void st_net_set_admission(st_net_t *n, const st_net_admission_t *a);
/* Offers each connection held by ST_NET_ADMIT_WAIT to on_accept again (a slot may be free). */
void st_net_admission_retry(st_net_t *n);
/* Serves an already connected transport (taken over: closed on failure) as a connection of
 * listener l, as if accepted; *out (may be NULL) gets it. Tests drive socketpairs this way. */
int st_net_adopt(st_net_t *n, st_transport_t *t, const st_listener_t *l, st_conn_t **out);
/* Stops accepting; closes each connection once it has no unanswered request and nothing left
 * to send; calls done(arg) when no connection is left. */
void st_net_shutdown(st_net_t *n, void (*done)(void *arg), void *arg);
/* Closes every connection now (the end of a shutdown that waited long enough). */
void st_net_close_all(st_net_t *n);
/* Frees the listener; every connection must already be gone. */
void st_net_destroy(st_net_t *n);
size_t st_net_conn_count(const st_net_t *n);
const st_net_stats_t *st_net_stats(const st_net_t *n);

/* Answers request `seq`; out may be NULL for a request that gets no response (acks=0). */
void st_conn_respond(st_conn_t *c, uint64_t seq, st_out_t *out);
/* Reads no more requests for ms milliseconds from now (or longer if already muted longer). */
void st_conn_mute(st_conn_t *c, int64_t ms);
/* Closes now; unsent responses are dropped. */
void st_conn_close(st_conn_t *c);
/* Reads no more and closes once every request is answered and every response sent (a failed
 * SASL authentication: its answer leaves, then the connection goes). Call it before the last
 * answer: answering a closed connection may free it. */
void st_conn_close_when_sent(st_conn_t *c);
int st_conn_is_closed(const st_conn_t *c);
/* "ip:port" of the peer ("local" for a socket that is not IPv4). */
const char *st_conn_peer(const st_conn_t *c);
/* The peer's address as inet_ntop writes it ("" when not an IP socket). */
const char *st_conn_ip(const st_conn_t *c);

/* The listener the connection came in on. */
const st_listener_t *st_conn_listener(const st_conn_t *c);
/* The connection's authentication state; the protocol layer reads it before each request
 * and drives its SASL states (net/auth.h). */
st_auth_t *st_conn_auth(st_conn_t *c);
/* Caller data slot (the Kafka layer keeps its per-connection state here). */
void *st_conn_get_data(const st_conn_t *c);
void st_conn_set_data(st_conn_t *c, void *data);
uint64_t st_conn_id(const st_conn_t *c);

#endif
