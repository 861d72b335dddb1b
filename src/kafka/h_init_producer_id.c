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
#include <string.h>

#include "kafka/authz.h"
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
    st_kp_init_producer_id_resp_t resp;
    st_kp_init_producer_id_resp_init(&resp);
    /* With ACLs on: WRITE on the transactional id; an idempotent producer IDEMPOTENT_WRITE on
     * the cluster or WRITE on some topic (KIP-679) */
    st_kstr_t tid = req.transactional_id;
    if (!st_kstr_is_null(tid)
            ? !st_kauthz(r, ST_ACL_OP_WRITE, ST_ACL_RES_TRANSACTIONAL_ID, tid.ptr, (size_t)tid.len)
            : !st_kauthz_quiet(r, ST_ACL_OP_IDEMPOTENT_WRITE, ST_ACL_RES_CLUSTER,
                               ST_ACL_CLUSTER_NAME, strlen(ST_ACL_CLUSTER_NAME)) &&
                  !st_kauthz_any(r, ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC)) {
        resp.error_code = r->error_code = st_kstr_is_null(tid)
                                              ? ST_KERR_CLUSTER_AUTHORIZATION_FAILED
                                              : ST_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        ST_KREQ_RESPOND(r, init_producer_id, &resp);
        return;
    }
    if (!st_kstr_is_null(req.transactional_id)) {
        st_kh_init_producer_id_txn(r, &req);
        return;
    }
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
