/*
 * producer_state.h — idempotent producers: per partition, what each producer id last wrote.
 *
 * For every producer id that appended to a partition: its epoch and its last five batches
 * (first and last sequence, first and last offset), as Kafka keeps them. A new batch must
 * carry the next sequence of its epoch; a retry of one of the five cached batches is a
 * duplicate and is answered with the offsets it got the first time instead of being written
 * again. The state is rebuilt from the log's batch headers when the partition opens.
 *
 * Owned by the partition's shard; not thread-safe.
 */
#ifndef ST_KAFKA_PRODUCER_STATE_H
#define ST_KAFKA_PRODUCER_STATE_H

#include <stddef.h>
#include <stdint.h>

#define ST_PSTATE_BATCHES 5

typedef struct st_pbatch {
    int32_t first_seq, last_seq;
    int64_t first_offset, last_offset;
} st_pbatch_t;

typedef struct st_pentry {
    int64_t pid; /* -1: free slot */
    int16_t epoch;
    int nbatches;
    st_pbatch_t batches[ST_PSTATE_BATCHES]; /* oldest first */
} st_pentry_t;

typedef struct st_pstate {
    st_pentry_t *slots; /* open addressing on pid */
    size_t cap, count;
} st_pstate_t;

void st_pstate_init(st_pstate_t *ps);
void st_pstate_fini(st_pstate_t *ps);

enum { ST_PSTATE_APPEND = 0, ST_PSTATE_DUPLICATE = 1 };

/*
 * Checks a batch of producer `pid` (epoch, sequences first..last) before it is appended.
 * Returns ST_PSTATE_APPEND, ST_PSTATE_DUPLICATE (with the offsets of the cached batch in
 * *dup), or a negative Kafka error code: -INVALID_PRODUCER_EPOCH for a fenced epoch,
 * -OUT_OF_ORDER_SEQUENCE_NUMBER for a gap or a new epoch not starting at 0.
 */
int st_pstate_check(const st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                    int32_t last_seq, st_pbatch_t *dup);
/* Records an appended batch (or one found in the log at open). 0 or -ENOMEM. */
int st_pstate_record(st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                     int32_t last_seq, int64_t first_offset, int64_t last_offset);
size_t st_pstate_count(const st_pstate_t *ps);
/*
 * The log end moved down to `end` (a failed sync cut it back, or a truncation): forgets every
 * cached batch at offsets >= end, which later appends will reuse. A producer left with no
 * batch keeps its entry and epoch: the epoch was handed out by InitProducerId and still fences
 * older ones, and its next batch may carry any sequence (its retry of what was cut, usually).
 */
void st_pstate_truncate(st_pstate_t *ps, int64_t end);

/* Sequence arithmetic as Kafka does it: after INT32_MAX comes 0. */
static inline int32_t st_pstate_seq_add(int32_t seq, int32_t n)
{
    int64_t v = (int64_t)seq + n;
    return (int32_t)(v > INT32_MAX ? v - (int64_t)INT32_MAX - 1 : v);
}

#endif
