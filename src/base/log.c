/* log.c — leveled logging, one write(2) per line. */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/err.h"

static _Atomic int st_level = ST_LOG_INFO;
static _Thread_local int st_shard = -1;
static const char *const st_level_names[] = {"trace", "debug", "info", "warn", "error", "fatal"};

void st_log_set_level(st_log_level_t level)
{
    atomic_store(&st_level, (int)level);
}

st_log_level_t st_log_get_level(void)
{
    return (st_log_level_t)atomic_load_explicit(&st_level, memory_order_relaxed);
}

int st_log_parse_level(const char *s, st_log_level_t *out)
{
    for (int i = 0; i <= ST_LOG_FATAL; i++) {
        if (strcasecmp(s, st_level_names[i]) == 0) {
            *out = (st_log_level_t)i;
            return 0;
        }
    }
    return ST_E_INVALID;
}

void st_log_set_shard(int shard)
{
    st_shard = shard;
}

int st_log_shard(void)
{
    return st_shard;
}

/* The line's prefix (time, level, thread) into line; its length. */
static int prefix(char *line, size_t size, st_log_level_t level)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, st_level_names[level]);
    if (st_shard >= 0)
        n += snprintf(line + n, size - (size_t)n, "[shard %d] ", st_shard);
    else
        n += snprintf(line + n, size - (size_t)n, "[main] ");
    return n;
}

void st_log_text(st_log_level_t level, const char *text, size_t len)
{
    if ((int)level < atomic_load_explicit(&st_level, memory_order_relaxed))
        return;
    char head[96];
    int n = prefix(head, sizeof head, level);
    struct iovec v[3] = {{head, (size_t)n}, {(void *)text, len}, {"\n", 1}};
    ssize_t w = writev(STDERR_FILENO, v, 3);
    (void)w;
}

void st_log(st_log_level_t level, const char *fmt, ...)
{
    if ((int)level < atomic_load_explicit(&st_level, memory_order_relaxed))
        return;
    char line[2048];
    int n = prefix(line, sizeof line, level);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += m;
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}
