/*
 * authz.c — the handlers' authorization checks (authz.h).
 */
#include "kafka/authz.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "broker/runtime.h"
#include "kafka/kshard.h"
#include "net/auth.h"
#include "net/conn.h"
#include "proto/kerr.h"

bool st_kauthz_on(const st_kreq_t *r)
{
    return r->shard->b->cfg->authorizer_enabled;
}

static st_authz_cfg_t cfg_of(const st_kreq_t *r)
{
    const st_config_t *c = r->shard->b->cfg;
    return (st_authz_cfg_t){c->authorizer_enabled, c->super_users,
                            c->allow_everyone_if_no_acl_found};
}

static const char *principal_of(st_kreq_t *r)
{
    const st_auth_t *a = st_conn_auth(r->conn);
    return a && a->principal[0] ? a->principal : ST_AUTH_ANONYMOUS;
}

/* The peer's address without its port. */
static void host_of(st_kreq_t *r, char *out, size_t n)
{
    const char *peer = st_conn_peer(r->conn);
    const char *colon = strrchr(peer, ':');
    size_t len = colon ? (size_t)(colon - peer) : strlen(peer);
    snprintf(out, n, "%.*s", (int)len, peer);
}

static bool decide(st_kreq_t *r, int op, int res_type, const char *name, size_t len, bool log)
{
    if (!r->conn || !st_kauthz_on(r))
        return true;
    char host[64], buf[ST_ACL_NAME_MAX + 1];
    host_of(r, host, sizeof host);
    snprintf(buf, sizeof buf, "%.*s", (int)(len < ST_ACL_NAME_MAX ? len : ST_ACL_NAME_MAX), name);
    st_authz_cfg_t cfg = cfg_of(r);
    const char *principal = principal_of(r);
    bool ok = st_acl_authorize(&r->shard->md->acls, &cfg, principal, host, op, res_type, buf);
    if (!ok && log)
        ST_INFO("authorizer: Principal = %s is Denied operation = %s from host = %s on resource "
                "= %s:LITERAL:%s (api key %d)",
                principal, st_acl_op_name(op), host, st_acl_res_name(res_type), buf,
                (int)r->api_key);
    return ok;
}

bool st_kauthz(st_kreq_t *r, int op, int res_type, const char *name, size_t len)
{
    return decide(r, op, res_type, name, len, true);
}

bool st_kauthz_k(st_kreq_t *r, int op, int res_type, st_kstr_t name)
{
    if (!r->conn || !st_kauthz_on(r))
        return true;
    return name.len >= 0 && decide(r, op, res_type, name.ptr, (size_t)name.len, true);
}

int16_t st_kauthz_txn_group(st_kreq_t *r, st_kstr_t transactional_id, st_kstr_t group_id)
{
    if (!st_kauthz_k(r, ST_ACL_OP_WRITE, ST_ACL_RES_TRANSACTIONAL_ID, transactional_id))
        return ST_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    if (!st_kauthz_k(r, ST_ACL_OP_READ, ST_ACL_RES_GROUP, group_id))
        return ST_KERR_GROUP_AUTHORIZATION_FAILED;
    return 0;
}

bool st_kauthz_quiet(st_kreq_t *r, int op, int res_type, const char *name, size_t len)
{
    return decide(r, op, res_type, name, len, false);
}

bool st_kauthz_cluster(st_kreq_t *r, int op)
{
    return decide(r, op, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME, strlen(ST_ACL_CLUSTER_NAME),
                  true);
}

bool st_kauthz_any(st_kreq_t *r, int op, int res_type)
{
    if (!r->conn || !st_kauthz_on(r))
        return true;
    char host[64];
    host_of(r, host, sizeof host);
    st_authz_cfg_t cfg = cfg_of(r);
    return st_acl_authorize_any(&r->shard->md->acls, &cfg, principal_of(r), host, op, res_type);
}

int32_t st_kauthz_ops(st_kreq_t *r, int res_type, const char *name, size_t len)
{
    static const int8_t topic[] = {
        ST_ACL_OP_READ,   ST_ACL_OP_WRITE, ST_ACL_OP_CREATE,           ST_ACL_OP_DESCRIBE,
        ST_ACL_OP_DELETE, ST_ACL_OP_ALTER, ST_ACL_OP_DESCRIBE_CONFIGS, ST_ACL_OP_ALTER_CONFIGS};
    static const int8_t group[] = {ST_ACL_OP_READ, ST_ACL_OP_DESCRIBE, ST_ACL_OP_DELETE};
    static const int8_t cluster[] = {ST_ACL_OP_CREATE,           ST_ACL_OP_CLUSTER_ACTION,
                                     ST_ACL_OP_DESCRIBE_CONFIGS, ST_ACL_OP_ALTER_CONFIGS,
                                     ST_ACL_OP_IDEMPOTENT_WRITE, ST_ACL_OP_ALTER,
                                     ST_ACL_OP_DESCRIBE};
    static const int8_t txn[] = {ST_ACL_OP_DESCRIBE, ST_ACL_OP_WRITE};
    const int8_t *ops = NULL;
    size_t n = 0;
    switch (res_type) {
    case ST_ACL_RES_TOPIC:
        ops = topic, n = sizeof topic;
        break;
    case ST_ACL_RES_GROUP:
        ops = group, n = sizeof group;
        break;
    case ST_ACL_RES_CLUSTER:
        ops = cluster, n = sizeof cluster;
        break;
    case ST_ACL_RES_TRANSACTIONAL_ID:
        ops = txn, n = sizeof txn;
        break;
    default:
        break;
    }
    int32_t bits = 0;
    for (size_t i = 0; i < n; i++)
        if (decide(r, ops[i], res_type, name, len, false))
            bits |= (int32_t)1 << ops[i];
    return bits;
}
