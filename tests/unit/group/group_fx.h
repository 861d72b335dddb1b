/*
 * group_fx.h — the fixture the group coordinator's tests share: a real event loop and a real
 * __consumer_offsets partition log in a temporary directory, syncs that can be held to keep
 * writes in flight, restarts that rebuild the coordinator from the log, the log cleaner run
 * as the broker runs it, and helpers for requests (join, sync, heartbeat, commit, fetch).
 */
#ifndef ST_TEST_GROUP_FX_H
#define ST_TEST_GROUP_FX_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/clock.h"
#include "base/err.h"
#include "group/coord.h"
#include "group/records.h"
#include "proto/kerr.h"
#include "storage/batch.h"
#include "storage/fs.h"

/* ---- fixture ---- */

typedef struct {
    char dir[256];
    st_loop_t *loop;
    st_storage_env_t env;
    st_log_config_t lc; /* of the coordinator's log, at every open */
    st_log_t *log;
    st_gcoord_t *c;
    st_gcoord_config_t cfg;
    st_arena_t a;
    int32_t session_ms; /* of the members join() adds */
    int64_t clock_skew; /* added to the log's clock (the cleaner's tombstone horizon) */
    bool hold_syncs;    /* syncs wait in `held` until fx_release_syncs() */
    int nheld;
    st_sync_done_fn held_done[16];
    void *held_arg[16];
} fx_t;

static inline int64_t fx_now(void *ctx)
{
    return st_wall_ms() + ((fx_t *)ctx)->clock_skew;
}

static inline int fx_sync_submit(void *ctx, int fd, st_sync_done_fn done, void *arg)
{
    fx_t *f = ctx;
    if (!f->hold_syncs)
        return st_storage_sync_inline(&f->env, fd, done, arg);
    assert_true(f->nheld < 16);
    f->held_done[f->nheld] = done;
    f->held_arg[f->nheld++] = arg;
    return 0;
}

/* Completes the held syncs (and those their completions submit), and stops holding. */
static inline void fx_release_syncs(fx_t *f)
{
    f->hold_syncs = false;
    while (f->nheld > 0) {
        st_sync_done_fn done = f->held_done[0];
        void *arg = f->held_arg[0];
        f->nheld--;
        memmove(f->held_done, f->held_done + 1, (size_t)f->nheld * sizeof *f->held_done);
        memmove(f->held_arg, f->held_arg + 1, (size_t)f->nheld * sizeof *f->held_arg);
        done(arg, 0);
    }
}

static inline void fx_open_log(fx_t *f)
{
    char d[300];
    snprintf(d, sizeof d, "%s/__consumer_offsets-0", f->dir);
    assert_int_equal(st_log_open(&f->env, d, &f->lc, &f->log), 0);
}

static inline void fx_coord(fx_t *f)
{
    assert_int_equal(st_gcoord_create(&f->c, f->loop, &f->cfg), 0);
    assert_int_equal(st_gcoord_load(f->c, 0, f->log, 0), 0);
}

static inline int fx_setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/st-group-test-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(st_loop_create(&f->loop, 256), 0);
    st_storage_env_init(&f->env, st_fs_posix(), 64);
    f->env.now_ms = fx_now;
    f->env.now_ctx = f;
    f->env.sync_submit = fx_sync_submit;
    f->env.sync_ctx = f;
    f->cfg = (st_gcoord_config_t){.min_session_timeout_ms = 10,
                                  .max_session_timeout_ms = 60000,
                                  .initial_rebalance_delay_ms = 0,
                                  .offsets_retention_ms = 7 * 24 * 3600 * 1000LL,
                                  .expire_check_ms = 60000,
                                  .num_partitions = 1};
    f->session_ms = 200;
    st_log_config_default(&f->lc);
    f->lc.retention_ms = -1;
    st_arena_init(&f->a, 4096);
    fx_open_log(f);
    fx_coord(f);
    *state = f;
    return 0;
}

static inline void fx_close_all(fx_t *f)
{
    st_gcoord_drain(f->c);
    st_log_close(f->log);
    st_gcoord_destroy(f->c);
    f->c = NULL;
    f->log = NULL;
}

/* Closes and reopens the log and rebuilds a coordinator from it (a restart). */
static inline void fx_restart(fx_t *f)
{
    fx_close_all(f);
    fx_open_log(f);
    fx_coord(f);
}

/* Makes the coordinator's log compacted as __consumer_offsets is: segments of seg bytes, and
 * a clean whenever anything is dirty. */
static inline void fx_compacted(fx_t *f, int64_t seg, int64_t delete_retention_ms)
{
    f->lc.segment_bytes = seg;
    f->lc.compact = true;
    f->lc.retention_deletes = false;
    f->lc.min_cleanable_dirty_ratio = 0;
    f->lc.delete_retention_ms = delete_retention_ms;
    assert_int_equal(st_log_set_config(f->log, &f->lc), 0);
}

/* What the broker's shards do in slices: rolls the active segment, then runs the cleaner
 * until it has nothing left to do. */
static inline void fx_clean(fx_t *f)
{
    assert_int_equal(st_log_roll(f->log), 0);
    st_log_clean_opts_t o = {.budget_bytes = 4096, .map_bytes = 1 << 20};
    int64_t rc;
    int steps = 0;
    while ((rc = st_log_clean_step(f->log, &o)) > 0)
        assert_true(++steps < 1000000);
    assert_int_equal(rc, 0);
}

static inline int fx_teardown(void **state)
{
    fx_t *f = *state;
    if (f->c)
        fx_close_all(f);
    st_arena_fini(&f->a);
    st_storage_env_fini(&f->env);
    st_loop_destroy(f->loop);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* Runs the loop until *flag is set or ms pass; returns whether the flag was set. */
typedef struct {
    st_loop_t *loop;
    volatile int *flag;
    int64_t deadline;
    st_timer_t t;
} spin_t;

static inline void spin_tick(st_timer_t *t)
{
    spin_t *s = t->data;
    if (*s->flag || st_mono_ms() >= s->deadline) {
        st_loop_stop(s->loop);
        return;
    }
    st_loop_timer_start(s->loop, &s->t, 2);
}

static inline bool run_until(fx_t *f, volatile int *flag, int64_t ms)
{
    spin_t s = {f->loop, flag, st_mono_ms() + ms, {0}};
    st_timer_init(&s.t, spin_tick, &s);
    st_loop_timer_start(f->loop, &s.t, 0);
    st_loop_run(f->loop);
    st_loop_timer_stop(f->loop, &s.t);
    return *flag != 0;
}

/* ---- request helpers ---- */

typedef struct {
    st_kp_join_group_resp_t resp;
    int done;
} join_t;

static inline void on_done(void *arg)
{
    (*(int *)arg)++;
}

static st_kp_join_group_req_protocol_t protos_range[] = {
    {{"range", 5}, {(const uint8_t *)"\x00\x01", 2}},
    {{"roundrobin", 10}, {(const uint8_t *)"\x00\x02", 2}},
};

static inline void join(fx_t *f, join_t *j, const char *group, const char *member,
                        const char *instance, int16_t version)
{
    st_kp_join_group_req_t req;
    st_kp_join_group_req_init(&req);
    req.group_id = st_kstr(group);
    req.session_timeout_ms = f->session_ms;
    req.rebalance_timeout_ms = 300;
    req.member_id = st_kstr(member ? member : "");
    req.group_instance_id = st_kstr(instance);
    req.protocol_type = st_kstr("consumer");
    req.protocols = protos_range;
    req.protocols_count = 2;
    memset(j, 0, sizeof *j);
    st_kp_join_group_resp_init(&j->resp);
    st_gcoord_join(f->c, 0, &req, version, st_kstr("client"), st_kstr("/127.0.0.1"), &f->a,
                   &j->resp, on_done, &j->done);
}

/* A dynamic member through MEMBER_ID_REQUIRED; returns its id (arena memory). */
static inline char *join_dynamic(fx_t *f, join_t *j, const char *group)
{
    join(f, j, group, NULL, NULL, 5);
    assert_int_equal(j->done, 1);
    assert_int_equal(j->resp.error_code, ST_KERR_MEMBER_ID_REQUIRED);
    char *id = st_arena_strndup(&f->a, j->resp.member_id.ptr, (size_t)j->resp.member_id.len);
    join(f, j, group, id, NULL, 5);
    return id;
}

typedef struct {
    st_kp_sync_group_resp_t resp;
    int done;
} sync_t;

static inline void sync_req(fx_t *f, sync_t *s, const char *group, const char *member, int32_t gen,
                            int nassign, const char **ids, const char **assign)
{
    st_kp_sync_group_req_assignment_t as[8];
    for (int i = 0; i < nassign; i++)
        as[i] = (st_kp_sync_group_req_assignment_t){
            st_kstr(ids[i]), {(const uint8_t *)assign[i], (int32_t)strlen(assign[i])}};
    st_kp_sync_group_req_t req;
    st_kp_sync_group_req_init(&req);
    req.group_id = st_kstr(group);
    req.member_id = st_kstr(member);
    req.generation_id = gen;
    req.assignments = as;
    req.assignments_count = nassign;
    memset(s, 0, sizeof *s);
    st_kp_sync_group_resp_init(&s->resp);
    st_gcoord_sync(f->c, 0, &req, 5, &f->a, &s->resp, on_done, &s->done);
}

static inline int16_t heartbeat(fx_t *f, const char *group, const char *member, int32_t gen,
                                const char *instance)
{
    st_kp_heartbeat_req_t req;
    st_kp_heartbeat_req_init(&req);
    req.group_id = st_kstr(group);
    req.member_id = st_kstr(member);
    req.generation_id = gen;
    req.group_instance_id = st_kstr(instance);
    st_kp_heartbeat_resp_t resp;
    st_kp_heartbeat_resp_init(&resp);
    st_gcoord_heartbeat(f->c, 0, &req, &resp);
    return resp.error_code;
}

static inline bool bytes_eq(st_kbytes_t b, const char *s)
{
    return b.len == (int32_t)strlen(s) && memcmp(b.ptr, s, (size_t)b.len) == 0;
}

/* Commits one offset and waits for the answer; returns the partition's error. */
static inline int16_t commit_one(fx_t *f, st_kstr_t group, st_kstr_t member, int32_t gen,
                                 st_kstr_t topic, int32_t part, int64_t offset, int32_t epoch,
                                 st_kstr_t metadata)
{
    st_goffset_t p = {.topic = topic,
                      .partition = part,
                      .offset = offset,
                      .leader_epoch = epoch,
                      .metadata = metadata};
    st_goffsets_t o = {.group_id = group,
                       .member_id = member,
                       .group_instance_id = ST_KSTR_NULL,
                       .generation = gen,
                       .n = 1,
                       .parts = &p};
    int done = 0;
    st_gcoord_commit(f->c, 0, &o, on_done, &done);
    if (!done)
        run_until(f, &done, 5000);
    assert_int_equal(done, 1);
    return p.error;
}

static inline int16_t commit1(fx_t *f, const char *group, const char *member, int32_t gen,
                              const char *topic, int32_t part, int64_t offset, const char *metadata)
{
    return commit_one(f, st_kstr(group), st_kstr(member ? member : ""), gen, st_kstr(topic), part,
                      offset, 3, st_kstr(metadata));
}

static inline int64_t fetch1(fx_t *f, const char *group, const char *topic, int32_t part, char *md,
                             size_t mdlen)
{
    st_goffset_t p = {.topic = st_kstr(topic), .partition = part};
    st_goffsets_t o = {.group_id = st_kstr(group), .n = 1, .parts = &p};
    st_gcoord_fetch(f->c, 0, &o, &f->a);
    assert_int_equal(o.error, 0);
    if (md)
        snprintf(md, mdlen, "%.*s", p.metadata.len > 0 ? p.metadata.len : 0,
                 p.metadata.len > 0 ? p.metadata.ptr : "");
    return p.offset;
}

#endif
