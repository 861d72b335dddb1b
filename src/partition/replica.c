/*
 * replica.c — a partition's replication state: its role, the leader's view of its followers
 * (each fetch validated against the leader's epochs first, KIP-320), the high watermark over
 * the ISR and the replicas it asked to add (KIP-497), acks=all and DeleteRecords waiting for
 * it and for the low watermark, ISR changes to ask for (KAFKA-7128's join rule), and the
 * follower's side: truncation to where the logs diverge, restart, log start and high watermark
 * from the leader (partition.h, "replication"; the rules in docs/replication.md).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "partition/partition.h"
#include "partition/part_impl.h"
#include "proto/kerr.h"

/* An answer waiting on the replicas: an acks=all append for the high watermark to pass `at`,
 * or a DeleteRecords for the low watermark to reach `at`. */
typedef struct st_repl_wait {
    int64_t at;
    int64_t deadline_ms; /* INT64_MAX: none */
    st_part_done_fn done;
    void *arg;
    struct st_repl_wait *next;
} st_repl_wait_t;

/* Answers every wait of the list *head with err (the list is emptied first: a callback may
 * queue another). */
static void waits_fail(st_repl_wait_t **head, st_repl_wait_t **tail, int err)
{
    st_repl_wait_t *w = *head;
    *head = NULL;
    if (tail)
        *tail = NULL;
    while (w) {
        st_repl_wait_t *next = w->next;
        w->done(w->arg, err);
        free(w);
        w = next;
    }
}

/* Answers, in order, the waits of *head that `due` says are due, with the error it gives. */
static void waits_answer(st_part_t *p, st_repl_wait_t **head, st_repl_wait_t **tail,
                         bool (*due)(st_part_t *p, const st_repl_wait_t *w, int64_t now, int *err),
                         int64_t now)
{
    st_repl_wait_t *prev = NULL;
    for (st_repl_wait_t *w = *head, *next; w; w = next) {
        next = w->next;
        int err = 0;
        if (!due(p, w, now, &err)) {
            prev = w;
            continue;
        }
        if (prev)
            prev->next = next;
        else
            *head = next;
        if (tail && *tail == w)
            *tail = prev;
        w->done(w->arg, err);
        free(w);
    }
}

static st_repl_wait_t *wait_new(int64_t at, int64_t timeout_ms, st_part_done_fn done, void *arg)
{
    st_repl_wait_t *w = malloc(sizeof *w);
    if (w)
        *w = (st_repl_wait_t){at, timeout_ms >= 0 ? st_mono_ms() + timeout_ms : INT64_MAX, done,
                              arg, NULL};
    return w;
}

static int replica_index(const st_part_role_t *r, int32_t id)
{
    for (int i = 0; i < r->nreplicas; i++)
        if (r->replicas[i] == id)
            return i;
    return -1;
}

static bool in_isr(const st_part_role_t *r, int32_t id)
{
    for (int i = 0; i < r->nisr; i++)
        if (r->isr[i] == id)
            return true;
    return false;
}

static void fail_deletes(st_part_t *p, int err)
{
    waits_fail(&p->repl.del_head, NULL, err);
}

int64_t st_part_low_watermark(const st_part_t *p)
{
    if (!p->log)
        return -1;
    int64_t low = st_log_start_offset(p->log);
    const st_part_repl_t *r = &p->repl;
    if (!r->on || !r->role.leader)
        return low;
    for (int i = 0; i < r->role.nreplicas; i++) {
        if (r->role.replicas[i] == r->role.self || !r->role.live[i])
            continue;
        if (r->start[i] < low)
            low = r->start[i]; /* -1: not heard from since this leadership began */
    }
    return low;
}

/* A DeleteRecords is due once the low watermark reached it, or its deadline passed. */
static bool delete_due(st_part_t *p, const st_repl_wait_t *w, int64_t now, int *err)
{
    if (w->at <= st_part_low_watermark(p))
        return true;
    *err = ST_E_TIMEOUT;
    return now >= w->deadline_ms;
}

void st_part_check_deletes(st_part_t *p)
{
    if (p->repl.del_head)
        waits_answer(p, &p->repl.del_head, NULL, delete_due, st_mono_ms());
}

int st_part_delete_wait(st_part_t *p, int64_t offset, int64_t timeout_ms, st_part_done_fn done,
                        void *arg)
{
    st_repl_wait_t *w = wait_new(offset, timeout_ms, done, arg);
    if (!w)
        return -ENOMEM;
    w->next = p->repl.del_head;
    p->repl.del_head = w;
    return 0;
}

/* Answers every waiting acks=all append with err. */
static void fail_acks(st_part_t *p, int err)
{
    waits_fail(&p->repl.acks_head, &p->repl.acks_tail, err);
}

/* The same leadership with another replica set (a reassignment): each replica's tracking
 * follows its id, not its place in the list. */
static void keep_positions(st_part_repl_t *r, const st_part_role_t *role)
{
    int64_t pos[ST_PART_MAX_REPLICAS], cu[ST_PART_MAX_REPLICAS], tg[ST_PART_MAX_REPLICAS],
        st[ST_PART_MAX_REPLICAS];
    int64_t now = st_mono_ms();
    for (int i = 0; i < role->nreplicas; i++) {
        int k = replica_index(&r->role, role->replicas[i]);
        pos[i] = k < 0 ? -1 : r->pos[k];
        cu[i] = k < 0 ? now : r->caught_up_ms[k];
        tg[i] = k < 0 ? 0 : r->target[k];
        st[i] = k < 0 ? -1 : r->start[k];
    }
    for (int i = 0; i < role->nreplicas; i++) {
        r->pos[i] = pos[i];
        r->caught_up_ms[i] = cu[i];
        r->target[i] = tg[i];
        r->start[i] = st[i];
    }
}

void st_part_set_role(st_part_t *p, const st_part_role_t *role)
{
    st_part_repl_t *r = &p->repl;
    bool was_leader = r->on && r->role.leader;
    bool fresh = role->leader && (!was_leader || r->role.leader_epoch != role->leader_epoch);
    bool new_follow =
        !role->leader && (!r->on || was_leader || r->role.leader_id != role->leader_id ||
                          r->role.leader_epoch != role->leader_epoch);
    if (!r->on) {
        /* A replicated partition's high watermark is what the ISR holds, which this broker
         * does not know at open (its log end may hold records only it has: a leader killed
         * before its followers fetched). It starts at the log start and moves only with the
         * leader's answers or, leading, with the followers' fetches (Kafka's rule). */
        if (p->log)
            p->hw = st_log_start_offset(p->log);
        r->leader_hw = p->hw;
        r->leader_start = -1;
        r->durable_start = p->log ? st_log_start_offset(p->log) : 0; /* durable at open */
        r->isr_asked_pe = -1;
        r->epoch_start = 0;
        for (int i = 0; i < ST_PART_MAX_REPLICAS; i++)
            r->pos[i] = r->start[i] = -1;
    } else if (!fresh && r->role.leader) {
        keep_positions(r, role);
    }
    /* an ISR change asked at an older partition epoch can no longer be applied (the
     * controller checks the epoch): its additions stop counting */
    if (!r->on || role->partition_epoch != r->pending_pe || !role->leader)
        r->npending = 0;
    r->on = true;
    r->role = *role;
    if (fresh) {
        int64_t now = st_mono_ms();
        for (int i = 0; i < ST_PART_MAX_REPLICAS; i++) {
            r->pos[i] = -1;
            r->start[i] = -1;
            r->caught_up_ms[i] = now; /* every follower gets a full lag period from here */
            r->target[i] = 0;
        }
        r->isr_asked_pe = -1;
        /* The epoch and where it starts go in the epoch cache now, before any append (Kafka's
         * rule): a follower asking where the previous epoch ends, or fetching with it, gets
         * this log's end as the answer, not "unknown" (which would cut its log to 0). */
        int64_t start = -1;
        if (p->log) {
            int rc = st_log_assign_epoch(p->log, role->leader_epoch, &start);
            if (rc < 0)
                ST_WARN("%s-%d: cannot record leader epoch %d: %s", p->topic, p->index,
                        (int)role->leader_epoch, st_strerror(rc));
            if (start < 0)
                start = st_log_end_offset(p->log);
        }
        r->epoch_start = start;
        r->leader_since_ms = now;
        ST_INFO("%s-%d: leader at epoch %d (log end %lld)", p->topic, p->index,
                (int)role->leader_epoch, p->log ? (long long)st_log_end_offset(p->log) : -1LL);
    }
    if (was_leader && !role->leader) {
        fail_acks(p, ST_E_NOT_LEADER);
        fail_deletes(p, ST_E_NOT_LEADER);
        r->leader_hw = p->hw;
    }
    /* A follow that starts (a new leader or epoch) fetches from the durable end and reports it:
     * records past it (an old leader's last appends, not yet synced) would sit beyond every
     * position the new leader sees, never compared with its log, and come back as its own if
     * they later became durable. They were never acknowledged (nothing is before it is
     * durable): cut them, and fetch them again if the leader has them. */
    if (new_follow && p->log && st_part_durable_end(p) < st_log_end_offset(p->log)) {
        int64_t durable = st_part_durable_end(p), end = st_log_end_offset(p->log);
        int rc = st_log_truncate_to(p->log, durable);
        if (rc == 0)
            rc = st_log_forget_epochs_from(p->log, st_log_end_offset(p->log));
        if (rc < 0)
            ST_WARN("%s-%d: cannot cut the unsynced tail %lld-%lld: %s", p->topic, p->index,
                    (long long)durable, (long long)end, st_strerror(rc));
    }
    st_part_update_hw(p);
    st_part_check_deletes(p);
}

int64_t st_part_repl_hw(st_part_t *p, int64_t local)
{
    st_part_repl_t *r = &p->repl;
    if (!r->on)
        return local;
    if (!r->role.leader) {
        int64_t hw = local < r->leader_hw ? local : r->leader_hw;
        int64_t start = st_log_start_offset(p->log); /* never below the log (a restart) */
        return hw < start ? start : hw;
    }
    int64_t hw = local;
    for (int i = 0; i < r->role.nisr + r->npending; i++) {
        int32_t m = i < r->role.nisr ? r->role.isr[i] : r->pending_add[i - r->role.nisr];
        int k = replica_index(&r->role, m);
        if (m == r->role.self || k < 0)
            continue;
        if (i >= r->role.nisr && in_isr(&r->role, m))
            continue;
        /* a follower not heard from since this leadership began holds it where it is */
        int64_t pos = r->pos[k] < 0 ? p->hw : r->pos[k];
        if (pos < hw)
            hw = pos;
    }
    /* the leader's high watermark never moves back, unless its own log was cut */
    if (hw < p->hw && local >= p->hw)
        hw = p->hw;
    return hw;
}

void st_part_repl_moved(st_part_t *p)
{
    st_part_repl_t *r = &p->repl;
    while (r->acks_head && r->acks_head->at <= p->hw) {
        st_repl_wait_t *w = r->acks_head;
        r->acks_head = w->next;
        if (!r->acks_head)
            r->acks_tail = NULL;
        /* in the log and on every ISR member, but the ISR is smaller than promised */
        w->done(w->arg, r->role.nisr < r->role.min_isr ? ST_E_FEW_REPLICAS : 0);
        free(w);
    }
}

int st_part_acks_all_wait(st_part_t *p, int64_t end, int64_t timeout_ms, st_part_done_fn done,
                          void *arg)
{
    st_repl_wait_t *w = wait_new(end, timeout_ms, done, arg);
    if (!w)
        return -ENOMEM;
    if (p->repl.acks_tail)
        p->repl.acks_tail->next = w;
    else
        p->repl.acks_head = w;
    p->repl.acks_tail = w;
    return 0;
}

/* An acks=all append past its deadline: in the log, not yet on every ISR member (the
 * producer's timeout, Kafka's REQUEST_TIMED_OUT; an idempotent retry is answered as a
 * duplicate once it is). */
static bool acks_expired(st_part_t *p, const st_repl_wait_t *w, int64_t now, int *err)
{
    (void)p;
    *err = ST_E_TIMEOUT;
    return now >= w->deadline_ms;
}

void st_part_expire_acks(st_part_t *p, int64_t now_ms)
{
    if (p->repl.acks_head)
        waits_answer(p, &p->repl.acks_head, &p->repl.acks_tail, acks_expired, now_ms);
}

void st_part_repl_fini(st_part_t *p)
{
    fail_acks(p, ST_E_CLOSED);
    fail_deletes(p, ST_E_CLOSED);
}

int16_t st_part_follower_fetch(st_part_t *p, int32_t replica, int64_t offset, int32_t last_epoch,
                               int64_t log_start, int64_t now_ms, st_part_diverging_t *div)
{
    st_part_repl_t *r = &p->repl;
    div->epoch = -1;
    div->end_offset = -1;
    int k = replica_index(&r->role, replica);
    if (!r->on || !r->role.leader || k < 0 || replica == r->role.self)
        return ST_KERR_NOT_LEADER_OR_FOLLOWER;
    if (!p->log)
        return ST_KERR_KAFKA_STORAGE_ERROR;
    if (offset < st_log_start_offset(p->log))
        return ST_KERR_OFFSET_OUT_OF_RANGE;
    /* KIP-320: the follower's log must be a prefix of this one. Where this log's largest
     * epoch <= the follower's last is an older epoch, or ends before the follower's end, the
     * follower holds records this leader never had: it must cut them before it counts. */
    if (last_epoch >= 0) {
        int32_t e;
        int64_t e_end;
        st_log_end_offset_for_epoch(p->log, last_epoch, &e, &e_end);
        if (e < 0 || e_end < 0)
            return ST_KERR_OFFSET_OUT_OF_RANGE;
        if (e < last_epoch || e_end < offset) {
            div->epoch = e;
            div->end_offset = e_end;
            return 0;
        }
    }
    if (offset > st_log_end_offset(p->log))
        return ST_KERR_OFFSET_OUT_OF_RANGE;
    r->pos[k] = offset;
    r->start[k] = log_start;
    /* Caught up: it reached the end its previous fetch saw (Kafka's rule: the log end, which
     * a follower reads up to). */
    int64_t end = st_log_end_offset(p->log);
    if (offset >= r->target[k] || offset >= end)
        r->caught_up_ms[k] = now_ms;
    r->target[k] = end;
    st_part_update_hw(p);
    st_part_check_deletes(p);
    return 0;
}

bool st_part_isr_change_due(st_part_t *p, int64_t now_ms, int64_t lag_max_ms, int64_t retry_ms,
                            int32_t *isr, int16_t *nisr)
{
    st_part_repl_t *r = &p->repl;
    const st_part_role_t *ro = &r->role;
    if (!r->on || !ro->leader || !p->log)
        return false;
    if (r->isr_asked_pe == ro->partition_epoch && now_ms - r->isr_asked_ms < retry_ms)
        return false;
    int16_t n = 0;
    bool changed = false;
    for (int i = 0; i < ro->nreplicas; i++) {
        int32_t m = ro->replicas[i];
        bool stays = m == ro->self || (in_isr(ro, m) && now_ms - r->caught_up_ms[i] <= lag_max_ms);
        /* a replica joins once its durable log reaches the high watermark and the start of
         * this leader's epoch (KAFKA-7128: a high watermark that still lags after an election
         * would let in a replica lacking acknowledged records), its log starts where this one
         * does (a DeleteRecords answered while it was fenced must not come back if it leads),
         * it is live (the controller
         * refuses a fenced one, and each refusal is a new partition epoch: asking again at
         * once would write one after another), and it is fetching (caught up
         * lately: a stopped one's old position does not count, and one just back does not leave
         * again at the next tick) */
        bool joins = !in_isr(ro, m) && m != ro->self && ro->live[i] && r->pos[i] >= 0 &&
                     r->pos[i] >= p->hw && r->pos[i] >= r->epoch_start &&
                     r->start[i] >= st_log_start_offset(p->log) &&
                     now_ms - r->caught_up_ms[i] <= lag_max_ms;
        if (stays || joins)
            isr[n++] = m;
        changed |= (stays || joins) != in_isr(ro, m);
    }
    if (!changed)
        return false;
    *nisr = n;
    r->isr_asked_pe = ro->partition_epoch;
    r->isr_asked_ms = now_ms;
    if (r->pending_pe != ro->partition_epoch) {
        r->pending_pe = ro->partition_epoch;
        r->npending = 0;
    }
    for (int16_t i = 0; i < n; i++) {
        bool known = in_isr(ro, isr[i]);
        for (int j = 0; j < r->npending && !known; j++)
            known = r->pending_add[j] == isr[i];
        if (!known && r->npending < ST_PART_MAX_REPLICAS)
            r->pending_add[r->npending++] = isr[i];
    }
    st_part_update_hw(p);
    return true;
}

int st_part_follow_start(st_part_t *p)
{
    int64_t leader_log_start = p->repl.leader_start;
    if (!p->log || !p->repl.on || p->repl.role.leader ||
        leader_log_start <= st_log_start_offset(p->log))
        return 0;
    /* the leader's DeleteRecords or retention: the same start here, but never past what this
     * replica knows is committed */
    int64_t to = leader_log_start < p->hw ? leader_log_start : p->hw;
    if (to <= st_log_start_offset(p->log))
        return 0;
    int rc = st_log_set_start_offset(p->log, to);
    if (rc < 0)
        ST_WARN("%s-%d: cannot move the log start to %lld: %s", p->topic, p->index, (long long)to,
                st_strerror(rc));
    return rc;
}

int st_part_set_leader_hw(st_part_t *p, int64_t leader_hw, int64_t leader_log_start)
{
    if (!p->repl.on || p->repl.role.leader)
        return ST_E_INVALID;
    p->repl.leader_hw = leader_hw;
    if (leader_log_start > p->repl.leader_start)
        p->repl.leader_start = leader_log_start;
    st_part_update_hw(p);
    return st_part_follow_start(p);
}

int st_part_truncate(st_part_t *p, int64_t offset, int32_t end_epoch)
{
    if (!p->log)
        return ST_E_CLOSED;
    if (p->repl.on && p->repl.role.leader)
        return ST_E_INVALID; /* a leader's log is the reference */
    int64_t start = st_log_start_offset(p->log), end = st_log_end_offset(p->log);
    if (end_epoch >= 0) {
        int32_t e;
        int64_t e_end;
        st_log_end_offset_for_epoch(p->log, end_epoch, &e, &e_end);
        if (e_end >= 0 && e_end < offset)
            offset = e_end;
    }
    if (offset > end)
        offset = end;
    /* the logs agree only below where this one starts (its start came from an older leader,
     * or a restart): nothing here is the leader's; start over at the offset, as a cut that
     * changes nothing would be asked for again forever */
    if (offset < start)
        return st_part_restart_at(p, offset);
    int rc = offset < end ? st_log_truncate_to(p->log, offset) : 0;
    if (rc == 0)
        rc = st_log_forget_epochs_from(p->log, st_log_end_offset(p->log));
    if (rc == 0 && offset != end)
        ST_INFO("%s-%d: truncated to %lld (log end was %lld) to match the leader", p->topic,
                p->index, (long long)offset, (long long)end);
    st_part_update_hw(p);
    return rc;
}

int st_part_restart_at(st_part_t *p, int64_t offset)
{
    if (!p->log)
        return ST_E_CLOSED;
    if (p->repl.on && p->repl.role.leader)
        return ST_E_INVALID;
    int64_t start = st_log_start_offset(p->log), end = st_log_end_offset(p->log);
    int rc = st_log_truncate_fully(p->log, offset);
    if (rc == 0) {
        p->repl.durable_start = offset; /* the new segment's name, synced */
        ST_INFO("%s-%d: log %lld..%lld does not meet the leader's: starting over, empty, at %lld",
                p->topic, p->index, (long long)start, (long long)end, (long long)offset);
    }
    st_part_update_hw(p);
    return rc;
}

int64_t st_part_log_start(const st_part_t *p)
{
    return p->log ? st_log_start_offset(p->log) : -1;
}

int64_t st_part_log_end(const st_part_t *p)
{
    return p->log ? st_log_end_offset(p->log) : -1;
}

int64_t st_part_durable_start(const st_part_t *p)
{
    if (!p->log)
        return -1;
    int64_t start = st_log_start_offset(p->log);
    if (!p->repl.on || p->repl.role.leader)
        return start;
    return p->repl.durable_start < start ? p->repl.durable_start : start;
}

/* A follower's wait for its log start to be durable. */
typedef struct start_wait {
    st_part_t *p;
    int64_t start;
    st_part_done_fn done;
    void *arg;
} start_wait_t;

static void start_synced(void *arg, int res)
{
    start_wait_t *w = arg;
    st_part_t *p = w->p;
    st_part_done_fn done = w->done;
    void *done_arg = w->arg;
    if (res == 0 && w->start > p->repl.durable_start)
        p->repl.durable_start = w->start;
    free(w);
    p->pending_durable--;
    st_part_maybe_free(p);
    if (done)
        done(done_arg, res);
}

int st_part_wait_start_durable(st_part_t *p, st_part_done_fn done, void *arg)
{
    if (!p->log)
        return ST_E_CLOSED;
    int64_t start = st_log_start_offset(p->log);
    if (p->repl.durable_start >= start)
        return 1;
    start_wait_t *w = malloc(sizeof *w);
    if (!w)
        return -ENOMEM;
    *w = (start_wait_t){p, start, done, arg};
    int rc = st_log_wait_start_durable(p->log, start_synced, w);
    if (rc != 0) {
        free(w);
        if (rc == 1)
            p->repl.durable_start = start;
        return rc;
    }
    p->pending_durable++;
    return 0;
}

int64_t st_part_durable_end(const st_part_t *p)
{
    if (!p->log)
        return -1;
    return st_log_config(p->log)->flush_policy == ST_FLUSH_STRICT ? st_log_durable_offset(p->log)
                                                                  : st_log_end_offset(p->log);
}

int32_t st_part_latest_epoch(const st_part_t *p)
{
    return p->log ? st_log_latest_epoch(p->log) : -1;
}

static void release_one(void *arg, st_part_t *p)
{
    (void)arg;
    fail_acks(p, ST_E_NOT_LEADER);
    fail_deletes(p, ST_E_NOT_LEADER);
}

void st_parts_release_acks(st_parts_t *t)
{
    st_parts_each(t, release_one, NULL);
}
