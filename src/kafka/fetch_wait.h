/*
 * fetch_wait.h — fetches waiting for data (long polling).
 *
 * A fetch that found fewer than min_bytes registers, on each partition's owner shard, that
 * its own shard is waiting for data past the high watermark its read saw (partition.h keeps
 * one bit per shard), and links itself into its shard's list of waiting fetches. A fetch is
 * therefore woken only by data it has not seen yet (or a cut, or its deadline), however much
 * of what it wants is there already. When a partition's high watermark moves, the owner sends
 * one notification to each waiting shard, which re-runs every waiting fetch that includes
 * that partition. A timer answers the fetch at max_wait_ms with whatever there is.
 *
 * Threads: each function on the shard named by its first argument.
 */
#ifndef ST_KAFKA_FETCH_WAIT_H
#define ST_KAFKA_FETCH_WAIT_H

#include <stdint.h>

typedef struct st_kshard st_kshard_t;

/* On the owner shard: tells shard `waiter` that partition (topic_id, index) moved. */
void st_fetch_notify(st_kshard_t *owner, int waiter, const uint8_t topic_id[16], int32_t index);
/* Answers every waiting fetch of the shard now (shutdown). */
void st_fetch_cancel_all(st_kshard_t *s);

#endif
