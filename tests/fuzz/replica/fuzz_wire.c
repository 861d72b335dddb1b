/*
 * fuzz_wire.c — the bytes a follower decodes: a leader's Fetch answer frame (replica/wire.h)
 * and what the follower makes of each partition in it (replica/follow.h), as the fetcher
 * thread does. Must never crash, leak, read out of bounds or trip a sanitizer, and:
 *   - a frame that decodes re-encodes (records copied) to bytes that decode again and
 *     re-encode to the same bytes;
 *   - st_rwire_whole_batches keeps within the bytes it was given, and the prefix it returns
 *     is made of whole batches: each batchLength fits, and cutting the prefix gives the same
 *     answer again;
 *   - the follower's action for each partition is one of follow.h's, appends at most the
 *     whole batches of the partition's records, and a job puts it in ST_RF_JOB.
 *
 * Input: byte 0: flags (bit 0: the rest is a bare record set for st_rwire_whole_batches
 * instead of a frame; bits 1-3: the follower's starting state, below), then the bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/assert.h"
#include "base/buf.h"
#include "base/log.h"
#include "proto/kheader.h"
#include "proto/kwriter.h"
#include "replica/follow.h"
#include "replica/wire.h"

static void check_whole_batches(const uint8_t *records, size_t len)
{
    int32_t epoch = -7;
    int64_t next = -7;
    size_t n = st_rwire_whole_batches(records, len, &epoch, &next);
    ST_ASSERT(n <= len);
    if (n == 0) {
        ST_ASSERT(epoch == -7 && next == -7); /* untouched when nothing is whole */
        return;
    }
    /* the prefix is whole batches, back to back */
    size_t at = 0;
    while (at < n) {
        ST_ASSERT(n - at >= 61);
        uint32_t blen = st_be32(records + at + 8);
        ST_ASSERT(blen >= 49 && blen <= n - at - 12);
        at += 12 + blen;
    }
    ST_ASSERT(at == n);
    int32_t epoch2 = -7;
    int64_t next2 = -7;
    ST_ASSERT(st_rwire_whole_batches(records, n, &epoch2, &next2) == n);
    ST_ASSERT(epoch2 == epoch && next2 == next);
}

/* The response re-encoded at the fetcher's version (records copied, not spliced). */
static int reencode(const st_kp_fetch_resp_t *r, int32_t corr, st_buf_t *out)
{
    st_kwriter_t w;
    st_kwriter_init(&w, out);
    st_kp_resp_header_t h = {corr};
    int hv = st_kp_resp_header_version(ST_KP_API_FETCH, ST_RWIRE_FETCH_VERSION);
    ST_ASSERT(hv >= 0);
    int rc = st_kp_resp_header_encode(&w, hv, &h);
    if (rc == 0)
        rc = st_kp_fetch_resp_encode(&w, ST_RWIRE_FETCH_VERSION, r);
    return rc ? rc : out->oom ? -1 : 0;
}

static void follow_partition(const st_kp_fetch_resp_partition_t *rp, uint8_t flags)
{
    st_rfollow_answer_t ans = {
        .error = rp->error_code,
        .high_watermark = rp->high_watermark,
        .log_start_offset = rp->log_start_offset,
        .diverging_epoch = rp->diverging_epoch.epoch,
        .diverging_end = rp->diverging_epoch.end_offset,
        .records = rp->records.len > 0 ? rp->records.ptr : NULL,
        .len = rp->records.len > 0 ? (size_t)rp->records.len : 0,
    };
    st_rfollow_t f;
    /* a few starting states: empty, mid-log, a log that starts late, no epochs yet */
    static const int64_t ends[] = {0, 100, 5000, 1};
    static const int64_t starts[] = {0, 0, 4000, 0};
    static const int32_t epochs[] = {-1, 3, 7, 0};
    int s = (flags >> 1) & 3;
    st_rfollow_init(&f, 5, ends[s], epochs[s], starts[s]);
    if (flags & 8)
        f.hw_sent = rp->high_watermark; /* as if the last answer carried the same */
    st_rfollow_action_t a = st_rfollow_on_fetch(&f, &ans);
    ST_ASSERT(a.kind >= ST_RF_DO_NOTHING && a.kind <= ST_RF_DO_STOP);
    switch (a.kind) {
    case ST_RF_DO_APPEND:
        ST_ASSERT(a.len > 0 && a.len <= ans.len);
        ST_ASSERT(st_rwire_whole_batches(ans.records, ans.len, &(int32_t){0}, &(int64_t){0}) ==
                  a.len);
        ST_ASSERT(f.phase == ST_RF_JOB);
        break;
    case ST_RF_DO_TRUNCATE:
    case ST_RF_DO_RESTART:
        ST_ASSERT(f.phase == ST_RF_JOB);
        break;
    case ST_RF_DO_STOP:
        ST_ASSERT(f.phase == ST_RF_STOPPED);
        break;
    default:
        ST_ASSERT(f.phase == ST_RF_FETCH || f.phase == ST_RF_JOB);
        break;
    }
    if (f.phase == ST_RF_JOB) {
        st_rfollow_on_position(&f, 0, ends[s] + 1, epochs[s], starts[s]);
        ST_ASSERT(f.phase == ST_RF_FETCH);
    }
    if (ans.len > 0)
        check_whole_batches(ans.records, ans.len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        st_log_set_level(ST_LOG_ERROR + 1);
        quiet = 1;
    }
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    /* an exact-size heap copy, so ASan sees any read past the end */
    size_t len = size - 1;
    uint8_t *bytes = malloc(len ? len : 1);
    ST_ASSERT(bytes);
    memcpy(bytes, data + 1, len);
    if (flags & 1) {
        check_whole_batches(bytes, len);
        free(bytes);
        return 0;
    }
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_kp_fetch_resp_t r;
    int32_t corr = 0;
    if (st_rwire_fetch_resp(bytes, len, &a, &corr, &r) == 0) {
        for (int t = 0; t < r.responses_count; t++)
            for (int i = 0; i < r.responses[t].partitions_count; i++)
                follow_partition(&r.responses[t].partitions[i], flags);
        st_buf_t once, twice;
        st_buf_init(&once);
        st_buf_init(&twice);
        if (reencode(&r, corr, &once) == 0) {
            st_kp_fetch_resp_t again;
            int32_t corr2 = 0;
            ST_ASSERT(st_rwire_fetch_resp(once.data, once.len, &a, &corr2, &again) == 0);
            ST_ASSERT(corr2 == corr);
            ST_ASSERT(reencode(&again, corr2, &twice) == 0);
            ST_ASSERT(once.len == twice.len && memcmp(once.data, twice.data, once.len) == 0);
        }
        st_buf_fini(&once);
        st_buf_fini(&twice);
    }
    st_arena_fini(&a);
    free(bytes);
    return 0;
}
