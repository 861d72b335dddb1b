/*
 * kreq.c — one Kafka request to one broker over a blocking socket with a deadline (kreq.h).
 */
#include "cli/kreq.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli/common.h"
#include "proto/kheader.h"

#define POLL_SLICE_MS 100 /* a wait wakes this often to see Ctrl-C */

/* Waits until fd is ready for `events`: 0, or -1 after printing why (deadline, Ctrl-C). */
static int wait_fd(st_cli_kconn_t *c, short events, const char *what)
{
    for (;;) {
        if (st_cli_stop) {
            st_cli_errorf("%s: interrupted", c->addr);
            return -1;
        }
        int64_t left = c->deadline - st_mono_ms();
        if (left <= 0) {
            st_cli_errorf("%s: no answer while %s within the timeout — is the broker overloaded "
                          "or stopped (SIGSTOP)? Raise --timeout to wait longer",
                          c->addr, what);
            return -1;
        }
        struct pollfd p = {.fd = c->fd, .events = events};
        int n = poll(&p, 1, (int)(left < POLL_SLICE_MS ? left : POLL_SLICE_MS));
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR) {
            st_cli_errorf("%s: poll: %s", c->addr, strerror(errno));
            return -1;
        }
    }
}

static int io_all(st_cli_kconn_t *c, uint8_t *p, size_t n, bool wr)
{
    while (n > 0) {
        if (wait_fd(c, wr ? POLLOUT : POLLIN, wr ? "sending" : "waiting for the answer"))
            return -1;
        ssize_t k = wr ? send(c->fd, p, n, MSG_NOSIGNAL) : recv(c->fd, p, n, 0);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (k <= 0) {
            st_cli_errorf("%s: connection %s", c->addr,
                          k == 0 ? "closed by the broker" : strerror(errno));
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int connect_addr(st_cli_kconn_t *c, const struct addrinfo *ai)
{
    c->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -errno;
    if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return -errno;
    if (wait_fd(c, POLLOUT, "connecting"))
        return -ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    return -err;
}

/* ApiVersions v0: what the broker serves. */
static int learn_versions(st_cli_kconn_t *c)
{
    for (int i = 0; i < 128; i++)
        c->vmin[i] = c->vmax[i] = -1;
    c->vmin[ST_KP_API_API_VERSIONS] = c->vmax[ST_KP_API_API_VERSIONS] = 0;
    st_arena_t a;
    st_arena_init(&a, 4096);
    st_kp_api_versions_req_t req = {0};
    st_kp_api_versions_resp_t resp;
    int rc = ST_CLI_KCALL(c, API_VERSIONS, api_versions, 0, &req, &a, &resp);
    if (rc == 0 && resp.error_code) {
        st_cli_errorf("%s: ApiVersions answered error %d", c->addr, resp.error_code);
        rc = -1;
    }
    for (int i = 0; rc == 0 && i < resp.api_keys_count; i++) {
        int k = resp.api_keys[i].api_key;
        if (k >= 0 && k < 128) {
            c->vmin[k] = resp.api_keys[i].min_version;
            c->vmax[k] = resp.api_keys[i].max_version;
        }
    }
    st_arena_fini(&a);
    return rc;
}

int st_cli_kconn_open(st_cli_kconn_t *c, const char *hostport, int64_t deadline_ms)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->deadline = deadline_ms;
    st_buf_init(&c->frame);
    snprintf(c->addr, sizeof c->addr, "%s", hostport);
    char host[256];
    const char *colon = strrchr(hostport, ':');
    size_t hl = colon ? (size_t)(colon - hostport) : 0;
    if (!colon || hl == 0 || hl >= sizeof host || !colon[1]) {
        st_cli_errorf("'%s' is not HOST:PORT", hostport);
        return -1;
    }
    memcpy(host, hostport, hl);
    host[hl] = 0;
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') { /* [::1]:9092 */
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = 0;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, colon + 1, &hints, &res);
    if (g) {
        st_cli_errorf("%s: cannot resolve: %s", hostport, gai_strerror(g));
        return -1;
    }
    int err = -ENOENT;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        err = connect_addr(c, ai);
        if (err == 0 || err == -ETIMEDOUT)
            break;
        close(c->fd);
        c->fd = -1;
    }
    freeaddrinfo(res);
    if (err) {
        if (err != -ETIMEDOUT)
            st_cli_errorf("%s: cannot connect: %s — is strata-server running there?", hostport,
                          strerror(-err));
        st_cli_kconn_close(c);
        return -1;
    }
    if (learn_versions(c)) {
        st_cli_kconn_close(c);
        return -1;
    }
    return 0;
}

void st_cli_kconn_close(st_cli_kconn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    st_buf_fini(&c->frame);
}

int16_t st_cli_kconn_version(st_cli_kconn_t *c, int16_t api, int16_t lo, int16_t hi)
{
    int16_t bmin = api >= 0 && api < 128 ? c->vmin[api] : -1;
    int16_t bmax = api >= 0 && api < 128 ? c->vmax[api] : -1;
    int16_t v = bmax < hi ? bmax : hi;
    if (bmax < 0 || v < lo || v < bmin) {
        const st_kp_api_t *a = st_kp_api_find(api);
        st_cli_errorf("%s does not serve %s (api %d) in versions %d-%d", c->addr,
                      a ? a->name : "this API", api, lo, hi);
        return -1;
    }
    return v;
}

int st_cli_kconn_call(st_cli_kconn_t *c, int16_t api, int16_t version, const st_buf_t *body,
                      st_arena_t *arena, st_kreader_t *out)
{
    int hv = st_kp_req_header_version(api, version);
    int rv = st_kp_resp_header_version(api, version);
    if (hv < 0 || rv < 0) {
        st_cli_errorf("api %d v%d: no header for it in this build", api, version);
        return -1;
    }
    st_buf_t b;
    st_buf_init(&b);
    int32_t corr = ++c->corr;
    st_buf_put_be32(&b, 0);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    st_kp_req_header_t h = {api, version, corr, st_kstr("strata-cli")};
    int rc = st_kp_req_header_encode(&w, hv, &h);
    if (rc == 0)
        rc = st_buf_append(&b, body->data, body->len);
    if (rc == 0 && b.oom)
        rc = -ENOMEM;
    if (rc) {
        st_buf_fini(&b);
        st_cli_errorf("cannot encode the request (%d)", rc);
        return -1;
    }
    st_put_be32(b.data, (uint32_t)(b.len - 4));
    rc = io_all(c, b.data, b.len, true);
    st_buf_fini(&b);
    uint8_t szb[4];
    if (rc || io_all(c, szb, 4, false))
        return -1;
    uint32_t sz = st_be32(szb);
    if (sz < 4 || sz > (64u << 20)) {
        st_cli_errorf("%s: answer of %u bytes: not a Kafka broker?", c->addr, sz);
        return -1;
    }
    st_buf_clear(&c->frame);
    uint8_t *p = st_buf_extend(&c->frame, sz);
    if (!p || io_all(c, p, sz, false))
        return -1;
    st_kreader_init(out, p, sz, arena);
    st_kp_resp_header_t rh;
    if (st_kp_resp_header_decode(out, rv, &rh) || rh.correlation_id != corr) {
        st_cli_errorf("%s: answer with a wrong header", c->addr);
        return -1;
    }
    return 0;
}

int st_cli_kcall_(st_cli_kconn_t *c, int16_t api, int16_t version, st_arena_t *arena,
                  int (*enc)(st_kwriter_t *, int16_t, const void *), const void *req,
                  int (*dec)(st_kreader_t *, int16_t, void *), void *resp)
{
    st_buf_t body;
    st_buf_init(&body);
    st_kwriter_t w;
    st_kwriter_init(&w, &body);
    int rc = enc(&w, version, req);
    if (rc) {
        st_buf_fini(&body);
        st_cli_errorf("cannot encode the request (%d)", rc);
        return -1;
    }
    st_kreader_t r;
    rc = st_cli_kconn_call(c, api, version, &body, arena, &r);
    st_buf_fini(&body);
    if (rc)
        return -1;
    if (dec(&r, version, resp)) {
        st_cli_errorf("%s: malformed answer to api %d v%d", c->addr, api, version);
        return -1;
    }
    return 0;
}
