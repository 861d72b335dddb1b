/*
 * index.c — offset and time index arrays: add, search, load with validation, encode.
 * Formats are drawn in index.h.
 */
#include "storage/index.h"

#include <errno.h>
#include <stdlib.h>

#include "base/buf.h"
#include "base/err.h"

void st_offidx_fini(st_offidx_t *x)
{
    free(x->e);
    x->e = NULL;
    x->n = x->cap = x->flushed = 0;
}

void st_timeidx_fini(st_timeidx_t *x)
{
    free(x->e);
    x->e = NULL;
    x->n = x->cap = x->flushed = 0;
}

void st_offidx_clear(st_offidx_t *x)
{
    x->n = x->flushed = 0;
}

void st_timeidx_clear(st_timeidx_t *x)
{
    x->n = x->flushed = 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

int st_offidx_add(st_offidx_t *x, uint32_t rel, uint32_t pos)
{
    if (grow((void **)&x->e, &x->cap, x->n + 1, sizeof *x->e) < 0)
        return -ENOMEM;
    x->e[x->n].rel = rel;
    x->e[x->n].pos = pos;
    x->n++;
    return 0;
}

int st_timeidx_add(st_timeidx_t *x, int64_t ts, uint32_t rel)
{
    if (grow((void **)&x->e, &x->cap, x->n + 1, sizeof *x->e) < 0)
        return -ENOMEM;
    x->e[x->n].ts = ts;
    x->e[x->n].rel = rel;
    x->n++;
    return 0;
}

ptrdiff_t st_offidx_floor(const st_offidx_t *x, uint32_t target)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)x->n; /* answer in [lo - 1, hi) */
    while (lo < hi) {
        ptrdiff_t mid = lo + (hi - lo) / 2;
        if (x->e[mid].rel <= target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

ptrdiff_t st_timeidx_below(const st_timeidx_t *x, int64_t target)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)x->n;
    while (lo < hi) {
        ptrdiff_t mid = lo + (hi - lo) / 2;
        if (x->e[mid].ts < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

void st_offidx_truncate_pos(st_offidx_t *x, uint32_t pos)
{
    while (x->n > 0 && x->e[x->n - 1].pos >= pos)
        x->n--;
    if (x->flushed > x->n)
        x->flushed = x->n;
}

void st_timeidx_truncate_rel(st_timeidx_t *x, uint32_t rel)
{
    while (x->n > 0 && x->e[x->n - 1].rel >= rel)
        x->n--;
    if (x->flushed > x->n)
        x->flushed = x->n;
}

int st_offidx_load(st_offidx_t *x, const uint8_t *p, size_t n, int64_t seg_size, int64_t max_rel)
{
    st_offidx_clear(x);
    size_t cnt = n / ST_OFFIDX_ENTRY;
    for (size_t i = 0; i < cnt; i++) {
        uint32_t rel = st_be32(p + i * ST_OFFIDX_ENTRY);
        uint32_t pos = st_be32(p + i * ST_OFFIDX_ENTRY + 4);
        if ((int64_t)rel > max_rel || (int64_t)pos >= seg_size ||
            (i > 0 && (rel <= x->e[i - 1].rel || pos <= x->e[i - 1].pos))) {
            st_offidx_clear(x);
            return ST_E_CORRUPT;
        }
        if (st_offidx_add(x, rel, pos) < 0) {
            st_offidx_clear(x);
            return -ENOMEM;
        }
    }
    x->flushed = x->n;
    return 0;
}

int st_timeidx_load(st_timeidx_t *x, const uint8_t *p, size_t n, int64_t max_rel)
{
    st_timeidx_clear(x);
    size_t cnt = n / ST_TIMEIDX_ENTRY;
    for (size_t i = 0; i < cnt; i++) {
        int64_t ts = (int64_t)st_be64(p + i * ST_TIMEIDX_ENTRY);
        uint32_t rel = st_be32(p + i * ST_TIMEIDX_ENTRY + 8);
        if ((int64_t)rel > max_rel || (i > 0 && (ts <= x->e[i - 1].ts || rel < x->e[i - 1].rel))) {
            st_timeidx_clear(x);
            return ST_E_CORRUPT;
        }
        if (st_timeidx_add(x, ts, rel) < 0) {
            st_timeidx_clear(x);
            return -ENOMEM;
        }
    }
    x->flushed = x->n;
    return 0;
}

void st_offidx_encode(const st_offidx_t *x, size_t from, uint8_t *out)
{
    for (size_t i = from; i < x->n; i++, out += ST_OFFIDX_ENTRY) {
        st_put_be32(out, x->e[i].rel);
        st_put_be32(out + 4, x->e[i].pos);
    }
}

void st_timeidx_encode(const st_timeidx_t *x, size_t from, uint8_t *out)
{
    for (size_t i = from; i < x->n; i++, out += ST_TIMEIDX_ENTRY) {
        st_put_be64(out, (uint64_t)x->e[i].ts);
        st_put_be32(out + 8, x->e[i].rel);
    }
}
