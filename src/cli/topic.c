/*
 * topic.c — `strata topic create|list|describe|delete|add-partitions|alter-config`.
 *
 * Listing and describing use Metadata (and ListOffsets for the watermarks); the rest use the
 * Admin API. librdkafka 2.0 has no IncrementalAlterConfigs, so alter-config reads the topic's
 * current dynamic configs, applies --set/--delete and writes the whole set back with
 * AlterConfigs (the read-modify-write Kafka's own tool did before KIP-339). Describing a
 * compacted topic also asks the broker's admin API (/v1/partitions) for each partition's
 * cleanable (dirty) ratio, which Kafka's protocol does not carry.
 */
#include <ctype.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/common.h"
#include "cli/http.h"

int st_cli_topic_create(int argc, char **argv)
{
    static const char usage[] = "topic create NAME... [-p PARTITIONS] [-r REPLICAS] [-c K=V]...";
    int64_t partitions = 1, replicas = 1;
    st_cli_strlist_t configs = {0}, pos = {0};
    const st_cli_opt_t opts[] = {
        {'p', "partitions", ST_CLI_OPT_INT, &partitions, "N", "partitions (default 1)"},
        {'r', "replicas", ST_CLI_OPT_INT, &replicas, "N", "replication factor (default 1)"},
        {'c', "config", ST_CLI_OPT_LIST, &configs, "K=V", "topic config (Kafka's names)"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage, "Creates topics.", opts, true, &pos, 1, 1000);
    if (rc >= 0)
        goto out;
    if (partitions < 1 || partitions > 1000000 || replicas < 1 || replicas > 32767) {
        rc = st_cli_usage_error(usage, "partitions and replicas must be positive");
        goto out;
    }
    rc = ST_CLI_FAIL;
    rd_kafka_t *rk = st_cli_admin_client();
    if (!rk)
        goto out;
    rd_kafka_NewTopic_t **nt = calloc(pos.n, sizeof(*nt));
    char err[512];
    size_t made = 0;
    for (; made < pos.n; made++) {
        nt[made] =
            rd_kafka_NewTopic_new(pos.v[made], (int)partitions, (int)replicas, err, sizeof(err));
        if (!nt[made]) {
            st_cli_errorf("cannot create topic %s: %s", pos.v[made], err);
            goto destroy;
        }
        for (size_t c = 0; c < configs.n; c++) {
            char *buf;
            const char *k, *v;
            if (st_cli_split_kv(configs.v[c], &buf, &k, &v) < 0) {
                rd_kafka_NewTopic_destroy(nt[made]);
                rc = st_cli_usage_error(usage, "-c wants key=value, not '%s'", configs.v[c]);
                goto destroy;
            }
            rd_kafka_NewTopic_set_config(nt[made], k, v);
            free(buf);
        }
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_CreateTopics(rk, nt, made, o, q);
    rd_kafka_event_t *ev =
        st_cli_admin_wait(q, RD_KAFKA_EVENT_CREATETOPICS_RESULT, "cannot create topics");
    if (ev) {
        size_t n;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        int failed = 0;
        for (size_t i = 0; i < n; i++) {
            rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
            if (e) {
                char what[300];
                snprintf(what, sizeof(what), "cannot create topic %s",
                         rd_kafka_topic_result_name(res[i]));
                st_cli_report(what, e, rd_kafka_topic_result_error_string(res[i]));
                failed++;
            } else {
                printf("created topic %s (%" PRId64 " partitions, %" PRId64 " replicas)\n",
                       rd_kafka_topic_result_name(res[i]), partitions, replicas);
            }
        }
        rc = failed ? ST_CLI_FAIL : ST_CLI_OK;
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
destroy:
    rd_kafka_NewTopic_destroy_array(nt, made);
    free(nt);
    st_cli_client_destroy(rk);
out:
    st_cli_strlist_fini(&configs);
    st_cli_strlist_fini(&pos);
    return rc;
}

static int cmp_topic(const void *a, const void *b)
{
    return strcmp(((const rd_kafka_metadata_topic_t *)a)->topic,
                  ((const rd_kafka_metadata_topic_t *)b)->topic);
}

int st_cli_topic_list(int argc, char **argv)
{
    static const char usage[] = "topic list [--internal]";
    bool internal = false;
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {
        {'i', "internal", ST_CLI_OPT_FLAG, &internal, NULL,
         "include internal topics (__consumer_offsets, ...)"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Lists topics with their partition and replica "
                          "counts.",
                          opts, true, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc >= 0)
        return rc;
    rd_kafka_t *rk = st_cli_admin_client();
    if (!rk)
        return ST_CLI_FAIL;
    const rd_kafka_metadata_t *md = st_cli_metadata(rk, NULL);
    if (!md) {
        st_cli_client_destroy(rk);
        return ST_CLI_FAIL;
    }
    rd_kafka_metadata_topic_t *sorted = malloc(sizeof(*sorted) * (size_t)(md->topic_cnt + 1));
    memcpy(sorted, md->topics, sizeof(*sorted) * (size_t)md->topic_cnt);
    qsort(sorted, (size_t)md->topic_cnt, sizeof(*sorted), cmp_topic);
    printf("%-40s %10s %8s\n", "NAME", "PARTITIONS", "REPLICAS");
    for (int i = 0; i < md->topic_cnt; i++) {
        const rd_kafka_metadata_topic_t *t = &sorted[i];
        if (!internal && !strncmp(t->topic, "__", 2))
            continue;
        printf("%-40s %10d %8d\n", t->topic, t->partition_cnt,
               t->partition_cnt ? t->partitions[0].replica_cnt : 0);
    }
    free(sorted);
    rd_kafka_metadata_destroy(md);
    st_cli_client_destroy(rk);
    return ST_CLI_OK;
}

static void print_ids(const int32_t *ids, int n)
{
    char buf[256];
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && o < sizeof(buf) - 12; i++)
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%d", i ? "," : "", ids[i]);
    printf(" %-12s", n ? buf : "-");
}

/* Describes the configs of a topic; returns the DescribeConfigs result event or NULL. */
static rd_kafka_event_t *describe_configs(rd_kafka_t *rk, rd_kafka_queue_t *q, const char *topic,
                                          bool quiet)
{
    rd_kafka_ConfigResource_t *cr = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_AdminOptions_t *o = st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_DescribeConfigs(rk, &cr, 1, o, q);
    rd_kafka_event_t *ev = NULL;
    if (quiet) {
        /* Wait without printing: a missing config API is reported by the caller. */
        for (int64_t w = 0; w < st_cli_common.timeout_ms + 5000 && !ev; w += 200) {
            ev = rd_kafka_queue_poll(q, 200);
            if (ev && rd_kafka_event_type(ev) != RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT) {
                rd_kafka_event_destroy(ev);
                ev = NULL;
            }
        }
    } else {
        ev = st_cli_admin_wait(q, RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT,
                               "cannot read topic configs");
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_ConfigResource_destroy(cr);
    return ev;
}

/* The single resource in a DescribeConfigs result, or NULL after printing its error. */
static const rd_kafka_ConfigResource_t *config_resource(rd_kafka_event_t *ev, bool quiet)
{
    if (rd_kafka_event_error(ev)) {
        if (!quiet)
            st_cli_report("cannot read topic configs", rd_kafka_event_error(ev),
                          rd_kafka_event_error_string(ev));
        return NULL;
    }
    size_t n;
    const rd_kafka_ConfigResource_t **res =
        rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(ev), &n);
    if (n != 1)
        return NULL;
    if (rd_kafka_ConfigResource_error(res[0])) {
        if (!quiet)
            st_cli_report("cannot read topic configs", rd_kafka_ConfigResource_error(res[0]),
                          rd_kafka_ConfigResource_error_string(res[0]));
        return NULL;
    }
    return res[0];
}

/* The admin API address: --admin, else $STRATA_ADMIN, else the first bootstrap broker's host
 * at the default admin port (9644). */
static void admin_address(const char *opt, char *out, size_t n)
{
    if (!opt)
        opt = getenv("STRATA_ADMIN");
    if (opt && *opt) {
        snprintf(out, n, "%s", opt);
        return;
    }
    const char *b = st_cli_common.brokers ? st_cli_common.brokers : ST_CLI_DEFAULT_BROKERS;
    size_t len = strcspn(b, ",");
    const char *colon = memrchr(b, ':', len);
    if (colon)
        len = (size_t)(colon - b);
    snprintf(out, n, "%.*s:9644", (int)len, b);
}

/*
 * Fills ratio[p] (NAN for a partition without cleaner figures) from the admin API's
 * /v1/partitions?topic=NAME. Returns 0, or -1 after writing why into why.
 */
static int dirty_ratios(const char *admin, const char *topic, double *ratio, int n, char *why,
                        size_t whylen)
{
    char path[1024] = "/v1/partitions?topic=";
    size_t o = strlen(path);
    for (const unsigned char *c = (const unsigned char *)topic; *c && o + 4 < sizeof path; c++)
        o += (size_t)(isalnum(*c) || strchr("._-", *c)
                          ? snprintf(path + o, sizeof path - o, "%c", *c)
                          : snprintf(path + o, sizeof path - o, "%%%02X", *c));
    char *body = NULL;
    size_t len = 0;
    int64_t t = st_cli_common.timeout_ms < 3000 ? st_cli_common.timeout_ms : 3000;
    if (st_cli_http_get(admin, path, t, &body, &len, why, whylen) < 0)
        return -1;
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je);
    free(body);
    json_t *arr = j ? json_object_get(j, "partitions") : NULL;
    if (!json_is_array(arr)) {
        snprintf(why, whylen, "%.200s did not answer /v1/partitions with partitions", admin);
        json_decref(j);
        return -1;
    }
    for (int i = 0; i < n; i++)
        ratio[i] = NAN;
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        json_int_t p = json_integer_value(json_object_get(e, "partition"));
        json_t *r = json_object_get(json_object_get(e, "cleaner"), "dirty_ratio");
        if (p >= 0 && p < n && json_is_number(r))
            ratio[p] = json_number_value(r);
    }
    json_decref(j);
    return 0;
}

int st_cli_topic_describe(int argc, char **argv)
{
    static const char usage[] = "topic describe NAME [--admin HOST:PORT]";
    st_cli_strlist_t pos = {0};
    const char *admin_opt = NULL;
    const st_cli_opt_t opts[] = {
        {0, "admin", ST_CLI_OPT_STR, &admin_opt, "HOST:PORT",
         "the broker's admin API, for a compacted topic's cleanable ratio (default "
         "$STRATA_ADMIN, else the first broker's host, port 9644)"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Prints a topic's partitions (leader, replicas, in-sync replicas, "
                          "first and next\noffset; for a compacted topic the cleanable "
                          "ratio: bytes not yet compacted over\nthe bytes the cleaner may "
                          "compact) and its configs.",
                          opts, true, &pos, 1, 1);
    if (rc >= 0)
        goto out;
    rc = ST_CLI_FAIL;
    const char *name = pos.v[0];
    rd_kafka_t *rk = st_cli_admin_client();
    if (!rk)
        goto out;
    const rd_kafka_metadata_t *md = st_cli_metadata(rk, NULL);
    if (!md)
        goto destroy;
    const rd_kafka_metadata_topic_t *t = st_cli_md_topic(md, name);
    if (!t || t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        st_cli_errorf("no topic named '%s' — check the name with `strata topic list`", name);
        goto md_free;
    }
    if (t->err) {
        st_cli_report(name, t->err, NULL);
        goto md_free;
    }
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_event_t *ev = describe_configs(rk, q, name, true);
    const rd_kafka_ConfigResource_t *res = ev ? config_resource(ev, true) : NULL;
    size_t nconf = 0;
    const rd_kafka_ConfigEntry_t **ents = res ? rd_kafka_ConfigResource_configs(res, &nconf) : NULL;
    bool compact = false;
    for (size_t i = 0; i < nconf; i++) {
        const char *v = rd_kafka_ConfigEntry_value(ents[i]);
        if (strcmp(rd_kafka_ConfigEntry_name(ents[i]), "cleanup.policy") == 0 && v &&
            strstr(v, "compact"))
            compact = true;
    }
    double *ratio = NULL;
    char admin[512], why[512] = "";
    if (compact && t->partition_cnt > 0) {
        ratio = calloc((size_t)t->partition_cnt, sizeof *ratio);
        admin_address(admin_opt, admin, sizeof admin);
        if (ratio && dirty_ratios(admin, name, ratio, t->partition_cnt, why, sizeof why) < 0) {
            free(ratio);
            ratio = NULL;
        }
    }
    printf("topic:       %s\npartitions:  %d\n\n", t->topic, t->partition_cnt);
    printf("%-9s %-6s %-12s %-12s %12s %12s %12s%s\n", "PARTITION", "LEADER", "REPLICAS", "ISR",
           "START", "END", "MESSAGES", compact ? "  CLEANABLE" : "");
    /* the offsets of every led partition, asked at once and bounded by --timeout (a leader
     * that went down and is not yet replaced answers nothing) */
    st_cli_wm_t *wm = calloc((size_t)(t->partition_cnt > 0 ? t->partition_cnt : 1), sizeof *wm);
    int nwm = 0;
    for (int p = 0; wm && p < t->partition_cnt; p++)
        if (t->partitions[p].leader >= 0)
            wm[nwm++] = (st_cli_wm_t){.topic = name, .partition = t->partitions[p].id};
    int behind = wm ? st_cli_watermarks(rk, wm, nwm) : 0;
    for (int p = 0, k = 0; p < t->partition_cnt; p++) {
        const rd_kafka_metadata_partition_t *pp = &t->partitions[p];
        printf("%-9d %-6d", pp->id, pp->leader);
        print_ids(pp->replicas, pp->replica_cnt);
        print_ids(pp->isrs, pp->isr_cnt);
        int64_t lo = -1, hi = -1;
        rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE;
        if (!wm) {
            e = RD_KAFKA_RESP_ERR__FAIL;
        } else if (pp->leader >= 0) {
            e = wm[k].err;
            lo = wm[k].lo;
            hi = wm[k++].hi;
        }
        if (e)
            printf(" %12s %12s %12s", "?", "?", "?");
        else
            printf(" %12" PRId64 " %12" PRId64 " %12" PRId64, lo, hi, hi - lo);
        if (compact) {
            bool known = ratio && pp->id >= 0 && pp->id < t->partition_cnt;
            if (known && !isnan(ratio[pp->id]))
                printf("  %9.2f", ratio[pp->id]);
            else
                printf("  %9s", "?");
        }
        if (e == RD_KAFKA_RESP_ERR__TIMED_OUT)
            printf("  (no answer from broker %d within --timeout)", pp->leader);
        else if (e)
            printf("  (%s)", rd_kafka_err2str(e));
        printf("\n");
    }
    free(wm);
    if (compact && !ratio)
        printf("\ncleanable ratio unknown: %s (point --admin or STRATA_ADMIN at the broker's "
               "admin.listen)\n",
               why[0] ? why : "out of memory");
    free(ratio);
    if (!res) {
        printf("\nconfigs: unavailable (the broker did not answer DescribeConfigs)\n");
    } else {
        printf("\n%-40s %-24s %s\n", "CONFIG", "VALUE", "SOURCE");
        for (size_t i = 0; i < nconf; i++) {
            const char *v = rd_kafka_ConfigEntry_value(ents[i]);
            printf("%-40s %-24s %s\n", rd_kafka_ConfigEntry_name(ents[i]),
                   rd_kafka_ConfigEntry_is_sensitive(ents[i]) ? "(sensitive)"
                   : v                                        ? v
                                                              : "(null)",
                   rd_kafka_ConfigSource_name(rd_kafka_ConfigEntry_source(ents[i])));
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rc = ST_CLI_OK;
    if (behind)
        st_cli_exit(rc); /* a request still waits on a broker that is gone: do not wait too */
md_free:
    rd_kafka_metadata_destroy(md);
destroy:
    st_cli_client_destroy(rk);
out:
    st_cli_strlist_fini(&pos);
    return rc;
}

int st_cli_topic_delete(int argc, char **argv)
{
    static const char usage[] = "topic delete NAME...";
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage, "Deletes topics and all their messages.", opts, true,
                          &pos, 1, 1000);
    if (rc >= 0)
        goto out;
    rc = ST_CLI_FAIL;
    rd_kafka_t *rk = st_cli_admin_client();
    if (!rk)
        goto out;
    rd_kafka_DeleteTopic_t **dt = calloc(pos.n, sizeof(*dt));
    for (size_t i = 0; i < pos.n; i++)
        dt[i] = rd_kafka_DeleteTopic_new(pos.v[i]);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_DELETETOPICS);
    rd_kafka_DeleteTopics(rk, dt, pos.n, o, q);
    rd_kafka_event_t *ev =
        st_cli_admin_wait(q, RD_KAFKA_EVENT_DELETETOPICS_RESULT, "cannot delete topics");
    if (ev) {
        size_t n;
        const rd_kafka_topic_result_t **res =
            rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
        int failed = 0;
        for (size_t i = 0; i < n; i++) {
            rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
            if (e) {
                char what[300];
                snprintf(what, sizeof(what), "cannot delete topic %s",
                         rd_kafka_topic_result_name(res[i]));
                st_cli_report(what, e, rd_kafka_topic_result_error_string(res[i]));
                failed++;
            } else {
                printf("deleted topic %s\n", rd_kafka_topic_result_name(res[i]));
            }
        }
        rc = failed ? ST_CLI_FAIL : ST_CLI_OK;
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_DeleteTopic_destroy_array(dt, pos.n);
    free(dt);
    st_cli_client_destroy(rk);
out:
    st_cli_strlist_fini(&pos);
    return rc;
}

int st_cli_topic_delete_records(int argc, char **argv)
{
    static const char usage[] = "topic delete-records NAME --before OFFSET [-p PARTITION]";
    int64_t before = -2, partition = -1;
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {
        {0, "before", ST_CLI_OPT_INT, &before, "OFFSET",
         "delete every record below this offset (-1: up to the high watermark, all of it)"},
        {'p', "partition", ST_CLI_OPT_INT, &partition, "P",
         "only this partition (default: every partition)"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Deletes a topic's records below an offset (Kafka's DeleteRecords: the "
                          "log start moves up;\nsegments wholly below it are removed). Prints "
                          "each partition's new log start.",
                          opts, true, &pos, 1, 1);
    if (rc >= 0)
        goto out;
    if (before < -1) {
        rc = st_cli_usage_error(usage, "--before wants an offset (or -1 for everything)");
        goto out;
    }
    rc = ST_CLI_FAIL;
    const char *name = pos.v[0];
    rd_kafka_t *rk = st_cli_admin_client();
    if (!rk)
        goto out;
    const rd_kafka_metadata_t *md = st_cli_metadata(rk, name);
    const rd_kafka_metadata_topic_t *t = md ? st_cli_md_topic(md, name) : NULL;
    if (md && (!t || t->err)) {
        st_cli_errorf("no topic named '%s' — check the name with `strata topic list`", name);
    } else if (md && partition >= t->partition_cnt) {
        st_cli_errorf("%s has %d partition(s): there is no partition %" PRId64, name,
                      t->partition_cnt, partition);
    } else if (md) {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(t->partition_cnt);
        for (int p = 0; p < t->partition_cnt; p++)
            if (partition < 0 || p == partition)
                rd_kafka_topic_partition_list_add(l, name, p)->offset =
                    before < 0 ? RD_KAFKA_OFFSET_END : before;
        rd_kafka_DeleteRecords_t *dr = rd_kafka_DeleteRecords_new(l);
        rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
        rd_kafka_AdminOptions_t *o = st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_DELETERECORDS);
        rd_kafka_DeleteRecords(rk, &dr, 1, o, q);
        rd_kafka_event_t *ev =
            st_cli_admin_wait(q, RD_KAFKA_EVENT_DELETERECORDS_RESULT, "cannot delete records");
        if (ev) {
            const rd_kafka_topic_partition_list_t *res =
                rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
            int failed = 0;
            for (int i = 0; res && i < res->cnt; i++) {
                const rd_kafka_topic_partition_t *r = &res->elems[i];
                if (r->err) {
                    char what[300];
                    snprintf(what, sizeof what, "cannot delete records of %s/%d", r->topic,
                             (int)r->partition);
                    st_cli_report(what, r->err, NULL);
                    failed++;
                } else {
                    printf("%s/%d: log start now %" PRId64 "\n", r->topic, (int)r->partition,
                           r->offset);
                }
            }
            rc = failed ? ST_CLI_FAIL : ST_CLI_OK;
            rd_kafka_event_destroy(ev);
        }
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_queue_destroy(q);
        rd_kafka_DeleteRecords_destroy(dr);
        rd_kafka_topic_partition_list_destroy(l);
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    st_cli_client_destroy(rk);
out:
    st_cli_strlist_fini(&pos);
    return rc;
}

int st_cli_topic_add_partitions(int argc, char **argv)
{
    static const char usage[] = "topic add-partitions NAME -n TOTAL";
    int64_t total = 0;
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {
        {'n', "total", ST_CLI_OPT_INT, &total, "TOTAL", "the partition count to grow to"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Grows a topic to TOTAL partitions (partitions are never removed).", opts,
                          true, &pos, 1, 1);
    if (rc >= 0)
        goto out;
    if (total < 1 || total > 1000000) {
        rc = st_cli_usage_error(usage, "-n TOTAL (the new partition count) is required");
        goto out;
    }
    rc = ST_CLI_FAIL;
    rd_kafka_t *rk = st_cli_admin_client();
    if (!rk)
        goto out;
    char err[512];
    rd_kafka_NewPartitions_t *np =
        rd_kafka_NewPartitions_new(pos.v[0], (size_t)total, err, sizeof(err));
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_CREATEPARTITIONS);
    rd_kafka_CreatePartitions(rk, &np, 1, o, q);
    rd_kafka_event_t *ev =
        st_cli_admin_wait(q, RD_KAFKA_EVENT_CREATEPARTITIONS_RESULT, "cannot add partitions");
    if (ev) {
        size_t n;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreatePartitions_result_topics(rd_kafka_event_CreatePartitions_result(ev), &n);
        rc = ST_CLI_OK;
        for (size_t i = 0; i < n; i++) {
            rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
            if (e) {
                char what[300];
                snprintf(what, sizeof(what), "cannot add partitions to %s",
                         rd_kafka_topic_result_name(res[i]));
                st_cli_report(what, e, rd_kafka_topic_result_error_string(res[i]));
                rc = ST_CLI_FAIL;
            } else {
                printf("topic %s now has %" PRId64 " partitions\n",
                       rd_kafka_topic_result_name(res[i]), total);
            }
        }
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewPartitions_destroy(np);
    st_cli_client_destroy(rk);
out:
    st_cli_strlist_fini(&pos);
    return rc;
}

int st_cli_topic_alter_config(int argc, char **argv)
{
    static const char usage[] = "topic alter-config NAME [--set K=V]... [--delete K]...";
    st_cli_strlist_t sets = {0}, dels = {0}, pos = {0};
    const st_cli_opt_t opts[] = {
        {'s', "set", ST_CLI_OPT_LIST, &sets, "K=V", "set a topic config"},
        {'d', "delete", ST_CLI_OPT_LIST, &dels, "K", "return a config to its default"},
        ST_CLI_OPT_END,
    };
    int rc =
        st_cli_parse(argc, argv, usage, "Changes a topic's configs; the others keep their values.",
                     opts, true, &pos, 1, 1);
    if (rc >= 0)
        goto out;
    if (!sets.n && !dels.n) {
        rc = st_cli_usage_error(usage, "nothing to change: give --set K=V or --delete K");
        goto out;
    }
    for (size_t i = 0; i < sets.n; i++)
        if (!strchr(sets.v[i], '=') || sets.v[i][0] == '=') {
            rc = st_cli_usage_error(usage, "--set wants key=value, not '%s'", sets.v[i]);
            goto out;
        }
    rc = ST_CLI_FAIL;
    const char *name = pos.v[0];
    rd_kafka_t *rk = st_cli_admin_client();
    if (!rk)
        goto out;
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_event_t *ev = describe_configs(rk, q, name, false);
    const rd_kafka_ConfigResource_t *cur = ev ? config_resource(ev, false) : NULL;
    if (!cur)
        goto free_q;
    rd_kafka_ConfigResource_t *cr = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, name);
    size_t n;
    const rd_kafka_ConfigEntry_t **ents = rd_kafka_ConfigResource_configs(cur, &n);
    /* Keep the topic's own (dynamic) settings that this call does not touch. */
    for (size_t i = 0; i < n; i++) {
        const char *k = rd_kafka_ConfigEntry_name(ents[i]);
        if (rd_kafka_ConfigEntry_source(ents[i]) != RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG)
            continue;
        bool touched = false;
        for (size_t d = 0; d < dels.n; d++)
            touched |= !strcmp(dels.v[d], k);
        for (size_t s = 0; s < sets.n; s++)
            touched |= !strncmp(sets.v[s], k, strlen(k)) && sets.v[s][strlen(k)] == '=';
        if (!touched)
            rd_kafka_ConfigResource_set_config(cr, k, rd_kafka_ConfigEntry_value(ents[i]));
    }
    for (size_t s = 0; s < sets.n; s++) {
        char *buf;
        const char *k, *v;
        st_cli_split_kv(sets.v[s], &buf, &k, &v);
        rd_kafka_ConfigResource_set_config(cr, k, v);
        free(buf);
    }
    rd_kafka_event_destroy(ev);
    ev = NULL;
    rd_kafka_AdminOptions_t *o = st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_ALTERCONFIGS);
    rd_kafka_AlterConfigs(rk, &cr, 1, o, q);
    rd_kafka_event_t *aev =
        st_cli_admin_wait(q, RD_KAFKA_EVENT_ALTERCONFIGS_RESULT, "cannot change topic configs");
    if (aev) {
        const rd_kafka_ConfigResource_t **res =
            rd_kafka_AlterConfigs_result_resources(rd_kafka_event_AlterConfigs_result(aev), &n);
        if (n == 1 && rd_kafka_ConfigResource_error(res[0])) {
            st_cli_report("cannot change topic configs", rd_kafka_ConfigResource_error(res[0]),
                          rd_kafka_ConfigResource_error_string(res[0]));
        } else {
            for (size_t s = 0; s < sets.n; s++)
                printf("set %s on %s\n", sets.v[s], name);
            for (size_t d = 0; d < dels.n; d++)
                printf("deleted %s on %s (back to default)\n", dels.v[d], name);
            rc = ST_CLI_OK;
        }
        rd_kafka_event_destroy(aev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_ConfigResource_destroy(cr);
free_q:
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    st_cli_client_destroy(rk);
out:
    st_cli_strlist_fini(&sets);
    st_cli_strlist_fini(&dels);
    st_cli_strlist_fini(&pos);
    return rc;
}
