/*
 * main.c — `strata`, the command-line tool: dispatches "strata GROUP [SUBCOMMAND] ARGS..." to
 * the command functions in cmds.h and prints the command overview.
 *
 * Exit status: 0 success, 1 failure, 2 usage error (bad or missing arguments).
 */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cmds.h"
#include "cli/common.h"

typedef struct command {
    const char *group; /* first word */
    const char *name;  /* second word, or NULL for one-word commands */
    int (*fn)(int argc, char **argv);
    const char *summary; /* for the overview */
    int hidden;          /* left out of the overview */
} command_t;

static const command_t commands[] = {
    {"cluster", "info", st_cli_cluster_info, "brokers, controller and cluster id", 0},
    {"cluster", "health", st_cli_cluster_health, "are all brokers up and partitions led", 0},
    {"cluster", "start", st_cli_cluster_start,
     "run N brokers on this machine, wait till all are up", 0},
    {"cluster", "stop", st_cli_cluster_stop, "stop the brokers `cluster start` started", 0},
    {"cluster", "status", st_cli_cluster_status, "the local brokers: running, pids, fenced or not",
     0},
    {"cluster", "elect-leaders", st_cli_cluster_elect_leaders,
     "move leadership to preferred replicas (or unclean)", 0},
    {"cluster", "reassign", st_cli_cluster_reassign, "move a partition to other replicas", 0},
    {"cluster", "reassignments", st_cli_cluster_reassignments, "the partition moves in progress",
     0},
    {"cluster", "config", st_cli_cluster_config,
     "get or set broker settings at run time (get|set --broker N|--default)", 0},
    {"topic", "create", st_cli_topic_create, "create a topic", 0},
    {"topic", "list", st_cli_topic_list, "list topics", 0},
    {"topic", "describe", st_cli_topic_describe, "partitions, leaders, offsets, configs", 0},
    {"topic", "delete", st_cli_topic_delete, "delete topics", 0},
    {"topic", "add-partitions", st_cli_topic_add_partitions, "grow a topic's partitions", 0},
    {"topic", "delete-records", st_cli_topic_delete_records,
     "delete a topic's records below an offset", 0},
    {"topic", "alter-config", st_cli_topic_alter_config, "set or delete topic configs", 0},
    {"produce", NULL, st_cli_produce, "write messages (argument or one per stdin line)", 0},
    {"consume", NULL, st_cli_consume, "read messages", 0},
    {"group", "list", st_cli_group_list, "list consumer groups", 0},
    {"group", "describe", st_cli_group_describe, "members, offsets and lag of a group", 0},
    {"group", "seek", st_cli_group_seek, "move an inactive group's committed offsets", 0},
    {"group", "delete", st_cli_group_delete, "delete consumer groups", 0},
    {"txn", "list", st_cli_txn_list, "transactional ids, producer ids and states", 0},
    {"txn", "describe", st_cli_txn_describe, "one transaction: state, partitions, age", 0},
    {"txn", "producers", st_cli_txn_producers, "a partition's producers and open transactions", 0},
    {"txn", "abort", st_cli_txn_abort, "abort a hanging transaction on one partition", 0},
    {"bench", "produce", st_cli_bench_produce,
     "producer throughput, latency; sticky, roundrobin or keyed", 0},
    {"bench", "consume", st_cli_bench_consume, "consumer throughput", 0},
    {"bench", "e2e", st_cli_bench_e2e, "produce-to-consume latency", 0},
    {"debug", "dump-log", st_cli_debug_dump_log, "print the batches of a segment file", 0},
    {"debug", "verify-index", st_cli_debug_verify_index, "check a segment's index files", 0},
    {"debug", "bundle", st_cli_debug_bundle,
     "fetch a broker's logs, settings, figures into one .tar.gz for a bug report", 0},
    {"debug", "mock-cluster", st_cli_debug_mock_cluster, "run librdkafka's mock cluster", 1},
    {"proxy", NULL, st_cli_proxy, "forward Kafka traffic, optionally printing it", 0},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The groups whose commands ask and answer (common.h st_cli_bounded): the rest run until
 * stopped or until their input ends. */
static bool request_style(const char *group)
{
    return !strcmp(group, "cluster") || !strcmp(group, "topic") || !strcmp(group, "group") ||
           !strcmp(group, "txn");
}

static void overview(FILE *f, const char *only_group)
{
    fprintf(f, "usage: strata COMMAND [ARGS...]   (strata COMMAND --help for its options)\n\n"
               "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const command_t *c = &commands[i];
        if (c->hidden || (only_group && strcmp(c->group, only_group)))
            continue;
        char words[48];
        snprintf(words, sizeof(words), "%s%s%s", c->group, c->name ? " " : "",
                 c->name ? c->name : "");
        fprintf(f, "  %-24s %s\n", words, c->summary);
    }
    if (!only_group)
        fprintf(f,
                "\ncommon options: -b HOST:PORT (or $STRATA_BROKERS; default %s),\n"
                "  -X key=value (librdkafka property), --timeout DURATION, -v\n"
                "exit status: 0 ok, 1 failure, 2 usage error\n",
                ST_CLI_DEFAULT_BROKERS);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        overview(stderr, NULL);
        return ST_CLI_USAGE;
    }
    const char *g = argv[1];
    if (!strcmp(g, "-h") || !strcmp(g, "--help") || !strcmp(g, "help")) {
        overview(stdout, NULL);
        return ST_CLI_OK;
    }
    if (!strcmp(g, "--version") || !strcmp(g, "version")) {
        printf("strata %s\n", STRATA_VERSION);
        return ST_CLI_OK;
    }
    int group_known = 0;
    for (size_t i = 0; i < NCOMMANDS; i++) {
        const command_t *c = &commands[i];
        if (strcmp(c->group, g))
            continue;
        group_known = 1;
        if (!c->name) {
            st_cli_catch_signals();
            return c->fn(argc - 2, argv + 2);
        }
        if (argc >= 3 && !strcmp(argv[2], c->name)) {
            st_cli_bounded = request_style(c->group);
            st_cli_catch_signals();
            return c->fn(argc - 3, argv + 3);
        }
    }
    if (!group_known) {
        st_cli_errorf("unknown command '%s'", g);
        overview(stderr, NULL);
        return ST_CLI_USAGE;
    }
    if (argc >= 3 && (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help"))) {
        overview(stdout, g);
        return ST_CLI_OK;
    }
    if (argc >= 3)
        st_cli_errorf("unknown command '%s %s'", g, argv[2]);
    else
        st_cli_errorf("'%s' needs a subcommand", g);
    overview(stderr, g);
    return ST_CLI_USAGE;
}
