/*
 * cluster.c — `strata cluster info` and `strata cluster health`.
 */
#include <stdbool.h>
#include <stdio.h>

#include "cli/cmds.h"
#include "cli/common.h"

/* The brokers partitions name as replicas that the metadata's broker list lacks (down, or
 * fenced by the controller): their ids into ids[0..*n) (at most max), with how many partitions
 * each hosts a replica of. */
static void missing_brokers(const rd_kafka_metadata_t *md, int32_t *ids, int *parts, int *n,
                            int max)
{
    *n = 0;
    for (int t = 0; t < md->topic_cnt; t++) {
        const rd_kafka_metadata_topic_t *tp = &md->topics[t];
        for (int p = 0; p < tp->partition_cnt; p++) {
            const rd_kafka_metadata_partition_t *pp = &tp->partitions[p];
            for (int r = 0; r < pp->replica_cnt; r++) {
                int32_t id = pp->replicas[r];
                bool listed = false;
                for (int b = 0; b < md->broker_cnt && !listed; b++)
                    listed = md->brokers[b].id == id;
                if (listed)
                    continue;
                int k = 0;
                while (k < *n && ids[k] != id)
                    k++;
                if (k == *n) {
                    if (*n == max)
                        continue;
                    ids[k] = id;
                    parts[k] = 0;
                    (*n)++;
                }
                parts[k]++;
            }
        }
    }
}

int st_cli_cluster_info(int argc, char **argv)
{
    static const char usage[] = "cluster info";
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {ST_CLI_OPT_END};
    int rc =
        st_cli_parse(argc, argv, usage, "Prints the cluster id, the controller and the brokers.",
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
    char *id = rd_kafka_clusterid(rk, (int)st_cli_time_left_ms());
    int32_t ctrl = rd_kafka_controllerid(rk, (int)st_cli_time_left_ms());
    printf("cluster id:  %s\n", id ? id : "(none)");
    if (ctrl >= 0)
        printf("controller:  %d\n", ctrl);
    else
        printf("controller:  (unknown)\n");
    printf("brokers:     %d\n\n%-6s %-30s\n", md->broker_cnt, "ID", "ADDRESS");
    for (int i = 0; i < md->broker_cnt; i++)
        printf("%-6d %s:%d%s\n", md->brokers[i].id, md->brokers[i].host, md->brokers[i].port,
               md->brokers[i].id == ctrl ? "  (controller)" : "");
    int32_t gone[64];
    int gone_parts[64], ngone;
    missing_brokers(md, gone, gone_parts, &ngone, 64);
    for (int i = 0; i < ngone; i++)
        printf("%-6d %-30s  (not in the broker list: down or fenced; a replica of %d "
               "partition(s))\n",
               gone[i], "-", gone_parts[i]);
    if (id)
        rd_kafka_mem_free(rk, id);
    rd_kafka_metadata_destroy(md);
    st_cli_client_destroy(rk);
    return ST_CLI_OK;
}

int st_cli_cluster_health(int argc, char **argv)
{
    static const char usage[] = "cluster health";
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage,
                          "Checks that the brokers answer and every partition has a leader and "
                          "a full in-sync\nreplica set. Exits 1 when the cluster is unhealthy.",
                          opts, true, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc >= 0)
        return rc;
    rd_kafka_t *rk = st_cli_admin_client();
    if (!rk)
        return ST_CLI_FAIL;
    const rd_kafka_metadata_t *md = st_cli_metadata(rk, NULL);
    if (!md) {
        printf("healthy:               no (no broker answers)\n");
        st_cli_client_destroy(rk);
        return ST_CLI_FAIL;
    }
    int partitions = 0, leaderless = 0, under = 0, topic_errors = 0;
    for (int t = 0; t < md->topic_cnt; t++) {
        const rd_kafka_metadata_topic_t *tp = &md->topics[t];
        if (tp->err) {
            topic_errors++;
            printf("topic %s: %s\n", tp->topic, rd_kafka_err2str(tp->err));
        }
        for (int p = 0; p < tp->partition_cnt; p++) {
            const rd_kafka_metadata_partition_t *pp = &tp->partitions[p];
            partitions++;
            if (pp->leader < 0) {
                leaderless++;
                printf("leaderless: %s/%d\n", tp->topic, pp->id);
            } else if (pp->isr_cnt < pp->replica_cnt) {
                under++;
                printf("under-replicated: %s/%d (%d of %d replicas in sync)\n", tp->topic, pp->id,
                       pp->isr_cnt, pp->replica_cnt);
            }
        }
    }
    int32_t gone[64];
    int gone_parts[64], ngone;
    missing_brokers(md, gone, gone_parts, &ngone, 64);
    for (int i = 0; i < ngone; i++)
        printf("broker %d: down or fenced (not in the broker list; a replica of %d "
               "partition(s))\n",
               gone[i], gone_parts[i]);
    int healthy = !leaderless && !under && !topic_errors && !ngone;
    printf("healthy:               %s\n"
           "brokers:               %d\n"
           "topics:                %d\n"
           "partitions:            %d\n"
           "leaderless partitions: %d\n"
           "under-replicated:      %d\n"
           "brokers down/fenced:   %d\n",
           healthy ? "yes" : "no", md->broker_cnt, md->topic_cnt, partitions, leaderless, under,
           ngone);
    rd_kafka_metadata_destroy(md);
    st_cli_client_destroy(rk);
    return healthy ? ST_CLI_OK : ST_CLI_FAIL;
}
