/*
 * log.h — leveled logging to standard error.
 *
 * One line per event: wall time, level, shard, message. The shard is a thread-local set by
 * each shard thread at start (-1 for threads that are not shards). Any thread may log; a line
 * is written with one write(2), so lines from different threads do not interleave.
 *
 * Every line written is also kept in an in-memory ring of the last ST_LOG_RING_BYTES (each
 * line cut at ST_LOG_RING_LINE_MAX there), which st_log_recent copies out (the admin API's
 * GET /v1/debug/log, for a debug bundle). Writers take the ring's mutex for one memcpy of
 * their line; a reader copies ST_LOG_RING_CHUNK bytes per hold, so a shard that logs waits at
 * most that one short copy, never the whole read.
 */
#ifndef ST_BASE_LOG_H
#define ST_BASE_LOG_H

#include <stddef.h>

#include "base/buf.h"

#define ST_LOG_RING_BYTES    (1u << 20)
#define ST_LOG_RING_LINE_MAX 8192
#define ST_LOG_RING_CHUNK    (64u << 10)

typedef enum {
    ST_LOG_TRACE,
    ST_LOG_DEBUG,
    ST_LOG_INFO,
    ST_LOG_WARN,
    ST_LOG_ERROR,
    ST_LOG_FATAL,
} st_log_level_t;

void st_log(st_log_level_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void st_log_set_level(st_log_level_t level);
/* One line of any length: the usual prefix, then text[0..len) as it is (no format), in one
 * writev(2) (st_log cuts lines at 2 KiB). */
void st_log_text(st_log_level_t level, const char *text, size_t len);
st_log_level_t st_log_get_level(void);
/* Parses "trace".."fatal"; returns 0 or ST_E_INVALID. */
int st_log_parse_level(const char *s, st_log_level_t *out);
void st_log_set_shard(int shard);
/* Appends to out the most recent whole lines logged, oldest first: at most max_lines of them
 * (0: all the ring holds). Any thread. 0, or -ENOMEM. */
int st_log_recent(st_buf_t *out, size_t max_lines);
int st_log_shard(void);

#define ST_TRACE(...)                                                                              \
    do {                                                                                           \
        if (st_log_get_level() <= ST_LOG_TRACE)                                                    \
            st_log(ST_LOG_TRACE, __VA_ARGS__);                                                     \
    } while (0)
#define ST_DEBUG(...)                                                                              \
    do {                                                                                           \
        if (st_log_get_level() <= ST_LOG_DEBUG)                                                    \
            st_log(ST_LOG_DEBUG, __VA_ARGS__);                                                     \
    } while (0)
#define ST_INFO(...)  st_log(ST_LOG_INFO, __VA_ARGS__)
#define ST_WARN(...)  st_log(ST_LOG_WARN, __VA_ARGS__)
#define ST_ERROR(...) st_log(ST_LOG_ERROR, __VA_ARGS__)

#endif
