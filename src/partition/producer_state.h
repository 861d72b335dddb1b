/*
 * producer_state.h — idempotent producers: per partition, what each producer id last wrote.
 *
 * For every producer id that appended to a partition: its epoch, its last five batches (first
 * and last sequence, first and last offset), as Kafka keeps them, and when it last appended.
 * A new batch must carry the next sequence of its epoch; a retry of one of the five cached
 * batches is a duplicate and is answered with the offsets it got the first time instead of
 * being written again.
 *
 * Bounds. Producer ids are made up by clients, so the state is bounded two ways: an id that
 * has not appended for producer.id.expiration.ms is forgotten (st_pstate_expire, from the
 * shard's tick; Kafka's rule), and a partition remembers at most max_producers ids, the least
 * recently used one going first when a new one comes (counted in `evicted`). A forgotten
 * producer's next batch is taken like a new producer's: any sequence.
 *
 * The log may cut its end back (a failed sync, a truncation): st_pstate_truncate forgets the
 * batches at the offsets that went, which other appends will reuse, and the transactions that
 * began there (one whose marker went is ongoing again).
 *
 * Transactions: each producer's ongoing transaction (first offset) and the newest coordinator
 * epoch of its markers; the unstable ones (ongoing, or ended but not yet below the high
 * watermark) give the partition's last stable offset. Rules at st_pstate_check_batch.
 *
 * Persistence. At open the state is rebuilt from the newest valid snapshot file
 * (<offset>.snapshot in the partition directory: the state of every batch below offset) plus
 * the batch headers after it; without one, from every batch header. The file's bytes are in
 * docs/format.md; st_pstate_save writes one (blocking: at clean close, and from the tick once
 * enough batches were appended since the last), st_pstate_load reads the newest valid one.
 *
 *   entries: a hash on producer id (chains) + a list from least to most recently used
 *
 *       buckets[h(pid)] -> e -> e -> NULL            oldest <-> ... <-> newest
 *
 * Owned by the partition's shard; not thread-safe.
 */
#ifndef ST_PARTITION_PRODUCER_STATE_H
#define ST_PARTITION_PRODUCER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "storage/fs.h"

#define ST_PSTATE_BATCHES 5
/* Defaults of the broker settings (config.h): Kafka's producer.id.expiration.ms, and
 * Strata's producer.ids.max.per.partition. */
#define ST_PSTATE_EXPIRATION_MS 86400000
#define ST_PSTATE_MAX_PRODUCERS 10000
/* A snapshot from the tick once this many batches were appended since the last one. */
#define ST_PSTATE_SNAPSHOT_BATCHES 50000

typedef struct st_pbatch {
    int32_t first_seq, last_seq;
    int64_t first_offset, last_offset;
} st_pbatch_t;

typedef struct st_pentry {
    int64_t pid;
    int16_t epoch;
    int nbatches;
    st_pbatch_t batches[ST_PSTATE_BATCHES]; /* oldest first */
    int64_t last_ms;                        /* last append (ms); never below an older entry's */
    int64_t txn_first;                      /* ongoing transaction's first offset, -1: none */
    int64_t txn_start_ms;                   /* when it began (wall ms) */
    int32_t coordinator_epoch;              /* newest seen in its markers, -1: none */
    /* its next batch, refused before the append for a passing reason (st_pstate_note_refused):
     * sequence (-1: none), the Kafka error, when (monotonic ms) */
    int32_t refused_seq;
    int16_t refused_error;
    int64_t refused_ms;
    struct st_pentry *hnext;         /* hash chain */
    struct st_pentry *older, *newer; /* use order */
} st_pentry_t;

/* A transaction the LSO waits for: ongoing (last_offset -1), or ended by a marker at
 * last_offset that the high watermark has not passed yet (Kafka's unreplicated txns). */
typedef struct st_ptxn {
    int64_t pid, first_offset, last_offset;
    int64_t start_ms;
} st_ptxn_t;

typedef struct st_pstate {
    st_pentry_t **buckets;
    size_t nbuckets, count;
    st_pentry_t *oldest, *newest;
    size_t max_producers;  /* 0: no cap */
    int64_t expiration_ms; /* < 0: never */
    uint64_t evicted;      /* ids dropped for the cap, ever */
    uint64_t expired;      /* ids dropped for idleness, ever */
    st_ptxn_t *txns;       /* unstable transactions (see st_ptxn_t), in no order */
    size_t ntxns, captxns;
    /* snapshot bookkeeping (st_pstate_save/load/maybe_save) */
    const st_fs_t *fs;       /* NULL: no snapshot files */
    char *dir;               /* the partition directory */
    int64_t snap_offset;     /* newest snapshot file's offset, -1: none */
    int64_t snap_ms;         /* when it was written (wall ms) */
    uint64_t batches_since;  /* batches recorded since */
    uint64_t evicted_logged; /* `evicted` when last logged */
    int64_t evicted_log_ms;
} st_pstate_t;

void st_pstate_init(st_pstate_t *ps);
void st_pstate_fini(st_pstate_t *ps);
/* Sets the bounds (max_producers 0: no cap; expiration_ms < 0: never). Applies from the next
 * record/expire. */
void st_pstate_set_limits(st_pstate_t *ps, size_t max_producers, int64_t expiration_ms);
/* Snapshot files live in dir, written through fs. 0 or -ENOMEM. */
int st_pstate_attach(st_pstate_t *ps, const st_fs_t *fs, const char *dir);

enum { ST_PSTATE_APPEND = 0, ST_PSTATE_DUPLICATE = 1 };

/*
 * Checks a batch of producer `pid` (epoch, sequences first..last) before it is appended.
 * Returns ST_PSTATE_APPEND, ST_PSTATE_DUPLICATE (with the offsets of the cached batch in
 * *dup), or a negative Kafka error code: -INVALID_PRODUCER_EPOCH for a fenced epoch,
 * -OUT_OF_ORDER_SEQUENCE_NUMBER for a gap or a new epoch not starting at 0.
 */
int st_pstate_check(const st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                    int32_t last_seq, st_pbatch_t *dup);
/*
 * A gap left by a refusal. A producer pipelines its requests: when the one holding its next
 * sequence is refused before the append for a reason that passes (fewer in-sync replicas than
 * min.insync.replicas, a storage error) and the reason is gone by the time the next request is
 * checked, that one is out of order, and librdkafka, which after a timed-out request counts
 * its batch as possibly written, takes OUT_OF_ORDER_SEQUENCE_NUMBER for the batch it expects
 * next as a fatal desynchronization (seen at a failover: the old leader's requests timed out,
 * their retries refused while the new leader's ISR was below min.insync.replicas, the batch
 * behind them checked just after the ISR grew). So the refusal of the producer's next batch is
 * noted, and a batch out of order only because of it gets, for ST_PSTATE_REFUSED_MS, the
 * refusal's error instead, retriable: the producer retries them in order. An append clears it.
 */
#define ST_PSTATE_REFUSED_MS 10000
/* The last offset of pid's newest cached batch, -1 when none. */
int64_t st_pstate_last_offset(const st_pstate_t *ps, int64_t pid);
void st_pstate_note_refused(st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                            int16_t error, int64_t now_ms);
/* The error to answer instead of OUT_OF_ORDER_SEQUENCE_NUMBER for a batch at first_seq (0: none,
 * the gap is the producer's). */
int16_t st_pstate_refused_gap(const st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                              int64_t now_ms);
/* Records an appended batch (or one found in the log at open) at time ts_ms, making pid the
 * most recently used; a new pid over the cap evicts the least recently used. 0 or -ENOMEM. */
int st_pstate_record(st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                     int32_t last_seq, int64_t first_offset, int64_t last_offset, int64_t ts_ms);
/*
 * Transactions (Kafka's ProducerStateManager rules). A transactional batch of a producer with
 * no ongoing transaction starts one at its first offset; a non-transactional batch while one is
 * ongoing is -INVALID_TXN_STATE; a transactional batch with first_seq -1 (the group
 * coordinator's own TxnOffsetCommit records, Kafka's AppendOrigin.COORDINATOR) is checked for
 * its epoch only, never for sequence or duplicates, and caches no batch. A marker (control
 * batch) ends the ongoing transaction; its epoch below the producer's is
 * -INVALID_PRODUCER_EPOCH, its coordinator epoch below the newest seen in the producer's
 * markers -TRANSACTION_COORDINATOR_FENCED. An ended transaction keeps the LSO until the high
 * watermark passes its marker (st_pstate_hw_moved). Producers with an ongoing transaction are
 * neither expired nor evicted.
 */
int st_pstate_check_batch(const st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                          int32_t last_seq, bool transactional, st_pbatch_t *dup);
/* st_pstate_record for a batch that may be transactional (a batch found in the log or appended
 * by a follower included: no checks). */
int st_pstate_record_batch(st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                           int32_t last_seq, int64_t first_offset, int64_t last_offset,
                           int64_t ts_ms, bool transactional);
/* Checks a marker before it is written: 0 or a negative Kafka error code (above). */
int st_pstate_check_marker(const st_pstate_t *ps, int64_t pid, int16_t epoch,
                           int32_t coordinator_epoch);
/* Records a marker written at `offset`: the producer's epoch and coordinator epoch, its ongoing
 * transaction ended (*first: its first offset, -1 when none was ongoing). 0 or -ENOMEM. */
int st_pstate_end_txn(st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t coordinator_epoch,
                      int64_t offset, int64_t ts_ms, int64_t *first);
/* The smallest first offset of an ongoing transaction other than pid's (pid -1: any), or -1. */
int64_t st_pstate_first_ongoing(const st_pstate_t *ps, int64_t pid);
/* The first unstable offset (ongoing, or ended above the high watermark), or -1. */
int64_t st_pstate_first_unstable(const st_pstate_t *ps);
/* The high watermark reached hw: ended transactions whose marker is below it are stable. */
void st_pstate_hw_moved(st_pstate_t *ps, int64_t hw);
/* Ongoing transactions, and the oldest one's start (wall ms; -1 when none). */
size_t st_pstate_ongoing(const st_pstate_t *ps, int64_t *oldest_start_ms);
size_t st_pstate_count(const st_pstate_t *ps);
/* The entry of pid, or NULL. */
const st_pentry_t *st_pstate_find(const st_pstate_t *ps, int64_t pid);
/* Whether pid's newest cached batch ends at last_offset: the log cleaner keeps that batch even
 * when compaction empties it, so the producer's state survives a rebuild from the log. False
 * for a producer this state does not know (expired, evicted) or whose batches were cut. */
bool st_pstate_is_last(const st_pstate_t *ps, int64_t pid, int64_t last_offset);
/*
 * The log end moved down to `end` (a failed sync cut it back, or a truncation): forgets every
 * cached batch at offsets >= end, which later appends will reuse, and deletes snapshot files
 * past end. A producer left with no batch keeps its entry and epoch: the epoch was handed out
 * by InitProducerId and still fences older ones, and its next batch may carry any sequence
 * (its retry of what was cut, usually).
 */
void st_pstate_truncate(st_pstate_t *ps, int64_t end);
/* Forgets producers idle for expiration_ms at now_ms; returns how many. */
size_t st_pstate_expire(st_pstate_t *ps, int64_t now_ms);

/* ---- snapshots --------------------------------------------------------------------------- */

/* Appends the snapshot bytes of the state below `offset` (batches at or past it are left out:
 * the log replays them) to out. 0 or -ENOMEM. */
int st_pstate_encode(const st_pstate_t *ps, int64_t offset, int64_t now_ms, st_buf_t *out);
/* Loads snapshot bytes into an empty state: 0 and *offset, or ST_E_CORRUPT (state emptied). */
int st_pstate_decode(st_pstate_t *ps, const uint8_t *p, size_t n, int64_t *offset);
/* Writes <offset>.snapshot atomically and durably (blocks), then deletes older snapshots but
 * the one before it. offset must be durable in the log. */
int st_pstate_save(st_pstate_t *ps, int64_t offset, int64_t now_ms);
/* From the tick: saves at durable_offset once ST_PSTATE_SNAPSHOT_BATCHES batches were
 * recorded since the last snapshot and a minute has passed. Returns 1 if it saved. */
int st_pstate_maybe_save(st_pstate_t *ps, int64_t durable_offset, int64_t now_ms);
/*
 * Into an empty state: the newest snapshot file with an offset <= max_offset that checks out;
 * files past max_offset are deleted, a corrupt one is logged and skipped. 0 and *offset, or
 * ST_E_NOT_FOUND (*offset -1) when none is usable: rebuild from the whole log.
 */
int st_pstate_load(st_pstate_t *ps, int64_t max_offset, int64_t *offset);

/* Sequence arithmetic as Kafka does it: after INT32_MAX comes 0. */
static inline int32_t st_pstate_seq_add(int32_t seq, int32_t n)
{
    int64_t v = (int64_t)seq + n;
    return (int32_t)(v > INT32_MAX ? v - (int64_t)INT32_MAX - 1 : v);
}

#endif
