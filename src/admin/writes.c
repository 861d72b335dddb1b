/*
 * writes.c — the console's routes that need the broker to act: topic creation, topic config
 * changes and the record browser, each a Kafka request the admin thread sends to its own
 * broker (or the partition's leader) through the inter-broker client (console.h draws it).
 *
 * Everything that arrives — the HTTP body, the URL, the query, the Kafka answer — is untrusted:
 * each is checked and refused with a JSON error, never an assert.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin/console.h"
#include "admin/render.h"
#include "base/arena.h"
#include "base/err.h"
#include "base/log.h"
#include "base/varint.h"
#include "kafka/txn_route.h"
#include "proto/kerr.h"
#include "proto/kheader.h"
#include "proto/kreader.h"
#include "proto/kwriter.h"
#include "replica/client.h"
#include "storage/batch.h"

#define JSON_TYPE "application/json"

/* The versions sent: the newest without flexible headers or topic ids, which every Strata
 * broker answers. */
#define CREATE_TOPICS_VERSION 4
#define ALTER_CONFIGS_VERSION 0
#define FETCH_VERSION         11
#define LIST_OFFSETS_VERSION  5

#define FETCH_MAX_BYTES (1 << 20) /* one fetch's records */
#define RECORDS_DEFAULT 50
#define WALK_MAX_OUT    (64 << 20) /* bytes a compressed batch may decompress to */

/* ---- answers ------------------------------------------------------------------------------ */

static void answer_json(st_admin_answer_t *ans, unsigned status, json_t *j)
{
    ans->type = JSON_TYPE;
    st_buf_clear(&ans->body);
    ans->status = st_admin_json_append(j, &ans->body) ? 500 : status;
    if (ans->status == 500) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        st_buf_clear(&ans->body);
        st_buf_append(&ans->body, oom, sizeof oom - 1);
    }
}

/* {"error": why} (and "code": the Kafka error's name when there is one). */
static void answer_error(st_admin_answer_t *ans, unsigned status, const char *why, int16_t kerr)
{
    json_t *j = json_pack("{s:s}", "error", why);
    if (j && kerr)
        json_object_set_new(j, "code", json_string(st_kerr_name(kerr)));
    answer_json(ans, status, j);
}

/* The HTTP status for a Kafka error code. */
static unsigned kerr_status(int16_t code)
{
    switch (code) {
    case ST_KERR_NONE:
        return 200;
    case ST_KERR_UNKNOWN_TOPIC_OR_PARTITION:
        return 404;
    case ST_KERR_TOPIC_ALREADY_EXISTS:
        return 409;
    case ST_KERR_TOPIC_AUTHORIZATION_FAILED:
    case ST_KERR_GROUP_AUTHORIZATION_FAILED:
    case ST_KERR_CLUSTER_AUTHORIZATION_FAILED:
        return 403;
    case ST_KERR_OFFSET_OUT_OF_RANGE:
        return 416;
    case ST_KERR_NOT_LEADER_OR_FOLLOWER:
    case ST_KERR_NOT_CONTROLLER:
    case ST_KERR_REQUEST_TIMED_OUT:
        return 503;
    default:
        return 400;
    }
}

/* A Kafka error answer: the broker's message when it sent one, else the code's name. */
static void answer_kerr(st_admin_answer_t *ans, int16_t code, st_kstr_t msg)
{
    char why[512];
    if (msg.len > 0 && msg.ptr)
        snprintf(why, sizeof why, "%s: %.*s", st_kerr_name(code), msg.len, msg.ptr);
    else
        snprintf(why, sizeof why, "%s", st_kerr_name(code));
    answer_error(ans, kerr_status(code), why, code);
}

/* ---- one Kafka request, waited for --------------------------------------------------------- */

typedef struct call {
    st_client_req_t req;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs; /* the admin thread's and the client's, under mu */
    bool done;
    int err;
    uint8_t *frame; /* the answer (correlation id first), malloc'd */
    size_t len;
    st_buf_t body; /* the request body, alive until the client is done with it */
} call_t;

static void call_unref(call_t *c)
{
    pthread_mutex_lock(&c->mu);
    int left = --c->refs;
    pthread_mutex_unlock(&c->mu);
    if (left)
        return;
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    st_buf_fini(&c->body);
    free(c->frame);
    free(c);
}

/* Client thread: keeps a copy of the answer and wakes the admin thread. */
static int call_done(st_client_req_t *req, int err, const uint8_t *frame, size_t len)
{
    call_t *c = req->arg;
    pthread_mutex_lock(&c->mu);
    c->err = err;
    if (!err && (c->frame = malloc(len ? len : 1)) != NULL) {
        memcpy(c->frame, frame, len);
        c->len = len;
    } else if (!err) {
        c->err = -ENOMEM;
    }
    c->done = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    call_unref(c);
    return ST_CLIENT_DONE;
}

static call_t *call_new(void)
{
    call_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    st_buf_init(&c->body);
    c->refs = 1;
    return c;
}

/* Sends c's body to broker as api_key/version and waits for the answer, at most
 * ST_ADMIN_CALL_MS. 0 (c->frame holds it), or a negative error: ST_E_TIMEOUT-like -ETIMEDOUT,
 * the client's error, -ENOTCONN when the broker has no inter-broker client yet. */
static int call_run(st_broker_t *b, call_t *c, int32_t broker, int16_t api_key, int16_t version,
                    int tries)
{
    if (c->body.oom)
        return -ENOMEM;
    c->req = (st_client_req_t){.broker = broker,
                               .api_key = api_key,
                               .api_version = version,
                               .body = c->body.data,
                               .len = c->body.len,
                               .max_tries = tries,
                               .done = call_done,
                               .arg = c};
    c->refs++; /* the client's, dropped by call_done */
    if (!st_ktxn_client_send(b, &c->req)) {
        c->refs--;
        return -ENOTCONN;
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ST_ADMIN_CALL_MS / 1000;
    pthread_mutex_lock(&c->mu);
    int rc = 0;
    while (!c->done && rc == 0)
        rc = pthread_cond_timedwait(&c->cv, &c->mu, &until);
    bool done = c->done;
    int err = c->err;
    pthread_mutex_unlock(&c->mu);
    if (!done)
        return -ETIMEDOUT;
    return err;
}

/* An error of call_run, answered. */
static void answer_call_error(st_admin_answer_t *ans, int err)
{
    char why[256];
    if (err == -ETIMEDOUT)
        snprintf(why, sizeof why, "the broker did not answer within %d ms", ST_ADMIN_CALL_MS);
    else if (err == -ENOTCONN)
        snprintf(why, sizeof why, "the broker's inter-broker client is not running yet");
    else
        snprintf(why, sizeof why, "could not reach the broker: %s", st_strerror(err));
    answer_error(ans, err == -ENOMEM ? 500 : 503, why, 0);
}

/* A reader over the answer's body (after its header); false when the header does not parse. */
static bool answer_reader(call_t *c, int16_t api_key, int16_t version, st_arena_t *a,
                          st_kreader_t *rd)
{
    st_kreader_init(rd, c->frame, c->len, a);
    st_kp_resp_header_t h;
    int hv = st_kp_resp_header_version(api_key, version);
    return hv >= 0 && st_kp_resp_header_decode(rd, hv, &h) == 0;
}

/* ---- input -------------------------------------------------------------------------------- */

/* The body as a JSON object, or NULL with the error answered. */
static json_t *body_object(const st_admin_console_req_t *rq, st_admin_answer_t *ans)
{
    if (!rq->body || rq->body_len == 0) {
        answer_error(ans, 400, "want a JSON object as the request body", 0);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb((const char *)rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        char why[300];
        if (j)
            snprintf(why, sizeof why, "want a JSON object as the request body");
        else
            snprintf(why, sizeof why, "bad JSON at line %d, column %d: %s", je.line, je.column,
                     je.text);
        json_decref(j);
        answer_error(ans, 400, why, 0);
        return NULL;
    }
    return j;
}

/* A config value as Kafka carries it: a string as is, a number or boolean in its text. false
 * for other JSON (objects, arrays); null is handled by the caller. */
static bool config_text(json_t *v, char *out, size_t n)
{
    if (json_is_string(v))
        snprintf(out, n, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(out, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(out, n, "%.17g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(out, n, "%s", json_is_true(v) ? "true" : "false");
    else
        return false;
    return true;
}

/* A topic name from a URL segment [p, p + n): Kafka's legal characters, 1-249 of them. */
static bool topic_ok(const char *p, size_t n)
{
    if (n == 0 || n > 249)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/* ---- POST /v1/topics ----------------------------------------------------------------------- */

#define MAX_CONFIGS 256

static void create_topic(st_broker_t *b, const st_md_t *md, const st_admin_console_req_t *rq,
                         st_admin_answer_t *ans)
{
    json_t *j = body_object(rq, ans);
    if (!j)
        return;
    json_t *name = json_object_get(j, "name");
    json_t *np = json_object_get(j, "partitions");
    json_t *rf = json_object_get(j, "replication_factor");
    json_t *cf = json_object_get(j, "configs");
    const char *bad = NULL;
    if (!json_is_string(name) || !topic_ok(json_string_value(name), json_string_length(name)))
        bad = "name: want a topic name (1-249 of a-z A-Z 0-9 . _ -)";
    else if (np && !json_is_null(np) &&
             (!json_is_integer(np) || json_integer_value(np) < 1 ||
              json_integer_value(np) > 1000000))
        bad = "partitions: want a number from 1 (or leave it out for num.partitions)";
    else if (rf && !json_is_null(rf) &&
             (!json_is_integer(rf) || json_integer_value(rf) < 1 || json_integer_value(rf) > 32767))
        bad = "replication_factor: want a number from 1 (or leave it out for the default)";
    else if (cf && !json_is_null(cf) && (!json_is_object(cf) || json_object_size(cf) > MAX_CONFIGS))
        bad = "configs: want an object of config names and values";
    if (bad) {
        json_decref(j);
        answer_error(ans, 400, bad, 0);
        return;
    }
    size_t ncf = json_is_object(cf) ? json_object_size(cf) : 0;
    st_kp_create_topics_req_config_t *cfgs = calloc(ncf + 1, sizeof *cfgs);
    char(*vals)[256] = calloc(ncf + 1, sizeof *vals);
    call_t *c = call_new();
    if (!cfgs || !vals || !c) {
        free(cfgs);
        free(vals);
        if (c)
            call_unref(c);
        json_decref(j);
        answer_error(ans, 500, "out of memory", 0);
        return;
    }
    size_t k = 0;
    const char *key;
    json_t *val;
    if (ncf)
        json_object_foreach(cf, key, val)
        {
            st_kp_create_topics_req_config_init(&cfgs[k]);
            cfgs[k].name = st_kstr(key);
            if (json_is_null(val))
                cfgs[k].value = ST_KSTR_NULL;
            else if (config_text(val, vals[k], sizeof vals[k]))
                cfgs[k].value = st_kstr(vals[k]);
            else
                bad = "configs: each value a string, number, boolean or null";
            k++;
        }
    st_kp_create_topics_req_topic_t t;
    st_kp_create_topics_req_topic_init(&t);
    t.name = st_kstr(json_string_value(name));
    t.num_partitions = json_is_integer(np) ? (int32_t)json_integer_value(np) : -1;
    t.replication_factor = json_is_integer(rf) ? (int16_t)json_integer_value(rf) : -1;
    t.configs = cfgs;
    t.configs_count = (int32_t)ncf;
    st_kp_create_topics_req_t req;
    st_kp_create_topics_req_init(&req);
    req.topics = &t;
    req.topics_count = 1;
    req.timeout_ms = ST_ADMIN_CALL_MS - 2000;
    st_kwriter_t w;
    st_kwriter_init(&w, &c->body);
    int rc = bad ? 0 : st_kp_create_topics_req_encode(&w, CREATE_TOPICS_VERSION, &req);
    if (!bad && rc)
        bad = "a config name or value the protocol cannot carry";
    if (bad) {
        answer_error(ans, 400, bad, 0);
        goto out;
    }
    /* to the active controller: another broker answers CreateTopics NOT_CONTROLLER */
    int32_t ctl = md && md->controller_id >= 0 ? md->controller_id : (int32_t)b->cfg->node_id;
    rc = call_run(b, c, ctl, ST_KP_API_CREATE_TOPICS, CREATE_TOPICS_VERSION, 1);
    if (rc) {
        answer_call_error(ans, rc);
        goto out;
    }
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_kreader_t rd;
    st_kp_create_topics_resp_t resp;
    if (!answer_reader(c, ST_KP_API_CREATE_TOPICS, CREATE_TOPICS_VERSION, &a, &rd) ||
        st_kp_create_topics_resp_decode(&rd, CREATE_TOPICS_VERSION, &resp) ||
        resp.topics_count != 1) {
        answer_error(ans, 502, "a malformed CreateTopics answer", 0);
    } else if (resp.topics[0].error_code) {
        answer_kerr(ans, resp.topics[0].error_code, resp.topics[0].error_message);
    } else {
        ST_INFO("admin: created topic %s (partitions %d, replication factor %d)",
                json_string_value(name), t.num_partitions, (int)t.replication_factor);
        answer_json(ans, 201,
                    json_pack("{s:s,s:i,s:i}", "created", json_string_value(name), "partitions",
                              (int)t.num_partitions, "replication_factor",
                              (int)t.replication_factor));
    }
    st_arena_fini(&a);
out:
    call_unref(c);
    free(cfgs);
    free(vals);
    json_decref(j);
}

/* ---- POST /v1/topics/{t}/configs ----------------------------------------------------------- */

static void alter_configs(st_broker_t *b, const char *topic, const st_admin_console_req_t *rq,
                          st_admin_answer_t *ans)
{
    json_t *j = body_object(rq, ans);
    if (!j)
        return;
    json_t *cf = j;
    if (json_object_size(j) == 1 && json_is_object(json_object_get(j, "configs")))
        cf = json_object_get(j, "configs");
    size_t n = json_object_size(cf);
    if (n == 0 || n > MAX_CONFIGS) {
        json_decref(j);
        answer_error(ans, 400,
                     "want an object of config changes: {\"name\": \"value\"} to set, "
                     "{\"name\": null} to go back to the default",
                     0);
        return;
    }
    st_kp_incremental_alter_configs_req_config_t *cfgs = calloc(n, sizeof *cfgs);
    char(*vals)[256] = calloc(n, sizeof *vals);
    call_t *c = call_new();
    json_t *names = json_array();
    if (!cfgs || !vals || !c || !names) {
        free(cfgs);
        free(vals);
        if (c)
            call_unref(c);
        json_decref(names);
        json_decref(j);
        answer_error(ans, 500, "out of memory", 0);
        return;
    }
    const char *bad = NULL;
    size_t k = 0;
    const char *key;
    json_t *val;
    json_object_foreach(cf, key, val)
    {
        st_kp_incremental_alter_configs_req_config_init(&cfgs[k]);
        cfgs[k].name = st_kstr(key);
        if (json_is_null(val)) {
            cfgs[k].config_operation = 1; /* DELETE */
            cfgs[k].value = ST_KSTR_NULL;
        } else if (config_text(val, vals[k], sizeof vals[k])) {
            cfgs[k].config_operation = 0; /* SET */
            cfgs[k].value = st_kstr(vals[k]);
        } else {
            bad = "each config value a string, number, boolean, or null (back to the default)";
        }
        json_array_append_new(names, json_string(key));
        k++;
    }
    st_kp_incremental_alter_configs_req_resource_t res;
    st_kp_incremental_alter_configs_req_resource_init(&res);
    res.resource_type = 2; /* TOPIC */
    res.resource_name = st_kstr(topic);
    res.configs = cfgs;
    res.configs_count = (int32_t)n;
    st_kp_incremental_alter_configs_req_t req;
    st_kp_incremental_alter_configs_req_init(&req);
    req.resources = &res;
    req.resources_count = 1;
    st_kwriter_t w;
    st_kwriter_init(&w, &c->body);
    if (!bad && st_kp_incremental_alter_configs_req_encode(&w, ALTER_CONFIGS_VERSION, &req))
        bad = "a config name or value the protocol cannot carry";
    if (bad) {
        answer_error(ans, 400, bad, 0);
        goto out;
    }
    int rc = call_run(b, c, (int32_t)b->cfg->node_id, ST_KP_API_INCREMENTAL_ALTER_CONFIGS,
                      ALTER_CONFIGS_VERSION, 1);
    if (rc) {
        answer_call_error(ans, rc);
        goto out;
    }
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_kreader_t rd;
    st_kp_incremental_alter_configs_resp_t resp;
    if (!answer_reader(c, ST_KP_API_INCREMENTAL_ALTER_CONFIGS, ALTER_CONFIGS_VERSION, &a, &rd) ||
        st_kp_incremental_alter_configs_resp_decode(&rd, ALTER_CONFIGS_VERSION, &resp) ||
        resp.responses_count != 1) {
        answer_error(ans, 502, "a malformed IncrementalAlterConfigs answer", 0);
    } else if (resp.responses[0].error_code) {
        answer_kerr(ans, resp.responses[0].error_code, resp.responses[0].error_message);
    } else {
        ST_INFO("admin: altered %zu config(s) of topic %s", n, topic);
        answer_json(ans, 200, json_pack("{s:s,s:O}", "topic", topic, "altered", names));
    }
    st_arena_fini(&a);
out:
    json_decref(names);
    call_unref(c);
    free(cfgs);
    free(vals);
    json_decref(j);
}

/* ---- GET /v1/topics/{t}/partitions/{p}/records ---------------------------------------------- */

/* Base64 (RFC 4648, padded) of n bytes, as a JSON string. */
static json_t *b64_json(const uint8_t *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = malloc((n + 2) / 3 * 4 + 1);
    if (!s)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        s[o++] = tab[(v >> 18) & 63];
        s[o++] = tab[(v >> 12) & 63];
        s[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        s[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    json_t *j = json_stringn(s, o);
    free(s);
    return j;
}

/* Sets name (the bytes as UTF-8 text, null when they are not text) and name_b64 in obj. */
static void set_bytes(json_t *obj, const char *name, const uint8_t *p, int32_t n)
{
    char b64name[64];
    snprintf(b64name, sizeof b64name, "%s_b64", name);
    if (n < 0 || !p) {
        json_object_set_new(obj, name, json_null());
        json_object_set_new(obj, b64name, json_null());
        return;
    }
    json_t *text = json_stringn((const char *)p, (size_t)n); /* NULL unless valid UTF-8 */
    json_object_set_new(obj, name, text ? text : json_null());
    json_object_set_new(obj, b64name, b64_json(p, (size_t)n));
}

/* A header's length-prefixed field at *p (before end): its bytes and length (-1: null). */
static bool header_field(const uint8_t **p, const uint8_t *end, const uint8_t **d, int32_t *n)
{
    int32_t l;
    int k = st_varint32_decode(*p, (size_t)(end - *p), &l);
    if (k < 0 || l < -1 || l > end - (*p + k))
        return false;
    *p += k;
    *d = l < 0 ? NULL : *p;
    *n = l;
    *p += l < 0 ? 0 : l;
    return true;
}

/* The record's headers, from the header bytes the walk found (it checked them; read with
 * bounds all the same). */
static json_t *headers_json(const st_batch_record_t *rec)
{
    json_t *arr = json_array();
    if (!arr || !rec->headers)
        return arr;
    const uint8_t *p = rec->headers, *end = rec->headers + rec->headers_len;
    for (int32_t i = 0; i < rec->header_count; i++) {
        const uint8_t *kd, *vd;
        int32_t kn, vn;
        if (!header_field(&p, end, &kd, &kn) || !header_field(&p, end, &vd, &vn))
            break;
        json_t *h = json_object();
        set_bytes(h, "key", kd, kn);
        set_bytes(h, "value", vd, vn);
        json_object_del(h, "key_b64");
        json_array_append_new(arr, h);
    }
    return arr;
}

typedef struct {
    json_t *records;
    int64_t from; /* the first offset wanted */
    int max;
    int64_t next; /* the offset after the last record seen */
} walk_t;

static int add_record(void *arg, const st_batch_record_t *rec)
{
    walk_t *w = arg;
    if (rec->offset < w->from)
        return 0;
    if ((int)json_array_size(w->records) >= w->max)
        return 1;
    json_t *r = json_pack("{s:I,s:I}", "offset", (json_int_t)rec->offset, "timestamp",
                          (json_int_t)rec->timestamp);
    if (!r)
        return -ENOMEM;
    set_bytes(r, "key", rec->key, rec->key_len);
    set_bytes(r, "value", rec->value, rec->value_len);
    json_object_set_new(r, "headers", headers_json(rec));
    json_array_append_new(w->records, r);
    w->next = rec->offset + 1;
    return 0;
}

/* ListOffsets for one partition: the offset of the first record at or after ts (-2: the
 * earliest, -1: the end). 0 and *offset (-1: none), else the error answered. */
static int list_offset(st_broker_t *b, int32_t leader, const char *topic, int32_t partition,
                       int64_t ts, int64_t *offset, st_admin_answer_t *ans)
{
    call_t *c = call_new();
    if (!c) {
        answer_error(ans, 500, "out of memory", 0);
        return -ENOMEM;
    }
    st_kp_list_offsets_req_partition_t p;
    st_kp_list_offsets_req_partition_init(&p);
    p.partition_index = partition;
    p.current_leader_epoch = -1;
    p.timestamp = ts;
    st_kp_list_offsets_req_topic_t t;
    st_kp_list_offsets_req_topic_init(&t);
    t.name = st_kstr(topic);
    t.partitions = &p;
    t.partitions_count = 1;
    st_kp_list_offsets_req_t req;
    st_kp_list_offsets_req_init(&req);
    req.replica_id = -1;
    req.topics = &t;
    req.topics_count = 1;
    st_kwriter_t w;
    st_kwriter_init(&w, &c->body);
    int rc = st_kp_list_offsets_req_encode(&w, LIST_OFFSETS_VERSION, &req);
    if (!rc)
        rc = call_run(b, c, leader, ST_KP_API_LIST_OFFSETS, LIST_OFFSETS_VERSION, 2);
    if (rc) {
        answer_call_error(ans, rc);
        call_unref(c);
        return rc;
    }
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_kreader_t rd;
    st_kp_list_offsets_resp_t resp;
    if (!answer_reader(c, ST_KP_API_LIST_OFFSETS, LIST_OFFSETS_VERSION, &a, &rd) ||
        st_kp_list_offsets_resp_decode(&rd, LIST_OFFSETS_VERSION, &resp) ||
        resp.topics_count != 1 || resp.topics[0].partitions_count != 1) {
        answer_error(ans, 502, "a malformed ListOffsets answer", 0);
        rc = -EPROTO;
    } else if (resp.topics[0].partitions[0].error_code) {
        answer_kerr(ans, resp.topics[0].partitions[0].error_code, ST_KSTR_NULL);
        rc = -EPROTO;
    } else {
        *offset = resp.topics[0].partitions[0].offset;
    }
    st_arena_fini(&a);
    call_unref(c);
    return rc;
}

/* A query number: absent (false, *v untouched), or all digits (optionally signed). bad set when
 * present and not a number. */
static bool query_num(const char *s, int64_t *v, bool *bad)
{
    if (!s)
        return false;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno) {
        *bad = true;
        return false;
    }
    *v = x;
    return true;
}

static void read_records(st_broker_t *b, const st_md_t *md, const char *topic, int32_t partition,
                         const st_admin_console_req_t *rq, st_admin_answer_t *ans)
{
    /* The leader as the admin thread's metadata names it; a topic or partition it does not
     * know (its snapshot may be a second old) is asked of this broker, whose answer decides. */
    const st_md_topic_t *t = md ? st_md_find(md, topic, (int32_t)strlen(topic)) : NULL;
    int32_t leader = t && partition < t->npartitions ? t->partitions[partition].leader
                                                     : (int32_t)b->cfg->node_id;
    if (leader < 0) {
        answer_error(ans, 503, "the partition has no leader now", ST_KERR_LEADER_NOT_AVAILABLE);
        return;
    }
    bool bad = false;
    int64_t from = -2, ts = 0, max = RECORDS_DEFAULT;
    bool by_offset = query_num(rq->q_offset, &from, &bad);
    bool by_time = query_num(rq->q_timestamp, &ts, &bad);
    query_num(rq->q_max, &max, &bad);
    if (bad || (by_offset && from < 0) || (by_time && ts < 0) || max < 1 ||
        max > ST_ADMIN_RECORDS_MAX || (by_offset && by_time)) {
        char why[200];
        snprintf(why, sizeof why,
                 "want offset=N or timestamp=MS (not both; both >= 0) and max=1..%d",
                 ST_ADMIN_RECORDS_MAX);
        answer_error(ans, 400, why, 0);
        return;
    }
    if (!by_offset) {
        int64_t at = by_time ? ts : -2;
        if (list_offset(b, leader, topic, partition, at, &from, ans))
            return;
        if (from < 0 && list_offset(b, leader, topic, partition, -1, &from, ans))
            return; /* no record at or after ts: the end */
    }
    call_t *c = call_new();
    if (!c) {
        answer_error(ans, 500, "out of memory", 0);
        return;
    }
    st_kp_fetch_req_partition_t fp;
    st_kp_fetch_req_partition_init(&fp);
    fp.partition = partition;
    fp.fetch_offset = from;
    fp.partition_max_bytes = FETCH_MAX_BYTES;
    st_kp_fetch_req_topic_t ft;
    st_kp_fetch_req_topic_init(&ft);
    ft.topic = st_kstr(topic);
    ft.partitions = &fp;
    ft.partitions_count = 1;
    st_kp_fetch_req_t req;
    st_kp_fetch_req_init(&req);
    req.replica_id = -1;
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = FETCH_MAX_BYTES;
    req.session_epoch = -1;
    req.topics = &ft;
    req.topics_count = 1;
    st_kwriter_t w;
    st_kwriter_init(&w, &c->body);
    int rc = st_kp_fetch_req_encode(&w, FETCH_VERSION, &req);
    if (!rc)
        rc = call_run(b, c, leader, ST_KP_API_FETCH, FETCH_VERSION, 2);
    if (rc) {
        answer_call_error(ans, rc);
        call_unref(c);
        return;
    }
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_kreader_t rd;
    st_kp_fetch_resp_t resp;
    st_kp_fetch_resp_init(&resp);
    const st_kp_fetch_resp_partition_t *p = NULL;
    if (answer_reader(c, ST_KP_API_FETCH, FETCH_VERSION, &a, &rd) &&
        st_kp_fetch_resp_decode(&rd, FETCH_VERSION, &resp) == 0 && resp.responses_count == 1 &&
        resp.responses[0].partitions_count == 1)
        p = &resp.responses[0].partitions[0];
    if (!p) {
        answer_error(ans, 502, "a malformed Fetch answer", 0);
    } else if (p->error_code) {
        answer_kerr(ans, p->error_code, ST_KSTR_NULL);
    } else {
        walk_t wk = {.records = json_array(), .from = from, .max = (int)max, .next = from};
        const uint8_t *q = p->records.ptr;
        size_t left = p->records.len > 0 ? (size_t)p->records.len : 0;
        while (q && left >= ST_BATCH_HEADER_SIZE && (int)json_array_size(wk.records) < wk.max) {
            st_batch_hdr_t h;
            if (st_batch_check(q, left, &h))
                break; /* a partial batch at the end of the fetch */
            size_t size = (size_t)st_batch_size(&h);
            if (!(h.attributes & ST_BATCH_ATTR_CONTROL) &&
                st_batch_walk(q, size, WALK_MAX_OUT, add_record, &wk) < 0)
                break;
            if ((int)json_array_size(wk.records) < wk.max && st_batch_last_offset(&h) >= wk.next)
                wk.next = st_batch_last_offset(&h) + 1;
            q += size;
            left -= size;
        }
        answer_json(ans, 200,
                    json_pack("{s:s,s:i,s:I,s:I,s:I,s:I,s:o}", "topic", topic, "partition",
                              (int)partition, "offset", (json_int_t)from, "next_offset",
                              (json_int_t)wk.next, "high_watermark", (json_int_t)p->high_watermark,
                              "log_start_offset", (json_int_t)p->log_start_offset, "records",
                              wk.records));
    }
    st_arena_fini(&a);
    call_unref(c);
}

/* ---- routing ------------------------------------------------------------------------------- */

#define TOPICS_PREFIX "/v1/topics/"

bool st_admin_console_owns(const char *url)
{
    return strcmp(url, "/v1/topics") == 0 ||
           strncmp(url, TOPICS_PREFIX, strlen(TOPICS_PREFIX)) == 0;
}

void st_admin_console_handle(st_broker_t *b, const st_md_t *md, const st_admin_console_req_t *rq,
                             st_admin_answer_t *ans)
{
    st_buf_init(&ans->body);
    bool post = strcmp(rq->method, "POST") == 0;
    bool get = strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0;
    if (strcmp(rq->url, "/v1/topics") == 0) { /* GET is admin.c's */
        if (!post)
            answer_error(ans, 405, "method not allowed", 0);
        else
            create_topic(b, md, rq, ans);
        return;
    }
    const char *name = rq->url + strlen(TOPICS_PREFIX);
    size_t nlen = strcspn(name, "/");
    const char *rest = name + nlen;
    char topic[256];
    if (!topic_ok(name, nlen)) {
        answer_error(ans, 404, "not found", 0);
        return;
    }
    snprintf(topic, sizeof topic, "%.*s", (int)nlen, name);
    if (strcmp(rest, "/configs") == 0) {
        if (!post) {
            answer_error(ans, 405, "method not allowed: POST", 0);
        } else {
            alter_configs(b, topic, rq, ans);
        }
        return;
    }
    const char *pre = "/partitions/";
    if (strncmp(rest, pre, strlen(pre)) == 0) {
        const char *ps = rest + strlen(pre);
        char *end;
        errno = 0;
        long pi = strtol(ps, &end, 10);
        if (end != ps && !errno && pi >= 0 && pi <= INT32_MAX && strcmp(end, "/records") == 0) {
            if (!get)
                answer_error(ans, 405, "method not allowed: GET", 0);
            else
                read_records(b, md, topic, (int32_t)pi, rq, ans);
            return;
        }
    }
    answer_error(ans, 404, "not found", 0);
}
