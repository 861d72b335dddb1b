/*
 * h_init_producer_id.c — InitProducerId (key 22): producer ids for idempotent producers.
 *
 * An id is unique across the broker's life and its restarts: the wall-clock millisecond of
 * start-up times 2^20, plus a counter (a restart within the same millisecond, or a clock set
 * back by more than the run lasted, could repeat one). In a cluster ids are also unique across
 * brokers, by construction: node.id in the top bits (layout and limits in pid.h). A producer that
 * sends its id and epoch back (v3+, after an error) gets the same id with the next epoch, which
 * fences the old epoch's in-flight batches (producer_state.h). Transactions are not supported: a
 * transactional id is refused, so clients report it instead of hanging.
 */
#include "base/clock.h"
#include "kafka/handlers.h"
#include "kafka/pid.h"
#include "proto/kerr.h"

/* A cluster broker's next producer id (pid.h): the process's, for all its shards. */
static _Atomic int64_t cluster_next_pid;

void st_kh_init_producer_id(st_kreq_t *r)
{
    st_kp_init_producer_id_req_t req;
    if (st_kp_init_producer_id_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed InitProducerId request");
        return;
    }
    st_kp_init_producer_id_resp_t resp;
    st_kp_init_producer_id_resp_init(&resp);
    st_broker_t *b = r->shard->b;
    if (!st_kstr_is_null(req.transactional_id)) {
        resp.error_code = ST_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    } else if (req.producer_id >= 0 && req.producer_epoch >= 0 && req.producer_epoch < INT16_MAX) {
        resp.producer_id = req.producer_id;
        resp.producer_epoch = (int16_t)(req.producer_epoch + 1);
    } else {
        resp.producer_id = b->cfg->clustered ? st_kpid_next(&cluster_next_pid,
                                                            (int32_t)b->cfg->node_id, st_wall_ms())
                                             : (int64_t)atomic_fetch_add(&b->next_producer_id, 1);
        resp.producer_epoch = 0;
    }
    r->error_code = resp.error_code;
    ST_KREQ_RESPOND(r, init_producer_id, &resp);
}
