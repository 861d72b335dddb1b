/*
 * conn.h — one client connection from this broker to another broker's Kafka listener, on a
 * libuv loop: connecting (over TLS and with SASL first when the inter-broker listener asks,
 * secure.h) (again after a loss, with a backoff of ST_RCONN_BACKOFF_MIN_MS
 * doubling to ST_RCONN_BACKOFF_MAX_MS), size-prefixed framing of requests and answers, the
 * requests in flight matched in order to the answers (Kafka answers a connection's requests in
 * order, each with its request's correlation id) and a bound on how long the oldest may wait.
 * The replica fetcher (fetcher.c) keeps one per leader; the inter-broker client (client.h) one
 * per broker. What a request or an answer means is the owner's.
 *
 *   st_rconn_new --> IDLE --st_rconn_pump (retry time reached)--> CONNECTING
 *   CONNECTING --TCP connected--> [TLS handshake, the certificate checked (secure.h)]
 *       --> [SASL: SaslHandshake, SaslAuthenticate rounds] --> UP: ops->connected;
 *       st_rconn_send puts requests in flight (a failed handshake or authentication is a
 *       loss like any other: logged, retried after the backoff)
 *   UP --a whole answer frame--> ops->answer(the oldest request in flight)
 *   any --error, EOF, an answer to no request, st_rconn_fail, st_rconn_tick's timeout-->
 *       every request in flight handed back (ops->drop, oldest first), then ops->lost;
 *       IDLE until the backoff passed
 *   st_rconn_close: in-flight requests dropped (ops->drop), no more callbacks; the memory goes
 *       once the handle has closed
 *
 * Threads: the loop's; every callback runs on it.
 */
#ifndef ST_REPLICA_CONN_H
#define ST_REPLICA_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/buf.h"
#include "replica/secure.h"

#define ST_RCONN_BACKOFF_MIN_MS 100
#define ST_RCONN_BACKOFF_MAX_MS 1000
#define ST_RCONN_MAX_FRAME      (128u << 20) /* an answer larger than this closes the connection */

typedef struct st_rconn st_rconn_t;

typedef struct st_rconn_ops {
    /* Connected: requests may be sent (may be NULL). */
    void (*connected)(void *arg, st_rconn_t *c);
    /* The answer to req, the oldest request in flight (its correlation id matched): frame is
     * the answer without its size prefix, valid during the call. */
    void (*answer)(void *arg, st_rconn_t *c, void *req, const uint8_t *frame, size_t len);
    /* A request in flight that will have no answer (the connection was lost or closed). */
    void (*drop)(void *arg, st_rconn_t *c, void *req);
    /* The connection was lost (after every drop); why is for a log line (may be NULL). */
    void (*lost)(void *arg, st_rconn_t *c, const char *why);
} st_rconn_ops_t;

/* A connection to host:port on loop; `what` names the peer in log lines ("leader", "broker 3");
 * sec (NULL: plain TCP) must outlive it. Connects at the first st_rconn_pump. NULL when out
 * of memory. */
st_rconn_t *st_rconn_new(uv_loop_t *loop, const char *host, int port, const char *what,
                         const st_rsec_t *sec, const st_rconn_ops_t *ops, void *arg);
/* Drops every request in flight (ops->drop) and closes; nothing more is called back. */
void st_rconn_close(st_rconn_t *c);

/* Connects when not connected, not connecting, and the backoff has passed. True when up. */
bool st_rconn_pump(st_rconn_t *c, int64_t now_ms);
bool st_rconn_up(const st_rconn_t *c);
/* Requests in flight. */
int st_rconn_inflight(const st_rconn_t *c);
/* Sends the whole request frame in b (taken: b is left empty) with correlation id corr, req
 * being the owner's record of it. 0, or an error (nothing sent, req still the caller's; the
 * caller fails the connection). */
int st_rconn_send(st_rconn_t *c, st_buf_t *b, int32_t corr, void *req);
/* Drops the connection (a malformed answer, say); logs why once until st_rconn_healthy. */
void st_rconn_fail(st_rconn_t *c, const char *why);
/* An answer made sense: the backoff starts over from its minimum, and the next loss is
 * logged. */
void st_rconn_healthy(st_rconn_t *c);
/* Fails the connection when its oldest request has waited more than timeout_ms, or when its
 * TLS handshake or SASL authentication is not done timeout_ms after the TCP connect began.
 * True when it did. */
bool st_rconn_tick(st_rconn_t *c, int64_t now_ms, int64_t timeout_ms);
const char *st_rconn_host(const st_rconn_t *c);
int st_rconn_port(const st_rconn_t *c);

#endif
