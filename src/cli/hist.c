/*
 * hist.c — HDR-style histogram (see hist.h for the bucket layout).
 */
#include "cli/hist.h"

#include <math.h>
#include <string.h>

void st_cli_hist_init(st_cli_hist_t *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

uint32_t st_cli_hist_index(uint64_t v)
{
    if (v < ST_CLI_HIST_SUB)
        return (uint32_t)v;
    unsigned high_bit = 63u - (unsigned)__builtin_clzll(v); /* >= ST_CLI_HIST_BITS */
    unsigned shift = high_bit - ST_CLI_HIST_BITS + 1;       /* >= 1 */
    return shift * ST_CLI_HIST_HALF + (uint32_t)(v >> shift);
}

uint64_t st_cli_hist_bucket_high(uint32_t idx)
{
    if (idx < ST_CLI_HIST_SUB)
        return idx;
    unsigned shift = idx / ST_CLI_HIST_HALF - 1;
    uint64_t m = idx - shift * ST_CLI_HIST_HALF; /* in [HALF, SUB) */
    if (shift >= 64 - ST_CLI_HIST_BITS + 1 - 1 && m == ST_CLI_HIST_SUB - 1)
        return UINT64_MAX;
    return ((m + 1) << shift) - 1;
}

void st_cli_hist_record_n(st_cli_hist_t *h, uint64_t v, uint64_t n)
{
    if (!n)
        return;
    h->counts[st_cli_hist_index(v)] += n;
    h->total += n;
    h->sum += (long double)v * (long double)n;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void st_cli_hist_record(st_cli_hist_t *h, uint64_t v)
{
    st_cli_hist_record_n(h, v, 1);
}

void st_cli_hist_merge(st_cli_hist_t *dst, const st_cli_hist_t *src)
{
    for (uint32_t i = 0; i < ST_CLI_HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    dst->total += src->total;
    dst->sum += src->sum;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t st_cli_hist_percentile(const st_cli_hist_t *h, double q)
{
    if (!h->total)
        return 0;
    if (q >= 100.0)
        return h->max;
    if (q < 0)
        q = 0;
    uint64_t rank = (uint64_t)ceil(q / 100.0 * (double)h->total);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < ST_CLI_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            uint64_t v = st_cli_hist_bucket_high(i);
            if (v > h->max)
                v = h->max;
            if (v < h->min)
                v = h->min;
            return v;
        }
    }
    return h->max;
}

double st_cli_hist_mean(const st_cli_hist_t *h)
{
    return h->total ? (double)(h->sum / (long double)h->total) : 0.0;
}
