/* wire.c — the follower fetcher's requests and answers (wire.h). */
#include "replica/wire.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "proto/kheader.h"
#include "proto/kreader.h"
#include "proto/kwriter.h"

/* RecordBatch v2 header fields used here (storage/ has the full layout). */
#define BATCH_LEN_AT       8  /* int32 batchLength: bytes after this field */
#define BATCH_EPOCH_AT     12 /* int32 partitionLeaderEpoch */
#define BATCH_LAST_AT      23 /* int32 lastOffsetDelta */
#define BATCH_HEADER_BYTES 61

/* Frames a request: reserves the size, writes the header, lets body() write the rest, then
 * fills the size in. */
static int frame_begin(st_buf_t *out, int16_t key, int16_t version, int32_t correlation_id,
                       const char *client_id, st_kwriter_t *w, size_t *start)
{
    *start = out->len;
    if (st_buf_put_be32(out, 0))
        return -ENOMEM;
    st_kwriter_init(w, out);
    st_kp_req_header_t h = {key, version, correlation_id, st_kstr(client_id)};
    int hv = st_kp_req_header_version(key, version);
    if (hv < 0)
        return hv;
    return st_kp_req_header_encode(w, hv, &h);
}

static int frame_end(st_buf_t *out, size_t start, int rc)
{
    if (rc == 0 && out->oom)
        rc = -ENOMEM;
    if (rc) {
        out->len = start;
        return rc;
    }
    st_put_be32(out->data + start, (uint32_t)(out->len - start - 4));
    return 0;
}

int st_rwire_fetch_req(st_buf_t *out, int32_t correlation_id, const char *client_id,
                       const st_rwire_fetch_t *fr, const st_rwire_part_t *parts, int n)
{
    st_arena_t arena;
    st_arena_init(&arena, 4096);
    st_kp_fetch_req_t req;
    st_kp_fetch_req_init(&req);
    st_kp_fetch_item_t *items = st_arena_zalloc(&arena, (size_t)n * sizeof *items + 1);
    for (int i = 0; items && i < n; i++) {
        items[i].topic = st_kstr(parts[i].topic);
        items[i].partition = parts[i].partition;
    }
    int rc = items ? st_kp_fetch_req_build(&arena, &req, items, n) : -ENOMEM;
    for (int i = 0; rc == 0 && i < n; i++) {
        st_kp_fetch_req_partition_t *p = items[i].req_partition;
        p->current_leader_epoch = parts[i].current_leader_epoch;
        p->fetch_offset = parts[i].fetch_offset;
        p->last_fetched_epoch = parts[i].last_fetched_epoch;
        p->log_start_offset = parts[i].log_start_offset;
        p->partition_max_bytes = fr->partition_max_bytes;
    }
    if (rc) {
        st_arena_fini(&arena);
        return rc;
    }
    req.replica_id = fr->replica_id;
    req.max_wait_ms = fr->max_wait_ms;
    req.min_bytes = fr->min_bytes;
    req.max_bytes = fr->max_bytes;
    req.isolation_level = 0;
    req.session_id = 0;
    req.session_epoch = -1; /* full fetches: no session */
    st_kwriter_t w;
    size_t start;
    rc = frame_begin(out, ST_KP_API_FETCH, ST_RWIRE_FETCH_VERSION, correlation_id, client_id, &w,
                     &start);
    if (rc == 0)
        rc = st_kp_fetch_req_encode(&w, ST_RWIRE_FETCH_VERSION, &req);
    st_arena_fini(&arena);
    return frame_end(out, start, rc);
}

static int resp_header(st_kreader_t *r, int16_t key, int16_t version, int32_t *corr)
{
    int hv = st_kp_resp_header_version(key, version);
    if (hv < 0)
        return hv;
    st_kp_resp_header_t h;
    int rc = st_kp_resp_header_decode(r, hv, &h);
    if (rc == 0)
        *corr = h.correlation_id;
    return rc;
}

int st_rwire_fetch_resp(const uint8_t *frame, size_t len, st_arena_t *a, int32_t *corr,
                        st_kp_fetch_resp_t *out)
{
    st_kreader_t r;
    st_kreader_init(&r, frame, len, a);
    int rc = resp_header(&r, ST_KP_API_FETCH, ST_RWIRE_FETCH_VERSION, corr);
    if (rc == 0)
        rc = st_kp_fetch_resp_decode(&r, ST_RWIRE_FETCH_VERSION, out);
    return rc;
}

int st_rwire_sasl_handshake_req(st_buf_t *out, int32_t correlation_id, const char *client_id,
                                const char *mechanism)
{
    st_kwriter_t w;
    size_t start;
    st_kp_sasl_handshake_req_t req;
    st_kp_sasl_handshake_req_init(&req);
    req.mechanism = st_kstr(mechanism);
    int rc = frame_begin(out, ST_KP_API_SASL_HANDSHAKE, ST_RWIRE_SASL_HANDSHAKE_VERSION,
                         correlation_id, client_id, &w, &start);
    if (rc == 0)
        rc = st_kp_sasl_handshake_req_encode(&w, ST_RWIRE_SASL_HANDSHAKE_VERSION, &req);
    return frame_end(out, start, rc);
}

int st_rwire_sasl_handshake_resp(const uint8_t *frame, size_t len, st_arena_t *a, int32_t *corr,
                                 st_kp_sasl_handshake_resp_t *out)
{
    st_kreader_t r;
    st_kreader_init(&r, frame, len, a);
    int rc = resp_header(&r, ST_KP_API_SASL_HANDSHAKE, ST_RWIRE_SASL_HANDSHAKE_VERSION, corr);
    if (rc == 0)
        rc = st_kp_sasl_handshake_resp_decode(&r, ST_RWIRE_SASL_HANDSHAKE_VERSION, out);
    return rc;
}

int st_rwire_sasl_authenticate_req(st_buf_t *out, int32_t correlation_id, const char *client_id,
                                   const uint8_t *bytes, size_t n)
{
    st_kwriter_t w;
    size_t start;
    st_kp_sasl_authenticate_req_t req;
    st_kp_sasl_authenticate_req_init(&req);
    req.auth_bytes = (st_kbytes_t){bytes, (int32_t)n};
    int rc = frame_begin(out, ST_KP_API_SASL_AUTHENTICATE, ST_RWIRE_SASL_AUTHENTICATE_VERSION,
                         correlation_id, client_id, &w, &start);
    if (rc == 0)
        rc = st_kp_sasl_authenticate_req_encode(&w, ST_RWIRE_SASL_AUTHENTICATE_VERSION, &req);
    return frame_end(out, start, rc);
}

int st_rwire_sasl_authenticate_resp(const uint8_t *frame, size_t len, st_arena_t *a, int32_t *corr,
                                    st_kp_sasl_authenticate_resp_t *out)
{
    st_kreader_t r;
    st_kreader_init(&r, frame, len, a);
    int rc = resp_header(&r, ST_KP_API_SASL_AUTHENTICATE, ST_RWIRE_SASL_AUTHENTICATE_VERSION, corr);
    if (rc == 0)
        rc = st_kp_sasl_authenticate_resp_decode(&r, ST_RWIRE_SASL_AUTHENTICATE_VERSION, out);
    return rc;
}

size_t st_rwire_whole_batches(const uint8_t *records, size_t len, int32_t *last_epoch,
                              int64_t *next_offset)
{
    size_t at = 0;
    while (len - at >= BATCH_HEADER_BYTES) {
        const uint8_t *b = records + at;
        int32_t blen = (int32_t)st_be32(b + BATCH_LEN_AT);
        if (blen < BATCH_HEADER_BYTES - 12 || (size_t)blen > len - at - 12)
            break;
        int64_t base = (int64_t)st_be64(b);
        int32_t delta = (int32_t)st_be32(b + BATCH_LAST_AT);
        if (base < 0 || delta < 0 || base > INT64_MAX - 1 - delta)
            break; /* offsets no log holds (and no next offset): not a batch to append */
        *last_epoch = (int32_t)st_be32(b + BATCH_EPOCH_AT);
        *next_offset = base + delta + 1;
        at += 12 + (size_t)blen;
    }
    return at;
}
