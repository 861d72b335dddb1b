/*
 * acl.c — ACL sets, filters and the authorizer's decision (acl.h).
 *
 * A set is a flat array: clusters carry tens to a few thousand ACLs, every decision walks
 * them once, and a decision is made per request and resource, not per record.
 */
#include "auth/acl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void st_acl_set_init(st_acl_set_t *s)
{
    memset(s, 0, sizeof *s);
}

static void acl_free(st_acl_t *a)
{
    free(a->name);
    free(a->principal);
    free(a->host);
}

void st_acl_set_fini(st_acl_set_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        acl_free(&s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int acl_dup(st_acl_t *dst, const st_acl_t *src)
{
    *dst = *src;
    dst->name = strdup(src->name);
    dst->principal = strdup(src->principal);
    dst->host = strdup(src->host);
    if (!dst->name || !dst->principal || !dst->host) {
        acl_free(dst);
        return -ENOMEM;
    }
    return 0;
}

static int reserve(st_acl_set_t *s, size_t n)
{
    if (n <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap * 2 : 16;
    while (cap < n)
        cap *= 2;
    st_acl_t *v = realloc(s->v, cap * sizeof *v);
    if (!v)
        return -ENOMEM;
    s->v = v;
    s->cap = cap;
    return 0;
}

int st_acl_set_copy(st_acl_set_t *dst, const st_acl_set_t *src)
{
    st_acl_set_fini(dst);
    if (reserve(dst, src->n))
        return -ENOMEM;
    for (size_t i = 0; i < src->n; i++) {
        if (acl_dup(&dst->v[i], &src->v[i])) {
            st_acl_set_fini(dst);
            return -ENOMEM;
        }
        dst->n++;
    }
    return 0;
}

const char *st_acl_invalid(const st_acl_t *a)
{
    if (a->resource_type < ST_ACL_RES_TOPIC || a->resource_type > ST_ACL_RES_USER)
        return "the resource type must be a concrete one (not UNKNOWN or ANY)";
    if (a->pattern_type != ST_ACL_PAT_LITERAL && a->pattern_type != ST_ACL_PAT_PREFIXED)
        return "the pattern type must be LITERAL or PREFIXED";
    if (a->operation < ST_ACL_OP_ALL || a->operation > ST_ACL_OP_DESCRIBE_TOKENS)
        return "the operation must be a concrete one (not UNKNOWN or ANY)";
    if (a->permission != ST_ACL_PERM_ALLOW && a->permission != ST_ACL_PERM_DENY)
        return "the permission type must be ALLOW or DENY";
    if (!a->name || !*a->name)
        return "the resource name is empty";
    if (strlen(a->name) > ST_ACL_NAME_MAX)
        return "the resource name is too long";
    if (a->resource_type == ST_ACL_RES_CLUSTER &&
        (a->pattern_type != ST_ACL_PAT_LITERAL || strcmp(a->name, ST_ACL_CLUSTER_NAME) != 0))
        return "the cluster resource is LITERAL kafka-cluster";
    const char *colon = a->principal ? strchr(a->principal, ':') : NULL;
    if (!colon || colon == a->principal || !colon[1])
        return "the principal must be of the form Type:name (User:alice)";
    if (strlen(a->principal) > ST_ACL_NAME_MAX)
        return "the principal is too long";
    if (!a->host || !*a->host)
        return "the host is empty (use * for any)";
    return NULL;
}

static bool acl_equal(const st_acl_t *x, const st_acl_t *y)
{
    return x->resource_type == y->resource_type && x->pattern_type == y->pattern_type &&
           x->operation == y->operation && x->permission == y->permission &&
           strcmp(x->name, y->name) == 0 && strcmp(x->principal, y->principal) == 0 &&
           strcmp(x->host, y->host) == 0;
}

int st_acl_add(st_acl_set_t *s, const st_acl_t *acl)
{
    for (size_t i = 0; i < s->n; i++)
        if (acl_equal(&s->v[i], acl))
            return 0;
    if (reserve(s, s->n + 1) || acl_dup(&s->v[s->n], acl))
        return -ENOMEM;
    s->n++;
    return 1;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Whether the pattern of acl applies to the resource named name (LITERAL equal or "*",
 * PREFIXED prefix). */
static bool pattern_covers(const st_acl_t *acl, const char *name)
{
    if (acl->pattern_type == ST_ACL_PAT_LITERAL)
        return strcmp(acl->name, name) == 0 || strcmp(acl->name, ST_ACL_WILDCARD) == 0;
    if (acl->pattern_type == ST_ACL_PAT_PREFIXED)
        return has_prefix(name, acl->name);
    return false;
}

bool st_acl_filter_matches(const st_acl_t *f, const st_acl_t *a)
{
    if (f->resource_type != ST_ACL_RES_ANY && f->resource_type != a->resource_type)
        return false;
    switch (f->pattern_type) {
    case ST_ACL_PAT_ANY:
        if (f->name && strcmp(f->name, a->name) != 0)
            return false;
        break;
    case ST_ACL_PAT_MATCH:
        if (f->name && !pattern_covers(a, f->name))
            return false;
        break;
    default:
        if (f->pattern_type != a->pattern_type || (f->name && strcmp(f->name, a->name) != 0))
            return false;
    }
    if (f->principal && strcmp(f->principal, a->principal) != 0)
        return false;
    if (f->host && strcmp(f->host, a->host) != 0)
        return false;
    if (f->operation != ST_ACL_OP_ANY && f->operation != a->operation)
        return false;
    if (f->permission != ST_ACL_PERM_ANY && f->permission != a->permission)
        return false;
    return true;
}

size_t st_acl_remove(st_acl_set_t *s, const st_acl_t *filter,
                     void (*removed)(void *arg, const st_acl_t *acl), void *arg)
{
    size_t kept = 0, gone = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (st_acl_filter_matches(filter, &s->v[i])) {
            if (removed)
                removed(arg, &s->v[i]);
            acl_free(&s->v[i]);
            gone++;
        } else {
            s->v[kept++] = s->v[i];
        }
    }
    s->n = kept;
    return gone;
}

bool st_acl_is_super(const char *super_users, const char *principal)
{
    if (!super_users || !principal)
        return false;
    size_t plen = strlen(principal);
    for (const char *p = super_users; *p;) {
        while (*p == ';' || *p == ' ')
            p++;
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && p[len - 1] == ' ')
            len--;
        if (len == plen && len > 0 && memcmp(p, principal, len) == 0)
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

static bool entry_matches(const st_acl_t *a, const char *principal, const char *host)
{
    return (strcmp(a->principal, principal) == 0 || strcmp(a->principal, ST_ACL_ANY_USER) == 0) &&
           (strcmp(a->host, ST_ACL_WILDCARD) == 0 || (host && strcmp(a->host, host) == 0));
}

/* Whether an ALLOW for `have` grants `want` (ALL grants everything; READ, WRITE, DELETE and
 * ALTER grant DESCRIBE; ALTER_CONFIGS grants DESCRIBE_CONFIGS). */
static bool grants(int have, int want)
{
    if (have == want || have == ST_ACL_OP_ALL)
        return true;
    if (want == ST_ACL_OP_DESCRIBE)
        return have == ST_ACL_OP_READ || have == ST_ACL_OP_WRITE || have == ST_ACL_OP_DELETE ||
               have == ST_ACL_OP_ALTER;
    if (want == ST_ACL_OP_DESCRIBE_CONFIGS)
        return have == ST_ACL_OP_ALTER_CONFIGS;
    return false;
}

bool st_acl_authorize(const st_acl_set_t *s, const st_authz_cfg_t *cfg, const char *principal,
                      const char *host, int op, int res_type, const char *name)
{
    if (!cfg->enabled || st_acl_is_super(cfg->super_users, principal))
        return true;
    bool any = false, allowed = false;
    for (size_t i = 0; i < s->n; i++) {
        const st_acl_t *a = &s->v[i];
        if (a->resource_type != res_type || !pattern_covers(a, name))
            continue;
        any = true;
        if (!entry_matches(a, principal, host))
            continue;
        if (a->permission == ST_ACL_PERM_DENY &&
            (a->operation == op || a->operation == ST_ACL_OP_ALL))
            return false;
        if (a->permission == ST_ACL_PERM_ALLOW && grants(a->operation, op))
            allowed = true;
    }
    return any ? allowed : cfg->allow_if_no_acl;
}

/* Whether a DENY covers every resource the ALLOW allow applies to. */
static bool denied_whole(const st_acl_t *deny, const st_acl_t *allow)
{
    if (deny->pattern_type == ST_ACL_PAT_LITERAL)
        return strcmp(deny->name, ST_ACL_WILDCARD) == 0 ||
               (allow->pattern_type == ST_ACL_PAT_LITERAL && strcmp(deny->name, allow->name) == 0);
    return has_prefix(allow->name, deny->name); /* PREFIXED */
}

bool st_acl_authorize_any(const st_acl_set_t *s, const st_authz_cfg_t *cfg, const char *principal,
                          const char *host, int op, int res_type)
{
    if (!cfg->enabled || st_acl_is_super(cfg->super_users, principal))
        return true;
    bool any = false;
    for (size_t i = 0; i < s->n; i++) {
        const st_acl_t *a = &s->v[i];
        if (a->resource_type != res_type)
            continue;
        any = true;
        if (a->permission != ST_ACL_PERM_ALLOW || !entry_matches(a, principal, host) ||
            !(a->operation == op || a->operation == ST_ACL_OP_ALL))
            continue;
        bool denied = false;
        for (size_t j = 0; j < s->n && !denied; j++) {
            const st_acl_t *d = &s->v[j];
            denied = d->resource_type == res_type && d->permission == ST_ACL_PERM_DENY &&
                     entry_matches(d, principal, host) &&
                     (d->operation == op || d->operation == ST_ACL_OP_ALL) && denied_whole(d, a);
        }
        if (!denied)
            return true;
    }
    return !any && cfg->allow_if_no_acl;
}

static const char *const RES_NAMES[] = {
    "Unknown", "Any", "Topic", "Group", "Cluster", "TransactionalId", "DelegationToken", "User"};
static const char *const PAT_NAMES[] = {"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"};
static const char *const OP_NAMES[] = {"Unknown",
                                       "Any",
                                       "All",
                                       "Read",
                                       "Write",
                                       "Create",
                                       "Delete",
                                       "Alter",
                                       "Describe",
                                       "ClusterAction",
                                       "DescribeConfigs",
                                       "AlterConfigs",
                                       "IdempotentWrite",
                                       "CreateTokens",
                                       "DescribeTokens"};
static const char *const PERM_NAMES[] = {"Unknown", "Any", "Deny", "Allow"};

#define NAME_OF(table, v)                                                                          \
    ((v) >= 0 && (size_t)(v) < sizeof(table) / sizeof(table)[0] ? (table)[v] : "Unknown")

const char *st_acl_res_name(int v)
{
    return NAME_OF(RES_NAMES, v);
}

const char *st_acl_pat_name(int v)
{
    return NAME_OF(PAT_NAMES, v);
}

const char *st_acl_op_name(int v)
{
    return NAME_OF(OP_NAMES, v);
}

const char *st_acl_perm_name(int v)
{
    return NAME_OF(PERM_NAMES, v);
}

/* The index of s in table, case-insensitive, ignoring '_' (so "CLUSTER_ACTION" and
 * "ClusterAction" both parse); -1 for none. Index 0 (Unknown) never parses. */
static int parse_in(const char *const *table, size_t n, const char *s)
{
    if (!s)
        return -1;
    char want[32];
    size_t k = 0;
    for (const char *p = s; *p && k + 1 < sizeof want; p++)
        if (*p != '_' && *p != '-')
            want[k++] = *p;
    want[k] = '\0';
    for (size_t i = 1; i < n; i++)
        if (strcasecmp(table[i], want) == 0)
            return (int)i;
    return -1;
}

#define PARSE_IN(table, s) parse_in((table), sizeof(table) / sizeof(table)[0], (s))

int st_acl_res_parse(const char *s)
{
    return PARSE_IN(RES_NAMES, s);
}

int st_acl_pat_parse(const char *s)
{
    return PARSE_IN(PAT_NAMES, s);
}

int st_acl_op_parse(const char *s)
{
    return PARSE_IN(OP_NAMES, s);
}

int st_acl_perm_parse(const char *s)
{
    return PARSE_IN(PERM_NAMES, s);
}
