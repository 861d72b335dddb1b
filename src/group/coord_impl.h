/*
 * coord_impl.h — the group coordinator's state, shared by the files of group/ that implement
 * it. Internal: nothing outside group/ includes it. Same thread rules as coord.h: everything on
 * the coordinator's shard.
 *
 *   coord.c      the coordinator's life cycle, the table of groups, DescribeGroups, ListGroups
 *   rebalance.c  members and the state machine (diagram in coord.h): prepare, complete, remove
 *   membership.c JoinGroup (dynamic and static members), SyncGroup, Heartbeat, LeaveGroup
 *   offsets.c    a group's offsets: OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups, expiry
 *   txn.c        pending transactional offsets: TxnOffsetCommit, transaction markers
 *   persist.c    writes to a __consumer_offsets partition, the records written, loading
 *
 * Memory: groups, members and offsets are heap objects owned by the coordinator. A group is
 * freed only when no write referring to it is in flight (g->writes empty). Answers are built in
 * the caller's arena, never pointing at coordinator memory, since they are encoded later on
 * another shard.
 *
 * Strings: every protocol string kept here (group, member, instance and client ids, client
 * hosts, protocol types and names, topics, committed metadata) is an st_gstr_t — bytes and a
 * length, as on the wire and in __consumer_offsets — never a C string: a NUL inside one is
 * data like any other byte, and survives a commit, a fetch, a clean of the log and a reload.
 */
#ifndef ST_GROUP_COORD_IMPL_H
#define ST_GROUP_COORD_IMPL_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "group/assign.h"
#include "group/coord.h"
#include "group/records.h"
#include "proto/kerr.h"

enum { G_EMPTY, G_PREPARING, G_COMPLETING, G_STABLE, G_DEAD };
/* A group id is one type or the other (Kafka's GroupType). */
enum { G_TYPE_CLASSIC, G_TYPE_CONSUMER };
typedef struct st_ggroup st_ggroup_t;
typedef struct st_gwrite st_gwrite_t;

/* A protocol string owned by the coordinator: heap bytes and their length (a NUL is kept
 * after them, never relied on). ptr NULL is the null string; an empty one has a ptr. */
typedef struct st_gstr {
    char *ptr;
    int32_t len;
} st_gstr_t;

#define ST_GSTR_NULL ((st_gstr_t){NULL, -1})
/* printf arguments for "%.*s" of a non-null st_gstr_t (logs only; they stop at a NUL). */
#define ST_GSTR_ARG(s) (int)(s).len, (s).ptr

typedef struct st_gproto {
    st_gstr_t name;
    uint8_t *meta;
    int32_t meta_len;
} st_gproto_t;

typedef struct st_gmember {
    st_ggroup_t *g;
    st_gstr_t member_id;
    st_gstr_t instance_id; /* null: dynamic */
    st_gstr_t client_id;
    st_gstr_t client_host;
    int32_t session_timeout, rebalance_timeout;
    int nprotos;
    st_gproto_t *protos;
    uint8_t *assignment;
    int32_t assignment_len;
    st_timer_t session_timer;
    /* a JoinGroup waiting for the generation to complete */
    bool join_wait;
    int16_t join_version;
    st_arena_t *join_a;
    st_kp_join_group_resp_t *join_resp;
    st_gcoord_done_fn join_done;
    void *join_arg;
    /* a SyncGroup waiting for the leader's assignment */
    bool sync_wait;
    st_kp_sync_group_resp_t *sync_resp;
    st_arena_t *sync_a;
    st_gcoord_done_fn sync_done;
    void *sync_arg;
} st_gmember_t;

typedef struct st_goff {
    st_gstr_t topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    st_gstr_t metadata;
    int64_t commit_ts;
    int64_t expire_ts;     /* its own expiry (OffsetCommit v2-v4's retention), -1: none */
    int64_t record_offset; /* of the record in __consumer_offsets that set it; -1 unknown */
    struct st_goff *next;
} st_goff_t;

/* A table of offsets by (topic, partition): a group's committed ones, or one transaction's
 * pending ones (offsets.c). */
typedef struct st_gofftab {
    st_goff_t **b;
    size_t n, nb; /* entries, buckets (a power of two) */
} st_gofftab_t;

/* A group's open transaction (txn.c): the offsets producer `pid` committed with
 * TxnOffsetCommit, durable but not visible as committed until a COMMIT marker of pid is
 * (dropped by an ABORT). Kept while open even when a tombstone emptied it, as Kafka keeps the
 * group's open transactions: such a group is not expired. */
typedef struct st_gtxn {
    st_ggroup_t *g;
    int64_t pid;
    st_gofftab_t offs;
    struct st_gtxn *next;  /* g->txns */
    struct st_gtxn *pnext; /* the coordinator's chain of this pid's hash (c->txns) */
} st_gtxn_t;

#define ST_GTXN_BUCKETS 256 /* the coordinator's table of open transactions by producer id */

typedef struct st_gpending {
    st_gstr_t member_id;
    int64_t deadline_ms; /* monotonic */
} st_gpending_t;

/* A member of a consumer group (KIP-848, consumer.c). */
typedef struct st_gcmember {
    st_ggroup_t *g;
    st_gstr_t member_id;
    st_gstr_t instance_id; /* null: dynamic */
    st_gstr_t rack_id;
    st_gstr_t client_id, client_host;
    st_gstr_t *topic_names; /* subscribed_topic_names */
    int ntopic_names;
    st_gstr_t regex;           /* subscribed_topic_regex, null: none */
    void *re;                  /* its compiled form (pcre2_code), NULL: none */
    st_gstr_t server_assignor; /* null: the group's default */
    int32_t rebalance_timeout;
    st_gcur_t cur;      /* current assignment: epoch, state, assigned, pending revocation */
    st_gtpset_t target; /* its part of the group's target assignment */
    st_timer_t session_timer;
    st_timer_t revoke_timer; /* UNREVOKED_PARTITIONS for longer than rebalance_timeout: fenced */
} st_gcmember_t;

/* A consumer group's own state (consumer.c); g->cg of a G_TYPE_CONSUMER group. */
typedef struct st_gcgroup {
    int32_t group_epoch;
    int32_t assignment_epoch; /* epoch of the target assignment */
    st_gcmember_t **members;
    int nmembers, cap;
    int64_t md_version; /* topics version the subscriptions were resolved at */
    uint64_t subs_hash; /* hash of (id, partitions) of every subscribed topic */
    st_gstr_t assignor; /* the assignor of the last target assignment */
} st_gcgroup_t;

struct st_ggroup {
    st_gcoord_t *c;
    st_gstr_t id;
    int32_t partition;
    int type;         /* G_TYPE_*; a consumer group keeps state G_EMPTY or G_STABLE here */
    st_gcgroup_t *cg; /* G_TYPE_CONSUMER: its members and epochs */
    int state;
    st_gstr_t protocol_type; /* null until a member joined (or loaded) */
    st_gstr_t protocol;      /* null: none selected */
    st_gstr_t leader;        /* null: no leader */
    int32_t generation;
    int64_t state_ts; /* wall clock of the last state change */
    st_gmember_t **members;
    int nmembers, cap;
    st_gpending_t *pending; /* member ids handed out with MEMBER_ID_REQUIRED */
    int npending;
    st_timer_t join_timer;
    bool initial_delay;           /* the join timer is the initial rebalance delay */
    bool joined_during_delay;     /* a member joined while it ran */
    int64_t initial_remaining_ms; /* rebalance timeout left after the delays so far */
    st_gofftab_t offs;            /* committed offsets */
    st_gtxn_t *txns;              /* open transactions with pending offsets (txn.c) */
    bool stored;                  /* the group's latest metadata record in the log is a value */
    bool unloaded;                /* its partition was unloaded: out of the table, in c->unloaded
                                     until its writes complete (then freed) */
    st_gwrite_t *writes;          /* in flight, referring to this group, in log order */
    struct st_ggroup *next;
};

struct st_gcoord {
    st_loop_t *loop;
    st_gcoord_config_t cfg;
    st_log_t **logs;       /* by partition; NULL: not this shard's, or not loaded */
    int32_t *epochs;       /* by partition: the leader epoch it was loaded at (-1: not loaded) */
    st_ggroup_t *unloaded; /* groups of unloaded partitions with writes in flight (by next) */
    st_ggroup_t **buckets;
    size_t nbuckets, ngroups;
    bool closed;
    st_timer_t expire_timer;
    st_gtxn_t *txns[ST_GTXN_BUCKETS]; /* every group's open transactions, by producer id */
    st_gtopic_t *topics;              /* the broker's topics (consumer groups' subscriptions) */
    int ntopics;
    int64_t topics_version; /* of the snapshot they came from; -1: never read */
};

/* ---- writes to the partition log (persist.c) ---- */

typedef void (*st_gwrite_fn)(st_gcoord_t *c, st_gwrite_t *w, int res);

struct st_gwrite {
    st_gcoord_t *c;
    int32_t partition;
    st_ggroup_t *g; /* in g->writes while in flight */
    st_gwrite_t *gnext;
    st_gwrite_fn cb; /* may be NULL */
    int32_t generation;
    st_goffsets_t *o;
    int16_t *error;
    st_gcoord_done_fn done;
    void *done_arg;
    int64_t ts;   /* commit: the commit timestamp written */
    bool commits; /* o's parts (those without an error) are offset records being written */
    int64_t pid;  /* TxnOffsetCommit: the producer (-1: not transactional) */
    st_gcoord_appended_t app; /* where the append put the records */
    void *ctx;                /* the writer's own (a waiting ConsumerGroupHeartbeat) */
    int nassign;              /* sync: the leader's assignment */
    st_gstr_t *assign_ids;
    st_kbytes_t *assign;
};

/* ---- small helpers ---- */

/* Replaces *s by a copy of v (null stays null). -ENOMEM leaves *s null. */
static inline int gstr_set(st_gstr_t *s, st_kstr_t v)
{
    free(s->ptr);
    *s = ST_GSTR_NULL;
    if (v.len < 0)
        return 0;
    char *p = malloc((size_t)v.len + 1);
    if (!p)
        return -ENOMEM;
    if (v.len > 0)
        memcpy(p, v.ptr, (size_t)v.len);
    p[v.len] = 0;
    *s = (st_gstr_t){p, v.len};
    return 0;
}

static inline void gstr_free(st_gstr_t *s)
{
    free(s->ptr);
    *s = ST_GSTR_NULL;
}

/* A view of s (no copy). */
static inline st_kstr_t as_kstr(st_gstr_t s)
{
    return s.ptr ? (st_kstr_t){s.ptr, s.len} : ST_KSTR_NULL;
}

/* Whether s holds exactly g's bytes (both null counts as equal). */
static inline bool kstr_is(st_kstr_t s, st_gstr_t g)
{
    if (s.len < 0 || !g.ptr)
        return s.len < 0 && !g.ptr;
    return s.len == g.len && memcmp(s.ptr, g.ptr, (size_t)s.len) == 0;
}

static inline bool gstr_eq(st_gstr_t a, st_gstr_t b)
{
    return kstr_is(as_kstr(a), b);
}

/* A string for an answer, copied into the caller's arena (null stays null). */
static inline st_kstr_t answer_kstr(st_arena_t *a, st_kstr_t s)
{
    if (s.len < 0)
        return ST_KSTR_NULL;
    char *p = st_arena_strndup(a, s.len ? s.ptr : "", (size_t)s.len);
    return p ? (st_kstr_t){p, s.len} : ST_KSTR_EMPTY;
}

static inline st_kstr_t answer_str(st_arena_t *a, st_gstr_t s)
{
    return answer_kstr(a, as_kstr(s));
}

/* The same, an empty string for null. */
static inline st_kstr_t answer_str0(st_arena_t *a, st_gstr_t s)
{
    return s.ptr ? answer_str(a, s) : ST_KSTR_EMPTY;
}

static inline st_kbytes_t answer_bytes(st_arena_t *a, const uint8_t *b, int32_t n)
{
    if (!b || n <= 0)
        return (st_kbytes_t){(const uint8_t *)"", 0};
    uint8_t *p = st_arena_alloc(a, (size_t)n);
    if (!p)
        return (st_kbytes_t){(const uint8_t *)"", 0};
    memcpy(p, b, (size_t)n);
    return (st_kbytes_t){p, n};
}

/* The Kafka error a request gets when its write failed with res (Kafka's mapping for the group
 * coordinator's appends): the partition's leadership moved or it is offline, NOT_COORDINATOR
 * (the client finds the new coordinator); otherwise (fewer in-sync replicas than
 * min.insync.replicas, a storage error) COORDINATOR_NOT_AVAILABLE, which it retries. */
static inline int16_t write_kerr(int res)
{
    if (!res)
        return 0;
    return res == ST_E_NOT_LEADER || res == ST_E_CLOSED ? ST_KERR_NOT_COORDINATOR
                                                        : ST_KERR_COORDINATOR_NOT_AVAILABLE;
}

/* FNV-1a of n bytes at p, continuing from h (the hash of the tables of groups and offsets). */
static inline uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* ---- coord.c: the table of groups ---- */

st_ggroup_t *st_group_find(const st_gcoord_t *c, st_kstr_t id);
/* The live group a request names on one of c's loaded partitions: 0 and *g, else *g NULL and
 * NOT_COORDINATOR, INVALID_GROUP_ID (an empty or null id) or `missing` (no such group, or a
 * dead one) — the checks every request about an existing group starts with. */
int16_t st_group_lookup(const st_gcoord_t *c, int32_t partition, st_kstr_t id, int16_t missing,
                        st_ggroup_t **g);
/* A new Empty group in the table; NULL when out of memory. */
st_ggroup_t *st_group_create(st_gcoord_t *c, st_kstr_t id, int32_t partition);
/* Unlinks and frees a group; nothing may refer to it (no write, no waiting request). */
void st_group_free(st_gcoord_t *c, st_ggroup_t *g);
/* Takes every group of `partition` out of the table and out of service (st_gcoord_unload,
 * or a load that failed half way). */
void st_group_drop_partition(st_gcoord_t *c, int32_t partition);
/* Frees a member already taken out of its group's array (or never put in it). */
void st_group_member_free(st_gcoord_t *c, st_gmember_t *m);

/* ---- rebalance.c: members and the state machine ---- */

/* A member of g from a JoinGroup (or a loaded record), appended to g->members. */
st_gmember_t *st_group_member_new(st_ggroup_t *g, st_kstr_t id, const st_kp_join_group_req_t *req,
                                  int16_t version, st_kstr_t client_id, st_kstr_t client_host);
/* Restarts m's session timer (not once the coordinator is closed). */
void st_group_member_touch(st_gcoord_t *c, st_gmember_t *m);
st_gmember_t *st_group_member_find(const st_ggroup_t *g, st_kstr_t id);
st_gmember_t *st_group_member_find_static(const st_ggroup_t *g, st_kstr_t instance);
/* FENCED_INSTANCE_ID when instance names a static member whose id is not member_id. */
bool st_group_fenced(const st_ggroup_t *g, st_kstr_t member_id, st_kstr_t instance);
int st_group_member_set_protocols(st_gmember_t *m, const st_kp_join_group_req_t *req);
bool st_group_member_has_protocol(const st_gmember_t *m, st_kstr_t name);
/* The protocol every member supports that most members prefer (Kafka's selectProtocol);
 * null when the members share none. */
st_kstr_t st_group_select_protocol(const st_ggroup_t *g);
void st_group_set_state(st_ggroup_t *g, int state);
/* Answer m's waiting JoinGroup with error / its waiting SyncGroup with error (0: the
 * assignment); nothing when none waits (invariant 4). */
void st_group_answer_join(st_gmember_t *m, int16_t error);
void st_group_answer_sync(st_gmember_t *m, int16_t error);
/* Fills a JoinGroup answer with the current generation; the leader gets the members unless
 * skip (a static leader's rejoin with v9+: members listed, but the assignment stays). */
void st_group_fill_join(st_ggroup_t *g, st_gmember_t *m, int16_t version, st_arena_t *a,
                        st_kp_join_group_resp_t *r, bool members, bool skip);
/* Moves g to PreparingRebalance (Kafka's prepareRebalance). */
void st_group_prepare_rebalance(st_gcoord_t *c, st_ggroup_t *g);
/* Completes the join phase when every member has rejoined (or none is left). */
void st_group_try_complete_join(st_gcoord_t *c, st_ggroup_t *g);
/* Removes a member (leave, session timeout) and moves the group on (Kafka's
 * removeMemberAndUpdateGroup). */
void st_group_remove_member(st_gcoord_t *c, st_ggroup_t *g, st_gmember_t *m);
/* g->join_timer's callback: the initial delay or the rebalance timeout ran out. */
void st_group_join_timeout(st_timer_t *t);

/* ---- consumer.c: KIP-848 consumer groups ---- */

/* Frees g->cg (the group is freed or unloaded). */
void st_cgroup_free(st_gcoord_t *c, st_ggroup_t *g);
/* The consumer group state name of g (Empty, Assigning, Reconciling, Stable, Dead). */
const char *st_cgroup_state(const st_ggroup_t *g);
st_gcmember_t *st_cgroup_member_find(const st_ggroup_t *g, st_kstr_t id);
/* OffsetCommit / OffsetFetch of a consumer group's member: 0, or the error
 * (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; commits outside the group: only while empty). */
int16_t st_cgroup_check_member(st_gcoord_t *c, st_ggroup_t *g, st_kstr_t member_id, int32_t epoch,
                               bool commit);
/* Replays one consumer group record (key versions 3-8) while loading. */
void st_cgroup_load_record(st_gcoord_t *c, int32_t partition, int16_t key_version,
                           const uint8_t *key, int32_t key_len, const uint8_t *value,
                           int32_t value_len);
/* After a partition's load: sessions started, state derived. */
void st_cgroup_loaded(st_gcoord_t *c, st_ggroup_t *g);
/* Frees the coordinator's copy of the broker's topics (st_gcoord_destroy). */
void st_cgroup_topics_free(st_gcoord_t *c);
/* An empty consumer group becomes a classic one (Kafka's maybeDeleteEmptyConsumerGroup, when a
 * classic member joins): its consumer-group records get tombstones, its offsets stay. 0, or
 * -1 when it has members (it stays a consumer group). */
int st_cgroup_to_classic(st_gcoord_t *c, st_ggroup_t *g);
/* Shutdown: g's member timers stop. */
void st_cgroup_drain(st_gcoord_t *c, st_ggroup_t *g);
/* Tombstones for every consumer-group key of g (DeleteGroups). */
int st_cgroup_add_tombstones(st_gbatch_t *b, st_ggroup_t *g);

/* ---- offsets.c ---- */

int st_gofftab_init(st_gofftab_t *t);
/* Frees every entry and the buckets. */
void st_gofftab_fini(st_gofftab_t *t);
void st_gofftab_clear(st_gofftab_t *t);
st_goff_t *st_gofftab_find(const st_gofftab_t *t, st_kstr_t topic, int32_t partition);
/* Sets (creates) the offset of topic-partition from the record at record_offset, unless the
 * entry holds one from a later record (record offsets -1: unknown, always replaced);
 * -ENOMEM leaves the old one. */
int st_gofftab_set(st_gofftab_t *t, st_kstr_t topic, int32_t partition, int64_t offset,
                   int32_t epoch, st_kstr_t metadata, int64_t ts, int64_t record_offset);
/* Gives the offset st_gofftab_set just set its own expiry time (-1: none, which every set
 * leaves). */
void st_gofftab_expire(st_gofftab_t *t, st_kstr_t topic, int32_t partition, int64_t expire_ts);
/* Puts a copy of o (a pending offset becoming committed), the same rule. */
int st_gofftab_put(st_gofftab_t *t, const st_goff_t *o);
void st_gofftab_del(st_gofftab_t *t, st_kstr_t topic, int32_t partition);
/* A key of g is removed (a tombstone is durable, or was loaded): its committed offset and
 * the pending ones of every open transaction (Kafka's replay of an offset tombstone). */
void st_group_offset_del(st_ggroup_t *g, st_kstr_t topic, int32_t partition);
/* c->expire_timer's callback: expires offsets and rearms. */
void st_group_expire_tick(st_timer_t *t);

/* ---- txn.c: pending transactional offsets ---- */

/* g's open transaction of pid, created when `create` (NULL: none, or out of memory). */
st_gtxn_t *st_group_txn(st_ggroup_t *g, int64_t pid, bool create);
/* Frees g's open transactions (the group is freed or unloaded). */
void st_group_txns_free(st_ggroup_t *g);
/* Whether an open transaction of g holds a pending offset of topic-partition (Kafka's
 * hasPendingTransactionalOffsets). */
bool st_group_has_pending(const st_ggroup_t *g, st_kstr_t topic, int32_t partition);
/* The same, counting TxnOffsetCommit records still being written. */
bool st_group_pending_or_writing(const st_ggroup_t *g, st_kstr_t topic, int32_t partition);
/* Invariant 5's second half: g's transactions and the coordinator's table agree. */
bool st_group_txns_check(const st_ggroup_t *g);
/* A marker of pid in partition: applies (commit) or drops its pending offsets in every group
 * of the partition (st_gcoord_txn_marker; the loader for the control batches it meets). */
void st_group_txn_end(st_gcoord_t *c, int32_t partition, int64_t pid, bool commit);

/* ---- persist.c: records and writes ---- */

st_gwrite_t *st_group_write_new(st_gcoord_t *c, int32_t partition, st_ggroup_t *g, st_gwrite_fn cb);
void st_group_write_free(st_gwrite_t *w);
/* Appends the batches of b to the partition's log; w->cb runs once they are durable (or the
 * append failed), possibly before this returns. Takes w. */
void st_group_write(st_gcoord_t *c, st_gbatch_t *b, st_gwrite_t *w);
/* An offset record: the value of o, else of in (committed at in->commit_ts, or ts where that
 * is not set; expiring at in->expire_ts where set), else a tombstone. */
int st_group_add_offset_record(st_gbatch_t *b, st_kstr_t group, st_kstr_t topic, int32_t partition,
                               const st_goff_t *o, int64_t ts, const st_goffset_t *in);
/* A group metadata record: value, or a tombstone when value is NULL. */
int st_group_add_group_record(st_gbatch_t *b, st_kstr_t group, const uint8_t *value,
                              int32_t value_len);
/* Adds g's metadata record as it is now, with `assign` (if given) in place of the members'
 * assignments. */
int st_group_add_group_value(st_gbatch_t *b, st_ggroup_t *g, int nassign, const st_gstr_t *ids,
                             const st_kbytes_t *assign);
/* Writes g's metadata as it is now (Empty after a generation with no member, a static
 * member's new id). The answer does not wait for it. */
void st_group_persist(st_gcoord_t *c, st_ggroup_t *g);

#endif
