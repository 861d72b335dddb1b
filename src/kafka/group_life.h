/*
 * group_life.h — each shard's group coordinator (group/coord.h) through the shard's life:
 * created and loaded at shard start, after the partitions are open; drained when shutdown
 * begins; freed once the loop has stopped (group_route.c).
 *
 * Threads: each on the shard's own thread.
 */
#ifndef ST_KAFKA_GROUP_LIFE_H
#define ST_KAFKA_GROUP_LIFE_H

#include "broker/shard.h"

int st_kgroup_start(st_kshard_t *s);
void st_kgroup_drain(st_kshard_t *s);
void st_kgroup_fini(st_kshard_t *s);

#endif
