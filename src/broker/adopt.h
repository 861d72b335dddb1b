/*
 * adopt.h — a metadata state adopted by every shard of this broker: the per-shard apply of
 * what the metadata quorum published.
 *
 *   shard 0: st_broker_adopt(s0, md, done)      (md: one reference, handed over)
 *     -> the partitions get their shards on this broker (st_md_assign_shards)
 *     -> a fan-out leg on every shard (broker/fanout.h), in the order states are adopted:
 *          swap the shard's snapshot -> hooks->md_adopted
 *          -> each open partition this broker no longer hosts: hooks->partition_gone, deleted
 *          -> each partition it hosts on this shard, in slices of ST_ADOPT_SLICE_NS of work
 *             (the shard serves between them: 10,000 partitions take seconds to open): opened
 *             if new (an open failure is recorded: the partition is offline), the slice's
 *             opens under one deferred sync (storage/env.h) made on a thread of its own
 *             (syncfs), an opened partition getting its role only once that sync is back;
 *             reconfigured when its topic's configs changed; given its role (leader or
 *             follower, epochs, replicas, ISR: st_part_set_role) -> hooks->partition_role,
 *             skipped when the role, the brokers and the configs are what they were
 *     -> back on shard 0, once every shard is done: done(s0, arg, md, fails)
 *   A leg reaching a shard whose previous adoption is still in slices waits for it (states
 *   are adopted in order). A stopping shard opens nothing more.
 *
 * Threads: st_broker_adopt and done on shard 0; the legs and the hooks on each shard.
 */
#ifndef ST_BROKER_ADOPT_H
#define ST_BROKER_ADOPT_H

#include <stdint.h>

#include "broker/shard.h"
#include "cluster/metadata.h"

#define ST_ADOPT_FAILS 8

/* Partitions a shard could not open (the first ST_ADOPT_FAILS of them). */
typedef struct st_adopt_fails {
    int n;
    struct {
        uint8_t id[16];
        int32_t partition;
        int err;
    } f[ST_ADOPT_FAILS];
} st_adopt_fails_t;

/* Shard 0, once every shard adopted md: fails gathers every shard's, md is valid during the call.
 */
typedef void (*st_adopt_done_fn)(st_kshard_t *s0, void *arg, const st_md_t *md,
                                 const st_adopt_fails_t *fails);

/* Work of one slice of an adoption on a shard before it serves again (then its deferred sync,
 * a few milliseconds). */
#define ST_ADOPT_SLICE_NS (20 * 1000 * 1000)
/* Partitions one slice opens at most, and slices waiting for their syncs at a time. */
#define ST_ADOPT_SLICE_MAX 256
#define ST_ADOPT_SYNCS     2

/* Shard 0: every shard adopts md (takes its one reference). Until it is done on every shard
 * (done called), b->adopting counts it: a stopping shard keeps its logs open until then, and the
 * last one done wakes every shard. */
void st_broker_adopt(st_kshard_t *s0, st_md_t *md, st_adopt_done_fn done, void *arg);
/* On each shard at its end: frees its adoption queue. */
void st_broker_adopt_fini(st_kshard_t *s);
/* The shard's adoption slices so far and the longest one (ns). */
void st_broker_adopt_stats(const st_kshard_t *s, uint64_t *slices, uint64_t *longest_ns);

#endif
