/*
 * uvthread.c — a libuv loop on a thread of its own, with a locked inbox and a start handshake
 * (uvthread.h).
 */
#include "io/uvthread.h"

#include <errno.h>
#include <string.h>

static void on_async(uv_async_t *h)
{
    st_uvthread_t *t = h->data;
    pthread_mutex_lock(&t->mu);
    bool stop = t->stop;
    pthread_mutex_unlock(&t->mu);
    if (uv_is_closing((uv_handle_t *)&t->async))
        return;
    t->ops->wake(t->arg, stop);
    /* Nobody sends once stop is set (st_uvthread_post_begin refuses, st_uvthread_stop sends once,
     * under the lock): the wake-up can go. */
    if (stop)
        uv_close((uv_handle_t *)&t->async, NULL);
}

static void *uv_main(void *arg)
{
    st_uvthread_t *t = arg;
    int rc = t->ops->init(t->arg, &t->loop);
    pthread_mutex_lock(&t->mu);
    t->start_rc = rc;
    if (rc)
        t->stop = true; /* nothing is posted to a thread that did not start */
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->mu);
    if (rc)
        uv_close((uv_handle_t *)&t->async, NULL);
    else if (t->ops->started)
        t->ops->started(t->arg);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    uv_loop_close(&t->loop);
    return NULL;
}

int st_uvthread_start(st_uvthread_t *t, const st_uvthread_ops_t *ops, void *arg)
{
    memset(t, 0, sizeof *t);
    t->ops = ops;
    t->arg = arg;
    t->joined = true;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cond, NULL);
    int rc = uv_loop_init(&t->loop);
    if (rc) {
        t->stop = true;
        return rc;
    }
    uv_async_init(&t->loop, &t->async, on_async);
    t->async.data = t;
    t->start_rc = 1;
    rc = pthread_create(&t->thread, NULL, uv_main, t);
    if (rc) {
        t->stop = true;
        uv_close((uv_handle_t *)&t->async, NULL);
        uv_run(&t->loop, UV_RUN_DEFAULT);
        uv_loop_close(&t->loop);
        return -rc;
    }
    t->joined = false;
    pthread_mutex_lock(&t->mu);
    while (t->start_rc == 1)
        pthread_cond_wait(&t->cond, &t->mu);
    rc = t->start_rc;
    pthread_mutex_unlock(&t->mu);
    if (rc) {
        pthread_join(t->thread, NULL);
        t->joined = true;
    }
    return rc;
}

bool st_uvthread_post_begin(st_uvthread_t *t)
{
    pthread_mutex_lock(&t->mu);
    if (t->stop) {
        pthread_mutex_unlock(&t->mu);
        return false;
    }
    return true;
}

void st_uvthread_post_end(st_uvthread_t *t)
{
    uv_async_send(&t->async); /* under mu: the loop closes the handle only once stop is set */
    pthread_mutex_unlock(&t->mu);
}

void st_uvthread_stop(st_uvthread_t *t)
{
    pthread_mutex_lock(&t->mu);
    bool was = t->stop;
    t->stop = true;
    if (!was)
        uv_async_send(&t->async);
    pthread_mutex_unlock(&t->mu);
    if (!t->joined) {
        pthread_join(t->thread, NULL);
        t->joined = true;
    }
}

void st_uvthread_lock(st_uvthread_t *t)
{
    pthread_mutex_lock(&t->mu);
}

void st_uvthread_unlock(st_uvthread_t *t)
{
    pthread_mutex_unlock(&t->mu);
}

bool st_uvthread_running(const st_uvthread_t *t)
{
    return !t->joined;
}

void st_uvthread_fini(st_uvthread_t *t)
{
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cond);
}
