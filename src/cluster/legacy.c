/* legacy.c — reading a single broker's strata-metadata.json into records (legacy.h). */
#include "cluster/legacy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/err.h"
#include "cluster/metadata.h"
#include "cluster/records.h"

#define LEGACY_MAX_FILE (256 << 20)

/* One topic of the file as st_md_topic_t (heap; the caller frees), or NULL when malformed. */
static st_md_topic_t *legacy_topic(json_t *jt, int32_t node)
{
    const char *name = json_string_value(json_object_get(jt, "name"));
    uint8_t id[16];
    json_t *parts = json_object_get(jt, "partitions");
    if (!name || st_md_id_parse(json_string_value(json_object_get(jt, "id")), id) ||
        !json_is_array(parts) || json_array_size(parts) == 0)
        return NULL;
    st_md_topic_t *t = st_md_topic_new(name, id, (int32_t)json_array_size(parts));
    if (!t)
        return NULL;
    t->internal = json_is_true(json_object_get(jt, "internal"));
    json_t *rf = json_object_get(jt, "replication_factor");
    t->replication_factor = rf ? (int16_t)json_integer_value(rf) : 1;
    for (int32_t p = 0; p < t->npartitions; p++) {
        st_md_partition_t *mp = &t->partitions[p];
        mp->leader = node;
        mp->nreplicas = mp->nisr = 1;
        mp->replicas[0] = mp->isr[0] = node;
    }
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(jt, "configs"), k, v)
    {
        if (json_is_string(v))
            st_md_topic_set_config(t, k, json_string_value(v));
    }
    return t;
}

static void legacy_path(char *out, size_t n, const char *log_dirs, const char *suffix)
{
    snprintf(out, n, "%s/%s%s", log_dirs, ST_LEGACY_FILE, suffix);
}

bool st_legacy_present(const st_fs_t *fs, const char *log_dirs)
{
    char path[4200];
    legacy_path(path, sizeof path, log_dirs, "");
    int fd = fs->ops->open(fs->ctx, path, ST_FS_RDONLY);
    if (fd < 0)
        return false;
    fs->ops->close(fs->ctx, fd);
    return true;
}

int st_legacy_read(const st_fs_t *fs, const char *log_dirs, int32_t node, json_t **records,
                   int *ntopics, char *err, size_t errlen)
{
    *records = NULL;
    *ntopics = 0;
    char path[4200];
    legacy_path(path, sizeof path, log_dirs, "");
    uint8_t *data;
    size_t len;
    int rc = st_fs_read_file(fs, path, LEGACY_MAX_FILE, &data, &len);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, st_strerror(rc));
        return rc;
    }
    json_error_t je;
    json_t *root = json_loadb((const char *)data, len, 0, &je);
    free(data);
    if (!root) {
        snprintf(err, errlen, "%s:%d: %s", path, je.line, je.text);
        return ST_E_CORRUPT;
    }
    json_t *out = json_array(), *jt;
    st_md_t *seen = st_md_new("", node); /* to refuse a name or id given twice */
    size_t i;
    rc = out && seen ? 0 : -ENOMEM;
    json_array_foreach(json_object_get(root, "topics"), i, jt)
    {
        if (rc)
            break;
        st_md_topic_t *t = legacy_topic(jt, node);
        if (!t) {
            snprintf(err, errlen, "%s: topic %zu is malformed", path, i);
            rc = ST_E_CORRUPT;
            break;
        }
        if (st_md_find_id(seen, t->id) || st_md_add_topic(seen, t)) {
            snprintf(err, errlen, "%s: topic %s appears twice", path, t->name);
            st_md_topic_free(t);
            rc = ST_E_CORRUPT;
            break;
        }
        json_array_append_new(out, st_rec_topic(t));
        (*ntopics)++;
    }
    json_decref(root);
    st_md_unref(seen);
    if (rc) {
        json_decref(out);
        *ntopics = 0;
        return rc;
    }
    *records = out;
    return 0;
}

int st_legacy_retire(const st_fs_t *fs, const char *log_dirs)
{
    char from[4200], to[4200];
    legacy_path(from, sizeof from, log_dirs, "");
    legacy_path(to, sizeof to, log_dirs, ".migrated");
    int rc = fs->ops->rename(fs->ctx, from, to);
    return rc ? rc : fs->ops->fsync_dir(fs->ctx, log_dirs);
}
