/*
 * fuzz_msgconv.c — legacy MessageSet conversion (storage/msgconv.h) over arbitrary bytes.
 * Must never crash, leak, trip a sanitizer or decompress more than its bound. Whatever a
 * legacy set converts to must be a batch a producer could have sent (st_batch_validate_client
 * accepts it), and converting that batch back down to either magic and up again must give a
 * batch with the same number of records (nothing lost or invented on the way).
 *
 * Input: byte 0 bit 0 = the limit is a cap too, bits 1-7 = the down-conversion limit in 64-byte
 * steps (0: unbounded), then the bytes: up-converted as a legacy set, and down-converted as stored
 * batches.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "storage/batch.h"
#include "storage/msgconv.h"

/* 1 MiB of decompression at most per wrapper or batch. */
#define MAX_OUT (1 << 20)

static void require(int cond)
{
    if (!cond)
        abort();
}

static int64_t records_of(const st_buf_t *b)
{
    st_batch_hdr_t h;
    require(st_batch_parse_hdr(b->data, b->len, &h) == 0);
    return h.records_count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool hard = data[0] & 1;
    int64_t limit = (int64_t)(data[0] >> 1) * 64;
    const uint8_t *p = data + 1;
    size_t n = size - 1;

    st_buf_t v2, down, again;
    st_buf_init(&v2);
    st_buf_init(&down);
    st_buf_init(&again);
    st_msgconv_up_info_t info;
    if (st_msgconv_up(p, n, MAX_OUT, &v2, &info) == 0) {
        st_batch_hdr_t h;
        require(st_batch_validate_client(v2.data, v2.len, 64 * MAX_OUT, &h, NULL) == 0);
        require(h.records_count == info.records);
        for (int8_t magic = 0; magic <= 1; magic++) {
            st_msgconv_down_opts_t o = {magic, 0, INT64_MAX, -1, 64 * MAX_OUT};
            st_msgconv_down_res_t res;
            st_buf_clear(&down);
            st_buf_clear(&again);
            require(st_msgconv_down(v2.data, v2.len, &o, &down, &res) == 0);
            require(res.records == info.records && !res.cut);
            require(st_msgconv_up(down.data, down.len, 64 * MAX_OUT, &again, NULL) == 0);
            require(records_of(&again) == info.records);
        }
    } else {
        require(v2.len == 0 && info.why != NULL);
    }
    /* the bytes as stored batches */
    for (int8_t magic = 0; magic <= 1; magic++) {
        int64_t lim = limit ? limit : INT64_MAX;
        st_msgconv_down_opts_t o = {magic, 0, lim, hard ? lim : -1, MAX_OUT};
        st_msgconv_down_res_t res;
        st_buf_clear(&down);
        if (st_msgconv_down(p, n, &o, &down, &res) == 0 && limit && hard)
            require((int64_t)down.len <= limit);
    }
    st_buf_fini(&v2);
    st_buf_fini(&down);
    st_buf_fini(&again);
    return 0;
}
