/*
 * coord_impl.h — the transaction coordinator's state, shared by coord.c (life cycle, table,
 * writes, loading, Describe/List) and ops.c (the requests, markers, timeouts). Internal:
 * nothing outside txn/ includes it. Same thread rules as coord.h.
 *
 * Memory: ids are heap objects owned by the coordinator, freed only when no write refers to
 * them (t->writes == 0, invariant 4). Answers are built in the caller's arena.
 */
#ifndef ST_TXN_COORD_IMPL_H
#define ST_TXN_COORD_IMPL_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "proto/kerr.h"
#include "txn/coord.h"
#include "txn/records.h"

#define TXN_NO_PID   (-1)
#define TXN_NO_EPOCH (-1)
#define TXN_BUCKETS  1024

/* One partition of a transaction, owned. */
typedef struct txn_tp {
    char *topic; /* NUL-terminated (topic names hold no NUL) */
    int32_t topic_len;
    int32_t partition;
} txn_tp_t;

/* The metadata of an id as one record describes it (Kafka's TxnTransitMetadata). */
typedef struct txn_meta {
    int64_t pid, prev_pid, next_pid;
    int16_t epoch, last_epoch;
    int32_t timeout_ms;
    int state;
    int64_t start_ts, update_ts;
    int16_t client_tv;
    int nparts;
    txn_tp_t *parts;
} txn_meta_t;

typedef struct txn txn_t;
struct txn {
    txn_t *next; /* bucket chain */
    char *id;
    int32_t id_len;
    int32_t partition;
    txn_meta_t m;
    int pending;         /* the state a write in flight moves it to; -1 none (invariant 2) */
    bool failed_fence;   /* an epoch fence's write failed: the next fence does not bump again */
    int writes;          /* writes in flight referring to it */
    bool unloaded;       /* out of the table (unload, expiry): freed at writes == 0 */
    uint64_t markers;    /* the marker job in flight, 0 none */
    bool complete_retry; /* the Complete* write failed: the tick tries again */
    bool markers_retry;  /* the markers could not be sent: the tick tries again */
};

struct st_tcoord {
    st_loop_t *loop;
    st_tcoord_config_t cfg;
    st_log_t **logs; /* per partition: loaded (served) when non-NULL */
    int32_t *epochs; /* the coordinator epoch each was loaded at */
    txn_t *buckets[TXN_BUCKETS];
    int count;
    bool closed;
    bool retries; /* some id has markers or a completion to try again (the next tick scans) */
    uint64_t next_job;
    int64_t last_abort_check, last_expire_check;
    uint64_t committed, aborted, timed_out, markers_retried; /* st_tcoord_stats */
    struct txn_park *parked; /* AddPartitionsToTxn waiting for a completion (ops.c) */
};

/* A write's completion: res is 0 or the append's error; the transition is already applied
 * when res is 0 (coord.c, invariant 1). */
typedef void (*txn_write_fn)(st_tcoord_t *c, txn_t *t, int16_t error, void *arg);

static inline int64_t txn_now(const st_tcoord_t *c)
{
    return c->cfg.now_ms ? c->cfg.now_ms(c->cfg.ctx) : st_wall_ms();
}

static inline bool txn_epoch_exhausted(int16_t e)
{
    return e >= INT16_MAX - 1;
}

/* ops.c: answers the parked requests of `partition` (-1: all) with error (NOT_COORDINATOR at an
 * unload or the drain); send false frees them unanswered (destroy: no caller is left). */
void txn_park_flush(st_tcoord_t *c, int32_t partition, int16_t error, bool send);

/* coord.c */
txn_t *txn_find(st_tcoord_t *c, st_kstr_t id);
txn_t *txn_create(st_tcoord_t *c, st_kstr_t id, int32_t partition);
/* Takes t out of the table (freed now, or when its last write ends). */
void txn_remove(st_tcoord_t *c, txn_t *t);
void txn_meta_free(txn_meta_t *m);
/* A copy of t's metadata (parts duplicated). 0 or -ENOMEM. */
int txn_meta_copy(txn_meta_t *dst, const txn_meta_t *src);
/* Adds tp to m's partitions unless there. 0 or -ENOMEM. */
int txn_meta_add(txn_meta_t *m, st_kstr_t topic, int32_t partition);
bool txn_meta_has(const txn_meta_t *m, st_kstr_t topic, int32_t partition);
/* Writes the transition of t to `to` (taken: freed by the write) and sets t->pending; cb
 * once it is durable (applied) or failed, possibly before this returns. tombstone: the
 * record is the id's tombstone (Dead). */
void txn_write(st_tcoord_t *c, txn_t *t, txn_meta_t *to, bool tombstone, txn_write_fn cb,
               void *arg);

/* ops.c */
/* Sends the markers of t's Prepare* state; CompleteCommit/CompleteAbort is written once they
 * are all durable. */
void txn_send_markers(st_tcoord_t *c, txn_t *t);

#endif
