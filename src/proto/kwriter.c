/* kwriter.c — primitive encodings for the Kafka protocol codecs. */
#include "proto/kwriter.h"

#include <string.h>

#include "base/err.h"
#include "base/varint.h"

void st_kwriter_i8(st_kwriter_t *w, int8_t v)
{
    st_buf_put_u8(w->buf, (uint8_t)v);
}

void st_kwriter_i16(st_kwriter_t *w, int16_t v)
{
    st_buf_put_be16(w->buf, (uint16_t)v);
}

void st_kwriter_u16(st_kwriter_t *w, uint16_t v)
{
    st_buf_put_be16(w->buf, v);
}

void st_kwriter_i32(st_kwriter_t *w, int32_t v)
{
    st_buf_put_be32(w->buf, (uint32_t)v);
}

void st_kwriter_u32(st_kwriter_t *w, uint32_t v)
{
    st_buf_put_be32(w->buf, v);
}

void st_kwriter_i64(st_kwriter_t *w, int64_t v)
{
    st_buf_put_be64(w->buf, (uint64_t)v);
}

void st_kwriter_f64(st_kwriter_t *w, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    st_buf_put_be64(w->buf, u);
}

void st_kwriter_bool(st_kwriter_t *w, bool v)
{
    st_buf_put_u8(w->buf, v ? 1 : 0);
}

void st_kwriter_uuid(st_kwriter_t *w, const st_kuuid_t *v)
{
    st_buf_append(w->buf, v->b, 16);
}

void st_kwriter_varint(st_kwriter_t *w, int32_t v)
{
    uint8_t t[ST_VARINT32_MAX];
    st_buf_append(w->buf, t, (size_t)st_varint32_encode(t, v));
}

void st_kwriter_varlong(st_kwriter_t *w, int64_t v)
{
    uint8_t t[ST_VARINT64_MAX];
    st_buf_append(w->buf, t, (size_t)st_varint64_encode(t, v));
}

void st_kwriter_uvarint(st_kwriter_t *w, uint32_t v)
{
    uint8_t t[ST_VARINT32_MAX];
    st_buf_append(w->buf, t, (size_t)st_uvarint32_encode(t, v));
}

/* Writes a length prefix (-1 = null) in the compact, int32 (wide) or int16 form. */
static int write_len(st_kwriter_t *w, bool compact, bool wide, bool nullable, int32_t len)
{
    if (len < -1 || (len == -1 && !nullable))
        return ST_E_INVALID;
    if (!wide && len > INT16_MAX) /* strings are limited to 32767 bytes in either form */
        return ST_E_INVALID;
    if (compact)
        st_kwriter_uvarint(w, (uint32_t)len + 1);
    else if (wide)
        st_kwriter_i32(w, len);
    else
        st_kwriter_i16(w, (int16_t)len);
    return 0;
}

int st_kwriter_str(st_kwriter_t *w, bool compact, bool nullable, st_kstr_t s)
{
    if (s.len > 0 && !s.ptr)
        return ST_E_INVALID;
    int rc = write_len(w, compact, false, nullable, s.len);
    if (rc == 0 && s.len > 0)
        st_buf_append(w->buf, s.ptr, (size_t)s.len);
    return rc;
}

int st_kwriter_bytes(st_kwriter_t *w, bool compact, bool nullable, st_kbytes_t b)
{
    if (b.len > 0 && !b.ptr)
        return ST_E_INVALID;
    int rc = write_len(w, compact, true, nullable, b.len);
    if (rc == 0 && b.len > 0)
        st_buf_append(w->buf, b.ptr, (size_t)b.len);
    return rc;
}

int st_kwriter_records(st_kwriter_t *w, bool compact, bool nullable, const st_krecords_t *rec)
{
    if (rec->ext) {
        if (!w->put_ext || rec->len < 0)
            return ST_E_INVALID;
        int rc = write_len(w, compact, true, nullable, rec->len);
        return rc < 0 ? rc : w->put_ext(w, rec->ext, rec->len);
    }
    if (rec->len > 0 && !rec->ptr)
        return ST_E_INVALID;
    int rc = write_len(w, compact, true, nullable, rec->len);
    if (rc == 0 && rec->len > 0)
        st_buf_append(w->buf, rec->ptr, (size_t)rec->len);
    return rc;
}

int st_kwriter_count(st_kwriter_t *w, bool compact, bool nullable, int32_t count, const void *elems)
{
    if (count > 0 && !elems)
        return ST_E_INVALID;
    return write_len(w, compact, true, nullable, count);
}

size_t st_kwriter_tag_begin(st_kwriter_t *w, uint32_t tag)
{
    st_kwriter_uvarint(w, tag);
    return w->buf->len;
}

void st_kwriter_tag_end(st_kwriter_t *w, size_t start)
{
    st_buf_t *b = w->buf;
    if (b->oom || start > b->len)
        return;
    size_t size = b->len - start;
    uint8_t t[ST_VARINT32_MAX];
    int k = st_uvarint32_encode(t, (uint32_t)size);
    if (!st_buf_extend(b, (size_t)k))
        return;
    memmove(b->data + start + k, b->data + start, size);
    memcpy(b->data + start, t, (size_t)k);
}
