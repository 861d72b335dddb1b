/*
 * handlers.h — the Kafka API handlers: one per API (or family), and the table dispatch and
 * ApiVersions read (handlers.c).
 *
 * A handler takes a request whose header is decoded (broker/request.h), decodes the body, fans
 * the work out to the owner shards (broker/fanout.h), fills the response and finishes the
 * request, now or later.
 *
 * Threads: every handler on the request's shard.
 */
#ifndef ST_KAFKA_HANDLERS_H
#define ST_KAFKA_HANDLERS_H

#include <stdint.h>

#include "broker/request.h"

typedef void (*st_khandler_fn)(st_kreq_t *r);
typedef struct st_khandler {
    int16_t api_key;
    int16_t min_version, max_version;
    st_khandler_fn fn;
} st_khandler_t;
extern const st_khandler_t st_khandlers[];
extern const int st_nkhandlers;
const st_khandler_t *st_khandler_find(int16_t api_key);

void st_kh_api_versions(st_kreq_t *r);
void st_kh_metadata(st_kreq_t *r);
/* Cluster: Metadata requests wait until this broker has caught up with the metadata log since
 * it started (its registration of this run is in its snapshot, unfenced), so that a
 * restarting broker never tells a client that topics do not exist; at most 10 s, and no
 * longer once shutdown begins (force). Call on each snapshot change and tick. */
void st_kmetadata_ready(st_kshard_t *s, bool force);
void st_kh_produce(st_kreq_t *r);
void st_kh_fetch(st_kreq_t *r);
void st_kh_list_offsets(st_kreq_t *r);
void st_kh_create_topics(st_kreq_t *r);
void st_kh_delete_topics(st_kreq_t *r);
void st_kh_describe_acls(st_kreq_t *r);
void st_kh_create_acls(st_kreq_t *r);
void st_kh_delete_acls(st_kreq_t *r);
void st_kh_create_partitions(st_kreq_t *r);
void st_kh_describe_configs(st_kreq_t *r);
void st_kh_alter_configs(st_kreq_t *r);
void st_kh_incremental_alter_configs(st_kreq_t *r);
void st_kh_describe_cluster(st_kreq_t *r);
void st_kh_delete_records(st_kreq_t *r);
void st_kh_offset_for_leader_epoch(st_kreq_t *r);
void st_kh_init_producer_id(st_kreq_t *r);
void st_kh_find_coordinator(st_kreq_t *r);
void st_kh_join_group(st_kreq_t *r);
void st_kh_sync_group(st_kreq_t *r);
void st_kh_heartbeat(st_kreq_t *r);
void st_kh_leave_group(st_kreq_t *r);
void st_kh_offset_commit(st_kreq_t *r);
void st_kh_offset_fetch(st_kreq_t *r);
void st_kh_describe_groups(st_kreq_t *r);
void st_kh_list_groups(st_kreq_t *r);
void st_kh_delete_groups(st_kreq_t *r);
void st_kh_offset_delete(st_kreq_t *r);
void st_kh_consumer_group_heartbeat(st_kreq_t *r);
void st_kh_consumer_group_describe(st_kreq_t *r);
void st_kh_txn_offset_commit(st_kreq_t *r);
void st_kh_elect_leaders(st_kreq_t *r);
void st_kh_alter_partition_reassignments(st_kreq_t *r);
void st_kh_list_partition_reassignments(st_kreq_t *r);
void st_kh_write_txn_markers(st_kreq_t *r);  /* h_txn_markers.c */
void st_kh_describe_producers(st_kreq_t *r); /* h_txn_markers.c */
void st_kh_add_partitions_to_txn(st_kreq_t *r);
void st_kh_add_offsets_to_txn(st_kreq_t *r);
void st_kh_end_txn(st_kreq_t *r);
void st_kh_describe_transactions(st_kreq_t *r);
void st_kh_list_transactions(st_kreq_t *r);
void st_kh_sasl_handshake(st_kreq_t *r);                  /* h_sasl.c */
void st_kh_sasl_authenticate(st_kreq_t *r);               /* h_sasl.c */
void st_kh_describe_user_scram_credentials(st_kreq_t *r); /* h_scram.c */
void st_kh_alter_user_scram_credentials(st_kreq_t *r);    /* h_scram.c */
void st_kh_describe_client_quotas(st_kreq_t *r);          /* h_quota.c */
void st_kh_alter_client_quotas(st_kreq_t *r);             /* h_quota.c */
/* InitProducerId with a transactional id (h_txn.c): to the id's coordinator. */
void st_kh_init_producer_id_txn(st_kreq_t *r, const st_kp_init_producer_id_req_t *req);

#endif
