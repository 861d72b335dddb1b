/*
 * broker.h — starting and stopping the Kafka broker: identity, listeners, shard threads.
 *
 * The runtime's state is broker/shard.h; a request's life broker/request.h; the handlers
 * kafka/handlers.h. This file wires them: each shard thread opens its partitions, starts its
 * group coordinator (kafka/group_life.h), serves frames through the handler table, ticks its
 * housekeeping, and shuts down in steps (broker.c).
 *
 * Threads: st_broker_* on the main thread (st_broker_stop from any thread).
 */
#ifndef ST_KAFKA_BROKER_H
#define ST_KAFKA_BROKER_H

#include <stddef.h>

#include "broker/shard.h"
#include "cluster/config.h"

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

#endif
