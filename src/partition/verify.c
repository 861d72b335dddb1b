/*
 * verify.c — which transactional produces need the coordinator's word first (KIP-890 part 1;
 * partition.h explains the exchange), and the guard that makes the word hold until the append.
 */
#include "base/clock.h"
#include "partition/part_impl.h"
#include "storage/batch.h"

bool st_part_txn_verify_needed(const st_part_t *p, const uint8_t *records, size_t len, int64_t *pid,
                               int16_t *epoch, int32_t *seq, uint32_t *guard)
{
    st_batch_hdr_t h;
    if (!p->log || len < ST_BATCH_HEADER_SIZE || st_batch_parse_hdr(records, len, &h) ||
        !(h.attributes & ST_BATCH_ATTR_TRANSACTIONAL) || h.producer_id < 0)
        return false; /* malformed or not transactional: the append says what is wrong */
    const st_pentry_t *e = st_pstate_find(&p->pstate, h.producer_id);
    if (e && e->txn_first >= 0 && e->epoch == h.producer_epoch)
        return false; /* its transaction is open here already: the coordinator added it */
    *pid = h.producer_id;
    *epoch = h.producer_epoch;
    *seq = h.base_sequence;
    *guard = p->marker_gen[(uint64_t)h.producer_id % ST_PART_VERIFY_BUCKETS];
    return true;
}

bool st_part_txn_guard_holds(const st_part_t *p, int64_t pid, uint32_t guard)
{
    return p->marker_gen[(uint64_t)pid % ST_PART_VERIFY_BUCKETS] == guard;
}

static bool live(const st_part_t *p, int i, int64_t now)
{
    return p->verifying[i].pid >= 0 && now - p->verifying[i].since_ms < ST_PART_VERIFY_PENDING_MS;
}

void st_part_verify_pending(st_part_t *p, int64_t pid, int16_t epoch, int32_t seq)
{
    int64_t now = st_mono_ms();
    int slot = -1;
    for (int i = 0; i < ST_PART_VERIFYING; i++) {
        if (p->verifying[i].pid == pid && p->verifying[i].epoch == epoch &&
            p->verifying[i].seq == seq) {
            slot = i; /* a retry of the same batch */
            break;
        }
        if (slot < 0 && !live(p, i, now))
            slot = i;
    }
    if (slot < 0)
        return; /* full: the order is left to the sequence checks, as without notes */
    p->verifying[slot].pid = pid;
    p->verifying[slot].epoch = epoch;
    p->verifying[slot].seq = seq;
    p->verifying[slot].since_ms = now;
}

bool st_part_verify_behind(const st_part_t *p, int64_t pid, int16_t epoch, int32_t seq)
{
    int64_t now = st_mono_ms();
    for (int i = 0; i < ST_PART_VERIFYING; i++)
        if (live(p, i, now) && p->verifying[i].pid == pid && p->verifying[i].epoch == epoch &&
            p->verifying[i].seq < seq)
            return true;
    return false;
}

void st_part_verify_forget(st_part_t *p, int64_t pid, int16_t epoch, int32_t seq)
{
    for (int i = 0; i < ST_PART_VERIFYING; i++)
        if (p->verifying[i].pid == pid && p->verifying[i].epoch == epoch &&
            p->verifying[i].seq == seq)
            p->verifying[i].pid = -1;
}
