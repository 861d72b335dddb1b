/*
 * cleaner.c — the log cleaner's scheduling on a shard: which compacted partitions clean, in
 * turns of slices on a timer, within the read throttle (the drawing is in partition.h).
 */
#include <stdint.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "partition/partition.h"
#include "partition/part_impl.h"

static void turn(st_timer_t *timer);

void st_parts_clean_init(st_parts_t *t)
{
    memset(&t->cleaner, 0, sizeof t->cleaner);
    st_timer_init(&t->cleaner.timer, turn, t);
}

void st_parts_clean_fini(st_parts_t *t)
{
    st_parts_cleaner_t *c = &t->cleaner;
    if (st_timer_armed(&c->timer))
        st_loop_timer_stop(t->loop, &c->timer);
    for (int i = 0; i < c->nactive; i++)
        c->active[i]->cleaning = false;
    c->nactive = 0;
}

static void drop(st_parts_cleaner_t *c, int i)
{
    c->active[i]->cleaning = false;
    c->active[i] = c->active[--c->nactive];
}

void st_parts_clean_forget(st_parts_t *t, st_part_t *p)
{
    st_parts_cleaner_t *c = &t->cleaner;
    for (int i = 0; p->cleaning && i < c->nactive; i++)
        if (c->active[i] == p)
            drop(c, i);
}

/* st_log_clean_opts_t.last_of_producer: the producer's newest batch stays, even emptied. */
static bool last_of(void *arg, int64_t producer_id, int64_t last_offset)
{
    const st_part_t *p = arg;
    return st_pstate_is_last(&p->pstate, producer_id, last_offset);
}

/* Bytes per second this shard's cleaner may read; <= 0: unlimited. */
static double rate_of(const st_parts_t *t)
{
    int64_t r = t->cfg.cleaner_io_max_bytes_per_second;
    return r == INT64_MAX ? 0 : (double)r / t->cfg.nshards;
}

/* One turn: slices of the active partitions in turn, for ST_CLEAN_TURN_NS at most and within
 * the throttle, then back to the event loop; the timer brings the next turn while work
 * remains. */
static void turn(st_timer_t *timer)
{
    st_parts_t *t = timer->data;
    st_parts_cleaner_t *c = &t->cleaner;
    double rate = rate_of(t);
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
        st_log_clean_opts_t o = {ST_CLEAN_SLICE_BYTES, p->clean_map_bytes, last_of, p};
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
        drop(c, i); /* finished, nothing due, or failed */
    }
    if (c->nactive == 0)
        return;
    int64_t wait_ms = 1;
    if (rate > 0 && c->tokens <= 0)
        wait_ms = 1 + (int64_t)(-c->tokens * 1000 / rate);
    st_loop_timer_start(t->loop, &c->timer, wait_ms);
}

typedef struct {
    st_part_t *best[ST_CLEAN_MAX_ACTIVE];
    double ratio[ST_CLEAN_MAX_ACTIVE];
    int n, want;
    int64_t now_ms;
} pick_t;

/* Keeps the `want` dirtiest due partitions seen so far, dirtiest first. */
static void consider(void *arg, st_part_t *p)
{
    pick_t *k = arg;
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

void st_parts_clean_tick(st_parts_t *t)
{
    st_parts_cleaner_t *c = &t->cleaner;
    const st_parts_config_t *cfg = &t->cfg;
    if (!cfg->cleaner_enable || !t->buckets)
        return;
    int threads = cfg->cleaner_threads < ST_CLEAN_MAX_ACTIVE ? (int)cfg->cleaner_threads
                                                             : ST_CLEAN_MAX_ACTIVE;
    if (c->nactive >= threads)
        return;
    pick_t k = {.want = threads - c->nactive, .now_ms = st_mono_ms()};
    st_parts_each(t, consider, &k);
    if (k.n == 0)
        return;
    int64_t share = cfg->cleaner_dedupe_buffer_size / cfg->nshards / threads;
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
        st_loop_timer_start(t->loop, &c->timer, 0); /* a throttle deficit waits in the turn */
}
