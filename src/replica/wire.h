/*
 * wire.h — the follower fetcher's requests and answers, as pure functions (no sockets, no
 * state): encoding a replica's Fetch request, decoding its response, cutting a record set to
 * whole batches. Where a diverged log must be cut is follow.h's: the leader says it in the
 * Fetch answer's diverging_epoch (KIP-320), so no OffsetForLeaderEpoch round is needed.
 *
 * Version: Fetch v12 (flexible, topics by name, replica_id in the body, last_fetched_epoch,
 * diverging_epoch), within what every Strata broker speaks (proto/kafka.schema), so no
 * ApiVersions round trip is needed between brokers.
 *
 * Also the SASL requests that open an inter-broker connection to a SASL_* listener (conn.c).
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

/* One partition of a request. Partitions of one topic must be consecutive. */
typedef struct st_rwire_part {
    const char *topic;
    int32_t partition;
    int32_t current_leader_epoch;
    int64_t fetch_offset;       /* Fetch: where to read from (the local durable end) */
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

/* Decodes a response frame (without its size prefix): the header's correlation id into *corr
 * and the body (arrays from a, strings and records pointing into frame). 0 or a negative code
 * (ST_E_TRUNCATED, ST_E_MALFORMED, -ENOMEM). */
int st_rwire_fetch_resp(const uint8_t *frame, size_t len, st_arena_t *a, int32_t *corr,
                        st_kp_fetch_resp_t *out);

/* SASL before any other request on an inter-broker connection (conn.c): SaslHandshake v1
 * (the mechanism) then SaslAuthenticate v2 (flexible) rounds carrying the mechanism's
 * messages, as Kafka's own inter-broker client does. */
#define ST_RWIRE_SASL_HANDSHAKE_VERSION    1
#define ST_RWIRE_SASL_AUTHENTICATE_VERSION 2

/* Appends a whole SaslHandshake request frame to out. 0 or -ENOMEM. */
int st_rwire_sasl_handshake_req(st_buf_t *out, int32_t correlation_id, const char *client_id,
                                const char *mechanism);
/* Decodes its answer (frame without the size prefix). 0 or a negative code. */
int st_rwire_sasl_handshake_resp(const uint8_t *frame, size_t len, st_arena_t *a, int32_t *corr,
                                 st_kp_sasl_handshake_resp_t *out);
/* Appends a whole SaslAuthenticate request frame carrying bytes[0..n) to out. */
int st_rwire_sasl_authenticate_req(st_buf_t *out, int32_t correlation_id, const char *client_id,
                                   const uint8_t *bytes, size_t n);
/* Decodes its answer (auth_bytes and error_message point into frame). */
int st_rwire_sasl_authenticate_resp(const uint8_t *frame, size_t len, st_arena_t *a, int32_t *corr,
                                    st_kp_sasl_authenticate_resp_t *out);

/* The length of the longest prefix of records[0..len) made of whole RecordBatch frames (a
 * leader may end an answer with part of a batch). A batch whose baseOffset or lastOffsetDelta
 * is negative, or whose last offset is INT64_MAX or beyond, ends the prefix too. When it is
 * > 0, *last_epoch gets the partitionLeaderEpoch and *next_offset the offset after the last
 * whole batch. */
size_t st_rwire_whole_batches(const uint8_t *records, size_t len, int32_t *last_epoch,
                              int64_t *next_offset);

#endif
