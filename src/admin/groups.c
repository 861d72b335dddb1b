/*
 * groups.c — the group collector: what the consumer-group coordinator of a shard holds, in the
 * shard's snapshot (groups, their state and member count, their committed offsets).
 *
 * Runs on the shard's thread while it builds its snapshot (admin.h), through the coordinator's
 * read-only calls (list, describe, fetch all offsets), into a scratch arena reset each time.
 */
#include "admin/groups.h"

#include <string.h>

#include "group/coord.h"
#include "kafka/group_route.h"

/* A NUL-terminated copy of a protocol string. */
static const char *cstr(st_arena_t *a, st_kstr_t s)
{
    return st_arena_strndup(a, s.len > 0 && s.ptr ? s.ptr : "", s.len > 0 ? (size_t)s.len : 0);
}

void st_admin_collect_groups(void *arg, st_kshard_t *s, st_admin_groups_t *out)
{
    (void)arg;
    if (!st_kgroup_coord(s) || st_gcoord_group_count(st_kgroup_coord(s)) == 0)
        return;
    const st_md_topic_t *t = st_md_find(s->md, ST_OFFSETS_TOPIC, (int32_t)strlen(ST_OFFSETS_TOPIC));
    if (!t)
        return;
    st_arena_t a;
    st_arena_init(&a, 16384);
    st_kp_list_groups_resp_group_t *list = NULL;
    int32_t n = 0;
    st_gcoord_list(st_kgroup_coord(s), NULL, 0, NULL, 0, &a, &list, &n);
    for (int32_t i = 0; list && i < n; i++) {
        st_kstr_t id = list[i].group_id;
        int32_t p = st_gcoord_partition_for(id, t->npartitions);
        st_kp_describe_groups_resp_group_t d;
        st_kp_describe_groups_resp_group_init(&d);
        st_gcoord_describe(st_kgroup_coord(s), p, id, 5, &a, &d);
        if (d.error_code)
            continue;
        const char *gid = cstr(&a, id);
        if (!gid || st_admin_groups_add(out, gid, cstr(&a, d.group_state), d.members_count))
            break;
        st_goffsets_t o;
        memset(&o, 0, sizeof o);
        o.group_id = id;
        o.all = true;
        st_gcoord_fetch(st_kgroup_coord(s), p, &o, &a);
        for (int k = 0; !o.error && k < o.n; k++) {
            const char *topic = cstr(&a, o.parts[k].topic);
            if (o.parts[k].offset >= 0 && topic &&
                st_admin_groups_add_offset(out, gid, topic, o.parts[k].partition,
                                           o.parts[k].offset))
                break;
        }
    }
    st_arena_fini(&a);
}
