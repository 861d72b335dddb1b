/*
 * coord.c — the group coordinator of one shard (state machine and invariants in coord.h).
 *
 * Memory: groups, members and offsets are heap objects owned by the coordinator. A group is
 * freed only when no write referring to it is in flight (g->writes empty). Answers are built in
 * the caller's arena, never pointing at coordinator memory, since they are encoded later on
 * another shard.
 *
 * Strings: every protocol string kept here (group, member, instance and client ids, client
 * hosts, protocol types and names, topics, committed metadata) is an st_gstr_t — bytes and a
 * length, as on the wire and in __consumer_offsets — never a C string: a NUL inside one is
 * data like any other byte, and survives a commit, a fetch, a clean of the log and a reload.
 */
#include "group/coord.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "group/records.h"
#include "proto/kerr.h"

enum { G_EMPTY, G_PREPARING, G_COMPLETING, G_STABLE, G_DEAD };
static const char *const st_gstate_names[] = {"Empty", "PreparingRebalance", "CompletingRebalance",
                                              "Stable", "Dead"};

typedef struct st_ggroup st_ggroup_t;
typedef struct st_gwrite st_gwrite_t;

/* A protocol string owned by the coordinator: heap bytes and their length (a NUL is kept
 * after them, never relied on). ptr NULL is the null string; an empty one has a ptr. */
typedef struct st_gstr {
    char *ptr;
    int32_t len;
} st_gstr_t;

#define ST_GSTR_NULL ((st_gstr_t){NULL, -1})
/* printf arguments for "%.*s" of a non-null st_gstr_t (logs only; they stop at a NUL). */
#define ST_GSTR_ARG(s) (int)(s).len, (s).ptr

typedef struct st_gproto {
    st_gstr_t name;
    uint8_t *meta;
    int32_t meta_len;
} st_gproto_t;

typedef struct st_gmember {
    st_ggroup_t *g;
    st_gstr_t member_id;
    st_gstr_t instance_id; /* null: dynamic */
    st_gstr_t client_id;
    st_gstr_t client_host;
    int32_t session_timeout, rebalance_timeout;
    int nprotos;
    st_gproto_t *protos;
    uint8_t *assignment;
    int32_t assignment_len;
    st_timer_t session_timer;
    /* a JoinGroup waiting for the generation to complete */
    bool join_wait;
    int16_t join_version;
    st_arena_t *join_a;
    st_kp_join_group_resp_t *join_resp;
    st_gcoord_done_fn join_done;
    void *join_arg;
    /* a SyncGroup waiting for the leader's assignment */
    bool sync_wait;
    st_kp_sync_group_resp_t *sync_resp;
    st_arena_t *sync_a;
    st_gcoord_done_fn sync_done;
    void *sync_arg;
} st_gmember_t;

typedef struct st_goff {
    st_gstr_t topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    st_gstr_t metadata;
    int64_t commit_ts;
    struct st_goff *next;
} st_goff_t;

typedef struct st_gpending {
    st_gstr_t member_id;
    int64_t deadline_ms; /* monotonic */
} st_gpending_t;

struct st_ggroup {
    st_gcoord_t *c;
    st_gstr_t id;
    int32_t partition;
    int state;
    st_gstr_t protocol_type; /* null until a member joined (or loaded) */
    st_gstr_t protocol;      /* null: none selected */
    st_gstr_t leader;        /* null: no leader */
    int32_t generation;
    int64_t state_ts; /* wall clock of the last state change */
    st_gmember_t **members;
    int nmembers, cap;
    st_gpending_t *pending; /* member ids handed out with MEMBER_ID_REQUIRED */
    int npending;
    st_timer_t join_timer;
    bool initial_delay;           /* the join timer is the initial rebalance delay */
    bool joined_during_delay;     /* a member joined while it ran */
    int64_t initial_remaining_ms; /* rebalance timeout left after the delays so far */
    st_goff_t **offs;             /* committed offsets: hash by (topic, partition) */
    size_t noffs, nbuckets;
    bool stored;         /* the group's latest metadata record in the log is a value */
    st_gwrite_t *writes; /* in flight, referring to this group, in log order */
    struct st_ggroup *next;
};

struct st_gcoord {
    st_loop_t *loop;
    st_gcoord_config_t cfg;
    st_log_t **logs; /* by partition; NULL: not this shard's, or not loaded */
    st_ggroup_t **buckets;
    size_t nbuckets, ngroups;
    bool closed;
    st_timer_t expire_timer;
};

/* ---- small helpers ---- */

/* Replaces *s by a copy of v (null stays null). -ENOMEM leaves *s null. */
static int st_gstr_set(st_gstr_t *s, st_kstr_t v)
{
    free(s->ptr);
    *s = ST_GSTR_NULL;
    if (v.len < 0)
        return 0;
    char *p = malloc((size_t)v.len + 1);
    if (!p)
        return -ENOMEM;
    if (v.len > 0)
        memcpy(p, v.ptr, (size_t)v.len);
    p[v.len] = 0;
    *s = (st_gstr_t){p, v.len};
    return 0;
}

static void st_gstr_free(st_gstr_t *s)
{
    free(s->ptr);
    *s = ST_GSTR_NULL;
}

/* A view of s (no copy). */
static st_kstr_t st_gk(st_gstr_t s)
{
    return s.ptr ? (st_kstr_t){s.ptr, s.len} : ST_KSTR_NULL;
}

/* Whether s holds exactly g's bytes (both null counts as equal). */
static bool st_keq(st_kstr_t s, st_gstr_t g)
{
    if (s.len < 0 || !g.ptr)
        return s.len < 0 && !g.ptr;
    return s.len == g.len && memcmp(s.ptr, g.ptr, (size_t)s.len) == 0;
}

static bool st_geq(st_gstr_t a, st_gstr_t b)
{
    return st_keq(st_gk(a), b);
}

/* A string for an answer, copied into the caller's arena (null stays null). */
static st_kstr_t st_akstr(st_arena_t *a, st_kstr_t s)
{
    if (s.len < 0)
        return ST_KSTR_NULL;
    char *p = st_arena_strndup(a, s.len ? s.ptr : "", (size_t)s.len);
    return p ? (st_kstr_t){p, s.len} : ST_KSTR_EMPTY;
}

static st_kstr_t st_astr(st_arena_t *a, st_gstr_t s)
{
    return st_akstr(a, st_gk(s));
}

/* The same, an empty string for null. */
static st_kstr_t st_astr0(st_arena_t *a, st_gstr_t s)
{
    return s.ptr ? st_astr(a, s) : ST_KSTR_EMPTY;
}

static st_kbytes_t st_abytes(st_arena_t *a, const uint8_t *b, int32_t n)
{
    if (!b || n <= 0)
        return (st_kbytes_t){(const uint8_t *)"", 0};
    uint8_t *p = st_arena_alloc(a, (size_t)n);
    if (!p)
        return (st_kbytes_t){(const uint8_t *)"", 0};
    memcpy(p, b, (size_t)n);
    return (st_kbytes_t){p, n};
}

static uint64_t st_hash_bytes(const void *p, size_t n, uint64_t h)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int32_t st_gcoord_partition_for(st_kstr_t group_id, int32_t n)
{
    /* Java's String.hashCode runs over UTF-16 code units: decode UTF-8 first. */
    int32_t h = 0;
    const uint8_t *p = (const uint8_t *)group_id.ptr;
    int32_t len = group_id.len > 0 ? group_id.len : 0;
    for (int32_t i = 0; i < len;) {
        uint32_t cp = p[i];
        int extra = cp < 0x80         ? 0
                    : (cp >> 5) == 6  ? 1
                    : (cp >> 4) == 14 ? 2
                    : (cp >> 3) == 30 ? 3
                                      : -1;
        if (extra < 0 || i + extra >= len + (extra == 0 ? 1 : 0)) {
            cp = 0xfffd;
            i++;
        } else {
            if (extra > 0)
                cp &= (0x3fu >> extra);
            for (int k = 1; k <= extra; k++)
                cp = (cp << 6) | (p[i + k] & 0x3f);
            i += 1 + extra;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = (int32_t)((uint32_t)h * 31u + (0xd800 + (cp >> 10)));
            h = (int32_t)((uint32_t)h * 31u + (0xdc00 + (cp & 0x3ff)));
        } else {
            h = (int32_t)((uint32_t)h * 31u + cp);
        }
    }
    int32_t a = h == INT32_MIN ? 0 : (h < 0 ? -h : h); /* Kafka's Utils.abs */
    return n > 0 ? a % n : 0;
}

/* ---- groups table ---- */

static size_t st_gbucket(const st_gcoord_t *c, const char *id, int32_t len)
{
    return st_hash_bytes(id, (size_t)len, 1469598103934665603ull) & (c->nbuckets - 1);
}

static st_ggroup_t *st_gfind(const st_gcoord_t *c, st_kstr_t id)
{
    if (id.len < 0)
        return NULL;
    for (st_ggroup_t *g = c->buckets[st_gbucket(c, id.ptr, id.len)]; g; g = g->next)
        if (st_keq(id, g->id))
            return g;
    return NULL;
}

static void st_group_join_timeout(st_timer_t *t);

static st_ggroup_t *st_gcreate(st_gcoord_t *c, st_kstr_t id, int32_t partition)
{
    if (c->ngroups >= c->nbuckets) {
        size_t n = c->nbuckets * 2;
        st_ggroup_t **b = calloc(n, sizeof *b);
        if (b) {
            for (size_t i = 0; i < c->nbuckets; i++)
                for (st_ggroup_t *g = c->buckets[i], *next; g; g = next) {
                    next = g->next;
                    size_t k = st_hash_bytes(g->id.ptr, (size_t)g->id.len, 1469598103934665603ull) &
                               (n - 1);
                    g->next = b[k];
                    b[k] = g;
                }
            free(c->buckets);
            c->buckets = b;
            c->nbuckets = n;
        }
    }
    st_ggroup_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->protocol_type = g->protocol = g->leader = ST_GSTR_NULL;
    int rc = st_gstr_set(&g->id, id);
    g->nbuckets = 8;
    g->offs = calloc(g->nbuckets, sizeof *g->offs);
    if (rc || !g->id.ptr || !g->offs) {
        st_gstr_free(&g->id);
        free(g->offs);
        free(g);
        return NULL;
    }
    g->c = c;
    g->partition = partition;
    g->state = G_EMPTY;
    g->state_ts = st_wall_ms();
    st_timer_init(&g->join_timer, st_group_join_timeout, g);
    size_t k = st_gbucket(c, g->id.ptr, g->id.len);
    g->next = c->buckets[k];
    c->buckets[k] = g;
    c->ngroups++;
    return g;
}

static void st_member_free(st_gcoord_t *c, st_gmember_t *m)
{
    st_loop_timer_stop(c->loop, &m->session_timer);
    st_gstr_free(&m->member_id);
    st_gstr_free(&m->instance_id);
    st_gstr_free(&m->client_id);
    st_gstr_free(&m->client_host);
    for (int i = 0; i < m->nprotos; i++) {
        st_gstr_free(&m->protos[i].name);
        free(m->protos[i].meta);
    }
    free(m->protos);
    free(m->assignment);
    free(m);
}

static void st_offs_clear(st_ggroup_t *g)
{
    for (size_t i = 0; i < g->nbuckets; i++)
        for (st_goff_t *o = g->offs[i], *next; o; o = next) {
            next = o->next;
            st_gstr_free(&o->topic);
            st_gstr_free(&o->metadata);
            free(o);
        }
    memset(g->offs, 0, g->nbuckets * sizeof *g->offs);
    g->noffs = 0;
}

/* Unlinks and frees a group; nothing may refer to it (no write, no waiting request). */
static void st_gfree(st_gcoord_t *c, st_ggroup_t *g)
{
    ST_ASSERT(!g->writes);
    size_t k = st_gbucket(c, g->id.ptr, g->id.len);
    for (st_ggroup_t **pp = &c->buckets[k]; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            c->ngroups--;
            break;
        }
    st_loop_timer_stop(c->loop, &g->join_timer);
    for (int i = 0; i < g->nmembers; i++)
        st_member_free(c, g->members[i]);
    for (int i = 0; i < g->npending; i++)
        st_gstr_free(&g->pending[i].member_id);
    st_offs_clear(g);
    free(g->offs);
    free(g->pending);
    free(g->members);
    st_gstr_free(&g->protocol_type);
    st_gstr_free(&g->protocol);
    st_gstr_free(&g->leader);
    st_gstr_free(&g->id);
    free(g);
}

/* ---- offsets table of a group ---- */

static size_t st_obucket(const st_ggroup_t *g, const char *topic, int32_t len, int32_t partition)
{
    uint64_t h = st_hash_bytes(topic, (size_t)len, 1469598103934665603ull);
    h = st_hash_bytes(&partition, sizeof partition, h);
    return (size_t)(h ^ (h >> 31)) & (g->nbuckets - 1);
}

static st_goff_t *st_ofind(const st_ggroup_t *g, st_kstr_t topic, int32_t partition)
{
    if (topic.len < 0)
        return NULL;
    for (st_goff_t *o = g->offs[st_obucket(g, topic.ptr, topic.len, partition)]; o; o = o->next)
        if (o->partition == partition && st_keq(topic, o->topic))
            return o;
    return NULL;
}

static int st_oset(st_ggroup_t *g, st_kstr_t topic, int32_t partition, int64_t offset,
                   int32_t epoch, st_kstr_t metadata, int64_t ts)
{
    st_goff_t *o = st_ofind(g, topic, partition);
    st_gstr_t md = ST_GSTR_NULL;
    if (st_gstr_set(&md, metadata.len < 0 ? ST_KSTR_EMPTY : metadata))
        return -ENOMEM;
    if (!o) {
        if (g->noffs >= g->nbuckets) {
            size_t n = g->nbuckets * 2;
            st_goff_t **b = calloc(n, sizeof *b);
            if (b) {
                size_t old = g->nbuckets;
                st_goff_t **ob = g->offs;
                g->offs = b;
                g->nbuckets = n;
                for (size_t i = 0; i < old; i++)
                    for (st_goff_t *x = ob[i], *next; x; x = next) {
                        next = x->next;
                        size_t k = st_obucket(g, x->topic.ptr, x->topic.len, x->partition);
                        x->next = b[k];
                        b[k] = x;
                    }
                free(ob);
            }
        }
        o = calloc(1, sizeof *o);
        if (!o || st_gstr_set(&o->topic, topic) || !o->topic.ptr) {
            free(o);
            st_gstr_free(&md);
            return -ENOMEM;
        }
        o->metadata = ST_GSTR_NULL;
        o->partition = partition;
        size_t k = st_obucket(g, o->topic.ptr, o->topic.len, partition);
        o->next = g->offs[k];
        g->offs[k] = o;
        g->noffs++;
    }
    st_gstr_free(&o->metadata);
    o->metadata = md;
    o->offset = offset;
    o->leader_epoch = epoch;
    o->commit_ts = ts;
    return 0;
}

static void st_odel(st_ggroup_t *g, st_kstr_t topic, int32_t partition)
{
    if (topic.len < 0)
        return;
    size_t k = st_obucket(g, topic.ptr, topic.len, partition);
    for (st_goff_t **pp = &g->offs[k]; *pp; pp = &(*pp)->next) {
        st_goff_t *o = *pp;
        if (o->partition == partition && st_keq(topic, o->topic)) {
            *pp = o->next;
            st_gstr_free(&o->topic);
            st_gstr_free(&o->metadata);
            free(o);
            g->noffs--;
            return;
        }
    }
}

/* ---- writes to the partition log ---- */

typedef void (*st_gwrite_fn)(st_gcoord_t *c, st_gwrite_t *w, int res);

struct st_gwrite {
    st_gcoord_t *c;
    int32_t partition;
    st_ggroup_t *g; /* in g->writes while in flight */
    st_gwrite_t *gnext;
    st_gwrite_fn cb; /* may be NULL */
    int32_t generation;
    st_goffsets_t *o;
    int16_t *error;
    st_gcoord_done_fn done;
    void *done_arg;
    int64_t ts;  /* commit: the commit timestamp written */
    int nassign; /* sync: the leader's assignment */
    st_gstr_t *assign_ids;
    st_kbytes_t *assign;
};

static void st_gwrite_free(st_gwrite_t *w)
{
    for (int i = 0; i < w->nassign; i++) {
        st_gstr_free(&w->assign_ids[i]);
        free((void *)w->assign[i].ptr);
    }
    free(w->assign_ids);
    free(w->assign);
    free(w);
}

/* Runs w's callback, frees w, and frees its group if that is Dead and no other write refers
 * to it any more. */
static void st_gwrite_done(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    st_ggroup_t *g = w->g;
    if (w->cb)
        w->cb(c, w, res);
    st_gwrite_free(w);
    if (g && g->state == G_DEAD && !g->writes)
        st_gfree(c, g);
}

static void st_gwrite_durable(void *arg, int res)
{
    st_gwrite_t *w = arg;
    st_gcoord_t *c = w->c;
    if (w->g) {
        st_gwrite_t **pp = &w->g->writes;
        while (*pp != w)
            pp = &(*pp)->gnext;
        *pp = w->gnext;
    }
    if (res)
        ST_WARN("__consumer_offsets-%d: write failed: %s", w->partition, st_strerror(res));
    if (!c->closed && c->cfg.on_durable)
        c->cfg.on_durable(c->cfg.ctx, w->partition);
    st_gwrite_done(c, w, res);
}

/* Appends the batches of b to the partition's log; w->cb runs once they are durable (or the
 * append failed), possibly before this returns. Takes w. */
static void st_gwrite(st_gcoord_t *c, st_gbatch_t *b, st_gwrite_t *w)
{
    st_log_t *log = c->logs[w->partition];
    int rc = st_gbatch_finish(b);
    if (!rc && b->total == 0) {
        st_gwrite_done(c, w, 0);
        return;
    }
    if (!rc && !log)
        rc = ST_E_CLOSED;
    st_log_append_info_t info;
    if (!rc) {
        st_batch_verdict_t v = {0};
        rc = st_log_append(log, b->out.data, b->out.len, 0, &info, &v);
        if (rc)
            ST_WARN("__consumer_offsets-%d: append refused: %s", w->partition,
                    v.why ? v.why : st_strerror(rc));
    }
    if (rc) {
        st_gwrite_done(c, w, rc);
        return;
    }
    if (w->g) {
        st_gwrite_t **pp = &w->g->writes;
        while (*pp)
            pp = &(*pp)->gnext;
        *pp = w;
    }
    rc = st_log_wait_durable(log, info.last_offset + 1, st_gwrite_durable, w);
    if (rc != 0)
        st_gwrite_durable(w, rc > 0 ? 0 : rc);
}

static st_gwrite_t *st_gwrite_new(st_gcoord_t *c, int32_t partition, st_ggroup_t *g,
                                  st_gwrite_fn cb)
{
    st_gwrite_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->c = c;
    w->partition = partition;
    w->g = g;
    w->cb = cb;
    w->generation = g ? g->generation : 0;
    return w;
}

static int st_add_offset_record(st_gbatch_t *b, st_kstr_t group, st_kstr_t topic, int32_t partition,
                                const st_goff_t *o, int64_t ts, const st_goffset_t *in)
{
    st_buf_t k, v;
    st_buf_init(&k);
    st_buf_init(&v);
    st_grec_offset_key(&k, group, topic, partition);
    if (o)
        st_grec_offset_value(&v, o->offset, o->leader_epoch, st_gk(o->metadata), o->commit_ts);
    else if (in)
        st_grec_offset_value(&v, in->offset, in->leader_epoch, in->metadata, ts);
    int rc = k.oom || v.oom
                 ? -ENOMEM
                 : st_gbatch_add(b, k.data, k.len, v.data, (o || in) ? (int32_t)v.len : -1);
    st_buf_fini(&k);
    st_buf_fini(&v);
    return rc;
}

static int st_add_group_record(st_gbatch_t *b, st_kstr_t group, const uint8_t *value,
                               int32_t value_len)
{
    st_buf_t k;
    st_buf_init(&k);
    st_grec_group_key(&k, group);
    int rc = k.oom ? -ENOMEM : st_gbatch_add(b, k.data, k.len, value, value ? value_len : -1);
    st_buf_fini(&k);
    return rc;
}

/* The group metadata value of g now, with `assign` (if given) in place of the members'
 * assignments. */
static int st_group_value(st_ggroup_t *g, int nassign, const st_gstr_t *ids,
                          const st_kbytes_t *assign, uint8_t **out, int32_t *out_len)
{
    st_grec_t rec = {0};
    rec.protocol_type = g->protocol_type.ptr ? st_gk(g->protocol_type) : ST_KSTR_EMPTY;
    rec.generation = g->generation;
    rec.protocol = st_gk(g->protocol);
    rec.leader = st_gk(g->leader);
    rec.current_state_timestamp = g->state_ts;
    rec.nmembers = g->nmembers;
    rec.members = calloc((size_t)g->nmembers + 1, sizeof *rec.members);
    if (!rec.members)
        return -ENOMEM;
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        st_grec_member_t *rm = &rec.members[i];
        rm->member_id = st_gk(m->member_id);
        rm->group_instance_id = st_gk(m->instance_id);
        rm->client_id = st_gk(m->client_id);
        rm->client_host = st_gk(m->client_host);
        rm->rebalance_timeout = m->rebalance_timeout;
        rm->session_timeout = m->session_timeout;
        rm->subscription = (st_kbytes_t){(const uint8_t *)"", 0};
        for (int k = 0; k < m->nprotos; k++)
            if (g->protocol.ptr && st_geq(m->protos[k].name, g->protocol))
                rm->subscription = (st_kbytes_t){m->protos[k].meta, m->protos[k].meta_len};
        rm->assignment = (st_kbytes_t){m->assignment, m->assignment_len};
        if (ids) {
            rm->assignment = (st_kbytes_t){(const uint8_t *)"", 0};
            for (int k = 0; k < nassign; k++)
                if (st_geq(ids[k], m->member_id))
                    rm->assignment = assign[k];
        }
    }
    st_buf_t v;
    st_buf_init(&v);
    st_grec_group_value(&v, &rec);
    free(rec.members);
    if (v.oom) {
        st_buf_fini(&v);
        return -ENOMEM;
    }
    size_t n;
    *out = st_buf_steal(&v, &n);
    *out_len = (int32_t)n;
    return 0;
}

/* Adds g's metadata record (with `assign` as in st_group_value) to b. */
static int st_add_group_value(st_gbatch_t *b, st_ggroup_t *g, int nassign, const st_gstr_t *ids,
                              const st_kbytes_t *assign)
{
    uint8_t *value;
    int32_t len;
    int rc = st_group_value(g, nassign, ids, assign, &value, &len);
    if (rc)
        return rc;
    rc = st_add_group_record(b, st_gk(g->id), value, len);
    free(value);
    return rc;
}

static void st_persist_group_done(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    (void)c;
    if (res == 0)
        w->g->stored = true;
}

/* Writes g's metadata as it is now (Empty after a generation with no member, a static
 * member's new id). The answer does not wait for it. */
static void st_persist_group(st_gcoord_t *c, st_ggroup_t *g)
{
    if (c->closed)
        return;
    st_gwrite_t *w = st_gwrite_new(c, g->partition, g, st_persist_group_done);
    if (!w)
        return;
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    if (st_add_group_value(&b, g, 0, NULL, NULL)) {
        st_gbatch_fini(&b);
        st_gwrite_free(w);
        return;
    }
    st_gwrite(c, &b, w);
    st_gbatch_fini(&b);
}

/* ---- members ---- */

static void st_member_session_timeout(st_timer_t *t);

static void st_member_touch(st_gcoord_t *c, st_gmember_t *m)
{
    if (!c->closed)
        st_loop_timer_start(c->loop, &m->session_timer, m->session_timeout);
}

static st_gmember_t *st_mfind(const st_ggroup_t *g, st_kstr_t id)
{
    if (id.len <= 0)
        return NULL;
    for (int i = 0; i < g->nmembers; i++)
        if (st_keq(id, g->members[i]->member_id))
            return g->members[i];
    return NULL;
}

static st_gmember_t *st_mfind_static(const st_ggroup_t *g, st_kstr_t instance)
{
    if (instance.len < 0)
        return NULL;
    for (int i = 0; i < g->nmembers; i++)
        if (g->members[i]->instance_id.ptr && st_keq(instance, g->members[i]->instance_id))
            return g->members[i];
    return NULL;
}

/* FENCED_INSTANCE_ID when instance names a static member whose id is not member_id. */
static bool st_fenced(const st_ggroup_t *g, st_kstr_t member_id, st_kstr_t instance)
{
    st_gmember_t *m = st_mfind_static(g, instance);
    return m && !st_keq(member_id, m->member_id);
}

static int st_member_set_protocols(st_gmember_t *m, const st_kp_join_group_req_t *req)
{
    st_gproto_t *p = calloc((size_t)req->protocols_count + 1, sizeof *p);
    if (!p)
        return -ENOMEM;
    bool oom = false;
    for (int i = 0; i < req->protocols_count; i++) {
        p[i].name = ST_GSTR_NULL;
        oom |=
            st_gstr_set(&p[i].name, req->protocols[i].name.len < 0 ? ST_KSTR_EMPTY
                                                                   : req->protocols[i].name) != 0;
        int32_t n = req->protocols[i].metadata.len > 0 ? req->protocols[i].metadata.len : 0;
        p[i].meta = malloc((size_t)n + 1);
        if (p[i].meta && n)
            memcpy(p[i].meta, req->protocols[i].metadata.ptr, (size_t)n);
        p[i].meta_len = n;
    }
    for (int i = 0; i < m->nprotos; i++) {
        st_gstr_free(&m->protos[i].name);
        free(m->protos[i].meta);
    }
    free(m->protos);
    m->protos = p;
    m->nprotos = req->protocols_count;
    for (int i = 0; i < m->nprotos; i++)
        if (!p[i].name.ptr || !p[i].meta)
            oom = true;
    return oom ? -ENOMEM : 0;
    return 0;
}

static bool st_member_has_protocol(const st_gmember_t *m, st_kstr_t name)
{
    for (int i = 0; i < m->nprotos; i++)
        if (st_keq(name, m->protos[i].name))
            return true;
    return false;
}

static bool st_protocols_equal(const st_gmember_t *m, const st_kp_join_group_req_t *req)
{
    if (m->nprotos != req->protocols_count)
        return false;
    for (int i = 0; i < m->nprotos; i++) {
        const st_kp_join_group_req_protocol_t *p = &req->protocols[i];
        int32_t n = p->metadata.len > 0 ? p->metadata.len : 0;
        if (!st_keq(p->name, m->protos[i].name) || n != m->protos[i].meta_len ||
            (n && memcmp(p->metadata.ptr, m->protos[i].meta, (size_t)n) != 0))
            return false;
    }
    return true;
}

/* The protocol every member supports that most members prefer (Kafka's selectProtocol);
 * null when the members share none. */
static st_kstr_t st_select_protocol(const st_ggroup_t *g)
{
    if (g->nmembers == 0)
        return ST_KSTR_NULL;
    st_kstr_t best = ST_KSTR_NULL;
    int best_votes = 0;
    const st_gmember_t *first = g->members[0];
    for (int i = 0; i < first->nprotos; i++) {
        st_kstr_t cand = st_gk(first->protos[i].name);
        bool all = true;
        for (int k = 1; k < g->nmembers && all; k++)
            all = st_member_has_protocol(g->members[k], cand);
        if (!all)
            continue;
        int votes = 0;
        for (int k = 0; k < g->nmembers; k++) {
            const st_gmember_t *m = g->members[k];
            for (int j = 0; j < m->nprotos; j++) {
                bool shared = true;
                for (int q = 0; q < g->nmembers && shared; q++)
                    shared = st_member_has_protocol(g->members[q], st_gk(m->protos[j].name));
                if (shared) {
                    if (st_keq(cand, m->protos[j].name))
                        votes++;
                    break;
                }
            }
        }
        if (best.len < 0 || votes > best_votes) {
            best = cand;
            best_votes = votes;
        }
    }
    return best;
}

/* Whether a member joining with req could be part of g (protocol type and a shared
 * protocol with every other member). */
static bool st_group_supports(const st_ggroup_t *g, const st_kp_join_group_req_t *req,
                              const st_gmember_t *self)
{
    if (req->protocol_type.len <= 0 || req->protocols_count <= 0)
        return false;
    int others = g->nmembers - (self ? 1 : 0);
    if (others == 0)
        return true;
    if (!g->protocol_type.ptr || !st_keq(req->protocol_type, g->protocol_type))
        return false;
    for (int i = 0; i < req->protocols_count; i++) {
        st_kstr_t name = req->protocols[i].name;
        if (name.len < 0)
            continue;
        bool all = true;
        for (int k = 0; k < g->nmembers && all; k++)
            if (g->members[k] != self)
                all = st_member_has_protocol(g->members[k], name);
        if (all)
            return true;
    }
    return false;
}

static void st_group_set_state(st_ggroup_t *g, int state)
{
    g->state = state;
    g->state_ts = st_wall_ms();
}

/* ---- answering waiting requests ---- */

static void st_answer_join_error(st_gmember_t *m, int16_t error)
{
    if (!m->join_wait)
        return;
    m->join_wait = false;
    m->join_resp->error_code = error;
    m->join_resp->member_id = st_astr(m->join_a, m->member_id);
    m->join_done(m->join_arg);
}

static void st_answer_sync(st_gmember_t *m, int16_t error)
{
    if (!m->sync_wait)
        return;
    m->sync_wait = false;
    st_kp_sync_group_resp_t *r = m->sync_resp;
    r->error_code = error;
    if (!error) {
        st_ggroup_t *g = m->g;
        r->assignment = st_abytes(m->sync_a, m->assignment, m->assignment_len);
        r->protocol_type = st_astr(m->sync_a, g->protocol_type);
        r->protocol_name = st_astr(m->sync_a, g->protocol);
    }
    m->sync_done(m->sync_arg);
}

/* Fills a JoinGroup answer with the current generation; the leader gets the members unless
 * skip (a static leader's rejoin with v9+: members listed, but the assignment stays). */
static void st_fill_join(st_ggroup_t *g, st_gmember_t *m, int16_t version, st_arena_t *a,
                         st_kp_join_group_resp_t *r, bool members, bool skip)
{
    r->error_code = 0;
    r->generation_id = g->generation;
    r->protocol_type = st_astr(a, g->protocol_type);
    r->protocol_name = st_astr(a, g->protocol);
    r->leader = st_astr0(a, g->leader);
    r->member_id = st_astr(a, m->member_id);
    r->skip_assignment = skip;
    r->members_count = 0;
    if (!members)
        return;
    r->members = st_arena_zalloc(a, (size_t)g->nmembers * sizeof *r->members + 1);
    if (!r->members)
        return;
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *x = g->members[i];
        st_kp_join_group_resp_member_t *o = &r->members[r->members_count++];
        st_kp_join_group_resp_member_init(o);
        o->member_id = st_astr(a, x->member_id);
        o->group_instance_id = st_astr(a, x->instance_id);
        o->metadata = (st_kbytes_t){(const uint8_t *)"", 0};
        for (int k = 0; k < x->nprotos; k++)
            if (g->protocol.ptr && st_geq(x->protos[k].name, g->protocol))
                o->metadata = st_abytes(a, x->protos[k].meta, x->protos[k].meta_len);
    }
    (void)version;
}

/* ---- the rebalance ---- */

static void st_complete_join(st_gcoord_t *c, st_ggroup_t *g);

static int32_t st_max_rebalance_timeout(const st_ggroup_t *g)
{
    int32_t t = 0;
    for (int i = 0; i < g->nmembers; i++)
        if (g->members[i]->rebalance_timeout > t)
            t = g->members[i]->rebalance_timeout;
    return t > 0 ? t : 1;
}

/* Moves g to PreparingRebalance (Kafka's prepareRebalance). */
static void st_prepare_rebalance(st_gcoord_t *c, st_ggroup_t *g)
{
    if (g->state == G_COMPLETING) {
        for (int i = 0; i < g->nmembers; i++) {
            st_gmember_t *m = g->members[i];
            free(m->assignment);
            m->assignment = NULL;
            m->assignment_len = 0;
            st_answer_sync(m, ST_KERR_REBALANCE_IN_PROGRESS);
        }
    }
    int32_t rt = st_max_rebalance_timeout(g);
    if (g->state == G_EMPTY && c->cfg.initial_rebalance_delay_ms > 0) {
        int64_t d = c->cfg.initial_rebalance_delay_ms < rt ? c->cfg.initial_rebalance_delay_ms : rt;
        g->initial_delay = true;
        g->joined_during_delay = false;
        g->initial_remaining_ms = rt - d;
        if (!c->closed)
            st_loop_timer_start(c->loop, &g->join_timer, d);
    } else {
        g->initial_delay = false;
        if (!c->closed)
            st_loop_timer_start(c->loop, &g->join_timer, rt);
    }
    st_group_set_state(g, G_PREPARING);
}

static bool st_all_joined(const st_ggroup_t *g)
{
    for (int i = 0; i < g->nmembers; i++)
        if (!g->members[i]->join_wait)
            return false;
    return true;
}

static void st_try_complete_join(st_gcoord_t *c, st_ggroup_t *g)
{
    if (g->state != G_PREPARING)
        return;
    if (g->nmembers == 0 || (!g->initial_delay && st_all_joined(g)))
        st_complete_join(c, g);
}

static void st_group_join_timeout(st_timer_t *t)
{
    st_ggroup_t *g = t->data;
    st_gcoord_t *c = g->c;
    if (g->state != G_PREPARING)
        return;
    if (g->initial_delay && g->joined_during_delay && g->initial_remaining_ms > 0) {
        int64_t d = c->cfg.initial_rebalance_delay_ms < g->initial_remaining_ms
                        ? c->cfg.initial_rebalance_delay_ms
                        : g->initial_remaining_ms;
        g->initial_remaining_ms -= d;
        g->joined_during_delay = false;
        st_loop_timer_start(c->loop, &g->join_timer, d);
        return;
    }
    st_complete_join(c, g);
}

static void st_remove_member_at(st_ggroup_t *g, int i)
{
    memmove(&g->members[i], &g->members[i + 1], (size_t)(g->nmembers - i - 1) * sizeof *g->members);
    g->nmembers--;
}

/* Ends the join phase (Kafka's onCompleteJoin): members that did not rejoin leave (static
 * ones stay, holding their partitions until their session expires), the generation moves
 * on, and every waiting member is answered, the leader with the member list. */
static void st_complete_join(st_gcoord_t *c, st_ggroup_t *g)
{
    st_loop_timer_stop(c->loop, &g->join_timer);
    g->initial_delay = false;
    for (int i = 0; i < g->nmembers;) {
        st_gmember_t *m = g->members[i];
        if (!m->join_wait && !m->instance_id.ptr) {
            if (g->leader.ptr && st_geq(g->leader, m->member_id))
                st_gstr_free(&g->leader);
            st_answer_sync(m, ST_KERR_UNKNOWN_MEMBER_ID);
            st_remove_member_at(g, i);
            st_member_free(c, m);
        } else {
            i++;
        }
    }
    bool any_joined = false;
    for (int i = 0; i < g->nmembers; i++)
        any_joined |= g->members[i]->join_wait;
    g->generation++;
    st_gstr_free(&g->protocol);
    if (g->nmembers == 0 || !any_joined) {
        /* Static members that did not rejoin alone cannot form a generation: drop them. */
        while (g->nmembers > 0) {
            st_gmember_t *m = g->members[g->nmembers - 1];
            g->nmembers--;
            st_member_free(c, m);
        }
        st_gstr_free(&g->leader);
        st_group_set_state(g, G_EMPTY);
        st_persist_group(c, g);
        return;
    }
    st_gstr_set(&g->protocol, st_select_protocol(g));
    st_gmember_t *lm = g->leader.ptr ? st_mfind(g, st_gk(g->leader)) : NULL;
    if (!lm || !lm->join_wait) {
        st_gstr_free(&g->leader);
        for (int i = 0; i < g->nmembers && !g->leader.ptr; i++)
            if (g->members[i]->join_wait)
                st_gstr_set(&g->leader, st_gk(g->members[i]->member_id));
    }
    st_group_set_state(g, G_COMPLETING);
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        if (!m->join_wait)
            continue;
        m->join_wait = false;
        bool leader = g->leader.ptr && st_geq(g->leader, m->member_id);
        st_fill_join(g, m, m->join_version, m->join_a, m->join_resp, leader, false);
        st_member_touch(c, m);
        m->join_done(m->join_arg);
    }
}

/* Removes a member (leave, session timeout) and moves the group on (Kafka's
 * removeMemberAndUpdateGroup). */
static void st_remove_member(st_gcoord_t *c, st_ggroup_t *g, st_gmember_t *m)
{
    st_answer_join_error(m, ST_KERR_UNKNOWN_MEMBER_ID);
    st_answer_sync(m, ST_KERR_UNKNOWN_MEMBER_ID);
    for (int i = 0; i < g->nmembers; i++)
        if (g->members[i] == m) {
            st_remove_member_at(g, i);
            break;
        }
    if (g->leader.ptr && st_geq(g->leader, m->member_id))
        st_gstr_free(&g->leader);
    st_member_free(c, m);
    switch (g->state) {
    case G_STABLE:
    case G_COMPLETING:
        st_prepare_rebalance(c, g);
        st_try_complete_join(c, g);
        break;
    case G_PREPARING:
        st_try_complete_join(c, g);
        break;
    default:
        break;
    }
}

static void st_member_session_timeout(st_timer_t *t)
{
    st_gmember_t *m = t->data;
    st_ggroup_t *g = m->g;
    st_gcoord_t *c = g->c;
    if (m->join_wait || m->sync_wait) {
        st_member_touch(c, m);
        return;
    }
    ST_INFO("group %.*s: member %.*s timed out after %d ms", ST_GSTR_ARG(g->id),
            ST_GSTR_ARG(m->member_id), m->session_timeout);
    st_remove_member(c, g, m);
}

static st_gmember_t *st_member_new(st_ggroup_t *g, st_kstr_t id, const st_kp_join_group_req_t *req,
                                   int16_t version, st_kstr_t client_id, st_kstr_t client_host)
{
    st_gmember_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    if (g->nmembers == g->cap) {
        int cap = g->cap ? g->cap * 2 : 4;
        st_gmember_t **a = realloc(g->members, (size_t)cap * sizeof *a);
        if (!a) {
            free(m);
            return NULL;
        }
        g->members = a;
        g->cap = cap;
    }
    m->g = g;
    m->member_id = m->instance_id = m->client_id = m->client_host = ST_GSTR_NULL;
    int rc = st_gstr_set(&m->member_id, id);
    rc |= st_gstr_set(&m->instance_id, req->group_instance_id);
    rc |= st_gstr_set(&m->client_id, client_id.len < 0 ? ST_KSTR_EMPTY : client_id);
    rc |= st_gstr_set(&m->client_host, client_host.len < 0 ? ST_KSTR_EMPTY : client_host);
    m->session_timeout = req->session_timeout_ms;
    m->rebalance_timeout = version >= 1 && req->rebalance_timeout_ms > 0 ? req->rebalance_timeout_ms
                                                                         : req->session_timeout_ms;
    st_timer_init(&m->session_timer, st_member_session_timeout, m);
    if (rc || !m->member_id.ptr || st_member_set_protocols(m, req)) {
        st_member_free(g->c, m);
        return NULL;
    }
    g->members[g->nmembers++] = m;
    return m;
}

static void st_member_wait_join(st_gmember_t *m, int16_t version, st_arena_t *a,
                                st_kp_join_group_resp_t *resp, st_gcoord_done_fn done, void *arg)
{
    st_answer_join_error(m, ST_KERR_REBALANCE_IN_PROGRESS); /* a superseded join */
    m->join_wait = true;
    m->join_version = version;
    m->join_a = a;
    m->join_resp = resp;
    m->join_done = done;
    m->join_arg = arg;
}

static void st_add_member_and_rebalance(st_gcoord_t *c, st_ggroup_t *g, st_kstr_t id,
                                        const st_kp_join_group_req_t *req, int16_t version,
                                        st_kstr_t client_id, st_kstr_t client_host, st_arena_t *a,
                                        st_kp_join_group_resp_t *resp, st_gcoord_done_fn done,
                                        void *arg)
{
    st_gmember_t *m = st_member_new(g, id, req, version, client_id, client_host);
    if (!m) {
        resp->error_code = ST_KERR_UNKNOWN_SERVER_ERROR;
        done(arg);
        return;
    }
    if (g->nmembers == 1)
        st_gstr_set(&g->protocol_type, req->protocol_type);
    st_member_wait_join(m, version, a, resp, done, arg);
    st_member_touch(c, m);
    if (g->state == G_PREPARING) {
        if (g->initial_delay)
            g->joined_during_delay = true;
    } else {
        st_prepare_rebalance(c, g);
    }
    st_try_complete_join(c, g);
}

/* Kafka's member id: the client id (its bytes, NULs included, at most 200), '-', a UUID.
 * Returns the length written to out (at least 240 bytes). */
static int32_t st_new_member_id(char *out, size_t n, st_kstr_t client_id)
{
    uint8_t r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        uint64_t t = (uint64_t)st_mono_ns();
        for (size_t i = 0; i < sizeof r; i++)
            r[i] = (uint8_t)(t >> (8 * (i % 8))) ^ (uint8_t)i;
    }
    r[6] = (uint8_t)((r[6] & 0x0f) | 0x40);
    r[8] = (uint8_t)((r[8] & 0x3f) | 0x80);
    int cl = client_id.len > 0 ? (client_id.len > 200 ? 200 : client_id.len) : 0;
    ST_ASSERT(n >= 240);
    if (cl)
        memcpy(out, client_id.ptr, (size_t)cl);
    int k = snprintf(out + cl, n - (size_t)cl,
                     "-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0],
                     r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
                     r[13], r[14], r[15]);
    return cl + k;
}

static void st_pending_prune(st_ggroup_t *g)
{
    int64_t now = st_mono_ms();
    for (int i = 0; i < g->npending;) {
        if (g->pending[i].deadline_ms <= now) {
            st_gstr_free(&g->pending[i].member_id);
            g->pending[i] = g->pending[--g->npending];
        } else {
            i++;
        }
    }
}

static bool st_pending_take(st_ggroup_t *g, st_kstr_t id)
{
    st_pending_prune(g);
    for (int i = 0; i < g->npending; i++)
        if (st_keq(id, g->pending[i].member_id)) {
            st_gstr_free(&g->pending[i].member_id);
            g->pending[i] = g->pending[--g->npending];
            return true;
        }
    return false;
}

/* A static member came back with a new process (unknown member id, known instance id):
 * it takes its old slot under a new id (Kafka's updateStaticMemberAndRebalance). */
static void st_replace_static(st_gcoord_t *c, st_ggroup_t *g, st_gmember_t *m, st_kstr_t id,
                              const st_kp_join_group_req_t *req, int16_t version,
                              st_kstr_t client_id, st_kstr_t client_host, st_arena_t *a,
                              st_kp_join_group_resp_t *resp, st_gcoord_done_fn done, void *arg)
{
    st_answer_join_error(m, ST_KERR_FENCED_INSTANCE_ID);
    st_answer_sync(m, ST_KERR_FENCED_INSTANCE_ID);
    st_gstr_t nid = ST_GSTR_NULL;
    if (st_gstr_set(&nid, id) || st_member_set_protocols(m, req)) {
        st_gstr_free(&nid);
        resp->error_code = ST_KERR_UNKNOWN_SERVER_ERROR;
        done(arg);
        return;
    }
    bool was_leader = g->leader.ptr && st_geq(g->leader, m->member_id);
    if (was_leader)
        st_gstr_set(&g->leader, id);
    st_gstr_free(&m->member_id);
    m->member_id = nid;
    st_gstr_set(&m->client_id, client_id.len < 0 ? ST_KSTR_EMPTY : client_id);
    st_gstr_set(&m->client_host, client_host.len < 0 ? ST_KSTR_EMPTY : client_host);
    m->session_timeout = req->session_timeout_ms;
    m->rebalance_timeout =
        req->rebalance_timeout_ms > 0 ? req->rebalance_timeout_ms : req->session_timeout_ms;
    st_member_touch(c, m);
    st_kstr_t sel = st_select_protocol(g);
    bool same = sel.len >= 0 && g->protocol.ptr && st_keq(sel, g->protocol);
    if (g->state == G_STABLE && same) {
        /* No rebalance: the member syncs and gets its old assignment back. */
        st_fill_join(g, m, version, a, resp, was_leader && version >= 9,
                     was_leader && version >= 9);
        st_persist_group(c, g);
        done(arg);
        return;
    }
    st_member_wait_join(m, version, a, resp, done, arg);
    if (g->state != G_PREPARING)
        st_prepare_rebalance(c, g);
    st_try_complete_join(c, g);
}

void st_gcoord_join(st_gcoord_t *c, int32_t partition, const st_kp_join_group_req_t *req,
                    int16_t version, st_kstr_t client_id, st_kstr_t client_host, st_arena_t *a,
                    st_kp_join_group_resp_t *resp, st_gcoord_done_fn done, void *arg)
{
    resp->member_id = req->member_id.len > 0 ? st_akstr(a, req->member_id) : ST_KSTR_EMPTY;
    resp->protocol_name = version >= 7 ? ST_KSTR_NULL : ST_KSTR_EMPTY;
    int16_t err = 0;
    if (c->closed)
        err = ST_KERR_NOT_COORDINATOR;
    else if (!st_gcoord_loaded(c, partition))
        err = ST_KERR_NOT_COORDINATOR;
    else if (req->group_id.len <= 0)
        err = ST_KERR_INVALID_GROUP_ID;
    else if (req->session_timeout_ms < c->cfg.min_session_timeout_ms ||
             req->session_timeout_ms > c->cfg.max_session_timeout_ms)
        err = ST_KERR_INVALID_SESSION_TIMEOUT;
    if (err) {
        resp->error_code = err;
        done(arg);
        return;
    }
    st_ggroup_t *g = st_gfind(c, req->group_id);
    bool unknown = req->member_id.len <= 0;
    if (!g) {
        if (!unknown) {
            resp->error_code = ST_KERR_UNKNOWN_MEMBER_ID;
            done(arg);
            return;
        }
        g = st_gcreate(c, req->group_id, partition);
        if (!g) {
            resp->error_code = ST_KERR_UNKNOWN_SERVER_ERROR;
            done(arg);
            return;
        }
    }
    if (g->state == G_DEAD) {
        resp->error_code = ST_KERR_COORDINATOR_NOT_AVAILABLE;
        done(arg);
        return;
    }
    st_gmember_t *self =
        unknown ? st_mfind_static(g, req->group_instance_id) : st_mfind(g, req->member_id);
    if (!st_group_supports(g, req, self)) {
        resp->error_code = ST_KERR_INCONSISTENT_GROUP_PROTOCOL;
        done(arg);
        return;
    }
    char idbuf[320];
    st_kstr_t id = {idbuf, 0};
    if (unknown) {
        id.len = st_new_member_id(idbuf, sizeof idbuf, client_id);
        if (req->group_instance_id.len >= 0) {
            st_gmember_t *m = st_mfind_static(g, req->group_instance_id);
            if (m)
                st_replace_static(c, g, m, id, req, version, client_id, client_host, a, resp, done,
                                  arg);
            else
                st_add_member_and_rebalance(c, g, id, req, version, client_id, client_host, a, resp,
                                            done, arg);
            return;
        }
        if (version >= 4) {
            st_pending_prune(g);
            st_gpending_t *p = realloc(g->pending, (size_t)(g->npending + 1) * sizeof *p);
            if (p) {
                g->pending = p;
                p[g->npending].member_id = ST_GSTR_NULL;
                p[g->npending].deadline_ms = st_mono_ms() + req->session_timeout_ms;
                if (st_gstr_set(&p[g->npending].member_id, id) == 0)
                    g->npending++;
            }
            resp->error_code = ST_KERR_MEMBER_ID_REQUIRED;
            resp->member_id = st_akstr(a, id);
            done(arg);
            return;
        }
        st_add_member_and_rebalance(c, g, id, req, version, client_id, client_host, a, resp, done,
                                    arg);
        return;
    }
    st_gmember_t *m = st_mfind(g, req->member_id);
    if (!m) {
        if (st_fenced(g, req->member_id, req->group_instance_id)) {
            resp->error_code = ST_KERR_FENCED_INSTANCE_ID;
        } else if (g->state != G_DEAD && st_pending_take(g, req->member_id)) {
            st_add_member_and_rebalance(c, g, req->member_id, req, version, client_id, client_host,
                                        a, resp, done, arg);
            return;
        } else {
            resp->error_code = ST_KERR_UNKNOWN_MEMBER_ID;
        }
        done(arg);
        return;
    }
    if (req->group_instance_id.len >= 0 &&
        (!m->instance_id.ptr || !st_keq(req->group_instance_id, m->instance_id))) {
        resp->error_code = ST_KERR_FENCED_INSTANCE_ID;
        done(arg);
        return;
    }
    bool same = st_protocols_equal(m, req);
    bool leader = g->leader.ptr && st_geq(g->leader, m->member_id);
    m->session_timeout = req->session_timeout_ms;
    if (version >= 1 && req->rebalance_timeout_ms > 0)
        m->rebalance_timeout = req->rebalance_timeout_ms;
    switch (g->state) {
    case G_PREPARING:
        if (!same)
            st_member_set_protocols(m, req);
        st_member_wait_join(m, version, a, resp, done, arg);
        st_member_touch(c, m);
        st_try_complete_join(c, g);
        return;
    case G_COMPLETING:
    case G_STABLE:
        if (same && (g->state == G_COMPLETING || !leader)) {
            st_fill_join(g, m, version, a, resp, leader, false);
            st_member_touch(c, m);
            done(arg);
            return;
        }
        if (!same)
            st_member_set_protocols(m, req);
        st_member_wait_join(m, version, a, resp, done, arg);
        st_member_touch(c, m);
        st_prepare_rebalance(c, g);
        st_try_complete_join(c, g);
        return;
    default:
        resp->error_code = ST_KERR_UNKNOWN_MEMBER_ID;
        done(arg);
        return;
    }
}

/* ---- SyncGroup ---- */

static void st_sync_written(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    st_ggroup_t *g = w->g;
    if (g->state != G_COMPLETING || g->generation != w->generation)
        return; /* a rebalance started meanwhile and answered the waiting syncs */
    if (res) {
        for (int i = 0; i < g->nmembers; i++)
            st_answer_sync(g->members[i], ST_KERR_COORDINATOR_NOT_AVAILABLE);
        st_prepare_rebalance(c, g);
        st_try_complete_join(c, g);
        return;
    }
    g->stored = true;
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        free(m->assignment);
        m->assignment = NULL;
        m->assignment_len = 0;
        for (int k = 0; k < w->nassign; k++)
            if (st_geq(w->assign_ids[k], m->member_id) && w->assign[k].len > 0) {
                m->assignment = malloc((size_t)w->assign[k].len);
                if (m->assignment) {
                    memcpy(m->assignment, w->assign[k].ptr, (size_t)w->assign[k].len);
                    m->assignment_len = w->assign[k].len;
                }
            }
    }
    st_group_set_state(g, G_STABLE);
    for (int i = 0; i < g->nmembers; i++)
        st_answer_sync(g->members[i], 0);
}

void st_gcoord_sync(st_gcoord_t *c, int32_t partition, const st_kp_sync_group_req_t *req,
                    int16_t version, st_arena_t *a, st_kp_sync_group_resp_t *resp,
                    st_gcoord_done_fn done, void *arg)
{
    resp->assignment = (st_kbytes_t){(const uint8_t *)"", 0};
    int16_t err = 0;
    st_ggroup_t *g = NULL;
    st_gmember_t *m = NULL;
    if (c->closed || !st_gcoord_loaded(c, partition))
        err = ST_KERR_NOT_COORDINATOR;
    else if (req->group_id.len <= 0)
        err = ST_KERR_INVALID_GROUP_ID;
    else if (!(g = st_gfind(c, req->group_id)) || g->state == G_DEAD)
        err = ST_KERR_UNKNOWN_MEMBER_ID;
    else if (st_fenced(g, req->member_id, req->group_instance_id))
        err = ST_KERR_FENCED_INSTANCE_ID;
    else if (!(m = st_mfind(g, req->member_id)))
        err = ST_KERR_UNKNOWN_MEMBER_ID;
    else if (req->generation_id != g->generation)
        err = ST_KERR_ILLEGAL_GENERATION;
    else if (version >= 5 && ((req->protocol_type.len >= 0 && g->protocol_type.ptr &&
                               !st_keq(req->protocol_type, g->protocol_type)) ||
                              (req->protocol_name.len >= 0 && g->protocol.ptr &&
                               !st_keq(req->protocol_name, g->protocol))))
        err = ST_KERR_INCONSISTENT_GROUP_PROTOCOL;
    else if (g->state == G_EMPTY)
        err = ST_KERR_UNKNOWN_MEMBER_ID;
    else if (g->state == G_PREPARING)
        err = ST_KERR_REBALANCE_IN_PROGRESS;
    if (err) {
        resp->error_code = err;
        done(arg);
        return;
    }
    st_member_touch(c, m);
    if (m->sync_wait)
        st_answer_sync(m, ST_KERR_REBALANCE_IN_PROGRESS);
    m->sync_wait = true;
    m->sync_resp = resp;
    m->sync_a = a;
    m->sync_done = done;
    m->sync_arg = arg;
    if (g->state == G_STABLE) {
        st_answer_sync(m, 0);
        return;
    }
    bool leader = g->leader.ptr && st_geq(g->leader, m->member_id);
    if (!leader)
        return;
    /* The leader's assignment: persist it with the group, then answer everyone. */
    st_gwrite_t *w = st_gwrite_new(c, partition, g, st_sync_written);
    if (w) {
        w->assign_ids = calloc((size_t)req->assignments_count + 1, sizeof *w->assign_ids);
        w->assign = calloc((size_t)req->assignments_count + 1, sizeof *w->assign);
    }
    if (!w || !w->assign_ids || !w->assign) {
        if (w)
            st_gwrite_free(w);
        st_answer_sync(m, ST_KERR_UNKNOWN_SERVER_ERROR);
        return;
    }
    for (int i = 0; i < req->assignments_count; i++) {
        const st_kp_sync_group_req_assignment_t *as = &req->assignments[i];
        int32_t n = as->assignment.len > 0 ? as->assignment.len : 0;
        uint8_t *copy = malloc((size_t)n + 1);
        st_gstr_t id = ST_GSTR_NULL;
        if (!copy || st_gstr_set(&id, as->member_id) || !id.ptr) {
            free(copy);
            st_gstr_free(&id);
            continue;
        }
        if (n)
            memcpy(copy, as->assignment.ptr, (size_t)n);
        w->assign_ids[w->nassign] = id;
        w->assign[w->nassign++] = (st_kbytes_t){copy, n};
    }
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    if (st_add_group_value(&b, g, w->nassign, w->assign_ids, w->assign)) {
        st_gbatch_fini(&b);
        st_gwrite_free(w);
        st_answer_sync(m, ST_KERR_UNKNOWN_SERVER_ERROR);
        return;
    }
    st_gwrite(c, &b, w);
    st_gbatch_fini(&b);
}

/* ---- Heartbeat, LeaveGroup ---- */

void st_gcoord_heartbeat(st_gcoord_t *c, int32_t partition, const st_kp_heartbeat_req_t *req,
                         st_kp_heartbeat_resp_t *resp)
{
    st_ggroup_t *g = NULL;
    st_gmember_t *m = NULL;
    int16_t err = 0;
    if (c->closed || !st_gcoord_loaded(c, partition))
        err = ST_KERR_NOT_COORDINATOR;
    else if (req->group_id.len <= 0)
        err = ST_KERR_INVALID_GROUP_ID;
    else if (!(g = st_gfind(c, req->group_id)) || g->state == G_DEAD)
        err = ST_KERR_UNKNOWN_MEMBER_ID;
    else if (st_fenced(g, req->member_id, req->group_instance_id))
        err = ST_KERR_FENCED_INSTANCE_ID;
    else if (!(m = st_mfind(g, req->member_id)) || g->state == G_EMPTY)
        err = ST_KERR_UNKNOWN_MEMBER_ID;
    else if (req->generation_id != g->generation)
        err = ST_KERR_ILLEGAL_GENERATION;
    else {
        st_member_touch(c, m);
        if (g->state == G_PREPARING)
            err = ST_KERR_REBALANCE_IN_PROGRESS;
    }
    resp->error_code = err;
}

static int16_t st_leave_one(st_gcoord_t *c, st_ggroup_t *g, st_kstr_t member_id, st_kstr_t instance)
{
    st_gmember_t *m;
    if (instance.len >= 0) {
        m = st_mfind_static(g, instance);
        if (!m)
            return ST_KERR_UNKNOWN_MEMBER_ID;
        if (member_id.len > 0 && !st_keq(member_id, m->member_id))
            return ST_KERR_FENCED_INSTANCE_ID;
    } else {
        m = st_mfind(g, member_id);
        if (!m)
            return ST_KERR_UNKNOWN_MEMBER_ID;
    }
    ST_DEBUG("group %.*s: member %.*s leaves", ST_GSTR_ARG(g->id), ST_GSTR_ARG(m->member_id));
    st_remove_member(c, g, m);
    return 0;
}

void st_gcoord_leave(st_gcoord_t *c, int32_t partition, const st_kp_leave_group_req_t *req,
                     int16_t version, st_arena_t *a, st_kp_leave_group_resp_t *resp)
{
    st_ggroup_t *g = NULL;
    int16_t err = 0;
    if (c->closed || !st_gcoord_loaded(c, partition))
        err = ST_KERR_NOT_COORDINATOR;
    else if (req->group_id.len <= 0)
        err = ST_KERR_INVALID_GROUP_ID;
    else if (!(g = st_gfind(c, req->group_id)) || g->state == G_DEAD)
        err = ST_KERR_UNKNOWN_MEMBER_ID;
    if (version < 3) {
        resp->error_code = err ? err : st_leave_one(c, g, req->member_id, ST_KSTR_NULL);
        return;
    }
    if (err && err != ST_KERR_UNKNOWN_MEMBER_ID) {
        resp->error_code = err;
        return;
    }
    resp->members = st_arena_zalloc(a, (size_t)req->members_count * sizeof *resp->members + 1);
    if (!resp->members) {
        resp->error_code = ST_KERR_UNKNOWN_SERVER_ERROR;
        return;
    }
    resp->members_count = req->members_count;
    for (int i = 0; i < req->members_count; i++) {
        const st_kp_leave_group_req_member_t *q = &req->members[i];
        st_kp_leave_group_resp_member_t *o = &resp->members[i];
        st_kp_leave_group_resp_member_init(o);
        o->member_id = q->member_id.len >= 0 ? st_akstr(a, q->member_id) : ST_KSTR_EMPTY;
        o->group_instance_id = st_akstr(a, q->group_instance_id);
        o->error_code =
            g ? st_leave_one(c, g, q->member_id, q->group_instance_id) : ST_KERR_UNKNOWN_MEMBER_ID;
    }
}

/* ---- DescribeGroups, ListGroups ---- */

void st_gcoord_describe(st_gcoord_t *c, int32_t partition, st_kstr_t group_id, int16_t version,
                        st_arena_t *a, st_kp_describe_groups_resp_group_t *out)
{
    out->group_id = group_id.len >= 0 ? st_akstr(a, group_id) : ST_KSTR_EMPTY;
    out->group_state = st_kstr("Dead");
    out->protocol_type = ST_KSTR_EMPTY;
    out->protocol_data = ST_KSTR_EMPTY;
    if (c->closed || !st_gcoord_loaded(c, partition)) {
        out->error_code = ST_KERR_NOT_COORDINATOR;
        return;
    }
    if (group_id.len <= 0) {
        out->error_code = ST_KERR_INVALID_GROUP_ID;
        return;
    }
    st_ggroup_t *g = st_gfind(c, group_id);
    if (!g || g->state == G_DEAD) {
        if (version >= 6) {
            out->error_code = ST_KERR_GROUP_ID_NOT_FOUND;
            out->error_message = st_kstr("Group does not exist");
        }
        return;
    }
    out->group_state = st_kstr(st_gstate_names[g->state]);
    out->protocol_type = st_astr0(a, g->protocol_type);
    out->protocol_data = st_astr0(a, g->protocol);
    out->members = st_arena_zalloc(a, (size_t)g->nmembers * sizeof *out->members + 1);
    if (!out->members)
        return;
    out->members_count = g->nmembers;
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        st_kp_describe_groups_resp_member_t *o = &out->members[i];
        st_kp_describe_groups_resp_member_init(o);
        o->member_id = st_astr(a, m->member_id);
        o->group_instance_id = st_astr(a, m->instance_id);
        o->client_id = st_astr(a, m->client_id);
        o->client_host = st_astr(a, m->client_host);
        o->member_metadata = (st_kbytes_t){(const uint8_t *)"", 0};
        o->member_assignment = (st_kbytes_t){(const uint8_t *)"", 0};
        if (g->state == G_STABLE) {
            for (int k = 0; k < m->nprotos; k++)
                if (g->protocol.ptr && st_geq(m->protos[k].name, g->protocol))
                    o->member_metadata = st_abytes(a, m->protos[k].meta, m->protos[k].meta_len);
            o->member_assignment = st_abytes(a, m->assignment, m->assignment_len);
        }
    }
}

static bool st_filter_has(const st_kstr_t *f, int n, const char *v)
{
    for (int i = 0; i < n; i++)
        if (f[i].len >= 0 && (size_t)f[i].len == strlen(v) &&
            strncasecmp(f[i].ptr, v, (size_t)f[i].len) == 0)
            return true;
    return false;
}

void st_gcoord_list(st_gcoord_t *c, const st_kstr_t *states, int nstates, const st_kstr_t *types,
                    int ntypes, st_arena_t *a, st_kp_list_groups_resp_group_t **out, int32_t *n)
{
    *n = 0;
    *out = st_arena_zalloc(a, c->ngroups * sizeof **out + 1);
    if (!*out)
        return;
    if (ntypes > 0 && !st_filter_has(types, ntypes, "classic"))
        return;
    for (size_t i = 0; i < c->nbuckets; i++)
        for (st_ggroup_t *g = c->buckets[i]; g; g = g->next) {
            if (g->state == G_DEAD)
                continue;
            if (nstates > 0 && !st_filter_has(states, nstates, st_gstate_names[g->state]))
                continue;
            st_kp_list_groups_resp_group_t *o = &(*out)[(*n)++];
            st_kp_list_groups_resp_group_init(o);
            o->group_id = st_astr(a, g->id);
            o->protocol_type = st_astr0(a, g->protocol_type);
            o->group_state = st_kstr(st_gstate_names[g->state]);
            o->group_type = st_kstr("classic");
        }
}

/* ---- DeleteGroups ---- */

static void st_commit_written(st_gcoord_t *c, st_gwrite_t *w, int res);

/* Tombstones for every key of g: its offsets, those of commits still being written (their
 * records precede these in the log), and its metadata (invariant 2). */
static int st_add_group_tombstones(st_gbatch_t *b, st_ggroup_t *g)
{
    int rc = 0;
    for (size_t i = 0; i < g->nbuckets && !rc; i++)
        for (st_goff_t *o = g->offs[i]; o && !rc; o = o->next)
            rc =
                st_add_offset_record(b, st_gk(g->id), st_gk(o->topic), o->partition, NULL, 0, NULL);
    for (st_gwrite_t *w = g->writes; w && !rc; w = w->gnext)
        for (int i = 0; w->cb == st_commit_written && i < w->o->n && !rc; i++)
            if (!w->o->parts[i].error)
                rc = st_add_offset_record(b, st_gk(g->id), w->o->parts[i].topic,
                                          w->o->parts[i].partition, NULL, 0, NULL);
    if (!rc)
        rc = st_add_group_record(b, st_gk(g->id), NULL, 0);
    return rc;
}

/* Once durable the group is freed (st_gwrite_done), as soon as no other write refers to it. */
static void st_delete_written(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    (void)c;
    if (res)
        st_group_set_state(w->g, G_EMPTY);
    *w->error = res ? ST_KERR_COORDINATOR_NOT_AVAILABLE : 0;
    w->done(w->done_arg);
}

void st_gcoord_delete_group(st_gcoord_t *c, int32_t partition, st_kstr_t group_id, int16_t *error,
                            st_gcoord_done_fn done, void *arg)
{
    st_ggroup_t *g = NULL;
    if (c->closed || !st_gcoord_loaded(c, partition))
        *error = ST_KERR_NOT_COORDINATOR;
    else if (group_id.len <= 0)
        *error = ST_KERR_INVALID_GROUP_ID;
    else if (!(g = st_gfind(c, group_id)) || g->state == G_DEAD)
        *error = ST_KERR_GROUP_ID_NOT_FOUND;
    else if (g->state != G_EMPTY)
        *error = ST_KERR_NON_EMPTY_GROUP;
    else
        *error = 0;
    if (*error) {
        done(arg);
        return;
    }
    st_gwrite_t *w = st_gwrite_new(c, partition, g, st_delete_written);
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    if (!w || st_add_group_tombstones(&b, g)) {
        if (w)
            st_gwrite_free(w);
        st_gbatch_fini(&b);
        *error = ST_KERR_UNKNOWN_SERVER_ERROR;
        done(arg);
        return;
    }
    g->state = G_DEAD;
    w->error = error;
    w->done = done;
    w->done_arg = arg;
    st_gwrite(c, &b, w);
    st_gbatch_fini(&b);
}

/* ---- offsets ---- */

static int16_t st_kerr_of_write(int res)
{
    if (res == ST_E_TOO_LARGE)
        return ST_KERR_INVALID_COMMIT_OFFSET_SIZE;
    return res ? ST_KERR_COORDINATOR_NOT_AVAILABLE : 0;
}

static void st_commit_written(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    (void)c;
    st_goffsets_t *o = w->o;
    st_ggroup_t *g = w->g;
    for (int i = 0; i < o->n; i++) {
        st_goffset_t *p = &o->parts[i];
        if (p->error)
            continue;
        if (res) {
            p->error = st_kerr_of_write(res);
            continue;
        }
        if (st_oset(g, p->topic, p->partition, p->offset, p->leader_epoch, p->metadata, w->ts))
            p->error = ST_KERR_UNKNOWN_SERVER_ERROR;
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
    else if (!(g = st_gfind(c, o->group_id))) {
        if (o->generation < 0 && o->member_id.len <= 0) {
            g = st_gcreate(c, o->group_id, partition);
            if (!g)
                err = ST_KERR_UNKNOWN_SERVER_ERROR;
        } else {
            err = ST_KERR_ILLEGAL_GENERATION;
        }
    }
    if (!err) {
        st_gmember_t *m = st_mfind(g, o->member_id);
        if (g->state == G_DEAD)
            err = ST_KERR_COORDINATOR_NOT_AVAILABLE;
        else if (o->generation < 0 && g->state == G_EMPTY)
            err = 0;
        else if (st_fenced(g, o->member_id, o->group_instance_id))
            err = ST_KERR_FENCED_INSTANCE_ID;
        else if (!m)
            err = ST_KERR_UNKNOWN_MEMBER_ID;
        else if (o->generation != g->generation)
            err = ST_KERR_ILLEGAL_GENERATION;
        else if (g->state == G_COMPLETING)
            err = ST_KERR_REBALANCE_IN_PROGRESS;
        else
            st_member_touch(c, m);
    }
    if (err) {
        for (int i = 0; i < o->n; i++)
            if (!o->parts[i].error)
                o->parts[i].error = err;
        done(arg);
        return;
    }
    int64_t now = st_wall_ms();
    st_gwrite_t *w = st_gwrite_new(c, partition, g, st_commit_written);
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
        rc = st_add_offset_record(&b, o->group_id, p->topic, p->partition, NULL, now, p);
    }
    if (rc) {
        if (w)
            st_gwrite_free(w);
        st_gbatch_fini(&b);
        for (int i = 0; i < o->n; i++)
            if (!o->parts[i].error)
                o->parts[i].error = ST_KERR_UNKNOWN_SERVER_ERROR;
        done(arg);
        return;
    }
    w->o = o;
    w->ts = now;
    w->done = done;
    w->done_arg = arg;
    st_gwrite(c, &b, w);
    st_gbatch_fini(&b);
}

static int st_off_cmp(const void *x, const void *y)
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
    st_ggroup_t *g = st_gfind(c, o->group_id);
    if (g && g->state == G_DEAD)
        g = NULL;
    if (o->all) {
        o->n = 0;
        o->parts = st_arena_zalloc(a, (g ? g->noffs : 0) * sizeof *o->parts + 1);
        if (!o->parts || !g)
            return;
        for (size_t i = 0; i < g->nbuckets; i++)
            for (st_goff_t *x = g->offs[i]; x; x = x->next) {
                st_goffset_t *p = &o->parts[o->n++];
                p->topic = st_astr(a, x->topic);
                p->partition = x->partition;
                p->offset = x->offset;
                p->leader_epoch = x->leader_epoch;
                p->metadata = st_astr0(a, x->metadata);
                p->error = 0;
            }
        qsort(o->parts, (size_t)o->n, sizeof *o->parts, st_off_cmp);
        return;
    }
    for (int i = 0; i < o->n; i++) {
        st_goffset_t *p = &o->parts[i];
        st_goff_t *x = g ? st_ofind(g, p->topic, p->partition) : NULL;
        p->offset = x ? x->offset : -1;
        p->leader_epoch = x ? x->leader_epoch : -1;
        p->metadata = x ? st_astr0(a, x->metadata) : ST_KSTR_EMPTY;
    }
}

/* Whether a live member's subscription (consumer protocol: version int16, topics
 * [string]) names topic. */
static bool st_group_subscribes(const st_ggroup_t *g, st_kstr_t topic)
{
    if (!st_kstr_eq(st_gk(g->protocol_type), "consumer") || !g->protocol.ptr)
        return false;
    for (int i = 0; i < g->nmembers; i++) {
        const st_gmember_t *m = g->members[i];
        for (int k = 0; k < m->nprotos; k++) {
            if (!st_geq(m->protos[k].name, g->protocol))
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

static void st_offdel_written(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    (void)c;
    st_goffsets_t *o = w->o;
    for (int i = 0; i < o->n; i++) {
        st_goffset_t *p = &o->parts[i];
        if (p->error)
            continue;
        if (res)
            p->error = st_kerr_of_write(res);
        else
            st_odel(w->g, p->topic, p->partition);
    }
    w->done(w->done_arg);
}

void st_gcoord_offset_delete(st_gcoord_t *c, int32_t partition, st_goffsets_t *o,
                             st_gcoord_done_fn done, void *arg)
{
    st_ggroup_t *g = NULL;
    o->error = 0;
    if (c->closed || !st_gcoord_loaded(c, partition))
        o->error = ST_KERR_NOT_COORDINATOR;
    else if (o->group_id.len <= 0)
        o->error = ST_KERR_INVALID_GROUP_ID;
    else if (!(g = st_gfind(c, o->group_id)) || g->state == G_DEAD)
        o->error = ST_KERR_GROUP_ID_NOT_FOUND;
    else if (g->state != G_EMPTY && !st_kstr_eq(st_gk(g->protocol_type), "consumer"))
        o->error = ST_KERR_NON_EMPTY_GROUP;
    if (o->error) {
        done(arg);
        return;
    }
    st_gwrite_t *w = st_gwrite_new(c, partition, g, st_offdel_written);
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    int rc = w ? 0 : -ENOMEM;
    for (int i = 0; i < o->n && !rc; i++) {
        st_goffset_t *p = &o->parts[i];
        if (p->error)
            continue;
        if (g->state != G_EMPTY && st_group_subscribes(g, p->topic)) {
            p->error = ST_KERR_GROUP_SUBSCRIBED_TO_TOPIC;
            continue;
        }
        if (st_ofind(g, p->topic, p->partition))
            rc = st_add_offset_record(&b, o->group_id, p->topic, p->partition, NULL, 0, NULL);
    }
    if (rc) {
        if (w)
            st_gwrite_free(w);
        st_gbatch_fini(&b);
        o->error = ST_KERR_UNKNOWN_SERVER_ERROR;
        done(arg);
        return;
    }
    w->o = o;
    w->done = done;
    w->done_arg = arg;
    st_gwrite(c, &b, w);
    st_gbatch_fini(&b);
}

/* ---- expiry ---- */

/* Drops g's offsets past retention and, when none is left, g itself (Kafka's
 * cleanupGroupMetadata), writing their tombstones. Memory changes at once (invariant 1). */
static void st_expire_group(st_gcoord_t *c, st_ggroup_t *g, int64_t now)
{
    if (g->state != G_EMPTY || g->writes)
        return;
    st_gbatch_t b;
    st_gbatch_init(&b, now, c->cfg.max_batch_bytes);
    int rc = 0;
    for (size_t i = 0; i < g->nbuckets && !rc; i++)
        for (st_goff_t *o = g->offs[i], *next; o && !rc; o = next) {
            next = o->next;
            int64_t base = g->protocol_type.ptr ? g->state_ts : o->commit_ts;
            if (now - base < c->cfg.offsets_retention_ms)
                continue;
            rc = st_add_offset_record(&b, st_gk(g->id), st_gk(o->topic), o->partition, NULL, 0,
                                      NULL);
            if (!rc)
                st_odel(g, st_gk(o->topic), o->partition);
        }
    bool gone = !rc && g->noffs == 0;
    if (gone)
        rc = st_add_group_record(&b, st_gk(g->id), NULL, 0);
    st_gwrite_t *w = rc || b.total == 0 ? NULL : st_gwrite_new(c, g->partition, g, NULL);
    if (!w) {
        st_gbatch_fini(&b);
        return;
    }
    if (gone)
        g->state = G_DEAD;
    ST_INFO("group %.*s: %d expired record(s) removed%s", ST_GSTR_ARG(g->id), b.total,
            gone ? ", group gone" : "");
    st_gwrite(c, &b, w);
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
        st_expire_group(c, all[i], now);
    free(all);
}

static void st_expire_tick(st_timer_t *t)
{
    st_gcoord_t *c = t->data;
    st_gcoord_expire_now(c);
    if (!c->closed)
        st_loop_timer_start(c->loop, &c->expire_timer, c->cfg.expire_check_ms);
}

/* ---- loading ---- */

static void st_load_group_value(st_gcoord_t *c, st_ggroup_t *g, const st_grec_t *r)
{
    for (int i = 0; i < g->nmembers; i++)
        st_member_free(c, g->members[i]);
    g->nmembers = 0;
    st_gstr_free(&g->protocol_type);
    st_gstr_free(&g->protocol);
    st_gstr_free(&g->leader);
    g->generation = 0;
    g->state = G_EMPTY;
    g->stored = !r->tombstone;
    if (r->tombstone)
        return;
    if (r->protocol_type.len > 0)
        st_gstr_set(&g->protocol_type, r->protocol_type);
    g->generation = r->generation;
    st_gstr_set(&g->protocol, r->protocol);
    st_gstr_set(&g->leader, r->leader);
    g->state_ts = r->current_state_timestamp >= 0 ? r->current_state_timestamp : st_wall_ms();
    for (int32_t i = 0; i < r->nmembers; i++) {
        const st_grec_member_t *rm = &r->members[i];
        st_kp_join_group_req_protocol_t proto = {r->protocol, rm->subscription};
        st_kp_join_group_req_t req;
        st_kp_join_group_req_init(&req);
        req.group_instance_id = rm->group_instance_id;
        req.session_timeout_ms = rm->session_timeout;
        req.rebalance_timeout_ms = rm->rebalance_timeout;
        req.protocols = &proto;
        req.protocols_count = r->protocol.len >= 0 ? 1 : 0;
        st_gmember_t *m = st_member_new(g, rm->member_id, &req, 1, rm->client_id, rm->client_host);
        if (m && rm->assignment.len > 0) {
            m->assignment = malloc((size_t)rm->assignment.len);
            if (m->assignment) {
                memcpy(m->assignment, rm->assignment.ptr, (size_t)rm->assignment.len);
                m->assignment_len = rm->assignment.len;
            }
        }
    }
    g->state = g->nmembers > 0 ? G_STABLE : G_EMPTY;
}

static void st_load_record(st_gcoord_t *c, int32_t partition, const st_batch_record_t *rec,
                           st_arena_t *a)
{
    st_grec_t r;
    int rc = st_grec_decode(rec->key, rec->key_len, rec->value, rec->value_len, a, &r);
    if (rc) {
        if (rc != ST_E_UNSUPPORTED)
            ST_WARN("__consumer_offsets-%d: record at offset %lld does not parse: %s", partition,
                    (long long)rec->offset, st_strerror(rc));
        return;
    }
    st_ggroup_t *g = st_gfind(c, r.group);
    if (!g) {
        if (r.tombstone)
            return;
        g = st_gcreate(c, r.group, partition);
        if (!g)
            return;
    }
    if (r.kind == ST_GREC_OFFSET) {
        if (r.tombstone)
            st_odel(g, r.topic, r.partition);
        else
            st_oset(g, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata,
                    r.commit_timestamp);
    } else {
        st_load_group_value(c, g, &r);
    }
}

int st_gcoord_load(st_gcoord_t *c, int32_t partition, st_log_t *log)
{
    if (partition < 0 || partition >= c->cfg.num_partitions)
        return ST_E_INVALID;
    int64_t t0 = st_mono_ms();
    int64_t off = st_log_start_offset(log), end = st_log_end_offset(log);
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    st_arena_t a;
    st_arena_init(&a, 16384);
    int rc = 0;
    int64_t records = 0;
    while (off < end) {
        st_log_read_t rd;
        rc = st_log_read(log, off, 1 << 20, -1, &rd);
        if (rc)
            break;
        if (rd.nranges == 0 || rd.next_offset <= off) {
            st_log_read_release(&rd);
            break;
        }
        if ((size_t)rd.bytes > cap) {
            uint8_t *nb = realloc(buf, (size_t)rd.bytes);
            if (!nb) {
                st_log_read_release(&rd);
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap = (size_t)rd.bytes;
        }
        ssize_t n = st_log_read_copy(&rd, buf, cap);
        int64_t next = rd.next_offset;
        st_log_read_release(&rd);
        if (n < 0) {
            rc = (int)n;
            break;
        }
        for (size_t pos = 0; pos < (size_t)n;) {
            st_batch_hdr_t h;
            rc = st_batch_check(buf + pos, (size_t)n - pos, &h);
            if (rc)
                break;
            size_t size = (size_t)st_batch_size(&h);
            st_batch_iter_t it;
            if (!(h.attributes & ST_BATCH_ATTR_CONTROL) &&
                st_batch_iter_init(&it, buf + pos, size) == 0) {
                st_batch_record_t rec;
                int more;
                while ((more = st_batch_iter_next(&it, &rec)) == 1) {
                    if (rec.offset >= off) {
                        st_load_record(c, partition, &rec, &a);
                        records++;
                    }
                    st_arena_reset(&a);
                }
            } else if (!(h.attributes & ST_BATCH_ATTR_CONTROL)) {
                ST_WARN("__consumer_offsets-%d: compressed batch at %lld skipped", partition,
                        (long long)h.base_offset);
            }
            pos += size;
        }
        if (rc)
            break;
        off = next;
    }
    st_arena_fini(&a);
    free(buf);
    if (rc) {
        ST_ERROR("__consumer_offsets-%d: loading stopped at offset %lld: %s", partition,
                 (long long)off, st_strerror(rc));
        return rc;
    }
    /* Members restored from the log get a session to come back in. */
    int ngroups = 0;
    for (size_t i = 0; i < c->nbuckets; i++)
        for (st_ggroup_t *g = c->buckets[i], *next; g; g = next) {
            next = g->next;
            if (g->partition != partition)
                continue;
            if (g->nmembers == 0 && g->noffs == 0 && !g->stored) {
                st_gfree(c, g);
                continue;
            }
            ngroups++;
            for (int k = 0; k < g->nmembers; k++)
                st_member_touch(c, g->members[k]);
        }
    c->logs[partition] = log;
    if (records)
        ST_INFO("__consumer_offsets-%d: loaded %lld record(s), %d group(s) in %lld ms", partition,
                (long long)records, ngroups, (long long)(st_mono_ms() - t0));
    return 0;
}

bool st_gcoord_loaded(const st_gcoord_t *c, int32_t partition)
{
    return partition >= 0 && partition < c->cfg.num_partitions && c->logs[partition];
}

/* ---- life cycle ---- */

int st_gcoord_create(st_gcoord_t **out, st_loop_t *loop, const st_gcoord_config_t *cfg)
{
    st_gcoord_t *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->loop = loop;
    c->cfg = *cfg;
    if (c->cfg.num_partitions <= 0)
        c->cfg.num_partitions = 1;
    if (c->cfg.max_batch_bytes == 0)
        c->cfg.max_batch_bytes = 256 * 1024;
    if (c->cfg.expire_check_ms <= 0)
        c->cfg.expire_check_ms = 60000;
    c->logs = calloc((size_t)c->cfg.num_partitions, sizeof *c->logs);
    c->nbuckets = 64;
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    if (!c->logs || !c->buckets) {
        free(c->logs);
        free(c->buckets);
        free(c);
        return -ENOMEM;
    }
    st_timer_init(&c->expire_timer, st_expire_tick, c);
    st_loop_timer_start(loop, &c->expire_timer, c->cfg.expire_check_ms);
    *out = c;
    return 0;
}

void st_gcoord_drain(st_gcoord_t *c)
{
    if (c->closed)
        return;
    c->closed = true;
    st_loop_timer_stop(c->loop, &c->expire_timer);
    for (size_t i = 0; i < c->nbuckets; i++)
        for (st_ggroup_t *g = c->buckets[i]; g; g = g->next) {
            st_loop_timer_stop(c->loop, &g->join_timer);
            for (int k = 0; k < g->nmembers; k++) {
                st_gmember_t *m = g->members[k];
                st_loop_timer_stop(c->loop, &m->session_timer);
                st_answer_join_error(m, ST_KERR_NOT_COORDINATOR);
                st_answer_sync(m, ST_KERR_NOT_COORDINATOR);
            }
        }
}

void st_gcoord_destroy(st_gcoord_t *c)
{
    if (!c)
        return;
    st_gcoord_drain(c);
    for (size_t i = 0; i < c->nbuckets; i++)
        for (st_ggroup_t *g = c->buckets[i], *next; g; g = next) {
            next = g->next;
            g->writes = NULL; /* completed when the logs closed */
            st_gfree(c, g);
        }
    free(c->buckets);
    free(c->logs);
    free(c);
}

int st_gcoord_group_count(const st_gcoord_t *c)
{
    return (int)c->ngroups;
}
