/*
 * tcp.c — plain TCP: listening sockets (conn.h: st_net_listen, st_net_probe_port) and the
 * plain transport (transport.h): the loop's socket operations and sendfile(2).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/conn.h"
#include "net/transport.h"

/* ---- listening sockets ---- */

static int st_sockaddr(const char *host, int port, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (!host || !*host || strcmp(host, "0.0.0.0") == 0)
        sa->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (strcmp(host, "localhost") == 0)
        sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return -EINVAL;
    return 0;
}

int st_net_probe_port(const char *host, int port)
{
    struct sockaddr_in sa;
    int rc = st_sockaddr(host, port, &sa);
    if (rc)
        return rc;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    rc = bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int st_net_listen(const char *host, int port, int *fd_out, int *port_out)
{
    struct sockaddr_in sa;
    int rc = st_sockaddr(host, port, &sa);
    if (rc)
        return rc;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1024) < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    *fd_out = fd;
    if (port_out)
        *port_out = ntohs(sa.sin_port);
    return 0;
}

/* ---- the transport ---- */

static int tcp_recv(st_transport_t *t, st_io_t *io, void *buf, size_t len)
{
    return st_loop_recv(t->loop, io, t->fd, buf, len);
}

static int tcp_send(st_transport_t *t, st_io_t *io, const struct msghdr *msg)
{
    return st_loop_sendmsg(t->loop, io, t->fd, msg);
}

static bool tcp_can_sendfile(const st_transport_t *t)
{
    (void)t;
    return true;
}

static int64_t tcp_sendfile(st_transport_t *t, int fd, int64_t off, size_t len)
{
    off_t o = (off_t)off;
    ssize_t w = sendfile(t->fd, fd, &o, len);
    return w >= 0 ? (int64_t)w : -errno;
}

static int tcp_wait_writable(st_transport_t *t, st_io_t *io)
{
    return st_loop_poll(t->loop, io, t->fd, POLLOUT);
}

static int tcp_cancel(st_transport_t *t, st_io_t *io)
{
    return st_loop_cancel(t->loop, io);
}

static void tcp_shutdown(st_transport_t *t)
{
    shutdown(t->fd, SHUT_RDWR);
}

static void tcp_close(st_transport_t *t)
{
    close(t->fd);
    free(t);
}

const st_transport_ops_t st_transport_tcp_ops = {
    .name = "tcp",
    .handshake = NULL,
    .recv = tcp_recv,
    .send = tcp_send,
    .can_sendfile = tcp_can_sendfile,
    .sendfile = tcp_sendfile,
    .wait_writable = tcp_wait_writable,
    .cancel = tcp_cancel,
    .shutdown = tcp_shutdown,
    .close = tcp_close,
};

void st_transport_tcp_init(st_transport_t *t, st_loop_t *loop, int fd)
{
    t->ops = &st_transport_tcp_ops;
    t->loop = loop;
    t->fd = fd;
}

int st_transport_tcp_new(st_loop_t *loop, int fd, st_transport_t **out)
{
    st_transport_t *t = malloc(sizeof *t);
    if (!t)
        return -ENOMEM;
    st_transport_tcp_init(t, loop, fd);
    *out = t;
    return 0;
}
