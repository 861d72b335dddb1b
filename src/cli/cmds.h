/*
 * cmds.h — the `strata` commands. Each takes the arguments after its command words and
 * returns the exit status (ST_CLI_OK, ST_CLI_FAIL, ST_CLI_USAGE). main.c dispatches.
 */
#ifndef ST_CLI_CMDS_H
#define ST_CLI_CMDS_H

int st_cli_cluster_info(int argc, char **argv);
int st_cli_cluster_health(int argc, char **argv);
int st_cli_cluster_start(int argc, char **argv);
int st_cli_cluster_stop(int argc, char **argv);
int st_cli_cluster_status(int argc, char **argv);
int st_cli_cluster_elect_leaders(int argc, char **argv);
int st_cli_cluster_reassign(int argc, char **argv);
int st_cli_cluster_reassignments(int argc, char **argv);
int st_cli_cluster_config(int argc, char **argv);

int st_cli_topic_create(int argc, char **argv);
int st_cli_topic_list(int argc, char **argv);
int st_cli_topic_describe(int argc, char **argv);
int st_cli_topic_delete(int argc, char **argv);
int st_cli_topic_add_partitions(int argc, char **argv);
int st_cli_topic_delete_records(int argc, char **argv);
int st_cli_topic_alter_config(int argc, char **argv);

int st_cli_produce(int argc, char **argv);
int st_cli_consume(int argc, char **argv);

int st_cli_group_list(int argc, char **argv);
int st_cli_group_describe(int argc, char **argv);
int st_cli_group_seek(int argc, char **argv);
int st_cli_group_delete(int argc, char **argv);

int st_cli_bench_produce(int argc, char **argv);
int st_cli_bench_consume(int argc, char **argv);
int st_cli_bench_e2e(int argc, char **argv);

int st_cli_debug_dump_log(int argc, char **argv);
int st_cli_debug_verify_index(int argc, char **argv);
int st_cli_debug_mock_cluster(int argc, char **argv);
int st_cli_debug_bundle(int argc, char **argv);

int st_cli_proxy(int argc, char **argv);

int st_cli_txn_list(int argc, char **argv);
int st_cli_txn_describe(int argc, char **argv);
int st_cli_txn_producers(int argc, char **argv);
int st_cli_txn_abort(int argc, char **argv);

#endif
