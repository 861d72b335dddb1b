/* broker_config.c — dynamic broker settings (broker_config.h). */
#include "kafka/broker_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/log.h"
#include "broker/connquota.h"
#include "broker/protolog.h"
#include "kafka/topic_config.h"
#include "proto/kerr.h"

/* The dynamic settings that are not a topic config's broker default. */
static const char *const dynamic_keys[] = {
    "unclean.leader.election.enable",   "max.connections", "max.connections.per.ip",
    "max.connections.per.ip.overrides", "log.level",       "log.protocol",
};
#define NDYNAMIC (sizeof dynamic_keys / sizeof dynamic_keys[0])

const st_tcfg_desc_t *st_bcfg_topic_config(const char *key)
{
    for (int i = 0; i < st_tcfg_count; i++)
        if (st_tcfg_table[i].broker_key && strcmp(st_tcfg_table[i].broker_key, key) == 0)
            return &st_tcfg_table[i];
    return NULL;
}

bool st_bcfg_dynamic(const char *key)
{
    for (size_t i = 0; i < NDYNAMIC; i++)
        if (strcmp(dynamic_keys[i], key) == 0)
            return true;
    return st_bcfg_topic_config(key) != NULL;
}

__attribute__((format(printf, 3, 4))) static int16_t refuse(char *err, size_t errlen,
                                                            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return ST_KERR_INVALID_CONFIG;
}

int16_t st_bcfg_check(void *arg, const char *key, const char *value, bool *list, char *err,
                      size_t errlen)
{
    (void)arg;
    *list = strcmp(key, "max.connections.per.ip.overrides") == 0;
    char tmp[200];
    if (st_config_check(key, value ? value : "", tmp, sizeof tmp) == ST_E_NOT_FOUND)
        return refuse(err, errlen, "Unknown broker config: %s", key);
    if (!st_bcfg_dynamic(key))
        return refuse(err, errlen, "Cannot update these configs dynamically: Set(%s)", key);
    if (!value)
        return 0;
    /* the broker table's type and bounds, then the topic config's (its choices, a double) */
    if (st_config_check(key, value, tmp, sizeof tmp))
        return refuse(err, errlen, "%s", tmp);
    const st_tcfg_desc_t *d = st_bcfg_topic_config(key);
    if (d && st_tcfg_validate(d, value, tmp, sizeof tmp))
        return refuse(err, errlen, "%s", tmp);
    st_log_level_t lvl;
    if (strcmp(key, "log.level") == 0 && st_log_parse_level(value, &lvl))
        return refuse(
            err, errlen,
            "Invalid value %s for configuration log.level: one of error, warn, info, debug", value);
    if (strcmp(key, "log.protocol") == 0 && *value && strcmp(value, "all") &&
        strncmp(value, "client.id=", 10) && strncmp(value, "address=", 8))
        return refuse(
            err, errlen,
            "Invalid value %s for configuration log.protocol: empty, all, client.id=ID or "
            "address=IP",
            value);
    if (*list && st_connquota_check_overrides(value, tmp, sizeof tmp))
        return refuse(err, errlen, "%s", tmp);
    return 0;
}

const char *st_bcfg_value(const st_config_t *cfg, const st_md_t *md, const char *key, char *buf,
                          size_t n, int *source)
{
    bool given;
    const char *v = st_config_get(cfg, key, buf, n, &given);
    if (!v)
        return NULL;
    int scope = 0;
    const char *dyn = md && st_bcfg_dynamic(key)
                          ? st_md_broker_config(md, (int32_t)cfg->node_id, key, &scope)
                          : NULL;
    if (source)
        *source = dyn     ? (scope == 1 ? ST_SRC_DYNAMIC_BROKER : ST_SRC_DYNAMIC_DEFAULT)
                  : given ? ST_SRC_STATIC_BROKER
                          : ST_SRC_DEFAULT;
    return dyn ? dyn : v;
}

int64_t st_bcfg_int(const st_config_t *cfg, const st_md_t *md, const char *key)
{
    char buf[32];
    const char *v = st_bcfg_value(cfg, md, key, buf, sizeof buf, NULL);
    if (!v)
        return 0;
    if (strcasecmp(v, "true") == 0)
        return 1;
    return strtoll(v, NULL, 10);
}

/* Whether key's value on this broker differs between snapshots a and b. */
static bool changed(const st_config_t *cfg, const st_md_t *a, const st_md_t *b, const char *key)
{
    char ba[32], bb[32];
    const char *va = st_bcfg_value(cfg, a, key, ba, sizeof ba, NULL);
    const char *vb = st_bcfg_value(cfg, b, key, bb, sizeof bb, NULL);
    return strcmp(va ? va : "", vb ? vb : "") != 0;
}

void st_bcfg_adopted(st_kshard_t *s0, const st_md_t *old)
{
    const st_config_t *cfg = s0->b->cfg;
    const st_md_t *md = s0->md;
    char buf[32], err[200];
    if (changed(cfg, old, md, "log.level")) {
        st_log_level_t lvl;
        const char *v = st_bcfg_value(cfg, md, "log.level", buf, sizeof buf, NULL);
        if (st_log_parse_level(v, &lvl) == 0) {
            st_log_set_level(lvl);
            ST_INFO("log.level is now %s", v);
        }
    }
    if (changed(cfg, old, md, "log.protocol")) {
        const char *v = st_bcfg_value(cfg, md, "log.protocol", buf, sizeof buf, NULL);
        if (st_protolog_configure(v, err, sizeof err))
            ST_WARN("log.protocol %s not applied: %s", v, err);
        else
            ST_INFO("log.protocol is now \"%s\"", v);
    }
    if (changed(cfg, old, md, "max.connections") ||
        changed(cfg, old, md, "max.connections.per.ip") ||
        changed(cfg, old, md, "max.connections.per.ip.overrides")) {
        const char *ov =
            st_bcfg_value(cfg, md, "max.connections.per.ip.overrides", buf, sizeof buf, NULL);
        int64_t per_ip = st_bcfg_int(cfg, md, "max.connections.per.ip");
        int64_t total = st_bcfg_int(cfg, md, "max.connections");
        if (st_connquota_reconfigure(s0->b->connquota, per_ip, total, ov, err, sizeof err))
            ST_WARN("connection limits not applied: %s", err);
        else
            ST_INFO("connection limits are now max.connections=%lld max.connections.per.ip=%lld "
                    "overrides \"%s\"",
                    (long long)total, (long long)per_ip, ov);
    }
}
