/*
 * offsets.c — a group's committed offsets and the removal of what is gone: the table of
 * offsets, OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups, and the expiry of offsets
 * (and of groups left with none) after offsets.retention.minutes. Every removal writes a
 * tombstone for each key it removes (invariant 2 in coord.h).
 */
#include "group/coord_impl.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/kerr.h"

/* ---- tables of offsets ---- */

int st_gofftab_init(st_gofftab_t *t)
{
    t->n = 0;
    t->nb = 8;
    t->b = calloc(t->nb, sizeof *t->b);
    return t->b ? 0 : -ENOMEM;
}

static void goff_free(st_goff_t *o)
{
    gstr_free(&o->topic);
    gstr_free(&o->metadata);
    free(o);
}

void st_gofftab_clear(st_gofftab_t *t)
{
    for (size_t i = 0; i < t->nb; i++)
        for (st_goff_t *o = t->b[i], *next; o; o = next) {
            next = o->next;
            goff_free(o);
        }
    if (t->b)
        memset(t->b, 0, t->nb * sizeof *t->b);
    t->n = 0;
}

void st_gofftab_fini(st_gofftab_t *t)
{
    st_gofftab_clear(t);
    free(t->b);
    t->b = NULL;
    t->nb = 0;
}

static size_t offset_bucket(const st_gofftab_t *t, const char *topic, int32_t len,
                            int32_t partition)
{
    uint64_t h = fnv1a(topic, (size_t)len, 1469598103934665603ull);
    h = fnv1a(&partition, sizeof partition, h);
    return (size_t)(h ^ (h >> 31)) & (t->nb - 1);
}

st_goff_t *st_gofftab_find(const st_gofftab_t *t, st_kstr_t topic, int32_t partition)
{
    if (topic.len < 0 || t->nb == 0)
        return NULL;
    for (st_goff_t *o = t->b[offset_bucket(t, topic.ptr, topic.len, partition)]; o; o = o->next)
        if (o->partition == partition && kstr_is(topic, o->topic))
            return o;
    return NULL;
}

/* Doubles the buckets when the table is full (a failed allocation keeps the old ones). */
static void offsets_grow(st_gofftab_t *t)
{
    size_t n = t->nb * 2;
    st_goff_t **b = calloc(n, sizeof *b);
    if (!b)
        return;
    size_t old = t->nb;
    st_goff_t **ob = t->b;
    t->b = b;
    t->nb = n;
    for (size_t i = 0; i < old; i++)
        for (st_goff_t *x = ob[i], *next; x; x = next) {
            next = x->next;
            size_t k = offset_bucket(t, x->topic.ptr, x->topic.len, x->partition);
            x->next = b[k];
            b[k] = x;
        }
    free(ob);
}

int st_gofftab_set(st_gofftab_t *t, st_kstr_t topic, int32_t partition, int64_t offset,
                   int32_t epoch, st_kstr_t metadata, int64_t ts, int64_t record_offset)
{
    st_goff_t *o = st_gofftab_find(t, topic, partition);
    if (o && record_offset >= 0 && o->record_offset > record_offset)
        return 0; /* a later record set it */
    st_gstr_t md = ST_GSTR_NULL;
    if (gstr_set(&md, metadata.len < 0 ? ST_KSTR_EMPTY : metadata))
        return -ENOMEM;
    if (!o) {
        if (t->n >= t->nb)
            offsets_grow(t);
        o = calloc(1, sizeof *o);
        if (!o || gstr_set(&o->topic, topic) || !o->topic.ptr) {
            free(o);
            gstr_free(&md);
            return -ENOMEM;
        }
        o->metadata = ST_GSTR_NULL;
        o->partition = partition;
        size_t k = offset_bucket(t, o->topic.ptr, o->topic.len, partition);
        o->next = t->b[k];
        t->b[k] = o;
        t->n++;
    }
    gstr_free(&o->metadata);
    o->metadata = md;
    o->offset = offset;
    o->leader_epoch = epoch;
    o->commit_ts = ts;
    o->expire_ts = -1;
    o->record_offset = record_offset;
    return 0;
}

void st_gofftab_expire(st_gofftab_t *t, st_kstr_t topic, int32_t partition, int64_t expire_ts)
{
    st_goff_t *o = st_gofftab_find(t, topic, partition);
    if (o)
        o->expire_ts = expire_ts;
}

int st_gofftab_put(st_gofftab_t *t, const st_goff_t *o)
{
    return st_gofftab_set(t, as_kstr(o->topic), o->partition, o->offset, o->leader_epoch,
                          as_kstr(o->metadata), o->commit_ts, o->record_offset);
}

void st_gofftab_del(st_gofftab_t *t, st_kstr_t topic, int32_t partition)
{
    if (topic.len < 0 || t->nb == 0)
        return;
    size_t k = offset_bucket(t, topic.ptr, topic.len, partition);
    for (st_goff_t **pp = &t->b[k]; *pp; pp = &(*pp)->next) {
        st_goff_t *o = *pp;
        if (o->partition == partition && kstr_is(topic, o->topic)) {
            *pp = o->next;
            goff_free(o);
            t->n--;
            return;
        }
    }
}

void st_group_offset_del(st_ggroup_t *g, st_kstr_t topic, int32_t partition)
{
    st_gofftab_del(&g->offs, topic, partition);
    for (st_gtxn_t *t = g->txns; t; t = t->next)
        st_gofftab_del(&t->offs, topic, partition);
}

/* ---- OffsetCommit, OffsetFetch, OffsetDelete ---- */

static int16_t kerr_of_write(int res)
{
    if (res == ST_E_TOO_LARGE)
        return ST_KERR_INVALID_COMMIT_OFFSET_SIZE;
    return write_kerr(res);
}

/* The k-th record written (parts without an error, in order) is at base_offset + k. */
static void commit_written(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    (void)c;
    st_goffsets_t *o = w->o;
    st_ggroup_t *g = w->g;
    int64_t rec = w->app.base_offset;
    for (int i = 0; i < o->n; i++) {
        st_goffset_t *p = &o->parts[i];
        if (p->error)
            continue;
        if (res) {
            p->error = kerr_of_write(res);
            continue;
        }
        if (st_gofftab_set(&g->offs, p->topic, p->partition, p->offset, p->leader_epoch,
                           p->metadata, p->commit_ts > 0 ? p->commit_ts : w->ts, rec))
            p->error = ST_KERR_UNKNOWN_SERVER_ERROR;
        else
            st_gofftab_expire(&g->offs, p->topic, p->partition,
                              p->expire_ts > 0 ? p->expire_ts : -1);
        if (rec >= 0)
            rec++;
    }
    w->done(w->done_arg);
}

void st_gcoord_commit(st_gcoord_t *c, int32_t partition, st_goffsets_t *o, st_gcoord_done_fn done,
                      void *arg)
{
    int16_t err = 0;
    st_ggroup_t *g = NULL;
    if (c->closed || !st_gcoord_loaded(c, partition))
        err = ST_KERR_NOT_COORDINATOR;
    else if (o->group_id.len <= 0)
        err = ST_KERR_INVALID_GROUP_ID;
    else if (!(g = st_group_find(c, o->group_id))) {
        /* Kafka's validateOffsetCommit: without a generation, a simple group is made */
        if (o->generation < 0) {
            g = st_group_create(c, o->group_id, partition);
            if (!g)
                err = ST_KERR_UNKNOWN_SERVER_ERROR;
        } else {
            err = o->version >= 9 ? ST_KERR_GROUP_ID_NOT_FOUND : ST_KERR_ILLEGAL_GENERATION;
        }
    }
    if (!err && g->type == G_TYPE_CONSUMER) {
        /* KIP-848: generation_id_or_member_epoch is the member's epoch */
        err = g->state == G_DEAD ? ST_KERR_COORDINATOR_NOT_AVAILABLE
                                 : st_cgroup_check_member(c, g, o->member_id, o->generation, true);
    } else if (!err) {
        st_gmember_t *m = st_group_member_find(g, o->member_id);
        if (g->state == G_DEAD)
            err = ST_KERR_COORDINATOR_NOT_AVAILABLE;
        else if (o->generation < 0 && g->state == G_EMPTY)
            err = 0;
        else if (st_group_fenced(g, o->member_id, o->group_instance_id))
            err = ST_KERR_FENCED_INSTANCE_ID;
        else if (!m)
            err = ST_KERR_UNKNOWN_MEMBER_ID;
        else if (o->generation != g->generation)
            err = ST_KERR_ILLEGAL_GENERATION;
        else if (g->state == G_COMPLETING)
            err = ST_KERR_REBALANCE_IN_PROGRESS;
        else
            st_group_member_touch(c, m);
    }
    if (err) {
        for (int i = 0; i < o->n; i++)
            if (!o->parts[i].error)
                o->parts[i].error = err;
        done(arg);
        return;
    }
    int64_t now = st_wall_ms();
    st_gwrite_t *w = st_group_write_new(c, partition, g, commit_written);
    st_gbatch_t b;
    st_gbatch_init(&b, now, c->cfg.max_batch_bytes);
    int rc = w ? 0 : -ENOMEM;
    for (int i = 0; i < o->n && !rc; i++) {
        st_goffset_t *p = &o->parts[i];
        if (p->error)
            continue;
        if (p->metadata.len > ST_GCOORD_MAX_METADATA) {
            p->error = ST_KERR_OFFSET_METADATA_TOO_LARGE;
            continue;
        }
        /* v2-v4's retention_time_ms: Kafka's expire_timestamp, commit time + retention */
        p->expire_ts =
            o->retention_ms > 0 ? (p->commit_ts > 0 ? p->commit_ts : now) + o->retention_ms : 0;
        rc = st_group_add_offset_record(&b, o->group_id, p->topic, p->partition, NULL, now, p);
    }
    if (rc) {
        if (w)
            st_group_write_free(w);
        st_gbatch_fini(&b);
        for (int i = 0; i < o->n; i++)
            if (!o->parts[i].error)
                o->parts[i].error = ST_KERR_UNKNOWN_SERVER_ERROR;
        done(arg);
        return;
    }
    w->o = o;
    w->commits = true;
    w->ts = now;
    w->done = done;
    w->done_arg = arg;
    st_group_write(c, &b, w);
    st_gbatch_fini(&b);
}

static int offset_cmp(const void *x, const void *y)
{
    const st_goffset_t *a = x, *b = y;
    int n = a->topic.len < b->topic.len ? a->topic.len : b->topic.len;
    int r = memcmp(a->topic.ptr, b->topic.ptr, (size_t)n);
    if (r)
        return r;
    if (a->topic.len != b->topic.len)
        return a->topic.len < b->topic.len ? -1 : 1;
    return a->partition < b->partition ? -1 : a->partition > b->partition;
}

/* Kafka's answer for a part whose offset is pending in a transaction (require_stable): the
 * consumer retries until the transaction ends. */
static void unstable(st_goffset_t *p)
{
    p->error = ST_KERR_UNSTABLE_OFFSET_COMMIT;
    p->offset = -1;
    p->leader_epoch = -1;
    p->metadata = ST_KSTR_EMPTY;
}

void st_gcoord_fetch(st_gcoord_t *c, int32_t partition, st_goffsets_t *o, st_arena_t *a)
{
    o->error = 0;
    if (c->closed || !st_gcoord_loaded(c, partition)) {
        o->error = ST_KERR_NOT_COORDINATOR;
        return;
    }
    if (o->group_id.len <= 0 && !o->all) {
        o->error = ST_KERR_INVALID_GROUP_ID;
        return;
    }
    st_ggroup_t *g = st_group_find(c, o->group_id);
    if (g && g->state == G_DEAD)
        g = NULL;
    /* OffsetFetch v9+ of a consumer group's member: its epoch is checked (KIP-848) */
    if (g && g->type == G_TYPE_CONSUMER && o->check_member &&
        (o->error = st_cgroup_check_member(c, g, o->member_id, o->generation, false)) != 0) {
        o->n = o->all ? 0 : o->n;
        return;
    }
    if (o->all) {
        o->n = 0;
        o->parts = st_arena_zalloc(a, (g ? g->offs.n : 0) * sizeof *o->parts + 1);
        if (!o->parts || !g)
            return;
        for (size_t i = 0; i < g->offs.nb; i++)
            for (st_goff_t *x = g->offs.b[i]; x; x = x->next) {
                st_goffset_t *p = &o->parts[o->n++];
                p->topic = answer_str(a, x->topic);
                p->partition = x->partition;
                p->offset = x->offset;
                p->leader_epoch = x->leader_epoch;
                p->metadata = answer_str0(a, x->metadata);
                p->error = 0;
                if (o->require_stable && st_group_pending_or_writing(g, p->topic, p->partition))
                    unstable(p);
            }
        qsort(o->parts, (size_t)o->n, sizeof *o->parts, offset_cmp);
        return;
    }
    for (int i = 0; i < o->n; i++) {
        st_goffset_t *p = &o->parts[i];
        st_goff_t *x = g ? st_gofftab_find(&g->offs, p->topic, p->partition) : NULL;
        p->offset = x ? x->offset : -1;
        p->leader_epoch = x ? x->leader_epoch : -1;
        p->metadata = x ? answer_str0(a, x->metadata) : ST_KSTR_EMPTY;
        if (g && !p->error && o->require_stable &&
            st_group_pending_or_writing(g, p->topic, p->partition))
            unstable(p);
    }
}

/* Whether a live member's subscription (consumer protocol: version int16, topics
 * [string]) names topic. */
static bool subscribes(const st_ggroup_t *g, st_kstr_t topic)
{
    if (g->type == G_TYPE_CONSUMER) {
        for (int i = 0; g->cg && i < g->cg->nmembers; i++)
            for (int k = 0; k < g->cg->members[i]->ntopic_names; k++)
                if (kstr_is(topic, g->cg->members[i]->topic_names[k]))
                    return true;
        return false;
    }
    if (!st_kstr_eq(as_kstr(g->protocol_type), "consumer") || !g->protocol.ptr)
        return false;
    for (int i = 0; i < g->nmembers; i++) {
        const st_gmember_t *m = g->members[i];
        for (int k = 0; k < m->nprotos; k++) {
            if (!gstr_eq(m->protos[k].name, g->protocol))
                continue;
            const uint8_t *p = m->protos[k].meta, *end = p + m->protos[k].meta_len;
            if (end - p < 6)
                continue;
            p += 2;
            int32_t n = (int32_t)st_be32(p);
            p += 4;
            for (int32_t t = 0; t < n && end - p >= 2; t++) {
                int16_t l = (int16_t)st_be16(p);
                p += 2;
                if (l < 0 || end - p < l)
                    break;
                if (l == topic.len && memcmp(p, topic.ptr, (size_t)l) == 0)
                    return true;
                p += l;
            }
        }
    }
    return false;
}

static void offset_delete_written(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    (void)c;
    st_goffsets_t *o = w->o;
    for (int i = 0; i < o->n; i++) {
        st_goffset_t *p = &o->parts[i];
        if (p->error)
            continue;
        if (res)
            p->error = kerr_of_write(res);
        else
            st_group_offset_del(w->g, p->topic, p->partition);
    }
    w->done(w->done_arg);
}

void st_gcoord_offset_delete(st_gcoord_t *c, int32_t partition, st_goffsets_t *o,
                             st_gcoord_done_fn done, void *arg)
{
    st_ggroup_t *g;
    o->error = st_group_lookup(c, partition, o->group_id, ST_KERR_GROUP_ID_NOT_FOUND, &g);
    if (!o->error && g->state != G_EMPTY && !st_kstr_eq(as_kstr(g->protocol_type), "consumer"))
        o->error = ST_KERR_NON_EMPTY_GROUP;
    if (o->error) {
        done(arg);
        return;
    }
    st_gwrite_t *w = st_group_write_new(c, partition, g, offset_delete_written);
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    int rc = w ? 0 : -ENOMEM;
    for (int i = 0; i < o->n && !rc; i++) {
        st_goffset_t *p = &o->parts[i];
        if (p->error)
            continue;
        if (g->state != G_EMPTY && subscribes(g, p->topic)) {
            p->error = ST_KERR_GROUP_SUBSCRIBED_TO_TOPIC;
            continue;
        }
        /* a tombstone where an offset is committed or pending (Kafka's deleteOffsets) */
        if (st_gofftab_find(&g->offs, p->topic, p->partition) ||
            st_group_has_pending(g, p->topic, p->partition))
            rc = st_group_add_offset_record(&b, o->group_id, p->topic, p->partition, NULL, 0, NULL);
    }
    if (rc) {
        if (w)
            st_group_write_free(w);
        st_gbatch_fini(&b);
        o->error = ST_KERR_UNKNOWN_SERVER_ERROR;
        done(arg);
        return;
    }
    w->o = o;
    w->done = done;
    w->done_arg = arg;
    st_group_write(c, &b, w);
    st_gbatch_fini(&b);
}

/* ---- DeleteGroups ---- */

/* Tombstones for every key of g: its offsets, its pending transactional ones not committed
 * too (Kafka's deleteAllOffsets), those of commits still being written (their records precede
 * these in the log), and its metadata (invariant 2). */
static int add_tombstones(st_gbatch_t *b, st_ggroup_t *g)
{
    int rc = 0;
    for (size_t i = 0; i < g->offs.nb && !rc; i++)
        for (st_goff_t *o = g->offs.b[i]; o && !rc; o = o->next)
            rc = st_group_add_offset_record(b, as_kstr(g->id), as_kstr(o->topic), o->partition,
                                            NULL, 0, NULL);
    for (st_gtxn_t *t = g->txns; t && !rc; t = t->next)
        for (size_t i = 0; i < t->offs.nb && !rc; i++)
            for (st_goff_t *o = t->offs.b[i]; o && !rc; o = o->next) {
                bool seen = st_gofftab_find(&g->offs, as_kstr(o->topic), o->partition);
                for (st_gtxn_t *e = g->txns; e != t && !seen; e = e->next)
                    seen = st_gofftab_find(&e->offs, as_kstr(o->topic), o->partition);
                if (!seen)
                    rc = st_group_add_offset_record(b, as_kstr(g->id), as_kstr(o->topic),
                                                    o->partition, NULL, 0, NULL);
            }
    for (st_gwrite_t *w = g->writes; w && !rc; w = w->gnext)
        for (int i = 0; w->commits && i < w->o->n && !rc; i++)
            if (!w->o->parts[i].error)
                rc = st_group_add_offset_record(b, as_kstr(g->id), w->o->parts[i].topic,
                                                w->o->parts[i].partition, NULL, 0, NULL);
    if (!rc && g->type == G_TYPE_CONSUMER)
        rc = st_cgroup_add_tombstones(b, g);
    else if (!rc)
        rc = st_group_add_group_record(b, as_kstr(g->id), NULL, 0);
    return rc;
}

/* Once durable the group is freed (write_done), as soon as no other write refers to it. */
static void delete_written(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    (void)c;
    if (res && !w->g->unloaded)
        st_group_set_state(w->g, G_EMPTY);
    *w->error = write_kerr(res);
    w->done(w->done_arg);
}

void st_gcoord_delete_group(st_gcoord_t *c, int32_t partition, st_kstr_t group_id, int16_t *error,
                            st_gcoord_done_fn done, void *arg)
{
    st_ggroup_t *g;
    *error = st_group_lookup(c, partition, group_id, ST_KERR_GROUP_ID_NOT_FOUND, &g);
    if (!*error && g->state != G_EMPTY)
        *error = ST_KERR_NON_EMPTY_GROUP;
    if (*error) {
        done(arg);
        return;
    }
    st_gwrite_t *w = st_group_write_new(c, partition, g, delete_written);
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    if (!w || add_tombstones(&b, g)) {
        if (w)
            st_group_write_free(w);
        st_gbatch_fini(&b);
        *error = ST_KERR_UNKNOWN_SERVER_ERROR;
        done(arg);
        return;
    }
    g->state = G_DEAD;
    w->error = error;
    w->done = done;
    w->done_arg = arg;
    st_group_write(c, &b, w);
    st_gbatch_fini(&b);
}

/* ---- expiry ---- */

/* Drops g's offsets past retention and, when none is left, g itself (Kafka's
 * cleanupGroupMetadata), writing their tombstones. Memory changes at once (invariant 1). */
static void expire_group(st_gcoord_t *c, st_ggroup_t *g, int64_t now)
{
    if (g->state != G_EMPTY || g->writes)
        return;
    st_gbatch_t b;
    st_gbatch_init(&b, now, c->cfg.max_batch_bytes);
    int rc = 0;
    for (size_t i = 0; i < g->offs.nb && !rc; i++)
        for (st_goff_t *o = g->offs.b[i], *next; o && !rc; o = next) {
            next = o->next;
            /* an offset with its own expiry (OffsetCommit v2-v4) goes at that time, the
             * others offsets.retention.minutes after the group emptied or, for a group of
             * simple commits, after their commit (Kafka's removeExpiredOffsets) */
            int64_t base = g->protocol_type.ptr ? g->state_ts : o->commit_ts;
            if (o->expire_ts >= 0 ? now < o->expire_ts : now - base < c->cfg.offsets_retention_ms)
                continue;
            /* not while a transaction holds a pending offset of it (Kafka) */
            if (st_group_has_pending(g, as_kstr(o->topic), o->partition))
                continue;
            rc = st_group_add_offset_record(&b, as_kstr(g->id), as_kstr(o->topic), o->partition,
                                            NULL, 0, NULL);
            if (!rc)
                st_gofftab_del(&g->offs, as_kstr(o->topic), o->partition);
        }
    /* a group with an open transaction stays (Kafka's cleanupExpiredOffsets) */
    bool gone = !rc && g->offs.n == 0 && !g->txns;
    if (gone)
        rc = g->type == G_TYPE_CONSUMER ? st_cgroup_add_tombstones(&b, g)
                                        : st_group_add_group_record(&b, as_kstr(g->id), NULL, 0);
    st_gwrite_t *w = rc || b.total == 0 ? NULL : st_group_write_new(c, g->partition, g, NULL);
    if (!w) {
        st_gbatch_fini(&b);
        return;
    }
    if (gone)
        g->state = G_DEAD;
    ST_INFO("group %.*s: %d expired record(s) removed%s", ST_GSTR_ARG(g->id), b.total,
            gone ? ", group gone" : "");
    st_group_write(c, &b, w);
    st_gbatch_fini(&b);
}

void st_gcoord_expire_now(st_gcoord_t *c)
{
    if (c->closed)
        return;
    int64_t now = st_wall_ms();
    /* Collect first: a scan may free groups. */
    size_t n = 0;
    st_ggroup_t **all = malloc((c->ngroups + 1) * sizeof *all);
    if (!all)
        return;
    for (size_t i = 0; i < c->nbuckets; i++)
        for (st_ggroup_t *g = c->buckets[i]; g; g = g->next)
            all[n++] = g;
    for (size_t i = 0; i < n; i++)
        expire_group(c, all[i], now);
    free(all);
}

void st_group_expire_tick(st_timer_t *t)
{
    st_gcoord_t *c = t->data;
    st_gcoord_expire_now(c);
    if (!c->closed)
        st_loop_timer_start(c->loop, &c->expire_timer, c->cfg.expire_check_ms);
}
