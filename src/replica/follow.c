/* follow.c — a followed partition's decisions (follow.h): rules R1-R5 there. */
#include "replica/follow.h"

#include "proto/kerr.h"
#include "replica/wire.h"

void st_rfollow_init(st_rfollow_t *f, int32_t leader_epoch, int64_t durable_end, int32_t last_epoch,
                     int64_t log_start)
{
    f->leader_epoch = leader_epoch;
    f->fetch_offset = durable_end;
    f->last_epoch = last_epoch;
    f->log_start = log_start;
    f->hw_sent = -1;
    f->start_sent = -1;
    f->phase = ST_RF_FETCH;
}

static st_rfollow_action_t act(st_rfollow_do_t kind)
{
    return (st_rfollow_action_t){.kind = kind, .end_epoch = -1, .appended_epoch = -1};
}

/* An action the shard answers with a position. */
static st_rfollow_action_t job(st_rfollow_t *f, st_rfollow_action_t a)
{
    f->phase = ST_RF_JOB;
    return a;
}

st_rfollow_action_t st_rfollow_on_fetch(st_rfollow_t *f, const st_rfollow_answer_t *a)
{
    if (f->phase != ST_RF_FETCH)
        return act(ST_RF_DO_NOTHING);
    if (a->error == ST_KERR_OFFSET_OUT_OF_RANGE) {
        st_rfollow_action_t r;
        if (a->log_start_offset >= 0 && f->fetch_offset < a->log_start_offset) {
            r = act(ST_RF_DO_RESTART); /* R3: the leader's log starts past this one's end */
            r.offset = a->log_start_offset;
        } else if (a->high_watermark >= 0 && a->high_watermark < f->log_start) {
            r = act(ST_RF_DO_RESTART); /* R3: the leader's log ends before this one starts (an
                                          unclean election): start over at its hw, as Kafka */
            r.offset = a->high_watermark;
        } else if (a->high_watermark >= 0 && a->high_watermark < f->fetch_offset) {
            r = act(ST_RF_DO_TRUNCATE); /* R3: longer than the leader's, nothing to compare */
            r.offset = a->high_watermark;
        } else {
            return act(ST_RF_DO_BACKOFF); /* the leader's view is behind: ask again */
        }
        return job(f, r);
    }
    if (a->error == ST_KERR_FENCED_LEADER_EPOCH) {
        f->phase = ST_RF_STOPPED; /* R5 */
        return act(ST_RF_DO_STOP);
    }
    if (a->error)
        return act(ST_RF_DO_BACKOFF);
    if (a->diverging_epoch >= 0 && a->diverging_end >= 0) {
        /* R2: one round of the search; the next fetch carries what is left's latest epoch */
        st_rfollow_action_t r = act(ST_RF_DO_TRUNCATE);
        r.offset = a->diverging_end;
        r.end_epoch = a->diverging_epoch;
        return job(f, r);
    }
    int32_t last_epoch = -1;
    int64_t next = -1;
    size_t n = a->len > 0 && a->records
                   ? st_rwire_whole_batches(a->records, a->len, &last_epoch, &next)
                   : 0;
    if (n > 0) {
        st_rfollow_action_t r = act(ST_RF_DO_APPEND); /* R4 */
        r.len = n;
        r.hw = a->high_watermark;
        r.log_start = a->log_start_offset;
        r.appended_epoch = last_epoch;
        f->hw_sent = a->high_watermark;
        f->start_sent = a->log_start_offset;
        return job(f, r);
    }
    if (a->high_watermark != f->hw_sent || a->log_start_offset != f->start_sent ||
        a->log_start_offset > f->log_start) {
        st_rfollow_action_t r = act(ST_RF_DO_HW);
        r.hw = a->high_watermark;
        r.log_start = a->log_start_offset;
        f->hw_sent = a->high_watermark;
        f->start_sent = a->log_start_offset;
        /* a log start that moves is reported back (the leader's DeleteRecords waits for it) */
        return a->log_start_offset > f->log_start ? job(f, r) : r;
    }
    return act(ST_RF_DO_NOTHING);
}

void st_rfollow_on_position(st_rfollow_t *f, int err, int64_t durable_end, int32_t last_epoch,
                            int64_t log_start)
{
    if (durable_end >= 0) {
        f->fetch_offset = durable_end;
        f->last_epoch = last_epoch;
        f->log_start = log_start;
    }
    if (err) {
        /* the leader's answers are handed again from scratch */
        f->hw_sent = -1;
        f->start_sent = -1;
    }
    if (f->phase == ST_RF_JOB)
        f->phase = ST_RF_FETCH;
}
