/*
 * test_args.c — the CLI's option parser and value parsers, and consume's --format strings.
 *
 * The CLI is an executable, not a library, so the test compiles the sources it tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/args.c"
#include "cli/fmt.c"

typedef struct vals {
    bool flag;
    const char *str;
    int64_t num;
    st_cli_strlist_t list;
    st_cli_strlist_t pos;
} vals_t;

static int parse(vals_t *v, char *err, int argc, ...)
{
    char *argv[32];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++)
        argv[i] = va_arg(ap, char *);
    va_end(ap);
    const st_cli_opt_t opts[] = {
        {'f', "flag", ST_CLI_OPT_FLAG, &v->flag, NULL, "a flag"},
        {'s', "str", ST_CLI_OPT_STR, &v->str, "S", "a string"},
        {'n', "num", ST_CLI_OPT_INT, &v->num, "N", "a number"},
        {'X', "prop", ST_CLI_OPT_LIST, &v->list, "K=V", "a list"},
        ST_CLI_OPT_END,
    };
    const st_cli_opt_t *tables[] = {opts, NULL};
    return st_cli_args_parse(tables, argc, argv, &v->pos, err, 256);
}

static void fini(vals_t *v)
{
    st_cli_strlist_fini(&v->list);
    st_cli_strlist_fini(&v->pos);
    memset(v, 0, sizeof(*v));
}

static void test_forms(void **state)
{
    (void)state;
    vals_t v = {0};
    char err[256];
    assert_int_equal(
        parse(&v, err, 9, "a", "--flag", "--str=x", "-n", "-5", "-Xk=v", "b", "--prop", "k2=v2"),
        ST_CLI_ARGS_OK);
    assert_true(v.flag);
    assert_string_equal(v.str, "x");
    assert_int_equal(v.num, -5);
    assert_int_equal(v.list.n, 2);
    assert_string_equal(v.list.v[0], "k=v");
    assert_string_equal(v.list.v[1], "k2=v2");
    assert_int_equal(v.pos.n, 2);
    assert_string_equal(v.pos.v[0], "a");
    assert_string_equal(v.pos.v[1], "b");
    fini(&v);

    /* -- ends options; "-" and negative numbers are positionals. */
    assert_int_equal(parse(&v, err, 5, "-s", "--", "--", "-f", "-"), ST_CLI_ARGS_OK);
    assert_string_equal(v.str, "--");
    assert_false(v.flag);
    assert_int_equal(v.pos.n, 2);
    assert_string_equal(v.pos.v[0], "-f");
    fini(&v);
    assert_int_equal(parse(&v, err, 2, "-7", "-s7"), ST_CLI_ARGS_OK);
    assert_string_equal(v.pos.v[0], "-7");
    assert_string_equal(v.str, "7");
    fini(&v);
}

static void test_errors(void **state)
{
    (void)state;
    vals_t v = {0};
    char err[256];
    assert_int_equal(parse(&v, err, 1, "--nope"), ST_CLI_ARGS_ERROR);
    assert_non_null(strstr(err, "--nope"));
    fini(&v);
    assert_int_equal(parse(&v, err, 1, "-q"), ST_CLI_ARGS_ERROR);
    fini(&v);
    assert_int_equal(parse(&v, err, 1, "--str"), ST_CLI_ARGS_ERROR);
    assert_non_null(strstr(err, "needs a value"));
    fini(&v);
    assert_int_equal(parse(&v, err, 2, "-n", "12x"), ST_CLI_ARGS_ERROR);
    assert_non_null(strstr(err, "12x"));
    fini(&v);
    assert_int_equal(parse(&v, err, 1, "--flag=1"), ST_CLI_ARGS_ERROR);
    fini(&v);
    assert_int_equal(parse(&v, err, 2, "x", "--help"), ST_CLI_ARGS_HELP);
    fini(&v);
    assert_int_equal(parse(&v, err, 1, "-h"), ST_CLI_ARGS_HELP);
    fini(&v);
}

static void test_values(void **state)
{
    (void)state;
    int64_t x;
    assert_int_equal(st_cli_parse_size("512", &x), 0);
    assert_int_equal(x, 512);
    assert_int_equal(st_cli_parse_size("4k", &x), 0);
    assert_int_equal(x, 4096);
    assert_int_equal(st_cli_parse_size("1MiB", &x), 0);
    assert_int_equal(x, 1 << 20);
    assert_int_equal(st_cli_parse_size("2g", &x), 0);
    assert_int_equal(x, 2ll << 30);
    assert_int_equal(st_cli_parse_size("-1", &x), -1);
    assert_int_equal(st_cli_parse_size("1q", &x), -1);
    assert_int_equal(st_cli_parse_size("", &x), -1);
    assert_int_equal(st_cli_parse_size("99999999999999999999", &x), -1);

    assert_int_equal(st_cli_parse_duration_ms("250ms", &x), 0);
    assert_int_equal(x, 250);
    assert_int_equal(st_cli_parse_duration_ms("10s", &x), 0);
    assert_int_equal(x, 10000);
    assert_int_equal(st_cli_parse_duration_ms("3", &x), 0);
    assert_int_equal(x, 3000);
    assert_int_equal(st_cli_parse_duration_ms("2m", &x), 0);
    assert_int_equal(x, 120000);
    assert_int_equal(st_cli_parse_duration_ms("1h", &x), 0);
    assert_int_equal(x, 3600000);
    assert_int_equal(st_cli_parse_duration_ms("1d", &x), -1);

    bool ts;
    assert_int_equal(st_cli_parse_offset("start", &x, &ts), 0);
    assert_int_equal(x, ST_CLI_OFFSET_BEGINNING);
    assert_int_equal(st_cli_parse_offset("end", &x, &ts), 0);
    assert_int_equal(x, ST_CLI_OFFSET_END);
    assert_int_equal(st_cli_parse_offset("42", &x, &ts), 0);
    assert_int_equal(x, 42);
    assert_false(ts);
    assert_int_equal(st_cli_parse_offset("-10", &x, &ts), 0);
    assert_int_equal(x, ST_CLI_OFFSET_TAIL_BASE - 10);
    assert_int_equal(st_cli_parse_offset("@1700000000000", &x, &ts), 0);
    assert_true(ts);
    assert_int_equal(x, 1700000000000ll);
    assert_int_equal(st_cli_parse_offset("@-1", &x, &ts), -1);
    assert_int_equal(st_cli_parse_offset("middle", &x, &ts), -1);

    char *buf;
    const char *k, *v;
    assert_int_equal(st_cli_split_kv("a=b=c", &buf, &k, &v), 0);
    assert_string_equal(k, "a");
    assert_string_equal(v, "b=c");
    free(buf);
    assert_int_equal(st_cli_split_kv("=b", &buf, &k, &v), -1);
    assert_int_equal(st_cli_split_kv("ab", &buf, &k, &v), -1);
}

static char *render(const char *fmt, const st_cli_msg_t *m)
{
    st_cli_fmt_t f;
    char err[256];
    assert_int_equal(st_cli_fmt_compile(&f, fmt, err, sizeof(err)), 0);
    st_buf_t b;
    st_buf_init(&b);
    st_cli_fmt_render(&f, m, &b);
    st_buf_put_u8(&b, 0);
    st_cli_fmt_fini(&f);
    char *s = strdup((char *)b.data);
    st_buf_fini(&b);
    return s;
}

static void test_format(void **state)
{
    (void)state;
    st_cli_header_t hs[] = {{"h1", "x", 1}, {"h2", NULL, 0}};
    st_cli_msg_t m = {"orders", 3, 1234, 1700000000123, "k", 1, "hello", 5, hs, 2};
    char *s = render("%t/%p@%o %k=%v %T [%h] %K %S 100%%\\t|\\n", &m);
    assert_string_equal(s, "orders/3@1234 k=hello 1700000000123 [h1=x,h2=] 1 5 100%\t|\n");
    free(s);
    st_cli_msg_t nul = {"t", 0, 0, -1, NULL, 0, NULL, 0, NULL, 0};
    s = render("<%k><%v> %K %S %T", &nul);
    assert_string_equal(s, "<><> -1 -1 -1");
    free(s);

    st_cli_fmt_t f;
    char err[256];
    assert_int_equal(st_cli_fmt_compile(&f, "%v %x", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "%x"));
    assert_int_equal(st_cli_fmt_compile(&f, "trailing %", err, sizeof(err)), -1);
}

static void test_json(void **state)
{
    (void)state;
    st_cli_header_t hs[] = {{"h", "v", 1}};
    st_cli_msg_t m = {"t", 1, 2, 3, NULL, 0, "\xff\x00\x01", 3, hs, 1};
    st_buf_t b;
    st_buf_init(&b);
    st_cli_fmt_json(&m, &b);
    st_buf_put_u8(&b, 0);
    assert_string_equal((char *)b.data,
                        "{\"topic\":\"t\",\"partition\":1,\"offset\":2,\"timestamp\":3,"
                        "\"key\":null,\"value\":{\"base64\":\"/wAB\"},"
                        "\"headers\":[{\"key\":\"h\",\"value\":\"v\"}]}");
    st_buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),  cmocka_unit_test(test_errors), cmocka_unit_test(test_values),
        cmocka_unit_test(test_format), cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
