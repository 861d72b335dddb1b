/*
 * test_hist.c — the bench histogram against distributions whose percentiles are known.
 *
 * The CLI is an executable, not a library, so the test compiles the source it tests.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cli/hist.c"

/* A percentile from the histogram is never below the true value, and at most 1/HALF above. */
static void assert_close_above(uint64_t got, double want)
{
    double tol = want / ST_CLI_HIST_HALF + 1.0;
    if ((double)got < want - 0.5 || (double)got > want + tol)
        fail_msg("got %llu, want %.1f (+%.1f)", (unsigned long long)got, want, tol);
}

static void test_empty(void **state)
{
    (void)state;
    st_cli_hist_t *h = malloc(sizeof(*h));
    st_cli_hist_init(h);
    assert_int_equal(st_cli_hist_percentile(h, 50), 0);
    assert_int_equal(st_cli_hist_percentile(h, 100), 0);
    assert_true(st_cli_hist_mean(h) == 0.0);
    free(h);
}

static void test_small_values_exact(void **state)
{
    (void)state;
    st_cli_hist_t *h = malloc(sizeof(*h));
    st_cli_hist_init(h);
    for (uint64_t v = 0; v < ST_CLI_HIST_SUB; v++)
        st_cli_hist_record(h, v);
    /* 256 values 0..255: the 128th smallest is 127. */
    assert_int_equal(st_cli_hist_percentile(h, 50), 127);
    assert_int_equal(st_cli_hist_percentile(h, 100), 255);
    assert_int_equal(st_cli_hist_percentile(h, 0.1), 0);
    assert_int_equal(h->min, 0);
    assert_int_equal(h->max, 255);
    free(h);
}

static void test_bucket_bounds(void **state)
{
    (void)state;
    uint32_t prev = 0;
    uint64_t v = 0;
    /* Every value maps to a bucket whose top is >= it and within the relative error. */
    while (v < UINT64_MAX / 2) {
        uint32_t idx = st_cli_hist_index(v);
        assert_true(idx < ST_CLI_HIST_BUCKETS);
        assert_true(idx >= prev);
        uint64_t hi = st_cli_hist_bucket_high(idx);
        assert_true(hi >= v);
        assert_true((long double)(hi - v) <= (long double)v / ST_CLI_HIST_HALF + 1);
        /* The next value past the bucket lands in the next bucket. */
        if (hi != UINT64_MAX)
            assert_int_equal(st_cli_hist_index(hi + 1), idx + 1);
        prev = idx;
        v = v + 1 + v / 1000;
    }
    assert_int_equal(st_cli_hist_index(UINT64_MAX), ST_CLI_HIST_BUCKETS - 1);
    assert_true(st_cli_hist_bucket_high(ST_CLI_HIST_BUCKETS - 1) == UINT64_MAX);
    for (int b = 0; b < 64; b++) {
        uint64_t p = 1ull << b;
        assert_true(st_cli_hist_bucket_high(st_cli_hist_index(p)) >= p);
        assert_true(st_cli_hist_index(p - 1) <= st_cli_hist_index(p));
    }
}

static void test_uniform(void **state)
{
    (void)state;
    st_cli_hist_t *h = malloc(sizeof(*h));
    st_cli_hist_init(h);
    for (uint64_t v = 1; v <= 1000000; v++)
        st_cli_hist_record(h, v);
    assert_close_above(st_cli_hist_percentile(h, 50), 500000);
    assert_close_above(st_cli_hist_percentile(h, 95), 950000);
    assert_close_above(st_cli_hist_percentile(h, 99), 990000);
    assert_close_above(st_cli_hist_percentile(h, 99.9), 999000);
    assert_int_equal(st_cli_hist_percentile(h, 100), 1000000);
    assert_int_equal(h->min, 1);
    assert_true(fabs(st_cli_hist_mean(h) - 500000.5) < 1e-6);
    free(h);
}

/* Exponential latencies (mean 1 ms in ns), sampled at evenly spaced quantiles. */
static void test_exponential(void **state)
{
    (void)state;
    st_cli_hist_t *h = malloc(sizeof(*h));
    st_cli_hist_init(h);
    const int n = 200000;
    const double mean = 1e6;
    for (int i = 0; i < n; i++)
        st_cli_hist_record(h, (uint64_t)(-log(1.0 - (i + 0.5) / n) * mean));
    const double qs[] = {50, 95, 99, 99.9};
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        double want = -log(1.0 - qs[i] / 100.0) * mean;
        double got = (double)st_cli_hist_percentile(h, qs[i]);
        /* sampling error of the evenly spaced sample plus the bucket width */
        if (fabs(got - want) / want > 0.01)
            fail_msg("p%g: got %.0f, want %.0f", qs[i], got, want);
    }
    assert_true(fabs(st_cli_hist_mean(h) - mean) / mean < 0.01);
    free(h);
}

/* 99% fast, 1% slow: the tail percentiles must see the slow mode. */
static void test_bimodal(void **state)
{
    (void)state;
    st_cli_hist_t *h = malloc(sizeof(*h));
    st_cli_hist_init(h);
    st_cli_hist_record_n(h, 1000, 99000);
    st_cli_hist_record_n(h, 5000000, 1000);
    assert_close_above(st_cli_hist_percentile(h, 50), 1000);
    assert_close_above(st_cli_hist_percentile(h, 99), 1000);
    assert_close_above(st_cli_hist_percentile(h, 99.01), 5000000);
    assert_close_above(st_cli_hist_percentile(h, 99.9), 5000000);
    assert_int_equal(st_cli_hist_percentile(h, 100), 5000000);
    free(h);
}

static void test_merge(void **state)
{
    (void)state;
    st_cli_hist_t *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b)), *all = malloc(sizeof(*all));
    st_cli_hist_init(a);
    st_cli_hist_init(b);
    st_cli_hist_init(all);
    for (uint64_t v = 1; v <= 100000; v++) {
        st_cli_hist_record(v % 2 ? a : b, v * 37);
        st_cli_hist_record(all, v * 37);
    }
    st_cli_hist_merge(a, b);
    assert_int_equal(a->total, all->total);
    assert_int_equal(a->min, all->min);
    assert_int_equal(a->max, all->max);
    for (double q = 1; q <= 100; q += 0.7)
        assert_int_equal(st_cli_hist_percentile(a, q), st_cli_hist_percentile(all, q));
    assert_memory_equal(a->counts, all->counts, sizeof(a->counts));
    free(a);
    free(b);
    free(all);
}

static void test_extremes(void **state)
{
    (void)state;
    st_cli_hist_t *h = malloc(sizeof(*h));
    st_cli_hist_init(h);
    st_cli_hist_record(h, UINT64_MAX);
    st_cli_hist_record(h, 0);
    assert_true(st_cli_hist_percentile(h, 100) == UINT64_MAX);
    assert_int_equal(st_cli_hist_percentile(h, 50), 0);
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),         cmocka_unit_test(test_small_values_exact),
        cmocka_unit_test(test_bucket_bounds), cmocka_unit_test(test_uniform),
        cmocka_unit_test(test_exponential),   cmocka_unit_test(test_bimodal),
        cmocka_unit_test(test_merge),         cmocka_unit_test(test_extremes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
