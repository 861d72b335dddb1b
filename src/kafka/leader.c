/* leader.c — whether this broker leads a partition, from a shard's snapshot (leader.h). */
#include "kafka/leader.h"

#include <string.h>

#include "broker/runtime.h"
#include "proto/kerr.h"

static const st_md_partition_t *md_part(const st_md_topic_t *t, int32_t partition)
{
    if (!t || partition < 0 || partition >= t->npartitions)
        return NULL;
    return &t->partitions[partition];
}

/* Whether this broker may act on its snapshot's leaderships: it must have seen its own
 * registration (this incarnation) unfenced, which the controller grants only once the broker
 * applied the metadata up to it (Kafka: a broker serves only once its metadata is current). A
 * restarted broker replays metadata that may still show it leading at an epoch the cluster
 * has moved past; a frozen one (SIGSTOP) likewise until the unfencing after its return. */
static bool stale(const st_kshard_t *s)
{
    if (st_kshard_stalled((st_kshard_t *)s)) /* the shard's own state, on its thread */
        return true;
    const st_md_broker_t *me = st_md_broker(s->md, (int32_t)s->b->cfg->node_id);
    return !me || me->fenced || !s->md->self_incarnation ||
           me->incarnation != s->md->self_incarnation;
}

int16_t st_kleader_check(const st_kshard_t *s, const st_md_topic_t *t, int32_t partition,
                         int32_t current_epoch)
{
    const st_md_partition_t *p = md_part(t, partition);
    if (!p)
        return 0;
    int32_t self = (int32_t)s->b->cfg->node_id;
    if (!st_md_is_replica(p, self))
        return ST_KERR_NOT_LEADER_OR_FOLLOWER;
    if (current_epoch >= 0 && current_epoch < p->leader_epoch)
        return ST_KERR_FENCED_LEADER_EPOCH;
    if (current_epoch > p->leader_epoch)
        return ST_KERR_UNKNOWN_LEADER_EPOCH;
    if (p->leader != self || p->shard < 0 || stale(s))
        return ST_KERR_NOT_LEADER_OR_FOLLOWER;
    return 0;
}

int16_t st_kleader_local(const st_kshard_t *s, const st_part_t *p)
{
    if (!p)
        return ST_KERR_NOT_LEADER_OR_FOLLOWER;
    const char *topic = st_part_topic(p);
    const st_md_topic_t *t = st_md_find(s->md, topic, (int32_t)strlen(topic));
    if (!t || memcmp(t->id, st_part_topic_id(p), 16) != 0)
        return ST_KERR_NOT_LEADER_OR_FOLLOWER;
    const st_md_partition_t *mp = md_part(t, st_part_index(p));
    bool leads = mp && mp->leader == (int32_t)s->b->cfg->node_id && mp->shard == s->id;
    return leads && !stale(s) ? 0 : ST_KERR_NOT_LEADER_OR_FOLLOWER;
}

int16_t st_kleader_follower(const st_kshard_t *s, const st_md_topic_t *t, int32_t partition,
                            int32_t replica)
{
    const st_md_partition_t *p = md_part(t, partition);
    if (!p)
        return 0;
    bool ok = replica != (int32_t)s->b->cfg->node_id && st_md_is_replica(p, replica) &&
              p->leader == (int32_t)s->b->cfg->node_id && !stale(s);
    return ok ? 0 : ST_KERR_NOT_LEADER_OR_FOLLOWER;
}

int16_t st_kleader_follower_local(const st_part_t *p, int32_t replica)
{
    const st_part_role_t *r = st_part_role(p);
    if (!st_part_replicated(p) || !r->leader || replica == r->self)
        return ST_KERR_NOT_LEADER_OR_FOLLOWER;
    for (int i = 0; i < r->nreplicas; i++)
        if (r->replicas[i] == replica)
            return 0;
    return ST_KERR_NOT_LEADER_OR_FOLLOWER;
}

bool st_kleader_current(const st_kshard_t *s, const uint8_t topic_id[16], int32_t partition,
                        int16_t error, int32_t *leader_id, int32_t *leader_epoch)
{
    if (error != ST_KERR_NOT_LEADER_OR_FOLLOWER && error != ST_KERR_FENCED_LEADER_EPOCH)
        return false;
    const st_md_partition_t *p = md_part(st_md_find_id(s->md, topic_id), partition);
    if (!p || p->leader < 0)
        return false;
    *leader_id = p->leader;
    *leader_epoch = p->leader_epoch;
    return true;
}

int st_kleader_brokers(st_arena_t *a, const st_md_t *md, const int32_t *ids, int n,
                       const st_md_broker_t ***out)
{
    *out = st_arena_alloc(a, (size_t)md->nbrokers * sizeof **out + 1);
    if (!*out)
        return -1;
    int k = 0;
    for (int i = 0; i < md->nbrokers; i++) {
        const st_md_broker_t *b = &md->brokers[i];
        bool named = false;
        for (int j = 0; j < n && !named; j++)
            named = ids[j] == b->node_id;
        if (named && !b->fenced)
            (*out)[k++] = b;
    }
    return k;
}
