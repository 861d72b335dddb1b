/* afile.c — atomic, durable small-file writes with asynchronous syncs (afile.h). */
#include "broker/afile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "storage/fs.h"

typedef struct {
    st_storage_env_t *env;
    char tmp[4200], dst[4200], dir[4096];
    int fd;
    st_afile_done_fn done;
    void *arg;
} write_t;

static void finish(write_t *w, int rc)
{
    const st_fs_t *fs = &w->env->fs;
    if (rc < 0)
        fs->ops->unlink(fs->ctx, w->tmp);
    w->done(w->arg, rc);
    free(w);
}

static void dir_synced(void *arg, int res)
{
    write_t *w = arg;
    const st_fs_t *fs = &w->env->fs;
    fs->ops->close(fs->ctx, w->fd);
    w->done(w->arg, res < 0 ? res : 0);
    free(w);
}

static void file_synced(void *arg, int res)
{
    write_t *w = arg;
    const st_fs_t *fs = &w->env->fs;
    int rc = res < 0 ? res : 0;
    int crc = fs->ops->close(fs->ctx, w->fd);
    if (rc == 0)
        rc = crc;
    if (rc == 0)
        rc = fs->ops->rename(fs->ctx, w->tmp, w->dst);
    if (rc < 0) {
        finish(w, rc);
        return;
    }
    /* The rename is durable once the directory is synced: through the same hook. */
    w->fd = fs->ops->open(fs->ctx, w->dir, ST_FS_RDONLY);
    if (w->fd >= 0 && (rc = w->env->sync_submit(w->env->sync_ctx, w->fd, dir_synced, w)) == 0)
        return;
    if (w->fd >= 0)
        fs->ops->close(fs->ctx, w->fd);
    /* No descriptor for the directory (or no submission): its synchronous sync instead. */
    rc = fs->ops->fsync_dir(fs->ctx, w->dir);
    w->done(w->arg, rc < 0 ? rc : 0);
    free(w);
}

int st_afile_write(st_storage_env_t *env, const char *dir, const char *name, const void *data,
                   size_t len, st_afile_done_fn done, void *arg)
{
    write_t *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    *w = (write_t){.env = env, .done = done, .arg = arg};
    if ((size_t)snprintf(w->tmp, sizeof w->tmp, "%s/%s.tmp", dir, name) >= sizeof w->tmp ||
        (size_t)snprintf(w->dst, sizeof w->dst, "%s/%s", dir, name) >= sizeof w->dst ||
        (size_t)snprintf(w->dir, sizeof w->dir, "%s", dir) >= sizeof w->dir) {
        free(w);
        return -ENAMETOOLONG;
    }
    const st_fs_t *fs = &env->fs;
    w->fd = fs->ops->open(fs->ctx, w->tmp, ST_FS_RDWR | ST_FS_CREAT | ST_FS_TRUNC);
    if (w->fd < 0) {
        int rc = w->fd;
        free(w);
        return rc;
    }
    int rc = st_fs_pwrite_full(fs, w->fd, data, len, 0);
    if (rc == 0)
        rc = env->sync_submit(env->sync_ctx, w->fd, file_synced, w);
    if (rc == 0)
        return 0;
    fs->ops->close(fs->ctx, w->fd);
    fs->ops->unlink(fs->ctx, w->tmp);
    free(w);
    return rc;
}
