/*
 * local.c — the layout of a cluster on this machine, and the admin API's /v1/cluster answer
 * (see local.h).
 */
#include "cli/local.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_cli_local_default(st_cli_local_t *l)
{
    memset(l, 0, sizeof *l);
    l->n = 3;
    snprintf(l->host, sizeof l->host, "%s", ST_CLI_LOCAL_HOST);
    l->kafka_port = ST_CLI_LOCAL_KAFKA_PORT;
    l->admin_port = ST_CLI_LOCAL_ADMIN_PORT;
    snprintf(l->image, sizeof l->image, "%s", ST_CLI_LOCAL_IMAGE);
    snprintf(l->project, sizeof l->project, "%s", ST_CLI_LOCAL_PROJECT);
}

bool st_cli_local_project_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 40 || !isalnum((unsigned char)s[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
            return false;
    return true;
}

int st_cli_local_container(const st_cli_local_t *l, int i, char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s-%d", l->project, i);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int st_cli_local_kafka_port(const st_cli_local_t *l, int i)
{
    return l->kafka_port + 100 * (i - 1);
}

int st_cli_local_ctrl_port(const st_cli_local_t *l, int i)
{
    return st_cli_local_kafka_port(l, i) + 1;
}

int st_cli_local_admin_port(const st_cli_local_t *l, int i)
{
    return l->admin_port + i - 1;
}

int st_cli_local_nvoters(const st_cli_local_t *l)
{
    return l->n < ST_CLI_LOCAL_VOTERS ? l->n : ST_CLI_LOCAL_VOTERS;
}

bool st_cli_local_is_voter(const st_cli_local_t *l, int i)
{
    return i >= 1 && i <= st_cli_local_nvoters(l);
}

int st_cli_local_check(const st_cli_local_t *l, char *err, size_t errlen)
{
    if (l->n < 1 || l->n > ST_CLI_LOCAL_MAX) {
        snprintf(err, errlen, "the number of brokers must be 1..%d, not %d", ST_CLI_LOCAL_MAX,
                 l->n);
        return -1;
    }
    if (!l->host[0]) {
        snprintf(err, errlen, "no host for the listeners");
        return -1;
    }
    int last_ctrl = st_cli_local_ctrl_port(l, l->n);
    if (l->kafka_port < 1 || last_ctrl > 65535) {
        snprintf(err, errlen,
                 "Kafka base port %d does not fit %d broker(s): their ports run to %d (at most "
                 "65535)",
                 l->kafka_port, l->n, last_ctrl);
        return -1;
    }
    int last_admin = st_cli_local_admin_port(l, l->n);
    if (l->admin_port < 1 || last_admin > 65535) {
        snprintf(err, errlen,
                 "admin base port %d does not fit %d broker(s): their ports run to %d (at most "
                 "65535)",
                 l->admin_port, l->n, last_admin);
        return -1;
    }
    for (int i = 1; i <= l->n; i++) {
        int k = st_cli_local_kafka_port(l, i);
        if (k + 1 >= l->admin_port && k <= last_admin) {
            snprintf(err, errlen,
                     "admin ports %d..%d collide with broker %d's Kafka or CONTROLLER port "
                     "(%d, %d): pick another --admin-port",
                     l->admin_port, last_admin, i, k, k + 1);
            return -1;
        }
    }
    return 0;
}

/* snprintf into one setting; -1 when it was cut. */
static int put(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int put(char *dst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, ST_CLI_LOCAL_SETLEN, fmt, ap);
    va_end(ap);
    return n < 0 || n >= ST_CLI_LOCAL_SETLEN ? -1 : 0;
}

int st_cli_local_sets(const st_cli_local_t *l, int i, const char *data_dir,
                      char sets[][ST_CLI_LOCAL_SETLEN])
{
    char voters[ST_CLI_LOCAL_SETLEN] = "";
    size_t used = 0;
    for (int v = 1; v <= st_cli_local_nvoters(l); v++) {
        int n = snprintf(voters + used, sizeof voters - used, "%s%d@%s:%d", v > 1 ? "," : "", v,
                         l->host, st_cli_local_ctrl_port(l, v));
        if (n < 0 || (size_t)n >= sizeof voters - used)
            return -1;
        used += (size_t)n;
    }
    int k = st_cli_local_kafka_port(l, i);
    if (put(sets[0], "node.id=%d", i) ||
        put(sets[1], "process.roles=%s",
            st_cli_local_is_voter(l, i) ? "broker,controller" : "broker") ||
        put(sets[2], "controller.quorum.voters=%s", voters) ||
        put(sets[3], "listeners=PLAINTEXT://%s:%d,CONTROLLER://%s:%d", l->host, k, l->host,
            k + 1) ||
        put(sets[4], "advertised.listeners=PLAINTEXT://%s:%d", l->host, k) ||
        put(sets[5], "controller.listener.names=CONTROLLER") ||
        put(sets[6], "log.dirs=%s", data_dir) ||
        put(sets[7], "admin.listen=%s:%d", l->host, st_cli_local_admin_port(l, i)))
        return -1;
    return ST_CLI_LOCAL_NSETS;
}

int st_cli_local_podman_sets(const st_cli_local_t *l, int i, char sets[][ST_CLI_LOCAL_SETLEN])
{
    char voters[ST_CLI_LOCAL_SETLEN] = "";
    size_t used = 0;
    for (int v = 1; v <= st_cli_local_nvoters(l); v++) {
        int n = snprintf(voters + used, sizeof voters - used, "%s%d@strata-%d:9093",
                         v > 1 ? "," : "", v, v);
        if (n < 0 || (size_t)n >= sizeof voters - used)
            return -1;
        used += (size_t)n;
    }
    if (put(sets[0], "node.id=%d", i) ||
        put(sets[1], "process.roles=%s",
            st_cli_local_is_voter(l, i) ? "broker,controller" : "broker") ||
        put(sets[2], "controller.quorum.voters=%s", voters) ||
        put(sets[3], "listeners=INTERNAL://:9092,EXTERNAL://:9094,CONTROLLER://:9093") ||
        put(sets[4], "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,"
                     "CONTROLLER:PLAINTEXT") ||
        put(sets[5], "advertised.listeners=INTERNAL://strata-%d:9092,EXTERNAL://%s:%d", i, l->host,
            st_cli_local_kafka_port(l, i)) ||
        put(sets[6], "inter.broker.listener.name=INTERNAL") ||
        put(sets[7], "controller.listener.names=CONTROLLER") ||
        put(sets[8], "admin.listen=0.0.0.0:9644") || put(sets[9], "log.dirs=/var/lib/strata"))
        return -1;
    return ST_CLI_LOCAL_PODMAN_NSETS;
}

int st_cli_local_bootstrap(const st_cli_local_t *l, char *buf, size_t len)
{
    size_t used = 0;
    if (len)
        buf[0] = '\0';
    for (int i = 1; i <= l->n; i++) {
        int n = snprintf(buf + used, len - used, "%s%s:%d", i > 1 ? "," : "", l->host,
                         st_cli_local_kafka_port(l, i));
        if (n < 0 || (size_t)n >= len - used)
            return -1;
        used += (size_t)n;
    }
    return 0;
}

int st_cli_local_conf_format(const st_cli_local_t *l, char *buf, size_t len)
{
    int n = snprintf(buf, len, "brokers=%d\nhost=%s\nkafka_port=%d\nadmin_port=%d\n", l->n, l->host,
                     l->kafka_port, l->admin_port);
    if (n < 0 || (size_t)n >= len)
        return -1;
    int m = l->podman ? snprintf(buf + n, len - (size_t)n, "mode=podman\nimage=%s\nproject=%s\n",
                                 l->image, l->project)
                      : snprintf(buf + n, len - (size_t)n, "mode=process\n");
    return m < 0 || (size_t)m >= len - (size_t)n ? -1 : 0;
}

/* A whole decimal number in [lo, hi]; 0 or -1. */
static int parse_int(const char *s, int lo, int hi, int *out)
{
    int64_t v;
    if (st_cli_parse_i64(s, &v) < 0 || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

int st_cli_local_conf_parse(const char *text, st_cli_local_t *l, char *err, size_t errlen)
{
    st_cli_local_default(l);
    int lineno = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        lineno++;
        char line[320];
        if (n >= sizeof line) {
            snprintf(err, errlen, "line %d is too long", lineno);
            return -1;
        }
        memcpy(line, p, n);
        line[n] = '\0';
        p += n + (nl ? 1 : 0);
        if (!line[0] || line[0] == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            snprintf(err, errlen, "line %d: want key=value, not '%s'", lineno, line);
            return -1;
        }
        *eq = '\0';
        const char *key = line, *val = eq + 1;
        int bad = 0;
        if (!strcmp(key, "brokers"))
            bad = parse_int(val, 1, ST_CLI_LOCAL_MAX, &l->n);
        else if (!strcmp(key, "kafka_port"))
            bad = parse_int(val, 1, 65535, &l->kafka_port);
        else if (!strcmp(key, "admin_port"))
            bad = parse_int(val, 1, 65535, &l->admin_port);
        else if (!strcmp(key, "mode")) {
            if (!strcmp(val, "podman"))
                l->podman = true;
            else if (!strcmp(val, "process"))
                l->podman = false;
            else
                bad = -1;
        } else if (!strcmp(key, "image")) {
            if (!*val || strlen(val) >= sizeof l->image)
                bad = -1;
            else
                snprintf(l->image, sizeof l->image, "%s", val);
        } else if (!strcmp(key, "project")) {
            if (!st_cli_local_project_ok(val))
                bad = -1;
            else
                snprintf(l->project, sizeof l->project, "%s", val);
        } else if (!strcmp(key, "host")) {
            if (!*val || strlen(val) >= sizeof l->host)
                bad = -1;
            else
                snprintf(l->host, sizeof l->host, "%s", val);
        }
        if (bad) {
            snprintf(err, errlen, "line %d: bad %s '%s'", lineno, key, val);
            return -1;
        }
    }
    return st_cli_local_check(l, err, errlen);
}

int st_cli_local_split_words(char *s, st_cli_strlist_t *out)
{
    char *save = NULL;
    for (char *w = strtok_r(s, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save))
        if (st_cli_strlist_push(out, w) < 0)
            return -ENOMEM;
    return 0;
}

int st_cli_view_parse(const char *body, size_t len, st_cli_view_t *v, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    v->controller_id = -1;
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je);
    if (!json_is_object(j)) {
        snprintf(err, errlen, "not a JSON object (%s)", j ? "another JSON value" : je.text);
        json_decref(j);
        return -1;
    }
    json_t *node = json_object_get(j, "node_id");
    json_t *brokers = json_object_get(j, "brokers");
    if (!json_is_integer(node) || !json_is_array(brokers)) {
        snprintf(err, errlen, "no node_id or brokers in the answer");
        json_decref(j);
        return -1;
    }
    v->node_id = (int32_t)json_integer_value(node);
    json_t *ctrl = json_object_get(j, "controller_id");
    v->controller_id = json_is_integer(ctrl) ? (int32_t)json_integer_value(ctrl) : -1;
    v->ready = json_is_true(json_object_get(j, "ready"));
    size_t i;
    json_t *b;
    json_array_foreach(brokers, i, b)
    {
        json_t *id = json_object_get(b, "node_id");
        if (!json_is_integer(id) || v->nbrokers == ST_CLI_VIEW_MAX)
            continue;
        st_cli_view_broker_t *vb = &v->brokers[v->nbrokers++];
        vb->id = (int32_t)json_integer_value(id);
        vb->fenced = json_is_true(json_object_get(b, "fenced"));
        json_t *port = json_object_get(b, "port");
        vb->port = json_is_integer(port) ? (int)json_integer_value(port) : 0;
    }
    json_decref(j);
    return 0;
}

st_cli_reg_t st_cli_view_reg(const st_cli_view_t *v, int32_t id)
{
    for (int i = 0; i < v->nbrokers; i++)
        if (v->brokers[i].id == id)
            return v->brokers[i].fenced ? ST_CLI_REG_FENCED : ST_CLI_REG_UNFENCED;
    return ST_CLI_REG_NONE;
}

bool st_cli_view_complete(const st_cli_view_t *v, int n)
{
    if (!v->ready || v->controller_id < 0)
        return false;
    for (int i = 1; i <= n; i++)
        if (st_cli_view_reg(v, i) != ST_CLI_REG_UNFENCED)
            return false;
    return true;
}

const char *st_cli_reg_name(st_cli_reg_t r)
{
    switch (r) {
    case ST_CLI_REG_FENCED:
        return "fenced";
    case ST_CLI_REG_UNFENCED:
        return "unfenced";
    case ST_CLI_REG_NONE:
        break;
    }
    return "not registered";
}
