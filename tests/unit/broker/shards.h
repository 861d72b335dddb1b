/*
 * shards.h — the real shard machinery for broker/ unit tests, without a broker: N threads,
 * each with its own io/ loop attached to one io/ mesh, as broker/runtime.c starts them.
 *
 *   tsh_run(&t, n, start, arg):  creates the mesh and loops, starts the threads; once every
 *       shard is attached, start(arg) runs on shard 0's thread; returns when some shard called
 *       tsh_finish (or after TSH_LIMIT_MS: t.timed_out), every thread joined
 *   tsh_self():                  the calling thread's shard id (-1 off the shard threads)
 *   tsh_finish(&t):              from any shard: every loop stops after its iteration
 *
 * Everything is freed by tsh_run before it returns; messages still in flight then belong to
 * the test (its own memory).
 */
#ifndef ST_TESTS_BROKER_SHARDS_H
#define ST_TESTS_BROKER_SHARDS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "io/loop.h"
#include "io/mesh.h"

#define TSH_MAX      4
#define TSH_LIMIT_MS 10000 /* a test that has not finished by then failed */

typedef struct tsh {
    int n;
    st_mesh_t *mesh;
    st_loop_t *loops[TSH_MAX];
    pthread_t th[TSH_MAX];
    pthread_barrier_t ready;
    _Atomic int stop;
    bool timed_out;
    st_timer_t guard; /* on shard 0 */
    void (*start)(void *arg);
    void *arg;
} tsh_t;

static _Thread_local int tsh_id = -1;
static tsh_t *tsh_cur;

static inline int tsh_self(void)
{
    return tsh_id;
}

static inline void tsh_finish(tsh_t *t)
{
    atomic_store(&t->stop, 1);
    for (int i = 0; i < t->n; i++)
        st_loop_wake(t->loops[i]);
}

static void tsh_before_sleep(void *arg)
{
    st_loop_t *l = arg;
    if (atomic_load(&tsh_cur->stop))
        st_loop_stop(l);
}

static void tsh_on_guard(st_timer_t *timer)
{
    tsh_t *t = timer->data;
    t->timed_out = true;
    tsh_finish(t);
}

static void *tsh_main(void *arg)
{
    tsh_id = (int)(intptr_t)arg;
    tsh_t *t = tsh_cur;
    st_loop_t *l = t->loops[tsh_id];
    st_mesh_attach(t->mesh, tsh_id, l);
    st_loop_add_before_sleep(l, tsh_before_sleep, l);
    pthread_barrier_wait(&t->ready);
    if (tsh_id == 0) {
        st_timer_init(&t->guard, tsh_on_guard, t);
        st_loop_timer_start(l, &t->guard, TSH_LIMIT_MS);
        t->start(t->arg);
    }
    st_loop_run(l);
    if (tsh_id == 0)
        st_loop_timer_stop(l, &t->guard);
    return NULL;
}

/* Returns 0 once the shards have stopped, or -1 when they could not be started. */
static inline int tsh_run(tsh_t *t, int n, void (*start)(void *arg), void *arg)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->start = start;
    t->arg = arg;
    tsh_cur = t;
    if (n < 1 || n > TSH_MAX || st_mesh_create(&t->mesh, n, 4) != 0) /* tiny rings: overflow */
        return -1;
    for (int i = 0; i < n; i++)
        if (st_loop_create(&t->loops[i], 64) != 0)
            return -1;
    pthread_barrier_init(&t->ready, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        pthread_create(&t->th[i], NULL, tsh_main, (void *)(intptr_t)i);
    for (int i = 0; i < n; i++)
        pthread_join(t->th[i], NULL);
    pthread_barrier_destroy(&t->ready);
    for (int i = 0; i < n; i++)
        st_loop_destroy(t->loops[i]);
    st_mesh_destroy(t->mesh);
    return 0;
}

#endif
