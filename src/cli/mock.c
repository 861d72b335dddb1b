/*
 * mock.c — `strata debug mock-cluster`: librdkafka's built-in mock Kafka cluster, served until
 * SIGINT/SIGTERM.
 *
 * It prints the bootstrap address ("127.0.0.1:PORT[,...]") as the first line on stdout and
 * "ready" on the second once the --topic topics exist, so a script can start it in the
 * background, read one line and go (see docs/cli.md, "Mock cluster").
 *
 * It is the yardstick the benchmarks compare Strata against (same clients, a broker that keeps
 * everything in memory) and what the CLI's own integration tests run against while the real
 * server cannot serve them. The mock implements the data-path and group APIs (Produce, Fetch,
 * ListOffsets, Metadata, the group protocol, offsets) but not the topic Admin APIs.
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmds.h"
#include "cli/common.h"

static const char usage[] = "debug mock-cluster [--brokers N] [--topic NAME[:PARTITIONS]]...";

int st_cli_debug_mock_cluster(int argc, char **argv)
{
    int64_t brokers = 1;
    st_cli_strlist_t topics = {0}, pos = {0};
    const st_cli_opt_t opts[] = {
        {0, "brokers", ST_CLI_OPT_INT, &brokers, "N", "number of mock brokers (default 1)"},
        {0, "topic", ST_CLI_OPT_LIST, &topics, "NAME[:PARTITIONS]",
         "create a topic (default 1 partition)"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Runs librdkafka's in-memory mock Kafka cluster and prints its "
                          "bootstrap address,\nthen serves until interrupted. For tests and "
                          "benchmark baselines.",
                          opts, false, &pos, 0, 0);
    if (rc >= 0)
        goto out;
    rc = ST_CLI_FAIL;
    if (brokers < 1 || brokers > 64) {
        rc = st_cli_usage_error(usage, "--brokers must be between 1 and 64");
        goto out;
    }
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", err, sizeof(err));
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (!rk) {
        st_cli_errorf("cannot create the mock cluster's handle: %s", err);
        goto out;
    }
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(rk, (int)brokers);
    if (!mc) {
        st_cli_errorf("cannot start the mock cluster");
        rd_kafka_destroy(rk);
        goto out;
    }
    for (size_t i = 0; i < topics.n; i++) {
        char name[256];
        int partitions = 1;
        const char *colon = strchr(topics.v[i], ':');
        size_t len = colon ? (size_t)(colon - topics.v[i]) : strlen(topics.v[i]);
        int64_t p = 1;
        if (len == 0 || len >= sizeof(name) ||
            (colon && (st_cli_parse_i64(colon + 1, &p) < 0 || p < 1 || p > 100000))) {
            rc = st_cli_usage_error(usage, "--topic wants NAME or NAME:PARTITIONS, not '%s'",
                                    topics.v[i]);
            rd_kafka_mock_cluster_destroy(mc);
            rd_kafka_destroy(rk);
            goto out;
        }
        memcpy(name, topics.v[i], len);
        name[len] = '\0';
        partitions = (int)p;
        rd_kafka_resp_err_t e =
            rd_kafka_mock_topic_create(mc, name, partitions, brokers < 3 ? (int)brokers : 3);
        if (e) {
            st_cli_errorf("cannot create mock topic %s: %s", name, rd_kafka_err2str(e));
            rd_kafka_mock_cluster_destroy(mc);
            rd_kafka_destroy(rk);
            goto out;
        }
    }
    printf("%s\nready\n", rd_kafka_mock_cluster_bootstraps(mc));
    fflush(stdout);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, &old);
    while (!st_cli_stop)
        sigsuspend(&old);
    sigprocmask(SIG_SETMASK, &old, NULL);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
    rc = ST_CLI_OK;
out:
    st_cli_strlist_fini(&topics);
    st_cli_strlist_fini(&pos);
    return rc;
}
