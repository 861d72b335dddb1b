/*
 * faultfs.c — in-memory file system with fault injection (see faultfs.h).
 *
 * Invariants:
 *   1. A name maps to at most one inode; an inode with no name lives while a descriptor is open.
 *   2. An inode's durable image changes only in fdatasync, syncfs (and st_faultfs_put).
 *   3. Descriptor numbers grow and are never reused; a descriptor from before a crash is dead.
 *   4. dnames is what a crash leaves of the names: an entry of directory d changes there only
 *      in fsync_dir(d) (entries directly under the root, which is not modelled, and directory
 *      renames change there at once), in syncfs (every entry), in st_faultfs_put, and in a
 *      crash.
 */
#include "storage/faultfs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ff_inode {
    uint8_t *data; /* what reads see */
    size_t len, cap;
    uint8_t *dur; /* durable image */
    size_t dur_len;
    int refs;          /* names, durable names and open descriptors */
    uint64_t crash_no; /* the crash that last rolled it back */
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
    ff_name_t *dnames; /* the durable names (invariant 4) */
    size_t ndnames, capdnames;
    uint64_t crashes;
    ff_fd_t *fds;
    size_t nfds, capfds;
    ff_plan_t plan[ST_FAULT__COUNT];
    uint64_t calls[ST_FAULT__COUNT];
    int64_t capacity;
    bool short_writes;
    bool crashed;
    int64_t crash_in; /* calls left before a crash (st_faultfs_crash_after), -1 */
    st_crash_mode_t crash_in_mode;
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
    if (f->crash_in == 0) {
        f->crash_in = -1;
        st_faultfs_crash_mode(f, f->crash_in_mode);
    } else if (f->crash_in > 0) {
        f->crash_in--;
    }
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

/* ---- durable names (invariant 4) ---- */

static ff_name_t *ff_dlookup(st_faultfs_t *f, const char *path)
{
    for (size_t i = 0; i < f->ndnames; i++)
        if (strcmp(f->dnames[i].path, path) == 0)
            return &f->dnames[i];
    return NULL;
}

static void ff_ddel_at(st_faultfs_t *f, ff_name_t *n)
{
    free(n->path);
    if (n->ino)
        ino_unref(n->ino);
    *n = f->dnames[--f->ndnames];
}

static void ff_ddel(st_faultfs_t *f, const char *path)
{
    ff_name_t *n = ff_dlookup(f, path);
    if (n)
        ff_ddel_at(f, n);
}

/* Makes path -> ino (NULL: a directory) durable. */
static int ff_dset(st_faultfs_t *f, const char *path, ff_inode_t *ino)
{
    ff_ddel(f, path);
    if (f->ndnames == f->capdnames) {
        size_t cap = f->capdnames ? f->capdnames * 2 : 32;
        ff_name_t *n = realloc(f->dnames, cap * sizeof *n);
        if (!n)
            return -ENOMEM;
        f->dnames = n;
        f->capdnames = cap;
    }
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    f->dnames[f->ndnames].path = p;
    f->dnames[f->ndnames].ino = ino;
    f->ndnames++;
    if (ino)
        ino->refs++;
    return 0;
}

/* Entries directly under the root: durable at once (the root itself is not modelled). */
static bool ff_at_root(const char *path)
{
    const char *slash = strrchr(path, '/');
    return !slash || slash == path;
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
        if (ff_at_root(path))
            ff_dset(f, path, ino);
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

/* What the file holds now becomes what a crash leaves of it. */
static int ino_make_durable(ff_inode_t *ino)
{
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

static int ff_fdatasync(void *ctx, int fd)
{
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_FDATASYNC);
    if (rc < 0)
        return rc;
    ff_inode_t *ino = ff_get_fd(f, fd);
    if (!ino)
        return -EBADF;
    return ino_make_durable(ino);
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

/* Rewrites the prefix `from` of path into `to`, in place (a malloc'd copy). */
static int ff_reprefix(char **path, const char *from, const char *to)
{
    size_t fl = strlen(from);
    if (strncmp(*path, from, fl) != 0 || ((*path)[fl] != 0 && (*path)[fl] != '/'))
        return 0;
    size_t tl = strlen(to), rest = strlen(*path + fl);
    char *p = malloc(tl + rest + 1);
    if (!p)
        return -ENOMEM;
    memcpy(p, to, tl);
    memcpy(p + tl, *path + fl, rest + 1);
    free(*path);
    *path = p;
    return 0;
}

/* Renames a directory and everything under it. Modelled as durable at once: storage syncs the
 * parent right after each one it makes (st_storage_set_aside). */
static int ff_rename_dir(st_faultfs_t *f, const char *from, const char *to)
{
    if (ff_lookup(f, to))
        return -EEXIST;
    char *src = strdup(from), *dst = strdup(to);
    int rc = src && dst ? 0 : -ENOMEM;
    for (size_t i = 0; i < f->nnames && rc == 0; i++)
        rc = ff_reprefix(&f->names[i].path, src, dst);
    for (size_t i = 0; i < f->ndnames && rc == 0; i++)
        rc = ff_reprefix(&f->dnames[i].path, src, dst);
    free(src);
    free(dst);
    return rc;
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
    if (!ff_parent_ok(f, to))
        return -ENOENT;
    if (!a->ino)
        return ff_rename_dir(f, from, to);
    ff_inode_t *ino = a->ino;
    ino->refs++;
    ff_del_name(f, a);
    ff_name_t *b = ff_lookup(f, to);
    if (b)
        ff_del_name(f, b);
    rc = ff_add_name(f, to, ino);
    if (rc == 0 && ff_at_root(to)) {
        ff_ddel(f, from);
        ff_dset(f, to, ino);
    }
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
    if (ff_at_root(path))
        ff_ddel(f, path);
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
    rc = ff_add_name(f, path, NULL);
    if (rc == 0 && ff_at_root(path))
        rc = ff_dset(f, path, NULL);
    return rc;
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
    if (ff_at_root(path))
        ff_ddel(f, path);
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
    if (d->ino)
        return -ENOTDIR;
    /* The directory's entries on disk become what they are now. */
    for (size_t i = 0; i < f->ndnames;) {
        if (ff_child(path, f->dnames[i].path))
            ff_ddel_at(f, &f->dnames[i]);
        else
            i++;
    }
    for (size_t i = 0; i < f->nnames; i++)
        if (ff_child(path, f->names[i].path) &&
            (rc = ff_dset(f, f->names[i].path, f->names[i].ino)) < 0)
            return rc;
    return 0;
}

/* Everything becomes durable: every named file's contents, every name (syncfs(2)). */
static int ff_syncfs(void *ctx, const char *path)
{
    (void)path;
    st_faultfs_t *f = ctx;
    int rc = ff_fault(f, ST_FAULT_SYNCFS);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < f->nnames; i++) {
        ff_inode_t *ino = f->names[i].ino;
        if (!ino)
            continue;
        if ((rc = ino_make_durable(ino)) < 0)
            return rc;
    }
    while (f->ndnames)
        ff_ddel_at(f, &f->dnames[f->ndnames - 1]);
    for (size_t i = 0; i < f->nnames; i++)
        if ((rc = ff_dset(f, f->names[i].path, f->names[i].ino)) < 0)
            return rc;
    return 0;
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
    .syncfs = ff_syncfs,
};

st_faultfs_t *st_faultfs_create(uint64_t seed)
{
    st_faultfs_t *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->capacity = -1;
    f->crash_in = -1;
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
    while (f->ndnames)
        ff_ddel_at(f, &f->dnames[f->ndnames - 1]);
    free(f->names);
    free(f->dnames);
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

#define FF_PAGE 4096

/* What a crash leaves of one file's contents (st_crash_mode_t). */
static void ff_crash_inode(st_faultfs_t *f, ff_inode_t *ino, st_crash_mode_t mode)
{
    size_t keep = ino->dur_len;
    bool grew_only = ino->len > ino->dur_len &&
                     (ino->dur_len == 0 || memcmp(ino->data, ino->dur, ino->dur_len) == 0);
    if (mode == ST_CRASH_TORN && grew_only) {
        keep = ino->dur_len + (size_t)(ff_rand(f) % (ino->len - ino->dur_len + 1));
    } else if (mode == ST_CRASH_ZERO_TAIL && grew_only) {
        /* The size reached the disk, the new blocks did not. */
        keep = ino->dur_len + (size_t)(ff_rand(f) % (ino->len - ino->dur_len + 1));
        memset(ino->data + ino->dur_len, 0, keep - ino->dur_len);
    } else if (mode == ST_CRASH_PAGES && ino->len != ino->dur_len) {
        /* Any size between the two, and each page old or new, in no order. */
        size_t lo = ino->len < ino->dur_len ? ino->len : ino->dur_len;
        size_t hi = ino->len < ino->dur_len ? ino->dur_len : ino->len;
        keep = lo + (size_t)(ff_rand(f) % (hi - lo + 1));
        if (ff_reserve(ino, keep) < 0)
            keep = ino->dur_len;
        for (size_t pg = 0; pg < keep; pg += FF_PAGE) {
            size_t end = pg + FF_PAGE < keep ? pg + FF_PAGE : keep;
            bool old = ff_rand(f) & 1;
            for (size_t i = pg; i < end; i++) {
                if (old)
                    ino->data[i] = i < ino->dur_len ? ino->dur[i] : 0;
                else if (i >= ino->len)
                    ino->data[i] = 0;
            }
        }
    } else if (mode == ST_CRASH_PAGES) {
        for (size_t pg = 0; pg < ino->dur_len; pg += FF_PAGE) {
            size_t n = pg + FF_PAGE < ino->dur_len ? FF_PAGE : ino->dur_len - pg;
            if (ff_rand(f) & 1)
                memcpy(ino->data + pg, ino->dur + pg, n);
        }
    } else if (ino->dur_len) {
        memcpy(ino->data, ino->dur, ino->dur_len); /* cap >= dur_len: data was that long */
    }
    ino->len = keep;
    /* What the crash left is what the disk holds now. */
    uint8_t *d = malloc(keep ? keep : 1);
    if (d) {
        if (keep)
            memcpy(d, ino->data, keep);
        free(ino->dur);
        ino->dur = d;
        ino->dur_len = keep;
    }
}

void st_faultfs_crash_mode(st_faultfs_t *f, st_crash_mode_t mode)
{
    /* Names: only the durable ones remain, and only where their directory remains. */
    while (f->nnames)
        ff_del_name(f, &f->names[f->nnames - 1]);
    for (size_t i = 0; i < f->ndnames; i++)
        ff_add_name(f, f->dnames[i].path, f->dnames[i].ino);
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < f->nnames;) {
            if (ff_parent_ok(f, f->names[i].path)) {
                i++;
                continue;
            }
            ff_ddel(f, f->names[i].path);
            ff_del_name(f, &f->names[i]);
            again = true;
        }
    }
    f->crashes++;
    for (size_t i = 0; i < f->nnames; i++) {
        ff_inode_t *ino = f->names[i].ino;
        if (ino && ino->crash_no != f->crashes) {
            ino->crash_no = f->crashes;
            ff_crash_inode(f, ino, mode);
        }
    }
    for (size_t i = 0; i < f->nfds; i++) {
        if (f->fds[i].ino) {
            ino_unref(f->fds[i].ino);
            f->fds[i].ino = NULL;
        }
    }
    f->crashed = true;
}

void st_faultfs_crash_after(st_faultfs_t *f, int64_t calls, st_crash_mode_t mode)
{
    f->crash_in = calls;
    f->crash_in_mode = mode;
}

bool st_faultfs_crashed(const st_faultfs_t *f)
{
    return f->crashed;
}

void st_faultfs_crash(st_faultfs_t *f, bool torn)
{
    st_faultfs_crash_mode(f, torn ? ST_CRASH_TORN : ST_CRASH_DROP);
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
    /* The name and the directories above it are durable too. */
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    int rc = ff_dset(f, p, ino);
    for (char *slash = strrchr(p, '/'); rc == 0 && slash && slash != p; slash = strrchr(p, '/')) {
        *slash = 0;
        if (!ff_dlookup(f, p) && ff_lookup(f, p))
            rc = ff_dset(f, p, NULL);
    }
    return rc;
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
