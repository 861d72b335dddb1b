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
    int rc = env->fs.ops->fdatasync(env->fs.ctx, fd);
    done(arg, rc);
    return 0;
}

void st_storage_env_init(st_storage_env_t *env, st_fs_t fs, int max_open_files)
{
    env->fs = fs;
    env->now_ms = env_wall_ms;
    env->now_ctx = NULL;
    env->sync_submit = st_storage_sync_inline;
    env->sync_ctx = env;
    env->writeback_submit = NULL;
    env->writeback_ctx = NULL;
    env->journal = NULL;
    st_fdcache_init(&env->fdcache, fs, max_open_files > 0 ? max_open_files : 1024);
}

void st_storage_env_fini(st_storage_env_t *env)
{
    st_fdcache_fini(&env->fdcache);
}
