/*
 * fs.c — the POSIX file-system table and helpers that loop over short transfers.
 */
#include "storage/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

static int px_open(void *ctx, const char *path, int flags)
{
    (void)ctx;
    int f = O_CLOEXEC;
    f |= (flags & ST_FS_RDWR) ? O_RDWR : O_RDONLY;
    if (flags & ST_FS_CREAT)
        f |= O_CREAT;
    if (flags & ST_FS_EXCL)
        f |= O_EXCL;
    if (flags & ST_FS_TRUNC)
        f |= O_TRUNC;
    int fd = open(path, f, 0644);
    return fd < 0 ? -errno : fd;
}

static int px_close(void *ctx, int fd)
{
    (void)ctx;
    return close(fd) < 0 ? -errno : 0;
}

static ssize_t px_pread(void *ctx, int fd, void *buf, size_t n, int64_t off)
{
    (void)ctx;
    ssize_t r;
    do
        r = pread(fd, buf, n, (off_t)off);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
}

static ssize_t px_pwrite(void *ctx, int fd, const void *buf, size_t n, int64_t off)
{
    (void)ctx;
    ssize_t r;
    do
        r = pwrite(fd, buf, n, (off_t)off);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
}

static int px_fdatasync(void *ctx, int fd)
{
    (void)ctx;
    return fdatasync(fd) < 0 ? -errno : 0;
}

static int px_ftruncate(void *ctx, int fd, int64_t len)
{
    (void)ctx;
    return ftruncate(fd, (off_t)len) < 0 ? -errno : 0;
}

static int px_fsize(void *ctx, int fd, int64_t *size)
{
    (void)ctx;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    *size = st.st_size;
    return 0;
}

static int px_rename(void *ctx, const char *from, const char *to)
{
    (void)ctx;
    return rename(from, to) < 0 ? -errno : 0;
}

static int px_unlink(void *ctx, const char *path)
{
    (void)ctx;
    return unlink(path) < 0 ? -errno : 0;
}

static int px_mkdir(void *ctx, const char *path)
{
    (void)ctx;
    return mkdir(path, 0755) < 0 ? -errno : 0;
}

static int px_rmdir(void *ctx, const char *path)
{
    (void)ctx;
    return rmdir(path) < 0 ? -errno : 0;
}

static int px_listdir(void *ctx, const char *path,
                      int (*cb)(void *arg, const char *name, int is_dir), void *arg)
{
    (void)ctx;
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        int is_dir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN) {
            struct stat st;
            if (fstatat(dirfd(d), e->d_name, &st, 0) == 0)
                is_dir = S_ISDIR(st.st_mode);
        }
        rc = cb(arg, e->d_name, is_dir);
        if (rc != 0)
            break;
    }
    closedir(d);
    return rc;
}

static ssize_t px_pwrite2(void *ctx, int fd, const void *a, size_t na, const void *b, size_t nb,
                          int64_t off)
{
    (void)ctx;
    struct iovec iov[2] = {{(void *)(uintptr_t)a, na}, {(void *)(uintptr_t)b, nb}};
    ssize_t r;
    do
        r = pwritev(fd, iov, 2, (off_t)off);
    while (r < 0 && errno == EINTR);
    return r < 0 ? -errno : r;
}

static int px_fsync_dir(void *ctx, const char *path)
{
    (void)ctx;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

static int px_syncfs(void *ctx, const char *path)
{
    (void)ctx;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* Linux reports writeback errors of the file system here since 5.8 */
    int rc = syncfs(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

static const st_fs_ops_t px_ops = {
    .open = px_open,
    .close = px_close,
    .pread = px_pread,
    .pwrite = px_pwrite,
    .pwrite2 = px_pwrite2,
    .fdatasync = px_fdatasync,
    .ftruncate = px_ftruncate,
    .fsize = px_fsize,
    .rename = px_rename,
    .unlink = px_unlink,
    .mkdir = px_mkdir,
    .rmdir = px_rmdir,
    .listdir = px_listdir,
    .fsync_dir = px_fsync_dir,
    .syncfs = px_syncfs,
};

st_fs_t st_fs_posix(void)
{
    st_fs_t fs = {&px_ops, NULL};
    return fs;
}

ssize_t st_fs_pread_full(const st_fs_t *fs, int fd, void *buf, size_t n, int64_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r =
            fs->ops->pread(fs->ctx, fd, (uint8_t *)buf + done, n - done, off + (int64_t)done);
        if (r < 0)
            return r;
        if (r == 0)
            break;
        done += (size_t)r;
    }
    return (ssize_t)done;
}

int st_fs_pwrite_full(const st_fs_t *fs, int fd, const void *buf, size_t n, int64_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = fs->ops->pwrite(fs->ctx, fd, (const uint8_t *)buf + done, n - done,
                                    off + (int64_t)done);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return -EIO;
        done += (size_t)r;
    }
    return 0;
}

int st_fs_pwrite2_full(const st_fs_t *fs, int fd, const void *a, size_t na, const void *b,
                       size_t nb, int64_t off)
{
    size_t done = 0;
    if (fs->ops->pwrite2) {
        ssize_t r = fs->ops->pwrite2(fs->ctx, fd, a, na, b, nb, off);
        if (r < 0)
            return (int)r;
        done = (size_t)r; /* a short write goes on below, one buffer at a time */
    }
    if (done < na) {
        int rc =
            st_fs_pwrite_full(fs, fd, (const uint8_t *)a + done, na - done, off + (int64_t)done);
        if (rc < 0)
            return rc;
        done = na;
    }
    if (done < na + nb)
        return st_fs_pwrite_full(fs, fd, (const uint8_t *)b + (done - na), na + nb - done,
                                 off + (int64_t)done);
    return 0;
}

int st_fs_read_file(const st_fs_t *fs, const char *path, size_t max, uint8_t **data, size_t *len)
{
    int fd = fs->ops->open(fs->ctx, path, ST_FS_RDONLY);
    if (fd < 0)
        return fd;
    int64_t size;
    int rc = fs->ops->fsize(fs->ctx, fd, &size);
    if (rc == 0 && (size < 0 || (uint64_t)size > max))
        rc = -EFBIG;
    uint8_t *buf = NULL;
    if (rc == 0) {
        buf = malloc((size_t)size + 1);
        if (!buf)
            rc = -ENOMEM;
    }
    if (rc == 0) {
        ssize_t r = st_fs_pread_full(fs, fd, buf, (size_t)size, 0);
        if (r < 0)
            rc = (int)r;
        else
            *len = (size_t)r;
    }
    fs->ops->close(fs->ctx, fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[*len] = 0;
    *data = buf;
    return 0;
}

int st_fs_write_file_atomic(const st_fs_t *fs, const char *dir, const char *name, const void *data,
                            size_t len)
{
    char tmp[4096], dst[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name) >= sizeof tmp ||
        (size_t)snprintf(dst, sizeof dst, "%s/%s", dir, name) >= sizeof dst)
        return -ENAMETOOLONG;
    int fd = fs->ops->open(fs->ctx, tmp, ST_FS_RDWR | ST_FS_CREAT | ST_FS_TRUNC);
    if (fd < 0)
        return fd;
    int rc = st_fs_pwrite_full(fs, fd, data, len, 0);
    if (rc == 0)
        rc = fs->ops->fdatasync(fs->ctx, fd);
    int crc = fs->ops->close(fs->ctx, fd);
    if (rc == 0)
        rc = crc;
    if (rc == 0)
        rc = fs->ops->rename(fs->ctx, tmp, dst);
    if (rc == 0)
        rc = fs->ops->fsync_dir(fs->ctx, dir);
    if (rc < 0)
        fs->ops->unlink(fs->ctx, tmp);
    return rc;
}

bool st_fs_syncfs_durable(const char *path)
{
    struct statfs st;
    if (statfs(path, &st) < 0)
        return false;
    switch ((unsigned long)st.f_type) {
    case 0xEF53UL:     /* ext2/3/4 */
    case 0x58465342UL: /* xfs */
    case 0x9123683EUL: /* btrfs */
    case 0xF2F52010UL: /* f2fs */
    case 0x01021994UL: /* tmpfs */
        return true;
    default:
        return false;
    }
}

int st_fs_sync_parent(st_fs_t *fs, const char *path)
{
    char p[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof p)
        return -ENAMETOOLONG;
    memcpy(p, path, n + 1);
    char *slash = strrchr(p, '/');
    if (!slash)
        return fs->ops->fsync_dir(fs->ctx, ".");
    if (slash == p)
        slash[1] = 0;
    else
        *slash = 0;
    return fs->ops->fsync_dir(fs->ctx, p);
}
