/* kerr.c — names of Kafka wire error codes. */
#include "proto/kerr.h"

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
