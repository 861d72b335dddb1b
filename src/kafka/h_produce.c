/*
 * h_produce.c — Produce (key 0): append on the owner shards, answer once durable.
 *
 *   decode -> missing topics auto-created (if enabled) -> one xcall per owner shard:
 *   st_log_append for each of its partitions, then (acks != 0) wait until the append is as
 *   durable as the flush policy promises (strict: fdatasync'ed by group commit) -> back on
 *   the connection's shard, answer. acks=0 gets no answer at all, but the request is held
 *   until the appends are done, since the records live in its frame.
 *
 * Every append also moves the partition's high watermark once durable, waking fetches.
 *
 * A topic whose cleanup.policy holds "compact" takes only records with a key (compaction keeps
 * the newest record of each key; a keyless one has none to be kept by). The owner walks every
 * record of such a partition's batches, decompressing as needed, before the append; a keyless
 * record refuses the partition's whole append with INVALID_RECORD, and the answer lists the
 * keyless records of the first batch holding any in record_errors (KIP-467, v8+), each with
 * its index within that batch and Kafka's text. Other topics pay nothing for this.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "kafka/autocreate.h"
#include "kafka/controller.h"
#include "kafka/broker.h"
#include "kafka/topic_config.h"
#include "proto/kerr.h"

typedef struct st_produce st_produce_t;

/*
 * At most this many refused records are listed in a partition's record_errors (the total is in
 * its error_message). A compressed batch of tiny keyless records may hold millions; listing
 * each, with Kafka's ~100-byte text, would answer a small request with hundreds of megabytes.
 */
#define ST_PROD_MAX_RECORD_ERRORS 10000

/* The keyless records of a refused partition: found on the owner, answered by the connection's
 * shard, which frees this. */
typedef struct {
    int32_t total;      /* keyless records in the batch */
    int32_t listed;     /* of them, in index[] */
    char message[352];  /* each one's batch_index_error_message */
    char summary[1536]; /* the partition's error_message */
    int32_t index[];    /* ST_PROD_MAX_RECORD_ERRORS: indices within the batch */
} st_prod_rejects_t;

typedef struct {
    uint8_t topic_id[16];
    int32_t partition;
    int owner;
    bool compact; /* the topic's cleanup.policy holds "compact": records need keys */
    uint8_t *records;
    int32_t len;
    int16_t error;
    const char *why;
    st_prod_rejects_t *rejects; /* INVALID_RECORD for keyless records, else NULL */
    st_kp_produce_resp_partition_response_t *out;
} st_prod_part_t;

typedef struct {
    st_xcall_t x;
    st_produce_t *p;
    int waiting; /* durability callbacks outstanding on the owner */
} st_prod_call_t;

struct st_produce {
    st_kreq_t *r;
    st_kp_produce_req_t req;
    st_kp_produce_resp_t resp;
    int nparts;
    st_prod_part_t *parts;
    st_prod_call_t *calls;
    int pending;
};

typedef struct {
    st_kshard_t *s;
    st_prod_call_t *c; /* NULL: only moving the high watermark */
    st_prod_part_t *pp;
    st_part_t *part;
} st_prod_wait_t;

static void st_prod_durable(void *arg, int res)
{
    st_prod_wait_t *w = arg;
    st_part_t *part = w->part;
    part->pending_durable--;
    if (res && w->pp) {
        w->pp->error = st_kerr_from(res);
        w->pp->why = st_strerror(res);
    }
    st_part_update_hw(w->s, part);
    st_part_maybe_free(part);
    st_prod_call_t *c = w->c;
    st_kshard_t *s = w->s;
    free(w);
    if (c && --c->waiting == 0)
        st_xcall_return(s, &c->x);
}

/* Idempotence: checks the producer ids and sequences of the batches about to be appended.
 * Returns ST_PSTATE_APPEND, ST_PSTATE_DUPLICATE (a retry of a batch already in the log: *dup
 * holds where it went), or a negative Kafka error code. Batches without a producer id pass. */
static int st_prod_check_idempotence(st_part_t *part, const uint8_t *p, size_t n, st_pbatch_t *dup,
                                     const char **why)
{
    int nbatches = 0, verdict = ST_PSTATE_APPEND;
    int64_t pid = -1;
    int16_t epoch = -1;
    int32_t next_seq = 0;
    while (n >= ST_BATCH_HEADER_SIZE) {
        st_batch_hdr_t h;
        if (st_batch_parse_hdr(p, n, &h) || st_batch_size(&h) > (int64_t)n)
            return ST_PSTATE_APPEND; /* malformed: st_log_append refuses it with the reason */
        if (h.attributes & ST_BATCH_ATTR_TRANSACTIONAL) {
            *why = "transactions are not supported";
            return -ST_KERR_INVALID_REQUEST;
        }
        int32_t last = st_pstate_seq_add(h.base_sequence, h.last_offset_delta);
        if (h.producer_id >= 0 && nbatches == 0) {
            verdict = st_pstate_check(&part->pstate, h.producer_id, h.producer_epoch,
                                      h.base_sequence, last, dup);
            pid = h.producer_id;
            epoch = h.producer_epoch;
        } else if (h.producer_id >= 0 || pid >= 0) {
            /* Later batches of one request continue the first one's sequence. */
            if (h.producer_id != pid || h.producer_epoch != epoch || h.base_sequence != next_seq ||
                verdict != ST_PSTATE_APPEND)
                return -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
        }
        if (verdict < 0)
            return verdict;
        next_seq = st_pstate_seq_add(last, 1);
        nbatches++;
        p += st_batch_size(&h);
        n -= (size_t)st_batch_size(&h);
    }
    return verdict;
}

/* Records the producer state of batches just appended at base_offset. */
static void st_prod_record_idempotence(st_part_t *part, const uint8_t *p, size_t n,
                                       int64_t base_offset)
{
    int64_t now = -1;
    while (n >= ST_BATCH_HEADER_SIZE) {
        st_batch_hdr_t h;
        if (st_batch_parse_hdr(p, n, &h) || st_batch_size(&h) > (int64_t)n)
            return;
        if (h.producer_id >= 0) {
            int32_t last = st_pstate_seq_add(h.base_sequence, h.last_offset_delta);
            if (now < 0)
                now = st_wall_ms();
            st_pstate_record(&part->pstate, h.producer_id, h.producer_epoch, h.base_sequence, last,
                             base_offset, base_offset + h.last_offset_delta, now);
        }
        base_offset += (int64_t)h.last_offset_delta + 1;
        p += st_batch_size(&h);
        n -= (size_t)st_batch_size(&h);
    }
}

typedef struct {
    int32_t index; /* records walked in the current batch */
    st_prod_rejects_t *rej;
} st_prod_keys_t;

static int st_prod_key_seen(void *arg, const st_batch_record_t *rec)
{
    st_prod_keys_t *k = arg;
    int32_t i = k->index++;
    if (rec->key_len >= 0)
        return 0;
    if (!k->rej) {
        k->rej = calloc(1, sizeof *k->rej + ST_PROD_MAX_RECORD_ERRORS * sizeof k->rej->index[0]);
        if (!k->rej)
            return -ENOMEM;
    }
    if (k->rej->listed < ST_PROD_MAX_RECORD_ERRORS)
        k->rej->index[k->rej->listed++] = i;
    k->rej->total++;
    return 0;
}

/* Whether every batch of the input passes the append's own checks. */
static bool st_prod_batches_valid(const uint8_t *p, size_t n, int64_t max_bytes)
{
    while (n > 0) {
        st_batch_hdr_t h;
        if (st_batch_validate_client(p, n, max_bytes, &h, NULL))
            return false;
        p += st_batch_size(&h);
        n -= (size_t)st_batch_size(&h);
    }
    return true;
}

/* Kafka's texts for the keyless records of a compacted topic (LogValidator), one per record and
 * the partition's summary of the first three. */
static void st_prod_rejects_explain(st_prod_rejects_t *rej, const st_part_t *part)
{
    snprintf(rej->message, sizeof rej->message,
             "Compacted topic cannot accept message without key in topic partition %s-%d.",
             part->topic, part->index);
    int k = snprintf(rej->summary, sizeof rej->summary,
                     "One or more records have been rejected due to %d record errors in total, "
                     "and only showing the first three errors at most: [",
                     rej->total);
    for (int i = 0; i < rej->listed && i < 3 && k >= 0 && (size_t)k < sizeof rej->summary; i++)
        k += snprintf(rej->summary + k, sizeof rej->summary - (size_t)k,
                      "%sRecordError(batchIndex=%d, message='%s')", i ? ", " : "", rej->index[i],
                      rej->message);
    if (k >= 0 && (size_t)k < sizeof rej->summary)
        snprintf(rej->summary + k, sizeof rej->summary - (size_t)k, "]");
}

/*
 * Compacted topics: refuses the append if any record lacks a key. Walks the batches in order
 * and stops after the first that holds keyless records; its records' indices (counted within
 * it, as Kafka does) go to pp->rejects. Returns 0 to go on with the append, or a negative
 * Kafka error code. Input that the append refuses on its own (bad CRC, size, counts, codec...)
 * is left to it, so such a batch gets the error Kafka checks first whatever its keys.
 */
static int st_prod_check_keys(st_part_t *part, st_prod_part_t *pp)
{
    const uint8_t *p = pp->records;
    size_t n = (size_t)pp->len;
    int64_t max_bytes = st_log_config(part->log)->max_message_bytes;
    st_prod_keys_t k = {0, NULL};
    while (n > 0 && !k.rej) {
        st_batch_hdr_t h;
        if (st_batch_check(p, n, &h))
            return 0;
        k.index = 0;
        int rc = st_batch_walk(p, (size_t)st_batch_size(&h), ST_BATCH_INFLATE_FACTOR * max_bytes,
                               st_prod_key_seen, &k);
        if (rc) {
            free(k.rej);
            if (rc == -ENOMEM) {
                pp->why = "out of memory";
                return -ST_KERR_UNKNOWN_SERVER_ERROR;
            }
            return 0; /* records that do not walk do not validate either */
        }
        p += st_batch_size(&h);
        n -= (size_t)st_batch_size(&h);
    }
    if (!k.rej)
        return 0;
    if (!st_prod_batches_valid(pp->records, (size_t)pp->len, max_bytes)) {
        free(k.rej);
        return 0;
    }
    st_prod_rejects_explain(k.rej, part);
    ST_DEBUG("produce to %s-%d refused: %s", part->topic, part->index, k.rej->summary);
    pp->rejects = k.rej;
    return -ST_KERR_INVALID_RECORD;
}

static void st_prod_append_one(st_kshard_t *s, st_prod_call_t *c, st_prod_part_t *pp, int16_t acks)
{
    st_part_t *part = st_parts_get(&s->parts, pp->topic_id, pp->partition);
    if (!part || !part->log) { /* a partition without a log is offline */
        pp->error = part ? ST_KERR_KAFKA_STORAGE_ERROR : ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
        return;
    }
    if (!pp->records || pp->len <= 0) {
        pp->error = ST_KERR_INVALID_REQUEST;
        pp->why = "no records";
        return;
    }
    if (pp->compact) {
        int err = st_prod_check_keys(part, pp);
        if (err < 0) {
            pp->error = (int16_t)-err;
            return;
        }
    }
    st_pbatch_t dup;
    int verdict = st_prod_check_idempotence(part, pp->records, (size_t)pp->len, &dup, &pp->why);
    if (verdict < 0) {
        pp->error = (int16_t)-verdict;
        return;
    }
    int64_t last_offset;
    if (verdict == ST_PSTATE_DUPLICATE) {
        /* A retry of a batch already written: answer where it went, write nothing. */
        pp->out->base_offset = dup.first_offset;
        pp->out->log_start_offset = st_log_start_offset(part->log);
        last_offset = dup.last_offset;
    } else {
        st_log_append_info_t info;
        st_batch_verdict_t v = {0};
        int rc = st_log_append(part->log, pp->records, (size_t)pp->len, (int32_t)0, &info, &v);
        if (rc) {
            pp->error = st_kerr_from(rc);
            if (rc == ST_E_TRUNCATED)
                pp->error = ST_KERR_CORRUPT_MESSAGE;
            if (rc == ST_E_TOO_LARGE && pp->len > st_log_config(part->log)->segment_bytes)
                pp->error = ST_KERR_RECORD_LIST_TOO_LARGE;
            pp->why = v.why ? v.why : st_strerror(rc);
            ST_DEBUG("produce to %s-%d refused: %s", part->topic, part->index, pp->why);
            return;
        }
        st_prod_record_idempotence(part, pp->records, (size_t)pp->len, info.base_offset);
        part->records_in += (uint64_t)info.records;
        part->bytes_in += (uint64_t)pp->len;
        st_kstats_appended(s, (uint64_t)pp->len);
        pp->out->base_offset = info.base_offset;
        pp->out->log_append_time_ms = info.log_append_time;
        pp->out->log_start_offset = info.log_start_offset;
        last_offset = info.last_offset;
    }
    st_prod_wait_t *w = malloc(sizeof *w);
    if (!w) {
        pp->error = ST_KERR_UNKNOWN_SERVER_ERROR;
        return;
    }
    *w = (st_prod_wait_t){s, acks != 0 ? c : NULL, acks != 0 ? pp : NULL, part};
    int rc = st_log_wait_durable(part->log, last_offset + 1, st_prod_durable, w);
    if (rc == 0) {
        part->pending_durable++;
        if (w->c)
            c->waiting++;
        return;
    }
    free(w);
    if (rc < 0 && acks != 0) {
        pp->error = st_kerr_from(rc);
        pp->why = st_strerror(rc);
    }
    st_part_update_hw(s, part);
}

static void st_prod_call_run(st_kshard_t *s, st_xcall_t *x)
{
    st_prod_call_t *c = (st_prod_call_t *)x;
    st_produce_t *p = c->p;
    c->waiting = 1; /* held while appending */
    for (int i = 0; i < p->nparts; i++)
        if (p->parts[i].owner == s->id && !p->parts[i].error)
            st_prod_append_one(s, c, &p->parts[i], p->req.acks);
    if (--c->waiting == 0)
        st_xcall_return(s, x);
}

/* Copies the owner's list of refused records into the response (the request's arena). */
static void st_prod_answer_rejects(st_kreq_t *r, st_prod_part_t *pp)
{
    st_prod_rejects_t *rej = pp->rejects;
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

static void st_prod_finish(st_produce_t *p)
{
    st_kreq_t *r = p->r;
    free(p->calls);
    for (int i = 0; i < p->nparts; i++) {
        st_prod_part_t *pp = &p->parts[i];
        if (pp->rejects)
            st_prod_answer_rejects(r, pp);
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
    ST_KREQ_RESPOND(r, produce, &p->resp);
}

static void st_prod_call_done(st_kshard_t *s, st_xcall_t *x)
{
    st_prod_call_t *c = (st_prod_call_t *)x;
    (void)s;
    if (--c->p->pending == 0)
        st_prod_finish(c->p);
}

/* Resolves topics against this shard's snapshot and sends each owner its partitions. */
static void st_prod_dispatch(st_kreq_t *r, void *arg)
{
    st_produce_t *p = arg;
    const st_md_t *md = r->shard->md;
    const st_tcfg_desc_t *policy = st_tcfg_find("cleanup.policy", 14);
    int k = 0;
    for (int t = 0; t < p->req.topic_data_count; t++) {
        st_kp_produce_req_topic_data_t *qt = &p->req.topic_data[t];
        const st_md_topic_t *mt = r->api_version >= 13 ? st_md_find_id(md, qt->topic_id.b)
                                                       : st_md_find(md, qt->name.ptr, qt->name.len);
        char buf[64];
        bool compact =
            mt && strstr(st_tcfg_value(r->shard->b->cfg, mt, policy, buf, sizeof buf, NULL),
                         "compact") != NULL;
        for (int i = 0; i < qt->partition_data_count; i++) {
            st_prod_part_t *pp = &p->parts[k++];
            pp->compact = compact;
            pp->owner = st_kshard_owner(mt, pp->partition);
            if (mt)
                memcpy(pp->topic_id, mt->id, 16);
            if (pp->owner < 0 && !pp->error) {
                char msg[200];
                if (r->api_version < 13 && qt->name.len >= 0 &&
                    st_topic_name_check(qt->name.ptr, (size_t)qt->name.len, msg, sizeof msg))
                    pp->error = ST_KERR_INVALID_TOPIC_EXCEPTION;
                else
                    pp->error = mt || r->api_version < 13 ? ST_KERR_UNKNOWN_TOPIC_OR_PARTITION
                                                          : ST_KERR_UNKNOWN_TOPIC_ID;
            }
            if (mt && mt->internal && !pp->error) {
                pp->error = ST_KERR_INVALID_TOPIC_EXCEPTION;
                pp->why = "cannot produce to an internal topic";
            }
        }
    }
    int nshards = r->shard->b->nshards;
    p->calls = calloc((size_t)nshards, sizeof *p->calls);
    if (!p->calls) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    p->pending = 1;
    for (int i = 0; i < p->nparts; i++) {
        st_prod_part_t *pp = &p->parts[i];
        if (pp->error || pp->owner < 0 || p->calls[pp->owner].p)
            continue;
        p->calls[pp->owner].p = p;
        p->pending++;
        st_xcall(r->shard, pp->owner, &p->calls[pp->owner].x, st_prod_call_run, st_prod_call_done);
    }
    if (--p->pending == 0)
        st_prod_finish(p);
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
    int total = 0;
    for (int t = 0; t < p->req.topic_data_count; t++)
        total += p->req.topic_data[t].partition_data_count;
    p->parts = st_arena_zalloc(&r->arena, (size_t)total * sizeof *p->parts + 1);
    p->resp.responses =
        st_arena_zalloc(&r->arena, (size_t)p->req.topic_data_count * sizeof *p->resp.responses + 1);
    st_kstr_t *names =
        st_arena_zalloc(&r->arena, (size_t)p->req.topic_data_count * sizeof *names + 1);
    if (!p->parts || !p->resp.responses || !names) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    p->resp.responses_count = p->req.topic_data_count;
    int k = 0;
    for (int t = 0; t < p->req.topic_data_count; t++) {
        st_kp_produce_req_topic_data_t *qt = &p->req.topic_data[t];
        st_kp_produce_resp_response_t *rt = &p->resp.responses[t];
        names[t] = qt->name;
        rt->name = qt->name;
        rt->topic_id = qt->topic_id;
        rt->partition_responses_count = qt->partition_data_count;
        rt->partition_responses = st_arena_zalloc(
            &r->arena, (size_t)qt->partition_data_count * sizeof *rt->partition_responses + 1);
        if (!rt->partition_responses) {
            st_kreq_fail(r, "out of memory");
            return;
        }
        for (int i = 0; i < qt->partition_data_count; i++) {
            st_kp_produce_req_partition_data_t *qp = &qt->partition_data[i];
            st_prod_part_t *pp = &p->parts[k++];
            st_kp_produce_resp_partition_response_init(&rt->partition_responses[i]);
            rt->partition_responses[i].index = qp->index;
            pp->out = &rt->partition_responses[i];
            pp->partition = qp->index;
            pp->records = (uint8_t *)qp->records.ptr;
            pp->len = qp->records.len;
            if (p->req.acks != 0 && p->req.acks != 1 && p->req.acks != -1)
                pp->error = ST_KERR_INVALID_REQUIRED_ACKS;
            else if (!st_kstr_is_null(p->req.transactional_id))
                pp->error = ST_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        }
    }
    p->nparts = k;
    if (r->api_version < 13 && r->shard->b->cfg->auto_create_topics_enable)
        st_autocreate(r, names, p->req.topic_data_count, st_prod_dispatch, p);
    else
        st_prod_dispatch(r, p);
}
