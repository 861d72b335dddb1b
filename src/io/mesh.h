/*
 * mesh.h — cross-shard messaging.
 *
 * Every ordered pair of shards (from, to) has its own SPSC ring (ring.h). A shard sends by
 * pushing a message pointer into ring[from][to] and waking `to`'s loop; `to` drains its
 * incoming rings in its wake handler and runs each message's fn on its own thread. When a
 * ring is full the message waits in the sender's per-destination overflow list, flushed
 * before the sender's loop sleeps, so a send never fails and order per pair is kept.
 *
 * The message memory belongs to the sender until fn runs; fn decides what happens next
 * (typically: do the work, then send the same message back with another fn as the reply).
 *
 * Threads: st_mesh_send() only on the shard thread `from`; st_mesh_attach() on shard `id`'s
 * thread before its loop runs.
 */
#ifndef ST_IO_MESH_H
#define ST_IO_MESH_H

#include <stdint.h>

#include "io/loop.h"
#include "io/ring.h"

typedef struct st_msg st_msg_t;
typedef void (*st_msg_fn_t)(st_msg_t *m);
struct st_msg {
    st_msg_fn_t fn;
    st_msg_t *next; /* overflow list link, owned by the mesh while queued */
    int from;       /* sending shard, set by st_mesh_send */
};

typedef struct st_mesh st_mesh_t;

int st_mesh_create(st_mesh_t **out, int nshards, size_t ring_cap);
void st_mesh_destroy(st_mesh_t *m);
int st_mesh_nshards(const st_mesh_t *m);
/* Binds shard id to its loop; installs the wake handler and the overflow flush hook. */
int st_mesh_attach(st_mesh_t *m, int id, st_loop_t *loop);
/* Sends msg from shard `from` to shard `to` (to may equal from: runs on a later iteration). */
void st_mesh_send(st_mesh_t *m, int from, int to, st_msg_t *msg, st_msg_fn_t fn);
/* On shard id's thread: runs every message waiting in its incoming rings now (the last
 * step of a shutdown, once no shard sends any more). */
void st_mesh_drain_now(st_mesh_t *m, int id);
/* Counters for metrics (any thread, approximate). */
uint64_t st_mesh_sent(const st_mesh_t *m, int shard);
uint64_t st_mesh_received(const st_mesh_t *m, int shard);
size_t st_mesh_ring_occupancy(const st_mesh_t *m, int to);

#endif
