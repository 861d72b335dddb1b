/* Unit tests for admin/prom: the Prometheus text exposition format (escaping, numbers,
 * families, cumulative histograms with +Inf, _sum and _count). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "admin/prom.h"

/* The buffer as a NUL-terminated string (owned by the buffer). */
static const char *str(st_buf_t *b)
{
    st_buf_append(b, "", 1);
    b->len--;
    return (const char *)b->data;
}

static void test_label_values_are_escaped(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    st_prom_escape_label(&b, "a\\b\"c\nd");
    assert_string_equal(str(&b), "a\\\\b\\\"c\\nd");
    st_buf_clear(&b);
    st_prom_escape_label(&b, "plain-topic.name_1");
    assert_string_equal(str(&b), "plain-topic.name_1");
    st_buf_clear(&b);
    st_prom_escape_label(&b, "");
    assert_string_equal(str(&b), "");
    st_buf_fini(&b);
}

static void test_family_sample_and_help_escaping(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    st_prom_t p;
    st_prom_init(&p, &b);
    st_prom_family(&p, "strata_x_total", "counter", "Line one\nback\\slash");
    st_prom_label_t l[] = {{"topic", "t\"1"}, {"partition", "0"}};
    st_prom_sample_u64(&p, "", l, 2, 18446744073709551615ull);
    st_prom_sample(&p, "", NULL, 0, 0.25);
    assert_string_equal(str(&b), "# HELP strata_x_total Line one\\nback\\\\slash\n"
                                 "# TYPE strata_x_total counter\n"
                                 "strata_x_total{topic=\"t\\\"1\",partition=\"0\"} "
                                 "18446744073709551615\n"
                                 "strata_x_total 0.25\n");
    st_buf_fini(&b);
}

static void test_numbers(void **state)
{
    (void)state;
    struct {
        double v;
        const char *want;
    } cases[] = {
        {0, "0"},
        {42, "42"},
        {-7, "-7"},
        {0.1, "0.1"},
        {1e-05, "1.0000000000000001e-05"},
        {INFINITY, "+Inf"},
        {-INFINITY, "-Inf"},
        {NAN, "NaN"},
        {123456789012.0, "123456789012"},
        {2.5, "2.5"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_buf_t b;
        st_buf_init(&b);
        st_prom_number(&b, cases[i].v);
        const char *got = str(&b);
        if (cases[i].v == 1e-05) /* only require that it reads back exactly */
            assert_true(strtod(got, NULL) == 1e-05);
        else
            assert_string_equal(got, cases[i].want);
        st_buf_fini(&b);
    }
}

static void test_histogram_is_cumulative_with_inf_sum_count(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    st_prom_t p;
    st_prom_init(&p, &b);
    st_prom_family(&p, "strata_lat_seconds", "histogram", "Latency.");
    double bounds[] = {0.001, 0.01, 0.1};
    uint64_t counts[] = {2, 0, 3, 4}; /* last: above 0.1 */
    st_prom_label_t l[] = {{"api", "Produce"}};
    st_prom_histogram(&p, l, 1, bounds, counts, 3, 1.5);
    assert_string_equal(str(&b), "# HELP strata_lat_seconds Latency.\n"
                                 "# TYPE strata_lat_seconds histogram\n"
                                 "strata_lat_seconds_bucket{api=\"Produce\",le=\"0.001\"} 2\n"
                                 "strata_lat_seconds_bucket{api=\"Produce\",le=\"0.01\"} 2\n"
                                 "strata_lat_seconds_bucket{api=\"Produce\",le=\"0.1\"} 5\n"
                                 "strata_lat_seconds_bucket{api=\"Produce\",le=\"+Inf\"} 9\n"
                                 "strata_lat_seconds_sum{api=\"Produce\"} 1.5\n"
                                 "strata_lat_seconds_count{api=\"Produce\"} 9\n");
    st_buf_fini(&b);
}

static void test_histogram_without_labels(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    st_prom_t p;
    st_prom_init(&p, &b);
    st_prom_family(&p, "h", "histogram", "x");
    double bounds[] = {1};
    uint64_t counts[] = {0, 0};
    st_prom_histogram(&p, NULL, 0, bounds, counts, 1, 0);
    assert_string_equal(str(&b), "# HELP h x\n# TYPE h histogram\n"
                                 "h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\n"
                                 "h_sum 0\nh_count 0\n");
    st_buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_values_are_escaped),
        cmocka_unit_test(test_family_sample_and_help_escaping),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_histogram_is_cumulative_with_inf_sum_count),
        cmocka_unit_test(test_histogram_without_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
