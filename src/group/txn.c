/*
 * txn.c — the group coordinator's part of transactions (coord.h, "transactional offsets"):
 * TxnOffsetCommit, the pending offsets of each open transaction, and the markers that end
 * them (Kafka's OffsetMetadataManager: commitTransactionalOffset, replay of a transactional
 * offset commit, replayEndTransactionMarker).
 *
 * State: each group holds its open transactions (g->txns), one per producer id with pending
 * offsets in this group, each also chained in the coordinator's table by producer id
 * (c->txns), so a marker finds its transactions without a scan of every group:
 *
 *   TxnOffsetCommit durable --(txn_written)--> pending in (g, pid)
 *   COMMIT marker of pid durable (st_gcoord_txn_marker, or met by the loader)
 *       --(st_group_txn_end)--> each pending offset committed unless the group's committed
 *                               one came from a later record, then the transaction freed
 *   ABORT marker --(st_group_txn_end)--> the transaction freed
 *   tombstone of a key (st_group_offset_del) --> its pending offsets removed
 *
 * Ordering: a record's place in the log decides, as in Kafka: every offset keeps the offset
 * of the record that set it (st_goff_t.record_offset), and a commit never replaces an offset
 * set by a later record. So a regular commit written after a transactional one, and durable
 * before its marker, wins; one written before it loses; and a cleaned log (the cleaner keeps
 * the latest record of each key, removes aborted data and, once nothing of a transaction is
 * left, its marker) loads to the same offsets.
 *
 * Threads: the coordinator's shard, as everything in group/.
 */
#include "group/coord_impl.h"

#include "base/assert.h"
#include "base/clock.h"
#include "base/log.h"

/* ---- open transactions ---- */

static size_t txn_bucket(int64_t pid)
{
    uint64_t h = (uint64_t)pid * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (ST_GTXN_BUCKETS - 1);
}

st_gtxn_t *st_group_txn(st_ggroup_t *g, int64_t pid, bool create)
{
    for (st_gtxn_t *t = g->txns; t; t = t->next)
        if (t->pid == pid)
            return t;
    if (!create)
        return NULL;
    st_gtxn_t *t = calloc(1, sizeof *t);
    if (!t || st_gofftab_init(&t->offs)) {
        free(t);
        return NULL;
    }
    t->g = g;
    t->pid = pid;
    t->next = g->txns;
    g->txns = t;
    st_gtxn_t **chain = &g->c->txns[txn_bucket(pid)];
    t->pnext = *chain;
    *chain = t;
    ST_DEBUG_ASSERT(st_group_txns_check(g));
    return t;
}

static void txn_free(st_gtxn_t *t)
{
    st_ggroup_t *g = t->g;
    for (st_gtxn_t **pp = &g->txns; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    for (st_gtxn_t **pp = &g->c->txns[txn_bucket(t->pid)]; *pp; pp = &(*pp)->pnext)
        if (*pp == t) {
            *pp = t->pnext;
            break;
        }
    st_gofftab_fini(&t->offs);
    free(t);
}

void st_group_txns_free(st_ggroup_t *g)
{
    while (g->txns)
        txn_free(g->txns);
}

bool st_group_has_pending(const st_ggroup_t *g, st_kstr_t topic, int32_t partition)
{
    for (const st_gtxn_t *t = g->txns; t; t = t->next)
        if (st_gofftab_find(&t->offs, topic, partition))
            return true;
    return false;
}

bool st_group_pending_or_writing(const st_ggroup_t *g, st_kstr_t topic, int32_t partition)
{
    if (st_group_has_pending(g, topic, partition))
        return true;
    for (const st_gwrite_t *w = g->writes; w; w = w->gnext)
        for (int i = 0; w->commits && w->pid >= 0 && i < w->o->n; i++) {
            const st_goffset_t *p = &w->o->parts[i];
            if (!p->error && p->partition == partition && topic.len == p->topic.len &&
                (topic.len <= 0 || memcmp(topic.ptr, p->topic.ptr, (size_t)topic.len) == 0))
                return true;
        }
    return false;
}

bool st_group_txns_check(const st_ggroup_t *g)
{
    for (const st_gtxn_t *t = g->txns; t; t = t->next) {
        if (t->g != g)
            return false;
        bool chained = false;
        for (const st_gtxn_t *x = g->c->txns[txn_bucket(t->pid)]; x && !chained; x = x->pnext)
            chained = x == t;
        for (const st_gtxn_t *o = t->next; o && chained; o = o->next)
            chained = o->pid != t->pid; /* one transaction per producer in a group */
        if (!chained)
            return false;
    }
    return true;
}

/* Kafka's replayEndTransactionMarker for one group's transaction. */
static void txn_apply(st_gtxn_t *t, bool commit)
{
    st_ggroup_t *g = t->g;
    int applied = 0, kept = 0;
    for (size_t i = 0; commit && i < t->offs.nb; i++)
        for (st_goff_t *o = t->offs.b[i]; o; o = o->next) {
            st_goff_t *x = st_gofftab_find(&g->offs, as_kstr(o->topic), o->partition);
            if (x && x->record_offset > o->record_offset) {
                kept++; /* a later regular commit of the same partition wins */
                continue;
            }
            if (st_gofftab_put(&g->offs, o) == 0)
                applied++;
        }
    ST_DEBUG_ASSERT(st_group_txns_check(g));
    ST_DEBUG("group %.*s: transaction of producer %lld %s: %d offset(s) committed, %d older "
             "than the committed ones",
             ST_GSTR_ARG(g->id), (long long)t->pid, commit ? "committed" : "aborted", applied,
             kept);
    txn_free(t);
}

void st_group_txn_end(st_gcoord_t *c, int32_t partition, int64_t pid, bool commit)
{
    for (st_gtxn_t *t = c->txns[txn_bucket(pid)], *next; t; t = next) {
        next = t->pnext;
        if (t->pid == pid && t->g->partition == partition)
            txn_apply(t, commit);
    }
}

void st_gcoord_txn_marker(st_gcoord_t *c, int32_t partition, int64_t pid, bool commit)
{
    if (!st_gcoord_loaded(c, partition))
        return;
    st_group_txn_end(c, partition, pid, commit);
}

bool st_gcoord_pending(const st_gcoord_t *c, st_kstr_t group, int64_t pid, st_kstr_t topic,
                       int32_t partition, int64_t *offset)
{
    st_ggroup_t *g = st_group_find(c, group);
    st_gtxn_t *t = g ? st_group_txn(g, pid, false) : NULL;
    st_goff_t *o = t ? st_gofftab_find(&t->offs, topic, partition) : NULL;
    if (o)
        *offset = o->offset;
    return o != NULL;
}

/* ---- TxnOffsetCommit ---- */

/* Kafka's validateTransactionalOffsetCommit with the classic group's validateOffsetCommit
 * (isTransactional): *g is the group (created when it did not exist and may be), or NULL. */
static int16_t txn_check(st_gcoord_t *c, int32_t partition, const st_goffsets_t *o,
                         st_ggroup_t **out)
{
    *out = NULL;
    if (c->closed || !st_gcoord_loaded(c, partition))
        return ST_KERR_NOT_COORDINATOR;
    if (o->group_id.len <= 0)
        return ST_KERR_INVALID_GROUP_ID;
    if (o->producer_id < 0)
        return ST_KERR_INVALID_PRODUCER_ID_MAPPING;
    st_ggroup_t *g = st_group_find(c, o->group_id);
    if (!g) {
        if (o->generation >= 0)
            return ST_KERR_ILLEGAL_GENERATION;
        /* a simple group, as Kafka creates for a commit from outside group management */
        if (!(g = st_group_create(c, o->group_id, partition)))
            return ST_KERR_UNKNOWN_SERVER_ERROR;
    }
    *out = g;
    if (g->state == G_DEAD)
        return ST_KERR_COORDINATOR_NOT_AVAILABLE;
    if (g->type == G_TYPE_CONSUMER) {
        /* KIP-848: the generation is the member's epoch; TxnOffsetCommit has no
         * STALE_MEMBER_EPOCH, Kafka answers ILLEGAL_GENERATION instead */
        int16_t err = st_cgroup_check_member(c, g, o->member_id, o->generation, true);
        return err == ST_KERR_STALE_MEMBER_EPOCH ? ST_KERR_ILLEGAL_GENERATION : err;
    }
    if (o->generation < 0 && g->state == G_EMPTY)
        return 0;
    if (o->generation < 0 && o->member_id.len <= 0 && o->group_instance_id.len < 0)
        return 0; /* older versions carry no member: accepted whatever the group's state */
    if (o->group_instance_id.len >= 0) {
        st_gmember_t *sm = st_group_member_find_static(g, o->group_instance_id);
        if (!sm)
            return ST_KERR_UNKNOWN_MEMBER_ID;
        if (!kstr_is(o->member_id, sm->member_id))
            return ST_KERR_FENCED_INSTANCE_ID;
    }
    if (!st_group_member_find(g, o->member_id))
        return ST_KERR_UNKNOWN_MEMBER_ID;
    if (o->generation != g->generation)
        return ST_KERR_ILLEGAL_GENERATION;
    return 0;
}

/* The answer of a failed transactional write: the producer's refusal by the partition as it
 * is (Kafka passes those through), else what any failed write of the coordinator answers. */
static int16_t txn_write_kerr(const st_gwrite_t *w, int res)
{
    switch (w->app.error) {
    case ST_KERR_INVALID_PRODUCER_EPOCH:
    case ST_KERR_PRODUCER_FENCED:
    case ST_KERR_INVALID_TXN_STATE:
    case ST_KERR_INVALID_PRODUCER_ID_MAPPING:
    case ST_KERR_TRANSACTION_COORDINATOR_FENCED:
        return w->app.error;
    default:
        return res == ST_E_TOO_LARGE ? ST_KERR_INVALID_COMMIT_OFFSET_SIZE : write_kerr(res);
    }
}

/* Durable: the offsets are pending for (group, producer); the k-th record written is at
 * base_offset + k. */
static void txn_written(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    (void)c;
    st_goffsets_t *o = w->o;
    st_ggroup_t *g = w->g;
    /* an unloaded group's next load reads the records from the log */
    st_gtxn_t *t = res || g->unloaded ? NULL : st_group_txn(g, w->pid, true);
    int64_t rec = w->app.base_offset;
    for (int i = 0; i < o->n; i++) {
        st_goffset_t *p = &o->parts[i];
        if (p->error)
            continue;
        if (res)
            p->error = txn_write_kerr(w, res);
        else if (!g->unloaded && (!t || st_gofftab_set(&t->offs, p->topic, p->partition, p->offset,
                                                       p->leader_epoch, p->metadata, w->ts, rec)))
            p->error = ST_KERR_UNKNOWN_SERVER_ERROR;
        if (rec >= 0)
            rec++;
    }
    w->done(w->done_arg);
}

static void fail_all(st_goffsets_t *o, int16_t err)
{
    for (int i = 0; i < o->n; i++)
        if (!o->parts[i].error)
            o->parts[i].error = err;
}

void st_gcoord_txn_commit(st_gcoord_t *c, int32_t partition, st_goffsets_t *o,
                          st_gcoord_done_fn done, void *arg)
{
    int valid = 0;
    for (int i = 0; i < o->n; i++)
        valid += !o->parts[i].error;
    if (valid == 0) { /* Kafka answers without asking the coordinator */
        done(arg);
        return;
    }
    st_ggroup_t *g;
    int16_t err = txn_check(c, partition, o, &g);
    if (err) {
        fail_all(o, err);
        done(arg);
        return;
    }
    int64_t now = st_wall_ms();
    st_gwrite_t *w = st_group_write_new(c, partition, g, txn_written);
    st_gbatch_t b;
    st_gbatch_init(&b, now, c->cfg.max_batch_bytes);
    st_gbatch_set_txn(&b, o->producer_id, o->producer_epoch);
    int rc = w ? 0 : -ENOMEM;
    for (int i = 0; i < o->n && !rc; i++) {
        st_goffset_t *p = &o->parts[i];
        if (p->error)
            continue;
        if (p->metadata.len > ST_GCOORD_MAX_METADATA) {
            p->error = ST_KERR_OFFSET_METADATA_TOO_LARGE;
            continue;
        }
        rc = st_group_add_offset_record(&b, o->group_id, p->topic, p->partition, NULL, now, p);
    }
    if (rc) {
        if (w)
            st_group_write_free(w);
        st_gbatch_fini(&b);
        fail_all(o, ST_KERR_UNKNOWN_SERVER_ERROR);
        done(arg);
        return;
    }
    w->o = o;
    w->commits = true;
    w->pid = o->producer_id;
    w->ts = now;
    w->done = done;
    w->done_arg = arg;
    st_group_write(c, &b, w);
    st_gbatch_fini(&b);
}
