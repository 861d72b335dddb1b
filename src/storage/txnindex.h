/*
 * txnindex.h — a segment's transaction index (.txnindex): the aborted transactions whose
 * abort marker lies in the segment, byte-compatible with Kafka's.
 *
 * 34 bytes per entry, big-endian, no header, no padding:
 *   byte 0   i16  version (0)
 *   byte 2   i64  producer id
 *   byte 10  i64  first offset: the transaction's first record
 *   byte 18  i64  last offset: its abort marker (in this segment)
 *   byte 26  i64  last stable offset when the marker was written
 * Entries are in marker order (last offsets increase). Every segment has the file (empty when
 * no transaction aborted in it); a missing or malformed one is rebuilt from the log at open
 * (st_log_open), never trusted. In memory a plain array; `flushed` entries are in the file.
 * Owned by the segment's shard.
 */
#ifndef ST_STORAGE_TXNINDEX_H
#define ST_STORAGE_TXNINDEX_H

#include <stddef.h>
#include <stdint.h>

#define ST_TXNIDX_ENTRY 34

typedef struct st_txn_aborted {
    int64_t producer_id;
    int64_t first_offset;
    int64_t last_offset;        /* the abort marker's offset */
    int64_t last_stable_offset; /* the LSO just after the marker */
} st_txn_aborted_t;

typedef struct st_txnidx {
    st_txn_aborted_t *e;
    size_t n, cap;
    size_t flushed; /* entries [0, flushed) are in the file */
} st_txnidx_t;

void st_txnidx_fini(st_txnidx_t *x);
void st_txnidx_clear(st_txnidx_t *x);
/* Appends an entry (last_offset above every entry's). 0 or -ENOMEM. */
int st_txnidx_add(st_txnidx_t *x, const st_txn_aborted_t *a);
/* Drops entries whose marker is at or past offset (Kafka's truncateTo). */
void st_txnidx_truncate(st_txnidx_t *x, int64_t offset);
/* Decodes and validates file bytes: whole entries, version 0, producer id >= 0, first <= last,
 * markers in [base, next) and increasing. 0, or ST_E_CORRUPT leaving x empty. */
int st_txnidx_load(st_txnidx_t *x, const uint8_t *p, size_t n, int64_t base, int64_t next);
/* Encodes entries [from, n) into out ((n - from) * 34 bytes). */
void st_txnidx_encode(const st_txnidx_t *x, size_t from, uint8_t *out);

#endif
