/*
 * stats.h — what a shard's transaction coordinator reports for metrics (st_tcoord_stats in
 * coord.h fills it). Plain data with no dependency, so the admin snapshot (admin/snap.h) can
 * hold one without the protocol headers.
 */
#ifndef ST_TXN_STATS_H
#define ST_TXN_STATS_H

#include <stdint.h>

#define ST_TXN_STATES_MAX 8 /* records.h's ST_TXN_NSTATES */

/* What the coordinator holds and has done, for metrics. */
typedef struct st_tcoord_stats {
    int32_t partitions;             /* of __transaction_state loaded (served) */
    int32_t ids[ST_TXN_STATES_MAX]; /* loaded transactional ids, by state (records.h ids) */
    uint64_t committed, aborted;    /* transactions completed (Complete* durable) */
    uint64_t timed_out;             /* Ongoing ones the coordinator aborted at their timeout */
    uint64_t markers_retried;       /* marker jobs sent again (a job that could not finish) */
} st_tcoord_stats_t;

#endif
