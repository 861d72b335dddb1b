/* pcall.c — per-partition steps on owner shards, gathered on the request's shard. */
#include "kafka/pcall.h"

#include <stdlib.h>

#include "proto/kerr.h"

typedef struct st_pcall st_pcall_t;

typedef struct {
    st_xcall_t x;
    st_pcall_t *pc;
    int holds; /* fn calls still waiting (st_pcall_hold), plus one while running */
} st_pcall_one_t;

struct st_pcall {
    st_kreq_t *r;
    st_pitem_t *items;
    int n;
    st_pitem_fn fn;
    st_pdone_fn done;
    void *ctx;
    int pending;
    st_pcall_one_t *calls;
};

static void st_pcall_run(st_kshard_t *s, st_xcall_t *x)
{
    st_pcall_one_t *one = (st_pcall_one_t *)x;
    st_pcall_t *pc = one->pc;
    one->holds = 1;
    for (int i = 0; i < pc->n; i++) {
        st_pitem_t *it = &pc->items[i];
        if (it->owner != s->id)
            continue;
        st_part_t *p = st_parts_get(&s->parts, it->topic_id, it->partition);
        if (!p || !p->log) {
            it->error = p ? ST_KERR_KAFKA_STORAGE_ERROR : ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
            continue;
        }
        it->call = one;
        pc->fn(s, p, it);
    }
    if (--one->holds == 0)
        st_xcall_return(s, x);
}

void st_pcall_hold(st_pitem_t *it)
{
    ((st_pcall_one_t *)it->call)->holds++;
}

void st_pcall_release(st_kshard_t *s, st_pitem_t *it)
{
    st_pcall_one_t *one = it->call;
    if (--one->holds == 0)
        st_xcall_return(s, &one->x);
}

static void st_pcall_finish(st_pcall_t *pc)
{
    free(pc->calls);
    pc->done(pc->r, pc->ctx);
}

static void st_pcall_back(st_kshard_t *s, st_xcall_t *x)
{
    st_pcall_t *pc = ((st_pcall_one_t *)x)->pc;
    (void)s;
    if (--pc->pending == 0)
        st_pcall_finish(pc);
}

void st_pcall(st_kreq_t *r, st_pitem_t *items, int n, st_pitem_fn fn, st_pdone_fn done, void *ctx)
{
    st_pcall_t *pc = st_arena_zalloc(&r->arena, sizeof *pc);
    int nshards = r->shard->b->nshards;
    if (!pc || !(pc->calls = calloc((size_t)nshards, sizeof *pc->calls))) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    *pc = (st_pcall_t){r, items, n, fn, done, ctx, 1, pc->calls};
    for (int i = 0; i < n; i++) {
        int o = items[i].owner;
        if (o < 0 || pc->calls[o].pc)
            continue;
        pc->calls[o].pc = pc;
        pc->pending++;
        st_xcall(r->shard, o, &pc->calls[o].x, st_pcall_run, st_pcall_back);
    }
    if (--pc->pending == 0)
        st_pcall_finish(pc);
}

void st_pitem_resolve(st_kreq_t *r, st_pitem_t *it, st_kstr_t topic, int32_t partition)
{
    const st_md_topic_t *t = st_md_find(r->shard->md, topic.ptr, topic.len);
    it->partition = partition;
    it->owner = st_kshard_owner(t, partition);
    if (t)
        memcpy(it->topic_id, t->id, 16);
    if (it->owner < 0)
        it->error = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
}
