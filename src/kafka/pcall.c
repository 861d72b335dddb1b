/* pcall.c — per-partition steps on owner shards, gathered on the request's shard (a fan-out). */
#include "kafka/pcall.h"

#include <stdlib.h>

#include "broker/fanout.h"
#include "kafka/leader.h"
#include "proto/kerr.h"

typedef struct st_pcall {
    st_kreq_t *r;
    st_pitem_t *items;
    int n;
    st_pitem_fn fn;
    st_pdone_fn done;
    void *ctx;
    st_fanout_t fan;
    st_fanout_leg_t *legs; /* one per shard */
} pcall_t;

/* On each owner shard: fn on each of its items. */
static void pcall_run(st_fanout_leg_t *leg)
{
    st_kshard_t *s = st_kshard_current();
    pcall_t *pc = leg->data;
    for (int i = 0; i < pc->n; i++) {
        st_pitem_t *it = &pc->items[i];
        if (it->owner != s->id)
            continue;
        st_part_t *p = st_parts_get(&s->parts, it->topic_id, it->partition);
        if ((it->error = st_kleader_local(s, p)))
            continue;
        if (!st_part_online(p)) {
            it->error = ST_KERR_KAFKA_STORAGE_ERROR;
            continue;
        }
        it->leg = leg;
        pc->fn(s, p, it);
    }
}

void st_pcall_hold(st_pitem_t *it)
{
    st_fanout_hold(it->leg);
}

void st_pcall_release(st_pitem_t *it)
{
    st_fanout_release(it->leg);
}

static void pcall_finish(void *arg)
{
    pcall_t *pc = arg;
    free(pc->legs);
    pc->done(pc->r, pc->ctx);
}

void st_pcall(st_kreq_t *r, st_pitem_t *items, int n, st_pitem_fn fn, st_pdone_fn done, void *ctx)
{
    pcall_t *pc = st_arena_zalloc(&r->arena, sizeof *pc);
    int nshards = r->shard->b->nshards;
    if (!pc || !(pc->legs = calloc((size_t)nshards, sizeof *pc->legs))) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    *pc = (pcall_t){r, items, n, fn, done, ctx, {0}, pc->legs};
    for (int i = 0; i < nshards; i++)
        pc->legs[i].data = pc;
    st_fanout_begin(&pc->fan, r->shard->b->mesh, r->shard->id, pcall_run, pcall_finish, pc);
    for (int i = 0; i < n; i++)
        st_fanout_owner(&pc->fan, pc->legs, items[i].owner);
    st_fanout_end(&pc->fan);
}
void st_pitem_resolve(st_kreq_t *r, st_pitem_t *it, st_kstr_t topic, int32_t partition,
                      int32_t current_epoch)
{
    const st_md_topic_t *t = st_md_find(r->shard->md, topic.ptr, topic.len);
    it->partition = partition;
    it->current_epoch = current_epoch;
    it->owner = st_kshard_owner(t, partition);
    if (t)
        memcpy(it->topic_id, t->id, 16);
    it->error = st_kleader_check(r->shard, t, partition, current_epoch);
    if (!it->error && it->owner < 0)
        it->error = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (it->error)
        it->owner = -1; /* answered here: no owner runs it */
}
