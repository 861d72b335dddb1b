/*
 * client.h — the broker-to-broker client: sends any Kafka request to another broker, named by
 * its broker id or as the leader of a partition, and hands back the answer. Transaction
 * markers (WriteTxnMarkers to each partition's leader) are its first intended user. It runs
 * the fetcher's connection layer (conn.h: connect, framing, reconnect backoff) on a thread of
 * its own (io/uvthread.h), and routes with the metadata it was last given, as the fetcher
 * follows the leaders the metadata names.
 *
 *   st_client_send(req) (any thread) --> ROUTE: the broker (req->broker, or the leader of
 *       req->topic / req->partition in the latest metadata) --> its connection (one per
 *       broker, reconnecting with conn.h's backoff) --> IN FLIGHT --answer--> req->done(req, 0,
 *       frame): the callback decodes the answer and returns
 *           ST_CLIENT_DONE: req is finished (the caller's again)
 *           ST_CLIENT_RETRY: the answer said NOT_LEADER_OR_FOLLOWER or the like: ROUTE again
 *               after ST_CLIENT_RETRY_MS (newer metadata may name another leader)
 *       no broker to route to, or the connection lost before the answer: ROUTE again after
 *           ST_CLIENT_RETRY_MS
 *   each ROUTE after the first uses one of req->max_tries; when none is left, or at
 *   st_client_stop, req->done(req, err, NULL, 0) once more with the last error (ST_E_NOT_LEADER:
 *   no route; -ECONNRESET / -ECONNREFUSED: connection lost; ST_E_AGAIN: the answers kept
 *   asking for a retry; ST_E_CLOSED: the client stopped), its result ignored
 *
 * Memory: the caller owns req (and body, which must stay valid until done finishes req) and
 * must not touch it between st_client_send and the done call that finishes it. done runs on
 * the client thread; frame (the whole answer without its size prefix, the correlation id first,
 * as proto/'s decoders take it) is valid during the call only.
 *
 * Threads: st_client_start / _stop on the owner's thread; st_client_send and
 * st_client_set_metadata from any thread; done on the client thread.
 */
#ifndef ST_REPLICA_CLIENT_H
#define ST_REPLICA_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/config.h"
#include "cluster/metadata.h"

typedef struct st_client st_client_t;

#define ST_CLIENT_RETRY_MS      100   /* between two routes of one request */
#define ST_CLIENT_TIMEOUT_MS    30000 /* an answer slower than this closes the connection */
#define ST_CLIENT_DEFAULT_TRIES 5

enum { ST_CLIENT_DONE = 0, ST_CLIENT_RETRY = 1 };

typedef struct st_client_req st_client_req_t;
/* The answer (err 0, frame) or the end of the tries (err != 0, frame NULL). Returns
 * ST_CLIENT_DONE or ST_CLIENT_RETRY (heeded only with err 0 and tries left). */
typedef int (*st_client_done_fn)(st_client_req_t *req, int err, const uint8_t *frame, size_t len);

struct st_client_req {
    int32_t broker;      /* the broker to send to; -1: the leader of topic / partition */
    const char *topic;   /* with broker -1 */
    int32_t partition;   /* with broker -1 */
    int16_t api_key;     /* the request: its header is the client's (correlation id, */
    int16_t api_version; /* client id, and tagged fields where the version is flexible) */
    const uint8_t *body; /* the encoded request body, without header or size */
    size_t len;
    int max_tries; /* routes in all (<= 0: ST_CLIENT_DEFAULT_TRIES) */
    st_client_done_fn done;
    void *arg;
    /* private (the client thread's) */
    int tries, last_err;
    int32_t sent_to;
    int64_t retry_at;
    st_client_req_t *next;
};

/* Starts the client thread; client_id names it in the brokers' request headers; cfg (NULL:
 * plain TCP) gives the inter-broker listener's TLS and SASL settings (secure.h) and must
 * outlive the client. 0, or an error with one line in err. */
int st_client_start(st_client_t **out, const char *client_id, const st_config_t *cfg, char *err,
                    size_t errlen);
/* Finishes every request not answered yet (done with ST_E_CLOSED), closes the connections,
 * joins the thread and frees the client. */
void st_client_stop(st_client_t *cl);
/* Any thread: the metadata to route with from now on (a reference is taken). */
void st_client_set_metadata(st_client_t *cl, st_md_t *md);
/* Any thread: sends req (see the top of this header). After st_client_stop began: done at
 * once with ST_E_CLOSED, on the calling thread. */
void st_client_send(st_client_t *cl, st_client_req_t *req);

#endif
