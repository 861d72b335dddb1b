/*
 * codec.h — decompression of a RecordBatch's records, as Kafka clients compress them, and
 * compression of records the way those clients read them back (for the log cleaner).
 *
 * The compression bits of a batch's attributes name the codec; the bytes after the 61-byte
 * header are then one compressed stream holding the records:
 *
 *   1 gzip    a gzip stream (RFC 1952); concatenated members are read one after another
 *   2 snappy  one raw snappy block (librdkafka), or snappy-java's framing (Java clients):
 *
 *               byte 0   8   magic 82 'S' 'N' 'A' 'P' 'P' 'Y' 00
 *               byte 8   4   version, BE32
 *               byte 12  4   minimum compatible version, BE32
 *               byte 16  ... blocks: [BE32 compressed length][raw snappy block] ...
 *
 *   3 lz4     LZ4 frames (the frame format; Kafka's pre-v2 broken header checksum does not occur
 *             in v2 batches), concatenated frames read one after another
 *   4 zstd    zstd frames, with or without a content size, concatenated frames likewise
 *
 * A reader hands out the decompressed bytes piece by piece into the caller's buffer, so what
 * it holds does not grow with the output:
 *   gzip   zlib's 32 KiB window and state;
 *   lz4    the frame context, plus at most one block (4 MiB at most) when the caller's buffer
 *          is smaller than a block;
 *   zstd   the stream context and the frame's window, which must be at most 2^27 bytes
 *          (zstd's own default limit, and what Kafka's broker accepts) else ST_E_TOO_LARGE;
 *          pages of it are only touched as output is produced;
 *   snappy one raw block at a time, whose claimed length is checked before anything is
 *          allocated: at most max_out (else ST_E_TOO_LARGE) and at most what the block's bytes
 *          could expand to (snappy's densest element turns 3 bytes into 64, so 22 times the
 *          block's size; else ST_E_CORRUPT).
 * The work is bounded by max_out: a reader stops with ST_E_TOO_LARGE as soon as its output
 * would pass max_out bytes, so a small input that would expand without bound (a decompression
 * bomb) costs at most max_out bytes of decompression.
 *
 * A reader belongs to the thread that created it; any thread may create one.
 *
 * st_codec_compress writes what a Java client and librdkafka both read: a gzip stream (zlib's
 * default level), one raw snappy block or snappy-java's framing (header version 1, minimum
 * compatible version 1, 32 KiB blocks), one LZ4 frame of independent 64 KiB blocks with no
 * content size and no checksums (Java's KafkaLZ4BlockInputStream decompresses each block on
 * its own), one zstd frame at level 3 (Kafka's default) with its content size.
 */
#ifndef ST_STORAGE_CODEC_H
#define ST_STORAGE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define ST_CODEC_NONE   0
#define ST_CODEC_GZIP   1
#define ST_CODEC_SNAPPY 2
#define ST_CODEC_LZ4    3
#define ST_CODEC_ZSTD   4

typedef struct st_codec_reader st_codec_reader_t;

/*
 * Creates a reader of the n compressed bytes at in (which must stay valid and unchanged until
 * the reader is destroyed) for codec 1..4, producing at most max_out bytes. Returns 0, or
 * ST_E_INVALID for another codec, -ENOMEM.
 */
int st_codec_reader_create(int codec, const uint8_t *in, size_t n, int64_t max_out,
                           st_codec_reader_t **out);

/*
 * Writes the next decompressed bytes into buf (cap >= 1 bytes, at most INT32_MAX). Returns how
 * many (>= 1), 0 once the input has ended cleanly with every frame complete, or:
 *   ST_E_CORRUPT    the input is not a valid stream of this codec, is truncated, or has bytes
 *                   after its last frame that do not start another
 *   ST_E_TOO_LARGE  the output would pass max_out bytes, or a zstd frame wants a larger window
 *   -ENOMEM
 * An error is sticky: every later call returns it.
 */
int st_codec_read(st_codec_reader_t *r, uint8_t *buf, size_t cap);

/* Total bytes st_codec_read has produced so far. */
int64_t st_codec_produced(const st_codec_reader_t *r);

/*
 * Points r at the n bytes at in as st_codec_reader_create would a new reader of its codec
 * (error, output count and stream state start afresh), keeping the memory r holds, so that a
 * caller decompressing many batches pays for a codec's context once. Returns 0, or
 * ST_E_INVALID when the library refuses the reset (r must then be destroyed).
 */
int st_codec_reader_reset(st_codec_reader_t *r, const uint8_t *in, size_t n, int64_t max_out);

/*
 * Bytes r holds now, as far as the libraries tell (zlib's state is fixed, liblz4 does not say:
 * at most one block, 4 MiB, beyond its context), for a caller deciding whether to keep it.
 */
size_t st_codec_reader_memory(const st_codec_reader_t *r);

void st_codec_reader_destroy(st_codec_reader_t *r);

/* How a codec's stream is framed, where it has more than one framing (snappy). */
#define ST_CODEC_FRAMING_PLAIN  0 /* the codec's own (for snappy: one raw block) */
#define ST_CODEC_FRAMING_XERIAL 1 /* snappy-java's framing */

/* The framing of the n compressed bytes at in under codec, as a reader would take it. */
int st_codec_framing(int codec, const uint8_t *in, size_t n);

/*
 * Appends the n bytes at in to out compressed with codec 1..4 in framing (ST_CODEC_FRAMING_*;
 * only snappy looks at it), as one stream st_codec_reader_create reads back. Returns 0, or
 * ST_E_INVALID for another codec, ST_E_TOO_LARGE for n > INT32_MAX, -ENOMEM. out is left as
 * it was on failure (except for its sticky oom flag).
 */
int st_codec_compress(int codec, int framing, const uint8_t *in, size_t n, st_buf_t *out);

#endif
