/*
 * fuzz_batch_filter.c — st_batch_walk and st_batch_filter (log compaction) over arbitrary
 * bytes, compressed or not. Must never crash, leak, trip a sanitizer or decompress more than
 * its bound; whatever filter rebuilds must pass st_batch_check and walk back to exactly the
 * records it kept, byte for byte, with their offsets, in the codec it came in.
 *
 * Input: byte 0 = mode (bits 0-2: variant TC_* when below TC_COUNT, else uncompressed; bit 3:
 * the rest goes under the codec as is, instead of being compressed first), byte 1 = which
 * records to keep (bit i % 8 keeps the i-th), byte 2 = lastOffsetDelta and record count
 * claimed, then the records area. The whole input is also walked and filtered as a batch.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../unit/storage/tcodec.h"
#include "base/err.h"

/* 4 MiB of decompression at most per batch. */
#define MAX_OUT (4 << 20)

static void require(int cond)
{
    if (!cond)
        abort();
}

typedef struct seen {
    uint8_t mask;
    int32_t n;     /* records offered */
    int32_t kept;  /* records kept */
    int64_t last;  /* offset of the last record offered */
    st_buf_t raw;  /* kept records' bytes */
    st_buf_t offs; /* kept records' offsets */
} seen_t;

static bool keep(void *arg, const st_batch_record_t *rec)
{
    seen_t *s = arg;
    require(s->n == 0 || rec->offset > s->last);
    s->last = rec->offset;
    bool k = s->mask >> (s->n++ % 8) & 1;
    if (k) {
        s->kept++;
        st_buf_append(&s->raw, rec->raw, rec->raw_len);
        st_buf_append(&s->offs, &rec->offset, sizeof rec->offset);
    }
    return k;
}

static int collect(void *arg, const st_batch_record_t *rec)
{
    seen_t *s = arg;
    st_buf_append(&s->raw, rec->raw, rec->raw_len);
    st_buf_append(&s->offs, &rec->offset, sizeof rec->offset);
    s->n++;
    return 0;
}

static int count_fn(void *arg, const st_batch_record_t *rec)
{
    (void)rec;
    (*(int32_t *)arg)++;
    return 0;
}

static void check(const uint8_t *b, size_t n, uint8_t mask)
{
    int32_t walked = 0;
    int wrc = st_batch_walk(b, n, MAX_OUT, count_fn, &walked);
    require(wrc == 0 || wrc == ST_E_CORRUPT || wrc == ST_E_TOO_LARGE || wrc == -ENOMEM);
    seen_t s = {.mask = mask};
    st_buf_init(&s.raw);
    st_buf_init(&s.offs);
    st_buf_t out;
    st_buf_init(&out);
    int32_t kept = -1;
    int rc = st_batch_filter(b, n, MAX_OUT, keep, &s, mask & 1, &out, &kept);
    require(rc == 0 || rc == ST_E_CORRUPT || rc == ST_E_TOO_LARGE || rc == -ENOMEM);
    require(rc == 0 ? wrc == 0 : kept == 0 && out.len == 0);
    if (rc == 0) {
        require(s.n == walked && kept == s.kept);
        require(out.len == 0 ? kept == 0 && !(mask & 1) : true);
    }
    if (rc == 0 && out.len > 0) {
        st_batch_hdr_t oh, nh;
        require(st_batch_parse_hdr(b, n, &oh) == 0);
        require(st_batch_check(out.data, out.len, &nh) == 0);
        require(st_batch_size(&nh) == (int64_t)out.len);
        require(nh.records_count == kept);
        require(nh.base_offset == oh.base_offset && nh.last_offset_delta == oh.last_offset_delta &&
                nh.producer_id == oh.producer_id && nh.base_sequence == oh.base_sequence);
        require(kept == 0 ? out.len == ST_BATCH_HEADER_SIZE && st_batch_compression(&nh) == 0
                          : nh.attributes == oh.attributes);
        seen_t back = {0};
        st_buf_init(&back.raw);
        st_buf_init(&back.offs);
        /* Recompression cannot grow what was kept past what was decompressed. */
        int brc = st_batch_walk(out.data, out.len, MAX_OUT, collect, &back);
        require(brc == 0 || brc == -ENOMEM);
        if (brc == 0 && !s.raw.oom && !back.raw.oom && !s.offs.oom && !back.offs.oom) {
            require(back.n == kept);
            require(back.raw.len == s.raw.len);
            require(s.raw.len == 0 || memcmp(back.raw.data, s.raw.data, s.raw.len) == 0);
            require(back.offs.len == s.offs.len);
            require(s.offs.len == 0 || memcmp(back.offs.data, s.offs.data, s.offs.len) == 0);
        }
        st_buf_fini(&back.raw);
        st_buf_fini(&back.offs);
    }
    st_buf_fini(&out);
    st_buf_fini(&s.raw);
    st_buf_fini(&s.offs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_batch_hdr_t h;
    if (size >= ST_BATCH_HEADER_SIZE && st_batch_check(data, size, &h) == 0)
        check(data, (size_t)st_batch_size(&h), (uint8_t)size);
    if (size < 3)
        return 0;
    int variant = data[0] & 7;
    bool raw = data[0] & 8;
    uint8_t mask = data[1];
    int32_t count = data[2];
    const uint8_t *p = data + 3;
    size_t n = size - 3;
    int codec = variant < TC_COUNT ? tc_codec[variant] : ST_CODEC_NONE;
    st_buf_t b, z;
    st_buf_init(&b);
    st_buf_init(&z);
    if (raw || codec == ST_CODEC_NONE)
        st_buf_append(&z, p, n);
    else if (tc_compress(variant, p, n, &z) < 0)
        goto out;
    size_t bs = tc_wrap(&b, codec, z.data, z.len, count ? count : 1);
    /* tc_wrap sets recordsCount = lastOffsetDelta + 1; a count byte of 0 claims 0 records. */
    if (count == 0) {
        st_put_be32(b.data + ST_BATCH_OFF_RECORDS_COUNT, 0);
        tb_fix_crc(b.data);
    }
    check(b.data, bs, mask);
out:
    st_buf_fini(&b);
    st_buf_fini(&z);
    return 0;
}
