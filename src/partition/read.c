/*
 * read.c — what consumers may read of a partition: Fetch reads below the high watermark,
 * ListOffsets, and OffsetForLeaderEpoch from the leader epoch cache.
 */
#include <stdlib.h>

#include "base/err.h"
#include "partition/partition.h"
#include "partition/part_impl.h"
#include "proto/kerr.h"

/* Reads from offset up to `limit` (the high watermark for consumers, the log end for
 * replicas). */
static int16_t read_upto(st_part_t *p, int64_t offset, int32_t max_bytes, int64_t limit,
                         st_part_read_t *out)
{
    out->read.bytes = 0;
    if (!p->log)
        return ST_KERR_KAFKA_STORAGE_ERROR; /* offline */
    out->hw = p->hw;
    out->lso = st_part_lso(p);
    out->log_start = st_log_start_offset(p->log);
    if (offset < out->log_start || offset > st_log_end_offset(p->log))
        return ST_KERR_OFFSET_OUT_OF_RANGE;
    if (offset >= limit || max_bytes <= 0)
        return 0;
    int rc = st_log_read(p->log, offset, max_bytes, limit, &out->read);
    if (rc) {
        out->read.bytes = 0;
        return st_kerr_from(rc);
    }
    if (out->read.bytes == 0) {
        st_log_read_release(&out->read);
        out->read.bytes = 0;
        return 0;
    }
    p->records_out += (uint64_t)(out->read.next_offset - offset);
    p->bytes_out += (uint64_t)out->read.bytes;
    return 0;
}

int16_t st_part_read(st_part_t *p, int64_t offset, int32_t max_bytes, st_part_read_t *out)
{
    return read_upto(p, offset, max_bytes, p->hw, out);
}

int16_t st_part_read_committed(st_part_t *p, int64_t offset, int32_t max_bytes, st_part_read_t *out)
{
    return read_upto(p, offset, max_bytes, st_part_lso(p), out);
}

int16_t st_part_read_replica(st_part_t *p, int64_t offset, int32_t max_bytes, st_part_read_t *out)
{
    return read_upto(p, offset, max_bytes, p->log ? st_log_end_offset(p->log) : 0, out);
}

/* The epoch ListOffsets and OffsetForLeaderEpoch report: 0 before any append. */
static int32_t latest_epoch(st_part_t *p)
{
    return st_log_latest_epoch(p->log) < 0 ? 0 : st_log_latest_epoch(p->log);
}

int16_t st_part_list_offset(st_part_t *p, int64_t ts, int64_t *offset, int64_t *timestamp,
                            int32_t *epoch)
{
    if (!p->log)
        return ST_KERR_KAFKA_STORAGE_ERROR;
    *epoch = latest_epoch(p);
    *timestamp = -1;
    if (ts == -1) {
        *offset = p->hw;
    } else if (ts == -2 || ts == -4 || ts == -5) {
        *offset = st_log_start_offset(p->log);
    } else if (ts == -3) {
        int64_t t, o;
        if (st_log_max_timestamp(p->log, &t, &o) == 0 && o < p->hw) {
            *offset = o;
            *timestamp = t;
        } else {
            *offset = -1;
        }
    } else if (ts >= 0) {
        int64_t o, t;
        int rc = st_log_offset_for_timestamp(p->log, ts, &o, &t);
        if (rc == 0 && o < p->hw) {
            *offset = o;
            *timestamp = t;
        } else if (rc == 0 || rc == ST_E_NOT_FOUND) {
            *offset = -1;
        } else {
            return st_kerr_from(rc);
        }
    } else {
        return ST_KERR_INVALID_REQUEST;
    }
    return 0;
}

int16_t st_part_end_for_epoch(st_part_t *p, int32_t epoch, int32_t current_epoch,
                              int32_t *out_epoch, int64_t *end_offset)
{
    if (!p->log)
        return ST_KERR_KAFKA_STORAGE_ERROR;
    int32_t latest = latest_epoch(p);
    if (current_epoch >= 0 && current_epoch < latest)
        return ST_KERR_FENCED_LEADER_EPOCH;
    if (current_epoch > latest)
        return ST_KERR_UNKNOWN_LEADER_EPOCH;
    int32_t e;
    int64_t end;
    if (st_log_latest_epoch(p->log) < 0) {
        /* Nothing appended yet: the only epoch is the current one, ending at the log end. */
        e = epoch <= latest ? epoch : -1;
        end = e >= 0 ? st_log_end_offset(p->log) : -1;
    } else if (st_log_end_offset_for_epoch(p->log, epoch, &e, &end)) {
        e = -1;
        end = -1;
    }
    *out_epoch = e;
    *end_offset = end;
    return 0;
}
