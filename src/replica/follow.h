/*
 * follow.h — one followed partition's replication decisions, as a pure state machine: what a
 * follower does with each partition of a leader's Fetch answer, and where it fetches from
 * next. No sockets, no threads, no clock: the fetcher thread (fetcher.c) and the simulation
 * test (tests/unit/replica/test_sim.c) drive the same code.
 *
 * The rules are Kafka's follower since 2.7 (KIP-320 validation by the leader, KIP-279's search
 * in as many rounds as it takes):
 *
 *   R1. Every Fetch carries fetch_offset = the local log's durable end, last_fetched_epoch =
 *       the latest leader epoch in the local log (from the log itself, never from an answer),
 *       and log_start_offset = the local log start.
 *   R2. The leader checks (last_fetched_epoch, fetch_offset) against its own epochs. Where they
 *       diverge it answers diverging_epoch (E, end): its largest epoch <= last_fetched_epoch is E
 *       and ends at `end`. The follower then cuts its log to min(end, where its own largest epoch
 *       <= E ends) — DO_TRUNCATE with end_epoch = E — and fetches again with the latest epoch of
 *       what is left, which the leader checks again: one round per epoch the logs disagree on.
 *   R3. OFFSET_OUT_OF_RANGE with the local end below the leader's log start: the log restarts
 *       empty at the leader's log start (DO_RESTART); with the leader's high watermark below the
 *       local log start (an unclean election of a shorter replica), at that high watermark.
 *       Out of range otherwise (a log longer than
 *       the leader's with no epoch to compare, which R2 would have caught): cut to the leader's
 *       high watermark, below which the logs agree (DO_TRUNCATE, end_epoch -1).
 *   R4. Records are appended as they came (whole batches only); the leader's high watermark and
 *       log start go with them: the follower's high watermark is min(leader's, local durable
 *       end), and its log start moves up to the leader's (never past its own high watermark).
 *   R5. FENCED_LEADER_EPOCH: this broker's metadata is behind; nothing more until a new follow.
 *       Any other error: back off and fetch again.
 *
 *   st_rfollow_init --> FETCH --answer--> st_rfollow_on_fetch --> action
 *       DO_APPEND / DO_TRUNCATE / DO_RESTART: JOB until st_rfollow_on_position (the shard's
 *           answer: the log's durable end, latest epoch and log start after the job) --> FETCH
 *       DO_HW: FETCH (the shard adopts the leader's high watermark and log start); JOB
 *           while the leader's log start is past the one last reported, so the new start is
 *           reported once durable (the caller sends a position whenever f->phase is
 *           ST_RF_JOB after the call)
 *       DO_BACKOFF: FETCH after a backoff (the caller's timer)
 *       DO_STOP: STOPPED until st_rfollow_init again
 *
 * Threads: any; one st_rfollow_t belongs to one thread.
 */
#ifndef ST_REPLICA_FOLLOW_H
#define ST_REPLICA_FOLLOW_H

#include <stddef.h>
#include <stdint.h>

typedef enum st_rfollow_phase {
    ST_RF_FETCH,   /* goes in the next Fetch */
    ST_RF_JOB,     /* a job is with the owner shard: in no request until its position */
    ST_RF_STOPPED, /* fenced: waits for st_rfollow_init */
} st_rfollow_phase_t;

typedef struct st_rfollow {
    int32_t leader_epoch; /* the leadership followed (current_leader_epoch of each request) */
    int64_t fetch_offset; /* R1: the local durable end */
    int32_t last_epoch;   /* R1: the latest epoch in the local log (-1: none) */
    int64_t log_start;    /* R1: the local log start */
    int64_t hw_sent;      /* the leader high watermark last handed to the shard (-1: none) */
    int64_t start_sent;   /* the leader log start last handed to the shard (-1: none) */
    int phase;            /* st_rfollow_phase_t */
} st_rfollow_t;

/* One partition of a leader's Fetch answer. */
typedef struct st_rfollow_answer {
    int16_t error;
    int64_t high_watermark, log_start_offset;
    int32_t diverging_epoch; /* -1: none */
    int64_t diverging_end;
    const uint8_t *records;
    size_t len;
} st_rfollow_answer_t;

typedef enum st_rfollow_do {
    ST_RF_DO_NOTHING,
    ST_RF_DO_APPEND,   /* append records[0..len) (whole batches), with hw and log_start */
    ST_RF_DO_TRUNCATE, /* cut to at most offset, and to where local end_epoch ends (>= 0) */
    ST_RF_DO_RESTART,  /* empty the log and start it at offset (the leader's log start) */
    ST_RF_DO_HW,       /* adopt the leader's hw and log_start (no position expected) */
    ST_RF_DO_BACKOFF,  /* fetch again after a backoff */
    ST_RF_DO_STOP,     /* fenced: wait for new metadata */
} st_rfollow_do_t;

typedef struct st_rfollow_action {
    st_rfollow_do_t kind;
    size_t len;             /* DO_APPEND */
    int64_t offset;         /* DO_TRUNCATE, DO_RESTART */
    int32_t end_epoch;      /* DO_TRUNCATE: -1 none */
    int64_t hw, log_start;  /* DO_APPEND, DO_HW: the leader's */
    int32_t appended_epoch; /* DO_APPEND: the epoch of the last whole batch */
} st_rfollow_action_t;

/* Starts (or starts over) following leader_epoch from the local log's state. */
void st_rfollow_init(st_rfollow_t *f, int32_t leader_epoch, int64_t durable_end, int32_t last_epoch,
                     int64_t log_start);

/* One partition of a Fetch answer (f in ST_RF_FETCH): the action to take. An action that
 * expects a position (APPEND, TRUNCATE, RESTART, and HW with a new log start) puts f in
 * ST_RF_JOB. Fetch error codes are Kafka's (proto/kerr.h). */
st_rfollow_action_t st_rfollow_on_fetch(st_rfollow_t *f, const st_rfollow_answer_t *a);

/* The shard's answer to a job: err 0 and the log's state after it, or an error (the log's
 * state is then read again from the same fields; durable_end -1: unknown, kept). */
void st_rfollow_on_position(st_rfollow_t *f, int err, int64_t durable_end, int32_t last_epoch,
                            int64_t log_start);

#endif
