/*
 * snap.h — what a shard publishes for the admin thread: an immutable snapshot of the state it
 * owns, swapped in whole, read without locks.
 *
 * Each shard, on its own thread (the broker's tick hook, every 100 ms; a new snapshot at most
 * every ST_ADMIN_PUBLISH_MS, and once before the shard serves), copies what only it may read
 * (its partitions' offsets, sizes, segment counts and counters; its loop and connection
 * figures; its consumer groups, through registered collectors) into a fresh st_admin_snap_t
 * and publishes it in its slot:
 *
 *   shard thread                         admin (HTTP) thread
 *   ------------                         -------------------
 *   snap = build()                       readers++              (seq_cst)
 *   old = exchange(slot.cur, snap)       p = slot.cur; p->refs++
 *   retired += old                       readers--
 *   if readers == 0: unref(retired)      ... render from p ...
 *                                        unref(p)
 *
 * Invariant: a snapshot on the retired list is unreferenced only once `readers` was seen at 0
 * after it was swapped out, so any reader that loaded it had already taken its reference; a
 * reader arriving later loads the new pointer. Whichever side drops the last reference frees
 * it. The shard never waits for a reader, and a reader never waits for the shard.
 *
 * Counters that are already atomics (request statistics, mesh counters) are not copied: the
 * admin thread reads them directly.
 */
#ifndef ST_ADMIN_SNAP_H
#define ST_ADMIN_SNAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "cluster/metadata.h"
#include "io/loop.h"
#include "txn/stats.h"

#define ST_ADMIN_PUBLISH_MS 1000

typedef struct st_kshard st_kshard_t;

/* One partition this shard owns, as it was when the snapshot was taken. */
typedef struct st_admin_part {
    const char *topic; /* in the snapshot's arena */
    int32_t partition;
    int32_t shard;
    int64_t log_start_offset;
    int64_t log_end_offset;
    int64_t high_watermark;
    int64_t last_stable_offset; /* read_committed consumers read below it */
    int32_t ongoing_txns;       /* transactions ongoing in the partition */
    int64_t oldest_txn_age_ms;  /* the oldest one's age when the snapshot was taken (0: none) */
    int64_t size_bytes;
    int32_t segments;
    uint64_t records_in, bytes_in;   /* produced */
    uint64_t records_out, bytes_out; /* fetched */
    bool offline;                    /* its log could not be opened: offsets are -1 */
    /* replication: only for a partition this broker leads in a cluster */
    bool leads;
    int16_t replicas, isr;    /* the replica set's and the ISR's sizes */
    int64_t max_follower_lag; /* offsets the farthest replica is behind the leader's durable
                                 end (its last fetch; -1: a replica not heard from yet) */
    /* log cleaner: only for a compacted partition (cleanup.policy holds compact) */
    bool compact;
    bool cleaning;            /* a clean is in progress */
    double dirty_ratio;       /* dirty / cleanable bytes of its closed segments */
    int64_t last_clean_ms;    /* wall clock of the last finished clean, -1 never */
    int64_t cleans;           /* finished cleans since the partition opened */
    int64_t clean_bytes_read; /* by finished cleans */
    int64_t bytes_reclaimed;  /* read - written, by finished cleans */
    int64_t records_removed;
} st_admin_part_t;

/* One consumer group coordinated by this shard. */
typedef struct st_admin_group {
    const char *group;
    const char *state; /* "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead" */
    int32_t members;
    int32_t shard;
} st_admin_group_t;

/* One committed offset of a group. Lag is computed at render time against the partition's
 * high watermark, wherever that partition lives. */
typedef struct st_admin_goffset {
    const char *group;
    const char *topic;
    int32_t partition;
    int64_t committed;
} st_admin_goffset_t;

typedef struct st_admin_snap {
    _Atomic int refs;
    struct st_admin_snap *next_retired; /* on the publishing shard's retired list */
    int shard;
    int64_t taken_ns; /* monotonic */
    st_md_t *md;      /* the shard's metadata snapshot then (a reference) */
    /* event loop */
    int64_t busy_ns, total_ns;
    double busy_ratio; /* busy / elapsed since the previous snapshot */
    uint64_t slow_tasks;
    uint64_t loop_iter[ST_LOOP_ITER_BUCKETS + 1]; /* busy span per iteration (io/loop.h) */
    int64_t loop_iter_sum_ns;
    /* the shard's journal (storage/journal.h), when it has one */
    bool journal;
    uint64_t journal_rounds, journal_round_logs, journal_entries, journal_fallbacks;
    int64_t journal_used, journal_capacity;
    /* connections */
    uint64_t connections, accepted, closed, net_bytes_in, net_bytes_out, frames_too_large;
    /* owned state */
    st_admin_part_t *parts;
    int nparts, capparts;
    st_admin_group_t *groups;
    int ngroups, capgroups;
    st_admin_goffset_t *goffsets;
    int ngoffsets, capgoffsets;
    bool groups_oom;
    /* the shard's transaction coordinator (txn/coord.h), when it has one */
    bool txn;
    st_tcoord_stats_t txn_stats;
    st_arena_t arena; /* names */
} st_admin_snap_t;

/* An empty snapshot with one reference (tests build them by hand). */
st_admin_snap_t *st_admin_snap_new(int shard);
void st_admin_snap_unref(st_admin_snap_t *s);
/* Adds a partition row, copying the topic name; NULL when out of memory. Grows parts. */
st_admin_part_t *st_admin_snap_add_part(st_admin_snap_t *s, const char *topic);

/*
 * The group section, filled by collectors on the shard thread (see admin.h). Names are
 * copied. Returns 0 or -ENOMEM.
 */
typedef struct st_admin_snap st_admin_groups_t;
int st_admin_groups_add(st_admin_groups_t *g, const char *group, const char *state,
                        int32_t members);
int st_admin_groups_add_offset(st_admin_groups_t *g, const char *group, const char *topic,
                               int32_t partition, int64_t committed);

/* A per-shard publication slot. cur and readers are shared; the rest belongs to the shard. */
typedef struct st_admin_slot {
    _Atomic(st_admin_snap_t *) cur;
    _Atomic int readers;
    /* shard thread only */
    st_admin_snap_t *retired;
    int64_t last_ns; /* when the last snapshot was taken (0: never) */
} st_admin_slot_t;

/* Shard thread: publishes snap (taking over its reference) and frees what it can. */
void st_admin_slot_publish(st_admin_slot_t *slot, st_admin_snap_t *snap);
/* Any thread: the current snapshot with a reference (st_admin_snap_unref it), or NULL. */
st_admin_snap_t *st_admin_slot_acquire(st_admin_slot_t *slot);
/* When neither the shard nor any reader uses the slot any more: drops everything. */
void st_admin_slot_fini(st_admin_slot_t *slot);

#endif
