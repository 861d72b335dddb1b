/*
 * loop.c — the io_uring implementation of loop.h.
 *
 * user_data of every submission is the st_io_t pointer; the wake-up eventfd read uses the
 * loop's own st_io_t. Timers are a binary min-heap on due_ns. Invariants:
 *   1. inflight counts submitted operations whose completion has not been reaped;
 *   2. a timer is in the heap iff heap_index >= 0, and heap[t->heap_index] == t;
 *   3. callbacks run only on the loop thread, never re-entrantly inside st_loop_* calls.
 */
#include "io/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/log.h"
#include "io/loop_impl.h"

#define ST_SLOW_CB_NS 500000

static _Thread_local st_loop_t *st_cur_loop;

const char *st_loop_backend(const st_loop_t *l)
{
    return l->ep ? "epoll" : "io_uring";
}

st_loop_t *st_loop_current(void)
{
    return st_cur_loop;
}

static struct io_uring_sqe *st_sqe(st_loop_t *l)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
    if (!sqe) {
        io_uring_submit(&l->ring);
        sqe = io_uring_get_sqe(&l->ring);
    }
    return sqe;
}

static int st_arm_wake(st_loop_t *l)
{
    struct io_uring_sqe *sqe = st_sqe(l);
    if (!sqe)
        return -EBUSY;
    io_uring_prep_read(sqe, l->wake_fd, &l->wake_val, sizeof l->wake_val, 0);
    io_uring_sqe_set_data(sqe, &l->wake_io);
    l->inflight++;
    return 0;
}

int st_loop_create(st_loop_t **out, unsigned entries)
{
    st_loop_t *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    l->wake_fd = eventfd(0, EFD_CLOEXEC);
    if (l->wake_fd < 0) {
        int rc = -errno;
        free(l);
        return rc;
    }
    l->wake_io.cb = st_loop_wake_done;
    l->wake_io.data = l;
    l->start_ns = st_mono_ns();
    const char *want = getenv("STRATA_IO");
    int rc = -ENOSYS;
    if (!want || strcmp(want, "epoll") != 0) {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
        rc = io_uring_queue_init_params(entries, &l->ring, &p);
        if (rc == -EINVAL) {
            memset(&p, 0, sizeof p);
            rc = io_uring_queue_init_params(entries, &l->ring, &p);
        }
        if (rc < 0)
            ST_WARN("io_uring is not available (%s): using epoll", strerror(-rc));
    }
    if (rc < 0) {
        l->ep = calloc(1, sizeof *l->ep);
        rc = l->ep ? st_ep_init(l) : -ENOMEM;
        if (rc < 0) {
            free(l->ep);
            close(l->wake_fd);
            free(l);
            return rc;
        }
        *out = l;
        return 0;
    }
    if ((rc = st_arm_wake(l)) < 0) {
        st_loop_destroy(l);
        return rc;
    }
    *out = l;
    return 0;
}

void st_loop_destroy(st_loop_t *l)
{
    if (!l)
        return;
    if (l->ep) {
        st_ep_fini(l);
        free(l->ep);
    } else {
        io_uring_queue_exit(&l->ring);
    }
    close(l->wake_fd);
    free(l->heap);
    free(l);
}

void st_loop_stop(st_loop_t *l)
{
    l->stop = true;
}

void st_loop_wake(st_loop_t *l)
{
    if (atomic_exchange_explicit(&l->wake_pending, 1, memory_order_seq_cst))
        return;
    uint64_t one = 1;
    ssize_t w = write(l->wake_fd, &one, sizeof one);
    (void)w;
}

void st_loop_set_wake_handler(st_loop_t *l, void (*fn)(void *), void *arg)
{
    l->wake_fn = fn;
    l->wake_arg = arg;
}

int st_loop_add_before_sleep(st_loop_t *l, void (*fn)(void *), void *arg)
{
    if (l->nhooks == (int)(sizeof l->hooks / sizeof l->hooks[0]))
        return -ENOSPC;
    l->hooks[l->nhooks].fn = fn;
    l->hooks[l->nhooks].arg = arg;
    l->nhooks++;
    return 0;
}

void st_loop_wake_done(st_io_t *io, int res)
{
    st_loop_t *l = io->data;
    (void)res;
    /* Clear before running the handler: a wake after this point writes the eventfd again.
     * The exchange is a full barrier: the handler's reads (a ring's tail) must not move
     * above the clear, or a sender could see the flag still set after our read missed its
     * message, and neither side would wake the other. */
    atomic_exchange_explicit(&l->wake_pending, 0, memory_order_seq_cst);
    if (!l->ep && (!l->stop || l->wake_fn))
        st_arm_wake(l);
    if (l->ep)
        st_ep_drain_files(l);
    if (l->wake_fn)
        l->wake_fn(l->wake_arg);
}

void st_loop_times(const st_loop_t *l, int64_t *busy_ns, int64_t *total_ns)
{
    *busy_ns = l->busy_ns;
    *total_ns = st_mono_ns() - l->start_ns;
}

uint64_t st_loop_slow_tasks(const st_loop_t *l)
{
    return l->slow;
}

const int64_t st_loop_iter_bounds_ns[ST_LOOP_ITER_BUCKETS] = {
    10000,   25000,    50000,    100000,   250000,    500000,    1000000,   2500000,
    5000000, 10000000, 25000000, 50000000, 100000000, 250000000, 500000000, 1000000000,
};

void st_note_iter(st_loop_t *l, int64_t now)
{
    int64_t ns = now - l->woke_ns;
    int i = 0;
    /* Most iterations are short: the scan stops in the first few buckets. */
    while (i < ST_LOOP_ITER_BUCKETS && ns > st_loop_iter_bounds_ns[i])
        i++;
    l->iter[i]++;
    l->iter_sum_ns += ns;
}

void st_loop_iter_hist(const st_loop_t *l, uint64_t *counts, int64_t *sum_ns)
{
    memcpy(counts, l->iter, sizeof l->iter);
    *sum_ns = l->iter_sum_ns;
}

/* ---- timers: binary min-heap ---- */

static void st_heap_swap(st_loop_t *l, int a, int b)
{
    st_timer_t *t = l->heap[a];
    l->heap[a] = l->heap[b];
    l->heap[b] = t;
    l->heap[a]->heap_index = a;
    l->heap[b]->heap_index = b;
}

static void st_heap_up(st_loop_t *l, int i)
{
    while (i > 0) {
        int p = (i - 1) / 2;
        if (l->heap[p]->due_ns <= l->heap[i]->due_ns)
            break;
        st_heap_swap(l, i, p);
        i = p;
    }
}

static void st_heap_down(st_loop_t *l, int i)
{
    for (;;) {
        int c = 2 * i + 1, m = i;
        if (c < l->heap_len && l->heap[c]->due_ns < l->heap[m]->due_ns)
            m = c;
        if (c + 1 < l->heap_len && l->heap[c + 1]->due_ns < l->heap[m]->due_ns)
            m = c + 1;
        if (m == i)
            return;
        st_heap_swap(l, i, m);
        i = m;
    }
}

void st_timer_init(st_timer_t *t, st_timer_cb_t cb, void *data)
{
    t->cb = cb;
    t->data = data;
    t->due_ns = 0;
    t->heap_index = -1;
}

void st_loop_timer_stop(st_loop_t *l, st_timer_t *t)
{
    int i = t->heap_index;
    if (i < 0)
        return;
    ST_ASSERT(l->heap[i] == t);
    l->heap_len--;
    if (i != l->heap_len) {
        l->heap[i] = l->heap[l->heap_len];
        l->heap[i]->heap_index = i;
        st_heap_down(l, i);
        st_heap_up(l, i);
    }
    t->heap_index = -1;
}

void st_loop_timer_start_ns(st_loop_t *l, st_timer_t *t, int64_t after_ns)
{
    st_loop_timer_stop(l, t);
    if (l->heap_len == l->heap_cap) {
        int cap = l->heap_cap ? l->heap_cap * 2 : 64;
        st_timer_t **h = realloc(l->heap, (size_t)cap * sizeof *h);
        ST_ASSERT(h != NULL);
        l->heap = h;
        l->heap_cap = cap;
    }
    t->due_ns = st_mono_ns() + (after_ns > 0 ? after_ns : 0);
    t->heap_index = l->heap_len;
    l->heap[l->heap_len++] = t;
    st_heap_up(l, t->heap_index);
}

void st_loop_timer_start(st_loop_t *l, st_timer_t *t, int64_t after_ms)
{
    st_loop_timer_start_ns(l, t, after_ms * 1000000);
}

/* ---- deferred tasks ---- */

void st_task_init(st_task_t *t, st_task_cb_t cb, void *data)
{
    t->cb = cb;
    t->data = data;
    t->next = NULL;
    t->queued = false;
}

void st_loop_defer(st_loop_t *l, st_task_t *t)
{
    if (t->queued)
        return;
    t->queued = true;
    t->next = NULL;
    if (l->task_tail)
        l->task_tail->next = t;
    else
        l->task_head = t;
    l->task_tail = t;
}

/* ---- operations ---- */

#define ST_PREP(l, io, prep, epop)                                                                 \
    do {                                                                                           \
        if ((l)->ep) {                                                                             \
            epop;                                                                                  \
            return st_ep_submit(l, io);                                                            \
        }                                                                                          \
        struct io_uring_sqe *sqe = st_sqe(l);                                                      \
        if (!sqe)                                                                                  \
            return -EBUSY;                                                                         \
        prep;                                                                                      \
        io_uring_sqe_set_data(sqe, io);                                                            \
        (l)->inflight++;                                                                           \
        return 0;                                                                                  \
    } while (0)

#define ST_EP(io, kind, f, b, n, o)                                                                \
    ((io)->ep.op = (kind), (io)->ep.fd = (f), (io)->ep.buf = (void *)(b), (io)->ep.len = (n),      \
     (io)->ep.off = (o))

int st_loop_accept(st_loop_t *l, st_io_t *io, int fd)
{
    ST_PREP(l, io, io_uring_prep_accept(sqe, fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK),
            ST_EP(io, ST_EP_ACCEPT, fd, NULL, 0, 0));
}

int st_loop_recv(st_loop_t *l, st_io_t *io, int fd, void *buf, size_t len)
{
    ST_PREP(l, io, io_uring_prep_recv(sqe, fd, buf, len, 0),
            ST_EP(io, ST_EP_RECV, fd, buf, len, 0));
}

int st_loop_send(st_loop_t *l, st_io_t *io, int fd, const void *buf, size_t len)
{
    ST_PREP(l, io, io_uring_prep_send(sqe, fd, buf, len, MSG_NOSIGNAL),
            ST_EP(io, ST_EP_SEND, fd, buf, len, 0));
}

int st_loop_sendmsg(st_loop_t *l, st_io_t *io, int fd, const struct msghdr *msg)
{
    ST_PREP(l, io, io_uring_prep_sendmsg(sqe, fd, msg, MSG_NOSIGNAL),
            (ST_EP(io, ST_EP_SENDMSG, fd, NULL, 0, 0), io->ep.msg = msg));
}

int st_loop_poll(st_loop_t *l, st_io_t *io, int fd, unsigned events)
{
    ST_PREP(l, io, io_uring_prep_poll_add(sqe, fd, events),
            (ST_EP(io, ST_EP_POLL, fd, NULL, 0, 0), io->ep.events = events));
}

int st_loop_read(st_loop_t *l, st_io_t *io, int fd, void *buf, size_t len, uint64_t off)
{
    ST_PREP(l, io, io_uring_prep_read(sqe, fd, buf, (unsigned)len, off),
            ST_EP(io, ST_EP_READ, fd, buf, len, off));
}

int st_loop_write(st_loop_t *l, st_io_t *io, int fd, const void *buf, size_t len, uint64_t off)
{
    ST_PREP(l, io, io_uring_prep_write(sqe, fd, buf, (unsigned)len, off),
            ST_EP(io, ST_EP_WRITE, fd, buf, len, off));
}

int st_loop_fsync(st_loop_t *l, st_io_t *io, int fd, bool datasync)
{
    ST_PREP(l, io, io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0),
            ST_EP(io, datasync ? ST_EP_FDATASYNC : ST_EP_FSYNC, fd, NULL, 0, 0));
}

int st_loop_writeback(st_loop_t *l, st_io_t *io, int fd, uint64_t off, uint64_t len)
{
    ST_PREP(l, io,
            io_uring_prep_sync_file_range(sqe, fd, (unsigned)len, off, SYNC_FILE_RANGE_WRITE),
            ST_EP(io, ST_EP_SYNC_RANGE, fd, NULL, len, off));
}

/* Cancellation completions carry no st_io_t of their own. */
static st_io_t st_cancel_io;

int st_loop_cancel(st_loop_t *l, st_io_t *io)
{
    if (l->ep)
        return st_ep_cancel(l, io);
    ST_PREP(l, &st_cancel_io, io_uring_prep_cancel(sqe, io, 0), (void)0);
}

/* ---- the loop ---- */

void st_note_slow(st_loop_t *l, int64_t t0)
{
    if (st_mono_ns() - t0 > ST_SLOW_CB_NS)
        l->slow++;
}

static void st_run_timers(st_loop_t *l)
{
    int64_t now = st_mono_ns();
    while (l->heap_len > 0 && l->heap[0]->due_ns <= now) {
        st_timer_t *t = l->heap[0];
        st_loop_timer_stop(l, t);
        int64_t t0 = st_mono_ns();
        t->cb(t);
        st_note_slow(l, t0);
    }
}

static void st_run_tasks(st_loop_t *l)
{
    /* Run only what was queued before we started, so a task that re-queues itself yields. */
    st_task_t *t = l->task_head, *last = l->task_tail;
    l->task_head = l->task_tail = NULL;
    while (t) {
        st_task_t *next = t->next;
        t->queued = false;
        t->next = NULL;
        int64_t t0 = st_mono_ns();
        t->cb(t);
        st_note_slow(l, t0);
        if (t == last)
            break;
        t = next;
    }
}

int st_loop_run(st_loop_t *l)
{
    st_cur_loop = l;
    /* The first iteration's span starts now; later ones when their wait returns. t0 is the
     * clock read that ended the previous completions (the same moment). */
    int64_t t0 = st_mono_ns();
    l->woke_ns = t0;
    while (!l->stop) {
        st_run_timers(l);
        st_run_tasks(l);
        for (int i = 0; i < l->nhooks; i++)
            l->hooks[i].fn(l->hooks[i].arg);
        if (l->stop)
            break;
        int64_t t1 = st_mono_ns();
        l->busy_ns += t1 - t0;
        st_note_iter(l, t1);

        if (l->ep) {
            int64_t wait = -1;
            if (l->task_head)
                wait = 0;
            else if (l->heap_len > 0)
                wait =
                    l->heap[0]->due_ns - st_mono_ns() > 0 ? l->heap[0]->due_ns - st_mono_ns() : 0;
            int rc = st_ep_wait(l, wait); /* sets woke_ns, runs and counts completions */
            if (rc < 0) {
                ST_ERROR("epoll wait failed: %s", strerror(-rc));
                st_cur_loop = NULL;
                return rc;
            }
            t0 = st_mono_ns();
            continue;
        }
        struct __kernel_timespec ts, *tsp = NULL;
        if (l->task_head) {
            ts.tv_sec = 0;
            ts.tv_nsec = 0;
            tsp = &ts;
        } else if (l->heap_len > 0) {
            int64_t wait = l->heap[0]->due_ns - st_mono_ns();
            if (wait < 0)
                wait = 0;
            ts.tv_sec = wait / 1000000000;
            ts.tv_nsec = wait % 1000000000;
            tsp = &ts;
        }
        struct io_uring_cqe *cqe;
        int rc = io_uring_submit_and_wait_timeout(&l->ring, &cqe, 1, tsp, NULL);
        if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            ST_ERROR("io_uring wait failed: %s", strerror(-rc));
            st_cur_loop = NULL;
            return rc;
        }
        t0 = st_mono_ns();
        l->woke_ns = t0;
        unsigned head, n = 0;
        io_uring_for_each_cqe(&l->ring, head, cqe)
        {
            n++;
            st_io_t *io = io_uring_cqe_get_data(cqe);
            int res = cqe->res;
            l->inflight--;
            if (io && io->cb) {
                int64_t c0 = st_mono_ns();
                io->cb(io, res);
                st_note_slow(l, c0);
            }
        }
        io_uring_cq_advance(&l->ring, n);
        int64_t t2 = st_mono_ns();
        l->busy_ns += t2 - t0;
        t0 = t2;
    }
    st_cur_loop = NULL;
    l->stop = false; /* a stopped loop may run again (tests drive a loop in steps) */
    return 0;
}
