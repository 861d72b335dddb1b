/* env.c — the default storage environment: real clock, inline syncs, descriptor cache. */
#include "storage/env.h"

#include <errno.h>
#include <stdlib.h>

#include "base/clock.h"

static int64_t env_wall_ms(void *ctx)
{
    (void)ctx;
    return st_wall_ms();
}

typedef struct file_sync {
    st_file_t *f;
    st_sync_done_fn done;
    void *arg;
} file_sync_t;

static void file_synced(void *arg, int res)
{
    file_sync_t *s = arg;
    st_sync_done_fn done = s->done;
    void *done_arg = s->arg;
    st_file_unpin(s->f);
    st_file_unref(s->f);
    free(s);
    done(done_arg, res);
}

int st_storage_sync_file(st_storage_env_t *env, st_file_t *f, st_sync_done_fn done, void *arg)
{
    int fd = st_file_pin(f);
    if (fd < 0)
        return fd;
    file_sync_t *s = malloc(sizeof *s);
    if (!s) {
        st_file_unpin(f);
        return -ENOMEM;
    }
    *s = (file_sync_t){f, done, arg};
    st_file_ref(f);
    int rc = env->sync_submit(env->sync_ctx, fd, file_synced, s);
    if (rc < 0) {
        st_file_unpin(f);
        st_file_unref(f);
        free(s);
    }
    return rc;
}

static void file_written_back(void *arg, int res)
{
    (void)res; /* a hint only: a failed write-out shows in the file's next fdatasync */
    st_file_t *f = arg;
    st_file_unpin(f);
    st_file_unref(f);
}

void st_storage_writeback_file(st_storage_env_t *env, st_file_t *f, int64_t off, int64_t len)
{
    if (!env->writeback_submit || len <= 0)
        return;
    int fd = st_file_pin(f);
    if (fd < 0)
        return;
    st_file_ref(f);
    if (env->writeback_submit(env->writeback_ctx, fd, off, len, file_written_back, f) < 0) {
        st_file_unpin(f);
        st_file_unref(f);
    }
}

int st_storage_sync_inline(void *ctx, int fd, st_sync_done_fn done, void *arg)
{
    st_storage_env_t *env = ctx;
    int rc = env->base.ops->fdatasync(env->base.ctx, fd); /* never deferred (env.h) */
    done(arg, rc);
    return 0;
}

/* ---- env->fs: the base table, its syncs deferred between begin and end ---- */

#define BASE(ctx) (&((st_storage_env_t *)(ctx))->base)

static int d_open(void *ctx, const char *path, int flags)
{
    return BASE(ctx)->ops->open(BASE(ctx)->ctx, path, flags);
}

static int d_close(void *ctx, int fd)
{
    return BASE(ctx)->ops->close(BASE(ctx)->ctx, fd);
}

static ssize_t d_pread(void *ctx, int fd, void *buf, size_t n, int64_t off)
{
    return BASE(ctx)->ops->pread(BASE(ctx)->ctx, fd, buf, n, off);
}

static ssize_t d_pwrite(void *ctx, int fd, const void *buf, size_t n, int64_t off)
{
    return BASE(ctx)->ops->pwrite(BASE(ctx)->ctx, fd, buf, n, off);
}

static ssize_t d_pwrite2(void *ctx, int fd, const void *a, size_t na, const void *b, size_t nb,
                         int64_t off)
{
    return BASE(ctx)->ops->pwrite2(BASE(ctx)->ctx, fd, a, na, b, nb, off);
}

static int d_fdatasync(void *ctx, int fd)
{
    st_storage_env_t *env = ctx;
    if (env->defer_depth > 0) {
        env->deferred++;
        return 0;
    }
    return env->base.ops->fdatasync(env->base.ctx, fd);
}

static int d_ftruncate(void *ctx, int fd, int64_t len)
{
    return BASE(ctx)->ops->ftruncate(BASE(ctx)->ctx, fd, len);
}

static int d_fsize(void *ctx, int fd, int64_t *size)
{
    return BASE(ctx)->ops->fsize(BASE(ctx)->ctx, fd, size);
}

static int d_rename(void *ctx, const char *from, const char *to)
{
    return BASE(ctx)->ops->rename(BASE(ctx)->ctx, from, to);
}

static int d_unlink(void *ctx, const char *path)
{
    return BASE(ctx)->ops->unlink(BASE(ctx)->ctx, path);
}

static int d_mkdir(void *ctx, const char *path)
{
    return BASE(ctx)->ops->mkdir(BASE(ctx)->ctx, path);
}

static int d_rmdir(void *ctx, const char *path)
{
    return BASE(ctx)->ops->rmdir(BASE(ctx)->ctx, path);
}

static int d_listdir(void *ctx, const char *path,
                     int (*cb)(void *arg, const char *name, int is_dir), void *arg)
{
    return BASE(ctx)->ops->listdir(BASE(ctx)->ctx, path, cb, arg);
}

static int d_fsync_dir(void *ctx, const char *path)
{
    st_storage_env_t *env = ctx;
    if (env->defer_depth > 0) {
        env->deferred++;
        return 0;
    }
    return env->base.ops->fsync_dir(env->base.ctx, path);
}

static int d_syncfs(void *ctx, const char *path)
{
    return BASE(ctx)->ops->syncfs ? BASE(ctx)->ops->syncfs(BASE(ctx)->ctx, path) : -ENOSYS;
}

static const st_fs_ops_t d_ops = {
    .open = d_open,
    .close = d_close,
    .pread = d_pread,
    .pwrite = d_pwrite,
    .pwrite2 = d_pwrite2,
    .fdatasync = d_fdatasync,
    .ftruncate = d_ftruncate,
    .fsize = d_fsize,
    .rename = d_rename,
    .unlink = d_unlink,
    .mkdir = d_mkdir,
    .rmdir = d_rmdir,
    .listdir = d_listdir,
    .fsync_dir = d_fsync_dir,
    .syncfs = d_syncfs,
};

static const st_fs_ops_t d_ops_no_pwrite2 = {
    .open = d_open,
    .close = d_close,
    .pread = d_pread,
    .pwrite = d_pwrite,
    .fdatasync = d_fdatasync,
    .ftruncate = d_ftruncate,
    .fsize = d_fsize,
    .rename = d_rename,
    .unlink = d_unlink,
    .mkdir = d_mkdir,
    .rmdir = d_rmdir,
    .listdir = d_listdir,
    .fsync_dir = d_fsync_dir,
    .syncfs = d_syncfs,
};

void st_storage_defer_begin(st_storage_env_t *env)
{
    if (env->defer_ok && env->base.ops->syncfs)
        env->defer_depth++;
}

int st_storage_defer_end(st_storage_env_t *env, const char *dir)
{
    if (env->defer_depth == 0 || --env->defer_depth > 0)
        return 0;
    if (env->deferred == 0)
        return 0;
    env->deferred = 0;
    return env->base.ops->syncfs(env->base.ctx, dir);
}

void st_storage_defer_take(st_storage_env_t *env)
{
    if (env->defer_depth > 0 && --env->defer_depth == 0)
        env->deferred = 0;
}

void st_storage_env_init(st_storage_env_t *env, st_fs_t fs, int max_open_files)
{
    env->base = fs;
    env->fs = (st_fs_t){fs.ops->pwrite2 ? &d_ops : &d_ops_no_pwrite2, env};
    env->defer_ok = false;
    env->defer_depth = 0;
    env->deferred = 0;
    env->now_ms = env_wall_ms;
    env->now_ctx = NULL;
    env->sync_submit = st_storage_sync_inline;
    env->sync_ctx = env;
    env->writeback_submit = NULL;
    env->writeback_ctx = NULL;
    env->journal = NULL;
    st_fdcache_init(&env->fdcache, env->fs, max_open_files > 0 ? max_open_files : 1024);
}

void st_storage_env_fini(st_storage_env_t *env)
{
    st_fdcache_fini(&env->fdcache);
}
