/*
 * trace.h — spans of a request's life, for OpenTelemetry (exported by broker/otlp.h).
 *
 * A request is sampled once, at receipt (st_trace_begin). Its context then carries the trace
 * id and the id of the span its children hang from; an unsampled context has span_id 0, and
 * the code that would record a span tests that and nothing more, so an unsampled request pays
 * one branch at each point (and tracing off, one relaxed atomic load at receipt).
 *
 *   receipt:      st_trace_begin(&ctx)                     sampled? trace id, root span id
 *   each span:    st_span_init(&sp, &parent_ctx, id, name, start_ns)   (a root: st_span_root)
 *                 st_span_attr_int / st_span_attr_str      at most ST_SPAN_MAX_ATTRS
 *                 st_span_end(&sp, end_ns)                 copied into the queue, or dropped
 *   exporter:     st_trace_take(out, max)                  the oldest finished spans
 *
 * A span is a value: whoever finishes it copies it into the process's queue, a mutex-held ring
 * of ST_TRACE_QUEUE spans (only sampled requests use it). A full queue drops the span and
 * counts it (st_trace_stats); nothing here ever waits for the exporter.
 *
 * Times are st_mono_ns() throughout (comparable between threads); st_trace_unix_ns turns one
 * into Unix time for export. Ids are random (a per-thread generator seeded from the OS), never
 * 0. String attributes are truncated to ST_SPAN_STR_MAX - 1 bytes and made printable ASCII
 * (other bytes become '?'), so any encoding of them is valid JSON and valid UTF-8.
 *
 * Threads: any. st_trace_enable and st_trace_disable at process start and end only.
 */
#ifndef ST_BASE_TRACE_H
#define ST_BASE_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_SPAN_MAX_ATTRS 12
#define ST_SPAN_STR_MAX   80
#define ST_TRACE_QUEUE    4096

/* OTLP's SpanKind values. */
enum { ST_SPAN_INTERNAL = 1, ST_SPAN_SERVER = 2 };

typedef struct st_trace_ctx {
    uint8_t trace_id[16];
    uint64_t span_id; /* the span children hang from; 0: not sampled */
} st_trace_ctx_t;

typedef struct st_span_attr {
    const char *key; /* a string literal */
    bool is_str;
    int64_t i;
    char s[ST_SPAN_STR_MAX];
} st_span_attr_t;

typedef struct st_span {
    uint8_t trace_id[16];
    uint64_t span_id;
    uint64_t parent_id; /* 0: a root */
    const char *name;   /* a string literal */
    int kind;           /* ST_SPAN_* */
    bool error;         /* its status: ERROR, else UNSET */
    int64_t start_ns, end_ns;
    int nattrs;
    st_span_attr_t attrs[ST_SPAN_MAX_ATTRS];
} st_span_t;

typedef struct st_trace_stats {
    uint64_t finished; /* spans put in the queue */
    uint64_t dropped;  /* spans lost: the queue was full, or their export failed */
    uint64_t exported; /* spans the collector accepted (st_trace_count_export) */
    uint64_t errors;   /* exports that failed (st_trace_count_export) */
} st_trace_stats_t;

/* The sampling threshold (0: off, UINT64_MAX: every request); read through st_trace_begin. */
extern _Atomic uint64_t st_trace_threshold_;

/* Samples `ratio` (0..1) of the requests from now on, with a queue of `capacity` spans (0:
 * ST_TRACE_QUEUE). 0, or -ENOMEM / -EINVAL. */
int st_trace_enable(double ratio, size_t capacity);
/* Stops sampling and frees the queue (no thread may be recording any more). */
void st_trace_disable(void);

void st_trace_sample_(st_trace_ctx_t *c);

/* The decision for a request just received: c->span_id is the root span's id when sampled,
 * else 0. */
static inline void st_trace_begin(st_trace_ctx_t *c)
{
    c->span_id = 0;
    if (atomic_load_explicit(&st_trace_threshold_, memory_order_relaxed))
        st_trace_sample_(c);
}

/* A fresh span id (never 0). */
uint64_t st_trace_new_id(void);
/* The context of a child of parent with id `id`: its spans hang from that child. */
st_trace_ctx_t st_trace_child(const st_trace_ctx_t *parent, uint64_t id);

/* A span of name `name` (a literal), id `id`, hanging from parent->span_id, of kind INTERNAL. */
void st_span_init(st_span_t *s, const st_trace_ctx_t *parent, uint64_t id, const char *name,
                  int64_t start_ns);
/* The root span of a sampled request: id c->span_id, no parent, kind SERVER. */
void st_span_root(st_span_t *s, const st_trace_ctx_t *c, const char *name, int64_t start_ns);
/* The context of s's children. */
st_trace_ctx_t st_span_ctx(const st_span_t *s);
/* Attributes; beyond ST_SPAN_MAX_ATTRS ignored. str takes len bytes (len < 0: strlen). */
void st_span_attr_int(st_span_t *s, const char *key, int64_t v);
void st_span_attr_str(st_span_t *s, const char *key, const char *v, int len);
/* Ends s at end_ns and queues a copy of it (full: counted as dropped). */
void st_span_end(st_span_t *s, int64_t end_ns);

/* Moves up to max of the oldest finished spans into out; returns how many. */
size_t st_trace_take(st_span_t *out, size_t max);
/* The exporter's results: n spans accepted (ok), or an export of n spans failed (!ok: one
 * error, n spans dropped). */
void st_trace_count_export(size_t n, bool ok);
void st_trace_stats(st_trace_stats_t *out);
/* st_mono_ns() time t as nanoseconds since the Unix epoch. */
int64_t st_trace_unix_ns(int64_t t);

#endif
