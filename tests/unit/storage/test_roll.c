/*
 * Unit tests for the log's roll before an append: no batch may land at a relative offset of
 * 2^31 or more in its segment (the .index stores relative offsets as 31-bit values and
 * recovery refuses a batch beyond them), whatever the append's own span.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/err.h"
#include "testutil.h"

#define DIR "/data/r-0"

static st_log_t *open_log(tenv_t *t)
{
    st_log_config_t c;
    st_log_config_default(&c);
    st_log_t *log = NULL;
    assert_int_equal(st_log_open(&t->env, DIR, &c, &log), 0);
    return log;
}

/* Two one-record batches, at offsets a and b, as a leader would send them to a follower. */
static void two_batches(st_buf_t *b, int64_t a, int64_t bo)
{
    size_t n1 = tb_batch(b, 1, 8, 1000, 'a');
    tb_batch(b, 1, 8, 1000, 'b');
    st_batch_set_base_offset(b->data, a);
    st_batch_set_base_offset(b->data + n1, bo);
}

static void test_append_spanning_more_than_a_segment_refused(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 7);
    st_log_t *log = open_log(&t);
    st_buf_t b;
    st_buf_init(&b);
    /* Offsets 0 and 2^31: whatever segment the append goes to, one batch would sit at a
     * relative offset >= 2^31. */
    two_batches(&b, 0, (int64_t)INT32_MAX + 1);
    st_log_append_info_t info;
    assert_int_equal(st_log_append_replica(log, b.data, b.len, &info), ST_E_TOO_LARGE);
    assert_int_equal(st_log_end_offset(log), 0);
    /* The same after data: the roll to the append's first offset is not enough either. */
    st_buf_clear(&b);
    tb_batch(&b, 3, 8, 1000, 'c');
    assert_int_equal(st_log_append(log, b.data, b.len, 0, &info, NULL), 0);
    st_buf_clear(&b);
    two_batches(&b, 3, 3 + (int64_t)INT32_MAX + 1);
    assert_int_equal(st_log_append_replica(log, b.data, b.len, &info), ST_E_TOO_LARGE);
    assert_int_equal(st_log_end_offset(log), 3);
    st_log_close(log);
    log = open_log(&t);
    assert_int_equal(st_log_end_offset(log), 3);
    st_log_close(log);
    st_buf_fini(&b);
    tenv_fini(&t);
}

static void test_append_up_to_the_limit_kept(void **state)
{
    (void)state;
    tenv_t t;
    tenv_init(&t, 8);
    st_log_t *log = open_log(&t);
    st_buf_t b;
    st_buf_init(&b);
    /* A span of exactly 2^31 - 1 fits one segment: the last batch at relative 2^31 - 1. */
    two_batches(&b, 0, INT32_MAX);
    st_log_append_info_t info;
    assert_int_equal(st_log_append_replica(log, b.data, b.len, &info), 0);
    /* The next append would cross: it rolls, and starts a segment of its own. */
    st_buf_clear(&b);
    two_batches(&b, (int64_t)INT32_MAX + 1, (int64_t)INT32_MAX + 5);
    assert_int_equal(st_log_append_replica(log, b.data, b.len, &info), 0);
    assert_true(st_faultfs_exists(t.ff, DIR "/00000000002147483648.log"));
    int64_t end = (int64_t)INT32_MAX + 6;
    assert_int_equal(st_log_end_offset(log), end);
    st_log_close(log);
    /* Recovery keeps every batch: none was beyond its segment's relative range. */
    log = open_log(&t);
    assert_int_equal(st_log_end_offset(log), end);
    st_log_close(log);
    st_buf_fini(&b);
    tenv_fini(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_spanning_more_than_a_segment_refused),
        cmocka_unit_test(test_append_up_to_the_limit_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
