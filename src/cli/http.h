/*
 * http.h — a minimal HTTP/1.0 GET for the broker's admin API (admin.listen), which the Kafka
 * protocol does not carry: per-partition figures such as the cleaner's dirty ratio
 * (`strata topic describe`). Plain TCP, one request per connection, bounded in time.
 * Single-threaded; no state.
 */
#ifndef ST_CLI_HTTP_H
#define ST_CLI_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct addrinfo;

/*
 * Resolves "host:port" for a TCP socket (host may be a name, an address, [v6], or empty: the
 * wildcard when passive, else loopback). Returns 0 with *out (freeaddrinfo it), or a
 * getaddrinfo EAI_* code (EAI_NONAME when addr is not host:port).
 */
int st_cli_resolve(const char *addr, bool passive, struct addrinfo **out);

/*
 * GETs path from hostport ("host:port", as st_cli_resolve takes) within timeout_ms (connect, send
 * and receive). On success returns 0 with the body (NUL-terminated, malloc'ed; caller frees) in
 * *body and its length in *len; a status other than 200 is -EPROTO. Otherwise a negative errno,
 * with one line saying why in err.
 */
int st_cli_http_get(const char *hostport, const char *path, int64_t timeout_ms, char **body,
                    size_t *len, char *err, size_t errlen);

/*
 * The same GET with any answer taken: returns 0 once the server answered, with its status in
 * *status and its body in *body and *len (as above), whatever the status; auth ("user:password",
 * or NULL) goes as HTTP basic credentials. Otherwise (no connection, no HTTP answer within
 * timeout_ms, a body over 64 MiB) a negative errno with one line in err: -ETIMEDOUT when the
 * time ran out, -ECONNREFUSED, -EINVAL for an address that is not host:port.
 */
int st_cli_http_fetch(const char *hostport, const char *path, const char *auth, int64_t timeout_ms,
                      int *status, char **body, size_t *len, char *err, size_t errlen);

#endif
