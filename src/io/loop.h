/*
 * loop.h — one event loop per shard, over io_uring.
 *
 * The interface is completion based: the caller embeds an st_io_t in its own object, fills
 * in cb, and starts an operation; cb(io, res) runs later on the loop's thread with the
 * operation's result (bytes, a new fd, or -errno). The st_io_t must stay alive until then.
 * Where io_uring is unavailable (a container's seccomp profile can block it) or
 * STRATA_IO=epoll is set, the same interface runs over epoll (loop_epoll.c): readiness, then
 * the call, for sockets; a helper thread for file reads, writes and syncs. Timers live in a heap
 * inside the loop; waiting uses the nearest deadline.
 *
 * Threads: every function here is called on the loop's own thread, except st_loop_wake(),
 * which any thread may call to make the loop run its wake handler soon.
 *
 * Loop iteration:   run due timers -> run deferred tasks -> before-sleep hooks
 *                   -> submit + wait (until a completion, a wake-up or the next timer)
 *                   -> run completions
 *
 * Iteration time: the loop keeps a histogram of its busy span per iteration, from the moment
 * the wait returns to the moment the next wait starts (completions, then timers, tasks and
 * hooks), measured with the clock reads the busy-time figure already makes. That span is how
 * long everything else on the shard waited: a long one is a broker stall (a slow callback, a
 * burst of work, or the thread preempted while busy). The wake-to-wake interval would mostly
 * measure sleep (an idle shard wakes for its next timer), and the delay between an event and
 * the thread running again (scheduling noise on a busy machine) falls inside the wait, so it
 * is not counted here.
 */
#ifndef ST_IO_LOOP_H
#define ST_IO_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct st_loop st_loop_t;
typedef struct st_io st_io_t;
typedef void (*st_io_cb_t)(st_io_t *io, int res);

struct st_io {
    st_io_cb_t cb;
    void *data; /* caller's */
    /* Private to the loop's epoll backend (loop_epoll.c): the operation waiting to run. */
    struct {
        int op, fd, res;
        void *buf;
        size_t len;
        uint64_t off;
        unsigned events;
        const struct msghdr *msg;
        st_io_t *next;
    } ep;
};

typedef struct st_timer st_timer_t;
typedef void (*st_timer_cb_t)(st_timer_t *t);
struct st_timer {
    st_timer_cb_t cb;
    void *data;     /* caller's */
    int64_t due_ns; /* monotonic deadline */
    int heap_index; /* -1 when not armed */
};

typedef struct st_task st_task_t;
typedef void (*st_task_cb_t)(st_task_t *t);
struct st_task {
    st_task_cb_t cb;
    void *data;
    st_task_t *next;
    bool queued;
};

/* Creates a loop whose submission queue has room for `entries` operations. */
int st_loop_create(st_loop_t **out, unsigned entries);
void st_loop_destroy(st_loop_t *l);
/* Runs until st_loop_stop(); returns 0, or -errno if io_uring fails. May be called again
 * after it returned: it then runs until the next st_loop_stop(). */
int st_loop_run(st_loop_t *l);
/* Makes st_loop_run return after the current iteration. Loop thread only. */
void st_loop_stop(st_loop_t *l);
/* Any thread: wakes the loop, which then calls the wake handler on its own thread. */
void st_loop_wake(st_loop_t *l);
void st_loop_set_wake_handler(st_loop_t *l, void (*fn)(void *arg), void *arg);
/* Runs fn(arg) before each wait, on the loop thread (Redis's beforeSleep). */
int st_loop_add_before_sleep(st_loop_t *l, void (*fn)(void *arg), void *arg);
/* Busy and total time of the loop, for its busy ratio. */
void st_loop_times(const st_loop_t *l, int64_t *busy_ns, int64_t *total_ns);
/* Counts callbacks (completions, timers, tasks) that ran longer than 500 µs. */
uint64_t st_loop_slow_tasks(const st_loop_t *l);

/* Upper bounds (ns, inclusive) of the iteration-time histogram's buckets: 10 µs to 1 s. */
#define ST_LOOP_ITER_BUCKETS 16
extern const int64_t st_loop_iter_bounds_ns[ST_LOOP_ITER_BUCKETS];
/* The loop's iteration-time histogram since it was created: counts[ST_LOOP_ITER_BUCKETS + 1]
 * (not cumulative; the last counts the spans above the last bound) and their sum in ns. */
void st_loop_iter_hist(const st_loop_t *l, uint64_t *counts, int64_t *sum_ns);

/* Operations. Each returns 0 once queued (cb will run), or -errno (cb will not run). */
int st_loop_accept(st_loop_t *l, st_io_t *io, int fd);
int st_loop_recv(st_loop_t *l, st_io_t *io, int fd, void *buf, size_t len);
int st_loop_send(st_loop_t *l, st_io_t *io, int fd, const void *buf, size_t len);
int st_loop_sendmsg(st_loop_t *l, st_io_t *io, int fd, const struct msghdr *msg);
int st_loop_poll(st_loop_t *l, st_io_t *io, int fd, unsigned events);
int st_loop_read(st_loop_t *l, st_io_t *io, int fd, void *buf, size_t len, uint64_t off);
int st_loop_write(st_loop_t *l, st_io_t *io, int fd, const void *buf, size_t len, uint64_t off);
int st_loop_fsync(st_loop_t *l, st_io_t *io, int fd, bool datasync);
/* Starts the write-out of the dirty pages of [off, off + len) of fd without waiting for it
 * (sync_file_range SYNC_FILE_RANGE_WRITE; len < 4 GiB): nothing becomes durable. */
int st_loop_writeback(st_loop_t *l, st_io_t *io, int fd, uint64_t off, uint64_t len);
/* Asks the kernel to cancel io; its cb still runs (usually with -ECANCELED). */
int st_loop_cancel(st_loop_t *l, st_io_t *io);

/* Timers. A timer is armed at most once; re-arming moves it. */
void st_timer_init(st_timer_t *t, st_timer_cb_t cb, void *data);
void st_loop_timer_start(st_loop_t *l, st_timer_t *t, int64_t after_ms);
void st_loop_timer_start_ns(st_loop_t *l, st_timer_t *t, int64_t after_ns);
void st_loop_timer_stop(st_loop_t *l, st_timer_t *t);
static inline bool st_timer_armed(const st_timer_t *t)
{
    return t->heap_index >= 0;
}

/* Deferred tasks run on the next iteration, in order. A queued task is not queued twice. */
void st_task_init(st_task_t *t, st_task_cb_t cb, void *data);
void st_loop_defer(st_loop_t *l, st_task_t *t);

/* "io_uring" or "epoll". */
const char *st_loop_backend(const st_loop_t *l);

/* The loop of the calling thread (NULL outside a loop thread). */
st_loop_t *st_loop_current(void);

#endif
