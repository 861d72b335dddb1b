/*
 * Unit tests for transactions in partition/: the producer state's rules (a transactional batch
 * starts a transaction, INVALID_TXN_STATE for a non-transactional one inside it, sequence -1
 * from the coordinator, marker fencing by producer and coordinator epoch, expiry and eviction
 * sparing ongoing transactions, truncation), snapshots of version 2 and 1, and through a real
 * partition table: the last stable offset, read_committed reads, markers and the aborted list,
 * the .txnindex bytes, a reopen (snapshot + replay) and a follower's replicated markers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "io/loop.h"
#include "partition/partition.h"
#include "partition/part_impl.h"
#include "proto/kerr.h"
#include "storage/testutil.h"

/* ---- producer state alone ---- */

static void test_txn_starts_and_mixing(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pbatch_t dup;
    assert_int_equal(st_pstate_check_batch(&ps, 5, 0, 0, 1, true, &dup), ST_PSTATE_APPEND);
    assert_int_equal(st_pstate_record_batch(&ps, 5, 0, 0, 1, 10, 11, 100, true), 0);
    assert_int_equal(st_pstate_find(&ps, 5)->txn_first, 10);
    assert_int_equal(st_pstate_first_unstable(&ps), 10);
    /* a second transactional batch continues the transaction */
    assert_int_equal(st_pstate_record_batch(&ps, 5, 0, 2, 2, 14, 14, 100, true), 0);
    assert_int_equal(st_pstate_find(&ps, 5)->txn_first, 10);
    /* non-transactional while ongoing: INVALID_TXN_STATE, but sequence errors come first */
    assert_int_equal(st_pstate_check_batch(&ps, 5, 0, 3, 3, false, &dup),
                     -ST_KERR_INVALID_TXN_STATE);
    assert_int_equal(st_pstate_check_batch(&ps, 5, 0, 7, 7, false, &dup),
                     -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(st_pstate_check_batch(&ps, 5, 0, 3, 3, true, &dup), ST_PSTATE_APPEND);
    /* sequence -1 (the coordinator's records): only the epoch is checked */
    assert_int_equal(st_pstate_check_batch(&ps, 5, 0, -1, -1, true, &dup), ST_PSTATE_APPEND);
    assert_int_equal(st_pstate_check_batch(&ps, 6, 3, -1, -1, true, &dup), ST_PSTATE_APPEND);
    assert_int_equal(st_pstate_record_batch(&ps, 6, 3, -1, -1, 20, 20, 100, true), 0);
    assert_int_equal(st_pstate_find(&ps, 6)->nbatches, 0);
    assert_int_equal(st_pstate_find(&ps, 6)->txn_first, 20);
    assert_int_equal(st_pstate_check_batch(&ps, 6, 2, -1, -1, true, &dup),
                     -ST_KERR_INVALID_PRODUCER_EPOCH);
    int64_t oldest;
    assert_int_equal(st_pstate_ongoing(&ps, &oldest), 2);
    assert_int_equal(oldest, 100);
    st_pstate_fini(&ps);
}

static void test_markers_and_fencing(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pstate_record_batch(&ps, 5, 2, 0, 0, 10, 10, 100, true);
    st_pstate_record_batch(&ps, 6, 0, 0, 0, 11, 11, 100, true);
    assert_int_equal(st_pstate_check_marker(&ps, 5, 1, 0), -ST_KERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(st_pstate_check_marker(&ps, 5, 2, 4), 0);
    assert_int_equal(st_pstate_check_marker(&ps, 99, 0, 0), 0); /* unknown producer */
    int64_t first;
    assert_int_equal(st_pstate_end_txn(&ps, 5, 2, 4, 12, 200, &first), 0);
    assert_int_equal(first, 10);
    assert_int_equal(st_pstate_find(&ps, 5)->txn_first, -1);
    assert_int_equal(st_pstate_find(&ps, 5)->coordinator_epoch, 4);
    /* the newest coordinator epoch fences older ones */
    assert_int_equal(st_pstate_check_marker(&ps, 5, 2, 3), -ST_KERR_TRANSACTION_COORDINATOR_FENCED);
    assert_int_equal(st_pstate_check_marker(&ps, 5, 3, 4), 0);
    /* ended but not below the high watermark: still unstable */
    assert_int_equal(st_pstate_first_unstable(&ps), 10);
    assert_int_equal(st_pstate_first_ongoing(&ps, -1), 11);
    st_pstate_hw_moved(&ps, 12);
    assert_int_equal(st_pstate_first_unstable(&ps), 10);
    st_pstate_hw_moved(&ps, 13);
    assert_int_equal(st_pstate_first_unstable(&ps), 11);
    /* a marker without a transaction ends nothing */
    assert_int_equal(st_pstate_end_txn(&ps, 5, 2, 4, 14, 200, &first), 0);
    assert_int_equal(first, -1);
    assert_int_equal(st_pstate_end_txn(&ps, 6, 0, 0, 15, 200, &first), 0);
    st_pstate_hw_moved(&ps, 16);
    assert_int_equal(st_pstate_first_unstable(&ps), -1);
    st_pstate_fini(&ps);
}

static void test_truncate_transactions(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pstate_record_batch(&ps, 5, 0, 0, 0, 10, 10, 100, true);
    int64_t first;
    st_pstate_end_txn(&ps, 5, 0, 0, 12, 100, &first);
    st_pstate_record_batch(&ps, 6, 0, 0, 0, 13, 13, 100, true);
    /* the cut takes 6's start and 5's marker: 5 is ongoing again, 6 has none */
    st_pstate_truncate(&ps, 12);
    assert_int_equal(st_pstate_find(&ps, 5)->txn_first, 10);
    assert_int_equal(st_pstate_find(&ps, 6)->txn_first, -1);
    assert_int_equal(st_pstate_first_unstable(&ps), 10);
    int64_t oldest;
    assert_int_equal(st_pstate_ongoing(&ps, &oldest), 1);
    st_pstate_truncate(&ps, 5);
    assert_int_equal(st_pstate_find(&ps, 5)->txn_first, -1);
    assert_int_equal(st_pstate_first_unstable(&ps), -1);
    st_pstate_fini(&ps);
}

static void test_ongoing_not_expired_nor_evicted(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pstate_set_limits(&ps, 2, 1000);
    st_pstate_record_batch(&ps, 1, 0, 0, 0, 0, 0, 0, true); /* oldest, ongoing */
    st_pstate_record_batch(&ps, 2, 0, 0, 0, 1, 1, 0, false);
    st_pstate_record_batch(&ps, 3, 0, 0, 0, 2, 2, 0, false); /* evicts 2, not 1 */
    assert_non_null(st_pstate_find(&ps, 1));
    assert_null(st_pstate_find(&ps, 2));
    assert_int_equal(st_pstate_expire(&ps, 5000), 1); /* 3 goes, 1 stays */
    assert_non_null(st_pstate_find(&ps, 1));
    assert_null(st_pstate_find(&ps, 3));
    st_pstate_fini(&ps);
}

static void test_snapshot_v2_and_v1(void **state)
{
    (void)state;
    st_pstate_t a, b;
    st_pstate_init(&a);
    st_pstate_record_batch(&a, 5, 1, 0, 1, 10, 11, 100, true);
    int64_t first;
    st_pstate_end_txn(&a, 5, 1, 7, 12, 150, &first);
    st_pstate_record_batch(&a, 6, 0, 0, 0, 13, 13, 160, true); /* ongoing, below the offset */
    st_pstate_record_batch(&a, 8, 0, 0, 0, 20, 20, 170, true); /* ongoing, past it: replayed */
    st_buf_t buf;
    st_buf_init(&buf);
    assert_int_equal(st_pstate_encode(&a, 20, 5000, &buf), 0);
    assert_int_equal(st_be16(buf.data + 8), 2);
    st_pstate_init(&b);
    int64_t off;
    assert_int_equal(st_pstate_decode(&b, buf.data, buf.len, &off), 0);
    assert_int_equal(off, 20);
    assert_int_equal(st_pstate_find(&b, 5)->coordinator_epoch, 7);
    assert_int_equal(st_pstate_find(&b, 5)->txn_first, -1);
    assert_int_equal(st_pstate_find(&b, 6)->txn_first, 13);
    assert_int_equal(st_pstate_find(&b, 6)->txn_start_ms, 160);
    assert_null(st_pstate_find(&b, 8));
    assert_int_equal(st_pstate_first_unstable(&b), 13);
    assert_int_equal(st_pstate_check_marker(&b, 5, 1, 6), -ST_KERR_TRANSACTION_COORDINATOR_FENCED);
    st_pstate_fini(&b);
    /* any flipped bit is refused */
    for (size_t i = 0; i < buf.len; i++) {
        buf.data[i] ^= 0x10;
        st_pstate_init(&b);
        assert_int_equal(st_pstate_decode(&b, buf.data, buf.len, &off), ST_E_CORRUPT);
        st_pstate_fini(&b);
        buf.data[i] ^= 0x10;
    }
    st_buf_fini(&buf);
    st_pstate_fini(&a);

    /* version 1 (before transactions): one entry, one batch; loads with no transaction and
     * no coordinator epoch */
    uint8_t v1[32 + 24 + 24] = {'S', 'T', 'P', 'S'};
    st_put_be16(v1 + 8, 1);
    st_put_be32(v1 + 12, 1);
    st_put_be64(v1 + 16, 50);
    st_put_be64(v1 + 24, 1000);
    uint8_t *e = v1 + 32;
    st_put_be64(e, 77);
    st_put_be16(e + 8, 3);
    st_put_be16(e + 10, 1);
    st_put_be64(e + 16, 900);
    st_put_be32(e + 24, 0);
    st_put_be32(e + 28, 4);
    st_put_be64(e + 32, 40);
    st_put_be64(e + 40, 44);
    st_put_be32(v1 + 4, st_crc32c(0, v1 + 8, sizeof v1 - 8));
    st_pstate_init(&b);
    assert_int_equal(st_pstate_decode(&b, v1, sizeof v1, &off), 0);
    const st_pentry_t *x = st_pstate_find(&b, 77);
    assert_non_null(x);
    assert_int_equal(x->epoch, 3);
    assert_int_equal(x->coordinator_epoch, -1);
    assert_int_equal(x->txn_first, -1);
    assert_int_equal(x->batches[0].last_offset, 44);
    st_pbatch_t dup;
    assert_int_equal(st_pstate_check_batch(&b, 77, 3, 5, 5, false, &dup), ST_PSTATE_APPEND);
    st_pstate_fini(&b);
}

/* ---- through a partition ---- */

static const uint8_t TOPIC_ID[16] = {0x7a, 0x11, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};

typedef struct fx {
    tenv_t t;
    st_loop_t *loop;
    st_parts_t parts;
    st_part_t *p;
    int wakes;
} fx_t;

typedef struct answer {
    int calls;
    int err;
} answer_t;

static void on_done(void *arg, int err)
{
    answer_t *a = arg;
    a->calls++;
    a->err = err;
}

static void on_wake(void *arg, int waiter, const uint8_t topic_id[16], int32_t index)
{
    (void)waiter;
    (void)topic_id;
    (void)index;
    ((fx_t *)arg)->wakes++;
}

static void fx_start(fx_t *f)
{
    st_parts_config_t pc = {
        .log_dirs = "/data",
        .nshards = 1,
        .producer_ids_max = 1000,
        .producer_id_expiration_ms = 86400000,
        .cleaner_enable = false,
        .cleaner_threads = 1,
        .cleaner_io_max_bytes_per_second = INT64_MAX,
        .cleaner_dedupe_buffer_size = 1 << 20,
        .wake = on_wake,
        .wake_arg = f,
    };
    st_parts_init(&f->parts, f->loop, &f->t.env, &pc);
    st_log_config_t lc;
    st_log_config_default(&lc);
    assert_int_equal(st_parts_open(&f->parts, "tx", TOPIC_ID, 0, &lc, &f->p), 0);
}

static fx_t *fx_open(void)
{
    fx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    tenv_init(&f->t, 11);
    f->t.defer = true;
    assert_int_equal(st_loop_create(&f->loop, 64), 0);
    fx_start(f);
    return f;
}

static void settle(fx_t *f)
{
    for (int i = 0; i < 100 && f->t.nq > 0; i++)
        tenv_complete(&f->t, (size_t)-1);
    assert_int_equal(f->t.nq, 0);
}

static void fx_stop(fx_t *f)
{
    settle(f);
    f->t.defer = false;
    st_parts_fini(&f->parts);
    f->t.defer = true;
}

static void fx_close(fx_t *f)
{
    fx_stop(f);
    st_loop_destroy(f->loop);
    tenv_fini(&f->t);
    free(f);
}

/* A producer batch of `count` records; transactional when txn. */
static int16_t produce(fx_t *f, int64_t pid, int16_t epoch, int32_t seq, int32_t count, bool txn)
{
    st_buf_t b;
    st_buf_init(&b);
    tb_batch_attr(&b, count, 8, 1000, 'p', txn ? ST_BATCH_ATTR_TRANSACTIONAL : 0);
    if (pid >= 0) {
        st_put_be64(b.data + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)pid);
        st_put_be16(b.data + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)epoch);
        st_put_be32(b.data + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)seq);
        tb_fix_crc(b.data);
    }
    st_part_append_res_t res;
    answer_t a = {0};
    st_part_append(f->p, b.data, b.len, ST_ACKS_LEADER, &res, on_done, &a);
    st_buf_fini(&b);
    settle(f);
    return res.error;
}

static int16_t marker(fx_t *f, int64_t pid, int16_t epoch, bool commit, int32_t cepoch)
{
    st_part_append_res_t res;
    answer_t a = {0};
    bool later = st_part_write_marker(f->p, pid, epoch, commit, cepoch, -1, &res, on_done, &a);
    if (res.error)
        return res.error;
    assert_true(later);
    assert_int_equal(a.calls, 0); /* not before it is durable */
    settle(f);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
    return 0;
}

/* Records a read_committed (or not) read returned, counted. */
static int32_t read_count(fx_t *f, int64_t from, bool committed, int64_t *next)
{
    st_part_read_t rd;
    int16_t e = committed ? st_part_read_committed(f->p, from, 1 << 20, &rd)
                          : st_part_read(f->p, from, 1 << 20, &rd);
    assert_int_equal(e, 0);
    *next = from;
    if (rd.read.bytes == 0)
        return 0;
    st_buf_t b;
    st_buf_init(&b);
    uint8_t *d = st_buf_extend(&b, (size_t)rd.read.bytes);
    assert_int_equal(st_log_read_copy(&rd.read, d, (size_t)rd.read.bytes), rd.read.bytes);
    *next = rd.read.next_offset;
    st_log_read_release(&rd.read);
    int32_t n = 0;
    for (size_t pos = 0; pos + ST_BATCH_HEADER_SIZE <= b.len;) {
        st_batch_hdr_t h;
        assert_int_equal(st_batch_parse_hdr(b.data + pos, b.len - pos, &h), 0);
        n += h.records_count;
        pos += (size_t)st_batch_size(&h);
    }
    st_buf_fini(&b);
    return n;
}

static void test_lso_reads_and_markers(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    int64_t next;
    assert_int_equal(produce(f, -1, 0, 0, 2, false), 0); /* 0..1 */
    assert_int_equal(produce(f, 100, 0, 0, 3, true), 0); /* 2..4: txn 100 */
    assert_int_equal(st_part_hw(f->p), 5);
    assert_int_equal(st_part_lso(f->p), 2);
    assert_int_equal(read_count(f, 0, true, &next), 2);
    assert_int_equal(next, 2);
    assert_int_equal(read_count(f, 2, true, &next), 0);
    assert_int_equal(read_count(f, 0, false, &next), 5);
    /* mixing inside the transaction */
    assert_int_equal(produce(f, 100, 0, 3, 1, false), ST_KERR_INVALID_TXN_STATE);
    assert_int_equal(produce(f, 200, 0, 0, 2, true), 0); /* 5..6: txn 200 */
    st_part_stats_t st;
    assert_true(st_part_stats(f->p, &st));
    assert_int_equal(st.ongoing_txns, 2);
    assert_int_equal(st.lso, 2);
    /* fencing */
    assert_int_equal(marker(f, 100, 0, false, 3), 0); /* 7: abort 100 */
    assert_int_equal(marker(f, 100, 0, false, 2), ST_KERR_TRANSACTION_COORDINATOR_FENCED);
    assert_int_equal(produce(f, 300, 4, 0, 1, true), 0); /* 8: txn 300 */
    assert_int_equal(marker(f, 300, 3, true, 3), ST_KERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(st_part_lso(f->p), 5);
    st_txn_aborted_t ab[4];
    assert_int_equal(st_part_aborted(f->p, 0, 9, ab, 4), 1);
    assert_int_equal(ab[0].producer_id, 100);
    assert_int_equal(ab[0].first_offset, 2);
    assert_int_equal(ab[0].last_offset, 7);
    assert_int_equal(ab[0].last_stable_offset, 5); /* 200 was ongoing from 5 */
    assert_int_equal(st_part_aborted(f->p, 8, 9, ab, 4), 0);
    assert_int_equal(st_part_aborted(f->p, 0, 2, ab, 4), 0);
    assert_int_equal(marker(f, 200, 0, true, 3), 0); /* 9: commit 200 */
    assert_int_equal(st_part_lso(f->p), 8);
    /* the .txnindex holds Kafka's bytes */
    uint8_t *d;
    size_t n;
    assert_int_equal(
        st_fs_read_file(&f->t.env.fs, "/data/tx-0/00000000000000000000.txnindex", 1 << 20, &d, &n),
        0);
    assert_int_equal(n, ST_TXNIDX_ENTRY);
    assert_int_equal(st_be16(d), 0);
    assert_int_equal((int64_t)st_be64(d + 2), 100);
    assert_int_equal((int64_t)st_be64(d + 10), 2);
    assert_int_equal((int64_t)st_be64(d + 18), 7);
    assert_int_equal((int64_t)st_be64(d + 26), 5);
    free(d);

    /* a reopen: 300's transaction from the snapshot, the abort from the .txnindex */
    fx_stop(f);
    fx_start(f);
    assert_int_equal(st_part_hw(f->p), 10);
    assert_int_equal(st_part_lso(f->p), 8);
    assert_int_equal(st_part_aborted(f->p, 0, 10, ab, 4), 1);
    assert_int_equal(st_pstate_find(st_part_producers(f->p), 300)->txn_first, 8);
    assert_int_equal(st_pstate_find(st_part_producers(f->p), 100)->coordinator_epoch, 3);
    /* and without the snapshot: replayed from the log (markers included) */
    fx_stop(f);
    assert_int_equal(
        f->t.env.fs.ops->unlink(f->t.env.fs.ctx, "/data/tx-0/00000000000000000010.snapshot"), 0);
    fx_start(f);
    assert_int_equal(st_part_lso(f->p), 8);
    assert_int_equal(st_pstate_find(st_part_producers(f->p), 100)->coordinator_epoch, 3);
    assert_int_equal(st_pstate_find(st_part_producers(f->p), 100)->txn_first, -1);
    assert_int_equal(marker(f, 300, 4, false, 3), 0); /* 10: abort 300 */
    assert_int_equal(st_part_lso(f->p), 11);
    assert_int_equal(st_part_aborted(f->p, 0, 11, ab, 4), 2);
    assert_int_equal(ab[1].producer_id, 300);
    assert_int_equal(ab[1].first_offset, 8);
    assert_int_equal(ab[1].last_stable_offset, 11);
    fx_close(f);
}

/* A missing or malformed .txnindex is rebuilt at open from the batches. */
static void test_txnindex_rebuilt(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    assert_int_equal(produce(f, 100, 0, 0, 2, true), 0); /* 0..1 */
    assert_int_equal(produce(f, 200, 0, 0, 1, true), 0); /* 2 */
    assert_int_equal(marker(f, 100, 0, false, 0), 0);    /* 3 */
    assert_int_equal(marker(f, 200, 0, true, 0), 0);     /* 4 */
    const char *path = "/data/tx-0/00000000000000000000.txnindex";
    for (int round = 0; round < 2; round++) {
        fx_stop(f);
        if (round == 0) {
            assert_int_equal(f->t.env.fs.ops->unlink(f->t.env.fs.ctx, path), 0);
        } else {
            int fd = f->t.env.fs.ops->open(f->t.env.fs.ctx, path, ST_FS_RDWR);
            assert_true(fd >= 0);
            uint8_t junk[5] = {1, 2, 3, 4, 5}; /* a partial entry */
            assert_int_equal(st_fs_pwrite_full(&f->t.env.fs, fd, junk, sizeof junk, 34), 0);
            f->t.env.fs.ops->close(f->t.env.fs.ctx, fd);
        }
        fx_start(f);
        st_txn_aborted_t ab[2];
        assert_int_equal(st_part_aborted(f->p, 0, 5, ab, 2), 1);
        assert_int_equal(ab[0].producer_id, 100);
        assert_int_equal(ab[0].first_offset, 0);
        assert_int_equal(ab[0].last_offset, 3);
        assert_int_equal(ab[0].last_stable_offset, 2);
        uint8_t *d;
        size_t n;
        assert_int_equal(st_fs_read_file(&f->t.env.fs, path, 1 << 20, &d, &n), 0);
        assert_int_equal(n, ST_TXNIDX_ENTRY);
        free(d);
    }
    fx_close(f);
}

/* A follower's replicated batches and markers build the same producer state and .txnindex,
 * so it knows every ongoing transaction when it becomes leader. */
static void test_follower_follows_markers(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    assert_int_equal(produce(f, 100, 0, 0, 2, true), 0); /* 0..1 */
    assert_int_equal(produce(f, 200, 0, 0, 1, true), 0); /* 2 */
    assert_int_equal(marker(f, 100, 0, false, 1), 0);    /* 3 */
    st_buf_t all;
    st_buf_init(&all);
    int64_t next;
    assert_int_equal(tb_read_all(f->p->log, 0, 1 << 20, &all, &next), 0);
    assert_int_equal(next, 4);

    fx_t *g = fx_open();
    st_part_role_t r;
    memset(&r, 0, sizeof r);
    r.self = 2;
    r.leader_id = 1;
    r.leader_epoch = 1;
    r.partition_epoch = 1;
    r.min_isr = 1;
    r.nreplicas = 2;
    r.replicas[0] = 1;
    r.replicas[1] = 2;
    r.nisr = 2;
    r.isr[0] = 1;
    r.isr[1] = 2;
    r.live[0] = r.live[1] = true;
    st_part_set_role(g->p, &r);
    answer_t a = {0};
    /* the leader's high watermark is 3: the marker is not replicated yet */
    assert_int_equal(st_part_append_replica(g->p, all.data, all.len, 3, 0, on_done, &a), 0);
    settle(g);
    assert_int_equal(a.calls, 1);
    const st_pstate_t *ps = st_part_producers(g->p);
    assert_int_equal(st_pstate_find(ps, 200)->txn_first, 2);
    assert_int_equal(st_pstate_find(ps, 100)->txn_first, -1);
    assert_int_equal(st_pstate_find(ps, 100)->coordinator_epoch, 1);
    assert_int_equal(st_part_lso(g->p), 0); /* 100's end is above the high watermark */
    st_txn_aborted_t ab[2];
    assert_int_equal(st_part_aborted(g->p, 0, 4, ab, 2), 1);
    assert_int_equal(ab[0].first_offset, 0);
    assert_int_equal(ab[0].last_offset, 3);
    /* the follower's cut of the marker makes 100's transaction ongoing again */
    assert_int_equal(st_part_truncate(g->p, 3, -1), 0);
    assert_int_equal(st_pstate_find(ps, 100)->txn_first, 0);
    assert_int_equal(st_part_aborted(g->p, 0, 4, ab, 2), 0);
    assert_int_equal(st_part_lso(g->p), 0);
    /* the marker again, now below the leader's high watermark */
    a.calls = 0;
    assert_int_equal(st_part_append_replica(g->p, all.data + all.len - ST_BATCH_CONTROL_SIZE,
                                            ST_BATCH_CONTROL_SIZE, 4, 0, on_done, &a),
                     0);
    settle(g);
    assert_int_equal(a.calls, 1);
    assert_int_equal(st_part_hw(g->p), 4);
    assert_int_equal(st_part_lso(g->p), 2);
    assert_int_equal(st_part_aborted(g->p, 0, 4, ab, 2), 1);
    st_buf_fini(&all);
    fx_close(g);
    fx_close(f);
}

/* A read_committed fetch waiter wakes when the LSO moves, not before. */
static void test_lso_waiters(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    assert_int_equal(produce(f, 100, 0, 0, 2, true), 0);
    int64_t lso = st_part_lso(f->p);
    assert_int_equal(lso, 0);
    f->wakes = 0;
    st_part_add_lso_waiter(f->p, 0, lso);
    assert_int_equal(f->wakes, 0);
    assert_int_equal(produce(f, -1, 0, 0, 1, false), 0); /* the hw moves, the LSO does not */
    assert_int_equal(st_part_lso(f->p), 0);
    assert_int_equal(f->wakes, 0);
    assert_int_equal(marker(f, 100, 0, true, 0), 0);
    assert_int_equal(st_part_lso(f->p), 4);
    assert_int_equal(f->wakes, 1);
    st_part_add_lso_waiter(f->p, 0, 0); /* saw an old LSO: woken at once */
    assert_int_equal(f->wakes, 2);
    fx_close(f);
}

/* KIP-890 ordering (partition.h): a producer's later batch verified before an earlier one that
 * still waits for the coordinator must wait behind it; notes are per producer and epoch, go
 * when forgotten, and are ignored once stale. */
static void test_verify_notes_keep_order(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    assert_false(st_part_verify_behind(p, 7, 1, 0));
    st_part_verify_pending(p, 7, 1, 0);
    st_part_verify_pending(p, 7, 1, 1);
    st_part_verify_pending(p, 7, 1, 2);
    /* seq 2 verified first: seq 0 and 1 still wait */
    st_part_verify_forget(p, 7, 1, 2);
    assert_true(st_part_verify_behind(p, 7, 1, 2));
    assert_false(st_part_verify_behind(p, 7, 1, 0)); /* the first has nothing before it */
    /* other producers and other epochs of the same producer are not held */
    assert_false(st_part_verify_behind(p, 8, 1, 5));
    assert_false(st_part_verify_behind(p, 7, 2, 5));
    st_part_verify_forget(p, 7, 1, 0);
    assert_true(st_part_verify_behind(p, 7, 1, 2)); /* seq 1 still waits */
    st_part_verify_forget(p, 7, 1, 1);
    assert_false(st_part_verify_behind(p, 7, 1, 2));
    /* a retry of a waiting batch takes its note again, not a second one */
    for (int i = 0; i < ST_PART_VERIFYING * 2; i++)
        st_part_verify_pending(p, 9, 0, 3);
    st_part_verify_forget(p, 9, 0, 3);
    assert_false(st_part_verify_behind(p, 9, 0, 4));
    /* more waiting batches than notes: the extra ones are left to the sequence checks */
    for (int32_t s = 0; s < ST_PART_VERIFYING + 4; s++)
        st_part_verify_pending(p, 10, 0, s);
    assert_true(st_part_verify_behind(p, 10, 0, ST_PART_VERIFYING + 3));
    /* a note older than ST_PART_VERIFY_PENDING_MS is ignored (its request ended elsewhere) */
    for (int i = 0; i < ST_PART_VERIFYING; i++)
        if (p->verifying[i].pid == 10)
            p->verifying[i].since_ms -= ST_PART_VERIFY_PENDING_MS + 1;
    assert_false(st_part_verify_behind(p, 10, 0, ST_PART_VERIFYING + 3));
    fx_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_txn_starts_and_mixing),
        cmocka_unit_test(test_markers_and_fencing),
        cmocka_unit_test(test_truncate_transactions),
        cmocka_unit_test(test_ongoing_not_expired_nor_evicted),
        cmocka_unit_test(test_snapshot_v2_and_v1),
        cmocka_unit_test(test_lso_reads_and_markers),
        cmocka_unit_test(test_txnindex_rebuilt),
        cmocka_unit_test(test_follower_follows_markers),
        cmocka_unit_test(test_lso_waiters),
        cmocka_unit_test(test_verify_notes_keep_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
