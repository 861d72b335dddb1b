/* log.c — leveled logging, one write(2) per line, and the ring of recent lines (log.h). */
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/err.h"

static _Atomic int st_level = ST_LOG_INFO;
static _Thread_local int st_shard = -1;
static const char *const st_level_names[] = {"trace", "debug", "info", "warn", "error", "fatal"};

/* The recent lines: byte i of the log's output since start lives at buf[i % size] while
 * i >= head - size. */
static struct {
    pthread_mutex_t mu;
    uint64_t head; /* bytes ever put */
    char buf[ST_LOG_RING_BYTES];
} st_ring = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Copies n bytes into the ring at its head (under the mutex). */
static void ring_copy_in(const char *p, size_t n)
{
    while (n) {
        size_t at = (size_t)(st_ring.head % ST_LOG_RING_BYTES);
        size_t k = ST_LOG_RING_BYTES - at < n ? ST_LOG_RING_BYTES - at : n;
        memcpy(st_ring.buf + at, p, k);
        st_ring.head += k;
        p += k;
        n -= k;
    }
}

/* Keeps one line (its parts v[0..n), the last being "\n"), its text cut at
 * ST_LOG_RING_LINE_MAX. */
static void ring_put(const struct iovec *v, int n)
{
    size_t room = ST_LOG_RING_LINE_MAX;
    pthread_mutex_lock(&st_ring.mu);
    for (int i = 0; i < n; i++) {
        size_t k = v[i].iov_len;
        if (i < n - 1) {
            k = k < room ? k : room;
            room -= k;
        }
        ring_copy_in(v[i].iov_base, k);
    }
    pthread_mutex_unlock(&st_ring.mu);
}

int st_log_recent(st_buf_t *out, size_t max_lines)
{
    char *tmp = malloc(ST_LOG_RING_BYTES);
    if (!tmp)
        return -ENOMEM;
    pthread_mutex_lock(&st_ring.mu);
    uint64_t end = st_ring.head;
    pthread_mutex_unlock(&st_ring.mu);
    uint64_t start = end > ST_LOG_RING_BYTES ? end - ST_LOG_RING_BYTES : 0, pos = start;
    bool cut = start > 0; /* the first line may be a tail */
    /* One chunk per hold. Bytes overwritten while we read are skipped: what was copied
     * before them is dropped too, so what comes out is contiguous. */
    while (pos < end) {
        pthread_mutex_lock(&st_ring.mu);
        if (st_ring.head - pos > ST_LOG_RING_BYTES) {
            start = pos = st_ring.head - ST_LOG_RING_BYTES;
            cut = true;
        }
        size_t k = end - pos < ST_LOG_RING_CHUNK ? (size_t)(end - pos) : ST_LOG_RING_CHUNK;
        if (pos >= end)
            k = 0;
        for (size_t done = 0; done < k;) {
            size_t at = (size_t)((pos + done) % ST_LOG_RING_BYTES);
            size_t m = ST_LOG_RING_BYTES - at < k - done ? ST_LOG_RING_BYTES - at : k - done;
            memcpy(tmp + (pos + done - start), st_ring.buf + at, m);
            done += m;
        }
        pthread_mutex_unlock(&st_ring.mu);
        pos += k;
    }
    size_t len = pos > start ? (size_t)(pos - start) : 0, from = 0;
    if (cut) {
        const char *nl = memchr(tmp, '\n', len);
        from = nl ? (size_t)(nl - tmp) + 1 : len;
    }
    if (max_lines) {
        size_t lines = 0, i = len;
        while (i > from && lines <= max_lines)
            if (tmp[--i] == '\n' && ++lines > max_lines)
                from = i + 1;
    }
    int rc = st_buf_append(out, tmp + from, len - from);
    free(tmp);
    return rc;
}

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
    ring_put(v, 3);
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
    struct iovec v[2] = {{line, (size_t)n - 1}, {"\n", 1}};
    ring_put(v, 2);
}
