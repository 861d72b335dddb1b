/*
 * handlers.c — the table of implemented APIs: what ApiVersions advertises and what dispatch
 * accepts. A version range here must be implemented in full by its handler; the ranges are
 * the generated schema's (oldest version Kafka 4.x accepts to newest it defines).
 *
 * ApiVersions (key 18) lives here, beside the table it reads: it advertises exactly the table,
 * every api key with a handler and the version range the handler implements. A request of a
 * version we do not implement is answered with UNSUPPORTED_VERSION (35) and our range, in the
 * v0 layout, so the client can retry with a version both sides speak.
 */
#include "kafka/handlers.h"
#include "proto/kerr.h"

#define ST_H(NAME, fn)                                                                             \
    {                                                                                              \
        ST_KP_API_##NAME, ST_KP_##NAME##_MIN_VERSION, ST_KP_##NAME##_MAX_VERSION, fn               \
    }

const st_khandler_t st_khandlers[] = {
    ST_H(PRODUCE, st_kh_produce),
    ST_H(FETCH, st_kh_fetch),
    ST_H(LIST_OFFSETS, st_kh_list_offsets),
    ST_H(METADATA, st_kh_metadata),
    ST_H(API_VERSIONS, st_kh_api_versions),
    ST_H(CREATE_TOPICS, st_kh_create_topics),
    ST_H(DELETE_TOPICS, st_kh_delete_topics),
    ST_H(DELETE_RECORDS, st_kh_delete_records),
    ST_H(INIT_PRODUCER_ID, st_kh_init_producer_id),
    ST_H(OFFSET_FOR_LEADER_EPOCH, st_kh_offset_for_leader_epoch),
    ST_H(DESCRIBE_CONFIGS, st_kh_describe_configs),
    ST_H(ALTER_CONFIGS, st_kh_alter_configs),
    ST_H(CREATE_PARTITIONS, st_kh_create_partitions),
    ST_H(INCREMENTAL_ALTER_CONFIGS, st_kh_incremental_alter_configs),
    ST_H(DESCRIBE_CLUSTER, st_kh_describe_cluster),
    ST_H(FIND_COORDINATOR, st_kh_find_coordinator),
    ST_H(JOIN_GROUP, st_kh_join_group),
    ST_H(SYNC_GROUP, st_kh_sync_group),
    ST_H(HEARTBEAT, st_kh_heartbeat),
    ST_H(LEAVE_GROUP, st_kh_leave_group),
    ST_H(OFFSET_COMMIT, st_kh_offset_commit),
    ST_H(OFFSET_FETCH, st_kh_offset_fetch),
    ST_H(DESCRIBE_GROUPS, st_kh_describe_groups),
    ST_H(LIST_GROUPS, st_kh_list_groups),
    ST_H(DELETE_GROUPS, st_kh_delete_groups),
    ST_H(OFFSET_DELETE, st_kh_offset_delete),
    ST_H(CONSUMER_GROUP_HEARTBEAT, st_kh_consumer_group_heartbeat),
    ST_H(CONSUMER_GROUP_DESCRIBE, st_kh_consumer_group_describe),
    ST_H(TXN_OFFSET_COMMIT, st_kh_txn_offset_commit),
    ST_H(ELECT_LEADERS, st_kh_elect_leaders),
    ST_H(ALTER_PARTITION_REASSIGNMENTS, st_kh_alter_partition_reassignments),
    ST_H(LIST_PARTITION_REASSIGNMENTS, st_kh_list_partition_reassignments),
    ST_H(WRITE_TXN_MARKERS, st_kh_write_txn_markers),
    ST_H(DESCRIBE_PRODUCERS, st_kh_describe_producers),
    ST_H(ADD_PARTITIONS_TO_TXN, st_kh_add_partitions_to_txn),
    ST_H(ADD_OFFSETS_TO_TXN, st_kh_add_offsets_to_txn),
    ST_H(END_TXN, st_kh_end_txn),
    ST_H(DESCRIBE_TRANSACTIONS, st_kh_describe_transactions),
    ST_H(LIST_TRANSACTIONS, st_kh_list_transactions),
    ST_H(DESCRIBE_ACLS, st_kh_describe_acls),
    ST_H(CREATE_ACLS, st_kh_create_acls),
    ST_H(DELETE_ACLS, st_kh_delete_acls),
    ST_H(SASL_HANDSHAKE, st_kh_sasl_handshake),
    ST_H(SASL_AUTHENTICATE, st_kh_sasl_authenticate),
    ST_H(DESCRIBE_USER_SCRAM_CREDENTIALS, st_kh_describe_user_scram_credentials),
    ST_H(ALTER_USER_SCRAM_CREDENTIALS, st_kh_alter_user_scram_credentials),
    ST_H(DESCRIBE_CLIENT_QUOTAS, st_kh_describe_client_quotas),
    ST_H(ALTER_CLIENT_QUOTAS, st_kh_alter_client_quotas),
};
const int st_nkhandlers = (int)(sizeof st_khandlers / sizeof st_khandlers[0]);

const st_khandler_t *st_khandler_find(int16_t api_key)
{
    for (int i = 0; i < st_nkhandlers; i++)
        if (st_khandlers[i].api_key == api_key)
            return &st_khandlers[i];
    return NULL;
}

void st_kh_api_versions(st_kreq_t *r)
{
    st_kp_api_versions_resp_t resp = {0};
    resp.finalized_features_epoch = -1;
    const st_khandler_t *self = st_khandler_find(ST_KP_API_API_VERSIONS);
    if (r->api_version > self->max_version || r->api_version < self->min_version) {
        resp.error_code = ST_KERR_UNSUPPORTED_VERSION;
        r->api_version = 0;
        r->error_code = ST_KERR_UNSUPPORTED_VERSION;
    } else {
        st_kp_api_versions_req_t req;
        if (st_kp_api_versions_req_decode(&r->body, r->api_version, &req)) {
            st_kreq_fail(r, "malformed ApiVersions request");
            return;
        }
    }
    resp.api_keys = st_arena_zalloc(&r->arena, (size_t)st_nkhandlers * sizeof *resp.api_keys);
    if (!resp.api_keys) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int i = 0; i < st_nkhandlers; i++) {
        resp.api_keys[i].api_key = st_khandlers[i].api_key;
        resp.api_keys[i].min_version = st_khandlers[i].min_version;
        resp.api_keys[i].max_version = st_khandlers[i].max_version;
    }
    resp.api_keys_count = st_nkhandlers;
    /* Kafka 4.x's features (v3+, tagged): transaction.version supported 0-2; finalized at level
     * 0, which Kafka leaves out of finalized_features (a feature at 0 has no FeatureLevelRecord)
     * and whose epoch is then 0. Clients read that as transactions v1 (no epoch bump at each
     * end) until the produce-side verification of KIP-890 lets the level rise. */
    static const st_kp_api_versions_resp_supported_feature_t features[] = {
        {{"transaction.version", 19}, 0, 2},
        {{"group.version", 13}, 0, 1},
    };
    /* group.version 1: KIP-848's consumer groups are on (ConsumerGroupHeartbeat), as Kafka
     * 4.x finalizes it by default */
    static const st_kp_api_versions_resp_finalized_feature_t finalized[] = {
        {{"group.version", 13}, 1, 1},
    };
    resp.supported_features = (st_kp_api_versions_resp_supported_feature_t *)features;
    resp.supported_features_count = 2;
    resp.finalized_features = (st_kp_api_versions_resp_finalized_feature_t *)finalized;
    resp.finalized_features_count = 1;
    resp.finalized_features_epoch = 0;
    ST_KREQ_RESPOND(r, api_versions, &resp);
}
