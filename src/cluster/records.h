/*
 * records.h — the metadata log's records, applying them to a metadata state, and the active
 * controller's decisions (placement, leader election, fencing) expressed as records.
 *
 * A log entry is one JSON object, padded with spaces to a multiple of 8 bytes (libraft's rule):
 *   {"v": 1, "records": [<record>, ...]}
 * Records (every field written by the active controller, so that applying is deterministic):
 *   {"type": "cluster", "id": "<cluster id>"}              once, by the first controller
 *   {"type": "broker", "id": 2, "host": "h", "port": 9192, "rack": null, "fenced": false,
 *    "incarnation": "<16 hex>"}                              a registration or its change
 *   {"type": "topic", "name": "t", "id": "<32 hex>", "internal": false, "rf": 3,
 *    "configs": {"k": "v"}, "partitions": [{"r": [1, 2, 3], "isr": [1, 2, 3], "l": 1,
 *    "le": 0, "pe": 0}, ...]}                                a topic's whole new state
 *   {"type": "remove_topic", "id": "<32 hex>"}
 *   {"type": "acl", "resource_type": 2, "pattern_type": 3, "name": "t", "principal":
 *    "User:bob", "host": "*", "operation": 3, "permission": 3}   an ACL (auth/acl.h numbers)
 *   {"type": "remove_acl", ...the same fields}                 the removal of the ACL equal to it
 *   {"type": "scram", "user": "alice", "mech": 1, "iter": 4096, "salt": "<hex>",
 *    "stored_key": "<hex>", "server_key": "<hex>"}         a SCRAM credential, added or
 *                                                           replaced (KIP-554; mech 1 SHA-256,
 *                                                           2 SHA-512)
 *   {"type": "remove_scram", "user": "alice", "mech": 1}
 *   {"type": "quota", "user": "alice", "client": null, "key": "producer_byte_rate",
 *    "value": 1048576}                                     a client quota's value set (auth/
 *                                                           quota.h); "user"/"client" absent:
 *                                                           not part of the entity, null: the
 *                                                           default; "remove": true instead of
 *                                                           "value" removes the key
 *   {"type": "broker_config", "broker": 2, "key": "log.retention.ms", "value": "3600000"}
 *                                                           a dynamic broker setting (Kafka's
 *                                                           BROKER resource) set, "broker": -1
 *                                                           the cluster default (resource
 *                                                           ""), "value" absent: removed
 * A topic record replaces the topic with its id (or adds it when its name is free; a record
 * for a name another topic holds is ignored). A broker's epoch is the index of the entry that
 * registered its current incarnation.
 *
 * The snapshot of the state machine is the same encoding of the whole state:
 *   {"v": 1, "cluster": "<id>", "brokers": [<broker record>...], "topics": [<topic record>...],
 *    "acls": [<acl record>...], "scram": [<scram record>...],
 *    "quotas": [<quota record>...], "broker_configs": [<broker_config record>...]}
 *
 * Threads: any (pure functions of their arguments).
 */
#ifndef ST_CLUSTER_RECORDS_H
#define ST_CLUSTER_RECORDS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/metadata.h"

#define ST_REC_VERSION 1

/* Applies one log entry at log index `index` to md. Malformed records are skipped (and
 * logged): an entry never fails, so every node reaches the same state. */
void st_rec_apply(st_md_t *md, const void *buf, size_t len, int64_t index);

/* Encodes records as a padded entry (malloc'd with raft's allocator when raft_alloc is set,
 * else malloc); *len is a multiple of 8. NULL on out of memory. */
void *st_rec_entry(json_t *records, size_t *len, void *(*alloc)(size_t));

json_t *st_rec_topic(const st_md_topic_t *t);
json_t *st_rec_broker(const st_md_broker_t *b);
json_t *st_rec_remove_topic(const uint8_t id[16]);
json_t *st_rec_cluster(const char *cluster_id);
/* An "acl" record, or with remove its "remove_acl". */
json_t *st_rec_acl(const st_acl_t *a, bool remove);
json_t *st_rec_scram(const st_md_scram_t *c);
json_t *st_rec_remove_scram(const char *user, int8_t mechanism);
/* A "quota" record: key's value on e set, or with remove removed. */
json_t *st_rec_quota(const st_quota_entity_t *e, int key, double value, bool remove);

/* A "broker_config" record: key on broker (ST_MD_BROKER_DEFAULT: all) set to value, or with
 * value NULL removed. */
json_t *st_rec_broker_config(int32_t broker, const char *key, const char *value);

/* The whole state, for a snapshot (malloc'd with alloc; *len bytes). */
void *st_rec_snapshot(const st_md_t *md, size_t *len, void *(*alloc)(size_t));
/* Replaces md's brokers, topics, ACLs, SCRAM credentials, quotas and cluster id with a snapshot's.
 */
int st_rec_restore(st_md_t *md, const void *buf, size_t len);

/* Brokers that may host replicas: registered and not fenced. */
int st_rec_live_brokers(const st_md_t *md);

/* Places n partitions with rf replicas over the live brokers, leaders and replicas spread
 * evenly (round robin from `start`), racks alternating when brokers have racks. Fills each
 * out[i]'s replicas, isr (= replicas), leader (the first replica) and epochs (0). Returns 0,
 * or ST_E_INVALID with a message when rf is above the live brokers. */
int st_rec_place(const st_md_t *md, int32_t n, int rf, uint32_t start, st_md_partition_t *out,
                 char *msg, size_t msglen);

/* Elects p's leader again under the current fencing: the current leader if it is live and in
 * the ISR, else the first live ISR member in replica order, else (unclean) the first live
 * replica, which becomes the whole ISR, else none (-1). Fenced brokers leave the ISR unless
 * they are its last member. Bumps leader_epoch when the leader changes and partition_epoch on
 * any change. Returns true when p changed. */
bool st_rec_elect(const st_md_t *md, st_md_partition_t *p, bool unclean);

/* Elects the preferred replica (the first) when it is live and in the ISR. */
bool st_rec_elect_preferred(const st_md_t *md, st_md_partition_t *p);

/* Preferred leader election for every broker whose share of partitions it should lead
 * (first replica) but does not exceeds pct percent: appends the changed topics' records.
 * Returns how many. */
int st_rec_rebalance(const st_md_t *md, int pct, json_t *records);

/* An ISR change a partition's leader asks for (Kafka's AlterPartition). */
typedef struct st_rec_alter {
    uint8_t topic_id[16];
    int32_t partition, leader, leader_epoch, partition_epoch;
    int16_t nisr;
    int32_t isr[ST_MD_MAX_REPLICAS];
} st_rec_alter_t;

/* Applies alter to t (a copy of its topic in md) if it still holds: the asker leads at that
 * leader epoch, the partition epoch is current, the new ISR is made of replicas, holds the
 * leader, and every member it adds is live. Bumps the partition epoch. Returns 0;
 * ST_E_INVALID when stale (another leader or partition epoch: nothing changed, the leader will
 * see the newer state); ST_E_AGAIN when current but not allowed: the ISR stays, the partition
 * epoch is bumped all the same (write t's record), so that the leader stops counting the
 * replicas it asked to add (its high watermark waits for them until then). */
int st_rec_alter_isr(const st_md_t *md, st_md_topic_t *t, const st_rec_alter_t *alter);

/*
 * Reassignments, as Kafka does them (KIP-455): st_rec_reassign starts moving p to `target`
 * (replacing any move in progress): replicas become target then the original replicas not in
 * it (`removing`), `adding` the target replicas that are new, the ISR and leader unchanged.
 * The new replicas fetch from the leader and join the ISR through AlterPartition;
 * st_rec_reassign_progress (run by st_rec_alter_isr) completes the move once every target
 * replica is in the ISR: replicas = target, ISR = ISR ∩ target, a leader outside it replaced
 * by an ISR member (new leader epoch). A move whose target cannot catch up stays pending
 * until cancelled (st_rec_reassign_cancel: back to the original replicas, refused when none of
 * them is in sync). Each bumps the partition epoch when it changes p. Returns: reassign 0 (p
 * changed), 1 (already so), ST_E_INVALID (bad target, or an ISR it would empty); progress
 * true when it completed a move; cancel 0, ST_E_NOT_FOUND (none in progress) or ST_E_INVALID.
 */
int st_rec_reassign(const st_md_t *md, st_md_partition_t *p, const int32_t *target, int n);
bool st_rec_reassign_progress(const st_md_t *md, st_md_partition_t *p);
int st_rec_reassign_cancel(const st_md_t *md, st_md_partition_t *p);

/* Appends to `records` a topic record for every topic with a partition st_rec_elect changes
 * (unclean per topic: st_rec_unclean_allowed)
 * (after a fencing, and after an unfencing: leaderless partitions elect again, an ISR whose last
 * member came back gets its leader back; other ISRs take it back through AlterPartition)
 * under md's fencing (md already reflects the broker changes). Returns how many. */
int st_rec_reelect_all(const st_md_t *md, bool unclean_default, json_t *records);
/* A broker's new registration, fencing or unfencing (b, put in a copy of state): its record,
 * then the leaderships that follow (st_rec_reelect_all). 0 or -ENOMEM. */
int st_rec_broker_change(const st_md_t *state, const st_md_broker_t *b, bool unclean_default,
                         json_t *records);

/* Whether t's partitions may elect an out-of-sync replica: the topic's
 * unclean.leader.election.enable when it sets one, else the broker default. */
bool st_rec_unclean_allowed(const st_md_topic_t *t, bool broker_default);

#endif
