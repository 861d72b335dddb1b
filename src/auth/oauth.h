/*
 * oauth.h — SASL OAUTHBEARER on the server side: the client's message (RFC 7628), the JSON Web
 * Token it carries (RFC 7519, signed as RFC 7515 says) and the JSON Web Key Set (RFC 7517) its
 * signature is checked against, as Kafka's OAuthBearerValidatorCallbackHandler (KIP-768) and
 * OAuthBearerUnsecuredValidatorCallbackHandler check them.
 *
 *   client message   "n,[a=authzid],\x01auth=Bearer <jwt>\x01[key=value\x01]...\x01"
 *   <jwt>            base64url(header) "." base64url(claims) "." base64url(signature)
 *   header           {"alg":"RS256","kid":"k1",...}; unsecured: {"alg":"none"}, no signature
 *   claims           {"sub":"alice","exp":1700000000,"iat":...,"nbf":...,"iss":...,"aud":...}
 *
 * Checks (st_jwt_validate), each failure an "invalid_token" with a reason for the log:
 *   1. the token is at most ST_OAUTH_TOKEN_MAX bytes, three base64url parts, header and claims
 *      JSON objects;
 *   2. signed (a key set given): alg one of RS256/RS384/RS512 (RSA PKCS#1 v1.5) or ES256/ES384
 *      (ECDSA P-256/P-384, the signature r||s), never "none"; the key is the set's key of the
 *      header's kid, or without a kid every key fit for alg in turn; the signature verifies.
 *      Unsecured (no key set): alg "none" and an empty signature;
 *   3. exp present, and now < exp + skew; nbf, when present, <= now + skew; iat required when
 *      signed (jose4j's setRequireIssuedAt, as Kafka) and never later than now + skew;
 *   4. signed only: iss equal to the expected issuer and aud (a string or an array) naming one
 *      of the expected audiences, where those are set;
 *   5. the principal claim (sub by default) is a non-empty string.
 *
 * A key set holds RSA keys (n, e; 2048 to 8192 bits, jose4j's minimum) and EC keys (crv P-256
 * or P-384, x, y, the point checked to be on the curve) whose "use", when present, is "sig";
 * other keys are skipped. Nothing here trusts a length or a count from its input: sizes are
 * capped and every failure is a return code, never an assert.
 *
 * Threads: any; a st_jwks_t is immutable once parsed and may be read by many threads.
 */
#ifndef ST_AUTH_OAUTH_H
#define ST_AUTH_OAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_OAUTH_TOKEN_MAX     65536     /* bytes of a JWT accepted */
#define ST_OAUTH_JWKS_MAX      (1 << 20) /* bytes of a key set file */
#define ST_OAUTH_KEYS_MAX      64        /* keys kept from one set */
#define ST_OAUTH_PRINCIPAL_MAX 240

typedef struct st_jwks st_jwks_t;

/* Parses a JWKS document ({"keys":[...]}). 0 and *out (free with st_jwks_free), or -1 with one
 * line in err: not JSON, no keys array, or no usable key in it. */
int st_jwks_parse(const char *json, size_t len, st_jwks_t **out, char *err, size_t errlen);
/* st_jwks_parse of a file's contents (at most ST_OAUTH_JWKS_MAX bytes). */
int st_jwks_load(const char *path, st_jwks_t **out, char *err, size_t errlen);
/* The usable keys in the set. */
int st_jwks_count(const st_jwks_t *k);
void st_jwks_free(st_jwks_t *k);

/* The path of a file: URL ("file:/p", "file:///p", "file://localhost/p") into path. 0, or -1
 * when url is not one, or the path does not fit. */
int st_oauth_file_url_path(const char *url, char *path, size_t len);

/* What a token must satisfy (oauth.h's checks). */
typedef struct st_jwt_rules {
    const st_jwks_t *jwks;   /* the keys of a signed token; NULL: unsecured tokens (alg none) */
    const char *audience;    /* comma-separated expected audiences; NULL or "": any */
    const char *issuer;      /* the expected issuer; NULL or "": any */
    const char *sub_claim;   /* the principal's claim; NULL: "sub" */
    const char *scope_claim; /* the scopes' claim (kept for the log); NULL: "scope" */
    int64_t skew_ms;         /* clock skew allowed on exp, nbf and iat */
} st_jwt_rules_t;

/* What st_jwt_validate found. */
typedef struct st_jwt_result {
    char principal[ST_OAUTH_PRINCIPAL_MAX + 1]; /* the principal claim's value */
    int64_t exp_ms;                             /* exp, Unix ms */
    char scope[128];                            /* the scopes, space-separated (truncated) */
    char why[192];                              /* on failure: why, for the broker's log */
} st_jwt_result_t;

/* Checks token (len bytes) at now_ms (Unix ms). 0 with res filled, or -1 with res->why. */
int st_jwt_validate(const st_jwt_rules_t *rules, const char *token, size_t len, int64_t now_ms,
                    st_jwt_result_t *res);

/* Parses RFC 7628's client initial response: 0 with *token (*toklen bytes) the bearer token
 * and *authzid (*alen bytes, 0 when absent) pointing into msg, or -1 when malformed (no gs2
 * header "n,...,", no auth=Bearer pair, a pair without '=', two auth pairs, no final \x01, a
 * token with characters outside [-_.A-Za-z0-9]). */
int st_oauthbearer_parse(const uint8_t *msg, size_t len, const char **token, size_t *toklen,
                         const char **authzid, size_t *alen);

/* RFC 4648 §5 base64url, padding optional: bytes written, or -1 when malformed or longer than
 * cap. */
int st_b64url_decode(const char *in, size_t n, uint8_t *out, size_t cap);

#endif
