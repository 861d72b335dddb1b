/*
 * Unit tests for auth/acl: validation, filters (ANY, MATCH, LITERAL, PREFIXED), removal, and
 * the authorizer's decision — super users, no ACL found, deny winning, implied operations,
 * wildcards of principal, host and name, and authorization by resource type (KIP-679).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "auth/acl.h"

static st_acl_t acl(int8_t res, int8_t pat, const char *name, const char *principal,
                    const char *host, int8_t op, int8_t perm)
{
    return (st_acl_t){res, pat, (char *)name, (char *)principal, (char *)host, op, perm};
}

static void add(st_acl_set_t *s, st_acl_t a)
{
    assert_null(st_acl_invalid(&a));
    assert_int_equal(st_acl_add(s, &a), 1);
}

static const st_authz_cfg_t ON = {true, "User:admin;User:ops", false};

static bool may(const st_acl_set_t *s, const char *who, int op, int res, const char *name)
{
    return st_acl_authorize(s, &ON, who, "127.0.0.1", op, res, name);
}

static void test_validation(void **state)
{
    (void)state;
    st_acl_t a = acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_LITERAL, "t", "User:bob", "*", ST_ACL_OP_READ,
                     ST_ACL_PERM_ALLOW);
    assert_null(st_acl_invalid(&a));
    a.resource_type = ST_ACL_RES_ANY;
    assert_non_null(st_acl_invalid(&a));
    a.resource_type = ST_ACL_RES_TOPIC;
    a.pattern_type = ST_ACL_PAT_MATCH;
    assert_non_null(st_acl_invalid(&a));
    a.pattern_type = ST_ACL_PAT_PREFIXED;
    a.operation = ST_ACL_OP_ANY;
    assert_non_null(st_acl_invalid(&a));
    a.operation = ST_ACL_OP_READ;
    a.principal = "bob";
    assert_non_null(st_acl_invalid(&a));
    a.principal = "User:bob";
    a.name = "";
    assert_non_null(st_acl_invalid(&a));
    st_acl_t c = acl(ST_ACL_RES_CLUSTER, ST_ACL_PAT_LITERAL, "mine", "User:bob", "*",
                     ST_ACL_OP_ALTER, ST_ACL_PERM_ALLOW);
    assert_non_null(st_acl_invalid(&c));
    c.name = ST_ACL_CLUSTER_NAME;
    assert_null(st_acl_invalid(&c));
}

static void test_decisions(void **state)
{
    (void)state;
    st_acl_set_t s;
    st_acl_set_init(&s);
    /* No ACL on a resource: allow.everyone.if.no.acl.found (off here) decides. */
    assert_false(may(&s, "User:bob", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "t"));
    st_authz_cfg_t open = ON;
    open.allow_if_no_acl = true;
    assert_true(
        st_acl_authorize(&s, &open, "User:bob", "h", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "t"));
    st_authz_cfg_t off = {false, NULL, false};
    assert_true(
        st_acl_authorize(&s, &off, "User:bob", "h", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, "t"));
    /* Super users pass everything. */
    assert_true(may(&s, "User:ops", ST_ACL_OP_ALTER, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME));
    assert_false(may(&s, "User:op", ST_ACL_OP_ALTER, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME));

    add(&s, acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_LITERAL, "orders", "User:bob", "*", ST_ACL_OP_READ,
                ST_ACL_PERM_ALLOW));
    assert_true(may(&s, "User:bob", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "orders"));
    assert_true(may(&s, "User:bob", ST_ACL_OP_DESCRIBE, ST_ACL_RES_TOPIC, "orders")); /* implied */
    assert_false(may(&s, "User:bob", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, "orders"));
    assert_false(may(&s, "User:eve", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "orders"));
    /* With an ACL on the resource, no-ACL-found no longer applies, even when it is on. */
    assert_false(
        st_acl_authorize(&s, &open, "User:eve", "h", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "orders"));
    assert_true(
        st_acl_authorize(&s, &open, "User:eve", "h", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "other"));
    assert_false(may(&s, "User:bob", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "orders2")); /* literal */
    assert_false(may(&s, "User:bob", ST_ACL_OP_READ, ST_ACL_RES_GROUP, "orders"));  /* type */

    /* Prefixed patterns, the wildcard principal, ALL. */
    add(&s, acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_PREFIXED, "logs.", "User:*", "*", ST_ACL_OP_ALL,
                ST_ACL_PERM_ALLOW));
    assert_true(may(&s, "User:eve", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, "logs.app"));
    assert_true(may(&s, "User:eve", ST_ACL_OP_DELETE, ST_ACL_RES_TOPIC, "logs."));
    assert_false(may(&s, "User:eve", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, "logs"));
    /* Deny wins over every allow, and only for its operation (or ALL). */
    add(&s, acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_LITERAL, "logs.secret", "User:eve", "*",
                ST_ACL_OP_READ, ST_ACL_PERM_DENY));
    assert_false(may(&s, "User:eve", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "logs.secret"));
    assert_true(may(&s, "User:eve", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC, "logs.secret"));
    assert_true(may(&s, "User:eve", ST_ACL_OP_DESCRIBE, ST_ACL_RES_TOPIC, "logs.secret"));
    assert_true(may(&s, "User:bob", ST_ACL_OP_READ, ST_ACL_RES_TOPIC, "logs.secret"));
    /* Hosts. */
    add(&s, acl(ST_ACL_RES_GROUP, ST_ACL_PAT_LITERAL, "*", "User:bob", "10.0.0.1", ST_ACL_OP_READ,
                ST_ACL_PERM_ALLOW));
    assert_false(may(&s, "User:bob", ST_ACL_OP_READ, ST_ACL_RES_GROUP, "g"));
    assert_true(
        st_acl_authorize(&s, &ON, "User:bob", "10.0.0.1", ST_ACL_OP_READ, ST_ACL_RES_GROUP, "g"));
    /* ALTER_CONFIGS implies DESCRIBE_CONFIGS, not the other way. */
    add(&s, acl(ST_ACL_RES_CLUSTER, ST_ACL_PAT_LITERAL, ST_ACL_CLUSTER_NAME, "User:bob", "*",
                ST_ACL_OP_ALTER_CONFIGS, ST_ACL_PERM_ALLOW));
    assert_true(
        may(&s, "User:bob", ST_ACL_OP_DESCRIBE_CONFIGS, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME));
    assert_false(may(&s, "User:bob", ST_ACL_OP_DESCRIBE, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME));
    /* Equal ACLs are stored once. */
    st_acl_t dup = acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_LITERAL, "orders", "User:bob", "*",
                       ST_ACL_OP_READ, ST_ACL_PERM_ALLOW);
    assert_int_equal(st_acl_add(&s, &dup), 0);
    assert_int_equal(s.n, 5);
    st_acl_set_fini(&s);
}

static void test_by_resource_type(void **state)
{
    (void)state;
    st_acl_set_t s;
    st_acl_set_init(&s);
    assert_false(st_acl_authorize_any(&s, &ON, "User:bob", "h", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC));
    add(&s, acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_PREFIXED, "app.", "User:bob", "*", ST_ACL_OP_WRITE,
                ST_ACL_PERM_ALLOW));
    assert_true(st_acl_authorize_any(&s, &ON, "User:bob", "h", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC));
    assert_false(st_acl_authorize_any(&s, &ON, "User:eve", "h", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC));
    /* A deny on a narrower prefix leaves part of the allow: still some topic. */
    add(&s, acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_PREFIXED, "app.x", "User:bob", "*", ST_ACL_OP_WRITE,
                ST_ACL_PERM_DENY));
    assert_true(st_acl_authorize_any(&s, &ON, "User:bob", "h", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC));
    /* One covering the allow's whole pattern takes it. */
    add(&s, acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_PREFIXED, "app", "User:bob", "*", ST_ACL_OP_ALL,
                ST_ACL_PERM_DENY));
    assert_false(st_acl_authorize_any(&s, &ON, "User:bob", "h", ST_ACL_OP_WRITE, ST_ACL_RES_TOPIC));
    st_acl_set_fini(&s);
}

static void test_filters_and_removal(void **state)
{
    (void)state;
    st_acl_set_t s;
    st_acl_set_init(&s);
    add(&s, acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_LITERAL, "orders", "User:bob", "*", ST_ACL_OP_READ,
                ST_ACL_PERM_ALLOW));
    add(&s, acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_PREFIXED, "ord", "User:eve", "*", ST_ACL_OP_WRITE,
                ST_ACL_PERM_ALLOW));
    add(&s, acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_LITERAL, "*", "User:eve", "*", ST_ACL_OP_READ,
                ST_ACL_PERM_DENY));
    add(&s, acl(ST_ACL_RES_GROUP, ST_ACL_PAT_LITERAL, "orders", "User:bob", "*", ST_ACL_OP_READ,
                ST_ACL_PERM_ALLOW));
    st_acl_t any =
        acl(ST_ACL_RES_ANY, ST_ACL_PAT_ANY, NULL, NULL, NULL, ST_ACL_OP_ANY, ST_ACL_PERM_ANY);
    size_t n = 0;
    for (size_t i = 0; i < s.n; i++)
        n += st_acl_filter_matches(&any, &s.v[i]);
    assert_int_equal(n, 4);
    /* MATCH: every ACL that applies to topic "orders" (literal, prefixed, wildcard). */
    st_acl_t match = acl(ST_ACL_RES_TOPIC, ST_ACL_PAT_MATCH, "orders", NULL, NULL, ST_ACL_OP_ANY,
                         ST_ACL_PERM_ANY);
    n = 0;
    for (size_t i = 0; i < s.n; i++)
        n += st_acl_filter_matches(&match, &s.v[i]);
    assert_int_equal(n, 3);
    /* ANY pattern with a name: that exact name under either pattern type. */
    st_acl_t named =
        acl(ST_ACL_RES_ANY, ST_ACL_PAT_ANY, "orders", NULL, NULL, ST_ACL_OP_ANY, ST_ACL_PERM_ANY);
    n = 0;
    for (size_t i = 0; i < s.n; i++)
        n += st_acl_filter_matches(&named, &s.v[i]);
    assert_int_equal(n, 2);
    /* Removal by a LITERAL filter of one principal. */
    st_acl_t bob = acl(ST_ACL_RES_ANY, ST_ACL_PAT_LITERAL, NULL, "User:bob", NULL, ST_ACL_OP_ANY,
                       ST_ACL_PERM_ANY);
    assert_int_equal(st_acl_remove(&s, &bob, NULL, NULL), 2);
    assert_int_equal(s.n, 2);
    st_acl_set_t copy;
    st_acl_set_init(&copy);
    assert_int_equal(st_acl_set_copy(&copy, &s), 0);
    assert_int_equal(st_acl_remove(&s, &any, NULL, NULL), 2);
    assert_int_equal(s.n, 0);
    assert_int_equal(copy.n, 2);
    assert_string_equal(copy.v[0].name, "ord");
    st_acl_set_fini(&copy);
    st_acl_set_fini(&s);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(st_acl_res_name(ST_ACL_RES_TRANSACTIONAL_ID), "TransactionalId");
    assert_string_equal(st_acl_op_name(ST_ACL_OP_IDEMPOTENT_WRITE), "IdempotentWrite");
    assert_string_equal(st_acl_op_name(99), "Unknown");
    assert_int_equal(st_acl_op_parse("CLUSTER_ACTION"), ST_ACL_OP_CLUSTER_ACTION);
    assert_int_equal(st_acl_op_parse("describeconfigs"), ST_ACL_OP_DESCRIBE_CONFIGS);
    assert_int_equal(st_acl_res_parse("topic"), ST_ACL_RES_TOPIC);
    assert_int_equal(st_acl_pat_parse("prefixed"), ST_ACL_PAT_PREFIXED);
    assert_int_equal(st_acl_perm_parse("Deny"), ST_ACL_PERM_DENY);
    assert_int_equal(st_acl_perm_parse("Unknown"), -1);
    assert_int_equal(st_acl_op_parse("bogus"), -1);
    assert_true(st_acl_is_super(" User:a ; User:b", "User:b"));
    assert_false(st_acl_is_super("User:ab", "User:a"));
    assert_false(st_acl_is_super("", "User:a"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_decisions),
        cmocka_unit_test(test_by_resource_type),
        cmocka_unit_test(test_filters_and_removal),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
