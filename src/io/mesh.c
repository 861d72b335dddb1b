/* mesh.c — per-pair SPSC rings with eventfd wake-ups between shard loops. */
#include "io/mesh.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/assert.h"

typedef struct {
    st_mesh_t *mesh;
    int id;
    st_loop_t *loop;
    st_msg_t **ovf_head; /* [nshards] overflow per destination */
    st_msg_t **ovf_tail;
    st_msg_t *self_head, *self_tail; /* messages to itself */
    st_task_t self_task;
    _Atomic uint64_t sent, received;
} st_mesh_shard_t;

struct st_mesh {
    int n;
    st_ring_t *rings; /* rings[from * n + to] */
    st_mesh_shard_t *shards;
};

static st_ring_t *st_pair(st_mesh_t *m, int from, int to)
{
    return &m->rings[from * m->n + to];
}

int st_mesh_create(st_mesh_t **out, int nshards, size_t ring_cap)
{
    st_mesh_t *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->n = nshards;
    m->rings = calloc((size_t)nshards * (size_t)nshards, sizeof *m->rings);
    m->shards = calloc((size_t)nshards, sizeof *m->shards);
    if (!m->rings || !m->shards)
        goto oom;
    for (int i = 0; i < nshards * nshards; i++)
        if (st_ring_init(&m->rings[i], ring_cap))
            goto oom;
    for (int i = 0; i < nshards; i++) {
        st_mesh_shard_t *s = &m->shards[i];
        s->mesh = m;
        s->id = i;
        s->ovf_head = calloc((size_t)nshards, sizeof *s->ovf_head);
        s->ovf_tail = calloc((size_t)nshards, sizeof *s->ovf_tail);
        if (!s->ovf_head || !s->ovf_tail)
            goto oom;
    }
    *out = m;
    return 0;
oom:
    st_mesh_destroy(m);
    return -ENOMEM;
}

void st_mesh_destroy(st_mesh_t *m)
{
    if (!m)
        return;
    if (m->rings)
        for (int i = 0; i < m->n * m->n; i++)
            st_ring_fini(&m->rings[i]);
    if (m->shards)
        for (int i = 0; i < m->n; i++) {
            free(m->shards[i].ovf_head);
            free(m->shards[i].ovf_tail);
        }
    free(m->rings);
    free(m->shards);
    free(m);
}

int st_mesh_nshards(const st_mesh_t *m)
{
    return m->n;
}

static void st_mesh_drain(void *arg);

void st_mesh_drain_now(st_mesh_t *m, int id)
{
    st_mesh_drain(&m->shards[id]);
}

static void st_mesh_drain(void *arg)
{
    st_mesh_shard_t *s = arg;
    st_mesh_t *m = s->mesh;
    for (int from = 0; from < m->n; from++) {
        st_ring_t *r = st_pair(m, from, s->id);
        st_msg_t *msg;
        while ((msg = st_ring_pop(r)) != NULL) {
            atomic_fetch_add_explicit(&s->received, 1, memory_order_relaxed);
            msg->fn(msg);
        }
    }
}

static void st_mesh_self(st_task_t *t)
{
    st_mesh_shard_t *s = t->data;
    st_msg_t *msg = s->self_head;
    s->self_head = s->self_tail = NULL;
    while (msg) {
        st_msg_t *next = msg->next;
        msg->next = NULL;
        atomic_fetch_add_explicit(&s->received, 1, memory_order_relaxed);
        msg->fn(msg);
        msg = next;
    }
}

/* Before sleeping, move what overflowed into the rings it could not enter, and wake peers. */
static void st_mesh_flush(void *arg)
{
    st_mesh_shard_t *s = arg;
    st_mesh_t *m = s->mesh;
    for (int to = 0; to < m->n; to++) {
        if (!s->ovf_head[to])
            continue;
        st_ring_t *r = st_pair(m, s->id, to);
        bool moved = false;
        while (s->ovf_head[to]) {
            /* Read the link first: once pushed, the message belongs to the receiver, which
             * may already be reusing it. */
            st_msg_t *msg = s->ovf_head[to], *next = msg->next;
            if (!st_ring_push(r, msg))
                break;
            s->ovf_head[to] = next;
            moved = true;
        }
        if (!s->ovf_head[to])
            s->ovf_tail[to] = NULL;
        if (moved)
            st_loop_wake(m->shards[to].loop);
        if (s->ovf_head[to])
            st_loop_wake(s->loop); /* try again soon rather than sleep on it */
    }
}

int st_mesh_attach(st_mesh_t *m, int id, st_loop_t *loop)
{
    ST_ASSERT(id >= 0 && id < m->n);
    st_mesh_shard_t *s = &m->shards[id];
    s->loop = loop;
    st_task_init(&s->self_task, st_mesh_self, s);
    st_loop_set_wake_handler(loop, st_mesh_drain, s);
    return st_loop_add_before_sleep(loop, st_mesh_flush, s);
}

void st_mesh_send(st_mesh_t *m, int from, int to, st_msg_t *msg, st_msg_fn_t fn)
{
    st_mesh_shard_t *s = &m->shards[from];
    msg->fn = fn;
    msg->from = from;
    msg->next = NULL;
    atomic_fetch_add_explicit(&s->sent, 1, memory_order_relaxed);
    if (from == to) {
        if (s->self_tail)
            s->self_tail->next = msg;
        else
            s->self_head = msg;
        s->self_tail = msg;
        st_loop_defer(s->loop, &s->self_task);
        return;
    }
    if (!s->ovf_head[to] && st_ring_push(st_pair(m, from, to), msg)) {
        st_loop_wake(m->shards[to].loop);
        return;
    }
    if (s->ovf_tail[to])
        s->ovf_tail[to]->next = msg;
    else
        s->ovf_head[to] = msg;
    s->ovf_tail[to] = msg;
}

uint64_t st_mesh_sent(const st_mesh_t *m, int shard)
{
    return atomic_load_explicit(&m->shards[shard].sent, memory_order_relaxed);
}

uint64_t st_mesh_received(const st_mesh_t *m, int shard)
{
    return atomic_load_explicit(&m->shards[shard].received, memory_order_relaxed);
}

size_t st_mesh_ring_occupancy(const st_mesh_t *m, int to)
{
    size_t n = 0;
    for (int from = 0; from < m->n; from++)
        n += st_ring_size(&m->rings[from * m->n + to]);
    return n;
}
