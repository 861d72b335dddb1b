/*
 * sasl.h — the Kafka layer's SASL pieces beyond the handlers (h_sasl.c): the raw tokens of a
 * SaslHandshake v0 connection, the session deadline (KIP-368), the bootstrap users, and converting
 * credentials between the metadata's form and auth/'s.
 *
 * Threads: the shard of the request or connection; st_sasl_tick on every shard (only shard 0
 * acts).
 */
#ifndef ST_KAFKA_SASL_H
#define ST_KAFKA_SASL_H

#include <stdbool.h>

#include "auth/scram.h"
#include "broker/request.h"
#include "cluster/metadata.h"

/* The largest frame a connection may send before it is authenticated (Kafka's
 * sasl.server.max.receive.size default); a larger one closes it. */
#define ST_SASL_MAX_RECEIVE 524288

/* Whether c's next frame is a bare SASL token (after SaslHandshake v0), not a request. */
bool st_sasl_raw_pending(st_conn_t *c);
/* Answers the bare token in r's frame (its header fields are meaningless). */
void st_sasl_raw_frame(st_kreq_t *r);
/* KIP-368: whether r may go on; false when its connection's SASL session expired without
 * re-authentication (r is then failed and the connection closed, as Kafka does). */
bool st_sasl_session_check(st_kreq_t *r);
/* Shard 0, as the active controller: creates the sasl.bootstrap.users that the metadata does
 * not hold yet (an attempt a second at most, until they are all there). */
void st_sasl_tick(st_kshard_t *s);
void st_sasl_shard_fini(st_kshard_t *s);

void st_sasl_cred_of(const st_md_scram_t *m, st_scram_cred_t *c);
void st_sasl_md_of(const char *user, const st_scram_cred_t *c, st_md_scram_t *m);

#endif
