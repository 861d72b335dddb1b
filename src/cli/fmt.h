/*
 * fmt.h — how `strata consume` prints a message: --format strings and --json lines.
 *
 * A format string is compiled once into a list of pieces, then rendered per message into an
 * st_buf_t. Directives:
 *
 *   %t topic   %p partition   %o offset   %k key   %v value   %T timestamp (ms, -1 if none)
 *   %K key length (-1 for a null key)   %S value length (-1 for null)   %h headers k=v,k=v
 *   %% a percent sign         \n \t \\ newline, tab, backslash
 *
 * A null key or value prints as nothing. Rendering adds no newline; `consume` adds one per
 * message. Messages are described by st_cli_msg_t so this file needs no librdkafka.
 */
#ifndef ST_CLI_FMT_H
#define ST_CLI_FMT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct st_cli_header {
    const char *name;  /* NUL-terminated */
    const void *value; /* may be NULL */
    size_t value_len;
} st_cli_header_t;

/* One consumed message as the printers see it. */
typedef struct st_cli_msg {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp; /* ms since the epoch, -1 if none */
    const void *key;   /* NULL for a null key */
    size_t key_len;
    const void *value; /* NULL for a null value */
    size_t value_len;
    const st_cli_header_t *headers;
    size_t header_count;
} st_cli_msg_t;

typedef struct st_cli_fmt_piece {
    char kind;       /* 0 = literal, else the directive letter */
    const char *lit; /* literal bytes (into the compiled copy) */
    size_t lit_len;
} st_cli_fmt_piece_t;

typedef struct st_cli_fmt {
    st_cli_fmt_piece_t *pieces;
    size_t n;
    char *text; /* unescaped copy the literals point into */
} st_cli_fmt_t;

/* Compiles fmt; returns 0, or -1 with a message naming the bad directive in err. */
int st_cli_fmt_compile(st_cli_fmt_t *f, const char *fmt, char *err, size_t errlen);
void st_cli_fmt_fini(st_cli_fmt_t *f);
/* Appends the rendering of m to out. */
void st_cli_fmt_render(const st_cli_fmt_t *f, const st_cli_msg_t *m, st_buf_t *out);
/*
 * Appends m as one JSON object (no newline): topic, partition, offset, timestamp, key, value,
 * headers. A key, value or header value that is not valid UTF-8 is written as
 * {"base64": "..."} instead of a string.
 */
void st_cli_fmt_json(const st_cli_msg_t *m, st_buf_t *out);

#endif
