/*
 * fuzz_journal_replay.c — arbitrary journal bytes replayed into partition logs on the in-memory
 * faultfs (st_journal_recover), then every log reopened and read whole (when replay opened any).
 * Must never crash, assert, leak or trip a sanitizer; what the logs hold afterwards must be whole
 * valid batches, and a second replay must find nothing left to replay.
 *
 * Input: byte 0 = flags, then the body.
 *   bit 0: structured: the body is a list of entries the harness encodes validly (CRC, the
 *          sequence replay expects), so the fuzzer spends its time on what replay does with
 *          valid entries: per entry 1 byte op (bits 0-1: which partition name, bit 2: truncate,
 *          bit 3: topic id that does not match, bit 4: batches XORed with body bytes, bit 5:
 *          skip a sequence number), 1 byte first offset, 1 byte record count, 1 byte value
 *          length; otherwise raw: the body is the data area as it stands (entries that are
 *          valid only if the fuzzer makes them so), after a header the harness writes validly.
 *   bit 1: the partition t-0 holds a segment of a few batches already.
 *   bit 2: t-0 has a clean-shutdown marker.
 *   bit 3: t-0 has a fence file for the journal's run id (its sequence: the next body byte).
 *   bit 4: a second journal file, shard-1.wal, holds a copy of the first.
 *   bit 5: the header's tail is not 0 but the next body byte times 8.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../unit/storage/testutil.h"
#include "base/log.h"
#include "storage/journal.h"
#include "storage/journal_fmt.h"
#include "storage/meta.h"

#define DATA    "/data"
#define RUN_ID  0x5354524154410001ull
#define MAX_CAP (256 * 1024)

static const char *const names[4] = {"t-0", "t-1", "gone-0", "t-0"};

static void require(int cond)
{
    if (!cond)
        abort();
}

/* Reads the whole log: every byte must be whole valid batches. */
static void read_all(st_log_t *log)
{
    int64_t off = st_log_start_offset(log);
    for (int guard = 0; off < st_log_end_offset(log) && guard < 10000; guard++) {
        st_log_read_t r;
        require(st_log_read(log, off, 1 << 16, -1, &r) == 0);
        if (r.bytes == 0)
            break;
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

/* Appends one valid entry at *pos of area (cap bytes). Returns false when it does not fit. */
static bool put_entry(uint8_t *area, int64_t cap, int64_t *pos, st_jentry_hdr_t *e,
                      const char *name, const uint8_t *data)
{
    int64_t len = ST_JFMT_ENTRY_HDR + (int64_t)strlen(name) + e->data_len;
    if (*pos + st_jfmt_pad8(len) > cap)
        return false;
    e->length = (uint32_t)len;
    e->name_len = (uint16_t)strlen(name);
    st_jfmt_encode_entry(e, name, data, area + *pos);
    memcpy(area + *pos + ST_JFMT_ENTRY_HDR, name, e->name_len);
    if (e->data_len)
        memcpy(area + *pos + ST_JFMT_ENTRY_HDR + e->name_len, data, e->data_len);
    *pos += st_jfmt_pad8(len);
    return true;
}

/* Structured mode: valid entries built from 4-byte steps of the body. Returns the area used. */
static int64_t build_entries(uint8_t *area, int64_t cap, const uint8_t *d, size_t n)
{
    int64_t pos = 0;
    uint64_t seq = 1;
    st_buf_t b;
    st_buf_init(&b);
    for (size_t i = 0; i + 4 <= n; i += 4) {
        uint8_t op = d[i];
        st_jentry_hdr_t e = {.seq = seq, .first = d[i + 1]};
        if (op & 8) {
            e.has_tid = true;
            memset(e.tid, 0xee, 16);
        }
        st_buf_clear(&b);
        if (op & 4) {
            e.kind = ST_JFMT_KIND_TRUNCATE;
            e.next = e.first;
        } else {
            e.kind = ST_JFMT_KIND_APPEND;
            int32_t count = d[i + 2] % 5 + 1;
            tb_batch(&b, count, d[i + 3] % 64, 1000 + (int64_t)i, (uint8_t)i);
            st_batch_set_base_offset(b.data, e.first);
            if ((op & 16) && i + 8 <= n)
                for (size_t k = 0; k < b.len && k < 4; k++)
                    b.data[(d[i + 4 + k] * 7 + k) % b.len] ^= d[i + 4 + k];
            e.next = e.first + count;
            e.data_len = (uint32_t)b.len;
        }
        if (!put_entry(area, cap, &pos, &e, names[op & 3], b.data))
            break;
        seq += (op & 32) ? 2 : 1;
    }
    st_buf_fini(&b);
    return pos;
}

static void write_journal(tenv_t *t, const char *path, const uint8_t *area, int64_t cap,
                          int64_t tail)
{
    size_t size = (size_t)(ST_JFMT_DATA_OFF + cap);
    uint8_t *file = calloc(1, size);
    require(file != NULL);
    st_jhdr_t h = {.gen = 1, .run_id = RUN_ID, .tail_seq = 1, .cap = cap, .tail = tail};
    st_jfmt_encode_header(&h, file + ST_JFMT_HDR_SLOT); /* gen 1 lives in slot 1 */
    memcpy(file + ST_JFMT_DATA_OFF, area, (size_t)cap);
    st_faultfs_put(t->ff, path, file, size);
    free(file);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        st_log_set_level(ST_LOG_FATAL);
        quiet = 1;
    }
    if (size < 1 || size > MAX_CAP)
        return 0;
    uint8_t flags = data[0];
    data++;
    size--;
    uint8_t fence_seq = 0, tail8 = 0;
    if ((flags & 8) && size > 0) {
        fence_seq = data[0];
        data++;
        size--;
    }
    if ((flags & 32) && size > 0) {
        tail8 = data[0];
        data++;
        size--;
    }

    tenv_t t;
    tenv_init(&t, 1);
    st_fs_t fs = t.env.fs;
    fs.ops->mkdir(fs.ctx, DATA "/t-0");
    fs.ops->mkdir(fs.ctx, DATA "/t-1");
    fs.ops->mkdir(fs.ctx, DATA "/" ST_JOURNAL_DIR);
    if (flags & 2) {
        st_buf_t seg;
        st_buf_init(&seg);
        for (int i = 0; i < 4; i++) {
            size_t at = seg.len;
            tb_batch(&seg, 2, 20, 500 + i, (uint8_t)i);
            st_batch_set_base_offset(seg.data + at, i * 2);
        }
        st_faultfs_put(t.ff, DATA "/t-0/00000000000000000000.log", seg.data, seg.len);
        st_buf_fini(&seg);
    }
    if (flags & 4)
        st_faultfs_put(t.ff, DATA "/t-0/" ST_META_CLEAN_FILE, "", 0);
    if (flags & 8) {
        uint8_t fb[ST_JFMT_FENCE_SIZE];
        st_jfmt_encode_fence(RUN_ID, fence_seq, fb);
        st_faultfs_put(t.ff, DATA "/t-0/" ST_JOURNAL_FENCE_FILE, fb, sizeof fb);
    }

    int64_t cap = st_jfmt_pad8((int64_t)size);
    if (cap < 4096)
        cap = 4096;
    uint8_t *area = calloc(1, (size_t)cap);
    require(area != NULL);
    if (flags & 1)
        build_entries(area, cap, data, size);
    else if (size)
        memcpy(area, data, size);
    int64_t tail = (int64_t)tail8 * 8;
    write_journal(&t, DATA "/" ST_JOURNAL_DIR "/shard-0.wal", area, cap, tail);
    if (flags & 16)
        write_journal(&t, DATA "/" ST_JOURNAL_DIR "/shard-1.wal", area, cap, tail);
    free(area);

    st_journal_recovery_t r;
    require(st_journal_recover(fs, DATA, &r) == 0);
    require(r.entries >= 0 && r.applied <= r.entries);

    for (int i = 0; i < 2 && r.partitions > 0; i++) {
        st_log_config_t c;
        st_log_config_default(&c);
        st_log_t *log;
        if (st_log_open(&t.env, i ? DATA "/t-1" : DATA "/t-0", &c, &log) == 0) {
            require(st_log_check(log));
            read_all(log);
            require(st_log_close(log) == 0);
        }
    }
    /* The files were emptied: nothing is replayed twice. */
    if (r.entries > 0) {
        st_journal_recovery_t again;
        require(st_journal_recover(fs, DATA, &again) == 0);
        require(again.entries == 0);
    }
    tenv_fini(&t);
    return 0;
}
