/* records.c — __transaction_state keys and values (layouts in records.h). */
#include "txn/records.h"

#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "proto/kreader.h"
#include "proto/kwriter.h"

#define TRY(e)                                                                                     \
    do {                                                                                           \
        if ((e) != 0)                                                                              \
            return ST_E_CORRUPT;                                                                   \
    } while (0)

static const char *const state_names[ST_TXN_NSTATES] = {
    "Empty",          "Ongoing",       "PrepareCommit", "PrepareAbort",
    "CompleteCommit", "CompleteAbort", "Dead",          "PrepareEpochFence",
};

const char *st_txn_state_name(int state)
{
    return state >= 0 && state < ST_TXN_NSTATES ? state_names[state] : NULL;
}

int st_txn_state_by_name(st_kstr_t name)
{
    for (int i = 0; i < ST_TXN_NSTATES; i++)
        if (st_kstr_eq(name, state_names[i]))
            return i;
    return -1;
}

/* v1's tagged fields (records.h); unknown tags are skipped. */
static int value_tags(st_kreader_t *r, st_trec_t *out)
{
    uint32_t n;
    TRY(st_kreader_uvarint(r, &n));
    for (uint32_t i = 0; i < n; i++) {
        uint32_t tag;
        st_kreader_t f;
        TRY(st_kreader_tag(r, &tag, &f));
        if (tag == 0)
            TRY(st_kreader_i64(&f, &out->previous_producer_id));
        else if (tag == 1)
            TRY(st_kreader_i64(&f, &out->next_producer_id));
        else if (tag == 2)
            TRY(st_kreader_i16(&f, &out->client_transaction_version));
    }
    return 0;
}

static int value_decode(st_kreader_t *r, st_trec_t *out)
{
    TRY(st_kreader_i16(r, &out->version));
    if (out->version < 0 || out->version > 1)
        return ST_E_UNSUPPORTED;
    bool flex = out->version >= 1;
    TRY(st_kreader_i64(r, &out->producer_id));
    TRY(st_kreader_i16(r, &out->producer_epoch));
    TRY(st_kreader_i32(r, &out->transaction_timeout_ms));
    TRY(st_kreader_i8(r, &out->transaction_status));
    TRY(st_kreader_count(r, flex, true, 3, &out->ntopics));
    if (out->ntopics > 0) {
        out->topics = st_kreader_alloc(r, (size_t)out->ntopics, sizeof *out->topics);
        if (!out->topics)
            return -ENOMEM;
    }
    for (int32_t i = 0; i < out->ntopics; i++) {
        st_trec_topic_t *t = &out->topics[i];
        TRY(st_kreader_str(r, flex, false, &t->topic));
        TRY(st_kreader_count(r, flex, false, 4, &t->npartitions));
        t->partitions = st_kreader_alloc(r, (size_t)t->npartitions + 1, sizeof *t->partitions);
        if (!t->partitions)
            return -ENOMEM;
        for (int32_t k = 0; k < t->npartitions; k++)
            TRY(st_kreader_i32(r, &t->partitions[k]));
        if (flex)
            TRY(st_kreader_skip_tags(r));
    }
    TRY(st_kreader_i64(r, &out->last_update_timestamp_ms));
    TRY(st_kreader_i64(r, &out->start_timestamp_ms));
    if (flex)
        TRY(value_tags(r, out));
    if (out->transaction_status < 0 || out->transaction_status >= ST_TXN_NSTATES)
        return ST_E_CORRUPT;
    return 0;
}

int st_trec_decode(const uint8_t *key, int32_t key_len, const uint8_t *value, int32_t value_len,
                   st_arena_t *arena, st_trec_t *out)
{
    memset(out, 0, sizeof *out);
    out->previous_producer_id = -1;
    out->next_producer_id = -1;
    out->ntopics = -1;
    if (!key || key_len < 2)
        return ST_E_CORRUPT;
    st_kreader_t r;
    st_kreader_init(&r, key, (size_t)key_len, arena);
    int16_t kv;
    TRY(st_kreader_i16(&r, &kv));
    if (kv != 0)
        return ST_E_UNSUPPORTED;
    TRY(st_kreader_str(&r, false, false, &out->transactional_id));
    if (value_len < 0 || !value) {
        out->tombstone = true;
        return 0;
    }
    st_kreader_init(&r, value, (size_t)value_len, arena);
    return value_decode(&r, out);
}

void st_trec_key(st_buf_t *b, st_kstr_t transactional_id)
{
    st_kwriter_t w;
    st_kwriter_init(&w, b);
    st_kwriter_i16(&w, 0);
    st_kwriter_str(&w, false, false, transactional_id);
}

void st_trec_value(st_buf_t *b, const st_trec_t *rec)
{
    bool flex = rec->version >= 1;
    st_kwriter_t w;
    st_kwriter_init(&w, b);
    st_kwriter_i16(&w, flex ? 1 : 0);
    st_kwriter_i64(&w, rec->producer_id);
    st_kwriter_i16(&w, rec->producer_epoch);
    st_kwriter_i32(&w, rec->transaction_timeout_ms);
    st_kwriter_i8(&w, rec->transaction_status);
    st_kwriter_count(&w, flex, true, rec->ntopics, rec->topics);
    for (int32_t i = 0; i < rec->ntopics; i++) {
        const st_trec_topic_t *t = &rec->topics[i];
        st_kwriter_str(&w, flex, false, t->topic);
        st_kwriter_count(&w, flex, false, t->npartitions, t->partitions);
        for (int32_t k = 0; k < t->npartitions; k++)
            st_kwriter_i32(&w, t->partitions[k]);
        if (flex)
            st_kwriter_uvarint(&w, 0);
    }
    st_kwriter_i64(&w, rec->last_update_timestamp_ms);
    st_kwriter_i64(&w, rec->start_timestamp_ms);
    if (flex) {
        uint32_t ntags = (rec->previous_producer_id != -1) + (rec->next_producer_id != -1) +
                         (rec->client_transaction_version != 0);
        st_kwriter_uvarint(&w, ntags);
        size_t at;
        if (rec->previous_producer_id != -1) {
            at = st_kwriter_tag_begin(&w, 0);
            st_kwriter_i64(&w, rec->previous_producer_id);
            st_kwriter_tag_end(&w, at);
        }
        if (rec->next_producer_id != -1) {
            at = st_kwriter_tag_begin(&w, 1);
            st_kwriter_i64(&w, rec->next_producer_id);
            st_kwriter_tag_end(&w, at);
        }
        if (rec->client_transaction_version != 0) {
            at = st_kwriter_tag_begin(&w, 2);
            st_kwriter_i16(&w, rec->client_transaction_version);
            st_kwriter_tag_end(&w, at);
        }
    }
}
