/*
 * admin.h — the admin HTTP API: Prometheus metrics, readiness, cluster/topic/partition status.
 *
 *   GET /metrics           Prometheus text exposition 0.0.4 (names: docs/operations.md)
 *   GET /v1/status/ready   200 {"ready":true} once every shard has opened (and recovered) its
 *                          partitions and serves the Kafka port; 503 before and while stopping
 *   GET /v1/cluster        JSON: cluster id, node, brokers, counts
 *   GET /v1/topics         JSON: topics with partition counts, sizes, configs
 *   GET /v1/partitions     JSON: leader, shard, offsets, size, segments, counters
 *                          (?topic=NAME for one topic)
 *   GET /v1/debug/log, /v1/debug/config, /v1/debug/data-dir, /v1/debug/process
 *                          the broker's recent log, settings (secrets hidden), data directory
 *                          listing and process figures, for a debug bundle (debug.h)
 *   GET /v1/groups         JSON: consumer groups, committed offsets and lag per partition
 *   GET /ui                the web console; its writes and record reads: console.h
 *   POST /v1/debug/fail-sync?count=N&errno=EIO|ENOSPC|<n>
 *                          test builds only (ST_DEBUG_BUILD): the next N storage syncs on any
 *                          shard complete with that error; GET tells how many are left
 *   POST /v1/debug/sync-delay?ms=N
 *                          test builds only: every sync completes N ms late (0: off)
 *
 * How it reads the broker without touching a shard (snap.h): the broker calls our tick hook
 * on each shard's thread; there the shard copies what it owns into a snapshot and publishes
 * it. The HTTP thread (libmicrohttpd's one internal thread) renders from the latest snapshots
 * plus the counters that are already atomics. No request ever blocks a shard's loop.
 *
 * Group metrics plug in through collectors: a function run on each shard's thread while it
 * builds its snapshot, adding the groups that shard coordinates and their committed offsets
 * (st_admin_groups_add / st_admin_groups_add_offset, snap.h). Lag is computed at render time
 * against the owning shard's high watermark. See src/admin/README.md.
 *
 * Threads and order (main thread):
 *   st_admin_create (before st_broker_start: installs the hook)
 *   st_admin_add_group_collector* (before st_broker_start)
 *   st_admin_listen (any time; before st_broker_start to answer 503 during recovery)
 *   st_admin_set_started (after st_broker_start returns 0)
 *   st_admin_stop, then st_admin_destroy (after st_broker_join, before st_broker_destroy)
 */
#ifndef ST_ADMIN_ADMIN_H
#define ST_ADMIN_ADMIN_H

#include <stddef.h>

#include "admin/snap.h"
#include "broker/shard.h"

typedef struct st_admin st_admin_t;

/* Runs on shard s's thread while it builds its snapshot; reads only what s owns. */
typedef void (*st_admin_group_collect_fn)(void *arg, st_kshard_t *s, st_admin_groups_t *out);

int st_admin_create(st_admin_t **out, st_broker_t *b);
/* At most 4 collectors. 0, or -ENOSPC. */
int st_admin_add_group_collector(st_admin_t *a, st_admin_group_collect_fn fn, void *arg);
/* Binds host:port (port 0: any free port) and starts the HTTP thread. On failure writes one
 * line into err. */
int st_admin_listen(st_admin_t *a, const char *host, int port, char *err, size_t errlen);
/* The bound port, or -1. */
int st_admin_port(const st_admin_t *a);
/* Start-up finished: every shard serves. startup_seconds becomes the recovery-time metric. */
void st_admin_set_started(st_admin_t *a, double startup_seconds);
/* Stops the HTTP thread (idempotent). */
void st_admin_stop(st_admin_t *a);
void st_admin_destroy(st_admin_t *a);

#endif
