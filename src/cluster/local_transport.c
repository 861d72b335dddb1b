/* local_transport.c — the transport of a quorum with one voter: no socket (local_transport.h). */
#include "cluster/local_transport.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
    struct raft_uv_transport *t;
    uv_timer_t close_timer; /* the close callback runs from the loop, never inside close */
    raft_uv_transport_close_cb close_cb;
    bool closed; /* the timer's close completed */
    bool fini;   /* st_local_transport_fini ran: the timer's close frees this */
} local_t;

static int lt_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    (void)t;
    (void)id;
    (void)address;
    return 0;
}

static int lt_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    (void)t;
    (void)cb; /* nobody ever connects */
    return 0;
}

static int lt_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
                      const char *address, raft_uv_connect_cb cb)
{
    (void)req;
    (void)cb;
    snprintf(t->errmsg, sizeof t->errmsg, "a local quorum has no peer (%llu at %s)",
             (unsigned long long)id, address ? address : "?");
    return RAFT_NOCONNECTION;
}

static void timer_closed(uv_handle_t *h)
{
    local_t *l = h->data;
    l->closed = true;
    if (l->fini)
        free(l);
}

static void close_fire(uv_timer_t *h)
{
    local_t *l = h->data;
    raft_uv_transport_close_cb cb = l->close_cb;
    l->close_cb = NULL;
    uv_close((uv_handle_t *)&l->close_timer, timer_closed);
    if (cb)
        cb(l->t);
}

static void lt_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    local_t *l = t->impl;
    l->close_cb = cb;
    uv_timer_start(&l->close_timer, close_fire, 0, 0);
}

int st_local_transport_init(struct raft_uv_transport *t, uv_loop_t *loop)
{
    local_t *l = calloc(1, sizeof *l);
    if (!l)
        return RAFT_NOMEM;
    l->t = t;
    uv_timer_init(loop, &l->close_timer);
    l->close_timer.data = l;
    t->version = 1;
    t->impl = l;
    t->errmsg[0] = 0;
    t->init = lt_init;
    t->listen = lt_listen;
    t->connect = lt_connect;
    t->close = lt_close;
    return 0;
}

void st_local_transport_fini(struct raft_uv_transport *t)
{
    local_t *l = t->impl;
    if (!l)
        return;
    t->impl = NULL;
    if (l->closed) {
        free(l);
        return;
    }
    l->fini = true; /* freed once the loop has closed the timer */
    if (!uv_is_closing((uv_handle_t *)&l->close_timer))
        uv_close((uv_handle_t *)&l->close_timer, timer_closed);
}
