/*
 * wire.h — the follower fetcher's requests and answers, as pure functions (no sockets, no
 * state): encoding a replica's Fetch and OffsetForLeaderEpoch requests, decoding their
 * responses, cutting a record set to whole batches, and deciding where a log that returns to
 * a leader must be truncated.
 *
 * Versions: Fetch v12 (flexible, topics by name, replica_id in the body) and
 * OffsetForLeaderEpoch v4 (flexible, replica_id). Both are within what every Strata broker
 * speaks (proto/kafka.schema), so no ApiVersions round trip is needed between brokers.
 *
 * Any thread (the fetcher's, and the unit tests).
 */
#ifndef ST_REPLICA_WIRE_H
#define ST_REPLICA_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "proto/kafka_gen.h"

#define ST_RWIRE_FETCH_VERSION 12
#define ST_RWIRE_EPOCH_VERSION 4

/* One partition of a request. Partitions of one topic must be consecutive. */
typedef struct st_rwire_part {
    const char *topic;
    int32_t partition;
    int32_t current_leader_epoch;
    int64_t fetch_offset; /* Fetch: where to read from (the local durable end) */
    int32_t leader_epoch; /* OffsetForLeaderEpoch: the epoch whose end is asked */
    int32_t last_fetched_epoch; /* Fetch: the latest epoch in the local log (-1: none) */
    int64_t log_start_offset;   /* Fetch: the local log start (-1: unknown) */
} st_rwire_part_t;

/* Fetch's settings that are not per partition. */
typedef struct st_rwire_fetch {
    int32_t replica_id;
    int32_t max_wait_ms, min_bytes, max_bytes, partition_max_bytes;
} st_rwire_fetch_t;

/* Appends one whole request frame (int32 size, request header v2, body) to out. Return 0,
 * -ENOMEM, or ST_E_INVALID for parts it cannot encode. */
int st_rwire_fetch_req(st_buf_t *out, int32_t correlation_id, const char *client_id,
                       const st_rwire_fetch_t *fr, const st_rwire_part_t *parts, int n);
int st_rwire_epoch_req(st_buf_t *out, int32_t correlation_id, const char *client_id,
                       int32_t replica_id, const st_rwire_part_t *parts, int n);

/* Decodes a response frame (without its size prefix): the header's correlation id into *corr
 * and the body (arrays from a, strings and records pointing into frame). 0 or a negative code
 * (ST_E_TRUNCATED, ST_E_MALFORMED, -ENOMEM). */
int st_rwire_fetch_resp(const uint8_t *frame, size_t len, st_arena_t *a, int32_t *corr,
                        st_kp_fetch_resp_t *out);
int st_rwire_epoch_resp(const uint8_t *frame, size_t len, st_arena_t *a, int32_t *corr,
                        st_kp_offset_for_leader_epoch_resp_t *out);

/* The length of the longest prefix of records[0..len) made of whole RecordBatch frames (a
 * leader may end an answer with part of a batch). When it is > 0, *last_epoch gets the
 * partitionLeaderEpoch and *next_offset the offset after the last whole batch. */
size_t st_rwire_whole_batches(const uint8_t *records, size_t len, int32_t *last_epoch,
                              int64_t *next_offset);

/* Where a log must be cut after OffsetForLeaderEpoch answered. */
typedef struct st_rwire_cut {
    bool truncate;     /* false: the log is a prefix of the leader's; fetch from its end */
    int64_t offset;    /* cut back to here */
    int32_t end_epoch; /* >= 0: and further to where the local log's end_epoch ends */
} st_rwire_cut_t;

/* The log ends at fetch_offset with last_epoch as its latest epoch; the leader answered that
 * its largest epoch <= last_epoch is answer_epoch and ends at end_offset (-1, -1: it has none).
 * As Kafka's follower: the same epoch -> cut to end_offset if the log is longer; an older one ->
 * the log holds epochs the leader never had, cut to min(end_offset, fetch_offset) and to where
 * the local answer_epoch ends; nothing known -> cut everything (the leader holds every
 * committed record; fetching restarts at its log start). */
st_rwire_cut_t st_rwire_cut(int64_t fetch_offset, int32_t last_epoch, int32_t answer_epoch,
                            int64_t end_offset);

#endif
