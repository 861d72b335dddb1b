/* config.c — the broker's settings table, properties file and --set parsing. */
#include "cluster/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <ini.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth/oauth.h"
#include "base/err.h"
#include "base/log.h"

enum {
    ST_CFG_STR = ST_CONFIG_TYPE_STR,
    ST_CFG_INT = ST_CONFIG_TYPE_INT,
    ST_CFG_BOOL = ST_CONFIG_TYPE_BOOL
};

typedef struct {
    const char *key;
    int type;
    const char *def;
    int64_t min, max;
    const char *help;
    size_t off;
} st_cfg_desc_t;

static const st_cfg_desc_t st_cfg_table[] = {
#define ST_CFG_DESC(field, key, type, def, min, max, help)                                         \
    {key, ST_CFG_##type, def, (int64_t)(min), (int64_t)(max), help, offsetof(st_config_t, field)},
    ST_CONFIG_KEYS(ST_CFG_DESC)
#undef ST_CFG_DESC
};
#define ST_CFG_N (sizeof st_cfg_table / sizeof st_cfg_table[0])

__attribute__((format(printf, 3, 4))) static int st_cfg_fail(char *err, size_t errlen,
                                                             const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return ST_E_CONFIG;
}

/* value parsed as d's type and checked against its bounds: 0 (*num, *flag set for INT and
 * BOOL), or ST_E_CONFIG with one line in err. */
static int cfg_parse(const st_cfg_desc_t *d, const char *value, int64_t *num, bool *flag, char *err,
                     size_t errlen)
{
    if (d->type == ST_CFG_STR)
        return 0;
    if (d->type == ST_CFG_BOOL) {
        if (strcasecmp(value, "true") == 0)
            *flag = true;
        else if (strcasecmp(value, "false") == 0)
            *flag = false;
        else
            return st_cfg_fail(err, errlen, "bad value for %s: '%s' (expected true or false)",
                               d->key, value);
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno || end == value || *end)
        return st_cfg_fail(err, errlen, "bad value for %s: '%s' (expected an integer)", d->key,
                           value);
    if (v < d->min || v > d->max)
        return st_cfg_fail(err, errlen, "bad value for %s: %lld (allowed %lld..%lld)", d->key, v,
                           (long long)d->min, (long long)d->max);
    *num = v;
    return 0;
}

static const st_cfg_desc_t *cfg_find(const char *key)
{
    for (size_t i = 0; i < ST_CFG_N; i++)
        if (strcmp(st_cfg_table[i].key, key) == 0)
            return &st_cfg_table[i];
    return NULL;
}

int st_config_set(st_config_t *c, const char *key, const char *value, char *err, size_t errlen)
{
    return st_config_set_from(c, key, value, ST_CONFIG_SRC_SET, err, errlen);
}

int st_config_set_from(st_config_t *c, const char *key, const char *value, st_config_source_t src,
                       char *err, size_t errlen)
{
    const st_cfg_desc_t *d = cfg_find(key);
    if (d) {
        void *p = (char *)c + d->off;
        int64_t num = 0;
        bool flag = false;
        int rc = cfg_parse(d, value, &num, &flag, err, errlen);
        if (rc)
            return rc;
        c->source[d - st_cfg_table] = (uint8_t)src;
        if (d->type == ST_CFG_STR) {
            char *v = strdup(value);
            if (!v)
                return -ENOMEM;
            free(*(char **)p);
            *(char **)p = v;
        } else if (d->type == ST_CFG_BOOL) {
            *(bool *)p = flag;
        } else {
            *(int64_t *)p = num;
        }
        return 0;
    }
    /* listener.name.<name>.ssl.*: a per-listener value of a global ssl.* setting;
     * listener.name.<name>.<mechanism>.sasl.jaas.config: the credentials the inter-broker
     * client uses on that listener (Kafka's form). */
    const char *pre = "listener.name.";
    size_t pl = strlen(pre);
    const char *dot = strncmp(key, pre, pl) == 0 ? strchr(key + pl, '.') : NULL;
    bool jaas = false, reauth = false;
    if (dot && dot > key + pl) {
        static const char *const mechs[] = {"plain.", "scram-sha-256.", "scram-sha-512.",
                                            "oauthbearer."};
        for (size_t i = 0; i < 4 && !jaas && !reauth; i++) {
            if (strncasecmp(dot + 1, mechs[i], strlen(mechs[i])) != 0)
                continue;
            const char *rest = dot + 1 + strlen(mechs[i]);
            jaas = i < 3 && strcmp(rest, "sasl.jaas.config") == 0;
            reauth = strcmp(rest, "connections.max.reauth.ms") == 0;
        }
    }
    if (reauth) {
        /* listener.name.<name>.<mechanism>.connections.max.reauth.ms: an integer kept as
         * text with the other overrides (st_config_reauth_ms reads it) */
        char *end;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (errno || end == value || *end || v < 0)
            return st_cfg_fail(err, errlen, "bad value for %s: '%s' (expected an integer >= 0)",
                               key, value);
    }
    if (dot && dot > key + pl && (jaas || reauth || strncmp(dot + 1, "ssl.", 4) == 0)) {
        bool known = jaas || reauth;
        for (size_t i = 0; i < ST_CFG_N && !known; i++)
            known = strcmp(st_cfg_table[i].key, dot + 1) == 0 && st_cfg_table[i].type == ST_CFG_STR;
        if (!known)
            return st_cfg_fail(err, errlen, "unknown setting '%s' (%s is not a listener setting)",
                               key, dot + 1);
        for (int i = 0; i < c->nlistener_overrides; i++)
            if (strcasecmp(c->listener_overrides[i].key, key) == 0) {
                char *v = strdup(value);
                if (!v)
                    return -ENOMEM;
                free(c->listener_overrides[i].value);
                c->listener_overrides[i].value = v;
                c->listener_overrides[i].source = src;
                return 0;
            }
        struct st_config_override *o =
            realloc(c->listener_overrides, (size_t)(c->nlistener_overrides + 1) * sizeof *o);
        if (!o)
            return -ENOMEM;
        c->listener_overrides = o;
        o[c->nlistener_overrides].key = strdup(key);
        o[c->nlistener_overrides].value = strdup(value);
        o[c->nlistener_overrides].source = src;
        if (!o[c->nlistener_overrides].key || !o[c->nlistener_overrides].value) {
            free(o[c->nlistener_overrides].key);
            free(o[c->nlistener_overrides].value);
            return -ENOMEM;
        }
        c->nlistener_overrides++;
        return 0;
    }
    return st_cfg_fail(err, errlen, "unknown setting '%s' (see strata-server --help)", key);
}

const char *st_config_listener_get(const st_config_t *c, const char *listener, const char *key)
{
    char full[256];
    snprintf(full, sizeof full, "listener.name.%s.%s", listener, key);
    for (int i = 0; i < c->nlistener_overrides; i++)
        if (strcasecmp(c->listener_overrides[i].key, full) == 0)
            return c->listener_overrides[i].value;
    for (size_t i = 0; i < ST_CFG_N; i++)
        if (strcmp(st_cfg_table[i].key, key) == 0 && st_cfg_table[i].type == ST_CFG_STR)
            return *(char *const *)((const char *)c + st_cfg_table[i].off);
    return "";
}

const char *st_config_lookup(void *arg, const char *key)
{
    st_config_lookup_t *l = arg;
    /* KIP-684: a SASL_SSL listener asks for client certificates only when its own
     * listener.name.<name>.ssl.client.auth says so; the broker-wide ssl.client.auth is for SSL
     * listeners (SASL authenticates those clients). */
    if (strcmp(key, "ssl.client.auth") == 0) {
        char full[256];
        snprintf(full, sizeof full, "listener.name.%s.%s", l->listener, key);
        bool own = false;
        for (int i = 0; i < l->cfg->nlistener_overrides && !own; i++)
            own = strcasecmp(l->cfg->listener_overrides[i].key, full) == 0;
        for (int i = 0; i < l->cfg->nkafka_listeners && !own; i++)
            if (strcasecmp(l->cfg->kafka_listeners[i].name, l->listener) == 0 &&
                l->cfg->kafka_listeners[i].protocol == ST_SEC_SASL_SSL)
                return "none";
    }
    /* listener.name.<l>.* overrides are string settings only (st_config_set) */
    for (size_t i = 0; i < ST_CFG_N; i++)
        if (strcmp(st_cfg_table[i].key, key) == 0 && st_cfg_table[i].type == ST_CFG_INT) {
            snprintf(l->num, sizeof l->num, "%" PRId64,
                     *(const int64_t *)((const char *)l->cfg + st_cfg_table[i].off));
            return l->num;
        }
    return st_config_listener_get(l->cfg, l->listener, key);
}

int st_config_init(st_config_t *c)
{
    memset(c, 0, sizeof *c);
    char err[256];
    for (size_t i = 0; i < ST_CFG_N; i++) {
        int rc = st_config_set_from(c, st_cfg_table[i].key, st_cfg_table[i].def,
                                    ST_CONFIG_SRC_DEFAULT, err, sizeof err);
        if (rc)
            return rc;
    }
    return 0;
}

int st_config_nkeys(void)
{
    return (int)ST_CFG_N;
}

const char *st_config_key(int i, int *type, const char **help)
{
    if (i < 0 || i >= (int)ST_CFG_N)
        return NULL;
    if (type)
        *type = st_cfg_table[i].type;
    if (help)
        *help = st_cfg_table[i].help;
    return st_cfg_table[i].key;
}

const char *st_config_get(const st_config_t *c, const char *key, char *buf, size_t n, bool *given)
{
    const st_cfg_desc_t *d = cfg_find(key);
    if (!d)
        return NULL;
    if (given)
        *given = c->source[d - st_cfg_table] != ST_CONFIG_SRC_DEFAULT;
    const void *p = (const char *)c + d->off;
    if (d->type == ST_CFG_STR)
        return *(char *const *)p ? *(char *const *)p : "";
    if (d->type == ST_CFG_BOOL)
        return *(const bool *)p ? "true" : "false";
    snprintf(buf, n, "%" PRId64, *(const int64_t *)p);
    return buf;
}

int st_config_check(const char *key, const char *value, char *err, size_t errlen)
{
    const st_cfg_desc_t *d = cfg_find(key);
    if (!d) {
        snprintf(err, errlen, "unknown setting %s", key);
        return ST_E_NOT_FOUND;
    }
    int64_t num;
    bool flag;
    return cfg_parse(d, value, &num, &flag, err, errlen);
}

void st_config_fini(st_config_t *c)
{
    for (int i = 0; i < c->nlistener_overrides; i++) {
        free(c->listener_overrides[i].key);
        free(c->listener_overrides[i].value);
    }
    free(c->listener_overrides);
    c->listener_overrides = NULL;
    free(c->config_file);
    c->config_file = NULL;
    c->nlistener_overrides = 0;
    for (size_t i = 0; i < ST_CFG_N; i++)
        if (st_cfg_table[i].type == ST_CFG_STR) {
            char **p = (char **)((char *)c + st_cfg_table[i].off);
            free(*p);
            *p = NULL;
        }
}

typedef struct {
    st_config_t *c;
    char *err;
    size_t errlen;
    int rc;
} st_cfg_load_t;

static int st_cfg_ini_cb(void *user, const char *section, const char *name, const char *value)
{
    st_cfg_load_t *l = user;
    (void)section;
    if (l->rc)
        return 0;
    l->rc = st_config_set_from(l->c, name, value, ST_CONFIG_SRC_FILE, l->err, l->errlen);
    return l->rc == 0;
}

int st_config_load(st_config_t *c, const char *path, char *err, size_t errlen)
{
    st_cfg_load_t l = {c, err, errlen, 0};
    char *name = strdup(path);
    if (!name)
        return -ENOMEM;
    free(c->config_file);
    c->config_file = name;
    int rc = ini_parse(path, st_cfg_ini_cb, &l);
    if (rc == -1) {
        snprintf(err, errlen, "cannot open config file %s: %s", path, strerror(errno));
        return ST_E_CONFIG;
    }
    if (l.rc)
        return l.rc;
    if (rc > 0) {
        snprintf(err, errlen, "%s:%d: cannot parse line (expected key=value)", path, rc);
        return ST_E_CONFIG;
    }
    return 0;
}

int st_parse_hostport(const char *s, char *host, size_t hostlen, int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= hostlen)
        return ST_E_INVALID;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end || p < 0 || p > 65535)
        return ST_E_INVALID;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = 0;
    *port = (int)p;
    return 0;
}

/* Finds the listener named `name` ("NAME://host:port") in a comma-separated list. Returns 1
 * and fills host and port when found, 0 when absent, ST_E_CONFIG on a malformed entry. */
static int st_find_listener(const char *key, const char *list, const char *name, char *host,
                            size_t hostlen, int *port, char *err, size_t errlen)
{
    int found = 0;
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return -ENOMEM;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        char *sep = strstr(tok, "://");
        char h[256];
        int pt;
        if (!sep || sep == tok || st_parse_hostport(sep + 3, h, sizeof h, &pt)) {
            st_cfg_fail(err, errlen, "bad value for %s: '%s' (expected NAME://host:port,...)", key,
                        list);
            free(copy);
            return ST_E_CONFIG;
        }
        if ((size_t)(sep - tok) == strlen(name) && strncasecmp(tok, name, strlen(name)) == 0) {
            snprintf(host, hostlen, "%s", h);
            *port = pt;
            found = 1;
        }
    }
    free(copy);
    return found;
}

static int st_map_protocol(const st_config_t *c, const char *name, size_t len,
                           st_sec_protocol_t *out, char *err, size_t errlen);

/* Parses controller.quorum.voters ("id@host:port,...") into c->voters. */
static int st_parse_voters(st_config_t *c, char *err, size_t errlen)
{
    char *copy = strdup(c->controller_quorum_voters), *save = NULL;
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    c->nvoters = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        char *at = strchr(tok, '@'), *end;
        long id = at ? strtol(tok, &end, 10) : -1;
        struct st_config_voter v = {0};
        if (!at || end != at || id < 1 || id > INT32_MAX ||
            st_parse_hostport(at + 1, v.host, sizeof v.host, &v.port) || v.port == 0) {
            rc = st_cfg_fail(err, errlen,
                             "bad value for controller.quorum.voters: '%s' (expected "
                             "id@host:port,... with ids from 1)",
                             tok);
            break;
        }
        v.id = (int32_t)id;
        for (int i = 0; i < c->nvoters; i++)
            if (c->voters[i].id == v.id)
                rc = st_cfg_fail(err, errlen, "controller.quorum.voters names node %d twice",
                                 (int)v.id);
        if (!rc && c->nvoters == (int)(sizeof c->voters / sizeof c->voters[0]))
            rc = st_cfg_fail(err, errlen, "controller.quorum.voters: at most %d voters",
                             (int)(sizeof c->voters / sizeof c->voters[0]));
        if (!rc)
            c->voters[c->nvoters++] = v;
    }
    free(copy);
    if (!rc && c->nvoters == 0)
        rc = st_cfg_fail(err, errlen, "controller.quorum.voters is empty");
    return rc;
}

/* The cluster settings: roles, voters, the CONTROLLER listener. */
static int st_config_cluster(st_config_t *c, char *err, size_t errlen)
{
    bool broker = false, controller = false;
    char *copy = strdup(c->process_roles), *save = NULL;
    if (!copy)
        return -ENOMEM;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        if (strcasecmp(tok, "broker") == 0)
            broker = true;
        else if (strcasecmp(tok, "controller") == 0)
            controller = true;
        else {
            free(copy);
            return st_cfg_fail(err, errlen,
                               "bad value for process.roles: '%s' (broker,controller or broker)",
                               c->process_roles);
        }
    }
    free(copy);
    if (!broker)
        return st_cfg_fail(err, errlen,
                           "process.roles=%s: a dedicated controller is not supported; use "
                           "broker,controller",
                           c->process_roles);
    c->role_controller = controller;
    int rc = st_find_listener("listeners", c->listeners, c->controller_listener_names,
                              c->controller_host, sizeof c->controller_host, &c->controller_port,
                              err, errlen);
    if (rc < 0)
        return rc;
    if (!*c->controller_quorum_voters) {
        /* No voters: this node is the only voter of its own quorum, which nothing on the
         * network reaches (cluster/quorum.h: a local quorum). */
        c->quorum_local = true;
        c->role_controller = true;
        c->nvoters = 1;
        c->voters[0].id = (int32_t)c->node_id;
        snprintf(c->voters[0].host, sizeof c->voters[0].host, "local");
        c->voters[0].port = 0;
        return 0;
    }
    if (strchr(c->controller_listener_names, ','))
        return st_cfg_fail(err, errlen, "controller.listener.names: one listener name only");
    /* The quorum's security (cluster/tls_transport.h); a name the map leaves out stays
     * PLAINTEXT, as before the quorum had any. */
    c->controller_protocol = ST_SEC_PLAINTEXT;
    rc = st_map_protocol(c, c->controller_listener_names, strlen(c->controller_listener_names),
                         &c->controller_protocol, err, errlen);
    if (rc < 0)
        return rc;
    if (c->controller_protocol == ST_SEC_SASL_PLAINTEXT)
        return st_cfg_fail(err, errlen,
                           "listener.security.protocol.map: the controller listener %s cannot "
                           "be SASL_PLAINTEXT (PLAINTEXT, SSL or SASL_SSL)",
                           c->controller_listener_names);
    rc = st_parse_voters(c, err, errlen);
    if (rc)
        return rc;
    if (c->node_id < 1)
        return st_cfg_fail(err, errlen, "node.id must be 1 or more in a cluster (got %lld)",
                           (long long)c->node_id);
    if (!c->controller_port)
        return st_cfg_fail(err, errlen,
                           "listeners has no %s:// listener: a cluster member needs one for the "
                           "metadata quorum",
                           c->controller_listener_names);
    const struct st_config_voter *me = NULL;
    for (int i = 0; i < c->nvoters; i++)
        if (c->voters[i].id == c->node_id)
            me = &c->voters[i];
    if (controller && !me)
        return st_cfg_fail(err, errlen,
                           "node.id=%lld has the controller role but is not among "
                           "controller.quorum.voters (%s)",
                           (long long)c->node_id, c->controller_quorum_voters);
    if (!controller && me)
        return st_cfg_fail(err, errlen,
                           "node.id=%lld is in controller.quorum.voters but process.roles=%s has "
                           "no controller role",
                           (long long)c->node_id, c->process_roles);
    if (me && me->port != c->controller_port)
        return st_cfg_fail(err, errlen,
                           "node.id=%lld: controller.quorum.voters says port %d, the %s listener "
                           "port %d",
                           (long long)c->node_id, me->port, c->controller_listener_names,
                           c->controller_port);
    if (c->controller_port == c->listen_port)
        return st_cfg_fail(err, errlen, "the %s listener and the Kafka listener share port %d",
                           c->controller_listener_names, c->listen_port);
    return 0;
}

/* ---- listeners ---- */

/* The security protocol the map gives listener `name` (len bytes): 0, 1 if the map does not
 * name it, ST_E_CONFIG on a malformed map. */
static int st_map_protocol(const st_config_t *c, const char *name, size_t len,
                           st_sec_protocol_t *out, char *err, size_t errlen)
{
    const char *key = "listener.security.protocol.map";
    int rc = 1;
    char *copy = strdup(c->listener_security_protocol_map), *save = NULL;
    if (!copy)
        return -ENOMEM;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        char *colon = strchr(tok, ':');
        st_sec_protocol_t p;
        if (!colon || colon == tok || st_sec_protocol_parse(colon + 1, strlen(colon + 1), &p)) {
            rc = st_cfg_fail(err, errlen,
                             "bad value for %s: '%s' (expected NAME:PROTOCOL,... with PLAINTEXT, "
                             "SSL, SASL_PLAINTEXT or SASL_SSL)",
                             key, tok);
            break;
        }
        if ((size_t)(colon - tok) == len && strncasecmp(tok, name, len) == 0) {
            *out = p;
            rc = 0;
        }
    }
    free(copy);
    return rc;
}

/* Whether name is one of the comma-separated names of list (case-insensitive). */
static bool st_name_in_list(const char *name, const char *list)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t k = strcspn(p, ", ");
        if (k == n && k > 0 && strncasecmp(p, name, n) == 0)
            return true;
        p += k;
    }
    return false;
}

/* Finds the Kafka listener called name (case-insensitive): its index, or -1. */
static int st_kafka_listener(const st_config_t *c, const char *name, size_t len)
{
    for (int i = 0; i < c->nkafka_listeners; i++)
        if (strlen(c->kafka_listeners[i].name) == len &&
            strncasecmp(c->kafka_listeners[i].name, name, len) == 0)
            return i;
    return -1;
}

/* Parses listeners (every entry but the controller's is a Kafka listener),
 * listener.security.protocol.map, advertised.listeners and inter.broker.listener.name into
 * kafka_listeners and the inter-broker listener's listen_* and advertised_* fields. */
static int st_config_listeners(st_config_t *c, char *err, size_t errlen)
{
    c->nkafka_listeners = 0;
    char *copy = strdup(c->listeners), *save = NULL;
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        char *sep = strstr(tok, "://");
        st_listener_t l = {0};
        size_t nlen = sep ? (size_t)(sep - tok) : 0;
        if (!sep || nlen == 0 || nlen >= sizeof l.name ||
            st_parse_hostport(sep + 3, l.host, sizeof l.host, &l.port)) {
            rc = st_cfg_fail(err, errlen,
                             "bad value for listeners: '%s' (expected NAME://host:port,...)",
                             c->listeners);
            break;
        }
        for (size_t i = 0; i < nlen; i++)
            l.name[i] = (char)toupper((unsigned char)tok[i]);
        if (st_name_in_list(l.name, c->controller_listener_names))
            continue; /* the metadata quorum's (st_config_cluster) */
        if (st_kafka_listener(c, l.name, nlen) >= 0) {
            rc = st_cfg_fail(err, errlen, "listeners names %s twice", l.name);
            break;
        }
        rc = st_map_protocol(c, l.name, nlen, &l.protocol, err, errlen);
        if (rc == 1)
            rc = st_cfg_fail(err, errlen,
                             "listeners: listener %s has no security protocol in "
                             "listener.security.protocol.map (%s)",
                             l.name, c->listener_security_protocol_map);
        if (rc)
            break;
        for (int i = 0; i < c->nkafka_listeners && !rc; i++)
            if (l.port != 0 && c->kafka_listeners[i].port == l.port)
                rc = st_cfg_fail(err, errlen, "listeners %s and %s share port %d",
                                 c->kafka_listeners[i].name, l.name, l.port);
        if (!rc && c->nkafka_listeners == ST_CONFIG_MAX_LISTENERS)
            rc = st_cfg_fail(err, errlen, "listeners: at most %d Kafka listeners",
                             ST_CONFIG_MAX_LISTENERS);
        if (rc)
            break;
        /* Advertised by default at its own address; every interface: the loopback one. */
        const char *h = *l.host && strcmp(l.host, "0.0.0.0") != 0 ? l.host : "127.0.0.1";
        snprintf(l.adv_host, sizeof l.adv_host, "%s", h);
        l.adv_port = l.port;
        c->kafka_listeners[c->nkafka_listeners++] = l;
    }
    free(copy);
    if (rc)
        return rc;
    if (c->nkafka_listeners == 0)
        return st_cfg_fail(err, errlen,
                           "bad value for listeners: '%s' (no Kafka listener: "
                           "PLAINTEXT://host:port)",
                           c->listeners);
    copy = strdup(c->advertised_listeners);
    if (!copy)
        return -ENOMEM;
    save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        char *sep = strstr(tok, "://"), h[256];
        int pt, i = sep ? st_kafka_listener(c, tok, (size_t)(sep - tok)) : -1;
        if (!sep || sep == tok || st_parse_hostport(sep + 3, h, sizeof h, &pt))
            rc = st_cfg_fail(err, errlen,
                             "bad value for advertised.listeners: '%s' (expected "
                             "NAME://host:port,...)",
                             c->advertised_listeners);
        else if (i < 0)
            rc = st_cfg_fail(err, errlen,
                             "advertised.listeners: '%.*s' is not a Kafka listener of listeners "
                             "(%s)",
                             (int)(sep - tok), tok, c->listeners);
        else {
            snprintf(c->kafka_listeners[i].adv_host, sizeof c->kafka_listeners[i].adv_host, "%s",
                     h);
            c->kafka_listeners[i].adv_port = pt;
        }
    }
    free(copy);
    if (rc)
        return rc;
    const char *ib = c->inter_broker_listener_name;
    c->inter_broker_listener = 0;
    if (*ib) {
        c->inter_broker_listener = st_kafka_listener(c, ib, strlen(ib));
        if (c->inter_broker_listener < 0)
            return st_cfg_fail(err, errlen,
                               "inter.broker.listener.name=%s is not a Kafka listener of "
                               "listeners (%s)",
                               ib, c->listeners);
    } else if (st_kafka_listener(c, "PLAINTEXT", 9) >= 0) {
        c->inter_broker_listener = st_kafka_listener(c, "PLAINTEXT", 9);
    }
    const st_listener_t *l = &c->kafka_listeners[c->inter_broker_listener];
    snprintf(c->listen_host, sizeof c->listen_host, "%s", l->host);
    c->listen_port = l->port;
    snprintf(c->advertised_host, sizeof c->advertised_host, "%s", l->adv_host);
    c->advertised_port = l->adv_port;
    return 0;
}

/* OAUTHBEARER's validator: a key set (sasl.oauthbearer.jwks.endpoint.url, a file: URL whose
 * file must load now) or, stated on purpose, unsecured tokens; one of the two when the
 * mechanism is enabled. */
static int st_config_oauthbearer(st_config_t *c, char *err, size_t errlen)
{
    const char *url = c->sasl_oauthbearer_jwks_endpoint_url;
    if (*url && c->sasl_oauthbearer_unsecured_validator_enable)
        return st_cfg_fail(err, errlen,
                           "sasl.oauthbearer.jwks.endpoint.url and "
                           "sasl.oauthbearer.unsecured.validator.enable=true: choose one");
    if (*url) {
        char path[1024], why[256];
        if (st_oauth_file_url_path(url, path, sizeof path))
            return st_cfg_fail(err, errlen,
                               "sasl.oauthbearer.jwks.endpoint.url=%s: only file: URLs of this "
                               "host are supported (file:/path/to/jwks.json)",
                               url);
        st_jwks_t *k = NULL;
        if (st_jwks_load(path, &k, why, sizeof why))
            return st_cfg_fail(err, errlen, "sasl.oauthbearer.jwks.endpoint.url: %s", why);
        st_jwks_free(k);
    } else if ((c->sasl_mechanisms & ST_SASL_OAUTHBEARER) &&
               !c->sasl_oauthbearer_unsecured_validator_enable) {
        return st_cfg_fail(err, errlen,
                           "sasl.enabled.mechanisms has OAUTHBEARER: set "
                           "sasl.oauthbearer.jwks.endpoint.url (signed tokens) or "
                           "sasl.oauthbearer.unsecured.validator.enable=true (unsigned ones, "
                           "for tests)");
    }
    return 0;
}

int64_t st_config_reauth_ms(const st_config_t *c, const char *listener, const char *mechanism)
{
    char lname[ST_LISTENER_NAME_MAX], key[96];
    size_t i = 0;
    for (; listener[i] && i + 1 < sizeof lname; i++)
        lname[i] = (char)tolower((unsigned char)listener[i]);
    lname[i] = 0;
    snprintf(key, sizeof key, "%s.connections.max.reauth.ms", mechanism);
    for (i = 0; key[i]; i++)
        key[i] = (char)tolower((unsigned char)key[i]);
    const char *v = st_config_listener_get(c, lname, key);
    return *v ? strtoll(v, NULL, 10) : c->connections_max_reauth_ms;
}

/* sasl.enabled.mechanisms into bits; sasl.bootstrap.users checked for shape (the Kafka layer
 * creates them: kafka/h_sasl.c); in a cluster whose inter-broker listener is SASL_*, the
 * mechanism brokers use with each other and their credentials. */
static int st_config_sasl(st_config_t *c, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        unsigned bit;
    } mechs[] = {{"PLAIN", ST_SASL_PLAIN},
                 {"SCRAM-SHA-256", ST_SASL_SCRAM_SHA_256},
                 {"SCRAM-SHA-512", ST_SASL_SCRAM_SHA_512},
                 {"OAUTHBEARER", ST_SASL_OAUTHBEARER}};
    char *copy = strdup(c->sasl_enabled_mechanisms), *save = NULL;
    if (!copy)
        return -ENOMEM;
    int rc = 0;
    c->sasl_mechanisms = 0;
    for (char *tok = strtok_r(copy, ", ", &save); tok && !rc; tok = strtok_r(NULL, ", ", &save)) {
        unsigned bit = 0;
        for (size_t i = 0; i < sizeof mechs / sizeof mechs[0]; i++)
            if (strcasecmp(tok, mechs[i].name) == 0)
                bit = mechs[i].bit;
        if (!bit)
            rc = st_cfg_fail(err, errlen,
                             "sasl.enabled.mechanisms: '%s' is not one of PLAIN, SCRAM-SHA-256, "
                             "SCRAM-SHA-512, OAUTHBEARER",
                             tok);
        c->sasl_mechanisms |= bit;
    }
    free(copy);
    if (rc)
        return rc;
    copy = strdup(c->sasl_bootstrap_users);
    if (!copy)
        return -ENOMEM;
    save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save)) {
        char *m = strchr(tok, ':'), *pw = m ? strchr(m + 1, ':') : NULL;
        if (!m || m == tok || !pw || !pw[1] ||
            ((size_t)(pw - m - 1) != 13 || (strncmp(m + 1, "SCRAM-SHA-256", 13) != 0 &&
                                            strncmp(m + 1, "SCRAM-SHA-512", 13) != 0)))
            rc = st_cfg_fail(err, errlen,
                             "bad entry in sasl.bootstrap.users (expected "
                             "user:SCRAM-SHA-256:password or user:SCRAM-SHA-512:password)");
    }
    free(copy);
    if (rc)
        return rc;
    rc = st_config_oauthbearer(c, err, errlen);
    if (rc)
        return rc;
    const st_listener_t *ib = &c->kafka_listeners[c->inter_broker_listener];
    if (c->quorum_local || !st_sec_protocol_sasl(ib->protocol))
        return 0;
    /* Brokers authenticate to each other's inter-broker listener: with a mechanism it offers
     * and credentials (st_config_inter_broker_credentials). */
    unsigned ibm = 0;
    for (size_t i = 0; i < sizeof mechs / sizeof mechs[0] && mechs[i].bit != ST_SASL_OAUTHBEARER;
         i++)
        if (strcasecmp(c->sasl_mechanism_inter_broker_protocol, mechs[i].name) == 0)
            ibm = mechs[i].bit;
    if (!ibm)
        return st_cfg_fail(err, errlen,
                           "sasl.mechanism.inter.broker.protocol: '%s' is not one of PLAIN, "
                           "SCRAM-SHA-256, SCRAM-SHA-512",
                           c->sasl_mechanism_inter_broker_protocol);
    if (!(c->sasl_mechanisms & ibm))
        return st_cfg_fail(err, errlen,
                           "sasl.mechanism.inter.broker.protocol=%s is not in "
                           "sasl.enabled.mechanisms (%s)",
                           c->sasl_mechanism_inter_broker_protocol, c->sasl_enabled_mechanisms);
    char u[256], p[256];
    return st_config_inter_broker_credentials(c, u, sizeof u, p, sizeof p, err, errlen);
}

/* The value of `name`= in a JAAS string (quoted, with \ escapes, or a bare word) into out:
 * 0, or -1 when absent or too long. */
static int st_jaas_value(const char *jaas, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    for (const char *p = jaas; (p = strstr(p, name)) != NULL; p += nl) {
        if (p > jaas && (isalnum((unsigned char)p[-1]) || p[-1] == '.' || p[-1] == '_'))
            continue;
        const char *v = p + nl;
        while (*v == ' ' || *v == '\t')
            v++;
        if (*v != '=')
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t o = 0;
        if (*v == '"') {
            for (v++; *v && *v != '"'; v++) {
                if (*v == '\\' && v[1])
                    v++;
                if (o + 1 >= outlen)
                    return -1;
                out[o++] = *v;
            }
            if (*v != '"')
                return -1;
        } else {
            for (; *v && *v != ' ' && *v != ';' && *v != '\t'; v++) {
                if (o + 1 >= outlen)
                    return -1;
                out[o++] = *v;
            }
        }
        out[o] = 0;
        return 0;
    }
    return -1;
}

int st_config_inter_broker_credentials(const st_config_t *c, char *user, size_t ulen, char *pass,
                                       size_t plen, char *err, size_t errlen)
{
    const st_listener_t *ib = &c->kafka_listeners[c->inter_broker_listener];
    char lname[ST_LISTENER_NAME_MAX], key[96];
    size_t i = 0;
    for (; ib->name[i] && i + 1 < sizeof lname; i++)
        lname[i] = (char)tolower((unsigned char)ib->name[i]);
    lname[i] = 0;
    snprintf(key, sizeof key, "%s.sasl.jaas.config", c->sasl_mechanism_inter_broker_protocol);
    for (i = 0; key[i]; i++)
        key[i] = (char)tolower((unsigned char)key[i]);
    const char *jaas = st_config_listener_get(c, lname, key), *from = "listener.name.";
    if (!*jaas) {
        jaas = c->sasl_jaas_config;
        from = "sasl.jaas.config";
    }
    if (!*jaas)
        return st_cfg_fail(err, errlen,
                           "inter-broker listener %s is %s: set "
                           "listener.name.%s.%s (or sasl.jaas.config) to ... username=\"...\" "
                           "password=\"...\"; for the brokers' own connections",
                           ib->name, st_sec_protocol_name(ib->protocol), lname, key);
    if (st_jaas_value(jaas, "username", user, ulen) || !*user ||
        st_jaas_value(jaas, "password", pass, plen) || !*pass)
        return st_cfg_fail(
            err, errlen, "%s%s: expected username=\"...\" password=\"...\" (Kafka's JAAS form)",
            from, strcmp(from, "listener.name.") == 0 ? "<name>.<mechanism>.sasl.jaas.config" : "");
    return 0;
}

int st_config_finish(st_config_t *c, char *err, size_t errlen)
{
    int rc = st_config_listeners(c, err, errlen);
    if (rc)
        return rc;
    rc = st_config_cluster(c, err, errlen);
    if (rc)
        return rc;
    rc = st_config_sasl(c, err, errlen);
    if (rc)
        return rc;
    if (*c->admin_listen) {
        if (st_parse_hostport(c->admin_listen, c->admin_host, sizeof c->admin_host, &c->admin_port))
            return st_cfg_fail(err, errlen, "bad value for admin.listen: '%s' (expected host:port)",
                               c->admin_listen);
    } else {
        c->admin_port = -1;
    }
    st_log_level_t lvl;
    if (st_log_parse_level(c->log_level, &lvl))
        return st_cfg_fail(err, errlen, "bad value for log.level: '%s' (trace..error)",
                           c->log_level);
    if (strcmp(c->log_message_timestamp_type, "CreateTime") != 0 &&
        strcmp(c->log_message_timestamp_type, "LogAppendTime") != 0)
        return st_cfg_fail(err, errlen,
                           "bad value for log.message.timestamp.type: '%s' "
                           "(CreateTime or LogAppendTime)",
                           c->log_message_timestamp_type);
    char *end;
    double ratio = strtod(c->log_cleaner_min_cleanable_ratio, &end);
    if (end == c->log_cleaner_min_cleanable_ratio || *end || !(ratio >= 0 && ratio <= 1))
        return st_cfg_fail(err, errlen,
                           "bad value for log.cleaner.min.cleanable.ratio: '%s' (0 to 1)",
                           c->log_cleaner_min_cleanable_ratio);
    if (c->group_min_session_timeout_ms > c->group_max_session_timeout_ms)
        return st_cfg_fail(err, errlen,
                           "group.min.session.timeout.ms is above group.max.session.timeout.ms");
    /* KIP-848's bounds, as Kafka checks them at start-up */
    if (c->group_consumer_session_timeout_ms < c->group_consumer_min_session_timeout_ms ||
        c->group_consumer_session_timeout_ms > c->group_consumer_max_session_timeout_ms)
        return st_cfg_fail(err, errlen,
                           "group.consumer.session.timeout.ms must be within "
                           "group.consumer.min.session.timeout.ms and "
                           "group.consumer.max.session.timeout.ms");
    if (c->group_consumer_heartbeat_interval_ms < c->group_consumer_min_heartbeat_interval_ms ||
        c->group_consumer_heartbeat_interval_ms > c->group_consumer_max_heartbeat_interval_ms)
        return st_cfg_fail(err, errlen,
                           "group.consumer.heartbeat.interval.ms must be within "
                           "group.consumer.min.heartbeat.interval.ms and "
                           "group.consumer.max.heartbeat.interval.ms");
    if (c->group_consumer_heartbeat_interval_ms >= c->group_consumer_session_timeout_ms)
        return st_cfg_fail(err, errlen,
                           "group.consumer.heartbeat.interval.ms must be below "
                           "group.consumer.session.timeout.ms");
    for (const char *p = c->group_consumer_assignors;;) {
        p += strspn(p, ", ");
        size_t n = strcspn(p, ", ");
        if (!n)
            break;
        if (!((n == 7 && !strncmp(p, "uniform", 7)) || (n == 5 && !strncmp(p, "range", 5))))
            return st_cfg_fail(err, errlen,
                               "group.consumer.assignors: unknown assignor '%.*s' (uniform, range)",
                               (int)n, p);
        p += n;
    }
    /* Kafka's log.dirs is a comma-separated list; this broker keeps one directory (no JBOD
     * yet): one entry (spaces and empty entries dropped) is taken, more are refused rather
     * than made into a directory whose name has a comma in it. */
    int ndirs = 0;
    const char *first = NULL;
    size_t first_len = 0;
    for (const char *p = c->log_dirs; *p;) {
        size_t n = strcspn(p, ",");
        const char *q = p;
        size_t m = n;
        while (m && (*q == ' ' || *q == '\t'))
            q++, m--;
        while (m && (q[m - 1] == ' ' || q[m - 1] == '\t'))
            m--;
        if (m) {
            if (!ndirs++) {
                first = q;
                first_len = m;
            }
        }
        p += n + (p[n] == ',');
    }
    if (ndirs > 1)
        return st_cfg_fail(err, errlen,
                           "log.dirs lists %d directories (%s): this broker keeps its data in "
                           "one directory (several disks, JBOD, are not supported yet); give one",
                           ndirs, c->log_dirs);
    if (!ndirs)
        return st_cfg_fail(err, errlen, "log.dirs is empty");
    if (first != c->log_dirs || first_len != strlen(c->log_dirs)) {
        memmove(c->log_dirs, first, first_len);
        c->log_dirs[first_len] = 0;
    }
    /* Kafka's KRaft authorizer by its class name, and the ZooKeeper-era one users bring along
     * (both mean the same ACLs here); any other class is one this broker cannot load. */
    c->authorizer_enabled = false;
    if (*c->authorizer_class_name) {
        if (strcmp(c->authorizer_class_name,
                   "org.apache.kafka.metadata.authorizer.StandardAuthorizer") != 0 &&
            strcmp(c->authorizer_class_name, "kafka.security.authorizer.AclAuthorizer") != 0)
            return st_cfg_fail(err, errlen,
                               "authorizer.class.name: '%s' is not an authorizer this broker has "
                               "(org.apache.kafka.metadata.authorizer.StandardAuthorizer)",
                               c->authorizer_class_name);
        c->authorizer_enabled = true;
    }
    return 0;
}

const char *st_config_source_name(st_config_source_t s)
{
    return s == ST_CONFIG_SRC_FILE ? "file" : s == ST_CONFIG_SRC_SET ? "--set" : "default";
}

/* Whether name ends with suffix. */
static bool st_ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && strcasecmp(name + n - k, suffix) == 0;
}

bool st_config_is_secret(const char *key)
{
    return strcasestr(key, "password") || strcasestr(key, "secret") || st_ends_with(key, ".key") ||
           st_ends_with(key, "sasl.jaas.config") || strcasecmp(key, "sasl.bootstrap.users") == 0;
}

void st_config_each(const st_config_t *c, void (*fn)(void *arg, const st_config_item_t *it),
                    void *arg)
{
    static const char *const types[] = {"string", "int", "bool"};
    for (size_t i = 0; i < ST_CFG_N; i++) {
        const st_cfg_desc_t *d = &st_cfg_table[i];
        const void *p = (const char *)c + d->off;
        char num[24];
        const char *v = num;
        if (d->type == ST_CFG_STR)
            v = *(char *const *)p ? *(char *const *)p : "";
        else if (d->type == ST_CFG_BOOL)
            v = *(const bool *)p ? "true" : "false";
        else
            snprintf(num, sizeof num, "%" PRId64, *(const int64_t *)p);
        st_config_item_t it = {d->key, v, types[d->type], (st_config_source_t)c->source[i],
                               st_config_is_secret(d->key)};
        fn(arg, &it);
    }
    for (int i = 0; i < c->nlistener_overrides; i++) {
        const struct st_config_override *o = &c->listener_overrides[i];
        st_config_item_t it = {o->key, o->value, "string", o->source, st_config_is_secret(o->key)};
        fn(arg, &it);
    }
}

void st_config_print_keys(FILE *f)
{
    for (size_t i = 0; i < ST_CFG_N; i++)
        fprintf(f, "  %-34s %s (default: %s)\n", st_cfg_table[i].key, st_cfg_table[i].help,
                *st_cfg_table[i].def ? st_cfg_table[i].def : "none");
}
