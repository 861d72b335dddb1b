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
#include "broker/request.h"
#include "cluster/records.h"
#include "partition/partition.h"
#include "kafka/group_route.h"
#include "kafka/handlers.h"
#include "kafka/leader.h"
#include "kafka/replica_link.h"
#include "kafka/topic_config.h"
#include "proto/kerr.h"
#include "storage/fs.h"

/* ---- applying a snapshot on each shard ---- */

#define ST_CTL_FAILS 8

/* Partitions a shard could not open: reported back to the items naming their topic. */
typedef struct ctl_fails {
    int n;
    struct {
        uint8_t id[16];
        int32_t partition;
        int err;
    } f[ST_CTL_FAILS];
} ctl_fails_t;

typedef struct st_ctl_apply {
    st_fanout_leg_t leg;
    st_md_t *md;
    ctl_fails_t fails; /* this shard's */
} ctl_apply_t;

/* The controller's ops between the quorum and shard 0 (b->ctl, created on shard 0 at its first
 * use, freed by st_ctl_fini). */
struct st_ctl {
    pthread_mutex_t mu;
    st_ctl_op_t *answers; /* finished by the quorum thread, not yet taken by shard 0 (mu) */
    _Atomic int answers_ready;
    /* shard 0 only: */
    st_ctl_op_t *waiting; /* committed, waiting for every shard here to adopt their change */
    int64_t applied;      /* the version every shard here has adopted */
    st_md_t *md;          /* the latest state adopted */
    /* what the latest adoption could not open, with the state it adopted, for the ops whose
     * answer comes back after their change was adopted */
    ctl_fails_t last_fails;
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
    st_md_unref(c->md);
    st_md_unref(c->last_fails_md);
    pthread_mutex_destroy(&c->mu);
    free(c);
    b->ctl = NULL;
}

static bool configs_equal(const st_md_topic_t *a, const st_md_topic_t *b)
{
    if (a->nconfigs != b->nconfigs)
        return false;
    for (int i = 0; i < a->nconfigs; i++)
        if (strcmp(a->configs[i].key, b->configs[i].key) ||
            strcmp(a->configs[i].value, b->configs[i].value))
            return false;
    return true;
}

typedef struct {
    st_kshard_t *s;
    const st_md_t *md;
} sweep_t;

/* Whether this broker keeps a copy of partition p on shard s. */
static bool hosts(const st_kshard_t *s, const st_md_partition_t *p)
{
    return p->shard == s->id && st_md_is_replica(p, (int32_t)s->b->cfg->node_id);
}

static void sweep_one(void *arg, st_part_t *p)
{
    sweep_t *w = arg;
    const st_md_topic_t *t = st_md_find_id(w->md, p->topic_id);
    if (t && p->index < t->npartitions && hosts(w->s, &t->partitions[p->index]))
        return;
    st_krepl_unfollow(w->s, p);
    if (strcmp(p->topic, ST_OFFSETS_TOPIC) == 0)
        st_kgroup_leadership(w->s, p->index, false);
    st_parts_delete(&w->s->parts, p);
}

/* The partition's role from the snapshot (replication, partition.h), then what
 * follows from it: fetching from the leader, and for __consumer_offsets the coordinator. */
static void set_role(st_kshard_t *s, st_part_t *part, const st_md_t *md, const st_md_topic_t *t,
                     int32_t p)
{
    const st_config_t *cfg = s->b->cfg;
    const st_md_partition_t *mp = &t->partitions[p];
    st_part_role_t role = {.self = (int32_t)cfg->node_id,
                           .leader_id = mp->leader,
                           .leader_epoch = mp->leader_epoch,
                           .partition_epoch = mp->partition_epoch,
                           .min_isr = (int32_t)cfg->min_insync_replicas,
                           .nreplicas = mp->nreplicas,
                           .nisr = mp->nisr};
    role.leader = mp->leader == role.self;
    const char *mi = st_md_topic_config(t, "min.insync.replicas");
    if (mi)
        role.min_isr = (int32_t)strtol(mi, NULL, 10);
    memcpy(role.replicas, mp->replicas, sizeof role.replicas);
    memcpy(role.isr, mp->isr, sizeof role.isr);
    for (int i = 0; i < mp->nreplicas && i < ST_PART_MAX_REPLICAS; i++)
        role.live[i] = st_md_broker_live(md, mp->replicas[i]);
    st_part_set_role(part, &role);
    st_krepl_follow(s, part, md);
    if (t->internal && strcmp(t->name, ST_OFFSETS_TOPIC) == 0)
        st_kgroup_leadership(s, p, role.leader);
}

static void ctl_apply_run(st_fanout_leg_t *leg)
{
    st_kshard_t *s = st_kshard_current();
    ctl_apply_t *a = leg->data;
    st_md_t *old = s->md;
    s->md = st_md_ref(a->md);
    st_kmetadata_ready(s, false);
    st_kleader_unstall(s);
    sweep_t w = {s, a->md};
    st_parts_each(&s->parts, sweep_one, &w);
    for (int i = 0; i < a->md->ntopics; i++) {
        const st_md_topic_t *t = a->md->topics[i];
        const st_md_topic_t *ot = old ? st_md_find_id(old, t->id) : NULL;
        bool reconf = ot && !configs_equal(ot, t);
        for (int32_t p = 0; p < t->npartitions; p++) {
            if (!hosts(s, &t->partitions[p]))
                continue;
            st_part_t *part = st_parts_get(&s->parts, t->id, p);
            if (!part) {
                st_part_t *np;
                st_log_config_t lc;
                st_topic_log_config(s->b->cfg, t, &lc);
                int rc = st_parts_open(&s->parts, t->name, t->id, p, &lc, &np);
                if (rc && a->fails.n < ST_CTL_FAILS) {
                    memcpy(a->fails.f[a->fails.n].id, t->id, 16);
                    a->fails.f[a->fails.n].partition = p;
                    a->fails.f[a->fails.n].err = rc;
                    a->fails.n++;
                }
            } else if (reconf) {
                st_log_config_t lc;
                st_topic_log_config(s->b->cfg, t, &lc);
                st_part_reconfigure(part, &lc);
            }
            if ((part = st_parts_get(&s->parts, t->id, p)) != NULL)
                set_role(s, part, a->md, t, p);
        }
    }
    st_md_unref(old);
}

/* ---- in a cluster: ops go to the active controller through the quorum ---- */

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

/* __consumer_offsets is internal, with offsets.topic.num.partitions partitions. */
static bool rules_internal(void *arg, const char *name, int32_t *npartitions)
{
    const st_config_t *cfg = arg;
    if (strcmp(name, ST_OFFSETS_TOPIC) != 0)
        return false;
    *npartitions = (int32_t)cfg->offsets_topic_num_partitions;
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
                            .internal_rf = (int)cfg->offsets_topic_replication_factor,
                            .internal = rules_internal,
                            .config_find = rules_config_find,
                            .config_validate = rules_config_validate,
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
static void ctl_report(st_ctl_op_t *op, const ctl_fails_t *fails, const st_md_t *md)
{
    /* A partition that could not be opened is offline: the topic exists, but the client is
     * told (KAFKA_STORAGE_ERROR) instead of a success it cannot use. */
    for (int f = 0; md && f < fails->n; f++) {
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

typedef struct ctl_adoption {
    st_fanout_t fan;
    ctl_apply_t *applies;
    int64_t version;
} ctl_adoption_t;

static void ctl_adopted(void *arg)
{
    ctl_adoption_t *ad = arg;
    st_kshard_t *s = st_kshard_current();
    struct st_ctl *c = ctl_of(s->b);
    c->last_fails.n = 0;
    for (int i = 0; i < s->b->nshards; i++) {
        const ctl_fails_t *f = &ad->applies[i].fails;
        for (int k = 0; k < f->n && c->last_fails.n < ST_CTL_FAILS; k++)
            c->last_fails.f[c->last_fails.n++] = f->f[k];
    }
    st_md_unref(c->last_fails_md);
    c->last_fails_md = st_md_ref(ad->applies[0].md);
    for (int i = 0; i < s->b->nshards; i++)
        st_md_unref(ad->applies[i].md);
    if (ad->version > c->applied)
        c->applied = ad->version;
    free(ad->applies);
    free(ad);
    ctl_release(s);
}

void st_ctl_adopt(st_kshard_t *s, st_md_t *md)
{
    st_broker_t *b = s->b;
    st_md_assign_shards(md, b->nshards);
    ctl_adoption_t *ad = calloc(1, sizeof *ad);
    ctl_apply_t *applies = calloc((size_t)b->nshards, sizeof *applies);
    ST_ASSERT(ad && applies);
    ad->applies = applies;
    ad->version = md->version;
    struct st_ctl *c = ctl_of(b);
    st_md_unref(c->md);
    c->md = md;
    st_fanout_begin(&ad->fan, b->mesh, s->id, ctl_apply_run, ctl_adopted, ad);
    for (int i = 0; i < b->nshards; i++) {
        applies[i].md = st_md_ref(md);
        applies[i].leg.data = &applies[i];
        st_fanout_send(&ad->fan, &applies[i].leg, i);
    }
    st_fanout_end(&ad->fan);
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

const st_ctl_cfg_t st_ctl_offsets_cfg[ST_CTL_OFFSETS_NCFG] = {
    {"cleanup.policy", "compact", ST_CTL_CFG_SET},
    {"retention.ms", "-1", ST_CTL_CFG_SET},
    {"segment.bytes", "104857600", ST_CTL_CFG_SET},
};

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
    if (strcmp(name, ST_OFFSETS_TOPIC) == 0) {
        it->internal = true;
        it->count = (int32_t)b->cfg->offsets_topic_num_partitions;
        it->ncfg = ST_CTL_OFFSETS_NCFG;
        it->cfg = (st_ctl_cfg_t *)st_ctl_offsets_cfg; /* read only */
    }
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
    st_rec_alter_t a = {.partition = p->index};
    if (!st_part_isr_change_due(p, w->now, w->s->b->cfg->replica_lag_time_max_ms, 2000, a.isr,
                                &a.nisr))
        return;
    memcpy(a.topic_id, p->topic_id, 16);
    a.leader = p->repl.role.self;
    a.leader_epoch = p->repl.role.leader_epoch;
    a.partition_epoch = p->repl.role.partition_epoch;
    ST_DEBUG("%s-%d: asking the controller for an ISR of %d (was %d)", p->topic, p->index, a.nisr,
             p->repl.role.nisr);
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
