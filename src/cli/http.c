/* http.c — resolving host:port, and a minimal HTTP/1.0 GET for the admin API (see http.h). */
/* gcc's -Wformat-truncation cannot see that the values fit the buffers sized for them (a
 * longer one would only be cut); clang's checks stay on. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "cli/http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ST_HTTP_MAX_BODY (64 << 20)

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline; 0, or -ETIMEDOUT. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, (int)(left > 60000 ? 60000 : left));
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

int st_cli_resolve(const char *addr, bool passive, struct addrinfo **out)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon[1] == '\0')
        return EAI_NONAME;
    size_t hl = (size_t)(colon - addr);
    if (hl >= sizeof(host))
        return EAI_NONAME;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    char *h = host;
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        h = host + 1;
    }
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
    return getaddrinfo(*h ? h : NULL, colon + 1, &hints, out);
}

static int dial(const char *hostport, int64_t deadline, char *err, size_t errlen)
{
    struct addrinfo *ai;
    int rc = st_cli_resolve(hostport, false, &ai);
    if (rc) {
        snprintf(err, errlen, "cannot resolve %s (want HOST:PORT): %s", hostport, gai_strerror(rc));
        return rc == EAI_NONAME ? -EINVAL : -EHOSTUNREACH;
    }
    int fd = -1;
    rc = -ECONNREFUSED;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        if (errno == EINPROGRESS && (rc = wait_fd(fd, POLLOUT, deadline)) == 0) {
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            if (soerr == 0)
                break;
            rc = -soerr;
        } else if (errno != EINPROGRESS) {
            rc = -errno;
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0)
        snprintf(err, errlen, "cannot connect to %s: %s", hostport, strerror(-rc));
    return fd < 0 ? rc : fd;
}

int st_cli_http_fetch(const char *hostport, const char *path, const char *auth, int64_t timeout_ms,
                      int *status, char **body, size_t *len, char *err, size_t errlen)
{
    int64_t deadline = now_ms() + timeout_ms;
    int fd = dial(hostport, deadline, err, errlen);
    if (fd < 0)
        return fd;
    char cred[700] = "";
    if (auth) {
        unsigned char b64[4 * ((512 + 2) / 3) + 1];
        size_t al = strlen(auth);
        if (al > 512) {
            snprintf(err, errlen, "admin credentials too long");
            close(fd);
            return -EINVAL;
        }
        EVP_EncodeBlock(b64, (const unsigned char *)auth, (int)al);
        snprintf(cred, sizeof cred, "Authorization: Basic %s\r\n", b64);
        OPENSSL_cleanse(b64, sizeof b64);
    }
    char req[3072];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s\r\n%sConnection: close\r\n\r\n",
                     path, hostport, cred);
    OPENSSL_cleanse(cred, sizeof cred);
    int rc = 0;
    if (n < 0 || (size_t)n >= sizeof req) {
        snprintf(err, errlen, "request path too long");
        OPENSSL_cleanse(req, sizeof req);
        close(fd);
        return -EINVAL;
    }
    for (int off = 0; off < n && rc == 0;) {
        ssize_t w = send(fd, req + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w > 0)
            off += (int)w;
        else if (w < 0 && errno == EAGAIN)
            rc = wait_fd(fd, POLLOUT, deadline);
        else if (w < 0 && errno != EINTR)
            rc = -errno;
    }
    OPENSSL_cleanse(req, sizeof req);
    char *buf = NULL;
    size_t have = 0, cap = 0;
    while (rc == 0) {
        if (have + 4096 + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 16384;
            char *nb = ncap > ST_HTTP_MAX_BODY ? NULL : realloc(buf, ncap);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = recv(fd, buf + have, cap - have - 1, 0);
        if (r > 0)
            have += (size_t)r;
        else if (r == 0)
            break;
        else if (errno == EAGAIN)
            rc = wait_fd(fd, POLLIN, deadline);
        else if (errno != EINTR)
            rc = -errno;
    }
    close(fd);
    if (rc) {
        if (rc == -ETIMEDOUT)
            snprintf(err, errlen, "%s did not answer %s within %lld ms", hostport, path,
                     (long long)timeout_ms);
        else
            snprintf(err, errlen, "reading from %s: %s", hostport, strerror(-rc));
        free(buf);
        return rc;
    }
    if (!buf) {
        snprintf(err, errlen, "%s closed the connection without an answer", hostport);
        return -EPROTO;
    }
    buf[have] = 0;
    char *sep = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/%*d.%*d %d", status) != 1 || !sep) {
        snprintf(err, errlen, "%s answered no HTTP", hostport);
        free(buf);
        return -EPROTO;
    }
    sep += 4;
    *len = have - (size_t)(sep - buf);
    memmove(buf, sep, *len + 1);
    *body = buf;
    return 0;
}

int st_cli_http_get(const char *hostport, const char *path, int64_t timeout_ms, char **body,
                    size_t *len, char *err, size_t errlen)
{
    int status = 0;
    int rc = st_cli_http_fetch(hostport, path, NULL, timeout_ms, &status, body, len, err, errlen);
    if (rc)
        return rc;
    if (status != 200) {
        snprintf(err, errlen, "%s answered HTTP status %d", hostport, status);
        free(*body);
        *body = NULL;
        return -EPROTO;
    }
    return 0;
}
