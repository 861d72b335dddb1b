/*
 * autocreate.h — creating unknown topics on first use (auto.create.topics.enable).
 *
 * Metadata and Produce name topics that may not exist yet. st_autocreate() asks the
 * controller to create the missing ones with num.partitions and default.replication.factor,
 * and calls back once every shard serves them, so the caller answers with the topic in
 * place instead of LEADER_NOT_AVAILABLE. Invalid names are left for the caller to refuse.
 * Runs on the request's shard; the op lives in the request's arena.
 */
#ifndef ST_KAFKA_AUTOCREATE_H
#define ST_KAFKA_AUTOCREATE_H

#include "broker/request.h"

typedef void (*st_autocreate_cb)(st_kreq_t *r, void *arg);

/* Calls cb (later, or at once when nothing is missing). */
void st_autocreate(st_kreq_t *r, const st_kstr_t *names, int n, st_autocreate_cb cb, void *arg);

#endif
