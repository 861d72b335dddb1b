/*
 * leader.h — may this broker serve a partition? The one check that Produce, Fetch, ListOffsets,
 * OffsetForLeaderEpoch, DeleteRecords and the group coordinators make against a shard's
 * metadata snapshot (leader.c), and the KIP-951 hints that send a client to the right leader.
 *
 * A single broker is its quorum's only voter and the only replica of every partition: the same
 * checks, which it passes once it is registered. st_kleader_check answers, in the order Kafka's
 * Partition checks:
 *
 *   unknown topic or partition               0 (the handler's own unknown-topic answer)
 *   this broker is not a replica             NOT_LEADER_OR_FOLLOWER
 *   current_leader_epoch >= 0, older         FENCED_LEADER_EPOCH
 *   current_leader_epoch newer               UNKNOWN_LEADER_EPOCH
 *   another broker leads, or none does       NOT_LEADER_OR_FOLLOWER
 *   this broker leads, not on a shard yet    NOT_LEADER_OR_FOLLOWER (retriable: the snapshot
 *                                            that opens it is being applied)
 *
 * Shards swap snapshots one after another, so the owner shard checks again with its own
 * (st_kleader_local) before it touches the partition.
 *
 * A follower's fetch (Fetch with a replica id >= 0) passes the same check, and then the
 * replica must be one of the partition's other replicas: in the request shard's snapshot
 * (st_kleader_follower) and in the role the owner's partition holds (st_kleader_follower_local).
 * Anything else (an unknown id, this broker's own) is NOT_LEADER_OR_FOLLOWER.
 *
 * Threads: any shard, with that shard's snapshot (s->md).
 */
#ifndef ST_KAFKA_LEADER_H
#define ST_KAFKA_LEADER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "broker/shard.h"
#include "cluster/metadata.h"

/* 0 when this broker may serve partition `partition` of t (NULL: unknown topic) as its leader,
 * else the Kafka error (table above). current_epoch: the request's current_leader_epoch, -1
 * when it has none. */
int16_t st_kleader_check(const st_kshard_t *s, const st_md_topic_t *t, int32_t partition,
                         int32_t current_epoch);

/* On the owner shard: 0 when partition p (what st_parts_get found, NULL for nothing) may be
 * served here, else the error: UNKNOWN_TOPIC_OR_PARTITION for a missing partition on a single
 * broker; NOT_LEADER_OR_FOLLOWER in a cluster, for a partition missing or no longer led by
 * this broker in this shard's snapshot. Does not look at p->log. */
int16_t st_kleader_local(const st_kshard_t *s, const st_part_t *p);

/* On the request's shard, after st_kleader_check passed: 0 when broker `replica` is another
 * replica of partition `partition` of t (NULL: unknown; the handler answers for that), else
 * NOT_LEADER_OR_FOLLOWER. */
int16_t st_kleader_follower(const st_kshard_t *s, const st_md_topic_t *t, int32_t partition,
                            int32_t replica);

/* On the owner shard, after st_kleader_local passed: 0 when partition p leads in its role
 * (partition.h, replication) and broker `replica` is another of its replicas, else
 * NOT_LEADER_OR_FOLLOWER. */
int16_t st_kleader_follower_local(const st_part_t *p, int32_t replica);

/* KIP-951: the partition's leader and leader epoch in s's snapshot, for an answer in a cluster
 * that sends the client elsewhere (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH). False, with
 * *leader_id and *leader_epoch untouched, on a single broker, for another error, or when the
 * partition has no leader. */
bool st_kleader_current(const st_kshard_t *s, const uint8_t topic_id[16], int32_t partition,
                        int16_t error, int32_t *leader_id, int32_t *leader_epoch);

/* KIP-951's node_endpoints: the live brokers among ids[0..n) (each once, in the snapshot's
 * order) into *out, allocated from a. Returns how many, or -1 when out of memory. */
int st_kleader_brokers(st_arena_t *a, const st_md_t *md, const int32_t *ids, int n,
                       const st_md_broker_t ***out);

#endif
