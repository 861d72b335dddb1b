/*
 * env.h — what the storage module needs from its host: files, time, and asynchronous syncs.
 *
 * One st_storage_env_t per shard (or per test). Every log opened with it uses its file-system
 * table, its clock, its sync hook and its descriptor cache, all from the shard's thread.
 *
 * The sync hook is how durability stays off the event loop:
 *
 *   int sync_submit(void *ctx, int fd, st_sync_done_fn done, void *arg)
 *
 * starts an fdatasync of fd and returns 0, or returns a negative errno if it could not start
 * it (then done is never called). done(arg, res) runs exactly once on the shard thread, with
 * res 0 or a negative errno, either later (the server submits IORING_OP_FSYNC with
 * IORING_FSYNC_DATASYNC and calls done from its completion) or inline before sync_submit
 * returns (the default below, and tests). fd stays open until done has run.
 *
 * The default (st_storage_env_init) uses the real clock and runs fdatasync inline: simple, and
 * right for tests and tools, but it blocks; a server replaces sync_submit.
 *
 * The writeback hook starts, without waiting for it, the write-out of a range of a file's
 * dirty pages (sync_file_range(SYNC_FILE_RANGE_WRITE)):
 *
 *   int writeback_submit(void *ctx, int fd, int64_t off, int64_t len, st_sync_done_fn done,
 *                        void *arg)
 *
 * with the same contract as sync_submit (0 and done exactly once on the shard, or < 0 and
 * never done; fd stays open until done ran). Storage ignores its result: it only spreads the
 * disk's work over time so that a later fdatasync of the file (a lazy per-file round, with a
 * journal) finds little left to write, and a sync of another file does not queue behind a
 * burst of it. It makes nothing durable. NULL (the default): nothing is started.
 */
#ifndef ST_STORAGE_ENV_H
#define ST_STORAGE_ENV_H

#include <stdatomic.h>
#include <stdint.h>

#include "storage/file.h"
#include "storage/fs.h"

typedef void (*st_sync_done_fn)(void *arg, int res);

typedef struct st_storage_env {
    st_fs_t fs;                   /* every file-system call: base's, syncs deferred (below) */
    st_fs_t base;                 /* the file system given to st_storage_env_init */
    bool defer_ok;                /* syncs may be deferred (below); false by default */
    int defer_depth;              /* st_storage_defer_begin calls not yet ended */
    uint64_t deferred;            /* syncs deferred since the outermost begin */
    int64_t (*now_ms)(void *ctx); /* wall clock, ms since the epoch */
    void *now_ctx;
    int (*sync_submit)(void *ctx, int fd, st_sync_done_fn done, void *arg);
    void *sync_ctx;
    int (*writeback_submit)(void *ctx, int fd, int64_t off, int64_t len, st_sync_done_fn done,
                            void *arg); /* NULL: none */
    void *writeback_ctx;
    st_fdcache_t fdcache;       /* descriptors of this env's files */
    struct st_journal *journal; /* the shard's journal (journal.h), NULL: none */
    /* A debug build's slow disk (admin/admin.c, POST /v1/debug/sync-delay): a deferred syncfs
     * made on a thread of its own (broker/adopt.c) returns this many ms later. NULL: none. */
    const _Atomic int64_t *syncfs_delay_ms;
} st_storage_env_t;

/* Defaults: the given fs, st_wall_ms, inline fdatasync through fs, a cache of max_open_files
 * descriptors (<= 0: 1024), no journal (st_journal_open adds one). Replace now_ms/sync_submit
 * afterwards as needed. */
void st_storage_env_init(st_storage_env_t *env, st_fs_t fs, int max_open_files);
/* Every log of this env must be closed first. */
void st_storage_env_fini(st_storage_env_t *env);

/*
 * Deferred syncs. Between st_storage_defer_begin(env) and st_storage_defer_end(env, dir), the
 * synchronous syncs made through env->fs (fdatasync and fsync_dir: those of st_log_open,
 * st_log_close, st_fs_write_file_atomic and their kin, several per log) are not made one by
 * one: _end makes everything durable with one syncfs of the file system holding dir. For
 * opening or closing many logs at once (broker/adopt.c, partition.h st_parts_fini): the caller
 * promises nothing of what was written in between (no append acknowledged, no clean-shutdown
 * marker written on the strength of an earlier write) before _end returned 0, and does not
 * return to its loop in between. Syncs through sync_submit are never deferred. Pairs nest: the
 * outermost _end syncs. Unless the host set env->defer_ok (the broker: where
 * st_fs_syncfs_durable says syncfs holds, fs.h) and base has syncfs, nothing is deferred (each
 * sync is made as before). _end returns 0, or the error of syncfs: then nothing written since
 * _begin is known durable. Shard thread (the env's).
 */
void st_storage_defer_begin(st_storage_env_t *env);
int st_storage_defer_end(st_storage_env_t *env, const char *dir);
/* _end without the sync, for a caller that makes it itself (base.ops->syncfs, on a thread of
 * its own where base allows) before it promises anything; whether any sync was deferred is
 * env->deferred before the call. */
void st_storage_defer_take(st_storage_env_t *env);

/*
 * Syncs one file through env->sync_submit, holding it (a reference and an open descriptor)
 * until done(arg, res) has run. Returns 0, or < 0 when nothing was submitted (the file could
 * not be opened, no memory, or the hook refused): done is then never called. done may run
 * before this returns (the inline hook).
 */
int st_storage_sync_file(st_storage_env_t *env, st_file_t *f, st_sync_done_fn done, void *arg);

/*
 * Starts the write-out of bytes [off, off + len) of f through env->writeback_submit, holding
 * the file until it completed; the result is ignored. Does nothing without a hook, or when the
 * file cannot be pinned or the hook refuses (a hint, never an error).
 */
void st_storage_writeback_file(st_storage_env_t *env, st_file_t *f, int64_t off, int64_t len);

/* The default sync hook: fdatasync through env->fs, then done inline. ctx is the env. */
int st_storage_sync_inline(void *ctx, int fd, st_sync_done_fn done, void *arg);

static inline int64_t st_storage_now(const st_storage_env_t *env)
{
    return env->now_ms(env->now_ctx);
}

#endif
