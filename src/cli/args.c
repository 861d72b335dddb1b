/*
 * args.c — option parsing for the `strata` tool (see args.h).
 */
#include "cli/args.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int st_cli_strlist_push(st_cli_strlist_t *l, const char *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        const char **v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

void st_cli_strlist_fini(st_cli_strlist_t *l)
{
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

int st_cli_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return -1;
    *out = v;
    return 0;
}

/* Parses a non-negative number followed by a unit suffix from `units`; returns 0 or -1. */
static int parse_scaled(const char *s, const char *const *units, const int64_t *mult,
                        int64_t bare_mult, int64_t *out)
{
    if (!s || !*s || *s == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    int64_t m = bare_mult;
    if (*end) {
        size_t i;
        for (i = 0; units[i]; i++)
            if (!strcmp(end, units[i]))
                break;
        if (!units[i])
            return -1;
        m = mult[i];
    }
    if (v > (unsigned long long)(INT64_MAX / m))
        return -1;
    *out = (int64_t)v * m;
    return 0;
}

int st_cli_parse_size(const char *s, int64_t *out)
{
    static const char *const units[] = {"b",  "k",   "K", "kb", "KB", "KiB", "m",   "M", "mb",
                                        "MB", "MiB", "g", "G",  "gb", "GB",  "GiB", NULL};
    static const int64_t k = 1024, m = 1024 * 1024, g = 1024 * 1024 * 1024;
    static const int64_t mult[] = {1, k, k, k, k, k, m, m, m, m, m, g, g, g, g, g};
    return parse_scaled(s, units, mult, 1, out);
}

int st_cli_parse_duration_ms(const char *s, int64_t *out)
{
    static const char *const units[] = {"ms", "s", "m", "h", NULL};
    static const int64_t mult[] = {1, 1000, 60000, 3600000};
    return parse_scaled(s, units, mult, 1000, out);
}

int st_cli_split_kv(const char *s, char **buf, const char **key, const char **value)
{
    const char *eq = strchr(s, '=');
    if (!eq || eq == s)
        return -1;
    char *c = strdup(s);
    if (!c)
        return -1;
    c[eq - s] = '\0';
    *buf = c;
    *key = c;
    *value = c + (eq - s) + 1;
    return 0;
}

int st_cli_parse_offset(const char *s, int64_t *offset, bool *is_ts)
{
    int64_t v;
    *is_ts = false;
    if (!strcmp(s, "start") || !strcmp(s, "beginning") || !strcmp(s, "earliest")) {
        *offset = ST_CLI_OFFSET_BEGINNING;
        return 0;
    }
    if (!strcmp(s, "end") || !strcmp(s, "latest")) {
        *offset = ST_CLI_OFFSET_END;
        return 0;
    }
    if (s[0] == '@') {
        if (st_cli_parse_i64(s + 1, &v) < 0 || v < 0)
            return -1;
        *offset = v;
        *is_ts = true;
        return 0;
    }
    if (st_cli_parse_i64(s, &v) < 0)
        return -1;
    if (v < 0) {
        if (v < INT64_MIN - ST_CLI_OFFSET_TAIL_BASE)
            return -1;
        *offset = ST_CLI_OFFSET_TAIL_BASE + v; /* -N: N from the end */
        return 0;
    }
    *offset = v;
    return 0;
}

static const st_cli_opt_t *find_long(const st_cli_opt_t *const *tables, const char *name,
                                     size_t len)
{
    for (size_t t = 0; tables[t]; t++)
        for (const st_cli_opt_t *o = tables[t]; o->long_name; o++)
            if (strlen(o->long_name) == len && !strncmp(o->long_name, name, len))
                return o;
    return NULL;
}

static const st_cli_opt_t *find_short(const st_cli_opt_t *const *tables, char c)
{
    for (size_t t = 0; tables[t]; t++)
        for (const st_cli_opt_t *o = tables[t]; o->long_name; o++)
            if (o->short_name && o->short_name == c)
                return o;
    return NULL;
}

/* Stores `val` into the option's destination; returns 0 or -1 with err filled. */
static int store(const st_cli_opt_t *o, const char *val, char *err, size_t errlen)
{
    switch (o->kind) {
    case ST_CLI_OPT_FLAG:
        *(bool *)o->dst = true;
        return 0;
    case ST_CLI_OPT_STR:
        *(const char **)o->dst = val;
        return 0;
    case ST_CLI_OPT_INT:
        if (st_cli_parse_i64(val, (int64_t *)o->dst) < 0) {
            snprintf(err, errlen, "--%s wants a whole number, not '%s'", o->long_name, val);
            return -1;
        }
        return 0;
    case ST_CLI_OPT_LIST:
        if (st_cli_strlist_push((st_cli_strlist_t *)o->dst, val) < 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        return 0;
    }
    return -1;
}

int st_cli_args_parse(const st_cli_opt_t *const *tables, int argc, char **argv,
                      st_cli_strlist_t *pos, char *err, size_t errlen)
{
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (st_cli_strlist_push(pos, a) < 0)
                goto oom;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_pos = true;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return ST_CLI_ARGS_HELP;
        const st_cli_opt_t *o;
        const char *val = NULL;
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(tables, name, len);
            if (!o) {
                snprintf(err, errlen, "unknown option '--%.*s'", (int)len, name);
                return ST_CLI_ARGS_ERROR;
            }
            if (eq) {
                if (o->kind == ST_CLI_OPT_FLAG) {
                    snprintf(err, errlen, "--%s takes no value", o->long_name);
                    return ST_CLI_ARGS_ERROR;
                }
                val = eq + 1;
            }
        } else {
            o = find_short(tables, a[1]);
            if (!o) {
                /* A negative number where a positional is expected ("-5"). */
                int64_t ignored;
                if (st_cli_parse_i64(a, &ignored) == 0) {
                    if (st_cli_strlist_push(pos, a) < 0)
                        goto oom;
                    continue;
                }
                snprintf(err, errlen, "unknown option '-%c'", a[1]);
                return ST_CLI_ARGS_ERROR;
            }
            if (a[2] != '\0') {
                if (o->kind == ST_CLI_OPT_FLAG) {
                    snprintf(err, errlen, "-%c takes no value (in '%s')", a[1], a);
                    return ST_CLI_ARGS_ERROR;
                }
                val = a + 2;
            }
        }
        if (o->kind != ST_CLI_OPT_FLAG && !val) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "--%s needs a value (%s)", o->long_name,
                         o->metavar ? o->metavar : "VALUE");
                return ST_CLI_ARGS_ERROR;
            }
            val = argv[++i];
        }
        if (store(o, val, err, errlen) < 0)
            return ST_CLI_ARGS_ERROR;
    }
    return ST_CLI_ARGS_OK;
oom:
    snprintf(err, errlen, "out of memory");
    return ST_CLI_ARGS_ERROR;
}

void st_cli_args_help(FILE *f, const char *usage, const char *summary,
                      const st_cli_opt_t *const *tables)
{
    fprintf(f, "usage: strata %s\n\n%s\n", usage, summary);
    bool any = false;
    for (size_t t = 0; tables[t]; t++)
        for (const st_cli_opt_t *o = tables[t]; o->long_name; o++) {
            if (!any)
                fprintf(f, "\noptions:\n");
            any = true;
            char left[64];
            int n = 0;
            if (o->short_name)
                n = snprintf(left, sizeof(left), "-%c, ", o->short_name);
            else
                n = snprintf(left, sizeof(left), "    ");
            snprintf(left + n, sizeof(left) - (size_t)n, "--%s%s%s", o->long_name,
                     o->kind == ST_CLI_OPT_FLAG ? "" : " ",
                     o->kind == ST_CLI_OPT_FLAG ? "" : (o->metavar ? o->metavar : "VALUE"));
            fprintf(f, "  %-28s %s%s\n", left, o->help,
                    o->kind == ST_CLI_OPT_LIST ? " (repeatable)" : "");
        }
    fprintf(f, "  %-28s %s\n", "-h, --help", "show this help");
}
