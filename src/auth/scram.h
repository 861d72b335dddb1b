/*
 * scram.h — SASL mechanisms: SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) and PLAIN
 * (RFC 4616) on the server side, the salted credentials both are checked against, and SCRAM's
 * client side (st_scram_client_t: a broker authenticating to another broker).
 *
 * A credential is what the broker keeps of a password (RFC 5802 §3): the salt, the iteration
 * count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
 * HMAC(SaltedPassword, "Server Key"), SaltedPassword = PBKDF2-HMAC-H(password, salt, i). The
 * password itself is never kept. PLAIN derives the same keys from the password it is given
 * and compares StoredKey (constant time), so one credential list serves both, as Redpanda
 * does.
 *
 * A SCRAM exchange, one st_scram_t per connection:
 *
 *   client-first  "n,,n=user,r=cnonce"        st_scram_client_first: looks the user up
 *                                             (lookup callback), answers server-first
 *   server-first  "r=cnonce+snonce,s=salt,i=4096"
 *   client-final  "c=biws,r=nonce,p=proof"    st_scram_client_final: checks the channel
 *                                             binding, the nonce, the proof
 *   server-final  "v=signature"               only when the proof holds
 *
 * A user with no credential gets a server-first all the same (a salt and count derived from
 * the user name and a per-process secret), so a client cannot tell "no such user" from "wrong
 * password" (RFC 5802 §9). The gs2 header must be "n," or "y," (no channel binding) and name no
 * authzid other than the user itself, as Kafka.
 *
 * Threads: any. The one global is the per-process secret of the unknown users' salts, made
 * once (pthread_once).
 */
#ifndef ST_AUTH_SCRAM_H
#define ST_AUTH_SCRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kafka's ScramMechanism values (DescribeUserScramCredentials, AlterUserScramCredentials). */
typedef enum {
    ST_SCRAM_UNKNOWN = 0,
    ST_SCRAM_SHA_256 = 1,
    ST_SCRAM_SHA_512 = 2,
} st_scram_mech_t;

#define ST_SCRAM_KEY_MAX     64 /* SHA-512's digest */
#define ST_SCRAM_SALT_MAX    64
#define ST_SCRAM_USER_MAX    256
#define ST_SCRAM_MIN_ITER    4096  /* RFC 7677 §4, Kafka's minimum */
#define ST_SCRAM_MAX_ITER    16384 /* Kafka's maximum */
#define ST_SCRAM_NONCE_BYTES 24

typedef struct st_scram_cred {
    st_scram_mech_t mech;
    int32_t iterations;
    int salt_len;
    uint8_t salt[ST_SCRAM_SALT_MAX];
    uint8_t stored_key[ST_SCRAM_KEY_MAX]; /* digest length of mech */
    uint8_t server_key[ST_SCRAM_KEY_MAX];
} st_scram_cred_t;

/* The mechanism's SASL name ("SCRAM-SHA-256") and back (ST_SCRAM_UNKNOWN when none). */
const char *st_scram_mech_name(st_scram_mech_t m);
st_scram_mech_t st_scram_mech_parse(const char *name);
/* Digest length in bytes: 32 or 64 (0 for an unknown mechanism). */
int st_scram_key_len(st_scram_mech_t m);

/* A credential from a salted password (AlterUserScramCredentials sends that, not the
 * password). 0, or -1 (unknown mechanism, salted password of the wrong length, salt too
 * long). */
int st_scram_cred_from_salted(st_scram_cred_t *c, st_scram_mech_t m, int32_t iterations,
                              const uint8_t *salt, int salt_len, const uint8_t *salted,
                              int salted_len);
/* A credential from a password: PBKDF2 with the given salt (NULL: a random 32-byte one). */
int st_scram_cred_from_password(st_scram_cred_t *c, st_scram_mech_t m, int32_t iterations,
                                const char *password, size_t pwlen, const uint8_t *salt,
                                int salt_len);
/* Whether password matches credential c (PBKDF2 with c's salt and count; constant-time). */
bool st_scram_cred_check(const st_scram_cred_t *c, const char *password, size_t pwlen);

/* Finds user's credential for mechanism m: 0 and *out filled, or -1 when none. */
typedef int (*st_scram_lookup_fn)(void *arg, const char *user, st_scram_mech_t m,
                                  st_scram_cred_t *out);

typedef enum {
    ST_SCRAM_WANT_FIRST, /* waiting for client-first */
    ST_SCRAM_WANT_FINAL, /* server-first sent, waiting for client-final */
    ST_SCRAM_DONE,       /* proof checked: user authenticated */
    ST_SCRAM_FAILED,
} st_scram_state_t;

typedef struct st_scram {
    st_scram_mech_t mech;
    st_scram_state_t state;
    bool known; /* the user has a credential (else the exchange fails at the proof) */
    char user[ST_SCRAM_USER_MAX];
    st_scram_cred_t cred;
    char *client_first_bare;         /* malloc'd: "n=user,r=cnonce" */
    char *server_first;              /* malloc'd */
    char nonce[160];                 /* cnonce + snonce */
    char gs2[ST_SCRAM_USER_MAX + 8]; /* the gs2 header, which client-final repeats (c=) */
} st_scram_t;

void st_scram_init(st_scram_t *s, st_scram_mech_t m);
void st_scram_fini(st_scram_t *s);

/* Handles client-first (len bytes). 0 and *out (malloc'd, *outlen bytes) the server-first, or
 * -1 with err (one line) when the message is malformed: the exchange failed. server_nonce:
 * NULL for a fresh random one (tests pass RFC 7677's to reproduce its exchange). */
int st_scram_client_first(st_scram_t *s, const char *msg, size_t len, st_scram_lookup_fn lookup,
                          void *arg, const char *server_nonce, char **out, size_t *outlen,
                          char *err, size_t errlen);
/* Handles client-final. 0 and *out the server-final (the user is authenticated: s->user), or
 * -1 with err (malformed, nonce mismatch, wrong proof, unknown user). */
int st_scram_client_final(st_scram_t *s, const char *msg, size_t len, char **out, size_t *outlen,
                          char *err, size_t errlen);

/* PLAIN (RFC 4616): "authzid\0authcid\0passwd". 0 with user and password pointing into msg
 * (not NUL-terminated: lengths given), or -1 when malformed or when an authzid other than the
 * user is asked for (Kafka's rule). */
int st_plain_parse(const char *msg, size_t len, const char **user, size_t *user_len,
                   const char **pass, size_t *pass_len);

/* The client side of one SCRAM exchange (the inter-broker client's, replica/conn.c):
 *
 *   st_scram_client_begin        -> client-first "n,,n=user,r=cnonce"
 *   st_scram_client_next(server-first "r=..,s=..,i=..") -> client-final "c=biws,r=..,p=proof"
 *   st_scram_client_verify(server-final "v=signature"): 0 when the server proved it knows the
 *       credential too
 *
 * The salted password is derived at st_scram_client_next and forgotten at _fini. */
typedef struct st_scram_client {
    st_scram_mech_t mech;
    char *client_first_bare; /* malloc'd: "n=user,r=cnonce" */
    char cnonce[ST_SCRAM_NONCE_BYTES * 2];
    uint8_t server_sig[ST_SCRAM_KEY_MAX]; /* expected in server-final */
    bool have_sig;
} st_scram_client_t;

/* Starts an exchange for user (the user name escaped as RFC 5802 §5.1 says): *out (malloc'd,
 * *outlen bytes) is client-first. 0, or -1 (unknown mechanism, out of memory). */
int st_scram_client_begin(st_scram_client_t *s, st_scram_mech_t m, const char *user, char **out,
                          size_t *outlen);
/* Answers server-first with client-final (*out malloc'd). 0, or -1 with err (malformed, a nonce
 * not extending ours, an iteration count outside Kafka's bounds). */
int st_scram_client_next(st_scram_client_t *s, const char *password, const char *msg, size_t len,
                         char **out, size_t *outlen, char *err, size_t errlen);
/* Checks server-final. 0, or -1 with err (an "e=" error from the server, a wrong signature). */
int st_scram_client_verify(st_scram_client_t *s, const char *msg, size_t len, char *err,
                           size_t errlen);
void st_scram_client_fini(st_scram_client_t *s);

/* Base64 (RFC 4648, with padding). encode: NUL-terminated out of at least 4*((n+2)/3)+1 bytes;
 * decode: bytes written, or -1 when malformed or longer than cap. */
void st_b64_encode(const uint8_t *in, size_t n, char *out);
int st_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap);

#endif
