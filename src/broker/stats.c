/* stats.c — the latency buckets of the shards' counters (stats.h). */
#include "broker/stats.h"

const int64_t st_kstats_bounds_ns[ST_KSTATS_BUCKETS] = {
    50000,     100000,     250000,     500000,     1000000,     2500000,
    5000000,   10000000,   25000000,   50000000,   100000000,   250000000,
    500000000, 1000000000, 2500000000, 5000000000, 10000000000,
};

int st_kstats_bucket(int64_t ns)
{
    int i = 0;
    while (i < ST_KSTATS_BUCKETS && ns > st_kstats_bounds_ns[i])
        i++;
    return i;
}
