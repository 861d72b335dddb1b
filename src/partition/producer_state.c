/*
 * producer_state.c — the last batches of each idempotent producer of a partition, its bounds
 * (expiry, a cap with least-recently-used eviction) and its snapshot files.
 *
 * Snapshot file <offset>.snapshot (20 digits, like a segment's name), big-endian; every byte
 * also in docs/format.md:
 *
 *   0   4  magic "STPS"
 *   4   4  CRC-32C of bytes 8..end
 *   8   2  version (2; version 1 still loads)
 *   10  2  reserved (0)
 *   12  4  entry count
 *   16  8  offset: the state of every batch whose last offset is below it
 *   24  8  written at (wall ms)
 *   32     entries, least recently used first:
 *          0  8  producer id (>= 0)      8  2  epoch (>= 0)     10  2  batches (0..5)
 *          12 4  coordinator epoch (>= -1; version 1: reserved 0, read as -1)
 *          16 8  last append (ms)
 *          version 2 only: 24 8  ongoing transaction's first offset (-1: none; < offset)
 *                          32 8  its start (wall ms)
 *          24 (v1) / 40 (v2)  per batch, oldest first, 24 bytes: first sequence i32, last
 *                sequence i32, first offset i64, last offset i64 (first <= last < offset,
 *                increasing)
 *
 * Invariants: every entry is in exactly one hash chain and in the use list; the list runs
 * from least to most recently used and last_ms never decreases along it (so expiry stops at
 * the first entry still live); count <= max_producers when there is a cap.
 */
#include "partition/producer_state.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/kerr.h"
#include "storage/log.h"

#define SNAP_MAGIC     "STPS"
#define SNAP_VERSION   2
#define SNAP_HDR       32
#define SNAP_ENTRY_V1  24
#define SNAP_ENTRY     40
#define SNAP_BATCH     24
#define SNAP_EXT       ".snapshot"
#define SNAP_MAX_BYTES (256u << 20)
#define SNAP_MIN_MS    60000 /* periodic snapshots at most this often */

void st_pstate_init(st_pstate_t *ps)
{
    memset(ps, 0, sizeof *ps);
    ps->max_producers = ST_PSTATE_MAX_PRODUCERS;
    ps->expiration_ms = ST_PSTATE_EXPIRATION_MS;
    ps->snap_offset = -1;
}

static void st_pstate_clear(st_pstate_t *ps)
{
    for (st_pentry_t *e = ps->oldest, *next; e; e = next) {
        next = e->newer;
        free(e);
    }
    free(ps->buckets);
    ps->buckets = NULL;
    ps->nbuckets = 0;
    ps->count = 0;
    ps->oldest = ps->newest = NULL;
    free(ps->txns);
    ps->txns = NULL;
    ps->ntxns = ps->captxns = 0;
}

void st_pstate_fini(st_pstate_t *ps)
{
    st_pstate_clear(ps);
    free(ps->dir);
    ps->dir = NULL;
}

void st_pstate_set_limits(st_pstate_t *ps, size_t max_producers, int64_t expiration_ms)
{
    ps->max_producers = max_producers;
    ps->expiration_ms = expiration_ms;
}

int st_pstate_attach(st_pstate_t *ps, const st_fs_t *fs, const char *dir)
{
    char *d = strdup(dir);
    if (!d)
        return -ENOMEM;
    free(ps->dir);
    ps->dir = d;
    ps->fs = fs;
    return 0;
}

size_t st_pstate_count(const st_pstate_t *ps)
{
    return ps->count;
}

static size_t st_pid_hash(int64_t pid)
{
    uint64_t h = (uint64_t)pid * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 31));
}

const st_pentry_t *st_pstate_find(const st_pstate_t *ps, int64_t pid)
{
    if (ps->nbuckets == 0)
        return NULL;
    for (st_pentry_t *e = ps->buckets[st_pid_hash(pid) & (ps->nbuckets - 1)]; e; e = e->hnext)
        if (e->pid == pid)
            return e;
    return NULL;
}

bool st_pstate_is_last(const st_pstate_t *ps, int64_t pid, int64_t last_offset)
{
    const st_pentry_t *e = st_pstate_find(ps, pid);
    return e && e->nbatches > 0 && e->batches[e->nbatches - 1].last_offset == last_offset;
}

static void lru_unlink(st_pstate_t *ps, st_pentry_t *e)
{
    if (e->older)
        e->older->newer = e->newer;
    else
        ps->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        ps->newest = e->older;
    e->older = e->newer = NULL;
}

static void lru_push(st_pstate_t *ps, st_pentry_t *e)
{
    e->older = ps->newest;
    e->newer = NULL;
    if (ps->newest)
        ps->newest->newer = e;
    else
        ps->oldest = e;
    ps->newest = e;
}

static void st_pstate_remove(st_pstate_t *ps, st_pentry_t *e)
{
    st_pentry_t **pp = &ps->buckets[st_pid_hash(e->pid) & (ps->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(ps, e);
    ps->count--;
    free(e);
}

static int st_pstate_grow(st_pstate_t *ps)
{
    size_t n = ps->nbuckets ? ps->nbuckets * 2 : 16;
    st_pentry_t **b = calloc(n, sizeof *b);
    if (!b)
        return -ENOMEM;
    for (size_t i = 0; i < ps->nbuckets; i++)
        for (st_pentry_t *e = ps->buckets[i], *next; e; e = next) {
            next = e->hnext;
            size_t k = st_pid_hash(e->pid) & (n - 1);
            e->hnext = b[k];
            b[k] = e;
        }
    free(ps->buckets);
    ps->buckets = b;
    ps->nbuckets = n;
    return 0;
}

/* A new, empty entry for pid (not present), most recently used; evicts for the cap. */
static st_pentry_t *st_pstate_insert(st_pstate_t *ps, int64_t pid, int16_t epoch)
{
    if (ps->count + 1 > ps->nbuckets && st_pstate_grow(ps))
        return NULL;
    st_pentry_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    while (ps->max_producers > 0 && ps->count >= ps->max_producers) {
        st_pentry_t *v = ps->oldest;
        while (v && v->txn_first >= 0)
            v = v->newer; /* an ongoing transaction holds the LSO: never forgotten */
        if (!v)
            break;
        st_pstate_remove(ps, v);
        ps->evicted++;
    }
    e->pid = pid;
    e->epoch = epoch;
    e->txn_first = -1;
    e->txn_start_ms = -1;
    e->coordinator_epoch = -1;
    e->refused_seq = -1;
    size_t k = st_pid_hash(pid) & (ps->nbuckets - 1);
    e->hnext = ps->buckets[k];
    ps->buckets[k] = e;
    lru_push(ps, e);
    ps->count++;
    return e;
}

int st_pstate_check(const st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                    int32_t last_seq, st_pbatch_t *dup)
{
    const st_pentry_t *e = st_pstate_find(ps, pid);
    if (!e)
        return ST_PSTATE_APPEND; /* a producer new to this partition (or forgotten) */
    if (epoch < e->epoch)
        return -ST_KERR_INVALID_PRODUCER_EPOCH;
    if (e->nbatches == 0)
        return ST_PSTATE_APPEND; /* every batch it wrote was cut off: it may start anywhere */
    if (epoch > e->epoch)
        return first_seq == 0 ? ST_PSTATE_APPEND : -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    for (int i = 0; i < e->nbatches; i++)
        if (e->batches[i].first_seq == first_seq && e->batches[i].last_seq == last_seq) {
            *dup = e->batches[i];
            return ST_PSTATE_DUPLICATE;
        }
    if (first_seq != st_pstate_seq_add(e->batches[e->nbatches - 1].last_seq, 1))
        return -ST_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    return ST_PSTATE_APPEND;
}

int st_pstate_record(st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                     int32_t last_seq, int64_t first_offset, int64_t last_offset, int64_t ts_ms)
{
    st_pentry_t *e = (st_pentry_t *)st_pstate_find(ps, pid);
    if (!e) {
        if (!(e = st_pstate_insert(ps, pid, epoch)))
            return -ENOMEM;
    } else if (e != ps->newest) {
        lru_unlink(ps, e);
        lru_push(ps, e);
    }
    /* The use list stays ordered by time even if clocks or batch timestamps go back. */
    if (e->older && ts_ms < e->older->last_ms)
        ts_ms = e->older->last_ms;
    e->last_ms = ts_ms;
    if (epoch != e->epoch) {
        e->epoch = epoch;
        e->nbatches = 0;
    }
    if (e->nbatches == ST_PSTATE_BATCHES) {
        memmove(&e->batches[0], &e->batches[1], (ST_PSTATE_BATCHES - 1) * sizeof e->batches[0]);
        e->nbatches--;
    }
    e->batches[e->nbatches++] = (st_pbatch_t){first_seq, last_seq, first_offset, last_offset};
    e->refused_seq = -1;
    ps->batches_since++;
    return 0;
}

/* The sequence pid's next batch starts at, -1 when any may come (unknown, nothing cached). */
static int32_t next_seq_of(const st_pentry_t *e, int16_t epoch)
{
    if (!e || e->nbatches == 0 || e->epoch != epoch)
        return -1;
    return st_pstate_seq_add(e->batches[e->nbatches - 1].last_seq, 1);
}

int64_t st_pstate_last_offset(const st_pstate_t *ps, int64_t pid)
{
    const st_pentry_t *e = st_pstate_find(ps, pid);
    return e && e->nbatches > 0 ? e->batches[e->nbatches - 1].last_offset : -1;
}

void st_pstate_note_refused(st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                            int16_t error, int64_t now_ms)
{
    st_pentry_t *e = (st_pentry_t *)st_pstate_find(ps, pid);
    int32_t next = next_seq_of(e, epoch);
    if (next < 0 || first_seq != next)
        return; /* not the batch the producer owes next: no gap can follow from it */
    e->refused_seq = first_seq;
    e->refused_error = error;
    e->refused_ms = now_ms;
}

int16_t st_pstate_refused_gap(const st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                              int64_t now_ms)
{
    const st_pentry_t *e = st_pstate_find(ps, pid);
    int32_t next = next_seq_of(e, epoch);
    if (next < 0 || e->refused_seq != next || now_ms - e->refused_ms > ST_PSTATE_REFUSED_MS)
        return 0;
    /* a batch past the refused one (sequences wrap at INT32_MAX) */
    int32_t ahead = (int32_t)(((int64_t)first_seq - next + ((int64_t)INT32_MAX + 1)) %
                              ((int64_t)INT32_MAX + 1));
    return ahead > 0 && ahead < (1 << 30) ? e->refused_error : 0;
}

int st_pstate_check_batch(const st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                          int32_t last_seq, bool transactional, st_pbatch_t *dup)
{
    const st_pentry_t *e = st_pstate_find(ps, pid);
    int v;
    if (transactional && first_seq == -1) /* the coordinator's own records: epoch only */
        v = e && epoch < e->epoch ? -ST_KERR_INVALID_PRODUCER_EPOCH : ST_PSTATE_APPEND;
    else
        v = st_pstate_check(ps, pid, epoch, first_seq, last_seq, dup);
    if (v == ST_PSTATE_APPEND && e && e->txn_first >= 0 && !transactional)
        return -ST_KERR_INVALID_TXN_STATE;
    return v;
}

/* Adds pid's transaction to the unstable list (ongoing: last -1). */
static int txn_push(st_pstate_t *ps, int64_t pid, int64_t first, int64_t last, int64_t start_ms)
{
    if (ps->ntxns == ps->captxns) {
        size_t cap = ps->captxns ? ps->captxns * 2 : 8;
        st_ptxn_t *t = realloc(ps->txns, cap * sizeof *t);
        if (!t)
            return -ENOMEM;
        ps->txns = t;
        ps->captxns = cap;
    }
    ps->txns[ps->ntxns++] = (st_ptxn_t){pid, first, last, start_ms};
    return 0;
}

static st_ptxn_t *txn_ongoing(st_pstate_t *ps, int64_t pid)
{
    for (size_t i = 0; i < ps->ntxns; i++)
        if (ps->txns[i].pid == pid && ps->txns[i].last_offset < 0)
            return &ps->txns[i];
    return NULL;
}

static void txn_drop(st_pstate_t *ps, size_t i)
{
    ps->txns[i] = ps->txns[--ps->ntxns];
}

int st_pstate_record_batch(st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t first_seq,
                           int32_t last_seq, int64_t first_offset, int64_t last_offset,
                           int64_t ts_ms, bool transactional)
{
    st_pentry_t *e = (st_pentry_t *)st_pstate_find(ps, pid);
    int rc;
    if (transactional && first_seq < 0) {
        /* no sequence: the producer is noted (epoch, use) but no batch is cached */
        if (!e && !(e = st_pstate_insert(ps, pid, epoch)))
            return -ENOMEM;
        if (e != ps->newest) {
            lru_unlink(ps, e);
            lru_push(ps, e);
        }
        if (e->older && ts_ms < e->older->last_ms)
            ts_ms = e->older->last_ms;
        e->last_ms = ts_ms;
        if (epoch != e->epoch) {
            e->epoch = epoch;
            e->nbatches = 0;
        }
    } else if ((rc = st_pstate_record(ps, pid, epoch, first_seq, last_seq, first_offset,
                                      last_offset, ts_ms)) < 0) {
        return rc;
    } else {
        e = (st_pentry_t *)st_pstate_find(ps, pid);
    }
    if (transactional && e->txn_first < 0) {
        if ((rc = txn_push(ps, pid, first_offset, -1, ts_ms)) < 0)
            return rc;
        e->txn_first = first_offset;
        e->txn_start_ms = ts_ms;
    }
    return 0;
}

int st_pstate_check_marker(const st_pstate_t *ps, int64_t pid, int16_t epoch,
                           int32_t coordinator_epoch)
{
    const st_pentry_t *e = st_pstate_find(ps, pid);
    if (!e)
        return 0;
    if (epoch < e->epoch)
        return -ST_KERR_INVALID_PRODUCER_EPOCH;
    if (coordinator_epoch < e->coordinator_epoch)
        return -ST_KERR_TRANSACTION_COORDINATOR_FENCED;
    return 0;
}

int st_pstate_end_txn(st_pstate_t *ps, int64_t pid, int16_t epoch, int32_t coordinator_epoch,
                      int64_t offset, int64_t ts_ms, int64_t *first)
{
    *first = -1;
    st_pentry_t *e = (st_pentry_t *)st_pstate_find(ps, pid);
    if (!e && !(e = st_pstate_insert(ps, pid, epoch)))
        return -ENOMEM;
    if (e != ps->newest) {
        lru_unlink(ps, e);
        lru_push(ps, e);
    }
    if (e->older && ts_ms < e->older->last_ms)
        ts_ms = e->older->last_ms;
    e->last_ms = ts_ms;
    if (epoch != e->epoch) {
        e->epoch = epoch;
        e->nbatches = 0;
    }
    e->coordinator_epoch = coordinator_epoch;
    if (e->txn_first < 0)
        return 0;
    *first = e->txn_first;
    e->txn_first = -1;
    e->txn_start_ms = -1;
    st_ptxn_t *t = txn_ongoing(ps, pid);
    if (t)
        t->last_offset = offset; /* stable once the high watermark passes the marker */
    return 0;
}

int64_t st_pstate_first_ongoing(const st_pstate_t *ps, int64_t pid)
{
    int64_t m = -1;
    for (size_t i = 0; i < ps->ntxns; i++) {
        const st_ptxn_t *t = &ps->txns[i];
        if (t->last_offset < 0 && t->pid != pid && (m < 0 || t->first_offset < m))
            m = t->first_offset;
    }
    return m;
}

int64_t st_pstate_first_unstable(const st_pstate_t *ps)
{
    int64_t m = -1;
    for (size_t i = 0; i < ps->ntxns; i++)
        if (m < 0 || ps->txns[i].first_offset < m)
            m = ps->txns[i].first_offset;
    return m;
}

void st_pstate_hw_moved(st_pstate_t *ps, int64_t hw)
{
    for (size_t i = 0; i < ps->ntxns;)
        if (ps->txns[i].last_offset >= 0 && ps->txns[i].last_offset < hw)
            txn_drop(ps, i);
        else
            i++;
}

size_t st_pstate_ongoing(const st_pstate_t *ps, int64_t *oldest_start_ms)
{
    size_t n = 0;
    *oldest_start_ms = -1;
    for (size_t i = 0; i < ps->ntxns; i++) {
        const st_ptxn_t *t = &ps->txns[i];
        if (t->last_offset >= 0)
            continue;
        n++;
        if (*oldest_start_ms < 0 || t->start_ms < *oldest_start_ms)
            *oldest_start_ms = t->start_ms;
    }
    return n;
}

/* Truncation: transactions begun at or past end are forgotten; one whose marker went is
 * ongoing again. */
static void txn_truncate(st_pstate_t *ps, int64_t end)
{
    for (size_t i = 0; i < ps->ntxns;) {
        st_ptxn_t *t = &ps->txns[i];
        st_pentry_t *e = (st_pentry_t *)st_pstate_find(ps, t->pid);
        if (t->first_offset >= end) {
            if (e && e->txn_first == t->first_offset)
                e->txn_first = -1;
            txn_drop(ps, i);
            continue;
        }
        if (t->last_offset >= end) {
            t->last_offset = -1;
            if (e) {
                e->txn_first = t->first_offset;
                e->txn_start_ms = t->start_ms;
            }
        }
        i++;
    }
}

size_t st_pstate_expire(st_pstate_t *ps, int64_t now_ms)
{
    size_t n = 0;
    if (ps->expiration_ms < 0)
        return 0;
    for (st_pentry_t *e = ps->oldest, *next; e && now_ms - e->last_ms >= ps->expiration_ms;
         e = next) {
        next = e->newer;
        if (e->txn_first >= 0)
            continue; /* Kafka expires no producer with an ongoing transaction */
        st_pstate_remove(ps, e);
        n++;
    }
    ps->expired += n;
    return n;
}

/* ---- snapshot files ---------------------------------------------------------------------- */

static int snap_name(char *buf, size_t n, int64_t offset)
{
    int r = snprintf(buf, n, "%020" PRId64 SNAP_EXT, offset);
    return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

static int snap_path(const st_pstate_t *ps, char *buf, size_t n, int64_t offset)
{
    return st_storage_offset_path(buf, n, ps->dir, offset, SNAP_EXT);
}

typedef struct {
    int64_t *offs;
    int n, cap;
    int err;
} snap_list_t;

static int snap_list_cb(void *arg, const char *name, int is_dir)
{
    snap_list_t *l = arg;
    int64_t v;
    if (is_dir || st_storage_parse_offset_name(name, SNAP_EXT, &v) < 0)
        return 0;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        int64_t *o = realloc(l->offs, (size_t)cap * sizeof *o);
        if (!o) {
            l->err = -ENOMEM;
            return 1;
        }
        l->offs = o;
        l->cap = cap;
    }
    l->offs[l->n++] = v;
    return 0;
}

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The offsets of the snapshot files in the directory, newest first (*offs malloc'd). */
static int snap_list(const st_pstate_t *ps, int64_t **offs, int *n)
{
    snap_list_t l = {0};
    int rc = ps->fs->ops->listdir(ps->fs->ctx, ps->dir, snap_list_cb, &l);
    if (rc == 0)
        rc = l.err;
    if (rc < 0) {
        free(l.offs);
        return rc;
    }
    if (l.n > 1)
        qsort(l.offs, (size_t)l.n, sizeof *l.offs, cmp_desc);
    *offs = l.offs;
    *n = l.n;
    return 0;
}

static void snap_unlink(const st_pstate_t *ps, int64_t offset)
{
    char p[PATH_MAX];
    if (snap_path(ps, p, sizeof p, offset) == 0)
        ps->fs->ops->unlink(ps->fs->ctx, p);
}

void st_pstate_truncate(st_pstate_t *ps, int64_t end)
{
    for (st_pentry_t *e = ps->oldest; e; e = e->newer)
        while (e->nbatches > 0 && e->batches[e->nbatches - 1].last_offset >= end)
            e->nbatches--;
    txn_truncate(ps, end);
    /* A snapshot is only taken of durable offsets, which a failed sync never cuts; a
     * truncation below one makes it describe batches that are gone. */
    if (ps->fs && ps->snap_offset > end) {
        int64_t *offs;
        int n;
        if (snap_list(ps, &offs, &n) == 0) {
            ps->snap_offset = -1;
            bool unlinked = false;
            for (int i = 0; i < n; i++) {
                if (offs[i] > end) {
                    snap_unlink(ps, offs[i]);
                    unlinked = true;
                } else if (ps->snap_offset < 0) {
                    ps->snap_offset = offs[i];
                }
            }
            free(offs);
            /* the removal made durable: a crash must not bring back a snapshot of batches the
             * cut took (found by the replication simulation: an idempotent retry was answered
             * as a duplicate at offsets another batch holds). Rare (a truncation), small. */
            if (unlinked && ps->dir)
                ps->fs->ops->fsync_dir(ps->fs->ctx, ps->dir);
        }
    }
}

int st_pstate_encode(const st_pstate_t *ps, int64_t offset, int64_t now_ms, st_buf_t *out)
{
    size_t start = out->len;
    uint8_t *h = st_buf_extend(out, SNAP_HDR);
    if (!h)
        return -ENOMEM;
    uint32_t count = 0;
    for (const st_pentry_t *e = ps->oldest; e; e = e->newer) {
        int nb = 0;
        while (nb < e->nbatches && e->batches[nb].last_offset < offset)
            nb++;
        /* Batches at or past offset are replayed from the log; an entry whose cached
         * batches all lie there is rebuilt from it (an entry with none at all keeps its
         * epoch, see st_pstate_truncate). */
        bool txn = e->txn_first >= 0 && e->txn_first < offset; /* later: replayed */
        if (nb == 0 && e->nbatches > 0 && !txn)
            continue;
        uint8_t *p = st_buf_extend(out, SNAP_ENTRY + (size_t)nb * SNAP_BATCH);
        if (!p)
            return -ENOMEM;
        st_put_be64(p, (uint64_t)e->pid);
        st_put_be16(p + 8, (uint16_t)e->epoch);
        st_put_be16(p + 10, (uint16_t)nb);
        st_put_be32(p + 12, (uint32_t)e->coordinator_epoch);
        st_put_be64(p + 16, (uint64_t)e->last_ms);
        st_put_be64(p + 24, (uint64_t)(txn ? e->txn_first : -1));
        st_put_be64(p + 32, (uint64_t)(txn ? e->txn_start_ms : -1));
        for (int i = 0; i < nb; i++) {
            uint8_t *b = p + SNAP_ENTRY + (size_t)i * SNAP_BATCH;
            st_put_be32(b, (uint32_t)e->batches[i].first_seq);
            st_put_be32(b + 4, (uint32_t)e->batches[i].last_seq);
            st_put_be64(b + 8, (uint64_t)e->batches[i].first_offset);
            st_put_be64(b + 16, (uint64_t)e->batches[i].last_offset);
        }
        count++;
    }
    h = out->data + start; /* the buffer may have moved */
    memcpy(h, SNAP_MAGIC, 4);
    st_put_be16(h + 8, SNAP_VERSION);
    st_put_be32(h + 12, count);
    st_put_be64(h + 16, (uint64_t)offset);
    st_put_be64(h + 24, (uint64_t)now_ms);
    st_put_be32(h + 4, st_crc32c(0, h + 8, out->len - start - 8));
    return out->oom ? -ENOMEM : 0;
}

int st_pstate_decode(st_pstate_t *ps, const uint8_t *p, size_t n, int64_t *offset)
{
    if (n < SNAP_HDR || memcmp(p, SNAP_MAGIC, 4) != 0 ||
        (st_be16(p + 8) != SNAP_VERSION && st_be16(p + 8) != 1) || st_be16(p + 10) != 0 ||
        st_be32(p + 4) != st_crc32c(0, p + 8, n - 8))
        return ST_E_CORRUPT;
    bool v1 = st_be16(p + 8) == 1;
    size_t esz = v1 ? SNAP_ENTRY_V1 : SNAP_ENTRY;
    uint32_t count = st_be32(p + 12);
    int64_t off = (int64_t)st_be64(p + 16);
    if (off < 0 || count > (n - SNAP_HDR) / esz)
        return ST_E_CORRUPT;
    size_t pos = SNAP_HDR;
    int64_t prev_ms = INT64_MIN;
    for (uint32_t k = 0; k < count; k++) {
        if (n - pos < esz)
            goto corrupt;
        const uint8_t *q = p + pos;
        int64_t pid = (int64_t)st_be64(q);
        int16_t epoch = (int16_t)st_be16(q + 8);
        uint16_t nb = st_be16(q + 10);
        int32_t cepoch = (int32_t)st_be32(q + 12);
        int64_t last_ms = (int64_t)st_be64(q + 16);
        int64_t txn_first = v1 ? -1 : (int64_t)st_be64(q + 24);
        int64_t txn_ms = v1 ? -1 : (int64_t)st_be64(q + 32);
        if (pid < 0 || epoch < 0 || nb > ST_PSTATE_BATCHES || (v1 && cepoch != 0) || cepoch < -1 ||
            txn_first < -1 || txn_first >= off || last_ms < prev_ms || st_pstate_find(ps, pid) ||
            (n - pos - esz) / SNAP_BATCH < nb)
            goto corrupt;
        st_pentry_t *e = st_pstate_insert(ps, pid, epoch);
        if (!e || (txn_first >= 0 && txn_push(ps, pid, txn_first, -1, txn_ms) < 0)) {
            st_pstate_clear(ps);
            return -ENOMEM;
        }
        e->coordinator_epoch = v1 ? -1 : cepoch;
        e->txn_first = txn_first;
        e->txn_start_ms = txn_first >= 0 ? txn_ms : -1;
        e->last_ms = prev_ms = last_ms;
        int64_t prev_off = -1;
        for (int i = 0; i < nb; i++) {
            const uint8_t *b = q + esz + (size_t)i * SNAP_BATCH;
            st_pbatch_t pb = {(int32_t)st_be32(b), (int32_t)st_be32(b + 4), (int64_t)st_be64(b + 8),
                              (int64_t)st_be64(b + 16)};
            if (pb.first_seq < 0 || pb.last_seq < 0 || pb.first_offset <= prev_off ||
                pb.last_offset < pb.first_offset || pb.last_offset >= off)
                goto corrupt;
            prev_off = pb.last_offset;
            e->batches[e->nbatches++] = pb;
        }
        pos += esz + (size_t)nb * SNAP_BATCH;
    }
    if (pos != n)
        goto corrupt;
    *offset = off;
    return 0;
corrupt:
    st_pstate_clear(ps);
    return ST_E_CORRUPT;
}

int st_pstate_save(st_pstate_t *ps, int64_t offset, int64_t now_ms)
{
    if (!ps->fs)
        return 0;
    st_buf_t b;
    st_buf_init(&b);
    char name[64];
    int rc = snap_name(name, sizeof name, offset);
    if (rc == 0)
        rc = st_pstate_encode(ps, offset, now_ms, &b);
    if (rc == 0)
        rc = st_fs_write_file_atomic(ps->fs, ps->dir, name, b.data, b.len);
    st_buf_fini(&b);
    if (rc < 0)
        return rc;
    ps->snap_offset = offset;
    ps->snap_ms = now_ms;
    ps->batches_since = 0;
    /* Keep this one and the one before it (should this one rot); drop any older. */
    int64_t *offs;
    int n;
    if (snap_list(ps, &offs, &n) == 0) {
        int kept = 0;
        for (int i = 0; i < n; i++)
            if (offs[i] > offset || kept++ >= 2)
                snap_unlink(ps, offs[i]);
        free(offs);
    }
    return 0;
}

int st_pstate_maybe_save(st_pstate_t *ps, int64_t durable_offset, int64_t now_ms)
{
    if (!ps->fs || ps->batches_since < ST_PSTATE_SNAPSHOT_BATCHES ||
        now_ms - ps->snap_ms < SNAP_MIN_MS || durable_offset <= ps->snap_offset)
        return 0;
    int rc = st_pstate_save(ps, durable_offset, now_ms);
    if (rc < 0) {
        ST_WARN("%s: cannot write a producer state snapshot: %s", ps->dir, st_strerror(rc));
        ps->snap_ms = now_ms; /* try again in a minute, not every tick */
        return rc;
    }
    return 1;
}

int st_pstate_load(st_pstate_t *ps, int64_t max_offset, int64_t *offset)
{
    *offset = -1;
    if (!ps->fs)
        return ST_E_NOT_FOUND;
    int64_t *offs;
    int n;
    int rc = snap_list(ps, &offs, &n);
    if (rc < 0)
        return rc;
    rc = ST_E_NOT_FOUND;
    for (int i = 0; i < n && rc == ST_E_NOT_FOUND; i++) {
        if (offs[i] > max_offset) {
            /* Describes batches the log no longer has (cut after it was written). */
            snap_unlink(ps, offs[i]);
            continue;
        }
        char p[PATH_MAX];
        uint8_t *data = NULL;
        size_t len = 0;
        int r = snap_path(ps, p, sizeof p, offs[i]);
        if (r == 0)
            r = st_fs_read_file(ps->fs, p, SNAP_MAX_BYTES, &data, &len);
        int64_t got = -1;
        if (r == 0)
            r = st_pstate_decode(ps, data, len, &got);
        free(data);
        if (r == 0 && got != offs[i])
            r = ST_E_CORRUPT;
        if (r == 0) {
            *offset = got;
            ps->snap_offset = got;
            rc = 0;
        } else {
            st_pstate_clear(ps);
            ST_WARN("%s: producer state snapshot %s is unusable (%s); skipping it", ps->dir, p,
                    st_strerror(r));
            if (r == ST_E_CORRUPT)
                snap_unlink(ps, offs[i]);
        }
    }
    free(offs);
    ps->batches_since = 0;
    return rc;
}
