/*
 * common.c — shared plumbing of the `strata` commands (see common.h).
 */
#include "cli/common.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/clock.h"

_Static_assert(ST_CLI_OFFSET_BEGINNING == RD_KAFKA_OFFSET_BEGINNING, "offset constants");
_Static_assert(ST_CLI_OFFSET_END == RD_KAFKA_OFFSET_END, "offset constants");
_Static_assert(ST_CLI_OFFSET_TAIL_BASE == RD_KAFKA_OFFSET_TAIL_BASE, "offset constants");

st_cli_common_t st_cli_common = {.timeout_ms = 10000};
volatile sig_atomic_t st_cli_stop;
bool st_cli_bounded;

/* What the watchdog prints when the deadline passes: made when it is armed (a signal handler
 * may only write(2) what is ready). */
static char deadline_msg[256];
static size_t deadline_len;
#define DEADLINE_GRACE_MS 2000 /* the library's own timeouts report first, with their reasons */
#define STOP_GRACE_S      5    /* after a Ctrl-C, a long-running command has this to wind down */

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

static void say(const char *s)
{
    ssize_t rc = write(STDERR_FILENO, s, strlen(s));
    (void)rc;
}

/* Ctrl-C or SIGTERM. A request-style command has nothing to wind down: it ends at once. A
 * long-running one (consume, produce from stdin, bench, proxy) is asked to stop (st_cli_stop)
 * and given STOP_GRACE_S; a second signal ends it at once, whatever the library is doing. */
static void on_signal(int sig)
{
    if (st_cli_bounded || st_cli_stop) {
        say("strata: interrupted\n");
        _exit(128 + sig);
    }
    st_cli_stop = 1;
    alarm(STOP_GRACE_S);
}

/* SIGALRM: the deadline of a request-style command passed, or a stopping command did not end
 * within its grace. */
static void on_alarm(int sig)
{
    (void)sig;
    if (st_cli_stop) {
        say("strata: did not stop within 5 s of the interrupt; ended\n");
        _exit(130);
    }
    ssize_t rc = write(STDERR_FILENO, deadline_msg, deadline_len);
    (void)rc;
    _exit(ST_CLI_FAIL);
}

void st_cli_catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void st_cli_watchdog(int64_t ms, const char *msg)
{
    int n = snprintf(deadline_msg, sizeof deadline_msg, "%s\n", msg);
    deadline_len = n < 0                             ? 0
                   : (size_t)n < sizeof deadline_msg ? (size_t)n
                                                     : sizeof deadline_msg - 1;
    struct itimerval it = {.it_value = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
}

/* Arms the whole command's deadline: --timeout, and a little grace for the library's own
 * timeouts to report first. */
static void arm_deadline(void)
{
    char msg[sizeof deadline_msg];
    snprintf(msg, sizeof msg,
             "strata: no answer within --timeout (%lld ms) from %s — is a broker or a "
             "partition's leader down? `strata cluster health` tells; raise --timeout "
             "to wait longer",
             (long long)st_cli_common.timeout_ms, st_cli_common.brokers);
    st_cli_watchdog(st_cli_common.timeout_ms + DEADLINE_GRACE_MS, msg);
}

int64_t st_cli_time_left_ms(void)
{
    struct itimerval it;
    if (!st_cli_bounded || getitimer(ITIMER_REAL, &it) != 0 ||
        (!it.it_value.tv_sec && !it.it_value.tv_usec))
        return st_cli_common.timeout_ms;
    int64_t left =
        (int64_t)it.it_value.tv_sec * 1000 + it.it_value.tv_usec / 1000 - DEADLINE_GRACE_MS;
    return left > 1 ? left : 1;
}

/* Whether one address is certainly unreachable: its name does not resolve, or every address
 * of it refuses a TCP connect within wait_ms (why says which). No verdict in time is not a
 * refusal: the client may wait for a slow broker. */
static bool refused(const char *hostport, int wait_ms, char *why, size_t whylen)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof host)
        return false; /* librdkafka will say what is wrong with it */
    snprintf(host, sizeof host, "%.*s", (int)(colon - hostport), hostport);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = 0;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, colon + 1, &hints, &res);
    if (g) {
        snprintf(why, whylen, "%s: %s", hostport, gai_strerror(g));
        return true;
    }
    int verdict = ECONNREFUSED;
    for (struct addrinfo *ai = res; ai && verdict; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        int e = rc == 0 ? 0 : errno;
        if (e == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, wait_ms) <= 0) {
                e = 0; /* slow, not refused: let the client wait for it */
            } else {
                socklen_t l = sizeof e;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l);
            }
        }
        close(fd);
        verdict = e;
    }
    freeaddrinfo(res);
    if (verdict)
        snprintf(why, whylen, "%s: %s", hostport, strerror(verdict));
    return verdict != 0;
}

int st_cli_check_reachable(void)
{
    char *list = strdup(st_cli_common.brokers);
    if (!list)
        return 0;
    int wait_ms = st_cli_common.timeout_ms < 1500 ? (int)st_cli_time_left_ms() : 1500;
    char why[512] = "";
    bool any = false;
    for (char *save = NULL, *a = strtok_r(list, ",", &save); a && !any;
         a = strtok_r(NULL, ",", &save)) {
        while (*a == ' ')
            a++;
        /* a listener prefix (SSL://host:port) is librdkafka's to read */
        char *scheme = strstr(a, "://");
        const char *hp = scheme ? scheme + 3 : a;
        char one[400];
        if (!refused(hp, wait_ms, one, sizeof one))
            any = true;
        else if (!*why)
            snprintf(why, sizeof why, "%s", one);
    }
    free(list);
    if (any)
        return 0;
    st_cli_errorf("no broker at %s (%s) — is strata-server running? Start one "
                  "with `make run`, or point -b or STRATA_BROKERS at it",
                  st_cli_common.brokers, why);
    return -1;
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
        if (st_cli_bounded) {
            arm_deadline();
            if (st_cli_check_reachable())
                return ST_CLI_FAIL;
        }
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
        rd_kafka_metadata(rk, topic ? 0 : 1, rkt, &md, (int)st_cli_time_left_ms());
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
    rd_kafka_AdminOptions_set_request_timeout(o, (int)st_cli_time_left_ms(), err, sizeof(err));
    if (op == RD_KAFKA_ADMIN_OP_CREATETOPICS || op == RD_KAFKA_ADMIN_OP_DELETETOPICS ||
        op == RD_KAFKA_ADMIN_OP_CREATEPARTITIONS)
        rd_kafka_AdminOptions_set_operation_timeout(o, (int)st_cli_time_left_ms(), err,
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

/* ---- watermarks, each on its own thread ---- */

typedef struct wm_job {
    rd_kafka_t *rk;
    st_cli_wm_t *w; /* NULL once the caller gave up on it */
    st_cli_wm_t out;
    int timeout_ms;
    struct wm_batch *batch;
} wm_job_t;

typedef struct wm_batch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int pending;
} wm_batch_t;

static void *wm_run(void *arg)
{
    wm_job_t *j = arg;
    j->out.err = rd_kafka_query_watermark_offsets(j->rk, j->out.topic, j->out.partition, &j->out.lo,
                                                  &j->out.hi, j->timeout_ms);
    pthread_mutex_lock(&j->batch->mu);
    if (j->w)
        *j->w = j->out;
    j->batch->pending--;
    pthread_cond_signal(&j->batch->cv);
    pthread_mutex_unlock(&j->batch->mu);
    return NULL; /* the job (and a batch given up on) is never freed: the process ends soon */
}

int st_cli_watermarks(rd_kafka_t *rk, st_cli_wm_t *w, int n)
{
    int64_t left = st_cli_time_left_ms() - 500;
    if (left < 100)
        left = 100;
    wm_batch_t *b = calloc(1, sizeof *b);
    wm_job_t *jobs = calloc((size_t)(n > 0 ? n : 1), sizeof *jobs);
    if (!b || !jobs) {
        free(b);
        free(jobs);
        for (int i = 0; i < n; i++)
            w[i].err = RD_KAFKA_RESP_ERR__FAIL;
        return 0;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < n; i++) {
        w[i].err = RD_KAFKA_RESP_ERR__TIMED_OUT;
        w[i].lo = w[i].hi = -1;
        jobs[i] =
            (wm_job_t){.rk = rk, .w = &w[i], .out = w[i], .timeout_ms = (int)left, .batch = b};
        pthread_t t;
        pthread_mutex_lock(&b->mu);
        b->pending++;
        pthread_mutex_unlock(&b->mu);
        if (pthread_create(&t, &attr, wm_run, &jobs[i])) {
            /* no thread: ask here, as before */
            pthread_mutex_lock(&b->mu);
            b->pending--;
            pthread_mutex_unlock(&b->mu);
            w[i].err = rd_kafka_query_watermark_offsets(rk, w[i].topic, w[i].partition, &w[i].lo,
                                                        &w[i].hi, (int)left);
        }
    }
    pthread_attr_destroy(&attr);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += left / 1000;
    until.tv_nsec += (left % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&b->mu);
    while (b->pending > 0 && pthread_cond_timedwait(&b->cv, &b->mu, &until) == 0)
        ;
    int behind = b->pending;
    for (int i = 0; i < n; i++)
        jobs[i].w = NULL; /* a late answer goes nowhere */
    pthread_mutex_unlock(&b->mu);
    if (!behind) {
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->cv);
        free(b);
        free(jobs);
    }
    return behind;
}

void st_cli_exit(int rc)
{
    fflush(stdout);
    fflush(stderr);
    _exit(rc);
}
