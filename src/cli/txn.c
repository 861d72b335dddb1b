/*
 * txn.c — `strata txn list|describe|producers|abort`, as Kafka's
 * kafka-transactions.sh: ListTransactions to every broker, DescribeTransactions to an id's
 * coordinator (FindCoordinator key type 1), DescribeProducers to a partition's leader, and an
 * ABORT marker (WriteTxnMarkers) written by hand to a partition a hanging transaction holds.
 *
 * librdkafka 2.0 has none of these in its Admin API, so they go through kreq.h (the generated
 * protocol code over a socket). Every command has one deadline, --timeout, for all its requests.
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

/* ---- the cluster, through the bootstrap broker ---- */

typedef struct cluster {
    st_arena_t arena;
    st_cli_kconn_t boot;
    st_kp_metadata_resp_t md;
    st_buf_t md_frame; /* md's strings point into it */
    int64_t deadline;
} cluster_t;

/* Connects to the first -b broker that answers and reads the metadata (topic NULL: none but
 * the brokers; "" : every topic). */
static int cluster_open(cluster_t *cl, const char *topic)
{
    memset(cl, 0, sizeof *cl);
    st_arena_init(&cl->arena, 16384);
    cl->deadline = st_mono_ms() + st_cli_common.timeout_ms;
    cl->boot.fd = -1;
    st_buf_init(&cl->md_frame);
    char *list = strdup(st_cli_common.brokers);
    int rc = -1;
    for (char *save = NULL, *b = strtok_r(list, ",", &save); b && rc;
         b = strtok_r(NULL, ",", &save))
        rc = st_cli_kconn_open(&cl->boot, b, cl->deadline);
    free(list);
    if (rc)
        return -1;
    int16_t v = st_cli_kconn_version(&cl->boot, ST_KP_API_METADATA, 1, 12);
    if (v < 0)
        return -1;
    st_kp_metadata_req_t req = {0};
    st_kp_metadata_req_topic_t t = {0};
    if (topic && *topic) {
        t.name = st_kstr(topic);
        req.topics = &t;
        req.topics_count = 1;
    } else if (topic) {
        req.topics_count = -1; /* null: every topic */
    }
    req.allow_auto_topic_creation = false;
    if (ST_CLI_KCALL(&cl->boot, METADATA, metadata, v, &req, &cl->arena, &cl->md))
        return -1;
    cl->md_frame = cl->boot.frame; /* the next call on boot reuses its frame */
    st_buf_init(&cl->boot.frame);
    return 0;
}

static void cluster_close(cluster_t *cl)
{
    st_cli_kconn_close(&cl->boot);
    st_buf_fini(&cl->md_frame);
    st_arena_fini(&cl->arena);
}

static const st_kp_metadata_resp_broker_t *cluster_broker(const cluster_t *cl, int32_t id)
{
    for (int i = 0; i < cl->md.brokers_count; i++)
        if (cl->md.brokers[i].node_id == id)
            return &cl->md.brokers[i];
    return NULL;
}

/* Opens a connection to broker id. */
static int cluster_conn(cluster_t *cl, int32_t id, st_cli_kconn_t *c)
{
    const st_kp_metadata_resp_broker_t *b = cluster_broker(cl, id);
    if (!b) {
        st_cli_errorf("broker %d is not in the cluster's metadata", id);
        return -1;
    }
    char hp[300];
    snprintf(hp, sizeof hp, "%.*s:%d", (int)b->host.len, b->host.ptr, b->port);
    return st_cli_kconn_open(c, hp, cl->deadline);
}

/* The leader of topic/partition, or -1 after printing why not. */
static int32_t cluster_leader(const cluster_t *cl, const char *topic, int32_t partition)
{
    for (int i = 0; i < cl->md.topics_count; i++) {
        const st_kp_metadata_resp_topic_t *t = &cl->md.topics[i];
        if (!st_kstr_eq(t->name, topic))
            continue;
        if (t->error_code) {
            st_cli_errorf("topic %s: %s", topic, st_kerr_name(t->error_code));
            return -1;
        }
        for (int k = 0; k < t->partitions_count; k++)
            if (t->partitions[k].partition_index == partition) {
                if (t->partitions[k].leader_id < 0)
                    st_cli_errorf("%s-%d has no leader now", topic, partition);
                return t->partitions[k].leader_id;
            }
        st_cli_errorf("topic %s has no partition %d", topic, partition);
        return -1;
    }
    st_cli_errorf("no topic %s", topic);
    return -1;
}

/* ---- txn list ---- */

int st_cli_txn_list(int argc, char **argv)
{
    static const char usage[] = "txn list [--state STATE]... [--producer-id ID]... [--duration D]";
    st_cli_strlist_t pos = {0}, states = {0}, pids = {0};
    const char *duration = NULL;
    const st_cli_opt_t opts[] = {
        {0, "state", ST_CLI_OPT_LIST, &states, "STATE", "only transactions in STATE (Ongoing...)"},
        {0, "producer-id", ST_CLI_OPT_LIST, &pids, "ID", "only this producer id"},
        {0, "duration", ST_CLI_OPT_STR, &duration, "D", "only those running longer than D"},
        ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage,
                          "Lists the transactional ids every broker coordinates, with their "
                          "producer ids and states.",
                          opts, true, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    int64_t dur = -1;
    if (rc < 0 && duration && st_cli_parse_duration_ms(duration, &dur) < 0)
        rc = st_cli_usage_error(usage, "bad --duration '%s'", duration);
    st_kp_list_transactions_req_t req = {0};
    st_kstr_t *sf = calloc(states.n + 1, sizeof *sf);
    int64_t *pf = calloc(pids.n + 1, sizeof *pf);
    for (size_t i = 0; rc < 0 && i < states.n; i++)
        sf[i] = st_kstr(states.v[i]);
    for (size_t i = 0; rc < 0 && i < pids.n; i++)
        if (st_cli_parse_i64(pids.v[i], &pf[i]) < 0)
            rc = st_cli_usage_error(usage, "bad --producer-id '%s'", pids.v[i]);
    req.state_filters = sf;
    req.state_filters_count = (int32_t)states.n;
    req.producer_id_filters = pf;
    req.producer_id_filters_count = (int32_t)pids.n;
    req.duration_filter = dur;
    cluster_t cl;
    if (rc < 0 && cluster_open(&cl, NULL) == 0) {
        rc = ST_CLI_OK;
        printf("%-40s %-20s %-16s %s\n", "TRANSACTIONAL_ID", "PRODUCER_ID", "STATE", "COORDINATOR");
        for (int i = 0; i < cl.md.brokers_count; i++) {
            int32_t id = cl.md.brokers[i].node_id;
            st_cli_kconn_t c;
            int16_t v;
            st_kp_list_transactions_resp_t resp;
            if (cluster_conn(&cl, id, &c) ||
                (v = st_cli_kconn_version(&c, ST_KP_API_LIST_TRANSACTIONS, 0, dur >= 0 ? 1 : 0)) <
                    0 ||
                ST_CLI_KCALL(&c, LIST_TRANSACTIONS, list_transactions, v, &req, &cl.arena, &resp)) {
                st_cli_kconn_close(&c);
                rc = ST_CLI_FAIL;
                continue;
            }
            if (resp.error_code) {
                st_cli_errorf("broker %d: %s", id, st_kerr_name(resp.error_code));
                rc = ST_CLI_FAIL;
            }
            for (int k = 0; k < resp.unknown_state_filters_count; k++)
                st_cli_errorf("unknown state '%.*s' (Empty, Ongoing, PrepareCommit, PrepareAbort, "
                              "CompleteCommit, CompleteAbort, Dead, PrepareEpochFence)",
                              (int)resp.unknown_state_filters[k].len,
                              resp.unknown_state_filters[k].ptr);
            for (int k = 0; k < resp.transaction_states_count; k++) {
                const st_kp_list_transactions_resp_transaction_state_t *t =
                    &resp.transaction_states[k];
                printf("%-40.*s %-20" PRId64 " %-16.*s %d\n", (int)t->transactional_id.len,
                       t->transactional_id.ptr, t->producer_id, (int)t->transaction_state.len,
                       t->transaction_state.ptr, id);
            }
            st_cli_kconn_close(&c); /* the answer's strings were in its frame */
        }
        cluster_close(&cl);
    } else if (rc < 0) {
        cluster_close(&cl);
        rc = ST_CLI_FAIL;
    }
    free(sf);
    free(pf);
    st_cli_strlist_fini(&states);
    st_cli_strlist_fini(&pids);
    return rc;
}

/* ---- txn describe ---- */

/* The coordinator of transactional id `id`, or -1 after printing why. */
static int32_t find_coordinator(cluster_t *cl, const char *id)
{
    int16_t v = st_cli_kconn_version(&cl->boot, ST_KP_API_FIND_COORDINATOR, 1, 4);
    if (v < 0)
        return -1;
    st_kp_find_coordinator_req_t req = {0};
    st_kstr_t key = st_kstr(id);
    req.key = key;
    req.key_type = 1;
    req.coordinator_keys = &key;
    req.coordinator_keys_count = 1;
    st_kp_find_coordinator_resp_t resp;
    if (ST_CLI_KCALL(&cl->boot, FIND_COORDINATOR, find_coordinator, v, &req, &cl->arena, &resp))
        return -1;
    int16_t err =
        v >= 4 ? (resp.coordinators_count ? resp.coordinators[0].error_code : -1) : resp.error_code;
    int32_t node =
        v >= 4 ? (resp.coordinators_count ? resp.coordinators[0].node_id : -1) : resp.node_id;
    if (err) {
        st_cli_errorf("no transaction coordinator for '%s' now: %s", id, st_kerr_name(err));
        return -1;
    }
    return node;
}

int st_cli_txn_describe(int argc, char **argv)
{
    static const char usage[] = "txn describe TRANSACTIONAL_ID";
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage,
                          "Shows one transactional id's state, producer id and epoch, timeout, "
                          "start time and partitions, from its coordinator.",
                          opts, true, &pos, 1, 1);
    const char *id = pos.n ? pos.v[0] : NULL;
    cluster_t cl;
    if (rc >= 0) {
        st_cli_strlist_fini(&pos);
        return rc;
    }
    rc = ST_CLI_FAIL;
    int32_t coord;
    st_cli_kconn_t c = {.fd = -1};
    if (cluster_open(&cl, NULL) == 0 && (coord = find_coordinator(&cl, id)) >= 0 &&
        cluster_conn(&cl, coord, &c) == 0) {
        st_kstr_t key = st_kstr(id);
        st_kp_describe_transactions_req_t req = {.transactional_ids = &key,
                                                 .transactional_ids_count = 1};
        st_kp_describe_transactions_resp_t resp;
        if (st_cli_kconn_version(&c, ST_KP_API_DESCRIBE_TRANSACTIONS, 0, 0) == 0 &&
            ST_CLI_KCALL(&c, DESCRIBE_TRANSACTIONS, describe_transactions, 0, &req, &cl.arena,
                         &resp) == 0 &&
            resp.transaction_states_count == 1) {
            const st_kp_describe_transactions_resp_transaction_state_t *t =
                &resp.transaction_states[0];
            if (t->error_code) {
                st_cli_errorf("'%s': %s", id, st_kerr_name(t->error_code));
            } else {
                printf("transactional id: %s\ncoordinator:      %d\nstate:            %.*s\n"
                       "producer id:      %" PRId64 "\nproducer epoch:   %d\n"
                       "timeout:          %d ms\n",
                       id, coord, (int)t->transaction_state.len, t->transaction_state.ptr,
                       t->producer_id, t->producer_epoch, t->transaction_timeout_ms);
                if (t->transaction_start_time_ms >= 0)
                    printf("started:          %" PRId64 " ms ago\n",
                           st_wall_ms() - t->transaction_start_time_ms);
                printf("partitions:");
                int n = 0;
                for (int i = 0; i < t->topics_count; i++)
                    for (int k = 0; k < t->topics[i].partitions_count; k++, n++)
                        printf(" %.*s-%d", (int)t->topics[i].topic.len, t->topics[i].topic.ptr,
                               t->topics[i].partitions[k]);
                printf("%s\n", n ? "" : " (none)");
                rc = ST_CLI_OK;
            }
        }
    }
    st_cli_kconn_close(&c);
    cluster_close(&cl);
    st_cli_strlist_fini(&pos);
    return rc;
}

/* ---- txn producers / abort: DescribeProducers on a partition's leader ---- */

/* DescribeProducers of topic-partition on its leader, answered into *out (memory of cl). */
static int describe_producers(cluster_t *cl, const char *topic, int32_t partition,
                              st_cli_kconn_t *c, st_kp_describe_producers_resp_partition_t **out)
{
    int32_t leader = cluster_leader(cl, topic, partition);
    if (leader < 0 || cluster_conn(cl, leader, c) ||
        st_cli_kconn_version(c, ST_KP_API_DESCRIBE_PRODUCERS, 0, 0) < 0)
        return -1;
    st_kp_describe_producers_req_topic_t t = {
        .name = st_kstr(topic), .partition_indexes = &partition, .partition_indexes_count = 1};
    st_kp_describe_producers_req_t req = {.topics = &t, .topics_count = 1};
    st_kp_describe_producers_resp_t resp;
    if (ST_CLI_KCALL(c, DESCRIBE_PRODUCERS, describe_producers, 0, &req, &cl->arena, &resp))
        return -1;
    if (resp.topics_count != 1 || resp.topics[0].partitions_count != 1) {
        st_cli_errorf("%s: DescribeProducers answered another partition", c->addr);
        return -1;
    }
    st_kp_describe_producers_resp_partition_t *p = &resp.topics[0].partitions[0];
    if (p->error_code) {
        st_cli_errorf("%s-%d: %s%s%.*s", topic, partition, st_kerr_name(p->error_code),
                      p->error_message.len > 0 ? ": " : "",
                      p->error_message.len > 0 ? (int)p->error_message.len : 0,
                      p->error_message.len > 0 ? p->error_message.ptr : "");
        return -1;
    }
    *out = p;
    return 0;
}

static int parse_tp(const char *usage, const char *topic, int64_t partition)
{
    if (!topic)
        return st_cli_usage_error(usage, "--topic is required");
    if (partition < 0 || partition > INT32_MAX)
        return st_cli_usage_error(usage, "--partition N is required");
    return -1;
}

int st_cli_txn_producers(int argc, char **argv)
{
    static const char usage[] = "txn producers --topic TOPIC --partition N";
    st_cli_strlist_t pos = {0};
    const char *topic = NULL;
    int64_t partition = -1;
    const st_cli_opt_t opts[] = {
        {0, "topic", ST_CLI_OPT_STR, &topic, "TOPIC", "the partition's topic"},
        {0, "partition", ST_CLI_OPT_INT, &partition, "N", "the partition"},
        ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage,
                          "Lists a partition's active producers (DescribeProducers): epoch, last "
                          "sequence and write, and the first offset of an open transaction.",
                          opts, true, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc < 0)
        rc = parse_tp(usage, topic, partition);
    if (rc >= 0)
        return rc;
    cluster_t cl;
    st_cli_kconn_t c = {.fd = -1};
    st_kp_describe_producers_resp_partition_t *p;
    rc = ST_CLI_FAIL;
    if (cluster_open(&cl, topic) == 0 &&
        describe_producers(&cl, topic, (int32_t)partition, &c, &p) == 0) {
        printf("%-20s %-6s %-10s %-14s %-12s %s\n", "PRODUCER_ID", "EPOCH", "LAST_SEQ",
               "LAST_WRITE_AGO", "COORD_EPOCH", "TXN_START_OFFSET");
        int64_t now = st_wall_ms();
        for (int i = 0; i < p->active_producers_count; i++) {
            const st_kp_describe_producers_resp_producer_t *a = &p->active_producers[i];
            char ago[32] = "-";
            if (a->last_timestamp >= 0)
                snprintf(ago, sizeof ago, "%" PRId64 "ms", now - a->last_timestamp);
            printf("%-20" PRId64 " %-6d %-10d %-14s %-12d %" PRId64 "\n", a->producer_id,
                   a->producer_epoch, a->last_sequence, ago, a->coordinator_epoch,
                   a->current_txn_start_offset);
        }
        rc = ST_CLI_OK;
    }
    st_cli_kconn_close(&c);
    cluster_close(&cl);
    return rc;
}

int st_cli_txn_abort(int argc, char **argv)
{
    static const char usage[] =
        "txn abort --topic TOPIC --partition N (--start-offset OFFSET | --producer-id ID "
        "--producer-epoch E --coordinator-epoch C)";
    st_cli_strlist_t pos = {0};
    const char *topic = NULL;
    int64_t partition = -1, start = -1, pid = -1, epoch = -1, cepoch = -1;
    const st_cli_opt_t opts[] = {
        {0, "topic", ST_CLI_OPT_STR, &topic, "TOPIC", "the partition's topic"},
        {0, "partition", ST_CLI_OPT_INT, &partition, "N", "the partition"},
        {0, "start-offset", ST_CLI_OPT_INT, &start, "OFFSET",
         "the first offset of the hanging transaction (from `txn producers`)"},
        {0, "producer-id", ST_CLI_OPT_INT, &pid, "ID", "its producer id"},
        {0, "producer-epoch", ST_CLI_OPT_INT, &epoch, "E", "its producer epoch"},
        {0, "coordinator-epoch", ST_CLI_OPT_INT, &cepoch, "C", "its coordinator epoch"},
        ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage,
                          "Aborts a hanging transaction on one partition by writing an ABORT "
                          "marker there (as kafka-transactions.sh abort). Only for a transaction "
                          "its coordinator no longer knows (`txn producers` shows its start).",
                          opts, true, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc < 0)
        rc = parse_tp(usage, topic, partition);
    if (rc < 0 && start < 0 && (pid < 0 || epoch < 0 || epoch > INT16_MAX || cepoch < 0))
        rc = st_cli_usage_error(usage, "give --start-offset, or --producer-id, --producer-epoch "
                                       "and --coordinator-epoch");
    if (rc >= 0)
        return rc;
    cluster_t cl;
    st_cli_kconn_t c = {.fd = -1};
    rc = ST_CLI_FAIL;
    st_kp_describe_producers_resp_partition_t *p;
    if (cluster_open(&cl, topic) || describe_producers(&cl, topic, (int32_t)partition, &c, &p))
        goto out;
    if (start >= 0) {
        int found = 0;
        for (int i = 0; i < p->active_producers_count; i++)
            if (p->active_producers[i].current_txn_start_offset == start) {
                pid = p->active_producers[i].producer_id;
                epoch = p->active_producers[i].producer_epoch;
                cepoch = p->active_producers[i].coordinator_epoch;
                found = 1;
            }
        if (!found) {
            st_cli_errorf("%s-%" PRId64 ": no open transaction starts at offset %" PRId64, topic,
                          partition, start);
            goto out;
        }
    }
    int16_t v = st_cli_kconn_version(&c, ST_KP_API_WRITE_TXN_MARKERS, 0, 1);
    if (v < 0)
        goto out;
    int32_t pidx = (int32_t)partition;
    st_kp_write_txn_markers_req_topic_t t = {
        .name = st_kstr(topic), .partition_indexes = &pidx, .partition_indexes_count = 1};
    st_kp_write_txn_markers_req_marker_t m = {.producer_id = pid,
                                              .producer_epoch = (int16_t)epoch,
                                              .transaction_result = false,
                                              .topics = &t,
                                              .topics_count = 1,
                                              .coordinator_epoch =
                                                  (int32_t)(cepoch < 0 ? 0 : cepoch)};
    st_kp_write_txn_markers_req_t req = {.markers = &m, .markers_count = 1};
    st_kp_write_txn_markers_resp_t resp;
    if (ST_CLI_KCALL(&c, WRITE_TXN_MARKERS, write_txn_markers, v, &req, &cl.arena, &resp))
        goto out;
    int16_t err = -1;
    if (resp.markers_count == 1 && resp.markers[0].topics_count == 1 &&
        resp.markers[0].topics[0].partitions_count == 1)
        err = resp.markers[0].topics[0].partitions[0].error_code;
    if (err) {
        st_cli_errorf("%s-%" PRId64 ": the marker was refused: %s", topic, partition,
                      err < 0 ? "no answer for the partition" : st_kerr_name(err));
        goto out;
    }
    printf("aborted producer %" PRId64 " (epoch %" PRId64 ") on %s-%" PRId64 "\n", pid, epoch,
           topic, partition);
    rc = ST_CLI_OK;
out:
    st_cli_kconn_close(&c);
    cluster_close(&cl);
    return rc;
}
