/*
 * journal_fmt.c — encoding and bounds-checked decoding of the journal file's headers, entries
 * and fence files (journal_fmt.h; the layout is journal.h's).
 */
#include "storage/journal_fmt.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/crc32c.h"
#include "base/err.h"
#include "storage/journal.h"

void st_jfmt_encode_header(const st_jhdr_t *h, uint8_t *b)
{
    memset(b, 0, ST_JFMT_HDR_SIZE);
    st_put_be32(b, ST_JFMT_HDR_MAGIC);
    st_put_be16(b + 8, 1);
    st_put_be64(b + 16, h->gen);
    st_put_be64(b + 24, (uint64_t)h->cap);
    st_put_be64(b + 32, h->run_id);
    st_put_be64(b + 40, (uint64_t)h->tail);
    st_put_be64(b + 48, h->tail_seq);
    st_put_be32(b + 4, st_crc32c(0, b + 8, ST_JFMT_HDR_SIZE - 8));
}

bool st_jfmt_decode_header(const uint8_t *b, st_jhdr_t *h)
{
    if (st_be32(b) != ST_JFMT_HDR_MAGIC ||
        st_be32(b + 4) != st_crc32c(0, b + 8, ST_JFMT_HDR_SIZE - 8) || st_be16(b + 8) != 1)
        return false;
    h->gen = st_be64(b + 16);
    h->cap = (int64_t)st_be64(b + 24);
    h->run_id = st_be64(b + 32);
    h->tail = (int64_t)st_be64(b + 40);
    h->tail_seq = st_be64(b + 48);
    return h->cap >= 64 && h->cap <= ((int64_t)1 << 46) && h->tail >= 0;
}

int st_jfmt_read_header(st_fs_t *fs, int fd, st_jhdr_t *h)
{
    bool found = false;
    for (int s = 0; s < 2; s++) {
        uint8_t b[ST_JFMT_HDR_SIZE];
        st_jhdr_t x;
        ssize_t n = st_fs_pread_full(fs, fd, b, ST_JFMT_HDR_SIZE, (int64_t)s * ST_JFMT_HDR_SLOT);
        if (n < 0)
            return (int)n;
        if (n == ST_JFMT_HDR_SIZE && st_jfmt_decode_header(b, &x) && (!found || x.gen > h->gen)) {
            *h = x;
            found = true;
        }
    }
    return found ? 1 : 0;
}

void st_jfmt_encode_entry(const st_jentry_hdr_t *e, const char *name, const uint8_t *data,
                          uint8_t *h)
{
    memset(h, 0, ST_JFMT_ENTRY_HDR);
    st_put_be32(h, ST_JFMT_ENTRY_MAGIC);
    st_put_be32(h + 8, e->length);
    h[12] = (uint8_t)e->kind;
    h[13] = e->has_tid ? ST_JFMT_FLAG_TOPIC_ID : 0;
    st_put_be16(h + 14, e->name_len);
    st_put_be64(h + 16, e->seq);
    st_put_be64(h + 24, (uint64_t)e->first);
    st_put_be64(h + 32, (uint64_t)e->next);
    if (e->has_tid)
        memcpy(h + 40, e->tid, 16);
    st_put_be32(h + 56, e->data_len);
    uint32_t crc = st_crc32c(0, h + 8, ST_JFMT_ENTRY_HDR - 8);
    crc = st_crc32c(crc, name, e->name_len);
    if (e->data_len > 0)
        crc = st_crc32c(crc, data, e->data_len);
    st_put_be32(h + 4, crc);
}

int st_jfmt_read_entry(st_fs_t *fs, int fd, int64_t cap, int64_t pos, uint64_t seq, st_jentry_t *e,
                       int64_t *length)
{
    int64_t phys = pos % cap;
    if (phys + ST_JFMT_ENTRY_HDR > cap)
        return 0;
    uint8_t h[ST_JFMT_ENTRY_HDR];
    ssize_t n = st_fs_pread_full(fs, fd, h, sizeof h, ST_JFMT_DATA_OFF + phys);
    if (n < 0)
        return (int)n;
    if (n != (ssize_t)sizeof h || st_be32(h) != ST_JFMT_ENTRY_MAGIC || st_be64(h + 16) != seq)
        return 0;
    int64_t len = st_be32(h + 8);
    size_t nl = st_be16(h + 14);
    uint32_t dl = st_be32(h + 56);
    if (len < ST_JFMT_ENTRY_HDR || phys + st_jfmt_pad8(len) > cap ||
        (int64_t)(ST_JFMT_ENTRY_HDR + nl + dl) != len || nl == 0 || nl > NAME_MAX ||
        h[12] < ST_JFMT_KIND_APPEND || h[12] > ST_JFMT_KIND_TRUNCATE)
        return 0;
    uint8_t *rest = malloc((size_t)(len - 8));
    if (!rest)
        return -ENOMEM;
    memcpy(rest, h + 8, ST_JFMT_ENTRY_HDR - 8);
    n = st_fs_pread_full(fs, fd, rest + ST_JFMT_ENTRY_HDR - 8, (size_t)(len - ST_JFMT_ENTRY_HDR),
                         ST_JFMT_DATA_OFF + phys + ST_JFMT_ENTRY_HDR);
    if (n < 0) {
        free(rest);
        return (int)n;
    }
    if (n != len - ST_JFMT_ENTRY_HDR || st_crc32c(0, rest, (size_t)(len - 8)) != st_be32(h + 4)) {
        free(rest);
        return 0;
    }
    char *name = malloc(nl + 1);
    if (!name) {
        free(rest);
        return -ENOMEM;
    }
    memcpy(name, rest + ST_JFMT_ENTRY_HDR - 8, nl);
    name[nl] = 0;
    free(rest);
    if (memchr(name, '/', nl) || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
        strlen(name) != nl) {
        free(name);
        return 0;
    }
    e->seq = seq;
    e->kind = h[12];
    e->has_tid = (h[13] & ST_JFMT_FLAG_TOPIC_ID) != 0;
    e->first = (int64_t)st_be64(h + 24);
    e->next = (int64_t)st_be64(h + 32);
    memcpy(e->tid, h + 40, 16);
    e->data_len = dl;
    e->data_at = ST_JFMT_DATA_OFF + phys + ST_JFMT_ENTRY_HDR + (int64_t)nl;
    e->name = name;
    *length = len;
    return 1;
}

bool st_jfmt_entry_at(st_fs_t *fs, int fd, const st_jhdr_t *h)
{
    st_jentry_t e = {0};
    int64_t len;
    int r = st_jfmt_read_entry(fs, fd, h->cap, h->tail, h->tail_seq, &e, &len);
    free(e.name);
    return r != 0;
}

void st_jfmt_encode_fence(uint64_t run_id, uint64_t seq, uint8_t *b)
{
    st_put_be32(b, ST_JFMT_FENCE_MAGIC);
    st_put_be64(b + 8, run_id);
    st_put_be64(b + 16, seq);
    st_put_be32(b + 4, st_crc32c(0, b + 8, ST_JFMT_FENCE_SIZE - 8));
}

int st_jfmt_read_fence(st_fs_t *fs, const char *dir, uint64_t *run_id, uint64_t *seq)
{
    char p[PATH_MAX];
    int r = snprintf(p, sizeof p, "%s/%s", dir, ST_JOURNAL_FENCE_FILE);
    if (r < 0 || (size_t)r >= sizeof p)
        return -ENAMETOOLONG;
    uint8_t *d;
    size_t n;
    int rc = st_fs_read_file(fs, p, 4096, &d, &n);
    if (rc < 0)
        return rc;
    rc = n == ST_JFMT_FENCE_SIZE && st_be32(d) == ST_JFMT_FENCE_MAGIC &&
                 st_be32(d + 4) == st_crc32c(0, d + 8, ST_JFMT_FENCE_SIZE - 8)
             ? 0
             : ST_E_CORRUPT;
    if (rc == 0) {
        *run_id = st_be64(d + 8);
        *seq = st_be64(d + 16);
    }
    free(d);
    return rc;
}
