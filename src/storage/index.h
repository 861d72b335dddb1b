/*
 * index.h — a segment's sparse offset index (.index) and time index (.timeindex).
 *
 * Both are byte-compatible with Kafka's. All integers big-endian; no header, no padding; the
 * file is exactly entries * entry size (a trailing partial entry is ignored on load).
 *
 * .index, 8 bytes per entry:
 *   byte 0  u32  relative offset: lastOffset of an indexed batch - segment base offset
 *   byte 4  u32  position: byte offset of that batch in the .log file
 *   Entries strictly increase in both fields. An entry is added for a batch when more than
 *   index.interval.bytes of log were written since the previous entry (so the first batch of a
 *   segment is never indexed: position 0 is implied).
 *
 * .timeindex, 12 bytes per entry:
 *   byte 0  i64  timestamp: the largest batch maxTimestamp seen in the segment so far
 *   byte 8  u32  relative offset: lastOffset of the batch that first reached that timestamp
 *   Timestamps strictly increase, relative offsets do not decrease. Added together with an
 *   offset index entry when the largest timestamp grew, and once more when the segment is
 *   closed or rolled, so the last entry holds the segment's largest timestamp.
 *
 * In memory both are plain arrays; `flushed` counts the entries already written to the file.
 * A loaded file is validated (monotonic, within the segment) and refused whole if anything is
 * off: an index is a cache of the log, never trusted over it. Owned by the segment's shard.
 */
#ifndef ST_STORAGE_INDEX_H
#define ST_STORAGE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#define ST_OFFIDX_ENTRY  8
#define ST_TIMEIDX_ENTRY 12

typedef struct st_offidx_entry {
    uint32_t rel; /* offset - base */
    uint32_t pos; /* byte position in .log */
} st_offidx_entry_t;

typedef struct st_timeidx_entry {
    int64_t ts;
    uint32_t rel;
} st_timeidx_entry_t;

typedef struct st_offidx {
    st_offidx_entry_t *e;
    size_t n, cap;
    size_t flushed; /* entries [0, flushed) are in the file */
} st_offidx_t;

typedef struct st_timeidx {
    st_timeidx_entry_t *e;
    size_t n, cap;
    size_t flushed;
} st_timeidx_t;

void st_offidx_fini(st_offidx_t *x);
void st_timeidx_fini(st_timeidx_t *x);
void st_offidx_clear(st_offidx_t *x);
void st_timeidx_clear(st_timeidx_t *x);

/* Appends an entry; the caller keeps the order. Returns 0 or -ENOMEM. */
int st_offidx_add(st_offidx_t *x, uint32_t rel, uint32_t pos);
int st_timeidx_add(st_timeidx_t *x, int64_t ts, uint32_t rel);

/* Index of the last entry with rel <= target, or -1. */
ptrdiff_t st_offidx_floor(const st_offidx_t *x, uint32_t target);
/* Index of the last entry with ts < target, or -1. */
ptrdiff_t st_timeidx_below(const st_timeidx_t *x, int64_t target);

/* Drops entries whose position is >= pos (offset index) / whose rel >= rel (time index). */
void st_offidx_truncate_pos(st_offidx_t *x, uint32_t pos);
void st_timeidx_truncate_rel(st_timeidx_t *x, uint32_t rel);

/*
 * Decodes and validates file bytes. seg_size bounds positions, max_rel bounds relative offsets.
 * Returns 0, or ST_E_CORRUPT leaving x empty. flushed is set to the entries loaded.
 */
int st_offidx_load(st_offidx_t *x, const uint8_t *p, size_t n, int64_t seg_size, int64_t max_rel);
int st_timeidx_load(st_timeidx_t *x, const uint8_t *p, size_t n, int64_t max_rel);

/* Encodes entries [from, n) into out (room for (n - from) * entry size). */
void st_offidx_encode(const st_offidx_t *x, size_t from, uint8_t *out);
void st_timeidx_encode(const st_timeidx_t *x, size_t from, uint8_t *out);

#endif
