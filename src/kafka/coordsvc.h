/*
 * coordsvc.h — the coordinator services registry. Each internal topic whose partitions have a
 * coordinator registers one service: __consumer_offsets and the group coordinator today
 * (group_route.c); __transaction_state and __share_group_state are meant to register the same
 * way. Nothing else in the broker names an internal topic: the controller, the per-shard apply
 * of a snapshot, the shard's life and FindCoordinator all go through here.
 *
 * A service's life on each shard, and who drives each step:
 *
 *   st_coordsvc_register        main thread, before the shards start (kafka/serve.c)
 *   shard start                 svc->start(s): the shard's coordinator created; each partition
 *     (st_coordsvc_start)       this shard owns and this broker leads is loaded
 *   gains a partition           svc->load(s, partition, leader_epoch): from the local log,
 *     (st_coordsvc_leadership)  before any request for its keys is served; called again at a
 *                               new leader epoch (the log may have changed as a follower's)
 *   loses it                    svc->unload(s, partition): waiting requests answered
 *     (st_coordsvc_leadership)  NOT_COORDINATOR, its state dropped
 *   each tick (100 ms)          svc->tick(s), if set
 *     (st_coordsvc_tick)
 *   shutdown begins             svc->drain(s): waiting requests answered now
 *     (st_coordsvc_drain)
 *   the loop stopped            svc->fini(s)
 *     (st_coordsvc_fini)
 *
 * Leadership calls come from the shard that owns the partition, after it adopted the snapshot
 * that says so (kafka/controller.c, set_role and the sweep). A key (a group id, a
 * transactional id) maps to a partition with svc->route; its coordinator is that partition's
 * leader (st_coordsvc_coordinator). The topic is created internal, with svc->partitions(cfg)
 * partitions and svc->configs, however its creation is asked for (st_coordsvc_find lets the
 * controller recognise it; autocreate.h's st_coordsvc_ensure_topic creates it on first use).
 *
 * Threads: st_coordsvc_register on the main thread before any shard runs (the table is read
 * without a lock afterwards); the lookups from any thread; the shard-life calls on the shard's
 * own thread.
 */
#ifndef ST_KAFKA_COORDSVC_H
#define ST_KAFKA_COORDSVC_H

#include <stdbool.h>
#include <stdint.h>

#include "broker/shard.h"
#include "cluster/config.h"
#include "cluster/metadata.h"
#include "cluster/ops.h"
#include "proto/ktypes.h"

#define ST_COORDSVC_MAX 4

typedef struct st_coordsvc {
    const char *name;  /* for logs: "group" */
    const char *topic; /* its internal topic: "__consumer_offsets" */
    int8_t key_type;   /* FindCoordinator's key type: 0 group, 1 transaction, 2 share */
    /* the partitions and the replication factor the topic is created with (the controller
     * lowers the factor to the brokers alive) */
    int32_t (*partitions)(const st_config_t *cfg);
    int32_t (*replication_factor)(const st_config_t *cfg);
    const st_ctl_cfg_t *configs; /* the topic configs it is created with */
    int nconfigs;
    /* the topic's partition holding `key`, of n */
    int32_t (*route)(st_kstr_t key, int32_t n);
    /* shard life (see the diagram above); tick and drain may be NULL */
    int (*start)(st_kshard_t *s);
    void (*load)(st_kshard_t *s, int32_t partition, int32_t leader_epoch);
    void (*unload)(st_kshard_t *s, int32_t partition);
    void (*tick)(st_kshard_t *s);
    void (*drain)(st_kshard_t *s);
    void (*fini)(st_kshard_t *s);
} st_coordsvc_t;

/* Adds a service. 0, or ST_E_EXISTS (its topic or key type is taken), ST_E_FULL. */
int st_coordsvc_register(const st_coordsvc_t *svc);
/* Drops every service (tests). */
void st_coordsvc_clear(void);

/* The service whose internal topic is `name` (len bytes), or NULL. */
const st_coordsvc_t *st_coordsvc_find(const char *name, size_t len);
/* The service answering FindCoordinator's key_type, or NULL. */
const st_coordsvc_t *st_coordsvc_by_key_type(int8_t key_type);
/* svc's topic in a snapshot, or NULL. */
const st_md_topic_t *st_coordsvc_topic(const st_coordsvc_t *svc, const st_md_t *md);
/* The partition of svc's topic in md holding `key`, or -1 without the topic. */
int32_t st_coordsvc_partition(const st_coordsvc_t *svc, const st_md_t *md, st_kstr_t key);
/* The broker coordinating `key`: the leader of its partition in md; -1 when the topic does not
 * exist or the partition has no leader. */
int32_t st_coordsvc_coordinator(const st_coordsvc_t *svc, const st_md_t *md, st_kstr_t key);

/* Shard s set the role of partition `partition` of topic t from its snapshot: when t is a
 * service's topic, the service loads (leads) or unloads (!leads) it. Nothing otherwise. */
void st_coordsvc_leadership(st_kshard_t *s, const char *topic, int32_t partition, bool leads,
                            int32_t leader_epoch);

/* Every service through the shard's life, in registration order (fini in reverse). */
int st_coordsvc_start(st_kshard_t *s);
void st_coordsvc_tick(st_kshard_t *s);
void st_coordsvc_drain(st_kshard_t *s);
void st_coordsvc_fini(st_kshard_t *s);

/* Fills creation item `it` for svc's topic: internal, the service's partition count,
 * replication factor and configs (read only). */
void st_coordsvc_topic_item(const st_coordsvc_t *svc, const st_config_t *cfg, st_ctl_item_t *it);

#endif
