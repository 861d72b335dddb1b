/* connquota.c — per-IP connection counts and rates, once per broker (connquota.h). */
#include "broker/connquota.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One IP with connections open or a rate still measured. */
typedef struct {
    char ip[ST_QUOTA_IP_MAX];
    int count;
    st_qrate_t rate;
    int64_t last_ms; /* last connection: a rate idle past every window is forgotten */
} ip_entry_t;

typedef struct {
    char ip[ST_QUOTA_IP_MAX];
    int max;
} ip_override_t;

struct st_connquota {
    pthread_mutex_t mu;
    int max_per_ip, max_total, total;
    ip_override_t *overrides;
    int noverrides;
    ip_entry_t *v; /* linear: one entry per IP with connections, a handful in practice */
    size_t n, cap;
};

/* spec's overrides (ip:count,...) into a new array *out of *n; 0, or -1 with one line in err
 * (nothing allocated). */
static int parse_overrides(const char *spec, ip_override_t **out, int *n, char *err, size_t errlen)
{
    size_t len = strlen(spec);
    char *s = malloc(len + 1);
    ip_override_t *v = calloc(len / 2 + 1, sizeof *v);
    if (!s || !v) {
        free(s);
        free(v);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(s, spec, len + 1);
    int rc = 0, count = 0;
    for (char *save = NULL, *item = strtok_r(s, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ')
            item++;
        char *colon = strrchr(item, ':'), *end = NULL;
        long max = colon ? strtol(colon + 1, &end, 10) : -1;
        ip_override_t *o = &v[count];
        if (!colon || end == colon + 1 || *end || max < 0 || max > 2147483647 ||
            st_quota_ip_normalize(item, (size_t)(colon - item), o->ip)) {
            snprintf(err, errlen,
                     "max.connections.per.ip.overrides: \"%s\" is not ip:count (an IPv4 or IPv6 "
                     "address)",
                     item);
            rc = -1;
            break;
        }
        o->max = (int)max;
        count++;
    }
    free(s);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    *n = count;
    return 0;
}

int st_connquota_check_overrides(const char *overrides, char *err, size_t errlen)
{
    ip_override_t *v;
    int n;
    if (parse_overrides(overrides, &v, &n, err, errlen))
        return -1;
    free(v);
    return 0;
}

int st_connquota_reconfigure(st_connquota_t *q, int64_t max_per_ip, int64_t max_total,
                             const char *overrides, char *err, size_t errlen)
{
    ip_override_t *v;
    int n;
    if (parse_overrides(overrides, &v, &n, err, errlen))
        return -1;
    pthread_mutex_lock(&q->mu);
    free(q->overrides);
    q->overrides = v;
    q->noverrides = n;
    q->max_per_ip = max_per_ip > INT32_MAX ? INT32_MAX : (int)max_per_ip;
    q->max_total = max_total > INT32_MAX ? INT32_MAX : (int)max_total;
    pthread_mutex_unlock(&q->mu);
    return 0;
}

st_connquota_t *st_connquota_create(const st_config_t *cfg, char *err, size_t errlen)
{
    st_connquota_t *q = calloc(1, sizeof *q);
    if (!q) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&q->mu, NULL);
    q->max_per_ip = (int)cfg->max_connections_per_ip;
    q->max_total = (int)cfg->max_connections;
    if (parse_overrides(cfg->max_connections_per_ip_overrides, &q->overrides, &q->noverrides, err,
                        errlen)) {
        st_connquota_destroy(q);
        return NULL;
    }
    return q;
}

void st_connquota_destroy(st_connquota_t *q)
{
    if (!q)
        return;
    pthread_mutex_destroy(&q->mu);
    free(q->overrides);
    free(q->v);
    free(q);
}

/* The entry of ip, made when absent (NULL on out of memory); entries with no connection and a
 * rate idle past every window go on the way. Under q->mu. */
static ip_entry_t *entry_of(st_connquota_t *q, const char *ip, int64_t now_ms, bool make)
{
    int64_t idle = (int64_t)ST_QUOTA_SAMPLES * ST_QUOTA_WINDOW_MS;
    for (size_t i = 0; i < q->n;) {
        ip_entry_t *e = &q->v[i];
        if (strcmp(e->ip, ip) == 0)
            return e;
        if (e->count == 0 && now_ms - e->last_ms > idle) {
            q->v[i] = q->v[--q->n];
            continue;
        }
        i++;
    }
    if (!make)
        return NULL;
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 8;
        ip_entry_t *v = realloc(q->v, cap * sizeof *v);
        if (!v)
            return NULL;
        q->v = v;
        q->cap = cap;
    }
    ip_entry_t *e = &q->v[q->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->ip, sizeof e->ip, "%s", ip);
    st_qrate_init(&e->rate);
    e->last_ms = now_ms;
    return e;
}

static int max_for(const st_connquota_t *q, const char *ip)
{
    for (int i = 0; i < q->noverrides; i++)
        if (strcmp(q->overrides[i].ip, ip) == 0)
            return q->overrides[i].max;
    return q->max_per_ip;
}

int64_t st_connquota_admit(st_connquota_t *q, const st_quota_t *quotas, size_t n, const char *ip,
                           bool protected_listener, int64_t now_ms)
{
    double rate_quota;
    bool rated = ip[0] && st_quota_ip_rate(quotas, n, ip, &rate_quota);
    int64_t out = 0;
    pthread_mutex_lock(&q->mu);
    if (!protected_listener && q->total >= q->max_total) {
        out = ST_CONNQUOTA_WAIT;
        goto done;
    }
    ip_entry_t *e = entry_of(q, ip, now_ms, true);
    if (!e) {
        out = -1;
        goto done;
    }
    e->last_ms = now_ms;
    if (rated) {
        /* Kafka records the connection, and takes it back when it is throttled */
        int64_t ms = st_qrate_record_throttle(&e->rate, 1, rate_quota, now_ms, ST_QUOTA_WINDOW_MS);
        if (ms > 0) {
            st_qrate_record(&e->rate, -1, now_ms);
            out = ms;
            goto done;
        }
    }
    if (e->count >= max_for(q, ip)) {
        out = -1;
        goto done;
    }
    e->count++;
    q->total++;
done:
    pthread_mutex_unlock(&q->mu);
    return out;
}

void st_connquota_release(st_connquota_t *q, const char *ip)
{
    pthread_mutex_lock(&q->mu);
    ip_entry_t *e = entry_of(q, ip, 0, false);
    if (e && e->count > 0) {
        e->count--;
        q->total--;
    }
    pthread_mutex_unlock(&q->mu);
}

int st_connquota_count(st_connquota_t *q, const char *ip)
{
    pthread_mutex_lock(&q->mu);
    ip_entry_t *e = entry_of(q, ip, 0, false);
    int n = e ? e->count : 0;
    pthread_mutex_unlock(&q->mu);
    return n;
}
