/* records.c — __consumer_offsets keys and values (layouts in records.h), batch writer. */
#include "group/records.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "base/varint.h"
#include "proto/kreader.h"
#include "proto/kwriter.h"
#include "storage/batch.h"

#define TRY(e)                                                                                     \
    do {                                                                                           \
        if ((e) != 0)                                                                              \
            return ST_E_CORRUPT;                                                                   \
    } while (0)

static int st_grec_offset_value_decode(st_kreader_t *r, st_grec_t *out)
{
    int16_t v;
    TRY(st_kreader_i16(r, &v));
    if (v < 0 || v > 3)
        return ST_E_UNSUPPORTED;
    TRY(st_kreader_i64(r, &out->offset));
    out->leader_epoch = -1;
    if (v >= 3)
        TRY(st_kreader_i32(r, &out->leader_epoch));
    TRY(st_kreader_str(r, false, true, &out->metadata));
    TRY(st_kreader_i64(r, &out->commit_timestamp));
    out->expire_timestamp = -1;
    if (v == 1)
        TRY(st_kreader_i64(r, &out->expire_timestamp));
    return 0;
}

static int st_grec_group_value_decode(st_kreader_t *r, st_grec_t *out)
{
    int16_t v;
    TRY(st_kreader_i16(r, &v));
    if (v < 0 || v > 3)
        return ST_E_UNSUPPORTED;
    TRY(st_kreader_str(r, false, false, &out->protocol_type));
    TRY(st_kreader_i32(r, &out->generation));
    TRY(st_kreader_str(r, false, true, &out->protocol));
    TRY(st_kreader_str(r, false, true, &out->leader));
    out->current_state_timestamp = -1;
    if (v >= 2)
        TRY(st_kreader_i64(r, &out->current_state_timestamp));
    TRY(st_kreader_count(r, false, false, 16, &out->nmembers));
    out->members = st_kreader_alloc(r, (size_t)out->nmembers + 1, sizeof *out->members);
    if (!out->members)
        return -ENOMEM;
    for (int32_t i = 0; i < out->nmembers; i++) {
        st_grec_member_t *m = &out->members[i];
        TRY(st_kreader_str(r, false, false, &m->member_id));
        m->group_instance_id = ST_KSTR_NULL;
        if (v >= 3)
            TRY(st_kreader_str(r, false, true, &m->group_instance_id));
        TRY(st_kreader_str(r, false, false, &m->client_id));
        TRY(st_kreader_str(r, false, false, &m->client_host));
        if (v >= 1)
            TRY(st_kreader_i32(r, &m->rebalance_timeout));
        TRY(st_kreader_i32(r, &m->session_timeout));
        if (v == 0)
            m->rebalance_timeout = m->session_timeout;
        TRY(st_kreader_bytes(r, false, false, &m->subscription));
        TRY(st_kreader_bytes(r, false, false, &m->assignment));
    }
    return 0;
}

int st_grec_decode(const uint8_t *key, int32_t key_len, const uint8_t *value, int32_t value_len,
                   st_arena_t *arena, st_grec_t *out)
{
    memset(out, 0, sizeof *out);
    if (!key || key_len < 2)
        return ST_E_CORRUPT;
    st_kreader_t r;
    st_kreader_init(&r, key, (size_t)key_len, arena);
    int16_t kv;
    TRY(st_kreader_i16(&r, &kv));
    if (kv == 0 || kv == 1) {
        out->kind = ST_GREC_OFFSET;
        TRY(st_kreader_str(&r, false, false, &out->group));
        TRY(st_kreader_str(&r, false, false, &out->topic));
        TRY(st_kreader_i32(&r, &out->partition));
    } else if (kv == 2) {
        out->kind = ST_GREC_GROUP;
        TRY(st_kreader_str(&r, false, false, &out->group));
    } else {
        return ST_E_UNSUPPORTED;
    }
    if (value_len < 0 || !value) {
        out->tombstone = true;
        return 0;
    }
    st_kreader_init(&r, value, (size_t)value_len, arena);
    return out->kind == ST_GREC_OFFSET ? st_grec_offset_value_decode(&r, out)
                                       : st_grec_group_value_decode(&r, out);
}

void st_grec_offset_key(st_buf_t *b, st_kstr_t group, st_kstr_t topic, int32_t partition)
{
    st_kwriter_t w;
    st_kwriter_init(&w, b);
    st_kwriter_i16(&w, 1);
    st_kwriter_str(&w, false, false, group);
    st_kwriter_str(&w, false, false, topic);
    st_kwriter_i32(&w, partition);
}

void st_grec_offset_value(st_buf_t *b, int64_t offset, int32_t leader_epoch, st_kstr_t metadata,
                          int64_t commit_timestamp, int64_t expire_timestamp)
{
    st_kwriter_t w;
    st_kwriter_init(&w, b);
    st_kwriter_i16(&w, expire_timestamp >= 0 ? 1 : 3);
    st_kwriter_i64(&w, offset);
    if (expire_timestamp < 0)
        st_kwriter_i32(&w, leader_epoch);
    st_kwriter_str(&w, false, true, metadata.len < 0 ? ST_KSTR_EMPTY : metadata);
    st_kwriter_i64(&w, commit_timestamp);
    if (expire_timestamp >= 0)
        st_kwriter_i64(&w, expire_timestamp);
}

void st_grec_group_key(st_buf_t *b, st_kstr_t group)
{
    st_kwriter_t w;
    st_kwriter_init(&w, b);
    st_kwriter_i16(&w, 2);
    st_kwriter_str(&w, false, false, group);
}

void st_grec_group_value(st_buf_t *b, const st_grec_t *rec)
{
    st_kwriter_t w;
    st_kwriter_init(&w, b);
    st_kwriter_i16(&w, 3);
    st_kwriter_str(&w, false, false,
                   rec->protocol_type.len < 0 ? ST_KSTR_EMPTY : rec->protocol_type);
    st_kwriter_i32(&w, rec->generation);
    st_kwriter_str(&w, false, true, rec->protocol);
    st_kwriter_str(&w, false, true, rec->leader);
    st_kwriter_i64(&w, rec->current_state_timestamp);
    st_kwriter_i32(&w, rec->nmembers);
    for (int32_t i = 0; i < rec->nmembers; i++) {
        const st_grec_member_t *m = &rec->members[i];
        st_kwriter_str(&w, false, false, m->member_id);
        st_kwriter_str(&w, false, true, m->group_instance_id);
        st_kwriter_str(&w, false, false, m->client_id.len < 0 ? ST_KSTR_EMPTY : m->client_id);
        st_kwriter_str(&w, false, false, m->client_host.len < 0 ? ST_KSTR_EMPTY : m->client_host);
        st_kwriter_i32(&w, m->rebalance_timeout);
        st_kwriter_i32(&w, m->session_timeout);
        st_kbytes_t empty = {(const uint8_t *)"", 0};
        st_kwriter_bytes(&w, false, false, m->subscription.len < 0 ? empty : m->subscription);
        st_kwriter_bytes(&w, false, false, m->assignment.len < 0 ? empty : m->assignment);
    }
}

/* ---- batch writer ---- */

void st_gbatch_init(st_gbatch_t *w, int64_t timestamp, size_t max_batch_bytes)
{
    st_buf_init(&w->out);
    w->open_at = SIZE_MAX;
    w->count = 0;
    w->total = 0;
    w->timestamp = timestamp;
    w->max_batch_bytes = max_batch_bytes;
    w->producer_id = -1;
    w->producer_epoch = -1;
}

void st_gbatch_set_txn(st_gbatch_t *w, int64_t pid, int16_t epoch)
{
    w->producer_id = pid;
    w->producer_epoch = epoch;
    w->max_batch_bytes = SIZE_MAX;
}

int st_grec_control_decode(const uint8_t *key, int32_t key_len, int16_t *type)
{
    if (!key || key_len < 4)
        return ST_E_CORRUPT;
    if (st_be16(key) != 0)
        return ST_E_UNSUPPORTED;
    *type = (int16_t)st_be16(key + 2);
    return 0;
}

void st_gbatch_fini(st_gbatch_t *w)
{
    st_buf_fini(&w->out);
}

int st_gbatch_finish(st_gbatch_t *w)
{
    if (w->open_at == SIZE_MAX)
        return w->out.oom ? -ENOMEM : 0;
    if (w->out.oom)
        return -ENOMEM;
    uint8_t *b = w->out.data + w->open_at;
    size_t size = w->out.len - w->open_at;
    st_put_be64(b + ST_BATCH_OFF_BASE_OFFSET, 0);
    st_put_be32(b + ST_BATCH_OFF_LENGTH, (uint32_t)(size - ST_BATCH_LOG_OVERHEAD));
    st_put_be32(b + ST_BATCH_OFF_LEADER_EPOCH, (uint32_t)-1);
    b[ST_BATCH_OFF_MAGIC] = ST_BATCH_MAGIC_V2;
    st_put_be16(b + ST_BATCH_OFF_ATTRIBUTES, w->producer_id >= 0 ? ST_BATCH_ATTR_TRANSACTIONAL : 0);
    st_put_be32(b + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(w->count - 1));
    st_put_be64(b + ST_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)w->timestamp);
    st_put_be64(b + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)w->timestamp);
    st_put_be64(b + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)w->producer_id);
    st_put_be16(b + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)w->producer_epoch);
    st_put_be32(b + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)-1);
    st_put_be32(b + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)w->count);
    st_put_be32(b + ST_BATCH_OFF_CRC, st_batch_compute_crc(b, size));
    w->open_at = SIZE_MAX;
    w->count = 0;
    return 0;
}

int st_gbatch_add(st_gbatch_t *w, const uint8_t *key, size_t key_len, const uint8_t *value,
                  int32_t value_len)
{
    if (w->open_at != SIZE_MAX && w->out.len - w->open_at >= w->max_batch_bytes) {
        int rc = st_gbatch_finish(w);
        if (rc)
            return rc;
    }
    if (w->open_at == SIZE_MAX) {
        w->open_at = w->out.len;
        if (!st_buf_extend(&w->out, ST_BATCH_HEADER_SIZE))
            return -ENOMEM;
        memset(w->out.data + w->open_at, 0, ST_BATCH_HEADER_SIZE);
    }
    /* body: attributes, timestampDelta 0, offsetDelta, key, value, no headers */
    uint8_t head[1 + 10 + 5 + 5];
    size_t n = 0;
    head[n++] = 0;
    n += (size_t)st_varint64_encode(head + n, 0);
    n += (size_t)st_varint32_encode(head + n, w->count);
    n += (size_t)st_varint32_encode(head + n, (int32_t)key_len);
    uint8_t vlen[5];
    int vl = st_varint32_encode(vlen, value_len < 0 ? -1 : value_len);
    size_t body = n + key_len + (size_t)vl + (value_len > 0 ? (size_t)value_len : 0) + 1;
    uint8_t len[5];
    int ll = st_varint32_encode(len, (int32_t)body);
    st_buf_append(&w->out, len, (size_t)ll);
    st_buf_append(&w->out, head, n);
    st_buf_append(&w->out, key, key_len);
    st_buf_append(&w->out, vlen, (size_t)vl);
    if (value_len > 0)
        st_buf_append(&w->out, value, (size_t)value_len);
    st_buf_put_u8(&w->out, 0); /* headerCount varint 0 */
    if (w->out.oom)
        return -ENOMEM;
    w->count++;
    w->total++;
    return 0;
}
