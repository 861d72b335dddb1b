/*
 * part_impl.h — a partition's fields, for partition/'s own files and its tests only. Every
 * other module holds an st_part_t as an opaque handle and calls partition.h's functions: a
 * field added here (a last stable offset, a transaction index) leaks nowhere.
 *
 * Threads: the owner shard's.
 */
#ifndef ST_PARTITION_PART_IMPL_H
#define ST_PARTITION_PART_IMPL_H

#include "partition/partition.h"

struct st_repl_wait;

/* Replication state (cluster mode: a role was set). */
typedef struct st_part_repl {
    bool on; /* false: a single broker's partition, which leads and is its whole ISR */
    st_part_role_t role;
    /* leader: each replica's durable log end as its last fetch said (-1: not heard from
     * since this leadership began), when it last caught up, and the log end it had to reach */
    int64_t pos[ST_PART_MAX_REPLICAS];
    int64_t caught_up_ms[ST_PART_MAX_REPLICAS];
    int64_t target[ST_PART_MAX_REPLICAS];
    int64_t start[ST_PART_MAX_REPLICAS]; /* leader: each replica's log start (-1: unknown) */
    int64_t epoch_start;     /* leader: where its leader epoch starts (KAFKA-7128's ISR rule) */
    int64_t leader_since_ms; /* leader: when this leadership began (monotonic; append.c) */
    int32_t isr_asked_pe;    /* leader: partition epoch an ISR change was asked at (-1: none) */
    /* leader: replicas an ISR change asked at partition epoch pending_pe would add (KIP-497's
     * maximal ISR): the high watermark waits for them as for members, since the controller
     * may already list them */
    int32_t pending_add[ST_PART_MAX_REPLICAS];
    int16_t npending;
    int32_t pending_pe;
    int64_t isr_asked_ms;
    int64_t leader_hw;             /* follower: the leader's high watermark from its last answer */
    int64_t leader_start;          /* follower: the leader's log start from its last answer (-1) */
    int64_t durable_start;         /* follower: the log start known durable (the one reported) */
    struct st_repl_wait *del_head; /* leader: DeleteRecords waiting for the low watermark */
    int64_t end_seen;              /* leader: the log end replica fetches were last woken for */
    struct st_repl_wait *acks_head, *acks_tail; /* leader: acks=all waiting for the ISR */
} st_part_repl_t;

struct st_part {
    uint8_t topic_id[16];
    int32_t index;
    char *topic;
    st_log_t *log;               /* NULL: offline (open_err) or deleted */
    st_parts_t *parts;           /* the owning table */
    int64_t hw;                  /* high watermark */
    uint64_t waiters[4];         /* bitmap of shards (up to 256) with fetches waiting */
    uint64_t lso_waiters[4];     /* the same for read_committed fetches (the LSO) */
    uint64_t replica_waiters[4]; /* the same for followers' fetches (log end, high watermark) */
    int64_t lso;                 /* the last stable offset as last computed (st_part_update_hw) */
    int pending_durable;         /* durability callbacks outstanding (they hold the partition) */
    bool dead;                   /* deleted: freed once pending_durable drops to 0 */
    int open_err;                /* offline (log NULL): why its log could not be opened */
    uint64_t records_in, bytes_in, records_out, bytes_out;
    st_pstate_t pstate; /* idempotent producers (rebuilt from the log at open) */
    /* markers written, by producer id bucket (verify.c: a produce verified with the
     * coordinator appends only if no marker of its producer came in between) */
    uint32_t marker_gen[ST_PART_VERIFY_BUCKETS];
    /* first batches of transactions waiting for the coordinator (verify.c, pid -1: free) */
    struct {
        int64_t pid;
        int16_t epoch;
        int32_t seq;
        int64_t since_ms;
    } verifying[ST_PART_VERIFYING];
    st_part_repl_t repl; /* replication (replica.c) */
    /* log cleaner (compacted topics) */
    bool cleaning;          /* in the shard's active set */
    bool clean_full_map;    /* the last clean ran out of key map: the next gets the whole share */
    size_t clean_map_bytes; /* key map of a clean that starts now */
    int64_t clean_retry_ms; /* a clean failed: not again before this (monotonic ms) */
    struct st_part *next;   /* hash chain */
};

#endif
