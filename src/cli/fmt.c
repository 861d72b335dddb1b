/*
 * fmt.c — message formatting for `strata consume` (see fmt.h).
 */
#include "cli/fmt.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int push(st_cli_fmt_t *f, size_t *cap, char kind, const char *lit, size_t len)
{
    if (kind == 0 && len == 0)
        return 0;
    if (kind == 0 && f->n && f->pieces[f->n - 1].kind == 0 &&
        f->pieces[f->n - 1].lit + f->pieces[f->n - 1].lit_len == lit) {
        f->pieces[f->n - 1].lit_len += len;
        return 0;
    }
    if (f->n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        st_cli_fmt_piece_t *p = realloc(f->pieces, c * sizeof(*p));
        if (!p)
            return -1;
        f->pieces = p;
        *cap = c;
    }
    f->pieces[f->n++] = (st_cli_fmt_piece_t){kind, lit, len};
    return 0;
}

int st_cli_fmt_compile(st_cli_fmt_t *f, const char *fmt, char *err, size_t errlen)
{
    memset(f, 0, sizeof(*f));
    size_t cap = 0, len = strlen(fmt);
    f->text = malloc(len + 1);
    if (!f->text)
        goto oom;
    /* Literals are unescaped into f->text; each piece points at its own run there. */
    char *w = f->text;
    for (size_t i = 0; i < len; i++) {
        char c = fmt[i];
        if (c == '%') {
            char d = fmt[i + 1];
            if (d == '%') {
                *w = '%';
                if (push(f, &cap, 0, w++, 1) < 0)
                    goto oom;
                i++;
                continue;
            }
            if (!d || !strchr("tpokvTKSh", d)) {
                snprintf(err, errlen,
                         "bad --format directive '%%%c' at position %zu (known: %%t %%p %%o %%k "
                         "%%v %%T %%K %%S %%h %%%%)",
                         d ? d : ' ', i);
                st_cli_fmt_fini(f);
                return -1;
            }
            if (push(f, &cap, d, NULL, 0) < 0)
                goto oom;
            i++;
            continue;
        }
        if (c == '\\' && fmt[i + 1]) {
            char d = fmt[i + 1];
            char e = d == 'n' ? '\n' : d == 't' ? '\t' : d == 'r' ? '\r' : d == '0' ? '\0' : d;
            *w = e;
            if (push(f, &cap, 0, w++, 1) < 0)
                goto oom;
            i++;
            continue;
        }
        *w = c;
        if (push(f, &cap, 0, w++, 1) < 0)
            goto oom;
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    st_cli_fmt_fini(f);
    return -1;
}

void st_cli_fmt_fini(st_cli_fmt_t *f)
{
    free(f->pieces);
    free(f->text);
    memset(f, 0, sizeof(*f));
}

static void put_i64(st_buf_t *out, int64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof(t), "%" PRId64, v);
    st_buf_append(out, t, (size_t)n);
}

void st_cli_fmt_render(const st_cli_fmt_t *f, const st_cli_msg_t *m, st_buf_t *out)
{
    for (size_t i = 0; i < f->n; i++) {
        const st_cli_fmt_piece_t *p = &f->pieces[i];
        switch (p->kind) {
        case 0:
            st_buf_append(out, p->lit, p->lit_len);
            break;
        case 't':
            st_buf_append(out, m->topic, strlen(m->topic));
            break;
        case 'p':
            put_i64(out, m->partition);
            break;
        case 'o':
            put_i64(out, m->offset);
            break;
        case 'T':
            put_i64(out, m->timestamp);
            break;
        case 'k':
            if (m->key)
                st_buf_append(out, m->key, m->key_len);
            break;
        case 'v':
            if (m->value)
                st_buf_append(out, m->value, m->value_len);
            break;
        case 'K':
            put_i64(out, m->key ? (int64_t)m->key_len : -1);
            break;
        case 'S':
            put_i64(out, m->value ? (int64_t)m->value_len : -1);
            break;
        case 'h':
            for (size_t h = 0; h < m->header_count; h++) {
                const st_cli_header_t *hd = &m->headers[h];
                if (h)
                    st_buf_put_u8(out, ',');
                st_buf_append(out, hd->name, strlen(hd->name));
                st_buf_put_u8(out, '=');
                if (hd->value)
                    st_buf_append(out, hd->value, hd->value_len);
            }
            break;
        default:
            break;
        }
    }
}

/* Returns a JSON string for bytes, {"base64": ...} when not UTF-8, or null for NULL. */
static json_t *bytes_json(const void *p, size_t n)
{
    if (!p)
        return json_null();
    json_t *s = json_stringn((const char *)p, n);
    if (s)
        return s;
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *b = p;
    char *enc = malloc((n + 2) / 3 * 4 + 1);
    if (!enc)
        return json_null();
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)b[i + 1] << 8;
        if (i + 2 < n)
            v |= b[i + 2];
        enc[o++] = tbl[(v >> 18) & 63];
        enc[o++] = tbl[(v >> 12) & 63];
        enc[o++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
        enc[o++] = i + 2 < n ? tbl[v & 63] : '=';
    }
    enc[o] = '\0';
    json_t *obj = json_pack("{s:s}", "base64", enc);
    free(enc);
    return obj;
}

void st_cli_fmt_json(const st_cli_msg_t *m, st_buf_t *out)
{
    json_t *hdrs = json_array();
    for (size_t h = 0; h < m->header_count; h++)
        json_array_append_new(hdrs,
                              json_pack("{s:s,s:o}", "key", m->headers[h].name, "value",
                                        bytes_json(m->headers[h].value, m->headers[h].value_len)));
    json_t *o = json_pack("{s:s,s:i,s:I,s:I,s:o,s:o,s:o}", "topic", m->topic, "partition",
                          (int)m->partition, "offset", (json_int_t)m->offset, "timestamp",
                          (json_int_t)m->timestamp, "key", bytes_json(m->key, m->key_len), "value",
                          bytes_json(m->value, m->value_len), "headers", hdrs);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s) {
        st_buf_append(out, s, strlen(s));
        free(s);
    }
    json_decref(o);
}
