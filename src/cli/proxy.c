/*
 * proxy.c — `strata proxy --listen ADDR --upstream ADDR [--log]`: a TCP proxy for Kafka
 * traffic, the debugging proxy of the design.
 *
 * Each accepted connection gets its own connection to the upstream broker. Bytes are cut into
 * Kafka frames (int32 size + payload) in both directions and forwarded whole, unchanged, in
 * order. With --log each request is printed when it arrives (api, version, correlation id,
 * client id, decoded fields) and each response when it returns (same, plus the latency since
 * the request was forwarded), matched by correlation id. Decoding uses proto/'s generated
 * codecs; a frame they cannot decode is still forwarded and printed by size.
 *
 * One thread, one poll() loop. A side whose peer has more than ST_CLI_PROXY_HIGH_WATER bytes
 * queued is not read until that drains (back-pressure).
 *
 * Address rewriting. A client bootstraps from the proxy, then connects to the brokers that
 * Metadata names; left alone, everything after the bootstrap exchange (Produce, Fetch, the
 * group protocol) would bypass the proxy. So the broker addresses in Metadata, FindCoordinator
 * and DescribeCluster responses are replaced with the proxy's advertised address (--advertise,
 * default the listen address): the response is decoded and re-encoded with proto/'s codecs at
 * the version the client asked for, and only those frames are changed. Every broker maps to
 * the one upstream, so this suits a single broker (or pointing --upstream at the broker whose
 * traffic you want to see); --no-rewrite forwards those responses unchanged.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"
#include "cli/cmds.h"
#include "cli/common.h"
#include "cli/http.h"
#include "proto/kafka_gen.h"
#include "proto/kerr.h"
#include "proto/kheader.h"

#define ST_CLI_PROXY_HIGH_WATER (8u << 20)
#define ST_CLI_PROXY_MAX_FRAME  (100 << 20)
#define ST_CLI_PROXY_MAX_CONNS  256

typedef struct pending {
    int32_t correlation_id;
    int16_t api_key, api_version;
    int64_t t_ns;
} pending_t;

typedef struct side {
    int fd;
    st_buf_t in;  /* bytes read, not yet a whole frame */
    st_buf_t out; /* frames to write to this side */
    size_t out_off;
} side_t;

typedef struct pconn {
    int id;
    side_t client, upstream;
    pending_t *pend; /* requests waiting for a response, in order */
    size_t npend, cappend;
} pconn_t;

typedef struct proxy {
    bool log;
    bool rewrite;       /* replace broker addresses with adv_host:adv_port */
    char adv_host[256]; /* the address clients are told to connect to */
    int32_t adv_port;
    st_arena_t arena;
    st_buf_t line;
} proxy_t;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *api_name(int16_t key)
{
    const st_kp_api_t *a = st_kp_api_find(key);
    return a ? a->name : "?";
}

static void print_line(proxy_t *px, const pconn_t *c, const char *dir, const uint8_t *frame,
                       size_t len, const pending_t *p, bool request)
{
    st_buf_t *b = &px->line;
    st_buf_clear(b);
    st_arena_reset(&px->arena);
    char head[200];
    int n = snprintf(head, sizeof(head), "[%d] %s %s v%d #%d %zu bytes", c->id, dir,
                     api_name(p->api_key), p->api_version, p->correlation_id, len + 4);
    st_buf_append(b, head, (size_t)n);
    st_kreader_t r;
    st_kreader_init(&r, frame, len, &px->arena);
    void *msg = NULL;
    int rc;
    if (request) {
        st_kp_req_header_t h;
        int hv = st_kp_req_header_version(p->api_key, p->api_version);
        rc = hv < 0 ? hv : st_kp_req_header_decode(&r, hv, &h);
        if (rc >= 0 && h.client_id.len > 0) {
            n = snprintf(head, sizeof(head), " client=%.*s", (int)h.client_id.len, h.client_id.ptr);
            st_buf_append(b, head, (size_t)n);
        }
        if (rc >= 0)
            rc = st_kp_req_decode_any(&r, p->api_key, p->api_version, &msg);
    } else {
        n = snprintf(head, sizeof(head), " %.3f ms", (double)(mono_ns() - p->t_ns) / 1e6);
        st_buf_append(b, head, (size_t)n);
        st_kp_resp_header_t h;
        int hv = st_kp_resp_header_version(p->api_key, p->api_version);
        rc = hv < 0 ? hv : st_kp_resp_header_decode(&r, hv, &h);
        if (rc >= 0)
            rc = st_kp_resp_decode_any(&r, p->api_key, p->api_version, &msg);
    }
    if (rc >= 0 && msg) {
        st_buf_put_u8(b, ' ');
        if (request)
            st_kp_req_format(b, p->api_key, p->api_version, msg);
        else
            st_kp_resp_format(b, p->api_key, p->api_version, msg);
    } else {
        n = snprintf(head, sizeof(head), " (not decoded: %s)", st_strerror(rc));
        st_buf_append(b, head, (size_t)n);
    }
    st_buf_put_u8(b, '\n');
    fwrite(b->data, 1, b->len, stdout);
    fflush(stdout);
}

/*
 * Appends to out (size prefix included) the response `frame` to the request `p` with every
 * broker address replaced by the proxy's advertised one. Returns 1 when it did, 0 when the
 * frame is not one that names brokers or cannot be decoded (the caller forwards it as it came).
 */
static int rewrite_brokers(proxy_t *px, const uint8_t *frame, size_t len, const pending_t *p,
                           st_buf_t *out)
{
    if (p->api_key != ST_KP_API_METADATA && p->api_key != ST_KP_API_FIND_COORDINATOR &&
        p->api_key != ST_KP_API_DESCRIBE_CLUSTER)
        return 0;
    st_arena_reset(&px->arena);
    st_kreader_t r;
    st_kreader_init(&r, frame, len, &px->arena);
    st_kp_resp_header_t h;
    int hv = st_kp_resp_header_version(p->api_key, p->api_version);
    if (hv < 0 || st_kp_resp_header_decode(&r, hv, &h) < 0)
        return 0;
    union {
        st_kp_metadata_resp_t md;
        st_kp_find_coordinator_resp_t fc;
        st_kp_describe_cluster_resp_t dc;
    } m;
    const st_kstr_t host = st_kstr(px->adv_host);
    int rc;
    switch (p->api_key) {
    case ST_KP_API_METADATA:
        rc = st_kp_metadata_resp_decode(&r, p->api_version, &m.md);
        for (int32_t i = 0; rc >= 0 && i < m.md.brokers_count; i++) {
            m.md.brokers[i].host = host;
            m.md.brokers[i].port = px->adv_port;
        }
        break;
    case ST_KP_API_FIND_COORDINATOR:
        rc = st_kp_find_coordinator_resp_decode(&r, p->api_version, &m.fc);
        if (rc >= 0 && m.fc.node_id >= 0 && m.fc.error_code == 0) {
            m.fc.host = host;
            m.fc.port = px->adv_port;
        }
        for (int32_t i = 0; rc >= 0 && i < m.fc.coordinators_count; i++) {
            if (m.fc.coordinators[i].node_id >= 0 && m.fc.coordinators[i].error_code == 0) {
                m.fc.coordinators[i].host = host;
                m.fc.coordinators[i].port = px->adv_port;
            }
        }
        break;
    default:
        rc = st_kp_describe_cluster_resp_decode(&r, p->api_version, &m.dc);
        for (int32_t i = 0; rc >= 0 && i < m.dc.brokers_count; i++) {
            m.dc.brokers[i].host = host;
            m.dc.brokers[i].port = px->adv_port;
        }
        break;
    }
    if (rc < 0)
        return 0;
    size_t start = out->len;
    st_buf_put_be32(out, 0);
    st_kwriter_t w;
    st_kwriter_init(&w, out);
    rc = st_kp_resp_header_encode(&w, hv, &h);
    if (rc >= 0) {
        switch (p->api_key) {
        case ST_KP_API_METADATA:
            rc = st_kp_metadata_resp_encode(&w, p->api_version, &m.md);
            break;
        case ST_KP_API_FIND_COORDINATOR:
            rc = st_kp_find_coordinator_resp_encode(&w, p->api_version, &m.fc);
            break;
        default:
            rc = st_kp_describe_cluster_resp_encode(&w, p->api_version, &m.dc);
            break;
        }
    }
    if (rc < 0 || out->oom) {
        out->len = start;
        return 0;
    }
    st_put_be32(out->data + start, (uint32_t)(out->len - start - 4));
    return 1;
}

/* Moves whole frames from s->in to dst->out, logging them. Returns 0 or -1 (close). */
static int pump(proxy_t *px, pconn_t *c, side_t *s, side_t *dst, bool from_client)
{
    size_t off = 0;
    while (s->in.len - off >= 4) {
        int32_t size = (int32_t)st_be32(s->in.data + off);
        if (size < 0 || size > ST_CLI_PROXY_MAX_FRAME) {
            fprintf(stderr, "strata proxy: [%d] frame of %d bytes from the %s; closing\n", c->id,
                    size, from_client ? "client" : "upstream");
            return -1;
        }
        if (s->in.len - off < 4 + (size_t)size)
            break;
        const uint8_t *f = s->in.data + off + 4;
        if (from_client && size >= 8) {
            pending_t p = {(int32_t)st_be32(f + 4), (int16_t)st_be16(f), (int16_t)st_be16(f + 2),
                           mono_ns()};
            if (c->npend == c->cappend) {
                c->cappend = c->cappend ? c->cappend * 2 : 16;
                c->pend = realloc(c->pend, c->cappend * sizeof(*c->pend));
            }
            /* Produce with acks=0 gets no response; it is not kept waiting. */
            bool no_resp = false;
            if (px->log)
                print_line(px, c, "->", f, (size_t)size, &p, true);
            if (p.api_key == 0 && size >= 14) {
                /* acks sits after the header; decode it to know whether to wait. */
                st_arena_reset(&px->arena);
                st_kreader_t r;
                st_kreader_init(&r, f, (size_t)size, &px->arena);
                st_kp_req_header_t h;
                void *msg;
                int hv = st_kp_req_header_version(p.api_key, p.api_version);
                if (hv >= 0 && st_kp_req_header_decode(&r, hv, &h) >= 0 &&
                    st_kp_req_decode_any(&r, p.api_key, p.api_version, &msg) >= 0)
                    no_resp = ((st_kp_produce_req_t *)msg)->acks == 0;
            }
            if (!no_resp)
                c->pend[c->npend++] = p;
        } else if (!from_client && size >= 4) {
            int32_t corr = (int32_t)st_be32(f);
            size_t i = 0;
            while (i < c->npend && c->pend[i].correlation_id != corr)
                i++;
            if (i < c->npend) {
                pending_t p = c->pend[i];
                memmove(&c->pend[i], &c->pend[i + 1], (c->npend - i - 1) * sizeof(*c->pend));
                c->npend--;
                if (px->log)
                    print_line(px, c, "<-", f, (size_t)size, &p, false);
                if (px->rewrite && rewrite_brokers(px, f, (size_t)size, &p, &dst->out)) {
                    if (px->log)
                        printf("[%d]    (broker addresses rewritten to %s:%d)\n", c->id,
                               px->adv_host, px->adv_port);
                    off += 4 + (size_t)size;
                    continue;
                }
            } else if (px->log) {
                printf("[%d] <- #%d %d bytes (no matching request)\n", c->id, corr, size + 4);
            }
        }
        st_buf_append(&dst->out, s->in.data + off, 4 + (size_t)size);
        off += 4 + (size_t)size;
    }
    if (off) {
        memmove(s->in.data, s->in.data + off, s->in.len - off);
        s->in.len -= off;
    }
    return dst->out.oom || s->in.oom ? -1 : 0;
}

static int do_read(proxy_t *px, pconn_t *c, bool from_client)
{
    side_t *s = from_client ? &c->client : &c->upstream;
    side_t *d = from_client ? &c->upstream : &c->client;
    if (st_buf_reserve(&s->in, 65536) < 0)
        return -1;
    ssize_t n = read(s->fd, s->in.data + s->in.len, s->in.cap - s->in.len);
    if (n == 0)
        return -1;
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    s->in.len += (size_t)n;
    return pump(px, c, s, d, from_client);
}

static int do_write(side_t *s)
{
    while (s->out_off < s->out.len) {
        ssize_t n = write(s->fd, s->out.data + s->out_off, s->out.len - s->out_off);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        s->out_off += (size_t)n;
    }
    st_buf_clear(&s->out);
    s->out_off = 0;
    return 0;
}

static void conn_close(pconn_t *c, bool log)
{
    if (log)
        printf("[%d] closed (%zu request(s) unanswered)\n", c->id, c->npend);
    fflush(stdout);
    close(c->client.fd);
    close(c->upstream.fd);
    st_buf_fini(&c->client.in);
    st_buf_fini(&c->client.out);
    st_buf_fini(&c->upstream.in);
    st_buf_fini(&c->upstream.out);
    free(c->pend);
    free(c);
}

int st_cli_proxy(int argc, char **argv)
{
    static const char usage[] =
        "proxy --listen HOST:PORT --upstream HOST:PORT [--log] [--advertise HOST:PORT]";
    const char *listen_s = "127.0.0.1:19092", *upstream_s = NULL, *advertise_s = NULL;
    bool log = false, no_rewrite = false;
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {
        {'l', "listen", ST_CLI_OPT_STR, &listen_s, "HOST:PORT",
         "where to accept clients (127.0.0.1:19092; port 0 picks one)"},
        {'u', "upstream", ST_CLI_OPT_STR, &upstream_s, "HOST:PORT", "the broker to forward to"},
        {0, "log", ST_CLI_OPT_FLAG, &log, NULL,
         "print every request and response, decoded, with latency"},
        {0, "advertise", ST_CLI_OPT_STR, &advertise_s, "HOST:PORT",
         "the address put in Metadata/FindCoordinator/DescribeCluster answers (default: the "
         "listen address)"},
        {0, "no-rewrite", ST_CLI_OPT_FLAG, &no_rewrite, NULL,
         "forward broker addresses unchanged (clients then bypass the proxy after bootstrap)"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Forwards Kafka connections to a broker; with --log prints the "
                          "traffic decoded.\nPrints \"listening on HOST:PORT\" once ready.",
                          opts, false, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc >= 0)
        return rc;
    if (!upstream_s)
        return st_cli_usage_error(usage, "--upstream HOST:PORT is required");
    struct addrinfo *la, *ua;
    if (st_cli_resolve(listen_s, true, &la))
        return st_cli_usage_error(usage, "cannot resolve --listen '%s' (want HOST:PORT)", listen_s);
    if (st_cli_resolve(upstream_s, false, &ua)) {
        freeaddrinfo(la);
        return st_cli_usage_error(usage, "cannot resolve --upstream '%s' (want HOST:PORT)",
                                  upstream_s);
    }
    int lfd = socket(la->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (lfd < 0 || bind(lfd, la->ai_addr, la->ai_addrlen) < 0 || listen(lfd, 128) < 0) {
        st_cli_errorf("cannot listen on %s: %s — is something else using the port?", listen_s,
                      strerror(errno));
        freeaddrinfo(la);
        freeaddrinfo(ua);
        if (lfd >= 0)
            close(lfd);
        return ST_CLI_FAIL;
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof(bound);
    getsockname(lfd, (struct sockaddr *)&bound, &bl);
    char hbuf[NI_MAXHOST], pbuf[NI_MAXSERV];
    getnameinfo((struct sockaddr *)&bound, bl, hbuf, sizeof(hbuf), pbuf, sizeof(pbuf),
                NI_NUMERICHOST | NI_NUMERICSERV);
    proxy_t px = {.log = log, .rewrite = !no_rewrite};
    if (advertise_s) {
        const char *colon = strrchr(advertise_s, ':');
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;
        size_t hl = colon ? (size_t)(colon - advertise_s) : 0;
        if (!colon || hl == 0 || hl >= sizeof(px.adv_host) || !end || *end || port < 1 ||
            port > 65535) {
            freeaddrinfo(la);
            freeaddrinfo(ua);
            close(lfd);
            return st_cli_usage_error(usage, "--advertise wants HOST:PORT, not '%s'", advertise_s);
        }
        memcpy(px.adv_host, advertise_s, hl);
        px.adv_host[hl] = '\0';
        px.adv_port = (int32_t)port;
    } else {
        /* A wildcard listen address is no place to connect to; tell clients loopback. */
        bool any = !strcmp(hbuf, "0.0.0.0") || !strcmp(hbuf, "::");
        snprintf(px.adv_host, sizeof(px.adv_host), "%.*s", (int)sizeof(px.adv_host) - 1,
                 any ? "127.0.0.1" : hbuf);
        px.adv_port = (int32_t)atoi(pbuf);
    }
    printf("listening on %s:%s, forwarding to %s\n", hbuf, pbuf, upstream_s);
    fflush(stdout);
    freeaddrinfo(la);

    st_arena_init(&px.arena, 64 << 10);
    st_buf_init(&px.line);
    pconn_t *conns[ST_CLI_PROXY_MAX_CONNS];
    size_t nconns = 0;
    int next_id = 1;
    struct pollfd pfd[1 + 2 * ST_CLI_PROXY_MAX_CONNS];
    while (!st_cli_stop) {
        pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (size_t i = 0; i < nconns; i++) {
            pconn_t *c = conns[i];
            short ce = c->upstream.out.len < ST_CLI_PROXY_HIGH_WATER ? POLLIN : 0;
            short ue = c->client.out.len < ST_CLI_PROXY_HIGH_WATER ? POLLIN : 0;
            if (c->client.out.len)
                ce |= POLLOUT;
            if (c->upstream.out.len)
                ue |= POLLOUT;
            pfd[1 + 2 * i] = (struct pollfd){.fd = c->client.fd, .events = ce};
            pfd[2 + 2 * i] = (struct pollfd){.fd = c->upstream.fd, .events = ue};
        }
        int n = poll(pfd, 1 + 2 * nconns, 500);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        /* Serve existing connections first: new ones are appended after this pass. */
        for (size_t i = nconns; i-- > 0;) {
            pconn_t *c = conns[i];
            short cr = pfd[1 + 2 * i].revents, ur = pfd[2 + 2 * i].revents;
            bool bad = false;
            if (cr & (POLLIN | POLLHUP | POLLERR))
                bad |= do_read(&px, c, true) < 0;
            if (!bad && (ur & (POLLIN | POLLHUP | POLLERR)))
                bad |= do_read(&px, c, false) < 0;
            if (!bad)
                bad |= do_write(&c->upstream) < 0 || do_write(&c->client) < 0;
            if (bad) {
                /* Deliver what the upstream already answered before closing. */
                do_write(&c->client);
                conn_close(c, log);
                conns[i] = conns[--nconns];
            }
        }
        if (pfd[0].revents & POLLIN) {
            int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (cfd < 0)
                continue;
            if (nconns == ST_CLI_PROXY_MAX_CONNS) {
                close(cfd);
                continue;
            }
            int ufd = socket(ua->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (ufd < 0 || connect(ufd, ua->ai_addr, ua->ai_addrlen) < 0) {
                fprintf(stderr,
                        "strata proxy: cannot connect to %s: %s — is the broker "
                        "running?\n",
                        upstream_s, strerror(errno));
                if (ufd >= 0)
                    close(ufd);
                close(cfd);
                continue;
            }
            fcntl(ufd, F_SETFL, fcntl(ufd, F_GETFL) | O_NONBLOCK);
            setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            pconn_t *c = calloc(1, sizeof(*c));
            c->id = next_id++;
            c->client.fd = cfd;
            c->upstream.fd = ufd;
            st_buf_init(&c->client.in);
            st_buf_init(&c->client.out);
            st_buf_init(&c->upstream.in);
            st_buf_init(&c->upstream.out);
            conns[nconns++] = c;
            if (log) {
                printf("[%d] connected\n", c->id);
                fflush(stdout);
            }
        }
    }
    for (size_t i = 0; i < nconns; i++)
        conn_close(conns[i], false);
    close(lfd);
    freeaddrinfo(ua);
    st_arena_fini(&px.arena);
    st_buf_fini(&px.line);
    return ST_CLI_OK;
}
