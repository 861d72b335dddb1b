/* ops.c — the controller's metadata transitions, pure functions (ops.h). */
#include "cluster/ops.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/err.h"
#include "cluster/records.h"
#include "proto/kerr.h"

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

void st_ctl_item_fail(st_ctl_item_t *it, int16_t code, const char *fmt, ...)
{
    it->error = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->message, sizeof it->message, fmt, ap);
    va_end(ap);
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
static int apply_configs(const st_ctl_rules_t *r, st_md_topic_t *t, st_ctl_item_t *it)
{
    for (int c = 0; c < it->ncfg; c++) {
        const st_ctl_cfg_t *cf = &it->cfg[c];
        bool list;
        const char *fixed_default;
        if (r->config_find(r->arg, cf->key, &list, &fixed_default)) {
            st_ctl_item_fail(it, ST_KERR_INVALID_CONFIG, "Unknown topic config name: %s", cf->key);
            return -1;
        }
        if (cf->op < ST_CTL_CFG_SET || cf->op > ST_CTL_CFG_SUBTRACT) {
            st_ctl_item_fail(it, ST_KERR_INVALID_REQUEST, "Invalid config operation for %s",
                             cf->key);
            return -1;
        }
        if (cf->op == ST_CTL_CFG_DELETE)
            continue;
        if ((cf->op == ST_CTL_CFG_APPEND || cf->op == ST_CTL_CFG_SUBTRACT) && !list) {
            st_ctl_item_fail(it, ST_KERR_INVALID_CONFIG,
                             "Config %s is not a list: APPEND/SUBTRACT do not apply", cf->key);
            return -1;
        }
        if (!cf->value) {
            st_ctl_item_fail(it, ST_KERR_INVALID_CONFIG, "Null value for config %s", cf->key);
            return -1;
        }
        char err[200];
        if (cf->op == ST_CTL_CFG_SET &&
            r->config_validate(r->arg, cf->key, cf->value, err, sizeof err)) {
            st_ctl_item_fail(it, ST_KERR_INVALID_CONFIG, "%s", err);
            return -1;
        }
    }
    if (it->replace_configs)
        while (t->nconfigs > 0)
            st_md_topic_set_config(t, t->configs[0].key, NULL);
    for (int c = 0; c < it->ncfg; c++) {
        const st_ctl_cfg_t *cf = &it->cfg[c];
        if (cf->op == ST_CTL_CFG_DELETE) {
            st_md_topic_set_config(t, cf->key, NULL);
        } else if (cf->op == ST_CTL_CFG_SET) {
            st_md_topic_set_config(t, cf->key, cf->value);
        } else {
            const char *cur = st_md_topic_config(t, cf->key), *fixed_default = NULL;
            bool list;
            r->config_find(r->arg, cf->key, &list, &fixed_default);
            char out[256];
            list_edit(cur             ? cur
                      : fixed_default ? fixed_default
                                      : "",
                      cf->value, cf->op == ST_CTL_CFG_APPEND, out, sizeof out);
            st_md_topic_set_config(t, cf->key, out);
        }
    }
    return 0;
}

/* key's value on broker itself (not inherited from the cluster default), or NULL. */
static const char *own_value(const st_md_t *md, int32_t broker, const char *key)
{
    int scope;
    const char *v = st_md_broker_config(md, broker, key, &scope);
    return scope == (broker == ST_MD_BROKER_DEFAULT ? 2 : 1) ? v : NULL;
}

/* A broker resource's changes (ALTER_CONFIGS with broker_resource), as apply_configs does a
 * topic's: all validated, then applied on md, a record for each key whose value changes. */
static void ctl_broker_configs(const st_ctl_rules_t *r, st_md_t *md, st_ctl_item_t *it,
                               bool validate_only, json_t *records)
{
    it->error = 0;
    it->message[0] = 0;
    if (!r->broker_config_check) {
        st_ctl_item_fail(it, ST_KERR_INVALID_REQUEST, "Broker settings are static%s", "");
        return;
    }
    for (int c = 0; c < it->ncfg; c++) {
        const st_ctl_cfg_t *cf = &it->cfg[c];
        char err[200] = "";
        bool list = false;
        if (cf->op < ST_CTL_CFG_SET || cf->op > ST_CTL_CFG_SUBTRACT) {
            st_ctl_item_fail(it, ST_KERR_INVALID_REQUEST, "Invalid config operation for %s",
                             cf->key);
            return;
        }
        const char *v = cf->op == ST_CTL_CFG_SET ? cf->value : NULL;
        int16_t code = r->broker_config_check(r->arg, cf->key, v, &list, err, sizeof err);
        if (code) {
            st_ctl_item_fail(it, code, "%s", err);
            return;
        }
        if (cf->op != ST_CTL_CFG_DELETE && !cf->value) {
            st_ctl_item_fail(it, ST_KERR_INVALID_CONFIG, "Null value for config %s", cf->key);
            return;
        }
        if ((cf->op == ST_CTL_CFG_APPEND || cf->op == ST_CTL_CFG_SUBTRACT) && !list) {
            st_ctl_item_fail(it, ST_KERR_INVALID_CONFIG,
                             "Config %s is not a list: APPEND/SUBTRACT do not apply", cf->key);
            return;
        }
    }
    /* the new values on a scratch state holding only the broker settings first: a list
     * edit's result is checked as a whole, and a refusal leaves md as it was */
    st_md_t *next = st_md_new(md->cluster_id, md->controller_id);
    for (int i = 0; next && i < md->nbcfg; i++)
        if (st_md_set_broker_config(next, md->bcfg[i].broker, md->bcfg[i].key, md->bcfg[i].value))
            it->error = ST_KERR_UNKNOWN_SERVER_ERROR;
    if (!next || it->error) {
        st_ctl_item_fail(it, ST_KERR_UNKNOWN_SERVER_ERROR, "out of memory%s", "");
        st_md_unref(next);
        return;
    }
    if (it->replace_configs)
        for (int i = next->nbcfg - 1; i >= 0; i--)
            if (next->bcfg[i].broker == it->broker)
                st_md_set_broker_config(next, it->broker, next->bcfg[i].key, NULL);
    for (int c = 0; c < it->ncfg && !it->error; c++) {
        const st_ctl_cfg_t *cf = &it->cfg[c];
        const char *cur = own_value(next, it->broker, cf->key);
        char out[1024];
        const char *nv = cf->op == ST_CTL_CFG_DELETE ? NULL : cf->value;
        if (cf->op == ST_CTL_CFG_APPEND || cf->op == ST_CTL_CFG_SUBTRACT) {
            list_edit(cur ? cur : "", cf->value, cf->op == ST_CTL_CFG_APPEND, out, sizeof out);
            char err[200] = "";
            bool list;
            int16_t code = r->broker_config_check(r->arg, cf->key, out, &list, err, sizeof err);
            if (code) {
                st_ctl_item_fail(it, code, "%s", err);
                break;
            }
            nv = out;
        }
        if (st_md_set_broker_config(next, it->broker, cf->key, nv))
            st_ctl_item_fail(it, ST_KERR_UNKNOWN_SERVER_ERROR, "out of memory%s", "");
    }
    if (!it->error && !validate_only) {
        /* a record for each key of this resource whose value changes, then md takes them */
        for (int i = 0; i < next->nbcfg; i++) {
            const st_md_bcfg_t *c = &next->bcfg[i];
            const char *was = own_value(md, it->broker, c->key);
            if (c->broker == it->broker && (!was || strcmp(was, c->value)))
                json_array_append_new(records, st_rec_broker_config(c->broker, c->key, c->value));
        }
        for (int i = 0; i < md->nbcfg; i++) {
            const st_md_bcfg_t *c = &md->bcfg[i];
            if (c->broker == it->broker && !own_value(next, it->broker, c->key))
                json_array_append_new(records, st_rec_broker_config(c->broker, c->key, NULL));
        }
        st_md_t tmp = *md;
        md->nbcfg = next->nbcfg;
        md->bcfg = next->bcfg;
        next->nbcfg = tmp.nbcfg;
        next->bcfg = tmp.bcfg; /* freed with next */
    }
    st_md_unref(next);
}

/* Random bytes: the rules' source, else the kernel's. */
static void random_bytes(const st_ctl_rules_t *r, void *buf, size_t n)
{
    if (r->random) {
        r->random(r->arg, buf, n);
        return;
    }
    if (getrandom(buf, n, 0) != (ssize_t)n)
        memset(buf, 0x5a, n);
}

/* Places partitions [from, t->npartitions) of t over the live brokers. */
static bool place(const st_ctl_rules_t *r, const st_md_t *md, st_md_topic_t *t, int32_t from,
                  st_ctl_item_t *it)
{
    uint32_t start;
    random_bytes(r, &start, sizeof start);
    int rc = st_rec_place(md, t->npartitions - from, t->replication_factor, start,
                          &t->partitions[from], it->message, sizeof it->message);
    if (rc) {
        it->error = ST_KERR_INVALID_REPLICATION_FACTOR;
        return false;
    }
    return true;
}

/* The partitions of t from `from` on as it->assign names them (KRaft's manual assignment):
 * every broker named must be registered; the ISR is those not fenced, the leader its first. */
static bool place_assigned(const st_md_t *md, st_md_topic_t *t, int32_t from, st_ctl_item_t *it)
{
    for (int32_t i = from; i < t->npartitions; i++) {
        st_md_partition_t *p = &t->partitions[i];
        const int32_t *ids = &it->assign[(size_t)(i - from) * (size_t)it->assign_rf];
        p->nreplicas = it->assign_rf;
        p->nisr = 0;
        for (int k = 0; k < it->assign_rf; k++) {
            if (!st_md_broker(md, ids[k])) {
                st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                                 "The manual partition assignment includes broker %d, but no "
                                 "such broker is registered.",
                                 (int)ids[k]);
                return false;
            }
            p->replicas[k] = ids[k];
            if (st_md_broker_live(md, ids[k]))
                p->isr[p->nisr++] = ids[k];
        }
        if (p->nisr == 0) {
            st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                             "All brokers specified in the manual partition assignment for "
                             "partition %d are fenced.",
                             (int)i);
            return false;
        }
        p->leader = p->isr[0];
        p->leader_epoch = p->partition_epoch = 0;
    }
    return true;
}

static bool assignment_refused(st_ctl_item_t *it)
{
    if (!it->bad_assignment)
        return false;
    st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT, "%s",
                     it->bad_why ? it->bad_why : "Malformed replica assignment.");
    return true;
}

static bool ctl_create(const st_ctl_rules_t *r, st_md_t *md, st_ctl_item_t *it)
{
    char msg[200];
    if (st_topic_name_check(it->name, strlen(it->name), msg, sizeof msg)) {
        it->error = ST_KERR_INVALID_TOPIC_EXCEPTION;
        snprintf(it->message, sizeof it->message, "%s", msg);
        return false;
    }
    if (st_md_find(md, it->name, (int32_t)strlen(it->name))) {
        st_ctl_item_fail(it, ST_KERR_TOPIC_ALREADY_EXISTS, "Topic '%s' already exists.", it->name);
        return false;
    }
    if (assignment_refused(it))
        return false;
    int32_t internal_n = 0;
    int internal_rf = -1;
    bool known = r->internal && r->internal(r->arg, it->name, &internal_n, &internal_rf);
    if (!it->internal && known) {
        /* however it is asked for (auto-creation included), an internal topic is internal
         * and has its own partition count */
        it->internal = true;
        it->count = internal_n;
        it->rf = -1;
    }
    int32_t n = it->assigned >= 0 ? it->assigned : it->count < 0 ? r->num_partitions : it->count;
    int rf = it->assign ? it->assign_rf : it->rf < 0 ? r->default_rf : it->rf;
    if (it->internal && !it->assign) {
        /* an internal topic: its own replication factor, but never more than the brokers
         * alive now, so a cluster still starting (or a single broker) works */
        int live = st_rec_live_brokers(md);
        if (it->rf < 0 && internal_rf > 0)
            rf = internal_rf;
        rf = rf > live && live > 0 ? live : rf;
    }
    if (it->assigned < 0 && (n <= 0 || n > 100000)) {
        snprintf(it->message, sizeof it->message,
                 "Number of partitions must be larger than 0 (and at most 100000), got %d.", n);
        it->error = ST_KERR_INVALID_PARTITIONS;
        return false;
    }
    uint8_t id[16];
    random_bytes(r, id, sizeof id);
    id[6] = (uint8_t)((id[6] & 0x0f) | 0x40); /* UUID v4 */
    id[8] = (uint8_t)((id[8] & 0x3f) | 0x80);
    st_md_topic_t *t = st_md_topic_new(it->name, id, n);
    if (!t) {
        st_ctl_item_fail(it, ST_KERR_UNKNOWN_SERVER_ERROR, "out of memory%s", "");
        return false;
    }
    t->internal = it->internal;
    t->replication_factor = (int16_t)rf;
    if (apply_configs(r, t, it)) {
        st_md_topic_free(t);
        return false;
    }
    const char *mi = it->internal ? st_md_topic_config(t, "min.insync.replicas") : NULL;
    if (mi && atoll(mi) > rf) {
        /* an internal topic's replication factor was lowered to the brokers alive: so is its
         * min.insync.replicas (transaction.state.log.min.isr 2 on a single broker), or no
         * write to it could ever be acknowledged */
        char v[16];
        snprintf(v, sizeof v, "%d", rf);
        if (st_md_topic_set_config(t, "min.insync.replicas", v)) {
            st_md_topic_free(t);
            st_ctl_item_fail(it, ST_KERR_UNKNOWN_SERVER_ERROR, "out of memory%s", "");
            return false;
        }
    }
    if (!(it->assign ? place_assigned(md, t, 0, it) : place(r, md, t, 0, it))) {
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
    st_ctl_item_fail(it, ST_KERR_UNKNOWN_TOPIC_OR_PARTITION,
                     "Partition %d of topic %s does not exist.", (int)it->partition, t->name);
    return NULL;
}

/* ElectLeaders for one partition. Preferred: the first replica leads if it is live and in the
 * ISR. Unclean: when no live ISR member leads, any live replica may (st_rec_elect). A single
 * broker's only replica always leads already (ELECTION_NOT_NEEDED). */
static bool ctl_elect(const st_md_t *md, st_md_topic_t *t, st_ctl_item_t *it)
{
    st_md_partition_t *p = item_partition(t, it);
    if (!p)
        return false;
    if (it->election_type != 0 && it->election_type != 1) {
        st_ctl_item_fail(it, ST_KERR_INVALID_REQUEST, "Unknown election type %d",
                         (int)it->election_type);
        return false;
    }

    if (it->election_type == 0) {
        int32_t pref = p->nreplicas > 0 ? p->replicas[0] : -1;
        if (pref >= 0 && p->leader == pref) {
            it->error = ST_KERR_ELECTION_NOT_NEEDED;
            return false;
        }
        if (pref < 0 || !broker_live(md, pref) || !st_md_in_isr(p, pref)) {
            st_ctl_item_fail(it, ST_KERR_PREFERRED_LEADER_NOT_AVAILABLE,
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
        st_ctl_item_fail(it, ST_KERR_ELIGIBLE_LEADERS_NOT_AVAILABLE,
                         "No replica of %s-%d is live to lead", t->name, (int)it->partition);
        return false;
    }
    return changed;
}

/* Checks a reassignment's target replicas; false with the item failed. */
static bool reassign_check(const st_md_t *md, const st_md_partition_t *p, st_ctl_item_t *it)
{
    if (it->nreplicas <= 0 || it->nreplicas > ST_MD_MAX_REPLICAS) {
        st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                         "The target replica list must hold 1 to %d brokers, not %d",
                         ST_MD_MAX_REPLICAS, (int)it->nreplicas);
        return false;
    }
    for (int32_t i = 0; i < it->nreplicas; i++) {
        int32_t id = it->replicas[i];
        for (int32_t j = 0; j < i; j++)
            if (it->replicas[j] == id) {
                st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                                 "Duplicate replica %d in the target replica list", (int)id);
                return false;
            }
        if (!st_md_broker(md, id)) {
            st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                             "The target replica %d is not a registered broker", (int)id);
            return false;
        }
    }
    if (it->keep_rf && it->nreplicas != p->nreplicas - p->nadding) {
        st_ctl_item_fail(it, ST_KERR_INVALID_REPLICATION_FACTOR,
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
            st_ctl_item_fail(it, ST_KERR_NO_REASSIGNMENT_IN_PROGRESS,
                             "No reassignment is in progress for %s-%d", t->name,
                             (int)it->partition);
        else if (rc)
            st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
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
        st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                         "None of the target replicas of %s-%d is live", t->name,
                         (int)it->partition);
        return false;
    }
    int rc = st_rec_reassign(md, p, it->replicas, it->nreplicas);
    if (rc == ST_E_INVALID)
        st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                         "The reassignment of %s-%d needs more than %d replicas at once", t->name,
                         (int)it->partition, ST_MD_MAX_REPLICAS);
    return rc == 0;
}

static bool decide_item(const st_ctl_rules_t *r, st_md_t *md, int kind, st_ctl_item_t *it)
{
    it->error = 0;
    it->message[0] = 0;
    if (kind == ST_CTL_CREATE)
        return ctl_create(r, md, it);
    st_md_topic_t *t = ctl_find(md, it);
    if (!t) {
        it->error = it->name ? ST_KERR_UNKNOWN_TOPIC_OR_PARTITION : ST_KERR_UNKNOWN_TOPIC_ID;
        snprintf(it->message, sizeof it->message, "This server does not host this topic.");
        return false;
    }
    memcpy(it->id, t->id, 16);
    switch (kind) {
    case ST_CTL_DELETE:
        if (t->internal) {
            st_ctl_item_fail(it, ST_KERR_POLICY_VIOLATION, "Internal topic %s cannot be deleted",
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
            st_ctl_item_fail(it, ST_KERR_INVALID_PARTITIONS, "Too many partitions%s", "");
            return false;
        }
        if (assignment_refused(it))
            return false;
        if (it->assign && it->assigned != it->count - t->npartitions) {
            st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                             "Increasing the number of partitions by %d but %d assignments "
                             "provided.",
                             (int)(it->count - t->npartitions), (int)it->assigned);
            return false;
        }
        if (it->assign && it->assign_rf != t->replication_factor) {
            st_ctl_item_fail(it, ST_KERR_INVALID_REPLICA_ASSIGNMENT,
                             "Inconsistent replication factor between partitions, partition 0 "
                             "has %d while partitions [%d] have replication factors [%d], "
                             "respectively.",
                             (int)t->replication_factor, (int)t->npartitions, (int)it->assign_rf);
            return false;
        }
        {
            int32_t old = t->npartitions;
            if (st_md_topic_grow(t, it->count))
                return false;
            return it->assign ? place_assigned(md, t, old, it) : place(r, md, t, old, it);
        }
    case ST_CTL_ALTER_CONFIGS:
        return apply_configs(r, t, it) == 0;
    case ST_CTL_ELECT_LEADERS:
        return ctl_elect(md, t, it);
    case ST_CTL_REASSIGN:
        return ctl_reassign(md, t, it);
    }
    return false;
}

/* Appends the record of topic `id` as md now has it: its whole state, or its removal. */
static void topic_record(const st_md_t *md, const uint8_t *id, json_t *records)
{
    const st_md_topic_t *t = st_md_find_id(md, id);
    json_array_append_new(records, t ? st_rec_topic(t) : st_rec_remove_topic(id));
}

static void acl_removed(void *arg, const st_acl_t *acl)
{
    st_ctl_item_t *it = arg;
    if (st_acl_add(&it->removed, acl) < 0)
        it->error = ST_KERR_UNKNOWN_SERVER_ERROR; /* out of memory: the list is short */
}

/* ACL items: each on the ACLs its predecessors left; a record per ACL added or removed. */
static int decide_acls(st_md_t *md, int kind, bool validate_only, st_ctl_item_t *items, int n,
                       json_t *records)
{
    for (int i = 0; i < n; i++) {
        st_ctl_item_t *it = &items[i];
        it->error = 0;
        it->message[0] = 0;
        if (kind == ST_CTL_CREATE_ACLS) {
            const char *why = st_acl_invalid(&it->acl);
            if (why) {
                st_ctl_item_fail(it, ST_KERR_INVALID_REQUEST, "%s", why);
                continue;
            }
            int rc = st_acl_add(&md->acls, &it->acl);
            if (rc < 0)
                return rc;
            if (rc == 1 && !validate_only)
                json_array_append_new(records, st_rec_acl(&it->acl, false));
            continue;
        }
        const st_acl_t *f = &it->acl;
        if (f->resource_type == ST_ACL_RES_UNKNOWN || f->pattern_type == ST_ACL_PAT_UNKNOWN ||
            f->operation == ST_ACL_OP_UNKNOWN || f->permission == ST_ACL_PERM_UNKNOWN) {
            st_ctl_item_fail(it, ST_KERR_INVALID_REQUEST,
                             "A filter may not hold an UNKNOWN resource type, pattern type, "
                             "operation or permission%s",
                             "");
            continue;
        }
        size_t from = it->removed.n;
        st_acl_remove(&md->acls, f, acl_removed, it);
        for (size_t k = from; k < it->removed.n && !validate_only; k++)
            json_array_append_new(records, st_rec_acl(&it->removed.v[k], true));
    }
    return 0;
}

/* A SCRAM item: its record, each against the state the earlier items left. */
static void ctl_scram(st_md_t *md, st_ctl_item_t *it, bool validate_only, json_t *records)
{
    if (!it->name || !*it->name) {
        st_ctl_item_fail(it, ST_KERR_UNACCEPTABLE_CREDENTIAL, "empty user name");
        return;
    }
    const st_md_scram_t *old = st_md_find_scram(md, it->name, it->mechanism);
    if (!it->scram) {
        if (!old) {
            st_ctl_item_fail(it, ST_KERR_RESOURCE_NOT_FOUND,
                             "attempt to delete a user credential that does not exist");
            return;
        }
        if (validate_only)
            return;
        st_md_remove_scram(md, it->name, it->mechanism);
        json_array_append_new(records, st_rec_remove_scram(it->name, it->mechanism));
        return;
    }
    if ((old && it->if_absent) || validate_only)
        return;
    if (st_md_put_scram(md, it->scram)) {
        st_ctl_item_fail(it, ST_KERR_UNKNOWN_SERVER_ERROR, "out of memory");
        return;
    }
    json_array_append_new(records, st_rec_scram(it->scram));
}

/* Kafka's check of a quota value: above 0, a whole number (within 1e-6) for the byte rates
 * (LONG configs); NULL, or why not. */
static const char *quota_value_invalid(int k, double v)
{
    if (!(v > 0))
        return "must be greater than 0";
    if (st_quota_key_integral(k)) {
        if (v >= 9.2233720368547758e18)
            return "is too large for a LONG";
        double frac = v - (double)(int64_t)v;
        if (frac > 1e-6)
            return "cannot be a fractional value";
    }
    return NULL;
}

/* A QUOTAS item, as Kafka's ClientQuotaControlManager decides it: the ops as a map (a later op
 * of a key replaces an earlier one), every value checked before any is applied, a record only
 * for a value that changes; removing a key not set (or not known) is nothing to do. */
static void ctl_quotas(st_md_t *md, st_ctl_item_t *it, bool validate_only, json_t *records)
{
    const st_quota_entity_t *e = &it->qentity;
    if (e->user == ST_QE_NONE && e->client == ST_QE_NONE && e->ip == ST_QE_NONE) {
        st_ctl_item_fail(it, ST_KERR_INVALID_REQUEST, "Invalid empty client quota entity");
        return;
    }
    int last[ST_QUOTA_NKEYS];
    for (int k = 0; k < ST_QUOTA_NKEYS; k++)
        last[k] = -1;
    for (int i = 0; i < it->nqops; i++) {
        int k = st_quota_key(it->qops[i].key);
        if (k >= 0)
            last[k] = i;
        else if (!it->qops[i].remove) {
            st_ctl_item_fail(it, ST_KERR_INVALID_REQUEST, "Invalid configuration key %s",
                             it->qops[i].key ? it->qops[i].key : "null");
            return;
        }
    }
    for (int k = 0; k < ST_QUOTA_NKEYS; k++) {
        const st_ctl_quota_op_t *q = last[k] >= 0 ? &it->qops[last[k]] : NULL;
        const char *why = q && !q->remove ? quota_value_invalid(k, q->value) : NULL;
        if (why) {
            st_ctl_item_fail(it, ST_KERR_INVALID_REQUEST, "Quota %s %s", q->key, why);
            return;
        }
    }
    if (validate_only)
        return;
    const st_quota_t *cur = st_md_find_quota(md, e);
    uint8_t was = cur ? cur->set : 0;
    double old[ST_QUOTA_NKEYS] = {0};
    if (cur)
        memcpy(old, cur->values, sizeof old);
    for (int k = 0; k < ST_QUOTA_NKEYS; k++) {
        const st_ctl_quota_op_t *q = last[k] >= 0 ? &it->qops[last[k]] : NULL;
        bool had = was & (1u << k);
        if (!q || (q->remove && !had) || (!q->remove && had && old[k] == q->value))
            continue;
        if (st_md_set_quota(md, e, k, q->value, q->remove)) {
            st_ctl_item_fail(it, ST_KERR_UNKNOWN_SERVER_ERROR, "out of memory");
            return;
        }
        json_array_append_new(records, st_rec_quota(e, k, q->value, q->remove));
    }
}

int st_ctl_decide(const st_ctl_rules_t *rules, const st_md_t *state, int kind, bool validate_only,
                  st_ctl_item_t *items, int n, json_t *records)
{
    st_md_t *md = st_md_clone(state);
    if (!md)
        return -ENOMEM;
    if (kind == ST_CTL_CREATE_ACLS || kind == ST_CTL_DELETE_ACLS) {
        int rc = decide_acls(md, kind, validate_only, items, n, records);
        st_md_unref(md);
        return rc;
    }
    if (kind == ST_CTL_SCRAM || kind == ST_CTL_QUOTAS) {
        for (int i = 0; i < n; i++)
            if (kind == ST_CTL_SCRAM)
                ctl_scram(md, &items[i], validate_only, records);
            else
                ctl_quotas(md, &items[i], validate_only, records);
        st_md_unref(md);
        return 0;
    }
    /* consecutive items changing one topic (one per partition: ElectLeaders, reassignments)
     * share one record, written after the last of them */
    const uint8_t *owed = NULL;
    for (int i = 0; i < n; i++) {
        st_ctl_item_t *it = &items[i];
        if (kind == ST_CTL_ALTER_CONFIGS && it->broker_resource) {
            ctl_broker_configs(rules, md, it, validate_only, records);
            continue;
        }
        if (!decide_item(rules, md, kind, it) || validate_only)
            continue;
        if (owed && memcmp(owed, it->id, 16) != 0)
            topic_record(md, owed, records);
        owed = it->id;
    }
    if (owed)
        topic_record(md, owed, records);
    st_md_unref(md);
    return 0;
}
