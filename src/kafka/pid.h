/*
 * pid.h — producer ids that no two brokers of a cluster hand out twice, without asking the
 * controller (InitProducerId, h_init_producer_id.c).
 *
 * Every broker (a single one too) builds its ids from its node.id and the millisecond of its
 * first id (a single broker of an earlier release handed out its start's millisecond times
 * 2^20 plus a counter: ids above 2^60, which these never reach):
 *
 *    63 62         53 52                                      12 11          0
 *   +--+------------+------------------------------------------+-------------+
 *   |0 |  node.id   |  ms since 2024-01-01 of this run's first  |   counter   |
 *   +--+------------+------------------------------------------+-------------+
 *         10 bits                     41 bits                       12 bits
 *
 * The n-th id of a run is base + n: past 4096 the counter carries into the milliseconds.
 * So ids are unique:
 *   - across brokers, by the top bits, as long as node ids are below 1024;
 *   - across one broker's runs, as long as a run hands out fewer than 4096 ids per millisecond
 *     it lasts (four million a second) and the clock is not set back by more than a run lasted:
 *     each run starts above every id of the ones before.
 * Limits: a node.id of 1024 or more is folded (mod 1024) and may repeat another broker's ids;
 * the milliseconds fit until 2093.
 *
 * Threads: any shard.
 */
#ifndef ST_KAFKA_PID_H
#define ST_KAFKA_PID_H

#include <stdatomic.h>
#include <stdint.h>

#define ST_KPID_NODE_BITS  10
#define ST_KPID_COUNT_BITS 12
#define ST_KPID_EPOCH_MS   INT64_C(1704067200000) /* 2024-01-01T00:00:00Z */

/* The first id of a run of broker node_id whose first id is handed out at now_ms (wall clock). */
int64_t st_kpid_base(int32_t node_id, int64_t now_ms);

/* The next id of this run of broker node_id: *next holds the run's next id, 0 before the
 * first (which sets it from st_kpid_base(node_id, now_ms)). */
int64_t st_kpid_next(_Atomic int64_t *next, int32_t node_id, int64_t now_ms);

/* The next id of this process's run (one counter for the idempotent producers of
 * InitProducerId and the transaction coordinators of every shard, so no two repeat). */
int64_t st_kpid_take(int32_t node_id);

#endif
