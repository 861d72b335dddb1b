/*
 * faultfs.h — an in-memory file system behind the st_fs_t table, with fault injection.
 *
 * For tests and fuzzers of anything built on storage/. Files live in memory; each keeps two
 * images: what was written (what reads see) and what was last made durable by fdatasync.
 *
 *   st_faultfs_fail()       the next calls of one operation fail with a chosen errno
 *   st_faultfs_set_capacity() writes past a byte budget go short, then fail with ENOSPC
 *   st_faultfs_set_short_writes() every pwrite transfers a random non-empty prefix
 *   st_faultfs_crash()      every file falls back to its durable image (optionally keeping a
 *                           random part of an unsynced appended tail: a torn write); every open
 *                           descriptor dies; all calls fail with EIO until st_faultfs_restart()
 *
 * Model of durability: file contents are durable only through fdatasync; a directory's entries
 * (create, rename, unlink, mkdir, rmdir) only through fsync_dir of that directory (syncfs makes
 * both durable for every file and directory at once), except
 * entries directly under the root (not modelled) and directory renames, durable at once. A
 * crash keeps the durable names (dropping any whose directory did not survive) and, per file,
 * the durable image or, by mode: a random prefix of a grown tail (torn write), a grown tail of
 * zeros (size updated, blocks not written), or any size between the two and each 4 KiB page old
 * or new in no order. Descriptors are never reused, so a stale one gets EBADF.
 * One instance belongs to one thread.
 */
#ifndef ST_STORAGE_FAULTFS_H
#define ST_STORAGE_FAULTFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/fs.h"

typedef struct st_faultfs st_faultfs_t;

/* Operations that st_faultfs_fail() can target. */
typedef enum {
    ST_FAULT_OPEN,
    ST_FAULT_PREAD,
    ST_FAULT_PWRITE,
    ST_FAULT_FDATASYNC,
    ST_FAULT_FTRUNCATE,
    ST_FAULT_FSIZE,
    ST_FAULT_RENAME,
    ST_FAULT_UNLINK,
    ST_FAULT_MKDIR,
    ST_FAULT_LISTDIR,
    ST_FAULT_FSYNC_DIR,
    ST_FAULT_SYNCFS,
    ST_FAULT__COUNT
} st_fault_op_t;

st_faultfs_t *st_faultfs_create(uint64_t seed);
void st_faultfs_destroy(st_faultfs_t *f);
/* The table to hand to storage; valid while f lives. */
st_fs_t st_faultfs_fs(st_faultfs_t *f);

/* After `skip` more successful calls of op, the next `count` calls (-1: all, until cleared)
 * fail with -err. */
void st_faultfs_fail(st_faultfs_t *f, st_fault_op_t op, int err, int skip, int count);
/* Clears every failure plan, the capacity and short writes. */
void st_faultfs_clear(st_faultfs_t *f);
/* Total bytes all files may hold (-1: unlimited). */
void st_faultfs_set_capacity(st_faultfs_t *f, int64_t bytes);
void st_faultfs_set_short_writes(st_faultfs_t *f, bool on);
typedef enum {
    ST_CRASH_DROP,      /* every file back to its durable image */
    ST_CRASH_TORN,      /* a file that only grew may keep a random prefix of the new bytes */
    ST_CRASH_ZERO_TAIL, /* a file that only grew may keep a random part of its tail, as zeros */
    ST_CRASH_PAGES,     /* a changed file: any size between old and new, pages old or new */
    ST_CRASH__COUNT
} st_crash_mode_t;

/* Drops everything not made durable (names included), as mode says for file contents. Open
 * descriptors die; calls fail with EIO until st_faultfs_restart(). */
void st_faultfs_crash_mode(st_faultfs_t *f, st_crash_mode_t mode);
/* Crashes (as st_faultfs_crash_mode) at the call after `calls` more calls of any operation,
 * which then fails with EIO like every later one: a crash in the middle of a sequence. */
void st_faultfs_crash_after(st_faultfs_t *f, int64_t calls, st_crash_mode_t mode);
bool st_faultfs_crashed(const st_faultfs_t *f);
/* st_faultfs_crash_mode with ST_CRASH_TORN (torn) or ST_CRASH_DROP. */
void st_faultfs_crash(st_faultfs_t *f, bool torn);
void st_faultfs_restart(st_faultfs_t *f);

/* Direct access for tests, bypassing faults. get returns a malloc'd copy. put replaces the file
 * (creating its directory entry) and makes it durable. */
int st_faultfs_get(st_faultfs_t *f, const char *path, uint8_t **data, size_t *len);
int st_faultfs_put(st_faultfs_t *f, const char *path, const void *data, size_t len);
bool st_faultfs_exists(st_faultfs_t *f, const char *path);
/* Descriptors open now, and calls made of op so far. */
int st_faultfs_open_fds(st_faultfs_t *f);
uint64_t st_faultfs_calls(st_faultfs_t *f, st_fault_op_t op);
/* Bytes held by all files. */
int64_t st_faultfs_used(st_faultfs_t *f);

#endif
