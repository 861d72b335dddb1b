/* render.c — /metrics and the JSON endpoints, from a view (render.h). */
#include "admin/render.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/prom.h"
#include "base/trace.h"
#include "cluster/hb_sec.h"
#include "cluster/tls_transport.h"
#include "proto/kerr.h"
#include "proto/kafka_gen.h"
#include "txn/records.h"

/* ---- helpers ---------------------------------------------------------------------------- */

const st_md_t *st_admin_view_md(const st_admin_view_t *v)
{
    const st_md_t *best = NULL;
    for (int i = 0; i < v->nshards; i++) {
        const st_admin_snap_t *s = v->snaps[i];
        if (s && s->md && (!best || s->md->version > best->version))
            best = s->md;
    }
    return best;
}

static uint64_t ld(const _Atomic uint64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static const char *api_name(int k)
{
    const st_kp_api_t *a = st_kp_api_find((int16_t)k);
    return a ? a->name : NULL;
}

static int part_cmp(const void *a, const void *b)
{
    const st_admin_part_t *x = *(st_admin_part_t *const *)a, *y = *(st_admin_part_t *const *)b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* Every partition row of every snapshot, sorted by (topic, partition). Caller frees. */
static st_admin_part_t **all_parts(const st_admin_view_t *v, int *n)
{
    int total = 0;
    for (int i = 0; i < v->nshards; i++)
        if (v->snaps[i])
            total += v->snaps[i]->nparts;
    st_admin_part_t **a = malloc((size_t)(total ? total : 1) * sizeof *a);
    if (!a)
        return NULL;
    int k = 0;
    for (int i = 0; i < v->nshards; i++)
        if (v->snaps[i])
            for (int j = 0; j < v->snaps[i]->nparts; j++)
                a[k++] = &v->snaps[i]->parts[j];
    qsort(a, (size_t)k, sizeof *a, part_cmp);
    *n = k;
    return a;
}

static const st_admin_part_t *find_part(st_admin_part_t *const *a, int n, const char *topic,
                                        int32_t partition)
{
    st_admin_part_t key = {.topic = topic, .partition = partition};
    const st_admin_part_t *kp = &key;
    st_admin_part_t *const *r = bsearch(&kp, a, (size_t)n, sizeof *a, part_cmp);
    return r ? *r : NULL;
}

/* The latency bucket bounds in seconds. */
static void bounds_seconds(double out[ST_KSTATS_BUCKETS])
{
    for (int i = 0; i < ST_KSTATS_BUCKETS; i++)
        out[i] = (double)st_kstats_bounds_ns[i] / 1e9;
}

/* ---- /metrics --------------------------------------------------------------------------- */

static void process_metrics(st_prom_t *p, const st_admin_view_t *v)
{
    st_prom_label_t ver[] = {{"version", v->version}};
    st_prom_family(p, "strata_build_info", "gauge", "Always 1; the version in a label.");
    st_prom_sample(p, "", ver, 1, 1);
    st_prom_family(p, "strata_ready", "gauge",
                   "1 once start-up recovery is done and the Kafka port serves.");
    st_prom_sample(p, "", NULL, 0, v->ready);
    st_prom_family(p, "strata_process_start_time_seconds", "gauge",
                   "Unix time the process started.");
    st_prom_sample(p, "", NULL, 0, v->start_time_seconds);
    st_prom_family(p, "strata_uptime_seconds", "gauge", "Seconds since the process started.");
    st_prom_sample(p, "", NULL, 0, v->uptime_seconds);
    if (v->rss_bytes >= 0) {
        st_prom_family(p, "strata_process_resident_memory_bytes", "gauge", "Resident set size.");
        st_prom_sample(p, "", NULL, 0, (double)v->rss_bytes);
    }
    if (v->open_fds >= 0) {
        st_prom_family(p, "strata_process_open_fds", "gauge", "Open file descriptors.");
        st_prom_sample(p, "", NULL, 0, (double)v->open_fds);
    }
    if (v->max_fds >= 0) {
        st_prom_family(p, "strata_process_max_fds", "gauge", "Limit on open file descriptors.");
        st_prom_sample(p, "", NULL, 0, (double)v->max_fds);
    }
    if (v->recovery_seconds >= 0) {
        st_prom_family(p, "strata_storage_recovery_seconds", "gauge",
                       "Seconds start-up took to open (and recover) every partition log and "
                       "start serving.");
        st_prom_sample(p, "", NULL, 0, v->recovery_seconds);
    }
}

static void request_metrics(st_prom_t *p, const st_admin_view_t *v)
{
    /* Sum the shards' counters per API. API keys without a name (never implemented) count
     * together under api="unknown". */
    enum { NK = 128 };
    uint64_t req[NK + 1] = {0};
    double secs[NK + 1] = {0};
    uint64_t lat[NK + 1][ST_KSTATS_BUCKETS + 1];
    memset(lat, 0, sizeof lat);
    double bounds_s[ST_KSTATS_BUCKETS];
    bounds_seconds(bounds_s);
    bool any_stats = false;
    for (int i = 0; i < v->nshards; i++) {
        const st_kshard_stats_t *s = v->live[i].stats;
        if (!s)
            continue;
        any_stats = true;
        for (int k = 0; k < NK; k++) {
            int slot = api_name(k) ? k : NK;
            req[slot] += ld(&s->requests[k]);
            secs[slot] += (double)ld(&s->request_ns[k]) / 1e9;
            for (int b = 0; b <= ST_KSTATS_BUCKETS; b++)
                lat[slot][b] += ld(&s->request_latency[k][b]);
        }
    }
    if (!any_stats)
        return;
    st_prom_family(p, "strata_kafka_requests_total", "counter", "Kafka requests handled, by API.");
    for (int k = 0; k <= NK; k++) {
        if (k < NK && !api_name(k))
            continue;
        if (k == NK && !req[k])
            continue;
        st_prom_label_t l[] = {{"api", k < NK ? api_name(k) : "unknown"}};
        st_prom_sample_u64(p, "", l, 1, req[k]);
    }
    st_prom_family(p, "strata_kafka_request_errors_total", "counter",
                   "Kafka requests answered with a top-level error (or that closed the "
                   "connection: code -1), by API and error code.");
    for (int k = 0; k < ST_KSTATS_NAPIS && k < NK; k++) {
        if (!api_name(k))
            continue;
        for (int c = 0; c < ST_KSTATS_NCODES; c++) {
            uint64_t n = 0;
            for (int i = 0; i < v->nshards; i++)
                if (v->live[i].stats)
                    n += ld(&v->live[i].stats->request_error_codes[k][c]);
            if (!n)
                continue;
            char code[16];
            snprintf(code, sizeof code, "%d", c - 1);
            st_prom_label_t l[] = {
                {"api", api_name(k)}, {"code", code}, {"error", st_kerr_name((int16_t)(c - 1))}};
            st_prom_sample_u64(p, "", l, 3, n);
        }
    }
    st_prom_family(p, "strata_kafka_request_duration_seconds", "histogram",
                   "Time from a request's arrival to its response being queued, by API.");
    for (int k = 0; k <= NK; k++) {
        if ((k < NK && !api_name(k)) || (k == NK && !req[k]))
            continue;
        st_prom_label_t l[] = {{"api", k < NK ? api_name(k) : "unknown"}};
        st_prom_histogram(p, l, 1, bounds_s, lat[k], ST_KSTATS_BUCKETS, secs[k]);
    }
}

/* One counter or gauge family with one sample per shard. */
typedef uint64_t (*shard_fig_fn)(const st_admin_view_t *v, int i);

/* Which shards a per-shard family samples. */
typedef enum {
    SHARD_LIVE,    /* those with live counters */
    SHARD_SNAP,    /* those with a published snapshot */
    SHARD_JOURNAL, /* those whose snapshot has a journal (storage/journal.h) */
    SHARD_TXN,     /* those with a transaction coordinator (txn/coord.h) */
} shard_set_t;

static bool shard_in(const st_admin_view_t *v, int i, shard_set_t set)
{
    switch (set) {
    case SHARD_LIVE:
        return v->live[i].stats != NULL;
    case SHARD_SNAP:
        return v->snaps[i] != NULL;
    case SHARD_JOURNAL:
        return v->snaps[i] && v->snaps[i]->journal;
    case SHARD_TXN:
        return v->snaps[i] && v->snaps[i]->txn;
    }
    return false;
}

static void per_shard(st_prom_t *p, const st_admin_view_t *v, const char *name, const char *type,
                      const char *help, shard_fig_fn fn, shard_set_t set)
{
    st_prom_family(p, name, type, help);
    for (int i = 0; i < v->nshards; i++) {
        if (!shard_in(v, i, set))
            continue;
        char sh[16];
        snprintf(sh, sizeof sh, "%d", i);
        st_prom_label_t l[] = {{"shard", sh}};
        st_prom_sample_u64(p, "", l, 1, fn(v, i));
    }
}

#define SNAP_FIG(fname, field)                                                                     \
    static uint64_t fname(const st_admin_view_t *v, int i)                                         \
    {                                                                                              \
        return (uint64_t)v->snaps[i]->field;                                                       \
    }
#define STAT_FIG(fname, field)                                                                     \
    static uint64_t fname(const st_admin_view_t *v, int i)                                         \
    {                                                                                              \
        return ld(&v->live[i].stats->field);                                                       \
    }
/* Client quotas (kafka/throttle.h): per shard and type, the responses that carried a throttle
 * time and the sum of those times. */
static void quota_metrics(st_prom_t *p, const st_admin_view_t *v)
{
    static const char *const types[2] = {"produce", "fetch"};
    for (int m = 0; m < 2; m++) {
        st_prom_family(p,
                       m ? "strata_quota_throttle_seconds_total" : "strata_quota_throttled_total",
                       "counter",
                       m ? "Throttle time given to clients above a client quota."
                         : "Responses throttled because the client was above a client quota.");
        for (int i = 0; i < v->nshards; i++) {
            if (!shard_in(v, i, SHARD_LIVE))
                continue;
            char sh[16];
            snprintf(sh, sizeof sh, "%d", i);
            for (int t = 0; t < 2; t++) {
                st_prom_label_t l[] = {{"shard", sh}, {"type", types[t]}};
                const st_kshard_stats_t *s = v->live[i].stats;
                if (m) /* seconds, Prometheus's unit (promtool refuses _ms names) */
                    st_prom_sample(p, "", l, 2, (double)ld(&s->quota_throttle_ms[t]) / 1000.0);
                else
                    st_prom_sample_u64(p, "", l, 2, ld(&s->quota_throttled[t]));
            }
        }
    }
}

/* SASL: authentications by result, re-authentications, expired sessions (kafka/h_sasl.c). */
static void sasl_metrics(st_prom_t *p, const st_admin_view_t *v)
{
    static const struct {
        const char *name, *help;
    } fam[] = {
        {"strata_sasl_authentications_total",
         "SASL exchanges that authenticated a connection (result=success, re-authentications "
         "included) or failed (result=failure)."},
        {"strata_sasl_reauthentications_total",
         "KIP-368 re-authentications completed on open connections."},
        {"strata_sasl_sessions_expired_total",
         "Connections closed because their SASL session (connections.max.reauth.ms, an "
         "OAUTHBEARER token's expiry) ended without re-authentication."},
    };
    for (int f = 0; f < 3; f++) {
        st_prom_family(p, fam[f].name, "counter", fam[f].help);
        for (int i = 0; i < v->nshards; i++) {
            if (!shard_in(v, i, SHARD_LIVE))
                continue;
            char sh[16];
            snprintf(sh, sizeof sh, "%d", i);
            const st_kshard_stats_t *s = v->live[i].stats;
            if (f == 0) {
                st_prom_label_t ok[] = {{"shard", sh}, {"result", "success"}};
                st_prom_label_t no[] = {{"shard", sh}, {"result", "failure"}};
                st_prom_sample_u64(p, "", ok, 2, ld(&s->sasl_auth_ok));
                st_prom_sample_u64(p, "", no, 2, ld(&s->sasl_auth_failed));
            } else {
                st_prom_label_t l[] = {{"shard", sh}};
                st_prom_sample_u64(p, "", l, 1, ld(f == 1 ? &s->sasl_reauth : &s->sasl_expired));
            }
        }
    }
}

SNAP_FIG(f_conns, connections)
SNAP_FIG(f_accepted, accepted)
SNAP_FIG(f_closed, closed)
SNAP_FIG(f_net_in, net_bytes_in)
SNAP_FIG(f_net_out, net_bytes_out)
SNAP_FIG(f_too_large, frames_too_large)
SNAP_FIG(f_slow, slow_tasks)
SNAP_FIG(f_nparts, nparts)
STAT_FIG(f_appends, appends)
STAT_FIG(f_append_bytes, append_bytes)
STAT_FIG(f_fsyncs, fsyncs)
STAT_FIG(f_upconv_records, upconv_records)
STAT_FIG(f_downconv_records, downconv_records)
STAT_FIG(f_downconv_bytes, downconv_bytes)
STAT_FIG(f_fsync_errors, fsync_errors)

static uint64_t f_sent(const st_admin_view_t *v, int i)
{
    return v->live[i].mesh_sent;
}
static uint64_t f_received(const st_admin_view_t *v, int i)
{
    return v->live[i].mesh_received;
}
static uint64_t f_ring(const st_admin_view_t *v, int i)
{
    return v->live[i].ring_occupancy;
}

SNAP_FIG(f_j_rounds, journal_rounds)
SNAP_FIG(f_j_round_logs, journal_round_logs)
SNAP_FIG(f_j_entries, journal_entries)
SNAP_FIG(f_j_fallbacks, journal_fallbacks)
SNAP_FIG(f_j_used, journal_used)
SNAP_FIG(f_j_capacity, journal_capacity)

static void journal_metrics(st_prom_t *p, const st_admin_view_t *v)
{
    bool any = false;
    for (int i = 0; i < v->nshards; i++)
        any |= shard_in(v, i, SHARD_JOURNAL);
    if (!any)
        return;
    per_shard(p, v, "strata_journal_rounds_total", "counter",
              "Journal rounds: fdatasyncs of the shard's journal, each making every append "
              "journaled before it durable.",
              f_j_rounds, SHARD_JOURNAL);
    per_shard(p, v, "strata_journal_round_logs_total", "counter",
              "Partition logs the journal rounds covered, summed (logs per round: divide by "
              "strata_journal_rounds_total; each would be an fdatasync without the journal).",
              f_j_round_logs, SHARD_JOURNAL);
    per_shard(p, v, "strata_journal_entries_total", "counter",
              "Entries written to the journal (appends and truncations).", f_j_entries,
              SHARD_JOURNAL);
    per_shard(p, v, "strata_journal_fallbacks_total", "counter",
              "Appends not journaled (journal full or off): their logs synced their own "
              "files until a per-file round covered them.",
              f_j_fallbacks, SHARD_JOURNAL);
    per_shard(p, v, "strata_journal_used_bytes", "gauge",
              "Journal bytes still needed for replay (from the durable tail to the head).",
              f_j_used, SHARD_JOURNAL);
    per_shard(p, v, "strata_journal_capacity_bytes", "gauge",
              "Size of the journal's data area (log.journal.bytes).", f_j_capacity, SHARD_JOURNAL);
}

SNAP_FIG(f_t_partitions, txn_stats.partitions)
SNAP_FIG(f_t_timed_out, txn_stats.timed_out)
SNAP_FIG(f_t_retried, txn_stats.markers_retried)

/* The transaction coordinators: one sample per shard (and state, and result). */
static void txn_metrics(st_prom_t *p, const st_admin_view_t *v)
{
    per_shard(p, v, "strata_txn_coordinator_partitions", "gauge",
              "__transaction_state partitions this shard coordinates (led here and loaded).",
              f_t_partitions, SHARD_TXN);
    st_prom_family(p, "strata_txn_coordinator_transactional_ids", "gauge",
                   "Transactional ids the shard's coordinator holds, by state (Ongoing: a "
                   "transaction open; Prepare*: its markers being written).");
    for (int i = 0; i < v->nshards; i++) {
        if (!shard_in(v, i, SHARD_TXN))
            continue;
        char sh[16];
        snprintf(sh, sizeof sh, "%d", i);
        for (int st = 0; st < ST_TXN_NSTATES; st++) {
            if (st == ST_TXN_DEAD || st == ST_TXN_PREPARE_EPOCH_FENCE)
                continue; /* never held (Dead is forgotten, the fence a pending state) */
            st_prom_label_t l[] = {{"shard", sh}, {"state", st_txn_state_name(st)}};
            st_prom_sample(p, "", l, 2, v->snaps[i]->txn_stats.ids[st]);
        }
    }
    st_prom_family(p, "strata_txn_coordinator_transactions_total", "counter",
                   "Transactions the shard's coordinator completed (CompleteCommit or "
                   "CompleteAbort durable), by result.");
    for (int i = 0; i < v->nshards; i++) {
        if (!shard_in(v, i, SHARD_TXN))
            continue;
        char sh[16];
        snprintf(sh, sizeof sh, "%d", i);
        st_prom_label_t c[] = {{"shard", sh}, {"result", "commit"}};
        st_prom_sample_u64(p, "", c, 2, v->snaps[i]->txn_stats.committed);
        st_prom_label_t a[] = {{"shard", sh}, {"result", "abort"}};
        st_prom_sample_u64(p, "", a, 2, v->snaps[i]->txn_stats.aborted);
    }
    per_shard(p, v, "strata_txn_coordinator_timed_out_total", "counter",
              "Ongoing transactions the coordinator aborted past transaction.timeout.ms (their "
              "producer fenced).",
              f_t_timed_out, SHARD_TXN);
    per_shard(p, v, "strata_txn_coordinator_marker_retries_total", "counter",
              "Marker jobs sent again at a tick because a partition's leader did not take "
              "them (not the leader, not enough replicas, unreachable).",
              f_t_retried, SHARD_TXN);
}

static void shard_metrics(st_prom_t *p, const st_admin_view_t *v)
{
    per_shard(p, v, "strata_kafka_connections", "gauge", "Open Kafka connections.", f_conns,
              SHARD_SNAP);
    per_shard(p, v, "strata_kafka_connections_accepted_total", "counter",
              "Kafka connections accepted.", f_accepted, SHARD_SNAP);
    per_shard(p, v, "strata_kafka_connections_closed_total", "counter", "Kafka connections closed.",
              f_closed, SHARD_SNAP);
    per_shard(p, v, "strata_kafka_received_bytes_total", "counter",
              "Bytes read from Kafka connections.", f_net_in, SHARD_SNAP);
    per_shard(p, v, "strata_kafka_sent_bytes_total", "counter",
              "Bytes written to Kafka connections.", f_net_out, SHARD_SNAP);
    per_shard(p, v, "strata_kafka_frames_too_large_total", "counter",
              "Request frames refused for exceeding socket.request.max.bytes.", f_too_large,
              SHARD_SNAP);
    per_shard(p, v, "strata_shard_partitions", "gauge", "Partitions owned by the shard.", f_nparts,
              SHARD_SNAP);
    per_shard(p, v, "strata_shard_slow_tasks_total", "counter",
              "Event-loop callbacks that ran longer than 500 microseconds.", f_slow, SHARD_SNAP);
    per_shard(p, v, "strata_shard_mesh_sent_total", "counter",
              "Cross-shard messages sent by the shard.", f_sent, SHARD_LIVE);
    per_shard(p, v, "strata_shard_mesh_received_total", "counter",
              "Cross-shard messages received by the shard.", f_received, SHARD_LIVE);
    per_shard(p, v, "strata_shard_ring_occupancy", "gauge",
              "Cross-shard messages waiting in the shard's incoming rings.", f_ring, SHARD_LIVE);

    st_prom_family(p, "strata_shard_busy_ratio", "gauge",
                   "Share of wall time the shard's event loop spent running callbacks, over "
                   "the last snapshot interval (0..1).");
    for (int i = 0; i < v->nshards; i++) {
        if (!v->snaps[i])
            continue;
        char sh[16];
        snprintf(sh, sizeof sh, "%d", i);
        st_prom_label_t l[] = {{"shard", sh}};
        st_prom_sample(p, "", l, 1, v->snaps[i]->busy_ratio);
    }
    st_prom_family(p, "strata_shard_busy_seconds_total", "counter",
                   "Seconds the shard's event loop spent running callbacks.");
    for (int i = 0; i < v->nshards; i++) {
        if (!v->snaps[i])
            continue;
        char sh[16];
        snprintf(sh, sizeof sh, "%d", i);
        st_prom_label_t l[] = {{"shard", sh}};
        st_prom_sample(p, "", l, 1, (double)v->snaps[i]->busy_ns / 1e9);
    }
    st_prom_family(p, "strata_shard_loop_iteration_seconds", "histogram",
                   "Busy time of each event-loop iteration: from the wait returning to the next "
                   "wait (everything else on the shard waits this long; idle time and wake-up "
                   "delay are not counted).");
    double iter_bounds_s[ST_LOOP_ITER_BUCKETS];
    for (int b = 0; b < ST_LOOP_ITER_BUCKETS; b++)
        iter_bounds_s[b] = (double)st_loop_iter_bounds_ns[b] / 1e9;
    for (int i = 0; i < v->nshards; i++) {
        if (!v->snaps[i])
            continue;
        char sh[16];
        snprintf(sh, sizeof sh, "%d", i);
        st_prom_label_t l[] = {{"shard", sh}};
        st_prom_histogram(p, l, 1, iter_bounds_s, v->snaps[i]->loop_iter, ST_LOOP_ITER_BUCKETS,
                          (double)v->snaps[i]->loop_iter_sum_ns / 1e9);
    }
    journal_metrics(p, v);
    txn_metrics(p, v);
    st_prom_family(p, "strata_shard_snapshot_age_seconds", "gauge",
                   "Age of the shard's published metrics snapshot (partition, group, loop and "
                   "connection figures lag by this much).");
    for (int i = 0; i < v->nshards; i++) {
        if (!v->snaps[i])
            continue;
        char sh[16];
        snprintf(sh, sizeof sh, "%d", i);
        st_prom_label_t l[] = {{"shard", sh}};
        st_prom_sample(p, "", l, 1, (double)(v->now_ns - v->snaps[i]->taken_ns) / 1e9);
    }

    bool any_stats = false;
    for (int i = 0; i < v->nshards; i++)
        any_stats |= v->live[i].stats != NULL;
    if (!any_stats)
        return;
    per_shard(p, v, "strata_storage_appends_total", "counter",
              "Successful partition log appends (one per partition per Produce).", f_appends,
              SHARD_LIVE);
    per_shard(p, v, "strata_storage_written_bytes_total", "counter",
              "Record batch bytes appended to partition logs.", f_append_bytes, SHARD_LIVE);
    per_shard(p, v, "strata_storage_fsyncs_total", "counter",
              "fdatasync calls completed on partition files.", f_fsyncs, SHARD_LIVE);
    per_shard(p, v, "strata_storage_fsync_errors_total", "counter", "fdatasync calls that failed.",
              f_fsync_errors, SHARD_LIVE);
    quota_metrics(p, v);
    per_shard(
        p, v, "strata_produce_upconverted_records_total", "counter",
        "Messages of Produce v0-2 (message format v0/v1) converted to RecordBatch v2 records.",
        f_upconv_records, SHARD_LIVE);
    per_shard(p, v, "strata_fetch_downconverted_records_total", "counter",
              "Records converted down to message format v0/v1 for Fetch v0-3.", f_downconv_records,
              SHARD_LIVE);
    per_shard(p, v, "strata_fetch_downconverted_bytes_total", "counter",
              "Bytes of message format v0/v1 written by down-conversion for Fetch v0-3.",
              f_downconv_bytes, SHARD_LIVE);
    st_prom_family(p, "strata_fetch_downconversion_seconds_total", "counter",
                   "Time spent reading and converting records down for Fetch v0-3.");
    for (int i = 0; i < v->nshards; i++) {
        if (!shard_in(v, i, SHARD_LIVE))
            continue;
        char sh[16];
        snprintf(sh, sizeof sh, "%d", i);
        st_prom_label_t l[] = {{"shard", sh}};
        st_prom_sample(p, "", l, 1, (double)ld(&v->live[i].stats->downconv_ns) / 1e9);
    }
    sasl_metrics(p, v);
    double bounds_s[ST_KSTATS_BUCKETS];
    bounds_seconds(bounds_s);
    st_prom_family(p, "strata_storage_fsync_duration_seconds", "histogram",
                   "Time from submitting an fdatasync to its completion.");
    for (int i = 0; i < v->nshards; i++) {
        const st_kshard_stats_t *s = v->live[i].stats;
        if (!s)
            continue;
        uint64_t c[ST_KSTATS_BUCKETS + 1];
        for (int b = 0; b <= ST_KSTATS_BUCKETS; b++)
            c[b] = ld(&s->fsync_latency[b]);
        char sh[16];
        snprintf(sh, sizeof sh, "%d", i);
        st_prom_label_t l[] = {{"shard", sh}};
        st_prom_histogram(p, l, 1, bounds_s, c, ST_KSTATS_BUCKETS, (double)ld(&s->fsync_ns) / 1e9);
    }
}

typedef struct {
    const char *name, *type, *help;
    int field;
    int only; /* PO_*: which partitions have the row */
} part_family_t;

enum {
    PO_ALL,
    PO_COMPACT, /* compacted partitions only (the log cleaner's) */
    PO_LEADS,   /* partitions this broker leads in a cluster (replication) */
};

enum {
    PF_REC_IN,
    PF_BYTES_IN,
    PF_REC_OUT,
    PF_BYTES_OUT,
    PF_LEO,
    PF_LSO,
    PF_HW,
    PF_STABLE,
    PF_STABLE_LAG,
    PF_TXNS,
    PF_TXN_AGE,
    PF_SIZE,
    PF_SEGS,
    PF_OFFLINE,
    PF_DIRTY,
    PF_CLEANING,
    PF_LAST_CLEAN,
    PF_CLEANS,
    PF_CLEAN_READ,
    PF_RECLAIMED,
    PF_REMOVED,
    PF_UNDER_REPLICATED,
    PF_ISR,
    PF_FOLLOWER_LAG
};

static const part_family_t part_families[] = {
    {"strata_partition_produced_records_total", "counter", "Records appended by producers.",
     PF_REC_IN, PO_ALL},
    {"strata_partition_produced_bytes_total", "counter",
     "Record batch bytes appended by producers.", PF_BYTES_IN, PO_ALL},
    {"strata_partition_fetched_records_total", "counter",
     "Records sent to consumers and followers (whole batches, so it can exceed what was asked).",
     PF_REC_OUT, PO_ALL},
    {"strata_partition_fetched_bytes_total", "counter", "Record batch bytes sent by Fetch.",
     PF_BYTES_OUT, PO_ALL},
    {"strata_partition_log_end_offset", "gauge", "The next offset to be assigned.", PF_LEO, PO_ALL},
    {"strata_partition_log_start_offset", "gauge", "The first offset still in the log.", PF_LSO,
     false},
    {"strata_partition_high_watermark", "gauge", "The offset below which consumers may read.",
     PF_HW, PO_ALL},
    {"strata_partition_last_stable_offset", "gauge",
     "The offset below which read_committed consumers may read (the first offset of the oldest "
     "undecided transaction, or the high watermark).",
     PF_STABLE, PO_ALL},
    {"strata_partition_lso_lag", "gauge",
     "The high watermark minus the last stable offset: offsets read_committed consumers wait "
     "for while transactions are undecided.",
     PF_STABLE_LAG, PO_ALL},
    {"strata_partition_ongoing_transactions", "gauge", "Transactions ongoing in the partition.",
     PF_TXNS, PO_ALL},
    {"strata_partition_oldest_transaction_age_seconds", "gauge",
     "How long the partition's oldest ongoing transaction has been open (0: none).", PF_TXN_AGE,
     PO_ALL},
    {"strata_partition_size_bytes", "gauge", "Bytes of the partition's segments on disk.", PF_SIZE,
     false},
    {"strata_partition_segments", "gauge", "Segments in the partition's log.", PF_SEGS, PO_ALL},
    {"strata_partition_offline", "gauge",
     "1 when the partition's log could not be opened (requests get KAFKA_STORAGE_ERROR).",
     PF_OFFLINE, PO_ALL},
    {"strata_partition_cleaner_dirty_ratio", "gauge",
     "Compacted partitions: bytes not yet cleaned over the bytes the cleaner may clean (closed "
     "segments older than min.compaction.lag.ms); a clean starts at min.cleanable.dirty.ratio.",
     PF_DIRTY, PO_COMPACT},
    {"strata_partition_cleaner_in_progress", "gauge", "1 while the partition is being cleaned.",
     PF_CLEANING, PO_COMPACT},
    {"strata_partition_cleaner_last_clean_timestamp_seconds", "gauge",
     "When the last clean of the partition finished (absent: none since it opened).", PF_LAST_CLEAN,
     true},
    {"strata_partition_cleaner_cleans_total", "counter",
     "Cleans of the partition finished since it opened.", PF_CLEANS, PO_COMPACT},
    {"strata_partition_cleaner_read_bytes_total", "counter",
     "Bytes read by the partition's finished cleans.", PF_CLEAN_READ, PO_COMPACT},
    {"strata_partition_cleaner_bytes_reclaimed_total", "counter",
     "Bytes read minus bytes written by the partition's finished cleans.", PF_RECLAIMED,
     PO_COMPACT},
    {"strata_partition_cleaner_records_removed_total", "counter",
     "Records the partition's finished cleans dropped (superseded, keyless, expired "
     "tombstones).",
     PF_REMOVED, PO_COMPACT},
    {"strata_partition_under_replicated", "gauge",
     "Partitions this broker leads: 1 while the ISR is smaller than the replica set (Kafka's "
     "UnderReplicatedPartitions, per partition).",
     PF_UNDER_REPLICATED, PO_LEADS},
    {"strata_partition_in_sync_replicas", "gauge",
     "Partitions this broker leads: the members of the ISR.", PF_ISR, PO_LEADS},
    {"strata_partition_max_follower_lag_offsets", "gauge",
     "Partitions this broker leads: how far (offsets) the farthest replica's last fetch is "
     "behind the leader's durable end; -1 while a replica has not fetched since this "
     "leadership began.",
     PF_FOLLOWER_LAG, PO_LEADS},
};

static double part_field(const st_admin_part_t *r, int f)
{
    switch (f) {
    case PF_REC_IN:
        return (double)r->records_in;
    case PF_BYTES_IN:
        return (double)r->bytes_in;
    case PF_REC_OUT:
        return (double)r->records_out;
    case PF_BYTES_OUT:
        return (double)r->bytes_out;
    case PF_LEO:
        return (double)r->log_end_offset;
    case PF_LSO:
        return (double)r->log_start_offset;
    case PF_HW:
        return (double)r->high_watermark;
    case PF_STABLE:
        return (double)r->last_stable_offset;
    case PF_STABLE_LAG:
        return (double)(r->high_watermark - r->last_stable_offset);
    case PF_TXNS:
        return r->ongoing_txns;
    case PF_TXN_AGE:
        return (double)r->oldest_txn_age_ms / 1000.0;
    case PF_SIZE:
        return (double)r->size_bytes;
    case PF_OFFLINE:
        return r->offline ? 1 : 0;
    case PF_DIRTY:
        return r->dirty_ratio;
    case PF_CLEANING:
        return r->cleaning ? 1 : 0;
    case PF_LAST_CLEAN:
        return (double)r->last_clean_ms / 1000;
    case PF_CLEANS:
        return (double)r->cleans;
    case PF_CLEAN_READ:
        return (double)r->clean_bytes_read;
    case PF_RECLAIMED:
        return (double)r->bytes_reclaimed;
    case PF_REMOVED:
        return (double)r->records_removed;
    case PF_UNDER_REPLICATED:
        return r->isr < r->replicas ? 1 : 0;
    case PF_ISR:
        return r->isr;
    case PF_FOLLOWER_LAG:
        return (double)r->max_follower_lag;
    default:
        return (double)r->segments;
    }
}

static void partition_metrics(st_prom_t *p, st_admin_part_t *const *a, int n)
{
    for (size_t f = 0; f < sizeof part_families / sizeof part_families[0]; f++) {
        const part_family_t *pf = &part_families[f];
        st_prom_family(p, pf->name, pf->type, pf->help);
        for (int i = 0; i < n; i++) {
            if (pf->only == PO_COMPACT &&
                (!a[i]->compact || (pf->field == PF_LAST_CLEAN && a[i]->last_clean_ms < 0)))
                continue;
            if (pf->only == PO_LEADS && !a[i]->leads)
                continue;
            char pa[16];
            snprintf(pa, sizeof pa, "%d", a[i]->partition);
            st_prom_label_t l[] = {{"topic", a[i]->topic}, {"partition", pa}};
            st_prom_sample(p, "", l, 2, part_field(a[i], pf->field));
        }
    }
}

/* One sample per committed offset of a group: the partition's high watermark (or last stable
 * offset) minus the committed offset, at least 0. */
static void group_lag(st_prom_t *p, const st_admin_view_t *v, st_admin_part_t *const *a, int n,
                      bool stable)
{
    for (int i = 0; i < v->nshards; i++)
        for (int j = 0; v->snaps[i] && j < v->snaps[i]->ngoffsets; j++) {
            const st_admin_goffset_t *o = &v->snaps[i]->goffsets[j];
            const st_admin_part_t *r = find_part(a, n, o->topic, o->partition);
            if (!r)
                continue;
            int64_t lag = (stable ? r->last_stable_offset : r->high_watermark) - o->committed;
            char pa[16];
            snprintf(pa, sizeof pa, "%d", o->partition);
            st_prom_label_t l[] = {{"group", o->group}, {"topic", o->topic}, {"partition", pa}};
            st_prom_sample(p, "", l, 3, (double)(lag > 0 ? lag : 0));
        }
}

static void group_metrics(st_prom_t *p, const st_admin_view_t *v, st_admin_part_t *const *a, int n)
{
    st_prom_family(p, "strata_group_members", "gauge", "Members of a consumer group.");
    for (int i = 0; i < v->nshards; i++)
        for (int j = 0; v->snaps[i] && j < v->snaps[i]->ngroups; j++) {
            const st_admin_group_t *g = &v->snaps[i]->groups[j];
            st_prom_label_t l[] = {{"group", g->group}};
            st_prom_sample(p, "", l, 1, g->members);
        }
    st_prom_family(p, "strata_group_state", "gauge",
                   "1 for a consumer group's current state (label state).");
    for (int i = 0; i < v->nshards; i++)
        for (int j = 0; v->snaps[i] && j < v->snaps[i]->ngroups; j++) {
            const st_admin_group_t *g = &v->snaps[i]->groups[j];
            st_prom_label_t l[] = {{"group", g->group}, {"state", g->state}};
            st_prom_sample(p, "", l, 2, 1);
        }
    st_prom_family(p, "strata_group_committed_offset", "gauge",
                   "A consumer group's committed offset for a partition.");
    for (int i = 0; i < v->nshards; i++)
        for (int j = 0; v->snaps[i] && j < v->snaps[i]->ngoffsets; j++) {
            const st_admin_goffset_t *o = &v->snaps[i]->goffsets[j];
            char pa[16];
            snprintf(pa, sizeof pa, "%d", o->partition);
            st_prom_label_t l[] = {{"group", o->group}, {"topic", o->topic}, {"partition", pa}};
            st_prom_sample(p, "", l, 3, (double)o->committed);
        }
    st_prom_family(p, "strata_group_lag", "gauge",
                   "Records between a group's committed offset and the partition's high "
                   "watermark (0 when caught up).");
    group_lag(p, v, a, n, false);
    st_prom_family(p, "strata_group_lag_read_committed", "gauge",
                   "Records between a group's committed offset and the partition's last stable "
                   "offset: the lag a read_committed consumer can close now (records of open "
                   "transactions not counted; 0 when caught up).");
    group_lag(p, v, a, n, true);
}

/* The metadata quorum and the brokers it knows (only in a cluster). */
static void cluster_metrics(st_prom_t *p, const st_admin_view_t *v)
{
    if (!v->clustered)
        return;
    st_prom_family(p, "strata_controller_active", "gauge",
                   "1 on the active controller (the metadata quorum's leader).");
    st_prom_sample(p, "", NULL, 0, v->qi.leader == v->node_id ? 1 : 0);
    st_prom_family(p, "strata_metadata_leader_id", "gauge",
                   "The active controller's node id as this node sees it (-1: none).");
    st_prom_sample(p, "", NULL, 0, v->qi.leader);
    st_prom_family(p, "strata_metadata_term", "gauge", "The metadata quorum's current Raft term.");
    st_prom_sample_u64(p, "", NULL, 0, v->qi.term);
    st_prom_family(p, "strata_metadata_applied_index", "gauge",
                   "The last metadata log index applied on this node.");
    st_prom_sample(p, "", NULL, 0, (double)v->qi.applied);
    st_prom_family(p, "strata_metadata_snapshot_index", "gauge",
                   "The log index of this node's last metadata snapshot (0: none yet).");
    st_prom_sample(p, "", NULL, 0, (double)v->qi.snapshot);
    st_prom_family(p, "strata_controller_tls_handshakes_total", "counter",
                   "TLS handshakes the metadata quorum's transport completed (an SSL "
                   "controller listener; 0 otherwise).");
    st_prom_sample_u64(p, "", NULL, 0, st_tls_transport_handshakes());
    st_prom_family(p, "strata_controller_tls_refused_total", "counter",
                   "Connections of the quorum's TLS transport refused at the handshake or "
                   "preamble: a certificate that failed the check, either side, or a peer "
                   "speaking no TLS.");
    st_prom_sample_u64(p, "", NULL, 0, st_tls_transport_refused());
    st_prom_family(p, "strata_controller_heartbeats_signed_total", "counter",
                   "Heartbeats this node signed (an SSL controller listener; 0 otherwise).");
    st_prom_sample_u64(p, "", NULL, 0, st_hb_sec_signed());
    st_prom_family(p, "strata_controller_heartbeat_refused_total", "counter",
                   "Heartbeat datagrams refused over an SSL controller listener, by reason: "
                   "unsigned, malformed, certificate, signature, stale, host, replay.");
    for (int r = ST_HB_UNSIGNED; r < ST_HB_NREFUSALS; r++) {
        st_prom_label_t l[] = {{"reason", st_hb_refusal_name((st_hb_refusal_t)r)}};
        st_prom_sample_u64(p, "", l, 1, st_hb_sec_refused((st_hb_refusal_t)r));
    }
    const st_md_t *md = st_admin_view_md(v);
    if (!md)
        return;
    int fenced = 0;
    for (int i = 0; i < md->nbrokers; i++)
        fenced += md->brokers[i].fenced;
    st_prom_family(p, "strata_cluster_brokers", "gauge",
                   "Registered brokers by state (fenced: silent past broker.session.timeout.ms "
                   "or not caught up).");
    st_prom_label_t live = {"state", "live"}, fen = {"state", "fenced"};
    st_prom_sample(p, "", &live, 1, md->nbrokers - fenced);
    st_prom_sample(p, "", &fen, 1, fenced);
}

/* The span exporter's counters (base/trace.h, broker/otlp.h): zero while tracing is off. */
static void tracing_metrics(st_prom_t *p)
{
    st_trace_stats_t t;
    st_trace_stats(&t);
    st_prom_family(p, "strata_tracing_spans_exported_total", "counter",
                   "Spans the OTLP endpoint (tracing.endpoint) accepted.");
    st_prom_sample_u64(p, "", NULL, 0, t.exported);
    st_prom_family(p, "strata_tracing_spans_dropped_total", "counter",
                   "Spans lost: the export queue was full, or their export failed.");
    st_prom_sample_u64(p, "", NULL, 0, t.dropped);
    st_prom_family(p, "strata_tracing_export_errors_total", "counter",
                   "Span exports that failed (no connection, timeout, or a non-2xx answer).");
    st_prom_sample_u64(p, "", NULL, 0, t.errors);
}

int st_admin_render_metrics(const st_admin_view_t *v, st_buf_t *out)
{
    int n = 0;
    st_admin_part_t **a = all_parts(v, &n);
    if (!a)
        return -ENOMEM;
    st_prom_t p;
    st_prom_init(&p, out);
    process_metrics(&p, v);
    cluster_metrics(&p, v);
    request_metrics(&p, v);
    shard_metrics(&p, v);
    partition_metrics(&p, a, n);
    group_metrics(&p, v, a, n);
    tracing_metrics(&p);
    free(a);
    return out->oom ? -ENOMEM : 0;
}

/* ---- JSON ------------------------------------------------------------------------------- */

int st_admin_json_append(json_t *j, st_buf_t *out)
{
    if (!j)
        return -ENOMEM;
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s)
        return -ENOMEM;
    st_buf_append(out, s, strlen(s));
    free(s);
    return out->oom ? -ENOMEM : 0;
}

/* Kafka's textual topic id: 16 bytes in URL-safe base64 without padding (22 characters). */
static void uuid_str(const uint8_t id[16], char out[23])
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    int k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (int i = 0; i < 16; i++) {
        acc = acc << 8 | id[i];
        bits += 8;
        while (bits >= 6) {
            out[k++] = b64[(acc >> (bits - 6)) & 63];
            bits -= 6;
        }
    }
    if (bits > 0)
        out[k++] = b64[(acc << (6 - bits)) & 63];
    out[k] = 0;
}

int st_admin_render_cluster(const st_admin_view_t *v, st_buf_t *out)
{
    const st_md_t *md = st_admin_view_md(v);
    json_t *j = json_object();
    /* in a cluster the id is the cluster's (from the metadata log), not this node's own */
    const char *cid = md && md->cluster_id[0] ? md->cluster_id : v->cluster_id;
    json_object_set_new(j, "cluster_id", json_string(cid ? cid : ""));
    json_object_set_new(j, "node_id", json_integer(v->node_id));
    json_object_set_new(j, "version", json_string(v->version ? v->version : ""));
    json_object_set_new(j, "ready", json_boolean(v->ready));
    json_object_set_new(j, "shards", json_integer(v->nshards));
    json_object_set_new(j, "uptime_seconds", json_real(v->uptime_seconds));
    json_t *brokers = json_array();
    int ntopics = 0;
    int64_t nparts = 0;
    if (md) {
        json_object_set_new(j, "controller_id", json_integer(md->controller_id));
        json_object_set_new(j, "metadata_version", json_integer(md->version));
        for (int i = 0; i < md->nbrokers; i++) {
            json_t *b = json_object();
            json_object_set_new(b, "node_id", json_integer(md->brokers[i].node_id));
            json_object_set_new(b, "host", json_string(md->brokers[i].host));
            json_object_set_new(b, "port", json_integer(md->brokers[i].port));
            if (v->clustered) {
                const st_md_broker_t *mb = &md->brokers[i];
                json_object_set_new(b, "rack", mb->rack ? json_string(mb->rack) : json_null());
                json_object_set_new(b, "fenced", json_boolean(mb->fenced));
                json_object_set_new(b, "epoch", json_integer(mb->epoch));
            }
            json_array_append_new(brokers, b);
        }
        ntopics = md->ntopics;
        for (int i = 0; i < md->ntopics; i++)
            nparts += md->topics[i]->npartitions;
    } else {
        json_object_set_new(j, "controller_id", json_null());
        json_object_set_new(j, "metadata_version", json_null());
    }
    json_object_set_new(j, "brokers", brokers);
    if (v->clustered)
        json_object_set_new(j, "quorum",
                            json_pack("{s:i,s:I,s:I,s:I,s:b}", "leader", v->qi.leader, "term",
                                      (json_int_t)v->qi.term, "applied", (json_int_t)v->qi.applied,
                                      "snapshot", (json_int_t)v->qi.snapshot, "voter",
                                      v->qi.voter));
    json_object_set_new(j, "topics", json_integer(ntopics));
    json_object_set_new(j, "partitions", json_integer(nparts));
    return st_admin_json_append(j, out);
}

int st_admin_render_topics(const st_admin_view_t *v, st_buf_t *out)
{
    const st_md_t *md = st_admin_view_md(v);
    int n = 0;
    st_admin_part_t **a = all_parts(v, &n);
    if (!a)
        return -ENOMEM;
    json_t *arr = json_array();
    for (int i = 0; md && i < md->ntopics; i++) {
        const st_md_topic_t *t = md->topics[i];
        json_t *o = json_object();
        char id[23];
        uuid_str(t->id, id);
        json_object_set_new(o, "name", json_string(t->name));
        json_object_set_new(o, "id", json_string(id));
        json_object_set_new(o, "internal", json_boolean(t->internal));
        json_object_set_new(o, "partitions", json_integer(t->npartitions));
        json_object_set_new(o, "replication_factor", json_integer(t->replication_factor));
        int64_t size = 0, records = 0;
        for (int32_t p = 0; p < t->npartitions; p++) {
            const st_admin_part_t *r = find_part(a, n, t->name, p);
            if (r) {
                size += r->size_bytes;
                records += r->log_end_offset - r->log_start_offset;
            }
        }
        json_object_set_new(o, "size_bytes", json_integer(size));
        json_object_set_new(o, "records", json_integer(records));
        json_t *cfg = json_object();
        for (int c = 0; c < t->nconfigs; c++)
            json_object_set_new(cfg, t->configs[c].key, json_string(t->configs[c].value));
        json_object_set_new(o, "configs", cfg);
        json_array_append_new(arr, o);
    }
    free(a);
    json_t *j = json_object();
    json_object_set_new(j, "topics", arr);
    return st_admin_json_append(j, out);
}

int st_admin_render_partitions(const st_admin_view_t *v, const char *topic, st_buf_t *out)
{
    const st_md_t *md = st_admin_view_md(v);
    int n = 0;
    st_admin_part_t **a = all_parts(v, &n);
    if (!a)
        return -ENOMEM;
    json_t *arr = json_array();
    for (int i = 0; md && i < md->ntopics; i++) {
        const st_md_topic_t *t = md->topics[i];
        if (topic && strcmp(topic, t->name) != 0)
            continue;
        for (int32_t p = 0; p < t->npartitions; p++) {
            const st_md_partition_t *mp = &t->partitions[p];
            const st_admin_part_t *r = find_part(a, n, t->name, p);
            json_t *o = json_object();
            json_object_set_new(o, "topic", json_string(t->name));
            json_object_set_new(o, "partition", json_integer(p));
            json_object_set_new(o, "leader", json_integer(mp->leader));
            json_object_set_new(o, "leader_epoch", json_integer(mp->leader_epoch));
            json_object_set_new(o, "shard", json_integer(mp->shard));
            json_t *rs = json_array(), *isr = json_array();
            for (int k = 0; k < mp->nreplicas; k++)
                json_array_append_new(rs, json_integer(mp->replicas[k]));
            for (int k = 0; k < mp->nisr; k++)
                json_array_append_new(isr, json_integer(mp->isr[k]));
            json_object_set_new(o, "replicas", rs);
            json_object_set_new(o, "isr", isr);
            /* Offsets come from the owner's snapshot; null until it has published one with
             * this partition open. */
#define NUM(key, expr)                                                                             \
    json_object_set_new(o, key, r ? json_integer((json_int_t)(expr)) : json_null())
            NUM("log_start_offset", r->log_start_offset);
            NUM("log_end_offset", r->log_end_offset);
            NUM("high_watermark", r->high_watermark);
            NUM("size_bytes", r->size_bytes);
            NUM("segments", r->segments);
            NUM("records_produced", r->records_in);
            NUM("bytes_produced", r->bytes_in);
            NUM("records_fetched", r->records_out);
            NUM("bytes_fetched", r->bytes_out);
            json_object_set_new(o, "offline", r ? json_boolean(r->offline) : json_null());
            /* The cleaner's figures: an object for a compacted partition, else null. */
            json_t *c = json_null();
            if (r && r->compact) {
                c = json_object();
                json_object_set_new(c, "dirty_ratio", json_real(r->dirty_ratio));
                json_object_set_new(c, "in_progress", json_boolean(r->cleaning));
                json_object_set_new(c, "cleans", json_integer(r->cleans));
                json_object_set_new(c, "last_clean_ms",
                                    r->last_clean_ms >= 0 ? json_integer(r->last_clean_ms)
                                                          : json_null());
                json_object_set_new(c, "bytes_read", json_integer(r->clean_bytes_read));
                json_object_set_new(c, "bytes_reclaimed", json_integer(r->bytes_reclaimed));
                json_object_set_new(c, "records_removed", json_integer(r->records_removed));
            }
            json_object_set_new(o, "cleaner", c);
#undef NUM
            json_array_append_new(arr, o);
        }
    }
    free(a);
    json_t *j = json_object();
    json_object_set_new(j, "partitions", arr);
    return st_admin_json_append(j, out);
}
