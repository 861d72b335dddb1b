/*
 * listener.h — a named listener and its security protocol (Kafka's `listeners` model).
 *
 * A listener is `NAME://host:port` in the `listeners` setting; its security protocol comes
 * from `listener.security.protocol.map` (NAME:PROTOCOL,...). Every connection accepted on a
 * listener belongs to it for its life (st_conn_listener) and starts in the authentication
 * state its protocol asks for (net/auth.h).
 *
 * Every protocol is served: SSL and SASL_SSL through net/tls.h (chosen by st_sec_protocol_tls
 * alone), SASL_PLAINTEXT and SASL_SSL authenticated by kafka/h_sasl.c through net/auth.h.
 *
 * Header only: the configuration (cluster/config.c) parses protocol names with it without
 * linking net/.
 */
#ifndef ST_NET_LISTENER_H
#define ST_NET_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

/* X(enum suffix, Kafka's name, has TLS, has SASL) */
#define ST_SEC_PROTOCOLS(X)                                                                        \
    X(PLAINTEXT, "PLAINTEXT", false, false)                                                        \
    X(SSL, "SSL", true, false)                                                                     \
    X(SASL_PLAINTEXT, "SASL_PLAINTEXT", false, true)                                               \
    X(SASL_SSL, "SASL_SSL", true, true)

typedef enum {
#define ST_SEC_ENUM(e, name, tls, sasl) ST_SEC_##e,
    ST_SEC_PROTOCOLS(ST_SEC_ENUM)
#undef ST_SEC_ENUM
        ST_SEC_COUNT
} st_sec_protocol_t;

/* Kafka's name of the protocol ("SASL_SSL"). */
static inline const char *st_sec_protocol_name(st_sec_protocol_t p)
{
    static const char *const names[] = {
#define ST_SEC_NAME(e, name, tls, sasl) name,
        ST_SEC_PROTOCOLS(ST_SEC_NAME)
#undef ST_SEC_NAME
    };
    return (unsigned)p < ST_SEC_COUNT ? names[p] : "?";
}

/* Whether connections of protocol p authenticate with SASL before anything else. */
static inline bool st_sec_protocol_sasl(st_sec_protocol_t p)
{
    static const bool sasl[] = {
#define ST_SEC_SASL(e, name, tls, s) s,
        ST_SEC_PROTOCOLS(ST_SEC_SASL)
#undef ST_SEC_SASL
    };
    return (unsigned)p < ST_SEC_COUNT && sasl[p];
}

/* Whether connections of protocol p run TLS (SSL, SASL_SSL): the transport follows this
 * alone, whatever authentication comes after. */
static inline bool st_sec_protocol_tls(st_sec_protocol_t p)
{
    static const bool tls[] = {
#define ST_SEC_TLS(e, name, t, sasl) t,
        ST_SEC_PROTOCOLS(ST_SEC_TLS)
#undef ST_SEC_TLS
    };
    return (unsigned)p < ST_SEC_COUNT && tls[p];
}

/* Parses a protocol name of len bytes (case-insensitive, as Kafka). 0, or -1 if unknown. */
static inline int st_sec_protocol_parse(const char *s, size_t len, st_sec_protocol_t *out)
{
    for (int p = 0; p < ST_SEC_COUNT; p++) {
        const char *n = st_sec_protocol_name((st_sec_protocol_t)p);
        if (strlen(n) == len && strncasecmp(s, n, len) == 0) {
            *out = (st_sec_protocol_t)p;
            return 0;
        }
    }
    return -1;
}

#define ST_LISTENER_NAME_MAX 64

/* One Kafka listener of this broker. Filled at start-up, read-only afterwards, shared by
 * every shard; it outlives every connection accepted on it. */
typedef struct st_listener {
    char name[ST_LISTENER_NAME_MAX]; /* "PLAINTEXT", "INTERNAL", ... (upper case) */
    st_sec_protocol_t protocol;
    char host[256];     /* bind address; empty: every interface */
    int port;           /* the bound port once listening (configured 0: the kernel's pick) */
    char adv_host[256]; /* what Metadata tells a client that came in on this listener */
    int adv_port;
} st_listener_t;

#endif
