/*
 * group.c — `strata group list|describe|seek|delete`.
 *
 * Group state and members come from the Admin API (ListGroups, DescribeGroups); committed
 * offsets from OffsetFetch, read through a consumer handle that carries the group's id but
 * never joins it (so looking at a group does not disturb it). `seek` commits new offsets the
 * same way, and only for a group with no members: moving a live group's offsets under its
 * consumers would be overwritten by their next commit, or worse, not.
 *
 * A KIP-848 consumer group is no classic group (DescribeGroups answers Dead): `describe` then
 * asks its coordinator with ConsumerGroupDescribe (kreq.h, which librdkafka 2.0 lacks) and shows
 * the protocol, the group and assignment epochs, and per member its epoch, its current
 * assignment and its target.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cli/cmds.h"
#include "cli/common.h"
#include "cli/kreq.h"
#include "proto/kerr.h"

int st_cli_group_list(int argc, char **argv)
{
    static const char usage[] = "group list";
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage, "Lists consumer groups and their states.", opts, true,
                          &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc >= 0)
        return rc;
    rd_kafka_t *rk = st_cli_admin_client();
    if (!rk)
        return ST_CLI_FAIL;
    rc = ST_CLI_FAIL;
    const rd_kafka_metadata_t *md = st_cli_metadata(rk, NULL);
    if (!md)
        goto destroy;
    rd_kafka_metadata_destroy(md);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS);
    rd_kafka_ListConsumerGroups(rk, o, q);
    rd_kafka_event_t *ev =
        st_cli_admin_wait(q, RD_KAFKA_EVENT_LISTCONSUMERGROUPS_RESULT, "cannot list groups");
    if (ev) {
        const rd_kafka_ListConsumerGroups_result_t *res =
            rd_kafka_event_ListConsumerGroups_result(ev);
        size_t n, nerr;
        const rd_kafka_ConsumerGroupListing_t **gs =
            rd_kafka_ListConsumerGroups_result_valid(res, &n);
        const rd_kafka_error_t **errs = rd_kafka_ListConsumerGroups_result_errors(res, &nerr);
        printf("%-40s %s\n", "GROUP", "STATE");
        for (size_t i = 0; i < n; i++)
            printf("%-40s %s\n", rd_kafka_ConsumerGroupListing_group_id(gs[i]),
                   rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupListing_state(gs[i])));
        for (size_t i = 0; i < nerr; i++)
            st_cli_report("a broker did not list its groups", rd_kafka_error_code(errs[i]),
                          rd_kafka_error_string(errs[i]));
        rc = nerr ? ST_CLI_FAIL : ST_CLI_OK;
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
destroy:
    st_cli_client_destroy(rk);
    return rc;
}

/* Describes one group; returns the result event (caller destroys) and sets *desc, or NULL. */
static rd_kafka_event_t *describe_group(rd_kafka_t *rk, rd_kafka_queue_t *q, const char *group,
                                        const rd_kafka_ConsumerGroupDescription_t **desc)
{
    rd_kafka_AdminOptions_t *o = st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    const char *groups[] = {group};
    rd_kafka_DescribeConsumerGroups(rk, groups, 1, o, q);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_event_t *ev = st_cli_admin_wait(q, RD_KAFKA_EVENT_DESCRIBECONSUMERGROUPS_RESULT,
                                             "cannot describe the group");
    if (!ev)
        return NULL;
    size_t n;
    const rd_kafka_ConsumerGroupDescription_t **ds = rd_kafka_DescribeConsumerGroups_result_groups(
        rd_kafka_event_DescribeConsumerGroups_result(ev), &n);
    const rd_kafka_error_t *e = n == 1 ? rd_kafka_ConsumerGroupDescription_error(ds[0]) : NULL;
    if (n != 1 || e) {
        st_cli_report("cannot describe the group",
                      e ? rd_kafka_error_code(e) : RD_KAFKA_RESP_ERR__BAD_MSG,
                      e ? rd_kafka_error_string(e) : "no answer for the group");
        rd_kafka_event_destroy(ev);
        return NULL;
    }
    *desc = ds[0];
    return ev;
}

/* A consumer handle carrying the group id, for OffsetFetch/OffsetCommit; it never joins. */
static rd_kafka_t *group_handle(const char *group)
{
    rd_kafka_conf_t *conf = st_cli_conf();
    if (!conf)
        return NULL;
    if (st_cli_conf_set(conf, "group.id", group) < 0 ||
        st_cli_conf_set(conf, "enable.auto.commit", "false") < 0) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return st_cli_client(RD_KAFKA_CONSUMER, conf);
}

/*
 * Adds every partition of each topic in `topics` to list (partitions from metadata). A topic
 * that does not exist is an error when `strict`, and skipped otherwise (a group may hold
 * commits for a topic deleted since).
 */
static int add_topics(rd_kafka_t *rk, const st_cli_strlist_t *topics,
                      rd_kafka_topic_partition_list_t *list, bool strict)
{
    if (!topics->n)
        return 0;
    const rd_kafka_metadata_t *md = st_cli_metadata(rk, NULL);
    if (!md)
        return -1;
    for (size_t i = 0; i < topics->n; i++) {
        const rd_kafka_metadata_topic_t *t = st_cli_md_topic(md, topics->v[i]);
        if (!t || t->err) {
            if (!strict)
                continue;
            st_cli_errorf("no topic named '%s' — check the name with `strata topic list`",
                          topics->v[i]);
            rd_kafka_metadata_destroy(md);
            return -1;
        }
        for (int p = 0; p < t->partition_cnt; p++)
            if (!rd_kafka_topic_partition_list_find(list, t->topic, t->partitions[p].id))
                rd_kafka_topic_partition_list_add(list, t->topic, t->partitions[p].id);
    }
    rd_kafka_metadata_destroy(md);
    return 0;
}

/*
 * Widens list to every partition of the topics it names: a consumer that stopped after a few
 * messages may have committed only the partitions it read, and the rest of its topics are
 * still the group's backlog.
 */
static int widen_to_topics(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *list)
{
    st_cli_strlist_t names = {0};
    for (int i = 0; i < list->cnt; i++) {
        bool seen = false;
        for (size_t j = 0; j < names.n && !seen; j++)
            seen = !strcmp(names.v[j], list->elems[i].topic);
        if (!seen && st_cli_strlist_push(&names, list->elems[i].topic) < 0) {
            st_cli_strlist_fini(&names);
            return -1;
        }
    }
    /* The names point into list, whose topic strings stay put while it grows. */
    int rc = add_topics(rk, &names, list, false);
    st_cli_strlist_fini(&names);
    return rc;
}

/*
 * Fills `list` with the partitions the group has committed offsets for (OffsetFetch for all
 * topics). Returns 0, or -1 when the broker cannot list them.
 */
static int committed_partitions(rd_kafka_t *rk, rd_kafka_queue_t *q, const char *group,
                                rd_kafka_topic_partition_list_t *list)
{
    rd_kafka_ListConsumerGroupOffsets_t *req = rd_kafka_ListConsumerGroupOffsets_new(group, NULL);
    rd_kafka_AdminOptions_t *o =
        st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS);
    rd_kafka_ListConsumerGroupOffsets(rk, &req, 1, o, q);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_ListConsumerGroupOffsets_destroy(req);
    rd_kafka_event_t *ev = st_cli_admin_wait(q, RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT,
                                             "cannot read the group's committed offsets");
    if (!ev)
        return -1;
    size_t n;
    const rd_kafka_group_result_t **gr = rd_kafka_ListConsumerGroupOffsets_result_groups(
        rd_kafka_event_ListConsumerGroupOffsets_result(ev), &n);
    int rc = 0;
    if (n == 1 && rd_kafka_group_result_error(gr[0])) {
        const rd_kafka_error_t *e = rd_kafka_group_result_error(gr[0]);
        st_cli_report("cannot read the group's committed offsets", rd_kafka_error_code(e),
                      rd_kafka_error_string(e));
        rc = -1;
    } else if (n == 1) {
        const rd_kafka_topic_partition_list_t *pl = rd_kafka_group_result_partitions(gr[0]);
        for (int i = 0; pl && i < pl->cnt; i++)
            if (!rd_kafka_topic_partition_list_find(list, pl->elems[i].topic,
                                                    pl->elems[i].partition))
                rd_kafka_topic_partition_list_add(list, pl->elems[i].topic, pl->elems[i].partition);
    }
    rd_kafka_event_destroy(ev);
    return rc;
}

/* "t/0,t/1" of a described assignment, into buf. */
static const char *cg_parts(char *buf, size_t n, const st_kstr_t *names,
                            const int32_t *const *parts, const int32_t *counts, int32_t ntopics)
{
    size_t at = 0;
    buf[0] = 0;
    for (int32_t t = 0; t < ntopics; t++)
        for (int32_t k = 0; k < counts[t] && at < n; k++)
            at += (size_t)snprintf(buf + at, n - at, "%s%.*s/%d", at ? "," : "", (int)names[t].len,
                                   names[t].ptr, parts[t][k]);
    if (!buf[0])
        snprintf(buf, n, "-");
    return buf;
}

/* ConsumerGroupDescribe from the group's coordinator: prints the group and adds its members'
 * partitions to `parts`. 1 when it is a consumer group, 0 when not (or the broker does not
 * serve the API), -1 after printing an error. */
static int consumer_describe(const char *group, rd_kafka_topic_partition_list_t *parts)
{
    int64_t deadline = st_mono_ms() + st_cli_common.timeout_ms;
    st_cli_kconn_t boot = {.fd = -1}, coord = {.fd = -1};
    st_arena_t arena;
    st_arena_init(&arena, 16384);
    int rc = -1;
    char *list = strdup(st_cli_common.brokers), *save = NULL;
    int open = -1;
    for (char *b = strtok_r(list, ",", &save); b && open; b = strtok_r(NULL, ",", &save))
        open = st_cli_kconn_open(&boot, b, deadline);
    free(list);
    if (open)
        goto out;
    int16_t v = st_cli_kconn_version(&boot, ST_KP_API_FIND_COORDINATOR, 1, 4);
    if (v < 0)
        goto out;
    st_kp_find_coordinator_req_t fq = {0};
    st_kstr_t key = st_kstr(group);
    fq.key = key;
    fq.coordinator_keys = &key;
    fq.coordinator_keys_count = 1;
    st_kp_find_coordinator_resp_t fr;
    if (ST_CLI_KCALL(&boot, FIND_COORDINATOR, find_coordinator, v, &fq, &arena, &fr))
        goto out;
    int16_t err =
        v >= 4 ? (fr.coordinators_count ? fr.coordinators[0].error_code : -1) : fr.error_code;
    if (err) {
        st_cli_errorf("no coordinator for group '%s' now: %s", group, st_kerr_name(err));
        goto out;
    }
    st_kstr_t host = v >= 4 ? fr.coordinators[0].host : fr.host;
    int32_t port = v >= 4 ? fr.coordinators[0].port : fr.port;
    char hp[300];
    snprintf(hp, sizeof hp, "%.*s:%d", (int)host.len, host.ptr, port);
    if (st_cli_kconn_open(&coord, hp, deadline))
        goto out;
    if (coord.vmax[ST_KP_API_CONSUMER_GROUP_DESCRIBE] < 0) {
        rc = 0; /* a broker without KIP-848 */
        goto out;
    }
    v = st_cli_kconn_version(&coord, ST_KP_API_CONSUMER_GROUP_DESCRIBE, 0, 1);
    if (v < 0)
        goto out;
    st_kp_consumer_group_describe_req_t dq = {0};
    dq.group_ids = &key;
    dq.group_ids_count = 1;
    st_kp_consumer_group_describe_resp_t dr;
    if (ST_CLI_KCALL(&coord, CONSUMER_GROUP_DESCRIBE, consumer_group_describe, v, &dq, &arena, &dr))
        goto out;
    const st_kp_consumer_group_describe_resp_group_t *g = dr.groups_count ? dr.groups : NULL;
    if (!g || g->error_code) {
        rc = 0; /* not a consumer group */
        goto out;
    }
    printf("group:            %s\nprotocol:         consumer (KIP-848)\nstate:            %.*s\n"
           "assignor:         %.*s\ngroup epoch:      %d\nassignment epoch: %d\n"
           "members:          %d\n",
           group, (int)g->group_state.len, g->group_state.ptr, (int)g->assignor_name.len,
           g->assignor_name.ptr, g->group_epoch, g->assignment_epoch, g->members_count);
    if (g->members_count)
        printf("\n%-24s %6s %-16s %-16s %-30s %s\n", "MEMBER", "EPOCH", "CLIENT-ID", "HOST",
               "ASSIGNMENT", "TARGET");
    for (int32_t i = 0; i < g->members_count; i++) {
        const st_kp_consumer_group_describe_resp_member_t *m = &g->members[i];
        enum { MAXT = 64 };
        st_kstr_t names[MAXT];
        const int32_t *pp[MAXT];
        int32_t counts[MAXT];
        int32_t na = m->assignment.topic_partitions_count < MAXT
                         ? m->assignment.topic_partitions_count
                         : MAXT;
        for (int32_t t = 0; t < na; t++) {
            names[t] = m->assignment.topic_partitions[t].topic_name;
            pp[t] = m->assignment.topic_partitions[t].partitions;
            counts[t] = m->assignment.topic_partitions[t].partitions_count;
            char topic[256];
            snprintf(topic, sizeof topic, "%.*s", (int)names[t].len, names[t].ptr);
            for (int32_t k = 0; k < counts[t]; k++)
                if (!rd_kafka_topic_partition_list_find(parts, topic, pp[t][k]))
                    rd_kafka_topic_partition_list_add(parts, topic, pp[t][k]);
        }
        char cur[512], tgt[512];
        cg_parts(cur, sizeof cur, names, pp, counts, na);
        int32_t nt = m->target_assignment.topic_partitions_count < MAXT
                         ? m->target_assignment.topic_partitions_count
                         : MAXT;
        for (int32_t t = 0; t < nt; t++) {
            names[t] = m->target_assignment.topic_partitions[t].topic_name;
            pp[t] = m->target_assignment.topic_partitions[t].partitions;
            counts[t] = m->target_assignment.topic_partitions[t].partitions_count;
        }
        cg_parts(tgt, sizeof tgt, names, pp, counts, nt);
        printf("%-24.*s %6d %-16.*s %-16.*s %-30s %s\n", (int)m->member_id.len, m->member_id.ptr,
               m->member_epoch, (int)m->client_id.len, m->client_id.ptr, (int)m->client_host.len,
               m->client_host.ptr, cur, tgt);
    }
    rc = 1;
out:
    st_cli_kconn_close(&boot);
    st_cli_kconn_close(&coord);
    st_arena_fini(&arena);
    return rc;
}

int st_cli_group_describe(int argc, char **argv)
{
    static const char usage[] = "group describe GROUP [--topic T]...";
    st_cli_strlist_t topics = {0}, pos = {0};
    const st_cli_opt_t opts[] = {
        {'t', "topic", ST_CLI_OPT_LIST, &topics, "T",
         "also show these topics' partitions (even without commits)"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Prints a group's state and members, and per partition its committed "
                          "offset, the end\noffset and the lag between them.",
                          opts, true, &pos, 1, 1);
    if (rc >= 0)
        goto out;
    rc = ST_CLI_FAIL;
    const char *group = pos.v[0];
    rd_kafka_t *rk = group_handle(group);
    if (!rk)
        goto out;
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(16);
    const rd_kafka_ConsumerGroupDescription_t *d = NULL;
    rd_kafka_event_t *dev = describe_group(rk, q, group, &d);
    if (!dev)
        goto done;
    rd_kafka_consumer_group_state_t state = rd_kafka_ConsumerGroupDescription_state(d);
    int consumer = 0;
    if (state == RD_KAFKA_CONSUMER_GROUP_STATE_DEAD &&
        (consumer = consumer_describe(group, parts)) < 0) {
        rd_kafka_event_destroy(dev);
        goto done;
    }
    if (consumer) {
        rd_kafka_event_destroy(dev);
        goto offsets;
    }
    size_t nm = rd_kafka_ConsumerGroupDescription_member_count(d);
    const char *assignor = rd_kafka_ConsumerGroupDescription_partition_assignor(d);
    printf("group:       %s\nstate:       %s\nassignor:    %s\nmembers:     %zu\n", group,
           rd_kafka_consumer_group_state_name(state), assignor && *assignor ? assignor : "-", nm);
    if (state == RD_KAFKA_CONSUMER_GROUP_STATE_DEAD && !topics.n) {
        printf("\n(the group does not exist or has nothing committed)\n");
        rd_kafka_event_destroy(dev);
        rc = ST_CLI_OK;
        goto done;
    }
    if (nm)
        printf("\n%-50s %-20s %-20s %s\n", "MEMBER", "CLIENT-ID", "HOST", "ASSIGNMENT");
    for (size_t i = 0; i < nm; i++) {
        const rd_kafka_MemberDescription_t *m = rd_kafka_ConsumerGroupDescription_member(d, i);
        const rd_kafka_topic_partition_list_t *a =
            rd_kafka_MemberAssignment_partitions(rd_kafka_MemberDescription_assignment(m));
        printf("%-50s %-20s %-20s ", rd_kafka_MemberDescription_consumer_id(m),
               rd_kafka_MemberDescription_client_id(m), rd_kafka_MemberDescription_host(m));
        for (int j = 0; a && j < a->cnt; j++) {
            printf("%s%s/%d", j ? "," : "", a->elems[j].topic, a->elems[j].partition);
            if (!rd_kafka_topic_partition_list_find(parts, a->elems[j].topic,
                                                    a->elems[j].partition))
                rd_kafka_topic_partition_list_add(parts, a->elems[j].topic, a->elems[j].partition);
        }
        printf("%s\n", a && a->cnt ? "" : "-");
    }
    rd_kafka_event_destroy(dev);
offsets:
    if (committed_partitions(rk, q, group, parts) < 0 || widen_to_topics(rk, parts) < 0 ||
        add_topics(rk, &topics, parts, true) < 0)
        goto done;
    rd_kafka_topic_partition_list_sort(parts, NULL, NULL);
    rd_kafka_resp_err_t e = rd_kafka_committed(rk, parts, (int)st_cli_time_left_ms());
    if (e) {
        st_cli_report("cannot read the group's committed offsets", e, NULL);
        goto done;
    }
    printf("\n%-30s %9s %12s %12s %10s\n", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG");
    int64_t total_lag = 0;
    st_cli_wm_t *wm = calloc((size_t)(parts->cnt > 0 ? parts->cnt : 1), sizeof *wm);
    for (int i = 0; wm && i < parts->cnt; i++)
        wm[i] =
            (st_cli_wm_t){.topic = parts->elems[i].topic, .partition = parts->elems[i].partition};
    int behind = wm ? st_cli_watermarks(rk, wm, parts->cnt) : 0;
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *p = &parts->elems[i];
        char committed[24] = "-", end[24] = "?", lag[24] = "-";
        if (p->offset >= 0)
            snprintf(committed, sizeof(committed), "%" PRId64, p->offset);
        if (wm && !wm[i].err) {
            snprintf(end, sizeof(end), "%" PRId64, wm[i].hi);
            /* Without a commit the group would start at the reset policy; show the backlog. */
            int64_t l = wm[i].hi - (p->offset >= 0 ? p->offset : wm[i].lo);
            snprintf(lag, sizeof(lag), "%" PRId64, l);
            total_lag += l;
        }
        printf("%-30s %9d %12s %12s %10s%s\n", p->topic, p->partition, committed, end, lag,
               wm && wm[i].err == RD_KAFKA_RESP_ERR__TIMED_OUT ? "  (its leader did not answer)"
                                                               : "");
    }
    free(wm);
    printf("\ntotal lag:   %" PRId64 "\n", total_lag);
    rc = ST_CLI_OK;
    if (behind)
        st_cli_exit(rc); /* a request still waits on a broker that is gone: do not wait too */
done:
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_queue_destroy(q);
    st_cli_client_destroy(rk);
out:
    st_cli_strlist_fini(&topics);
    st_cli_strlist_fini(&pos);
    return rc;
}

int st_cli_group_seek(int argc, char **argv)
{
    static const char usage[] = "group seek GROUP --to start|end|OFFSET|@TIMESTAMP [--topic T]...";
    const char *to = NULL;
    bool dry = false;
    st_cli_strlist_t topics = {0}, pos = {0};
    const st_cli_opt_t opts[] = {
        {0, "to", ST_CLI_OPT_STR, &to, "WHERE",
         "start, end, an absolute OFFSET, or @MS (first message at or after a timestamp)"},
        {'t', "topic", ST_CLI_OPT_LIST, &topics, "T",
         "move this topic's partitions (default: every partition of the topics the group "
         "committed)"},
        {0, "dry-run", ST_CLI_OPT_FLAG, &dry, NULL, "print the new offsets, commit nothing"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Sets an inactive group's committed offsets. Refuses a group that has "
                          "members.",
                          opts, true, &pos, 1, 1);
    if (rc >= 0)
        goto out;
    int64_t target;
    bool is_ts;
    if (!to || st_cli_parse_offset(to, &target, &is_ts) < 0 ||
        (target < 0 && target != ST_CLI_OFFSET_BEGINNING && target != ST_CLI_OFFSET_END)) {
        rc = st_cli_usage_error(usage, "--to wants start, end, OFFSET or @TIMESTAMP_MS");
        goto out;
    }
    rc = ST_CLI_FAIL;
    const char *group = pos.v[0];
    rd_kafka_t *rk = group_handle(group);
    if (!rk)
        goto out;
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(16);
    const rd_kafka_ConsumerGroupDescription_t *d = NULL;
    rd_kafka_event_t *dev = describe_group(rk, q, group, &d);
    if (!dev)
        goto done;
    size_t nm = rd_kafka_ConsumerGroupDescription_member_count(d);
    rd_kafka_consumer_group_state_t state = rd_kafka_ConsumerGroupDescription_state(d);
    rd_kafka_event_destroy(dev);
    if (nm > 0 || (state != RD_KAFKA_CONSUMER_GROUP_STATE_EMPTY &&
                   state != RD_KAFKA_CONSUMER_GROUP_STATE_DEAD)) {
        st_cli_errorf("group '%s' is active (%s, %zu member%s) — stop its consumers first; "
                      "their next commit would undo the seek",
                      group, rd_kafka_consumer_group_state_name(state), nm, nm == 1 ? "" : "s");
        goto done;
    }
    if (topics.n ? add_topics(rk, &topics, parts, true) < 0
                 : committed_partitions(rk, q, group, parts) < 0 || widen_to_topics(rk, parts) < 0)
        goto done;
    if (!parts->cnt) {
        st_cli_errorf("group '%s' has no committed offsets; say which topic with --topic", group);
        goto done;
    }
    if (is_ts) {
        for (int i = 0; i < parts->cnt; i++)
            parts->elems[i].offset = target;
        rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(rk, parts, (int)st_cli_time_left_ms());
        if (e) {
            st_cli_report("cannot look up offsets by timestamp", e, NULL);
            goto done;
        }
    }
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *p = &parts->elems[i];
        int64_t lo, hi;
        rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, p->topic, p->partition, &lo,
                                                                 &hi, (int)st_cli_time_left_ms());
        if (e) {
            char what[300];
            snprintf(what, sizeof(what), "cannot read the offsets of %s/%d", p->topic,
                     p->partition);
            st_cli_report(what, e, NULL);
            goto done;
        }
        if (is_ts)
            p->offset = p->offset < 0 ? hi : p->offset;
        else if (target == ST_CLI_OFFSET_BEGINNING)
            p->offset = lo;
        else if (target == ST_CLI_OFFSET_END)
            p->offset = hi;
        else
            p->offset = target < lo ? lo : target > hi ? hi : target;
    }
    if (!dry) {
        rd_kafka_resp_err_t e = rd_kafka_commit(rk, parts, 0);
        if (e) {
            st_cli_report("cannot commit the new offsets", e, NULL);
            goto done;
        }
        for (int i = 0; i < parts->cnt; i++)
            if (parts->elems[i].err) {
                char what[300];
                snprintf(what, sizeof(what), "cannot commit %s/%d", parts->elems[i].topic,
                         parts->elems[i].partition);
                st_cli_report(what, parts->elems[i].err, NULL);
                goto done;
            }
    }
    for (int i = 0; i < parts->cnt; i++)
        printf("%s%s/%d -> %" PRId64 "\n", dry ? "(dry run) " : "", parts->elems[i].topic,
               parts->elems[i].partition, parts->elems[i].offset);
    rc = ST_CLI_OK;
done:
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_queue_destroy(q);
    st_cli_client_destroy(rk);
out:
    st_cli_strlist_fini(&topics);
    st_cli_strlist_fini(&pos);
    return rc;
}

int st_cli_group_delete(int argc, char **argv)
{
    static const char usage[] = "group delete GROUP...";
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage,
                          "Deletes consumer groups and their committed offsets (groups must "
                          "have no members).",
                          opts, true, &pos, 1, 1000);
    if (rc >= 0)
        goto out;
    rc = ST_CLI_FAIL;
    rd_kafka_t *rk = st_cli_admin_client();
    if (!rk)
        goto out;
    rd_kafka_DeleteGroup_t **dg = calloc(pos.n, sizeof(*dg));
    for (size_t i = 0; i < pos.n; i++)
        dg[i] = rd_kafka_DeleteGroup_new(pos.v[i]);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_DELETEGROUPS);
    rd_kafka_DeleteGroups(rk, dg, pos.n, o, q);
    rd_kafka_event_t *ev =
        st_cli_admin_wait(q, RD_KAFKA_EVENT_DELETEGROUPS_RESULT, "cannot delete groups");
    if (ev) {
        size_t n;
        const rd_kafka_group_result_t **res =
            rd_kafka_DeleteGroups_result_groups(rd_kafka_event_DeleteGroups_result(ev), &n);
        int failed = 0;
        for (size_t i = 0; i < n; i++) {
            const rd_kafka_error_t *e = rd_kafka_group_result_error(res[i]);
            if (e) {
                char what[300];
                snprintf(what, sizeof(what), "cannot delete group %s",
                         rd_kafka_group_result_name(res[i]));
                st_cli_report(what, rd_kafka_error_code(e), rd_kafka_error_string(e));
                failed++;
            } else {
                printf("deleted group %s\n", rd_kafka_group_result_name(res[i]));
            }
        }
        rc = failed ? ST_CLI_FAIL : ST_CLI_OK;
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_DeleteGroup_destroy_array(dg, pos.n);
    free(dg);
    st_cli_client_destroy(rk);
out:
    st_cli_strlist_fini(&pos);
    return rc;
}
