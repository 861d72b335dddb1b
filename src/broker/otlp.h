/*
 * otlp.h — the exporter of finished spans (base/trace.h): OTLP over HTTP/1.1, JSON encoding,
 * to `tracing.endpoint` (an OpenTelemetry Collector, Jaeger, Tempo...).
 *
 *   shards ── st_span_end ──> trace queue ── exporter thread: every second, or as soon as
 *                                            ST_OTLP_BATCH spans wait ── POST endpoint
 *
 * The body, one POST per batch (OTLP's ExportTraceServiceRequest, proto3 JSON mapping):
 *
 *   {"resourceSpans":[{"resource":{"attributes":[{"key":"service.name",
 *                                                 "value":{"stringValue":"strata"}}, ...]},
 *     "scopeSpans":[{"scope":{"name":"strata","version":"..."},
 *       "spans":[{"traceId":"<32 hex>","spanId":"<16 hex>","parentSpanId":"<16 hex>",
 *                 "name":"kafka.produce","kind":2,
 *                 "startTimeUnixNano":"<decimal>","endTimeUnixNano":"<decimal>",
 *                 "attributes":[{"key":"k","value":{"stringValue":"v"}},
 *                               {"key":"n","value":{"intValue":"42"}}],
 *                 "status":{"code":2}}, ...]}]}]}
 *
 * (parentSpanId is absent on a root; status only on a span marked as an error.)
 *
 * The HTTP client is deliberately small: plain TCP, a fresh connection per batch ("Connection:
 * close"), connect and each send/receive bounded by ST_OTLP_TIMEOUT_MS, a 2xx status line is
 * success. A failed batch is counted (st_trace_count_export) and dropped, never retried: the
 * broker's memory and the shards never wait on a collector that is down.
 *
 * Threads: st_otlp_start and st_otlp_stop from main; the exporter is its own thread;
 * st_otlp_parse_url, st_otlp_encode and st_otlp_post from any thread.
 */
#ifndef ST_BROKER_OTLP_H
#define ST_BROKER_OTLP_H

#include <stddef.h>

#include "base/buf.h"
#include "base/trace.h"

#define ST_OTLP_BATCH       512
#define ST_OTLP_INTERVAL_MS 1000
#define ST_OTLP_TIMEOUT_MS  2000

/* Splits http://host:port/path (host a name, an IPv4 address or [IPv6]; port 1..65535; path
 * starting with '/', "/" when absent). 0, or -EINVAL with one line in err. */
int st_otlp_parse_url(const char *url, char *host, size_t hostlen, int *port, char *path,
                      size_t pathlen, char *err, size_t errlen);
/* Appends the JSON body of spans[0..n) for service `service` to out. 0 or -ENOMEM. */
int st_otlp_encode(const char *service, const st_span_t *spans, size_t n, st_buf_t *out);
/* POSTs body (application/json) to http://host:port/path within timeout_ms per step: the
 * response's HTTP status, or a negative errno (-ETIMEDOUT, -ECONNREFUSED, -EPROTO for an
 * answer that is not HTTP) with one line in err. */
int st_otlp_post(const char *host, int port, const char *path, const void *body, size_t len,
                 int timeout_ms, char *err, size_t errlen);

/* Validates the settings (ratio "0".."1", a service name) and, with endpoint set (else
 * nothing more is done), the endpoint; enables sampling (base/trace.h) and starts the
 * exporter. 0, or -1 with one line in err naming the setting. */
int st_otlp_start(const char *endpoint, const char *ratio, const char *service, char *err,
                  size_t errlen);
/* Stops sampling, sends what is queued (one last try) and joins the exporter. */
void st_otlp_stop(void);

#endif
