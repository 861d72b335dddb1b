/*
 * rebalance.c — a group's members and its state machine (diagram and invariants in coord.h):
 *
 *   Empty/Stable/CompletingRebalance -> PreparingRebalance   st_group_prepare_rebalance
 *   PreparingRebalance -> CompletingRebalance (or Empty)      complete_join, when every member
 *                                                             rejoined or the join timer ran out
 *   CompletingRebalance -> Stable                             sync_written (membership.c)
 *   Stable/CompletingRebalance -> PreparingRebalance          st_group_remove_member (leave,
 *                                                             session_expired)
 *   Empty -> Dead                                             st_gcoord_delete_group,
 *                                                             expire_group (offsets.c)
 *
 * Members that do not rejoin in time are dropped (static ones keep their place until their
 * session expires); every waiting JoinGroup/SyncGroup is answered exactly once (invariant 4).
 */
#include "group/coord_impl.h"

#include "base/clock.h"
#include "base/log.h"
#include "proto/kerr.h"

/* ---- members ---- */

static void session_expired(st_timer_t *t);

void st_group_member_touch(st_gcoord_t *c, st_gmember_t *m)
{
    if (!c->closed)
        st_loop_timer_start(c->loop, &m->session_timer, m->session_timeout);
}

st_gmember_t *st_group_member_find(const st_ggroup_t *g, st_kstr_t id)
{
    if (id.len <= 0)
        return NULL;
    for (int i = 0; i < g->nmembers; i++)
        if (kstr_is(id, g->members[i]->member_id))
            return g->members[i];
    return NULL;
}

st_gmember_t *st_group_member_find_static(const st_ggroup_t *g, st_kstr_t instance)
{
    if (instance.len < 0)
        return NULL;
    for (int i = 0; i < g->nmembers; i++)
        if (g->members[i]->instance_id.ptr && kstr_is(instance, g->members[i]->instance_id))
            return g->members[i];
    return NULL;
}

/* FENCED_INSTANCE_ID when instance names a static member whose id is not member_id. */
bool st_group_fenced(const st_ggroup_t *g, st_kstr_t member_id, st_kstr_t instance)
{
    st_gmember_t *m = st_group_member_find_static(g, instance);
    return m && !kstr_is(member_id, m->member_id);
}

int st_group_member_set_protocols(st_gmember_t *m, const st_kp_join_group_req_t *req)
{
    st_gproto_t *p = calloc((size_t)req->protocols_count + 1, sizeof *p);
    if (!p)
        return -ENOMEM;
    bool oom = false;
    for (int i = 0; i < req->protocols_count; i++) {
        p[i].name = ST_GSTR_NULL;
        oom |= gstr_set(&p[i].name, req->protocols[i].name.len < 0 ? ST_KSTR_EMPTY
                                                                   : req->protocols[i].name) != 0;
        int32_t n = req->protocols[i].metadata.len > 0 ? req->protocols[i].metadata.len : 0;
        p[i].meta = malloc((size_t)n + 1);
        if (p[i].meta && n)
            memcpy(p[i].meta, req->protocols[i].metadata.ptr, (size_t)n);
        p[i].meta_len = n;
    }
    for (int i = 0; i < m->nprotos; i++) {
        gstr_free(&m->protos[i].name);
        free(m->protos[i].meta);
    }
    free(m->protos);
    m->protos = p;
    m->nprotos = req->protocols_count;
    for (int i = 0; i < m->nprotos; i++)
        if (!p[i].name.ptr || !p[i].meta)
            oom = true;
    return oom ? -ENOMEM : 0;
}

bool st_group_member_has_protocol(const st_gmember_t *m, st_kstr_t name)
{
    for (int i = 0; i < m->nprotos; i++)
        if (kstr_is(name, m->protos[i].name))
            return true;
    return false;
}

/* The protocol every member supports that most members prefer (Kafka's selectProtocol);
 * null when the members share none. */
st_kstr_t st_group_select_protocol(const st_ggroup_t *g)
{
    if (g->nmembers == 0)
        return ST_KSTR_NULL;
    st_kstr_t best = ST_KSTR_NULL;
    int best_votes = 0;
    const st_gmember_t *first = g->members[0];
    for (int i = 0; i < first->nprotos; i++) {
        st_kstr_t cand = as_kstr(first->protos[i].name);
        bool all = true;
        for (int k = 1; k < g->nmembers && all; k++)
            all = st_group_member_has_protocol(g->members[k], cand);
        if (!all)
            continue;
        int votes = 0;
        for (int k = 0; k < g->nmembers; k++) {
            const st_gmember_t *m = g->members[k];
            for (int j = 0; j < m->nprotos; j++) {
                bool shared = true;
                for (int q = 0; q < g->nmembers && shared; q++)
                    shared =
                        st_group_member_has_protocol(g->members[q], as_kstr(m->protos[j].name));
                if (shared) {
                    if (kstr_is(cand, m->protos[j].name))
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

void st_group_set_state(st_ggroup_t *g, int state)
{
    g->state = state;
    g->state_ts = st_wall_ms();
}

/* ---- answering waiting requests ---- */

void st_group_answer_join(st_gmember_t *m, int16_t error)
{
    if (!m->join_wait)
        return;
    m->join_wait = false;
    m->join_resp->error_code = error;
    m->join_resp->member_id = answer_str(m->join_a, m->member_id);
    m->join_done(m->join_arg);
}

void st_group_answer_sync(st_gmember_t *m, int16_t error)
{
    if (!m->sync_wait)
        return;
    m->sync_wait = false;
    st_kp_sync_group_resp_t *r = m->sync_resp;
    r->error_code = error;
    if (!error) {
        st_ggroup_t *g = m->g;
        r->assignment = answer_bytes(m->sync_a, m->assignment, m->assignment_len);
        r->protocol_type = answer_str(m->sync_a, g->protocol_type);
        r->protocol_name = answer_str(m->sync_a, g->protocol);
    }
    m->sync_done(m->sync_arg);
}

/* Fills a JoinGroup answer with the current generation; the leader gets the members unless
 * skip (a static leader's rejoin with v9+: members listed, but the assignment stays). */
void st_group_fill_join(st_ggroup_t *g, st_gmember_t *m, int16_t version, st_arena_t *a,
                        st_kp_join_group_resp_t *r, bool members, bool skip)
{
    r->error_code = 0;
    r->generation_id = g->generation;
    r->protocol_type = answer_str(a, g->protocol_type);
    r->protocol_name = answer_str(a, g->protocol);
    r->leader = answer_str0(a, g->leader);
    r->member_id = answer_str(a, m->member_id);
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
        o->member_id = answer_str(a, x->member_id);
        o->group_instance_id = answer_str(a, x->instance_id);
        o->metadata = (st_kbytes_t){(const uint8_t *)"", 0};
        for (int k = 0; k < x->nprotos; k++)
            if (g->protocol.ptr && gstr_eq(x->protos[k].name, g->protocol))
                o->metadata = answer_bytes(a, x->protos[k].meta, x->protos[k].meta_len);
    }
    (void)version;
}

/* ---- the rebalance ---- */

static void complete_join(st_gcoord_t *c, st_ggroup_t *g);

static int32_t max_rebalance_timeout(const st_ggroup_t *g)
{
    int32_t t = 0;
    for (int i = 0; i < g->nmembers; i++)
        if (g->members[i]->rebalance_timeout > t)
            t = g->members[i]->rebalance_timeout;
    return t > 0 ? t : 1;
}

/* Moves g to PreparingRebalance (Kafka's prepareRebalance). */
void st_group_prepare_rebalance(st_gcoord_t *c, st_ggroup_t *g)
{
    if (g->state == G_COMPLETING) {
        for (int i = 0; i < g->nmembers; i++) {
            st_gmember_t *m = g->members[i];
            free(m->assignment);
            m->assignment = NULL;
            m->assignment_len = 0;
            st_group_answer_sync(m, ST_KERR_REBALANCE_IN_PROGRESS);
        }
    }
    int32_t rt = max_rebalance_timeout(g);
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

static bool all_joined(const st_ggroup_t *g)
{
    for (int i = 0; i < g->nmembers; i++)
        if (!g->members[i]->join_wait)
            return false;
    return true;
}

void st_group_try_complete_join(st_gcoord_t *c, st_ggroup_t *g)
{
    if (g->state != G_PREPARING)
        return;
    if (g->nmembers == 0 || (!g->initial_delay && all_joined(g)))
        complete_join(c, g);
}

void st_group_join_timeout(st_timer_t *t)
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
    complete_join(c, g);
}

static void remove_member_at(st_ggroup_t *g, int i)
{
    memmove(&g->members[i], &g->members[i + 1], (size_t)(g->nmembers - i - 1) * sizeof *g->members);
    g->nmembers--;
}

/* Ends the join phase (Kafka's onCompleteJoin): members that did not rejoin leave (static
 * ones stay, holding their partitions until their session expires), the generation moves
 * on, and every waiting member is answered, the leader with the member list. */
static void complete_join(st_gcoord_t *c, st_ggroup_t *g)
{
    st_loop_timer_stop(c->loop, &g->join_timer);
    g->initial_delay = false;
    for (int i = 0; i < g->nmembers;) {
        st_gmember_t *m = g->members[i];
        if (!m->join_wait && !m->instance_id.ptr) {
            if (g->leader.ptr && gstr_eq(g->leader, m->member_id))
                gstr_free(&g->leader);
            st_group_answer_sync(m, ST_KERR_UNKNOWN_MEMBER_ID);
            remove_member_at(g, i);
            st_group_member_free(c, m);
        } else {
            i++;
        }
    }
    bool any_joined = false;
    for (int i = 0; i < g->nmembers; i++)
        any_joined |= g->members[i]->join_wait;
    g->generation++;
    gstr_free(&g->protocol);
    if (g->nmembers == 0 || !any_joined) {
        /* Static members that did not rejoin alone cannot form a generation: drop them. */
        while (g->nmembers > 0) {
            st_gmember_t *m = g->members[g->nmembers - 1];
            g->nmembers--;
            st_group_member_free(c, m);
        }
        gstr_free(&g->leader);
        st_group_set_state(g, G_EMPTY);
        st_group_persist(c, g);
        return;
    }
    gstr_set(&g->protocol, st_group_select_protocol(g));
    st_gmember_t *lm = g->leader.ptr ? st_group_member_find(g, as_kstr(g->leader)) : NULL;
    if (!lm || !lm->join_wait) {
        gstr_free(&g->leader);
        for (int i = 0; i < g->nmembers && !g->leader.ptr; i++)
            if (g->members[i]->join_wait)
                gstr_set(&g->leader, as_kstr(g->members[i]->member_id));
    }
    st_group_set_state(g, G_COMPLETING);
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        if (!m->join_wait)
            continue;
        m->join_wait = false;
        bool leader = g->leader.ptr && gstr_eq(g->leader, m->member_id);
        st_group_fill_join(g, m, m->join_version, m->join_a, m->join_resp, leader, false);
        st_group_member_touch(c, m);
        m->join_done(m->join_arg);
    }
}

/* Removes a member (leave, session timeout) and moves the group on (Kafka's
 * removeMemberAndUpdateGroup). */
void st_group_remove_member(st_gcoord_t *c, st_ggroup_t *g, st_gmember_t *m)
{
    st_group_answer_join(m, ST_KERR_UNKNOWN_MEMBER_ID);
    st_group_answer_sync(m, ST_KERR_UNKNOWN_MEMBER_ID);
    for (int i = 0; i < g->nmembers; i++)
        if (g->members[i] == m) {
            remove_member_at(g, i);
            break;
        }
    if (g->leader.ptr && gstr_eq(g->leader, m->member_id))
        gstr_free(&g->leader);
    st_group_member_free(c, m);
    switch (g->state) {
    case G_STABLE:
    case G_COMPLETING:
        st_group_prepare_rebalance(c, g);
        st_group_try_complete_join(c, g);
        break;
    case G_PREPARING:
        st_group_try_complete_join(c, g);
        break;
    default:
        break;
    }
}

static void session_expired(st_timer_t *t)
{
    st_gmember_t *m = t->data;
    st_ggroup_t *g = m->g;
    st_gcoord_t *c = g->c;
    if (m->join_wait || m->sync_wait) {
        st_group_member_touch(c, m);
        return;
    }
    ST_INFO("group %.*s: member %.*s timed out after %d ms", ST_GSTR_ARG(g->id),
            ST_GSTR_ARG(m->member_id), m->session_timeout);
    st_group_remove_member(c, g, m);
}

st_gmember_t *st_group_member_new(st_ggroup_t *g, st_kstr_t id, const st_kp_join_group_req_t *req,
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
    int rc = gstr_set(&m->member_id, id);
    rc |= gstr_set(&m->instance_id, req->group_instance_id);
    rc |= gstr_set(&m->client_id, client_id.len < 0 ? ST_KSTR_EMPTY : client_id);
    rc |= gstr_set(&m->client_host, client_host.len < 0 ? ST_KSTR_EMPTY : client_host);
    m->session_timeout = req->session_timeout_ms;
    m->rebalance_timeout = version >= 1 && req->rebalance_timeout_ms > 0 ? req->rebalance_timeout_ms
                                                                         : req->session_timeout_ms;
    st_timer_init(&m->session_timer, session_expired, m);
    if (rc || !m->member_id.ptr || st_group_member_set_protocols(m, req)) {
        st_group_member_free(g->c, m);
        return NULL;
    }
    g->members[g->nmembers++] = m;
    return m;
}
