/* Unit tests for io/: timers, deferred tasks, file operations, cross-shard messages. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "io/loop.h"
#include "io/mesh.h"

typedef struct {
    st_loop_t *loop;
    int order[8];
    int n;
    int stop_after;
} timer_ctx_t;

static void on_timer(st_timer_t *t)
{
    timer_ctx_t *c = *(timer_ctx_t **)t->data;
    c->order[c->n++] = (int)(intptr_t)((void **)t->data)[1];
    if (c->n == c->stop_after)
        st_loop_stop(c->loop);
}

static void test_timers_fire_in_deadline_order(void **state)
{
    (void)state;
    timer_ctx_t c = {0};
    assert_int_equal(st_loop_create(&c.loop, 64), 0);
    st_timer_t t[4];
    void *data[4][2];
    int64_t after[4] = {30, 10, 20, 5};
    for (int i = 0; i < 4; i++) {
        data[i][0] = &c;
        data[i][1] = (void *)(intptr_t)i;
        st_timer_init(&t[i], on_timer, data[i]);
    }
    c.stop_after = 3;
    for (int i = 0; i < 4; i++)
        st_loop_timer_start(c.loop, &t[i], after[i]);
    st_loop_timer_stop(c.loop, &t[2]); /* cancelled: never fires */
    assert_false(st_timer_armed(&t[2]));
    int64_t t0 = st_mono_ms();
    assert_int_equal(st_loop_run(c.loop), 0);
    assert_true(st_mono_ms() - t0 >= 30);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.order[0], 3);
    assert_int_equal(c.order[1], 1);
    assert_int_equal(c.order[2], 0);
    st_loop_destroy(c.loop);
}

typedef struct {
    st_loop_t *loop;
    st_io_t io;
    int results[4];
    int step;
    int fd;
    char buf[16];
} file_ctx_t;

static void on_file(st_io_t *io, int res)
{
    file_ctx_t *c = io->data;
    c->results[c->step++] = res;
    if (c->step == 1)
        st_loop_writeback(c->loop, &c->io, c->fd, 0, 12);
    else if (c->step == 2)
        st_loop_fsync(c->loop, &c->io, c->fd, true);
    else if (c->step == 3)
        st_loop_read(c->loop, &c->io, c->fd, c->buf, sizeof c->buf, 0);
    else
        st_loop_stop(c->loop);
}

static void test_file_write_fsync_read(void **state)
{
    (void)state;
    file_ctx_t c = {0};
    char path[] = "/tmp/strata-io-XXXXXX";
    c.fd = mkstemp(path);
    assert_true(c.fd >= 0);
    unlink(path);
    assert_int_equal(st_loop_create(&c.loop, 64), 0);
    c.io.cb = on_file;
    c.io.data = &c;
    assert_int_equal(st_loop_write(c.loop, &c.io, c.fd, "hello strata", 12, 0), 0);
    assert_int_equal(st_loop_run(c.loop), 0);
    assert_int_equal(c.results[0], 12);
    assert_int_equal(c.results[1], 0); /* writeback started */
    assert_int_equal(c.results[2], 0);
    assert_int_equal(c.results[3], 12);
    assert_memory_equal(c.buf, "hello strata", 12);
    st_loop_destroy(c.loop);
    close(c.fd);
}

/* Two shard threads bounce one message 20,000 times through the mesh. */
#define BOUNCES 20000

typedef struct {
    st_msg_t msg;
    int hops;
} ball_t;

typedef struct {
    st_mesh_t *mesh;
    st_loop_t *loops[2];
    ball_t balls[8];
    pthread_barrier_t ready;
    _Atomic int done;
} mesh_ctx_t;

static mesh_ctx_t *g_mesh;
static _Thread_local int my_shard;

static void on_ball(st_msg_t *m)
{
    ball_t *b = (ball_t *)m;
    if (++b->hops >= BOUNCES) {
        if (atomic_fetch_add(&g_mesh->done, 1) + 1 == 8) {
            st_loop_stop(g_mesh->loops[0]);
            st_loop_stop(g_mesh->loops[1]);
            st_loop_wake(g_mesh->loops[1 - my_shard]);
        }
        return;
    }
    st_mesh_send(g_mesh->mesh, my_shard, 1 - my_shard, m, on_ball);
}

static void stop_if_done(void *arg)
{
    st_loop_t *l = arg;
    if (atomic_load(&g_mesh->done) == 8)
        st_loop_stop(l);
}

static void *shard_main(void *arg)
{
    my_shard = (int)(intptr_t)arg;
    st_loop_t *l = g_mesh->loops[my_shard];
    st_mesh_attach(g_mesh->mesh, my_shard, l);
    st_loop_add_before_sleep(l, stop_if_done, l);
    pthread_barrier_wait(&g_mesh->ready);
    if (my_shard == 0)
        for (int i = 0; i < 8; i++)
            st_mesh_send(g_mesh->mesh, 0, i % 2, &g_mesh->balls[i].msg, on_ball);
    st_loop_run(l);
    return NULL;
}

static void test_mesh_ping_pong(void **state)
{
    (void)state;
    mesh_ctx_t c;
    memset(&c, 0, sizeof c);
    g_mesh = &c;
    assert_int_equal(st_mesh_create(&c.mesh, 2, 4), 0); /* tiny rings: exercise overflow */
    for (int i = 0; i < 2; i++)
        assert_int_equal(st_loop_create(&c.loops[i], 64), 0);
    pthread_barrier_init(&c.ready, NULL, 2);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, shard_main, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&c.done), 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(c.balls[i].hops, BOUNCES);
    assert_true(st_mesh_sent(c.mesh, 0) + st_mesh_sent(c.mesh, 1) >= 8 * (BOUNCES - 1));
    for (int i = 0; i < 2; i++)
        st_loop_destroy(c.loops[i]);
    st_mesh_destroy(c.mesh);
    pthread_barrier_destroy(&c.ready);
}

static void count_task(st_task_t *t)
{
    int *n = t->data;
    (*n)++;
}

static void stop_task(st_task_t *t)
{
    st_loop_stop(t->data);
}

static void test_deferred_tasks_run_once_in_order(void **state)
{
    (void)state;
    st_loop_t *l;
    assert_int_equal(st_loop_create(&l, 64), 0);
    int n = 0;
    st_task_t a, stop;
    st_task_init(&a, count_task, &n);
    st_task_init(&stop, stop_task, l);
    st_loop_defer(l, &a);
    st_loop_defer(l, &a); /* already queued: not twice */
    st_loop_defer(l, &stop);
    assert_int_equal(st_loop_run(l), 0);
    assert_int_equal(n, 1);
    st_loop_destroy(l);
}

static void spin_timer(st_timer_t *t)
{
    (void)t;
    int64_t until = st_mono_ns() + 3000000; /* 3 ms busy */
    while (st_mono_ns() < until)
        ;
}

static void stop_timer(st_timer_t *t)
{
    st_loop_stop(t->data);
}

/* The iteration histogram counts busy spans, not the waits between them: a 3 ms callback
 * lands above 2.5 ms, and the 200 ms idle wait before the second timer is not counted. */
static void test_iteration_histogram_counts_busy_spans(void **state)
{
    (void)state;
    st_loop_t *l;
    assert_int_equal(st_loop_create(&l, 64), 0);
    uint64_t c[ST_LOOP_ITER_BUCKETS + 1];
    int64_t sum;
    st_loop_iter_hist(l, c, &sum);
    for (int i = 0; i <= ST_LOOP_ITER_BUCKETS; i++)
        assert_int_equal(c[i], 0);
    assert_int_equal(sum, 0);
    st_timer_t spin, stop;
    st_timer_init(&spin, spin_timer, NULL);
    st_timer_init(&stop, stop_timer, l);
    st_loop_timer_start(l, &spin, 1);
    st_loop_timer_start(l, &stop, 200);
    int64_t t0 = st_mono_ns();
    assert_int_equal(st_loop_run(l), 0);
    int64_t elapsed = st_mono_ns() - t0;
    assert_true(elapsed >= 200000000);
    st_loop_iter_hist(l, c, &sum);
    uint64_t total = 0, slow = 0;
    for (int i = 0; i <= ST_LOOP_ITER_BUCKETS; i++) {
        total += c[i];
        if (i > 0 && st_loop_iter_bounds_ns[i - 1] >= 2500000)
            slow += c[i];
    }
    assert_true(total >= 2); /* the first iteration, and the one that ran the spin */
    assert_true(slow >= 1);
    assert_true(sum >= 3000000);
    assert_true(sum < elapsed - 150000000); /* the waits are not in it */
    for (int i = 1; i < ST_LOOP_ITER_BUCKETS; i++)
        assert_true(st_loop_iter_bounds_ns[i] > st_loop_iter_bounds_ns[i - 1]);
    st_loop_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timers_fire_in_deadline_order),
        cmocka_unit_test(test_file_write_fsync_read),
        cmocka_unit_test(test_mesh_ping_pong),
        cmocka_unit_test(test_deferred_tasks_run_once_in_order),
        cmocka_unit_test(test_iteration_histogram_counts_busy_spans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
