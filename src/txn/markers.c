/* markers.c — a WriteTxnMarkers request per partition, and the answer's verdict (markers.h). */
#include "txn/markers.h"

#include "base/arena.h"
#include "proto/kafka_gen.h"
#include "proto/kerr.h"
#include "proto/kheader.h"
#include "proto/kreader.h"
#include "proto/kwriter.h"

void st_tmarker_encode(st_buf_t *b, const st_tmarkers_t *m, int i)
{
    int32_t part = m->parts[i].partition;
    st_kp_write_txn_markers_req_topic_t topic;
    st_kp_write_txn_markers_req_topic_init(&topic);
    topic.name = m->parts[i].topic;
    topic.partition_indexes = &part;
    topic.partition_indexes_count = 1;
    st_kp_write_txn_markers_req_marker_t mk;
    st_kp_write_txn_markers_req_marker_init(&mk);
    mk.producer_id = m->producer_id;
    mk.producer_epoch = m->producer_epoch;
    mk.transaction_result = m->commit;
    mk.topics = &topic;
    mk.topics_count = 1;
    mk.coordinator_epoch = m->coordinator_epoch;
    st_kp_write_txn_markers_req_t req;
    st_kp_write_txn_markers_req_init(&req);
    req.markers = &mk;
    req.markers_count = 1;
    st_kwriter_t w;
    st_kwriter_init(&w, b);
    if (st_kp_write_txn_markers_req_encode(&w, ST_TMARKER_VERSION, &req))
        b->oom = true;
}

/* Kafka's handling of a partition's marker error. */
static int verdict_of(int16_t error)
{
    switch (error) {
    case 0:
    case ST_KERR_UNKNOWN_TOPIC_OR_PARTITION: /* the partition is gone */
    case ST_KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT:
    case ST_KERR_UNSUPPORTED_VERSION:
        return ST_TMARKER_DONE;
    case ST_KERR_INVALID_PRODUCER_EPOCH:
    case ST_KERR_TRANSACTION_COORDINATOR_FENCED:
        return ST_TMARKER_FENCED;
    default: /* NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ... */
        return ST_TMARKER_RETRY;
    }
}

int st_tmarker_verdict(const uint8_t *frame, size_t len, int64_t producer_id, st_kstr_t topic,
                       int32_t partition, int16_t *error)
{
    *error = ST_KERR_UNKNOWN_SERVER_ERROR;
    st_arena_t a;
    st_arena_init(&a, 1024);
    st_kreader_t r;
    st_kreader_init(&r, frame, len, &a);
    st_kp_resp_header_t h;
    st_kp_write_txn_markers_resp_t resp;
    int verdict = ST_TMARKER_RETRY;
    int hv = st_kp_resp_header_version(ST_KP_API_WRITE_TXN_MARKERS, ST_TMARKER_VERSION);
    if (st_kp_resp_header_decode(&r, hv, &h) == 0 &&
        st_kp_write_txn_markers_resp_decode(&r, ST_TMARKER_VERSION, &resp) == 0) {
        for (int32_t i = 0; i < resp.markers_count; i++) {
            const st_kp_write_txn_markers_resp_marker_result_t *mr = &resp.markers[i];
            if (mr->producer_id != producer_id)
                continue;
            for (int32_t k = 0; k < mr->topics_count; k++) {
                const st_kp_write_txn_markers_resp_topic_result_t *t = &mr->topics[k];
                if (t->name.len != topic.len || memcmp(t->name.ptr, topic.ptr, (size_t)topic.len))
                    continue;
                for (int32_t p = 0; p < t->partitions_count; p++)
                    if (t->partitions[p].partition_index == partition) {
                        *error = t->partitions[p].error_code;
                        verdict = verdict_of(*error);
                    }
            }
        }
    }
    st_arena_fini(&a);
    return verdict;
}
