/* ring.c — SPSC ring. Self-contained so it can be built alone under ThreadSanitizer. */
#include "io/ring.h"

#include <errno.h>
#include <stdlib.h>

int st_ring_init(st_ring_t *r, size_t cap)
{
    size_t c = 2;
    while (c < cap)
        c <<= 1;
    r->slots = calloc(c, sizeof *r->slots);
    if (!r->slots)
        return -ENOMEM;
    r->mask = c - 1;
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    r->cached_head = 0;
    r->cached_tail = 0;
    return 0;
}

void st_ring_fini(st_ring_t *r)
{
    free(r->slots);
    r->slots = NULL;
}

bool st_ring_push(st_ring_t *r, void *msg)
{
    size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (tail - r->cached_head > r->mask) {
        r->cached_head = atomic_load_explicit(&r->head, memory_order_acquire);
        if (tail - r->cached_head > r->mask)
            return false;
    }
    r->slots[tail & r->mask] = msg;
    atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
    return true;
}

void *st_ring_pop(st_ring_t *r)
{
    size_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (head == r->cached_tail) {
        r->cached_tail = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (head == r->cached_tail)
            return NULL;
    }
    void *msg = r->slots[head & r->mask];
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
    return msg;
}

size_t st_ring_size(const st_ring_t *r)
{
    size_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    size_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    return t - h;
}
