/* Unit tests for kafka/producer_state: sequences, duplicates, epochs, wrap-around, growth. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "base/err.h"
#include "partition/producer_state.h"
#include "proto/kerr.h"
#include "storage/faultfs.h"

static void test_sequence_and_duplicates(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pbatch_t dup;
    /* A producer new to the partition may start anywhere. */
    assert_int_equal(st_pstate_check(&ps, 7, 0, 0, 2, &dup), ST_PSTATE_APPEND);
    assert_int_equal(st_pstate_record(&ps, 7, 0, 0, 2, 100, 102, 0), 0);
    /* The next batch must continue at 3. */
    assert_int_equal(st_pstate_check(&ps, 7, 0, 4, 4, &dup), -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(st_pstate_check(&ps, 7, 0, 3, 5, &dup), ST_PSTATE_APPEND);
    st_pstate_record(&ps, 7, 0, 3, 5, 103, 105, 0);
    /* A retry of either cached batch is a duplicate with its first offsets. */
    assert_int_equal(st_pstate_check(&ps, 7, 0, 0, 2, &dup), ST_PSTATE_DUPLICATE);
    assert_int_equal(dup.first_offset, 100);
    assert_int_equal(dup.last_offset, 102);
    /* Only the last five batches are remembered. */
    for (int i = 0; i < 5; i++)
        st_pstate_record(&ps, 7, 0, 6 + i, 6 + i, 106 + i, 106 + i, 0);
    assert_int_equal(st_pstate_check(&ps, 7, 0, 0, 2, &dup), -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(st_pstate_check(&ps, 7, 0, 10, 10, &dup), ST_PSTATE_DUPLICATE);
    st_pstate_fini(&ps);
}

static void test_epochs(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pbatch_t dup;
    st_pstate_record(&ps, 9, 3, 0, 9, 0, 9, 0);
    assert_int_equal(st_pstate_check(&ps, 9, 2, 10, 10, &dup), -ST_KERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(st_pstate_check(&ps, 9, 4, 5, 5, &dup), -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(st_pstate_check(&ps, 9, 4, 0, 0, &dup), ST_PSTATE_APPEND);
    st_pstate_record(&ps, 9, 4, 0, 0, 10, 10, 0);
    assert_int_equal(st_pstate_check(&ps, 9, 3, 10, 10, &dup), -ST_KERR_INVALID_PRODUCER_EPOCH);
    st_pstate_fini(&ps);
}

static void test_wrap_and_many_producers(void **state)
{
    (void)state;
    assert_int_equal(st_pstate_seq_add(INT32_MAX, 1), 0);
    assert_int_equal(st_pstate_seq_add(INT32_MAX - 1, 3), 1);
    assert_int_equal(st_pstate_seq_add(5, 0), 5);
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pbatch_t dup;
    st_pstate_record(&ps, 1, 0, INT32_MAX - 1, INT32_MAX, 0, 1, 0);
    assert_int_equal(st_pstate_check(&ps, 1, 0, 0, 4, &dup), ST_PSTATE_APPEND);
    for (int64_t pid = 100; pid < 5100; pid++)
        assert_int_equal(st_pstate_record(&ps, pid, 0, 0, 0, pid, pid, 0), 0);
    assert_int_equal(st_pstate_count(&ps), 5001);
    for (int64_t pid = 100; pid < 5100; pid++) {
        assert_int_equal(st_pstate_check(&ps, pid, 0, 0, 0, &dup), ST_PSTATE_DUPLICATE);
        assert_int_equal(dup.first_offset, pid);
    }
    st_pstate_fini(&ps);
}

/* A cut of the log (failed sync, truncation) takes the cached batches at and past the new end
 * with it: the offsets will be reused by other appends. */
static void test_truncate_follows_the_log(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pbatch_t dup;
    st_pstate_record(&ps, 1, 0, 0, 2, 0, 2, 0); /* P: seq 0-2 at 0-2 */
    st_pstate_record(&ps, 1, 0, 3, 3, 3, 3, 0); /* P: seq 3 at 3, not yet durable */
    st_pstate_record(&ps, 2, 0, 0, 0, 4, 4, 0); /* Q: seq 0 at 4 */
    st_pstate_truncate(&ps, 3);
    /* P's seq 3 is no duplicate any more: it is the next batch, appended again. */
    assert_int_equal(st_pstate_check(&ps, 1, 0, 3, 3, &dup), ST_PSTATE_APPEND);
    assert_int_equal(st_pstate_check(&ps, 1, 0, 0, 2, &dup), ST_PSTATE_DUPLICATE);
    assert_int_equal(dup.last_offset, 2);
    assert_int_equal(st_pstate_check(&ps, 1, 0, 5, 5, &dup), -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    /* Q lost its only batch: it keeps its epoch (older ones stay fenced), any sequence goes. */
    assert_int_equal(st_pstate_check(&ps, 2, 0, 0, 0, &dup), ST_PSTATE_APPEND);
    assert_int_equal(st_pstate_check(&ps, 2, 0, 7, 7, &dup), ST_PSTATE_APPEND);
    st_pstate_record(&ps, 2, 1, 0, 0, 3, 3, 0); /* Q bumped its epoch; that batch is cut too */
    st_pstate_truncate(&ps, 3);
    assert_int_equal(st_pstate_check(&ps, 2, 0, 1, 1, &dup), -ST_KERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(st_pstate_check(&ps, 2, 1, 0, 0, &dup), ST_PSTATE_APPEND);
    st_pstate_record(&ps, 2, 1, 0, 0, 3, 3, 0);
    assert_int_equal(st_pstate_check(&ps, 2, 1, 0, 0, &dup), ST_PSTATE_DUPLICATE);
    assert_int_equal(dup.first_offset, 3);
    st_pstate_fini(&ps);
}

/* Made-up producer ids cannot grow the state past the cap: the least recently used go. */
static void test_cap_evicts_least_recently_used(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pstate_set_limits(&ps, 100, -1);
    st_pbatch_t dup;
    st_pstate_record(&ps, 1, 0, 0, 0, 0, 0, 10); /* the one that keeps writing */
    for (int64_t pid = 1000; pid < 2000; pid++) {
        assert_int_equal(st_pstate_record(&ps, pid, 0, 0, 0, pid, pid, 10), 0);
        if (pid % 50 == 0) /* pid 1 appends now and then: it stays */
            st_pstate_record(&ps, 1, 0, (int32_t)(pid / 50 - 19), (int32_t)(pid / 50 - 19), pid,
                             pid, 10);
        assert_true(st_pstate_count(&ps) <= 100);
    }
    assert_int_equal(st_pstate_count(&ps), 100);
    assert_int_equal(ps.evicted, 1001 - 100);
    assert_non_null(st_pstate_find(&ps, 1));
    assert_null(st_pstate_find(&ps, 1000));
    assert_int_equal(st_pstate_check(&ps, 1999, 0, 0, 0, &dup), ST_PSTATE_DUPLICATE);
    /* An evicted producer is taken as new: any sequence. */
    assert_int_equal(st_pstate_check(&ps, 1000, 0, 77, 77, &dup), ST_PSTATE_APPEND);
    st_pstate_fini(&ps);
}

/* Producers idle for producer.id.expiration.ms are forgotten; active ones stay. */
static void test_expiry(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pstate_set_limits(&ps, 0, 1000);
    st_pstate_record(&ps, 1, 0, 0, 0, 0, 0, 5000);
    st_pstate_record(&ps, 2, 0, 0, 0, 1, 1, 5500);
    st_pstate_record(&ps, 3, 0, 0, 0, 2, 2, 5900);
    st_pstate_record(&ps, 1, 0, 1, 1, 3, 3, 6200); /* 1 used again: now the newest */
    assert_int_equal(st_pstate_expire(&ps, 6400), 0);
    assert_int_equal(st_pstate_expire(&ps, 6500), 1); /* 2 */
    assert_null(st_pstate_find(&ps, 2));
    assert_int_equal(st_pstate_expire(&ps, 7199), 1); /* 3 */
    assert_non_null(st_pstate_find(&ps, 1));
    assert_int_equal(st_pstate_expire(&ps, 7200), 1);
    assert_int_equal(st_pstate_count(&ps), 0);
    assert_int_equal(ps.expired, 3);
    /* A clock going back never puts an entry before an older one. */
    st_pstate_record(&ps, 4, 0, 0, 0, 4, 4, 9000);
    st_pstate_record(&ps, 5, 0, 0, 0, 5, 5, 100);
    assert_int_equal(st_pstate_find(&ps, 5)->last_ms, 9000);
    st_pstate_set_limits(&ps, 0, -1);
    assert_int_equal(st_pstate_expire(&ps, INT64_MAX), 0);
    st_pstate_fini(&ps);
}

static void fill(st_pstate_t *ps)
{
    st_pstate_record(ps, 7, 2, 0, 9, 0, 9, 1000);
    for (int i = 0; i < 7; i++) /* more than five: the oldest fall out of the cache */
        st_pstate_record(ps, 8, 0, i * 2, i * 2 + 1, 10 + i * 2, 11 + i * 2, 2000 + i);
    st_pstate_record(ps, 9, 1, INT32_MAX, 0, 24, 25, 3000); /* wraps */
    st_pstate_record(ps, 10, 0, 0, 0, 26, 26, 3001);        /* cut below, epoch stays */
    st_pstate_truncate(ps, 26);
    st_pstate_record(ps, 11, 0, 0, 0, 27, 27, 3002); /* past the snapshot offset */
}

/* Encode then decode gives the same answers; batches at or past the offset are left out. */
static void test_snapshot_roundtrip(void **state)
{
    (void)state;
    st_pstate_t a, b;
    st_pstate_init(&a);
    st_pstate_init(&b);
    fill(&a);
    st_buf_t buf;
    st_buf_init(&buf);
    assert_int_equal(st_pstate_encode(&a, 27, 5000, &buf), 0);
    int64_t off = -1;
    assert_int_equal(st_pstate_decode(&b, buf.data, buf.len, &off), 0);
    assert_int_equal(off, 27);
    assert_int_equal(st_pstate_count(&b), 4);
    assert_null(st_pstate_find(&b, 11));
    st_pbatch_t dup;
    for (int64_t pid = 7; pid <= 10; pid++) {
        const st_pentry_t *x = st_pstate_find(&a, pid), *y = st_pstate_find(&b, pid);
        assert_non_null(y);
        assert_int_equal(x->epoch, y->epoch);
        assert_int_equal(x->nbatches, y->nbatches);
        assert_int_equal(x->last_ms, y->last_ms);
        assert_memory_equal(x->batches, y->batches, sizeof x->batches[0] * (size_t)x->nbatches);
    }
    assert_int_equal(st_pstate_check(&b, 8, 0, 12, 13, &dup), ST_PSTATE_DUPLICATE);
    assert_int_equal(dup.first_offset, 22);
    assert_int_equal(st_pstate_check(&b, 8, 0, 2, 3, &dup), -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(st_pstate_check(&b, 8, 0, 14, 14, &dup), ST_PSTATE_APPEND);
    assert_int_equal(st_pstate_check(&b, 9, 1, 1, 1, &dup), ST_PSTATE_APPEND);
    assert_int_equal(st_pstate_check(&b, 10, 0, 5, 5, &dup), ST_PSTATE_APPEND);
    /* The use order survives: the oldest is 7. */
    assert_int_equal(b.oldest->pid, 7);
    st_pstate_fini(&b);

    /* Every single flipped byte and every truncation is refused, never half loaded. */
    for (size_t i = 0; i < buf.len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            buf.data[i] ^= (uint8_t)(1u << bit);
            st_pstate_init(&b);
            assert_int_equal(st_pstate_decode(&b, buf.data, buf.len, &off), ST_E_CORRUPT);
            assert_int_equal(st_pstate_count(&b), 0);
            st_pstate_fini(&b);
            buf.data[i] ^= (uint8_t)(1u << bit);
        }
    }
    for (size_t n = 0; n < buf.len; n++) {
        st_pstate_init(&b);
        assert_int_equal(st_pstate_decode(&b, buf.data, n, &off), ST_E_CORRUPT);
        st_pstate_fini(&b);
    }
    st_buf_fini(&buf);
    st_pstate_fini(&a);
}

/* Files: the newest usable snapshot at or below the log end is loaded; newer ones (the log was
 * cut below them) are deleted; a corrupt one falls back to the one before, or to none. */
static void test_snapshot_files(void **state)
{
    (void)state;
    st_faultfs_t *ff = st_faultfs_create(1);
    st_fs_t fs = st_faultfs_fs(ff);
    assert_int_equal(fs.ops->mkdir(fs.ctx, "/p"), 0);
    st_pstate_t a, b;
    st_pstate_init(&a);
    assert_int_equal(st_pstate_attach(&a, &fs, "/p"), 0);
    st_pstate_record(&a, 1, 0, 0, 0, 0, 0, 1);
    assert_int_equal(st_pstate_save(&a, 1, 1), 0);
    st_pstate_record(&a, 1, 0, 1, 1, 1, 1, 2);
    assert_int_equal(st_pstate_save(&a, 2, 2), 0);
    st_pstate_record(&a, 1, 0, 2, 2, 2, 2, 3);
    assert_int_equal(st_pstate_save(&a, 3, 3), 0);
    uint8_t *d;
    size_t n;
    /* Only the newest two are kept. */
    assert_int_equal(st_fs_read_file(&fs, "/p/00000000000000000001.snapshot", 1 << 20, &d, &n),
                     -ENOENT);
    st_pbatch_t dup;
    int64_t off;
    st_pstate_init(&b);
    st_pstate_attach(&b, &fs, "/p");
    assert_int_equal(st_pstate_load(&b, 3, &off), 0);
    assert_int_equal(off, 3);
    assert_int_equal(st_pstate_check(&b, 1, 0, 2, 2, &dup), ST_PSTATE_DUPLICATE);
    st_pstate_fini(&b);
    /* The log ends at 2 now: snapshot 3 describes a batch it lost. */
    st_pstate_init(&b);
    st_pstate_attach(&b, &fs, "/p");
    assert_int_equal(st_pstate_load(&b, 2, &off), 0);
    assert_int_equal(off, 2);
    assert_int_equal(st_pstate_check(&b, 1, 0, 2, 2, &dup), ST_PSTATE_APPEND);
    assert_int_equal(st_fs_read_file(&fs, "/p/00000000000000000003.snapshot", 1 << 20, &d, &n),
                     -ENOENT);
    st_pstate_fini(&b);
    /* A corrupt snapshot is skipped (and removed): none is left, rebuild from the log. */
    assert_int_equal(st_fs_read_file(&fs, "/p/00000000000000000002.snapshot", 1 << 20, &d, &n), 0);
    d[n - 1] ^= 1;
    assert_int_equal(st_fs_write_file_atomic(&fs, "/p", "00000000000000000002.snapshot", d, n), 0);
    free(d);
    st_pstate_init(&b);
    st_pstate_attach(&b, &fs, "/p");
    assert_int_equal(st_pstate_load(&b, 10, &off), ST_E_NOT_FOUND);
    assert_int_equal(off, -1);
    assert_int_equal(st_pstate_count(&b), 0);
    st_pstate_fini(&b);
    /* A truncation below a snapshot deletes it. */
    assert_int_equal(st_pstate_save(&a, 3, 4), 0);
    st_pstate_truncate(&a, 1);
    assert_int_equal(st_fs_read_file(&fs, "/p/00000000000000000003.snapshot", 1 << 20, &d, &n),
                     -ENOENT);
    assert_int_equal(a.snap_offset, -1);
    /* A failed write leaves the state as it was and says so. */
    st_faultfs_fail(ff, ST_FAULT_FDATASYNC, EIO, 0, 1);
    assert_int_equal(st_pstate_save(&a, 1, 5), -EIO);
    st_pstate_fini(&a);
    st_faultfs_destroy(ff);
}

/* The cleaner's question: is (pid, last_offset) that producer's newest batch? */
static void test_is_last(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    assert_false(st_pstate_is_last(&ps, 7, 102)); /* unknown producer (empty table) */
    st_pstate_record(&ps, 7, 0, 0, 2, 100, 102, 0);
    assert_true(st_pstate_is_last(&ps, 7, 102));
    assert_false(st_pstate_is_last(&ps, 7, 100)); /* its first offset, not its last */
    assert_false(st_pstate_is_last(&ps, 8, 102)); /* another producer */
    st_pstate_record(&ps, 7, 0, 3, 3, 103, 103, 0);
    assert_false(st_pstate_is_last(&ps, 7, 102)); /* cached, but no longer the newest */
    assert_true(st_pstate_is_last(&ps, 7, 103));
    st_pstate_record(&ps, 8, 0, 0, 0, 104, 104, 0);
    assert_true(st_pstate_is_last(&ps, 7, 103)); /* other producers do not matter */
    assert_true(st_pstate_is_last(&ps, 8, 104));
    /* Its batches cut off: none is its last any more. */
    st_pstate_truncate(&ps, 103);
    assert_true(st_pstate_is_last(&ps, 7, 102));
    st_pstate_truncate(&ps, 100);
    assert_false(st_pstate_is_last(&ps, 7, 102));
    assert_false(st_pstate_is_last(&ps, 8, 104));
    st_pstate_fini(&ps);
}

/* A gap left by a refusal (producer_state.h): only the refusal of the producer's next batch is
 * noted; a batch past it gets the refusal's error for ST_PSTATE_REFUSED_MS, one before it or
 * at another epoch does not; an append, or the time passing, ends it. */
static void test_refused_gap(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    const int16_t NER = ST_KERR_NOT_ENOUGH_REPLICAS;
    /* Unknown producer: nothing to note, nothing owed. */
    st_pstate_note_refused(&ps, 7, 0, 3, NER, 1000);
    assert_int_equal(st_pstate_refused_gap(&ps, 7, 0, 4, 1000), 0);
    st_pstate_record(&ps, 7, 0, 0, 2, 0, 2, 0);
    /* A refusal of a batch that is not next (a duplicate's retry, a gap already) is not noted. */
    st_pstate_note_refused(&ps, 7, 0, 1, NER, 1000);
    st_pstate_note_refused(&ps, 7, 0, 5, NER, 1000);
    assert_int_equal(st_pstate_refused_gap(&ps, 7, 0, 6, 1000), 0);
    /* The next batch (3) refused: those behind it get its error. */
    st_pstate_note_refused(&ps, 7, 0, 3, NER, 1000);
    assert_int_equal(st_pstate_refused_gap(&ps, 7, 0, 4, 1000), NER);
    assert_int_equal(st_pstate_refused_gap(&ps, 7, 0, 500, 1000 + ST_PSTATE_REFUSED_MS), NER);
    assert_int_equal(st_pstate_refused_gap(&ps, 7, 0, 4, 1001 + ST_PSTATE_REFUSED_MS), 0);
    assert_int_equal(st_pstate_refused_gap(&ps, 7, 0, 2, 1000), 0); /* behind: not a gap */
    assert_int_equal(st_pstate_refused_gap(&ps, 7, 1, 4, 1000), 0); /* another epoch */
    assert_int_equal(st_pstate_refused_gap(&ps, 8, 0, 4, 1000), 0); /* another producer */
    /* The refused batch appended: a later gap is the producer's own. */
    st_pstate_record(&ps, 7, 0, 3, 3, 3, 3, 0);
    assert_int_equal(st_pstate_refused_gap(&ps, 7, 0, 5, 1000), 0);
    /* Across the wrap. */
    st_pstate_record(&ps, 9, 0, INT32_MAX - 1, INT32_MAX - 1, 10, 10, 0);
    st_pstate_note_refused(&ps, 9, 0, INT32_MAX, NER, 1000);
    assert_int_equal(st_pstate_refused_gap(&ps, 9, 0, 1, 1000), NER);
    assert_int_equal(st_pstate_refused_gap(&ps, 9, 0, INT32_MAX - 2, 1000), 0);
    st_pstate_fini(&ps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequence_and_duplicates),
        cmocka_unit_test(test_epochs),
        cmocka_unit_test(test_wrap_and_many_producers),
        cmocka_unit_test(test_truncate_follows_the_log),
        cmocka_unit_test(test_cap_evicts_least_recently_used),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_snapshot_roundtrip),
        cmocka_unit_test(test_snapshot_files),
        cmocka_unit_test(test_is_last),
        cmocka_unit_test(test_refused_gap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
