/*
 * broker_config.h — dynamic broker settings: Kafka's BROKER config resource.
 *
 * A broker setting has up to four sources, the first present winning (Kafka's ConfigSource
 * numbers): a value set at run time for this broker (DYNAMIC_BROKER_CONFIG, 2, the resource
 * named by the node id), one set at run time for every broker (DYNAMIC_DEFAULT_BROKER_CONFIG,
 * 3, the resource named ""), the properties file or --set (STATIC_BROKER_CONFIG, 4), the
 * table's default (DEFAULT_CONFIG, 5). The dynamic values live in the metadata log (records
 * "broker_config", cluster/records.h), so every broker reads them from the snapshot it has
 * adopted: a partition's log settings and its min.insync.replicas come from the same snapshot
 * as its topic's overrides, and nothing reads a value another thread is writing.
 *
 * The settings that may change (st_bcfg_dynamic): every broker default of a topic config
 * (log.retention.ms, log.segment.bytes, message.max.bytes, min.insync.replicas, ...; each
 * partition's log is reconfigured as the snapshot is adopted), unclean.leader.election.enable
 * (read by the controller as it elects), max.connections, max.connections.per.ip and
 * max.connections.per.ip.overrides (Kafka's dynamic connection limits), and Strata's
 * log.level and log.protocol. The rest are read-only: changing one is refused with Kafka's
 * INVALID_CONFIG "Cannot update these configs dynamically".
 *
 * Threads: any (pure functions of their arguments), but st_bcfg_adopted: shard 0.
 */
#ifndef ST_KAFKA_BROKER_CONFIG_H
#define ST_KAFKA_BROKER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/shard.h"
#include "cluster/config.h"
#include "cluster/metadata.h"
#include "kafka/topic_config.h"

/* Kafka's DescribeConfigs config_source values. */
enum {
    ST_SRC_TOPIC = 1, /* TOPIC_CONFIG, for a topic resource */
    ST_SRC_DYNAMIC_BROKER = 2,
    ST_SRC_DYNAMIC_DEFAULT = 3,
    ST_SRC_STATIC_BROKER = 4,
    ST_SRC_DEFAULT = 5,
};

/* Whether broker setting key may change at run time. */
bool st_bcfg_dynamic(const char *key);
/* The topic config whose broker default setting key is (log.retention.ms: retention.ms), or
 * NULL. */
const st_tcfg_desc_t *st_bcfg_topic_config(const char *key);
/* cluster/ops.h's broker_config_check: 0 when key is dynamic and value (NULL: not checked)
 * valid for it; else INVALID_CONFIG with one line in err. arg is unused. */
int16_t st_bcfg_check(void *arg, const char *key, const char *value, bool *list, char *err,
                      size_t errlen);
/* key's value on this broker (cfg->node_id) under snapshot md (NULL: the static value), numbers
 * written into buf; *source (may be NULL) one of ST_SRC_*. NULL for a key not in the table. */
const char *st_bcfg_value(const st_config_t *cfg, const st_md_t *md, const char *key, char *buf,
                          size_t n, int *source);
/* The same as an integer (booleans 1/0). */
int64_t st_bcfg_int(const st_config_t *cfg, const st_md_t *md, const char *key);
/* Shard 0, after it adopted a snapshot whose broker settings differ from old's: the
 * process-wide ones that changed (log.level, log.protocol, the connection limits) applied. */
void st_bcfg_adopted(st_kshard_t *s0, const st_md_t *old);

#endif
