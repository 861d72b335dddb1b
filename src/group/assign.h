/*
 * assign.h — the pure parts of KIP-848's consumer groups: sets of topic-partitions, the
 * server-side assignors (`uniform`, `range`) that compute a group's target assignment, and the
 * reconciliation of one member's current assignment towards its target (Kafka's
 * CurrentAssignmentBuilder). No I/O, no clock, no coordinator: the coordinator (consumer.c)
 * calls them; tests/unit/group/test_assign.c drives them directly.
 *
 * Reconciliation, one member (states as Kafka's MemberState, numbers as its records):
 *
 *   STABLE (1) at epoch e, target epoch t > e --next()-->
 *       partitions of its assignment no longer in its target:
 *           still owned by the client  -> UNREVOKED_PARTITIONS (2): epoch stays e, those
 *                                         partitions pending revocation, nothing new given
 *       none left to revoke            -> epoch t; the target's partitions that no other member
 *                                         holds (assigned or pending revocation) are given;
 *                                         any still held elsewhere -> UNRELEASED_PARTITIONS (3)
 *                                         else STABLE
 *   UNREVOKED_PARTITIONS --heartbeat whose owned partitions hold none pending revocation-->
 *       next() as above (the revocation is acknowledged)
 *   UNRELEASED_PARTITIONS --any heartbeat--> next() (partitions released since are given)
 *
 * Invariant: a partition is in at most one member's (assigned ∪ pending revocation); a
 * partition is given to a member only when no other member has it in either set (`held`).
 *
 * Threads: any; pure functions over caller memory.
 */
#ifndef ST_GROUP_ASSIGN_H
#define ST_GROUP_ASSIGN_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/ktypes.h"

typedef struct st_gtp {
    st_kuuid_t topic;
    int32_t partition;
} st_gtp_t;

/* A set of topic-partitions, sorted by (topic id bytes, partition), no duplicates. */
typedef struct st_gtpset {
    st_gtp_t *v;
    int n, cap;
} st_gtpset_t;

int st_gtp_cmp(const st_gtp_t *a, const st_gtp_t *b);
void st_gtpset_free(st_gtpset_t *s);
void st_gtpset_clear(st_gtpset_t *s);
/* Adds tp (keeps the order; nothing when present). 0 or -ENOMEM. */
int st_gtpset_add(st_gtpset_t *s, st_kuuid_t topic, int32_t partition);
bool st_gtpset_has(const st_gtpset_t *s, st_kuuid_t topic, int32_t partition);
/* Bulk building: st_gtpset_push appends without keeping the order (0 or -ENOMEM), then
 * st_gtpset_normalize sorts and drops duplicates, in O(n log n) for n pushed. */
int st_gtpset_push(st_gtpset_t *s, st_kuuid_t topic, int32_t partition);
void st_gtpset_normalize(st_gtpset_t *s);
bool st_gtpset_eq(const st_gtpset_t *a, const st_gtpset_t *b);
/* *dst = a copy of src. 0 or -ENOMEM (dst left empty). */
int st_gtpset_copy(st_gtpset_t *dst, const st_gtpset_t *src);
/* Whether some element of a is in b. */
bool st_gtpset_intersects(const st_gtpset_t *a, const st_gtpset_t *b);
/* Moves src into dst (dst freed first); src left empty. */
void st_gtpset_move(st_gtpset_t *dst, st_gtpset_t *src);

/* A topic the broker has (ids as in the metadata, names for subscriptions by name/regex). */
typedef struct st_gtopic {
    st_kstr_t name;
    st_kuuid_t id;
    int32_t partitions;
} st_gtopic_t;

/* ---- assignors ---- */

typedef struct st_gassign_member {
    st_kstr_t member_id;
    const st_gtopic_t **topics; /* the subscribed topics the broker has (resolved) */
    int ntopics;
    const st_gtpset_t *current; /* its current target (stickiness); NULL: none */
    st_gtpset_t out;            /* the new target, filled by the assignor */
} st_gassign_member_t;

/* Kafka's UniformAssignor, in spirit: every partition of every subscribed topic to one
 * subscribed member, counts balanced (within one where subscriptions allow), partitions kept
 * where they were when balance permits. Members in any order; the result depends only on the
 * members' ids, subscriptions and current targets. 0 or -ENOMEM. */
int st_gassign_uniform(st_gassign_member_t *m, int n);
/* Kafka's RangeAssignor: per topic, its subscribed members sorted by member id, each given a
 * contiguous range (partitions / members, the first partitions % members one more), so
 * co-partitioned topics go to the same members. 0 or -ENOMEM. */
int st_gassign_range(st_gassign_member_t *m, int n);
/* By name ("uniform", "range"), NULL when unknown. */
typedef int (*st_gassign_fn)(st_gassign_member_t *m, int n);
st_gassign_fn st_gassign_by_name(st_kstr_t name);

/* ---- reconciliation ---- */

enum { ST_GMS_STABLE = 1, ST_GMS_UNREVOKED = 2, ST_GMS_UNRELEASED = 3 };

typedef struct st_gcur {
    int32_t epoch, prev_epoch;
    int8_t state; /* ST_GMS_* */
    st_gtpset_t assigned, revoking;
} st_gcur_t;

/* Whether a member other than the one reconciled holds tp (assigned or pending revocation). */
typedef bool (*st_gheld_fn)(void *ctx, const st_gtp_t *tp);

/* Moves cur one step towards target (the group's target assignment for the member, at
 * target_epoch) as the diagram above says. owned: the partitions the heartbeat says the client
 * owns, NULL when it did not say. Returns 1 when cur changed, 0 when not, -ENOMEM. */
int st_greconcile(st_gcur_t *cur, int32_t target_epoch, const st_gtpset_t *target,
                  const st_gtpset_t *owned, st_gheld_fn held, void *ctx);

#endif
