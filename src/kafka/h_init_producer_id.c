/*
 * h_init_producer_id.c — InitProducerId (key 22): producer ids for idempotent producers.
 *
 * An id is unique across the broker's runs and across the brokers of a cluster, by
 * construction: node.id in the top bits, then the millisecond of the run's first id, then a
 * counter (layout and limits in pid.h). Ids a single broker of an earlier release handed out
 * (its start's millisecond times 2^20) are all above 2^60, so no new id repeats one. A producer
 * that sends its id and epoch back (v3+, after an error) gets the same id with the next epoch,
 * which fences the old epoch's in-flight batches (producer_state.h). A transactional id goes
 * to its transaction coordinator (h_txn.c), which hands out ids from the same counter.
 */
#include "kafka/handlers.h"
#include "kafka/pid.h"
#include "proto/kerr.h"

void st_kh_init_producer_id(st_kreq_t *r)
{
    st_kp_init_producer_id_req_t req;
    if (st_kp_init_producer_id_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed InitProducerId request");
        return;
    }
    if (!st_kstr_is_null(req.transactional_id)) {
        st_kh_init_producer_id_txn(r, &req);
        return;
    }
    st_kp_init_producer_id_resp_t resp;
    st_kp_init_producer_id_resp_init(&resp);
    st_broker_t *b = r->shard->b;
    if (req.producer_id >= 0 && req.producer_epoch >= 0 && req.producer_epoch < INT16_MAX) {
        resp.producer_id = req.producer_id;
        resp.producer_epoch = (int16_t)(req.producer_epoch + 1);
    } else {
        resp.producer_id = st_kpid_take((int32_t)b->cfg->node_id);
        resp.producer_epoch = 0;
    }
    r->error_code = resp.error_code;
    ST_KREQ_RESPOND(r, init_producer_id, &resp);
}
