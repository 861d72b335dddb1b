/*
 * kreader.h — bounds-checked reader over one Kafka protocol frame.
 *
 * A reader holds the unread bytes [p, end) and the arena that decoded arrays come from. Every
 * function checks the bytes left before it reads, advances p only past what it consumed, and
 * returns 0 or a negative code: ST_E_TRUNCATED when the input ends early (including a length or
 * count larger than the bytes left), ST_E_MALFORMED when the bytes cannot be valid (a negative
 * length other than -1, null where the field is not nullable, an over-long varint), -ENOMEM when
 * the arena is exhausted. Decoded strings and bytes point into the input (zero copy).
 *
 * Compact forms (flexible versions) carry lengths as unsigned varints holding length + 1, with 0
 * for null; classic forms use int16 (strings) or int32 (bytes, arrays) with -1 for null.
 *
 * A reader is owned by the thread (shard) that decodes the frame.
 */
#ifndef ST_PROTO_KREADER_H
#define ST_PROTO_KREADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "proto/ktypes.h"

typedef struct st_kreader {
    const uint8_t *p;   /* next unread byte */
    const uint8_t *end; /* one past the last byte */
    st_arena_t *arena;  /* decoded arrays are allocated here */
} st_kreader_t;

static inline void st_kreader_init(st_kreader_t *r, const void *data, size_t len, st_arena_t *arena)
{
    static const uint8_t empty[1];
    r->p = data ? (const uint8_t *)data : empty; /* NULL data of length 0 is an empty frame */
    r->end = r->p + (data ? len : 0);
    r->arena = arena;
}

static inline size_t st_kreader_left(const st_kreader_t *r)
{
    return (size_t)(r->end - r->p);
}

int st_kreader_i8(st_kreader_t *r, int8_t *v);
int st_kreader_i16(st_kreader_t *r, int16_t *v);
int st_kreader_i32(st_kreader_t *r, int32_t *v);
int st_kreader_i64(st_kreader_t *r, int64_t *v);
int st_kreader_u16(st_kreader_t *r, uint16_t *v);
int st_kreader_u32(st_kreader_t *r, uint32_t *v);
int st_kreader_f64(st_kreader_t *r, double *v);
/* Any non-zero byte reads as true, as the Java broker does. */
int st_kreader_bool(st_kreader_t *r, bool *v);
int st_kreader_uuid(st_kreader_t *r, st_kuuid_t *v);
int st_kreader_varint(st_kreader_t *r, int32_t *v);  /* zigzag */
int st_kreader_varlong(st_kreader_t *r, int64_t *v); /* zigzag */
int st_kreader_uvarint(st_kreader_t *r, uint32_t *v);

/* Reads a string: compact (flexible versions) or int16-prefixed; null only if nullable. */
int st_kreader_str(st_kreader_t *r, bool compact, bool nullable, st_kstr_t *out);
/* Reads a byte field: compact or int32-prefixed; null only if nullable. */
int st_kreader_bytes(st_kreader_t *r, bool compact, bool nullable, st_kbytes_t *out);
/* Reads a record set as opaque bytes (ext is set to NULL). */
int st_kreader_records(st_kreader_t *r, bool compact, bool nullable, st_krecords_t *out);

/*
 * Reads an array's element count (-1 for null, only if nullable). The count is rejected with
 * ST_E_TRUNCATED when count * min_elem exceeds the bytes left, so a lying count can never cause
 * an allocation larger than a small multiple of the input. min_elem must be at least 1.
 */
int st_kreader_count(st_kreader_t *r, bool compact, bool nullable, size_t min_elem, int32_t *count);

/* Reads one tagged field's header: its tag and size; sets *field to a reader over exactly its
 * bytes (same arena) and advances r past them. */
int st_kreader_tag(st_kreader_t *r, uint32_t *tag, st_kreader_t *field);

/* Reads a whole tagged-field section and ignores every field in it. */
int st_kreader_skip_tags(st_kreader_t *r);

/* Zeroed arena memory for n elements of size sz (overflow-checked); NULL when out of memory. */
void *st_kreader_alloc(st_kreader_t *r, size_t n, size_t sz);

#endif
