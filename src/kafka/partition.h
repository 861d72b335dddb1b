/*
 * partition.h — the partitions a shard owns: their logs, high watermarks, and which shards
 * have fetches waiting on them.
 *
 * A partition is found by (topic id, partition index) in the owning shard's table. The high
 * watermark is what consumers may read: the durable offset under the strict flush policy
 * (consumers never see what a crash could take back), the log end under write caching.
 * When it moves, every shard with a waiting fetch on the partition is told once.
 *
 * The log cleaner. A compacted partition (cleanup.policy holds "compact") is cleaned on its
 * own shard, in slices (st_log_clean_step), never in one blocking call:
 *
 *   tick (100 ms) --st_parts_clean_tick: due partitions, dirtiest first, up to
 *       log.cleaner.threads at once--> active --timer (1 ms)--> a turn: a few slices of
 *       ST_CLEAN_SLICE_BYTES for each active partition, at most ST_CLEAN_TURN_NS of work,
 *       then back to the event loop --> next turn while work remains; a partition whose step
 *       says "nothing to do" (or fails) leaves the active set; with none left the timer stops.
 *
 * Reads are throttled to log.cleaner.io.max.bytes.per.second / shards (a token bucket; the
 * timer waits out a deficit). Each clean's key map gets at most log.cleaner.dedupe.buffer.size
 * / shards / log.cleaner.threads. Partitions that do not compact cost one flag test per tick.
 *
 * Threads: the owning shard's only.
 */
#ifndef ST_KAFKA_PARTITION_H
#define ST_KAFKA_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/config.h"
#include "cluster/metadata.h"
#include "io/loop.h"
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
    st_pstate_t pstate; /* idempotent producers (rebuilt from the log at open) */
    /* log cleaner (compacted topics) */
    bool cleaning;          /* in the shard's active set */
    bool clean_full_map;    /* the last clean ran out of key map: the next gets the whole share */
    size_t clean_map_bytes; /* key map of a clean that starts now */
    int64_t clean_retry_ms; /* a clean failed: not again before this (monotonic ms) */
    struct st_part *next;   /* hash chain */
} st_part_t;

#define ST_CLEAN_MAX_ACTIVE  64          /* log.cleaner.threads' upper bound */
#define ST_CLEAN_SLICE_BYTES (256 << 10) /* input bytes of one st_log_clean_step */
#define ST_CLEAN_TURN_NS     1000000     /* work of one turn before yielding to the loop */
#define ST_CLEAN_RETRY_MS    15000       /* after a failed clean (Kafka's log.cleaner.backoff.ms) */

/* The shard's log cleaner: the partitions being cleaned and the read throttle. */
typedef struct st_parts_cleaner {
    st_kshard_t *shard; /* set by the first st_parts_clean_tick */
    st_timer_t timer;   /* armed while a clean has work left */
    st_part_t *active[ST_CLEAN_MAX_ACTIVE];
    int nactive;
    double tokens;     /* bytes that may be read now (negative: a deficit to wait out) */
    int64_t refill_ns; /* when tokens were last refilled */
} st_parts_cleaner_t;

typedef struct st_parts {
    st_part_t **buckets;
    size_t nbuckets;
    size_t count;
    st_parts_cleaner_t cleaner;
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
/* The cleaner's scheduling (the shard's tick): when fewer than log.cleaner.threads partitions
 * are being cleaned, adds the dirtiest of those due (st_log_clean_due), and starts the turns.
 * Does nothing with log.cleaner.enable=false. */
void st_parts_clean_tick(st_kshard_t *s);
/* Marks shard `waiter` as waiting for data past `offset`; if the high watermark is already
 * past it, wakes that shard at once. */
void st_part_add_waiter(st_kshard_t *s, st_part_t *p, int waiter, int64_t offset);

#endif
