/*
 * Model test: random append / read / roll / truncate / start-offset / retention / reopen /
 * crash / sync-completion / fault steps against a simple in-memory model of the log (a list
 * of batches with their bytes), asserting after every step that the two agree. Fixed seeds;
 * a failure prints the seed and the step. STORAGE_MODEL_SEED / STORAGE_MODEL_STEPS override.
 * Every seed runs twice: without and with a (small) journal on the env, a crash then replaying
 * it before the reopen (STORAGE_MODEL_JOURNAL=0/1 runs one of the two).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "base/err.h"
#include "base/log.h"
#include "storage/journal.h"
#include "testutil.h"

#define DIR "/data/m-0"

typedef struct mbatch {
    int64_t base, last;
    uint8_t *bytes;
    size_t size;
} mbatch_t;

typedef struct waiter_rec {
    int64_t offset;
    int calls;
    int res;
    int64_t durable_at_call;
    struct model *m;
} waiter_rec_t;

typedef struct model {
    mbatch_t *b;
    size_t n, cap;
    int64_t start, end;
    uint64_t rng;
    uint64_t seed;
    int step;
    tenv_t t;
    st_log_config_t c;
    st_log_t *log;
    waiter_rec_t *w;
    size_t nw, capw;
    mbatch_t *hist; /* every batch ever appended: what a crash may bring back */
    size_t nh, caph;
    bool journal; /* the env has a journal */
    st_journal_t *j;
} model_t;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail_msg("seed %" PRIu64 " step %d: %s (line %d)", m->seed, m->step, #cond, __LINE__); \
    } while (0)

static uint64_t rnd(model_t *m)
{
    m->rng ^= m->rng << 13;
    m->rng ^= m->rng >> 7;
    m->rng ^= m->rng << 17;
    return m->rng;
}

static int64_t rnd_in(model_t *m, int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(rnd(m) % (uint64_t)(hi - lo + 1));
}

/* Drops batches whose last offset >= to; the end becomes the base of the first dropped. */
static void model_truncate(model_t *m, int64_t to)
{
    int64_t new_end = m->end;
    while (m->n > 0 && m->b[m->n - 1].last >= to) {
        new_end = m->b[m->n - 1].base;
        free(m->b[m->n - 1].bytes);
        m->n--;
    }
    m->end = new_end;
}

/* truncate_to(to): batches with last >= to go; the end is min(to, first removed base). */
static void model_cut(model_t *m, int64_t to)
{
    if (to >= m->end)
        return;
    model_truncate(m, to);
    if (m->end > to)
        m->end = to;
}

static void on_durable(void *arg, int res)
{
    waiter_rec_t *w = arg;
    w->calls++;
    w->res = res;
    w->durable_at_call = w->m->log ? st_log_durable_offset(w->m->log) : -1;
}

static void do_open(model_t *m)
{
    int rc = st_log_open(&m->t.env, DIR, &m->c, &m->log);
    if (rc != 0)
        fail_msg("seed %" PRIu64 " step %d: open: %s", m->seed, m->step, st_errname(rc));
}

/* Compares one read against the model. */
static void check_read(model_t *m, int64_t off, int64_t max_bytes, int64_t max_offset)
{
    st_log_read_t r;
    int rc = st_log_read(m->log, off, max_bytes, max_offset, &r);
    if (off < m->start || off > m->end) {
        CHECK(rc == ST_E_OUT_OF_RANGE);
        return;
    }
    CHECK(rc == 0);
    int64_t lim = max_offset < 0 || max_offset > m->end ? m->end : max_offset;
    /* Expected batches. */
    size_t i = 0;
    while (i < m->n && m->b[i].last < off)
        i++;
    st_buf_t want;
    st_buf_init(&want);
    int64_t want_next = off;
    for (; i < m->n; i++) {
        if (m->b[i].last >= lim || (want.len > 0 && (int64_t)(want.len + m->b[i].size) > max_bytes))
            break;
        st_buf_append(&want, m->b[i].bytes, m->b[i].size);
        want_next = m->b[i].last + 1;
    }
    uint8_t *got = malloc((size_t)r.bytes + 1);
    CHECK(st_log_read_copy(&r, got, (size_t)r.bytes) == r.bytes);
    if (r.nranges < ST_LOG_READ_MAX_RANGES) {
        CHECK((size_t)r.bytes == want.len);
        CHECK(r.next_offset == want_next);
    } else {
        CHECK((size_t)r.bytes <= want.len); /* stopped at the range cap: a prefix */
    }
    CHECK(r.bytes == 0 || memcmp(got, want.data, (size_t)r.bytes) == 0);
    free(got);
    st_buf_fini(&want);
    st_log_read_release(&r);
}

static void check_state(model_t *m)
{
    CHECK(st_log_end_offset(m->log) == m->end);
    CHECK(st_log_start_offset(m->log) == m->start);
    CHECK(st_log_durable_offset(m->log) <= m->end);
    CHECK(st_log_check(m->log));
}

static void step_append(model_t *m)
{
    st_buf_t b;
    st_buf_init(&b);
    int nb = (int)rnd_in(m, 1, 3);
    for (int i = 0; i < nb; i++)
        tb_batch(&b, (int32_t)rnd_in(m, 1, 5), (size_t)rnd_in(m, 0, 300),
                 m->t.now - rnd_in(m, 0, 5000), (uint8_t)rnd(m));
    bool enospc = rnd_in(m, 0, 30) == 0;
    if (enospc)
        st_faultfs_set_capacity(m->t.ff,
                                st_faultfs_used(m->t.ff) + rnd_in(m, 0, (int64_t)b.len - 1));
    st_log_append_info_t info;
    int rc = st_log_append(m->log, b.data, b.len, (int32_t)(m->step / 500), &info, NULL);
    if ((int64_t)b.len > m->c.segment_bytes) {
        st_faultfs_set_capacity(m->t.ff, -1);
        CHECK(rc == ST_E_TOO_LARGE);
        st_buf_fini(&b);
        return;
    }
    if (enospc)
        st_faultfs_set_capacity(m->t.ff, -1);
    /* Under the budget, an append may still fit: a roll can truncate files a crash left
     * behind (index files of a segment whose removal had not reached the disk). */
    if (enospc && rc != 0) {
        CHECK(rc == -ENOSPC);
        CHECK(st_log_end_offset(m->log) == m->end);
        st_buf_fini(&b);
        return;
    }
    if (rc != 0)
        fail_msg("seed %" PRIu64 " step %d: append: %s", m->seed, m->step, st_errname(rc));
    CHECK(info.base_offset == m->end);
    if (enospc && m->journal && st_log_end_offset(m->log) < info.last_offset + 1) {
        /* The journal could not take it and the fence its sync needed did not fit either:
         * that sync failed (inside the append: syncs complete inline here) and cut it off. */
        CHECK(st_log_end_offset(m->log) == m->end);
        st_buf_fini(&b);
        return;
    }
    for (size_t p = 0; p < b.len;) {
        st_batch_hdr_t h;
        CHECK(st_batch_check(b.data + p, b.len - p, &h) == 0);
        if (m->n == m->cap) {
            m->cap = m->cap ? m->cap * 2 : 64;
            m->b = realloc(m->b, m->cap * sizeof *m->b);
        }
        mbatch_t *mb = &m->b[m->n++];
        mb->base = h.base_offset;
        mb->last = st_batch_last_offset(&h);
        mb->size = (size_t)st_batch_size(&h);
        mb->bytes = malloc(mb->size);
        memcpy(mb->bytes, b.data + p, mb->size);
        if (m->nh == m->caph) {
            m->caph = m->caph ? m->caph * 2 : 64;
            m->hist = realloc(m->hist, m->caph * sizeof *m->hist);
        }
        m->hist[m->nh] = *mb;
        m->hist[m->nh].bytes = malloc(mb->size);
        memcpy(m->hist[m->nh].bytes, mb->bytes, mb->size);
        m->nh++;
        p += mb->size;
    }
    m->end = info.last_offset + 1;
    if (rnd_in(m, 0, 3) == 0) {
        if (m->nw == m->capw) {
            /* Records are referenced by pending callbacks: never move them. */
            return;
        }
        waiter_rec_t *w = &m->w[m->nw++];
        memset(w, 0, sizeof *w);
        w->m = m;
        w->offset = m->end;
        rc = st_log_wait_durable(m->log, m->end, on_durable, w);
        CHECK(rc >= 0 || rc == -EIO);
        if (rc != 0)
            w->calls = -100; /* not queued */
    }
    st_buf_fini(&b);
}

static void model_after_reopen(model_t *m, int64_t min_end, bool crashed)
{
    int64_t end = st_log_end_offset(m->log);
    int64_t start = st_log_start_offset(m->log);
    if (!crashed) {
        CHECK(end == m->end);
        CHECK(start == m->start);
        return;
    }
    /* Only what was synced is promised: offsets below min_end are the model's. Past it the
     * log may hold anything that was once written there (an unsynced truncation can come
     * back), but only whole batches that some append wrote. */
    CHECK(end >= min_end);
    model_truncate(m, min_end);
    CHECK(m->end == min_end);
    int64_t off = start > min_end ? start : min_end;
    while (off < end) {
        st_buf_t b;
        st_buf_init(&b);
        int64_t next;
        CHECK(tb_read_all(m->log, off, 1 << 16, &b, &next) == 0);
        if (b.len == 0) { /* a gap up to the end */
            st_buf_fini(&b);
            break;
        }
        CHECK(next > off);
        for (size_t p = 0; p < b.len;) {
            st_batch_hdr_t h;
            CHECK(st_batch_check(b.data + p, b.len - p, &h) == 0);
            size_t size = (size_t)st_batch_size(&h);
            bool known = false;
            for (size_t i = 0; i < m->nh && !known; i++)
                known = m->hist[i].size == size && memcmp(m->hist[i].bytes, b.data + p, size) == 0;
            CHECK(known);
            if (h.base_offset >= m->end) {
                if (m->n == m->cap) {
                    m->cap = m->cap ? m->cap * 2 : 64;
                    m->b = realloc(m->b, m->cap * sizeof *m->b);
                }
                mbatch_t *mb = &m->b[m->n++];
                mb->base = h.base_offset;
                mb->last = st_batch_last_offset(&h);
                mb->size = size;
                mb->bytes = malloc(size);
                memcpy(mb->bytes, b.data + p, size);
                m->end = mb->last + 1;
            }
            p += size;
        }
        st_buf_fini(&b);
        off = next;
    }
    m->end = end;
    /* The start offset may fall back to an older persisted value, never forward. */
    CHECK(start <= m->start || start == end || start <= min_end);
    m->start = start;
}

static void run_model(uint64_t seed, int steps, bool journal)
{
    model_t *m = calloc(1, sizeof *m);
    m->seed = seed;
    m->journal = journal;
    m->rng = seed * 0x9E3779B97F4A7C15ULL + 7;
    m->capw = (size_t)steps + 8;
    m->w = calloc(m->capw, sizeof *m->w);
    tenv_init(&m->t, seed);
    st_log_config_default(&m->c);
    m->c.segment_bytes = 2048 + (int64_t)(seed % 4) * 1024;
    m->c.index_interval_bytes = (int32_t)(64 << (seed % 4));
    m->c.retention_ms = -1;
    if (journal && st_journal_open(&m->t.env, "/data", 0, ST_JOURNAL_MIN_BYTES, &m->j) != 0)
        fail_msg("seed %" PRIu64 ": cannot open the journal", seed);
    do_open(m);
    int64_t mod = 100;
    for (m->step = 0; m->step < steps; m->step++) {
        int64_t op = rnd_in(m, 0, mod - 1);
        if (getenv("STORAGE_MODEL_TRACE"))
            fprintf(stderr,
                    "step %d op %" PRId64 " start %" PRId64 " end %" PRId64 " durable %" PRId64
                    "\n",
                    m->step, op, m->start, m->end, st_log_durable_offset(m->log));
        if (op < 45) {
            step_append(m);
        } else if (op < 63) {
            int64_t lo = m->start - 2, hi = m->end + 2;
            check_read(m, rnd_in(m, lo, hi), rnd_in(m, 1, 3000),
                       rnd_in(m, 0, 3) == 0 ? rnd_in(m, m->start, m->end) : -1);
        } else if (op < 66) {
            CHECK(st_log_roll(m->log) == 0);
        } else if (op < 70) {
            int64_t to = rnd_in(m, m->start, m->end);
            CHECK(st_log_truncate_to(m->log, to) == 0);
            /* The batch holding `to` goes whole. */
            int64_t before_end = m->end;
            model_cut(m, to);
            if (m->end < m->start)
                m->end = m->start;
            if (st_log_end_offset(m->log) != m->end)
                fail_msg("seed %" PRIu64 " step %d: truncate_to(%" PRId64 ") from %" PRId64
                         ": log end %" PRId64 ", model %" PRId64,
                         m->seed, m->step, to, before_end, st_log_end_offset(m->log), m->end);
        } else if (op < 72) {
            int64_t to = rnd_in(m, m->start, m->end);
            CHECK(st_log_set_start_offset(m->log, to) == 0);
            m->start = to;
        } else if (op < 75) {
            m->c.retention_bytes = rnd_in(m, 0, 1) ? -1 : rnd_in(m, 0, 20000);
            CHECK(st_log_set_config(m->log, &m->c) == 0);
            int64_t before = st_log_start_offset(m->log);
            CHECK(st_log_enforce_retention(m->log) >= 0);
            int64_t start = st_log_start_offset(m->log);
            CHECK(start >= before);
            CHECK(start <= m->end);
            m->start = start;
        } else if (op < 78) {
            int64_t min_end = m->end;
            CHECK(st_log_close(m->log) == 0);
            m->log = NULL;
            do_open(m);
            model_after_reopen(m, min_end, false);
        } else if (op < 81) {
            int64_t durable = st_log_durable_offset(m->log);
            st_faultfs_crash_mode(m->t.ff, (st_crash_mode_t)rnd_in(m, 0, ST_CRASH__COUNT - 1));
            st_log_close(m->log);
            m->log = NULL;
            tenv_complete(&m->t, (size_t)-1); /* late completions of the dead process */
            if (m->j)
                st_journal_close(m->j);
            m->j = NULL;
            st_faultfs_restart(m->t.ff);
            if (m->journal) {
                CHECK(st_journal_recover(m->t.env.fs, "/data", NULL) == 0);
                CHECK(st_journal_open(&m->t.env, "/data", 0, ST_JOURNAL_MIN_BYTES, &m->j) == 0);
            }
            do_open(m);
            model_after_reopen(m, durable, true);
        } else if (op < 90) {
            tenv_complete(&m->t, (size_t)rnd_in(m, 0, 3));
        } else if (op < 93) {
            m->t.defer = !m->t.defer;
            if (!m->t.defer)
                tenv_complete(&m->t, (size_t)-1);
        } else if (op < 95) {
            m->c.flush_policy = rnd_in(m, 0, 1) ? ST_FLUSH_STRICT : ST_FLUSH_WRITE_CACHING;
            m->c.flush_messages = rnd_in(m, -1, 20);
            CHECK(st_log_set_config(m->log, &m->c) == 0);
        } else if (op < 97) {
            st_faultfs_set_short_writes(m->t.ff, rnd_in(m, 0, 1));
        } else {
            m->t.now += rnd_in(m, 0, 10000);
            CHECK(st_log_tick(m->log) >= 0);
            int64_t s = st_log_start_offset(m->log);
            CHECK(s >= m->start);
            m->start = s;
        }
        if (m->start > m->end)
            m->start = m->end;
        check_state(m);
    }
    /* Every waiter heard exactly once by the end; successes only for durable offsets. */
    tenv_complete(&m->t, (size_t)-1);
    CHECK(st_log_close(m->log) == 0);
    m->log = NULL;
    tenv_complete(&m->t, (size_t)-1);
    if (m->j)
        CHECK(st_journal_close(m->j) == 0);
    m->j = NULL;
    for (size_t i = 0; i < m->nw; i++) {
        waiter_rec_t *w = &m->w[i];
        if (w->calls == -100)
            continue;
        if (w->calls != 1)
            fail_msg("seed %" PRIu64 ": waiter %zu for %" PRId64 " called %d times", seed, i,
                     w->offset, w->calls);
        if (w->res == 0 && w->durable_at_call >= 0 && w->durable_at_call < w->offset)
            fail_msg("seed %" PRIu64 ": waiter %zu told durable at %" PRId64 " < %" PRId64, seed, i,
                     w->durable_at_call, w->offset);
    }
    for (size_t i = 0; i < m->n; i++)
        free(m->b[i].bytes);
    free(m->b);
    for (size_t i = 0; i < m->nh; i++)
        free(m->hist[i].bytes);
    free(m->hist);
    free(m->w);
    tenv_fini(&m->t);
    free(m);
}

static void test_model(void **state)
{
    (void)state;
    const char *s = getenv("STORAGE_MODEL_SEED");
    const char *n = getenv("STORAGE_MODEL_STEPS");
    const char *jo = getenv("STORAGE_MODEL_JOURNAL");
    int steps = n ? atoi(n) : 4000;
    for (int journal = 0; journal < 2; journal++) {
        if (jo && atoi(jo) != journal)
            continue;
        if (s) {
            run_model(strtoull(s, NULL, 10), steps, journal);
            continue;
        }
        for (uint64_t seed = 1; seed <= 8; seed++)
            run_model(seed, steps, journal);
    }
}

int main(void)
{
    if (!getenv("STORAGE_MODEL_TRACE"))
        st_log_set_level(ST_LOG_ERROR + 1); /* recovery and retention log on purpose here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
