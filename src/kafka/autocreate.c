/* autocreate.c — create missing topics (a client's, or a coordinator's internal topic), then
 * resume the request. */
#include "kafka/autocreate.h"

#include <string.h>

#include "base/log.h"
#include "kafka/authz.h"
#include "kafka/controller.h"
#include "kafka/coordsvc.h"
#include "proto/kerr.h"

typedef struct {
    st_ctl_op_t op;
    st_kreq_t *r;
    int n;
    int *item_of;    /* per name: its item, or -1 */
    int16_t *errors; /* per name: the item's error (the caller's, or NULL) */
    st_autocreate_cb cb;
    void *arg;
} autocreate_t;

static void autocreate_done(st_kshard_t *s, st_ctl_op_t *op)
{
    autocreate_t *a = (autocreate_t *)op;
    (void)s;
    for (int i = 0; a->errors && i < a->n; i++)
        a->errors[i] = a->item_of[i] >= 0 ? op->items[a->item_of[i]].error : 0;
    a->cb(a->r, a->arg);
}

/* The item already asking for name, or -1. */
static int item_find(const st_ctl_item_t *items, int k, st_kstr_t name)
{
    for (int j = 0; j < k; j++)
        if (strlen(items[j].name) == (size_t)name.len &&
            memcmp(items[j].name, name.ptr, (size_t)name.len) == 0)
            return j;
    return -1;
}

void st_autocreate(st_kreq_t *r, const st_kstr_t *names, int n, int16_t *errors,
                   st_autocreate_cb cb, void *arg)
{
    const st_md_t *md = r->shard->md;
    autocreate_t *a = st_arena_zalloc(&r->arena, sizeof *a);
    st_ctl_item_t *items = st_arena_zalloc(&r->arena, (size_t)n * sizeof *items + 1);
    int *item_of = st_arena_alloc(&r->arena, (size_t)n * sizeof *item_of + 1);
    for (int i = 0; errors && i < n; i++)
        errors[i] = 0;
    if (!a || !items || !item_of) {
        cb(r, arg);
        return;
    }
    int k = 0;
    char msg[200];
    /* Kafka creates a topic for a client that may CREATE on the cluster or on the topic */
    bool may_create = st_kauthz_quiet(r, ST_ACL_OP_CREATE, ST_ACL_RES_CLUSTER, ST_ACL_CLUSTER_NAME,
                                      strlen(ST_ACL_CLUSTER_NAME));
    for (int i = 0; i < n; i++) {
        item_of[i] = -1;
        if (names[i].len <= 0 || st_md_find(md, names[i].ptr, names[i].len) ||
            st_topic_name_check(names[i].ptr, (size_t)names[i].len, msg, sizeof msg))
            continue;
        if (!may_create &&
            !st_kauthz(r, ST_ACL_OP_CREATE, ST_ACL_RES_TOPIC, names[i].ptr, (size_t)names[i].len))
            continue;
        if ((item_of[i] = item_find(items, k, names[i])) >= 0)
            continue;
        items[k].name = st_arena_strndup(&r->arena, names[i].ptr, (size_t)names[i].len);
        items[k].count = -1;
        items[k].rf = -1;
        items[k].assigned = -1;
        if (items[k].name)
            item_of[i] = k++;
    }
    if (k == 0) {
        cb(r, arg);
        return;
    }
    *a = (autocreate_t){.r = r, .n = n, .item_of = item_of, .errors = errors, .cb = cb, .arg = arg};
    a->op.kind = ST_CTL_CREATE;
    a->op.hint = true; /* not the active controller: ask it to create them (controller.h) */
    a->op.n = k;
    a->op.items = items;
    a->op.cb = autocreate_done;
    st_ctl_submit(r->shard, &a->op);
}

/* ---- a coordinator's internal topic, created on first use (coordsvc.h) ---- */

typedef struct {
    st_ctl_op_t op;
    st_ctl_item_t item;
    const st_coordsvc_t *svc;
    st_kreq_t *r;
    st_coordsvc_ready_fn cb;
    void *arg;
} topic_create_t;

static void topic_created(st_kshard_t *s, st_ctl_op_t *op)
{
    topic_create_t *c = (topic_create_t *)op;
    (void)s;
    /* NOT_CONTROLLER: in a cluster, the active controller creates it (controller.h) */
    if (c->item.error && c->item.error != ST_KERR_TOPIC_ALREADY_EXISTS &&
        c->item.error != ST_KERR_NOT_CONTROLLER)
        ST_WARN("cannot create %s: %s", c->svc->topic, c->item.message);
    c->cb(c->r, c->arg);
}

void st_coordsvc_ensure_topic(st_kreq_t *r, const st_coordsvc_t *svc, st_coordsvc_ready_fn cb,
                              void *arg)
{
    if (st_coordsvc_topic(svc, r->shard->md)) {
        cb(r, arg);
        return;
    }
    topic_create_t *c = st_arena_zalloc(&r->arena, sizeof *c);
    if (!c) {
        cb(r, arg);
        return;
    }
    c->svc = svc;
    c->r = r;
    c->cb = cb;
    c->arg = arg;
    c->item.name = svc->topic;
    c->item.assigned = -1;
    st_coordsvc_topic_item(svc, r->shard->b->cfg, &c->item);
    c->op.kind = ST_CTL_CREATE;
    c->op.hint = true; /* not the active controller: ask it to create the topic */
    c->op.n = 1;
    c->op.items = &c->item;
    c->op.cb = topic_created;
    st_ctl_submit(r->shard, &c->op);
}
