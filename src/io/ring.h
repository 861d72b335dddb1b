/*
 * ring.h — bounded single-producer/single-consumer ring of pointers.
 *
 * One ring per ordered pair of shards carries cross-shard messages. Exactly one thread
 * pushes and exactly one thread pops; no locks, only acquire/release on the two indexes.
 *
 *   slots[cap]  (cap a power of two)
 *   head: next slot to pop  (written by the consumer)
 *   tail: next slot to push (written by the producer)
 *   empty: head == tail     full: tail - head == cap
 *
 * Each index sits on its own cache line so the two threads do not false-share.
 */
#ifndef ST_IO_RING_H
#define ST_IO_RING_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct st_ring {
    alignas(64) _Atomic size_t head;
    size_t cached_tail; /* consumer's last view of tail */
    alignas(64) _Atomic size_t tail;
    size_t cached_head; /* producer's last view of head */
    alignas(64) size_t mask;
    void **slots;
} st_ring_t;

/* cap is rounded up to a power of two. Returns 0 or -ENOMEM. */
int st_ring_init(st_ring_t *r, size_t cap);
void st_ring_fini(st_ring_t *r);
/* Producer thread only. Returns false when full. */
bool st_ring_push(st_ring_t *r, void *msg);
/* Consumer thread only. Returns NULL when empty. */
void *st_ring_pop(st_ring_t *r);
/* Approximate occupancy, for metrics; any thread. */
size_t st_ring_size(const st_ring_t *r);

#endif
