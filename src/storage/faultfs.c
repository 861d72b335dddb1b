/*
 * faultfs.c — in-memory file system with fault injection (see faultfs.h).
 *
 * Invariants:
 *   1. A name maps to at most one inode; an inode with no name lives while a descriptor is open.
 *   2. An inode's durable image changes only in fdatasync (and st_faultfs_put).
 *   3. Descriptor numbers grow and are never reused; a descriptor from before a crash is dead.
 */
#include "storage/faultfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct ff_inode {
    uint8_t *data; /* what reads see */
    size_t len, cap;
    uint8_t *dur; /* durable image */
    size_t dur_len;
    int refs; /* names + open descriptors */
} ff_inode_t;

typedef struct ff_name {
    char *path;
    ff_inode_t *ino; /* NULL for a directory */
} ff_name_t;

typedef struct ff_fd {
    ff_inode_t *ino; /* NULL once closed or dead */
    int writable;
} ff_fd_t;

typedef struct ff_plan {
    int err, skip, count;
} ff_plan_t;

struct st_faultfs {
    ff_name_t *names;
    size_t nnames, capnames;
    ff_fd_t *fds;
    size_t nfds, capfds;
    ff_plan_t plan[ST_FAULT__COUNT];
    uint64_t calls[ST_FAULT__COUNT];
    int64_t capacity;
    bool short_writes;
    bool crashed;
    uint64_t rng;
};

static uint64_t ff_rand(st_faultfs_t *f)
{
    /* xorshift64* */
    f->rng ^= f->rng >> 12;
    f->rng ^= f->rng << 25;
    f->rng ^= f->rng >> 27;
    return f->rng * 0x2545F4914F6CDD1DULL;
}

/* Counts the call and returns the injected error, if any (EIO for everything after a crash). */
static int ff_fault(st_faultfs_t *f, st_fault_op_t op)
{
    f->calls[op]++;
    if (f->crashed)
        return -EIO;
    ff_plan_t *p = &f->plan[op];
    if (p->count == 0)
        return 0;
    if (p->skip > 0) {
        p->skip--;
        return 0;
    }
    if (p->count > 0)
        p->count--;
    return -p->err;
}

static void ino_unref(ff_inode_t *ino)
{
    if (--ino->refs == 0) {
        free(ino->data);
        free(ino->dur);
        free(ino);
    }
}

static ff_name_t *ff_lookup(st_faultfs_t *f, const char *path)
{
    for (size_t i = 0; i < f->nnames; i++)
        if (strcmp(f->names[i].path, path) == 0)
            return &f->names[i];
    return NULL;
}

/* The parent directory of path exists ("" and "/" parents always do). */
static bool ff_parent_ok(st_faultfs_t *f, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return true;
    size_t n = (size_t)(slash - path);
    for (size_t i = 0; i < f->nnames; i++)
        if (!f->names[i].ino && strlen(f->names[i].path) == n &&
            memcmp(f->names[i].path, path, n) == 0)
            return true;
    return false;
}

static int ff_add_name(st_faultfs_t *f, const char *path, ff_inode_t *ino)
{
    if (f->nnames == f->capnames) {
        size_t cap = f->capnames ? f->capnames * 2 : 32;
        ff_name_t *n = realloc(f->names, cap * sizeof *n);
        if (!n)
            return -ENOMEM;
        f->names = n;
        f->capnames = cap;
    }
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    f->names[f->nnames].path = p;
    f->names[f->nnames].ino = ino;
    f->nnames++;
    if (ino)
        ino->refs++;
    return 0;
}

static void ff_del_name(st_faultfs_t *f, ff_name_t *n)
{
    free(n->path);
    if (n->ino)
        ino_unref(n->ino);
    *n = f->names[--f->nnames];
}

static ff_inode_t *ff_get_fd(st_faultfs_t *f, int fd)
{
    if (fd < 0 || (size_t)fd >= f->nfds)
        return NULL;
    return f->fds[fd].ino;
}

static int64_t ff_used(st_faultfs_t *f)
{
    /* Inodes reachable by a name or a descriptor; count each once by walking names and the
     * unnamed open ones. Tests hold few files, so a quadratic walk is fine. */
    int64_t used = 0;
    for (size_t i = 0; i < f->nnames; i++)
        if (f->names[i].ino)
            used += (int64_t)f->names[i].ino->len;
    return used;
}

static int ff_reserve(ff_inode_t *ino, size_t n)
{
    if (n <= ino->cap)
        return 0;
    size_t cap = ino->cap ? ino->cap : 4096;
    while (cap < n)
        cap *= 2;
    uint8_t *d = realloc(ino->data, cap);
    if (!d)
        return -ENOMEM;
    ino->data = d;
    ino->cap = cap;
    return 0;
}

static int ff_open(void *ctx, const char *path, int flags)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_OPEN);
    if (rc < 0)
        return rc;
    ff_name_t *n = ff_lookup(f, path);
    if (n && !n->ino)
        return -EISDIR;
    if (n && (flags & ST_FS_CREAT) && (flags & ST_FS_EXCL))
        return -EEXIST;
    if (!n) {
        if (!(flags & ST_FS_CREAT))
            return -ENOENT;
        if (!ff_parent_ok(f, path))
            return -ENOENT;
        ff_inode_t *ino = calloc(1, sizeof *ino);
        if (!ino)
            return -ENOMEM;
        if (ff_add_name(f, path, ino) < 0) {
            free(ino);
            return -ENOMEM;
        }
        n = &f->names[f->nnames - 1];
    }
    if ((flags & ST_FS_TRUNC) && (flags & ST_FS_RDWR))
        n->ino->len = 0;
    if (f->nfds == f->capfds) {
        size_t cap = f->capfds ? f->capfds * 2 : 64;
        ff_fd_t *d = realloc(f->fds, cap * sizeof *d);
        if (!d)
            return -ENOMEM;
        f->fds = d;
        f->capfds = cap;
    }
    f->fds[f->nfds].ino = n->ino;
    f->fds[f->nfds].writable = (flags & ST_FS_RDWR) != 0;
    n->ino->refs++;
    return (int)f->nfds++;
}

static int ff_close(void *ctx, int fd)
{
    st_faultfs_t *f = ctx;
    ff_inode_t *ino = ff_get_fd(f, fd);
    if (!ino)
        return -EBADF;
    f->fds[fd].ino = NULL;
    ino_unref(ino);
    return 0;
}

static ssize_t ff_pread(void *ctx, int fd, void *buf, size_t n, int64_t off)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_PREAD);
    if (rc < 0)
        return rc;
    ff_inode_t *ino = ff_get_fd(f, fd);
    if (!ino)
        return -EBADF;
    if (off < 0)
        return -EINVAL;
    if ((uint64_t)off >= ino->len)
        return 0;
    size_t avail = ino->len - (size_t)off;
    if (n > avail)
        n = avail;
    memcpy(buf, ino->data + off, n);
    return (ssize_t)n;
}

static ssize_t ff_pwrite(void *ctx, int fd, const void *buf, size_t n, int64_t off)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_PWRITE);
    if (rc < 0)
        return rc;
    ff_inode_t *ino = ff_get_fd(f, fd);
    if (!ino || !f->fds[fd].writable)
        return -EBADF;
    if (off < 0)
        return -EINVAL;
    if (n == 0)
        return 0;
    if (f->short_writes && n > 1)
        n = 1 + (size_t)(ff_rand(f) % n);
    size_t end = (size_t)off + n;
    if (f->capacity >= 0 && end > ino->len) {
        int64_t room = f->capacity - ff_used(f);
        int64_t grow = (int64_t)(end - ino->len);
        if (grow > room) {
            /* Fill what fits; the next call finds no room at all. */
            int64_t fits = (int64_t)ino->len + (room > 0 ? room : 0) - off;
            if (fits <= 0)
                return -ENOSPC;
            n = (size_t)fits;
            end = (size_t)off + n;
        }
    }
    if (ff_reserve(ino, end) < 0)
        return -ENOMEM;
    if ((size_t)off > ino->len)
        memset(ino->data + ino->len, 0, (size_t)off - ino->len);
    memcpy(ino->data + off, buf, n);
    if (end > ino->len)
        ino->len = end;
    return (ssize_t)n;
}

static int ff_fdatasync(void *ctx, int fd)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_FDATASYNC);
    if (rc < 0)
        return rc;
    ff_inode_t *ino = ff_get_fd(f, fd);
    if (!ino)
        return -EBADF;
    uint8_t *d = malloc(ino->len ? ino->len : 1);
    if (!d)
        return -ENOMEM;
    if (ino->len)
        memcpy(d, ino->data, ino->len);
    free(ino->dur);
    ino->dur = d;
    ino->dur_len = ino->len;
    return 0;
}

static int ff_ftruncate(void *ctx, int fd, int64_t len)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_FTRUNCATE);
    if (rc < 0)
        return rc;
    ff_inode_t *ino = ff_get_fd(f, fd);
    if (!ino || !f->fds[fd].writable)
        return -EBADF;
    if (len < 0)
        return -EINVAL;
    if ((size_t)len > ino->len) {
        if (ff_reserve(ino, (size_t)len) < 0)
            return -ENOMEM;
        memset(ino->data + ino->len, 0, (size_t)len - ino->len);
    }
    ino->len = (size_t)len;
    return 0;
}

static int ff_fsize(void *ctx, int fd, int64_t *size)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_FSIZE);
    if (rc < 0)
        return rc;
    ff_inode_t *ino = ff_get_fd(f, fd);
    if (!ino)
        return -EBADF;
    *size = (int64_t)ino->len;
    return 0;
}

static int ff_rename(void *ctx, const char *from, const char *to)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_RENAME);
    if (rc < 0)
        return rc;
    ff_name_t *a = ff_lookup(f, from);
    if (!a)
        return -ENOENT;
    if (!a->ino)
        return -EISDIR; /* directories are not renamed by storage */
    if (!ff_parent_ok(f, to))
        return -ENOENT;
    ff_inode_t *ino = a->ino;
    ino->refs++;
    ff_del_name(f, a);
    ff_name_t *b = ff_lookup(f, to);
    if (b)
        ff_del_name(f, b);
    rc = ff_add_name(f, to, ino);
    ino_unref(ino);
    return rc;
}

static int ff_unlink(void *ctx, const char *path)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_UNLINK);
    if (rc < 0)
        return rc;
    ff_name_t *n = ff_lookup(f, path);
    if (!n)
        return -ENOENT;
    if (!n->ino)
        return -EISDIR;
    ff_del_name(f, n);
    return 0;
}

static int ff_mkdir(void *ctx, const char *path)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_MKDIR);
    if (rc < 0)
        return rc;
    if (ff_lookup(f, path))
        return -EEXIST;
    if (!ff_parent_ok(f, path))
        return -ENOENT;
    return ff_add_name(f, path, NULL);
}

/* The entry name of path if path lies directly inside dir, else NULL. */
static const char *ff_child(const char *dir, const char *path)
{
    size_t n = strlen(dir);
    if (strncmp(dir, path, n) != 0 || path[n] != '/')
        return NULL;
    const char *name = path + n + 1;
    return strchr(name, '/') ? NULL : name;
}

static int ff_rmdir(void *ctx, const char *path)
{
    st_faultfs_t *f = ctx;
    ff_name_t *n = ff_lookup(f, path);
    if (f->crashed)
        return -EIO;
    if (!n)
        return -ENOENT;
    if (n->ino)
        return -ENOTDIR;
    for (size_t i = 0; i < f->nnames; i++)
        if (ff_child(path, f->names[i].path))
            return -ENOTEMPTY;
    ff_del_name(f, ff_lookup(f, path));
    return 0;
}

static int ff_listdir(void *ctx, const char *path,
                      int (*cb)(void *arg, const char *name, int is_dir), void *arg)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_LISTDIR);
    if (rc < 0)
        return rc;
    ff_name_t *d = ff_lookup(f, path);
    if (!d)
        return -ENOENT;
    if (d->ino)
        return -ENOTDIR;
    /* Snapshot the names first: the callback may create or remove entries. */
    size_t cnt = 0;
    char **list = malloc((f->nnames + 1) * sizeof *list);
    int *isdir = malloc((f->nnames + 1) * sizeof *isdir);
    if (!list || !isdir) {
        free(list);
        free(isdir);
        return -ENOMEM;
    }
    for (size_t i = 0; i < f->nnames; i++) {
        const char *c = ff_child(path, f->names[i].path);
        if (c) {
            list[cnt] = strdup(c);
            isdir[cnt] = f->names[i].ino == NULL;
            if (list[cnt])
                cnt++;
        }
    }
    rc = 0;
    for (size_t i = 0; i < cnt; i++) {
        if (rc == 0)
            rc = cb(arg, list[i], isdir[i]);
        free(list[i]);
    }
    free(list);
    free(isdir);
    return rc;
}

static int ff_fsync_dir(void *ctx, const char *path)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_FSYNC_DIR);
    if (rc < 0)
        return rc;
    ff_name_t *d = ff_lookup(f, path);
    if (!d)
        return -ENOENT;
    return d->ino ? -ENOTDIR : 0;
}

static const st_fs_ops_t ff_ops = {
    .open = ff_open,
    .close = ff_close,
    .pread = ff_pread,
    .pwrite = ff_pwrite,
    .fdatasync = ff_fdatasync,
    .ftruncate = ff_ftruncate,
    .fsize = ff_fsize,
    .rename = ff_rename,
    .unlink = ff_unlink,
    .mkdir = ff_mkdir,
    .rmdir = ff_rmdir,
    .listdir = ff_listdir,
    .fsync_dir = ff_fsync_dir,
};

st_faultfs_t *st_faultfs_create(uint64_t seed)
{
    st_faultfs_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->capacity = -1;
    f->rng = seed * 0x9E3779B97F4A7C15ULL + 1;
    return f;
}

void st_faultfs_destroy(st_faultfs_t *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->nfds; i++)
        if (f->fds[i].ino)
            ino_unref(f->fds[i].ino);
    while (f->nnames)
        ff_del_name(f, &f->names[f->nnames - 1]);
    free(f->names);
    free(f->fds);
    free(f);
}

st_fs_t st_faultfs_fs(st_faultfs_t *f)
{
    st_fs_t fs = {&ff_ops, f};
    return fs;
}

void st_faultfs_fail(st_faultfs_t *f, st_fault_op_t op, int err, int skip, int count)
{
    f->plan[op].err = err;
    f->plan[op].skip = skip;
    f->plan[op].count = count;
}

void st_faultfs_clear(st_faultfs_t *f)
{
    memset(f->plan, 0, sizeof f->plan);
    f->capacity = -1;
    f->short_writes = false;
}

void st_faultfs_set_capacity(st_faultfs_t *f, int64_t bytes)
{
    f->capacity = bytes;
}

void st_faultfs_set_short_writes(st_faultfs_t *f, bool on)
{
    f->short_writes = on;
}

static void ff_crash_inode(st_faultfs_t *f, ff_inode_t *ino, bool torn)
{
    size_t keep = ino->dur_len;
    if (torn && ino->len > ino->dur_len &&
        (ino->dur_len == 0 || memcmp(ino->data, ino->dur, ino->dur_len) == 0))
        keep = ino->dur_len + (size_t)(ff_rand(f) % (ino->len - ino->dur_len + 1));
    else if (ino->dur_len)
        memcpy(ino->data, ino->dur, ino->dur_len); /* cap >= dur_len: data was that long */
    ino->len = keep;
}

void st_faultfs_crash(st_faultfs_t *f, bool torn)
{
    for (size_t i = 0; i < f->nnames; i++)
        if (f->names[i].ino)
            ff_crash_inode(f, f->names[i].ino, torn);
    for (size_t i = 0; i < f->nfds; i++) {
        if (f->fds[i].ino) {
            ino_unref(f->fds[i].ino);
            f->fds[i].ino = NULL;
        }
    }
    f->crashed = true;
}

void st_faultfs_restart(st_faultfs_t *f)
{
    f->crashed = false;
}

int st_faultfs_get(st_faultfs_t *f, const char *path, uint8_t **data, size_t *len)
{
    ff_name_t *n = ff_lookup(f, path);
    if (!n)
        return -ENOENT;
    if (!n->ino)
        return -EISDIR;
    *data = malloc(n->ino->len ? n->ino->len : 1);
    if (!*data)
        return -ENOMEM;
    if (n->ino->len)
        memcpy(*data, n->ino->data, n->ino->len);
    *len = n->ino->len;
    return 0;
}

int st_faultfs_put(st_faultfs_t *f, const char *path, const void *data, size_t len)
{
    ff_name_t *n = ff_lookup(f, path);
    if (n && !n->ino)
        return -EISDIR;
    if (!n) {
        if (!ff_parent_ok(f, path))
            return -ENOENT;
        ff_inode_t *ino = calloc(1, sizeof *ino);
        if (!ino || ff_add_name(f, path, ino) < 0) {
            free(ino);
            return -ENOMEM;
        }
        n = &f->names[f->nnames - 1];
    }
    ff_inode_t *ino = n->ino;
    if (ff_reserve(ino, len) < 0)
        return -ENOMEM;
    if (len)
        memcpy(ino->data, data, len);
    ino->len = len;
    uint8_t *d = malloc(len ? len : 1);
    if (!d)
        return -ENOMEM;
    if (len)
        memcpy(d, data, len);
    free(ino->dur);
    ino->dur = d;
    ino->dur_len = len;
    return 0;
}

bool st_faultfs_exists(st_faultfs_t *f, const char *path)
{
    return ff_lookup(f, path) != NULL;
}

int st_faultfs_open_fds(st_faultfs_t *f)
{
    int n = 0;
    for (size_t i = 0; i < f->nfds; i++)
        n += f->fds[i].ino != NULL;
    return n;
}

uint64_t st_faultfs_calls(st_faultfs_t *f, st_fault_op_t op)
{
    return f->calls[op];
}

int64_t st_faultfs_used(st_faultfs_t *f)
{
    return ff_used(f);
}
