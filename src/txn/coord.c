/*
 * coord.c — the transaction coordinator's life cycle, its table of ids, the writes to a
 * __transaction_state partition (applied once durable, invariant 1 of coord.h), loading a
 * partition by replaying its records, DescribeTransactions and ListTransactions.
 */
#include "txn/coord_impl.h"

#include "base/log.h"
#include "group/coord.h"
#include "group/records.h"
#include "storage/batch.h"

/* ---- life cycle ---- */

int st_tcoord_create(st_tcoord_t **out, st_loop_t *loop, const st_tcoord_config_t *cfg)
{
    st_tcoord_t *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->loop = loop;
    c->cfg = *cfg;
    if (c->cfg.num_partitions <= 0)
        c->cfg.num_partitions = 1;
    if (!c->cfg.max_batch_bytes)
        c->cfg.max_batch_bytes = 1 << 20;
    c->logs = calloc((size_t)c->cfg.num_partitions, sizeof *c->logs);
    c->epochs = calloc((size_t)c->cfg.num_partitions, sizeof *c->epochs);
    if (!c->logs || !c->epochs) {
        free(c->logs);
        free(c->epochs);
        free(c);
        return -ENOMEM;
    }
    c->next_job = 1;
    c->last_abort_check = c->last_expire_check = txn_now(c);
    *out = c;
    return 0;
}

void st_tcoord_drain(st_tcoord_t *c)
{
    c->closed = true;
    txn_park_flush(c, -1, ST_KERR_NOT_COORDINATOR, true);
}

static void txn_free(txn_t *t)
{
    txn_meta_free(&t->m);
    free(t->id);
    free(t);
}

void st_tcoord_destroy(st_tcoord_t *c)
{
    if (!c)
        return;
    txn_park_flush(c, -1, 0, false);
    for (int i = 0; i < TXN_BUCKETS; i++)
        for (txn_t *t = c->buckets[i], *next; t; t = next) {
            next = t->next;
            txn_free(t);
        }
    free(c->logs);
    free(c->epochs);
    free(c);
}

int32_t st_tcoord_partition_for(st_kstr_t transactional_id, int32_t n)
{
    return st_gcoord_partition_for(transactional_id, n);
}

bool st_tcoord_loaded(const st_tcoord_t *c, int32_t partition)
{
    return partition >= 0 && partition < c->cfg.num_partitions && c->logs[partition];
}

int32_t st_tcoord_epoch(const st_tcoord_t *c, int32_t partition)
{
    return st_tcoord_loaded(c, partition) ? c->epochs[partition] : -1;
}

int st_tcoord_count(const st_tcoord_t *c)
{
    return c->count;
}

_Static_assert(ST_TXN_STATES_MAX == ST_TXN_NSTATES, "coord.h's state count");

void st_tcoord_stats(const st_tcoord_t *c, st_tcoord_stats_t *out)
{
    *out = (st_tcoord_stats_t){.committed = c->committed,
                               .aborted = c->aborted,
                               .timed_out = c->timed_out,
                               .markers_retried = c->markers_retried};
    for (int32_t p = 0; p < c->cfg.num_partitions; p++)
        out->partitions += st_tcoord_loaded(c, p);
    for (int i = 0; i < TXN_BUCKETS; i++)
        for (const txn_t *t = c->buckets[i]; t; t = t->next)
            if (st_tcoord_loaded(c, t->partition) && t->m.state >= 0 && t->m.state < ST_TXN_NSTATES)
                out->ids[t->m.state]++;
}

/* ---- the table ---- */

static uint32_t bucket_of(st_kstr_t id)
{
    uint32_t h = 2166136261u;
    for (int32_t i = 0; i < id.len; i++)
        h = (h ^ (uint8_t)id.ptr[i]) * 16777619u;
    return h % TXN_BUCKETS;
}

txn_t *txn_find(st_tcoord_t *c, st_kstr_t id)
{
    if (id.len < 0)
        return NULL;
    for (txn_t *t = c->buckets[bucket_of(id)]; t; t = t->next)
        if (t->id_len == id.len && memcmp(t->id, id.ptr, (size_t)id.len) == 0)
            return t;
    return NULL;
}

txn_t *txn_create(st_tcoord_t *c, st_kstr_t id, int32_t partition)
{
    txn_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->id = malloc((size_t)id.len + 1);
    if (!t->id) {
        free(t);
        return NULL;
    }
    memcpy(t->id, id.ptr, (size_t)id.len);
    t->id[id.len] = 0;
    t->id_len = id.len;
    t->partition = partition;
    t->pending = -1;
    t->m = (txn_meta_t){.pid = TXN_NO_PID,
                        .prev_pid = TXN_NO_PID,
                        .next_pid = TXN_NO_PID,
                        .epoch = TXN_NO_EPOCH,
                        .last_epoch = TXN_NO_EPOCH,
                        .state = ST_TXN_EMPTY,
                        .start_ts = -1};
    uint32_t b = bucket_of(id);
    t->next = c->buckets[b];
    c->buckets[b] = t;
    c->count++;
    return t;
}

void txn_remove(st_tcoord_t *c, txn_t *t)
{
    if (t->unloaded)
        return;
    txn_t **pp = &c->buckets[bucket_of((st_kstr_t){t->id, t->id_len})];
    while (*pp && *pp != t)
        pp = &(*pp)->next;
    if (*pp)
        *pp = t->next;
    c->count--;
    t->unloaded = true;
    t->markers = 0;
    if (t->writes == 0)
        txn_free(t);
}

/* ---- metadata ---- */

void txn_meta_free(txn_meta_t *m)
{
    for (int i = 0; i < m->nparts; i++)
        free(m->parts[i].topic);
    free(m->parts);
    m->parts = NULL;
    m->nparts = 0;
}

bool txn_meta_has(const txn_meta_t *m, st_kstr_t topic, int32_t partition)
{
    for (int i = 0; i < m->nparts; i++)
        if (m->parts[i].partition == partition && m->parts[i].topic_len == topic.len &&
            memcmp(m->parts[i].topic, topic.ptr, (size_t)topic.len) == 0)
            return true;
    return false;
}

int txn_meta_add(txn_meta_t *m, st_kstr_t topic, int32_t partition)
{
    if (topic.len < 0 || txn_meta_has(m, topic, partition))
        return 0;
    txn_tp_t *np = realloc(m->parts, ((size_t)m->nparts + 1) * sizeof *np);
    if (!np)
        return -ENOMEM;
    m->parts = np;
    txn_tp_t *tp = &m->parts[m->nparts];
    tp->topic = malloc((size_t)topic.len + 1);
    if (!tp->topic)
        return -ENOMEM;
    memcpy(tp->topic, topic.ptr, (size_t)topic.len);
    tp->topic[topic.len] = 0;
    tp->topic_len = topic.len;
    tp->partition = partition;
    m->nparts++;
    return 0;
}

int txn_meta_copy(txn_meta_t *dst, const txn_meta_t *src)
{
    *dst = *src;
    dst->parts = NULL;
    dst->nparts = 0;
    for (int i = 0; i < src->nparts; i++)
        if (txn_meta_add(dst, (st_kstr_t){src->parts[i].topic, src->parts[i].topic_len},
                         src->parts[i].partition)) {
            txn_meta_free(dst);
            return -ENOMEM;
        }
    return 0;
}

/* ---- writes ---- */

typedef struct txn_write {
    st_tcoord_t *c;
    txn_t *t;
    txn_meta_t to;
    bool tombstone;
    int32_t epoch; /* the partition's coordinator epoch when the write began */
    txn_write_fn cb;
    void *arg;
} txn_write_t;

static int16_t write_kerr(int res)
{
    if (!res)
        return 0;
    return res == ST_E_NOT_LEADER || res == ST_E_CLOSED ? ST_KERR_NOT_COORDINATOR
                                                        : ST_KERR_COORDINATOR_NOT_AVAILABLE;
}

/* The write ended. t->writes still counts it while the callback runs (which may start the
 * next write of t), so t cannot be freed under it. */
static void write_durable(void *arg, int res)
{
    txn_write_t *w = arg;
    st_tcoord_t *c = w->c;
    txn_t *t = w->t;
    t->pending = -1;
    int16_t error = write_kerr(res);
    if (res)
        ST_WARN("%s-%d: write for %.*s failed: %s", ST_TXN_TOPIC, t->partition, (int)t->id_len,
                t->id, st_strerror(res));
    else if (t->unloaded || st_tcoord_epoch(c, t->partition) != w->epoch)
        error = ST_KERR_NOT_COORDINATOR; /* coordination moved while it was written */
    if (!error) {
        txn_meta_free(&t->m);
        t->m = w->to; /* applied once durable (invariant 1) */
        c->committed += t->m.state == ST_TXN_COMPLETE_COMMIT;
        c->aborted += t->m.state == ST_TXN_COMPLETE_ABORT;
        w->to.parts = NULL;
        w->to.nparts = 0;
    }
    txn_meta_free(&w->to);
    bool removed = !error && w->tombstone;
    if (w->cb)
        w->cb(c, t, error, w->arg);
    free(w);
    t->writes--;
    if (removed && !t->unloaded)
        txn_remove(c, t); /* frees it: no other write can be in flight (invariant 2) */
    else if (t->unloaded && t->writes == 0)
        txn_free(t);
}

/* The record of t at m (a tombstone when m is NULL) into b. */
static int add_record(st_gbatch_t *b, const txn_t *t, const txn_meta_t *m)
{
    st_buf_t k, v;
    st_buf_init(&k);
    st_buf_init(&v);
    st_trec_key(&k, (st_kstr_t){t->id, t->id_len});
    st_trec_topic_t *topics = NULL;
    int ntopics = 0;
    if (m) {
        /* partitions grouped by topic, as Kafka writes them */
        topics = calloc((size_t)m->nparts + 1, sizeof *topics);
        int32_t *ids = calloc((size_t)m->nparts + 1, sizeof *ids);
        if (!topics || !ids) {
            free(topics);
            free(ids);
            st_buf_fini(&k);
            return -ENOMEM;
        }
        int used = 0;
        bool *done = calloc((size_t)m->nparts + 1, sizeof *done);
        for (int i = 0; done && i < m->nparts; i++) {
            if (done[i])
                continue;
            st_trec_topic_t *tt = &topics[ntopics++];
            tt->topic = (st_kstr_t){m->parts[i].topic, m->parts[i].topic_len};
            tt->partitions = &ids[used];
            for (int j = i; j < m->nparts; j++)
                if (!done[j] && m->parts[j].topic_len == m->parts[i].topic_len &&
                    memcmp(m->parts[j].topic, m->parts[i].topic, (size_t)m->parts[i].topic_len) ==
                        0) {
                    done[j] = true;
                    ids[used++] = m->parts[j].partition;
                    tt->npartitions++;
                }
        }
        free(done);
        st_trec_t rec = {
            .version = 0,
            .producer_id = m->pid,
            .previous_producer_id = m->prev_pid,
            .next_producer_id = m->next_pid,
            .producer_epoch = m->epoch,
            .transaction_timeout_ms = m->timeout_ms,
            .transaction_status = (int8_t)m->state,
            .ntopics = m->state == ST_TXN_EMPTY ? -1 : ntopics,
            .topics = topics,
            .last_update_timestamp_ms = m->update_ts,
            .start_timestamp_ms = m->start_ts,
            .client_transaction_version = m->client_tv,
        };
        st_trec_value(&v, &rec);
        free(ids);
    }
    int rc = k.oom || v.oom
                 ? -ENOMEM
                 : st_gbatch_add(b, k.data, k.len, m ? v.data : NULL, m ? (int32_t)v.len : -1);
    free(topics);
    st_buf_fini(&k);
    st_buf_fini(&v);
    return rc;
}

void txn_write(st_tcoord_t *c, txn_t *t, txn_meta_t *to, bool tombstone, txn_write_fn cb, void *arg)
{
    txn_write_t *w = calloc(1, sizeof *w);
    if (!w) {
        txn_meta_free(to);
        cb(c, t, ST_KERR_COORDINATOR_NOT_AVAILABLE, arg);
        return;
    }
    w->c = c;
    w->t = t;
    w->to = *to;
    w->tombstone = tombstone;
    w->epoch = st_tcoord_epoch(c, t->partition);
    w->cb = cb;
    w->arg = arg;
    t->pending = to->state;
    t->writes++;
    st_log_t *log = c->logs[t->partition];
    st_gbatch_t b;
    st_gbatch_init(&b, txn_now(c), c->cfg.max_batch_bytes);
    int rc = add_record(&b, t, tombstone ? NULL : &w->to);
    if (!rc)
        rc = st_gbatch_finish(&b);
    if (!rc && !log)
        rc = ST_E_CLOSED;
    if (!rc && c->cfg.append) {
        rc = c->cfg.append(c->cfg.ctx, t->partition, b.out.data, b.out.len, write_durable, w);
        st_gbatch_fini(&b);
        if (rc)
            write_durable(w, rc);
        return;
    }
    st_log_append_info_t info;
    if (!rc) {
        st_batch_verdict_t v = {0};
        rc = st_log_append(log, b.out.data, b.out.len, 0, &info, &v);
    }
    st_gbatch_fini(&b);
    if (rc) {
        write_durable(w, rc);
        return;
    }
    rc = st_log_wait_durable(log, info.last_offset + 1, write_durable, w);
    if (rc != 0)
        write_durable(w, rc > 0 ? 0 : rc);
}

/* ---- loading ---- */

static void load_record(st_tcoord_t *c, int32_t partition, const st_batch_record_t *rec,
                        st_arena_t *a)
{
    st_trec_t r;
    int rc = st_trec_decode(rec->key, rec->key_len, rec->value, rec->value_len, a, &r);
    if (rc) {
        if (rc != ST_E_UNSUPPORTED)
            ST_WARN("%s-%d: record at offset %lld does not parse: %s", ST_TXN_TOPIC, partition,
                    (long long)rec->offset, st_strerror(rc));
        return;
    }
    txn_t *t = txn_find(c, r.transactional_id);
    if (r.tombstone || r.transaction_status == ST_TXN_DEAD) {
        if (t)
            txn_remove(c, t);
        return;
    }
    if (!t && !(t = txn_create(c, r.transactional_id, partition)))
        return;
    txn_meta_free(&t->m);
    t->m = (txn_meta_t){.pid = r.producer_id,
                        .prev_pid = r.previous_producer_id,
                        .next_pid = r.next_producer_id,
                        .epoch = r.producer_epoch,
                        .last_epoch = TXN_NO_EPOCH,
                        .timeout_ms = r.transaction_timeout_ms,
                        .state = r.transaction_status,
                        .start_ts = r.start_timestamp_ms,
                        .update_ts = r.last_update_timestamp_ms,
                        .client_tv = r.client_transaction_version};
    if (t->m.state != ST_TXN_EMPTY)
        for (int32_t i = 0; i < r.ntopics; i++)
            for (int32_t k = 0; k < r.topics[i].npartitions; k++)
                txn_meta_add(&t->m, r.topics[i].topic, r.topics[i].partitions[k]);
}

/* Reads the whole log, record by record, into the table. */
static int replay(st_tcoord_t *c, int32_t partition, st_log_t *log, int64_t *records)
{
    int64_t off = st_log_start_offset(log), end = st_log_end_offset(log);
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    st_arena_t a;
    st_arena_init(&a, 16384);
    int rc = 0;
    while (off < end) {
        st_log_read_t rd;
        rc = st_log_read(log, off, 1 << 20, -1, &rd);
        if (rc)
            break;
        if (rd.nranges == 0 || rd.next_offset <= off) {
            st_log_read_release(&rd);
            break;
        }
        if ((size_t)rd.bytes > cap) {
            uint8_t *nb = realloc(buf, (size_t)rd.bytes);
            if (!nb) {
                st_log_read_release(&rd);
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap = (size_t)rd.bytes;
        }
        ssize_t n = st_log_read_copy(&rd, buf, cap);
        int64_t next = rd.next_offset;
        st_log_read_release(&rd);
        if (n < 0) {
            rc = (int)n;
            break;
        }
        for (size_t pos = 0; pos < (size_t)n;) {
            st_batch_hdr_t h;
            rc = st_batch_check(buf + pos, (size_t)n - pos, &h);
            if (rc)
                break;
            size_t size = (size_t)st_batch_size(&h);
            st_batch_iter_t it;
            if (!(h.attributes & ST_BATCH_ATTR_CONTROL) &&
                st_batch_iter_init(&it, buf + pos, size) == 0) {
                st_batch_record_t rec;
                while (st_batch_iter_next(&it, &rec) == 1) {
                    if (rec.offset >= off) {
                        load_record(c, partition, &rec, &a);
                        (*records)++;
                    }
                    st_arena_reset(&a);
                }
            }
            pos += size;
        }
        if (rc)
            break;
        off = next;
    }
    st_arena_fini(&a);
    free(buf);
    return rc;
}

/* Drops every id of the partition (those with writes in flight once they end). */
static void drop_partition(st_tcoord_t *c, int32_t partition)
{
    for (int i = 0; i < TXN_BUCKETS; i++)
        for (txn_t *t = c->buckets[i], *next; t; t = next) {
            next = t->next;
            if (t->partition == partition)
                txn_remove(c, t);
        }
}

int st_tcoord_load(st_tcoord_t *c, int32_t partition, st_log_t *log, int32_t epoch)
{
    if (partition < 0 || partition >= c->cfg.num_partitions)
        return ST_E_INVALID;
    if (c->logs[partition])
        return ST_E_EXISTS;
    int64_t t0 = st_mono_ms(), records = 0;
    int rc = replay(c, partition, log, &records);
    if (rc) {
        ST_ERROR("%s-%d: loading stopped: %s", ST_TXN_TOPIC, partition, st_strerror(rc));
        drop_partition(c, partition); /* nothing half loaded stays */
        return rc;
    }
    c->logs[partition] = log;
    c->epochs[partition] = epoch;
    int n = 0, resent = 0;
    for (int i = 0; i < TXN_BUCKETS; i++)
        for (txn_t *t = c->buckets[i]; t; t = t->next) {
            if (t->partition != partition)
                continue;
            n++;
            if (t->m.state == ST_TXN_PREPARE_COMMIT || t->m.state == ST_TXN_PREPARE_ABORT) {
                txn_send_markers(c, t); /* Kafka's load: complete what was being completed */
                resent++;
            }
        }
    if (records)
        ST_INFO("%s-%d: loaded %lld record(s), %d transactional id(s), %d completion(s) resumed "
                "in %lld ms",
                ST_TXN_TOPIC, partition, (long long)records, n, resent,
                (long long)(st_mono_ms() - t0));
    return 0;
}

void st_tcoord_unload(st_tcoord_t *c, int32_t partition)
{
    if (!st_tcoord_loaded(c, partition))
        return;
    c->logs[partition] = NULL;
    c->epochs[partition] = -1;
    txn_park_flush(c, partition, ST_KERR_NOT_COORDINATOR, true);
    drop_partition(c, partition);
}

/* ---- DescribeTransactions, ListTransactions ---- */

static st_kstr_t arena_str(st_arena_t *a, const char *p, int32_t len)
{
    char *d = st_arena_alloc(a, (size_t)len + 1);
    if (!d)
        return ST_KSTR_EMPTY;
    memcpy(d, p, (size_t)len);
    d[len] = 0;
    return (st_kstr_t){d, len};
}

void st_tcoord_describe(st_tcoord_t *c, int32_t partition, st_kstr_t id, st_arena_t *a,
                        st_kp_describe_transactions_resp_transaction_state_t *out)
{
    st_kp_describe_transactions_resp_transaction_state_init(out);
    out->transactional_id = id.len >= 0 ? arena_str(a, id.ptr, id.len) : ST_KSTR_EMPTY;
    out->transaction_state = ST_KSTR_EMPTY;
    if (c->closed || !st_tcoord_loaded(c, partition)) {
        out->error_code = ST_KERR_NOT_COORDINATOR;
        return;
    }
    if (id.len <= 0) {
        out->error_code = ST_KERR_INVALID_REQUEST;
        return;
    }
    txn_t *t = txn_find(c, id);
    if (!t || t->m.state == ST_TXN_DEAD || t->m.epoch == TXN_NO_EPOCH) {
        out->error_code = ST_KERR_TRANSACTIONAL_ID_NOT_FOUND;
        return;
    }
    out->transaction_state = st_kstr(st_txn_state_name(t->m.state));
    out->transaction_timeout_ms = t->m.timeout_ms;
    out->transaction_start_time_ms = t->m.start_ts;
    out->producer_id = t->m.pid;
    out->producer_epoch = t->m.epoch;
    out->topics = st_arena_zalloc(a, ((size_t)t->m.nparts + 1) * sizeof *out->topics);
    if (!out->topics) {
        out->error_code = ST_KERR_UNKNOWN_SERVER_ERROR;
        return;
    }
    for (int i = 0; i < t->m.nparts; i++) {
        const txn_tp_t *tp = &t->m.parts[i];
        st_kp_describe_transactions_resp_topic_data_t *td = NULL;
        for (int k = 0; k < out->topics_count; k++)
            if (out->topics[k].topic.len == tp->topic_len &&
                memcmp(out->topics[k].topic.ptr, tp->topic, (size_t)tp->topic_len) == 0)
                td = &out->topics[k];
        if (!td) {
            td = &out->topics[out->topics_count++];
            td->topic = arena_str(a, tp->topic, tp->topic_len);
            td->partitions = st_arena_zalloc(a, ((size_t)t->m.nparts + 1) * sizeof(int32_t));
            if (!td->partitions) {
                out->error_code = ST_KERR_UNKNOWN_SERVER_ERROR;
                return;
            }
        }
        td->partitions[td->partitions_count++] = tp->partition;
    }
}

void st_tcoord_list(st_tcoord_t *c, const int *states, int nstates, const int64_t *pids, int npids,
                    int64_t min_duration_ms, st_arena_t *a,
                    st_kp_list_transactions_resp_transaction_state_t **out, int32_t *n)
{
    int64_t now = txn_now(c);
    int extra = 0;
    for (int i = 0; i < TXN_BUCKETS; i++)
        for (txn_t *t = c->buckets[i]; t; t = t->next)
            extra++;
    if (!extra)
        return;
    st_kp_list_transactions_resp_transaction_state_t *arr =
        st_arena_zalloc(a, ((size_t)*n + (size_t)extra) * sizeof *arr);
    if (!arr)
        return;
    if (*n)
        memcpy(arr, *out, (size_t)*n * sizeof *arr);
    for (int i = 0; i < TXN_BUCKETS; i++)
        for (txn_t *t = c->buckets[i]; t; t = t->next) {
            if (!st_tcoord_loaded(c, t->partition) || t->m.state == ST_TXN_DEAD ||
                t->m.epoch == TXN_NO_EPOCH)
                continue;
            bool ok = nstates == 0;
            for (int k = 0; k < nstates && !ok; k++)
                ok = states[k] == t->m.state;
            if (!ok)
                continue;
            ok = npids == 0;
            for (int k = 0; k < npids && !ok; k++)
                ok = pids[k] == t->m.pid;
            if (!ok)
                continue;
            /* Kafka's duration filter: started more than that long ago */
            if (min_duration_ms >= 0 && now - t->m.start_ts <= min_duration_ms)
                continue;
            st_kp_list_transactions_resp_transaction_state_t *e = &arr[(*n)++];
            e->transactional_id = arena_str(a, t->id, t->id_len);
            e->producer_id = t->m.pid;
            e->transaction_state = st_kstr(st_txn_state_name(t->m.state));
        }
    *out = arr;
}
