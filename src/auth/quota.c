/* quota.c — quota keys, Kafka's entity precedence and sampled rate (quota.h). */
#include "auth/quota.h"

#include <arpa/inet.h>
#include <math.h>
#include <string.h>

static const char *const key_names[ST_QUOTA_NKEYS] = {
    "producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
    "connection_creation_rate"};

int st_quota_key(const char *name)
{
    for (int k = 0; name && k < ST_QUOTA_NKEYS; k++)
        if (strcmp(name, key_names[k]) == 0)
            return k;
    return -1;
}

const char *st_quota_key_name(int key)
{
    return key >= 0 && key < ST_QUOTA_NKEYS ? key_names[key] : "?";
}

bool st_quota_key_integral(int key)
{
    return key == ST_QUOTA_PRODUCER_BYTE_RATE || key == ST_QUOTA_CONSUMER_BYTE_RATE ||
           key == ST_QUOTA_CONNECTION_CREATION_RATE;
}

bool st_quota_key_allowed(const st_quota_entity_t *e, int key)
{
    return (e->ip != ST_QE_NONE) == (key == ST_QUOTA_CONNECTION_CREATION_RATE);
}

int st_quota_ip_normalize(const char *name, size_t len, char out[ST_QUOTA_IP_MAX])
{
    char buf[ST_QUOTA_IP_MAX];
    unsigned char addr[16];
    if (len == 0 || len >= sizeof buf || memchr(name, 0, len))
        return -1;
    memcpy(buf, name, len);
    buf[len] = 0;
    int af = inet_pton(AF_INET, buf, addr) == 1    ? AF_INET
             : inet_pton(AF_INET6, buf, addr) == 1 ? AF_INET6
                                                   : 0;
    return af && inet_ntop(af, addr, out, ST_QUOTA_IP_MAX) ? 0 : -1;
}

bool st_quota_ip_rate(const st_quota_t *q, size_t n, const char *ip, double *bound)
{
    const int key = ST_QUOTA_CONNECTION_CREATION_RATE;
    const st_quota_t *dflt = NULL;
    for (size_t i = 0; i < n; i++) {
        if (q[i].e.ip == ST_QE_NONE || !(q[i].set & (1u << key)))
            continue;
        if (q[i].e.ip == ST_QE_NAME && strcmp(q[i].e.ip_name, ip) == 0) {
            *bound = q[i].values[key];
            return true;
        }
        if (q[i].e.ip == ST_QE_DEFAULT)
            dflt = &q[i];
    }
    if (dflt)
        *bound = dflt->values[key];
    return dflt != NULL;
}

bool st_quota_entity_eq(const st_quota_entity_t *a, const st_quota_entity_t *b)
{
    return a->user == b->user && a->client == b->client && a->ip == b->ip &&
           (a->user != ST_QE_NAME || strcmp(a->user_name, b->user_name) == 0) &&
           (a->client != ST_QE_NAME || strcmp(a->client_name, b->client_name) == 0) &&
           (a->ip != ST_QE_NAME || strcmp(a->ip_name, b->ip_name) == 0);
}

/* Whether entity e is the form (u, c) for this user and client. */
static bool is_form(const st_quota_entity_t *e, int u, int c, const char *user, const char *client)
{
    return e->ip == ST_QE_NONE && e->user == u && e->client == c &&
           (u != ST_QE_NAME || strcmp(e->user_name, user) == 0) &&
           (c != ST_QE_NAME || strcmp(e->client_name, client) == 0);
}

bool st_quota_resolve(const st_quota_t *q, size_t n, int key, const char *user, const char *client,
                      double *bound, st_quota_entity_t *tags)
{
    static const int8_t forms[8][2] = {{ST_QE_NAME, ST_QE_NAME},       {ST_QE_NAME, ST_QE_DEFAULT},
                                       {ST_QE_NAME, ST_QE_NONE},       {ST_QE_DEFAULT, ST_QE_NAME},
                                       {ST_QE_DEFAULT, ST_QE_DEFAULT}, {ST_QE_DEFAULT, ST_QE_NONE},
                                       {ST_QE_NONE, ST_QE_NAME},       {ST_QE_NONE, ST_QE_DEFAULT}};
    if (key < 0 || key >= ST_QUOTA_NKEYS)
        return false;
    user = user ? user : "";
    client = client ? client : "";
    for (int f = 0; f < 8; f++) {
        int u = forms[f][0], c = forms[f][1];
        for (size_t i = 0; i < n; i++) {
            if (!(q[i].set & (1u << key)) || !is_form(&q[i].e, u, c, user, client))
                continue;
            *bound = q[i].values[key];
            memset(tags, 0, sizeof *tags);
            if (u != ST_QE_NONE) {
                tags->user = ST_QE_NAME;
                strncpy(tags->user_name, user, ST_QUOTA_NAME_MAX - 1);
            }
            if (c != ST_QE_NONE) {
                tags->client = ST_QE_NAME;
                strncpy(tags->client_name, client, ST_QUOTA_NAME_MAX - 1);
            }
            return true;
        }
    }
    return false;
}

void st_qrate_init(st_qrate_t *r)
{
    for (int i = 0; i < ST_QUOTA_SAMPLES; i++) {
        r->start_ms[i] = -1;
        r->v[i] = 0;
    }
    r->cur = 0;
}

/* Forgets the samples no window reaches any more (Kafka's purgeObsoleteSamples). */
static void purge(st_qrate_t *r, int64_t now_ms)
{
    int64_t expire = (int64_t)ST_QUOTA_SAMPLES * ST_QUOTA_WINDOW_MS;
    for (int i = 0; i < ST_QUOTA_SAMPLES; i++)
        if (r->start_ms[i] >= 0 && now_ms - r->start_ms[i] >= expire) {
            r->start_ms[i] = i == r->cur ? now_ms : -1;
            r->v[i] = 0;
        }
}

void st_qrate_record(st_qrate_t *r, double v, int64_t now_ms)
{
    if (r->start_ms[r->cur] < 0)
        r->start_ms[r->cur] = now_ms;
    else if (now_ms - r->start_ms[r->cur] >= ST_QUOTA_WINDOW_MS) {
        r->cur = (r->cur + 1) % ST_QUOTA_SAMPLES;
        r->start_ms[r->cur] = now_ms;
        r->v[r->cur] = 0;
    }
    r->v[r->cur] += v;
}

int64_t st_qrate_window_ms(st_qrate_t *r, int64_t now_ms)
{
    purge(r, now_ms);
    int64_t oldest = now_ms;
    for (int i = 0; i < ST_QUOTA_SAMPLES; i++)
        if (r->start_ms[i] >= 0 && r->start_ms[i] < oldest)
            oldest = r->start_ms[i];
    int64_t span = now_ms - oldest;
    int64_t full = span / ST_QUOTA_WINDOW_MS, min_full = ST_QUOTA_SAMPLES - 1;
    if (full < min_full)
        span += (min_full - full) * ST_QUOTA_WINDOW_MS;
    return span;
}

double st_qrate_measure(st_qrate_t *r, int64_t now_ms)
{
    int64_t span = st_qrate_window_ms(r, now_ms);
    double sum = 0;
    for (int i = 0; i < ST_QUOTA_SAMPLES; i++)
        if (r->start_ms[i] >= 0)
            sum += r->v[i];
    return sum * 1000.0 / (double)span;
}

int64_t st_quota_throttle_ms(double rate, double bound, int64_t window_ms)
{
    int64_t cap = (int64_t)ST_QUOTA_SAMPLES * ST_QUOTA_WINDOW_MS;
    if (rate <= bound)
        return 0;
    if (bound <= 0)
        return cap;
    double t = (rate - bound) / bound * (double)window_ms;
    return t >= (double)cap ? cap : (int64_t)t;
}

int64_t st_qrate_throttle(st_qrate_t *r, double bound, int64_t now_ms, int64_t cap_ms)
{
    double rate = st_qrate_measure(r, now_ms);
    int64_t ms = st_quota_throttle_ms(rate, bound, st_qrate_window_ms(r, now_ms));
    return ms < cap_ms ? ms : cap_ms;
}

int64_t st_qrate_record_throttle(st_qrate_t *r, double v, double bound, int64_t now_ms,
                                 int64_t cap_ms)
{
    st_qrate_record(r, v, now_ms);
    return st_qrate_throttle(r, bound, now_ms, cap_ms);
}

double st_quota_ns_to_percentage(int64_t ns)
{
    return (double)ns * (100.0 / 1e9);
}

void st_qbucket_init(st_qbucket_t *b)
{
    b->tokens = 0;
    b->last_ms = -1;
}

double st_qbucket_tokens(st_qbucket_t *b, double rate, int64_t now_ms)
{
    double burst = (double)ST_QUOTA_SAMPLES * ST_QUOTA_WINDOW_MS / 1000.0 * rate;
    if (b->last_ms < 0)
        b->tokens = burst;
    else if (now_ms > b->last_ms)
        b->tokens += rate * (double)(now_ms - b->last_ms) / 1000.0;
    if (b->tokens > burst)
        b->tokens = burst;
    if (b->last_ms < now_ms)
        b->last_ms = now_ms;
    return b->tokens;
}

int64_t st_qbucket_debt_ms(st_qbucket_t *b, double rate, int64_t now_ms)
{
    double t = st_qbucket_tokens(b, rate, now_ms);
    if (t >= 0)
        return 0;
    if (rate <= 0)
        return (int64_t)ST_QUOTA_SAMPLES * ST_QUOTA_WINDOW_MS;
    int64_t ms = llround(-t / rate * 1000.0);
    return ms > 0 ? ms : 1;
}

int64_t st_qbucket_take_strict(st_qbucket_t *b, double permits, double rate, int64_t now_ms)
{
    int64_t ms = st_qbucket_debt_ms(b, rate, now_ms);
    if (ms == 0)
        b->tokens -= permits;
    return ms;
}

int64_t st_qbucket_take(st_qbucket_t *b, double permits, double rate, int64_t now_ms)
{
    st_qbucket_tokens(b, rate, now_ms);
    b->tokens -= permits;
    return st_qbucket_debt_ms(b, rate, now_ms);
}
