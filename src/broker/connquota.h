/*
 * connquota.h — Kafka's connection quotas (ConnectionQuotas), decided as each connection is
 * accepted: max.connections.per.ip with max.connections.per.ip.overrides, max.connections,
 * and the ip entity's connection_creation_rate (auth/quota.h: the IP's own quota, else the
 * default ip entity's; stored in the metadata with the client quotas).
 *
 * In Kafka's order, for a connection from IP a:
 *   1. max.connections reached (the inter-broker listener excepted when there are several,
 *      as Kafka protects it): the connection waits for a slot, as Kafka's acceptor does; the
 *      shard stops accepting on that port meanwhile (later ones wait in the kernel's backlog)
 *      and offers it again at each housekeeping tick (100 ms) and each close on the shard.
 *   2. a's connection rate with this one above its connection_creation_rate: not counted,
 *      the socket held unserved and closed after (rate - quota) / quota * window, at most
 *      one window (1 s), as Kafka's delayed close of a throttled connection.
 *   3. a's connections already at its max.connections.per.ip (override first): closed at
 *      once (Kafka's TooManyConnectionsException).
 *
 * Counts are kept once per broker, not per shard: every shard accepts on the Kafka port
 * (SO_REUSEPORT) and the kernel spreads one client's connections over the shards by a hash
 * of its port, so a limit split between shards would refuse a client below its limit as soon
 * as its connections landed unevenly. One table of IPs under a mutex is taken only at accept
 * and at close, never on the request path (Kafka's own ConnectionQuotas locks its counts
 * alike); the rate of an IP is measured across shards too, as Kafka's per broker.
 *
 * Threads: any shard; the table's mutex serializes them.
 */
#ifndef ST_BROKER_CONNQUOTA_H
#define ST_BROKER_CONNQUOTA_H

#include <stddef.h>
#include <stdint.h>

#include "auth/quota.h"
#include "cluster/config.h"

typedef struct st_connquota st_connquota_t;

/* The quotas of cfg (max.connections.per.ip.overrides parsed: ip:count,... with IPv4 or
 * IPv6 addresses); NULL and a line in err when an override is malformed or out of memory. */
st_connquota_t *st_connquota_create(const st_config_t *cfg, char *err, size_t errlen);
void st_connquota_destroy(st_connquota_t *q);
/* New limits at run time (dynamic max.connections, max.connections.per.ip and
 * max.connections.per.ip.overrides): the open connections stay, the next ones are admitted by
 * the new limits. 0, or -1 with one line in err (the old limits stay). */
int st_connquota_reconfigure(st_connquota_t *q, int64_t max_per_ip, int64_t max_total,
                             const char *overrides, char *err, size_t errlen);
/* Whether overrides is a valid max.connections.per.ip.overrides: 0, or -1 with one line. */
int st_connquota_check_overrides(const char *overrides, char *err, size_t errlen);

/* A connection from ip (inet_ntop's text) at now_ms; `protected_listener`: it came in on the
 * inter-broker listener of a broker with several (not bound by max.connections). quotas[0..n)
 * are the shard's snapshot's (for connection_creation_rate). 0: admitted and counted
 * (st_connquota_release once it closes); -1: refused; > 0: throttled, closed after that many
 * ms, not counted; ST_CONNQUOTA_WAIT: no slot (max.connections), nothing recorded. */
#define ST_CONNQUOTA_WAIT INT64_MIN
int64_t st_connquota_admit(st_connquota_t *q, const st_quota_t *quotas, size_t n, const char *ip,
                           bool protected_listener, int64_t now_ms);
void st_connquota_release(st_connquota_t *q, const char *ip);

/* The connections counted for ip now (tests). */
int st_connquota_count(st_connquota_t *q, const char *ip);

#endif
