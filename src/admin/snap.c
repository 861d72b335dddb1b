/* snap.c — shard snapshots and their lock-free publication slots (protocol in snap.h). */
#include "admin/snap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

st_admin_snap_t *st_admin_snap_new(int shard)
{
    st_admin_snap_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    s->shard = shard;
    st_arena_init(&s->arena, 16384);
    return s;
}

void st_admin_snap_unref(st_admin_snap_t *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (s->md)
        st_md_unref(s->md);
    free(s->parts);
    free(s->groups);
    free(s->goffsets);
    st_arena_fini(&s->arena);
    free(s);
}

static int grow(void **arr, int n, int *cap, size_t elem)
{
    if (n < *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = nc;
    return 0;
}

st_admin_part_t *st_admin_snap_add_part(st_admin_snap_t *s, const char *topic)
{
    if (grow((void **)&s->parts, s->nparts, &s->capparts, sizeof *s->parts))
        return NULL;
    st_admin_part_t *p = &s->parts[s->nparts];
    memset(p, 0, sizeof *p);
    p->topic = st_arena_strndup(&s->arena, topic, strlen(topic));
    if (!p->topic)
        return NULL;
    p->shard = s->shard;
    s->nparts++;
    return p;
}

int st_admin_groups_add(st_admin_groups_t *g, const char *group, const char *state, int32_t members)
{
    if (grow((void **)&g->groups, g->ngroups, &g->capgroups, sizeof *g->groups))
        return g->groups_oom = true, -ENOMEM;
    st_admin_group_t *r = &g->groups[g->ngroups];
    r->group = st_arena_strndup(&g->arena, group, strlen(group));
    r->state = st_arena_strndup(&g->arena, state, strlen(state));
    if (!r->group || !r->state)
        return g->groups_oom = true, -ENOMEM;
    r->members = members;
    r->shard = g->shard;
    g->ngroups++;
    return 0;
}

int st_admin_groups_add_offset(st_admin_groups_t *g, const char *group, const char *topic,
                               int32_t partition, int64_t committed)
{
    if (grow((void **)&g->goffsets, g->ngoffsets, &g->capgoffsets, sizeof *g->goffsets))
        return g->groups_oom = true, -ENOMEM;
    st_admin_goffset_t *r = &g->goffsets[g->ngoffsets];
    r->group = st_arena_strndup(&g->arena, group, strlen(group));
    r->topic = st_arena_strndup(&g->arena, topic, strlen(topic));
    if (!r->group || !r->topic)
        return g->groups_oom = true, -ENOMEM;
    r->partition = partition;
    r->committed = committed;
    g->ngoffsets++;
    return 0;
}

/* Unreferences every retired snapshot once no reader is between loading the pointer and
 * taking its reference. */
static void reclaim(st_admin_slot_t *slot)
{
    if (!slot->retired || atomic_load(&slot->readers) != 0)
        return;
    st_admin_snap_t *r = slot->retired;
    slot->retired = NULL;
    while (r) {
        st_admin_snap_t *next = r->next_retired;
        st_admin_snap_unref(r);
        r = next;
    }
}

void st_admin_slot_publish(st_admin_slot_t *slot, st_admin_snap_t *snap)
{
    st_admin_snap_t *old = atomic_exchange(&slot->cur, snap);
    if (old) {
        old->next_retired = slot->retired;
        slot->retired = old;
    }
    reclaim(slot);
}

st_admin_snap_t *st_admin_slot_acquire(st_admin_slot_t *slot)
{
    atomic_fetch_add(&slot->readers, 1);
    st_admin_snap_t *s = atomic_load(&slot->cur);
    if (s)
        atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    atomic_fetch_sub(&slot->readers, 1);
    return s;
}

void st_admin_slot_fini(st_admin_slot_t *slot)
{
    st_admin_snap_unref(atomic_exchange(&slot->cur, NULL));
    atomic_store(&slot->readers, 0);
    reclaim(slot);
}
