/*
 * dumplog.c — `strata debug dump-log FILE.log [--records]` and `strata debug verify-index`.
 *
 * dump-log walks a segment file batch by batch (the layout is in storage/batch.h, whose parser
 * and CRC it uses), printing offsets, timestamps, sizes, codec and whether the CRC matches, like
 * Kafka's kafka-dump-log; --records also prints each record of uncompressed batches. It keeps
 * going past a bad CRC (that batch's bytes are still framed) and stops at bytes that cannot be
 * framed. Exit 1 when anything was wrong.
 *
 * verify-index checks FILE.index and FILE.timeindex (storage/index.h) against the log: every
 * offset entry must point at a batch start whose offsets contain it, entries must increase,
 * time entries must increase and name offsets inside the segment.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "cli/cmds.h"
#include "cli/common.h"
#include "storage/batch.h"

static const char *const codecs[] = {"none", "gzip", "snappy", "lz4", "zstd", "?5", "?6", "?7"};

/* Reads a whole file into memory; returns 0 or -errno. */
static int slurp(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    st_buf_t b;
    st_buf_init(&b);
    uint8_t tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
        st_buf_append(&b, tmp, n);
    int err = ferror(f) ? -EIO : b.oom ? -ENOMEM : 0;
    fclose(f);
    if (err) {
        st_buf_fini(&b);
        return err;
    }
    *data = st_buf_steal(&b, len);
    return 0;
}

/* Prints bytes as a JSON-ish string, escaping what is not printable. */
static void print_bytes(const uint8_t *p, int32_t len)
{
    if (len < 0) {
        printf("null");
        return;
    }
    putchar('"');
    for (int32_t i = 0; i < len && i < 200; i++) {
        uint8_t c = p[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c >= 32 && c < 127)
            putchar(c);
        else
            printf("\\x%02x", c);
    }
    if (len > 200)
        printf("...(%d bytes)", len);
    putchar('"');
}

/* One batch found in a segment: where it is and what it covers (for verify-index). */
typedef struct seg_batch {
    int64_t pos, base, last, max_ts;
} seg_batch_t;

/*
 * Walks the batches of a segment image. With print, prints each (and records with records).
 * Fills *out (may be NULL) with the batches. Returns the number of problems found.
 */
static int walk(const uint8_t *data, size_t len, bool print, bool records, seg_batch_t **out,
                size_t *nout)
{
    int problems = 0;
    size_t pos = 0, cap = 0, n = 0;
    seg_batch_t *bs = NULL;
    int64_t prev_last = -1;
    while (pos < len) {
        st_batch_hdr_t h;
        int r = st_batch_parse_hdr(data + pos, len - pos, &h);
        if (r < 0 || (int64_t)(len - pos) < st_batch_size(&h)) {
            printf("position %zu: %s — %zu trailing byte(s) cannot be read as a batch\n", pos,
                   r == ST_E_UNSUPPORTED ? "not a magic-2 batch"
                   : r < 0               ? st_strerror(r)
                                         : "batch runs past the end of the file",
                   len - pos);
            problems++;
            break;
        }
        size_t size = (size_t)st_batch_size(&h);
        uint32_t crc = st_batch_compute_crc(data + pos, size);
        bool crc_ok = crc == h.crc;
        if (!crc_ok)
            problems++;
        if (h.base_offset <= prev_last) {
            problems++;
            if (print)
                printf("position %zu: base offset %" PRId64 " does not follow %" PRId64 "\n", pos,
                       h.base_offset, prev_last);
        }
        prev_last = st_batch_last_offset(&h);
        if (print)
            printf("baseOffset: %" PRId64 " lastOffset: %" PRId64 " count: %d position: %zu "
                   "size: %zu magic: %d crc: %08" PRIx32 " crcValid: %s%s "
                   "compression: %s baseTimestamp: %" PRId64 " maxTimestamp: %" PRId64
                   " timestampType: %s leaderEpoch: %d producerId: %" PRId64
                   " producerEpoch: %d baseSequence: %d transactional: %s control: %s\n",
                   h.base_offset, st_batch_last_offset(&h), h.records_count, pos, size, h.magic,
                   h.crc, crc_ok ? "true" : "false", crc_ok ? "" : " (CORRUPT)",
                   codecs[st_batch_compression(&h)], h.base_timestamp, h.max_timestamp,
                   h.attributes & ST_BATCH_ATTR_LOG_APPEND_TIME ? "LogAppendTime" : "CreateTime",
                   h.partition_leader_epoch, h.producer_id, h.producer_epoch, h.base_sequence,
                   h.attributes & ST_BATCH_ATTR_TRANSACTIONAL ? "true" : "false",
                   h.attributes & ST_BATCH_ATTR_CONTROL ? "true" : "false");
        if (print && records) {
            st_batch_iter_t it;
            if (!crc_ok) {
                printf("  (records not shown: the CRC does not match)\n");
            } else if (st_batch_iter_init(&it, data + pos, size) < 0) {
                printf("  (records not shown: %s-compressed)\n", codecs[st_batch_compression(&h)]);
            } else {
                st_batch_record_t rec;
                int rr;
                while ((rr = st_batch_iter_next(&it, &rec)) == 1) {
                    printf("  | offset: %" PRId64 " timestamp: %" PRId64 " headers: %d key: ",
                           rec.offset, rec.timestamp, rec.header_count);
                    print_bytes(rec.key, rec.key_len);
                    printf(" value: ");
                    print_bytes(rec.value, rec.value_len);
                    putchar('\n');
                }
                if (rr < 0) {
                    printf("  (records do not parse: %s)\n", st_strerror(rr));
                    problems++;
                }
            }
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            bs = realloc(bs, cap * sizeof(*bs));
        }
        bs[n++] =
            (seg_batch_t){(int64_t)pos, h.base_offset, st_batch_last_offset(&h), h.max_timestamp};
        pos += size;
    }
    if (out) {
        *out = bs;
        *nout = n;
    } else {
        free(bs);
    }
    return problems;
}

int st_cli_debug_dump_log(int argc, char **argv)
{
    static const char usage[] = "debug dump-log FILE.log [--records]";
    bool records = false;
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {
        {'r', "records", ST_CLI_OPT_FLAG, &records, NULL, "also print every record"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Prints every batch of a segment file (offsets, timestamps, sizes, "
                          "codec, CRC valid or\nnot). Exits 1 when a batch is corrupt.",
                          opts, false, &pos, 1, 1);
    if (rc >= 0)
        goto out;
    uint8_t *data;
    size_t len;
    int e = slurp(pos.v[0], &data, &len);
    if (e < 0) {
        st_cli_errorf("cannot read %s: %s", pos.v[0], st_strerror(e));
        rc = ST_CLI_FAIL;
        goto out;
    }
    printf("Dumping %s (%zu bytes)\n", pos.v[0], len);
    int problems = walk(data, len, true, records, NULL, NULL);
    if (problems)
        printf("%d problem(s) found\n", problems);
    free(data);
    rc = problems ? ST_CLI_FAIL : ST_CLI_OK;
out:
    st_cli_strlist_fini(&pos);
    return rc;
}

/* "…/00000000000000000042.log" -> 42, or -1. */
static int64_t base_from_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    int64_t v;
    char digits[21];
    if (strlen(name) < 20)
        return -1;
    memcpy(digits, name, 20);
    digits[20] = '\0';
    return st_cli_parse_i64(digits, &v) < 0 ? -1 : v;
}

int st_cli_debug_verify_index(int argc, char **argv)
{
    static const char usage[] = "debug verify-index FILE.log";
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {ST_CLI_OPT_END};
    int rc = st_cli_parse(argc, argv, usage,
                          "Checks FILE.index and FILE.timeindex next to a segment against its "
                          "batches. Exits 1 on\nany inconsistency.",
                          opts, false, &pos, 1, 1);
    if (rc >= 0)
        goto out;
    rc = ST_CLI_FAIL;
    const char *log = pos.v[0];
    size_t ll = strlen(log);
    if (ll < 4 || strcmp(log + ll - 4, ".log")) {
        rc = st_cli_usage_error(usage, "give the segment's .log file; its .index and "
                                       ".timeindex sit next to it");
        goto out;
    }
    int64_t base = base_from_name(log);
    if (base < 0) {
        st_cli_errorf("%s: the file name should be the segment's base offset (20 digits)", log);
        goto out;
    }
    uint8_t *data, *idx = NULL, *tidx = NULL;
    size_t len, ilen = 0, tlen = 0;
    int e = slurp(log, &data, &len);
    if (e < 0) {
        st_cli_errorf("cannot read %s: %s", log, st_strerror(e));
        goto out;
    }
    seg_batch_t *bs;
    size_t nb;
    int problems = walk(data, len, false, false, &bs, &nb);
    if (problems)
        printf("%s: %d problem(s) in the log itself (run debug dump-log)\n", log, problems);
    char path[4096];
    snprintf(path, sizeof(path), "%.*s.index", (int)(ll - 4), log);
    if ((e = slurp(path, &idx, &ilen)) < 0) {
        printf("%s: %s\n", path, st_strerror(e));
        problems++;
    } else {
        if (ilen % 8)
            printf("%s: %zu trailing byte(s) (size not a multiple of 8)\n", path, ilen % 8),
                problems++;
        int64_t prev_rel = -1, prev_pos = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 8 <= ilen; i += 8) {
            int64_t rel = st_be32(idx + i), p = st_be32(idx + i + 4);
            if (rel == 0 && p == 0 && i > 0)
                break; /* preallocated, unused tail */
            if (rel <= prev_rel || p <= prev_pos) {
                printf("%s entry %zu: (%" PRId64 ", %" PRId64 ") does not increase\n", path, i / 8,
                       rel, p);
                problems++;
            }
            while (bi < nb && bs[bi].pos < p)
                bi++;
            if (bi == nb || bs[bi].pos != p) {
                printf("%s entry %zu: position %" PRId64 " is not a batch start\n", path, i / 8, p);
                problems++;
            } else if (base + rel < bs[bi].base || base + rel > bs[bi].last) {
                printf("%s entry %zu: offset %" PRId64 " is not in the batch at %" PRId64
                       " (offsets %" PRId64 "..%" PRId64 ")\n",
                       path, i / 8, base + rel, p, bs[bi].base, bs[bi].last);
                problems++;
            }
            prev_rel = rel;
            prev_pos = p;
        }
        printf("%s: %zu entries\n", path, ilen / 8);
    }
    snprintf(path, sizeof(path), "%.*s.timeindex", (int)(ll - 4), log);
    if ((e = slurp(path, &tidx, &tlen)) < 0) {
        printf("%s: %s\n", path, st_strerror(e));
        problems++;
    } else {
        int64_t prev_ts = INT64_MIN, prev_rel = -1;
        int64_t last = nb ? bs[nb - 1].last : base - 1;
        for (size_t i = 0; i + 12 <= tlen; i += 12) {
            int64_t ts = (int64_t)st_be64(tidx + i), rel = st_be32(tidx + i + 8);
            if (ts == 0 && rel == 0 && i > 0)
                break;
            if (ts <= prev_ts || rel < prev_rel) {
                printf("%s entry %zu: (%" PRId64 ", %" PRId64 ") does not increase\n", path, i / 12,
                       ts, rel);
                problems++;
            }
            if (base + rel > last) {
                printf("%s entry %zu: offset %" PRId64 " is past the segment's last offset %" PRId64
                       "\n",
                       path, i / 12, base + rel, last);
                problems++;
            }
            prev_ts = ts;
            prev_rel = rel;
        }
        printf("%s: %zu entries\n", path, tlen / 12);
    }
    printf("%s: %zu batches, %s\n", log, nb, problems ? "PROBLEMS FOUND" : "consistent");
    free(bs);
    free(data);
    free(idx);
    free(tidx);
    rc = problems ? ST_CLI_FAIL : ST_CLI_OK;
out:
    st_cli_strlist_fini(&pos);
    return rc;
}
