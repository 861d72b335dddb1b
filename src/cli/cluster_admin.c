/*
 * cluster_admin.c — `strata cluster elect-leaders|reassign|reassignments`, as Kafka's
 * kafka-leader-election.sh and kafka-reassign-partitions.sh: ElectLeaders (43),
 * AlterPartitionReassignments (45) and ListPartitionReassignments (46); and `strata cluster
 * config get|set`, as kafka-configs.sh --entity-type brokers: DescribeConfigs (32) and
 * IncrementalAlterConfigs (44) on BROKER resources.
 *
 * librdkafka 2.0 has none of these in its Admin API (nor IncrementalAlterConfigs), so they go
 * through kreq.h. ElectLeaders and AlterPartitionReassignments go to the broker Metadata names
 * as the controller (any broker would forward them), and on NOT_CONTROLLER the metadata is
 * read again and the request sent to the new one, until the deadline. `reassign --wait` polls the
 * controller's ListPartitionReassignments and Metadata until the move is no longer listed and the
 * replicas are the target. Every command has one deadline, --timeout, for all its requests and
 * waits.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cli/cmds.h"
#include "cli/common.h"
#include "cli/kreq.h"
#include "proto/kerr.h"

#define POLL_MS 200 /* between two looks at a move in progress or a controller change */

typedef struct adm {
    st_arena_t arena;
    st_cli_kconn_t boot; /* the first -b broker that answered */
    st_cli_kconn_t ctl;  /* the active controller (fd -1 until opened) */
    int32_t ctl_id;
    st_kp_metadata_resp_t md;
    st_buf_t md_frame; /* md's strings point into it */
    int64_t deadline;
} adm_t;

static void adm_init(adm_t *a)
{
    memset(a, 0, sizeof *a);
    st_arena_init(&a->arena, 16384);
    a->deadline = st_mono_ms() + st_cli_common.timeout_ms;
    a->boot.fd = -1;
    a->ctl.fd = -1;
    a->ctl_id = -1;
    st_buf_init(&a->md_frame);
}

static void adm_fini(adm_t *a)
{
    st_cli_kconn_close(&a->boot);
    st_cli_kconn_close(&a->ctl);
    st_buf_fini(&a->md_frame);
    st_arena_fini(&a->arena);
}

/* Metadata over c (every topic when topic is NULL) into a->md. */
static int adm_metadata_on(adm_t *a, st_cli_kconn_t *c, const char *topic)
{
    int16_t v = st_cli_kconn_version(c, ST_KP_API_METADATA, 1, 12);
    if (v < 0)
        return -1;
    st_kp_metadata_req_t req = {0};
    st_kp_metadata_req_topic_t t = {0};
    if (topic) {
        t.name = st_kstr(topic);
        req.topics = &t;
        req.topics_count = 1;
    } else {
        req.topics_count = -1; /* null: every topic */
    }
    req.allow_auto_topic_creation = false;
    if (ST_CLI_KCALL(c, METADATA, metadata, v, &req, &a->arena, &a->md))
        return -1;
    st_buf_fini(&a->md_frame);
    a->md_frame = c->frame; /* the next call on c reuses its frame */
    st_buf_init(&c->frame);
    return 0;
}

/* Connects to the first -b broker that answers and reads the metadata. */
static int adm_open(adm_t *a, const char *topic)
{
    char *list = strdup(st_cli_common.brokers);
    int rc = -1;
    for (char *save = NULL, *b = strtok_r(list, ",", &save); b && rc;
         b = strtok_r(NULL, ",", &save))
        rc = st_cli_kconn_open(&a->boot, b, a->deadline);
    free(list);
    return rc ? -1 : adm_metadata_on(a, &a->boot, topic);
}

/* Waits ms (never past the deadline); false once the deadline passed or Ctrl-C came. */
static bool adm_pause(adm_t *a, int ms)
{
    int64_t left = a->deadline - st_mono_ms();
    if (left <= 0 || st_cli_stop)
        return false;
    poll(NULL, 0, (int)(left < ms ? left : ms));
    return !st_cli_stop && st_mono_ms() < a->deadline;
}

/* Opens c to broker id of the last metadata: 0; -1 after printing why it failed; -2 (nothing
 * printed) when Metadata does not list id. */
static int adm_connect(adm_t *a, int32_t id, st_cli_kconn_t *c)
{
    for (int i = 0; i < a->md.brokers_count; i++) {
        const st_kp_metadata_resp_broker_t *b = &a->md.brokers[i];
        if (b->node_id != id)
            continue;
        char hp[300];
        snprintf(hp, sizeof hp, "%.*s:%d", (int)b->host.len, b->host.ptr, b->port);
        return st_cli_kconn_open(c, hp, a->deadline);
    }
    return -2;
}

/* Opens a->ctl to the controller the last metadata named. */
static int adm_controller(adm_t *a)
{
    st_cli_kconn_close(&a->ctl);
    a->ctl.fd = -1;
    a->ctl_id = a->md.controller_id;
    if (a->ctl_id < 0) {
        st_cli_errorf("the cluster names no active controller now (Metadata controller_id %d)",
                      a->ctl_id);
        return -1;
    }
    int rc = adm_connect(a, a->ctl_id, &a->ctl);
    if (rc == -2)
        st_cli_errorf("the controller, broker %d, is not among the brokers Metadata lists",
                      a->ctl_id);
    return rc ? -1 : 0;
}

/* After NOT_CONTROLLER: waits a moment, reads the metadata again and reconnects; false when
 * the deadline passed (after saying so). */
static bool adm_new_controller(adm_t *a)
{
    int32_t was = a->ctl_id;
    if (!adm_pause(a, POLL_MS)) {
        st_cli_errorf("broker %d answered NOT_CONTROLLER and no other controller answered "
                      "before the deadline (--timeout %lldms)",
                      was, (long long)st_cli_common.timeout_ms);
        return false;
    }
    return adm_metadata_on(a, &a->boot, NULL) == 0 && adm_controller(a) == 0;
}

static int32_t ms_left(const adm_t *a)
{
    int64_t left = a->deadline - st_mono_ms();
    return left < 1 ? 1 : left > INT32_MAX ? INT32_MAX : (int32_t)left;
}

static const st_kp_metadata_resp_topic_t *md_topic(const adm_t *a, const char *topic)
{
    for (int i = 0; i < a->md.topics_count; i++)
        if (st_kstr_eq(a->md.topics[i].name, topic))
            return &a->md.topics[i];
    return NULL;
}

static const st_kp_metadata_resp_partition_t *md_partition(const adm_t *a, const char *topic,
                                                           int32_t p)
{
    const st_kp_metadata_resp_topic_t *t = md_topic(a, topic);
    for (int k = 0; t && k < t->partitions_count; k++)
        if (t->partitions[k].partition_index == p)
            return &t->partitions[k];
    return NULL;
}

/* The topic from the metadata, or NULL after saying it does not exist. */
static const st_kp_metadata_resp_topic_t *need_topic(const adm_t *a, const char *topic)
{
    const st_kp_metadata_resp_topic_t *t = md_topic(a, topic);
    if (!t || t->error_code) {
        st_cli_errorf("no topic '%s'%s%s", topic, t ? ": " : "",
                      t ? st_kerr_name(t->error_code) : "");
        return NULL;
    }
    return t;
}

static void print_ids(FILE *f, const int32_t *v, int n)
{
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%d", i ? "," : "", v[i]);
    fputc(']', f);
}

static void errmsg(char *out, size_t len, int16_t code, st_kstr_t msg)
{
    if (msg.len > 0)
        snprintf(out, len, "%s: %.*s", st_kerr_name(code), (int)msg.len, msg.ptr);
    else
        snprintf(out, len, "%s", st_kerr_name(code));
}

/* ---- cluster elect-leaders ---- */

int st_cli_cluster_elect_leaders(int argc, char **argv)
{
    static const char usage[] =
        "cluster elect-leaders [--type preferred|unclean] [--topic TOPIC [--partition N]...]";
    st_cli_strlist_t pos = {0}, parts = {0};
    const char *type = "preferred", *topic = NULL;
    const st_cli_opt_t opts[] = {
        {0, "type", ST_CLI_OPT_STR, &type, "TYPE",
         "preferred (the first replica, if in sync) or unclean (any live replica, even out of "
         "sync, where no in-sync one is live)"},
        {0, "topic", ST_CLI_OPT_STR, &topic, "TOPIC", "only this topic (default: every partition)"},
        {0, "partition", ST_CLI_OPT_LIST, &parts, "N",
         "only this partition of --topic (repeatable; default: all of them)"},
        ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage,
                          "Elects leaders (ElectLeaders, as kafka-leader-election.sh): moves "
                          "leadership back to each partition's preferred replica, or elects an "
                          "out-of-sync one where no in-sync replica is live (unclean). Exit 0 "
                          "unless a partition failed with something other than "
                          "ELECTION_NOT_NEEDED.",
                          opts, true, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    int8_t etype = 0;
    if (rc < 0) {
        if (!strcmp(type, "preferred"))
            etype = 0;
        else if (!strcmp(type, "unclean"))
            etype = 1;
        else
            rc = st_cli_usage_error(usage, "--type is preferred or unclean, not '%s'", type);
    }
    if (rc < 0 && parts.n && !topic)
        rc = st_cli_usage_error(usage, "--partition needs --topic");
    int32_t *pv = calloc(parts.n + 1, sizeof *pv);
    for (size_t i = 0; rc < 0 && i < parts.n; i++) {
        int64_t p;
        if (st_cli_parse_i64(parts.v[i], &p) < 0 || p < 0 || p > INT32_MAX)
            rc = st_cli_usage_error(usage, "bad --partition '%s'", parts.v[i]);
        else
            pv[i] = (int32_t)p;
    }
    if (rc >= 0) {
        free(pv);
        st_cli_strlist_fini(&parts);
        return rc;
    }
    rc = ST_CLI_FAIL;
    adm_t a;
    adm_init(&a);
    st_kp_elect_leaders_req_topic_partition_t tp = {0};
    st_kp_elect_leaders_req_t req = {.election_type = etype, .topic_partitions_count = -1};
    if (adm_open(&a, topic) || adm_controller(&a))
        goto out;
    if (topic) {
        const st_kp_metadata_resp_topic_t *t = need_topic(&a, topic);
        if (!t)
            goto out;
        if (!parts.n) { /* every partition of the topic */
            free(pv);
            pv = calloc((size_t)t->partitions_count + 1, sizeof *pv);
            for (int k = 0; k < t->partitions_count; k++)
                pv[k] = t->partitions[k].partition_index;
            tp.partition_id_count = t->partitions_count;
        } else {
            tp.partition_id_count = (int32_t)parts.n;
        }
        tp.topic = st_kstr(topic);
        tp.partition_id = pv;
        req.topic_partitions = &tp;
        req.topic_partitions_count = 1;
    }
    st_kp_elect_leaders_resp_t resp;
    for (;;) {
        int16_t v = st_cli_kconn_version(&a.ctl, ST_KP_API_ELECT_LEADERS, etype ? 1 : 0, 2);
        if (v < 0)
            goto out;
        req.timeout_ms = ms_left(&a);
        if (ST_CLI_KCALL(&a.ctl, ELECT_LEADERS, elect_leaders, v, &req, &a.arena, &resp))
            goto out;
        bool moved = resp.error_code == ST_KERR_NOT_CONTROLLER;
        for (int i = 0; i < resp.replica_election_results_count; i++)
            for (int k = 0; k < resp.replica_election_results[i].partition_result_count; k++)
                moved |= resp.replica_election_results[i].partition_result[k].error_code ==
                         ST_KERR_NOT_CONTROLLER;
        if (!moved)
            break;
        if (!adm_new_controller(&a))
            goto out;
    }
    if (resp.error_code) {
        st_cli_errorf("ElectLeaders refused: %s", st_kerr_name(resp.error_code));
        goto out;
    }
    rc = ST_CLI_OK;
    int n = 0;
    for (int i = 0; i < resp.replica_election_results_count; i++) {
        const st_kp_elect_leaders_resp_replica_election_result_t *t =
            &resp.replica_election_results[i];
        for (int k = 0; k < t->partition_result_count; k++, n++) {
            const st_kp_elect_leaders_resp_partition_result_t *p = &t->partition_result[k];
            char what[600];
            if (p->error_code == 0)
                snprintf(what, sizeof what, "elected (%s)", type);
            else
                errmsg(what, sizeof what, p->error_code, p->error_message);
            if (p->error_code && p->error_code != ST_KERR_ELECTION_NOT_NEEDED)
                rc = ST_CLI_FAIL;
            printf("%.*s-%d: %s\n", (int)t->topic.len, t->topic.ptr, p->partition_id, what);
        }
    }
    if (!n)
        printf("no partition needed an election (ELECTION_NOT_NEEDED)\n");
out:
    adm_fini(&a);
    free(pv);
    st_cli_strlist_fini(&parts);
    return rc;
}

/* ---- cluster reassign ---- */

/* Parses "1,2,3" into v (at most max ids); the count, or -1. */
static int parse_replicas(const char *s, int32_t *v, int max)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        char num[24];
        int64_t id;
        if (len == 0 || len >= sizeof num || n >= max)
            return -1;
        memcpy(num, p, len);
        num[len] = 0;
        if (st_cli_parse_i64(num, &id) < 0 || id < 0 || id > INT32_MAX)
            return -1;
        for (int i = 0; i < n; i++)
            if (v[i] == (int32_t)id)
                return -1;
        v[n++] = (int32_t)id;
        if (!c)
            return n;
        p = c + 1;
    }
}

static bool same_set(const int32_t *a, int na, const int32_t *b, int nb)
{
    if (na != nb)
        return false;
    for (int i = 0; i < na; i++) {
        bool found = false;
        for (int k = 0; k < nb; k++)
            found |= a[i] == b[k];
        if (!found)
            return false;
    }
    return true;
}

/* The move of topic-partition in a ListPartitionReassignments answer, or NULL. */
static const st_kp_list_partition_reassignments_resp_partition_t *
listed(const st_kp_list_partition_reassignments_resp_t *r, const char *topic, int32_t partition)
{
    for (int i = 0; i < r->topics_count; i++) {
        if (!st_kstr_eq(r->topics[i].name, topic))
            continue;
        for (int k = 0; k < r->topics[i].partitions_count; k++)
            if (r->topics[i].partitions[k].partition_index == partition)
                return &r->topics[i].partitions[k];
    }
    return NULL;
}

/* ListPartitionReassignments over c: one partition, or every one (topic NULL). */
static int list_moves(adm_t *a, st_cli_kconn_t *c, const char *topic, int32_t *partition,
                      st_kp_list_partition_reassignments_resp_t *resp)
{
    if (st_cli_kconn_version(c, ST_KP_API_LIST_PARTITION_REASSIGNMENTS, 0, 0) < 0)
        return -1;
    st_kp_list_partition_reassignments_req_topic_t t = {.name = st_kstr(topic ? topic : ""),
                                                        .partition_indexes = partition,
                                                        .partition_indexes_count = 1};
    st_kp_list_partition_reassignments_req_t req = {
        .timeout_ms = ms_left(a), .topics = topic ? &t : NULL, .topics_count = topic ? 1 : -1};
    if (ST_CLI_KCALL(c, LIST_PARTITION_REASSIGNMENTS, list_partition_reassignments, 0, &req,
                     &a->arena, resp))
        return -1;
    if (resp->error_code) {
        char m[600];
        errmsg(m, sizeof m, resp->error_code, resp->error_message);
        st_cli_errorf("ListPartitionReassignments: %s", m);
        return -1;
    }
    return 0;
}

/* Polls the controller until topic-partition's move is done (no longer listed, and the
 * replicas are the target when one is given), printing each change. */
static int wait_move(adm_t *a, const char *topic, int32_t partition, const int32_t *target,
                     int ntarget)
{
    char last[1024] = "";
    for (;;) {
        st_kp_list_partition_reassignments_resp_t lr;
        st_arena_reset(&a->arena); /* nothing from earlier answers is kept */
        if (list_moves(a, &a->ctl, topic, &partition, &lr))
            return ST_CLI_FAIL;
        const st_kp_list_partition_reassignments_resp_partition_t *m =
            listed(&lr, topic, partition);
        char line[1024];
        FILE *f = fmemopen(line, sizeof line, "w");
        if (m) {
            fprintf(f, "replicas ");
            print_ids(f, m->replicas, m->replicas_count);
            fprintf(f, " adding ");
            print_ids(f, m->adding_replicas, m->adding_replicas_count);
            fprintf(f, " removing ");
            print_ids(f, m->removing_replicas, m->removing_replicas_count);
        }
        bool in_progress = m != NULL; /* copied before the Metadata call reuses the frame */
        if (adm_metadata_on(a, &a->ctl, topic)) {
            fclose(f);
            return ST_CLI_FAIL;
        }
        const st_kp_metadata_resp_partition_t *p = md_partition(a, topic, partition);
        if (!p) {
            fclose(f);
            st_cli_errorf("%s-%d is no longer in the metadata", topic, partition);
            return ST_CLI_FAIL;
        }
        if (!in_progress) {
            fprintf(f, "replicas ");
            print_ids(f, p->replica_nodes, p->replica_nodes_count);
        }
        fprintf(f, " isr ");
        print_ids(f, p->isr_nodes, p->isr_nodes_count);
        fprintf(f, " leader %d", p->leader_id);
        fclose(f);
        bool done = !in_progress && (!target || same_set(p->replica_nodes, p->replica_nodes_count,
                                                         target, ntarget));
        if (done) {
            printf("%s-%d: %s: %s\n", topic, partition,
                   target ? "reassignment complete" : "no longer in progress", line);
            return ST_CLI_OK;
        }
        if (strcmp(line, last)) {
            printf("%s-%d: %s: %s\n", topic, partition, in_progress ? "moving" : "settling", line);
            fflush(stdout);
            snprintf(last, sizeof last, "%s", line);
        }
        if (!adm_pause(a, POLL_MS)) {
            st_cli_errorf("%s-%d: the reassignment did not complete within --timeout %lldms "
                          "(it goes on in the cluster: `strata cluster reassignments` shows it; "
                          "raise --timeout to wait longer)",
                          topic, partition, (long long)st_cli_common.timeout_ms);
            return ST_CLI_FAIL;
        }
    }
}

int st_cli_cluster_reassign(int argc, char **argv)
{
    static const char usage[] =
        "cluster reassign --topic TOPIC --partition N (--replicas ID,ID,... | --cancel) [--wait]";
    st_cli_strlist_t pos = {0};
    const char *topic = NULL, *replicas = NULL;
    int64_t partition = -1;
    bool cancel = false, wait = false;
    const st_cli_opt_t opts[] = {
        {0, "topic", ST_CLI_OPT_STR, &topic, "TOPIC", "the partition's topic"},
        {0, "partition", ST_CLI_OPT_INT, &partition, "N", "the partition"},
        {0, "replicas", ST_CLI_OPT_STR, &replicas, "IDS",
         "the target broker ids, comma-separated, the preferred leader first"},
        {0, "cancel", ST_CLI_OPT_FLAG, &cancel, NULL, "cancel the move in progress instead"},
        {0, "wait", ST_CLI_OPT_FLAG, &wait, NULL,
         "wait until the move is complete (within --timeout), printing its progress"},
        ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage,
                          "Moves a partition to other replicas (AlterPartitionReassignments, as "
                          "kafka-reassign-partitions.sh): the targets are added, and the old "
                          "replicas leave once every target is in sync.",
                          opts, true, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    int32_t target[64];
    int ntarget = 0;
    if (rc < 0 && !topic)
        rc = st_cli_usage_error(usage, "--topic is required");
    if (rc < 0 && (partition < 0 || partition > INT32_MAX))
        rc = st_cli_usage_error(usage, "--partition N is required");
    if (rc < 0 && cancel == (replicas != NULL))
        rc = st_cli_usage_error(usage, "give --replicas or --cancel (one of them)");
    if (rc < 0 && replicas &&
        (ntarget = parse_replicas(replicas, target, (int)(sizeof target / sizeof *target))) < 0)
        rc = st_cli_usage_error(usage,
                                "bad --replicas '%s': give distinct broker ids separated by "
                                "commas, like 1,2,3",
                                replicas);
    if (rc >= 0)
        return rc;
    rc = ST_CLI_FAIL;
    adm_t a;
    adm_init(&a);
    int32_t pidx = (int32_t)partition;
    if (adm_open(&a, topic) || adm_controller(&a) || !need_topic(&a, topic))
        goto out;
    if (!md_partition(&a, topic, pidx)) {
        st_cli_errorf("topic '%s' has no partition %d", topic, pidx);
        goto out;
    }
    st_kp_alter_partition_reassignments_req_partition_t rp = {.partition_index = pidx,
                                                              .replicas = cancel ? NULL : target,
                                                              .replicas_count =
                                                                  cancel ? -1 : ntarget};
    st_kp_alter_partition_reassignments_req_topic_t rt = {
        .name = st_kstr(topic), .partitions = &rp, .partitions_count = 1};
    st_kp_alter_partition_reassignments_req_t req = {
        .allow_replication_factor_change = true, .topics = &rt, .topics_count = 1};
    st_kp_alter_partition_reassignments_resp_t resp;
    int16_t err;
    char msg[600];
    for (;;) {
        int16_t v = st_cli_kconn_version(&a.ctl, ST_KP_API_ALTER_PARTITION_REASSIGNMENTS, 0, 1);
        if (v < 0)
            goto out;
        req.timeout_ms = ms_left(&a);
        if (ST_CLI_KCALL(&a.ctl, ALTER_PARTITION_REASSIGNMENTS, alter_partition_reassignments, v,
                         &req, &a.arena, &resp))
            goto out;
        err = resp.error_code;
        st_kstr_t m = resp.error_message;
        if (!err && resp.responses_count == 1 && resp.responses[0].partitions_count == 1) {
            err = resp.responses[0].partitions[0].error_code;
            m = resp.responses[0].partitions[0].error_message;
        } else if (!err) {
            st_cli_errorf("%s: AlterPartitionReassignments answered another partition", a.ctl.addr);
            goto out;
        }
        errmsg(msg, sizeof msg, err, m);
        if (err != ST_KERR_NOT_CONTROLLER)
            break;
        if (!adm_new_controller(&a))
            goto out;
    }
    if (err) {
        st_cli_errorf("%s-%d: %s", topic, pidx, msg);
        goto out;
    }
    if (cancel) {
        printf("%s-%d: reassignment cancelled\n", topic, pidx);
    } else {
        printf("%s-%d: reassignment to ", topic, pidx);
        print_ids(stdout, target, ntarget);
        printf(" started\n");
    }
    fflush(stdout);
    rc = wait ? wait_move(&a, topic, pidx, cancel ? NULL : target, ntarget) : ST_CLI_OK;
out:
    adm_fini(&a);
    return rc;
}

/* ---- cluster reassignments ---- */

int st_cli_cluster_reassignments(int argc, char **argv)
{
    static const char usage[] = "cluster reassignments [--topic TOPIC]";
    st_cli_strlist_t pos = {0};
    const char *topic = NULL;
    const st_cli_opt_t opts[] = {
        {0, "topic", ST_CLI_OPT_STR, &topic, "TOPIC", "only this topic's moves"}, ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage,
                          "Lists the partition moves in progress (ListPartitionReassignments): "
                          "replicas, and those being added and removed.",
                          opts, true, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc >= 0)
        return rc;
    rc = ST_CLI_FAIL;
    adm_t a;
    adm_init(&a);
    st_kp_list_partition_reassignments_resp_t lr;
    /* the controller's metadata is the newest: ask it */
    if (adm_open(&a, topic) || (topic && !need_topic(&a, topic)) || adm_controller(&a) ||
        list_moves(&a, &a.ctl, NULL, NULL, &lr))
        goto out;
    int n = 0;
    for (int i = 0; i < lr.topics_count; i++) {
        const st_kp_list_partition_reassignments_resp_topic_t *t = &lr.topics[i];
        if (topic && !st_kstr_eq(t->name, topic))
            continue;
        for (int k = 0; k < t->partitions_count; k++, n++) {
            const st_kp_list_partition_reassignments_resp_partition_t *p = &t->partitions[k];
            if (!n)
                printf("%-30s %-9s %-20s %-14s %s\n", "TOPIC", "PARTITION", "REPLICAS", "ADDING",
                       "REMOVING");
            char r[3][256];
            const int32_t *v[3] = {p->replicas, p->adding_replicas, p->removing_replicas};
            int c[3] = {p->replicas_count, p->adding_replicas_count, p->removing_replicas_count};
            for (int j = 0; j < 3; j++) {
                FILE *f = fmemopen(r[j], sizeof r[j], "w");
                print_ids(f, v[j], c[j]);
                fclose(f);
            }
            printf("%-30.*s %-9d %-20s %-14s %s\n", (int)t->name.len, t->name.ptr,
                   p->partition_index, r[0], r[1], r[2]);
        }
    }
    if (!n)
        printf("no reassignment in progress\n");
    rc = ST_CLI_OK;
out:
    adm_fini(&a);
    return rc;
}

/* ---- cluster config get|set ---- */

#define RES_BROKER 4

static const char *source_name(int8_t s)
{
    switch (s) {
    case 2:
        return "DYNAMIC_BROKER_CONFIG";
    case 3:
        return "DYNAMIC_DEFAULT_BROKER_CONFIG";
    case 4:
        return "STATIC_BROKER_CONFIG";
    case 5:
        return "DEFAULT_CONFIG";
    default:
        return "UNKNOWN";
    }
}

/* `get`: DescribeConfigs of one broker (or "" the cluster default), on that broker. */
static int config_get(adm_t *a, int64_t broker, bool all, const st_cli_strlist_t *keys)
{
    char name[24] = "";
    st_cli_kconn_t *c = &a->boot;
    if (broker >= 0) {
        snprintf(name, sizeof name, "%lld", (long long)broker);
        int rc = adm_connect(a, (int32_t)broker, &a->ctl);
        if (rc == -2)
            st_cli_errorf("no broker %lld in the cluster's metadata", (long long)broker);
        if (rc)
            return ST_CLI_FAIL;
        c = &a->ctl;
    }
    int16_t v = st_cli_kconn_version(c, ST_KP_API_DESCRIBE_CONFIGS, 1, 4);
    if (v < 0)
        return ST_CLI_FAIL;
    st_kstr_t *kv = calloc(keys->n + 1, sizeof *kv);
    for (size_t i = 0; i < keys->n; i++)
        kv[i] = st_kstr(keys->v[i]);
    st_kp_describe_configs_req_resource_t res = {RES_BROKER, st_kstr(name), keys->n ? kv : NULL,
                                                 keys->n ? (int32_t)keys->n : -1};
    st_kp_describe_configs_req_t req = {.resources = &res, .resources_count = 1};
    st_kp_describe_configs_resp_t resp;
    int rc = ST_CLI_FAIL;
    if (ST_CLI_KCALL(c, DESCRIBE_CONFIGS, describe_configs, v, &req, &a->arena, &resp))
        goto out;
    if (resp.results_count != 1) {
        st_cli_errorf("DescribeConfigs answered %d resources for 1", resp.results_count);
        goto out;
    }
    const st_kp_describe_configs_resp_result_t *r = &resp.results[0];
    if (r->error_code) {
        char msg[600];
        errmsg(msg, sizeof msg, r->error_code, r->error_message);
        st_cli_errorf("cannot read the configs of broker %s: %s", broker < 0 ? "default" : name,
                      msg);
        goto out;
    }
    int shown = 0;
    for (int i = 0; i < r->configs_count; i++) {
        const st_kp_describe_configs_resp_config_t *e = &r->configs[i];
        if (!all && !keys->n && e->config_source == 5)
            continue; /* left at its default */
        printf("%.*s=%.*s  (%s%s)\n", (int)e->name.len, e->name.ptr,
               e->is_sensitive    ? 8
               : e->value.len < 0 ? 0
                                  : (int)e->value.len,
               e->is_sensitive ? "[hidden]"
               : e->value.ptr  ? e->value.ptr
                               : "",
               source_name(e->config_source), e->read_only ? ", read-only" : "");
        shown++;
    }
    if (!shown)
        printf(broker < 0 ? "no cluster-wide dynamic broker setting is set\n"
                          : "every setting is at its default (--all lists them)\n");
    rc = ST_CLI_OK;
out:
    free(kv);
    return rc;
}

/* `set`: IncrementalAlterConfigs (SET for K=V, DELETE for --delete K) of one broker or of the
 * cluster default, sent to the first broker (which forwards it to the controller). */
static int config_set(adm_t *a, int64_t broker, const st_cli_strlist_t *sets,
                      const st_cli_strlist_t *dels, bool validate_only)
{
    char name[24] = "";
    if (broker >= 0)
        snprintf(name, sizeof name, "%lld", (long long)broker);
    size_t n = sets->n + dels->n;
    st_kp_incremental_alter_configs_req_config_t *cv = calloc(n + 1, sizeof *cv);
    char **bufs = calloc(n + 1, sizeof *bufs);
    int rc = ST_CLI_FAIL;
    for (size_t i = 0; i < sets->n; i++) {
        const char *k, *v;
        if (st_cli_split_kv(sets->v[i], &bufs[i], &k, &v) < 0) {
            st_cli_errorf("wants KEY=VALUE, not '%s'", sets->v[i]);
            goto out;
        }
        cv[i] = (st_kp_incremental_alter_configs_req_config_t){st_kstr(k), 0, st_kstr(v)};
    }
    for (size_t i = 0; i < dels->n; i++)
        cv[sets->n + i] =
            (st_kp_incremental_alter_configs_req_config_t){st_kstr(dels->v[i]), 1, ST_KSTR_NULL};
    st_kp_incremental_alter_configs_req_resource_t res = {RES_BROKER, st_kstr(name), cv,
                                                          (int32_t)n};
    st_kp_incremental_alter_configs_req_t req = {&res, 1, validate_only};
    st_kp_incremental_alter_configs_resp_t resp;
    st_cli_kconn_t *c = &a->boot;
    for (;;) {
        int16_t v = st_cli_kconn_version(c, ST_KP_API_INCREMENTAL_ALTER_CONFIGS, 0, 1);
        if (v < 0)
            goto out;
        if (ST_CLI_KCALL(c, INCREMENTAL_ALTER_CONFIGS, incremental_alter_configs, v, &req,
                         &a->arena, &resp))
            goto out;
        if (resp.responses_count != 1) {
            st_cli_errorf("IncrementalAlterConfigs answered %d resources for 1",
                          resp.responses_count);
            goto out;
        }
        /* the broker could not reach the controller: to the controller itself */
        if (resp.responses[0].error_code != ST_KERR_NOT_CONTROLLER)
            break;
        if (!adm_new_controller(a))
            goto out;
        c = &a->ctl;
    }
    const st_kp_incremental_alter_configs_resp_response_t *r = &resp.responses[0];
    if (r->error_code) {
        char msg[600];
        errmsg(msg, sizeof msg, r->error_code, r->error_message);
        st_cli_errorf("cannot change %s%s: %s", broker < 0 ? "the cluster default" : "broker ",
                      name, msg);
        goto out;
    }
    printf("%s %zu setting(s) of %s%s\n", validate_only ? "would change" : "changed", n,
           broker < 0 ? "every broker (the cluster default)" : "broker ", broker < 0 ? "" : name);
    rc = ST_CLI_OK;
out:
    for (size_t i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    free(cv);
    return rc;
}

int st_cli_cluster_config(int argc, char **argv)
{
    static const char usage[] = "cluster config get (--broker N | --default) [--all] [KEY...]\n"
                                "       strata cluster config set (--broker N | --default) "
                                "[KEY=VALUE...] [--delete KEY]...";
    const char *verb = argc > 0 ? argv[0] : "";
    bool get = !strcmp(verb, "get"), set = !strcmp(verb, "set");
    st_cli_strlist_t pos = {0}, dels = {0};
    int64_t broker = -1;
    bool defaults = false, all = false, dry = false;
    const st_cli_opt_t opts[] = {
        {0, "broker", ST_CLI_OPT_INT, &broker, "N", "this broker's settings (its node.id)"},
        {0, "default", ST_CLI_OPT_FLAG, &defaults, NULL,
         "the cluster-wide dynamic default of every broker (Kafka's resource \"\")"},
        {0, "all", ST_CLI_OPT_FLAG, &all, NULL, "get: also the settings left at their default"},
        {0, "delete", ST_CLI_OPT_LIST, &dels, "KEY",
         "set: remove this dynamic value (repeatable): the next source shows through"},
        {0, "validate-only", ST_CLI_OPT_FLAG, &dry, NULL,
         "set: ask the controller whether it would accept the change, change nothing"},
        ST_CLI_OPT_END};
    int rc = st_cli_parse(argc - (get || set), argv + (get || set), usage,
                          "Reads or changes broker settings at run time (kafka-configs.sh "
                          "--entity-type brokers). get prints KEY=VALUE (SOURCE) for the settings "
                          "not at their default; set writes dynamic values into the metadata "
                          "log, which every broker applies without a restart. Settings Kafka "
                          "keeps read-only are refused (INVALID_CONFIG); set them in "
                          "strata.properties.",
                          opts, true, &pos, 0, SIZE_MAX);
    if (rc < 0 && !get && !set)
        rc = st_cli_usage_error(usage, "config wants get or set, not '%s'", verb);
    if (rc < 0 && (broker >= 0) == defaults)
        rc = st_cli_usage_error(usage, "name one of --broker N and --default");
    if (rc < 0 && set && !pos.n && !dels.n)
        rc = st_cli_usage_error(usage, "set wants KEY=VALUE or --delete KEY");
    if (rc >= 0) {
        st_cli_strlist_fini(&pos);
        st_cli_strlist_fini(&dels);
        return rc;
    }
    adm_t a;
    adm_init(&a);
    rc = adm_open(&a, NULL) ? ST_CLI_FAIL
         : get              ? config_get(&a, broker, all, &pos)
                            : config_set(&a, broker, &pos, &dels, dry);
    adm_fini(&a);
    st_cli_strlist_fini(&pos);
    st_cli_strlist_fini(&dels);
    return rc;
}
