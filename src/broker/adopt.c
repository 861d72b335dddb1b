/* adopt.c — every shard adopts a metadata state: partitions opened, reconfigured, given their
 * role or deleted (adopt.h). */
#include "broker/adopt.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "broker/fanout.h"
#include "broker/runtime.h"
#include "partition/partition.h"

typedef struct adopt_leg {
    st_fanout_leg_t leg;
    st_md_t *md;
    st_adopt_fails_t fails; /* this shard's */
} adopt_leg_t;

typedef struct adoption {
    st_fanout_t fan;
    adopt_leg_t *legs;
    st_md_t *md;
    st_adopt_done_fn done;
    void *arg;
} adoption_t;

static bool configs_equal(const st_md_topic_t *a, const st_md_topic_t *b)
{
    if (a->nconfigs != b->nconfigs)
        return false;
    for (int i = 0; i < a->nconfigs; i++)
        if (strcmp(a->configs[i].key, b->configs[i].key) ||
            strcmp(a->configs[i].value, b->configs[i].value))
            return false;
    return true;
}

typedef struct {
    st_kshard_t *s;
    const st_md_t *md;
} sweep_t;

/* Whether this broker keeps a copy of partition p on shard s. */
static bool hosts(const st_kshard_t *s, const st_md_partition_t *p)
{
    return p->shard == s->id && st_md_is_replica(p, (int32_t)s->b->cfg->node_id);
}

static void sweep_one(void *arg, st_part_t *p)
{
    sweep_t *w = arg;
    const st_md_topic_t *t = st_md_find_id(w->md, st_part_topic_id(p));
    int32_t index = st_part_index(p);
    if (t && index < t->npartitions && hosts(w->s, &t->partitions[index]))
        return;
    if (w->s->b->hooks->partition_gone)
        w->s->b->hooks->partition_gone(w->s, p);
    st_parts_delete(&w->s->parts, p);
}

/* The partition's role from the snapshot (replication, partition.h), then what follows from
 * it (hooks->partition_role: fetching from the leader, a coordinator's load). */
static void set_role(st_kshard_t *s, st_part_t *part, const st_md_t *md, const st_md_topic_t *t,
                     int32_t p)
{
    const st_config_t *cfg = s->b->cfg;
    const st_md_partition_t *mp = &t->partitions[p];
    st_part_role_t role = {.self = (int32_t)cfg->node_id,
                           .leader_id = mp->leader,
                           .leader_epoch = mp->leader_epoch,
                           .partition_epoch = mp->partition_epoch,
                           .min_isr = (int32_t)cfg->min_insync_replicas,
                           .nreplicas = mp->nreplicas,
                           .nisr = mp->nisr};
    role.leader = mp->leader == role.self;
    const char *mi = st_md_topic_config(t, "min.insync.replicas");
    if (mi)
        role.min_isr = (int32_t)strtol(mi, NULL, 10);
    memcpy(role.replicas, mp->replicas, sizeof role.replicas);
    memcpy(role.isr, mp->isr, sizeof role.isr);
    for (int i = 0; i < mp->nreplicas && i < ST_PART_MAX_REPLICAS; i++)
        role.live[i] = st_md_broker_live(md, mp->replicas[i]);
    st_part_set_role(part, &role);
    if (s->b->hooks->partition_role)
        s->b->hooks->partition_role(s, part, md, t, p, role.leader);
}

static void adopt_run(st_fanout_leg_t *leg)
{
    st_kshard_t *s = st_kshard_current();
    adopt_leg_t *a = leg->data;
    const st_broker_hooks_t *h = s->b->hooks;
    st_md_t *old = s->md;
    s->md = st_md_ref(a->md);
    if (h->md_adopted)
        h->md_adopted(s);
    sweep_t w = {s, a->md};
    st_parts_each(&s->parts, sweep_one, &w);
    for (int i = 0; i < a->md->ntopics; i++) {
        const st_md_topic_t *t = a->md->topics[i];
        const st_md_topic_t *ot = old ? st_md_find_id(old, t->id) : NULL;
        bool reconf = ot && !configs_equal(ot, t);
        for (int32_t p = 0; p < t->npartitions; p++) {
            if (!hosts(s, &t->partitions[p]))
                continue;
            st_part_t *part = st_parts_get(&s->parts, t->id, p);
            if (!part) {
                st_part_t *np;
                st_log_config_t lc;
                h->topic_log_config(s->b->cfg, t, &lc);
                int rc = st_parts_open(&s->parts, t->name, t->id, p, &lc, &np);
                if (rc && a->fails.n < ST_ADOPT_FAILS) {
                    memcpy(a->fails.f[a->fails.n].id, t->id, 16);
                    a->fails.f[a->fails.n].partition = p;
                    a->fails.f[a->fails.n].err = rc;
                    a->fails.n++;
                }
            } else if (reconf) {
                st_log_config_t lc;
                h->topic_log_config(s->b->cfg, t, &lc);
                st_part_reconfigure(part, &lc);
            }
            if ((part = st_parts_get(&s->parts, t->id, p)) != NULL)
                set_role(s, part, a->md, t, p);
        }
    }
    st_md_unref(old);
}

static void adopted(void *arg)
{
    adoption_t *ad = arg;
    st_kshard_t *s = st_kshard_current();
    st_adopt_fails_t fails = {0};
    for (int i = 0; i < s->b->nshards; i++) {
        const st_adopt_fails_t *f = &ad->legs[i].fails;
        for (int k = 0; k < f->n && fails.n < ST_ADOPT_FAILS; k++)
            fails.f[fails.n++] = f->f[k];
        st_md_unref(ad->legs[i].md);
    }
    ad->done(s, ad->arg, ad->md, &fails);
    st_md_unref(ad->md);
    free(ad->legs);
    free(ad);
}

void st_broker_adopt(st_kshard_t *s, st_md_t *md, st_adopt_done_fn done, void *arg)
{
    st_broker_t *b = s->b;
    st_md_assign_shards(md, b->nshards);
    adoption_t *ad = calloc(1, sizeof *ad);
    adopt_leg_t *legs = calloc((size_t)b->nshards, sizeof *legs);
    ST_ASSERT(ad && legs);
    *ad = (adoption_t){.legs = legs, .md = md, .done = done, .arg = arg};
    st_fanout_begin(&ad->fan, b->mesh, s->id, adopt_run, adopted, ad);
    for (int i = 0; i < b->nshards; i++) {
        legs[i].md = st_md_ref(md);
        legs[i].leg.data = &legs[i];
        st_fanout_send(&ad->fan, &legs[i].leg, i);
    }
    st_fanout_end(&ad->fan);
}
