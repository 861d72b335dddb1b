/*
 * test_clean.c — the log cleaner (compaction): latest record per key with original offsets,
 * tombstones kept for delete.retention.ms after a clean then removed, keyless records dropped,
 * compressed batches recompressed with their codec, idempotent producers' last batch kept,
 * small segments grouped, and a crash at every file-system step of a clean leaving either the
 * old segments or the new ones (never a loss).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "base/err.h"
#include "base/log.h"
#include "storage/codec.h"
#include "tcodec.h"
#include "testutil.h"

#define DIR "/data/c-0"

/* One keyed record: key "k<key>", value "v<key>.<ver>" or null (tombstone) when ver < 0. */
static void kb_record(st_buf_t *b, int32_t index, int key, int ver)
{
    char k[32], v[32];
    int kl = snprintf(k, sizeof k, "k%d", key);
    int vl = ver < 0 ? -1 : snprintf(v, sizeof v, "v%d.%d", key, ver);
    uint8_t body[128];
    size_t n = 0;
    body[n++] = 0;
    n += (size_t)st_varint64_encode(body + n, index);
    n += (size_t)st_varint32_encode(body + n, index);
    n += (size_t)st_varint32_encode(body + n, kl);
    memcpy(body + n, k, (size_t)kl);
    n += (size_t)kl;
    n += (size_t)st_varint32_encode(body + n, vl);
    if (vl > 0) {
        memcpy(body + n, v, (size_t)vl);
        n += (size_t)vl;
    }
    n += (size_t)st_varint32_encode(body + n, 0);
    uint8_t lenb[ST_VARINT32_MAX];
    int ll = st_varint32_encode(lenb, (int32_t)n);
    st_buf_append(b, lenb, (size_t)ll);
    st_buf_append(b, body, n);
}

/* A batch of count records of keys[i] at versions vers[i], compressed as variant (-1: none),
 * from producer pid (-1: none). */
static void kb_batch(st_buf_t *out, int count, const int *keys, const int *vers, int64_t ts,
                     int variant, int64_t pid)
{
    st_buf_t recs;
    st_buf_init(&recs);
    for (int i = 0; i < count; i++)
        kb_record(&recs, i, keys[i], vers[i]);
    size_t start = out->len;
    if (variant < 0) {
        tb_batch_attr(out, 1, 1, ts, 'x', 0);
        out->len = start + ST_BATCH_HEADER_SIZE;
        st_buf_append(out, recs.data, recs.len);
    } else {
        st_buf_t z;
        st_buf_init(&z);
        assert_int_equal(tc_compress(variant, recs.data, recs.len, &z), 0);
        tc_wrap(out, tc_codec[variant], z.data, z.len, count);
        st_buf_fini(&z);
    }
    uint8_t *h = out->data + start;
    st_put_be32(h + ST_BATCH_OFF_LENGTH, (uint32_t)(out->len - start - ST_BATCH_LOG_OVERHEAD));
    st_put_be32(h + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(count - 1));
    st_put_be32(h + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)count);
    st_put_be64(h + ST_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)ts);
    st_put_be64(h + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)(ts + count - 1));
    st_put_be64(h + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)pid);
    st_put_be16(h + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)(pid >= 0 ? 0 : -1));
    st_put_be32(h + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)(pid >= 0 ? 0 : -1));
    tb_fix_crc(h);
    st_buf_fini(&recs);
}

static st_log_config_t ccfg(int64_t segment_bytes)
{
    st_log_config_t c;
    st_log_config_default(&c);
    c.segment_bytes = segment_bytes;
    c.compact = true;
    c.retention_deletes = false;
    c.min_cleanable_dirty_ratio = 0;
    c.index_interval_bytes = 128;
    return c;
}

static int64_t append_keyed(st_log_t *log, int count, const int *keys, const int *vers, int64_t ts,
                            int variant, int64_t pid)
{
    st_buf_t b;
    st_buf_init(&b);
    kb_batch(&b, count, keys, vers, ts, variant, pid);
    st_log_append_info_t info;
    assert_int_equal(st_log_append(log, b.data, b.len, 0, &info, NULL), 0);
    st_buf_fini(&b);
    return info.base_offset;
}

/* Cleans until nothing is left to do; returns the number of steps. */
static int clean_all(st_log_t *log, bool (*last)(void *, int64_t, int64_t))
{
    st_log_clean_opts_t o = {.budget_bytes = 700, .map_bytes = 1 << 16, .last_of_producer = last};
    int steps = 0;
    int64_t n;
    while ((n = st_log_clean_step(log, &o)) > 0)
        assert_true(++steps < 100000);
    assert_int_equal(n, 0);
    return steps;
}

typedef struct seen {
    int64_t offset[64]; /* per key: offset of its last record read, -1 none */
    int ver[64];        /* its version (-1 tombstone) */
    int count[64];      /* records read per key */
    int records, empty_batches;
    int codecs[8]; /* batches per codec */
    int64_t last_offset;
} seen_t;

static int see_record(void *arg, const st_batch_record_t *r)
{
    seen_t *s = arg;
    int key = atoi((const char *)r->key + 1);
    assert_true(key >= 0 && key < 64);
    assert_true(r->offset > s->last_offset); /* order kept */
    s->last_offset = r->offset;
    s->offset[key] = r->offset;
    s->count[key]++;
    s->records++;
    if (r->value_len < 0) {
        s->ver[key] = -1;
    } else {
        char v[32];
        snprintf(v, sizeof v, "%.*s", r->value_len, (const char *)r->value);
        s->ver[key] = atoi(strchr(v, '.') + 1);
    }
    return 0;
}

/* Reads the whole log through st_log_read: every batch checks out and walks. */
static void read_log(st_log_t *log, seen_t *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 64; i++)
        s->offset[i] = -1;
    s->last_offset = -1;
    st_buf_t b;
    st_buf_init(&b);
    int64_t next;
    assert_int_equal(tb_read_all(log, st_log_start_offset(log), 64 << 20, &b, &next), 0);
    for (size_t p = 0; p < b.len;) {
        st_batch_hdr_t h;
        assert_int_equal(st_batch_check(b.data + p, b.len - p, &h), 0);
        size_t n = (size_t)st_batch_size(&h);
        if (h.records_count == 0)
            s->empty_batches++;
        s->codecs[st_batch_compression(&h)]++;
        assert_int_equal(st_batch_walk(b.data + p, n, 64 << 20, see_record, s), 0);
        p += n;
    }
    st_buf_fini(&b);
}

/* 40 rounds of updates to keys 0..9 over small segments: after cleaning, the closed segments
 * hold each key once, at the offset of its latest update; the active segment is untouched. */
static void test_latest_per_key(void **state)
{
    (void)state;
    for (int variant = -1; variant < TC_COUNT; variant++) {
        tenv_t t;
        tenv_init(&t, 90);
        st_log_config_t c = ccfg(600);
        st_log_t *log = NULL;
        assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
        int64_t want[10];
        int want_ver[10];
        for (int round = 0; round < 40; round++) {
            int keys[2] = {(round * 2) % 10, (round * 2 + 1) % 10}, vers[2] = {round, round};
            int64_t base = append_keyed(log, 2, keys, vers, t.now, variant, -1);
            want[keys[0]] = base;
            want[keys[1]] = base + 1;
            want_ver[keys[0]] = want_ver[keys[1]] = round;
        }
        int segs_before = st_log_segment_count(log);
        assert_true(segs_before > 5);
        int64_t end = st_log_end_offset(log);
        assert_true(st_log_clean_due(log));
        assert_true(clean_all(log, NULL) > 1);
        st_log_clean_stats_t st;
        st_log_clean_stats(log, &st);
        assert_int_equal(st.cleans, 1);
        assert_true(st.records_removed > 40);
        assert_true(st.bytes_written < st.bytes_read);
        assert_true(st_log_segment_count(log) < segs_before); /* grouped */
        /* Compaction never moves the log start, even past emptied segments: a read from it
         * finds the next record. */
        assert_int_equal(st_log_start_offset(log), 0);
        seen_t s;
        read_log(log, &s);
        for (int k = 0; k < 10; k++) {
            assert_int_equal(s.offset[k], want[k]); /* original offsets */
            assert_int_equal(s.ver[k], want_ver[k]);
        }
        assert_true(s.records < 2 * 40);
        /* Keys of the active segment may repeat; the closed part has each key at most once. */
        assert_int_equal(st_log_end_offset(log), end);
        /* Every batch kept its codec. */
        for (int codec = 0; codec < 8; codec++)
            if (codec != (variant < 0 ? 0 : tc_codec[variant]))
                assert_int_equal(s.codecs[codec], 0);
        /* Clean again: nothing dirty is left. */
        assert_false(st_log_clean_due(log));
        /* Reopen: the cleaned segments check out, the clean point survives. */
        assert_int_equal(st_log_close(log), 0);
        assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
        seen_t s2;
        read_log(log, &s2);
        assert_memory_equal(s.offset, s2.offset, sizeof s.offset);
        assert_int_equal(st_log_start_offset(log), 0);
        assert_false(st_log_clean_due(log));
        st_log_close(log);
        tenv_fini(&t);
    }
}

/* A tombstone stays through the clean that first sees it, and goes in a later clean once it
 * is older than delete.retention.ms; keyless records go at once. */
static void test_tombstones(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 91);
    st_log_config_t c = ccfg(300);
    c.delete_retention_ms = 60000;
    st_log_t *log = NULL;
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    int k1[1] = {1}, v1[1] = {1}, tomb[1] = {-1};
    append_keyed(log, 1, k1, v1, t.now, -1, -1);
    int64_t tomb_at = append_keyed(log, 1, k1, tomb, t.now, -1, -1);
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, 2, 10, t.now, 'n'); /* keyless */
    /* A compacted log refuses them; they got in while the topic was not compacted. */
    assert_int_equal(st_log_append(log, b.data, b.len, 0, NULL, NULL), ST_E_NO_KEY);
    c.compact = false;
    assert_int_equal(st_log_set_config(log, &c), 0);
    assert_int_equal(st_log_append(log, b.data, b.len, 0, NULL, NULL), 0);
    c.compact = true;
    assert_int_equal(st_log_set_config(log, &c), 0);
    st_buf_fini(&b);
    for (int i = 0; i < 6; i++) {
        int k[1] = {2 + i}, v[1] = {0};
        append_keyed(log, 1, k, v, t.now, -1, -1);
    }
    clean_all(log, NULL);
    seen_t s;
    read_log(log, &s);
    assert_int_equal(s.offset[1], tomb_at);
    assert_int_equal(s.ver[1], -1);
    assert_int_equal(s.count[1], 1);
    /* Past delete.retention.ms, a clean (more dirty data makes one due) drops it. */
    t.now += 60001;
    for (int i = 0; i < 12; i++) {
        int k[1] = {20 + i}, v[1] = {0};
        append_keyed(log, 1, k, v, t.now, -1, -1);
    }
    assert_true(st_log_clean_due(log));
    clean_all(log, NULL);
    read_log(log, &s);
    assert_int_equal(s.count[1], 0);
    st_log_close(log);
    tenv_fini(&t);
}

static bool never_last(void *arg, int64_t pid, int64_t last_offset)
{
    (void)arg;
    (void)pid;
    return last_offset == 5; /* only the batch ending at 5 */
}

/* A producer's batch emptied by the clean is kept (header only) when it is its last. */
static void test_producer_batches(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 92);
    st_log_config_t c = ccfg(400);
    st_log_t *log = NULL;
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    int keys[2] = {1, 2}, vers[2] = {0, 0};
    append_keyed(log, 2, keys, vers, t.now, -1, 7); /* offsets 0-1 */
    append_keyed(log, 2, keys, vers, t.now, -1, 7); /* 2-3 */
    append_keyed(log, 2, keys, vers, t.now, -1, 7); /* 4-5 */
    for (int i = 0; i < 8; i++) {
        int k[2] = {1, 2}, v[2] = {i + 1, i + 1};
        append_keyed(log, 2, k, v, t.now, -1, -1);
    }
    clean_all(log, never_last);
    seen_t s;
    read_log(log, &s);
    assert_int_equal(s.empty_batches, 1);
    st_log_read_t r;
    assert_int_equal(st_log_read(log, 4, 1 << 20, -1, &r), 0);
    uint8_t hb[ST_BATCH_HEADER_SIZE];
    assert_true(st_file_pread(r.ranges[0].file, hb, sizeof hb, r.ranges[0].pos) ==
                (ssize_t)sizeof hb);
    st_log_read_release(&r);
    st_batch_hdr_t h;
    assert_int_equal(st_batch_parse_hdr(hb, sizeof hb, &h), 0);
    assert_int_equal(h.base_offset, 4);
    assert_int_equal(h.last_offset_delta, 1);
    assert_int_equal(h.producer_id, 7);
    assert_int_equal(h.records_count, 0);
    st_log_close(log);
    tenv_fini(&t);
}

/*
 * A crash at each file-system step of a clean: after the restart every key's latest record is
 * there at its offset, nothing is duplicated in a way that changes the latest values, and a
 * clean afterwards completes.
 */
static int count_swaps(void *arg, const char *name, int is_dir)
{
    size_t n = strlen(name);
    if (!is_dir && n > 5 && strcmp(name + n - 5, ".swap") == 0)
        ++*(int *)arg;
    return 0;
}

static void test_crash_points(void **state)
{
    (void)state;
    int crashes = 0, swaps_finished = 0;
    for (int point = 0; point < 400; point += 3) {
        tenv_t t;
        tenv_init(&t, 93 + (uint64_t)point);
        st_log_config_t c = ccfg(500);
        st_log_t *log = NULL;
        assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
        int64_t want[10];
        for (int round = 0; round < 30; round++) {
            int keys[2] = {(round * 3) % 10, (round * 3 + 1) % 10}, vers[2] = {round, round};
            int64_t base = append_keyed(log, 2, keys, vers, t.now, -1, -1);
            want[keys[0]] = base;
            want[keys[1]] = base + 1;
        }
        /* The crash comes inside the clean, at its point-th file-system call. */
        st_faultfs_crash_after(t.ff, point, (st_crash_mode_t)(point % ST_CRASH__COUNT));
        st_log_clean_opts_t o = {.budget_bytes = 300, .map_bytes = 1 << 16};
        int64_t n;
        while ((n = st_log_clean_step(log, &o)) > 0 && !st_faultfs_crashed(t.ff))
            ;
        bool crashed = st_faultfs_crashed(t.ff);
        st_faultfs_crash_after(t.ff, -1, ST_CRASH_DROP);
        st_log_close(log);
        if (crashed) {
            st_faultfs_restart(t.ff);
            crashes++;
            int swaps = 0;
            t.env.fs.ops->listdir(t.env.fs.ctx, DIR, count_swaps, &swaps);
            swaps_finished += swaps > 0;
        }
        tenv_complete(&t, (size_t)-1);
        assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
        seen_t s;
        read_log(log, &s);
        for (int k = 0; k < 10; k++)
            assert_int_equal(s.offset[k], want[k]);
        clean_all(log, NULL);
        read_log(log, &s);
        for (int k = 0; k < 10; k++)
            assert_int_equal(s.offset[k], want[k]);
        st_log_close(log);
        tenv_fini(&t);
        if (!crashed)
            break; /* past the last step of a clean */
    }
    /* The points covered both sides of the commit: some crashes left a swap to finish. */
    assert_true(crashes > 20);
    assert_true(swaps_finished > 0);
}

/* The group's files are synced through the host's asynchronous sync: the step says
 * ST_E_AGAIN until they complete, and a log closed meanwhile frees the clean when they do. */
static void test_async_group_syncs(void **state)
{
    (void)state;
    for (int close_early = 0; close_early < 2; close_early++) {
        tenv_t t;
        tenv_init(&t, 95);
        st_log_config_t c = ccfg(600);
        st_log_t *log = NULL;
        assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
        for (int round = 0; round < 30; round++) {
            int keys[2] = {round % 5, (round + 1) % 5}, vers[2] = {round, round};
            append_keyed(log, 2, keys, vers, t.now, -1, -1);
        }
        t.defer = true;
        st_log_clean_opts_t o = {.budget_bytes = 1 << 20, .map_bytes = 1 << 16};
        int64_t n;
        int waits = 0;
        while ((n = st_log_clean_step(log, &o)) != 0) {
            if (n == ST_E_AGAIN) {
                waits++;
                assert_true(t.nq > 0);
                if (close_early)
                    break;
                assert_int_equal(st_log_clean_step(log, &o), ST_E_AGAIN); /* still waiting */
                tenv_complete(&t, (size_t)-1);
                continue;
            }
            assert_true(n > 0);
        }
        assert_true(waits > 0);
        if (close_early) {
            assert_int_equal(st_log_close(log), 0);
            tenv_complete(&t, (size_t)-1); /* the clean's syncs land after the close */
        } else {
            st_log_clean_stats_t st;
            st_log_clean_stats(log, &st);
            assert_int_equal(st.cleans, 1);
            assert_int_equal(st_log_close(log), 0);
        }
        t.defer = false;
        assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
        seen_t s;
        read_log(log, &s);
        for (int k = 0; k < 5; k++)
            assert_true(s.count[k] >= 1);
        st_log_close(log);
        tenv_fini(&t);
    }
}

/* Every closed record superseded by the active segment's: the cleaner empties every closed
 * segment, and later rolls still leave the log start where it was. */
static void test_start_stays_when_all_cleaned(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 96);
    st_log_config_t c = ccfg(300);
    st_log_t *log = NULL;
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    int key[1] = {3};
    for (int v = 0; v < 20; v++) {
        int ver[1] = {v};
        append_keyed(log, 1, key, ver, t.now, -1, -1);
    }
    clean_all(log, NULL);
    for (int v = 20; v < 40; v++) {
        int ver[1] = {v};
        append_keyed(log, 1, key, ver, t.now, -1, -1); /* rolls again */
        assert_int_equal(st_log_start_offset(log), 0);
    }
    clean_all(log, NULL);
    assert_int_equal(st_log_start_offset(log), 0);
    seen_t s;
    read_log(log, &s);
    assert_int_equal(s.ver[3], 39);
    assert_int_equal(st_log_close(log), 0);
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    assert_int_equal(st_log_start_offset(log), 0);
    st_log_close(log);
    tenv_fini(&t);
}

/* Records not yet durable never supersede durable ones: here newer versions sit in closed but
 * unsynced segments (write caching) when the clean runs, then their sync fails and the log is
 * cut back to its durable offset; the latest synced version must still be there (the cleaner
 * stops at the durable offset, as Kafka's stops at the high watermark). */
static void test_only_durable_records_supersede(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 97);
    st_log_config_t c = ccfg(300);
    c.flush_policy = ST_FLUSH_WRITE_CACHING;
    st_log_t *log = NULL;
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    int key[1] = {4};
    for (int v = 0; v < 10; v++) {
        int ver[1] = {v};
        append_keyed(log, 1, key, ver, t.now, -1, -1);
    }
    assert_int_equal(st_log_flush(log), 0);
    int64_t durable = st_log_durable_offset(log);
    assert_int_equal(durable, 10);
    for (int v = 10; v < 20; v++) {
        int ver[1] = {v};
        append_keyed(log, 1, key, ver, t.now, -1, -1); /* rolls: closed, unsynced segments */
    }
    assert_int_equal(st_log_durable_offset(log), 10);
    clean_all(log, NULL);
    /* The sync of the newer versions fails: the log is cut back to its durable offset. */
    st_faultfs_fail(t.ff, ST_FAULT_FDATASYNC, EIO, 0, 1);
    assert_int_equal(st_log_flush(log), 0);
    assert_int_equal(st_log_end_offset(log), 10);
    seen_t s;
    read_log(log, &s);
    assert_int_equal(s.count[4] > 0, 1);
    assert_int_equal(s.ver[4], 9);
    st_log_close(log);
    assert_int_equal(st_log_open(&t.env, DIR, &c, &log), 0);
    read_log(log, &s);
    assert_int_equal(s.ver[4], 9);
    st_log_close(log);
    tenv_fini(&t);
}

int main(void)
{
    st_log_set_level(ST_LOG_ERROR + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_latest_per_key),
        cmocka_unit_test(test_tombstones),
        cmocka_unit_test(test_producer_batches),
        cmocka_unit_test(test_crash_points),
        cmocka_unit_test(test_async_group_syncs),
        cmocka_unit_test(test_start_stays_when_all_cleaned),
        cmocka_unit_test(test_only_durable_records_supersede),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
