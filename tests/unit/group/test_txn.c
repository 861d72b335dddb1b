/*
 * test_txn.c — the group coordinator's transactional offsets (TxnOffsetCommit, KIP-98 and
 * KIP-447) against a real event loop and a real __consumer_offsets log: pending offsets are
 * invisible until their producer's COMMIT marker and dropped by its ABORT; a later record of
 * the log wins between transactional and regular commits of a partition; what is loaded from
 * a log with markers, without them (still pending), and from the logs Kafka's cleaner may
 * leave is the same; OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT; the KIP-447
 * member checks; one transactional batch on disk; DeleteGroups, OffsetDelete and expiry with
 * pending offsets as Kafka does.
 */
#include "group/group_fx.h"

/* ---- helpers ---- */

typedef struct {
    const char *member;   /* NULL: "" */
    const char *instance; /* NULL: none */
    int32_t gen;          /* -1: none */
} who_t;

static const who_t nobody = {NULL, NULL, -1};

/* TxnOffsetCommit of one partition (metadata "m"); returns its error once answered. */
static int16_t txn1(fx_t *f, const char *group, int64_t pid, const char *topic, int32_t part,
                    int64_t offset, who_t w)
{
    st_goffset_t p = {.topic = st_kstr(topic),
                      .partition = part,
                      .offset = offset,
                      .leader_epoch = 2,
                      .metadata = st_kstr("m")};
    st_goffsets_t o = {.group_id = st_kstr(group),
                       .member_id = st_kstr(w.member ? w.member : ""),
                       .group_instance_id = st_kstr(w.instance),
                       .generation = w.gen,
                       .producer_id = pid,
                       .producer_epoch = 3,
                       .n = 1,
                       .parts = &p};
    int done = 0;
    st_gcoord_txn_commit(f->c, 0, &o, on_done, &done);
    if (!done)
        run_until(f, &done, 5000);
    assert_int_equal(done, 1);
    return p.error;
}

/* OffsetFetch of one partition: its error, and *offset. */
static int16_t fetch_stable(fx_t *f, const char *group, const char *topic, int32_t part,
                            bool require_stable, int64_t *offset)
{
    st_goffset_t p = {.topic = st_kstr(topic), .partition = part};
    st_goffsets_t o = {
        .group_id = st_kstr(group), .require_stable = require_stable, .n = 1, .parts = &p};
    st_gcoord_fetch(f->c, 0, &o, &f->a);
    assert_int_equal(o.error, 0);
    *offset = p.offset;
    return p.error;
}

static bool pending(fx_t *f, const char *group, int64_t pid, const char *topic, int32_t part,
                    int64_t *offset)
{
    return st_gcoord_pending(f->c, st_kstr(group), pid, st_kstr(topic), part, offset);
}

/* Appends one batch as the replication path does (offsets already in it) at `at` (-1: the
 * log end; more: a gap, as the cleaner leaves). */
static void put_batch(fx_t *f, st_gbatch_t *b, int64_t at, uint16_t extra_attrs)
{
    assert_int_equal(st_gbatch_finish(b), 0);
    uint8_t *h = b->out.data;
    if (extra_attrs) {
        st_put_be16(h + ST_BATCH_OFF_ATTRIBUTES,
                    (uint16_t)(st_be16(h + ST_BATCH_OFF_ATTRIBUTES) | extra_attrs));
        st_put_be32(h + ST_BATCH_OFF_CRC, st_batch_compute_crc(h, b->out.len));
    }
    st_batch_set_base_offset(h, at >= 0 ? at : st_log_end_offset(f->log));
    st_log_append_info_t info;
    assert_int_equal(st_log_append_replica(f->log, b->out.data, b->out.len, &info), 0);
    st_gbatch_fini(b);
}

/* A control batch of pid (records.h) at `at`, as WriteTxnMarkers writes it. */
static void put_marker(fx_t *f, int64_t at, int64_t pid, bool commit)
{
    uint8_t key[4] = {0, 0, 0, commit ? 1 : 0};
    uint8_t value[6] = {0, 0, 0, 0, 0, 5}; /* version 0, coordinator epoch 5 */
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), 1 << 20);
    st_gbatch_set_txn(&b, pid, 3);
    assert_int_equal(st_gbatch_add(&b, key, sizeof key, value, sizeof value), 0);
    put_batch(f, &b, at, ST_BATCH_ATTR_CONTROL);
}

/* The marker durable in the log, then told to the coordinator (WriteTxnMarkers' order). */
static void marker(fx_t *f, int64_t pid, bool commit)
{
    put_marker(f, -1, pid, commit);
    st_gcoord_txn_marker(f->c, 0, pid, commit);
}

/* An offset record of group g for (t, 0) at `at`: in a transactional batch of pid (>= 0), a
 * regular one (-1); offset -1 writes a tombstone. */
static void put_offset(fx_t *f, int64_t at, int64_t pid, const char *g, int64_t offset)
{
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), 1 << 20);
    if (pid >= 0)
        st_gbatch_set_txn(&b, pid, 3);
    st_buf_t k, v;
    st_buf_init(&k);
    st_buf_init(&v);
    st_grec_offset_key(&k, st_kstr(g), st_kstr("t"), 0);
    if (offset >= 0)
        st_grec_offset_value(&v, offset, -1, st_kstr(""), st_wall_ms(), -1);
    assert_int_equal(st_gbatch_add(&b, k.data, k.len, offset < 0 ? NULL : v.data,
                                   offset < 0 ? -1 : (int32_t)v.len),
                     0);
    st_buf_fini(&k);
    st_buf_fini(&v);
    put_batch(f, &b, at, 0);
}

/* An empty batch of pid at `at`: what the cleaner keeps of a producer's last batch. */
static void put_empty(fx_t *f, int64_t at, int64_t pid)
{
    uint8_t h[ST_BATCH_HEADER_SIZE] = {0};
    st_put_be32(h + ST_BATCH_OFF_LENGTH, ST_BATCH_HEADER_SIZE - ST_BATCH_LOG_OVERHEAD);
    h[ST_BATCH_OFF_MAGIC] = ST_BATCH_MAGIC_V2;
    st_put_be16(h + ST_BATCH_OFF_ATTRIBUTES, ST_BATCH_ATTR_TRANSACTIONAL);
    st_put_be32(h + ST_BATCH_OFF_LAST_OFFSET_DELTA, 0);
    st_put_be64(h + ST_BATCH_OFF_PRODUCER_ID, (uint64_t)pid);
    st_put_be16(h + ST_BATCH_OFF_PRODUCER_EPOCH, 3);
    st_put_be32(h + ST_BATCH_OFF_BASE_SEQUENCE, (uint32_t)-1);
    st_put_be32(h + ST_BATCH_OFF_RECORDS_COUNT, 0);
    st_put_be32(h + ST_BATCH_OFF_CRC, st_batch_compute_crc(h, sizeof h));
    st_batch_set_base_offset(h, at);
    st_log_append_info_t info;
    assert_int_equal(st_log_append_replica(f->log, h, sizeof h, &info), 0);
}

/* Starts over on an empty log. */
static void fx_wipe(fx_t *f)
{
    fx_close_all(f);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s/__consumer_offsets-0", f->dir);
    assert_int_equal(system(cmd), 0);
    fx_open_log(f);
}

/* A group with one member at generation 1, Stable; returns the member's id. */
static char *stable_group(fx_t *f, const char *group)
{
    join_t j;
    char *m = join_dynamic(f, &j, group);
    assert_int_equal(j.resp.error_code, 0);
    sync_t s;
    const char *ids[] = {m};
    const char *asg[] = {"A"};
    sync_req(f, &s, group, m, 1, 1, ids, asg);
    if (!s.done)
        run_until(f, &s.done, 5000);
    assert_int_equal(s.resp.error_code, 0);
    return m;
}

/* ---- pending, commit, abort ---- */

static void test_pending_not_visible_until_commit(void **state)
{
    fx_t *f = *state;
    int64_t off;
    assert_int_equal(commit1(f, "g", NULL, -1, "t", 0, 5, ""), 0);
    assert_int_equal(txn1(f, "g", 100, "t", 0, 10, nobody), 0);
    assert_int_equal(txn1(f, "g", 100, "t", 1, 20, nobody), 0);
    assert_int_equal(fetch_stable(f, "g", "t", 0, false, &off), 0);
    assert_int_equal(off, 5); /* the committed one, not the pending */
    assert_int_equal(fetch_stable(f, "g", "t", 1, false, &off), 0);
    assert_int_equal(off, -1);
    assert_true(pending(f, "g", 100, "t", 0, &off));
    assert_int_equal(off, 10);
    assert_int_equal(fetch_stable(f, "g", "t", 0, true, &off), ST_KERR_UNSTABLE_OFFSET_COMMIT);
    assert_int_equal(off, -1);
    assert_int_equal(fetch_stable(f, "g", "t", 2, true, &off), 0); /* nothing pending there */

    /* another producer's marker changes nothing */
    marker(f, 101, true);
    assert_true(pending(f, "g", 100, "t", 0, &off));
    marker(f, 100, true);
    assert_false(pending(f, "g", 100, "t", 0, &off));
    assert_int_equal(fetch_stable(f, "g", "t", 0, true, &off), 0);
    assert_int_equal(off, 10);
    assert_int_equal(fetch_stable(f, "g", "t", 1, true, &off), 0);
    assert_int_equal(off, 20);
    fx_restart(f);
    assert_int_equal(fetch1(f, "g", "t", 0, NULL, 0), 10);
    assert_int_equal(fetch1(f, "g", "t", 1, NULL, 0), 20);
    assert_false(pending(f, "g", 100, "t", 0, &off));
}

static void test_abort_drops(void **state)
{
    fx_t *f = *state;
    int64_t off;
    assert_int_equal(commit1(f, "g", NULL, -1, "t", 0, 5, ""), 0);
    assert_int_equal(txn1(f, "g", 100, "t", 0, 10, nobody), 0);
    marker(f, 100, false);
    assert_false(pending(f, "g", 100, "t", 0, &off));
    assert_int_equal(fetch_stable(f, "g", "t", 0, true, &off), 0);
    assert_int_equal(off, 5);
    /* a COMMIT after the abort has nothing left to apply */
    marker(f, 100, true);
    assert_int_equal(fetch1(f, "g", "t", 0, NULL, 0), 5);
    fx_restart(f);
    assert_int_equal(fetch1(f, "g", "t", 0, NULL, 0), 5);
}

/* One transaction over several groups of the partition: one marker ends it in each. */
static void test_marker_ends_every_group_of_the_producer(void **state)
{
    fx_t *f = *state;
    int64_t off;
    assert_int_equal(txn1(f, "a", 7, "t", 0, 1, nobody), 0);
    assert_int_equal(txn1(f, "b", 7, "t", 0, 2, nobody), 0);
    assert_int_equal(txn1(f, "b", 8, "t", 1, 3, nobody), 0);
    marker(f, 7, true);
    assert_int_equal(fetch1(f, "a", "t", 0, NULL, 0), 1);
    assert_int_equal(fetch1(f, "b", "t", 0, NULL, 0), 2);
    assert_true(pending(f, "b", 8, "t", 1, &off));
    assert_int_equal(fetch1(f, "b", "t", 1, NULL, 0), -1);
    /* a later commit in the same transaction replaces the earlier pending one */
    assert_int_equal(txn1(f, "b", 8, "t", 1, 4, nobody), 0);
    assert_true(pending(f, "b", 8, "t", 1, &off));
    assert_int_equal(off, 4);
    marker(f, 8, true);
    assert_int_equal(fetch1(f, "b", "t", 1, NULL, 0), 4);
}

/* Kafka keeps the offset of the later record of the log: a regular commit written after the
 * transactional one wins at the COMMIT; one written before it loses. */
static void test_interleaving_with_regular_commits(void **state)
{
    fx_t *f = *state;
    assert_int_equal(txn1(f, "g", 1, "t", 0, 10, nobody), 0);
    assert_int_equal(commit1(f, "g", NULL, -1, "t", 0, 7, ""), 0);
    assert_int_equal(fetch1(f, "g", "t", 0, NULL, 0), 7); /* regular: visible at once */
    marker(f, 1, true);
    assert_int_equal(fetch1(f, "g", "t", 0, NULL, 0), 7);

    assert_int_equal(commit1(f, "g", NULL, -1, "t", 1, 7, ""), 0);
    assert_int_equal(txn1(f, "g", 2, "t", 1, 10, nobody), 0);
    marker(f, 2, true);
    assert_int_equal(fetch1(f, "g", "t", 1, NULL, 0), 10);

    /* two producers pending on one partition: each marker by record order */
    assert_int_equal(txn1(f, "g", 3, "t", 2, 30, nobody), 0);
    assert_int_equal(txn1(f, "g", 4, "t", 2, 40, nobody), 0);
    marker(f, 4, true);
    assert_int_equal(fetch1(f, "g", "t", 2, NULL, 0), 40);
    marker(f, 3, true); /* its record is older than the committed one */
    assert_int_equal(fetch1(f, "g", "t", 2, NULL, 0), 40);

    fx_restart(f);
    assert_int_equal(fetch1(f, "g", "t", 0, NULL, 0), 7);
    assert_int_equal(fetch1(f, "g", "t", 1, NULL, 0), 10);
    assert_int_equal(fetch1(f, "g", "t", 2, NULL, 0), 40);
}

/* ---- loading ---- */

/* Without its marker in the log a transaction is still pending after a restart (the
 * transaction coordinator sends the marker later), then ends as usual. */
static void test_load_without_marker_stays_pending(void **state)
{
    fx_t *f = *state;
    int64_t off;
    assert_int_equal(commit1(f, "g", NULL, -1, "t", 0, 5, ""), 0);
    assert_int_equal(txn1(f, "g", 100, "t", 0, 10, nobody), 0);
    assert_int_equal(txn1(f, "only", 101, "t", 0, 3, nobody), 0);
    fx_restart(f);
    assert_true(pending(f, "g", 100, "t", 0, &off));
    assert_int_equal(off, 10);
    assert_int_equal(fetch1(f, "g", "t", 0, NULL, 0), 5);
    assert_int_equal(fetch_stable(f, "g", "t", 0, true, &off), ST_KERR_UNSTABLE_OFFSET_COMMIT);
    /* a group holding nothing but a pending offset is loaded too */
    assert_true(pending(f, "only", 101, "t", 0, &off));
    assert_int_equal(st_gcoord_group_count(f->c), 2);
    marker(f, 100, true);
    marker(f, 101, false);
    assert_int_equal(fetch1(f, "g", "t", 0, NULL, 0), 10);
    assert_int_equal(fetch1(f, "only", "t", 0, NULL, 0), -1);
    fx_restart(f);
    assert_int_equal(fetch1(f, "g", "t", 0, NULL, 0), 10);
    assert_false(pending(f, "only", 101, "t", 0, &off));
}

/* A marker told while the partition is not loaded is read by its load. */
static void test_marker_while_unloaded(void **state)
{
    fx_t *f = *state;
    assert_int_equal(txn1(f, "g", 9, "t", 0, 10, nobody), 0);
    st_gcoord_unload(f->c, 0);
    marker(f, 9, true); /* nothing loaded: nothing to do */
    assert_int_equal(st_gcoord_load(f->c, 0, f->log, 2), 0);
    assert_int_equal(fetch1(f, "g", "t", 0, NULL, 0), 10);
}

typedef struct {
    int64_t at;
    char kind; /* 'R' regular, 'T' transactional of pid, 'C'/'A' marker of pid, 'X' tombstone,
                  'E' empty batch of pid */
    int64_t pid;
    int64_t offset;
} entry_t;

/* Writes a log of entries into an empty log, loads it, and returns the committed offset of
 * (g, t-0) and in *pend whether pid 1 holds one pending. */
static int64_t load_log(fx_t *f, const entry_t *e, int n, bool *pend)
{
    fx_wipe(f);
    for (int i = 0; i < n; i++) {
        switch (e[i].kind) {
        case 'R':
            put_offset(f, e[i].at, -1, "g", e[i].offset);
            break;
        case 'T':
            put_offset(f, e[i].at, e[i].pid, "g", e[i].offset);
            break;
        case 'X':
            put_offset(f, e[i].at, -1, "g", -1);
            break;
        case 'E':
            put_empty(f, e[i].at, e[i].pid);
            break;
        default:
            put_marker(f, e[i].at, e[i].pid, e[i].kind == 'C');
        }
    }
    fx_coord(f);
    int64_t off;
    *pend = pending(f, "g", 1, "t", 0, &off);
    return fetch1(f, "g", "t", 0, NULL, 0);
}

/* Each log next to what Kafka's cleaner may leave of it (the latest record of each key below
 * the last stable offset, no aborted data, no marker once nothing of its transaction is left;
 * a producer's last batch kept empty): both load the same. */
static void test_load_full_and_cleaned_logs(void **state)
{
    fx_t *f = *state;
    bool pend;
    /* committed, then a later regular commit */
    const entry_t a[] = {{0, 'R', -1, 5}, {1, 'T', 1, 10}, {2, 'C', 1, 0}, {3, 'R', -1, 7}};
    const entry_t a1[] = {{2, 'C', 1, 0}, {3, 'R', -1, 7}};
    const entry_t a2[] = {{1, 'E', 1, 0}, {2, 'C', 1, 0}, {3, 'R', -1, 7}};
    const entry_t a3[] = {{3, 'R', -1, 7}};
    assert_int_equal(load_log(f, a, 4, &pend), 7);
    assert_int_equal(load_log(f, a1, 2, &pend), 7);
    assert_int_equal(load_log(f, a2, 3, &pend), 7);
    assert_int_equal(load_log(f, a3, 1, &pend), 7);
    /* a regular commit inside the transaction, before its marker: the later record wins */
    const entry_t b[] = {{0, 'R', -1, 5}, {1, 'T', 1, 10}, {2, 'R', -1, 7}, {3, 'C', 1, 0}};
    const entry_t b1[] = {{2, 'R', -1, 7}, {3, 'C', 1, 0}};
    assert_int_equal(load_log(f, b, 4, &pend), 7);
    assert_int_equal(load_log(f, b1, 2, &pend), 7);
    /* the transactional commit is the latest */
    const entry_t c[] = {{0, 'R', -1, 5}, {1, 'T', 1, 10}, {2, 'C', 1, 0}};
    const entry_t c1[] = {{1, 'T', 1, 10}, {2, 'C', 1, 0}};
    assert_int_equal(load_log(f, c, 3, &pend), 10);
    assert_false(pend);
    assert_int_equal(load_log(f, c1, 2, &pend), 10);
    /* aborted: its data and then its marker go */
    const entry_t d[] = {{0, 'R', -1, 5}, {1, 'T', 1, 10}, {2, 'A', 1, 0}};
    const entry_t d1[] = {{0, 'R', -1, 5}, {2, 'A', 1, 0}};
    const entry_t d2[] = {{0, 'R', -1, 5}};
    assert_int_equal(load_log(f, d, 3, &pend), 5);
    assert_false(pend);
    assert_int_equal(load_log(f, d1, 2, &pend), 5);
    assert_int_equal(load_log(f, d2, 1, &pend), 5);
    assert_false(pend);
    /* one transaction ended, the next of the same producer open (above the last stable
     * offset: never cleaned) */
    const entry_t e[] = {{0, 'T', 1, 10}, {1, 'C', 1, 0}, {2, 'T', 1, 20}};
    assert_int_equal(load_log(f, e, 3, &pend), 10);
    assert_true(pend);
    /* a tombstone removes the pending offset: the COMMIT has nothing to apply */
    const entry_t x[] = {{0, 'R', -1, 5}, {1, 'T', 1, 10}, {2, 'X', -1, 0}, {3, 'C', 1, 0}};
    const entry_t x1[] = {{2, 'X', -1, 0}, {3, 'C', 1, 0}};
    assert_int_equal(load_log(f, x, 4, &pend), -1);
    assert_int_equal(load_log(f, x1, 2, &pend), -1);
    /* a marker with nothing before it (its data cleaned, the marker not yet) */
    const entry_t m[] = {{4, 'C', 1, 0}, {5, 'A', 2, 0}, {6, 'R', -1, 3}};
    assert_int_equal(load_log(f, m, 3, &pend), 3);
}

/* The broker's cleaner on a log of committed transactions and regular commits (what it may
 * remove of those is the same as Kafka's: the older records of each key): a reload after the
 * clean gives what the whole log gave. */
static void test_load_after_clean(void **state)
{
    fx_t *f = *state;
    fx_compacted(f, 1024, 60000);
    for (int i = 0; i < 30; i++) {
        int64_t pid = 50 + i % 3;
        assert_int_equal(txn1(f, "g", pid, "t", i % 4, 100 + i, nobody), 0);
        if (i % 5 == 0)
            assert_int_equal(commit1(f, "g", NULL, -1, "t", i % 4, 1000 + i, ""), 0);
        marker(f, pid, i % 7 != 3);
    }
    int64_t want[4];
    for (int p = 0; p < 4; p++)
        want[p] = fetch1(f, "g", "t", p, NULL, 0);
    fx_restart(f);
    for (int p = 0; p < 4; p++)
        assert_int_equal(fetch1(f, "g", "t", p, NULL, 0), want[p]);
    fx_clean(f);
    fx_restart(f);
    for (int p = 0; p < 4; p++)
        assert_int_equal(fetch1(f, "g", "t", p, NULL, 0), want[p]);
}

/* ---- the batch on disk ---- */

static void test_one_transactional_batch(void **state)
{
    fx_t *f = *state;
    fx_close_all(f);
    f->cfg.max_batch_bytes = 64; /* a regular commit of this size would take many batches */
    fx_open_log(f);
    fx_coord(f);
    int64_t start = st_log_end_offset(f->log);
    st_goffset_t p[20];
    for (int i = 0; i < 20; i++)
        p[i] = (st_goffset_t){
            .topic = st_kstr("t"), .partition = i, .offset = i, .metadata = ST_KSTR_NULL};
    p[3].error = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION; /* refused before: not written */
    st_goffsets_t o = {.group_id = st_kstr("g"),
                       .member_id = ST_KSTR_EMPTY,
                       .group_instance_id = ST_KSTR_NULL,
                       .generation = -1,
                       .producer_id = 4242,
                       .producer_epoch = 7,
                       .n = 20,
                       .parts = p};
    int done = 0;
    st_gcoord_txn_commit(f->c, 0, &o, on_done, &done);
    if (!done)
        run_until(f, &done, 5000);
    assert_int_equal(p[0].error, 0);
    assert_int_equal(p[3].error, ST_KERR_UNKNOWN_TOPIC_OR_PARTITION);
    assert_int_equal(st_log_end_offset(f->log), start + 19);
    st_log_read_t rd;
    assert_int_equal(st_log_read(f->log, start, 1 << 20, -1, &rd), 0);
    uint8_t buf[8192];
    ssize_t n = st_log_read_copy(&rd, buf, sizeof buf);
    st_log_read_release(&rd);
    st_batch_hdr_t h;
    assert_int_equal(st_batch_check(buf, (size_t)n, &h), 0);
    assert_int_equal(st_batch_size(&h), n); /* one batch */
    assert_int_equal(h.records_count, 19);
    assert_true(h.attributes & ST_BATCH_ATTR_TRANSACTIONAL);
    assert_false(h.attributes & ST_BATCH_ATTR_CONTROL);
    assert_int_equal(h.producer_id, 4242);
    assert_int_equal(h.producer_epoch, 7);
    assert_int_equal(h.base_sequence, -1);
    /* nothing valid: nothing written, no group made (Kafka answers without the coordinator) */
    st_goffset_t q = {.topic = st_kstr("t"), .error = ST_KERR_UNKNOWN_TOPIC_OR_PARTITION};
    st_goffsets_t none = {
        .group_id = st_kstr("fresh"), .generation = -1, .producer_id = 1, .n = 1, .parts = &q};
    done = 0;
    st_gcoord_txn_commit(f->c, 0, &none, on_done, &done);
    assert_int_equal(done, 1);
    assert_int_equal(st_gcoord_group_count(f->c), 1);
}

/* ---- require_stable while the write is in flight ---- */

static void test_require_stable_while_writing(void **state)
{
    fx_t *f = *state;
    int64_t off;
    assert_int_equal(commit1(f, "g", NULL, -1, "t", 0, 5, ""), 0);
    f->hold_syncs = true;
    st_goffset_t p = {.topic = st_kstr("t"), .partition = 0, .offset = 9};
    st_goffsets_t o = {.group_id = st_kstr("g"),
                       .member_id = ST_KSTR_EMPTY,
                       .group_instance_id = ST_KSTR_NULL,
                       .generation = -1,
                       .producer_id = 77,
                       .n = 1,
                       .parts = &p};
    int done = 0;
    st_gcoord_txn_commit(f->c, 0, &o, on_done, &done);
    assert_int_equal(done, 0);
    assert_false(pending(f, "g", 77, "t", 0, &off)); /* pending once durable */
    assert_int_equal(fetch_stable(f, "g", "t", 0, true, &off), ST_KERR_UNSTABLE_OFFSET_COMMIT);
    assert_int_equal(fetch_stable(f, "g", "t", 0, false, &off), 0);
    assert_int_equal(off, 5);
    fx_release_syncs(f);
    run_until(f, &done, 5000);
    assert_int_equal(p.error, 0);
    assert_true(pending(f, "g", 77, "t", 0, &off));
    assert_int_equal(fetch_stable(f, "g", "t", 0, true, &off), ST_KERR_UNSTABLE_OFFSET_COMMIT);
    /* every offset of the group (topics null): the pending partition is unstable too */
    st_goffsets_t all = {.group_id = st_kstr("g"), .all = true, .require_stable = true};
    st_gcoord_fetch(f->c, 0, &all, &f->a);
    assert_int_equal(all.n, 1);
    assert_int_equal(all.parts[0].error, ST_KERR_UNSTABLE_OFFSET_COMMIT);
    assert_int_equal(all.parts[0].offset, -1);
}

/* ---- KIP-447: the member checks of a transactional commit ---- */

static void test_kip447_fencing(void **state)
{
    fx_t *f = *state;
    char *m = stable_group(f, "g");
    assert_int_equal(txn1(f, "g", 1, "t", 0, 1, (who_t){m, NULL, 1}), 0);
    assert_int_equal(txn1(f, "g", 1, "t", 0, 1, (who_t){m, NULL, 2}), ST_KERR_ILLEGAL_GENERATION);
    assert_int_equal(txn1(f, "g", 1, "t", 0, 1, (who_t){"nope", NULL, 1}),
                     ST_KERR_UNKNOWN_MEMBER_ID);
    assert_int_equal(txn1(f, "g", 1, "t", 0, 1, (who_t){"", NULL, 1}), ST_KERR_UNKNOWN_MEMBER_ID);
    /* older versions carry no member: accepted even though the group is not Empty */
    assert_int_equal(txn1(f, "g", 1, "t", 0, 1, nobody), 0);
    /* a member id without a generation is still checked */
    assert_int_equal(txn1(f, "g", 1, "t", 0, 1, (who_t){"nope", NULL, -1}),
                     ST_KERR_UNKNOWN_MEMBER_ID);

    /* static members */
    join_t j;
    join(f, &j, "s", NULL, "i1", 5);
    assert_int_equal(j.done, 1);
    assert_int_equal(j.resp.error_code, 0);
    char *sm = st_arena_strndup(&f->a, j.resp.member_id.ptr, (size_t)j.resp.member_id.len);
    int32_t gen = j.resp.generation_id;
    assert_int_equal(txn1(f, "s", 2, "t", 0, 1, (who_t){sm, "i1", gen}), 0);
    assert_int_equal(txn1(f, "s", 2, "t", 0, 1, (who_t){"other", "i1", gen}),
                     ST_KERR_FENCED_INSTANCE_ID);
    assert_int_equal(txn1(f, "s", 2, "t", 0, 1, (who_t){sm, "i2", gen}), ST_KERR_UNKNOWN_MEMBER_ID);
    /* CompletingRebalance: a transactional commit is not refused for the state, a regular
     * one is (REBALANCE_IN_PROGRESS) */
    assert_int_equal(commit1(f, "s", sm, gen, "t", 0, 1, ""), ST_KERR_REBALANCE_IN_PROGRESS);

    /* a group that does not exist: made Empty without a generation, else refused */
    int before = st_gcoord_group_count(f->c);
    assert_int_equal(txn1(f, "new", 3, "t", 0, 1, (who_t){NULL, NULL, 4}),
                     ST_KERR_ILLEGAL_GENERATION);
    assert_int_equal(st_gcoord_group_count(f->c), before);
    assert_int_equal(txn1(f, "new", 3, "t", 0, 1, nobody), 0);
    assert_int_equal(st_gcoord_group_count(f->c), before + 1);
    st_kp_describe_groups_resp_group_t d;
    st_kp_describe_groups_resp_group_init(&d);
    st_gcoord_describe(f->c, 0, st_kstr("new"), 5, &f->a, &d);
    assert_true(st_kstr_eq(d.group_state, "Empty"));

    assert_int_equal(txn1(f, "", 3, "t", 0, 1, nobody), ST_KERR_INVALID_GROUP_ID);
    assert_int_equal(txn1(f, "new", -1, "t", 0, 1, nobody), ST_KERR_INVALID_PRODUCER_ID_MAPPING);
}

/* ---- write errors ---- */

static int16_t refusal_kerr;
static int refusal_err;

static int append_refused(void *ctx, int32_t partition, uint8_t *data, size_t len,
                          st_gcoord_appended_t *out, void (*done)(void *arg, int res), void *arg)
{
    (void)ctx;
    (void)partition;
    (void)data;
    (void)len;
    (void)done;
    (void)arg;
    out->error = refusal_kerr;
    return refusal_err;
}

static void test_write_errors(void **state)
{
    fx_t *f = *state;
    fx_close_all(f);
    f->cfg.append = append_refused;
    fx_open_log(f);
    fx_coord(f);
    refusal_err = ST_E_INVALID;
    refusal_kerr = ST_KERR_PRODUCER_FENCED;
    assert_int_equal(txn1(f, "g", 1, "t", 0, 1, nobody), ST_KERR_PRODUCER_FENCED);
    refusal_kerr = ST_KERR_INVALID_PRODUCER_EPOCH;
    assert_int_equal(txn1(f, "g", 1, "t", 0, 1, nobody), ST_KERR_INVALID_PRODUCER_EPOCH);
    refusal_err = ST_E_NOT_LEADER;
    refusal_kerr = ST_KERR_NOT_LEADER_OR_FOLLOWER;
    assert_int_equal(txn1(f, "g", 1, "t", 0, 1, nobody), ST_KERR_NOT_COORDINATOR);
    refusal_err = ST_E_FEW_REPLICAS;
    refusal_kerr = ST_KERR_NOT_ENOUGH_REPLICAS;
    assert_int_equal(txn1(f, "g", 1, "t", 0, 1, nobody), ST_KERR_COORDINATOR_NOT_AVAILABLE);
    int64_t off;
    assert_false(pending(f, "g", 1, "t", 0, &off));
    f->cfg.append = NULL;
}

/* ---- removals with pending offsets ---- */

static int16_t delete_group(fx_t *f, const char *group)
{
    int16_t err = -1;
    int done = 0;
    st_gcoord_delete_group(f->c, 0, st_kstr(group), &err, on_done, &done);
    if (!done)
        run_until(f, &done, 5000);
    return err;
}

static void test_delete_group_with_pending(void **state)
{
    fx_t *f = *state;
    int64_t off;
    assert_int_equal(txn1(f, "d", 5, "t", 0, 10, nobody), 0);
    assert_int_equal(commit1(f, "d", NULL, -1, "t", 1, 3, ""), 0);
    assert_int_equal(delete_group(f, "d"), 0);
    assert_int_equal(st_gcoord_group_count(f->c), 0);
    marker(f, 5, true); /* the group is gone: nothing comes back */
    assert_int_equal(fetch1(f, "d", "t", 0, NULL, 0), -1);
    fx_restart(f);
    /* its tombstones covered the pending key: the log replays to nothing */
    assert_int_equal(st_gcoord_group_count(f->c), 0);
    assert_false(pending(f, "d", 5, "t", 0, &off));
}

static void test_offset_delete_with_pending(void **state)
{
    fx_t *f = *state;
    int64_t off;
    assert_int_equal(txn1(f, "o", 5, "t", 0, 10, nobody), 0);
    st_goffset_t p = {.topic = st_kstr("t"), .partition = 0};
    st_goffsets_t o = {.group_id = st_kstr("o"), .n = 1, .parts = &p};
    int done = 0;
    int64_t end = st_log_end_offset(f->log);
    st_gcoord_offset_delete(f->c, 0, &o, on_done, &done);
    if (!done)
        run_until(f, &done, 5000);
    assert_int_equal(o.error, 0);
    assert_int_equal(st_log_end_offset(f->log), end + 1); /* a tombstone for the pending key */
    assert_false(pending(f, "o", 5, "t", 0, &off));
    marker(f, 5, true);
    assert_int_equal(fetch1(f, "o", "t", 0, NULL, 0), -1);
    fx_restart(f);
    assert_int_equal(fetch1(f, "o", "t", 0, NULL, 0), -1);
}

static void test_expiry_waits_for_pending(void **state)
{
    fx_t *f = *state;
    fx_close_all(f);
    f->cfg.offsets_retention_ms = 0; /* everything is past retention */
    fx_open_log(f);
    fx_coord(f);
    assert_int_equal(commit1(f, "e", NULL, -1, "t", 0, 5, ""), 0);
    assert_int_equal(commit1(f, "e", NULL, -1, "t", 1, 6, ""), 0);
    assert_int_equal(txn1(f, "e", 9, "t", 0, 7, nobody), 0);
    assert_int_equal(txn1(f, "p", 9, "t", 0, 7, nobody), 0); /* pending only */
    st_gcoord_expire_now(f->c);
    assert_int_equal(fetch1(f, "e", "t", 0, NULL, 0), 5); /* a pending offset holds it */
    assert_int_equal(fetch1(f, "e", "t", 1, NULL, 0), -1);
    assert_int_equal(st_gcoord_group_count(f->c), 2); /* open transactions keep both */
    marker(f, 9, false);
    st_gcoord_expire_now(f->c);
    assert_int_equal(fetch1(f, "e", "t", 0, NULL, 0), -1);
    /* the groups go once their tombstones are durable */
    int64_t deadline = st_mono_ms() + 5000;
    while (st_gcoord_group_count(f->c) > 0 && st_mono_ms() < deadline) {
        int never = 0;
        run_until(f, &never, 2);
    }
    assert_int_equal(st_gcoord_group_count(f->c), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pending_not_visible_until_commit, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_abort_drops, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_marker_ends_every_group_of_the_producer, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_interleaving_with_regular_commits, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_load_without_marker_stays_pending, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_marker_while_unloaded, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_load_full_and_cleaned_logs, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_load_after_clean, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_one_transactional_batch, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_require_stable_while_writing, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_kip447_fencing, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_write_errors, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_delete_group_with_pending, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_offset_delete_with_pending, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_expiry_waits_for_pending, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
