/*
 * txn_route.h — how the transaction APIs reach their coordinators (txn_route.c): the
 * __transaction_state service (coordsvc.h), the coordinator shard of a transactional id, a
 * request context whose calls fan out to the coordinators and gather back (broker/fanout.h),
 * and the inter-broker client the coordinators send their markers with (txn_send.c). The
 * handlers (h_txn.c, h_init_producer_id.c) decode, route each id's part with
 * st_ktxn_call_id, and fill the answer in their finish.
 *
 * A call's answer memory is its own arena, written on the coordinator; ST_KTXN_RESPOND frees
 * the calls once the answer is encoded (as group_route.h's calls).
 *
 * Threads: contexts and routing on the request's shard; an exec function on the coordinator's
 * shard, which answers with st_ktxn_call_return (now or later). The client's functions as
 * each says.
 */
#ifndef ST_KAFKA_TXN_ROUTE_H
#define ST_KAFKA_TXN_ROUTE_H

#include "broker/fanout.h"
#include "broker/request.h"
#include "cluster/config.h"
#include "kafka/coordsvc.h"
#include "kafka/kshard.h"
#include "txn/coord.h"

typedef struct st_ktxn_ctx st_ktxn_ctx_t;
typedef struct st_ktxn_call st_ktxn_call_t;
typedef void (*st_ktxn_exec_fn)(st_kshard_t *s, st_ktxn_call_t *x);

struct st_ktxn_call {
    st_fanout_leg_t leg; /* to the coordinator's shard */
    st_ktxn_ctx_t *ctx;
    st_arena_t arena;  /* answer memory, written on the coordinator */
    int32_t partition; /* of __transaction_state; -1: NOT_COORDINATOR */
    st_ktxn_exec_fn exec;
    void *item;
    st_ktxn_call_t *next;
};

struct st_ktxn_ctx {
    st_kreq_t *r;
    st_fanout_t fan;
    st_ktxn_call_t *calls;
    void (*finish)(st_ktxn_ctx_t *ctx);
    void *data;
};

/* Answers the request with resp, then frees the calls whose arenas the answer used. */
#define ST_KTXN_RESPOND(ctx, api, resp)                                                            \
    do {                                                                                           \
        st_ktxn_call_t *calls_ = (ctx)->calls;                                                     \
        ST_KREQ_RESPOND((ctx)->r, api, resp);                                                      \
        st_ktxn_calls_free(calls_);                                                                \
    } while (0)

/* The transaction coordinator's service: __transaction_state, keys are transactional ids. */
extern const st_coordsvc_t st_ktxn_service;

/* Main thread, before the shards start: the topic configs __transaction_state is created with
 * come from cfg (transaction.state.log.min.isr, .segment.bytes). */
void st_ktxn_configure(const st_config_t *cfg);

/* Shard s's transaction coordinator (NULL before the service starts there, after it stops). */
static inline struct st_tcoord *st_ktxn_coord(const st_kshard_t *s)
{
    st_kafka_shard_t *ks = st_kafka_shard(s);
    return ks ? ks->txns : NULL;
}

/* A context for request r: finish(ctx) on r's shard once every call is answered. NULL: out
 * of memory. */
st_ktxn_ctx_t *st_ktxn_ctx_new(st_kreq_t *r, void (*finish)(st_ktxn_ctx_t *), void *data);
void st_ktxn_ctx_end(st_ktxn_ctx_t *ctx);
/* Sends item to run exec on shard `shard` for partition `partition`. */
void st_ktxn_call_to(st_ktxn_ctx_t *ctx, int shard, int32_t partition, st_ktxn_exec_fn exec,
                     void *item);
/* Sends item to the coordinator of transactional id `id`: without the topic, or where this
 * broker does not lead the id's partition, to this shard with partition -1 (every coordinator
 * function answers NOT_COORDINATOR). */
void st_ktxn_call_id(st_ktxn_ctx_t *ctx, st_kstr_t id, st_ktxn_exec_fn exec, void *item);
/* On the coordinator, from exec (now or later): the call is answered. */
void st_ktxn_call_return(void *arg);
void st_ktxn_calls_free(st_ktxn_call_t *x);

/* ---- the inter-broker client (txn_send.c) ---- */

/* Main thread: starts the broker's client (after the shards) and hands it shard 0's
 * metadata; stops it (before the shards stop: what it still held is answered ST_E_CLOSED to
 * the coordinators). */
int st_ktxn_client_start(st_broker_t *b, char *err, size_t errlen);
void st_ktxn_client_stop(st_broker_t *b);
/* On shard 0 after each adoption: the client routes with s's snapshot from now on. */
void st_ktxn_client_metadata(st_kshard_t *s);
/* st_tcoord_config_t.send_markers (ctx: the coordinator's shard): st_ktxn_markers_send with
 * the broker's client, then st_tcoord_markers_done back on the shard. */
void st_ktxn_send_markers(void *ctx, const st_tmarkers_t *m);
/* Any thread: sends req with the broker's client (replica/client.h); false (nothing sent)
 * before it started or once it stopped. */
struct st_client_req;
bool st_ktxn_client_send(st_broker_t *b, struct st_client_req *req);

/* ---- produce verification (txn_verify.c; KIP-890 part 1, partition.h) ---- */

/* On the request's shard s, once the coordinator answered: errors[i] is partition i's verdict
 * (0: in the transaction; else the Produce error Kafka answers: INVALID_TXN_STATE,
 * INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS for the retriable ones). */
typedef void (*st_ktxn_verify_fn)(st_kshard_t *s, void *arg, const int16_t *errors);
/* Asks the coordinator of transactional id `id` (AddPartitionsToTxn v4, verify_only) whether
 * topics[i]-partitions[i] (i < n; one topic's partitions next to each other) are in producer
 * pid's transaction at epoch; done runs on s, possibly before this returns. */
void st_ktxn_verify(st_kshard_t *s, st_kstr_t id, int64_t pid, int16_t epoch, int n,
                    const st_kstr_t *topics, const int32_t *partitions, st_ktxn_verify_fn done,
                    void *arg);

struct st_client;
typedef void (*st_ktxn_markers_fn)(void *arg, uint64_t id, int err);
/* Any thread: one WriteTxnMarkers v1 per partition of m to its leader with client cl (routed
 * by the client's metadata), each sent again until its answer is final (txn/markers.h's
 * verdicts); then finished(arg, m->id, 0, or the error that ended it: FENCED's ST_E_NOT_LEADER,
 * the client's ST_E_CLOSED) once, on the client thread. 0, or -ENOMEM (finished not called). */
int st_ktxn_markers_send(struct st_client *cl, const st_tmarkers_t *m, st_ktxn_markers_fn finished,
                         void *arg);

#endif
