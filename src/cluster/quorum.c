/*
 * quorum.c — the metadata quorum's thread: libraft on a libuv loop, the state machine, the
 * active controller's duties (registrations, fencing, changes) and the heartbeats.
 *
 * Everything here runs on the quorum thread except st_quorum_submit / _hint_create / _info /
 * _stop, which only touch the mutex-guarded inbox and the atomics.
 *
 * The controller makes one change at a time: a change (a shard's request, a registration, a
 * fencing) is proposed against the applied state, appended, and the next waits for its apply
 * callback. So each change is decided on a state that includes every earlier one, and a
 * decision never races another. Metadata changes are rare; this costs nothing measurable.
 */
#include "cluster/quorum.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <openssl/ssl.h>
#include <raft.h>
#include <raft/uv.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "cluster/hb_sec.h"
#include "cluster/heartbeat.h"
#include "cluster/local_transport.h"
#include "cluster/tls_transport.h"
#include "cluster/records.h"
#include "io/uvthread.h"
#include "net/tls.h"

#define Q_TICK_MS    50
#define Q_MAX_HINTS  64
#define Q_MAX_ALTERS 1024

typedef struct q_apply {
    struct raft_apply req;
    st_quorum_t *q;
    st_quorum_req_t *user; /* NULL for the controller's own changes */
} q_apply_t;

struct st_quorum {
    const st_config_t *cfg;
    st_quorum_hooks_t hooks;
    char cluster_id[64];
    int kafka_port;
    uint64_t incarnation;
    char dir[4096];
    char self_addr[300];
    int lock_fd;
    /* the thread, its loop and the inbox's lock (io/uvthread.h) */
    st_uvthread_t th;
    uv_loop_t *loop;
    bool th_up, init_ran; /* th started (stop and fini it); q_init ran (err says why) */
    char *start_err;
    size_t start_errlen;
    uv_timer_t tick;
    uv_timer_t stop_timer; /* bounds the hand-over of leadership at stop */
    uv_check_t check;
    st_hb_link_t hb; /* the heartbeats' UDP socket */
    struct raft_uv_transport transport;
    struct raft_io io;
    struct raft_fsm fsm;
    struct raft raft;
    bool transport_up, io_up, raft_inited, raft_up, closing;
    bool tls; /* the transport is tls_transport.h's (the controller listener is SSL/SASL_SSL) */
    st_hb_sec_t *hbsec;       /* with tls: heartbeats are signed and checked (hb_sec.h) */
    st_tls_server_t *tls_src; /* with tls: the context, reloaded when its files change */
    uint64_t tls_reloads;     /* st_tls_server_reloads(tls_src) as last applied */
    struct raft_transfer transfer;
    struct raft_barrier barrier;
    struct raft_change change;
    bool change_busy;
    int32_t change_id;
    /* the state machine */
    st_md_t *state;
    bool dirty;
    int32_t published_leader;
    int64_t last_hb_sent;
    /* the inbox (th's lock) */
    st_quorum_req_t *inbox, *inbox_tail;
    /* the topics to create and ISR changes (alter: [Q_MAX_ALTERS]) this node's next heartbeat
     * asks for; the wake-up swaps it with spare, which the loop sends */
    st_hb_t *out, *spare;
    /* the active controller */
    bool leader, ready, busy;
    int64_t leader_since, last_rebalance, last_tick;
    st_quorum_req_t *queue, *queue_tail;
    char pending_hints[Q_MAX_HINTS][256];
    int npending_hints;
    st_rec_alter_t *pending_alters; /* [Q_MAX_ALTERS]: the controller's, to decide */
    int npending_alters;
    st_hb_peer_t *peers;
    int npeers;
    /* info */
    _Atomic int32_t info_leader;
    _Atomic uint64_t info_term;
    _Atomic int64_t info_applied, info_snapshot;
    _Atomic int64_t alive_ms, frozen_ms;
};

static int32_t self_id(const st_quorum_t *q)
{
    return (int32_t)q->cfg->node_id;
}

/* Raft ids are node ids, except in a local quorum (no voters configured), whose one voter is
 * raft id 1 whatever node.id is (raft wants ids above 0; a single broker's node.id is 0 by
 * default). */
static raft_id raft_of(const st_quorum_t *q, int32_t node)
{
    return q->cfg->quorum_local ? 1 : (raft_id)node;
}

static int32_t node_of(const st_quorum_t *q, raft_id id)
{
    if (!id)
        return -1;
    return q->cfg->quorum_local ? self_id(q) : (int32_t)id;
}

/* The active controller's node id, or -1. */
static int32_t leader_node(st_quorum_t *q)
{
    raft_id leader = 0;
    const char *addr;
    raft_leader(&q->raft, &leader, &addr);
    return node_of(q, leader);
}

/* ---- the state machine ---- */

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    st_quorum_t *q = fsm->data;
    int64_t index = (int64_t)raft_last_applied(&q->raft) + 1;
    st_rec_apply(q->state, buf->base, buf->len, index);
    q->state->version = index;
    q->dirty = true;
    *result = NULL;
    return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    st_quorum_t *q = fsm->data;
    struct raft_buffer *b = malloc(sizeof *b);
    if (!b)
        return RAFT_NOMEM;
    b->base = st_rec_snapshot(q->state, &b->len, NULL);
    if (!b->base) {
        free(b);
        return RAFT_NOMEM;
    }
    *bufs = b;
    *n = 1;
    atomic_store(&q->info_snapshot, (int64_t)raft_last_applied(&q->raft));
    ST_INFO("metadata: snapshot at log index %lld (%zu bytes)",
            (long long)raft_last_applied(&q->raft), b->len);
    return 0;
}

static int fsm_snapshot_finalize(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    (void)fsm;
    for (unsigned i = 0; i < *n; i++)
        free((*bufs)[i].base);
    free(*bufs);
    *bufs = NULL;
    *n = 0;
    return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    st_quorum_t *q = fsm->data;
    int rc = st_rec_restore(q->state, buf->base, buf->len);
    if (rc) {
        ST_ERROR("metadata: the snapshot cannot be read: %s", st_strerror(rc));
        return RAFT_CORRUPT;
    }
    raft_free(buf->base);
    q->dirty = true;
    ST_INFO("metadata: restored a snapshot (%d brokers, %d topics)", q->state->nbrokers,
            q->state->ntopics);
    return 0;
}

/* ---- the controller's changes ---- */

static void controller_step(st_quorum_t *q);
static void hb_send(st_quorum_t *q, st_hb_t *lists);

static void finish_user(st_quorum_t *q, st_quorum_req_t *req, int status)
{
    (void)q;
    req->done(req, status);
}

static void apply_done(struct raft_apply *req, int status, void *result)
{
    (void)result;
    q_apply_t *a = req->data;
    st_quorum_t *q = a->q;
    q->busy = false;
    if (status)
        ST_WARN("metadata: a change did not commit here: %s", raft_strerror(status));
    if (a->user) {
        a->user->index = status ? 0 : (int64_t)req->index;
        finish_user(q, a->user,
                    status == 0                     ? 0
                    : status == RAFT_LEADERSHIPLOST ? ST_E_AGAIN
                    : status == RAFT_NOTLEADER      ? ST_E_NOT_LEADER
                                                    : -EIO);
    }
    free(a);
    if (!q->closing)
        controller_step(q);
}

/* Appends `records` as one entry. Returns 0 (the change is in flight) or an error. */
static int propose(st_quorum_t *q, json_t *records, st_quorum_req_t *user)
{
    q_apply_t *a = calloc(1, sizeof *a);
    struct raft_buffer buf;
    buf.base = a ? st_rec_entry(records, &buf.len, raft_malloc) : NULL;
    if (!buf.base) {
        free(a);
        return -ENOMEM;
    }
    a->q = q;
    a->user = user;
    a->req.data = a;
    int rc = raft_apply(&q->raft, &a->req, &buf, 1, apply_done);
    if (rc) {
        /* raft took nothing (RAFT_NOTLEADER, RAFT_NOSPACE) */
        raft_free(buf.base);
        free(a);
        ST_WARN("metadata: cannot append: %s", raft_strerror(rc));
        return rc == RAFT_NOTLEADER ? ST_E_NOT_LEADER : rc == RAFT_NOSPACE ? -ENOSPC : -EIO;
    }
    q->busy = true;
    return 0;
}

/* Records a broker's new registration, fencing or unfencing, with the leaderships that follow. */
static int change_broker(st_quorum_t *q, const st_md_broker_t *b)
{
    json_t *records = json_array();
    /* the controller's unclean.leader.election.enable: dynamic (its own, else the cluster
     * default, records "broker_config") over the static one */
    const char *dyn = st_md_broker_config(q->state, (int32_t)q->cfg->node_id,
                                          "unclean.leader.election.enable", NULL);
    bool unclean = dyn ? strcasecmp(dyn, "true") == 0 : q->cfg->unclean_leader_election_enable;
    int rc = st_rec_broker_change(q->state, b, unclean, records);
    if (!rc)
        rc = propose(q, records, NULL);
    json_decref(records);
    return rc;
}

/* One registration, fencing or unfencing, if any is due. Returns true when one started. */
static bool broker_duty(st_quorum_t *q)
{
    int64_t now = st_mono_ms();
    int64_t timeout = q->cfg->broker_session_timeout_ms;
    /* how far this node applied the log needs no heartbeat to be known */
    st_hb_peer_t *me = st_hb_peer_get(&q->peers, &q->npeers, self_id(q), false);
    if (me)
        me->applied = (int64_t)raft_last_applied(&q->raft);
    /* registrations (new incarnation, listener or rack) */
    for (int i = 0; i < q->npeers; i++) {
        st_hb_peer_t *p = &q->peers[i];
        const st_md_broker_t *b = st_md_broker(q->state, p->id);
        if (!p->incarnation || !st_hb_peer_differs(p, b))
            continue;
        /* A new incarnation registers fenced, whatever it has applied (Kafka's rule): the
         * fencing moves what it led to a new leader epoch and takes it out of every ISR, so a
         * restarted leader never acknowledges at its old epoch records only it has; it is
         * unfenced below once it applied its own registration. A change of address or rack of
         * the same incarnation keeps its fencing. */
        bool same = b && b->incarnation == p->incarnation;
        st_md_broker_t nb = {.node_id = p->id,
                             .host = p->host,
                             .port = p->port,
                             .rack = p->rack[0] ? p->rack : NULL,
                             .endpoints = p->endpoints[0] ? p->endpoints : NULL,
                             .fenced = same ? b->fenced : true,
                             .incarnation = p->incarnation};
        p->catch_up = 0;
        ST_INFO("metadata: broker %d registers (%s:%d%s%s)%s", p->id, p->host, p->port,
                nb.rack ? ", rack " : "", nb.rack ? nb.rack : "",
                nb.fenced ? ", fenced until it catches up" : "");
        return change_broker(q, &nb) == 0;
    }
    for (int i = 0; i < q->state->nbrokers; i++) {
        const st_md_broker_t *b = &q->state->brokers[i];
        st_hb_peer_t *p = st_hb_peer_get(&q->peers, &q->npeers, b->node_id, true);
        if (!p)
            return false;
        if (!p->last_ms)
            p->last_ms = q->leader_since; /* a grace period from the start of leadership */
        bool silent = now - p->last_ms > timeout;
        st_md_broker_t nb = *b;
        if (!b->fenced && silent) {
            nb.fenced = true;
            p->catch_up = 0;
            ST_WARN("metadata: broker %d silent for %lld ms: fenced, its leaderships move",
                    b->node_id, (long long)(now - p->last_ms));
            return change_broker(q, &nb) == 0;
        }
        if (b->fenced && !silent && p->incarnation == b->incarnation) {
            if (!p->catch_up)
                p->catch_up = (int64_t)raft_last_applied(&q->raft);
            /* caught up: it applied its own registration (b->epoch, the entry's index) and
             * what was committed when its return was seen */
            if (p->applied < p->catch_up || p->applied < b->epoch)
                continue;
            nb.fenced = false;
            ST_INFO("metadata: broker %d is back and caught up (log index %lld): unfenced",
                    b->node_id, (long long)p->applied);
            return change_broker(q, &nb) == 0;
        }
    }
    return false;
}

/* Adds an ISR change to decide (the newest for a partition replaces an older one). */
/* The ISR changes partitions' leaders asked for, decided together: one record per topic. */
static bool alter_duty(st_quorum_t *q)
{
    if (q->npending_alters == 0)
        return false;
    json_t *records = json_array();
    st_md_topic_t **changed = calloc((size_t)q->npending_alters, sizeof *changed);
    int nchanged = 0, applied = 0;
    for (int i = 0; changed && i < q->npending_alters; i++) {
        const st_rec_alter_t *a = &q->pending_alters[i];
        const st_md_topic_t *t = st_md_find_id(q->state, a->topic_id);
        if (!t)
            continue;
        st_md_topic_t *c = NULL;
        for (int k = 0; k < nchanged; k++)
            if (memcmp(changed[k]->id, a->topic_id, 16) == 0)
                c = changed[k];
        if (!c && (c = st_md_topic_clone(t)) != NULL)
            changed[nchanged++] = c;
        int rc = c ? st_rec_alter_isr(q->state, c, a) : ST_E_INVALID;
        if (rc == 0) {
            applied++;
            ST_INFO("metadata: %s-%d ISR now has %d member(s) (asked by its leader %d)", c->name,
                    a->partition, a->nisr, a->leader);
        } else if (rc == ST_E_AGAIN) {
            applied++; /* the refusal, as a new partition epoch */
            ST_INFO("metadata: %s-%d ISR change from its leader %d refused (a member it adds is "
                    "not live)",
                    c->name, a->partition, a->leader);
        } else if (c && a->partition >= 0 && a->partition < t->npartitions) {
            const st_md_partition_t *mp = &t->partitions[a->partition];
            ST_DEBUG("metadata: %s-%d ISR change from %d refused (leader %d epoch %d/%d, "
                     "partition epoch %d/%d)",
                     t->name, a->partition, a->leader, mp->leader, a->leader_epoch,
                     mp->leader_epoch, a->partition_epoch, mp->partition_epoch);
        }
    }
    q->npending_alters = 0;
    for (int k = 0; k < nchanged; k++) {
        if (applied)
            json_array_append_new(records, st_rec_topic(changed[k]));
        st_md_topic_free(changed[k]);
    }
    free(changed);
    bool started = applied > 0 && propose(q, records, NULL) == 0;
    json_decref(records);
    return started;
}

/* auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds, leadership
 * goes back to preferred replicas of brokers leading too few of theirs. */
static bool rebalance_duty(st_quorum_t *q)
{
    const st_config_t *c = q->cfg;
    int64_t now = st_mono_ms();
    if (!c->auto_leader_rebalance_enable ||
        now - q->last_rebalance < c->leader_imbalance_check_interval_seconds * 1000)
        return false;
    q->last_rebalance = now;
    json_t *records = json_array();
    int n = st_rec_rebalance(q->state, (int)c->leader_imbalance_per_broker_percentage, records);
    bool started = n > 0 && propose(q, records, NULL) == 0;
    if (started)
        ST_INFO("metadata: leadership goes back to preferred replicas (%d topic(s))", n);
    json_decref(records);
    return started;
}

static void change_done(struct raft_change *req, int status)
{
    st_quorum_t *q = req->data;
    q->change_busy = false;
    if (status) {
        ST_WARN("metadata: membership change of node %d failed: %s", q->change_id,
                raft_strerror(status));
        return;
    }
    /* a node added as a spare becomes a standby next */
    controller_step(q);
}

/* Adds a broker-only node that heartbeats to the Raft configuration as a standby. */
static void membership_duty(st_quorum_t *q)
{
    if (q->change_busy)
        return;
    for (int i = 0; i < q->npeers; i++) {
        st_hb_peer_t *p = &q->peers[i];
        if (p->voter || !p->raft_addr[0] || !p->incarnation)
            continue;
        const struct raft_server *srv = NULL;
        for (unsigned s = 0; s < q->raft.configuration.n; s++)
            if (q->raft.configuration.servers[s].id == (raft_id)p->id)
                srv = &q->raft.configuration.servers[s];
        if (srv && srv->role == RAFT_STANDBY)
            continue;
        q->change.data = q;
        q->change_id = p->id;
        int rc = srv ? raft_assign(&q->raft, &q->change, (raft_id)p->id, RAFT_STANDBY, change_done)
                     : raft_add(&q->raft, &q->change, (raft_id)p->id, p->raft_addr, change_done);
        if (rc == 0) {
            q->change_busy = true;
            ST_INFO("metadata: node %d (%s) %s", p->id, p->raft_addr,
                    srv ? "becomes a standby" : "joins the quorum's configuration");
        }
        return;
    }
}

/* The hook creates a topic asked for by a broker that is not the controller. */
static void run_hints(st_quorum_t *q)
{
    for (int i = 0; i < q->npending_hints; i++)
        if (q->hooks.hint_create)
            q->hooks.hint_create(q->hooks.arg, q->pending_hints[i]);
    q->npending_hints = 0;
}

/* The active controller's next change, if it is free. */
static void controller_step(st_quorum_t *q)
{
    if (!q->leader || !q->ready || q->busy || q->closing)
        return;
    if (!q->state->cluster_id[0]) {
        json_t *records = json_array();
        json_array_append_new(records, st_rec_cluster(q->cluster_id));
        json_t *seed = q->hooks.seed ? q->hooks.seed(q->hooks.arg) : NULL;
        if (seed)
            json_array_extend(records, seed);
        json_decref(seed);
        propose(q, records, NULL);
        json_decref(records);
        return;
    }
    if (broker_duty(q) || alter_duty(q) || rebalance_duty(q))
        return;
    membership_duty(q);
    run_hints(q);
    while (q->queue && !q->busy) {
        st_quorum_req_t *req = q->queue;
        q->queue = req->next;
        if (!q->queue)
            q->queue_tail = NULL;
        json_t *records = json_array();
        int rc = req->propose(req, q->state, records);
        if (rc == 0 && json_array_size(records) > 0)
            rc = propose(q, records, req);
        else if (rc == 0)
            req->index = 0;
        json_decref(records);
        if (rc || !q->busy)
            finish_user(q, req, rc);
    }
}

static void fail_queue(st_quorum_t *q, int status)
{
    while (q->queue) {
        st_quorum_req_t *req = q->queue;
        q->queue = req->next;
        finish_user(q, req, status);
    }
    q->queue_tail = NULL;
}

static void barrier_done(struct raft_barrier *req, int status)
{
    st_quorum_t *q = req->data;
    if (status || !q->leader)
        return;
    q->ready = true;
    ST_INFO("metadata: node %d is the active controller (term %llu, log index %llu)", self_id(q),
            (unsigned long long)raft_current_term(&q->raft),
            (unsigned long long)raft_last_applied(&q->raft));
    controller_step(q);
    hb_send(q, NULL); /* this node registers now, not at its next heartbeat */
}

/* Leadership came or went. */
static void leadership(st_quorum_t *q, bool leader)
{
    q->leader = leader;
    q->ready = false;
    if (leader) {
        q->leader_since = q->last_rebalance = st_mono_ms();
        for (int i = 0; i < q->npeers; i++)
            q->peers[i].last_ms = 0; /* everyone gets a full session from now */
        q->barrier.data = q;
        if (raft_barrier(&q->raft, &q->barrier, barrier_done))
            q->leader = false;
        return;
    }
    fail_queue(q, ST_E_NOT_LEADER);
}

/* ---- heartbeats ---- */

/* A heartbeat reached this node (it matters only while it is the active controller): its
 * datagram, or this node's own text when it is the controller (trusted: not enveloped). */
static void hb_take(st_quorum_t *q, const void *data, size_t len, bool own)
{
    st_hb_t *hb = malloc(sizeof *hb);
    bool ok = hb && (q->hbsec && !own
                         ? st_hb_sec_open(q->hbsec, data, len, st_wall_ms(), hb) == ST_HB_TAKEN
                         : st_hb_decode(data, len, hb) == 0);
    if (!ok) {
        free(hb);
        return;
    }
    st_hb_peer_t *p = st_hb_peer_get(&q->peers, &q->npeers, hb->id, true);
    if (p)
        st_hb_peer_take(p, hb, st_mono_ms());
    for (int i = 0; i < hb->ncreate && q->npending_hints < Q_MAX_HINTS; i++)
        snprintf(q->pending_hints[q->npending_hints++], 256, "%s", hb->create[i]);
    for (int i = 0; i < hb->nalter; i++)
        st_hb_alter_put(q->pending_alters, &q->npending_alters, Q_MAX_ALTERS, &hb->alter[i]);
    st_hb_fini(hb);
    free(hb);
    controller_step(q);
}

static void hb_recv(void *arg, const void *data, size_t len)
{
    st_quorum_t *q = arg;
    if (q->leader)
        hb_take(q, data, len, false);
}

/* Sends this node's heartbeat to the active controller (or takes it directly when it is),
 * with the topics to create and the ISR changes to ask for, if any. */
static void hb_send(st_quorum_t *q, st_hb_t *lists)
{
    int32_t leader = leader_node(q);
    /* A broker-only node learns the leader only once the leader has added it, which it does
     * when it hears from it: until then it tells every voter (the others ignore it). */
    if (leader < 0 && q->cfg->role_controller)
        return;
    st_hb_t *hb = lists ? lists : calloc(1, sizeof *hb);
    if (!hb)
        return;
    st_hb_self(hb, q->cfg, q->incarnation, q->kafka_port, q->self_addr,
               (int64_t)raft_last_applied(&q->raft));
    char *text = NULL;
    size_t len = 0;
    int rc = st_hb_encode(hb, &text, &len);
    if (!lists)
        free(hb);
    if (rc) {
        ST_WARN("metadata: cannot encode this node's heartbeat");
        return;
    }
    if (leader == self_id(q)) {
        if (q->leader)
            hb_take(q, text, len, true);
    } else if (q->hbsec) {
        char *env = NULL;
        size_t envlen = 0;
        if (st_hb_sec_seal(q->hbsec, text, len, st_wall_ms(), &env, &envlen) == 0)
            st_hb_link_send(&q->hb, leader, env, envlen);
        else
            ST_WARN("metadata: cannot sign this node's heartbeat");
        free(env);
    } else {
        st_hb_link_send(&q->hb, leader, text, len);
    }
    free(text);
    q->last_hb_sent = st_mono_ms();
}

/* ---- the loop ---- */

static void publish(st_quorum_t *q)
{
    int32_t lid = leader_node(q);
    atomic_store(&q->info_leader, lid);
    atomic_store(&q->info_term, (uint64_t)raft_current_term(&q->raft));
    atomic_store(&q->info_applied, (int64_t)raft_last_applied(&q->raft));
    if (!q->dirty && lid == q->published_leader)
        return;
    st_md_t *md = st_md_clone(q->state);
    if (!md)
        return;
    md->version = (int64_t)raft_last_applied(&q->raft);
    md->controller_id = lid;
    md->self_incarnation = q->incarnation;
    q->dirty = false;
    q->published_leader = lid;
    q->hooks.publish(q->hooks.arg, md);
}

static void on_check(uv_check_t *h)
{
    st_quorum_t *q = h->data;
    if (!q->raft_up || q->closing)
        return;
    bool leader = raft_state(&q->raft) == RAFT_LEADER;
    if (leader != q->leader)
        leadership(q, leader);
    publish(q);
}

static void tls_maybe_reload(st_quorum_t *q);

static void on_tick(uv_timer_t *t)
{
    st_quorum_t *q = t->data;
    if (!q->raft_up || q->closing)
        return;
    /* This thread was frozen (SIGSTOP, a stalled machine): the brokers' silence meanwhile is
     * its own deafness, so nobody is fenced for it; a full session counts from now. */
    int64_t now = st_mono_ms();
    if (q->last_tick && now - q->last_tick > q->cfg->broker_session_timeout_ms) {
        atomic_store(&q->frozen_ms, now);
        for (int i = 0; i < q->npeers; i++)
            q->peers[i].last_ms = now;
    }
    q->last_tick = now;
    atomic_store(&q->alive_ms, now);
    tls_maybe_reload(q);
    if (st_mono_ms() - q->last_hb_sent >= q->cfg->broker_heartbeat_interval_ms)
        hb_send(q, NULL);
    controller_step(q);
}

static void close_handles(st_quorum_t *q);

static void transport_fini(st_quorum_t *q)
{
    if (q->cfg->quorum_local)
        st_local_transport_fini(&q->transport);
    else if (q->tls)
        st_tls_transport_fini(&q->transport);
    else
        raft_uv_tcp_close(&q->transport);
    st_hb_sec_free(q->hbsec);
    q->hbsec = NULL;
    st_tls_server_destroy(q->tls_src);
    q->tls_src = NULL;
}

/* The controller listener's certificate files changed (checked every ssl.reload.check.ms):
 * new quorum connections, either side, and the heartbeats' signatures use the new ones. */
static void tls_maybe_reload(st_quorum_t *q)
{
    if (!q->tls_src || !q->hbsec)
        return;
    struct ssl_ctx_st *ctx = st_tls_server_ctx(q->tls_src);
    uint64_t n = st_tls_server_reloads(q->tls_src);
    if (n == q->tls_reloads) {
        SSL_CTX_free(ctx);
        return;
    }
    q->tls_reloads = n;
    char e[256];
    if (st_hb_sec_rekey(q->hbsec, ctx, e, sizeof e))
        ST_WARN("controller listener: reloaded certificates not used for heartbeats: %s", e);
    st_tls_transport_set_ctx(&q->transport, ctx);
}

static void raft_closed(struct raft *r)
{
    st_quorum_t *q = r->data;
    raft_uv_close(&q->io);
    transport_fini(q);
    close_handles(q);
}

static void begin_close(st_quorum_t *q)
{
    if (q->closing)
        return;
    q->closing = true;
    uv_timer_stop(&q->stop_timer);
    fail_queue(q, ST_E_NOT_LEADER);
    if (q->raft_inited) {
        raft_close(&q->raft, raft_closed);
        return;
    }
    if (q->io_up)
        raft_uv_close(&q->io);
    if (q->transport_up)
        transport_fini(q);
    close_handles(q);
}

static void transfer_done(struct raft_transfer *req)
{
    begin_close(req->data);
}

/* The hand-over did not finish in time (no voter to take it): close anyway. */
static void stop_timeout(uv_timer_t *t)
{
    begin_close(t->data);
}

/* The inbox: changes to queue, hints and ISR changes to send, or the stop. */
static void on_wake(void *arg, bool stop)
{
    st_quorum_t *q = arg;
    st_uvthread_lock(&q->th);
    st_quorum_req_t *in = q->inbox;
    q->inbox = q->inbox_tail = NULL;
    st_hb_t *lists = q->out;
    q->out = q->spare;
    q->spare = lists;
    st_uvthread_unlock(&q->th);
    while (in) {
        st_quorum_req_t *req = in;
        in = in->next;
        req->next = NULL;
        if (!q->leader || q->closing) {
            finish_user(q, req, ST_E_NOT_LEADER);
            continue;
        }
        if (q->queue_tail)
            q->queue_tail->next = req;
        else
            q->queue = req;
        q->queue_tail = req;
    }
    if ((lists->ncreate || lists->nalter) && q->raft_up && !q->closing)
        hb_send(q, lists);
    lists->ncreate = lists->nalter = 0;
    if (stop && !q->closing) {
        /* a leader hands over first, so the cluster does not wait out an election */
        if (q->leader && q->cfg->nvoters > 1) {
            q->transfer.data = q;
            if (raft_transfer(&q->raft, &q->transfer, 0, transfer_done) == 0) {
                uv_timer_start(&q->stop_timer, stop_timeout,
                               (uint64_t)q->cfg->controller_quorum_election_timeout_ms * 2, 0);
                return;
            }
        }
        begin_close(q);
        return;
    }
    controller_step(q);
}

static void close_handles(st_quorum_t *q)
{
    uv_close((uv_handle_t *)&q->tick, NULL);
    uv_close((uv_handle_t *)&q->stop_timer, NULL);
    uv_close((uv_handle_t *)&q->check, NULL);
    st_hb_link_close(&q->hb);
}

/* ---- start ---- */

/* Writes the one-line start-up error "<what>: <why>" and returns rc. */
static int q_fail(st_quorum_t *q, int rc, const char *what, const char *why)
{
    snprintf(q->start_err, q->start_errlen, "%s: %s", what, why);
    return rc ? rc : ST_E_CONFIG;
}

/* The controller listener's TLS (tls_transport.h): its ssl.* settings, a keystore and a
 * truststore both required (each side checks the other), the host name checked as Kafka's
 * ssl.endpoint.identification.algorithm says. */
static int tls_transport_start(st_quorum_t *q)
{
    const st_config_t *c = q->cfg;
    const char *l = c->controller_listener_names;
    st_config_lookup_t lk = {.cfg = c, .listener = l};
    st_tls_settings_t s = {0};
    st_tls_settings_get(&s, st_config_lookup, &lk);
    char what[300], e[512];
    snprintf(what, sizeof what, "controller listener %s (%s)", l,
             st_sec_protocol_name(c->controller_protocol));
    if (!*s.keystore_location && !*s.keystore_certificate_chain)
        return q_fail(q, ST_E_CONFIG, what,
                      "needs ssl.keystore.location (or ssl.keystore.certificate.chain): each "
                      "controller presents its certificate to the others");
    if (!*s.truststore_location && !*s.truststore_certificates)
        return q_fail(q, ST_E_CONFIG, what,
                      "needs ssl.truststore.location (or ssl.truststore.certificates): the "
                      "other controllers' certificates are checked against it");
    const char *alg = st_config_listener_get(c, l, "ssl.endpoint.identification.algorithm");
    if (*alg && strcasecmp(alg, "https") != 0)
        return q_fail(q, ST_E_CONFIG, what,
                      "ssl.endpoint.identification.algorithm: expected https or empty");
    char name[64];
    snprintf(name, sizeof name, "controller listener %.40s", l);
    if (st_tls_client_create(&s, name, &q->tls_src, e, sizeof e))
        return q_fail(q, ST_E_CONFIG, what, e);
    struct ssl_ctx_st *ctx = st_tls_server_ctx(q->tls_src);
    q->tls_reloads = st_tls_server_reloads(q->tls_src);
    bool verify_host = strcasecmp(alg, "https") == 0;
    q->hbsec = st_hb_sec_new(ctx, verify_host, c, e, sizeof e);
    if (!q->hbsec) {
        SSL_CTX_free(ctx);
        st_tls_server_destroy(q->tls_src);
        q->tls_src = NULL;
        return q_fail(q, ST_E_CONFIG, what, e);
    }
    char bind[300];
    snprintf(bind, sizeof bind, "%s:%d", c->controller_host, c->controller_port);
    int rc = st_tls_transport_init(&q->transport, q->loop, bind, ctx, verify_host,
                                   s.handshake_timeout_ms);
    if (rc) {
        SSL_CTX_free(ctx);
        st_hb_sec_free(q->hbsec);
        q->hbsec = NULL;
        st_tls_server_destroy(q->tls_src);
        q->tls_src = NULL;
        return q_fail(q, -EIO, "cannot start the quorum's transport", raft_strerror(rc));
    }
    q->tls = true;
    q->transport_up = true;
    ST_INFO("controller listener %s: %s, mutual TLS%s", l,
            st_sec_protocol_name(c->controller_protocol),
            verify_host ? "" : " (no host name check)");
    return 0;
}

static int start_raft(st_quorum_t *q)
{
    const st_config_t *c = q->cfg;
    q->transport.version = 1;
    q->transport.data = NULL;
    /* a local quorum's one voter talks to nobody: no socket (local_transport.h) */
    int rc;
    if (c->quorum_local) {
        rc = st_local_transport_init(&q->transport, q->loop);
    } else if (st_sec_protocol_tls(c->controller_protocol)) {
        rc = tls_transport_start(q);
        if (rc)
            return rc;
    } else {
        rc = raft_uv_tcp_init(&q->transport, q->loop);
    }
    if (rc)
        return q_fail(q, -EIO, "cannot start the quorum's transport", raft_strerror(rc));
    q->transport_up = true;
    if (!c->quorum_local && !q->tls) {
        char bind[300];
        snprintf(bind, sizeof bind, "%s:%d", c->controller_host, c->controller_port);
        raft_uv_tcp_set_bind_address(&q->transport, bind);
    }
    rc = raft_uv_init(&q->io, q->loop, q->dir, &q->transport);
    if (rc)
        return q_fail(q, -EIO, "cannot open the metadata log", q->io.errmsg);
    q->io_up = true;
    q->fsm = (struct raft_fsm){.version = 2,
                               .data = q,
                               .apply = fsm_apply,
                               .snapshot = fsm_snapshot,
                               .restore = fsm_restore,
                               .snapshot_finalize = fsm_snapshot_finalize};
    rc = raft_init(&q->raft, &q->io, &q->fsm, raft_of(q, self_id(q)), q->self_addr);
    if (rc)
        return q_fail(q, -EIO, "cannot open the metadata log", raft_errmsg(&q->raft));
    q->raft_inited = true;
    q->raft.data = q;
    unsigned election = (unsigned)c->controller_quorum_election_timeout_ms;
    raft_set_election_timeout(&q->raft, election);
    raft_set_heartbeat_timeout(&q->raft, election / 10 > 10 ? election / 10 : 10);
    raft_set_pre_vote(&q->raft, true);
    raft_set_snapshot_threshold(&q->raft, (unsigned)c->metadata_log_snapshot_entries);
    raft_set_snapshot_trailing(&q->raft, (unsigned)c->metadata_log_snapshot_entries * 2);
    raft_uv_set_auto_recovery(&q->io, false);
    if (c->role_controller) {
        struct raft_configuration conf;
        raft_configuration_init(&conf);
        for (int i = 0; i < c->nvoters && rc == 0; i++) {
            char a[300];
            snprintf(a, sizeof a, "%s:%d", c->voters[i].host, c->voters[i].port);
            rc = raft_configuration_add(&conf, raft_of(q, c->voters[i].id), a, RAFT_VOTER);
        }
        if (rc == 0)
            rc = raft_bootstrap(&q->raft, &conf);
        raft_configuration_close(&conf);
        if (rc && rc != RAFT_CANTBOOTSTRAP)
            return q_fail(q, -EIO, "cannot bootstrap the metadata quorum", raft_strerror(rc));
    }
    rc = raft_start(&q->raft);
    if (rc) {
        const char *why = raft_errmsg(&q->raft);
        char line[600];
        snprintf(line, sizeof line, "%s (%s:%d)", why && *why ? why : raft_strerror(rc),
                 c->controller_host, c->controller_port);
        return q_fail(q, -EIO, "cannot start the metadata quorum", line);
    }
    q->raft_up = true;
    return 0;
}

/* The quorum thread, before st_quorum_start returns (io/uvthread.h). */
static int q_init(void *arg, uv_loop_t *loop)
{
    st_quorum_t *q = arg;
    q->init_ran = true;
    q->loop = loop;
    uv_timer_init(loop, &q->tick);
    uv_timer_init(loop, &q->stop_timer);
    uv_check_init(loop, &q->check);
    q->tick.data = q->stop_timer.data = q->check.data = q;
    int rc = st_hb_link_open(&q->hb, loop, q->cfg, hb_recv, q, q->start_err, q->start_errlen);
    if (!rc)
        rc = start_raft(q);
    if (rc) {
        begin_close(q); /* undo what started: the handles close, then the loop ends */
        return rc;
    }
    uv_timer_start(&q->tick, on_tick, Q_TICK_MS, Q_TICK_MS);
    uv_check_start(&q->check, on_check);
    return 0;
}

static void q_started(void *arg)
{
    st_quorum_t *q = arg;
    ST_INFO("metadata: node %d %s, quorum %s, log %s; waiting for quorum", self_id(q),
            q->cfg->role_controller ? "votes" : "follows without a vote",
            q->cfg->quorum_local ? "local (this node alone)" : q->cfg->controller_quorum_voters,
            q->dir);
    publish(q);
}

static const st_uvthread_ops_t q_ops = {.init = q_init, .started = q_started, .wake = on_wake};

static int open_dir(st_quorum_t *q, const st_config_t *cfg, char *err, size_t errlen)
{
    snprintf(q->dir, sizeof q->dir, "%s/" ST_QUORUM_TOPIC "-0", cfg->log_dirs);
    if (mkdir(q->dir, 0755) && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", q->dir, strerror(errno));
        return -errno;
    }
    char lock[4200];
    snprintf(lock, sizeof lock, "%s/.lock", q->dir);
    q->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (q->lock_fd < 0 || flock(q->lock_fd, LOCK_EX | LOCK_NB)) {
        snprintf(err, errlen, "%s is in use by another process", q->dir);
        return ST_E_CONFIG;
    }
    return 0;
}

int st_quorum_start(st_quorum_t **out, const st_config_t *cfg, const char *cluster_id,
                    int kafka_port, const st_quorum_hooks_t *hooks, char *err, size_t errlen)
{
    st_quorum_t *q = calloc(1, sizeof *q);
    if (!q)
        return -ENOMEM;
    q->cfg = cfg;
    q->hooks = *hooks;
    q->kafka_port = kafka_port;
    q->lock_fd = -1;
    q->published_leader = -2;
    snprintf(q->cluster_id, sizeof q->cluster_id, "%s", cluster_id);
    snprintf(q->self_addr, sizeof q->self_addr, "%s:%d", cfg->controller_host,
             cfg->controller_port);
    for (int i = 0; i < cfg->nvoters; i++)
        if (cfg->voters[i].id == cfg->node_id)
            snprintf(q->self_addr, sizeof q->self_addr, "%s:%d", cfg->voters[i].host,
                     cfg->voters[i].port);
    if (getrandom(&q->incarnation, sizeof q->incarnation, 0) != sizeof q->incarnation ||
        !q->incarnation)
        q->incarnation = (uint64_t)st_wall_ms() | 1;
    atomic_init(&q->info_leader, -1);
    atomic_init(&q->alive_ms, st_mono_ms());
    q->state = st_md_new("", -1);
    q->out = calloc(1, sizeof *q->out);
    q->spare = calloc(1, sizeof *q->spare);
    if (q->out && q->spare) {
        q->out->alter = calloc(Q_MAX_ALTERS, sizeof *q->out->alter);
        q->spare->alter = calloc(Q_MAX_ALTERS, sizeof *q->spare->alter);
    }
    q->pending_alters = calloc(Q_MAX_ALTERS, sizeof *q->pending_alters);
    int rc = q->state && q->out && q->out->alter && q->spare && q->spare->alter && q->pending_alters
                 ? open_dir(q, cfg, err, errlen)
                 : -ENOMEM;
    if (rc) {
        st_quorum_destroy(q);
        return rc;
    }
    q->start_err = err;
    q->start_errlen = errlen;
    rc = st_uvthread_start(&q->th, &q_ops, q);
    q->th_up = true;
    if (rc) {
        if (!q->init_ran)
            snprintf(err, errlen, "cannot start the quorum thread: %s", uv_strerror(rc));
        st_quorum_destroy(q);
        return rc;
    }
    *out = q;
    return 0;
}

void st_quorum_submit(st_quorum_t *q, st_quorum_req_t *req)
{
    req->next = NULL;
    req->index = 0;
    if (!st_uvthread_post_begin(&q->th)) {
        req->done(req, ST_E_NOT_LEADER); /* stopped: nobody will run it */
        return;
    }
    if (q->inbox_tail)
        q->inbox_tail->next = req;
    else
        q->inbox = req;
    q->inbox_tail = req;
    st_uvthread_post_end(&q->th);
}

void st_quorum_hint_create(st_quorum_t *q, const char *topic)
{
    if (!st_uvthread_post_begin(&q->th))
        return;
    st_hb_add_create(q->out, topic);
    st_uvthread_post_end(&q->th);
}

void st_quorum_alter_isr(st_quorum_t *q, const st_rec_alter_t *alter)
{
    if (!st_uvthread_post_begin(&q->th))
        return;
    st_hb_alter_put(q->out->alter, &q->out->nalter, Q_MAX_ALTERS, alter);
    st_uvthread_post_end(&q->th);
}

int64_t st_quorum_alive_ms(st_quorum_t *q)
{
    return atomic_load(&q->alive_ms);
}

int64_t st_quorum_frozen_ms(st_quorum_t *q)
{
    return atomic_load(&q->frozen_ms);
}

void st_quorum_info(st_quorum_t *q, st_quorum_info_t *out)
{
    out->leader = atomic_load(&q->info_leader);
    out->term = atomic_load(&q->info_term);
    out->applied = atomic_load(&q->info_applied);
    out->snapshot = atomic_load(&q->info_snapshot);
    out->voter = q->cfg->role_controller;
    out->local = q->cfg->quorum_local;
}

bool st_quorum_alone(const st_quorum_t *q)
{
    return q->cfg->nvoters == 1 && q->cfg->voters[0].id == self_id(q) && q->cfg->role_controller;
}

void st_quorum_stop(st_quorum_t *q)
{
    if (!q || !q->th_up)
        return;
    st_uvthread_stop(&q->th);
}

void st_quorum_destroy(st_quorum_t *q)
{
    if (!q)
        return;
    st_quorum_stop(q);
    if (q->lock_fd >= 0)
        close(q->lock_fd);
    st_md_unref(q->state);
    for (int i = 0; i < 2; i++) {
        st_hb_t *hb = i ? q->spare : q->out;
        if (hb)
            free(hb->alter);
        free(hb);
    }
    free(q->pending_alters);
    free(q->peers);
    if (q->th_up)
        st_uvthread_fini(&q->th);
    free(q);
}
