/*
 * console.c — the web console's files and the groups view (console.h).
 */
#include "admin/console.h"
#include "admin/render.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

const st_admin_asset_t *st_admin_ui_asset(const char *url)
{
    if (strcmp(url, "/ui") == 0 || strcmp(url, "/ui/") == 0)
        url = "/ui/index.html";
    if (strncmp(url, "/ui/", 4) != 0)
        return NULL;
    for (int i = 0; i < st_admin_ui_nassets; i++)
        if (strcmp(url + 4, st_admin_ui_assets[i].name) == 0)
            return &st_admin_ui_assets[i];
    return NULL;
}

st_admin_body_t *st_admin_body_new(void)
{
    st_admin_body_t *b = calloc(1, sizeof *b);
    if (b)
        st_buf_init(&b->buf);
    return b;
}

void st_admin_body_add(st_admin_body_t *b, const char *p, size_t n)
{
    if (b->too_large || b->buf.len + n > ST_ADMIN_BODY_MAX) {
        b->too_large = true;
        st_buf_fini(&b->buf);
        st_buf_init(&b->buf);
        return;
    }
    if (st_buf_append(&b->buf, p, n))
        b->too_large = true; /* out of memory: refused as too large for us */
}

void st_admin_body_free(st_admin_body_t *b)
{
    if (!b)
        return;
    st_buf_fini(&b->buf);
    free(b);
}

/* The partition row of topic/partition in any shard's snapshot, or NULL. */
static const st_admin_part_t *find_part(const st_admin_view_t *v, const char *topic, int32_t p)
{
    for (int i = 0; i < v->nshards; i++)
        for (int j = 0; v->snaps[i] && j < v->snaps[i]->nparts; j++) {
            const st_admin_part_t *r = &v->snaps[i]->parts[j];
            if (r->partition == p && strcmp(r->topic, topic) == 0)
                return r;
        }
    return NULL;
}

static int by_group(const void *x, const void *y)
{
    const st_admin_group_t *a = *(const st_admin_group_t *const *)x;
    const st_admin_group_t *b = *(const st_admin_group_t *const *)y;
    return strcmp(a->group, b->group);
}

/* One group's object: its row and every committed offset any snapshot holds for it. */
static json_t *group_json(const st_admin_view_t *v, const st_admin_group_t *g)
{
    json_t *offs = json_array();
    int64_t total = 0;
    for (int i = 0; offs && i < v->nshards; i++)
        for (int j = 0; v->snaps[i] && j < v->snaps[i]->ngoffsets; j++) {
            const st_admin_goffset_t *o = &v->snaps[i]->goffsets[j];
            if (strcmp(o->group, g->group) != 0)
                continue;
            const st_admin_part_t *r = find_part(v, o->topic, o->partition);
            json_t *row = json_pack("{s:s,s:i,s:I}", "topic", o->topic, "partition",
                                    (int)o->partition, "committed", (json_int_t)o->committed);
            if (r && !r->offline) {
                int64_t lag = r->high_watermark - o->committed;
                lag = lag > 0 ? lag : 0;
                total += lag;
                json_object_set_new(row, "high_watermark", json_integer(r->high_watermark));
                json_object_set_new(row, "lag", json_integer(lag));
            } else {
                json_object_set_new(row, "high_watermark", json_null());
                json_object_set_new(row, "lag", json_null());
            }
            json_array_append_new(offs, row);
        }
    return json_pack("{s:s,s:s,s:i,s:i,s:I,s:o}", "group", g->group, "state", g->state, "members",
                     (int)g->members, "shard", (int)g->shard, "lag", (json_int_t)total, "offsets",
                     offs);
}

int st_admin_render_groups(const st_admin_view_t *v, st_buf_t *out)
{
    int n = 0;
    for (int i = 0; i < v->nshards; i++)
        n += v->snaps[i] ? v->snaps[i]->ngroups : 0;
    const st_admin_group_t **gs = calloc((size_t)n + 1, sizeof *gs);
    json_t *arr = json_array();
    if (!gs || !arr) {
        free(gs);
        json_decref(arr);
        return -ENOMEM;
    }
    int k = 0;
    for (int i = 0; i < v->nshards; i++)
        for (int j = 0; v->snaps[i] && j < v->snaps[i]->ngroups; j++)
            gs[k++] = &v->snaps[i]->groups[j];
    qsort(gs, (size_t)n, sizeof *gs, by_group);
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, group_json(v, gs[i]));
    free(gs);
    return st_admin_json_append(json_pack("{s:o}", "groups", arr), out);
}
