/*
 * hist.h — an HDR-style latency histogram for `strata bench`.
 *
 * Values (nanoseconds, or any unsigned unit) land in log-linear buckets: values below
 * ST_CLI_HIST_SUB are counted exactly; above, each power-of-two range [2^h, 2^(h+1)) is split
 * into ST_CLI_HIST_SUB/2 equal sub-buckets, so a reported percentile is within
 * 2/ST_CLI_HIST_SUB (0.8%) above the true value and never below it. Memory is fixed
 * (about 60 KiB), recording is O(1) with no allocation, and two histograms merge by adding
 * counts, so each bench thread keeps its own and the summary merges them.
 *
 *   bucket index  0 .. SUB-1           value = index (exact)
 *                 SUB + k*SUB/2 + j    value in [(SUB/2 + j) << (k+1), (SUB/2 + j + 1) << (k+1))
 *
 * min, max, count and sum are kept exactly. Not thread-safe: one writer per histogram.
 */
#ifndef ST_CLI_HIST_H
#define ST_CLI_HIST_H

#include <stdint.h>

#define ST_CLI_HIST_BITS    8
#define ST_CLI_HIST_SUB     (1u << ST_CLI_HIST_BITS)
#define ST_CLI_HIST_HALF    (ST_CLI_HIST_SUB / 2)
#define ST_CLI_HIST_BUCKETS ((64 - ST_CLI_HIST_BITS + 2) * ST_CLI_HIST_HALF)

typedef struct st_cli_hist {
    uint64_t counts[ST_CLI_HIST_BUCKETS]; /* per bucket */
    uint64_t total;                       /* values recorded */
    uint64_t min;                         /* smallest value (UINT64_MAX when empty) */
    uint64_t max;                         /* largest value (0 when empty) */
    long double sum;                      /* for the mean */
} st_cli_hist_t;

void st_cli_hist_init(st_cli_hist_t *h);
/* Records one value. */
void st_cli_hist_record(st_cli_hist_t *h, uint64_t v);
/* Records `n` copies of one value. */
void st_cli_hist_record_n(st_cli_hist_t *h, uint64_t v, uint64_t n);
/* Adds src's counts into dst. */
void st_cli_hist_merge(st_cli_hist_t *dst, const st_cli_hist_t *src);
/*
 * Returns the value at percentile q (0 < q <= 100): the highest value of the bucket holding
 * the ceil(q% * total)-th smallest value, clamped to max. Returns 0 when empty.
 */
uint64_t st_cli_hist_percentile(const st_cli_hist_t *h, double q);
/* Mean of the recorded values (0 when empty). */
double st_cli_hist_mean(const st_cli_hist_t *h);

/* Bucket index of v, and the highest value that maps to a bucket (exposed for tests). */
uint32_t st_cli_hist_index(uint64_t v);
uint64_t st_cli_hist_bucket_high(uint32_t idx);

#endif
