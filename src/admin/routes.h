/*
 * routes.h — what the admin HTTP API serves, as one table: the index at `/` (JSON, or HTML
 * for a browser) and the OpenAPI 3.0 description at /v1/openapi.json are both made from it,
 * so neither can list an endpoint the server does not answer, nor miss one it does.
 *
 * Threads: any (pure functions of the table).
 */
#ifndef ST_ADMIN_ROUTES_H
#define ST_ADMIN_ROUTES_H

#include <stdbool.h>

#include "base/buf.h"

typedef struct st_admin_route {
    const char *path;
    const char *method;        /* "GET" or "POST" */
    const char *type;          /* the content type of its answer */
    const char *summary;       /* one line */
    const char *query;         /* optional query parameters' names, comma-separated (NULL: none) */
    const char *query_summary; /* theirs, separated by '|' */
    const char *body;          /* a POST's JSON body, in one line (NULL: none) */
} st_admin_route_t;

/* The endpoints, in the index's order (a path may appear once per method). */
extern const st_admin_route_t st_admin_routes[];
extern const int st_admin_nroutes;

/* The index: JSON ({"service", "version", "openapi", "endpoints": [{path, type, summary}]}),
 * or an HTML page of links when html. 0 or -ENOMEM. */
int st_admin_render_index(st_buf_t *out, const char *version, bool html);
/* The OpenAPI 3.0.3 document of the table. 0 or -ENOMEM. */
int st_admin_render_openapi(st_buf_t *out, const char *version);

#endif
