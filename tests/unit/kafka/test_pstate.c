/* Unit tests for kafka/producer_state: sequences, duplicates, epochs, wrap-around, growth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kafka/producer_state.h"
#include "proto/kerr.h"

static void test_sequence_and_duplicates(void **state)
{
    (void)state;
    st_pstate_t ps;
    st_pstate_init(&ps);
    st_pbatch_t dup;
    /* A producer new to the partition may start anywhere. */
    assert_int_equal(st_pstate_check(&ps, 7, 0, 0, 2, &dup), ST_PSTATE_APPEND);
    assert_int_equal(st_pstate_record(&ps, 7, 0, 0, 2, 100, 102), 0);
    /* The next batch must continue at 3. */
    assert_int_equal(st_pstate_check(&ps, 7, 0, 4, 4, &dup), -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(st_pstate_check(&ps, 7, 0, 3, 5, &dup), ST_PSTATE_APPEND);
    st_pstate_record(&ps, 7, 0, 3, 5, 103, 105);
    /* A retry of either cached batch is a duplicate with its first offsets. */
    assert_int_equal(st_pstate_check(&ps, 7, 0, 0, 2, &dup), ST_PSTATE_DUPLICATE);
    assert_int_equal(dup.first_offset, 100);
    assert_int_equal(dup.last_offset, 102);
    /* Only the last five batches are remembered. */
    for (int i = 0; i < 5; i++)
        st_pstate_record(&ps, 7, 0, 6 + i, 6 + i, 106 + i, 106 + i);
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
    st_pstate_record(&ps, 9, 3, 0, 9, 0, 9);
    assert_int_equal(st_pstate_check(&ps, 9, 2, 10, 10, &dup), -ST_KERR_INVALID_PRODUCER_EPOCH);
    assert_int_equal(st_pstate_check(&ps, 9, 4, 5, 5, &dup), -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(st_pstate_check(&ps, 9, 4, 0, 0, &dup), ST_PSTATE_APPEND);
    st_pstate_record(&ps, 9, 4, 0, 0, 10, 10);
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
    st_pstate_record(&ps, 1, 0, INT32_MAX - 1, INT32_MAX, 0, 1);
    assert_int_equal(st_pstate_check(&ps, 1, 0, 0, 4, &dup), ST_PSTATE_APPEND);
    for (int64_t pid = 100; pid < 5100; pid++)
        assert_int_equal(st_pstate_record(&ps, pid, 0, 0, 0, pid, pid), 0);
    assert_int_equal(st_pstate_count(&ps), 5001);
    for (int64_t pid = 100; pid < 5100; pid++) {
        assert_int_equal(st_pstate_check(&ps, pid, 0, 0, 0, &dup), ST_PSTATE_DUPLICATE);
        assert_int_equal(dup.first_offset, pid);
    }
    st_pstate_fini(&ps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequence_and_duplicates),
        cmocka_unit_test(test_epochs),
        cmocka_unit_test(test_wrap_and_many_producers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
