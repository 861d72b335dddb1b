/*
 * runtime.h — starting and stopping the shard runtime: identity, listeners, shard threads.
 *
 * The runtime's state is shard.h; a request's life request.h. The runtime knows no protocol:
 * the layer above (kafka/serve.h) hands it st_broker_hooks_t, through which each frame is
 * dispatched, each shard's services start and stop, waiting fetches are woken and a topic's
 * log settings are read.
 *
 * A shard's life: open its partitions (partition/) -> hooks->shard_start -> serve frames
 * (hooks->dispatch), tick every 100 ms (st_parts_tick, the admin hook) -> on stop: stop
 * accepting, hooks->shard_drain, let connections finish, close the logs, stop the loop ->
 * hooks->shard_fini.
 *
 * Threads: st_broker_* on the main thread (st_broker_stop from any thread); the hooks on the
 * threads named beside them.
 */
#ifndef ST_BROKER_RUNTIME_H
#define ST_BROKER_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "broker/request.h"
#include "broker/shard.h"
#include "partition/partition.h"
#include "cluster/config.h"
#include "cluster/metadata.h"
#include "storage/fs.h"
#include "storage/log.h"

typedef struct st_broker_hooks {
    /* A request whose api_key, api_version and correlation id are read (the frame holds at
     * least 8 bytes): decode its header and run its handler, or st_kreq_fail it. */
    void (*dispatch)(st_kreq_t *r);
    /* Any thread: the log settings of topic t. */
    void (*topic_log_config)(const st_config_t *cfg, const st_md_t *md, const st_md_topic_t *t,
                             st_log_config_t *out);
    /* On the shard, after its partitions are open: its services (group coordinator). */
    int (*shard_start)(st_kshard_t *s);
    /* On the shard, when shutdown begins: waiting requests answer now. */
    void (*shard_drain)(st_kshard_t *s);
    /* On the shard, once its loop has stopped. */
    void (*shard_fini)(st_kshard_t *s);
    /* On each shard, adopting a state (broker/adopt.h): its snapshot was just swapped; a
     * partition this broker no longer hosts, before it is deleted; a partition's role was just
     * set from the snapshot (leader: this broker leads it). NULL: nothing. */
    void (*md_adopted)(st_kshard_t *s, const st_md_t *old);
    void (*partition_gone)(st_kshard_t *s, st_part_t *p);
    void (*partition_role)(st_kshard_t *s, st_part_t *p, const st_md_t *md, const st_md_topic_t *t,
                           int32_t index, bool leader);
    /* Shard 0: adopt a state the metadata quorum published (owns md's reference). */
    void (*adopt_metadata)(st_kshard_t *s0, st_md_t *md);
    /* Shard 0: answer the ops the quorum finished. */
    void (*quorum_answers)(st_kshard_t *s0);
    /* The quorum thread of the active controller: create topic `name` with defaults. */
    void (*hint_create)(st_broker_t *b, const char *name);
    /* Main thread, in st_broker_destroy: frees what the controller's ops kept (b->ctl), or NULL. */
    void (*controller_fini)(st_broker_t *b);
    /* On each shard, every 100 ms after its partitions' housekeeping, or NULL. */
    void (*shard_tick)(st_kshard_t *s);
    /* Main thread: start the replication (follower fetcher) after the shards, and
     * stop it after the quorum stopped, before the shards stop. NULL: none. */
    int (*replication_start)(st_broker_t *b, char *err, size_t errlen);
    void (*replication_stop)(st_broker_t *b);
    /* On the owner shard: tells shard `waiter` that a partition it waits on moved. */
    void (*wake_fetches)(st_kshard_t *owner, int waiter, const uint8_t topic_id[16], int32_t index);
} st_broker_hooks_t;

/* Creates the broker: reads or creates meta.properties under log.dirs (cluster id), binds one
 * listening socket per shard, joins the metadata quorum (cluster/quorum.h; without
 * controller.quorum.voters this node is its only voter). The only voter waits (bounded) until
 * the quorum registered it, upgrades a strata-metadata.json an earlier release wrote
 * (cluster/legacy.h) and its shards start from the quorum's state; a cluster member's shards
 * start with no partition and adopt the states the quorum publishes. hooks must outlive the
 * broker. Returns 0, or an error with one line in err. */
int st_broker_create(st_broker_t **out, const st_config_t *cfg, int nshards,
                     const st_broker_hooks_t *hooks, char *err, size_t errlen);
/* Starts the shard threads and waits until every shard serves (or one failed). */
int st_broker_start(st_broker_t *b);
/* Starts the replication (hooks->replication_start). After st_broker_start. Returns 0 or an
 * error with one line. */
int st_broker_start_replication(st_broker_t *b, char *err, size_t errlen);
/* On shard s's thread: whether its loop was frozen (SIGSTOP, a stalled machine)
 * for more than a broker session since its last tick, so that it may have been fenced and
 * replaced without hearing it yet (never on the quorum's only voter: nobody could replace it).
 * Stays true until the snapshots show this broker fenced and then unfenced again
 * (st_kshard_unstall), or two sessions pass. */
bool st_kshard_stalled(st_kshard_t *s);
/* On a new snapshot, on the shard: ends a freeze's abstention once the snapshots have shown
 * this broker fenced and then unfenced again. */
void st_kshard_unstall(st_kshard_t *s);

/* Any thread: runs c->fn on shard `shard`'s thread before it next sleeps (calls posted to one
 * shard run in the order posted). Also during shutdown, so that fn can release what c holds. */
void st_broker_post(st_broker_t *b, int shard, st_ext_call_t *c);
/* Any thread: wakes every shard's loop that exists (a shutdown barrier moved). */
void st_broker_wake_all(st_broker_t *b);

/* Main thread: stops the metadata quorum (a leader hands over first; blocks up to two election
 * timeouts), then asks every shard to shut down cleanly. */
/* Loads every TLS listener's certificate files again now (SIGHUP); new connections use them. */
void st_broker_reload_tls(st_broker_t *b);
void st_broker_stop(st_broker_t *b);
/* Waits for the shard threads to exit. */
void st_broker_join(st_broker_t *b);
void st_broker_destroy(st_broker_t *b);

#endif
