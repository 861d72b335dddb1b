/*
 * h_scram.c — the SCRAM credential APIs of KIP-554: DescribeUserScramCredentials (50) and
 * AlterUserScramCredentials (51).
 *
 * Describe reads this shard's metadata snapshot: every user (users null or empty) or those
 * named (RESOURCE_NOT_FOUND for one without a credential, DUPLICATE_RESOURCE for a name given
 * twice), each with its mechanisms and iteration counts (never the salt or keys).
 *
 * Alter checks each deletion and upsertion as Kafka does (a name given twice for one
 * mechanism: DUPLICATE_RESOURCE; an unknown mechanism: UNSUPPORTED_SASL_MECHANISM; an
 * iteration count outside 4096..16384, an empty name or a salted password of the wrong length:
 * UNACCEPTABLE_CREDENTIAL), turns each upsertion's salted password into StoredKey and
 * ServerKey here (auth/scram.h), and hands the users whose every change passed to the
 * controller as one ST_CTL_SCRAM op (cluster/ops.h): the records go through the metadata log
 * and reach every broker. One result per user, as Kafka answers: the first error among its
 * changes, or none.
 *
 * Threads: the request's shard.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/scram.h"
#include "kafka/authz.h"
#include "kafka/controller.h"
#include "kafka/handlers.h"
#include "kafka/sasl.h"
#include "proto/kerr.h"

/* ---- DescribeUserScramCredentials ---- */

/* Fills result o with user's credentials (ci: room for every mechanism). */
static void describe_user(const st_md_t *md, const char *user,
                          st_kp_describe_user_scram_credentials_resp_result_t *o,
                          st_kp_describe_user_scram_credentials_resp_credential_info_t *ci)
{
    o->user = st_kstr(user);
    o->credential_infos = ci;
    for (int8_t m = ST_SCRAM_SHA_256; m <= ST_SCRAM_SHA_512; m++) {
        const st_md_scram_t *c = st_md_find_scram(md, user, m);
        if (c) {
            ci[o->credential_infos_count].mechanism = m;
            ci[o->credential_infos_count].iterations = c->iterations;
            o->credential_infos_count++;
        }
    }
}

void st_kh_describe_user_scram_credentials(st_kreq_t *r)
{
    st_kp_describe_user_scram_credentials_req_t req;
    if (st_kp_describe_user_scram_credentials_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed DescribeUserScramCredentials request");
        return;
    }
    const st_md_t *md = r->shard->md;
    st_kp_describe_user_scram_credentials_resp_t resp = {0};
    if (!st_kauthz_cluster(r, ST_ACL_OP_DESCRIBE)) { /* Kafka's check: DESCRIBE on the cluster */
        resp.error_code = r->error_code = ST_KERR_CLUSTER_AUTHORIZATION_FAILED;
        resp.error_message = st_kstr("Cluster authorization failed.");
        ST_KREQ_RESPOND(r, describe_user_scram_credentials, &resp);
        return;
    }
    int n = req.users_count > 0 ? req.users_count : md->nscram;
    resp.results = st_arena_zalloc(&r->arena, (size_t)n * sizeof *resp.results + 1);
    st_kp_describe_user_scram_credentials_resp_credential_info_t *ci =
        st_arena_zalloc(&r->arena, (size_t)n * 2 * sizeof *ci + 1);
    if (!resp.results || !ci) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    if (req.users_count <= 0) {
        /* every user once: the credentials are sorted by user */
        for (int i = 0; i < md->nscram; i++) {
            if (i > 0 && strcmp(md->scram[i - 1].user, md->scram[i].user) == 0)
                continue;
            describe_user(md, md->scram[i].user, &resp.results[resp.results_count],
                          &ci[2 * resp.results_count]);
            resp.results_count++;
        }
    } else {
        for (int i = 0; i < n; i++) {
            st_kp_describe_user_scram_credentials_resp_result_t *o = &resp.results[i];
            st_kstr_t name = req.users[i].name;
            o->user = name;
            resp.results_count++;
            bool dup = false;
            for (int j = 0; j < n; j++)
                if (j != i && req.users[j].name.len == name.len && name.len >= 0 &&
                    memcmp(req.users[j].name.ptr, name.ptr, (size_t)name.len) == 0)
                    dup = true;
            char *user =
                name.len >= 0 ? st_arena_strndup(&r->arena, name.ptr, (size_t)name.len) : NULL;
            if (dup) {
                o->error_code = ST_KERR_DUPLICATE_RESOURCE;
                o->error_message = st_kstr("Cannot describe SCRAM credentials for the same user "
                                           "twice in a single request");
                continue;
            }
            if (user)
                describe_user(md, user, o, &ci[2 * i]);
            o->user = name;
            if (!user || o->credential_infos_count == 0) {
                o->error_code = ST_KERR_RESOURCE_NOT_FOUND;
                o->error_message = st_kstr("Attempt to describe a user credential that does not "
                                           "exist");
            }
        }
    }
    ST_KREQ_RESPOND(r, describe_user_scram_credentials, &resp);
}

/* ---- AlterUserScramCredentials ---- */

typedef struct alter {
    st_ctl_op_t op;
    st_kp_alter_user_scram_credentials_resp_t resp;
    int nusers;
    const char **users;
    int16_t *user_error; /* refused before the controller */
    const char **user_msg;
    int *item_user; /* the user of each controller item */
} alter_t;

static int user_index(alter_t *a, const char *name)
{
    for (int i = 0; i < a->nusers; i++)
        if (strcmp(a->users[i], name) == 0)
            return i;
    a->users[a->nusers] = name;
    return a->nusers++;
}

static void alter_refuse(alter_t *a, int u, int16_t code, const char *msg)
{
    if (!a->user_error[u]) {
        a->user_error[u] = code;
        a->user_msg[u] = msg;
    }
}

static void alter_done(st_kshard_t *s, st_ctl_op_t *op)
{
    alter_t *a = (alter_t *)op;
    st_kreq_t *r = op->arg;
    (void)s;
    for (int i = 0; i < op->n; i++) {
        st_ctl_item_t *it = &op->items[i];
        int u = a->item_user[i];
        if (it->error && !a->user_error[u]) {
            a->user_error[u] = it->error;
            a->user_msg[u] = st_arena_strndup(&r->arena, it->message, strlen(it->message));
        }
    }
    a->resp.results_count = a->nusers;
    for (int u = 0; u < a->nusers; u++) {
        a->resp.results[u].user = st_kstr(a->users[u]);
        a->resp.results[u].error_code = a->user_error[u];
        a->resp.results[u].error_message =
            a->user_error[u] ? st_kstr(a->user_msg[u]) : ST_KSTR_NULL;
        if (a->user_error[u])
            r->error_code = a->user_error[u];
    }
    ST_KREQ_RESPOND(r, alter_user_scram_credentials, &a->resp);
}

void st_kh_alter_user_scram_credentials(st_kreq_t *r)
{
    st_kp_alter_user_scram_credentials_req_t req;
    if (st_kp_alter_user_scram_credentials_req_decode(&r->body, r->api_version, &req)) {
        st_kreq_fail(r, "malformed AlterUserScramCredentials request");
        return;
    }
    int nd = req.deletions_count > 0 ? req.deletions_count : 0;
    int nu = req.upsertions_count > 0 ? req.upsertions_count : 0, n = nd + nu;
    alter_t *a = st_arena_zalloc(&r->arena, sizeof *a);
    if (a) {
        a->users = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->users + 1);
        a->user_error = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->user_error + 1);
        a->user_msg = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->user_msg + 1);
        a->item_user = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->item_user + 1);
        a->op.items = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->op.items + 1);
        a->resp.results = st_arena_zalloc(&r->arena, (size_t)n * sizeof *a->resp.results + 1);
    }
    st_md_scram_t *creds = st_arena_zalloc(&r->arena, (size_t)nu * sizeof *creds + 1);
    int *ops_user = st_arena_zalloc(&r->arena, (size_t)n * sizeof *ops_user + 1);
    int8_t *ops_mech = st_arena_zalloc(&r->arena, (size_t)n * sizeof *ops_mech + 1);
    if (!a || !a->users || !a->user_error || !a->user_msg || !a->item_user || !a->op.items ||
        !a->resp.results || !creds || !ops_user || !ops_mech) {
        st_kreq_fail(r, "out of memory");
        return;
    }
    a->op.kind = ST_CTL_SCRAM;
    a->op.arg = r;
    a->op.cb = alter_done;
    /* With ACLs on: ALTER on the cluster (Kafka's check), else every user is refused */
    bool allowed = st_kauthz_cluster(r, ST_ACL_OP_ALTER);
    /* every change, deletions first: its user, then the checks */
    for (int i = 0; i < n; i++) {
        bool del = i < nd;
        st_kstr_t name = del ? req.deletions[i].name : req.upsertions[i - nd].name;
        int8_t mech = del ? req.deletions[i].mechanism : req.upsertions[i - nd].mechanism;
        const char *user = name.len > 0 && !memchr(name.ptr, 0, (size_t)name.len)
                               ? st_arena_strndup(&r->arena, name.ptr, (size_t)name.len)
                               : "";
        int u = user_index(a, user);
        ops_user[i] = u;
        ops_mech[i] = mech;
        if (!allowed) {
            alter_refuse(a, u, ST_KERR_CLUSTER_AUTHORIZATION_FAILED,
                         "Cluster authorization failed.");
            continue;
        }
        if (!*user || strlen(user) >= ST_MD_SCRAM_USER_MAX) {
            alter_refuse(a, u, ST_KERR_UNACCEPTABLE_CREDENTIAL, "Username must not be empty");
            continue;
        }
        if (mech != ST_SCRAM_SHA_256 && mech != ST_SCRAM_SHA_512) {
            alter_refuse(a, u, ST_KERR_UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism");
            continue;
        }
        for (int j = 0; j < i; j++)
            if (ops_user[j] == u && ops_mech[j] == mech)
                alter_refuse(a, u, ST_KERR_DUPLICATE_RESOURCE,
                             "A user credential cannot be altered twice in the same request");
        if (del)
            continue;
        const st_kp_alter_user_scram_credentials_req_upsertion_t *up = &req.upsertions[i - nd];
        if (up->iterations < ST_SCRAM_MIN_ITER) {
            alter_refuse(a, u, ST_KERR_UNACCEPTABLE_CREDENTIAL, "Too few iterations");
            continue;
        }
        if (up->iterations > ST_SCRAM_MAX_ITER) {
            alter_refuse(a, u, ST_KERR_UNACCEPTABLE_CREDENTIAL, "Too many iterations");
            continue;
        }
        st_scram_cred_t c;
        if (st_scram_cred_from_salted(&c, (st_scram_mech_t)mech, up->iterations, up->salt.ptr,
                                      up->salt.len, up->salted_password.ptr,
                                      up->salted_password.len)) {
            alter_refuse(a, u, ST_KERR_UNACCEPTABLE_CREDENTIAL,
                         "The salt or the salted password has the wrong length");
            continue;
        }
        st_sasl_md_of(user, &c, &creds[i - nd]);
    }
    /* the users all of whose changes passed go to the controller */
    for (int i = 0; i < n; i++) {
        int u = ops_user[i];
        if (a->user_error[u])
            continue;
        st_ctl_item_t *it = &a->op.items[a->op.n];
        a->item_user[a->op.n++] = u;
        it->name = a->users[u];
        it->mechanism = ops_mech[i];
        it->scram = i < nd ? NULL : &creds[i - nd];
    }
    if (a->op.n == 0)
        alter_done(r->shard, &a->op);
    else
        st_ctl_submit(r->shard, &a->op);
}
