/*
 * throttle.h — client quotas enforced on this broker: the bytes a Produce brings and a Fetch
 * takes are counted against the quota that applies to the connection (auth/quota.h: Kafka's
 * precedence over user, client id and defaults), and a client above its quota is told how
 * long to wait (throttle_time_ms) and not read for that long (st_conn_mute), as Kafka's
 * throttled channel.
 *
 * request_percentage: the time this shard spends in a client's handlers (dispatch times the
 * handler call, one clock read after it; work a handler hands to other shards or finishes in a
 * later callback is not counted) against a percentage of one shard, as Kafka's
 * ClientRequestQuotaManager counts request handler time. The throttle is decided before the
 * handler from the rate measured so far, so the response that finds the client over its quota
 * carries it (throttle_time_ms, where the response begins with it, broker/request.c) and the
 * connection is muted once it is sent; the request's own time is recorded after. Exempt as in
 * Kafka: ApiVersions, the SASL exchange, the brokers' own requests (a follower's Fetch,
 * WriteTxnMarkers), which mark themselves with st_kthrottle_exempt.
 *
 * controller_mutation_rate: the partitions CreateTopics, CreatePartitions and DeleteTopics
 * create or delete, against a token bucket (auth/quota.h), decided topic by topic before the
 * request goes to the controller, as Kafka's ControllerMutationQuotaManager: strict from
 * CreateTopics v6, CreatePartitions v3, DeleteTopics v5 (a topic asked while the bucket is in
 * debt is answered THROTTLING_QUOTA_EXCEEDED with the time to wait), permissive before (every
 * topic goes ahead and the response is throttled by the debt). A topic the controller then
 * refuses gives its partitions back (Kafka checks the quota only after a topic's own checks).
 *
 * Usage is counted per shard: a connection's shard counts what its connections bring there.
 * A client whose connections land on several shards gets the quota on each (as a client of
 * several Kafka brokers gets it on each broker); one connection, the usual case per broker,
 * gets exactly the quota.
 *
 * Threads: the connection's shard.
 */
#ifndef ST_KAFKA_THROTTLE_H
#define ST_KAFKA_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>

#include "auth/quota.h"
#include "broker/request.h"

enum { ST_KTHROTTLE_PRODUCE, ST_KTHROTTLE_FETCH, ST_KTHROTTLE_NTYPES };

/* Counts `bytes` of r against its connection's quota of `key` (ST_QUOTA_PRODUCER_BYTE_RATE,
 * ST_QUOTA_CONSUMER_BYTE_RATE); returns the throttle time in ms (0: within quota, or no quota
 * applies) and, when above 0, mutes the connection that long. */
int32_t st_kthrottle_record(st_kreq_t *r, int key, int64_t bytes);
/* request_percentage around one handler call (dispatch): begin resolves the quota and sets
 * r->throttle_ms from the rate so far; end records the time since r's start (start_ns, read
 * before: r may be gone) unless the handler called st_kthrottle_exempt. */
typedef struct st_kreqtime {
    bool on;
    double bound;
    st_quota_entity_t tags;
} st_kreqtime_t;
void st_kthrottle_request_begin(st_kreq_t *r, st_kreqtime_t *t);
void st_kthrottle_request_end(st_kshard_t *s, st_kreqtime_t *t, int64_t start_ns);
/* The request being handled is the brokers' own (a follower's Fetch): not counted, not
 * throttled by request_percentage. Only from within its handler's first call. */
void st_kthrottle_exempt(st_kreq_t *r);

/* controller_mutation_rate for one request: begin resolves the quota (strict when the
 * request's version is strict_since or later); take asks for a topic's partitions: 0 when
 * they may go ahead (taken), else the throttle time in ms and the topic is refused
 * THROTTLING_QUOTA_EXCEEDED (strict only); refund gives back a topic's partitions the
 * controller refused; finish sets r->throttle_ms to at least the quota's throttle time. */
typedef struct st_kmutation {
    bool on, strict;
    double bound;
    int32_t throttle_ms; /* strict: the last refusal's; permissive: the debt after the last take */
    st_quota_entity_t tags;
} st_kmutation_t;
void st_kthrottle_mutation_begin(st_kreq_t *r, st_kmutation_t *m, int16_t strict_since);
int32_t st_kthrottle_mutation_take(st_kreq_t *r, st_kmutation_t *m, int32_t partitions);
void st_kthrottle_mutation_refund(st_kreq_t *r, st_kmutation_t *m, int32_t partitions);
void st_kthrottle_mutation_finish(st_kreq_t *r, st_kmutation_t *m);

/* Shard stop: frees the shard's usage counters. */
void st_kthrottle_shard_fini(st_kshard_t *s);

#endif
