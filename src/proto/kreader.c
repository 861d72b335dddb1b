/* kreader.c — bounds-checked primitive reads for the Kafka protocol codecs. */
#include "proto/kreader.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/varint.h"

#define NEED(r, n)                                                                                 \
    do {                                                                                           \
        if (st_kreader_left(r) < (size_t)(n))                                                      \
            return ST_E_TRUNCATED;                                                                 \
    } while (0)

int st_kreader_i8(st_kreader_t *r, int8_t *v)
{
    NEED(r, 1);
    *v = (int8_t)r->p[0];
    r->p += 1;
    return 0;
}

int st_kreader_i16(st_kreader_t *r, int16_t *v)
{
    NEED(r, 2);
    *v = (int16_t)st_be16(r->p);
    r->p += 2;
    return 0;
}

int st_kreader_u16(st_kreader_t *r, uint16_t *v)
{
    NEED(r, 2);
    *v = st_be16(r->p);
    r->p += 2;
    return 0;
}

int st_kreader_i32(st_kreader_t *r, int32_t *v)
{
    NEED(r, 4);
    *v = (int32_t)st_be32(r->p);
    r->p += 4;
    return 0;
}

int st_kreader_u32(st_kreader_t *r, uint32_t *v)
{
    NEED(r, 4);
    *v = st_be32(r->p);
    r->p += 4;
    return 0;
}

int st_kreader_i64(st_kreader_t *r, int64_t *v)
{
    NEED(r, 8);
    *v = (int64_t)st_be64(r->p);
    r->p += 8;
    return 0;
}

int st_kreader_f64(st_kreader_t *r, double *v)
{
    NEED(r, 8);
    uint64_t u = st_be64(r->p);
    memcpy(v, &u, sizeof *v);
    r->p += 8;
    return 0;
}

int st_kreader_bool(st_kreader_t *r, bool *v)
{
    NEED(r, 1);
    *v = r->p[0] != 0;
    r->p += 1;
    return 0;
}

int st_kreader_uuid(st_kreader_t *r, st_kuuid_t *v)
{
    NEED(r, 16);
    memcpy(v->b, r->p, 16);
    r->p += 16;
    return 0;
}

int st_kreader_varint(st_kreader_t *r, int32_t *v)
{
    int n = st_varint32_decode(r->p, st_kreader_left(r), v);
    if (n < 0)
        return n;
    r->p += n;
    return 0;
}

int st_kreader_varlong(st_kreader_t *r, int64_t *v)
{
    int n = st_varint64_decode(r->p, st_kreader_left(r), v);
    if (n < 0)
        return n;
    r->p += n;
    return 0;
}

int st_kreader_uvarint(st_kreader_t *r, uint32_t *v)
{
    int n = st_uvarint32_decode(r->p, st_kreader_left(r), v);
    if (n < 0)
        return n;
    r->p += n;
    return 0;
}

/* Reads a length prefix: -1 for null, else 0..INT32_MAX; rejects null unless nullable. */
static int read_len(st_kreader_t *r, bool compact, bool wide, bool nullable, int32_t *len)
{
    int rc;
    if (compact) {
        uint32_t u;
        if ((rc = st_kreader_uvarint(r, &u)) < 0)
            return rc;
        if (u > (uint32_t)INT32_MAX)
            return ST_E_MALFORMED;
        *len = (int32_t)u - 1;
    } else if (wide) {
        if ((rc = st_kreader_i32(r, len)) < 0)
            return rc;
    } else {
        int16_t s;
        if ((rc = st_kreader_i16(r, &s)) < 0)
            return rc;
        *len = s;
    }
    if (*len < -1 || (*len == -1 && !nullable))
        return ST_E_MALFORMED;
    if (!wide && *len > INT16_MAX) /* strings are limited to 32767 bytes in either form */
        return ST_E_MALFORMED;
    return 0;
}

/* Reads the bytes of a length-prefixed field, pointing into the input. */
static int read_span(st_kreader_t *r, bool compact, bool wide, bool nullable, const uint8_t **ptr,
                     int32_t *len)
{
    int rc = read_len(r, compact, wide, nullable, len);
    if (rc < 0)
        return rc;
    if (*len < 0) {
        *ptr = NULL;
        return 0;
    }
    NEED(r, *len);
    *ptr = r->p;
    r->p += *len;
    return 0;
}

int st_kreader_str(st_kreader_t *r, bool compact, bool nullable, st_kstr_t *out)
{
    const uint8_t *p = NULL;
    int rc = read_span(r, compact, false, nullable, &p, &out->len);
    out->ptr = (const char *)p;
    return rc;
}

int st_kreader_bytes(st_kreader_t *r, bool compact, bool nullable, st_kbytes_t *out)
{
    return read_span(r, compact, true, nullable, &out->ptr, &out->len);
}

int st_kreader_records(st_kreader_t *r, bool compact, bool nullable, st_krecords_t *out)
{
    out->ext = NULL;
    return read_span(r, compact, true, nullable, &out->ptr, &out->len);
}

int st_kreader_count(st_kreader_t *r, bool compact, bool nullable, size_t min_elem, int32_t *count)
{
    int rc = read_len(r, compact, true, nullable, count);
    if (rc < 0)
        return rc;
    if (min_elem < 1)
        min_elem = 1;
    if (*count > 0 && (size_t)*count > st_kreader_left(r) / min_elem)
        return ST_E_TRUNCATED;
    return 0;
}

int st_kreader_tag(st_kreader_t *r, uint32_t *tag, st_kreader_t *field)
{
    uint32_t size;
    int rc;
    if ((rc = st_kreader_uvarint(r, tag)) < 0 || (rc = st_kreader_uvarint(r, &size)) < 0)
        return rc;
    NEED(r, size);
    field->p = r->p;
    field->end = r->p + size;
    field->arena = r->arena;
    r->p += size;
    return 0;
}

int st_kreader_skip_tags(st_kreader_t *r)
{
    uint32_t n, tag;
    st_kreader_t field;
    int rc = st_kreader_uvarint(r, &n);
    if (rc < 0)
        return rc;
    /* Each field takes at least two bytes, so a lying n runs out of input, never loops long. */
    for (uint32_t i = 0; i < n; i++)
        if ((rc = st_kreader_tag(r, &tag, &field)) < 0)
            return rc;
    return 0;
}

void *st_kreader_alloc(st_kreader_t *r, size_t n, size_t sz)
{
    if (sz && n > SIZE_MAX / sz)
        return NULL;
    size_t bytes = n * sz;
    return st_arena_zalloc(r->arena, bytes > 0 ? bytes : 1);
}
