/*
 * autocreate.h — creating unknown topics on first use (auto.create.topics.enable).
 *
 * Metadata and Produce name topics that may not exist yet. st_autocreate() asks the
 * controller to create the missing ones with num.partitions and default.replication.factor,
 * and calls back once every shard serves them, so the caller answers with the topic in
 * place instead of LEADER_NOT_AVAILABLE. Invalid names are left for the caller to refuse.
 * In a cluster, a broker that is not the active controller gets NOT_CONTROLLER for each
 * topic it asked for (it hands the controller a hint; the topic appears later): the caller
 * answers with a retriable error, and the client asks again.
 * Runs on the request's shard; the op lives in the request's arena.
 */
#ifndef ST_KAFKA_AUTOCREATE_H
#define ST_KAFKA_AUTOCREATE_H

#include "broker/request.h"
#include "kafka/coordsvc.h"

typedef void (*st_autocreate_cb)(st_kreq_t *r, void *arg);

/* Calls cb (later, or at once when nothing is missing). errors: NULL, or n entries that
 * receive each name's creation error (0 when it was not asked for, or was created). */
void st_autocreate(st_kreq_t *r, const st_kstr_t *names, int n, int16_t *errors,
                   st_autocreate_cb cb, void *arg);

typedef void (*st_coordsvc_ready_fn)(st_kreq_t *r, void *arg);
/* Creates svc's topic if r's shard's snapshot lacks it (through the controller, or a hint to
 * the active one), then cb(r, arg), whether the creation succeeded or not. */
void st_coordsvc_ensure_topic(st_kreq_t *r, const st_coordsvc_t *svc, st_coordsvc_ready_fn cb,
                              void *arg);

#endif
