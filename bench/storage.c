/*
 * storage.c — benchmark of the partition log on a real file system.
 *
 * Appends of records of 64 B, 512 B, 1 KiB, 4 KiB and 16 KiB, batched as a client would into
 * ~64 KiB RecordBatch v2 batches, under three durability modes:
 *
 *   nosync   write-caching, never synced: the page-cache write rate of the append path
 *   group    strict, group commit: syncs run on a helper thread (as io_uring would run them
 *            off the event loop); `window` appends are kept waiting for durability at once,
 *            like many producers with acks=all; one fdatasync covers all appended before it
 *   sync     strict, one fdatasync per batch, inline (the naive design)
 *
 * then sequential and random reads (st_log_read + pread copy) of what was written. Prints MB/s
 * and per-append latency p50/p99/p99.9 (append call to durable for group/sync; the append call
 * for nosync). Each run stops at its byte target or its time cap.
 *
 * usage: bench_storage [--dir D] [--mb N] [--secs S] [--window W] [--sizes 64,512,...]
 * Prints one line per run, then "group_mbps_<size> X" lines the script compares with fio.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/unit/storage/testutil.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"

/* ---- a sync helper thread, standing in for io_uring ------------------------------------- */

typedef struct sync_job {
    int fd;
    st_sync_done_fn done;
    void *arg;
    int res;
    struct sync_job *next;
} sync_job_t;

typedef struct syncer {
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    sync_job_t *todo, *todo_tail, *done, *done_tail;
    bool stop;
    pthread_t th;
    st_fs_t fs;
    uint64_t syncs;
} syncer_t;

static void *syncer_main(void *p)
{
    syncer_t *s = p;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->todo && !s->stop)
            pthread_cond_wait(&s->cv_work, &s->mu);
        if (!s->todo && s->stop)
            break;
        sync_job_t *j = s->todo;
        s->todo = j->next;
        if (!s->todo)
            s->todo_tail = NULL;
        pthread_mutex_unlock(&s->mu);
        j->res = s->fs.ops->fdatasync(s->fs.ctx, j->fd);
        j->next = NULL;
        pthread_mutex_lock(&s->mu);
        s->syncs++;
        if (s->done_tail)
            s->done_tail->next = j;
        else
            s->done = j;
        s->done_tail = j;
        pthread_cond_signal(&s->cv_done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int syncer_submit(void *ctx, int fd, st_sync_done_fn done, void *arg)
{
    syncer_t *s = ctx;
    sync_job_t *j = malloc(sizeof *j);
    if (!j)
        return -ENOMEM;
    j->fd = fd;
    j->done = done;
    j->arg = arg;
    j->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->todo_tail)
        s->todo_tail->next = j;
    else
        s->todo = j;
    s->todo_tail = j;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Runs completed syncs' callbacks on this (the "shard") thread; waits if `block`. */
static int syncer_poll(syncer_t *s, bool block)
{
    pthread_mutex_lock(&s->mu);
    while (block && !s->done)
        pthread_cond_wait(&s->cv_done, &s->mu);
    sync_job_t *list = s->done;
    s->done = s->done_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    int n = 0;
    while (list) {
        sync_job_t *j = list;
        list = j->next;
        j->done(j->arg, j->res);
        free(j);
        n++;
    }
    return n;
}

/* ---- measurement ----------------------------------------------------------------------- */

typedef struct pending {
    int64_t t0;
    int64_t *lat;
    size_t *nlat;
    int *outstanding;
} pending_t;

static void on_durable(void *arg, int res)
{
    pending_t *p = arg;
    if (res != 0) {
        fprintf(stderr, "sync failed: %s\n", st_strerror(res));
        exit(1);
    }
    p->lat[(*p->nlat)++] = st_mono_ns() - p->t0;
    (*p->outstanding)--;
    free(p);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct(int64_t *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(q * (double)(n - 1));
    return (double)v[i] / 1000.0; /* microseconds */
}

typedef enum { M_NOSYNC, M_GROUP, M_SYNC } mode_t_;
static const char *mode_name[] = {"nosync", "group", "sync"};

typedef struct opts {
    const char *dir;
    int64_t bytes;
    double secs;
    int window;
} opts_t;

static void rm_rf(st_storage_env_t *env, const char *dir)
{
    st_storage_delete_dir(env, dir);
}

/* One append run; returns MB/s. Leaves the log for the read runs when keep. */
static double run_append(const opts_t *o, mode_t_ mode, size_t rec, bool keep, int64_t *end_out)
{
    st_storage_env_t env;
    st_storage_env_init(&env, st_fs_posix(), 1024);
    syncer_t sy;
    memset(&sy, 0, sizeof sy);
    pthread_mutex_init(&sy.mu, NULL);
    pthread_cond_init(&sy.cv_work, NULL);
    pthread_cond_init(&sy.cv_done, NULL);
    sy.fs = env.fs;
    if (mode == M_GROUP) {
        pthread_create(&sy.th, NULL, syncer_main, &sy);
        env.sync_submit = syncer_submit;
        env.sync_ctx = &sy;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/bench-%zu-0", o->dir, rec);
    rm_rf(&env, dir);
    st_log_config_t c;
    st_log_config_default(&c);
    c.segment_bytes = 256LL << 20;
    c.max_message_bytes = 1 << 20;
    if (mode == M_NOSYNC)
        c.flush_policy = ST_FLUSH_WRITE_CACHING;
    st_log_t *log;
    int rc = st_log_open(&env, dir, &c, &log);
    if (rc < 0) {
        fprintf(stderr, "open %s: %s\n", dir, st_strerror(rc));
        exit(1);
    }
    /* One ~64 KiB batch of rec-byte values. */
    int32_t count = (int32_t)(65536 / (rec + 12));
    if (count < 1)
        count = 1;
    st_buf_t b;
    st_buf_init(&b);
    tb_batch(&b, count, rec, st_wall_ms(), 'x');
    size_t max_appends = (size_t)(o->bytes / (int64_t)b.len) + 1;
    int64_t *lat = malloc(max_appends * sizeof *lat);
    size_t nlat = 0, appends = 0;
    int outstanding = 0;
    int64_t t_start = st_mono_ns(), deadline = t_start + (int64_t)(o->secs * 1e9);
    int64_t written = 0;
    while (appends < max_appends && written < o->bytes && st_mono_ns() < deadline) {
        if (mode == M_GROUP && outstanding >= o->window) {
            syncer_poll(&sy, true);
            continue;
        }
        int64_t t0 = st_mono_ns();
        st_log_append_info_t info;
        rc = st_log_append(log, b.data, b.len, 0, &info, NULL);
        if (rc < 0) {
            fprintf(stderr, "append: %s\n", st_strerror(rc));
            exit(1);
        }
        appends++;
        written += (int64_t)b.len;
        if (mode == M_GROUP) {
            pending_t *p = malloc(sizeof *p);
            *p = (pending_t){t0, lat, &nlat, &outstanding};
            outstanding++;
            rc = st_log_wait_durable(log, info.last_offset + 1, on_durable, p);
            if (rc == 1)
                on_durable(p, 0);
            else if (rc < 0) {
                fprintf(stderr, "wait: %s\n", st_strerror(rc));
                exit(1);
            }
            syncer_poll(&sy, false);
        } else {
            lat[nlat++] = st_mono_ns() - t0;
        }
    }
    while (mode == M_GROUP && outstanding > 0)
        syncer_poll(&sy, true);
    int64_t elapsed = st_mono_ns() - t_start;
    double mbps = (double)written / (1 << 20) / ((double)elapsed / 1e9);
    qsort(lat, nlat, sizeof *lat, cmp_i64);
    printf("append %-6s rec %5zu B  batch %6zu B  %8.1f MB/s  %9.0f rec/s  lat us p50 %8.1f p99 "
           "%8.1f p99.9 %8.1f",
           mode_name[mode], rec, b.len, mbps, (double)appends * count / ((double)elapsed / 1e9),
           pct(lat, nlat, 0.5), pct(lat, nlat, 0.99), pct(lat, nlat, 0.999));
    if (mode == M_GROUP)
        printf("  syncs %" PRIu64 " (%.1f batches/sync)", sy.syncs,
               sy.syncs ? (double)appends / (double)sy.syncs : 0.0);
    printf("\n");
    fflush(stdout);
    *end_out = st_log_end_offset(log);
    st_log_close(log);
    if (mode == M_GROUP) {
        pthread_mutex_lock(&sy.mu);
        sy.stop = true;
        pthread_cond_signal(&sy.cv_work);
        pthread_mutex_unlock(&sy.mu);
        pthread_join(sy.th, NULL);
    }
    if (!keep)
        rm_rf(&env, dir);
    st_storage_env_fini(&env);
    free(lat);
    st_buf_fini(&b);
    return mbps;
}

static void run_reads(const opts_t *o, size_t rec, int64_t end)
{
    st_storage_env_t env;
    st_storage_env_init(&env, st_fs_posix(), 1024);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/bench-%zu-0", o->dir, rec);
    st_log_config_t c;
    st_log_config_default(&c);
    c.segment_bytes = 256LL << 20;
    st_log_t *log;
    if (st_log_open(&env, dir, &c, &log) < 0)
        exit(1);
    size_t cap = 2 << 20;
    uint8_t *buf = malloc(cap);
    for (int random = 0; random < 2; random++) {
        int64_t *lat = malloc(200000 * sizeof *lat);
        size_t nlat = 0;
        int64_t bytes = 0, off = 0, t_start = st_mono_ns();
        int64_t deadline = t_start + (int64_t)(o->secs * 1e9);
        uint64_t rng = 42;
        int64_t max_bytes = random ? 65536 : 1 << 20;
        while (nlat < 200000 && st_mono_ns() < deadline) {
            if (random) {
                rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                off = (int64_t)((rng >> 17) % (uint64_t)end);
            } else if (off >= end) {
                break;
            }
            int64_t t0 = st_mono_ns();
            st_log_read_t r;
            if (st_log_read(log, off, max_bytes, -1, &r) < 0)
                exit(1);
            if (st_log_read_copy(&r, buf, cap) != r.bytes)
                exit(1);
            lat[nlat++] = st_mono_ns() - t0;
            bytes += r.bytes;
            off = r.next_offset;
            st_log_read_release(&r);
        }
        int64_t elapsed = st_mono_ns() - t_start;
        qsort(lat, nlat, sizeof *lat, cmp_i64);
        printf("read   %-6s rec %5zu B  fetch %6" PRId64 " B  %8.1f MB/s  %9.0f reads/s  lat us "
               "p50 %8.1f p99 %8.1f p99.9 %8.1f\n",
               random ? "random" : "seq", rec, max_bytes,
               (double)bytes / (1 << 20) / ((double)elapsed / 1e9),
               (double)nlat / ((double)elapsed / 1e9), pct(lat, nlat, 0.5), pct(lat, nlat, 0.99),
               pct(lat, nlat, 0.999));
        free(lat);
    }
    free(buf);
    st_log_close(log);
    rm_rf(&env, dir);
    st_storage_env_fini(&env);
}

int main(int argc, char **argv)
{
    opts_t o = {"bench-data", 256LL << 20, 3.0, 64};
    const char *sizes = "64,512,1024,4096,16384";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--dir") == 0)
            o.dir = argv[i + 1];
        else if (strcmp(argv[i], "--mb") == 0)
            o.bytes = atoll(argv[i + 1]) << 20;
        else if (strcmp(argv[i], "--secs") == 0)
            o.secs = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--window") == 0)
            o.window = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--sizes") == 0)
            sizes = argv[i + 1];
    }
    st_log_set_level(ST_LOG_WARN);
    printf("storage bench: dir %s, up to %" PRId64 " MiB or %.1f s per run, group window %d\n",
           o.dir, o.bytes >> 20, o.secs, o.window);
    char *list = strdup(sizes), *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t rec = (size_t)atol(t);
        int64_t end;
        run_append(&o, M_NOSYNC, rec, false, &end);
        double g = run_append(&o, M_GROUP, rec, true, &end);
        run_reads(&o, rec, end);
        run_append(&o, M_SYNC, rec, false, &end);
        printf("group_mbps_%zu %.1f\n", rec, g);
    }
    free(list);
    return 0;
}
