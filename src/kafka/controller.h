/*
 * controller.h — topic administration, through the metadata quorum (cluster/quorum.h).
 *
 * Every change to the metadata goes through here: shard 0 hands the op to the quorum, whose
 * active controller validates it against its state and writes the records of the change; once
 * they are committed and applied, the op waits until every shard here has adopted a state that
 * holds them (st_ctl_adopt: each shard swaps its snapshot, opens the partitions newly assigned
 * to it, deletes those removed, applies config changes), then returns to the shard that asked.
 * So when a CreateTopics answer leaves, every shard already serves the topic. A single broker
 * is its quorum's only voter: the same path.
 *
 * An op's life (the function behind each step; the op's memory is its submitter's throughout):
 *
 *   1. submitted     any shard: st_ctl_submit -> an xcall to shard 0 (broker/xcall.h)
 *   2. queued        shard 0: ctl_run -> st_quorum_submit (the quorum's inbox)
 *   3. decided       quorum thread, the active controller, with every earlier op applied:
 *                    ctl_propose -> st_ctl_decide (cluster/ops.h): each item answered, the
 *                    change's records appended (none: nothing to do)
 *   4. committed     quorum thread: ctl_quorum_done(status) -> the answers list (mutex), shard
 *                    0 woken. status != 0 (not the controller, leadership lost, the log's
 *                    error): every item not already failed says so (ctl_quorum_fail), go to 6
 *   5. waiting       shard 0: st_ctl_quorum_answers -> the waiting list, until the version
 *                    every shard here adopted (st_ctl_adopt -> broker/adopt.h, ctl_adopted)
 *                    reaches the op's log index; a partition that could not be opened is
 *                    reported to the items naming its topic (KAFKA_STORAGE_ERROR)
 *   6. answered      shard 0: st_xcall_return -> op->cb on the submitting shard
 *
 * Invariants: (a) ops are decided one at a time, in the order they reach the active
 * controller, each on the state its predecessors left; (b) states reach each shard in the
 * order they were published (one ring per shard pair keeps order), so an op answered at 6 is
 * served by every shard of this broker; (c) once the quorum has stopped, waiting ops are
 * answered at once (no state will come any more).
 *
 * Threads: st_ctl_submit on any shard; the rest runs on shard 0 and the shards it updates.
 */
#ifndef ST_KAFKA_CONTROLLER_H
#define ST_KAFKA_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster/metadata.h"
#include "cluster/ops.h"
#include "storage/fs.h"
#include "broker/fanout.h"
#include "broker/xcall.h"
#include "cluster/quorum.h"
#include "partition/partition.h"

typedef struct st_ctl_op st_ctl_op_t;
struct st_ctl_op {
    st_xcall_t x;
    int kind;
    bool validate_only;
    /* in a cluster, a create asked for implicitly (auto-creation, the offsets topic): when this
     * broker is not the active controller it asks the controller to create it (a hint) */
    bool hint;
    int n;
    st_ctl_item_t *items;
    void (*cb)(st_kshard_t *s, st_ctl_op_t *op); /* on the submitting shard */
    void *arg;
    struct st_ctl_op *queue_next; /* shard 0: the answered or waiting ops */
    /* the op as a change for the active controller */
    st_quorum_req_t qreq;
    struct st_broker *b;
    struct st_ctl *ctl;
    int qstatus;
};

/* Main thread, once the shards stopped: frees b->ctl (the ops' state on shard 0: those the quorum
 * answered, those waiting for every shard to adopt their change), created at the first use. */
void st_ctl_fini(struct st_broker *b);

/* Submits op (memory owned by the caller until cb runs). */
void st_ctl_submit(st_kshard_t *s, st_ctl_op_t *op);

/* Each shard's part of an adoption (broker/adopt.h hooks): the Metadata waiting for this
 * broker to catch up, a partition gone (no longer followed, its coordinator unloaded), a
 * partition's role set (followed from its leader, its coordinator loaded when it leads). */
void st_ctl_md_adopted(st_kshard_t *s);
void st_ctl_partition_gone(st_kshard_t *s, st_part_t *p);
void st_ctl_partition_role(st_kshard_t *s, st_part_t *part, const st_md_t *md,
                           const st_md_topic_t *t, int32_t p, bool leader);
/* Shard 0 adopts a state the quorum published (one reference, now the
 * controller's): every shard applies it (opens the partitions it now hosts, deletes those it
 * no longer does), then the ops waiting for it answer. */
void st_ctl_adopt(st_kshard_t *s0, st_md_t *md);
/* Shard 0 answers the ops the quorum has finished (woken by the quorum thread). */
void st_ctl_quorum_answers(st_kshard_t *s0);
/* Each shard's tick: asks the controller for the ISR changes its led partitions need. */
void st_ctl_tick(st_kshard_t *s);
/* Quorum thread of the active controller: creates topic `name` with the defaults
 * (a hint from a broker that is not the controller; cluster/quorum.h). */
void st_ctl_hint_create(struct st_broker *b, const char *name);

#endif
