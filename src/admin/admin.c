/* admin.c — the admin HTTP server and the shards' snapshot publishing (admin.h, snap.h). */
#include "admin/admin.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin/debug.h"
#include "admin/console.h"
#include "admin/groups.h"
#include "admin/render.h"
#include "admin/routes.h"
#include "broker/protolog.h"
#include "auth/acl.h"
#include "auth/scram.h"
#include "cluster/quorum.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "kafka/sasl.h"
#include "kafka/txn_route.h"
#include "storage/journal.h"

#define ST_ADMIN_MAX_COLLECTORS 4

typedef struct {
    st_admin_group_collect_fn fn;
    void *arg;
} collector_t;

#ifdef ST_DEBUG_BUILD
/* Test-only sync failures (POST /v1/debug/fail-sync): each shard's storage sync hook is
 * wrapped on its own thread; the wrapper takes one failure from a shared atomic count. */
typedef struct {
    struct st_admin *a;
    int (*submit)(void *ctx, int fd, st_sync_done_fn done, void *arg); /* the real hook */
    void *ctx;
    st_loop_t *loop; /* the shard's, for delayed completions */
} fault_shard_t;
#endif

struct st_admin {
    st_broker_t *b;
    st_admin_slot_t *slots; /* [nshards] */
    collector_t collectors[ST_ADMIN_MAX_COLLECTORS];
    int ncollectors;
    struct MHD_Daemon *mhd;
    int listen_fd;
    int port;
    double start_wall_s;
    int64_t start_mono_ns;
    _Atomic int64_t startup_ns; /* -1 until st_admin_set_started */
    char *tls_cert, *tls_key;   /* admin.tls.enabled: the PEM MHD serves, kept while it runs */
#ifdef ST_DEBUG_BUILD
    fault_shard_t *faults;         /* [nshards], each written only by its shard */
    _Atomic int64_t fail_syncs;    /* syncs still to fail, on any shard */
    _Atomic int fail_errno;        /* the error they complete with */
    _Atomic int64_t sync_delay_ms; /* every sync completes this much later (a slow disk) */
    _Atomic int sync_delay_start;  /* ... or starts this much later (the bytes stay unsynced) */
#endif
};

#ifdef ST_DEBUG_BUILD
typedef struct {
    st_sync_done_fn done;
    void *arg;
    int err;
    fault_shard_t *f; /* a delayed completion: its shard, timer and the sync's result */
    st_timer_t timer;
    int res;
    int fd; /* a delayed start: a duplicate of the file's descriptor, closed once synced */
} fault_op_t;

/* Takes one injected failure if any is armed: its (negative) errno, else 0. */
static int fault_take(st_admin_t *a)
{
    int64_t n = atomic_load_explicit(&a->fail_syncs, memory_order_acquire);
    while (n > 0)
        if (atomic_compare_exchange_weak_explicit(&a->fail_syncs, &n, n - 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            return -atomic_load_explicit(&a->fail_errno, memory_order_relaxed);
    return 0;
}

static void fault_done(void *arg, int res)
{
    fault_op_t *op = arg;
    (void)res; /* the real sync ran; the storage layer is told it failed */
    st_sync_done_fn done = op->done;
    void *darg = op->arg;
    int err = op->err;
    free(op);
    done(darg, err);
}

static void delay_fire(st_timer_t *t)
{
    fault_op_t *op = t->data;
    st_sync_done_fn done = op->done;
    void *darg = op->arg;
    int res = op->res;
    free(op);
    done(darg, res);
}

/* A slow disk: the real sync's result, handed on sync_delay_ms later. */
static void delay_done(void *arg, int res)
{
    fault_op_t *op = arg;
    op->res = res;
    st_timer_init(&op->timer, delay_fire, op);
    st_loop_timer_start(op->f->loop, &op->timer, atomic_load(&op->f->a->sync_delay_ms));
}

/* A disk that starts syncing late: the real sync, done. */
static void start_done(void *arg, int res)
{
    fault_op_t *op = arg;
    st_sync_done_fn done = op->done;
    void *darg = op->arg;
    close(op->fd);
    free(op);
    done(darg, res);
}

/* ... and its start, sync_delay_ms after it was asked for (on the duplicate descriptor: the
 * file may have been closed since). */
static void start_fire(st_timer_t *t)
{
    fault_op_t *op = t->data;
    int rc = op->f->submit(op->f->ctx, op->fd, start_done, op);
    if (rc < 0)
        start_done(op, rc);
}

/* The wrapped sync hook: the real fdatasync always runs; an armed failure replaces its
 * result, so completion order and timing stay the real ones. */
static int fault_submit(void *ctx, int fd, st_sync_done_fn done, void *arg)
{
    fault_shard_t *f = ctx;
    int err = fault_take(f->a);
    if (err == 0 && atomic_load(&f->a->sync_delay_ms) > 0 && atomic_load(&f->a->sync_delay_start)) {
        fault_op_t *op = malloc(sizeof *op);
        if (!op)
            return -ENOMEM;
        *op = (fault_op_t){.done = done, .arg = arg, .f = f, .fd = dup(fd)};
        if (op->fd < 0) {
            free(op);
            return -errno;
        }
        st_timer_init(&op->timer, start_fire, op);
        st_loop_timer_start(f->loop, &op->timer, atomic_load(&f->a->sync_delay_ms));
        return 0;
    }
    if (err == 0 && atomic_load(&f->a->sync_delay_ms) > 0) {
        fault_op_t *op = malloc(sizeof *op);
        if (!op)
            return -ENOMEM;
        *op = (fault_op_t){.done = done, .arg = arg, .f = f};
        int rc = f->submit(f->ctx, fd, delay_done, op);
        if (rc < 0)
            free(op);
        return rc;
    }
    if (err == 0)
        return f->submit(f->ctx, fd, done, arg);
    fault_op_t *op = malloc(sizeof *op);
    if (!op)
        return err;
    *op = (fault_op_t){.done = done, .arg = arg, .err = err};
    int rc = f->submit(f->ctx, fd, fault_done, op);
    if (rc < 0)
        free(op);
    return rc;
}

/* On shard s's thread: routes its syncs through fault_submit (once). */
static void fault_install(st_admin_t *a, st_kshard_t *s)
{
    if (!a->faults || s->env.sync_submit == fault_submit)
        return;
    fault_shard_t *f = &a->faults[s->id];
    f->a = a;
    f->submit = s->env.sync_submit;
    f->ctx = s->env.sync_ctx;
    f->loop = s->loop;
    s->env.sync_ctx = f;
    s->env.sync_submit = fault_submit;
    s->env.syncfs_delay_ms = &a->sync_delay_ms;
}

/* POST /v1/debug/sync-delay?ms=N: every sync completes N ms later than it did (a slow disk;
 * 0 disarms), an adoption's syncfs too (storage/env.h syncfs_delay_ms); with &start=1 every sync
 * starts N ms late instead, so the bytes stay unsynced that long (what a power cut then takes).
 * GET: the delay. */
static int delay_request(st_admin_t *a, struct MHD_Connection *c, bool post, char *out, size_t n)
{
    if (post) {
        const char *ms = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "ms");
        char *end;
        long long v = ms ? strtoll(ms, &end, 10) : -1;
        if (!ms || *end || v < 0 || v > 60000)
            return -EINVAL;
        const char *st = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "start");
        bool start = st && strcmp(st, "1") == 0;
        atomic_store(&a->sync_delay_start, start);
        atomic_store(&a->sync_delay_ms, (int64_t)v);
        ST_WARN("debug: every sync now %s %lld ms late", start ? "starts" : "completes", v);
    }
    snprintf(out, n, "{\"ms\":%lld}", (long long)atomic_load(&a->sync_delay_ms));
    return 0;
}

/* POST /v1/debug/fail-sync?count=N&errno=EIO|ENOSPC|<number>: the next N syncs on any shard
 * complete with that error (count=0 disarms). GET: how many are still armed. */
static int fault_request(st_admin_t *a, struct MHD_Connection *c, bool post, char *out, size_t n)
{
    if (post) {
        const char *cs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "count");
        const char *es = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "errno");
        char *end;
        long long count = cs ? strtoll(cs, &end, 10) : -1;
        if (!cs || *end || count < 0)
            return -EINVAL;
        int e = EIO;
        if (es && strcmp(es, "EIO") == 0)
            e = EIO;
        else if (es && strcmp(es, "ENOSPC") == 0)
            e = ENOSPC;
        else if (es) {
            long v = strtol(es, &end, 10);
            if (*end || v <= 0 || v > 4095)
                return -EINVAL;
            e = (int)v;
        }
        atomic_store(&a->fail_errno, e);
        atomic_store(&a->fail_syncs, (int64_t)count);
        ST_WARN("debug: the next %lld sync(s) will fail with %s", count, strerror(e));
    }
    snprintf(out, n, "{\"remaining\":%lld}", (long long)atomic_load(&a->fail_syncs));
    return 0;
}
#endif

/* ---- shard side: build and publish (on each shard's thread) ----------------------------- */

static void add_part(void *arg, st_part_t *p)
{
    st_admin_snap_t *snap = arg;
    if (st_part_deleted(p))
        return;
    st_admin_part_t *r = st_admin_snap_add_part(snap, st_part_topic(p));
    if (!r)
        return;
    r->partition = st_part_index(p);
    st_part_stats_t ps;
    if (!st_part_stats(p, &ps)) {
        r->offline = true;
        r->log_start_offset = r->log_end_offset = r->high_watermark = r->last_stable_offset = -1;
        return;
    }
    r->log_start_offset = ps.log_start;
    r->log_end_offset = ps.log_end;
    r->high_watermark = ps.hw;
    r->last_stable_offset = ps.lso;
    r->ongoing_txns = ps.ongoing_txns;
    int64_t now = st_wall_ms();
    r->oldest_txn_age_ms =
        ps.oldest_txn_ms >= 0 && now > ps.oldest_txn_ms ? now - ps.oldest_txn_ms : 0;
    r->size_bytes = ps.size_bytes;
    r->segments = ps.segments;
    r->records_in = ps.records_in;
    r->bytes_in = ps.bytes_in;
    r->records_out = ps.records_out;
    r->bytes_out = ps.bytes_out;
    if (ps.leads) {
        r->leads = true;
        r->replicas = ps.replicas;
        r->isr = ps.isr;
        r->max_follower_lag = ps.max_follower_lag;
    }
    if (!ps.compact)
        return;
    r->compact = true;
    r->cleaning = ps.clean.in_progress;
    r->dirty_ratio = ps.clean.dirty_ratio;
    r->last_clean_ms = ps.clean.last_clean_ms;
    r->cleans = ps.clean.cleans;
    r->clean_bytes_read = ps.clean.bytes_read;
    r->bytes_reclaimed = ps.clean.bytes_read - ps.clean.bytes_written;
    r->records_removed = ps.clean.records_removed;
}

static void st_admin_on_tick(void *arg, st_kshard_t *s)
{
    st_admin_t *a = arg;
#ifdef ST_DEBUG_BUILD
    fault_install(a, s);
#endif
    st_admin_slot_t *slot = &a->slots[s->id];
    int64_t now = st_mono_ns();
    if (slot->last_ns && now - slot->last_ns < (int64_t)ST_ADMIN_PUBLISH_MS * 1000000)
        return;
    st_admin_snap_t *snap = st_admin_snap_new(s->id);
    if (!snap)
        return;
    slot->last_ns = now;
    snap->taken_ns = now;
    snap->md = st_md_ref(s->md);
    st_loop_times(s->loop, &snap->busy_ns, &snap->total_ns);
    snap->slow_tasks = st_loop_slow_tasks(s->loop);
    st_loop_iter_hist(s->loop, snap->loop_iter, &snap->loop_iter_sum_ns);
    /* Only this shard publishes into its slot, so its current snapshot cannot be freed under
     * us: it is the previous one, for the busy ratio over the interval. */
    const st_admin_snap_t *prev = atomic_load(&slot->cur);
    int64_t dt = prev ? snap->total_ns - prev->total_ns : snap->total_ns;
    int64_t db = prev ? snap->busy_ns - prev->busy_ns : snap->busy_ns;
    snap->busy_ratio = dt > 0 ? (double)db / (double)dt : 0;
    if (s->env.journal) {
        st_journal_stats_t js;
        st_journal_stats(s->env.journal, &js);
        snap->journal = true;
        snap->journal_rounds = js.rounds;
        snap->journal_round_logs = js.round_logs;
        snap->journal_entries = js.entries;
        snap->journal_fallbacks = js.fallbacks;
        snap->journal_used = js.used;
        snap->journal_capacity = js.capacity;
    }
    if (s->net) {
        const st_net_stats_t *ns = st_net_stats(s->net);
        snap->connections = st_net_conn_count(s->net);
        snap->accepted = ns->accepted;
        snap->closed = ns->closed;
        snap->net_bytes_in = ns->bytes_in;
        snap->net_bytes_out = ns->bytes_out;
        snap->frames_too_large = ns->frames_too_large;
    }
    if (s->parts.buckets)
        st_parts_each(&s->parts, add_part, snap);
    if (st_ktxn_coord(s)) {
        snap->txn = true;
        st_tcoord_stats(st_ktxn_coord(s), &snap->txn_stats);
    }
    for (int i = 0; i < a->ncollectors; i++)
        a->collectors[i].fn(a->collectors[i].arg, s, snap);
    st_admin_slot_publish(slot, snap);
}

/* ---- process figures --------------------------------------------------------------------- */

static int64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    long long size = 0, rss = -1;
    if (fscanf(f, "%lld %lld", &size, &rss) != 2)
        rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * (int64_t)sysconf(_SC_PAGESIZE);
}

static int64_t open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory stream's own descriptor */
}

static int64_t max_fds(void)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
        return -1;
    return (int64_t)r.rlim_cur;
}

/* ---- the HTTP side ----------------------------------------------------------------------- */

/* Ready: every shard serves (and has published its first snapshot) and, in a cluster, the
 * newest metadata a shard holds shows this broker registered at its incarnation and unfenced:
 * it caught up with the metadata log and the controller hears its heartbeats (Kafka's RUNNING
 * state). A fenced broker leads nothing; a rolling restart must not move on past it. why: the
 * first condition not met, or NULL. */
static bool is_ready(st_admin_t *a, const char **why)
{
    st_broker_t *b = a->b;
    *why = NULL;
    if (atomic_load(&a->startup_ns) < 0 || atomic_load(&b->stopping) || atomic_load(&b->failed) ||
        atomic_load(&b->started) < b->nshards) {
        *why = "not serving";
        return false;
    }
    /* the shard snapshot with the newest metadata, held while it is read */
    st_admin_snap_t *best = NULL;
    for (int i = 0; i < b->nshards; i++) {
        st_admin_snap_t *sn = st_admin_slot_acquire(&a->slots[i]);
        if (!sn) {
            st_admin_snap_unref(best);
            *why = "not serving";
            return false;
        }
        if (sn->md && (!best || !best->md || sn->md->version > best->md->version)) {
            st_admin_snap_unref(best);
            best = sn;
        } else {
            st_admin_snap_unref(sn);
        }
    }
    bool ok = true;
    st_quorum_t *q = __atomic_load_n(&b->quorum, __ATOMIC_ACQUIRE);
    st_quorum_info_t qi = {0};
    if (q)
        st_quorum_info(q, &qi);
    if (q && !qi.local && !st_quorum_alone(q)) {
        const st_md_broker_t *me = st_md_self(best ? best->md : NULL, (int32_t)b->cfg->node_id);
        if (!me) {
            ok = false;
            *why = "not registered with the controller yet";
        } else if (me->fenced) {
            ok = false;
            *why = "fenced by the controller (catching up, or its heartbeats are not heard)";
        }
    }
    st_admin_snap_unref(best);
    return ok;
}

typedef struct {
    st_admin_view_t v;
    st_admin_snap_t **snaps;
    st_admin_live_t *live;
} view_hold_t;

static int view_take(st_admin_t *a, view_hold_t *h, bool process)
{
    st_broker_t *b = a->b;
    int n = b->nshards;
    memset(h, 0, sizeof *h);
    h->snaps = calloc((size_t)n, sizeof *h->snaps);
    h->live = calloc((size_t)n, sizeof *h->live);
    if (!h->snaps || !h->live) {
        free(h->snaps);
        free(h->live);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        h->snaps[i] = st_admin_slot_acquire(&a->slots[i]);
        h->live[i].stats = &b->shards[i]->stats;
        h->live[i].mesh_sent = st_mesh_sent(b->mesh, i);
        h->live[i].mesh_received = st_mesh_received(b->mesh, i);
        h->live[i].ring_occupancy = st_mesh_ring_occupancy(b->mesh, i);
    }
    st_admin_view_t *v = &h->v;
    v->nshards = n;
    v->snaps = h->snaps;
    v->live = h->live;
    v->version = STRATA_VERSION;
    v->cluster_id = b->cluster_id;
    v->node_id = (int32_t)b->cfg->node_id;
    const char *why;
    v->ready = is_ready(a, &why);
    v->now_ns = st_mono_ns();
    v->start_time_seconds = a->start_wall_s;
    v->uptime_seconds = (double)(v->now_ns - a->start_mono_ns) / 1e9;
    int64_t su = atomic_load(&a->startup_ns);
    v->recovery_seconds = su < 0 ? -1 : (double)su / 1e9;
    st_quorum_t *q = __atomic_load_n(&b->quorum, __ATOMIC_ACQUIRE);
    if (q)
        st_quorum_info(q, &v->qi);
    v->clustered = q && !v->qi.local;
    v->rss_bytes = process ? rss_bytes() : -1;
    v->open_fds = process ? open_fds() : -1;
    v->max_fds = process ? max_fds() : -1;
    return 0;
}

static void view_drop(view_hold_t *h)
{
    for (int i = 0; i < h->v.nshards; i++)
        st_admin_snap_unref(h->snaps[i]);
    free(h->snaps);
    free(h->live);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             st_buf_t *body)
{
    size_t len = 0;
    uint8_t *data = st_buf_steal(body, &len);
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, data ? data : (uint8_t *)"", data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result reply_str(struct MHD_Connection *c, unsigned status, const char *type,
                                 const char *s)
{
    st_buf_t b;
    st_buf_init(&b);
    st_buf_append(&b, s, strlen(s));
    return reply(c, status, type, &b);
}

#define JSON_TYPE "application/json"

/* ---- basic auth (admin.require.auth) ------------------------------------------------------ */

#define ADMIN_REALM "strata-admin"

/* What answers without credentials: the readiness probe (orchestrators probe it bare, as
 * Redpanda's), and /metrics with admin.metrics.open (Prometheus). */
static bool open_path(const st_admin_t *a, const char *url)
{
    return strcmp(url, "/v1/status/ready") == 0 ||
           (a->b->cfg->admin_metrics_open && strcmp(url, "/metrics") == 0);
}

/* Checks the request's basic credentials against the SCRAM users of the metadata, as a
 * PLAIN SaslAuthenticate does (either mechanism's stored keys, computed again from the
 * password: st_scram_cred_check); with ACLs on, only super.users pass (Redpanda: the admin
 * API is a superuser's). 0 when allowed, else the HTTP status to answer (401 or 403). */
static unsigned check_auth(st_admin_t *a, struct MHD_Connection *c)
{
    char *pass = NULL;
    char *user = MHD_basic_auth_get_username_password(c, &pass);
    unsigned status = MHD_HTTP_UNAUTHORIZED;
    if (!user || !pass)
        goto out;
    view_hold_t h;
    if (view_take(a, &h, false)) {
        status = MHD_HTTP_SERVICE_UNAVAILABLE;
        goto out;
    }
    const st_md_t *md = st_admin_view_md(&h.v);
    bool ok = false;
    const st_scram_mech_t mechs[] = {ST_SCRAM_SHA_512, ST_SCRAM_SHA_256};
    for (size_t i = 0; md && !ok && i < 2; i++) {
        const st_md_scram_t *m = st_md_find_scram(md, user, (int8_t)mechs[i]);
        if (m) {
            st_scram_cred_t cred;
            st_sasl_cred_of(m, &cred);
            ok = st_scram_cred_check(&cred, pass, strlen(pass));
        }
    }
    view_drop(&h);
    if (!ok)
        goto out;
    char principal[ST_SCRAM_USER_MAX + 8];
    snprintf(principal, sizeof principal, "User:%s", user);
    status = a->b->cfg->authorizer_enabled && !st_acl_is_super(a->b->cfg->super_users, principal)
                 ? MHD_HTTP_FORBIDDEN
                 : 0;
out:
    if (pass) {
        OPENSSL_cleanse(pass, strlen(pass));
        MHD_free(pass);
    }
    if (user)
        MHD_free(user);
    return status;
}

static enum MHD_Result reply_denied(struct MHD_Connection *c, unsigned status)
{
    static const char unauth[] = "{\"error\":\"unauthorized\"}";
    static const char forbid[] = "{\"error\":\"forbidden: the admin API is for super.users\"}";
    const char *body = status == MHD_HTTP_FORBIDDEN ? forbid : unauth;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, JSON_TYPE);
    enum MHD_Result rc;
    if (status == MHD_HTTP_UNAUTHORIZED)
        rc = MHD_queue_basic_auth_fail_response(c, ADMIN_REALM, r); /* 401, WWW-Authenticate */
    else
        rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* The console's Kafka-client routes (console.h), with the newest metadata held meanwhile. */
static enum MHD_Result console_request(st_admin_t *a, struct MHD_Connection *c, const char *url,
                                       const char *method, const st_admin_body_t *body)
{
    view_hold_t h;
    if (view_take(a, &h, false))
        return reply_str(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSON_TYPE,
                         "{\"error\":\"out of memory\"}");
    st_admin_console_req_t rq = {
        .url = url,
        .method = method,
        .body = body ? body->buf.data : NULL,
        .body_len = body ? body->buf.len : 0,
        .q_offset = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset"),
        .q_timestamp = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "timestamp"),
        .q_max = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "max"),
    };
    st_admin_answer_t ans;
    st_admin_console_handle(a->b, st_admin_view_md(&h.v), &rq, &ans);
    view_drop(&h);
    return reply(c, ans.status, ans.type, &ans.body);
}

/* A request ended (answered or not): frees a POST's body. */
static void request_done(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    if (*state && *state != cls)
        st_admin_body_free(*state);
    *state = NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state)
{
    (void)version;
    st_admin_t *a = cls;
    if (*state == NULL) { /* first call: headers only; answer on the next */
        *state = strcmp(method, "POST") == 0 ? st_admin_body_new() : NULL;
        if (!*state)
            *state = a;
        return MHD_YES;
    }
    st_admin_body_t *upbody = *state != a ? *state : NULL;
    if (*upload_size) { /* a POST's body is kept (up to ST_ADMIN_BODY_MAX), others ignored */
        if (upbody)
            st_admin_body_add(upbody, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (a->b->cfg->admin_require_auth && !open_path(a, url)) {
        unsigned st = check_auth(a, c);
        if (st)
            return reply_denied(c, st);
    }
    if (upbody && upbody->too_large)
        return reply_str(c, MHD_HTTP_CONTENT_TOO_LARGE, JSON_TYPE,
                         "{\"error\":\"request body over 65536 bytes\"}");
#ifdef ST_DEBUG_BUILD
    if (strcmp(url, "/v1/debug/fail-sync") == 0) {
        char body[64];
        bool post = strcmp(method, "POST") == 0;
        if (!post && strcmp(method, "GET") != 0)
            return reply_str(c, MHD_HTTP_METHOD_NOT_ALLOWED, JSON_TYPE,
                             "{\"error\":\"method not allowed\"}");
        if (fault_request(a, c, post, body, sizeof body))
            return reply_str(c, MHD_HTTP_BAD_REQUEST, JSON_TYPE,
                             "{\"error\":\"want count=N (>= 0) and errno=EIO, ENOSPC or a "
                             "number\"}");
        return reply_str(c, MHD_HTTP_OK, JSON_TYPE, body);
    }
    if (strcmp(url, "/v1/debug/sync-delay") == 0) {
        char body[64];
        bool post = strcmp(method, "POST") == 0;
        if (!post && strcmp(method, "GET") != 0)
            return reply_str(c, MHD_HTTP_METHOD_NOT_ALLOWED, JSON_TYPE,
                             "{\"error\":\"method not allowed\"}");
        if (delay_request(a, c, post, body, sizeof body))
            return reply_str(c, MHD_HTTP_BAD_REQUEST, JSON_TYPE,
                             "{\"error\":\"want ms=N (0..60000)\"}");
        return reply_str(c, MHD_HTTP_OK, JSON_TYPE, body);
    }
#endif
    if (strcmp(url, "/v1/protocol-log") == 0) {
        if (strcmp(method, "POST") != 0)
            return reply_str(c, MHD_HTTP_METHOD_NOT_ALLOWED, JSON_TYPE,
                             "{\"error\":\"method not allowed: POST\"}");
        const char *cid = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "client_id");
        const char *addr = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "address");
        const char *secs = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "seconds");
        char *end = NULL;
        long long n = secs ? strtoll(secs, &end, 10) : 60;
        char e[128] = "seconds: want a number";
        if ((secs && (end == secs || *end)) || st_protolog_set(cid, addr, n, e, sizeof e)) {
            char body[200];
            snprintf(body, sizeof body, "{\"error\":\"%s\"}", e);
            return reply_str(c, MHD_HTTP_BAD_REQUEST, JSON_TYPE, body);
        }
        json_t *j =
            json_pack("{s:b,s:I,s:s?,s:s?}", "logging", 1, "seconds", (json_int_t)n, "client_id",
                      cid && *cid ? cid : NULL, "address", addr && *addr ? addr : NULL);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        enum MHD_Result mr = reply_str(c, text ? MHD_HTTP_OK : MHD_HTTP_INTERNAL_SERVER_ERROR,
                                       JSON_TYPE, text ? text : "{\"error\":\"out of memory\"}");
        free(text);
        return mr;
    }
    bool is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (st_admin_console_owns(url) && !(is_get && strcmp(url, "/v1/topics") == 0))
        return console_request(a, c, url, method, upbody);
    if (!is_get)
        return reply_str(c, MHD_HTTP_METHOD_NOT_ALLOWED, JSON_TYPE,
                         "{\"error\":\"method not allowed\"}");
    const st_admin_asset_t *asset = st_admin_ui_asset(url);
    if (asset) {
        struct MHD_Response *r = MHD_create_response_from_buffer(asset->len, (void *)asset->data,
                                                                 MHD_RESPMEM_PERSISTENT);
        if (!r)
            return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, asset->type);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result mr = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return mr;
    }
    if (strcmp(url, "/v1/status/ready") == 0) {
        const char *why;
        bool ok = is_ready(a, &why);
        char body[200];
        snprintf(body, sizeof body, ok ? "{\"ready\":true}" : "{\"ready\":false,\"reason\":\"%s\"}",
                 why ? why : "");
        return reply_str(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, JSON_TYPE, body);
    }
    if (strcmp(url, "/") == 0 || strcmp(url, "/v1/openapi.json") == 0) {
        const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
        bool html = url[1] == 0 && accept && strstr(accept, "text/html");
        st_buf_t out;
        st_buf_init(&out);
        int rc = url[1] ? st_admin_render_openapi(&out, STRATA_VERSION)
                        : st_admin_render_index(&out, STRATA_VERSION, html);
        if (rc) {
            st_buf_fini(&out);
            return reply_str(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSON_TYPE,
                             "{\"error\":\"out of memory\"}");
        }
        return reply(c, MHD_HTTP_OK, html ? "text/html; charset=utf-8" : JSON_TYPE, &out);
    }
    if (st_admin_debug_route(url)) { /* debug.h */
        st_admin_debug_in_t in = {
            a->b->cfg,     STRATA_VERSION,  a->b->cluster_id,
            a->b->nshards, a->start_wall_s, (double)(st_mono_ns() - a->start_mono_ns) / 1e9};
        st_buf_t out;
        st_buf_init(&out);
        const char *type;
        if (!st_admin_debug_render(url, &in, &out, &type))
            return reply(c, MHD_HTTP_OK, type, &out);
        st_buf_fini(&out);
        return reply_str(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSON_TYPE,
                         "{\"error\":\"out of memory\"}");
    }
    bool metrics = strcmp(url, "/metrics") == 0;
    bool cluster = strcmp(url, "/v1/cluster") == 0;
    bool topics = strcmp(url, "/v1/topics") == 0;
    bool parts = strcmp(url, "/v1/partitions") == 0;
    bool groups = strcmp(url, "/v1/groups") == 0;
    if (!metrics && !cluster && !topics && !parts && !groups)
        return reply_str(c, MHD_HTTP_NOT_FOUND, JSON_TYPE, "{\"error\":\"not found\"}");
    view_hold_t h;
    if (view_take(a, &h, metrics))
        return reply_str(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSON_TYPE,
                         "{\"error\":\"out of memory\"}");
    st_buf_t out;
    st_buf_init(&out);
    int rc;
    if (metrics)
        rc = st_admin_render_metrics(&h.v, &out);
    else if (cluster)
        rc = st_admin_render_cluster(&h.v, &out);
    else if (topics)
        rc = st_admin_render_topics(&h.v, &out);
    else if (groups)
        rc = st_admin_render_groups(&h.v, &out);
    else
        rc = st_admin_render_partitions(
            &h.v, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "topic"), &out);
    view_drop(&h);
    if (rc) {
        st_buf_fini(&out);
        return reply_str(c, MHD_HTTP_INTERNAL_SERVER_ERROR, JSON_TYPE,
                         "{\"error\":\"out of memory\"}");
    }
    return reply(c, MHD_HTTP_OK, metrics ? "text/plain; version=0.0.4; charset=utf-8" : JSON_TYPE,
                 &out);
}

/* ---- lifecycle --------------------------------------------------------------------------- */

int st_admin_create(st_admin_t **out, st_broker_t *b)
{
    st_admin_t *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->slots = calloc((size_t)b->nshards, sizeof *a->slots);
    if (!a->slots) {
        free(a);
        return -ENOMEM;
    }
    a->b = b;
    a->listen_fd = -1;
    a->port = -1;
    a->start_wall_s = (double)st_wall_ms() / 1e3;
    a->start_mono_ns = st_mono_ns();
    atomic_init(&a->startup_ns, -1);
#ifdef ST_DEBUG_BUILD
    a->faults = calloc((size_t)b->nshards, sizeof *a->faults);
    atomic_init(&a->fail_syncs, 0);
    atomic_init(&a->sync_delay_ms, 0);
    atomic_init(&a->sync_delay_start, 0);
    atomic_init(&a->fail_errno, EIO);
#endif
    st_admin_add_group_collector(a, st_admin_collect_groups, NULL);
    b->tick_hook = st_admin_on_tick;
    b->tick_hook_arg = a;
    *out = a;
    return 0;
}

int st_admin_add_group_collector(st_admin_t *a, st_admin_group_collect_fn fn, void *arg)
{
    if (a->ncollectors >= ST_ADMIN_MAX_COLLECTORS)
        return -ENOSPC;
    a->collectors[a->ncollectors++] = (collector_t){fn, arg};
    return 0;
}

static int bind_listen(const char *host, int port, int *fd_out, int *port_out, char *err,
                       size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(*host ? host : NULL, ps, &hints, &ai);
    if (g) {
        snprintf(err, errlen, "admin.listen %s:%d: %s", host, port, gai_strerror(g));
        return -EINVAL;
    }
    int rc = -EADDRNOTAVAIL;
    for (struct addrinfo *p = ai; p; p = p->ai_next) {
        int fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, p->ai_addr, p->ai_addrlen) == 0 && listen(fd, 64) == 0) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof ss;
            getsockname(fd, (struct sockaddr *)&ss, &sl);
            char hs[NI_MAXHOST], sv[NI_MAXSERV];
            getnameinfo((struct sockaddr *)&ss, sl, hs, sizeof hs, sv, sizeof sv,
                        NI_NUMERICHOST | NI_NUMERICSERV);
            *port_out = atoi(sv);
            *fd_out = fd;
            freeaddrinfo(ai);
            return 0;
        }
        rc = -errno;
        close(fd);
    }
    freeaddrinfo(ai);
    snprintf(err, errlen, "cannot listen on admin.listen %s:%d: %s", host, port, strerror(-rc));
    return rc;
}

/* Splits the PEM file of admin.ssl.keystore.location into its certificates and its private
 * key (libmicrohttpd takes them apart, GnuTLS parses them). 0, or -1 with one line in err. */
static int load_keystore(st_admin_t *a, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "admin.ssl.keystore.location %s: %s", path, strerror(errno));
        return -1;
    }
    st_buf_t cert, key;
    st_buf_init(&cert);
    st_buf_init(&key);
    char line[4096];
    st_buf_t *into = NULL;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "-----BEGIN ", 11) == 0)
            into = strstr(line, "PRIVATE KEY") ? &key : strstr(line, "CERTIFICATE") ? &cert : NULL;
        if (into)
            st_buf_append(into, line, strlen(line));
        if (strncmp(line, "-----END ", 9) == 0)
            into = NULL;
    }
    fclose(f);
    size_t n;
    uint8_t nul = 0;
    st_buf_append(&cert, &nul, 1);
    st_buf_append(&key, &nul, 1);
    bool have = cert.len > 1 && key.len > 1;
    a->tls_cert = (char *)st_buf_steal(&cert, &n);
    a->tls_key = (char *)st_buf_steal(&key, &n);
    if (!have || !a->tls_cert || !a->tls_key) {
        snprintf(err, errlen,
                 "admin.ssl.keystore.location %s: want a PEM certificate chain and its private "
                 "key in the one file",
                 path);
        return -1;
    }
    return 0;
}

int st_admin_listen(st_admin_t *a, const char *host, int port, char *err, size_t errlen)
{
    const st_config_t *cfg = a->b->cfg;
    bool tls = cfg->admin_tls_enabled;
    if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(err, errlen,
                 "admin.tls.enabled: this libmicrohttpd was built without TLS (GnuTLS)");
        return ST_E_CONFIG;
    }
    if (tls && !*cfg->admin_ssl_keystore_location) {
        snprintf(err, errlen, "admin.tls.enabled needs admin.ssl.keystore.location");
        return ST_E_CONFIG;
    }
    if (tls && load_keystore(a, cfg->admin_ssl_keystore_location, err, errlen))
        return ST_E_CONFIG;
    int rc = bind_listen(host, port, &a->listen_fd, &a->port, err, errlen);
    if (rc)
        return rc;
    const char *pw = cfg->admin_ssl_key_password;
    struct MHD_OptionItem tls_opts[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, tls ? a->tls_cert : NULL},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, tls ? a->tls_key : NULL},
        {tls && *pw ? MHD_OPTION_HTTPS_KEY_PASSWORD : MHD_OPTION_END, 0, (void *)pw},
        {MHD_OPTION_END, 0, NULL},
    };
    a->mhd = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | (tls ? MHD_USE_TLS : 0), 0, NULL, NULL,
        handle, a, MHD_OPTION_LISTEN_SOCKET, a->listen_fd, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)10, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_NOTIFY_COMPLETED,
        request_done, a, tls ? MHD_OPTION_ARRAY : MHD_OPTION_END, tls_opts, MHD_OPTION_END);
    if (!a->mhd) {
        snprintf(err, errlen, "cannot start the admin HTTP server on %s:%d", host, a->port);
        close(a->listen_fd);
        a->listen_fd = -1;
        a->port = -1;
        return -EIO;
    }
    a->listen_fd = -1; /* MHD owns it now and closes it when stopped */
    ST_INFO("admin API on %s://%s:%d (/metrics, /v1/status/ready, /v1/cluster, /v1/topics, "
            "/v1/partitions, /v1/groups; console /ui)%s%s",
            tls ? "https" : "http", host, a->port,
            cfg->admin_require_auth ? ", basic auth (SCRAM users" : "",
            cfg->admin_require_auth ? (cfg->authorizer_enabled ? ", super.users only)" : ")") : "");
    return 0;
}

int st_admin_port(const st_admin_t *a)
{
    return a->port;
}

void st_admin_set_started(st_admin_t *a, double startup_seconds)
{
    atomic_store(&a->startup_ns, (int64_t)(startup_seconds * 1e9));
}

void st_admin_stop(st_admin_t *a)
{
    if (a->mhd) {
        MHD_stop_daemon(a->mhd);
        a->mhd = NULL;
    }
    if (a->tls_key)
        OPENSSL_cleanse(a->tls_key, strlen(a->tls_key));
    free(a->tls_key);
    free(a->tls_cert);
    a->tls_key = a->tls_cert = NULL;
    if (a->listen_fd >= 0) {
        close(a->listen_fd);
        a->listen_fd = -1;
    }
}

void st_admin_destroy(st_admin_t *a)
{
    if (!a)
        return;
    st_admin_stop(a);
    if (a->b->tick_hook_arg == a) {
        a->b->tick_hook = NULL;
        a->b->tick_hook_arg = NULL;
    }
    for (int i = 0; i < a->b->nshards; i++)
        st_admin_slot_fini(&a->slots[i]);
    free(a->slots);
#ifdef ST_DEBUG_BUILD
    free(a->faults);
#endif
    free(a);
}
