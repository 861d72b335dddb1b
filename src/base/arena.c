/* arena.c — chunked bump allocator. */
#include "base/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct st_arena_chunk {
    st_arena_chunk_t *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    _Alignas(16) unsigned char data[];
};

void st_arena_init(st_arena_t *a, size_t chunk_size)
{
    a->head = NULL;
    a->chunk_size = chunk_size ? chunk_size : 16384;
    a->total = 0;
}

void st_arena_reset(st_arena_t *a)
{
    st_arena_chunk_t *c = a->head;
    while (c) {
        st_arena_chunk_t *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}

void st_arena_fini(st_arena_t *a)
{
    st_arena_reset(a);
}

void *st_arena_alloc(st_arena_t *a, size_t n)
{
    if (n > SIZE_MAX - 64)
        return NULL;
    size_t need = (n + 15) & ~(size_t)15;
    if (need == 0)
        need = 16;
    st_arena_chunk_t *c = a->head;
    if (!c || c->size - c->used < need) {
        size_t size = need > a->chunk_size ? need : a->chunk_size;
        c = malloc(sizeof *c + size);
        if (!c)
            return NULL;
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += need;
    a->total += need;
    return p;
}

void *st_arena_zalloc(st_arena_t *a, size_t n)
{
    void *p = st_arena_alloc(a, n);
    if (p)
        memset(p, 0, n);
    return p;
}

char *st_arena_strndup(st_arena_t *a, const char *s, size_t n)
{
    char *p = st_arena_alloc(a, n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}
