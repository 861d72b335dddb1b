/*
 * kwriter.h — appends Kafka protocol encodings to a growable buffer.
 *
 * Primitive writes cannot fail on their input; an allocation failure is sticky in buf->oom, and
 * the generated encoders check it once at the end (returning -ENOMEM). Writes of strings, bytes,
 * records and array counts validate their input and return ST_E_INVALID for a value the
 * protocol cannot carry (null where not nullable, a negative length other than -1, a count with
 * no elements behind it).
 *
 * put_ext: a record set whose ext is not NULL is not copied. The writer appends its length
 * prefix and calls w->put_ext(w, ext, len); the callee records that len bytes belong at the
 * current end of buf (for example a file range to sendfile) and returns 0 or a negative code.
 * Without put_ext such a record set is an error (ST_E_INVALID). ctx is the callee's own.
 *
 * A writer is owned by the thread (shard) that encodes.
 */
#ifndef ST_PROTO_KWRITER_H
#define ST_PROTO_KWRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "proto/ktypes.h"

typedef struct st_kwriter st_kwriter_t;
struct st_kwriter {
    st_buf_t *buf;
    int (*put_ext)(st_kwriter_t *w, void *ext, int32_t len);
    void *ctx;
};

static inline void st_kwriter_init(st_kwriter_t *w, st_buf_t *buf)
{
    w->buf = buf;
    w->put_ext = NULL;
    w->ctx = NULL;
}

void st_kwriter_i8(st_kwriter_t *w, int8_t v);
void st_kwriter_i16(st_kwriter_t *w, int16_t v);
void st_kwriter_i32(st_kwriter_t *w, int32_t v);
void st_kwriter_i64(st_kwriter_t *w, int64_t v);
void st_kwriter_u16(st_kwriter_t *w, uint16_t v);
void st_kwriter_u32(st_kwriter_t *w, uint32_t v);
void st_kwriter_f64(st_kwriter_t *w, double v);
void st_kwriter_bool(st_kwriter_t *w, bool v);
void st_kwriter_uuid(st_kwriter_t *w, const st_kuuid_t *v);
void st_kwriter_varint(st_kwriter_t *w, int32_t v);  /* zigzag */
void st_kwriter_varlong(st_kwriter_t *w, int64_t v); /* zigzag */
void st_kwriter_uvarint(st_kwriter_t *w, uint32_t v);

int st_kwriter_str(st_kwriter_t *w, bool compact, bool nullable, st_kstr_t s);
int st_kwriter_bytes(st_kwriter_t *w, bool compact, bool nullable, st_kbytes_t b);
int st_kwriter_records(st_kwriter_t *w, bool compact, bool nullable, const st_krecords_t *rec);
/* Writes an array count; elems must be non-NULL when count > 0. */
int st_kwriter_count(st_kwriter_t *w, bool compact, bool nullable, int32_t count,
                     const void *elems);

/* Starts a tagged field: writes the tag and returns where its value begins. */
size_t st_kwriter_tag_begin(st_kwriter_t *w, uint32_t tag);
/* Ends a tagged field whose value was written since st_kwriter_tag_begin: inserts its size. */
void st_kwriter_tag_end(st_kwriter_t *w, size_t start);

#endif
