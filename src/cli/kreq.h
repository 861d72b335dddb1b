/*
 * kreq.h — one Kafka request to one broker, for the few APIs librdkafka 2.0's Admin API lacks
 * (ListTransactions, DescribeTransactions, DescribeProducers, WriteTxnMarkers: `strata txn`).
 *
 * Encoded and decoded with the generated protocol code (proto/), the same the broker and the
 * proxy use, over a plain blocking socket bounded by a deadline: the connect, the write and the
 * read each wait at most until it (poll), and Ctrl-C (st_cli_stop) ends a wait within 100 ms.
 * "connection refused" fails at once with the address. The version sent is the newest both the
 * tool and the broker speak (an ApiVersions exchange first, once per connection).
 *
 * Single-threaded: a connection belongs to the command that opened it.
 */
#ifndef ST_CLI_KREQ_H
#define ST_CLI_KREQ_H

#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "proto/kafka_gen.h"

typedef struct st_cli_kconn {
    int fd;
    char addr[300];    /* host:port, for messages */
    int32_t corr;      /* next correlation id */
    int16_t vmax[128]; /* the broker's newest version per api key (-1: not served) */
    int16_t vmin[128];
    int64_t deadline; /* monotonic ms: no wait goes past it */
    st_buf_t frame;   /* the last answer */
} st_cli_kconn_t;

/* Connects to host:port ("host:port") and learns its versions, waiting until deadline_ms
 * (monotonic, base/clock.h). 0, or -1 after printing what went wrong. */
int st_cli_kconn_open(st_cli_kconn_t *c, const char *hostport, int64_t deadline_ms);
void st_cli_kconn_close(st_cli_kconn_t *c);

/* The version of api to send: the newest in [lo, hi] the broker serves, or -1 after printing
 * that it does not serve the API. */
int16_t st_cli_kconn_version(st_cli_kconn_t *c, int16_t api, int16_t lo, int16_t hi);

/* Sends a request body (encoded by the caller at `version`) and reads the answer: 0 and a
 * reader positioned after the response header (arrays decoded into `arena`), or -1 after
 * printing the problem. The answer stays valid until the next call. */
int st_cli_kconn_call(st_cli_kconn_t *c, int16_t api, int16_t version, const st_buf_t *body,
                      st_arena_t *arena, st_kreader_t *out);

/* Encodes a generated request struct and calls: `name` is the API's snake name. */
#define ST_CLI_KCALL(c, API, name, version, req, arena, resp)                                      \
    st_cli_kcall_(c, ST_KP_API_##API, version, arena,                                              \
                  (int (*)(st_kwriter_t *, int16_t, const void *))st_kp_##name##_req_encode, req,  \
                  (int (*)(st_kreader_t *, int16_t, void *))st_kp_##name##_resp_decode, resp)
int st_cli_kcall_(st_cli_kconn_t *c, int16_t api, int16_t version, st_arena_t *arena,
                  int (*enc)(st_kwriter_t *, int16_t, const void *), const void *req,
                  int (*dec)(st_kreader_t *, int16_t, void *), void *resp);

#endif
