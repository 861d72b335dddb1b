/*
 * console.h — the web console and the admin routes it needs beyond the read-only views.
 *
 *   GET  /ui, /ui/<asset>          the console: index.html, console.js, console.css, compiled
 *                                  into the binary from src/admin/ui/ (tools/embed.cmake)
 *   GET  /v1/groups                groups: state, members, committed offset and lag per
 *                                  partition (from the shards' snapshots, like /metrics)
 *   GET  /v1/topics/{t}/partitions/{p}/records?offset=N|timestamp=MS&max=N
 *                                  records as JSON (a Fetch to the partition's leader)
 *   POST /v1/topics                {name, partitions, replication_factor, configs}: CreateTopics
 *   POST /v1/topics/{t}/configs    {"key": "value" | null, ...}: IncrementalAlterConfigs (null:
 *                                  back to the default)
 *
 * How the writes and the record reads reach the broker without touching a shard: the admin
 * thread is a Kafka client of its own broker. It encodes the request with proto/'s codecs and
 * sends it with the broker's inter-broker client (replica/client.h, through
 * st_ktxn_client_send): CreateTopics and IncrementalAlterConfigs to this broker (whose handlers
 * forward to the controller as for any client), Fetch and ListOffsets to the partition's
 * leader. The client thread hands the answer back; the admin thread waits for it, bounded by
 * ST_ADMIN_CALL_MS, so a slow answer holds up only other admin requests, never a shard. The
 * requests carry the broker's inter-broker identity, so with admin.require.auth they are for
 * admin users only (admin.c's check_auth runs first, as for every path).
 *
 *   admin thread                       client thread              broker (any shard)
 *   ------------                       -------------              ------------------
 *   encode; st_ktxn_client_send  --->  route, send  ---------->   handler
 *   wait (cond, <= ST_ADMIN_CALL_MS)   done: copy frame, signal <- answer
 *   decode, answer HTTP
 *
 * Memory: a call is reference-counted between the admin thread and the client's done callback,
 * so a call the admin thread gave up on (timeout) is freed by the late answer.
 *
 * Threads: everything here runs on the admin (HTTP) thread, but call_done (client thread).
 */
#ifndef ST_ADMIN_CONSOLE_H
#define ST_ADMIN_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admin/render.h"
#include "base/buf.h"
#include "broker/runtime.h"

#define ST_ADMIN_BODY_MAX    65536 /* bytes of a POST body; beyond: 413 */
#define ST_ADMIN_CALL_MS     15000 /* the longest the admin thread waits for a Kafka answer */
#define ST_ADMIN_RECORDS_MAX 500   /* records one /records answer holds at most */

/* One embedded file of the console (generated: build/gen/admin/ui_assets.c). */
typedef struct st_admin_asset {
    const char *name; /* "index.html" */
    const char *type; /* its Content-Type */
    const unsigned char *data;
    size_t len;
} st_admin_asset_t;

extern const st_admin_asset_t st_admin_ui_assets[];
extern const int st_admin_ui_nassets;

/* The asset a /ui URL names ("/ui", "/ui/" and "/ui/index.html": the page), or NULL. */
const st_admin_asset_t *st_admin_ui_asset(const char *url);

/* GET /v1/groups from a view: {"groups": [{group, state, members, shard, offsets: [{topic,
 * partition, committed, high_watermark, lag}], lag}]}. 0 or -ENOMEM. */
int st_admin_render_groups(const st_admin_view_t *v, st_buf_t *out);

/* A POST's body as it arrives (admin.c's handler keeps one per POST request). */
typedef struct st_admin_body {
    st_buf_t buf;
    bool too_large; /* more than ST_ADMIN_BODY_MAX bytes came: answered 413 */
} st_admin_body_t;

st_admin_body_t *st_admin_body_new(void);
/* Appends n bytes, or marks the body too large (what is past the bound is dropped). */
void st_admin_body_add(st_admin_body_t *b, const char *p, size_t n);
void st_admin_body_free(st_admin_body_t *b);

/* An answer: HTTP status, content type (static) and body. */
typedef struct st_admin_answer {
    unsigned status;
    const char *type;
    st_buf_t body;
} st_admin_answer_t;

/* A request the console's write and record routes take: what admin.c's handler parsed. */
typedef struct st_admin_console_req {
    const char *url;
    const char *method;
    const uint8_t *body; /* the POST body (NULL: none) */
    size_t body_len;
    const char *q_offset, *q_timestamp, *q_max; /* query parameters (NULL: absent) */
} st_admin_console_req_t;

/* Whether url is one of the console's Kafka-client routes (POST /v1/topics,
 * /v1/topics/{t}/configs, /v1/topics/{t}/partitions/{p}/records). */
bool st_admin_console_owns(const char *url);
/* Serves such a route. md: the newest metadata the admin thread holds (NULL: none yet), to
 * find a partition's leader (what it does not know is asked of this broker, whose answer
 * decides: an unknown topic is a 404 from UNKNOWN_TOPIC_OR_PARTITION). Fills ans (its body
 * initialised here; the caller sends and frees it). Always answers, errors as {"error": "..."} with
 * a 4xx/5xx status. */
void st_admin_console_handle(st_broker_t *b, const st_md_t *md, const st_admin_console_req_t *rq,
                             st_admin_answer_t *ans);

#endif
