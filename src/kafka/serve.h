/*
 * serve.h — the Kafka protocol on the shard runtime: the hooks (broker/runtime.h) through
 * which the runtime dispatches each request to its handler (handlers.h), starts, ticks and
 * drains each shard's coordinators (coordsvc.h, the registry st_kafka_init fills), wakes waiting
 * fetches (fetch_wait.h), reads a topic's log settings (topic_config.h) and loads the metadata
 * (controller.h).
 *
 * Threads: as broker/runtime.h says for each hook.
 */
#ifndef ST_KAFKA_SERVE_H
#define ST_KAFKA_SERVE_H

#include "broker/runtime.h"

extern const st_broker_hooks_t st_kafka_hooks;

/* Registers the coordinator services (coordsvc.h), with the settings of cfg that shape them
 * (the topic configs of __transaction_state). On the main thread, once, before
 * st_broker_create. 0, or an error. */
int st_kafka_init(const st_config_t *cfg);

#endif
