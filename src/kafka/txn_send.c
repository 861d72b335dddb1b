/*
 * txn_send.c — the broker's inter-broker client (replica/client.h) and the transaction
 * coordinators' markers sent with it (Kafka's TransactionMarkerChannelManager).
 *
 *   coordinator shard: st_ktxn_send_markers(m) --> one job, one WriteTxnMarkers v1 per
 *       partition (txn/markers.h), each to the partition's leader (this broker too, over its
 *       own listener) --> client thread: each answer's verdict:
 *           DONE (0, or the partition gone)   that partition is finished
 *           RETRY (not the leader, ...)       routed and sent again (ST_CLIENT_RETRY), forever
 *           FENCED (a newer coordinator)      the job ends with an error
 *       the last partition finished --> finished(id, 0 or the error): st_broker_post to the
 *       coordinator shard --> st_tcoord_markers_done (an error: sent again at the next tick)
 *
 * The client lives from the replication's start to its stop (serve.c's hooks, on the main
 * thread, while the shards run); b->client is read and written under client_mu, and every
 * st_client_send holds it, so no shard sends to a stopped client. A coordinator with no client
 * (before the start) is answered ST_E_AGAIN at once: its markers go again at the next tick.
 *
 * Threads: start/stop on the main thread; st_ktxn_send_markers and st_ktxn_client_metadata on
 * shards; st_ktxn_markers_send on any thread; req_done (and finished) on the client thread;
 * back_run on the coordinator's shard.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "broker/runtime.h"
#include "kafka/txn_route.h"
#include "proto/kerr.h"
#include "replica/client.h"
#include "txn/markers.h"

static pthread_mutex_t client_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct mjob mjob_t;

typedef struct mreq {
    st_client_req_t req;
    mjob_t *job;
    char *topic;
    int32_t partition;
    st_buf_t body;
} mreq_t;

struct mjob {
    st_ktxn_markers_fn finished;
    void *arg;
    uint64_t id;
    int64_t pid;
    _Atomic int left; /* partitions not finished, plus one until every request is sent */
    _Atomic int err;  /* the first error that ends the job */
    int n;
    mreq_t *reqs;
};

static void job_free(mjob_t *j)
{
    for (int i = 0; i < j->n; i++) {
        free(j->reqs[i].topic);
        st_buf_fini(&j->reqs[i].body);
    }
    free(j->reqs);
    free(j);
}

static void job_release(mjob_t *j)
{
    if (atomic_fetch_sub(&j->left, 1) == 1) {
        j->finished(j->arg, j->id, atomic_load(&j->err));
        job_free(j);
    }
}

/* Client thread: a partition's answer, or the end of its tries. */
static int req_done(st_client_req_t *req, int err, const uint8_t *frame, size_t len)
{
    mreq_t *mr = req->arg;
    mjob_t *j = mr->job;
    if (err == 0) {
        int16_t e;
        int v = st_tmarker_verdict(frame, len, j->pid, st_kstr(mr->topic), mr->partition, &e);
        if (v == ST_TMARKER_RETRY)
            return ST_CLIENT_RETRY;
        if (v == ST_TMARKER_FENCED) {
            ST_WARN("marker of producer %lld for %s-%d: %s: this coordinator is stale",
                    (long long)j->pid, mr->topic, mr->partition, st_kerr_name(e));
            int zero = 0;
            atomic_compare_exchange_strong(&j->err, &zero, ST_E_NOT_LEADER);
        }
    } else {
        int zero = 0;
        atomic_compare_exchange_strong(&j->err, &zero, err);
    }
    job_release(j);
    return ST_CLIENT_DONE;
}

int st_ktxn_markers_send(st_client_t *cl, const st_tmarkers_t *m, st_ktxn_markers_fn finished,
                         void *arg)
{
    mjob_t *j = calloc(1, sizeof *j);
    mreq_t *reqs = j ? calloc((size_t)m->n + 1, sizeof *reqs) : NULL;
    if (!reqs) {
        free(j);
        return -ENOMEM;
    }
    j->finished = finished;
    j->arg = arg;
    j->id = m->id;
    j->pid = m->producer_id;
    j->n = m->n;
    j->reqs = reqs;
    atomic_init(&j->left, m->n + 1);
    atomic_init(&j->err, 0);
    for (int i = 0; i < m->n; i++) {
        mreq_t *mr = &reqs[i];
        mr->job = j;
        mr->partition = m->parts[i].partition;
        mr->topic = strndup(m->parts[i].topic.ptr, (size_t)m->parts[i].topic.len);
        st_buf_init(&mr->body);
        st_tmarker_encode(&mr->body, m, i);
        if (!mr->topic || mr->body.oom) {
            job_free(j);
            return -ENOMEM;
        }
        mr->req = (st_client_req_t){.broker = -1,
                                    .topic = mr->topic,
                                    .partition = mr->partition,
                                    .api_key = ST_KP_API_WRITE_TXN_MARKERS,
                                    .api_version = ST_TMARKER_VERSION,
                                    .body = mr->body.data,
                                    .len = mr->body.len,
                                    .max_tries = INT_MAX, /* until answered, as Kafka */
                                    .done = req_done,
                                    .arg = mr};
    }
    for (int i = 0; i < m->n; i++)
        st_client_send(cl, &reqs[i].req);
    job_release(j); /* every request is out */
    return 0;
}

/* ---- the coordinators' side ---- */

/* A job's end, carried back to the coordinator's shard. */
typedef struct back {
    st_ext_call_t call;
    st_broker_t *b;
    int shard;
    uint64_t id;
    int err;
} back_t;

static void back_run(st_kshard_t *s, st_ext_call_t *c)
{
    back_t *bk = (back_t *)c;
    if (st_ktxn_coord(s))
        st_tcoord_markers_done(st_ktxn_coord(s), bk->id, bk->err);
    free(bk);
}

/* Client thread (or the shard, when nothing went): to the coordinator's shard. */
static void back_post(void *arg, uint64_t id, int err)
{
    back_t *bk = arg;
    bk->id = id;
    bk->err = err;
    st_broker_post(bk->b, bk->shard, &bk->call);
}

void st_ktxn_send_markers(void *ctx, const st_tmarkers_t *m)
{
    st_kshard_t *s = ctx;
    back_t *bk = calloc(1, sizeof *bk);
    if (!bk) {
        st_tcoord_markers_done(st_ktxn_coord(s), m->id, -ENOMEM);
        return;
    }
    bk->call.fn = back_run;
    bk->b = s->b;
    bk->shard = s->id;
    pthread_mutex_lock(&client_mu);
    int rc = s->b->client ? st_ktxn_markers_send(s->b->client, m, back_post, bk) : ST_E_AGAIN;
    pthread_mutex_unlock(&client_mu);
    if (rc) {
        free(bk);
        st_tcoord_markers_done(st_ktxn_coord(s), m->id, rc); /* sent again at the next tick */
    }
}

/* ---- the client's life ---- */

static void metadata_run(st_kshard_t *s, st_ext_call_t *c)
{
    free(c);
    st_ktxn_client_metadata(s);
}

int st_ktxn_client_start(st_broker_t *b, char *err, size_t errlen)
{
    char id[64];
    snprintf(id, sizeof id, "strata-broker-%lld", (long long)b->cfg->node_id);
    st_client_t *cl;
    int rc = st_client_start(&cl, id, b->cfg, err, errlen);
    if (rc)
        return rc;
    pthread_mutex_lock(&client_mu);
    b->client = cl;
    pthread_mutex_unlock(&client_mu);
    st_ext_call_t *c = calloc(1, sizeof *c);
    if (c) {
        c->fn = metadata_run; /* shard 0's snapshot, on its thread */
        st_broker_post(b, 0, c);
    }
    return 0;
}

void st_ktxn_client_stop(st_broker_t *b)
{
    pthread_mutex_lock(&client_mu);
    st_client_t *cl = b->client;
    b->client = NULL;
    pthread_mutex_unlock(&client_mu);
    if (cl)
        st_client_stop(cl); /* what it held: ST_E_CLOSED, posted to the live shards */
}

void st_ktxn_client_metadata(st_kshard_t *s)
{
    pthread_mutex_lock(&client_mu);
    if (s->b->client && s->md)
        st_client_set_metadata(s->b->client, s->md);
    pthread_mutex_unlock(&client_mu);
}

bool st_ktxn_client_send(st_broker_t *b, st_client_req_t *req)
{
    pthread_mutex_lock(&client_mu);
    st_client_t *cl = b->client;
    if (cl)
        st_client_send(cl, req);
    pthread_mutex_unlock(&client_mu);
    return cl != NULL;
}
