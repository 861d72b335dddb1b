/*
 * journal.h — the shard's write-ahead journal: one fdatasync per group-commit round for every
 * partition log of a storage env, instead of one per dirty file per log (issue 15).
 *
 * BookKeeper's journal/ledger split. Appends still go to the segments (reads sendfile from
 * them, and their bytes stay exactly Kafka's), and also, copied, into one file per shard
 * written sequentially and circularly:
 *
 *   <log.dirs>/.journal/shard-<k>.wal
 *
 * A strict-mode log whose env has a journal counts an append as durable once the journal's
 * round that covers its entry completed; its segment files are synced lazily (a per-file round
 * in the background when the journal is half full and the log holds old entries, from
 * st_log_tick when its oldest entry is a few seconds old, and at close; meanwhile the env's
 * writeback hook, if any, has started writing them out MiB by MiB, so such a round finds little
 * left to write and the journal's own syncs do not queue behind it). Each per-file round
 * that completes releases the log's entries written before it started; the journal's tail
 * (the oldest byte still needed) follows the oldest entry any open log still needs.
 *
 * File layout (all integers big-endian; docs/format.md "journal"):
 *
 *   byte 0      header slot 0 (64 bytes used of a 4 KiB page)
 *   byte 4096   header slot 1 (the slots alternate; the valid one of higher generation wins)
 *   byte 8192   the data area, `capacity` bytes, used circularly:
 *
 *       logical position p (grows forever) lives at byte 8192 + p % capacity; an entry never
 *       straddles the end of the area (the writer skips to the next lap instead)
 *
 *   header:  0 magic "STJH" | 4 CRC-32C of bytes 8..63 | 8 version u16 = 1 | 10 zero u16
 *            12 zero u32 | 16 generation u64 | 24 capacity i64 | 32 run id u64
 *            40 tail position i64 | 48 tail sequence u64 | 56 zero u64
 *   entry:   0 magic "STJE" | 4 CRC-32C of bytes 8..length-1 | 8 length u32 (padded to 8)
 *            12 kind u8 (1 append, 2 truncate) | 13 flags u8 (bit 0: topic id)
 *            14 name length u16 | 16 sequence u64 | 24 first offset i64 | 32 next offset i64
 *            40 topic id (16) | 56 data length u32 | 60 zero u32
 *            64 partition directory name (e.g. "orders-3") | batch bytes | zero padding
 *
 * Invariants:
 *   1. Sequence numbers of a journal's entries increase by one in file order from the tail, and
 *      over the file's whole life: each run, and each emptying, goes on above every sequence
 *      the file holds, so no older lap's or run's bytes carry the sequence replay expects.
 *   2. tail <= every needed entry's position; bytes from the tail recorded in the last synced
 *      header (durable_tail) up to head are never overwritten, so replay from any header that
 *      reached the disk sees every entry written after it, in order, up to the first torn one.
 *   3. A log's durable offset moves past its journaled bytes only when every byte before them
 *      (written while it was not journaling) was synced by a per-file round: durable stays a
 *      prefix.
 *   4. Every move of a log's end backwards is either a truncate entry or (a reset, or when the
 *      journal cannot take one) a fence file (strata.journal-fence: run id + sequence, synced)
 *      so replay ignores the log's older entries.
 *   5. Bytes the journal does not hold (a fallback) become durable only through a per-file
 *      round that, when the log has entries replay could see, first writes a fence: replay
 *      never applies a truncate entry older than synced bytes it never saw.
 *
 * Headers: this one is the broker's (open, close, rounds, stats, replay); the log's hooks into
 * the journal (the per-log state embedded in st_log_t and the calls log.c, commit.c and open.c
 * make) are journal_log.h's, so no journal header includes a log header. The format's encode
 * and decode are journal_fmt.h's; the writer is journal.c, the replay journal_replay.c.
 *
 * Threads: a journal belongs to its env's shard, like every log of that env. Recovery
 * (st_journal_recover) runs once at start-up, before any shard opens logs.
 */
#ifndef ST_STORAGE_JOURNAL_H
#define ST_STORAGE_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/env.h"

typedef struct st_journal st_journal_t;

#define ST_JOURNAL_DIR        ".journal"
#define ST_JOURNAL_FENCE_FILE "strata.journal-fence"
/* Smallest capacity accepted (st_journal_open rounds up to it). */
#define ST_JOURNAL_MIN_BYTES (64 * 1024)
/* A per-file round is started from st_log_tick for a log whose oldest entry is this old. */
#define ST_JOURNAL_SEGMENT_SYNC_MS 3000

/* ---- the broker's calls ------------------------------------------------------------------ */

/*
 * Opens or creates <data_dir>/.journal/shard-<shard>.wal (capacity `bytes`, at least
 * ST_JOURNAL_MIN_BYTES) and hands it to env (env->journal): logs opened with env from now on
 * journal their appends. The file must hold nothing to replay (st_journal_recover and
 * st_journal_close leave it so, at its size): one that does, or that has no valid header but
 * is not empty, is left alone (ST_E_EXISTS). A kept file is reused as it is, sequence numbers
 * going on from its header's (never the whole file written at start); this run's header is
 * synced first. Blocking: start-up.
 */
int st_journal_open(st_storage_env_t *env, const char *data_dir, int shard, int64_t bytes,
                    st_journal_t **out);
/*
 * After every log of the env was closed (each synced): empties the file (a header whose tail
 * is the head, synced; the file keeps its size for the next run), detaches from the env and
 * frees (once a round still in flight completes).
 * Returns the reset's result. A log still open, or one whose final sync failed, leaves the file
 * as it is, for the next start to replay. Blocking: shutdown.
 */
int st_journal_close(st_journal_t *j);
/*
 * Deferred rounds: a round is then started only by st_journal_run, which the host calls once
 * per event-loop iteration before it sleeps (the server's before-sleep hook), so every append
 * of the iteration, to any partition, shares one fdatasync (a produce to 64 partitions waits
 * for one sync, not a first one for its first partition and a second for the other 63).
 * Off by default: a round then starts as soon as something is appended and none is in flight.
 */
void st_journal_set_deferred(st_journal_t *j, bool on);
/*
 * Deferred mode only: journal appends only while the shard appends to at least `n` distinct
 * logs per 100 ms window (on at the n-th log of a window; off after 30 windows in a row below
 * n / 2).
 * Below that the journal's one sync saves little over the logs' own syncs and costs a second
 * copy of every byte, so the logs sync their own files (per-file rounds); a log switches back
 * only once a per-file round covered all it wrote (as after a fallback), and one that leaves the
 * journal writes a fence at its next per-file round — hence the slow way off. n <= 1: always
 * journal (the default).
 */
void st_journal_set_min_fanout(st_journal_t *j, int n);
/* Logs appended to in the last closed window, and whether appends are journaled now. */
int st_journal_fanout(const st_journal_t *j);
bool st_journal_spread(const st_journal_t *j);
void st_journal_run(st_journal_t *j);
/* True once a journal sync failed: the logs use per-file rounds for good. */
bool st_journal_failed(const st_journal_t *j);

typedef struct st_journal_stats {
    uint64_t rounds;       /* journal syncs submitted */
    uint64_t round_logs;   /* logs those rounds covered, summed (per round: / rounds) */
    uint64_t entries;      /* entries written */
    uint64_t write_errors; /* entry writes that failed (the log fell back) */
    uint64_t fallbacks;    /* appends a log could not journal (full, off) */
    uint64_t fences;       /* fence files written (truncations, per-file rounds after a fallback) */
    int64_t used;          /* bytes from the durable tail to the head */
    int64_t capacity;
} st_journal_stats_t;
void st_journal_stats(const st_journal_t *j, st_journal_stats_t *out);

typedef struct st_journal_recovery {
    int files;       /* journal files read */
    int64_t entries; /* valid entries found */
    int partitions;  /* partitions replayed into */
    int64_t applied; /* entries that changed a log */
    int64_t skipped; /* append entries that did not follow on from the log's end */
    int warnings;    /* corrupt files, gaps, partitions that did not open */
} st_journal_recovery_t;

/*
 * Replays every journal file in <data_dir>/.journal into the partition logs (see journal.c),
 * closes each log synced, then empties the journal files. Never fails the start: what cannot
 * be read or applied is logged and skipped. Returns 0, or -ENOMEM. Blocking: start-up, before
 * any shard opens a log. The number of shards may differ from the run that wrote them.
 */
int st_journal_recover(st_fs_t fs, const char *data_dir, st_journal_recovery_t *out);

#endif
