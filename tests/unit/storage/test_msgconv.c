/*
 * Unit tests for storage/msgconv: legacy MessageSets (magic 0 and 1, uncompressed and wrapped
 * with every codec those formats allowed, LZ4's magic 0 checksum quirk both ways) up to one
 * RecordBatch v2 and v2 batches back down; CRC, size, nesting and codec refusals; control
 * batches, fetch offsets and output limits on the way down; xxHash32 against liblz4's frames.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>
#include <lz4frame.h>
#include <zlib.h>

#include "base/err.h"
#include "storage/batch.h"
#include "storage/msgconv.h"
#include "tcodec.h"
#include "testutil.h"

#define MAXB (64 * 1048588)

/* One legacy message appended to b (its CRC right); returns its offset in b. */
static size_t lm_put(st_buf_t *b, int64_t offset, int magic, int attr, int64_t ts, const char *key,
                     const void *val, int32_t vlen)
{
    size_t at = b->len;
    int32_t klen = key ? (int32_t)strlen(key) : -1;
    size_t size = (magic ? 22 : 14) + (klen > 0 ? (size_t)klen : 0) + (vlen > 0 ? (size_t)vlen : 0);
    st_buf_put_be64(b, (uint64_t)offset);
    st_buf_put_be32(b, (uint32_t)size);
    size_t m = b->len;
    st_buf_put_be32(b, 0);
    st_buf_put_u8(b, (uint8_t)magic);
    st_buf_put_u8(b, (uint8_t)attr);
    if (magic)
        st_buf_put_be64(b, (uint64_t)ts);
    st_buf_put_be32(b, (uint32_t)klen);
    if (klen > 0)
        st_buf_append(b, key, (size_t)klen);
    st_buf_put_be32(b, (uint32_t)vlen);
    if (vlen > 0)
        st_buf_append(b, val, (size_t)vlen);
    st_put_be32(b->data + m, (uint32_t)crc32(0L, b->data + m + 4, (uInt)(size - 4)));
    return at;
}

/* Three inner messages (one null key, one null value) of magic m; offsets rel or absolute. */
static void lm_three(st_buf_t *b, int magic, int64_t first)
{
    lm_put(b, first, magic, 0, 1000, "k0", "v0", 2);
    lm_put(b, first + 1, magic, 0, 1001, NULL, "value-1", 7);
    lm_put(b, first + 2, magic, 0, 1002, "k2", NULL, -1);
}

/* A wrapper of codec variant v (tcodec.h) holding the set at inner. */
static void lm_wrap(st_buf_t *b, int magic, int variant, const st_buf_t *inner, int64_t offset)
{
    st_buf_t z;
    st_buf_init(&z);
    assert_int_equal(tc_compress(variant, inner->data, inner->len, &z), 0);
    lm_put(b, offset, magic, tc_codec[variant], 1002, NULL, z.data, (int32_t)z.len);
    st_buf_fini(&z);
}

typedef struct {
    int n;
    int64_t offset[8], ts[8];
    char key[8][16], val[8][16];
    int32_t klen[8], vlen[8];
} recs_t;

static int collect(void *arg, const st_batch_record_t *r)
{
    recs_t *c = arg;
    if (c->n == 8)
        return -1;
    int i = c->n++;
    c->offset[i] = r->offset;
    c->ts[i] = r->timestamp;
    c->klen[i] = r->key_len;
    c->vlen[i] = r->value_len;
    if (r->key_len > 0)
        memcpy(c->key[i], r->key, (size_t)(r->key_len < 15 ? r->key_len : 15));
    if (r->value_len > 0)
        memcpy(c->val[i], r->value, (size_t)(r->value_len < 15 ? r->value_len : 15));
    return 0;
}

/* Up-converts set, validates the batch as a client's, collects its records. */
static void up_check(const st_buf_t *set, int want_codec, int64_t want_ts0, recs_t *c)
{
    st_buf_t out;
    st_buf_init(&out);
    st_msgconv_up_info_t info;
    int rc = st_msgconv_up(set->data, set->len, MAXB, &out, &info);
    if (rc)
        fail_msg("up: %s (%s)", st_strerror(rc), info.why ? info.why : "");
    st_batch_hdr_t h;
    st_batch_verdict_t v;
    assert_int_equal(st_batch_validate_client(out.data, out.len, MAXB, &h, &v), 0);
    assert_int_equal(st_batch_compression(&h), want_codec);
    assert_int_equal(info.codec, want_codec);
    assert_int_equal(h.producer_id, -1);
    memset(c, 0, sizeof *c);
    assert_int_equal(st_batch_walk(out.data, out.len, MAXB, collect, c), 0);
    assert_int_equal(c->n, 3);
    assert_int_equal(info.records, 3);
    assert_string_equal(c->key[0], "k0");
    assert_string_equal(c->val[0], "v0");
    assert_int_equal(c->klen[1], -1);
    assert_string_equal(c->val[1], "value-1");
    assert_int_equal(c->vlen[2], -1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(c->offset[i], i);
        assert_int_equal(c->ts[i], want_ts0 < 0 ? -1 : want_ts0 + i);
    }
    assert_int_equal(h.max_timestamp, want_ts0 < 0 ? -1 : want_ts0 + 2);
    st_buf_fini(&out);
}

static void test_up_plain(void **state)
{
    (void)state;
    for (int magic = 0; magic <= 1; magic++) {
        st_buf_t set;
        st_buf_init(&set);
        lm_three(&set, magic, 0);
        assert_int_equal(st_msgconv_magic(set.data, set.len), magic);
        recs_t c;
        up_check(&set, 0, magic ? 1000 : -1, &c);
        st_buf_fini(&set);
    }
}

static void test_up_wrapped_every_codec(void **state)
{
    (void)state;
    const int variants[] = {TC_GZIP, TC_SNAPPY_RAW, TC_SNAPPY_XERIAL, TC_LZ4, TC_LZ4_CHECKED};
    for (int magic = 0; magic <= 1; magic++)
        for (size_t k = 0; k < sizeof variants / sizeof variants[0]; k++) {
            st_buf_t inner, set;
            st_buf_init(&inner);
            st_buf_init(&set);
            lm_three(&inner, magic, magic ? 0 : 40); /* magic 1 relative, magic 0 absolute */
            lm_wrap(&set, magic, variants[k], &inner, magic ? 2 : 42);
            recs_t c;
            up_check(&set, tc_codec[variants[k]], magic ? 1000 : -1, &c);
            st_buf_fini(&inner);
            st_buf_fini(&set);
        }
}

/* librdkafka and Kafka write magic 0 LZ4 with the broken header checksum; both it and a
 * correct one are read (Kafka ignores the byte under magic 0), and a frame made by liblz4
 * carries xxHash32(descriptor) >> 8 as its checksum. */
static void test_up_lz4_magic0_quirk(void **state)
{
    (void)state;
    st_buf_t inner, z;
    st_buf_init(&inner);
    st_buf_init(&z);
    lm_three(&inner, 0, 0);
    assert_int_equal(tc_lz4(inner.data, inner.len, &z, 0), 0);
    assert_int_equal(z.data[6], (st_msgconv_xxh32(z.data + 4, 2, 0) >> 8) & 0xff);
    uint8_t broken = (uint8_t)((st_msgconv_xxh32(z.data, 6, 0) >> 8) & 0xff);
    assert_int_not_equal(broken, z.data[6]);
    for (int b = 0; b < 2; b++) {
        if (b)
            z.data[6] = broken;
        st_buf_t set;
        st_buf_init(&set);
        lm_put(&set, 2, 0, ST_CODEC_LZ4, -1, NULL, z.data, (int32_t)z.len);
        recs_t c;
        up_check(&set, ST_CODEC_LZ4, -1, &c);
        /* magic 1 is held to the real checksum */
        st_buf_clear(&set);
        st_buf_t inner1;
        st_buf_init(&inner1);
        lm_three(&inner1, 1, 0);
        st_buf_t z1;
        st_buf_init(&z1);
        assert_int_equal(tc_lz4(inner1.data, inner1.len, &z1, 0), 0);
        if (b)
            z1.data[6] = (uint8_t)((st_msgconv_xxh32(z1.data, 6, 0) >> 8) & 0xff);
        lm_put(&set, 2, 1, ST_CODEC_LZ4, 1002, NULL, z1.data, (int32_t)z1.len);
        st_buf_t out;
        st_buf_init(&out);
        assert_int_equal(st_msgconv_up(set.data, set.len, MAXB, &out, NULL), b ? ST_E_CORRUPT : 0);
        st_buf_fini(&out);
        st_buf_fini(&z1);
        st_buf_fini(&inner1);
        st_buf_fini(&set);
    }
    /* xxHash32 reference values */
    assert_int_equal(st_msgconv_xxh32((const uint8_t *)"", 0, 0), 0x02CC5D05u);
    st_buf_fini(&inner);
    st_buf_fini(&z);
}

static int up_err(const st_buf_t *set, const char **why)
{
    st_buf_t out;
    st_buf_init(&out);
    st_msgconv_up_info_t info;
    int rc = st_msgconv_up(set->data, set->len, MAXB, &out, &info);
    assert_int_equal(out.len, 0);
    st_buf_fini(&out);
    if (why)
        *why = info.why;
    return rc;
}

static void test_up_refusals(void **state)
{
    (void)state;
    st_buf_t set, inner;
    st_buf_init(&set);
    st_buf_init(&inner);
    const char *why;

    /* a flipped bit in a value: CRC mismatch */
    lm_three(&set, 1, 0);
    set.data[set.len - 20] ^= 1;
    assert_int_equal(up_err(&set, &why), ST_E_CORRUPT);
    assert_non_null(strstr(why, "CRC"));

    /* a truncated set */
    st_buf_clear(&set);
    lm_three(&set, 0, 0);
    set.len -= 3;
    assert_int_equal(up_err(&set, NULL), ST_E_CORRUPT);
    set.len = 5;
    assert_int_equal(up_err(&set, NULL), ST_E_CORRUPT);
    set.len = 0;
    assert_int_equal(up_err(&set, NULL), ST_E_MALFORMED);

    /* an inner message with a bad CRC */
    st_buf_clear(&set);
    lm_three(&inner, 1, 0);
    inner.data[inner.len - 1] ^= 0x40;
    lm_wrap(&set, 1, TC_GZIP, &inner, 2);
    assert_int_equal(up_err(&set, NULL), ST_E_CORRUPT);

    /* nested compression */
    st_buf_clear(&set);
    st_buf_clear(&inner);
    st_buf_t deep;
    st_buf_init(&deep);
    lm_three(&deep, 1, 0);
    lm_wrap(&inner, 1, TC_GZIP, &deep, 2);
    lm_wrap(&set, 1, TC_GZIP, &inner, 2);
    assert_int_equal(up_err(&set, NULL), ST_E_MALFORMED);
    st_buf_fini(&deep);

    /* inner magic unlike the wrapper's */
    st_buf_clear(&set);
    st_buf_clear(&inner);
    lm_three(&inner, 0, 0);
    lm_wrap(&set, 1, TC_SNAPPY_XERIAL, &inner, 2);
    assert_int_equal(up_err(&set, NULL), ST_E_MALFORMED);

    /* zstd is a magic 2 codec */
    st_buf_clear(&set);
    st_buf_clear(&inner);
    lm_three(&inner, 1, 0);
    lm_wrap(&set, 1, TC_ZSTD, &inner, 2);
    assert_int_equal(up_err(&set, NULL), ST_E_UNSUPPORTED);

    /* a wrapper whose bytes are not its codec's; an empty one; a null value */
    st_buf_clear(&set);
    lm_put(&set, 0, 1, ST_CODEC_GZIP, 5, NULL, "not gzip at all", 15);
    assert_int_equal(up_err(&set, NULL), ST_E_CORRUPT);
    st_buf_clear(&set);
    st_buf_clear(&inner);
    lm_wrap(&set, 1, TC_GZIP, &inner, 0);
    assert_int_equal(up_err(&set, NULL), ST_E_MALFORMED);
    st_buf_clear(&set);
    lm_put(&set, 0, 1, ST_CODEC_SNAPPY, 5, NULL, NULL, -1);
    assert_int_equal(up_err(&set, NULL), ST_E_MALFORMED);
    for (int magic = 0; magic <= 1; magic++) { /* an empty compressed value (found by fuzzing) */
        st_buf_clear(&set);
        lm_put(&set, 0, magic, ST_CODEC_LZ4, 5, NULL, "", 0);
        assert_int_equal(up_err(&set, NULL), ST_E_CORRUPT);
    }

    /* magic 2 inside a legacy set, and a key length past the message */
    st_buf_clear(&set);
    lm_three(&set, 1, 0);
    set.data[16] = 2;
    st_put_be32(set.data + 12,
                (uint32_t)crc32(0L, set.data + 16, (uInt)(st_be32(set.data + 8) - 4)));
    assert_int_equal(up_err(&set, NULL), ST_E_MALFORMED);
    st_buf_clear(&set);
    lm_three(&set, 0, 0);
    st_put_be32(set.data + 18, 1000);
    st_put_be32(set.data + 12,
                (uint32_t)crc32(0L, set.data + 16, (uInt)(st_be32(set.data + 8) - 4)));
    assert_int_equal(up_err(&set, NULL), ST_E_CORRUPT);

    /* a bomb: decompression past max_out */
    st_buf_clear(&set);
    st_buf_clear(&inner);
    static uint8_t big[1 << 20];
    lm_put(&inner, 0, 1, 0, 1, NULL, big, (int32_t)sizeof big);
    lm_wrap(&set, 1, TC_GZIP, &inner, 0);
    st_buf_t out;
    st_buf_init(&out);
    assert_int_equal(st_msgconv_up(set.data, set.len, 4096, &out, NULL), ST_E_TOO_LARGE);
    assert_int_equal(st_msgconv_up(set.data, set.len, 2 << 20, &out, NULL), 0);
    st_buf_fini(&out);

    st_buf_fini(&set);
    st_buf_fini(&inner);
}

/* A parsed legacy message, for the down tests. */
typedef struct {
    int64_t offset;
    int magic, attr;
    int64_t ts;
    const uint8_t *key, *val;
    int32_t klen, vlen;
    size_t size; /* with the log overhead */
} lmsg_t;

/* Parses the message at p (n bytes), checking its CRC. */
static int lm_parse(const uint8_t *p, size_t n, lmsg_t *m)
{
    if (n < 12)
        return -1;
    uint32_t size = st_be32(p + 8);
    if (size + 12 > n)
        return -1;
    const uint8_t *q = p + 12;
    if ((uint32_t)crc32(0L, q + 4, size - 4) != st_be32(q))
        return -2;
    m->offset = (int64_t)st_be64(p);
    m->magic = q[4];
    m->attr = q[5];
    size_t at = 6;
    m->ts = -1;
    if (m->magic == 1) {
        m->ts = (int64_t)st_be64(q + 6);
        at = 14;
    }
    m->klen = (int32_t)st_be32(q + at);
    m->key = q + at + 4;
    at += 4 + (m->klen > 0 ? (size_t)m->klen : 0);
    m->vlen = (int32_t)st_be32(q + at);
    m->val = q + at + 4;
    at += 4 + (m->vlen > 0 ? (size_t)m->vlen : 0);
    if (at != size)
        return -3;
    m->size = 12 + size;
    return 0;
}

/* Three records at offsets base.. as a v2 batch with codec variant (-1: none), appended to b. */
static void v2_three(st_buf_t *b, int variant, int64_t base)
{
    st_buf_t set, inner;
    st_buf_init(&set);
    st_buf_init(&inner);
    lm_three(&inner, 1, 0);
    if (variant < 0)
        st_buf_append(&set, inner.data, inner.len);
    else
        lm_wrap(&set, 1, variant, &inner, 2);
    size_t at = b->len;
    assert_int_equal(st_msgconv_up(set.data, set.len, MAXB, b, NULL), 0);
    st_batch_set_base_offset(b->data + at, base);
    st_buf_fini(&set);
    st_buf_fini(&inner);
}

static void test_down_every_codec(void **state)
{
    (void)state;
    const int variants[] = {-1, TC_GZIP, TC_SNAPPY_XERIAL, TC_LZ4};
    for (int magic = 0; magic <= 1; magic++)
        for (size_t k = 0; k < sizeof variants / sizeof variants[0]; k++) {
            st_buf_t in, out;
            st_buf_init(&in);
            st_buf_init(&out);
            v2_three(&in, variants[k], 100);
            v2_three(&in, variants[k], 103);
            st_msgconv_down_opts_t o = {(int8_t)magic, 101, 1 << 20, -1, MAXB, 0};
            st_msgconv_down_res_t res;
            assert_int_equal(st_msgconv_down(in.data, in.len, &o, &out, &res), 0);
            assert_int_equal(res.records, 5); /* 100 is before the fetch offset */
            assert_int_equal(res.batches, 2);
            assert_int_equal(res.next_offset, 106);
            assert_false(res.cut);
            /* read it back the way a legacy consumer does: the set, or each wrapper's */
            st_buf_t up;
            st_buf_init(&up);
            assert_int_equal(st_msgconv_up(out.data, out.len, MAXB, &up, NULL), 0);
            recs_t c = {0};
            assert_int_equal(st_batch_walk(up.data, up.len, MAXB, collect, &c), 0);
            assert_int_equal(c.n, 5);
            assert_string_equal(c.val[0], "value-1");
            assert_int_equal(c.vlen[1], -1);
            assert_string_equal(c.key[2], "k0");
            for (int i = 0; i < 5; i++)
                assert_int_equal(c.ts[i], magic ? 1000 + (i + 1) % 3 : -1);
            /* offsets as legacy consumers compute them */
            const uint8_t *p = out.data;
            size_t n = out.len;
            int64_t want = 101;
            while (n > 0) {
                lmsg_t m;
                assert_int_equal(lm_parse(p, n, &m), 0);
                assert_int_equal(m.magic, magic);
                assert_int_equal(m.attr & 7, variants[k] < 0 ? 0 : tc_codec[variants[k]]);
                if (variants[k] < 0) {
                    assert_int_equal(m.offset, want++);
                } else {
                    /* the wrapper's offset is its last record's */
                    assert_int_equal(m.offset, want == 101 ? 102 : 105);
                    want = m.offset + 1;
                    if (tc_codec[variants[k]] == ST_CODEC_LZ4) {
                        uint8_t hc = (uint8_t)((st_msgconv_xxh32(m.val, 6, 0) >> 8) & 0xff);
                        uint8_t good = (uint8_t)((st_msgconv_xxh32(m.val + 4, 2, 0) >> 8) & 0xff);
                        assert_int_equal(m.val[6], magic == 0 ? hc : good);
                    }
                }
                p += m.size;
                n -= m.size;
            }
            assert_int_equal(want, 106);
            st_buf_fini(&up);
            st_buf_fini(&in);
            st_buf_fini(&out);
        }
}

/* Magic 1 inner offsets are relative to the wrapper; a LogAppendTime batch carries its time. */
static void test_down_magic1_wrapper_layout(void **state)
{
    (void)state;
    st_buf_t in, out;
    st_buf_init(&in);
    st_buf_init(&out);
    v2_three(&in, TC_GZIP, 500);
    st_batch_set_log_append_time(in.data, in.len, 777777);
    st_msgconv_down_opts_t o = {1, 0, 1 << 20, -1, MAXB, 0};
    st_msgconv_down_res_t res;
    assert_int_equal(st_msgconv_down(in.data, in.len, &o, &out, &res), 0);
    lmsg_t w;
    assert_int_equal(lm_parse(out.data, out.len, &w), 0);
    assert_int_equal(w.offset, 502);
    assert_int_equal(w.attr, ST_CODEC_GZIP | ST_MSGCONV_ATTR_LOG_TIME);
    assert_int_equal(w.ts, 777777);
    assert_int_equal(w.klen, -1);
    st_codec_reader_t *r;
    assert_int_equal(st_codec_reader_create(ST_CODEC_GZIP, w.val, (size_t)w.vlen, 1 << 20, &r), 0);
    uint8_t plain[4096];
    int got = st_codec_read(r, plain, sizeof plain);
    assert_true(got > 0);
    st_codec_reader_destroy(r);
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        lmsg_t m;
        assert_int_equal(lm_parse(plain + at, (size_t)got - at, &m), 0);
        assert_int_equal(m.offset, i);
        assert_int_equal(m.ts, 777777);
        assert_int_equal(m.attr, ST_MSGCONV_ATTR_LOG_TIME);
        at += m.size;
    }
    assert_int_equal(at, (size_t)got);
    st_buf_fini(&in);
    st_buf_fini(&out);
}

static void test_down_control_zstd_limits(void **state)
{
    (void)state;
    st_buf_t in, out;
    st_buf_init(&in);
    st_buf_init(&out);
    st_msgconv_down_res_t res;

    /* a transaction marker between two batches is skipped */
    v2_three(&in, -1, 0);
    size_t at = in.len;
    uint8_t *m = st_buf_extend(&in, ST_BATCH_CONTROL_SIZE);
    st_batch_control_build(m, 7, 0, true, 1, 5000);
    st_batch_set_base_offset(in.data + at, 3);
    v2_three(&in, -1, 4);
    st_msgconv_down_opts_t o = {1, 0, 1 << 20, -1, MAXB, 0};
    assert_int_equal(st_msgconv_down(in.data, in.len, &o, &out, &res), 0);
    assert_int_equal(res.records, 6);
    assert_int_equal(res.next_offset, 7);
    /* only the marker: nothing at all */
    st_buf_clear(&out);
    o.fetch_offset = 3;
    assert_int_equal(st_msgconv_down(in.data + at, ST_BATCH_CONTROL_SIZE, &o, &out, &res), 0);
    assert_int_equal(out.len, 0);
    assert_int_equal(res.records, 0);

    /* the limit: whole messages, the first always; the cap cuts even the first */
    o.fetch_offset = 0;
    o.limit = 1;
    assert_int_equal(st_msgconv_down(in.data, in.len, &o, &out, &res), 0);
    assert_int_equal(res.records, 1);
    assert_true(res.cut);
    lmsg_t first;
    assert_int_equal(lm_parse(out.data, out.len, &first), 0);
    assert_int_equal(out.len, first.size);
    st_buf_clear(&out);
    o.limit = (int64_t)first.size * 2 + 3;
    assert_int_equal(st_msgconv_down(in.data, in.len, &o, &out, &res), 0);
    assert_true(res.records == 2 && res.cut && out.len <= (size_t)o.limit);
    st_buf_clear(&out);
    o.limit = 1;
    o.cap = 10;
    assert_int_equal(st_msgconv_down(in.data, in.len, &o, &out, &res), 0);
    assert_int_equal(out.len, 10);
    st_buf_clear(&out);

    /* a deadline passed: one batch, then a stop */
    o.cap = -1;
    o.limit = 1 << 20;
    o.deadline_ns = 1;
    assert_int_equal(st_msgconv_down(in.data, in.len, &o, &out, &res), 0);
    assert_int_equal(res.records, 3);
    assert_true(res.cut);
    assert_int_equal(res.next_offset, 3);
    st_buf_clear(&out);
    o.deadline_ns = 0;

    /* zstd: refused when first, a stop after converted data */
    st_buf_t z, zb;
    st_buf_init(&z);
    st_buf_init(&zb);
    st_buf_t recs;
    st_buf_init(&recs);
    tb_record(&recs, 0, 0, 5, 'z');
    assert_int_equal(tc_zstd(recs.data, recs.len, &z), 0);
    tc_wrap(&zb, ST_CODEC_ZSTD, z.data, z.len, 1);
    st_batch_set_base_offset(zb.data, 10);
    o = (st_msgconv_down_opts_t){0, 0, 1 << 20, -1, MAXB, 0};
    assert_int_equal(st_msgconv_down(zb.data, zb.len, &o, &out, &res), ST_E_UNSUPPORTED);
    assert_int_equal(out.len, 0);
    st_buf_t mixed;
    st_buf_init(&mixed);
    v2_three(&mixed, -1, 7);
    st_buf_append(&mixed, zb.data, zb.len);
    assert_int_equal(st_msgconv_down(mixed.data, mixed.len, &o, &out, &res), 0);
    assert_int_equal(res.records, 3);
    assert_true(res.cut);
    /* a partial batch at the end of a read is left alone */
    st_buf_clear(&out);
    assert_int_equal(st_msgconv_down(mixed.data, mixed.len - 5, &o, &out, &res), 0);
    assert_int_equal(res.records, 3);
    st_buf_fini(&mixed);
    st_buf_fini(&recs);
    st_buf_fini(&z);
    st_buf_fini(&zb);
    st_buf_fini(&in);
    st_buf_fini(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_up_plain),
        cmocka_unit_test(test_up_wrapped_every_codec),
        cmocka_unit_test(test_up_lz4_magic0_quirk),
        cmocka_unit_test(test_up_refusals),
        cmocka_unit_test(test_down_every_codec),
        cmocka_unit_test(test_down_magic1_wrapper_layout),
        cmocka_unit_test(test_down_control_zstd_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
