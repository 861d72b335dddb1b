/*
 * Unit tests for partition/replica.c (and the replication seams of append.c), without a
 * network: a leader's high watermark over its ISR and the acks=all appends waiting for it,
 * min.insync.replicas, losing leadership, ISR changes to ask for, and a follower's appends of
 * the leader's batches, its high watermark, truncation and idempotent producer state.
 *
 * The partition table runs on a real loop; its storage env is storage's test env over faultfs
 * with sync completions held (tenv defer): durability arrives only when a test completes the
 * held syncs (settle), so every step between "written" and "durable" can be looked at.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/clock.h"
#include "base/err.h"
#include "io/loop.h"
#include "partition/partition.h"
#include "partition/part_impl.h"
#include "proto/kerr.h"
#include "storage/testutil.h"

#define SELF     1 /* the leader's id in the leader tests */
#define LAG_MS   10000
#define RETRY_MS 500

static const uint8_t TOPIC_ID[16] = {0x51, 0x7a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};

typedef struct fx {
    tenv_t t;
    st_loop_t *loop;
    st_parts_t parts;
    st_part_t *p;
    int wakes; /* shards woken for fetches */
} fx_t;

/* An append's (or a replica append's) completion. */
typedef struct answer {
    int calls;
    int err;
} answer_t;

static void on_done(void *arg, int err)
{
    answer_t *a = arg;
    a->calls++;
    a->err = err;
}

static void on_wake(void *arg, int waiter, const uint8_t topic_id[16], int32_t index)
{
    (void)waiter;
    (void)topic_id;
    (void)index;
    ((fx_t *)arg)->wakes++;
}

static fx_t *fx_open(void)
{
    fx_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    tenv_init(&f->t, 7);
    f->t.defer = true;
    assert_int_equal(st_loop_create(&f->loop, 64), 0);
    st_parts_config_t pc = {
        .log_dirs = "/data",
        .nshards = 1,
        .producer_ids_max = 1000,
        .producer_id_expiration_ms = 86400000,
        .cleaner_enable = false,
        .cleaner_threads = 1,
        .cleaner_io_max_bytes_per_second = INT64_MAX,
        .cleaner_dedupe_buffer_size = 1 << 20,
        .wake = on_wake,
        .wake_arg = f,
    };
    st_parts_init(&f->parts, f->loop, &f->t.env, &pc);
    st_log_config_t lc;
    st_log_config_default(&lc);
    assert_int_equal(lc.flush_policy, ST_FLUSH_STRICT);
    assert_int_equal(st_parts_open(&f->parts, "rt", TOPIC_ID, 0, &lc, &f->p), 0);
    assert_non_null(f->p->log);
    return f;
}

/* Completes the held syncs, and those the completions issue (the next group-commit rounds),
 * until none is left. Bounded: a round that never ends fails the test. */
static void settle(fx_t *f)
{
    for (int i = 0; i < 100 && f->t.nq > 0; i++)
        tenv_complete(&f->t, (size_t)-1);
    assert_int_equal(f->t.nq, 0);
}

static void fx_close(fx_t *f)
{
    settle(f);
    f->t.defer = false; /* closing syncs complete inline */
    st_parts_fini(&f->parts);
    st_loop_destroy(f->loop);
    tenv_fini(&f->t);
    free(f);
}

/* Replica `replica`'s fetch from `offset` (no epoch to check), as the leader sees it. */
static void fetched(st_part_t *p, int32_t replica, int64_t offset, int64_t now)
{
    st_part_diverging_t div;
    st_part_follower_fetch(p, replica, offset, -1, 0, now, &div);
    assert_int_equal(div.epoch, -1);
}

/* A role over replicas {1, 2, 3}; this broker leads when self == leader_id. */
static st_part_role_t role_of(int32_t self, int32_t leader_id, int32_t leader_epoch,
                              int32_t partition_epoch, int32_t min_isr, const int32_t *isr,
                              int16_t nisr)
{
    st_part_role_t r;
    memset(&r, 0, sizeof r);
    r.leader = self == leader_id;
    r.self = self;
    r.leader_id = leader_id;
    r.leader_epoch = leader_epoch;
    r.partition_epoch = partition_epoch;
    r.min_isr = min_isr;
    r.nreplicas = 3;
    for (int i = 0; i < 3; i++)
        r.replicas[i] = i + 1;
    r.nisr = nisr;
    memcpy(r.isr, isr, (size_t)nisr * sizeof *isr);
    for (int i = 0; i < 3; i++)
        r.live[i] = true; /* every broker registered and unfenced */
    return r;
}

static const int32_t ISR_ALL[] = {1, 2, 3};
static const int32_t ISR_SELF[] = {SELF};

/* A producer's batch of `count` records (no producer id). */
static bool produce(fx_t *f, int32_t count, st_acks_t acks, st_part_append_res_t *res, answer_t *a)
{
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, count, 8, 1000, 'p');
    bool later = st_part_append(f->p, b.data, b.len, acks, res, on_done, a);
    st_buf_fini(&b);
    return later;
}

/* Appends to b a batch of `count` records stamped as a leader stamps them (base offset,
 * partition leader epoch) and, for pid >= 0, an idempotent producer's fields. A producer's own
 * batch is base_offset 0, leader_epoch -1. */
static void stamped(st_buf_t *b, int32_t count, int64_t base_offset, int32_t leader_epoch,
                    int64_t pid, int16_t producer_epoch, int32_t base_sequence)
{
    size_t start = b->len;
    assert_true(tb_batch(b, count, 8, 2000, 'r') > 0);
    uint8_t *h = b->data + start;
    st_put_be64(h + ST_BATCH_OFF_BASE_OFFSET, (uint64_t)base_offset);
    st_put_be32(h + ST_BATCH_OFF_LEADER_EPOCH, (uint32_t)leader_epoch);
    if (pid >= 0) {
        st_put_be64(h + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)pid);
        st_put_be16(h + ST_BATCH_OFF_PRODUCER_EPOCH, (uint16_t)producer_epoch);
        st_put_be32(h + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)base_sequence);
    }
    tb_fix_crc(h);
}

/* An idempotent producer's batch (pid 42, epoch 0) sent to the partition as a leader. */
static bool produce_seq(fx_t *f, int32_t count, int32_t base_sequence, st_part_append_res_t *res,
                        answer_t *a)
{
    st_buf_t b;
    st_buf_init(&b);
    stamped(&b, count, 0, -1, 42, 0, base_sequence);
    bool later = st_part_append(f->p, b.data, b.len, ST_ACKS_LEADER, res, on_done, a);
    st_buf_fini(&b);
    return later;
}

static int64_t log_end(const fx_t *f)
{
    return st_log_end_offset(f->p->log);
}

/* 1. acks=all waits for every ISR member; the high watermark is the smallest durable end over
 * the ISR, unknown followers hold it, and it never moves back. */
static void test_leader_acks_all_waits_for_isr(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    assert_int_equal(p->hw, 0);

    st_part_append_res_t res;
    answer_t a = {0, 0};
    assert_true(produce(f, 3, ST_ACKS_ALL, &res, &a));
    assert_int_equal(res.error, 0);
    assert_int_equal(res.base_offset, 0);
    assert_int_equal(log_end(f), 3);
    assert_int_equal(st_part_latest_epoch(p), 5); /* stamped with the leader epoch */
    settle(f);
    assert_int_equal(st_part_durable_end(p), 3);
    /* durable here, but the followers have not been heard from: the hw stays where it was */
    assert_int_equal(p->hw, 0);
    assert_int_equal(a.calls, 0);

    int64_t now = st_mono_ms();
    fetched(p, 2, 3, now);
    assert_int_equal(p->hw, 0); /* 3 is still unknown */
    assert_int_equal(a.calls, 0);
    fetched(p, 3, 2, now);
    assert_int_equal(p->hw, 2); /* the smallest over the ISR */
    assert_int_equal(a.calls, 0);
    st_part_add_waiter(p, 0, p->hw);
    f->wakes = 0;
    fetched(p, 3, 3, now);
    assert_int_equal(p->hw, 3);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_int_equal(f->wakes, 1); /* the waiting fetch was told once */

    /* The followers report past the leader's own durable end: the leader's counts too. */
    answer_t b = {0, 0};
    assert_true(produce(f, 2, ST_ACKS_ALL, &res, &b));
    assert_int_equal(res.base_offset, 3);
    fetched(p, 2, 5, now);
    fetched(p, 3, 5, now);
    assert_int_equal(p->hw, 3);
    assert_int_equal(b.calls, 0);
    settle(f);
    assert_int_equal(p->hw, 5);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, 0);

    /* A follower reporting less (a stale fetch) never moves it back. */
    fetched(p, 3, 4, now);
    assert_int_equal(p->hw, 5);
    fetched(p, 2, 0, now);
    assert_int_equal(p->hw, 5);

    /* acks=1 waits only for this replica's durability, not for the ISR. */
    answer_t c = {0, 0};
    assert_true(produce(f, 1, ST_ACKS_LEADER, &res, &c));
    settle(f);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.err, 0);
    assert_int_equal(st_part_durable_end(p), 6);
    assert_int_equal(p->hw, 5); /* follower 2 said 0, follower 3 said 4: held at 5 */
    fetched(p, 2, 6, now);
    fetched(p, 3, 6, now);
    assert_int_equal(p->hw, 6);

    /* A new leadership (a new epoch) forgets the positions: unknown followers hold the hw. */
    r = role_of(SELF, SELF, 6, 2, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    assert_int_equal(p->hw, 6);
    answer_t d = {0, 0};
    assert_true(produce(f, 2, ST_ACKS_ALL, &res, &d));
    settle(f);
    assert_int_equal(st_part_durable_end(p), 8);
    assert_int_equal(st_part_latest_epoch(p), 6);
    assert_int_equal(p->hw, 6);
    fetched(p, 2, 8, now);
    assert_int_equal(p->hw, 6);
    assert_int_equal(d.calls, 0);
    fetched(p, 3, 7, now);
    assert_int_equal(p->hw, 7);
    assert_int_equal(d.calls, 0);
    fetched(p, 3, 8, now);
    assert_int_equal(p->hw, 8);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.err, 0);

    /* Replicas outside the ISR do not hold the hw; ids not among the replicas are ignored. */
    const int32_t isr12[] = {1, 2};
    r = role_of(SELF, SELF, 6, 3, 2, isr12, 2);
    st_part_set_role(p, &r);
    answer_t e = {0, 0};
    assert_true(produce(f, 1, ST_ACKS_ALL, &res, &e));
    settle(f);
    fetched(p, 9, 0, now);
    assert_int_equal(p->hw, 8);
    fetched(p, 2, 9, now);
    assert_int_equal(p->hw, 9);
    assert_int_equal(e.calls, 1);
    assert_int_equal(e.err, 0);
    fx_close(f);
}

/* 2. min.insync.replicas: refused before anything is written; a waiting append whose ISR
 * shrank below it is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND once the hw passes it. */
static void test_min_insync_replicas(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, ISR_SELF, 1);
    st_part_set_role(p, &r);

    st_part_append_res_t res;
    answer_t a = {0, 0};
    assert_false(produce(f, 3, ST_ACKS_ALL, &res, &a));
    assert_int_equal(res.error, ST_KERR_NOT_ENOUGH_REPLICAS);
    assert_int_equal(res.error, 19);
    assert_int_equal(res.err, ST_E_FEW_REPLICAS);
    assert_int_equal(res.appended_bytes, 0);
    assert_int_equal(log_end(f), 0);
    assert_int_equal(f->t.nq, 0); /* nothing to sync either */
    settle(f);
    assert_int_equal(a.calls, 0);

    /* acks=1 is not subject to it; the ISR of one has the hw follow the leader alone. */
    assert_true(produce(f, 3, ST_ACKS_LEADER, &res, &a));
    assert_int_equal(res.error, 0);
    settle(f);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_int_equal(p->hw, 3);

    /* The ISR grows back; an acks=all append waits for it. */
    r = role_of(SELF, SELF, 5, 2, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    int64_t now = st_mono_ms();
    fetched(p, 2, 3, now);
    fetched(p, 3, 3, now);
    answer_t b = {0, 0};
    assert_true(produce(f, 2, ST_ACKS_ALL, &res, &b));
    assert_int_equal(res.error, 0);
    assert_int_equal(log_end(f), 5);
    fetched(p, 2, 5, now);
    /* The ISR shrinks below min.insync.replicas while the append waits (not yet durable). */
    r = role_of(SELF, SELF, 5, 3, 2, ISR_SELF, 1);
    st_part_set_role(p, &r);
    assert_int_equal(b.calls, 0);
    assert_int_equal(p->hw, 3);
    settle(f);
    assert_int_equal(p->hw, 5);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, ST_E_FEW_REPLICAS);
    assert_int_equal(st_kerr_from(b.err), ST_KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND);
    assert_int_equal(log_end(f), 5); /* it is in the log */

    /* Shrinking to exactly min.insync.replicas is fine. */
    r = role_of(SELF, SELF, 5, 4, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    answer_t c = {0, 0};
    assert_true(produce(f, 1, ST_ACKS_ALL, &res, &c));
    settle(f);
    assert_int_equal(c.calls, 0);
    const int32_t isr12[] = {1, 2};
    r = role_of(SELF, SELF, 5, 5, 2, isr12, 2);
    st_part_set_role(p, &r);
    assert_int_equal(c.calls, 0); /* 2 is still at 5 */
    fetched(p, 2, 6, now);
    assert_int_equal(p->hw, 6);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.err, 0);
    fx_close(f);
}

/* 3. Losing leadership answers the waiting appends NOT_LEADER; a follower refuses producers. */
static void test_losing_leadership(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);

    st_part_append_res_t res;
    answer_t a = {0, 0}, b = {0, 0};
    assert_true(produce(f, 3, ST_ACKS_ALL, &res, &a));
    settle(f);                                         /* durable here, waiting for the ISR */
    assert_true(produce(f, 2, ST_ACKS_ALL, &res, &b)); /* not even durable here yet */
    assert_int_equal(a.calls, 0);
    assert_int_equal(b.calls, 0);

    r = role_of(SELF, 2, 6, 2, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, ST_E_NOT_LEADER);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, ST_E_NOT_LEADER);
    assert_int_equal(st_kerr_from(a.err), ST_KERR_NOT_LEADER_OR_FOLLOWER);
    /* a follow starts from the durable end: the two records not yet synced are cut (never
     * acknowledged; the new leader's log decides what follows 3) */
    assert_int_equal(log_end(f), 3);
    settle(f);
    assert_int_equal(a.calls, 1); /* answered once, not again at durability */
    assert_int_equal(b.calls, 1);
    assert_int_equal(p->hw, 0); /* a follower's hw is the leader's, which it does not know */

    /* Producers' appends to a follower are refused, whatever their acks; nothing is written. */
    st_acks_t acks[] = {ST_ACKS_NONE, ST_ACKS_LEADER, ST_ACKS_ALL};
    for (int i = 0; i < 3; i++) {
        answer_t c = {0, 0};
        assert_false(produce(f, 1, acks[i], &res, &c));
        assert_int_equal(res.error, ST_KERR_NOT_LEADER_OR_FOLLOWER);
        assert_int_equal(res.err, ST_E_NOT_LEADER);
        assert_int_equal(log_end(f), 3);
        settle(f);
        assert_int_equal(c.calls, 0);
    }

    /* Leader again: a shutdown answers its waiting appends NOT_LEADER too. */
    r = role_of(SELF, SELF, 7, 3, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    answer_t d = {0, 0};
    assert_true(produce(f, 1, ST_ACKS_ALL, &res, &d));
    assert_int_equal(res.base_offset, 3);
    settle(f);
    assert_int_equal(d.calls, 0);
    st_parts_release_acks(&f->parts);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.err, ST_E_NOT_LEADER);
    fx_close(f);
}

/* 4. ISR changes: a lagging member leaves, a caught-up fetching replica joins, and a change
 * asked for at a partition epoch is not asked again before retry_ms. */
static void test_isr_change_due(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    int64_t t0 = st_mono_ms(); /* no earlier than the new leadership's "caught up" */

    st_part_append_res_t res;
    answer_t a = {0, 0};
    assert_true(produce(f, 3, ST_ACKS_LEADER, &res, &a));
    settle(f);
    assert_int_equal(a.calls, 1);

    int32_t isr[ST_PART_MAX_REPLICAS];
    int16_t nisr = -1;
    assert_false(st_part_isr_change_due(p, t0, LAG_MS, RETRY_MS, isr, &nisr));
    /* Both followers fetch from 0 (the log end then was 3); 2 catches up, 3 stays at 0. */
    fetched(p, 2, 0, t0 + 10);
    fetched(p, 3, 0, t0 + 10);
    fetched(p, 2, 3, t0 + 20);
    fetched(p, 3, 0, t0 + 20);
    assert_int_equal(p->hw, 0);
    fetched(p, 2, 3, t0 + 10 + LAG_MS);
    assert_false(st_part_isr_change_due(p, t0 + 10 + LAG_MS, LAG_MS, RETRY_MS, isr, &nisr));
    assert_int_equal(nisr, -1);

    /* 3 has not caught up for more than lag_max_ms: it leaves. */
    int64_t t1 = t0 + 11 + LAG_MS;
    assert_true(st_part_isr_change_due(p, t1, LAG_MS, RETRY_MS, isr, &nisr));
    assert_int_equal(nisr, 2);
    assert_int_equal(isr[0], 1);
    assert_int_equal(isr[1], 2);
    /* Asked at this partition epoch: not again before retry_ms, then again. */
    nisr = -1;
    assert_false(st_part_isr_change_due(p, t1 + RETRY_MS - 1, LAG_MS, RETRY_MS, isr, &nisr));
    assert_int_equal(nisr, -1);
    assert_true(st_part_isr_change_due(p, t1 + RETRY_MS, LAG_MS, RETRY_MS, isr, &nisr));
    assert_int_equal(nisr, 2);

    /* The controller applies it (same leader epoch: the positions are kept). */
    int64_t t2 = t1 + RETRY_MS;
    r = role_of(SELF, SELF, 5, 2, 2, isr, nisr);
    st_part_set_role(p, &r);
    assert_int_equal(p->hw, 3); /* 3 no longer holds it */
    assert_false(st_part_isr_change_due(p, t2, LAG_MS, RETRY_MS, isr, &nisr));

    /* 3 fetches again but is below the hw: it does not join. */
    fetched(p, 3, 2, t2);
    assert_false(st_part_isr_change_due(p, t2, LAG_MS, RETRY_MS, isr, &nisr));
    /* It reaches the hw, then stops fetching: an old position does not make it join. */
    fetched(p, 3, 3, t2 + 1);
    int64_t t3 = t2 + 2 + LAG_MS;
    fetched(p, 2, 3, t3);
    assert_false(st_part_isr_change_due(p, t3, LAG_MS, RETRY_MS, isr, &nisr));
    /* Fetching again at the hw: it joins (a new partition epoch: no retry wait). */
    fetched(p, 3, 3, t3 + 1);
    assert_true(st_part_isr_change_due(p, t3 + 1, LAG_MS, RETRY_MS, isr, &nisr));
    assert_int_equal(nisr, 3);
    assert_int_equal(isr[0], 1);
    assert_int_equal(isr[1], 2);
    assert_int_equal(isr[2], 3);

    /* A follower is never asked. */
    r = role_of(SELF, 2, 6, 3, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    assert_false(st_part_isr_change_due(p, t3 + 10 * LAG_MS, LAG_MS, RETRY_MS, isr, &nisr));
    fx_close(f);
}

/* 4b. Followers read up to the leader's log end, synced on the leader or not, so its sync and
 * theirs overlap; the high watermark stays the smallest durable end over the ISR with the
 * leader's own included: an acks=all append whose bytes every follower has synced still waits
 * for the leader's sync. Caught up is measured against the log end: a follower that stays at
 * the leader's durable end while the log end runs ahead leaves the ISR. */
static void test_slow_leader_keeps_followers(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    int64_t t0 = st_mono_ms();
    st_part_append_res_t res;
    answer_t a = {0, 0};
    assert_true(produce(f, 3, ST_ACKS_LEADER, &res, &a));
    settle(f);
    assert_int_equal(st_part_durable_end(p), 3);
    fetched(p, 2, 3, t0 + 1);
    fetched(p, 3, 3, t0 + 1);
    assert_int_equal(p->hw, 3);
    /* More records whose sync has not completed here: a follower's read gets them. */
    answer_t b = {0, 0};
    assert_true(produce(f, 4, ST_ACKS_ALL, &res, &b));
    assert_int_equal(log_end(f), 7);
    assert_int_equal(st_part_durable_end(p), 3);
    st_part_read_t rd;
    assert_int_equal(st_part_read_replica(p, 3, 1 << 20, &rd), 0);
    assert_int_equal(rd.read.next_offset, 7);
    st_log_read_release(&rd.read);
    /* Both followers have them durably: the high watermark still waits for the leader. */
    int32_t isr[ST_PART_MAX_REPLICAS];
    int16_t nisr = -1;
    for (int64_t t = t0 + 10; t <= t0 + 3 * LAG_MS; t += LAG_MS / 4) {
        fetched(p, 2, 7, t);
        fetched(p, 3, 7, t);
        assert_false(st_part_isr_change_due(p, t, LAG_MS, RETRY_MS, isr, &nisr));
        assert_int_equal(p->hw, 3);
        assert_int_equal(b.calls, 0);
    }
    assert_int_equal(nisr, -1);
    /* The leader's sync completes: the high watermark moves and the append is answered. */
    settle(f);
    assert_int_equal(st_part_durable_end(p), 7);
    assert_int_equal(p->hw, 7);
    assert_int_equal(b.calls, 1);
    assert_int_equal(b.err, 0);
    /* A follower that stays at the old durable end while the log end is past it leaves. */
    answer_t c = {0, 0};
    assert_true(produce(f, 2, ST_ACKS_LEADER, &res, &c));
    assert_int_equal(log_end(f), 9);
    int64_t t1 = t0 + 3 * LAG_MS;
    for (int64_t t = t1 + LAG_MS / 4; t <= t1 + 2 * LAG_MS; t += LAG_MS / 4) {
        fetched(p, 2, 9, t);
        fetched(p, 3, 7, t);
    }
    assert_true(st_part_isr_change_due(p, t1 + 2 * LAG_MS, LAG_MS, RETRY_MS, isr, &nisr));
    assert_int_equal(nisr, 2);
    assert_int_equal(isr[0], 1);
    assert_int_equal(isr[1], 2);
    settle(f);
    assert_int_equal(c.calls, 1);
    fx_close(f);
}

/* 4c. A follower's waiting fetch wakes when records are appended (before they are synced
 * here) and when the high watermark moves (it learns it at once); it does not wake for a sync
 * alone that moves nothing it waits on. */
static void test_replica_waiter_wakes(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    int64_t t0 = st_mono_ms();
    st_part_append_res_t res;
    answer_t a = {0, 0};
    /* a waiter that saw another end or high watermark is woken at once */
    f->wakes = 0;
    st_part_add_replica_waiter(p, 1, log_end(f) + 1, p->hw);
    assert_int_equal(f->wakes, 1);
    st_part_add_replica_waiter(p, 1, log_end(f), p->hw + 1);
    assert_int_equal(f->wakes, 2);
    /* an append wakes it, with its sync still pending */
    f->wakes = 0;
    st_part_add_replica_waiter(p, 1, log_end(f), p->hw);
    assert_int_equal(f->wakes, 0);
    assert_true(produce(f, 3, ST_ACKS_ALL, &res, &a));
    assert_int_equal(st_part_durable_end(p), 0);
    assert_int_equal(f->wakes, 1);
    /* the sync alone moves neither the end nor the high watermark (the followers hold it) */
    st_part_add_replica_waiter(p, 1, log_end(f), p->hw);
    settle(f);
    assert_int_equal(p->hw, 0);
    assert_int_equal(f->wakes, 1);
    /* the followers' positions move the high watermark: it wakes */
    fetched(p, 2, 3, t0 + 1);
    assert_int_equal(f->wakes, 1);
    fetched(p, 3, 3, t0 + 1);
    assert_int_equal(p->hw, 3);
    assert_int_equal(f->wakes, 2);
    assert_int_equal(a.calls, 1);
    fx_close(f);
}

/* Reads the follower's log from 0 and checks each batch's base offset and leader epoch. */
static void check_batches(fx_t *f, const int64_t *bases, const int32_t *epochs, int n)
{
    st_buf_t b;
    st_buf_init(&b);
    int64_t next;
    assert_int_equal(tb_read_all(f->p->log, 0, 1 << 20, &b, &next), 0);
    int i = 0;
    for (size_t pos = 0; pos < b.len; i++) {
        st_batch_hdr_t h;
        assert_int_equal(st_batch_check(b.data + pos, b.len - pos, &h), 0);
        assert_true(i < n);
        assert_int_equal(h.base_offset, bases[i]);
        assert_int_equal(h.partition_leader_epoch, epochs[i]);
        pos += (size_t)st_batch_size(&h);
    }
    assert_int_equal(i, n);
    st_buf_fini(&b);
}

static st_part_role_t follower_role(int32_t leader_epoch, int32_t partition_epoch)
{
    return role_of(2, 1, leader_epoch, partition_epoch, 2, ISR_ALL, 3);
}

/* 5. A follower keeps the leader's offsets, answers once durable, follows the leader's hw
 * capped by its own durable end, and truncates. */
static void test_follower(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = follower_role(5, 1);
    st_part_set_role(p, &r);

    st_buf_t b;
    st_buf_init(&b);
    stamped(&b, 3, 0, 4, -1, 0, 0);
    stamped(&b, 2, 3, 5, -1, 0, 0);
    answer_t a = {0, 0};
    assert_int_equal(st_part_append_replica(p, b.data, b.len, 2, -1, on_done, &a), 0);
    st_buf_fini(&b);
    assert_int_equal(log_end(f), 5);
    assert_int_equal(a.calls, 0); /* not durable yet */
    assert_int_equal(p->hw, 0);
    settle(f);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_int_equal(st_part_durable_end(p), 5);
    assert_int_equal(p->hw, 2); /* the leader's */
    assert_int_equal(st_part_latest_epoch(p), 5);
    check_batches(f, (const int64_t[]){0, 3}, (const int32_t[]){4, 5}, 2);

    /* A first batch that is not at the log end is refused; nothing is written. */
    answer_t c = {0, 0};
    st_buf_init(&b);
    stamped(&b, 1, 3, 5, -1, 0, 0); /* overlaps */
    assert_int_equal(st_part_append_replica(p, b.data, b.len, 5, -1, on_done, &c),
                     ST_E_OUT_OF_RANGE);
    st_buf_fini(&b);
    settle(f);
    assert_int_equal(c.calls, 0);
    assert_int_equal(log_end(f), 5);
    assert_int_equal(p->hw, 2);

    /* The leader's hw, capped by the durable end here. */
    st_part_set_leader_hw(p, 4, -1);
    assert_int_equal(p->hw, 4);
    st_part_set_leader_hw(p, 100, -1);
    assert_int_equal(p->hw, 5);
    st_buf_init(&b);
    stamped(&b, 2, 5, 5, -1, 0, 0);
    answer_t d = {0, 0};
    assert_int_equal(st_part_append_replica(p, b.data, b.len, 7, -1, on_done, &d), 0);
    st_buf_fini(&b);
    assert_int_equal(log_end(f), 7);
    assert_int_equal(p->hw, 5); /* written, not durable: not readable */
    settle(f);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.err, 0);
    assert_int_equal(p->hw, 7);

    /* Truncation to where the logs diverged: the hw follows the cut. */
    assert_int_equal(st_part_truncate(p, 3, -1), 0);
    assert_int_equal(log_end(f), 3);
    assert_int_equal(st_part_durable_end(p), 3);
    assert_int_equal(p->hw, 3);
    assert_int_equal(st_part_latest_epoch(p), 4);
    check_batches(f, (const int64_t[]){0}, (const int32_t[]){4}, 1);
    /* At the log end: nothing changes. */
    assert_int_equal(st_part_truncate(p, 3, -1), 0);
    assert_int_equal(log_end(f), 3);
    /* Past the log end: a cut never lengthens the log. */
    assert_int_equal(st_part_truncate(p, 100, -1), 0);
    assert_int_equal(log_end(f), 3);
    /* The leader's log starts beyond this one's end: the log restarts empty there. */
    assert_int_equal(st_part_restart_at(p, 100), 0);
    assert_int_equal(st_log_start_offset(p->log), 100);
    assert_int_equal(log_end(f), 100);
    assert_int_equal(st_part_durable_end(p), 100);
    st_part_set_leader_hw(p, 120, -1);
    assert_int_equal(p->hw, 100);
    st_buf_init(&b);
    stamped(&b, 2, 100, 6, -1, 0, 0);
    answer_t e = {0, 0};
    assert_int_equal(st_part_append_replica(p, b.data, b.len, 120, -1, on_done, &e), 0);
    st_buf_fini(&b);
    settle(f);
    assert_int_equal(e.calls, 1);
    assert_int_equal(e.err, 0);
    assert_int_equal(log_end(f), 102);
    assert_int_equal(p->hw, 102);

    /* A leader's log is the reference: it is never truncated, and takes no replica batches. */
    r = role_of(2, 2, 7, 2, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    assert_int_equal(st_part_truncate(p, 100, -1), ST_E_INVALID);
    st_buf_init(&b);
    stamped(&b, 1, 102, 7, -1, 0, 0);
    answer_t g = {0, 0};
    assert_int_equal(st_part_append_replica(p, b.data, b.len, 102, -1, on_done, &g), ST_E_INVALID);
    st_buf_fini(&b);
    assert_int_equal(log_end(f), 102);
    assert_int_equal(g.calls, 0);
    fx_close(f);
}

/* 5'. Replicated batches carry their producers' state: after a role change, a retry of a batch
 * the follower replicated is answered as a duplicate; a truncation forgets the batches it cut. */
static void test_follower_producer_state(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = follower_role(5, 1);
    st_part_set_role(p, &r);

    st_buf_t b;
    st_buf_init(&b);
    stamped(&b, 3, 0, 5, 42, 0, 0); /* seq 0-2 at 0-2 */
    stamped(&b, 1, 3, 5, 42, 0, 3); /* seq 3 at 3 */
    stamped(&b, 2, 4, 5, 42, 0, 4); /* seq 4-5 at 4-5 */
    answer_t a = {0, 0};
    assert_int_equal(st_part_append_replica(p, b.data, b.len, 6, -1, on_done, &a), 0);
    st_buf_fini(&b);
    settle(f);
    assert_int_equal(a.calls, 1);
    assert_int_equal(log_end(f), 6);
    /* The leader had not kept seq 4-5: the follower cuts them. */
    assert_int_equal(st_part_truncate(p, 4, -1), 0);
    assert_int_equal(log_end(f), 4);

    /* This broker becomes the leader. */
    r = role_of(2, 2, 6, 2, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    st_part_append_res_t res;
    answer_t c = {0, 0};
    /* The producer's retry of seq 0-2: a duplicate, answered with where it went. */
    assert_false(produce_seq(f, 3, 0, &res, &c));
    assert_int_equal(res.error, 0);
    assert_int_equal(res.base_offset, 0);
    assert_int_equal(res.appended_bytes, 0);
    assert_int_equal(log_end(f), 4);
    assert_false(produce_seq(f, 1, 3, &res, &c));
    assert_int_equal(res.error, 0);
    assert_int_equal(res.base_offset, 3);
    assert_int_equal(res.appended_bytes, 0);
    /* A gap (the next is 4) early in the leadership: retriable, the earlier batches may be on
     * their way (partition.h, ST_PART_GAP_GRACE_MS) */
    assert_false(produce_seq(f, 1, 6, &res, &c));
    assert_int_equal(res.error, ST_KERR_NOT_LEADER_OR_FOLLOWER);
    assert_non_null(res.why);
    /* past the grace: out of order, as Kafka answers */
    p->repl.leader_since_ms -= ST_PART_GAP_GRACE_MS;
    assert_false(produce_seq(f, 1, 6, &res, &c));
    assert_int_equal(res.error, ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_int_equal(log_end(f), 4);
    /* seq 4-5 were cut: no duplicate, appended again at the log end at the new epoch. */
    assert_true(produce_seq(f, 2, 4, &res, &c));
    assert_int_equal(res.error, 0);
    assert_int_equal(res.base_offset, 4);
    assert_true(res.appended_bytes > 0);
    assert_int_equal(log_end(f), 6);
    settle(f);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.err, 0);
    assert_int_equal(st_part_latest_epoch(p), 6);
    /* And that one is now a duplicate in turn. */
    assert_false(produce_seq(f, 2, 4, &res, &c));
    assert_int_equal(res.error, 0);
    assert_int_equal(res.base_offset, 4);
    assert_int_equal(log_end(f), 6);
    fx_close(f);
}

/* Appends (as a follower: offsets and epochs as given) `count`-record batches at epochs[i]
 * from offset `at`, and makes them durable. */
static void follow_batches(fx_t *f, int64_t at, const int32_t *epochs, int n, int32_t count)
{
    st_buf_t b;
    st_buf_init(&b);
    for (int i = 0; i < n; i++)
        stamped(&b, count, at + (int64_t)i * count, epochs[i], -1, 0, 0);
    answer_t a = {0, 0};
    assert_int_equal(st_part_append_replica(f->p, b.data, b.len, 0, -1, on_done, &a), 0);
    st_buf_fini(&b);
    settle(f);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
}

/* 6. A leader records its epoch and where it starts at its election, before any append
 * (KIP-101): a follower asking for the previous epoch, or fetching with it, learns it ends at
 * this log's end — never "unknown", which made followers cut their whole logs. */
static void test_epoch_at_election(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = follower_role(3, 1);
    st_part_set_role(p, &r);
    follow_batches(f, 0, (const int32_t[]){1, 3}, 2, 2); /* epoch 1 at 0-1, 3 at 2-3 */
    assert_int_equal(st_part_latest_epoch(p), 3);
    r = role_of(2, 2, 5, 2, 2, ISR_ALL, 3); /* elected at epoch 5, nothing appended yet */
    st_part_set_role(p, &r);
    assert_int_equal(st_part_latest_epoch(p), 5);
    int32_t e;
    int64_t end;
    assert_int_equal(st_part_end_for_epoch(p, 3, -1, &e, &end), 0);
    assert_int_equal(e, 3);
    assert_int_equal(end, 4);
    assert_int_equal(st_part_end_for_epoch(p, 5, -1, &e, &end), 0);
    assert_int_equal(e, 5);
    assert_int_equal(end, 4);
    /* a follower with epoch 3 up to 4 is a prefix: no divergence, position taken */
    st_part_diverging_t div;
    assert_int_equal(st_part_follower_fetch(p, 1, 4, 3, 0, st_mono_ms(), &div), 0);
    assert_int_equal(div.epoch, -1);
    /* an epoch never had at election time is not invented by a later one: 4 ends at 4 too */
    assert_int_equal(st_part_end_for_epoch(p, 4, -1, &e, &end), 0);
    assert_int_equal(e, 3);
    assert_int_equal(end, 4);
    /* the same election again (a metadata change within the leadership) keeps the start */
    r.partition_epoch = 3;
    st_part_set_role(p, &r);
    assert_int_equal(st_part_end_for_epoch(p, 3, -1, &e, &end), 0);
    assert_int_equal(end, 4);
    fx_close(f);
}

/* 7. The leader checks each follower fetch against its epochs (KIP-320): a diverging log gets
 * the epoch and end to cut to, and its offset is not taken as a position (the high watermark
 * and acks=all must not move on records the leader never had); offsets outside the log are
 * OFFSET_OUT_OF_RANGE, also not taken. */
static void test_follower_fetch_validated(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = follower_role(2, 1);
    st_part_set_role(p, &r);
    /* the leader-to-be's log: epoch 0 at 0-3, epoch 2 at 4-7 */
    follow_batches(f, 0, (const int32_t[]){0, 0, 2, 2}, 4, 2);
    r = role_of(2, 2, 4, 2, 2, ISR_ALL, 3); /* leader at epoch 4 from 8 */
    st_part_set_role(p, &r);
    int64_t now = st_mono_ms();
    st_part_diverging_t div;
    /* a follower with epoch 1 at 4-9 (an old leader's records): diverges where 0 ends */
    assert_int_equal(st_part_follower_fetch(p, 1, 10, 1, 0, now, &div), 0);
    assert_int_equal(div.epoch, 0);
    assert_int_equal(div.end_offset, 4);
    /* epoch 2 but longer than the leader's epoch 2 (which ends at 8) */
    assert_int_equal(st_part_follower_fetch(p, 1, 9, 2, 0, now, &div), 0);
    assert_int_equal(div.epoch, 2);
    assert_int_equal(div.end_offset, 8);
    /* epoch 3 (never here): the largest <= 3 is 2, ending at 8 */
    assert_int_equal(st_part_follower_fetch(p, 1, 8, 3, 0, now, &div), 0);
    assert_int_equal(div.epoch, 2);
    assert_int_equal(div.end_offset, 8);
    assert_int_equal(p->repl.pos[0], -1); /* none of these was a position */
    /* a prefix: taken */
    assert_int_equal(st_part_follower_fetch(p, 1, 6, 2, 0, now, &div), 0);
    assert_int_equal(div.epoch, -1);
    assert_int_equal(p->repl.pos[0], 6);
    /* past the log end with no epoch, or below the log start: out of range, not taken */
    assert_int_equal(st_part_follower_fetch(p, 3, 20, -1, 0, now, &div),
                     ST_KERR_OFFSET_OUT_OF_RANGE);
    assert_int_equal(p->repl.pos[2], -1);
    assert_int_equal(p->hw, 0); /* replica 3 not heard from: the hw holds */
    /* not a replica, or this broker itself */
    assert_int_equal(st_part_follower_fetch(p, 9, 6, 2, 0, now, &div),
                     ST_KERR_NOT_LEADER_OR_FOLLOWER);
    assert_int_equal(st_part_follower_fetch(p, 2, 6, 2, 0, now, &div),
                     ST_KERR_NOT_LEADER_OR_FOLLOWER);
    fx_close(f);
}

/* 8. KAFKA-7128: after an election the high watermark may lag the records the ISR
 * acknowledged; a replica that reached it but not the start of the new leader's epoch lacks
 * some of them, and must not rejoin the ISR (a later election could make it leader). */
static void test_isr_join_needs_epoch_start(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = follower_role(2, 1);
    st_part_set_role(p, &r);
    follow_batches(f, 0, (const int32_t[]){2, 2, 2, 2, 2}, 5, 2); /* 0-9 at epoch 2 */
    st_part_set_leader_hw(p, 4, -1);                              /* the old leader's hw: 4 */
    assert_int_equal(p->hw, 4);
    /* elected at epoch 3 with ISR {2, 3}: replica 1 is out */
    const int32_t isr23[] = {2, 3};
    r = role_of(2, 2, 3, 2, 2, isr23, 2);
    st_part_set_role(p, &r);
    int64_t now = st_mono_ms();
    int32_t isr[ST_PART_MAX_REPLICAS];
    int16_t nisr;
    fetched(p, 3, 10, now);
    assert_int_equal(p->hw, 10);
    /* replica 1 at 10 would have joined; at 6 it has passed the old hw (4) but not 10 */
    fetched(p, 1, 6, now);
    assert_false(st_part_isr_change_due(p, now, LAG_MS, RETRY_MS, isr, &nisr));
    fx_close(f);

    /* the same with the high watermark still at 4 (replica 3 not heard from yet) */
    f = fx_open();
    p = f->p;
    r = follower_role(2, 1);
    st_part_set_role(p, &r);
    follow_batches(f, 0, (const int32_t[]){2, 2, 2, 2, 2}, 5, 2);
    st_part_set_leader_hw(p, 4, -1);
    r = role_of(2, 2, 3, 2, 2, isr23, 2);
    st_part_set_role(p, &r);
    assert_int_equal(p->hw, 4);
    fetched(p, 1, 6, now); /* >= hw (4), < the epoch's start (10) */
    assert_false(st_part_isr_change_due(p, now, LAG_MS, RETRY_MS, isr, &nisr));
    fetched(p, 1, 10, now); /* caught up with the epoch's start: joins */
    assert_true(st_part_isr_change_due(p, now, LAG_MS, RETRY_MS, isr, &nisr));
    assert_int_equal(nisr, 3);
    fx_close(f);
}

/* 9. A follower cuts a diverged log to min(the leader's end of the epoch, where its own largest
 * epoch <= it ends), never past its end, never restarting it (follow.h R2). */
static void test_truncate_to_epoch(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = follower_role(6, 1);
    st_part_set_role(p, &r);
    follow_batches(f, 0, (const int32_t[]){1, 1, 3, 5}, 4, 2); /* 1 at 0-3, 3 at 4-5, 5 at 6-7 */
    /* the leader: epoch 4 ends at 10; here the largest <= 4 is 3, ending at 6 */
    assert_int_equal(st_part_truncate(p, 10, 4), 0);
    assert_int_equal(log_end(f), 6);
    assert_int_equal(st_part_latest_epoch(p), 3);
    /* the leader: epoch 1 ends at 3 (a batch straddling it goes whole) */
    assert_int_equal(st_part_truncate(p, 3, 1), 0);
    assert_int_equal(log_end(f), 2);
    assert_int_equal(st_part_latest_epoch(p), 1);
    /* an epoch below every local one: cut to where the first local one starts (0) */
    assert_int_equal(st_part_truncate(p, 50, 0), 0);
    assert_int_equal(log_end(f), 0);
    assert_int_equal(st_log_start_offset(p->log), 0);
    /* a log that starts past where the leader's agrees (found by the simulation: a cut that
     * changed nothing, asked for again forever) starts over there */
    assert_int_equal(st_part_restart_at(p, 40), 0);
    assert_int_equal(st_part_truncate(p, 30, -1), 0);
    assert_int_equal(st_log_start_offset(p->log), 30);
    assert_int_equal(log_end(f), 30);
    fx_close(f);
}

/* 10. A replicated partition's high watermark is not known at open (its log end may hold
 * records only it has): it starts at the log start, and a leader's moves only with its
 * followers' fetches. */
static void test_hw_after_restart(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_append_res_t res;
    answer_t a = {0, 0};
    produce(f, 5, ST_ACKS_LEADER, &res, &a); /* a single broker's log, then a cluster */
    settle(f);
    assert_int_equal(p->hw, 5);
    st_part_role_t r = role_of(SELF, SELF, 7, 1, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    assert_int_equal(p->hw, 0);
    fetched(p, 2, 5, st_mono_ms());
    assert_int_equal(p->hw, 0); /* replica 3 holds it */
    fetched(p, 3, 3, st_mono_ms());
    assert_int_equal(p->hw, 3);
    fx_close(f);
}

/* 11. DeleteRecords on a replicated leader answers once every live replica's log start reached
 * the new start (followers move theirs from the leader's answers); a replica not live does not
 * hold it; losing the leadership answers NOT_LEADER. */
static void test_delete_records_replicated(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, ISR_ALL, 3);
    r.live[2] = false; /* replica 3's broker is fenced */
    st_part_set_role(p, &r);
    st_part_append_res_t res;
    answer_t a = {0, 0};
    produce(f, 8, ST_ACKS_ALL, &res, &a);
    settle(f);
    int64_t now = st_mono_ms();
    st_part_diverging_t div;
    st_part_follower_fetch(p, 2, 8, 5, 0, now, &div);
    st_part_follower_fetch(p, 3, 8, 5, 0, now, &div);
    assert_int_equal(p->hw, 8);
    int16_t err;
    int64_t low;
    answer_t d = {0, 0};
    assert_true(st_part_delete_records(p, 6, &err, &low, on_done, &d));
    assert_int_equal(err, 0);
    assert_int_equal(low, 6);
    settle(f);
    assert_int_equal(d.calls, 0); /* durable here, replica 2 still starts at 0 */
    assert_int_equal(st_part_low_watermark(p), 0);
    st_part_follower_fetch(p, 2, 8, 5, 6, now, &div);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.err, 0);
    assert_int_equal(st_part_low_watermark(p), 6);
    /* another one, then the leadership goes */
    answer_t e = {0, 0};
    assert_true(st_part_delete_records(p, 7, &err, &low, on_done, &e));
    settle(f);
    assert_int_equal(e.calls, 0);
    r = follower_role(6, 2);
    st_part_set_role(p, &r);
    assert_int_equal(e.calls, 1);
    assert_int_equal(e.err, ST_E_NOT_LEADER);
    /* a follower moves its start from the leader's answer, never past its own hw */
    assert_int_equal(st_part_set_leader_hw(p, 8, 7), 0);
    assert_int_equal(st_part_log_start(p), 7);
    assert_int_equal(st_part_set_leader_hw(p, 7, 9), 0);
    assert_int_equal(st_part_log_start(p), 7);
    fx_close(f);
}

/* 12. An acks=all append still waiting for the ISR when its request's timeout passes is
 * answered ST_E_TIMEOUT (Kafka's REQUEST_TIMED_OUT), the others keep waiting. */
static void test_acks_timeout(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, ISR_ALL, 3);
    st_part_set_role(p, &r);
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, 2, 8, 1000, 'p');
    st_part_append_res_t res;
    answer_t short_wait = {0, 0}, long_wait = {0, 0};
    assert_true(
        st_part_append_timed(p, b.data, b.len, ST_ACKS_ALL, 50, &res, on_done, &short_wait));
    st_buf_clear(&b);
    tb_batch(&b, 2, 8, 1000, 'q');
    assert_true(
        st_part_append_timed(p, b.data, b.len, ST_ACKS_ALL, 600000, &res, on_done, &long_wait));
    st_buf_fini(&b);
    settle(f);
    int64_t now = st_mono_ms();
    st_part_expire_acks(p, now); /* before the deadline: nothing */
    assert_int_equal(short_wait.calls, 0);
    st_part_expire_acks(p, now + 100);
    assert_int_equal(short_wait.calls, 1);
    assert_int_equal(short_wait.err, ST_E_TIMEOUT);
    assert_int_equal(long_wait.calls, 0);
    fetched(p, 2, 4, now);
    fetched(p, 3, 4, now);
    assert_int_equal(long_wait.calls, 1);
    assert_int_equal(long_wait.err, 0);
    fx_close(f);
}

/* 13. Found by the simulation (seed 94): once the leader asks to add a replica to the ISR, the
 * controller may list it before the leader hears back, so the high watermark waits for it
 * too (KIP-497's maximal ISR) until a new partition epoch says what was decided. */
static void test_hw_counts_pending_isr_additions(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    const int32_t isr12[] = {1, 2};
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, isr12, 2);
    for (int i = 0; i < 3; i++)
        r.live[i] = true;
    st_part_set_role(p, &r);
    st_part_append_res_t res;
    answer_t a = {0, 0};
    produce(f, 4, ST_ACKS_LEADER, &res, &a);
    settle(f);
    int64_t now = st_mono_ms();
    fetched(p, 2, 4, now);
    assert_int_equal(p->hw, 4);
    fetched(p, 3, 4, now); /* caught up with the hw: joins */
    int32_t isr[ST_PART_MAX_REPLICAS];
    int16_t nisr;
    assert_true(st_part_isr_change_due(p, now, LAG_MS, RETRY_MS, isr, &nisr));
    assert_int_equal(nisr, 3);
    /* more records; replica 2 has them, replica 3 (asked for) not yet */
    produce(f, 2, ST_ACKS_LEADER, &res, &a);
    settle(f);
    fetched(p, 2, 6, now);
    assert_int_equal(p->hw, 4); /* held by the replica being added */
    fetched(p, 3, 6, now);
    assert_int_equal(p->hw, 6);
    /* the controller decided (a new partition epoch): only the ISR it lists counts */
    r = role_of(SELF, SELF, 5, 2, 2, isr12, 2);
    for (int i = 0; i < 3; i++)
        r.live[i] = true;
    st_part_set_role(p, &r);
    produce(f, 2, ST_ACKS_LEADER, &res, &a);
    settle(f);
    fetched(p, 2, 8, now);
    assert_int_equal(p->hw, 8);
    fx_close(f);
}

/* 14. Found by the simulation (seed 137): a follower whose log ends with an epoch that never
 * got a record (it was elected, then lost the leadership before any append) cuts that epoch
 * when the leader says where the logs diverge, even though no record goes; otherwise it would
 * fetch with it and be told the same divergence forever. */
static void test_truncate_drops_empty_epoch(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = follower_role(1, 1);
    st_part_set_role(p, &r);
    follow_batches(f, 0, (const int32_t[]){1, 1}, 2, 2); /* epoch 1 at 0-3 */
    r = role_of(2, 2, 2, 2, 2, ISR_ALL, 3);              /* leader at epoch 2 from 4, no record */
    st_part_set_role(p, &r);
    assert_int_equal(st_part_latest_epoch(p), 2);
    r = follower_role(3, 3); /* another broker leads at 3 */
    st_part_set_role(p, &r);
    /* the new leader: its largest epoch <= 2 is 1, ending at 4 */
    assert_int_equal(st_part_truncate(p, 4, 1), 0);
    assert_int_equal(log_end(f), 4);
    assert_int_equal(st_part_latest_epoch(p), 1);
    fx_close(f);
}

/* 15. Found by the simulation (seeds 25, 343): a follower restarted empty at the leader's log
 * start, which DeleteRecords put inside a batch, takes that whole batch (it starts before the
 * log's end) by starting over at its base; the log start then moves back up to the leader's. */
static void test_restart_inside_a_batch(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = follower_role(4, 1);
    st_part_set_role(p, &r);
    assert_int_equal(st_part_restart_at(p, 5), 0); /* the leader's log starts at 5 */
    st_buf_t b;
    st_buf_init(&b);
    stamped(&b, 4, 3, 4, -1, 0, 0); /* 3-6: holds 5 */
    answer_t a = {0, 0};
    assert_int_equal(st_part_append_replica(p, b.data, b.len, 7, 5, on_done, &a), 0);
    settle(f);
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.err, 0);
    assert_int_equal(log_end(f), 7);
    assert_int_equal(st_part_log_start(p), 5);
    /* a batch that does not follow on in a log that is not empty is still refused */
    st_buf_clear(&b);
    stamped(&b, 1, 5, 4, -1, 0, 0);
    answer_t c = {0, 0};
    assert_int_equal(st_part_append_replica(p, b.data, b.len, 7, 5, on_done, &c),
                     ST_E_OUT_OF_RANGE);
    /* found by the simulation (seed 16859): a log ending where the leader's DeleteRecords put
     * its start, inside a batch, takes that batch too: nothing it drops is the leader's */
    st_buf_clear(&b);
    stamped(&b, 3, 6, 4, -1, 0, 0); /* 6-8: holds the leader's start 7, which is our end */
    answer_t e = {0, 0};
    assert_int_equal(st_part_append_replica(p, b.data, b.len, 9, 7, on_done, &e), 0);
    settle(f);
    assert_int_equal(e.calls, 1);
    assert_int_equal(log_end(f), 9);
    assert_int_equal(st_part_log_start(p), 7);
    st_buf_fini(&b);
    fx_close(f);
}

/* 16. Found by the simulation: a DeleteRecords whose new start became durable after the
 * leadership moved is answered NOT_LEADER, not success (the new leader may not have it). */
static void test_delete_records_leadership_lost(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, ISR_SELF, 1);
    st_part_set_role(p, &r);
    st_part_append_res_t res;
    answer_t a = {0, 0};
    produce(f, 4, ST_ACKS_LEADER, &res, &a);
    settle(f);
    assert_int_equal(p->hw, 4);
    int16_t err;
    int64_t low;
    answer_t d = {0, 0};
    assert_true(st_part_delete_records(p, 2, &err, &low, on_done, &d));
    r = follower_role(6, 2); /* the sync of the new start is still held */
    st_part_set_role(p, &r);
    settle(f);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.err, ST_E_NOT_LEADER);
    fx_close(f);
}

/* 17. A fenced replica is not asked into the ISR, however caught up its last fetch was: the
 * controller would refuse it, each refusal a new partition epoch, and the leader would ask
 * again at once (found by the simulation: one metadata record after another). */
static void test_isr_join_needs_live(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    const int32_t isr12[] = {1, 2};
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, isr12, 2);
    r.live[2] = false;
    st_part_set_role(p, &r);
    int64_t now = st_mono_ms();
    fetched(p, 2, 0, now);
    fetched(p, 3, 0, now);
    int32_t isr[ST_PART_MAX_REPLICAS];
    int16_t nisr;
    assert_false(st_part_isr_change_due(p, now, LAG_MS, RETRY_MS, isr, &nisr));
    r.live[2] = true; /* unfenced */
    r.partition_epoch = 2;
    st_part_set_role(p, &r);
    assert_true(st_part_isr_change_due(p, now, LAG_MS, RETRY_MS, isr, &nisr));
    assert_int_equal(nisr, 3);
    fx_close(f);
}

/* 18. Found by the simulation (seed 1654): a replica joins the ISR only once its log starts
 * where the leader's does, so a DeleteRecords answered while it was fenced (it was not
 * waited for) cannot come back should it lead. */
static void test_isr_join_needs_log_start(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    const int32_t isr12[] = {1, 2};
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, isr12, 2);
    r.live[2] = false; /* replica 3's broker is fenced */
    st_part_set_role(p, &r);
    st_part_append_res_t res;
    answer_t a = {0, 0};
    produce(f, 8, ST_ACKS_LEADER, &res, &a);
    settle(f);
    int64_t now = st_mono_ms();
    st_part_diverging_t div;
    st_part_follower_fetch(p, 2, 8, 5, 6, now, &div);
    int16_t err;
    int64_t low;
    answer_t d = {0, 0};
    st_part_delete_records(p, 6, &err, &low, on_done, &d);
    settle(f);
    assert_int_equal(d.calls, 1); /* replica 3 was not waited for */
    r.live[2] = true;             /* it is back */
    r.partition_epoch = 2;
    st_part_set_role(p, &r);
    int32_t isr[ST_PART_MAX_REPLICAS];
    int16_t nisr;
    st_part_follower_fetch(p, 3, 8, 5, 0, now, &div); /* caught up, but its log starts at 0 */
    assert_false(st_part_isr_change_due(p, now, LAG_MS, RETRY_MS, isr, &nisr));
    st_part_follower_fetch(p, 3, 8, 5, 6, now, &div);
    assert_true(st_part_isr_change_due(p, now, LAG_MS, RETRY_MS, isr, &nisr));
    assert_int_equal(nisr, 3);
    fx_close(f);
}

/* 13. A failover's pipelined retries (producer_state.h, a gap left by a refusal): the batch
 * owed next refused NOT_ENOUGH_REPLICAS while the ISR is below min.insync.replicas, the ISR
 * growing before the batch behind it is checked: that one is refused alike, not out of order
 * (librdkafka takes the latter as fatal), and the retries in order are appended. */
static void test_refused_batch_leaves_no_gap(void **state)
{
    (void)state;
    fx_t *f = fx_open();
    st_part_t *p = f->p;
    st_part_role_t r = role_of(SELF, SELF, 5, 1, 2, ISR_SELF, 1);
    st_part_set_role(p, &r);
    st_part_append_res_t res;
    answer_t a = {0, 0};
    assert_true(produce_seq(f, 3, 0, &res, &a)); /* acks=1: seq 0-2 at 0-2 */
    settle(f);
    assert_int_equal(a.calls, 1);

    st_buf_t b3, b4;
    st_buf_init(&b3);
    st_buf_init(&b4);
    stamped(&b3, 1, 0, -1, 42, 0, 3);
    stamped(&b4, 2, 0, -1, 42, 0, 4);
    assert_false(st_part_append(p, b3.data, b3.len, ST_ACKS_ALL, &res, on_done, &a));
    assert_int_equal(res.error, ST_KERR_NOT_ENOUGH_REPLICAS);
    r = role_of(SELF, SELF, 5, 2, 2, ISR_ALL, 3); /* the ISR grows back */
    st_part_set_role(p, &r);
    assert_false(st_part_append(p, b4.data, b4.len, ST_ACKS_ALL, &res, on_done, &a));
    assert_int_equal(res.error, ST_KERR_NOT_ENOUGH_REPLICAS);
    assert_non_null(res.why);
    assert_int_equal(log_end(f), 3);
    /* The producer retries both, in order. */
    answer_t c = {0, 0};
    assert_true(st_part_append(p, b3.data, b3.len, ST_ACKS_ALL, &res, on_done, &c));
    assert_int_equal(res.error, 0);
    assert_int_equal(res.base_offset, 3);
    assert_true(st_part_append(p, b4.data, b4.len, ST_ACKS_ALL, &res, on_done, &c));
    assert_int_equal(res.error, 0);
    assert_int_equal(res.base_offset, 4);
    assert_int_equal(log_end(f), 6);
    /* A gap of the producer's own is still out of order, early in the leadership too: it
     * wrote to this leader (no grace, partition.h ST_PART_GAP_GRACE_MS). */
    st_buf_t b9;
    st_buf_init(&b9);
    stamped(&b9, 1, 0, -1, 42, 0, 9);
    assert_false(st_part_append(p, b9.data, b9.len, ST_ACKS_ALL, &res, on_done, &c));
    assert_int_equal(res.error, ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    st_buf_fini(&b3);
    st_buf_fini(&b4);
    st_buf_fini(&b9);
    int64_t now = st_mono_ms();
    fetched(p, 2, 6, now);
    fetched(p, 3, 6, now);
    settle(f);
    assert_int_equal(c.calls, 2);
    assert_int_equal(c.err, 0);
    fx_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leader_acks_all_waits_for_isr),
        cmocka_unit_test(test_min_insync_replicas),
        cmocka_unit_test(test_losing_leadership),
        cmocka_unit_test(test_isr_change_due),
        cmocka_unit_test(test_slow_leader_keeps_followers),
        cmocka_unit_test(test_replica_waiter_wakes),
        cmocka_unit_test(test_follower),
        cmocka_unit_test(test_follower_producer_state),
        cmocka_unit_test(test_epoch_at_election),
        cmocka_unit_test(test_follower_fetch_validated),
        cmocka_unit_test(test_isr_join_needs_epoch_start),
        cmocka_unit_test(test_truncate_to_epoch),
        cmocka_unit_test(test_hw_after_restart),
        cmocka_unit_test(test_delete_records_replicated),
        cmocka_unit_test(test_acks_timeout),
        cmocka_unit_test(test_hw_counts_pending_isr_additions),
        cmocka_unit_test(test_truncate_drops_empty_epoch),
        cmocka_unit_test(test_restart_inside_a_batch),
        cmocka_unit_test(test_delete_records_leadership_lost),
        cmocka_unit_test(test_isr_join_needs_live),
        cmocka_unit_test(test_isr_join_needs_log_start),
        cmocka_unit_test(test_refused_batch_leaves_no_gap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
