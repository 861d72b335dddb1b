/*
 * stats.h — a shard's request, fsync, append and quota counters, and the latency buckets they
 * share.
 *
 * Threads: written by the shard that owns them (relaxed atomics), read by the admin thread
 * without locks.
 */
#ifndef ST_BROKER_STATS_H
#define ST_BROKER_STATS_H

#include <stdatomic.h>
#include <stdint.h>

/* Latency histogram buckets shared by request and fsync latencies: upper bounds in ns
 * (st_kstats_bounds_ns), then one overflow bucket (+Inf). Buckets are not cumulative. */
#define ST_KSTATS_BUCKETS 17
#define ST_KSTATS_NAPIS   64  /* api keys with errors broken down by code */
#define ST_KSTATS_NCODES  132 /* Kafka error codes -1..130, at code + 1 */
extern const int64_t st_kstats_bounds_ns[ST_KSTATS_BUCKETS];
/* The bucket of a latency: 0..ST_KSTATS_BUCKETS (the last is +Inf). */
int st_kstats_bucket(int64_t ns);

/* Per-shard counters, written by the shard, read by the admin thread without locks. */
typedef struct st_kshard_stats {
    _Atomic uint64_t requests[128];
    _Atomic uint64_t request_errors[128];
    _Atomic uint64_t request_ns[128];
    _Atomic uint64_t request_latency[128][ST_KSTATS_BUCKETS + 1];
    _Atomic uint64_t request_error_codes[ST_KSTATS_NAPIS][ST_KSTATS_NCODES];
    _Atomic uint64_t fsyncs, fsync_errors, fsync_ns; /* completed fdatasyncs */
    _Atomic uint64_t fsync_latency[ST_KSTATS_BUCKETS + 1];
    _Atomic uint64_t appends, append_bytes; /* successful log appends (one per partition) */
    /* client quotas (kafka/throttle.h): responses throttled and their throttle time, by type
     * (0 produce, 1 fetch) */
    _Atomic uint64_t quota_throttled[2], quota_throttle_ms[2];
    /* legacy message formats (storage/msgconv.h): Produce v0-2 messages converted to records;
     * Fetch v0-3 down-conversions: records and bytes written, time spent converting */
    _Atomic uint64_t upconv_records, downconv_records, downconv_bytes, downconv_ns;
    /* SASL (kafka/h_sasl.c): exchanges that authenticated a connection (re-authentications
     * included) and that failed, re-authentications (KIP-368), and connections closed because
     * their session expired without one */
    _Atomic uint64_t sasl_auth_ok, sasl_auth_failed, sasl_reauth, sasl_expired;
} st_kshard_stats_t;

/* Counts one successful log append of `bytes` bytes (Produce), for metrics. */
static inline void st_kstats_appended(st_kshard_stats_t *s, uint64_t bytes)
{
    atomic_fetch_add_explicit(&s->appends, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->append_bytes, bytes, memory_order_relaxed);
}

#endif
