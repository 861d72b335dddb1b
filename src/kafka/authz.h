/*
 * authz.h — the handlers' one question to the authorizer: may this request's principal do
 * this operation on this resource (auth/acl.h has the rules, the shard's metadata snapshot the
 * ACLs, the configuration authorizer.class.name, super.users and
 * allow.everyone.if.no.acl.found).
 *
 * The principal is the connection's (net/auth.h: "User:ANONYMOUS" on PLAINTEXT and SSL without
 * a client certificate), the host its peer's address. A request with no connection (made by
 * the broker itself) is allowed. Denials are logged at info, as Kafka's authorizer log has
 * them: "Principal = User:bob is Denied operation = Read from host = 127.0.0.1 on resource =
 * Topic:LITERAL:orders"; st_kauthz_quiet decides without a line (Metadata's listing, which
 * leaves out what the principal may not describe, as Kafka logs those at debug).
 *
 * Threads: the request's shard.
 */
#ifndef ST_KAFKA_AUTHZ_H
#define ST_KAFKA_AUTHZ_H

#include <stdbool.h>
#include <stddef.h>

#include "auth/acl.h"
#include "broker/request.h"

/* Whether authorization is on for this broker at all. */
bool st_kauthz_on(const st_kreq_t *r);
/* op on the resource (res_type, name of len bytes). */
bool st_kauthz(st_kreq_t *r, int op, int res_type, const char *name, size_t len);
bool st_kauthz_quiet(st_kreq_t *r, int op, int res_type, const char *name, size_t len);
/* The same for a protocol string: true with authorization off, false for a null name. */
bool st_kauthz_k(st_kreq_t *r, int op, int res_type, st_kstr_t name);
/* The transaction APIs that bring a group in (AddOffsetsToTxn, TxnOffsetCommit): WRITE on the
 * transactional id, then READ on the group; 0, or the error refusing the request. */
int16_t st_kauthz_txn_group(st_kreq_t *r, st_kstr_t transactional_id, st_kstr_t group_id);
/* op on the cluster (kafka-cluster). */
bool st_kauthz_cluster(st_kreq_t *r, int op);
/* op on some resource of res_type (auth/acl.h, st_acl_authorize_any). */
bool st_kauthz_any(st_kreq_t *r, int op, int res_type);
/* The operations the principal may do on the resource, as the 32-bit field of the APIs'
 * authorized_operations (bit 1 << op), among those Kafka supports for its type (AclEntry's
 * supportedOperations): every supported one with authorization off. Decided without a log line,
 * as Kafka's authorizedOperations. */
int32_t st_kauthz_ops(st_kreq_t *r, int res_type, const char *name, size_t len);

#endif
