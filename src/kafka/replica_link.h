/*
 * replica_link.h — the follower fetchers (replica/fetcher.h) tied to the shards: one per shard
 * (each fetches what its shard follows, over its own connection to each leader); starts and
 * stops them with the broker, tells each which partitions its shard follows and from whom, and
 * runs what it asks of a partition (append the leader's batches, truncate, take the leader's
 * high watermark) on the partition's owner shard, answering with the durable position.
 *
 *   fetcher thread --hook--> st_broker_post(owner shard) --> st_part_append_replica /
 *       st_part_truncate / st_part_set_leader_hw --durable--> st_fetcher_position
 *
 * A job is dropped (answered with an error position) when the partition is gone or no longer
 * follows at the job's leader epoch: the metadata moved on and the fetcher has been, or will
 * be, told.
 *
 * Lifetime: a shard's reference to its fetcher (b->fetchers[shard]) is dropped only once the
 * shard has run a release call posted after the fetcher stopped, and each job holds its own,
 * so a shard never reaches a freed fetcher. st_krepl_follow / _unfollow do nothing once the
 * quorum has stopped (no new follow after replication_stop).
 *
 * Threads: st_krepl_start / _stop on the main thread (the replication_start / _stop hooks);
 * st_krepl_follow / _unfollow on the partition's owner shard.
 */
#ifndef ST_KAFKA_REPLICA_LINK_H
#define ST_KAFKA_REPLICA_LINK_H

#include <stddef.h>

#include "broker/shard.h"
#include "cluster/metadata.h"
#include "partition/partition.h"

/* runtime.h's replication_start / replication_stop. */
int st_krepl_start(st_broker_t *b, char *err, size_t errlen);
void st_krepl_stop(st_broker_t *b);

/* After st_part_set_role on the owner shard: a follower with a leader follows it (from its
 * durable end and latest epoch); a leader, or a partition without a leader, does not. md is
 * the snapshot the role came from (the leader's address). */
void st_krepl_follow(st_kshard_t *s, st_part_t *p, const st_md_t *md);
/* The partition is deleted here (or leads now): stop fetching it. */
void st_krepl_unfollow(st_kshard_t *s, st_part_t *p);

#endif
