/*
 * loop_impl.h — the event loop's private state, shared by its two backends: io_uring
 * (loop.c) and epoll (loop_epoll.c). Not for callers outside io/.
 */
#ifndef ST_IO_LOOP_IMPL_H
#define ST_IO_LOOP_IMPL_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>

#include "io/loop.h"

enum {
    ST_EP_ACCEPT = 1,
    ST_EP_RECV,
    ST_EP_SEND,
    ST_EP_SENDMSG,
    ST_EP_POLL,
    ST_EP_READ,
    ST_EP_WRITE,
    ST_EP_FSYNC,
    ST_EP_FDATASYNC,
    ST_EP_SYNC_RANGE,
};

/* One descriptor's waiting operations: at most one reading side and one writing side. */
typedef struct {
    st_io_t *in, *out;
    uint32_t registered; /* events currently in the epoll set */
} st_ep_fd_t;

/* The epoll backend's state. File operations go to one helper thread; its completions come
 * back through a locked list and the loop's eventfd. */
typedef struct st_ep {
    int epfd;
    st_ep_fd_t *fds;
    int nfds;
    st_io_t *done_head, *done_tail; /* completed on the loop thread (cancels), not yet run */
    pthread_t worker;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    st_io_t *jobs_head, *jobs_tail;   /* file operations for the worker */
    st_io_t *fdone_head, *fdone_tail; /* the worker's completions */
    bool worker_stop;
} st_ep_t;

typedef struct {
    void (*fn)(void *);
    void *arg;
} st_hook_t;

struct st_loop {
    struct io_uring ring;
    bool stop;
    int wake_fd;
    st_io_t wake_io;
    uint64_t wake_val;
    _Atomic int wake_pending; /* 1 while a write to wake_fd is not yet consumed */
    void (*wake_fn)(void *);
    void *wake_arg;
    st_hook_t hooks[8];
    int nhooks;
    st_timer_t **heap;
    int heap_len, heap_cap;
    st_task_t *task_head, *task_tail;
    int64_t busy_ns, start_ns;
    int64_t woke_ns;                         /* when the last wait returned */
    uint64_t iter[ST_LOOP_ITER_BUCKETS + 1]; /* busy span per iteration, see loop.h */
    int64_t iter_sum_ns;
    uint64_t slow;
    uint64_t inflight;
    st_ep_t *ep; /* non-NULL: the epoll backend */
};

void st_loop_wake_done(st_io_t *io, int res);
void st_note_slow(st_loop_t *l, int64_t t0);
/* Records one iteration's busy span: from l->woke_ns to `now`, when the loop goes to wait. */
void st_note_iter(st_loop_t *l, int64_t now);

int st_ep_init(st_loop_t *l);
void st_ep_fini(st_loop_t *l);
int st_ep_submit(st_loop_t *l, st_io_t *io);
int st_ep_cancel(st_loop_t *l, st_io_t *io);
/* Waits up to timeout_ns (-1: until something happens) and runs what completed. */
int st_ep_wait(st_loop_t *l, int64_t timeout_ns);
/* Runs the file operations the worker finished (called on wake-ups). */
void st_ep_drain_files(st_loop_t *l);

#endif
