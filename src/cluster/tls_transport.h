/*
 * tls_transport.h — a libraft transport (struct raft_uv_transport, version 1) that carries the
 * metadata quorum's traffic over TLS, certificates checked both ways: what the controller
 * listener gets when listener.security.protocol.map maps it to SSL or SASL_SSL.
 *
 * raft_uv_tcp would speak plain TCP; this transport gives raft_uv the same thing, a connected
 * uv_stream_t per peer, but the bytes raft writes and reads on it are the plaintext side of a
 * TLS session:
 *
 *     raft_uv  <-- uv_pipe_t (raft's, raft_malloc'd) --+
 *                                                      | socketpair(AF_UNIX)
 *     this transport:  uv_pipe_t (ours) <-------------+
 *                        |  SSL_write / SSL_read, memory BIOs (OpenSSL never sees a socket)
 *                      uv_tcp_t  <--- ciphertext --->  the peer
 *
 * Everything runs on the quorum's libuv loop and nothing blocks it: names are resolved by
 * uv_getaddrinfo, the handshake is driven by uv reads, and writes are uv_write. Raft owns its
 * pipe once handed over (it uv_close()s and frees it); when either side closes, the other is
 * closed too, so raft sees a peer that went away and reconnects as it does over TCP.
 *
 * Wire, after the TLS handshake, the connecting side sends one preamble (all big-endian) —
 * raft_uv_tcp's own handshake carries the same two facts:
 *
 *     0  4  magic "STRQ"
 *     4  1  version (1)
 *     5  3  zero
 *     8  8  the sender's raft id
 *    16  2  n, the length of its raft address (1..ST_TT_MAX_ADDR)
 *    18  n  its raft address ("host:port")
 *
 * then raft's own messages. The accepting side passes id and address to raft's accept
 * callback once the preamble is complete; a preamble that does not parse closes the connection.
 *
 * Security: both sides present the listener's keystore certificate and require the peer's,
 * verified against the truststore (SSL_VERIFY_FAIL_IF_NO_PEER_CERT, whatever ssl.client.auth
 * says); the connecting side checks the peer's certificate names the host it dialled when
 * ssl.endpoint.identification.algorithm is https (Kafka's default). A refused certificate is
 * logged once per (subject, reason) and counted (st_tls_transport_refused); a failed connect
 * attempt reaches raft as RAFT_NOCONNECTION, which raft retries like an unreachable peer.
 *
 * Life: st_tls_transport_init (before raft_uv_init) -> raft_uv drives init, listen, connect,
 * close -> st_tls_transport_fini once raft_uv's close callback ran.
 *
 * Threads: the quorum's loop thread only; st_tls_transport_refused from any thread.
 */
#ifndef ST_CLUSTER_TLS_TRANSPORT_H
#define ST_CLUSTER_TLS_TRANSPORT_H

#include <raft.h>
#include <raft/uv.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define ST_TT_MAX_ADDR 299

struct ssl_ctx_st;

/* Fills t (version 1) with a TLS transport on loop that listens on bind ("host:port"): ctx is
 * a context from st_tls_client_ctx (net/tls.h), taken over (freed at fini); verify_host as
 * above; handshake_timeout_ms bounds a handshake plus preamble. Returns 0 or a RAFT_ error. */
int st_tls_transport_init(struct raft_uv_transport *t, uv_loop_t *loop, const char *bind,
                          struct ssl_ctx_st *ctx, bool verify_host, int64_t handshake_timeout_ms);
/* Loop thread: the context new connections use from now on, either side (certificates
 * reloaded); ctx is the transport's from now on, the one it had is freed. */
void st_tls_transport_set_ctx(struct raft_uv_transport *t, struct ssl_ctx_st *ctx);
/* Releases what init allocated; after raft_uv closed the transport. */
void st_tls_transport_fini(struct raft_uv_transport *t);

/* Any thread: connections of this process refused because a certificate failed the check
 * (either side), and handshakes completed. */
uint64_t st_tls_transport_refused(void);
uint64_t st_tls_transport_handshakes(void);

#endif
