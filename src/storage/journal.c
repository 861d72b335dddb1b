/*
 * journal.c — the shard's write-ahead journal (journal.h: layout, invariants): the writer.
 * Its replay at start-up is journal_replay.c's; the two share only the format
 * (journal_fmt.h).
 *
 * Life of an append on a journaled log (strict flush mode, env->journal set):
 *
 *   st_log_append -> segment pwrite -> st_journal_append: entry pwrite at the head, the log
 *       queued for the next round
 *   st_log_wait_durable -> st_log_sync_start -> st_journal_kick -> round_start (at once, or
 *       deferred to the host's st_journal_run once per loop iteration): the queue becomes the
 *       round (each log's target: what it had journaled), the header (tail) is written, one
 *       fdatasync of the journal file is submitted
 *   round_done -> st_log_journal_done for each log of the round: durable moves to the target,
 *       waiters fire; a failed sync cuts those logs back and turns the journal off for good
 *
 * Space. Entries of a log stay needed until a per-file round of that log, started after they
 * were written, completed (st_journal_file_round_done). The tail is the oldest needed entry;
 * the header written with each round records it, and space is reused only up to the tail of
 * the last header that was synced (durable_tail), so a crash at any point replays from a
 * header whose entries are all still there. When the journal is more than half full, each
 * round starts per-file rounds for the logs holding the oldest half (sweep). An append that
 * does not fit is not journaled: the log falls back to per-file rounds until one of them
 * covered everything it wrote meanwhile (st_journal_file_round_start turns it back on). The
 * last bytes (reserve) are kept for truncate entries. A truncation that does not fit even so
 * writes a fence file into the partition directory, synced, before it returns.
 *
 * Replay must never apply an entry to a log that is ahead of it with synced bytes the entry
 * knows nothing of (a stale truncate entry would cut them). Hence the fences (journal.h,
 * invariants 4 and 5): after a reset, after a per-file round that made unjournaled bytes
 * durable, when a log reopens within the run; and replay skips a log closed cleanly since.
 * What is left for replay: the log's own recovery cuts torn bytes, then every entry of the log
 * from the tail on, in order; an append that does not follow on from the log end is skipped
 * (the bytes before it were never acknowledged, or a later truncate entry realigns the log).
 */
#include "storage/journal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/buf.h"
#include "base/crc32c.h"
#include "base/err.h"
#include "base/log.h"
#include "storage/journal_fmt.h"
#include "storage/log_impl.h"

struct st_journal {
    st_storage_env_t *env;
    char *path;
    char *dir;
    int fd;
    int64_t cap;       /* bytes of the data area */
    int64_t reserve;   /* the last bytes of free space, for truncate entries only */
    uint64_t run_id;   /* tells this run's entries from another's (fence files) */
    uint64_t next_seq; /* of the next entry */
    int64_t head;      /* logical position of the next entry */
    int64_t tail;      /* oldest needed byte, and the sequence of its entry */
    uint64_t tail_seq;
    int64_t hdr_tail;     /* tail in the header last written */
    bool hdr_written;     /* a header was written in this run */
    uint64_t hdr_gen;     /* its generation */
    int64_t round_tail;   /* the header of the round in flight says this */
    int64_t durable_tail; /* the header last synced says this: space reuse stops here */
    bool pinned;          /* entries a failed close left: kept for replay, never overwritten */
    int64_t pin_pos;
    uint64_t pin_seq;
    /* logs that wrote entries and were closed since (by name): a hash set, so that closing
     * (and reopening) n logs costs O(n), not O(n^2) */
    struct jname **gone;
    size_t ngone, gone_cap; /* entries; buckets (a power of two, 0 before the first) */
    st_log_t *logs;         /* attached logs (jl.next/prev) */
    int nneeds;             /* of them, those holding needed entries */
    st_log_t *queue;        /* to join the next round (jl.qnext) */
    st_log_t *round;        /* in the round in flight (jl.rnext), each holding a reference */
    bool in_flight;
    bool want_round; /* a header-only round, to make freed space reusable */
    bool sweeping;
    bool completing;   /* round_done is calling back the logs of its round */
    bool deferred;     /* rounds start from st_journal_run only */
    bool run_pending;  /* st_journal_run has a round to start */
    int min_fanout;    /* st_journal_set_min_fanout; <= 1: always journal */
    uint64_t win;      /* fan-out windows (FANOUT_WINDOW_MS) closed so far */
    int64_t win_start; /* when the current window opened */
    int win_logs;      /* logs that appended in the current window */
    int last_logs;     /* ... in the last closed one */
    int low_windows;   /* consecutive closed windows below min_fanout / 2 */
    bool spread;       /* the fan-out is high enough: appends are journaled */
    bool failed;
    bool closed;
    int refs; /* the owner + a round in flight */
    st_journal_stats_t st;
};

typedef struct jname {
    struct jname *next;
    uint64_t hash;
    char name[];
} jname_t;

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static jname_t *gone_find(const st_journal_t *j, const char *name, uint64_t h)
{
    if (!j->gone_cap)
        return NULL;
    for (jname_t *n = j->gone[h & (j->gone_cap - 1)]; n; n = n->next)
        if (n->hash == h && strcmp(n->name, name) == 0)
            return n;
    return NULL;
}

/* Adds name to the set (once). Out of memory: left out, as before (the log's fence is then
 * not rewritten at its next open; replay skips its entries by the fence it has). */
static void gone_add(st_journal_t *j, const char *name)
{
    uint64_t h = name_hash(name);
    if (gone_find(j, name, h))
        return;
    if (j->ngone + 1 > j->gone_cap) {
        size_t cap = j->gone_cap ? j->gone_cap * 2 : 64;
        jname_t **b = calloc(cap, sizeof *b);
        if (!b && !j->gone_cap)
            return;
        if (b) { /* else longer chains */
            for (size_t i = 0; i < j->gone_cap; i++)
                for (jname_t *n = j->gone[i], *next; n; n = next) {
                    next = n->next;
                    n->next = b[n->hash & (cap - 1)];
                    b[n->hash & (cap - 1)] = n;
                }
            free(j->gone);
            j->gone = b;
            j->gone_cap = cap;
        }
    }
    jname_t *n = malloc(sizeof *n + strlen(name) + 1);
    if (!n)
        return;
    n->hash = h;
    strcpy(n->name, name);
    n->next = j->gone[h & (j->gone_cap - 1)];
    j->gone[h & (j->gone_cap - 1)] = n;
    j->ngone++;
}

static int64_t used(const st_journal_t *j)
{
    return j->head - j->durable_tail;
}

/* The partition's directory name, as replay finds it under the data directory. */
static const char *log_name(const st_log_t *log)
{
    const char *s = strrchr(log->dir, '/');
    return s ? s + 1 : log->dir;
}

static void journal_free(st_journal_t *j)
{
    for (size_t i = 0; i < j->gone_cap; i++)
        for (jname_t *n = j->gone[i], *next; n; n = next) {
            next = n->next;
            free(n);
        }
    free(j->gone);
    if (j->fd >= 0)
        j->env->fs.ops->close(j->env->fs.ctx, j->fd);
    free(j->path);
    free(j->dir);
    free(j);
}

static void journal_unref(st_journal_t *j)
{
    if (--j->refs == 0)
        journal_free(j);
}

bool st_journal_failed(const st_journal_t *j)
{
    return j->failed;
}

void st_journal_stats(const st_journal_t *j, st_journal_stats_t *out)
{
    *out = j->st;
    out->used = used(j);
    out->capacity = j->cap;
}

/* ---- needs and the tail ------------------------------------------------------------------ */

static void tail_update(st_journal_t *j)
{
    int64_t t = j->head;
    uint64_t ts = j->next_seq;
    if (j->pinned && j->pin_pos < t) {
        t = j->pin_pos;
        ts = j->pin_seq;
    }
    for (st_log_t *l = j->logs; l; l = l->jl.next)
        if (l->jl.has_need && l->jl.need_pos < t) {
            t = l->jl.need_pos;
            ts = l->jl.need_seq;
        }
    j->tail = t;
    j->tail_seq = ts;
}

/* The log's entries below sequence `below` are covered: its need moves to the first entry
 * written after, if any. */
static void release_need(st_log_t *log, uint64_t below)
{
    st_journal_log_t *jl = &log->jl;
    st_journal_t *j = jl->j;
    if (!jl->has_need || jl->need_seq >= below)
        return;
    bool was_tail = jl->need_pos <= j->tail;
    if (jl->pf_after && jl->after_seq >= below) {
        jl->need_pos = jl->after_pos;
        jl->need_seq = jl->after_seq;
        jl->need_ms = jl->after_ms;
    } else {
        jl->has_need = false;
        j->nneeds--;
    }
    if (was_tail)
        tail_update(j);
}

/* ---- writing ----------------------------------------------------------------------------- */

static void journal_fail(st_journal_t *j, int err, const char *what)
{
    if (j->failed)
        return;
    j->failed = true;
    ST_ERROR("storage: journal %s: %s failed (%s); the journal is off until restart, every log"
             " syncs its own files from now on",
             j->path, what, st_strerror(err));
    for (st_log_t *l = j->logs; l; l = l->jl.next)
        l->jl.on = false;
    while (j->queue) {
        st_log_t *l = j->queue;
        j->queue = l->jl.qnext;
        l->jl.qnext = NULL;
        l->jl.queued = false;
    }
}

static int write_header(st_journal_t *j)
{
    uint8_t b[ST_JFMT_HDR_SIZE];
    uint64_t gen = j->hdr_gen + 1;
    st_jhdr_t h = {
        .gen = gen, .run_id = j->run_id, .tail_seq = j->tail_seq, .cap = j->cap, .tail = j->tail};
    st_jfmt_encode_header(&h, b);
    int rc =
        st_fs_pwrite_full(&j->env->fs, j->fd, b, sizeof b, (int64_t)(gen % 2) * ST_JFMT_HDR_SLOT);
    if (rc < 0)
        return rc;
    j->hdr_gen = gen;
    j->hdr_tail = j->tail;
    j->hdr_written = true;
    return 0;
}

/*
 * Where an entry of n bytes goes: its logical position (skipping to the next lap when it
 * would straddle the end of the area), or -1 when it would reach bytes still needed, keeping
 * `reserve` bytes free.
 */
static int64_t place(const st_journal_t *j, int64_t n, int64_t reserve)
{
    int64_t pos = j->head, phys = pos % j->cap;
    if (phys + n > j->cap)
        pos += j->cap - phys;
    if (pos + n - j->durable_tail > j->cap - reserve)
        return -1;
    return pos;
}

/* Writes one entry for log and queues the log for the next round. 0, ST_E_FULL (no room),
 * ST_E_TOO_LARGE, or an I/O error (the head stays where it was). */
static int write_entry(st_journal_t *j, st_log_t *log, int kind, int64_t first, int64_t next,
                       const uint8_t *data, size_t len, int64_t reserve)
{
    const char *name = log_name(log);
    size_t nl = strlen(name);
    if (nl > NAME_MAX)
        return ST_E_TOO_LARGE;
    int64_t length = ST_JFMT_ENTRY_HDR + (int64_t)nl + (int64_t)len;
    if (length > UINT32_MAX || st_jfmt_pad8(length) > j->cap)
        return ST_E_TOO_LARGE;
    int64_t pos = place(j, st_jfmt_pad8(length), reserve);
    if (pos < 0)
        return ST_E_FULL;
    uint8_t h[ST_JFMT_ENTRY_HDR + NAME_MAX];
    uint64_t seq = j->next_seq;
    st_jentry_hdr_t eh = {.length = (uint32_t)length,
                          .kind = kind,
                          .has_tid = log->has_topic_id,
                          .name_len = (uint16_t)nl,
                          .seq = seq,
                          .first = first,
                          .next = next,
                          .data_len = (uint32_t)len};
    if (log->has_topic_id)
        memcpy(eh.tid, log->topic_id, 16);
    st_jfmt_encode_entry(&eh, name, data, h);
    memcpy(h + ST_JFMT_ENTRY_HDR, name, nl);
    int64_t at = ST_JFMT_DATA_OFF + pos % j->cap;
    /* Header and batch in one call, the batch not copied. */
    int rc = st_fs_pwrite2_full(&j->env->fs, j->fd, h, ST_JFMT_ENTRY_HDR + nl, data, len, at);
    if (rc < 0) {
        /* The head stays: the next entry overwrites what of this one reached the file (ENOSPC,
         * mostly). The log falls back meanwhile. */
        if (j->st.write_errors++ % 1000 == 0)
            ST_WARN("storage: journal %s: a write failed (%s); the log syncs its own files",
                    j->path, st_strerror(rc));
        return rc;
    }
    j->next_seq++;
    j->head = pos + st_jfmt_pad8(length);
    j->st.entries++;
    st_journal_log_t *jl = &log->jl;
    int64_t now = st_log_now(log);
    jl->last_seq = seq;
    if (!jl->has_need) {
        jl->has_need = true;
        jl->need_pos = pos;
        jl->need_seq = seq;
        jl->need_ms = now;
        if (j->nneeds++ == 0 && !j->pinned) {
            j->tail = pos; /* nothing was needed: the tail was the head */
            j->tail_seq = seq;
        }
    }
    if (jl->pf_seq != 0 && !jl->pf_after) {
        jl->pf_after = true;
        jl->after_pos = pos;
        jl->after_seq = seq;
        jl->after_ms = now;
    }
    if (!jl->queued) {
        jl->queued = true;
        jl->qnext = j->queue;
        j->queue = log;
    }
    return 0;
}

/* ---- rounds ------------------------------------------------------------------------------ */

static void round_start(st_journal_t *j);
static void round_want(st_journal_t *j);
static bool usable(const st_log_t *log);

/* Resources, not the disk (as commit.c's): retried by the next kick or tick. */
static bool transient(int err)
{
    return err == -EMFILE || err == -ENFILE || err == -ENOMEM || err == -EAGAIN || err == -EBUSY ||
           err == -EINTR;
}

/* Starts per-file rounds for the logs holding the oldest half of the used space. */
static void sweep(st_journal_t *j)
{
    if (j->sweeping || used(j) <= j->cap / 2)
        return;
    int64_t limit = j->durable_tail + used(j) / 2;
    int n = 0;
    for (st_log_t *l = j->logs; l; l = l->jl.next)
        if (l->jl.has_need && l->jl.need_pos <= limit && l->sync_pending == 0)
            n++;
    if (n == 0)
        return;
    st_log_t **v = malloc((size_t)n * sizeof *v);
    if (!v)
        return;
    int k = 0;
    for (st_log_t *l = j->logs; l && k < n; l = l->jl.next)
        if (l->jl.has_need && l->jl.need_pos <= limit && l->sync_pending == 0) {
            l->refs++;
            v[k++] = l;
        }
    j->sweeping = true;
    for (int i = 0; i < k; i++) {
        if (!v[i]->closed)
            st_log_round_start(v[i]);
        st_log_unref(v[i]);
    }
    j->sweeping = false;
    free(v);
}

static void round_done(void *arg, int res)
{
    st_journal_t *j = arg;
    j->in_flight = false;
    st_log_t *list = j->round;
    j->round = NULL;
    if (res == 0) {
        if (j->round_tail > j->durable_tail)
            j->durable_tail = j->round_tail;
        if (j->tail > j->durable_tail && used(j) > j->cap / 2)
            j->want_round = true; /* the tail moved meanwhile: make that space reusable */
    } else {
        journal_fail(j, res, "fdatasync");
    }
    /* The callbacks below answer requests, which may append and want a round: it must not
     * start before this loop is over (it would take logs of this list into the next round,
     * relinking them, and this loop would then walk that round's list as if synced). */
    j->completing = true;
    while (list) {
        st_log_t *l = list;
        list = l->jl.rnext;
        l->jl.rnext = NULL;
        l->jl.in_round = false;
        st_log_journal_done(l, l->jl.round_target, res);
        st_log_unref(l);
    }
    j->completing = false;
    if (!j->closed && !j->failed) {
        round_want(j);
        sweep(j);
    }
    journal_unref(j);
}

static void round_start(st_journal_t *j)
{
    if (j->in_flight || j->completing || j->failed || j->closed || (!j->queue && !j->want_round))
        return; /* round_done starts the next one after its callbacks */
    if (!j->hdr_written || j->tail != j->hdr_tail) {
        int rc = write_header(j);
        if (rc < 0) {
            journal_fail(j, rc, "a header write");
            return;
        }
    }
    j->want_round = false;
    j->round_tail = j->hdr_tail;
    st_log_t *list = j->queue;
    j->queue = NULL;
    uint64_t nlogs = 0;
    for (st_log_t *l = list; l; l = l->jl.qnext) {
        nlogs++;
        l->jl.queued = false;
        l->jl.in_round = true;
        l->jl.round_target = l->jl.written_end;
        l->jl.rnext = l->jl.qnext;
        l->refs++;
    }
    for (st_log_t *l = list; l; l = l->jl.rnext)
        l->jl.qnext = NULL;
    j->round = list;
    j->in_flight = true;
    j->refs++;
    j->st.rounds++;
    j->st.round_logs += nlogs;
    int rc = j->env->sync_submit(j->env->sync_ctx, j->fd, round_done, j);
    if (rc < 0) {
        j->in_flight = false;
        j->refs--;
        j->st.rounds--;
        j->st.round_logs -= nlogs;
        j->round = NULL;
        /* Back to the queue: nothing was synced. */
        while (list) {
            st_log_t *l = list;
            list = l->jl.rnext;
            l->jl.rnext = NULL;
            l->jl.in_round = false;
            if (!l->closed && l->jl.j == j) {
                l->jl.queued = true;
                l->jl.qnext = j->queue;
                j->queue = l;
            }
            st_log_unref(l);
        }
        if (!transient(rc))
            journal_fail(j, rc, "submitting fdatasync");
    }
}

/* ---- the log's calls --------------------------------------------------------------------- */

void st_journal_attach(st_log_t *log)
{
    st_journal_t *j = log->env->journal;
    if (!j || j->closed)
        return;
    st_journal_log_t *jl = &log->jl;
    uint64_t fence_seq = jl->fence_seq; /* st_journal_prepare's */
    memset(jl, 0, sizeof *jl);
    jl->fence_seq = fence_seq;
    jl->j = j;
    jl->j = j;
    jl->on = usable(log);
    jl->base = jl->written_end = jl->jdurable = log->end;
    jl->next = j->logs;
    if (j->logs)
        j->logs->jl.prev = log;
    j->logs = log;
}

void st_journal_detach(st_log_t *log, bool close_ok)
{
    st_journal_log_t *jl = &log->jl;
    st_journal_t *j = jl->j;
    if (!j)
        return;
    if (jl->prev)
        jl->prev->jl.next = jl->next;
    else
        j->logs = jl->next;
    if (jl->next)
        jl->next->jl.prev = jl->prev;
    jl->next = jl->prev = NULL;
    if (jl->queued) {
        for (st_log_t **pp = &j->queue; *pp; pp = &(*pp)->jl.qnext)
            if (*pp == log) {
                *pp = jl->qnext;
                break;
            }
        jl->queued = false;
        jl->qnext = NULL;
    }
    if (jl->has_need && !close_ok) {
        ST_ERROR("storage: %s: closed without its final sync; its journal entries are kept for"
                 " replay at the next start",
                 log->dir);
        if (!j->pinned || jl->need_pos < j->pin_pos) {
            j->pinned = true;
            j->pin_pos = jl->need_pos;
            j->pin_seq = jl->need_seq;
        }
    }
    if (jl->last_seq != 0 && jl->last_seq >= jl->fence_seq) {
        gone_add(j, log_name(log));
    }
    bool was_tail = jl->has_need && jl->need_pos <= j->tail;
    if (jl->has_need)
        j->nneeds--;
    jl->has_need = false;
    jl->on = false;
    jl->j = NULL; /* in_round stays: the round holds a reference and skips a closed log */
    if (was_tail)
        tail_update(j);
}

/* The fan-out rule: logs appended to are counted per window; the min_fanout-th log of a window
 * turns the journal on (cheap: a log starts journaling after its next per-file round); it goes off
 * only after FANOUT_OFF_WINDOWS windows in a row below half of it, because each log leaving the
 * journal writes a fence (a synced file) at its next per-file round. */
#define FANOUT_WINDOW_MS   100
#define FANOUT_OFF_WINDOWS 30

static void fanout_count(st_journal_t *j, st_log_t *log)
{
    int64_t now = st_storage_now(j->env);
    if (now - j->win_start >= FANOUT_WINDOW_MS) {
        j->last_logs = j->win_logs;
        if (j->win_logs >= j->min_fanout) {
            j->spread = true;
            j->low_windows = 0;
        } else if (j->win_logs * 2 < j->min_fanout) {
            if (++j->low_windows >= FANOUT_OFF_WINDOWS)
                j->spread = false;
        } else {
            j->low_windows = 0;
        }
        j->win++;
        j->win_logs = 0;
        j->win_start = now;
    }
    if (log->jl.iter_mark != j->win + 1) { /* + 1: a fresh log's 0 never matches */
        log->jl.iter_mark = j->win + 1;
        /* On as soon as the window has seen enough logs, not at its end: until then every
         * append of a spread load waits for its own log's sync. */
        if (++j->win_logs >= j->min_fanout && !j->spread) {
            j->spread = true;
            j->low_windows = 0;
        }
    }
}

/* Whether appends should go to the journal now (the fan-out rule of deferred mode). */
static bool wanted(const st_journal_t *j)
{
    return !j->deferred || j->min_fanout <= 1 || j->spread;
}

static bool usable(const st_log_t *log)
{
    const st_journal_log_t *jl = &log->jl;
    return jl->j && !jl->j->failed && !jl->j->closed && !jl->pinned &&
           log->cfg.flush_policy == ST_FLUSH_STRICT;
}

bool st_journal_active(const st_log_t *log)
{
    return usable(log) && log->jl.on;
}

int st_journal_append(st_log_t *log, const uint8_t *data, size_t len, int64_t first, int64_t next)
{
    st_journal_log_t *jl = &log->jl;
    if (!jl->j)
        return ST_E_CLOSED;
    st_journal_t *j = jl->j;
    if (j->deferred && j->min_fanout > 1)
        fanout_count(j, log);
    int rc = ST_E_CLOSED;
    bool want = wanted(j);
    if (usable(log) && jl->on && want) {
        rc = write_entry(j, log, ST_JFMT_KIND_APPEND, first, next, data, len, j->reserve);
        if (rc == 0) {
            jl->written_end = next;
            return 0;
        }
    }
    /* Not journaled: everything from here is synced by per-file rounds until one of them
     * covers it (st_journal_file_round_start turns the journal back on). */
    if (jl->on && want)
        j->st.fallbacks++;
    jl->on = false;
    return rc;
}

/* Records in the partition directory that the log's entries of this run below the journal's
 * next sequence must not be replayed (its segments, synced, hold all they said). Blocking (a
 * synced atomic write): only when the journal cannot take a truncate entry. */
static int write_fence(st_journal_t *j, st_log_t *log, uint64_t seq)
{
    uint8_t b[ST_JFMT_FENCE_SIZE];
    st_jfmt_encode_fence(j->run_id, seq, b);
    int rc = st_fs_write_file_atomic(&log->env->fs, log->dir, ST_JOURNAL_FENCE_FILE, b, sizeof b);
    if (rc == 0) {
        j->st.fences++;
        log->jl.fence_seq = seq;
    }
    return rc;
}

int st_journal_prepare(st_log_t *log)
{
    st_journal_t *j = log->env->journal;
    if (!j || j->closed)
        return 0;
    const char *name = log_name(log);
    if (gone_find(j, name, name_hash(name)))
        return write_fence(j, log, j->next_seq);
    uint64_t run = 0, seq = 0;
    st_fs_t *fs = &log->env->fs;
    int rc = st_jfmt_read_fence(fs, log->dir, &run, &seq);
    if (rc == -ENOENT)
        return 0;
    if (rc == 0 && run == j->run_id) {
        log->jl.fence_seq = seq; /* this run's: still guards its entries */
        return 0;
    }
    char p[PATH_MAX];
    int r = snprintf(p, sizeof p, "%s/%s", log->dir, ST_JOURNAL_FENCE_FILE);
    if (r < 0 || (size_t)r >= sizeof p)
        return -ENAMETOOLONG;
    rc = fs->ops->unlink(fs->ctx, p);
    if (rc == 0)
        rc = fs->ops->fsync_dir(fs->ctx, log->dir);
    return rc == -ENOENT ? 0 : rc;
}

void st_journal_truncated(st_log_t *log, int64_t new_end, bool reset)
{
    st_journal_log_t *jl = &log->jl;
    st_journal_t *j = jl->j;
    if (!j)
        return;
    if (!usable(log))
        jl->on = false; /* journaling resumes only after a per-file round covers the cut */
    if (jl->jdurable > new_end)
        jl->jdurable = new_end;
    if (jl->round_target > new_end)
        jl->round_target = new_end;
    if (jl->base > new_end)
        jl->base = new_end;
    if (jl->on) {
        jl->written_end = new_end; /* what follows is journaled from there */
        if (reset)
            jl->base = jl->jdurable = new_end;
    } else if (jl->written_end > new_end) {
        jl->written_end = new_end; /* the journal covers no byte past the fallback */
    }
    /* Needed when appends after the cut go to the journal (replay must see the cut: the
     * ftruncate is not synced, the old bytes may still be on disk, and replay would take them
     * for the new ones), or when older entries of the log could bring cut bytes back. */
    bool replayable = jl->last_seq != 0 && jl->last_seq >= jl->fence_seq;
    if (!jl->on && !replayable)
        return;
    int rc = ST_E_CLOSED;
    /* A reset (st_log_truncate_fully) is durable on return already (its segments deleted and
     * created with the directory synced, the checkpoint synced): an entry would let replay
     * apply the log's older entries onto it first, moving it back. A fence instead. */
    if (!reset && !j->failed && !j->closed) {
        rc = write_entry(j, log, ST_JFMT_KIND_TRUNCATE, new_end, new_end, NULL, 0, 0);
        if (rc == 0) {
            round_want(j); /* cheap, and rare: the cut reaches the disk promptly */
            return;
        }
    }
    /* No entry: the segments are synced now, cut included, so that every earlier entry of
     * this log is covered by them and the fence can tell replay to ignore them all. */
    rc = 0;
    for (int i = 0; i < log->nsegs && rc == 0; i++) {
        st_segment_t *s = log->segs[i];
        /* A round in flight may not have synced what it took yet: this does not wait. */
        if ((s->log_dirty || log->sync_pending > 0) && (rc = st_file_sync_now(s->log)) == 0)
            s->log_dirty = false;
    }
    if (rc == 0)
        rc = write_fence(j, log, j->next_seq);
    if (rc == 0)
        release_need(log, j->next_seq);
    if (rc < 0) {
        ST_ERROR("storage: %s: cannot record its truncation to %" PRId64 " in the journal nor in"
                 " %s (%s); the journal is off for this log, and a crash before its next clean"
                 " close may replay truncated records",
                 log->dir, new_end, ST_JOURNAL_FENCE_FILE, st_strerror(rc));
        jl->pinned = true;
        jl->on = false;
    }
}

/* A round is wanted: now, or (deferred) at the host's next st_journal_run. */
static void round_want(st_journal_t *j)
{
    if (j->deferred)
        j->run_pending = true;
    else
        round_start(j);
}

void st_journal_set_deferred(st_journal_t *j, bool on)
{
    j->deferred = on;
    if (!on && j->run_pending)
        st_journal_run(j);
}

void st_journal_set_min_fanout(st_journal_t *j, int n)
{
    j->min_fanout = n;
}

int st_journal_fanout(const st_journal_t *j)
{
    return j->last_logs;
}

bool st_journal_spread(const st_journal_t *j)
{
    return wanted(j);
}

void st_journal_run(st_journal_t *j)
{
    if (!j->run_pending)
        return;
    j->run_pending = false;
    round_start(j);
}

void st_journal_kick(st_log_t *log)
{
    st_journal_t *j = log->jl.j;
    if (j && (log->jl.queued || j->want_round))
        round_want(j);
}

void st_journal_file_round_start(st_log_t *log)
{
    st_journal_log_t *jl = &log->jl;
    st_journal_t *j = jl->j;
    if (!j)
        return;
    jl->pf_seq = j->next_seq;
    jl->pf_after = false;
    jl->pf_unjournaled = !jl->on || log->durable < jl->base;
    /* The round covers every byte written so far: journaling may resume after them. */
    if (!jl->on && usable(log) && used(j) <= j->cap / 2 && wanted(j)) {
        jl->on = true;
        jl->base = jl->written_end = jl->jdurable = log->end;
    }
}

int st_journal_file_round_done(st_log_t *log, bool ok)
{
    st_journal_log_t *jl = &log->jl;
    st_journal_t *j = jl->j;
    if (!j)
        return 0;
    uint64_t below = jl->pf_seq;
    jl->pf_seq = 0;
    if (!ok || below == 0)
        return 0;
    if (jl->pf_unjournaled && jl->last_seq != 0 && jl->last_seq >= jl->fence_seq) {
        /* The segments are synced up to the round's start: the fence may name it. */
        int rc = write_fence(j, log, below);
        if (rc < 0) {
            ST_ERROR("storage: %s: cannot write %s (%s); the sync counts as failed", log->dir,
                     ST_JOURNAL_FENCE_FILE, st_strerror(rc));
            return rc;
        }
    }
    int64_t old_tail = j->tail;
    release_need(log, below);
    jl->pf_after = false;
    if (j->tail != old_tail && used(j) > j->cap / 2) {
        /* Space is reusable once a header saying so is synced: a round with no entries if
         * need be (over half full only, so at most about one per sweep). */
        j->want_round = true;
        round_want(j);
    }
    return 0;
}

void st_journal_tick(st_log_t *log)
{
    st_journal_log_t *jl = &log->jl;
    st_journal_t *j = jl->j;
    if (!j)
        return;
    if (jl->queued && !j->in_flight)
        round_want(j); /* a submission refused for want of resources */
    if (jl->has_need && log->sync_pending == 0 &&
        st_log_now(log) - jl->need_ms >= ST_JOURNAL_SEGMENT_SYNC_MS)
        st_log_round_start(log);
}

/* ---- open and close ---------------------------------------------------------------------- */

int st_journal_open(st_storage_env_t *env, const char *data_dir, int shard, int64_t bytes,
                    st_journal_t **out)
{
    st_fs_t *fs = &env->fs;
    if (bytes < ST_JOURNAL_MIN_BYTES)
        bytes = ST_JOURNAL_MIN_BYTES;
    bytes &= ~(int64_t)7;
    st_journal_t *j = calloc(1, sizeof *j);
    if (!j)
        return -ENOMEM;
    j->env = env;
    j->fd = -1;
    j->refs = 1;
    j->cap = bytes;
    j->reserve = bytes / 16 < (1 << 20) ? bytes / 16 : (1 << 20);
    j->next_seq = 1;
    j->tail_seq = 1;
    /* Tells this run's fences from older ones: never the same twice, whatever the clock. */
    if (getrandom(&j->run_id, sizeof j->run_id, GRND_NONBLOCK) != sizeof j->run_id)
        j->run_id =
            ((uint64_t)st_storage_now(env) << 20) ^ ((uint64_t)(uintptr_t)j << 4) ^ (uint64_t)shard;
    char p[PATH_MAX];
    int rc = -ENAMETOOLONG;
    int r = snprintf(p, sizeof p, "%s/%s", data_dir, ST_JOURNAL_DIR);
    if (r < 0 || (size_t)r >= sizeof p || !(j->dir = strdup(p)))
        goto fail;
    r = snprintf(p, sizeof p, "%s/shard-%d.wal", j->dir, shard);
    if (r < 0 || (size_t)r >= sizeof p || !(j->path = strdup(p)))
        goto fail;
    rc = fs->ops->mkdir(fs->ctx, j->dir);
    if (rc == 0)
        rc = st_fs_sync_parent(fs, j->dir);
    if (rc < 0 && rc != -EEXIST)
        goto fail;
    rc = fs->ops->open(fs->ctx, j->path, ST_FS_RDWR | ST_FS_CREAT);
    if (rc < 0)
        goto fail;
    j->fd = rc;
    int64_t size = 0;
    if ((rc = fs->ops->fsize(fs->ctx, j->fd, &size)) < 0)
        goto fail;
    if (size > 0) {
        /* Kept from an earlier run (a clean close, or replay, leaves the file at its size with a
         * header that says nothing is to be replayed): its blocks are allocated, so this run's
         * syncs change no metadata, at least until it grows past them. */
        st_jhdr_t h;
        rc = st_jfmt_read_header(fs, j->fd, &h);
        if (rc == 0 || (rc > 0 && st_jfmt_entry_at(fs, j->fd, &h))) {
            ST_ERROR("storage: journal %s holds entries not replayed (st_journal_recover did not"
                     " empty it); left alone, this shard runs without a journal",
                     j->path);
            rc = ST_E_EXISTS;
        }
        if (rc < 0)
            goto fail;
        /* Sequence numbers go on from the header's: every byte in the file has a smaller one,
         * so replay never takes an older lap's entry (or an earlier run's) for this run's. */
        j->next_seq = j->tail_seq = h.tail_seq;
        j->hdr_gen = h.gen;
        if (h.cap == j->cap)
            j->head = j->tail = j->durable_tail = h.tail;
        else if ((rc = fs->ops->ftruncate(fs->ctx, j->fd, 0)) < 0)
            goto fail; /* another capacity: positions start over in an emptied file */
        /* This run's header reaches the disk before any of its entries: replay never reads
         * them from a header of another run (whose id the fences would not match). */
        if ((rc = write_header(j)) < 0 || (rc = fs->ops->fdatasync(fs->ctx, j->fd)) < 0)
            goto fail;
    }
    if ((rc = fs->ops->fsync_dir(fs->ctx, j->dir)) < 0)
        goto fail;
    env->journal = j;
    *out = j;
    return 0;
fail:
    if (rc != ST_E_EXISTS)
        ST_ERROR("storage: cannot open the journal in %s: %s", data_dir, st_strerror(rc));
    journal_free(j);
    return rc;
}

int st_journal_close(st_journal_t *j)
{
    st_fs_t *fs = &j->env->fs;
    int rc = 0;
    if (j->logs) {
        /* Their entries may be all that holds some of their bytes: kept for replay; they
         * sync their own files from now on. */
        ST_WARN("storage: journal %s closed with logs still open; not emptied", j->path);
    } else if (j->pinned) {
        ST_WARN("storage: journal %s keeps entries of a log whose close failed; not emptied",
                j->path);
    } else {
        /* Emptied by a header whose tail is the head: no entry carries its sequence. The file
         * keeps its size (and blocks) for the next run. */
        j->tail = j->head;
        j->tail_seq = j->next_seq;
        rc = write_header(j);
        if (rc == 0)
            rc = fs->ops->fdatasync(fs->ctx, j->fd);
        if (rc < 0)
            ST_WARN("storage: cannot empty the journal %s: %s (replayed harmlessly at the next"
                    " start)",
                    j->path, st_strerror(rc));
    }
    while (j->logs)
        st_journal_detach(j->logs, true);
    j->closed = true;
    if (j->env->journal == j)
        j->env->journal = NULL;
    journal_unref(j);
    return rc;
}
