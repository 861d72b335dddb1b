/*
 * Unit tests for recovery: torn tails, bit flips inside batches, garbage and zeros after the
 * last batch, indexes missing / truncated / pointing past the end / into a batch, a corrupt
 * time index, checkpoint and marker handling. Each builds a log, damages its files through
 * faultfs, reopens it and checks exactly what survived.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdio.h>
#include <cmocka.h>

#include "base/err.h"
#include "storage/index.h"
#include "storage/meta.h"
#include "testutil.h"

#define DIR  "/data/r-0"
#define SEG0 DIR "/00000000000000000000"

typedef struct built {
    tenv_t t;
    st_log_config_t c;
    int64_t ends[64]; /* ends[i]: log end after batch i */
    int64_t pos[64];  /* byte position of batch i within its segment */
    int nbatches;
} built_t;

/* Builds nb batches of varying sizes, closes cleanly. Batch i has i % 4 + 1 records. */
static void build(built_t *b, uint64_t seed, int nb, int64_t segment_bytes)
{
    tenv_init(&b->t, seed);
    st_log_config_default(&b->c);
    b->c.segment_bytes = segment_bytes;
    b->c.index_interval_bytes = 256;
    st_log_t *log;
    assert_int_equal(st_log_open(&b->t.env, DIR, &b->c, &log), 0);
    st_buf_t buf;
    st_buf_init(&buf);
    int64_t pos = 0;
    int segs = 1;
    for (int i = 0; i < nb; i++) {
        st_buf_clear(&buf);
        tb_batch(&buf, i % 4 + 1, 40 + (size_t)(i * 13 % 90), 1000 + i, (uint8_t)i);
        assert_int_equal(st_log_append(log, buf.data, buf.len, 2, NULL, NULL), 0);
        if (st_log_segment_count(log) != segs) {
            segs = st_log_segment_count(log);
            pos = 0;
        }
        b->pos[i] = pos;
        pos += (int64_t)buf.len;
        b->ends[i] = st_log_end_offset(log);
    }
    b->nbatches = nb;
    st_buf_fini(&buf);
    assert_int_equal(st_log_close(log), 0);
}

static st_log_t *reopen(built_t *b)
{
    st_log_t *log = NULL;
    assert_int_equal(st_log_open(&b->t.env, DIR, &b->c, &log), 0);
    return log;
}

/* Removes the clean-shutdown marker: the next open is an unclean one, and the checkpoint's
 * recovery point is where a running broker's would be: the last segment's base (a clean close
 * had moved it to the end). */
static void unclean(built_t *b)
{
    b->t.env.fs.ops->unlink(b->t.env.fs.ctx, DIR "/" ST_META_CLEAN_FILE);
    int64_t last_base = 0;
    for (int i = 1; i < b->nbatches; i++)
        if (b->pos[i] == 0)
            last_base = b->ends[i - 1];
    st_meta_ckpt_t ck = {0, last_base, 0};
    uint8_t raw[ST_META_CKPT_SIZE];
    st_meta_encode_ckpt(&ck, raw);
    st_faultfs_put(b->t.ff, DIR "/" ST_META_CKPT_FILE, raw, sizeof raw);
}

static void file_edit(built_t *b, const char *path, void (*fn)(uint8_t **d, size_t *n, void *),
                      void *arg)
{
    uint8_t *d;
    size_t n;
    assert_int_equal(st_faultfs_get(b->t.ff, path, &d, &n), 0);
    fn(&d, &n, arg);
    assert_int_equal(st_faultfs_put(b->t.ff, path, d, n), 0);
    free(d);
}

static void cut_to(uint8_t **d, size_t *n, void *arg)
{
    (void)d;
    size_t want = *(size_t *)arg;
    if (want < *n)
        *n = want;
}

/* Every batch readable, valid and contiguous; returns the count. */
static int64_t check_readable(st_log_t *log)
{
    int64_t off = st_log_start_offset(log), batches = 0;
    while (off < st_log_end_offset(log)) {
        st_buf_t b;
        st_buf_init(&b);
        int64_t next;
        assert_int_equal(tb_read_all(log, off, 1 << 20, &b, &next), 0);
        for (size_t p = 0; p < b.len;) {
            st_batch_hdr_t h;
            assert_int_equal(st_batch_check(b.data + p, b.len - p, &h), 0);
            assert_true(h.base_offset >= off || batches == 0);
            p += (size_t)st_batch_size(&h);
            batches++;
        }
        st_buf_fini(&b);
        assert_true(next > off);
        off = next;
    }
    return batches;
}

static void test_torn_tail(void **state)
{
    (void)state;
    for (int k = 1; k < 12; k++) {
        built_t b;
        build(&b, (uint64_t)k, 12, 1 << 20);
        /* Cut inside batch k (at several depths), as a crash mid-write leaves it. */
        int64_t batch_end = k + 1 < b.nbatches ? b.pos[k + 1] : 0;
        (void)batch_end;
        size_t at = (size_t)b.pos[k] + (size_t)(k * 7 % 61) + 1;
        unclean(&b);
        file_edit(&b, SEG0 ".log", cut_to, &at);
        st_log_t *log = reopen(&b);
        assert_int_equal(st_log_end_offset(log), b.ends[k - 1]);
        assert_int_equal(check_readable(log), k);
        /* The file was cut at the batch boundary. */
        uint8_t *d;
        size_t n;
        st_log_close(log);
        assert_int_equal(st_faultfs_get(b.t.ff, SEG0 ".log", &d, &n), 0);
        assert_int_equal(n, (size_t)b.pos[k]);
        free(d);
        tenv_fini(&b.t);
    }
}

typedef struct flip {
    size_t byte;
    uint8_t mask;
} flip_t;

static void do_flip(uint8_t **d, size_t *n, void *arg)
{
    flip_t *f = arg;
    if (f->byte < *n)
        (*d)[f->byte] ^= f->mask;
}

static void test_bit_flips(void **state)
{
    (void)state;
    uint64_t rng = 12345;
    for (int iter = 0; iter < 60; iter++) {
        built_t b;
        build(&b, (uint64_t)iter, 10, 1 << 20);
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        int k = (int)((rng >> 33) % 10);
        int64_t size = (k + 1 < b.nbatches ? b.pos[k + 1] : 0) - b.pos[k];
        if (k + 1 >= b.nbatches) {
            uint8_t *d;
            size_t n;
            st_faultfs_get(b.t.ff, SEG0 ".log", &d, &n);
            size = (int64_t)n - b.pos[k];
            free(d);
        }
        /* Any byte from batchLength on, except the leader epoch (outside the CRC and not
         * checked: Kafka's format cannot tell). */
        int64_t in;
        do
            in = 8 + (int64_t)((rng >> 20) % (uint64_t)(size - 8)),
            rng = rng * 6364136223846793005ULL + 1;
        while (in >= 12 && in < 16);
        flip_t f = {(size_t)(b.pos[k] + in), (uint8_t)(1u << ((rng >> 40) % 8))};
        unclean(&b);
        file_edit(&b, SEG0 ".log", do_flip, &f);
        st_log_t *log = reopen(&b);
        int64_t want = k == 0 ? 0 : b.ends[k - 1];
        if (st_log_end_offset(log) != want)
            fail_msg("iter %d: flip in batch %d byte %" PRId64 ": end %" PRId64 " want %" PRId64,
                     iter, k, in, st_log_end_offset(log), want);
        assert_int_equal(check_readable(log), k);
        st_log_close(log);
        tenv_fini(&b.t);
    }
}

static void add_bytes(uint8_t **d, size_t *n, void *arg)
{
    const uint8_t *src = arg;
    uint8_t *nd = realloc(*d, *n + 3000);
    assert_non_null(nd);
    if (src)
        memcpy(nd + *n, src, 3000);
    else
        memset(nd + *n, 0, 3000);
    *d = nd;
    *n += 3000;
}

static void test_garbage_and_zero_tail(void **state)
{
    (void)state;
    uint8_t garbage[3000];
    uint64_t x = 99;
    for (size_t i = 0; i < sizeof garbage; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        garbage[i] = (uint8_t)(x >> 56);
    }
    for (int z = 0; z < 2; z++) {
        for (int clean = 0; clean < 2; clean++) {
            built_t b;
            build(&b, 40 + (uint64_t)z, 8, 1 << 20);
            if (!clean)
                unclean(&b);
            file_edit(&b, SEG0 ".log", add_bytes, z ? NULL : garbage);
            st_log_t *log = reopen(&b);
            assert_int_equal(st_log_end_offset(log), b.ends[7]);
            assert_int_equal(check_readable(log), 8);
            /* Appends go right after the last good batch. */
            st_buf_t buf;
            st_buf_init(&buf);
            tb_batch(&buf, 1, 5, 0, 'n');
            assert_int_equal(st_log_append(log, buf.data, buf.len, 2, NULL, NULL), 0);
            st_buf_fini(&buf);
            st_log_close(log);
            log = reopen(&b);
            assert_int_equal(check_readable(log), 9);
            st_log_close(log);
            tenv_fini(&b.t);
        }
    }
}

/* Builds a two-segment log so segment 0 is closed (its index loaded, not rebuilt by default). */
static void build2(built_t *b, uint64_t seed)
{
    build(b, seed, 40, 2500);
}

static void check_index_rebuilt(built_t *b, const char *path, const uint8_t *want, size_t wn)
{
    uint8_t *d;
    size_t n;
    assert_int_equal(st_faultfs_get(b->t.ff, path, &d, &n), 0);
    assert_int_equal(n, wn);
    assert_memory_equal(d, want, wn);
    free(d);
}

static void corrupt_index_case(int which)
{
    built_t b;
    build2(&b, 50 + (uint64_t)which);
    uint8_t *orig;
    size_t on;
    const char *path = which == 5 ? SEG0 ".timeindex" : SEG0 ".index";
    assert_int_equal(st_faultfs_get(b.t.ff, path, &orig, &on), 0);
    assert_true(on >= 3 * ST_OFFIDX_ENTRY);
    uint8_t *bad = malloc(on + 16);
    memcpy(bad, orig, on);
    size_t bn = on;
    switch (which) {
    case 0: /* missing */
        b.t.env.fs.ops->unlink(b.t.env.fs.ctx, path);
        break;
    case 1: /* truncated mid-entry */
        bn = on - 3;
        break;
    case 2: /* last entry points past the end of the log */
        st_put_be32(bad + on - 4, 1u << 30);
        break;
    case 3: /* last entry points inside a batch */
        st_put_be32(bad + on - 4, st_be32(bad + on - 4) + 1);
        break;
    case 4: /* entries out of order */
        memcpy(bad, orig + 8, 8);
        memcpy(bad + 8, orig, 8);
        break;
    case 5: /* time index: timestamps decrease */
        st_put_be64(bad, (uint64_t)INT64_MAX);
        break;
    }
    if (which != 0)
        st_faultfs_put(b.t.ff, path, bad, bn);
    st_log_t *log = reopen(&b); /* clean open: the index is loaded and checked */
    assert_int_equal(st_log_end_offset(log), b.ends[b.nbatches - 1]);
    assert_int_equal(check_readable(log), b.nbatches);
    /* Each offset reads the right batch. */
    for (int i = 0; i < b.nbatches; i++) {
        st_log_read_t r;
        int64_t off = i == 0 ? 0 : b.ends[i - 1];
        assert_int_equal(st_log_read(log, off, 1, -1, &r), 0);
        assert_int_equal(r.first_offset, off);
        assert_int_equal(r.next_offset, b.ends[i]);
        st_log_read_release(&r);
    }
    st_log_close(log);
    check_index_rebuilt(&b, path, orig, on);
    free(orig);
    free(bad);
    tenv_fini(&b.t);
}

static void test_index_missing(void **state)
{
    (void)state;
    corrupt_index_case(0);
}

static void test_index_truncated(void **state)
{
    (void)state;
    corrupt_index_case(1);
}

static void test_index_past_end(void **state)
{
    (void)state;
    corrupt_index_case(2);
}

static void test_index_into_batch(void **state)
{
    (void)state;
    corrupt_index_case(3);
}

static void test_index_out_of_order(void **state)
{
    (void)state;
    corrupt_index_case(4);
}

static void test_timeindex_corrupt(void **state)
{
    (void)state;
    corrupt_index_case(5);
}

/* An inner index entry pointing inside a batch passes the load check; lookups must not trust
 * it: they fall back to walking the segment. */
static void test_index_inner_entry_wrong(void **state)
{
    (void)state;
    built_t b;
    build2(&b, 60);
    uint8_t *d;
    size_t n;
    assert_int_equal(st_faultfs_get(b.t.ff, SEG0 ".index", &d, &n), 0);
    assert_true(n >= 2 * ST_OFFIDX_ENTRY);
    st_put_be32(d + 4, st_be32(d + 4) + 5);
    st_faultfs_put(b.t.ff, SEG0 ".index", d, n);
    free(d);
    st_log_t *log = reopen(&b);
    for (int i = 0; i < b.nbatches; i++) {
        st_log_read_t r;
        int64_t off = i == 0 ? 0 : b.ends[i - 1];
        assert_int_equal(st_log_read(log, off, 1, -1, &r), 0);
        assert_int_equal(r.first_offset, off);
        st_log_read_release(&r);
    }
    st_log_close(log);
    tenv_fini(&b.t);
}

/* With the recovery point reset, a flip in an older segment cuts there and drops what
 * follows; a corrupt checkpoint means the same. */
/* Snapshot of every file of the partition directory, to show that nothing changed. */
static uint64_t dir_digest(built_t *b, int nsegs)
{
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < b->nbatches && nsegs > 0; i++) {
        if (i > 0 && b->pos[i] != 0)
            continue;
        char path[128];
        snprintf(path, sizeof path, DIR "/%020lld.log", (long long)(i ? b->ends[i - 1] : 0));
        uint8_t *d;
        size_t n;
        if (st_faultfs_get(b->t.ff, path, &d, &n) != 0)
            continue;
        for (size_t k = 0; k < n; k++)
            h = (h ^ d[k]) * 1099511628211ULL;
        h = (h ^ n) * 1099511628211ULL;
        free(d);
        nsegs--;
    }
    return h;
}

/*
 * One bad byte in the last batch of the first of several segments (issue 10.5). Recovery may only
 * cut what was never promised: mode 0: the checkpoint says nothing was synced (recovery point 0,
 * unclean): segment 0 is past the recovery point, so its damaged part and what follows it go (Kafka
 * does the same). mode 1: clean shutdown: every segment was synced; the log is not opened
 * (ST_E_CORRUPT) and no file changes. Before the fix the later segments were deleted. mode 2:
 * unclean, recovery point at the last segment: the same, segment 0 is below it. mode 3: unreadable
 * checkpoint: the recovery point is unknown, only the last segment may be cut, so the same again.
 */
static void test_corrupt_older_segment(void **state)
{
    (void)state;
    for (int mode = 0; mode < 4; mode++) {
        built_t b;
        build(&b, 70 + (uint64_t)mode, 40, 2500);
        if (mode != 1)
            unclean(&b);
        if (mode == 0) {
            st_meta_ckpt_t ck = {0, 0, 0};
            uint8_t raw[ST_META_CKPT_SIZE];
            st_meta_encode_ckpt(&ck, raw);
            st_faultfs_put(b.t.ff, DIR "/" ST_META_CKPT_FILE, raw, sizeof raw);
        } else if (mode == 3) {
            st_faultfs_put(b.t.ff, DIR "/" ST_META_CKPT_FILE, "garbage", 7);
        }
        /* Flip a CRC-covered byte of the last batch of segment 0 (where the tail check of
         * even a clean open looks). */
        int j = 1;
        while (b.pos[j + 1] != 0)
            j++;
        flip_t f = {(size_t)b.pos[j] + 30, 0x01};
        file_edit(&b, SEG0 ".log", do_flip, &f);
        uint64_t before = dir_digest(&b, 64);
        st_log_t *log = NULL;
        int rc = st_log_open(&b.t.env, DIR, &b.c, &log);
        if (mode == 0) {
            assert_int_equal(rc, 0);
            assert_int_equal(st_log_end_offset(log), b.ends[j - 1]);
            assert_int_equal(st_log_segment_count(log), 1);
            assert_int_equal(check_readable(log), j);
            st_log_close(log);
        } else {
            assert_int_equal(rc, ST_E_CORRUPT);
            assert_true(dir_digest(&b, 64) == before);
            /* An operator who restores the byte gets every record back. */
            file_edit(&b, SEG0 ".log", do_flip, &f);
            log = reopen(&b);
            assert_int_equal(st_log_end_offset(log), b.ends[b.nbatches - 1]);
            assert_int_equal(check_readable(log), b.nbatches);
            st_log_close(log);
        }
        tenv_fini(&b.t);
    }
}

/* A clean marker does not make a damaged tail trusted, and does not let recovery cut it
 * either: data closed cleanly was synced, so the log stays closed (ST_E_CORRUPT). */
static void test_clean_marker_with_bad_tail(void **state)
{
    (void)state;
    built_t b;
    build(&b, 80, 10, 1 << 20);
    size_t at = (size_t)b.pos[9] + 20;
    file_edit(&b, SEG0 ".log", cut_to, &at);
    st_log_t *log = NULL;
    assert_int_equal(st_log_open(&b.t.env, DIR, &b.c, &log), ST_E_CORRUPT);
    /* Without the marker (a crash), the torn tail is what recovery is for. */
    unclean(&b);
    log = reopen(&b);
    assert_int_equal(st_log_end_offset(log), b.ends[8]);
    st_log_close(log);
    tenv_fini(&b.t);
}

/* An empty or half-created segment file after a crash at roll time. */
static void test_empty_files(void **state)
{
    (void)state;
    built_t b;
    build(&b, 81, 10, 1 << 20);
    unclean(&b);
    st_faultfs_put(b.t.ff, DIR "/00000000000000000099.log", "", 0);
    st_log_t *log = reopen(&b);
    /* An empty last segment names the end (as after a truncation into a gap): offsets
     * between the data and it are a gap that reads step over. */
    assert_int_equal(st_log_end_offset(log), 99);
    st_log_read_t r;
    assert_int_equal(st_log_read(log, b.ends[9], 1000, -1, &r), 0);
    assert_int_equal(r.nranges, 0);
    assert_int_equal(r.next_offset, b.ends[9]);
    st_buf_t buf;
    st_buf_init(&buf);
    tb_batch(&buf, 1, 5, 0, 'g');
    st_log_append_info_t info;
    assert_int_equal(st_log_append(log, buf.data, buf.len, 2, &info, NULL), 0);
    assert_int_equal(info.base_offset, 99);
    st_buf_fini(&buf);
    assert_int_equal(st_log_read(log, b.ends[9], 1000, -1, &r), 0);
    assert_int_equal(r.first_offset, 99);
    assert_int_equal(r.next_offset, 100);
    st_log_read_release(&r);
    st_log_close(log);
    tenv_fini(&b.t);
}

static bool exists(tenv_t *t, const char *path)
{
    int fd = t->env.fs.ops->open(t->env.fs.ctx, path, ST_FS_RDONLY);
    if (fd >= 0)
        t->env.fs.ops->close(t->env.fs.ctx, fd);
    return fd >= 0;
}

/* Deferred syncs (env.h): an open or a close under st_storage_defer_begin makes nothing durable
 * until _end's syncfs; a crash before it loses what they wrote, one after it nothing. */
static void test_deferred_syncs(void **state)
{
    (void)state;
    built_t b;
    build(&b, 90, 5, 1 << 20);
    tenv_t *t = &b.t;
    t->env.defer_ok = true;
    /* a log created under deferral, then a crash before the sync: its directory is gone */
    st_log_t *nl;
    st_storage_defer_begin(&t->env);
    assert_int_equal(st_log_open(&t->env, "/data/d-0", &b.c, &nl), 0);
    assert_true(t->env.deferred > 0);
    assert_true(exists(t, "/data/d-0/00000000000000000000.log"));
    st_storage_defer_take(&t->env);
    st_faultfs_crash(t->ff, false);
    st_log_close(nl); /* frees it; the disk answers EIO */
    st_faultfs_restart(t->ff);
    assert_false(exists(t, "/data/d-0/00000000000000000000.log"));
    /* the same with the sync: there after the crash */
    st_storage_defer_begin(&t->env);
    assert_int_equal(st_log_open(&t->env, "/data/d-0", &b.c, &nl), 0);
    assert_int_equal(st_storage_defer_end(&t->env, "/data"), 0);
    assert_int_equal(t->env.deferred, 0);
    st_faultfs_crash(t->ff, false);
    st_log_close(nl);
    st_faultfs_restart(t->ff);
    assert_true(exists(t, "/data/d-0/00000000000000000000.log"));
    /* a close in two passes: no marker before the markers' sync, one after */
    st_log_t *log = reopen(&b);
    assert_false(exists(t, DIR "/" ST_META_CLEAN_FILE));
    st_storage_defer_begin(&t->env);
    assert_int_equal(st_log_close_begin(log), 0);
    assert_int_equal(st_storage_defer_end(&t->env, "/data"), 0);
    st_storage_defer_begin(&t->env);
    assert_int_equal(st_log_close_end(log, 0), 0);
    assert_true(exists(t, DIR "/" ST_META_CLEAN_FILE));
    st_storage_defer_take(&t->env);
    st_faultfs_crash(t->ff, false);
    st_faultfs_restart(t->ff);
    assert_false(exists(t, DIR "/" ST_META_CLEAN_FILE));
    log = reopen(&b); /* unclean: checked, every batch there */
    assert_int_equal(st_log_end_offset(log), b.ends[4]);
    assert_int_equal(check_readable(log), 5);
    st_storage_defer_begin(&t->env);
    assert_int_equal(st_log_close_begin(log), 0);
    assert_int_equal(st_storage_defer_end(&t->env, "/data"), 0);
    st_storage_defer_begin(&t->env);
    assert_int_equal(st_log_close_end(log, 0), 0);
    assert_int_equal(st_storage_defer_end(&t->env, "/data"), 0);
    st_faultfs_crash(t->ff, false);
    st_faultfs_restart(t->ff);
    assert_true(exists(t, DIR "/" ST_META_CLEAN_FILE));
    /* without defer_ok nothing is deferred */
    t->env.defer_ok = false;
    st_storage_defer_begin(&t->env);
    log = reopen(&b);
    assert_int_equal(t->env.deferred, 0);
    assert_int_equal(st_storage_defer_end(&t->env, "/data"), 0);
    st_log_close(log);
    tenv_fini(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torn_tail),
        cmocka_unit_test(test_deferred_syncs),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_garbage_and_zero_tail),
        cmocka_unit_test(test_index_missing),
        cmocka_unit_test(test_index_truncated),
        cmocka_unit_test(test_index_past_end),
        cmocka_unit_test(test_index_into_batch),
        cmocka_unit_test(test_index_out_of_order),
        cmocka_unit_test(test_timeindex_corrupt),
        cmocka_unit_test(test_index_inner_entry_wrong),
        cmocka_unit_test(test_corrupt_older_segment),
        cmocka_unit_test(test_clean_marker_with_bad_tail),
        cmocka_unit_test(test_empty_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
