/*
 * auth.h — a connection's authentication state: who is on the other end, and how far the
 * proof has gone.
 *
 * Every connection carries one (st_conn_auth). It starts from its listener's security
 * protocol and moves only forward:
 *
 *                 st_auth_init(PLAINTEXT | SSL)
 *   HANDSHAKE ------------------------------------------------------------> DONE
 *       |        (st_auth_transport_ready: principal User:ANONYMOUS)          ^
 *       | st_auth_init(SASL_*), st_auth_transport_ready                       |
 *       v                                                                     |
 *   SASL_HANDSHAKE --st_auth_sasl_mechanism--> SASL_AUTHENTICATE --st_auth_succeed
 *       |                                             |
 *       +------------- st_auth_fail ------------------+--> FAILED (the connection closes)
 *
 * Re-authentication (KIP-368): a SASL session may end (st_auth_set_session: the deadline the
 * SaslAuthenticate answer gave). A DONE connection that sends SaslHandshake again starts
 * st_auth_reauth_begin: it stays DONE (its other requests keep passing) while the exchange
 * runs, and st_auth_succeed ends it only for the same principal (-2 otherwise: the caller
 * fails the connection). Once the deadline passes without one, st_auth_expired says so and
 * the Kafka layer lets nothing but the re-authentication's own requests through.
 *
 * HANDSHAKE lasts while the transport's own handshake runs (none for plain TCP: conn.c
 * calls st_auth_transport_ready at accept). The Kafka layer consults st_auth_done before
 * each request: until then only the requests that carry the handshake itself (ApiVersions,
 * SaslHandshake, SaslAuthenticate) may pass. The SaslHandshake and SaslAuthenticate handlers
 * (kafka/h_sasl.c) drive the states after SASL_HANDSHAKE; the mechanisms are auth/'s.
 *
 * Knows nothing of Kafka's api keys. Runs on the connection's shard.
 */
#ifndef ST_NET_AUTH_H
#define ST_NET_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "net/listener.h"

typedef enum {
    ST_AUTH_HANDSHAKE,         /* the transport's handshake runs */
    ST_AUTH_SASL_HANDSHAKE,    /* waiting for the client to pick a SASL mechanism */
    ST_AUTH_SASL_AUTHENTICATE, /* the mechanism's exchanges */
    ST_AUTH_DONE,              /* principal known: every request may pass */
    ST_AUTH_FAILED,            /* the proof failed: nothing more is served */
} st_auth_state_t;

#define ST_AUTH_PRINCIPAL_MAX 256
#define ST_AUTH_ANONYMOUS     "User:ANONYMOUS"

typedef struct st_auth {
    st_auth_state_t state;
    st_sec_protocol_t protocol;
    char mechanism[32];                    /* SASL mechanism once chosen, else empty */
    char principal[ST_AUTH_PRINCIPAL_MAX]; /* "User:NAME" once DONE, else empty */
    /* The mechanism's own state between exchanges (the Kafka layer's: kafka/h_sasl.c), freed
     * with sasl_free when the connection goes or the exchange ends. */
    void *sasl;
    void (*sasl_free)(void *sasl);
    bool reauth;                /* DONE, and a re-authentication exchange runs */
    int64_t session_expiry_ns;  /* st_mono_ns deadline of the SASL session; 0: none */
    uint32_t reauthentications; /* re-authentications completed on this connection */
    int64_t reauth_started_ns;  /* st_mono_ns when the last re-authentication began; 0: none */
    bool reauth_capable;        /* the client sent SaslAuthenticate v1+ (Kafka's test of KIP-368) */
} st_auth_t;

void st_auth_init(st_auth_t *a, st_sec_protocol_t protocol);
/* The transport's handshake finished: PLAINTEXT and SSL are done (anonymous), SASL waits for
 * its handshake. 0, or -1 if a is not in HANDSHAKE. */
int st_auth_transport_ready(st_auth_t *a);
/* The client chose a SASL mechanism. 0, or -1 (wrong state: the caller refuses it). */
int st_auth_sasl_mechanism(st_auth_t *a, const char *mechanism);
/* The mechanism proved `principal` ("User:alice"). 0, or -1 in the wrong state; while
 * re-authenticating, -2 when principal is not the session's (the state is left as it was). */
int st_auth_succeed(st_auth_t *a, const char *principal);
/* A DONE SASL connection starts re-authenticating with `mechanism`: 0; -1 in the wrong state
 * (not DONE, not SASL, one already running); -2 when mechanism is not the session's. */
int st_auth_reauth_begin(st_auth_t *a, const char *mechanism);
/* Whether a re-authentication runs. */
static inline bool st_auth_reauthenticating(const st_auth_t *a)
{
    return a->state == ST_AUTH_DONE && a->reauth;
}
/* The session ends at expiry_ns (st_mono_ns; 0: never). */
static inline void st_auth_set_session(st_auth_t *a, int64_t expiry_ns)
{
    a->session_expiry_ns = expiry_ns;
}
/* Whether the session's deadline has passed at now_ns. */
static inline bool st_auth_expired(const st_auth_t *a, int64_t now_ns)
{
    return a->state == ST_AUTH_DONE && a->session_expiry_ns && now_ns > a->session_expiry_ns;
}
/* The proof failed; the connection must close. */
void st_auth_fail(st_auth_t *a);
/* Frees the mechanism's state (the connection is going). */
void st_auth_fini(st_auth_t *a);
static inline bool st_auth_done(const st_auth_t *a)
{
    return a->state == ST_AUTH_DONE;
}
const char *st_auth_state_name(st_auth_state_t s);

#endif
