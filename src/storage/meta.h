/*
 * meta.h — the small per-partition files besides segments: formats and codecs.
 * Internal to storage/. Pure functions over memory; any thread.
 *
 * leader-epoch-checkpoint (Kafka's format, ASCII, '\n' after each line):
 *     0                      version
 *     <count>                number of entries
 *     <epoch> <startOffset>  count lines, epochs and offsets increasing, decimal
 *
 * partition.metadata (Kafka's format, ASCII):
 *     version: 0
 *     topic_id: <22 characters: the 16-byte id in unpadded base64url>
 *
 * strata.checkpoint (Strata's own, 32 bytes, big-endian):
 *     byte 0   4  magic "STCK"
 *     byte 4   2  version u16 = 1
 *     byte 6   2  zero
 *     byte 8   8  log start offset i64
 *     byte 16  8  recovery point i64: every segment with a base offset below it was synced
 *                 whole (log and indexes); recovery scans from the segment holding it
 *     byte 24  4  CRC-32C of bytes 0..23
 *     byte 28  4  zero
 *   Rewritten in place with one 32-byte pwrite; a torn or bad copy fails its CRC and is
 *   ignored (then every segment is checked, the start offset falls back to the first segment).
 *
 * .strata-clean-shutdown: empty; present only between a clean close and the next open.
 */
#ifndef ST_STORAGE_META_H
#define ST_STORAGE_META_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define ST_META_EPOCH_FILE    "leader-epoch-checkpoint"
#define ST_META_PARTMETA_FILE "partition.metadata"
#define ST_META_CKPT_FILE     "strata.checkpoint"
#define ST_META_CLEAN_FILE    ".strata-clean-shutdown"
#define ST_META_CKPT_SIZE     40 /* version 2; version 1 (32 bytes) is still read */
#define ST_META_MAX_EPOCHS    100000

typedef struct st_epoch_entry {
    int32_t epoch;
    int64_t start_offset;
} st_epoch_entry_t;

/* Parses a leader-epoch-checkpoint; *out is malloc'd. ST_E_CORRUPT when anything is off. */
int st_meta_parse_epochs(const uint8_t *p, size_t n, st_epoch_entry_t **out, int *count);
int st_meta_format_epochs(const st_epoch_entry_t *e, int n, st_buf_t *out);

typedef struct st_meta_ckpt {
    int64_t log_start_offset;
    int64_t recovery_point;
    int64_t clean_point; /* the cleaner's first dirty offset (0 in version 1) */
} st_meta_ckpt_t;

void st_meta_encode_ckpt(const st_meta_ckpt_t *c, uint8_t out[ST_META_CKPT_SIZE]);
int st_meta_decode_ckpt(const uint8_t *p, size_t n, st_meta_ckpt_t *c);

int st_meta_parse_partition_metadata(const uint8_t *p, size_t n, uint8_t id[16]);
/* Writes the file's text into out (at least 64 bytes); returns its length. */
int st_meta_format_partition_metadata(const uint8_t id[16], char *out, size_t n);

#endif
