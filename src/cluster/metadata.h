/*
 * metadata.h — the cluster metadata snapshot: brokers, topics, partitions and where each
 * partition lives.
 *
 * A snapshot is immutable once published. Shard 0 (the controller shard) owns the
 * authoritative copy: it applies a change by building a new snapshot, persisting it, and
 * sending each shard a reference; each shard swaps its own pointer and drops its reference
 * to the old one. Readers on a shard use that shard's pointer directly, with no lock and no
 * atomic; work that outlives the current event (a long poll, a cross-shard hop) takes a
 * reference. The reference count is the only shared mutable field and is atomic.
 */
#ifndef ST_CLUSTER_METADATA_H
#define ST_CLUSTER_METADATA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth/acl.h"
#include "auth/quota.h"

typedef struct st_md_config {
    char *key;
    char *value;
} st_md_config_t;

/* Most replicas a partition may have (a replication factor above it is refused). */
#define ST_MD_MAX_REPLICAS 16

typedef struct st_md_partition {
    int32_t index;
    int32_t shard;  /* owning shard on this broker (node-local, never replicated) */
    int32_t leader; /* broker id, -1 when none is eligible (the partition is offline) */
    int32_t leader_epoch;
    int32_t partition_epoch; /* bumped by every change of leader, ISR or replicas */
    int16_t nreplicas;
    int16_t nisr;
    int32_t replicas[ST_MD_MAX_REPLICAS]; /* broker ids, the preferred leader first */
    int32_t isr[ST_MD_MAX_REPLICAS];      /* the in-sync subset of replicas */
    /* a reassignment in progress (KIP-455): replicas = target then the old ones leaving */
    int16_t nadding, nremoving;
    int32_t adding[ST_MD_MAX_REPLICAS];   /* target replicas that were not replicas before */
    int32_t removing[ST_MD_MAX_REPLICAS]; /* replicas that leave once the target is in sync */
} st_md_partition_t;

typedef struct st_md_topic {
    char *name;
    uint8_t id[16];
    bool internal;
    int32_t npartitions;
    int16_t replication_factor;
    st_md_partition_t *partitions;
    int nconfigs;
    st_md_config_t *configs; /* topic-level overrides, sorted by key */
} st_md_topic_t;

typedef struct st_md_broker {
    int32_t node_id;
    char *host;
    int32_t port;
    char *rack; /* NULL when broker.rack is not set */
    /* every Kafka listener it advertises, "NAME=host:port,..." (NULL: none registered, as
     * before brokers registered them): what a client on listener NAME is told
     * (st_md_broker_endpoint); host/port above are its inter-broker listener's */
    char *endpoints;
    bool fenced;          /* registered but not (or no longer) heartbeating: leads nothing */
    int64_t epoch;        /* broker epoch: the metadata log index of its current registration */
    uint64_t incarnation; /* random per process start: a restart is a new registration */
} st_md_broker_t;

/* A user's SCRAM credential (KIP-554's UserScramCredentialRecord): what the broker keeps of a
 * password, never the password (auth/scram.h derives and checks it). One per user and
 * mechanism. */
#define ST_MD_SCRAM_USER_MAX 256
#define ST_MD_SCRAM_KEY_MAX  64
typedef struct st_md_scram {
    char user[ST_MD_SCRAM_USER_MAX];
    int8_t mechanism; /* Kafka's: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 */
    int32_t iterations;
    int16_t salt_len, key_len;
    uint8_t salt[ST_MD_SCRAM_KEY_MAX];
    uint8_t stored_key[ST_MD_SCRAM_KEY_MAX];
    uint8_t server_key[ST_MD_SCRAM_KEY_MAX];
} st_md_scram_t;

/* A dynamic broker setting (Kafka's BROKER config resource, stored in the metadata log):
 * key=value on one broker, or on every broker (broker ST_MD_BROKER_DEFAULT, the resource
 * named ""). */
#define ST_MD_BROKER_DEFAULT (-1)
typedef struct st_md_bcfg {
    int32_t broker;
    char *key;
    char *value;
} st_md_bcfg_t;

typedef struct st_md {
    _Atomic int refs;
    int64_t version;
    char *cluster_id;
    int32_t controller_id;
    uint64_t self_incarnation; /* cluster: this node's incarnation (cluster/quorum.h), 0 else */
    int nbrokers;
    st_md_broker_t *brokers;
    int ntopics;
    st_md_topic_t **topics; /* sorted by name */
    st_acl_set_t acls;      /* the authorizer's ACLs (records "acl", "remove_acl") */
    int nscram;
    st_md_scram_t *scram; /* sorted by user, then mechanism */
    int nquotas;
    st_quota_t *quotas; /* client quotas (record "quota"), in the order first set */
    int nbcfg;
    st_md_bcfg_t *bcfg; /* dynamic broker settings (record "broker_config"), by broker, key */
} st_md_t;

/* An empty snapshot with one reference. */
st_md_t *st_md_new(const char *cluster_id, int32_t controller_id);
st_md_t *st_md_ref(st_md_t *md);
/* Drops a reference; frees the snapshot with the last one. Any thread. */
void st_md_unref(st_md_t *md);
/* A deep copy (one reference), version + 1, for building the next snapshot. */
st_md_t *st_md_clone(const st_md_t *md);

int st_md_add_broker(st_md_t *md, int32_t node_id, const char *host, int32_t port);
/* Adds or replaces a broker (copies host and rack); keeps the list sorted by node id. */
int st_md_put_broker(st_md_t *md, const st_md_broker_t *b);
/* The address broker b advertises on listener `listener` (matched without case): *host
 * (host_len bytes, not NUL-terminated: it points into b) and *port; its registered host and
 * port when it advertises none by that name (or listener is NULL). */
void st_md_broker_endpoint(const st_md_broker_t *b, const char *listener, const char **host,
                           size_t *host_len, int32_t *port);
/* True when broker `node` is listed in p's replicas (or ISR). */
bool st_md_is_replica(const st_md_partition_t *p, int32_t node);
bool st_md_in_isr(const st_md_partition_t *p, int32_t node);
/* True when broker `node` is registered and not fenced: it may lead and host replicas,
 * Metadata lists it, and a replica on any other broker is offline. */
bool st_md_broker_live(const st_md_t *md, int32_t node);
/* Adds a topic (takes ownership of t, which must be heap-built with st_md_topic_new). */
int st_md_add_topic(st_md_t *md, st_md_topic_t *t);
/* Removes and frees a topic; returns ST_E_NOT_FOUND if absent. */
int st_md_remove_topic(st_md_t *md, const char *name);

st_md_topic_t *st_md_topic_new(const char *name, const uint8_t id[16], int32_t npartitions);
void st_md_topic_free(st_md_topic_t *t);
/* A deep copy of a topic. */
st_md_topic_t *st_md_topic_clone(const st_md_topic_t *t);
/* Sets (value non-NULL) or removes (NULL) a topic config override. */
int st_md_topic_set_config(st_md_topic_t *t, const char *key, const char *value);
const char *st_md_topic_config(const st_md_topic_t *t, const char *key);
/* Grows the topic to n partitions (n > current). New partitions get shard = -1. */
int st_md_topic_grow(st_md_topic_t *t, int32_t n);

const st_md_topic_t *st_md_find(const st_md_t *md, const char *name, int32_t len);
const st_md_topic_t *st_md_find_id(const st_md_t *md, const uint8_t id[16]);
const st_md_broker_t *st_md_broker(const st_md_t *md, int32_t node_id);
/* This node's registration in md when it is this run's (its incarnation is md->self_incarnation,
 * set by the quorum that published md), else NULL: a snapshot from before the quorum published
 * one, or a registration an earlier run of the node left, says nothing yet. */
const st_md_broker_t *st_md_self(const st_md_t *md, int32_t node_id);
/* Sets the shard of every partition on this broker (node-local, never replicated): spread by
 * topic id and index over nshards. On a snapshot not yet shared. */
void st_md_assign_shards(st_md_t *md, int nshards);

/* Adds or replaces user's credential for its mechanism. 0 or -ENOMEM. */
int st_md_put_scram(st_md_t *md, const st_md_scram_t *c);
/* Removes one; ST_E_NOT_FOUND if absent. */
int st_md_remove_scram(st_md_t *md, const char *user, int8_t mechanism);
const st_md_scram_t *st_md_find_scram(const st_md_t *md, const char *user, int8_t mechanism);

/* Sets (remove false) or removes key's value on entity e; an entity left with no value goes.
 * 0 or -ENOMEM. */
int st_md_set_quota(st_md_t *md, const st_quota_entity_t *e, int key, double value, bool remove);
const st_quota_t *st_md_find_quota(const st_md_t *md, const st_quota_entity_t *e);

/* A topic id as 32 lower-case hex digits, and back (ST_E_INVALID when malformed). */
/* Sets (value non-NULL) or removes (NULL) a dynamic broker setting. 0 or -ENOMEM. */
int st_md_set_broker_config(st_md_t *md, int32_t broker, const char *key, const char *value);
/* The dynamic value of key on broker `node`: its own (*scope 1), else the cluster default
 * (*scope 2), else NULL (*scope 0). scope may be NULL. */
const char *st_md_broker_config(const st_md_t *md, int32_t node, const char *key, int *scope);
/* Whether a and b hold the same dynamic broker settings (NULL holds none). */
bool st_md_broker_configs_equal(const st_md_t *a, const st_md_t *b);

void st_md_id_hex(const uint8_t id[16], char out[33]);
int st_md_id_parse(const char *s, uint8_t id[16]);

#endif
