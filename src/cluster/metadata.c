/* metadata.c — immutable, reference-counted cluster metadata snapshots. */
#include "cluster/metadata.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"

st_md_t *st_md_new(const char *cluster_id, int32_t controller_id)
{
    st_md_t *md = calloc(1, sizeof *md);
    if (!md)
        return NULL;
    atomic_init(&md->refs, 1);
    md->cluster_id = strdup(cluster_id ? cluster_id : "");
    md->controller_id = controller_id;
    if (!md->cluster_id) {
        free(md);
        return NULL;
    }
    return md;
}

st_md_t *st_md_ref(st_md_t *md)
{
    atomic_fetch_add_explicit(&md->refs, 1, memory_order_relaxed);
    return md;
}

void st_md_topic_free(st_md_topic_t *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nconfigs; i++) {
        free(t->configs[i].key);
        free(t->configs[i].value);
    }
    free(t->configs);
    free(t->partitions);
    free(t->name);
    free(t);
}

void st_md_unref(st_md_t *md)
{
    if (!md || atomic_fetch_sub_explicit(&md->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (int i = 0; i < md->ntopics; i++)
        st_md_topic_free(md->topics[i]);
    for (int i = 0; i < md->nbrokers; i++) {
        free(md->brokers[i].host);
        free(md->brokers[i].rack);
        free(md->brokers[i].endpoints);
    }
    free(md->topics);
    free(md->brokers);
    free(md->scram);
    free(md->quotas);
    for (int i = 0; i < md->nbcfg; i++) {
        free(md->bcfg[i].key);
        free(md->bcfg[i].value);
    }
    free(md->bcfg);
    free(md->cluster_id);
    st_acl_set_fini(&md->acls);
    free(md);
}

st_md_topic_t *st_md_topic_new(const char *name, const uint8_t id[16], int32_t npartitions)
{
    st_md_topic_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->name = strdup(name);
    t->npartitions = npartitions;
    t->replication_factor = 1;
    t->partitions = calloc(npartitions > 0 ? (size_t)npartitions : 1, sizeof *t->partitions);
    if (!t->name || !t->partitions) {
        st_md_topic_free(t);
        return NULL;
    }
    memcpy(t->id, id, 16);
    for (int32_t i = 0; i < npartitions; i++)
        t->partitions[i] = (st_md_partition_t){.index = i, .shard = -1, .leader = -1};
    return t;
}

st_md_topic_t *st_md_topic_clone(const st_md_topic_t *s)
{
    st_md_topic_t *t = st_md_topic_new(s->name, s->id, s->npartitions);
    if (!t)
        return NULL;
    t->internal = s->internal;
    t->replication_factor = s->replication_factor;
    memcpy(t->partitions, s->partitions, (size_t)s->npartitions * sizeof *t->partitions);
    for (int i = 0; i < s->nconfigs; i++)
        if (st_md_topic_set_config(t, s->configs[i].key, s->configs[i].value)) {
            st_md_topic_free(t);
            return NULL;
        }
    return t;
}

int st_md_topic_grow(st_md_topic_t *t, int32_t n)
{
    if (n <= t->npartitions)
        return ST_E_INVALID;
    st_md_partition_t *p = realloc(t->partitions, (size_t)n * sizeof *p);
    if (!p)
        return -ENOMEM;
    for (int32_t i = t->npartitions; i < n; i++)
        p[i] = (st_md_partition_t){.index = i, .shard = -1, .leader = -1};
    t->partitions = p;
    t->npartitions = n;
    return 0;
}

int st_md_topic_set_config(st_md_topic_t *t, const char *key, const char *value)
{
    int i = 0;
    while (i < t->nconfigs && strcmp(t->configs[i].key, key) < 0)
        i++;
    bool found = i < t->nconfigs && strcmp(t->configs[i].key, key) == 0;
    if (!value) {
        if (found) {
            free(t->configs[i].key);
            free(t->configs[i].value);
            memmove(&t->configs[i], &t->configs[i + 1],
                    (size_t)(t->nconfigs - i - 1) * sizeof *t->configs);
            t->nconfigs--;
        }
        return 0;
    }
    char *v = strdup(value);
    if (!v)
        return -ENOMEM;
    if (found) {
        free(t->configs[i].value);
        t->configs[i].value = v;
        return 0;
    }
    char *k = strdup(key);
    st_md_config_t *c = realloc(t->configs, (size_t)(t->nconfigs + 1) * sizeof *c);
    if (!k || !c) {
        free(k);
        free(v);
        if (c)
            t->configs = c;
        return -ENOMEM;
    }
    t->configs = c;
    memmove(&c[i + 1], &c[i], (size_t)(t->nconfigs - i) * sizeof *c);
    c[i].key = k;
    c[i].value = v;
    t->nconfigs++;
    return 0;
}

const char *st_md_topic_config(const st_md_topic_t *t, const char *key)
{
    for (int i = 0; i < t->nconfigs; i++)
        if (strcmp(t->configs[i].key, key) == 0)
            return t->configs[i].value;
    return NULL;
}

int st_md_add_broker(st_md_t *md, int32_t node_id, const char *host, int32_t port)
{
    st_md_broker_t *b = realloc(md->brokers, (size_t)(md->nbrokers + 1) * sizeof *b);
    if (!b)
        return -ENOMEM;
    md->brokers = b;
    char *h = strdup(host);
    if (!h)
        return -ENOMEM;
    b[md->nbrokers++] = (st_md_broker_t){.node_id = node_id, .host = h, .port = port};
    return 0;
}

int st_md_put_broker(st_md_t *md, const st_md_broker_t *nb)
{
    char *h = strdup(nb->host ? nb->host : "");
    char *r = nb->rack ? strdup(nb->rack) : NULL;
    char *e = nb->endpoints ? strdup(nb->endpoints) : NULL;
    if (!h || (nb->rack && !r) || (nb->endpoints && !e)) {
        free(h);
        free(r);
        free(e);
        return -ENOMEM;
    }
    int i = 0;
    while (i < md->nbrokers && md->brokers[i].node_id < nb->node_id)
        i++;
    if (i < md->nbrokers && md->brokers[i].node_id == nb->node_id) {
        free(md->brokers[i].host);
        free(md->brokers[i].rack);
        free(md->brokers[i].endpoints);
    } else {
        st_md_broker_t *v = realloc(md->brokers, (size_t)(md->nbrokers + 1) * sizeof *v);
        if (!v) {
            free(h);
            free(r);
            free(e);
            return -ENOMEM;
        }
        md->brokers = v;
        memmove(&v[i + 1], &v[i], (size_t)(md->nbrokers - i) * sizeof *v);
        md->nbrokers++;
    }
    md->brokers[i] = *nb;
    md->brokers[i].host = h;
    md->brokers[i].rack = r;
    md->brokers[i].endpoints = e;
    return 0;
}

void st_md_broker_endpoint(const st_md_broker_t *b, const char *listener, const char **host,
                           size_t *host_len, int32_t *port)
{
    *host = b->host ? b->host : "";
    *host_len = strlen(*host);
    *port = b->port;
    size_t ln = listener ? strlen(listener) : 0;
    for (const char *p = b->endpoints; ln && p && *p;) {
        size_t n = strcspn(p, ",");
        const char *eq = memchr(p, '=', n), *colon = NULL;
        for (const char *q = p + n; eq && q > eq; q--)
            if (*(q - 1) == ':') {
                colon = q - 1;
                break;
            }
        if (eq && colon && (size_t)(eq - p) == ln && strncasecmp(p, listener, ln) == 0) {
            long v = strtol(colon + 1, NULL, 10);
            if (v > 0 && v < 65536) {
                *host = eq + 1;
                *host_len = (size_t)(colon - eq - 1);
                *port = (int32_t)v;
            }
            return;
        }
        p += n + (p[n] == ',');
    }
}

bool st_md_is_replica(const st_md_partition_t *p, int32_t node)
{
    for (int i = 0; i < p->nreplicas; i++)
        if (p->replicas[i] == node)
            return true;
    return false;
}

bool st_md_broker_live(const st_md_t *md, int32_t node)
{
    const st_md_broker_t *b = st_md_broker(md, node);
    return b && !b->fenced;
}

bool st_md_in_isr(const st_md_partition_t *p, int32_t node)
{
    for (int i = 0; i < p->nisr; i++)
        if (p->isr[i] == node)
            return true;
    return false;
}

/* Orders a stored name against len bytes from the network, which may hold anything (a NUL
 * included): never reads past either. */
static int st_md_cmp(const char *n, const char *name, size_t len)
{
    size_t nl = strlen(n);
    int c = memcmp(n, name, nl < len ? nl : len);
    if (c)
        return c;
    return (nl > len) - (nl < len);
}

static int st_md_pos(const st_md_t *md, const char *name, size_t len, bool *found)
{
    int lo = 0, hi = md->ntopics;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (st_md_cmp(md->topics[mid]->name, name, len) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < md->ntopics && st_md_cmp(md->topics[lo]->name, name, len) == 0;
    return lo;
}

int st_md_add_topic(st_md_t *md, st_md_topic_t *t)
{
    bool found;
    int i = st_md_pos(md, t->name, strlen(t->name), &found);
    if (found)
        return ST_E_EXISTS;
    st_md_topic_t **v = realloc(md->topics, (size_t)(md->ntopics + 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    md->topics = v;
    memmove(&v[i + 1], &v[i], (size_t)(md->ntopics - i) * sizeof *v);
    v[i] = t;
    md->ntopics++;
    return 0;
}

int st_md_remove_topic(st_md_t *md, const char *name)
{
    bool found;
    int i = st_md_pos(md, name, strlen(name), &found);
    if (!found)
        return ST_E_NOT_FOUND;
    st_md_topic_free(md->topics[i]);
    memmove(&md->topics[i], &md->topics[i + 1], (size_t)(md->ntopics - i - 1) * sizeof *md->topics);
    md->ntopics--;
    return 0;
}

st_md_t *st_md_clone(const st_md_t *s)
{
    st_md_t *md = st_md_new(s->cluster_id, s->controller_id);
    if (!md)
        return NULL;
    md->version = s->version + 1;
    md->self_incarnation = s->self_incarnation;
    for (int i = 0; i < s->nbrokers; i++)
        if (st_md_put_broker(md, &s->brokers[i]))
            goto fail;
    md->topics = calloc(s->ntopics > 0 ? (size_t)s->ntopics : 1, sizeof *md->topics);
    if (!md->topics)
        goto fail;
    for (int i = 0; i < s->ntopics; i++) {
        md->topics[i] = st_md_topic_clone(s->topics[i]);
        if (!md->topics[i])
            goto fail;
        md->ntopics++;
    }
    if (st_acl_set_copy(&md->acls, &s->acls))
        goto fail;
    if (s->nscram) {
        md->scram = malloc((size_t)s->nscram * sizeof *md->scram);
        if (!md->scram)
            goto fail;
        memcpy(md->scram, s->scram, (size_t)s->nscram * sizeof *md->scram);
        md->nscram = s->nscram;
    }
    if (s->nquotas) {
        md->quotas = malloc((size_t)s->nquotas * sizeof *md->quotas);
        if (!md->quotas)
            goto fail;
        memcpy(md->quotas, s->quotas, (size_t)s->nquotas * sizeof *md->quotas);
        md->nquotas = s->nquotas;
    }
    for (int i = 0; i < s->nbcfg; i++)
        if (st_md_set_broker_config(md, s->bcfg[i].broker, s->bcfg[i].key, s->bcfg[i].value))
            goto fail;
    return md;
fail:
    st_md_unref(md);
    return NULL;
}

const st_md_topic_t *st_md_find(const st_md_t *md, const char *name, int32_t len)
{
    if (len < 0)
        return NULL;
    bool found;
    int i = st_md_pos(md, name, (size_t)len, &found);
    return found ? md->topics[i] : NULL;
}

const st_md_topic_t *st_md_find_id(const st_md_t *md, const uint8_t id[16])
{
    for (int i = 0; i < md->ntopics; i++)
        if (memcmp(md->topics[i]->id, id, 16) == 0)
            return md->topics[i];
    return NULL;
}

const st_md_broker_t *st_md_broker(const st_md_t *md, int32_t node_id)
{
    for (int i = 0; i < md->nbrokers; i++)
        if (md->brokers[i].node_id == node_id)
            return &md->brokers[i];
    return NULL;
}

const st_md_broker_t *st_md_self(const st_md_t *md, int32_t node_id)
{
    const st_md_broker_t *me = md ? st_md_broker(md, node_id) : NULL;
    return me && md->self_incarnation && me->incarnation == md->self_incarnation ? me : NULL;
}

void st_md_assign_shards(st_md_t *md, int nshards)
{
    for (int i = 0; i < md->ntopics; i++) {
        st_md_topic_t *t = md->topics[i];
        uint32_t h = 2166136261u;
        for (int k = 0; k < 16; k++)
            h = (h ^ t->id[k]) * 16777619u;
        for (int32_t p = 0; p < t->npartitions; p++)
            t->partitions[p].shard = (int32_t)((h + (uint32_t)p) % (uint32_t)nshards);
    }
}

/* ---- SCRAM credentials ---- */

static int scram_cmp(const st_md_scram_t *c, const char *user, int8_t mechanism)
{
    int d = strcmp(c->user, user);
    return d ? d : c->mechanism - mechanism;
}

/* The index of (user, mechanism), or where it would go (*found false). */
static int scram_index(const st_md_t *md, const char *user, int8_t mechanism, bool *found)
{
    int lo = 0, hi = md->nscram;
    while (lo < hi) {
        int mid = (lo + hi) / 2, d = scram_cmp(&md->scram[mid], user, mechanism);
        if (d == 0) {
            *found = true;
            return mid;
        }
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

int st_md_put_scram(st_md_t *md, const st_md_scram_t *c)
{
    bool found;
    int i = scram_index(md, c->user, c->mechanism, &found);
    if (!found) {
        st_md_scram_t *v = realloc(md->scram, (size_t)(md->nscram + 1) * sizeof *v);
        if (!v)
            return -ENOMEM;
        md->scram = v;
        memmove(&v[i + 1], &v[i], (size_t)(md->nscram - i) * sizeof *v);
        md->nscram++;
    }
    md->scram[i] = *c;
    return 0;
}

int st_md_remove_scram(st_md_t *md, const char *user, int8_t mechanism)
{
    bool found;
    int i = scram_index(md, user, mechanism, &found);
    if (!found)
        return ST_E_NOT_FOUND;
    memmove(&md->scram[i], &md->scram[i + 1], (size_t)(md->nscram - i - 1) * sizeof *md->scram);
    md->nscram--;
    return 0;
}

const st_md_scram_t *st_md_find_scram(const st_md_t *md, const char *user, int8_t mechanism)
{
    bool found;
    int i = scram_index(md, user, mechanism, &found);
    return found ? &md->scram[i] : NULL;
}

/* ---- client quotas ---- */

const st_quota_t *st_md_find_quota(const st_md_t *md, const st_quota_entity_t *e)
{
    for (int i = 0; i < md->nquotas; i++)
        if (st_quota_entity_eq(&md->quotas[i].e, e))
            return &md->quotas[i];
    return NULL;
}

int st_md_set_quota(st_md_t *md, const st_quota_entity_t *e, int key, double value, bool remove)
{
    if (key < 0 || key >= ST_QUOTA_NKEYS)
        return ST_E_INVALID;
    st_quota_t *q = (st_quota_t *)st_md_find_quota(md, e);
    if (!q) {
        if (remove)
            return 0;
        st_quota_t *v = realloc(md->quotas, (size_t)(md->nquotas + 1) * sizeof *v);
        if (!v)
            return -ENOMEM;
        md->quotas = v;
        q = &v[md->nquotas++];
        memset(q, 0, sizeof *q);
        q->e = *e;
    }
    if (remove) {
        q->set &= (uint8_t) ~(1u << key);
        q->values[key] = 0;
    } else {
        q->set |= (uint8_t)(1u << key);
        q->values[key] = value;
    }
    if (!q->set) {
        int i = (int)(q - md->quotas);
        memmove(q, q + 1, (size_t)(md->nquotas - i - 1) * sizeof *q);
        md->nquotas--;
    }
    return 0;
}

/* ---- dynamic broker settings ---- */

/* The position of (broker, key) in md->bcfg, sorted by broker then key; *found says whether
 * it is there. */
static int bcfg_pos(const st_md_t *md, int32_t broker, const char *key, bool *found)
{
    int lo = 0, hi = md->nbcfg;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        const st_md_bcfg_t *c = &md->bcfg[mid];
        int cmp = c->broker != broker ? (c->broker < broker ? -1 : 1) : strcmp(c->key, key);
        if (cmp == 0) {
            *found = true;
            return mid;
        }
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

int st_md_set_broker_config(st_md_t *md, int32_t broker, const char *key, const char *value)
{
    bool found;
    int i = bcfg_pos(md, broker, key, &found);
    if (!value) {
        if (found) {
            free(md->bcfg[i].key);
            free(md->bcfg[i].value);
            memmove(&md->bcfg[i], &md->bcfg[i + 1], (size_t)(md->nbcfg - i - 1) * sizeof *md->bcfg);
            md->nbcfg--;
        }
        return 0;
    }
    char *v = strdup(value);
    if (!v)
        return -ENOMEM;
    if (found) {
        free(md->bcfg[i].value);
        md->bcfg[i].value = v;
        return 0;
    }
    char *k = strdup(key);
    st_md_bcfg_t *arr = k ? realloc(md->bcfg, (size_t)(md->nbcfg + 1) * sizeof *arr) : NULL;
    if (!arr) {
        free(k);
        free(v);
        return -ENOMEM;
    }
    md->bcfg = arr;
    memmove(&arr[i + 1], &arr[i], (size_t)(md->nbcfg - i) * sizeof *arr);
    arr[i] = (st_md_bcfg_t){broker, k, v};
    md->nbcfg++;
    return 0;
}

const char *st_md_broker_config(const st_md_t *md, int32_t node, const char *key, int *scope)
{
    bool found = false;
    int i = md ? bcfg_pos(md, node, key, &found) : 0;
    int sc = node == ST_MD_BROKER_DEFAULT ? 2 : 1;
    if (md && !found && sc == 1) {
        i = bcfg_pos(md, ST_MD_BROKER_DEFAULT, key, &found);
        sc = 2;
    }
    if (scope)
        *scope = found ? sc : 0;
    return found ? md->bcfg[i].value : NULL;
}

bool st_md_broker_configs_equal(const st_md_t *a, const st_md_t *b)
{
    int na = a ? a->nbcfg : 0, nb = b ? b->nbcfg : 0;
    if (na != nb)
        return false;
    for (int i = 0; i < na; i++)
        if (a->bcfg[i].broker != b->bcfg[i].broker || strcmp(a->bcfg[i].key, b->bcfg[i].key) ||
            strcmp(a->bcfg[i].value, b->bcfg[i].value))
            return false;
    return true;
}
