/*
 * h_produce.c — Produce (key 0): append on the owner shards, answer once durable.
 *
 *   decode -> missing topics auto-created (if enabled) -> one xcall per owner shard:
 *   st_part_append for each of its partitions with the request's acks (partition.h: it
 *   validates, assigns offsets, records the producers, waits as acks asks, moves the high
 *   watermark) -> back on the connection's shard, answer. acks=0 gets no answer at all, but
 *   the request is held until the appends are done, since the records live in its frame.
 *
 * In a cluster a partition this broker does not lead (or leads but has not opened yet) is
 * NOT_LEADER_OR_FOLLOWER, checked against the request's shard's snapshot and again on the owner
 * (leader.h); from v10 the answer names the current leader and its endpoint (KIP-951). A topic
 * that auto-creation could not create here (NOT_CONTROLLER: the active controller creates it)
 * stays UNKNOWN_TOPIC_OR_PARTITION, which producers retry.
 *
 * acks=all in a cluster waits for every in-sync replica (partition.h, replication): fewer in
 * sync than the topic's min.insync.replicas is NOT_ENOUGH_REPLICAS before anything is written,
 * the ISR shrinking below it while waiting NOT_ENOUGH_REPLICAS_AFTER_APPEND, and leadership
 * moving while waiting NOT_LEADER_OR_FOLLOWER (with the new leader from v10), each with an
 * error_message saying which.
 *
 * A transactional produce (a transactional_id) whose records open their producer's transaction
 * on a partition (its first batch there) is appended only once the transaction coordinator says
 * the partition is in the transaction (KIP-890 part 1, partition.h; txn_verify.c asks): the
 * owners' first round finds those partitions and appends the rest, the request's shard asks the
 * coordinator once for all of them, and a second round appends those it confirmed. Off with
 * transaction.partition.verification.enable=false, as in Kafka.
 *
 * Produce v0-2 may carry message format v0/v1: prod_upconvert turns it into one RecordBatch v2
 * first (storage/msgconv.h), so everything after sees v2 only.
 *
 * A compacted topic refuses keyless records (the partition checks); the answer lists the
 * keyless records of the first batch holding any in record_errors (KIP-467, v8+), each with
 * its index within that batch and Kafka's text.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/quota.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "broker/fanout.h"
#include "kafka/authz.h"
#include "kafka/autocreate.h"
#include "kafka/controller.h"
#include "kafka/handlers.h"
#include "kafka/leader.h"
#include "kafka/throttle.h"
#include "kafka/topic_config.h"
#include "kafka/txn_route.h"
#include "proto/kerr.h"
#include "storage/batch.h"
#include "storage/msgconv.h"

typedef struct st_produce st_produce_t;

typedef struct {
    uint8_t topic_id[16];
    int32_t partition;
    int owner;
    uint8_t *records;
    int32_t len;
    int16_t error;
    const char *why;
    st_part_rejects_t *rejects; /* INVALID_RECORD for keyless records, else NULL */
    st_fanout_leg_t *leg;       /* the owner's leg, while its append waits */
    st_kp_produce_resp_partition_response_t *out;
    /* KIP-890 part 1 (txn_verify.c): the owner found the records open their producer's
     * transaction here (ASK, with its guard), the coordinator confirmed it (OK) */
    enum { VERIFY_NO, VERIFY_ASK, VERIFY_OK } verify;
    uint32_t guard;
    int64_t pid;
    int16_t epoch;
    int32_t seq;      /* its first batch's first sequence */
    const char *name; /* the topic's name (the request's arena), for the coordinator */
    /* a sampled request (base/trace.h): its owner's leg span, the wait for the ISR's start */
    st_span_t *legspan;
    int64_t isr_since_ns;
} prod_part_t;

struct st_produce {
    st_kreq_t *r;
    st_kp_produce_req_t req;
    st_kp_produce_resp_t resp;
    int nparts;
    prod_part_t *parts;
    st_kp_produce_item_t *q; /* the request's partitions (parts[k] is q[k]'s), with answers */
    st_fanout_t fan;
    st_fanout_leg_t *legs; /* one per shard */
    bool txn;              /* a transactional id: first batches of a transaction are verified */
    int round;             /* 0: the appends; 1: those verified with the coordinator since */
    st_span_t *legspans;   /* a sampled request's: one kafka.produce.shard span per shard */
};

/* The error_message of an append whose wait ended in error `err` (Kafka error kerr). */
static const char *prod_wait_why(int16_t kerr, int err)
{
    switch (kerr) {
    case ST_KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        return "written, but the in-sync replicas fell below min.insync.replicas before all of "
               "them had it";
    case ST_KERR_NOT_LEADER_OR_FOLLOWER:
        return "this broker lost the partition's leadership before every in-sync replica had "
               "the records";
    case ST_KERR_REQUEST_TIMED_OUT:
        return "written, but not on every in-sync replica within the request's timeout_ms";
    default:
        return st_strerror(err);
    }
}

/* A sampled request's partition pp is as durable as acks asked, or failed (err): the wait for
 * the ISR is a span (the local sync is the partition's, partition.h), and the owner's leg ends
 * no earlier than now. */
static void prod_trace_durable(prod_part_t *pp, int err)
{
    int64_t now = st_mono_ns();
    if (pp->isr_since_ns) {
        st_trace_ctx_t tc = st_span_ctx(pp->legspan);
        st_span_t sp;
        st_span_init(&sp, &tc, st_trace_new_id(), "kafka.produce.replication_wait",
                     pp->isr_since_ns);
        st_span_attr_str(&sp, "messaging.destination.name", pp->name, -1);
        st_span_attr_int(&sp, "messaging.destination.partition.id", pp->partition);
        st_span_attr_int(&sp, "kafka.error_code", pp->error);
        sp.error = err != 0;
        st_span_end(&sp, now);
    }
    pp->legspan->end_ns = now;
}

/* An append is as durable as acks asked (partition.h), or its wait failed: with acks=all,
 * ST_E_FEW_REPLICAS (the ISR shrank below min.insync.replicas) or ST_E_NOT_LEADER (leadership
 * moved); the records are in the log either way, and an idempotent producer's retry is
 * answered as a duplicate. */
static void prod_durable(void *arg, int err)
{
    prod_part_t *pp = arg;
    if (err) {
        pp->error = st_kerr_from(err);
        pp->why = prod_wait_why(pp->error, err);
    }
    if (pp->legspan)
        prod_trace_durable(pp, err);
    st_fanout_release(pp->leg);
}

/* Whether pp waits for (or failed) the coordinator's word before its append (partition.h,
 * KIP-890 part 1). */
static bool prod_verify(st_part_t *part, prod_part_t *pp)
{
    int64_t pid;
    int16_t epoch;
    uint32_t guard;
    size_t len = pp->len > 0 ? (size_t)pp->len : 0;
    /* round 1: the batch's note of waiting goes (partition.h), whatever follows */
    if (pp->verify != VERIFY_NO)
        st_part_verify_forget(part, pp->pid, pp->epoch, pp->seq);
    int32_t seq;
    if (!st_part_txn_verify_needed(part, pp->records, len, &pid, &epoch, &seq, &guard))
        return false; /* not a transaction's first batch here (or not transactional) */
    if (pp->verify == VERIFY_NO) {
        pp->verify = VERIFY_ASK;
        pp->guard = guard;
        pp->pid = pid;
        pp->epoch = epoch;
        pp->seq = seq;
        st_part_verify_pending(part, pid, epoch, seq);
        return true;
    }
    if (pid == pp->pid && st_part_verify_behind(part, pid, epoch, seq)) {
        /* verified before an earlier batch of its producer that still waits: appended now it
         * would leave a gap (OUT_OF_ORDER_SEQUENCE_NUMBER, fatal to librdkafka once that one is
         * answered); the producer sends it again after the earlier one */
        pp->error = ST_KERR_NOT_ENOUGH_REPLICAS;
        pp->why = "an earlier batch of this producer is still being verified with the "
                  "transaction coordinator; retry";
        return true;
    }
    if (pid == pp->pid && st_part_txn_guard_holds(part, pid, pp->guard))
        return false; /* verified, and no marker of the producer since */
    pp->error = ST_KERR_NOT_ENOUGH_REPLICAS;
    pp->why = "a transaction marker of this producer was written while the partition was being "
              "verified with the transaction coordinator; retry";
    return true;
}

/* A sampled request's append of pp (begun at t0, res its result) as a span of its owner's
 * leg; an append that now waits for the ISR starts that wait (prod_trace_durable ends it). */
static void prod_trace_append(prod_part_t *pp, const st_trace_ctx_t *tc, int64_t t0,
                              const st_part_append_res_t *res, bool later)
{
    int64_t now = st_mono_ns();
    st_span_t sp;
    st_span_init(&sp, tc, st_trace_new_id(), "kafka.produce.append", t0);
    st_span_attr_str(&sp, "messaging.destination.name", pp->name, -1);
    st_span_attr_int(&sp, "messaging.destination.partition.id", pp->partition);
    st_span_attr_int(&sp, "messaging.batch.message_bytes", pp->len > 0 ? pp->len : 0);
    st_span_attr_int(&sp, "kafka.error_code", res->error);
    if (!res->error)
        st_span_attr_int(&sp, "kafka.base_offset", res->base_offset);
    sp.error = res->error != 0;
    st_span_end(&sp, now);
    if (later && res->waits_isr)
        pp->isr_since_ns = now;
}

static void prod_append_one(st_kshard_t *s, st_fanout_leg_t *leg, prod_part_t *pp, int16_t acks,
                            int64_t timeout_ms, bool txn)
{
    st_part_t *part = st_parts_get(&s->parts, pp->topic_id, pp->partition);
    if ((pp->error = st_kleader_local(s, part))) {
        if (part && pp->verify != VERIFY_NO)
            st_part_verify_forget(part, pp->pid, pp->epoch, pp->seq);
        return;
    }
    if (txn && prod_verify(part, pp))
        return;
    st_part_append_res_t res;
    pp->leg = leg;
    st_trace_ctx_t tc = {.span_id = 0};
    int64_t t0 = 0;
    if (pp->legspan) {
        tc = st_span_ctx(pp->legspan);
        t0 = st_mono_ns();
        if (!pp->name)
            pp->name = st_part_topic(part); /* the partition outlives the request */
    }
    /* acks=0: nothing waits for the sync, which may end after the request: no span of it */
    bool later =
        st_part_append_traced(part, pp->records, pp->len > 0 ? (size_t)pp->len : 0, (st_acks_t)acks,
                              timeout_ms, acks ? &tc : NULL, &res, prod_durable, pp);
    if (pp->legspan)
        prod_trace_append(pp, &tc, t0, &res, later);
    pp->error = res.error;
    pp->why = res.why;
    pp->rejects = res.rejects;
    if (res.appended_bytes > 0)
        st_kstats_appended(&s->stats, (uint64_t)res.appended_bytes);
    if (!res.error) {
        pp->out->base_offset = res.base_offset;
        pp->out->log_append_time_ms = res.log_append_time;
        pp->out->log_start_offset = res.log_start_offset;
    }
    if (later)
        st_fanout_hold(leg);
}

/* On each owner shard: its partitions' appends. */
static void prod_run(st_fanout_leg_t *leg)
{
    st_kshard_t *s = st_kshard_current();
    st_produce_t *p = leg->data;
    st_span_t *ls = p->legspans ? &p->legspans[s->id] : NULL;
    for (int i = 0; i < p->nparts; i++) {
        prod_part_t *pp = &p->parts[i];
        if (pp->owner != s->id)
            continue;
        pp->legspan = ls;
        if (!pp->error && (p->round == 0 || pp->verify == VERIFY_OK)) {
            prod_append_one(s, leg, pp, p->req.acks, p->req.timeout_ms, p->txn);
        } else if (p->round == 1 && pp->verify == VERIFY_ASK) {
            /* the coordinator refused it (or could not be asked): its note goes */
            st_part_t *part = st_parts_get(&s->parts, pp->topic_id, pp->partition);
            if (part)
                st_part_verify_forget(part, pp->pid, pp->epoch, pp->seq);
        }
    }
    if (ls && ls->end_ns < st_mono_ns())
        ls->end_ns = st_mono_ns();
}

/* Copies the owner's list of refused records into the response (the request's arena). */
static void prod_answer_rejects(st_kreq_t *r, prod_part_t *pp)
{
    st_part_rejects_t *rej = pp->rejects;
    st_kp_produce_resp_record_error_t *re =
        st_arena_alloc(&r->arena, (size_t)rej->listed * sizeof *re);
    char *message = st_arena_strndup(&r->arena, rej->message, strlen(rej->message));
    char *summary = st_arena_strndup(&r->arena, rej->summary, strlen(rej->summary));
    if (re && message) {
        for (int32_t i = 0; i < rej->listed; i++) {
            st_kp_produce_resp_record_error_init(&re[i]);
            re[i].batch_index = rej->index[i];
            re[i].batch_index_error_message = st_kstr(message);
        }
        pp->out->record_errors = re;
        pp->out->record_errors_count = rej->listed;
    }
    pp->why = summary ? summary : "records without a key in a compacted topic";
    pp->rejects = NULL;
    free(rej);
}

/* KIP-951 (v10+, in a cluster): the leader each partition refused for leadership should go to,
 * and those leaders' endpoints. */
static void prod_answer_leaders(st_kreq_t *r, st_produce_t *p)
{
    int32_t *ids = st_arena_alloc(&r->arena, (size_t)p->nparts * sizeof *ids + 1);
    int n = 0;
    for (int i = 0; ids && i < p->nparts; i++) {
        prod_part_t *pp = &p->parts[i];
        st_kp_produce_resp_current_leader_t *cl = &pp->out->current_leader;
        if (st_kleader_current(r->shard, pp->topic_id, pp->partition, pp->error, &cl->leader_id,
                               &cl->leader_epoch))
            ids[n++] = cl->leader_id;
    }
    const st_md_broker_t **b = NULL;
    int k = n > 0 ? st_kleader_brokers(&r->arena, r->shard->md, ids, n, &b) : 0;
    p->resp.node_endpoints =
        k > 0 ? st_arena_zalloc(&r->arena, (size_t)k * sizeof *p->resp.node_endpoints) : NULL;
    const st_listener_t *l = st_conn_listener(r->conn);
    for (int i = 0; p->resp.node_endpoints && i < k; i++) {
        const char *h;
        size_t hl;
        int32_t port;
        st_md_broker_endpoint(b[i], l ? l->name : NULL, &h, &hl, &port);
        p->resp.node_endpoints[p->resp.node_endpoints_count++] =
            (st_kp_produce_resp_node_endpoint_t){b[i]->node_id, (st_kstr_t){h, (int32_t)hl}, port,
                                                 b[i]->rack ? st_kstr(b[i]->rack) : ST_KSTR_NULL};
    }
}

static void prod_send(st_kreq_t *r, st_produce_t *p);

/* Produce v0-2: records in message format v0/v1 become one RecordBatch v2 (storage/msgconv.h)
 * in the request's arena, which the append then treats as any producer's batch; a v2 batch
 * (which Kafka also accepts in these versions) goes as it came. */
static void prod_upconvert(st_kreq_t *r, prod_part_t *pp)
{
    if (!pp->records || pp->len <= 0 || st_msgconv_magic(pp->records, (size_t)pp->len) == 2)
        return;
    st_buf_t b;
    st_buf_init(&b);
    st_msgconv_up_info_t info;
    int64_t max_out = (int64_t)r->shard->b->cfg->message_max_bytes * ST_BATCH_INFLATE_FACTOR;
    int rc = st_msgconv_up(pp->records, (size_t)pp->len, max_out, &b, &info);
    uint8_t *v2 = rc == 0 ? st_arena_alloc(&r->arena, b.len) : NULL;
    if (v2) {
        memcpy(v2, b.data, b.len);
        pp->records = v2;
        pp->len = (int32_t)b.len;
        atomic_fetch_add_explicit(&r->shard->stats.upconv_records, (uint64_t)info.records,
                                  memory_order_relaxed);
    } else {
        pp->error = rc == ST_E_CORRUPT       ? ST_KERR_CORRUPT_MESSAGE
                    : rc == ST_E_MALFORMED   ? ST_KERR_INVALID_RECORD
                    : rc == ST_E_UNSUPPORTED ? ST_KERR_UNSUPPORTED_COMPRESSION_TYPE
                    : rc == ST_E_TOO_LARGE   ? ST_KERR_MESSAGE_TOO_LARGE
                                             : ST_KERR_UNKNOWN_SERVER_ERROR;
        pp->why = rc && info.why ? info.why : "out of memory";
    }
    st_buf_fini(&b);
}

/* On the request's shard: the coordinator's verdicts for the partitions asked about; those
 * in the transaction are appended now (round 1). */
static void prod_verified(st_kshard_t *s, void *arg, const int16_t *errors)
{
    (void)s;
    st_produce_t *p = arg;
    int k = 0;
    for (int i = 0; i < p->nparts; i++) {
        prod_part_t *pp = &p->parts[i];
        if (pp->verify != VERIFY_ASK || pp->error)
            continue;
        if ((pp->error = errors[k++]))
            pp->why = pp->error == ST_KERR_INVALID_TXN_STATE
                          ? "Partition was not added to the transaction"
                          : "Unable to verify the partition has been added to the transaction";
        else
            pp->verify = VERIFY_OK;
    }
    p->round = 1;
    prod_send(p->r, p);
}

/* After round 0: asks the coordinator about the partitions whose records open the producer's
 * transaction there. False when there are none. */
static bool prod_ask(st_kreq_t *r, st_produce_t *p)
{
    int n = 0;
    const prod_part_t *first = NULL;
    for (int i = 0; i < p->nparts; i++)
        if (p->parts[i].verify == VERIFY_ASK && !p->parts[i].error) {
            if (!first)
                first = &p->parts[i];
            if (p->parts[i].pid != first->pid || p->parts[i].epoch != first->epoch) {
                p->parts[i].error = ST_KERR_INVALID_PRODUCER_ID_MAPPING;
                p->parts[i].why = "Transactional records contained more than one producer ID";
                continue;
            }
            n++;
        }
    if (n == 0)
        return false;
    st_kstr_t *names = st_arena_alloc(&r->arena, (size_t)n * sizeof *names);
    int32_t *parts = st_arena_alloc(&r->arena, (size_t)n * sizeof *parts);
    if (!names || !parts) {
        for (int i = 0; i < p->nparts; i++)
            if (p->parts[i].verify == VERIFY_ASK && !p->parts[i].error)
                p->parts[i].error = ST_KERR_NOT_ENOUGH_REPLICAS;
        return false;
    }
    int k = 0;
    for (int i = 0; i < p->nparts; i++)
        if (p->parts[i].verify == VERIFY_ASK && !p->parts[i].error) {
            names[k] = st_kstr(p->parts[i].name);
            parts[k++] = p->parts[i].partition;
        }
    st_ktxn_verify(r->shard, p->req.transactional_id, first->pid, first->epoch, n, names, parts,
                   prod_verified, p);
    return true;
}

/* A sampled request's round is back: each owner's leg span (sent, run and, with acks, waited
 * until its partitions were durable; ended on the owner) ends here; each partition's leg
 * pointer goes, so the next round starts afresh. */
static void prod_trace_legs(st_kreq_t *r, st_produce_t *p)
{
    int nshards = r->shard->b->nshards;
    for (int i = 0; i < nshards; i++) {
        st_span_t *ls = &p->legspans[i];
        if (ls->end_ns == 0)
            continue; /* not sent to */
        int n = 0;
        for (int k = 0; k < p->nparts; k++)
            if (p->parts[k].legspan == ls) {
                n++;
                p->parts[k].legspan = NULL;
            }
        st_span_attr_int(ls, "strata.shard", i);
        st_span_attr_int(ls, "strata.remote", i != r->shard->id);
        st_span_attr_int(ls, "strata.partitions", n);
        st_span_attr_int(ls, "strata.round", p->round);
        st_span_end(ls, ls->end_ns);
    }
    p->legspans = NULL;
}

/* Back on the connection's shard once every owner answered. */
static void prod_finish(void *arg)
{
    st_produce_t *p = arg;
    st_kreq_t *r = p->r;
    free(p->legs);
    p->legs = NULL;
    if (p->legspans)
        prod_trace_legs(r, p);
    if (p->round == 0 && p->txn && prod_ask(r, p))
        return; /* prod_verified goes on */
    for (int i = 0; i < p->nparts; i++) {
        prod_part_t *pp = &p->parts[i];
        if (pp->rejects)
            prod_answer_rejects(r, pp);
        pp->out->error_code = pp->error;
        if (pp->error) {
            pp->out->base_offset = -1;
            pp->out->log_append_time_ms = -1;
            pp->out->log_start_offset = -1;
            if (pp->why)
                pp->out->error_message = st_kstr(pp->why);
            r->error_code = pp->error;
        }
    }
    if (p->req.acks == 0) {
        st_kreq_finish_silent(r);
        return;
    }
    if (r->api_version >= 10)
        prod_answer_leaders(r, p);
    ST_KREQ_RESPOND(r, produce, &p->resp);
}

/* The error refusing partition pp of topic qt (mt in this shard's snapshot, or NULL) before any
 * owner sees it, or 0. */
static int16_t prod_check(st_kreq_t *r, const st_kp_produce_req_topic_data_t *qt,
                          const st_md_topic_t *mt, prod_part_t *pp)
{
    char msg[200];
    /* WRITE on the topic, asked before anything else is told about it (Kafka's order) */
    st_kstr_t name = mt ? st_kstr(mt->name) : qt->name;
    if (!st_kauthz_k(r, ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, name))
        return ST_KERR_TOPIC_AUTHORIZATION_FAILED;
    if (!mt || pp->partition < 0 || pp->partition >= mt->npartitions) {
        if (r->api_version < 13 && qt->name.len >= 0 &&
            st_topic_name_check(qt->name.ptr, (size_t)qt->name.len, msg, sizeof msg))
            return ST_KERR_INVALID_TOPIC_EXCEPTION;
        return mt || r->api_version < 13 ? ST_KERR_UNKNOWN_TOPIC_OR_PARTITION
                                         : ST_KERR_UNKNOWN_TOPIC_ID;
    }
    if (mt->internal) {
        pp->why = "cannot produce to an internal topic";
        return ST_KERR_INVALID_TOPIC_EXCEPTION;
    }
    int16_t e = st_kleader_check(r->shard, mt, pp->partition, -1);
    return e ? e : pp->owner < 0 ? ST_KERR_UNKNOWN_TOPIC_OR_PARTITION : 0;
}

/* Resolves topics against this shard's snapshot and sends each owner its partitions. */
static void prod_dispatch(st_kreq_t *r, void *arg)
{
    st_produce_t *p = arg;
    const st_md_t *md = r->shard->md;
    const st_md_topic_t *mt = NULL;
    for (int k = 0; k < p->nparts; k++) {
        const st_kp_produce_item_t *q = &p->q[k];
        if (k == 0 || q->topic_at != p->q[k - 1].topic_at)
            mt = r->api_version >= 13 ? st_md_find_id(md, q->topic_id.b)
                                      : st_md_find(md, q->name.ptr, q->name.len);
        prod_part_t *pp = &p->parts[k];
        pp->owner = st_kshard_owner(mt, pp->partition);
        if (mt)
            memcpy(pp->topic_id, mt->id, 16);
        if (mt && p->txn)
            pp->name = k > 0 && q->topic_at == p->q[k - 1].topic_at
                           ? p->parts[k - 1].name
                           : st_arena_strndup(&r->arena, mt->name, strlen(mt->name));
        if (!pp->error)
            pp->error = prod_check(r, q->req_topic, mt, pp);
    }
    prod_send(r, p);
}

/* Sends each owner its partitions of this round (all of them, then the verified ones). */
static void prod_send(st_kreq_t *r, st_produce_t *p)
{
    int nshards = r->shard->b->nshards;
    p->legs = calloc((size_t)nshards, sizeof *p->legs);
    if (!p->legs) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int i = 0; i < nshards; i++)
        p->legs[i].data = p;
    if (r->span) {
        p->legspans = st_arena_alloc(&r->arena, (size_t)nshards * sizeof *p->legspans);
        int64_t now = st_mono_ns();
        for (int i = 0; p->legspans && i < nshards; i++) {
            st_span_init(&p->legspans[i], &r->trace, st_trace_new_id(), "kafka.produce.shard", now);
            p->legspans[i].end_ns = 0; /* set on the owner as it runs */
        }
    }
    st_fanout_begin(&p->fan, r->shard->b->mesh, r->shard->id, prod_run, prod_finish, p);
    for (int i = 0; i < p->nparts; i++)
        if ((!p->parts[i].error && (p->round == 0 || p->parts[i].verify == VERIFY_OK)) ||
            (p->round == 1 && p->parts[i].verify == VERIFY_ASK))
            st_fanout_owner(&p->fan, p->legs, p->parts[i].owner);
    st_fanout_end(&p->fan);
}

void st_kh_produce(st_kreq_t *r)
{
    st_produce_t *p = st_arena_zalloc(&r->arena, sizeof *p);
    if (!p || st_kp_produce_req_decode(&r->body, r->api_version, &p->req)) {
        st_kreq_fail(r, "malformed Produce request");
        return;
    }
    p->r = r;
    st_kp_produce_resp_init(&p->resp);
    /* Kafka counts a Produce's request bytes against producer_byte_rate (acks=0 included).
     * Counted as it arrives: a throttled connection is muted before its next pipelined
     * request is taken, so each throttle holds back what follows, as Kafka's one request at
     * a time does. */
    p->resp.throttle_time_ms =
        st_kthrottle_record(r, ST_QUOTA_PRODUCER_BYTE_RATE, (int64_t)r->frame_len);
    if (r->throttle_ms > p->resp.throttle_time_ms) /* request_percentage's (throttle.h) */
        p->resp.throttle_time_ms = r->throttle_ms;
    p->nparts = st_kp_produce_mirror(&r->arena, &p->req, &p->resp, &p->q);
    p->parts =
        p->nparts < 0 ? NULL : st_arena_zalloc(&r->arena, (size_t)p->nparts * sizeof *p->parts + 1);
    st_kstr_t *names =
        st_arena_zalloc(&r->arena, (size_t)p->req.topic_data_count * sizeof *names + 1);
    if (!p->parts || !names) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int t = 0; t < p->req.topic_data_count; t++)
        names[t] = p->req.topic_data[t].name;
    if (r->span) {
        st_span_attr_int(r->span, "kafka.acks", p->req.acks);
        st_span_attr_int(r->span, "kafka.topics", p->req.topic_data_count);
        st_span_attr_int(r->span, "kafka.partitions", p->nparts);
        if (p->req.topic_data_count == 1 && names[0].len > 0)
            st_span_attr_str(r->span, "messaging.destination.name", names[0].ptr, names[0].len);
    }
    for (int k = 0; k < p->nparts; k++) {
        prod_part_t *pp = &p->parts[k];
        pp->out = p->q[k].resp_partition;
        pp->partition = p->q[k].index;
        pp->records = (uint8_t *)p->q[k].req_partition->records.ptr;
        pp->len = p->q[k].req_partition->records.len;
        if (p->req.acks != 0 && p->req.acks != 1 && p->req.acks != -1)
            pp->error = ST_KERR_INVALID_REQUIRED_ACKS;
        else if (r->api_version < 3)
            prod_upconvert(r, pp);
    }
    /* transactional records (Kafka's RequestUtils.hasTransactionalRecords: a partition whose
     * first batch has the transactional bit) need WRITE on the transactional id, a null one
     * refused too; else every partition is refused */
    st_kstr_t tid = p->req.transactional_id;
    bool txn_records = false;
    for (int k = 0; k < p->nparts; k++)
        if (p->parts[k].records && p->parts[k].len >= 23 &&
            (st_be16(p->parts[k].records + 21) & 0x10))
            txn_records = true;
    if (txn_records && st_kauthz_on(r) &&
        (st_kstr_is_null(tid) ||
         !st_kauthz(r, ST_ACL_OP_WRITE, ST_ACL_RES_TRANSACTIONAL_ID, tid.ptr, (size_t)tid.len)))
        for (int k = 0; k < p->nparts; k++)
            p->parts[k].error = ST_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    p->txn = !st_kstr_is_null(p->req.transactional_id) &&
             r->shard->b->cfg->transaction_partition_verification_enable;
    if (r->api_version < 13 && r->shard->b->cfg->auto_create_topics_enable)
        st_autocreate(r, names, p->req.topic_data_count, NULL, prod_dispatch, p);
    else
        prod_dispatch(r, p);
}
