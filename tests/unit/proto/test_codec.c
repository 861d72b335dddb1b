/*
 * Unit tests for the generated Kafka codecs, over every API and every version they claim:
 * fill -> encode -> decode -> encode gives the same bytes and the same formatted text, the
 * decoder consumes exactly what the encoder wrote, and every strict prefix of an encoding is
 * rejected (from an exact-size heap copy, so the sanitizer sees any read past the end).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"
#include "proto/kafka_gen.h"

typedef int (*fill_fn)(st_kp_fill_t *, int16_t, int16_t, void **);
typedef int (*enc_fn)(st_kwriter_t *, int16_t, int16_t, const void *);
typedef int (*dec_fn)(st_kreader_t *, int16_t, int16_t, void **);
typedef int (*fmt_fn)(st_buf_t *, int16_t, int16_t, const void *);

typedef struct {
    fill_fn fill;
    enc_fn enc;
    dec_fn dec;
    fmt_fn fmt;
    const char *what;
} side_t;

static const side_t sides[2] = {
    {st_kp_req_fill_any, st_kp_req_encode_any, st_kp_req_decode_any, st_kp_req_format, "req"},
    {st_kp_resp_fill_any, st_kp_resp_encode_any, st_kp_resp_decode_any, st_kp_resp_format, "resp"},
};

/* Encodes a filled message of (api, version) into out; returns the filled message. */
static void *fill_and_encode(const side_t *s, st_arena_t *arena, int16_t key, int16_t v, bool nulls,
                             st_buf_t *out)
{
    st_kp_fill_t f = {arena, 0, nulls};
    void *m = NULL;
    assert_int_equal(s->fill(&f, key, v, &m), 0);
    st_kwriter_t w;
    st_kwriter_init(&w, out);
    int rc = s->enc(&w, key, v, m);
    if (rc != 0)
        fail_msg("%s api %d v%d: encode failed %s", s->what, key, v, st_errname(rc));
    return m;
}

static void roundtrip_one(const side_t *s, int16_t key, int16_t v, bool nulls)
{
    st_arena_t arena;
    st_arena_init(&arena, 0);
    st_buf_t b1, b2, t1, t2;
    st_buf_init(&b1);
    st_buf_init(&b2);
    st_buf_init(&t1);
    st_buf_init(&t2);

    void *m1 = fill_and_encode(s, &arena, key, v, nulls, &b1);

    st_kreader_t r;
    st_kreader_init(&r, b1.data, b1.len, &arena);
    void *m2 = NULL;
    int rc = s->dec(&r, key, v, &m2);
    if (rc != 0)
        fail_msg("%s api %d v%d nulls=%d: decode failed %s", s->what, key, v, nulls,
                 st_errname(rc));
    assert_ptr_equal(r.p, r.end);

    st_kwriter_t w;
    st_kwriter_init(&w, &b2);
    assert_int_equal(s->enc(&w, key, v, m2), 0);
    assert_int_equal(b1.len, b2.len);
    assert_memory_equal(b1.data, b2.data, b1.len);

    assert_int_equal(s->fmt(&t1, key, v, m1), 0);
    assert_int_equal(s->fmt(&t2, key, v, m2), 0);
    st_buf_put_u8(&t1, 0);
    st_buf_put_u8(&t2, 0);
    assert_string_equal((char *)t1.data, (char *)t2.data);

    st_buf_fini(&b1);
    st_buf_fini(&b2);
    st_buf_fini(&t1);
    st_buf_fini(&t2);
    st_arena_fini(&arena);
}

/* Every API, every version, both directions, with values and with nulls. */
static void test_roundtrip_every_version(void **state)
{
    (void)state;
    int combos = 0;
    for (size_t i = 0; i < st_kp_apis_count; i++) {
        const st_kp_api_t *a = &st_kp_apis[i];
        for (int16_t v = a->min_version; v <= a->max_version; v++)
            for (int s = 0; s < 2; s++) {
                roundtrip_one(&sides[s], a->api_key, v, false);
                roundtrip_one(&sides[s], a->api_key, v, true);
                combos++;
            }
    }
    /* 48 APIs with 245 versions between them (kafka.schema), each in two directions. */
    assert_int_equal(st_kp_apis_count, 48);
    assert_int_equal(combos, 2 * 245);
}

/* Every strict prefix of every encoding is rejected as truncated or malformed. */
static void test_truncation_every_cut(void **state)
{
    (void)state;
    for (size_t i = 0; i < st_kp_apis_count; i++) {
        const st_kp_api_t *a = &st_kp_apis[i];
        for (int16_t v = a->min_version; v <= a->max_version; v++)
            for (int s = 0; s < 2; s++) {
                st_arena_t arena;
                st_arena_init(&arena, 0);
                st_buf_t b;
                st_buf_init(&b);
                fill_and_encode(&sides[s], &arena, a->api_key, v, false, &b);
                for (size_t cut = 0; cut < b.len; cut++) {
                    uint8_t *copy = malloc(cut ? cut : 1);
                    assert_non_null(copy);
                    memcpy(copy, b.data, cut);
                    st_arena_t da;
                    st_arena_init(&da, 4096);
                    st_kreader_t r;
                    st_kreader_init(&r, copy, cut, &da);
                    void *m = NULL;
                    int rc = sides[s].dec(&r, a->api_key, v, &m);
                    if (rc != ST_E_TRUNCATED && rc != ST_E_MALFORMED)
                        fail_msg("%s %s v%d cut %zu/%zu: rc %s", a->name, sides[s].what, v, cut,
                                 b.len, st_errname(rc));
                    st_arena_fini(&da);
                    free(copy);
                }
                st_buf_fini(&b);
                st_arena_fini(&arena);
            }
    }
}

/* Filled values really differ from defaults: a filled message never encodes like a default
 * one (so the round trip above is not comparing empty messages). */
static void test_fill_is_not_default(void **state)
{
    (void)state;
    st_arena_t arena;
    st_arena_init(&arena, 0);
    st_buf_t filled, plain;
    st_buf_init(&filled);
    st_buf_init(&plain);
    st_kp_metadata_resp_t def;
    st_kp_metadata_resp_init(&def);
    for (int16_t v = 0; v <= ST_KP_METADATA_MAX_VERSION; v++) {
        st_buf_clear(&filled);
        st_buf_clear(&plain);
        fill_and_encode(&sides[1], &arena, ST_KP_API_METADATA, v, false, &filled);
        st_kwriter_t w;
        st_kwriter_init(&w, &plain);
        assert_int_equal(st_kp_metadata_resp_encode(&w, v, &def), 0);
        assert_true(filled.len > plain.len);
    }
    st_buf_fini(&filled);
    st_buf_fini(&plain);
    st_arena_fini(&arena);
}

/* Versions outside an API's range and unknown API keys are refused everywhere. */
static void test_unsupported_versions(void **state)
{
    (void)state;
    st_arena_t arena;
    st_arena_init(&arena, 0);
    st_buf_t b;
    st_buf_init(&b);
    st_kwriter_t w;
    st_kwriter_init(&w, &b);
    static const uint8_t body[8];
    st_kreader_t r;
    void *m;
    for (size_t i = 0; i < st_kp_apis_count; i++) {
        const st_kp_api_t *a = &st_kp_apis[i];
        int16_t bad[2] = {(int16_t)(a->min_version - 1), (int16_t)(a->max_version + 1)};
        for (int k = 0; k < 2; k++) {
            st_kreader_init(&r, body, sizeof body, &arena);
            assert_int_equal(st_kp_req_decode_any(&r, a->api_key, bad[k], &m), ST_E_UNSUPPORTED);
            st_kreader_init(&r, body, sizeof body, &arena);
            assert_int_equal(st_kp_resp_decode_any(&r, a->api_key, bad[k], &m), ST_E_UNSUPPORTED);
        }
    }
    st_kreader_init(&r, body, sizeof body, &arena);
    assert_int_equal(st_kp_req_decode_any(&r, 999, 0, &m), ST_E_UNSUPPORTED);
    st_kp_metadata_req_t mr;
    st_kp_metadata_req_init(&mr);
    assert_int_equal(st_kp_metadata_req_encode(&w, 14, &mr), ST_E_UNSUPPORTED);
    assert_int_equal(st_kp_produce_req_decode(&r, 14, &(st_kp_produce_req_t){0}), ST_E_UNSUPPORTED);
    st_buf_fini(&b);
    st_arena_fini(&arena);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_every_version),
        cmocka_unit_test(test_truncation_every_cut),
        cmocka_unit_test(test_fill_is_not_default),
        cmocka_unit_test(test_unsupported_versions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
