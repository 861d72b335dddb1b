/*
 * assign.c — topic-partition sets, the uniform and range assignors, and one member's
 * reconciliation step (assign.h).
 */
#include "group/assign.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- sets ---- */

int st_gtp_cmp(const st_gtp_t *a, const st_gtp_t *b)
{
    int r = memcmp(a->topic.b, b->topic.b, sizeof a->topic.b);
    if (r)
        return r;
    return a->partition < b->partition ? -1 : a->partition > b->partition;
}

void st_gtpset_free(st_gtpset_t *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

void st_gtpset_clear(st_gtpset_t *s)
{
    s->n = 0;
}

/* The index of tp in s, or -(insertion point) - 1. */
static int find(const st_gtpset_t *s, const st_gtp_t *tp)
{
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int r = st_gtp_cmp(&s->v[mid], tp);
        if (r == 0)
            return mid;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -lo - 1;
}

int st_gtpset_add(st_gtpset_t *s, st_kuuid_t topic, int32_t partition)
{
    st_gtp_t tp = {topic, partition};
    int i = find(s, &tp);
    if (i >= 0)
        return 0;
    i = -i - 1;
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        st_gtp_t *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    memmove(&s->v[i + 1], &s->v[i], (size_t)(s->n - i) * sizeof *s->v);
    s->v[i] = tp;
    s->n++;
    return 0;
}

int st_gtpset_push(st_gtpset_t *s, st_kuuid_t topic, int32_t partition)
{
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        st_gtp_t *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (st_gtp_t){topic, partition};
    return 0;
}

static int tp_qcmp(const void *a, const void *b)
{
    return st_gtp_cmp(a, b);
}

void st_gtpset_normalize(st_gtpset_t *s)
{
    if (s->n < 2)
        return;
    qsort(s->v, (size_t)s->n, sizeof *s->v, tp_qcmp);
    int k = 1;
    for (int i = 1; i < s->n; i++)
        if (st_gtp_cmp(&s->v[i], &s->v[k - 1]))
            s->v[k++] = s->v[i];
    s->n = k;
}

bool st_gtpset_has(const st_gtpset_t *s, st_kuuid_t topic, int32_t partition)
{
    st_gtp_t tp = {topic, partition};
    return s && find(s, &tp) >= 0;
}

bool st_gtpset_eq(const st_gtpset_t *a, const st_gtpset_t *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (st_gtp_cmp(&a->v[i], &b->v[i]))
            return false;
    return true;
}

int st_gtpset_copy(st_gtpset_t *dst, const st_gtpset_t *src)
{
    st_gtpset_free(dst);
    if (src->n == 0)
        return 0;
    dst->v = malloc((size_t)src->n * sizeof *dst->v);
    if (!dst->v)
        return -ENOMEM;
    memcpy(dst->v, src->v, (size_t)src->n * sizeof *dst->v);
    dst->n = dst->cap = src->n;
    return 0;
}

bool st_gtpset_intersects(const st_gtpset_t *a, const st_gtpset_t *b)
{
    for (int i = 0; i < a->n; i++)
        if (find(b, &a->v[i]) >= 0)
            return true;
    return false;
}

void st_gtpset_move(st_gtpset_t *dst, st_gtpset_t *src)
{
    st_gtpset_free(dst);
    *dst = *src;
    src->v = NULL;
    src->n = src->cap = 0;
}

/* ---- assignors ---- */

static int kstr_cmp(st_kstr_t a, st_kstr_t b)
{
    int32_t la = a.len > 0 ? a.len : 0, lb = b.len > 0 ? b.len : 0;
    int r = memcmp(a.ptr ? a.ptr : "", b.ptr ? b.ptr : "", (size_t)(la < lb ? la : lb));
    return r ? r : (la > lb) - (la < lb);
}

static const st_gassign_member_t *sort_base;
static int by_member_id(const void *x, const void *y)
{
    return kstr_cmp(sort_base[*(const int *)x].member_id, sort_base[*(const int *)y].member_id);
}

/* The members' indexes in member id order (a fresh array, NULL on -ENOMEM). */
static int *member_order(const st_gassign_member_t *m, int n)
{
    int *o = malloc(((size_t)n + 1) * sizeof *o);
    if (!o)
        return NULL;
    for (int i = 0; i < n; i++)
        o[i] = i;
    sort_base = m;
    qsort(o, (size_t)n, sizeof *o, by_member_id);
    return o;
}

static bool subscribes(const st_gassign_member_t *m, const st_kuuid_t *topic)
{
    for (int i = 0; i < m->ntopics; i++)
        if (!memcmp(m->topics[i]->id.b, topic->b, sizeof topic->b))
            return true;
    return false;
}

int st_gassign_uniform(st_gassign_member_t *m, int n)
{
    int rc = -ENOMEM;
    st_gtpset_t all = {0};
    int *order = member_order(m, n);
    int *owner = NULL, *count = NULL;
    if (!order)
        goto out;
    for (int i = 0; i < n; i++) {
        st_gtpset_clear(&m[i].out);
        for (int t = 0; t < m[i].ntopics; t++)
            for (int32_t p = 0; p < m[i].topics[t]->partitions; p++)
                if (st_gtpset_push(&all, m[i].topics[t]->id, p))
                    goto out;
    }
    st_gtpset_normalize(&all);
    owner = malloc(((size_t)all.n + 1) * sizeof *owner);
    count = calloc((size_t)n + 1, sizeof *count);
    if (!owner || !count)
        goto out;
    for (int k = 0; k < all.n; k++)
        owner[k] = -1;
    /* 1. stickiness: each member keeps what it had that is still valid and not taken */
    for (int oi = 0; oi < n; oi++) {
        int i = order[oi];
        const st_gtpset_t *cur = m[i].current;
        for (int k = 0; cur && k < cur->n; k++) {
            int at = find(&all, &cur->v[k]);
            if (at >= 0 && owner[at] < 0 && subscribes(&m[i], &cur->v[k].topic)) {
                owner[at] = i;
                count[i]++;
            }
        }
    }
    /* 2. the rest to the least loaded subscribed member (member id order on ties) */
    for (int k = 0; k < all.n; k++) {
        if (owner[k] >= 0)
            continue;
        int best = -1;
        for (int oi = 0; oi < n; oi++) {
            int i = order[oi];
            if (subscribes(&m[i], &all.v[k].topic) && (best < 0 || count[i] < count[best]))
                best = i;
        }
        if (best >= 0) {
            owner[k] = best;
            count[best]++;
        }
    }
    /* 3. balance: move a partition while another subscribed member has two fewer; the highest
     * partitions move first, so an overloaded member keeps its lowest ones (what Kafka's
     * uniform assignor gives in the homogeneous case, and librdkafka's suite expects) */
    for (int round = 0, moved = 1; moved && round <= all.n; round++) {
        moved = 0;
        for (int k = all.n - 1; k >= 0; k--) {
            int a = owner[k], best = -1;
            if (a < 0)
                continue;
            for (int oi = 0; oi < n; oi++) {
                int i = order[oi];
                if (i != a && subscribes(&m[i], &all.v[k].topic) &&
                    (best < 0 || count[i] < count[best]))
                    best = i;
            }
            if (best >= 0 && count[best] < count[a] - 1) {
                owner[k] = best;
                count[a]--;
                count[best]++;
                moved = 1;
            }
        }
    }
    /* all is sorted: each member's output comes out sorted too */
    for (int k = 0; k < all.n; k++)
        if (owner[k] >= 0 && st_gtpset_push(&m[owner[k]].out, all.v[k].topic, all.v[k].partition))
            goto out;
    rc = 0;
out:
    st_gtpset_free(&all);
    free(order);
    free(owner);
    free(count);
    return rc;
}

int st_gassign_range(st_gassign_member_t *m, int n)
{
    int *order = member_order(m, n);
    int *subs = malloc(((size_t)n + 1) * sizeof *subs);
    int rc = order && subs ? 0 : -ENOMEM;
    for (int i = 0; i < n; i++)
        st_gtpset_clear(&m[i].out);
    for (int i = 0; i < n && !rc; i++)
        for (int t = 0; t < m[i].ntopics && !rc; t++) {
            const st_gtopic_t *topic = m[i].topics[t];
            /* each topic once: at its first subscriber in index order */
            bool seen = false;
            for (int j = 0; j < i && !seen; j++)
                seen = subscribes(&m[j], &topic->id);
            if (seen)
                continue;
            int ns = 0;
            for (int oi = 0; oi < n; oi++)
                if (subscribes(&m[order[oi]], &topic->id))
                    subs[ns++] = order[oi];
            int32_t per = topic->partitions / ns, extra = topic->partitions % ns, p = 0;
            for (int k = 0; k < ns && !rc; k++)
                for (int32_t c = per + (k < extra ? 1 : 0); c > 0 && !rc; c--)
                    rc = st_gtpset_add(&m[subs[k]].out, topic->id, p++);
        }
    free(order);
    free(subs);
    return rc;
}

st_gassign_fn st_gassign_by_name(st_kstr_t name)
{
    if (st_kstr_eq(name, "uniform"))
        return st_gassign_uniform;
    if (st_kstr_eq(name, "range"))
        return st_gassign_range;
    return NULL;
}

/* ---- reconciliation ---- */

/* Kafka's ownsRevokedPartitions: without the client's word, it still owns them. */
static bool owns_any(const st_gtpset_t *owned, const st_gtpset_t *revoking)
{
    return !owned || st_gtpset_intersects(revoking, owned);
}

/* Kafka's computeNextAssignment. */
static int next(st_gcur_t *cur, int32_t target_epoch, const st_gtpset_t *target,
                const st_gtpset_t *owned, st_gheld_fn held, void *ctx)
{
    st_gtpset_t keep = {0}, revoke = {0}, give = {0};
    bool unreleased = false;
    int rc = 0;
    for (int i = 0; i < cur->assigned.n && !rc; i++) {
        const st_gtp_t *tp = &cur->assigned.v[i];
        rc = st_gtpset_has(target, tp->topic, tp->partition)
                 ? st_gtpset_add(&keep, tp->topic, tp->partition)
                 : st_gtpset_add(&revoke, tp->topic, tp->partition);
    }
    for (int i = 0; i < target->n && !rc; i++) {
        const st_gtp_t *tp = &target->v[i];
        if (st_gtpset_has(&cur->assigned, tp->topic, tp->partition))
            continue;
        if (held(ctx, tp))
            unreleased = true;
        else
            rc = st_gtpset_add(&give, tp->topic, tp->partition);
    }
    if (rc)
        goto out;
    st_gcur_t n = {0};
    if (revoke.n > 0 && owns_any(owned, &revoke)) {
        n.state = ST_GMS_UNREVOKED;
        n.epoch = cur->epoch;
        n.prev_epoch = cur->prev_epoch;
        st_gtpset_move(&n.assigned, &keep);
        st_gtpset_move(&n.revoking, &revoke);
    } else {
        for (int i = 0; i < give.n && !rc; i++)
            rc = st_gtpset_push(&keep, give.v[i].topic, give.v[i].partition);
        if (rc)
            goto out;
        st_gtpset_normalize(&keep);
        n.state = unreleased ? ST_GMS_UNRELEASED : ST_GMS_STABLE;
        n.epoch = target_epoch;
        n.prev_epoch = target_epoch != cur->epoch ? cur->epoch : cur->prev_epoch;
        st_gtpset_move(&n.assigned, &keep);
    }
    bool same = n.state == cur->state && n.epoch == cur->epoch && n.prev_epoch == cur->prev_epoch &&
                st_gtpset_eq(&n.assigned, &cur->assigned) &&
                st_gtpset_eq(&n.revoking, &cur->revoking);
    st_gtpset_move(&cur->assigned, &n.assigned);
    st_gtpset_move(&cur->revoking, &n.revoking);
    cur->state = n.state;
    cur->epoch = n.epoch;
    cur->prev_epoch = n.prev_epoch;
    rc = same ? 0 : 1;
out:
    st_gtpset_free(&keep);
    st_gtpset_free(&revoke);
    st_gtpset_free(&give);
    return rc;
}

int st_greconcile(st_gcur_t *cur, int32_t target_epoch, const st_gtpset_t *target,
                  const st_gtpset_t *owned, st_gheld_fn held, void *ctx)
{
    switch (cur->state) {
    case ST_GMS_UNREVOKED:
        if (owns_any(owned, &cur->revoking))
            return 0;
        /* revocation acknowledged: the partitions are free for their next owner */
        st_gtpset_clear(&cur->revoking);
        {
            int rc = next(cur, target_epoch, target, owned, held, ctx);
            return rc < 0 ? rc : 1;
        }
    case ST_GMS_UNRELEASED:
        return next(cur, target_epoch, target, owned, held, ctx);
    default:
        if (cur->epoch == target_epoch)
            return 0;
        return next(cur, target_epoch, target, owned, held, ctx);
    }
}
