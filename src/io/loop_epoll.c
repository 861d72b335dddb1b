/*
 * loop_epoll.c — the event loop over epoll, for where io_uring is unavailable.
 *
 * Sockets: an operation waits in its descriptor's slot (one reading side: accept, recv,
 * POLLIN; one writing side: send, sendmsg, POLLOUT); the descriptor is in the epoll set
 * (level-triggered) with the events its slots need. When epoll reports it ready the call is
 * made non-blocking; EAGAIN keeps it waiting, anything else completes it.
 * Files: reads, writes and syncs go to one helper thread, so none blocks the loop; the thread
 * queues each result under a mutex and wakes the loop through its eventfd.
 * Cancels complete the operation with -ECANCELED on the next iteration, never inline.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "io/loop_impl.h"

static void st_ep_push(st_io_t **head, st_io_t **tail, st_io_t *io)
{
    io->ep.next = NULL;
    if (*tail)
        (*tail)->ep.next = io;
    else
        *head = io;
    *tail = io;
}

static void *st_ep_worker(void *arg)
{
    st_loop_t *l = arg;
    st_ep_t *ep = l->ep;
    pthread_mutex_lock(&ep->mu);
    for (;;) {
        while (!ep->jobs_head && !ep->worker_stop)
            pthread_cond_wait(&ep->cv, &ep->mu);
        if (!ep->jobs_head)
            break;
        st_io_t *io = ep->jobs_head;
        ep->jobs_head = io->ep.next;
        if (!ep->jobs_head)
            ep->jobs_tail = NULL;
        pthread_mutex_unlock(&ep->mu);
        ssize_t r;
        switch (io->ep.op) {
        case ST_EP_READ:
            r = pread(io->ep.fd, io->ep.buf, io->ep.len, (off_t)io->ep.off);
            break;
        case ST_EP_WRITE:
            r = pwrite(io->ep.fd, io->ep.buf, io->ep.len, (off_t)io->ep.off);
            break;
        case ST_EP_FSYNC:
            r = fsync(io->ep.fd);
            break;
        case ST_EP_SYNC_RANGE:
            r = sync_file_range(io->ep.fd, (off_t)io->ep.off, (off_t)io->ep.len,
                                SYNC_FILE_RANGE_WRITE);
            break;
        default:
            r = fdatasync(io->ep.fd);
            break;
        }
        io->ep.res = r < 0 ? -errno : (int)r;
        pthread_mutex_lock(&ep->mu);
        st_ep_push(&ep->fdone_head, &ep->fdone_tail, io);
        pthread_mutex_unlock(&ep->mu);
        st_loop_wake(l);
        pthread_mutex_lock(&ep->mu);
    }
    pthread_mutex_unlock(&ep->mu);
    return NULL;
}

int st_ep_init(st_loop_t *l)
{
    st_ep_t *ep = l->ep;
    ep->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (ep->epfd < 0)
        return -errno;
    fcntl(l->wake_fd, F_SETFL, fcntl(l->wake_fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}; /* NULL: the wake-up */
    if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, l->wake_fd, &ev) < 0) {
        int rc = -errno;
        close(ep->epfd);
        return rc;
    }
    pthread_mutex_init(&ep->mu, NULL);
    pthread_cond_init(&ep->cv, NULL);
    int rc = pthread_create(&ep->worker, NULL, st_ep_worker, l);
    if (rc) {
        close(ep->epfd);
        return -rc;
    }
    return 0;
}

void st_ep_fini(st_loop_t *l)
{
    st_ep_t *ep = l->ep;
    pthread_mutex_lock(&ep->mu);
    ep->worker_stop = true;
    pthread_cond_signal(&ep->cv);
    pthread_mutex_unlock(&ep->mu);
    pthread_join(ep->worker, NULL);
    pthread_mutex_destroy(&ep->mu);
    pthread_cond_destroy(&ep->cv);
    close(ep->epfd);
    free(ep->fds);
}

/* Makes the epoll set match what fd's slots wait for. */
static void st_ep_update(st_ep_t *ep, int fd)
{
    st_ep_fd_t *f = &ep->fds[fd];
    uint32_t want = 0;
    if (f->in)
        want |= f->in->ep.op == ST_EP_POLL ? (f->in->ep.events & (POLLIN | POLLPRI)) : EPOLLIN;
    if (f->out)
        want |= EPOLLOUT;
    if (want == f->registered)
        return;
    struct epoll_event ev = {.events = want, .data.u64 = (uint64_t)fd + 1};
    if (!want) {
        epoll_ctl(ep->epfd, EPOLL_CTL_DEL, fd, &ev);
    } else if (epoll_ctl(ep->epfd, f->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) < 0) {
        /* The descriptor number was closed and reused since: start over. */
        if (errno == ENOENT)
            epoll_ctl(ep->epfd, EPOLL_CTL_ADD, fd, &ev);
        else if (errno == EEXIST)
            epoll_ctl(ep->epfd, EPOLL_CTL_MOD, fd, &ev);
    }
    f->registered = want;
}

int st_ep_submit(st_loop_t *l, st_io_t *io)
{
    st_ep_t *ep = l->ep;
    int op = io->ep.op;
    if (op >= ST_EP_READ) {
        pthread_mutex_lock(&ep->mu);
        st_ep_push(&ep->jobs_head, &ep->jobs_tail, io);
        pthread_cond_signal(&ep->cv);
        pthread_mutex_unlock(&ep->mu);
        l->inflight++;
        return 0;
    }
    int fd = io->ep.fd;
    if (fd < 0)
        return -EBADF;
    if (fd >= ep->nfds) {
        int n = ep->nfds ? ep->nfds : 64;
        while (n <= fd)
            n *= 2;
        st_ep_fd_t *f = realloc(ep->fds, (size_t)n * sizeof *f);
        if (!f)
            return -ENOMEM;
        memset(f + ep->nfds, 0, (size_t)(n - ep->nfds) * sizeof *f);
        ep->fds = f;
        ep->nfds = n;
    }
    st_ep_fd_t *f = &ep->fds[fd];
    bool writing =
        op == ST_EP_SEND || op == ST_EP_SENDMSG || (op == ST_EP_POLL && (io->ep.events & POLLOUT));
    st_io_t **slot = writing ? &f->out : &f->in;
    if (*slot)
        return -EBUSY;
    *slot = io;
    st_ep_update(ep, fd);
    l->inflight++;
    return 0;
}

int st_ep_cancel(st_loop_t *l, st_io_t *io)
{
    st_ep_t *ep = l->ep;
    int fd = io->ep.fd;
    if (io->ep.op >= ST_EP_READ || fd < 0 || fd >= ep->nfds)
        return 0; /* file operations run to the end; their cb still comes */
    st_ep_fd_t *f = &ep->fds[fd];
    st_io_t **slot = f->in == io ? &f->in : f->out == io ? &f->out : NULL;
    if (!slot)
        return -ENOENT;
    *slot = NULL;
    st_ep_update(ep, fd);
    io->ep.res = -ECANCELED;
    st_ep_push(&ep->done_head, &ep->done_tail, io);
    return 0;
}

static void st_ep_complete(st_loop_t *l, st_io_t *io, int res)
{
    l->inflight--;
    int64_t c0 = st_mono_ns();
    io->cb(io, res);
    st_note_slow(l, c0);
}

/* Tries the waiting operation of one side; returns true when it completed. */
static bool st_ep_try(st_loop_t *l, st_io_t *io, uint32_t revents)
{
    ssize_t r;
    switch (io->ep.op) {
    case ST_EP_ACCEPT:
        r = accept4(io->ep.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        break;
    case ST_EP_RECV:
        r = recv(io->ep.fd, io->ep.buf, io->ep.len, MSG_DONTWAIT);
        break;
    case ST_EP_SEND:
        r = send(io->ep.fd, io->ep.buf, io->ep.len, MSG_DONTWAIT | MSG_NOSIGNAL);
        break;
    case ST_EP_SENDMSG:
        r = sendmsg(io->ep.fd, io->ep.msg, MSG_DONTWAIT | MSG_NOSIGNAL);
        break;
    default: /* ST_EP_POLL */
        st_ep_complete(l, io, (int)revents);
        return true;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return false;
    st_ep_complete(l, io, r < 0 ? -errno : (int)r);
    return true;
}

void st_ep_drain_files(st_loop_t *l)
{
    st_ep_t *ep = l->ep;
    pthread_mutex_lock(&ep->mu);
    st_io_t *io = ep->fdone_head;
    ep->fdone_head = ep->fdone_tail = NULL;
    pthread_mutex_unlock(&ep->mu);
    while (io) {
        st_io_t *next = io->ep.next;
        st_ep_complete(l, io, io->ep.res);
        io = next;
    }
}

int st_ep_wait(st_loop_t *l, int64_t timeout_ns)
{
    st_ep_t *ep = l->ep;
    if (ep->done_head)
        timeout_ns = 0;
    int timeout_ms = timeout_ns < 0 ? -1 : (int)((timeout_ns + 999999) / 1000000);
    struct epoll_event evs[64];
    int n = epoll_wait(ep->epfd, evs, 64, timeout_ms);
    if (n < 0 && errno != EINTR)
        return -errno;
    int64_t t0 = st_mono_ns();
    l->woke_ns = t0;
    /* Cancelled operations first: their descriptors may already be gone. */
    st_io_t *io = ep->done_head;
    ep->done_head = ep->done_tail = NULL;
    while (io) {
        st_io_t *next = io->ep.next;
        st_ep_complete(l, io, io->ep.res);
        io = next;
    }
    for (int i = 0; i < n; i++) {
        if (!evs[i].data.u64) {
            uint64_t v;
            ssize_t r = read(l->wake_fd, &v, sizeof v);
            (void)r;
            st_loop_wake_done(&l->wake_io, 0);
            continue;
        }
        int fd = (int)(evs[i].data.u64 - 1);
        if (fd >= ep->nfds)
            continue;
        uint32_t re = evs[i].events;
        st_ep_fd_t *f = &ep->fds[fd];
        if (f->in && (re & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLPRI))) {
            st_io_t *in = f->in;
            f->in = NULL;
            if (!st_ep_try(l, in, re))
                f->in = in;
        }
        f = &ep->fds[fd]; /* a callback may have grown the table */
        if (f->out && (re & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
            st_io_t *out = f->out;
            f->out = NULL;
            if (!st_ep_try(l, out, re))
                f->out = out;
        }
        if (fd < ep->nfds)
            st_ep_update(ep, fd);
    }
    l->busy_ns += st_mono_ns() - t0;
    return 0;
}
