/*
 * routes.c — the admin API's table of endpoints, its index and its OpenAPI description
 * (routes.h).
 */
#include "admin/routes.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON "application/json"

const st_admin_route_t st_admin_routes[] = {
    {"/", "GET", JSON, "this index (an HTML page for a browser)", NULL, NULL},
    {"/v1/openapi.json", "GET", JSON, "the OpenAPI 3.0 description of this API", NULL, NULL},
    {"/v1/status/ready", "GET", JSON,
     "200 {\"ready\":true} once the broker serves Kafka (and, in a cluster, has caught up "
     "with the metadata), 503 before",
     NULL, NULL},
    {"/metrics", "GET", "text/plain; version=0.0.4", "Prometheus exposition of every metric", NULL,
     NULL},
    {"/v1/cluster", "GET", JSON, "cluster id, controller, brokers (fenced or not), this node", NULL,
     NULL},
    {"/v1/topics", "GET", JSON, "every topic with its partition count and configs", NULL, NULL},
    {"/v1/partitions", "GET", JSON,
     "partitions: leader, replicas, ISR, offsets, sizes, the cleaner's dirty ratio", "topic",
     "only this topic's"},
    {"/v1/debug/log", "GET", "text/plain; charset=utf-8",
     "the broker's most recent log lines (the last 2000, at most 1 MiB), oldest first", NULL, NULL},
    {"/v1/debug/config", "GET", JSON,
     "every effective setting with its type and source (default, file, --set); secrets "
     "\"[hidden]\"",
     NULL, NULL},
    {"/v1/debug/data-dir", "GET", JSON,
     "every file and directory under log.dirs: path, type, size, mtime (at most 100000)", NULL,
     NULL},
    {"/v1/debug/process", "GET", JSON,
     "pid, version, uptime, memory, threads, open descriptors, limits, kernel, CPUs, load", NULL,
     NULL},
    {"/v1/protocol-log", "POST", JSON,
     "log each decoded request and response of one client for a while (broker log, lines "
     "\"protocol {...}\"): ?client_id=ID&address=IP&seconds=N (60)",
     NULL, NULL},
};
const int st_admin_nroutes = (int)(sizeof st_admin_routes / sizeof st_admin_routes[0]);

static int dump(json_t *j, st_buf_t *out)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s)
        return -ENOMEM;
    int rc = st_buf_append(out, s, strlen(s));
    free(s);
    return rc;
}

/* s with &, <, > and " escaped, appended to out. */
static void html_text(st_buf_t *out, const char *s)
{
    for (; *s; s++) {
        const char *e = *s == '&'   ? "&amp;"
                        : *s == '<' ? "&lt;"
                        : *s == '>' ? "&gt;"
                        : *s == '"' ? "&quot;"
                                    : NULL;
        if (e)
            st_buf_append(out, e, strlen(e));
        else
            st_buf_append(out, s, 1);
    }
}

int st_admin_render_index(st_buf_t *out, const char *version, bool html)
{
    if (html) {
        static const char head[] =
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>Strata admin API</title>"
            "</head><body><h1>Strata admin API</h1><p>version ";
        st_buf_append(out, head, sizeof head - 1);
        html_text(out, version);
        st_buf_append(out, "</p><ul>", 8);
        for (int i = 0; i < st_admin_nroutes; i++) {
            const st_admin_route_t *r = &st_admin_routes[i];
            st_buf_append(out, "<li><a href=\"", 13);
            html_text(out, r->path);
            st_buf_append(out, "\"><code>", 8);
            html_text(out, r->path);
            st_buf_append(out, "</code></a> — ", strlen("</code></a> — "));
            html_text(out, r->summary);
            st_buf_append(out, "</li>", 5);
        }
        st_buf_append(out, "</ul></body></html>\n", 20);
        return out->oom ? -ENOMEM : 0;
    }
    json_t *eps = json_array();
    for (int i = 0; eps && i < st_admin_nroutes; i++) {
        const st_admin_route_t *r = &st_admin_routes[i];
        json_array_append_new(eps, json_pack("{s:s,s:s,s:s,s:s}", "path", r->path, "method",
                                             r->method, "type", r->type, "summary", r->summary));
    }
    return dump(json_pack("{s:s,s:s,s:s,s:o}", "service", "strata admin API", "version", version,
                          "openapi", "/v1/openapi.json", "endpoints", eps),
                out);
}

int st_admin_render_openapi(st_buf_t *out, const char *version)
{
    json_t *paths = json_object();
    for (int i = 0; paths && i < st_admin_nroutes; i++) {
        const st_admin_route_t *r = &st_admin_routes[i];
        char type[64];
        snprintf(type, sizeof type, "%.*s", (int)strcspn(r->type, ";"), r->type);
        json_t *ok = json_pack("{s:s,s:{s:{}}}", "description", "OK", "content", type);
        json_t *resp = json_pack("{s:o}", "200", ok);
        if (strcmp(r->path, "/v1/status/ready") == 0)
            json_object_set_new(resp, "503", json_pack("{s:s}", "description", "not serving yet"));
        bool post = strcmp(r->method, "POST") == 0;
        if (post)
            json_object_set_new(resp, "400", json_pack("{s:s}", "description", "bad parameters"));
        json_t *get = json_pack("{s:s,s:o}", "summary", r->summary, "responses", resp);
        if (post)
            json_object_set_new(
                get, "parameters",
                json_pack("[{s:s,s:s,s:s,s:{s:s}},{s:s,s:s,s:s,s:{s:s}},{s:s,s:s,s:s,s:{s:s}}]",
                          "name", "client_id", "in", "query", "description",
                          "only this client id's connections", "schema", "type", "string", "name",
                          "address", "in", "query", "description",
                          "only connections from this address", "schema", "type", "string", "name",
                          "seconds", "in", "query", "description",
                          "for this long (1-3600, default 60)", "schema", "type", "integer"));
        if (r->query)
            json_object_set_new(get, "parameters",
                                json_pack("[{s:s,s:s,s:b,s:s,s:{s:s}}]", "name", r->query, "in",
                                          "query", "required", 0, "description", r->query_summary,
                                          "schema", "type", "string"));
        json_object_set_new(paths, r->path, json_pack("{s:o}", post ? "post" : "get", get));
    }
    return dump(json_pack("{s:s,s:{s:s,s:s,s:s},s:o}", "openapi", "3.0.3", "info", "title",
                          "Strata admin API", "version", version, "description",
                          "A Strata broker's admin HTTP API (read-only). With "
                          "admin.require.auth every path but /v1/status/ready needs HTTP basic "
                          "auth with a SCRAM user's password.",
                          "paths", paths),
                out);
}
