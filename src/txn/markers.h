/*
 * markers.h — the coordinator's WriteTxnMarkers (api 27, v1), one request per partition of a
 * transaction: its body, and what the partition leader's answer means for the sender (Kafka's
 * TransactionMarkerRequestCompletionHandler, with UNKNOWN_TOPIC_OR_PARTITION taken as the
 * partition being gone).
 *
 *   request v1 (flexible): markers compact array of 1:
 *       producer_id int64 | producer_epoch int16 | transaction_result bool (1 commit) |
 *       topics compact array of 1: name compact string | partition_indexes compact [int32] |
 *       tags | coordinator_epoch int32 | tags
 *     | tags
 *
 * Pure functions; any thread (the inter-broker client's, in the server).
 */
#ifndef ST_TXN_MARKERS_H
#define ST_TXN_MARKERS_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "txn/coord.h"

#define ST_TMARKER_VERSION 1

enum {
    ST_TMARKER_DONE = 0,   /* written (or the partition is gone): this partition is finished */
    ST_TMARKER_RETRY = 1,  /* not now (leadership moving, ISR short, ...): send it again */
    ST_TMARKER_FENCED = 2, /* this coordinator is stale (or the producer moved on): stop */
};

/* The request body of m's marker for partition m->parts[i] into b (check b->oom). */
void st_tmarker_encode(st_buf_t *b, const st_tmarkers_t *m, int i);

/* What the partition leader's answer says: the error of that partition in the response (frame
 * as the client hands it: correlation id first), in *error; the verdict. A frame that does not
 * parse, or does not name the partition, is RETRY. */
int st_tmarker_verdict(const uint8_t *frame, size_t len, int64_t producer_id, st_kstr_t topic,
                       int32_t partition, int16_t *error);

#endif
