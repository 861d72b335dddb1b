/* adopt.c — every shard adopts a metadata state: partitions opened, reconfigured, given their
 * role or deleted (adopt.h). */
#include "broker/adopt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "broker/fanout.h"
#include "broker/runtime.h"
#include "partition/partition.h"

/* One shard's part of an adoption. Legs reaching a shard while another is in progress there
 * wait in its queue (states are adopted in the order they were published). */
typedef struct adopt_leg {
    st_fanout_leg_t leg;
    st_md_t *md;
    st_adopt_fails_t fails; /* this shard's */
    struct adopt_leg *qnext;
    /* in progress (the shard's): the old snapshot, whether the brokers changed, the cursor */
    st_md_t *old;
    bool brokers_changed;
    bool broker_configs_changed; /* dynamic broker settings: every log reconfigured */
    int ti;                      /* topic index in md */
    int32_t pi;                  /* partition index in that topic */
    int opened, slices;
    int64_t start_ns, longest_ns, longest_cpu_ns; /* the longest slice: wall, thread CPU */
    int lc_ti; /* the topic whose log settings lc holds (-1: none yet) */
    st_log_config_t lc;
    int syncing;                           /* slices whose sync is not back yet */
    struct adopt_sync *ready, *ready_tail; /* synced slices whose roles are not all set yet */
} adopt_leg_t;

typedef struct adoption {
    st_fanout_t fan;
    adopt_leg_t *legs;
    st_md_t *md;
    st_adopt_done_fn done;
    void *arg;
} adoption_t;

/* A shard's adoptions: the one in progress and those waiting (shard.h st_kshard_t.adopt). */
struct st_adopt_q {
    adopt_leg_t *cur;
    adopt_leg_t *head, *tail;
    st_task_t task;              /* the next slice of cur */
    uint64_t slices, longest_ns; /* slices run, the longest one (tests, logs) */
};

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
    const st_md_topic_t *t = st_md_find_id(w->md, st_part_topic_id(p));
    int32_t index = st_part_index(p);
    if (t && index < t->npartitions && hosts(w->s, &t->partitions[index]))
        return;
    if (w->s->b->hooks->partition_gone)
        w->s->b->hooks->partition_gone(w->s, p);
    st_parts_delete(&w->s->parts, p);
}

/* Whether the brokers a role depends on (liveness, leader addresses) differ between two
 * snapshots. */
static bool brokers_differ(const st_md_t *a, const st_md_t *b)
{
    if (!a || a->nbrokers != b->nbrokers)
        return true;
    for (int i = 0; i < a->nbrokers; i++) {
        const st_md_broker_t *x = &a->brokers[i], *y = &b->brokers[i];
        if (x->node_id != y->node_id || x->port != y->port || x->fenced != y->fenced ||
            strcmp(x->host ? x->host : "", y->host ? y->host : "") != 0)
            return true;
    }
    return false;
}

static bool role_equal(const st_part_role_t *a, const st_part_role_t *b)
{
    if (a->leader != b->leader || a->self != b->self || a->leader_id != b->leader_id ||
        a->leader_epoch != b->leader_epoch || a->partition_epoch != b->partition_epoch ||
        a->min_isr != b->min_isr || a->nreplicas != b->nreplicas || a->nisr != b->nisr)
        return false;
    for (int i = 0; i < a->nreplicas && i < ST_PART_MAX_REPLICAS; i++)
        if (a->replicas[i] != b->replicas[i] || a->live[i] != b->live[i])
            return false;
    for (int i = 0; i < a->nisr && i < ST_PART_MAX_REPLICAS; i++)
        if (a->isr[i] != b->isr[i])
            return false;
    return true;
}

/* The partition's role from the snapshot (replication, partition.h), then what follows from
 * it (hooks->partition_role: fetching from the leader, a coordinator's load). A partition
 * whose role, leader's address and brokers' liveness are what they were needs neither: most
 * states change a few partitions (an ISR, a leader) of many. */
static void set_role(st_kshard_t *s, st_part_t *part, const st_md_t *md, const st_md_topic_t *t,
                     int32_t p, bool force)
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
    /* the topic's, else this broker's dynamic one (kafka/broker_config.h), else the static */
    const char *mi = st_md_topic_config(t, "min.insync.replicas");
    if (!mi)
        mi = st_md_broker_config(md, role.self, "min.insync.replicas", NULL);
    if (mi)
        role.min_isr = (int32_t)strtol(mi, NULL, 10);
    memcpy(role.replicas, mp->replicas, sizeof role.replicas);
    memcpy(role.isr, mp->isr, sizeof role.isr);
    for (int i = 0; i < mp->nreplicas && i < ST_PART_MAX_REPLICAS; i++)
        role.live[i] = st_md_broker_live(md, mp->replicas[i]);
    if (!force && st_part_replicated(part) && role_equal(&role, st_part_role(part)))
        return;
    st_part_set_role(part, &role);
    if (s->b->hooks->partition_role)
        s->b->hooks->partition_role(s, part, md, t, p, role.leader);
}

static void adopt_start(st_kshard_t *s, adopt_leg_t *a);

/* The adoption in progress on this shard is done: its leg goes back, the next one starts. */
static void adopt_finish(st_kshard_t *s, adopt_leg_t *a)
{
    st_adopt_q_t *q = s->adopt;
    if (a->opened)
        ST_INFO("metadata version %lld adopted: %d partition(s) opened in %d slice(s) over "
                "%.2f s, the longest %.1f ms (%.1f ms of it on the CPU)",
                (long long)a->md->version, a->opened, a->slices,
                (double)(st_mono_ns() - a->start_ns) / 1e9, (double)a->longest_ns / 1e6,
                (double)a->longest_cpu_ns / 1e6);
    st_md_unref(a->old);
    a->old = NULL;
    q->cur = NULL;
    st_fanout_release(&a->leg);
    adopt_leg_t *next = q->head;
    if (next) {
        q->head = next->qnext;
        if (!q->head)
            q->tail = NULL;
        adopt_start(s, next);
    }
}

static void fail_add(adopt_leg_t *a, const st_md_topic_t *t, int32_t p, int rc)
{
    if (a->fails.n >= ST_ADOPT_FAILS)
        return;
    memcpy(a->fails.f[a->fails.n].id, t->id, 16);
    a->fails.f[a->fails.n].partition = p;
    a->fails.f[a->fails.n].err = rc;
    a->fails.n++;
}

/* The partitions one slice opened, waiting for the sync that makes them durable before they
 * get their roles (and serve). The sync runs on a thread of its own: syncfs waits for every
 * dirty byte of the file system, other programs' too, so it may take seconds on a busy
 * machine; the shard serves meanwhile. */
typedef struct adopt_sync {
    st_ext_call_t call; /* first: back on the shard (st_broker_post) */
    st_kshard_t *s;
    adopt_leg_t *a;
    st_fs_t fs;
    const char *dir;
    int64_t delay_ms; /* a debug build's slow disk (storage/env.h syncfs_delay_ms) */
    int rc;
    int n, applied;          /* partitions; of them given their roles so far */
    struct adopt_sync *next; /* the leg's ready list */
    struct {
        int ti;
        int32_t p;
    } parts[ST_ADOPT_SLICE_MAX];
} adopt_sync_t;

static void adopt_next(st_kshard_t *s, adopt_leg_t *a);

/* This thread's CPU time: a slice's wall time above it was spent blocked (a file-system call)
 * or preempted. */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Gives the partitions of a synced slice their roles (a failed sync: reported, and they get
 * none: they stay unserved until a later state sets it), until `stop` (monotonic ns; a role
 * may write the epoch file, which a busy disk makes slow). Returns true once all are done. */
static bool sync_apply(st_kshard_t *s, adopt_sync_t *j, int64_t stop)
{
    adopt_leg_t *a = j->a;
    if (j->rc < 0 && j->applied == 0)
        ST_ERROR("adopting metadata version %lld: the sync of %d partition(s) opened failed (%s)",
                 (long long)a->md->version, j->n, st_strerror(j->rc));
    while (j->applied < j->n && s->shutdown_state == 0) {
        if (j->applied > 0 && st_mono_ns() >= stop)
            return false;
        int i = j->applied++;
        const st_md_topic_t *t = a->md->topics[j->parts[i].ti];
        st_part_t *part = st_parts_get(&s->parts, t->id, j->parts[i].p);
        if (j->rc < 0)
            fail_add(a, t, j->parts[i].p, j->rc);
        else if (part)
            set_role(s, part, a->md, t, j->parts[i].p, true);
    }
    return true;
}

/* The slice's roles are applied by the slices to come (adopt_slice), within their budget. */
static void sync_ready(adopt_leg_t *a, adopt_sync_t *j)
{
    j->next = NULL;
    if (a->ready_tail)
        a->ready_tail->next = j;
    else
        a->ready = j;
    a->ready_tail = j;
}

/* Shard: a slice's sync is back. */
static void sync_back(st_kshard_t *s, st_ext_call_t *c)
{
    adopt_sync_t *j = (adopt_sync_t *)c;
    adopt_leg_t *a = j->a;
    s->syncs_in_flight--;
    a->syncing--;
    sync_ready(a, j);
    adopt_next(s, a);
}

static void *sync_main(void *arg)
{
    adopt_sync_t *j = arg;
    j->rc = j->fs.ops->syncfs(j->fs.ctx, j->dir);
    if (j->delay_ms > 0) { /* on this thread only: the shard serves meanwhile */
        struct timespec ts = {j->delay_ms / 1000, (j->delay_ms % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    st_broker_post(j->s->b, j->s->id, &j->call);
    return NULL;
}

/* Makes slice j durable: on a thread where the file system's table allows (the real one), else
 * here. */
static void sync_start(st_kshard_t *s, adopt_leg_t *a, adopt_sync_t *j)
{
    j->call.fn = sync_back;
    j->s = s;
    j->a = a;
    j->fs = s->env.base;
    j->dir = s->b->cfg->log_dirs;
    j->delay_ms = s->env.syncfs_delay_ms ? atomic_load(s->env.syncfs_delay_ms) : 0;
    st_fs_t posix = st_fs_posix();
    if (!j->fs.ops->syncfs) { /* nothing was deferred (storage/env.h) */
        j->rc = 0;
        sync_ready(a, j);
        return;
    }
    pthread_t th;
    pthread_attr_t at;
    if (j->fs.ops == posix.ops && pthread_attr_init(&at) == 0) {
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        s->syncs_in_flight++; /* the shutdown waits for it (broker/runtime.c) */
        a->syncing++;
        int rc = pthread_create(&th, &at, sync_main, j);
        pthread_attr_destroy(&at);
        if (rc == 0)
            return;
        s->syncs_in_flight--;
        a->syncing--;
    }
    j->rc = j->fs.ops->syncfs(j->fs.ctx, j->dir);
    sync_ready(a, j);
}

/*
 * One slice of the adoption in progress, from the cursor on, until ST_ADOPT_SLICE_NS of work
 * or ST_ADOPT_SLICE_MAX partitions opened: partitions opened (created), their syncs deferred
 * (storage/env.h) to one for the slice; the others reconfigured and given their roles. An opened
 * partition gets its role once the slice's sync is back (sync_start), from the first slice after
 * it, within that slice's budget: nothing it wrote is promised before it is durable. Then the next
 * slice on the loop's next iteration, so the shard serves between slices; at most ST_ADOPT_SYNCS
 * slices wait for their syncs at a time.
 */
static void adopt_slice(st_task_t *task)
{
    st_kshard_t *s = task->data;
    st_adopt_q_t *q = s->adopt;
    adopt_leg_t *a = q->cur;
    const st_broker_hooks_t *h = s->b->hooks;
    int64_t t0 = st_mono_ns(), stop = t0 + ST_ADOPT_SLICE_NS, c0 = thread_cpu_ns();
    /* a stopping shard opens nothing more: its logs are about to be closed */
    if (s->shutdown_state != 0)
        a->ti = a->md->ntopics;
    /* first the roles of the slices whose syncs are back, in order */
    while (a->ready && sync_apply(s, a->ready, stop)) {
        adopt_sync_t *done = a->ready;
        if (!(a->ready = done->next))
            a->ready_tail = NULL;
        free(done);
    }
    adopt_sync_t *j = NULL;
    if (a->ready || st_mono_ns() >= stop) {
        ; /* this slice's budget went to roles */
    } else if (a->ti < a->md->ntopics && (j = calloc(1, sizeof *j)) == NULL) {
        st_loop_defer(s->loop, &q->task); /* out of memory: again later */
        return;
    }
    if (j) {
        j->s = s;
        j->a = a;
    }
    bool deferred = false;
    while (j && a->ti < a->md->ntopics) {
        const st_md_topic_t *t = a->md->topics[a->ti];
        if (a->pi >= t->npartitions) {
            a->ti++;
            a->pi = 0;
            continue;
        }
        if (st_mono_ns() >= stop || j->n == ST_ADOPT_SLICE_MAX)
            break;
        const st_md_topic_t *ot = a->old ? st_md_find_id(a->old, t->id) : NULL;
        bool reconf = ot && (a->broker_configs_changed || !configs_equal(ot, t));
        int32_t p = a->pi++;
        if (!hosts(s, &t->partitions[p]))
            continue;
        st_part_t *part = st_parts_get(&s->parts, t->id, p);
        if (!part) {
            st_part_t *np;
            if (a->lc_ti != a->ti) { /* once per topic: 10,000 partitions share one */
                h->topic_log_config(s->b->cfg, a->md, t, &a->lc);
                a->lc_ti = a->ti;
            }
            st_storage_defer_begin(&s->env);
            int rc = st_parts_open(&s->parts, t->name, t->id, p, &a->lc, &np);
            deferred |= s->env.deferred > 0;
            st_storage_defer_take(&s->env);
            if (rc)
                fail_add(a, t, p, rc);
            a->opened++;
            j->parts[j->n].ti = a->ti;
            j->parts[j->n].p = p;
            j->n++;
            continue;
        }
        if (reconf) {
            st_log_config_t lc;
            h->topic_log_config(s->b->cfg, a->md, t, &lc);
            st_part_reconfigure(part, &lc);
        }
        set_role(s, part, a->md, t, p, reconf || a->brokers_changed);
    }
    int64_t ns = st_mono_ns() - t0, cpu = thread_cpu_ns() - c0;
    q->slices++;
    if (ns > (int64_t)q->longest_ns)
        q->longest_ns = (uint64_t)ns;
    a->slices++;
    if (ns > a->longest_ns) {
        a->longest_ns = ns;
        a->longest_cpu_ns = cpu;
    }
    if (j && j->n > 0 && deferred) {
        sync_start(s, a, j);
    } else if (j && j->n > 0) {
        j->rc = 0;
        sync_ready(a, j); /* nothing to make durable */
    } else {
        free(j);
    }
    adopt_next(s, a);
}

/* What comes after a slice or a sync: the next slice, or once the cursor is at the end and
 * every sync is back, the end of the adoption. */
static void adopt_next(st_kshard_t *s, adopt_leg_t *a)
{
    st_adopt_q_t *q = s->adopt;
    if (q->cur != a)
        return;
    if (a->ready || (a->ti < a->md->ntopics && a->syncing < ST_ADOPT_SYNCS)) {
        st_loop_defer(s->loop, &q->task);
        return;
    }
    if (a->ti >= a->md->ntopics && a->syncing == 0)
        adopt_finish(s, a);
    /* else sync_back calls again */
}

/* Starts adopting a->md on this shard: the snapshot swapped, partitions no longer hosted
 * deleted, then the slices. */
static void adopt_start(st_kshard_t *s, adopt_leg_t *a)
{
    st_adopt_q_t *q = s->adopt;
    const st_broker_hooks_t *h = s->b->hooks;
    q->cur = a;
    a->old = s->md;
    s->md = st_md_ref(a->md);
    a->brokers_changed = brokers_differ(a->old, a->md);
    a->broker_configs_changed = !st_md_broker_configs_equal(a->old, a->md);
    if (h->md_adopted)
        h->md_adopted(s, a->old);
    sweep_t w = {s, a->md};
    st_parts_each(&s->parts, sweep_one, &w);
    a->ti = 0;
    a->pi = 0;
    a->lc_ti = -1;
    a->syncing = 0;
    a->ready = a->ready_tail = NULL;
    a->start_ns = st_mono_ns();
    adopt_slice(&q->task);
}

static void adopt_run(st_fanout_leg_t *leg)
{
    st_kshard_t *s = st_kshard_current();
    adopt_leg_t *a = leg->data;
    if (!s->adopt) {
        s->adopt = calloc(1, sizeof *s->adopt);
        ST_ASSERT(s->adopt != NULL);
        st_task_init(&s->adopt->task, adopt_slice, s);
    }
    st_adopt_q_t *q = s->adopt;
    st_fanout_hold(leg);
    if (q->cur) {
        a->qnext = NULL;
        if (q->tail)
            q->tail->qnext = a;
        else
            q->head = a;
        q->tail = a;
        return;
    }
    adopt_start(s, a);
}

void st_broker_adopt_fini(st_kshard_t *s)
{
    free(s->adopt);
    s->adopt = NULL;
}

void st_broker_adopt_stats(const st_kshard_t *s, uint64_t *slices, uint64_t *longest_ns)
{
    *slices = s->adopt ? s->adopt->slices : 0;
    *longest_ns = s->adopt ? s->adopt->longest_ns : 0;
}

static void adopted(void *arg)
{
    adoption_t *ad = arg;
    st_kshard_t *s = st_kshard_current();
    st_adopt_fails_t fails = {0};
    for (int i = 0; i < s->b->nshards; i++) {
        const st_adopt_fails_t *f = &ad->legs[i].fails;
        for (int k = 0; k < f->n && fails.n < ST_ADOPT_FAILS; k++)
            fails.f[fails.n++] = f->f[k];
        st_md_unref(ad->legs[i].md);
    }
    ad->done(s, ad->arg, ad->md, &fails);
    st_md_unref(ad->md);
    free(ad->legs);
    free(ad);
    st_broker_t *b = s->b;
    if (atomic_fetch_sub_explicit(&b->adopting, 1, memory_order_acq_rel) == 1 &&
        atomic_load_explicit(&b->stopping, memory_order_acquire))
        st_broker_wake_all(b); /* a stop waits on this (runtime.c) */
}

void st_broker_adopt(st_kshard_t *s, st_md_t *md, st_adopt_done_fn done, void *arg)
{
    st_broker_t *b = s->b;
    st_md_assign_shards(md, b->nshards);
    adoption_t *ad = calloc(1, sizeof *ad);
    adopt_leg_t *legs = calloc((size_t)b->nshards, sizeof *legs);
    ST_ASSERT(ad && legs);
    atomic_fetch_add_explicit(&b->adopting, 1, memory_order_acq_rel);
    *ad = (adoption_t){.legs = legs, .md = md, .done = done, .arg = arg};
    st_fanout_begin(&ad->fan, b->mesh, s->id, adopt_run, adopted, ad);
    for (int i = 0; i < b->nshards; i++) {
        legs[i].md = st_md_ref(md);
        legs[i].leg.data = &legs[i];
        st_fanout_send(&ad->fan, &legs[i].leg, i);
    }
    st_fanout_end(&ad->fan);
}
