/*
 * topic_config.h — topic-level settings: names, types, defaults, validation.
 *
 * Each topic config has Kafka's name; its default is the broker setting it overrides (or a
 * fixed value). A topic stores only its overrides (metadata.h); the effective value is the
 * override if present, else the default. Any thread (pure functions over immutable data).
 */
#ifndef ST_KAFKA_TOPIC_CONFIG_H
#define ST_KAFKA_TOPIC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/config.h"
#include "cluster/metadata.h"
#include "storage/log.h"

/* Kafka's DescribeConfigs config_type values. */
enum {
    ST_TCFG_BOOLEAN = 1,
    ST_TCFG_STRING = 2,
    ST_TCFG_INT = 3,
    ST_TCFG_LONG = 5,
    ST_TCFG_DOUBLE = 6,
    ST_TCFG_LIST = 7
};

typedef struct st_tcfg_desc {
    const char *name;
    int type;
    const char *broker_key; /* broker setting giving the default, or NULL */
    const char *fixed_default;
    int64_t min, max;    /* for INT/LONG; for DOUBLE a range when max > min */
    const char *choices; /* for STRING/LIST: '|'-separated allowed values, or NULL */
    const char *doc;
} st_tcfg_desc_t;

extern const st_tcfg_desc_t st_tcfg_table[];
extern const int st_tcfg_count;

const st_tcfg_desc_t *st_tcfg_find(const char *name, size_t len);
/* Validates a value for a topic config; on failure writes a message into err. */
int st_tcfg_validate(const st_tcfg_desc_t *d, const char *value, char *err, size_t errlen);
/* The default (broker-level) value of d, written into buf: its broker setting's value on this
 * broker under snapshot md (dynamic, static or the default, broker_config.h; md NULL: the
 * static one), *source (may be NULL) where it came from (broker_config.h's ST_SRC_*). */
const char *st_tcfg_default(const st_config_t *cfg, const st_md_t *md, const st_tcfg_desc_t *d,
                            char *buf, size_t n, int *source);
/* The effective value for topic t of snapshot md (override or default), and whether it is an
 * override. */
const char *st_tcfg_value(const st_config_t *cfg, const st_md_t *md, const st_md_topic_t *t,
                          const st_tcfg_desc_t *d, char *buf, size_t n, bool *is_override);
/* The effective integer value of an INT/LONG/BOOLEAN topic config by name. */
int64_t st_tcfg_int(const st_config_t *cfg, const st_md_t *md, const st_md_topic_t *t,
                    const char *name);
/* The log settings of topic t of snapshot md: broker defaults overlaid with its overrides. */
void st_topic_log_config(const st_config_t *cfg, const st_md_t *md, const st_md_topic_t *t,
                         st_log_config_t *out);

#endif
