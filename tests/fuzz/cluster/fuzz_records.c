/*
 * fuzz_records.c — metadata log records (cluster/records.h) from arbitrary bytes: entries
 * applied one after another to a metadata state (st_rec_apply), or a snapshot restored
 * (st_rec_restore). Must never crash, leak or trip a sanitizer, and after every input:
 *   - the state is consistent: topics sorted by name, each found by its name and by its id,
 *     brokers sorted by node id without repeats, every partition's replica lists in bounds;
 *   - its snapshot restores (st_rec_restore returns 0) into a fresh state whose snapshot is
 *     the same bytes.
 *
 * Input: byte 0: flags (bit 0: the rest is one snapshot instead of entries; bits 1-2: a
 * template the bytes are spliced into, so that mutations land deep inside valid records:
 * 0 none, 1 a topic record's partitions, 2 a broker record's fields, 3 a record list), then
 * the bytes; entries are separated by 0xff bytes (never in JSON text), at most 8.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/log.h"
#include "cluster/records.h"

static const char *const prefix[] = {
    "",
    "{\"v\":1,\"records\":[{\"type\":\"topic\",\"name\":\"t\",\"id\":"
    "\"000000000000000000000000000000a1\",\"internal\":false,\"rf\":3,\"configs\":"
    "{\"cleanup.policy\":\"compact\"},\"partitions\":[",
    "{\"v\":1,\"records\":[{\"type\":\"broker\",",
    "{\"v\":1,\"records\":[",
};
static const char *const suffix[] = {
    "",
    "]}]}",
    "}]}",
    "]}",
};

static void check_state(const st_md_t *md)
{
    for (int i = 0; i < md->ntopics; i++) {
        const st_md_topic_t *t = md->topics[i];
        ST_ASSERT(t && t->name);
        if (i > 0)
            ST_ASSERT(strcmp(md->topics[i - 1]->name, t->name) < 0);
        ST_ASSERT(st_md_find(md, t->name, (int32_t)strlen(t->name)) == t);
        ST_ASSERT(st_md_find_id(md, t->id) == t);
        ST_ASSERT(t->npartitions >= 0);
        for (int32_t p = 0; p < t->npartitions; p++) {
            const st_md_partition_t *part = &t->partitions[p];
            ST_ASSERT(part->nreplicas >= 0 && part->nreplicas <= ST_MD_MAX_REPLICAS);
            ST_ASSERT(part->nisr >= 0 && part->nisr <= ST_MD_MAX_REPLICAS);
            ST_ASSERT(part->nadding >= 0 && part->nadding <= ST_MD_MAX_REPLICAS);
            ST_ASSERT(part->nremoving >= 0 && part->nremoving <= ST_MD_MAX_REPLICAS);
        }
    }
    for (int i = 1; i < md->nbrokers; i++)
        ST_ASSERT(md->brokers[i - 1].node_id < md->brokers[i].node_id);
}

/* The state's snapshot restores into a fresh state with the same snapshot. */
static void check_round_trip(const st_md_t *md)
{
    size_t n1 = 0, n2 = 0;
    char *s1 = st_rec_snapshot(md, &n1, NULL);
    if (!s1)
        return; /* out of memory */
    st_md_t *again = st_md_new("other", 0);
    ST_ASSERT(again);
    ST_ASSERT(st_rec_restore(again, s1, n1) == 0);
    check_state(again);
    char *s2 = st_rec_snapshot(again, &n2, NULL);
    ST_ASSERT(s2);
    ST_ASSERT(n1 == n2 && memcmp(s1, s2, n1) == 0);
    free(s1);
    free(s2);
    st_md_unref(again);
}

/* data[0..len) inside template k, as an exact-size heap buffer (so ASan sees over-reads). */
static char *spliced(int k, const uint8_t *data, size_t len, size_t *out_len)
{
    size_t a = strlen(prefix[k]), b = strlen(suffix[k]);
    char *buf = malloc(a + len + b + 1);
    ST_ASSERT(buf);
    memcpy(buf, prefix[k], a);
    memcpy(buf + a, data, len);
    memcpy(buf + a + len, suffix[k], b);
    *out_len = a + len + b;
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool quiet;
    if (!quiet) {
        st_log_set_level(ST_LOG_FATAL); /* skipped records are logged: not news here */
        quiet = true;
    }
    if (size < 1)
        return 0;
    uint8_t flags = data[0];
    int k = (flags >> 1) & 3;
    const uint8_t *p = data + 1, *end = data + size;
    st_md_t *md = st_md_new("c", 0);
    ST_ASSERT(md);
    if (flags & 1) {
        size_t len;
        char *buf = spliced(k, p, (size_t)(end - p), &len);
        if (st_rec_restore(md, buf, len) == 0)
            check_state(md);
        free(buf);
    } else {
        for (int64_t index = 1; index <= 8 && p <= end; index++) {
            const uint8_t *sep = memchr(p, 0xff, (size_t)(end - p));
            const uint8_t *stop = sep ? sep : end;
            size_t len;
            char *buf = spliced(k, p, (size_t)(stop - p), &len);
            st_rec_apply(md, buf, len, index);
            free(buf);
            check_state(md);
            if (!sep)
                break;
            p = sep + 1;
        }
    }
    check_state(md);
    if (md->ntopics > 0 || md->nbrokers > 0)
        check_round_trip(md);
    st_md_unref(md);
    return 0;
}
