/*
 * heartbeat.h — the broker heartbeat: the one UDP datagram each node's quorum thread sends
 * every broker.heartbeat.interval.ms to the active controller's CONTROLLER host:port
 * (cluster/quorum.c). It is the broker's registration too: a new incarnation, listener or rack
 * is registered from it, and how far the node has applied the metadata log decides when a
 * fenced broker is unfenced. This file is the format only (encode, bounds-checked decode); what
 * the controller does with a heartbeat (registration, fencing, the hints and ISR changes it
 * carries) is quorum.c's.
 *
 * Datagram layout. The UDP payload is one JSON object (RFC 8259, UTF-8, compact: no spaces, no
 * terminating NUL), at most ST_HB_MAX_DATAGRAM bytes; a receiver ignores keys it does not know
 * and takes a missing optional key as its default, so nodes of different versions understand
 * each other. Byte 0 is '{', the last byte '}'; the members, in the order a sender writes them:
 *
 *   "id"      integer >= 1        required  the sender's node.id
 *   "inc"     string, hex u64     required  the sender's incarnation (random at each start;
 *                                           16 lowercase hex digits, read with strtoull base 16)
 *   "host"    string              required  its advertised Kafka host (kept to 255 bytes)
 *   "port"    integer             0         its advertised Kafka port
 *   "rack"    string or null      ""        broker.rack (kept to 127 bytes)
 *   "ep"      string              ""        every Kafka listener it advertises,
 *                                           "NAME=host:port,..." (kept to 1023 bytes;
 *                                           metadata.h st_md_broker_t.endpoints)
 *   "raft"    string              ""        its quorum address host:port (kept to 299 bytes)
 *   "voter"   true / false        false     process.roles includes controller
 *   "applied" integer             0         the last metadata log index it applied
 *   "create"  array of strings    []        topics to create with the defaults (auto-create
 *                                           on a broker that is not the controller); entries
 *                                           that are not strings are skipped; at most
 *                                           ST_HB_MAX_CREATE kept, each kept to 255 bytes
 *   "alter"   array of objects    []        ISR changes this node's partitions ask for
 *                                           (records.h st_rec_alter_t), each:
 *       {"t": topic id, 32 hex digits, "p": partition, "l": leader, "le": leader epoch,
 *        "pe": partition epoch, "isr": array of at most ST_MD_MAX_REPLICAS integers}
 *       an entry that does not parse (no valid "t", no "isr" array, too long) is skipped
 *
 * A datagram that is not a JSON object, or lacks a valid id, inc or host, is dropped whole.
 * Integers out of their C type's range are cast as jansson's json_integer_value gives them,
 * so the receiver's checks (quorum.c) see what the sender meant or an id it does not know.
 *
 * Transport: st_hb_link_t, one UDP socket on the quorum thread's loop: a voter binds it to its
 * CONTROLLER host:port and receives on it, a broker-only node binds an ephemeral port and only
 * sends; a heartbeat goes to the active controller's address, or to every voter while the
 * sender knows no leader. Datagrams are fire-and-forget (uv_udp_try_send): the next one, an
 * interval later, says the same again. Voter names are looked up again, one every
 * ST_HB_RESOLVE_MS in turn (asynchronously, uv_getaddrinfo; 1.5 s for each of three voters):
 * a voter that comes back at a new address (a restarted container or pod) gets this node's
 * heartbeats there within that time, well inside a broker session; one that does not resolve yet
 * (its pod not scheduled) gets none until it does, and the node starts all the same (as Kafka's
 * KRaft client does).
 *
 * Threads: the codec from any thread (pure functions); a link on its loop's thread.
 */
#ifndef ST_CLUSTER_HEARTBEAT_H
#define ST_CLUSTER_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <netinet/in.h>
#include <uv.h>

#include "cluster/config.h"
#include "cluster/records.h"

#define ST_HB_MAX_DATAGRAM 65536
#define ST_HB_MAX_CREATE   64

typedef struct st_hb {
    int32_t id;
    uint64_t incarnation;
    char host[256];
    int port;
    char rack[128];       /* "": none */
    char endpoints[1024]; /* "NAME=host:port,...", "": none */
    char raft[300];       /* the quorum address, "": none */
    bool voter;
    int64_t applied;
    int ncreate;
    char create[ST_HB_MAX_CREATE][256];
    int nalter;
    st_rec_alter_t *alter; /* decode: malloc'ed (st_hb_fini); encode: the caller's */
} st_hb_t;

/* Adds topic to hb's creations, unless it is there already, too long or the list is full. */
void st_hb_add_create(st_hb_t *hb, const char *topic);
/* Puts ISR change a into v[0..*n) (at most max): it replaces an entry for the same partition,
 * or is appended while there is room. */
void st_hb_alter_put(st_rec_alter_t *v, int *n, int max, const st_rec_alter_t *a);
/* This node's heartbeat (its lists left as they are): node.id, the advertised listener (or
 * kafka_port when none is set), broker.rack and role from cfg; raft_addr its quorum address. */
void st_hb_self(st_hb_t *hb, const st_config_t *cfg, uint64_t incarnation, int kafka_port,
                const char *raft_addr, int64_t applied);
/* The datagram for hb: 0 and *out (malloc'ed, NUL-terminated; *len bytes without the NUL),
 * or -ENOMEM. */
int st_hb_encode(const st_hb_t *hb, char **out, size_t *len);
/* Decodes a received datagram of len bytes (untrusted) into *hb: 0, ST_E_MALFORMED (dropped
 * whole, as the layout says; *hb needs no fini) or -ENOMEM. Never asserts on the bytes. */
int st_hb_decode(const void *buf, size_t len, st_hb_t *hb);
/* Frees what decode allocated. */
void st_hb_fini(st_hb_t *hb);

/* What the active controller knows of a broker from its heartbeats. */
typedef struct st_hb_peer {
    int32_t id;
    int64_t last_ms; /* monotonic time of its last heartbeat */
    uint64_t incarnation;
    char host[256];
    int port;
    char rack[128];
    char endpoints[1024];
    char raft_addr[300];
    bool voter;
    int64_t applied;  /* how far it has applied the log */
    int64_t catch_up; /* the log index it must reach to be unfenced (0: not set; the
                       * controller's, cleared by a new incarnation) */
} st_hb_peer_t;

/* The peer `id` of the array v[0..*n) (realloc'ed), added (zeroed) when create. NULL when
 * absent, or out of memory. */
st_hb_peer_t *st_hb_peer_get(st_hb_peer_t **v, int *n, int32_t id, bool create);
/* Records heartbeat hb of p's broker, received at now_ms (monotonic). */
void st_hb_peer_take(st_hb_peer_t *p, const st_hb_t *hb, int64_t now_ms);
/* Whether the registration p's heartbeats carry (incarnation, listener, rack) differs from
 * what the metadata holds for its broker (b; NULL: not registered). */
bool st_hb_peer_differs(const st_hb_peer_t *p, const st_md_broker_t *b);

/* Called on the loop's thread with each datagram received (untrusted: st_hb_decode it). */
typedef void (*st_hb_recv_fn)(void *arg, const void *data, size_t len);

#define ST_HB_RESOLVE_MS 500 /* one voter's name per tick, in turn */

typedef struct st_hb_voter {
    int32_t id;
    const char *host; /* the config's */
    int port;
    bool known; /* addr holds its last resolved address (IPv4) */
    struct sockaddr_in addr;
} st_hb_voter_t;

typedef struct st_hb_link {
    uv_udp_t udp;
    uv_timer_t resolve; /* every ST_HB_RESOLVE_MS: the next voter's name again */
    bool timer_up, closing;
    uv_getaddrinfo_t gai;  /* the one lookup at a time, the voters in turn */
    st_hb_voter_t *lookup; /* whose name gai is looking up, or NULL */
    int next_lookup;
    int nvoters;
    st_hb_voter_t voters[16];
    st_hb_recv_fn recv;
    void *arg;
} st_hb_link_t;

/* Loop thread: sets up the socket (st_hb_link_close it afterwards, even when this fails),
 * resolves the voters of cfg (those that do not resolve yet are looked up again later) and
 * binds (a voter: its CONTROLLER host:port, receiving into recv). 0, or ST_E_CONFIG with one
 * line in err. */
int st_hb_link_open(st_hb_link_t *l, uv_loop_t *loop, const st_config_t *cfg, st_hb_recv_fn recv,
                    void *arg, char *err, size_t errlen);
/* Loop thread: sends one datagram to voter `leader`, or to every voter when leader is -1. */
void st_hb_link_send(st_hb_link_t *l, int32_t leader, const char *data, size_t len);
/* Loop thread: closes the socket and the lookups (their ends complete on the loop; the link's
 * memory must outlive the loop's run). */
void st_hb_link_close(st_hb_link_t *l);

#endif
