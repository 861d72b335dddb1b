/* varint.c — LEB128 and zigzag varints, bounds-checked. */
#include "base/varint.h"

#include "base/err.h"

static int st_uvarint_decode(const uint8_t *p, size_t n, uint64_t *out, int maxlen)
{
    uint64_t v = 0;
    for (int i = 0; i < maxlen; i++) {
        if ((size_t)i >= n)
            return ST_E_TRUNCATED;
        uint8_t b = p[i];
        /* The last permitted byte may only carry the bits the type has left. */
        if (i == maxlen - 1) {
            int bits = maxlen == ST_VARINT32_MAX ? 32 - 28 : 64 - 63;
            if (b >> bits)
                return ST_E_MALFORMED;
        }
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return i + 1;
        }
    }
    return ST_E_MALFORMED;
}

int st_uvarint32_decode(const uint8_t *p, size_t n, uint32_t *out)
{
    uint64_t v;
    int rc = st_uvarint_decode(p, n, &v, ST_VARINT32_MAX);
    if (rc > 0)
        *out = (uint32_t)v;
    return rc;
}

int st_uvarint64_decode(const uint8_t *p, size_t n, uint64_t *out)
{
    return st_uvarint_decode(p, n, out, ST_VARINT64_MAX);
}

int st_varint32_decode(const uint8_t *p, size_t n, int32_t *out)
{
    uint32_t v;
    int rc = st_uvarint32_decode(p, n, &v);
    if (rc > 0)
        *out = (int32_t)(v >> 1) ^ -(int32_t)(v & 1);
    return rc;
}

int st_varint64_decode(const uint8_t *p, size_t n, int64_t *out)
{
    uint64_t v;
    int rc = st_uvarint64_decode(p, n, &v);
    if (rc > 0)
        *out = st_unzigzag64(v);
    return rc;
}

int st_uvarint64_encode(uint8_t *p, uint64_t v)
{
    int i = 0;
    while (v >= 0x80) {
        p[i++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[i++] = (uint8_t)v;
    return i;
}

int st_uvarint32_encode(uint8_t *p, uint32_t v)
{
    return st_uvarint64_encode(p, v);
}

int st_varint32_encode(uint8_t *p, int32_t v)
{
    return st_uvarint64_encode(p, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

int st_varint64_encode(uint8_t *p, int64_t v)
{
    return st_uvarint64_encode(p, st_zigzag64(v));
}

int st_uvarint64_size(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

int st_varint64_size(int64_t v)
{
    return st_uvarint64_size(st_zigzag64(v));
}
