/*
 * test_coord.c — the transaction coordinator (txn/coord.h) against a real event loop and a
 * real __transaction_state log in a temporary directory: the records against bytes laid out
 * as Kafka's TransactionLogKey/Value, the partition hash, every transition and each refusal
 * Kafka's TransactionCoordinator makes, answers only once durable, the markers handed to the
 * sender and the completion after them, loading a log holding every state (and a compacted
 * one) with the markers of Prepare* sent again, the timeout abort that fences the producer,
 * and the expiry of idle ids with a tombstone.
 */
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
#include "txn/coord.h"
#include "txn/records.h"

#define MAX_TIMEOUT 900000

/* ---- fixture ---- */

typedef struct {
    uint64_t id;
    int32_t coordinator_epoch;
    int64_t pid;
    int16_t epoch;
    bool commit;
    int n;
    char parts[8][64];
} job_t;

typedef struct {
    char dir[256];
    st_loop_t *loop;
    st_storage_env_t env;
    st_log_config_t lc;
    st_log_t *log;
    st_tcoord_t *c;
    st_tcoord_config_t cfg;
    st_arena_t a;
    int64_t now;
    int64_t next_pid;
    int32_t epoch; /* the coordinator epoch it is loaded at */
    int njobs;
    job_t jobs[16];
    bool hold_syncs;
    int nheld;
    st_sync_done_fn held_done[16];
    void *held_arg[16];
} fx_t;

static int64_t fx_now(void *ctx)
{
    return ((fx_t *)ctx)->now;
}

static int64_t fx_pid(void *ctx)
{
    return ((fx_t *)ctx)->next_pid++;
}

static void fx_markers(void *ctx, const st_tmarkers_t *m)
{
    fx_t *f = ctx;
    assert_true(f->njobs < 16);
    job_t *j = &f->jobs[f->njobs++];
    j->id = m->id;
    j->coordinator_epoch = m->coordinator_epoch;
    j->pid = m->producer_id;
    j->epoch = m->producer_epoch;
    j->commit = m->commit;
    j->n = m->n;
    for (int i = 0; i < m->n && i < 8; i++)
        snprintf(j->parts[i], sizeof j->parts[i], "%.*s-%d", (int)m->parts[i].topic.len,
                 m->parts[i].topic.ptr, m->parts[i].partition);
}

static int fx_sync_submit(void *ctx, int fd, st_sync_done_fn done, void *arg)
{
    fx_t *f = ctx;
    if (!f->hold_syncs)
        return st_storage_sync_inline(&f->env, fd, done, arg);
    assert_true(f->nheld < 16);
    f->held_done[f->nheld] = done;
    f->held_arg[f->nheld++] = arg;
    return 0;
}

static void fx_release_syncs(fx_t *f)
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

static void fx_open_log(fx_t *f)
{
    char d[300];
    snprintf(d, sizeof d, "%s/__transaction_state-0", f->dir);
    assert_int_equal(st_log_open(&f->env, d, &f->lc, &f->log), 0);
}

static void fx_coord(fx_t *f)
{
    assert_int_equal(st_tcoord_create(&f->c, f->loop, &f->cfg), 0);
    assert_int_equal(st_tcoord_load(f->c, 0, f->log, f->epoch), 0);
}

static int fx_setup(void **state)
{
    fx_t *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/st-txn-test-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(st_loop_create(&f->loop, 256), 0);
    st_storage_env_init(&f->env, st_fs_posix(), 64);
    f->env.sync_submit = fx_sync_submit;
    f->env.sync_ctx = f;
    f->now = 1700000000000;
    f->next_pid = 1000;
    f->epoch = 7;
    f->cfg = (st_tcoord_config_t){.num_partitions = 1,
                                  .max_timeout_ms = MAX_TIMEOUT,
                                  .id_expiration_ms = 604800000,
                                  .abort_interval_ms = 10000,
                                  .expire_interval_ms = 3600000,
                                  .next_pid = fx_pid,
                                  .send_markers = fx_markers,
                                  .now_ms = fx_now,
                                  .ctx = f};
    st_log_config_default(&f->lc);
    f->lc.retention_ms = -1;
    st_arena_init(&f->a, 4096);
    fx_open_log(f);
    fx_coord(f);
    *state = f;
    return 0;
}

static void fx_close_all(fx_t *f)
{
    st_tcoord_drain(f->c);
    st_log_close(f->log);
    st_tcoord_destroy(f->c);
    f->c = NULL;
    f->log = NULL;
}

/* A restart: the log closed and reopened, a new coordinator loads it (at a new epoch). */
static void fx_restart(fx_t *f)
{
    fx_close_all(f);
    f->njobs = 0;
    f->epoch++;
    fx_open_log(f);
    fx_coord(f);
}

static int fx_teardown(void **state)
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

typedef struct {
    st_loop_t *loop;
    volatile int *flag;
    int64_t deadline;
    st_timer_t t;
} spin_t;

static void spin_tick(st_timer_t *t)
{
    spin_t *s = t->data;
    if (*s->flag || st_mono_ms() >= s->deadline) {
        st_loop_stop(s->loop);
        return;
    }
    st_loop_timer_start(s->loop, &s->t, 2);
}

/* Runs the loop until *flag is set or ms pass; returns whether it was set. */
static bool run_until(fx_t *f, volatile int *flag, int64_t ms)
{
    if (*flag)
        return true;
    spin_t s = {f->loop, flag, st_mono_ms() + ms, {0}};
    st_timer_init(&s.t, spin_tick, &s);
    st_loop_timer_start(f->loop, &s.t, 0);
    st_loop_run(f->loop);
    st_loop_timer_stop(f->loop, &s.t);
    return *flag != 0;
}

static void on_done(void *arg)
{
    (*(int *)arg)++;
}

/* ---- request helpers (each waits for its answer) ---- */

static st_tresult_t init_pid(fx_t *f, const char *id, int32_t timeout, int64_t pid, int16_t epoch)
{
    st_tresult_t r = {0};
    int done = 0;
    st_tcoord_init_pid(f->c, 0, st_kstr(id), timeout, pid, epoch, &r, on_done, &done);
    assert_true(run_until(f, &done, 5000));
    assert_int_equal(done, 1);
    return r;
}

static int16_t add(fx_t *f, const char *id, int64_t pid, int16_t epoch, const char *topic,
                   int32_t part)
{
    st_tresult_t r = {0};
    int done = 0;
    st_ttp_t tp = {st_kstr(topic), part};
    st_tcoord_add_partitions(f->c, 0, st_kstr(id), pid, epoch, &tp, 1, &r, on_done, &done);
    assert_true(run_until(f, &done, 5000));
    assert_int_equal(done, 1);
    return r.error;
}

static st_tresult_t end(fx_t *f, const char *id, int64_t pid, int16_t epoch, bool commit,
                        int16_t tv)
{
    st_tresult_t r = {0};
    int done = 0;
    st_tcoord_end(f->c, 0, st_kstr(id), pid, epoch, commit, tv, &r, on_done, &done);
    assert_true(run_until(f, &done, 5000));
    assert_int_equal(done, 1);
    return r;
}

static st_kp_describe_transactions_resp_transaction_state_t describe(fx_t *f, const char *id)
{
    st_kp_describe_transactions_resp_transaction_state_t d;
    st_tcoord_describe(f->c, 0, st_kstr(id), &f->a, &d);
    return d;
}

static void assert_state(fx_t *f, const char *id, const char *state)
{
    st_kp_describe_transactions_resp_transaction_state_t d = describe(f, id);
    assert_int_equal(d.error_code, 0);
    assert_true(st_kstr_eq(d.transaction_state, state));
}

/* Completes the markers of the last job and waits for CompleteCommit/CompleteAbort to be
 * durable (the describe shows it). */
static void finish_markers(fx_t *f, const char *id)
{
    assert_true(f->njobs > 0);
    job_t *j = &f->jobs[f->njobs - 1];
    st_tcoord_markers_done(f->c, j->id, 0);
    const char *want = j->commit ? "CompleteCommit" : "CompleteAbort";
    for (int i = 0; i < 1000; i++) {
        st_kp_describe_transactions_resp_transaction_state_t d = describe(f, id);
        if (st_kstr_eq(d.transaction_state, want))
            return;
        int never = 0;
        run_until(f, &never, 2);
    }
    fail_msg("%s never reached %s", id, want);
}

/* Records in the log (tombstones counted in *tombstones). */
static int log_records(fx_t *f, int *tombstones)
{
    int n = 0, tomb = 0;
    int64_t off = st_log_start_offset(f->log), end_off = st_log_end_offset(f->log);
    while (off < end_off) {
        st_log_read_t rd;
        assert_int_equal(st_log_read(f->log, off, 1 << 20, -1, &rd), 0);
        if (rd.nranges == 0) {
            st_log_read_release(&rd);
            break;
        }
        uint8_t *buf = malloc((size_t)rd.bytes);
        ssize_t len = st_log_read_copy(&rd, buf, (size_t)rd.bytes);
        int64_t next = rd.next_offset;
        st_log_read_release(&rd);
        for (size_t pos = 0; pos < (size_t)len;) {
            st_batch_hdr_t h;
            assert_int_equal(st_batch_check(buf + pos, (size_t)len - pos, &h), 0);
            st_batch_iter_t it;
            assert_int_equal(st_batch_iter_init(&it, buf + pos, (size_t)st_batch_size(&h)), 0);
            st_batch_record_t rec;
            while (st_batch_iter_next(&it, &rec) == 1) {
                n++;
                tomb += rec.value_len < 0;
            }
            pos += (size_t)st_batch_size(&h);
        }
        free(buf);
        off = next;
    }
    if (tombstones)
        *tombstones = tomb;
    return n;
}

/* Appends a record of id at the given state straight to the log (what an earlier coordinator,
 * or Kafka, wrote). */
static void put_record(fx_t *f, const char *id, const st_trec_t *rec)
{
    st_buf_t k, v;
    st_buf_init(&k);
    st_buf_init(&v);
    st_trec_key(&k, st_kstr(id));
    if (rec)
        st_trec_value(&v, rec);
    st_gbatch_t b;
    st_gbatch_init(&b, f->now, 1 << 20);
    assert_int_equal(
        st_gbatch_add(&b, k.data, k.len, rec ? v.data : NULL, rec ? (int32_t)v.len : -1), 0);
    assert_int_equal(st_gbatch_finish(&b), 0);
    st_log_append_info_t info;
    st_batch_verdict_t vd = {0};
    assert_int_equal(st_log_append(f->log, b.out.data, b.out.len, 0, &info, &vd), 0);
    st_gbatch_fini(&b);
    st_buf_fini(&k);
    st_buf_fini(&v);
}

/* ---- records ---- */

static void test_records_layout(void **state)
{
    (void)state;
    st_buf_t b;
    st_buf_init(&b);
    st_trec_key(&b, st_kstr("tx"));
    const uint8_t key[] = {0, 0, 0, 2, 't', 'x'};
    assert_int_equal(b.len, sizeof key);
    assert_memory_equal(b.data, key, sizeof key);
    st_buf_clear(&b);

    int32_t parts[] = {3, 1};
    st_trec_topic_t topics[] = {{st_kstr("t"), 2, parts}};
    st_trec_t rec = {.version = 0,
                     .producer_id = 0x0102030405060708,
                     .producer_epoch = 5,
                     .transaction_timeout_ms = 60000,
                     .transaction_status = ST_TXN_ONGOING,
                     .ntopics = 1,
                     .topics = topics,
                     .last_update_timestamp_ms = 0x10,
                     .start_timestamp_ms = 0x20,
                     .previous_producer_id = -1,
                     .next_producer_id = -1};
    st_trec_value(&b, &rec);
    const uint8_t v0[] = {0, 0,                                                 /* version */
                          1, 2, 3,    4,    5, 6, 7, 8,                         /* producer id */
                          0, 5,                                                 /* epoch */
                          0, 0, 0xea, 0x60,                                     /* timeout 60000 */
                          1,                                                    /* Ongoing */
                          0, 0, 0,    1,                                        /* 1 topic */
                          0, 1, 't',  0,    0, 0, 2, 0,    0, 0, 3, 0, 0, 0, 1, /* t [3, 1] */
                          0, 0, 0,    0,    0, 0, 0, 0x10,                      /* last update */
                          0, 0, 0,    0,    0, 0, 0, 0x20};                     /* start */
    assert_int_equal(b.len, sizeof v0);
    assert_memory_equal(b.data, v0, sizeof v0);

    st_arena_t a;
    st_arena_init(&a, 1024);
    st_trec_t d;
    assert_int_equal(st_trec_decode(key, sizeof key, v0, sizeof v0, &a, &d), 0);
    assert_true(st_kstr_eq(d.transactional_id, "tx"));
    assert_int_equal(d.producer_id, 0x0102030405060708);
    assert_int_equal(d.producer_epoch, 5);
    assert_int_equal(d.transaction_status, ST_TXN_ONGOING);
    assert_int_equal(d.ntopics, 1);
    assert_int_equal(d.topics[0].npartitions, 2);
    assert_int_equal(d.topics[0].partitions[0], 3);
    assert_int_equal(d.start_timestamp_ms, 0x20);

    /* Empty writes null partitions (count -1) */
    st_buf_clear(&b);
    rec.transaction_status = ST_TXN_EMPTY;
    rec.ntopics = -1;
    st_trec_value(&b, &rec);
    assert_int_equal(b.len, 2 + 8 + 2 + 4 + 1 + 4 + 8 + 8);
    assert_memory_equal(b.data + 17, "\xff\xff\xff\xff", 4);
    assert_int_equal(st_trec_decode(key, sizeof key, b.data, (int32_t)b.len, &a, &d), 0);
    assert_int_equal(d.ntopics, -1);

    /* v1 (flexible): compact arrays and strings, the tagged fields */
    const uint8_t v1[] = {
        0, 1,   1,   2, 3, 4, 5, 6, 7, 8,    0, 5, 0, 0, 0xea, 0x60, 2, /* PrepareCommit */
        2,                                                              /* 1 topic, compact */
        2, 't', 2,   0, 0, 0, 9,                                        /* "t" [9] */
        0,                                                              /* topic's tags */
        0, 0,   0,   0, 0, 0, 0, 1, 0, 0,    0, 0, 0, 0, 0,    2,    3, /* 3 tags */
        0, 8,   0,   0, 0, 0, 0, 0, 0, 0x33,                            /* previous producer id */
        2, 2,   0,   2, /* client transaction version 2 */
        9, 1,   0x7f};  /* an unknown tag, skipped */
    assert_int_equal(st_trec_decode(key, sizeof key, v1, sizeof v1, &a, &d), 0);
    assert_int_equal(d.version, 1);
    assert_int_equal(d.transaction_status, ST_TXN_PREPARE_COMMIT);
    assert_int_equal(d.topics[0].partitions[0], 9);
    assert_int_equal(d.previous_producer_id, 0x33);
    assert_int_equal(d.next_producer_id, -1);
    assert_int_equal(d.client_transaction_version, 2);
    /* and written back the same way */
    st_buf_clear(&b);
    st_trec_value(&b, &d);
    assert_int_equal(b.len, sizeof v1 - 3);
    assert_memory_equal(b.data, v1, 42);
    assert_int_equal(b.data[42], 2); /* the unknown tag is not kept */
    assert_memory_equal(b.data + 43, v1 + 43, sizeof v1 - 3 - 43);

    /* tombstone, unknown versions, truncation */
    assert_int_equal(st_trec_decode(key, sizeof key, NULL, -1, &a, &d), 0);
    assert_true(d.tombstone);
    const uint8_t key1[] = {0, 1, 0, 0};
    assert_int_equal(st_trec_decode(key1, sizeof key1, NULL, -1, &a, &d), ST_E_UNSUPPORTED);
    const uint8_t v9[] = {0, 9};
    assert_int_equal(st_trec_decode(key, sizeof key, v9, sizeof v9, &a, &d), ST_E_UNSUPPORTED);
    assert_int_equal(st_trec_decode(key, sizeof key, v0, sizeof v0 - 1, &a, &d), ST_E_CORRUPT);
    uint8_t bad[sizeof v0];
    memcpy(bad, v0, sizeof v0);
    bad[16] = 42; /* no such state */
    assert_int_equal(st_trec_decode(key, sizeof key, bad, sizeof bad, &a, &d), ST_E_CORRUPT);

    assert_string_equal(st_txn_state_name(ST_TXN_PREPARE_EPOCH_FENCE), "PrepareEpochFence");
    assert_int_equal(st_txn_state_by_name(st_kstr("CompleteAbort")), ST_TXN_COMPLETE_ABORT);
    assert_int_equal(st_txn_state_by_name(st_kstr("Bogus")), -1);
    st_arena_fini(&a);
    st_buf_fini(&b);
}

static void test_partition_hash(void **state)
{
    (void)state;
    /* Java: "my-txn".hashCode() = -1058425890 (abs % 50 = 40); the group hash is the same */
    assert_int_equal(st_tcoord_partition_for(st_kstr("my-txn"), 50),
                     st_gcoord_partition_for(st_kstr("my-txn"), 50));
    assert_int_equal(st_tcoord_partition_for(st_kstr(""), 50), 0);
}

/* ---- InitProducerId ---- */

static void test_init_pid(void **state)
{
    fx_t *f = *state;
    st_tresult_t r = init_pid(f, "a", 60000, -1, -1);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.producer_id, 1000);
    assert_int_equal(r.producer_epoch, 0);
    assert_int_equal(log_records(f, NULL), 1);
    assert_state(f, "a", "Empty");
    /* a new incarnation: the epoch is bumped */
    r = init_pid(f, "a", 60000, -1, -1);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.producer_id, 1000);
    assert_int_equal(r.producer_epoch, 1);
    /* v3+ with the current id and epoch: bumped again */
    r = init_pid(f, "a", 60000, 1000, 1);
    assert_int_equal(r.producer_epoch, 2);
    /* a retry of that one (its last epoch): the same epoch */
    r = init_pid(f, "a", 60000, 1000, 1);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.producer_epoch, 2);
    /* an older epoch, another producer id: fenced */
    assert_int_equal(init_pid(f, "a", 60000, 1000, 0).error, ST_KERR_PRODUCER_FENCED);
    assert_int_equal(init_pid(f, "a", 60000, 77, 2).error, ST_KERR_PRODUCER_FENCED);
    /* half of the pair: KafkaApis' INVALID_REQUEST */
    assert_int_equal(init_pid(f, "a", 60000, 1000, -1).error, ST_KERR_INVALID_REQUEST);
    /* timeouts */
    assert_int_equal(init_pid(f, "a", MAX_TIMEOUT + 1, -1, -1).error,
                     ST_KERR_INVALID_TRANSACTION_TIMEOUT);
    assert_int_equal(init_pid(f, "a", 0, -1, -1).error, ST_KERR_INVALID_TRANSACTION_TIMEOUT);
    assert_int_equal(init_pid(f, "a", MAX_TIMEOUT, -1, -1).error, 0);
    assert_int_equal(init_pid(f, "", 60000, -1, -1).error, ST_KERR_INVALID_REQUEST);
    /* not loaded here */
    st_tresult_t r2 = {0};
    int done = 0;
    st_tcoord_init_pid(f->c, -1, st_kstr("b"), 60000, -1, -1, &r2, on_done, &done);
    assert_int_equal(done, 1);
    assert_int_equal(r2.error, ST_KERR_NOT_COORDINATOR);
    /* the state is durable: a restart keeps the id and its epoch */
    fx_restart(f);
    r = init_pid(f, "a", 60000, -1, -1);
    assert_int_equal(r.producer_id, 1000);
    assert_int_equal(r.producer_epoch, 4);
}

static void test_answer_waits_for_durability(void **state)
{
    fx_t *f = *state;
    f->hold_syncs = true;
    st_tresult_t r = {0};
    int done = 0;
    st_tcoord_init_pid(f->c, 0, st_kstr("d"), 60000, -1, -1, &r, on_done, &done);
    int never = 0;
    run_until(f, &never, 30);
    assert_int_equal(done, 0); /* not durable, not answered */
    assert_int_equal(describe(f, "d").error_code, ST_KERR_TRANSACTIONAL_ID_NOT_FOUND);
    /* meanwhile another InitProducerId of the id is CONCURRENT_TRANSACTIONS (pending) */
    st_tresult_t r2 = {0};
    int done2 = 0;
    st_tcoord_init_pid(f->c, 0, st_kstr("d"), 60000, -1, -1, &r2, on_done, &done2);
    assert_int_equal(done2, 1);
    assert_int_equal(r2.error, ST_KERR_CONCURRENT_TRANSACTIONS);
    fx_release_syncs(f);
    assert_true(run_until(f, &done, 5000));
    assert_int_equal(r.error, 0);
    assert_state(f, "d", "Empty");
}

static void test_epoch_exhaustion_new_pid(void **state)
{
    fx_t *f = *state;
    st_trec_t rec = {.producer_id = 55,
                     .producer_epoch = INT16_MAX - 1,
                     .transaction_timeout_ms = 60000,
                     .transaction_status = ST_TXN_COMPLETE_COMMIT,
                     .ntopics = 0,
                     .last_update_timestamp_ms = f->now,
                     .start_timestamp_ms = f->now,
                     .previous_producer_id = -1,
                     .next_producer_id = -1};
    put_record(f, "x", &rec);
    rec.producer_id = 66;
    put_record(f, "y", &rec);
    fx_restart(f);
    /* a new incarnation (no id and epoch in the request) of an exhausted one: a new id */
    st_tresult_t ry = init_pid(f, "y", 60000, -1, -1);
    assert_int_equal(ry.error, 0);
    assert_int_equal(ry.producer_id, 1000);
    assert_int_equal(ry.producer_epoch, 0);
    f->next_pid = 1000;
    /* a producer at the exhausted epoch asks again: a new producer id */
    st_tresult_t r = init_pid(f, "x", 60000, 55, INT16_MAX - 1);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.producer_id, 1000);
    assert_int_equal(r.producer_epoch, 0);
    /* its retry (the answer lost) with the old id and epoch gets the same again */
    r = init_pid(f, "x", 60000, 55, INT16_MAX - 1);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.producer_id, 1000);
    assert_int_equal(r.producer_epoch, 0);
    /* an older epoch of the old id is fenced */
    assert_int_equal(init_pid(f, "x", 60000, 55, 3).error, ST_KERR_PRODUCER_FENCED);
    /* without the pair, epoch exhaustion of the new id is far: a plain bump */
    r = init_pid(f, "x", 60000, -1, -1);
    assert_int_equal(r.producer_id, 1000);
    assert_int_equal(r.producer_epoch, 1);
}

/* ---- a transaction's life ---- */

static void test_commit_round_trip(void **state)
{
    fx_t *f = *state;
    st_tresult_t p = init_pid(f, "t1", 60000, -1, -1);
    /* refusals before anything is added */
    assert_int_equal(add(f, "nobody", p.producer_id, 0, "x", 0),
                     ST_KERR_INVALID_PRODUCER_ID_MAPPING);
    assert_int_equal(add(f, "t1", p.producer_id + 1, 0, "x", 0),
                     ST_KERR_INVALID_PRODUCER_ID_MAPPING);
    assert_int_equal(add(f, "t1", p.producer_id, 1, "x", 0), ST_KERR_PRODUCER_FENCED);
    assert_int_equal(add(f, "", p.producer_id, 0, "x", 0), ST_KERR_INVALID_REQUEST);
    assert_int_equal(end(f, "t1", p.producer_id, 0, true, 0).error, ST_KERR_INVALID_TXN_STATE);
    f->now += 5;
    int64_t began = f->now;
    assert_int_equal(add(f, "t1", p.producer_id, 0, "x", 0), 0);
    assert_state(f, "t1", "Ongoing");
    int before = log_records(f, NULL);
    assert_int_equal(add(f, "t1", p.producer_id, 0, "x", 0), 0); /* already in: no write */
    assert_int_equal(log_records(f, NULL), before);
    assert_int_equal(add(f, "t1", p.producer_id, 0, "y", 3), 0);
    st_kp_describe_transactions_resp_transaction_state_t d = describe(f, "t1");
    assert_int_equal(d.transaction_start_time_ms, began);
    assert_int_equal(d.topics_count, 2);
    /* verify-only */
    st_ttp_t vp[] = {{st_kstr("x"), 0}, {st_kstr("x"), 1}};
    int16_t verr[2];
    st_tcoord_verify(f->c, 0, st_kstr("t1"), p.producer_id, 0, vp, 2, verr);
    assert_int_equal(verr[0], 0);
    assert_int_equal(verr[1], ST_KERR_TRANSACTION_ABORTABLE);
    st_tcoord_verify(f->c, 0, st_kstr("t1"), p.producer_id, 1, vp, 2, verr);
    assert_int_equal(verr[0], ST_KERR_PRODUCER_FENCED);
    st_tcoord_verify(f->c, 0, st_kstr("zz"), p.producer_id, 0, vp, 1, verr);
    assert_int_equal(verr[0], ST_KERR_INVALID_PRODUCER_ID_MAPPING);

    /* EndTxn: answered once PrepareCommit is durable, markers handed over */
    assert_int_equal(end(f, "t1", p.producer_id, 1, true, 0).error, ST_KERR_PRODUCER_FENCED);
    st_tresult_t e = end(f, "t1", p.producer_id, 0, true, 0);
    assert_int_equal(e.error, 0);
    assert_state(f, "t1", "PrepareCommit");
    assert_int_equal(f->njobs, 1);
    assert_true(f->jobs[0].commit);
    assert_int_equal(f->jobs[0].coordinator_epoch, f->epoch);
    assert_int_equal(f->jobs[0].pid, p.producer_id);
    assert_int_equal(f->jobs[0].n, 2);
    assert_string_equal(f->jobs[0].parts[0], "x-0");
    assert_string_equal(f->jobs[0].parts[1], "y-3");
    /* while the markers are out */
    assert_int_equal(end(f, "t1", p.producer_id, 0, true, 0).error,
                     ST_KERR_CONCURRENT_TRANSACTIONS);
    assert_int_equal(end(f, "t1", p.producer_id, 0, false, 0).error, ST_KERR_INVALID_TXN_STATE);
    /* an AddPartitionsToTxn waits for the completion; with none within ST_TCOORD_PARK_MS it
     * is CONCURRENT_TRANSACTIONS (the next tick past the deadline answers it) */
    {
        st_tresult_t r = {0};
        int done = 0;
        st_ttp_t tp = {st_kstr("x"), 0};
        st_tcoord_add_partitions(f->c, 0, st_kstr("t1"), p.producer_id, 0, &tp, 1, &r, on_done,
                                 &done);
        assert_false(run_until(f, &done, 20));
        f->now += ST_TCOORD_PARK_MS - 1;
        st_tcoord_tick(f->c);
        assert_int_equal(done, 0);
        f->now += 1;
        st_tcoord_tick(f->c);
        assert_int_equal(done, 1);
        assert_int_equal(r.error, ST_KERR_CONCURRENT_TRANSACTIONS);
    }
    assert_int_equal(init_pid(f, "t1", 60000, -1, -1).error, ST_KERR_CONCURRENT_TRANSACTIONS);
    st_tcoord_verify(f->c, 0, st_kstr("t1"), p.producer_id, 0, vp, 1, verr);
    assert_int_equal(verr[0], ST_KERR_CONCURRENT_TRANSACTIONS);
    /* a stale job id changes nothing */
    st_tcoord_markers_done(f->c, 424242, 0);
    assert_state(f, "t1", "PrepareCommit");
    /* a sender that could not finish: the markers go again at the next tick */
    st_tcoord_markers_done(f->c, f->jobs[0].id, ST_E_CLOSED);
    assert_state(f, "t1", "PrepareCommit");
    assert_int_equal(f->njobs, 1);
    st_tcoord_tick(f->c);
    assert_int_equal(f->njobs, 2);
    assert_true(f->jobs[1].id != f->jobs[0].id);
    assert_string_equal(f->jobs[1].parts[1], "y-3");
    finish_markers(f, "t1");
    d = describe(f, "t1");
    assert_int_equal(d.topics_count, 0);
    /* a retried commit is answered OK, an abort now is not valid */
    assert_int_equal(end(f, "t1", p.producer_id, 0, true, 0).error, 0);
    assert_int_equal(end(f, "t1", p.producer_id, 0, false, 0).error, ST_KERR_INVALID_TXN_STATE);
    /* the next transaction, aborted */
    assert_int_equal(add(f, "t1", p.producer_id, 0, "x", 1), 0);
    assert_int_equal(end(f, "t1", p.producer_id, 0, false, 0).error, 0);
    assert_state(f, "t1", "PrepareAbort");
    assert_false(f->jobs[2].commit);
    finish_markers(f, "t1");
    assert_int_equal(end(f, "t1", p.producer_id, 0, false, 0).error, 0);
    assert_int_equal(end(f, "t1", p.producer_id, 0, true, 0).error, ST_KERR_INVALID_TXN_STATE);
}

/* AddPartitionsToTxn (and AddOffsetsToTxn) arriving while the previous transaction's markers
 * are out waits, and is answered as the next transaction's first add once Complete* is durable
 * (no CONCURRENT_TRANSACTIONS, no client backoff); a fenced producer is still refused at once;
 * an unload or the drain answers the waiting ones NOT_COORDINATOR. */
static void test_add_waits_for_completion(void **state)
{
    fx_t *f = *state;
    st_tresult_t p = init_pid(f, "w", 60000, -1, -1);
    assert_int_equal(add(f, "w", p.producer_id, 0, "x", 0), 0);
    assert_int_equal(end(f, "w", p.producer_id, 0, true, 0).error, 0);
    assert_state(f, "w", "PrepareCommit");
    st_ttp_t tp[] = {{st_kstr("x"), 1}, {st_kstr("y"), 0}};
    st_tresult_t r1 = {0}, r2 = {0};
    int d1 = 0, d2 = 0;
    st_tcoord_add_partitions(f->c, 0, st_kstr("w"), p.producer_id, 0, &tp[0], 1, &r1, on_done, &d1);
    st_tcoord_add_partitions(f->c, 0, st_kstr("w"), p.producer_id, 0, &tp[1], 1, &r2, on_done, &d2);
    assert_int_equal(add(f, "w", p.producer_id, 1, "x", 0), ST_KERR_PRODUCER_FENCED);
    assert_false(run_until(f, &d1, 20));
    assert_int_equal(d2, 0);
    assert_state(f, "w", "PrepareCommit");
    st_tcoord_markers_done(f->c, f->jobs[f->njobs - 1].id, 0); /* CompleteCommit written */
    assert_true(run_until(f, &d1, 5000));
    assert_true(run_until(f, &d2, 5000));
    assert_int_equal(r1.error, 0);
    assert_int_equal(r2.error, 0);
    assert_int_equal(r1.producer_id, p.producer_id);
    st_kp_describe_transactions_resp_transaction_state_t d = describe(f, "w");
    assert_true(st_kstr_eq(d.transaction_state, "Ongoing"));
    assert_int_equal(d.topics_count, 2);             /* both added to the new transaction, */
    assert_true(st_kstr_eq(d.topics[0].topic, "x")); /* in the order they arrived */
    assert_true(st_kstr_eq(d.topics[1].topic, "y"));

    /* the new transaction ends; a waiting add meets an unload */
    assert_int_equal(end(f, "w", p.producer_id, 0, false, 0).error, 0);
    st_tresult_t r3 = {0};
    int d3 = 0;
    st_tcoord_add_partitions(f->c, 0, st_kstr("w"), p.producer_id, 0, &tp[0], 1, &r3, on_done, &d3);
    assert_false(run_until(f, &d3, 20));
    st_tcoord_unload(f->c, 0);
    assert_int_equal(d3, 1);
    assert_int_equal(r3.error, ST_KERR_NOT_COORDINATOR);

    /* loaded again (the markers sent again): a waiting add meets the drain */
    assert_int_equal(st_tcoord_load(f->c, 0, f->log, f->epoch + 1), 0);
    assert_state(f, "w", "PrepareAbort");
    st_tresult_t r4 = {0};
    int d4 = 0;
    st_tcoord_add_partitions(f->c, 0, st_kstr("w"), p.producer_id, 0, &tp[0], 1, &r4, on_done, &d4);
    assert_int_equal(d4, 0);
    st_tcoord_drain(f->c);
    assert_int_equal(d4, 1);
    assert_int_equal(r4.error, ST_KERR_NOT_COORDINATOR);
}

static void test_empty_transaction_completes_without_markers(void **state)
{
    fx_t *f = *state;
    /* AddOffsetsToTxn adds a __consumer_offsets partition; here a transaction whose markers
     * the sender finishes at once, and one with no sender at all */
    f->cfg.send_markers = NULL;
    st_tcoord_destroy(f->c);
    fx_coord(f);
    st_tresult_t p = init_pid(f, "e", 60000, -1, -1);
    assert_int_equal(add(f, "e", p.producer_id, 0, "__consumer_offsets", 4), 0);
    assert_int_equal(end(f, "e", p.producer_id, 0, true, 0).error, 0);
    for (int i = 0; i < 100 && !st_kstr_eq(describe(f, "e").transaction_state, "CompleteCommit");
         i++) {
        int never = 0;
        run_until(f, &never, 2);
    }
    assert_state(f, "e", "CompleteCommit");
}

static void test_transactions_v2_bump_epoch_at_each_end(void **state)
{
    fx_t *f = *state;
    st_tresult_t p = init_pid(f, "v2", 60000, -1, -1);
    assert_int_equal(add(f, "v2", p.producer_id, 0, "x", 0), 0);
    st_tresult_t e = end(f, "v2", p.producer_id, 0, true, 2);
    assert_int_equal(e.error, 0);
    assert_int_equal(e.producer_id, p.producer_id);
    assert_int_equal(e.producer_epoch, 1); /* bumped at the end */
    assert_int_equal(f->jobs[0].epoch, 1); /* markers at the new epoch */
    /* a retry with the old epoch while completing: CONCURRENT, then OK once complete */
    assert_int_equal(end(f, "v2", p.producer_id, 0, true, 2).error,
                     ST_KERR_CONCURRENT_TRANSACTIONS);
    finish_markers(f, "v2");
    e = end(f, "v2", p.producer_id, 0, true, 2);
    assert_int_equal(e.error, 0);
    assert_int_equal(e.producer_epoch, 1);
    /* the old epoch cannot start anything; the new one can */
    assert_int_equal(add(f, "v2", p.producer_id, 0, "x", 0), ST_KERR_PRODUCER_FENCED);
    assert_int_equal(add(f, "v2", p.producer_id, 1, "x", 0), 0);
    assert_int_equal(end(f, "v2", p.producer_id, 0, true, 2).error, ST_KERR_PRODUCER_FENCED);
}

/* ---- fencing ---- */

static void test_new_incarnation_aborts_ongoing(void **state)
{
    fx_t *f = *state;
    st_tresult_t p = init_pid(f, "z", 60000, -1, -1);
    assert_int_equal(add(f, "z", p.producer_id, 0, "x", 0), 0);
    /* a new producer with the same id: the old transaction is aborted first */
    st_tresult_t r = init_pid(f, "z", 60000, -1, -1);
    assert_int_equal(r.error, ST_KERR_CONCURRENT_TRANSACTIONS);
    st_kp_describe_transactions_resp_transaction_state_t d = describe(f, "z");
    assert_true(st_kstr_eq(d.transaction_state, "PrepareAbort"));
    assert_int_equal(d.producer_epoch, 1); /* fenced */
    assert_int_equal(f->njobs, 1);
    assert_false(f->jobs[0].commit);
    assert_int_equal(f->jobs[0].epoch, 1);
    /* the old producer is fenced */
    assert_int_equal(end(f, "z", p.producer_id, 0, true, 0).error, ST_KERR_PRODUCER_FENCED);
    assert_int_equal(add(f, "z", p.producer_id, 0, "x", 1), ST_KERR_PRODUCER_FENCED);
    /* still aborting */
    assert_int_equal(init_pid(f, "z", 60000, -1, -1).error, ST_KERR_CONCURRENT_TRANSACTIONS);
    finish_markers(f, "z");
    r = init_pid(f, "z", 60000, -1, -1);
    assert_int_equal(r.error, 0);
    assert_int_equal(r.producer_epoch, 2);
    assert_int_equal(end(f, "z", p.producer_id, 1, false, 0).error, ST_KERR_PRODUCER_FENCED);
}

/* ---- timeouts and expiry ---- */

static void test_timeout_aborts_and_fences(void **state)
{
    fx_t *f = *state;
    st_tresult_t p = init_pid(f, "slow", 1000, -1, -1);
    assert_int_equal(add(f, "slow", p.producer_id, 0, "x", 0), 0);
    f->now += 999;
    st_tcoord_tick(f->c); /* not yet: neither the interval nor the timeout */
    assert_state(f, "slow", "Ongoing");
    f->now += 10000;
    st_tcoord_tick(f->c);
    int never = 0;
    run_until(f, &never, 20);
    st_kp_describe_transactions_resp_transaction_state_t d = describe(f, "slow");
    assert_true(st_kstr_eq(d.transaction_state, "PrepareAbort"));
    assert_int_equal(d.producer_epoch, 1);
    assert_int_equal(f->njobs, 1);
    assert_false(f->jobs[0].commit);
    assert_int_equal(f->jobs[0].epoch, 1);
    finish_markers(f, "slow");
    /* the producer that timed out is fenced */
    assert_int_equal(add(f, "slow", p.producer_id, 0, "x", 0), ST_KERR_PRODUCER_FENCED);
    assert_int_equal(end(f, "slow", p.producer_id, 0, true, 0).error, ST_KERR_PRODUCER_FENCED);
}

static void test_expiry_writes_tombstone(void **state)
{
    fx_t *f = *state;
    st_tresult_t p = init_pid(f, "old", 60000, -1, -1);
    init_pid(f, "young", 60000, -1, -1);
    assert_int_equal(add(f, "young", p.producer_id + 1, 0, "x", 0), 0);
    f->now += f->cfg.id_expiration_ms; /* "old" idle that long; "young" Ongoing, kept */
    st_tcoord_check_now(f->c);
    int never = 0;
    run_until(f, &never, 20);
    assert_int_equal(describe(f, "old").error_code, ST_KERR_TRANSACTIONAL_ID_NOT_FOUND);
    int tomb = 0;
    log_records(f, &tomb);
    assert_int_equal(tomb, 1);
    /* "young" was aborted for its timeout meanwhile, but not expired */
    assert_int_equal(describe(f, "young").error_code, 0);
    fx_restart(f);
    assert_int_equal(describe(f, "old").error_code, ST_KERR_TRANSACTIONAL_ID_NOT_FOUND);
    /* a new InitProducerId starts over with a new producer id */
    st_tresult_t r = init_pid(f, "old", 60000, -1, -1);
    assert_int_equal(r.error, 0);
    assert_true(r.producer_id != p.producer_id);
}

/* ---- loading ---- */

static void put_state(fx_t *f, const char *id, int64_t pid, int16_t epoch, int state,
                      const char *topic, int32_t part)
{
    int32_t parts[] = {part};
    st_trec_topic_t t = {st_kstr(topic), 1, parts};
    st_trec_t rec = {.producer_id = pid,
                     .producer_epoch = epoch,
                     .transaction_timeout_ms = 60000,
                     .transaction_status = (int8_t)state,
                     .ntopics = topic ? 1 : -1,
                     .topics = topic ? &t : NULL,
                     .last_update_timestamp_ms = f->now,
                     .start_timestamp_ms = topic ? f->now : -1,
                     .previous_producer_id = -1,
                     .next_producer_id = -1};
    put_record(f, id, &rec);
}

static void fill_every_state(fx_t *f)
{
    put_state(f, "s-empty", 1, 0, ST_TXN_EMPTY, NULL, 0);
    put_state(f, "s-ongoing", 2, 3, ST_TXN_EMPTY, NULL, 0);
    put_state(f, "s-ongoing", 2, 3, ST_TXN_ONGOING, "a", 1);
    put_state(f, "s-pc", 3, 0, ST_TXN_ONGOING, "a", 2);
    put_state(f, "s-pc", 3, 0, ST_TXN_PREPARE_COMMIT, "a", 2);
    put_state(f, "s-pa", 4, 1, ST_TXN_PREPARE_ABORT, "b", 0);
    put_state(f, "s-cc", 5, 0, ST_TXN_COMPLETE_COMMIT, NULL, 0);
    put_state(f, "s-ca", 6, 0, ST_TXN_COMPLETE_ABORT, NULL, 0);
    put_state(f, "s-dead", 7, 0, ST_TXN_EMPTY, NULL, 0);
    put_state(f, "s-dead", 7, 0, ST_TXN_DEAD, NULL, 0);
    put_state(f, "s-gone", 8, 0, ST_TXN_EMPTY, NULL, 0);
    put_record(f, "s-gone", NULL);
}

static void check_every_state(fx_t *f)
{
    assert_state(f, "s-empty", "Empty");
    assert_state(f, "s-ongoing", "Ongoing");
    assert_int_equal(describe(f, "s-ongoing").producer_epoch, 3);
    assert_state(f, "s-pc", "PrepareCommit");
    assert_state(f, "s-pa", "PrepareAbort");
    assert_state(f, "s-cc", "CompleteCommit");
    assert_state(f, "s-ca", "CompleteAbort");
    assert_int_equal(describe(f, "s-dead").error_code, ST_KERR_TRANSACTIONAL_ID_NOT_FOUND);
    assert_int_equal(describe(f, "s-gone").error_code, ST_KERR_TRANSACTIONAL_ID_NOT_FOUND);
    assert_int_equal(st_tcoord_count(f->c), 6);
    /* the markers of both Prepare* were sent again, at the new coordinator epoch */
    assert_int_equal(f->njobs, 2);
    for (int i = 0; i < 2; i++) {
        job_t *j = &f->jobs[i];
        assert_int_equal(j->coordinator_epoch, f->epoch);
        if (j->pid == 3) {
            assert_true(j->commit);
            assert_string_equal(j->parts[0], "a-2");
        } else {
            assert_int_equal(j->pid, 4);
            assert_false(j->commit);
            assert_string_equal(j->parts[0], "b-0");
        }
    }
}

static void test_load_every_state(void **state)
{
    fx_t *f = *state;
    fill_every_state(f);
    fx_restart(f);
    check_every_state(f);
    /* finishing the resent markers completes them */
    st_tcoord_markers_done(f->c, f->jobs[0].id, 0);
    st_tcoord_markers_done(f->c, f->jobs[1].id, 0);
    int never = 0;
    run_until(f, &never, 20);
    assert_true(st_kstr_eq(describe(f, "s-pc").transaction_state, "CompleteCommit"));
    assert_true(st_kstr_eq(describe(f, "s-pa").transaction_state, "CompleteAbort"));
    /* unload: NOT_COORDINATOR, and markers coming back after it change nothing */
    st_tcoord_unload(f->c, 0);
    assert_int_equal(describe(f, "s-empty").error_code, ST_KERR_NOT_COORDINATOR);
    assert_int_equal(st_tcoord_count(f->c), 0);
}

static void test_load_cleaned_log(void **state)
{
    fx_t *f = *state;
    fill_every_state(f);
    f->lc.segment_bytes = 1024;
    f->lc.compact = true;
    f->lc.retention_deletes = false;
    f->lc.min_cleanable_dirty_ratio = 0;
    f->lc.delete_retention_ms = 0;
    assert_int_equal(st_log_set_config(f->log, &f->lc), 0);
    int before = log_records(f, NULL);
    assert_int_equal(st_log_roll(f->log), 0);
    st_log_clean_opts_t o = {.budget_bytes = 4096, .map_bytes = 1 << 20};
    int64_t rc;
    int steps = 0;
    while ((rc = st_log_clean_step(f->log, &o)) > 0)
        assert_true(++steps < 100000);
    assert_int_equal(rc, 0);
    assert_true(log_records(f, NULL) < before);
    fx_restart(f);
    check_every_state(f);
}

static void test_list_filters(void **state)
{
    fx_t *f = *state;
    st_tresult_t a = init_pid(f, "la", 60000, -1, -1);
    init_pid(f, "lb", 60000, -1, -1);
    assert_int_equal(add(f, "la", a.producer_id, 0, "x", 0), 0);
    f->now += 5000;
    st_kp_list_transactions_resp_transaction_state_t *out = NULL;
    int32_t n = 0;
    st_tcoord_list(f->c, NULL, 0, NULL, 0, -1, &f->a, &out, &n);
    assert_int_equal(n, 2);
    int ongoing = ST_TXN_ONGOING;
    n = 0;
    st_tcoord_list(f->c, &ongoing, 1, NULL, 0, -1, &f->a, &out, &n);
    assert_int_equal(n, 1);
    assert_true(st_kstr_eq(out[0].transactional_id, "la"));
    assert_true(st_kstr_eq(out[0].transaction_state, "Ongoing"));
    int unknown = -1;
    n = 0;
    st_tcoord_list(f->c, &unknown, 1, NULL, 0, -1, &f->a, &out, &n);
    assert_int_equal(n, 0);
    int64_t pid = a.producer_id + 1;
    n = 0;
    st_tcoord_list(f->c, NULL, 0, &pid, 1, -1, &f->a, &out, &n);
    assert_int_equal(n, 1);
    assert_true(st_kstr_eq(out[0].transactional_id, "lb"));
    /* running longer than 4 s: la (started 5 s ago); not longer than 6 s */
    n = 0;
    st_tcoord_list(f->c, &ongoing, 1, NULL, 0, 4000, &f->a, &out, &n);
    assert_int_equal(n, 1);
    n = 0;
    st_tcoord_list(f->c, &ongoing, 1, NULL, 0, 6000, &f->a, &out, &n);
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_layout),
        cmocka_unit_test(test_partition_hash),
        cmocka_unit_test_setup_teardown(test_init_pid, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_answer_waits_for_durability, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_epoch_exhaustion_new_pid, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_commit_round_trip, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_add_waits_for_completion, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_empty_transaction_completes_without_markers, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_transactions_v2_bump_epoch_at_each_end, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_new_incarnation_aborts_ongoing, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_timeout_aborts_and_fences, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_expiry_writes_tombstone, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_load_every_state, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_load_cleaned_log, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_list_filters, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
