/*
 * txn_verify.c — a partition leader asks the transaction coordinator whether a transactional
 * produce's partitions are in the producer's transaction (KIP-890 part 1; Kafka's
 * AddPartitionsToTxnManager), before the first batch of the transaction is appended there.
 *
 *   request's shard: st_ktxn_verify --> AddPartitionsToTxn v4 {transactional id, producer id
 *       and epoch, verify_only, the partitions} to the id's coordinator (the leader of its
 *       __transaction_state partition in the shard's snapshot), with the broker's client
 *       --> client thread: the answer, or the end of the tries --> st_broker_post --> the
 *       request's shard: done(errors)
 *
 * The coordinator's verdicts become what Kafka answers a producer (ReplicaManager): a partition
 * not in the transaction is INVALID_TXN_STATE (the coordinator's TRANSACTION_ABORTABLE, which
 * producers before transactions v2 do not know), a fenced producer INVALID_PRODUCER_EPOCH (which
 * producers expect here), and whatever only says "ask again" (no coordinator now, another one,
 * the transaction still ending, the connection lost) NOT_ENOUGH_REPLICAS, retriable for every
 * client and without a metadata refresh.
 *
 * Threads: st_ktxn_verify and done on the request's shard; answered on the client thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "broker/runtime.h"
#include "kafka/txn_route.h"
#include "proto/kerr.h"
#include "proto/kheader.h"
#include "replica/client.h"

#define VERIFY_VERSION 4
#define VERIFY_TRIES   2

typedef struct vjob {
    st_ext_call_t call; /* back to the request's shard */
    st_client_req_t req;
    st_broker_t *b;
    int shard;
    int n;
    char **topics; /* copies: the answer is matched against them on the client thread */
    int32_t *partitions;
    int16_t *errors;
    st_buf_t body;
    st_ktxn_verify_fn done;
    void *arg;
} vjob_t;

static void vjob_free(vjob_t *j)
{
    for (int i = 0; i < j->n; i++)
        free(j->topics[i]);
    free(j->topics);
    free(j->partitions);
    free(j->errors);
    st_buf_fini(&j->body);
    free(j);
}

/* Kafka's translation of a coordinator's verdict into a Produce error. */
static int16_t produce_error(int16_t e)
{
    switch (e) {
    case 0:
        return 0;
    case ST_KERR_PRODUCER_FENCED:
        return ST_KERR_INVALID_PRODUCER_EPOCH;
    case ST_KERR_TRANSACTION_ABORTABLE: /* producers before transactions v2 know the older code */
        return ST_KERR_INVALID_TXN_STATE;
    case ST_KERR_CONCURRENT_TRANSACTIONS:
    case ST_KERR_NETWORK_EXCEPTION:
    case ST_KERR_COORDINATOR_LOAD_IN_PROGRESS:
    case ST_KERR_COORDINATOR_NOT_AVAILABLE:
    case ST_KERR_NOT_COORDINATOR:
        return ST_KERR_NOT_ENOUGH_REPLICAS;
    default:
        return e;
    }
}

static void fill_all(vjob_t *j, int16_t e)
{
    for (int i = 0; i < j->n; i++)
        j->errors[i] = produce_error(e);
}

/* On the request's shard. */
static void vjob_run(st_kshard_t *s, st_ext_call_t *c)
{
    vjob_t *j = (vjob_t *)c;
    j->done(s, j->arg, j->errors);
    vjob_free(j);
}

/* Client thread: reads the coordinator's answer into j->errors. */
static void read_answer(vjob_t *j, const uint8_t *frame, size_t len)
{
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_kreader_t r;
    st_kreader_init(&r, frame, len, &a);
    st_kp_resp_header_t h;
    st_kp_add_partitions_to_txn_resp_t resp;
    int hv = st_kp_resp_header_version(ST_KP_API_ADD_PARTITIONS_TO_TXN, VERIFY_VERSION);
    if (hv < 0 || st_kp_resp_header_decode(&r, hv, &h) ||
        st_kp_add_partitions_to_txn_resp_decode(&r, VERIFY_VERSION, &resp)) {
        ST_WARN("AddPartitionsToTxn (verify): a malformed answer");
        fill_all(j, ST_KERR_NETWORK_EXCEPTION);
    } else if (resp.error_code) {
        fill_all(j, resp.error_code == ST_KERR_CLUSTER_AUTHORIZATION_FAILED
                        ? ST_KERR_INVALID_TXN_STATE
                        : resp.error_code);
    } else {
        /* a partition the answer leaves out is not known to be in the transaction */
        fill_all(j, ST_KERR_INVALID_TXN_STATE);
        for (int t = 0; t < resp.results_by_transaction_count; t++) {
            const st_kp_add_partitions_to_txn_resp_result_t *res = &resp.results_by_transaction[t];
            for (int k = 0; k < res->topic_results_count; k++) {
                const st_kp_add_partitions_to_txn_resp_txn_topic_result_t *tr =
                    &res->topic_results[k];
                for (int q = 0; q < tr->results_by_partition_count; q++)
                    for (int i = 0; i < j->n; i++)
                        if (j->partitions[i] == tr->results_by_partition[q].partition_index &&
                            st_kstr_eq(tr->name, j->topics[i]))
                            j->errors[i] =
                                produce_error(tr->results_by_partition[q].partition_error_code);
            }
        }
    }
    st_arena_fini(&a);
}

static int req_done(st_client_req_t *req, int err, const uint8_t *frame, size_t len)
{
    vjob_t *j = req->arg;
    if (err)
        fill_all(j, ST_KERR_NETWORK_EXCEPTION);
    else
        read_answer(j, frame, len);
    st_broker_post(j->b, j->shard, &j->call);
    return ST_CLIENT_DONE;
}

/* The request body: one transaction, its partitions grouped by topic. */
static int encode(vjob_t *j, st_kstr_t id, int64_t pid, int16_t epoch)
{
    st_kp_add_partitions_to_txn_req_txn_topic_t *tt = calloc((size_t)j->n, sizeof *tt);
    if (!tt)
        return -ENOMEM;
    int nt = 0;
    for (int i = 0; i < j->n; i++) {
        if (i == 0 || strcmp(j->topics[i], j->topics[i - 1])) {
            tt[nt].name = st_kstr(j->topics[i]);
            tt[nt].partitions = &j->partitions[i];
            nt++;
        }
        tt[nt - 1].partitions_count++;
    }
    st_kp_add_partitions_to_txn_req_transaction_t x = {.transactional_id = id,
                                                       .producer_id = pid,
                                                       .producer_epoch = epoch,
                                                       .verify_only = true,
                                                       .topics = tt,
                                                       .topics_count = nt};
    st_kp_add_partitions_to_txn_req_t req;
    st_kp_add_partitions_to_txn_req_init(&req);
    req.transactions = &x;
    req.transactions_count = 1;
    st_kwriter_t w;
    st_kwriter_init(&w, &j->body);
    int rc = st_kp_add_partitions_to_txn_req_encode(&w, VERIFY_VERSION, &req);
    free(tt);
    return rc;
}

void st_ktxn_verify(st_kshard_t *s, st_kstr_t id, int64_t pid, int16_t epoch, int n,
                    const st_kstr_t *topics, const int32_t *partitions, st_ktxn_verify_fn done,
                    void *arg)
{
    vjob_t *j = calloc(1, sizeof *j);
    if (j) {
        j->topics = calloc((size_t)n, sizeof *j->topics);
        j->partitions = calloc((size_t)n, sizeof *j->partitions);
        j->errors = calloc((size_t)n, sizeof *j->errors);
        st_buf_init(&j->body);
    }
    bool ok = j && j->topics && j->partitions && j->errors;
    for (int i = 0; ok && i < n; i++) {
        j->topics[i] = strndup(topics[i].ptr, topics[i].len > 0 ? (size_t)topics[i].len : 0);
        j->partitions[i] = partitions[i];
        j->n = i + 1;
        ok = j->topics[i] != NULL;
    }
    if (!ok) {
        int16_t *errs = calloc((size_t)n + 1, sizeof *errs);
        for (int i = 0; errs && i < n; i++)
            errs[i] = ST_KERR_NOT_ENOUGH_REPLICAS;
        if (j)
            vjob_free(j);
        if (errs) /* out of memory: the producer retries */
            done(s, arg, errs);
        free(errs);
        return;
    }
    j->call.fn = vjob_run;
    j->b = s->b;
    j->shard = s->id;
    j->done = done;
    j->arg = arg;
    int32_t coord = st_coordsvc_coordinator(&st_ktxn_service, s->md, id);
    if (coord < 0 || encode(j, id, pid, epoch) || j->body.oom) {
        fill_all(j, ST_KERR_COORDINATOR_NOT_AVAILABLE);
        vjob_run(s, &j->call);
        return;
    }
    j->req = (st_client_req_t){.broker = coord,
                               .api_key = ST_KP_API_ADD_PARTITIONS_TO_TXN,
                               .api_version = VERIFY_VERSION,
                               .body = j->body.data,
                               .len = j->body.len,
                               .max_tries = VERIFY_TRIES,
                               .done = req_done,
                               .arg = j};
    if (!st_ktxn_client_send(s->b, &j->req)) {
        fill_all(j, ST_KERR_COORDINATOR_NOT_AVAILABLE);
        vjob_run(s, &j->call);
    }
}
