/*
 * common.h — what every `strata` command shares: the common options (-b, -X, --timeout, -v),
 * librdkafka handle set-up, broker reachability checks, error messages that say what to do,
 * Admin API waiting, and Ctrl-C handling.
 *
 * The tool talks to brokers only through librdkafka. Single-threaded except where a command
 * says otherwise (bench runs producer threads, each with its own handle).
 */
#ifndef ST_CLI_COMMON_H
#define ST_CLI_COMMON_H

#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "cli/args.h"

#define ST_CLI_DEFAULT_BROKERS "127.0.0.1:9092"

/* Options every broker-facing command takes. */
typedef struct st_cli_common {
    const char *brokers;     /* -b, else $STRATA_BROKERS, else 127.0.0.1:9092 */
    st_cli_strlist_t xprops; /* -X key=value for librdkafka */
    int64_t timeout_ms;      /* --timeout: how long to wait on the broker */
    const char *timeout_str; /* as given */
    bool verbose;            /* -v: show librdkafka's own log lines */
} st_cli_common_t;

extern st_cli_common_t st_cli_common;
extern const st_cli_opt_t st_cli_common_opts[];
/* Set by SIGINT/SIGTERM once st_cli_catch_signals() ran. */
extern volatile sig_atomic_t st_cli_stop;
/*
 * A request-style command (cluster, topic, group, txn: not consume, produce, bench, proxy or
 * debug), set by main before it runs. Such a command never outlives --timeout (plus 2 s for
 * the library's own timeouts to report first), whatever the library does: a watchdog (SIGALRM)
 * prints what to check and exits 1. Ctrl-C or SIGTERM ends it at once (exit 128+signal).
 * Before anything else st_cli_parse checks that some bootstrap address takes a TCP connection,
 * so "connection refused" fails within a moment, naming the address. A long-running command
 * gets st_cli_stop on the first signal, 5 s to wind down, and ends at once on a second.
 */
extern bool st_cli_bounded;

void st_cli_catch_signals(void);
/* Arms the watchdog on its own: after ms, msg (one line, no newline) goes to stderr and the
 * process exits 1; ms 0 disarms it. For a command that keeps its own deadlines (cluster start,
 * stop, status) as a last resort. st_cli_time_left_ms assumes st_cli_parse armed it. */
void st_cli_watchdog(int64_t ms, const char *msg);
/* What is left of a request-style command's deadline, in ms (--timeout otherwise): the
 * timeout to give each library call so the command as a whole keeps to it. */
int64_t st_cli_time_left_ms(void);
/* The watermarks of n partitions, asked all at once, each waiting at most what is left of
 * the deadline less a margin: w[i].err is RD_KAFKA_RESP_ERR__TIMED_OUT for one whose leader
 * did not answer in time (librdkafka 2.0's query_watermark_offsets ignores its timeout while
 * a leader is unreachable, so each asks on its own thread, and one that never returns is left
 * behind). Returns the number left behind: when above 0, the caller must not destroy rk (it
 * would wait for them) and ends with st_cli_exit. */
typedef struct st_cli_wm {
    const char *topic;
    int32_t partition;
    int64_t lo, hi;
    rd_kafka_resp_err_t err;
} st_cli_wm_t;
int st_cli_watermarks(rd_kafka_t *rk, st_cli_wm_t *w, int n);
/* Flushes stdout and stderr and ends the process with rc, without destroying anything. */
void st_cli_exit(int rc) __attribute__((noreturn));

/* 0 when some -b address takes a TCP connection (or might: it did not refuse within 1.5 s);
 * -1 after printing which address refused or did not resolve. */
int st_cli_check_reachable(void);

/* Prints "strata: <message>" to stderr. */
void st_cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Parses a command's arguments: its own `opts`, plus the common options when `common`.
 * Positional arguments go to pos and must number between min_pos and max_pos.
 * Returns -1 to go on, or the exit status the command should return at once (0 after
 * printing --help, 2 after a usage error).
 */
int st_cli_parse(int argc, char **argv, const char *usage, const char *summary,
                 const st_cli_opt_t *opts, bool common, st_cli_strlist_t *pos, size_t min_pos,
                 size_t max_pos);

/* Prints a usage error (with the command's usage line) and returns ST_CLI_USAGE. */
int st_cli_usage_error(const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * A configuration with bootstrap.servers, the -X settings and quiet logging applied.
 * Prints the problem and returns NULL when a -X setting is refused.
 */
rd_kafka_conf_t *st_cli_conf(void);
/* Sets one property or prints why not; returns 0 or -1. */
int st_cli_conf_set(rd_kafka_conf_t *conf, const char *key, const char *value);
/* Creates a handle from conf (consumed even on failure); prints the problem on NULL. */
rd_kafka_t *st_cli_client(rd_kafka_type_t type, rd_kafka_conf_t *conf);
/* A producer handle with the common settings, for metadata and Admin API calls. */
rd_kafka_t *st_cli_admin_client(void);
/* Destroys rk after bounded waiting for its threads. */
void st_cli_client_destroy(rd_kafka_t *rk);

/*
 * Fetches metadata (for one topic, or all when topic is NULL). On failure prints what went
 * wrong and what to do ("no broker at ... — is strata-server running?") and returns NULL.
 */
const rd_kafka_metadata_t *st_cli_metadata(rd_kafka_t *rk, const char *topic);
/* Finds a topic in metadata, or NULL. */
const rd_kafka_metadata_topic_t *st_cli_md_topic(const rd_kafka_metadata_t *md, const char *topic);

/* A sentence telling the user what to do about err, or "" when there is nothing to add. */
const char *st_cli_hint(rd_kafka_resp_err_t err);
/* Prints "strata: WHAT: <librdkafka message> — <hint>". */
void st_cli_report(const char *what, rd_kafka_resp_err_t err, const char *errstr);

/*
 * Waits for the Admin API result event of `type` on q for up to the common timeout.
 * Returns the event (caller destroys it) or NULL after printing why.
 */
rd_kafka_event_t *st_cli_admin_wait(rd_kafka_queue_t *q, rd_kafka_event_type_t type,
                                    const char *what);
/* Admin options with the common timeout applied. */
rd_kafka_AdminOptions_t *st_cli_admin_options(rd_kafka_t *rk, rd_kafka_admin_op_t op);

#endif
