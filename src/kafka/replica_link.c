/* replica_link.c — the follower fetcher tied to the shards (replica_link.h). */
#include "kafka/replica_link.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "broker/runtime.h"
#include "replica/fetcher.h"
#include "replica/follow.h"

/* One thing the fetcher asks of a partition, run on its owner shard. */
typedef struct krepl_job {
    st_ext_call_t call; /* first: the shard hands this back */
    st_fetcher_t *f;    /* a reference, dropped with the job */
    uint8_t topic_id[16];
    int32_t partition;
    int32_t leader_epoch;
    st_rfollow_action_t a;
    uint8_t *records; /* append */
    bool want_position;
} krepl_job_t;

static void job_free(krepl_job_t *j)
{
    st_fetcher_unref(j->f);
    free(j->records);
    free(j);
}

/* The partition j is for, while it still follows at j's leader epoch. */
static st_part_t *job_part(st_kshard_t *s, const krepl_job_t *j)
{
    st_part_t *p = st_parts_get(&s->parts, j->topic_id, j->partition);
    if (!p || !st_part_online(p) || !st_part_replicated(p) || st_part_role(p)->leader ||
        st_part_role(p)->leader_epoch != j->leader_epoch)
        return NULL;
    return p;
}

static void job_answer(st_kshard_t *s, krepl_job_t *j, int err)
{
    if (j->want_position) {
        st_part_t *p = st_parts_get(&s->parts, j->topic_id, j->partition);
        bool on = p && st_part_online(p);
        st_fetcher_position(j->f, j->topic_id, j->partition, j->leader_epoch,
                            on ? st_part_durable_end(p) : -1, on ? st_part_latest_epoch(p) : -1,
                            on ? st_part_durable_start(p) : -1, err);
    }
    job_free(j);
}

/* The appended batches are durable (on the owner shard). */
static void append_done(void *arg, int err)
{
    krepl_job_t *j = arg;
    job_answer(st_kshard_current(), j, err);
}

static void job_run(st_kshard_t *s, st_ext_call_t *c)
{
    krepl_job_t *j = (krepl_job_t *)c;
    st_part_t *p = job_part(s, j);
    if (!p) {
        job_answer(s, j, ST_E_NOT_LEADER);
        return;
    }
    const st_rfollow_action_t *a = &j->a;
    switch (a->kind) {
    case ST_RF_DO_APPEND: {
        /* done may run before this returns (write caching): j is its from here on */
        int rc = st_part_append_replica(p, j->records, a->len, a->hw, a->log_start, append_done, j);
        if (rc)
            job_answer(s, j, rc);
        return;
    }
    case ST_RF_DO_TRUNCATE:
        job_answer(s, j, st_part_truncate(p, a->offset, a->end_epoch));
        return;
    case ST_RF_DO_RESTART:
        job_answer(s, j, st_part_restart_at(p, a->offset));
        return;
    case ST_RF_DO_HW: {
        /* a new log start is reported once durable (the leader's DeleteRecords counts on it) */
        int rc = st_part_set_leader_hw(p, a->hw, a->log_start);
        if (rc == 0 && j->want_position) {
            rc = st_part_wait_start_durable(p, append_done, j);
            if (rc == 0)
                return; /* answered (and freed) once durable */
            if (rc == 1)
                rc = 0;
        }
        job_answer(s, j, rc); /* frees j, with a position only when one is wanted */
        return;
    }
    default:
        job_answer(s, j, 0);
        return;
    }
}

static void hook_job(void *arg, int shard, const uint8_t topic_id[16], int32_t partition,
                     int32_t leader_epoch, const st_rfollow_action_t *a, uint8_t *records,
                     bool want_position)
{
    st_broker_t *b = arg;
    krepl_job_t *j = calloc(1, sizeof *j);
    st_fetcher_t *f = b->fetchers[shard]; /* the fetcher of the shard the partition is on */
    if (!j) {
        free(records);
        if (want_position)
            st_fetcher_position(f, topic_id, partition, leader_epoch, -1, -1, -1, -ENOMEM);
        return;
    }
    j->call.fn = job_run;
    j->f = f;
    st_fetcher_ref(j->f);
    memcpy(j->topic_id, topic_id, 16);
    j->partition = partition;
    j->leader_epoch = leader_epoch;
    j->a = *a;
    j->records = records;
    j->want_position = want_position;
    st_broker_post(b, shard, &j->call);
}

/* ---- start and stop ---- */

static st_fetcher_t *link_fetcher(st_kshard_t *s)
{
    if (atomic_load(&s->b->quorum_stopped))
        return NULL; /* stopping: the fetcher may be gone (replica_link.h) */
    st_fetcher_t **fs = __atomic_load_n(&s->b->fetchers, __ATOMIC_ACQUIRE);
    return fs ? fs[s->id] : NULL;
}

static void follow_one(void *arg, st_part_t *p)
{
    st_kshard_t *s = arg;
    if (st_part_replicated(p) && s->md)
        st_krepl_follow(s, p, s->md);
}

/* On each shard once the fetchers exist: follow what the shard's roles already say (a
 * snapshot adopted before b->fetchers was set followed nothing). */
static void resync_run(st_kshard_t *s, st_ext_call_t *c)
{
    free(c);
    st_parts_each(&s->parts, follow_one, s);
}

/* On each shard after its fetcher stopped: drops the shard's reference. */
typedef struct release_call {
    st_ext_call_t call;
    st_fetcher_t *f;
} release_call_t;

static void release_run(st_kshard_t *s, st_ext_call_t *c)
{
    (void)s;
    release_call_t *r = (release_call_t *)c;
    st_fetcher_unref(r->f);
    free(r);
}

int st_krepl_start(st_broker_t *b, char *err, size_t errlen)
{
    static st_fetcher_hooks_t hooks = {.job = hook_job};
    st_fetcher_hooks_t h = hooks;
    h.arg = b;
    /* One fetcher (thread, connection per leader) per shard, as DESIGN.md says: a shard's
     * followed partitions are fetched, appended and synced without waiting on another shard's,
     * and replication scales with the shards (each leader sees one connection per follower
     * shard, which its listener spreads over its own shards). */
    st_fetcher_t **fs = calloc((size_t)b->nshards, sizeof *fs);
    if (!fs) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (int i = 0; i < b->nshards; i++) {
        int rc = st_fetcher_start(&fs[i], b->cfg, &h, err, errlen);
        if (rc) {
            while (i-- > 0) { /* no shard has them yet: both references go */
                st_fetcher_stop(fs[i]);
                st_fetcher_unref(fs[i]);
            }
            free(fs);
            return rc;
        }
        st_fetcher_ref(fs[i]); /* its shard's, dropped by release_run */
    }
    __atomic_store_n(&b->fetchers, fs, __ATOMIC_RELEASE);
    for (int i = 0; i < b->nshards; i++) {
        st_ext_call_t *c = calloc(1, sizeof *c);
        if (!c)
            continue;
        c->fn = resync_run;
        st_broker_post(b, i, c);
    }
    return 0;
}

void st_krepl_stop(st_broker_t *b)
{
    st_fetcher_t **fs = __atomic_load_n(&b->fetchers, __ATOMIC_ACQUIRE);
    if (!fs)
        return;
    for (int i = 0; i < b->nshards; i++)
        st_fetcher_stop(fs[i]); /* joins; drops the broker's own reference */
    for (int i = 0; i < b->nshards; i++) {
        release_call_t *r = calloc(1, sizeof *r);
        if (!r)
            continue; /* that shard's reference stays: a leak, never a freed fetcher in use */
        r->call.fn = release_run;
        r->f = fs[i];
        st_broker_post(b, i, &r->call);
    }
    /* the array stays (a shard may read it until it sees quorum_stopped): st_broker_destroy
     * frees it */
}

/* ---- following ---- */

void st_krepl_follow(st_kshard_t *s, st_part_t *p, const st_md_t *md)
{
    st_fetcher_t *f = link_fetcher(s);
    if (!f)
        return;
    const st_part_role_t *r = st_part_role(p);
    const st_md_broker_t *lb = r->leader_id >= 0 ? st_md_broker(md, r->leader_id) : NULL;
    if (!st_part_online(p) || !st_part_replicated(p) || r->leader || !lb || !lb->host ||
        lb->port <= 0) {
        st_fetcher_unfollow(f, st_part_topic_id(p), st_part_index(p));
        return;
    }
    st_follow_t fw = {
        .topic = st_part_topic(p),
        .partition = st_part_index(p),
        .shard = s->id,
        .leader_id = r->leader_id,
        .leader_host = lb->host,
        .leader_port = lb->port,
        .leader_epoch = r->leader_epoch,
        .fetch_offset = st_part_durable_end(p),
        .last_epoch = st_part_latest_epoch(p),
        .log_start = st_part_durable_start(p),
    };
    memcpy(fw.topic_id, st_part_topic_id(p), 16);
    st_fetcher_follow(f, &fw);
}

void st_krepl_unfollow(st_kshard_t *s, st_part_t *p)
{
    st_fetcher_t *f = link_fetcher(s);
    if (f)
        st_fetcher_unfollow(f, st_part_topic_id(p), st_part_index(p));
}
