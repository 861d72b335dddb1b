/*
 * tls.h — TLS for a Kafka listener: the server side of an SSL (or SASL_SSL) listener, and
 * the transport (transport.h) each of its accepted sockets gets.
 *
 * One st_tls_server_t per TLS listener, made at start-up from Kafka's ssl.* settings and
 * shared by every shard: it holds the current OpenSSL context (certificate, key, trusted
 * CAs, protocols, ciphers, client authentication). Each accepted socket gets a transport of
 * its own over plain TCP that runs OpenSSL with memory BIOs: OpenSSL never touches the
 * socket, the loop's recv and send move the ciphertext, so neither the handshake nor a slow
 * peer ever blocks a shard.
 *
 *   st_tls_server_create (start-up: errors name the setting and the file)
 *     -> st_tls_server_reload on SIGHUP (the main thread), and
 *        st_tls_transport_new per accepted socket (checks, at most once a second, whether
 *        the keystore or truststore files changed; a changed set is loaded and new
 *        connections use it, open ones keep theirs)
 *     -> handshake (bounded by handshake_timeout_ms) -> recv / send ... -> close
 *
 * File ranges (Fetch records) never reach this transport: can_sendfile is false, so
 * net/conn.c copies them into memory first.
 *
 * The peer's principal (transport.h: principal): with a verified client certificate, its
 * subject DN as Kafka writes it (RFC 2253: "CN=alice,OU=eng,O=Acme"), mapped through
 * ssl.principal.mapping.rules; without one, NULL (anonymous).
 *
 * Who calls: st_tls_server_* from start-up (create, destroy) and from any shard thread
 * (transport_new, serialised inside); a transport only from its connection's shard.
 */
#ifndef ST_NET_TLS_H
#define ST_NET_TLS_H

#include <stddef.h>
#include <stdint.h>

#include "net/transport.h"

/* Kafka's ssl.* settings of one listener (already resolved: listener.name.<x>.ssl.* over
 * the global ssl.*); NULL or "" means unset. The server copies what it keeps. */
typedef struct st_tls_settings {
    const char *keystore_type;     /* PEM (default) or PKCS12 */
    const char *keystore_location; /* PEM: certificate chain and key in one file */
    const char *keystore_password; /* PKCS12's password; PEM: the key's if no key_password */
    const char *key_password;      /* the private key's (encrypted PEM key) */
    const char *keystore_certificate_chain; /* inline PEM instead of keystore_location */
    const char *keystore_key;               /* inline PEM key, with keystore_certificate_chain */
    const char *truststore_type;            /* PEM (default) or PKCS12 */
    const char *truststore_location;        /* CAs client certificates are checked against */
    const char *truststore_password;        /* PKCS12's */
    const char *truststore_certificates;    /* inline PEM CAs instead of truststore_location */
    const char *client_auth;                /* none (default), requested, required */
    const char *enabled_protocols;          /* "TLSv1.2,TLSv1.3" (default) */
    const char *cipher_suites;              /* IANA or OpenSSL names; empty: OpenSSL's defaults */
    const char *principal_mapping_rules;    /* Kafka's RULE:...,DEFAULT syntax; empty: DEFAULT */
    int64_t handshake_timeout_ms;           /* a handshake not done by then fails */
    int64_t reload_check_ms;                /* how often files are checked for changes; 0: never */
} st_tls_settings_t;

/* Where st_tls_settings_get reads a setting: one listener's value of Kafka setting `key`
 * ("ssl.keystore.location"), its listener.name.<l>.<key> over the global one; NULL or ""
 * when unset. */
typedef const char *(*st_tls_get_fn)(void *arg, const char *key);

/* Fills *s with one listener's ssl.* settings through get: every string field from the key
 * Kafka names it by, handshake_timeout_ms and reload_check_ms from ssl.handshake.timeout.ms
 * and ssl.reload.check.ms (left as they were when unset or not a number >= 0). The strings
 * stay get's. The one reading of these keys, for the Kafka listeners (broker/runtime.c),
 * the inter-broker client (replica/secure.c) and the controller quorum (cluster/quorum.c). */
void st_tls_settings_get(st_tls_settings_t *s, st_tls_get_fn get, void *arg);

typedef struct st_tls_server st_tls_server_t;

/* Loads the certificate, key and trust store of listener `name`. On failure writes one line
 * naming the setting (and file) into err and returns -errno or ST_E_CONFIG. */
int st_tls_server_create(const st_tls_settings_t *s, const char *name, st_tls_server_t **out,
                         char *err, size_t errlen);
void st_tls_server_destroy(st_tls_server_t *s);
/* Loads the files again if they changed since the last load (or force: SIGHUP): 1 if a new
 * context is in use, 0 if nothing changed, <0 if the new files do not load (the old stay).
 * Any thread. */
int st_tls_server_reload(st_tls_server_t *s, bool force);
/* How many times the context was replaced since creation. */
uint64_t st_tls_server_reloads(const st_tls_server_t *s);
/* The same reloading holder for this broker's own connections as a TLS client: the context
 * st_tls_client_ctx makes, made again when the keystore or truststore file changes (checked
 * every reload_check_ms, or st_tls_server_reload). `name` says whose it is in the reload's
 * log line ("inter-broker client", "controller listener CONTROLLER"). For the inter-broker
 * client (replica/secure.h) and the controller quorum (cluster/quorum.c). */
int st_tls_client_create(const st_tls_settings_t *s, const char *name, st_tls_server_t **out,
                         char *err, size_t errlen);
/* The current context, the files checked first when reload_check_ms has passed: a reference
 * the caller gives back with SSL_CTX_free. Any thread. */
struct ssl_ctx_st *st_tls_server_ctx(st_tls_server_t *s);

/* A TLS transport over connected socket fd, as a st_transport_make_t (arg: the
 * st_tls_server_t). On failure the descriptor is still the caller's. */
int st_tls_transport_new(void *server, st_loop_t *loop, int fd, st_transport_t **out);

/* An OpenSSL client context (SSL_CTX) for this broker's own connections to the listener of
 * these settings on other brokers (replica/secure.h): the peer's certificate verified against
 * the truststore (OpenSSL's default CAs when none is set), the keystore's certificate
 * presented when one is set (for ssl.client.auth=required), the same protocols and ciphers.
 * client_auth and principal_mapping_rules are not looked at. NULL with one line in err on
 * failure; the caller frees it with SSL_CTX_free. Its method is TLS_method(), so an SSL made
 * from it may also take the server's side (SSL_set_accept_state): the controller quorum's
 * transport (cluster/tls_transport.h) uses one context both ways, mutually verified. */
struct ssl_ctx_st *st_tls_client_ctx(const st_tls_settings_t *s, char *err, size_t errlen);

/* Maps a subject DN through Kafka's ssl.principal.mapping.rules into out (outlen bytes):
 * 0, or -1 if no rule matches (Kafka refuses the connection then). Exposed for tests. */
int st_tls_map_principal(const char *rules, const char *dn, char *out, size_t outlen);

/* Transports of this thread's loop not freed yet. A closed transport whose raw read or send
 * was still in flight is freed only once the loop reaped its cancellation, so a shard stops
 * its loop only when this is 0 (broker/runtime.c's shutdown), or it would leak them. */
size_t st_tls_transports_here(void);

extern const st_transport_ops_t st_transport_tls_ops;

#endif
