/* partition.c — a shard's partition table, high-watermark wake-ups and log cleaner turns. */
#include "kafka/partition.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "kafka/broker.h"
#include "kafka/fetch_wait.h"
#include "kafka/topic_config.h"

static size_t st_part_hash(const uint8_t id[16], int32_t index)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 16; i++)
        h = (h ^ id[i]) * 1099511628211ull;
    h = (h ^ (uint32_t)index) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

static void st_clean_turn(st_timer_t *timer);

void st_parts_init(st_parts_t *t)
{
    t->nbuckets = 256;
    t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
    t->count = 0;
    memset(&t->cleaner, 0, sizeof t->cleaner);
    st_timer_init(&t->cleaner.timer, st_clean_turn, &t->cleaner);
}

static void st_parts_grow(st_parts_t *t)
{
    size_t n = t->nbuckets * 2;
    st_part_t **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < t->nbuckets; i++)
        for (st_part_t *p = t->buckets[i], *next; p; p = next) {
            next = p->next;
            size_t k = st_part_hash(p->topic_id, p->index) & (n - 1);
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
    size_t k = st_part_hash(topic_id, index) & (t->nbuckets - 1);
    for (st_part_t *p = t->buckets[k]; p; p = p->next)
        if (p->index == index && memcmp(p->topic_id, topic_id, 16) == 0)
            return p;
    return NULL;
}

static void st_parts_unlink(st_parts_t *t, st_part_t *p)
{
    size_t k = st_part_hash(p->topic_id, p->index) & (t->nbuckets - 1);
    for (st_part_t **pp = &t->buckets[k]; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            t->count--;
            return;
        }
}

void st_parts_each(st_parts_t *t, void (*fn)(void *arg, st_part_t *p), void *arg)
{
    for (size_t i = 0; i < t->nbuckets; i++)
        for (st_part_t *p = t->buckets[i], *next; p; p = next) {
            next = p->next;
            fn(arg, p);
        }
}

void st_parts_fini(st_parts_t *t)
{
    st_parts_cleaner_t *c = &t->cleaner;
    if (c->shard && st_timer_armed(&c->timer))
        st_loop_timer_stop(c->shard->loop, &c->timer);
    for (int i = 0; i < c->nactive; i++)
        c->active[i]->cleaning = false;
    c->nactive = 0;
    for (size_t i = 0; i < t->nbuckets; i++)
        for (st_part_t *p = t->buckets[i], *next; p; p = next) {
            next = p->next;
            /* Detach first: closing runs the last durability callbacks, which must see a
             * partition without a log, not one half closed. */
            st_log_t *log = p->log;
            p->log = NULL;
            p->dead = true;
            p->pending_durable++;
            int64_t end = log ? st_log_end_offset(log) : -1;
            int rc = log ? st_log_close(log) : 0;
            if (rc)
                ST_ERROR("closing %s-%d: %s", p->topic, p->index, st_strerror(rc));
            else if (log && (rc = st_pstate_save(&p->pstate, end, st_wall_ms())) < 0)
                ST_WARN("%s-%d: cannot write the producer state snapshot: %s", p->topic, p->index,
                        st_strerror(rc));
            p->pending_durable--;
            st_part_maybe_free(p);
        }
    free(t->buckets);
    t->buckets = NULL;
    t->count = 0;
}

void st_topic_log_config(const st_config_t *cfg, const st_md_topic_t *t, st_log_config_t *out)
{
    st_log_config_default(out);
    out->segment_bytes = st_tcfg_int(cfg, t, "segment.bytes");
    out->segment_ms = st_tcfg_int(cfg, t, "segment.ms");
    out->retention_ms = st_tcfg_int(cfg, t, "retention.ms");
    out->retention_bytes = st_tcfg_int(cfg, t, "retention.bytes");
    char pol[64];
    const char *cp =
        st_tcfg_value(cfg, t, st_tcfg_find("cleanup.policy", 14), pol, sizeof pol, NULL);
    out->retention_deletes = strstr(cp, "delete") != NULL;
    out->compact = strstr(cp, "compact") != NULL;
    char rb[64];
    const char *rv =
        st_tcfg_value(cfg, t, st_tcfg_find("min.cleanable.dirty.ratio", 25), rb, sizeof rb, NULL);
    double ratio = strtod(rv, NULL);
    /* The topic config is checked as a number only; the log takes 0..1. */
    out->min_cleanable_dirty_ratio = isnan(ratio) ? 0.5 : ratio < 0 ? 0 : ratio > 1 ? 1 : ratio;
    out->min_compaction_lag_ms = st_tcfg_int(cfg, t, "min.compaction.lag.ms");
    out->max_compaction_lag_ms = st_tcfg_int(cfg, t, "max.compaction.lag.ms");
    out->delete_retention_ms = st_tcfg_int(cfg, t, "delete.retention.ms");
    out->index_interval_bytes = (int32_t)st_tcfg_int(cfg, t, "index.interval.bytes");
    out->max_message_bytes = (int32_t)st_tcfg_int(cfg, t, "max.message.bytes");
    char buf[64];
    const st_tcfg_desc_t *d = st_tcfg_find("message.timestamp.type", 22);
    const char *ts = st_tcfg_value(cfg, t, d, buf, sizeof buf, NULL);
    out->timestamp_type =
        strcasecmp(ts, "LogAppendTime") == 0 ? ST_TS_LOG_APPEND_TIME : ST_TS_CREATE_TIME;
    out->flush_policy =
        st_tcfg_int(cfg, t, "write.caching") ? ST_FLUSH_WRITE_CACHING : ST_FLUSH_STRICT;
    out->flush_messages = st_tcfg_int(cfg, t, "flush.messages");
    out->flush_ms = st_tcfg_int(cfg, t, "flush.ms");
}

/* Rebuilds the idempotent producers' state: the newest usable snapshot, then the headers of
 * the batches after it (only headers are read: 61 bytes per batch); without a snapshot, every
 * batch header in the log. A replayed producer's last use is its batch's maxTimestamp (never
 * later than now), as Kafka does. */
static int st_part_load_producers(st_part_t *p, int64_t *replayed)
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
                if (h.producer_id >= 0 && st_batch_last_offset(&h) >= from)
                    st_pstate_record(&p->pstate, h.producer_id, h.producer_epoch, h.base_sequence,
                                     st_pstate_seq_add(h.base_sequence, h.last_offset_delta),
                                     h.base_offset, st_batch_last_offset(&h),
                                     h.max_timestamp < now ? h.max_timestamp : now);
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
static void st_part_on_cut(void *arg, int64_t new_end)
{
    st_part_t *p = arg;
    st_pstate_truncate(&p->pstate, new_end);
}

static void st_parts_insert(st_parts_t *t, st_part_t *p)
{
    if (t->count >= t->nbuckets)
        st_parts_grow(t);
    size_t k = st_part_hash(p->topic_id, p->index) & (t->nbuckets - 1);
    p->next = t->buckets[k];
    t->buckets[k] = p;
    t->count++;
}

/* A directory under the partition's name that belongs to another topic id (an older topic of
 * the same name whose deletion a crash interrupted, or a copy from elsewhere) is never served:
 * it is renamed aside as "-stray", kept for an operator, and the partition starts afresh. */
static void st_parts_refuse_foreign(st_kshard_t *s, const st_md_topic_t *t, int32_t index,
                                    const char *dir)
{
    uint8_t have[16];
    if (st_storage_read_topic_id(&s->env, dir, have) != 0 || memcmp(have, t->id, 16) == 0)
        return;
    char aside[4200];
    int rc = st_storage_set_aside(&s->env, dir, "stray", aside, sizeof aside);
    if (rc)
        ST_ERROR("partition %s-%d: %s belongs to another topic id and cannot be moved aside: %s",
                 t->name, index, dir, st_strerror(rc));
    else
        ST_WARN("partition %s-%d: %s belonged to another topic id; kept as %s", t->name, index, dir,
                aside);
}

int st_parts_open(st_kshard_t *s, const st_md_topic_t *t, int32_t index, st_part_t **out)
{
    st_part_t *p = st_parts_get(&s->parts, t->id, index);
    if (p) {
        *out = p;
        return 0;
    }
    char dir[4096];
    int rc = st_storage_partition_dir(dir, sizeof dir, s->b->cfg->log_dirs, t->name, index);
    if (rc)
        return rc;
    st_log_config_t lc;
    st_topic_log_config(s->b->cfg, t, &lc);
    p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->topic = strdup(t->name);
    memcpy(p->topic_id, t->id, 16);
    p->index = index;
    if (!p->topic) {
        free(p);
        return -ENOMEM;
    }
    st_parts_refuse_foreign(s, t, index, dir);
    rc = st_log_open(&s->env, dir, &lc, &p->log);
    if (rc) {
        /* Offline: in the table without a log, so requests get KAFKA_STORAGE_ERROR and the
         * other partitions are served. */
        ST_ERROR("partition %s-%d is offline: cannot open %s: %s", t->name, index, dir,
                 st_strerror(rc));
        p->log = NULL;
        p->open_err = rc;
        st_pstate_init(&p->pstate);
        st_parts_insert(&s->parts, p);
        *out = p;
        return rc;
    }
    st_pstate_init(&p->pstate);
    st_pstate_set_limits(&p->pstate, (size_t)s->b->cfg->producer_ids_max_per_partition,
                         s->b->cfg->producer_id_expiration_ms);
    if (st_pstate_attach(&p->pstate, &s->env.fs, dir))
        ST_WARN("partition %s-%d: no producer state snapshots (out of memory)", t->name, index);
    st_log_set_cut_hook(p->log, st_part_on_cut, p);
    int64_t replayed;
    int64_t t0 = st_mono_ns();
    rc = st_part_load_producers(p, &replayed);
    if (rc)
        ST_WARN("partition %s-%d: cannot rebuild producer state: %s", t->name, index,
                st_strerror(rc));
    else
        ST_DEBUG("partition %s-%d: %zu producer(s) from snapshot %" PRId64 " and %" PRId64
                 " batch header(s) in %" PRId64 " us",
                 t->name, index, st_pstate_count(&p->pstate), p->pstate.snap_offset, replayed,
                 (st_mono_ns() - t0) / 1000);
    uint8_t have[16];
    if (st_log_topic_id(p->log, have) != 0)
        st_log_set_topic_id(p->log, t->id);
    p->hw = lc.flush_policy == ST_FLUSH_STRICT ? st_log_durable_offset(p->log)
                                               : st_log_end_offset(p->log);
    st_parts_insert(&s->parts, p);
    *out = p;
    return 0;
}

void st_part_tick_producers(st_part_t *p, int64_t now_ms)
{
    if (!p->log)
        return;
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
static int st_parts_delete_offline(st_kshard_t *s, st_part_t *p)
{
    char dir[4096], gone[4200];
    int rc = st_storage_partition_dir(dir, sizeof dir, s->b->cfg->log_dirs, p->topic, p->index);
    if (rc == 0 && (rc = st_storage_set_aside(&s->env, dir, "delete", gone, sizeof gone)) == 0)
        rc = st_storage_delete_dir(&s->env, gone);
    return rc == -ENOENT ? 0 : rc;
}

static void st_clean_drop(st_parts_cleaner_t *c, int i)
{
    c->active[i]->cleaning = false;
    c->active[i] = c->active[--c->nactive];
}

void st_parts_delete(st_kshard_t *s, st_part_t *p)
{
    st_parts_unlink(&s->parts, p);
    st_parts_cleaner_t *c = &s->parts.cleaner;
    for (int i = 0; p->cleaning && i < c->nactive; i++)
        if (c->active[i] == p)
            st_clean_drop(c, i);
    st_log_t *log = p->log;
    p->log = NULL; /* see st_parts_fini */
    p->dead = true;
    p->pending_durable++;
    int rc = log ? st_log_delete(log) : st_parts_delete_offline(s, p);
    if (rc)
        ST_WARN("deleting %s-%d: %s", p->topic, p->index, st_strerror(rc));
    p->pending_durable--;
    /* Waiting fetches on other shards re-read and find the partition gone. */
    for (int i = 0; i < s->b->nshards; i++)
        if (p->waiters[i / 64] & (1ull << (i % 64)))
            st_fetch_notify(s, i, p->topic_id, p->index);
    memset(p->waiters, 0, sizeof p->waiters);
    st_part_maybe_free(p);
}

void st_parts_reconfigure(st_kshard_t *s, st_part_t *p, const st_md_topic_t *t)
{
    st_log_config_t lc;
    st_topic_log_config(s->b->cfg, t, &lc);
    if (!p->log)
        return;
    int rc = st_log_set_config(p->log, &lc);
    if (rc)
        ST_WARN("reconfiguring %s-%d: %s", p->topic, p->index, st_strerror(rc));
    st_part_update_hw(s, p);
}

void st_part_update_hw(st_kshard_t *s, st_part_t *p)
{
    if (!p->log)
        return;
    int64_t hw = st_log_config(p->log)->flush_policy == ST_FLUSH_STRICT
                     ? st_log_durable_offset(p->log)
                     : st_log_end_offset(p->log);
    if (hw == p->hw)
        return;
    p->hw = hw;
    for (int w = 0; w < 4; w++) {
        uint64_t bits = p->waiters[w];
        p->waiters[w] = 0;
        while (bits) {
            int b = __builtin_ctzll(bits);
            bits &= bits - 1;
            st_fetch_notify(s, w * 64 + b, p->topic_id, p->index);
        }
    }
}

void st_part_add_waiter(st_kshard_t *s, st_part_t *p, int waiter, int64_t offset)
{
    if (p->hw != offset) {
        /* `offset` is the high watermark the fetch's read saw: it moved since (new data, or
         * a cut took some back), so the fetch re-reads now rather than wait. */
        st_fetch_notify(s, waiter, p->topic_id, p->index);
        return;
    }
    p->waiters[waiter / 64] |= 1ull << (waiter % 64);
}

/* ---- the log cleaner ----------------------------------------------------------------------- */

/* st_log_clean_opts_t.last_of_producer: the producer's newest batch stays, even emptied. */
static bool st_clean_last_of(void *arg, int64_t producer_id, int64_t last_offset)
{
    const st_part_t *p = arg;
    return st_pstate_is_last(&p->pstate, producer_id, last_offset);
}

/* Bytes per second this shard's cleaner may read; <= 0: unlimited. */
static double st_clean_rate(const st_kshard_t *s)
{
    int64_t r = s->b->cfg->log_cleaner_io_max_bytes_per_second;
    return r == INT64_MAX ? 0 : (double)r / s->b->nshards;
}

/* One turn: slices of the active partitions in turn, for ST_CLEAN_TURN_NS at most and within
 * the throttle, then back to the event loop; the timer brings the next turn while work
 * remains. */
static void st_clean_turn(st_timer_t *timer)
{
    st_parts_cleaner_t *c = timer->data;
    st_kshard_t *s = c->shard;
    double rate = st_clean_rate(s);
    int64_t t0 = st_mono_ns();
    if (rate > 0) {
        c->tokens += (double)(t0 - c->refill_ns) * rate / 1e9;
        if (c->tokens > rate / 10 + ST_CLEAN_SLICE_BYTES)
            c->tokens = rate / 10 + ST_CLEAN_SLICE_BYTES; /* bursts of 100 ms at most */
    }
    c->refill_ns = t0;
    int waiting = 0;
    for (int i = 0;
         c->nactive > 0 && (rate <= 0 || c->tokens > 0) && st_mono_ns() - t0 < ST_CLEAN_TURN_NS;) {
        if (i >= c->nactive)
            i = 0;
        st_part_t *p = c->active[i];
        st_log_clean_opts_t o = {ST_CLEAN_SLICE_BYTES, p->clean_map_bytes, st_clean_last_of, p};
        int64_t n = p->log ? st_log_clean_step(p->log, &o) : 0;
        if (n > 0) {
            c->tokens -= (double)n;
            i++;
            continue;
        }
        if (n == ST_E_AGAIN) {
            /* Its syncs are in flight: the next turn looks again. */
            if (++waiting >= c->nactive)
                break;
            i++;
            continue;
        }
        if (n < 0) {
            /* The log is unharmed and storage logged why; a key map too small for one
             * segment's keys gets the whole share next time. */
            p->clean_full_map = n == ST_E_TOO_LARGE;
            p->clean_retry_ms = st_mono_ms() + (p->clean_full_map ? 0 : ST_CLEAN_RETRY_MS);
        }
        st_clean_drop(c, i); /* finished, nothing due, or failed */
    }
    if (c->nactive == 0)
        return;
    int64_t wait_ms = 1;
    if (rate > 0 && c->tokens <= 0)
        wait_ms = 1 + (int64_t)(-c->tokens * 1000 / rate);
    st_loop_timer_start(s->loop, &c->timer, wait_ms);
}

typedef struct {
    st_part_t *best[ST_CLEAN_MAX_ACTIVE];
    double ratio[ST_CLEAN_MAX_ACTIVE];
    int n, want;
    int64_t now_ms;
} st_clean_pick_t;

/* Keeps the `want` dirtiest due partitions seen so far, dirtiest first. */
static void st_clean_consider(void *arg, st_part_t *p)
{
    st_clean_pick_t *k = arg;
    if (!p->log || p->cleaning || !st_log_config(p->log)->compact ||
        k->now_ms < p->clean_retry_ms || !st_log_clean_due(p->log))
        return;
    st_log_clean_stats_t st;
    st_log_clean_stats(p->log, &st);
    double r = st.dirty_ratio;
    if (k->n == k->want && r <= k->ratio[k->n - 1])
        return;
    int i = k->n < k->want ? k->n++ : k->n - 1; /* a free slot, or in place of the cleanest */
    for (; i > 0 && k->ratio[i - 1] < r; i--) {
        k->best[i] = k->best[i - 1];
        k->ratio[i] = k->ratio[i - 1];
    }
    k->best[i] = p;
    k->ratio[i] = r;
}

void st_parts_clean_tick(st_kshard_t *s)
{
    st_parts_cleaner_t *c = &s->parts.cleaner;
    const st_config_t *cfg = s->b->cfg;
    c->shard = s;
    if (!cfg->log_cleaner_enable || !s->parts.buckets)
        return;
    int threads = cfg->log_cleaner_threads < ST_CLEAN_MAX_ACTIVE ? (int)cfg->log_cleaner_threads
                                                                 : ST_CLEAN_MAX_ACTIVE;
    if (c->nactive >= threads)
        return;
    st_clean_pick_t k = {.want = threads - c->nactive, .now_ms = st_mono_ms()};
    st_parts_each(&s->parts, st_clean_consider, &k);
    if (k.n == 0)
        return;
    int64_t share = cfg->log_cleaner_dedupe_buffer_size / s->b->nshards / threads;
    for (int i = 0; i < k.n; i++) {
        st_part_t *p = k.best[i];
        /* The map needs room for the dirty part's keys: one per 8 bytes covers uncompressed
         * records (7 bytes at least); more than that is the share. */
        st_log_clean_stats_t st;
        st_log_clean_stats(p->log, &st);
        int64_t want = st.dirty_bytes > share / 8 ? share : st.dirty_bytes * 8;
        if (want < (1 << 20))
            want = 1 << 20;
        if (p->clean_full_map || want > share)
            want = share;
        p->clean_map_bytes = (size_t)want;
        p->clean_full_map = false;
        p->cleaning = true;
        c->active[c->nactive++] = p;
    }
    if (!st_timer_armed(&c->timer))
        st_loop_timer_start(s->loop, &c->timer, 0); /* a throttle deficit waits in the turn */
}
