/*
 * txn.c — the log's transaction indexes: recording an aborted transaction, listing those that
 * overlap a read, and rebuilding the .txnindex files at open from the batches themselves.
 *
 * The rebuild (st_log_txn_rebuild) runs when a segment's .txnindex was missing or malformed,
 * or the segment was recovered by a scan (its tail was never known durable): it walks every
 * batch header from the first segment, keeping each producer's ongoing transaction (the first
 * offset of its first transactional batch since its last marker), and at each abort marker of
 * a transaction it knows it writes the entry Kafka would have: (producer, first offset, marker
 * offset, the smallest first offset of another ongoing transaction, or marker + 1). Only the
 * flagged segments' files are rewritten. Storage keeps this small tracker of its own: it knows
 * nothing of the partition's producer state, which is rebuilt after the log opens.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/err.h"
#include "base/log.h"
#include "storage/log_impl.h"

int st_log_txn_add(st_log_t *log, const st_txn_aborted_t *a)
{
    if (log->closed)
        return ST_E_CLOSED;
    int i = st_log_seg_for(log, a->last_offset);
    if (i < 0 || a->last_offset >= log->segs[i]->next_offset)
        return ST_E_OUT_OF_RANGE;
    st_segment_t *s = log->segs[i];
    if (s->txn.n > 0 && s->txn.e[s->txn.n - 1].last_offset >= a->last_offset)
        return ST_E_INVALID;
    return st_segment_txn_add(s, a);
}

int st_log_txn_aborted(const st_log_t *log, int64_t from, int64_t to, st_txn_aborted_t *out,
                       int cap)
{
    int n = 0;
    int i = st_log_seg_for(log, from);
    if (i < 0)
        i = 0;
    for (; i < log->nsegs; i++) {
        const st_txnidx_t *x = &log->segs[i]->txn;
        bool complete = false;
        for (size_t k = 0; k < x->n; k++) {
            const st_txn_aborted_t *a = &x->e[k];
            if (a->last_offset >= from && a->first_offset < to) {
                if (n < cap)
                    out[n] = *a;
                n++;
            }
            if (a->last_stable_offset >= to) {
                complete = true;
                break;
            }
        }
        if (complete)
            break;
    }
    return n;
}

/* ---- rebuild ---- */

typedef struct {
    int64_t pid, first;
} ongoing_t;

typedef struct {
    ongoing_t *o;
    size_t n, cap;
    st_txn_aborted_t *out; /* entries of the segment being rebuilt */
    size_t nout, capout;
} tracker_t;

static ongoing_t *find(tracker_t *t, int64_t pid)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->o[i].pid == pid)
            return &t->o[i];
    return NULL;
}

static int grow(void **p, size_t *cap, size_t esz)
{
    size_t c = *cap ? *cap * 2 : 8;
    void *q = realloc(*p, c * esz);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

/* One transactional batch of the walk (control: type read from its record). */
static int track(tracker_t *t, const st_batch_hdr_t *h, int type, bool record)
{
    ongoing_t *o = find(t, h->producer_id);
    if (type < 0) {
        if (o)
            return 0;
        if (t->n == t->cap && grow((void **)&t->o, &t->cap, sizeof *t->o) < 0)
            return -ENOMEM;
        t->o[t->n++] = (ongoing_t){h->producer_id, h->base_offset};
        return 0;
    }
    if (!o)
        return 0; /* an empty transaction, or one begun before the log start */
    int64_t first = o->first;
    *o = t->o[--t->n];
    if (type != ST_CONTROL_ABORT || !record)
        return 0;
    int64_t lso = h->base_offset + 1;
    for (size_t i = 0; i < t->n; i++)
        if (t->o[i].first < lso)
            lso = t->o[i].first;
    if (t->nout == t->capout && grow((void **)&t->out, &t->capout, sizeof *t->out) < 0)
        return -ENOMEM;
    t->out[t->nout++] = (st_txn_aborted_t){h->producer_id, first, h->base_offset, lso};
    return 0;
}

/* The marker type of the control batch at pos (-1: not a marker). */
static int control_type(st_segment_t *s, int64_t pos, const st_batch_hdr_t *h)
{
    uint8_t small[256];
    size_t bs = (size_t)st_batch_size(h);
    uint8_t *b = bs <= sizeof small ? small : malloc(bs);
    if (!b)
        return -ENOMEM;
    ssize_t r = st_file_pread(s->log, b, bs, pos);
    int16_t type = -1;
    int32_t ce;
    int rc = r == (ssize_t)bs ? st_batch_control_parse(b, bs, &type, &ce) : ST_E_CORRUPT;
    if (b != small)
        free(b);
    if (r < 0)
        return (int)r;
    return rc == 0 ? type : -1;
}

int st_log_txn_rebuild(st_log_t *log)
{
    int first = -1;
    for (int i = 0; i < log->nsegs && first < 0; i++)
        if (log->segs[i]->txn_rebuild)
            first = i;
    if (first < 0)
        return 0;
    tracker_t t = {0};
    st_segment_reader_t *r = malloc(sizeof *r);
    int rc = r ? 0 : -ENOMEM;
    int rebuilt = 0;
    for (int i = 0; rc == 0 && i < log->nsegs; i++) {
        st_segment_t *s = log->segs[i];
        bool record = s->txn_rebuild;
        t.nout = 0;
        st_segment_reader_init(r, s);
        for (int64_t pos = 0; rc == 0 && pos < s->size;) {
            st_batch_hdr_t h;
            if ((rc = st_segment_read_hdr(r, pos, &h)) < 0)
                break;
            if ((h.attributes & ST_BATCH_ATTR_TRANSACTIONAL) && h.producer_id >= 0) {
                int type = -1;
                if (h.attributes & ST_BATCH_ATTR_CONTROL)
                    type = control_type(s, pos, &h);
                if (type < -1)
                    rc = type;
                else if (!(h.attributes & ST_BATCH_ATTR_CONTROL) || type >= 0)
                    rc = track(&t, &h, type, record);
            }
            pos += st_batch_size(&h);
        }
        if (rc == 0 && record) {
            rc = st_segment_set_txn(s, t.out, t.nout);
            rebuilt++;
        }
    }
    if (rc == 0 && rebuilt)
        ST_INFO("storage: %s: rebuilt the transaction index of %d segment(s)", log->dir, rebuilt);
    free(r);
    free(t.o);
    free(t.out);
    return rc;
}
