/*
 * segment.h — one segment of a partition log: a .log file of batches and its two indexes.
 * Internal to storage/ (log.c is the only user); owned by the log's shard.
 *
 * File names: the base offset as 20 decimal digits, zero-padded, then .log / .index /
 * .timeindex / .txnindex (e.g. 00000000000000001234.log). Formats: batch.h, index.h,
 * txnindex.h, docs/format.md.
 *
 * Invariants (checked by st_segment_check in debug builds):
 *   1. Bytes [0, size) of .log are whole valid batches with increasing offsets in
 *      [base_offset, next_offset); next_offset == base_offset when the segment is empty.
 *   2. Offset index entries point at batch starts below size, strictly increasing; time index
 *      entries strictly increase in timestamp; relative offsets fit in u32.
 *   3. max_timestamp is the largest batch maxTimestamp in the segment (-1 when none).
 *   4. Index entries [0, flushed) are in the index files; the files hold nothing beyond them.
 */
#ifndef ST_STORAGE_SEGMENT_H
#define ST_STORAGE_SEGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "storage/batch.h"
#include "storage/file.h"
#include "storage/index.h"
#include "storage/txnindex.h"

typedef struct st_segment {
    int64_t base_offset;
    int64_t next_offset;    /* last offset + 1 */
    int64_t size;           /* valid bytes of .log */
    int64_t max_timestamp;  /* -1 when none */
    int64_t max_ts_offset;  /* last offset of the first batch reaching max_timestamp */
    int64_t first_batch_ts; /* maxTimestamp of the first batch (segment.ms), -1 if none */
    int64_t created_ms;     /* when this process created or opened it */
    int64_t bytes_since_index;
    st_file_t *log;
    st_file_t *oidx_file;
    st_file_t *tidx_file;
    st_file_t *txn_file; /* .txnindex */
    st_offidx_t oidx;
    st_timeidx_t tidx;
    st_txnidx_t txn;  /* aborted transactions whose marker is in this segment */
    bool txn_rebuild; /* .txnindex missing or malformed at load: rebuilt by the log's open */
    int64_t wb_done;   /* .log bytes below it were handed to the env's writeback hook (<= size) */
    bool log_dirty;    /* .log written or truncated since its last sync was issued */
    bool idx_rewrite;  /* index files must be rewritten whole (after truncation) */
    bool idx_dirty;    /* index files written since their last sync was issued */
    bool tail_unknown; /* a failed write could not be cut back: cut before the next write */
} st_segment_t;

/* Writes "<dir>/<20-digit base><ext>" into buf (PATH_MAX bytes). */
int st_segment_path(char *buf, size_t n, const char *dir, int64_t base, const char *ext);
/* Parses a 20-digit "<base>.log" name; returns 0 and the base, or -1. */
int st_segment_parse_name(const char *name, const char *ext, int64_t *base);

/* Creates the four files of a new empty segment. */
int st_segment_create(st_fdcache_t *c, const char *dir, int64_t base, int64_t now_ms,
                      st_segment_t **out);
/* Handles for an existing segment; reads its size. Indexes are not loaded yet. */
int st_segment_open(st_fdcache_t *c, const char *dir, int64_t base, int64_t now_ms,
                    st_segment_t **out);
/* The same for files named "<base>.log<suffix>" etc. (the cleaner's ".cleaned", ".swap"). */
int st_segment_create_as(st_fdcache_t *c, const char *dir, int64_t base, const char *suffix,
                         int64_t now_ms, st_segment_t **out);
int st_segment_open_as(st_fdcache_t *c, const char *dir, int64_t base, const char *suffix,
                       int64_t now_ms, st_segment_t **out);
/* Renames the four files to "<base>.<ext><suffix>", indexes first, the .log last; handles
 * follow. The caller syncs the directory. */
int st_segment_rename(st_segment_t *s, const char *dir, const char *suffix);
/* Notes a batch already written at pos (the cleaner writes whole files): indexes, timestamps,
 * size and next offset. */
int st_segment_note_batch(st_segment_t *s, int64_t pos, const st_batch_hdr_t *h, int32_t interval);
/* Drops the handles (files stay) and frees. */
void st_segment_free(st_segment_t *s);
/* Unlinks the four files (handles stay valid for holders) and frees. */
int st_segment_delete(st_segment_t *s);

/* What a scan found. */
typedef struct st_segment_scan {
    int64_t valid_bytes; /* bytes of whole valid batches from the start of the scan */
    int64_t cut_bytes;   /* bytes after them */
    const char *why;     /* why the scan stopped early, NULL if it reached the end */
    int64_t batches;
} st_segment_scan_t;

/* Called for each valid batch a scan meets (epochs, model checks). */
typedef void (*st_segment_batch_fn)(void *arg, const st_batch_hdr_t *h);

/*
 * Loads both index files and checks them against the log: valid entries, then a full check
 * (CRC, offsets) of the batches from the last index entry to the end of the file, which also
 * sets next_offset and max_timestamp. Returns 0 if everything matched, ST_E_CORRUPT if
 * anything did not (the caller then runs st_segment_recover), or an I/O error.
 */
int st_segment_load(st_segment_t *s, int32_t index_interval);
/*
 * Scans the whole .log batch by batch (length bounds, magic, CRC, offsets increasing from
 * min_offset, relative offsets fitting u32), rebuilds both indexes in memory and rewrites their
 * files, cuts the .log at the first bad byte. scan says what was cut. cb may be NULL.
 * Only offsets from cut_from on were never promised: when the bytes that fail could hold an
 * offset below it (the last good batch ends before cut_from), nothing is cut and no file is
 * changed: ST_E_CORRUPT is returned, scan says where. INT64_MIN allows any cut.
 */
int st_segment_recover(st_segment_t *s, int32_t index_interval, int64_t min_offset,
                       int64_t cut_from, st_segment_batch_fn cb, void *arg,
                       st_segment_scan_t *scan);

/* One parsed header and where its batch sits. */
typedef struct st_segment_pos {
    int64_t pos;
    st_batch_hdr_t hdr;
} st_segment_pos_t;

/* A small read-ahead window over one segment for walking headers. */
typedef struct st_segment_reader {
    st_segment_t *seg;
    int64_t win_pos;
    size_t win_len;
    uint8_t win[8192];
} st_segment_reader_t;

void st_segment_reader_init(st_segment_reader_t *r, st_segment_t *s);
/* Header of the batch at pos (< size). ST_E_CORRUPT if it does not parse or runs past size. */
int st_segment_read_hdr(st_segment_reader_t *r, int64_t pos, st_batch_hdr_t *h);
/*
 * Finds the first batch whose last offset >= offset, starting from the index. Returns 1 and
 * its position, 0 if no batch of the segment reaches offset, or < 0.
 */
int st_segment_find(st_segment_reader_t *r, int64_t offset, st_segment_pos_t *out);

/*
 * Appends len bytes of checked batches (hdrs[0..n) describe them, offsets already set) at the
 * end of .log, then indexes them. On a write error the .log is cut back to its old size
 * (tail_unknown set if even that failed) and nothing changes.
 */
int st_segment_append(st_segment_t *s, const uint8_t *data, size_t len, const st_batch_hdr_t *hdrs,
                      int n, int32_t index_interval);
/* Writes index entries not yet in the files (rewriting them whole when needed); adds the final
 * time-index entry when `final`. */
int st_segment_flush_indexes(st_segment_t *s, bool final);
/* Appends an aborted transaction whose marker is in this segment to its .txnindex (written
 * now, synced with the indexes). */
int st_segment_txn_add(st_segment_t *s, const st_txn_aborted_t *a);
/* Loads .txnindex; a missing or malformed file leaves the index empty and sets txn_rebuild.
 * 0 or an I/O error. Call once next_offset is known. */
int st_segment_load_txn(st_segment_t *s);
/* Replaces the index by entries[0..n) and writes the file whole (a rebuild). */
int st_segment_set_txn(st_segment_t *s, const st_txn_aborted_t *e, size_t n);
/* Cuts the segment at byte pos (a batch boundary), dropping index entries past it, and
 * recomputes next_offset and the timestamps with a header walk. If the file cannot be cut the
 * in-memory state still follows (tail_unknown is set) and the error is returned. */
int st_segment_truncate(st_segment_t *s, int64_t pos);

bool st_segment_check(st_segment_t *s);

#endif
