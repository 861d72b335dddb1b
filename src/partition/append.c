/*
 * append.c — the one way records enter a partition, and DeleteRecords.
 *
 *   st_part_append: compacted log? every record needs a key (refused: INVALID_RECORD with the
 *   keyless records listed) -> idempotent producers: a duplicate is answered with where it
 *   went, out-of-order or fenced is refused -> st_log_append (validates each batch, assigns
 *   offsets and the leader epoch) -> the producers recorded -> wait until durable (group
 *   commit) -> high watermark moves, waiting fetches wake -> done() when acks asked for it.
 *
 * Input the log refuses on its own (bad CRC, size, counts, codec) is left to it, so such a
 * batch gets the error Kafka checks first whatever its keys or producer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "partition/partition.h"
#include "partition/part_impl.h"
#include "proto/kerr.h"

/* Idempotence: checks the producer ids and sequences of the batches about to be appended.
 * Returns ST_PSTATE_APPEND, ST_PSTATE_DUPLICATE (a retry of a batch already in the log: *dup
 * holds where it went), or a negative Kafka error code. Batches without a producer id pass. */
/* Whether a gap of producer pid gets the grace (check_producers): this partition leads since
 * less than ST_PART_GAP_GRACE_MS, and the producer's state is the previous leader's (its last
 * batch before this leadership's first offset). A producer that already wrote to this leader
 * and leaves a gap is answered as Kafka answers it. */
static bool gap_grace(const st_part_t *part, int64_t pid)
{
    const st_part_repl_t *r = &part->repl;
    return r->on && r->role.leader && st_mono_ms() - r->leader_since_ms < ST_PART_GAP_GRACE_MS &&
           st_pstate_last_offset(&part->pstate, pid) < r->epoch_start;
}

/* At debug: what an OUT_OF_ORDER_SEQUENCE_NUMBER was decided on (the batch's producer,
 * epoch and sequences against what the partition knows of that producer). */
static void debug_out_of_order(const st_part_t *part, const uint8_t *p, size_t n)
{
    st_batch_hdr_t h;
    if (st_log_get_level() > ST_LOG_DEBUG || n < ST_BATCH_HEADER_SIZE ||
        st_batch_parse_hdr(p, n, &h))
        return;
    const st_pentry_t *e = st_pstate_find(&part->pstate, h.producer_id);
    ST_DEBUG("produce to %s-%d refused OUT_OF_ORDER_SEQUENCE_NUMBER: producer %lld epoch %d seq "
             "%d..%d; known: %s epoch %d, %d batch(es), last seq %d at offset %lld, "
             "transaction from %lld",
             part->topic, part->index, (long long)h.producer_id, h.producer_epoch, h.base_sequence,
             h.base_sequence + h.last_offset_delta, e ? "yes" : "no", e ? e->epoch : -1,
             e ? e->nbatches : 0, e && e->nbatches ? e->batches[e->nbatches - 1].last_seq : -1,
             e && e->nbatches ? (long long)e->batches[e->nbatches - 1].last_offset : -1LL,
             e ? (long long)e->txn_first : -1LL);
}

static int check_producers(st_part_t *part, const uint8_t *p, size_t n, st_pbatch_t *dup,
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
        bool txn = (h.attributes & ST_BATCH_ATTR_TRANSACTIONAL) != 0;
        if (txn && h.producer_id < 0) {
            *why = "a transactional batch without a producer id";
            return -ST_KERR_INVALID_RECORD;
        }
        int32_t last = h.base_sequence < 0 && txn
                           ? -1
                           : st_pstate_seq_add(h.base_sequence, h.last_offset_delta);
        if (h.producer_id >= 0 && nbatches == 0) {
            verdict = st_pstate_check_batch(&part->pstate, h.producer_id, h.producer_epoch,
                                            h.base_sequence, last, txn, dup);
            if (verdict == -ST_KERR_INVALID_TXN_STATE)
                *why = "a non-transactional batch while the producer's transaction is ongoing";
            int16_t refused =
                verdict == -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER
                    ? st_pstate_refused_gap(&part->pstate, h.producer_id, h.producer_epoch,
                                            h.base_sequence, st_mono_ms())
                    : 0;
            if (refused) {
                verdict = -refused;
                *why = "the producer's batch before this one was refused: retry it first";
            } else if (verdict == -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER &&
                       gap_grace(part, h.producer_id)) {
                /* Early in a leadership a gap after what the previous leader wrote is most
                 * likely batches still on their way from the producer's failover (refused by a view
                 * of the metadata not yet caught up, before they reached this partition):
                 * librdkafka takes the gap, after timeouts, as fatal. NOT_LEADER_OR_FOLLOWER has it
                 * refresh and send them again in order; a gap that outlives the grace is answered
                 * as Kafka does. */
                verdict = -ST_KERR_NOT_LEADER_OR_FOLLOWER;
                *why = "a gap before this batch early in this leadership: send the earlier "
                       "batches again first";
            }
            pid = h.producer_id;
            epoch = h.producer_epoch;
        } else if (h.producer_id >= 0 || pid >= 0) {
            /* Later batches of one request continue the first one's sequence. */
            if (h.producer_id != pid || h.producer_epoch != epoch ||
                (h.base_sequence != next_seq && !(txn && h.base_sequence < 0)) ||
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

/* A marker at `offset` (the log holds it): ends the producer's transaction; an abort of one
 * with records goes into the .txnindex with the LSO it leaves (Kafka's: the first offset of
 * the next ongoing transaction, else the marker + 1). */
void st_part_note_marker(st_part_t *part, int64_t pid, int16_t epoch, bool commit,
                         int32_t coordinator_epoch, int64_t offset, int64_t ts)
{
    int64_t first;
    part->marker_gen[(uint64_t)pid % ST_PART_VERIFY_BUCKETS]++;
    if (st_pstate_end_txn(&part->pstate, pid, epoch, coordinator_epoch, offset, ts, &first) < 0)
        ST_WARN("%s-%d: out of memory for the producer state", part->topic, part->index);
    if (commit || first < 0)
        return;
    int64_t next = st_pstate_first_ongoing(&part->pstate, -1);
    st_txn_aborted_t a = {pid, first, offset, next >= 0 ? next : offset + 1};
    int rc = st_log_txn_add(part->log, &a);
    if (rc < 0)
        ST_WARN("%s-%d: cannot record the aborted transaction at %lld: %s", part->topic,
                part->index, (long long)offset, st_strerror(rc));
}

/* Records the producer state of batches just appended at base_offset (markers included: a
 * follower's, or the leader's own). */
static void record_producers(st_part_t *part, const uint8_t *p, size_t n, int64_t base_offset)
{
    int64_t now = -1;
    while (n >= ST_BATCH_HEADER_SIZE) {
        st_batch_hdr_t h;
        if (st_batch_parse_hdr(p, n, &h) || st_batch_size(&h) > (int64_t)n)
            return;
        bool txn = (h.attributes & ST_BATCH_ATTR_TRANSACTIONAL) != 0;
        if (now < 0 && h.producer_id >= 0)
            now = st_wall_ms();
        int16_t type;
        int32_t cepoch;
        if (h.producer_id >= 0 && (h.attributes & ST_BATCH_ATTR_CONTROL)) {
            if (st_batch_control_parse(p, (size_t)st_batch_size(&h), &type, &cepoch) == 0)
                st_part_note_marker(part, h.producer_id, h.producer_epoch,
                                    type == ST_CONTROL_COMMIT, cepoch, base_offset, now);
        } else if (h.producer_id >= 0) {
            int32_t last = txn && h.base_sequence < 0
                               ? -1
                               : st_pstate_seq_add(h.base_sequence, h.last_offset_delta);
            st_pstate_record_batch(&part->pstate, h.producer_id, h.producer_epoch, h.base_sequence,
                                   last, base_offset, base_offset + h.last_offset_delta, now, txn);
        }
        base_offset += (int64_t)h.last_offset_delta + 1;
        p += st_batch_size(&h);
        n -= (size_t)st_batch_size(&h);
    }
}

typedef struct {
    int32_t index; /* records walked in the current batch */
    st_part_rejects_t *rej;
} keys_t;

static int key_seen(void *arg, const st_batch_record_t *rec)
{
    keys_t *k = arg;
    int32_t i = k->index++;
    if (rec->key_len >= 0)
        return 0;
    if (!k->rej) {
        k->rej = calloc(1, sizeof *k->rej + ST_PART_MAX_RECORD_ERRORS * sizeof k->rej->index[0]);
        if (!k->rej)
            return -ENOMEM;
    }
    if (k->rej->listed < ST_PART_MAX_RECORD_ERRORS)
        k->rej->index[k->rej->listed++] = i;
    k->rej->total++;
    return 0;
}

/* Kafka's texts for the keyless records of a compacted topic (LogValidator), one per record and
 * the partition's summary of the first three. */
static void explain_rejects(st_part_rejects_t *rej, const st_part_t *part)
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
 * The log refused the append of a compacted topic for a record without a key (ST_E_NO_KEY,
 * after every batch-level check passed, as Kafka's LogValidator orders them). Lists, for
 * KIP-467's record_errors, the keyless records of the first batch that holds any (indices
 * counted within it, as Kafka does). Returns the Kafka error code for the partition.
 */
static int16_t list_keyless(st_part_t *part, const uint8_t *records, size_t len,
                            st_part_append_res_t *res)
{
    const uint8_t *p = records;
    size_t n = len;
    int64_t max_bytes = st_log_config(part->log)->max_message_bytes;
    keys_t k = {0, NULL};
    while (n > 0 && !k.rej) {
        st_batch_hdr_t h;
        if (st_batch_check(p, n, &h))
            break;
        k.index = 0;
        if (st_batch_walk(p, (size_t)st_batch_size(&h), ST_BATCH_INFLATE_FACTOR * max_bytes,
                          key_seen, &k) == -ENOMEM) {
            free(k.rej);
            res->why = "out of memory";
            return ST_KERR_UNKNOWN_SERVER_ERROR;
        }
        p += st_batch_size(&h);
        n -= (size_t)st_batch_size(&h);
    }
    if (k.rej) {
        explain_rejects(k.rej, part);
        ST_DEBUG("produce to %s-%d refused: %s", part->topic, part->index, k.rej->summary);
        res->rejects = k.rej;
    }
    return ST_KERR_INVALID_RECORD;
}

/* An append (or a DeleteRecords) waiting for its sync: holds the partition. */
typedef struct {
    st_part_t *part;
    st_part_done_fn done; /* NULL: only the high watermark waits (acks=0) */
    void *arg;
    int64_t offset;       /* DeleteRecords: the new log start */
    int32_t leader_epoch; /* DeleteRecords on a replicated leader: the leadership it began in */
    st_trace_ctx_t tc;    /* a sampled append's (span_id 0: none): its sync is a span */
    int64_t since_ns;     /* a sampled append: when its sync wait began */
} wait_t;

/* A sampled append's sync, as a span hanging from w->tc (trace.h). */
static void trace_sync(const wait_t *w, int res)
{
    st_span_t sp;
    st_span_init(&sp, &w->tc, st_trace_new_id(), "kafka.produce.sync", w->since_ns);
    st_span_attr_str(&sp, "messaging.destination.name", w->part->topic, -1);
    st_span_attr_int(&sp, "messaging.destination.partition.id", w->part->index);
    st_span_attr_int(&sp, "strata.durable_offset", w->offset);
    if (res) {
        sp.error = true;
        st_span_attr_int(&sp, "strata.error", res);
    }
    st_span_end(&sp, st_mono_ns());
}

static void on_durable(void *arg, int res)
{
    wait_t *w = arg;
    if (w->tc.span_id)
        trace_sync(w, res);
    st_part_t *part = w->part;
    st_part_done_fn done = w->done;
    void *done_arg = w->arg;
    free(w);
    part->pending_durable--;
    st_part_update_hw(part);
    st_part_maybe_free(part);
    if (done)
        done(done_arg, res);
}

/* Whether a DeleteRecords to `offset` must wait for the replicas' log starts. */
static bool needs_replicas(st_part_t *p, int64_t offset)
{
    return p->repl.on && p->repl.role.leader && st_part_low_watermark(p) < offset;
}

/* The new log start of a DeleteRecords is durable here: on a replicated leader it waits for
 * the replicas next. */
static void on_start_durable(void *arg, int res)
{
    wait_t *w = arg;
    st_part_t *part = w->part;
    /* the leadership ended meanwhile: the new leader may not have the new start */
    const st_part_repl_t *r = &part->repl;
    if (res == 0 && !part->dead && r->on &&
        (!r->role.leader || r->role.leader_epoch != w->leader_epoch))
        res = ST_E_NOT_LEADER;
    if (res == 0 && !part->dead && needs_replicas(part, w->offset) &&
        st_part_delete_wait(part, w->offset, ST_PART_DELETE_WAIT_MS, w->done, w->arg) == 0) {
        free(w);
        part->pending_durable--;
        return;
    }
    on_durable(arg, res);
}

static bool append(st_part_t *p, uint8_t *records, size_t len, st_acks_t acks, int64_t timeout_ms,
                   const st_trace_ctx_t *tc, st_part_append_res_t *res, st_part_done_fn done,
                   void *arg);

bool st_part_append_traced(st_part_t *p, uint8_t *records, size_t len, st_acks_t acks,
                           int64_t timeout_ms, const st_trace_ctx_t *tc, st_part_append_res_t *res,
                           st_part_done_fn done, void *arg)
{
    bool later = append(p, records, len, acks, timeout_ms, tc, res, done, arg);
    if (res->error && !res->err)
        res->err = ST_E_INVALID;
    return later;
}

bool st_part_append_timed(st_part_t *p, uint8_t *records, size_t len, st_acks_t acks,
                          int64_t timeout_ms, st_part_append_res_t *res, st_part_done_fn done,
                          void *arg)
{
    return st_part_append_traced(p, records, len, acks, timeout_ms, NULL, res, done, arg);
}

bool st_part_append(st_part_t *p, uint8_t *records, size_t len, st_acks_t acks,
                    st_part_append_res_t *res, st_part_done_fn done, void *arg)
{
    return st_part_append_timed(p, records, len, acks, -1, res, done, arg);
}

static bool wait_acks(st_part_t *p, st_acks_t acks, int64_t last_offset, int64_t timeout_ms,
                      const st_trace_ctx_t *tc, st_part_append_res_t *res, st_part_done_fn done,
                      void *arg);

/* Whether this replica may append now (online, leads, enough in sync for acks=all); fills
 * res's error otherwise. */
static bool may_append(st_part_t *p, st_acks_t acks, st_part_append_res_t *res)
{
    *res = (st_part_append_res_t){0};
    if (!p->log) { /* offline */
        res->error = ST_KERR_KAFKA_STORAGE_ERROR;
        res->err = ST_E_CLOSED;
        return false;
    }
    const st_part_repl_t *r = &p->repl;
    if (r->on && !r->role.leader) {
        res->error = ST_KERR_NOT_LEADER_OR_FOLLOWER;
        res->err = ST_E_NOT_LEADER;
        res->why = "this broker does not lead the partition";
        return false;
    }
    if (r->on && acks == ST_ACKS_ALL && r->role.nisr < r->role.min_isr) {
        res->error = ST_KERR_NOT_ENOUGH_REPLICAS;
        res->err = ST_E_FEW_REPLICAS;
        res->why = "fewer in-sync replicas than min.insync.replicas";
        return false;
    }
    return true;
}

bool st_part_write_marker(st_part_t *p, int64_t pid, int16_t epoch, bool commit,
                          int32_t coordinator_epoch, int64_t timeout_ms, st_part_append_res_t *res,
                          st_part_done_fn done, void *arg)
{
    if (!may_append(p, ST_ACKS_ALL, res))
        return false;
    int v = st_pstate_check_marker(&p->pstate, pid, epoch, coordinator_epoch);
    if (v < 0) {
        res->error = (int16_t)-v;
        res->err = ST_E_INVALID;
        res->why = v == -ST_KERR_INVALID_PRODUCER_EPOCH
                       ? "the marker's producer epoch is older than the producer's"
                       : "the marker's coordinator epoch is older than one already seen";
        return false;
    }
    uint8_t b[ST_BATCH_CONTROL_SIZE];
    int64_t now = st_wall_ms();
    st_batch_control_build(b, pid, epoch, commit, coordinator_epoch, now);
    st_log_append_info_t info;
    int rc = st_log_append_control(p->log, b, sizeof b, p->repl.on ? p->repl.role.leader_epoch : 0,
                                   &info);
    if (rc) {
        res->err = rc;
        res->error = st_kerr_from(rc);
        res->why = st_strerror(rc);
        return false;
    }
    st_part_note_marker(p, pid, epoch, commit, coordinator_epoch, info.base_offset, now);
    st_part_appended(p);
    p->bytes_in += sizeof b;
    res->appended_bytes = sizeof b;
    res->base_offset = info.base_offset;
    res->log_append_time = -1;
    res->log_start_offset = info.log_start_offset;
    return wait_acks(p, ST_ACKS_ALL, info.last_offset, timeout_ms, NULL, res, done, arg);
}

/* A refusal of the producer batch leading records for a reason that passes, noted so that the
 * batches pipelined behind it are refused alike rather than out of order (producer_state.h). */
static void note_refused(st_part_t *p, const uint8_t *records, size_t len, int16_t error)
{
    st_batch_hdr_t h;
    if (error != ST_KERR_NOT_ENOUGH_REPLICAS && error != ST_KERR_KAFKA_STORAGE_ERROR)
        return;
    if (!records || len < ST_BATCH_HEADER_SIZE || st_batch_parse_hdr(records, len, &h) ||
        h.producer_id < 0 || h.base_sequence < 0)
        return;
    st_pstate_note_refused(&p->pstate, h.producer_id, h.producer_epoch, h.base_sequence, error,
                           st_mono_ms());
}

static bool append(st_part_t *p, uint8_t *records, size_t len, st_acks_t acks, int64_t timeout_ms,
                   const st_trace_ctx_t *tc, st_part_append_res_t *res, st_part_done_fn done,
                   void *arg)
{
    if (!may_append(p, acks, res)) {
        if (p->log)
            note_refused(p, records, len, res->error);
        return false;
    }
    if (!records || len == 0) {
        res->error = ST_KERR_INVALID_REQUEST;
        res->why = "no records";
        return false;
    }
    const st_part_repl_t *r = &p->repl;
    st_pbatch_t dup;
    int verdict = check_producers(p, records, len, &dup, &res->why);
    if (verdict < 0) {
        res->error = (int16_t)-verdict;
        if (verdict == -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER)
            debug_out_of_order(p, records, len);
        return false;
    }
    int64_t last_offset;
    if (verdict == ST_PSTATE_DUPLICATE) {
        /* A retry of a batch already written: answer where it went, write nothing. */
        res->base_offset = dup.first_offset;
        res->log_append_time = -1; /* as the response's default */
        res->log_start_offset = st_log_start_offset(p->log);
        last_offset = dup.last_offset;
    } else {
        st_log_append_info_t info;
        st_batch_verdict_t v = {0};
        int rc = st_log_append(p->log, records, len, r->on ? r->role.leader_epoch : 0, &info, &v);
        if (rc) {
            res->err = rc;
            res->error = st_kerr_from(rc);
            if (rc == ST_E_TRUNCATED)
                res->error = ST_KERR_CORRUPT_MESSAGE;
            if (rc == ST_E_TOO_LARGE && (int64_t)len > st_log_config(p->log)->segment_bytes)
                res->error = ST_KERR_RECORD_LIST_TOO_LARGE;
            res->why = v.why ? v.why : st_strerror(rc);
            if (rc == ST_E_NO_KEY)
                res->error = list_keyless(p, records, len, res);
            note_refused(p, records, len, res->error);
            ST_DEBUG("produce to %s-%d refused: %s", p->topic, p->index, res->why);
            return false;
        }
        record_producers(p, records, len, info.base_offset);
        st_part_appended(p); /* the followers fetch it now, while it syncs here */
        p->records_in += (uint64_t)info.records;
        p->bytes_in += (uint64_t)len;
        res->appended_bytes = (int64_t)len;
        res->base_offset = info.base_offset;
        res->log_append_time = info.log_append_time;
        res->log_start_offset = info.log_start_offset;
        last_offset = info.last_offset;
    }
    return wait_acks(p, acks, last_offset, timeout_ms, tc, res, done, arg);
}

/* Waits for an append ending at last_offset as acks asks (see st_part_append's return). */
static bool wait_acks(st_part_t *p, st_acks_t acks, int64_t last_offset, int64_t timeout_ms,
                      const st_trace_ctx_t *tc, st_part_append_res_t *res, st_part_done_fn done,
                      void *arg)
{
    const st_part_repl_t *r = &p->repl;
    /* The seam of acks: ST_ACKS_ALL waits for the high watermark, which in a cluster is where
     * every ISR member has the batch on disk (replica.c); where this replica is the only one
     * (a single broker, a topic of replication factor 1, or no role) the ISR is this replica
     * alone, so it waits, like ST_ACKS_LEADER, for the flush policy's durability, and a failed
     * sync answers it at once. */
    bool answer = acks != ST_ACKS_NONE;
    bool over_isr = answer && acks == ST_ACKS_ALL && r->on && r->role.nreplicas > 1;
    wait_t *w = malloc(sizeof *w);
    if (!w) {
        res->error = ST_KERR_UNKNOWN_SERVER_ERROR;
        res->err = -ENOMEM;
        return false;
    }
    *w = (wait_t){p, answer && !over_isr ? done : NULL, arg, -1, -1, {{0}, 0}, 0};
    if (tc && tc->span_id) {
        w->tc = *tc;
        w->since_ns = st_mono_ns();
        w->offset = last_offset + 1;
    }
    int rc = st_log_wait_durable(p->log, last_offset + 1, on_durable, w);
    if (rc == 0)
        p->pending_durable++;
    else
        free(w);
    if (rc < 0) {
        if (answer) {
            res->err = rc;
            res->error = st_kerr_from(rc);
            res->why = st_strerror(rc);
        }
        st_part_update_hw(p);
        return false;
    }
    if (over_isr) {
        st_part_update_hw(p);
        if (p->hw > last_offset)
            return false; /* the ISR has it already (its size was checked before appending) */
        if (st_part_acks_all_wait(p, last_offset + 1, timeout_ms, done, arg)) {
            res->error = ST_KERR_UNKNOWN_SERVER_ERROR;
            res->err = -ENOMEM;
            return false;
        }
        res->waits_isr = true;
        return true;
    }
    if (rc == 0)
        return answer;
    st_part_update_hw(p);
    return false;
}

/* A log whose end is the leader's log start (follow.h R3 restarted it there, or the leader's
 * DeleteRecords reached exactly its end) gets, when that start falls inside a batch, that whole
 * batch first: the log starts again at the batch's base (Kafka's answer to
 * UnexpectedAppendOffsetException); nothing it drops is still in the leader's log, and the log
 * start moves back up to the leader's with the answer. ST_E_OUT_OF_RANGE for any other batch
 * that does not follow on. */
static int restart_for(st_part_t *p, const uint8_t *records, size_t len, int64_t leader_start)
{
    st_batch_hdr_t h;
    int64_t end = st_log_end_offset(p->log);
    bool nothing_kept = st_log_start_offset(p->log) == end || leader_start >= end;
    if (len < ST_BATCH_HEADER_SIZE || st_batch_parse_hdr(records, len, &h) || !nothing_kept ||
        h.base_offset >= end || st_batch_last_offset(&h) < end)
        return ST_E_OUT_OF_RANGE;
    return st_part_restart_at(p, h.base_offset);
}

int st_part_append_replica(st_part_t *p, const uint8_t *records, size_t len, int64_t leader_hw,
                           int64_t leader_log_start, st_part_done_fn done, void *arg)
{
    if (!p->log)
        return ST_E_CLOSED;
    if (!p->repl.on || p->repl.role.leader)
        return ST_E_INVALID; /* only a follower takes the leader's batches */
    st_log_append_info_t info;
    int rc = st_log_append_replica(p->log, records, len, &info);
    if (rc == ST_E_OUT_OF_RANGE && (rc = restart_for(p, records, len, leader_log_start)) == 0)
        rc = st_log_append_replica(p->log, records, len, &info);
    if (rc)
        return rc;
    record_producers(p, records, len, info.base_offset);
    p->repl.leader_hw = leader_hw;
    if (leader_log_start > p->repl.leader_start)
        p->repl.leader_start = leader_log_start;
    st_part_update_hw(p); /* which also moves the log start up to the leader's */
    wait_t *w = malloc(sizeof *w);
    if (!w)
        return -ENOMEM;
    *w = (wait_t){.part = p, .done = done, .arg = arg, .offset = -1, .leader_epoch = -1};
    rc = st_log_wait_durable(p->log, info.last_offset + 1, on_durable, w);
    if (rc == 0) {
        p->pending_durable++;
        return 0;
    }
    free(w);
    st_part_update_hw(p);
    if (rc < 0)
        return rc;
    done(arg, 0); /* durable already (write caching): the caller's callback, as promised */
    return 0;
}

bool st_part_delete_records(st_part_t *p, int64_t offset, int16_t *error, int64_t *low_watermark,
                            st_part_done_fn done, void *arg)
{
    *error = 0;
    int64_t off = offset == -1 ? p->hw : offset;
    if (off < 0 || off > p->hw) {
        *error = ST_KERR_OFFSET_OUT_OF_RANGE;
        return false;
    }
    int rc = st_log_set_start_offset(p->log, off);
    *low_watermark = st_log_start_offset(p->log);
    if (rc == 0) {
        wait_t *w = malloc(sizeof *w);
        if (!w) {
            *error = ST_KERR_KAFKA_STORAGE_ERROR;
            return false;
        }
        *w = (wait_t){.part = p,
                      .done = done,
                      .arg = arg,
                      .offset = off,
                      .leader_epoch = p->repl.on ? p->repl.role.leader_epoch : -1};
        rc = st_log_wait_start_durable(p->log, on_start_durable, w);
        if (rc == 0) {
            p->pending_durable++;
            return true;
        }
        free(w);
        rc = rc == 1 ? 0 : rc;
        if (rc == 0 && needs_replicas(p, off)) {
            rc = st_part_delete_wait(p, off, ST_PART_DELETE_WAIT_MS, done, arg);
            if (rc == 0)
                return true;
        }
    }
    if (rc)
        *error = st_kerr_from(rc);
    return false;
}
