/* env.c — the default storage environment: real clock, inline syncs, descriptor cache. */
#include "storage/env.h"

#include "base/clock.h"

static int64_t env_wall_ms(void *ctx)
{
    (void)ctx;
    return st_wall_ms();
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
    st_fdcache_init(&env->fdcache, fs, max_open_files > 0 ? max_open_files : 1024);
}

void st_storage_env_fini(st_storage_env_t *env)
{
    st_fdcache_fini(&env->fdcache);
}
