/* serve.c — the Kafka protocol's hooks into the shard runtime (serve.h). */
#include "kafka/serve.h"

#include <stdbool.h>

#include "kafka/controller.h"
#include "kafka/fetch_wait.h"
#include "kafka/group_life.h"
#include "kafka/handlers.h"
#include "kafka/replica_link.h"
#include "kafka/topic_config.h"
#include "proto/kreader.h"

/* The request's header, then its handler. An unknown api key or version closes the
 * connection, except ApiVersions, which answers any version. */
static void dispatch(st_kreq_t *r)
{
    const st_khandler_t *h = st_khandler_find(r->api_key);
    if (!h) {
        st_kreq_fail(r, "unsupported api key");
        return;
    }
    bool supported = r->api_version >= h->min_version && r->api_version <= h->max_version;
    if (!supported && r->api_key != ST_KP_API_API_VERSIONS) {
        st_kreq_fail(r, "unsupported api version");
        return;
    }
    /* An ApiVersions request of a version we do not know is answered in the v0 layout (the
     * client cannot know our header format yet), so it may not even parse: skip the rest. */
    if (supported) {
        int hv = st_kp_req_header_version(r->api_key, r->api_version);
        st_kreader_init(&r->body, r->frame, r->frame_len, &r->arena);
        int rc = st_kp_req_header_decode(&r->body, hv, &r->hdr);
        if (rc) {
            st_kreq_fail(r, "malformed request header");
            return;
        }
    } else {
        st_kreader_init(&r->body, r->frame + r->frame_len, 0, &r->arena);
    }
    h->fn(r);
}

static void shard_drain(st_kshard_t *s)
{
    st_parts_release_acks(&s->parts); /* acks=all waiting on followers that are stopping */
    st_kmetadata_ready(s, true);      /* Metadata waiting for the broker to catch up */
    st_fetch_cancel_all(s);           /* long polls answer now with what they have */
    st_kgroup_drain(s);               /* waiting joins and syncs answer now */
}

const st_broker_hooks_t st_kafka_hooks = {
    .dispatch = dispatch,
    .topic_log_config = st_topic_log_config,
    .shard_start = st_kgroup_start,
    .shard_drain = shard_drain,
    .shard_fini = st_kgroup_fini,
    .md_adopted = st_ctl_md_adopted,
    .partition_gone = st_ctl_partition_gone,
    .partition_role = st_ctl_partition_role,
    .adopt_metadata = st_ctl_adopt,
    .quorum_answers = st_ctl_quorum_answers,
    .controller_fini = st_ctl_fini,
    .hint_create = st_ctl_hint_create,
    .shard_tick = st_ctl_tick,
    .replication_start = st_krepl_start,
    .replication_stop = st_krepl_stop,
    .wake_fetches = st_fetch_notify,
};
