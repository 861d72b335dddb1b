/*
 * afile.h — write a small file atomically and durably without blocking the shard.
 *
 *   <dir>/<name>.tmp written (page cache) -> its fdatasync through env->sync_submit (io_uring,
 *   or the epoll backend's helper thread) -> rename over <dir>/<name> -> the directory's sync,
 *   the same way -> done(arg, 0 or -errno)
 *
 * Every call goes through env->fs, the storage layer's file-system table, so a fault-injecting
 * table covers these files too. Used for the cluster metadata (kafka/controller.c). The bytes
 * are copied: the caller may free them once st_afile_write returns.
 *
 * Threads: the env's shard; done runs there (from inside st_afile_write only when the env's
 * sync hook is the inline one of tests and tools).
 */
#ifndef ST_BROKER_AFILE_H
#define ST_BROKER_AFILE_H

#include <stddef.h>

#include "storage/env.h"

typedef void (*st_afile_done_fn)(void *arg, int rc);

/* Starts the write; returns 0 (done will be called) or -errno (it will not; nothing changed
 * but perhaps a leftover <name>.tmp). */
int st_afile_write(st_storage_env_t *env, const char *dir, const char *name, const void *data,
                   size_t len, st_afile_done_fn done, void *arg);

#endif
