/* records.c — the metadata log's records: encoding, applying, and the controller's decisions. */
#include "cluster/records.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/log.h"

/* ---- ids ---- */

void st_md_id_hex(const uint8_t id[16], char out[33])
{
    static const char h[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = h[id[i] >> 4];
        out[2 * i + 1] = h[id[i] & 15];
    }
    out[32] = 0;
}

int st_md_id_parse(const char *s, uint8_t id[16])
{
    if (!s || strlen(s) != 32)
        return ST_E_INVALID;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return ST_E_INVALID;
        id[i] = (uint8_t)v;
    }
    return 0;
}

/* ---- encoding ---- */

static json_t *ids_json(const int32_t *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

json_t *st_rec_topic(const st_md_topic_t *t)
{
    char hex[33];
    st_md_id_hex(t->id, hex);
    json_t *parts = json_array(), *cfg = json_object();
    for (int32_t i = 0; i < t->npartitions; i++) {
        const st_md_partition_t *p = &t->partitions[i];
        json_t *jp = json_pack("{s:o,s:o,s:i,s:i,s:i}", "r", ids_json(p->replicas, p->nreplicas),
                               "isr", ids_json(p->isr, p->nisr), "l", p->leader, "le",
                               p->leader_epoch, "pe", p->partition_epoch);
        if (p->nadding || p->nremoving) {
            json_object_set_new(jp, "add", ids_json(p->adding, p->nadding));
            json_object_set_new(jp, "rm", ids_json(p->removing, p->nremoving));
        }
        json_array_append_new(parts, jp);
    }
    for (int c = 0; c < t->nconfigs; c++)
        json_object_set_new(cfg, t->configs[c].key, json_string(t->configs[c].value));
    return json_pack("{s:s,s:s,s:s,s:b,s:i,s:o,s:o}", "type", "topic", "name", t->name, "id", hex,
                     "internal", t->internal, "rf", t->replication_factor, "configs", cfg,
                     "partitions", parts);
}

json_t *st_rec_broker(const st_md_broker_t *b)
{
    char inc[17];
    snprintf(inc, sizeof inc, "%016" PRIx64, b->incarnation);
    return json_pack("{s:s,s:i,s:s,s:i,s:o,s:b,s:s,s:s?}", "type", "broker", "id", b->node_id,
                     "host", b->host ? b->host : "", "port", b->port, "rack",
                     b->rack ? json_string(b->rack) : json_null(), "fenced", b->fenced,
                     "incarnation", inc, "endpoints", b->endpoints);
}

json_t *st_rec_remove_topic(const uint8_t id[16])
{
    char hex[33];
    st_md_id_hex(id, hex);
    return json_pack("{s:s,s:s}", "type", "remove_topic", "id", hex);
}

json_t *st_rec_acl(const st_acl_t *a, bool remove)
{
    return json_pack("{s:s,s:i,s:i,s:s,s:s,s:s,s:i,s:i}", "type", remove ? "remove_acl" : "acl",
                     "resource_type", (int)a->resource_type, "pattern_type", (int)a->pattern_type,
                     "name", a->name, "principal", a->principal, "host", a->host, "operation",
                     (int)a->operation, "permission", (int)a->permission);
}

json_t *st_rec_cluster(const char *cluster_id)
{
    return json_pack("{s:s,s:s}", "type", "cluster", "id", cluster_id);
}

static void hex_of(const uint8_t *v, int n, char *out)
{
    static const char h[] = "0123456789abcdef";
    for (int i = 0; i < n; i++) {
        out[2 * i] = h[v[i] >> 4];
        out[2 * i + 1] = h[v[i] & 15];
    }
    out[2 * n] = 0;
}

json_t *st_rec_scram(const st_md_scram_t *c)
{
    char salt[2 * ST_MD_SCRAM_KEY_MAX + 1], sk[2 * ST_MD_SCRAM_KEY_MAX + 1],
        vk[2 * ST_MD_SCRAM_KEY_MAX + 1];
    hex_of(c->salt, c->salt_len, salt);
    hex_of(c->stored_key, c->key_len, sk);
    hex_of(c->server_key, c->key_len, vk);
    return json_pack("{s:s,s:s,s:i,s:i,s:s,s:s,s:s}", "type", "scram", "user", c->user, "mech",
                     c->mechanism, "iter", c->iterations, "salt", salt, "stored_key", sk,
                     "server_key", vk);
}

json_t *st_rec_remove_scram(const char *user, int8_t mechanism)
{
    return json_pack("{s:s,s:s,s:i}", "type", "remove_scram", "user", user, "mech", mechanism);
}

json_t *st_rec_quota(const st_quota_entity_t *e, int key, double value, bool remove)
{
    json_t *r = json_pack("{s:s,s:s}", "type", "quota", "key", st_quota_key_name(key));
    if (!r)
        return NULL;
    if (e->user != ST_QE_NONE)
        json_object_set_new(r, "user",
                            e->user == ST_QE_NAME ? json_string(e->user_name) : json_null());
    if (e->client != ST_QE_NONE)
        json_object_set_new(r, "client",
                            e->client == ST_QE_NAME ? json_string(e->client_name) : json_null());
    if (e->ip != ST_QE_NONE)
        json_object_set_new(r, "ip", e->ip == ST_QE_NAME ? json_string(e->ip_name) : json_null());
    if (remove)
        json_object_set_new(r, "remove", json_true());
    else
        json_object_set_new(r, "value", json_real(value));
    return r;
}

json_t *st_rec_broker_config(int32_t broker, const char *key, const char *value)
{
    return json_pack("{s:s,s:i,s:s,s:s?}", "type", "broker_config", "broker", (int)broker, "key",
                     key, "value", value);
}

/* Dumps root, padded with spaces to a multiple of 8, into alloc'd memory. */
static void *dump_padded(json_t *root, size_t *len, void *(*alloc)(size_t))
{
    char *text = json_dumps(root, JSON_COMPACT);
    if (!text)
        return NULL;
    size_t n = strlen(text), padded = (n + 7) & ~(size_t)7;
    char *out = (alloc ? alloc : malloc)(padded);
    if (out) {
        memcpy(out, text, n);
        memset(out + n, ' ', padded - n);
        *len = padded;
    }
    free(text);
    return out;
}

void *st_rec_entry(json_t *records, size_t *len, void *(*alloc)(size_t))
{
    json_t *root = json_pack("{s:i,s:O}", "v", ST_REC_VERSION, "records", records);
    void *out = root ? dump_padded(root, len, alloc) : NULL;
    json_decref(root);
    return out;
}

void *st_rec_snapshot(const st_md_t *md, size_t *len, void *(*alloc)(size_t))
{
    json_t *brokers = json_array(), *topics = json_array(), *scram = json_array();
    for (int i = 0; i < md->nbrokers; i++)
        json_array_append_new(brokers, st_rec_broker(&md->brokers[i]));
    for (int i = 0; i < md->ntopics; i++)
        json_array_append_new(topics, st_rec_topic(md->topics[i]));
    json_t *acls = json_array();
    for (size_t i = 0; i < md->acls.n; i++)
        json_array_append_new(acls, st_rec_acl(&md->acls.v[i], false));
    for (int i = 0; i < md->nscram; i++)
        json_array_append_new(scram, st_rec_scram(&md->scram[i]));
    json_t *quotas = json_array();
    for (int i = 0; i < md->nquotas; i++)
        for (int k = 0; k < ST_QUOTA_NKEYS; k++)
            if (md->quotas[i].set & (1u << k))
                json_array_append_new(
                    quotas, st_rec_quota(&md->quotas[i].e, k, md->quotas[i].values[k], false));
    json_t *bcfg = json_array();
    for (int i = 0; i < md->nbcfg; i++)
        json_array_append_new(
            bcfg, st_rec_broker_config(md->bcfg[i].broker, md->bcfg[i].key, md->bcfg[i].value));
    json_t *root = json_pack("{s:i,s:s,s:o,s:o,s:o,s:o,s:o,s:o}", "v", ST_REC_VERSION, "cluster",
                             md->cluster_id, "brokers", brokers, "topics", topics, "acls", acls,
                             "scram", scram, "quotas", quotas, "broker_configs", bcfg);
    void *out = root ? dump_padded(root, len, alloc) : NULL;
    json_decref(root);
    return out;
}

/* ---- applying ---- */

static int ids_parse(json_t *a, int32_t *out, int16_t *n)
{
    if (!json_is_array(a) || json_array_size(a) > ST_MD_MAX_REPLICAS)
        return ST_E_MALFORMED;
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v)
    {
        if (!json_is_integer(v))
            return ST_E_MALFORMED;
        out[i] = (int32_t)json_integer_value(v);
    }
    *n = (int16_t)json_array_size(a);
    return 0;
}

/* A topic record as a heap topic (NULL when malformed). */
static st_md_topic_t *topic_parse(json_t *r)
{
    const char *name = json_string_value(json_object_get(r, "name"));
    json_t *parts = json_object_get(r, "partitions");
    uint8_t id[16];
    if (!name || st_md_id_parse(json_string_value(json_object_get(r, "id")), id) ||
        !json_is_array(parts))
        return NULL;
    st_md_topic_t *t = st_md_topic_new(name, id, (int32_t)json_array_size(parts));
    if (!t)
        return NULL;
    t->internal = json_is_true(json_object_get(r, "internal"));
    t->replication_factor = (int16_t)json_integer_value(json_object_get(r, "rf"));
    size_t i;
    json_t *jp;
    json_array_foreach(parts, i, jp)
    {
        st_md_partition_t *p = &t->partitions[i];
        if (ids_parse(json_object_get(jp, "r"), p->replicas, &p->nreplicas) ||
            ids_parse(json_object_get(jp, "isr"), p->isr, &p->nisr)) {
            st_md_topic_free(t);
            return NULL;
        }
        json_t *add = json_object_get(jp, "add"), *rm = json_object_get(jp, "rm");
        if ((add && ids_parse(add, p->adding, &p->nadding)) ||
            (rm && ids_parse(rm, p->removing, &p->nremoving))) {
            st_md_topic_free(t);
            return NULL;
        }
        p->leader = (int32_t)json_integer_value(json_object_get(jp, "l"));
        p->leader_epoch = (int32_t)json_integer_value(json_object_get(jp, "le"));
        p->partition_epoch = (int32_t)json_integer_value(json_object_get(jp, "pe"));
    }
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(r, "configs"), k, v)
    {
        if (json_is_string(v) && st_md_topic_set_config(t, k, json_string_value(v))) {
            st_md_topic_free(t);
            return NULL;
        }
    }
    return t;
}

static int apply_topic(st_md_t *md, json_t *r)
{
    st_md_topic_t *t = topic_parse(r);
    if (!t)
        return ST_E_MALFORMED;
    const st_md_topic_t *old = st_md_find_id(md, t->id);
    if (old)
        st_md_remove_topic(md, old->name);
    int rc = st_md_add_topic(md, t); /* ST_E_EXISTS: the name belongs to another topic */
    if (rc)
        st_md_topic_free(t);
    return rc;
}

static int apply_broker(st_md_t *md, json_t *r, int64_t index)
{
    st_md_broker_t b = {0};
    json_t *id = json_object_get(r, "id"), *port = json_object_get(r, "port");
    const char *host = json_string_value(json_object_get(r, "host"));
    const char *inc = json_string_value(json_object_get(r, "incarnation"));
    if (!json_is_integer(id) || !json_is_integer(port) || !host || !inc)
        return ST_E_MALFORMED;
    b.node_id = (int32_t)json_integer_value(id);
    b.host = (char *)host;
    b.port = (int32_t)json_integer_value(port);
    b.rack = (char *)json_string_value(json_object_get(r, "rack"));
    b.endpoints = (char *)json_string_value(json_object_get(r, "endpoints"));
    b.fenced = json_is_true(json_object_get(r, "fenced"));
    b.incarnation = strtoull(inc, NULL, 16);
    const st_md_broker_t *old = st_md_broker(md, b.node_id);
    b.epoch = old && old->incarnation == b.incarnation ? old->epoch : index;
    return st_md_put_broker(md, &b);
}

/* An "acl" or "remove_acl" record: adds the ACL, or removes the one equal to it. */
static int apply_acl(st_md_t *md, json_t *r, bool remove)
{
    st_acl_t a = {
        .resource_type = (int8_t)json_integer_value(json_object_get(r, "resource_type")),
        .pattern_type = (int8_t)json_integer_value(json_object_get(r, "pattern_type")),
        .name = (char *)json_string_value(json_object_get(r, "name")),
        .principal = (char *)json_string_value(json_object_get(r, "principal")),
        .host = (char *)json_string_value(json_object_get(r, "host")),
        .operation = (int8_t)json_integer_value(json_object_get(r, "operation")),
        .permission = (int8_t)json_integer_value(json_object_get(r, "permission")),
    };
    if (st_acl_invalid(&a))
        return ST_E_MALFORMED;
    if (remove) {
        st_acl_remove(&md->acls, &a, NULL, NULL); /* a concrete filter: that one ACL */
        return 0;
    }
    return st_acl_add(&md->acls, &a) < 0 ? -ENOMEM : 0;
}

/* n bytes of hex into out; the byte count, or -1 when malformed or longer than cap. */
static int hex_parse(const char *s, uint8_t *out, int cap)
{
    size_t n = s ? strlen(s) : 0;
    if (!s || n % 2 || n / 2 > (size_t)cap)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    return (int)(n / 2);
}

static int apply_scram(st_md_t *md, json_t *r)
{
    st_md_scram_t c = {0};
    const char *user = json_string_value(json_object_get(r, "user"));
    json_t *mech = json_object_get(r, "mech"), *iter = json_object_get(r, "iter");
    if (!user || strlen(user) >= sizeof c.user || !json_is_integer(mech) || !json_is_integer(iter))
        return ST_E_MALFORMED;
    snprintf(c.user, sizeof c.user, "%s", user);
    c.mechanism = (int8_t)json_integer_value(mech);
    c.iterations = (int32_t)json_integer_value(iter);
    int sl = hex_parse(json_string_value(json_object_get(r, "salt")), c.salt, sizeof c.salt);
    int kl = hex_parse(json_string_value(json_object_get(r, "stored_key")), c.stored_key,
                       sizeof c.stored_key);
    int vl = hex_parse(json_string_value(json_object_get(r, "server_key")), c.server_key,
                       sizeof c.server_key);
    if (sl <= 0 || kl <= 0 || vl != kl)
        return ST_E_MALFORMED;
    c.salt_len = (int16_t)sl;
    c.key_len = (int16_t)kl;
    return st_md_put_scram(md, &c);
}

/* One part of a quota record's entity: absent, null (the default) or a name. */
static int quota_part(json_t *r, const char *field, int8_t *kind, char *name)
{
    json_t *v = json_object_get(r, field);
    *kind = !v ? ST_QE_NONE : json_is_null(v) ? ST_QE_DEFAULT : ST_QE_NAME;
    if (*kind != ST_QE_NAME)
        return 0;
    const char *s = json_string_value(v);
    if (!s || strlen(s) >= ST_QUOTA_NAME_MAX)
        return ST_E_MALFORMED;
    snprintf(name, ST_QUOTA_NAME_MAX, "%s", s);
    return 0;
}

static int apply_quota(st_md_t *md, json_t *r)
{
    st_quota_entity_t e = {0};
    char ip[ST_QUOTA_NAME_MAX] = "";
    int key = st_quota_key(json_string_value(json_object_get(r, "key")));
    bool remove = json_is_true(json_object_get(r, "remove"));
    json_t *value = json_object_get(r, "value");
    if (quota_part(r, "user", &e.user, e.user_name) ||
        quota_part(r, "client", &e.client, e.client_name) || quota_part(r, "ip", &e.ip, ip) ||
        strlen(ip) >= ST_QUOTA_IP_MAX || key < 0 ||
        (e.user == ST_QE_NONE && e.client == ST_QE_NONE && e.ip == ST_QE_NONE) ||
        (!remove && !json_is_number(value)))
        return ST_E_MALFORMED;
    memcpy(e.ip_name, ip, strlen(ip) + 1);
    return st_md_set_quota(md, &e, key, remove ? 0 : json_number_value(value), remove);
}

static int apply_broker_config(st_md_t *md, json_t *r)
{
    json_t *broker = json_object_get(r, "broker"), *value = json_object_get(r, "value");
    const char *key = json_string_value(json_object_get(r, "key"));
    if (!json_is_integer(broker) || json_integer_value(broker) < ST_MD_BROKER_DEFAULT ||
        json_integer_value(broker) > INT32_MAX || !key || !*key ||
        (value && !json_is_null(value) && !json_is_string(value)))
        return ST_E_MALFORMED;
    return st_md_set_broker_config(md, (int32_t)json_integer_value(broker), key,
                                   json_string_value(value));
}

static int apply_record(st_md_t *md, json_t *r, int64_t index)
{
    const char *type = json_string_value(json_object_get(r, "type"));
    if (!type)
        return ST_E_MALFORMED;
    if (strcmp(type, "topic") == 0)
        return apply_topic(md, r);
    if (strcmp(type, "broker") == 0)
        return apply_broker(md, r, index);
    if (strcmp(type, "remove_topic") == 0) {
        uint8_t id[16];
        if (st_md_id_parse(json_string_value(json_object_get(r, "id")), id))
            return ST_E_MALFORMED;
        const st_md_topic_t *t = st_md_find_id(md, id);
        return t ? st_md_remove_topic(md, t->name) : 0;
    }
    if (strcmp(type, "acl") == 0 || strcmp(type, "remove_acl") == 0)
        return apply_acl(md, r, type[0] == 'r');
    if (strcmp(type, "scram") == 0)
        return apply_scram(md, r);
    if (strcmp(type, "quota") == 0)
        return apply_quota(md, r);
    if (strcmp(type, "broker_config") == 0)
        return apply_broker_config(md, r);
    if (strcmp(type, "remove_scram") == 0) {
        const char *user = json_string_value(json_object_get(r, "user"));
        json_t *mech = json_object_get(r, "mech");
        if (!user || !json_is_integer(mech))
            return ST_E_MALFORMED;
        st_md_remove_scram(md, user, (int8_t)json_integer_value(mech));
        return 0;
    }
    if (strcmp(type, "cluster") == 0) {
        const char *id = json_string_value(json_object_get(r, "id"));
        char *c = id ? strdup(id) : NULL;
        if (!c)
            return ST_E_MALFORMED;
        free(md->cluster_id);
        md->cluster_id = c;
        return 0;
    }
    return ST_E_UNSUPPORTED;
}

void st_rec_apply(st_md_t *md, const void *buf, size_t len, int64_t index)
{
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_DISABLE_EOF_CHECK, &je);
    json_t *records = root ? json_object_get(root, "records") : NULL;
    if (!json_is_array(records) ||
        json_integer_value(json_object_get(root, "v")) > ST_REC_VERSION) {
        ST_ERROR("metadata log entry %lld is not readable (%s); skipped", (long long)index,
                 root ? "unknown version or no records" : je.text);
        json_decref(root);
        return;
    }
    size_t i;
    json_t *r;
    json_array_foreach(records, i, r)
    {
        int rc = apply_record(md, r, index);
        if (rc)
            ST_WARN("metadata log entry %lld, record %zu: %s; skipped", (long long)index, i,
                    st_strerror(rc));
    }
    json_decref(root);
}

int st_rec_restore(st_md_t *md, const void *buf, size_t len)
{
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_DISABLE_EOF_CHECK, &je);
    json_t *brokers = root ? json_object_get(root, "brokers") : NULL;
    json_t *topics = root ? json_object_get(root, "topics") : NULL;
    const char *cluster = root ? json_string_value(json_object_get(root, "cluster")) : NULL;
    if (!json_is_array(brokers) || !json_is_array(topics) || !cluster) {
        json_decref(root);
        return ST_E_CORRUPT;
    }
    while (md->ntopics > 0)
        st_md_remove_topic(md, md->topics[0]->name);
    for (int i = 0; i < md->nbrokers; i++) {
        free(md->brokers[i].host);
        free(md->brokers[i].rack);
        free(md->brokers[i].endpoints);
    }
    md->nbrokers = 0;
    md->nscram = 0;
    md->nquotas = 0;
    while (md->nbcfg > 0)
        st_md_set_broker_config(md, md->bcfg[0].broker, md->bcfg[0].key, NULL);
    char *c = strdup(cluster);
    if (c) {
        free(md->cluster_id);
        md->cluster_id = c;
    }
    int rc = 0;
    size_t i;
    json_t *r;
    json_array_foreach(brokers, i, r)
    {
        /* the epoch is in no record: a restored broker keeps the snapshot's index */
        rc = rc ? rc : apply_broker(md, r, md->version);
    }
    json_array_foreach(topics, i, r)
    {
        rc = rc ? rc : apply_topic(md, r);
    }
    st_acl_set_fini(&md->acls);
    json_t *acls = json_object_get(root, "acls"); /* absent from snapshots before ACLs */
    json_array_foreach(acls, i, r)
    {
        rc = rc ? rc : apply_acl(md, r, false);
    }
    /* absent from snapshots written before the SCRAM credentials existed */
    json_array_foreach(json_object_get(root, "scram"), i, r)
    {
        rc = rc ? rc : apply_scram(md, r);
    }
    /* absent from snapshots written before client quotas existed */
    json_array_foreach(json_object_get(root, "quotas"), i, r)
    {
        rc = rc ? rc : apply_quota(md, r);
    }
    /* absent from snapshots written before dynamic broker settings existed */
    json_array_foreach(json_object_get(root, "broker_configs"), i, r)
    {
        rc = rc ? rc : apply_broker_config(md, r);
    }
    json_decref(root);
    return rc ? ST_E_CORRUPT : 0;
}

/* ---- decisions ---- */

int st_rec_live_brokers(const st_md_t *md)
{
    int n = 0;
    for (int i = 0; i < md->nbrokers; i++)
        n += !md->brokers[i].fenced;
    return n;
}

/* The live brokers in placement order: by id, or, when racks are set, alternating racks
 * (rack A's first, rack B's first, ..., rack A's second, ...), so consecutive brokers of the
 * list sit on different racks as long as racks remain. Returns the count. */
static int placement_order(const st_md_t *md, int32_t *out)
{
    int n = 0, nracks = 0;
    const char *racks[ST_MD_MAX_REPLICAS * 4];
    for (int i = 0; i < md->nbrokers; i++) {
        const st_md_broker_t *b = &md->brokers[i];
        if (b->fenced)
            continue;
        out[n++] = b->node_id;
        bool seen = false;
        for (int r = 0; r < nracks; r++)
            seen |= b->rack && strcmp(racks[r], b->rack) == 0;
        if (b->rack && !seen && nracks < (int)(sizeof racks / sizeof racks[0]))
            racks[nracks++] = b->rack;
    }
    if (nracks < 2)
        return n;
    int32_t *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp)
        return n;
    int k = 0;
    for (int round = 0; k < n; round++) {
        for (int r = 0; r <= nracks; r++) {
            int seen = 0;
            for (int i = 0; i < md->nbrokers; i++) {
                const st_md_broker_t *b = &md->brokers[i];
                bool in = r < nracks ? b->rack && strcmp(b->rack, racks[r]) == 0 : !b->rack;
                if (b->fenced || !in)
                    continue;
                if (seen++ == round)
                    tmp[k++] = b->node_id;
            }
        }
    }
    memcpy(out, tmp, (size_t)n * sizeof *tmp);
    free(tmp);
    return n;
}

static const char *rack_of(const st_md_t *md, int32_t node)
{
    const st_md_broker_t *b = st_md_broker(md, node);
    return b && b->rack ? b->rack : "";
}

/* The broker for replica r of p (its first r chosen), from order[at] on: the first that is not
 * a replica yet and, while some rack holds none of p's replicas, sits on such a rack. */
static int32_t next_replica(const st_md_t *md, const int32_t *order, uint32_t n, uint32_t at,
                            const st_md_partition_t *p, int r)
{
    int32_t fallback = -1;
    for (uint32_t k = 0; k < n; k++) {
        int32_t b = order[(at + k) % n];
        bool taken = false, rack_used = false;
        for (int i = 0; i < r; i++) {
            taken |= p->replicas[i] == b;
            rack_used |= strcmp(rack_of(md, p->replicas[i]), rack_of(md, b)) == 0;
        }
        if (taken)
            continue;
        if (!rack_used)
            return b;
        if (fallback < 0)
            fallback = b;
    }
    return fallback;
}

int st_rec_place(const st_md_t *md, int32_t n, int rf, uint32_t start, st_md_partition_t *out,
                 char *msg, size_t msglen)
{
    int32_t *order = malloc(((size_t)md->nbrokers + 1) * sizeof *order);
    if (!order)
        return -ENOMEM;
    int live_n = placement_order(md, order);
    if (rf < 1 || rf > live_n || rf > ST_MD_MAX_REPLICAS) {
        snprintf(msg, msglen,
                 "Unable to replicate the partition %d time(s): The target replication factor "
                 "of %d cannot be reached because only %d broker(s) are registered and live%s.",
                 rf, rf, live_n, rf > ST_MD_MAX_REPLICAS ? " (and at most 16 replicas)" : "");
        free(order);
        return ST_E_INVALID;
    }
    for (int32_t i = 0; i < n; i++) {
        st_md_partition_t *p = &out[i];
        uint32_t k = start + (uint32_t)i, ln = (uint32_t)live_n;
        uint32_t first = k % ln;
        /* the followers' offset from the leader moves each time the leaders wrap around, so
         * the (leader, follower) pairs spread too, as Kafka's assignment does */
        uint32_t shift = ln > 1 ? (k / ln) % (ln - 1) : 0;
        p->nreplicas = p->nisr = (int16_t)rf;
        p->replicas[0] = p->isr[0] = order[first];
        for (int r = 1; r < rf; r++) {
            uint32_t at = (first + 1 + (shift + (uint32_t)(r - 1)) % (ln - 1)) % ln;
            p->replicas[r] = p->isr[r] = next_replica(md, order, ln, at, p, r);
        }
        p->leader = p->replicas[0];
        p->leader_epoch = p->partition_epoch = 0;
    }
    free(order);
    return 0;
}

/* Drops the ISR members that are not live; when none is, the ISR keeps one member, the
 * leader if it was in it (it has every record the ISR acknowledged), else its first. */
static void isr_shrink(const st_md_t *md, st_md_partition_t *p)
{
    if (p->nisr == 0)
        return;
    int32_t keep = st_md_in_isr(p, p->leader) ? p->leader : p->isr[0];
    int16_t n = 0;
    for (int i = 0; i < p->nisr; i++)
        if (st_md_broker_live(md, p->isr[i]))
            p->isr[n++] = p->isr[i];
    if (n == 0)
        p->isr[n++] = keep;
    p->nisr = n;
}

bool st_rec_elect(const st_md_t *md, st_md_partition_t *p, bool unclean)
{
    st_md_partition_t was = *p;
    isr_shrink(md, p);
    int32_t leader = -1;
    if (p->leader >= 0 && st_md_broker_live(md, p->leader) && st_md_in_isr(p, p->leader))
        leader = p->leader;
    for (int r = 0; leader < 0 && r < p->nreplicas; r++)
        if (st_md_broker_live(md, p->replicas[r]) && st_md_in_isr(p, p->replicas[r]))
            leader = p->replicas[r];
    for (int r = 0; leader < 0 && unclean && r < p->nreplicas; r++)
        if (st_md_broker_live(md, p->replicas[r])) {
            leader = p->replicas[r];
            p->nisr = 1;
            p->isr[0] = leader;
        }
    p->leader = leader;
    if (p->leader != was.leader)
        p->leader_epoch++;
    bool changed = p->leader != was.leader || p->nisr != was.nisr ||
                   memcmp(p->isr, was.isr, (size_t)p->nisr * sizeof p->isr[0]) != 0;
    if (changed)
        p->partition_epoch++;
    return changed;
}

bool st_rec_elect_preferred(const st_md_t *md, st_md_partition_t *p)
{
    if (p->nreplicas == 0)
        return false;
    int32_t pref = p->replicas[0];
    if (p->leader == pref || !st_md_broker_live(md, pref) || !st_md_in_isr(p, pref))
        return false;
    p->leader = pref;
    p->leader_epoch++;
    p->partition_epoch++;
    return true;
}

bool st_rec_unclean_allowed(const st_md_topic_t *t, bool broker_default)
{
    const char *v = st_md_topic_config(t, "unclean.leader.election.enable");
    if (!v)
        return broker_default;
    return strcasecmp(v, "true") == 0;
}

int st_rec_reelect_all(const st_md_t *md, bool unclean_default, json_t *records)
{
    int n = 0;
    for (int i = 0; i < md->ntopics; i++) {
        const st_md_topic_t *t = md->topics[i];
        st_md_topic_t *c = NULL;
        bool unclean = st_rec_unclean_allowed(t, unclean_default);
        for (int32_t p = 0; p < t->npartitions; p++) {
            st_md_partition_t np = t->partitions[p];
            if (!st_rec_elect(md, &np, unclean))
                continue;
            if (!c && !(c = st_md_topic_clone(t)))
                return n;
            c->partitions[p] = np;
        }
        if (c) {
            json_array_append_new(records, st_rec_topic(c));
            st_md_topic_free(c);
            n++;
        }
    }
    return n;
}

/* Whether broker `node` leads fewer of its preferred partitions than pct percent allows. */
static bool imbalanced(const st_md_t *md, int32_t node, int pct)
{
    int64_t preferred = 0, elsewhere = 0;
    for (int i = 0; i < md->ntopics; i++)
        for (int32_t p = 0; p < md->topics[i]->npartitions; p++) {
            const st_md_partition_t *mp = &md->topics[i]->partitions[p];
            if (mp->nreplicas == 0 || mp->replicas[0] != node)
                continue;
            preferred++;
            elsewhere += mp->leader != node;
        }
    return preferred > 0 && elsewhere * 100 > preferred * pct;
}

int st_rec_rebalance(const st_md_t *md, int pct, json_t *records)
{
    int n = 0;
    bool *due = calloc((size_t)md->nbrokers + 1, sizeof *due);
    if (!due)
        return 0;
    for (int b = 0; b < md->nbrokers; b++)
        due[b] = !md->brokers[b].fenced && imbalanced(md, md->brokers[b].node_id, pct);
    for (int i = 0; i < md->ntopics; i++) {
        const st_md_topic_t *t = md->topics[i];
        st_md_topic_t *c = NULL;
        for (int32_t p = 0; p < t->npartitions; p++) {
            st_md_partition_t np = t->partitions[p];
            bool want = false;
            for (int b = 0; b < md->nbrokers && np.nreplicas > 0; b++)
                want |= due[b] && md->brokers[b].node_id == np.replicas[0];
            if (!want || !st_rec_elect_preferred(md, &np))
                continue;
            if (!c && !(c = st_md_topic_clone(t)))
                break;
            c->partitions[p] = np;
        }
        if (c) {
            json_array_append_new(records, st_rec_topic(c));
            st_md_topic_free(c);
            n++;
        }
    }
    free(due);
    return n;
}

int st_rec_alter_isr(const st_md_t *md, st_md_topic_t *t, const st_rec_alter_t *a)
{
    if (a->partition < 0 || a->partition >= t->npartitions || a->nisr < 1 ||
        a->nisr > ST_MD_MAX_REPLICAS)
        return ST_E_INVALID;
    st_md_partition_t *p = &t->partitions[a->partition];
    if (p->leader != a->leader || p->leader_epoch != a->leader_epoch ||
        p->partition_epoch != a->partition_epoch)
        return ST_E_INVALID; /* stale: the leader will see the newer state and ask again */
    bool has_leader = false, ok = true;
    for (int i = 0; i < a->nisr; i++) {
        int32_t m = a->isr[i];
        has_leader |= m == a->leader;
        if (!st_md_is_replica(p, m) || (!st_md_in_isr(p, m) && !st_md_broker_live(md, m)))
            ok = false;
        for (int j = 0; j < i; j++)
            if (a->isr[j] == m)
                ok = false;
    }
    if (!ok || !has_leader) {
        /* Refused at the current epochs: the partition epoch moves anyway, so the leader
         * learns the answer (it counts the replicas it asked to add until the epoch moves,
         * partition.h) — Kafka's AlterPartition error response, in the metadata log. */
        p->partition_epoch++;
        return ST_E_AGAIN;
    }
    memcpy(p->isr, a->isr, (size_t)a->nisr * sizeof p->isr[0]);
    p->nisr = a->nisr;
    p->partition_epoch++;
    st_rec_reassign_progress(md, p);
    return 0;
}

/* ---- reassignments (KIP-455) ---- */

static bool has(const int32_t *v, int n, int32_t id)
{
    for (int i = 0; i < n; i++)
        if (v[i] == id)
            return true;
    return false;
}

/* Kafka's rule (PartitionChangeBuilder): a replica leaving the replica set bumps the leader
 * epoch even when the leader stays, so the leaving broker's fetches, still on its old copy, are
 * fenced (FENCED_LEADER_EPOCH) and cannot count toward an ISR it may be added back to. */
static void bump_if_removed(const st_md_partition_t *was, st_md_partition_t *p)
{
    if (p->leader_epoch != was->leader_epoch)
        return; /* a new leader bumped it already */
    for (int i = 0; i < was->nreplicas; i++)
        if (!has(p->replicas, p->nreplicas, was->replicas[i])) {
            p->leader_epoch++;
            return;
        }
}

/* The replicas a reassignment in progress started from (replicas less those being added). */
static int original_replicas(const st_md_partition_t *p, int32_t *out)
{
    int n = 0;
    for (int i = 0; i < p->nreplicas; i++)
        if (!has(p->adding, p->nadding, p->replicas[i]))
            out[n++] = p->replicas[i];
    return n;
}

int st_rec_reassign(const st_md_t *md, st_md_partition_t *p, const int32_t *target, int n)
{
    if (n < 1 || n > ST_MD_MAX_REPLICAS)
        return ST_E_INVALID;
    int32_t orig[ST_MD_MAX_REPLICAS];
    int norig = original_replicas(p, orig);
    st_md_partition_t np = *p;
    np.nreplicas = np.nadding = np.nremoving = 0;
    for (int i = 0; i < n; i++) {
        np.replicas[np.nreplicas++] = target[i];
        if (!has(orig, norig, target[i]))
            np.adding[np.nadding++] = target[i];
    }
    for (int i = 0; i < norig; i++)
        if (!has(target, n, orig[i])) {
            if (np.nreplicas >= ST_MD_MAX_REPLICAS)
                return ST_E_INVALID; /* target and current together are too many */
            np.replicas[np.nreplicas++] = orig[i];
            np.removing[np.nremoving++] = orig[i];
        }
    /* the ISR keeps its members (every one is an original or target replica) */
    int16_t k = 0;
    for (int i = 0; i < np.nisr; i++)
        if (has(np.replicas, np.nreplicas, np.isr[i]))
            np.isr[k++] = np.isr[i];
    np.nisr = k;
    if (np.nisr == 0)
        return ST_E_INVALID;
    bool same = np.nreplicas == p->nreplicas && np.nadding == p->nadding &&
                np.nremoving == p->nremoving &&
                memcmp(np.replicas, p->replicas, (size_t)np.nreplicas * sizeof *np.replicas) == 0;
    if (same)
        return 1;
    np.partition_epoch++;
    st_md_partition_t was = *p;
    *p = np;
    /* a new target that leaves out the leader (replacing a move in progress can drop the
     * replica it added) takes the leadership to the ISR that is left (found by the
     * simulation: a leader outside its own replica set) */
    st_rec_elect(md, p, false);
    bump_if_removed(&was, p);
    st_rec_reassign_progress(md, p);
    return 0;
}

bool st_rec_reassign_progress(const st_md_t *md, st_md_partition_t *p)
{
    if (!p->nadding && !p->nremoving)
        return false;
    int32_t target[ST_MD_MAX_REPLICAS];
    int n = 0;
    for (int i = 0; i < p->nreplicas; i++)
        if (!has(p->removing, p->nremoving, p->replicas[i]))
            target[n++] = p->replicas[i];
    for (int i = 0; i < n; i++)
        if (!st_md_in_isr(p, target[i]))
            return false; /* a target replica has not caught up yet: the move waits */
    /* every target replica is in sync: the old ones leave, leadership stays in the ISR */
    st_md_partition_t was = *p;
    memcpy(p->replicas, target, (size_t)n * sizeof *target);
    p->nreplicas = (int16_t)n;
    int16_t k = 0;
    for (int i = 0; i < p->nisr; i++)
        if (has(target, n, p->isr[i]))
            p->isr[k++] = p->isr[i];
    p->nisr = k;
    p->nadding = p->nremoving = 0;
    p->partition_epoch++;
    st_rec_elect(md, p, false); /* a leader that left is replaced from the (target) ISR */
    bump_if_removed(&was, p);
    return true;
}

int st_rec_reassign_cancel(const st_md_t *md, st_md_partition_t *p)
{
    if (!p->nadding && !p->nremoving)
        return ST_E_NOT_FOUND;
    int32_t orig[ST_MD_MAX_REPLICAS];
    int norig = original_replicas(p, orig);
    int16_t k = 0;
    int32_t isr[ST_MD_MAX_REPLICAS];
    for (int i = 0; i < p->nisr; i++)
        if (has(orig, norig, p->isr[i]))
            isr[k++] = p->isr[i];
    if (k == 0)
        return ST_E_INVALID; /* only added replicas are in sync: going back would lose them */
    st_md_partition_t was = *p;
    memcpy(p->replicas, orig, (size_t)norig * sizeof *orig);
    p->nreplicas = (int16_t)norig;
    memcpy(p->isr, isr, (size_t)k * sizeof *isr);
    p->nisr = k;
    p->nadding = p->nremoving = 0;
    p->partition_epoch++;
    st_rec_elect(md, p, false);
    bump_if_removed(&was, p);
    return 0;
}

int st_rec_broker_change(const st_md_t *state, const st_md_broker_t *b, bool unclean_default,
                         json_t *records)
{
    st_md_t *md = st_md_clone(state);
    if (!md || st_md_put_broker(md, b)) {
        st_md_unref(md);
        return -ENOMEM;
    }
    json_array_append_new(records, st_rec_broker(b));
    st_rec_reelect_all(md, unclean_default, records);
    st_md_unref(md);
    return 0;
}
