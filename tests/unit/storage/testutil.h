/*
 * testutil.h — helpers for storage tests and fuzzers: a builder of valid RecordBatch v2 bytes
 * (records with varint fields, CRC-32C computed) and a test environment over faultfs with a
 * hand-driven clock and a sync hook that can complete inline or be held and completed later.
 * Header-only so every test executable and fuzzer can include it.
 */
#ifndef ST_TEST_STORAGE_UTIL_H
#define ST_TEST_STORAGE_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/crc32c.h"
#include "base/varint.h"
#include "storage/batch.h"
#include "storage/env.h"
#include "storage/faultfs.h"
#include "storage/log.h"

/* Appends one record (no key, value of vlen bytes of `fill`, no headers). */
static inline void tb_record(st_buf_t *b, int32_t index, int64_t ts_delta, size_t vlen,
                             uint8_t fill)
{
    uint8_t body[64];
    size_t n = 0;
    body[n++] = 0; /* attributes */
    n += (size_t)st_varint64_encode(body + n, ts_delta);
    n += (size_t)st_varint32_encode(body + n, index);
    n += (size_t)st_varint32_encode(body + n, -1); /* null key */
    n += (size_t)st_varint32_encode(body + n, (int32_t)vlen);
    size_t total = n + vlen + 1; /* + header count */
    uint8_t lenb[ST_VARINT32_MAX];
    int ll = st_varint32_encode(lenb, (int32_t)total);
    st_buf_append(b, lenb, (size_t)ll);
    st_buf_append(b, body, n);
    uint8_t *v = st_buf_extend(b, vlen);
    if (v)
        memset(v, fill, vlen);
    uint8_t hc[1];
    int hl = st_varint32_encode(hc, 0);
    st_buf_append(b, hc, (size_t)hl);
}

/*
 * Appends a valid batch of `count` records (values of vlen bytes of fill) to b. Record i has
 * timestamp base_ts + i. attributes lets a test set compression bits or others (the records
 * are then not really compressed; only the header claims so). Returns the batch's size.
 */
static inline size_t tb_batch_attr(st_buf_t *b, int32_t count, size_t vlen, int64_t base_ts,
                                   uint8_t fill, int16_t attributes)
{
    size_t start = b->len;
    uint8_t *h = st_buf_extend(b, ST_BATCH_HEADER_SIZE);
    if (!h)
        return 0;
    for (int32_t i = 0; i < count; i++)
        tb_record(b, i, i, vlen, (uint8_t)(fill + i));
    h = b->data + start;
    size_t size = b->len - start;
    st_put_be64(h + ST_BATCH_OFF_BASE_OFFSET, 0);
    st_put_be32(h + ST_BATCH_OFF_LENGTH, (uint32_t)(size - ST_BATCH_LOG_OVERHEAD));
    st_put_be32(h + ST_BATCH_OFF_LEADER_EPOCH, (uint32_t)-1);
    h[ST_BATCH_OFF_MAGIC] = 2;
    st_put_be16(h + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)attributes);
    st_put_be32(h + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(count - 1));
    st_put_be64(h + ST_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)base_ts);
    st_put_be64(h + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)(base_ts + count - 1));
    st_put_be64(h + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)-1);
    st_put_be16(h + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)-1);
    st_put_be32(h + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)-1);
    st_put_be32(h + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)count);
    st_put_be32(h + ST_BATCH_OFF_CRC, st_batch_compute_crc(h, size));
    return size;
}

static inline size_t tb_batch(st_buf_t *b, int32_t count, size_t vlen, int64_t base_ts,
                              uint8_t fill)
{
    return tb_batch_attr(b, count, vlen, base_ts, fill, 0);
}

/* Rewrites the CRC of the batch at p after a test edited CRC-covered bytes. */
static inline void tb_fix_crc(uint8_t *p)
{
    size_t size = ST_BATCH_LOG_OVERHEAD + st_be32(p + ST_BATCH_OFF_LENGTH);
    st_put_be32(p + ST_BATCH_OFF_CRC, st_batch_compute_crc(p, size));
}

/* ---- test environment ------------------------------------------------------------------- */

typedef struct tenv_sync {
    st_sync_done_fn done;
    void *arg;
    int res;
} tenv_sync_t;

typedef struct tenv {
    st_faultfs_t *ff;
    st_storage_env_t env;
    int64_t now;
    bool defer;     /* hold sync completions until tenv_complete */
    tenv_sync_t *q; /* held completions, FIFO */
    size_t nq, capq;
    uint64_t submits;
    int submit_fail; /* the next submits refused (-EAGAIN, a full submission queue) */
} tenv_t;

static inline int64_t tenv_now(void *ctx)
{
    return ((tenv_t *)ctx)->now;
}

/* Syncs at submit time (what a real fdatasync issued now covers) and completes inline or
 * later. */
static inline int tenv_sync_submit(void *ctx, int fd, st_sync_done_fn done, void *arg)
{
    tenv_t *t = ctx;
    if (t->submit_fail > 0) {
        t->submit_fail--;
        return -EAGAIN;
    }
    t->submits++;
    int res = t->env.fs.ops->fdatasync(t->env.fs.ctx, fd);
    if (!t->defer) {
        done(arg, res);
        return 0;
    }
    if (t->nq == t->capq) {
        t->capq = t->capq ? t->capq * 2 : 16;
        t->q = realloc(t->q, t->capq * sizeof *t->q);
    }
    t->q[t->nq].done = done;
    t->q[t->nq].arg = arg;
    t->q[t->nq].res = res;
    t->nq++;
    return 0;
}

/* Completes up to n held syncs in submission order; returns how many ran. */
static inline size_t tenv_complete(tenv_t *t, size_t n)
{
    size_t ran = 0;
    while (ran < n && t->nq > 0) {
        tenv_sync_t s = t->q[0];
        memmove(t->q, t->q + 1, (t->nq - 1) * sizeof *t->q);
        t->nq--;
        s.done(s.arg, s.res);
        ran++;
    }
    return ran;
}

static inline void tenv_init(tenv_t *t, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->ff = st_faultfs_create(seed);
    st_storage_env_init(&t->env, st_faultfs_fs(t->ff), 64);
    t->env.now_ms = tenv_now;
    t->env.now_ctx = t;
    t->env.sync_submit = tenv_sync_submit;
    t->env.sync_ctx = t;
    t->now = 1700000000000LL;
    t->env.fs.ops->mkdir(t->env.fs.ctx, "/data");
}

static inline void tenv_fini(tenv_t *t)
{
    tenv_complete(t, (size_t)-1);
    free(t->q);
    st_storage_env_fini(&t->env);
    st_faultfs_destroy(t->ff);
}

/* Reads everything in [from, end) through st_log_read into a malloc'd buffer. */
static inline int tb_read_all(st_log_t *log, int64_t from, int64_t max_bytes, st_buf_t *out,
                              int64_t *next)
{
    st_log_read_t r;
    int rc = st_log_read(log, from, max_bytes, -1, &r);
    if (rc < 0)
        return rc;
    uint8_t *d = st_buf_extend(out, (size_t)r.bytes);
    ssize_t n = st_log_read_copy(&r, d, (size_t)r.bytes);
    if (next)
        *next = r.next_offset;
    st_log_read_release(&r);
    return n < 0 ? (int)n : 0;
}

#endif
