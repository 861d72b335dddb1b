/*
 * h_txn.c — the transaction coordinator's APIs: InitProducerId with a transactional id (the
 * idempotent path stays in h_init_producer_id.c), AddPartitionsToTxn v0-5 (v4+: a batch of
 * transactions, and verify_only, the broker-to-broker check of KIP-890), AddOffsetsToTxn
 * (the group's __consumer_offsets partition joins the transaction), EndTxn v0-5 (v5: the
 * producer id and epoch answered, the epoch bumped at each end: transactions v2),
 * DescribeTransactions, ListTransactions. Each decodes here, routes each transactional id to
 * its coordinator (txn_route.h) and answers once every call has come back; the checks
 * Kafka's KafkaApis makes before its coordinator (unknown topics, the old clients'
 * INVALID_PRODUCER_EPOCH for PRODUCER_FENCED) are made here too.
 */
#include <string.h>

#include "group/coord.h"
#include "kafka/authz.h"
#include "kafka/handlers.h"
#include "kafka/txn_route.h"
#include "proto/kerr.h"
#include "txn/records.h"

/* Clients older than these versions know INVALID_PRODUCER_EPOCH, not PRODUCER_FENCED. */
static int16_t fenced_for(int16_t error, int16_t version, int16_t first_fenced_version)
{
    return error == ST_KERR_PRODUCER_FENCED && version < first_fenced_version
               ? ST_KERR_INVALID_PRODUCER_EPOCH
               : error;
}

/* A coordinator-less shard (the service not started there): every answer NOT_COORDINATOR. */
#define COORD_OR(s, x, res)                                                                        \
    st_tcoord_t *c = st_ktxn_coord(s);                                                             \
    if (!c) {                                                                                      \
        (res)->error = ST_KERR_NOT_COORDINATOR;                                                    \
        st_ktxn_call_return(x);                                                                    \
        return;                                                                                    \
    }

/* ---- InitProducerId ---- */

typedef struct {
    st_kp_init_producer_id_req_t req;
    st_tresult_t res;
} ipid_t;

static void ipid_exec(st_kshard_t *s, st_ktxn_call_t *x)
{
    ipid_t *p = x->item;
    COORD_OR(s, x, &p->res);
    st_tcoord_init_pid(c, x->partition, p->req.transactional_id, p->req.transaction_timeout_ms,
                       p->req.producer_id, p->req.producer_epoch, &p->res, st_ktxn_call_return, x);
}

static void ipid_finish(st_ktxn_ctx_t *ctx)
{
    ipid_t *p = ctx->data;
    st_kp_init_producer_id_resp_t resp;
    st_kp_init_producer_id_resp_init(&resp);
    resp.error_code = fenced_for(p->res.error, ctx->r->api_version, 4);
    resp.producer_id = p->res.error ? -1 : p->res.producer_id;
    resp.producer_epoch = p->res.error ? -1 : p->res.producer_epoch;
    ctx->r->error_code = resp.error_code;
    ST_KTXN_RESPOND(ctx, init_producer_id, &resp);
}

void st_kh_init_producer_id_txn(st_kreq_t *r, const st_kp_init_producer_id_req_t *req)
{
    ipid_t *p = st_arena_zalloc(&r->arena, sizeof *p);
    st_ktxn_ctx_t *ctx = p ? st_ktxn_ctx_new(r, ipid_finish, p) : NULL;
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    p->req = *req;
    st_ktxn_call_id(ctx, req->transactional_id, ipid_exec, p);
    st_ktxn_ctx_end(ctx);
}

/* ---- AddPartitionsToTxn ---- */

typedef struct {
    st_kstr_t id;
    int64_t pid;
    int16_t epoch;
    bool verify;
    int n;
    st_ttp_t *parts;
    int16_t *errors; /* per partition */
    st_tresult_t res;
    bool routed;
} apt_txn_t;

typedef struct {
    int n;
    apt_txn_t *txns;
} apt_t;

static void apt_exec(st_kshard_t *s, st_ktxn_call_t *x)
{
    apt_txn_t *t = x->item;
    COORD_OR(s, x, &t->res);
    if (t->verify) {
        st_tcoord_verify(c, x->partition, t->id, t->pid, t->epoch, t->parts, t->n, t->errors);
        st_ktxn_call_return(x);
        return;
    }
    st_tcoord_add_partitions(c, x->partition, t->id, t->pid, t->epoch, t->parts, t->n, &t->res,
                             st_ktxn_call_return, x);
}

/* The results of transaction t grouped by topic, in the order the request named them, into
 * *out / *count: the v0-3 or the v4+ result types (the same fields). rc -1: out of memory. */
#define APT_TOPICS(a, t, version, out, count, rc)                                                  \
    do {                                                                                           \
        (rc) = 0;                                                                                  \
        *(out) = st_arena_zalloc((a), ((size_t)(t)->n + 1) * sizeof **(out));                      \
        *(count) = 0;                                                                              \
        if (!*(out)) {                                                                             \
            (rc) = -1;                                                                             \
            break;                                                                                 \
        }                                                                                          \
        for (int i_ = 0; i_ < (t)->n && !(rc); i_++) {                                             \
            __typeof__(*(out)) cur_ = NULL;                                                        \
            for (int32_t k_ = 0; k_ < *(count) && !cur_; k_++)                                     \
                if ((*(out))[k_].name.len == (t)->parts[i_].topic.len &&                           \
                    memcmp((*(out))[k_].name.ptr, (t)->parts[i_].topic.ptr,                        \
                           (size_t)(*(out))[k_].name.len) == 0)                                    \
                    cur_ = &(*(out))[k_];                                                          \
            if (!cur_) {                                                                           \
                cur_ = &(*(out))[(*(count))++];                                                    \
                cur_->name = (t)->parts[i_].topic;                                                 \
                cur_->results_by_partition = st_arena_zalloc(                                      \
                    (a), ((size_t)(t)->n + 1) * sizeof *cur_->results_by_partition);               \
                if (!cur_->results_by_partition) {                                                 \
                    (rc) = -1;                                                                     \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
            __typeof__(cur_->results_by_partition) pr_ =                                           \
                &cur_->results_by_partition[cur_->results_by_partition_count++];                   \
            pr_->partition_index = (t)->parts[i_].partition;                                       \
            pr_->partition_error_code = fenced_for((t)->errors[i_], (version), 2);                 \
        }                                                                                          \
    } while (0)

static void apt_finish(st_ktxn_ctx_t *ctx)
{
    apt_t *ap = ctx->data;
    st_kreq_t *r = ctx->r;
    for (int i = 0; i < ap->n; i++) {
        apt_txn_t *t = &ap->txns[i];
        if (t->routed && !t->verify)
            for (int k = 0; k < t->n; k++)
                t->errors[k] = t->res.error;
    }
    st_kp_add_partitions_to_txn_resp_t resp;
    st_kp_add_partitions_to_txn_resp_init(&resp);
    if (r->api_version < 4) {
        int rc;
        APT_TOPICS(&r->arena, &ap->txns[0], r->api_version, &resp.results_by_topic_v3_and_below,
                   &resp.results_by_topic_v3_and_below_count, rc);
        if (rc) {
            st_kreq_fail(r, "out of memory");
            st_ktxn_calls_free(ctx->calls);
            return;
        }
        r->error_code = ap->n == 1 && ap->txns[0].n ? ap->txns[0].errors[0] : 0;
    } else {
        resp.results_by_transaction =
            st_arena_zalloc(&r->arena, ((size_t)ap->n + 1) * sizeof *resp.results_by_transaction);
        if (!resp.results_by_transaction) {
            st_kreq_fail(r, "out of memory");
            st_ktxn_calls_free(ctx->calls);
            return;
        }
        resp.results_by_transaction_count = ap->n;
        for (int i = 0; i < ap->n; i++) {
            st_kp_add_partitions_to_txn_resp_result_t *res = &resp.results_by_transaction[i];
            res->transactional_id = ap->txns[i].id;
            int rc;
            APT_TOPICS(&r->arena, &ap->txns[i], r->api_version, &res->topic_results,
                       &res->topic_results_count, rc);
            if (rc) {
                st_kreq_fail(r, "out of memory");
                st_ktxn_calls_free(ctx->calls);
                return;
            }
        }
    }
    ST_KTXN_RESPOND(ctx, add_partitions_to_txn, &resp);
}

/* Kafka's check before the coordinator: a partition that does not exist fails the whole
 * transaction (UNKNOWN_TOPIC_OR_PARTITION for it, OPERATION_NOT_ATTEMPTED for the rest). */
/* With ACLs on, Kafka's checks: v4+ (brokers' batches, verify-only or not) CLUSTER_ACTION on
 * the cluster for the whole request; v0-3 (clients) WRITE on the transactional id (every
 * partition refused otherwise) and WRITE on each topic; the other partitions of a refused
 * request are OPERATION_NOT_ATTEMPTED. */
static bool apt_check(st_kreq_t *r, apt_txn_t *t)
{
    const st_md_t *md = r->shard->md;
    int16_t all = 0;
    bool client = r->api_version < 4; /* v4+: CLUSTER_ACTION, checked for the request */
    if (st_kauthz_on(r) && client &&
        (t->id.len < 0 ||
         !st_kauthz(r, ST_ACL_OP_WRITE, ST_ACL_RES_TRANSACTIONAL_ID, t->id.ptr, (size_t)t->id.len)))
        all = ST_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    bool ok = all == 0;
    for (int i = 0; i < t->n; i++) {
        st_kstr_t topic = t->parts[i].topic;
        if (all) {
            t->errors[i] = all;
            continue;
        }
        if (client && !st_kauthz_k(r, ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, topic)) {
            t->errors[i] = ST_KERR_TOPIC_AUTHORIZATION_FAILED;
            ok = false;
            continue;
        }
        const st_md_topic_t *mt = st_md_find(md, topic.ptr, topic.len);
        bool exists = mt && t->parts[i].partition >= 0 && t->parts[i].partition < mt->npartitions;
        t->errors[i] = exists ? 0 : ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        ok = ok && exists;
    }
    for (int i = 0; !ok && i < t->n; i++)
        if (!t->errors[i])
            t->errors[i] = ST_KERR_OPERATION_NOT_ATTEMPTED;
    return ok;
}

/* Fills t from a request's topics: the v0-3 array or a v4+ transaction's (distinct generated
 * types with the same fields). */
#define APT_FILL(a, t, tp, ntopics, rc)                                                            \
    do {                                                                                           \
        int n_ = 0;                                                                                \
        for (int32_t i_ = 0; i_ < (ntopics); i_++)                                                 \
            n_ += (tp)[i_].partitions_count;                                                       \
        (t)->parts = st_arena_zalloc((a), ((size_t)n_ + 1) * sizeof *(t)->parts);                  \
        (t)->errors = st_arena_zalloc((a), ((size_t)n_ + 1) * sizeof *(t)->errors);                \
        (rc) = (t)->parts && (t)->errors ? 0 : -1;                                                 \
        for (int32_t i_ = 0; !(rc) && i_ < (ntopics); i_++)                                        \
            for (int32_t k_ = 0; k_ < (tp)[i_].partitions_count; k_++)                             \
                (t)->parts[(t)->n++] = (st_ttp_t){(tp)[i_].name, (tp)[i_].partitions[k_]};         \
    } while (0)

void st_kh_add_partitions_to_txn(st_kreq_t *r)
{
    st_kp_add_partitions_to_txn_req_t req;
    if (st_kp_add_partitions_to_txn_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed AddPartitionsToTxn request");
        return;
    }
    if (r->api_version >= 4 && !st_kauthz_cluster(r, ST_ACL_OP_CLUSTER_ACTION)) {
        /* v4+ comes from brokers only: without CLUSTER_ACTION Kafka refuses the whole request,
         * its top-level error and no results, verify-only or not */
        st_kp_add_partitions_to_txn_resp_t resp;
        st_kp_add_partitions_to_txn_resp_init(&resp);
        resp.error_code = r->error_code = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
        ST_KREQ_RESPOND(r, add_partitions_to_txn, &resp);
        return;
    }
    apt_t *ap = st_arena_zalloc(&r->arena, sizeof *ap);
    int n = r->api_version < 4 ? 1 : req.transactions_count;
    if (ap)
        ap->txns = st_arena_zalloc(&r->arena, ((size_t)n + 1) * sizeof *ap->txns);
    st_ktxn_ctx_t *ctx = ap && ap->txns ? st_ktxn_ctx_new(r, apt_finish, ap) : NULL;
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    ap->n = n;
    for (int i = 0; i < n; i++) {
        apt_txn_t *t = &ap->txns[i];
        int rc;
        if (r->api_version < 4) {
            t->id = req.v3_and_below_transactional_id;
            t->pid = req.v3_and_below_producer_id;
            t->epoch = req.v3_and_below_producer_epoch;
            APT_FILL(&r->arena, t, req.v3_and_below_topics, req.v3_and_below_topics_count, rc);
        } else {
            const st_kp_add_partitions_to_txn_req_transaction_t *rt = &req.transactions[i];
            t->id = rt->transactional_id;
            t->pid = rt->producer_id;
            t->epoch = rt->producer_epoch;
            t->verify = rt->verify_only;
            APT_FILL(&r->arena, t, rt->topics, rt->topics_count, rc);
        }
        if (rc) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        if (!apt_check(r, t))
            continue;
        t->routed = true;
        st_ktxn_call_id(ctx, t->id, apt_exec, t);
    }
    st_ktxn_ctx_end(ctx);
}

/* ---- AddOffsetsToTxn ---- */

typedef struct {
    st_kp_add_offsets_to_txn_req_t req;
    st_ttp_t tp;
    st_tresult_t res;
} aot_t;

static void aot_exec(st_kshard_t *s, st_ktxn_call_t *x)
{
    aot_t *o = x->item;
    COORD_OR(s, x, &o->res);
    st_tcoord_add_partitions(c, x->partition, o->req.transactional_id, o->req.producer_id,
                             o->req.producer_epoch, &o->tp, 1, &o->res, st_ktxn_call_return, x);
}

static void aot_finish(st_ktxn_ctx_t *ctx)
{
    aot_t *o = ctx->data;
    st_kp_add_offsets_to_txn_resp_t resp;
    st_kp_add_offsets_to_txn_resp_init(&resp);
    resp.error_code = fenced_for(o->res.error, ctx->r->api_version, 2);
    ctx->r->error_code = resp.error_code;
    ST_KTXN_RESPOND(ctx, add_offsets_to_txn, &resp);
}

void st_kh_add_offsets_to_txn(st_kreq_t *r)
{
    aot_t *o = st_arena_zalloc(&r->arena, sizeof *o);
    if (!o || st_kp_add_offsets_to_txn_req_decode(&r->body, r->api_version, &o->req)) {
        st_kreq_fail(r, "malformed AddOffsetsToTxn request");
        return;
    }
    int16_t denied = st_kauthz_txn_group(r, o->req.transactional_id, o->req.group_id);
    if (denied) {
        st_kp_add_offsets_to_txn_resp_t resp;
        st_kp_add_offsets_to_txn_resp_init(&resp);
        resp.error_code = r->error_code = denied;
        ST_KREQ_RESPOND(r, add_offsets_to_txn, &resp);
        return;
    }
    st_ktxn_ctx_t *ctx = st_ktxn_ctx_new(r, aot_finish, o);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    /* the group's __consumer_offsets partition, as its coordinator finds it */
    const st_md_topic_t *ot =
        st_md_find(r->shard->md, ST_OFFSETS_TOPIC, (int32_t)strlen(ST_OFFSETS_TOPIC));
    int32_t n = ot ? ot->npartitions : (int32_t)r->shard->b->cfg->offsets_topic_num_partitions;
    o->tp = (st_ttp_t){st_kstr(ST_OFFSETS_TOPIC), st_gcoord_partition_for(o->req.group_id, n)};
    st_ktxn_call_id(ctx, o->req.transactional_id, aot_exec, o);
    st_ktxn_ctx_end(ctx);
}

/* ---- EndTxn ---- */

typedef struct {
    st_kp_end_txn_req_t req;
    int16_t client_tv;
    st_tresult_t res;
} end_t;

static void end_exec(st_kshard_t *s, st_ktxn_call_t *x)
{
    end_t *e = x->item;
    COORD_OR(s, x, &e->res);
    st_tcoord_end(c, x->partition, e->req.transactional_id, e->req.producer_id,
                  e->req.producer_epoch, e->req.committed, e->client_tv, &e->res,
                  st_ktxn_call_return, x);
}

static void end_finish(st_ktxn_ctx_t *ctx)
{
    end_t *e = ctx->data;
    st_kp_end_txn_resp_t resp;
    st_kp_end_txn_resp_init(&resp);
    resp.error_code = fenced_for(e->res.error, ctx->r->api_version, 2);
    if (!e->res.error) {
        resp.producer_id = e->res.producer_id;
        resp.producer_epoch = e->res.producer_epoch;
    }
    ctx->r->error_code = resp.error_code;
    ST_KTXN_RESPOND(ctx, end_txn, &resp);
}

void st_kh_end_txn(st_kreq_t *r)
{
    end_t *e = st_arena_zalloc(&r->arena, sizeof *e);
    if (!e || st_kp_end_txn_req_decode(&r->body, r->api_version, &e->req)) {
        st_kreq_fail(r, "malformed EndTxn request");
        return;
    }
    /* Kafka's KafkaApis: EndTxn v5 is a transactions v2 client */
    e->client_tv = r->api_version >= 5 ? 2 : 0;
    st_kstr_t tid = e->req.transactional_id;
    if (!st_kauthz_k(r, ST_ACL_OP_WRITE, ST_ACL_RES_TRANSACTIONAL_ID, tid)) {
        st_kp_end_txn_resp_t resp;
        st_kp_end_txn_resp_init(&resp);
        resp.error_code = r->error_code = ST_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        ST_KREQ_RESPOND(r, end_txn, &resp);
        return;
    }
    st_ktxn_ctx_t *ctx = st_ktxn_ctx_new(r, end_finish, e);
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_ktxn_call_id(ctx, e->req.transactional_id, end_exec, e);
    st_ktxn_ctx_end(ctx);
}

/* ---- DescribeTransactions ---- */

typedef struct {
    st_kstr_t id;
    st_kp_describe_transactions_resp_transaction_state_t out;
} dt_item_t;

typedef struct {
    int n;
    dt_item_t *items;
} dt_t;

static void dt_exec(st_kshard_t *s, st_ktxn_call_t *x)
{
    dt_item_t *it = x->item;
    if (st_ktxn_coord(s)) {
        st_tcoord_describe(st_ktxn_coord(s), x->partition, it->id, &x->arena, &it->out);
    } else {
        st_kp_describe_transactions_resp_transaction_state_init(&it->out);
        it->out.transactional_id = it->id;
        it->out.error_code = ST_KERR_NOT_COORDINATOR;
    }
    if (it->out.transaction_state.len < 0)
        it->out.transaction_state = ST_KSTR_EMPTY;
    st_ktxn_call_return(x);
}

static void dt_finish(st_ktxn_ctx_t *ctx)
{
    dt_t *d = ctx->data;
    st_kp_describe_transactions_resp_t resp;
    st_kp_describe_transactions_resp_init(&resp);
    resp.transaction_states =
        st_arena_zalloc(&ctx->r->arena, ((size_t)d->n + 1) * sizeof *resp.transaction_states);
    if (!resp.transaction_states) {
        st_kreq_fail(ctx->r, "out of memory");
        st_ktxn_calls_free(ctx->calls);
        return;
    }
    resp.transaction_states_count = d->n;
    for (int i = 0; i < d->n; i++) {
        st_kp_describe_transactions_resp_transaction_state_t *o = &resp.transaction_states[i];
        *o = d->items[i].out;
        /* Kafka shows only the partitions of topics the principal may DESCRIBE */
        int32_t k = 0;
        for (int32_t t = 0; t < o->topics_count; t++)
            if (st_kauthz_k(ctx->r, ST_ACL_OP_DESCRIBE, ST_ACL_RES_TOPIC, o->topics[t].topic))
                o->topics[k++] = o->topics[t];
        o->topics_count = k;
    }
    ST_KTXN_RESPOND(ctx, describe_transactions, &resp);
}

void st_kh_describe_transactions(st_kreq_t *r)
{
    st_kp_describe_transactions_req_t req;
    if (st_kp_describe_transactions_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed DescribeTransactions request");
        return;
    }
    dt_t *d = st_arena_zalloc(&r->arena, sizeof *d);
    if (d)
        d->items = st_arena_zalloc(&r->arena,
                                   ((size_t)req.transactional_ids_count + 1) * sizeof *d->items);
    st_ktxn_ctx_t *ctx = d && d->items ? st_ktxn_ctx_new(r, dt_finish, d) : NULL;
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    d->n = req.transactional_ids_count;
    for (int i = 0; i < d->n; i++) {
        st_kstr_t id = d->items[i].id = req.transactional_ids[i];
        /* With ACLs on: DESCRIBE on each transactional id (Kafka's check) */
        if (!st_kauthz_k(r, ST_ACL_OP_DESCRIBE, ST_ACL_RES_TRANSACTIONAL_ID, id)) {
            st_kp_describe_transactions_resp_transaction_state_init(&d->items[i].out);
            d->items[i].out.transactional_id = id;
            d->items[i].out.error_code = ST_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            continue;
        }
        st_ktxn_call_id(ctx, id, dt_exec, &d->items[i]);
    }
    st_ktxn_ctx_end(ctx);
}

/* ---- ListTransactions ---- */

typedef struct {
    int *states;
    int nstates;
    const int64_t *pids;
    int npids;
    int64_t duration;
} lt_t;

typedef struct {
    lt_t *q;
    st_kp_list_transactions_resp_transaction_state_t *out;
    int32_t n;
} lt_shard_t;

static void lt_exec(st_kshard_t *s, st_ktxn_call_t *x)
{
    lt_shard_t *ls = x->item;
    if (st_ktxn_coord(s))
        st_tcoord_list(st_ktxn_coord(s), ls->q->states, ls->q->nstates, ls->q->pids, ls->q->npids,
                       ls->q->duration, &x->arena, &ls->out, &ls->n);
    st_ktxn_call_return(x);
}

typedef struct {
    lt_t q;
    st_kstr_t *unknown;
    int32_t nunknown;
    int nshards;
    lt_shard_t *shards;
} lt_req_t;

static void lt_finish(st_ktxn_ctx_t *ctx)
{
    lt_req_t *l = ctx->data;
    st_kp_list_transactions_resp_t resp;
    st_kp_list_transactions_resp_init(&resp);
    resp.unknown_state_filters = l->unknown;
    resp.unknown_state_filters_count = l->nunknown;
    int32_t total = 0;
    for (int i = 0; i < l->nshards; i++)
        total += l->shards[i].n;
    resp.transaction_states =
        st_arena_zalloc(&ctx->r->arena, ((size_t)total + 1) * sizeof *resp.transaction_states);
    if (!resp.transaction_states) {
        st_kreq_fail(ctx->r, "out of memory");
        st_ktxn_calls_free(ctx->calls);
        return;
    }
    /* Only the transactional ids the principal may DESCRIBE (Kafka's filter) */
    for (int i = 0; i < l->nshards; i++)
        for (int32_t k = 0; k < l->shards[i].n; k++)
            if (st_kauthz_k(ctx->r, ST_ACL_OP_DESCRIBE, ST_ACL_RES_TRANSACTIONAL_ID,
                            l->shards[i].out[k].transactional_id))
                resp.transaction_states[resp.transaction_states_count++] = l->shards[i].out[k];
    ST_KTXN_RESPOND(ctx, list_transactions, &resp);
}

void st_kh_list_transactions(st_kreq_t *r)
{
    st_kp_list_transactions_req_t req;
    if (st_kp_list_transactions_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed ListTransactions request");
        return;
    }
    int nshards = r->shard->b->nshards;
    lt_req_t *l = st_arena_zalloc(&r->arena, sizeof *l);
    if (l) {
        l->q.states =
            st_arena_zalloc(&r->arena, ((size_t)req.state_filters_count + 1) * sizeof *l->q.states);
        l->unknown =
            st_arena_zalloc(&r->arena, ((size_t)req.state_filters_count + 1) * sizeof *l->unknown);
        l->shards = st_arena_zalloc(&r->arena, (size_t)nshards * sizeof *l->shards);
    }
    st_ktxn_ctx_t *ctx =
        l && l->q.states && l->unknown && l->shards ? st_ktxn_ctx_new(r, lt_finish, l) : NULL;
    if (!ctx) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int32_t i = 0; i < req.state_filters_count; i++) {
        int st = st_txn_state_by_name(req.state_filters[i]);
        l->q.states[l->q.nstates++] = st; /* unknown: -1, which matches nothing (as Kafka) */
        if (st < 0)
            l->unknown[l->nunknown++] = req.state_filters[i];
    }
    l->q.pids = req.producer_id_filters;
    l->q.npids = req.producer_id_filters_count;
    l->q.duration = req.duration_filter;
    l->nshards = nshards;
    for (int i = 0; i < nshards; i++) {
        l->shards[i].q = &l->q;
        st_ktxn_call_to(ctx, i, -1, lt_exec, &l->shards[i]);
    }
    st_ktxn_ctx_end(ctx);
}
