/*
 * The SPSC ring under ThreadSanitizer: several producer/consumer pairs move millions of
 * sequence numbers; the consumer checks each arrives once, in order. TSan reports any race
 * on the slots or indexes. Prints a closing line; exits non-zero on failure.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/ring.h"

#define N_MSGS  2000000u
#define N_PAIRS 2

static st_ring_t rings[N_PAIRS];
static int failures;

static void *producer(void *arg)
{
    st_ring_t *r = arg;
    for (uintptr_t i = 1; i <= N_MSGS; i++)
        while (!st_ring_push(r, (void *)i))
            sched_yield();
    return NULL;
}

static void *consumer(void *arg)
{
    st_ring_t *r = arg;
    uintptr_t expect = 1;
    while (expect <= N_MSGS) {
        void *m = st_ring_pop(r);
        if (!m) {
            sched_yield();
            continue;
        }
        if ((uintptr_t)m != expect) {
            fprintf(stderr, "ring: got %lu, expected %lu\n", (unsigned long)(uintptr_t)m,
                    (unsigned long)expect);
            __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
            return NULL;
        }
        expect++;
    }
    if (st_ring_pop(r) != NULL)
        __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(void)
{
    pthread_t th[2 * N_PAIRS];
    for (int i = 0; i < N_PAIRS; i++) {
        if (st_ring_init(&rings[i], 64 << i))
            return 1;
        pthread_create(&th[2 * i], NULL, producer, &rings[i]);
        pthread_create(&th[2 * i + 1], NULL, consumer, &rings[i]);
    }
    for (int i = 0; i < 2 * N_PAIRS; i++)
        pthread_join(th[i], NULL);
    /* Full and empty edges, single-threaded. */
    st_ring_t r;
    st_ring_init(&r, 3);
    for (uintptr_t i = 1; i <= 4; i++)
        if (!st_ring_push(&r, (void *)i))
            failures++;
    if (st_ring_push(&r, (void *)5))
        failures++;
    if (st_ring_size(&r) != 4)
        failures++;
    for (uintptr_t i = 1; i <= 4; i++)
        if (st_ring_pop(&r) != (void *)i)
            failures++;
    if (st_ring_pop(&r) != NULL)
        failures++;
    st_ring_fini(&r);
    for (int i = 0; i < N_PAIRS; i++)
        st_ring_fini(&rings[i]);
    printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
    return failures ? 1 : 0;
}
