/*
 * fs.h — the file-system calls storage makes, routed through a table.
 *
 * Every system call the storage module makes goes through an st_fs_t: the real one (POSIX,
 * st_fs_posix()) in the server, a fault-injecting in-memory one (faultfs.h) in tests, which can
 * fail any call with EIO or ENOSPC, write short, and "crash" by dropping what was never synced.
 *
 * Conventions: every function returns >= 0 on success and a negative errno on failure, never
 * sets errno for the caller to read. File descriptors are whatever the implementation hands
 * out; only the same st_fs_t may use them. pread/pwrite may transfer fewer bytes than asked
 * (the caller loops: st_fs_pread_full, st_fs_pwrite_full).
 *
 * Threads: the POSIX table is stateless and may be used from any thread. A faultfs instance
 * belongs to one thread (tests run single-threaded).
 */
#ifndef ST_STORAGE_FS_H
#define ST_STORAGE_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ST_FS_RDONLY 0x1
#define ST_FS_RDWR   0x2
#define ST_FS_CREAT  0x4
#define ST_FS_EXCL   0x8
#define ST_FS_TRUNC  0x10

typedef struct st_fs_ops {
    /* Opens path with ST_FS_* flags (mode 0644 when created); returns an fd. */
    int (*open)(void *ctx, const char *path, int flags);
    int (*close)(void *ctx, int fd);
    ssize_t (*pread)(void *ctx, int fd, void *buf, size_t n, int64_t off);
    ssize_t (*pwrite)(void *ctx, int fd, const void *buf, size_t n, int64_t off);
    /* Optional (NULL: st_fs_pwrite2_full makes two pwrites): both buffers in one call. */
    ssize_t (*pwrite2)(void *ctx, int fd, const void *a, size_t na, const void *b, size_t nb,
                       int64_t off);
    int (*fdatasync)(void *ctx, int fd);
    int (*ftruncate)(void *ctx, int fd, int64_t len);
    /* Size of the open file in bytes. */
    int (*fsize)(void *ctx, int fd, int64_t *size);
    int (*rename)(void *ctx, const char *from, const char *to);
    int (*unlink)(void *ctx, const char *path);
    int (*mkdir)(void *ctx, const char *path);
    int (*rmdir)(void *ctx, const char *path);
    /* Calls cb for each entry of the directory but "." and ".."; stops early on cb != 0 and
     * returns that value. is_dir is 1 for a directory. */
    int (*listdir)(void *ctx, const char *path, int (*cb)(void *arg, const char *name, int is_dir),
                   void *arg);
    /* Makes the directory's entries (creations, renames, unlinks) durable. */
    int (*fsync_dir)(void *ctx, const char *path);
    /* Optional (NULL: -ENOSYS): makes everything written so far on the file system holding
     * path durable, every file's contents and every directory's entries (Linux syncfs(2)):
     * one sync standing for many fdatasync and fsync_dir calls (env.h's deferred syncs). */
    int (*syncfs)(void *ctx, const char *path);
} st_fs_ops_t;

typedef struct st_fs {
    const st_fs_ops_t *ops;
    void *ctx;
} st_fs_t;

/* The real file system. */
st_fs_t st_fs_posix(void);

/* Reads exactly n bytes unless the file ends first; returns the bytes read or -errno. */
ssize_t st_fs_pread_full(const st_fs_t *fs, int fd, void *buf, size_t n, int64_t off);
/* Writes all n bytes, looping over short writes; returns 0 or -errno (a short write that makes
 * no progress returns -EIO). On failure some prefix may have been written. */
int st_fs_pwrite_full(const st_fs_t *fs, int fd, const void *buf, size_t n, int64_t off);
/* Writes a then b contiguously from off, in one call where the fs has pwrite2; as
 * st_fs_pwrite_full otherwise. */
int st_fs_pwrite2_full(const st_fs_t *fs, int fd, const void *a, size_t na, const void *b,
                       size_t nb, int64_t off);
/* Reads a whole small file (at most max bytes) into a malloc'd buffer. */
int st_fs_read_file(const st_fs_t *fs, const char *path, size_t max, uint8_t **data, size_t *len);
/* Writes path atomically and durably with synchronous calls: path.tmp, fdatasync, rename,
 * directory sync. For small metadata files; blocks, so only at open/close or on a helper. */
int st_fs_write_file_atomic(const st_fs_t *fs, const char *dir, const char *name, const void *data,
                            size_t len);

/* Whether syncfs(2) on the file system holding path makes everything written there durable:
 * true for the local file systems known to (ext4, xfs, btrfs, f2fs; tmpfs, which keeps
 * nothing anyway), false elsewhere: Linux does not pass syncfs to a FUSE daemon, for one, so a
 * FUSE file system would take it for nothing. */
bool st_fs_syncfs_durable(const char *path);

/* Syncs the directory holding path (makes its entry for path durable). */
int st_fs_sync_parent(st_fs_t *fs, const char *path);

#endif
