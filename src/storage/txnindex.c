/*
 * txnindex.c — the transaction index's entries and their file bytes. Layout: txnindex.h.
 */
#include "storage/txnindex.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"

void st_txnidx_fini(st_txnidx_t *x)
{
    free(x->e);
    memset(x, 0, sizeof *x);
}

void st_txnidx_clear(st_txnidx_t *x)
{
    x->n = 0;
    x->flushed = 0;
}

int st_txnidx_add(st_txnidx_t *x, const st_txn_aborted_t *a)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 4;
        st_txn_aborted_t *e = realloc(x->e, cap * sizeof *e);
        if (!e)
            return -ENOMEM;
        x->e = e;
        x->cap = cap;
    }
    x->e[x->n++] = *a;
    return 0;
}

void st_txnidx_truncate(st_txnidx_t *x, int64_t offset)
{
    while (x->n > 0 && x->e[x->n - 1].last_offset >= offset)
        x->n--;
    if (x->flushed > x->n)
        x->flushed = x->n;
}

int st_txnidx_load(st_txnidx_t *x, const uint8_t *p, size_t n, int64_t base, int64_t next)
{
    st_txnidx_clear(x);
    if (n % ST_TXNIDX_ENTRY != 0)
        return ST_E_CORRUPT;
    int64_t prev = base - 1;
    for (size_t i = 0; i < n; i += ST_TXNIDX_ENTRY) {
        const uint8_t *q = p + i;
        st_txn_aborted_t a = {(int64_t)st_be64(q + 2), (int64_t)st_be64(q + 10),
                              (int64_t)st_be64(q + 18), (int64_t)st_be64(q + 26)};
        if (st_be16(q) != 0 || a.producer_id < 0 || a.first_offset < 0 ||
            a.first_offset > a.last_offset || a.last_offset <= prev || a.last_offset >= next ||
            a.last_stable_offset < 0) {
            st_txnidx_clear(x);
            return ST_E_CORRUPT;
        }
        if (st_txnidx_add(x, &a) < 0) {
            st_txnidx_clear(x);
            return -ENOMEM;
        }
        prev = a.last_offset;
    }
    x->flushed = x->n;
    return 0;
}

void st_txnidx_encode(const st_txnidx_t *x, size_t from, uint8_t *out)
{
    for (size_t i = from; i < x->n; i++, out += ST_TXNIDX_ENTRY) {
        st_put_be16(out, 0);
        st_put_be64(out + 2, (uint64_t)x->e[i].producer_id);
        st_put_be64(out + 10, (uint64_t)x->e[i].first_offset);
        st_put_be64(out + 18, (uint64_t)x->e[i].last_offset);
        st_put_be64(out + 26, (uint64_t)x->e[i].last_stable_offset);
    }
}
