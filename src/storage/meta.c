/*
 * meta.c — codecs for leader-epoch-checkpoint, partition.metadata and strata.checkpoint.
 * Formats: meta.h. Input is file bytes, untrusted: every parse is bounded and checked.
 */
#include "storage/meta.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/err.h"

/* Parses a decimal integer (optional '-') at *p, then expects `sep`. */
static int parse_int(const uint8_t **p, const uint8_t *end, char sep, int64_t *out)
{
    const uint8_t *q = *p;
    bool neg = false;
    if (q < end && *q == '-') {
        neg = true;
        q++;
    }
    if (q >= end || *q < '0' || *q > '9')
        return ST_E_CORRUPT;
    int64_t v = 0;
    int digits = 0;
    while (q < end && *q >= '0' && *q <= '9') {
        if (++digits > 18)
            return ST_E_CORRUPT;
        v = v * 10 + (*q - '0');
        q++;
    }
    if (q >= end || *q != (uint8_t)sep)
        return ST_E_CORRUPT;
    *p = q + 1;
    *out = neg ? -v : v;
    return 0;
}

int st_meta_parse_epochs(const uint8_t *p, size_t n, st_epoch_entry_t **out, int *count)
{
    const uint8_t *end = p + n;
    int64_t version, cnt;
    if (parse_int(&p, end, '\n', &version) < 0 || version != 0 ||
        parse_int(&p, end, '\n', &cnt) < 0 || cnt < 0 || cnt > ST_META_MAX_EPOCHS)
        return ST_E_CORRUPT;
    st_epoch_entry_t *e = malloc(((size_t)cnt + 1) * sizeof *e);
    if (!e)
        return -ENOMEM;
    for (int64_t i = 0; i < cnt; i++) {
        int64_t ep, off;
        if (parse_int(&p, end, ' ', &ep) < 0 || parse_int(&p, end, '\n', &off) < 0 || ep < 0 ||
            ep > INT32_MAX || off < 0 ||
            (i > 0 && (ep <= e[i - 1].epoch || off < e[i - 1].start_offset))) {
            free(e);
            return ST_E_CORRUPT;
        }
        e[i].epoch = (int32_t)ep;
        e[i].start_offset = off;
    }
    if (p != end) {
        free(e);
        return ST_E_CORRUPT;
    }
    *out = e;
    *count = (int)cnt;
    return 0;
}

int st_meta_format_epochs(const st_epoch_entry_t *e, int n, st_buf_t *out)
{
    char line[64];
    int l = snprintf(line, sizeof line, "0\n%d\n", n);
    st_buf_append(out, line, (size_t)l);
    for (int i = 0; i < n; i++) {
        l = snprintf(line, sizeof line, "%" PRId32 " %" PRId64 "\n", e[i].epoch, e[i].start_offset);
        st_buf_append(out, line, (size_t)l);
    }
    return out->oom ? -ENOMEM : 0;
}

void st_meta_encode_ckpt(const st_meta_ckpt_t *c, uint8_t out[ST_META_CKPT_SIZE])
{
    memset(out, 0, ST_META_CKPT_SIZE);
    memcpy(out, "STCK", 4);
    st_put_be16(out + 4, 2);
    st_put_be64(out + 8, (uint64_t)c->log_start_offset);
    st_put_be64(out + 16, (uint64_t)c->recovery_point);
    st_put_be64(out + 24, (uint64_t)c->clean_point);
    st_put_be32(out + 32, st_crc32c(0, out, 32));
}

int st_meta_decode_ckpt(const uint8_t *p, size_t n, st_meta_ckpt_t *c)
{
    if (n < 6 || memcmp(p, "STCK", 4) != 0)
        return ST_E_CORRUPT;
    int v = st_be16(p + 4);
    if (v == 1) {
        if (n != 32 || st_be32(p + 24) != st_crc32c(0, p, 24))
            return ST_E_CORRUPT;
        c->clean_point = 0;
    } else if (v == 2) {
        if (n != 40 || st_be32(p + 32) != st_crc32c(0, p, 32))
            return ST_E_CORRUPT;
        c->clean_point = (int64_t)st_be64(p + 24);
    } else {
        return ST_E_CORRUPT;
    }
    c->log_start_offset = (int64_t)st_be64(p + 8);
    c->recovery_point = (int64_t)st_be64(p + 16);
    if (c->log_start_offset < 0 || c->recovery_point < 0 || c->clean_point < 0)
        return ST_E_CORRUPT;
    return 0;
}

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static int b64_val(uint8_t c)
{
    const char *q = memchr(b64url, c, 64);
    return c && q ? (int)(q - b64url) : -1;
}

int st_meta_format_partition_metadata(const uint8_t id[16], char *out, size_t n)
{
    char enc[23];
    uint32_t acc = 0;
    int bits = 0, k = 0;
    for (int i = 0; i < 16; i++) {
        acc = (acc << 8) | id[i];
        bits += 8;
        while (bits >= 6) {
            enc[k++] = b64url[(acc >> (bits - 6)) & 63];
            bits -= 6;
        }
    }
    if (bits > 0)
        enc[k++] = b64url[(acc << (6 - bits)) & 63];
    enc[k] = 0;
    int l = snprintf(out, n, "version: 0\ntopic_id: %s\n", enc);
    return l < 0 || (size_t)l >= n ? -ENOBUFS : l;
}

int st_meta_parse_partition_metadata(const uint8_t *p, size_t n, uint8_t id[16])
{
    static const char v0[] = "version: 0\ntopic_id: ";
    size_t vl = sizeof v0 - 1;
    if (n < vl + 22 || memcmp(p, v0, vl) != 0)
        return ST_E_CORRUPT;
    const uint8_t *q = p + vl;
    uint32_t acc = 0;
    int bits = 0, k = 0;
    for (int i = 0; i < 22; i++) {
        int v = b64_val(q[i]);
        if (v < 0)
            return ST_E_CORRUPT;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            if (k < 16)
                id[k++] = (uint8_t)(acc >> (bits - 8));
            bits -= 8;
        }
    }
    size_t rest = n - vl - 22;
    if (k != 16 || (rest > 0 && !(rest == 1 && q[22] == '\n')))
        return ST_E_CORRUPT;
    return 0;
}
