/*
 * h_sasl.c — SASL authentication on SASL_* listeners: SaslHandshake (17) and SaslAuthenticate
 * (36), re-authentication (KIP-368), and the users sasl.bootstrap.users creates.
 *
 * A connection of a SASL listener starts in SASL_HANDSHAKE (net/auth.h) and may send only
 * ApiVersions, SaslHandshake and SaslAuthenticate (serve.c) until it is authenticated:
 *
 *   SaslHandshake(mechanism)    one of sasl.enabled.mechanisms -> SASL_AUTHENTICATE; another
 *                               is answered UNSUPPORTED_SASL_MECHANISM with the list and the
 *                               client may ask again
 *   SaslAuthenticate(token)...  the mechanism's exchange: PLAIN in one round, SCRAM in two
 *                               (auth/scram.h), OAUTHBEARER in one (auth/oauth.h); the last
 *                               success -> DONE, principal User:<name>, and the session's
 *                               lifetime (below) in the answer (v1+)
 *   a failure                   SASL_AUTHENTICATION_FAILED, answered after
 *                               connection.failed.authentication.delay.ms; the connection
 *                               closes once the answer is sent (FAILED)
 *
 * OAUTHBEARER, as Kafka's OAuthBearerSaslServer: a token that does not validate is answered
 * with no error and RFC 7628's error JSON ({"status":"invalid_token"}) as the server's
 * challenge; the client's next message (\x01) then gets SASL_AUTHENTICATION_FAILED with that
 * JSON as the message. A malformed client message, or an authzid other than the token's
 * principal, fails at once. The key set is this shard's copy of the JWKS file, re-read when
 * the file changed (checked at most once a second, at an authentication).
 *
 * Sessions (KIP-368): the lifetime is connections.max.reauth.ms for the listener and
 * mechanism, and for OAUTHBEARER at most the token's remaining life (Kafka's rule: with the
 * setting 0, a token's expiry still ends the session). A DONE connection may send
 * SaslHandshake (v1, the same mechanism) and SaslAuthenticate again: its other requests keep
 * being served meanwhile, and success must prove the same principal (another one fails the
 * connection). As Kafka's KafkaChannel, a client that never sent SaslAuthenticate v1+, or one
 * whose last re-authentication began less than a second ago, gets ILLEGAL_SASL_STATE for that
 * SaslHandshake instead, and its connection stays. Past the deadline serve.c closes a connection at
 * any request but those two, as Kafka does.
 *
 * SaslHandshake v0 (old clients): the tokens then come as bare size-prefixed frames, without
 * a Kafka header, and are answered the same way (serve.c hands them to st_sasl_raw_frame).
 * A v0 failure just closes the connection, after the delay, as Kafka does. A raw token shorter
 * than 8 bytes is refused by the frame parser (it takes it for a truncated header). A v0
 * connection cannot re-authenticate.
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
#include <sys/stat.h>

#include "auth/oauth.h"
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
    bool raw;      /* SaslHandshake v0: tokens as bare frames */
    unsigned mech; /* ST_SASL_* */
    st_scram_t scram;
    char *oauth_error;      /* OAUTHBEARER: the error JSON sent; the next message fails */
    int64_t cred_expiry_ms; /* OAUTHBEARER: the token's exp (Unix ms); 0: none */
} sasl_conn_t;

static void sasl_conn_free(void *p)
{
    sasl_conn_t *sc = p;
    st_scram_fini(&sc->scram);
    free(sc->oauth_error);
    free(sc);
}

static const struct {
    const char *name;
    unsigned bit;
} mechs[] = {{"PLAIN", ST_SASL_PLAIN},
             {"SCRAM-SHA-256", ST_SASL_SCRAM_SHA_256},
             {"SCRAM-SHA-512", ST_SASL_SCRAM_SHA_512},
             {"OAUTHBEARER", ST_SASL_OAUTHBEARER}};
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

/* ---- OAUTHBEARER's key set ---- */

/* A shard's copy of the JWKS file and what the file looked like when it was read. */
typedef struct sasl_oauth {
    st_jwks_t *keys;
    char path[1024];
    bool bad_url;
    struct stat st; /* of the file last read (loaded or not) */
    bool have_st;
    int64_t checked_ms; /* st_mono_ms of the last stat */
} sasl_oauth_t;

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* The key set signed tokens are checked against, read again when its file changed (one stat
 * a second at most): NULL when none could be loaded yet. */
static const st_jwks_t *oauth_keys(st_kshard_t *s)
{
    st_kafka_shard_t *k = st_kafka_shard(s);
    if (!k->sasl_oauth) {
        k->sasl_oauth = calloc(1, sizeof(sasl_oauth_t));
        if (!k->sasl_oauth)
            return NULL;
        sasl_oauth_t *o = k->sasl_oauth;
        o->bad_url = st_oauth_file_url_path(s->b->cfg->sasl_oauthbearer_jwks_endpoint_url, o->path,
                                            sizeof o->path) != 0;
    }
    sasl_oauth_t *o = k->sasl_oauth;
    int64_t now = st_mono_ms();
    if (o->bad_url || (o->keys && now - o->checked_ms < 1000))
        return o->keys;
    o->checked_ms = now;
    struct stat st;
    if (stat(o->path, &st) != 0 || (o->have_st && same_file(&st, &o->st)))
        return o->keys;
    o->st = st;
    o->have_st = true;
    st_jwks_t *nk = NULL;
    char err[300];
    if (st_jwks_load(o->path, &nk, err, sizeof err)) {
        ST_WARN("sasl.oauthbearer.jwks.endpoint.url: %s; %s", err,
                o->keys ? "the keys read before stay in use" : "no key set to check tokens with");
        return o->keys;
    }
    if (o->keys)
        ST_INFO("sasl.oauthbearer.jwks.endpoint.url: %s reloaded on shard %d (%d keys)", o->path,
                s->id, st_jwks_count(nk));
    st_jwks_free(o->keys);
    o->keys = nk;
    return o->keys;
}

/* ---- SaslHandshake ---- */

static void sasl_count(st_kshard_t *s, _Atomic uint64_t *c)
{
    (void)s;
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

void st_kh_sasl_handshake(st_kreq_t *r)
{
    st_kp_sasl_handshake_req_t req;
    if (st_kp_sasl_handshake_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed SaslHandshake request");
        return;
    }
    const st_config_t *cfg = r->shard->b->cfg;
    st_kp_sasl_handshake_resp_t resp = {0};
    st_kstr_t *list = st_arena_zalloc(&r->arena, sizeof(st_kstr_t) * NMECHS);
    if (!list) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    unsigned chosen = 0;
    const char *name = NULL;
    for (int i = 0; i < NMECHS; i++) {
        if (!(cfg->sasl_mechanisms & mechs[i].bit))
            continue;
        list[resp.mechanisms_count++] = st_kstr(mechs[i].name);
        if (st_kstr_eq(req.mechanism, mechs[i].name)) {
            chosen = mechs[i].bit;
            name = mechs[i].name;
        }
    }
    resp.mechanisms = list;
    st_auth_t *a = st_conn_auth(r->conn);
    bool reauth = a->state == ST_AUTH_DONE && st_sec_protocol_sasl(a->protocol);
    int rb = 0;
    if (reauth && !a->reauth &&
        (!a->reauth_capable ||
         (a->reauth_started_ns && r->start_ns - a->reauth_started_ns < 1000000000))) {
        /* Kafka's KafkaChannel: no re-authentication for a client that never sent
         * SaslAuthenticate v1+, nor more than once a second; the handshake is then an ordinary
         * request of an authenticated connection, refused, and the connection stays */
        resp.error_code = ST_KERR_ILLEGAL_SASL_STATE;
        ST_INFO("connection from %s (%s): SaslHandshake refused: %s", st_conn_peer(r->conn),
                a->principal,
                a->reauth_capable ? "a re-authentication began less than 1 s ago"
                                  : "the client never sent SaslAuthenticate v1+");
    } else if (reauth &&
               (r->api_version == 0 || !chosen || (rb = st_auth_reauth_begin(a, name)) != 0)) {
        /* KIP-368: re-authentication is SaslHandshake v1 with the session's mechanism; Kafka
         * closes a connection that tries anything else */
        resp.error_code =
            rb == -2 || !chosen ? ST_KERR_UNSUPPORTED_SASL_MECHANISM : ST_KERR_ILLEGAL_SASL_STATE;
        ST_INFO("connection from %s (%s, %s) refused: re-authentication with SaslHandshake v%d "
                "and mechanism %.*s",
                st_conn_peer(r->conn), a->principal, a->mechanism, r->api_version,
                req.mechanism.len > 0 ? (int)req.mechanism.len : 0,
                req.mechanism.len > 0 ? req.mechanism.ptr : "");
        st_auth_fail(a);
        st_conn_close_when_sent(r->conn);
    } else if (!reauth && a->state != ST_AUTH_SASL_HANDSHAKE) {
        /* a PLAINTEXT listener, or a second handshake before the first exchange ended */
        resp.error_code = ST_KERR_ILLEGAL_SASL_STATE;
    } else if (!chosen) {
        resp.error_code = ST_KERR_UNSUPPORTED_SASL_MECHANISM;
        ST_INFO("connection from %s asked for SASL mechanism %.*s, which is not enabled",
                st_conn_peer(r->conn), req.mechanism.len > 0 ? (int)req.mechanism.len : 0,
                req.mechanism.len > 0 ? req.mechanism.ptr : "");
    } else {
        sasl_conn_t *sc = calloc(1, sizeof *sc);
        if (!sc || (!reauth && st_auth_sasl_mechanism(a, name))) {
            free(sc);
            st_kreq_fail(r, "out of memory");
            return;
        }
        sc->raw = r->api_version == 0;
        sc->mech = chosen;
        st_scram_init(&sc->scram, st_scram_mech_parse(name));
        if (reauth)
            a->reauth_started_ns = r->start_ns;
        st_auth_fini(a); /* (nothing is left there by now, but never leak it) */
        a->sasl = sc;
        a->sasl_free = sasl_conn_free;
    }
    r->error_code = resp.error_code;
    ST_KREQ_RESPOND(r, sasl_handshake, &resp);
}

/* ---- SaslAuthenticate ---- */

/* OAUTHBEARER's one round (Kafka's OAuthBearerSaslServer): as exchange() says. */
static int oauth_exchange(st_kreq_t *r, sasl_conn_t *sc, const uint8_t *tok, size_t len, char **out,
                          size_t *outlen, bool *done, char *user, char *err, size_t errlen)
{
    if (sc->oauth_error) {
        /* the client's \x01 after our error JSON (or anything else: it had its one try) */
        snprintf(err, errlen, "%s", sc->oauth_error);
        return -1;
    }
    const char *t, *az;
    size_t tl, al;
    if (st_oauthbearer_parse(tok, len, &t, &tl, &az, &al)) {
        snprintf(err, errlen,
                 "Authentication failed during authentication due to invalid credentials with "
                 "SASL mechanism OAUTHBEARER (a malformed client message)");
        return -1;
    }
    const st_config_t *cfg = r->shard->b->cfg;
    st_jwt_rules_t rules = {
        .audience = cfg->sasl_oauthbearer_expected_audience,
        .issuer = cfg->sasl_oauthbearer_expected_issuer,
        .sub_claim = cfg->sasl_oauthbearer_sub_claim_name,
        .scope_claim = cfg->sasl_oauthbearer_scope_claim_name,
        .skew_ms = cfg->sasl_oauthbearer_clock_skew_seconds * 1000,
    };
    st_jwt_result_t jr;
    int rc;
    if (*cfg->sasl_oauthbearer_jwks_endpoint_url) {
        rules.jwks = oauth_keys(r->shard);
        rc = rules.jwks ? st_jwt_validate(&rules, t, tl, st_wall_ms(), &jr) : -1;
        if (!rules.jwks)
            snprintf(jr.why, sizeof jr.why, "no key set loaded");
    } else if (cfg->sasl_oauthbearer_unsecured_validator_enable) {
        rc = st_jwt_validate(&rules, t, tl, st_wall_ms(), &jr);
    } else {
        rc = -1;
        snprintf(jr.why, sizeof jr.why, "no validator configured");
    }
    if (rc) {
        ST_INFO("OAUTHBEARER token from %s refused: %s", st_conn_peer(r->conn), jr.why);
        sc->oauth_error = strdup("{\"status\":\"invalid_token\"}");
        *out = sc->oauth_error ? strdup(sc->oauth_error) : NULL;
        if (!*out) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        *outlen = strlen(*out);
        return 0;
    }
    if (al && (al != strlen(jr.principal) || memcmp(az, jr.principal, al) != 0)) {
        snprintf(err, errlen,
                 "Authentication failed: Client requested an authorization id (%.*s) that is "
                 "different from the token's principal name (%s)",
                 (int)(al > 64 ? 64 : al), az, jr.principal);
        return -1;
    }
    snprintf(user, ST_SCRAM_USER_MAX, "%s", jr.principal);
    sc->cred_expiry_ms = jr.exp_ms;
    ST_DEBUG("OAUTHBEARER token of %s from %s: exp in %lld ms, scope '%s'", jr.principal,
             st_conn_peer(r->conn), (long long)(jr.exp_ms - st_wall_ms()), jr.scope);
    *out = strdup("");
    *done = true;
    return *out ? 0 : -1;
}

/* One token of the exchange: 0 with *out (malloc'd, may be empty) the answer and, when the
 * exchange is over, *done; -1 with err when it failed. */
static int exchange(st_kreq_t *r, sasl_conn_t *sc, const uint8_t *tok, size_t len, char **out,
                    size_t *outlen, bool *done, char *user, char *err, size_t errlen)
{
    *done = false;
    *out = NULL;
    *outlen = 0;
    const st_md_t *md = r->shard->md;
    if (sc->mech == ST_SASL_OAUTHBEARER)
        return oauth_exchange(r, sc, tok, len, out, outlen, done, user, err, errlen);
    if (sc->mech == ST_SASL_PLAIN) {
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
    ST_INFO("failed %sauthentication with SASL mechanism %s from %s: %s",
            st_auth_reauthenticating(a) ? "re-" : "", a->mechanism, st_conn_peer(r->conn), err);
    sasl_count(r->shard, &r->shard->stats.sasl_auth_failed);
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

/* The session's lifetime in ms (Kafka's SaslServerAuthenticator rule), -1 for none. */
static int64_t session_lifetime(st_kreq_t *r, const sasl_conn_t *sc)
{
    const st_auth_t *a = st_conn_auth(r->conn);
    int64_t max =
        st_config_reauth_ms(r->shard->b->cfg, st_conn_listener(r->conn)->name, a->mechanism);
    if (!sc->cred_expiry_ms)
        return max > 0 ? max : -1;
    int64_t left = sc->cred_expiry_ms - st_wall_ms();
    if (left < 0)
        left = 0;
    return max > 0 && max < left ? max : left;
}

/* The exchange proved user: the connection is authenticated (or re-authenticated) for the
 * session's lifetime, which *lifetime_ms gets (0: none). 0, or -1 when the connection was
 * failed instead (a re-authentication as someone else). */
static int succeed(st_kreq_t *r, const sasl_conn_t *sc, const char *user, bool raw,
                   int64_t *lifetime_ms)
{
    char principal[ST_AUTH_PRINCIPAL_MAX];
    snprintf(principal, sizeof principal, "User:%s", user);
    st_auth_t *a = st_conn_auth(r->conn);
    bool re = st_auth_reauthenticating(a);
    int64_t life = session_lifetime(r, sc);
    int rc = st_auth_succeed(a, principal);
    if (rc == -2) {
        /* Kafka's words, with its principals written type.name */
        char err[ST_AUTH_PRINCIPAL_MAX * 2 + 80], from[ST_AUTH_PRINCIPAL_MAX];
        snprintf(from, sizeof from, "%s", a->principal);
        char *c1 = strchr(from, ':'), *c2 = strchr(principal, ':');
        if (c1)
            *c1 = '.';
        if (c2)
            *c2 = '.';
        snprintf(err, sizeof err, "Cannot change principals during re-authentication from %s: %s",
                 from, principal);
        fail_later(r, err, raw);
        return -1;
    }
    if (rc) {
        st_kreq_fail(r, "SASL state");
        return -1;
    }
    int64_t now = st_mono_ns();
    st_auth_set_session(a, life < 0 ? 0 : now + life * 1000000 + (life == 0));
    *lifetime_ms = life < 0 ? 0 : life;
    sasl_count(r->shard, &r->shard->stats.sasl_auth_ok);
    if (re)
        sasl_count(r->shard, &r->shard->stats.sasl_reauth);
    ST_DEBUG("connection from %s %sauthenticated as %s (%s), session %lld ms",
             st_conn_peer(r->conn), re ? "re-" : "", principal, a->mechanism,
             (long long)*lifetime_ms);
    return 0;
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
    if (r->api_version > 0)
        a->reauth_capable = true;
    if ((a->state != ST_AUTH_SASL_AUTHENTICATE && !st_auth_reauthenticating(a)) || !sc || sc->raw) {
        /* no handshake first, or after a v0 one: Kafka answers, then closes */
        resp.error_code = ST_KERR_ILLEGAL_SASL_STATE;
        resp.error_message = st_kstr("SaslAuthenticate is not expected now");
        r->error_code = resp.error_code;
        st_auth_fail(a);
        st_conn_close_when_sent(r->conn);
        ST_KREQ_RESPOND(r, sasl_authenticate, &resp);
        return;
    }
    char *out = NULL, err[ST_AUTH_PRINCIPAL_MAX * 2 + 80], user[ST_SCRAM_USER_MAX] = "";
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
    if (done && succeed(r, sc, user, false, &resp.session_lifetime_ms))
        return;
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
    char *out = NULL, err[ST_AUTH_PRINCIPAL_MAX * 2 + 80], user[ST_SCRAM_USER_MAX] = "";
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
    int64_t life;
    if (done && succeed(r, sc, user, true, &life)) {
        st_out_free(o);
        return;
    }
    st_kreq_finish(r, o, 0);
}

bool st_sasl_session_check(st_kreq_t *r)
{
    st_auth_t *a = st_conn_auth(r->conn);
    if (!st_auth_expired(a, r->start_ns) || r->api_key == ST_KP_API_SASL_HANDSHAKE ||
        (r->api_key == ST_KP_API_SASL_AUTHENTICATE && st_auth_reauthenticating(a)))
        return true;
    sasl_count(r->shard, &r->shard->stats.sasl_expired);
    ST_INFO("connection from %s (%s, %s): the SASL session expired %lld ms ago without "
            "re-authentication; closing it",
            st_conn_peer(r->conn), a->principal, a->mechanism,
            (long long)((r->start_ns - a->session_expiry_ns) / 1000000));
    st_kreq_fail(r, "SASL session expired");
    return false;
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
    sasl_oauth_t *o = k ? k->sasl_oauth : NULL;
    if (o) {
        st_jwks_free(o->keys);
        free(o);
        k->sasl_oauth = NULL;
    }
}
