/*
 * h_fetch.c — Fetch (key 1): reads from partitions on any shard, long polling, zero-copy send.
 *
 * Life of a fetch (on the connection's shard, "origin"):
 *   decode -> resolve topics -> ROUND: one fan-out leg per owner shard (broker/fanout.h) reads
 *   its partitions (st_part_read: up to partition_max_bytes and the high watermark; file
 *   ranges, no copy)
 *   -> all back: enough bytes (>= min_bytes), an error, no wait, or the deadline passed?
 *        yes: trim to max_bytes (whole partitions; the first non-empty always kept), encode
 *             with records spliced in as file ranges, send; each read is released on its
 *             owner shard once its bytes are on the socket
 *        no:  release the reads, register on every owner shard at the high watermark the
 *             read saw, sleep until a partition's moves past it (fetch_wait.h) or
 *             max_wait_ms -> ROUND again
 *
 * A follower's fetch (replica_id >= 0 before v15, replica_state.replica_id from v15) is served
 * only by the leader, for one of the partition's other replicas (leader.h). On the owner it
 * first tells the partition where the follower's durable log ends — the offset it fetches from
 * (st_part_follower_fetch: validated against the leader epochs first, KIP-320; then the high
 * watermark and acks=all waits move on it) — then reads up
 * to the leader's log end, durable here or not, past the high watermark (st_part_read_replica:
 * the followers' fetch and sync overlap the leader's own); the answer's high_watermark is the
 * leader's, which the follower adopts. With nothing to read it waits for the log end to move or
 * the high watermark to change (st_part_add_replica_waiter), so new records reach the followers
 * as they are appended and a follower learns the high watermark without waiting max_wait. Consumers
 * (replica_id < 0) read up to the high watermark.
 *
 * In a cluster a partition this broker does not lead (or leads but has not opened yet) is
 * NOT_LEADER_OR_FOLLOWER, and current_leader_epoch is checked against the snapshot's leader epoch
 * (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), as Kafka does (leader.h); the owner checks again
 * with its own snapshot on each round. From v12 a refused partition names the current leader,
 * from v16 with its endpoint (KIP-951). A single broker ignores current_leader_epoch, as before.
 *
 * Isolation (KIP-98): a read_committed consumer (isolation_level 1) reads up to the last stable
 * offset (st_part_read_committed) and gets the aborted transactions its records overlap
 * (st_part_aborted); it waits for the LSO to move, not the high watermark. Every answer
 * carries last_stable_offset.
 *
 * Fetch v0-3 can carry only message formats v0/v1: each read is converted down on the
 * connection's shard (fetch_downconvert, storage/msgconv.h), bounded per partition, instead of
 * being spliced from the file; message.downconversion.enable=false refuses them
 * (UNSUPPORTED_VERSION), as Kafka does.
 *
 * Fetch sessions (KIP-227) are declined as the protocol allows: every answer carries
 * session_id 0, so clients keep sending full fetches; a request naming a session we never
 * created gets FETCH_SESSION_ID_NOT_FOUND and the client starts over without one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "auth/quota.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "broker/fanout.h"
#include "kafka/authz.h"
#include "kafka/handlers.h"
#include "kafka/kshard.h"
#include "kafka/fetch_wait.h"
#include "kafka/leader.h"
#include "kafka/throttle.h"
#include "kafka/topic_config.h"
#include "proto/kerr.h"
#include "storage/batch.h"
#include "storage/msgconv.h"

typedef struct st_fetch st_fetch_t;

/* A read handed to the response; released on its owner shard after the send. */
typedef struct st_fetch_rel {
    st_msg_t msg;
    st_broker_t *b;
    int owner;
    int origin;
    bool spliced; /* handed to a response (which releases it once sent) */
    st_log_read_t read;
} fetch_rel_t;

typedef struct {
    uint8_t topic_id[16];
    int32_t partition;
    int64_t fetch_offset;
    int32_t max_bytes;
    int32_t last_fetched_epoch; /* a follower's: the latest epoch in its log (-1: none) */
    int64_t replica_log_start;  /* a follower's: its log start */
    int owner;                  /* -1: unknown topic or partition */
    st_part_diverging_t div;    /* a follower's log diverges from here (epoch -1: no) */
    /* results */
    int16_t error;
    int64_t hw, log_start;
    int64_t lso;               /* the last stable offset the read saw */
    st_txn_aborted_t *aborted; /* read_committed: the aborted transactions the read overlaps
                                  (malloc'd on the owner, freed on the origin) */
    int naborted;
    int64_t end_seen; /* a follower's fetch: the leader's log end its read saw */
    int64_t hw_first; /* a follower's fetch: the high watermark its first read saw */
    bool hw_known;    /* hw_first is set */
    fetch_rel_t *rel; /* non-NULL when the read returned bytes */
    uint8_t *conv;    /* v0-3: the records converted down (malloc'd), sent instead of rel */
    st_kp_fetch_resp_partition_t *out;
} fetch_part_t;

struct st_fetch {
    st_kreq_t *r;
    st_kp_fetch_req_t req;
    int32_t replica_id; /* >= 0: a follower's fetch; -1: a consumer's */
    st_kp_fetch_resp_t resp;
    int nparts;
    fetch_part_t *parts;
    st_fanout_t fan;       /* one per round */
    st_fanout_leg_t *legs; /* one per shard */
    int64_t deadline_ns;
    bool final;
    bool waiting;
    st_timer_t timer;
    st_task_t rerun;
    st_fetch_t *prev, *next; /* shard's waiting list */
    int rounds;              /* rounds run */
    int64_t wait_since_ns;   /* a sampled request waiting: since when (its kafka.fetch.wait) */
};

/* ---- reads and their release ---- */

static void rel_on_owner(st_msg_t *m)
{
    fetch_rel_t *rel = (fetch_rel_t *)m;
    st_log_read_release(&rel->read);
    free(rel);
}

/* Releases a read from any shard: directly on its owner, else by message. `from` is the
 * calling shard. */
static void rel_release(fetch_rel_t *rel, int from)
{
    if (!rel)
        return;
    if (from == rel->owner) {
        st_log_read_release(&rel->read);
        free(rel);
        return;
    }
    st_mesh_send(rel->b->mesh, from, rel->owner, &rel->msg, rel_on_owner);
}

/* st_out_t release hook: runs on the origin shard when the bytes are sent or dropped. */
static void rel_out_release(void *ref)
{
    fetch_rel_t *rel = ref;
    rel_release(rel, rel->origin);
}

static void fetch_release_all(st_fetch_t *f)
{
    for (int i = 0; i < f->nparts; i++) {
        rel_release(f->parts[i].rel, f->r->shard->id);
        f->parts[i].rel = NULL;
        free(f->parts[i].aborted);
        f->parts[i].aborted = NULL;
        f->parts[i].naborted = 0;
    }
}

/* ---- per-owner step ---- */

/* A follower's read on the leader: its fetch offset (its durable log end) and last fetched
 * epoch are validated against this log first (st_part_follower_fetch, KIP-320): a follower
 * whose log diverges gets diverging_epoch and no records, one outside the log
 * OFFSET_OUT_OF_RANGE with the log start and high watermark (follow.h R3). Only then does the
 * partition take the offset as the follower's position (the high watermark may move on it),
 * and the read goes up to the leader's durable end. */
static int16_t fetch_read_replica(st_part_t *p, int32_t replica, fetch_part_t *fp,
                                  st_part_read_t *rd)
{
    int16_t e = st_kleader_follower_local(p, replica);
    if (e)
        return e;
    e = st_part_follower_fetch(p, replica, fp->fetch_offset, fp->last_fetched_epoch,
                               fp->replica_log_start, st_mono_ms(), &fp->div);
    rd->hw = st_part_hw(p);
    rd->log_start = st_part_log_start(p);
    fp->end_seen = st_part_log_end(p);
    if (e || fp->div.epoch >= 0)
        return e;
    e = st_part_read_replica(p, fp->fetch_offset, fp->max_bytes, rd);
    rd->hw = st_part_hw(p); /* the follower's high watermark follows the leader's */
    return e;
}

/* read_committed: the aborted transactions overlapping what the read returned
 * [fetch_offset, upto), so the consumer can drop their records. */
static int fetch_aborted(st_part_t *p, fetch_part_t *fp, int64_t upto)
{
    st_txn_aborted_t few[16];
    int n = st_part_aborted(p, fp->fetch_offset, upto, few, 16);
    if (n == 0)
        return 0;
    fp->aborted = malloc((size_t)n * sizeof *fp->aborted);
    if (!fp->aborted)
        return -ENOMEM;
    if (n <= 16)
        memcpy(fp->aborted, few, (size_t)n * sizeof *few);
    else
        n = st_part_aborted(p, fp->fetch_offset, upto, fp->aborted, n);
    fp->naborted = n;
    return 0;
}

/* A sampled request's read of fp (on its owner, p its partition, begun at t0) as a span. */
static void fetch_trace_read(st_kshard_t *s, st_fetch_t *f, fetch_part_t *fp, st_part_t *p,
                             int64_t t0)
{
    st_span_t sp;
    st_span_init(&sp, &f->r->trace, st_trace_new_id(), "kafka.fetch.read", t0);
    st_span_attr_str(&sp, "messaging.destination.name", p ? st_part_topic(p) : "", -1);
    st_span_attr_int(&sp, "messaging.destination.partition.id", fp->partition);
    st_span_attr_int(&sp, "kafka.fetch_offset", fp->fetch_offset);
    st_span_attr_int(&sp, "kafka.error_code", fp->error);
    st_span_attr_int(&sp, "kafka.high_watermark", fp->hw);
    st_span_attr_int(&sp, "strata.bytes", fp->rel ? (int64_t)fp->rel->read.bytes : 0);
    st_span_attr_int(&sp, "strata.shard", s->id);
    st_span_attr_int(&sp, "strata.remote", s->id != f->r->shard->id);
    st_span_attr_int(&sp, "strata.round", f->rounds);
    sp.error = fp->error != 0;
    st_span_end(&sp, st_mono_ns());
}

static void fetch_read_part(st_kshard_t *s, st_fetch_t *f, fetch_part_t *fp, st_part_t *p,
                            int origin);

static void fetch_read_one(st_kshard_t *s, st_fetch_t *f, fetch_part_t *fp, int origin)
{
    st_part_t *p = st_parts_get(&s->parts, fp->topic_id, fp->partition);
    if (!f->r->span) {
        fetch_read_part(s, f, fp, p, origin);
        return;
    }
    int64_t t0 = st_mono_ns();
    fetch_read_part(s, f, fp, p, origin);
    fetch_trace_read(s, f, fp, p, t0);
}

/* fetch_read_one's work: the read of fp from p (NULL: not here). */
static void fetch_read_part(st_kshard_t *s, st_fetch_t *f, fetch_part_t *fp, st_part_t *p,
                            int origin)
{
    if ((fp->error = st_kleader_local(s, p)))
        return;
    st_part_read_t rd = {.hw = fp->hw, .log_start = fp->log_start, .lso = fp->lso};
    bool committed = f->replica_id < 0 && f->req.isolation_level == 1;
    if (f->replica_id >= 0)
        fp->error = fetch_read_replica(p, f->replica_id, fp, &rd);
    else if (committed)
        fp->error = st_part_read_committed(p, fp->fetch_offset, fp->max_bytes, &rd);
    else
        fp->error = st_part_read(p, fp->fetch_offset, fp->max_bytes, &rd);
    fp->hw = rd.hw;
    fp->log_start = rd.log_start;
    fp->lso = f->replica_id >= 0 ? st_part_lso(p) : rd.lso;
    if (fp->error || rd.read.bytes == 0)
        return;
    if (committed && fetch_aborted(p, fp, rd.read.next_offset) < 0) {
        st_log_read_release(&rd.read);
        fp->error = ST_KERR_UNKNOWN_SERVER_ERROR;
        return;
    }
    fetch_rel_t *rel = calloc(1, sizeof *rel); /* only for a read that holds bytes */
    if (!rel) {
        st_log_read_release(&rd.read);
        fp->error = ST_KERR_UNKNOWN_SERVER_ERROR;
        return;
    }
    rel->read = rd.read;
    rel->b = s->b;
    rel->owner = s->id;
    rel->origin = origin;
    fp->rel = rel;
}

/* On each owner shard: its partitions' reads. */
static void fetch_run(st_fanout_leg_t *leg)
{
    st_kshard_t *s = st_kshard_current();
    st_fetch_t *f = leg->data;
    for (int i = 0; i < f->nparts; i++)
        if (f->parts[i].owner == s->id)
            fetch_read_one(s, f, &f->parts[i], f->r->shard->id);
}

typedef struct {
    st_msg_t msg;
    st_broker_t *b;
    int waiter;
    uint8_t topic_id[16];
    int32_t partition;
    int32_t replica_id; /* >= 0: a follower's fetch, waiting on the log end and the hw */
    bool committed;     /* read_committed: waiting on the last stable offset */
    int64_t seen;       /* the high watermark (log end, LSO) the fetch's last read saw */
    int64_t seen_hw;    /* a follower's fetch: the high watermark its last read saw */
} fetch_reg_t;

static void fetch_reg_on_owner(st_msg_t *m)
{
    fetch_reg_t *g = (fetch_reg_t *)m;
    st_kshard_t *s = st_kshard_current();
    st_part_t *p = st_parts_get(&s->parts, g->topic_id, g->partition);
    bool ok = p && st_part_online(p) && !st_kleader_local(s, p);
    if (ok && g->replica_id >= 0 && !st_kleader_follower_local(p, g->replica_id))
        st_part_add_replica_waiter(p, g->waiter, g->seen, g->seen_hw);
    else if (ok && g->replica_id < 0 && g->committed)
        st_part_add_lso_waiter(p, g->waiter, g->seen);
    else if (ok && g->replica_id < 0)
        st_part_add_waiter(p, g->waiter, g->seen);
    else
        st_fetch_notify(s, g->waiter, g->topic_id, g->partition);
    free(g);
}

/* ---- rounds ---- */

static void fetch_round(st_fetch_t *f);
static void fetch_respond(st_fetch_t *f);

static void fetch_unlink(st_fetch_t *f)
{
    if (!f->waiting)
        return;
    st_kafka_shard_t *ks = st_kafka_shard(f->r->shard);
    if (f->prev)
        f->prev->next = f->next;
    else
        ks->waits = f->next;
    if (f->next)
        f->next->prev = f->prev;
    f->prev = f->next = NULL;
    f->waiting = false;
}

static void fetch_timeout(st_timer_t *t)
{
    st_fetch_t *f = t->data;
    f->final = true;
    if (!f->waiting)
        return; /* a round is running or queued; it sees `final` */
    fetch_unlink(f);
    fetch_round(f);
}

static void fetch_rerun(st_task_t *t)
{
    st_fetch_t *f = t->data;
    fetch_round(f);
}

static void fetch_wait(st_fetch_t *f)
{
    st_kshard_t *s = f->r->shard;
    fetch_release_all(f);
    for (int i = 0; i < f->nparts; i++) {
        fetch_part_t *fp = &f->parts[i];
        if (fp->owner < 0)
            continue;
        fetch_reg_t *g = calloc(1, sizeof *g);
        if (!g)
            continue;
        g->b = s->b;
        g->waiter = s->id;
        memcpy(g->topic_id, fp->topic_id, 16);
        g->partition = fp->partition;
        g->replica_id = f->replica_id;
        /* Wait for data past what this round saw: the high watermark its read stopped at (a
         * follower's: the log end, and the high watermark too). (The fetch offset would be wrong
         * whenever some data is there already: the owner would see data past it and wake the fetch
         * at once, round after round.) */
        g->committed = f->replica_id < 0 && f->req.isolation_level == 1;
        g->seen = f->replica_id >= 0 ? fp->end_seen : g->committed ? fp->lso : fp->hw;
        g->seen_hw = fp->hw;
        st_mesh_send(s->b->mesh, s->id, fp->owner, &g->msg, fetch_reg_on_owner);
    }
    f->waiting = true;
    if (f->r->span)
        f->wait_since_ns = st_mono_ns();
    f->prev = NULL;
    st_kafka_shard_t *ks = st_kafka_shard(s);
    f->next = ks->waits;
    if (ks->waits)
        ks->waits->prev = f;
    ks->waits = f;
    if (!st_timer_armed(&f->timer))
        st_loop_timer_start_ns(s->loop, &f->timer, f->deadline_ns - st_mono_ns());
}

/* Back on the connection's shard once every owner has read: answer, or wait. */
static void fetch_gathered(void *arg)
{
    st_fetch_t *f = arg;
    int64_t bytes = 0;
    bool error = false, hw_moved = false;
    for (int i = 0; i < f->nparts; i++) {
        fetch_part_t *fp = &f->parts[i];
        if (fp->rel)
            bytes += fp->rel->read.bytes;
        if (fp->error || fp->div.epoch >= 0)
            error = true; /* answered at once (a diverging follower too) */
        /* a follower learns a new high watermark at once (its records become readable there,
         * its transactions' markers stable), not at max_wait */
        if (f->replica_id >= 0 && !fp->error) {
            hw_moved |= fp->hw_known && fp->hw != fp->hw_first;
            if (!fp->hw_known)
                fp->hw_first = fp->hw;
            fp->hw_known = true;
        }
    }
    bool stopping = atomic_load_explicit(&f->r->shard->b->stopping, memory_order_relaxed);
    if (f->final || error || stopping || hw_moved || bytes >= f->req.min_bytes ||
        f->req.max_wait_ms <= 0 || st_mono_ns() >= f->deadline_ns) {
        fetch_respond(f);
        return;
    }
    fetch_wait(f);
}

/* A sampled request's long-poll wait, ended (woken, timed out or cancelled) as a span. */
static void fetch_trace_wait(st_fetch_t *f)
{
    st_span_t sp;
    st_span_init(&sp, &f->r->trace, st_trace_new_id(), "kafka.fetch.wait", f->wait_since_ns);
    st_span_attr_int(&sp, "kafka.max_wait_ms", f->req.max_wait_ms);
    st_span_attr_int(&sp, "strata.timed_out", f->final);
    st_span_end(&sp, st_mono_ns());
    f->wait_since_ns = 0;
}

static void fetch_round(st_fetch_t *f)
{
    st_kshard_t *s = f->r->shard;
    if (f->wait_since_ns)
        fetch_trace_wait(f);
    f->rounds++;
    st_fanout_begin(&f->fan, s->b->mesh, s->id, fetch_run, fetch_gathered, f);
    for (int i = 0; i < f->nparts; i++) {
        fetch_part_t *fp = &f->parts[i];
        fp->error = fp->owner < 0 ? fp->error : 0;
        fp->rel = NULL;
        fp->div = (st_part_diverging_t){-1, -1};
        st_fanout_owner(&f->fan, f->legs, fp->owner);
    }
    st_fanout_end(&f->fan); /* answers at once when no shard was asked */
}

/* ---- the answer ---- */

static int fetch_put_ext(st_kwriter_t *w, void *ext, int32_t len)
{
    st_out_t *o = w->ctx;
    fetch_rel_t *rel = ext;
    (void)len;
    for (int i = 0; i < rel->read.nranges; i++) {
        const st_log_range_t *rg = &rel->read.ranges[i];
        bool last = i == rel->read.nranges - 1;
        int rc = st_out_add_file(o, st_file_fd(rg->file), rg->pos, rg->len,
                                 last ? rel_out_release : NULL, last ? rel : NULL);
        if (rc)
            return rc;
    }
    rel->spliced = true;
    return 0;
}

/* KIP-951 (v12+, in a cluster): the leader each partition refused for leadership should go to;
 * from v16 those leaders' endpoints too. */
static void fetch_answer_leaders(st_kreq_t *r, st_fetch_t *f)
{
    int32_t *ids = st_arena_alloc(&r->arena, (size_t)f->nparts * sizeof *ids + 1);
    int n = 0;
    for (int i = 0; ids && i < f->nparts; i++) {
        fetch_part_t *fp = &f->parts[i];
        st_kp_fetch_resp_current_leader_t *cl = &fp->out->current_leader;
        if (st_kleader_current(r->shard, fp->topic_id, fp->partition, fp->error, &cl->leader_id,
                               &cl->leader_epoch))
            ids[n++] = cl->leader_id;
    }
    const st_md_broker_t **b = NULL;
    int k =
        n > 0 && r->api_version >= 16 ? st_kleader_brokers(&r->arena, r->shard->md, ids, n, &b) : 0;
    f->resp.node_endpoints =
        k > 0 ? st_arena_zalloc(&r->arena, (size_t)k * sizeof *f->resp.node_endpoints) : NULL;
    const st_listener_t *l = st_conn_listener(r->conn);
    for (int i = 0; f->resp.node_endpoints && i < k; i++) {
        const char *h;
        size_t hl;
        int32_t port;
        st_md_broker_endpoint(b[i], l ? l->name : NULL, &h, &hl, &port);
        f->resp.node_endpoints[f->resp.node_endpoints_count++] =
            (st_kp_fetch_resp_node_endpoint_t){b[i]->node_id, (st_kstr_t){h, (int32_t)hl}, port,
                                               b[i]->rack ? st_kstr(b[i]->rack) : ST_KSTR_NULL};
    }
}

/* read_committed: the read's aborted transactions into the answer (the request's arena). */
static void fetch_answer_aborted(st_kreq_t *r, const fetch_part_t *fp,
                                 st_kp_fetch_resp_partition_t *o)
{
    o->aborted_transactions =
        st_arena_alloc(&r->arena, (size_t)fp->naborted * sizeof *o->aborted_transactions);
    if (!o->aborted_transactions)
        return;
    for (int k = 0; k < fp->naborted; k++)
        o->aborted_transactions[k] = (st_kp_fetch_resp_aborted_transaction_t){
            fp->aborted[k].producer_id, fp->aborted[k].first_offset};
    o->aborted_transactions_count = fp->naborted;
}

/* What one Fetch v0-3 converts at most: output bytes, and the time after which no further
 * batch is started (at least one batch is converted, its first message or wrapper whole): the
 * CPU a request may take on the connection's shard. */
#define FETCH_DOWNCONV_MAX_BYTES (4 << 20)
#define FETCH_DOWNCONV_MAX_NS    (20 * 1000000LL)

/*
 * Fetch v0-3: the read's v2 batches converted down to message format v0 (v0-1) or v1 (v2-3)
 * into fp->conv, and the read released (storage/msgconv.h). Bounded like Kafka's lazy
 * down-conversion: no more bytes out than the read held, except that the first message (or
 * compressed wrapper) is always whole; v0-2 also cut at partition_max_bytes, as those versions
 * answer; and no more than `room` bytes (what is left of FETCH_DOWNCONV_MAX_BYTES for the
 * request), no batch started past deadline_ns; so only that much of the read (or its first
 * batch) is read into memory. So a request's memory stays within its reads plus
 * one batch's conversion, its CPU within converting a few MiB. The file bytes are read here, on the
 * connection's shard (the pages a consumer reads are usually cached). Adds the bytes written to
 * *used. Returns the partition's error, or 0.
 */
static int16_t fetch_downconvert(st_fetch_t *f, fetch_part_t *fp, int64_t room, int64_t deadline_ns,
                                 int64_t *used)
{
    st_kreq_t *r = f->r;
    fetch_rel_t *rel = fp->rel;
    int64_t t0 = st_mono_ns();
    st_buf_t in, out;
    st_buf_init(&in);
    st_buf_init(&out);
    /* Only what the conversion may use is read: `room` bytes, or the first batch whole when
     * it is larger (a conversion writes at least as many bytes as it reads, but for dropped
     * headers and control batches; a batch cut at the end is left alone). */
    int64_t want = rel->read.bytes;
    uint8_t hdr[ST_BATCH_HEADER_SIZE];
    st_batch_hdr_t h;
    const st_log_range_t *r0 = &rel->read.ranges[0];
    if (want > room && r0->len >= ST_BATCH_HEADER_SIZE &&
        st_file_pread(r0->file, hdr, sizeof hdr, r0->pos) == (ssize_t)sizeof hdr &&
        st_batch_parse_hdr(hdr, sizeof hdr, &h) == 0)
        want = st_batch_size(&h) > room ? st_batch_size(&h) : room;
    if (want > rel->read.bytes)
        want = rel->read.bytes;
    uint8_t *p = st_buf_extend(&in, (size_t)want);
    int rc = p ? 0 : -ENOMEM;
    for (int i = 0; rc == 0 && i < rel->read.nranges && want > 0; i++) {
        const st_log_range_t *rg = &rel->read.ranges[i];
        int64_t k = rg->len < want ? rg->len : want;
        ssize_t got = st_file_pread(rg->file, p, (size_t)k, rg->pos);
        rc = got == k ? 0 : got < 0 ? (int)got : ST_E_TRUNCATED;
        p += k;
        want -= k;
    }
    st_msgconv_down_opts_t o = {
        .magic = r->api_version <= 1 ? 0 : 1,
        .fetch_offset = fp->fetch_offset,
        .limit = rel->read.bytes < room ? rel->read.bytes : room,
        .cap = r->api_version <= 2 ? (fp->max_bytes > 0 ? fp->max_bytes : 0) : -1,
        .max_out = (int64_t)r->shard->b->cfg->message_max_bytes * ST_BATCH_INFLATE_FACTOR,
        .deadline_ns = deadline_ns,
    };
    st_msgconv_down_res_t res = {0};
    if (rc == 0)
        rc = st_msgconv_down(in.data, in.len, &o, &out, &res);
    st_buf_fini(&in);
    rel_release(rel, r->shard->id);
    fp->rel = NULL;
    st_kshard_stats_t *st = &r->shard->stats;
    atomic_fetch_add_explicit(&st->downconv_ns, (uint64_t)(st_mono_ns() - t0),
                              memory_order_relaxed);
    if (rc) {
        st_buf_fini(&out);
        if (rc != ST_E_UNSUPPORTED)
            ST_WARN("fetch v%d: down-conversion failed: %s", r->api_version, st_strerror(rc));
        return rc == ST_E_UNSUPPORTED ? ST_KERR_UNSUPPORTED_COMPRESSION_TYPE
                                      : ST_KERR_UNKNOWN_SERVER_ERROR;
    }
    atomic_fetch_add_explicit(&st->downconv_records, (uint64_t)res.records, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->downconv_bytes, (uint64_t)out.len, memory_order_relaxed);
    size_t len;
    *used += (int64_t)out.len;
    fp->conv = st_buf_steal(&out, &len);
    fp->out->records = (st_krecords_t){fp->conv, (int32_t)len, NULL};
    return 0;
}

static void fetch_respond(st_fetch_t *f)
{
    st_kreq_t *r = f->r;
    fetch_unlink(f);
    st_loop_timer_stop(r->shard->loop, &f->timer);
    if (f->wait_since_ns)
        fetch_trace_wait(f);
    int64_t budget = f->req.max_bytes > 0 ? f->req.max_bytes : INT32_MAX;
    if (budget > r->shard->b->cfg->fetch_max_bytes)
        budget = r->shard->b->cfg->fetch_max_bytes;
    int64_t used = 0, conv_used = 0, conv_t0 = 0;
    bool any = false;
    for (int i = 0; i < f->nparts; i++) {
        fetch_part_t *fp = &f->parts[i];
        st_kp_fetch_resp_partition_t *o = fp->out;
        o->error_code = fp->error;
        /* out of range: where the log is, so a follower knows where to start (follow.h R3) */
        bool known = !fp->error || (fp->error == ST_KERR_OFFSET_OUT_OF_RANGE && fp->log_start >= 0);
        o->high_watermark = known ? fp->hw : -1;
        o->last_stable_offset = known ? fp->lso : -1;
        o->log_start_offset = known ? fp->log_start : -1;
        if (!fp->error && fp->div.epoch >= 0) {
            o->diverging_epoch.epoch = fp->div.epoch;
            o->diverging_epoch.end_offset = fp->div.end_offset;
        }
        o->aborted_transactions_count = r->api_version >= 4 ? 0 : -1;
        o->records = (st_krecords_t){NULL, 0, NULL};
        if (!fp->rel)
            continue;
        if (fp->naborted > 0 && r->api_version >= 4)
            fetch_answer_aborted(r, fp, o);
        int64_t n = fp->rel->read.bytes;
        if (any && used + n > budget) {
            rel_release(fp->rel, r->shard->id);
            fp->rel = NULL;
            continue;
        }
        any = true;
        used += n;
        o->records = (st_krecords_t){NULL, (int32_t)n, fp->rel};
        if (r->api_version < 4 && (conv_used >= FETCH_DOWNCONV_MAX_BYTES ||
                                   (conv_t0 && st_mono_ns() - conv_t0 >= FETCH_DOWNCONV_MAX_NS))) {
            /* this request has converted its share: the rest answer empty, as those past
             * max_bytes do, and the client asks again */
            rel_release(fp->rel, r->shard->id);
            fp->rel = NULL;
            o->records = (st_krecords_t){NULL, 0, NULL};
            used -= n;
        } else if (r->api_version < 4) {
            /* the log holds message format v2 only: convert down, as Kafka 3.x does */
            if (!conv_t0)
                conv_t0 = st_mono_ns();
            o->error_code = fetch_downconvert(f, fp, FETCH_DOWNCONV_MAX_BYTES - conv_used,
                                              conv_t0 + FETCH_DOWNCONV_MAX_NS, &conv_used);
            if (o->error_code) {
                o->records = (st_krecords_t){NULL, 0, NULL};
                o->high_watermark = o->last_stable_offset = o->log_start_offset = -1;
                r->error_code = o->error_code;
            }
            used += o->records.len - n; /* what goes out, for the quota */
        }
    }
    if (r->api_version >= 12)
        fetch_answer_leaders(r, f);
    /* a consumer's record bytes count against consumer_byte_rate (followers have none) */
    if (f->replica_id < 0)
        f->resp.throttle_time_ms = st_kthrottle_record(r, ST_QUOTA_CONSUMER_BYTE_RATE, used);
    if (r->span) {
        st_span_attr_int(r->span, "strata.rounds", f->rounds);
        st_span_attr_int(r->span, "strata.response_record_bytes", used);
    }
    st_kwriter_t w;
    st_out_t *out = st_kreq_begin(r, &w);
    int rc = -ENOMEM;
    if (out) {
        w.put_ext = fetch_put_ext;
        w.ctx = out;
        rc = st_kp_fetch_resp_encode(&w, r->api_version, &f->resp);
    }
    /* From here the out owns the reads that were spliced in. Any read not spliced (encode
     * failed before reaching it) is released here. */
    for (int i = 0; i < f->nparts; i++)
        if (f->parts[i].rel && !f->parts[i].rel->spliced)
            rel_release(f->parts[i].rel, r->shard->id);
    for (int i = 0; i < f->nparts; i++) {
        free(f->parts[i].aborted);
        free(f->parts[i].conv);
    }
    free(f->legs);
    st_kreq_finish(r, out, rc);
}

void st_fetch_cancel_all(st_kshard_t *s)
{
    st_kafka_shard_t *ks = st_kafka_shard(s);
    while (ks && ks->waits) {
        st_fetch_t *f = ks->waits;
        fetch_unlink(f);
        st_loop_timer_stop(s->loop, &f->timer);
        f->final = true;
        fetch_respond(f);
    }
}

/* ---- notifications ---- */

typedef struct {
    st_msg_t msg;
    st_broker_t *b;
    uint8_t topic_id[16];
    int32_t partition;
} fetch_note_t;

static void fetch_note_on_waiter(st_msg_t *m)
{
    fetch_note_t *n = (fetch_note_t *)m;
    st_kshard_t *s = st_kshard_current();
    st_kafka_shard_t *ks = st_kafka_shard(s);
    for (st_fetch_t *f = ks ? ks->waits : NULL, *next; f; f = next) {
        next = f->next;
        for (int i = 0; i < f->nparts; i++) {
            fetch_part_t *fp = &f->parts[i];
            if (fp->partition == n->partition && memcmp(fp->topic_id, n->topic_id, 16) == 0) {
                fetch_unlink(f);
                st_loop_defer(s->loop, &f->rerun);
                break;
            }
        }
    }
    free(n);
}

void st_fetch_notify(st_kshard_t *owner, int waiter, const uint8_t topic_id[16], int32_t index)
{
    fetch_note_t *n = calloc(1, sizeof *n);
    if (!n)
        return;
    n->b = owner->b;
    memcpy(n->topic_id, topic_id, 16);
    n->partition = index;
    st_mesh_send(owner->b->mesh, owner->id, waiter, &n->msg, fetch_note_on_waiter);
}

/* ---- the handler ---- */

/* The error refusing partition qp of mt (NULL: unknown) before any owner reads it, or 0. */
static int16_t fetch_check(st_kreq_t *r, const st_fetch_t *f, const st_md_topic_t *mt,
                           const st_kp_fetch_req_partition_t *qp, int owner, bool *authorized)
{
    if (!*authorized)
        return f->replica_id >= 0 ? ST_KERR_CLUSTER_AUTHORIZATION_FAILED
                                  : ST_KERR_TOPIC_AUTHORIZATION_FAILED;
    int16_t e = st_kleader_check(r->shard, mt, qp->partition, qp->current_leader_epoch);
    if (!e && f->replica_id >= 0)
        e = st_kleader_follower(r->shard, mt, qp->partition, f->replica_id);
    if (e || owner >= 0)
        return e;
    return mt || r->api_version < 13 ? ST_KERR_UNKNOWN_TOPIC_OR_PARTITION
                                     : ST_KERR_UNKNOWN_TOPIC_ID;
}

void st_kh_fetch(st_kreq_t *r)
{
    st_fetch_t *f = st_arena_zalloc(&r->arena, sizeof *f);
    if (!f || st_kp_fetch_req_decode(&r->body, r->api_version, &f->req)) {
        st_kreq_fail(r, "malformed Fetch request");
        return;
    }
    f->r = r;
    f->replica_id = r->api_version >= 15 ? f->req.replica_state.replica_id : f->req.replica_id;
    if (f->replica_id < 0)
        f->replica_id = -1; /* -2 (a debugging consumer) and others read as consumers do */
    else
        st_kthrottle_exempt(r); /* a follower's: no request_percentage, as in Kafka */
    if (r->span && f->replica_id >= 0) {
        r->span = NULL; /* followers' fetches are not traced: they never stop (otlp.h) */
        r->trace.span_id = 0;
    }
    st_kp_fetch_resp_init(&f->resp);
    st_timer_init(&f->timer, fetch_timeout, f);
    st_task_init(&f->rerun, fetch_rerun, f);
    f->legs = calloc((size_t)r->shard->b->nshards, sizeof *f->legs);
    if (!f->legs) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    for (int i = 0; i < r->shard->b->nshards; i++)
        f->legs[i].data = f;
    int32_t max_wait = f->req.max_wait_ms < 0 ? 0 : f->req.max_wait_ms;
    f->deadline_ns = st_mono_ns() + (int64_t)max_wait * 1000000;

    if (f->req.session_id != 0 || f->req.session_epoch > 0) {
        f->resp.error_code = ST_KERR_FETCH_SESSION_ID_NOT_FOUND;
        r->error_code = f->resp.error_code;
        free(f->legs);
        ST_KREQ_RESPOND(r, fetch, &f->resp);
        return;
    }
    st_kp_fetch_item_t *q = NULL;
    f->nparts = st_kp_fetch_mirror(&r->arena, &f->req, &f->resp, &q);
    f->parts =
        f->nparts < 0 ? NULL : st_arena_zalloc(&r->arena, (size_t)f->nparts * sizeof *f->parts + 1);
    if (!f->parts) {
        free(f->legs);
        st_kreq_fail(r, "out of memory");
        return;
    }
    const st_md_t *md = r->shard->md;
    const st_md_topic_t *mt = NULL;
    /* With ACLs on: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each
     * topic (Kafka's checks) */
    bool authorized = f->replica_id < 0 || st_kauthz_cluster(r, ST_ACL_OP_CLUSTER_ACTION);
    bool follower_ok = authorized;
    for (int k = 0; k < f->nparts; k++) {
        const st_kp_fetch_req_partition_t *qp = q[k].req_partition;
        if (k == 0 || q[k].topic_at != q[k - 1].topic_at) {
            mt = r->api_version >= 13 ? st_md_find_id(md, q[k].topic_id.b)
                                      : st_md_find(md, q[k].topic.ptr, q[k].topic.len);
            if (f->replica_id < 0 && st_kauthz_on(r)) {
                st_kstr_t name = mt ? st_kstr(mt->name) : q[k].topic;
                authorized = name.len >= 0 && st_kauthz(r, ST_ACL_OP_READ, ST_ACL_RES_TOPIC,
                                                        name.ptr, (size_t)name.len);
            } else {
                authorized = follower_ok;
            }
        }
        fetch_part_t *fp = &f->parts[k];
        fp->out = q[k].resp_partition;
        fp->partition = qp->partition;
        fp->fetch_offset = qp->fetch_offset;
        fp->max_bytes = qp->partition_max_bytes;
        fp->last_fetched_epoch = r->api_version >= 12 ? qp->last_fetched_epoch : -1;
        fp->replica_log_start = qp->log_start_offset;
        fp->div = (st_part_diverging_t){-1, -1};
        fp->owner = st_kshard_owner(mt, qp->partition);
        if (mt)
            memcpy(fp->topic_id, mt->id, 16);
        fp->error = fetch_check(r, f, mt, qp, fp->owner, &authorized);
        /* v0-3 need their records converted down; a consumer is refused where the topic (or
         * the broker) turned that off, as Kafka does */
        if (!fp->error && r->api_version < 4 && f->replica_id < 0 &&
            !st_tcfg_int(r->shard->b->cfg, r->shard->md, mt, "message.downconversion.enable"))
            fp->error = ST_KERR_UNSUPPORTED_VERSION;
        if (fp->error)
            fp->owner = -1; /* answered here: no owner reads it */
    }
    if (r->span) {
        st_span_attr_int(r->span, "kafka.topics", f->req.topics_count);
        st_span_attr_int(r->span, "kafka.partitions", f->nparts);
        st_span_attr_int(r->span, "kafka.max_wait_ms", f->req.max_wait_ms);
        st_span_attr_int(r->span, "kafka.min_bytes", f->req.min_bytes);
        if (f->req.topics_count == 1 && mt)
            st_span_attr_str(r->span, "messaging.destination.name", mt->name, -1);
    }
    fetch_round(f);
}
