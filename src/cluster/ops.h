/*
 * ops.h — the controller's metadata transitions: an admin op's items decided against a metadata
 * state, giving the state's next version and the records that write it (cluster/records.h).
 *
 * Pure functions of their arguments (the state, the items, the rules): no thread, no I/O, no
 * clock. Randomness (topic ids, where placement starts) comes from rules->random when set, so
 * a test decides the same way every time.
 *
 *   st_ctl_decide(rules, state, kind, items)   for each item in order, on a copy of state:
 *     CREATE              name check, already exists, partitions, replication factor against
 *                         the live brokers, configs, placement (st_rec_place)
 *     DELETE              internal topics refused
 *     CREATE_PARTITIONS   only to grow; the new partitions placed like a creation's
 *     ALTER_CONFIGS       every change validated first, then all applied (or none); an item
 *                         with `broker_resource` changes the dynamic settings of a broker
 *                         (`broker`, or ST_MD_BROKER_DEFAULT for all) the same way, each key
 *                         checked by rules->broker_config_check; a "broker_config" record
 *                         per key that changes
 *     ELECT_LEADERS       preferred (st_rec_elect_preferred) or unclean (st_rec_elect)
 *     REASSIGN            st_rec_reassign / st_rec_reassign_cancel
 *     CREATE_ACLS         validated (st_acl_invalid), added unless already there
 *     DELETE_ACLS         every ACL the filter matches, removed (and listed in the item)
 *     SCRAM               a user's SCRAM credential set (scram) or deleted (scram NULL:
 *                         RESOURCE_NOT_FOUND when absent); if_absent (the bootstrap users)
 *                         leaves an existing credential alone
 *     QUOTAS              one entity's quota changes (AlterClientQuotas' entry), all or none
 *                         (Kafka's checks: a known key, a value above 0, a byte rate whole;
 *                         INVALID_REQUEST otherwise); a record per value that changes
 *   -> an item refused says why (error, message) and changes nothing; the records are each
 *      changed topic's whole new state, or its removal (consecutive items of one topic share
 *      one record). validate_only: the same answers, no record.
 *
 * Threads: any.
 */
#ifndef ST_CLUSTER_OPS_H
#define ST_CLUSTER_OPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/metadata.h"

enum {
    ST_CTL_CREATE,            /* create topics */
    ST_CTL_DELETE,            /* delete topics */
    ST_CTL_CREATE_PARTITIONS, /* grow topics to `count` partitions */
    ST_CTL_ALTER_CONFIGS,     /* change topic configs */
    ST_CTL_ELECT_LEADERS,     /* elect a partition's leader (preferred or unclean) */
    ST_CTL_REASSIGN,          /* move a partition to other replicas, or cancel a move */
    ST_CTL_CREATE_ACLS,       /* add ACLs (one per item) */
    ST_CTL_DELETE_ACLS,       /* remove the ACLs each item's filter matches */
    ST_CTL_SCRAM,             /* set or delete users' SCRAM credentials */
    ST_CTL_QUOTAS,            /* set or remove client quotas (one entity per item) */
};

/* One change of a client quota: key's value set, or removed. */
typedef struct st_ctl_quota_op {
    const char *key;
    double value;
    bool remove;
} st_ctl_quota_op_t;

enum { ST_CTL_CFG_SET, ST_CTL_CFG_DELETE, ST_CTL_CFG_APPEND, ST_CTL_CFG_SUBTRACT };

typedef struct st_ctl_cfg {
    const char *key;
    const char *value; /* NULL for delete */
    int op;            /* ST_CTL_CFG_* */
} st_ctl_cfg_t;

typedef struct st_ctl_item {
    /* in */
    const char *name; /* NUL-terminated; NULL when addressed by id */
    uint8_t id[16];
    int32_t count;    /* partitions (create: -1 = num.partitions; grow: new total) */
    int16_t rf;       /* replication factor (-1 = default) */
    int32_t assigned; /* create: partitions given by explicit assignments, or -1 */
    /* create and grow: explicit replica assignments, assign_rf broker ids per partition (the
     * preferred leader first) for the partitions created, in order; NULL: placed here */
    const int32_t *assign;
    int16_t assign_rf;
    bool bad_assignment; /* the assignments are malformed: refused, bad_why says how */
    const char *bad_why;
    int ncfg;
    const st_ctl_cfg_t *cfg;
    bool replace_configs; /* AlterConfigs: the given set replaces all overrides */
    bool broker_resource; /* ALTER_CONFIGS: a broker's settings, not a topic's */
    int32_t broker;       /* ... of this broker, or ST_MD_BROKER_DEFAULT (every broker) */
    bool internal;
    /* ElectLeaders and reassignments: one item per partition */
    int32_t partition;
    int8_t election_type;    /* ElectLeaders: 0 preferred, 1 unclean */
    const int32_t *replicas; /* reassignment: the target replicas; NULL cancels */
    int32_t nreplicas;
    bool keep_rf; /* reassignment: a target of another replication factor is refused */
    st_acl_t acl; /* CreateAcls: the ACL; DeleteAcls: the filter (auth/acl.h) */
    /* SCRAM: name is the user; the credential to set, or NULL to delete mechanism's */
    const st_md_scram_t *scram;
    int8_t mechanism;
    bool if_absent;
    /* QUOTAS: the entity and its changes */
    st_quota_entity_t qentity;
    const st_ctl_quota_op_t *qops;
    int nqops;
    /* out */
    st_acl_set_t removed; /* DeleteAcls: the ACLs the filter removed (the caller finis it) */
    int16_t error;
    char message[200];
    const char *out_name; /* for items addressed by id: the topic's name, if found */
} st_ctl_item_t;

/* What deciding needs beyond the state: the broker's defaults and the topic config rules
 * (kafka/topic_config.h), handed in so that cluster/ knows no Kafka topic config. */
typedef struct st_ctl_rules {
    int32_t num_partitions; /* num.partitions */
    int default_rf;         /* default.replication.factor */
    /* Whether `name` is an internal topic: then it is created internal with *npartitions
     * partitions, however it was asked for, and *rf replicas unless the item names a factor
     * (either way capped by the live brokers). NULL: none is. */
    bool (*internal)(void *arg, const char *name, int32_t *npartitions, int *rf);
    /* A topic config key: 0 when known (*list: a list config, *fixed_default its default,
     * NULL for none), else -1. */
    int (*config_find)(void *arg, const char *key, bool *list, const char **fixed_default);
    /* A value for key: 0, or -1 with one line in err. */
    int (*config_validate)(void *arg, const char *key, const char *value, char *err, size_t n);
    /* A dynamic broker setting: 0 when key may change at run time and value (NULL: any)
     * is valid for it (*list: a list setting); else Kafka's error code with one line in err
     * (INVALID_CONFIG for an unknown or read-only key, or a bad value). */
    int16_t (*broker_config_check)(void *arg, const char *key, const char *value, bool *list,
                                   char *err, size_t n);
    /* n random bytes into buf. NULL: getrandom(2). */
    void (*random)(void *arg, void *buf, size_t n);
    void *arg;
} st_ctl_rules_t;

/* Decides the n items of an op of `kind` (ST_CTL_*) against state, each against the state its
 * predecessors left, and appends to `records` the records of the change (nothing when
 * validate_only or when every item was refused). Each item's error and message say how it
 * went. Returns 0, or -ENOMEM. */
int st_ctl_decide(const st_ctl_rules_t *rules, const st_md_t *state, int kind, bool validate_only,
                  st_ctl_item_t *items, int n, json_t *records);

/* Fails item it with Kafka error code and a printf message. */
__attribute__((format(printf, 3, 4))) void st_ctl_item_fail(st_ctl_item_t *it, int16_t code,
                                                            const char *fmt, ...);

/* Validates a topic name as Kafka does; 0 or ST_E_INVALID with a message. */
int st_topic_name_check(const char *name, size_t len, char *msg, size_t msglen);

#endif
