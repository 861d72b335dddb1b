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

#include "admin/render.h"

#define JSON "application/json"

const st_admin_route_t st_admin_routes[] = {
    {"/", "GET", JSON, "this index (an HTML page for a browser)", NULL, NULL, NULL},
    {"/v1/openapi.json", "GET", JSON, "the OpenAPI 3.0 description of this API", NULL, NULL, NULL},
    {"/v1/status/ready", "GET", JSON,
     "200 {\"ready\":true} once the broker serves Kafka (and, in a cluster, has caught up "
     "with the metadata), 503 before",
     NULL, NULL, NULL},
    {"/metrics", "GET", "text/plain; version=0.0.4", "Prometheus exposition of every metric", NULL,
     NULL, NULL},
    {"/v1/cluster", "GET", JSON, "cluster id, controller, brokers (fenced or not), this node", NULL,
     NULL, NULL},
    {"/v1/topics", "GET", JSON, "every topic with its partition count and configs", NULL, NULL,
     NULL},
    {"/v1/partitions", "GET", JSON,
     "partitions: leader, replicas, ISR, offsets, sizes, the cleaner's dirty ratio", "topic",
     "only this topic's", NULL},
    {"/v1/debug/log", "GET", "text/plain; charset=utf-8",
     "the broker's most recent log lines (the last 2000, at most 1 MiB), oldest first", NULL, NULL,
     NULL},
    {"/v1/debug/config", "GET", JSON,
     "every effective setting with its type and source (default, file, --set); secrets "
     "\"[hidden]\"",
     NULL, NULL, NULL},
    {"/v1/debug/data-dir", "GET", JSON,
     "every file and directory under log.dirs: path, type, size, mtime (at most 100000)", NULL,
     NULL, NULL},
    {"/v1/debug/process", "GET", JSON,
     "pid, version, uptime, memory, threads, open descriptors, limits, kernel, CPUs, load", NULL,
     NULL, NULL},
    {"/v1/groups", "GET", JSON,
     "consumer groups: state, members, committed offset, high watermark and lag per partition",
     NULL, NULL, NULL},
    {"/v1/topics", "POST", JSON,
     "create a topic (CreateTopics): 201, 400 bad input, 409 exists, 413 body over 64 KiB", NULL,
     NULL, "{\"name\": T, \"partitions\": N, \"replication_factor\": N, \"configs\": {K: V}}"},
    {"/v1/topics/{topic}/configs", "POST", JSON,
     "change a topic's configs (IncrementalAlterConfigs): 404 unknown topic", NULL, NULL,
     "{K: \"value\" to set, K: null for the default, ...}"},
    {"/v1/topics/{topic}/partitions/{partition}/records", "GET", JSON,
     "records from an offset or a timestamp (a Fetch to the leader): offset, timestamp, key and "
     "value as text (null when not UTF-8) and base64, headers",
     "offset,timestamp,max",
     "the first offset (default: the earliest)|the first record at or after this time (ms)|at "
     "most this many records (1-500, default 50)",
     NULL},
    {"/ui", "GET", "text/html", "the web console (brokers, topics, groups, messages)", NULL, NULL,
     NULL},
    {"/v1/protocol-log", "POST", JSON,
     "log each decoded request and response of one client for a while (broker log, lines "
     "\"protocol {...}\"): ?client_id=ID&address=IP&seconds=N (60)",
     "client_id,address,seconds",
     "only this client id's connections|only connections from this address|for this long "
     "(1-3600, default 60)",
     NULL},
};
const int st_admin_nroutes = (int)(sizeof st_admin_routes / sizeof st_admin_routes[0]);

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
    return st_admin_json_append(json_pack("{s:s,s:s,s:s,s:o}", "service", "strata admin API",
                                          "version", version, "openapi", "/v1/openapi.json",
                                          "endpoints", eps),
                                out);
}

/* The parameters of r: its path's {names}, then its query's names (comma-separated, their
 * summaries separated by '|'). */
static json_t *route_params(const st_admin_route_t *r)
{
    json_t *ps = json_array();
    for (const char *p = strchr(r->path, '{'); ps && p; p = strchr(p + 1, '{')) {
        size_t n = strcspn(p + 1, "}");
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)n, p + 1);
        json_array_append_new(ps, json_pack("{s:s,s:s,s:b,s:{s:s}}", "name", name, "in", "path",
                                            "required", 1, "schema", "type",
                                            strcmp(name, "partition") ? "string" : "integer"));
    }
    const char *q = r->query, *d = r->query_summary;
    while (ps && q && *q) {
        size_t n = strcspn(q, ","), dn = d ? strcspn(d, "|") : 0;
        char name[64], desc[256];
        snprintf(name, sizeof name, "%.*s", (int)n, q);
        snprintf(desc, sizeof desc, "%.*s", (int)dn, d ? d : "");
        json_array_append_new(ps, json_pack("{s:s,s:s,s:b,s:s,s:{s:s}}", "name", name, "in",
                                            "query", "required", 0, "description", desc, "schema",
                                            "type", "string"));
        q += n + (q[n] == ',');
        if (d)
            d += dn + (d[dn] == '|');
    }
    return ps;
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
        if (post || r->query)
            json_object_set_new(resp, "400", json_pack("{s:s}", "description", "bad parameters"));
        if (strchr(r->path, '{'))
            json_object_set_new(resp, "404", json_pack("{s:s}", "description", "no such topic"));
        json_t *op = json_pack("{s:s,s:o}", "summary", r->summary, "responses", resp);
        json_t *params = route_params(r);
        if (json_array_size(params))
            json_object_set_new(op, "parameters", params);
        else
            json_decref(params);
        if (r->body)
            json_object_set_new(op, "requestBody",
                                json_pack("{s:s,s:b,s:{s:{s:{s:s}}}}", "description", r->body,
                                          "required", 1, "content", "application/json", "schema",
                                          "type", "object"));
        json_t *item = json_object_get(paths, r->path); /* GET and POST on one path */
        if (!item) {
            item = json_object();
            json_object_set_new(paths, r->path, item);
        }
        json_object_set_new(item, post ? "post" : "get", op);
    }
    return st_admin_json_append(
        json_pack("{s:s,s:{s:s,s:s,s:s},s:o}", "openapi", "3.0.3", "info", "title",
                  "Strata admin API", "version", version, "description",
                  "A Strata broker's admin HTTP API. With "
                  "admin.require.auth every path but /v1/status/ready needs HTTP basic "
                  "auth with a SCRAM user's password.",
                  "paths", paths),
        out);
}
