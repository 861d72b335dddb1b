/*
 * secure.h — how this broker's own connections to other brokers are secured: the
 * inter-broker listener's security protocol (inter.broker.listener.name) read once from the
 * config into what conn.c needs for each connection.
 *
 *   SSL, SASL_SSL: TLS first. The other broker's certificate is checked against
 *       ssl.truststore.* (OpenSSL's default CAs when none is set) and, with
 *       ssl.endpoint.identification.algorithm=https (Kafka's default), against the host the
 *       connection goes to (a DNS name or an IP address in its subjectAltName); empty: any
 *       certificate a trusted CA signed. ssl.keystore.* is presented as the client certificate
 *       when set, so ssl.client.auth=required holds between brokers too. Every setting is the
 *       inter-broker listener's (listener.name.<name>.ssl.* over ssl.*).
 *   SASL_PLAINTEXT, SASL_SSL: then SaslHandshake v1 and SaslAuthenticate v2 with
 *       sasl.mechanism.inter.broker.protocol (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512) and the
 *       credentials of st_config_inter_broker_credentials, before any other request.
 *   PLAINTEXT: nothing (st_rsec_create gives NULL).
 *
 * Memory: the owner (the fetcher, the inter-broker client) creates one, hands it to each
 * st_rconn_new, and destroys it after its connections are closed. Read-only once made: any
 * thread.
 */
#ifndef ST_REPLICA_SECURE_H
#define ST_REPLICA_SECURE_H

#include <stdbool.h>
#include <stddef.h>

#include "auth/scram.h"
#include "cluster/config.h"

typedef enum { ST_RSEC_SASL_NONE, ST_RSEC_SASL_PLAIN, ST_RSEC_SASL_SCRAM } st_rsec_sasl_t;

typedef struct st_rsec {
    /* NULL: plain TCP; else the client context, made again when the keystore or truststore
     * file changes (net/tls.h st_tls_client_create): each connection takes the current one */
    struct st_tls_server *tls;
    bool verify_host; /* ssl.endpoint.identification.algorithm=https */
    st_rsec_sasl_t sasl;
    st_scram_mech_t scram; /* with ST_RSEC_SASL_SCRAM */
    char mechanism[16];    /* its SASL name, as SaslHandshake sends it */
    char user[256], password[256];
} st_rsec_t;

/* What the inter-broker listener of cfg asks for: *out NULL for PLAINTEXT (or a NULL cfg).
 * 0, or an error with one line in err (a truststore that does not load, say). */
int st_rsec_create(const st_config_t *cfg, st_rsec_t **out, char *err, size_t errlen);
void st_rsec_destroy(st_rsec_t *s);

#endif
