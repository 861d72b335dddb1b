/*
 * fuzz_recovery.c — arbitrary bytes as a segment (and optionally its index files) → open with
 * recovery → read everything → look up timestamps → append → close → reopen. Must never
 * crash, leak or trip a sanitizer, and what survives must be whole valid batches.
 *
 * Input: byte 0 = flags (bit 0: leave a clean-shutdown marker, bit 1: the next two bytes are
 * the length of an .index file taken from the end, bit 2: a checkpoint with the recovery point
 * at 0, bit 3: a second segment at base 1000 gets the second half, bit 4: the bytes are
 * XORed over a valid segment of a dozen batches instead of standing alone, so damage lands in
 * otherwise valid data), then the segment bytes. Runs on the in-memory faultfs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../unit/storage/testutil.h"
#include "base/log.h"
#include "storage/meta.h"

#define DIR "/data/f-0"

static void require(int cond)
{
    if (!cond)
        abort();
}

static void read_all(st_log_t *log)
{
    int64_t off = st_log_start_offset(log);
    int guard = 0;
    while (off < st_log_end_offset(log) && guard++ < 10000) {
        st_log_read_t r;
        require(st_log_read(log, off, 1 << 16, -1, &r) == 0);
        if (r.bytes == 0)
            break; /* a gap up to the end */
        uint8_t *buf = malloc((size_t)r.bytes);
        require(buf != NULL);
        require(st_log_read_copy(&r, buf, (size_t)r.bytes) == r.bytes);
        for (int64_t p = 0; p < r.bytes;) {
            st_batch_hdr_t h;
            require(st_batch_check(buf + p, (size_t)(r.bytes - p), &h) == 0);
            p += st_batch_size(&h);
        }
        require(r.next_offset > off);
        off = r.next_offset;
        free(buf);
        st_log_read_release(&r);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        st_log_set_level(ST_LOG_FATAL);
        quiet = 1;
    }
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    data++;
    size--;
    size_t idx_len = 0;
    if ((flags & 2) && size >= 2) {
        idx_len = ((size_t)data[0] << 8 | data[1]) % (size - 1);
        data += 2;
        size -= 2;
    }
    size_t log_len = size - idx_len;
    const uint8_t *idx = data + log_len;

    tenv_t t;
    tenv_init(&t, 1);
    t.env.fs.ops->mkdir(t.env.fs.ctx, DIR);
    st_buf_t seg;
    st_buf_init(&seg);
    if (flags & 16) {
        for (int i = 0; i < 12; i++) {
            size_t at = seg.len;
            tb_batch(&seg, i % 3 + 1, (size_t)(i * 37 % 200), 1000 + i * 10, (uint8_t)i);
            st_batch_set_base_offset(seg.data + at, i * 3);
        }
        size_t n = log_len < seg.len ? log_len : seg.len;
        size_t shift = log_len ? data[0] % (seg.len / 2 + 1) : 0;
        for (size_t i = 0; i < n && i + shift < seg.len; i++)
            seg.data[i + shift] ^= data[i];
    } else {
        st_buf_append(&seg, data, log_len);
    }
    static const uint8_t none[1];
    data = seg.data ? seg.data : none;
    log_len = seg.len;
    if (flags & 8) {
        size_t half = log_len / 2;
        st_faultfs_put(t.ff, DIR "/00000000000000000000.log", data, half);
        st_faultfs_put(t.ff, DIR "/00000000000000001000.log", data + half, log_len - half);
    } else {
        st_faultfs_put(t.ff, DIR "/00000000000000000000.log", data, log_len);
    }
    if (idx_len)
        st_faultfs_put(t.ff, DIR "/00000000000000000000.index", idx, idx_len);
    if (flags & 1)
        st_faultfs_put(t.ff, DIR "/" ST_META_CLEAN_FILE, "", 0);
    if (flags & 4) {
        st_meta_ckpt_t ck = {0, 0, 0};
        uint8_t raw[ST_META_CKPT_SIZE];
        st_meta_encode_ckpt(&ck, raw);
        st_faultfs_put(t.ff, DIR "/" ST_META_CKPT_FILE, raw, sizeof raw);
    }

    st_log_config_t c;
    st_log_config_default(&c);
    c.index_interval_bytes = 128;
    st_log_t *log;
    int rc = st_log_open(&t.env, DIR, &c, &log);
    require(rc == 0);
    require(st_log_check(log));
    read_all(log);
    int64_t o, ts;
    st_log_offset_for_timestamp(log, 0, &o, &ts);
    st_log_offset_for_timestamp(log, INT64_MAX / 2, &o, &ts);
    st_log_max_timestamp(log, &ts, &o);
    int32_t ep;
    st_log_end_offset_for_epoch(log, 0, &ep, &o);

    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, 2, 10, 5, 'f');
    int64_t end = st_log_end_offset(log);
    st_log_append_info_t info;
    rc = st_log_append(log, b.data, b.len, 1, &info, NULL);
    require(rc == 0 && info.base_offset == end);
    if (end > st_log_start_offset(log))
        st_log_truncate_to(log, st_log_start_offset(log) + (end - st_log_start_offset(log)) / 2);
    end = st_log_end_offset(log);
    require(st_log_close(log) == 0);

    require(st_log_open(&t.env, DIR, &c, &log) == 0);
    require(st_log_end_offset(log) == end);
    read_all(log);
    require(st_log_close(log) == 0);
    st_buf_fini(&b);
    st_buf_fini(&seg);
    tenv_fini(&t);
    return 0;
}
