/*
 * uvthread.h — a thread running a libuv loop, with a locked inbox other threads post to and a
 * uv_async that wakes the loop, and a start handshake: what the metadata quorum
 * (cluster/quorum.c), the replica fetcher (replica/fetcher.c) and the inter-broker client
 * (replica/client.c) each run on.
 *
 * The owner embeds st_uvthread_t in its own object and gives three callbacks. The inbox's
 * contents are the owner's (a list, a few arrays): the helper only holds the lock around them
 * and tells the loop when to look.
 *
 *   main thread                         the loop's thread
 *   -----------                         -----------------
 *   st_uvthread_start(t, ops, arg) ---> loop and wake-up set up; ops->init(arg, loop): the
 *       (blocks)                         owner's handles and timers (its own errors: close what
 *                                        it opened, return < 0)
 *     returns init's result <---------- handshake
 *                                        ops->started(arg) (if set, and init returned 0)
 *                                        uv_run ...
 *   any thread:
 *   st_uvthread_post_begin(t) -> false once stopping (nothing posted then)
 *     ... put a message in the owner's inbox ...
 *   st_uvthread_post_end(t) ----------> ops->wake(arg, false): st_uvthread_lock, take the
 *                                        inbox, st_uvthread_unlock, act on it (several posts
 *                                        may share one wake)
 *   st_uvthread_stop(t) --------------> ops->wake(arg, true): the last wake; the owner starts
 *       (blocks: joins)                  closing its handles (at once or later: a leader hands
 *                                        over first); the helper closes its own; uv_run
 *                                        returns once every handle is closed
 *     returns <------------------------ loop closed, thread ends
 *   st_uvthread_fini(t)
 *
 * When init fails, the loop still runs until the handles init opened are closed, then the
 * thread ends and st_uvthread_start joins it and returns init's error (wake is never called).
 *
 * Memory: st_uvthread_t lives in the owner's object, which must outlive st_uvthread_stop.
 * Threads: st_uvthread_start / _stop / _running / _fini on one (the owner's) thread;
 * _post_begin / _post_end from any thread; _lock / _unlock on the loop's thread (the wake
 * callback), which runs every callback.
 */
#ifndef ST_IO_UVTHREAD_H
#define ST_IO_UVTHREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <uv.h>

typedef struct st_uvthread_ops {
    /* The loop's thread, before st_uvthread_start returns: set up the owner's handles on
     * loop. Returns 0, or an error for st_uvthread_start (having closed what it opened). */
    int (*init)(void *arg, uv_loop_t *loop);
    /* The loop's thread, after st_uvthread_start returned 0 (may be NULL). */
    void (*started)(void *arg);
    /* The loop's thread: the inbox may hold something (stopping false), or st_uvthread_stop
     * was called (stopping true: the last call; close every handle of the owner's). */
    void (*wake)(void *arg, bool stopping);
} st_uvthread_ops_t;

typedef struct st_uvthread {
    uv_loop_t loop; /* the owner's handles live on it */
    /* private */
    const st_uvthread_ops_t *ops;
    void *arg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    uv_async_t async;
    int start_rc; /* 1 while starting */
    bool stop;    /* set by st_uvthread_stop (mu) */
    bool joined;  /* the thread ended and was joined (or never started) */
} st_uvthread_t;

/* Starts the thread and waits for ops->init there. 0, or init's error, or one of starting a
 * loop or a thread (negative errno); t is then stopped already: st_uvthread_fini it. */
int st_uvthread_start(st_uvthread_t *t, const st_uvthread_ops_t *ops, void *arg);
/* Any thread: takes the inbox lock to post. False (and no lock held) once st_uvthread_stop was
 * called: the loop takes nothing more. */
bool st_uvthread_post_begin(st_uvthread_t *t);
/* After a post_begin that returned true: wakes the loop (ops->wake runs soon) and releases the
 * inbox lock. */
void st_uvthread_post_end(st_uvthread_t *t);
/* The loop's thread (ops->wake): the inbox lock, to take what was posted. */
void st_uvthread_lock(st_uvthread_t *t);
void st_uvthread_unlock(st_uvthread_t *t);
/* Stops the loop (the last ops->wake, with stopping true) and joins the thread. Once only has
 * effect; calls after the first return at once. */
void st_uvthread_stop(st_uvthread_t *t);
/* Whether the thread still runs (started and not yet joined). */
bool st_uvthread_running(const st_uvthread_t *t);
/* After st_uvthread_stop (or a failed start). */
void st_uvthread_fini(st_uvthread_t *t);

#endif
