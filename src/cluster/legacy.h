/*
 * legacy.h — the upgrade of a data directory a single broker of an earlier release wrote: its
 * metadata lived in <log.dirs>/strata-metadata.json instead of the metadata log.
 *
 * The file (read whole, at most 256 MiB):
 *   {"version": N, "topics": [{"name": "t", "id": "<32 hex>", "internal": false,
 *     "replication_factor": 1, "partitions": [<shard of p0>, <shard of p1>, ...],
 *     "configs": {"retention.ms": "1000"}}]}
 *
 * The upgrade, at the first start of the new release (broker/runtime.c):
 *   st_legacy_read: the file's topics as topic records (cluster/records.h) with their names,
 *     ids, internal flags, replication factors, partition counts and configs, every partition
 *     led by this node, its only replica, at epoch 0 -> the records go into the new metadata
 *     log's first entry (cluster/quorum.h: hooks.seed), beside the cluster's id
 *   -> once that entry is applied: st_legacy_retire renames the file
 *     strata-metadata.json.migrated, never read again.
 * A crash between the two leaves the file: the log has its cluster id already, so the records
 * are not written twice, and the file is renamed at the next start. The shards the file
 * recorded are not kept: a partition's shard is node-local and derived from its topic id
 * (st_md_assign_shards), as a restart with another --smp always required.
 *
 * Threads: the main thread, at start-up (blocking file calls through st_fs_t).
 */
#ifndef ST_CLUSTER_LEGACY_H
#define ST_CLUSTER_LEGACY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/fs.h"

#define ST_LEGACY_FILE "strata-metadata.json"

/* Reads <log_dirs>/strata-metadata.json into *records (a new JSON array of topic records for
 * node `node`), *ntopics topics. No file: 0 with *records NULL. Otherwise 0, or an error with
 * one line in err (unreadable or malformed: the broker does not start). */
int st_legacy_read(const st_fs_t *fs, const char *log_dirs, int32_t node, json_t **records,
                   int *ntopics, char *err, size_t errlen);
/* Whether <log_dirs>/strata-metadata.json exists. */
bool st_legacy_present(const st_fs_t *fs, const char *log_dirs);
/* Renames the file aside (.migrated) durably. 0 or an error. */
int st_legacy_retire(const st_fs_t *fs, const char *log_dirs);

#endif
