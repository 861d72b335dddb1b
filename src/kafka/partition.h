/*
 * partition.h — the partitions a shard owns: their logs, high watermarks, and which shards
 * have fetches waiting on them.
 *
 * A partition is found by (topic id, partition index) in the owning shard's table. The high
 * watermark is what consumers may read: the durable offset under the strict flush policy
 * (consumers never see what a crash could take back), the log end under write caching.
 * When it moves, every shard with a waiting fetch on the partition is told once.
 *
 * Threads: the owning shard's only.
 */
#ifndef ST_KAFKA_PARTITION_H
#define ST_KAFKA_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/config.h"
#include "cluster/metadata.h"
#include "kafka/producer_state.h"
#include "storage/log.h"

typedef struct st_kshard st_kshard_t;

typedef struct st_part {
    uint8_t topic_id[16];
    int32_t index;
    char *topic;
    st_log_t *log;
    int64_t hw;
    uint64_t waiters[4]; /* bitmap of shards (up to 256) with fetches waiting */
    int pending_durable; /* durability callbacks outstanding (they hold the partition) */
    bool dead;           /* deleted: freed once pending_durable drops to 0 */
    int open_err;        /* offline (log NULL): why its log could not be opened */
    uint64_t records_in, bytes_in, records_out, bytes_out;
    st_pstate_t pstate;   /* idempotent producers (rebuilt from the log at open) */
    struct st_part *next; /* hash chain */
} st_part_t;

typedef struct st_parts {
    st_part_t **buckets;
    size_t nbuckets;
    size_t count;
} st_parts_t;

void st_parts_init(st_parts_t *t);
/* Closes every log cleanly (shutdown). */
void st_parts_fini(st_parts_t *t);
st_part_t *st_parts_get(const st_parts_t *t, const uint8_t topic_id[16], int32_t index);
/* Opens (creating) the log of a partition this shard owns. When the log cannot be opened
 * the partition is still added, offline (log NULL, open_err set), and the error returned. */
int st_parts_open(st_kshard_t *s, const st_md_topic_t *t, int32_t index, st_part_t **out);
/* Deletes the partition's files and forgets it. */
void st_parts_delete(st_kshard_t *s, st_part_t *p);
/* Applies changed topic configs to an open log. */
void st_parts_reconfigure(st_kshard_t *s, st_part_t *p, const st_md_topic_t *t);
/* Calls fn for every partition. */
void st_parts_each(st_parts_t *t, void (*fn)(void *arg, st_part_t *p), void *arg);

/* The log settings of a topic: broker defaults overlaid with the topic's overrides. */
void st_topic_log_config(const st_config_t *cfg, const st_md_topic_t *t, st_log_config_t *out);

/* Frees a deleted partition once no durability callback refers to it. */
void st_part_maybe_free(st_part_t *p);
/* Recomputes the high watermark; if it moved, wakes the shards waiting on it. */
void st_part_update_hw(st_kshard_t *s, st_part_t *p);
/* Housekeeping of the idempotent producers (the shard's tick): expires idle producer ids,
 * logs evictions, and writes a producer state snapshot when one is due. */
void st_part_tick_producers(st_part_t *p, int64_t now_ms);
/* Marks shard `waiter` as waiting for data past `offset`; if the high watermark is already
 * past it, wakes that shard at once. */
void st_part_add_waiter(st_kshard_t *s, st_part_t *p, int waiter, int64_t offset);

#endif
