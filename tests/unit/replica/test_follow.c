/*
 * Unit tests for replica/follow.c, the follower's decisions: each rule of follow.h (R1-R5)
 * from an answer to the action and the next fetch's fields, without a leader or a log.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/buf.h"
#include "proto/kerr.h"
#include "replica/follow.h"
#include "storage/testutil.h"

static st_rfollow_answer_t ok_answer(int64_t hw, int64_t log_start)
{
    return (st_rfollow_answer_t){.high_watermark = hw,
                                 .log_start_offset = log_start,
                                 .diverging_epoch = -1,
                                 .diverging_end = -1};
}

/* R2: a diverging answer cuts to the leader's end of its epoch and to where the local log's
 * largest epoch <= it ends; the next fetch carries what the shard says is left. */
static void test_diverging_rounds(void **state)
{
    (void)state;
    st_rfollow_t f;
    st_rfollow_init(&f, 7, 100, 6, 0);
    assert_int_equal(f.phase, ST_RF_FETCH);
    st_rfollow_answer_t a = ok_answer(50, 0);
    a.diverging_epoch = 4;
    a.diverging_end = 80;
    st_rfollow_action_t act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_TRUNCATE);
    assert_int_equal(act.offset, 80);
    assert_int_equal(act.end_epoch, 4);
    assert_int_equal(f.phase, ST_RF_JOB);
    /* while the job runs, answers are ignored */
    act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_NOTHING);
    /* the local epoch <= 4 was 3, ending at 70: the second round asks with 3 */
    st_rfollow_on_position(&f, 0, 70, 3, 0);
    assert_int_equal(f.phase, ST_RF_FETCH);
    assert_int_equal(f.fetch_offset, 70);
    assert_int_equal(f.last_epoch, 3); /* from the log, never from the answer (4) */
    a.diverging_epoch = 2;
    a.diverging_end = 60;
    act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_TRUNCATE);
    assert_int_equal(act.offset, 60);
    assert_int_equal(act.end_epoch, 2);
    st_rfollow_on_position(&f, 0, 60, 2, 0);
    assert_int_equal(f.last_epoch, 2);
}

/* R3: out of range below the leader's log start restarts there; above with a known hw cuts to
 * it; otherwise only a backoff. */
static void test_out_of_range(void **state)
{
    (void)state;
    st_rfollow_t f;
    st_rfollow_init(&f, 2, 5, -1, 0);
    st_rfollow_answer_t a = ok_answer(30, 20);
    a.error = ST_KERR_OFFSET_OUT_OF_RANGE;
    st_rfollow_action_t act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_RESTART);
    assert_int_equal(act.offset, 20);
    st_rfollow_on_position(&f, 0, 20, -1, 20);
    assert_int_equal(f.fetch_offset, 20);
    assert_int_equal(f.log_start, 20);

    st_rfollow_init(&f, 2, 50, -1, 0);
    a = ok_answer(30, 0);
    a.error = ST_KERR_OFFSET_OUT_OF_RANGE;
    act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_TRUNCATE);
    assert_int_equal(act.offset, 30);
    assert_int_equal(act.end_epoch, -1);

    /* the leader's log ends before this one starts (an unclean election of a shorter
     * replica): start over at its high watermark, not a cut that changes nothing */
    st_rfollow_init(&f, 2, 188, 1, 180);
    a = ok_answer(35, 0);
    a.error = ST_KERR_OFFSET_OUT_OF_RANGE;
    act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_RESTART);
    assert_int_equal(act.offset, 35);

    st_rfollow_init(&f, 2, 50, -1, 0);
    a = ok_answer(-1, -1); /* nothing known: never a cut on no information */
    a.error = ST_KERR_OFFSET_OUT_OF_RANGE;
    act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_BACKOFF);
    assert_int_equal(f.phase, ST_RF_FETCH);
}

/* R4: whole batches are appended with the leader's hw and log start; a partial batch alone is
 * nothing; hw and log start alone are handed over when they change, a new log start with a
 * position wanted. */
static void test_records_and_hw(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    size_t one = tb_batch(&b, 2, 8, 1000, 'x');
    tb_batch(&b, 2, 8, 1000, 'y');
    st_rfollow_t f;
    st_rfollow_init(&f, 3, 0, -1, 0);
    st_rfollow_answer_t a = ok_answer(4, 0);
    a.records = b.data;
    a.len = b.len - 5; /* the second batch cut */
    st_rfollow_action_t act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_APPEND);
    assert_int_equal(act.len, one);
    assert_int_equal(act.hw, 4);
    assert_int_equal(f.phase, ST_RF_JOB);
    st_rfollow_on_position(&f, 0, 2, 0, 0);
    a.records = b.data + one;
    a.len = 10; /* no whole batch */
    act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_NOTHING);
    a = ok_answer(4, 0); /* unchanged since the append */
    act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_NOTHING);
    a = ok_answer(6, 0);
    act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_HW);
    assert_int_equal(act.hw, 6);
    assert_int_equal(f.phase, ST_RF_FETCH); /* no position for a hw alone */
    a = ok_answer(6, 2);
    act = st_rfollow_on_fetch(&f, &a);
    assert_int_equal(act.kind, ST_RF_DO_HW);
    assert_int_equal(act.log_start, 2);
    assert_int_equal(f.phase, ST_RF_JOB); /* the new start is reported */
    st_rfollow_on_position(&f, 0, 2, 0, 2);
    assert_int_equal(f.log_start, 2);
    st_buf_fini(&b);
}

/* R5: fenced stops; other errors back off; a failed job fetches again from the shard's word. */
static void test_errors(void **state)
{
    (void)state;
    st_rfollow_t f;
    st_rfollow_init(&f, 3, 10, 2, 0);
    st_rfollow_answer_t a = ok_answer(-1, -1);
    a.error = ST_KERR_NOT_LEADER_OR_FOLLOWER;
    assert_int_equal(st_rfollow_on_fetch(&f, &a).kind, ST_RF_DO_BACKOFF);
    a.error = ST_KERR_FENCED_LEADER_EPOCH;
    assert_int_equal(st_rfollow_on_fetch(&f, &a).kind, ST_RF_DO_STOP);
    assert_int_equal(f.phase, ST_RF_STOPPED);
    a.error = 0;
    assert_int_equal(st_rfollow_on_fetch(&f, &a).kind, ST_RF_DO_NOTHING);
    st_rfollow_init(&f, 4, 10, 2, 0);
    a = ok_answer(8, 0);
    a.diverging_epoch = 1;
    a.diverging_end = 9;
    st_rfollow_on_fetch(&f, &a);
    st_rfollow_on_position(&f, -5, -1, -1, -1); /* failed, nothing known */
    assert_int_equal(f.phase, ST_RF_FETCH);
    assert_int_equal(f.fetch_offset, 10);
    assert_int_equal(f.last_epoch, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diverging_rounds),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_records_and_hw),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
