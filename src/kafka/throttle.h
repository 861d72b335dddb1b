/*
 * throttle.h — client quotas enforced on this broker: the bytes a Produce brings and a Fetch
 * takes are counted against the quota that applies to the connection (auth/quota.h: Kafka's
 * precedence over user, client id and defaults), and a client above its quota is told how
 * long to wait (throttle_time_ms) and not read for that long (st_conn_mute), as Kafka's
 * throttled channel.
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

#include <stdint.h>

#include "broker/request.h"

enum { ST_KTHROTTLE_PRODUCE, ST_KTHROTTLE_FETCH, ST_KTHROTTLE_NTYPES };

/* Counts `bytes` of r against its connection's quota of `key` (ST_QUOTA_PRODUCER_BYTE_RATE,
 * ST_QUOTA_CONSUMER_BYTE_RATE); returns the throttle time in ms (0: within quota, or no quota
 * applies) and, when above 0, mutes the connection that long. */
int32_t st_kthrottle_record(st_kreq_t *r, int key, int64_t bytes);
/* Shard stop: frees the shard's usage counters. */
void st_kthrottle_shard_fini(st_kshard_t *s);

#endif
