/*
 * Unit tests for auth/: RFC 7677's SCRAM-SHA-256 exchange byte for byte (user "user",
 * password "pencil"), a wrong proof, a replayed or altered nonce, an unknown user that looks
 * like a known one until the proof, SCRAM-SHA-512 end to end with a client computed here,
 * credentials from a salted password, PLAIN parsing and checking against a credential, and
 * the client side (RFC 7677's exchange again, and client against server).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/scram.h"

static const char *rfc_client_first = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
static const char *rfc_snonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
static const char *rfc_server_first =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
static const char *rfc_client_final = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                      "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
static const char *rfc_server_final = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

typedef struct users {
    const char *name;
    st_scram_cred_t cred;
} users_t;

static int lookup(void *arg, const char *user, st_scram_mech_t m, st_scram_cred_t *out)
{
    users_t *u = arg;
    if (strcmp(user, u->name) != 0 || u->cred.mech != m)
        return -1;
    *out = u->cred;
    return 0;
}

static void rfc_user(users_t *u)
{
    uint8_t salt[32];
    int sl = st_b64_decode("W22ZaJ0SNY7soEsUEjb6gQ==", 24, salt, sizeof salt);
    assert_int_equal(sl, 16);
    u->name = "user";
    assert_int_equal(
        st_scram_cred_from_password(&u->cred, ST_SCRAM_SHA_256, 4096, "pencil", 6, salt, sl), 0);
}

static void first(st_scram_t *s, users_t *u, const char *msg, const char *snonce, char **out)
{
    size_t n;
    char err[128];
    assert_int_equal(
        st_scram_client_first(s, msg, strlen(msg), lookup, u, snonce, out, &n, err, sizeof err), 0);
    assert_int_equal(n, strlen(*out));
}

static void test_rfc7677_vector(void **state)
{
    (void)state;
    users_t u;
    rfc_user(&u);
    st_scram_t s;
    st_scram_init(&s, ST_SCRAM_SHA_256);
    char *out = NULL, err[128];
    size_t n;
    first(&s, &u, rfc_client_first, rfc_snonce, &out);
    assert_string_equal(out, rfc_server_first);
    free(out);
    assert_int_equal(st_scram_client_final(&s, rfc_client_final, strlen(rfc_client_final), &out, &n,
                                           err, sizeof err),
                     0);
    assert_string_equal(out, rfc_server_final);
    assert_int_equal(s.state, ST_SCRAM_DONE);
    assert_string_equal(s.user, "user");
    free(out);
    st_scram_fini(&s);
}

static void final_fails(const char *client_first, const char *snonce, const char *final, users_t *u,
                        const char *why)
{
    st_scram_t s;
    st_scram_init(&s, ST_SCRAM_SHA_256);
    char *out = NULL, err[128] = "";
    size_t n;
    first(&s, u, client_first, snonce, &out);
    free(out);
    out = NULL;
    assert_int_equal(st_scram_client_final(&s, final, strlen(final), &out, &n, err, sizeof err),
                     -1);
    assert_null(out);
    assert_int_equal(s.state, ST_SCRAM_FAILED);
    assert_non_null(strstr(err, why));
    st_scram_fini(&s);
}

static void test_bad_proof(void **state)
{
    (void)state;
    users_t u;
    rfc_user(&u);
    /* one bit of the proof changed */
    final_fails(rfc_client_first, rfc_snonce,
                "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVU=",
                &u, "invalid credentials");
    /* the right proof for another password: "pencil" salted for user "user" but stored "pen" */
    uint8_t salt[32];
    int sl = st_b64_decode("W22ZaJ0SNY7soEsUEjb6gQ==", 24, salt, sizeof salt);
    assert_int_equal(
        st_scram_cred_from_password(&u.cred, ST_SCRAM_SHA_256, 4096, "pen", 3, salt, sl), 0);
    final_fails(rfc_client_first, rfc_snonce, rfc_client_final, &u, "invalid credentials");
}

static void test_replayed_nonce(void **state)
{
    (void)state;
    users_t u;
    rfc_user(&u);
    /* the RFC's client-final replayed against an exchange with a fresh server nonce */
    final_fails(rfc_client_first, NULL, rfc_client_final, &u, "nonce");
    /* the client's nonce alone, without the server's part */
    final_fails(rfc_client_first, rfc_snonce, "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=AAAA", &u, "nonce");
    /* a channel-binding echo that differs from client-first */
    final_fails(rfc_client_first, rfc_snonce,
                "c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                &u, "channel binding");
}

static void test_fresh_nonces_differ(void **state)
{
    (void)state;
    users_t u;
    rfc_user(&u);
    st_scram_t a, b;
    st_scram_init(&a, ST_SCRAM_SHA_256);
    st_scram_init(&b, ST_SCRAM_SHA_256);
    char *oa, *ob;
    first(&a, &u, rfc_client_first, NULL, &oa);
    first(&b, &u, rfc_client_first, NULL, &ob);
    assert_string_not_equal(a.nonce, b.nonce);
    assert_true(strncmp(a.nonce, "rOprNGfwEbeRWgbNEkqO", 20) == 0);
    assert_true(strlen(a.nonce) > 40);
    free(oa);
    free(ob);
    st_scram_fini(&a);
    st_scram_fini(&b);
}

static void test_unknown_user(void **state)
{
    (void)state;
    users_t u;
    rfc_user(&u);
    st_scram_t s;
    st_scram_init(&s, ST_SCRAM_SHA_256);
    char *out;
    first(&s, &u, "n,,n=nobody,r=abcdefgh", "XYZ", &out);
    assert_false(s.known);
    assert_true(strncmp(out, "r=abcdefghXYZ,s=", 16) == 0);
    assert_non_null(strstr(out, ",i=4096"));
    /* the same salt when asked again: an unknown user is not told apart by a changing salt */
    st_scram_t s2;
    st_scram_init(&s2, ST_SCRAM_SHA_256);
    char *out2;
    first(&s2, &u, "n,,n=nobody,r=abcdefgh", "XYZ", &out2);
    assert_string_equal(out, out2);
    free(out);
    free(out2);
    st_scram_fini(&s);
    st_scram_fini(&s2);
    /* the mechanism must match the credential's too */
    st_scram_init(&s, ST_SCRAM_SHA_512);
    first(&s, &u, rfc_client_first, NULL, &out);
    assert_false(s.known);
    free(out);
    st_scram_fini(&s);
}

static void test_malformed_first(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "p=tls-unique,,n=user,r=abc", /* channel binding */
        "n,,n=,r=abc",                /* empty user */
        "n,,n=user",                  /* no nonce */
        "n,,n=user,r=",               /* empty nonce */
        "n,,n=us=4Fr,r=abc",          /* bad saslname escape */
        "n,a=other,n=user,r=abc",     /* another authzid */
        "n,,r=abc,n=user",            /* out of order */
    };
    users_t u;
    rfc_user(&u);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        st_scram_t s;
        st_scram_init(&s, ST_SCRAM_SHA_256);
        char *out = NULL, err[128];
        size_t n;
        assert_int_equal(st_scram_client_first(&s, bad[i], strlen(bad[i]), lookup, &u, NULL, &out,
                                               &n, err, sizeof err),
                         -1);
        assert_null(out);
        st_scram_fini(&s);
    }
    /* escapes decode; the authzid may repeat the user */
    st_scram_t s;
    st_scram_init(&s, ST_SCRAM_SHA_256);
    char *out;
    first(&s, &u, "n,a=a=2Cb,n=a=2Cb,r=abc", NULL, &out);
    assert_string_equal(s.user, "a,b");
    free(out);
    st_scram_fini(&s);
}

/* A SCRAM client, to run SHA-512 end to end: the proof for password over auth message am. */
static void client_proof(const EVP_MD *md, int kl, const char *pw, const uint8_t *salt, int sl,
                         int iter, const char *am, char *proof64)
{
    uint8_t salted[64], ck[64], sk[64], sig[64], proof[64];
    unsigned ol;
    PKCS5_PBKDF2_HMAC(pw, (int)strlen(pw), salt, sl, iter, md, kl, salted);
    HMAC(md, salted, kl, (const uint8_t *)"Client Key", 10, ck, &ol);
    EVP_Digest(ck, (size_t)kl, sk, &ol, md, NULL);
    HMAC(md, sk, kl, (const uint8_t *)am, strlen(am), sig, &ol);
    for (int i = 0; i < kl; i++)
        proof[i] = ck[i] ^ sig[i];
    st_b64_encode(proof, (size_t)kl, proof64);
}

static void test_sha512_exchange(void **state)
{
    (void)state;
    users_t u = {.name = "alice"};
    assert_int_equal(
        st_scram_cred_from_password(&u.cred, ST_SCRAM_SHA_512, 4096, "s3cret", 6, NULL, 0), 0);
    assert_int_equal(u.cred.salt_len, 32);
    st_scram_t s;
    st_scram_init(&s, ST_SCRAM_SHA_512);
    char *sf, *out, err[128], final[512], am[1024], proof64[100];
    size_t n;
    first(&s, &u, "n,,n=alice,r=clientnonce123", NULL, &sf);
    snprintf(final, sizeof final, "c=biws,r=%s", s.nonce);
    snprintf(am, sizeof am, "n=alice,r=clientnonce123,%s,%s", sf, final);
    client_proof(EVP_sha512(), 64, "s3cret", u.cred.salt, u.cred.salt_len, 4096, am, proof64);
    snprintf(final + strlen(final), sizeof final - strlen(final), ",p=%s", proof64);
    assert_int_equal(st_scram_client_final(&s, final, strlen(final), &out, &n, err, sizeof err), 0);
    assert_true(strncmp(out, "v=", 2) == 0);
    free(sf);
    free(out);
    st_scram_fini(&s);
}

static void test_cred_from_salted(void **state)
{
    (void)state;
    /* what AlterUserScramCredentials sends (the client salts) must give what the password gives */
    uint8_t salt[16] = "0123456789abcdef", salted[32];
    PKCS5_PBKDF2_HMAC("pencil", 6, salt, 16, 4096, EVP_sha256(), 32, salted);
    st_scram_cred_t a, b;
    assert_int_equal(st_scram_cred_from_salted(&a, ST_SCRAM_SHA_256, 4096, salt, 16, salted, 32),
                     0);
    assert_int_equal(st_scram_cred_from_password(&b, ST_SCRAM_SHA_256, 4096, "pencil", 6, salt, 16),
                     0);
    assert_memory_equal(a.stored_key, b.stored_key, 32);
    assert_memory_equal(a.server_key, b.server_key, 32);
    assert_true(st_scram_cred_check(&a, "pencil", 6));
    assert_false(st_scram_cred_check(&a, "pencil!", 7));
    assert_int_equal(st_scram_cred_from_salted(&a, ST_SCRAM_SHA_512, 4096, salt, 16, salted, 32),
                     -1); /* a SHA-512 salted password is 64 bytes */
    assert_int_equal(st_scram_mech_parse("SCRAM-SHA-512"), ST_SCRAM_SHA_512);
    assert_int_equal(st_scram_mech_parse("PLAIN"), ST_SCRAM_UNKNOWN);
}

static void test_plain(void **state)
{
    (void)state;
    const char *u, *p;
    size_t ul, pl;
    static const char m1[] = "\0alice\0secret";
    assert_int_equal(st_plain_parse(m1, sizeof m1 - 1, &u, &ul, &p, &pl), 0);
    assert_int_equal(ul, 5);
    assert_memory_equal(u, "alice", 5);
    assert_int_equal(pl, 6);
    assert_memory_equal(p, "secret", 6);
    static const char m2[] = "alice\0alice\0pw";
    assert_int_equal(st_plain_parse(m2, sizeof m2 - 1, &u, &ul, &p, &pl), 0);
    static const char *const bad[] = {"bob\0alice\0pw", "\0alice",       "\0\0pw",
                                      "\0alice\0",      "\0alice\0p\0w", "nonul"};
    static const size_t badlen[] = {12, 6, 4, 7, 11, 5};
    for (int i = 0; i < 6; i++)
        assert_int_equal(st_plain_parse(bad[i], badlen[i], &u, &ul, &p, &pl), -1);
}

static void test_b64(void **state)
{
    (void)state;
    uint8_t out[8];
    char enc[16];
    assert_int_equal(st_b64_decode("YQ==", 4, out, sizeof out), 1);
    assert_int_equal(st_b64_decode("YWI=", 4, out, sizeof out), 2);
    assert_int_equal(st_b64_decode("YWJj", 4, out, sizeof out), 3);
    assert_int_equal(st_b64_decode("YWJ", 3, out, sizeof out), -1);
    assert_int_equal(st_b64_decode("Y!Jj", 4, out, sizeof out), -1);
    st_b64_encode((const uint8_t *)"n,,", 3, enc);
    assert_string_equal(enc, "biws");
}

/* The client side reproduces RFC 7677's exchange when given its nonce. */
static void test_client_rfc7677(void **state)
{
    (void)state;
    st_scram_client_t c;
    char *out = NULL, err[128];
    size_t n;
    assert_int_equal(st_scram_client_begin(&c, ST_SCRAM_SHA_256, "user", &out, &n), 0);
    assert_int_equal(n, strlen(out));
    assert_memory_equal(out, "n,,n=user,r=", 12);
    free(out);
    snprintf(c.cnonce, sizeof c.cnonce, "rOprNGfwEbeRWgbNEkqO");
    free(c.client_first_bare);
    c.client_first_bare = strdup(rfc_client_first + 3);
    assert_int_equal(st_scram_client_next(&c, "pencil", rfc_server_first, strlen(rfc_server_first),
                                          &out, &n, err, sizeof err),
                     0);
    assert_string_equal(out, rfc_client_final);
    assert_int_equal(n, strlen(rfc_client_final));
    free(out);
    assert_int_equal(
        st_scram_client_verify(&c, rfc_server_final, strlen(rfc_server_final), err, sizeof err), 0);
    assert_int_not_equal(st_scram_client_verify(&c, "v=AAAA", 6, err, sizeof err), 0);
    assert_int_not_equal(st_scram_client_verify(&c, "e=invalid-proof", 15, err, sizeof err), 0);
    st_scram_client_fini(&c);
}

/* Client against server, both mechanisms, a user name to escape; a wrong password fails at
 * the server's proof check; a nonce that does not extend the client's is refused. */
static void test_client_server(void **state)
{
    (void)state;
    st_scram_mech_t mechs[] = {ST_SCRAM_SHA_256, ST_SCRAM_SHA_512};
    for (int m = 0; m < 2; m++)
        for (int wrong = 0; wrong < 2; wrong++) {
            users_t u = {.name = "br,o=ker"};
            assert_int_equal(
                st_scram_cred_from_password(&u.cred, mechs[m], 4096, "s3cret", 6, NULL, 0), 0);
            st_scram_client_t c;
            st_scram_t s;
            st_scram_init(&s, mechs[m]);
            char *cf, *sf, *fin, *sfin = NULL, err[128];
            size_t n;
            assert_int_equal(st_scram_client_begin(&c, mechs[m], u.name, &cf, &n), 0);
            assert_int_equal(
                st_scram_client_first(&s, cf, n, lookup, &u, NULL, &sf, &n, err, sizeof err), 0);
            assert_int_equal(st_scram_client_next(&c, wrong ? "nope" : "s3cret", sf, n, &fin, &n,
                                                  err, sizeof err),
                             0);
            int rc = st_scram_client_final(&s, fin, n, &sfin, &n, err, sizeof err);
            if (wrong) {
                assert_int_not_equal(rc, 0);
            } else {
                assert_int_equal(rc, 0);
                assert_string_equal(s.user, u.name);
                assert_int_equal(st_scram_client_verify(&c, sfin, n, err, sizeof err), 0);
            }
            free(cf);
            free(sf);
            free(fin);
            free(sfin);
            st_scram_client_fini(&c);
            st_scram_fini(&s);
        }
    st_scram_client_t c;
    char *cf, *fin = NULL, err[128];
    size_t n;
    assert_int_equal(st_scram_client_begin(&c, ST_SCRAM_SHA_256, "u", &cf, &n), 0);
    const char *bad = "r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    assert_int_not_equal(
        st_scram_client_next(&c, "pw", bad, strlen(bad), &fin, &n, err, sizeof err), 0);
    free(cf);
    st_scram_client_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc7677_vector),  cmocka_unit_test(test_bad_proof),
        cmocka_unit_test(test_replayed_nonce),  cmocka_unit_test(test_fresh_nonces_differ),
        cmocka_unit_test(test_unknown_user),    cmocka_unit_test(test_malformed_first),
        cmocka_unit_test(test_sha512_exchange), cmocka_unit_test(test_cred_from_salted),
        cmocka_unit_test(test_plain),           cmocka_unit_test(test_b64),
        cmocka_unit_test(test_client_rfc7677),  cmocka_unit_test(test_client_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
