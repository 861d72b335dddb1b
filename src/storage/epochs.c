/*
 * epochs.c — the leader epoch cache of a partition log: (epoch, first offset) entries kept in
 * leader-epoch-checkpoint, rebuilt from the batches' headers when that file is missing, corrupt
 * or disagrees with the log; OffsetForLeaderEpoch's answer (st_log_end_offset_for_epoch).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "base/log.h"
#include "storage/log_impl.h"

int st_log_epochs_write(st_log_t *log, bool durable)
{
    st_buf_t b;
    st_buf_init(&b);
    int rc = st_meta_format_epochs(log->epochs, log->nepochs, &b);
    uint32_t crc = rc == 0 ? st_crc32c(0, b.data, b.len) : 0;
    if (rc == 0 && durable && log->env->defer_depth > 0 && log->epochs_written &&
        log->epochs_crc == crc && log->epochs_len == b.len) {
        /* The file already holds these bytes, renamed into place: the deferred sync
         * (env.h) makes them durable. */
        st_buf_fini(&b);
        return 0;
    }
    log->epochs_written = false;
    if (rc == 0 && durable) {
        rc = st_fs_write_file_atomic(&log->env->fs, log->dir, ST_META_EPOCH_FILE, b.data, b.len);
    } else if (rc == 0) {
        char tmp[PATH_MAX], dst[PATH_MAX];
        st_fs_t *fs = &log->env->fs;
        if ((rc = st_log_path(log, ST_META_EPOCH_FILE ".tmp", tmp, sizeof tmp)) == 0 &&
            (rc = st_log_path(log, ST_META_EPOCH_FILE, dst, sizeof dst)) == 0) {
            int fd = fs->ops->open(fs->ctx, tmp, ST_FS_RDWR | ST_FS_CREAT | ST_FS_TRUNC);
            rc = fd;
            if (fd >= 0) {
                rc = st_fs_pwrite_full(fs, fd, b.data, b.len, 0);
                fs->ops->close(fs->ctx, fd);
                if (rc == 0)
                    rc = fs->ops->rename(fs->ctx, tmp, dst);
            }
        }
    }
    st_buf_fini(&b);
    if (rc == 0) {
        log->epochs_written = true;
        log->epochs_crc = crc;
        log->epochs_len = b.len;
    }
    if (rc < 0)
        ST_WARN("storage: %s: cannot write %s: %s", log->dir, ST_META_EPOCH_FILE, st_strerror(rc));
    return rc;
}

int st_log_epochs_add(st_log_t *log, int32_t epoch, int64_t start)
{
    if (log->nepochs > 0 && epoch <= log->epochs[log->nepochs - 1].epoch)
        return 0;
    /* an epoch that never got a record (recorded at its election) gives way to the next one
     * at the same offset, as Kafka's cache does */
    while (log->nepochs > 0 && log->epochs[log->nepochs - 1].start_offset >= start)
        log->nepochs--;
    if (log->nepochs == log->capepochs) {
        int cap = log->capepochs ? log->capepochs * 2 : 8;
        st_epoch_entry_t *n = realloc(log->epochs, (size_t)cap * sizeof *n);
        if (!n)
            return -ENOMEM;
        log->epochs = n;
        log->capepochs = cap;
    }
    log->epochs[log->nepochs].epoch = epoch;
    log->epochs[log->nepochs].start_offset = start;
    log->nepochs++;
    return 1;
}

/* Drops entries starting at or after end (truncation). */
bool st_log_epochs_truncate_end(st_log_t *log, int64_t end)
{
    int n = log->nepochs;
    while (log->nepochs > 0 && log->epochs[log->nepochs - 1].start_offset >= end)
        log->nepochs--;
    return n != log->nepochs;
}

/* Kafka's truncateFromStart: entries before start go, the latest of them moves to start. */
bool st_log_epochs_truncate_start(st_log_t *log, int64_t start)
{
    int i = 0;
    while (i + 1 < log->nepochs && log->epochs[i + 1].start_offset <= start)
        i++;
    bool changed = i > 0;
    if (i > 0) {
        memmove(log->epochs, log->epochs + i, (size_t)(log->nepochs - i) * sizeof *log->epochs);
        log->nepochs -= i;
    }
    if (log->nepochs > 0 && log->epochs[0].start_offset < start) {
        log->epochs[0].start_offset = start;
        changed = true;
    }
    return changed;
}

int32_t st_log_latest_epoch(const st_log_t *log)
{
    return log->nepochs ? log->epochs[log->nepochs - 1].epoch : -1;
}

int st_log_end_offset_for_epoch(const st_log_t *log, int32_t epoch, int32_t *out_epoch,
                                int64_t *end_offset)
{
    *out_epoch = -1;
    *end_offset = -1;
    if (epoch < 0 || log->nepochs == 0)
        return 0;
    if (epoch == log->epochs[log->nepochs - 1].epoch) {
        *out_epoch = epoch;
        *end_offset = log->end;
        return 0;
    }
    int hi = 0; /* first entry with a larger epoch */
    while (hi < log->nepochs && log->epochs[hi].epoch <= epoch)
        hi++;
    if (hi == log->nepochs)
        return 0;
    *out_epoch = hi == 0 ? epoch : log->epochs[hi - 1].epoch;
    *end_offset = log->epochs[hi].start_offset;
    return 0;
}

int st_log_assign_epoch(st_log_t *log, int32_t epoch, int64_t *start)
{
    *start = -1;
    int rc = epoch >= 0 ? st_log_epochs_add(log, epoch, log->end) : 0;
    if (rc < 0)
        return rc;
    for (int i = log->nepochs - 1; i >= 0; i--)
        if (log->epochs[i].epoch == epoch) {
            *start = log->epochs[i].start_offset;
            break;
        }
    return rc > 0 ? st_log_epochs_write(log, false) : 0;
}

int st_log_forget_epochs_from(st_log_t *log, int64_t offset)
{
    return st_log_epochs_truncate_end(log, offset) ? st_log_epochs_write(log, false) : 0;
}

void st_log_epoch_scan(void *arg, const st_batch_hdr_t *h)
{
    st_log_t *log = arg;
    if (h->partition_leader_epoch >= 0)
        st_log_epochs_add(log, h->partition_leader_epoch, h->base_offset);
}

/* Rebuilds the epoch cache from the batch headers of every segment. */
int st_log_epochs_rebuild(st_log_t *log)
{
    log->nepochs = 0;
    st_segment_reader_t *r = malloc(sizeof *r);
    if (!r)
        return -ENOMEM;
    int rc = 0;
    for (int i = 0; i < log->nsegs && rc == 0; i++) {
        st_segment_t *s = log->segs[i];
        st_segment_reader_init(r, s);
        st_batch_hdr_t h;
        for (int64_t pos = 0; pos < s->size; pos += st_batch_size(&h)) {
            if ((rc = st_segment_read_hdr(r, pos, &h)) < 0)
                break;
            st_log_epoch_scan(log, &h);
        }
    }
    free(r);
    return rc;
}

/* Reads leader-epoch-checkpoint; *rebuild is set when it is missing or corrupt. */
int st_log_epochs_load(st_log_t *log, bool *rebuild)
{
    char p[PATH_MAX];
    *rebuild = false;
    int rc = st_log_path(log, ST_META_EPOCH_FILE, p, sizeof p);
    if (rc < 0)
        return rc;
    uint8_t *d;
    size_t n;
    rc = st_fs_read_file(&log->env->fs, p, 1 << 24, &d, &n);
    if (rc == -ENOENT || rc == -EFBIG) {
        *rebuild = true;
        return 0;
    }
    if (rc < 0)
        return rc;
    st_epoch_entry_t *e;
    int cnt;
    rc = st_meta_parse_epochs(d, n, &e, &cnt);
    free(d);
    if (rc == ST_E_CORRUPT) {
        ST_WARN("storage: %s: %s is corrupt; rebuilding it from the log", log->dir,
                ST_META_EPOCH_FILE);
        *rebuild = true;
        return 0;
    }
    if (rc < 0)
        return rc;
    free(log->epochs);
    log->epochs = e;
    log->nepochs = cnt;
    log->capepochs = cnt + 1;
    return 0;
}
