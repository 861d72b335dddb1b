/*
 * local.h — the layout of a cluster of strata-server processes on this machine, as
 * `strata cluster start|stop|status` (cluster_local.c) and scripts/cluster.sh lay it out, and
 * what a broker's admin API says about the cluster (/v1/cluster). Nothing here starts a
 * process or opens a socket: it is unit-tested in tests/unit/cli/test_local.c.
 *
 * Broker i (1-based) of n:
 *
 *   Kafka listener      host:kafka_port + 100*(i-1)        (9092, 9192, 9292, ...)
 *   CONTROLLER          host:kafka_port + 100*(i-1) + 1    (Raft over TCP, heartbeats UDP)
 *   admin API           host:admin_port + (i-1)            (9644, 9645, 9646, ...)
 *   voter               i <= min(n, 3)  (process.roles=broker,controller, else broker)
 *   files               DIR/<i>/data (log.dirs), DIR/<i>/server.log, DIR/<i>/server.pid,
 *                       DIR/<i>/server.exit (how the process ended, written by its monitor)
 *
 * DIR/cluster.conf records n, host and the two base ports (st_cli_local_conf_format), so
 * `stop` and `status` find a cluster started with other ports without being told again.
 *
 * A podman cluster (`start --podman`; cluster.conf: mode=podman, image=, project=) runs broker i
 * in container PROJECT-i (hostname and network alias strata-i on the network PROJECT, data in
 * the volume PROJECT-i) from IMAGE (deploy/Containerfile). Inside, every broker has the same
 * ports: INTERNAL :9092 (inter-broker, advertised strata-i:9092), EXTERNAL :9094, CONTROLLER
 * :9093, admin :9644. The host publishes broker i's EXTERNAL on host:kafka_port + 100*(i-1)
 * (what EXTERNAL advertises, so a client on the host reaches every broker) and its admin API on
 * host:admin_port + (i-1): the same host ports as a cluster of processes.
 *
 * Single-threaded; no state.
 */
#ifndef ST_CLI_LOCAL_H
#define ST_CLI_LOCAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/args.h"

#define ST_CLI_LOCAL_MAX        99 /* brokers: ports 9092 + 100*i stay apart */
#define ST_CLI_LOCAL_VOTERS     3  /* brokers 1..3 vote in the metadata quorum */
#define ST_CLI_LOCAL_KAFKA_PORT 9092
#define ST_CLI_LOCAL_ADMIN_PORT 9644
#define ST_CLI_LOCAL_HOST       "127.0.0.1"
#define ST_CLI_LOCAL_DIR        "./data-cluster"
#define ST_CLI_LOCAL_CONF       "cluster.conf"
#define ST_CLI_LOCAL_SETLEN     4200 /* one "key=value" (log.dirs holds a path) */
#define ST_CLI_LOCAL_NSETS      8    /* the --set settings each broker gets */

#define ST_CLI_LOCAL_IMAGE        "localhost/strata:latest" /* podman: the image by default */
#define ST_CLI_LOCAL_PROJECT      "strata-cluster"          /* podman: names' prefix by default */
#define ST_CLI_LOCAL_PODMAN_NSETS 10 /* the --set settings a container gets */

typedef struct st_cli_local {
    int n;            /* brokers, 1..ST_CLI_LOCAL_MAX */
    char host[64];    /* every listener's address */
    int kafka_port;   /* broker 1's Kafka port; broker i's is this + 100*(i-1) */
    int admin_port;   /* broker 1's admin port; broker i's is this + (i-1) */
    bool podman;      /* brokers are podman containers, not processes */
    char image[256];  /* podman: the image */
    char project[64]; /* podman: container PROJECT-i, network PROJECT, volume PROJECT-i */
} st_cli_local_t;

/* The default layout: 3 brokers, 127.0.0.1, 9092 and 9644. */
void st_cli_local_default(st_cli_local_t *l);
/* 0 when every port of the layout is in 1..65535 and no two brokers' ports collide (the
 * admin range against the Kafka and CONTROLLER ports too); -1 with a sentence in err. */
int st_cli_local_check(const st_cli_local_t *l, char *err, size_t errlen);

int st_cli_local_kafka_port(const st_cli_local_t *l, int i);
int st_cli_local_ctrl_port(const st_cli_local_t *l, int i);
int st_cli_local_admin_port(const st_cli_local_t *l, int i);
int st_cli_local_nvoters(const st_cli_local_t *l);
bool st_cli_local_is_voter(const st_cli_local_t *l, int i);

/*
 * The settings broker i gets, each "key=value" for one --set: node.id, process.roles,
 * controller.quorum.voters, listeners, advertised.listeners, controller.listener.names,
 * log.dirs (data_dir) and admin.listen. Returns how many (ST_CLI_LOCAL_NSETS), or -1 when
 * one does not fit.
 */
int st_cli_local_sets(const st_cli_local_t *l, int i, const char *data_dir,
                      char sets[][ST_CLI_LOCAL_SETLEN]);
/*
 * The settings broker i's container gets after the image's (strata-server --set, after
 * deploy/container.properties): node.id, process.roles, controller.quorum.voters (strata-v:9093),
 * listeners, listener.security.protocol.map, advertised.listeners, inter.broker.listener.name,
 * controller.listener.names, admin.listen and log.dirs (/var/lib/strata, the volume). Returns
 * how many (ST_CLI_LOCAL_PODMAN_NSETS), or -1 when one does not fit.
 */
int st_cli_local_podman_sets(const st_cli_local_t *l, int i, char sets[][ST_CLI_LOCAL_SETLEN]);
/* Broker i's container name, PROJECT-i; -1 when it does not fit. */
int st_cli_local_container(const st_cli_local_t *l, int i, char *buf, size_t len);
/* Whether s may name a podman project (container, network and volume prefix): 1..40 of
 * [a-zA-Z0-9_.-], starting with a letter or digit. */
bool st_cli_local_project_ok(const char *s);

/* "host:kafka_port(1),host:kafka_port(2),..." into buf; -1 when it does not fit. */
int st_cli_local_bootstrap(const st_cli_local_t *l, char *buf, size_t len);

/* DIR/cluster.conf's text ("brokers=3\nhost=...\nkafka_port=...\nadmin_port=...\n", then
 * "mode=podman\nimage=...\nproject=...\n" for a podman cluster; mode=process otherwise). */
int st_cli_local_conf_format(const st_cli_local_t *l, char *buf, size_t len);
/* Reads that text into *l (keys it does not know are skipped); -1 with err on a bad line or
 * a layout st_cli_local_check refuses. */
int st_cli_local_conf_parse(const char *text, st_cli_local_t *l, char *err, size_t errlen);

/* Splits s in place at blanks (spaces, tabs, newlines), appending each word to out
 * ($STRATA_ARGS, as the shell splits it; no quoting). Returns 0 or -ENOMEM. */
int st_cli_local_split_words(char *s, st_cli_strlist_t *out);

/* What one broker's GET /v1/cluster said (src/admin/render.c st_admin_render_cluster). */
#define ST_CLI_VIEW_MAX 128
typedef struct st_cli_view_broker {
    int32_t id;
    bool fenced; /* false where the answer has no "fenced" (a single node) */
    int port;
} st_cli_view_broker_t;

typedef struct st_cli_view {
    int32_t node_id;       /* the answering broker */
    int32_t controller_id; /* -1: none known */
    bool ready;            /* the broker serves Kafka (/v1/status/ready) */
    int nbrokers;
    st_cli_view_broker_t brokers[ST_CLI_VIEW_MAX];
} st_cli_view_t;

/* Parses a /v1/cluster body; -1 with err when it is not that JSON object. */
int st_cli_view_parse(const char *body, size_t len, st_cli_view_t *v, char *err, size_t errlen);

typedef enum st_cli_reg {
    ST_CLI_REG_NONE = 0, /* not in the broker list: never registered, or its session ended */
    ST_CLI_REG_FENCED,   /* registered, fenced by the controller */
    ST_CLI_REG_UNFENCED, /* registered and unfenced: it may lead partitions */
} st_cli_reg_t;

/* What v says of broker id. */
st_cli_reg_t st_cli_view_reg(const st_cli_view_t *v, int32_t id);
/* Whether v is complete for a cluster of brokers 1..n: ready, a controller, every one of them
 * registered and unfenced. */
bool st_cli_view_complete(const st_cli_view_t *v, int n);
const char *st_cli_reg_name(st_cli_reg_t r);

#endif
