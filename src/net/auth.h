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
} st_auth_t;

void st_auth_init(st_auth_t *a, st_sec_protocol_t protocol);
/* The transport's handshake finished: PLAINTEXT and SSL are done (anonymous), SASL waits for
 * its handshake. 0, or -1 if a is not in HANDSHAKE. */
int st_auth_transport_ready(st_auth_t *a);
/* The client chose a SASL mechanism. 0, or -1 (wrong state: the caller refuses it). */
int st_auth_sasl_mechanism(st_auth_t *a, const char *mechanism);
/* The mechanism proved `principal` ("User:alice"). 0, or -1 in the wrong state. */
int st_auth_succeed(st_auth_t *a, const char *principal);
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
