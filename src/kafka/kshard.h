/*
 * kshard.h — the Kafka layer's own state on each shard. The shard runtime (broker/shard.h)
 * keeps it behind an opaque pointer (st_kshard_t.proto) and never looks inside: it is created
 * by the layer's shard_start hook, before the shard serves a frame, and freed by shard_fini,
 * once its loop has stopped (kafka/serve.c).
 *
 * Threads: the shard's own thread only.
 */
#ifndef ST_KAFKA_KSHARD_H
#define ST_KAFKA_KSHARD_H

#include "broker/shard.h"

typedef struct st_kafka_shard {
    struct st_fetch *waits; /* fetches waiting for data on this shard (h_fetch.c) */
    /* Metadata requests wait (md_parked) until this broker has caught up with the metadata
     * log since it started (h_metadata.c) */
    bool md_ready;
    int64_t md_wait_since;
    struct st_md_park *md_parked;
    struct st_gcoord *groups;      /* the group coordinator's state on this shard (group_route.c) */
    struct st_tcoord *txns;        /* the transaction coordinator's (txn_route.c) */
    struct sasl_boot *sasl_boot;   /* shard 0: sasl.bootstrap.users in flight (h_sasl.c) */
    struct sasl_oauth *sasl_oauth; /* OAUTHBEARER's key set as this shard last read it */
    struct st_kthrottle *throttle; /* client quota usage on this shard (throttle.c) */
} st_kafka_shard_t;

/* The Kafka layer's state of shard s; NULL before shard_start and after shard_fini. */
static inline st_kafka_shard_t *st_kafka_shard(const st_kshard_t *s)
{
    return (st_kafka_shard_t *)s->proto;
}

#endif
