/*
 * controller.c — topic administration through the metadata quorum, and the hand-over of each
 * state the quorum publishes to every shard.
 *
 * An op: shard 0 submits it to the quorum (cluster/quorum.h) -> the active controller decides
 * it against its state and writes its records (ctl_propose) -> committed and applied, the op
 * waits on shard 0 until every shard here has adopted a state at least that new (st_ctl_adopt:
 * each opens, reconfigures or deletes its partitions) -> it goes back to its shard. A single
 * broker is its quorum's only voter: the same path, decided and committed alone.
 */
#include "kafka/controller.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "broker/adopt.h"
#include "broker/request.h"
#include "broker/runtime.h"
#include "cluster/records.h"
#include "partition/partition.h"
#include "kafka/coordsvc.h"
#include "kafka/handlers.h"
#include "kafka/leader.h"
#include "kafka/replica_link.h"
#include "kafka/broker_config.h"
#include "kafka/topic_config.h"
#include "proto/kerr.h"
#include "storage/fs.h"

/* ---- applying a snapshot on each shard ---- */

/* The controller's ops between the quorum and shard 0 (b->ctl, created on shard 0 at its first
 * use, freed by st_ctl_fini). */
struct st_ctl {
    pthread_mutex_t mu;
    st_ctl_op_t *answers; /* finished by the quorum thread, not yet taken by shard 0 (mu) */
    _Atomic int answers_ready;
    /* shard 0 only: */
    st_ctl_op_t *waiting; /* committed, waiting for every shard here to adopt their change */
    int64_t applied;      /* the version every shard here has adopted */
    /* what the latest adoption could not open, with the state it adopted, for the ops whose
     * answer comes back after their change was adopted */
    st_adopt_fails_t last_fails;
    st_md_t *last_fails_md;
};

/* Shard 0: the broker's controller state, created at the first use. */
static struct st_ctl *ctl_of(st_broker_t *b)
{
    if (!b->ctl) {
        b->ctl = calloc(1, sizeof *b->ctl);
        ST_ASSERT(b->ctl != NULL);
        pthread_mutex_init(&b->ctl->mu, NULL);
    }
    return b->ctl;
}

void st_ctl_fini(st_broker_t *b)
{
    struct st_ctl *c = b->ctl;
    if (!c)
        return;
    st_md_unref(c->last_fails_md);
    pthread_mutex_destroy(&c->mu);
    free(c);
    b->ctl = NULL;
}

/* ---- each shard's part of an adoption (broker/adopt.h) ---- */

void st_ctl_md_adopted(st_kshard_t *s)
{
    st_kmetadata_ready(s, false);
    st_kshard_unstall(s);
}

void st_ctl_partition_gone(st_kshard_t *s, st_part_t *p)
{
    st_krepl_unfollow(s, p);
    st_coordsvc_leadership(s, st_part_topic(p), st_part_index(p), false, -1);
}

/* What follows from a partition's role: fetching from the leader, and for a coordinator's
 * topic (coordsvc.h) the coordinator. */
void st_ctl_partition_role(st_kshard_t *s, st_part_t *part, const st_md_t *md,
                           const st_md_topic_t *t, int32_t p, bool leader)
{
    st_krepl_follow(s, part, md);
    if (t->internal)
        st_coordsvc_leadership(s, t->name, p, leader, t->partitions[p].leader_epoch);
}

/* ---- ops go to the active controller through the quorum ---- */

/* The topic config rules (kafka/topic_config.h) for st_ctl_decide. */
static int rules_config_find(void *arg, const char *key, bool *list, const char **fixed_default)
{
    (void)arg;
    const st_tcfg_desc_t *d = st_tcfg_find(key, strlen(key));
    if (!d)
        return -1;
    *list = d->type == ST_TCFG_LIST;
    *fixed_default = d->fixed_default;
    return 0;
}

static int rules_config_validate(void *arg, const char *key, const char *value, char *err, size_t n)
{
    (void)arg;
    const st_tcfg_desc_t *d = st_tcfg_find(key, strlen(key));
    return d && st_tcfg_validate(d, value, err, n) == 0 ? 0 : -1;
}

/* A coordinator's topic (coordsvc.h) is internal, with its service's partitions and factor. */
static bool rules_internal(void *arg, const char *name, int32_t *npartitions, int *rf)
{
    const st_config_t *cfg = arg;
    const st_coordsvc_t *svc = st_coordsvc_find(name, strlen(name));
    if (!svc)
        return false;
    *npartitions = svc->partitions(cfg);
    *rf = svc->replication_factor(cfg);
    return true;
}

/* Quorum thread, active controller: decides the op against the state and writes its
 * records (cluster/ops.h). */
static int ctl_propose(st_quorum_req_t *req, const st_md_t *state, json_t *records)
{
    st_ctl_op_t *op = req->arg;
    const st_config_t *cfg = op->b->cfg;
    st_ctl_rules_t rules = {.num_partitions = (int32_t)cfg->num_partitions,
                            .default_rf = (int)cfg->default_replication_factor,
                            .internal = rules_internal,
                            .config_find = rules_config_find,
                            .config_validate = rules_config_validate,
                            .broker_config_check = st_bcfg_check,
                            .arg = (void *)cfg};
    return st_ctl_decide(&rules, state, op->kind, op->validate_only, op->items, op->n, records);
}

/* Quorum thread: the op's change committed (or not); shard 0 answers it. */
static void ctl_quorum_done(st_quorum_req_t *req, int status)
{
    st_ctl_op_t *op = req->arg;
    st_broker_t *b = op->b;
    if (status == ST_E_NOT_LEADER && op->hint)
        for (int i = 0; i < op->n; i++)
            if (op->items[i].name)
                st_quorum_hint_create(b->quorum, op->items[i].name);
    op->qstatus = status;
    struct st_ctl *c = op->ctl;
    pthread_mutex_lock(&c->mu);
    op->queue_next = c->answers;
    c->answers = op;
    pthread_mutex_unlock(&c->mu);
    atomic_store(&c->answers_ready, 1);
    st_loop_wake(b->shards[0]->loop);
}

static void ctl_submit_quorum(st_broker_t *b, st_ctl_op_t *op)
{
    op->b = b;
    op->ctl = ctl_of(b);
    op->qreq.propose = ctl_propose;
    op->qreq.done = ctl_quorum_done;
    op->qreq.arg = op;
    st_quorum_submit(b->quorum, &op->qreq);
}

/* The op failed as a whole: items not already failed say why. */
static void ctl_quorum_fail(st_broker_t *b, st_ctl_op_t *op)
{
    st_quorum_info_t qi;
    st_quorum_info(b->quorum, &qi);
    for (int i = 0; i < op->n; i++) {
        st_ctl_item_t *it = &op->items[i];
        if (it->error)
            continue;
        if (op->qstatus == ST_E_NOT_LEADER)
            st_ctl_item_fail(it, ST_KERR_NOT_CONTROLLER,
                             "This is not the active controller (node %d is)", (int)qi.leader);
        else if (op->qstatus == ST_E_AGAIN)
            st_ctl_item_fail(it, ST_KERR_REQUEST_TIMED_OUT,
                             "The controller lost its leadership with the change in flight%s", "");
        else
            st_ctl_item_fail(it, ST_KERR_UNKNOWN_SERVER_ERROR, "The metadata log failed: %s",
                             st_strerror(op->qstatus));
    }
}

/* Reports the partitions that could not be opened to the op's items naming their topic. */
static void ctl_report(st_ctl_op_t *op, const st_adopt_fails_t *fails, const st_md_t *md)
{
    /* A partition that could not be opened is offline: the topic exists, but the client is
     * told (KAFKA_STORAGE_ERROR) instead of a success it cannot use. */
    for (int f = 0; md && op->kind != ST_CTL_SCRAM && f < fails->n; f++) {
        const st_md_topic_t *t = st_md_find_id(md, fails->f[f].id);
        for (int i = 0; t && i < op->n; i++) {
            st_ctl_item_t *it = &op->items[i];
            const char *name = it->name ? it->name : it->out_name;
            if (it->error || !name || strcmp(name, t->name) != 0)
                continue;
            st_ctl_item_fail(it, ST_KERR_KAFKA_STORAGE_ERROR,
                             "partition %d of %s could not be opened (%s); it is offline",
                             (int)fails->f[f].partition, t->name, st_strerror(fails->f[f].err));
        }
    }
}

/* Answers the waiting ops whose change every shard here has applied. */
static void ctl_release(st_kshard_t *s)
{
    struct st_ctl *c = ctl_of(s->b);
    for (st_ctl_op_t **pp = &c->waiting; *pp;) {
        st_ctl_op_t *op = *pp;
        if (op->qreq.index > c->applied) {
            pp = &op->queue_next;
            continue;
        }
        *pp = op->queue_next;
        ctl_report(op, &c->last_fails, c->last_fails_md);
        st_xcall_return(s, &op->x);
    }
}

void st_ctl_quorum_answers(st_kshard_t *s)
{
    st_broker_t *b = s->b;
    struct st_ctl *c = ctl_of(b);
    if (atomic_load(&b->quorum_stopped) && c->waiting) {
        /* committed, but no state will show them applied here any more */
        c->applied = INT64_MAX;
        ctl_release(s);
    }
    if (!atomic_exchange(&c->answers_ready, 0))
        return;
    pthread_mutex_lock(&c->mu);
    st_ctl_op_t *ops = c->answers;
    c->answers = NULL;
    pthread_mutex_unlock(&c->mu);
    while (ops) {
        st_ctl_op_t *op = ops;
        ops = op->queue_next;
        if (op->qstatus) {
            ctl_quorum_fail(b, op);
            st_xcall_return(s, &op->x);
            continue;
        }
        op->queue_next = c->waiting;
        c->waiting = op;
    }
    ctl_release(s);
}

/* Shard 0: every shard adopted md; the ops waiting for it answer. */
static void ctl_adopted(st_kshard_t *s, void *arg, const st_md_t *md, const st_adopt_fails_t *fails)
{
    (void)arg;
    struct st_ctl *c = ctl_of(s->b);
    c->last_fails = *fails;
    st_md_unref(c->last_fails_md);
    c->last_fails_md = st_md_ref((st_md_t *)md);
    if (md->version > c->applied)
        c->applied = md->version;
    ctl_release(s);
}

void st_ctl_adopt(st_kshard_t *s, st_md_t *md)
{
    st_broker_adopt(s, md, ctl_adopted, NULL);
}

static void hint_done(st_quorum_req_t *req, int status)
{
    st_ctl_op_t *op = req->arg;
    if (status == 0 && op->items[0].error == 0)
        ST_INFO("created topic %s (asked for by a broker)", op->items[0].name);
    free((char *)op->items[0].name);
    free(op->items);
    free(op);
}

void st_ctl_hint_create(st_broker_t *b, const char *name)
{
    st_ctl_op_t *op = calloc(1, sizeof *op);
    st_ctl_item_t *it = calloc(1, sizeof *it);
    char *n = strdup(name);
    if (!op || !it || !n) {
        free(op);
        free(it);
        free(n);
        return;
    }
    op->kind = ST_CTL_CREATE;
    op->n = 1;
    op->items = it;
    op->b = b;
    it->name = n;
    it->count = -1;
    it->rf = -1;
    it->assigned = -1;
    const st_coordsvc_t *svc = st_coordsvc_find(name, strlen(name));
    if (svc)
        st_coordsvc_topic_item(svc, b->cfg, it); /* its configs are read only */
    op->qreq.propose = ctl_propose;
    op->qreq.done = hint_done;
    op->qreq.arg = op;
    st_quorum_submit(b->quorum, &op->qreq);
}

/* Each shard's tick, in a cluster: the ISR changes its led partitions need go to the
 * controller (AlterPartition). */
typedef struct {
    st_kshard_t *s;
    int64_t now;
} isr_tick_t;

static void isr_tick_one(void *arg, st_part_t *p)
{
    isr_tick_t *w = arg;
    const st_part_role_t *role = st_part_role(p);
    st_rec_alter_t a = {.partition = st_part_index(p)};
    if (!st_part_isr_change_due(p, w->now, w->s->b->cfg->replica_lag_time_max_ms, 2000, a.isr,
                                &a.nisr))
        return;
    memcpy(a.topic_id, st_part_topic_id(p), 16);
    a.leader = role->self;
    a.leader_epoch = role->leader_epoch;
    a.partition_epoch = role->partition_epoch;
    ST_DEBUG("%s-%d: asking the controller for an ISR of %d (was %d)", st_part_topic(p),
             a.partition, a.nisr, role->nisr);
    st_quorum_alter_isr(w->s->b->quorum, &a);
}

void st_ctl_tick(st_kshard_t *s)
{
    st_kmetadata_ready(s, false);
    if (!s->b->quorum || atomic_load(&s->b->quorum_stopped))
        return;
    isr_tick_t w = {s, st_mono_ms()};
    st_parts_each(&s->parts, isr_tick_one, &w);
}

/* On shard 0: the op goes to the active controller, which decides ops one at a time in the
 * order they came (cluster/quorum.h). */
static void ctl_run(st_kshard_t *s, st_xcall_t *x)
{
    ctl_submit_quorum(s->b, (st_ctl_op_t *)x);
}

static void ctl_done(st_kshard_t *s, st_xcall_t *x)
{
    st_ctl_op_t *op = (st_ctl_op_t *)x;
    op->cb(s, op);
}

void st_ctl_submit(st_kshard_t *s, st_ctl_op_t *op)
{
    st_xcall(s, 0, &op->x, ctl_run, ctl_done);
}
