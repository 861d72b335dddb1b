/*
 * file.h — reference-counted file handles behind a capped descriptor cache.
 *
 * An st_file_t names one file of a segment (.log, .index, .timeindex). It holds a descriptor
 * only while needed: st_file_pin() opens it on demand (through the env's st_fs_t) and keeps it
 * open until the matching st_file_unpin(); an unpinned open file sits in the cache's LRU list
 * and is closed when more than `cap` descriptors are open. So 10,000 partitions with many
 * segments use about `cap` descriptors per shard, plus what is pinned at the moment (active
 * segments being written, reads in flight, syncs in flight).
 *
 * Lifetime: st_file_open() returns a handle with one reference; st_file_ref()/st_file_unref()
 * count holders (a segment, every read range handed to the network). A file unlinked while
 * referenced (retention deleted its segment) keeps its descriptor open until the last
 * reference goes, so an in-flight send still reads valid bytes; it is never reopened.
 *
 * Threads: a cache and its files belong to one shard thread; no locks.
 */
#ifndef ST_STORAGE_FILE_H
#define ST_STORAGE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "storage/fs.h"

typedef struct st_file st_file_t;

typedef struct st_fdcache {
    st_fs_t fs;
    int cap;             /* unpinned descriptors kept open at most */
    int open;            /* descriptors open now (pinned or not) */
    st_file_t *lru_head; /* least recently used unpinned open file */
    st_file_t *lru_tail;
} st_fdcache_t;

struct st_file {
    st_fdcache_t *cache;
    char *path;
    int fd;        /* -1 while closed */
    int refs;      /* holders */
    int pins;      /* users of fd right now */
    bool writable; /* opened read-write */
    bool create;   /* create on the next open */
    bool unlinked; /* the name is gone: the descriptor must not be closed while referenced */
    bool in_lru;
    st_file_t *lru_prev, *lru_next;
};

void st_fdcache_init(st_fdcache_t *c, st_fs_t fs, int cap);
/* Every file must be unreferenced by now. */
void st_fdcache_fini(st_fdcache_t *c);

/* New handle for path (not opened yet unless create: then the file is created now, so errors
 * show here). */
int st_file_open(st_fdcache_t *c, const char *path, bool writable, bool create, st_file_t **out);
void st_file_ref(st_file_t *f);
/* Drops a reference; the last one closes the descriptor and frees the handle. */
void st_file_unref(st_file_t *f);
/* Returns an open descriptor, valid until st_file_unpin(). */
int st_file_pin(st_file_t *f);
void st_file_unpin(st_file_t *f);
/* Descriptor of a pinned file (for sendfile); -1 if not pinned. */
int st_file_fd(const st_file_t *f);

/* Convenience wrappers that pin around one call. */
ssize_t st_file_pread(st_file_t *f, void *buf, size_t n, int64_t off);
int st_file_pwrite(st_file_t *f, const void *buf, size_t n, int64_t off);
int st_file_truncate(st_file_t *f, int64_t len);
int st_file_size(st_file_t *f, int64_t *size);
/* Synchronous fdatasync: only for open/close/recovery paths, never the event loop. */
int st_file_sync_now(st_file_t *f);
/* Unlinks the name; the handle stays usable while referenced. */
int st_file_unlink(st_file_t *f);
/* Renames the file; the handle follows. */
int st_file_rename(st_file_t *f, const char *to);

#endif
