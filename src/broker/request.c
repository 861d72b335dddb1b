/* request.c — a request's life: created from a frame, answered, counted, freed (request.h). */
#include "broker/request.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "broker/protolog.h"

st_kreq_t *st_kreq_new(st_kshard_t *s, st_conn_t *c, uint64_t seq, uint8_t *frame, size_t len)
{
    st_kreq_t *r = calloc(1, sizeof *r);
    if (!r) {
        free(frame);
        return NULL;
    }
    r->shard = s;
    r->conn = c;
    r->seq = seq;
    r->frame = frame;
    r->frame_len = len;
    r->start_ns = st_mono_ns();
    st_arena_init(&r->arena, 8192);
    return r;
}

static void req_free(st_kreq_t *r)
{
    st_arena_fini(&r->arena);
    free(r->frame);
    free(r);
}

void st_kreq_trace(st_kreq_t *r)
{
    if (r->api_key != ST_KP_API_PRODUCE && r->api_key != ST_KP_API_FETCH)
        return;
    st_trace_begin(&r->trace);
    if (!r->trace.span_id)
        return;
    r->span = st_arena_alloc(&r->arena, sizeof *r->span);
    if (!r->span) {
        r->trace.span_id = 0;
        return;
    }
    bool produce = r->api_key == ST_KP_API_PRODUCE;
    st_span_root(r->span, &r->trace, produce ? "kafka.produce" : "kafka.fetch", r->start_ns);
    st_span_attr_str(r->span, "kafka.api", produce ? "Produce" : "Fetch", -1);
    st_span_attr_int(r->span, "kafka.api_version", r->api_version);
    st_span_attr_int(r->span, "kafka.correlation_id", r->hdr.correlation_id);
    st_span_attr_str(r->span, "kafka.client_id", r->hdr.client_id.ptr,
                     r->hdr.client_id.len > 0 ? r->hdr.client_id.len : 0);
    st_span_attr_int(r->span, "kafka.request_bytes", (int64_t)r->frame_len);
    st_span_attr_int(r->span, "strata.shard", r->shard->id);
}

/* A sampled request's last spans: kafka.response (from st_kreq_begin, when there is an
 * answer) and the root. */
static void trace_end(st_kreq_t *r, bool answered)
{
    int64_t now = st_mono_ns();
    if (answered && r->respond_ns) {
        st_span_t sp;
        st_span_init(&sp, &r->trace, st_trace_new_id(), "kafka.response", r->respond_ns);
        st_span_end(&sp, now);
    }
    st_span_attr_int(r->span, "kafka.error_code", r->error_code);
    r->span->error = r->error_code != 0;
    st_span_end(r->span, now);
}

st_out_t *st_kreq_begin(st_kreq_t *r, st_kwriter_t *w)
{
    if (r->span)
        r->respond_ns = st_mono_ns();
    st_out_t *o = st_out_new();
    if (!o)
        return NULL;
    st_kwriter_init(w, &o->mem);
    st_buf_put_be32(&o->mem, 0); /* size, patched in st_kreq_finish */
    st_kp_resp_header_t h = {.correlation_id = r->hdr.correlation_id};
    st_kp_resp_header_encode(w, st_kp_resp_header_version(r->api_key, r->api_version), &h);
    r->body_off = o->mem.len;
    return o;
}

static void account(st_kreq_t *r)
{
    st_kshard_stats_t *s = &r->shard->stats;
    int k = r->api_key >= 0 && r->api_key < 128 ? r->api_key : 127;
    int64_t ns = st_mono_ns() - r->start_ns;
    atomic_fetch_add_explicit(&s->requests[k], 1, memory_order_relaxed);
    if (r->error_code) {
        atomic_fetch_add_explicit(&s->request_errors[k], 1, memory_order_relaxed);
        int code = r->error_code + 1;
        if (k < ST_KSTATS_NAPIS && code >= 0 && code < ST_KSTATS_NCODES)
            atomic_fetch_add_explicit(&s->request_error_codes[k][code], 1, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&s->request_ns[k], (uint64_t)ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->request_latency[k][st_kstats_bucket(ns)], 1,
                              memory_order_relaxed);
}

void st_kreq_finish(st_kreq_t *r, st_out_t *o, int rc)
{
    account(r);
    if (rc || !o || o->mem.oom) {
        ST_ERROR("cannot encode response to api %d v%d: %s", r->api_key, r->api_version,
                 st_strerror(rc ? rc : -ENOMEM));
        st_out_free(o);
        st_conn_respond(r->conn, r->seq, NULL);
        st_conn_close(r->conn);
        if (r->span)
            trace_end(r, false);
        req_free(r);
        return;
    }
    o->total = st_out_size(o);
    st_put_be32(o->mem.data, (uint32_t)(o->total - 4));
    if (r->throttle_ms > 0 && st_kp_resp_throttle_first(r->api_key, r->api_version) &&
        o->mem.len >= r->body_off + 4 &&
        (int32_t)st_be32(o->mem.data + r->body_off) < r->throttle_ms)
        st_put_be32(o->mem.data + r->body_off, (uint32_t)r->throttle_ms);
    if (r->protolog)
        st_protolog_response(r, o);
    /* muted before it is sent: the response leaves, nothing more is read (Kafka's KIP-219) */
    st_conn_mute(r->conn, r->throttle_ms);
    st_conn_respond(r->conn, r->seq, o);
    if (r->span)
        trace_end(r, true);
    req_free(r);
}

void st_kreq_finish_silent(st_kreq_t *r)
{
    account(r);
    st_conn_mute(r->conn, r->throttle_ms);
    st_conn_respond(r->conn, r->seq, NULL);
    if (r->span)
        trace_end(r, false);
    req_free(r);
}

void st_kreq_fail(st_kreq_t *r, const char *why)
{
    ST_WARN("closing connection from %s: %s (api %d v%d, client %.*s)", st_conn_peer(r->conn), why,
            r->api_key, r->api_version, r->hdr.client_id.len > 0 ? r->hdr.client_id.len : 0,
            r->hdr.client_id.len > 0 ? r->hdr.client_id.ptr : "");
    r->error_code = -1;
    account(r);
    st_conn_respond(r->conn, r->seq, NULL);
    st_conn_close(r->conn);
    if (r->span)
        trace_end(r, false);
    req_free(r);
}

bool st_kreq_cstr(st_kreq_t *r, st_kstr_t s, const char **out)
{
    *out = NULL;
    if (s.len < 0)
        return true;
    if (memchr(s.ptr, 0, (size_t)s.len))
        return false;
    *out = st_arena_strndup(&r->arena, s.ptr, (size_t)s.len);
    return *out != NULL;
}
