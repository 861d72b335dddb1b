/*
 * quorum.h — the metadata quorum: the cluster metadata as a log replicated by Raft (libraft
 * 0.22, its libuv disk I/O and TCP transport), on a thread of its own.
 *
 * Every node runs one. Voters (process.roles=broker,controller) vote; brokers with
 * process.roles=broker are standbys: the active controller adds them when they first
 * heartbeat, and they apply the log without voting. The log's state machine is a metadata
 * snapshot (cluster/metadata.h) that entries change (cluster/records.h); it is snapshotted every
 * metadata.log.snapshot.entries entries, and a node that restarts or falls behind catches up
 * from snapshot plus log.
 *
 * The active controller (the Raft leader) also:
 *   - takes heartbeats (one UDP datagram every broker.heartbeat.interval.ms, from each node's
 *     quorum thread to the leader's CONTROLLER host:port; the same datagram carries the
 *     registration: incarnation, Kafka listener, rack, and how far the node has applied the
 *     log), registers brokers, fences a broker silent for broker.session.timeout.ms and moves
 *     its leaderships (cluster/records.h: st_rec_fence), unfences it once it heartbeats again
 *     and has caught up with the log;
 *   - runs the changes the shards ask for (st_quorum_submit) one at a time against its state.
 *
 * After each batch of applied entries, and when the active controller changes, the state is
 * published (hooks.publish) as a new immutable snapshot whose version is the last applied log
 * index and whose controller_id is the current leader (-1 while there is none).
 *
 * Threads: st_quorum_start/stop/destroy on the main thread; st_quorum_submit and
 * st_quorum_info from any thread; every hook and req callback on the quorum thread.
 */
#ifndef ST_CLUSTER_QUORUM_H
#define ST_CLUSTER_QUORUM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/config.h"
#include "cluster/metadata.h"
#include "cluster/records.h"

/* The metadata log's directory is <log.dirs>/__cluster_metadata-0 (Kafka's name). */
#define ST_QUORUM_TOPIC "__cluster_metadata"

typedef struct st_quorum st_quorum_t;

typedef struct st_quorum_hooks {
    /* Quorum thread: a new metadata state; the receiver owns the one reference. */
    void (*publish)(void *arg, st_md_t *md);
    /* Quorum thread, on the active controller: a broker asked for topic `name` to be created
     * with the defaults (st_quorum_hint_create there); submit the creation, if wanted. */
    void (*hint_create)(void *arg, const char *name);
    /* Quorum thread, the first active controller of a new log: records to write in the log's
     * first entry, after the cluster's id (a JSON array the quorum then owns), or NULL. The
     * upgrade of a single broker's strata-metadata.json (cluster/legacy.h). NULL: none. */
    json_t *(*seed)(void *arg);
    void *arg;
} st_quorum_hooks_t;

/* A change asked of the active controller. The submitter owns the memory until done runs. */
typedef struct st_quorum_req st_quorum_req_t;
struct st_quorum_req {
    /* Quorum thread, on the active controller, with the state every earlier change is applied
     * to: appends the change's records (cluster/records.h) to the JSON array `records`.
     * Returns 0 (an empty array: nothing to do), or an error (nothing appended). */
    int (*propose)(st_quorum_req_t *req, const st_md_t *state, json_t *records);
    /* Quorum thread: the outcome. 0: committed, and applied here at `index` (0 when there was
     * nothing to do); ST_E_NOT_LEADER: this node is not the active controller, nothing done;
     * ST_E_AGAIN: leadership was lost with the change in flight (it may yet commit); otherwise
     * what propose returned, or the log's error. */
    void (*done)(st_quorum_req_t *req, int status);
    void *arg;
    int64_t index;
    /* private */
    st_quorum_req_t *next;
};

/* Opens <log.dirs>/__cluster_metadata-0/, bootstraps the voters' configuration on a first
 * start, replays snapshot and log, and starts the quorum thread. cluster_id is this node's
 * (meta.properties); the first active controller records its own as the cluster's.
 * kafka_port is the port the Kafka listener is bound to. Returns 0 or an error with one line
 * in err. */
int st_quorum_start(st_quorum_t **out, const st_config_t *cfg, const char *cluster_id,
                    int kafka_port, const st_quorum_hooks_t *hooks, char *err, size_t errlen);
/* Any thread: queues a change for the active controller. */
void st_quorum_submit(st_quorum_t *q, st_quorum_req_t *req);
/* Any thread: asks the active controller to create a topic with the default settings
 * (auto.create.topics.enable on a broker that is not the controller). Best effort: the client
 * retries its Metadata request, which shows the topic once it exists. */
void st_quorum_hint_create(st_quorum_t *q, const char *topic);

/* Any thread, a partition's leader: asks the active controller to change the partition's ISR
 * (cluster/records.h st_rec_alter_t). Best effort: the leader sees the outcome in the next
 * metadata state and asks again (at most every few seconds) if it still should. */
void st_quorum_alter_isr(st_quorum_t *q, const st_rec_alter_t *alter);

typedef struct st_quorum_info {
    int32_t leader; /* the active controller, -1 while none */
    uint64_t term;
    int64_t applied;  /* last applied log index */
    int64_t snapshot; /* log index of the last snapshot taken or installed */
    bool voter;
    bool local; /* no voters configured: this node alone, nothing on the network */
} st_quorum_info_t;
/* Any thread: when the quorum thread last ran its tick (monotonic ms): a whole process frozen
 * (SIGSTOP) stops it too, a busy shard does not. */
int64_t st_quorum_alive_ms(st_quorum_t *q);
/* Any thread: when the quorum thread last found itself frozen for a broker session (0: never). */
int64_t st_quorum_frozen_ms(st_quorum_t *q);

/* Any thread: where the quorum stands. */
void st_quorum_info(st_quorum_t *q, st_quorum_info_t *out);
/* Any thread: whether this node is the quorum's only voter. Its log then is the whole metadata
 * once st_quorum_start returned (raft_start applied it), and it commits alone. */
bool st_quorum_alone(const st_quorum_t *q);

/* Stops the quorum thread (a leader hands leadership to another voter first) and joins it. */
void st_quorum_stop(st_quorum_t *q);
void st_quorum_destroy(st_quorum_t *q);

#endif
