/*
 * h_api_versions.c — ApiVersions (key 18).
 *
 * Advertises exactly the handler table: every api key with a handler, with the version range
 * the handler implements. A request of a version we do not implement is answered with
 * UNSUPPORTED_VERSION (35) and our range, in the v0 layout, so the client can retry with a
 * version both sides speak.
 */
#include "kafka/handlers.h"
#include "proto/kerr.h"

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
    ST_KREQ_RESPOND(r, api_versions, &resp);
}
