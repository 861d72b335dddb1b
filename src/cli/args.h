/*
 * args.h — the `strata` tool's option parser and value parsers.
 *
 * Each command describes its options in a table of st_cli_opt_t, each entry pointing at the
 * variable it fills. st_cli_args_parse() walks argv once: long options (--name value,
 * --name=value), short options (-n value, -nvalue), flags, repeated options collected into a
 * list, `--` ending options, and positional arguments in any place. The same tables print the
 * command's --help, so usage text never drifts from what is parsed.
 *
 * Nothing here talks to a broker; it is unit-tested in tests/unit/cli/test_args.c.
 * Single-threaded: call from the main thread only.
 */
#ifndef ST_CLI_ARGS_H
#define ST_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses of every command (the contract). */
enum { ST_CLI_OK = 0, ST_CLI_FAIL = 1, ST_CLI_USAGE = 2 };

/* A growable list of borrowed strings (argv entries). */
typedef struct st_cli_strlist {
    const char **v; /* items, not owned */
    size_t n;       /* how many */
    size_t cap;     /* allocated slots */
} st_cli_strlist_t;

int st_cli_strlist_push(st_cli_strlist_t *l, const char *s);
void st_cli_strlist_fini(st_cli_strlist_t *l);

typedef enum st_cli_opt_kind {
    ST_CLI_OPT_FLAG, /* bool *: set to true, takes no value */
    ST_CLI_OPT_STR,  /* const char **: the last value given wins */
    ST_CLI_OPT_INT,  /* int64_t *: decimal integer, may be negative */
    ST_CLI_OPT_LIST, /* st_cli_strlist_t *: every value given, in order */
} st_cli_opt_kind_t;

typedef struct st_cli_opt {
    char short_name;        /* 'b' for -b, 0 for none */
    const char *long_name;  /* "brokers" for --brokers; NULL ends a table */
    st_cli_opt_kind_t kind; /* what the value is */
    void *dst;              /* where the value goes (type by kind) */
    const char *metavar;    /* name of the value in --help ("N", "K=V") */
    const char *help;       /* one line for --help */
} st_cli_opt_t;

#define ST_CLI_OPT_END                                                                             \
    {                                                                                              \
        0, NULL, ST_CLI_OPT_FLAG, NULL, NULL, NULL                                                 \
    }

/* Result of st_cli_args_parse(). */
enum { ST_CLI_ARGS_OK = 0, ST_CLI_ARGS_HELP = 1, ST_CLI_ARGS_ERROR = -1 };

/*
 * Parses argv[0..argc) (no program or command name in it) against the option tables in
 * `tables` (a NULL-terminated array, searched in order), filling their destinations and
 * appending positional arguments to `pos`. Returns ST_CLI_ARGS_OK, ST_CLI_ARGS_HELP when
 * -h/--help was given, or ST_CLI_ARGS_ERROR with a message in err.
 */
int st_cli_args_parse(const st_cli_opt_t *const *tables, int argc, char **argv,
                      st_cli_strlist_t *pos, char *err, size_t errlen);

/* Prints "usage: strata USAGE", the summary, and every option of `tables` to f. */
void st_cli_args_help(FILE *f, const char *usage, const char *summary,
                      const st_cli_opt_t *const *tables);

/* Parses a whole decimal integer ("-12"); returns 0 or -1. */
int st_cli_parse_i64(const char *s, int64_t *out);
/* Parses a byte size: "512", "4k", "1m", "2g" (powers of 1024); returns 0 or -1. */
int st_cli_parse_size(const char *s, int64_t *out);
/* Parses a duration into milliseconds: "250ms", "10s", "5m", "1h", bare number = seconds. */
int st_cli_parse_duration_ms(const char *s, int64_t *out);
/* Splits "key=value" at the first '='; key and value point into a copy owned by *buf. */
int st_cli_split_kv(const char *s, char **buf, const char **key, const char **value);

/* librdkafka's logical offsets (common.c checks they match RD_KAFKA_OFFSET_*). */
#define ST_CLI_OFFSET_BEGINNING (-2)
#define ST_CLI_OFFSET_END       (-1)
#define ST_CLI_OFFSET_TAIL_BASE (-2000)

/*
 * Parses the --offset syntax: "start" or "beginning", "end", "N" (absolute), "-N" (N before
 * the end), "@MS" (first message at or after a timestamp in ms since the epoch). Sets *offset
 * to an absolute or ST_CLI_OFFSET_* value, or to the timestamp with *is_ts true.
 * Returns 0 or -1.
 */
int st_cli_parse_offset(const char *s, int64_t *offset, bool *is_ts);

#endif
