/*
 * protolog.c — protocol logging (protolog.h).
 */
#include "broker/protolog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "net/auth.h"
#include "proto/kafka_gen.h"
#include "proto/kformat.h"

/* A filter is immutable once published; replaced ones stay on a list until st_protolog_fini
 * (a reader may still hold one; there are as many as admin calls). */
typedef struct filter {
    int64_t until_ms; /* monotonic; INT64_MAX: for ever */
    char client_id[256];
    char address[64];
    struct filter *older;
} filter_t;

static _Atomic(filter_t *) current;
static pthread_mutex_t publish_mu = PTHREAD_MUTEX_INITIALIZER;
static filter_t *all_filters;

static void publish(filter_t *f)
{
    pthread_mutex_lock(&publish_mu);
    f->older = all_filters;
    all_filters = f;
    atomic_store(&current, f);
    pthread_mutex_unlock(&publish_mu);
}

int st_protolog_configure(const char *v, char *err, size_t errlen)
{
    if (!v || !*v)
        return 0;
    filter_t *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    f->until_ms = INT64_MAX;
    if (strncmp(v, "client.id=", 10) == 0 && v[10]) {
        snprintf(f->client_id, sizeof f->client_id, "%s", v + 10);
    } else if (strncmp(v, "address=", 8) == 0 && v[8] && strlen(v + 8) < sizeof f->address) {
        snprintf(f->address, sizeof f->address, "%s", v + 8);
    } else if (strcmp(v, "all") != 0) {
        free(f);
        snprintf(err, errlen,
                 "log.protocol: '%s' — want all, client.id=ID or address=IP (empty: off)", v);
        return -1;
    }
    publish(f);
    return 0;
}

int st_protolog_set(const char *client_id, const char *address, int64_t seconds, char *err,
                    size_t errlen)
{
    if (seconds < 1 || seconds > 3600) {
        snprintf(err, errlen, "seconds must be 1 to 3600");
        return -1;
    }
    if ((client_id && strlen(client_id) >= 256) || (address && strlen(address) >= 64)) {
        snprintf(err, errlen, "client_id or address too long");
        return -1;
    }
    filter_t *f = calloc(1, sizeof *f);
    if (!f) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    f->until_ms = st_mono_ms() + seconds * 1000;
    snprintf(f->client_id, sizeof f->client_id, "%s", client_id ? client_id : "");
    snprintf(f->address, sizeof f->address, "%s", address ? address : "");
    publish(f);
    ST_INFO("protocol logging for %llds: client.id %s, address %s", (long long)seconds,
            *f->client_id ? f->client_id : "any", *f->address ? f->address : "any");
    return 0;
}

void st_protolog_fini(void)
{
    pthread_mutex_lock(&publish_mu);
    atomic_store(&current, NULL);
    while (all_filters) {
        filter_t *f = all_filters;
        all_filters = f->older;
        free(f);
    }
    pthread_mutex_unlock(&publish_mu);
}

/* The peer's address without its port ("127.0.0.1:5000" -> "127.0.0.1"). */
static bool address_is(const char *peer, const char *want)
{
    const char *colon = strrchr(peer, ':');
    size_t n = colon ? (size_t)(colon - peer) : strlen(peer);
    if (n >= 2 && peer[0] == '[' && peer[n - 1] == ']') {
        peer++;
        n -= 2;
    }
    return strlen(want) == n && strncmp(peer, want, n) == 0;
}

static bool picked(const st_kreq_t *r)
{
    filter_t *f = atomic_load_explicit(&current, memory_order_acquire);
    if (!f || (f->until_ms != INT64_MAX && st_mono_ms() >= f->until_ms))
        return false;
    if (*f->client_id) {
        const st_kstr_t *c = &r->hdr.client_id;
        if (c->len < 0 || (size_t)c->len != strlen(f->client_id) ||
            memcmp(c->ptr, f->client_id, (size_t)c->len) != 0)
            return false;
    }
    return !*f->address || address_is(st_conn_peer(r->conn), f->address);
}

/* The fields every line begins with. */
static void head(st_buf_t *b, const st_kreq_t *r, const char *dir)
{
    const st_kp_api_t *api = st_kp_api_find(r->api_key);
    const st_listener_t *l = st_conn_listener(r->conn);
    const st_auth_t *a = st_conn_auth(r->conn);
    bool first = true;
    st_kfmt_raw(b, "{");
    st_kfmt_key(b, "dir", &first);
    st_kfmt_str(b, st_kstr(dir));
    st_kfmt_key(b, "api", &first);
    st_kfmt_str(b, st_kstr(api ? api->name : "unknown"));
    st_kfmt_key(b, "v", &first);
    st_kfmt_i64(b, r->api_version);
    st_kfmt_key(b, "corr", &first);
    st_kfmt_i64(b, r->hdr.correlation_id);
    st_kfmt_key(b, "client", &first);
    st_kfmt_str(b, r->hdr.client_id);
    st_kfmt_key(b, "listener", &first);
    st_kfmt_str(b, st_kstr(l ? l->name : ""));
    st_kfmt_key(b, "peer", &first);
    st_kfmt_str(b, st_kstr(st_conn_peer(r->conn)));
    st_kfmt_key(b, "principal", &first);
    st_kfmt_str(b, st_kstr(a && *a->principal ? a->principal : ""));
}

/* Whether an API's bodies carry credentials (a PLAIN password, a SCRAM proof, a salted
 * password): logged as "[hidden]", as debug bundles and log shippers see the log. */
static bool secret_api(int16_t api_key)
{
    return api_key == ST_KP_API_SASL_AUTHENTICATE ||
           api_key == ST_KP_API_ALTER_USER_SCRAM_CREDENTIALS;
}

static void emit(st_buf_t *b)
{
    if (!b->oom)
        st_log_text(ST_LOG_INFO, (const char *)b->data, b->len);
    st_buf_fini(b);
}

void st_protolog_request(st_kreq_t *r)
{
    r->protolog = false;
    if (!atomic_load_explicit(&current, memory_order_relaxed) || !picked(r))
        return;
    r->protolog = true;
    st_buf_t b;
    st_buf_init(&b);
    st_kfmt_raw(&b, "protocol ");
    head(&b, r, "request");
    /* a second decoding of the body, into an arena of its own: the handler's is untouched */
    st_arena_t arena;
    st_arena_init(&arena, 4096);
    st_kreader_t rd = r->body;
    rd.arena = &arena;
    void *msg = NULL;
    bool first = false;
    st_kfmt_key(&b, "body", &first);
    if (secret_api(r->api_key))
        st_kfmt_raw(&b, "\"[hidden]\"");
    else if (st_kp_req_decode_any(&rd, r->api_key, r->api_version, &msg) == 0 && msg)
        st_kp_req_format(&b, r->api_key, r->api_version, msg);
    else
        st_kfmt_raw(&b, "null");
    st_kfmt_raw(&b, "}");
    st_arena_fini(&arena);
    emit(&b);
}

void st_protolog_response(st_kreq_t *r, const st_out_t *o)
{
    if (!r->protolog)
        return;
    st_buf_t b;
    st_buf_init(&b);
    st_kfmt_raw(&b, "protocol ");
    head(&b, r, "response");
    bool first = false;
    char ms[32];
    snprintf(ms, sizeof ms, "%.3f", (double)(st_mono_ns() - r->start_ns) / 1e6);
    st_kfmt_key(&b, "ms", &first);
    st_kfmt_raw(&b, ms);
    st_kfmt_key(&b, "bytes", &first);
    st_kfmt_i64(&b, o ? o->total : 0);
    st_kfmt_key(&b, "body", &first);
    if (!o) {
        st_kfmt_raw(&b, "null");
    } else if (secret_api(r->api_key)) {
        st_kfmt_raw(&b, "\"[hidden]\"");
    } else if (o->nfiles > 0) {
        st_kfmt_raw(&b, "{\"records_by_sendfile\":");
        st_kfmt_i64(&b, o->nfiles);
        st_kfmt_raw(&b, "}");
    } else {
        st_arena_t arena;
        st_arena_init(&arena, 4096);
        st_kreader_t rd;
        st_kreader_init(&rd, o->mem.data + r->body_off, o->mem.len - r->body_off, &arena);
        void *msg = NULL;
        if (st_kp_resp_decode_any(&rd, r->api_key, r->api_version, &msg) == 0 && msg)
            st_kp_resp_format(&b, r->api_key, r->api_version, msg);
        else
            st_kfmt_raw(&b, "null");
        st_arena_fini(&arena);
    }
    st_kfmt_raw(&b, "}");
    emit(&b);
}
