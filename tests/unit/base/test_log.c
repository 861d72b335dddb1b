/* Unit tests for base/log.c's ring of recent lines (st_log_recent): order, the line limit,
 * wrapping past ST_LOG_RING_BYTES with only whole lines coming out, long lines cut, and
 * whole lines while other threads log. Standard error goes to /dev/null. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"

/* The recent lines as a NUL-terminated string (caller frees). */
static char *recent(size_t max_lines, size_t *len)
{
    st_buf_t b;
    st_buf_init(&b);
    assert_int_equal(st_log_recent(&b, max_lines), 0);
    uint8_t nul = 0;
    st_buf_append(&b, &nul, 1);
    size_t n;
    char *s = (char *)st_buf_steal(&b, &n);
    *len = n - 1;
    return s;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_order_and_limit(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        ST_INFO("ring-a %d", i);
    ST_TRACE("below the level: %d", 7);
    size_t len;
    char *s = recent(0, &len);
    const char *a0 = strstr(s, "ring-a 0\n"), *a1 = strstr(s, "ring-a 1\n"),
               *a2 = strstr(s, "ring-a 2\n");
    assert_non_null(a0);
    assert_true(a0 < a1 && a1 < a2);
    assert_null(strstr(s, "below the level"));
    assert_true(len > 0 && s[len - 1] == '\n');
    free(s);
    s = recent(2, &len);
    assert_int_equal(count_lines(s), 2);
    assert_non_null(strstr(s, "info  [main] ring-a 1\n"));
    assert_non_null(strstr(s, "ring-a 2\n"));
    assert_null(strstr(s, "ring-a 0"));
    free(s);
}

static void test_wraps_with_whole_lines(void **state)
{
    (void)state;
    char pad[1001];
    memset(pad, 'x', 1000);
    pad[1000] = 0;
    const int n = (int)(ST_LOG_RING_BYTES / 1000) * 3 / 2;
    for (int i = 0; i < n; i++)
        ST_WARN("wrap %06d %s", i, pad);
    size_t len;
    char *s = recent(0, &len);
    assert_true(len <= ST_LOG_RING_BYTES);
    assert_true(len > ST_LOG_RING_BYTES - 2000);
    /* every line whole, numbered one after another, the last the newest */
    int prev = -1, lines = 0;
    for (char *line = s; *line; lines++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        assert_true(line[0] == '2' && line[4] == '-'); /* starts with its time */
        char *w = strstr(line, " wrap ");
        assert_true(w && w < nl);
        int seq = atoi(w + 6);
        if (prev >= 0)
            assert_int_equal(seq, prev + 1);
        prev = seq;
        assert_int_equal(nl - (w + 6 + 7), 1000);
        line = nl + 1;
    }
    assert_int_equal(prev, n - 1);
    assert_true(lines > (int)(ST_LOG_RING_BYTES / 1100));
    free(s);
}

static void test_long_line_cut(void **state)
{
    (void)state;
    size_t big = ST_LOG_RING_LINE_MAX * 3;
    char *text = malloc(big);
    memset(text, 'y', big);
    memcpy(text, "long-line ", 10);
    st_log_text(ST_LOG_INFO, text, big);
    free(text);
    size_t len;
    char *s = recent(1, &len);
    char *t = strstr(s, "long-line ");
    assert_non_null(t);
    assert_int_equal(len, ST_LOG_RING_LINE_MAX + 1); /* the line cut, then its newline */
    assert_int_equal(s[len - 1], '\n');
    free(s);
}

static void *writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 4000; i++)
        ST_INFO("thread %d line %d %s", id, i, "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");
    return NULL;
}

static void test_reader_while_writing(void **state)
{
    (void)state;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, writer, (void *)(intptr_t)i);
    for (int r = 0; r < 20; r++) {
        size_t len;
        char *s = recent(0, &len);
        for (char *line = s; *line;) {
            char *nl = strchr(line, '\n');
            assert_non_null(nl);
            assert_true(line[0] == '2' && line[10] == 'T');
            line = nl + 1;
        }
        free(s);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
}

int main(void)
{
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0)
        dup2(fd, STDERR_FILENO);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_limit),
        cmocka_unit_test(test_wraps_with_whole_lines),
        cmocka_unit_test(test_long_line_cut),
        cmocka_unit_test(test_reader_while_writing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
