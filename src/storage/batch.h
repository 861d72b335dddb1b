/*
 * batch.h — Kafka RecordBatch v2 (magic 2): layout, header parse, validation, record walk.
 *
 * A batch is the unit the log stores, as the producer sent it, with the base offset and the
 * partition leader epoch filled in by the broker. All integers big-endian.
 *
 *   byte  size  field                    covered by CRC
 *   0     8     baseOffset      i64      no   (set by the broker)
 *   8     4     batchLength     i32      no   bytes after this field: total size = 12 + batchLength
 *   12    4     partitionLeaderEpoch i32 no   (set by the broker)
 *   16    1     magic           i8       no   must be 2
 *   17    4     crc             u32      no   CRC-32C of bytes [21, 12 + batchLength)
 *   21    2     attributes      i16      yes  bits 0-2 compression (0 none, 1 gzip, 2 snappy,
 *                                             3 lz4, 4 zstd), bit 3 timestamp type (1 =
 *                                             LogAppendTime), bit 4 transactional, bit 5 control,
 *                                             bit 6 delete horizon set
 *   23    4     lastOffsetDelta i32      yes  records carry offset deltas 0..lastOffsetDelta
 *   27    8     baseTimestamp   i64      yes  (firstTimestamp)
 *   35    8     maxTimestamp    i64      yes  (the broker overwrites it for LogAppendTime)
 *   43    8     producerId      i64      yes
 *   51    2     producerEpoch   i16      yes
 *   53    4     baseSequence    i32      yes
 *   57    4     recordsCount    i32      yes
 *   61    ...   records                  yes  possibly compressed as a whole
 *
 * One record (uncompressed), varints zigzag-encoded unless marked u:
 *
 *   length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
 *   keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
 *   headerCount varint | headers: (keyLength varint | key | valueLength varint | value)*
 *
 * where length counts the bytes after the length field itself. The smallest record is 7 bytes
 * (every field one byte: length 6, attributes, zero deltas, null key and value, no headers).
 *
 * A compressed batch holds the same records, compressed as one stream (codec.h).
 *
 * A producer's batch holds records with offset deltas 0..lastOffsetDelta, recordsCount of them.
 * Log compaction (st_batch_filter) keeps only some: a rebuilt batch keeps its header's offsets,
 * so its records' deltas only increase within 0..lastOffsetDelta and recordsCount may be
 * smaller than lastOffsetDelta + 1, down to 0 with no record bytes at all (batchLength 49).
 * st_batch_check and the walks accept such batches; st_batch_validate_client does not.
 *
 * Functions here read and write caller memory; validating, walking or filtering a compressed
 * batch also allocates, a bounded amount (codec.h). Each thread keeps one decompression reader
 * per codec and one 64 KiB window from one batch to the next (a reader only while it holds at
 * most 4 MiB), freed when the thread exits; the rest is freed before the call returns. Any
 * thread.
 */
#ifndef ST_STORAGE_BATCH_H
#define ST_STORAGE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define ST_BATCH_OFF_BASE_OFFSET       0
#define ST_BATCH_OFF_LENGTH            8
#define ST_BATCH_OFF_LEADER_EPOCH      12
#define ST_BATCH_OFF_MAGIC             16
#define ST_BATCH_OFF_CRC               17
#define ST_BATCH_OFF_ATTRIBUTES        21
#define ST_BATCH_OFF_LAST_OFFSET_DELTA 23
#define ST_BATCH_OFF_BASE_TIMESTAMP    27
#define ST_BATCH_OFF_MAX_TIMESTAMP     35
#define ST_BATCH_OFF_PRODUCER_ID       43
#define ST_BATCH_OFF_PRODUCER_EPOCH    51
#define ST_BATCH_OFF_BASE_SEQUENCE     53
#define ST_BATCH_OFF_RECORDS_COUNT     57
#define ST_BATCH_HEADER_SIZE           61 /* the records start here */
#define ST_BATCH_LOG_OVERHEAD          12 /* baseOffset + batchLength precede what length counts */
#define ST_BATCH_CRC_START             21 /* first byte the CRC covers */
#define ST_BATCH_MAGIC_V2              2

#define ST_BATCH_ATTR_COMPRESSION_MASK 0x07
#define ST_BATCH_ATTR_LOG_APPEND_TIME  0x08
#define ST_BATCH_ATTR_TRANSACTIONAL    0x10
#define ST_BATCH_ATTR_CONTROL          0x20
#define ST_BATCH_ATTR_DELETE_HORIZON   0x40

/* Sanity bound on any batch found on disk or on the wire; a length above it is corruption. */
#define ST_BATCH_MAX_SIZE (INT32_MAX - 16)

/* The smallest record, in bytes (see above). */
#define ST_BATCH_MIN_RECORD_SIZE 7

/*
 * How far a producer batch's records may expand when decompressed, as a multiple of the
 * max.message.bytes the batch is held to: ST_BATCH_INFLATE_FACTOR * max_bytes bytes, 64 MiB at
 * Kafka's default of 1 MiB. Clients size batches before compressing them (librdkafka's
 * batch.size and message.max.bytes, 1 MB by default; the Java client's batch.size, 16 KiB,
 * stretched by its compression-ratio estimate), so a real batch stays far below this even for
 * very compressible data. The bound is on the work: checking a batch costs at most this many
 * bytes of decompression (tens of milliseconds for zstd or lz4 at the default), never the
 * gigabytes a kilobyte of crafted gzip or zstd can claim; memory stays bounded regardless
 * (codec.h).
 */
#define ST_BATCH_INFLATE_FACTOR 64

/* The decoded header. Fields keep the protocol's names. */
typedef struct st_batch_hdr {
    int64_t base_offset;
    int32_t batch_length;
    int32_t partition_leader_epoch;
    int8_t magic;
    uint32_t crc;
    int16_t attributes;
    int32_t last_offset_delta;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t records_count;
} st_batch_hdr_t;

/* Total bytes of the batch, header included. */
static inline int64_t st_batch_size(const st_batch_hdr_t *h)
{
    return ST_BATCH_LOG_OVERHEAD + (int64_t)h->batch_length;
}
static inline int64_t st_batch_last_offset(const st_batch_hdr_t *h)
{
    return h->base_offset + h->last_offset_delta;
}
static inline int st_batch_compression(const st_batch_hdr_t *h)
{
    return h->attributes & ST_BATCH_ATTR_COMPRESSION_MASK;
}

/*
 * Decodes the 61-byte header at p (n bytes available). Checks only what the header alone can
 * tell: n >= 61 (else ST_E_TRUNCATED), magic 2 (else ST_E_UNSUPPORTED), batchLength >= 49 and
 * <= ST_BATCH_MAX_SIZE (else ST_E_CORRUPT). Does not look at the CRC or the records.
 */
int st_batch_parse_hdr(const uint8_t *p, size_t n, st_batch_hdr_t *h);

/* CRC-32C of a whole batch of `size` bytes, over [21, size). size must be >= 61. */
uint32_t st_batch_compute_crc(const uint8_t *batch, size_t size);

/*
 * Checks a batch as stored: header as st_batch_parse_hdr, size <= n (else ST_E_TRUNCATED),
 * lastOffsetDelta >= 0 and the CRC (else ST_E_CORRUPT). Fills h. Used by recovery and reads.
 */
int st_batch_check(const uint8_t *p, size_t n, st_batch_hdr_t *h);

/* Why a client batch was refused; the Kafka layer maps the code, the text goes to the log. */
typedef struct st_batch_verdict {
    int err;          /* 0 or the code returned */
    const char *why;  /* static text */
    int64_t position; /* byte offset of the offending batch within the input */
} st_batch_verdict_t;

/*
 * Validates one batch from a producer at p (n bytes remain in the request's records): everything
 * st_batch_check does, plus: records count >= 1 and == lastOffsetDelta + 1, control bit clear,
 * size <= max_bytes, a known codec, and that the records -- decompressed first for a compressed
 * batch, as a stream through a bounded window -- walk exactly to the end: each parses, offset
 * deltas run 0..n-1, their number is recordsCount, and nothing follows the last. An uncompressed
 * batch claiming more records than its size can hold (ST_BATCH_MIN_RECORD_SIZE each) is refused
 * before the walk. Returns 0 and the header and size, or:
 *   ST_E_CORRUPT      bad length bounds, CRC mismatch, records not parsing, compressed bytes
 *                     that do not decompress, bytes after the last record    -> CORRUPT_MESSAGE
 *   ST_E_TRUNCATED    the input ends inside the batch                        -> CORRUPT_MESSAGE
 *   ST_E_UNSUPPORTED  magic is not 2                 -> UNSUPPORTED_FOR_MESSAGE_FORMAT
 *   ST_E_TOO_LARGE    size > max_bytes, or records decompressing to more than
 *                     ST_BATCH_INFLATE_FACTOR * max_bytes bytes              -> MESSAGE_TOO_LARGE
 *   ST_E_MALFORMED    count mismatch (with lastOffsetDelta, with the records, or more than the
 *                     size can hold), count < 1, control bit, bad deltas,
 *                     unknown codec                                          -> INVALID_RECORD
 *   -ENOMEM
 * v (may be NULL) receives the reason.
 */
int st_batch_validate_client(const uint8_t *p, size_t n, int64_t max_bytes, st_batch_hdr_t *h,
                             st_batch_verdict_t *v);
/* The same, and with need_keys (a compacted log) a record without a key -- found only once the
 * whole batch passed every check above -- gives ST_E_NO_KEY (-> INVALID_RECORD). */
int st_batch_validate_produce(const uint8_t *p, size_t n, int64_t max_bytes, bool need_keys,
                              st_batch_hdr_t *h, st_batch_verdict_t *v);

/* Writers of the broker-owned fields. None of these touch CRC-covered bytes. */
void st_batch_set_base_offset(uint8_t *batch, int64_t base_offset);
void st_batch_set_leader_epoch(uint8_t *batch, int32_t epoch);
/* Sets the LogAppendTime attribute and maxTimestamp (both CRC-covered), then rewrites the CRC. */
void st_batch_set_log_append_time(uint8_t *batch, size_t size, int64_t ts);

/*
 * One record. From st_batch_iter_next the pointers alias the (uncompressed) batch; from
 * st_batch_walk they point into the batch or into the walk's decompression window, valid only
 * during the callback.
 */
typedef struct st_batch_record {
    int64_t offset;    /* base offset + offset delta */
    int64_t timestamp; /* base timestamp + delta, or the max timestamp for LogAppendTime */
    int8_t attributes;
    const uint8_t *key;
    int32_t key_len; /* -1 for null */
    const uint8_t *value;
    int32_t value_len; /* -1 for null */
    int32_t header_count;
    const uint8_t *headers; /* raw header bytes */
    size_t headers_len;
    const uint8_t *raw; /* the whole record as stored, its length varint included */
    size_t raw_len;
} st_batch_record_t;

typedef struct st_batch_iter {
    const uint8_t *p; /* next record */
    const uint8_t *end;
    st_batch_hdr_t hdr;
    int32_t index; /* records returned so far */
} st_batch_iter_t;

/*
 * Starts walking the records of an uncompressed batch (size bytes at batch, already checked).
 * Returns ST_E_UNSUPPORTED for a compressed batch.
 */
int st_batch_iter_init(st_batch_iter_t *it, const uint8_t *batch, size_t size);
/* Returns 1 and the next record, 0 at the end, ST_E_CORRUPT when the bytes do not parse. */
int st_batch_iter_next(st_batch_iter_t *it, st_batch_record_t *rec);

/*
 * Calls fn for every record of the batch (size bytes at batch, already checked with
 * st_batch_check), decompressing as needed, bounded like validation (max_out bytes of
 * decompressed records, ST_E_TOO_LARGE beyond). rec->key/value/headers/raw point into memory
 * valid only during the call. fn returns 0 to go on, non-zero to stop (returned as is).
 * The records must parse to the end of the batch (or of its compressed stream), number
 * recordsCount, and carry offset deltas that increase within 0..lastOffsetDelta; a batch with
 * recordsCount 0 and no record bytes has no records, whatever its codec. Memory: for a
 * compressed batch, the codec reader's (codec.h) and a 64 KiB window, grown to hold the
 * largest record whole (at most twice the bytes decompressed, so within 2 * max_out).
 * Returns 0, fn's value, ST_E_CORRUPT (header, records or stream do not parse, unknown codec,
 * counts or deltas as above), ST_E_TOO_LARGE, -ENOMEM. fn may have been called for earlier
 * records when an error is found.
 */
int st_batch_walk(const uint8_t *batch, size_t size, int64_t max_out,
                  int (*fn)(void *arg, const st_batch_record_t *rec), void *arg);

/*
 * Appends to out a copy of the batch (size bytes at batch, checked; not inside out) holding
 * only the records for which keep(arg, rec) is true, in order and byte for byte as they were
 * (offset and timestamp deltas unchanged). The header keeps baseOffset, partitionLeaderEpoch,
 * magic, attributes (codec, timestamp type, transactional, control, delete-horizon bits),
 * lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch and baseSequence;
 * recordsCount and batchLength are the new ones, and the CRC is recomputed. A compressed batch
 * is recompressed with its own codec (snappy in the framing it came in: raw or xerial; the
 * others as codec.h writes them). keep sees records as st_batch_walk gives them.
 * *kept receives how many records were kept; when none, nothing is appended unless
 * keep_empty, which appends the header alone with recordsCount 0 and no record bytes (Kafka
 * keeps the last batch of each idempotent producer that way, so producer state still
 * rebuilds). Such an empty batch has its codec bits cleared, as Kafka writes it: a compressed
 * batch must carry a stream, and clients decompress whatever a batch's codec names.
 * On error nothing is appended. Returns 0, ST_E_CORRUPT (as st_batch_walk), ST_E_TOO_LARGE
 * (decompression past max_out, or a result over ST_BATCH_MAX_SIZE), -ENOMEM.
 */
int st_batch_filter(const uint8_t *batch, size_t size, int64_t max_out,
                    bool (*keep)(void *arg, const st_batch_record_t *rec), void *arg,
                    bool keep_empty, st_buf_t *out, int32_t *kept);

/*
 * Control batches (Kafka's transaction markers): attributes transactional + control, base
 * sequence -1, one record whose key is version int16 (0) + type int16 (0 ABORT, 1 COMMIT) and
 * value version int16 (0) + coordinator epoch int32. st_batch_control_build writes one of
 * ST_BATCH_CONTROL_SIZE bytes (base offset and leader epoch 0: the log sets them, outside the
 * CRC). st_batch_control_parse reads a checked control batch: 0 with the type and epoch,
 * ST_E_NOT_FOUND when it holds no marker (emptied by compaction, or another control type),
 * ST_E_CORRUPT when its record does not parse.
 */
#define ST_BATCH_CONTROL_SIZE 78
#define ST_CONTROL_ABORT      0
#define ST_CONTROL_COMMIT     1
size_t st_batch_control_build(uint8_t *out, int64_t producer_id, int16_t producer_epoch,
                              bool commit, int32_t coordinator_epoch, int64_t ts);
int st_batch_control_parse(const uint8_t *batch, size_t size, int16_t *type,
                           int32_t *coordinator_epoch);

#endif
