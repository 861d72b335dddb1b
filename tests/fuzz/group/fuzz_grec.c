/*
 * Fuzz target: __consumer_offsets records as read back from disk at start-up. The input is
 * split into a key and a value (first byte: where; a second-byte bit makes the value a
 * tombstone); decoding must never crash, leak or read out of bounds. A record that decodes
 * is re-encoded and must decode to the same fields.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/assert.h"
#include "base/buf.h"
#include "group/records.h"

static void check_same_str(st_kstr_t a, st_kstr_t b)
{
    ST_ASSERT(a.len == b.len);
    ST_ASSERT(a.len <= 0 || memcmp(a.ptr, b.ptr, (size_t)a.len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t cut = data[0] % (size - 1);
    bool tomb = data[1] & 1;
    const uint8_t *key = data + 2;
    size_t key_len = cut < size - 2 ? cut : size - 2;
    const uint8_t *value = key + key_len;
    size_t value_len = size - 2 - key_len;
    st_arena_t arena;
    st_arena_init(&arena, 4096);
    st_grec_t rec;
    int rc = st_grec_decode(key, (int32_t)key_len, tomb ? NULL : value,
                            tomb ? -1 : (int32_t)value_len, &arena, &rec);
    if (rc == 0 && rec.kind == ST_GREC_OFFSET && !rec.tombstone) {
        st_buf_t k, v;
        st_buf_init(&k);
        st_buf_init(&v);
        st_grec_offset_key(&k, rec.group, rec.topic, rec.partition);
        st_grec_offset_value(&v, rec.offset, rec.leader_epoch, rec.metadata, rec.commit_timestamp,
                             rec.expire_timestamp);
        st_grec_t again;
        if (!k.oom && !v.oom &&
            st_grec_decode(k.data, (int32_t)k.len, v.data, (int32_t)v.len, &arena, &again) == 0) {
            check_same_str(rec.group, again.group);
            check_same_str(rec.topic, again.topic);
            ST_ASSERT(rec.partition == again.partition && rec.offset == again.offset);
            ST_ASSERT(again.expire_timestamp ==
                      (rec.expire_timestamp >= 0 ? rec.expire_timestamp : -1));
        }
        st_buf_fini(&k);
        st_buf_fini(&v);
    }
    st_arena_fini(&arena);
    return 0;
}
