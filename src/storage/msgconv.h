/*
 * msgconv.h — Kafka's legacy MessageSets (magic 0 and 1) to RecordBatch v2 and back.
 *
 * The log holds RecordBatch v2 only (batch.h). Produce v0-2 may carry the legacy formats;
 * st_msgconv_up turns such a set into one v2 batch before the append. Fetch v0-3 can only
 * carry them; st_msgconv_down turns the v2 batches a read returned into a legacy set (Kafka
 * 3.x's down-conversion). All integers big-endian.
 *
 *   MessageSet   (offset i64 | message_size i32 | message)*
 *   message v0   crc u32 | magic i8 (0) | attributes i8 | key bytes | value bytes
 *   message v1   crc u32 | magic i8 (1) | attributes i8 | timestamp i64 | key bytes | value bytes
 *   bytes        length i32 (-1 = null) | data
 *   crc          CRC-32 (IEEE, zlib's) of the message from magic to its end
 *   attributes   bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4), bit 3 (v1) LogAppendTime
 *
 * A compressed message (a "wrapper") has a null key and a value that is, compressed, a
 * MessageSet of uncompressed messages of the wrapper's magic ("inner" messages; no nesting
 * deeper than one). Inner offsets are absolute under magic 0; under magic 1 they are relative
 * (0, 1, ...) and the wrapper's offset is the absolute offset of the last inner message.
 * Under magic 0, LZ4 frames carry Kafka's old broken header checksum: the descriptor's HC byte
 * is the xxHash32 of the frame's magic number and descriptor together, not of the descriptor
 * alone (KAFKA-3160). Kafka ignores that byte when reading magic 0 and writes the broken one
 * when writing magic 0; so do these functions.
 *
 * Memory and work are bounded by the caller: decompression by max_out bytes per wrapper or
 * batch (codec.h), the output of a down-conversion by limit (see st_msgconv_down). Pure
 * functions over caller memory; any thread.
 */
#ifndef ST_STORAGE_MSGCONV_H
#define ST_STORAGE_MSGCONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define ST_MSGCONV_LOG_OVERHEAD  12 /* offset + message_size */
#define ST_MSGCONV_V0_HEADER     14 /* crc, magic, attributes, key and value lengths */
#define ST_MSGCONV_V1_HEADER     22 /* the same with the timestamp */
#define ST_MSGCONV_ATTR_LOG_TIME 0x08

/* The magic of the records a Produce carries: 0 or 1 for a legacy MessageSet, 2 for a
 * RecordBatch, -1 when there are too few bytes to tell (byte 16 in both layouts). */
int st_msgconv_magic(const uint8_t *p, size_t n);

/* What st_msgconv_up found. */
typedef struct st_msgconv_up_info {
    int32_t records; /* messages turned into records */
    int32_t wrappers;
    int codec;       /* of the last compressed wrapper (the batch's), or 0 */
    const char *why; /* static text when refused */
} st_msgconv_up_info_t;

/*
 * Appends to out one RecordBatch v2 holding every message of the legacy MessageSet at in (n
 * bytes), in order: base offset 0, no producer (id -1, epoch -1, sequence -1), CreateTime, the
 * messages' timestamps (-1 for magic 0), keys and values, no headers, offset deltas 0..count-1.
 * Compressed wrappers are unpacked and the batch is compressed with the codec of the last one
 * (snappy in the framing it came in), as Kafka's LogValidator does; uncompressed otherwise. Every
 * message's CRC is checked, inner ones too. Returns 0, or (out as it was):
 *   ST_E_CORRUPT      a CRC mismatch, a message whose sizes do not add up, a truncated set,
 *                     a wrapper that is empty or does not decompress   -> CORRUPT_MESSAGE
 *   ST_E_MALFORMED    magic above 1, inner magic unlike its wrapper's, nested compression,
 *                     a wrapper with a null value or no inner messages,
 *                     codec above 4, no messages at all                -> INVALID_RECORD
 *   ST_E_UNSUPPORTED  zstd (codec 4: not allowed before magic 2)       ->
 * UNSUPPORTED_COMPRESSION_TYPE ST_E_TOO_LARGE    decompressed wrappers past max_out bytes in all ->
 * MESSAGE_TOO_LARGE -ENOMEM
 */
int st_msgconv_up(const uint8_t *in, size_t n, int64_t max_out, st_buf_t *out,
                  st_msgconv_up_info_t *info);

typedef struct st_msgconv_down_opts {
    int8_t magic;         /* 0 or 1 */
    int64_t fetch_offset; /* records before it are left out (Kafka's down-conversion does) */
    int64_t limit;        /* output bytes to stop before (the first message always whole) */
    int64_t cap;          /* Fetch v0-2: output cut at this many bytes, even mid-message; -1 */
    int64_t max_out;      /* decompression bound per compressed batch */
    int64_t deadline_ns;  /* st_mono_ns() past which no further batch is started; 0: none */
} st_msgconv_down_opts_t;

typedef struct st_msgconv_down_res {
    int64_t records;     /* records written */
    int64_t batches;     /* v2 batches converted (control batches and skipped ones not counted) */
    int64_t next_offset; /* offset after the last record written (fetch_offset if none) */
    bool cut;            /* stopped at the limit (or at a zstd batch) before the input's end */
} st_msgconv_down_res_t;

/*
 * Appends to out the v2 batches at in (n bytes; a partial batch at the end is ignored) as a
 * legacy MessageSet of opts->magic: an uncompressed batch as one message per record, a
 * compressed one as one wrapper of the same codec (snappy in snappy-java's framing, LZ4 with
 * the magic 0 checksum quirk above) holding its records. Headers are dropped; control
 * batches and records before fetch_offset are skipped. Magic 1 messages carry the record's
 * timestamp, or the batch's LogAppendTime with attribute bit 3.
 *
 * Output is bounded: conversion stops before a message or wrapper that would take the output
 * past opts->limit bytes, except the first, which is written whole so that a client always
 * progresses (Kafka's lazy down-conversion does the same). cap >= 0 then cuts the output at
 * cap bytes, even inside a message (a partial message, as Fetch v0-2 answers one larger than
 * the partition's max bytes). Past deadline_ns no further batch is started (the output then
 * holds at least the first batch's records: the CPU bound of one call). Stops at a zstd batch (not
 * representable before magic 2). Returns 0 (possibly having written nothing: all control records),
 * or (out as it was): ST_E_UNSUPPORTED  the first batch to convert is zstd  ->
 * UNSUPPORTED_COMPRESSION_TYPE ST_E_CORRUPT      the first batch fails st_batch_check (a later one
 * ends the output), or a batch's records do not parse (st_batch_walk) ST_E_TOO_LARGE    a batch
 * decompresses past max_out -ENOMEM
 */
int st_msgconv_down(const uint8_t *in, size_t n, const st_msgconv_down_opts_t *opts, st_buf_t *out,
                    st_msgconv_down_res_t *res);

/* xxHash32 (the LZ4 frame's checksum), for the magic 0 quirk and its tests. */
uint32_t st_msgconv_xxh32(const uint8_t *p, size_t n, uint32_t seed);

#endif
