/*
 * hb_sec.h — signed heartbeats: what the heartbeat datagram (heartbeat.h) becomes when the
 * controller listener is SSL or SASL_SSL, so that a node that holds no certificate of the
 * cluster cannot register a broker, fence one or shrink an ISR by sending one UDP datagram.
 * Over a PLAINTEXT controller listener heartbeats stay bare JSON, as unauthenticated as the
 * quorum's own traffic.
 *
 * The sender signs with the controller listener's own keystore (its key, its certificate and
 * chain: the ones tls_transport.h presents), so no new key or setting exists. The receiver
 * takes a heartbeat only when, in this order:
 *   - it is an envelope (a bare JSON heartbeat is refused: "unsigned");
 *   - the envelope parses, bounds checked ("malformed");
 *   - the certificate chain verifies against the listener's truststore, validity dates
 *     included ("certificate");
 *   - the signature over every byte before it verifies with the certificate's key
 *     ("signature");
 *   - its send time is within ST_HB_SEC_SKEW_MS of the receiver's wall clock ("stale");
 *   - the heartbeat's JSON decodes (heartbeat.h) — else "malformed";
 *   - with host checks on (ssl.endpoint.identification.algorithm=https, Kafka's default), the
 *     certificate names the host of the heartbeat's quorum address, and a node id that
 *     controller.quorum.voters lists heartbeats from that voter's configured address ("host");
 *   - its counter is above the last one taken from the same node id and incarnation, and its
 *     incarnation is not one that node has left behind ("replay").
 * Any holder of a certificate the truststore accepts may speak for any broker-only node id, as
 * any principal allowed CLUSTER_ACTION may send Kafka's BrokerHeartbeat for any broker id.
 *
 * Envelope (big-endian):
 *
 *     0  4  magic "STHB"
 *     4  1  version (1)
 *     5  1  zero
 *     6  2  c, the number of certificates (1..ST_HB_SEC_MAX_CERTS; the first is the signer's)
 *     8  8  send time, wall clock ms
 *    16  8  counter (1, 2, ... per sender process)
 *    24  4  p, the heartbeat's length (1..ST_HB_MAX_DATAGRAM)
 *    28  p  the heartbeat (heartbeat.h's JSON)
 *     then c times: 2 bytes length l, l bytes DER certificate
 *     then 2 bytes length s, s bytes signature: SHA-256 with RSA PKCS#1 v1.5 or ECDSA (DER),
 *          or Ed25519/Ed448 (no digest), over every byte before the length s
 *
 * A 2048-bit RSA leaf signed by one CA makes a datagram of about 1.2 KiB (a bare heartbeat is
 * about 150 bytes); signing costs about 1 ms of the quorum thread per heartbeat.
 *
 * Threads: an st_hb_sec_t on the quorum's loop thread; the counters from any thread.
 */
#ifndef ST_CLUSTER_HB_SEC_H
#define ST_CLUSTER_HB_SEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/config.h"
#include "cluster/heartbeat.h"

#define ST_HB_SEC_MAX_CERTS 8
#define ST_HB_SEC_SKEW_MS   30000

typedef enum st_hb_refusal {
    ST_HB_TAKEN = 0,
    ST_HB_UNSIGNED,
    ST_HB_MALFORMED,
    ST_HB_CERTIFICATE,
    ST_HB_SIGNATURE,
    ST_HB_STALE,
    ST_HB_HOST,
    ST_HB_REPLAY,
    ST_HB_NREFUSALS
} st_hb_refusal_t;

/* "unsigned", "malformed", "certificate", ... (the metric's reason label). */
const char *st_hb_refusal_name(st_hb_refusal_t r);

typedef struct st_hb_sec st_hb_sec_t;
struct ssl_ctx_st;

/* A signer and checker for this node: ctx is the controller listener's context (keystore and
 * truststore; a reference is taken), verify_host as the listener's endpoint identification
 * says, cfg's voters the addresses voter ids must heartbeat from (cfg outlives it). NULL with
 * one line in err when ctx has no certificate or key, or out of memory. */
st_hb_sec_t *st_hb_sec_new(struct ssl_ctx_st *ctx, bool verify_host, const st_config_t *cfg,
                           char *err, size_t errlen);
void st_hb_sec_free(st_hb_sec_t *s);
/* Signs with ctx's key and certificate, and checks against ctx's truststore, from now on (the
 * listener's files reloaded); what was taken from whom is kept, so no replay slips through.
 * 0, or nonzero with one line in err (s unchanged). */
int st_hb_sec_rekey(st_hb_sec_t *s, struct ssl_ctx_st *ctx, char *err, size_t errlen);
/* The envelope of heartbeat json[0..len), sent at wall_ms: 0 and *out (malloc'ed, *outlen
 * bytes), -ENOMEM, or -EIO when signing fails. */
int st_hb_sec_seal(st_hb_sec_t *s, const char *json, size_t len, int64_t wall_ms, char **out,
                   size_t *outlen);
/* Checks the datagram buf[0..len) (untrusted) received at wall_ms, as the header says: on
 * ST_HB_TAKEN *hb holds the heartbeat (st_hb_fini it); otherwise the reason, counted, and *hb
 * needs no fini. */
st_hb_refusal_t st_hb_sec_open(st_hb_sec_t *s, const void *buf, size_t len, int64_t wall_ms,
                               st_hb_t *hb);
/* Process-wide counts since start: heartbeats refused for reason r, heartbeats signed. */
uint64_t st_hb_sec_refused(st_hb_refusal_t r);
uint64_t st_hb_sec_signed(void);

#endif
