/* serve.c — the Kafka protocol's hooks into the shard runtime (serve.h). */
#include "kafka/serve.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "broker/protolog.h"
#include "kafka/controller.h"
#include "kafka/fetch_wait.h"
#include "kafka/broker_config.h"
#include "kafka/coordsvc.h"
#include "kafka/group_route.h"
#include "kafka/forward.h"
#include "kafka/handlers.h"
#include "kafka/kshard.h"
#include "kafka/replica_link.h"
#include "kafka/sasl.h"
#include "kafka/throttle.h"
#include "kafka/topic_config.h"
#include "kafka/txn_route.h"
#include "net/conn.h"
#include "proto/kreader.h"

/* Whether a connection that is not authenticated yet (net/auth.h) may send api_key: only what
 * the handshake itself needs, as Kafka's SASL server allows. */
static bool allowed_before_auth(int16_t api_key)
{
    return api_key == ST_KP_API_API_VERSIONS || api_key == ST_KP_API_SASL_HANDSHAKE ||
           api_key == ST_KP_API_SASL_AUTHENTICATE;
}

/* The connection's authentication state, then the request's header, then its handler. A
 * request an unauthenticated connection may not send, an unknown api key or version closes
 * the connection, except ApiVersions, which answers any version. PLAINTEXT connections are
 * authenticated from their accept. After a SaslHandshake v0 the frames are bare SASL tokens
 * (h_sasl.c) until the exchange ends. */
static void dispatch(st_kreq_t *r)
{
    /* Kafka's sasl.server.max.receive.size: a connection not authenticated yet sends nothing
     * larger (an oversized token is not buffered for a stranger) */
    if (!st_auth_done(st_conn_auth(r->conn)) && r->frame_len > ST_SASL_MAX_RECEIVE) {
        st_kreq_fail(r, "frame larger than 512 KiB before authentication");
        return;
    }
    if (st_sasl_raw_pending(r->conn)) {
        st_sasl_raw_frame(r);
        return;
    }
    if (!st_sasl_session_check(r))
        return;
    if (!st_auth_done(st_conn_auth(r->conn)) && !allowed_before_auth(r->api_key)) {
        st_kreq_fail(r, "request before authentication");
        return;
    }
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
        st_protolog_request(r);
        st_kreq_trace(r);
    } else {
        st_kreader_init(&r->body, r->frame + r->frame_len, 0, &r->arena);
    }
    if (supported && st_kforward(r))
        return; /* answered by the active controller */
    /* request_percentage: the handler's time on this shard, one clock read after it (the
     * request's start was read as its frame came); r may be freed by then */
    st_kreqtime_t t;
    st_kshard_t *s = r->shard;
    int64_t start_ns = r->start_ns;
    st_kthrottle_request_begin(r, &t);
    h->fn(r);
    st_kthrottle_request_end(s, &t, start_ns);
}

static void shard_drain(st_kshard_t *s)
{
    st_parts_release_acks(&s->parts); /* acks=all waiting on followers that are stopping */
    st_kmetadata_ready(s, true);      /* Metadata waiting for the broker to catch up */
    st_fetch_cancel_all(s);           /* long polls answer now with what they have */
    st_coordsvc_drain(s);             /* waiting joins and syncs answer now */
}

/* The layer's own per-shard state (kshard.h), then the coordinators. */
static int shard_start(st_kshard_t *s)
{
    s->proto = calloc(1, sizeof(st_kafka_shard_t));
    if (!s->proto)
        return -ENOMEM;
    int rc = st_coordsvc_start(s);
    if (rc) {
        free(s->proto);
        s->proto = NULL;
    }
    return rc;
}

static void shard_fini(st_kshard_t *s)
{
    st_sasl_shard_fini(s);
    st_kthrottle_shard_fini(s);
    st_coordsvc_fini(s);
    free(s->proto);
    s->proto = NULL;
}

static void shard_tick(st_kshard_t *s)
{
    st_ctl_tick(s);
    st_coordsvc_tick(s);
    st_sasl_tick(s);
}

int st_kafka_init(const st_config_t *cfg)
{
    st_ktxn_configure(cfg);
    int rc = st_coordsvc_register(&st_kgroup_service);
    return rc ? rc : st_coordsvc_register(&st_ktxn_service);
}

/* The replication's start and stop also start and stop the inter-broker client the
 * transaction coordinators send their markers with (txn_send.c). */
static int replication_start(st_broker_t *b, char *err, size_t errlen)
{
    int rc = st_krepl_start(b, err, errlen);
    return rc ? rc : st_ktxn_client_start(b, err, errlen);
}

static void replication_stop(st_broker_t *b)
{
    st_ktxn_client_stop(b);
    st_krepl_stop(b);
}

/* After each adoption: shard 0 hands the inter-broker client its new snapshot and applies
 * the process-wide broker settings that changed (broker_config.h). */
static void md_adopted(st_kshard_t *s, const st_md_t *old)
{
    st_ctl_md_adopted(s);
    if (s->id != 0)
        return;
    st_ktxn_client_metadata(s);
    if (!st_md_broker_configs_equal(old, s->md))
        st_bcfg_adopted(s, old);
}

const st_broker_hooks_t st_kafka_hooks = {
    .dispatch = dispatch,
    .topic_log_config = st_topic_log_config,
    .shard_start = shard_start,
    .shard_drain = shard_drain,
    .shard_fini = shard_fini,
    .md_adopted = md_adopted,
    .partition_gone = st_ctl_partition_gone,
    .partition_role = st_ctl_partition_role,
    .adopt_metadata = st_ctl_adopt,
    .quorum_answers = st_ctl_quorum_answers,
    .controller_fini = st_ctl_fini,
    .hint_create = st_ctl_hint_create,
    .shard_tick = shard_tick,
    .replication_start = replication_start,
    .replication_stop = replication_stop,
    .wake_fetches = st_fetch_notify,
};
