/*
 * broker.h — the Kafka broker: shards, their connections, and request dispatch.
 *
 * One st_broker_t per process holds what every shard reads (configuration, the cross-shard
 * mesh, the listening sockets). One st_kshard_t per shard thread holds what that shard owns:
 * its loop, its connections, its partitions, its view of the metadata snapshot.
 *
 * A request's life:  frame arrives (net/) -> st_kreq_t created with an arena -> header decoded
 * -> handler by api_key -> handler answers, now or later, with st_kreq_finish() -> response
 * encoded (size, header, body) -> connection sends it in request order -> arena freed.
 *
 * Threads: st_broker_* on the main thread; everything taking an st_kshard_t or st_kreq_t on
 * that shard's thread.
 */
#ifndef ST_KAFKA_BROKER_H
#define ST_KAFKA_BROKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/arena.h"
#include "cluster/config.h"
#include "cluster/metadata.h"
#include "io/loop.h"
#include "io/mesh.h"
#include "net/conn.h"
#include "net/out.h"
#include "partition/partition.h"
#include "storage/env.h"
#include "kafka/xcall.h"
#include "proto/kafka_gen.h"
#include "proto/kheader.h"
#include "proto/kerr.h"
#include "proto/kwriter.h"

typedef struct st_broker st_broker_t;
typedef struct st_kshard st_kshard_t;
typedef struct st_kreq st_kreq_t;

/* Latency histogram buckets shared by request and fsync latencies: upper bounds in ns
 * (st_kstats_bounds_ns), then one overflow bucket (+Inf). Buckets are not cumulative. */
#define ST_KSTATS_BUCKETS 17
#define ST_KSTATS_NAPIS   64  /* api keys with errors broken down by code */
#define ST_KSTATS_NCODES  132 /* Kafka error codes -1..130, at code + 1 */
extern const int64_t st_kstats_bounds_ns[ST_KSTATS_BUCKETS];
/* The bucket of a latency: 0..ST_KSTATS_BUCKETS (the last is +Inf). */
int st_kstats_bucket(int64_t ns);

/* Per-shard counters, written by the shard, read by the admin thread without locks. */
typedef struct st_kshard_stats {
    _Atomic uint64_t requests[128];
    _Atomic uint64_t request_errors[128];
    _Atomic uint64_t request_ns[128];
    _Atomic uint64_t request_latency[128][ST_KSTATS_BUCKETS + 1];
    _Atomic uint64_t request_error_codes[ST_KSTATS_NAPIS][ST_KSTATS_NCODES];
    _Atomic uint64_t fsyncs, fsync_errors, fsync_ns; /* completed fdatasyncs */
    _Atomic uint64_t fsync_latency[ST_KSTATS_BUCKETS + 1];
    _Atomic uint64_t appends, append_bytes; /* successful log appends (one per partition) */
} st_kshard_stats_t;

/* Called on every shard's thread once before it serves and then from its housekeeping tick
 * (every 100 ms): the admin module publishes the shard's metrics snapshot from here. */
typedef void (*st_kshard_hook_fn)(void *arg, st_kshard_t *s);

struct st_kshard {
    st_broker_t *b;
    int id;
    pthread_t thread;
    st_loop_t *loop;
    st_net_t *net;
    st_md_t *md; /* this shard's current snapshot */
    st_storage_env_t env;
    st_parts_t parts;
    int syncs_in_flight;
    struct st_fetch *waits; /* fetches waiting for data, on this shard */
    st_timer_t tick_timer;  /* storage housekeeping */
    st_timer_t shutdown_timer;
    struct st_gcoord *groups; /* the group coordinator of this shard (h_group.c) */
    int shutdown_state;       /* 0 running, 1 draining, 2 closing logs, 3 done */
    st_kshard_stats_t stats;
};

struct st_broker {
    const st_config_t *cfg;
    int nshards;
    st_mesh_t *mesh;
    st_kshard_t **shards;
    int *listen_fds;
    int listen_port;                  /* actual port (when configured as 0) */
    int fds_per_shard;                /* descriptor cache of each shard's storage env */
    _Atomic int64_t next_producer_id; /* InitProducerId (h_init_producer_id.c) */
    char cluster_id[64];
    st_md_t *ctl_md; /* the controller's authoritative snapshot (shard 0 only after start) */
    _Atomic int stopping;
    _Atomic int drained; /* shards with no connection left (shutdown barrier 1) */
    _Atomic int closed;  /* shards whose logs are closed (shutdown barrier 2) */
    _Atomic int started;
    _Atomic int failed;
    st_kshard_hook_fn tick_hook; /* set before st_broker_start, or NULL */
    void *tick_hook_arg;
};

struct st_kreq {
    st_kshard_t *shard;
    st_conn_t *conn;
    uint64_t seq;
    uint8_t *frame;
    size_t frame_len;
    st_arena_t arena;
    st_kp_req_header_t hdr;
    int16_t api_key;
    int16_t api_version;
    st_kreader_t body; /* the bytes after the header */
    int64_t start_ns;
    int16_t error_code; /* top-level error, for metrics */
};

/* Creates the broker: reads or creates meta.properties under log.dirs (cluster id), binds
 * one listening socket per shard. Returns 0, or an error with one line in err. */
int st_broker_create(st_broker_t **out, const st_config_t *cfg, int nshards, char *err,
                     size_t errlen);
/* Starts the shard threads and waits until every shard serves (or one failed). */
int st_broker_start(st_broker_t *b);
/* Any thread (signal handling): asks every shard to shut down cleanly. */
void st_broker_stop(st_broker_t *b);
/* Waits for the shard threads to exit. */
void st_broker_join(st_broker_t *b);
void st_broker_destroy(st_broker_t *b);

/* Encodes the response header and body, hands the frame to the connection, frees the
 * request. `enc` is a generated encoder; resp its matching response struct. */
#define ST_KREQ_RESPOND(req, api, resp)                                                            \
    do {                                                                                           \
        st_kwriter_t w_;                                                                           \
        st_out_t *o_ = st_kreq_begin((req), &w_);                                                  \
        int rc_ = o_ ? st_kp_##api##_resp_encode(&w_, (req)->api_version, (resp)) : -12;           \
        st_kreq_finish((req), o_, rc_);                                                            \
    } while (0)

st_out_t *st_kreq_begin(st_kreq_t *r, st_kwriter_t *w);
void st_kreq_finish(st_kreq_t *r, st_out_t *o, int rc);
/* Finishes a request that gets no response (Produce with acks=0). */
void st_kreq_finish_silent(st_kreq_t *r);
/* Closes the connection and frees the request (unknown api, malformed request). */
void st_kreq_fail(st_kreq_t *r, const char *why);

/* Handler signature and the table. */
typedef void (*st_khandler_fn)(st_kreq_t *r);
typedef struct st_khandler {
    int16_t api_key;
    int16_t min_version, max_version;
    st_khandler_fn fn;
} st_khandler_t;
extern const st_khandler_t st_khandlers[];
extern const int st_nkhandlers;
const st_khandler_t *st_khandler_find(int16_t api_key);

/* Handlers (one file each, or one per family). */
void st_kh_api_versions(st_kreq_t *r);
void st_kh_metadata(st_kreq_t *r);
void st_kh_produce(st_kreq_t *r);
void st_kh_fetch(st_kreq_t *r);
void st_kh_list_offsets(st_kreq_t *r);
void st_kh_create_topics(st_kreq_t *r);
void st_kh_delete_topics(st_kreq_t *r);
void st_kh_create_partitions(st_kreq_t *r);
void st_kh_describe_configs(st_kreq_t *r);
void st_kh_alter_configs(st_kreq_t *r);
void st_kh_incremental_alter_configs(st_kreq_t *r);
void st_kh_describe_cluster(st_kreq_t *r);
void st_kh_delete_records(st_kreq_t *r);
void st_kh_offset_for_leader_epoch(st_kreq_t *r);
void st_kh_init_producer_id(st_kreq_t *r);
void st_kh_find_coordinator(st_kreq_t *r);
void st_kh_join_group(st_kreq_t *r);
void st_kh_sync_group(st_kreq_t *r);
void st_kh_heartbeat(st_kreq_t *r);
void st_kh_leave_group(st_kreq_t *r);
void st_kh_offset_commit(st_kreq_t *r);
void st_kh_offset_fetch(st_kreq_t *r);
void st_kh_describe_groups(st_kreq_t *r);
void st_kh_list_groups(st_kreq_t *r);
void st_kh_delete_groups(st_kreq_t *r);
void st_kh_offset_delete(st_kreq_t *r);

/* The shard's group coordinator (h_group.c): created and loaded at shard start, after the
 * partitions are open; drained when shutdown begins; freed once the loop has stopped. */
int st_kgroup_start(st_kshard_t *s);
void st_kgroup_drain(st_kshard_t *s);
void st_kgroup_fini(st_kshard_t *s);

/* The shard of the calling thread (NULL off the shard threads). */
st_kshard_t *st_kshard_current(void);

/* The shard owning a partition, or -1. */
static inline int st_kshard_owner(const st_md_topic_t *t, int32_t partition)
{
    if (!t || partition < 0 || partition >= t->npartitions)
        return -1;
    return t->partitions[partition].shard;
}

/* Counts one successful log append of `bytes` bytes (Produce), for metrics. */
static inline void st_kstats_appended(st_kshard_t *s, uint64_t bytes)
{
    atomic_fetch_add_explicit(&s->stats.appends, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stats.append_bytes, bytes, memory_order_relaxed);
}

#endif
