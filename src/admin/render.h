/*
 * render.h — the admin API's answers, built from a view: the shards' published snapshots,
 * their live atomic counters and the process figures. Nothing here touches a shard's own
 * structures, so the same code serves the HTTP thread and the unit tests (which build views
 * by hand).
 *
 *   /metrics          st_admin_render_metrics     Prometheus text 0.0.4 (prom.h)
 *   /v1/cluster       st_admin_render_cluster     JSON object
 *   /v1/topics        st_admin_render_topics      {"topics": [...]}
 *   /v1/partitions    st_admin_render_partitions  {"partitions": [...]}, optional topic filter
 *
 * Metric names and their meaning: docs/operations.md.
 *
 * Threads: any; a view must stay unchanged while it is rendered.
 */
#ifndef ST_ADMIN_RENDER_H
#define ST_ADMIN_RENDER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "admin/snap.h"
#include "base/buf.h"
#include "broker/stats.h"
#include "cluster/quorum.h"

/* What the admin thread reads live for one shard (atomics, not snapshotted). */
typedef struct st_admin_live {
    const st_kshard_stats_t *stats; /* NULL: report no request/storage counters */
    uint64_t mesh_sent, mesh_received, ring_occupancy;
} st_admin_live_t;

typedef struct st_admin_view {
    int nshards;
    st_admin_snap_t *const *snaps; /* [nshards], NULL where not yet published */
    const st_admin_live_t *live;   /* [nshards] */
    const char *version;
    const char *cluster_id;
    int32_t node_id;
    bool ready;
    int64_t now_ns;            /* monotonic, for snapshot ages */
    double start_time_seconds; /* unix time the process started */
    double uptime_seconds;
    double recovery_seconds;              /* < 0: start-up not finished */
    int64_t rss_bytes, open_fds, max_fds; /* < 0: unknown */
    bool clustered; /* a quorum of configured voters; qi says where it stands */
    st_quorum_info_t qi;
} st_admin_view_t;

/* Each appends its answer to out; 0, or -ENOMEM (out->oom). */
int st_admin_render_metrics(const st_admin_view_t *v, st_buf_t *out);
int st_admin_render_cluster(const st_admin_view_t *v, st_buf_t *out);
int st_admin_render_topics(const st_admin_view_t *v, st_buf_t *out);
/* topic: only that topic's partitions, or NULL for all. */
int st_admin_render_partitions(const st_admin_view_t *v, const char *topic, st_buf_t *out);

/* Appends j as compact JSON to out and drops j (NULL j: out of memory). 0, or -ENOMEM. Every
 * JSON answer of the admin API goes through it. */
int st_admin_json_append(json_t *j, st_buf_t *out);

/* The newest metadata snapshot among the view's shard snapshots, or NULL. */
const st_md_t *st_admin_view_md(const st_admin_view_t *v);

#endif
