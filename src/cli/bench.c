/*
 * bench.c — `strata bench produce|consume|e2e`: throughput and latency of a broker as seen by
 * librdkafka clients.
 *
 * produce: --producers threads, each with its own librdkafka producer and its own histogram
 *   (merged at the end), send --count messages (or for --duration) of --size bytes. Latency is
 *   delivery-report time minus send time; with --rate, minus the message's *intended* send
 *   time (start + i/rate), so a stalled broker shows up in the tail instead of silently
 *   slowing the senders down (no coordinated omission). --partitioner picks where record i
 *   (counted over all producers) goes: sticky (no key, no partition: librdkafka's sticky
 *   partitioner fills one partition's batch at a time), roundrobin (no key, partition
 *   i % partitions, set explicitly) or keyed (key "k<i % keys>", partition chosen by the
 *   client's partitioner from the key, as keyed traffic is).
 * consume: one consumer reads the topic from the start until --count messages, the end of
 *   every partition, or --duration, whichever comes first.
 * e2e: a consumer starts at the current end of every partition, then producers run as in
 *   produce with the intended send time in each payload's first 8 bytes; latency is receive
 *   time minus that time (same process, monotonic clock).
 *
 * A progress line goes to stderr every second; the summary goes to stdout (text or --json).
 * Exit 1 when any message failed or the run could not finish.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cmds.h"
#include "cli/common.h"
#include "cli/hist.h"

enum { BENCH_STICKY, BENCH_ROUNDROBIN, BENCH_KEYED };
static const char *const partitioner_names[] = {"sticky", "roundrobin", "keyed"};

typedef struct bench_cfg {
    const char *topic;
    int64_t partitions;  /* for creation; 0 = leave as is */
    int64_t size;        /* payload bytes */
    int64_t count;       /* messages in all, 0 = until duration */
    int64_t duration_ms; /* 0 = until count */
    double rate;         /* messages/s in all, 0 = as fast as possible */
    int64_t producers;
    const char *acks, *linger, *batch, *compression;
    int partitioner; /* BENCH_STICKY, BENCH_ROUNDROBIN, BENCH_KEYED */
    int64_t keys;    /* keyed: distinct keys (0 = the topic's partition count) */
    int nparts;      /* the topic's partition count, once known */
    bool json;
    bool e2e; /* stamp payloads for the consumer */
} bench_cfg_t;

/* One producer thread: its own handle and histogram; counters read by the progress line. */
typedef struct bench_worker {
    pthread_t th;
    const bench_cfg_t *cfg;
    rd_kafka_t *rk;
    st_cli_hist_t *hist;
    int64_t count; /* messages this worker sends (0 = until deadline) */
    int64_t index; /* this worker's number: its record i is record i * producers + index */
    double rate;   /* this worker's share of --rate */
    int64_t start_ns, deadline_ns;
    _Atomic uint64_t sent, acked, failed;
    rd_kafka_resp_err_t first_err;
    bool joined; /* the thread has been joined */
} bench_worker_t;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
    struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    bench_worker_t *w = opaque;
    if (m->err) {
        if (!w->first_err)
            w->first_err = m->err;
        atomic_fetch_add(&w->failed, 1);
        return;
    }
    int64_t t = (int64_t)(intptr_t)m->_private;
    int64_t lat = now_ns() - t;
    if (!w->cfg->e2e)
        st_cli_hist_record(w->hist, lat > 0 ? (uint64_t)lat : 0);
    atomic_fetch_add(&w->acked, 1);
}

static void *producer_main(void *arg)
{
    bench_worker_t *w = arg;
    const bench_cfg_t *c = w->cfg;
    uint8_t *payload = malloc((size_t)c->size + 8);
    for (int64_t i = 0; i < c->size; i++)
        payload[i] = (uint8_t)('a' + i % 26);
    double interval = w->rate > 0 ? 1e9 / w->rate : 0;
    for (int64_t i = 0; !st_cli_stop; i++) {
        if (w->count && i >= w->count)
            break;
        int64_t t = now_ns();
        if (w->deadline_ns && t >= w->deadline_ns)
            break;
        if (interval > 0) {
            int64_t intended = w->start_ns + (int64_t)(i * interval);
            if (intended > t) {
                rd_kafka_poll(w->rk, 0);
                sleep_until(intended);
            }
            t = intended;
        }
        if (c->e2e && c->size >= 8)
            memcpy(payload, &t, 8);
        int64_t rec = i * c->producers + w->index; /* over all producers */
        int32_t part = RD_KAFKA_PARTITION_UA;
        char key[24];
        size_t keylen = 0;
        if (c->partitioner == BENCH_ROUNDROBIN)
            part = (int32_t)(rec % c->nparts);
        else if (c->partitioner == BENCH_KEYED)
            keylen = (size_t)snprintf(key, sizeof(key), "k%" PRId64, rec % c->keys);
        for (;;) {
            rd_kafka_resp_err_t err =
                rd_kafka_producev(w->rk, RD_KAFKA_V_TOPIC(c->topic), RD_KAFKA_V_PARTITION(part),
                                  RD_KAFKA_V_KEY(keylen ? key : NULL, keylen),
                                  RD_KAFKA_V_VALUE(payload, (size_t)c->size),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                  RD_KAFKA_V_OPAQUE((void *)(intptr_t)t), RD_KAFKA_V_END);
            if (!err)
                break;
            if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL && !st_cli_stop) {
                rd_kafka_poll(w->rk, 1);
                continue;
            }
            if (!w->first_err)
                w->first_err = err;
            atomic_fetch_add(&w->failed, 1);
            break;
        }
        atomic_fetch_add(&w->sent, 1);
        rd_kafka_poll(w->rk, 0);
    }
    while (rd_kafka_outq_len(w->rk) > 0 && !st_cli_stop)
        rd_kafka_flush(w->rk, 100);
    free(payload);
    return NULL;
}

/* The e2e / consume side: reads from given start offsets until told or done. */
typedef struct bench_reader {
    pthread_t th;
    const bench_cfg_t *cfg;
    rd_kafka_t *rk;
    rd_kafka_queue_t *q;
    st_cli_hist_t *hist;
    int nparts;
    bool *eof;
    int64_t want;             /* stop after this many (0 = at the end of every partition) */
    _Atomic int64_t want_e2e; /* e2e: set once producers know how many were acked */
    _Atomic bool done;
    _Atomic uint64_t got, bytes;
    _Atomic int eofs; /* partitions at their end now */
    int64_t first_ns, last_ns;
    rd_kafka_resp_err_t err;
} bench_reader_t;

static void *reader_main(void *arg)
{
    bench_reader_t *r = arg;
    int eofs = 0;
    int64_t deadline =
        r->cfg->duration_ms && !r->cfg->e2e ? now_ns() + r->cfg->duration_ms * 1000000 : 0;
    while (!st_cli_stop && !atomic_load(&r->done)) {
        rd_kafka_message_t *m = rd_kafka_consume_queue(r->q, 100);
        int64_t t = now_ns();
        if (deadline && t >= deadline)
            break;
        if (m) {
            if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                if (m->partition >= 0 && m->partition < r->nparts && !r->eof[m->partition]) {
                    r->eof[m->partition] = true;
                    eofs++;
                }
            } else if (m->err) {
                if (m->err != RD_KAFKA_RESP_ERR__TRANSPORT && !r->err)
                    r->err = m->err;
            } else {
                if (!r->first_ns)
                    r->first_ns = t;
                r->last_ns = t;
                if (m->partition >= 0 && m->partition < r->nparts && r->eof[m->partition]) {
                    r->eof[m->partition] = false;
                    eofs--;
                }
                if (r->cfg->e2e && m->len >= 8) {
                    int64_t sent;
                    memcpy(&sent, m->payload, 8);
                    st_cli_hist_record(r->hist, t > sent ? (uint64_t)(t - sent) : 0);
                }
                atomic_fetch_add(&r->got, 1);
                atomic_fetch_add(&r->bytes, m->len);
            }
            rd_kafka_message_destroy(m);
            if (r->err)
                break;
        }
        atomic_store(&r->eofs, eofs);
        uint64_t got = atomic_load(&r->got);
        int64_t want_e2e = atomic_load(&r->want_e2e);
        if (r->want && (int64_t)got >= r->want)
            break;
        if (r->cfg->e2e && want_e2e >= 0 && (int64_t)got >= want_e2e)
            break;
        if (!r->cfg->e2e && eofs == r->nparts)
            break; /* consume: everything there is has been read */
    }
    atomic_store(&r->done, true);
    return NULL;
}

static rd_kafka_t *bench_producer(const bench_cfg_t *c, void *opaque)
{
    rd_kafka_conf_t *conf = st_cli_conf();
    if (!conf)
        return NULL;
    if (st_cli_conf_set(conf, "acks", c->acks) < 0 ||
        st_cli_conf_set(conf, "compression.codec", c->compression) < 0 ||
        (c->linger && st_cli_conf_set(conf, "linger.ms", c->linger) < 0) ||
        (c->batch && st_cli_conf_set(conf, "batch.size", c->batch) < 0) ||
        st_cli_conf_set(conf, "queue.buffering.max.messages", "1000000") < 0) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_opaque(conf, opaque);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    return st_cli_client(RD_KAFKA_PRODUCER, conf);
}

/* Makes sure the topic exists (creating it when missing); returns its partition count or -1. */
static int ensure_topic(rd_kafka_t *rk, const bench_cfg_t *c)
{
    const rd_kafka_metadata_t *md = st_cli_metadata(rk, NULL);
    if (!md)
        return -1;
    const rd_kafka_metadata_topic_t *t = st_cli_md_topic(md, c->topic);
    int n = t && !t->err ? t->partition_cnt : 0;
    rd_kafka_metadata_destroy(md);
    if (n > 0) {
        if (c->partitions && c->partitions != n)
            fprintf(stderr,
                    "strata: note: topic %s exists with %d partitions (not %" PRId64
                    "); using it as it is\n",
                    c->topic, n, c->partitions);
        return n;
    }
    char err[256];
    int want = c->partitions ? (int)c->partitions : 1;
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(c->topic, want, 1, err, sizeof(err));
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = st_cli_admin_options(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_CreateTopics(rk, &nt, 1, o, q);
    rd_kafka_event_t *ev =
        st_cli_admin_wait(q, RD_KAFKA_EVENT_CREATETOPICS_RESULT, "cannot create the bench topic");
    int rc = -1;
    if (ev) {
        size_t cnt;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
        rd_kafka_resp_err_t e = cnt == 1 ? rd_kafka_topic_result_error(res[0]) : 0;
        if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
            st_cli_report("cannot create the bench topic", e,
                          rd_kafka_topic_result_error_string(res[0]));
        else
            rc = want;
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return rc;
}

/* startup_s: consume only, seconds from start to the first message (< 0: not shown). */
static void print_summary(const bench_cfg_t *c, const char *mode, uint64_t msgs, uint64_t bytes,
                          uint64_t failed, double secs, const st_cli_hist_t *h, double startup_s)
{
    double mps = secs > 0 ? (double)msgs / secs : 0,
           mbs = secs > 0 ? (double)bytes / secs / 1e6 : 0;
    double ms = 1e6;
    /* The size reported is what the messages counted held on average (consume reads whatever
     * the topic holds, whatever --size says). */
    double avg = msgs ? (double)bytes / (double)msgs : (double)c->size;
    char size[32];
    if (avg == (double)(int64_t)avg)
        snprintf(size, sizeof(size), "%" PRId64, (int64_t)avg);
    else
        snprintf(size, sizeof(size), "%.1f", avg);
    if (c->json) {
        printf("{\"mode\":\"%s\",\"topic\":\"%s\",\"size\":%s,\"messages\":%" PRIu64
               ",\"bytes\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"seconds\":%.3f,"
               "\"msgs_per_sec\":%.1f,\"mb_per_sec\":%.3f,\"rate\":%.1f,\"producers\":%" PRId64
               ",\"acks\":\"%s\",\"partitions\":%d",
               mode, c->topic, size, msgs, bytes, failed, secs, mps, mbs, c->rate, c->producers,
               c->acks, c->nparts);
        if (strcmp(mode, "consume"))
            printf(",\"partitioner\":\"%s\"", partitioner_names[c->partitioner]);
        if (strcmp(mode, "consume") && c->partitioner == BENCH_KEYED)
            printf(",\"keys\":%" PRId64, c->keys);
        if (startup_s >= 0)
            printf(",\"first_message_seconds\":%.3f", startup_s);
        if (h && h->total)
            printf(",\"latency_ms\":{\"count\":%" PRIu64 ",\"mean\":%.3f,\"p50\":%.3f,"
                   "\"p95\":%.3f,\"p99\":%.3f,\"p99_9\":%.3f,\"max\":%.3f}",
                   h->total, st_cli_hist_mean(h) / ms, st_cli_hist_percentile(h, 50) / ms,
                   st_cli_hist_percentile(h, 95) / ms, st_cli_hist_percentile(h, 99) / ms,
                   st_cli_hist_percentile(h, 99.9) / ms, (double)h->max / ms);
        printf("}\n");
        return;
    }
    printf("%s: %" PRIu64 " messages of %s bytes%s in %.2f s%s\n", mode, msgs, size,
           avg == (double)(int64_t)avg ? "" : " on average", secs, failed ? " (some failed)" : "");
    if (strcmp(mode, "consume")) {
        printf("  partitions  %d, %s", c->nparts, partitioner_names[c->partitioner]);
        if (c->partitioner == BENCH_KEYED)
            printf(" over %" PRId64 " keys", c->keys);
        printf("\n");
    }
    printf("  throughput  %.1f msgs/s  %.2f MB/s\n", mps, mbs);
    if (failed)
        printf("  failed      %" PRIu64 "\n", failed);
    if (startup_s >= 0)
        printf("  first message after %.3f s\n", startup_s);
    if (h && h->total)
        printf("  latency ms  p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (mean %.3f%s)\n",
               st_cli_hist_percentile(h, 50) / ms, st_cli_hist_percentile(h, 95) / ms,
               st_cli_hist_percentile(h, 99) / ms, st_cli_hist_percentile(h, 99.9) / ms,
               (double)h->max / ms, st_cli_hist_mean(h) / ms,
               c->rate > 0 ? ", from intended send times" : "");
}

/* Starts a reader on every partition at `start` (an offset or ST_CLI_OFFSET_*). */
static int reader_start(bench_reader_t *r, const bench_cfg_t *c, int nparts, bool at_end)
{
    rd_kafka_conf_t *conf = st_cli_conf();
    if (!conf)
        return -1;
    if (st_cli_conf_set(conf, "enable.partition.eof", "true") < 0 ||
        st_cli_conf_set(conf, "fetch.wait.max.ms", "10") < 0) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    r->rk = st_cli_client(RD_KAFKA_CONSUMER, conf);
    if (!r->rk)
        return -1;
    r->cfg = c;
    r->nparts = nparts;
    r->eof = calloc((size_t)nparts, sizeof(bool));
    atomic_store(&r->want_e2e, -1);
    r->q = rd_kafka_queue_new(r->rk);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(r->rk, c->topic, NULL);
    for (int p = 0; p < nparts; p++) {
        int64_t start = RD_KAFKA_OFFSET_BEGINNING, lo, hi;
        if (at_end) {
            /* An explicit offset, so nothing produced after this point is skipped. */
            rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(r->rk, c->topic, p, &lo, &hi,
                                                                     (int)st_cli_time_left_ms());
            if (e) {
                st_cli_report("cannot read the end offsets", e, NULL);
                rd_kafka_topic_destroy(rkt);
                return -1;
            }
            start = hi;
        }
        rd_kafka_consume_start_queue(rkt, p, start, r->q);
    }
    rd_kafka_topic_destroy(rkt);
    return 0;
}

static void reader_stop(bench_reader_t *r)
{
    if (!r->rk)
        return;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(r->rk, r->cfg->topic, NULL);
    for (int p = 0; p < r->nparts; p++)
        rd_kafka_consume_stop(rkt, p);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_queue_destroy(r->q);
    st_cli_client_destroy(r->rk);
    free(r->eof);
}

static int run_bench(bench_cfg_t *c, const char *mode)
{
    int rc = ST_CLI_FAIL;
    rd_kafka_t *admin = st_cli_admin_client();
    if (!admin)
        return ST_CLI_FAIL;
    int nparts = ensure_topic(admin, c);
    st_cli_client_destroy(admin);
    if (nparts < 0)
        return ST_CLI_FAIL;
    c->nparts = nparts;
    if (!c->keys)
        c->keys = nparts;
    bool produce = strcmp(mode, "consume") != 0;
    bench_reader_t reader = {0};
    st_cli_hist_t *rhist = NULL;
    if (!produce || c->e2e) {
        rhist = malloc(sizeof(*rhist));
        st_cli_hist_init(rhist);
        reader.hist = rhist;
        reader.want = produce ? 0 : c->count;
        if (reader_start(&reader, c, nparts, c->e2e) < 0)
            goto reader_done;
        pthread_create(&reader.th, NULL, reader_main, &reader);
        /* e2e: produce only once the consumer is fetching (it has reached the end of every
         * partition), so its start-up is not counted as latency. */
        int64_t limit = now_ns() + st_cli_common.timeout_ms * 1000000;
        while (c->e2e && atomic_load(&reader.eofs) < nparts && !atomic_load(&reader.done) &&
               now_ns() < limit && !st_cli_stop) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    size_t nw = produce ? (size_t)c->producers : 0;
    bench_worker_t *ws = calloc(nw + 1, sizeof(*ws));
    /* Every producer connects and learns the topic's leaders before the clock starts, so
     * start-up is not charged to the first messages as latency (nor to the throughput). */
    for (size_t i = 0; i < nw; i++) {
        bench_worker_t *w = &ws[i];
        w->cfg = c;
        w->index = (int64_t)i;
        w->hist = malloc(sizeof(*w->hist));
        st_cli_hist_init(w->hist);
        w->count = c->count ? c->count / (int64_t)nw + ((int64_t)i < c->count % (int64_t)nw) : 0;
        w->rate = c->rate / (double)nw;
        w->rk = bench_producer(c, w);
        const rd_kafka_metadata_t *wmd = w->rk ? st_cli_metadata(w->rk, c->topic) : NULL;
        if (!wmd) {
            st_cli_stop = 1;
            if (w->rk)
                st_cli_client_destroy(w->rk);
            free(w->hist);
            nw = i;
            break;
        }
        rd_kafka_metadata_destroy(wmd);
    }
    int64_t start = now_ns();
    for (size_t i = 0; i < nw; i++) {
        bench_worker_t *w = &ws[i];
        w->start_ns = start;
        w->deadline_ns = c->duration_ms ? start + c->duration_ms * 1000000 : 0;
        pthread_create(&w->th, NULL, producer_main, w);
    }
    /* Progress, once a second, until every worker and the reader are done. */
    uint64_t last = 0, last_bytes = 0;
    int64_t tick = start, producers_done_ns = 0;
    for (;;) {
        bool running = false;
        uint64_t acked = 0, sent = 0, failed = 0;
        for (size_t i = 0; i < nw; i++) {
            if (!ws[i].joined && pthread_tryjoin_np(ws[i].th, NULL) == 0)
                ws[i].joined = true;
            running |= !ws[i].joined;
            acked += atomic_load(&ws[i].acked);
            sent += atomic_load(&ws[i].sent);
            failed += atomic_load(&ws[i].failed);
        }
        int64_t t = now_ns();
        if (!running && c->e2e) {
            atomic_store(&reader.want_e2e, (int64_t)acked);
            /* Give the consumer --timeout to catch up, then stop it and report the gap. */
            if (!producers_done_ns)
                producers_done_ns = t;
            else if (t - producers_done_ns > st_cli_common.timeout_ms * 1000000)
                atomic_store(&reader.done, true);
        }
        if (reader.rk && !atomic_load(&reader.done))
            running = true;
        if (!running)
            break;
        if (t - tick >= 1000000000) {
            uint64_t cur = produce ? acked : atomic_load(&reader.got);
            uint64_t cur_bytes = produce ? acked * (uint64_t)c->size : atomic_load(&reader.bytes);
            double el = (double)(t - start) / 1e9;
            fprintf(stderr, "%6.1fs  %10" PRIu64 " msgs  %10.1f msgs/s  %8.2f MB/s%s", el, cur,
                    (double)(cur - last) / ((double)(t - tick) / 1e9),
                    (double)(cur_bytes - last_bytes) / ((double)(t - tick) / 1e9) / 1e6,
                    produce ? "" : "\n");
            if (produce)
                fprintf(stderr, "  in flight %" PRIu64 "%s\n", sent - acked - failed,
                        failed ? "  FAILURES" : "");
            last = cur;
            last_bytes = cur_bytes;
            tick = t;
        }
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
        if (st_cli_stop && reader.rk)
            atomic_store(&reader.done, true);
    }
    int64_t end = now_ns();
    st_cli_hist_t *hist = malloc(sizeof(*hist));
    st_cli_hist_init(hist);
    uint64_t acked = 0, failed = 0;
    rd_kafka_resp_err_t first_err = 0;
    for (size_t i = 0; i < nw; i++) {
        st_cli_hist_merge(hist, ws[i].hist);
        acked += atomic_load(&ws[i].acked);
        failed += atomic_load(&ws[i].failed);
        if (!first_err)
            first_err = ws[i].first_err;
        free(ws[i].hist);
        st_cli_client_destroy(ws[i].rk);
    }
    free(ws);
    if (reader.rk)
        pthread_join(reader.th, NULL);
    double secs = (double)(end - start) / 1e9;
    if (!strcmp(mode, "produce")) {
        print_summary(c, mode, acked, acked * (uint64_t)c->size, failed, secs, hist, -1);
    } else if (!strcmp(mode, "consume")) {
        double rs =
            reader.last_ns > reader.first_ns ? (double)(reader.last_ns - start) / 1e9 : secs;
        double first = reader.first_ns ? (double)(reader.first_ns - start) / 1e9 : 0;
        print_summary(c, mode, atomic_load(&reader.got), atomic_load(&reader.bytes), 0, rs, NULL,
                      first);
    } else {
        print_summary(c, mode, atomic_load(&reader.got),
                      atomic_load(&reader.got) * (uint64_t)c->size, failed, secs, rhist, -1);
        if (atomic_load(&reader.got) < acked) {
            st_cli_errorf("the consumer saw %" PRIu64 " of %" PRIu64 " acknowledged messages",
                          atomic_load(&reader.got), acked);
            failed++;
        }
    }
    if (first_err)
        st_cli_report("messages failed", first_err, NULL);
    if (reader.err)
        st_cli_report("the consumer failed", reader.err, NULL);
    rc = failed || reader.err || st_cli_stop ? ST_CLI_FAIL : ST_CLI_OK;
    free(hist);
reader_done:
    reader_stop(&reader);
    free(rhist);
    return rc;
}

static int bench_main(int argc, char **argv, const char *mode)
{
    char usage[320];
    snprintf(usage, sizeof(usage),
             "bench %s [--topic T] [--partitions N] [--size B] [--count N | --duration D] "
             "[--rate R] [--producers P] [--acks A] [--linger MS] [--batch B] "
             "[--compression C]%s [--json]",
             mode,
             strcmp(mode, "consume") ? " [--partitioner sticky|roundrobin|keyed] [--keys N]" : "");
    bench_cfg_t c = {.topic = "strata-bench",
                     .size = 100,
                     .producers = 1,
                     .acks = "all",
                     .compression = "none",
                     .e2e = !strcmp(mode, "e2e")};
    const char *size_s = NULL, *dur_s = NULL, *batch_s = NULL, *part_s = "sticky";
    int64_t rate = 0;
    st_cli_strlist_t pos = {0};
    const st_cli_opt_t opts[] = {
        {'t', "topic", ST_CLI_OPT_STR, &c.topic, "T", "topic (default strata-bench)"},
        {'p', "partitions", ST_CLI_OPT_INT, &c.partitions, "N",
         "partitions when the topic must be created (default 1)"},
        {'s', "size", ST_CLI_OPT_STR, &size_s, "BYTES", "message size, e.g. 100, 1k (100)"},
        {'n', "count", ST_CLI_OPT_INT, &c.count, "N",
         "messages in all (default 100000 unless --duration)"},
        {'d', "duration", ST_CLI_OPT_STR, &dur_s, "DURATION", "run this long, e.g. 30s"},
        {'r', "rate", ST_CLI_OPT_INT, &rate, "MSGS/S",
         "target rate in all; latency then counts from intended send times"},
        {'P', "producers", ST_CLI_OPT_INT, &c.producers, "N", "producer threads (1)"},
        {'a', "acks", ST_CLI_OPT_STR, &c.acks, "0|1|all", "acks (all)"},
        {'l', "linger", ST_CLI_OPT_STR, &c.linger, "MS", "linger.ms (librdkafka's default)"},
        {'B', "batch", ST_CLI_OPT_STR, &batch_s, "BYTES", "batch.size (librdkafka's default)"},
        {'z', "compression", ST_CLI_OPT_STR, &c.compression, "CODEC",
         "none, gzip, snappy, lz4, zstd (none)"},
        {0, "partitioner", ST_CLI_OPT_STR, &part_s, "HOW",
         "sticky (no key; default), roundrobin (partition i % N), keyed (key k<i % keys>)"},
        {0, "keys", ST_CLI_OPT_INT, &c.keys, "N",
         "keyed: distinct keys (default: the topic's partition count)"},
        {'j', "json", ST_CLI_OPT_FLAG, &c.json, NULL, "print the summary as one JSON object"},
        ST_CLI_OPT_END,
    };
    int rc = st_cli_parse(argc, argv, usage,
                          "Measures throughput and latency with librdkafka clients. Progress "
                          "on stderr every\nsecond, the summary on stdout.",
                          opts, true, &pos, 0, 0);
    st_cli_strlist_fini(&pos);
    if (rc >= 0)
        return rc;
    if (size_s && (st_cli_parse_size(size_s, &c.size) < 0 || c.size < 0 || c.size > 100 << 20))
        return st_cli_usage_error(usage, "--size wants a byte count up to 100m, not '%s'", size_s);
    if (c.e2e && c.size < 8)
        return st_cli_usage_error(usage, "e2e needs --size of at least 8 (the send time rides in "
                                         "the payload)");
    if (dur_s && (st_cli_parse_duration_ms(dur_s, &c.duration_ms) < 0 || c.duration_ms <= 0))
        return st_cli_usage_error(usage, "--duration wants a duration like 30s, not '%s'", dur_s);
    if (c.count < 0 || rate < 0 || c.producers < 1 || c.producers > 256 || c.partitions < 0)
        return st_cli_usage_error(usage, "counts, rates and producers must be positive");
    if (!c.count && !c.duration_ms && strcmp(mode, "consume"))
        c.count = 100000;
    if (strcmp(c.acks, "0") && strcmp(c.acks, "1") && strcmp(c.acks, "all") && strcmp(c.acks, "-1"))
        return st_cli_usage_error(usage, "--acks must be 0, 1 or all");
    int64_t b;
    if (batch_s) {
        if (st_cli_parse_size(batch_s, &b) < 0 || b < 1 || b > INT32_MAX)
            return st_cli_usage_error(usage, "--batch wants a byte count, not '%s'", batch_s);
        static char bbuf[24];
        snprintf(bbuf, sizeof(bbuf), "%" PRId64, b);
        c.batch = bbuf;
    }
    c.partitioner = -1;
    for (int i = 0; i < (int)(sizeof(partitioner_names) / sizeof(partitioner_names[0])); i++)
        if (!strcmp(part_s, partitioner_names[i]))
            c.partitioner = i;
    if (c.partitioner < 0)
        return st_cli_usage_error(
            usage, "--partitioner wants sticky, roundrobin or keyed, not '%s'", part_s);
    if (!strcmp(mode, "consume") && (c.partitioner != BENCH_STICKY || c.keys))
        return st_cli_usage_error(usage, "--partitioner and --keys are for producing");
    if (c.keys < 0 || (c.keys && c.partitioner != BENCH_KEYED))
        return st_cli_usage_error(usage, "--keys wants a positive count, with --partitioner keyed");
    c.rate = (double)rate;
    return run_bench(&c, mode);
}

int st_cli_bench_produce(int argc, char **argv)
{
    return bench_main(argc, argv, "produce");
}

int st_cli_bench_consume(int argc, char **argv)
{
    return bench_main(argc, argv, "consume");
}

int st_cli_bench_e2e(int argc, char **argv)
{
    return bench_main(argc, argv, "e2e");
}
