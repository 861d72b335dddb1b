/* kformat.c — JSON-like rendering of protocol values. */
#include "proto/kformat.h"

#include <stdio.h>
#include <string.h>

/* Byte fields show at most this many bytes of hex. */
#define PREVIEW 16

void st_kfmt_raw(st_buf_t *b, const char *s)
{
    st_buf_append(b, s, strlen(s));
}

void st_kfmt_key(st_buf_t *b, const char *name, bool *first)
{
    if (!*first)
        st_buf_put_u8(b, ',');
    *first = false;
    st_buf_put_u8(b, '"');
    st_kfmt_raw(b, name);
    st_kfmt_raw(b, "\":");
}

void st_kfmt_i64(st_buf_t *b, int64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%lld", (long long)v);
    st_buf_append(b, t, (size_t)n);
}

void st_kfmt_f64(st_buf_t *b, double v)
{
    char t[32];
    int n = snprintf(t, sizeof t, "%.17g", v);
    st_buf_append(b, t, (size_t)n);
}

void st_kfmt_bool(st_buf_t *b, bool v)
{
    st_kfmt_raw(b, v ? "true" : "false");
}

void st_kfmt_str(st_buf_t *b, st_kstr_t s)
{
    static const char hex[] = "0123456789abcdef";
    if (s.len < 0) {
        st_kfmt_raw(b, "null");
        return;
    }
    st_buf_put_u8(b, '"');
    for (int32_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        if (c == '"' || c == '\\') {
            st_buf_put_u8(b, '\\');
            st_buf_put_u8(b, c);
        } else if (c < 0x20 || c == 0x7f) {
            char t[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            st_buf_append(b, t, sizeof t);
        } else {
            st_buf_put_u8(b, c);
        }
    }
    st_buf_put_u8(b, '"');
}

void st_kfmt_bytes(st_buf_t *b, const uint8_t *p, int32_t len)
{
    static const char hex[] = "0123456789abcdef";
    if (len < 0) {
        st_kfmt_raw(b, "null");
        return;
    }
    char t[48];
    int n = snprintf(t, sizeof t, "\"<%ld bytes", (long)len);
    st_buf_append(b, t, (size_t)n);
    if (len > 0 && p) {
        st_buf_put_u8(b, ' ');
        for (int32_t i = 0; i < len && i < PREVIEW; i++) {
            st_buf_put_u8(b, (uint8_t)hex[p[i] >> 4]);
            st_buf_put_u8(b, (uint8_t)hex[p[i] & 15]);
        }
        if (len > PREVIEW)
            st_kfmt_raw(b, "...");
    }
    st_kfmt_raw(b, ">\"");
}

void st_kfmt_records(st_buf_t *b, const st_krecords_t *r)
{
    if (r->ext && r->len >= 0) {
        char t[48];
        int n = snprintf(t, sizeof t, "\"<%ld bytes, external>\"", (long)r->len);
        st_buf_append(b, t, (size_t)n);
        return;
    }
    st_kfmt_bytes(b, r->ptr, r->len);
}

void st_kfmt_uuid(st_buf_t *b, const st_kuuid_t *u)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char out[24];
    int o = 0;
    /* 16 bytes = 5 groups of 3 plus 1; URL-safe base64 without padding is 22 characters. */
    for (int i = 0; i < 15; i += 3) {
        uint32_t x = (uint32_t)u->b[i] << 16 | (uint32_t)u->b[i + 1] << 8 | u->b[i + 2];
        out[o++] = b64[x >> 18 & 63];
        out[o++] = b64[x >> 12 & 63];
        out[o++] = b64[x >> 6 & 63];
        out[o++] = b64[x & 63];
    }
    out[o++] = b64[u->b[15] >> 2];
    out[o++] = b64[(u->b[15] & 3) << 4];
    st_buf_put_u8(b, '"');
    st_buf_append(b, out, (size_t)o);
    st_buf_put_u8(b, '"');
}
