/*
 * Unit tests for storage/log: append, read, group commit, faults (ENOSPC, short writes, EIO on
 * fsync, crash before sync), roll, retention, truncation, time lookups, epochs, metadata,
 * descriptor cache, read handles outliving deleted segments, data-directory listing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "base/err.h"
#include "storage/meta.h"
#include "testutil.h"

#define DIR "/data/t-0"

static st_log_config_t cfg_default(void)
{
    st_log_config_t c;
    st_log_config_default(&c);
    return c;
}

static st_log_t *open_log(tenv_t *t, const st_log_config_t *c)
{
    st_log_t *log = NULL;
    int rc = st_log_open(&t->env, DIR, c, &log);
    assert_int_equal(rc, 0);
    return log;
}

/* Appends one batch of count records; returns its base offset. */
static int64_t append1(st_log_t *log, int32_t count, size_t vlen, int64_t ts, uint8_t fill)
{
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, count, vlen, ts, fill);
    st_log_append_info_t info;
    int rc = st_log_append(log, b.data, b.len, 1, &info, NULL);
    st_buf_fini(&b);
    assert_int_equal(rc, 0);
    assert_int_equal(info.last_offset - info.base_offset + 1, count);
    return info.base_offset;
}

/* Checks that every batch readable from the start is valid and offsets run contiguously. */
static int64_t check_readable(st_log_t *log)
{
    int64_t off = st_log_start_offset(log), batches = 0;
    while (off < st_log_end_offset(log)) {
        st_buf_t b;
        st_buf_init(&b);
        int64_t next;
        assert_int_equal(tb_read_all(log, off, 1 << 20, &b, &next), 0);
        assert_true(next > off);
        for (size_t p = 0; p < b.len;) {
            st_batch_hdr_t h;
            assert_int_equal(st_batch_check(b.data + p, b.len - p, &h), 0);
            p += (size_t)st_batch_size(&h);
            batches++;
        }
        st_buf_fini(&b);
        off = next;
    }
    return batches;
}

static void test_append_and_read(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 1);
    st_log_config_t c = cfg_default();
    st_log_t *log = open_log(&t, &c);
    assert_int_equal(st_log_end_offset(log), 0);
    assert_int_equal(append1(log, 3, 10, 1000, 'a'), 0);
    assert_int_equal(append1(log, 2, 10, 2000, 'b'), 3);

    /* Two batches in one request. */
    st_buf_t b;
    st_buf_init(&b);
    size_t s1 = tb_batch(&b, 4, 7, 3000, 'c');
    tb_batch(&b, 1, 7, 3100, 'd');
    st_log_append_info_t info;
    assert_int_equal(st_log_append(log, b.data, b.len, 1, &info, NULL), 0);
    assert_int_equal(info.base_offset, 5);
    assert_int_equal(info.last_offset, 9);
    assert_int_equal(info.batches, 2);
    assert_int_equal(info.records, 5);
    assert_int_equal(info.log_append_time, -1);
    assert_int_equal(info.log_start_offset, 0);
    /* The buffer was rewritten in place with the assigned offsets. */
    assert_int_equal((int64_t)st_be64(b.data), 5);
    assert_int_equal((int64_t)st_be64(b.data + s1), 9);
    assert_int_equal(st_log_end_offset(log), 10);

    /* Reading from the middle of the batch 5..8 returns that batch whole. */
    st_log_read_t r;
    assert_int_equal(st_log_read(log, 7, 1 << 20, -1, &r), 0);
    assert_int_equal(r.first_offset, 5);
    assert_int_equal(r.next_offset, 10);
    assert_int_equal(r.bytes, (int64_t)b.len);
    assert_true(st_file_fd(r.ranges[0].file) >= 0);
    uint8_t *got = malloc((size_t)r.bytes);
    assert_int_equal(st_log_read_copy(&r, got, (size_t)r.bytes), r.bytes);
    assert_memory_equal(got, b.data, b.len);
    free(got);
    st_log_read_release(&r);

    /* max_bytes smaller than one batch still returns one batch; then stops. */
    assert_int_equal(st_log_read(log, 0, 1, -1, &r), 0);
    assert_int_equal(r.next_offset, 3);
    st_log_read_release(&r);
    /* The visible limit hides batches reaching it. */
    assert_int_equal(st_log_read(log, 0, 1 << 20, 5, &r), 0);
    assert_int_equal(r.next_offset, 5);
    st_log_read_release(&r);
    assert_int_equal(st_log_read(log, 0, 1 << 20, 4, &r), 0);
    assert_int_equal(r.next_offset, 3);
    st_log_read_release(&r);
    /* At the end: empty; past it: out of range. */
    assert_int_equal(st_log_read(log, 10, 1 << 20, -1, &r), 0);
    assert_int_equal(r.nranges, 0);
    assert_int_equal(st_log_read(log, 11, 1 << 20, -1, &r), ST_E_OUT_OF_RANGE);

    /* Refused input. */
    st_batch_verdict_t v;
    assert_int_equal(st_log_append(log, b.data, 0, 1, &info, &v), ST_E_INVALID);
    b.data[b.len - 1] ^= 1;
    assert_int_equal(st_log_append(log, b.data, b.len, 1, &info, &v), ST_E_CORRUPT);
    assert_int_equal(v.position, (int64_t)s1);
    assert_int_equal(st_log_end_offset(log), 10);
    st_buf_fini(&b);

    assert_int_equal(check_readable(log), 4);
    assert_int_equal(st_log_close(log), 0);

    /* Clean reopen: same state, marker consumed. */
    log = open_log(&t, &c);
    assert_false(st_faultfs_exists(t.ff, DIR "/" ST_META_CLEAN_FILE));
    assert_int_equal(st_log_end_offset(log), 10);
    assert_int_equal(check_readable(log), 4);
    assert_int_equal(append1(log, 1, 1, 0, 'z'), 10);
    assert_int_equal(st_log_close(log), 0);
    assert_true(st_faultfs_exists(t.ff, DIR "/" ST_META_CLEAN_FILE));
    assert_true(st_faultfs_exists(t.ff, DIR "/00000000000000000000.log"));
    assert_true(st_faultfs_exists(t.ff, DIR "/00000000000000000000.index"));
    assert_true(st_faultfs_exists(t.ff, DIR "/00000000000000000000.timeindex"));
    tenv_fini(&t);
}

static void test_log_append_time(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 2);
    st_log_config_t c = cfg_default();
    c.timestamp_type = ST_TS_LOG_APPEND_TIME;
    st_log_t *log = open_log(&t, &c);
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, 3, 10, 5, 'a');
    st_log_append_info_t info;
    assert_int_equal(st_log_append(log, b.data, b.len, 4, &info, NULL), 0);
    assert_int_equal(info.log_append_time, t.now);
    st_buf_clear(&b);
    assert_int_equal(tb_read_all(log, 0, 1 << 20, &b, NULL), 0);
    st_batch_hdr_t h;
    assert_int_equal(st_batch_check(b.data, b.len, &h), 0); /* CRC recomputed */
    assert_int_equal(h.max_timestamp, t.now);
    assert_int_equal(h.partition_leader_epoch, 4);
    assert_true(h.attributes & ST_BATCH_ATTR_LOG_APPEND_TIME);
    int64_t off, ts;
    assert_int_equal(st_log_max_timestamp(log, &ts, &off), 0);
    assert_int_equal(ts, t.now);
    assert_int_equal(off, 0);
    st_buf_fini(&b);
    st_log_close(log);
    tenv_fini(&t);
}

typedef struct waited {
    int calls;
    int res;
} waited_t;

static void on_durable(void *arg, int res)
{
    waited_t *w = arg;
    w->calls++;
    w->res = res;
}

static void test_group_commit(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 3);
    t.defer = true;
    st_log_config_t c = cfg_default();
    st_log_t *log = open_log(&t, &c);
    uint64_t s0 = t.submits;

    /* A: issues round 1 at once. */
    append1(log, 1, 10, 0, 'a');
    assert_true(st_log_sync_in_flight(log));
    uint64_t s1 = t.submits;
    assert_true(s1 > s0);
    waited_t wa = {0, 1}, wb = {0, 1}, wc = {0, 1};
    assert_int_equal(st_log_wait_durable(log, 1, on_durable, &wa), 0);
    /* B and C while round 1 is in flight: no new sync yet. */
    append1(log, 1, 10, 0, 'b');
    assert_int_equal(st_log_wait_durable(log, 2, on_durable, &wb), 0);
    append1(log, 1, 10, 0, 'c');
    assert_int_equal(st_log_wait_durable(log, 3, on_durable, &wc), 0);
    assert_int_equal(t.submits, s1);
    assert_int_equal(st_log_durable_offset(log), 0);

    /* Round 1 completes: A is durable, and round 2 is issued covering B and C. */
    tenv_complete(&t, t.nq);
    assert_int_equal(wa.calls, 1);
    assert_int_equal(wa.res, 0);
    assert_int_equal(wb.calls, 0);
    assert_int_equal(st_log_durable_offset(log), 1);
    assert_true(st_log_sync_in_flight(log));
    assert_int_equal(t.submits, s1 + 1); /* one file: the active .log */
    tenv_complete(&t, t.nq);
    assert_int_equal(wb.calls, 1);
    assert_int_equal(wc.calls, 1);
    assert_int_equal(wc.res, 0);
    assert_int_equal(st_log_durable_offset(log), 3);
    assert_false(st_log_sync_in_flight(log));
    assert_int_equal(st_log_wait_durable(log, 3, on_durable, &wc), 1);
    assert_int_equal(st_log_wait_durable(log, 4, on_durable, &wc), ST_E_OUT_OF_RANGE);

    /* Inline completion: the append is durable before wait is even asked. */
    t.defer = false;
    append1(log, 1, 10, 0, 'd');
    assert_int_equal(st_log_durable_offset(log), 4);
    assert_int_equal(st_log_wait_durable(log, 4, on_durable, &wc), 1);

    /* Close with a waiter whose round is still held: it is answered by close's own sync. */
    t.defer = true;
    append1(log, 1, 10, 0, 'e');
    waited_t we = {0, 1};
    assert_int_equal(st_log_wait_durable(log, 5, on_durable, &we), 0);
    assert_int_equal(st_log_close(log), 0);
    assert_int_equal(we.calls, 1);
    assert_int_equal(we.res, 0);
    tenv_complete(&t, t.nq); /* late done() after close is harmless */
    tenv_fini(&t);
}

static void test_write_caching(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 4);
    st_log_config_t c = cfg_default();
    c.flush_policy = ST_FLUSH_WRITE_CACHING;
    c.flush_messages = 10;
    c.flush_ms = 1000;
    st_log_t *log = open_log(&t, &c);
    uint64_t s0 = t.submits;
    append1(log, 4, 10, 0, 'a');
    waited_t w = {0, 1};
    assert_int_equal(st_log_wait_durable(log, 4, on_durable, &w), 1); /* acked on write */
    assert_int_equal(t.submits, s0);
    assert_int_equal(st_log_durable_offset(log), 0);
    append1(log, 6, 10, 0, 'b'); /* reaches flush.messages */
    assert_true(t.submits > s0);
    assert_int_equal(st_log_durable_offset(log), 10);
    append1(log, 1, 10, 0, 'c');
    uint64_t s1 = t.submits;
    assert_int_equal(st_log_tick(log), 0);
    assert_int_equal(t.submits, s1);
    t.now += 1000;
    assert_int_equal(st_log_tick(log), 0);
    assert_int_equal(st_log_durable_offset(log), 11);
    /* Waiters queued under strict are still answered only once synced after a switch to
     * write-caching. */
    c.flush_policy = ST_FLUSH_STRICT;
    assert_int_equal(st_log_set_config(log, &c), 0);
    t.defer = true;
    append1(log, 1, 10, 0, 'w');
    waited_t ws = {0, 1};
    assert_int_equal(st_log_wait_durable(log, st_log_end_offset(log), on_durable, &ws), 0);
    append1(log, 1, 10, 0, 'w');
    waited_t ws2 = {0, 1};
    assert_int_equal(st_log_wait_durable(log, st_log_end_offset(log), on_durable, &ws2), 0);
    c.flush_policy = ST_FLUSH_WRITE_CACHING;
    assert_int_equal(st_log_set_config(log, &c), 0);
    assert_int_equal(ws.calls + ws2.calls, 0);
    tenv_complete(&t, 1); /* the first round: ws; the next round covers ws2 */
    assert_int_equal(ws.calls, 1);
    assert_int_equal(ws2.calls, 0);
    t.defer = false;
    tenv_complete(&t, t.nq);
    assert_int_equal(ws2.calls, 1);
    assert_int_equal(ws2.res, 0);
    /* Switching to strict syncs what is pending. */
    append1(log, 1, 10, 0, 'd');
    c.flush_policy = ST_FLUSH_STRICT;
    assert_int_equal(st_log_set_config(log, &c), 0);
    assert_int_equal(st_log_durable_offset(log), st_log_end_offset(log));
    st_log_close(log);
    tenv_fini(&t);
}

/* Only synced data is promised: a crash before the sync loses exactly the unsynced tail. */
static void test_crash_between_write_and_sync(void **state)
{
    (void)state;
    for (int torn = 0; torn < 2; torn++) {
        for (uint64_t seed = 1; seed <= 20; seed++) {
            tenv_t t;
            tenv_init(&t, seed);
            st_log_config_t c = cfg_default();
            c.flush_policy = ST_FLUSH_WRITE_CACHING; /* syncs only when asked */
            st_log_t *log = open_log(&t, &c);
            for (int i = 0; i < 5; i++)
                append1(log, 3, 100, 0, (uint8_t)i);
            assert_int_equal(st_log_flush(log), 0);
            assert_int_equal(st_log_durable_offset(log), 15);
            for (int i = 0; i < 5; i++)
                append1(log, 3, 100, 0, (uint8_t)(10 + i));
            assert_int_equal(st_log_end_offset(log), 30);
            st_faultfs_crash(t.ff, torn);
            st_log_close(log); /* the dead process: every call fails */
            st_faultfs_restart(t.ff);
            log = open_log(&t, &c);
            int64_t end = st_log_end_offset(log);
            assert_true(end >= 15);
            assert_true(end <= 30);
            assert_int_equal(end % 3, 0); /* whole batches only */
            if (!torn)
                assert_int_equal(end, 15);
            assert_int_equal(check_readable(log), end / 3);
            /* Appends continue after the recovered end. */
            assert_int_equal(append1(log, 1, 1, 0, 'x'), end);
            st_log_close(log);
            tenv_fini(&t);
        }
    }
}

/* A roll makes the new segment's name durable only after the old segment's bytes: a crash
 * that drops every unsynced write (the old segment's tail among them, the new name's directory
 * entry not) recovers a log whose end is what it holds, never a hole below the new segment's
 * name (found by the replication simulation, seed 282). */
static void test_crash_after_roll_leaves_no_hole(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 10; seed++) {
        tenv_t t;
        tenv_init(&t, seed);
        st_log_config_t c = cfg_default(); /* strict: every append synced, here held */
        t.defer = true;
        st_log_t *log = open_log(&t, &c);
        for (int i = 0; i < 4; i++)
            append1(log, 3, 100, 0, (uint8_t)i);
        tenv_complete(&t, (size_t)-1);
        assert_int_equal(st_log_durable_offset(log), 12);
        for (int i = 0; i < 3; i++)
            append1(log, 3, 100, 0, (uint8_t)(10 + i)); /* 12..20, their syncs held */
        assert_int_equal(st_log_roll(log), 0);
        append1(log, 3, 100, 0, 'n'); /* 21..23 in the new segment */
        st_faultfs_crash(t.ff, false);
        st_log_close(log);
        st_faultfs_restart(t.ff);
        t.defer = false;
        log = open_log(&t, &c);
        int64_t end = st_log_end_offset(log);
        assert_true(end >= 12 && end <= 24);
        assert_int_equal(check_readable(log), end / 3); /* contiguous up to its end */
        assert_int_equal(append1(log, 1, 1, 0, 'x'), end);
        st_log_close(log);
        tenv_fini(&t);
    }
}

static void test_enospc_mid_append(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 5);
    st_log_config_t c = cfg_default();
    st_log_t *log = open_log(&t, &c);
    for (int i = 0; i < 4; i++)
        append1(log, 2, 500, 0, (uint8_t)i);
    uint8_t *before;
    size_t before_len;
    assert_int_equal(st_faultfs_get(t.ff, DIR "/00000000000000000000.log", &before, &before_len),
                     0);

    /* Room for half of the next batch: a short write, then ENOSPC. */
    st_faultfs_set_capacity(t.ff, st_faultfs_used(t.ff) + 600);
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, 2, 600, 0, 'n');
    st_log_append_info_t info;
    assert_int_equal(st_log_append(log, b.data, b.len, 1, &info, NULL), -ENOSPC);
    assert_int_equal(st_log_end_offset(log), 8);
    /* The partial write was cut off the file; the log reads as before. */
    uint8_t *after;
    size_t after_len;
    assert_int_equal(st_faultfs_get(t.ff, DIR "/00000000000000000000.log", &after, &after_len), 0);
    assert_int_equal(after_len, before_len);
    assert_memory_equal(after, before, before_len);
    free(after);
    free(before);
    assert_int_equal(check_readable(log), 4);
    assert_int_equal(st_log_append(log, b.data, b.len, 1, &info, NULL), -ENOSPC);

    /* Space returns: appends work again, at the same offset. */
    st_faultfs_set_capacity(t.ff, -1);
    assert_int_equal(st_log_append(log, b.data, b.len, 1, &info, NULL), 0);
    assert_int_equal(info.base_offset, 8);
    assert_int_equal(st_log_durable_offset(log), 10);
    assert_int_equal(check_readable(log), 5);

    /* ENOSPC while rolling (creating the next segment) is an error too, and passes. */
    c.segment_bytes = 2000;
    assert_int_equal(st_log_set_config(log, &c), 0);
    st_faultfs_fail(t.ff, ST_FAULT_OPEN, ENOSPC, 0, 1);
    assert_int_equal(st_log_append(log, b.data, b.len, 1, &info, NULL), -ENOSPC);
    assert_int_equal(st_log_append(log, b.data, b.len, 1, &info, NULL), 0);
    assert_int_equal(info.base_offset, 10);
    assert_int_equal(check_readable(log), 6);

    /* ENOSPC and then the cut-back fails too: the next append cuts the stale tail first. */
    assert_int_equal(st_log_roll(log), 0);
    st_faultfs_set_capacity(t.ff, st_faultfs_used(t.ff) + 100);
    st_faultfs_fail(t.ff, ST_FAULT_FTRUNCATE, EIO, 0, 1);
    assert_int_equal(st_log_append(log, b.data, b.len, 1, &info, NULL), -ENOSPC);
    st_faultfs_set_capacity(t.ff, -1);
    st_buf_t small;
    st_buf_init(&small);
    tb_batch(&small, 1, 5, 0, 's'); /* shorter than the stale tail */
    assert_int_equal(st_log_append(log, small.data, small.len, 1, &info, NULL), 0);
    assert_int_equal(info.base_offset, 12);
    st_buf_fini(&small);
    assert_int_equal(check_readable(log), 7);
    st_buf_fini(&b);
    st_log_close(log);
    log = open_log(&t, &c);
    assert_int_equal(st_log_end_offset(log), 13);
    assert_int_equal(check_readable(log), 7);
    st_log_close(log);
    tenv_fini(&t);
}

static void test_short_writes(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 6);
    st_faultfs_set_short_writes(t.ff, true);
    st_log_config_t c = cfg_default();
    c.segment_bytes = 8192;
    c.index_interval_bytes = 512;
    st_log_t *log = open_log(&t, &c);
    for (int i = 0; i < 40; i++)
        append1(log, 1 + i % 4, 200, i, (uint8_t)i);
    assert_int_equal(check_readable(log), 40);
    assert_int_equal(st_log_close(log), 0);
    log = open_log(&t, &c);
    assert_int_equal(check_readable(log), 40);
    st_log_close(log);
    tenv_fini(&t);
}

static void test_eio_on_fsync(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 7);
    st_log_config_t c = cfg_default();
    st_log_t *log = open_log(&t, &c);
    append1(log, 2, 10, 0, 'a');
    assert_int_equal(st_log_durable_offset(log), 2);

    /* Held round that fails: the waiter hears EIO, the unsynced tail is cut back. */
    t.defer = true;
    st_faultfs_fail(t.ff, ST_FAULT_FDATASYNC, EIO, 0, 1);
    append1(log, 2, 10, 0, 'b');
    waited_t w = {0, 1};
    assert_int_equal(st_log_wait_durable(log, 4, on_durable, &w), 0);
    append1(log, 2, 10, 0, 'c'); /* waits for the next round: cut with it */
    waited_t w2 = {0, 1};
    assert_int_equal(st_log_wait_durable(log, 6, on_durable, &w2), 0);
    tenv_complete(&t, 1);
    assert_int_equal(w.calls, 1);
    assert_int_equal(w.res, -EIO);
    assert_int_equal(w2.calls, 1);
    assert_int_equal(w2.res, -EIO);
    assert_int_equal(st_log_end_offset(log), 2);
    assert_int_equal(check_readable(log), 1);

    /* Inline failure: append returns 0, the wait reports the error. */
    t.defer = false;
    st_faultfs_fail(t.ff, ST_FAULT_FDATASYNC, EIO, 0, 1);
    append1(log, 2, 10, 0, 'd');
    assert_int_equal(st_log_wait_durable(log, 4, on_durable, &w), -EIO);
    assert_int_equal(st_log_end_offset(log), 2);
    /* Then it works again. */
    assert_int_equal(append1(log, 2, 10, 0, 'e'), 2);
    assert_int_equal(st_log_wait_durable(log, 4, on_durable, &w), 1);
    assert_int_equal(check_readable(log), 2);
    st_log_close(log);
    log = open_log(&t, &c);
    assert_int_equal(st_log_end_offset(log), 4);
    st_log_close(log);
    tenv_fini(&t);
}

/* cleanup.policy=compact: neither retention.bytes nor retention.ms ever deletes (issue 10.3:
 * __consumer_offsets lost committed offsets to a broker-wide log.retention.bytes). */
static void test_compact_only_never_retained(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 81);
    st_log_config_t c = cfg_default();
    st_buf_t b;
    st_buf_init(&b);
    size_t bs = tb_batch(&b, 1, 100, 0, 'a');
    st_buf_fini(&b);
    c.segment_bytes = (int64_t)bs * 2;
    c.retention_bytes = 0;
    c.retention_ms = 1;
    c.retention_deletes = false;
    st_log_t *log = open_log(&t, &c);
    for (int i = 0; i < 9; i++)
        append1(log, 1, 100, t.now - 100000, 'a');
    t.now += 100000;
    assert_int_equal(st_log_segment_count(log), 5);
    assert_int_equal(st_log_enforce_retention(log), 0);
    assert_int_equal(st_log_tick(log), 0);
    assert_int_equal(st_log_start_offset(log), 0);
    assert_int_equal(check_readable(log), 9);
    /* An explicit log start (DeleteRecords, the coordinator's own compaction) still applies. */
    assert_int_equal(st_log_set_start_offset(log, 4), 0);
    assert_int_equal(st_log_start_offset(log), 4);
    /* compact,delete: retention applies again. */
    c.retention_deletes = true;
    assert_int_equal(st_log_set_config(log, &c), 0);
    assert_true(st_log_enforce_retention(log) > 0);
    assert_int_equal(st_log_segment_count(log), 1);
    st_log_close(log);
    tenv_fini(&t);
}

/* Time and size retention never delete past the retention limit (the partition's high
 * watermark): a segment holding records consumers may not read yet stays (issue 19). */
static void test_retention_below_limit(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 82);
    st_log_config_t c = cfg_default();
    st_buf_t b;
    st_buf_init(&b);
    size_t bs = tb_batch(&b, 1, 100, 0, 'a');
    st_buf_fini(&b);
    c.segment_bytes = (int64_t)bs * 2;
    c.retention_bytes = 0;
    c.retention_ms = 1;
    st_log_t *log = open_log(&t, &c);
    for (int i = 0; i < 9; i++)
        append1(log, 1, 100, t.now - 100000, 'a');
    t.now += 100000;
    assert_int_equal(st_log_segment_count(log), 5); /* 0-1, 2-3, 4-5, 6-7, 8 */
    st_log_set_retention_limit(log, 3);
    assert_int_equal(st_log_enforce_retention(log), 1); /* only 0-1 is wholly below 3 */
    assert_int_equal(st_log_start_offset(log), 2);
    assert_int_equal(st_log_enforce_retention(log), 0);
    st_log_set_retention_limit(log, 6);
    assert_int_equal(st_log_enforce_retention(log), 2);
    assert_int_equal(st_log_start_offset(log), 6);
    st_log_close(log);
    tenv_fini(&t);
}

static void note_res(void *arg, int res)
{
    int *r = arg;
    *r = res;
}

/* DeleteRecords: the new log start is promised only once its checkpoint is synced, and a
 * crash after that keeps it (issue 10.6: the checkpoint was written, never synced). */
static void test_start_offset_durable(void **state)
{
    (void)state;
    for (int crash_early = 0; crash_early < 2; crash_early++) {
        tenv_t t;
        tenv_init(&t, 83);
        st_log_config_t c = cfg_default();
        st_log_t *log = open_log(&t, &c);
        for (int i = 0; i < 6; i++)
            append1(log, 2, 50, 0, (uint8_t)i);
        t.defer = true;
        assert_int_equal(st_log_set_start_offset(log, 7), 0);
        int res = 99;
        if (!crash_early) {
            assert_int_equal(st_log_wait_start_durable(log, note_res, &res), 0);
            assert_int_equal(res, 99); /* never inline */
            tenv_complete(&t, (size_t)-1);
            assert_int_equal(res, 0);
            assert_int_equal(st_log_wait_start_durable(log, note_res, &res), 1);
        }
        st_faultfs_crash(t.ff, false);
        st_log_close(log);
        st_faultfs_restart(t.ff);
        t.defer = false;
        tenv_complete(&t, (size_t)-1);
        log = open_log(&t, &c);
        /* The synced start survives the crash. Unsynced, it does not: DeleteRecords used to
         * answer right after st_log_set_start_offset, and this is what a crash took back. */
        assert_int_equal(st_log_start_offset(log), crash_early ? 0 : 7);
        st_log_close(log);
        tenv_fini(&t);
    }
    /* A failed checkpoint sync is reported to the waiter. */
    tenv_t t;
    tenv_init(&t, 84);
    st_log_config_t c = cfg_default();
    st_log_t *log = open_log(&t, &c);
    for (int i = 0; i < 3; i++)
        append1(log, 2, 50, 0, (uint8_t)i);
    assert_int_equal(st_log_set_start_offset(log, 2), 0);
    st_faultfs_fail(t.ff, ST_FAULT_FDATASYNC, EIO, 0, 1);
    t.defer = true;
    int res = 99;
    assert_int_equal(st_log_wait_start_durable(log, note_res, &res), 0);
    tenv_complete(&t, (size_t)-1);
    assert_int_equal(res, -EIO);
    assert_int_equal(st_log_end_offset(log), 6); /* nothing appended was unsynced: no cut */
    res = 99;
    assert_int_equal(st_log_wait_start_durable(log, note_res, &res), 0);
    tenv_complete(&t, (size_t)-1);
    assert_int_equal(res, 0);
    st_log_close(log);
    tenv_fini(&t);
}

/* A sync that cannot even be submitted (full submission queue, no descriptor) is not an I/O
 * error: nothing is cut, the waiter keeps waiting, and the next tick syncs (issue 10, "Also";
 * it used to cut the log back and fail the append). */
static void test_submit_failure_is_retried(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 85);
    st_log_config_t c = cfg_default();
    st_log_t *log = open_log(&t, &c);
    append1(log, 2, 50, 0, 'a');
    t.submit_fail = 3;
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, 3, 50, 0, 'b');
    st_log_append_info_t info;
    assert_int_equal(st_log_append(log, b.data, b.len, 0, &info, NULL), 0);
    st_buf_fini(&b);
    assert_int_equal(st_log_end_offset(log), 5);
    int res = 99;
    assert_int_equal(st_log_wait_durable(log, 5, note_res, &res), 0);
    assert_int_equal(res, 99);
    assert_int_equal(st_log_end_offset(log), 5); /* not cut */
    assert_int_equal(st_log_durable_offset(log), 2);
    for (int i = 0; i < 5 && res == 99; i++)
        assert_true(st_log_tick(log) >= 0);
    assert_int_equal(res, 0);
    assert_int_equal(t.submit_fail, 0);
    assert_int_equal(st_log_durable_offset(log), 5);
    assert_int_equal(check_readable(log), 2);
    st_log_close(log);
    tenv_fini(&t);
}

/* A failed sync whose cut back also fails (the reads it needs fail too) must not let a later,
 * empty round count the unsynced offsets as durable: the waiter fails, appends are refused
 * until the cut can be made, then the log goes on from its durable offset (found by
 * test_powerloss: records acknowledged after their fdatasync failed). */
static void test_failed_sync_with_failed_cut(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 86);
    st_log_config_t c = cfg_default();
    st_log_t *log = open_log(&t, &c);
    append1(log, 2, 50, 0, 'a');
    assert_int_equal(st_log_durable_offset(log), 2);
    t.defer = true;
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, 3, 50, 0, 'b');
    assert_int_equal(st_log_append(log, b.data, b.len, 0, NULL, NULL), 0);
    int res = 99;
    assert_int_equal(st_log_wait_durable(log, 5, note_res, &res), 0);
    /* The sync was submitted (and made durable in faultfs); its completion says EIO, and
     * every read fails, so the cut back cannot find its boundary. */
    t.q[0].res = -EIO;
    st_faultfs_fail(t.ff, ST_FAULT_PREAD, EIO, 0, -1);
    tenv_complete(&t, (size_t)-1);
    assert_int_equal(res, -EIO);
    assert_int_equal(st_log_durable_offset(log), 2);
    for (int i = 0; i < 3; i++) {
        st_log_tick(log);
        tenv_complete(&t, (size_t)-1);
    }
    assert_int_equal(st_log_durable_offset(log), 2); /* never past the failure */
    assert_int_equal(st_log_append(log, b.data, b.len, 0, NULL, NULL), -EIO);
    assert_int_equal(st_log_wait_durable(log, 5, note_res, &res), -EIO);
    /* The disk reads again: the cut is made, and the log goes on from offset 2. */
    st_faultfs_clear(t.ff);
    t.defer = false;
    st_log_tick(log);
    assert_int_equal(st_log_end_offset(log), 2);
    st_log_append_info_t info;
    assert_int_equal(st_log_append(log, b.data, b.len, 0, &info, NULL), 0);
    assert_int_equal(info.base_offset, 2);
    assert_int_equal(st_log_durable_offset(log), 5);
    st_buf_fini(&b);
    st_log_close(log);
    tenv_fini(&t);
}

static void test_roll_and_retention(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 8);
    st_log_config_t c = cfg_default();
    st_buf_t b;
    st_buf_init(&b);
    size_t bs = tb_batch(&b, 1, 100, 0, 'a');
    st_buf_fini(&b);
    c.segment_bytes = (int64_t)bs * 3; /* three batches per segment, exactly */
    st_log_t *log = open_log(&t, &c);
    for (int i = 0; i < 3; i++)
        append1(log, 1, 100, t.now, 'a');
    assert_int_equal(st_log_segment_count(log), 1); /* exactly full: no roll yet */
    append1(log, 1, 100, t.now, 'a');
    assert_int_equal(st_log_segment_count(log), 2);
    assert_true(st_faultfs_exists(t.ff, DIR "/00000000000000000003.log"));
    for (int i = 0; i < 8; i++)
        append1(log, 1, 100, t.now + 10 * i, 'a');
    assert_int_equal(st_log_segment_count(log), 4); /* 0,3,6,9 */
    assert_int_equal(check_readable(log), 12);

    /* A read across segments. */
    st_log_read_t r;
    assert_int_equal(st_log_read(log, 1, 1 << 20, -1, &r), 0);
    assert_int_equal(r.next_offset, 12);
    assert_int_equal(r.nranges, 4);
    st_log_read_release(&r);

    /* retention.bytes: keep at least 7 batches' worth: deletes 0..2 only. */
    c.retention_bytes = (int64_t)bs * 7;
    assert_int_equal(st_log_set_config(log, &c), 0);
    assert_int_equal(st_log_enforce_retention(log), 1);
    assert_int_equal(st_log_start_offset(log), 3);
    assert_false(st_faultfs_exists(t.ff, DIR "/00000000000000000000.log"));
    assert_int_equal(st_log_read(log, 2, 100, -1, &r), ST_E_OUT_OF_RANGE);
    /* retention.bytes 0 never deletes the active segment. */
    c.retention_bytes = 0;
    st_log_set_config(log, &c);
    assert_int_equal(st_log_enforce_retention(log), 2);
    assert_int_equal(st_log_segment_count(log), 1);
    assert_int_equal(st_log_start_offset(log), 9);
    assert_int_equal(st_log_enforce_retention(log), 0);

    /* retention.ms by the batches' timestamps. */
    c.retention_bytes = -1;
    c.retention_ms = 1000;
    st_log_set_config(log, &c);
    st_log_roll(log);
    for (int i = 0; i < 2; i++)
        append1(log, 1, 100, t.now + 5000, 'b');
    assert_int_equal(st_log_segment_count(log), 2);
    t.now += 1000; /* segment 9..11 has max ts now-1000+70: not yet */
    assert_int_equal(st_log_enforce_retention(log), 0);
    t.now += 100;
    assert_int_equal(st_log_enforce_retention(log), 1);
    assert_int_equal(st_log_start_offset(log), 12);
    assert_int_equal(check_readable(log), 2);

    /* segment.ms rolls a segment on the next append (or tick) once it is old enough. */
    c.segment_ms = 60000;
    c.retention_ms = -1;
    st_log_set_config(log, &c);
    int n = st_log_segment_count(log);
    append1(log, 1, 10, t.now, 'c');
    assert_int_equal(st_log_segment_count(log), n);
    t.now += 60001;
    append1(log, 1, 10, t.now, 'c');
    assert_int_equal(st_log_segment_count(log), n + 1);
    t.now += 60001;
    assert_int_equal(st_log_tick(log), 0);
    assert_int_equal(st_log_segment_count(log), n + 2);

    /* Reopen keeps the start offset. */
    int64_t start = st_log_start_offset(log), end = st_log_end_offset(log);
    st_log_close(log);
    log = open_log(&t, &c);
    assert_int_equal(st_log_start_offset(log), start);
    assert_int_equal(st_log_end_offset(log), end);
    st_log_close(log);
    tenv_fini(&t);
}

static void test_set_start_offset(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 9);
    st_log_config_t c = cfg_default();
    c.segment_bytes = 1000;
    st_log_t *log = open_log(&t, &c);
    for (int i = 0; i < 10; i++)
        append1(log, 5, 100, i, 'a'); /* ~600 B batches: one per segment */
    int segs = st_log_segment_count(log);
    assert_int_equal(st_log_set_start_offset(log, 51), ST_E_OUT_OF_RANGE);
    assert_int_equal(st_log_set_start_offset(log, 12), 0);
    assert_int_equal(st_log_start_offset(log), 12);
    assert_true(st_log_segment_count(log) < segs);
    st_log_read_t r;
    assert_int_equal(st_log_read(log, 11, 100, -1, &r), ST_E_OUT_OF_RANGE);
    assert_int_equal(st_log_read(log, 12, 100, -1, &r), 0);
    assert_int_equal(r.first_offset, 10); /* the batch holding 12 */
    st_log_read_release(&r);
    assert_int_equal(st_log_set_start_offset(log, 5), 0); /* lower: ignored */
    assert_int_equal(st_log_start_offset(log), 12);
    st_log_close(log);
    log = open_log(&t, &c);
    assert_int_equal(st_log_start_offset(log), 12);
    assert_int_equal(st_log_set_start_offset(log, 50), 0);
    assert_int_equal(st_log_start_offset(log), 50);
    assert_int_equal(append1(log, 1, 1, 0, 'z'), 50);
    st_log_close(log);
    tenv_fini(&t);
}

static void test_truncate_to(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 10);
    st_log_config_t c = cfg_default();
    c.segment_bytes = 1500;
    c.index_interval_bytes = 100;
    st_log_t *log = open_log(&t, &c);
    for (int i = 0; i < 10; i++)
        append1(log, 5, 100, 1000 + i * 10, (uint8_t)i); /* offsets 0..49 */
    int segs = st_log_segment_count(log);
    assert_true(segs > 3);

    /* Inside a batch: the whole batch goes. */
    assert_int_equal(st_log_truncate_to(log, 23), 0);
    assert_int_equal(st_log_end_offset(log), 20);
    assert_true(st_log_segment_count(log) < segs);
    assert_int_equal(check_readable(log), 4);
    assert_int_equal(append1(log, 2, 10, 5000, 'x'), 20);
    /* At a boundary; then one beyond the end is a no-op. */
    assert_int_equal(st_log_truncate_to(log, 15), 0);
    assert_int_equal(st_log_end_offset(log), 15);
    assert_int_equal(st_log_truncate_to(log, 99), 0);
    assert_int_equal(st_log_end_offset(log), 15);
    int64_t ts, off;
    assert_int_equal(st_log_max_timestamp(log, &ts, &off), 0);
    assert_int_equal(ts, 1024);
    assert_int_equal(off, 14);
    st_log_close(log);
    log = open_log(&t, &c);
    assert_int_equal(st_log_end_offset(log), 15);
    assert_int_equal(check_readable(log), 3);
    /* Below the start: start over there. */
    assert_int_equal(st_log_set_start_offset(log, 10), 0);
    assert_int_equal(st_log_truncate_to(log, 3), 0);
    assert_int_equal(st_log_start_offset(log), 3);
    assert_int_equal(st_log_end_offset(log), 3);
    assert_int_equal(st_log_segment_count(log), 1);
    assert_int_equal(append1(log, 1, 1, 0, 'y'), 3);
    st_log_close(log);
    log = open_log(&t, &c);
    assert_int_equal(st_log_start_offset(log), 3);
    assert_int_equal(st_log_end_offset(log), 4);
    st_log_close(log);
    tenv_fini(&t);
}

static void test_offset_for_time(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 11);
    st_log_config_t c = cfg_default();
    c.segment_bytes = 4000;
    c.index_interval_bytes = 300;
    st_log_t *log = open_log(&t, &c);
    /* Batch i: offsets 4i..4i+3, record timestamps 1000+100i .. +3. One out-of-order batch. */
    for (int i = 0; i < 30; i++)
        append1(log, 4, 50, i == 20 ? 500 : 1000 + 100 * i, 'a');
    assert_true(st_log_segment_count(log) > 2);
    int64_t off, ts;
    for (int pass = 0; pass < 2; pass++) {
        assert_int_equal(st_log_offset_for_timestamp(log, 0, &off, &ts), 0);
        assert_int_equal(off, 0);
        assert_int_equal(ts, 1000);
        assert_int_equal(st_log_offset_for_timestamp(log, 1000, &off, &ts), 0);
        assert_int_equal(off, 0);
        assert_int_equal(st_log_offset_for_timestamp(log, 1002, &off, &ts), 0);
        assert_int_equal(off, 2); /* record level inside the batch */
        assert_int_equal(st_log_offset_for_timestamp(log, 1004, &off, &ts), 0);
        assert_int_equal(off, 4);
        assert_int_equal(ts, 1100);
        assert_int_equal(st_log_offset_for_timestamp(log, 2550, &off, &ts), 0);
        assert_int_equal(off, 64);
        assert_int_equal(ts, 2600);
        assert_int_equal(st_log_offset_for_timestamp(log, 3903, &off, &ts), 0);
        assert_int_equal(off, 119);
        assert_int_equal(st_log_offset_for_timestamp(log, 3904, &off, &ts), ST_E_NOT_FOUND);
        assert_int_equal(st_log_max_timestamp(log, &ts, &off), 0);
        assert_int_equal(ts, 3903);
        assert_int_equal(off, 119);
        st_log_close(log);
        log = open_log(&t, &c); /* the same answers from indexes loaded from files */
    }
    /* Offsets below the log start are not answers. */
    assert_int_equal(st_log_set_start_offset(log, 6), 0);
    assert_int_equal(st_log_offset_for_timestamp(log, 0, &off, &ts), 0);
    assert_int_equal(off, 6);
    st_log_close(log);
    tenv_fini(&t);
}

static void test_leader_epochs(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 12);
    st_log_config_t c = cfg_default();
    st_log_t *log = open_log(&t, &c);
    st_buf_t b;
    st_buf_init(&b);
    int32_t epochs[] = {1, 1, 3, 3, 7};
    for (int i = 0; i < 5; i++) {
        st_buf_clear(&b);
        tb_batch(&b, 2, 5, 0, 'e');
        assert_int_equal(st_log_append(log, b.data, b.len, epochs[i], NULL, NULL), 0);
    }
    assert_int_equal(st_log_latest_epoch(log), 7);
    int32_t ep;
    int64_t end;
    st_log_end_offset_for_epoch(log, 7, &ep, &end);
    assert_int_equal(ep, 7);
    assert_int_equal(end, 10);
    st_log_end_offset_for_epoch(log, 1, &ep, &end);
    assert_int_equal(ep, 1);
    assert_int_equal(end, 4);
    st_log_end_offset_for_epoch(log, 2, &ep, &end); /* unknown, between: floor epoch 1 */
    assert_int_equal(ep, 1);
    assert_int_equal(end, 4);
    st_log_end_offset_for_epoch(log, 0, &ep, &end); /* below all */
    assert_int_equal(ep, 0);
    assert_int_equal(end, 0);
    st_log_end_offset_for_epoch(log, 9, &ep, &end);
    assert_int_equal(ep, -1);
    assert_int_equal(end, -1);
    st_log_close(log);
    uint8_t *d;
    size_t n;
    assert_int_equal(st_faultfs_get(t.ff, DIR "/leader-epoch-checkpoint", &d, &n), 0);
    const char *want = "0\n3\n1 0\n3 4\n7 8\n";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(d, want, n);
    free(d);

    /* Lost checkpoint: rebuilt from the batches. Truncation drops epochs past the end. */
    t.env.fs.ops->unlink(t.env.fs.ctx, DIR "/leader-epoch-checkpoint");
    log = open_log(&t, &c);
    assert_int_equal(st_log_latest_epoch(log), 7);
    assert_int_equal(st_log_truncate_to(log, 8), 0);
    assert_int_equal(st_log_latest_epoch(log), 3);
    st_log_end_offset_for_epoch(log, 3, &ep, &end);
    assert_int_equal(end, 8);
    st_log_close(log);
    st_buf_fini(&b);
    tenv_fini(&t);
}

typedef struct seen {
    int n;
    char topic[4][64];
    int32_t part[4];
} seen_t;

static int list_cb(void *arg, const char *d, const char *topic, int32_t partition)
{
    (void)d;
    seen_t *s = arg;
    if (s->n < 4) {
        snprintf(s->topic[s->n], 64, "%s", topic);
        s->part[s->n] = partition;
        s->n++;
    }
    return 0;
}

static void test_partition_metadata_and_dirs(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 13);
    st_log_config_t c = cfg_default();
    char dir[256];
    const char *topics[] = {"orders", "my-topic", "a"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(st_storage_partition_dir(dir, sizeof dir, "/data", topics[i], i * 5), 0);
        st_log_t *log;
        assert_int_equal(st_log_open(&t.env, dir, &c, &log), 0);
        uint8_t id[16], back[16];
        memset(id, i + 1, 16);
        assert_int_equal(st_log_topic_id(log, back), ST_E_NOT_FOUND);
        assert_int_equal(st_log_set_topic_id(log, id), 0);
        st_log_close(log);
        assert_int_equal(st_log_open(&t.env, dir, &c, &log), 0);
        assert_int_equal(st_log_topic_id(log, back), 0);
        assert_memory_equal(id, back, 16);
        if (i == 2) {
            append1(log, 1, 1, 0, 'q');
            assert_int_equal(st_log_delete(log), 0);
            assert_false(st_faultfs_exists(t.ff, dir));
        } else {
            st_log_close(log);
        }
    }
    t.env.fs.ops->mkdir(t.env.fs.ctx, "/data/not_a_partition");
    seen_t seen = {0};
    assert_int_equal(st_storage_list_partitions(&t.env, "/data", list_cb, &seen), 0);
    assert_int_equal(seen.n, 2);
    bool orders = false, mine = false;
    for (int i = 0; i < seen.n; i++) {
        if (strcmp(seen.topic[i], "orders") == 0 && seen.part[i] == 0)
            orders = true;
        if (strcmp(seen.topic[i], "my-topic") == 0 && seen.part[i] == 5)
            mine = true;
    }
    assert_true(orders && mine);
    assert_int_equal(st_storage_delete_dir(&t.env, "/data/orders-0"), 0);
    assert_false(st_faultfs_exists(t.ff, "/data/orders-0"));
    tenv_fini(&t);
}

/* Many logs with many segments stay within the descriptor cap. */
static void test_fd_cache(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 14);
    st_storage_env_fini(&t.env);
    st_fdcache_init(&t.env.fdcache, t.env.fs, 16);
    st_log_config_t c = cfg_default();
    c.segment_bytes = 300;
    enum { NLOGS = 40 };
    st_log_t *logs[NLOGS];
    char dir[64];
    for (int i = 0; i < NLOGS; i++) {
        snprintf(dir, sizeof dir, "/data/p-%d", i);
        assert_int_equal(st_log_open(&t.env, dir, &c, &logs[i]), 0);
        for (int k = 0; k < 5; k++)
            append1(logs[i], 1, 150, 0, 'f');
        assert_true(st_faultfs_open_fds(t.ff) <= 16);
    }
    assert_int_equal(st_log_segment_count(logs[0]), 5);
    /* Reads pin what they return, and only that, beyond the cap. */
    st_log_read_t r[NLOGS];
    for (int i = 0; i < NLOGS; i++)
        assert_int_equal(st_log_read(logs[i], 0, 1 << 20, -1, &r[i]), 0);
    assert_true(st_faultfs_open_fds(t.ff) <= 16 + NLOGS * 5);
    for (int i = 0; i < NLOGS; i++) {
        uint8_t buf[4096];
        assert_int_equal(st_log_read_copy(&r[i], buf, sizeof buf), r[i].bytes);
        st_log_read_release(&r[i]);
    }
    assert_true(st_faultfs_open_fds(t.ff) <= 16);
    for (int i = 0; i < NLOGS; i++)
        assert_int_equal(st_log_close(logs[i]), 0);
    assert_int_equal(st_faultfs_open_fds(t.ff), 0);
    tenv_fini(&t);
}

/* A read handle outlives the deletion of its segment. */
static void test_read_handle_survives_delete(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 15);
    st_log_config_t c = cfg_default();
    c.segment_bytes = 400;
    st_log_t *log = open_log(&t, &c);
    for (int i = 0; i < 4; i++)
        append1(log, 1, 250, 0, (uint8_t)('a' + i));
    st_log_read_t r;
    assert_int_equal(st_log_read(log, 0, 10, -1, &r), 0);
    assert_int_equal(r.nranges, 1);
    assert_int_equal(st_log_set_start_offset(log, 3), 0);
    assert_false(st_faultfs_exists(t.ff, DIR "/00000000000000000000.log"));
    uint8_t buf[1024];
    ssize_t n = st_log_read_copy(&r, buf, sizeof buf);
    assert_int_equal(n, r.bytes);
    st_batch_hdr_t h;
    assert_int_equal(st_batch_check(buf, (size_t)n, &h), 0);
    assert_int_equal(h.base_offset, 0);
    st_log_read_release(&r);
    /* Deleting the whole partition while a read is held. */
    assert_int_equal(st_log_read(log, 3, 10, -1, &r), 0);
    assert_int_equal(st_log_delete(log), 0);
    assert_int_equal(st_log_read_copy(&r, buf, sizeof buf), r.bytes);
    st_log_read_release(&r);
    assert_int_equal(st_faultfs_open_fds(t.ff), 0);
    tenv_fini(&t);
}

static void test_replica_append(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 16);
    st_log_config_t c = cfg_default();
    st_log_t *log = open_log(&t, &c);
    st_buf_t b;
    st_buf_init(&b);
    size_t n1 = tb_batch(&b, 3, 10, 0, 'r');
    tb_batch(&b, 2, 10, 0, 's');
    st_batch_set_base_offset(b.data, 100);
    st_batch_set_leader_epoch(b.data, 4);
    st_batch_set_base_offset(b.data + n1, 103);
    st_batch_set_leader_epoch(b.data + n1, 5);
    st_log_append_info_t info;
    assert_int_equal(st_log_append_replica(log, b.data, b.len, &info), 0);
    assert_int_equal(info.base_offset, 100);
    assert_int_equal(st_log_end_offset(log), 105);
    assert_int_equal(st_log_latest_epoch(log), 5);
    assert_int_equal(st_log_append_replica(log, b.data, b.len, &info), ST_E_OUT_OF_RANGE);
    st_log_read_t r;
    assert_int_equal(st_log_read(log, 100, 1 << 20, -1, &r), 0);
    assert_int_equal(r.bytes, (int64_t)b.len);
    st_log_read_release(&r);
    st_log_close(log);
    log = open_log(&t, &c);
    assert_int_equal(st_log_end_offset(log), 105);
    assert_true(st_faultfs_exists(t.ff, DIR "/00000000000000000100.log"));
    st_log_close(log);
    st_buf_fini(&b);
    tenv_fini(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_and_read),
        cmocka_unit_test(test_log_append_time),
        cmocka_unit_test(test_group_commit),
        cmocka_unit_test(test_write_caching),
        cmocka_unit_test(test_crash_between_write_and_sync),
        cmocka_unit_test(test_crash_after_roll_leaves_no_hole),
        cmocka_unit_test(test_enospc_mid_append),
        cmocka_unit_test(test_short_writes),
        cmocka_unit_test(test_eio_on_fsync),
        cmocka_unit_test(test_roll_and_retention),
        cmocka_unit_test(test_set_start_offset),
        cmocka_unit_test(test_truncate_to),
        cmocka_unit_test(test_offset_for_time),
        cmocka_unit_test(test_leader_epochs),
        cmocka_unit_test(test_partition_metadata_and_dirs),
        cmocka_unit_test(test_fd_cache),
        cmocka_unit_test(test_read_handle_survives_delete),
        cmocka_unit_test(test_replica_append),
        cmocka_unit_test(test_compact_only_never_retained),
        cmocka_unit_test(test_retention_below_limit),
        cmocka_unit_test(test_start_offset_durable),
        cmocka_unit_test(test_submit_failure_is_retried),
        cmocka_unit_test(test_failed_sync_with_failed_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
