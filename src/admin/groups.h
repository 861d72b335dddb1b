/*
 * groups.h — the collector that puts a shard's consumer groups (src/group/ coordinator) into
 * its metrics snapshot. st_admin_create registers it; shard thread only (admin.h).
 */
#ifndef ST_ADMIN_GROUPS_H
#define ST_ADMIN_GROUPS_H

#include "admin/admin.h"

void st_admin_collect_groups(void *arg, st_kshard_t *s, st_admin_groups_t *out);

#endif
