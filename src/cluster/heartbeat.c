/*
 * heartbeat.c — encoding and bounds-checked decoding of the broker heartbeat datagram (the
 * layout is heartbeat.h's), with jansson; and the UDP link that carries it.
 */
#include "cluster/heartbeat.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "cluster/metadata.h"

static json_t *alter_json(const st_rec_alter_t *a)
{
    char hex[33];
    st_md_id_hex(a->topic_id, hex);
    json_t *isr = json_array();
    for (int i = 0; i < a->nisr && i < ST_MD_MAX_REPLICAS; i++)
        json_array_append_new(isr, json_integer(a->isr[i]));
    return json_pack("{s:s,s:i,s:i,s:i,s:i,s:o}", "t", hex, "p", a->partition, "l", a->leader, "le",
                     a->leader_epoch, "pe", a->partition_epoch, "isr", isr);
}

static int alter_parse(json_t *j, st_rec_alter_t *a)
{
    json_t *isr = json_object_get(j, "isr");
    memset(a, 0, sizeof *a);
    if (st_md_id_parse(json_string_value(json_object_get(j, "t")), a->topic_id) ||
        !json_is_array(isr) || json_array_size(isr) > ST_MD_MAX_REPLICAS)
        return ST_E_MALFORMED;
    a->partition = (int32_t)json_integer_value(json_object_get(j, "p"));
    a->leader = (int32_t)json_integer_value(json_object_get(j, "l"));
    a->leader_epoch = (int32_t)json_integer_value(json_object_get(j, "le"));
    a->partition_epoch = (int32_t)json_integer_value(json_object_get(j, "pe"));
    size_t i;
    json_t *v;
    json_array_foreach(isr, i, v) a->isr[i] = (int32_t)json_integer_value(v);
    a->nisr = (int16_t)json_array_size(isr);
    return 0;
}

void st_hb_add_create(st_hb_t *hb, const char *topic)
{
    for (int i = 0; i < hb->ncreate; i++)
        if (strcmp(hb->create[i], topic) == 0)
            return;
    if (hb->ncreate < ST_HB_MAX_CREATE && strlen(topic) < sizeof hb->create[0])
        snprintf(hb->create[hb->ncreate++], sizeof hb->create[0], "%s", topic);
}

void st_hb_alter_put(st_rec_alter_t *v, int *n, int max, const st_rec_alter_t *a)
{
    for (int i = 0; i < *n; i++)
        if (v[i].partition == a->partition && memcmp(v[i].topic_id, a->topic_id, 16) == 0) {
            v[i] = *a;
            return;
        }
    if (*n < max)
        v[(*n)++] = *a;
}

void st_hb_self(st_hb_t *hb, const st_config_t *c, uint64_t incarnation, int kafka_port,
                const char *raft_addr, int64_t applied)
{
    hb->id = (int32_t)c->node_id;
    hb->incarnation = incarnation;
    snprintf(hb->host, sizeof hb->host, "%s", c->advertised_host);
    hb->port = c->advertised_port ? c->advertised_port : kafka_port;
    snprintf(hb->rack, sizeof hb->rack, "%s", c->broker_rack);
    /* every listener a client may come in on, so Metadata tells it the others' addresses on
     * its own listener (Kafka registers every listener) */
    size_t at = 0;
    hb->endpoints[0] = 0;
    for (int i = 0; i < c->nkafka_listeners; i++) {
        const st_listener_t *l = &c->kafka_listeners[i];
        int port = l->adv_port ? l->adv_port : l->port;
        if (!port || !*l->adv_host)
            continue;
        int n = snprintf(hb->endpoints + at, sizeof hb->endpoints - at, "%s%s=%s:%d", at ? "," : "",
                         l->name, l->adv_host, port);
        if (n < 0 || (size_t)n >= sizeof hb->endpoints - at) {
            hb->endpoints[at] = 0; /* what does not fit is left out whole */
            break;
        }
        at += (size_t)n;
    }
    snprintf(hb->raft, sizeof hb->raft, "%s", raft_addr);
    hb->voter = c->role_controller;
    hb->applied = applied;
}

int st_hb_encode(const st_hb_t *hb, char **out, size_t *len)
{
    char inc[17];
    snprintf(inc, sizeof inc, "%016" PRIx64, hb->incarnation);
    json_t *create = NULL, *alter = NULL;
    if (hb->ncreate > 0 || hb->nalter > 0) {
        create = json_array();
        alter = json_array();
        for (int i = 0; i < hb->ncreate && i < ST_HB_MAX_CREATE; i++)
            json_array_append_new(create, json_string(hb->create[i]));
        for (int i = 0; i < hb->nalter; i++)
            json_array_append_new(alter, alter_json(&hb->alter[i]));
    }
    json_t *j =
        json_pack("{s:i,s:s,s:s,s:i,s:s?,s:s?,s:s,s:b,s:I,s:O?,s:O?}", "id", hb->id, "inc", inc,
                  "host", hb->host, "port", hb->port, "rack", hb->rack[0] ? hb->rack : NULL, "ep",
                  hb->endpoints[0] ? hb->endpoints : NULL, "raft", hb->raft, "voter", hb->voter,
                  "applied", (json_int_t)hb->applied, "create", create, "alter", alter);
    json_decref(create);
    json_decref(alter);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!text)
        return -ENOMEM;
    *out = text;
    *len = strlen(text);
    return 0;
}

int st_hb_decode(const void *buf, size_t len, st_hb_t *hb)
{
    memset(hb, 0, sizeof *hb);
    if (len == 0 || len > ST_HB_MAX_DATAGRAM)
        return ST_E_MALFORMED;
    json_error_t je;
    json_t *j = json_loadb(buf, len, 0, &je);
    json_t *id = json_object_get(j, "id");
    const char *inc = json_string_value(json_object_get(j, "inc"));
    const char *host = json_string_value(json_object_get(j, "host"));
    if (!json_is_integer(id) || !inc || !host || json_integer_value(id) < 0) {
        json_decref(j);
        return ST_E_MALFORMED;
    }
    hb->id = (int32_t)json_integer_value(id);
    hb->incarnation = strtoull(inc, NULL, 16);
    snprintf(hb->host, sizeof hb->host, "%s", host);
    hb->port = (int)json_integer_value(json_object_get(j, "port"));
    const char *rack = json_string_value(json_object_get(j, "rack"));
    snprintf(hb->rack, sizeof hb->rack, "%s", rack ? rack : "");
    const char *ep = json_string_value(json_object_get(j, "ep"));
    if (ep && strlen(ep) < sizeof hb->endpoints)
        snprintf(hb->endpoints, sizeof hb->endpoints, "%s", ep);
    const char *ra = json_string_value(json_object_get(j, "raft"));
    snprintf(hb->raft, sizeof hb->raft, "%s", ra ? ra : "");
    hb->voter = json_is_true(json_object_get(j, "voter"));
    hb->applied = json_integer_value(json_object_get(j, "applied"));
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(j, "create"), i, t)
    {
        if (json_is_string(t) && hb->ncreate < ST_HB_MAX_CREATE)
            snprintf(hb->create[hb->ncreate++], sizeof hb->create[0], "%s", json_string_value(t));
    }
    json_t *alters = json_object_get(j, "alter");
    size_t na = json_is_array(alters) ? json_array_size(alters) : 0;
    if (na > 0) {
        /* bounded: each entry takes more than one byte of a bounded datagram */
        hb->alter = malloc(na * sizeof *hb->alter);
        if (!hb->alter) {
            json_decref(j);
            return -ENOMEM;
        }
        json_array_foreach(alters, i, t)
        {
            if (alter_parse(t, &hb->alter[hb->nalter]) == 0)
                hb->nalter++;
        }
    }
    json_decref(j);
    return 0;
}

void st_hb_fini(st_hb_t *hb)
{
    free(hb->alter);
    hb->alter = NULL;
    hb->nalter = 0;
}

/* ---- the peers ---- */

st_hb_peer_t *st_hb_peer_get(st_hb_peer_t **v, int *n, int32_t id, bool create)
{
    for (int i = 0; i < *n; i++)
        if ((*v)[i].id == id)
            return &(*v)[i];
    if (!create)
        return NULL;
    st_hb_peer_t *nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv)
        return NULL;
    *v = nv;
    st_hb_peer_t *p = &nv[(*n)++];
    memset(p, 0, sizeof *p);
    p->id = id;
    return p;
}

void st_hb_peer_take(st_hb_peer_t *p, const st_hb_t *hb, int64_t now_ms)
{
    p->last_ms = now_ms;
    if (hb->incarnation != p->incarnation)
        p->catch_up = 0;
    p->incarnation = hb->incarnation;
    snprintf(p->host, sizeof p->host, "%s", hb->host);
    p->port = hb->port;
    snprintf(p->rack, sizeof p->rack, "%s", hb->rack);
    snprintf(p->endpoints, sizeof p->endpoints, "%s", hb->endpoints);
    snprintf(p->raft_addr, sizeof p->raft_addr, "%s", hb->raft);
    p->voter = hb->voter;
    p->applied = hb->applied;
}

/* ---- the link ---- */

static void link_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    static __thread char space[ST_HB_MAX_DATAGRAM];
    (void)h;
    buf->base = space;
    buf->len = sizeof space;
}

static void link_recv(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                      unsigned flags)
{
    (void)from;
    (void)flags;
    st_hb_link_t *l = h->data;
    if (n > 0)
        l->recv(l->arg, buf->base, (size_t)n);
}

static bool same_addr(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
    return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* A voter's address from a lookup's result: logged when it changes (or, later than the start,
 * first appears). */
static void voter_learn(st_hb_voter_t *v, const struct addrinfo *res, bool later)
{
    struct sockaddr_in a;
    memcpy(&a, res->ai_addr, sizeof a);
    if (v->known && same_addr(&a, &v->addr))
        return;
    char now[INET_ADDRSTRLEN] = "?", was[INET_ADDRSTRLEN] = "?";
    uv_ip4_name(&a, now, sizeof now);
    if (v->known) {
        uv_ip4_name(&v->addr, was, sizeof was);
        ST_INFO("heartbeats: voter %d (%s) is at %s now (was %s)", (int)v->id, v->host, now, was);
    } else if (later) {
        ST_INFO("heartbeats: voter %d (%s) resolves to %s", (int)v->id, v->host, now);
    }
    v->addr = a;
    v->known = true;
}

static void voter_resolved(uv_getaddrinfo_t *g, int status, struct addrinfo *res)
{
    st_hb_link_t *l = g->data;
    st_hb_voter_t *v = l->lookup;
    l->lookup = NULL;
    if (status == 0 && res && !l->closing)
        voter_learn(v, res, true);
    /* a failed lookup keeps the last address: a name server's hiccup is not a move */
    if (res)
        uv_freeaddrinfo(res);
}

/* One voter's name per tick, in turn, and never two lookups at once: a lookup holds one of
 * libuv's pool threads (four), which the quorum's log also uses, for as long as a slow name
 * server takes. */
static void resolve_tick(uv_timer_t *t)
{
    st_hb_link_t *l = t->data;
    if (l->lookup || l->nvoters == 0)
        return;
    st_hb_voter_t *v = &l->voters[l->next_lookup];
    l->next_lookup = (l->next_lookup + 1) % l->nvoters;
    char port[16];
    snprintf(port, sizeof port, "%d", v->port);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM};
    l->gai.data = l;
    if (uv_getaddrinfo(t->loop, &l->gai, voter_resolved, v->host, port, &hints) == 0)
        l->lookup = v;
}

int st_hb_link_open(st_hb_link_t *l, uv_loop_t *loop, const st_config_t *c, st_hb_recv_fn recv,
                    void *arg, char *err, size_t errlen)
{
    uv_udp_init(loop, &l->udp);
    l->udp.data = l;
    l->recv = recv;
    l->arg = arg;
    l->nvoters = c->nvoters < 16 ? c->nvoters : 16;
    if (c->quorum_local)
        return 0; /* a local quorum's one node takes its own heartbeats: no socket, no voters */
    for (int i = 0; i < l->nvoters; i++) {
        st_hb_voter_t *v = &l->voters[i];
        *v = (st_hb_voter_t){
            .id = c->voters[i].id, .host = c->voters[i].host, .port = c->voters[i].port};
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
        char port[16];
        snprintf(port, sizeof port, "%d", v->port);
        if (getaddrinfo(v->host, port, &hints, &res) == 0 && res)
            voter_learn(v, res, false);
        else
            ST_WARN("controller.quorum.voters: %s does not resolve (IPv4) yet; heartbeats to "
                    "voter %d wait until it does",
                    v->host, (int)v->id);
        if (res)
            freeaddrinfo(res);
    }
    uv_timer_init(loop, &l->resolve);
    l->resolve.data = l;
    l->timer_up = true;
    uv_timer_start(&l->resolve, resolve_tick, ST_HB_RESOLVE_MS, ST_HB_RESOLVE_MS);
    struct sockaddr_in sa;
    int rc = uv_ip4_addr(c->controller_host, c->role_controller ? c->controller_port : 0, &sa);
    if (rc)
        rc = uv_ip4_addr("0.0.0.0", c->role_controller ? c->controller_port : 0, &sa);
    if (!rc)
        rc = uv_udp_bind(&l->udp, (const struct sockaddr *)&sa, 0);
    if (!rc && c->role_controller)
        rc = uv_udp_recv_start(&l->udp, link_alloc, link_recv);
    if (rc) {
        snprintf(err, errlen, "cannot bind UDP %s:%d for heartbeats: %s", c->controller_host,
                 c->controller_port, uv_strerror(rc));
        return ST_E_CONFIG;
    }
    return 0;
}

void st_hb_link_send(st_hb_link_t *l, int32_t leader, const char *data, size_t len)
{
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    for (int i = 0; i < l->nvoters; i++) {
        const st_hb_voter_t *v = &l->voters[i];
        if (v->known && (leader < 0 || v->id == leader))
            uv_udp_try_send(&l->udp, &b, 1, (const struct sockaddr *)&v->addr);
    }
}

void st_hb_link_close(st_hb_link_t *l)
{
    l->closing = true;
    if (l->timer_up) {
        uv_timer_stop(&l->resolve);
        uv_close((uv_handle_t *)&l->resolve, NULL);
        l->timer_up = false;
    }
    if (l->lookup) /* its callback still runs, with UV_ECANCELED */
        uv_cancel((uv_req_t *)&l->gai);
    uv_close((uv_handle_t *)&l->udp, NULL);
}

bool st_hb_peer_differs(const st_hb_peer_t *p, const st_md_broker_t *b)
{
    const char *rack = p->rack[0] ? p->rack : NULL;
    const char *ep = p->endpoints[0] ? p->endpoints : NULL;
    return !b || b->incarnation != p->incarnation || strcmp(b->host, p->host) != 0 ||
           b->port != p->port || (b->rack == NULL) != (rack == NULL) ||
           (rack && strcmp(b->rack, rack) != 0) || (b->endpoints == NULL) != (ep == NULL) ||
           (ep && strcmp(b->endpoints, ep) != 0);
}
