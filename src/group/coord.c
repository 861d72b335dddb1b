/*
 * coord.c — the group coordinator of one shard: its life cycle (create, drain, destroy), the
 * table of its groups, Kafka's partition of a group, DescribeGroups and ListGroups. The
 * coordinator's state and the split of the rest over group/'s files are in coord_impl.h; the
 * state machine and invariants in coord.h.
 */
#include "group/coord_impl.h"

#include <strings.h>

#include "base/assert.h"
#include "base/clock.h"
#include "proto/kerr.h"

static const char *const state_names[] = {"Empty", "PreparingRebalance", "CompletingRebalance",
                                          "Stable", "Dead"};

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

static size_t group_bucket(const st_gcoord_t *c, const char *id, int32_t len)
{
    return fnv1a(id, (size_t)len, 1469598103934665603ull) & (c->nbuckets - 1);
}

st_ggroup_t *st_group_find(const st_gcoord_t *c, st_kstr_t id)
{
    if (id.len < 0)
        return NULL;
    for (st_ggroup_t *g = c->buckets[group_bucket(c, id.ptr, id.len)]; g; g = g->next)
        if (kstr_is(id, g->id))
            return g;
    return NULL;
}

int16_t st_group_lookup(const st_gcoord_t *c, int32_t partition, st_kstr_t id, int16_t missing,
                        st_ggroup_t **g)
{
    *g = NULL;
    if (c->closed || !st_gcoord_loaded(c, partition))
        return ST_KERR_NOT_COORDINATOR;
    if (id.len <= 0)
        return ST_KERR_INVALID_GROUP_ID;
    st_ggroup_t *found = st_group_find(c, id);
    if (!found || found->state == G_DEAD)
        return missing;
    *g = found;
    return 0;
}

st_ggroup_t *st_group_create(st_gcoord_t *c, st_kstr_t id, int32_t partition)
{
    if (c->ngroups >= c->nbuckets) {
        size_t n = c->nbuckets * 2;
        st_ggroup_t **b = calloc(n, sizeof *b);
        if (b) {
            for (size_t i = 0; i < c->nbuckets; i++)
                for (st_ggroup_t *g = c->buckets[i], *next; g; g = next) {
                    next = g->next;
                    size_t k =
                        fnv1a(g->id.ptr, (size_t)g->id.len, 1469598103934665603ull) & (n - 1);
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
    int rc = gstr_set(&g->id, id);
    if (!rc)
        rc = st_gofftab_init(&g->offs);
    if (rc || !g->id.ptr) {
        gstr_free(&g->id);
        st_gofftab_fini(&g->offs);
        free(g);
        return NULL;
    }
    g->c = c;
    g->partition = partition;
    g->state = G_EMPTY;
    g->state_ts = st_wall_ms();
    st_timer_init(&g->join_timer, st_group_join_timeout, g);
    size_t k = group_bucket(c, g->id.ptr, g->id.len);
    g->next = c->buckets[k];
    c->buckets[k] = g;
    c->ngroups++;
    return g;
}

void st_group_member_free(st_gcoord_t *c, st_gmember_t *m)
{
    st_loop_timer_stop(c->loop, &m->session_timer);
    gstr_free(&m->member_id);
    gstr_free(&m->instance_id);
    gstr_free(&m->client_id);
    gstr_free(&m->client_host);
    for (int i = 0; i < m->nprotos; i++) {
        gstr_free(&m->protos[i].name);
        free(m->protos[i].meta);
    }
    free(m->protos);
    free(m->assignment);
    free(m);
}

/* Unlinks and frees a group; nothing may refer to it (no write, no waiting request). */
void st_group_free(st_gcoord_t *c, st_ggroup_t *g)
{
    ST_ASSERT(!g->writes);
    if (g->unloaded) {
        for (st_ggroup_t **pp = &c->unloaded; *pp; pp = &(*pp)->next)
            if (*pp == g) {
                *pp = g->next;
                break;
            }
    } else {
        size_t k = group_bucket(c, g->id.ptr, g->id.len);
        for (st_ggroup_t **pp = &c->buckets[k]; *pp; pp = &(*pp)->next)
            if (*pp == g) {
                *pp = g->next;
                c->ngroups--;
                break;
            }
    }
    st_loop_timer_stop(c->loop, &g->join_timer);
    for (int i = 0; i < g->nmembers; i++)
        st_group_member_free(c, g->members[i]);
    for (int i = 0; i < g->npending; i++)
        gstr_free(&g->pending[i].member_id);
    st_cgroup_free(c, g);
    st_group_txns_free(g);
    st_gofftab_fini(&g->offs);
    free(g->pending);
    free(g->members);
    gstr_free(&g->protocol_type);
    gstr_free(&g->protocol);
    gstr_free(&g->leader);
    gstr_free(&g->id);
    free(g);
}

/* ---- DescribeGroups, ListGroups ---- */

void st_gcoord_describe(st_gcoord_t *c, int32_t partition, st_kstr_t group_id, int16_t version,
                        st_arena_t *a, st_kp_describe_groups_resp_group_t *out)
{
    out->group_id = group_id.len >= 0 ? answer_kstr(a, group_id) : ST_KSTR_EMPTY;
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
    st_ggroup_t *g = st_group_find(c, group_id);
    if (!g || g->state == G_DEAD || g->type != G_TYPE_CLASSIC) {
        /* a consumer group is no classic group (Kafka: Dead, GROUP_ID_NOT_FOUND from v6) */
        if (version >= 6) {
            out->error_code = ST_KERR_GROUP_ID_NOT_FOUND;
            out->error_message = st_kstr(g && g->state != G_DEAD ? "Group is not a classic group."
                                                                 : "Group does not exist");
        }
        return;
    }
    out->group_state = st_kstr(state_names[g->state]);
    out->protocol_type = answer_str0(a, g->protocol_type);
    out->protocol_data = answer_str0(a, g->protocol);
    out->members = st_arena_zalloc(a, (size_t)g->nmembers * sizeof *out->members + 1);
    if (!out->members)
        return;
    out->members_count = g->nmembers;
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        st_kp_describe_groups_resp_member_t *o = &out->members[i];
        st_kp_describe_groups_resp_member_init(o);
        o->member_id = answer_str(a, m->member_id);
        o->group_instance_id = answer_str(a, m->instance_id);
        o->client_id = answer_str(a, m->client_id);
        o->client_host = answer_str(a, m->client_host);
        o->member_metadata = (st_kbytes_t){(const uint8_t *)"", 0};
        o->member_assignment = (st_kbytes_t){(const uint8_t *)"", 0};
        if (g->state == G_STABLE) {
            for (int k = 0; k < m->nprotos; k++)
                if (g->protocol.ptr && gstr_eq(m->protos[k].name, g->protocol))
                    o->member_metadata = answer_bytes(a, m->protos[k].meta, m->protos[k].meta_len);
            o->member_assignment = answer_bytes(a, m->assignment, m->assignment_len);
        }
    }
}

static bool filter_has(const st_kstr_t *f, int n, const char *v)
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
    for (size_t i = 0; i < c->nbuckets; i++)
        for (st_ggroup_t *g = c->buckets[i]; g; g = g->next) {
            if (g->state == G_DEAD)
                continue;
            bool consumer = g->type == G_TYPE_CONSUMER;
            const char *type = consumer ? "consumer" : "classic";
            const char *state = consumer ? st_cgroup_state(g) : state_names[g->state];
            if (ntypes > 0 && !filter_has(types, ntypes, type))
                continue;
            if (nstates > 0 && !filter_has(states, nstates, state))
                continue;
            st_kp_list_groups_resp_group_t *o = &(*out)[(*n)++];
            st_kp_list_groups_resp_group_init(o);
            o->group_id = answer_str(a, g->id);
            o->protocol_type = answer_str0(a, g->protocol_type);
            o->group_state = st_kstr(state);
            o->group_type = st_kstr(type);
        }
}

/* ---- life cycle ---- */

/* Takes g (already out of the table) out of service: its waiting requests are answered
 * NOT_COORDINATOR (invariant 4), its members and timers dropped; freed now, or by write_done
 * once its last write in flight completes (invariant 3). */
static void group_unload(st_gcoord_t *c, st_ggroup_t *g)
{
    st_loop_timer_stop(c->loop, &g->join_timer);
    for (int i = 0; i < g->nmembers; i++) {
        st_group_answer_join(g->members[i], ST_KERR_NOT_COORDINATOR);
        st_group_answer_sync(g->members[i], ST_KERR_NOT_COORDINATOR);
    }
    while (g->nmembers > 0)
        st_group_member_free(c, g->members[--g->nmembers]);
    st_cgroup_free(c, g);  /* the next load rebuilds it from the log */
    st_group_txns_free(g); /* the next load rebuilds them from the log */
    g->state = G_DEAD;
    g->unloaded = true;
    g->next = c->unloaded;
    c->unloaded = g;
    if (!g->writes)
        st_group_free(c, g);
}

void st_group_drop_partition(st_gcoord_t *c, int32_t partition)
{
    for (size_t i = 0; i < c->nbuckets; i++)
        for (st_ggroup_t **pp = &c->buckets[i]; *pp;) {
            st_ggroup_t *g = *pp;
            if (g->partition != partition) {
                pp = &g->next;
                continue;
            }
            *pp = g->next;
            c->ngroups--;
            group_unload(c, g);
        }
}

void st_gcoord_unload(st_gcoord_t *c, int32_t partition)
{
    if (!st_gcoord_loaded(c, partition))
        return;
    c->logs[partition] = NULL;
    c->epochs[partition] = -1;
    st_group_drop_partition(c, partition);
}

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
    c->epochs = malloc((size_t)c->cfg.num_partitions * sizeof *c->epochs);
    c->nbuckets = 64;
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    if (!c->logs || !c->epochs || !c->buckets) {
        free(c->logs);
        free(c->epochs);
        free(c->buckets);
        free(c);
        return -ENOMEM;
    }
    for (int32_t i = 0; i < c->cfg.num_partitions; i++)
        c->epochs[i] = -1;
    c->topics_version = -1;
    if (c->cfg.consumer_session_timeout_ms <= 0)
        c->cfg.consumer_session_timeout_ms = 45000;
    if (c->cfg.consumer_heartbeat_interval_ms <= 0)
        c->cfg.consumer_heartbeat_interval_ms = 5000;
    st_timer_init(&c->expire_timer, st_group_expire_tick, c);
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
            st_cgroup_drain(c, g);
            for (int k = 0; k < g->nmembers; k++) {
                st_gmember_t *m = g->members[k];
                st_loop_timer_stop(c->loop, &m->session_timer);
                st_group_answer_join(m, ST_KERR_NOT_COORDINATOR);
                st_group_answer_sync(m, ST_KERR_NOT_COORDINATOR);
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
            st_group_free(c, g);
        }
    while (c->unloaded) {
        c->unloaded->writes = NULL;
        st_group_free(c, c->unloaded);
    }
    st_cgroup_topics_free(c);
    free(c->buckets);
    free(c->epochs);
    free(c->logs);
    free(c);
}

int st_gcoord_group_count(const st_gcoord_t *c)
{
    return (int)c->ngroups;
}
