/*
 * arena.h — bump allocator for memory that dies together (one request, one response).
 *
 * Allocations come from chunks; st_arena_reset() frees all but the first chunk's worth, and
 * st_arena_fini() frees everything. Owned by one thread at a time.
 *
 *   chunk -> [hdr | used ........ | free ] -> next chunk ...
 */
#ifndef ST_BASE_ARENA_H
#define ST_BASE_ARENA_H

#include <stddef.h>

typedef struct st_arena_chunk st_arena_chunk_t;

typedef struct st_arena {
    st_arena_chunk_t *head; /* newest chunk first */
    size_t chunk_size;      /* default size of a new chunk */
    size_t total;           /* bytes handed out since init/reset */
} st_arena_t;

void st_arena_init(st_arena_t *a, size_t chunk_size);
void st_arena_fini(st_arena_t *a);
/* Frees every chunk; the arena is empty and reusable. */
void st_arena_reset(st_arena_t *a);
/* Returns 16-byte aligned memory, or NULL when out of memory. */
void *st_arena_alloc(st_arena_t *a, size_t n);
/* Like st_arena_alloc, zeroed. */
void *st_arena_zalloc(st_arena_t *a, size_t n);
/* Copies n bytes (and a terminating NUL) into the arena. */
char *st_arena_strndup(st_arena_t *a, const char *s, size_t n);

#endif
