/*
 * batch.c — RecordBatch v2 header parse, CRC, validation and record walk.
 *
 * The layout is drawn in batch.h. Everything here reads untrusted bytes: every length is checked
 * against what is available before it is used, and nothing here asserts on input.
 */
#include "storage/batch.h"

#include "base/buf.h"
#include "base/crc32c.h"
#include "base/err.h"
#include "base/varint.h"

int st_batch_parse_hdr(const uint8_t *p, size_t n, st_batch_hdr_t *h)
{
    if (n < ST_BATCH_HEADER_SIZE)
        return ST_E_TRUNCATED;
    h->base_offset = (int64_t)st_be64(p + ST_BATCH_OFF_BASE_OFFSET);
    h->batch_length = (int32_t)st_be32(p + ST_BATCH_OFF_LENGTH);
    h->partition_leader_epoch = (int32_t)st_be32(p + ST_BATCH_OFF_LEADER_EPOCH);
    h->magic = (int8_t)p[ST_BATCH_OFF_MAGIC];
    h->crc = st_be32(p + ST_BATCH_OFF_CRC);
    h->attributes = (int16_t)st_be16(p + ST_BATCH_OFF_ATTRIBUTES);
    h->last_offset_delta = (int32_t)st_be32(p + ST_BATCH_OFF_LAST_OFFSET_DELTA);
    h->base_timestamp = (int64_t)st_be64(p + ST_BATCH_OFF_BASE_TIMESTAMP);
    h->max_timestamp = (int64_t)st_be64(p + ST_BATCH_OFF_MAX_TIMESTAMP);
    h->producer_id = (int64_t)st_be64(p + ST_BATCH_OFF_PRODUCER_ID);
    h->producer_epoch = (int16_t)st_be16(p + ST_BATCH_OFF_PRODUCER_EPOCH);
    h->base_sequence = (int32_t)st_be32(p + ST_BATCH_OFF_BASE_SEQUENCE);
    h->records_count = (int32_t)st_be32(p + ST_BATCH_OFF_RECORDS_COUNT);
    if (h->batch_length < ST_BATCH_HEADER_SIZE - ST_BATCH_LOG_OVERHEAD ||
        h->batch_length > ST_BATCH_MAX_SIZE)
        return ST_E_CORRUPT;
    if (h->magic != ST_BATCH_MAGIC_V2)
        return ST_E_UNSUPPORTED;
    return 0;
}

uint32_t st_batch_compute_crc(const uint8_t *batch, size_t size)
{
    return st_crc32c(0, batch + ST_BATCH_CRC_START, size - ST_BATCH_CRC_START);
}

int st_batch_check(const uint8_t *p, size_t n, st_batch_hdr_t *h)
{
    int rc = st_batch_parse_hdr(p, n, h);
    if (rc < 0)
        return rc;
    if ((uint64_t)st_batch_size(h) > n)
        return ST_E_TRUNCATED;
    if (h->last_offset_delta < 0)
        return ST_E_CORRUPT;
    if (st_batch_compute_crc(p, (size_t)st_batch_size(h)) != h->crc)
        return ST_E_CORRUPT;
    return 0;
}

static int verdict(st_batch_verdict_t *v, int err, const char *why)
{
    if (v) {
        v->err = err;
        v->why = why;
    }
    return err;
}

int st_batch_validate_client(const uint8_t *p, size_t n, int64_t max_bytes, st_batch_hdr_t *h,
                             st_batch_verdict_t *v)
{
    if (n < ST_BATCH_LOG_OVERHEAD + 5)
        return verdict(v, ST_E_CORRUPT, "records shorter than a batch header");
    /* The magic byte decides how to read the rest; look at it before the v2 header. */
    if (p[ST_BATCH_OFF_MAGIC] != ST_BATCH_MAGIC_V2)
        return verdict(v, ST_E_UNSUPPORTED, "magic is not 2");
    int rc = st_batch_parse_hdr(p, n, h);
    if (rc == ST_E_TRUNCATED)
        return verdict(v, ST_E_CORRUPT, "records shorter than a batch header");
    if (rc < 0)
        return verdict(v, rc, "batch length out of bounds");
    if (st_batch_size(h) > max_bytes)
        return verdict(v, ST_E_TOO_LARGE, "batch larger than max.message.bytes");
    if ((uint64_t)st_batch_size(h) > n)
        return verdict(v, ST_E_CORRUPT, "batch length runs past the end of the records");
    if (st_batch_compute_crc(p, (size_t)st_batch_size(h)) != h->crc)
        return verdict(v, ST_E_CORRUPT, "CRC-32C mismatch");
    if (h->attributes & ST_BATCH_ATTR_CONTROL)
        return verdict(v, ST_E_MALFORMED, "control batch from a client");
    if (h->records_count < 1)
        return verdict(v, ST_E_MALFORMED, "batch holds no records");
    if (h->last_offset_delta < 0 || (int64_t)h->last_offset_delta + 1 != h->records_count)
        return verdict(v, ST_E_MALFORMED, "lastOffsetDelta + 1 != record count");
    if (st_batch_compression(h) > 4)
        return verdict(v, ST_E_MALFORMED, "unknown compression codec");
    if (st_batch_compression(h) == 0) {
        st_batch_iter_t it;
        st_batch_record_t r;
        st_batch_iter_init(&it, p, (size_t)st_batch_size(h));
        int32_t i = 0;
        while ((rc = st_batch_iter_next(&it, &r)) == 1) {
            if (r.offset - h->base_offset != i)
                return verdict(v, ST_E_MALFORMED, "record offset deltas not 0..n-1");
            i++;
        }
        if (rc < 0 || it.p != it.end)
            return verdict(v, ST_E_CORRUPT, "records do not parse");
        if (i != h->records_count)
            return verdict(v, ST_E_MALFORMED, "record count differs from the records");
    }
    return verdict(v, 0, "ok");
}

void st_batch_set_base_offset(uint8_t *batch, int64_t base_offset)
{
    st_put_be64(batch + ST_BATCH_OFF_BASE_OFFSET, (uint64_t)base_offset);
}

void st_batch_set_leader_epoch(uint8_t *batch, int32_t epoch)
{
    st_put_be32(batch + ST_BATCH_OFF_LEADER_EPOCH, (uint32_t)epoch);
}

void st_batch_set_log_append_time(uint8_t *batch, size_t size, int64_t ts)
{
    uint16_t attr = st_be16(batch + ST_BATCH_OFF_ATTRIBUTES);
    st_put_be16(batch + ST_BATCH_OFF_ATTRIBUTES, (uint16_t)(attr | ST_BATCH_ATTR_LOG_APPEND_TIME));
    st_put_be64(batch + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)ts);
    st_put_be32(batch + ST_BATCH_OFF_CRC, st_batch_compute_crc(batch, size));
}

int st_batch_iter_init(st_batch_iter_t *it, const uint8_t *batch, size_t size)
{
    int rc = st_batch_parse_hdr(batch, size, &it->hdr);
    if (rc < 0)
        return rc;
    if ((uint64_t)st_batch_size(&it->hdr) > size)
        return ST_E_TRUNCATED;
    it->p = batch + ST_BATCH_HEADER_SIZE;
    it->end = batch + st_batch_size(&it->hdr);
    it->index = 0;
    if (st_batch_compression(&it->hdr) != 0) {
        it->p = it->end;
        return ST_E_UNSUPPORTED;
    }
    return 0;
}

/* Reads a zigzag varint32 at *p (below end) and advances; negative on error. */
static int rd_vi32(const uint8_t **p, const uint8_t *end, int32_t *out)
{
    int n = st_varint32_decode(*p, (size_t)(end - *p), out);
    if (n < 0)
        return ST_E_CORRUPT;
    *p += n;
    return 0;
}

/* Reads a nullable byte string (varint length, -1 = null) and advances. */
static int rd_bytes(const uint8_t **p, const uint8_t *end, const uint8_t **data, int32_t *len)
{
    if (rd_vi32(p, end, len) < 0 || *len < -1)
        return ST_E_CORRUPT;
    if (*len > 0 && *len > end - *p)
        return ST_E_CORRUPT;
    *data = *len >= 0 ? *p : NULL;
    if (*len > 0)
        *p += *len;
    return 0;
}

int st_batch_iter_next(st_batch_iter_t *it, st_batch_record_t *rec)
{
    if (it->index >= it->hdr.records_count || it->p >= it->end)
        return 0;
    const uint8_t *p = it->p;
    int32_t len;
    if (rd_vi32(&p, it->end, &len) < 0 || len < 1 || len > it->end - p)
        return ST_E_CORRUPT;
    const uint8_t *end = p + len;
    rec->attributes = (int8_t)*p++;
    int64_t ts_delta;
    int n = st_varint64_decode(p, (size_t)(end - p), &ts_delta);
    if (n < 0)
        return ST_E_CORRUPT;
    p += n;
    int32_t off_delta;
    if (rd_vi32(&p, end, &off_delta) < 0)
        return ST_E_CORRUPT;
    if (rd_bytes(&p, end, &rec->key, &rec->key_len) < 0 ||
        rd_bytes(&p, end, &rec->value, &rec->value_len) < 0 ||
        rd_vi32(&p, end, &rec->header_count) < 0 || rec->header_count < 0)
        return ST_E_CORRUPT;
    rec->headers = p;
    for (int32_t i = 0; i < rec->header_count; i++) {
        const uint8_t *d;
        int32_t l;
        if (rd_bytes(&p, end, &d, &l) < 0 || l < 0 || rd_bytes(&p, end, &d, &l) < 0)
            return ST_E_CORRUPT;
    }
    if (p != end)
        return ST_E_CORRUPT;
    rec->headers_len = (size_t)(end - rec->headers);
    rec->offset = it->hdr.base_offset + off_delta;
    if (it->hdr.attributes & ST_BATCH_ATTR_LOG_APPEND_TIME)
        rec->timestamp = it->hdr.max_timestamp;
    else
        rec->timestamp = (int64_t)((uint64_t)it->hdr.base_timestamp + (uint64_t)ts_delta);
    it->p = end;
    it->index++;
    return 1;
}
