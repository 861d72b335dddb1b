/* trace.c — sampling, span records and the queue of finished spans (trace.h). */
#include "base/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/clock.h"

_Atomic uint64_t st_trace_threshold_;

/* The queue: a ring of cap spans, [head, head + len) finished and not taken yet. */
static struct {
    pthread_mutex_t mu;
    st_span_t *ring;
    size_t cap, head, len;
    int64_t unix_minus_mono; /* Unix time minus st_mono_ns(), read at st_trace_enable */
} q = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Atomic uint64_t n_finished, n_dropped, n_exported, n_errors;

/* splitmix64, per thread, seeded once from the OS (or the clock and the thread) */
static _Thread_local uint64_t rng_state;
static _Thread_local bool rng_seeded;

static uint64_t rng_next(void)
{
    if (!rng_seeded) {
        if (getrandom(&rng_state, sizeof rng_state, GRND_NONBLOCK) != (ssize_t)sizeof rng_state)
            rng_state = (uint64_t)st_mono_ns() ^ (uint64_t)(uintptr_t)&rng_state;
        rng_seeded = true;
    }
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int st_trace_enable(double ratio, size_t capacity)
{
    if (!(ratio >= 0 && ratio <= 1))
        return -EINVAL;
    if (capacity == 0)
        capacity = ST_TRACE_QUEUE;
    st_span_t *ring = calloc(capacity, sizeof *ring);
    if (!ring)
        return -ENOMEM;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t unix_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    pthread_mutex_lock(&q.mu);
    free(q.ring);
    q.ring = ring;
    q.cap = capacity;
    q.head = q.len = 0;
    q.unix_minus_mono = unix_ns - st_mono_ns();
    pthread_mutex_unlock(&q.mu);
    uint64_t th = ratio >= 1 ? UINT64_MAX : (uint64_t)(ratio * 18446744073709551616.0);
    atomic_store(&st_trace_threshold_, th);
    return 0;
}

void st_trace_disable(void)
{
    atomic_store(&st_trace_threshold_, 0);
    pthread_mutex_lock(&q.mu);
    free(q.ring);
    q.ring = NULL;
    q.cap = q.head = q.len = 0;
    pthread_mutex_unlock(&q.mu);
}

uint64_t st_trace_new_id(void)
{
    uint64_t id;
    while ((id = rng_next()) == 0)
        ;
    return id;
}

void st_trace_sample_(st_trace_ctx_t *c)
{
    uint64_t th = atomic_load_explicit(&st_trace_threshold_, memory_order_relaxed);
    if (th != UINT64_MAX && rng_next() >= th)
        return;
    uint64_t hi = st_trace_new_id(), lo = rng_next();
    memcpy(c->trace_id, &hi, 8);
    memcpy(c->trace_id + 8, &lo, 8);
    c->span_id = st_trace_new_id();
}

st_trace_ctx_t st_trace_child(const st_trace_ctx_t *parent, uint64_t id)
{
    st_trace_ctx_t c;
    memcpy(c.trace_id, parent->trace_id, 16);
    c.span_id = id;
    return c;
}

void st_span_init(st_span_t *s, const st_trace_ctx_t *parent, uint64_t id, const char *name,
                  int64_t start_ns)
{
    memcpy(s->trace_id, parent->trace_id, 16);
    s->span_id = id;
    s->parent_id = parent->span_id;
    s->name = name;
    s->kind = ST_SPAN_INTERNAL;
    s->error = false;
    s->start_ns = start_ns;
    s->end_ns = start_ns;
    s->nattrs = 0;
}

void st_span_root(st_span_t *s, const st_trace_ctx_t *c, const char *name, int64_t start_ns)
{
    st_span_init(s, c, c->span_id, name, start_ns);
    s->parent_id = 0;
    s->kind = ST_SPAN_SERVER;
}

st_trace_ctx_t st_span_ctx(const st_span_t *s)
{
    st_trace_ctx_t c;
    memcpy(c.trace_id, s->trace_id, 16);
    c.span_id = s->span_id;
    return c;
}

void st_span_attr_int(st_span_t *s, const char *key, int64_t v)
{
    if (s->nattrs >= ST_SPAN_MAX_ATTRS)
        return;
    st_span_attr_t *a = &s->attrs[s->nattrs++];
    a->key = key;
    a->is_str = false;
    a->i = v;
}

void st_span_attr_str(st_span_t *s, const char *key, const char *v, int len)
{
    if (s->nattrs >= ST_SPAN_MAX_ATTRS)
        return;
    st_span_attr_t *a = &s->attrs[s->nattrs++];
    a->key = key;
    a->is_str = true;
    size_t n = !v ? 0 : len < 0 ? strlen(v) : (size_t)len;
    if (n > sizeof a->s - 1)
        n = sizeof a->s - 1;
    for (size_t i = 0; i < n; i++)
        a->s[i] = v[i] >= 0x20 && v[i] < 0x7f ? v[i] : '?';
    a->s[n] = 0;
}

void st_span_end(st_span_t *s, int64_t end_ns)
{
    s->end_ns = end_ns < s->start_ns ? s->start_ns : end_ns;
    pthread_mutex_lock(&q.mu);
    bool room = q.len < q.cap;
    if (room) {
        q.ring[(q.head + q.len) % q.cap] = *s;
        q.len++;
    }
    pthread_mutex_unlock(&q.mu);
    atomic_fetch_add_explicit(room ? &n_finished : &n_dropped, 1, memory_order_relaxed);
}

size_t st_trace_take(st_span_t *out, size_t max)
{
    pthread_mutex_lock(&q.mu);
    size_t n = q.len < max ? q.len : max;
    for (size_t i = 0; i < n; i++)
        out[i] = q.ring[(q.head + i) % q.cap];
    if (n) {
        q.head = (q.head + n) % q.cap;
        q.len -= n;
    }
    pthread_mutex_unlock(&q.mu);
    return n;
}

void st_trace_count_export(size_t n, bool ok)
{
    if (ok) {
        atomic_fetch_add_explicit(&n_exported, n, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&n_errors, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&n_dropped, n, memory_order_relaxed);
    }
}

void st_trace_stats(st_trace_stats_t *out)
{
    out->finished = atomic_load_explicit(&n_finished, memory_order_relaxed);
    out->dropped = atomic_load_explicit(&n_dropped, memory_order_relaxed);
    out->exported = atomic_load_explicit(&n_exported, memory_order_relaxed);
    out->errors = atomic_load_explicit(&n_errors, memory_order_relaxed);
}

int64_t st_trace_unix_ns(int64_t t)
{
    return t + q.unix_minus_mono;
}
