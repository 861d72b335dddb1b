/*
 * request.h — a request's life on the shard of its connection.
 *
 *   frame arrives (net/) -> st_kreq_t created with an arena -> header decoded -> the handler
 *   of its api key (kafka/handlers.h) -> the handler answers, now or later, with
 *   st_kreq_finish() -> response encoded (size, header, body) -> the connection sends it in
 *   request order -> arena freed.
 *
 * Every answer is counted in the shard's stats (requests, errors by code, latency). A sampled
 * request's root span (st_kreq_trace) ends as its answer is handed to the connection, with a
 * kafka.response child from st_kreq_begin to then.
 *
 * Threads: everything here on the request's shard (r->shard).
 */
#ifndef ST_BROKER_REQUEST_H
#define ST_BROKER_REQUEST_H

#include <stdint.h>

#include "base/arena.h"
#include "base/trace.h"
#include "broker/shard.h"
#include "net/conn.h"
#include "net/out.h"
#include "proto/kafka_gen.h"
#include "proto/kheader.h"
#include "proto/kreader.h"
#include "proto/kwriter.h"

typedef struct st_kreq {
    st_kshard_t *shard;
    st_conn_t *conn;
    uint64_t seq;
    uint8_t *frame;
    size_t frame_len;
    st_arena_t arena;
    st_kp_req_header_t hdr;
    int16_t api_key;
    int16_t api_version;
    st_kreader_t body; /* the bytes after the header */
    int64_t start_ns;
    int16_t error_code;   /* top-level error, for metrics */
    int32_t throttle_ms;  /* a quota's throttle: written into the response where it begins with
                             throttle_time_ms (if larger), the connection muted as long */
    size_t body_off;      /* where the response body begins in its out (st_kreq_begin) */
    bool protolog;        /* its request was logged: its response is too (protolog.h) */
    st_trace_ctx_t trace; /* sampled (span_id != 0): its spans hang from span (base/trace.h) */
    st_span_t *span;      /* a sampled request's root span (its arena), ended with its answer */
    int64_t respond_ns;   /* a sampled request's st_kreq_begin */
} st_kreq_t;

/* Encodes the response header and body, hands the frame to the connection, frees the
 * request. `enc` is a generated encoder; resp its matching response struct. */
#define ST_KREQ_RESPOND(req, api, resp)                                                            \
    do {                                                                                           \
        st_kwriter_t w_;                                                                           \
        st_out_t *o_ = st_kreq_begin((req), &w_);                                                  \
        int rc_ = o_ ? st_kp_##api##_resp_encode(&w_, (req)->api_version, (resp)) : -12;           \
        st_kreq_finish((req), o_, rc_);                                                            \
    } while (0)

/* A request for the frame [frame, frame + len) (taken over) of connection c, or NULL (out of
 * memory: frame freed). The caller decodes its header. */
st_kreq_t *st_kreq_new(st_kshard_t *s, st_conn_t *c, uint64_t seq, uint8_t *frame, size_t len);
/* Starts the response: an out with room for the size and the response header written. */
st_out_t *st_kreq_begin(st_kreq_t *r, st_kwriter_t *w);
/* Sends the response begun with st_kreq_begin (rc: the body's encoding result); with
 * r->throttle_ms, throttled as said there. */
void st_kreq_finish(st_kreq_t *r, st_out_t *o, int rc);
/* Decides whether r (its header decoded) is traced: Produce and Fetch are, as often as
 * tracing.sample.ratio says (broker/otlp.h); a sampled one gets its root span, named after its
 * api, with the attributes every request has. */
void st_kreq_trace(st_kreq_t *r);
/* Finishes a request that gets no response (Produce with acks=0). */
void st_kreq_finish_silent(st_kreq_t *r);
/* Closes the connection and frees the request (unknown api, malformed request). */
void st_kreq_fail(st_kreq_t *r, const char *why);
/* A protocol string as a C string in the request's arena: *out NULL for the null string.
 * False, *out NULL, when s holds a NUL byte (as a C string it would name another, shorter
 * resource: handlers refuse it) or the copy could not be allocated (refused the same way, so
 * that no failure reads as the null string, which filters take for "any"). */
bool st_kreq_cstr(st_kreq_t *r, st_kstr_t s, const char **out);

#endif
