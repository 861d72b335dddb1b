/*
 * transport.h — how a connection's bytes reach the socket: plain TCP, or TLS (tls.h).
 *
 * net/conn.c never calls recv, sendmsg or sendfile on a descriptor: it asks the connection's
 * transport. A transport is a table of operations over one connected socket, in the loop's
 * completion style (io/loop.h): an operation that takes an st_io_t returns 0 once started and
 * later calls io->cb(io, res) on the loop's thread, or returns -errno and calls nothing.
 *
 *   accept -> transport made (st_net_port_t.transport, plain TCP by default)
 *          -> handshake (NULL for plain TCP: none) -> recv / send / sendfile ... -> shutdown
 *          -> close (once nothing is in flight)
 *
 * File bytes (the records of a Fetch answer, net/out.h): where can_sendfile(t) holds,
 * conn.c hands them to sendfile, which copies from the page cache to the socket without
 * user space (plain TCP; kernel TLS would keep it). Where it does not (TLS in user space),
 * conn.c reads the file into a buffer of its own and sends that through send like any other
 * memory: the transport never sees a file.
 *
 * Who calls: the connection's shard thread only. At most one recv and one send-direction
 * operation (send or wait_writable) are in flight per transport, plus the handshake before
 * either. The transport owns its descriptor from creation: close releases it.
 */
#ifndef ST_NET_TRANSPORT_H
#define ST_NET_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "io/loop.h"

typedef struct st_transport st_transport_t;

typedef struct st_transport_ops {
    const char *name; /* "tcp", for logs */
    /* Starts the transport's handshake; io->cb gets 0 once done or -errno. NULL: none. */
    int (*handshake)(st_transport_t *t, st_io_t *io);
    /* Starts receiving up to len bytes into buf; io->cb gets the bytes (0: the peer closed). */
    int (*recv)(st_transport_t *t, st_io_t *io, void *buf, size_t len);
    /* Starts a gathered send of msg's iovecs; io->cb gets the bytes taken (possibly fewer). */
    int (*send)(st_transport_t *t, st_io_t *io, const struct msghdr *msg);
    /* Whether file ranges may go through sendfile below; asked before each file range. */
    bool (*can_sendfile)(const st_transport_t *t);
    /* Without waiting, sends up to len bytes of file fd from offset off: the bytes sent, 0 if
     * the file ends before off, -EAGAIN when the socket is full, or -errno. */
    int64_t (*sendfile)(st_transport_t *t, int fd, int64_t off, size_t len);
    /* Starts a wait until the socket can take bytes again (after -EAGAIN); io->cb gets >= 0
     * or -errno. */
    int (*wait_writable)(st_transport_t *t, st_io_t *io);
    /* Asks for an operation in flight to end early; its cb still runs. */
    int (*cancel)(st_transport_t *t, st_io_t *io);
    /* Ends both directions now: operations in flight finish with an error or 0. */
    void (*shutdown)(st_transport_t *t);
    /* Releases the descriptor and frees t. Nothing may be in flight. */
    void (*close)(st_transport_t *t);
    /* Who the peer proved to be during the handshake (TLS: the client certificate's mapped
     * subject, "CN=alice,O=Acme"), without "User:"; NULL: nobody (anonymous). NULL op: never. */
    const char *(*principal)(const st_transport_t *t);
} st_transport_ops_t;

/* The part every transport starts with; an implementation embeds it first. */
struct st_transport {
    const st_transport_ops_t *ops;
    st_loop_t *loop;
    int fd; /* the connected socket (peer address, socket options) */
};

/* Makes a transport for a connected socket; the net calls one for each accepted socket, with
 * the port's make_arg (conn.h; TLS: the listener's st_tls_server_t). On failure the
 * descriptor is still the caller's. */
typedef int (*st_transport_make_t)(void *arg, st_loop_t *loop, int fd, st_transport_t **out);

/* Plain TCP: the loop's recv and sendmsg, sendfile(2), no handshake. */
extern const st_transport_ops_t st_transport_tcp_ops;
int st_transport_tcp_new(st_loop_t *loop, int fd, st_transport_t **out);
/* Fills a caller-allocated transport with the TCP operations (for a transport that wraps
 * TCP and overrides a few of them, as the tests' sendfile-less one does). */
void st_transport_tcp_init(st_transport_t *t, st_loop_t *loop, int fd);

#endif
