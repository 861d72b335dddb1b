/*
 * persist.c — the coordinator's side of __consumer_offsets: writes to a partition's log
 * (answered once durable, invariant 1), the records it writes (layouts in records.h), and
 * loading a partition at start-up by replaying its records in log order (what the log
 * cleaner leaves loads as the whole log would, invariant 2).
 */
#include "group/coord_impl.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"

/* ---- writes to the partition log ---- */

void st_group_write_free(st_gwrite_t *w)
{
    for (int i = 0; i < w->nassign; i++) {
        gstr_free(&w->assign_ids[i]);
        free((void *)w->assign[i].ptr);
    }
    free(w->assign_ids);
    free(w->assign);
    free(w);
}

/* Runs w's callback, frees w, and frees its group if that is Dead and no other write refers
 * to it any more. */
static void write_done(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    st_ggroup_t *g = w->g;
    if (w->cb)
        w->cb(c, w, res);
    st_group_write_free(w);
    if (g && (g->state == G_DEAD || g->unloaded) && !g->writes)
        st_group_free(c, g);
}

static void write_durable(void *arg, int res)
{
    st_gwrite_t *w = arg;
    st_gcoord_t *c = w->c;
    if (w->g) {
        st_gwrite_t **pp = &w->g->writes;
        while (*pp != w)
            pp = &(*pp)->gnext;
        *pp = w->gnext;
    }
    if (res)
        ST_WARN("__consumer_offsets-%d: write failed: %s", w->partition, st_strerror(res));
    write_done(c, w, res);
}

/* Appends the batches of b to the partition's log; w->cb runs once they are durable (or the
 * append failed), possibly before this returns. Takes w. */
void st_group_write(st_gcoord_t *c, st_gbatch_t *b, st_gwrite_t *w)
{
    st_log_t *log = c->logs[w->partition];
    int rc = st_gbatch_finish(b);
    if (!rc && b->total == 0) {
        write_done(c, w, 0);
        return;
    }
    if (!rc && !log)
        rc = ST_E_CLOSED;
    if (!rc && c->cfg.append) {
        if (w->g) {
            st_gwrite_t **pp = &w->g->writes;
            while (*pp)
                pp = &(*pp)->gnext;
            *pp = w;
        }
        rc = c->cfg.append(c->cfg.ctx, w->partition, b->out.data, b->out.len, &w->app,
                           write_durable, w);
        if (rc)
            write_durable(w, rc);
        return;
    }
    st_log_append_info_t info;
    if (!rc) {
        st_batch_verdict_t v = {0};
        rc = st_log_append(log, b->out.data, b->out.len, 0, &info, &v);
        if (rc)
            ST_WARN("__consumer_offsets-%d: append refused: %s", w->partition,
                    v.why ? v.why : st_strerror(rc));
    }
    if (rc) {
        write_done(c, w, rc);
        return;
    }
    w->app.base_offset = info.base_offset;
    if (w->g) {
        st_gwrite_t **pp = &w->g->writes;
        while (*pp)
            pp = &(*pp)->gnext;
        *pp = w;
    }
    rc = st_log_wait_durable(log, info.last_offset + 1, write_durable, w);
    if (rc != 0)
        write_durable(w, rc > 0 ? 0 : rc);
}

st_gwrite_t *st_group_write_new(st_gcoord_t *c, int32_t partition, st_ggroup_t *g, st_gwrite_fn cb)
{
    st_gwrite_t *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->c = c;
    w->partition = partition;
    w->g = g;
    w->cb = cb;
    w->generation = g ? g->generation : 0;
    w->pid = -1;
    w->app.base_offset = -1;
    return w;
}

int st_group_add_offset_record(st_gbatch_t *b, st_kstr_t group, st_kstr_t topic, int32_t partition,
                               const st_goff_t *o, int64_t ts, const st_goffset_t *in)
{
    st_buf_t k, v;
    st_buf_init(&k);
    st_buf_init(&v);
    st_grec_offset_key(&k, group, topic, partition);
    if (o)
        st_grec_offset_value(&v, o->offset, o->leader_epoch, as_kstr(o->metadata), o->commit_ts,
                             o->expire_ts);
    else if (in)
        st_grec_offset_value(&v, in->offset, in->leader_epoch, in->metadata,
                             in->commit_ts > 0 ? in->commit_ts : ts,
                             in->expire_ts > 0 ? in->expire_ts : -1);
    int rc = k.oom || v.oom
                 ? -ENOMEM
                 : st_gbatch_add(b, k.data, k.len, v.data, (o || in) ? (int32_t)v.len : -1);
    st_buf_fini(&k);
    st_buf_fini(&v);
    return rc;
}

int st_group_add_group_record(st_gbatch_t *b, st_kstr_t group, const uint8_t *value,
                              int32_t value_len)
{
    st_buf_t k;
    st_buf_init(&k);
    st_grec_group_key(&k, group);
    int rc = k.oom ? -ENOMEM : st_gbatch_add(b, k.data, k.len, value, value ? value_len : -1);
    st_buf_fini(&k);
    return rc;
}

/* The group metadata value of g now, with `assign` (if given) in place of the members'
 * assignments. */
static int group_value(st_ggroup_t *g, int nassign, const st_gstr_t *ids, const st_kbytes_t *assign,
                       uint8_t **out, int32_t *out_len)
{
    st_grec_t rec = {0};
    rec.protocol_type = g->protocol_type.ptr ? as_kstr(g->protocol_type) : ST_KSTR_EMPTY;
    rec.generation = g->generation;
    rec.protocol = as_kstr(g->protocol);
    rec.leader = as_kstr(g->leader);
    rec.current_state_timestamp = g->state_ts;
    rec.nmembers = g->nmembers;
    rec.members = calloc((size_t)g->nmembers + 1, sizeof *rec.members);
    if (!rec.members)
        return -ENOMEM;
    for (int i = 0; i < g->nmembers; i++) {
        st_gmember_t *m = g->members[i];
        st_grec_member_t *rm = &rec.members[i];
        rm->member_id = as_kstr(m->member_id);
        rm->group_instance_id = as_kstr(m->instance_id);
        rm->client_id = as_kstr(m->client_id);
        rm->client_host = as_kstr(m->client_host);
        rm->rebalance_timeout = m->rebalance_timeout;
        rm->session_timeout = m->session_timeout;
        rm->subscription = (st_kbytes_t){(const uint8_t *)"", 0};
        for (int k = 0; k < m->nprotos; k++)
            if (g->protocol.ptr && gstr_eq(m->protos[k].name, g->protocol))
                rm->subscription = (st_kbytes_t){m->protos[k].meta, m->protos[k].meta_len};
        rm->assignment = (st_kbytes_t){m->assignment, m->assignment_len};
        if (ids) {
            rm->assignment = (st_kbytes_t){(const uint8_t *)"", 0};
            for (int k = 0; k < nassign; k++)
                if (gstr_eq(ids[k], m->member_id))
                    rm->assignment = assign[k];
        }
    }
    st_buf_t v;
    st_buf_init(&v);
    st_grec_group_value(&v, &rec);
    free(rec.members);
    if (v.oom) {
        st_buf_fini(&v);
        return -ENOMEM;
    }
    size_t n;
    *out = st_buf_steal(&v, &n);
    *out_len = (int32_t)n;
    return 0;
}

/* Adds g's metadata record (with `assign` as in group_value) to b. */
int st_group_add_group_value(st_gbatch_t *b, st_ggroup_t *g, int nassign, const st_gstr_t *ids,
                             const st_kbytes_t *assign)
{
    uint8_t *value;
    int32_t len;
    int rc = group_value(g, nassign, ids, assign, &value, &len);
    if (rc)
        return rc;
    rc = st_group_add_group_record(b, as_kstr(g->id), value, len);
    free(value);
    return rc;
}

static void persist_done(st_gcoord_t *c, st_gwrite_t *w, int res)
{
    (void)c;
    if (res == 0)
        w->g->stored = true;
}

/* Writes g's metadata as it is now (Empty after a generation with no member, a static
 * member's new id). The answer does not wait for it. */
void st_group_persist(st_gcoord_t *c, st_ggroup_t *g)
{
    if (c->closed)
        return;
    st_gwrite_t *w = st_group_write_new(c, g->partition, g, persist_done);
    if (!w)
        return;
    st_gbatch_t b;
    st_gbatch_init(&b, st_wall_ms(), c->cfg.max_batch_bytes);
    if (st_group_add_group_value(&b, g, 0, NULL, NULL)) {
        st_gbatch_fini(&b);
        st_group_write_free(w);
        return;
    }
    st_group_write(c, &b, w);
    st_gbatch_fini(&b);
}

/* ---- loading ---- */

static void load_group_value(st_gcoord_t *c, st_ggroup_t *g, const st_grec_t *r)
{
    for (int i = 0; i < g->nmembers; i++)
        st_group_member_free(c, g->members[i]);
    g->nmembers = 0;
    gstr_free(&g->protocol_type);
    gstr_free(&g->protocol);
    gstr_free(&g->leader);
    g->generation = 0;
    g->state = G_EMPTY;
    g->stored = !r->tombstone;
    if (r->tombstone)
        return;
    if (r->protocol_type.len > 0)
        gstr_set(&g->protocol_type, r->protocol_type);
    g->generation = r->generation;
    gstr_set(&g->protocol, r->protocol);
    gstr_set(&g->leader, r->leader);
    g->state_ts = r->current_state_timestamp >= 0 ? r->current_state_timestamp : st_wall_ms();
    for (int32_t i = 0; i < r->nmembers; i++) {
        const st_grec_member_t *rm = &r->members[i];
        st_kp_join_group_req_protocol_t proto = {r->protocol, rm->subscription};
        st_kp_join_group_req_t req;
        st_kp_join_group_req_init(&req);
        req.group_instance_id = rm->group_instance_id;
        req.session_timeout_ms = rm->session_timeout;
        req.rebalance_timeout_ms = rm->rebalance_timeout;
        req.protocols = &proto;
        req.protocols_count = r->protocol.len >= 0 ? 1 : 0;
        st_gmember_t *m =
            st_group_member_new(g, rm->member_id, &req, 1, rm->client_id, rm->client_host);
        if (m && rm->assignment.len > 0) {
            m->assignment = malloc((size_t)rm->assignment.len);
            if (m->assignment) {
                memcpy(m->assignment, rm->assignment.ptr, (size_t)rm->assignment.len);
                m->assignment_len = rm->assignment.len;
            }
        }
    }
    g->state = g->nmembers > 0 ? G_STABLE : G_EMPTY;
}

/* One record of the log; pid >= 0: of a transactional batch of that producer. */
static void load_record(st_gcoord_t *c, int32_t partition, const st_batch_record_t *rec,
                        int64_t pid, st_arena_t *a)
{
    if (rec->key && rec->key_len >= 2) {
        int16_t kv = (int16_t)st_be16(rec->key);
        if (kv >= 3 && kv <= 8) { /* a consumer group's (KIP-848) */
            st_cgroup_load_record(c, partition, kv, rec->key, rec->key_len, rec->value,
                                  rec->value_len);
            return;
        }
    }
    st_grec_t r;
    int rc = st_grec_decode(rec->key, rec->key_len, rec->value, rec->value_len, a, &r);
    if (rc) {
        if (rc != ST_E_UNSUPPORTED)
            ST_WARN("__consumer_offsets-%d: record at offset %lld does not parse: %s", partition,
                    (long long)rec->offset, st_strerror(rc));
        return;
    }
    st_ggroup_t *g = st_group_find(c, r.group);
    if (!g) {
        if (r.tombstone)
            return;
        g = st_group_create(c, r.group, partition);
        if (!g)
            return;
    }
    if (r.kind == ST_GREC_OFFSET) {
        st_gtxn_t *t = pid >= 0 && !r.tombstone ? st_group_txn(g, pid, true) : NULL;
        if (r.tombstone)
            st_group_offset_del(g, r.topic, r.partition); /* pending ones too (Kafka's replay) */
        else if ((pid < 0 || t) &&
                 st_gofftab_set(t ? &t->offs : &g->offs, r.topic, r.partition, r.offset,
                                r.leader_epoch, r.metadata, r.commit_timestamp, rec->offset) == 0)
            st_gofftab_expire(t ? &t->offs : &g->offs, r.topic, r.partition, r.expire_timestamp);
    } else if (g->type == G_TYPE_CLASSIC) {
        load_group_value(c, g, &r);
    }
}

/* A control batch: a marker of its producer ends the transaction (records.h). */
static void load_control(st_gcoord_t *c, int32_t partition, const uint8_t *p, size_t size,
                         const st_batch_hdr_t *h, int64_t from)
{
    st_batch_iter_t it;
    st_batch_record_t rec;
    if (h->producer_id < 0 || st_batch_iter_init(&it, p, size) != 0 ||
        st_batch_iter_next(&it, &rec) != 1 || rec.offset < from)
        return;
    int16_t type;
    int rc = st_grec_control_decode(rec.key, rec.key_len, &type);
    if (rc)
        ST_WARN("__consumer_offsets-%d: control record at offset %lld does not parse: %s",
                partition, (long long)rec.offset, st_strerror(rc));
    else if (type == ST_GREC_ABORT || type == ST_GREC_COMMIT)
        st_group_txn_end(c, partition, h->producer_id, type == ST_GREC_COMMIT);
}

/* One batch of the log, at or past offset `from`: its records replayed in order (those of a
 * transactional batch pending for its producer), or its marker applied. */
static void load_batch(st_gcoord_t *c, int32_t partition, const uint8_t *p, size_t size,
                       const st_batch_hdr_t *h, int64_t from, st_arena_t *a, int64_t *records)
{
    if (h->attributes & ST_BATCH_ATTR_CONTROL) {
        load_control(c, partition, p, size, h, from);
        return;
    }
    int64_t pid = (h->attributes & ST_BATCH_ATTR_TRANSACTIONAL) ? h->producer_id : -1;
    st_batch_iter_t it;
    if (st_batch_iter_init(&it, p, size) != 0) {
        ST_WARN("__consumer_offsets-%d: compressed batch at %lld skipped", partition,
                (long long)h->base_offset);
        return;
    }
    st_batch_record_t rec;
    while (st_batch_iter_next(&it, &rec) == 1) {
        if (rec.offset >= from) {
            load_record(c, partition, &rec, pid, a);
            (*records)++;
        }
        st_arena_reset(a);
    }
}

int st_gcoord_load(st_gcoord_t *c, int32_t partition, st_log_t *log, int32_t epoch)
{
    if (partition < 0 || partition >= c->cfg.num_partitions)
        return ST_E_INVALID;
    if (c->logs[partition])
        return ST_E_EXISTS;
    int64_t t0 = st_mono_ms();
    int64_t off = st_log_start_offset(log), end = st_log_end_offset(log);
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    st_arena_t a;
    st_arena_init(&a, 16384);
    int rc = 0;
    int64_t records = 0;
    while (off < end) {
        st_log_read_t rd;
        rc = st_log_read(log, off, 1 << 20, -1, &rd);
        if (rc)
            break;
        if (rd.nranges == 0 || rd.next_offset <= off) {
            st_log_read_release(&rd);
            break;
        }
        if ((size_t)rd.bytes > cap) {
            uint8_t *nb = realloc(buf, (size_t)rd.bytes);
            if (!nb) {
                st_log_read_release(&rd);
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap = (size_t)rd.bytes;
        }
        ssize_t n = st_log_read_copy(&rd, buf, cap);
        int64_t next = rd.next_offset;
        st_log_read_release(&rd);
        if (n < 0) {
            rc = (int)n;
            break;
        }
        for (size_t pos = 0; pos < (size_t)n;) {
            st_batch_hdr_t h;
            rc = st_batch_check(buf + pos, (size_t)n - pos, &h);
            if (rc)
                break;
            size_t size = (size_t)st_batch_size(&h);
            load_batch(c, partition, buf + pos, size, &h, off, &a, &records);
            pos += size;
        }
        if (rc)
            break;
        off = next;
    }
    st_arena_fini(&a);
    free(buf);
    if (rc) {
        ST_ERROR("__consumer_offsets-%d: loading stopped at offset %lld: %s", partition,
                 (long long)off, st_strerror(rc));
        st_group_drop_partition(c, partition); /* nothing half loaded stays */
        return rc;
    }
    /* Members restored from the log get a session to come back in. */
    int ngroups = 0;
    for (size_t i = 0; i < c->nbuckets; i++)
        for (st_ggroup_t *g = c->buckets[i], *next; g; g = next) {
            next = g->next;
            if (g->partition != partition)
                continue;
            if (g->nmembers == 0 && g->offs.n == 0 && !g->txns && !g->stored && !g->cg) {
                st_group_free(c, g);
                continue;
            }
            ngroups++;
            st_cgroup_loaded(c, g);
            for (int k = 0; k < g->nmembers; k++)
                st_group_member_touch(c, g->members[k]);
        }
    c->logs[partition] = log;
    c->epochs[partition] = epoch;
    if (records)
        ST_INFO("__consumer_offsets-%d: loaded %lld record(s), %d group(s) in %lld ms", partition,
                (long long)records, ngroups, (long long)(st_mono_ms() - t0));
    return 0;
}

bool st_gcoord_loaded(const st_gcoord_t *c, int32_t partition)
{
    return partition >= 0 && partition < c->cfg.num_partitions && c->logs[partition];
}

int32_t st_gcoord_epoch(const st_gcoord_t *c, int32_t partition)
{
    return st_gcoord_loaded(c, partition) ? c->epochs[partition] : -1;
}
