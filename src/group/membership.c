/*
 * membership.c — the membership requests: JoinGroup (new and known members, member ids handed
 * out with MEMBER_ID_REQUIRED, static members replacing their old instance), SyncGroup (the
 * leader's assignment is persisted before anyone is answered, invariant 1), Heartbeat and
 * LeaveGroup. They drive the state machine of rebalance.c.
 */
#include "group/coord_impl.h"

#include <stdio.h>
#include <sys/random.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/log.h"
#include "proto/kerr.h"

/* ---- JoinGroup ---- */

static bool protocols_equal(const st_gmember_t *m, const st_kp_join_group_req_t *req)
{
    if (m->nprotos != req->protocols_count)
        return false;
    for (int i = 0; i < m->nprotos; i++) {
        const st_kp_join_group_req_protocol_t *p = &req->protocols[i];
        int32_t n = p->metadata.len > 0 ? p->metadata.len : 0;
        if (!kstr_is(p->name, m->protos[i].name) || n != m->protos[i].meta_len ||
            (n && memcmp(p->metadata.ptr, m->protos[i].meta, (size_t)n) != 0))
            return false;
    }
    return true;
}

/* Whether a member joining with req could be part of g (protocol type and a shared
 * protocol with every other member). */
static bool group_supports(const st_ggroup_t *g, const st_kp_join_group_req_t *req,
                           const st_gmember_t *self)
{
    if (req->protocol_type.len <= 0 || req->protocols_count <= 0)
        return false;
    int others = g->nmembers - (self ? 1 : 0);
    if (others == 0)
        return true;
    if (!g->protocol_type.ptr || !kstr_is(req->protocol_type, g->protocol_type))
        return false;
    for (int i = 0; i < req->protocols_count; i++) {
        st_kstr_t name = req->protocols[i].name;
        if (name.len < 0)
            continue;
        bool all = true;
        for (int k = 0; k < g->nmembers && all; k++)
            if (g->members[k] != self)
                all = st_group_member_has_protocol(g->members[k], name);
        if (all)
            return true;
    }
    return false;
}

static void wait_join(st_gmember_t *m, int16_t version, st_arena_t *a,
                      st_kp_join_group_resp_t *resp, st_gcoord_done_fn done, void *arg)
{
    st_group_answer_join(m, ST_KERR_REBALANCE_IN_PROGRESS); /* a superseded join */
    m->join_wait = true;
    m->join_version = version;
    m->join_a = a;
    m->join_resp = resp;
    m->join_done = done;
    m->join_arg = arg;
}

static void add_member_and_rebalance(st_gcoord_t *c, st_ggroup_t *g, st_kstr_t id,
                                     const st_kp_join_group_req_t *req, int16_t version,
                                     st_kstr_t client_id, st_kstr_t client_host, st_arena_t *a,
                                     st_kp_join_group_resp_t *resp, st_gcoord_done_fn done,
                                     void *arg)
{
    st_gmember_t *m = st_group_member_new(g, id, req, version, client_id, client_host);
    if (!m) {
        resp->error_code = ST_KERR_UNKNOWN_SERVER_ERROR;
        done(arg);
        return;
    }
    if (g->nmembers == 1)
        gstr_set(&g->protocol_type, req->protocol_type);
    wait_join(m, version, a, resp, done, arg);
    st_group_member_touch(c, m);
    if (g->state == G_PREPARING) {
        if (g->initial_delay)
            g->joined_during_delay = true;
    } else {
        st_group_prepare_rebalance(c, g);
    }
    st_group_try_complete_join(c, g);
}

/* Kafka's member id: the client id (its bytes, NULs included, at most 200), '-', a UUID.
 * Returns the length written to out (at least 240 bytes). */
static int32_t new_member_id(char *out, size_t n, st_kstr_t client_id)
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

static void pending_prune(st_ggroup_t *g)
{
    int64_t now = st_mono_ms();
    for (int i = 0; i < g->npending;) {
        if (g->pending[i].deadline_ms <= now) {
            gstr_free(&g->pending[i].member_id);
            g->pending[i] = g->pending[--g->npending];
        } else {
            i++;
        }
    }
}

static bool pending_take(st_ggroup_t *g, st_kstr_t id)
{
    pending_prune(g);
    for (int i = 0; i < g->npending; i++)
        if (kstr_is(id, g->pending[i].member_id)) {
            gstr_free(&g->pending[i].member_id);
            g->pending[i] = g->pending[--g->npending];
            return true;
        }
    return false;
}

/* A static member came back with a new process (unknown member id, known instance id):
 * it takes its old slot under a new id (Kafka's updateStaticMemberAndRebalance). */
static void replace_static(st_gcoord_t *c, st_ggroup_t *g, st_gmember_t *m, st_kstr_t id,
                           const st_kp_join_group_req_t *req, int16_t version, st_kstr_t client_id,
                           st_kstr_t client_host, st_arena_t *a, st_kp_join_group_resp_t *resp,
                           st_gcoord_done_fn done, void *arg)
{
    st_group_answer_join(m, ST_KERR_FENCED_INSTANCE_ID);
    st_group_answer_sync(m, ST_KERR_FENCED_INSTANCE_ID);
    st_gstr_t nid = ST_GSTR_NULL;
    if (gstr_set(&nid, id) || st_group_member_set_protocols(m, req)) {
        gstr_free(&nid);
        resp->error_code = ST_KERR_UNKNOWN_SERVER_ERROR;
        done(arg);
        return;
    }
    bool was_leader = g->leader.ptr && gstr_eq(g->leader, m->member_id);
    if (was_leader)
        gstr_set(&g->leader, id);
    gstr_free(&m->member_id);
    m->member_id = nid;
    gstr_set(&m->client_id, client_id.len < 0 ? ST_KSTR_EMPTY : client_id);
    gstr_set(&m->client_host, client_host.len < 0 ? ST_KSTR_EMPTY : client_host);
    m->session_timeout = req->session_timeout_ms;
    m->rebalance_timeout =
        req->rebalance_timeout_ms > 0 ? req->rebalance_timeout_ms : req->session_timeout_ms;
    st_group_member_touch(c, m);
    st_kstr_t sel = st_group_select_protocol(g);
    bool same = sel.len >= 0 && g->protocol.ptr && kstr_is(sel, g->protocol);
    if (g->state == G_STABLE && same) {
        /* No rebalance: the member syncs and gets its old assignment back. */
        st_group_fill_join(g, m, version, a, resp, was_leader && version >= 9,
                           was_leader && version >= 9);
        st_group_persist(c, g);
        done(arg);
        return;
    }
    wait_join(m, version, a, resp, done, arg);
    if (g->state != G_PREPARING)
        st_group_prepare_rebalance(c, g);
    st_group_try_complete_join(c, g);
}

void st_gcoord_join(st_gcoord_t *c, int32_t partition, const st_kp_join_group_req_t *req,
                    int16_t version, st_kstr_t client_id, st_kstr_t client_host, st_arena_t *a,
                    st_kp_join_group_resp_t *resp, st_gcoord_done_fn done, void *arg)
{
    resp->member_id = req->member_id.len > 0 ? answer_kstr(a, req->member_id) : ST_KSTR_EMPTY;
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
    st_ggroup_t *g = st_group_find(c, req->group_id);
    bool unknown = req->member_id.len <= 0;
    if (!g) {
        if (!unknown) {
            resp->error_code = ST_KERR_UNKNOWN_MEMBER_ID;
            done(arg);
            return;
        }
        g = st_group_create(c, req->group_id, partition);
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
    if (g->type == G_TYPE_CONSUMER && st_cgroup_to_classic(c, g)) {
        /* a classic member cannot join a consumer group with members (no online migration) */
        resp->error_code = ST_KERR_INCONSISTENT_GROUP_PROTOCOL;
        done(arg);
        return;
    }
    st_gmember_t *self = unknown ? st_group_member_find_static(g, req->group_instance_id)
                                 : st_group_member_find(g, req->member_id);
    if (!group_supports(g, req, self)) {
        resp->error_code = ST_KERR_INCONSISTENT_GROUP_PROTOCOL;
        done(arg);
        return;
    }
    /* a member that is not there yet, in a group at group.max.size (Kafka's acceptJoiningMember;
     * a static member taking its slot back adds none) */
    bool full = c->cfg.max_size > 0 && g->nmembers >= c->cfg.max_size;
    if (full && !self) {
        resp->error_code = ST_KERR_GROUP_MAX_SIZE_REACHED;
        done(arg);
        return;
    }
    char idbuf[320];
    st_kstr_t id = {idbuf, 0};
    if (unknown) {
        id.len = new_member_id(idbuf, sizeof idbuf, client_id);
        if (req->group_instance_id.len >= 0) {
            st_gmember_t *m = st_group_member_find_static(g, req->group_instance_id);
            if (m)
                replace_static(c, g, m, id, req, version, client_id, client_host, a, resp, done,
                               arg);
            else
                add_member_and_rebalance(c, g, id, req, version, client_id, client_host, a, resp,
                                         done, arg);
            return;
        }
        if (version >= 4) {
            pending_prune(g);
            st_gpending_t *p = realloc(g->pending, (size_t)(g->npending + 1) * sizeof *p);
            if (p) {
                g->pending = p;
                p[g->npending].member_id = ST_GSTR_NULL;
                p[g->npending].deadline_ms = st_mono_ms() + req->session_timeout_ms;
                if (gstr_set(&p[g->npending].member_id, id) == 0)
                    g->npending++;
            }
            resp->error_code = ST_KERR_MEMBER_ID_REQUIRED;
            resp->member_id = answer_kstr(a, id);
            done(arg);
            return;
        }
        add_member_and_rebalance(c, g, id, req, version, client_id, client_host, a, resp, done,
                                 arg);
        return;
    }
    st_gmember_t *m = st_group_member_find(g, req->member_id);
    if (!m) {
        if (st_group_fenced(g, req->member_id, req->group_instance_id)) {
            resp->error_code = ST_KERR_FENCED_INSTANCE_ID;
        } else if (g->state != G_DEAD && pending_take(g, req->member_id)) {
            add_member_and_rebalance(c, g, req->member_id, req, version, client_id, client_host, a,
                                     resp, done, arg);
            return;
        } else {
            resp->error_code = ST_KERR_UNKNOWN_MEMBER_ID;
        }
        done(arg);
        return;
    }
    if (req->group_instance_id.len >= 0 &&
        (!m->instance_id.ptr || !kstr_is(req->group_instance_id, m->instance_id))) {
        resp->error_code = ST_KERR_FENCED_INSTANCE_ID;
        done(arg);
        return;
    }
    bool same = protocols_equal(m, req);
    bool leader = g->leader.ptr && gstr_eq(g->leader, m->member_id);
    m->session_timeout = req->session_timeout_ms;
    if (version >= 1 && req->rebalance_timeout_ms > 0)
        m->rebalance_timeout = req->rebalance_timeout_ms;
    switch (g->state) {
    case G_PREPARING:
        if (!same)
            st_group_member_set_protocols(m, req);
        wait_join(m, version, a, resp, done, arg);
        st_group_member_touch(c, m);
        st_group_try_complete_join(c, g);
        return;
    case G_COMPLETING:
    case G_STABLE:
        if (same && (g->state == G_COMPLETING || !leader)) {
            st_group_fill_join(g, m, version, a, resp, leader, false);
            st_group_member_touch(c, m);
            done(arg);
            return;
        }
        if (!same)
            st_group_member_set_protocols(m, req);
        wait_join(m, version, a, resp, done, arg);
        st_group_member_touch(c, m);
        st_group_prepare_rebalance(c, g);
        st_group_try_complete_join(c, g);
        return;
    default:
        resp->error_code = ST_KERR_UNKNOWN_MEMBER_ID;
        done(arg);
        return;
    }
}

/* ---- SyncGroup ---- */

static void sync_written(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    st_ggroup_t *g = w->g;
    if (g->state != G_COMPLETING || g->generation != w->generation)
        return; /* a rebalance started meanwhile and answered the waiting syncs */
    if (res) {
        for (int i = 0; i < g->nmembers; i++)
            st_group_answer_sync(g->members[i], write_kerr(res));
        st_group_prepare_rebalance(c, g);
        st_group_try_complete_join(c, g);
        return;
    }
    g->stored = true;
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        free(m->assignment);
        m->assignment = NULL;
        m->assignment_len = 0;
        for (int k = 0; k < w->nassign; k++)
            if (gstr_eq(w->assign_ids[k], m->member_id) && w->assign[k].len > 0) {
                m->assignment = malloc((size_t)w->assign[k].len);
                if (m->assignment) {
                    memcpy(m->assignment, w->assign[k].ptr, (size_t)w->assign[k].len);
                    m->assignment_len = w->assign[k].len;
                }
            }
    }
    st_group_set_state(g, G_STABLE);
    for (int i = 0; i < g->nmembers; i++)
        st_group_answer_sync(g->members[i], 0);
}

/* The member a SyncGroup or Heartbeat names, in a live group: 0, *g and *m, else the error
 * (st_group_lookup's, FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID). */
static int16_t member_lookup(st_gcoord_t *c, int32_t partition, st_kstr_t group_id,
                             st_kstr_t member_id, st_kstr_t instance, st_ggroup_t **g,
                             st_gmember_t **m)
{
    *m = NULL;
    int16_t err = st_group_lookup(c, partition, group_id, ST_KERR_UNKNOWN_MEMBER_ID, g);
    if (err)
        return err;
    if (st_group_fenced(*g, member_id, instance))
        return ST_KERR_FENCED_INSTANCE_ID;
    *m = st_group_member_find(*g, member_id);
    return *m ? 0 : ST_KERR_UNKNOWN_MEMBER_ID;
}

void st_gcoord_sync(st_gcoord_t *c, int32_t partition, const st_kp_sync_group_req_t *req,
                    int16_t version, st_arena_t *a, st_kp_sync_group_resp_t *resp,
                    st_gcoord_done_fn done, void *arg)
{
    resp->assignment = (st_kbytes_t){(const uint8_t *)"", 0};
    st_ggroup_t *g;
    st_gmember_t *m;
    int16_t err =
        member_lookup(c, partition, req->group_id, req->member_id, req->group_instance_id, &g, &m);
    if (!err && req->generation_id != g->generation)
        err = ST_KERR_ILLEGAL_GENERATION;
    else if (!err && version >= 5 &&
             ((req->protocol_type.len >= 0 && g->protocol_type.ptr &&
               !kstr_is(req->protocol_type, g->protocol_type)) ||
              (req->protocol_name.len >= 0 && g->protocol.ptr &&
               !kstr_is(req->protocol_name, g->protocol))))
        err = ST_KERR_INCONSISTENT_GROUP_PROTOCOL;
    else if (!err && g->state == G_EMPTY)
        err = ST_KERR_UNKNOWN_MEMBER_ID;
    else if (!err && g->state == G_PREPARING)
        err = ST_KERR_REBALANCE_IN_PROGRESS;
    if (err) {
        resp->error_code = err;
        done(arg);
        return;
    }
    st_group_member_touch(c, m);
    if (m->sync_wait)
        st_group_answer_sync(m, ST_KERR_REBALANCE_IN_PROGRESS);
    m->sync_wait = true;
    m->sync_resp = resp;
    m->sync_a = a;
    m->sync_done = done;
    m->sync_arg = arg;
    if (g->state == G_STABLE) {
        st_group_answer_sync(m, 0);
        return;
    }
    bool leader = g->leader.ptr && gstr_eq(g->leader, m->member_id);
    if (!leader)
        return;
    /* The leader's assignment: persist it with the group, then answer everyone. */
    st_gwrite_t *w = st_group_write_new(c, partition, g, sync_written);
    if (w) {
        w->assign_ids = calloc((size_t)req->assignments_count + 1, sizeof *w->assign_ids);
        w->assign = calloc((size_t)req->assignments_count + 1, sizeof *w->assign);
    }
    if (!w || !w->assign_ids || !w->assign) {
        if (w)
            st_group_write_free(w);
        st_group_answer_sync(m, ST_KERR_UNKNOWN_SERVER_ERROR);
        return;
    }
    for (int i = 0; i < req->assignments_count; i++) {
        const st_kp_sync_group_req_assignment_t *as = &req->assignments[i];
        int32_t n = as->assignment.len > 0 ? as->assignment.len : 0;
        uint8_t *copy = malloc((size_t)n + 1);
        st_gstr_t id = ST_GSTR_NULL;
        if (!copy || gstr_set(&id, as->member_id) || !id.ptr) {
            free(copy);
            gstr_free(&id);
            continue;
        }
        if (n)
            memcpy(copy, as->assignment.ptr, (size_t)n);
        w->assign_ids[w->nassign] = id;
        w->assign[w->nassign++] = (st_kbytes_t){copy, n};
    }
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    if (st_group_add_group_value(&b, g, w->nassign, w->assign_ids, w->assign)) {
        st_gbatch_fini(&b);
        st_group_write_free(w);
        st_group_answer_sync(m, ST_KERR_UNKNOWN_SERVER_ERROR);
        return;
    }
    st_group_write(c, &b, w);
    st_gbatch_fini(&b);
}

/* ---- Heartbeat, LeaveGroup ---- */

void st_gcoord_heartbeat(st_gcoord_t *c, int32_t partition, const st_kp_heartbeat_req_t *req,
                         st_kp_heartbeat_resp_t *resp)
{
    st_ggroup_t *g;
    st_gmember_t *m;
    int16_t err =
        member_lookup(c, partition, req->group_id, req->member_id, req->group_instance_id, &g, &m);
    if (!err && g->state == G_EMPTY)
        err = ST_KERR_UNKNOWN_MEMBER_ID;
    else if (!err && req->generation_id != g->generation)
        err = ST_KERR_ILLEGAL_GENERATION;
    else if (!err) {
        st_group_member_touch(c, m);
        if (g->state == G_PREPARING)
            err = ST_KERR_REBALANCE_IN_PROGRESS;
    }
    resp->error_code = err;
}

static int16_t leave_one(st_gcoord_t *c, st_ggroup_t *g, st_kstr_t member_id, st_kstr_t instance)
{
    st_gmember_t *m;
    if (instance.len >= 0) {
        m = st_group_member_find_static(g, instance);
        if (!m)
            return ST_KERR_UNKNOWN_MEMBER_ID;
        if (member_id.len > 0 && !kstr_is(member_id, m->member_id))
            return ST_KERR_FENCED_INSTANCE_ID;
    } else {
        m = st_group_member_find(g, member_id);
        if (!m)
            return ST_KERR_UNKNOWN_MEMBER_ID;
    }
    ST_DEBUG("group %.*s: member %.*s leaves", ST_GSTR_ARG(g->id), ST_GSTR_ARG(m->member_id));
    st_group_remove_member(c, g, m);
    return 0;
}

void st_gcoord_leave(st_gcoord_t *c, int32_t partition, const st_kp_leave_group_req_t *req,
                     int16_t version, st_arena_t *a, st_kp_leave_group_resp_t *resp)
{
    st_ggroup_t *g;
    int16_t err = st_group_lookup(c, partition, req->group_id, ST_KERR_UNKNOWN_MEMBER_ID, &g);
    if (version < 3) {
        resp->error_code = err ? err : leave_one(c, g, req->member_id, ST_KSTR_NULL);
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
        o->member_id = q->member_id.len >= 0 ? answer_kstr(a, q->member_id) : ST_KSTR_EMPTY;
        o->group_instance_id = answer_kstr(a, q->group_instance_id);
        o->error_code =
            g ? leave_one(c, g, q->member_id, q->group_instance_id) : ST_KERR_UNKNOWN_MEMBER_ID;
    }
}
