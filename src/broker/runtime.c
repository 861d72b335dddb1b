/*
 * runtime.c — the shard runtime: start-up (identity, metadata, listeners, shard threads),
 * each shard's loop, frames turned into requests for the protocol layer's dispatch, the
 * housekeeping tick, the asynchronous sync hook storage uses, and shutdown. What is Kafka's
 * (handlers, group coordinators, fetch waits, topic configs, the metadata file) comes in
 * through st_broker_hooks_t.
 *
 * Shutdown (SIGTERM/SIGINT):
 *   main: st_broker_stop() sets `stopping` and wakes every loop
 *   shard, before sleeping: sees `stopping` -> stops accepting, lets each connection finish
 *   its in-flight requests (net/ closes it once answered and sent), arms a timer of
 *   shutdown.timeout.ms that closes whatever is left -> when no connection remains, the loop
 *   stops and the thread exits -> main joins every shard and exits 0.
 */
#include "broker/runtime.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "cluster/legacy.h"
#include "cluster/quorum.h"
#include "broker/adopt.h"
#include "broker/connquota.h"
#include "broker/request.h"
#include "net/tls.h"
#include "storage/fs.h"
#include "storage/journal.h"

static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cv = PTHREAD_COND_INITIALIZER;

/* ---- cluster identity: <log.dirs>/meta.properties, as Kafka writes it ---- */

static void new_cluster_id(char *out, size_t n)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t raw[16];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        for (size_t i = 0; i < sizeof raw; i++)
            raw[i] = (uint8_t)(st_mono_ns() >> (i % 8));
    size_t k = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < sizeof raw && k + 1 < n; i++) {
        acc = acc << 8 | raw[i];
        bits += 8;
        while (bits >= 6 && k + 1 < n) {
            out[k++] = b64[(acc >> (bits - 6)) & 63];
            bits -= 6;
        }
    }
    if (bits > 0 && k + 1 < n)
        out[k++] = b64[(acc << (6 - bits)) & 63];
    out[k] = 0;
}

static int mkdirs(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Reads <log.dirs>/meta.properties, or writes a new one (a new cluster id), through the
 * broker's file-system table; on the main thread before the shards start, so its synchronous
 * sync blocks no shard. */
static int load_identity(st_broker_t *b, char *err, size_t errlen)
{
    const st_config_t *c = b->cfg;
    int rc = mkdirs(c->log_dirs);
    if (rc) {
        snprintf(err, errlen, "cannot create log.dirs %s: %s", c->log_dirs, strerror(-rc));
        return rc;
    }
    char path[4096];
    /* Nothing is read or written before the directory is this process's alone (Kafka's
     * .lock): a second broker on a live data directory would serve and change the same logs. */
    snprintf(path, sizeof path, "%s/.lock", c->log_dirs);
    b->dir_lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (b->dir_lock_fd < 0 || flock(b->dir_lock_fd, LOCK_EX | LOCK_NB)) {
        rc = b->dir_lock_fd < 0 ? -errno : ST_E_CONFIG;
        snprintf(err, errlen, "log.dirs %s is in use by another process (%s is locked)",
                 c->log_dirs, path);
        return rc;
    }
    snprintf(path, sizeof path, "%s/meta.properties", c->log_dirs);
    uint8_t *data;
    size_t len;
    rc = st_fs_read_file(&b->fs, path, 64 << 10, &data, &len);
    if (rc == 0) {
        int64_t node = -1;
        for (char *line = (char *)data, *end = line + len; line < end;) {
            char *nl = memchr(line, '\n', (size_t)(end - line));
            size_t n = nl ? (size_t)(nl - line) : (size_t)(end - line);
            if (n > 0 && line[n - 1] == '\r')
                n--;
            if (n >= 11 && strncmp(line, "cluster.id=", 11) == 0)
                snprintf(b->cluster_id, sizeof b->cluster_id, "%.*s",
                         (int)(n - 11 < 63 ? n - 11 : 63), line + 11);
            else if (n >= 8 && strncmp(line, "node.id=", 8) == 0) {
                char num[32];
                snprintf(num, sizeof num, "%.*s", (int)(n - 8 < 31 ? n - 8 : 31), line + 8);
                node = strtoll(num, NULL, 10);
            }
            line = nl ? nl + 1 : end;
        }
        free(data);
        if (!b->cluster_id[0]) {
            snprintf(err, errlen, "%s has no cluster.id", path);
            return ST_E_CONFIG;
        }
        if (node >= 0 && node != c->node_id) {
            snprintf(err, errlen, "%s belongs to node.id=%lld, but node.id=%lld is configured",
                     path, (long long)node, (long long)c->node_id);
            return ST_E_CONFIG;
        }
        return 0;
    }
    if (rc != -ENOENT) {
        snprintf(err, errlen, "cannot read %s: %s", path, st_strerror(rc));
        return rc;
    }
    new_cluster_id(b->cluster_id, 23);
    char text[256];
    int n = snprintf(text, sizeof text,
                     "#\n#Written by strata-server\nversion=1\ncluster.id=%s\nnode.id=%lld\n",
                     b->cluster_id, (long long)c->node_id);
    rc = st_fs_write_file_atomic(&b->fs, c->log_dirs, "meta.properties", text, (size_t)n);
    if (rc) {
        snprintf(err, errlen, "cannot write %s: %s", path, st_strerror(rc));
        return rc;
    }
    ST_INFO("new cluster id %s", b->cluster_id);
    return 0;
}

/* ---- creation ---- */

/* Raises the soft descriptor limit to the hard one and shares what segment files may keep
 * open among the shards: half the limit, leaving the rest to sockets, the admin server and
 * files opened briefly. Closed segments reopen on demand, so any share works, only slower. */
static int fd_budget(int nshards)
{
    struct rlimit rl;
    long limit = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            rl.rlim_cur = rl.rlim_max;
            setrlimit(RLIMIT_NOFILE, &rl);
            getrlimit(RLIMIT_NOFILE, &rl);
        }
        limit = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1 << 20 ? 1 << 20 : (long)rl.rlim_cur;
    }
    long per = limit / 2 / nshards;
    if (per > 4096)
        per = 4096;
    return per < 32 ? 32 : (int)per;
}

static void broker_sweep_data_dir(const st_md_t *md, const char *data_dir);
static int broker_start_quorum(st_broker_t *b, char *err, size_t errlen);

/* The TLS context of listener `name` from its ssl.* settings (listener.name.<name>.ssl.*
 * first); errors name the listener, the setting and the file. */
static int broker_tls_server(const st_config_t *cfg, const char *name, st_tls_server_t **out,
                             char *err, size_t errlen)
{
    st_config_lookup_t lk = {.cfg = cfg, .listener = name};
    st_tls_settings_t s = {0};
    st_tls_settings_get(&s, st_config_lookup, &lk);
    char e[512];
    int rc = st_tls_server_create(&s, name, out, e, sizeof e);
    if (rc) {
        snprintf(err, errlen, "listener %s (SSL): %s", name, e);
        return rc;
    }
    ST_INFO("listener %s: TLS (%s, client auth %s)", name,
            *s.enabled_protocols ? s.enabled_protocols : "TLSv1.2,TLSv1.3",
            *s.client_auth ? s.client_auth : "none");
    return 0;
}

/* Binds every Kafka listener once per shard (SO_REUSEPORT): b->listeners gets each one's
 * bound port (a configured 0 is the kernel's pick, the same for every shard), logged for
 * whoever started the broker with port 0; b->listen_port is the inter-broker listener's. */
static int broker_listen(st_broker_t *b, char *err, size_t errlen)
{
    const st_config_t *cfg = b->cfg;
    int nl = cfg->nkafka_listeners, ns = b->nshards;
    b->listeners = calloc((size_t)nl, sizeof *b->listeners);
    b->listen_fds = calloc((size_t)nl * (size_t)ns, sizeof *b->listen_fds);
    if (!b->listeners || !b->listen_fds)
        return -ENOMEM;
    b->nlisteners = nl;
    for (int i = 0; i < nl * ns; i++)
        b->listen_fds[i] = -1;
    for (int l = 0; l < nl; l++) {
        st_listener_t *ls = &b->listeners[l];
        *ls = cfg->kafka_listeners[l];
        /* A process killed a moment ago may still hold the port: io_uring tears a dead ring
         * down asynchronously, closing its sockets shortly after the process is gone. Wait
         * for that (bounded), but never share the port with a listener that is really there. */
        int rc = st_net_probe_port(ls->host, ls->port);
        for (int64_t give_up = st_mono_ms() + 2000; rc == -EADDRINUSE && st_mono_ms() < give_up;) {
            struct timespec ts = {0, 50 * 1000000};
            nanosleep(&ts, NULL);
            rc = st_net_probe_port(ls->host, ls->port);
        }
        int port = ls->port;
        for (int i = 0; i < ns && !rc; i++)
            rc = st_net_listen(ls->host, port, &b->listen_fds[i * nl + l], &port);
        if (rc) {
            snprintf(err, errlen, "cannot listen on %s:%d: %s", ls->host, port, strerror(-rc));
            return rc;
        }
        ls->port = port;
        if (!ls->adv_port)
            ls->adv_port = port;
        if (nl > 1)
            ST_INFO("listener %s (%s) on %s:%d, advertised %s:%d", ls->name,
                    st_sec_protocol_name(ls->protocol), ls->host, port, ls->adv_host, ls->adv_port);
    }
    b->listen_port = b->listeners[cfg->inter_broker_listener].port;
    return 0;
}

void st_broker_reload_tls(st_broker_t *b)
{
    for (int l = 0; b->tls && l < b->cfg->nkafka_listeners; l++)
        if (b->tls[l])
            st_tls_server_reload(b->tls[l], true);
}

int st_broker_create(st_broker_t **out, const st_config_t *cfg, int nshards,
                     const st_broker_hooks_t *hooks, char *err, size_t errlen)
{
    st_broker_t *b = calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    b->cfg = cfg;
    b->hooks = hooks;
    b->fs = st_fs_posix();
    b->nshards = nshards;
    b->dir_lock_fd = -1;
    b->fds_per_shard = fd_budget(nshards);
    /* TLS settings first: a wrong file or password stops the start before the data
     * directory is touched. */
    int rc = 0;
    b->tls = calloc((size_t)cfg->nkafka_listeners + 1, sizeof *b->tls);
    if (!b->tls) {
        rc = -ENOMEM;
        goto fail;
    }
    for (int l = 0; l < cfg->nkafka_listeners && !rc; l++)
        if (st_sec_protocol_tls(cfg->kafka_listeners[l].protocol))
            rc = broker_tls_server(cfg, cfg->kafka_listeners[l].name, &b->tls[l], err, errlen);
    if (rc)
        goto fail;
    b->connquota = st_connquota_create(cfg, err, errlen);
    if (!b->connquota) {
        rc = -EINVAL;
        goto fail;
    }
    /* The ports before the data directory: a broker that cannot serve writes nothing there (no
     * meta.properties, no new cluster id). The CONTROLLER port is bound by the quorum later;
     * one already taken is refused here too. */
    rc = broker_listen(b, err, errlen);
    if (rc)
        goto fail;
    if (cfg->role_controller && !cfg->quorum_local && cfg->controller_port > 0 &&
        st_net_probe_port(cfg->controller_host, cfg->controller_port) == -EADDRINUSE) {
        snprintf(err, errlen, "cannot listen on %s:%d (CONTROLLER): %s", cfg->controller_host,
                 cfg->controller_port, strerror(EADDRINUSE));
        rc = -EADDRINUSE;
        goto fail;
    }
    rc = load_identity(b, err, errlen);
    if (rc)
        goto fail;
    b->shards = calloc((size_t)nshards, sizeof *b->shards);
    if (!b->shards) {
        rc = -ENOMEM;
        goto fail;
    }
    /* Whatever a crash left in the shards' journals goes into the logs before any opens,
     * whether the journal is on in this run or not (the shard count may differ too). */
    st_journal_recovery_t jrec;
    if (st_journal_recover(b->fs, cfg->log_dirs, &jrec) < 0)
        ST_WARN("journal recovery ran out of memory; continuing without it");
    rc = st_mesh_create(&b->mesh, nshards, 4096);
    if (rc) {
        snprintf(err, errlen, "cannot create the shard mesh: %s", st_strerror(rc));
        goto fail;
    }
    for (int i = 0; i < nshards; i++) {
        b->shards[i] = calloc(1, sizeof *b->shards[i]);
        if (!b->shards[i]) {
            rc = -ENOMEM;
            goto fail;
        }
        b->shards[i]->b = b;
        b->shards[i]->id = i;
        pthread_mutex_init(&b->shards[i]->ext_mu, NULL);
    }
    rc = broker_start_quorum(b, err, errlen);
    if (rc)
        goto fail;
    for (int i = 0; i < nshards; i++)
        b->shards[i]->md = st_md_ref(b->start_md);
    *out = b;
    return 0;
fail:
    st_broker_destroy(b);
    return rc ? rc : ST_E_CONFIG;
}

typedef struct {
    st_storage_env_t *env;
    const st_md_t *md;
    int stray;
} sweep_ctx_t;

static int sweep_partition_dir(void *arg, const char *dir, const char *topic, int32_t partition)
{
    sweep_ctx_t *c = arg;
    if (strcmp(topic, ST_QUORUM_TOPIC) == 0)
        return 0; /* the metadata log itself (cluster/quorum.h) */
    const st_md_topic_t *t = st_md_find(c->md, topic, strlen(topic));
    if (t && partition < t->npartitions)
        return 0; /* its topic id is checked when it opens (st_parts_open) */
    char aside[4200];
    int rc = st_storage_set_aside(c->env, dir, "stray", aside, sizeof aside);
    if (rc)
        ST_ERROR("%s belongs to no topic and cannot be moved aside: %s", dir, st_strerror(rc));
    else
        ST_WARN("%s belongs to no topic (a deletion a crash interrupted?): kept as %s", dir, aside);
    c->stray++;
    return 0;
}

/*
 * Start-up, before any partition opens: removes what interrupted deletions left ("-delete"
 * directories), and moves aside partition directories of topics the metadata does not have,
 * so that a topic created later under the same name never finds their records.
 */
static void broker_sweep_data_dir(const st_md_t *md, const char *data_dir)
{
    st_storage_env_t env;
    st_storage_env_init(&env, st_fs_posix(), 16);
    int rc = st_storage_sweep_deleted(&env, data_dir);
    if (rc > 0)
        ST_INFO("removed %d partition director%s left by interrupted deletions", rc,
                rc == 1 ? "y" : "ies");
    else if (rc < 0 && rc != -ENOENT)
        ST_WARN("cannot sweep %s: %s", data_dir, st_strerror(rc));
    sweep_ctx_t c = {&env, md, 0};
    st_storage_list_partitions(&env, data_dir, sweep_partition_dir, &c);
    st_storage_env_fini(&env);
}

void st_broker_destroy(st_broker_t *b)
{
    if (!b)
        return;
    /* The quorum's thread first: until it is joined it may publish into shard 0 (a start that
     * failed after the quorum began, e.g. admin.listen in use, comes here without a stop). */
    st_quorum_destroy(b->quorum);
    b->quorum = NULL;
    if (b->dir_lock_fd >= 0)
        close(b->dir_lock_fd);
    if (b->listen_fds)
        for (int i = 0; i < b->nshards * b->nlisteners; i++)
            if (b->listen_fds[i] >= 0)
                close(b->listen_fds[i]);
    if (b->shards)
        for (int i = 0; i < b->nshards; i++)
            if (b->shards[i]) {
                st_loop_destroy(b->shards[i]->loop);
                st_md_unref(b->shards[i]->md);
                free(b->shards[i]);
            }
    json_decref(atomic_exchange(&b->quorum_seed, NULL));
    st_md_unref(atomic_exchange(&b->quorum_md, NULL));
    st_md_unref(b->start_md);
    if (b->hooks->controller_fini)
        b->hooks->controller_fini(b);
    st_mesh_destroy(b->mesh);
    free(b->listen_fds);
    st_connquota_destroy(b->connquota);
    for (int l = 0; b->tls && l < b->cfg->nkafka_listeners; l++)
        st_tls_server_destroy(b->tls[l]);
    free(b->tls);
    free(b->listeners);
    free(b->shards);
    free(b->fetchers); /* the array replication_start made (each fetcher its references freed) */
    free(b);
}

/* ---- dispatch ---- */

static void kshard_on_frame(void *ctx, st_conn_t *c, uint64_t seq, uint8_t *frame, size_t len)
{
    st_kshard_t *s = ctx;
    st_kreq_t *r = st_kreq_new(s, c, seq, frame, len);
    if (!r) {
        st_conn_respond(c, seq, NULL);
        st_conn_close(c);
        return;
    }
    if (len < 8) {
        r->api_key = -1;
        st_kreq_fail(r, "request shorter than its header");
        return;
    }
    r->api_key = (int16_t)st_be16(frame);
    r->api_version = (int16_t)st_be16(frame + 2);
    r->hdr.correlation_id = (int32_t)st_be32(frame + 4);
    s->b->hooks->dispatch(r);
}

/* ---- shard threads ---- */

static void kshard_on_close(void *ctx, st_conn_t *c)
{
    (void)ctx;
    (void)c;
}

/* Connection quotas (connquota.h), with the ip quotas of this shard's snapshot. */
static int64_t kshard_on_accept(void *ctx, const char *ip, const st_listener_t *l)
{
    st_kshard_t *s = ctx;
    st_broker_t *b = s->b;
    bool protected_listener =
        b->nlisteners > 1 && l == &b->listeners[b->cfg->inter_broker_listener];
    const st_md_t *md = s->md;
    int64_t rc =
        st_connquota_admit(b->connquota, md ? md->quotas : NULL, md ? (size_t)md->nquotas : 0, ip,
                           protected_listener, st_mono_ms());
    if (rc == ST_CONNQUOTA_WAIT)
        return ST_NET_ADMIT_WAIT; /* ST_CONNQUOTA_WAIT is the same value; said for the reader */
    if (rc < 0)
        ST_INFO("refused a connection from %s: max.connections.per.ip", ip);
    else if (rc > 0)
        ST_DEBUG("throttling a connection from %s for %lld ms (connection_creation_rate)", ip,
                 (long long)rc);
    return rc;
}

static void kshard_on_release(void *ctx, const char *ip)
{
    st_kshard_t *s = ctx;
    st_connquota_release(s->b->connquota, ip);
    st_net_admission_retry(s->net); /* a slot of max.connections may be free now */
}

void st_broker_wake_all(st_broker_t *b)
{
    for (int i = 0; i < b->nshards; i++)
        if (b->shards[i]->loop)
            st_loop_wake(b->shards[i]->loop);
}

/* This shard has no connection left. Its partitions stay open until every shard is in the
 * same state: until then another shard's last requests may still reach them. */
static void kshard_drained(void *arg)
{
    st_kshard_t *s = arg;
    st_loop_timer_stop(s->loop, &s->shutdown_timer);
    st_loop_timer_stop(s->loop, &s->tick_timer);
    s->shutdown_state = 2;
    atomic_fetch_add_explicit(&s->b->drained, 1, memory_order_acq_rel);
    st_broker_wake_all(s->b);
}

/*
 * Shutdown after the connections are gone, run before each sleep:
 *   2 drained     -- every shard drained -->  close the logs (final sync, clean marker)  -> 3
 *   3 logs closed -- every shard closed, no sync in flight, every TLS transport freed (a closed
 *                    one waits for its cancelled reads) -->  run the messages still in
 *                    the rings (reads released, notifications), stop the loop          -> 4
 */
static void kshard_shutdown_step(st_kshard_t *s)
{
    st_broker_t *b = s->b;
    /* Every shard drained: shard 0 starts no adoption any more (it does before it drains), but
     * one begun may still be in any shard's queue or mesh ring; it runs on open logs. */
    if (s->shutdown_state == 2 &&
        atomic_load_explicit(&b->drained, memory_order_acquire) == b->nshards &&
        atomic_load_explicit(&b->adopting, memory_order_acquire) == 0) {
        st_parts_fini(&s->parts);
        if (s->env.journal)
            st_journal_close(s->env.journal); /* every log synced: nothing to replay */
        s->shutdown_state = 3;
        atomic_fetch_add_explicit(&b->closed, 1, memory_order_acq_rel);
        st_broker_wake_all(b);
    }
    if (s->shutdown_state == 3 && s->syncs_in_flight == 0 && st_tls_transports_here() == 0 &&
        atomic_load_explicit(&b->closed, memory_order_acquire) == b->nshards) {
        st_mesh_drain_now(b->mesh, s->id);
        s->shutdown_state = 4;
        st_loop_stop(s->loop);
    }
}

static void kshard_shutdown_timeout(st_timer_t *t)
{
    st_kshard_t *s = t->data;
    ST_WARN("shutdown: %zu connection(s) still busy after %lld ms; closing them",
            st_net_conn_count(s->net), (long long)s->b->cfg->shutdown_timeout_ms);
    st_net_close_all(s->net);
}

/* Shard 0 of a cluster: the quorum's latest state and finished ops. */
static void kshard_quorum(st_kshard_t *s)
{
    st_broker_t *b = s->b;
    st_md_t *md = atomic_exchange(&b->quorum_md, NULL);
    if (md && atomic_load_explicit(&b->stopping, memory_order_acquire))
        st_md_unref(md); /* the shards are stopping: no partition opens now */
    else if (md)
        b->hooks->adopt_metadata(s, md);
    b->hooks->quorum_answers(s);
}

void st_kshard_unstall(st_kshard_t *s)
{
    /* A snapshot newer than the freeze is not enough: the quorum thread, frozen too, may first
     * apply entries committed before the freeze, which still show this broker leading. The
     * controller fenced it meanwhile (it was silent a whole session): wait to see that, then
     * the unfencing that follows its return. */
    if (!s->stall_version)
        return;
    const st_md_broker_t *me = st_md_broker(s->md, (int32_t)s->b->cfg->node_id);
    if (me && me->fenced)
        s->stall_seen_fenced = true;
    else if (me && s->stall_seen_fenced)
        s->stall_version = 0;
}

bool st_kshard_stalled(st_kshard_t *s)
{
    const st_config_t *cfg = s->b->cfg;
    st_quorum_t *q = s->b->quorum;
    /* the only voter's broker was replaced by nobody while it was frozen */
    if (!q || st_quorum_alone(q))
        return false;
    int64_t now = st_mono_ms(), session = cfg->broker_session_timeout_ms;
    /* a shard merely busy (opening thousands of partitions) is not frozen: the quorum thread,
     * which a whole-process freeze stops too, kept running */
    bool quorum_frozen = now - st_quorum_alive_ms(q) > session / 2 ||
                         st_quorum_frozen_ms(q) >= s->last_tick_ms; /* it woke first */
    if (!s->stall_version && s->last_tick_ms && now - s->last_tick_ms > session && quorum_frozen) {
        s->stall_version = s->md->version + 1;
        s->stall_since = now;
        s->stall_seen_fenced = false;
        ST_WARN("this shard was frozen for %lld ms: it leads nothing until the metadata shows "
                "this broker unfenced again",
                (long long)(now - s->last_tick_ms));
    }
    if (s->stall_version && now - s->stall_since > 2 * session)
        s->stall_version = 0; /* no newer metadata came (a whole cluster frozen together) */
    return s->stall_version != 0;
}

void st_broker_post(st_broker_t *b, int shard, st_ext_call_t *c)
{
    st_kshard_t *s = b->shards[shard];
    c->next = NULL;
    pthread_mutex_lock(&s->ext_mu);
    if (s->ext_tail)
        s->ext_tail->next = c;
    else
        s->ext_head = c;
    s->ext_tail = c;
    pthread_mutex_unlock(&s->ext_mu);
    atomic_store_explicit(&s->ext_ready, 1, memory_order_release);
    st_loop_wake(s->loop);
}

/* Runs the calls other threads posted to this shard. */
static void kshard_ext_calls(st_kshard_t *s)
{
    if (!atomic_exchange_explicit(&s->ext_ready, 0, memory_order_acq_rel))
        return;
    pthread_mutex_lock(&s->ext_mu);
    st_ext_call_t *c = s->ext_head;
    s->ext_head = s->ext_tail = NULL;
    pthread_mutex_unlock(&s->ext_mu);
    while (c) {
        st_ext_call_t *next = c->next;
        c->fn(s, c);
        c = next;
    }
}

static void kshard_before_sleep(void *arg)
{
    st_kshard_t *s = arg;
    kshard_ext_calls(s);
    if (s->env.journal)
        st_journal_run(s->env.journal); /* one sync for every append of this iteration */
    /* the quorum's states fan out to every shard: only once every shard is on the mesh */
    if (s->id == 0 && s->b->quorum && s->shutdown_state == 0 &&
        atomic_load(&s->b->started) + atomic_load(&s->b->failed) == s->b->nshards &&
        !atomic_load(&s->b->failed))
        kshard_quorum(s);
    if (s->shutdown_state >= 2) {
        kshard_shutdown_step(s);
        return;
    }
    if (s->shutdown_state != 0 || !atomic_load_explicit(&s->b->stopping, memory_order_acquire))
        return;
    s->shutdown_state = 1;
    ST_DEBUG("shutting down: %zu connection(s) open", st_net_conn_count(s->net));
    st_timer_init(&s->shutdown_timer, kshard_shutdown_timeout, s);
    st_loop_timer_start(s->loop, &s->shutdown_timer, s->b->cfg->shutdown_timeout_ms);
    s->b->hooks->shard_drain(s); /* waiting requests (long polls, joins) answer now */
    st_net_shutdown(s->net, kshard_drained, s);
}

typedef struct {
    st_io_t io;
    st_kshard_t *s;
    st_sync_done_fn done;
    void *arg;
    int64_t start_ns;
} sync_op_t;

static void sync_complete(st_io_t *io, int res)
{
    sync_op_t *op = io->data;
    st_kshard_t *s = op->s;
    int64_t ns = st_mono_ns() - op->start_ns;
    atomic_fetch_add_explicit(&s->stats.fsyncs, 1, memory_order_relaxed);
    if (res < 0)
        atomic_fetch_add_explicit(&s->stats.fsync_errors, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stats.fsync_ns, (uint64_t)ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stats.fsync_latency[st_kstats_bucket(ns)], 1,
                              memory_order_relaxed);
    s->syncs_in_flight--;
    op->done(op->arg, res);
    free(op);
}

/* The storage sync hook: an fdatasync through io_uring, never on the loop thread. */
static int sync_submit(void *ctx, int fd, st_sync_done_fn done, void *arg)
{
    st_kshard_t *s = ctx;
    sync_op_t *op = malloc(sizeof *op);
    if (!op)
        return -ENOMEM;
    op->io.cb = sync_complete;
    op->io.data = op;
    op->s = s;
    op->done = done;
    op->arg = arg;
    op->start_ns = st_mono_ns();
    int rc = st_loop_fsync(s->loop, &op->io, fd, true);
    if (rc) {
        free(op);
        return rc;
    }
    s->syncs_in_flight++;
    return 0;
}

typedef struct {
    st_io_t io;
    st_kshard_t *s;
    st_sync_done_fn done;
    void *arg;
} writeback_op_t;

/* A write-out holds a reference to its file until it completes, so it counts as a sync in
 * flight: the shutdown stops the loop only once none is left (else the file outlives the
 * descriptor cache). */
static void writeback_complete(st_io_t *io, int res)
{
    writeback_op_t *op = io->data;
    op->s->syncs_in_flight--;
    op->done(op->arg, res);
    free(op);
}

/* The storage writeback hook: sync_file_range(SYNC_FILE_RANGE_WRITE) through io_uring, so a
 * segment's pages go to the disk steadily as they are appended (env.h); nothing waits on it. */
static int writeback_submit(void *ctx, int fd, int64_t off, int64_t len, st_sync_done_fn done,
                            void *arg)
{
    st_kshard_t *s = ctx;
    writeback_op_t *op = malloc(sizeof *op);
    if (!op)
        return -ENOMEM;
    op->io.cb = writeback_complete;
    op->io.data = op;
    op->s = s;
    op->done = done;
    op->arg = arg;
    s->syncs_in_flight++; /* before: a completion may run inside the call */
    int rc = st_loop_writeback(s->loop, &op->io, fd, (uint64_t)off, (uint64_t)len);
    if (rc) {
        s->syncs_in_flight--;
        free(op);
    }
    return rc;
}

/* The partitions' wake-up of waiting fetches (st_parts_config_t.wake). */
static void wake_fetches(void *arg, int waiter, const uint8_t topic_id[16], int32_t index)
{
    st_kshard_t *s = arg;
    s->b->hooks->wake_fetches(s, waiter, topic_id, index);
}

static void kshard_tick(st_timer_t *t)
{
    st_kshard_t *s = t->data;
    st_kshard_stalled(s); /* a freeze is noticed before the tick forgets it */
    s->last_tick_ms = st_mono_ms();
    st_parts_tick(&s->parts);
    if (s->net)
        st_net_admission_retry(s->net); /* max.connections: a slot freed on another shard */
    if (s->b->hooks->shard_tick)
        s->b->hooks->shard_tick(s);
    if (s->b->tick_hook)
        s->b->tick_hook(s->b->tick_hook_arg, s);
    st_loop_timer_start(s->loop, &s->tick_timer, 100);
}

/* Opens the partitions this shard owns (recovering them if needed). */
static int kshard_open_partitions(st_kshard_t *s)
{
    const st_md_t *md = s->md;
    int64_t t0 = st_mono_ms();
    int n = 0, offline = 0;
    for (int i = 0; i < md->ntopics; i++) {
        const st_md_topic_t *t = md->topics[i];
        for (int32_t p = 0; p < t->npartitions; p++) {
            if (t->partitions[p].shard != s->id)
                continue;
            st_part_t *part;
            st_log_config_t lc;
            s->b->hooks->topic_log_config(s->b->cfg, md, t, &lc);
            if (st_parts_open(&s->parts, t->name, t->id, p, &lc, &part) != 0)
                offline++;
            n++;
        }
    }
    if (n)
        ST_INFO("opened %d partition(s) in %lld ms", n, (long long)(st_mono_ms() - t0));
    if (offline)
        ST_ERROR("%d partition(s) offline (see above): requests for them get "
                 "KAFKA_STORAGE_ERROR; the others are served",
                 offline);
    return 0;
}

static void pin_thread(int shard)
{
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return;
    int n = CPU_COUNT(&allowed);
    if (n <= 0)
        return;
    int want = shard % n, k = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        if (k++ == want) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
}

static void start_signal(st_broker_t *b, bool ok)
{
    pthread_mutex_lock(&start_mu);
    if (ok)
        atomic_fetch_add(&b->started, 1);
    else
        atomic_fetch_add(&b->failed, 1);
    pthread_cond_broadcast(&start_cv);
    pthread_mutex_unlock(&start_mu);
    if (atomic_load(&b->started) == b->nshards)
        st_loop_wake(b->shards[0]->loop); /* it may adopt the quorum's state now */
}

static void *kshard_main(void *arg)
{
    st_kshard_t *s = arg;
    st_broker_t *b = s->b;
    st_log_set_shard(s->id);
    st_kshard_set_current(s);
    pin_thread(s->id);
    int rc = st_loop_create(&s->loop, 4096);
    if (rc) {
        ST_ERROR("cannot create the event loop (io_uring): %s", st_strerror(rc));
        start_signal(b, false);
        return NULL;
    }
    if (s->id == 0)
        ST_INFO("event loops on %s", st_loop_backend(s->loop));
    st_mesh_attach(b->mesh, s->id, s->loop);
    st_loop_add_before_sleep(s->loop, kshard_before_sleep, s);
    st_storage_env_init(&s->env, b->fs, b->fds_per_shard);
    s->env.sync_submit = sync_submit;
    s->env.sync_ctx = s;
    s->env.writeback_submit = writeback_submit;
    s->env.writeback_ctx = s;
    const st_config_t *cfg = b->cfg;
    /* opening and closing many partitions defer their syncs to one syncfs where it holds
     * (storage/env.h); elsewhere (a FUSE mount, NFS) each sync is made as before */
    s->env.defer_ok = b->fs.ops == st_fs_posix().ops && st_fs_syncfs_durable(cfg->log_dirs);
    if (s->id == 0)
        ST_INFO("%s: partitions opened and closed in batches %s", cfg->log_dirs,
                s->env.defer_ok ? "under one syncfs each"
                                : "with their own syncs (syncfs is not known to hold here)");
    if (cfg->log_journal_bytes > 0) {
        st_journal_t *j;
        rc = st_journal_open(&s->env, cfg->log_dirs, s->id, cfg->log_journal_bytes, &j);
        if (rc)
            ST_WARN("this shard runs without a journal: %s", st_strerror(rc));
        else {
            st_journal_set_deferred(j, true); /* kshard_before_sleep runs its rounds */
            st_journal_set_min_fanout(j, (int)cfg->log_journal_min_partitions);
        }
    }
    st_parts_config_t pc = {
        .log_dirs = cfg->log_dirs,
        .nshards = b->nshards,
        .producer_ids_max = cfg->producer_ids_max_per_partition,
        .producer_id_expiration_ms = cfg->producer_id_expiration_ms,
        .cleaner_enable = cfg->log_cleaner_enable,
        .cleaner_threads = cfg->log_cleaner_threads,
        .cleaner_io_max_bytes_per_second = cfg->log_cleaner_io_max_bytes_per_second,
        .cleaner_dedupe_buffer_size = cfg->log_cleaner_dedupe_buffer_size,
        .wake = wake_fetches,
        .wake_arg = s,
    };
    st_parts_init(&s->parts, s->loop, &s->env, &pc);
    rc = kshard_open_partitions(s);
    if (rc) {
        ST_ERROR("cannot open this shard's partitions: %s", st_strerror(rc));
        start_signal(b, false);
        return NULL;
    }
    rc = b->hooks->shard_start(s);
    if (rc) {
        ST_ERROR("cannot start the shard's services (group coordinator): %s", st_strerror(rc));
        start_signal(b, false);
        return NULL;
    }
    st_timer_init(&s->tick_timer, kshard_tick, s);
    st_loop_timer_start(s->loop, &s->tick_timer, 100);
    st_net_handler_t h = {kshard_on_frame, kshard_on_close, s};
    int64_t queued = b->cfg->queued_max_request_bytes; /* the shard's even share */
    st_net_limits_t lim = {
        (size_t)b->cfg->socket_request_max_bytes, (size_t)b->cfg->connection_max_inflight_bytes,
        queued > 0 ? (size_t)(queued / b->nshards > 0 ? queued / b->nshards : 1) : 0};
    st_net_port_t ports[ST_CONFIG_MAX_LISTENERS];
    for (int l = 0; l < b->nlisteners; l++)
        ports[l] = (st_net_port_t){b->listen_fds[s->id * b->nlisteners + l], &b->listeners[l],
                                   b->tls[l] ? st_tls_transport_new : NULL, b->tls[l]};
    rc = st_net_create(&s->net, s->loop, ports, b->nlisteners, &h, &lim);
    if (rc) {
        ST_ERROR("cannot start the listeners: %s", st_strerror(rc));
        start_signal(b, false);
        return NULL;
    }
    st_net_set_admission(s->net, &(st_net_admission_t){kshard_on_accept, kshard_on_release});
    for (int l = 0; l < b->nlisteners; l++)
        b->listen_fds[s->id * b->nlisteners + l] = -1; /* the net owns them now */
    if (b->tick_hook)
        b->tick_hook(b->tick_hook_arg, s);
    start_signal(b, true);
    rc = st_loop_run(s->loop);
    if (rc)
        ST_ERROR("event loop failed: %s", st_strerror(rc));
    st_net_destroy(s->net);
    s->net = NULL;
    if (s->parts.buckets)
        st_parts_fini(&s->parts);
    st_broker_adopt_fini(s);
    if (s->env.journal)
        st_journal_close(s->env.journal);
    b->hooks->shard_fini(s);
    st_storage_env_fini(&s->env);
    /* The loop itself is destroyed once every shard thread has ended (st_broker_destroy):
     * another shard may still wake it during the last steps of a shutdown. */
    return NULL;
}

int st_broker_start(st_broker_t *b)
{
    for (int i = 0; i < b->nshards; i++) {
        int rc = pthread_create(&b->shards[i]->thread, NULL, kshard_main, b->shards[i]);
        if (rc)
            return -rc;
    }
    pthread_mutex_lock(&start_mu);
    while (atomic_load(&b->started) + atomic_load(&b->failed) < b->nshards)
        pthread_cond_wait(&start_cv, &start_mu);
    pthread_mutex_unlock(&start_mu);
    return atomic_load(&b->failed) ? ST_E_CONFIG : 0;
}

void st_broker_stop(st_broker_t *b)
{
    /* The quorum stops first, while the shards still serve: a leader hands over, and the ops
     * in flight are answered (cluster/quorum.h). */
    if (b->quorum && !atomic_exchange(&b->quorum_stopped, 1)) {
        st_quorum_stop(b->quorum);
        if (b->hooks->replication_stop)
            b->hooks->replication_stop(b);
        st_loop_wake(b->shards[0]->loop);
    }
    atomic_store_explicit(&b->stopping, 1, memory_order_release);
    for (int i = 0; i < b->nshards; i++)
        if (b->shards[i]->loop)
            st_loop_wake(b->shards[i]->loop);
}

/* Quorum thread: a new state for shard 0 (only the latest matters). Under start_mu, so that
 * st_broker_create may read it while it waits for this broker's registration. */
static void quorum_publish(void *arg, st_md_t *md)
{
    st_broker_t *b = arg;
    pthread_mutex_lock(&start_mu);
    st_md_unref(atomic_exchange(&b->quorum_md, md));
    pthread_cond_broadcast(&start_cv);
    pthread_mutex_unlock(&start_mu);
    st_loop_t *l = __atomic_load_n(&b->shards[0]->loop, __ATOMIC_ACQUIRE);
    if (l) /* else shard 0 takes it in its loop's first round */
        st_loop_wake(l);
}

static void quorum_hint(void *arg, const char *name)
{
    st_broker_t *b = arg;
    b->hooks->hint_create(b, name);
}

/* Quorum thread: the records of an upgrade (cluster/legacy.h), once. */
static json_t *quorum_seed(void *arg)
{
    st_broker_t *b = arg;
    return atomic_exchange(&b->quorum_seed, NULL);
}

/* Whether md shows this broker registered at this incarnation and unfenced: it has caught up
 * (kafka/h_metadata.c st_kmetadata_ready asks the same). */
static bool registered(const st_md_t *md, int32_t node)
{
    const st_md_broker_t *me = st_md_self(md, node);
    return me && !me->fenced;
}

#define ST_REGISTER_WAIT_MS 30000

/*
 * Joins the metadata quorum (cluster/quorum.h). On the quorum's only voter (a single broker)
 * its log is the whole metadata as soon as it started, and it commits alone, so the shards
 * start from it as they would from a file: this waits (bounded) until the broker is
 * registered, then upgrades what an earlier release left (strata-metadata.json, legacy.h) and
 * sweeps the data directory with it. A cluster member starts with no partition known and
 * adopts the states the quorum publishes (shard 0) as they come.
 */
static int broker_start_quorum(st_broker_t *b, char *err, size_t errlen)
{
    const st_config_t *cfg = b->cfg;
    int32_t node = (int32_t)cfg->node_id;
    json_t *seed = NULL;
    int ntopics = 0;
    int rc = st_legacy_read(&b->fs, cfg->log_dirs, node, &seed, &ntopics, err, errlen);
    if (rc)
        return rc;
    atomic_store(&b->quorum_seed, seed);
    st_quorum_hooks_t h = {
        .publish = quorum_publish, .hint_create = quorum_hint, .seed = quorum_seed, .arg = b};
    st_quorum_t *q;
    rc = st_quorum_start(&q, cfg, b->cluster_id, b->listen_port, &h, err, errlen);
    if (rc)
        return rc;
    __atomic_store_n(&b->quorum, q, __ATOMIC_RELEASE); /* the admin thread reads it */
    if (!st_quorum_alone(q)) {
        if (seed)
            ST_WARN("%s/%s is ignored: this node is a member of a cluster's quorum", cfg->log_dirs,
                    ST_LEGACY_FILE);
        b->start_md = st_md_new(b->cluster_id, node);
        if (!b->start_md ||
            st_md_add_broker(b->start_md, node, cfg->advertised_host,
                             cfg->advertised_port ? cfg->advertised_port : b->listen_port))
            return -ENOMEM;
        return 0;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ST_REGISTER_WAIT_MS / 1000;
    pthread_mutex_lock(&start_mu);
    st_md_t *md = atomic_load(&b->quorum_md);
    while (!registered(md, node)) {
        if (pthread_cond_timedwait(&start_cv, &start_mu, &until)) {
            md = atomic_load(&b->quorum_md);
            break;
        }
        md = atomic_load(&b->quorum_md);
    }
    bool ok = registered(md, node);
    b->start_md = ok ? st_md_clone(md) : NULL;
    pthread_mutex_unlock(&start_mu);
    if (!ok) {
        snprintf(err, errlen, "the metadata quorum did not register this broker within %d s",
                 ST_REGISTER_WAIT_MS / 1000);
        return ST_E_CONFIG;
    }
    if (!b->start_md)
        return -ENOMEM;
    st_md_assign_shards(b->start_md, b->nshards);
    if (seed && atomic_load(&b->quorum_seed) == NULL)
        ST_INFO("upgraded %s/%s into the metadata log (%d topic(s))", cfg->log_dirs, ST_LEGACY_FILE,
                ntopics);
    if (st_legacy_present(&b->fs, cfg->log_dirs)) {
        rc = st_legacy_retire(&b->fs, cfg->log_dirs);
        if (rc) {
            snprintf(err, errlen, "cannot rename %s/%s aside: %s", cfg->log_dirs, ST_LEGACY_FILE,
                     st_strerror(rc));
            return rc;
        }
    }
    broker_sweep_data_dir(b->start_md, cfg->log_dirs);
    return 0;
}

int st_broker_start_replication(st_broker_t *b, char *err, size_t errlen)
{
    if (b->hooks->replication_start)
        return b->hooks->replication_start(b, err, errlen);
    return 0;
}

void st_broker_join(st_broker_t *b)
{
    for (int i = 0; i < b->nshards; i++)
        pthread_join(b->shards[i]->thread, NULL);
}
