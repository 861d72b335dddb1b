/*
 * debug.h — the admin API's read-only debug answers, what `strata debug bundle` collects:
 *
 *   GET /v1/debug/log       text: the broker's most recent log lines (base/log.h's ring: the
 *                           last ST_ADMIN_DEBUG_LOG_LINES lines, at most 1 MiB), oldest first
 *   GET /v1/debug/config    JSON: every effective setting with its type and source (default,
 *                           file, --set); a secret's value (st_config_is_secret) is "[hidden]"
 *   GET /v1/debug/data-dir  JSON: every file and directory under log.dirs with its size and
 *                           mtime, at most ST_ADMIN_DEBUG_DIR_MAX entries ("truncated" says so)
 *   GET /v1/debug/process   JSON: pid, version, uptime, memory, threads, open descriptors,
 *                           resource limits, the kernel (uname), CPUs, load
 *
 * Threads: the admin HTTP thread. Each answer is made from the immutable config, the log
 * ring (whose mutex a shard holds only for one line's memcpy), the file system and /proc:
 * nothing here waits for a shard or touches shard-owned memory.
 */
#ifndef ST_ADMIN_DEBUG_H
#define ST_ADMIN_DEBUG_H

#include "base/buf.h"
#include "cluster/config.h"

#define ST_ADMIN_DEBUG_LOG_LINES 2000
#define ST_ADMIN_DEBUG_DIR_MAX   100000
#define ST_ADMIN_DEBUG_DIR_DEPTH 8

/* What the answers need from the broker, read once per request. */
typedef struct st_admin_debug_in {
    const st_config_t *cfg;
    const char *version;
    const char *cluster_id;
    int nshards;
    double start_time_seconds; /* wall clock, Unix seconds */
    double uptime_seconds;
} st_admin_debug_in_t;

/* Whether url is one of the GET routes above. */
bool st_admin_debug_route(const char *url);
/* Renders url's answer into out and its content type into *type. 0; -ENOENT when url is not
 * one of the routes above; -ENOMEM. */
int st_admin_debug_render(const char *url, const st_admin_debug_in_t *in, st_buf_t *out,
                          const char **type);

#endif
