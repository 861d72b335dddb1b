/*
 * local_transport.h — a libraft transport (struct raft_uv_transport, version 1) for a quorum
 * whose only voter is this node: it listens on nothing and never connects.
 *
 * A one-voter quorum sends no message (there is nobody to send to), so raft_uv never asks this
 * transport for a connection; if it ever did, the attempt fails at once (RAFT_NOCONNECTION)
 * and raft retries later, as it does for an unreachable peer. A single broker therefore needs
 * no controller port of its own.
 *
 * Life: st_local_transport_init (before raft_uv_init) -> raft_uv drives init, listen, close ->
 * st_local_transport_fini once raft_uv's close callback ran (frees nothing raft still holds).
 *
 * Threads: the quorum's loop thread only.
 */
#ifndef ST_CLUSTER_LOCAL_TRANSPORT_H
#define ST_CLUSTER_LOCAL_TRANSPORT_H

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

/* Fills t (version 1) with the local transport on loop. Returns 0 or a RAFT_ error. */
int st_local_transport_init(struct raft_uv_transport *t, uv_loop_t *loop);
/* Releases what init allocated; after raft_uv closed the transport. */
void st_local_transport_fini(struct raft_uv_transport *t);

#endif
