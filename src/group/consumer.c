/*
 * consumer.c — KIP-848 consumer groups: ConsumerGroupHeartbeat, ConsumerGroupDescribe, member
 * sessions and revocation deadlines, the group's epochs and target assignment, and the group's
 * records in __consumer_offsets (Kafka's record types, so a group survives a restart and a
 * failover of its coordinator).
 *
 * One heartbeat (Kafka's GroupMetadataManager.consumerGroupHeartbeat):
 *
 *   1. the member: joins with epoch 0 (a new member id for v0 clients that send none; v1+
 *      clients bring their own), rejoins a static slot whose holder left with epoch -2, or is
 *      an existing member whose epoch must be its current one (or its previous one with owned
 *      partitions inside its assignment: the answer with the bump may have been lost), else
 *      FENCED_MEMBER_EPOCH; -1 leaves, -2 leaves a static member's slot for a while
 *   2. its subscription (topic names and/or an RE2-style regex, matched in full with PCRE2
 *      against the broker's topics) and assignor are updated; a change, a new member or a
 *      change in the subscribed topics (created, deleted, more partitions: seen through the
 *      topic metadata version) bumps the group epoch
 *   3. group epoch > assignment epoch: the target assignment is computed again by the group's
 *      assignor (the server_assignor most members ask for, else the first of
 *      group.consumer.assignors) and gets the group epoch
 *   4. the member's current assignment moves one step towards its target (assign.h): a
 *      partition reaches its new owner only once its old owner acknowledged the revocation
 *   5. the answer: its epoch, heartbeat interval and, when it changed or the request was a full
 *      one, its assignment — sent once the records of the changes are durable
 *
 * A member silent for group.consumer.session.timeout.ms, or one that keeps partitions pending
 * revocation past its rebalance timeout, is fenced: removed, its partitions free, the group
 * epoch bumped.
 *
 * Records (key: version int16, then non-flexible strings; value: version int16 0, then the
 * flexible encoding — compact strings and arrays, a tagged-field section per struct):
 *
 *   key 3 group              ConsumerGroupMetadataValue          epoch
 *   key 5 group, member      ConsumerGroupMemberMetadataValue    instance, rack, client id and
 *                                                                host, topic names, regex,
 *                                                                rebalance timeout, assignor
 *   key 6 group              ConsumerGroupTargetAssignmentMetadataValue  assignment epoch
 *   key 7 group, member      ConsumerGroupTargetAssignmentMemberValue    [topic id, [partition]]
 *   key 8 group, member      ConsumerGroupCurrentMemberAssignmentValue   epoch, previous epoch,
 *                                                                state, assigned, pending
 *                                                                revocation
 *   key 4 (partition metadata) and later key versions are read and skipped.
 *
 * Unlike the classic group's SyncGroup, a heartbeat changes memory first and answers once its
 * records are durable: a write that fails leaves memory ahead of the log, which only happens
 * when the partition is losing leadership — its next coordinator loads the log.
 */
#include "group/coord_impl.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <sys/random.h>

#include "base/clock.h"
#include "base/log.h"
#include "proto/kreader.h"
#include "proto/kwriter.h"

enum {
    K_METADATA = 3,
    K_PARTITION_METADATA = 4,
    K_MEMBER = 5,
    K_TARGET_METADATA = 6,
    K_TARGET_MEMBER = 7,
    K_CURRENT = 8,
};

#define LEAVE_EPOCH        (-1)
#define LEAVE_STATIC_EPOCH (-2)

/* ---- topics of the broker ---- */

static void topics_free(st_gcoord_t *c)
{
    for (int i = 0; i < c->ntopics; i++)
        free((char *)c->topics[i].name.ptr);
    free(c->topics);
    c->topics = NULL;
    c->ntopics = 0;
}

/* Reads the broker's topics again when their version moved; whether it did. */
static bool topics_refresh(st_gcoord_t *c)
{
    if (!c->cfg.topics_version || !c->cfg.topics)
        return false;
    int64_t v = c->cfg.topics_version(c->cfg.ctx);
    if (v == c->topics_version)
        return false;
    st_gtopic_t *t = NULL;
    int n = 0;
    if (c->cfg.topics(c->cfg.ctx, &t, &n))
        return false;
    topics_free(c);
    c->topics = t;
    c->ntopics = n;
    c->topics_version = v;
    return true;
}

/* ---- regular expressions ---- */

static void *re_compile(st_kstr_t s)
{
    int err;
    PCRE2_SIZE off;
    return pcre2_compile((PCRE2_SPTR)(s.len ? s.ptr : ""), (PCRE2_SIZE)s.len, 0, &err, &off, NULL);
}

/* Whether the whole of name matches (Kafka's Pattern.matcher(topic).matches()). */
static bool re_full_match(void *re, st_kstr_t name)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md)
        return false;
    int rc = pcre2_match(re, (PCRE2_SPTR)(name.len ? name.ptr : ""), (PCRE2_SIZE)name.len, 0,
                         PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

/* ---- members ---- */

static void session_expired(st_timer_t *t);
static void revoke_expired(st_timer_t *t);

static void strs_free(st_gstr_t *v, int n)
{
    for (int i = 0; i < n; i++)
        gstr_free(&v[i]);
    free(v);
}

static void member_free(st_gcoord_t *c, st_gcmember_t *m)
{
    st_loop_timer_stop(c->loop, &m->session_timer);
    st_loop_timer_stop(c->loop, &m->revoke_timer);
    gstr_free(&m->member_id);
    gstr_free(&m->instance_id);
    gstr_free(&m->rack_id);
    gstr_free(&m->client_id);
    gstr_free(&m->client_host);
    gstr_free(&m->regex);
    gstr_free(&m->server_assignor);
    strs_free(m->topic_names, m->ntopic_names);
    if (m->re)
        pcre2_code_free(m->re);
    st_gtpset_free(&m->cur.assigned);
    st_gtpset_free(&m->cur.revoking);
    st_gtpset_free(&m->target);
    free(m);
}

static st_gcmember_t *member_new(st_ggroup_t *g, st_kstr_t id)
{
    st_gcgroup_t *cg = g->cg;
    if (cg->nmembers == cg->cap) {
        int cap = cg->cap ? cg->cap * 2 : 8;
        st_gcmember_t **v = realloc(cg->members, (size_t)cap * sizeof *v);
        if (!v)
            return NULL;
        cg->members = v;
        cg->cap = cap;
    }
    st_gcmember_t *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->g = g;
    m->member_id = m->instance_id = m->rack_id = m->client_id = m->client_host = ST_GSTR_NULL;
    m->regex = m->server_assignor = ST_GSTR_NULL;
    m->cur.state = ST_GMS_STABLE;
    m->rebalance_timeout = 300000;
    st_timer_init(&m->session_timer, session_expired, m);
    st_timer_init(&m->revoke_timer, revoke_expired, m);
    if (gstr_set(&m->member_id, id) || !m->member_id.ptr) {
        free(m);
        return NULL;
    }
    cg->members[cg->nmembers++] = m;
    return m;
}

static void member_unlink(st_gcgroup_t *cg, st_gcmember_t *m)
{
    for (int i = 0; i < cg->nmembers; i++)
        if (cg->members[i] == m) {
            memmove(&cg->members[i], &cg->members[i + 1],
                    (size_t)(cg->nmembers - i - 1) * sizeof *cg->members);
            cg->nmembers--;
            return;
        }
}

st_gcmember_t *st_cgroup_member_find(const st_ggroup_t *g, st_kstr_t id)
{
    if (!g->cg || id.len <= 0)
        return NULL;
    for (int i = 0; i < g->cg->nmembers; i++)
        if (kstr_is(id, g->cg->members[i]->member_id))
            return g->cg->members[i];
    return NULL;
}

static st_gcmember_t *member_find_static(const st_ggroup_t *g, st_kstr_t instance)
{
    if (instance.len < 0)
        return NULL;
    for (int i = 0; i < g->cg->nmembers; i++)
        if (g->cg->members[i]->instance_id.ptr && kstr_is(instance, g->cg->members[i]->instance_id))
            return g->cg->members[i];
    return NULL;
}

static void member_touch(st_gcoord_t *c, st_gcmember_t *m)
{
    if (!c->closed)
        st_loop_timer_start(c->loop, &m->session_timer, c->cfg.consumer_session_timeout_ms);
}

void st_cgroup_free(st_gcoord_t *c, st_ggroup_t *g)
{
    st_gcgroup_t *cg = g->cg;
    if (!cg)
        return;
    for (int i = 0; i < cg->nmembers; i++)
        member_free(c, cg->members[i]);
    free(cg->members);
    gstr_free(&cg->assignor);
    free(cg);
    g->cg = NULL;
}

/* Makes g a consumer group (a new one, or an empty classic one: its offsets stay). */
static int make_consumer(st_ggroup_t *g)
{
    if (g->cg)
        return 0;
    g->cg = calloc(1, sizeof *g->cg);
    if (!g->cg)
        return -ENOMEM;
    g->cg->assignor = ST_GSTR_NULL;
    g->cg->md_version = -1;
    g->type = G_TYPE_CONSUMER;
    gstr_free(&g->protocol);
    gstr_free(&g->leader);
    gstr_set(&g->protocol_type, st_kstr("consumer"));
    return 0;
}

const char *st_cgroup_state(const st_ggroup_t *g)
{
    const st_gcgroup_t *cg = g->cg;
    if (g->state == G_DEAD)
        return "Dead";
    if (!cg || cg->nmembers == 0)
        return "Empty";
    if (cg->assignment_epoch < cg->group_epoch)
        return "Assigning";
    for (int i = 0; i < cg->nmembers; i++) {
        const st_gcmember_t *m = cg->members[i];
        if (m->cur.epoch != cg->assignment_epoch || m->cur.state != ST_GMS_STABLE)
            return "Reconciling";
    }
    return "Stable";
}

/* g->state for the code shared with classic groups (expiry, DeleteGroups): Empty or Stable. */
static void sync_state(st_ggroup_t *g)
{
    int s = g->cg && g->cg->nmembers > 0 ? G_STABLE : G_EMPTY;
    if (g->state != s && g->state != G_DEAD)
        st_group_set_state(g, s);
}

/* ---- records ---- */

static void key_of(st_buf_t *k, int16_t version, st_gstr_t group, const st_gstr_t *member)
{
    st_kwriter_t w;
    st_kwriter_init(&w, k);
    st_kwriter_i16(&w, version);
    st_kwriter_str(&w, false, false, as_kstr(group));
    if (member)
        st_kwriter_str(&w, false, false, as_kstr(*member));
}

/* Adds a record keyed (version, group[, member]) with value v (NULL: a tombstone). */
static int add(st_gbatch_t *b, int16_t version, st_gstr_t group, const st_gstr_t *member,
               st_buf_t *v)
{
    st_buf_t k;
    st_buf_init(&k);
    key_of(&k, version, group, member);
    int rc = k.oom || (v && v->oom)
                 ? -ENOMEM
                 : st_gbatch_add(b, k.data, k.len, v ? v->data : NULL, v ? (int32_t)v->len : -1);
    st_buf_fini(&k);
    if (v)
        st_buf_fini(v);
    return rc;
}

/* [topic id, [partition], tags] grouped by topic, as Kafka's TopicPartitions arrays. */
static void write_tps(st_kwriter_t *w, const st_gtpset_t *s)
{
    int32_t ntopics = 0;
    for (int i = 0; i < s->n; i++)
        if (i == 0 || memcmp(s->v[i].topic.b, s->v[i - 1].topic.b, 16))
            ntopics++;
    st_kwriter_uvarint(w, (uint32_t)ntopics + 1);
    for (int i = 0; i < s->n;) {
        int j = i;
        while (j < s->n && !memcmp(s->v[j].topic.b, s->v[i].topic.b, 16))
            j++;
        st_kwriter_uuid(w, &s->v[i].topic);
        st_kwriter_uvarint(w, (uint32_t)(j - i) + 1);
        for (int k = i; k < j; k++)
            st_kwriter_i32(w, s->v[k].partition);
        st_kwriter_uvarint(w, 0);
        i = j;
    }
}

static int read_tps(st_kreader_t *r, st_gtpset_t *out)
{
    int32_t nt;
    st_gtpset_clear(out);
    if (st_kreader_count(r, true, false, 18, &nt))
        return ST_E_CORRUPT;
    for (int32_t t = 0; t < nt; t++) {
        st_kuuid_t id;
        int32_t np;
        if (st_kreader_uuid(r, &id) || st_kreader_count(r, true, false, 4, &np))
            return ST_E_CORRUPT;
        for (int32_t k = 0; k < np; k++) {
            int32_t p;
            if (st_kreader_i32(r, &p))
                return ST_E_CORRUPT;
            if (st_gtpset_push(out, id, p))
                return -ENOMEM;
        }
        if (st_kreader_skip_tags(r))
            return ST_E_CORRUPT;
    }
    st_gtpset_normalize(out);
    return 0;
}

static int rec_epoch(st_gbatch_t *b, st_ggroup_t *g)
{
    st_buf_t v;
    st_buf_init(&v);
    st_kwriter_t w;
    st_kwriter_init(&w, &v);
    st_kwriter_i16(&w, 0);
    st_kwriter_i32(&w, g->cg->group_epoch);
    st_kwriter_uvarint(&w, 0);
    return add(b, K_METADATA, g->id, NULL, &v);
}

static int rec_target_epoch(st_gbatch_t *b, st_ggroup_t *g)
{
    st_buf_t v;
    st_buf_init(&v);
    st_kwriter_t w;
    st_kwriter_init(&w, &v);
    st_kwriter_i16(&w, 0);
    st_kwriter_i32(&w, g->cg->assignment_epoch);
    st_kwriter_uvarint(&w, 0);
    return add(b, K_TARGET_METADATA, g->id, NULL, &v);
}

static int rec_member(st_gbatch_t *b, st_ggroup_t *g, st_gcmember_t *m)
{
    st_buf_t v;
    st_buf_init(&v);
    st_kwriter_t w;
    st_kwriter_init(&w, &v);
    st_kwriter_i16(&w, 0);
    st_kwriter_str(&w, true, true, as_kstr(m->instance_id));
    st_kwriter_str(&w, true, true, as_kstr(m->rack_id));
    st_kwriter_str(&w, true, false, m->client_id.ptr ? as_kstr(m->client_id) : ST_KSTR_EMPTY);
    st_kwriter_str(&w, true, false, m->client_host.ptr ? as_kstr(m->client_host) : ST_KSTR_EMPTY);
    st_kwriter_uvarint(&w, (uint32_t)m->ntopic_names + 1);
    for (int i = 0; i < m->ntopic_names; i++)
        st_kwriter_str(&w, true, false, as_kstr(m->topic_names[i]));
    st_kwriter_str(&w, true, true, as_kstr(m->regex));
    st_kwriter_i32(&w, m->rebalance_timeout);
    st_kwriter_str(&w, true, true, as_kstr(m->server_assignor));
    st_kwriter_uvarint(&w, 0);
    return add(b, K_MEMBER, g->id, &m->member_id, &v);
}

static int rec_target(st_gbatch_t *b, st_ggroup_t *g, st_gcmember_t *m)
{
    st_buf_t v;
    st_buf_init(&v);
    st_kwriter_t w;
    st_kwriter_init(&w, &v);
    st_kwriter_i16(&w, 0);
    write_tps(&w, &m->target);
    st_kwriter_uvarint(&w, 0);
    return add(b, K_TARGET_MEMBER, g->id, &m->member_id, &v);
}

static int rec_current(st_gbatch_t *b, st_ggroup_t *g, st_gcmember_t *m)
{
    st_buf_t v;
    st_buf_init(&v);
    st_kwriter_t w;
    st_kwriter_init(&w, &v);
    st_kwriter_i16(&w, 0);
    st_kwriter_i32(&w, m->cur.epoch);
    st_kwriter_i32(&w, m->cur.prev_epoch);
    st_kwriter_i8(&w, m->cur.state);
    write_tps(&w, &m->cur.assigned);
    write_tps(&w, &m->cur.revoking);
    st_kwriter_uvarint(&w, 0);
    return add(b, K_CURRENT, g->id, &m->member_id, &v);
}

/* Kafka's removeMember: the member's current assignment, target and metadata go. */
static int rec_member_gone(st_gbatch_t *b, st_ggroup_t *g, st_gcmember_t *m)
{
    int rc = add(b, K_CURRENT, g->id, &m->member_id, NULL);
    if (!rc)
        rc = add(b, K_TARGET_MEMBER, g->id, &m->member_id, NULL);
    if (!rc)
        rc = add(b, K_MEMBER, g->id, &m->member_id, NULL);
    return rc;
}

int st_cgroup_add_tombstones(st_gbatch_t *b, st_ggroup_t *g)
{
    int rc = 0;
    for (int i = 0; g->cg && i < g->cg->nmembers && !rc; i++)
        rc = rec_member_gone(b, g, g->cg->members[i]);
    if (!rc)
        rc = add(b, K_TARGET_METADATA, g->id, NULL, NULL);
    if (!rc)
        rc = add(b, K_PARTITION_METADATA, g->id, NULL, NULL);
    if (!rc)
        rc = add(b, K_METADATA, g->id, NULL, NULL);
    return rc;
}

/* ---- subscriptions, epochs, target assignment ---- */

static bool member_subscribes(const st_gcmember_t *m, const st_gtopic_t *t)
{
    for (int i = 0; i < m->ntopic_names; i++)
        if (kstr_is(t->name, m->topic_names[i]))
            return true;
    return m->re && re_full_match(m->re, t->name);
}

/* The topics m subscribes to that the broker has, into out (room for c->ntopics). */
static int member_topics(const st_gcoord_t *c, const st_gcmember_t *m, const st_gtopic_t **out)
{
    int n = 0;
    for (int i = 0; i < c->ntopics; i++)
        if (member_subscribes(m, &c->topics[i]))
            out[n++] = &c->topics[i];
    return n;
}

/* A hash of every topic some member subscribes to: id and partition count. */
static uint64_t subs_hash(const st_gcoord_t *c, const st_ggroup_t *g)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < c->ntopics; i++) {
        const st_gtopic_t *t = &c->topics[i];
        for (int k = 0; k < g->cg->nmembers; k++)
            if (member_subscribes(g->cg->members[k], t)) {
                h = fnv1a(t->id.b, 16, h);
                h = fnv1a(&t->partitions, sizeof t->partitions, h);
                break;
            }
    }
    return h;
}

/* The group's assignor: the server_assignor most members name, else the first configured. */
static st_kstr_t group_assignor(const st_gcoord_t *c, const st_ggroup_t *g)
{
    st_kstr_t best = ST_KSTR_NULL;
    int votes = 0;
    for (int i = 0; i < g->cg->nmembers; i++) {
        st_gstr_t a = g->cg->members[i]->server_assignor;
        if (!a.ptr)
            continue;
        int n = 0;
        for (int k = 0; k < g->cg->nmembers; k++)
            n += gstr_eq(a, g->cg->members[k]->server_assignor);
        if (n > votes) {
            votes = n;
            best = as_kstr(a);
        }
    }
    if (best.len > 0)
        return best;
    const char *list = c->cfg.consumer_assignors ? c->cfg.consumer_assignors : "uniform,range";
    while (*list == ' ' || *list == ',')
        list++;
    size_t n = strcspn(list, ", ");
    return (st_kstr_t){list, (int32_t)n};
}

/* Whether name is one of group.consumer.assignors (and one this broker implements). */
static bool assignor_known(const st_gcoord_t *c, st_kstr_t name)
{
    const char *list = c->cfg.consumer_assignors ? c->cfg.consumer_assignors : "uniform,range";
    for (const char *p = list; *p;) {
        p += strspn(p, ", ");
        size_t n = strcspn(p, ", ");
        if (n && (size_t)name.len == n && !memcmp(p, name.ptr, n))
            return st_gassign_by_name(name) != NULL;
        p += n;
    }
    return false;
}

/* Computes the target assignment at the group epoch and writes what changed. */
static int compute_target(st_gcoord_t *c, st_ggroup_t *g, st_gbatch_t *b)
{
    st_gcgroup_t *cg = g->cg;
    int n = cg->nmembers, rc = 0;
    st_gassign_member_t *am = calloc((size_t)n + 1, sizeof *am);
    const st_gtopic_t **tops = calloc((size_t)n * (size_t)c->ntopics + 1, sizeof *tops);
    if (!am || !tops) {
        rc = -ENOMEM;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        st_gcmember_t *m = cg->members[i];
        am[i].member_id = as_kstr(m->member_id);
        am[i].topics = tops + (size_t)i * (size_t)c->ntopics;
        am[i].ntopics = member_topics(c, m, (const st_gtopic_t **)am[i].topics);
        am[i].current = &m->target;
    }
    st_kstr_t name = group_assignor(c, g);
    st_gassign_fn fn = st_gassign_by_name(name);
    if (!fn) {
        name = st_kstr("uniform");
        fn = st_gassign_uniform;
    }
    gstr_set(&cg->assignor, name);
    rc = n ? fn(am, n) : 0;
    for (int i = 0; i < n && !rc; i++) {
        st_gcmember_t *m = cg->members[i];
        if (!st_gtpset_eq(&am[i].out, &m->target)) {
            st_gtpset_move(&m->target, &am[i].out);
            rc = rec_target(b, g, m);
        }
    }
    cg->assignment_epoch = cg->group_epoch;
    if (!rc)
        rc = rec_target_epoch(b, g);
out:
    for (int i = 0; am && i < n; i++)
        st_gtpset_free(&am[i].out);
    free(am);
    free(tops);
    return rc;
}

/* Steps 2-3 of a heartbeat for the group: bumps the group epoch when `bump` or the subscribed
 * topics changed, then recomputes the target when it is behind. */
static int group_update(st_gcoord_t *c, st_ggroup_t *g, st_gbatch_t *b, bool bump)
{
    st_gcgroup_t *cg = g->cg;
    int rc = 0;
    topics_refresh(c);
    if (bump || cg->md_version != c->topics_version) {
        uint64_t h = subs_hash(c, g);
        if (cg->md_version == -2) /* just loaded: adopt, the target was computed against it */
            cg->subs_hash = h;
        if (h != cg->subs_hash)
            bump = true;
        cg->subs_hash = h;
        cg->md_version = c->topics_version;
    }
    if (bump) {
        cg->group_epoch++;
        rc = rec_epoch(b, g);
        ST_INFO("group %.*s: group epoch %d", ST_GSTR_ARG(g->id), cg->group_epoch);
    }
    if (!rc && cg->group_epoch > cg->assignment_epoch)
        rc = compute_target(c, g, b);
    return rc;
}

typedef struct {
    const st_ggroup_t *g;
    const st_gcmember_t *self;
} held_ctx_t;

static bool held(void *arg, const st_gtp_t *tp)
{
    held_ctx_t *h = arg;
    for (int i = 0; i < h->g->cg->nmembers; i++) {
        const st_gcmember_t *m = h->g->cg->members[i];
        if (m != h->self && (st_gtpset_has(&m->cur.assigned, tp->topic, tp->partition) ||
                             st_gtpset_has(&m->cur.revoking, tp->topic, tp->partition)))
            return true;
    }
    return false;
}

/* Step 4: one reconciliation step of m; its record when it changed. */
static int reconcile(st_gcoord_t *c, st_ggroup_t *g, st_gcmember_t *m, const st_gtpset_t *owned,
                     st_gbatch_t *b)
{
    held_ctx_t h = {g, m};
    int rc = st_greconcile(&m->cur, g->cg->assignment_epoch, &m->target, owned, held, &h);
    if (rc <= 0)
        return rc;
    if (m->cur.state == ST_GMS_UNREVOKED) {
        if (!c->closed && !st_timer_armed(&m->revoke_timer))
            st_loop_timer_start(c->loop, &m->revoke_timer, m->rebalance_timeout);
    } else {
        st_loop_timer_stop(c->loop, &m->revoke_timer);
    }
    return rec_current(b, g, m);
}

/* Kafka's consumerGroupFenceMember: m goes, its partitions are free, the epoch moves on. */
static int fence(st_gcoord_t *c, st_ggroup_t *g, st_gcmember_t *m, st_gbatch_t *b)
{
    int rc = rec_member_gone(b, g, m);
    member_unlink(g->cg, m);
    member_free(c, m);
    if (!rc)
        rc = group_update(c, g, b, true);
    sync_state(g);
    return rc;
}

/* A fence from a timer: written, nobody waits. */
static void fence_now(st_gcmember_t *m, const char *why)
{
    st_ggroup_t *g = m->g;
    st_gcoord_t *c = g->c;
    ST_INFO("group %.*s: member %.*s fenced (%s)", ST_GSTR_ARG(g->id), ST_GSTR_ARG(m->member_id),
            why);
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    fence(c, g, m, &b);
    st_gwrite_t *w = c->closed ? NULL : st_group_write_new(c, g->partition, g, NULL);
    if (w)
        st_group_write(c, &b, w);
    st_gbatch_fini(&b);
}

static void session_expired(st_timer_t *t)
{
    fence_now(t->data, "session timed out");
}

static void revoke_expired(st_timer_t *t)
{
    st_gcmember_t *m = t->data;
    if (m->cur.state == ST_GMS_UNREVOKED)
        fence_now(m, "partitions not revoked within the rebalance timeout");
}

/* ---- ConsumerGroupHeartbeat ---- */

typedef struct {
    st_kp_consumer_group_heartbeat_resp_t *resp;
    st_gcoord_done_fn done;
    void *arg;
} hb_wait_t;

static void hb_written(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    (void)c;
    hb_wait_t *h = w->ctx;
    if (res) {
        h->resp->error_code = write_kerr(res);
        h->resp->assignment_null = true;
    }
    h->done(h->arg);
    free(h);
}

/* Kafka's member ids: a random UUID in URL-safe base64, 22 characters. */
static int32_t new_member_id(char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t r[18] = {0};
    if (getrandom(r, 16, 0) != 16) {
        uint64_t t = (uint64_t)st_mono_ns();
        for (int i = 0; i < 16; i++)
            r[i] = (uint8_t)(t >> (8 * (i % 8))) ^ (uint8_t)(i * 37);
    }
    r[6] = (uint8_t)((r[6] & 0x0f) | 0x40);
    r[8] = (uint8_t)((r[8] & 0x3f) | 0x80);
    int32_t n = 0;
    for (int i = 0; i < 16; i += 3) {
        uint32_t v = (uint32_t)r[i] << 16 | (uint32_t)r[i + 1] << 8 | r[i + 2];
        out[n++] = a[(v >> 18) & 63];
        out[n++] = a[(v >> 12) & 63];
        if (i + 1 < 16)
            out[n++] = a[(v >> 6) & 63];
        if (i + 2 < 16)
            out[n++] = a[v & 63];
    }
    return n;
}

static int set_names(st_gcmember_t *m, const st_kstr_t *v, int32_t n)
{
    st_gstr_t *names = calloc((size_t)n + 1, sizeof *names);
    if (!names)
        return -ENOMEM;
    for (int32_t i = 0; i < n; i++) {
        names[i] = ST_GSTR_NULL;
        if (gstr_set(&names[i], v[i].len < 0 ? ST_KSTR_EMPTY : v[i])) {
            strs_free(names, i);
            return -ENOMEM;
        }
    }
    strs_free(m->topic_names, m->ntopic_names);
    m->topic_names = names;
    m->ntopic_names = n;
    return 0;
}

static bool names_equal(const st_gcmember_t *m, const st_kstr_t *v, int32_t n)
{
    if (n != m->ntopic_names)
        return false;
    for (int32_t i = 0; i < n; i++)
        if (!kstr_is(v[i], m->topic_names[i]))
            return false;
    return true;
}

/* Answer with an error (the member's id and epoch as the request gave them). */
static void hb_fail(st_kp_consumer_group_heartbeat_resp_t *resp, int16_t err, const char *msg,
                    st_gcoord_done_fn done, void *arg)
{
    resp->error_code = err;
    resp->error_message = msg ? st_kstr(msg) : ST_KSTR_NULL;
    resp->assignment_null = true;
    done(arg);
}

/* Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid. */
static const char *hb_invalid(const st_gcoord_t *c, const st_kp_consumer_group_heartbeat_req_t *q,
                              int16_t version, int16_t *err)
{
    *err = ST_KERR_INVALID_REQUEST;
    if (q->group_id.len <= 0)
        return "GroupId can't be empty.";
    if (q->instance_id.len == 0)
        return "InstanceId can't be empty.";
    if (q->rack_id.len == 0)
        return "RackId can't be empty.";
    if (version >= 1 && q->member_id.len <= 0)
        return "MemberId can't be empty.";
    if (q->member_epoch > 0 || q->member_epoch == LEAVE_EPOCH) {
        if (q->member_id.len <= 0)
            return "MemberId can't be empty.";
    } else if (q->member_epoch == 0) {
        if (q->rebalance_timeout_ms == -1)
            return "RebalanceTimeoutMs must be provided in first request.";
        if (q->topic_partitions_count != 0)
            return "TopicPartitions must be empty when (re-)joining.";
        if (q->subscribed_topic_names_count < 0 && q->subscribed_topic_regex.len < 0)
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.";
    } else if (q->member_epoch == LEAVE_STATIC_EPOCH) {
        if (q->member_id.len <= 0)
            return "MemberId can't be empty.";
        if (q->instance_id.len < 0)
            return "InstanceId can't be null.";
    } else {
        return "MemberEpoch is invalid.";
    }
    if (q->server_assignor.len >= 0 && !assignor_known(c, q->server_assignor)) {
        *err = ST_KERR_UNSUPPORTED_ASSIGNOR;
        return "ServerAssignor is not supported.";
    }
    if (q->subscribed_topic_regex.len > 0) {
        void *re = re_compile(q->subscribed_topic_regex);
        if (!re) {
            *err = ST_KERR_INVALID_REGULAR_EXPRESSION;
            return "SubscribedTopicRegex is not a valid regular expression.";
        }
        pcre2_code_free(re);
    }
    *err = 0;
    return NULL;
}

/* The assignment of an answer, in the caller's arena. */
static void fill_assignment(st_arena_t *a, const st_gtpset_t *s,
                            st_kp_consumer_group_heartbeat_resp_assignment_t *out)
{
    int32_t nt = 0;
    for (int i = 0; i < s->n; i++)
        if (i == 0 || memcmp(s->v[i].topic.b, s->v[i - 1].topic.b, 16))
            nt++;
    out->topic_partitions = st_arena_zalloc(a, (size_t)nt * sizeof *out->topic_partitions + 1);
    int32_t *parts = st_arena_alloc(a, (size_t)s->n * sizeof *parts + 1);
    out->topic_partitions_count = 0;
    if (!out->topic_partitions || !parts)
        return;
    for (int i = 0; i < s->n;) {
        st_kp_consumer_group_heartbeat_resp_topic_partition_t *t =
            &out->topic_partitions[out->topic_partitions_count++];
        t->topic_id = s->v[i].topic;
        t->partitions = parts + i;
        t->partitions_count = 0;
        for (; i < s->n && !memcmp(s->v[i].topic.b, t->topic_id.b, 16); i++)
            t->partitions[t->partitions_count++] = s->v[i].partition;
    }
}

void st_gcoord_consumer_heartbeat(st_gcoord_t *c, int32_t partition,
                                  const st_kp_consumer_group_heartbeat_req_t *q, int16_t version,
                                  st_kstr_t client_id, st_kstr_t client_host, st_arena_t *a,
                                  st_kp_consumer_group_heartbeat_resp_t *resp,
                                  st_gcoord_done_fn done, void *arg)
{
    resp->member_id = answer_kstr(a, q->member_id.len >= 0 ? q->member_id : ST_KSTR_EMPTY);
    resp->member_epoch = q->member_epoch;
    resp->heartbeat_interval_ms = c->cfg.consumer_heartbeat_interval_ms;
    resp->assignment_null = true;
    if (c->closed || !st_gcoord_loaded(c, partition)) {
        hb_fail(resp, ST_KERR_NOT_COORDINATOR, NULL, done, arg);
        return;
    }
    int16_t err;
    const char *why = hb_invalid(c, q, version, &err);
    if (why) {
        hb_fail(resp, err, why, done, arg);
        return;
    }
    bool join = q->member_epoch == 0;
    st_ggroup_t *g = st_group_find(c, q->group_id);
    if (g && g->state == G_DEAD) {
        hb_fail(resp, ST_KERR_COORDINATOR_NOT_AVAILABLE, NULL, done, arg);
        return;
    }
    if (!g || (g->type == G_TYPE_CLASSIC && !join)) {
        if (!join) {
            hb_fail(resp, ST_KERR_GROUP_ID_NOT_FOUND, "Group not found.", done, arg);
            return;
        }
        g = st_group_create(c, q->group_id, partition);
        if (!g) {
            hb_fail(resp, ST_KERR_UNKNOWN_SERVER_ERROR, NULL, done, arg);
            return;
        }
    }
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    int rc = 0;
    if (g->type == G_TYPE_CLASSIC) {
        if (g->nmembers > 0 || g->state != G_EMPTY) {
            st_gbatch_fini(&b);
            hb_fail(resp, ST_KERR_GROUP_ID_NOT_FOUND, "Group is not a consumer group.", done, arg);
            return;
        }
        /* an empty classic group (offsets only) becomes a consumer group (Kafka's
         * maybeDeleteEmptyClassicGroup): its metadata record goes */
        if (g->stored)
            rc = st_group_add_group_record(&b, as_kstr(g->id), NULL, 0);
        g->stored = false;
        if (!rc)
            rc = make_consumer(g);
    }
    if (rc) {
        st_gbatch_fini(&b);
        hb_fail(resp, ST_KERR_UNKNOWN_SERVER_ERROR, NULL, done, arg);
        return;
    }
    /* owned partitions, as the client says (null: it did not say) */
    st_gtpset_t owned = {0};
    bool has_owned = q->topic_partitions_count >= 0;
    for (int32_t i = 0; has_owned && i < q->topic_partitions_count && !rc; i++)
        for (int32_t k = 0; k < q->topic_partitions[i].partitions_count && !rc; k++)
            rc = st_gtpset_push(&owned, q->topic_partitions[i].topic_id,
                                q->topic_partitions[i].partitions[k]);
    st_gtpset_normalize(&owned);

    /* 1. the member */
    st_gcmember_t *m = NULL;
    bool bump = false, is_new = false;
    int16_t merr = 0;
    const char *mmsg = NULL;
    char idbuf[32];
    st_kstr_t mid = q->member_id;
    if (mid.len <= 0) {
        mid = (st_kstr_t){idbuf, new_member_id(idbuf)};
    }
    if (q->member_epoch == LEAVE_EPOCH || q->member_epoch == LEAVE_STATIC_EPOCH) {
        if (q->instance_id.len >= 0) {
            m = member_find_static(g, q->instance_id);
            if (!m)
                merr = ST_KERR_UNKNOWN_MEMBER_ID;
            else if (!kstr_is(mid, m->member_id))
                merr = ST_KERR_FENCED_INSTANCE_ID;
        } else if (!(m = st_cgroup_member_find(g, mid))) {
            merr = ST_KERR_UNKNOWN_MEMBER_ID;
        }
        if (merr) {
            st_gtpset_free(&owned);
            st_gbatch_fini(&b);
            hb_fail(resp, merr, NULL, done, arg);
            return;
        }
        if (q->member_epoch == LEAVE_STATIC_EPOCH) {
            /* the slot and its partitions stay until the session times out */
            m->cur.epoch = LEAVE_STATIC_EPOCH;
            st_gtpset_clear(&m->cur.revoking);
            rc = rec_current(&b, g, m);
            member_touch(c, m);
            ST_INFO("group %.*s: static member %.*s left for now", ST_GSTR_ARG(g->id),
                    ST_GSTR_ARG(m->member_id));
        } else {
            ST_INFO("group %.*s: member %.*s left", ST_GSTR_ARG(g->id), ST_GSTR_ARG(m->member_id));
            rc = fence(c, g, m, &b);
        }
        resp->member_epoch = q->member_epoch;
        goto write;
    }
    if (q->instance_id.len >= 0) {
        st_gcmember_t *sm = member_find_static(g, q->instance_id);
        if (join && sm && !kstr_is(mid, sm->member_id)) {
            if (sm->cur.epoch != LEAVE_STATIC_EPOCH) {
                merr = ST_KERR_UNRELEASED_INSTANCE_ID;
            } else {
                /* the static member comes back under a new id: it takes the slot, its
                 * assignment and target (Kafka's replaceMember) */
                rc = rec_member_gone(&b, g, sm);
                if (!rc && gstr_set(&sm->member_id, mid))
                    rc = -ENOMEM;
                sm->cur.epoch = sm->cur.prev_epoch = 0;
                sm->cur.state = ST_GMS_STABLE;
                st_gtpset_clear(&sm->cur.revoking);
                if (!rc)
                    rc = rec_target(&b, g, sm);
                m = sm;
                is_new = true;
            }
        } else if (!join) {
            if (!sm)
                merr = ST_KERR_UNKNOWN_MEMBER_ID;
            else if (!kstr_is(mid, sm->member_id))
                merr = ST_KERR_FENCED_INSTANCE_ID;
            else
                m = sm;
        } else {
            m = sm;
        }
    } else {
        m = st_cgroup_member_find(g, mid);
        if (!m && !join)
            merr = ST_KERR_UNKNOWN_MEMBER_ID;
    }
    if (!merr && m && !join) {
        /* Kafka's throwIfConsumerGroupMemberEpochIsInvalid */
        if (q->member_epoch > m->cur.epoch) {
            merr = ST_KERR_FENCED_MEMBER_EPOCH;
        } else if (q->member_epoch < m->cur.epoch) {
            bool subset = has_owned;
            for (int i = 0; subset && i < owned.n; i++)
                subset = st_gtpset_has(&m->cur.assigned, owned.v[i].topic, owned.v[i].partition);
            if (q->member_epoch != m->cur.prev_epoch || !subset)
                merr = ST_KERR_FENCED_MEMBER_EPOCH;
        }
        if (merr)
            mmsg = "The member epoch is not the one the coordinator knows: the member must "
                   "abandon its partitions and rejoin.";
    }
    if (!merr && !m && c->cfg.consumer_max_size > 0 &&
        g->cg->nmembers >= c->cfg.consumer_max_size) {
        /* Kafka's throwIfConsumerGroupIsFull: a member that is not there yet */
        merr = ST_KERR_GROUP_MAX_SIZE_REACHED;
        mmsg = "The consumer group has reached its maximum capacity (group.consumer.max.size).";
    }
    if (merr || rc) {
        st_gtpset_free(&owned);
        st_gbatch_fini(&b);
        sync_state(g);
        hb_fail(resp, merr ? merr : ST_KERR_UNKNOWN_SERVER_ERROR, mmsg, done, arg);
        return;
    }
    if (!m) {
        m = member_new(g, mid);
        if (!m) {
            st_gtpset_free(&owned);
            st_gbatch_fini(&b);
            sync_state(g);
            hb_fail(resp, ST_KERR_UNKNOWN_SERVER_ERROR, NULL, done, arg);
            return;
        }
        is_new = true;
        ST_INFO("group %.*s: member %.*s joins", ST_GSTR_ARG(g->id), ST_GSTR_ARG(m->member_id));
    } else if (join && !is_new) {
        /* a known member rejoining with epoch 0 has dropped its partitions */
        m->cur.epoch = m->cur.prev_epoch = 0;
        m->cur.state = ST_GMS_STABLE;
        st_gtpset_clear(&m->cur.assigned);
        st_gtpset_clear(&m->cur.revoking);
        rc = rec_current(&b, g, m);
    }
    bool changed = is_new;
    if (q->instance_id.len >= 0 && !kstr_is(q->instance_id, m->instance_id)) {
        gstr_set(&m->instance_id, q->instance_id);
        changed = true;
    }
    if (q->rack_id.len >= 0 && !kstr_is(q->rack_id, m->rack_id)) {
        gstr_set(&m->rack_id, q->rack_id);
        changed = true;
    }
    if (q->rebalance_timeout_ms != -1 && q->rebalance_timeout_ms != m->rebalance_timeout) {
        m->rebalance_timeout = q->rebalance_timeout_ms > 0 ? q->rebalance_timeout_ms : 1;
        changed = true;
    }
    if (q->server_assignor.len >= 0 && !kstr_is(q->server_assignor, m->server_assignor)) {
        gstr_set(&m->server_assignor, q->server_assignor);
        changed = bump = true;
    }
    if (q->subscribed_topic_names_count >= 0 &&
        !names_equal(m, q->subscribed_topic_names, q->subscribed_topic_names_count)) {
        if (set_names(m, q->subscribed_topic_names, q->subscribed_topic_names_count))
            rc = -ENOMEM;
        changed = bump = true;
    }
    if (q->subscribed_topic_regex.len >= 0 && !kstr_is(q->subscribed_topic_regex, m->regex)) {
        gstr_set(&m->regex, q->subscribed_topic_regex);
        if (m->re)
            pcre2_code_free(m->re);
        m->re = q->subscribed_topic_regex.len > 0 ? re_compile(q->subscribed_topic_regex) : NULL;
        changed = bump = true;
    }
    if (!kstr_is(client_id, m->client_id) || !kstr_is(client_host, m->client_host)) {
        gstr_set(&m->client_id, client_id);
        gstr_set(&m->client_host, client_host);
        changed = true;
    }
    if (changed && !rc)
        rc = rec_member(&b, g, m);
    if (is_new)
        bump = true;
    member_touch(c, m);

    /* 2-3. epochs and target */
    st_gtpset_t before = {0};
    if (!rc)
        rc = st_gtpset_copy(&before, &m->cur.assigned);
    if (!rc)
        rc = group_update(c, g, &b, bump);
    /* 4. reconciliation */
    if (!rc)
        rc = reconcile(c, g, m, has_owned ? &owned : NULL, &b);
    rc = rc < 0 ? rc : 0;
    sync_state(g);
    resp->member_id = answer_str(a, m->member_id);
    resp->member_epoch = m->cur.epoch;
    bool full = join || (q->rebalance_timeout_ms != -1 && q->subscribed_topic_names_count >= 0 &&
                         has_owned);
    if (!rc && (full || !st_gtpset_eq(&before, &m->cur.assigned))) {
        resp->assignment_null = false;
        fill_assignment(a, &m->cur.assigned, &resp->assignment);
    }
    st_gtpset_free(&before);
write:
    st_gtpset_free(&owned);
    if (rc) {
        st_gbatch_fini(&b);
        hb_fail(resp, ST_KERR_UNKNOWN_SERVER_ERROR, NULL, done, arg);
        return;
    }
    hb_wait_t *h = malloc(sizeof *h);
    st_gwrite_t *w = h ? st_group_write_new(c, partition, g, hb_written) : NULL;
    if (!w) {
        free(h);
        st_gbatch_fini(&b);
        hb_fail(resp, ST_KERR_UNKNOWN_SERVER_ERROR, NULL, done, arg);
        return;
    }
    *h = (hb_wait_t){resp, done, arg};
    w->ctx = h;
    st_group_write(c, &b, w);
    st_gbatch_fini(&b);
}

/* ---- ConsumerGroupDescribe ---- */

static st_kstr_t topic_name(const st_gcoord_t *c, const st_kuuid_t *id)
{
    for (int i = 0; i < c->ntopics; i++)
        if (!memcmp(c->topics[i].id.b, id->b, 16))
            return c->topics[i].name;
    return ST_KSTR_EMPTY;
}

/* A described assignment (both of ConsumerGroupDescribe's struct types share the layout). */
static st_kp_consumer_group_describe_resp_topic_partition_t *
describe_tps(const st_gcoord_t *c, st_arena_t *a, const st_gtpset_t *s, int32_t *count)
{
    int32_t nt = 0;
    for (int i = 0; i < s->n; i++)
        if (i == 0 || memcmp(s->v[i].topic.b, s->v[i - 1].topic.b, 16))
            nt++;
    st_kp_consumer_group_describe_resp_topic_partition_t *v =
        st_arena_zalloc(a, (size_t)nt * sizeof *v + 1);
    int32_t *parts = st_arena_alloc(a, (size_t)s->n * sizeof *parts + 1);
    *count = 0;
    if (!v || !parts)
        return v;
    for (int i = 0; i < s->n;) {
        st_kp_consumer_group_describe_resp_topic_partition_t *t = &v[(*count)++];
        t->topic_id = s->v[i].topic;
        t->topic_name = answer_kstr(a, topic_name(c, &t->topic_id));
        t->partitions = parts + i;
        t->partitions_count = 0;
        for (; i < s->n && !memcmp(s->v[i].topic.b, t->topic_id.b, 16); i++)
            t->partitions[t->partitions_count++] = s->v[i].partition;
    }
    return v;
}

void st_gcoord_consumer_describe(st_gcoord_t *c, int32_t partition, int16_t version, st_arena_t *a,
                                 st_kp_consumer_group_describe_resp_group_t *out)
{
    (void)version;
    out->group_state = st_kstr("Dead");
    out->assignor_name = ST_KSTR_EMPTY;
    st_ggroup_t *g;
    out->error_code = st_group_lookup(c, partition, out->group_id, ST_KERR_GROUP_ID_NOT_FOUND, &g);
    if (!out->error_code && g->type != G_TYPE_CONSUMER)
        out->error_code = ST_KERR_GROUP_ID_NOT_FOUND;
    if (out->error_code) {
        if (out->error_code == ST_KERR_GROUP_ID_NOT_FOUND)
            out->error_message = st_kstr(g ? "Group is not a consumer group." : "Group not found.");
        return;
    }
    topics_refresh(c);
    st_gcgroup_t *cg = g->cg;
    out->group_state = st_kstr(st_cgroup_state(g));
    out->group_epoch = cg->group_epoch;
    out->assignment_epoch = cg->assignment_epoch;
    out->assignor_name =
        cg->assignor.ptr ? answer_str(a, cg->assignor) : answer_kstr(a, group_assignor(c, g));
    out->members = st_arena_zalloc(a, (size_t)cg->nmembers * sizeof *out->members + 1);
    if (!out->members)
        return;
    for (int i = 0; i < cg->nmembers; i++) {
        st_gcmember_t *m = cg->members[i];
        st_kp_consumer_group_describe_resp_member_t *o = &out->members[out->members_count++];
        st_kp_consumer_group_describe_resp_member_init(o);
        o->member_id = answer_str(a, m->member_id);
        o->instance_id = answer_str(a, m->instance_id);
        o->rack_id = answer_str(a, m->rack_id);
        o->member_epoch = m->cur.epoch;
        o->client_id = answer_str0(a, m->client_id);
        o->client_host = answer_str0(a, m->client_host);
        o->subscribed_topic_names =
            st_arena_zalloc(a, (size_t)m->ntopic_names * sizeof(st_kstr_t) + 1);
        for (int k = 0; o->subscribed_topic_names && k < m->ntopic_names; k++)
            o->subscribed_topic_names[o->subscribed_topic_names_count++] =
                answer_str(a, m->topic_names[k]);
        o->subscribed_topic_regex = answer_str(a, m->regex);
        o->assignment.topic_partitions =
            describe_tps(c, a, &m->cur.assigned, &o->assignment.topic_partitions_count);
        /* the target's struct type is a twin of the assignment's: copied field by field */
        int32_t n;
        st_kp_consumer_group_describe_resp_topic_partition_t *t =
            describe_tps(c, a, &m->target, &n);
        o->target_assignment.topic_partitions =
            st_arena_zalloc(a, (size_t)n * sizeof *o->target_assignment.topic_partitions + 1);
        for (int32_t k = 0; t && o->target_assignment.topic_partitions && k < n; k++) {
            st_kp_consumer_group_describe_resp_target_topic_partition_t *x =
                &o->target_assignment
                     .topic_partitions[o->target_assignment.topic_partitions_count++];
            x->topic_id = t[k].topic_id;
            x->topic_name = t[k].topic_name;
            x->partitions = t[k].partitions;
            x->partitions_count = t[k].partitions_count;
        }
        o->member_type = 1; /* a consumer-protocol member */
    }
}

/* ---- offsets of a consumer group's members ---- */

int16_t st_cgroup_check_member(st_gcoord_t *c, st_ggroup_t *g, st_kstr_t member_id, int32_t epoch,
                               bool commit)
{
    (void)c;
    /* outside the group (an admin, a consumer without group management): a commit without an
     * epoch only while the group has no member (Kafka's validateOffsetCommit), a fetch
     * without a member id and epoch always (validateOffsetFetch) */
    if (commit && epoch < 0 && (!g->cg || g->cg->nmembers == 0))
        return 0;
    if (!commit && epoch < 0 && member_id.len < 0)
        return 0;
    st_gcmember_t *m = st_cgroup_member_find(g, member_id);
    if (!m)
        return ST_KERR_UNKNOWN_MEMBER_ID;
    if (epoch != m->cur.epoch)
        return ST_KERR_STALE_MEMBER_EPOCH;
    member_touch(c, m);
    return 0;
}

/* ---- loading ---- */

static st_ggroup_t *load_group(st_gcoord_t *c, int32_t partition, st_kstr_t id, bool tombstone)
{
    st_ggroup_t *g = st_group_find(c, id);
    if (!g) {
        if (tombstone)
            return NULL;
        g = st_group_create(c, id, partition);
        if (!g)
            return NULL;
    }
    if (!g->cg && (tombstone || make_consumer(g)))
        return NULL;
    return g;
}

static st_gcmember_t *load_member(st_ggroup_t *g, st_kstr_t id, bool tombstone)
{
    st_gcmember_t *m = st_cgroup_member_find(g, id);
    if (!m && !tombstone)
        m = member_new(g, id);
    return m;
}

static int load_member_value(st_gcmember_t *m, st_kreader_t *r)
{
    st_kstr_t inst, rack, cid, chost, regex, assignor;
    int32_t n, rt;
    if (st_kreader_str(r, true, true, &inst) || st_kreader_str(r, true, true, &rack) ||
        st_kreader_str(r, true, false, &cid) || st_kreader_str(r, true, false, &chost) ||
        st_kreader_count(r, true, false, 1, &n))
        return ST_E_CORRUPT;
    st_kstr_t *names = st_kreader_alloc(r, (size_t)n + 1, sizeof *names);
    if (!names)
        return -ENOMEM;
    for (int32_t i = 0; i < n; i++)
        if (st_kreader_str(r, true, false, &names[i]))
            return ST_E_CORRUPT;
    if (st_kreader_str(r, true, true, &regex) || st_kreader_i32(r, &rt) ||
        st_kreader_str(r, true, true, &assignor))
        return ST_E_CORRUPT;
    gstr_set(&m->instance_id, inst);
    gstr_set(&m->rack_id, rack);
    gstr_set(&m->client_id, cid);
    gstr_set(&m->client_host, chost);
    gstr_set(&m->regex, regex);
    gstr_set(&m->server_assignor, assignor);
    if (m->re)
        pcre2_code_free(m->re);
    m->re = regex.len > 0 ? re_compile(regex) : NULL;
    m->rebalance_timeout = rt > 0 ? rt : 300000;
    return set_names(m, names, n);
}

void st_cgroup_load_record(st_gcoord_t *c, int32_t partition, int16_t kv, const uint8_t *key,
                           int32_t key_len, const uint8_t *value, int32_t value_len)
{
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_kreader_t r;
    st_kreader_init(&r, key, (size_t)key_len, &a);
    int16_t v;
    st_kstr_t gid, mid = ST_KSTR_NULL;
    bool tomb = value_len < 0 || !value;
    int rc = st_kreader_i16(&r, &v) || st_kreader_str(&r, false, false, &gid) ? ST_E_CORRUPT : 0;
    if (!rc && (kv == K_MEMBER || kv == K_TARGET_MEMBER || kv == K_CURRENT))
        rc = st_kreader_str(&r, false, false, &mid) ? ST_E_CORRUPT : 0;
    int16_t vv = 0;
    if (!rc && !tomb) {
        st_kreader_init(&r, value, (size_t)value_len, &a);
        rc = st_kreader_i16(&r, &vv) ? ST_E_CORRUPT : 0;
    }
    st_ggroup_t *g = rc || kv == K_PARTITION_METADATA ? NULL : load_group(c, partition, gid, tomb);
    if (!g)
        goto out;
    st_gcgroup_t *cg = g->cg;
    cg->md_version = -2;
    if (kv == K_METADATA) {
        if (tomb) {
            st_cgroup_free(c, g);
            g->type = G_TYPE_CLASSIC;
            gstr_free(&g->protocol_type);
            g->stored = false;
        } else {
            rc = st_kreader_i32(&r, &cg->group_epoch) ? ST_E_CORRUPT : 0;
            g->stored = true;
        }
    } else if (kv == K_TARGET_METADATA) {
        if (!tomb)
            rc = st_kreader_i32(&r, &cg->assignment_epoch) ? ST_E_CORRUPT : 0;
    } else {
        st_gcmember_t *m = load_member(g, mid, tomb);
        if (!m)
            goto out;
        if (kv == K_MEMBER && tomb) {
            member_unlink(cg, m);
            member_free(c, m);
        } else if (kv == K_MEMBER) {
            rc = load_member_value(m, &r);
        } else if (kv == K_TARGET_MEMBER) {
            rc = tomb ? (st_gtpset_clear(&m->target), 0) : read_tps(&r, &m->target);
        } else if (tomb) {
            m->cur.epoch = m->cur.prev_epoch = 0;
            m->cur.state = ST_GMS_STABLE;
            st_gtpset_clear(&m->cur.assigned);
            st_gtpset_clear(&m->cur.revoking);
        } else {
            rc = st_kreader_i32(&r, &m->cur.epoch) || st_kreader_i32(&r, &m->cur.prev_epoch) ||
                         st_kreader_i8(&r, &m->cur.state)
                     ? ST_E_CORRUPT
                     : 0;
            if (!rc)
                rc = read_tps(&r, &m->cur.assigned);
            if (!rc)
                rc = read_tps(&r, &m->cur.revoking);
            if (m->cur.state < ST_GMS_STABLE || m->cur.state > ST_GMS_UNRELEASED)
                m->cur.state = ST_GMS_STABLE;
        }
    }
out:
    if (rc)
        ST_WARN("__consumer_offsets-%d: consumer group record (key version %d) does not parse: %s",
                partition, kv, st_strerror(rc));
    st_arena_fini(&a);
}

void st_cgroup_loaded(st_gcoord_t *c, st_ggroup_t *g)
{
    if (!g->cg)
        return;
    for (int i = 0; i < g->cg->nmembers; i++)
        member_touch(c, g->cg->members[i]);
    g->state = g->cg->nmembers > 0 ? G_STABLE : G_EMPTY;
}

int st_cgroup_to_classic(st_gcoord_t *c, st_ggroup_t *g)
{
    if (!g->cg || g->cg->nmembers > 0)
        return -1;
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    st_gwrite_t *w = st_cgroup_add_tombstones(&b, g) || c->closed
                         ? NULL
                         : st_group_write_new(c, g->partition, g, NULL);
    if (w)
        st_group_write(c, &b, w);
    st_gbatch_fini(&b);
    st_cgroup_free(c, g);
    g->type = G_TYPE_CLASSIC;
    gstr_free(&g->protocol_type);
    g->generation = 0;
    ST_INFO("group %.*s: empty consumer group becomes a classic group", ST_GSTR_ARG(g->id));
    return 0;
}

void st_cgroup_drain(st_gcoord_t *c, st_ggroup_t *g)
{
    for (int i = 0; g->cg && i < g->cg->nmembers; i++) {
        st_loop_timer_stop(c->loop, &g->cg->members[i]->session_timer);
        st_loop_timer_stop(c->loop, &g->cg->members[i]->revoke_timer);
    }
}

void st_cgroup_topics_free(st_gcoord_t *c)
{
    topics_free(c);
}
