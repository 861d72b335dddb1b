/* producer_state.c — the last batches of each idempotent producer of a partition. */
#include "kafka/producer_state.h"

#include <errno.h>
#include <stdlib.h>

#include "proto/kerr.h"

void st_pstate_init(st_pstate_t *ps)
{
    ps->slots = NULL;
    ps->cap = 0;
    ps->count = 0;
}

void st_pstate_fini(st_pstate_t *ps)
{
    free(ps->slots);
    st_pstate_init(ps);
}

size_t st_pstate_count(const st_pstate_t *ps)
{
    return ps->count;
}

static size_t st_pid_hash(int64_t pid)
{
    uint64_t h = (uint64_t)pid * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 31));
}

static st_pentry_t *st_pstate_find(const st_pstate_t *ps, int64_t pid)
{
    if (ps->cap == 0)
        return NULL;
    for (size_t i = st_pid_hash(pid) & (ps->cap - 1);; i = (i + 1) & (ps->cap - 1)) {
        if (ps->slots[i].pid == pid)
            return &ps->slots[i];
        if (ps->slots[i].pid == -1)
            return NULL;
    }
}

static int st_pstate_grow(st_pstate_t *ps)
{
    size_t cap = ps->cap ? ps->cap * 2 : 16;
    st_pentry_t *s = malloc(cap * sizeof *s);
    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < cap; i++)
        s[i].pid = -1;
    for (size_t k = 0; k < ps->cap; k++) {
        if (ps->slots[k].pid == -1)
            continue;
        size_t i = st_pid_hash(ps->slots[k].pid) & (cap - 1);
        while (s[i].pid != -1)
            i = (i + 1) & (cap - 1);
        s[i] = ps->slots[k];
    }
    free(ps->slots);
    ps->slots = s;
    ps->cap = cap;
    return 0;
}

int st_pstate_check(const st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                    int32_t last_seq, st_pbatch_t *dup)
{
    const st_pentry_t *e = st_pstate_find(ps, pid);
    if (!e)
        return ST_PSTATE_APPEND; /* a producer new to this partition (or expired) */
    if (epoch < e->epoch)
        return -ST_KERR_INVALID_PRODUCER_EPOCH;
    if (e->nbatches == 0)
        return ST_PSTATE_APPEND; /* every batch it wrote was cut off: it may start anywhere */
    if (epoch > e->epoch)
        return first_seq == 0 ? ST_PSTATE_APPEND : -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    for (int i = 0; i < e->nbatches; i++)
        if (e->batches[i].first_seq == first_seq && e->batches[i].last_seq == last_seq) {
            *dup = e->batches[i];
            return ST_PSTATE_DUPLICATE;
        }
    if (first_seq != st_pstate_seq_add(e->batches[e->nbatches - 1].last_seq, 1))
        return -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    return ST_PSTATE_APPEND;
}

int st_pstate_record(st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                     int32_t last_seq, int64_t first_offset, int64_t last_offset)
{
    st_pentry_t *e = st_pstate_find(ps, pid);
    if (!e) {
        if ((ps->count + 1) * 2 > ps->cap && st_pstate_grow(ps))
            return -ENOMEM;
        size_t i = st_pid_hash(pid) & (ps->cap - 1);
        while (ps->slots[i].pid != -1)
            i = (i + 1) & (ps->cap - 1);
        e = &ps->slots[i];
        e->pid = pid;
        e->epoch = epoch;
        e->nbatches = 0;
        ps->count++;
    }
    if (epoch != e->epoch) {
        e->epoch = epoch;
        e->nbatches = 0;
    }
    if (e->nbatches == ST_PSTATE_BATCHES) {
        for (int i = 1; i < ST_PSTATE_BATCHES; i++)
            e->batches[i - 1] = e->batches[i];
        e->nbatches--;
    }
    e->batches[e->nbatches++] = (st_pbatch_t){first_seq, last_seq, first_offset, last_offset};
    return 0;
}

void st_pstate_truncate(st_pstate_t *ps, int64_t end)
{
    for (size_t i = 0; i < ps->cap; i++) {
        st_pentry_t *e = &ps->slots[i];
        if (e->pid == -1)
            continue;
        while (e->nbatches > 0 && e->batches[e->nbatches - 1].last_offset >= end)
            e->nbatches--;
    }
}
