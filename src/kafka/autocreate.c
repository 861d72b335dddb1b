/* autocreate.c — create missing topics, then resume the request. */
#include "kafka/autocreate.h"

#include "kafka/controller.h"

typedef struct {
    st_ctl_op_t op;
    st_kreq_t *r;
    st_autocreate_cb cb;
    void *arg;
} autocreate_t;

static void autocreate_done(st_kshard_t *s, st_ctl_op_t *op)
{
    autocreate_t *a = (autocreate_t *)op;
    (void)s;
    a->cb(a->r, a->arg);
}

void st_autocreate(st_kreq_t *r, const st_kstr_t *names, int n, st_autocreate_cb cb, void *arg)
{
    const st_md_t *md = r->shard->md;
    autocreate_t *a = st_arena_zalloc(&r->arena, sizeof *a);
    st_ctl_item_t *items = st_arena_zalloc(&r->arena, (size_t)n * sizeof *items + 1);
    if (!a || !items) {
        cb(r, arg);
        return;
    }
    int k = 0;
    char msg[200];
    for (int i = 0; i < n; i++) {
        if (names[i].len <= 0 || st_md_find(md, names[i].ptr, names[i].len) ||
            st_topic_name_check(names[i].ptr, (size_t)names[i].len, msg, sizeof msg))
            continue;
        bool dup = false;
        for (int j = 0; j < k; j++)
            if (strlen(items[j].name) == (size_t)names[i].len &&
                memcmp(items[j].name, names[i].ptr, (size_t)names[i].len) == 0)
                dup = true;
        if (dup)
            continue;
        items[k].name = st_arena_strndup(&r->arena, names[i].ptr, (size_t)names[i].len);
        items[k].count = -1;
        items[k].rf = -1;
        items[k].assigned = -1;
        if (items[k].name)
            k++;
    }
    if (k == 0) {
        cb(r, arg);
        return;
    }
    a->r = r;
    a->cb = cb;
    a->arg = arg;
    a->op.kind = ST_CTL_CREATE;
    a->op.n = k;
    a->op.items = items;
    a->op.cb = autocreate_done;
    st_ctl_submit(r->shard, &a->op);
}
