/*
 * dropfs.c — a FUSE pass-through file system that forgets, on command, everything a power cut
 * would: what was written but never synced.
 *
 *     dropfs [--zero-tail] [--random SEED] [--trace] [--sync-writes PREFIX] BACKING MOUNTPOINT
 *            [fuse options]
 *
 * It serves BACKING at MOUNTPOINT (in the foreground, one request at a time) and keeps, beside
 * the real files, a record of what is not yet durable. Writing "cut" to the control file
 * MOUNTPOINT/.dropfs puts BACKING back to its durable state, as a machine losing power would
 * find it on reboot. Reading the control file reports counters (one "name value" per line),
 * the bytes a cut would drop now per file ("pending: BYTES PATH", PATH as the file was named
 * when first changed since its last sync) and what the last cut undid ("cut: ..." lines).
 * "cut SUFFIX" cuts only if a file named *SUFFIX holds unsynced bytes (else EAGAIN), so a test
 * can be sure the cut drops some of the data it cares about.
 *
 * The durability model (strict: what POSIX promises, not what ext4 happens to do):
 *
 *  1. File data. A file's bytes and size are durable as of its last fsync or fdatasync, through
 *     any descriptor. Before a write, truncate or fallocate changes bytes below the durable size,
 *     dropfs saves them (an undo record, newest first, per inode). A cut writes the saved bytes
 *     back, newest first, and truncates the file to its durable size. A sync drops the records.
 *  2. Directory entries. create, mkdir, rename, unlink and rmdir change one directory (rename:
 *     one or two). The change is durable once every directory it changed has been fsynced
 *     (fsyncdir) after it; until then it sits in a journal. A file's own fsync does not make its
 *     name durable. A cut undoes the journal newest first: a created file is unlinked, a made
 *     directory removed with all it holds, a rename moved back and the entry it replaced put
 *     back, an unlinked file or removed directory brought back. For that, unlink and rmdir (and
 *     rename onto an existing name) do not delete: they move the entry into BACKING/.dropfs-trash
 *     (hidden from the mount), which is emptied as the removals become durable.
 *  3. Everything else (modes, times) is durable at once; BACKING itself is never synced.
 *
 * Options, to lose less than everything: --zero-tail keeps each file's size and zero-fills the
 * unsynced bytes past its durable size instead of truncating (size metadata reached the disk,
 * data did not). --random SEED loses each unsynced 4 KiB page independently with probability
 * 1/2 (an overwritten page keeps its new bytes or gets its old ones back; a page past the
 * durable size keeps its bytes or reads zeros; the size is kept); directory entries are still
 * all undone.
 *
 * Writes that are durable when they complete: a write (or fallocate) through a descriptor
 * opened with O_SYNC or O_DSYNC, or to a file whose mount path starts with the --sync-writes
 * PREFIX, is synced as it is made. The prefix is for writers that ask for durability per write
 * (pwritev2 with RWF_DSYNC, as libraft's raft_uv does), which FUSE does not pass on.
 *
 * Journal entries hold O_PATH descriptors of their directories, and undo records a descriptor
 * of their file, so renames of files and directories after an operation do not confuse its
 * undo, and no inode number is reused while dropfs may still need it.
 *
 * After a cut the power is off: every operation but close, stat and the control file fails
 * with EIO, so nothing a writer still does reaches BACKING (a sync that was in flight at the
 * cut does not complete, as on a real machine). The kernel also keeps its own view of the
 * mount (page cache, attributes, names), which a cut does not touch. So use it as: writers
 * running; cut; kill them; wait until open_files reads 0; unmount; mount again (fresh caches,
 * power back); start them again.
 */
#define FUSE_USE_VERSION 31

#include <fuse.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define CTL_PATH   "/.dropfs"
#define TRASH_NAME ".dropfs-trash"
#define PAGE_SIZE  4096

/* Bytes of a file as they were before an unsynced change overwrote them. */
typedef struct undo {
    struct undo *next; /* the next older record */
    off_t off;
    size_t len;
    unsigned char data[];
} undo_t;

/* A file with changes since its last sync. */
typedef struct dirty {
    struct dirty *next;
    dev_t dev;
    ino_t ino;
    int fd;             /* O_RDWR on the inode, until it is synced or cut */
    off_t durable_size; /* its size at the last sync */
    undo_t *undo;       /* newest first */
    char *path;         /* its name when first changed, for reports */
} dirty_t;

typedef enum { OP_CREATE, OP_MKDIR, OP_RENAME, OP_UNLINK, OP_RMDIR } op_kind_t;

static const char *const op_names[] = {"create", "mkdir", "rename", "unlink", "rmdir"};

/*
 * A directory change not yet durable. Entry 0 is the name the operation made or removed (for a
 * rename, the destination); entry 1, for a rename only, the source.
 */
typedef struct dirop {
    struct dirop *prev, *next; /* the journal, oldest first */
    op_kind_t kind;
    int ndirs;      /* 1, or 2 for a rename */
    int dfd[2];     /* O_PATH descriptors of the directories */
    dev_t dev[2];   /* their identities, matched against fsyncdir */
    ino_t ino[2];   /* ... */
    bool synced[2]; /* fsynced since the operation */
    char *name[2];  /* the entry names in those directories */
    char *trash;    /* what the operation removed or replaced, by its name in the trash */
    char *what;     /* "rename /a -> /b", for reports */
} dirop_t;

static struct {
    int root;                /* O_PATH on BACKING */
    int trash;               /* O_PATH on BACKING/.dropfs-trash */
    bool zero_tail;          /* --zero-tail */
    bool random;             /* --random */
    unsigned seed;           /* ... its generator's state */
    bool dead;               /* cut: the power is off until the next mount */
    bool trace;              /* --trace: every change and sync on stderr */
    const char *sync_prefix; /* --sync-writes: writes to paths starting so are durable at once */
    uint64_t trash_seq;
    dirty_t *dirty;
    dirop_t *head, *tail;
    long open_files; /* open file and directory handles, the control file excluded */
    uint64_t syncs, dirsyncs, cuts, undo_errors;
    uint64_t dropped_bytes, dropped_files, undone_dirops; /* over every cut */
    uint64_t last_bytes, last_files, last_dirops;         /* the last cut */
    char *cutlog;                                         /* what the last cut did */
    size_t cutlog_len;
} g;

/* ---- helpers --------------------------------------------------------------------------- */

/* A mount path as a path relative to BACKING: "/" is ".". */
static const char *rel(const char *path)
{
    return path[1] ? path + 1 : ".";
}

/* True for the trash and everything in it: the mount does not show them. */
static bool hidden(const char *path)
{
    size_t n = strlen("/" TRASH_NAME);
    return strncmp(path, "/" TRASH_NAME, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* With --trace, one line on stderr per change and sync, to follow a lost byte back. */
__attribute__((format(printf, 1, 2))) static void trace(const char *fmt, ...)
{
    if (!g.trace)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("dropfs: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static bool is_ctl(const char *path)
{
    return path && strcmp(path, CTL_PATH) == 0;
}

/* After a cut the disk has no power: everything but the control file fails. */
static bool off_line(const char *path)
{
    return g.dead && !is_ctl(path);
}

/* Appends a line to the last cut's report, and to stderr. */
__attribute__((format(printf, 1, 2))) static void cut_note(const char *fmt, ...)
{
    char line[PATH_MAX + 128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = (int)sizeof line - 1;
    fprintf(stderr, "dropfs: cut: %s\n", line);
    char *p = realloc(g.cutlog, g.cutlog_len + (size_t)n + 7);
    if (!p)
        return;
    g.cutlog = p;
    g.cutlog_len += (size_t)sprintf(p + g.cutlog_len, "cut: %s\n", line);
}

/* Whether a cut loses this unsynced page: always, or by a coin under --random. */
static bool lose(void)
{
    return !g.random || (rand_r(&g.seed) & 1);
}

/* Opens the directory holding path's entry (O_PATH) and points *name at the entry's name. */
static int open_parent(const char *path, const char **name)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    size_t n = (size_t)(slash - path);
    if (n >= sizeof dir)
        return -ENAMETOOLONG;
    *name = slash + 1;
    if (n == 0) {
        strcpy(dir, ".");
    } else {
        memcpy(dir, path + 1, n - 1);
        dir[n - 1] = 0;
    }
    int fd = openat(g.root, dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* Opens the directory name in dir for reading: 0 and *d, or a negative errno. */
static int open_dir(int dir, const char *name, DIR **d)
{
    int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    *d = fdopendir(fd);
    if (!*d) {
        close(fd);
        return -ENOMEM;
    }
    return 0;
}

/* Removes name in dir and, for a directory, everything under it. */
static int rm_rf(int dir, const char *name)
{
    struct stat st;
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dir, name, 0) < 0 ? -errno : 0;
    DIR *d;
    int rc = open_dir(dir, name, &d);
    if (rc < 0)
        return rc;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            rm_rf(dirfd(d), e->d_name);
    closedir(d);
    return unlinkat(dir, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

/* Moves name in dir into the trash; its trash name goes to tname. */
static int to_trash(int dir, const char *name, char tname[32])
{
    snprintf(tname, 32, "t%" PRIu64, ++g.trash_seq);
    return renameat(dir, name, g.trash, tname) < 0 ? -errno : 0;
}

/* ---- file data: undo records ---------------------------------------------------------- */

/* The dirty record of the file open as fd, made on its first change since a sync. */
static dirty_t *dirty_get(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return NULL;
    for (dirty_t *d = g.dirty; d; d = d->next)
        if (d->dev == st.st_dev && d->ino == st.st_ino)
            return d;
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    dirty_t *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->fd = open(self, O_RDWR | O_CLOEXEC);
    if (d->fd < 0) {
        free(d);
        return NULL;
    }
    d->dev = st.st_dev;
    d->ino = st.st_ino;
    d->durable_size = st.st_size;
    d->path = strdup(path ? path : "(unlinked)");
    d->next = g.dirty;
    g.dirty = d;
    return d;
}

/* Saves the bytes of [off, off + len) that lie below the durable size, before they change.
 * Bytes at or past it need nothing: a cut truncates them away. */
static int dirty_save(dirty_t *d, off_t off, off_t len)
{
    struct stat st;
    if (fstat(d->fd, &st) < 0)
        return -errno;
    off_t end = off + len;
    if (end > d->durable_size)
        end = d->durable_size;
    if (end > st.st_size)
        end = st.st_size;
    if (off >= end)
        return 0;
    undo_t *u = malloc(sizeof *u + (size_t)(end - off));
    if (!u)
        return -ENOMEM;
    ssize_t n = pread(d->fd, u->data, (size_t)(end - off), off);
    if (n < 0) {
        free(u);
        return -errno;
    }
    u->off = off;
    u->len = (size_t)n;
    u->next = d->undo;
    d->undo = u;
    return 0;
}

static void dirty_free(dirty_t *d)
{
    while (d->undo) {
        undo_t *u = d->undo;
        d->undo = u->next;
        free(u);
    }
    close(d->fd);
    free(d->path);
    free(d);
}

/* Bytes a cut would drop from d now. */
static uint64_t dirty_pending(const dirty_t *d)
{
    struct stat st;
    uint64_t n = 0;
    if (fstat(d->fd, &st) == 0 && st.st_size > d->durable_size)
        n = (uint64_t)(st.st_size - d->durable_size);
    for (const undo_t *u = d->undo; u; u = u->next)
        n += u->len;
    return n;
}

/* Forgets the changes to the file open as fd: they are durable now. */
static void dirty_sync(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return;
    for (dirty_t **pp = &g.dirty; *pp; pp = &(*pp)->next) {
        dirty_t *d = *pp;
        if (d->dev == st.st_dev && d->ino == st.st_ino) {
            *pp = d->next;
            dirty_free(d);
            return;
        }
    }
}

/* Writes zeros over [off, end) of fd; returns the bytes written. */
static uint64_t zero_range(int fd, off_t off, off_t end)
{
    static const unsigned char zeros[PAGE_SIZE];
    uint64_t done = 0;
    while (off < end) {
        size_t n = (size_t)(end - off < PAGE_SIZE ? end - off : PAGE_SIZE);
        if (pwrite(fd, zeros, n, off) != (ssize_t)n)
            g.undo_errors++;
        off += (off_t)n;
        done += n;
    }
    return done;
}

/* Puts one file back as its last sync left it (or part of it, under --random). */
static void cut_file(dirty_t *d)
{
    struct stat st;
    if (fstat(d->fd, &st) < 0) {
        g.undo_errors++;
        return;
    }
    uint64_t restored = 0, tail = 0;
    for (const undo_t *u = d->undo; u; u = u->next) {
        for (size_t at = 0; at < u->len;) {
            off_t pos = u->off + (off_t)at;
            size_t n = PAGE_SIZE - (size_t)(pos % PAGE_SIZE);
            if (n > u->len - at)
                n = u->len - at;
            if (lose()) {
                if (pwrite(d->fd, u->data + at, n, pos) != (ssize_t)n)
                    g.undo_errors++;
                restored += n;
            }
            at += n;
        }
    }
    if (st.st_size > d->durable_size && (g.zero_tail || g.random)) {
        for (off_t pos = d->durable_size; pos < st.st_size;) {
            off_t end = (pos / PAGE_SIZE + 1) * PAGE_SIZE;
            if (end > st.st_size)
                end = st.st_size;
            if (lose())
                tail += zero_range(d->fd, pos, end);
            pos = end;
        }
    } else {
        if (st.st_size > d->durable_size)
            tail = (uint64_t)(st.st_size - d->durable_size);
        if (ftruncate(d->fd, d->durable_size) < 0)
            g.undo_errors++;
    }
    if (restored + tail == 0)
        return;
    cut_note("%s: size %jd -> %jd, %" PRIu64 " bytes past the durable size %s, %" PRIu64
             " overwritten bytes restored",
             d->path, (intmax_t)st.st_size, (intmax_t)d->durable_size, tail,
             g.zero_tail || g.random ? "zeroed" : "dropped", restored);
    g.last_bytes += restored + tail;
    g.last_files++;
}

/* ---- directory entries: the journal ---------------------------------------------------- */

/* Records a directory change; takes dfd0 and dfd1 (-1 when none). */
static void journal_add(op_kind_t kind, int dfd0, const char *name0, int dfd1, const char *name1,
                        const char *trash, const char *what)
{
    dirop_t *op = calloc(1, sizeof *op);
    if (!op) {
        close(dfd0);
        if (dfd1 >= 0)
            close(dfd1);
        g.undo_errors++; /* a cut can no longer undo this */
        return;
    }
    op->kind = kind;
    op->ndirs = dfd1 >= 0 ? 2 : 1;
    op->dfd[0] = dfd0;
    op->dfd[1] = dfd1;
    op->name[0] = strdup(name0);
    op->name[1] = name1 ? strdup(name1) : NULL;
    op->trash = trash ? strdup(trash) : NULL;
    op->what = strdup(what);
    for (int i = 0; i < op->ndirs; i++) {
        struct stat st;
        if (fstat(op->dfd[i], &st) == 0) {
            op->dev[i] = st.st_dev;
            op->ino[i] = st.st_ino;
        }
    }
    trace("%s", what);
    op->prev = g.tail;
    if (g.tail)
        g.tail->next = op;
    else
        g.head = op;
    g.tail = op;
}

static void journal_unlink(dirop_t *op)
{
    if (op->prev)
        op->prev->next = op->next;
    else
        g.head = op->next;
    if (op->next)
        op->next->prev = op->prev;
    else
        g.tail = op->prev;
    for (int i = 0; i < op->ndirs; i++)
        close(op->dfd[i]);
    free(op->name[0]);
    free(op->name[1]);
    free(op->trash);
    free(op->what);
    free(op);
}

/* The directory (dev, ino) was fsynced: the changes to it so far are durable there; a change
 * durable in all its directories leaves the journal, and what it removed leaves the trash. */
static void journal_sync(dev_t dev, ino_t ino)
{
    for (dirop_t *op = g.head, *next; op; op = next) {
        next = op->next;
        bool all = true;
        for (int i = 0; i < op->ndirs; i++) {
            if (op->dev[i] == dev && op->ino[i] == ino)
                op->synced[i] = true;
            all = all && op->synced[i];
        }
        if (!all)
            continue;
        if (op->trash)
            rm_rf(g.trash, op->trash);
        journal_unlink(op);
    }
}

/* Logs a failed undo, unless its directory is gone for good (then so is the entry). */
static void undo_failed(const dirop_t *op, int dir, int err)
{
    struct stat st;
    if (fstat(dir, &st) == 0 && st.st_nlink == 0)
        return;
    g.undo_errors++;
    cut_note("undo %s failed: %s", op->what, strerror(err));
}

/* Reverts one change (the journal is undone newest first). */
static void undo_op(dirop_t *op)
{
    int fd = op->dfd[0];
    switch (op->kind) {
    case OP_CREATE:
        if (unlinkat(fd, op->name[0], 0) < 0)
            undo_failed(op, fd, errno);
        break;
    case OP_MKDIR: {
        int rc = rm_rf(fd, op->name[0]);
        if (rc < 0)
            undo_failed(op, fd, -rc);
        break;
    }
    case OP_UNLINK:
    case OP_RMDIR:
        if (renameat(g.trash, op->trash, fd, op->name[0]) < 0) {
            undo_failed(op, fd, errno);
            rm_rf(g.trash, op->trash);
        }
        break;
    case OP_RENAME:
        if (renameat(fd, op->name[0], op->dfd[1], op->name[1]) < 0)
            undo_failed(op, op->dfd[1], errno);
        if (op->trash && renameat(g.trash, op->trash, fd, op->name[0]) < 0) {
            undo_failed(op, fd, errno);
            rm_rf(g.trash, op->trash);
        }
        break;
    }
    cut_note("undo %s", op->what);
    g.last_dirops++;
}

/* The power cut: every file back to its last sync, every unsynced directory change undone;
 * from now on the disk answers nothing but EIO. */
static void cut(void)
{
    trace("cut");
    g.dead = true;
    free(g.cutlog);
    g.cutlog = NULL;
    g.cutlog_len = 0;
    g.last_bytes = g.last_files = g.last_dirops = 0;
    while (g.dirty) {
        dirty_t *d = g.dirty;
        g.dirty = d->next;
        cut_file(d);
        dirty_free(d);
    }
    while (g.tail) {
        undo_op(g.tail);
        journal_unlink(g.tail);
    }
    g.cuts++;
    g.dropped_bytes += g.last_bytes;
    g.dropped_files += g.last_files;
    g.undone_dirops += g.last_dirops;
    cut_note("%" PRIu64 " bytes in %" PRIu64 " files, %" PRIu64 " directory changes", g.last_bytes,
             g.last_files, g.last_dirops);
}

/* ---- the control file ------------------------------------------------------------------ */

/* The report a read of the control file returns (malloc'd). */
static char *ctl_report(size_t *len)
{
    uint64_t pending_bytes = 0, pending_files = 0, pending_dirops = 0;
    for (const dirty_t *d = g.dirty; d; d = d->next) {
        pending_bytes += dirty_pending(d);
        pending_files++;
    }
    for (const dirop_t *op = g.head; op; op = op->next)
        pending_dirops++;
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return NULL;
    fprintf(f,
            "dead %d\nopen_files %ld\npending_files %" PRIu64 "\npending_bytes %" PRIu64
            "\npending_dirops %" PRIu64 "\nsyncs %" PRIu64 "\ndirsyncs %" PRIu64 "\ncuts %" PRIu64
            "\ndropped_bytes %" PRIu64 "\ndropped_files %" PRIu64 "\nundone_dirops %" PRIu64
            "\nundo_errors %" PRIu64 "\nlast_dropped_bytes %" PRIu64 "\nlast_dropped_files %" PRIu64
            "\nlast_undone_dirops %" PRIu64 "\n",
            g.dead, g.open_files, pending_files, pending_bytes, pending_dirops, g.syncs, g.dirsyncs,
            g.cuts, g.dropped_bytes, g.dropped_files, g.undone_dirops, g.undo_errors, g.last_bytes,
            g.last_files, g.last_dirops);
    for (const dirty_t *d = g.dirty; d; d = d->next)
        fprintf(f, "pending: %" PRIu64 " %s\n", dirty_pending(d), d->path);
    if (g.cutlog)
        fputs(g.cutlog, f);
    fclose(f);
    *len = size;
    return text;
}

typedef struct ctl_handle {
    char *text; /* the report, made at open */
    size_t len;
    struct ctl_handle *prev, *next; /* every open one: an unmount may come before a release */
} ctl_handle_t;

static ctl_handle_t *ctl_open_handles;

static void ctl_free(ctl_handle_t *h)
{
    if (h->prev)
        h->prev->next = h->next;
    else
        ctl_open_handles = h->next;
    if (h->next)
        h->next->prev = h->prev;
    free(h->text);
    free(h);
}

/* FUSE's destroy: the kernel may not have sent the release of a control handle closed just
 * before the unmount. */
static void dfs_destroy(void *private_data)
{
    (void)private_data;
    while (ctl_open_handles)
        ctl_free(ctl_open_handles);
}

static int ctl_open(struct fuse_file_info *fi)
{
    ctl_handle_t *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->next = ctl_open_handles;
    if (h->next)
        h->next->prev = h;
    ctl_open_handles = h;
    h->text = ctl_report(&h->len);
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->direct_io = 1;
    return 0;
}

/* True if a file whose name (when first changed) ends in suffix has unsynced bytes. */
static bool pending_with_suffix(const char *suffix)
{
    size_t n = strlen(suffix);
    for (const dirty_t *d = g.dirty; d; d = d->next) {
        size_t len = strlen(d->path);
        if (len >= n && strcmp(d->path + len - n, suffix) == 0 && dirty_pending(d) > 0)
            return true;
    }
    return false;
}

/* "cut": cut now. "cut SUFFIX": cut now if a file named *SUFFIX has unsynced bytes, else fail
 * with EAGAIN (check and cut in one step: no sync can land between them). */
static int ctl_write(const char *buf, size_t size)
{
    char cmd[256];
    if (size >= sizeof cmd)
        return -EINVAL;
    memcpy(cmd, buf, size);
    cmd[size] = 0;
    cmd[strcspn(cmd, "\n")] = 0;
    if (strcmp(cmd, "cut") == 0 ||
        (strncmp(cmd, "cut ", 4) == 0 && !g.dead && pending_with_suffix(cmd + 4))) {
        cut();
        return (int)size;
    }
    return strncmp(cmd, "cut ", 4) == 0 ? -EAGAIN : -EINVAL;
}

/* ---- FUSE operations ------------------------------------------------------------------- */

static void *dfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE; /* every write reaches dropfs when it happens */
    cfg->hard_remove = 1;                    /* unlink is an unlink, not a rename to .fuse_hidden */
    return NULL;
}

static int dfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    if (is_ctl(path)) {
        memset(st, 0, sizeof *st);
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        return 0;
    }
    int rc;
    if (path == NULL) /* an unlinked file that is still open */
        rc = fi ? fstat((int)fi->fh, st) : (errno = ENOENT, -1);
    else if (hidden(path))
        return -ENOENT;
    else
        rc = fstatat(g.root, rel(path), st, AT_SYMLINK_NOFOLLOW);
    return rc < 0 ? -errno : 0;
}

static int dfs_statfs(const char *path, struct statvfs *sv)
{
    (void)path;
    return fstatvfs(g.root, sv) < 0 ? -errno : 0;
}

static int dfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    (void)fi;
    if (is_ctl(path) || hidden(path))
        return -EPERM;
    return fchmodat(g.root, rel(path), mode, 0) < 0 ? -errno : 0;
}

static int dfs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    (void)fi;
    if (is_ctl(path))
        return 0;
    if (hidden(path))
        return -ENOENT;
    return utimensat(g.root, rel(path), tv, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* Truncates the file open as fd to size, saving what a cut needs to undo it. */
static int tracked_truncate(int fd, const char *path, off_t size)
{
    dirty_t *d = dirty_get(fd, path);
    struct stat st;
    if (!d || fstat(d->fd, &st) < 0)
        return -errno;
    trace("truncate %s ino %ju from %jd to %jd", path ? path : "-", (uintmax_t)d->ino,
          (intmax_t)st.st_size, (intmax_t)size);
    if (size < st.st_size) {
        int rc = dirty_save(d, size, st.st_size - size);
        if (rc < 0)
            return rc;
    }
    return ftruncate(d->fd, size) < 0 ? -errno : 0;
}

static int dfs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    if (is_ctl(path))
        return 0;
    if (fi)
        return tracked_truncate((int)fi->fh, path, size);
    if (hidden(path))
        return -ENOENT;
    int fd = openat(g.root, rel(path), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = tracked_truncate(fd, path, size);
    close(fd);
    return rc;
}

static int dfs_open(const char *path, struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    if (is_ctl(path))
        return ctl_open(fi);
    if (hidden(path))
        return -ENOENT;
    int fd = openat(g.root, rel(path), (fi->flags & ~(O_TRUNC | O_APPEND)) | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fi->flags & O_TRUNC) {
        int rc = tracked_truncate(fd, path, 0);
        if (rc < 0) {
            close(fd);
            return rc;
        }
    }
    fi->fh = (uint64_t)fd;
    g.open_files++;
    return 0;
}

static int dfs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    if (is_ctl(path) || hidden(path))
        return -EEXIST;
    struct stat st;
    if (fstatat(g.root, rel(path), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (fi->flags & O_EXCL)
            return -EEXIST;
        return dfs_open(path, fi);
    }
    const char *name;
    int dfd = open_parent(path, &name);
    if (dfd < 0)
        return dfd;
    int fd =
        openat(dfd, name, (fi->flags & ~(O_TRUNC | O_APPEND)) | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        int err = errno;
        close(dfd);
        return -err;
    }
    char what[PATH_MAX + 16];
    snprintf(what, sizeof what, "create %s", path);
    journal_add(OP_CREATE, dfd, name, -1, NULL, NULL, what);
    fi->fh = (uint64_t)fd;
    g.open_files++;
    return 0;
}

static int dfs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    if (is_ctl(path)) {
        const ctl_handle_t *h = (const ctl_handle_t *)(uintptr_t)fi->fh;
        if (!h->text || off >= (off_t)h->len)
            return 0;
        if (size > h->len - (size_t)off)
            size = h->len - (size_t)off;
        memcpy(buf, h->text + off, size);
        return (int)size;
    }
    ssize_t n = pread((int)fi->fh, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

/* True if a write through fi to path is durable once made (see the top of the file). */
static bool write_is_durable(const char *path, const struct fuse_file_info *fi)
{
    if (fi->flags & (O_SYNC | O_DSYNC))
        return true;
    return g.sync_prefix && path && strncmp(path, g.sync_prefix, strlen(g.sync_prefix)) == 0;
}

static int dfs_write(const char *path, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    if (is_ctl(path))
        return ctl_write(buf, size);
    dirty_t *d = dirty_get((int)fi->fh, path);
    if (!d)
        return -errno;
    int rc = dirty_save(d, off, (off_t)size);
    if (rc < 0)
        return rc;
    trace("write %s ino %ju at %jd, %zu bytes", path ? path : "-", (uintmax_t)d->ino, (intmax_t)off,
          size);
    ssize_t n = pwrite((int)fi->fh, buf, size, off);
    if (n < 0)
        return -errno;
    if (write_is_durable(path, fi))
        dirty_sync((int)fi->fh);
    return (int)n;
}

static int dfs_fallocate(const char *path, int mode, off_t off, off_t len,
                         struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    if (is_ctl(path))
        return -EOPNOTSUPP;
    if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
        return -EOPNOTSUPP; /* collapse and insert move bytes: not modelled */
    dirty_t *d = dirty_get((int)fi->fh, path);
    if (!d)
        return -errno;
    if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
        int rc = dirty_save(d, off, len);
        if (rc < 0)
            return rc;
    }
    return fallocate((int)fi->fh, mode, off, len) < 0 ? -errno : 0;
}

static int dfs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    (void)datasync;
    if (is_ctl(path))
        return 0;
    g.syncs++;
    struct stat st;
    if (g.trace && fstat((int)fi->fh, &st) == 0)
        trace("fsync %s ino %ju, size %jd", path ? path : "-", (uintmax_t)st.st_ino,
              (intmax_t)st.st_size);
    dirty_sync((int)fi->fh);
    return 0;
}

static int dfs_release(const char *path, struct fuse_file_info *fi)
{
    if (is_ctl(path)) {
        ctl_free((ctl_handle_t *)(uintptr_t)fi->fh);
        return 0;
    }
    close((int)fi->fh);
    g.open_files--;
    return 0;
}

static int dfs_mkdir(const char *path, mode_t mode)
{
    if (off_line(path))
        return -EIO;
    if (is_ctl(path) || hidden(path))
        return -EEXIST;
    const char *name;
    int dfd = open_parent(path, &name);
    if (dfd < 0)
        return dfd;
    if (mkdirat(dfd, name, mode) < 0) {
        int err = errno;
        close(dfd);
        return -err;
    }
    char what[PATH_MAX + 16];
    snprintf(what, sizeof what, "mkdir %s", path);
    journal_add(OP_MKDIR, dfd, name, -1, NULL, NULL, what);
    return 0;
}

/* 0 if the directory name in dir is empty, -ENOTEMPTY if not, or another error. */
static int dir_empty(int dir, const char *name)
{
    DIR *d;
    int rc = open_dir(dir, name, &d);
    if (rc < 0)
        return rc;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            rc = -ENOTEMPTY;
    closedir(d);
    return rc;
}

/* unlink and rmdir: the entry goes to the trash, where a cut finds it again. */
static int remove_entry(const char *path, op_kind_t kind)
{
    if (off_line(path))
        return -EIO;
    if (is_ctl(path))
        return -EPERM;
    if (hidden(path))
        return -ENOENT;
    const char *name;
    int dfd = open_parent(path, &name);
    if (dfd < 0)
        return dfd;
    struct stat st;
    int rc = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
    if (rc == 0 && kind == OP_UNLINK && S_ISDIR(st.st_mode))
        rc = -EISDIR;
    if (rc == 0 && kind == OP_RMDIR)
        rc = S_ISDIR(st.st_mode) ? dir_empty(dfd, name) : -ENOTDIR;
    char tname[32];
    if (rc == 0)
        rc = to_trash(dfd, name, tname);
    if (rc < 0) {
        close(dfd);
        return rc;
    }
    char what[PATH_MAX + 16];
    snprintf(what, sizeof what, "%s %s", op_names[kind], path);
    journal_add(kind, dfd, name, -1, NULL, tname, what);
    return 0;
}

static int dfs_unlink(const char *path)
{
    return remove_entry(path, OP_UNLINK);
}

static int dfs_rmdir(const char *path)
{
    return remove_entry(path, OP_RMDIR);
}

/* Checks a rename of src over an existing dst as rename(2) would. */
static int rename_check(const struct stat *src, int dfd, const char *dname, const struct stat *dst)
{
    if (S_ISDIR(src->st_mode) && !S_ISDIR(dst->st_mode))
        return -ENOTDIR;
    if (!S_ISDIR(src->st_mode) && S_ISDIR(dst->st_mode))
        return -EISDIR;
    return S_ISDIR(dst->st_mode) ? dir_empty(dfd, dname) : 0;
}

static int dfs_rename(const char *from, const char *to, unsigned int flags)
{
    if (off_line(from))
        return -EIO;
    if (is_ctl(from) || is_ctl(to) || hidden(from) || hidden(to))
        return -EPERM;
    if (flags & ~RENAME_NOREPLACE)
        return -EINVAL; /* RENAME_EXCHANGE, RENAME_WHITEOUT: not modelled */
    const char *sname, *dname;
    int sfd = open_parent(from, &sname);
    if (sfd < 0)
        return sfd;
    int dfd = open_parent(to, &dname);
    if (dfd < 0) {
        close(sfd);
        return dfd;
    }
    struct stat src, dst;
    bool replace = false, same = false;
    int rc = fstatat(sfd, sname, &src, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
    if (rc == 0 && fstatat(dfd, dname, &dst, AT_SYMLINK_NOFOLLOW) == 0) {
        same = src.st_dev == dst.st_dev && src.st_ino == dst.st_ino;
        replace = !same;
        if (flags & RENAME_NOREPLACE)
            rc = -EEXIST;
        else if (replace)
            rc = rename_check(&src, dfd, dname, &dst);
    }
    char tname[32] = "";
    if (rc == 0 && replace)
        rc = to_trash(dfd, dname, tname);
    if (rc == 0 && !same && renameat(sfd, sname, dfd, dname) < 0) {
        rc = -errno;
        if (replace)
            renameat(g.trash, tname, dfd, dname);
    }
    if (rc < 0 || same) {
        close(sfd);
        close(dfd);
        return rc;
    }
    char what[2 * PATH_MAX + 16];
    snprintf(what, sizeof what, "rename %s -> %s", from, to);
    journal_add(OP_RENAME, dfd, dname, sfd, sname, replace ? tname : NULL, what);
    return 0;
}

static int dfs_opendir(const char *path, struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    if (hidden(path))
        return -ENOENT;
    DIR *d;
    int rc = open_dir(g.root, rel(path), &d);
    if (rc < 0)
        return rc;
    fi->fh = (uint64_t)(uintptr_t)d;
    g.open_files++;
    return 0;
}

static int dfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    if (off_line(path))
        return -EIO;
    (void)off;
    (void)flags;
    DIR *d = (DIR *)(uintptr_t)fi->fh;
    bool root = strcmp(path, "/") == 0;
    rewinddir(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (root && strcmp(e->d_name, TRASH_NAME) == 0)
            continue;
        struct stat st = {.st_ino = e->d_ino, .st_mode = (mode_t)DTTOIF(e->d_type)};
        if (fill(buf, e->d_name, &st, 0, 0))
            break;
    }
    return 0;
}

static int dfs_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
    if (off_line(path))
        return -EIO;
    (void)path;
    (void)datasync;
    struct stat st;
    if (fstat(dirfd((DIR *)(uintptr_t)fi->fh), &st) < 0)
        return -errno;
    g.dirsyncs++;
    trace("fsyncdir %s", path);
    journal_sync(st.st_dev, st.st_ino);
    return 0;
}

static int dfs_releasedir(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    closedir((DIR *)(uintptr_t)fi->fh);
    g.open_files--;
    return 0;
}

static const struct fuse_operations dfs_ops = {
    .init = dfs_init,
    .destroy = dfs_destroy,
    .getattr = dfs_getattr,
    .statfs = dfs_statfs,
    .chmod = dfs_chmod,
    .utimens = dfs_utimens,
    .truncate = dfs_truncate,
    .open = dfs_open,
    .create = dfs_create,
    .read = dfs_read,
    .write = dfs_write,
    .fallocate = dfs_fallocate,
    .fsync = dfs_fsync,
    .release = dfs_release,
    .mkdir = dfs_mkdir,
    .unlink = dfs_unlink,
    .rmdir = dfs_rmdir,
    .rename = dfs_rename,
    .opendir = dfs_opendir,
    .readdir = dfs_readdir,
    .fsyncdir = dfs_fsyncdir,
    .releasedir = dfs_releasedir,
};

static int usage(void)
{
    fprintf(stderr,
            "usage: dropfs [--zero-tail] [--random SEED] [--trace] [--sync-writes PREFIX]\n"
            "              BACKING MOUNTPOINT [fuse options]\n"
            "  then: echo cut > MOUNTPOINT/.dropfs   (drop what is not durable)\n"
            "        cat MOUNTPOINT/.dropfs          (counters, and what the last cut did)\n");
    return 2;
}

int main(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--zero-tail") == 0) {
            g.zero_tail = true;
        } else if (strcmp(argv[i], "--trace") == 0) {
            g.trace = true;
        } else if (strcmp(argv[i], "--sync-writes") == 0 && i + 1 < argc) {
            g.sync_prefix = argv[++i];
        } else if (strcmp(argv[i], "--random") == 0 && i + 1 < argc) {
            g.random = true;
            g.seed = (unsigned)strtoul(argv[++i], NULL, 0);
        } else {
            return usage();
        }
    }
    if (argc - i < 2)
        return usage();
    g.root = open(argv[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (g.root < 0) {
        fprintf(stderr, "dropfs: %s: %s\n", argv[i], strerror(errno));
        return 1;
    }
    /* A trash left by an earlier run holds nothing anyone can reach: empty it. */
    rm_rf(g.root, TRASH_NAME);
    if (mkdirat(g.root, TRASH_NAME, 0700) < 0 ||
        (g.trash = openat(g.root, TRASH_NAME, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "dropfs: %s/%s: %s\n", argv[i], TRASH_NAME, strerror(errno));
        return 1;
    }
    /* Each journal entry and dirty file holds descriptors. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    char *fargs[64];
    int n = 0;
    fargs[n++] = argv[0];
    fargs[n++] = argv[i + 1];
    fargs[n++] = "-f";
    fargs[n++] = "-s";
    fargs[n++] = "-o";
    fargs[n++] = "fsname=dropfs,subtype=dropfs";
    for (int j = i + 2; j < argc && n < 63; j++)
        fargs[n++] = argv[j];
    fargs[n] = NULL;
    return fuse_main(n, fargs, &dfs_ops, NULL);
}
