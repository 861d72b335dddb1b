/*
 * journal_fmt.h — the journal file's format as pure encode/decode functions, shared by the
 * writer (journal.c) and the replay (journal_replay.c), and used by the tests and the fuzzer
 * to build journal files. The byte layout is journal.h's ("File layout"); this header gives it
 * names. Storage-internal: nothing outside storage/ (and its tests) includes it.
 *
 * Decoding never trusts the bytes: a header or an entry that is not exactly valid (magic, CRC,
 * version, lengths in bounds, a directory name that is one path component) is "not there",
 * never an assert.
 *
 * Threads: any (no state).
 */
#ifndef ST_STORAGE_JOURNAL_FMT_H
#define ST_STORAGE_JOURNAL_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/fs.h"

#define ST_JFMT_HDR_SLOT      4096
#define ST_JFMT_DATA_OFF      (2 * ST_JFMT_HDR_SLOT)
#define ST_JFMT_HDR_SIZE      64
#define ST_JFMT_ENTRY_HDR     64
#define ST_JFMT_HDR_MAGIC     0x53544a48u /* "STJH" */
#define ST_JFMT_ENTRY_MAGIC   0x53544a45u /* "STJE" */
#define ST_JFMT_FENCE_MAGIC   0x53544a46u /* "STJF" */
#define ST_JFMT_FENCE_SIZE    24
#define ST_JFMT_KIND_APPEND   1
#define ST_JFMT_KIND_TRUNCATE 2
#define ST_JFMT_FLAG_TOPIC_ID 1
/* The smallest entry (a header and a one-byte name, padded): a lap holds at most capacity /
 * ST_JFMT_ENTRY_MIN entries. */
#define ST_JFMT_ENTRY_MIN 72

/* A decoded header. */
typedef struct st_jhdr {
    uint64_t gen, run_id, tail_seq;
    int64_t cap, tail;
} st_jhdr_t;

/* An entry's header fields (the 64 bytes before its name). */
typedef struct st_jentry_hdr {
    uint32_t length; /* header + name + data, unpadded */
    int kind;        /* ST_JFMT_KIND_* */
    bool has_tid;
    uint16_t name_len;
    uint64_t seq;
    int64_t first, next;
    uint8_t tid[16];
    uint32_t data_len;
} st_jentry_hdr_t;

/* n rounded up to a multiple of 8 (entries are padded to it). */
static inline int64_t st_jfmt_pad8(int64_t n)
{
    return (n + 7) & ~(int64_t)7;
}

/* The 64 header bytes of h, CRC included, into b. */
void st_jfmt_encode_header(const st_jhdr_t *h, uint8_t *b);
/* b: ST_JFMT_HDR_SIZE bytes. A valid header (magic, CRC, version 1, capacity and tail in bounds):
 * true and h. */
bool st_jfmt_decode_header(const uint8_t *b, st_jhdr_t *h);
/* The valid header of higher generation of the file: 1 and h, 0 when neither slot holds one,
 * or an I/O error. */
int st_jfmt_read_header(st_fs_t *fs, int fd, st_jhdr_t *h);

/* The 64 header bytes of an entry into b, its CRC covering them, the name and the data. */
void st_jfmt_encode_entry(const st_jentry_hdr_t *e, const char *name, const uint8_t *data,
                          uint8_t *b);

/* An entry read back: where its batch bytes lie in the file. */
typedef struct st_jentry {
    int file; /* the caller's: which journal file */
    uint64_t seq;
    int64_t data_at; /* file offset of the batch bytes */
    uint32_t data_len;
    int kind;
    bool has_tid;
    int64_t first, next;
    uint8_t tid[16];
    char *name; /* malloc'ed: the partition directory's name */
} st_jentry_t;

/* Reads the entry at logical position pos of a data area of cap bytes, if it is valid and has
 * sequence seq: 1, *e (e->name malloc'ed, e->file untouched) and its unpadded length; 0 if no
 * such entry is there; -ENOMEM or an I/O error. */
int st_jfmt_read_entry(st_fs_t *fs, int fd, int64_t cap, int64_t pos, uint64_t seq, st_jentry_t *e,
                       int64_t *length);
/* Whether a valid entry starts at the header's tail (entries not replayed yet). An I/O error
 * counts as one. */
bool st_jfmt_entry_at(st_fs_t *fs, int fd, const st_jhdr_t *h);

/* A fence file's ST_JFMT_FENCE_SIZE bytes into b (journal.h invariant 4). */
void st_jfmt_encode_fence(uint64_t run_id, uint64_t seq, uint8_t *b);
/* The fence file of partition directory dir: 0 and its run id and sequence, -ENOENT, ST_E_CORRUPT
 * or an I/O error. */
int st_jfmt_read_fence(st_fs_t *fs, const char *dir, uint64_t *run_id, uint64_t *seq);

#endif
