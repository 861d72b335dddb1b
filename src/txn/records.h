/*
 * records.h — the records of __transaction_state, in Kafka's own key and value schemas
 * (TransactionLogKey, TransactionLogValue), so Kafka's tools read the topic as Kafka's own.
 *
 * Every record has a key and, unless it is a tombstone (the id expired), a value. Integers
 * big-endian.
 *
 *   key    version int16 = 0 | transactional_id string (int16 length + bytes)
 *   value  version int16 = 0 (what this coordinator writes: transaction.version 0) or 1
 *     v0:  producer_id int64 | producer_epoch int16 | transaction_timeout_ms int32 |
 *          transaction_status int8 (state id, below) |
 *          transaction_partitions int32 count (-1: null, which Empty writes), each:
 *              topic string | partition_ids int32 count, each int32 |
 *          last_update_timestamp_ms int64 | start_timestamp_ms int64
 *     v1:  the same fields, flexible: compact strings and arrays (uvarint length + 1, 0 for
 *          null), a tagged-field section after each partitions entry and at the end, whose
 *          tags are 0 previous_producer_id int64, 1 next_producer_id int64,
 *          2 client_transaction_version int16 (unknown tags skipped)
 *   tombstone  the key with a null value.
 *
 * State ids (Kafka's TransactionState.id): 0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort,
 * 4 CompleteCommit, 5 CompleteAbort, 6 Dead, 7 PrepareEpochFence.
 *
 * Pure functions over caller memory; any thread.
 */
#ifndef ST_TXN_RECORDS_H
#define ST_TXN_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "proto/ktypes.h"

enum {
    ST_TXN_EMPTY = 0,
    ST_TXN_ONGOING = 1,
    ST_TXN_PREPARE_COMMIT = 2,
    ST_TXN_PREPARE_ABORT = 3,
    ST_TXN_COMPLETE_COMMIT = 4,
    ST_TXN_COMPLETE_ABORT = 5,
    ST_TXN_DEAD = 6,
    ST_TXN_PREPARE_EPOCH_FENCE = 7,
    ST_TXN_NSTATES = 8
};

/* Kafka's name of a state ("Empty", "Ongoing", ...: what DescribeTransactions answers), or
 * NULL for an unknown id. */
const char *st_txn_state_name(int state);
/* The state named `name`, or -1. */
int st_txn_state_by_name(st_kstr_t name);

/* One topic of a value's partitions. Strings alias the record; arrays come from the arena. */
typedef struct st_trec_topic {
    st_kstr_t topic;
    int32_t npartitions;
    int32_t *partitions;
} st_trec_topic_t;

typedef struct st_trec {
    st_kstr_t transactional_id;
    bool tombstone;
    int16_t version; /* of the value: 0 or 1 */
    int64_t producer_id;
    int64_t previous_producer_id; /* v1 tag 0; -1 */
    int64_t next_producer_id;     /* v1 tag 1; -1 */
    int16_t producer_epoch;
    int32_t transaction_timeout_ms;
    int8_t transaction_status;
    int32_t ntopics; /* -1: null */
    st_trec_topic_t *topics;
    int64_t last_update_timestamp_ms;
    int64_t start_timestamp_ms;
    int16_t client_transaction_version; /* v1 tag 2; 0 */
} st_trec_t;

/* Decodes a record's key and value (value_len -1: tombstone). 0, ST_E_UNSUPPORTED for an
 * unknown key or value version (the caller skips the record), ST_E_CORRUPT. */
int st_trec_decode(const uint8_t *key, int32_t key_len, const uint8_t *value, int32_t value_len,
                   st_arena_t *arena, st_trec_t *out);

/* Encoders: each appends one key or value to b (check b->oom once at the end). The value is
 * written at rec->version (0 or 1). */
void st_trec_key(st_buf_t *b, st_kstr_t transactional_id);
void st_trec_value(st_buf_t *b, const st_trec_t *rec);

#endif
