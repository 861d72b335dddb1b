/*
 * produce.c — `strata produce TOPIC`: one message from --message, or one per line of stdin.
 *
 * Every message is accounted for: each delivery report prints "partition P offset O" on
 * stdout (or a JSON line), a failed one prints why on stderr, and the exit status is 1 if any
 * message was not delivered. When librdkafka's queue is full the tool waits (serving delivery
 * reports) with a doubling backoff from --retry-backoff up to --retry-backoff-max and tries
 * again; retriable broker errors are retried inside librdkafka (--retries,
 * --retry-backoff), so a message fails only once those are spent or --message-timeout passes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmds.h"
#include "cli/common.h"

typedef struct produce_state {
    uint64_t sent;      /* handed to librdkafka */
    uint64_t delivered; /* delivery report without error */
    uint64_t failed;    /* delivery report with an error */
    bool json;
} produce_state_t;

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    produce_state_t *st = opaque;
    uint64_t seq = (uint64_t)(uintptr_t)m->_private;
    if (m->err) {
        st->failed++;
        char what[128];
        snprintf(what, sizeof(what), "message %" PRIu64 " was not delivered", seq);
        st_cli_report(what, m->err, NULL);
        return;
    }
    st->delivered++;
    /* With acks=0 the broker sends no answer, so there is no offset to show. */
    char off[24] = "unknown (acks=0)", joff[24] = "null";
    if (m->offset >= 0) {
        snprintf(off, sizeof(off), "%" PRId64, m->offset);
        snprintf(joff, sizeof(joff), "%" PRId64, m->offset);
    }
    if (st->json)
        printf("{\"message\":%" PRIu64 ",\"topic\":\"%s\",\"partition\":%d,\"offset\":%s}\n", seq,
               rd_kafka_topic_name(m->rkt), (int)m->partition, joff);
    else
        printf("partition %d offset %s\n", (int)m->partition, off);
}

typedef struct produce_opts {
    const char *topic;
    int32_t partition;
    st_cli_strlist_t *headers;
    int64_t backoff_ms, backoff_max_ms;
} produce_opts_t;

/* Hands one message to librdkafka, waiting out a full queue; returns 0 or -1. */
static int send_one(rd_kafka_t *rk, const produce_opts_t *po, produce_state_t *st, const char *key,
                    size_t key_len, const char *val, size_t val_len)
{
    int64_t backoff = po->backoff_ms;
    rd_kafka_headers_t *hdrs = NULL;
    if (po->headers->n) {
        hdrs = rd_kafka_headers_new(po->headers->n);
        for (size_t i = 0; i < po->headers->n; i++) {
            const char *h = po->headers->v[i];
            const char *eq = strchr(h, '=');
            rd_kafka_header_add(hdrs, h, (ssize_t)(eq - h), eq + 1, (ssize_t)strlen(eq + 1));
        }
    }
    for (;;) {
        uint64_t seq = st->sent + 1;
        rd_kafka_resp_err_t err =
            rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(po->topic), RD_KAFKA_V_PARTITION(po->partition),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                              RD_KAFKA_V_KEY(key, key_len), RD_KAFKA_V_VALUE((void *)val, val_len),
                              RD_KAFKA_V_HEADERS(hdrs ? rd_kafka_headers_copy(hdrs) : NULL),
                              RD_KAFKA_V_OPAQUE((void *)(uintptr_t)seq), RD_KAFKA_V_END);
        if (!err) {
            st->sent++;
            break;
        }
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && !st_cli_stop) {
            /* Back-pressure: serve delivery reports while waiting, then try again. */
            rd_kafka_poll(rk, (int)backoff);
            backoff = backoff * 2 > po->backoff_max_ms ? po->backoff_max_ms : backoff * 2;
            continue;
        }
        /* producev() did not take the headers copy on failure. */
        char what[128];
        snprintf(what, sizeof(what), "cannot send message %" PRIu64, seq);
        st_cli_report(what, err, NULL);
        st->failed++;
        st->sent++;
        if (hdrs)
            rd_kafka_headers_destroy(hdrs);
        return -1;
    }
    if (hdrs)
        rd_kafka_headers_destroy(hdrs);
    rd_kafka_poll(rk, 0);
    return 0;
}

int st_cli_produce(int argc, char **argv)
{
    static const char usage[] =
        "produce TOPIC [--message M] [--key K] [--key-delimiter D] [--header K=V]... "
        "[--partition P] [--acks 0|1|all] [--compression C] [--null-value]";
    const char *message = NULL, *key = NULL, *delim = NULL, *acks = "all", *compression = "none",
               *backoff_s = "100ms", *backoff_max_s = "5s", *msg_timeout_s = "60s";
    int64_t partition = -1, retries = 2147483647;
    bool json = false, null_value = false;
    st_cli_strlist_t headers = {0}, pos = {0};
    const st_cli_opt_t opts[] = {
        {'m', "message", ST_CLI_OPT_STR, &message, "M",
         "the message to send (default: one message per line of stdin)"},
        {'k', "key", ST_CLI_OPT_STR, &key, "K", "key of every message"},
        {'K', "key-delimiter", ST_CLI_OPT_STR, &delim, "D",
         "split each stdin line at the first D into key and value"},
        {'H', "header", ST_CLI_OPT_LIST, &headers, "K=V", "add a header"},
        {'p', "partition", ST_CLI_OPT_INT, &partition, "P",
         "send to this partition (default: by key, or spread)"},
        {'a', "acks", ST_CLI_OPT_STR, &acks, "0|1|all", "acknowledgements to wait for (all)"},
        {'z', "compression", ST_CLI_OPT_STR, &compression, "CODEC",
         "none, gzip, snappy, lz4 or zstd (none)"},
        {0, "retries", ST_CLI_OPT_INT, &retries, "N",
         "retries of a retriable broker error (default: until --message-timeout)"},
        {0, "retry-backoff", ST_CLI_OPT_STR, &backoff_s, "DURATION",
         "first wait before a retry (100ms); doubles on a full queue"},
        {0, "retry-backoff-max", ST_CLI_OPT_STR, &backoff_max_s, "DURATION",
         "longest wait between tries on a full queue (5s)"},
        {0, "message-timeout", ST_CLI_OPT_STR, &msg_timeout_s, "DURATION",
         "give up on a message after this long (60s)"},
        {0, "json", ST_CLI_OPT_FLAG, &json, NULL, "print each delivery as a JSON line"},
        {0, "null-value", ST_CLI_OPT_FLAG, &null_value, NULL,
         "send one message whose value is null (a tombstone: with --key, it deletes the key "
         "from a compacted topic)"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Sends messages and prints the partition and offset of each. Exits 1 "
                          "if any message\nwas not delivered.",
                          opts, true, &pos, 1, 1);
    if (rc >= 0)
        goto out;
    int64_t backoff_ms, backoff_max_ms, msg_timeout_ms;
    if (st_cli_parse_duration_ms(backoff_s, &backoff_ms) < 0 || backoff_ms < 1 ||
        st_cli_parse_duration_ms(backoff_max_s, &backoff_max_ms) < 0 ||
        backoff_max_ms < backoff_ms ||
        st_cli_parse_duration_ms(msg_timeout_s, &msg_timeout_ms) < 0 || msg_timeout_ms < 1 ||
        msg_timeout_ms > INT32_MAX) {
        rc = st_cli_usage_error(usage, "bad duration in --retry-backoff, --retry-backoff-max "
                                       "or --message-timeout");
        goto out;
    }
    if (null_value && (message || delim)) {
        rc = st_cli_usage_error(usage, "--null-value sends one message without a value: not "
                                       "with --message or --key-delimiter");
        goto out;
    }
    if (strcmp(acks, "0") && strcmp(acks, "1") && strcmp(acks, "all") && strcmp(acks, "-1")) {
        rc = st_cli_usage_error(usage, "--acks must be 0, 1 or all, not '%s'", acks);
        goto out;
    }
    for (size_t i = 0; i < headers.n; i++)
        if (!strchr(headers.v[i], '=') || headers.v[i][0] == '=') {
            rc = st_cli_usage_error(usage, "--header wants key=value, not '%s'", headers.v[i]);
            goto out;
        }
    if (delim && (!*delim || key)) {
        rc = st_cli_usage_error(usage, "--key-delimiter needs a non-empty delimiter and no "
                                       "--key");
        goto out;
    }
    if (partition < -1 || partition > INT32_MAX) {
        rc = st_cli_usage_error(usage, "--partition must be a partition number");
        goto out;
    }
    rc = ST_CLI_FAIL;
    produce_state_t st = {.json = json};
    rd_kafka_conf_t *conf = st_cli_conf();
    if (!conf)
        goto out;
    char num[32];
    snprintf(num, sizeof(num), "%" PRId64, retries);
    char bo[32], mt[32];
    snprintf(bo, sizeof(bo), "%" PRId64, backoff_ms);
    snprintf(mt, sizeof(mt), "%" PRId64, msg_timeout_ms);
    if (st_cli_conf_set(conf, "acks", acks) < 0 ||
        st_cli_conf_set(conf, "compression.codec", compression) < 0 ||
        st_cli_conf_set(conf, "message.send.max.retries", num) < 0 ||
        st_cli_conf_set(conf, "retry.backoff.ms", bo) < 0 ||
        st_cli_conf_set(conf, "message.timeout.ms", mt) < 0 ||
        st_cli_conf_set(conf, "linger.ms", message ? "0" : "5") < 0) {
        rd_kafka_conf_destroy(conf);
        rc = ST_CLI_USAGE;
        goto out;
    }
    rd_kafka_conf_set_opaque(conf, &st);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = st_cli_client(RD_KAFKA_PRODUCER, conf);
    if (!rk)
        goto out;
    /* Fail fast, with a useful message, when there is no broker or no such topic. */
    const rd_kafka_metadata_t *md = st_cli_metadata(rk, NULL);
    if (!md)
        goto destroy;
    const rd_kafka_metadata_topic_t *t = st_cli_md_topic(md, pos.v[0]);
    if (!t || t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        st_cli_errorf("no topic named '%s' — create it with `strata topic create %s`, or check "
                      "the name with `strata topic list`",
                      pos.v[0], pos.v[0]);
        rd_kafka_metadata_destroy(md);
        goto destroy;
    }
    if (partition >= t->partition_cnt) {
        st_cli_errorf("topic '%s' has %d partitions (0..%d); there is no partition %" PRId64,
                      pos.v[0], t->partition_cnt, t->partition_cnt - 1, partition);
        rd_kafka_metadata_destroy(md);
        goto destroy;
    }
    rd_kafka_metadata_destroy(md);

    produce_opts_t po = {pos.v[0], partition < 0 ? RD_KAFKA_PARTITION_UA : (int32_t)partition,
                         &headers, backoff_ms, backoff_max_ms};
    size_t key_len = key ? strlen(key) : 0;
    if (null_value) {
        send_one(rk, &po, &st, key, key_len, NULL, 0);
    } else if (message) {
        send_one(rk, &po, &st, key, key_len, message, strlen(message));
    } else {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while (!st_cli_stop && (n = getline(&line, &cap, stdin)) >= 0) {
            if (n > 0 && line[n - 1] == '\n')
                line[--n] = '\0';
            if (n > 0 && line[n - 1] == '\r')
                line[--n] = '\0';
            const char *k = key, *v = line;
            size_t kl = key_len, vl = (size_t)n;
            if (delim) {
                char *d = strstr(line, delim);
                if (d) {
                    k = line;
                    kl = (size_t)(d - line);
                    v = d + strlen(delim);
                    vl = (size_t)n - kl - strlen(delim);
                } else {
                    k = NULL;
                    kl = 0;
                }
            }
            send_one(rk, &po, &st, k, kl, v, vl);
        }
        free(line);
    }
    /* Wait for every outstanding delivery report (each message resolves by message.timeout). */
    while (rd_kafka_outq_len(rk) > 0 && !st_cli_stop)
        rd_kafka_flush(rk, 100);
    fflush(stdout);
    uint64_t lost = st.sent - st.delivered - st.failed;
    if (lost)
        st_cli_errorf("%" PRIu64 " message(s) not confirmed: interrupted before the broker "
                      "acknowledged them",
                      lost);
    if (st.failed || lost)
        st_cli_errorf("%" PRIu64 " of %" PRIu64 " message(s) failed", st.failed + lost, st.sent);
    else
        rc = ST_CLI_OK;
destroy:
    st_cli_client_destroy(rk);
out:
    st_cli_strlist_fini(&headers);
    st_cli_strlist_fini(&pos);
    return rc;
}
