/*
 * ktypes.h — value types shared by the Kafka protocol codecs (generated and hand-written).
 *
 * Decoded strings, byte fields and record sets point into the input frame (zero copy): they stay
 * valid as long as the frame's bytes do. A length of -1 means null, for every type here. Strings
 * are not NUL-terminated. Any thread may use these; they own nothing.
 */
#ifndef ST_PROTO_KTYPES_H
#define ST_PROTO_KTYPES_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const char *ptr;
    int32_t len; /* -1: null */
} st_kstr_t;

typedef struct {
    const uint8_t *ptr;
    int32_t len; /* -1: null */
} st_kbytes_t;

typedef struct {
    uint8_t b[16];
} st_kuuid_t;

/*
 * A record set (a run of RecordBatch v2, stored and sent as opaque bytes). On encode, when ext is
 * not NULL the writer emits the length prefix for len bytes and then calls put_ext(ext, len)
 * instead of copying ptr, so the network layer can splice file ranges into a response.
 */
typedef struct {
    const uint8_t *ptr;
    int32_t len; /* -1: null */
    void *ext;   /* opaque handle for st_kwriter_t.put_ext, or NULL */
} st_krecords_t;

#define ST_KSTR_NULL   ((st_kstr_t){NULL, -1})
#define ST_KSTR_EMPTY  ((st_kstr_t){"", 0})
#define ST_KBYTES_NULL ((st_kbytes_t){NULL, -1})

/* A string from a C string literal or NUL-terminated buffer (NULL gives the null string). */
static inline st_kstr_t st_kstr(const char *s)
{
    return s ? (st_kstr_t){s, (int32_t)strlen(s)} : ST_KSTR_NULL;
}

static inline bool st_kstr_is_null(st_kstr_t s)
{
    return s.len < 0;
}

/* True when s holds exactly the bytes of the C string c (a null s equals only a NULL c). */
static inline bool st_kstr_eq(st_kstr_t s, const char *c)
{
    if (!c || s.len < 0)
        return !c && s.len < 0;
    size_t n = strlen(c);
    return (size_t)s.len == n && memcmp(s.ptr, c, n) == 0;
}

static inline bool st_kuuid_is_zero(const st_kuuid_t *u)
{
    static const st_kuuid_t zero;
    return memcmp(u->b, zero.b, sizeof zero.b) == 0;
}

#endif
