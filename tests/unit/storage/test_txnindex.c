/*
 * test_txnindex.c — transactions in storage: control batches (build, parse, the log's append),
 * the .txnindex codec and its validation, the index following its segment (roll, truncation,
 * retention, DeleteRecords), its rebuild at open (missing, malformed, an unclean stop), and
 * the cleaner's rules (aborted records removed and kept out of the key map, markers kept while
 * their transaction has batches before them and removed after delete.retention.ms, nothing
 * cleaned at or past the clean limit).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "base/err.h"
#include "base/log.h"
#include "storage/journal.h"
#include "storage/txnindex.h"
#include "testutil.h"

#define DIR "/data/x-0"

/* A batch of one keyed record "k<key>" = "v<ver>" (transactional producer pid when pid >= 0). */
static void keyed(st_buf_t *out, int key, int ver, int64_t pid, bool txn, int64_t ts)
{
    char k[16], v[16];
    int kl = snprintf(k, sizeof k, "k%d", key), vl = snprintf(v, sizeof v, "v%d", ver);
    uint8_t body[64];
    size_t n = 0;
    body[n++] = 0;
    n += (size_t)st_varint64_encode(body + n, 0);
    n += (size_t)st_varint32_encode(body + n, 0);
    n += (size_t)st_varint32_encode(body + n, kl);
    memcpy(body + n, k, (size_t)kl);
    n += (size_t)kl;
    n += (size_t)st_varint32_encode(body + n, vl);
    memcpy(body + n, v, (size_t)vl);
    n += (size_t)vl;
    n += (size_t)st_varint32_encode(body + n, 0);
    size_t start = out->len;
    tb_batch_attr(out, 1, 1, ts, 'x', txn ? ST_BATCH_ATTR_TRANSACTIONAL : 0);
    out->len = start + ST_BATCH_HEADER_SIZE;
    uint8_t lenb[ST_VARINT32_MAX];
    st_buf_append(out, lenb, (size_t)st_varint32_encode(lenb, (int32_t)n));
    st_buf_append(out, body, n);
    uint8_t *h = out->data + start;
    st_put_be32(h + ST_BATCH_OFF_LENGTH, (uint32_t)(out->len - start - ST_BATCH_LOG_OVERHEAD));
    st_put_be64(h + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)pid);
    st_put_be16(h + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)(pid >= 0 ? 0 : -1));
    st_put_be32(h + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)(pid >= 0 ? ver : -1));
    tb_fix_crc(h);
}

static int64_t put(st_log_t *log, int key, int ver, int64_t pid, bool txn, int64_t ts)
{
    st_buf_t b;
    st_buf_init(&b);
    keyed(&b, key, ver, pid, txn, ts);
    st_log_append_info_t info;
    assert_int_equal(st_log_append(log, b.data, b.len, 0, &info, NULL), 0);
    st_buf_fini(&b);
    return info.base_offset;
}

static int64_t put_marker(st_log_t *log, int64_t pid, bool commit, int64_t ts)
{
    uint8_t m[ST_BATCH_CONTROL_SIZE];
    assert_int_equal(st_batch_control_build(m, pid, 0, commit, 3, ts), ST_BATCH_CONTROL_SIZE);
    st_log_append_info_t info;
    assert_int_equal(st_log_append_control(log, m, sizeof m, 0, &info), 0);
    return info.base_offset;
}

/* An abort the partition would record: transaction of pid from first, marker at last. */
static void abort_at(st_log_t *log, int64_t pid, int64_t first, int64_t last)
{
    st_txn_aborted_t a = {pid, first, last, last + 1};
    assert_int_equal(st_log_txn_add(log, &a), 0);
}

static st_log_config_t cfg(bool compact)
{
    st_log_config_t c;
    st_log_config_default(&c);
    c.segment_bytes = 1 << 20;
    c.compact = compact;
    c.retention_deletes = !compact;
    c.min_cleanable_dirty_ratio = 0;
    c.delete_retention_ms = 1000;
    return c;
}

static size_t file_size(tenv_t *t, const char *path, bool *exists)
{
    uint8_t *d;
    size_t n;
    int rc = st_fs_read_file(&t->env.fs, path, 1 << 20, &d, &n);
    *exists = rc == 0;
    if (rc == 0)
        free(d);
    return rc == 0 ? n : 0;
}

static void test_control_batch(void **state)
{
    (void)state;
    uint8_t m[ST_BATCH_CONTROL_SIZE];
    st_batch_control_build(m, 77, 4, true, 9, 1234);
    st_batch_hdr_t h;
    assert_int_equal(st_batch_check(m, sizeof m, &h), 0);
    assert_int_equal(h.attributes, ST_BATCH_ATTR_TRANSACTIONAL | ST_BATCH_ATTR_CONTROL);
    assert_int_equal(h.producer_id, 77);
    assert_int_equal(h.producer_epoch, 4);
    assert_int_equal(h.base_sequence, -1);
    assert_int_equal(h.records_count, 1);
    int16_t type;
    int32_t ce;
    assert_int_equal(st_batch_control_parse(m, sizeof m, &type, &ce), 0);
    assert_int_equal(type, ST_CONTROL_COMMIT);
    assert_int_equal(ce, 9);
    /* the record's key and value are Kafka's EndTransactionMarker */
    st_batch_iter_t it;
    st_batch_record_t r;
    assert_int_equal(st_batch_iter_init(&it, m, sizeof m), 0);
    assert_int_equal(st_batch_iter_next(&it, &r), 1);
    assert_int_equal(r.key_len, 4);
    assert_int_equal(st_be16(r.key), 0);
    assert_int_equal(st_be16(r.key + 2), 1);
    assert_int_equal(r.value_len, 6);
    assert_int_equal(st_be16(r.value), 0);
    assert_int_equal((int32_t)st_be32(r.value + 2), 9);
    st_batch_control_build(m, 77, 4, false, 9, 1234);
    assert_int_equal(st_batch_control_parse(m, sizeof m, &type, &ce), 0);
    assert_int_equal(type, ST_CONTROL_ABORT);
    /* a client may not send one */
    st_batch_verdict_t v;
    assert_int_equal(st_batch_validate_client(m, sizeof m, 1 << 20, &h, &v), ST_E_MALFORMED);
}

static void test_codec_and_validation(void **state)
{
    (void)state;
    st_txnidx_t x = {0};
    st_txn_aborted_t a = {5, 10, 20, 21}, b = {6, 15, 30, 16};
    st_txnidx_add(&x, &a);
    st_txnidx_add(&x, &b);
    uint8_t buf[2 * ST_TXNIDX_ENTRY];
    st_txnidx_encode(&x, 0, buf);
    assert_int_equal(st_be16(buf), 0);
    assert_int_equal((int64_t)st_be64(buf + 2), 5);
    assert_int_equal((int64_t)st_be64(buf + 10), 10);
    assert_int_equal((int64_t)st_be64(buf + 18), 20);
    assert_int_equal((int64_t)st_be64(buf + 26), 21);
    st_txnidx_t y = {0};
    assert_int_equal(st_txnidx_load(&y, buf, sizeof buf, 0, 31), 0);
    assert_int_equal(y.n, 2);
    assert_memory_equal(y.e, x.e, 2 * sizeof *x.e);
    assert_int_equal(y.flushed, 2);
    /* a partial entry, a marker outside the segment, a version, decreasing markers */
    assert_int_equal(st_txnidx_load(&y, buf, sizeof buf - 1, 0, 31), ST_E_CORRUPT);
    assert_int_equal(y.n, 0);
    assert_int_equal(st_txnidx_load(&y, buf, sizeof buf, 0, 30), ST_E_CORRUPT);
    assert_int_equal(st_txnidx_load(&y, buf, sizeof buf, 21, 31), ST_E_CORRUPT);
    buf[1] = 1;
    assert_int_equal(st_txnidx_load(&y, buf, sizeof buf, 0, 31), ST_E_CORRUPT);
    buf[1] = 0;
    st_put_be64(buf + ST_TXNIDX_ENTRY + 18, 19);
    assert_int_equal(st_txnidx_load(&y, buf, sizeof buf, 0, 31), ST_E_CORRUPT);
    /* truncation drops the entries whose marker goes */
    st_txnidx_truncate(&x, 30);
    assert_int_equal(x.n, 1);
    st_txnidx_truncate(&x, 20);
    assert_int_equal(x.n, 0);
    st_txnidx_fini(&x);
    st_txnidx_fini(&y);
}

/* The index lives, rolls, is cut and goes with its segment; aborted lists follow Kafka's
 * collectAbortedTransactions. */
static void test_follows_its_segment(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 3);
    st_log_config_t c = cfg(false);
    st_log_t *log;
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    bool ex;
    file_size(&t, DIR "/00000000000000000000.txnindex", &ex);
    assert_true(ex);                  /* created with the segment, empty */
    put(log, 1, 0, 5, true, t.now);   /* 0 */
    put(log, 2, 0, 6, true, t.now);   /* 1 */
    put_marker(log, 5, false, t.now); /* 2 */
    abort_at(log, 5, 0, 2);
    assert_int_equal(st_log_roll(log), 0);
    put_marker(log, 6, false, t.now); /* 3 */
    abort_at(log, 6, 1, 3);
    put(log, 3, 0, -1, false, t.now); /* 4 */
    assert_int_equal(file_size(&t, DIR "/00000000000000000000.txnindex", &ex), 34);
    assert_int_equal(file_size(&t, DIR "/00000000000000000003.txnindex", &ex), 34);
    st_txn_aborted_t ab[4];
    assert_int_equal(st_log_txn_aborted(log, 0, 5, ab, 4), 2);
    assert_int_equal(st_log_txn_aborted(log, 3, 5, ab, 4), 1);
    assert_int_equal(ab[0].producer_id, 6);
    assert_int_equal(st_log_txn_aborted(log, 0, 1, ab, 4), 1); /* 6 began at 1 */
    assert_int_equal(st_log_txn_aborted(log, 4, 5, ab, 4), 0);
    /* an entry's marker must be in the log, after the last one */
    st_txn_aborted_t bad = {7, 0, 9, 10};
    assert_int_equal(st_log_txn_add(log, &bad), ST_E_OUT_OF_RANGE);
    /* truncation below the second marker cuts its entry, in memory and file */
    assert_int_equal(st_log_truncate_to(log, 3), 0);
    assert_int_equal(st_log_txn_aborted(log, 0, 5, ab, 4), 1);
    assert_int_equal(st_log_close(log), 0);
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    assert_int_equal(st_log_txn_aborted(log, 0, 5, ab, 4), 1);
    /* DeleteRecords past the first segment deletes its .txnindex with it */
    put(log, 4, 0, -1, false, t.now);
    assert_int_equal(st_log_roll(log), 0);
    put(log, 5, 0, -1, false, t.now);
    assert_int_equal(st_log_set_start_offset(log, st_log_end_offset(log) - 1), 0);
    file_size(&t, DIR "/00000000000000000000.txnindex", &ex);
    assert_false(ex);
    assert_int_equal(st_log_txn_aborted(log, 0, 10, ab, 4), 0);
    assert_int_equal(st_log_close(log), 0);
    tenv_fini(&t);
}

/* An unclean stop: the recovered segment's index is rebuilt from its batches, with Kafka's
 * last stable offsets (another ongoing transaction's first offset). */
static void test_rebuilt_after_unclean_stop(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 4);
    st_log_config_t c = cfg(false);
    st_log_t *log;
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    put(log, 1, 0, 5, true, t.now);   /* 0: txn 5 */
    put(log, 2, 0, 6, true, t.now);   /* 1: txn 6 */
    put_marker(log, 5, false, t.now); /* 2: abort 5, 6 ongoing */
    put(log, 3, 0, 5, true, t.now);   /* 3: txn 5 again */
    put_marker(log, 6, true, t.now);  /* 4: commit 6 */
    put_marker(log, 5, false, t.now); /* 5: abort 5 */
    put_marker(log, 8, false, t.now); /* 6: an abort of an empty transaction: no entry */
    /* nothing recorded by hand: the index must come from the batches; the process dies */
    tenv_complete(&t, (size_t)-1);
    st_faultfs_crash_mode(t.ff, ST_CRASH_DROP);
    st_log_close(log);
    tenv_complete(&t, (size_t)-1);
    st_faultfs_restart(t.ff);
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    st_txn_aborted_t ab[4];
    assert_int_equal(st_log_txn_aborted(log, 0, 7, ab, 4), 2);
    assert_int_equal(ab[0].producer_id, 5);
    assert_int_equal(ab[0].first_offset, 0);
    assert_int_equal(ab[0].last_offset, 2);
    assert_int_equal(ab[0].last_stable_offset, 1);
    assert_int_equal(ab[1].first_offset, 3);
    assert_int_equal(ab[1].last_offset, 5);
    assert_int_equal(ab[1].last_stable_offset, 6);
    assert_int_equal(st_log_close(log), 0);
    tenv_fini(&t);
}

static void on_durable(void *arg, int res)
{
    *(int *)arg = res + 1;
}

/* A crash with the batches durable only in the shard's journal: its replay appends the marker
 * again, and the .txnindex entry (written by the partition layer on the first append, never
 * synced) is rebuilt before the replayed log is closed and trusted. */
static void test_journal_replay_reindexes(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 6);
    st_journal_t *j;
    assert_int_equal(st_journal_open(&t.env, "/data", 0, 4 << 20, &j), 0);
    st_log_config_t c = cfg(false);
    st_log_t *log;
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    put(log, 1, 0, 5, true, t.now);   /* 0 */
    put_marker(log, 5, false, t.now); /* 1 */
    abort_at(log, 5, 0, 1);
    int got = 0;
    int rc = st_log_wait_durable(log, 2, on_durable, &got);
    assert_true(rc == 1 || got == 1);
    st_faultfs_crash_mode(t.ff, ST_CRASH_DROP);
    st_log_close(log);
    st_journal_close(j);
    tenv_complete(&t, (size_t)-1);
    st_faultfs_restart(t.ff);
    st_journal_recovery_t r;
    assert_int_equal(st_journal_recover(t.env.fs, "/data", &r), 0);
    assert_true(r.applied > 0);
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    assert_int_equal(st_log_end_offset(log), 2);
    st_txn_aborted_t ab[2];
    assert_int_equal(st_log_txn_aborted(log, 0, 2, ab, 2), 1);
    assert_int_equal(ab[0].first_offset, 0);
    assert_int_equal(ab[0].last_offset, 1);
    assert_int_equal(st_log_close(log), 0);
    tenv_fini(&t);
}

/* Kafka's cleaner rules for transactions. No batch is any producer's last here (their state
 * lives elsewhere), so emptied batches go. */
static bool never_last(void *arg, int64_t pid, int64_t last_offset)
{
    (void)arg;
    (void)pid;
    (void)last_offset;
    return false;
}

static int64_t clean_all(st_log_t *log)
{
    st_log_clean_opts_t o = {
        .budget_bytes = 1 << 20, .map_bytes = 1 << 16, .last_of_producer = never_last};
    int64_t n, steps = 0;
    while ((n = st_log_clean_step(log, &o)) > 0)
        assert_true(++steps < 10000);
    assert_int_equal(n, 0);
    return steps;
}

typedef struct {
    int ver[8];  /* per key: latest version read, -1 none */
    int markers; /* control batches */
    int records;
} view_t;

static int see(void *arg, const st_batch_record_t *r)
{
    view_t *v = arg;
    v->records++;
    v->ver[r->key[1] - '0'] = atoi((const char *)r->value + 1);
    return 0;
}

static void view(st_log_t *log, view_t *v)
{
    memset(v, 0, sizeof *v);
    for (int i = 0; i < 8; i++)
        v->ver[i] = -1;
    st_buf_t b;
    st_buf_init(&b);
    int64_t next;
    assert_int_equal(tb_read_all(log, st_log_start_offset(log), 1 << 20, &b, &next), 0);
    for (size_t pos = 0; pos + ST_BATCH_HEADER_SIZE <= b.len;) {
        st_batch_hdr_t h;
        assert_int_equal(st_batch_check(b.data + pos, b.len - pos, &h), 0);
        if (h.attributes & ST_BATCH_ATTR_CONTROL)
            v->markers++;
        else
            assert_int_equal(
                st_batch_walk(b.data + pos, (size_t)st_batch_size(&h), 1 << 20, see, v), 0);
        pos += (size_t)st_batch_size(&h);
    }
    st_buf_fini(&b);
}

static void test_clean_transactions(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 5);
    st_log_config_t c = cfg(true);
    st_log_t *log;
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    int64_t ts = t.now;
    put(log, 1, 1, -1, false, ts); /* 0: k1 = v1 */
    put(log, 1, 2, 5, true, ts);   /* 1: k1 = v2 in 5's transaction, aborted */
    put(log, 2, 1, 6, true, ts);   /* 2: k2 = v1 in 6's, committed */
    put_marker(log, 5, false, ts); /* 3 */
    abort_at(log, 5, 1, 3);
    put_marker(log, 6, true, ts); /* 4 */
    put(log, 3, 1, 7, true, ts);  /* 5: 7's transaction, still open */
    assert_int_equal(st_log_roll(log), 0);
    put(log, 4, 1, -1, false, ts); /* 6 */
    for (int i = 0; i < 100 && t.nq > 0; i++)
        tenv_complete(&t, (size_t)-1);
    /* the clean limit (the LSO at 5) keeps the first segment out of reach */
    st_log_set_clean_limit(log, 5);
    assert_false(st_log_clean_due(log));
    st_log_set_clean_limit(log, INT64_MAX);
    clean_all(log);
    view_t v;
    view(log, &v);
    assert_int_equal(v.ver[1], 1); /* the aborted v2 is gone, and did not shadow v1 */
    assert_int_equal(v.ver[2], 1);
    assert_int_equal(v.ver[3], 1);
    assert_int_equal(v.markers, 2); /* both kept: their transactions had batches before them */
    st_txn_aborted_t ab[2];
    assert_int_equal(st_log_txn_aborted(log, 0, 7, ab, 2), 1);
    bool ex;
    assert_int_equal(file_size(&t, DIR "/00000000000000000000.txnindex", &ex), 34);
    /* a later clean, past delete.retention.ms: the abort marker has nothing before it now and
     * goes; the commit marker stays while 6's batch does */
    t.now += 5000;
    put(log, 4, 2, -1, false, t.now);
    assert_int_equal(st_log_roll(log), 0);
    put(log, 5, 1, -1, false, t.now);
    for (int i = 0; i < 100 && t.nq > 0; i++)
        tenv_complete(&t, (size_t)-1);
    clean_all(log);
    t.now += 5000;
    put(log, 6, 1, -1, false, t.now);
    assert_int_equal(st_log_roll(log), 0);
    put(log, 7, 1, -1, false, t.now);
    for (int i = 0; i < 100 && t.nq > 0; i++)
        tenv_complete(&t, (size_t)-1);
    clean_all(log);
    view(log, &v);
    assert_int_equal(v.ver[1], 1);
    assert_int_equal(v.markers, 1);
    assert_int_equal(v.ver[2], 1);
    assert_int_equal(st_log_txn_aborted(log, 0, 20, ab, 2), 0); /* its entry went with it */
    assert_int_equal(st_log_close(log), 0);
    tenv_fini(&t);
}

int main(void)
{
    st_log_set_level(ST_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_batch),
        cmocka_unit_test(test_codec_and_validation),
        cmocka_unit_test(test_follows_its_segment),
        cmocka_unit_test(test_rebuilt_after_unclean_stop),
        cmocka_unit_test(test_journal_replay_reindexes),
        cmocka_unit_test(test_clean_transactions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
