/*
 * Unit tests for broker/fanout.h on the real mesh and loops (three shard threads, shards.h):
 * legs to several shards gathered whatever order the shards answer in, each item's result
 * where the caller put it; a leg held on its shard until its last release; a leg on the
 * caller's own shard (run on a later iteration, never inside the send); zero legs (done at
 * once, inside st_fanout_end); by-owner legs sent once per shard per round, skipped for
 * owner -1, and again in the next round.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "broker/fanout.h"
#include "shards.h"

#define NSHARDS 3
#define NITEMS  7

/* ---- several shards, answering out of order ---- */

typedef struct {
    tsh_t t;
    st_fanout_t fan;
    st_fanout_leg_t legs[NSHARDS];
    int owner[NITEMS];
    int result[NITEMS];          /* written by the owner's leg */
    int ran_on[NITEMS];          /* the shard each item's leg ran on */
    _Atomic int seq;             /* orders the answers */
    int shard2_answered;         /* seq when shard 2's leg answered */
    _Atomic int shard1_answered; /* seq when shard 1's leg gave its last hold back */
    st_fanout_leg_t *held;       /* shard 1's, while held */
    st_msg_t release_msg;        /* shard 2 -> shard 1: release it */
    st_timer_t release_timer;    /* on shard 1: the last release */
    bool signalled;              /* shard 1 has heard from shard 2 */
    bool wrong_shard;            /* a leg ran off its target */
    bool ended;                  /* st_fanout_end returned */
    int done_calls;
    int done_on;
    bool done_saw_ended;
    bool done_saw_shard1; /* done ran after shard 1's last release */
} multi_t;

static multi_t *g_multi;

static void multi_release(multi_t *m)
{
    if (m->held->holds == 1)
        atomic_store(&m->shard1_answered, atomic_fetch_add(&m->seq, 1) + 1);
    st_fanout_release(m->held);
}

static void multi_release_timer(st_timer_t *t)
{
    multi_release(t->data);
}

/* On shard 1: one hold given back now, the last one 20 ms later (done must wait for it). */
static void multi_release_then_defer(multi_t *m)
{
    multi_release(m);
    st_loop_timer_start(m->t.loops[1], &m->release_timer, 20);
}

/* On shard 1, sent by shard 2 once its leg has answered (before or after shard 1's leg ran:
 * both run on shard 1's thread). */
static void multi_signal(st_msg_t *msg)
{
    (void)msg;
    multi_t *m = g_multi;
    m->signalled = true;
    if (m->held)
        multi_release_then_defer(m);
}

static void multi_run(st_fanout_leg_t *leg)
{
    multi_t *m = leg->data;
    int self = tsh_self();
    if (leg->target != self)
        m->wrong_shard = true;
    for (int i = 0; i < NITEMS; i++)
        if (m->owner[i] == self) {
            m->result[i] = 100 * i + self;
            m->ran_on[i] = self;
        }
    if (self == 1) {
        /* answers last: two holds, given back after shard 2 has answered */
        st_fanout_hold(leg);
        st_fanout_hold(leg);
        m->held = leg;
        st_timer_init(&m->release_timer, multi_release_timer, m);
        if (m->signalled)
            multi_release_then_defer(m);
    } else if (self == 2) {
        m->shard2_answered = atomic_fetch_add(&m->seq, 1) + 1;
        st_mesh_send(m->t.mesh, 2, 1, &m->release_msg, multi_signal);
    }
}

static void multi_done(void *ctx)
{
    multi_t *m = ctx;
    m->done_calls++;
    m->done_on = tsh_self();
    m->done_saw_ended = m->ended;
    m->done_saw_shard1 = atomic_load(&m->shard1_answered) > 0;
    tsh_finish(&m->t);
}

static void multi_start(void *arg)
{
    multi_t *m = arg;
    st_fanout_begin(&m->fan, m->t.mesh, 0, multi_run, multi_done, m);
    for (int i = 0; i < NITEMS; i++)
        st_fanout_owner(&m->fan, m->legs, m->owner[i]);
    st_fanout_end(&m->fan);
    m->ended = true;
}

static void test_legs_to_several_shards(void **state)
{
    (void)state;
    static multi_t m;
    memset(&m, 0, sizeof m);
    g_multi = &m;
    const int owner[NITEMS] = {2, 1, 0, -1, 2, 1, 0};
    for (int i = 0; i < NITEMS; i++) {
        m.owner[i] = owner[i];
        m.result[i] = -1;
        m.ran_on[i] = -1;
    }
    for (int i = 0; i < NSHARDS; i++)
        m.legs[i].data = &m;
    assert_int_equal(tsh_run(&m.t, NSHARDS, multi_start, &m), 0);
    assert_false(m.t.timed_out);
    assert_int_equal(m.done_calls, 1);
    assert_int_equal(m.done_on, 0);
    assert_true(m.done_saw_ended);
    assert_false(m.wrong_shard);
    for (int i = 0; i < NITEMS; i++) {
        if (owner[i] < 0) {
            assert_int_equal(m.result[i], -1); /* answered by the caller: no leg ran it */
            continue;
        }
        assert_int_equal(m.ran_on[i], owner[i]);
        assert_int_equal(m.result[i], 100 * i + owner[i]);
    }
    /* shard 1 answered after shard 2, and done still waited for it */
    assert_true(m.shard2_answered > 0);
    assert_true(atomic_load(&m.shard1_answered) > m.shard2_answered);
    assert_true(m.done_saw_shard1);
}

/* ---- zero legs, and a leg on the caller's own shard ---- */

typedef struct {
    tsh_t t;
    st_fanout_t fan;
    st_fanout_leg_t leg;
    int done_calls;
    int runs;
    int run_on;
    bool done_inside_end;
    bool ran_inside_send;
    bool ended;
    bool done_saw_ended;
} local_t;

static void none_done(void *ctx)
{
    local_t *l = ctx;
    l->done_calls++;
}

static void local_run(st_fanout_leg_t *leg)
{
    local_t *l = leg->data;
    l->runs++;
    l->run_on = tsh_self();
}

static void local_done(void *ctx)
{
    local_t *l = ctx;
    l->done_calls++;
    l->done_saw_ended = l->ended;
    tsh_finish(&l->t);
}

static void zero_start(void *arg)
{
    local_t *l = arg;
    st_fanout_begin(&l->fan, l->t.mesh, 0, local_run, none_done, l);
    st_fanout_end(&l->fan);
    l->done_inside_end = l->done_calls == 1;
    tsh_finish(&l->t);
}

static void test_zero_legs(void **state)
{
    (void)state;
    static local_t l;
    memset(&l, 0, sizeof l);
    assert_int_equal(tsh_run(&l.t, 2, zero_start, &l), 0);
    assert_false(l.t.timed_out);
    assert_true(l.done_inside_end);
    assert_int_equal(l.done_calls, 1);
    assert_int_equal(l.runs, 0);
}

static void own_start(void *arg)
{
    local_t *l = arg;
    l->leg.data = l;
    st_fanout_begin(&l->fan, l->t.mesh, 0, local_run, local_done, l);
    st_fanout_send(&l->fan, &l->leg, 0);
    l->ran_inside_send = l->runs > 0;
    st_fanout_end(&l->fan);
    l->done_inside_end = l->done_calls > 0;
    l->ended = true;
}

static void test_leg_on_own_shard(void **state)
{
    (void)state;
    static local_t l;
    memset(&l, 0, sizeof l);
    assert_int_equal(tsh_run(&l.t, 2, own_start, &l), 0);
    assert_false(l.t.timed_out);
    assert_false(l.ran_inside_send);
    assert_false(l.done_inside_end);
    assert_true(l.done_saw_ended);
    assert_int_equal(l.runs, 1);
    assert_int_equal(l.run_on, 0);
    assert_int_equal(l.done_calls, 1);
}

/* ---- by owner: once per shard per round ---- */

typedef struct {
    tsh_t t;
    st_fanout_t fan;
    st_fanout_leg_t legs[NSHARDS];
    _Atomic int runs[NSHARDS];
    int rounds;
} owner_t;

static void owner_run(st_fanout_leg_t *leg)
{
    owner_t *o = leg->data;
    atomic_fetch_add(&o->runs[tsh_self()], 1);
}

static void owner_round(owner_t *o);

static void owner_done(void *ctx)
{
    owner_t *o = ctx;
    if (++o->rounds == 2) {
        tsh_finish(&o->t);
        return;
    }
    owner_round(o); /* begun again once done ran, as Fetch's rounds do */
}

static void owner_round(owner_t *o)
{
    static const int owners[] = {1, 2, 1, -1, 2, 2, 0, 1, -1};
    st_fanout_begin(&o->fan, o->t.mesh, 0, owner_run, owner_done, o);
    for (size_t i = 0; i < sizeof owners / sizeof owners[0]; i++)
        st_fanout_owner(&o->fan, o->legs, owners[i]);
    st_fanout_end(&o->fan);
}

static void owner_start(void *arg)
{
    owner_round(arg);
}

static void test_by_owner_once_per_round(void **state)
{
    (void)state;
    static owner_t o;
    memset(&o, 0, sizeof o);
    for (int i = 0; i < NSHARDS; i++)
        o.legs[i].data = &o;
    assert_int_equal(tsh_run(&o.t, NSHARDS, owner_start, &o), 0);
    assert_false(o.t.timed_out);
    assert_int_equal(o.rounds, 2);
    for (int i = 0; i < NSHARDS; i++)
        assert_int_equal(atomic_load(&o.runs[i]), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_legs_to_several_shards),
        cmocka_unit_test(test_zero_legs),
        cmocka_unit_test(test_leg_on_own_shard),
        cmocka_unit_test(test_by_owner_once_per_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
