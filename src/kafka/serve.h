/*
 * serve.h — the Kafka protocol on the shard runtime: the hooks (broker/runtime.h) through
 * which the runtime dispatches each request to its handler (handlers.h), starts and drains
 * each shard's group coordinator (group_life.h), wakes waiting fetches (fetch_wait.h), reads a
 * topic's log settings (topic_config.h) and loads the metadata (controller.h).
 *
 * Threads: as broker/runtime.h says for each hook.
 */
#ifndef ST_KAFKA_SERVE_H
#define ST_KAFKA_SERVE_H

#include "broker/runtime.h"

extern const st_broker_hooks_t st_kafka_hooks;

#endif
