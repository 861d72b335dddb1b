/* topic_config.c — the topic config table and its validation. */
#include "kafka/topic_config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "kafka/broker_config.h"

#define L INT64_MAX
const st_tcfg_desc_t st_tcfg_table[] = {
    {"cleanup.policy", ST_TCFG_LIST, NULL, "delete", 0, 0,
     "delete|compact|compact,delete|delete,compact",
     "delete old segments, or keep the latest value per key"},
    {"compression.type", ST_TCFG_STRING, NULL, "producer", 0, 0,
     "producer|uncompressed|gzip|snappy|lz4|zstd", "batches are stored as the producer sent them"},
    {"delete.retention.ms", ST_TCFG_LONG, "log.cleaner.delete.retention.ms", NULL, 0, L, NULL,
     "how long delete markers are kept in compacted topics"},
    {"file.delete.delay.ms", ST_TCFG_LONG, NULL, "60000", 0, L, NULL,
     "delay before deleting a segment file"},
    {"flush.messages", ST_TCFG_LONG, "log.flush.interval.messages", NULL, 1, L, NULL,
     "with write caching: sync after this many messages"},
    {"flush.ms", ST_TCFG_LONG, "log.flush.interval.ms", NULL, 0, L, NULL,
     "with write caching: sync data at least this often"},
    {"index.interval.bytes", ST_TCFG_INT, "log.index.interval.bytes", NULL, 0, INT32_MAX, NULL,
     "bytes between offset index entries"},
    {"internal.segment.bytes", ST_TCFG_INT, NULL, "-1", -1, INT32_MAX, NULL,
     "tests only: when set (>= 14), replaces segment.bytes without its 1 MiB floor"},
    {"max.compaction.lag.ms", ST_TCFG_LONG, "log.cleaner.max.compaction.lag.ms", NULL, 1, L, NULL,
     "longest a message stays uncompacted"},
    {"max.message.bytes", ST_TCFG_INT, "message.max.bytes", NULL, 0, INT32_MAX, NULL,
     "largest record batch accepted"},
    {"message.downconversion.enable", ST_TCFG_BOOLEAN, "log.message.downconversion.enable", NULL, 0,
     0, NULL, "convert records down for Fetch v0-3 (false: UNSUPPORTED_VERSION)"},
    {"message.timestamp.type", ST_TCFG_STRING, "log.message.timestamp.type", NULL, 0, 0,
     "CreateTime|LogAppendTime", "whose clock stamps records"},
    {"min.cleanable.dirty.ratio", ST_TCFG_DOUBLE, "log.cleaner.min.cleanable.ratio", NULL, 0, 1,
     NULL, "dirty ratio that triggers compaction"},
    {"min.compaction.lag.ms", ST_TCFG_LONG, "log.cleaner.min.compaction.lag.ms", NULL, 0, L, NULL,
     "shortest a message stays uncompacted"},
    {"min.insync.replicas", ST_TCFG_INT, "min.insync.replicas", NULL, 1, INT32_MAX, NULL,
     "replicas that must have a write for acks=all"},
    {"preallocate", ST_TCFG_BOOLEAN, NULL, "false", 0, 0, NULL, "preallocate segment files"},
    {"retention.bytes", ST_TCFG_LONG, "log.retention.bytes", NULL, -1, L, NULL,
     "delete old segments past this size (-1: keep)"},
    {"retention.ms", ST_TCFG_LONG, "log.retention.ms", NULL, -1, L, NULL,
     "delete segments older than this (-1: keep)"},
    {"segment.bytes", ST_TCFG_INT, "log.segment.bytes", NULL, 1048576, INT32_MAX, NULL,
     "roll a segment at this size (at least 1 MiB, as Kafka 4)"},
    {"segment.index.bytes", ST_TCFG_INT, NULL, "10485760", 4, INT32_MAX, NULL,
     "largest offset index of a segment"},
    {"segment.jitter.ms", ST_TCFG_LONG, NULL, "0", 0, L, NULL, "random jitter on segment.ms"},
    {"segment.ms", ST_TCFG_LONG, "log.roll.ms", NULL, 1, L, NULL, "roll a segment at this age"},
    {"unclean.leader.election.enable", ST_TCFG_BOOLEAN, NULL, "false", 0, 0, NULL,
     "never: an out-of-sync replica does not become leader"},
    {"write.caching", ST_TCFG_BOOLEAN, "write.caching", NULL, 0, 0, NULL,
     "acknowledge after write, sync by flush.ms/flush.messages"},
};
#undef L
const int st_tcfg_count = (int)(sizeof st_tcfg_table / sizeof st_tcfg_table[0]);

const st_tcfg_desc_t *st_tcfg_find(const char *name, size_t len)
{
    for (int i = 0; i < st_tcfg_count; i++)
        if (strlen(st_tcfg_table[i].name) == len && memcmp(st_tcfg_table[i].name, name, len) == 0)
            return &st_tcfg_table[i];
    return NULL;
}

static bool in_choices(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t k = bar ? (size_t)(bar - p) : strlen(p);
        if (k == n && strncasecmp(p, v, n) == 0)
            return true;
        if (!bar)
            break;
        p = bar + 1;
    }
    return false;
}

int st_tcfg_validate(const st_tcfg_desc_t *d, const char *v, char *err, size_t errlen)
{
    switch (d->type) {
    case ST_TCFG_INT:
    case ST_TCFG_LONG: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end) {
            snprintf(err, errlen, "Invalid value %s for configuration %s: Not a number", v,
                     d->name);
            return ST_E_INVALID;
        }
        if (x < d->min || x > d->max) {
            snprintf(err, errlen,
                     "Invalid value %s for configuration %s: must be in %" PRId64 "..%" PRId64, v,
                     d->name, d->min, d->max);
            return ST_E_INVALID;
        }
        return 0;
    }
    case ST_TCFG_BOOLEAN:
        if (strcasecmp(v, "true") && strcasecmp(v, "false")) {
            snprintf(err, errlen, "Invalid value %s for configuration %s: Expected true or false",
                     v, d->name);
            return ST_E_INVALID;
        }
        return 0;
    case ST_TCFG_DOUBLE: {
        char *end;
        double x = strtod(v, &end);
        if (end == v || *end || x != x) {
            snprintf(err, errlen, "Invalid value %s for configuration %s: Not a number", v,
                     d->name);
            return ST_E_INVALID;
        }
        if (d->max > d->min && (x < (double)d->min || x > (double)d->max)) {
            snprintf(err, errlen,
                     "Invalid value %s for configuration %s: Value must be between %lld and %lld",
                     v, d->name, (long long)d->min, (long long)d->max);
            return ST_E_INVALID;
        }
        return 0;
    }
    default:
        if (d->choices && !in_choices(d->choices, v)) {
            snprintf(err, errlen,
                     "Invalid value %s for configuration %s: String must be one of: %s", v, d->name,
                     d->choices);
            return ST_E_INVALID;
        }
        return 0;
    }
}

const char *st_tcfg_default(const st_config_t *cfg, const st_md_t *md, const st_tcfg_desc_t *d,
                            char *buf, size_t n, int *source)
{
    const char *v = d->broker_key ? st_bcfg_value(cfg, md, d->broker_key, buf, n, source) : NULL;
    if (v)
        return v;
    if (source)
        *source = ST_SRC_DEFAULT;
    return d->fixed_default ? d->fixed_default : "";
}

const char *st_tcfg_value(const st_config_t *cfg, const st_md_t *md, const st_md_topic_t *t,
                          const st_tcfg_desc_t *d, char *buf, size_t n, bool *is_override)
{
    const char *v = t ? st_md_topic_config(t, d->name) : NULL;
    if (is_override)
        *is_override = v != NULL;
    return v ? v : st_tcfg_default(cfg, md, d, buf, n, NULL);
}

int64_t st_tcfg_int(const st_config_t *cfg, const st_md_t *md, const st_md_topic_t *t,
                    const char *name)
{
    const st_tcfg_desc_t *d = st_tcfg_find(name, strlen(name));
    if (!d)
        return 0;
    char buf[64];
    const char *v = st_tcfg_value(cfg, md, t, d, buf, sizeof buf, NULL);
    if (d->type == ST_TCFG_BOOLEAN)
        return strcasecmp(v, "true") == 0;
    return strtoll(v, NULL, 10);
}

void st_topic_log_config(const st_config_t *cfg, const st_md_t *md, const st_md_topic_t *t,
                         st_log_config_t *out)
{
    st_log_config_default(out);
    out->segment_bytes = st_tcfg_int(cfg, md, t, "segment.bytes");
    /* tests' small segments (Kafka 4's internal.segment.bytes): a topic's own, else the
     * broker's internal.log.segment.bytes, neither held to the 1 MiB floor */
    const char *own = t ? st_md_topic_config(t, "internal.segment.bytes") : NULL;
    if (own && atoll(own) >= 14)
        out->segment_bytes = atoll(own);
    else if (cfg->internal_log_segment_bytes >= 14 &&
             !(t && st_md_topic_config(t, "segment.bytes")))
        out->segment_bytes = cfg->internal_log_segment_bytes;
    out->segment_ms = st_tcfg_int(cfg, md, t, "segment.ms");
    out->retention_ms = st_tcfg_int(cfg, md, t, "retention.ms");
    out->retention_bytes = st_tcfg_int(cfg, md, t, "retention.bytes");
    char pol[64];
    const char *cp =
        st_tcfg_value(cfg, md, t, st_tcfg_find("cleanup.policy", 14), pol, sizeof pol, NULL);
    out->retention_deletes = strstr(cp, "delete") != NULL;
    out->compact = strstr(cp, "compact") != NULL;
    char rb[64];
    const char *rv = st_tcfg_value(cfg, md, t, st_tcfg_find("min.cleanable.dirty.ratio", 25), rb,
                                   sizeof rb, NULL);
    double ratio = strtod(rv, NULL);
    /* The topic config is checked as a number only; the log takes 0..1. */
    out->min_cleanable_dirty_ratio = isnan(ratio) ? 0.5 : ratio < 0 ? 0 : ratio > 1 ? 1 : ratio;
    out->min_compaction_lag_ms = st_tcfg_int(cfg, md, t, "min.compaction.lag.ms");
    out->max_compaction_lag_ms = st_tcfg_int(cfg, md, t, "max.compaction.lag.ms");
    out->delete_retention_ms = st_tcfg_int(cfg, md, t, "delete.retention.ms");
    out->index_interval_bytes = (int32_t)st_tcfg_int(cfg, md, t, "index.interval.bytes");
    out->max_message_bytes = (int32_t)st_tcfg_int(cfg, md, t, "max.message.bytes");
    char buf[64];
    const st_tcfg_desc_t *d = st_tcfg_find("message.timestamp.type", 22);
    const char *ts = st_tcfg_value(cfg, md, t, d, buf, sizeof buf, NULL);
    out->timestamp_type =
        strcasecmp(ts, "LogAppendTime") == 0 ? ST_TS_LOG_APPEND_TIME : ST_TS_CREATE_TIME;
    out->flush_policy =
        st_tcfg_int(cfg, md, t, "write.caching") ? ST_FLUSH_WRITE_CACHING : ST_FLUSH_STRICT;
    out->flush_messages = st_tcfg_int(cfg, md, t, "flush.messages");
    out->flush_ms = st_tcfg_int(cfg, md, t, "flush.ms");
}
