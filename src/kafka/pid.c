/* pid.c — producer ids unique across a cluster's brokers (layout and limits in pid.h). */
#include "kafka/pid.h"

#include "base/clock.h"

int64_t st_kpid_base(int32_t node_id, int64_t now_ms)
{
    int64_t node = (int64_t)((uint32_t)node_id & ((1u << ST_KPID_NODE_BITS) - 1));
    int64_t ms = now_ms > ST_KPID_EPOCH_MS ? now_ms - ST_KPID_EPOCH_MS : 0;
    int64_t ms_mask = (INT64_C(1) << (63 - ST_KPID_NODE_BITS - ST_KPID_COUNT_BITS)) - 1;
    return node << (63 - ST_KPID_NODE_BITS) | (ms & ms_mask) << ST_KPID_COUNT_BITS;
}

int64_t st_kpid_next(_Atomic int64_t *next, int32_t node_id, int64_t now_ms)
{
    int64_t unset = 0;
    if (atomic_load_explicit(next, memory_order_relaxed) == 0)
        atomic_compare_exchange_strong(next, &unset, st_kpid_base(node_id, now_ms));
    return atomic_fetch_add(next, 1);
}

/* This broker's next producer id: the process's, for all its shards. */
static _Atomic int64_t run_next;

int64_t st_kpid_take(int32_t node_id)
{
    return st_kpid_next(&run_next, node_id, st_wall_ms());
}
