/*
 * acl.h — access control lists and the authorizer's decision, as Kafka's StandardAuthorizer
 * makes it.
 *
 * An ACL binds a resource pattern (type, LITERAL name or PREFIXED name) to an entry (principal
 * "User:alice" or "User:*", host address or "*", operation, ALLOW or DENY). The numbers of the
 * enums are the wire's (CreateAcls, DescribeAcls, DeleteAcls and the authorizer's log carry
 * them), so they convert with a cast.
 *
 * The decision for (principal, host, operation, resource), in order:
 *   1. authorization off (no authorizer configured): allowed;
 *   2. the principal is a super user (super.users): allowed;
 *   3. no ACL at all matches the resource (any entry): allow.everyone.if.no.acl.found;
 *   4. a matching DENY whose operation is the operation or ALL: denied (deny wins);
 *   5. a matching ALLOW whose operation is the operation, ALL, or one that implies it: allowed
 *      (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS);
 *   6. otherwise denied.
 * An ACL matches the resource when its type is the resource's and its pattern is LITERAL with
 * the resource's name, LITERAL "*", or PREFIXED with a prefix of the name; its entry matches
 * when its principal is the principal or "User:*" and its host is the host or "*".
 *
 * Filters (DescribeAcls, DeleteAcls): ANY fields and NULL strings match everything; pattern
 * MATCH matches the ACLs that would apply to the filter's name (the three forms above).
 *
 * Threads: pure functions of their arguments; a set belongs to whoever holds it.
 */
#ifndef ST_AUTH_ACL_H
#define ST_AUTH_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    ST_ACL_RES_UNKNOWN = 0,
    ST_ACL_RES_ANY = 1,
    ST_ACL_RES_TOPIC = 2,
    ST_ACL_RES_GROUP = 3,
    ST_ACL_RES_CLUSTER = 4,
    ST_ACL_RES_TRANSACTIONAL_ID = 5,
    ST_ACL_RES_DELEGATION_TOKEN = 6,
    ST_ACL_RES_USER = 7,
} st_acl_res_t;

typedef enum {
    ST_ACL_PAT_UNKNOWN = 0,
    ST_ACL_PAT_ANY = 1,
    ST_ACL_PAT_MATCH = 2,
    ST_ACL_PAT_LITERAL = 3,
    ST_ACL_PAT_PREFIXED = 4,
} st_acl_pat_t;

typedef enum {
    ST_ACL_OP_UNKNOWN = 0,
    ST_ACL_OP_ANY = 1,
    ST_ACL_OP_ALL = 2,
    ST_ACL_OP_READ = 3,
    ST_ACL_OP_WRITE = 4,
    ST_ACL_OP_CREATE = 5,
    ST_ACL_OP_DELETE = 6,
    ST_ACL_OP_ALTER = 7,
    ST_ACL_OP_DESCRIBE = 8,
    ST_ACL_OP_CLUSTER_ACTION = 9,
    ST_ACL_OP_DESCRIBE_CONFIGS = 10,
    ST_ACL_OP_ALTER_CONFIGS = 11,
    ST_ACL_OP_IDEMPOTENT_WRITE = 12,
    ST_ACL_OP_CREATE_TOKENS = 13,
    ST_ACL_OP_DESCRIBE_TOKENS = 14,
} st_acl_op_t;

typedef enum {
    ST_ACL_PERM_UNKNOWN = 0,
    ST_ACL_PERM_ANY = 1,
    ST_ACL_PERM_DENY = 2,
    ST_ACL_PERM_ALLOW = 3,
} st_acl_perm_t;

/* The wire's literal name of the cluster resource, and the wildcards. */
#define ST_ACL_CLUSTER_NAME "kafka-cluster"
#define ST_ACL_WILDCARD     "*"
#define ST_ACL_ANY_USER     "User:*"
#define ST_ACL_NAME_MAX     4096 /* a resource name or principal, bytes */

/* An ACL (strings owned by the set that holds it) or a filter (strings NULL for any). */
typedef struct st_acl {
    int8_t resource_type;
    int8_t pattern_type;
    char *name;
    char *principal;
    char *host;
    int8_t operation;
    int8_t permission;
} st_acl_t;

typedef struct st_acl_set {
    st_acl_t *v;
    size_t n, cap;
} st_acl_set_t;

/* The authorizer's settings (authorizer.class.name, super.users, allow.everyone...). */
typedef struct st_authz_cfg {
    bool enabled;
    const char *super_users; /* "User:a;User:b" (Kafka's separator), NULL or "" for none */
    bool allow_if_no_acl;
} st_authz_cfg_t;

void st_acl_set_init(st_acl_set_t *s);
void st_acl_set_fini(st_acl_set_t *s);
/* A deep copy of src into dst (initialized, emptied first). 0 or -ENOMEM. */
int st_acl_set_copy(st_acl_set_t *dst, const st_acl_set_t *src);

/* Whether acl may be stored: concrete types (no ANY, MATCH, UNKNOWN), a name, a principal of
 * the form "Type:name", a host, the cluster's name for a CLUSTER resource. NULL, or why not. */
const char *st_acl_invalid(const st_acl_t *acl);
/* Adds a copy of acl (valid) unless an equal one is there. 1 added, 0 already there,
 * -ENOMEM. */
int st_acl_add(st_acl_set_t *s, const st_acl_t *acl);
/* Whether filter matches acl (see the header). */
bool st_acl_filter_matches(const st_acl_t *filter, const st_acl_t *acl);
/* Removes every ACL filter matches; each removed one is handed to `removed` (may be NULL)
 * before it is freed. Returns how many. */
size_t st_acl_remove(st_acl_set_t *s, const st_acl_t *filter,
                     void (*removed)(void *arg, const st_acl_t *acl), void *arg);

/* Whether principal is listed in super_users. */
bool st_acl_is_super(const char *super_users, const char *principal);
/* The decision for principal at host doing op on (res_type, name). */
bool st_acl_authorize(const st_acl_set_t *s, const st_authz_cfg_t *cfg, const char *principal,
                      const char *host, int op, int res_type, const char *name);
/* Whether principal may do op on some resource of res_type (Kafka's authorizeByResourceType,
 * KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on any
 * topic): an ALLOW for it (or ALL) on some pattern that no DENY for it covers as a whole (a
 * DENY on LITERAL "*", or on a PREFIXED pattern that is a prefix of the ALLOW's). */
bool st_acl_authorize_any(const st_acl_set_t *s, const st_authz_cfg_t *cfg, const char *principal,
                          const char *host, int op, int res_type);

/* Kafka's names, for logs and tools ("Topic", "LITERAL", "Read", "Allow"); "Unknown" when
 * out of range. The parsers take them case-insensitively (and "Any") and return the enum or
 * -1. */
const char *st_acl_res_name(int v);
const char *st_acl_pat_name(int v);
const char *st_acl_op_name(int v);
const char *st_acl_perm_name(int v);
int st_acl_res_parse(const char *s);
int st_acl_pat_parse(const char *s);
int st_acl_op_parse(const char *s);
int st_acl_perm_parse(const char *s);

#endif
