/*
 * quota.h — client quotas as Kafka defines them: the entities a quota is set on, which of them
 * applies to a connection, and the sampled rate that decides how long a client is throttled.
 *
 * An entity names a user, a client id, or both; each part is absent, the default (Kafka's
 * <default>, a null name on the wire) or a name. A connection of user U with client id C
 * takes, for each quota key, the first entity in Kafka's order that sets that key:
 *   1. user U, client C          5. default user, default client
 *   2. user U, default client    6. default user
 *   3. user U                    7. client C
 *   4. default user, client C    8. default client
 * Usage is counted per (key, the matching entity's parts filled with U and C): so a default
 * quota is each user's (or client's) own, never shared, and a user-level quota is shared by
 * all of that user's client ids (Kafka's quota metric tags).
 *
 * The rate is Kafka's: quota.window.num (11) samples of quota.window.size.seconds (1 s); the
 * rate is the sum of the live samples over the span they cover, counted as at least
 * (samples - 1) whole windows. A record that takes the rate above the bound throttles the
 * client for (rate - bound) / bound * that span, capped at samples * window (Kafka's
 * ClientQuotaManager). request_percentage is that rate of handling time, in percent of one
 * shard: a request handled in t ns counts t * 100 / 1e9, and its throttle is capped at one
 * window (ClientRequestQuotaManager). connection_creation_rate is that rate of connections
 * accepted from one IP, its throttle capped at one window too (ConnectionQuotas).
 *
 * controller_mutation_rate is a token bucket (KIP-599, Kafka's TokenBucket): it starts full at
 * a burst of SAMPLES * WINDOW * rate partitions, refills at rate per second, and a mutation
 * takes its partitions out, so the bucket may go into debt. The check is strict: a request is
 * accepted while the bucket holds 0 or more, whatever it asks, and refused while in debt for
 * the time the debt takes to refill (-tokens / rate seconds).
 *
 * Threads: pure functions of their arguments; a rate belongs to whoever holds it.
 */
#ifndef ST_AUTH_QUOTA_H
#define ST_AUTH_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    ST_QUOTA_PRODUCER_BYTE_RATE,
    ST_QUOTA_CONSUMER_BYTE_RATE,
    ST_QUOTA_REQUEST_PERCENTAGE,
    ST_QUOTA_CONTROLLER_MUTATION_RATE,
    ST_QUOTA_CONNECTION_CREATION_RATE, /* the ip entity's only key */
    ST_QUOTA_NKEYS,
};

/* A part of an entity. */
enum { ST_QE_NONE, ST_QE_DEFAULT, ST_QE_NAME };

/* Longest user or client id name a quota may be set on (Alter refuses longer ones). */
#define ST_QUOTA_NAME_MAX 256
/* Longest ip entity name: an IPv6 address in text (INET6_ADDRSTRLEN). */
#define ST_QUOTA_IP_MAX 46

/* An entity: user and/or client id, or an ip alone (Kafka allows no other combination). An ip
 * name is kept as inet_ntop writes it, so one address has one spelling. */
typedef struct st_quota_entity {
    int8_t user, client, ip;                                           /* ST_QE_* */
    char user_name[ST_QUOTA_NAME_MAX], client_name[ST_QUOTA_NAME_MAX]; /* when ST_QE_NAME */
    char ip_name[ST_QUOTA_IP_MAX];                                     /* when ST_QE_NAME */
} st_quota_entity_t;

/* The values set on one entity: bit k of set says values[k] holds. */
typedef struct st_quota {
    st_quota_entity_t e;
    uint8_t set;
    double values[ST_QUOTA_NKEYS];
} st_quota_t;

/* A key's number (ST_QUOTA_*) from its name, or -1; and back. */
int st_quota_key(const char *name);
const char *st_quota_key_name(int key);
/* Whether a key takes whole numbers only (the byte rates: Kafka's LONG configs). */
bool st_quota_key_integral(int key);
/* Whether `key` may be set on entity e: connection_creation_rate on an ip entity and only
 * there (Kafka's QuotaConfig.ipConfigs and userAndClientQuotaConfigs). */
bool st_quota_key_allowed(const st_quota_entity_t *e, int key);
/* An ip entity name in its one spelling (inet_ntop of the parsed address) into out; -1 when
 * it is not an IPv4 or IPv6 address. */
int st_quota_ip_normalize(const char *name, size_t len, char out[ST_QUOTA_IP_MAX]);
/* The connection_creation_rate of ip (normalized): its own entity's, else the default ip
 * entity's; false when neither is set. */
bool st_quota_ip_rate(const st_quota_t *q, size_t n, const char *ip, double *bound);
bool st_quota_entity_eq(const st_quota_entity_t *a, const st_quota_entity_t *b);

/* The quota for `key` of a connection of user `user` with client id `client` among q[0..n):
 * true with *bound and *tags (the entity its usage counts against, parts named) when one of
 * the eight forms sets it. */
bool st_quota_resolve(const st_quota_t *q, size_t n, int key, const char *user, const char *client,
                      double *bound, st_quota_entity_t *tags);

#define ST_QUOTA_SAMPLES   11
#define ST_QUOTA_WINDOW_MS 1000

typedef struct st_qrate {
    int64_t start_ms[ST_QUOTA_SAMPLES]; /* -1: unused */
    double v[ST_QUOTA_SAMPLES];
    int cur;
} st_qrate_t;

void st_qrate_init(st_qrate_t *r);
/* Adds v at now_ms (a new sample once the current one's window has passed). */
void st_qrate_record(st_qrate_t *r, double v, int64_t now_ms);
/* The span the rate is measured over at now_ms, in ms. */
int64_t st_qrate_window_ms(st_qrate_t *r, int64_t now_ms);
/* Units per second at now_ms (samples older than every window forgotten). */
double st_qrate_measure(st_qrate_t *r, int64_t now_ms);
/* Kafka's throttle time for a rate measured over window_ms against bound: 0 when not above,
 * else (rate - bound) / bound * window_ms, capped at SAMPLES * WINDOW_MS. */
int64_t st_quota_throttle_ms(double rate, double bound, int64_t window_ms);
/* Records v and returns the throttle time that follows (0 when within bound), at most cap_ms
 * (the byte rates: SAMPLES * WINDOW_MS; request time and connections: WINDOW_MS). */
int64_t st_qrate_record_throttle(st_qrate_t *r, double v, double bound, int64_t now_ms,
                                 int64_t cap_ms);
/* The throttle the rate measured so far calls for, recording nothing (as above). */
int64_t st_qrate_throttle(st_qrate_t *r, double bound, int64_t now_ms, int64_t cap_ms);

/* request_percentage's units for a handling time of ns nanoseconds (Kafka's
 * nanosToPercentage). */
double st_quota_ns_to_percentage(int64_t ns);

/* controller_mutation_rate's bucket (Kafka's TokenBucket; see the top of this file). */
typedef struct st_qbucket {
    double tokens;
    int64_t last_ms; /* -1: never used; the first refill fills it to the burst */
} st_qbucket_t;

void st_qbucket_init(st_qbucket_t *b);
/* The tokens at now_ms for a bucket of `rate` per second (refilled up to the burst). */
double st_qbucket_tokens(st_qbucket_t *b, double rate, int64_t now_ms);
/* The strict check: 0 when the bucket holds 0 or more at now_ms, the permits then taken (the
 * bucket may go into debt); else nothing is taken and the throttle time, in ms, the debt
 * takes to refill (Kafka's round(-tokens / rate * 1000), at least 1). */
int64_t st_qbucket_take_strict(st_qbucket_t *b, double permits, double rate, int64_t now_ms);
/* The permissive record (older request versions): the permits always taken; the throttle
 * time the debt then takes to refill (0 when not in debt). */
int64_t st_qbucket_take(st_qbucket_t *b, double permits, double rate, int64_t now_ms);
/* The time in ms the bucket's debt takes to refill at now_ms (0 when not in debt). */
int64_t st_qbucket_debt_ms(st_qbucket_t *b, double rate, int64_t now_ms);

#endif
