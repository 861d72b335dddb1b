/* Unit tests for admin/render: /metrics from hand-built shard snapshots and counters (every
 * line well formed, families declared once before their samples, the right figures) and the
 * JSON endpoints (/v1/cluster, /v1/topics, /v1/partitions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/console.h"
#include "admin/render.h"

typedef struct {
    st_md_t *md;
    st_admin_snap_t *snaps[2];
    st_admin_live_t live[2];
    st_kshard_stats_t *stats[2];
    st_admin_view_t v;
} fixture_t;

/* Topic "orders" (3 partitions: 0 and 2 on shard 0, 1 on shard 1) and "we\"ird" (1 partition
 * on shard 1, not yet opened: no snapshot row). Shard 1 coordinates group "g\"1". */
static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    f->md = st_md_new("clu-1", 0);
    st_md_add_broker(f->md, 0, "127.0.0.1", 9092);
    uint8_t id1[16] = {1, 2, 3}, id2[16] = {9};
    st_md_topic_t *t = st_md_topic_new("orders", id1, 3);
    for (int p = 0; p < 3; p++) {
        t->partitions[p].shard = p == 1 ? 1 : 0;
        t->partitions[p].leader = 0;
        t->partitions[p].leader_epoch = 4;
    }
    st_md_topic_set_config(t, "retention.ms", "1000");
    st_md_add_topic(f->md, t);
    t = st_md_topic_new("we\"ird", id2, 1);
    t->partitions[0].shard = 1;
    st_md_add_topic(f->md, t);
    for (int s = 0; s < 2; s++) {
        f->snaps[s] = st_admin_snap_new(s);
        f->snaps[s]->md = st_md_ref(f->md);
        f->snaps[s]->taken_ns = 1000000000;
        f->snaps[s]->busy_ratio = 0.25 * (s + 1);
        f->snaps[s]->connections = 3 + (uint64_t)s;
        /* loop iterations: 5 up to 10 us, 2 in (1 ms, 2.5 ms], 1 above 1 s */
        f->snaps[s]->loop_iter[0] = 5;
        f->snaps[s]->loop_iter[7] = 2;
        f->snaps[s]->loop_iter[ST_LOOP_ITER_BUCKETS] = (uint64_t)s;
        f->snaps[s]->loop_iter_sum_ns = 4000000 + (int64_t)s * 1500000000;
        f->stats[s] = calloc(1, sizeof *f->stats[s]);
        f->live[s].stats = f->stats[s];
        f->live[s].mesh_sent = 10 + (uint64_t)s;
        f->live[s].mesh_received = 20 + (uint64_t)s;
    }
    for (int p = 0; p < 3; p++) {
        st_admin_part_t *r = st_admin_snap_add_part(f->snaps[p == 1 ? 1 : 0], "orders");
        r->partition = p;
        r->log_start_offset = 0;
        r->log_end_offset = 100 * (p + 1);
        r->high_watermark = 100 * (p + 1);
        r->size_bytes = 4096 * (p + 1);
        r->segments = 1;
        r->records_in = (uint64_t)(100 * (p + 1));
        r->bytes_in = (uint64_t)(5000 * (p + 1));
        r->records_out = 7;
        r->bytes_out = 70;
    }
    st_admin_groups_add(f->snaps[1], "g\"1", "Stable", 2);
    st_admin_groups_add_offset(f->snaps[1], "g\"1", "orders", 0, 60);  /* lag 40 */
    st_admin_groups_add_offset(f->snaps[1], "g\"1", "orders", 2, 300); /* lag 0 */
    /* Shard 0: 5 Produce requests, 2 of them with error 3, latencies in two buckets. */
    f->stats[0]->requests[0] = 5;
    f->stats[0]->request_ns[0] = 5000000;
    f->stats[0]->request_latency[0][st_kstats_bucket(200000)] = 3;
    f->stats[0]->request_latency[0][st_kstats_bucket(2000000)] = 2;
    f->stats[0]->request_errors[0] = 2;
    f->stats[0]->request_error_codes[0][3 + 1] = 2;
    /* Shard 1: 1 Produce request, slower than every bound. */
    f->stats[1]->requests[0] = 1;
    f->stats[1]->request_ns[0] = 20000000000ull;
    f->stats[1]->request_latency[0][ST_KSTATS_BUCKETS] = 1;
    f->stats[1]->fsyncs = 4;
    f->stats[1]->fsync_latency[st_kstats_bucket(1000000)] = 4;
    f->stats[1]->fsync_ns = 4000000;
    f->v = (st_admin_view_t){.nshards = 2,
                             .snaps = f->snaps,
                             .live = f->live,
                             .version = "9.9.9",
                             .cluster_id = "clu-1",
                             .node_id = 0,
                             .ready = true,
                             .now_ns = 1500000000,
                             .start_time_seconds = 1700000000,
                             .uptime_seconds = 12.5,
                             .recovery_seconds = 0.125,
                             .rss_bytes = 1 << 20,
                             .open_fds = 12,
                             .max_fds = 1024};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    for (int s = 0; s < 2; s++) {
        st_admin_snap_unref(f->snaps[s]);
        free(f->stats[s]);
    }
    st_md_unref(f->md);
    free(f);
    return 0;
}

static char *render(int (*fn)(const st_admin_view_t *, st_buf_t *), const st_admin_view_t *v)
{
    st_buf_t b;
    st_buf_init(&b);
    assert_int_equal(fn(v, &b), 0);
    st_buf_append(&b, "", 1);
    return (char *)b.data;
}

/* Checks the whole exposition: every line is a HELP, a TYPE or a sample; each family is
 * declared once (HELP then TYPE) and its samples follow it; sample names are the family
 * name (plus _bucket/_sum/_count for histograms). */
static void check_exposition(const char *text)
{
    regex_t sample;
    assert_int_equal(regcomp(&sample,
                             "^([a-zA-Z_:][a-zA-Z0-9_:]*)"
                             "(\\{([a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\",?)*\\})? "
                             "(-?[0-9.e+-]+|\\+Inf|-Inf|NaN)$",
                             REG_EXTENDED),
                     0);
    char family[128] = "", type[32] = "";
    char seen[4096] = " ";
    const char *p = text;
    int samples = 0;
    while (*p) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl); /* every line ends with \n */
        char line[2048];
        size_t n = (size_t)(nl - p);
        assert_true(n < sizeof line);
        memcpy(line, p, n);
        line[n] = 0;
        p = nl + 1;
        if (strncmp(line, "# HELP ", 7) == 0) {
            sscanf(line + 7, "%127s", family);
            char key[160];
            snprintf(key, sizeof key, " %s ", family);
            if (strstr(seen, key))
                fail_msg("family %s declared twice", family);
            strncat(seen, key + 1, sizeof seen - strlen(seen) - 1);
            type[0] = 0;
            continue;
        }
        if (strncmp(line, "# TYPE ", 7) == 0) {
            char fam[128];
            sscanf(line + 7, "%127s %31s", fam, type);
            assert_string_equal(fam, family);
            continue;
        }
        regmatch_t m[2];
        if (regexec(&sample, line, 2, m, 0) != 0)
            fail_msg("malformed sample line: %s", line);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(m[1].rm_eo - m[1].rm_so), line + m[1].rm_so);
        assert_true(type[0]);
        if (strcmp(type, "histogram") == 0) {
            size_t fl = strlen(family);
            assert_true(strncmp(name, family, fl) == 0);
            const char *suf = name + fl;
            assert_true(!strcmp(suf, "_bucket") || !strcmp(suf, "_sum") || !strcmp(suf, "_count"));
        } else {
            assert_string_equal(name, family);
        }
        samples++;
    }
    assert_true(samples > 50);
    regfree(&sample);
}

static void assert_line(const char *text, const char *line)
{
    char want[512];
    snprintf(want, sizeof want, "\n%s\n", line);
    if (!strstr(text, want))
        fail_msg("missing line: %s", line);
}

static void test_metrics_exposition_and_figures(void **state)
{
    fixture_t *f = *state;
    char *t = render(st_admin_render_metrics, &f->v);
    check_exposition(t);
    assert_line(t, "strata_build_info{version=\"9.9.9\"} 1");
    assert_line(t, "strata_ready 1");
    assert_line(t, "strata_uptime_seconds 12.5");
    assert_line(t, "strata_storage_recovery_seconds 0.125");
    assert_line(t, "strata_process_open_fds 12");
    /* requests summed over shards; errors by code with the protocol's name */
    assert_line(t, "strata_kafka_requests_total{api=\"Produce\"} 6");
    assert_line(t, "strata_kafka_requests_total{api=\"Fetch\"} 0");
    assert_line(t, "strata_kafka_request_errors_total{api=\"Produce\",code=\"3\","
                   "error=\"UNKNOWN_TOPIC_OR_PARTITION\"} 2");
    /* latency: cumulative, +Inf = _count = all 6, _sum in seconds */
    assert_line(t, "strata_kafka_request_duration_seconds_bucket{api=\"Produce\",le=\"0.0001\"} 0");
    assert_line(t,
                "strata_kafka_request_duration_seconds_bucket{api=\"Produce\",le=\"0.00025\"} 3");
    assert_line(t, "strata_kafka_request_duration_seconds_bucket{api=\"Produce\",le=\"0.0025\"} 5");
    assert_line(t, "strata_kafka_request_duration_seconds_bucket{api=\"Produce\",le=\"10\"} 5");
    assert_line(t, "strata_kafka_request_duration_seconds_bucket{api=\"Produce\",le=\"+Inf\"} 6");
    assert_line(t, "strata_kafka_request_duration_seconds_count{api=\"Produce\"} 6");
    assert_line(t, "strata_kafka_request_duration_seconds_sum{api=\"Produce\"} 20.005");
    /* storage */
    assert_line(t, "strata_storage_fsyncs_total{shard=\"1\"} 4");
    assert_line(t, "strata_storage_fsync_duration_seconds_bucket{shard=\"1\",le=\"0.001\"} 4");
    assert_line(t, "strata_storage_fsync_duration_seconds_bucket{shard=\"1\",le=\"+Inf\"} 4");
    assert_line(t, "strata_storage_fsync_duration_seconds_count{shard=\"1\"} 4");
    /* shards */
    assert_line(t, "strata_shard_busy_ratio{shard=\"1\"} 0.5");
    /* loop iteration busy time: cumulative, seconds, one series per shard */
    assert_line(t, "# TYPE strata_shard_loop_iteration_seconds histogram");
    assert_line(t, "strata_shard_loop_iteration_seconds_bucket{shard=\"0\",le=\"1e-05\"} 5");
    assert_line(t, "strata_shard_loop_iteration_seconds_bucket{shard=\"0\",le=\"0.001\"} 5");
    assert_line(t, "strata_shard_loop_iteration_seconds_bucket{shard=\"0\",le=\"0.0025\"} 7");
    assert_line(t, "strata_shard_loop_iteration_seconds_bucket{shard=\"1\",le=\"1\"} 7");
    assert_line(t, "strata_shard_loop_iteration_seconds_bucket{shard=\"1\",le=\"+Inf\"} 8");
    assert_line(t, "strata_shard_loop_iteration_seconds_count{shard=\"0\"} 7");
    assert_line(t, "strata_shard_loop_iteration_seconds_count{shard=\"1\"} 8");
    assert_line(t, "strata_shard_loop_iteration_seconds_sum{shard=\"1\"} 1.504");
    assert_line(t, "strata_shard_mesh_sent_total{shard=\"0\"} 10");
    assert_line(t, "strata_shard_mesh_received_total{shard=\"1\"} 21");
    assert_line(t, "strata_kafka_connections{shard=\"1\"} 4");
    assert_line(t, "strata_shard_snapshot_age_seconds{shard=\"0\"} 0.5");
    /* partitions, sorted, from both shards */
    assert_line(t, "strata_partition_produced_records_total{topic=\"orders\",partition=\"1\"} 200");
    assert_line(t, "strata_partition_produced_bytes_total{topic=\"orders\",partition=\"2\"} 15000");
    assert_line(t, "strata_partition_high_watermark{topic=\"orders\",partition=\"2\"} 300");
    assert_line(t, "strata_partition_size_bytes{topic=\"orders\",partition=\"0\"} 4096");
    assert_line(t, "strata_partition_segments{topic=\"orders\",partition=\"0\"} 1");
    assert_true(strstr(t, "{topic=\"orders\",partition=\"0\"} 100\n") <
                strstr(t, "{topic=\"orders\",partition=\"1\"} 200\n"));
    /* groups: escaped names, lag against the owner's high watermark */
    assert_line(t, "strata_group_members{group=\"g\\\"1\"} 2");
    assert_line(t, "strata_group_state{group=\"g\\\"1\",state=\"Stable\"} 1");
    assert_line(
        t, "strata_group_committed_offset{group=\"g\\\"1\",topic=\"orders\",partition=\"0\"} 60");
    assert_line(t, "strata_group_lag{group=\"g\\\"1\",topic=\"orders\",partition=\"0\"} 40");
    assert_line(t, "strata_group_lag{group=\"g\\\"1\",topic=\"orders\",partition=\"2\"} 0");
    free(t);
}

static void test_metrics_before_any_snapshot(void **state)
{
    fixture_t *f = *state;
    st_admin_view_t v = f->v;
    st_admin_snap_t *none[2] = {NULL, NULL};
    v.snaps = none;
    v.ready = false;
    v.recovery_seconds = -1;
    char *t = render(st_admin_render_metrics, &v);
    assert_line(t, "strata_ready 0");
    assert_null(strstr(t, "strata_storage_recovery_seconds "));
    assert_null(strstr(t, "strata_partition_log_end_offset{"));
    assert_line(t, "strata_kafka_requests_total{api=\"Produce\"} 6"); /* live counters */
    free(t);
}

static json_t *render_json(fixture_t *f, const char *endpoint, const char *topic)
{
    st_buf_t b;
    st_buf_init(&b);
    int rc = strcmp(endpoint, "cluster") == 0  ? st_admin_render_cluster(&f->v, &b)
             : strcmp(endpoint, "topics") == 0 ? st_admin_render_topics(&f->v, &b)
                                               : st_admin_render_partitions(&f->v, topic, &b);
    assert_int_equal(rc, 0);
    json_error_t err;
    json_t *j = json_loadb((const char *)b.data, b.len, 0, &err);
    if (!j)
        fail_msg("invalid JSON (%s): %.*s", err.text, (int)b.len, (const char *)b.data);
    st_buf_fini(&b);
    return j;
}

static void test_json_cluster(void **state)
{
    fixture_t *f = *state;
    json_t *j = render_json(f, "cluster", NULL);
    assert_string_equal(json_string_value(json_object_get(j, "cluster_id")), "clu-1");
    assert_true(json_is_true(json_object_get(j, "ready")));
    assert_int_equal(json_integer_value(json_object_get(j, "shards")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "topics")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "partitions")), 4);
    json_t *b = json_array_get(json_object_get(j, "brokers"), 0);
    assert_int_equal(json_integer_value(json_object_get(b, "port")), 9092);
    assert_string_equal(json_string_value(json_object_get(j, "version")), "9.9.9");
    json_decref(j);
}

static void test_json_topics(void **state)
{
    fixture_t *f = *state;
    json_t *j = render_json(f, "topics", NULL);
    json_t *arr = json_object_get(j, "topics");
    assert_int_equal(json_array_size(arr), 2);
    json_t *o = json_array_get(arr, 0);
    assert_string_equal(json_string_value(json_object_get(o, "name")), "orders");
    assert_int_equal(json_integer_value(json_object_get(o, "partitions")), 3);
    assert_int_equal(json_integer_value(json_object_get(o, "size_bytes")), 4096 * 6);
    assert_int_equal(json_integer_value(json_object_get(o, "records")), 600);
    assert_int_equal(strlen(json_string_value(json_object_get(o, "id"))), 22);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(o, "configs"), "retention.ms")), "1000");
    o = json_array_get(arr, 1);
    assert_string_equal(json_string_value(json_object_get(o, "name")), "we\"ird");
    assert_int_equal(json_integer_value(json_object_get(o, "size_bytes")), 0);
    json_decref(j);
}

static void test_json_partitions(void **state)
{
    fixture_t *f = *state;
    json_t *j = render_json(f, "partitions", NULL);
    json_t *arr = json_object_get(j, "partitions");
    assert_int_equal(json_array_size(arr), 4);
    json_t *o = json_array_get(arr, 1);
    assert_string_equal(json_string_value(json_object_get(o, "topic")), "orders");
    assert_int_equal(json_integer_value(json_object_get(o, "partition")), 1);
    assert_int_equal(json_integer_value(json_object_get(o, "shard")), 1);
    assert_int_equal(json_integer_value(json_object_get(o, "leader")), 0);
    assert_int_equal(json_integer_value(json_object_get(o, "leader_epoch")), 4);
    assert_int_equal(json_integer_value(json_object_get(o, "log_end_offset")), 200);
    assert_int_equal(json_integer_value(json_object_get(o, "high_watermark")), 200);
    assert_int_equal(json_integer_value(json_object_get(o, "size_bytes")), 8192);
    assert_int_equal(json_integer_value(json_object_get(o, "segments")), 1);
    assert_int_equal(json_integer_value(json_object_get(o, "records_produced")), 200);
    assert_int_equal(json_integer_value(json_object_get(o, "bytes_fetched")), 70);
    /* known to the metadata, not yet published by its shard: offsets are null */
    o = json_array_get(arr, 3);
    assert_string_equal(json_string_value(json_object_get(o, "topic")), "we\"ird");
    assert_true(json_is_null(json_object_get(o, "log_end_offset")));
    assert_int_equal(json_integer_value(json_object_get(o, "shard")), 1);
    json_decref(j);

    j = render_json(f, "partitions", "we\"ird");
    assert_int_equal(json_array_size(json_object_get(j, "partitions")), 1);
    json_decref(j);
    j = render_json(f, "partitions", "absent");
    assert_int_equal(json_array_size(json_object_get(j, "partitions")), 0);
    json_decref(j);
}

/* The cleaner's figures: only for compacted partitions, in /metrics and /v1/partitions. */
/* GET /v1/groups: each group with its offsets joined to the owner's high watermark; an offset
 * of a partition no snapshot holds has no lag. */
static void test_json_groups(void **state)
{
    fixture_t *f = *state;
    st_admin_groups_add(f->snaps[0], "a-first", "Empty", 0);
    st_admin_groups_add_offset(f->snaps[0], "a-first", "gone", 0, 5);
    st_buf_t b;
    st_buf_init(&b);
    assert_int_equal(st_admin_render_groups(&f->v, &b), 0);
    json_error_t err;
    json_t *j = json_loadb((const char *)b.data, b.len, 0, &err);
    st_buf_fini(&b);
    assert_non_null(j);
    json_t *gs = json_object_get(j, "groups");
    assert_int_equal(json_array_size(gs), 2);
    json_t *g0 = json_array_get(gs, 0), *g1 = json_array_get(gs, 1);
    assert_string_equal(json_string_value(json_object_get(g0, "group")), "a-first");
    assert_true(
        json_is_null(json_object_get(json_array_get(json_object_get(g0, "offsets"), 0), "lag")));
    assert_string_equal(json_string_value(json_object_get(g1, "group")), "g\"1");
    assert_string_equal(json_string_value(json_object_get(g1, "state")), "Stable");
    assert_int_equal(json_integer_value(json_object_get(g1, "members")), 2);
    assert_int_equal(json_integer_value(json_object_get(g1, "lag")), 40);
    json_t *offs = json_object_get(g1, "offsets");
    assert_int_equal(json_array_size(offs), 2);
    json_t *o = json_array_get(offs, 0);
    assert_int_equal(json_integer_value(json_object_get(o, "partition")), 0);
    assert_int_equal(json_integer_value(json_object_get(o, "committed")), 60);
    assert_int_equal(json_integer_value(json_object_get(o, "high_watermark")), 100);
    assert_int_equal(json_integer_value(json_object_get(o, "lag")), 40);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(offs, 1), "lag")), 0);
    json_decref(j);
}

/* The console's files are in the binary, found by their /ui URLs. */
static void test_ui_assets(void **state)
{
    (void)state;
    const st_admin_asset_t *a = st_admin_ui_asset("/ui");
    assert_non_null(a);
    assert_string_equal(a->name, "index.html");
    assert_ptr_equal(st_admin_ui_asset("/ui/"), a);
    assert_ptr_equal(st_admin_ui_asset("/ui/index.html"), a);
    assert_non_null(strstr((const char *)a->data, "console.js"));
    a = st_admin_ui_asset("/ui/console.js");
    assert_non_null(a);
    assert_string_equal(a->type, "text/javascript; charset=utf-8");
    assert_int_equal(strlen((const char *)a->data), a->len);
    assert_non_null(st_admin_ui_asset("/ui/console.css"));
    assert_null(st_admin_ui_asset("/ui/nope.js"));
    assert_null(st_admin_ui_asset("/uix"));
    assert_null(st_admin_ui_asset("/ui/../etc/passwd"));
}

static void test_cleaner_figures(void **state)
{
    fixture_t *f = *state;
    /* orders-2 (shard 0, its second row) cleaned twice; orders-1 compacted, never cleaned. */
    st_admin_part_t *r = &f->snaps[0]->parts[1];
    assert_int_equal(r->partition, 2);
    r->compact = true;
    r->dirty_ratio = 0.25;
    r->last_clean_ms = 1700000001500;
    r->cleans = 2;
    r->clean_bytes_read = 9000;
    r->bytes_reclaimed = 6000;
    r->records_removed = 77;
    r = &f->snaps[1]->parts[0];
    r->compact = true;
    r->cleaning = true;
    r->dirty_ratio = 1;
    r->last_clean_ms = -1;
    char *t = render(st_admin_render_metrics, &f->v);
    check_exposition(t);
    assert_line(t, "strata_partition_cleaner_dirty_ratio{topic=\"orders\",partition=\"2\"} 0.25");
    assert_line(t, "strata_partition_cleaner_dirty_ratio{topic=\"orders\",partition=\"1\"} 1");
    assert_line(t, "strata_partition_cleaner_in_progress{topic=\"orders\",partition=\"1\"} 1");
    assert_line(t, "strata_partition_cleaner_in_progress{topic=\"orders\",partition=\"2\"} 0");
    assert_line(t, "strata_partition_cleaner_last_clean_timestamp_seconds{topic=\"orders\","
                   "partition=\"2\"} 1700000001.5");
    assert_line(t, "strata_partition_cleaner_cleans_total{topic=\"orders\",partition=\"2\"} 2");
    assert_line(t, "strata_partition_cleaner_read_bytes_total{topic=\"orders\",partition=\"2\"} "
                   "9000");
    assert_line(t, "strata_partition_cleaner_bytes_reclaimed_total{topic=\"orders\","
                   "partition=\"2\"} 6000");
    assert_line(t, "strata_partition_cleaner_records_removed_total{topic=\"orders\","
                   "partition=\"2\"} 77");
    /* never cleaned: no timestamp; not compacted (orders-0): no cleaner rows at all */
    assert_null(strstr(t, "timestamp_seconds{topic=\"orders\",partition=\"1\"}"));
    assert_null(strstr(t, "cleaner_dirty_ratio{topic=\"orders\",partition=\"0\"}"));
    assert_null(strstr(t, "cleans_total{topic=\"orders\",partition=\"0\"}"));
    free(t);

    json_t *j = render_json(f, "partitions", "orders");
    json_t *arr = json_object_get(j, "partitions");
    assert_true(json_is_null(json_object_get(json_array_get(arr, 0), "cleaner")));
    json_t *c = json_object_get(json_array_get(arr, 2), "cleaner");
    assert_true(json_is_object(c));
    assert_true(json_real_value(json_object_get(c, "dirty_ratio")) == 0.25);
    assert_false(json_boolean_value(json_object_get(c, "in_progress")));
    assert_int_equal(json_integer_value(json_object_get(c, "cleans")), 2);
    assert_int_equal(json_integer_value(json_object_get(c, "last_clean_ms")), 1700000001500);
    assert_int_equal(json_integer_value(json_object_get(c, "bytes_read")), 9000);
    assert_int_equal(json_integer_value(json_object_get(c, "bytes_reclaimed")), 6000);
    assert_int_equal(json_integer_value(json_object_get(c, "records_removed")), 77);
    c = json_object_get(json_array_get(arr, 1), "cleaner");
    assert_true(json_boolean_value(json_object_get(c, "in_progress")));
    assert_true(json_is_null(json_object_get(c, "last_clean_ms")));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_metrics_exposition_and_figures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_before_any_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_cluster, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_topics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_partitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cleaner_figures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_groups, setup, teardown),
        cmocka_unit_test(test_ui_assets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
