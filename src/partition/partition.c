/*
 * partition.c — a shard's partition table: open (recovering the idempotent producers), close,
 * delete, settings, the high watermark and the fetches waiting on it, housekeeping.
 */
#include "partition/partition.h"
#include "partition/part_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"

static size_t hash(const uint8_t id[16], int32_t index)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 16; i++)
        h = (h ^ id[i]) * 1099511628211ull;
    h = (h ^ (uint32_t)index) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

void st_parts_init(st_parts_t *t, st_loop_t *loop, st_storage_env_t *env,
                   const st_parts_config_t *cfg)
{
    t->nbuckets = 256;
    t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
    t->count = 0;
    t->loop = loop;
    t->env = env;
    t->cfg = *cfg;
    st_parts_clean_init(t);
}

static void grow(st_parts_t *t)
{
    size_t n = t->nbuckets * 2;
    st_part_t **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < t->nbuckets; i++)
        for (st_part_t *p = t->buckets[i], *next; p; p = next) {
            next = p->next;
            size_t k = hash(p->topic_id, p->index) & (n - 1);
            p->next = b[k];
            b[k] = p;
        }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

st_part_t *st_parts_get(const st_parts_t *t, const uint8_t topic_id[16], int32_t index)
{
    if (!t->buckets)
        return NULL; /* closed (shutdown) */
    size_t k = hash(topic_id, index) & (t->nbuckets - 1);
    for (st_part_t *p = t->buckets[k]; p; p = p->next)
        if (p->index == index && memcmp(p->topic_id, topic_id, 16) == 0)
            return p;
    return NULL;
}

static void unlink_part(st_parts_t *t, st_part_t *p)
{
    size_t k = hash(p->topic_id, p->index) & (t->nbuckets - 1);
    for (st_part_t **pp = &t->buckets[k]; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            t->count--;
            return;
        }
}

static void insert(st_parts_t *t, st_part_t *p)
{
    if (t->count >= t->nbuckets)
        grow(t);
    size_t k = hash(p->topic_id, p->index) & (t->nbuckets - 1);
    p->next = t->buckets[k];
    t->buckets[k] = p;
    t->count++;
}

/* One partition of st_parts_fini: its log detached and closed in two steps. */
typedef struct closing {
    st_part_t *p;
    st_log_t *log;
    int rc;
} closing_t;

/* The first step of closing p (st_log_close_begin) and its producer state snapshot. */
static void close_begin(st_part_t *p, closing_t *c)
{
    /* Detach first: closing runs the last durability callbacks, which must see a partition
     * without a log, not one half closed. */
    c->p = p;
    c->log = p->log;
    p->log = NULL;
    p->dead = true;
    st_part_repl_fini(p);
    p->pending_durable++;
    int64_t end = c->log ? st_log_end_offset(c->log) : -1;
    c->rc = c->log ? st_log_close_begin(c->log) : 0;
    int rc;
    if (c->rc == 0 && c->log && (rc = st_pstate_save(&p->pstate, end, st_wall_ms())) < 0)
        ST_WARN("%s-%d: cannot write the producer state snapshot: %s", p->topic, p->index,
                st_strerror(rc));
}

static void close_end(closing_t *c)
{
    int rc = c->log ? st_log_close_end(c->log, c->rc) : 0;
    if (rc)
        ST_ERROR("closing %s-%d: %s", c->p->topic, c->p->index, st_strerror(rc));
    c->p->pending_durable--;
    st_part_maybe_free(c->p);
}

/* Closes every log in two passes, each under one deferred sync (storage/env.h): everything
 * but the clean-shutdown markers, one syncfs, the markers, one syncfs. A stop of 10,000
 * partitions makes two syncs instead of several per partition. */
void st_parts_fini(st_parts_t *t)
{
    st_parts_clean_fini(t);
    closing_t *cl = t->count ? calloc(t->count, sizeof *cl) : NULL;
    size_t n = 0;
    int64_t t0 = st_mono_ns(), t1 = 0, t2 = 0, t3 = 0;
    if (cl)
        st_storage_defer_begin(t->env);
    for (size_t i = 0; i < t->nbuckets; i++)
        for (st_part_t *p = t->buckets[i], *next; p; p = next) {
            next = p->next;
            closing_t one;
            close_begin(p, cl ? &cl[n] : &one);
            if (cl)
                n++;
            else
                close_end(&one);
        }
    if (cl) {
        t1 = st_mono_ns();
        int rc = st_storage_defer_end(t->env, t->cfg.log_dirs);
        t2 = st_mono_ns();
        if (rc < 0)
            ST_ERROR("closing %zu partition(s): the sync of %s failed (%s): no clean-shutdown "
                     "markers, the next start recovers them",
                     n, t->cfg.log_dirs, st_strerror(rc));
        st_storage_defer_begin(t->env);
        for (size_t i = 0; i < n; i++) {
            if (rc < 0 && cl[i].rc == 0)
                cl[i].rc = rc;
            close_end(&cl[i]);
        }
        t3 = st_mono_ns();
        if ((rc = st_storage_defer_end(t->env, t->cfg.log_dirs)) < 0)
            ST_WARN("closing partitions: the sync of the clean-shutdown markers failed (%s): "
                    "the next start recovers them",
                    st_strerror(rc));
        free(cl);
        if (n >= 100)
            ST_INFO("closed %zu partition(s) in %.2f s: logs %.2f s, sync %.2f s, markers "
                    "%.2f s, sync %.2f s",
                    n, (double)(st_mono_ns() - t0) / 1e9, (double)(t1 - t0) / 1e9,
                    (double)(t2 - t1) / 1e9, (double)(t3 - t2) / 1e9,
                    (double)(st_mono_ns() - t3) / 1e9);
    }
    free(t->buckets);
    t->buckets = NULL;
    t->count = 0;
}

/* A marker met while replaying the log: the producer's transaction ends (the .txnindex is
 * storage's, already right). */
static int replay_marker(st_part_t *p, st_file_t *f, int64_t pos, const st_batch_hdr_t *h,
                         int64_t ts)
{
    uint8_t b[256];
    if (st_batch_size(h) > (int64_t)sizeof b)
        return 0; /* no marker is this large: another control record */
    ssize_t n = st_file_pread(f, b, (size_t)st_batch_size(h), pos);
    if (n != st_batch_size(h))
        return n < 0 ? (int)n : ST_E_CORRUPT;
    int16_t type;
    int32_t cepoch;
    int64_t first;
    if (st_batch_control_parse(b, (size_t)n, &type, &cepoch) == 0 &&
        st_pstate_end_txn(&p->pstate, h->producer_id, h->producer_epoch, cepoch, h->base_offset, ts,
                          &first) < 0)
        return -ENOMEM;
    return 0;
}

/* Rebuilds the idempotent producers' state: the newest usable snapshot, then the headers of
 * the batches after it (only headers are read: 61 bytes per batch); without a snapshot, every
 * batch header in the log. A replayed producer's last use is its batch's maxTimestamp (never
 * later than now), as Kafka does. */
static int load_producers(st_part_t *p, int64_t *replayed)
{
    int64_t end = st_log_end_offset(p->log), start = st_log_start_offset(p->log), snap;
    int64_t now = st_wall_ms();
    /* Everything up to the end is durable once the log is open. */
    int64_t off = st_pstate_load(&p->pstate, end, &snap) == 0 ? snap : start;
    if (off < start)
        off = start; /* retention took what followed the snapshot */
    int64_t from = off;
    *replayed = 0;
    while (off < end) {
        st_log_read_t rd;
        int rc = st_log_read(p->log, off, 64 << 20, -1, &rd);
        if (rc)
            return rc;
        for (int i = 0; i < rd.nranges && rc == 0; i++) {
            const st_log_range_t *rg = &rd.ranges[i];
            for (int64_t pos = rg->pos; pos + ST_BATCH_HEADER_SIZE <= rg->pos + rg->len;) {
                uint8_t hdr[ST_BATCH_HEADER_SIZE];
                st_batch_hdr_t h;
                ssize_t n = st_file_pread(rg->file, hdr, sizeof hdr, pos);
                if (n != (ssize_t)sizeof hdr || st_batch_parse_hdr(hdr, sizeof hdr, &h)) {
                    rc = n < 0 ? (int)n : ST_E_CORRUPT;
                    break;
                }
                (*replayed)++;
                int64_t ts = h.max_timestamp < now ? h.max_timestamp : now;
                bool txn = (h.attributes & ST_BATCH_ATTR_TRANSACTIONAL) != 0;
                if (h.producer_id >= 0 && st_batch_last_offset(&h) >= from) {
                    if (h.attributes & ST_BATCH_ATTR_CONTROL)
                        rc = replay_marker(p, rg->file, pos, &h, ts);
                    else
                        st_pstate_record_batch(
                            &p->pstate, h.producer_id, h.producer_epoch, h.base_sequence,
                            txn && h.base_sequence < 0
                                ? -1
                                : st_pstate_seq_add(h.base_sequence, h.last_offset_delta),
                            h.base_offset, st_batch_last_offset(&h), ts, txn);
                }
                pos += st_batch_size(&h);
            }
        }
        int64_t next = rd.next_offset;
        st_log_read_release(&rd);
        if (rc)
            return rc;
        if (next <= off)
            break;
        off = next;
    }
    return 0;
}

/* The log end moved down (a failed sync, a truncation): the producer state forgets the
 * batches that went, before any producer waiting on them is answered. */
static void on_cut(void *arg, int64_t new_end)
{
    st_part_t *p = arg;
    st_pstate_truncate(&p->pstate, new_end);
}

/* A directory under the partition's name that belongs to another topic id (an older topic of
 * the same name whose deletion a crash interrupted, or a copy from elsewhere) is never served:
 * it is renamed aside as "-stray", kept for an operator, and the partition starts afresh. */
static void refuse_foreign(st_parts_t *t, const char *topic, const uint8_t topic_id[16],
                           int32_t index, const char *dir)
{
    uint8_t have[16];
    if (st_storage_read_topic_id(t->env, dir, have) != 0 || memcmp(have, topic_id, 16) == 0)
        return;
    char aside[4200];
    int rc = st_storage_set_aside(t->env, dir, "stray", aside, sizeof aside);
    if (rc)
        ST_ERROR("partition %s-%d: %s belongs to another topic id and cannot be moved aside: %s",
                 topic, index, dir, st_strerror(rc));
    else
        ST_WARN("partition %s-%d: %s belonged to another topic id; kept as %s", topic, index, dir,
                aside);
}

/* The high watermark the log allows now (the one place it is computed). */
static int64_t hw_of(st_log_t *log)
{
    return st_log_config(log)->flush_policy == ST_FLUSH_STRICT ? st_log_durable_offset(log)
                                                               : st_log_end_offset(log);
}

int st_parts_open(st_parts_t *t, const char *topic, const uint8_t topic_id[16], int32_t index,
                  const st_log_config_t *lc, st_part_t **out)
{
    st_part_t *p = st_parts_get(t, topic_id, index);
    if (p) {
        *out = p;
        return 0;
    }
    char dir[4096];
    int rc = st_storage_partition_dir(dir, sizeof dir, t->cfg.log_dirs, topic, index);
    if (rc)
        return rc;
    p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->topic = strdup(topic);
    memcpy(p->topic_id, topic_id, 16);
    p->index = index;
    p->parts = t;
    for (int i = 0; i < ST_PART_VERIFYING; i++)
        p->verifying[i].pid = -1;
    if (!p->topic) {
        free(p);
        return -ENOMEM;
    }
    refuse_foreign(t, topic, topic_id, index, dir);
    rc = st_log_open(t->env, dir, lc, &p->log);
    if (rc) {
        /* Offline: in the table without a log, so requests get KAFKA_STORAGE_ERROR and the
         * other partitions are served. */
        ST_ERROR("partition %s-%d is offline: cannot open %s: %s", topic, index, dir,
                 st_strerror(rc));
        p->log = NULL;
        p->open_err = rc;
        st_pstate_init(&p->pstate);
        insert(t, p);
        *out = p;
        return rc;
    }
    st_pstate_init(&p->pstate);
    st_pstate_set_limits(&p->pstate, (size_t)t->cfg.producer_ids_max,
                         t->cfg.producer_id_expiration_ms);
    if (st_pstate_attach(&p->pstate, &t->env->fs, dir))
        ST_WARN("partition %s-%d: no producer state snapshots (out of memory)", topic, index);
    st_log_set_cut_hook(p->log, on_cut, p);
    int64_t replayed;
    int64_t t0 = st_mono_ns();
    rc = load_producers(p, &replayed);
    if (rc)
        ST_WARN("partition %s-%d: cannot rebuild producer state: %s", topic, index,
                st_strerror(rc));
    else
        ST_DEBUG("partition %s-%d: %zu producer(s) from snapshot %" PRId64 " and %" PRId64
                 " batch header(s) in %" PRId64 " us",
                 topic, index, st_pstate_count(&p->pstate), p->pstate.snap_offset, replayed,
                 (st_mono_ns() - t0) / 1000);
    uint8_t have[16];
    if (st_log_topic_id(p->log, have) != 0)
        st_log_set_topic_id(p->log, topic_id);
    p->hw = hw_of(p->log);
    st_pstate_hw_moved(&p->pstate, p->hw);
    p->lso = st_part_lso(p);
    st_log_set_clean_limit(p->log, p->lso);
    st_log_set_retention_limit(p->log, p->hw);
    insert(t, p);
    *out = p;
    return 0;
}

static void tick_producers(st_part_t *p, int64_t now_ms)
{
    st_pstate_t *ps = &p->pstate;
    st_pstate_expire(ps, now_ms);
    if (ps->evicted != ps->evicted_logged && now_ms - ps->evicted_log_ms >= 10000) {
        ST_WARN("%s-%d: %" PRIu64 " producer id(s) evicted (producer.ids.max.per.partition is "
                "%zu; %" PRIu64 " since the partition opened)",
                p->topic, p->index, ps->evicted - ps->evicted_logged, ps->max_producers,
                ps->evicted);
        ps->evicted_logged = ps->evicted;
        ps->evicted_log_ms = now_ms;
    }
    st_pstate_maybe_save(ps, st_log_durable_offset(p->log), now_ms);
}

static void tick_one(void *arg, st_part_t *p)
{
    (void)arg;
    if (!p->log)
        return; /* offline */
    int rc = st_log_tick(p->log);
    if (rc < 0)
        ST_WARN("housekeeping of %s-%d: %s", p->topic, p->index, st_strerror(rc));
    st_part_update_hw(p);
    st_part_check_deletes(p); /* timeouts */
    st_part_expire_acks(p, st_mono_ms());
    tick_producers(p, st_wall_ms());
}

void st_parts_each(st_parts_t *t, void (*fn)(void *arg, st_part_t *p), void *arg)
{
    for (size_t i = 0; t->buckets && i < t->nbuckets; i++)
        for (st_part_t *p = t->buckets[i], *next; p; p = next) {
            next = p->next;
            fn(arg, p);
        }
}

void st_parts_tick(st_parts_t *t)
{
    st_parts_each(t, tick_one, NULL);
    st_parts_clean_tick(t);
}

/* Frees a partition unlinked from the table once no durability callback refers to it. */
void st_part_maybe_free(st_part_t *p)
{
    if (p->dead && p->pending_durable == 0) {
        st_pstate_fini(&p->pstate);
        free(p->topic);
        free(p);
    }
}

/* Deletes the directory of a partition that never opened (crash-safe, as st_log_delete). */
static int delete_offline(st_parts_t *t, st_part_t *p)
{
    char dir[4096], gone[4200];
    int rc = st_storage_partition_dir(dir, sizeof dir, t->cfg.log_dirs, p->topic, p->index);
    if (rc == 0 && (rc = st_storage_set_aside(t->env, dir, "delete", gone, sizeof gone)) == 0)
        rc = st_storage_delete_dir(t->env, gone);
    return rc == -ENOENT ? 0 : rc;
}

/* Tells every shard of the bitmap once, and forgets them. */
static void wake_set(st_part_t *p, uint64_t set[4])
{
    st_parts_config_t *cfg = &p->parts->cfg;
    for (int w = 0; w < 4; w++) {
        uint64_t bits = set[w];
        set[w] = 0;
        while (bits) {
            int b = __builtin_ctzll(bits);
            bits &= bits - 1;
            cfg->wake(cfg->wake_arg, w * 64 + b, p->topic_id, p->index);
        }
    }
}

static void wake_waiters(st_part_t *p)
{
    wake_set(p, p->waiters);
    wake_set(p, p->lso_waiters);
    wake_set(p, p->replica_waiters);
}

void st_parts_delete(st_parts_t *t, st_part_t *p)
{
    unlink_part(t, p);
    st_parts_clean_forget(t, p);
    st_log_t *log = p->log;
    p->log = NULL; /* see st_parts_fini */
    p->dead = true;
    st_part_repl_fini(p);
    p->pending_durable++;
    int rc = log ? st_log_delete(log) : delete_offline(t, p);
    if (rc)
        ST_WARN("deleting %s-%d: %s", p->topic, p->index, st_strerror(rc));
    p->pending_durable--;
    /* Waiting fetches on other shards re-read and find the partition gone. */
    wake_waiters(p);
    st_part_maybe_free(p);
}

const char *st_part_topic(const st_part_t *p)
{
    return p->topic;
}

const uint8_t *st_part_topic_id(const st_part_t *p)
{
    return p->topic_id;
}

int32_t st_part_index(const st_part_t *p)
{
    return p->index;
}

bool st_part_online(const st_part_t *p)
{
    return p->log != NULL && !p->dead;
}

bool st_part_deleted(const st_part_t *p)
{
    return p->dead;
}

int64_t st_part_hw(const st_part_t *p)
{
    return p->hw;
}

bool st_part_replicated(const st_part_t *p)
{
    return p->repl.on;
}

const st_part_role_t *st_part_role(const st_part_t *p)
{
    return &p->repl.role;
}

st_log_t *st_part_log(st_part_t *p)
{
    return st_part_online(p) ? p->log : NULL;
}

bool st_part_stats(st_part_t *p, st_part_stats_t *out)
{
    if (!st_part_online(p))
        return false;
    memset(out, 0, sizeof *out);
    out->log_start = st_log_start_offset(p->log);
    out->log_end = st_log_end_offset(p->log);
    out->hw = p->hw;
    out->size_bytes = st_log_size_bytes(p->log);
    out->segments = (int32_t)st_log_segment_count(p->log);
    out->records_in = p->records_in;
    out->bytes_in = p->bytes_in;
    out->records_out = p->records_out;
    out->bytes_out = p->bytes_out;
    const st_part_repl_t *rp = &p->repl;
    if (rp->on && rp->role.leader) {
        out->leads = true;
        out->replicas = rp->role.nreplicas;
        out->isr = rp->role.nisr;
        int64_t end = st_log_end_offset(p->log);
        for (int i = 0; i < rp->role.nreplicas; i++) {
            if (rp->role.replicas[i] == rp->role.self)
                continue;
            int64_t lag = rp->pos[i] < 0 ? -1 : end - rp->pos[i];
            if (out->max_follower_lag >= 0 && (lag < 0 || lag > out->max_follower_lag))
                out->max_follower_lag = lag;
        }
    }
    out->lso = st_part_lso(p);
    out->ongoing_txns = (int32_t)st_pstate_ongoing(&p->pstate, &out->oldest_txn_ms);
    out->compact = st_log_config(p->log)->compact;
    if (out->compact)
        st_log_clean_stats(p->log, &out->clean);
    return true;
}

void st_part_reconfigure(st_part_t *p, const st_log_config_t *lc)
{
    if (!p->log)
        return;
    int rc = st_log_set_config(p->log, lc);
    if (rc)
        ST_WARN("reconfiguring %s-%d: %s", p->topic, p->index, st_strerror(rc));
    st_part_update_hw(p);
}

/* Recomputes the high watermark; if it moved, wakes the shards waiting on it. */
void st_part_update_hw(st_part_t *p)
{
    if (!p->log)
        return;
    int64_t local = hw_of(p->log);
    int64_t hw = st_part_repl_hw(p, local);
    bool wake = hw != p->hw;
    p->hw = hw;
    st_pstate_hw_moved(&p->pstate, hw);
    int64_t lso = st_part_lso(p);
    if (lso != p->lso) {
        p->lso = lso;
        wake_set(p, p->lso_waiters);
    }
    st_log_set_clean_limit(p->log, lso);
    st_log_set_retention_limit(p->log, hw);
    /* a follower's log start follows the leader's as far as its high watermark allows */
    if (p->repl.on && !p->repl.role.leader && p->repl.leader_start > st_log_start_offset(p->log))
        st_part_follow_start(p);
    st_part_repl_moved(p);
    if (wake) {
        wake_set(p, p->waiters);
        wake_set(p, p->replica_waiters); /* followers learn the high watermark at once */
    }
}

void st_part_appended(st_part_t *p)
{
    /* replica fetches wait for the log end, which moves ahead of the durable end */
    if (p->log && p->repl.on && p->repl.role.leader &&
        st_log_end_offset(p->log) != p->repl.end_seen) {
        p->repl.end_seen = st_log_end_offset(p->log);
        wake_set(p, p->replica_waiters);
    }
}

void st_part_add_replica_waiter(st_part_t *p, int waiter, int64_t seen_end, int64_t seen_hw)
{
    if (p->log && (st_log_end_offset(p->log) != seen_end || p->hw != seen_hw)) {
        st_parts_config_t *cfg = &p->parts->cfg;
        cfg->wake(cfg->wake_arg, waiter, p->topic_id, p->index);
        return;
    }
    p->replica_waiters[waiter / 64] |= 1ull << (waiter % 64);
}

void st_part_add_waiter(st_part_t *p, int waiter, int64_t seen_hw)
{
    if (p->hw != seen_hw) {
        /* The high watermark moved since the fetch's read (new data, or a cut took some
         * back), so the fetch re-reads now rather than wait. */
        st_parts_config_t *cfg = &p->parts->cfg;
        cfg->wake(cfg->wake_arg, waiter, p->topic_id, p->index);
        return;
    }
    p->waiters[waiter / 64] |= 1ull << (waiter % 64);
}

void st_part_add_lso_waiter(st_part_t *p, int waiter, int64_t seen_lso)
{
    if (st_part_lso(p) != seen_lso) {
        st_parts_config_t *cfg = &p->parts->cfg;
        cfg->wake(cfg->wake_arg, waiter, p->topic_id, p->index);
        return;
    }
    p->lso_waiters[waiter / 64] |= 1ull << (waiter % 64);
}

int64_t st_part_lso(const st_part_t *p)
{
    int64_t first = st_pstate_first_unstable(&p->pstate);
    return first >= 0 && first < p->hw ? first : p->hw;
}

int st_part_aborted(st_part_t *p, int64_t from, int64_t to, st_txn_aborted_t *out, int cap)
{
    return st_part_online(p) ? st_log_txn_aborted(p->log, from, to, out, cap) : 0;
}

const st_pstate_t *st_part_producers(const st_part_t *p)
{
    return st_part_online(p) ? &p->pstate : NULL;
}
