/*
 * fuzz_batch_validate.c — producer batch validation over arbitrary bytes, compressed or not.
 * Must never crash, leak, trip a sanitizer or decompress more than its bound, and a records
 * area must get the same verdict code whether it arrives uncompressed or compressed by any
 * codec the way clients compress it.
 *
 * Input: byte 0 = mode (bits 0-2: variant TC_* when below TC_COUNT; bit 3: the rest goes under
 * the codec as is, instead of being compressed first), byte 1 = the record count claimed, then
 * the bytes. The whole input is also validated as a batch of its own.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../unit/storage/tcodec.h"
#include "base/err.h"

/* 4 MiB of decompression at most per batch: 64 x 64 KiB. */
#define MAX_BYTES (64 * 1024)

static void require(int cond)
{
    if (!cond)
        abort();
}

static int validate(const st_buf_t *b, st_batch_verdict_t *v)
{
    st_batch_hdr_t h;
    memset(v, 0, sizeof *v);
    int rc = st_batch_validate_client(b->data, b->len, MAX_BYTES, &h, v);
    require(rc == v->err && v->why != NULL);
    return rc;
}

/* Reads everything a codec reader gives for the bytes at p, with a small bound. */
static void drain(int codec, const uint8_t *p, size_t n)
{
    st_codec_reader_t *r;
    if (st_codec_reader_create(codec, p, n, 1 << 16, &r) < 0)
        return;
    uint8_t buf[1000];
    int got;
    while ((got = st_codec_read(r, buf, sizeof buf)) > 0)
        ;
    require(st_codec_produced(r) <= (1 << 16) + 1);
    require(got == 0 || got == ST_E_CORRUPT || got == ST_E_TOO_LARGE || got == -ENOMEM);
    st_codec_reader_destroy(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_buf_t whole;
    st_buf_init(&whole);
    st_batch_verdict_t v;
    st_buf_append(&whole, data, size);
    if (size >= ST_BATCH_HEADER_SIZE)
        validate(&whole, &v);
    st_buf_fini(&whole);
    if (size < 2)
        return 0;
    int variant = data[0] & 7;
    bool raw = data[0] & 8;
    int32_t count = data[1] ? data[1] : 1;
    const uint8_t *p = data + 2;
    size_t n = size - 2;
    if (variant >= TC_COUNT)
        return 0;
    int codec = tc_codec[variant];
    st_buf_t b, z;
    st_buf_init(&b);
    st_buf_init(&z);
    if (raw) {
        drain(codec, p, n);
        tc_wrap(&b, codec, p, n, count);
        int rc = validate(&b, &v);
        require(rc == 0 || rc == ST_E_CORRUPT || rc == ST_E_MALFORMED || rc == ST_E_TOO_LARGE ||
                rc == -ENOMEM);
    } else {
        tc_wrap(&b, ST_CODEC_NONE, p, n, count);
        int plain = validate(&b, &v);
        bool early = plain == ST_E_MALFORMED &&
                     strcmp(v.why, "record count larger than the batch can hold") == 0;
        st_buf_clear(&b);
        require(tc_compress(variant, p, n, &z) == 0);
        tc_wrap(&b, codec, z.data, z.len, count);
        int packed = validate(&b, &v);
        require(early || packed == plain);
    }
    st_buf_fini(&b);
    st_buf_fini(&z);
    return 0;
}
