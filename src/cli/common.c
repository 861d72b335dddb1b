/*
 * common.c — shared plumbing of the `strata` commands (see common.h).
 */
#include "cli/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(ST_CLI_OFFSET_BEGINNING == RD_KAFKA_OFFSET_BEGINNING, "offset constants");
_Static_assert(ST_CLI_OFFSET_END == RD_KAFKA_OFFSET_END, "offset constants");
_Static_assert(ST_CLI_OFFSET_TAIL_BASE == RD_KAFKA_OFFSET_TAIL_BASE, "offset constants");

st_cli_common_t st_cli_common = {.timeout_ms = 10000};
volatile sig_atomic_t st_cli_stop;

const st_cli_opt_t st_cli_common_opts[] = {
    {'b', "brokers", ST_CLI_OPT_STR, &st_cli_common.brokers, "HOST:PORT[,...]",
     "brokers to bootstrap from (default $STRATA_BROKERS or " ST_CLI_DEFAULT_BROKERS ")"},
    {'X', "property", ST_CLI_OPT_LIST, &st_cli_common.xprops, "KEY=VALUE",
     "librdkafka configuration property"},
    {0, "timeout", ST_CLI_OPT_STR, &st_cli_common.timeout_str, "DURATION",
     "how long to wait for the broker (default 10s)"},
    {'v', "verbose", ST_CLI_OPT_FLAG, &st_cli_common.verbose, NULL, "show librdkafka's log lines"},
    ST_CLI_OPT_END,
};

static void on_signal(int sig)
{
    (void)sig;
    st_cli_stop = 1;
}

void st_cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void st_cli_errorf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("strata: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int st_cli_usage_error(const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("strata: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (usage) {
        fprintf(stderr, "usage: strata %s\n", usage);
        /* "topic create NAME ..." -> "strata topic create --help" */
        char cmd[64];
        size_t n = 0;
        for (const char *p = usage; *p && n + 1 < sizeof(cmd); p++) {
            if (*p == ' ' && (p[1] == '[' || p[1] == '-' || (p[1] >= 'A' && p[1] <= 'Z')))
                break;
            cmd[n++] = *p;
        }
        cmd[n] = '\0';
        fprintf(stderr, "(run 'strata %s --help' for the options)\n", cmd);
    }
    return ST_CLI_USAGE;
}

int st_cli_parse(int argc, char **argv, const char *usage, const char *summary,
                 const st_cli_opt_t *opts, bool common, st_cli_strlist_t *pos, size_t min_pos,
                 size_t max_pos)
{
    const st_cli_opt_t *tables[3] = {opts, common ? st_cli_common_opts : NULL, NULL};
    char err[256];
    int r = st_cli_args_parse(tables, argc, argv, pos, err, sizeof(err));
    if (r == ST_CLI_ARGS_HELP) {
        st_cli_args_help(stdout, usage, summary, tables);
        return ST_CLI_OK;
    }
    if (r == ST_CLI_ARGS_ERROR)
        return st_cli_usage_error(usage, "%s", err);
    if (pos->n < min_pos)
        return st_cli_usage_error(usage, "missing argument");
    if (pos->n > max_pos)
        return st_cli_usage_error(usage, "unexpected argument '%s'", pos->v[max_pos]);
    if (common) {
        if (!st_cli_common.brokers || !*st_cli_common.brokers)
            st_cli_common.brokers = getenv("STRATA_BROKERS");
        if (!st_cli_common.brokers || !*st_cli_common.brokers)
            st_cli_common.brokers = ST_CLI_DEFAULT_BROKERS;
        if (st_cli_common.timeout_str &&
            (st_cli_parse_duration_ms(st_cli_common.timeout_str, &st_cli_common.timeout_ms) < 0 ||
             st_cli_common.timeout_ms <= 0 || st_cli_common.timeout_ms > INT32_MAX))
            return st_cli_usage_error(usage,
                                      "--timeout wants a duration like 500ms or 10s, "
                                      "not '%s'",
                                      st_cli_common.timeout_str);
    }
    return -1;
}

/* librdkafka logs connection failures on its own; keep them for -v. */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    if (st_cli_common.verbose)
        fprintf(stderr, "rdkafka %d %s: %s\n", level, fac, buf);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (st_cli_common.verbose || err == RD_KAFKA_RESP_ERR__FATAL)
        fprintf(stderr, "strata: librdkafka: %s: %s\n", rd_kafka_err2name(err), reason);
}

int st_cli_conf_set(rd_kafka_conf_t *conf, const char *key, const char *value)
{
    char err[512];
    if (rd_kafka_conf_set(conf, key, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        st_cli_errorf("cannot set %s=%s: %s", key, value, err);
        return -1;
    }
    return 0;
}

rd_kafka_conf_t *st_cli_conf(void)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    if (st_cli_conf_set(conf, "bootstrap.servers", st_cli_common.brokers) < 0 ||
        st_cli_conf_set(conf, "client.id", "strata-cli") < 0 ||
        st_cli_conf_set(conf, "log.connection.close", "false") < 0)
        goto fail;
    for (size_t i = 0; i < st_cli_common.xprops.n; i++) {
        char *buf;
        const char *k, *v;
        if (st_cli_split_kv(st_cli_common.xprops.v[i], &buf, &k, &v) < 0) {
            st_cli_errorf("-X wants key=value, not '%s'", st_cli_common.xprops.v[i]);
            goto fail;
        }
        int r = st_cli_conf_set(conf, k, v);
        free(buf);
        if (r < 0)
            goto fail;
    }
    return conf;
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

rd_kafka_t *st_cli_client(rd_kafka_type_t type, rd_kafka_conf_t *conf)
{
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof(err));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        st_cli_errorf("cannot create a Kafka client: %s", err);
    }
    return rk;
}

rd_kafka_t *st_cli_admin_client(void)
{
    rd_kafka_conf_t *conf = st_cli_conf();
    return conf ? st_cli_client(RD_KAFKA_PRODUCER, conf) : NULL;
}

void st_cli_client_destroy(rd_kafka_t *rk)
{
    if (rk)
        rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

const char *st_cli_hint(rd_kafka_resp_err_t err)
{
    switch (err) {
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE:
        return "is strata-server running? Start one with `make run`, or point -b or "
               "STRATA_BROKERS at it";
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
        return "the broker did not answer in time; check it is running and reachable, or "
               "raise --timeout";
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
        return "check the name with `strata topic list`, or create it with "
               "`strata topic create`";
    case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS:
        return "pick another name, or delete it first with `strata topic delete`";
    case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
        return "the partition count must be positive (and, for add-partitions, larger than "
               "now)";
    case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR:
        return "the replication factor cannot exceed the number of brokers "
               "(see `strata cluster info`)";
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION:
    case RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE:
        return "this broker does not support that request (yet)";
    case RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND:
        return "check the name with `strata group list`";
    case RD_KAFKA_RESP_ERR_NON_EMPTY_GROUP:
        return "stop the group's consumers first";
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
        return "send smaller messages or raise the topic's max.message.bytes";
    case RD_KAFKA_RESP_ERR_INVALID_CONFIG:
        return "check the config name and value (Kafka's topic config names)";
    default:
        return "";
    }
}

void st_cli_report(const char *what, rd_kafka_resp_err_t err, const char *errstr)
{
    const char *hint = st_cli_hint(err);
    if (!errstr || !*errstr)
        errstr = rd_kafka_err2str(err);
    fprintf(stderr, "strata: %s: %s%s%s\n", what, errstr, *hint ? " — " : "", hint);
}

const rd_kafka_metadata_t *st_cli_metadata(rd_kafka_t *rk, const char *topic)
{
    const rd_kafka_metadata_t *md = NULL;
    rd_kafka_topic_t *rkt = topic ? rd_kafka_topic_new(rk, topic, NULL) : NULL;
    rd_kafka_resp_err_t err =
        rd_kafka_metadata(rk, topic ? 0 : 1, rkt, &md, (int)st_cli_common.timeout_ms);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    if (err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__TIMED_OUT ||
        err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) {
        fprintf(stderr,
                "strata: no broker at %s — is strata-server running? Start one with "
                "`make run`, or point -b or STRATA_BROKERS at it (%s)\n",
                st_cli_common.brokers, rd_kafka_err2str(err));
        return NULL;
    }
    if (err) {
        st_cli_report("metadata request failed", err, NULL);
        return NULL;
    }
    return md;
}

const rd_kafka_metadata_topic_t *st_cli_md_topic(const rd_kafka_metadata_t *md, const char *topic)
{
    for (int i = 0; i < md->topic_cnt; i++)
        if (!strcmp(md->topics[i].topic, topic))
            return &md->topics[i];
    return NULL;
}

rd_kafka_AdminOptions_t *st_cli_admin_options(rd_kafka_t *rk, rd_kafka_admin_op_t op)
{
    char err[256];
    rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(rk, op);
    rd_kafka_AdminOptions_set_request_timeout(o, (int)st_cli_common.timeout_ms, err, sizeof(err));
    if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS || op == RD_KAFKA_ADMIN_OP_DELETETOPICS ||
        op == RD_KAFKA_ADMIN_OP_CREATEPARTITIONS)
        rd_kafka_AdminOptions_set_operation_timeout(o, (int)st_cli_common.timeout_ms, err,
                                                    sizeof(err));
    return o;
}

rd_kafka_event_t *st_cli_admin_wait(rd_kafka_queue_t *q, rd_kafka_event_type_t type,
                                    const char *what)
{
    int64_t waited = 0;
    while (waited <= st_cli_common.timeout_ms + 5000) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 200);
        waited += 200;
        if (!ev)
            continue;
        if (rd_kafka_event_type(ev) != type) {
            rd_kafka_event_destroy(ev);
            continue;
        }
        rd_kafka_resp_err_t err = rd_kafka_event_error(ev);
        if (err) {
            if (err == RD_KAFKA_RESP_ERR__TRANSPORT)
                fprintf(stderr, "strata: %s: %s — no answer from %s; is strata-server running?\n",
                        what, rd_kafka_event_error_string(ev), st_cli_common.brokers);
            else if (err == RD_KAFKA_RESP_ERR__TIMED_OUT)
                fprintf(stderr,
                        "strata: %s: %s — the cluster did not answer within --timeout (%lld ms); "
                        "check `strata cluster health`, or the broker may not support this "
                        "request yet\n",
                        what, rd_kafka_event_error_string(ev), (long long)st_cli_common.timeout_ms);
            else
                st_cli_report(what, err, rd_kafka_event_error_string(ev));
            rd_kafka_event_destroy(ev);
            return NULL;
        }
        return ev;
    }
    st_cli_errorf("%s: no answer from %s after %lld ms — is strata-server running?", what,
                  st_cli_common.brokers, (long long)st_cli_common.timeout_ms);
    return NULL;
}
