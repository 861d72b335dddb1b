/*
 * coordsvc.c — the coordinator services registry (coordsvc.h): a small table of services,
 * filled before the shards start and read without a lock afterwards, and the creation of a
 * service's internal topic on first use.
 */
#include "kafka/coordsvc.h"

#include <string.h>

#include "base/assert.h"
#include "base/err.h"
#include "base/log.h"

static const st_coordsvc_t *services[ST_COORDSVC_MAX];
static int nservices;

int st_coordsvc_register(const st_coordsvc_t *svc)
{
    ST_ASSERT(svc && svc->topic && svc->route && svc->partitions && svc->replication_factor &&
              svc->start && svc->load && svc->unload && svc->fini);
    for (int i = 0; i < nservices; i++)
        if (strcmp(services[i]->topic, svc->topic) == 0 || services[i]->key_type == svc->key_type)
            return services[i] == svc ? 0 : ST_E_EXISTS;
    if (nservices == ST_COORDSVC_MAX)
        return ST_E_FULL;
    services[nservices++] = svc;
    return 0;
}

void st_coordsvc_clear(void)
{
    nservices = 0;
}

const st_coordsvc_t *st_coordsvc_find(const char *name, size_t len)
{
    for (int i = 0; name && i < nservices; i++)
        if (strlen(services[i]->topic) == len && memcmp(services[i]->topic, name, len) == 0)
            return services[i];
    return NULL;
}

const st_coordsvc_t *st_coordsvc_by_key_type(int8_t key_type)
{
    for (int i = 0; i < nservices; i++)
        if (services[i]->key_type == key_type)
            return services[i];
    return NULL;
}

const st_md_topic_t *st_coordsvc_topic(const st_coordsvc_t *svc, const st_md_t *md)
{
    return st_md_find(md, svc->topic, (int32_t)strlen(svc->topic));
}

int32_t st_coordsvc_partition(const st_coordsvc_t *svc, const st_md_t *md, st_kstr_t key)
{
    const st_md_topic_t *t = st_coordsvc_topic(svc, md);
    if (!t || t->npartitions <= 0)
        return -1;
    int32_t p = svc->route(key, t->npartitions);
    return p >= 0 && p < t->npartitions ? p : -1;
}

int32_t st_coordsvc_coordinator(const st_coordsvc_t *svc, const st_md_t *md, st_kstr_t key)
{
    int32_t p = st_coordsvc_partition(svc, md, key);
    return p >= 0 ? st_coordsvc_topic(svc, md)->partitions[p].leader : -1;
}

void st_coordsvc_leadership(st_kshard_t *s, const char *topic, int32_t partition, bool leads,
                            int32_t leader_epoch)
{
    const st_coordsvc_t *svc = st_coordsvc_find(topic, strlen(topic));
    if (!svc)
        return;
    if (leads)
        svc->load(s, partition, leader_epoch);
    else
        svc->unload(s, partition);
}

int st_coordsvc_start(st_kshard_t *s)
{
    for (int i = 0; i < nservices; i++) {
        int rc = services[i]->start(s);
        if (rc) {
            ST_ERROR("cannot start the %s coordinator: %s", services[i]->name, st_strerror(rc));
            while (--i >= 0)
                services[i]->fini(s);
            return rc;
        }
    }
    return 0;
}

void st_coordsvc_tick(st_kshard_t *s)
{
    for (int i = 0; i < nservices; i++)
        if (services[i]->tick)
            services[i]->tick(s);
}

void st_coordsvc_drain(st_kshard_t *s)
{
    for (int i = 0; i < nservices; i++)
        if (services[i]->drain)
            services[i]->drain(s);
}

void st_coordsvc_fini(st_kshard_t *s)
{
    for (int i = nservices - 1; i >= 0; i--)
        services[i]->fini(s);
}

void st_coordsvc_topic_item(const st_coordsvc_t *svc, const st_config_t *cfg, st_ctl_item_t *it)
{
    it->internal = true;
    it->count = svc->partitions(cfg);
    it->rf = svc->replication_factor(cfg);
    it->ncfg = svc->nconfigs;
    it->cfg = svc->configs;
}
