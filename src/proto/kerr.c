/* kerr.c — names of Kafka wire error codes, and the code of a Strata error. */
#include "proto/kerr.h"

#include "base/err.h"

const char *st_kerr_name(int16_t code)
{
    switch (code) {
#define ST_KERR_CASE(name, c)                                                                      \
    case (c):                                                                                      \
        return #name;
        ST_KERRORS(ST_KERR_CASE)
#undef ST_KERR_CASE
    default:
        return "UNKNOWN_CODE";
    }
}

/* Strata's error codes (base/err.h, -errno) to the Kafka error a client acts on. */
int16_t st_kerr_from(int err)
{
    switch (err) {
    case 0:
        return ST_KERR_NONE;
    case ST_E_CORRUPT:
        return ST_KERR_CORRUPT_MESSAGE;
    case ST_E_TOO_LARGE:
        return ST_KERR_MESSAGE_TOO_LARGE;
    case ST_E_MALFORMED:
    case ST_E_NO_KEY:
        return ST_KERR_INVALID_RECORD;
    case ST_E_INVALID:
        return ST_KERR_INVALID_REQUEST;
    case ST_E_UNSUPPORTED:
        return ST_KERR_UNSUPPORTED_FOR_MESSAGE_FORMAT;
    case ST_E_OUT_OF_RANGE:
        return ST_KERR_OFFSET_OUT_OF_RANGE;
    case ST_E_NOT_FOUND:
        return ST_KERR_UNKNOWN_TOPIC_OR_PARTITION;
    case ST_E_CLOSED:
        return ST_KERR_NOT_LEADER_OR_FOLLOWER;
    case ST_E_TIMEOUT:
        return ST_KERR_REQUEST_TIMED_OUT;
    case ST_E_NOT_LEADER:
        return ST_KERR_NOT_LEADER_OR_FOLLOWER;
    case ST_E_FEW_REPLICAS:
        return ST_KERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND;
    default:
        return ST_KERR_KAFKA_STORAGE_ERROR; /* EIO, ENOSPC, EROFS, ... */
    }
}
