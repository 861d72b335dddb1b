/*
 * records.h — the records of __consumer_offsets, in Kafka's own key and value schemas (so
 * Kafka's tools can read the topic), and a writer of uncompressed RecordBatch v2.
 *
 * Every record has a key and, unless it is a tombstone, a value. All integers big-endian;
 * strings are int16 length + bytes (length -1: null); bytes are int32 length + bytes.
 *
 *   offset commit   key   version int16 = 1 | group string | topic string | partition int32
 *                   value version int16 = 3 | offset int64 | leader_epoch int32 |
 *                         metadata string | commit_timestamp int64
 *                   or, for an offset with its own expiry (OffsetCommit v2-v4's
 *                   retention_time_ms), as Kafka writes it:
 *                         version int16 = 1 | offset int64 | metadata string |
 *                         commit_timestamp int64 | expire_timestamp int64
 *                   (values of version 2 are read too: neither leader epoch nor expiry)
 *   group metadata  key   version int16 = 2 | group string
 *                   value version int16 = 3 | protocol_type string | generation int32 |
 *                         protocol nullable string | leader nullable string |
 *                         current_state_timestamp int64 | members int32 count, each:
 *                           member_id string | group_instance_id nullable string |
 *                           client_id string | client_host string |
 *                           rebalance_timeout int32 | session_timeout int32 |
 *                           subscription bytes | assignment bytes
 *                   (values v0..v2 are read too: v0 has no rebalance_timeout, v0-v1 no
 *                   current_state_timestamp, v0-v2 no group_instance_id)
 *   tombstone       the key with a null value: the offset, or the whole group, is gone.
 *
 * TxnOffsetCommit's offset commit records come in one transactional batch (attributes bit 4,
 * the producer's id and epoch, base sequence -1); a control batch (attributes bit 5) of the
 * same producer ends them, its one record keyed version int16 = 0 | type int16 (0 ABORT,
 * 1 COMMIT).
 *
 * Pure functions over caller memory; any thread.
 */
#ifndef ST_GROUP_RECORDS_H
#define ST_GROUP_RECORDS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "proto/ktypes.h"

enum { ST_GREC_OFFSET = 1, ST_GREC_GROUP = 2 };

/* A group metadata value's member. Strings and bytes alias the decoded value. */
typedef struct st_grec_member {
    st_kstr_t member_id;
    st_kstr_t group_instance_id; /* null: dynamic member */
    st_kstr_t client_id;
    st_kstr_t client_host;
    int32_t rebalance_timeout;
    int32_t session_timeout;
    st_kbytes_t subscription; /* the member's metadata for the selected protocol */
    st_kbytes_t assignment;
} st_grec_member_t;

/* One decoded record. Strings alias the record's bytes; arrays come from the arena. */
typedef struct st_grec {
    int kind; /* ST_GREC_* */
    bool tombstone;
    st_kstr_t group;
    /* offset commit */
    st_kstr_t topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    st_kstr_t metadata;
    int64_t commit_timestamp;
    int64_t expire_timestamp; /* -1 unless a version 1 value gave one */
    /* group metadata */
    st_kstr_t protocol_type;
    int32_t generation;
    st_kstr_t protocol; /* nullable */
    st_kstr_t leader;   /* nullable */
    int64_t current_state_timestamp;
    int32_t nmembers;
    st_grec_member_t *members;
} st_grec_t;

/* Decodes a record's key and value (value_len -1: tombstone). Returns 0, ST_E_UNSUPPORTED
 * for an unknown key or value version (the caller skips the record), ST_E_CORRUPT. */
int st_grec_decode(const uint8_t *key, int32_t key_len, const uint8_t *value, int32_t value_len,
                   st_arena_t *arena, st_grec_t *out);

/* Encoders: each appends one key or value to b (check b->oom once at the end). */
void st_grec_offset_key(st_buf_t *b, st_kstr_t group, st_kstr_t topic, int32_t partition);
/* expire_timestamp -1: a version 3 value; else version 1 (which has no leader epoch). */
void st_grec_offset_value(st_buf_t *b, int64_t offset, int32_t leader_epoch, st_kstr_t metadata,
                          int64_t commit_timestamp, int64_t expire_timestamp);
void st_grec_group_key(st_buf_t *b, st_kstr_t group);
/* The value from rec's group fields and members (rec->kind is ignored). */
void st_grec_group_value(st_buf_t *b, const st_grec_t *rec);

enum { ST_GREC_ABORT = 0, ST_GREC_COMMIT = 1 };
/* A control record's key: 0 and *type (ST_GREC_ABORT, ST_GREC_COMMIT, or another Kafka
 * control type), ST_E_CORRUPT when shorter than 4 bytes, ST_E_UNSUPPORTED for a version
 * other than 0. */
int st_grec_control_decode(const uint8_t *key, int32_t key_len, int16_t *type);

/*
 * Writer of uncompressed RecordBatch v2 (magic 2), timestamps of now, no producer id, ready
 * for st_log_append (which sets the base offset). Records are added one by one; a batch is
 * closed and a new one begun when the open one passes max_batch_bytes, so a long run of
 * records becomes several batches back to back in out. st_gbatch_set_txn, before the first
 * record, makes it one transactional batch of a producer however large.
 */
typedef struct st_gbatch {
    st_buf_t out;      /* finished batches, then the open one */
    size_t open_at;    /* start of the open batch in out; SIZE_MAX when none is open */
    int32_t count;     /* records in the open batch */
    int64_t timestamp; /* of every record */
    size_t max_batch_bytes;
    int32_t total;       /* records in all batches */
    int64_t producer_id; /* -1: not transactional */
    int16_t producer_epoch;
} st_gbatch_t;

void st_gbatch_init(st_gbatch_t *w, int64_t timestamp, size_t max_batch_bytes);
void st_gbatch_fini(st_gbatch_t *w);
/* Every record in one transactional batch of producer pid at epoch (base sequence -1). */
void st_gbatch_set_txn(st_gbatch_t *w, int64_t pid, int16_t epoch);
/* Adds a record (value NULL with value_len -1: a tombstone). 0 or -ENOMEM. */
int st_gbatch_add(st_gbatch_t *w, const uint8_t *key, size_t key_len, const uint8_t *value,
                  int32_t value_len);
/* Closes the open batch; w->out then holds whole batches (none if no record was added).
 * 0 or -ENOMEM. */
int st_gbatch_finish(st_gbatch_t *w);

#endif
