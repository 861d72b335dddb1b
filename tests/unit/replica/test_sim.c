/*
 * test_sim.c — a deterministic simulation of replication (issue 19), in the manner of
 * FoundationDB's simulator and TigerBeetle's VOPR: NB (four) brokers and a controller in one
 * process and one thread, driven by a seeded PRNG and a virtual clock, so that every run is
 * reproducible from its seed.
 *
 * What runs is the real code: each broker's partition table (partition/, over storage/ on its
 * own faultfs, syncs held until the simulator completes them), its follower state machine
 * (replica/follow.h), and the controller's decisions (cluster/records.h on an st_md_t). What is
 * simulated around it: the network (per-direction links with delay, loss, duplication and
 * one-way cuts that start and heal), the disks (held syncs complete in random order and
 * batches; a crash drops what was not synced, tails torn), crashes and restarts (a new
 * incarnation recovering from its disk), graceful restarts, frozen brokers (SIGSTOP: nothing is
 * processed, then the broker resumes with stale state, its clock jumped or paused), producers
 * (acks all / 1 / 0, idempotent or not), DeleteRecords, preferred elections, clean or
 * unclean elections as the topic's config says, and reassignments (KIP-455): the partition,
 * created with RF = 3 replicas on brokers 1..3, is moved now and then to RF brokers drawn at
 * random (half the time off its leader), a move in progress sometimes cancelled; a broker
 * that becomes a replica opens the partition and follows, one that is no longer a replica
 * deletes its copy, which from then on counts for nothing. What a Kafka layer does around the
 * partition (the leader-epoch checks of kafka/leader.c, serving only once the broker's own metadata
 * names its current incarnation) is written here after the issue's rules.
 *
 * The oracle, after every event:
 *   O1. Committed: what a leader's log holds below its high watermark is committed and never
 *       changes afterwards: every copy's log below its own high watermark agrees with it
 *       batch by batch (base and last offset, CRC, length, leader epoch), and every member of
 *       the controller's ISR that is up holds all of it durably (a copy, not one deleted).
 *   O2. acks=all: an append answered success is committed at that moment, and at the end it is
 *       in the leader's log at its offset with its bytes. Excused where the committed log no
 *       longer has it: a retry answered success as the duplicate of a batch DeleteRecords has
 *       since removed (below the leader's log start), as Kafka answers it.
 *   O3. A leader's high watermark never goes back within one leader epoch.
 *   O4. Never two brokers, or two incarnations of one, accept appends in one leader epoch.
 *   O5. DeleteRecords answered with low watermark w: the current leader's log starts at or
 *       after w from then on.
 *   O6. Liveness: once every fault has healed (reassignments stop starting; those in progress
 *       complete), within a bound every broker is up and unfenced, no move is pending, the ISR
 *       is every replica (RF of them), every replica holds the leader's whole log, every high
 *       watermark is the log end, the other brokers hold no copy, and every append has been
 *       answered.
 *   O7. A pipelined idempotent producer modelled on librdkafka's (pipe_prod_t: five requests in
 *       flight, retries after a drain, next_ack_seq moved past a request that timed out) never
 *       meets what librdkafka takes as fatal: OUT_OF_ORDER_SEQUENCE_NUMBER for a batch at or
 *       before next_ack_seq, a success where it expects a failure, an UNKNOWN_PRODUCER_ID it
 *       cannot retry. Excused, as Kafka would answer the same: after an unclean election, after
 *       a leader took one of its batches at any sequence (it held nothing of the producer),
 *       or for a retry of a batch DeleteRecords took.
 * With unclean election enabled, an election outside the ISR may lose records: O1 and O2 start
 * over from that leader's epoch (records acknowledged before it are not required at the end).
 *
 * Replay: a failure prints the seed, the step and the last events. Run it again alone with
 *     build-test/tests/replica_test_sim --seed N [--steps M] -v
 * (-v prints every event as it happens; -vv adds the server's own log lines). Without
 * arguments it runs 500 seeds from 1; STRATA_SIM_SEEDS sets how many (20000 for `make chaos`),
 * --seeds K and --first S too; --keep-going runs every seed and counts the failing ones;
 * --no-isr-check leaves out O1's ISR half, to see what a run comes to beyond it; --moves F
 * multiplies the reassignment rate by F; --no-rejoin-race keeps the operator from re-adding a
 * broker that has not yet deleted the copy a move took from it (see stale_copy).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "cluster/metadata.h"
#include "cluster/records.h"
#include "io/loop.h"
#include "partition/partition.h"
#include "partition/part_impl.h"
#include "proto/kerr.h"
#include "replica/follow.h"
#include "storage/testutil.h"

/* ---- the cluster's shape and its clocks (virtual milliseconds) ---- */

#define NB                 4        /* brokers, ids 1..NB */
#define RF                 3        /* the partition's replicas (at creation and per move) */
#define NODE_CTL           0        /* the controller's node */
#define NODE_CLIENT        (NB + 1) /* producers and the admin client */
#define NNODES             (NB + 2)
#define MIN_ISR            2
#define TOPIC              "sim"
#define TICK_MS            10  /* one step */
#define HB_MS              50  /* broker heartbeat */
#define REG_MS             200 /* registration retried until the broker sees itself */
#define SESSION_MS         400 /* broker session timeout at the controller */
#define MD_RESEND_MS       100 /* the controller resends metadata to a broker behind */
#define LAG_MS             500 /* replica.lag.time.max.ms */
#define ISR_RETRY_MS       200 /* an unanswered AlterPartition is asked again */
#define FETCH_TIMEOUT_MS   250 /* a follower's fetch unanswered this long is sent again */
#define FETCH_IDLE_MS      20  /* after an empty answer (the leader's long poll, shortened) */
#define FETCH_BACKOFF_MS   50  /* DO_BACKOFF */
#define PRODUCE_TIMEOUT_MS 1000
#define DELETE_TIMEOUT_MS  1500
/* The liveness bound after every fault healed: 15 s beyond the leadership's grace for producers'
 * gaps (a leadership begun as the faults heal answers a producer's gap NOT_LEADER_OR_FOLLOWER
 * for all of ST_PART_GAP_GRACE_MS before OUT_OF_ORDER, after which the producer recovers); a
 * bound of 30 s, the grace itself, failed seed 15903 when the last leadership began late */
#define SETTLE_MAX_STEPS (ST_PART_GAP_GRACE_MS / TICK_MS + 1500)
#define TRACE_LINES      4096 /* ring of recent events (the last TRACE_SHOW are printed) */
#define TRACE_SHOW       80
#define TRACE_LEN        200

#define WALL0 1700000000000LL /* the wall clock (record timestamps, storage's clock) at 0 */

static const uint8_t TOPIC_ID[16] = {0x5e, 0x11, 0xa7, 0x10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};

/* ---- PRNG: splitmix64 to seed, xorshift64* to draw ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct rng {
    uint64_t s;
} rng_t;

static uint64_t rnd(rng_t *r)
{
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [lo, hi]. */
static int64_t rnd_in(rng_t *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rnd(r) % (uint64_t)(hi - lo + 1));
}

/* True with probability p. */
static bool chance(rng_t *r, double p)
{
    return (double)(rnd(r) >> 11) * (1.0 / 9007199254740992.0) < p;
}

/* ---- messages ---- */

typedef enum mkind {
    M_MD,           /* controller -> broker: a metadata snapshot */
    M_REGISTER,     /* broker -> controller: a new incarnation */
    M_HEARTBEAT,    /* broker -> controller: alive, at metadata version */
    M_ALTER,        /* leader -> controller: AlterPartition */
    M_FETCH,        /* follower -> leader */
    M_FETCH_RESP,   /* leader -> follower */
    M_PRODUCE,      /* client -> broker */
    M_PRODUCE_RESP, /* broker -> client */
    M_DELETE,       /* client -> broker: DeleteRecords */
    M_DELETE_RESP,  /* broker -> client */
} mkind_t;

typedef struct msg {
    mkind_t kind;
    int from, to;
    uint64_t to_inc; /* the destination broker's incarnation (metadata goes to any) */
    int64_t due;
    uint64_t seq;
    st_md_t *md;     /* M_MD (a reference) */
    uint64_t inc;    /* M_REGISTER, M_HEARTBEAT: the sender's incarnation */
    int64_t version; /* M_HEARTBEAT: metadata version applied */
    st_rec_alter_t alter;
    uint64_t req; /* request id, echoed in the answer */
    /* M_FETCH */
    int32_t replica, leader_epoch, last_epoch;
    int64_t fetch_offset, log_start;
    int32_t max_bytes;
    /* M_FETCH_RESP (and error for the other answers) */
    int16_t error;
    int64_t hw, resp_log_start, div_end;
    int32_t div_epoch;
    uint8_t *data; /* M_FETCH_RESP records, M_PRODUCE batch (owned) */
    size_t len;
    /* M_PRODUCE */
    int producer;
    int acks;
    int64_t base_offset; /* M_PRODUCE_RESP */
    int64_t offset;      /* M_DELETE; M_DELETE_RESP: the low watermark */
} msg_t;

/* ---- brokers ---- */

typedef struct broker {
    int32_t id;
    tenv_t t; /* its disk (faultfs) and storage env, kept across incarnations */
    st_parts_t parts;
    st_part_t *p; /* the one partition */
    bool hosted;  /* it holds a copy on disk (opened at start; deleted once not a replica) */
    bool up;
    uint64_t inc; /* incarnation (0 while down) */
    bool dying;   /* inside a crash: callbacks of the dead process are dropped */
    bool frozen;
    int64_t frozen_since, frozen_until;
    bool clock_pauses; /* this freeze pauses the broker's clock (else the clock jumps) */
    int64_t clock_lag; /* ms the broker's clock is behind the simulation's */
    int64_t down_until;
    int64_t crash_at; /* a crash drawn when it served a follower unsynced records (0: none) */
    st_md_t *md;      /* the newest metadata it applied (NULL: none yet) */
    bool registered;  /* its md names this incarnation */
    int64_t last_hb, last_reg;
    /* follower */
    bool following;
    int32_t f_leader;
    st_rfollow_t f;
    uint64_t f_gen; /* bumped by every st_rfollow_init: older jobs and answers are stale */
    bool fetch_inflight;
    uint64_t fetch_req;
    int64_t fetch_sent, next_fetch;
    int32_t hw_epoch; /* the leader epoch of the answer its leader hw came from (-1: none) */
    /* oracle */
    int64_t verified; /* its log is checked against the committed batches below this */
    int pending;      /* produce / delete answers it owes */
} broker_t;

/* The controller's view of a broker. */
typedef struct ctl_broker {
    uint64_t inc; /* registered incarnation */
    int64_t last_hb;
    int64_t unfence_at;    /* metadata version it must have applied to be unfenced */
    int64_t acked_version; /* newest version its heartbeats reported */
    int64_t last_md_sent;
} ctl_broker_t;

/* ---- producers and the admin client ---- */

typedef struct producer {
    st_acks_t acks;
    bool idem;
    int64_t pid;
    int16_t pepoch;
    int32_t seq;
    bool busy; /* a batch is outstanding (being sent or retried) */
    st_buf_t batch;
    int32_t count;
    int64_t next_ms;
    uint64_t req;
    int64_t sent_ms;
    bool waiting; /* a request is out, its answer not back */
    int tries;
} producer_t;

#define NPRODUCERS 4

/*
 * A pipelined idempotent producer, after librdkafka's (v2.0.2: rdkafka_request.c's Produce
 * result and error handling, rdkafka_broker.c's producer_serve and request timeouts): acks
 * all, up to five requests in flight to the broker it takes for the leader, one batch a
 * request. Its batches keep their bounds across retries (librdkafka's last_msgid); a batch's
 * sequence is its first message's id less the epoch's base id. It keeps next_ack_seq and
 * next_err_seq as librdkafka does, drains (waits for every answer) before retrying and
 * before producing to a new leader, and bumps its epoch (locally, after a drain) where
 * librdkafka does: an OUT_OF_ORDER_SEQUENCE_NUMBER past next_ack_seq, an UNKNOWN_PRODUCER_ID
 * it may recover from, a permanent error (whose batch fails: given up). What librdkafka
 * raises as a fatal error fails O7. Its connections are TCP's: in order, and what follows a
 * loss is lost too, until the request timeout (socket.max.fails 1) closes the connection.
 */
#define PIPE            NPRODUCERS /* its number in produce requests */
#define PIPE_INFLIGHT   5          /* max.in.flight (librdkafka's idempotence cap) */
#define PIPE_QUEUE      32         /* unacknowledged batches held (more wait to be made) */
#define PIPE_BACKOFF_MS 100        /* retry.backoff.ms */

typedef struct pbatch {
    uint64_t msgid; /* its first message's id (librdkafka's msgid: never renumbered) */
    int32_t count;
    uint64_t rec0; /* its records' values */
    int64_t ts;
    int retries; /* sends whose failure counted as a retry (rkm_u.producer.retries) */
    bool inflight;
    uint64_t req;
    int32_t broker;
    int16_t epoch; /* as last sent */
    int32_t seq;
    int64_t sent_ms;
    int64_t offset; /* where a leader first appended it (-1: none yet) */
} pbatch_t;

typedef struct pconn {
    bool open;
    uint64_t inc; /* the incarnation it reached */
    bool broken;  /* a request or an answer was lost on it: so is what follows, both ways */
} pconn_t;

typedef struct pipe_prod {
    int64_t pid;
    int16_t epoch;
    uint64_t base_msgid; /* rktp_eos.epoch_base_msgid */
    uint64_t next_msgid, acked_msgid;
    int32_t next_ack_seq, next_err_seq;
    pbatch_t q[PIPE_QUEUE]; /* unacknowledged, in msgid order */
    int nq, ninflight;
    int32_t leader;  /* the broker it produces to (-1: to look up) */
    bool wait_drain; /* rktp_eos.wait_drain */
    bool bump;       /* drain, then bump the epoch (rd_kafka_idemp_drain_epoch_bump) */
    int64_t next_ms;
    bool dead; /* a fatal error was raised where O7 excuses it */
    pconn_t conn[NB + 1];
    st_buf_t buf;
    int32_t gap_epoch;    /* a leader took a batch of this epoch anywhere (-1: none) */
    int32_t forgot_epoch; /* a leader forgot a batch of this epoch DeleteRecords took */
    /* the last batches delivered, where a leader first wrote them (for O7's excuse: a gap
     * left by delivered batches that DeleteRecords removed since) */
    struct {
        int16_t epoch;
        int32_t seq;
        int64_t offset;
    } done[PIPE_QUEUE];
    int ndone;
    uint64_t n_acked, n_bumps, n_conn_fail, n_failed, n_excused, n_gaps, n_forgot;
} pipe_prod_t;

/* A committed batch, or a batch as a log holds it. */
typedef struct sbatch {
    int64_t base, last;
    uint32_t crc;
    int32_t len, epoch;
} sbatch_t;

/* An acks=all success, to be checked. */
typedef struct acked {
    int64_t base, last;
    uint32_t crc;
    int32_t broker, epoch;
    int gen; /* unclean elections before it */
    int64_t step;
    bool deleted; /* answered below the leader's log start: a duplicate of a deleted batch */
} acked_t;

/* Who accepted appends at a leader epoch. */
typedef struct accept {
    int32_t broker;
    uint64_t inc;
} accept_t;

typedef struct sim {
    uint64_t seed;
    rng_t r;
    int64_t step, now;
    int steps, fault_steps;
    int verbose;
    bool isr_check; /* O1's ISR half (off: --no-isr-check) */
    bool healed;
    st_loop_t *loop;
    broker_t b[NB + 1]; /* b[1..NB] */
    uint64_t inc_next;
    /* controller */
    st_md_t *md;
    ctl_broker_t cb[NB + 1];
    bool unclean, unclean_default; /* the topic's setting (when set), the broker default */
    bool unclean_set;
    /* network */
    msg_t **q;
    size_t nq, capq;
    uint64_t msg_seq, req_next;
    bool cut[NNODES][NNODES];
    int64_t cut_until[NNODES][NNODES];
    int64_t link_due[NNODES][NNODES];
    double p_loss, p_dup, p_slow;
    /* fault rates of this seed */
    double p_crash, p_freeze, p_cut, p_pref, p_delete, p_reassign, p_cancel;
    /* p_ahead: a leader that answers a follower with records it has not synced crashes within
     * a few steps (before or after the follower syncs them); p_all: every broker loses power
     * at once */
    double p_ahead, p_all;
    /* clients */
    producer_t pr[NPRODUCERS];
    pipe_prod_t pp;
    uint64_t record_id;
    bool del_waiting;
    uint64_t del_req;
    int64_t del_sent;
    /* oracle */
    sbatch_t *com; /* committed batches, by base offset */
    size_t ncom, capcom;
    int64_t com_end; /* the committed offsets end here (-1: none yet) */
    acked_t *acks;
    size_t nacks, capacks;
    size_t acks_checked;
    int64_t *hwmax; /* by leader epoch: the largest high watermark a leader showed */
    accept_t *acc;  /* by leader epoch */
    int32_t nepochs;
    int unclean_gen;
    int32_t min_epoch;  /* leaders below this epoch (before an unclean election) are stale */
    int64_t acked_lw;   /* the largest DeleteRecords low watermark answered */
    int acked_lw_gen;   /* unclean elections before it was (an unclean one may undo it) */
    int64_t max_delete; /* the largest DeleteRecords offset a leader took */
    /* trace */
    st_buf_t readbuf; /* the oracle's reads */
    char (*trace)[TRACE_LEN];
    uint64_t ntrace;
    jmp_buf fail;
    char why[512];
    /* stats */
    uint64_t n_acked, n_crash, n_freeze, n_unclean, n_elect, n_truncate, n_reassign, n_moved,
        n_cancel, n_deleted_dup;
    /* crashes of a leader while a follower held, durably, records the leader had not synced
     * (followers read up to the leader's log end): the state where that rule could lose or
     * resurrect records */
    uint64_t n_ahead_crash;
} sim_t;

/* ---- trace and failure ---- */

static void ev(sim_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ev(sim_t *s, const char *fmt, ...)
{
    char *line = s->trace[s->ntrace++ % TRACE_LINES];
    int k = snprintf(line, TRACE_LEN, "[%5" PRId64 " %6" PRId64 "] ", s->step, s->now);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + k, (size_t)(TRACE_LEN - k), fmt, ap);
    va_end(ap);
    if (s->verbose)
        printf("%s\n", line);
}

static void fail(sim_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail(sim_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (!s->verbose) {
        uint64_t from = s->ntrace > TRACE_SHOW ? s->ntrace - TRACE_SHOW : 0;
        fprintf(stderr, "--- seed %" PRIu64 ": the last %" PRIu64 " events\n", s->seed,
                s->ntrace - from);
        for (uint64_t i = from; i < s->ntrace; i++)
            fprintf(stderr, "%s\n", s->trace[i % TRACE_LINES]);
    }
    fprintf(stderr,
            "FAIL seed %" PRIu64 " step %" PRId64 " (t=%" PRId64 " ms): %s\n"
            "  replay: replica_test_sim --seed %" PRIu64 " --steps %d -v\n",
            s->seed, s->step, s->now, s->why, s->seed, s->steps);
    longjmp(s->fail, 1);
}

#define CHECK(s, cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fail(s, __VA_ARGS__);                                                                  \
    } while (0)

/* ---- small helpers ---- */

static int64_t bnow(const sim_t *s, const broker_t *b)
{
    return s->now - b->clock_lag;
}

static const st_md_partition_t *md_part(const st_md_t *md)
{
    return md && md->ntopics > 0 && md->topics[0]->npartitions > 0 ? &md->topics[0]->partitions[0]
                                                                   : NULL;
}

static st_md_broker_t *md_broker_mut(st_md_t *md, int32_t id)
{
    for (int i = 0; i < md->nbrokers; i++)
        if (md->brokers[i].node_id == id)
            return &md->brokers[i];
    return NULL;
}

static void fmt_isr(char *out, size_t n, const int32_t *isr, int nisr)
{
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < nisr && k + 4 < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%d", i ? "," : "", (int)isr[i]);
}

/* The broker leads the partition as far as it can tell: its metadata names its incarnation,
 * unfenced, and says it leads at the epoch its partition's role has. */
static bool b_serving(const broker_t *b)
{
    if (!b->up || !b->md || !b->registered || !b->p || !b->p->log)
        return false;
    const st_md_broker_t *me = st_md_broker(b->md, b->id);
    const st_md_partition_t *mp = md_part(b->md);
    return me && !me->fenced && me->incarnation == b->inc && mp && mp->leader == b->id &&
           b->p->repl.on && b->p->repl.role.leader &&
           b->p->repl.role.leader_epoch == mp->leader_epoch;
}

/* kafka/leader.c's checks of a request's current leader epoch against this broker's view. */
static int16_t b_leader_check(const broker_t *b, int32_t current_epoch)
{
    const st_md_partition_t *mp = md_part(b->md);
    if (!b->registered || !mp || !st_md_is_replica(mp, b->id))
        return ST_KERR_NOT_LEADER_OR_FOLLOWER;
    if (current_epoch >= 0 && current_epoch < mp->leader_epoch)
        return ST_KERR_FENCED_LEADER_EPOCH;
    if (current_epoch > mp->leader_epoch)
        return ST_KERR_UNKNOWN_LEADER_EPOCH;
    return b_serving(b) ? 0 : ST_KERR_NOT_LEADER_OR_FOLLOWER;
}

/* ---- the network ---- */

static msg_t *msg_new(mkind_t kind, int from, int to)
{
    msg_t *m = calloc(1, sizeof *m);
    if (!m)
        abort();
    m->kind = kind;
    m->from = from;
    m->to = to;
    m->div_epoch = -1;
    return m;
}

static void msg_free(msg_t *m)
{
    if (m->md)
        st_md_unref(m->md);
    free(m->data);
    free(m);
}

static msg_t *msg_dup(const msg_t *m)
{
    msg_t *d = msg_new(m->kind, m->from, m->to);
    *d = *m;
    if (m->md)
        st_md_ref(m->md);
    if (m->data) {
        d->data = malloc(m->len ? m->len : 1);
        memcpy(d->data, m->data, m->len);
    }
    return d;
}

static void net_push(sim_t *s, msg_t *m)
{
    if (s->nq == s->capq) {
        s->capq = s->capq ? s->capq * 2 : 64;
        s->q = realloc(s->q, s->capq * sizeof *s->q);
    }
    s->q[s->nq++] = m;
}

/* The pipelined producer's requests and answers go over its connection to the broker: TCP
 * loses nothing in the middle of a stream, so what a cut or a loss takes it takes up to the
 * connection's end, both ways (the producer's request timeout closes it); an answer on a
 * connection already closed is dropped with it. */
static bool pipe_net_drops(sim_t *s, const msg_t *m)
{
    pipe_prod_t *p = &s->pp;
    bool req = m->kind == M_PRODUCE;
    int32_t bid = req ? m->to : m->from;
    pconn_t *c = &p->conn[bid];
    if (!req) {
        bool open = false;
        for (int i = 0; i < p->nq; i++)
            if (p->q[i].inflight && p->q[i].req == m->req && p->q[i].broker == bid)
                open = true;
        if (!open)
            return true;
    }
    if (!c->broken && (s->cut[m->from][m->to] || chance(&s->r, s->p_loss)))
        c->broken = true;
    return c->broken;
}

/* Sends m: dropped on a cut link or by loss, else due after the link's delay (in order on a
 * link: TCP), now and then duplicated (a resend). */
static void net_send(sim_t *s, msg_t *m)
{
    bool pipe = (m->kind == M_PRODUCE || m->kind == M_PRODUCE_RESP) && m->producer == PIPE;
    if (pipe ? pipe_net_drops(s, m) : s->cut[m->from][m->to] || chance(&s->r, s->p_loss)) {
        msg_free(m);
        return;
    }
    int64_t delay = chance(&s->r, s->p_slow) ? rnd_in(&s->r, 5, 30) : rnd_in(&s->r, 1, 3);
    int64_t due = s->now + delay * TICK_MS;
    if (due < s->link_due[m->from][m->to])
        due = s->link_due[m->from][m->to];
    s->link_due[m->from][m->to] = due;
    m->due = due;
    m->seq = ++s->msg_seq;
    bool dupable = m->kind == M_MD || m->kind == M_FETCH || m->kind == M_FETCH_RESP ||
                   m->kind == M_HEARTBEAT || m->kind == M_ALTER;
    if (dupable && chance(&s->r, s->p_dup)) {
        msg_t *d = msg_dup(m);
        d->due = due + rnd_in(&s->r, 0, 3) * TICK_MS;
        d->seq = ++s->msg_seq;
        s->link_due[m->from][m->to] = d->due;
        net_push(s, d);
    }
    net_push(s, m);
}

/* ---- the oracle ---- */

static void epochs_grow(sim_t *s, int32_t epoch)
{
    if (epoch < s->nepochs)
        return;
    int32_t n = s->nepochs ? s->nepochs : 64;
    while (n <= epoch)
        n *= 2;
    s->hwmax = realloc(s->hwmax, (size_t)n * sizeof *s->hwmax);
    s->acc = realloc(s->acc, (size_t)n * sizeof *s->acc);
    for (int32_t i = s->nepochs; i < n; i++) {
        s->hwmax[i] = -1;
        s->acc[i] = (accept_t){-1, 0};
    }
    s->nepochs = n;
}

/* The committed batch whose base is `base`, or the one holding offset `base` (*exact false),
 * or NULL. */
static const sbatch_t *com_find(const sim_t *s, int64_t base, bool *exact)
{
    size_t lo = 0, hi = s->ncom;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->com[mid].last < base)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == s->ncom || s->com[lo].base > base)
        return NULL;
    *exact = s->com[lo].base == base;
    return &s->com[lo];
}

static void com_add(sim_t *s, const sbatch_t *h)
{
    if (s->ncom == s->capcom) {
        s->capcom = s->capcom ? s->capcom * 2 : 256;
        s->com = realloc(s->com, s->capcom * sizeof *s->com);
    }
    s->com[s->ncom++] = *h;
    s->com_end = h->last + 1;
}

/* Reads the headers of log's whole batches from the one holding `from` up to the one holding
 * upto - 1 (INT64_MAX: the log end) into *out (malloc'd); returns how many. */
static size_t log_batches(sim_t *s, st_log_t *log, int64_t from, int64_t upto, sbatch_t **out)
{
    size_t n = 0, cap = 0;
    *out = NULL;
    int64_t end = st_log_end_offset(log);
    if (from < st_log_start_offset(log))
        from = st_log_start_offset(log);
    st_buf_t *buf = &s->readbuf;
    while (from < end && from < upto) {
        st_log_read_t rd;
        int rc = st_log_read(log, from, 16 << 10, upto < end ? upto : -1, &rd);
        CHECK(s, rc == 0, "reading a log at %" PRId64 ": %s", from, st_strerror(rc));
        st_buf_clear(buf);
        int64_t next = rd.next_offset;
        uint8_t *d = rd.bytes > 0 ? st_buf_extend(buf, (size_t)rd.bytes) : NULL;
        ssize_t got = d ? st_log_read_copy(&rd, d, (size_t)rd.bytes) : 0;
        st_log_read_release(&rd);
        CHECK(s, got >= 0, "reading a log at %" PRId64 ": %s", from, st_strerror((int)got));
        if (buf->len == 0)
            break;
        for (size_t pos = 0; pos < buf->len;) {
            st_batch_hdr_t h;
            rc = st_batch_check(buf->data + pos, buf->len - pos, &h);
            CHECK(s, rc == 0, "a corrupt batch in a log at %" PRId64 " (+%zu): %s", from, pos,
                  st_strerror(rc));
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                *out = realloc(*out, cap * sizeof **out);
            }
            (*out)[n++] = (sbatch_t){h.base_offset, st_batch_last_offset(&h), h.crc, h.batch_length,
                                     h.partition_leader_epoch};
            pos += (size_t)st_batch_size(&h);
        }
        CHECK(s, next > from, "a read at %" PRId64 " did not advance", from);
        from = next;
    }
    return n;
}

static bool b_leads_now(const sim_t *s, const broker_t *b)
{
    return b->up && b->p && b->p->log && b->p->repl.on && b->p->repl.role.leader &&
           b->p->repl.role.leader_epoch >= s->min_epoch;
}

/* O1 for one broker: its log below its high watermark, from where it was last checked,
 * against the committed batches; a leader's extends them. */
static void check_broker_log(sim_t *s, broker_t *b)
{
    if (!b->up || !b->p || !b->p->log || !b->p->repl.on)
        return; /* no role yet: not served (its hw is the log end until it has one) */
    st_part_t *p = b->p;
    int64_t hw = p->hw, start = st_part_log_start(p), end = st_log_end_offset(p->log);
    CHECK(s, start <= hw && hw <= end,
          "broker %d: log start %" PRId64 ", hw %" PRId64 ", log end %" PRId64 " out of order",
          b->id, start, hw, end);
    bool leader = b_leads_now(s, b);
    if (!leader && s->unclean_gen > 0 && b->hw_epoch < s->min_epoch)
        return; /* its hw may be from a leader an unclean election overruled */
    if (b->verified < start)
        b->verified = start;
    if (b->verified >= hw)
        return;
    sbatch_t *v;
    size_t n = log_batches(s, p->log, b->verified, hw, &v);
    for (size_t i = 0; i < n && v[i].last < hw; i++) {
        bool exact = false;
        const sbatch_t *c = com_find(s, v[i].base, &exact);
        if (c && exact) {
            CHECK(s,
                  c->last == v[i].last && c->crc == v[i].crc && c->len == v[i].len &&
                      c->epoch == v[i].epoch,
                  "O1: broker %d (%s, hw %" PRId64 ") holds at %" PRId64 "..%" PRId64
                  " crc %08x epoch %d; committed there: %" PRId64 "..%" PRId64 " crc %08x epoch %d",
                  b->id, leader ? "leader" : "follower", hw, v[i].base, v[i].last, v[i].crc,
                  (int)v[i].epoch, c->base, c->last, c->crc, (int)c->epoch);
        } else if (c) {
            fail(s,
                 "O1: broker %d: batch %" PRId64 "..%" PRId64 " below its hw %" PRId64
                 " straddles committed batch %" PRId64 "..%" PRId64,
                 b->id, v[i].base, v[i].last, hw, c->base, c->last);
        } else if (v[i].base >= s->com_end || s->com_end < 0) {
            CHECK(s, leader,
                  "O1: follower %d's hw %" PRId64 " is past what any leader committed (%" PRId64
                  "): batch %" PRId64 "..%" PRId64 " epoch %d",
                  b->id, hw, s->com_end, v[i].base, v[i].last, (int)v[i].epoch);
            CHECK(s, s->com_end < 0 || v[i].base == s->com_end || v[i].base == start,
                  "O1: leader %d commits %" PRId64 "..%" PRId64 " after a gap from %" PRId64, b->id,
                  v[i].base, v[i].last, s->com_end);
            com_add(s, &v[i]);
        } else if (s->ncom > 0 && v[i].last < s->com[0].base) {
            /* below the first committed batch (an unclean election started over) */
        } else {
            fail(s,
                 "O1: broker %d: batch %" PRId64 "..%" PRId64 " below its hw %" PRId64
                 " where nothing was committed (committed end %" PRId64 ")",
                 b->id, v[i].base, v[i].last, hw, s->com_end);
        }
        b->verified = v[i].last + 1;
    }
    free(v);
}

/* O3, O5 and the acks waiting to be checked (O2's first half), after every event. */
static void oracle_event(sim_t *s)
{
    for (int i = 1; i <= NB; i++) {
        broker_t *b = &s->b[i];
        if (!b_leads_now(s, b))
            continue;
        check_broker_log(s, b);
        int32_t e = b->p->repl.role.leader_epoch;
        epochs_grow(s, e);
        CHECK(s, b->p->hw >= s->hwmax[e],
              "O3: leader %d's hw went back from %" PRId64 " to %" PRId64 " in epoch %d", b->id,
              s->hwmax[e], b->p->hw, (int)e);
        s->hwmax[e] = b->p->hw;
        const st_md_partition_t *mp = md_part(s->md);
        if (mp->leader == b->id && mp->leader_epoch == e && b->p->hw > st_part_log_start(b->p) &&
            s->acked_lw_gen == s->unclean_gen)
            CHECK(s, st_part_log_start(b->p) >= s->acked_lw,
                  "O5: leader %d serves from %" PRId64 ", below the acknowledged DeleteRecords "
                  "low watermark %" PRId64,
                  b->id, st_part_log_start(b->p), s->acked_lw);
    }
    for (; s->acks_checked < s->nacks; s->acks_checked++) {
        const acked_t *a = &s->acks[s->acks_checked];
        if (a->gen < s->unclean_gen)
            continue;
        bool exact = false;
        const sbatch_t *c = com_find(s, a->base, &exact);
        if (a->deleted && !(c && exact)) {
            s->n_deleted_dup++;
            continue;
        }
        CHECK(s, c && exact && c->crc == a->crc && c->last == a->last,
              "O2: acks=all success at %" PRId64 "..%" PRId64 " (crc %08x, leader %d epoch %d) "
              "is not committed (committed end %" PRId64 ")",
              a->base, a->last, a->crc, a->broker, a->epoch, s->com_end);
    }
}

/* O1's second half (every ISR member that is up holds the committed batches durably), and
 * the followers' logs. */
static void oracle_step(sim_t *s)
{
    for (int i = 1; i <= NB; i++)
        check_broker_log(s, &s->b[i]);
    const st_md_partition_t *mp = md_part(s->md);
    for (int k = 0; k < mp->nisr && s->com_end >= 0 && s->isr_check; k++) {
        broker_t *b = &s->b[mp->isr[k]];
        if (!b->up || s->unclean_gen > 0)
            continue;
        CHECK(s, b->p, "O1: ISR member %d (partition epoch %d) holds no copy of the partition",
              b->id, (int)mp->partition_epoch);
        if (!b->p->log)
            continue;
        int64_t d = st_part_durable_end(b->p);
        CHECK(s, d >= s->com_end || st_part_log_start(b->p) >= s->com_end,
              "O1: ISR member %d (partition epoch %d) has durable end %" PRId64
              ", below the committed end %" PRId64,
              b->id, (int)mp->partition_epoch, d, s->com_end);
    }
    oracle_event(s);
}

/* O4: broker b accepted an append at its leader epoch. */
static void note_accept(sim_t *s, broker_t *b, int32_t epoch)
{
    epochs_grow(s, epoch);
    accept_t *a = &s->acc[epoch];
    if (a->broker < 0) {
        *a = (accept_t){b->id, b->inc};
        return;
    }
    CHECK(s, a->broker == b->id && a->inc == b->inc,
          "O4: epoch %d: broker %d (incarnation %" PRIu64 ") accepts appends, and broker %d "
          "(incarnation %" PRIu64 ") did",
          (int)epoch, b->id, b->inc, a->broker, a->inc);
}

/* Forgets the committed batches at an unclean election: the new leader's log is the truth. */
static void oracle_unclean(sim_t *s, int32_t epoch)
{
    s->unclean_gen++;
    s->min_epoch = epoch;
    s->ncom = 0;
    s->com_end = -1;
    for (int i = 1; i <= NB; i++)
        s->b[i].verified = 0;
    s->n_unclean++;
}

/* ---- the controller ---- */

static void ctl_send_md(sim_t *s, int32_t id)
{
    msg_t *m = msg_new(M_MD, NODE_CTL, id);
    m->md = st_md_ref(s->md);
    s->cb[id].last_md_sent = s->now;
    net_send(s, m);
}

static bool moving(const st_md_partition_t *mp)
{
    return mp->nadding > 0 || mp->nremoving > 0;
}

static void ctl_publish(sim_t *s, st_md_t *n, const char *why)
{
    const st_md_partition_t *mp = md_part(n);
    st_md_unref(s->md);
    s->md = n;
    char isr[64], reps[64], add[64], rem[64];
    fmt_isr(isr, sizeof isr, mp->isr, mp->nisr);
    fmt_isr(reps, sizeof reps, mp->replicas, mp->nreplicas);
    fmt_isr(add, sizeof add, mp->adding, mp->nadding);
    fmt_isr(rem, sizeof rem, mp->removing, mp->nremoving);
    char fenced[16] = "";
    for (int i = 0; i < n->nbrokers; i++)
        if (n->brokers[i].fenced)
            snprintf(fenced + strlen(fenced), sizeof fenced - strlen(fenced), "%d",
                     (int)n->brokers[i].node_id);
    ev(s,
       "ctl: md v%" PRId64 " (%s): leader %d epoch %d pe %d replicas [%s] (adding [%s] removing "
       "[%s]) isr [%s] fenced {%s}",
       n->version, why, (int)mp->leader, (int)mp->leader_epoch, (int)mp->partition_epoch, reps, add,
       rem, isr, fenced);
    for (int32_t id = 1; id <= NB; id++)
        ctl_send_md(s, id);
}

/* Elects again under n's fencing (st_rec_elect, clean or unclean as the topic says). */
static void ctl_elect(sim_t *s, st_md_t *n)
{
    st_md_topic_t *t = n->topics[0];
    st_md_partition_t *mp = &t->partitions[0];
    bool unclean = st_rec_unclean_allowed(t, s->unclean_default);
    st_md_partition_t clean = *mp;
    st_rec_elect(n, &clean, false);
    int32_t was = mp->leader;
    st_rec_elect(n, mp, unclean);
    if (mp->leader != was)
        s->n_elect++;
    if (clean.leader < 0 && mp->leader >= 0) {
        ev(s, "ctl: UNCLEAN election of %d at epoch %d", (int)mp->leader, (int)mp->leader_epoch);
        oracle_unclean(s, mp->leader_epoch);
    }
}

static void ctl_fence(sim_t *s, int32_t id, const char *why)
{
    st_md_t *n = st_md_clone(s->md);
    md_broker_mut(n, id)->fenced = true;
    ctl_elect(s, n);
    s->cb[id].unfence_at = n->version;
    char w[128];
    snprintf(w, sizeof w, "fence %d: %s", (int)id, why);
    ctl_publish(s, n, w);
}

static void ctl_on_register(sim_t *s, const msg_t *m)
{
    ctl_broker_t *c = &s->cb[m->from];
    if (m->inc == c->inc)
        return; /* a resend */
    c->inc = m->inc;
    c->last_hb = s->now;
    st_md_t *n = st_md_clone(s->md);
    st_md_broker_t *b = md_broker_mut(n, m->from);
    b->fenced = true; /* a new incarnation starts fenced (Kafka's rule) */
    b->incarnation = m->inc;
    b->epoch = n->version;
    ctl_elect(s, n);
    c->unfence_at = n->version;
    char w[128];
    snprintf(w, sizeof w, "register %d incarnation %" PRIu64, m->from, m->inc);
    ctl_publish(s, n, w);
}

static void ctl_on_heartbeat(sim_t *s, const msg_t *m)
{
    ctl_broker_t *c = &s->cb[m->from];
    if (m->inc != c->inc)
        return; /* an older incarnation, or one not registered yet */
    c->last_hb = s->now;
    if (m->version > c->acked_version)
        c->acked_version = m->version;
    const st_md_broker_t *b = st_md_broker(s->md, m->from);
    if (b->fenced && m->version >= c->unfence_at) {
        /* it has seen its fencing (and its registration): it may lead again */
        st_md_t *n = st_md_clone(s->md);
        md_broker_mut(n, m->from)->fenced = false;
        ctl_elect(s, n);
        char w[32];
        snprintf(w, sizeof w, "unfence %d", m->from);
        ctl_publish(s, n, w);
    } else if (m->version < s->md->version && s->now - c->last_md_sent >= MD_RESEND_MS) {
        ctl_send_md(s, m->from);
    }
}

static void ctl_on_alter(sim_t *s, const msg_t *m)
{
    st_md_t *n = st_md_clone(s->md);
    char isr[64];
    fmt_isr(isr, sizeof isr, m->alter.isr, m->alter.nisr);
    int rc = st_rec_alter_isr(n, n->topics[0], &m->alter);
    if (rc == ST_E_AGAIN) {
        /* refused at the current epochs: published as a new partition epoch */
        ev(s, "ctl: AlterPartition from %d (epoch %d pe %d) to [%s] refused: new pe",
           (int)m->alter.leader, (int)m->alter.leader_epoch, (int)m->alter.partition_epoch, isr);
        ctl_publish(s, n, "alter isr refused");
        return;
    }
    if (rc) {
        ev(s, "ctl: AlterPartition from %d (epoch %d pe %d) to [%s] refused", (int)m->alter.leader,
           (int)m->alter.leader_epoch, (int)m->alter.partition_epoch, isr);
        st_md_unref(n);
        return;
    }
    char w[128];
    bool done = moving(md_part(s->md)) && !moving(md_part(n));
    snprintf(w, sizeof w, "alter isr by %d to [%s]%s", (int)m->alter.leader, isr,
             done ? ": the reassignment completes" : "");
    s->n_moved += done;
    ctl_publish(s, n, w);
}

static bool g_rejoin_race = true; /* false: --no-rejoin-race */

/* Whether a broker that is no replica still holds a copy (it has not applied its removal).
 * Re-adding such a broker races with it: the leader could count its fetches from the old copy
 * into the ISR, then it deletes that copy. cluster/records.c bumps the leader epoch whenever
 * replicas leave (Kafka's PartitionChangeBuilder), which fences those fetches (found here:
 * seed 193); --no-rejoin-race avoids the race instead. */
static bool stale_copy(const sim_t *s)
{
    const st_md_partition_t *mp = md_part(s->md);
    for (int i = 1; i <= NB; i++)
        if (s->b[i].hosted && !st_md_is_replica(mp, i))
            return true;
    return false;
}

static void ctl_tick(sim_t *s)
{
    for (int32_t id = 1; id <= NB; id++) {
        const st_md_broker_t *b = st_md_broker(s->md, id);
        if (!b->fenced && s->now - s->cb[id].last_hb > SESSION_MS)
            ctl_fence(s, id, "session timed out");
    }
    if (!s->healed && chance(&s->r, s->p_pref)) {
        st_md_t *n = st_md_clone(s->md);
        if (st_rec_elect_preferred(n, &n->topics[0]->partitions[0])) {
            s->n_elect++;
            ctl_publish(s, n, "preferred election");
        } else {
            st_md_unref(n);
        }
    }
    if (!s->healed && chance(&s->r, s->p_reassign) && (g_rejoin_race || !stale_copy(s))) {
        /* an operator moves the partition (KIP-455's AlterPartitionReassignments) to RF
         * distinct brokers drawn at random, in random order (the first is the preferred
         * leader); it may replace a move in progress. Half the time the move takes the
         * partition off its current leader (a broker being decommissioned): where the ISR is
         * the leader alone, that is issue 19's item 7. st_rec_reassign adds the new replicas;
         * st_rec_alter_isr completes the move once they are all in the ISR. */
        int32_t all[NB], target[RF];
        int pool = NB;
        for (int i = 0; i < NB; i++)
            all[i] = i + 1;
        int32_t leader = md_part(s->md)->leader;
        if (leader >= 1 && chance(&s->r, 0.5)) {
            all[leader - 1] = all[NB - 1]; /* left out of the draw */
            all[NB - 1] = leader;
            pool = NB - 1;
        }
        for (int i = 0; i < RF; i++) {
            int j = (int)rnd_in(&s->r, i, pool - 1);
            int32_t t = all[i];
            all[i] = all[j];
            all[j] = t;
            target[i] = all[i];
        }
        char w[96], tg[32];
        fmt_isr(tg, sizeof tg, target, RF);
        st_md_t *n = st_md_clone(s->md);
        st_md_partition_t *mp = &n->topics[0]->partitions[0];
        bool was_moving = moving(mp);
        int rc = st_rec_reassign(n, mp, target, RF);
        if (rc == 0) {
            s->n_reassign++;
            s->n_moved += !moving(mp); /* every target replica was in sync already */
            snprintf(w, sizeof w, "reassign to [%s]%s%s", tg,
                     was_moving ? ", replacing a move" : "",
                     moving(mp) ? "" : ", completed at once");
            ctl_publish(s, n, w);
        } else {
            ev(s, "ctl: reassign to [%s]: %s", tg, rc == 1 ? "already so" : st_strerror(rc));
            st_md_unref(n);
        }
    }
    if (!s->healed && moving(md_part(s->md)) && chance(&s->r, s->p_cancel)) {
        st_md_t *n = st_md_clone(s->md);
        int rc = st_rec_reassign_cancel(n, &n->topics[0]->partitions[0]);
        if (rc == 0) {
            s->n_cancel++;
            ctl_publish(s, n, "reassignment cancelled");
        } else {
            ev(s, "ctl: cancelling the reassignment: %s", st_strerror(rc));
            st_md_unref(n);
        }
    }
}

/* ---- brokers: the follower ---- */

static void follow_init(sim_t *s, broker_t *b, int32_t leader, int32_t epoch)
{
    st_part_t *p = b->p;
    b->following = true;
    b->f_leader = leader;
    b->f_gen++;
    b->fetch_inflight = false;
    b->next_fetch = bnow(s, b);
    st_rfollow_init(&b->f, epoch, st_part_durable_end(p), st_part_latest_epoch(p),
                    st_part_durable_start(p));
    ev(s, "b%d: follows %d at epoch %d from %" PRId64 " (last epoch %d, start %" PRId64 ")", b->id,
       (int)leader, (int)epoch, b->f.fetch_offset, (int)b->f.last_epoch, b->f.log_start);
}

/* A job's completion context. */
typedef struct job {
    sim_t *s;
    int32_t broker;
    uint64_t inc, gen;
} job_t;

static void job_position(sim_t *s, broker_t *b, int err)
{
    st_part_t *p = b->p;
    st_rfollow_on_position(&b->f, err, st_part_durable_end(p), st_part_latest_epoch(p),
                           st_part_durable_start(p));
    if (err)
        ev(s, "b%d: job failed: %s; fetch again from %" PRId64, b->id, st_strerror(err),
           b->f.fetch_offset);
}

static void on_job_done(void *arg, int err)
{
    job_t *j = arg;
    sim_t *s = j->s;
    broker_t *b = &s->b[j->broker];
    bool current = !b->dying && b->up && b->inc == j->inc && b->f_gen == j->gen && b->following &&
                   b->f.phase == ST_RF_JOB;
    free(j);
    if (current)
        job_position(s, b, err);
}

static void follower_on_answer(sim_t *s, broker_t *b, const msg_t *m)
{
    if (!b->following || !b->fetch_inflight || m->req != b->fetch_req || b->f.phase != ST_RF_FETCH)
        return; /* stale, or a duplicate */
    b->fetch_inflight = false;
    st_part_t *p = b->p;
    st_rfollow_answer_t a = {
        .error = m->error,
        .high_watermark = m->hw,
        .log_start_offset = m->resp_log_start,
        .diverging_epoch = m->div_epoch,
        .diverging_end = m->div_end,
        .records = m->data,
        .len = m->len,
    };
    st_rfollow_action_t act = st_rfollow_on_fetch(&b->f, &a);
    int64_t now = bnow(s, b);
    int rc;
    switch (act.kind) {
    case ST_RF_DO_NOTHING:
        b->next_fetch = now + FETCH_IDLE_MS;
        break;
    case ST_RF_DO_APPEND: {
        job_t *j = malloc(sizeof *j);
        *j = (job_t){s, b->id, b->inc, b->f_gen};
        int64_t end = st_log_end_offset(p->log);
        rc = st_part_append_replica(p, m->data, act.len, act.hw, act.log_start, on_job_done, j);
        ev(s, "b%d: append %zu bytes at %" PRId64 " (leader hw %" PRId64 " start %" PRId64 "): %s",
           b->id, act.len, end, act.hw, act.log_start, rc ? st_strerror(rc) : "ok");
        if (rc) {
            free(j);
            job_position(s, b, rc);
        } else {
            b->hw_epoch = b->f.leader_epoch;
        }
        b->next_fetch = now;
        break;
    }
    case ST_RF_DO_TRUNCATE: {
        int64_t end = st_log_end_offset(p->log);
        rc = st_part_truncate(p, act.offset, act.end_epoch);
        s->n_truncate++;
        ev(s, "b%d: truncate to %" PRId64 " end_epoch %d (log end %" PRId64 " -> %" PRId64 "): %s",
           b->id, act.offset, (int)act.end_epoch, end, st_log_end_offset(p->log),
           rc ? st_strerror(rc) : "ok");
        if (b->verified > st_log_end_offset(p->log))
            b->verified = st_log_end_offset(p->log);
        job_position(s, b, rc);
        b->next_fetch = now;
        break;
    }
    case ST_RF_DO_RESTART:
        rc = st_part_restart_at(p, act.offset);
        ev(s, "b%d: restart the log at %" PRId64 ": %s", b->id, act.offset,
           rc ? st_strerror(rc) : "ok");
        b->verified = act.offset;
        job_position(s, b, rc);
        b->next_fetch = now;
        break;
    case ST_RF_DO_HW:
        rc = st_part_set_leader_hw(p, act.hw, act.log_start);
        if (rc)
            ev(s, "b%d: leader hw %" PRId64 " start %" PRId64 ": %s", b->id, act.hw, act.log_start,
               st_strerror(rc));
        b->hw_epoch = b->f.leader_epoch;
        b->next_fetch = now + FETCH_IDLE_MS;
        if (b->f.phase == ST_RF_JOB) {
            /* the log start moved: reported as a position once it is durable */
            ev(s, "b%d: log start %" PRId64 " from the leader", b->id, st_part_log_start(p));
            job_t *j = malloc(sizeof *j);
            *j = (job_t){s, b->id, b->inc, b->f_gen};
            if (rc == 0)
                rc = st_part_wait_start_durable(p, on_job_done, j);
            if (rc != 0) {
                free(j);
                job_position(s, b, rc == 1 ? 0 : rc);
            }
            b->next_fetch = now;
        }
        break;
    case ST_RF_DO_BACKOFF:
        ev(s, "b%d: fetch error %s: back off", b->id, st_kerr_name(m->error));
        b->next_fetch = now + FETCH_BACKOFF_MS;
        break;
    case ST_RF_DO_STOP:
        ev(s, "b%d: fetch error %s: stopped until new metadata", b->id, st_kerr_name(m->error));
        break;
    }
}

static void follower_tick(sim_t *s, broker_t *b)
{
    int64_t now = bnow(s, b);
    if (!b->following)
        return;
    if (b->fetch_inflight && now - b->fetch_sent > FETCH_TIMEOUT_MS)
        b->fetch_inflight = false; /* lost: asked again below */
    if (b->f.phase != ST_RF_FETCH || b->fetch_inflight || now < b->next_fetch)
        return;
    msg_t *m = msg_new(M_FETCH, b->id, b->f_leader);
    m->replica = b->id;
    m->leader_epoch = b->f.leader_epoch;
    m->fetch_offset = b->f.fetch_offset;
    m->last_epoch = b->f.last_epoch;
    m->log_start = b->f.log_start;
    m->max_bytes = (int32_t)rnd_in(&s->r, 100, 3000);
    m->inc = b->inc;
    m->to_inc = s->b[b->f_leader].inc;
    m->req = ++s->req_next;
    b->fetch_req = m->req;
    b->fetch_inflight = true;
    b->fetch_sent = now;
    net_send(s, m);
}

/* ---- brokers: the leader ---- */

static void leader_on_fetch(sim_t *s, broker_t *b, const msg_t *m)
{
    msg_t *r = msg_new(M_FETCH_RESP, b->id, m->from);
    r->req = m->req;
    r->to_inc = m->inc;
    st_part_t *p = b->p;
    int16_t err = b_leader_check(b, m->leader_epoch);
    bool replica = false;
    for (int i = 0; p && p->repl.on && i < p->repl.role.nreplicas; i++)
        replica |= p->repl.role.replicas[i] == m->replica && m->replica != b->id;
    if (!err && !replica)
        err = ST_KERR_NOT_LEADER_OR_FOLLOWER;
    st_part_diverging_t div = {-1, -1};
    if (!err)
        err = st_part_follower_fetch(p, m->replica, m->fetch_offset, m->last_epoch, m->log_start,
                                     bnow(s, b), &div);
    if (!err && div.epoch < 0) {
        st_part_read_t rd;
        err = st_part_read_replica(p, m->fetch_offset, m->max_bytes, &rd);
        if (!err && rd.read.bytes > 0 && rd.read.next_offset > st_part_durable_end(p) &&
            !s->healed && !b->crash_at && chance(&s->r, s->p_ahead))
            b->crash_at = s->now + rnd_in(&s->r, 0, 8) * TICK_MS;
        if (!err && rd.read.bytes > 0) {
            int64_t want = rd.read.bytes;
            r->data = malloc((size_t)want);
            ssize_t n = st_log_read_copy(&rd.read, r->data, (size_t)want);
            st_log_read_release(&rd.read);
            CHECK(s, n == want, "leader %d: reading its log for a fetch: %s", b->id,
                  n < 0 ? st_strerror((int)n) : "short");
            r->len = (size_t)n;
        }
    }
    r->error = err;
    r->div_epoch = div.epoch;
    r->div_end = div.end_offset;
    if (p && p->log) {
        r->hw = p->hw;
        r->resp_log_start = st_part_log_start(p);
    }
    if (err || div.epoch >= 0)
        ev(s, "b%d: fetch from %d at %" PRId64 " epoch %d/%d: %s div (%d, %" PRId64 ")", b->id,
           m->from, m->fetch_offset, (int)m->last_epoch, (int)m->leader_epoch,
           err ? st_kerr_name(err) : "ok", (int)div.epoch, div.end_offset);
    net_send(s, r);
}

static void leader_isr_tick(sim_t *s, broker_t *b)
{
    if (!b_serving(b))
        return;
    int32_t isr[ST_PART_MAX_REPLICAS];
    int16_t nisr = 0;
    if (!st_part_isr_change_due(b->p, bnow(s, b), LAG_MS, ISR_RETRY_MS, isr, &nisr))
        return;
    const st_part_role_t *ro = &b->p->repl.role;
    msg_t *m = msg_new(M_ALTER, b->id, NODE_CTL);
    memcpy(m->alter.topic_id, TOPIC_ID, 16);
    m->alter.partition = 0;
    m->alter.leader = b->id;
    m->alter.leader_epoch = ro->leader_epoch;
    m->alter.partition_epoch = ro->partition_epoch;
    m->alter.nisr = nisr;
    memcpy(m->alter.isr, isr, (size_t)nisr * sizeof isr[0]);
    char w[128];
    fmt_isr(w, sizeof w, isr, nisr);
    ev(s, "b%d: asks ISR [%s] at epoch %d pe %d", b->id, w, (int)ro->leader_epoch,
       (int)ro->partition_epoch);
    net_send(s, m);
}

/* A produce or DeleteRecords answer owed by a broker. */
typedef struct owed {
    sim_t *s;
    int32_t broker;
    uint64_t inc, req;
    int producer, acks;
    int64_t base, last;
    uint32_t crc;
    int32_t epoch;
    int64_t low_watermark;
    bool del;
} owed_t;

/* Sends the answer o is owed, with Kafka error kerr, and frees o. */
static void owed_answer(sim_t *s, broker_t *b, owed_t *o, int16_t kerr)
{
    msg_t *r = msg_new(o->del ? M_DELETE_RESP : M_PRODUCE_RESP, b->id, NODE_CLIENT);
    r->req = o->req;
    r->error = kerr;
    if (o->del) {
        r->offset = o->low_watermark;
        ev(s, "b%d: DeleteRecords to %" PRId64 " answered %s", b->id, o->low_watermark,
           kerr ? st_kerr_name(kerr) : "ok");
        /* a leader of an epoch before the last unclean election answers for a log the
         * cluster has given up (as an acks=all answer it gives: O2) */
        bool counts = !kerr && o->epoch >= s->min_epoch;
        /* the largest answered since the last unclean election (which may undo older ones) */
        if (counts && (s->acked_lw_gen != s->unclean_gen || o->low_watermark > s->acked_lw))
            s->acked_lw = o->low_watermark;
        if (counts)
            s->acked_lw_gen = s->unclean_gen;
    } else {
        r->producer = o->producer;
        r->base_offset = o->base;
        /* A retry of a batch DeleteRecords has since removed: the leader's producer state
         * still knows its sequence and offsets (as Kafka's keeps its last five batches'
         * metadata whatever the log start) and answers it a duplicate, success at offsets
         * below its log start — as Kafka answers. No record is left to check: the user
         * deleted it. */
        bool deleted = !kerr && o->acks == ST_ACKS_ALL && b->p && b->p->log &&
                       o->last < st_part_log_start(b->p);
        if (!kerr && o->acks == ST_ACKS_ALL) {
            if (s->nacks == s->capacks) {
                s->capacks = s->capacks ? s->capacks * 2 : 256;
                s->acks = realloc(s->acks, s->capacks * sizeof *s->acks);
            }
            /* as for DeleteRecords: a leader of an epoch before the last unclean election
             * (thawed, or behind on metadata) answers for a log the cluster gave up */
            int gen = o->epoch >= s->min_epoch ? s->unclean_gen : -1;
            s->acks[s->nacks++] =
                (acked_t){o->base, o->last, o->crc, b->id, o->epoch, gen, s->step, deleted};
            s->n_acked++;
        }
        if (o->acks != ST_ACKS_NONE)
            ev(s, "b%d: produce %" PRId64 "..%" PRId64 " acks=%d answered %s (hw %" PRId64 ")",
               b->id, o->base, o->last, o->acks, kerr ? st_kerr_name(kerr) : "ok",
               b->p ? b->p->hw : -1);
    }
    bool quiet = !o->del && o->acks == ST_ACKS_NONE;
    free(o);
    if (quiet)
        msg_free(r);
    else
        net_send(s, r);
}

static void on_owed_done(void *arg, int err)
{
    owed_t *o = arg;
    sim_t *s = o->s;
    broker_t *b = &s->b[o->broker];
    if (b->dying || !b->up || b->inc != o->inc) {
        free(o); /* the connection died with the process */
        return;
    }
    b->pending--;
    owed_answer(s, b, o, err ? st_kerr_from(err) : 0);
}

static void leader_on_produce(sim_t *s, broker_t *b, msg_t *m)
{
    int16_t err = b_leader_check(b, -1);
    owed_t *o = calloc(1, sizeof *o);
    *o = (owed_t){s, b->id, b->inc, m->req, m->producer, m->acks, -1, -1, 0, -1, -1, false};
    st_batch_hdr_t h;
    if (st_batch_parse_hdr(m->data, m->len, &h))
        fail(s, "a producer's batch does not parse");
    o->crc = h.crc;
    if (!err) {
        st_part_append_res_t res;
        int32_t epoch = b->p->repl.role.leader_epoch;
        o->epoch = epoch;
        b->pending++;
        /* o is filled before the append: its callback may run before it returns */
        o->base = -1;
        /* Kafka's rule, and the partition's: a producer the leader holds no batch of may start
         * at any sequence; when the pipelined producer's batch before it was never written,
         * that is a gap no retry mends (O7 excuses that epoch) */
        const st_pentry_t *pe =
            m->producer == PIPE ? st_pstate_find(&b->p->pstate, h.producer_id) : NULL;
        bool anywhere = m->producer == PIPE && (!pe || pe->nbatches == 0) && h.base_sequence != 0;
        bool gap = false; /* and one of its batches before this one was never written */
        for (int i = 0; anywhere && i < s->pp.nq; i++)
            gap |= s->pp.q[i].epoch == h.producer_epoch && s->pp.q[i].seq < h.base_sequence &&
                   s->pp.q[i].offset < 0;
        bool later =
            st_part_append(b->p, m->data, m->len, (st_acks_t)m->acks, &res, on_owed_done, o);
        err = res.error;
        int64_t base = res.base_offset, last = res.base_offset + h.last_offset_delta;
        if (!err && res.appended_bytes > 0)
            note_accept(s, b, epoch);
        if (!err && res.appended_bytes > 0 && gap) {
            ev(s, "b%d: takes seq %d epoch %d from p%d, a producer it holds nothing of", b->id,
               (int)h.base_sequence, (int)h.producer_epoch, m->producer);
            s->pp.gap_epoch = h.producer_epoch;
            s->pp.n_gaps++;
        }
        for (int i = 0; m->producer == PIPE && !err && res.appended_bytes > 0 && i < s->pp.nq; i++)
            if (s->pp.q[i].epoch == h.producer_epoch && s->pp.q[i].seq == h.base_sequence &&
                s->pp.q[i].offset < 0)
                s->pp.q[i].offset = base;
        if (!err)
            ev(s, "b%d: appended %s%" PRId64 "..%" PRId64 " acks=%d from p%d at epoch %d%s", b->id,
               res.appended_bytes ? "" : "(duplicate) ", base, last, m->acks, m->producer,
               (int)epoch, later ? ", waits" : "");
        if (later) {
            o->base = base;
            o->last = last;
            return; /* answered by on_owed_done */
        }
        b->pending--;
        o->base = base;
        o->last = last;
    }
    if (err == ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER && m->producer == PIPE) {
        /* what the leader holds of the producer, to read the trace by */
        const st_pentry_t *e = st_pstate_find(&b->p->pstate, h.producer_id);
        char w[160] = "";
        size_t k = 0;
        for (int i = 0; e && i < e->nbatches && k + 40 < sizeof w; i++)
            k += (size_t)snprintf(w + k, sizeof w - k, " %d..%d@%" PRId64,
                                  (int)e->batches[i].first_seq, (int)e->batches[i].last_seq,
                                  e->batches[i].first_offset);
        ev(s, "b%d: out of order: seq %d epoch %d, it holds epoch %d:%s", b->id,
           (int)h.base_sequence, (int)h.producer_epoch, e ? (int)e->epoch : -1, w);
        /* a retry of a batch written below the leader's log start: DeleteRecords took it
         * (committed, its answer lost) and a leader that rebuilt its producers from what was
         * left has no trace of it, in Kafka as here (O7 excuses that epoch) */
        int64_t start = st_part_log_start(b->p);
        for (int i = 0; i < s->pp.nq; i++)
            if (s->pp.q[i].epoch == h.producer_epoch && s->pp.q[i].seq == h.base_sequence &&
                s->pp.q[i].offset >= 0 && s->pp.q[i].offset < start) {
                ev(s, "b%d: seq %d was written at %" PRId64 ", below its log start %" PRId64, b->id,
                   (int)h.base_sequence, s->pp.q[i].offset, start);
                s->pp.forgot_epoch = h.producer_epoch;
                s->pp.n_forgot++;
            }
        /* likewise the batches between what the leader holds and this one: delivered (written
         * and acknowledged), then DeleteRecords took them, so the gap is the log's, not a lost
         * write (Kafka drops a producer's batches below the log start the same way) */
        int32_t held = e && e->epoch == h.producer_epoch && e->nbatches > 0
                           ? e->batches[e->nbatches - 1].last_seq
                           : -1;
        for (int i = 0; i < s->pp.ndone; i++)
            if (s->pp.done[i].epoch == h.producer_epoch && s->pp.done[i].seq > held &&
                s->pp.done[i].seq < h.base_sequence && s->pp.done[i].offset < start) {
                ev(s,
                   "b%d: seq %d, before seq %d, was written at %" PRId64
                   ", below its log start %" PRId64,
                   b->id, (int)s->pp.done[i].seq, (int)h.base_sequence, s->pp.done[i].offset,
                   start);
                s->pp.forgot_epoch = h.producer_epoch;
                s->pp.n_forgot++;
                break;
            }
    }
    owed_answer(s, b, o, err);
}

static void leader_on_delete(sim_t *s, broker_t *b, msg_t *m)
{
    int16_t err = b_leader_check(b, -1);
    owed_t *o = calloc(1, sizeof *o);
    *o = (owed_t){s, b->id, b->inc, m->req, -1, 0, -1, -1, 0, -1, -1, true};
    if (!err) {
        int64_t lw = -1;
        o->epoch = b->p->repl.role.leader_epoch;
        b->pending++;
        bool later = st_part_delete_records(b->p, m->offset, &err, &lw, on_owed_done, o);
        o->low_watermark = lw;
        if (!err && m->offset > s->max_delete)
            s->max_delete = m->offset;
        ev(s, "b%d: DeleteRecords to %" PRId64 ": %s, low watermark %" PRId64 "%s", b->id,
           m->offset, err ? st_kerr_name(err) : "ok", lw, later ? ", waits" : "");
        if (later)
            return;
        b->pending--;
    }
    owed_answer(s, b, o, err);
}

/* ---- brokers: metadata, life cycle ---- */

/* Opens (creating) the broker's copy of the partition: at start when it has one on disk, and
 * when its metadata makes it a replica. */
static void b_open(sim_t *s, broker_t *b)
{
    st_log_config_t lc;
    st_log_config_default(&lc);
    lc.segment_bytes = 4096; /* rolls, and DeleteRecords removing whole segments */
    lc.index_interval_bytes = 256;
    int rc = st_parts_open(&b->parts, TOPIC, TOPIC_ID, 0, &lc, &b->p);
    CHECK(s, rc == 0 && b->p->log, "broker %d: the partition does not open: %s", b->id,
          st_strerror(rc));
    b->hosted = true;
    b->hw_epoch = -1;
    b->verified = 0;
}

/* A broker that is no longer a replica deletes its copy (Kafka's stray partition): it stops
 * following, its owed answers fail with it, and its log counts no more for the oracle. */
static void b_delete(sim_t *s, broker_t *b)
{
    if (b->following)
        ev(s, "b%d: stops following (no longer a replica)", b->id);
    b->following = false;
    b->f_gen++;
    b->fetch_inflight = false;
    ev(s, "b%d: deletes its copy (log %" PRId64 "..%" PRId64 " hw %" PRId64 ")", b->id,
       st_part_log_start(b->p), b->p->log ? st_log_end_offset(b->p->log) : -1, b->p->hw);
    st_parts_delete(&b->parts, b->p);
    b->p = NULL;
    b->hosted = false;
    b->hw_epoch = -1;
    b->verified = 0;
}

static void b_apply_md(sim_t *s, broker_t *b, st_md_t *md)
{
    if (b->md && md->version <= b->md->version)
        return;
    if (b->md)
        st_md_unref(b->md);
    b->md = st_md_ref(md);
    const st_md_broker_t *me = st_md_broker(md, b->id);
    b->registered = me && me->incarnation == b->inc;
    if (!b->registered)
        return; /* metadata from before its registration: nothing to act on yet */
    const st_md_partition_t *mp = md_part(md);
    if (!st_md_is_replica(mp, b->id)) {
        if (b->p)
            b_delete(s, b);
        return;
    }
    if (!b->p) {
        b_open(s, b);
        ev(s, "b%d: a replica now: opens the partition (log %" PRId64 "..%" PRId64 ")", b->id,
           st_part_log_start(b->p), st_log_end_offset(b->p->log));
    }
    st_part_role_t ro;
    memset(&ro, 0, sizeof ro);
    ro.self = b->id;
    ro.leader = mp->leader == b->id;
    ro.leader_id = mp->leader;
    ro.leader_epoch = mp->leader_epoch;
    ro.partition_epoch = mp->partition_epoch;
    ro.min_isr = MIN_ISR;
    ro.nreplicas = mp->nreplicas;
    ro.nisr = mp->nisr;
    memcpy(ro.replicas, mp->replicas, (size_t)mp->nreplicas * sizeof ro.replicas[0]);
    memcpy(ro.isr, mp->isr, (size_t)mp->nisr * sizeof ro.isr[0]);
    for (int i = 0; i < mp->nreplicas; i++)
        ro.live[i] = st_md_broker_live(md, mp->replicas[i]);
    st_part_repl_t *r = &b->p->repl;
    bool fresh =
        ro.leader && (!r->on || !r->role.leader || r->role.leader_epoch != ro.leader_epoch);
    st_part_role_t was = r->role;
    bool kept = r->on && !fresh && r->role.leader;
    st_part_set_role(b->p, &ro);
    if (kept) {
        /* the same leadership with another replica set: set_role starts a new replica's
         * catch-up time from the real monotonic clock too; the simulation's replaces it */
        for (int i = 0; i < ro.nreplicas; i++) {
            bool known = false;
            for (int j = 0; j < was.nreplicas; j++)
                known |= was.replicas[j] == ro.replicas[i];
            if (!known)
                r->caught_up_ms[i] = bnow(s, b);
        }
    }
    if (fresh) {
        /* set_role stamps the followers' catch-up times with the real monotonic clock
         * (partition.h gives it no now_ms): the simulation's clock replaces it */
        for (int i = 0; i < ST_PART_MAX_REPLICAS; i++)
            r->caught_up_ms[i] = bnow(s, b);
        ev(s, "b%d: leads at epoch %d (log end %" PRId64 ", hw %" PRId64 ")", b->id,
           (int)ro.leader_epoch, st_log_end_offset(b->p->log), b->p->hw);
    }
    if (ro.leader || mp->leader < 0) {
        if (b->following)
            ev(s, "b%d: stops following (leader %d)", b->id, (int)mp->leader);
        b->following = false;
        b->f_gen++;
    } else if (!b->following || b->f_leader != mp->leader ||
               b->f.leader_epoch != mp->leader_epoch) {
        follow_init(s, b, mp->leader, mp->leader_epoch);
    }
}

static void b_register(sim_t *s, broker_t *b)
{
    msg_t *m = msg_new(M_REGISTER, b->id, NODE_CTL);
    m->inc = b->inc;
    b->last_reg = bnow(s, b);
    net_send(s, m);
}

static st_parts_config_t parts_config(void)
{
    return (st_parts_config_t){
        .log_dirs = "/data",
        .nshards = 1,
        .producer_ids_max = 1000,
        .producer_id_expiration_ms = 86400000,
        .cleaner_enable = false,
        .cleaner_threads = 1,
        .cleaner_io_max_bytes_per_second = INT64_MAX,
        .cleaner_dedupe_buffer_size = 1 << 20,
        .wake = NULL,
        .wake_arg = NULL,
    };
}

static void on_wake(void *arg, int waiter, const uint8_t topic_id[16], int32_t index)
{
    (void)arg;
    (void)waiter;
    (void)topic_id;
    (void)index;
}

static void b_start(sim_t *s, broker_t *b)
{
    st_parts_config_t pc = parts_config();
    pc.wake = on_wake;
    st_parts_init(&b->parts, s->loop, &b->t.env, &pc);
    b->p = NULL;
    if (b->hosted)
        b_open(s, b); /* a copy on its disk (a replica, or one that has not seen its removal) */
    b->up = true;
    b->inc = ++s->inc_next;
    b->md = NULL;
    b->registered = false;
    b->following = false;
    b->f_gen++;
    b->fetch_inflight = false;
    b->hw_epoch = -1;
    b->verified = 0;
    b->pending = 0;
    b->last_hb = bnow(s, b) - HB_MS;
    if (b->p)
        ev(s,
           "b%d: starts, incarnation %" PRIu64 ": log %" PRId64 "..%" PRId64 " hw %" PRId64
           " last epoch %d",
           b->id, b->inc, st_part_log_start(b->p), st_log_end_offset(b->p->log), b->p->hw,
           (int)st_part_latest_epoch(b->p));
    else
        ev(s, "b%d: starts, incarnation %" PRIu64 ": no copy of the partition", b->id, b->inc);
    b_register(s, b);
}

/* Completes held sync i of b's disk. */
static void sync_complete_at(tenv_t *t, size_t i)
{
    tenv_sync_t q = t->q[i];
    memmove(&t->q[i], &t->q[i + 1], (t->nq - i - 1) * sizeof *t->q);
    t->nq--;
    q.done(q.arg, q.res);
}

static void settle_disk(broker_t *b)
{
    for (int i = 0; i < 1000 && b->t.nq > 0; i++)
        tenv_complete(&b->t, (size_t)-1);
}

/* Stops broker b: crash (unsynced data lost) or graceful (everything synced, closed). */
static void b_stop(sim_t *s, broker_t *b, bool graceful)
{
    b->dying = true;
    if (graceful) {
        settle_disk(b);
        b->t.defer = false;
        st_parts_release_acks(&b->parts);
        st_parts_fini(&b->parts);
        b->t.defer = true;
    } else {
        st_crash_mode_t mode = (st_crash_mode_t)rnd_in(&s->r, 0, ST_CRASH__COUNT - 1);
        st_faultfs_crash_mode(b->t.ff, mode);
        st_parts_fini(&b->parts);
        tenv_complete(&b->t, (size_t)-1); /* late completions of the dead process */
        st_faultfs_restart(b->t.ff);
    }
    b->dying = false;
    b->up = false;
    b->crash_at = 0;
    b->p = NULL;
    b->inc = 0;
    b->frozen = false;
    b->following = false;
    if (b->md)
        st_md_unref(b->md);
    b->md = NULL;
    b->registered = false;
}

static void b_on_msg(sim_t *s, broker_t *b, msg_t *m)
{
    switch (m->kind) {
    case M_MD:
        b_apply_md(s, b, m->md);
        break;
    case M_FETCH:
        leader_on_fetch(s, b, m);
        break;
    case M_FETCH_RESP:
        follower_on_answer(s, b, m);
        break;
    case M_PRODUCE:
        leader_on_produce(s, b, m);
        break;
    case M_DELETE:
        leader_on_delete(s, b, m);
        break;
    default:
        break;
    }
}

static void b_tick(sim_t *s, broker_t *b)
{
    int64_t now = bnow(s, b);
    b->t.now = WALL0 + now;
    /* the disk completes some of the held syncs, in any order */
    if (b->t.nq > 0 && chance(&s->r, 0.7)) {
        int64_t k = rnd_in(&s->r, 1, (int64_t)b->t.nq);
        for (int64_t i = 0; i < k && b->t.nq > 0 && b->up; i++) {
            sync_complete_at(&b->t, (size_t)rnd_in(&s->r, 0, (int64_t)b->t.nq - 1));
            oracle_event(s);
        }
    }
    if (now - b->last_hb >= HB_MS) {
        msg_t *m = msg_new(M_HEARTBEAT, b->id, NODE_CTL);
        m->inc = b->inc;
        m->version = b->md ? b->md->version : 0;
        b->last_hb = now;
        net_send(s, m);
    }
    if (!b->registered && now - b->last_reg >= REG_MS)
        b_register(s, b);
    follower_tick(s, b);
    leader_isr_tick(s, b);
    if (s->step % 10 == b->id)
        st_parts_tick(&b->parts);
    oracle_event(s);
}

/* ---- clients ---- */

/* Appends a batch of `count` records with unique values (ids id0..), as a producer sends it. */
static void client_batch(st_buf_t *b, int32_t count, uint64_t id0, int64_t ts, int64_t pid,
                         int16_t pepoch, int32_t seq)
{
    size_t start = b->len;
    st_buf_extend(b, ST_BATCH_HEADER_SIZE);
    for (int32_t i = 0; i < count; i++) {
        uint8_t body[64];
        size_t n = 0;
        body[n++] = 0;
        n += (size_t)st_varint64_encode(body + n, i);
        n += (size_t)st_varint32_encode(body + n, i);
        n += (size_t)st_varint32_encode(body + n, -1);
        n += (size_t)st_varint32_encode(body + n, 8);
        st_put_be64(body + n, id0 + (uint64_t)i);
        n += 8;
        n += (size_t)st_varint32_encode(body + n, 0);
        uint8_t lenb[ST_VARINT32_MAX];
        int ll = st_varint32_encode(lenb, (int32_t)n);
        st_buf_append(b, lenb, (size_t)ll);
        st_buf_append(b, body, n);
    }
    uint8_t *h = b->data + start;
    size_t size = b->len - start;
    st_put_be64(h + ST_BATCH_OFF_BASE_OFFSET, 0);
    st_put_be32(h + ST_BATCH_OFF_LENGTH, (uint32_t)(size - ST_BATCH_LOG_OVERHEAD));
    st_put_be32(h + ST_BATCH_OFF_LEADER_EPOCH, (uint32_t)-1);
    h[ST_BATCH_OFF_MAGIC] = 2;
    st_put_be16(h + ST_BATCH_OFF_ATTRIBUTES, 0);
    st_put_be32(h + ST_BATCH_OFF_LAST_OFFSET_DELTA, (uint32_t)(count - 1));
    st_put_be64(h + ST_BATCH_OFF_BASE_TIMESTAMP, (uint64_t)ts);
    st_put_be64(h + ST_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)(ts + count - 1));
    st_put_be64(h + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)pid);
    st_put_be16(h + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)pepoch);
    st_put_be32(h + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)seq);
    st_put_be32(h + ST_BATCH_OFF_RECORDS_COUNT, (uint32_t)count);
    tb_fix_crc(h);
}

/* The broker a client believes leads: from the controller's metadata or, as often, from a
 * broker's (possibly stale). -1: none known. */
static int32_t client_leader(sim_t *s)
{
    const st_md_t *md = s->md;
    if (chance(&s->r, 0.5)) {
        broker_t *b = &s->b[rnd_in(&s->r, 1, NB)];
        if (b->up && b->md)
            md = b->md;
    }
    return md_part(md)->leader;
}

static void producer_send(sim_t *s, int k)
{
    producer_t *pr = &s->pr[k];
    int32_t leader = client_leader(s);
    if (leader < 0) {
        pr->next_ms = s->now + 50;
        return;
    }
    msg_t *m = msg_new(M_PRODUCE, NODE_CLIENT, leader);
    m->data = malloc(pr->batch.len);
    memcpy(m->data, pr->batch.data, pr->batch.len);
    m->len = pr->batch.len;
    m->producer = k;
    m->acks = pr->acks;
    m->req = ++s->req_next;
    m->to_inc = s->b[leader].inc;
    pr->req = m->req;
    pr->sent_ms = s->now;
    pr->waiting = pr->acks != ST_ACKS_NONE;
    pr->tries++;
    net_send(s, m);
    if (pr->acks == ST_ACKS_NONE)
        pr->busy = false;
}

static void producer_new_batch(sim_t *s, int k)
{
    producer_t *pr = &s->pr[k];
    pr->count = (int32_t)rnd_in(&s->r, 1, 3);
    st_buf_clear(&pr->batch);
    int64_t pid = pr->idem ? pr->pid : -1;
    client_batch(&pr->batch, pr->count, s->record_id, WALL0 + s->now, pid,
                 pr->idem ? pr->pepoch : -1, pr->idem ? pr->seq : -1);
    s->record_id += (uint64_t)pr->count;
    pr->busy = true;
    pr->tries = 0;
}

static void producer_tick(sim_t *s, int k)
{
    producer_t *pr = &s->pr[k];
    if (pr->waiting && s->now - pr->sent_ms > PRODUCE_TIMEOUT_MS)
        pr->waiting = false; /* no answer: send again (an idempotent retry) */
    if (pr->waiting || s->now < pr->next_ms)
        return;
    if (!pr->busy) {
        double rate = pr->acks == ST_ACKS_ALL ? 0.5 : 0.1;
        if (s->healed || !chance(&s->r, rate))
            return;
        producer_new_batch(s, k);
    }
    producer_send(s, k);
}

static void producer_on_answer(sim_t *s, const msg_t *m)
{
    producer_t *pr = &s->pr[m->producer];
    if (!pr->waiting || m->req != pr->req)
        return;
    pr->waiting = false;
    int16_t e = m->error;
    if (e == 0) {
        pr->busy = false;
        if (pr->idem)
            pr->seq += pr->count;
        return;
    }
    bool retriable = e == ST_KERR_NOT_LEADER_OR_FOLLOWER || e == ST_KERR_NOT_ENOUGH_REPLICAS ||
                     e == ST_KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND ||
                     e == ST_KERR_KAFKA_STORAGE_ERROR || e == ST_KERR_REQUEST_TIMED_OUT ||
                     e == ST_KERR_FENCED_LEADER_EPOCH || e == ST_KERR_UNKNOWN_LEADER_EPOCH;
    if (retriable && pr->tries < 60) {
        pr->next_ms = s->now + 30;
        return;
    }
    /* given up: an idempotent producer starts a new epoch (Kafka bumps it) */
    ev(s, "p%d: gives up its batch after %d tries: %s", m->producer, pr->tries, st_kerr_name(e));
    pr->busy = false;
    if (pr->idem) {
        pr->pepoch++;
        pr->seq = 0;
    }
}

/* ---- the pipelined idempotent producer (librdkafka's rules; see pipe_prod_t) ---- */

static const char *pipe_err_name(int16_t e)
{
    return e == -1 ? "_TIMED_OUT" : e == -2 ? "_TRANSPORT" : st_kerr_name(e);
}

/* rd_kafka_idemp_set_fatal_error: O7, unless an unclean election may have lost what the
 * producer had acknowledged (the broker forgets sequences it answered: Kafka does the same). */
static void pipe_fatal(sim_t *s, const pbatch_t *b, const char *what)
{
    pipe_prod_t *p = &s->pp;
    if (s->unclean_gen > 0 || p->gap_epoch == b->epoch || p->forgot_epoch == b->epoch) {
        ev(s, "pp: FATAL %s (seq %d epoch %d at b%d), excused: %s", what, (int)b->seq,
           (int)b->epoch, (int)b->broker,
           s->unclean_gen > 0         ? "after an unclean election"
           : p->gap_epoch == b->epoch ? "a leader took a gap"
                                      : "a leader forgot a deleted batch");
        p->dead = true;
        p->nq = p->ninflight = 0;
        p->n_excused++;
        return;
    }
    fail(s,
         "O7: librdkafka's idempotent producer would raise a fatal error: batch seq %d..%d "
         "epoch %d at b%d %s (next ack seq %d, next err seq %d, %d retries)",
         (int)b->seq, (int)(b->seq + b->count - 1), (int)b->epoch, (int)b->broker, what,
         (int)p->next_ack_seq, (int)p->next_err_seq, b->retries);
}

static void pipe_send(sim_t *s, pbatch_t *b)
{
    pipe_prod_t *p = &s->pp;
    pconn_t *c = &p->conn[p->leader];
    if (!c->open)
        *c = (pconn_t){true, s->b[p->leader].inc, false};
    b->epoch = p->epoch;
    b->seq = (int32_t)(b->msgid - p->base_msgid);
    st_buf_clear(&p->buf);
    client_batch(&p->buf, b->count, b->rec0, b->ts, p->pid, b->epoch, b->seq);
    msg_t *m = msg_new(M_PRODUCE, NODE_CLIENT, p->leader);
    m->data = malloc(p->buf.len);
    memcpy(m->data, p->buf.data, p->buf.len);
    m->len = p->buf.len;
    m->producer = PIPE;
    m->acks = ST_ACKS_ALL;
    m->req = ++s->req_next;
    m->to_inc = c->inc;
    b->inflight = true;
    b->req = m->req;
    b->broker = p->leader;
    b->sent_ms = s->now;
    p->ninflight++;
    ev(s, "pp: sends seq %d..%d epoch %d to b%d (%d in flight)", (int)b->seq,
       (int)(b->seq + b->count - 1), (int)b->epoch, (int)p->leader, p->ninflight);
    net_send(s, m);
}

/* The batches up to and including q[i] are delivered (or, for a failure, given up). */
static void pipe_drop_through(pipe_prod_t *p, int i)
{
    for (int k = 0; k <= i; k++) {
        p->ninflight -= p->q[k].inflight; /* their answers, if any come, are ignored */
        if (p->q[k].offset < 0)
            continue;
        if (p->ndone == PIPE_QUEUE) {
            memmove(p->done, p->done + 1, (PIPE_QUEUE - 1) * sizeof p->done[0]);
            p->ndone--;
        }
        p->done[p->ndone].epoch = p->q[k].epoch;
        p->done[p->ndone].seq = p->q[k].seq;
        p->done[p->ndone++].offset = p->q[k].offset;
    }
    memmove(p->q, p->q + i + 1, (size_t)(p->nq - i - 1) * sizeof p->q[0]);
    p->nq -= i + 1;
}

/* rd_kafka_msgbatch_handle_Produce_result for q[i]'s request, answered e (0: success; -1,
 * -2: librdkafka's own _TIMED_OUT, _TRANSPORT, the request unanswered). */
static void pipe_result(sim_t *s, int i, int16_t e)
{
    pipe_prod_t *p = &s->pp;
    pbatch_t *b = &p->q[i];
    b->inflight = false;
    p->ninflight--;
    int32_t next_seq = b->seq + b->count;
    uint64_t last_msgid = b->msgid + (uint64_t)b->count - 1;
    if (e)
        ev(s, "pp: seq %d..%d epoch %d at b%d: %s", (int)b->seq, (int)(next_seq - 1), (int)b->epoch,
           (int)b->broker, pipe_err_name(e));
    if (b->epoch != p->epoch) {
        /* "PID mismatch": not retried across epochs, the messages fail */
        p->n_failed++;
        pipe_drop_through(p, i);
        return;
    }
    if (e == 0 || e == ST_KERR_DUPLICATE_SEQUENCE_NUMBER) {
        /* rd_kafka_handle_idempotent_Produce_success (a duplicate is a success) */
        if (p->acked_msgid + 1 < b->msgid) {
            /* an earlier batch of uncertain fate was in fact written: acked implicitly */
        } else if (b->seq != p->next_ack_seq && b->seq == p->next_err_seq) {
            pipe_fatal(s, b, "succeeded when expecting failure");
            return;
        }
        if (p->next_err_seq == p->next_ack_seq)
            p->next_err_seq = next_seq;
        p->next_ack_seq = next_seq;
        if (last_msgid > p->acked_msgid)
            p->acked_msgid = last_msgid;
        p->n_acked += (uint64_t)(i + 1);
        pipe_drop_through(p, i);
        return;
    }
    /* rd_kafka_handle_Produce_error: the actions rd_kafka_err_action gives */
    enum { PERMANENT = 1, REFRESH = 2, RETRY = 4 };
    int actions;
    bool possibly = false, incr_retry = true;
    switch (e) {
    case -1: /* _TIMED_OUT */
    case ST_KERR_REQUEST_TIMED_OUT:
    case ST_KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        actions = RETRY;
        possibly = true;
        break;
    case -2: /* _TRANSPORT */
        actions = REFRESH;
        possibly = true;
        break;
    case ST_KERR_NOT_ENOUGH_REPLICAS:
        actions = RETRY;
        break;
    case ST_KERR_KAFKA_STORAGE_ERROR:
        actions = REFRESH | RETRY;
        break;
    case ST_KERR_NOT_LEADER_OR_FOLLOWER:
    case ST_KERR_LEADER_NOT_AVAILABLE:
        actions = REFRESH;
        break;
    case ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER:
        actions = PERMANENT;
        possibly = true;
        break;
    default:
        actions = PERMANENT;
        break;
    }
    bool update_ack = true, update_err = true;
    bool bump = false;
    /* rd_kafka_handle_idempotent_Produce_error */
    if (e == ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER) {
        int32_t r = b->seq - p->next_ack_seq;
        if (r == 0) {
            pipe_fatal(s, b, "OUT_OF_ORDER_SEQUENCE_NUMBER: sequence desynchronization");
            return;
        }
        if (r < 0) {
            pipe_fatal(s, b, "OUT_OF_ORDER_SEQUENCE_NUMBER: rewound sequence number");
            return;
        }
        /* skipped sequence numbers, caused by an earlier failed request: recovering */
        incr_retry = false;
        actions = RETRY;
        possibly = false;
        update_ack = false;
        bump = true;
    } else if (e == ST_KERR_UNKNOWN_PRODUCER_ID) {
        if (b->retries > 0 || p->next_err_seq != b->seq) {
            pipe_fatal(s, b,
                       "UNKNOWN_PRODUCER_ID: unable to retry without risking "
                       "duplication/reordering");
            return;
        }
        incr_retry = false;
        actions = RETRY;
        possibly = false;
        update_ack = false;
        bump = true;
    }
    if (actions & (REFRESH | RETRY)) {
        if (actions & REFRESH) {
            p->leader = -1; /* rd_kafka_toppar_leader_unavailable: metadata asked again */
            if (e != -2 && e != ST_KERR_KAFKA_STORAGE_ERROR)
                incr_retry = false;
        }
        if (!incr_retry)
            possibly = false;
        update_ack = possibly;
        update_err = true;
        p->wait_drain = true; /* drain before retrying */
        b->retries += incr_retry;
        p->next_ms = s->now + PIPE_BACKOFF_MS;
    }
    if (actions & PERMANENT) {
        /* the batch fails (given up: not gapless) and the epoch is bumped */
        ev(s, "pp: gives up seq %d..%d: %s, bumps its epoch", (int)b->seq, (int)(next_seq - 1),
           pipe_err_name(e));
        bump = true;
        update_ack = false;
        update_err = true;
        p->n_failed++;
        memmove(p->q + i, p->q + i + 1, (size_t)(p->nq - i - 1) * sizeof p->q[0]);
        p->nq--;
    }
    if (bump)
        p->bump = true;
    if (update_ack)
        p->next_ack_seq = next_seq;
    if (update_err)
        p->next_err_seq = next_seq;
}

/* A request on the connection to broker bid unanswered past the request timeout: librdkafka
 * fails it (_TIMED_OUT) and, socket.max.fails being 1, closes the connection, failing the
 * others in flight on it (_TRANSPORT), in the order they were sent. */
static void pipe_conn_fail(sim_t *s, int32_t bid)
{
    pipe_prod_t *p = &s->pp;
    ev(s, "pp: request to b%d timed out: disconnects", (int)bid);
    p->n_conn_fail++;
    bool first = true;
    for (int i = 0; i < p->nq && !p->dead;) {
        pbatch_t *b = &p->q[i];
        if (!b->inflight || b->broker != bid) {
            i++;
            continue;
        }
        int nq = p->nq;
        pipe_result(s, i, first ? -1 : -2);
        first = false;
        if (p->nq == nq)
            i++;
    }
    p->conn[bid].open = false;
    if (p->leader == bid)
        p->leader = -1; /* the broker went down: its partitions' leaders asked again */
}

static void pipe_on_answer(sim_t *s, const msg_t *m)
{
    pipe_prod_t *p = &s->pp;
    if (p->dead)
        return;
    for (int i = 0; i < p->nq; i++)
        if (p->q[i].inflight && p->q[i].req == m->req) {
            pipe_result(s, i, m->error);
            return;
        }
}

static void pipe_tick(sim_t *s)
{
    pipe_prod_t *p = &s->pp;
    if (p->dead)
        return;
    for (int i = 0; i < p->nq; i++)
        if (p->q[i].inflight && s->now - p->q[i].sent_ms > PRODUCE_TIMEOUT_MS) {
            pipe_conn_fail(s, p->q[i].broker);
            if (p->dead)
                return;
            i = -1; /* the queue changed */
        }
    if (!s->healed && p->nq < PIPE_QUEUE && chance(&s->r, 0.3)) {
        pbatch_t *b = &p->q[p->nq++];
        memset(b, 0, sizeof *b);
        b->msgid = p->next_msgid;
        b->count = (int32_t)rnd_in(&s->r, 1, 3);
        b->rec0 = s->record_id;
        b->offset = -1;
        /* the real wall clock's time, as a producer stamps its records: the partition
         * rebuilding its producers from the log after a restart takes their times from the
         * records, and expires those a day older than its (real) clock */
        b->ts = st_wall_ms();
        p->next_msgid += (uint64_t)b->count;
        s->record_id += (uint64_t)b->count;
    }
    if (s->now < p->next_ms || p->nq == 0)
        return;
    if (p->wait_drain || p->bump) {
        if (p->ninflight > 0)
            return;
        p->wait_drain = false;
        if (p->bump) {
            /* rd_kafka_idemp_drain_done, then rd_kafka_toppar_pid_change: the first message
             * queued starts the new epoch at sequence 0 */
            p->bump = false;
            p->epoch++;
            p->base_msgid = p->q[0].msgid;
            p->next_ack_seq = p->next_err_seq = 0;
            p->n_bumps++;
            ev(s, "pp: epoch %d from msgid %" PRIu64, (int)p->epoch, p->base_msgid);
        }
    }
    if (p->leader < 0) {
        int32_t l = client_leader(s);
        if (l < 0) {
            p->next_ms = s->now + 50;
            return;
        }
        p->leader = l;
        ev(s, "pp: produces to b%d", (int)l);
    }
    for (int i = 0; i < p->nq && p->ninflight < PIPE_INFLIGHT; i++)
        if (!p->q[i].inflight)
            pipe_send(s, &p->q[i]);
}

static void admin_tick(sim_t *s)
{
    if (s->del_waiting && s->now - s->del_sent > DELETE_TIMEOUT_MS)
        s->del_waiting = false;
    if (s->del_waiting || s->healed || !chance(&s->r, s->p_delete))
        return;
    int32_t leader = client_leader(s);
    if (leader < 0 || !s->b[leader].up || !s->b[leader].p || !s->b[leader].p->log)
        return;
    broker_t *b = &s->b[leader];
    /* ListOffsets first (read here directly): somewhere between the log start and the hw */
    int64_t start = st_part_log_start(b->p), hw = b->p->hw;
    if (hw <= start)
        return;
    msg_t *m = msg_new(M_DELETE, NODE_CLIENT, leader);
    m->offset = rnd_in(&s->r, start, start + (hw - start) / 2);
    m->req = s->del_req = ++s->req_next;
    m->to_inc = b->inc;
    s->del_waiting = true;
    s->del_sent = s->now;
    ev(s, "admin: DeleteRecords to %" PRId64 " at b%d", m->offset, (int)leader);
    net_send(s, m);
}

static void client_on_msg(sim_t *s, const msg_t *m)
{
    if (m->kind == M_PRODUCE_RESP && m->producer == PIPE)
        pipe_on_answer(s, m);
    else if (m->kind == M_PRODUCE_RESP)
        producer_on_answer(s, m);
    else if (m->kind == M_DELETE_RESP && s->del_waiting && m->req == s->del_req)
        s->del_waiting = false;
}

/* ---- faults ---- */

/* Whether b leads and an up follower holds durably records past b's durable end. */
static bool follower_ahead(sim_t *s, const broker_t *b)
{
    if (!b->p || !b->p->log || !b->p->repl.on || !b->p->repl.role.leader)
        return false;
    const st_part_role_t *ro = &b->p->repl.role;
    int64_t d = st_part_durable_end(b->p);
    for (int i = 0; i < ro->nreplicas; i++) {
        const broker_t *o = &s->b[ro->replicas[i]];
        if (o != b && o->up && o->p && o->p->log && st_part_durable_end(o->p) > d)
            return true;
    }
    return false;
}

static void fault_step(sim_t *s)
{
    rng_t *r = &s->r;
    bool all = chance(r, s->p_all);
    if (all)
        ev(s, "FAULT: power loss of every broker");
    for (int i = 1; i <= NB; i++) {
        broker_t *v = &s->b[i];
        if (!v->up || !(all || (v->crash_at && s->now >= v->crash_at)))
            continue;
        ev(s, "FAULT: crash b%d%s", v->id, all ? "" : " (it served unsynced records)");
        s->n_ahead_crash += follower_ahead(s, v);
        b_stop(s, v, false);
        v->down_until = s->now + rnd_in(r, 1, 100) * TICK_MS;
        s->n_crash++;
    }
    broker_t *b = &s->b[rnd_in(r, 1, NB)];
    if (b->up && chance(r, s->p_crash)) {
        bool graceful = chance(r, 0.25);
        ev(s, "FAULT: %s b%d", graceful ? "graceful restart of" : "crash", b->id);
        s->n_ahead_crash += !graceful && follower_ahead(s, b);
        b_stop(s, b, graceful);
        b->down_until = s->now + rnd_in(r, 1, 100) * TICK_MS;
        s->n_crash++;
    }
    b = &s->b[rnd_in(r, 1, NB)];
    if (b->up && !b->frozen && chance(r, s->p_freeze)) {
        b->frozen = true;
        b->frozen_since = s->now;
        b->frozen_until = s->now + rnd_in(r, 10, 150) * TICK_MS;
        b->clock_pauses = chance(r, 0.5);
        ev(s, "FAULT: freeze b%d for %" PRId64 " ms (clock %s)", b->id, b->frozen_until - s->now,
           b->clock_pauses ? "paused" : "runs");
        s->n_freeze++;
    }
    if (chance(r, s->p_cut)) {
        int from = (int)rnd_in(r, 0, NNODES - 1), to = (int)rnd_in(r, 0, NNODES - 1);
        if (from != to && !s->cut[from][to] && !(from == NODE_CLIENT && to == NODE_CTL)) {
            s->cut[from][to] = true;
            s->cut_until[from][to] = s->now + rnd_in(r, 5, 200) * TICK_MS;
            ev(s, "FAULT: cut %d -> %d for %" PRId64 " ms", from, to,
               s->cut_until[from][to] - s->now);
        }
    }
}

/* Ends faults whose time is up (every fault, once healed). */
static void heal_step(sim_t *s)
{
    for (int i = 1; i <= NB; i++) {
        broker_t *b = &s->b[i];
        if (!b->up && (s->healed || s->now >= b->down_until))
            b_start(s, b);
        if (b->frozen && (s->healed || s->now >= b->frozen_until)) {
            b->frozen = false;
            if (b->clock_pauses)
                b->clock_lag += s->now - b->frozen_since;
            ev(s, "b%d: thaws", b->id);
        }
    }
    for (int f = 0; f < NNODES; f++)
        for (int t = 0; t < NNODES; t++)
            if (s->cut[f][t] && (s->healed || s->now >= s->cut_until[f][t])) {
                s->cut[f][t] = false;
                ev(s, "heal %d -> %d", f, t);
            }
}

/* ---- the run ---- */

/* Delivers every message due now, in order of due time and sending. */
static void deliver(sim_t *s)
{
    for (;;) {
        size_t best = (size_t)-1;
        for (size_t i = 0; i < s->nq; i++) {
            msg_t *m = s->q[i];
            if (m->due > s->now)
                continue;
            if (m->to >= 1 && m->to <= NB && s->b[m->to].frozen && s->b[m->to].up)
                continue; /* waits in the socket until the broker runs again */
            if (best == (size_t)-1 || m->due < s->q[best]->due ||
                (m->due == s->q[best]->due && m->seq < s->q[best]->seq))
                best = i;
        }
        if (best == (size_t)-1)
            return;
        msg_t *m = s->q[best];
        s->q[best] = s->q[--s->nq];
        if (m->to == NODE_CTL) {
            if (m->kind == M_REGISTER)
                ctl_on_register(s, m);
            else if (m->kind == M_HEARTBEAT)
                ctl_on_heartbeat(s, m);
            else if (m->kind == M_ALTER)
                ctl_on_alter(s, m);
        } else if (m->to == NODE_CLIENT) {
            client_on_msg(s, m);
        } else {
            broker_t *b = &s->b[m->to];
            /* a connection to an incarnation that died is gone, with what it carried */
            if (b->up && (m->kind == M_MD || m->to_inc == b->inc))
                b_on_msg(s, b, m);
        }
        msg_free(m);
        oracle_event(s);
    }
}

/* O6's condition: everything caught up and answered. */
static bool converged(sim_t *s, char *why, size_t n)
{
    const st_md_partition_t *mp = md_part(s->md);
    if (mp->leader < 0 || mp->nisr != mp->nreplicas || mp->nreplicas != RF || moving(mp)) {
        snprintf(why, n, "leader %d, ISR of %d, %d replicas (adding %d, removing %d)",
                 (int)mp->leader, (int)mp->nisr, (int)mp->nreplicas, (int)mp->nadding,
                 (int)mp->nremoving);
        return false;
    }
    broker_t *l = &s->b[mp->leader];
    if (!b_serving(l)) {
        snprintf(why, n, "leader %d not serving", l->id);
        return false;
    }
    int64_t end = st_log_end_offset(l->p->log);
    for (int i = 1; i <= NB; i++) {
        broker_t *b = &s->b[i];
        const st_md_broker_t *mb = st_md_broker(s->md, b->id);
        if (!b->up || mb->fenced || !b->md || b->md->version != s->md->version) {
            snprintf(why, n, "broker %d: up %d fenced %d md %" PRId64 "/%" PRId64, b->id, b->up,
                     mb->fenced, b->md ? b->md->version : 0, s->md->version);
            return false;
        }
        if (!st_md_is_replica(mp, b->id)) {
            if (b->p || b->pending) {
                snprintf(why, n, "broker %d: not a replica, still %s", b->id,
                         b->p ? "holds a copy" : "owes answers");
                return false;
            }
            continue;
        }
        if (!b->p) {
            snprintf(why, n, "broker %d: a replica without a copy", b->id);
            return false;
        }
        if (st_part_durable_end(b->p) != end || b->p->hw != end || b->pending) {
            snprintf(why, n,
                     "broker %d: durable end %" PRId64 " hw %" PRId64 " (leader's end %" PRId64
                     "), %d answers owed",
                     b->id, st_part_durable_end(b->p), b->p->hw, end, b->pending);
            return false;
        }
    }
    for (int k = 0; k < NPRODUCERS; k++)
        if (s->pr[k].busy) {
            snprintf(why, n, "producer %d still has a batch (%d tries)", k, s->pr[k].tries);
            return false;
        }
    if (s->pp.nq > 0) {
        snprintf(why, n, "the pipelined producer still has %d batches (%d in flight)", s->pp.nq,
                 s->pp.ninflight);
        return false;
    }
    if (s->del_waiting) {
        snprintf(why, n, "a DeleteRecords unanswered");
        return false;
    }
    return true;
}

/* O2's second half and identical replicas, once converged. */
static void final_check(sim_t *s)
{
    const st_md_partition_t *mp = md_part(s->md);
    broker_t *l = &s->b[mp->leader];
    oracle_step(s);
    sbatch_t *lv;
    int64_t lstart = st_part_log_start(l->p);
    size_t ln = log_batches(s, l->p->log, lstart, INT64_MAX, &lv);
    CHECK(s, lstart <= s->max_delete || lstart == 0 || s->unclean_gen > 0,
          "the leader's log starts at %" PRId64 " but DeleteRecords asked for %" PRId64 " at most",
          lstart, s->max_delete);
    for (int i = 1; i <= NB; i++) {
        broker_t *b = &s->b[i];
        if (b == l)
            continue;
        if (!st_md_is_replica(mp, b->id)) {
            CHECK(s, !b->p, "broker %d is no replica and still holds a copy", b->id);
            continue;
        }
        sbatch_t *v;
        int64_t start = st_part_log_start(b->p);
        size_t n = log_batches(s, b->p->log, start, INT64_MAX, &v);
        size_t a = 0, k = 0;
        while (a < ln && lv[a].last < start)
            a++;
        while (k < n && v[k].last < lstart)
            k++;
        if (n - k != ln - a) {
            size_t j = 0; /* the first batch where they differ, for the report */
            while (k + j < n && a + j < ln && v[k + j].base == lv[a + j].base &&
                   v[k + j].last == lv[a + j].last)
                j++;
            CHECK(s, false,
                  "replica %d holds %zu batches from %" PRId64 ", the leader %zu; first "
                  "difference: replica %" PRId64 "..%" PRId64 ", leader %" PRId64 "..%" PRId64,
                  b->id, n - k, start, ln - a, k + j < n ? v[k + j].base : -1,
                  k + j < n ? v[k + j].last : -1, a + j < ln ? lv[a + j].base : -1,
                  a + j < ln ? lv[a + j].last : -1);
        }
        for (; k < n; k++, a++)
            CHECK(s,
                  v[k].base == lv[a].base && v[k].last == lv[a].last && v[k].crc == lv[a].crc &&
                      v[k].len == lv[a].len && v[k].epoch == lv[a].epoch,
                  "replica %d differs from leader %d at %" PRId64 " (%" PRId64 "..%" PRId64
                  " crc %08x epoch %d vs %" PRId64 "..%" PRId64 " crc %08x epoch %d)",
                  b->id, l->id, v[k].base, v[k].base, v[k].last, v[k].crc, (int)v[k].epoch,
                  lv[a].base, lv[a].last, lv[a].crc, (int)lv[a].epoch);
        free(v);
    }
    for (size_t i = 0; i < s->nacks; i++) {
        const acked_t *a = &s->acks[i];
        if (a->gen < s->unclean_gen || a->last < lstart)
            continue;
        size_t lo = 0, hi = ln;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (lv[mid].base < a->base)
                lo = mid + 1;
            else
                hi = mid;
        }
        CHECK(s, lo < ln && lv[lo].base == a->base && lv[lo].crc == a->crc,
              "O2: acks=all success at %" PRId64 "..%" PRId64 " (crc %08x, by %d at epoch %d, "
              "step %" PRId64 ") is not in the final leader %d's log",
              a->base, a->last, a->crc, a->broker, a->epoch, a->step, l->id);
    }
    free(lv);
}

static void sim_free(sim_t *s)
{
    for (int i = 1; i <= NB; i++) {
        broker_t *b = &s->b[i];
        if (b->up)
            b_stop(s, b, true);
        tenv_fini(&b->t);
    }
    for (size_t i = 0; i < s->nq; i++)
        msg_free(s->q[i]);
    free(s->q);
    st_md_unref(s->md);
    for (int k = 0; k < NPRODUCERS; k++)
        st_buf_fini(&s->pr[k].batch);
    st_buf_fini(&s->pp.buf);
    free(s->com);
    free(s->acks);
    free(s->hwmax);
    free(s->acc);
    free(s->trace);
    st_buf_fini(&s->readbuf);
}

static bool g_isr_check = true;
static double g_moves = 1; /* --moves: the reassignment rate's factor */

static void sim_init(sim_t *s, uint64_t seed, int steps, int verbose, st_loop_t *loop)
{
    memset(s, 0, sizeof *s);
    s->isr_check = g_isr_check;
    s->seed = seed;
    uint64_t x = seed;
    s->r.s = splitmix64(&x) | 1;
    s->steps = steps;
    s->fault_steps = steps;
    s->verbose = verbose;
    s->loop = loop;
    s->trace = calloc(TRACE_LINES, sizeof *s->trace);
    st_buf_init(&s->readbuf);
    s->com_end = -1;
    s->max_delete = -1;
    rng_t *r = &s->r;
    /* this seed's weather */
    s->p_loss = chance(r, 0.3) ? 0 : (double)rnd_in(r, 0, 80) / 1000;
    s->p_dup = (double)rnd_in(r, 0, 30) / 1000;
    s->p_slow = (double)rnd_in(r, 0, 50) / 1000;
    s->p_crash = (double)rnd_in(r, 0, 40) / 10000;
    s->p_freeze = (double)rnd_in(r, 0, 20) / 10000;
    s->p_cut = (double)rnd_in(r, 0, 100) / 10000;
    s->p_pref = (double)rnd_in(r, 0, 50) / 10000;
    s->p_delete = (double)rnd_in(r, 0, 40) / 10000;
    s->p_reassign = chance(r, 0.6) ? (double)rnd_in(r, 0, 40) / 10000 * g_moves : 0;
    s->p_cancel = (double)rnd_in(r, 0, 50) / 10000;
    s->p_ahead = chance(r, 0.3) ? 0 : (double)rnd_in(r, 0, 100) / 1000;
    s->p_all = chance(r, 0.5) ? 0 : (double)rnd_in(r, 0, 10) / 10000;
    s->unclean_set = chance(r, 0.7);
    s->unclean_default = chance(r, 0.5);
    s->unclean = s->unclean_set ? chance(r, 0.3) : s->unclean_default;
    /* the controller's first state: the brokers registered (their first incarnations) and
     * unfenced, the topic created on them */
    s->md = st_md_new("sim-cluster", NODE_CTL);
    for (int32_t id = 1; id <= NB; id++) {
        st_md_add_broker(s->md, id, "localhost", 9000 + id);
        md_broker_mut(s->md, id)->incarnation = (uint64_t)id;
        s->cb[id].inc = (uint64_t)id;
    }
    st_md_topic_t *t = st_md_topic_new(TOPIC, TOPIC_ID, 1);
    t->replication_factor = RF;
    if (s->unclean_set)
        st_md_topic_set_config(t, "unclean.leader.election.enable", s->unclean ? "true" : "false");
    st_md_topic_set_config(t, "min.insync.replicas", "2");
    st_md_partition_t *mp = &t->partitions[0];
    mp->leader_epoch = 0;
    mp->partition_epoch = 0;
    /* on brokers 1..RF (the preferred leader varies with the seed); the others host nothing
     * until a reassignment moves the partition onto them */
    mp->nreplicas = RF;
    mp->nisr = RF;
    for (int i = 0; i < RF; i++)
        mp->replicas[i] = mp->isr[i] = (int32_t)((seed + (uint64_t)i) % RF) + 1;
    mp->leader = mp->replicas[0];
    st_md_add_topic(s->md, t);
    s->md->version = 1;
    for (int i = 1; i <= NB; i++) {
        broker_t *b = &s->b[i];
        b->id = i;
        b->hosted = st_md_is_replica(mp, i);
        tenv_init(&b->t, seed * 31 + (uint64_t)i);
        b->t.defer = true;
    }
    for (int k = 0; k < NPRODUCERS; k++) {
        producer_t *pr = &s->pr[k];
        st_buf_init(&pr->batch);
        pr->acks = k < 2 ? ST_ACKS_ALL : k == 2 ? ST_ACKS_LEADER : ST_ACKS_NONE;
        pr->idem = k == 0;
        pr->pid = 1000 + k;
    }
    st_buf_init(&s->pp.buf);
    s->pp.pid = 1000 + PIPE;
    s->pp.next_msgid = s->pp.base_msgid = 1; /* librdkafka's msgids start at 1 */
    s->pp.leader = -1;
    s->pp.gap_epoch = s->pp.forgot_epoch = -1;
    ev(s,
       "seed %" PRIu64 ": loss %.3f dup %.3f slow %.3f crash %.4f freeze %.4f cut %.4f pref "
       "%.4f delete %.4f reassign %.4f cancel %.4f ahead %.3f all %.4f unclean %d (topic %s, "
       "default %d)",
       seed, s->p_loss, s->p_dup, s->p_slow, s->p_crash, s->p_freeze, s->p_cut, s->p_pref,
       s->p_delete, s->p_reassign, s->p_cancel, s->p_ahead, s->p_all, s->unclean,
       s->unclean_set ? "sets it" : "unset", s->unclean_default);
}

static void sim_step(sim_t *s)
{
    s->now = s->step * TICK_MS;
    /* A leadership's grace for producers' gaps (partition.h, ST_PART_GAP_GRACE_MS) runs on the
     * real monotonic clock, which hardly moves in a run: each step moves the leadership's
     * start back by the step's virtual time, so the grace ends after as much simulated time */
    for (int i = 1; i <= NB; i++)
        if (s->b[i].p && s->b[i].p->repl.on && s->b[i].p->repl.role.leader)
            s->b[i].p->repl.leader_since_ms -= TICK_MS;
    if (!s->healed)
        fault_step(s);
    heal_step(s);
    deliver(s);
    ctl_tick(s);
    int order[NB];
    for (int i = 0; i < NB; i++)
        order[i] = i + 1;
    for (int i = NB - 1; i > 0; i--) {
        int j = (int)rnd_in(&s->r, 0, i), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < NB; i++) {
        broker_t *b = &s->b[order[i]];
        if (b->up && !b->frozen)
            b_tick(s, b);
    }
    for (int k = 0; k < NPRODUCERS; k++)
        producer_tick(s, k);
    pipe_tick(s);
    admin_tick(s);
    oracle_step(s);
}

/* One seed: faults for `steps` steps, then everything heals and O6 must hold within the
 * bound; then the final checks. Returns true when it passed. */
static bool run_seed(uint64_t seed, int steps, int verbose, st_loop_t *loop, sim_t *s)
{
    sim_init(s, seed, steps, verbose, loop);
    if (setjmp(s->fail))
        return false;
    for (int i = 1; i <= NB; i++)
        b_start(s, &s->b[i]);
    ctl_publish(s, st_md_clone(s->md), "topic created");
    for (s->step = 0; s->step < steps; s->step++)
        sim_step(s);
    s->healed = true;
    s->p_loss = s->p_dup = s->p_slow = 0;
    ev(s, "--- every fault heals");
    char why[256] = "";
    int64_t until = s->step + SETTLE_MAX_STEPS;
    for (; s->step < until; s->step++) {
        sim_step(s);
        if (converged(s, why, sizeof why))
            break;
    }
    CHECK(s, s->step < until, "O6: not converged %d steps after the faults healed: %s",
          SETTLE_MAX_STEPS, why);
    final_check(s);
    if (verbose)
        printf("seed %" PRIu64 ": ok: %" PRIu64 " acks=all records, %" PRIu64 " crashes, %" PRIu64
               " freezes, %" PRIu64 " elections (%" PRIu64 " unclean), %" PRIu64
               " truncations, %" PRIu64 " reassignments (%" PRIu64 " completed, %" PRIu64
               " cancelled), converged at step %" PRId64 "\n",
               seed, s->n_acked, s->n_crash, s->n_freeze, s->n_elect, s->n_unclean, s->n_truncate,
               s->n_reassign, s->n_moved, s->n_cancel, s->step);
    sim_free(s);
    return true;
}

int main(int argc, char **argv)
{
    uint64_t first = 1, nseeds = 500;
    int steps = 1200, verbose = 0;
    bool keep_going = false;
    const char *env = getenv("STRATA_SIM_SEEDS");
    if (env && *env)
        nseeds = strtoull(env, NULL, 10);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10);
            nseeds = 1;
        } else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
            nseeds = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "-v") == 0) {
            verbose = verbose > 1 ? verbose : 1;
        } else if (strcmp(argv[i], "-vv") == 0) {
            verbose = 2;
        } else if (strcmp(argv[i], "--keep-going") == 0) {
            keep_going = true;
        } else if (strcmp(argv[i], "--no-isr-check") == 0) {
            g_isr_check = false;
        } else if (strcmp(argv[i], "--no-rejoin-race") == 0) {
            g_rejoin_race = false;
        } else if (strcmp(argv[i], "--moves") == 0 && i + 1 < argc) {
            g_moves = strtod(argv[++i], NULL);
        } else {
            fprintf(stderr,
                    "usage: %s [--seed N | --first S --seeds K] [--steps M] [-v|-vv] "
                    "[--keep-going] [--no-isr-check] [--moves F] [--no-rejoin-race]\n",
                    argv[0]);
            return 2;
        }
    }
    st_log_set_level(verbose > 1 ? ST_LOG_INFO : ST_LOG_FATAL);
    st_loop_t *loop;
    if (st_loop_create(&loop, 64) != 0) {
        fprintf(stderr, "cannot create a loop\n");
        return 1;
    }
    sim_t *s = calloc(1, sizeof *s);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t failed = 0, acked = 0, ran = 0, moves = 0, moved = 0, cancelled = 0, deleted = 0,
             ahead = 0;
    uint64_t pp_acked = 0, pp_conn_fail = 0, pp_bumps = 0, pp_failed = 0, pp_excused = 0,
             pp_gaps = 0, pp_forgot = 0;
    for (uint64_t seed = first; seed < first + nseeds; seed++) {
        ran++;
        if (!run_seed(seed, steps, verbose, loop, s)) {
            failed++;
            if (!keep_going)
                break;
            continue; /* its state is abandoned (leaked): the process ends soon */
        }
        acked += s->n_acked;
        deleted += s->n_deleted_dup;
        ahead += s->n_ahead_crash;
        moves += s->n_reassign;
        moved += s->n_moved;
        cancelled += s->n_cancel;
        pp_acked += s->pp.n_acked;
        pp_conn_fail += s->pp.n_conn_fail;
        pp_bumps += s->pp.n_bumps;
        pp_failed += s->pp.n_failed;
        pp_excused += s->pp.n_excused;
        pp_gaps += s->pp.n_gaps;
        pp_forgot += s->pp.n_forgot;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("replication simulation: %" PRIu64 " seed(s) from %" PRIu64 ", %d steps each: %" PRIu64
           " failed; %" PRIu64 " acks=all records checked (%" PRIu64
           " answered for batches DeleteRecords removed); %" PRIu64 " reassignments (%" PRIu64
           " completed, %" PRIu64 " cancelled); %" PRIu64
           " leader crashes with a follower durably ahead of it; %.1f s\n",
           ran, first, steps, failed, acked, deleted, moves, moved, cancelled, ahead, secs);
    printf("pipelined producer: %" PRIu64 " batches acknowledged, %" PRIu64
           " request timeouts, %" PRIu64 " epoch bumps, %" PRIu64 " batches given up, %" PRIu64
           " fatal errors excused (%" PRIu64 " gaps a leader took, %" PRIu64
           " deleted batches retried)\n",
           pp_acked, pp_conn_fail, pp_bumps, pp_failed, pp_excused, pp_gaps, pp_forgot);
    fflush(stdout);
    if (failed)
        _exit(1); /* failed seeds' state is not freed */
    free(s);
    st_loop_destroy(loop);
    return 0;
}
