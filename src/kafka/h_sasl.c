/*
 * h_sasl.c — SASL authentication on SASL_* listeners: SaslHandshake (17) and SaslAuthenticate
 * (36), and the users sasl.bootstrap.users creates.
 *
 * A connection of a SASL listener starts in SASL_HANDSHAKE (net/auth.h) and may send only
 * ApiVersions, SaslHandshake and SaslAuthenticate (serve.c) until it is authenticated:
 *
 *   SaslHandshake(mechanism)    one of sasl.enabled.mechanisms -> SASL_AUTHENTICATE; another
 *                               is answered UNSUPPORTED_SASL_MECHANISM with the list and the
 *                               client may ask again
 *   SaslAuthenticate(token)...  the mechanism's exchange (auth/scram.h): PLAIN in one round,
 *                               SCRAM in two; the last success -> DONE, principal User:<name>
 *   a failure                   SASL_AUTHENTICATION_FAILED, answered after
 *                               connection.failed.authentication.delay.ms; the connection
 *                               closes once the answer is sent (FAILED)
 *
 * SaslHandshake v0 (old clients): the tokens then come as bare size-prefixed frames, without
 * a Kafka header, and are answered the same way (serve.c hands them to st_sasl_raw_frame).
 * A v0 failure just closes the connection, after the delay, as Kafka does. A raw token shorter
 * than 8 bytes is refused by the frame parser (it takes it for a truncated header).
 *
 * Credentials come from this shard's metadata snapshot (cluster/metadata.h st_md_scram_t):
 * SCRAM uses the user's credential of its own mechanism; PLAIN checks the password against
 * the user's SCRAM-SHA-512 credential, else SCRAM-SHA-256 (PBKDF2 with the stored salt and
 * count: one check costs a few milliseconds of the shard at 4096 iterations).
 *
 * Threads: the request's shard; the bootstrap users from shard 0's tick.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/scram.h"
#include "base/clock.h"
#include "base/log.h"
#include "kafka/controller.h"
#include "kafka/handlers.h"
#include "kafka/kshard.h"
#include "kafka/sasl.h"
#include "proto/kerr.h"

/* A connection's SASL state between requests (st_auth_t.sasl). */
typedef struct sasl_conn {
    bool raw; /* SaslHandshake v0: tokens as bare frames */
    bool plain;
    st_scram_t scram;
} sasl_conn_t;

static void sasl_conn_free(void *p)
{
    sasl_conn_t *sc = p;
    st_scram_fini(&sc->scram);
    free(sc);
}

static const struct {
    const char *name;
    unsigned bit;
} mechs[] = {{"PLAIN", ST_SASL_PLAIN},
             {"SCRAM-SHA-256", ST_SASL_SCRAM_SHA_256},
             {"SCRAM-SHA-512", ST_SASL_SCRAM_SHA_512}};
#define NMECHS ((int)(sizeof mechs / sizeof mechs[0]))

/* ---- credentials ---- */

void st_sasl_cred_of(const st_md_scram_t *m, st_scram_cred_t *c)
{
    memset(c, 0, sizeof *c);
    c->mech = (st_scram_mech_t)m->mechanism;
    c->iterations = m->iterations;
    c->salt_len = m->salt_len;
    memcpy(c->salt, m->salt, (size_t)m->salt_len);
    memcpy(c->stored_key, m->stored_key, (size_t)m->key_len);
    memcpy(c->server_key, m->server_key, (size_t)m->key_len);
}

void st_sasl_md_of(const char *user, const st_scram_cred_t *c, st_md_scram_t *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->user, sizeof m->user, "%s", user);
    m->mechanism = (int8_t)c->mech;
    m->iterations = c->iterations;
    m->salt_len = (int16_t)c->salt_len;
    m->key_len = (int16_t)st_scram_key_len(c->mech);
    memcpy(m->salt, c->salt, (size_t)c->salt_len);
    memcpy(m->stored_key, c->stored_key, (size_t)m->key_len);
    memcpy(m->server_key, c->server_key, (size_t)m->key_len);
}

static int lookup(void *arg, const char *user, st_scram_mech_t m, st_scram_cred_t *out)
{
    const st_md_t *md = arg;
    const st_md_scram_t *c = md ? st_md_find_scram(md, user, (int8_t)m) : NULL;
    if (!c)
        return -1;
    st_sasl_cred_of(c, out);
    return 0;
}

/* ---- SaslHandshake ---- */

void st_kh_sasl_handshake(st_kreq_t *r)
{
    st_kp_sasl_handshake_req_t req;
    if (st_kp_sasl_handshake_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed SaslHandshake request");
        return;
    }
    const st_config_t *cfg = r->shard->b->cfg;
    st_kp_sasl_handshake_resp_t resp = {0};
    static st_kstr_t names[NMECHS];
    st_kstr_t *list = st_arena_zalloc(&r->arena, sizeof names);
    if (!list) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    unsigned chosen = 0;
    for (int i = 0; i < NMECHS; i++) {
        if (!(cfg->sasl_mechanisms & mechs[i].bit))
            continue;
        list[resp.mechanisms_count++] = st_kstr(mechs[i].name);
        if (st_kstr_eq(req.mechanism, mechs[i].name))
            chosen = mechs[i].bit;
    }
    resp.mechanisms = list;
    st_auth_t *a = st_conn_auth(r->conn);
    if (a->state != ST_AUTH_SASL_HANDSHAKE) {
        /* a PLAINTEXT listener, or a second handshake (no re-authentication yet) */
        resp.error_code = ST_KERR_ILLEGAL_SASL_STATE;
    } else if (!chosen) {
        resp.error_code = ST_KERR_UNSUPPORTED_SASL_MECHANISM;
        ST_INFO("connection from %s asked for SASL mechanism %.*s, which is not enabled",
                st_conn_peer(r->conn), req.mechanism.len > 0 ? (int)req.mechanism.len : 0,
                req.mechanism.len > 0 ? req.mechanism.ptr : "");
    } else {
        sasl_conn_t *sc = calloc(1, sizeof *sc);
        const char *name = chosen == ST_SASL_PLAIN           ? "PLAIN"
                           : chosen == ST_SASL_SCRAM_SHA_256 ? "SCRAM-SHA-256"
                                                             : "SCRAM-SHA-512";
        if (!sc || st_auth_sasl_mechanism(a, name)) {
            free(sc);
            st_kreq_fail(r, "out of memory");
            return;
        }
        sc->raw = r->api_version == 0;
        sc->plain = chosen == ST_SASL_PLAIN;
        st_scram_init(&sc->scram, st_scram_mech_parse(name));
        a->sasl = sc;
        a->sasl_free = sasl_conn_free;
    }
    r->error_code = resp.error_code;
    ST_KREQ_RESPOND(r, sasl_handshake, &resp);
}

/* ---- SaslAuthenticate ---- */

/* One token of the exchange: 0 with *out (malloc'd, may be empty) the answer and, when the
 * exchange is over, *done; -1 with err when it failed. */
static int exchange(st_kreq_t *r, sasl_conn_t *sc, const uint8_t *tok, size_t len, char **out,
                    size_t *outlen, bool *done, char *user, char *err, size_t errlen)
{
    *done = false;
    *out = NULL;
    *outlen = 0;
    const st_md_t *md = r->shard->md;
    if (sc->plain) {
        const char *u, *p;
        size_t ul, pl;
        if (st_plain_parse((const char *)tok, len, &u, &ul, &p, &pl)) {
            snprintf(err, errlen, "Authentication failed: malformed PLAIN message");
            return -1;
        }
        snprintf(user, ST_SCRAM_USER_MAX, "%.*s", (int)ul, u);
        st_scram_cred_t c;
        bool ok = (lookup((void *)md, user, ST_SCRAM_SHA_512, &c) == 0 ||
                   lookup((void *)md, user, ST_SCRAM_SHA_256, &c) == 0) &&
                  st_scram_cred_check(&c, p, pl);
        if (!ok) {
            snprintf(err, errlen, "Authentication failed: Invalid username or password");
            return -1;
        }
        *out = strdup("");
        *done = true;
        return *out ? 0 : -1;
    }
    char why[128];
    int rc;
    if (sc->scram.state == ST_SCRAM_WANT_FIRST)
        rc = st_scram_client_first(&sc->scram, (const char *)tok, len, lookup, (void *)md, NULL,
                                   out, outlen, why, sizeof why);
    else
        rc =
            st_scram_client_final(&sc->scram, (const char *)tok, len, out, outlen, why, sizeof why);
    if (rc) {
        snprintf(err, errlen,
                 "Authentication failed during authentication due to invalid credentials with "
                 "SASL mechanism %s (%s)",
                 st_scram_mech_name(sc->scram.mech), why);
        return -1;
    }
    if (sc->scram.state == ST_SCRAM_DONE) {
        snprintf(user, ST_SCRAM_USER_MAX, "%s", sc->scram.user);
        *done = true;
    }
    return 0;
}

/* A failed authentication, answered after the delay. */
typedef struct sasl_fail {
    st_timer_t t;
    st_kreq_t *r;
    st_kp_sasl_authenticate_resp_t resp;
} sasl_fail_t;

static void fail_answer(st_timer_t *t)
{
    sasl_fail_t *f = t->data;
    st_kreq_t *r = f->r;
    st_conn_t *c = r->conn;
    /* close first: the client may have gone during the delay, and then the answer frees the
     * connection */
    if (f->resp.error_code == 0) { /* a v0 raw token: no answer, the connection goes */
        st_conn_close(c);
        st_kreq_finish_silent(r);
        return;
    }
    st_conn_close_when_sent(c);
    ST_KREQ_RESPOND(r, sasl_authenticate, &f->resp);
}

static void fail_later(st_kreq_t *r, const char *err, bool raw)
{
    st_auth_t *a = st_conn_auth(r->conn);
    ST_INFO("failed authentication with SASL mechanism %s from %s: %s", a->mechanism,
            st_conn_peer(r->conn), err);
    st_auth_fail(a);
    sasl_fail_t *f = st_arena_zalloc(&r->arena, sizeof *f);
    if (!f) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    f->r = r;
    if (!raw) {
        f->resp.error_code = ST_KERR_SASL_AUTHENTICATION_FAILED;
        f->resp.error_message = st_kstr(st_arena_strndup(&r->arena, err, strlen(err)));
    }
    r->error_code = ST_KERR_SASL_AUTHENTICATION_FAILED;
    st_timer_init(&f->t, fail_answer, f);
    st_loop_timer_start(r->shard->loop, &f->t,
                        r->shard->b->cfg->connection_failed_authentication_delay_ms);
}

static void succeed(st_kreq_t *r, const char *user)
{
    char principal[ST_AUTH_PRINCIPAL_MAX];
    snprintf(principal, sizeof principal, "User:%s", user);
    st_auth_t *a = st_conn_auth(r->conn);
    ST_DEBUG("connection from %s authenticated as %s (%s)", st_conn_peer(r->conn), principal,
             a->mechanism);
    st_auth_succeed(a, principal);
}

void st_kh_sasl_authenticate(st_kreq_t *r)
{
    st_kp_sasl_authenticate_req_t req;
    if (st_kp_sasl_authenticate_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed SaslAuthenticate request");
        return;
    }
    st_auth_t *a = st_conn_auth(r->conn);
    sasl_conn_t *sc = a->sasl;
    st_kp_sasl_authenticate_resp_t resp = {0};
    resp.error_message = ST_KSTR_NULL;
    if (a->state != ST_AUTH_SASL_AUTHENTICATE || !sc || sc->raw) {
        /* no handshake first, or after a v0 one: Kafka answers, then closes */
        resp.error_code = ST_KERR_ILLEGAL_SASL_STATE;
        resp.error_message = st_kstr("SaslAuthenticate is not expected now");
        r->error_code = resp.error_code;
        st_auth_fail(a);
        st_conn_close_when_sent(r->conn);
        ST_KREQ_RESPOND(r, sasl_authenticate, &resp);
        return;
    }
    char *out = NULL, err[256], user[ST_SCRAM_USER_MAX] = "";
    size_t outlen = 0;
    bool done;
    size_t len = req.auth_bytes.len > 0 ? (size_t)req.auth_bytes.len : 0;
    if (exchange(r, sc, req.auth_bytes.ptr, len, &out, &outlen, &done, user, err, sizeof err)) {
        free(out);
        fail_later(r, err, false);
        return;
    }
    uint8_t *copy = st_arena_alloc(&r->arena, outlen + 1);
    if (!copy) {
        free(out);
        st_kreq_fail(r, "out of memory");
        return;
    }
    memcpy(copy, out, outlen);
    free(out);
    resp.auth_bytes = (st_kbytes_t){copy, (int32_t)outlen};
    if (done)
        succeed(r, user);
    ST_KREQ_RESPOND(r, sasl_authenticate, &resp);
}

bool st_sasl_raw_pending(st_conn_t *c)
{
    st_auth_t *a = st_conn_auth(c);
    const sasl_conn_t *sc = a->sasl;
    return a->state == ST_AUTH_SASL_AUTHENTICATE && sc && sc->raw;
}

void st_sasl_raw_frame(st_kreq_t *r)
{
    sasl_conn_t *sc = st_conn_auth(r->conn)->sasl;
    char *out = NULL, err[256], user[ST_SCRAM_USER_MAX] = "";
    size_t outlen = 0;
    bool done;
    if (exchange(r, sc, r->frame, r->frame_len, &out, &outlen, &done, user, err, sizeof err)) {
        free(out);
        fail_later(r, err, true);
        return;
    }
    st_out_t *o = st_out_new();
    if (!o) {
        free(out);
        st_kreq_fail(r, "out of memory");
        return;
    }
    st_buf_put_be32(&o->mem, 0); /* size, patched by st_kreq_finish */
    st_buf_append(&o->mem, out, outlen);
    free(out);
    if (done)
        succeed(r, user);
    st_kreq_finish(r, o, 0);
}

/* ---- bootstrap users ---- */

/* Shard 0's bootstrap: the op in flight, and when it last went. */
typedef struct sasl_boot {
    st_ctl_op_t op;
    bool inflight;
    int64_t last_ms;
    int n;
    st_ctl_item_t items[64];
    st_md_scram_t creds[64];
    char users[64][ST_MD_SCRAM_USER_MAX];
} sasl_boot_t;

static sasl_boot_t *boot_of(st_kshard_t *s)
{
    st_kafka_shard_t *k = st_kafka_shard(s);
    if (!k->sasl_boot)
        k->sasl_boot = calloc(1, sizeof(sasl_boot_t));
    return k->sasl_boot;
}

static void boot_done(st_kshard_t *s, st_ctl_op_t *op)
{
    sasl_boot_t *bt = op->arg;
    (void)s;
    bt->inflight = false;
    for (int i = 0; i < bt->n; i++)
        if (bt->items[i].error && bt->items[i].error != ST_KERR_NOT_CONTROLLER)
            ST_WARN("sasl.bootstrap.users: user %s: %s", bt->users[i], bt->items[i].message);
}

/* Whether every bootstrap user has its credential in md; else fills bt with the missing. */
static bool boot_missing(const st_config_t *cfg, const st_md_t *md, sasl_boot_t *bt, bool fill)
{
    char *copy = strdup(cfg->sasl_bootstrap_users), *save = NULL;
    if (!copy)
        return false;
    int n = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && n < 64; tok = strtok_r(NULL, ",", &save)) {
        char *m = strchr(tok, ':'), *pw = m ? strchr(m + 1, ':') : NULL;
        if (!m || !pw)
            continue;
        *m = *pw = 0;
        st_scram_mech_t mech = st_scram_mech_parse(m + 1);
        if (!mech || st_md_find_scram(md, tok, (int8_t)mech))
            continue;
        if (fill) {
            st_scram_cred_t c;
            if (st_scram_cred_from_password(&c, mech, ST_SCRAM_MIN_ITER, pw + 1, strlen(pw + 1),
                                            NULL, 0))
                continue;
            snprintf(bt->users[n], sizeof bt->users[n], "%s", tok);
            st_sasl_md_of(tok, &c, &bt->creds[n]);
            st_ctl_item_t *it = &bt->items[n];
            memset(it, 0, sizeof *it);
            it->name = bt->users[n];
            it->mechanism = (int8_t)mech;
            it->scram = &bt->creds[n];
            it->if_absent = true;
        }
        n++;
    }
    free(copy);
    if (fill)
        bt->n = n;
    return n > 0;
}

void st_sasl_tick(st_kshard_t *s)
{
    const st_config_t *cfg = s->b->cfg;
    if (s->id != 0 || !*cfg->sasl_bootstrap_users || !s->md ||
        s->md->controller_id != (int32_t)cfg->node_id)
        return;
    sasl_boot_t *bt = boot_of(s);
    int64_t now = st_mono_ms();
    if (!bt || bt->inflight || now - bt->last_ms < 1000 || !boot_missing(cfg, s->md, bt, false))
        return;
    boot_missing(cfg, s->md, bt, true);
    if (!bt->n)
        return;
    bt->last_ms = now;
    bt->inflight = true;
    memset(&bt->op, 0, sizeof bt->op);
    bt->op.kind = ST_CTL_SCRAM;
    bt->op.items = bt->items;
    bt->op.n = bt->n;
    bt->op.cb = boot_done;
    bt->op.arg = bt;
    ST_INFO("sasl.bootstrap.users: creating %d SCRAM credential(s)", bt->n);
    st_ctl_submit(s, &bt->op);
}

void st_sasl_shard_fini(st_kshard_t *s)
{
    st_kafka_shard_t *k = st_kafka_shard(s);
    sasl_boot_t *bt = k ? k->sasl_boot : NULL;
    if (bt && !bt->inflight) {
        free(bt);
        k->sasl_boot = NULL;
    }
}
