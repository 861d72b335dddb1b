/*
 * group_route.h — how the group APIs reach their coordinators (group_route.c): the internal
 * topic (created on first use), the coordinator shard of a group, and a request context whose
 * calls fan out to the coordinators and gather back (broker/fanout.h). The handlers
 * (h_group.c) decode, route each group's part with st_kgroup_call_group, and fill the answer
 * in their finish.
 *
 * A call's answer memory is its own arena, written on the coordinator (calls to several shards
 * run at once, so they cannot share the request's); ST_KGROUP_RESPOND frees the calls once the
 * answer is encoded.
 *
 * Threads: contexts and routing on the request's shard; an exec function on the coordinator's
 * shard, which answers with st_kgroup_call_return (now or later).
 */
#ifndef ST_KAFKA_GROUP_ROUTE_H
#define ST_KAFKA_GROUP_ROUTE_H

#include "broker/fanout.h"
#include "broker/request.h"
#include "cluster/metadata.h"
#include "group/coord.h"
#include "kafka/autocreate.h"
#include "kafka/coordsvc.h"
#include "kafka/kshard.h"

typedef struct st_kgroup_ctx st_kgroup_ctx_t;
typedef struct st_kgroup_call st_kgroup_call_t;
typedef void (*st_kgroup_exec_fn)(st_kshard_t *s, st_kgroup_call_t *g);

struct st_kgroup_call {
    st_fanout_leg_t leg; /* to the coordinator's shard */
    st_kgroup_ctx_t *ctx;
    st_arena_t arena; /* answer memory, written on the coordinator */
    int32_t partition;
    st_kgroup_exec_fn exec;
    void *item;
    st_kgroup_call_t *next;
};

struct st_kgroup_ctx {
    st_kreq_t *r;
    st_fanout_t fan; /* one leg per call */
    st_kgroup_call_t *calls;
    void (*finish)(st_kgroup_ctx_t *ctx);
    void *data;
};

/* Answers the request with resp, then frees the calls whose arenas the answer used. */
#define ST_KGROUP_RESPOND(ctx, api, resp)                                                          \
    do {                                                                                           \
        st_kgroup_call_t *calls_ = (ctx)->calls;                                                   \
        ST_KREQ_RESPOND((ctx)->r, api, resp);                                                      \
        st_kgroup_calls_free(calls_);                                                              \
    } while (0)

/* The group coordinator's service (coordsvc.h): __consumer_offsets, keys are group ids. */
extern const st_coordsvc_t st_kgroup_service;

/* Shard s's group coordinator (kshard.h's state: NULL before the service starts there and
 * after it stops). On s's thread. */
static inline struct st_gcoord *st_kgroup_coord(const st_kshard_t *s)
{
    st_kafka_shard_t *ks = st_kafka_shard(s);
    return ks ? ks->groups : NULL;
}

/* The internal topic in a snapshot, or NULL. */
const st_md_topic_t *st_kgroup_offsets_topic(const st_md_t *md);
/* True when shard s coordinates the groups of __consumer_offsets partition `partition`: s owns
 * it and this broker leads it, in s's snapshot. On s's thread. */
bool st_kgroup_leads(const st_kshard_t *s, int32_t partition);

typedef st_coordsvc_ready_fn st_kgroup_ready_fn;
/* Creates __consumer_offsets if the snapshot lacks it, then cb(r, arg) (either way). */
void st_kgroup_ensure_topic(st_kreq_t *r, st_kgroup_ready_fn cb, void *arg);

/* A context for request r: finish(ctx) runs on r's shard once every call is answered. NULL:
 * out of memory. */
st_kgroup_ctx_t *st_kgroup_ctx_new(st_kreq_t *r, void (*finish)(st_kgroup_ctx_t *), void *data);
/* Every call is sent: finish runs once each is answered (now, if none went). */
void st_kgroup_ctx_end(st_kgroup_ctx_t *ctx);
/* Sends item to run exec on shard `shard` for __consumer_offsets partition `partition`. */
void st_kgroup_call_to(st_kgroup_ctx_t *ctx, int shard, int32_t partition, st_kgroup_exec_fn exec,
                       void *item);
/* Sends item to the coordinator of group_id. Without the internal topic, or where this broker
 * does not lead the group's partition (leader.h), the call goes to this shard with partition
 * -1, which every coordinator function answers NOT_COORDINATOR. */
void st_kgroup_call_group(st_kgroup_ctx_t *ctx, st_kstr_t group_id, st_kgroup_exec_fn exec,
                          void *item);
/* On the coordinator, from exec (now or later): the call is answered. */
void st_kgroup_call_return(void *arg);
void st_kgroup_calls_free(st_kgroup_call_t *g);

/* A transaction marker of producer pid (COMMIT when commit, else ABORT) is durable in
 * __consumer_offsets partition `partition`, led here, on its owner shard s: the group
 * coordinator applies (COMMIT) or drops (ABORT) that producer's pending transactional offsets
 * in the partition (TxnOffsetCommit). Called by WriteTxnMarkers once the marker is durable. */
void st_kgroup_txn_marker(st_kshard_t *s, int32_t partition, int64_t pid, bool commit);

/* "/ip" of the connection's peer (brackets of an IPv6 address dropped), as Kafka shows
 * client hosts in JoinGroup and ConsumerGroupHeartbeat members; in the request's arena. */
st_kstr_t st_kgroup_client_host(st_kreq_t *r);

#endif
