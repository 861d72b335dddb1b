/*
 * controller.c — topic administration through the metadata quorum, and the hand-over of each
 * state the quorum publishes to every shard.
 *
 * An op: shard 0 submits it to the quorum (cluster/quorum.h) -> the active controller decides
 * it against its state and writes its records (ctl_propose) -> committed and applied, the op
 * waits on shard 0 until every shard here has adopted a state at least that new (st_ctl_adopt:
 * each opens, reconfigures or deletes its partitions) -> it goes back to its shard. A single
 * broker is its quorum's only voter: the same path, decided and committed alone.
 */
#include "kafka/controller.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "broker/request.h"
#include "broker/runtime.h"
#include "cluster/records.h"
#include "partition/partition.h"
#include "kafka/coordsvc.h"
#include "kafka/handlers.h"
#include "kafka/leader.h"
#include "kafka/replica_link.h"
#include "kafka/topic_config.h"
#include "proto/kerr.h"
#include "storage/fs.h"

int st_topic_name_check(const char *name, size_t len, char *msg, size_t msglen)
{
    if (len == 0) {
        snprintf(msg, msglen, "Topic name is illegal, it can't be empty");
        return ST_E_INVALID;
    }
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) {
        snprintf(msg, msglen, "Topic name cannot be \".\" or \"..\"");
        return ST_E_INVALID;
    }
    if (len > 249) {
        snprintf(msg, msglen, "Topic name is illegal, it can't be longer than 249 characters");
        return ST_E_INVALID;
    }
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            snprintf(msg, msglen,
                     "Topic name \"%.*s\" is illegal, it contains a character other than ASCII "
                     "alphanumerics, '.', '_' and '-'",
                     (int)(len > 100 ? 100 : len), name);
            return ST_E_INVALID;
        }
    }
    return 0;
}

__attribute__((format(printf, 3, 4))) static void st_item_fail(st_ctl_item_t *it, int16_t code,
                                                               const char *fmt, ...)
{
    it->error = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->message, sizeof it->message, fmt, ap);
    va_end(ap);
}

/* ---- applying a snapshot on each shard ---- */

#define ST_CTL_FAILS 8

/* Partitions a shard could not open: reported back to the items naming their topic. */
typedef struct ctl_fails {
    int n;
    struct {
        uint8_t id[16];
        int32_t partition;
        int err;
    } f[ST_CTL_FAILS];
} ctl_fails_t;

typedef struct st_ctl_apply {
    st_fanout_leg_t leg;
    st_md_t *md;
    ctl_fails_t fails; /* this shard's */
} ctl_apply_t;

/* Shard 0: what the latest adoption could not open, with the state it adopted, for the ops
 * whose answer comes back after their change was adopted. */
static ctl_fails_t ctl_last_fails;
static st_md_t *ctl_last_fails_md;

static bool configs_equal(const st_md_topic_t *a, const st_md_topic_t *b)
{
    if (a->nconfigs != b->nconfigs)
        return false;
    for (int i = 0; i < a->nconfigs; i++)
        if (strcmp(a->configs[i].key, b->configs[i].key) ||
            strcmp(a->configs[i].value, b->configs[i].value))
            return false;
    return true;
}

typedef struct {
    st_kshard_t *s;
    const st_md_t *md;
} sweep_t;

/* Whether this broker keeps a copy of partition p on shard s. */
static bool hosts(const st_kshard_t *s, const st_md_partition_t *p)
{
    return p->shard == s->id && st_md_is_replica(p, (int32_t)s->b->cfg->node_id);
}

static void sweep_one(void *arg, st_part_t *p)
{
    sweep_t *w = arg;
    const st_md_topic_t *t = st_md_find_id(w->md, st_part_topic_id(p));
    int32_t index = st_part_index(p);
    if (t && index < t->npartitions && hosts(w->s, &t->partitions[index]))
        return;
    st_krepl_unfollow(w->s, p);
    st_coordsvc_leadership(w->s, st_part_topic(p), index, false, -1);
    st_parts_delete(&w->s->parts, p);
}

/* The partition's role from the snapshot (replication, partition.h), then what
 * follows from it: fetching from the leader, and for __consumer_offsets the coordinator. */
static void set_role(st_kshard_t *s, st_part_t *part, const st_md_t *md, const st_md_topic_t *t,
                     int32_t p)
{
    const st_config_t *cfg = s->b->cfg;
    const st_md_partition_t *mp = &t->partitions[p];
    st_part_role_t role = {.self = (int32_t)cfg->node_id,
                           .leader_id = mp->leader,
                           .leader_epoch = mp->leader_epoch,
                           .partition_epoch = mp->partition_epoch,
                           .min_isr = (int32_t)cfg->min_insync_replicas,
                           .nreplicas = mp->nreplicas,
                           .nisr = mp->nisr};
    role.leader = mp->leader == role.self;
    const char *mi = st_md_topic_config(t, "min.insync.replicas");
    if (mi)
        role.min_isr = (int32_t)strtol(mi, NULL, 10);
    memcpy(role.replicas, mp->replicas, sizeof role.replicas);
    memcpy(role.isr, mp->isr, sizeof role.isr);
    for (int i = 0; i < mp->nreplicas && i < ST_PART_MAX_REPLICAS; i++)
        role.live[i] = st_md_broker_live(md, mp->replicas[i]);
    st_part_set_role(part, &role);
    st_krepl_follow(s, part, md);
    if (t->internal) /* a coordinator's topic: the coordinator follows the leadership */
        st_coordsvc_leadership(s, t->name, p, role.leader, mp->leader_epoch);
}

static void ctl_apply_run(st_fanout_leg_t *leg)
{
    st_kshard_t *s = st_kshard_current();
    ctl_apply_t *a = leg->data;
    st_md_t *old = s->md;
    s->md = st_md_ref(a->md);
    st_kmetadata_ready(s, false);
    st_kshard_unstall(s);
    sweep_t w = {s, a->md};
    st_parts_each(&s->parts, sweep_one, &w);
    for (int i = 0; i < a->md->ntopics; i++) {
        const st_md_topic_t *t = a->md->topics[i];
        const st_md_topic_t *ot = old ? st_md_find_id(old, t->id) : NULL;
        bool reconf = ot && !configs_equal(ot, t);
        for (int32_t p = 0; p < t->npartitions; p++) {
            if (!hosts(s, &t->partitions[p]))
                continue;
            st_part_t *part = st_parts_get(&s->parts, t->id, p);
            if (!part) {
                st_part_t *np;
                st_log_config_t lc;
                st_topic_log_config(s->b->cfg, t, &lc);
                int rc = st_parts_open(&s->parts, t->name, t->id, p, &lc, &np);
                if (rc && a->fails.n < ST_CTL_FAILS) {
                    memcpy(a->fails.f[a->fails.n].id, t->id, 16);
                    a->fails.f[a->fails.n].partition = p;
                    a->fails.f[a->fails.n].err = rc;
                    a->fails.n++;
                }
            } else if (reconf) {
                st_log_config_t lc;
                st_topic_log_config(s->b->cfg, t, &lc);
                st_part_reconfigure(part, &lc);
            }
            if ((part = st_parts_get(&s->parts, t->id, p)) != NULL)
                set_role(s, part, a->md, t, p);
        }
    }
    st_md_unref(old);
}

/* Computes the new value of a list config for APPEND/SUBTRACT of `v` into out. */
static void list_edit(const char *cur, const char *v, bool add, char *out, size_t n)
{
    out[0] = 0;
    bool present = false;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", cur ? cur : "");
    for (char *save, *tok = strtok_r(tmp, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, v) == 0) {
            present = true;
            if (!add)
                continue;
        }
        size_t l = strlen(out);
        snprintf(out + l, n - l, "%s%s", l ? "," : "", tok);
    }
    if (add && !present) {
        size_t l = strlen(out);
        snprintf(out + l, n - l, "%s%s", l ? "," : "", v);
    }
}

/* Validates every change first, then applies them all, so a refused item changes nothing. */
static int apply_configs(st_md_topic_t *t, st_ctl_item_t *it)
{
    for (int c = 0; c < it->ncfg; c++) {
        st_ctl_cfg_t *cf = &it->cfg[c];
        const st_tcfg_desc_t *d = st_tcfg_find(cf->key, strlen(cf->key));
        if (!d) {
            st_item_fail(it, ST_KERR_INVALID_CONFIG, "Unknown topic config name: %s", cf->key);
            return -1;
        }
        if (cf->op < ST_CTL_CFG_SET || cf->op > ST_CTL_CFG_SUBTRACT) {
            st_item_fail(it, ST_KERR_INVALID_REQUEST, "Invalid config operation for %s", cf->key);
            return -1;
        }
        if (cf->op == ST_CTL_CFG_DELETE)
            continue;
        if ((cf->op == ST_CTL_CFG_APPEND || cf->op == ST_CTL_CFG_SUBTRACT) &&
            d->type != ST_TCFG_LIST) {
            st_item_fail(it, ST_KERR_INVALID_CONFIG,
                         "Config %s is not a list: APPEND/SUBTRACT do not apply", cf->key);
            return -1;
        }
        if (!cf->value) {
            st_item_fail(it, ST_KERR_INVALID_CONFIG, "Null value for config %s", cf->key);
            return -1;
        }
        char err[200];
        if (cf->op == ST_CTL_CFG_SET && st_tcfg_validate(d, cf->value, err, sizeof err)) {
            st_item_fail(it, ST_KERR_INVALID_CONFIG, "%s", err);
            return -1;
        }
    }
    if (it->replace_configs)
        while (t->nconfigs > 0)
            st_md_topic_set_config(t, t->configs[0].key, NULL);
    for (int c = 0; c < it->ncfg; c++) {
        st_ctl_cfg_t *cf = &it->cfg[c];
        const st_tcfg_desc_t *d = st_tcfg_find(cf->key, strlen(cf->key));
        if (cf->op == ST_CTL_CFG_DELETE) {
            st_md_topic_set_config(t, cf->key, NULL);
        } else if (cf->op == ST_CTL_CFG_SET) {
            st_md_topic_set_config(t, cf->key, cf->value);
        } else {
            const char *cur = st_md_topic_config(t, cf->key);
            char out[256];
            list_edit(cur ? cur : d->fixed_default, cf->value, cf->op == ST_CTL_CFG_APPEND, out,
                      sizeof out);
            st_md_topic_set_config(t, cf->key, out);
        }
    }
    return 0;
}

/* What deciding an op needs (on the quorum thread). */
typedef struct ctl_ctx {
    const st_config_t *cfg;
} ctl_ctx_t;

/* Places partitions [from, t->npartitions) of t over the live brokers. */
static bool place(ctl_ctx_t *c, const st_md_t *md, st_md_topic_t *t, int32_t from,
                  st_ctl_item_t *it)
{
    (void)c;
    uint32_t start;
    if (getrandom(&start, sizeof start, 0) != (ssize_t)sizeof start)
        start = (uint32_t)md->ntopics;
    int rc = st_rec_place(md, t->npartitions - from, t->replication_factor, start,
                          &t->partitions[from], it->message, sizeof it->message);
    if (rc) {
        it->error = ST_KERR_INVALID_REPLICATION_FACTOR;
        return false;
    }
    return true;
}

static bool ctl_create(ctl_ctx_t *c, st_md_t *md, st_ctl_item_t *it)
{
    const st_config_t *cfg = c->cfg;
    char msg[200];
    if (st_topic_name_check(it->name, strlen(it->name), msg, sizeof msg)) {
        it->error = ST_KERR_INVALID_TOPIC_EXCEPTION;
        snprintf(it->message, sizeof it->message, "%s", msg);
        return false;
    }
    if (st_md_find(md, it->name, (int32_t)strlen(it->name))) {
        st_item_fail(it, ST_KERR_TOPIC_ALREADY_EXISTS, "Topic '%s' already exists.", it->name);
        return false;
    }
    if (it->bad_assignment) {
        st_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                     "Replica assignments must name this broker only%s", "");
        return false;
    }
    const st_coordsvc_t *svc = st_coordsvc_find(it->name, strlen(it->name));
    if (svc && !it->internal) {
        /* however it is asked for (auto-creation included), a coordinator's topic is internal,
         * with the service's partition count (and its configs unless the request set some) */
        int ncfg = it->ncfg;
        st_ctl_cfg_t *own = it->cfg;
        st_coordsvc_topic_item(svc, cfg, it);
        if (ncfg) {
            it->ncfg = ncfg;
            it->cfg = own;
        }
    }
    int32_t n = it->assigned >= 0 ? it->assigned
                : it->count < 0   ? (int32_t)cfg->num_partitions
                                  : it->count;
    int rf = it->rf < 0 ? (int)cfg->default_replication_factor : it->rf;
    if (it->internal) {
        /* a coordinator's topic: its service's factor (st_coordsvc_topic_item), but never more
         * than the brokers alive now, so a cluster still starting (or a single broker) works */
        int live = st_rec_live_brokers(md);
        rf = rf > live && live > 0 ? live : rf;
    }
    if (it->assigned < 0 && (n <= 0 || n > 100000)) {
        snprintf(it->message, sizeof it->message,
                 "Number of partitions must be larger than 0 (and at most 100000), got %d.", n);
        it->error = ST_KERR_INVALID_PARTITIONS;
        return false;
    }
    uint8_t id[16];
    if (getrandom(id, sizeof id, 0) != (ssize_t)sizeof id)
        return false;
    id[6] = (uint8_t)((id[6] & 0x0f) | 0x40); /* UUID v4 */
    id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
    st_md_topic_t *t = st_md_topic_new(it->name, id, n);
    if (!t) {
        st_item_fail(it, ST_KERR_UNKNOWN_SERVER_ERROR, "out of memory%s", "");
        return false;
    }
    t->internal = it->internal;
    t->replication_factor = (int16_t)rf;
    if (apply_configs(t, it)) {
        st_md_topic_free(t);
        return false;
    }
    if (!place(c, md, t, 0, it)) {
        st_md_topic_free(t);
        return false;
    }
    memcpy(it->id, id, 16);
    st_md_add_topic(md, t);
    return true;
}

static st_md_topic_t *ctl_find(st_md_t *md, st_ctl_item_t *it)
{
    const st_md_topic_t *t =
        it->name ? st_md_find(md, it->name, (int32_t)strlen(it->name)) : st_md_find_id(md, it->id);
    if (t)
        it->out_name = t->name;
    return (st_md_topic_t *)t;
}

/* A broker that may lead: registered and not fenced. */
static bool broker_live(const st_md_t *md, int32_t node)
{
    const st_md_broker_t *b = st_md_broker(md, node);
    return b && !b->fenced;
}

/* The item's partition of t, or NULL (the item then says why). */
static st_md_partition_t *item_partition(st_md_topic_t *t, st_ctl_item_t *it)
{
    if (it->partition >= 0 && it->partition < t->npartitions)
        return &t->partitions[it->partition];
    st_item_fail(it, ST_KERR_UNKNOWN_TOPIC_OR_PARTITION, "Partition %d of topic %s does not exist.",
                 (int)it->partition, t->name);
    return NULL;
}

/* ElectLeaders for one partition. Preferred: the first replica leads if it is live and in the
 * ISR. Unclean: when no live ISR member leads, any live replica may (st_rec_elect). A single
 * broker's only replica always leads already (ELECTION_NOT_NEEDED). */
static bool ctl_elect(ctl_ctx_t *c, const st_md_t *md, st_md_topic_t *t, st_ctl_item_t *it)
{
    st_md_partition_t *p = item_partition(t, it);
    if (!p)
        return false;
    if (it->election_type != 0 && it->election_type != 1) {
        st_item_fail(it, ST_KERR_INVALID_REQUEST, "Unknown election type %d",
                     (int)it->election_type);
        return false;
    }
    (void)c;
    if (it->election_type == 0) {
        int32_t pref = p->nreplicas > 0 ? p->replicas[0] : -1;
        if (pref >= 0 && p->leader == pref) {
            it->error = ST_KERR_ELECTION_NOT_NEEDED;
            return false;
        }
        if (pref < 0 || !broker_live(md, pref) || !st_md_in_isr(p, pref)) {
            st_item_fail(it, ST_KERR_PREFERRED_LEADER_NOT_AVAILABLE,
                         "The preferred replica %d of %s-%d is not live or not in the ISR",
                         (int)pref, t->name, (int)it->partition);
            return false;
        }
        return st_rec_elect_preferred(md, p);
    }
    if (p->leader >= 0 && broker_live(md, p->leader) && st_md_in_isr(p, p->leader)) {
        it->error = ST_KERR_ELECTION_NOT_NEEDED;
        return false;
    }
    st_md_partition_t was = *p;
    bool changed = st_rec_elect(md, p, true);
    if (p->leader < 0) {
        *p = was;
        st_item_fail(it, ST_KERR_ELIGIBLE_LEADERS_NOT_AVAILABLE,
                     "No replica of %s-%d is live to lead", t->name, (int)it->partition);
        return false;
    }
    return changed;
}

/* Checks a reassignment's target replicas; false with the item failed. */
static bool reassign_check(const st_md_t *md, const st_md_partition_t *p, st_ctl_item_t *it)
{
    if (it->nreplicas <= 0 || it->nreplicas > ST_MD_MAX_REPLICAS) {
        st_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                     "The target replica list must hold 1 to %d brokers, not %d",
                     ST_MD_MAX_REPLICAS, (int)it->nreplicas);
        return false;
    }
    for (int32_t i = 0; i < it->nreplicas; i++) {
        int32_t id = it->replicas[i];
        for (int32_t j = 0; j < i; j++)
            if (it->replicas[j] == id) {
                st_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                             "Duplicate replica %d in the target replica list", (int)id);
                return false;
            }
        if (!st_md_broker(md, id)) {
            st_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                         "The target replica %d is not a registered broker", (int)id);
            return false;
        }
    }
    if (it->keep_rf && it->nreplicas != p->nreplicas - p->nadding) {
        st_item_fail(it, ST_KERR_INVALID_REPLICATION_FACTOR,
                     "The reassignment would change the replication factor from %d to %d, "
                     "which the request does not allow",
                     (int)(p->nreplicas - p->nadding), (int)it->nreplicas);
        return false;
    }
    return true;
}

/* AlterPartitionReassignments for one partition, as Kafka does it (st_rec_reassign): the target
 * replicas are added first and the old ones leave only once every target replica is in sync,
 * so a move never drops the copies that hold the acknowledged records; until then it is in
 * progress (ListPartitionReassignments) and can be cancelled (a NULL target). */
static bool ctl_reassign(const st_md_t *md, st_md_topic_t *t, st_ctl_item_t *it)
{
    st_md_partition_t *p = item_partition(t, it);
    if (!p)
        return false;
    if (!it->replicas) {
        int rc = st_rec_reassign_cancel(md, p);
        if (rc == ST_E_NOT_FOUND)
            st_item_fail(it, ST_KERR_NO_REASSIGNMENT_IN_PROGRESS,
                         "No reassignment is in progress for %s-%d", t->name, (int)it->partition);
        else if (rc)
            st_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                         "Cancelling the reassignment of %s-%d would leave no in-sync replica",
                         t->name, (int)it->partition);
        return rc == 0;
    }
    if (!reassign_check(md, p, it))
        return false;
    bool live = false;
    for (int32_t i = 0; i < it->nreplicas; i++)
        live |= broker_live(md, it->replicas[i]);
    if (!live) {
        st_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                     "None of the target replicas of %s-%d is live", t->name, (int)it->partition);
        return false;
    }
    int rc = st_rec_reassign(md, p, it->replicas, it->nreplicas);
    if (rc == ST_E_INVALID)
        st_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                     "The reassignment of %s-%d needs more than %d replicas at once", t->name,
                     (int)it->partition, ST_MD_MAX_REPLICAS);
    return rc == 0;
}

static bool ctl_item(ctl_ctx_t *c, st_md_t *md, st_ctl_op_t *op, st_ctl_item_t *it)
{
    it->error = 0;
    it->message[0] = 0;
    if (op->kind == ST_CTL_CREATE)
        return ctl_create(c, md, it);
    st_md_topic_t *t = ctl_find(md, it);
    if (!t) {
        it->error = it->name ? ST_KERR_UNKNOWN_TOPIC_OR_PARTITION : ST_KERR_UNKNOWN_TOPIC_ID;
        snprintf(it->message, sizeof it->message, "This server does not host this topic.");
        return false;
    }
    memcpy(it->id, t->id, 16);
    switch (op->kind) {
    case ST_CTL_DELETE:
        if (t->internal) {
            st_item_fail(it, ST_KERR_POLICY_VIOLATION, "Internal topic %s cannot be deleted",
                         t->name);
            return false;
        }
        st_md_remove_topic(md, t->name);
        return true;
    case ST_CTL_CREATE_PARTITIONS:
        if (it->count <= t->npartitions) {
            snprintf(it->message, sizeof it->message,
                     "Topic currently has %d partitions, which is higher than the requested %d.",
                     t->npartitions, it->count);
            it->error = ST_KERR_INVALID_PARTITIONS;
            return false;
        }
        if (it->count > 100000) {
            st_item_fail(it, ST_KERR_INVALID_PARTITIONS, "Too many partitions%s", "");
            return false;
        }
        if (it->bad_assignment) {
            st_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                         "Replica assignments must name this broker only%s", "");
            return false;
        }
        {
            int32_t old = t->npartitions;
            if (st_md_topic_grow(t, it->count))
                return false;
            return place(c, md, t, old, it);
        }
    case ST_CTL_ALTER_CONFIGS:
        return apply_configs(t, it) == 0;
    case ST_CTL_ELECT_LEADERS:
        return ctl_elect(c, md, t, it);
    case ST_CTL_REASSIGN:
        return ctl_reassign(md, t, it);
    }
    return false;
}

/* ---- in a cluster: ops go to the active controller through the quorum ---- */

/* Appends the record of topic `id` as md now has it: its whole state, or its removal. */
static void ctl_record(const st_md_t *md, const uint8_t *id, json_t *records)
{
    const st_md_topic_t *t = st_md_find_id(md, id);
    json_array_append_new(records, t ? st_rec_topic(t) : st_rec_remove_topic(id));
}

/* Quorum thread, active controller: decides the op against the state and writes its
 * records: each changed topic's new state, or its removal. */
static int ctl_propose(st_quorum_req_t *req, const st_md_t *state, json_t *records)
{
    st_ctl_op_t *op = req->arg;
    st_md_t *md = st_md_clone(state);
    if (!md)
        return -ENOMEM;
    ctl_ctx_t c = {op->b->cfg};
    /* consecutive items changing one topic (one per partition: ElectLeaders, reassignments)
     * share one record, written after the last of them */
    const uint8_t *owed = NULL;
    for (int i = 0; i < op->n; i++) {
        st_ctl_item_t *it = &op->items[i];
        if (!ctl_item(&c, md, op, it) || op->validate_only)
            continue;
        if (owed && memcmp(owed, it->id, 16) != 0)
            ctl_record(md, owed, records);
        owed = it->id;
    }
    if (owed)
        ctl_record(md, owed, records);
    st_md_unref(md);
    return 0;
}

/* Quorum thread: the op's change committed (or not); shard 0 answers it. */
static void ctl_quorum_done(st_quorum_req_t *req, int status)
{
    st_ctl_op_t *op = req->arg;
    st_broker_t *b = op->b;
    if (status == ST_E_NOT_LEADER && op->hint)
        for (int i = 0; i < op->n; i++)
            if (op->items[i].name)
                st_quorum_hint_create(b->quorum, op->items[i].name);
    op->qstatus = status;
    pthread_mutex_lock(&b->ctl_mu);
    op->queue_next = b->ctl_answers;
    b->ctl_answers = op;
    pthread_mutex_unlock(&b->ctl_mu);
    atomic_store(&b->ctl_answers_ready, 1);
    st_loop_wake(b->shards[0]->loop);
}

static void ctl_submit_quorum(st_broker_t *b, st_ctl_op_t *op)
{
    op->b = b;
    op->qreq.propose = ctl_propose;
    op->qreq.done = ctl_quorum_done;
    op->qreq.arg = op;
    st_quorum_submit(b->quorum, &op->qreq);
}

/* The op failed as a whole: items not already failed say why. */
static void ctl_quorum_fail(st_broker_t *b, st_ctl_op_t *op)
{
    st_quorum_info_t qi;
    st_quorum_info(b->quorum, &qi);
    for (int i = 0; i < op->n; i++) {
        st_ctl_item_t *it = &op->items[i];
        if (it->error)
            continue;
        if (op->qstatus == ST_E_NOT_LEADER)
            st_item_fail(it, ST_KERR_NOT_CONTROLLER,
                         "This is not the active controller (node %d is)", (int)qi.leader);
        else if (op->qstatus == ST_E_AGAIN)
            st_item_fail(it, ST_KERR_REQUEST_TIMED_OUT,
                         "The controller lost its leadership with the change in flight%s", "");
        else
            st_item_fail(it, ST_KERR_UNKNOWN_SERVER_ERROR, "The metadata log failed: %s",
                         st_strerror(op->qstatus));
    }
}

/* Reports the partitions that could not be opened to the op's items naming their topic. */
static void ctl_report(st_ctl_op_t *op, const ctl_fails_t *fails, const st_md_t *md)
{
    /* A partition that could not be opened is offline: the topic exists, but the client is
     * told (KAFKA_STORAGE_ERROR) instead of a success it cannot use. */
    for (int f = 0; md && f < fails->n; f++) {
        const st_md_topic_t *t = st_md_find_id(md, fails->f[f].id);
        for (int i = 0; t && i < op->n; i++) {
            st_ctl_item_t *it = &op->items[i];
            const char *name = it->name ? it->name : it->out_name;
            if (it->error || !name || strcmp(name, t->name) != 0)
                continue;
            st_item_fail(it, ST_KERR_KAFKA_STORAGE_ERROR,
                         "partition %d of %s could not be opened (%s); it is offline",
                         (int)fails->f[f].partition, t->name, st_strerror(fails->f[f].err));
        }
    }
}

/* Answers the waiting ops whose change every shard here has applied. */
static void ctl_release(st_kshard_t *s)
{
    st_broker_t *b = s->b;
    for (st_ctl_op_t **pp = &b->ctl_waiting; *pp;) {
        st_ctl_op_t *op = *pp;
        if (op->qreq.index > b->ctl_applied) {
            pp = &op->queue_next;
            continue;
        }
        *pp = op->queue_next;
        ctl_report(op, &ctl_last_fails, ctl_last_fails_md);
        st_xcall_return(s, &op->x);
    }
}

void st_ctl_quorum_answers(st_kshard_t *s)
{
    st_broker_t *b = s->b;
    if (atomic_load(&b->quorum_stopped) && b->ctl_waiting) {
        /* committed, but no state will show them applied here any more */
        b->ctl_applied = INT64_MAX;
        ctl_release(s);
    }
    if (!atomic_exchange(&b->ctl_answers_ready, 0))
        return;
    pthread_mutex_lock(&b->ctl_mu);
    st_ctl_op_t *ops = b->ctl_answers;
    b->ctl_answers = NULL;
    pthread_mutex_unlock(&b->ctl_mu);
    while (ops) {
        st_ctl_op_t *op = ops;
        ops = op->queue_next;
        if (op->qstatus) {
            ctl_quorum_fail(b, op);
            st_xcall_return(s, &op->x);
            continue;
        }
        op->queue_next = b->ctl_waiting;
        b->ctl_waiting = op;
    }
    ctl_release(s);
}

typedef struct ctl_adoption {
    st_fanout_t fan;
    ctl_apply_t *applies;
    int64_t version;
} ctl_adoption_t;

static void ctl_adopted(void *arg)
{
    ctl_adoption_t *ad = arg;
    st_kshard_t *s = st_kshard_current();
    ctl_last_fails.n = 0;
    for (int i = 0; i < s->b->nshards; i++) {
        const ctl_fails_t *f = &ad->applies[i].fails;
        for (int k = 0; k < f->n && ctl_last_fails.n < ST_CTL_FAILS; k++)
            ctl_last_fails.f[ctl_last_fails.n++] = f->f[k];
    }
    st_md_unref(ctl_last_fails_md);
    ctl_last_fails_md = st_md_ref(ad->applies[0].md);
    for (int i = 0; i < s->b->nshards; i++)
        st_md_unref(ad->applies[i].md);
    if (ad->version > s->b->ctl_applied)
        s->b->ctl_applied = ad->version;
    free(ad->applies);
    free(ad);
    ctl_release(s);
}

void st_ctl_adopt(st_kshard_t *s, st_md_t *md)
{
    st_broker_t *b = s->b;
    st_md_assign_shards(md, b->nshards);
    ctl_adoption_t *ad = calloc(1, sizeof *ad);
    ctl_apply_t *applies = calloc((size_t)b->nshards, sizeof *applies);
    ST_ASSERT(ad && applies);
    ad->applies = applies;
    ad->version = md->version;
    st_md_unref(b->ctl_md);
    b->ctl_md = md;
    st_fanout_begin(&ad->fan, b->mesh, s->id, ctl_apply_run, ctl_adopted, ad);
    for (int i = 0; i < b->nshards; i++) {
        applies[i].md = st_md_ref(md);
        applies[i].leg.data = &applies[i];
        st_fanout_send(&ad->fan, &applies[i].leg, i);
    }
    st_fanout_end(&ad->fan);
}

static void hint_done(st_quorum_req_t *req, int status)
{
    st_ctl_op_t *op = req->arg;
    if (status == 0 && op->items[0].error == 0)
        ST_INFO("created topic %s (asked for by a broker)", op->items[0].name);
    free((char *)op->items[0].name);
    free(op->items);
    free(op);
}

void st_ctl_hint_create(st_broker_t *b, const char *name)
{
    st_ctl_op_t *op = calloc(1, sizeof *op);
    st_ctl_item_t *it = calloc(1, sizeof *it);
    char *n = strdup(name);
    if (!op || !it || !n) {
        free(op);
        free(it);
        free(n);
        return;
    }
    op->kind = ST_CTL_CREATE;
    op->n = 1;
    op->items = it;
    op->b = b;
    it->name = n;
    it->count = -1;
    it->rf = -1;
    it->assigned = -1;
    const st_coordsvc_t *svc = st_coordsvc_find(name, strlen(name));
    if (svc)
        st_coordsvc_topic_item(svc, b->cfg, it); /* its configs are read only */
    op->qreq.propose = ctl_propose;
    op->qreq.done = hint_done;
    op->qreq.arg = op;
    st_quorum_submit(b->quorum, &op->qreq);
}

/* Each shard's tick, in a cluster: the ISR changes its led partitions need go to the
 * controller (AlterPartition). */
typedef struct {
    st_kshard_t *s;
    int64_t now;
} isr_tick_t;

static void isr_tick_one(void *arg, st_part_t *p)
{
    isr_tick_t *w = arg;
    const st_part_role_t *role = st_part_role(p);
    st_rec_alter_t a = {.partition = st_part_index(p)};
    if (!st_part_isr_change_due(p, w->now, w->s->b->cfg->replica_lag_time_max_ms, 2000, a.isr,
                                &a.nisr))
        return;
    memcpy(a.topic_id, st_part_topic_id(p), 16);
    a.leader = role->self;
    a.leader_epoch = role->leader_epoch;
    a.partition_epoch = role->partition_epoch;
    ST_DEBUG("%s-%d: asking the controller for an ISR of %d (was %d)", st_part_topic(p),
             a.partition, a.nisr, role->nisr);
    st_quorum_alter_isr(w->s->b->quorum, &a);
}

void st_ctl_tick(st_kshard_t *s)
{
    st_kmetadata_ready(s, false);
    if (!s->b->quorum || atomic_load(&s->b->quorum_stopped))
        return;
    isr_tick_t w = {s, st_mono_ms()};
    st_parts_each(&s->parts, isr_tick_one, &w);
}

/* On shard 0: the op goes to the active controller, which decides ops one at a time in the
 * order they came (cluster/quorum.h). */
static void ctl_run(st_kshard_t *s, st_xcall_t *x)
{
    ctl_submit_quorum(s->b, (st_ctl_op_t *)x);
}

static void ctl_done(st_kshard_t *s, st_xcall_t *x)
{
    st_ctl_op_t *op = (st_ctl_op_t *)x;
    op->cb(s, op);
}

void st_ctl_submit(st_kshard_t *s, st_ctl_op_t *op)
{
    st_xcall(s, 0, &op->x, ctl_run, ctl_done);
}
