/*
 * ops.c — the transaction coordinator's requests (InitProducerId, AddPartitionsToTxn and its
 * verify-only form, EndTxn), the markers and the completion they lead to, and the timeouts.
 * Each refusal is the one Kafka's TransactionCoordinator makes, in the order it checks.
 */
#include "txn/coord_impl.h"

#include "base/log.h"

/* A request waiting for its write. */
typedef struct txn_op {
    st_tresult_t *res;
    st_tcoord_done_fn done;
    void *arg;
} txn_op_t;

static void answer(st_tresult_t *res, int16_t error, st_tcoord_done_fn done, void *arg)
{
    res->error = error;
    if (error) {
        res->producer_id = TXN_NO_PID;
        res->producer_epoch = TXN_NO_EPOCH;
    }
    done(arg);
}

static txn_op_t *op_new(st_tresult_t *res, st_tcoord_done_fn done, void *arg)
{
    txn_op_t *op = malloc(sizeof *op);
    if (op)
        *op = (txn_op_t){res, done, arg};
    return op;
}

static void op_answer(txn_op_t *op, int16_t error, const txn_t *t)
{
    if (!op)
        return;
    if (!error && t) {
        op->res->producer_id = t->m.pid;
        op->res->producer_epoch = t->m.epoch;
    }
    answer(op->res, error, op->done, op->arg);
    free(op);
}

/* The next transition's metadata from t's: Kafka's prepareTransitionTo (the previous producer
 * id is the current one; the client's transaction version 0 unless the caller sets it). */
static int begin(st_tcoord_t *c, const txn_t *t, int state, bool keep_parts, txn_meta_t *to)
{
    txn_meta_t src = t->m;
    if (!keep_parts)
        src.nparts = 0;
    if (txn_meta_copy(to, &src))
        return -ENOMEM;
    to->prev_pid = t->m.pid;
    to->next_pid = TXN_NO_PID;
    to->client_tv = 0;
    to->state = state;
    to->update_ts = txn_now(c);
    return 0;
}

static bool serving(const st_tcoord_t *c, int32_t partition)
{
    return !c->closed && st_tcoord_loaded(c, partition);
}

/* ---- markers and completion ---- */

static void resume_parked(st_tcoord_t *c, const txn_t *t);

static void complete_written(st_tcoord_t *c, txn_t *t, int16_t error, void *arg)
{
    (void)arg;
    if (!error) {
        resume_parked(c, t);
        return;
    }
    if (error != ST_KERR_NOT_COORDINATOR) {
        t->complete_retry = true; /* the tick tries again */
        c->retries = true;
    }
    ST_WARN("%s-%d: completing the transaction of %.*s: %s", ST_TXN_TOPIC, t->partition,
            (int)t->id_len, t->id, st_kerr_name(error));
}

/* Kafka's prepareComplete: CompleteCommit/CompleteAbort, no partitions; with transactions v2
 * an epoch overflow moves to the next producer id now. */
static void write_complete(st_tcoord_t *c, txn_t *t)
{
    t->complete_retry = false;
    t->failed_fence = false;
    int state =
        t->m.state == ST_TXN_PREPARE_COMMIT ? ST_TXN_COMPLETE_COMMIT : ST_TXN_COMPLETE_ABORT;
    txn_meta_t to;
    if (begin(c, t, state, false, &to)) {
        t->complete_retry = true;
        c->retries = true;
        return;
    }
    to.client_tv = t->m.client_tv;
    to.last_epoch = t->m.epoch;
    if (t->m.client_tv >= 2 && t->m.next_pid != TXN_NO_PID) {
        to.pid = t->m.next_pid;
        to.epoch = 0;
    }
    txn_write(c, t, &to, false, complete_written, NULL);
}

void txn_send_markers(st_tcoord_t *c, txn_t *t)
{
    t->markers_retry = false;
    t->markers = c->next_job++;
    if (t->m.nparts == 0 || !c->cfg.send_markers) {
        st_tcoord_markers_done(c, t->markers, 0);
        return;
    }
    st_ttp_t *parts = calloc((size_t)t->m.nparts, sizeof *parts);
    if (!parts) {
        t->markers = 0;
        t->markers_retry = true; /* no markers sent: the tick starts again */
        c->retries = true;
        return;
    }
    for (int i = 0; i < t->m.nparts; i++)
        parts[i] =
            (st_ttp_t){{t->m.parts[i].topic, t->m.parts[i].topic_len}, t->m.parts[i].partition};
    st_tmarkers_t m = {
        .id = t->markers,
        .partition = t->partition,
        .coordinator_epoch = c->epochs[t->partition],
        .transactional_id = {t->id, t->id_len},
        .producer_id = t->m.pid,
        .producer_epoch = t->m.epoch,
        .commit = t->m.state == ST_TXN_PREPARE_COMMIT,
        .n = t->m.nparts,
        .parts = parts,
    };
    c->cfg.send_markers(c->cfg.ctx, &m);
    free(parts);
}

void st_tcoord_markers_done(st_tcoord_t *c, uint64_t id, int err)
{
    txn_t *found = NULL;
    for (int i = 0; i < TXN_BUCKETS && !found; i++)
        for (txn_t *t = c->buckets[i]; t && !found; t = t->next)
            if (t->markers == id)
                found = t;
    if (!found)
        return; /* unloaded meanwhile: the next coordinator sends them again */
    found->markers = 0;
    if (err) {
        ST_WARN("%s-%d: markers of %.*s not written (%s): sent again", ST_TXN_TOPIC,
                found->partition, (int)found->id_len, found->id, st_strerror(err));
        found->markers_retry = true; /* the next tick */
        c->retries = true;
        return;
    }
    if (found->m.state == ST_TXN_PREPARE_COMMIT || found->m.state == ST_TXN_PREPARE_ABORT)
        write_complete(c, found);
}

/* ---- EndTxn, and the aborts the coordinator starts itself ---- */

/* PrepareCommit/PrepareAbort is durable: answer, then send the markers (Kafka's
 * sendTxnMarkersCallback). */
static void prepared(st_tcoord_t *c, txn_t *t, int16_t error, void *arg)
{
    txn_op_t *op = arg;
    op_answer(op, error, t);
    if (!error)
        txn_send_markers(c, t);
}

/* PrepareCommit/PrepareAbort from Ongoing (Kafka's prepareAbortOrCommit). */
static void prepare_end(st_tcoord_t *c, txn_t *t, bool commit, int16_t client_tv, txn_write_fn cb,
                        txn_op_t *op)
{
    int64_t next_pid = TXN_NO_PID;
    if (client_tv >= 2 && txn_epoch_exhausted(t->m.epoch))
        next_pid = c->cfg.next_pid(c->cfg.ctx);
    txn_meta_t to;
    if (begin(c, t, commit ? ST_TXN_PREPARE_COMMIT : ST_TXN_PREPARE_ABORT, true, &to)) {
        cb(c, t, ST_KERR_COORDINATOR_NOT_AVAILABLE, op);
        return;
    }
    to.client_tv = client_tv;
    to.next_pid = next_pid;
    to.last_epoch = t->m.last_epoch;
    if (client_tv >= 2) {
        to.epoch = (int16_t)(t->m.epoch + 1);
        to.last_epoch = t->m.epoch;
    }
    txn_write(c, t, &to, false, cb, op);
}

/* The abort of a PrepareEpochFence: Kafka's prepareFenceProducerEpoch then endTransaction
 * (ABORT, not from the client): the epoch is bumped in memory at once (not again after a
 * fence whose write failed), and PrepareAbort is written at that epoch, fencing the old
 * producer. The only change made before its record is durable, as in Kafka. */
static void fence_written(st_tcoord_t *c, txn_t *t, int16_t error, void *arg)
{
    if (error)
        t->failed_fence = true;
    txn_op_t *op = arg;
    if (op) /* InitProducerId: the client retries once the abort is done */
        op_answer(op, error ? error : ST_KERR_CONCURRENT_TRANSACTIONS, NULL);
    if (!error)
        txn_send_markers(c, t);
}

static void fence_and_abort(st_tcoord_t *c, txn_t *t, txn_op_t *op)
{
    if (!t->failed_fence)
        t->m.epoch = (int16_t)(t->m.epoch + 1);
    t->m.last_epoch = TXN_NO_EPOCH;
    prepare_end(c, t, false, 0, fence_written, op);
}

/* Kafka's endTxnEpochBumped: with transactions v2 the stored epoch is the request's + 1. */
static bool epoch_bumped(const txn_t *t, int16_t epoch)
{
    return t->m.client_tv >= 2 && t->m.epoch == epoch + 1;
}

void st_tcoord_end(st_tcoord_t *c, int32_t partition, st_kstr_t id, int64_t pid, int16_t epoch,
                   bool commit, int16_t client_tv, st_tresult_t *res, st_tcoord_done_fn done,
                   void *arg)
{
    res->producer_id = TXN_NO_PID;
    res->producer_epoch = TXN_NO_EPOCH;
    if (!serving(c, partition))
        return answer(res, ST_KERR_NOT_COORDINATOR, done, arg);
    if (id.len <= 0)
        return answer(res, ST_KERR_INVALID_REQUEST, done, arg);
    txn_t *t = txn_find(c, id);
    if (!t || t->partition != partition)
        return answer(res, ST_KERR_INVALID_PRODUCER_ID_MAPPING, done, arg);
    int st = t->m.state;
    bool v2 = t->m.client_tv >= 2;
    bool retry_overflow = v2 && t->m.prev_pid == pid && epoch == INT16_MAX - 1 && t->m.epoch == 0;
    bool retry_bump = epoch_bumped(t, epoch);
    bool valid_epoch;
    if (v2) {
        if (st == ST_TXN_PREPARE_COMMIT || st == ST_TXN_PREPARE_ABORT)
            valid_epoch = retry_bump;
        else if (st == ST_TXN_COMPLETE_COMMIT || st == ST_TXN_COMPLETE_ABORT)
            valid_epoch = retry_bump || retry_overflow;
        else
            valid_epoch = epoch == t->m.epoch;
    } else {
        valid_epoch = epoch == t->m.epoch;
    }
    if (t->m.pid != pid && !retry_overflow)
        return answer(res, ST_KERR_INVALID_PRODUCER_ID_MAPPING, done, arg);
    if (!valid_epoch)
        return answer(res, ST_KERR_PRODUCER_FENCED, done, arg);
    if (t->pending >= 0)
        return answer(res, ST_KERR_CONCURRENT_TRANSACTIONS, done, arg);
    int16_t error = ST_KERR_INVALID_TXN_STATE;
    switch (st) {
    case ST_TXN_ONGOING: {
        txn_op_t *op = op_new(res, done, arg);
        if (!op)
            return answer(res, ST_KERR_COORDINATOR_NOT_AVAILABLE, done, arg);
        prepare_end(c, t, commit, client_tv, prepared, op);
        return;
    }
    case ST_TXN_COMPLETE_COMMIT:
    case ST_TXN_COMPLETE_ABORT:
        if (commit == (st == ST_TXN_COMPLETE_COMMIT)) { /* a retry of an end that completed */
            res->producer_id = t->m.pid;
            res->producer_epoch = t->m.epoch;
            error = 0;
        }
        break;
    case ST_TXN_PREPARE_COMMIT:
    case ST_TXN_PREPARE_ABORT:
        if (commit == (st == ST_TXN_PREPARE_COMMIT))
            error = ST_KERR_CONCURRENT_TRANSACTIONS; /* still completing */
        break;
    default: /* Empty: nothing to end */
        break;
    }
    res->error = error;
    if (error) {
        res->producer_id = TXN_NO_PID;
        res->producer_epoch = TXN_NO_EPOCH;
    }
    done(arg);
}

/* ---- InitProducerId ---- */

static void init_written(st_tcoord_t *c, txn_t *t, int16_t error, void *arg)
{
    (void)c;
    op_answer(arg, error, t);
}

void st_tcoord_init_pid(st_tcoord_t *c, int32_t partition, st_kstr_t id, int32_t timeout_ms,
                        int64_t expected_pid, int16_t expected_epoch, st_tresult_t *res,
                        st_tcoord_done_fn done, void *arg)
{
    res->producer_id = TXN_NO_PID;
    res->producer_epoch = TXN_NO_EPOCH;
    bool has_exp = expected_pid != TXN_NO_PID || expected_epoch != TXN_NO_EPOCH;
    if (has_exp && (expected_pid == TXN_NO_PID || expected_epoch == TXN_NO_EPOCH))
        return answer(res, ST_KERR_INVALID_REQUEST, done, arg); /* KafkaApis' check */
    if (id.len == 0)
        return answer(res, ST_KERR_INVALID_REQUEST, done, arg);
    if (timeout_ms <= 0 || timeout_ms > c->cfg.max_timeout_ms)
        return answer(res, ST_KERR_INVALID_TRANSACTION_TIMEOUT, done, arg);
    if (!serving(c, partition) || id.len < 0)
        return answer(res, ST_KERR_NOT_COORDINATOR, done, arg);
    txn_t *t = txn_find(c, id);
    if (!t) {
        t = txn_create(c, id, partition);
        if (!t)
            return answer(res, ST_KERR_COORDINATOR_NOT_AVAILABLE, done, arg);
        t->m.pid = c->cfg.next_pid(c->cfg.ctx);
        t->m.timeout_ms = timeout_ms;
        t->m.update_ts = txn_now(c);
    }
    if (t->pending >= 0)
        return answer(res, ST_KERR_CONCURRENT_TRANSACTIONS, done, arg);
    /* Kafka's isValidProducerId */
    if (has_exp && !(t->m.epoch == TXN_NO_EPOCH || expected_pid == t->m.pid ||
                     (expected_pid == t->m.prev_pid && txn_epoch_exhausted(expected_epoch))))
        return answer(res, ST_KERR_PRODUCER_FENCED, done, arg);
    switch (t->m.state) {
    case ST_TXN_PREPARE_COMMIT:
    case ST_TXN_PREPARE_ABORT:
        return answer(res, ST_KERR_CONCURRENT_TRANSACTIONS, done, arg);
    case ST_TXN_ONGOING: {
        /* the previous incarnation's transaction is aborted first; the client retries */
        txn_op_t *op = op_new(res, done, arg);
        if (!op)
            return answer(res, ST_KERR_COORDINATOR_NOT_AVAILABLE, done, arg);
        fence_and_abort(c, t, op);
        return;
    }
    case ST_TXN_EMPTY:
    case ST_TXN_COMPLETE_COMMIT:
    case ST_TXN_COMPLETE_ABORT:
        break;
    default:
        return answer(res, ST_KERR_UNKNOWN_SERVER_ERROR, done, arg);
    }
    txn_meta_t to;
    if (begin(c, t, ST_TXN_EMPTY, false, &to))
        return answer(res, ST_KERR_COORDINATOR_NOT_AVAILABLE, done, arg);
    to.timeout_ms = timeout_ms;
    to.start_ts = -1;
    if (txn_epoch_exhausted(t->m.epoch) && (!has_exp || expected_epoch == t->m.epoch)) {
        /* prepareProducerIdRotation */
        to.pid = c->cfg.next_pid(c->cfg.ctx);
        to.epoch = 0;
        to.last_epoch = has_exp ? t->m.epoch : TXN_NO_EPOCH;
    } else if (!has_exp) {
        to.epoch = (int16_t)(t->m.epoch + 1);
        to.last_epoch = TXN_NO_EPOCH;
    } else if (t->m.epoch == TXN_NO_EPOCH || expected_epoch == t->m.epoch) {
        to.epoch = (int16_t)(t->m.epoch + 1);
        to.last_epoch = t->m.epoch;
    } else if (expected_epoch == t->m.last_epoch) {
        /* a retry of an InitProducerId that succeeded: the same epoch again */
    } else {
        txn_meta_free(&to);
        return answer(res, ST_KERR_PRODUCER_FENCED, done, arg);
    }
    if (txn_epoch_exhausted(t->m.epoch) && to.pid == t->m.pid) {
        txn_meta_free(&to); /* exhausted, and the expected epoch is not the current one */
        return answer(res, ST_KERR_PRODUCER_FENCED, done, arg);
    }
    txn_op_t *op = op_new(res, done, arg);
    if (!op) {
        txn_meta_free(&to);
        return answer(res, ST_KERR_COORDINATOR_NOT_AVAILABLE, done, arg);
    }
    txn_write(c, t, &to, false, init_written, op);
}

/* ---- AddPartitionsToTxn ---- */

/* An AddPartitionsToTxn waiting for the completion of its id's previous transaction (coord.h).
 * Everything it points to is the caller's, valid until done. */
typedef struct txn_park {
    struct txn_park *next;
    int32_t partition;
    st_kstr_t id;
    int64_t pid;
    int16_t epoch;
    const st_ttp_t *parts;
    int n;
    st_tresult_t *res;
    st_tcoord_done_fn done;
    void *arg;
    int64_t deadline;
} txn_park_t;

static bool park(st_tcoord_t *c, int32_t partition, st_kstr_t id, int64_t pid, int16_t epoch,
                 const st_ttp_t *parts, int n, st_tresult_t *res, st_tcoord_done_fn done, void *arg)
{
    txn_park_t *k = malloc(sizeof *k);
    if (!k)
        return false; /* answered CONCURRENT_TRANSACTIONS: the client retries */
    *k = (txn_park_t){.next = c->parked,
                      .partition = partition,
                      .id = id,
                      .pid = pid,
                      .epoch = epoch,
                      .parts = parts,
                      .n = n,
                      .res = res,
                      .done = done,
                      .arg = arg,
                      .deadline = txn_now(c) + ST_TCOORD_PARK_MS};
    c->parked = k;
    return true;
}

/* Takes out of the parked list those `pick` selects, in arrival order (the list may grow while
 * they run). The list is newest first, so each taken one goes to the front of the result. */
static txn_park_t *unpark(st_tcoord_t *c, bool (*pick)(const txn_park_t *, const void *),
                          const void *arg)
{
    txn_park_t *out = NULL, **pp = &c->parked;
    while (*pp) {
        txn_park_t *k = *pp;
        if (pick(k, arg)) {
            *pp = k->next;
            k->next = out;
            out = k;
        } else {
            pp = &k->next;
        }
    }
    return out;
}

static bool pick_txn(const txn_park_t *k, const void *arg)
{
    const txn_t *t = arg;
    return k->id.len == t->id_len && memcmp(k->id.ptr, t->id, (size_t)t->id_len) == 0;
}

static bool pick_partition(const txn_park_t *k, const void *arg)
{
    int32_t p = *(const int32_t *)arg;
    return p < 0 || k->partition == p;
}

static bool pick_expired(const txn_park_t *k, const void *arg)
{
    return k->deadline <= *(const int64_t *)arg;
}

static void answer_all(txn_park_t *list, int16_t error, bool send)
{
    while (list) {
        txn_park_t *k = list;
        list = k->next;
        if (send)
            answer(k->res, error, k->done, k->arg);
        free(k);
    }
}

void txn_park_flush(st_tcoord_t *c, int32_t partition, int16_t error, bool send)
{
    answer_all(unpark(c, pick_partition, &partition), error, send);
}

/* t's transaction completed: its waiting requests are taken now, oldest first. */
static void resume_parked(st_tcoord_t *c, const txn_t *t)
{
    for (txn_park_t *k = unpark(c, pick_txn, t), *next; k; k = next) {
        next = k->next;
        st_tcoord_add_partitions(c, k->partition, k->id, k->pid, k->epoch, k->parts, k->n, k->res,
                                 k->done, k->arg);
        free(k);
    }
}

static void added(st_tcoord_t *c, txn_t *t, int16_t error, void *arg)
{
    (void)c;
    op_answer(arg, error, t);
}

/* The refusal of a request about t's transaction at pid/epoch, or 0. */
static int16_t check_producer(const txn_t *t, int32_t partition, int64_t pid, int16_t epoch)
{
    if (!t || t->partition != partition || t->m.epoch == TXN_NO_EPOCH || t->m.pid != pid)
        return ST_KERR_INVALID_PRODUCER_ID_MAPPING;
    if (t->m.epoch != epoch)
        return ST_KERR_PRODUCER_FENCED;
    return 0;
}

void st_tcoord_add_partitions(st_tcoord_t *c, int32_t partition, st_kstr_t id, int64_t pid,
                              int16_t epoch, const st_ttp_t *parts, int n, st_tresult_t *res,
                              st_tcoord_done_fn done, void *arg)
{
    res->producer_id = TXN_NO_PID;
    res->producer_epoch = TXN_NO_EPOCH;
    if (id.len <= 0)
        return answer(res, ST_KERR_INVALID_REQUEST, done, arg);
    if (!serving(c, partition))
        return answer(res, ST_KERR_NOT_COORDINATOR, done, arg);
    txn_t *t = txn_find(c, id);
    int16_t error = check_producer(t, partition, pid, epoch);
    if (error)
        return answer(res, error, done, arg);
    if ((t->m.state == ST_TXN_PREPARE_COMMIT || t->m.state == ST_TXN_PREPARE_ABORT) &&
        park(c, partition, id, pid, epoch, parts, n, res, done, arg))
        return; /* the previous transaction is ending: wait for it rather than refuse */
    if (t->pending >= 0 || t->m.state == ST_TXN_PREPARE_COMMIT ||
        t->m.state == ST_TXN_PREPARE_ABORT)
        return answer(res, ST_KERR_CONCURRENT_TRANSACTIONS, done, arg);
    bool subset = t->m.state == ST_TXN_ONGOING;
    for (int i = 0; subset && i < n; i++)
        subset = txn_meta_has(&t->m, parts[i].topic, parts[i].partition);
    if (subset)
        return answer(res, 0, done, arg); /* already in the transaction */
    txn_meta_t to;
    if (begin(c, t, ST_TXN_ONGOING, true, &to))
        return answer(res, ST_KERR_COORDINATOR_NOT_AVAILABLE, done, arg);
    for (int i = 0; i < n; i++)
        if (txn_meta_add(&to, parts[i].topic, parts[i].partition)) {
            txn_meta_free(&to);
            return answer(res, ST_KERR_COORDINATOR_NOT_AVAILABLE, done, arg);
        }
    if (t->m.state != ST_TXN_ONGOING)
        to.start_ts = to.update_ts; /* a new transaction begins */
    txn_op_t *op = op_new(res, done, arg);
    if (!op) {
        txn_meta_free(&to);
        return answer(res, ST_KERR_COORDINATOR_NOT_AVAILABLE, done, arg);
    }
    txn_write(c, t, &to, false, added, op);
}

void st_tcoord_verify(st_tcoord_t *c, int32_t partition, st_kstr_t id, int64_t pid, int16_t epoch,
                      const st_ttp_t *parts, int n, int16_t *errors)
{
    int16_t error = 0;
    txn_t *t = NULL;
    if (id.len <= 0)
        error = ST_KERR_INVALID_REQUEST;
    else if (!serving(c, partition))
        error = ST_KERR_NOT_COORDINATOR;
    else if (!(error = check_producer(t = txn_find(c, id), partition, pid, epoch)) &&
             (t->m.state == ST_TXN_PREPARE_COMMIT || t->m.state == ST_TXN_PREPARE_ABORT))
        error = ST_KERR_CONCURRENT_TRANSACTIONS;
    for (int i = 0; i < n; i++)
        errors[i] = error ? error
                    : txn_meta_has(&t->m, parts[i].topic, parts[i].partition)
                        ? 0
                        : ST_KERR_TRANSACTION_ABORTABLE;
}

/* ---- timeouts and expiry ---- */

static void expired(st_tcoord_t *c, txn_t *t, int16_t error, void *arg)
{
    (void)c;
    (void)arg;
    if (error)
        ST_WARN("%s-%d: the tombstone of %.*s: %s", ST_TXN_TOPIC, t->partition, (int)t->id_len,
                t->id, st_kerr_name(error));
    else
        ST_INFO("%s-%d: transactional id %.*s expired", ST_TXN_TOPIC, t->partition, (int)t->id_len,
                t->id);
}

enum { CHECK_ABORT = 1, CHECK_EXPIRE = 2 };

/* Collects first, then acts: a write may end (and change the table) inside the call. */
static void check(st_tcoord_t *c, int what)
{
    int64_t now = txn_now(c);
    c->retries = false; /* every flagged id is seen below */
    int n = 0;
    for (int i = 0; i < TXN_BUCKETS; i++)
        for (txn_t *t = c->buckets[i]; t; t = t->next)
            n++;
    if (n == 0)
        return;
    txn_t **todo = calloc((size_t)n, sizeof *todo);
    int *kind = calloc((size_t)n, sizeof *kind);
    if (!todo || !kind) {
        free(todo);
        free(kind);
        return;
    }
    int k = 0;
    for (int i = 0; i < TXN_BUCKETS; i++)
        for (txn_t *t = c->buckets[i]; t; t = t->next) {
            if (t->pending >= 0 || t->markers || !st_tcoord_loaded(c, t->partition)) {
                if (t->complete_retry || t->markers_retry)
                    c->retries = true; /* not now: a later tick */
                continue;
            }
            int st = t->m.state;
            if ((what & CHECK_ABORT) && st == ST_TXN_ONGOING &&
                t->m.start_ts + t->m.timeout_ms < now) {
                kind[k] = CHECK_ABORT;
                todo[k++] = t;
            } else if ((what & CHECK_EXPIRE) &&
                       (st == ST_TXN_EMPTY || st == ST_TXN_COMPLETE_COMMIT ||
                        st == ST_TXN_COMPLETE_ABORT) &&
                       t->m.update_ts <= now - c->cfg.id_expiration_ms) {
                kind[k] = CHECK_EXPIRE;
                todo[k++] = t;
            } else if ((t->complete_retry || t->markers_retry) &&
                       (st == ST_TXN_PREPARE_COMMIT || st == ST_TXN_PREPARE_ABORT)) {
                kind[k] = 0;
                todo[k++] = t;
            }
        }
    for (int i = 0; i < k; i++) {
        txn_t *t = todo[i];
        if (kind[i] == CHECK_ABORT) {
            ST_INFO("%s-%d: the transaction of %.*s timed out: aborted", ST_TXN_TOPIC, t->partition,
                    (int)t->id_len, t->id);
            c->timed_out++;
            fence_and_abort(c, t, NULL);
        } else if (kind[i] == CHECK_EXPIRE) {
            txn_meta_t to;
            if (!begin(c, t, ST_TXN_DEAD, false, &to)) {
                to.update_ts = t->m.update_ts;
                txn_write(c, t, &to, true, expired, NULL);
            }
        } else if (t->complete_retry) {
            write_complete(c, t);
        } else {
            c->markers_retried++;
            txn_send_markers(c, t);
        }
    }
    free(todo);
    free(kind);
}

void st_tcoord_tick(st_tcoord_t *c)
{
    if (c->closed)
        return;
    int64_t now = txn_now(c);
    if (c->parked)
        answer_all(unpark(c, pick_expired, &now), ST_KERR_CONCURRENT_TRANSACTIONS, true);
    int what = 0;
    if (now - c->last_abort_check >= c->cfg.abort_interval_ms) {
        c->last_abort_check = now;
        what |= CHECK_ABORT;
    }
    if (now - c->last_expire_check >= c->cfg.expire_interval_ms) {
        c->last_expire_check = now;
        what |= CHECK_EXPIRE;
    }
    if (what || c->retries)
        check(c, what); /* also the completions and markers to try again */
}

void st_tcoord_check_now(st_tcoord_t *c)
{
    if (!c->closed)
        check(c, CHECK_ABORT | CHECK_EXPIRE);
}
