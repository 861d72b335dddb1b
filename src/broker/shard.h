/*
 * shard.h — the shard runtime's state: one st_broker_t per process, one st_kshard_t per shard.
 *
 * st_broker_t holds what every shard reads (configuration, the cross-shard mesh, the listening
 * sockets, the shutdown barriers). st_kshard_t holds what one shard owns: its loop, its
 * connections, its partitions (partition/), its view of the metadata snapshot, its group
 * coordinator, its counters. Starting and stopping the shards is runtime.h's.
 *
 * Threads: a st_kshard_t's fields on that shard's thread only, except stats (read by the admin
 * thread) and what st_broker_t marks atomic.
 */
#ifndef ST_BROKER_SHARD_H
#define ST_BROKER_SHARD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>

#include "broker/stats.h"
#include "cluster/config.h"
#include "cluster/metadata.h"
#include "io/loop.h"
#include "io/mesh.h"
#include "net/conn.h"
#include "partition/partition.h"
#include "storage/env.h"
#include "storage/fs.h"

typedef struct st_broker st_broker_t;
typedef struct st_kshard st_kshard_t;
typedef struct st_adopt_q st_adopt_q_t; /* broker/adopt.c */

/* Called on every shard's thread once before it serves and then from its housekeeping tick
 * (every 100 ms): the admin module publishes the shard's metrics snapshot from here. */
typedef void (*st_kshard_hook_fn)(void *arg, st_kshard_t *s);

/* A call into a shard from a thread outside the shard mesh (the quorum, the replica fetcher):
 * st_broker_post queues it, the shard runs fn on its own thread before it next sleeps. The
 * poster owns the memory; fn may free it. */
typedef struct st_ext_call st_ext_call_t;
struct st_ext_call {
    void (*fn)(st_kshard_t *s, st_ext_call_t *c);
    st_ext_call_t *next;
};

struct st_kshard {
    st_broker_t *b;
    int id;
    /* calls from other threads (st_broker_post), FIFO */
    pthread_mutex_t ext_mu;
    st_ext_call_t *ext_head, *ext_tail;
    _Atomic int ext_ready;
    pthread_t thread;
    st_loop_t *loop;
    st_net_t *net;
    st_md_t *md;         /* this shard's current snapshot */
    st_adopt_q_t *adopt; /* the adoptions in progress and waiting (broker/adopt.h) */
    st_storage_env_t env;
    st_parts_t parts;
    int syncs_in_flight;   /* fdatasyncs and write-outs submitted, not completed (shutdown waits) */
    void *proto;           /* the protocol layer's own state (kafka/kshard.h): opaque here */
    st_timer_t tick_timer; /* storage housekeeping */
    st_timer_t shutdown_timer;
    int shutdown_state; /* 0 running, 1 draining, 2 closing logs, 3 done */
    /* cluster: a shard frozen past a broker session (SIGSTOP, a stalled machine) may have been
     * fenced meanwhile; it leads nothing until a newer snapshot shows it unfenced
     * (broker/runtime.c: st_kshard_stalled, st_kshard_unstall) */
    int64_t last_tick_ms;
    int64_t stall_version, stall_since;
    bool stall_seen_fenced;
    st_kshard_stats_t stats;
};

struct st_broker {
    const st_config_t *cfg;
    int nshards;
    st_mesh_t *mesh;
    st_kshard_t **shards;
    /* The Kafka listeners (cfg->kafka_listeners with their bound ports) and their sockets:
     * listen_fds[shard * nlisteners + listener], handed to each shard's net at its start. */
    st_listener_t *listeners;
    int nlisteners;
    int *listen_fds;
    struct st_tls_server **tls; /* per listener: its TLS context (net/tls.h), NULL: plain TCP */
    int listen_port;            /* the inter-broker listener's bound port (when configured as 0) */
    int fds_per_shard;          /* descriptor cache of each shard's storage env */
    char cluster_id[64];
    st_fs_t fs;        /* the file-system table of the broker's files and every shard's storage */
    int dir_lock_fd;   /* <log.dirs>/.lock, held (flock) for the process's life */
    st_md_t *start_md; /* the state the shards started from */
    /* the metadata quorum (this node alone without controller.quorum.voters) and the state it
     * last published (taken by shard 0) */
    struct st_quorum *quorum;
    /* the follower fetchers (replica/fetcher.h), one per shard, each fetching the partitions
     * its shard follows: cluster only; published whole by st_krepl_start */
    struct st_fetcher **fetchers;
    struct st_client *client; /* the inter-broker client (replica/client.h): markers */
    _Atomic(st_md_t *) quorum_md;
    _Atomic(struct json_t *) quorum_seed; /* an upgrade's records until the quorum takes them */
    _Atomic int quorum_stopped; /* st_broker_stop stopped it: no state will come any more */
    struct st_ctl *ctl;         /* the controller's ops on shard 0 (kafka/controller.h) */
    _Atomic int stopping;
    _Atomic int drained;  /* shards with no connection left (shutdown barrier 1) */
    _Atomic int closed;   /* shards whose logs are closed (shutdown barrier 2) */
    _Atomic int adopting; /* adoptions begun and not yet done on every shard (broker/adopt.h):
                           * no shard closes its logs under one */
    _Atomic int started;
    _Atomic int failed;
    const struct st_broker_hooks *hooks; /* the protocol layer's (runtime.h) */
    st_kshard_hook_fn tick_hook;         /* set before st_broker_start, or NULL */
    void *tick_hook_arg;
    /* connection counts and rates per IP, all shards' (connquota.h) */
    struct st_connquota *connquota;
};

/* The shard of the calling thread (NULL off the shard threads). */
st_kshard_t *st_kshard_current(void);
/* On a shard's thread, once at its start. */
void st_kshard_set_current(st_kshard_t *s);

/* The shard owning a partition, or -1. */
static inline int st_kshard_owner(const st_md_topic_t *t, int32_t partition)
{
    if (!t || partition < 0 || partition >= t->npartitions)
        return -1;
    return t->partitions[partition].shard;
}

#endif
