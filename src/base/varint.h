/*
 * varint.h — unsigned (LEB128) and zigzag varints, as the Kafka protocol uses.
 *
 * Decoders take the bytes available and never read past them; they return the number of bytes
 * consumed, or a negative error: ST_E_TRUNCATED when the input ends inside the varint,
 * ST_E_MALFORMED when it is longer than the type allows. Encoders write at most
 * ST_VARINT32_MAX / ST_VARINT64_MAX bytes and return the count written.
 */
#ifndef ST_BASE_VARINT_H
#define ST_BASE_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define ST_VARINT32_MAX 5
#define ST_VARINT64_MAX 10

int st_uvarint32_decode(const uint8_t *p, size_t n, uint32_t *out);
int st_uvarint64_decode(const uint8_t *p, size_t n, uint64_t *out);
int st_varint32_decode(const uint8_t *p, size_t n, int32_t *out); /* zigzag */
int st_varint64_decode(const uint8_t *p, size_t n, int64_t *out); /* zigzag */

int st_uvarint32_encode(uint8_t *p, uint32_t v);
int st_uvarint64_encode(uint8_t *p, uint64_t v);
int st_varint32_encode(uint8_t *p, int32_t v);
int st_varint64_encode(uint8_t *p, int64_t v);

/* Bytes the encoding of v takes. */
int st_uvarint64_size(uint64_t v);
int st_varint64_size(int64_t v);

static inline uint64_t st_zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}
static inline int64_t st_unzigzag64(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

#endif
