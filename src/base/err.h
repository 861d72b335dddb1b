/*
 * err.h — Strata's error codes.
 *
 * Functions return int: 0 for success, a negative errno (-EIO, -ENOSPC, ...) for an operating
 * system failure, or a code from the reserved band below for Strata's own failures. One X-macro
 * table generates the enum, the name and the message. Kafka wire error codes are a separate
 * enum (proto/kerr.h) and are what clients see.
 *
 * Any thread may call these functions.
 */
#ifndef ST_BASE_ERR_H
#define ST_BASE_ERR_H

#define ST_ERR_BASE (-10000)

/* X(name, message) */
#define ST_ERRORS(X)                                                                               \
    X(ST_E_CORRUPT, "corrupt data")                                                                \
    X(ST_E_MALFORMED, "malformed input")                                                           \
    X(ST_E_TRUNCATED, "input truncated")                                                           \
    X(ST_E_TOO_LARGE, "size over the configured limit")                                            \
    X(ST_E_UNSUPPORTED, "unsupported version or feature")                                          \
    X(ST_E_NOT_FOUND, "not found")                                                                 \
    X(ST_E_EXISTS, "already exists")                                                               \
    X(ST_E_INVALID, "invalid argument")                                                            \
    X(ST_E_CONFIG, "bad configuration")                                                            \
    X(ST_E_CLOSED, "closed")                                                                       \
    X(ST_E_AGAIN, "try again")                                                                     \
    X(ST_E_FULL, "queue full")                                                                     \
    X(ST_E_OUT_OF_RANGE, "offset out of range")                                                    \
    X(ST_E_TIMEOUT, "timed out")                                                                   \
    X(ST_E_NO_KEY, "record without a key in a compacted log")                                      \
    X(ST_E_NOT_LEADER, "not the active controller or leader")                                      \
    X(ST_E_FEW_REPLICAS, "fewer in-sync replicas than min.insync.replicas")

enum {
    ST_E__FIRST = ST_ERR_BASE,
#define ST_ERR_ENUM(name, msg) name,
    ST_ERRORS(ST_ERR_ENUM)
#undef ST_ERR_ENUM
        ST_E__LAST
};

/* Returns a static message for any code this project returns (errno or Strata's band). */
const char *st_strerror(int err);
/* Returns the code's name ("ST_E_CORRUPT", "EIO"), for logs and tests. */
const char *st_errname(int err);

#endif
