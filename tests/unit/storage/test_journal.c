/*
 * Unit tests for storage/journal: one sync per group-commit round whatever the number of logs,
 * waiters only after the journal's sync, crash + replay (acknowledged batches back,
 * byte-identical, in order), truncations never undone by replay (entries and fences), a full
 * journal, a failed journal sync, a corrupt entry, a recreated partition, a crash during
 * replay, segments synced lazily by the tick.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "base/err.h"
#include "base/log.h"
#include "storage/journal.h"
#include "storage/log_impl.h" /* ST_LOG_WRITEBACK_BYTES */
#include "testutil.h"

#define NLOGS_MAX 64
#define WAL       "/data/.journal/shard-0.wal"

typedef struct jt {
    tenv_t t;
    st_journal_t *j;
    st_log_t *logs[NLOGS_MAX];
    st_buf_t expect[NLOGS_MAX]; /* every acknowledged batch of each log, as appended */
    int n;
    int64_t segment_bytes; /* 0: the default */
} jt_t;

static st_log_config_t cfg_default(void)
{
    st_log_config_t c;
    st_log_config_default(&c);
    return c;
}

static void dir_of(int i, char *buf, size_t n)
{
    snprintf(buf, n, "/data/t-%d", i);
}

static st_log_t *open_i(jt_t *x, int i)
{
    char d[64];
    dir_of(i, d, sizeof d);
    st_log_config_t c = cfg_default();
    if (x->segment_bytes > 0)
        c.segment_bytes = x->segment_bytes;
    st_log_t *log = NULL;
    assert_int_equal(st_log_open(&x->t.env, d, &c, &log), 0);
    return log;
}

static void jt_init(jt_t *x, uint64_t seed, int n, int64_t bytes)
{
    memset(x, 0, sizeof *x);
    tenv_init(&x->t, seed);
    x->n = n;
    if (bytes > 0)
        assert_int_equal(st_journal_open(&x->t.env, "/data", 0, bytes, &x->j), 0);
    for (int i = 0; i < n; i++) {
        x->logs[i] = open_i(x, i);
        st_buf_init(&x->expect[i]);
    }
}

/* The process dies: everything not synced is gone. The logs and journal are freed (every call
 * fails now), the fs restarted. */
static void jt_crash(jt_t *x, st_crash_mode_t mode)
{
    if (!st_faultfs_crashed(x->t.ff))
        st_faultfs_crash_mode(x->t.ff, mode);
    for (int i = 0; i < x->n; i++) {
        if (x->logs[i])
            st_log_close(x->logs[i]);
        x->logs[i] = NULL;
    }
    if (x->j)
        st_journal_close(x->j);
    x->j = NULL;
    tenv_complete(&x->t, (size_t)-1);
    st_faultfs_restart(x->t.ff);
}

static void jt_fini(jt_t *x)
{
    for (int i = 0; i < x->n; i++) {
        if (x->logs[i])
            assert_int_equal(st_log_close(x->logs[i]), 0);
        st_buf_fini(&x->expect[i]);
    }
    if (x->j)
        assert_int_equal(st_journal_close(x->j), 0);
    tenv_fini(&x->t);
}

/* Appends one batch to log i; returns its base offset; the bytes as written go to *last. */
static int64_t app(jt_t *x, int i, int32_t count, size_t vlen, uint8_t fill, st_buf_t *last)
{
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, count, vlen, 1000 + fill, fill);
    st_log_append_info_t info;
    assert_int_equal(st_log_append(x->logs[i], b.data, b.len, 1, &info, NULL), 0);
    if (last) {
        last->len = 0;
        st_buf_append(last, b.data, b.len);
    }
    st_buf_fini(&b);
    return info.base_offset;
}

typedef struct waiter {
    int calls;
    int res;
} waiter_t;

static void on_durable(void *arg, int res)
{
    waiter_t *w = arg;
    w->calls++;
    w->res = res;
}

/* Appends and waits (inline syncs): the batch is acknowledged, remembered in expect[i]. */
static int64_t app_acked(jt_t *x, int i, int32_t count, size_t vlen, uint8_t fill)
{
    st_buf_t b;
    st_buf_init(&b);
    int64_t base = app(x, i, count, vlen, fill, &b);
    waiter_t w = {0, 0};
    int rc = st_log_wait_durable(x->logs[i], base + count, on_durable, &w);
    assert_int_equal(rc, 1);
    st_buf_append(&x->expect[i], b.data, b.len);
    st_buf_fini(&b);
    return base;
}

static void read_log(st_log_t *log, st_buf_t *out)
{
    int64_t off = st_log_start_offset(log);
    while (off < st_log_end_offset(log)) {
        int64_t next;
        assert_int_equal(tb_read_all(log, off, 1 << 24, out, &next), 0);
        assert_true(next > off);
        off = next;
    }
}

/* After a crash: replay, reopen every log; each holds exactly what was acknowledged, or
 * (at_least) starts with it. */
static void jt_recover_check(jt_t *x, bool at_least, st_journal_recovery_t *rec)
{
    st_journal_recovery_t r;
    assert_int_equal(st_journal_recover(x->t.env.fs, "/data", &r), 0);
    if (rec)
        *rec = r;
    assert_int_equal(st_journal_open(&x->t.env, "/data", 0, 4 << 20, &x->j), 0);
    for (int i = 0; i < x->n; i++) {
        x->logs[i] = open_i(x, i);
        st_buf_t got;
        st_buf_init(&got);
        read_log(x->logs[i], &got);
        if (at_least)
            assert_true(got.len >= x->expect[i].len);
        else
            assert_int_equal(got.len, x->expect[i].len);
        assert_memory_equal(got.data, x->expect[i].data, x->expect[i].len);
        st_buf_fini(&got);
    }
}

/* ---- group commit ------------------------------------------------------------------------ */

/* 64 logs, one journal: a round is one sync however many logs wrote before it started, and no
 * waiter hears of durability before that sync completed. */
static void test_one_sync_per_round(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 1, 64, 8 << 20);
    x.t.defer = true;
    uint64_t fsyncs0 = st_faultfs_calls(x.t.ff, ST_FAULT_FDATASYNC);
    uint64_t submits0 = x.t.submits;
    waiter_t w[64];
    memset(w, 0, sizeof w);
    for (int round = 0; round < 3; round++) {
        /* Log 0 starts a round at once; the other 63 append while it is in flight. */
        for (int i = 0; i < 64; i++) {
            int64_t base = app(&x, i, 2, 50, (uint8_t)(round * 64 + i), NULL);
            assert_int_equal(st_log_wait_durable(x.logs[i], base + 2, on_durable, &w[i]), 0);
        }
        uint64_t s = x.t.submits;
        for (int i = 0; i < 64; i++)
            assert_int_equal(w[i].calls, round);
        assert_int_equal(tenv_complete(&x.t, 1), 1); /* the round in flight */
        /* Completing it issued exactly one more sync, for the 63 (or 64) logs queued. */
        assert_int_equal(x.t.submits, s + 1);
        for (int i = 1; i < 64; i++)
            assert_int_equal(w[i].calls, round); /* not before their round's sync */
        assert_int_equal(tenv_complete(&x.t, 1), 1);
        for (int i = 0; i < 64; i++) {
            assert_int_equal(w[i].calls, round + 1);
            assert_int_equal(w[i].res, 0);
            assert_int_equal(st_log_durable_offset(x.logs[i]), (round + 1) * 2);
        }
        assert_int_equal(x.t.nq, 0);
    }
    uint64_t syncs = x.t.submits - submits0;
    uint64_t fsyncs = st_faultfs_calls(x.t.ff, ST_FAULT_FDATASYNC) - fsyncs0;
    st_journal_stats_t st;
    st_journal_stats(x.j, &st);
    print_message("journal: 64 logs x 3 appends: %llu rounds, %llu syncs (%.2f per round)\n",
                  (unsigned long long)st.rounds, (unsigned long long)syncs,
                  (double)syncs / (double)st.rounds);
    assert_int_equal(syncs, st.rounds);
    assert_int_equal(fsyncs, syncs);
    /* First round of each pass: log 0 alone; second: every other log, in one sync. */
    assert_true(st.rounds <= 6);
    x.t.defer = false;
    jt_fini(&x);
}

/* Deferred rounds (the server): every append of a loop iteration shares one sync. */
static void test_deferred_one_sync_per_iteration(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 3, 64, 8 << 20);
    st_journal_set_deferred(x.j, true);
    waiter_t w[64];
    memset(w, 0, sizeof w);
    for (int iter = 0; iter < 3; iter++) {
        uint64_t s0 = x.t.submits;
        for (int i = 0; i < 64; i++) {
            int64_t base = app(&x, i, 1, 40, (uint8_t)(iter * 64 + i), NULL);
            assert_int_equal(st_log_wait_durable(x.logs[i], base + 1, on_durable, &w[i]), 0);
        }
        assert_int_equal(x.t.submits, s0); /* nothing before the iteration ends */
        for (int i = 0; i < 64; i++)
            assert_int_equal(w[i].calls, iter);
        st_journal_run(x.j);
        assert_int_equal(x.t.submits, s0 + 1);
        for (int i = 0; i < 64; i++) {
            assert_int_equal(w[i].calls, iter + 1);
            assert_int_equal(w[i].res, 0);
        }
    }
    print_message("journal, deferred: 64 logs, 1 sync per loop iteration\n");
    jt_fini(&x);
}

/* One loop iteration (deferred mode), 50 ms after the last: each listed log appends one
 * acknowledged batch, then the journal runs; every waiter has heard by the end (syncs are
 * inline here). */
static void fanout_iteration(jt_t *x, const int *logs, int n, uint8_t fill)
{
    x->t.now += 50;
    waiter_t w[64];
    memset(w, 0, sizeof w);
    st_buf_t b[64];
    for (int k = 0; k < n; k++) {
        st_buf_init(&b[k]);
        int64_t base = app(x, logs[k], 1, 30, (uint8_t)(fill + k), &b[k]);
        int rc = st_log_wait_durable(x->logs[logs[k]], base + 1, on_durable, &w[k]);
        assert_true(rc == 0 || rc == 1);
        if (rc == 1)
            w[k].calls = 1;
    }
    st_journal_run(x->j);
    for (int k = 0; k < n; k++) {
        assert_int_equal(w[k].calls, 1);
        assert_int_equal(w[k].res, 0);
        st_buf_append(&x->expect[logs[k]], b[k].data, b[k].len);
        st_buf_fini(&b[k]);
    }
}

/* The fan-out rule (st_journal_set_min_fanout): appends to one log do not use the journal (no
 * second copy, the log's own sync); a window of appends spread over many logs switches it on;
 * back to one log for 30 windows (3 s), it goes off again; whatever the switches, every
 * acknowledged batch survives a crash. */
static void test_fanout_rule(void **state)
{
    (void)state;
    for (int mode = 0; mode < ST_CRASH__COUNT; mode++) {
        jt_t x;
        jt_init(&x, 40 + (uint64_t)mode, 8, 8 << 20);
        st_journal_set_deferred(x.j, true);
        st_journal_set_min_fanout(x.j, 4);
        const int one[] = {0};
        const int all[] = {0, 1, 2, 3, 4, 5, 6, 7};
        st_journal_stats_t st;
        for (int it = 0; it < 10; it++)
            fanout_iteration(&x, one, 1, (uint8_t)it);
        st_journal_stats(x.j, &st);
        assert_int_equal(st.entries, 0); /* one log per iteration: never journaled */
        assert_false(st_journal_spread(x.j));
        uint64_t e0 = st.entries;
        int it = 0;
        while (!st_journal_spread(x.j) && it < 100)
            fanout_iteration(&x, all, 8, (uint8_t)(it++ * 8));
        assert_true(st_journal_spread(x.j));
        assert_int_equal(it, 1); /* on at the 4th log of the window, not at its end */
        for (int k = 0; k < 5; k++)
            fanout_iteration(&x, all, 8, (uint8_t)(100 + k * 8));
        st_journal_stats(x.j, &st);
        assert_true(st.entries >= e0 + 8 * 4); /* journaled once each log's file round ran */
        uint64_t rounds = st.rounds;
        fanout_iteration(&x, all, 8, 200);
        st_journal_stats(x.j, &st);
        assert_int_equal(st.rounds, rounds + 1); /* 8 logs, one sync */
        it = 0;
        while (st_journal_spread(x.j) && it < 200)
            fanout_iteration(&x, one, 1, (uint8_t)it++);
        assert_false(st_journal_spread(x.j));
        assert_true(it >= 58 && it <= 64); /* 30 windows of 100 ms, not a passing lull */
        assert_int_equal(st_journal_fanout(x.j), 1);
        st_journal_stats(x.j, &st);
        uint64_t e1 = st.entries;
        for (int k = 0; k < 5; k++)
            fanout_iteration(&x, one, 1, (uint8_t)(210 + k));
        st_journal_stats(x.j, &st);
        assert_int_equal(st.entries, e1);
        jt_crash(&x, (st_crash_mode_t)mode);
        jt_recover_check(&x, true, NULL);
        jt_fini(&x);
    }
}

/* A waiter's callback that appends (a request answered, the next one handled at once) must
 * not start the next round while the completed one is still calling back its logs. */
typedef struct chain {
    jt_t *x;
    int log;
    waiter_t *w; /* the waiter of what the callback appends */
    int calls;
} chain_t;

static void on_durable_append(void *arg, int res)
{
    chain_t *c = arg;
    c->calls++;
    assert_int_equal(res, 0);
    int64_t base = app(c->x, c->log, 1, 10, 'z', NULL);
    assert_int_equal(st_log_wait_durable(c->x->logs[c->log], base + 1, on_durable, c->w), 0);
}

static void test_append_in_callback(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 4, 3, 8 << 20);
    x.t.defer = true;
    waiter_t w[8];
    memset(w, 0, sizeof w);
    int64_t b = app(&x, 0, 1, 10, 'a', NULL); /* round 1: log 0 */
    assert_int_equal(st_log_wait_durable(x.logs[0], b + 1, on_durable, &w[0]), 0);
    chain_t c = {&x, 2, &w[5], 0};
    b = app(&x, 1, 1, 10, 'b', NULL);
    assert_int_equal(st_log_wait_durable(x.logs[1], b + 1, on_durable, &w[1]), 0);
    b = app(&x, 0, 1, 10, 'c', NULL);
    assert_int_equal(st_log_wait_durable(x.logs[0], b + 1, on_durable_append, &c), 0);
    assert_int_equal(tenv_complete(&x.t, 1), 1); /* round 1 done; round 2: logs 0 and 1 */
    assert_int_equal(w[0].calls, 1);
    /* Both append again while round 2 is in flight: queued for round 3. */
    b = app(&x, 1, 1, 10, 'd', NULL);
    assert_int_equal(st_log_wait_durable(x.logs[1], b + 1, on_durable, &w[3]), 0);
    b = app(&x, 0, 1, 10, 'e', NULL);
    assert_int_equal(st_log_wait_durable(x.logs[0], b + 1, on_durable, &w[4]), 0);
    assert_int_equal(tenv_complete(&x.t, 1), 1); /* round 2 done; log 0's callback appends */
    assert_int_equal(c.calls, 1);
    assert_int_equal(w[1].calls, 1);
    /* Round 3 is not synced yet: nothing in it may be called durable. */
    assert_int_equal(w[3].calls, 0);
    assert_int_equal(w[4].calls, 0);
    assert_int_equal(w[5].calls, 0);
    tenv_complete(&x.t, (size_t)-1);
    assert_int_equal(w[3].calls, 1);
    assert_int_equal(w[4].calls, 1);
    assert_int_equal(w[5].calls, 1);
    x.t.defer = false;
    jt_fini(&x);
}

/* The same load without a journal: a sync per log per round (the issue). */
static void test_without_journal_syncs_per_log(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 2, 16, 0);
    x.t.defer = true;
    uint64_t s0 = x.t.submits;
    waiter_t w[16];
    memset(w, 0, sizeof w);
    for (int i = 0; i < 16; i++) {
        int64_t base = app(&x, i, 2, 50, (uint8_t)i, NULL);
        assert_int_equal(st_log_wait_durable(x.logs[i], base + 2, on_durable, &w[i]), 0);
    }
    assert_true(x.t.submits - s0 >= 16);
    tenv_complete(&x.t, (size_t)-1);
    x.t.defer = false;
    jt_fini(&x);
}

/* ---- crash and replay -------------------------------------------------------------------- */

static void test_crash_replays_acknowledged(void **state)
{
    (void)state;
    for (int mode = 0; mode < ST_CRASH__COUNT; mode++) {
        jt_t x;
        jt_init(&x, 10 + (uint64_t)mode, 8, 4 << 20);
        uint64_t seg_syncs0 = st_faultfs_calls(x.t.ff, ST_FAULT_FDATASYNC);
        for (int k = 0; k < 30; k++)
            app_acked(&x, k % 8, 1 + k % 4, 20 + (size_t)k * 7, (uint8_t)k);
        st_journal_stats_t st;
        st_journal_stats(x.j, &st);
        /* Only the journal was synced: the segments were never. */
        assert_int_equal(st_faultfs_calls(x.t.ff, ST_FAULT_FDATASYNC) - seg_syncs0, st.rounds);
        /* Unacknowledged appends may or may not come back. */
        app(&x, 0, 3, 10, 'u', NULL);
        jt_crash(&x, (st_crash_mode_t)mode);
        st_journal_recovery_t rec;
        jt_recover_check(&x, true, &rec);
        assert_true(rec.entries >= 30);
        assert_int_equal(rec.partitions, 8);
        jt_fini(&x);
    }
}

/* Segments roll while their bytes are durable only in the journal: the new segment's name
 * must not make recovery skip the entries below it. */
static void test_roll_then_crash(void **state)
{
    (void)state;
    for (int mode = 0; mode < ST_CRASH__COUNT; mode++) {
        jt_t x;
        memset(&x, 0, sizeof x);
        tenv_init(&x.t, 110 + (uint64_t)mode);
        x.n = 2;
        x.segment_bytes = 1000;
        assert_int_equal(st_journal_open(&x.t.env, "/data", 0, 4 << 20, &x.j), 0);
        for (int i = 0; i < x.n; i++) {
            x.logs[i] = open_i(&x, i);
            st_buf_init(&x.expect[i]);
        }
        for (int k = 0; k < 40; k++)
            app_acked(&x, k % 2, 2, 60, (uint8_t)k);
        assert_true(st_log_segment_count(x.logs[0]) > 3);
        jt_crash(&x, (st_crash_mode_t)mode);
        jt_recover_check(&x, false, NULL);
        jt_fini(&x);
    }
}

/* A truncated suffix never comes back, and what replaced it is what replay finds. */
static void test_truncate_never_undone(void **state)
{
    (void)state;
    for (int with_append = 0; with_append < 2; with_append++) {
        jt_t x;
        jt_init(&x, 20, 1, 4 << 20);
        app_acked(&x, 0, 2, 30, 'a');
        size_t keep = x.expect[0].len;
        int64_t cut = app_acked(&x, 0, 2, 30, 'b');
        app_acked(&x, 0, 2, 30, 'c');
        assert_int_equal(st_log_truncate_to(x.logs[0], cut), 0);
        x.expect[0].len = keep;
        if (with_append) {
            app_acked(&x, 0, 3, 40, 'd');
            app_acked(&x, 0, 1, 40, 'e');
        }
        jt_crash(&x, ST_CRASH_DROP);
        jt_recover_check(&x, false, NULL);
        jt_fini(&x);
    }
}

/* A truncation the journal cannot take (its write fails) leaves a fence; replay honours it. */
static void test_truncate_fence(void **state)
{
    (void)state;
    bool fenced = false;
    for (int skip = 0; skip < 6 && !fenced; skip++) {
        jt_t x;
        jt_init(&x, 30, 1, 4 << 20);
        app_acked(&x, 0, 2, 30, 'a');
        size_t keep = x.expect[0].len;
        int64_t cut = app_acked(&x, 0, 2, 30, 'b');
        st_faultfs_fail(x.t.ff, ST_FAULT_PWRITE, EIO, skip, 1);
        st_log_truncate_to(x.logs[0], cut);
        st_faultfs_clear(x.t.ff);
        st_journal_stats_t st;
        st_journal_stats(x.j, &st);
        if (st.fences == 1) {
            fenced = true;
            x.expect[0].len = keep;
            jt_crash(&x, ST_CRASH_DROP);
            assert_true(st_faultfs_exists(x.t.ff, "/data/t-0/" ST_JOURNAL_FENCE_FILE));
            jt_recover_check(&x, false, NULL);
            /* Open with a journal removed the fence: its run is over. */
            assert_false(st_faultfs_exists(x.t.ff, "/data/t-0/" ST_JOURNAL_FENCE_FILE));
            jt_fini(&x);
        } else {
            x.t.defer = false;
            jt_crash(&x, ST_CRASH_DROP);
            st_journal_recover(x.t.env.fs, "/data", NULL);
            jt_fini(&x);
        }
    }
    assert_true(fenced);
}

/* A journal too small for the load: appends fall back to per-file rounds and are durable all
 * the same; the journal takes over again once space is back. */
static void test_journal_full_falls_back(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 40, 4, ST_JOURNAL_MIN_BYTES);
    x.t.defer = true;
    waiter_t w[200];
    memset(w, 0, sizeof w);
    int n = 0;
    st_journal_stats_t st;
    for (; n < 200; n++) {
        st_buf_t b;
        st_buf_init(&b);
        int64_t base = app(&x, n % 4, 4, 500, (uint8_t)n, &b);
        st_buf_append(&x.expect[n % 4], b.data, b.len);
        st_buf_fini(&b);
        int rc = st_log_wait_durable(x.logs[n % 4], base + 4, on_durable, &w[n]);
        assert_true(rc == 0 || rc == 1);
        if (rc == 1)
            w[n].calls = 1;
        st_journal_stats(x.j, &st);
        if (st.fallbacks > 0 && n > 150)
            break;
    }
    assert_true(st.fallbacks > 0);
    for (int guard = 0; x.t.nq > 0 && guard < 10000; guard++)
        tenv_complete(&x.t, 1);
    for (int i = 0; i <= n && i < 200; i++) {
        assert_int_equal(w[i].calls, 1);
        assert_int_equal(w[i].res, 0);
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(st_log_durable_offset(x.logs[i]), st_log_end_offset(x.logs[i]));
    x.t.defer = false;
    print_message("full: used %lld of %lld, fallbacks %llu\n", (long long)st.used,
                  (long long)st.capacity, (unsigned long long)st.fallbacks);
    /* And now the journal again. */
    uint64_t e0 = st.entries;
    for (int k = 0; k < 8; k++)
        app_acked(&x, k % 4, 1, 100, (uint8_t)(200 + k));
    st_journal_stats(x.j, &st);
    assert_true(st.entries > e0);
    jt_crash(&x, ST_CRASH_DROP);
    jt_recover_check(&x, false, NULL);
    jt_fini(&x);
}

/* When appends no longer fit, a truncation still does: the reserve is for truncate entries. */
static void test_reserve_for_truncations(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 45, 1, ST_JOURNAL_MIN_BYTES);
    x.t.defer = true; /* nothing synced: no space comes back */
    st_journal_stats_t st;
    int64_t cut = -1;
    for (int n = 0; n < 100; n++) {
        int64_t base = app(&x, 0, 2, 400, (uint8_t)n, NULL);
        if (n == 3)
            cut = base;
        st_journal_stats(x.j, &st);
        if (st.fallbacks > 0)
            break;
    }
    assert_true(st.fallbacks > 0);
    uint64_t e0 = st.entries, f0 = st.fences;
    assert_int_equal(st_log_truncate_to(x.logs[0], cut), 0);
    st_journal_stats(x.j, &st);
    assert_int_equal(st.entries, e0 + 1); /* the truncate entry, in the reserve */
    assert_int_equal(st.fences, f0);
    tenv_complete(&x.t, (size_t)-1);
    x.t.defer = false;
    jt_fini(&x);
}

/* A failed journal sync: the logs of that round are cut back, the journal goes off, the logs
 * carry on with per-file rounds. */
static void test_failed_journal_sync(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 50, 2, 4 << 20);
    app_acked(&x, 0, 2, 30, 'a');
    app_acked(&x, 1, 2, 30, 'b');
    int64_t end0 = st_log_end_offset(x.logs[0]);
    st_faultfs_fail(x.t.ff, ST_FAULT_FDATASYNC, EIO, 0, 1);
    st_buf_t b;
    st_buf_init(&b);
    app(&x, 0, 2, 30, 'x', &b);
    st_buf_fini(&b);
    /* The inline sync failed inside the append: the batch is gone again. */
    assert_int_equal(st_log_end_offset(x.logs[0]), end0);
    assert_int_equal(st_log_wait_durable(x.logs[0], end0 + 2, on_durable, NULL), -EIO);
    assert_true(st_journal_failed(x.j));
    uint64_t s0 = x.t.submits;
    app_acked(&x, 0, 2, 30, 'c');
    app_acked(&x, 1, 2, 30, 'd');
    assert_true(x.t.submits - s0 >= 2); /* per-file rounds */
    jt_crash(&x, ST_CRASH_DROP);
    jt_recover_check(&x, false, NULL);
    jt_fini(&x);
}

/* Replay stops at the first entry that does not check out. */
static void test_corrupt_entry_stops_replay(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 60, 1, 4 << 20);
    size_t after2 = 0;
    for (int k = 0; k < 5; k++) {
        app_acked(&x, 0, 1, 40, (uint8_t)('a' + k));
        if (k == 1)
            after2 = x.expect[0].len;
    }
    jt_crash(&x, ST_CRASH_DROP);
    uint8_t *d;
    size_t len;
    assert_int_equal(st_faultfs_get(x.t.ff, WAL, &d, &len), 0);
    /* Entries from byte 8192: 64-byte header, the name "t-0", the batch, padded to 8. */
    size_t pos = 8192;
    for (int k = 0; k < 2; k++)
        pos += ((size_t)st_be32(d + pos + 8) + 7) & ~(size_t)7;
    d[pos + 64 + 3 + 70] ^= 0x40; /* inside the third entry's batch */
    assert_int_equal(st_faultfs_put(x.t.ff, WAL, d, len), 0);
    free(d);
    x.expect[0].len = after2;
    st_journal_recovery_t rec;
    jt_recover_check(&x, false, &rec);
    assert_int_equal(rec.entries, 2);
    jt_fini(&x);
}

/* Entries of a deleted partition are never replayed into a new one of the same name. */
static void test_recreated_partition(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 70, 1, 4 << 20);
    uint8_t id1[16], id2[16];
    memset(id1, 1, 16);
    memset(id2, 2, 16);
    assert_int_equal(st_log_set_topic_id(x.logs[0], id1), 0);
    app_acked(&x, 0, 3, 30, 'o');
    app_acked(&x, 0, 3, 30, 'p');
    assert_int_equal(st_log_delete(x.logs[0]), 0);
    x.logs[0] = open_i(&x, 0);
    x.expect[0].len = 0;
    assert_int_equal(st_log_set_topic_id(x.logs[0], id2), 0);
    app_acked(&x, 0, 2, 30, 'n');
    jt_crash(&x, ST_CRASH_DROP);
    jt_recover_check(&x, false, NULL);
    jt_fini(&x);
}

/* A crash at any point of replay, then replay again: the same logs. */
static void test_crash_during_recovery(void **state)
{
    (void)state;
    for (int64_t at = 0; at < 400; at += 9) {
        jt_t x;
        jt_init(&x, 80, 3, 4 << 20);
        for (int k = 0; k < 12; k++)
            app_acked(&x, k % 3, 2, 30, (uint8_t)k);
        int64_t cut = st_log_end_offset(x.logs[1]) - 2;
        assert_int_equal(st_log_truncate_to(x.logs[1], cut), 0);
        x.expect[1].len -= x.expect[1].len / 4; /* the last of its four batches */
        app_acked(&x, 1, 1, 30, 'z');
        jt_crash(&x, ST_CRASH_DROP);
        st_faultfs_crash_after(x.t.ff, at, (st_crash_mode_t)(at % ST_CRASH__COUNT));
        st_journal_recover(x.t.env.fs, "/data", NULL);
        bool crashed = st_faultfs_crashed(x.t.ff);
        if (crashed) {
            st_faultfs_restart(x.t.ff);
        } else {
            st_faultfs_crash_after(x.t.ff, -1, ST_CRASH_DROP);
        }
        jt_recover_check(&x, false, NULL);
        jt_fini(&x);
        if (!crashed)
            break;
    }
}

/* The tick syncs the segments of a log whose entries are a few seconds old: its entries are
 * released, and a crash then needs no replay for it. */
static void test_tick_syncs_segments(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 90, 2, 4 << 20);
    app_acked(&x, 0, 2, 30, 'a');
    app_acked(&x, 1, 2, 30, 'b');
    uint64_t f0 = st_faultfs_calls(x.t.ff, ST_FAULT_FDATASYNC);
    st_log_tick(x.logs[0]);
    assert_int_equal(st_faultfs_calls(x.t.ff, ST_FAULT_FDATASYNC), f0);
    x.t.now += ST_JOURNAL_SEGMENT_SYNC_MS + 1;
    st_log_tick(x.logs[0]);
    assert_true(st_faultfs_calls(x.t.ff, ST_FAULT_FDATASYNC) > f0);
    app_acked(&x, 1, 2, 30, 'c'); /* a round: its header moves the tail past log 0 */
    jt_crash(&x, ST_CRASH_DROP);
    st_journal_recovery_t rec;
    jt_recover_check(&x, false, &rec);
    assert_int_equal(rec.partitions, 1); /* only log 1 */
    jt_fini(&x);
}

/* A log closed cleanly before a crash that left the journal as it was: its segments hold
 * everything, and its entries are not applied again. */
static void test_closed_log_not_replayed(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 105, 2, 4 << 20);
    app_acked(&x, 0, 2, 30, 'a');
    size_t keep = x.expect[0].len;
    int64_t cut = app_acked(&x, 0, 2, 30, 'b');
    assert_int_equal(st_log_truncate_to(x.logs[0], cut), 0);
    x.expect[0].len = keep;
    app_acked(&x, 0, 1, 30, 'c');
    app_acked(&x, 1, 1, 30, 'd');
    assert_int_equal(st_log_close(x.logs[0]), 0);
    x.logs[0] = NULL;
    jt_crash(&x, ST_CRASH_DROP);
    st_journal_recovery_t rec;
    jt_recover_check(&x, false, &rec);
    assert_int_equal(rec.partitions, 1); /* log 1 only */
    jt_fini(&x);
}

static size_t wal_size(jt_t *x)
{
    uint8_t *d;
    size_t len;
    assert_int_equal(st_faultfs_get(x->t.ff, WAL, &d, &len), 0);
    free(d);
    return len;
}

/* Closed cleanly: nothing to replay, and a missing journal is fine. */
static void test_clean_close_empties(void **state)
{
    (void)state;
    jt_t x;
    jt_init(&x, 100, 2, 4 << 20);
    app_acked(&x, 0, 2, 30, 'a');
    for (int i = 0; i < 2; i++) {
        assert_int_equal(st_log_close(x.logs[i]), 0);
        x.logs[i] = NULL;
    }
    assert_int_equal(st_journal_close(x.j), 0);
    x.j = NULL;
    /* Emptied by its header; the file keeps its size for the next run. */
    size_t len = wal_size(&x);
    assert_true(len > 8192);
    st_journal_recovery_t rec;
    assert_int_equal(st_journal_recover(x.t.env.fs, "/data", &rec), 0);
    assert_int_equal(rec.entries, 0);
    assert_int_equal(wal_size(&x), len);
    assert_int_equal(x.t.env.fs.ops->unlink(x.t.env.fs.ctx, WAL), 0);
    assert_int_equal(st_journal_recover(x.t.env.fs, "/data", &rec), 0);
    assert_int_equal(rec.files, 0);
    jt_fini(&x);
}

/*
 * The journal file outlives a run (a clean close, or replay after a crash, leaves it at its size
 * with a header that says nothing is to be replayed), and the next run goes on with higher
 * sequence numbers: replay never takes an older lap's or an earlier run's bytes for one of its
 * entries, although the positions after its last entry hold older entries of the same size.
 */
static void test_kept_file_replays_only_this_run(void **state)
{
    (void)state;
    /* Half a lap: at the positions after the last entry, the first run's entries carry the
     * sequence numbers a run starting over from 1 at position 0 would expect there. A lap and a
     * half: the next run's positions hold older entries too. */
    for (int v = 0; v < 4; v++) {
        int clean = v % 2, n = v < 2 ? 2000 : 6000;
        jt_t x;
        jt_init(&x, 130 + (uint64_t)v, 1, 4 << 20);
        for (int k = 0; k < n; k++)
            app_acked(&x, 0, 1, 1000, (uint8_t)k);
        if (clean) {
            assert_int_equal(st_log_close(x.logs[0]), 0);
            x.logs[0] = NULL;
            assert_int_equal(st_journal_close(x.j), 0);
            x.j = NULL;
        } else {
            jt_crash(&x, ST_CRASH_DROP);
        }
        size_t size = wal_size(&x);
        assert_true(size >= (n < 6000 ? (2 << 20) : (4 << 20)));
        st_journal_recovery_t rec;
        jt_recover_check(&x, false, &rec);
        if (clean)
            assert_int_equal(rec.entries, 0);
        else
            assert_true(rec.entries > 0);
        assert_int_equal(wal_size(&x), size); /* neither replay nor open cut it */
        for (int k = 0; k < 50; k++)
            app_acked(&x, 0, 1, 1000, (uint8_t)(k + 7));
        jt_crash(&x, ST_CRASH_DROP);
        jt_recover_check(&x, false, &rec);
        assert_int_equal(rec.entries, 50); /* this run's, nothing older */
        assert_int_equal(rec.applied, 50);
        jt_fini(&x);
    }
}

/* ---- writeback --------------------------------------------------------------------------- */

typedef struct wb_rec {
    int calls;
    int fd;
    int64_t off[64], len[64];
} wb_rec_t;

static wb_rec_t wb;

static int wb_submit(void *ctx, int fd, int64_t off, int64_t len, st_sync_done_fn done, void *arg)
{
    (void)ctx;
    if (wb.calls < 64) {
        wb.off[wb.calls] = off;
        wb.len[wb.calls] = len;
    }
    wb.calls++;
    wb.fd = fd;
    done(arg, 0); /* releases the file the log pinned for it */
    return 0;
}

/* With a writeback hook, a journaled log hands the segment bytes it appends to it steadily:
 * contiguous ranges of at least ST_LOG_WRITEBACK_BYTES from where the segment was at open, each
 * started once; the hook makes nothing durable, so acknowledged batches still replay. */
static void test_writeback_steady(void **state)
{
    (void)state;
    jt_t x;
    memset(&wb, 0, sizeof wb);
    jt_init(&x, 120, 1, 8 << 20);
    app_acked(&x, 0, 1, 1000, 'a'); /* the segment is not empty at the next open */
    assert_int_equal(st_log_close(x.logs[0]), 0);
    x.logs[0] = open_i(&x, 0);
    app_acked(&x, 0, 1, 1000, 'b');
    /* The first append after the reopen rolled (segment.ms: the old segment's first batch has
     * a 1970 timestamp): the active segment is this run's, none of it handed over yet. */
    assert_int_equal(x.logs[0]->nsegs, 2);
    st_segment_t *seg = st_log_active(x.logs[0]);
    int64_t start = 0;
    x.t.env.writeback_submit = wb_submit;
    x.t.env.writeback_ctx = &x;
    int64_t appended = 0;
    for (int k = 0; appended < 5 * ST_LOG_WRITEBACK_BYTES / 2; k++) {
        st_buf_t b;
        st_buf_init(&b);
        app(&x, 0, 10, 10000, (uint8_t)k, &b);
        appended += (int64_t)b.len;
        st_buf_fini(&b);
    }
    assert_int_equal(wb.calls, 2);
    assert_int_equal(wb.off[0], start);
    assert_true(wb.len[0] >= ST_LOG_WRITEBACK_BYTES);
    assert_int_equal(wb.off[1], wb.off[0] + wb.len[0]);
    assert_true(wb.len[1] >= ST_LOG_WRITEBACK_BYTES);
    assert_true(wb.off[1] + wb.len[1] <= start + appended);
    assert_ptr_equal(st_log_active(x.logs[0]), seg);
    /* A truncation below what was handed over: the next range starts at the new end. */
    assert_int_equal(st_log_truncate_to(x.logs[0], 12), 0); /* 'b' and one batch of 10 stay */
    assert_ptr_equal(st_log_active(x.logs[0]), seg);
    x.expect[0].len = 0;
    {
        st_buf_t got;
        st_buf_init(&got);
        read_log(x.logs[0], &got);
        st_buf_append(&x.expect[0], got.data, got.len);
        st_buf_fini(&got);
    }
    start = seg->size;
    assert_true(start < wb.off[1] + wb.len[1]);
    appended = 0;
    for (int k = 0; appended < ST_LOG_WRITEBACK_BYTES + 20000; k++) {
        st_buf_t b;
        st_buf_init(&b);
        int64_t base = app(&x, 0, 10, 10000, (uint8_t)k, &b);
        waiter_t w = {0, 0};
        assert_int_equal(st_log_wait_durable(x.logs[0], base + 10, on_durable, &w), 1);
        st_buf_append(&x.expect[0], b.data, b.len);
        appended += (int64_t)b.len;
        st_buf_fini(&b);
    }
    assert_int_equal(wb.calls, 3);
    assert_int_equal(wb.off[2], start);
    x.t.env.writeback_submit = NULL;
    jt_crash(&x, ST_CRASH_DROP);
    jt_recover_check(&x, false, NULL);
    jt_fini(&x);
}

int main(void)
{
    if (!getenv("STORAGE_JOURNAL_LOG"))
        st_log_set_level(ST_LOG_ERROR + 1); /* crashes and replays log on purpose here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_sync_per_round),
        cmocka_unit_test(test_deferred_one_sync_per_iteration),
        cmocka_unit_test(test_fanout_rule),
        cmocka_unit_test(test_append_in_callback),
        cmocka_unit_test(test_without_journal_syncs_per_log),
        cmocka_unit_test(test_crash_replays_acknowledged),
        cmocka_unit_test(test_roll_then_crash),
        cmocka_unit_test(test_truncate_never_undone),
        cmocka_unit_test(test_truncate_fence),
        cmocka_unit_test(test_journal_full_falls_back),
        cmocka_unit_test(test_reserve_for_truncations),
        cmocka_unit_test(test_failed_journal_sync),
        cmocka_unit_test(test_corrupt_entry_stops_replay),
        cmocka_unit_test(test_recreated_partition),
        cmocka_unit_test(test_crash_during_recovery),
        cmocka_unit_test(test_tick_syncs_segments),
        cmocka_unit_test(test_closed_log_not_replayed),
        cmocka_unit_test(test_clean_close_empties),
        cmocka_unit_test(test_kept_file_replays_only_this_run),
        cmocka_unit_test(test_writeback_steady),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
