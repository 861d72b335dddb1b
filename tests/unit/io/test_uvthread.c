/*
 * Unit tests for io/uvthread.h: the start handshake (init's error is the start's, and the
 * loop still closes what init opened), posts from several threads all reaching the loop's
 * wake callback in order per thread, the stop as the last wake, and posts refused after it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "io/uvthread.h"

#define THREADS 4
#define POSTS   500

typedef struct owner {
    st_uvthread_t th;
    int init_rc;
    uv_timer_t timer;
    pthread_t loop_thread;
    bool started_on_loop;
    /* the inbox (th's lock) */
    int pending[THREADS];
    /* the loop's */
    int seen[THREADS];
    int wakes, stop_wakes;
    bool wake_after_stop;
} owner_t;

static int o_init(void *arg, uv_loop_t *loop)
{
    owner_t *o = arg;
    o->loop_thread = pthread_self();
    uv_timer_init(loop, &o->timer);
    if (o->init_rc)
        uv_close((uv_handle_t *)&o->timer, NULL);
    return o->init_rc;
}

static void o_started(void *arg)
{
    owner_t *o = arg;
    o->started_on_loop = pthread_equal(pthread_self(), o->loop_thread);
}

static void o_wake(void *arg, bool stopping)
{
    owner_t *o = arg;
    if (o->stop_wakes)
        o->wake_after_stop = true;
    st_uvthread_lock(&o->th);
    for (int i = 0; i < THREADS; i++) {
        o->seen[i] += o->pending[i];
        o->pending[i] = 0;
    }
    st_uvthread_unlock(&o->th);
    o->wakes++;
    if (stopping) {
        o->stop_wakes++;
        uv_close((uv_handle_t *)&o->timer, NULL);
    }
}

static const st_uvthread_ops_t ops = {.init = o_init, .started = o_started, .wake = o_wake};

static void test_init_fails(void **state)
{
    (void)state;
    owner_t o;
    memset(&o, 0, sizeof o);
    o.init_rc = -EADDRINUSE;
    assert_int_equal(st_uvthread_start(&o.th, &ops, &o), -EADDRINUSE);
    assert_false(st_uvthread_running(&o.th));
    assert_false(st_uvthread_post_begin(&o.th));
    st_uvthread_stop(&o.th); /* nothing to stop: returns at once */
    assert_int_equal(o.wakes, 0);
    assert_false(o.started_on_loop);
    st_uvthread_fini(&o.th);
}

typedef struct poster {
    owner_t *o;
    int index;
} poster_t;

static void *post_many(void *arg)
{
    poster_t *p = arg;
    for (int i = 0; i < POSTS; i++) {
        assert_true(st_uvthread_post_begin(&p->o->th));
        p->o->pending[p->index]++;
        st_uvthread_post_end(&p->o->th);
    }
    return NULL;
}

static void test_posts_and_stop(void **state)
{
    (void)state;
    owner_t o;
    memset(&o, 0, sizeof o);
    assert_int_equal(st_uvthread_start(&o.th, &ops, &o), 0);
    assert_true(st_uvthread_running(&o.th));
    pthread_t t[THREADS];
    poster_t p[THREADS];
    for (int i = 0; i < THREADS; i++) {
        p[i] = (poster_t){&o, i};
        assert_int_equal(pthread_create(&t[i], NULL, post_many, &p[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    st_uvthread_stop(&o.th);
    assert_false(st_uvthread_running(&o.th));
    /* every post was seen by the time the stop's wake ran, which was the last */
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(o.seen[i] + o.pending[i], POSTS);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(o.seen[i], POSTS);
    assert_int_equal(o.stop_wakes, 1);
    assert_false(o.wake_after_stop);
    assert_true(o.wakes >= 1);
    assert_true(o.started_on_loop);
    assert_false(st_uvthread_post_begin(&o.th));
    st_uvthread_stop(&o.th); /* again: nothing */
    assert_int_equal(o.stop_wakes, 1);
    st_uvthread_fini(&o.th);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_fails),
        cmocka_unit_test(test_posts_and_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
