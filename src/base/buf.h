/*
 * buf.h — growable byte buffer and big-endian helpers.
 *
 * st_buf_t owns heap memory: data[0..len) is valid, cap is the allocation. Writers append;
 * a failed allocation is sticky (buf->oom) so a long encoder can check once at the end.
 * The st_be_* helpers load and store big-endian integers at unaligned addresses.
 */
#ifndef ST_BASE_BUF_H
#define ST_BASE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct st_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    bool oom; /* an allocation failed; contents are incomplete */
} st_buf_t;

void st_buf_init(st_buf_t *b);
void st_buf_fini(st_buf_t *b);
/* Ensures room for n more bytes; returns 0 or -ENOMEM (and sets oom). */
int st_buf_reserve(st_buf_t *b, size_t n);
/* Appends n bytes; on failure sets oom and returns -ENOMEM. */
int st_buf_append(st_buf_t *b, const void *p, size_t n);
/* Appends n zero bytes and returns a pointer to them (NULL on failure). */
uint8_t *st_buf_extend(st_buf_t *b, size_t n);
/* Hands the memory to the caller and leaves the buffer empty. */
uint8_t *st_buf_steal(st_buf_t *b, size_t *len);
static inline void st_buf_clear(st_buf_t *b)
{
    b->len = 0;
    b->oom = false;
}

static inline uint16_t st_be16(const uint8_t *p)
{
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}
static inline uint32_t st_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t st_be64(const uint8_t *p)
{
    return (uint64_t)st_be32(p) << 32 | st_be32(p + 4);
}
static inline void st_put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void st_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void st_put_be64(uint8_t *p, uint64_t v)
{
    st_put_be32(p, (uint32_t)(v >> 32));
    st_put_be32(p + 4, (uint32_t)v);
}

static inline int st_buf_put_u8(st_buf_t *b, uint8_t v)
{
    return st_buf_append(b, &v, 1);
}
static inline int st_buf_put_be16(st_buf_t *b, uint16_t v)
{
    uint8_t t[2];
    st_put_be16(t, v);
    return st_buf_append(b, t, 2);
}
static inline int st_buf_put_be32(st_buf_t *b, uint32_t v)
{
    uint8_t t[4];
    st_put_be32(t, v);
    return st_buf_append(b, t, 4);
}
static inline int st_buf_put_be64(st_buf_t *b, uint64_t v)
{
    uint8_t t[8];
    st_put_be64(t, v);
    return st_buf_append(b, t, 8);
}

#endif
