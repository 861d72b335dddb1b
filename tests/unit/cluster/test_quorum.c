/*
 * Unit test of the metadata quorum (cluster/quorum.h): three quorums in one process, each a
 * voter with its own log directory, talking real libraft over loopback ports and heartbeating
 * over UDP. A leader is elected and all three agree on it; a change submitted to it commits and
 * is published on all three; the leader is stopped and the other two elect a new one; a change
 * submitted then commits and is published on both. Every wait is bounded and waits on the
 * condition (published states, the quorum's own info), never on a sleep.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "cluster/config.h"
#include "cluster/metadata.h"
#include "cluster/quorum.h"
#include "cluster/records.h"

#define N       3
#define WAIT_MS 30000 /* a cold quorum under sanitizers on two shared cores */

typedef struct node {
    int id;
    st_config_t cfg;
    char dir[256];
    st_quorum_t *q;
    st_md_t *md; /* the last published state (mu) */
    int publishes;
} node_t;

static node_t nodes[N];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void on_publish(void *arg, st_md_t *md)
{
    node_t *n = arg;
    pthread_mutex_lock(&mu);
    st_md_unref(n->md);
    n->md = md;
    n->publishes++;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Waits on cv (mu held) for at most 50 ms: callers loop on their condition until a deadline. */
static void wait_a_little(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&cv, &mu, &ts);
}

/* A TCP and UDP port free on loopback now. */
static int free_port(void)
{
    for (int tries = 0; tries < 100; tries++) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
        socklen_t sl = sizeof sa;
        getsockname(s, (struct sockaddr *)&sa, &sl);
        close(s);
        int u = socket(AF_INET, SOCK_DGRAM, 0);
        int ok = bind(u, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(u);
        if (ok)
            return ntohs(sa.sin_port);
    }
    fail_msg("no free port");
    return -1;
}

static void set(st_config_t *c, const char *key, const char *value)
{
    char err[256];
    if (st_config_set(c, key, value, err, sizeof err))
        fail_msg("%s=%s: %s", key, value, err);
}

static void start_node(node_t *n, const char *voters, int kport, int cport)
{
    char v[64], l[160];
    assert_int_equal(st_config_init(&n->cfg), 0);
    snprintf(v, sizeof v, "%d", n->id);
    set(&n->cfg, "node.id", v);
    set(&n->cfg, "process.roles", "broker,controller");
    set(&n->cfg, "controller.quorum.voters", voters);
    snprintf(l, sizeof l, "PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", kport, cport);
    set(&n->cfg, "listeners", l);
    set(&n->cfg, "log.dirs", n->dir);
    set(&n->cfg, "controller.quorum.election.timeout.ms", "500");
    set(&n->cfg, "broker.heartbeat.interval.ms", "100");
    char err[256];
    if (st_config_finish(&n->cfg, err, sizeof err))
        fail_msg("config: %s", err);
    st_quorum_hooks_t hooks = {.publish = on_publish, .arg = n};
    if (st_quorum_start(&n->q, &n->cfg, "test-cluster-id", kport, &hooks, err, sizeof err))
        fail_msg("node %d: %s", n->id, err);
}

/* The leader every running node's quorum agrees on (-1 until they do), within WAIT_MS. */
static int32_t agreed_leader(bool running[N], int32_t not )
{
    int64_t end = st_mono_ms() + WAIT_MS;
    pthread_mutex_lock(&mu);
    for (;;) {
        int32_t leader = -1;
        bool agree = true;
        for (int i = 0; i < N; i++) {
            if (!running[i])
                continue;
            st_quorum_info_t info;
            st_quorum_info(nodes[i].q, &info);
            if (info.leader < 0 || info.leader == not || (leader >= 0 && info.leader != leader))
                agree = false;
            leader = info.leader;
        }
        if (agree && leader > 0) {
            pthread_mutex_unlock(&mu);
            return leader;
        }
        if (st_mono_ms() >= end)
            break;
        wait_a_little();
    }
    pthread_mutex_unlock(&mu);
    fail_msg("the nodes agree on no leader");
    return -1;
}

/* ---- a change: creating topic `name` ---- */

typedef struct change {
    st_quorum_req_t req;
    const char *name;
    int status; /* 1 while in flight */
} change_t;

static int propose_topic(st_quorum_req_t *req, const st_md_t *state, json_t *records)
{
    change_t *c = req->arg;
    if (st_md_find(state, c->name, (int32_t)strlen(c->name)))
        return ST_E_EXISTS;
    uint8_t id[16];
    memset(id, 0, sizeof id);
    memcpy(id, c->name, strlen(c->name) < 16 ? strlen(c->name) : 16);
    st_md_topic_t *t = st_md_topic_new(c->name, id, 1);
    if (!t)
        return -ENOMEM;
    json_array_append_new(records, st_rec_topic(t));
    st_md_topic_free(t);
    return 0;
}

static void change_done(st_quorum_req_t *req, int status)
{
    change_t *c = req->arg;
    pthread_mutex_lock(&mu);
    c->status = status;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Submits the creation of `name` to the leader's quorum until it commits (a new leader may
 * still be settling: ST_E_NOT_LEADER / ST_E_AGAIN are tried again), within WAIT_MS. */
static void commit_topic(bool running[N], int32_t not, const char *name)
{
    int64_t end = st_mono_ms() + WAIT_MS;
    for (int tries = 0; st_mono_ms() < end && tries < 1000; tries++) {
        int32_t leader = agreed_leader(running, not );
        change_t c = {.req = {.propose = propose_topic, .done = change_done}, .name = name};
        c.req.arg = &c;
        c.status = 1;
        st_quorum_submit(nodes[leader - 1].q, &c.req);
        pthread_mutex_lock(&mu);
        while (c.status == 1 && st_mono_ms() < end)
            wait_a_little();
        int status = c.status;
        pthread_mutex_unlock(&mu);
        if (status == 0) {
            assert_true(c.req.index > 0);
            return;
        }
        if (status == 1)
            fail_msg("the change of %s was never answered", name);
        if (status != ST_E_NOT_LEADER && status != ST_E_AGAIN)
            fail_msg("the change of %s failed: %s", name, st_strerror(status));
        /* the leader changed under it: look again */
    }
    fail_msg("the change of %s did not commit in time", name);
}

/* Waits until every running node published a state holding topic `name` and naming `leader`
 * as the controller. */
static void wait_published(bool running[N], const char *name, int32_t leader)
{
    int64_t end = st_mono_ms() + WAIT_MS;
    pthread_mutex_lock(&mu);
    for (;;) {
        bool all = true;
        for (int i = 0; i < N; i++) {
            if (!running[i])
                continue;
            st_md_t *md = nodes[i].md;
            if (!md || md->controller_id != leader ||
                !st_md_find(md, name, (int32_t)strlen(name)) ||
                strcmp(md->cluster_id, "test-cluster-id") != 0)
                all = false;
        }
        if (all)
            break;
        if (st_mono_ms() >= end) {
            pthread_mutex_unlock(&mu);
            fail_msg("%s was not published on every node", name);
        }
        wait_a_little();
    }
    pthread_mutex_unlock(&mu);
}

static void rm_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_three_voters(void **state)
{
    (void)state;
    int kport[N], cport[N];
    char voters[256] = "";
    for (int i = 0; i < N; i++) {
        kport[i] = free_port();
        cport[i] = free_port();
        char v[64];
        snprintf(v, sizeof v, "%s%d@127.0.0.1:%d", i ? "," : "", i + 1, cport[i]);
        strcat(voters, v);
    }
    char tmpl[] = "/tmp/strata-test-quorum-XXXXXX";
    char *root = mkdtemp(tmpl);
    assert_non_null(root);
    bool running[N];
    for (int i = 0; i < N; i++) {
        nodes[i].id = i + 1;
        snprintf(nodes[i].dir, sizeof nodes[i].dir, "%s/n%d", root, i + 1);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", nodes[i].dir);
        assert_int_equal(system(cmd), 0);
    }
    for (int i = 0; i < N; i++) {
        start_node(&nodes[i], voters, kport[i], cport[i]);
        running[i] = true;
    }

    /* A leader, the same on all three; a change committed there is published everywhere. */
    int32_t leader = agreed_leader(running, -1);
    commit_topic(running, -1, "first");
    leader = agreed_leader(running, -1);
    wait_published(running, "first", leader);

    /* The leader stops (handing over, or not: the others elect one either way). */
    st_quorum_stop(nodes[leader - 1].q);
    running[leader - 1] = false;
    int32_t next = agreed_leader(running, leader);
    assert_int_not_equal(next, leader);
    commit_topic(running, leader, "second");
    next = agreed_leader(running, leader);
    wait_published(running, "second", next);
    for (int i = 0; i < N; i++) {
        if (!running[i])
            continue;
        pthread_mutex_lock(&mu);
        assert_non_null(st_md_find(nodes[i].md, "first", 5));
        pthread_mutex_unlock(&mu);
    }

    for (int i = 0; i < N; i++) {
        st_quorum_destroy(nodes[i].q);
        st_md_unref(nodes[i].md);
        nodes[i].md = NULL;
        st_config_fini(&nodes[i].cfg);
    }
    rm_tree(root);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the server: a peer gone shows as EPIPE, not a signal */
    st_log_set_level(ST_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_voters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
