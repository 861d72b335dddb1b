/*
 * log.h — leveled logging to standard error.
 *
 * One line per event: wall time, level, shard, message. The shard is a thread-local set by
 * each shard thread at start (-1 for threads that are not shards). Any thread may log; a line
 * is written with one write(2), so lines from different threads do not interleave.
 */
#ifndef ST_BASE_LOG_H
#define ST_BASE_LOG_H

#include <stddef.h>

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
