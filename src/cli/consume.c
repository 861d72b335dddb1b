/*
 * consume.c — `strata consume TOPIC`: read messages and print them.
 *
 * Without --group the tool reads the chosen partitions directly (librdkafka's simple consumer,
 * no group traffic, any start offset); with --group it joins the group, reads what the group
 * assigns it from the group's committed offsets (--offset start|end picks where a new group
 * starts) and commits what it printed when it exits. Either way it stops once every partition
 * it reads has reached its end, unless --follow; -n stops after COUNT messages.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "cli/cmds.h"
#include "cli/common.h"
#include "cli/fmt.h"

typedef struct part_state {
    bool active; /* being read (assigned, in group mode) */
    bool eof;    /* reached the end since the last message */
} part_state_t;

typedef struct consume_state {
    part_state_t *parts; /* by partition id */
    int nparts;
    st_cli_fmt_t fmt;
    bool json;
    st_buf_t out;
    int64_t printed;
} consume_state_t;

static bool all_at_end(const consume_state_t *cs)
{
    int active = 0;
    for (int i = 0; i < cs->nparts; i++) {
        if (!cs->parts[i].active)
            continue;
        active++;
        if (!cs->parts[i].eof)
            return false;
    }
    return active > 0;
}

static void print_message(consume_state_t *cs, const rd_kafka_message_t *m)
{
    st_cli_header_t hv[64];
    size_t nh = 0;
    rd_kafka_headers_t *hdrs;
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char *name;
        const void *val;
        size_t size;
        while (nh < 64 && !rd_kafka_header_get_all(hdrs, nh, &name, &val, &size)) {
            hv[nh] = (st_cli_header_t){name, val, size};
            nh++;
        }
    }
    st_cli_msg_t cm = {
        .topic = rd_kafka_topic_name(m->rkt),
        .partition = m->partition,
        .offset = m->offset,
        .timestamp = rd_kafka_message_timestamp(m, NULL),
        .key = m->key,
        .key_len = m->key_len,
        .value = m->payload,
        .value_len = m->len,
        .headers = hv,
        .header_count = nh,
    };
    st_buf_clear(&cs->out);
    if (cs->json)
        st_cli_fmt_json(&cm, &cs->out);
    else
        st_cli_fmt_render(&cs->fmt, &cm, &cs->out);
    st_buf_put_u8(&cs->out, '\n');
    fwrite(cs->out.data, 1, cs->out.len, stdout);
    cs->printed++;
}

/*
 * Handles one polled message or event; returns 0 to go on, 1 when the run is complete,
 * -1 on an error that ends it.
 */
static int handle(consume_state_t *cs, rd_kafka_message_t *m, int64_t count, bool follow)
{
    int32_t p = m->partition;
    bool known = p >= 0 && p < cs->nparts;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        if (known)
            cs->parts[p].eof = true;
        return !follow && all_at_end(cs) ? 1 : 0;
    }
    if (m->err) {
        if (m->err == RD_KAFKA_RESP_ERR__TRANSPORT ||
            m->err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) {
            if (st_cli_common.verbose)
                st_cli_report("connection trouble (retrying)", m->err, rd_kafka_message_errstr(m));
            return 0;
        }
        char what[300];
        snprintf(what, sizeof(what), "cannot read %s [%d]",
                 m->rkt ? rd_kafka_topic_name(m->rkt) : "?", p);
        st_cli_report(what, m->err, rd_kafka_message_errstr(m));
        return -1;
    }
    if (known)
        cs->parts[p].eof = false;
    print_message(cs, m);
    if (count > 0 && cs->printed >= count)
        return 1;
    return 0;
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    consume_state_t *cs = opaque;
    bool coop = !strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE");
    bool assign = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
    for (int i = 0; i < parts->cnt; i++) {
        int32_t p = parts->elems[i].partition;
        if (p >= 0 && p < cs->nparts) {
            cs->parts[p].active = assign;
            cs->parts[p].eof = false;
        }
    }
    if (coop) {
        rd_kafka_error_t *e = assign ? rd_kafka_incremental_assign(rk, parts)
                                     : rd_kafka_incremental_unassign(rk, parts);
        if (e)
            rd_kafka_error_destroy(e);
    } else {
        rd_kafka_assign(rk, assign ? parts : NULL);
    }
}

int st_cli_consume(int argc, char **argv)
{
    static const char usage[] =
        "consume TOPIC [--partition P]... [--offset start|end|N|-N|@TS] [--group G] [-n COUNT] "
        "[--follow] [--format FMT | --json]";
    const char *offset_s = NULL, *group = NULL, *format = "%v";
    int64_t count = 0;
    bool follow = false, json = false;
    st_cli_strlist_t parts_s = {0}, pos = {0};
    const st_cli_opt_t opts[] = {
        {'p', "partition", ST_CLI_OPT_LIST, &parts_s, "P", "read only this partition"},
        {'o', "offset", ST_CLI_OPT_STR, &offset_s, "WHERE",
         "start|end|N|-N (N before the end)|@MS (timestamp); default start"},
        {'g', "group", ST_CLI_OPT_STR, &group, "G",
         "consume as a member of group G and commit progress"},
        {'n', "count", ST_CLI_OPT_INT, &count, "COUNT", "stop after COUNT messages"},
        {'f', "follow", ST_CLI_OPT_FLAG, &follow, NULL, "keep waiting for new messages at the end"},
        {'F', "format", ST_CLI_OPT_STR, &format, "FMT",
         "%t topic %p partition %o offset %k key %v value %T timestamp %h headers (%v)"},
        {'j', "json", ST_CLI_OPT_FLAG, &json, NULL, "print each message as a JSON line"},
        ST_CLI_OPT_END,
    };
    consume_state_t cs = {0};
    st_buf_init(&cs.out);
    int rc = st_cli_parse(argc, argv, usage,
                          "Reads messages and prints one line each; stops at the end of the "
                          "partitions unless --follow.",
                          opts, true, &pos, 1, 1);
    if (rc >= 0)
        goto out;
    const char *topic = pos.v[0];
    int64_t start = ST_CLI_OFFSET_BEGINNING;
    bool is_ts = false;
    if (offset_s && st_cli_parse_offset(offset_s, &start, &is_ts) < 0) {
        rc = st_cli_usage_error(usage,
                                "--offset wants start, end, N, -N or @TIMESTAMP_MS, not "
                                "'%s'",
                                offset_s);
        goto out;
    }
    if (group && offset_s && start != ST_CLI_OFFSET_BEGINNING && start != ST_CLI_OFFSET_END) {
        rc = st_cli_usage_error(usage, "with --group, --offset is start or end (where a new "
                                       "group begins); move a group with `strata group seek`");
        goto out;
    }
    if (group && parts_s.n) {
        rc = st_cli_usage_error(usage, "--partition and --group do not mix: the group decides "
                                       "who reads which partition");
        goto out;
    }
    if (count < 0) {
        rc = st_cli_usage_error(usage, "-n COUNT must be positive");
        goto out;
    }
    if (json && format && strcmp(format, "%v")) {
        rc = st_cli_usage_error(usage, "--format and --json do not mix");
        goto out;
    }
    char err[256];
    if (!json && st_cli_fmt_compile(&cs.fmt, format, err, sizeof(err)) < 0) {
        rc = st_cli_usage_error(usage, "%s", err);
        goto out;
    }
    cs.json = json;
    rc = ST_CLI_FAIL;
    rd_kafka_conf_t *conf = st_cli_conf();
    if (!conf)
        goto out;
    if (st_cli_conf_set(conf, "enable.partition.eof", "true") < 0)
        goto conf_fail;
    if (group) {
        if (st_cli_conf_set(conf, "group.id", group) < 0 ||
            st_cli_conf_set(conf, "auto.offset.reset",
                            start == ST_CLI_OFFSET_END ? "latest" : "earliest") < 0)
            goto conf_fail;
        rd_kafka_conf_set_opaque(conf, &cs);
        rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    }
    rd_kafka_t *rk = st_cli_client(RD_KAFKA_CONSUMER, conf);
    if (!rk)
        goto out;
    const rd_kafka_metadata_t *md = st_cli_metadata(rk, NULL);
    if (!md)
        goto destroy;
    const rd_kafka_metadata_topic_t *t = st_cli_md_topic(md, topic);
    if (!t || t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        st_cli_errorf("no topic named '%s' — check the name with `strata topic list`", topic);
        rd_kafka_metadata_destroy(md);
        goto destroy;
    }
    cs.nparts = 0;
    for (int i = 0; i < t->partition_cnt; i++)
        if (t->partitions[i].id + 1 > cs.nparts)
            cs.nparts = t->partitions[i].id + 1;
    rd_kafka_metadata_destroy(md);
    cs.parts = calloc((size_t)cs.nparts + 1, sizeof(*cs.parts));
    for (size_t i = 0; i < parts_s.n; i++) {
        int64_t p;
        if (st_cli_parse_i64(parts_s.v[i], &p) < 0 || p < 0 || p >= cs.nparts) {
            st_cli_errorf("topic '%s' has partitions 0..%d; '%s' is not one of them", topic,
                          cs.nparts - 1, parts_s.v[i]);
            rc = ST_CLI_USAGE;
            goto destroy;
        }
        cs.parts[p].active = true;
    }
    if (!parts_s.n && !group)
        for (int i = 0; i < cs.nparts; i++)
            cs.parts[i].active = true;

    rd_kafka_queue_t *q = NULL;
    rd_kafka_topic_t *rkt = NULL;
    if (group) {
        rd_kafka_poll_set_consumer(rk);
        rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(sub, topic, RD_KAFKA_PARTITION_UA);
        rd_kafka_resp_err_t e = rd_kafka_subscribe(rk, sub);
        rd_kafka_topic_partition_list_destroy(sub);
        if (e) {
            st_cli_report("cannot subscribe", e, NULL);
            goto destroy;
        }
    } else {
        /* Resolve the start offset of each partition, then start reading it. */
        rd_kafka_topic_partition_list_t *tl = rd_kafka_topic_partition_list_new(cs.nparts);
        for (int i = 0; i < cs.nparts; i++)
            if (cs.parts[i].active)
                rd_kafka_topic_partition_list_add(tl, topic, i)->offset = start;
        if (is_ts) {
            rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(rk, tl, (int)st_cli_time_left_ms());
            if (e) {
                st_cli_report("cannot look up offsets by timestamp", e, NULL);
                rd_kafka_topic_partition_list_destroy(tl);
                goto destroy;
            }
            for (int i = 0; i < tl->cnt; i++)
                if (tl->elems[i].offset < 0) /* nothing at or after: start at the end */
                    tl->elems[i].offset = RD_KAFKA_OFFSET_END;
        }
        q = rd_kafka_queue_new(rk);
        rkt = rd_kafka_topic_new(rk, topic, NULL);
        for (int i = 0; i < tl->cnt; i++)
            if (rd_kafka_consume_start_queue(rkt, tl->elems[i].partition, tl->elems[i].offset, q) <
                0) {
                st_cli_report("cannot start reading", rd_kafka_last_error(), NULL);
                rd_kafka_topic_partition_list_destroy(tl);
                goto stop;
            }
        rd_kafka_topic_partition_list_destroy(tl);
    }

    rc = ST_CLI_OK;
    /* Output is flushed whenever the queue runs dry, so a pipe (`--follow | grep`) sees each
     * message as it comes, while a backlog is still written in large blocks. */
    bool unflushed = false;
    int64_t assign_deadline = st_mono_ms() + (int64_t)st_cli_common.timeout_ms;
    bool assigned = !group;
    while (!st_cli_stop) {
        int wait_ms = unflushed ? 0 : 200;
        rd_kafka_message_t *m =
            group ? rd_kafka_consumer_poll(rk, wait_ms) : rd_kafka_consume_queue(q, wait_ms);
        for (int i = 0; !assigned && i < cs.nparts; i++)
            assigned = cs.parts[i].active;
        if (!assigned && !follow && st_mono_ms() > assign_deadline) {
            /* Without --follow a run must end: a group that never hands this member a
             * partition (all taken by others, or no coordinator) is a failure to report. */
            fprintf(stderr,
                    "strata: group %s gave this consumer no partition of %s within the timeout "
                    "— are other members holding them all? (--timeout to wait longer)\n",
                    group, topic);
            if (m)
                rd_kafka_message_destroy(m);
            rc = ST_CLI_FAIL;
            break;
        }
        if (!m) {
            if (unflushed)
                fflush(stdout);
            unflushed = false;
            continue;
        }
        unflushed = true;
        int r = handle(&cs, m, count, follow);
        rd_kafka_message_destroy(m);
        if (r) {
            rc = r < 0 ? ST_CLI_FAIL : ST_CLI_OK;
            break;
        }
    }
    fflush(stdout);
stop:
    if (rkt) {
        for (int i = 0; i < cs.nparts; i++)
            if (cs.parts[i].active)
                rd_kafka_consume_stop(rkt, i);
        rd_kafka_topic_destroy(rkt);
    }
    if (q)
        rd_kafka_queue_destroy(q);
    if (group) {
        rd_kafka_resp_err_t e = rd_kafka_consumer_close(rk);
        if (e && rc == ST_CLI_OK) {
            st_cli_report("cannot commit the group's progress", e, NULL);
            rc = ST_CLI_FAIL;
        }
    }
destroy:
    st_cli_client_destroy(rk);
    goto out;
conf_fail:
    rd_kafka_conf_destroy(conf);
out:
    free(cs.parts);
    st_cli_fmt_fini(&cs.fmt);
    st_buf_fini(&cs.out);
    st_cli_strlist_fini(&parts_s);
    st_cli_strlist_fini(&pos);
    return rc;
}
